// prewarm's JSON inputs (tools/lkjit/prewarm_inputs.cpp) from untrusted text: the manifest, and the tuning
// database as prewarm reads it (kernel names out of records or entries). Both may only refuse with an
// lkjit::Error naming the file.
#include "fuzz/fuzz_util.h"
#include "tools/lkjit/prewarm_set.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lkjit;  // NOLINT
  const std::string text = fuzz::text(data, size);
  fuzz::refusal_ok([&] {
    tool::PrewarmSet set;
    bool archs = false, dtypes = false;
    tool::parse_manifest(text, "<fuzz>", &set, &archs, &dtypes);
    for (const auto& l : set.layers) fuzz::require(l.B >= 1 && l.C >= 1 && l.H >= 1 && l.W >= 1 && !l.op.empty(), "layers in range");
  });
  fuzz::refusal_ok([&] {
    std::vector<std::string> names;
    tool::parse_tuning_db(text, "<fuzz>", &names);
  });
  return 0;
}
