// The cluster tier: kernel cache entries, compile leases and tuning decisions in Redis, shared by every
// node of a job. Bytes in, bytes out; nothing here knows about CUDA, the generator or the environment.
//
// Keys (prefix "lkjit:v1:"):
//   entry:<key>          a remote value (below), with a TTL refreshed on hit
//   lease:<name>         SET NX PX: the holder compiles (or tunes) <name>; renewed while it works,
//                        expiring when it dies; the value is its token (host, pid, random)
//   decision:<db key>    a tuning decision: a one-record tuning database (cache/tuning_db.h), signed too
//   stats                a hash of counters (hits, misses, refused, stored), written only by writers
// Remote value: "LKJIT-REMOTE 1 <entry bytes> <signer key id or -> <signature hex or ->\n" then the entry
// exactly as on disk (cache/entry.h). The signature is over the entry bytes in the context
// "remote-entry <redis key>" (cache/signing.h), so a value moved to another key does not verify there.
// Every value read is checked as a disk entry is (cache/trust.h) and, with trusted keys, its signature;
// what fails is refused and counted, and a writer overwrites it with the entry it builds.
//
// Failure model: every command has a timeout; a failure (refused, timed out, an error reply) opens the
// breaker, and for retry_s the store answers "unavailable" at once (local-only), with one warning per
// process; then it reconnects on the next use.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cache/entry.h"
#include "cache/redis_client.h"
#include "cache/redis_url.h"
#include "cache/trust.h"

namespace lkjit::cache {

class Signer;
class TrustedKeys;

// The header line of a remote value, read strictly: "LKJIT-REMOTE 1 " then the entry's byte count (decimal,
// support/parse_int.h: no sign, no spaces, no other base), the key id (64 hex digits or "-") and the
// signature (128 hex digits or "-"), single spaces, then "\n". For values from Redis: outside input.
struct RemoteValueHead {
  uint64_t entry_bytes = 0;   // as declared
  std::string key_id;         // "" when unsigned ("-")
  std::string signature_hex;  // "" when unsigned
  size_t body_at = 0;         // where the entry starts (after the "\n")
};
// value may be the whole value or only its start (at least the header line). nullopt with *why naming what
// is wrong (the text clipped and escaped).
std::optional<RemoteValueHead> parse_value_head(std::string_view value, std::string* why);

enum class RemoteWrite { kAll, kKernels, kNone };  // kKernels: entries and leases, not decisions

struct RemoteOptions {
  int timeout_ms = 500;          // connect, and each command
  int retry_s = 30;              // breaker: local-only this long after a failure
  int64_t ttl_s = 30 * 86400;    // entry lifetime, refreshed on hit; 0: no expiry
  RemoteWrite write = RemoteWrite::kAll;
  int lease_ms = 10000;          // lease lifetime; the holder renews it every lease_ms / 3
  uint64_t max_value_bytes = uint64_t(64) << 20;  // larger values are refused unread
};

// One warning per process for the tier being unusable, then log lines (the caller decides where).
struct RemoteLog {
  std::function<void(const std::string&)> warn;  // printed once: "remote cache URL: why; ..."
  std::function<void(const std::string&)> log;   // LKJIT_LOG-style detail
};

// Opens after a failure, for retry_s; shared by the connections of one process.
class Breaker {
 public:
  Breaker(int retry_s, RemoteLog log, std::string url) : retry_(retry_s), log_(std::move(log)), url_(std::move(url)) {}
  bool allow();
  void failure(const std::string& why);
  void success();
  bool open() const { return open_.load(); }
  uint64_t failures() const { return failures_.load(); }

 private:
  std::mutex mu_;
  std::chrono::seconds retry_;
  std::chrono::steady_clock::time_point retry_at_{};
  std::atomic<bool> open_{false};
  std::atomic<uint64_t> failures_{0};
  bool warned_ = false;
  RemoteLog log_;
  std::string url_;
};

class RemoteStore {
 public:
  RemoteStore(RedisEndpoint ep, RemoteOptions opts, std::shared_ptr<Breaker> breaker,
              std::shared_ptr<const Signer> signer, std::shared_ptr<const TrustedKeys> trusted);

  const RedisEndpoint& endpoint() const { return ep_; }
  const RemoteOptions& options() const { return opts_; }
  bool available() { return breaker_->allow(); }

  std::string entry_key(const std::string& key) const { return kPrefix + std::string("entry:") + key; }
  std::string lease_key(const std::string& name) const { return kPrefix + std::string("lease:") + name; }
  std::string decision_key(const std::string& db_key) const { return kPrefix + std::string("decision:") + db_key; }

  struct Fetch {
    std::optional<Entry> entry;  // verified (checks, lookup, signature)
    std::string refused;         // why a value that was there was not used
    bool unavailable = false;    // Redis down, hung or refusing (breaker open)
    uint64_t value_bytes = 0;
  };
  // The entry of want.key, checked against want (or only for what it says, when want.key is all that
  // is known: kernel name empty).
  Fetch get_entry(const Lookup& want);
  // Encodes, signs (with a signer) and stores the entry with the TTL. False when not written (write
  // none, unavailable).
  bool put_entry(const EntryMeta& meta, const std::string& payload);
  // Refreshes an entry's TTL (a hit), when writing is allowed and the TTL is not 0.
  void touch_entry(const std::string& key);
  // Removes an entry (verify, of one that is refused), when writing is allowed.
  bool remove_entry(const std::string& key);

  // The remote value for (key, entry bytes): the framing above, signed when a signer is set.
  std::string encode_value(const std::string& redis_key, const std::string& entry_bytes) const;
  // Unframes and checks the signature (with trusted keys); *why when refused.
  std::optional<std::string> decode_value(const std::string& redis_key, const std::string& value,
                                          std::string* signer, std::string* why) const;

  enum class LeaseState { kOwned, kHeld, kUnavailable };
  LeaseState try_lease(const std::string& name, const std::string& token);
  bool renew_lease(const std::string& name, const std::string& token);
  void release_lease(const std::string& name, const std::string& token);
  // Whether some process holds the lease now (false when unavailable).
  bool lease_held(const std::string& name);

  // Decisions: the signed text of a one-record tuning database, or nullopt (absent, refused, unavailable).
  std::optional<std::string> get_decision(const std::string& db_key, std::string* refused = nullptr);
  bool put_decision(const std::string& db_key, const std::string& text);

  // Counter in the stats hash (writers only).
  void count(const char* field);

  // Administration (CLI): keys matching "<prefix><kind>:*", at most `limit`, by SCAN; raw reads.
  std::vector<std::string> scan(const std::string& kind, size_t limit, bool* truncated = nullptr);
  std::optional<RedisReply> raw(const std::vector<std::string_view>& argv, std::string* why);

  static constexpr const char* kPrefix = "lkjit:v1:";

 private:
  // The connection, (re)made on use; nullptr while the breaker is open or connect fails.
  RedisClient* client(std::string* why);
  std::optional<RedisReply> run(const std::vector<std::string_view>& argv, std::string* why);
  bool writes_kernels() const { return opts_.write != RemoteWrite::kNone; }

  RedisEndpoint ep_;
  RemoteOptions opts_;
  std::shared_ptr<Breaker> breaker_;
  std::shared_ptr<const Signer> signer_;
  std::shared_ptr<const TrustedKeys> trusted_;
  std::mutex mu_;  // one command at a time on the connection
  std::unique_ptr<RedisClient> conn_;
};

// A lease token: "<host>:<pid>:<16 random hex digits>", unique across processes and nodes.
std::string make_lease_token();

}  // namespace lkjit::cache
