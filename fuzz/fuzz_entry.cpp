// Cache entries (cache/entry.cpp) from untrusted bytes: decode_entry (whole-entry verification) and
// decode_entry_meta (the listing's header-only read). Properties: a decoded entry re-encodes to an entry
// that decodes to the same metadata and payload.
#include "cache/entry.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lkjit;  // NOLINT
  const std::string bytes = fuzz::text(data, size);
  std::string why;
  const auto meta = cache::decode_entry_meta(bytes.substr(0, cache::kMaxEntryHeadBytes), bytes.size(), &why);
  fuzz::require(meta || !why.empty(), "a refused header says why");
  why.clear();
  const auto e = cache::decode_entry(bytes, "", &why);
  fuzz::require(e || !why.empty(), "a refused entry says why");
  if (e) {
    fuzz::require(meta.has_value(), "an entry that decodes whole has a header that decodes");
    const std::string again = cache::encode_entry(e->meta, e->payload);
    const auto back = cache::decode_entry(again, e->meta.key, &why);
    fuzz::require(back && back->payload == e->payload && back->meta.kernel_name == e->meta.kernel_name &&
                      back->meta.arch == e->meta.arch && back->meta.options == e->meta.options,
                  "encode(decode(x)) decodes to the same entry");
    // The escaped key is printable: a message can never carry control bytes.
    for (char c : cache::escape_bytes(e->meta.key)) fuzz::require(c >= 0x20 && c < 0x7f, "escape_bytes is printable");
  }
  return 0;
}
