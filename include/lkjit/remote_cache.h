// The cluster tier (LKJIT_REMOTE_CACHE, a Redis server) for tools: what it holds, its health, and moving
// kernel entries and tuning decisions between it and this machine. No GPU needed.
//
// compile_kernel uses the tier by itself (lkjit/runtime.h); this is administration. Every entry read from
// Redis is checked as a disk entry is (key recomputed from its inputs, a cubin of its kernel for its arch)
// and, with LKJIT_CACHE_TRUSTED_KEYS set, must be signed by a trusted key (LKJIT_CACHE_SIGNING_KEY signs
// what this process writes). Nothing here throws for an unreachable server: results say so.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lkjit {

class KernelCache;

struct RemoteCacheStatus {
  std::string url;             // redacted: a password shows as ***
  bool reachable = false;
  std::string error;           // why not reachable
  std::string write_mode;      // all | kernels | none
  int64_t ttl_s = 0;           // entry lifetime, refreshed on hit (0: none)
  size_t entries = 0, decisions = 0, leases = 0;  // counted by SCAN, up to a bound
  bool counts_truncated = false;
  std::map<std::string, int64_t> stats;  // counters writers keep: stored, refused
  std::string used_memory, maxmemory, maxmemory_policy;  // from INFO / CONFIG GET (when allowed)
  std::string signer;          // key id that signs this process's writes (empty: unsigned)
  size_t trusted_keys = 0;     // keys reads must be signed by (0: signatures not required)
};

struct RemoteEntryInfo {
  std::string key;           // the content key (64 hex digits)
  std::string kernel_name;   // from the entry's metadata (when it decodes)
  int arch = 0;
  uint64_t value_bytes = 0;
  int64_t ttl_s = -1;        // seconds left; -1: no expiry
  bool ok = false;
  std::string problem;       // why it is refused
  std::string signer;        // key id of its signature (empty: unsigned)
};

struct RemoteTransferReport {
  size_t moved = 0;     // written to the destination
  size_t present = 0;   // already there
  size_t refused = 0;   // not moved because they fail the checks (named in problems)
  size_t failed = 0;    // could not be written (named in problems)
  std::vector<std::string> problems;
};

class RemoteCache {
 public:
  // The tier LKJIT_REMOTE_CACHE names, or nullopt when it is unset (a bad URL is warned about, and nullopt).
  static std::optional<RemoteCache> from_env();

  RemoteCacheStatus status();
  // Entries, at most limit (by SCAN); verify=true reads and checks each one.
  std::vector<RemoteEntryInfo> list(size_t limit, bool verify, bool* truncated = nullptr);
  // list(limit, true), and removes the refused ones when this process may write (LKJIT_REMOTE_CACHE_WRITE).
  std::vector<RemoteEntryInfo> verify(size_t limit, size_t* removed);
  // One entry, read and checked; nullopt when absent or the tier is unreachable (reachable says which).
  std::optional<RemoteEntryInfo> entry(const std::string& key, bool* reachable = nullptr);

  // Disk -> Redis: every good disk entry Redis lacks (signed when a signing key is set).
  RemoteTransferReport push(const KernelCache& disk);
  // Redis -> disk: every remote entry the disk lacks that passes the checks (and the signature).
  RemoteTransferReport pull(const KernelCache& disk);
  // Tuning decisions: the records of a tuning database file to Redis, and Redis's decisions merged into it.
  RemoteTransferReport push_decisions(const std::string& tuning_db);
  RemoteTransferReport pull_decisions(const std::string& tuning_db);

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace lkjit
