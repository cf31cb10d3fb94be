// The cluster tier of this process (cache/remote_store.h) as the environment configures it:
//   LKJIT_REMOTE_CACHE             redis://[user:password@]host:port/db or unix:///path (unset: off)
//   LKJIT_REMOTE_CACHE_WRITE       all | kernels | none
//   LKJIT_REMOTE_CACHE_TTL         entry lifetime in seconds, refreshed on hit (0: no expiry)
//   LKJIT_REMOTE_CACHE_TIMEOUT_MS  connect and command timeout
//   LKJIT_REMOTE_CACHE_RETRY_S     how long to stay local-only after a failure
//   LKJIT_REMOTE_CACHE_LEASE_MS    compile lease lifetime (renewed every third of it while compiling)
//   LKJIT_REMOTE_CACHE_WAIT_S      how long to wait for another node's compile before compiling here
// A bad value is a warning naming it (the tier is off for a bad URL, a setting falls back to its default):
// the remote tier never fails an op. Writes go through one bounded background writer, so a slow or dead
// Redis never slows a compile; the process flushes it (boundedly) at exit.
#pragma once
#include <memory>
#include <string>

#include "cache/remote_store.h"
#include "cache/tuning_db.h"

namespace lkjit::rt {

struct RemoteConfig {
  std::string url;  // redacted
  cache::RedisEndpoint endpoint;
  cache::RemoteOptions options;
  int wait_s = 120;
};

class RemoteTier {
 public:
  // The tier for the current environment, or nullptr when LKJIT_REMOTE_CACHE is unset or unusable
  // (warned once). Rebuilt when the variables change (tests) or in a forked child.
  static std::shared_ptr<RemoteTier> get();

  const RemoteConfig& config() const { return cfg_; }
  cache::RemoteStore& store() { return *reads_; }

  // Queues an entry for Redis, then drops the lease (empty: none) once it is written or given up. Never
  // blocks: a full queue drops the write (and the lease) with a log line.
  void write_back(const cache::EntryMeta& meta, const std::string& payload, const std::string& lease,
                  const std::string& token);
  void touch(const std::string& key);     // refresh a hit's TTL, in the background
  // Waits until every queued write is done, at most ms. False when some are still pending.
  bool flush(int ms);

  explicit RemoteTier(RemoteConfig cfg);
  ~RemoteTier();

 private:
  struct Impl;
  RemoteConfig cfg_;
  std::unique_ptr<cache::RemoteStore> reads_;
  std::unique_ptr<Impl> impl_;
};

// Holds a lease while this process compiles (or tunes) under it: renews it every lease_ms / 3 on a
// thread of its own, until released or handed to write_back. A holder that dies stops renewing, and the
// lease expires within lease_ms.
class LeaseRenewer {
 public:
  LeaseRenewer(std::shared_ptr<RemoteTier> tier, std::string name, std::string token);
  ~LeaseRenewer();  // stops renewing; releases the lease unless handed off
  LeaseRenewer(const LeaseRenewer&) = delete;
  LeaseRenewer& operator=(const LeaseRenewer&) = delete;
  // Stops renewing without releasing: write_back releases it after the entry is written.
  void hand_off();

 private:
  struct State;
  std::shared_ptr<State> state_;
};

// Tuning decisions in the remote tier, for runtime/tuner.cpp (keyed like the tuning database; see
// cache/remote_decisions.h). Each is a no-op / nullopt without LKJIT_REMOTE_CACHE.
// The published decision for q's key (device, arch, SM count, spec, bucket), when there is one.
std::optional<cache::TuningRecord> remote_decision(const cache::TuningQuery& q);
// Publishes decisions (LKJIT_REMOTE_CACHE_WRITE=all only), synchronously: tuning is rare and slow.
void publish_decisions(const std::vector<cache::TuningRecord>& records);
// Before tuning q: another process's decision, if one is published or appears while this one waits
// (at most LKJIT_REMOTE_CACHE_WAIT_S, while its lease is held); else the lease, held (renewed) until the
// claim is destroyed, so that one process tunes each key and the others use its decision.
struct TuningClaim {
  std::optional<cache::TuningRecord> decision;
  std::unique_ptr<LeaseRenewer> lease;
};
TuningClaim claim_tuning(const cache::TuningQuery& q);

// Flushes the tier's queued writes (bounded by the timeouts); for tools before they exit and for tests.
void flush_remote_cache();

}  // namespace lkjit::rt
