// The on-disk kernel cache, for tools and deployments: list, verify, prune and clear entries, see what
// went into a key, and move entries between machines as one bundle file. No GPU needed.
//
// Every entry read is checked before its cubin is handed out: checksums, its key recomputed from the inputs
// it records, and a payload that is a CUDA ELF for its arch defining its kernel; an entry that fails is
// removed (and rebuilt on next use).
//
// Layout: one file per entry, "<dir>/<key>.lkjit" (self-describing and checksummed), published by
// atomic rename; "<key>.lock" while some process compiles that key. The directory must be private
// to its owner (mode 0700 when lkjit creates it); one writable by others is refused (CacheError).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lkjit/spec.h"

namespace lkjit {

// What went into a kernel's content key: the digests of its texts, and the versions and options.
struct KeyInputsInfo {
  std::string key;  // hex SHA-256 (empty for a v1 entry's unrecorded inputs)
  std::string kernel_name;
  int arch = 0;
  std::string nvrtc_version;
  int generator_version = 0;
  std::vector<std::string> options;
  std::string source_sha256;
  std::map<std::string, std::string> header_sha256;  // embedded header name -> SHA-256
};

// The inputs compile_kernel would hash for (spec, tile) with this build and this NVRTC.
KeyInputsInfo kernel_key_inputs(const OpSpec& spec, const Tile& tile);
// One line per input that differs between two keys' inputs ("nvrtc: 12.8 -> 13.0", "header
// wtconv/fold.cuh: 1a2b.. -> 3c4d.."); empty when they agree.
std::vector<std::string> key_input_differences(const KeyInputsInfo& from, const KeyInputsInfo& to);

// LKJIT_CACHE_MAX_BYTES, default 1 GiB (0: no cap). Error (code kInvalidArgument) when malformed.
uint64_t cache_max_bytes();
// A size as LKJIT_CACHE_MAX_BYTES takes it: bytes with an optional K/M/G/T suffix (powers of 1024).
// what names the setting in the error message.
uint64_t parse_byte_size(const std::string& text, const char* what);

// Writes bytes to `path` through a uniquely named temp file in its folder (mode & ~umask), renamed over it:
// readers see the old file or the new one, never a part. The folder must exist. Throws CacheError naming
// the path and the OS message; the temp file is removed on failure. For files tools write (reports).
void write_file_atomically(const std::string& path, const std::string& bytes, unsigned mode = 0644);

struct CacheEntryInfo {
  std::string key;
  std::string path;
  KeyInputsInfo inputs;  // kernel name, arch, NVRTC, ... (valid when ok; key inputs from format 2)
  std::string spec;      // OpSpec::to_string() and tile
  int format = 0;        // entry format version
  uint64_t file_bytes = 0, payload_bytes = 0;
  double last_used = 0;  // seconds since the epoch: the cache's own stamp, set on every hit
  bool locked = false;   // some process is compiling this key now
  bool ok = false;
  std::string problem;   // why not ok
  bool stray = false;    // the file name is not a key: never an entry lkjit wrote
  std::string remove_error;  // verify: the OS message when this bad file could not be removed
};

struct CachePruneReport {
  size_t removed = 0;
  uint64_t removed_bytes = 0;
  size_t kept_in_use = 0;  // would have been evicted, but in use (loading here, or locked)
  size_t remaining = 0;
  uint64_t remaining_bytes = 0;
  size_t stale_files = 0;  // temp and lock files left by dead processes, removed
  bool skipped = false;    // another process was pruning
  std::vector<std::string> failed;  // "cannot remove PATH: REASON" for each file that should have gone
  std::string lock_error;  // entries were over the cap, but the prune lock could not be created: why (none evicted)
};

struct CacheClearReport {
  size_t removed = 0;               // entries
  std::vector<std::string> failed;  // "cannot remove PATH: REASON", entries and stale files
  std::vector<std::string> in_use;  // keys of the entries kept because they are in use (loading here, or locked)
};

struct CacheBundleReport {
  size_t entries = 0;   // in the bundle
  size_t imported = 0;  // import: newly added to the cache
  size_t present = 0;   // import: already cached
  size_t evicted = 0;   // import: added, then evicted at once by the cache's size cap (max_bytes too small)
  uint64_t bytes = 0;   // bundle file size
  std::vector<std::string> skipped;  // export: requested keys missing or corrupt, with why
  // import: "entry N: why" for each entry that did not decode or could not be published, "entry N (KERNEL, key
  // K..): REASON" for each that is not what it says (its key does not match its inputs, its payload is no cubin
  // of its kernel for its arch, ...); the others imported.
  std::vector<std::string> refused;
  int format = 0;        // bundle format version (import: as read; export: as written)
  std::string signer;    // key id (hex SHA-256 of the Ed25519 public key) of the bundle's signature, if signed
  bool signature_checked = false;  // import: verified against LKJIT_CACHE_TRUSTED_KEYS
};

// Entries this process refused since it started, by where they came from: corrupt or made-up disk entries
// (removed and rebuilt), bundle entries not imported, remote values not used.
struct CacheRefusals {
  uint64_t disk = 0, bundle = 0, remote = 0;
};
CacheRefusals cache_refusals();

class KernelCache {
 public:
  // The cache compile_kernel uses (cache_dir(), cache_max_bytes()), or another directory.
  KernelCache();
  explicit KernelCache(std::string dir, uint64_t max_bytes = 0);

  const std::string& dir() const { return dir_; }
  uint64_t max_bytes() const { return max_bytes_; }

  // Creates the directory if needed and refuses one writable by others. Throws CacheError.
  void check() const;
  // The same checks without creating anything: false when the directory does not exist yet; CacheError
  // when it is not a directory, cannot be listed, or is not private to this user. list, prune, clear
  // and export_bundle apply it first (an absent directory is an empty cache).
  bool exists() const;
  // Every entry, most recently used first. verify=false reads only metadata (fast); true reads and
  // checksums every entry.
  std::vector<CacheEntryInfo> list(bool verify = false) const;
  // Kernels being compiled now: keys whose lock some process holds, whether or not an entry exists.
  size_t compiling() const;
  // How many of keys have no entry file now: e.g. stored a moment ago, then evicted by the size cap
  // because it is smaller than what was stored, or removed by a `cache clear` meanwhile.
  size_t missing(const std::vector<std::string>& keys) const;
  // How many of keys have no entry file now because a size-cap prune of this process evicted them (not a
  // `cache clear` or another process).
  size_t evicted_by_cap(const std::vector<std::string>& keys) const;
  // Checks every entry; the corrupt ones are removed (as a lookup would) and returned with why, and
  // with remove_error set where the removal failed. Creates nothing: an absent directory has no entries.
  std::vector<CacheEntryInfo> verify() const;
  // Least-recently-used eviction down to max_bytes (default: this cache's cap; 0: no cap, so only
  // stale temp and lock files are removed), plus stale files. Files that could not be removed are in
  // failed, with the reason. Eviction needs the lock file "<dir>/.prune.lock": when it cannot be created
  // (a read-only directory), nothing is evicted and lock_error says why.
  CachePruneReport prune(std::optional<uint64_t> max_bytes = std::nullopt) const;
  // Removes every entry not in use, and stale files; those that could not be removed are in failed.
  CacheClearReport clear() const;
  // A bundle of the given keys' entries (every entry when keys is empty), written temp-then-rename, and
  // signed with LKJIT_CACHE_SIGNING_KEY when it is set (CacheError for a key file that cannot be used). A file that
  // cannot be written (its folder missing or read-only, not a regular file) is an Error (kInvalidArgument) naming it.
  CacheBundleReport export_bundle(const std::string& file, const std::vector<std::string>& keys = {}) const;
  // Verifies the bundle's framing, checksum and (with LKJIT_CACHE_TRUSTED_KEYS set) signature, then adds
  // every entry that decodes, is what it says and can be published; the others are listed in
  // report.refused, with the reason. Prunes to the cap at the end. Throws CacheError when the framing,
  // checksum or signature is bad, or the bundle is unsigned while trusted keys are set (then nothing is
  // added). A file that cannot be read (missing, a folder or FIFO, no permission, over 4 GiB) is bad input:
  // Error with code kInvalidArgument.
  CacheBundleReport import_bundle(const std::string& file) const;

 private:
  std::string dir_;
  uint64_t max_bytes_ = 0;
};

}  // namespace lkjit
