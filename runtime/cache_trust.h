// The signing key and trusted keys of this process, from LKJIT_CACHE_SIGNING_KEY and
// LKJIT_CACHE_TRUSTED_KEYS (cache/signing.h), loaded once per value of the variable.
#pragma once
#include <memory>

#include "cache/signing.h"

namespace lkjit::rt {

// nullptr when LKJIT_CACHE_SIGNING_KEY is unset. Throws CacheError for a key file that cannot be used
// (unreadable, readable by others, not an Ed25519 private key), naming the file.
std::shared_ptr<const cache::Signer> cache_signer();
// Empty when LKJIT_CACHE_TRUSTED_KEYS is unset. Throws CacheError naming a file that cannot be used.
std::shared_ptr<const cache::TrustedKeys> cache_trusted_keys();

}  // namespace lkjit::rt
