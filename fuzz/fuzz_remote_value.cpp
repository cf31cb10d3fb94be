// Values read from Redis (cache/remote_store.cpp): the header line ("LKJIT-REMOTE 1 <bytes> <key id|-> <sig|->"),
// the declared size against the value's, the signature against a trusted key, then the entry and its trust
// checks, as get_entry reads them; and the tuning decision inside a decision value. Nothing here may throw
// but a refusal; no connection is made (RemoteStore connects on first use, and decoding uses none).
#include <memory>

#include "cache/remote_decisions.h"
#include "cache/remote_store.h"
#include "cache/signing.h"
#include "cache/trust.h"
#include "cache/tuning_db.h"
#include "fuzz/fuzz_util.h"

namespace {

using namespace lkjit::cache;  // NOLINT

const RemoteStore& store(bool with_trust) {
  auto make = [](bool trust) {
    RedisEndpoint ep;
    ep.host = "127.0.0.1";
    ep.port = 1;  // never dialled
    std::shared_ptr<const TrustedKeys> t;
    if (trust)
      t = std::make_shared<const TrustedKeys>(TrustedKeys::from_pem(
          "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAIwyNvNJ/JfCCyfCqJrCZ5KtltkC8t09juSZHy3P/k9M=\n-----END PUBLIC KEY-----\n",
          "fuzz key"));
    return std::make_unique<RemoteStore>(ep, RemoteOptions{}, std::make_shared<Breaker>(30, RemoteLog{}, "fuzz"), nullptr, t);
  };
  static const auto plain = make(false), trusting = make(true);
  return with_trust ? *trusting : *plain;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace lkjit;  // NOLINT
  const std::string value = fuzz::text(data, size);
  std::string why;
  if (const auto h = parse_value_head(value, &why)) {
    fuzz::require(h->body_at <= value.size(), "the entry starts inside the value");
    fuzz::require(h->key_id.empty() == h->signature_hex.empty(), "a key id comes with a signature");
  } else {
    fuzz::require(!why.empty(), "a refused header says why");
  }
  fuzz::refusal_ok([&] {
    for (bool trust : {false, true}) {
      const std::string rkey = "lkjit:v1:entry:" + std::string(64, 'a');
      std::string signer, w;
      if (const auto entry = store(trust).decode_value(rkey, value, &signer, &w)) {
        if (auto e = decode_entry(*entry, "", &w)) (void)entry_problem(*e);
      }
      if (const auto text = store(trust).decode_value("lkjit:v1:decision:x", value, nullptr, &w))
        (void)TuningDb::parse(*text, "remote decision x");
    }
  });
  return 0;
}
