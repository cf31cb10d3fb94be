#include "runtime/remote_tier.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <mutex>
#include <thread>

#include "cache/entry.h"
#include "cache/remote_decisions.h"
#include "runtime/cache_trust.h"
#include "runtime/env.h"
#include "support/message.h"
#include "support/parse_int.h"

namespace lkjit::rt {
namespace {

constexpr size_t kMaxQueued = 256;

void warn(const std::string& line) { std::cerr << "lkjit: warning: " << line << "\n"; }

// Outside text in a message: escaped, and clipped to its first 64 bytes and its length (support/message.h).
std::string shown(const std::string& v) { return support::clip(v); }

std::string default_of(const char* var) {
  for (const auto& e : env_table())
    if (std::string(e.name) == var) return e.default_value;
  return "";
}

// A whole decimal number in [lo, hi], else the default with a warning naming the variable.
int64_t setting(const char* var, int64_t lo, int64_t hi) {
  const std::string v = env(var);
  // The one decimal parser (support/parse_int.h): "011" is eleven, "0x5", "+5", " 5" and "-1" are refused.
  const support::IntParse p = support::parse_decimal(v, lo, hi);
  if (p.status == support::IntStatus::kOk && v[0] != '-') return p.value;
  warn(fmt::format("{}={} is out of range; supported: an integer in [{}, {}]; using {}", var, shown(v), lo, hi,
                   default_of(var)));
  return support::parse_decimal(default_of(var)).value;
}

// The environment's configuration, or nullopt (off, or a bad URL: warned).
std::optional<RemoteConfig> config_from_env() {
  const std::string url = env("LKJIT_REMOTE_CACHE");
  if (url.empty()) return std::nullopt;
  RemoteConfig c;
  std::string why;
  auto ep = cache::parse_redis_url(url, &why);
  if (!ep) {
    warn(fmt::format("LKJIT_REMOTE_CACHE={}; the remote cache is off", why));
    return std::nullopt;
  }
  c.endpoint = *ep;
  c.url = ep->redacted;
  const std::string w = env("LKJIT_REMOTE_CACHE_WRITE");
  if (w == "all") c.options.write = cache::RemoteWrite::kAll;
  else if (w == "kernels") c.options.write = cache::RemoteWrite::kKernels;
  else if (w == "none") c.options.write = cache::RemoteWrite::kNone;
  else {
    warn(fmt::format("LKJIT_REMOTE_CACHE_WRITE={} is not a mode; supported: all, kernels, none; using none", shown(w)));
    c.options.write = cache::RemoteWrite::kNone;  // an unknown word must not turn writes on
  }
  c.options.ttl_s = setting("LKJIT_REMOTE_CACHE_TTL", 0, int64_t(10) * 365 * 86400);
  c.options.timeout_ms = static_cast<int>(setting("LKJIT_REMOTE_CACHE_TIMEOUT_MS", 1, 60000));
  c.options.retry_s = static_cast<int>(setting("LKJIT_REMOTE_CACHE_RETRY_S", 1, 86400));
  c.options.lease_ms = static_cast<int>(setting("LKJIT_REMOTE_CACHE_LEASE_MS", 100, 3600000));
  c.wait_s = static_cast<int>(setting("LKJIT_REMOTE_CACHE_WAIT_S", 0, 86400));
  return c;
}

// Everything that configures the tier, as one string: a change (a test) builds a new tier.
std::string env_signature() {
  std::string s;
  for (const char* v : {"LKJIT_REMOTE_CACHE", "LKJIT_REMOTE_CACHE_WRITE", "LKJIT_REMOTE_CACHE_TTL",
                        "LKJIT_REMOTE_CACHE_TIMEOUT_MS", "LKJIT_REMOTE_CACHE_RETRY_S", "LKJIT_REMOTE_CACHE_LEASE_MS",
                        "LKJIT_REMOTE_CACHE_WAIT_S", "LKJIT_CACHE_SIGNING_KEY", "LKJIT_CACHE_TRUSTED_KEYS"})
    s += env(v) + '\n';
  return s;
}

struct Registry {
  std::mutex mu;
  std::string signature;
  pid_t pid = 0;
  bool built = false;
  std::shared_ptr<RemoteTier> tier;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: writer threads may outlive static destructors
  return *r;
}

void flush_at_exit() {
  auto& r = registry();
  std::shared_ptr<RemoteTier> t;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    if (r.pid == ::getpid()) t = r.tier;
  }
  if (t) t->flush(std::min(10000, 2 * t->config().options.timeout_ms + 2000));
}

}  // namespace

struct RemoteTier::Impl {
  struct Job {
    bool touch = false;
    cache::EntryMeta meta;
    std::string payload, lease, token;
  };
  std::unique_ptr<cache::RemoteStore> writes;  // its own connection: a slow write never holds a lookup
  std::mutex mu;
  std::condition_variable cv, idle;
  std::deque<Job> queue;
  bool busy = false, stop = false;
  std::thread thread;

  void run() {
    std::unique_lock<std::mutex> lock(mu);
    for (;;) {
      cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) break;  // stop, and nothing left
      Job j = std::move(queue.front());
      queue.pop_front();
      busy = true;
      lock.unlock();
      if (j.touch) {
        writes->touch_entry(j.meta.key);
      } else {
        const bool ok = writes->put_entry(j.meta, j.payload);
        log_line(fmt::format("{} {} (key {}) in the remote cache", ok ? "stored" : "could not store", j.meta.kernel_name,
                             j.meta.key.substr(0, 16)));
        if (!j.lease.empty()) writes->release_lease(j.lease, j.token);
      }
      lock.lock();
      busy = false;
      idle.notify_all();
    }
  }
};

RemoteTier::RemoteTier(RemoteConfig cfg) : cfg_(std::move(cfg)), impl_(new Impl) {
  auto breaker = std::make_shared<cache::Breaker>(cfg_.options.retry_s, cache::RemoteLog{warn, log_line}, cfg_.url);
  std::shared_ptr<const cache::Signer> signer;
  std::shared_ptr<const cache::TrustedKeys> trusted;
  try {
    signer = cache_signer();
  } catch (const std::exception& e) {  // written entries go unsigned; readers with trusted keys refuse them
    warn(fmt::format("{}; remote cache entries are written unsigned", e.what()));
  }
  try {
    trusted = cache_trusted_keys();
  } catch (const std::exception& e) {
    // Trusted keys were asked for but cannot be read: trust nothing remote rather than everything.
    warn(fmt::format("{}; the remote cache is write-only for this process", e.what()));
    trusted = std::make_shared<const cache::TrustedKeys>(cache::TrustedKeys::from_pem(
        cache::generate_key_pair().public_pem, "an unreadable LKJIT_CACHE_TRUSTED_KEYS"));
  }
  reads_ = std::make_unique<cache::RemoteStore>(cfg_.endpoint, cfg_.options, breaker, signer, trusted);
  impl_->writes = std::make_unique<cache::RemoteStore>(cfg_.endpoint, cfg_.options, breaker, signer, trusted);
  impl_->thread = std::thread([this] { impl_->run(); });
}

RemoteTier::~RemoteTier() {
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stop = true;
    impl_->cv.notify_all();
  }
  if (impl_->thread.joinable()) impl_->thread.join();
}

void RemoteTier::write_back(const cache::EntryMeta& meta, const std::string& payload, const std::string& lease,
                            const std::string& token) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  if (impl_->queue.size() >= kMaxQueued) {
    lock.unlock();
    log_line(fmt::format("remote write queue full; {} not stored in the remote cache", meta.kernel_name));
    if (!lease.empty()) reads_->release_lease(lease, token);
    return;
  }
  impl_->queue.push_back({false, meta, payload, lease, token});
  impl_->cv.notify_all();
}

void RemoteTier::touch(const std::string& key) {
  if (cfg_.options.write == cache::RemoteWrite::kNone || cfg_.options.ttl_s <= 0) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->queue.size() >= kMaxQueued) return;
  Impl::Job j;
  j.touch = true;
  j.meta.key = key;
  impl_->queue.push_back(std::move(j));
  impl_->cv.notify_all();
}

bool RemoteTier::flush(int ms) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  return impl_->idle.wait_for(lock, std::chrono::milliseconds(ms), [&] { return impl_->queue.empty() && !impl_->busy; });
}

std::shared_ptr<RemoteTier> RemoteTier::get() {
  auto& r = registry();
  const std::string sig = env_signature();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.built && r.signature == sig && r.pid == ::getpid()) return r.tier;
  if (r.pid != ::getpid() && r.tier) {
    // A forked child: the parent's writer thread is not here; its connections must not be shared.
    new std::shared_ptr<RemoteTier>(std::move(r.tier));  // leaked on purpose: its thread is gone, never join it
  }
  static bool registered = false;
  if (!registered) {
    registered = true;
    std::atexit(flush_at_exit);
  }
  r.signature = sig;
  r.pid = ::getpid();
  r.built = true;
  auto cfg = config_from_env();
  r.tier = cfg ? std::make_shared<RemoteTier>(std::move(*cfg)) : nullptr;
  return r.tier;
}

struct LeaseRenewer::State {
  std::shared_ptr<RemoteTier> tier;
  std::string name, token;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false, handed_off = false;
  std::thread thread;
};

LeaseRenewer::LeaseRenewer(std::shared_ptr<RemoteTier> tier, std::string name, std::string token) : state_(new State) {
  state_->tier = std::move(tier);
  state_->name = std::move(name);
  state_->token = std::move(token);
  const auto every = std::chrono::milliseconds(std::max(30, state_->tier->config().options.lease_ms / 3));
  auto s = state_;
  state_->thread = std::thread([s, every] {
    std::unique_lock<std::mutex> lock(s->mu);
    while (!s->cv.wait_for(lock, every, [&] { return s->done; })) {
      lock.unlock();
      if (!s->tier->store().renew_lease(s->name, s->token))
        log_line(fmt::format("lease {} could not be renewed (lost, or the remote cache is unreachable)", s->name.substr(0, 16)));
      lock.lock();
    }
  });
}

void LeaseRenewer::hand_off() {
  std::lock_guard<std::mutex> lock(state_->mu);
  state_->handed_off = true;
}

LeaseRenewer::~LeaseRenewer() {
  bool release = false;
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->done = true;
    release = !state_->handed_off;
    state_->cv.notify_all();
  }
  if (state_->thread.joinable()) state_->thread.join();
  if (release) state_->tier->store().release_lease(state_->name, state_->token);
}

std::optional<cache::TuningRecord> remote_decision(const cache::TuningQuery& q) {
  auto t = RemoteTier::get();
  if (!t) return std::nullopt;
  std::string why;
  auto r = cache::get_decision(t->store(), q, &why);
  if (!r && !why.empty()) log_line(fmt::format("warning: refused the remote tuning decision {}: {}", cache::decision_key(q), why));
  return r;
}

void publish_decisions(const std::vector<cache::TuningRecord>& records) {
  auto t = RemoteTier::get();
  if (!t || t->config().options.write != cache::RemoteWrite::kAll) return;
  for (const auto& r : records)
    if (!cache::put_decision(t->store(), r)) log_line("could not publish the tuning decision " + cache::decision_key(r));
}

TuningClaim claim_tuning(const cache::TuningQuery& q) {
  TuningClaim c;
  auto t = RemoteTier::get();
  if (!t) return c;
  if ((c.decision = remote_decision(q))) return c;
  const std::string name = "decision:" + cache::decision_key(q), token = cache::make_lease_token();
  auto state = t->store().try_lease(name, token);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(t->config().wait_s);
  while (state == cache::RemoteStore::LeaseState::kHeld && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    if ((c.decision = remote_decision(q))) return c;
    state = t->store().try_lease(name, token);
  }
  if (state == cache::RemoteStore::LeaseState::kOwned) c.lease = std::make_unique<LeaseRenewer>(t, name, token);
  return c;
}

void flush_remote_cache() {
  if (auto t = RemoteTier::get()) t->flush(std::min(10000, 2 * t->config().options.timeout_ms + 2000));
}

}  // namespace lkjit::rt
