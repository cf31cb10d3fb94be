// A portable bundle of cache entries in one file, to ship prewarmed kernels to machines that share
// no cache directory. Layout (format 1):
//   "LKJIT-BUNDLE 1\n"
//   per entry: "entry <n>\n", the n bytes of the entry exactly as stored (cache/entry.h), "\n"
//   "end <count> <sha256 of every byte before this line>\n"
// Import verifies the framing and the trailer's checksum before it publishes anything, so a damaged or
// truncated bundle imports nothing. Then each entry stands on its own: one that does not decode (its own
// checksum, its key) or cannot be published is refused with the reason, and the others are imported.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cache/store.h"

namespace lkjit::cache {

constexpr int kBundleFormatVersion = 1;
// The largest bundle import reads (it holds the whole file in memory).
constexpr uint64_t kMaxBundleBytes = uint64_t(4) << 30;

struct BundleStats {
  size_t entries = 0;   // in the bundle
  std::vector<std::string> added;  // import: keys of the entries newly published
  size_t present = 0;   // import: already in the cache
  std::vector<std::string> refused;  // import: "entry N: why" / "entry N (key K): why", one per entry not imported
  std::vector<std::string> evicted;  // import: keys of added entries the size cap evicted at the end
  uint64_t bytes = 0;   // bundle size
  std::vector<std::string> skipped;  // export: keys missing or corrupt in the store, with why
};

// The framing of a bundle's bytes: each entry's bytes, in order, after the magic, every record line and the
// trailer (count and checksum) were checked. Throws CacheError "lkjit: error: ORIGIN: not a valid lkjit
// bundle: ...; nothing imported". The entries themselves are not decoded here.
std::vector<std::string_view> split_bundle(std::string_view bytes, const std::string& origin);

// Writes the entries of keys (every entry when keys is empty) to path, temp-then-rename.
BundleStats export_bundle(const DiskStore& store, const std::vector<std::string>& keys, const std::string& path);
// Imports every entry that decodes and can be published; the rest are in refused. Then prunes to the store's
// cap. Throws CacheError naming the bundle when its framing or checksum is damaged (nothing imported);
// Error (kInvalidArgument) when the file cannot be read (missing, not a regular file, over kMaxBundleBytes).
BundleStats import_bundle(const DiskStore& store, const std::string& path);

// True for 64 lowercase hex digits (what make_key returns): never a path.
bool is_key(const std::string& s);

}  // namespace lkjit::cache
