// A portable bundle of cache entries in one file, to ship prewarmed kernels to machines that share
// no cache directory. Layout (format 2):
//   "LKJIT-BUNDLE 2\n"
//   per entry: "entry <n>\n", the n bytes of the entry exactly as stored (cache/entry.h), "\n"
//   "end <count> <sha256 of every byte before this line>\n"
//   optional: "signature ed25519 <key id, 64 hex> <signature, 128 hex>\n", the signer's signature of
//   every byte before this line, in the context "bundle" (cache/signing.h)
// Format 1 is the same without the signature line; it still imports where no trusted keys are set.
// Import verifies the framing, the trailer and, with trusted keys, the signature before it publishes
// anything, so a damaged or untrusted bundle imports nothing; then each entry must be what it says
// (cache/trust.h): those that are not are refused, named and counted, and the others imported.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cache/store.h"

namespace lkjit::cache {

constexpr int kBundleFormatVersion = 2;

class Signer;
class TrustedKeys;

struct BundleStats {
  size_t entries = 0;   // in the bundle
  std::vector<std::string> added;  // import: keys of the entries newly published
  size_t present = 0;   // import: already in the cache
  uint64_t bytes = 0;   // bundle size
  std::vector<std::string> skipped;  // export: keys missing or corrupt in the store, with why
  std::vector<std::string> refused;  // import: "entry N (KERNEL, key K..): REASON" for each entry not imported
  int format = kBundleFormatVersion;
  std::string signer;   // key id of a signature (checked when trusted keys were given, else only read)
};

// Writes the entries of keys (every entry when keys is empty) to path, temp-then-rename, signed by
// signer when one is given.
BundleStats export_bundle(const DiskStore& store, const std::vector<std::string>& keys, const std::string& path,
                          const Signer* signer = nullptr);
// Throws CacheError naming the bundle and what is wrong (nothing imported); Error (kInvalidArgument) when the
// file cannot be read. With trusted keys (non-empty), a bundle must carry a valid signature by one of them.
BundleStats import_bundle(const DiskStore& store, const std::string& path, const TrustedKeys* trusted = nullptr);

// True for 64 lowercase hex digits (what make_key returns): never a path.
bool is_key(const std::string& s);

}  // namespace lkjit::cache
