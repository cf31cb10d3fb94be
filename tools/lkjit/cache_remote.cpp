// The remote tier in `lkjit cache`: its block in stat, ls, verify and explain, and `cache push|pull`, which
// move kernel entries and tuning decisions between this machine's cache and Redis (LKJIT_REMOTE_CACHE).
#include <fmt/format.h>

#include <iostream>

#include "lkjit/cache.h"
#include "lkjit/error.h"
#include "lkjit/remote_cache.h"
#include "lkjit/tuning.h"
#include "tools/lkjit/cache_remote.h"
#include "tools/lkjit/common.h"

namespace lkjit::tool {
namespace {

constexpr size_t kListLimit = 10000;

std::string ttl_text(int64_t ttl) {
  if (ttl < 0) return "no expiry";
  if (ttl < 7200) return fmt::format("{} s", ttl);
  if (ttl < 172800) return fmt::format("{} h", ttl / 3600);
  return fmt::format("{} d", ttl / 86400);
}

}  // namespace

void remote_stat() {
  auto rc = RemoteCache::from_env();
  if (!rc) return;
  const auto st = rc->status();
  std::cout << fmt::format("remote     {} (write {}, TTL {}{})\n", st.url, st.write_mode,
                           st.ttl_s ? ttl_text(st.ttl_s) : "none", st.ttl_s ? ", refreshed on hit" : "");
  if (!st.reachable) {
    std::cout << fmt::format("  unreachable: {}\n", st.error);
    return;
  }
  std::cout << fmt::format("  entries {}{}, decisions {}, leases held {}\n", st.entries, st.counts_truncated ? "+" : "",
                           st.decisions, st.leases);
  std::string stats;
  for (const auto& [k, v] : st.stats) stats += fmt::format("{}{} {}", stats.empty() ? "" : ", ", k, v);
  if (!stats.empty()) std::cout << "  counters " << stats << "\n";
  if (!st.used_memory.empty())
    std::cout << fmt::format("  memory {} used, maxmemory {} ({}){}\n", st.used_memory,
                             st.maxmemory == "0B" ? "unlimited" : st.maxmemory, st.maxmemory_policy,
                             st.maxmemory_policy.find("lru") == std::string::npos &&
                                     st.maxmemory_policy.find("lfu") == std::string::npos
                                 ? "; an LRU/LFU policy keeps a full tier writable (README)"
                                 : "");
  std::cout << fmt::format("  signing {}, trusted keys {}\n", st.signer.empty() ? "off" : "key " + st.signer.substr(0, 16),
                           st.trusted_keys ? std::to_string(st.trusted_keys) : "none (signatures not checked)");
}

void remote_ls() {
  auto rc = RemoteCache::from_env();
  if (!rc) return;
  bool truncated = false;
  const auto entries = rc->list(kListLimit, /*verify=*/false, &truncated);
  std::cout << fmt::format("remote entries in {}:\n", rc->status().url);
  for (const auto& e : entries) {
    if (!e.ok) {
      std::cout << fmt::format("{:<16}  (unreadable: {})\n", e.key.substr(0, 16), e.problem);
      continue;
    }
    std::cout << fmt::format("{:<16}  {:<60} {:>6} {:>9}  TTL {}{}\n", e.key.substr(0, 16), e.kernel_name,
                             arch_name(e.arch), e.value_bytes, ttl_text(e.ttl_s),
                             e.signer.empty() ? "  unsigned" : "  signed " + e.signer.substr(0, 8));
  }
  std::cout << (truncated ? fmt::format("{}+ remote entries\n", entries.size())
                          : counted(entries.size(), "remote entry", "remote entries") + "\n");
}

int remote_verify() {
  auto rc = RemoteCache::from_env();
  if (!rc) return 0;
  size_t removed = 0;
  const auto entries = rc->verify(kListLimit, &removed);
  size_t bad = 0;
  for (const auto& e : entries) {
    if (e.ok) continue;
    ++bad;
    std::cout << fmt::format("remote refused: {}: {}\n", e.key, e.problem);
  }
  std::cout << fmt::format("verify: {} ok, {} refused{}\n", counted(entries.size() - bad, "remote entry", "remote entries"),
                           bad, bad ? fmt::format(" ({} removed)", removed) : "");
  return bad ? static_cast<int>(ErrorCode::kCache) : 0;
}

void remote_explain(const std::string& key) {
  auto rc = RemoteCache::from_env();
  if (!rc) return;
  bool reachable = false;
  const auto e = rc->entry(key, &reachable);
  if (!reachable) std::cout << "remote: unreachable\n";
  else if (!e) std::cout << "remote: not in the remote cache\n";
  else if (e->ok) std::cout << fmt::format("remote: present ({} bytes, TTL {}, {})\n", e->value_bytes, ttl_text(e->ttl_s),
                                           e->signer.empty() ? "unsigned" : "signed by key " + e->signer.substr(0, 16));
  else std::cout << fmt::format("remote: present but refused: {}\n", e->problem);
}

int remote_transfer(const KernelCache& c, bool push, bool decisions) {
  auto rc = RemoteCache::from_env();
  if (!rc)
    throw Error(ErrorCode::kUsage, fmt::format("lkjit: error: cache {}: LKJIT_REMOTE_CACHE is not set (or not a usable "
                                               "URL); supported: redis://[user:password@]host:port/db", push ? "push" : "pull"));
  const char* what = push ? "push" : "pull";
  auto report = [&](const RemoteTransferReport& r, const char* one, const char* many) {
    for (const auto& p : r.problems) std::cerr << fmt::format("{}: {}\n", what, p);
    std::cout << fmt::format("{}: {} {}, {} already there, {} refused, {} failed\n", what, counted(r.moved, one, many),
                             push ? "written to the remote cache" : "written here", r.present, r.refused, r.failed);
    return r.refused || r.failed || (r.moved == 0 && !r.problems.empty());
  };
  bool bad = push ? report(rc->push(c), "entry", "entries") : report(rc->pull(c), "entry", "entries");
  if (decisions) {
    const std::string db = tuning_db_path();
    bad |= push ? report(rc->push_decisions(db), "decision", "decisions")
                : report(rc->pull_decisions(db), "decision", "decisions");
  }
  flush_remote_cache();
  return bad ? static_cast<int>(ErrorCode::kCache) : 0;
}

}  // namespace lkjit::tool
