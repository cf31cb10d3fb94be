// Tuning databases (cache/tuning_db.cpp) from untrusted text: TuningDb::parse may only refuse with a
// CacheError. Properties: a parsed database serializes to text that parses to the same records, and a lookup
// of every record's own key finds it first, in the exact tier.
#include "cache/tuning_db.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lkjit;  // NOLINT
  const std::string text = fuzz::text(data, size);
  fuzz::refusal_ok([&] {
    const cache::TuningDb db = cache::TuningDb::parse(text, "<fuzz>");
    const std::string out = db.serialize();
    const cache::TuningDb back = cache::TuningDb::parse(out, "<serialized>");
    fuzz::require(back.records().size() == db.records().size(), "serialize keeps every record");
    fuzz::require(back.serialize() == out, "serialize is deterministic");
    for (size_t i = 0; i < db.records().size() && i < 16; ++i) {
      const auto& r = db.records()[i];
      const auto m = db.lookup({r.device, r.arch, r.sm_count, r.spec, r.bucket, r.B, r.C, r.H, r.W, r.stride});
      fuzz::require(!m.empty() && m.front().tier == cache::MatchTier::kExact, "a record's own key finds it");
    }
  });
  return 0;
}
