// On-disk store of compiled kernels: one self-describing file per entry, published by atomic rename,
// verified (format, key echo, size, checksum) before its bytes are handed out. Bytes in, bytes out:
// nothing here knows about CUDA.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lkjit::cache {

// Bump on any change of the entry layout; tests/data holds a golden entry per version.
constexpr int kEntryFormatVersion = 1;

struct EntryMeta {
  std::string key;          // 64 hex digits (cache/key.h)
  std::string kernel_name;  // display name
  std::string spec;         // OpSpec::to_string() + tile
  int arch = 0;
  std::string nvrtc_version;
  uint64_t size = 0;        // payload bytes
  std::string sha256;       // of the payload
};

struct Entry {
  EntryMeta meta;
  std::string payload;  // cubin
};

// Serialized entry: magic line, one JSON line of EntryMeta, payload.
std::string encode_entry(const EntryMeta& meta, const std::string& payload);
// Parses and verifies; the error names what is wrong (truncated, checksum, key echo...).
std::optional<Entry> decode_entry(const std::string& bytes, const std::string& expected_key, std::string* why);

class DiskStore {
 public:
  // dir is created lazily with mode 0700; a directory writable by group or others is refused.
  explicit DiskStore(std::string dir);

  const std::string& dir() const { return dir_; }
  std::string path_for(const std::string& key) const;

  // nullopt on a miss. A corrupt entry is removed and reported through *why (then it is a miss).
  std::optional<std::string> load(const std::string& key, std::string* why = nullptr) const;
  // Atomic: temp file in the same directory, then rename. Throws CacheError with path and OS message.
  void store(const EntryMeta& meta, const std::string& payload) const;
  // Removes an entry (e.g. the driver rejected its image).
  void evict(const std::string& key) const;

  struct Listed {
    std::string path;
    EntryMeta meta;
    bool ok = false;
    std::string problem;
  };
  std::vector<Listed> list() const;

 private:
  void ensure_dir() const;
  std::string dir_;
};

// $LKJIT_CACHE_DIR, else $XDG_CACHE_HOME/lkjit, else $HOME/.cache/lkjit.
std::string default_cache_dir();

}  // namespace lkjit::cache
