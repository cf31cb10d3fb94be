// A portable bundle of cache entries in one file, to ship prewarmed kernels to machines that share
// no cache directory. Layout (format 2):
//   "LKJIT-BUNDLE 2\n"
//   per entry: "entry <n>\n", the n bytes of the entry exactly as stored (cache/entry.h), "\n"
//   "end <count> <sha256 of every byte before this line>\n"
//   optional: "signature ed25519 <key id, 64 hex> <signature, 128 hex>\n", the signer's signature of
//   every byte before this line, in the context "bundle" (cache/signing.h)
// Format 1 is the same without the signature line; it still imports where no trusted keys are set.
// Import verifies the framing, the trailer and, with trusted keys, the signature before it publishes
// anything, so a damaged, truncated or untrusted bundle imports nothing. Then each entry stands on its own:
// one that does not decode (its own checksum, its key), is not what it says (cache/trust.h) or cannot be
// published is refused, named and counted, and the others are imported.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cache/store.h"

namespace lkjit::cache {

constexpr int kBundleFormatVersion = 2;
// The largest bundle import reads (it holds the whole file in memory).
constexpr uint64_t kMaxBundleBytes = uint64_t(4) << 30;

class Signer;
class TrustedKeys;

struct BundleStats {
  size_t entries = 0;   // in the bundle
  std::vector<std::string> added;  // import: keys of the entries newly published
  size_t present = 0;   // import: already in the cache
  std::vector<std::string> evicted;  // import: keys of added entries the size cap evicted at the end
  uint64_t bytes = 0;   // bundle size
  std::vector<std::string> skipped;  // export: keys missing or corrupt in the store, with why
  std::vector<std::string> refused;  // import: "entry N: why" / "entry N (KERNEL, key K..): why", one per entry not imported
  int format = kBundleFormatVersion;
  std::string signer;   // key id of a signature (checked when trusted keys were given, else only read)
};

// The framing of a bundle's bytes, checked but not trusted: the entries' bytes (views into the input), in
// order, after the magic, every record line, the end line's count and checksum and the signature line's
// form were checked. The signature itself is not verified here (import_bundle does, with trusted keys).
struct BundleFrame {
  int format = 0;                         // 1 or 2, from the magic
  std::vector<std::string_view> entries;  // each record's bytes, not decoded
  std::string signer;                     // key id (64 hex) of the signature line; "" if none
  std::string signature;                  // its 64 raw bytes
  size_t signed_size = 0;                 // the bytes the signature covers (all before its line)
};
// Throws CacheError "lkjit: error: ORIGIN: not a valid lkjit bundle: ...; nothing imported".
BundleFrame split_bundle(std::string_view bytes, const std::string& origin);

// Writes the entries of keys (every entry when keys is empty) to path, temp-then-rename, signed by
// signer when one is given. Error (kInvalidArgument) naming path and the reason when it cannot be written.
BundleStats export_bundle(const DiskStore& store, const std::vector<std::string>& keys, const std::string& path,
                          const Signer* signer = nullptr);
// Imports every entry that decodes, is what it says and can be published; the rest are in refused. Then
// prunes to the store's cap. Throws CacheError naming the bundle when its framing, checksum or (with trusted
// keys, non-empty: then a bundle must carry a valid signature by one of them) signature is bad: nothing
// imported. Error (kInvalidArgument) when the file cannot be read (missing, not a regular file, over
// kMaxBundleBytes).
BundleStats import_bundle(const DiskStore& store, const std::string& path, const TrustedKeys* trusted = nullptr);

// True for 64 lowercase hex digits (what make_key returns): never a path.
bool is_key(const std::string& s);

}  // namespace lkjit::cache
