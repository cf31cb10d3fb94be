// compile_kernel: generator -> key -> memory cache -> disk cache -> NVRTC (under the key's node-local
// lock, so processes sharing a cache compile each key once) -> both caches.
#include <fmt/format.h>

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <iostream>
#include <set>
#include <thread>
#include <mutex>
#include <new>
#include <unordered_map>

#include "cache/elf.h"
#include "cache/file_io.h"
#include "cache/key.h"
#include "cache/lock.h"
#include "cache/store.h"
#include "cache/trust.h"
#include "lkjit/cache.h"
#include "lkjit/error.h"
#include "lkjit/runtime.h"
#include "runtime/env.h"
#include "runtime/remote_tier.h"
#include "runtime/nvrtc_compiler.h"
#include "runtime/nvrtc_loader.h"

namespace lkjit {
namespace {

// How long to wait for another process compiling the same key before compiling it too. A dead
// owner releases at once (flock); this only bounds a live but stuck one. Duplicate work is harmless:
// both publish identical entries by atomic rename.
constexpr auto kLockWait = std::chrono::seconds(120);

struct MemoryCache {
  std::mutex mu;
  std::unordered_map<std::string, std::string> cubins;  // key -> cubin
  // (spec, tile) -> (kernel name, key): a repeated call skips generation and hashing (~50 KB of
  // headers), which would otherwise dominate a memory hit. Valid for the process: every other key
  // input (headers, NVRTC, options, generator) is fixed once it runs.
  std::unordered_map<std::string, std::pair<std::string, std::string>> keys;
};
MemoryCache& memory_cache() {
  static MemoryCache* m = new MemoryCache;  // never destroyed, as the gate
  return *m;
}

// Per-key compile lock within the process: concurrent callers of one spec compile it once.
struct KeyMutexes {
  std::mutex mu;
  std::unordered_map<std::string, std::unique_ptr<std::mutex>> m;
};
KeyMutexes& key_mutexes() {
  static KeyMutexes k;
  return k;
}
std::mutex& key_mutex(const std::string& key) {
  KeyMutexes& k = key_mutexes();
  std::lock_guard<std::mutex> lock(k.mu);
  auto& p = k.m[key];
  if (!p) p = std::make_unique<std::mutex>();
  return *p;
}

// fork(): a child gets only the forking thread, and every mutex another thread held stays locked in it for
// good. So fork waits until no thread is inside NVRTC (whose own state a child must not inherit half-way)
// and takes the caches' short locks; the child then drops the per-key locks of threads it does not have.
// A compile that waited for a key another thread was compiling takes the key's file lock in the child, and
// so loads what that thread publishes.
struct CompileGate {
  std::mutex mu;
  std::condition_variable cv;
  int active = 0;  // threads inside NVRTC
  bool forking = false;
};
CompileGate& compile_gate() {
  static CompileGate* g = new CompileGate;  // never destroyed: a detached thread may compile at exit
  return *g;
}
class InsideNvrtc {
 public:
  InsideNvrtc() {
    std::unique_lock<std::mutex> lock(compile_gate().mu);
    compile_gate().cv.wait(lock, [] { return !compile_gate().forking; });
    ++compile_gate().active;
  }
  ~InsideNvrtc() {
    std::lock_guard<std::mutex> lock(compile_gate().mu);
    --compile_gate().active;
    compile_gate().cv.notify_all();
  }
  InsideNvrtc(const InsideNvrtc&) = delete;
  InsideNvrtc& operator=(const InsideNvrtc&) = delete;
};

MemoryCache& memory_cache();

void before_fork() {
  CompileGate& g = compile_gate();
  std::unique_lock<std::mutex> lock(g.mu);
  g.forking = true;
  g.cv.wait(lock, [&] { return g.active == 0; });
  lock.release();  // held across fork; both sides unlock it
  key_mutexes().mu.lock();
  memory_cache().mu.lock();
}
void after_fork_in_parent() {
  memory_cache().mu.unlock();
  key_mutexes().mu.unlock();
  compile_gate().forking = false;
  compile_gate().mu.unlock();
  compile_gate().cv.notify_all();
}
void after_fork_in_child() {
  memory_cache().mu.unlock();
  // Mutexes held by threads that do not exist here can never be unlocked: leaked, and fresh ones made.
  for (auto& [key, m] : key_mutexes().m) m.release();  // NOLINT(bugprone-unused-return-value)
  key_mutexes().m.clear();
  key_mutexes().mu.unlock();
  CompileGate& g = compile_gate();
  g.forking = false;
  g.active = 0;
  new (&g.cv) std::condition_variable;  // its waiters were the parent's other threads
  g.mu.unlock();
}
[[maybe_unused]] const bool kForkHandlers = [] { return ::pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child) == 0; }();

std::string spec_id(const OpSpec& s, const Tile& t) {
  std::string id = fmt::format("{}/{}/{}{}", s.kernel.name(), int(s.dtype), s.arch, s.arch_specific ? "a" : "");
  for (const auto& [n, v] : s.fields.entries()) id += fmt::format("/{}={}", n, v);
  id += "|";
  for (const auto& [n, v] : t.axes.entries()) id += fmt::format("/{}={}", n, v);
  return id;
}

cache::KeyInputs key_inputs(const GeneratedSource& src, int arch, bool specific) {
  cache::KeyInputs in;
  in.kernel_name = src.kernel_name;
  in.source = src.source;
  in.headers = src.headers;
  in.options = rt::nvrtc_options(arch, specific);
  in.arch = arch;
  in.nvrtc_version = rt::nvrtc_version();
  in.generator_version = kGeneratorVersion;
  return in;
}


// The entry must be the one asked for (key, kernel, arch, NVRTC and generator versions) and a cubin of
// that kernel for that arch (cache/trust.h) before a byte of it reaches the driver.
std::optional<std::string> load_logged(const cache::DiskStore& store, const cache::Lookup& want) {
  std::string why;
  auto bytes = store.load(want, &why);
  if (!bytes && !why.empty()) rt::log_line("warning: bad cache entry: " + why);
  return bytes;
}

struct Built {
  std::string cubin;
  std::string origin;
  std::string store_error;
};

// A CacheError's message without its "lkjit: error: " prefix, for a log line or a caller's message.
std::string without_prefix(const std::string& msg) {
  const std::string p = "lkjit: error: ";
  return msg.compare(0, p.size(), p) == 0 ? msg.substr(p.size()) : msg;
}

// A verified remote entry (cache/remote_store.h: checks, lookup, signature), published on disk too (best
// effort: a full disk costs a remote read next time). nullopt on a miss, a refusal or an outage.
std::optional<std::string> remote_hit(rt::RemoteTier& t, const cache::DiskStore* store, const cache::Lookup& want) {
  auto f = t.store().get_entry(want);
  if (!f.refused.empty())
    rt::log_line(fmt::format("warning: refused the remote cache entry of {} (key {}): {}", want.kernel_name,
                             want.key.substr(0, 16), f.refused));
  if (!f.entry) return std::nullopt;
  if (store) {
    try {
      store->store(f.entry->meta, f.entry->payload);
    } catch (const CacheError& e) {
      rt::log_line("warning: " + without_prefix(e.what()));
    }
  }
  t.touch(want.key);
  rt::log_line(fmt::format("remote cache hit {} (key {})", want.kernel_name, want.key.substr(0, 16)));
  return std::move(f.entry->payload);
}

// The disk entry, else the remote entry, else NVRTC. Readers never lock; a miss takes the key's node-local
// lock, looks again (another process may have published it meanwhile); with a remote tier it then takes
// the key's cluster lease (one compile per key across nodes) or waits, boundedly, for the holder's entry.
// defer: return origin "deferred" instead of waiting for another process's lock or lease.
Built load_or_compile(const cache::DiskStore* store, const GeneratedSource& src, const cache::KeyInputs& in,
                      const OpSpec& spec, const Tile& tile, const std::string& key, bool defer) {
  cache::FileLock lock;
  const cache::Lookup want = cache::lookup_for(key, cache::summarize(in));
  if (store) {
    if (auto hit = load_logged(*store, want)) return {std::move(*hit), "disk", ""};
    lock = cache::FileLock::acquire(store->lock_path_for(key), defer ? std::chrono::milliseconds(0) : kLockWait);
    if (defer && lock.state() == cache::FileLock::State::kTimedOut) return {"", "deferred", ""};
    if (lock.state() == cache::FileLock::State::kTimedOut)
      rt::log_line(fmt::format("warning: {} is locked by another process for over {} s; compiling it here too",
                               src.kernel_name, kLockWait.count()));
    else if (lock.state() == cache::FileLock::State::kError)
      rt::log_line("warning: " + lock.error() + "; compiling without the lock");
    if (auto hit = load_logged(*store, want)) return {std::move(*hit), "disk", ""};
  }
  const auto remote = rt::RemoteTier::get();
  std::unique_ptr<rt::LeaseRenewer> lease;
  const std::string token = remote ? cache::make_lease_token() : "";
  if (remote) {
    if (auto hit = remote_hit(*remote, store, want)) return {std::move(*hit), "remote", ""};
    auto state = remote->store().try_lease(key, token);
    if (state == cache::RemoteStore::LeaseState::kHeld) {
      if (defer) return {"", "deferred", ""};
      // Another node compiles it: wait for its entry, boundedly; take the lease over if it lapses (its
      // holder died or gave up), and stop waiting if the tier goes down.
      rt::log_line(fmt::format("waiting for another process compiling {} (key {})", src.kernel_name, key.substr(0, 16)));
      const auto t0 = std::chrono::steady_clock::now();
      const auto deadline = t0 + std::chrono::seconds(remote->config().wait_s);
      auto pause = std::chrono::milliseconds(20);
      while (state == cache::RemoteStore::LeaseState::kHeld && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(pause);
        pause = std::min(pause * 2, std::chrono::milliseconds(250));
        if (auto hit = remote_hit(*remote, store, want)) return {std::move(*hit), "remote", ""};
        state = remote->store().try_lease(key, token);
      }
      if (state == cache::RemoteStore::LeaseState::kHeld)
        rt::log_line(fmt::format("warning: waited {} s for another process to compile {}; compiling it here too",
                                 remote->config().wait_s, src.kernel_name));
    }
    if (state == cache::RemoteStore::LeaseState::kOwned) {
      lease = std::make_unique<rt::LeaseRenewer>(remote, key, token);
      // The previous holder may have published and released between our look and our lease.
      if (auto hit = remote_hit(*remote, store, want)) return {std::move(*hit), "remote", ""};
    }
  }
  rt::log_line(fmt::format("compiling {} (key {})", src.kernel_name, key.substr(0, 16)));
  auto r = [&] {
    const InsideNvrtc inside;
    return rt::nvrtc_compile(src, spec.arch, spec.arch_specific);
  }();
  rt::log_line(fmt::format("compiled {} in {:.3f} s", src.kernel_name, r.seconds));
  // Never publish what a lookup would refuse: it would be rebuilt on every run.
  if (const std::string p = cache::cubin_problem(r.cubin, spec.arch, src.kernel_name); (store || remote) && !p.empty()) {
    rt::log_line(fmt::format("warning: NVRTC's output for {} fails the cache's cubin check ({}); not cached", src.kernel_name, p));
    return {std::move(r.cubin), "compiled", "the cubin fails the cache's check: " + p};
  }
  cache::EntryMeta meta;
  cache::set_inputs(meta, cache::summarize(in));
  meta.key = key;
  meta.spec = spec.to_string() + " " + tile.to_string();
  if (remote && remote->config().options.write != cache::RemoteWrite::kNone) {
    // The writer drops the lease once the entry is in Redis, so that no waiter sees neither.
    remote->write_back(meta, r.cubin, lease ? key : "", token);
    if (lease) lease->hand_off();
  }
  if (store) {
    try {
      store->store(meta, r.cubin);
    } catch (const CacheError& e) {  // a full or read-only disk costs a recompile later, not this run
      std::string why = without_prefix(e.what());
      rt::log_line("warning: " + why);
      return {std::move(r.cubin), "compiled", std::move(why)};
    }
  }
  return {std::move(r.cubin), "compiled", ""};
}

// LKJIT_RECORD_MANIFEST=FILE: every kernel this process used, as a prewarm manifest
// ({"archs": [...], "kernels": [...]}), rewritten (temp then rename) whenever a new kernel is used.
void record_kernel(const std::string& name, int arch) {
  static const std::string path = rt::env("LKJIT_RECORD_MANIFEST");
  if (path.empty()) return;
  static std::mutex mu;
  static std::set<std::string> names;
  static std::set<int> archs;
  std::lock_guard<std::mutex> lock(mu);
  if (!names.insert(name).second) return;
  archs.insert(arch);
  std::string text = "{\"archs\": [";
  for (int a : archs) text += fmt::format("{}\"sm_{}\"", a == *archs.begin() ? "" : ", ", a);
  text += "],\n \"kernels\": [";
  bool first = true;
  for (const auto& n : names) {
    text += fmt::format("{}\n  \"{}\"", first ? "" : ",", n);
    first = false;
  }
  text += "]}\n";
  try {
    cache::write_file_atomically(path, text, 0644, /*create_dir=*/false);
  } catch (const CacheError& e) {
    static bool warned = false;
    if (!warned) std::cerr << "lkjit: warning: LKJIT_RECORD_MANIFEST: " << without_prefix(e.what()) << "\n";
    warned = true;
  }
}

}  // namespace

std::string nvrtc_version() { return rt::nvrtc_version(); }
std::string nvrtc_library(std::string* why) {
  std::string w;
  std::string lib = rt::nvrtc_library(&w);
  if (why) *why = w;
  return lib;
}
std::vector<int> nvrtc_archs() { return rt::nvrtc_supported_archs(); }
std::string cache_dir() { return cache::default_cache_dir(); }
bool disk_cache_enabled() { return rt::env("LKJIT_CACHE_DISABLE") != "1"; }

KeyInputsInfo kernel_key_inputs(const OpSpec& spec, const Tile& tile) {
  const GeneratedSource src = generate(spec, tile);
  const cache::KeyInputs in = key_inputs(src, spec.arch, spec.arch_specific);
  KeyInputsInfo info;
  info.key = cache::make_key(in);
  cache::copy_key_summary(info, cache::summarize(in));
  return info;
}

namespace {

CompiledKernel compile(const OpSpec& spec, const Tile& tile, bool defer_if_busy) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  CompiledKernel out;
  out.spec = spec;
  out.tile = tile;
  out.arch = spec.arch;
  auto& mem = memory_cache();
  auto from_memory = [&]() {
    std::lock_guard<std::mutex> lock(mem.mu);
    auto it = mem.cubins.find(out.key);
    if (it == mem.cubins.end()) return false;
    out.cubin = it->second;
    out.origin = "memory";
    out.seconds = elapsed();
    return true;
  };
  const std::string id = spec_id(spec, tile);
  {
    std::lock_guard<std::mutex> lock(mem.mu);
    if (auto it = mem.keys.find(id); it != mem.keys.end()) std::tie(out.kernel_name, out.key) = it->second;
  }
  if (!out.key.empty() && from_memory()) return out;

  const GeneratedSource src = generate(spec, tile);
  const cache::KeyInputs in = key_inputs(src, spec.arch, spec.arch_specific);
  out.kernel_name = src.kernel_name;
  out.key = cache::make_key(in);
  {
    std::lock_guard<std::mutex> lock(mem.mu);
    mem.keys.emplace(id, std::make_pair(out.kernel_name, out.key));
  }
  if (from_memory()) return out;
  std::lock_guard<std::mutex> key_lock(key_mutex(out.key));
  if (from_memory()) return out;  // another thread compiled it meanwhile

  std::optional<cache::DiskStore> store;
  if (disk_cache_enabled()) store.emplace(cache::default_cache_dir(), cache_max_bytes());
  Built b = load_or_compile(store ? &*store : nullptr, src, in, spec, tile, out.key, defer_if_busy);
  out.cubin = std::move(b.cubin);
  out.origin = std::move(b.origin);
  out.store_error = std::move(b.store_error);
  out.seconds = elapsed();
  if (out.origin == "deferred") return out;
  record_kernel(out.kernel_name, spec.arch);
  {
    std::lock_guard<std::mutex> lock(mem.mu);
    mem.cubins.emplace(out.key, out.cubin);
  }
  out.seconds = elapsed();
  return out;
}

}  // namespace

CompiledKernel compile_kernel(const OpSpec& spec, const Tile& tile) { return compile(spec, tile, false); }
CompiledKernel compile_kernel_unless_busy(const OpSpec& spec, const Tile& tile) { return compile(spec, tile, true); }

void flush_remote_cache() { rt::flush_remote_cache(); }

void evict_compiled(const CompiledKernel& k) {
  {
    auto& mem = memory_cache();
    std::lock_guard<std::mutex> lock(mem.mu);
    mem.cubins.erase(k.key);
  }
  rt::log_line(fmt::format("dropping {} (key {}) from the caches; its next lookup rebuilds it", k.kernel_name,
                           k.key.substr(0, 16)));
  if (disk_cache_enabled()) cache::DiskStore(cache::default_cache_dir()).evict(k.key);
}

}  // namespace lkjit
