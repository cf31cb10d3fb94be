// Bundles (cache/bundle.cpp): the framing of untrusted bytes (magic of format 1 or 2, record lines, the end
// line's count and checksum, format 2's signature line), the signature check against a trusted key, then
// each record as a cache entry and the trust checks, as import reads them. split_bundle may only refuse with
// a CacheError; the records it returns lie inside the input; a signature over bytes the fuzzer made never
// verifies.
#include "cache/bundle.h"
#include "cache/entry.h"
#include "cache/signing.h"
#include "cache/trust.h"
#include "fuzz/fuzz_util.h"

namespace {

// The public key of tests/data/bundle_v2_signed.lkjit-bundle's signer (its seed here verifies with it).
const lkjit::cache::TrustedKeys& trusted() {
  static const lkjit::cache::TrustedKeys t = lkjit::cache::TrustedKeys::from_pem(
      "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAIwyNvNJ/JfCCyfCqJrCZ5KtltkC8t09juSZHy3P/k9M=\n-----END PUBLIC KEY-----\n",
      "fuzz key");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lkjit;  // NOLINT
  const std::string bytes = fuzz::text(data, size);
  fuzz::refusal_ok([&] {
    const cache::BundleFrame f = cache::split_bundle(bytes, "<fuzz>");
    fuzz::require(f.format == 1 || f.format == 2, "a known format");
    fuzz::require(f.signer.empty() == f.signature.empty(), "a signer comes with a signature");
    fuzz::require(f.signed_size <= bytes.size(), "the signed bytes lie inside the bundle");
    if (!f.signer.empty()) {
      fuzz::require(f.format == 2 && f.signature.size() == cache::kSignatureBytes, "a format 2 signature of 64 bytes");
      (void)trusted().verify("bundle", std::string_view(bytes).substr(0, f.signed_size), f.signature, f.signer);
    }
    for (const auto& r : f.entries) {
      fuzz::require(r.data() >= bytes.data() && r.data() + r.size() <= bytes.data() + bytes.size(), "record inside the bundle");
      std::string why;
      const auto e = cache::decode_entry(r, "", &why);
      fuzz::require(e || !why.empty(), "a refused entry says why");
      if (e && cache::is_key(e->meta.key)) (void)cache::entry_problem(*e);
    }
  });
  return 0;
}
