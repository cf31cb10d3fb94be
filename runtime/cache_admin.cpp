// lkjit/cache.h over cache/: the public, LLVM-free face of the on-disk store for tools.
#include <algorithm>
#include <filesystem>

#include "cache/bundle.h"
#include "cache/file_io.h"
#include "cache/key.h"
#include "cache/store.h"
#include "cache/trust.h"
#include "lkjit/cache.h"
#include "lkjit/runtime.h"
#include "runtime/cache_trust.h"
#include "runtime/env.h"

namespace lkjit {
namespace {

cache::KeySummary to_summary(const KeyInputsInfo& i) {
  cache::KeySummary s;
  cache::copy_key_summary(s, i);
  return s;
}

CacheEntryInfo to_info(const cache::DiskStore::Listed& l) {
  CacheEntryInfo e;
  e.key = l.key;
  e.path = l.path;
  e.file_bytes = l.file_bytes;
  e.last_used = double(l.last_used_ns) * 1e-9;
  e.locked = l.locked;
  e.ok = l.ok;
  e.problem = l.problem;
  e.stray = !cache::is_key(l.key);
  if (l.ok) {
    e.inputs.key = l.key;
    cache::copy_key_summary(e.inputs, l.meta);
    e.spec = l.meta.spec;
    e.format = l.meta.format;
    e.payload_bytes = l.meta.size;
  }
  return e;
}

std::vector<CacheEntryInfo> to_infos(const std::vector<cache::DiskStore::Listed>& listed) {
  std::vector<CacheEntryInfo> out;
  for (const auto& l : listed) out.push_back(to_info(l));
  std::stable_sort(out.begin(), out.end(),
                   [](const CacheEntryInfo& a, const CacheEntryInfo& b) { return a.last_used > b.last_used; });
  return out;
}

}  // namespace

std::vector<std::string> key_input_differences(const KeyInputsInfo& from, const KeyInputsInfo& to) {
  return cache::key_differences(to_summary(from), to_summary(to));
}

uint64_t parse_byte_size(const std::string& text, const char* what) { return cache::parse_byte_size(text, what); }

void write_file_atomically(const std::string& path, const std::string& bytes, unsigned mode) {
  cache::write_file_atomically(path, bytes, mode, /*create_dir=*/false);
}

uint64_t cache_max_bytes() { return cache::parse_byte_size(rt::env("LKJIT_CACHE_MAX_BYTES"), "LKJIT_CACHE_MAX_BYTES"); }

KernelCache::KernelCache() : KernelCache(cache_dir(), cache_max_bytes()) {}
KernelCache::KernelCache(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}

void KernelCache::check() const { cache::DiskStore(dir_).ensure_dir(); }

bool KernelCache::exists() const { return cache::DiskStore(dir_).check_existing(); }

std::vector<CacheEntryInfo> KernelCache::list(bool verify) const {
  const cache::DiskStore store(dir_);
  if (!store.check_existing()) return {};
  return to_infos(store.list(verify));
}

size_t KernelCache::compiling() const {
  const cache::DiskStore store(dir_);
  return store.check_existing() ? store.compiling() : 0;
}

std::vector<CacheEntryInfo> KernelCache::verify() const {
  const cache::DiskStore store(dir_);
  if (!store.check_existing()) return {};  // and listable; an absent directory is an empty cache
  auto infos = to_infos(store.list(/*verify=*/true));
  for (auto& e : infos)
    if (!e.ok)
      if (const std::error_code ec = store.remove_bad(e.key)) e.remove_error = ec.message();
  return infos;
}

CachePruneReport KernelCache::prune(std::optional<uint64_t> max_bytes) const {
  const cache::DiskStore store(dir_);
  if (!store.check_existing()) return {};
  // 0 means no cap, as in LKJIT_CACHE_MAX_BYTES: only stale files go.
  const uint64_t cap = max_bytes.value_or(max_bytes_);
  // An explicit prune waits for a concurrent one rather than silently doing nothing.
  const auto r = store.prune(cap ? cap : UINT64_MAX, /*wait_ms=*/10000, /*strict=*/true);
  return {r.removed,     r.removed_bytes, r.kept_in_use, r.remaining, r.remaining_bytes,
          r.stale_files, r.skipped,       r.failed,      r.lock_error};
}

CacheClearReport KernelCache::clear() const {
  const cache::DiskStore store(dir_);
  if (!store.check_existing()) return {};
  auto r = store.clear();
  return {r.removed, std::move(r.failed), std::move(r.in_use)};
}

CacheRefusals cache_refusals() {
  return {cache::refusals(cache::Source::kDisk), cache::refusals(cache::Source::kBundle),
          cache::refusals(cache::Source::kRemote)};
}

CacheBundleReport KernelCache::export_bundle(const std::string& file, const std::vector<std::string>& keys) const {
  const cache::DiskStore store(dir_);
  store.check_existing();  // never ship entries out of a directory others could have written
  const auto signer = rt::cache_signer();  // a key that cannot be used fails before anything is written
  const auto s = cache::export_bundle(store, keys, file, signer.get());
  CacheBundleReport r{s.entries, 0, s.present, 0, s.bytes, s.skipped};
  r.format = s.format;
  r.signer = s.signer;
  return r;
}

CacheBundleReport KernelCache::import_bundle(const std::string& file) const {
  const cache::DiskStore store(dir_, max_bytes_);
  store.ensure_dir();
  store.check_existing();  // and listable (the cap is enforced by listing)
  const auto trusted = rt::cache_trusted_keys();
  const auto s = cache::import_bundle(store, file, trusted.get());
  // The size cap's own evictions (prune's list), not whatever else is missing afterwards.
  CacheBundleReport r{s.entries, s.added.size(), s.present, s.evicted.size(), s.bytes, s.skipped};
  r.refused = s.refused;
  r.format = s.format;
  r.signer = s.signer;
  r.signature_checked = !trusted->empty();
  return r;
}

size_t KernelCache::missing(const std::vector<std::string>& keys) const {
  // One stat a key, not a listing that reads every entry's metadata.
  const cache::DiskStore store(dir_);
  return static_cast<size_t>(std::count_if(keys.begin(), keys.end(), [&](const std::string& k) {
    std::error_code ec;
    return !std::filesystem::exists(store.path_for(k), ec);
  }));
}

size_t KernelCache::evicted_by_cap(const std::vector<std::string>& keys) const {
  const cache::DiskStore store(dir_);
  return static_cast<size_t>(std::count_if(keys.begin(), keys.end(), [&](const std::string& k) {
    std::error_code ec;
    return cache::DiskStore::evicted_by_cap_here(k) && !std::filesystem::exists(store.path_for(k), ec);
  }));
}

}  // namespace lkjit
