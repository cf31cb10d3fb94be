// lkjit/remote_cache.h over cache/remote_store.h and the process's tier (runtime/remote_tier.h).
#include <fmt/format.h>

#include <filesystem>

#include "cache/remote_decisions.h"
#include "cache/remote_store.h"
#include "cache/signing.h"
#include "cache/store.h"
#include "cache/tuning_db.h"
#include "lkjit/cache.h"
#include "lkjit/error.h"
#include "lkjit/remote_cache.h"
#include "runtime/cache_trust.h"
#include "runtime/remote_tier.h"
#include "support/parse_int.h"

namespace lkjit {

struct RemoteCache::Impl {
  std::shared_ptr<rt::RemoteTier> tier;
};

namespace {

constexpr size_t kScanLimit = 100000;

const char* mode_name(cache::RemoteWrite w) {
  return w == cache::RemoteWrite::kAll ? "all" : w == cache::RemoteWrite::kKernels ? "kernels" : "none";
}

// The value's header and entry metadata from its first bytes, without reading the payload.
RemoteEntryInfo peek(cache::RemoteStore& s, const std::string& key) {
  RemoteEntryInfo info;
  info.key = key;
  const std::string rkey = s.entry_key(key);
  std::string why;
  const auto len = s.raw({"STRLEN", rkey}, &why);
  const auto head = s.raw({"GETRANGE", rkey, "0", std::to_string(cache::kMaxEntryHeadBytes)}, &why);
  const auto ttl = s.raw({"TTL", rkey}, &why);
  if (!len || !head) {
    info.problem = "unreachable: " + why;
    return info;
  }
  info.value_bytes = static_cast<uint64_t>(len->integer);
  info.ttl_s = ttl ? ttl->integer : -1;
  // The header through the store's own parser (decimal count, hex fields), as get_entry reads it.
  std::string bad_head;
  const auto h = cache::parse_value_head(head->str, &bad_head);
  if (!h) {
    info.problem = "not a remote cache value: " + bad_head;
    return info;
  }
  info.signer = h->key_id;
  const uint64_t declared = h->entry_bytes, nl = h->body_at - 1;
  if (declared + nl + 1 != info.value_bytes) {
    info.problem = fmt::format("value header declares {} bytes of entry; the value holds {}", declared,
                               info.value_bytes - nl - 1);
    return info;
  }
  const auto meta = cache::decode_entry_meta(std::string_view(head->str).substr(nl + 1), declared, &info.problem);
  if (!meta) return info;
  info.kernel_name = meta->kernel_name;
  info.arch = meta->arch;
  info.ok = true;
  return info;
}

RemoteEntryInfo checked(cache::RemoteStore& s, const std::string& key) {
  RemoteEntryInfo info = peek(s, key);
  if (info.problem.rfind("unreachable", 0) == 0) return info;
  cache::Lookup want;
  want.key = key;  // no lookup fields: the entry must be what it says
  const auto f = s.get_entry(want);
  info.ok = f.entry.has_value();
  info.problem = f.unavailable ? "unreachable" : f.refused;
  if (f.entry) {
    info.kernel_name = f.entry->meta.kernel_name;
    info.arch = f.entry->meta.arch;
  }
  return info;
}

}  // namespace

std::optional<RemoteCache> RemoteCache::from_env() {
  auto tier = rt::RemoteTier::get();
  if (!tier) return std::nullopt;
  RemoteCache c;
  c.impl_ = std::make_shared<Impl>();
  c.impl_->tier = std::move(tier);
  return c;
}

RemoteCacheStatus RemoteCache::status() {
  auto& t = *impl_->tier;
  auto& s = t.store();
  RemoteCacheStatus st;
  st.url = t.config().url;
  st.write_mode = mode_name(t.config().options.write);
  st.ttl_s = t.config().options.ttl_s;
  try {
    if (auto signer = rt::cache_signer()) st.signer = signer->key_id();
    st.trusted_keys = rt::cache_trusted_keys()->size();
  } catch (const std::exception&) {
  }
  std::string why;
  const auto ping = s.raw({"PING"}, &why);
  st.reachable = ping.has_value();
  if (!st.reachable) {
    st.error = why;
    return st;
  }
  bool t1 = false, t2 = false, t3 = false;
  st.entries = s.scan("entry", kScanLimit, &t1).size();
  st.decisions = s.scan("decision", kScanLimit, &t2).size();
  st.leases = s.scan("lease", kScanLimit, &t3).size();
  st.counts_truncated = t1 || t2 || t3;
  if (const auto h = s.raw({"HGETALL", std::string(cache::RemoteStore::kPrefix) + "stats"}, &why))
    for (size_t i = 0; i + 1 < h->elements.size(); i += 2)
      // Counters as HINCRBY writes them; a field that is no decimal integer (another writer's) is left out.
      if (const auto n = support::parse_decimal(h->elements[i + 1].str); n.status == support::IntStatus::kOk)
        st.stats[h->elements[i].str] = n.value;
  if (const auto info = s.raw({"INFO", "memory"}, &why)) {
    auto field = [&](const std::string& name) {
      const size_t at = info->str.find(name + ":");
      if (at == std::string::npos) return std::string();
      const size_t end = info->str.find_first_of("\r\n", at);
      return info->str.substr(at + name.size() + 1, end - at - name.size() - 1);
    };
    st.used_memory = field("used_memory_human");
    st.maxmemory = field("maxmemory_human");
    st.maxmemory_policy = field("maxmemory_policy");
  }
  return st;
}

std::vector<RemoteEntryInfo> RemoteCache::list(size_t limit, bool verify, bool* truncated) {
  auto& s = impl_->tier->store();
  std::vector<RemoteEntryInfo> out;
  for (const auto& key : s.scan("entry", limit, truncated)) out.push_back(verify ? checked(s, key) : peek(s, key));
  return out;
}

std::vector<RemoteEntryInfo> RemoteCache::verify(size_t limit, size_t* removed) {
  auto out = list(limit, /*verify=*/true);
  size_t n = 0;
  for (const auto& e : out)
    if (!e.ok && e.problem != "unreachable" && impl_->tier->store().remove_entry(e.key)) ++n;
  if (removed) *removed = n;
  return out;
}

std::optional<RemoteEntryInfo> RemoteCache::entry(const std::string& key, bool* reachable) {
  auto& s = impl_->tier->store();
  std::string why;
  const auto exists = s.raw({"EXISTS", s.entry_key(key)}, &why);
  if (reachable) *reachable = exists.has_value();
  if (!exists || exists->integer != 1) return std::nullopt;
  return checked(s, key);
}

RemoteTransferReport RemoteCache::push(const KernelCache& disk) {
  auto& t = *impl_->tier;
  auto& s = t.store();
  RemoteTransferReport r;
  if (t.config().options.write == cache::RemoteWrite::kNone) {
    r.problems.push_back("LKJIT_REMOTE_CACHE_WRITE=none: this process writes nothing to the remote cache");
    return r;
  }
  const cache::DiskStore store(disk.dir());
  for (const auto& info : disk.list(/*verify=*/false)) {
    if (!info.ok || info.stray) continue;
    std::string why;
    const auto exists = s.raw({"EXISTS", s.entry_key(info.key)}, &why);
    if (!exists) {
      ++r.failed;
      r.problems.push_back(fmt::format("{}: {}", info.key.substr(0, 16), why));
      break;  // unreachable: the rest would fail the same way
    }
    if (exists->integer == 1) {
      ++r.present;
      continue;
    }
    const auto e = store.read(info.key, &why);
    if (!e) {
      ++r.refused;
      r.problems.push_back(fmt::format("{}: {}", info.key.substr(0, 16), why));
      continue;
    }
    if (s.put_entry(e->meta, e->payload)) ++r.moved;
    else ++r.failed;
  }
  return r;
}

RemoteTransferReport RemoteCache::pull(const KernelCache& disk) {
  auto& s = impl_->tier->store();
  RemoteTransferReport r;
  const cache::DiskStore store(disk.dir(), disk.max_bytes());
  store.ensure_dir();
  std::string why;
  if (!s.raw({"PING"}, &why)) {
    ++r.failed;
    r.problems.push_back(why);
    return r;
  }
  for (const auto& key : s.scan("entry", kScanLimit)) {
    std::error_code ec;
    if (std::filesystem::exists(store.path_for(key), ec) && store.read(key)) {
      ++r.present;
      continue;
    }
    cache::Lookup want;
    want.key = key;
    const auto f = s.get_entry(want);
    if (!f.entry) {
      ++(f.unavailable ? r.failed : r.refused);
      r.problems.push_back(fmt::format("{}: {}", key.substr(0, 16), f.unavailable ? "unreachable" : f.refused));
      continue;
    }
    try {
      store.store(f.entry->meta, f.entry->payload);
      ++r.moved;
    } catch (const CacheError& e) {
      ++r.failed;
      r.problems.push_back(e.what());
    }
  }
  return r;
}

RemoteTransferReport RemoteCache::push_decisions(const std::string& tuning_db) {
  auto& t = *impl_->tier;
  RemoteTransferReport r;
  if (t.config().options.write != cache::RemoteWrite::kAll) {
    r.problems.push_back(fmt::format("LKJIT_REMOTE_CACHE_WRITE={}: this process writes no decisions", mode_name(t.config().options.write)));
    return r;
  }
  const cache::TuningDb db = cache::TuningDb::load(tuning_db);
  for (const auto& rec : db.records()) {
    if (cache::put_decision(t.store(), rec)) ++r.moved;
    else ++r.failed;
  }
  return r;
}

RemoteTransferReport RemoteCache::pull_decisions(const std::string& tuning_db) {
  auto& s = impl_->tier->store();
  RemoteTransferReport r;
  std::vector<cache::TuningRecord> add;
  for (const auto& key : s.scan("decision", kScanLimit)) {
    std::string why;
    const auto text = s.get_decision(key, &why);
    if (!text) {
      ++r.refused;
      r.problems.push_back(fmt::format("decision {}: {}", key, why.empty() ? "unreadable" : why));
      continue;
    }
    try {
      const auto db = cache::TuningDb::parse(*text, "remote decision " + key);
      if (db.records().size() != 1 || cache::decision_key(db.records()[0]) != key) {
        ++r.refused;
        r.problems.push_back(fmt::format("decision {}: not the one record of its key", key));
        continue;
      }
      add.push_back(db.records()[0]);
      ++r.moved;
    } catch (const CacheError& e) {
      ++r.refused;
      r.problems.push_back(e.what());
    }
  }
  if (!add.empty()) cache::TuningDb::save_merged(tuning_db, add);
  return r;
}

}  // namespace lkjit
