// DiskStore maintenance: listings, LRU eviction under the size cap, clearing, and removal of files
// that dead writers left behind.
#include <fmt/format.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <pthread.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_set>

#include "cache/bundle.h"
#include "cache/file_io.h"
#include "cache/lock.h"
#include "cache/store.h"

namespace lkjit::cache {
namespace {

// A temp file this old belongs to a writer that died: live writers finish in seconds.
constexpr int64_t kStaleTempNs = int64_t(3600) * 1000000000;

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec))
    out.push_back(llvm::sys::path::filename(it->path()).str());
  std::sort(out.begin(), out.end());
  return out;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// A file that stays is reported, never counted as removed: a read-only directory removes nothing.
bool remove_or_note(const std::string& path, std::vector<std::string>* failed) {
  if (const std::error_code ec = llvm::sys::fs::remove(path)) {
    failed->push_back(fmt::format("cannot remove {}: {}", path, ec.message()));
    return false;
  }
  return true;
}

// Keys evicted by this process's prunes, for evicted_by_cap_here; bounded, oldest forgotten first.
struct Evictions {
  std::mutex mu;
  std::deque<std::string> order;
  std::unordered_set<std::string> keys;
};
Evictions& evictions() {
  static Evictions* e = new Evictions;  // never destroyed: prunes may run while static destructors do
  return *e;
}

// Held across fork(), so that a child never inherits it locked by a thread it does not have.
[[maybe_unused]] const bool kForkHandlers = [] {
  return ::pthread_atfork([] { evictions().mu.lock(); }, [] { evictions().mu.unlock(); },
                          [] { evictions().mu.unlock(); }) == 0;
}();

void note_evicted(const std::string& key) {
  constexpr size_t kRemembered = 65536;
  Evictions& e = evictions();
  std::lock_guard<std::mutex> lock(e.mu);
  if (!e.keys.insert(key).second) return;
  e.order.push_back(key);
  if (e.order.size() > kRemembered) {
    e.keys.erase(e.order.front());
    e.order.pop_front();
  }
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::vector<DiskStore::Listed> DiskStore::list(bool verify) const {
  std::vector<Listed> out;
  for (const auto& name : names_in(dir_)) {
    if (!ends_with(name, ".lkjit")) continue;
    Listed l;
    l.path = dir_ + "/" + name;
    l.key = name.substr(0, name.size() - 6);
    l.locked = is_locked(lock_path_for(l.key));
    if (!file_times(l.path, &l.last_used_ns, &l.file_bytes)) {
      // A dangling link is listed as unreadable, as other entries that cannot be read, not hidden. Its
      // bytes (0) are no entry's: prune does not count them either.
      if (unfollowable(l.path, errno, &l.problem, &l.last_used_ns)) out.push_back(std::move(l));
      continue;  // else removed meanwhile
    }
    std::string bytes;
    if (verify) {
      if (!read_whole_file(l.path, &bytes, &l.problem)) {
        if (l.problem.empty()) continue;
      } else if (auto e = decode_checked(bytes, l.key, &l.problem)) {
        l.meta = std::move(e->meta);
        l.ok = true;
      }
    } else {
      support::ReadResult head = read_file_prefix(l.path, kMaxEntryHeadBytes);
      if (!head.ok()) {
        if (head.status == support::ReadStatus::kMissing) continue;  // removed meanwhile
        // There but unreadable (no permission, a folder or FIFO of that name): listed as such, not hidden.
        l.problem = "cannot read: " + head.reason;
        out.push_back(std::move(l));
        continue;
      }
      if (auto m = decode_entry_meta(head.bytes, head.file_size, &l.problem)) {
        if (m->key == l.key) {
          l.meta = std::move(*m);
          l.ok = true;
        } else {
          l.problem = "key echo " + escape_bytes(m->key) + " does not match the file name";
        }
      }
    }
    out.push_back(std::move(l));
  }
  return out;
}

size_t DiskStore::compiling() const {
  size_t n = 0;
  // A compile holds "<key>.lock" before its entry exists, so count held locks, not locked entries.
  for (const auto& name : names_in(dir_))
    if (ends_with(name, ".lock") && is_key(name.substr(0, name.size() - 5)) && is_locked(dir_ + "/" + name)) ++n;
  return n;
}

size_t DiskStore::sweep_stale(std::vector<std::string>* failed) const {
  size_t n = 0;
  const int64_t now = now_ns();
  for (const auto& name : names_in(dir_)) {
    const std::string path = dir_ + "/" + name;
    if (name.rfind(".tmp-", 0) == 0) {
      int64_t mtime = 0;
      uint64_t size = 0;
      if (file_times(path, &mtime, &size) && now - mtime > kStaleTempNs && remove_or_note(path, failed)) ++n;
    } else if (ends_with(name, ".lock") && is_key(name.substr(0, name.size() - 5))) {  // lkjit's own locks only
      // Not held by anyone (its owner died): taking and releasing it removes it safely.
      FileLock l = FileLock::acquire(path, std::chrono::milliseconds(0));
      if (!l.owned()) continue;
      std::string why;
      if (l.release(&why)) ++n;
      else failed->push_back(why);
    }
  }
  return n;
}

DiskStore::PruneResult DiskStore::prune(uint64_t max_bytes, int wait_ms, bool strict) const {
  PruneResult r;
  if (!llvm::sys::fs::is_directory(dir_)) return r;
  // One pruner at a time: two would each evict for the same excess.
  FileLock guard = FileLock::acquire(dir_ + "/.prune.lock", std::chrono::milliseconds(wait_ms));
  if (guard.state() == FileLock::State::kTimedOut) {
    r.skipped = true;
    return r;
  }
  // The sweep needs no guard: a stale lock is taken before it goes, and a temp file goes by its age.
  r.stale_files = sweep_stale(&r.failed);
  struct Item {
    int64_t used_ns;
    uint64_t bytes;
    std::string key;
  };
  std::vector<Item> items;
  uint64_t total = 0;
  for (const auto& name : names_in(dir_)) {
    if (!ends_with(name, ".lkjit")) continue;
    Item it{0, 0, name.substr(0, name.size() - 6)};
    if (!file_times(dir_ + "/" + name, &it.used_ns, &it.bytes)) continue;
    total += it.bytes;
    items.push_back(std::move(it));
  }
  std::sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.used_ns != b.used_ns ? a.used_ns < b.used_ns : a.key < b.key;  // least recently used first
  });
  r.remaining = items.size();
  r.remaining_bytes = total;
  if (strict && !guard.owned() && total > max_bytes) {
    r.lock_error = guard.error();
    return r;
  }
  for (const auto& it : items) {
    if (total <= max_bytes) break;
    if (pinned(it.key) || is_locked(lock_path_for(it.key))) {
      ++r.kept_in_use;
      continue;
    }
    if (!remove_or_note(path_for(it.key), &r.failed)) continue;
    note_evicted(it.key);
    r.removed_keys.push_back(it.key);
    total -= it.bytes;
    ++r.removed;
    r.removed_bytes += it.bytes;
    --r.remaining;
  }
  r.remaining_bytes = total;
  return r;
}

bool DiskStore::evicted_by_cap_here(const std::string& key) {
  Evictions& e = evictions();
  std::lock_guard<std::mutex> lock(e.mu);
  return e.keys.count(key) != 0;
}

void DiskStore::forget_eviction(const std::string& key) {
  Evictions& e = evictions();
  std::lock_guard<std::mutex> lock(e.mu);
  if (e.keys.erase(key)) e.order.erase(std::find(e.order.begin(), e.order.end(), key));
}

DiskStore::ClearResult DiskStore::clear() const {
  ClearResult r;
  if (!llvm::sys::fs::is_directory(dir_)) return r;
  for (const auto& name : names_in(dir_)) {
    if (!ends_with(name, ".lkjit")) continue;
    const std::string key = name.substr(0, name.size() - 6);
    if (pinned(key) || is_locked(lock_path_for(key))) {
      r.in_use.push_back(key);
      continue;
    }
    if (remove_or_note(dir_ + "/" + name, &r.failed)) ++r.removed;
  }
  sweep_stale(&r.failed);
  return r;
}

}  // namespace lkjit::cache
