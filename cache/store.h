// On-disk store of compiled kernels: one self-describing file per entry (cache/entry.h), published by
// atomic rename, verified before its bytes are handed out. Readers never lock; writers of one key
// serialize on "<key>.lock" (cache/lock.h). A size cap evicts least-recently-used entries, by a
// last-use stamp the store keeps itself (the entry's mtime, set on every hit: atimes are unreliable
// under noatime/relatime). Bytes in, bytes out: nothing here knows about CUDA.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "cache/entry.h"
#include "cache/trust.h"

namespace lkjit::cache {

class DiskStore {
 public:
  // dir is created lazily with mode 0700; a directory writable by group or others is refused.
  // max_bytes caps the entries' total size after every store (0: no cap).
  explicit DiskStore(std::string dir, uint64_t max_bytes = 0);

  const std::string& dir() const { return dir_; }
  uint64_t max_bytes() const { return max_bytes_; }
  std::string path_for(const std::string& key) const;
  std::string lock_path_for(const std::string& key) const;

  // Creates the directory if needed and checks it is private to this user. Throws CacheError.
  void ensure_dir() const;
  // For maintenance: the same checks on an existing directory, which must also be listable; false
  // when it does not exist yet (nothing is created). Throws CacheError naming the path.
  bool check_existing() const;

  // nullopt on a miss. An entry that is corrupt, is not what it says (cache/trust.h), or is not what
  // the lookup asked for is removed, counted and reported through *why (then it is a miss). A hit
  // stamps the entry as just used.
  std::optional<std::string> load(const Lookup& want, std::string* why = nullptr) const;
  // The same for a key alone: the entry must be what it says, whatever a lookup would ask.
  std::optional<std::string> load(const std::string& key, std::string* why = nullptr) const;
  // The whole verified entry (metadata too), without stamping it. nullopt: missing, corrupt or refused.
  std::optional<Entry> read(const std::string& key, std::string* why = nullptr) const;
  // Atomic: temp file in the same directory, then rename; then enforces max_bytes, never evicting
  // this key. Throws CacheError with path and OS message; a failed store leaves no partial entry.
  void store(const EntryMeta& meta, const std::string& payload) const;
  // Removes an entry (e.g. the driver rejected its image).
  void evict(const std::string& key) const;
  // For `cache verify`: removes the file of a key that does not read as a good entry (corrupt or
  // unreadable), as a lookup would; one replaced by a good entry meanwhile stays. Returns the OS error
  // when the file could not be removed.
  std::error_code remove_bad(const std::string& key) const;

  struct Listed {
    std::string path;
    std::string key;          // from the file name
    EntryMeta meta;           // valid when ok
    bool ok = false;
    std::string problem;
    uint64_t file_bytes = 0;
    int64_t last_used_ns = 0;  // the store's last-use stamp, ns since the epoch
    bool locked = false;       // a process holds the key's lock (compiling it)
  };
  // Every *.lkjit file, those that cannot be read (a folder, a dangling link) not ok, with the reason.
  // verify=true reads and checks whole entries; false reads only metadata.
  std::vector<Listed> list(bool verify = true) const;
  // Keys whose lock some process holds now, entry or not: the kernels being compiled. A lock file
  // nobody holds (its owner died) does not count.
  size_t compiling() const;

  struct PruneResult {
    size_t removed = 0;
    std::vector<std::string> removed_keys;  // the entries evicted
    uint64_t removed_bytes = 0;
    size_t kept_in_use = 0;     // over the cap but pinned or locked, so kept
    size_t remaining = 0;
    uint64_t remaining_bytes = 0;
    size_t stale_files = 0;     // leftover temp and lock files of dead writers removed
    bool skipped = false;       // another process was pruning; nothing done
    std::vector<std::string> failed;  // "cannot remove PATH: REASON", one per file that should have gone
    std::string lock_error;     // strict: entries were over the cap, but the prune lock could not be had: why
  };
  // Evicts least-recently-used entries until the total is at most max_bytes. Entries in use (pinned
  // in this process, or locked by any) are never evicted. Also removes stale temp and lock files.
  // wait_ms: how long to wait for another process's prune (0: skip if one is running). Eviction runs
  // under the lock ".prune.lock"; when that cannot be created (a read-only directory), a strict prune
  // evicts nothing and says why in lock_error, unless nothing is over the cap; otherwise (the prune
  // after a store) it evicts unguarded, since keeping the cap matters more than a rare double eviction.
  PruneResult prune(uint64_t max_bytes, int wait_ms = 0, bool strict = false) const;
  struct ClearResult {
    size_t removed = 0;               // entries
    std::vector<std::string> failed;  // "cannot remove PATH: REASON", entries and stale files
    std::vector<std::string> in_use;  // keys of the entries kept: pinned here, or locked by a live process
  };
  // Removes every entry not in use, and stale files.
  ClearResult clear() const;

  // Keeps a key from eviction while this process uses it (loading, storing).
  class Pin {
   public:
    explicit Pin(std::string key);
    ~Pin();
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;

   private:
    std::string key_;
  };
  static bool pinned(const std::string& key);

  // Whether a size-cap prune of this process (after a store, or at the end of an import) evicted key: a
  // stored entry that is gone for another reason (a `cache clear`, another process) is not the cap's doing
  // here. Remembers the last 65 536 evictions.
  static bool evicted_by_cap_here(const std::string& key);

 private:
  static void forget_eviction(const std::string& key);  // stored again: a later absence is not that eviction's
  size_t sweep_stale(std::vector<std::string>* failed) const;
  std::optional<Entry> read_checked(const std::string& key, const Lookup* want, std::string* why) const;
  std::string dir_;
  uint64_t max_bytes_ = 0;
};

// $LKJIT_CACHE_DIR, else $XDG_CACHE_HOME/lkjit, else $HOME/.cache/lkjit.
std::string default_cache_dir();

// The default size cap, and the parser of LKJIT_CACHE_MAX_BYTES-style values: a byte count with an
// optional K, M, G or T suffix (powers of 1024, "KiB"/"KB" spellings too); 0 means no cap.
constexpr uint64_t kDefaultMaxBytes = uint64_t(1) << 30;
uint64_t parse_byte_size(const std::string& text, const char* what);

}  // namespace lkjit::cache
