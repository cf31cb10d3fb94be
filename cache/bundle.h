// A portable bundle of cache entries in one file, to ship prewarmed kernels to machines that share
// no cache directory. Layout (format 1):
//   "LKJIT-BUNDLE 1\n"
//   per entry: "entry <n>\n", the n bytes of the entry exactly as stored (cache/entry.h), "\n"
//   "end <count> <sha256 of every byte before this line>\n"
// Import verifies everything (framing, trailer, each entry's own checksum and key) before it
// publishes anything, so a damaged bundle imports nothing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cache/store.h"

namespace lkjit::cache {

constexpr int kBundleFormatVersion = 1;

struct BundleStats {
  size_t entries = 0;   // in the bundle
  std::vector<std::string> added;  // import: keys of the entries newly published
  size_t present = 0;   // import: already in the cache
  uint64_t bytes = 0;   // bundle size
  std::vector<std::string> skipped;  // export: keys missing or corrupt in the store, with why
};

// Writes the entries of keys (every entry when keys is empty) to path, temp-then-rename.
BundleStats export_bundle(const DiskStore& store, const std::vector<std::string>& keys, const std::string& path);
// Throws CacheError naming the bundle and what is wrong; Error (kInvalidArgument) when the file cannot be read.
BundleStats import_bundle(const DiskStore& store, const std::string& path);

// True for 64 lowercase hex digits (what make_key returns): never a path.
bool is_key(const std::string& s);

}  // namespace lkjit::cache
