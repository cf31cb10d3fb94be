// Bundles (cache/bundle.cpp): the framing of untrusted bytes (magic, record lines, trailer count and
// checksum), then each record as a cache entry, as import reads them. split_bundle may only refuse with a
// CacheError; the records it returns lie inside the input.
#include "cache/bundle.h"
#include "cache/entry.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lkjit;  // NOLINT
  const std::string bytes = fuzz::text(data, size);
  fuzz::refusal_ok([&] {
    const auto records = cache::split_bundle(bytes, "<fuzz>");
    for (const auto& r : records) {
      fuzz::require(r.data() >= bytes.data() && r.data() + r.size() <= bytes.data() + bytes.size(), "record inside the bundle");
      std::string why;
      const auto e = cache::decode_entry(r, "", &why);
      fuzz::require(e || !why.empty(), "a refused entry says why");
      if (e) (void)cache::is_key(e->meta.key);
    }
  });
  return 0;
}
