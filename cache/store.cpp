#include "cache/store.h"

#include <dirent.h>
#include <pthread.h>
#include <fmt/format.h>
#include <llvm/Support/FileSystem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include "cache/file_io.h"
#include "lkjit/error.h"
#include "support/message.h"
#include "support/parse_int.h"

namespace lkjit::cache {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

struct Pins {
  std::mutex mu;
  std::multiset<std::string> keys;
};
Pins& pins() {
  static Pins* p = new Pins;  // never destroyed: a Pin may end while static destructors run
  return *p;
}

// fork(): the pins lock is taken across it, so a child never inherits it held by a thread it does not have;
// the child's pins are those of threads it lacks (the forking thread holds none: pins live inside store
// calls), so they go.
[[maybe_unused]] const bool kForkHandlers = [] {
  return ::pthread_atfork([] { pins().mu.lock(); }, [] { pins().mu.unlock(); },
                          [] {
                            pins().keys.clear();
                            pins().mu.unlock();
                          }) == 0;
}();

}  // namespace

std::string default_cache_dir() {
  if (const char* v = std::getenv("LKJIT_CACHE_DIR"); v && *v) return v;
  std::string xdg = env_or("XDG_CACHE_HOME", "");
  if (xdg.empty()) xdg = env_or("HOME", "/tmp") + "/.cache";
  return xdg + "/lkjit";
}

uint64_t parse_byte_size(const std::string& text, const char* what) {
  auto bad = [&] {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("lkjit: error: {}='{}' is not a size; supported: a byte count in [0, 2^62] with an "
                             "optional K, M, G or T suffix (powers of 1024), 0 for no limit", what, support::clip(text)));
  };
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  // The count through the one decimal parser (no octal: 010 is ten), then the unit.
  const support::IntParse count = support::parse_decimal(std::string_view(text).substr(0, i), 0, int64_t(1) << 62);
  if (count.status != support::IntStatus::kOk) throw bad();
  const auto n = static_cast<uint64_t>(count.value);
  std::string unit;
  for (size_t j = i; j < text.size(); ++j)
    if (text[j] != ' ') unit += static_cast<char>(std::toupper(static_cast<unsigned char>(text[j])));
  int shift = 0;
  if (unit.empty() || unit == "B") shift = 0;
  else if (unit == "K" || unit == "KB" || unit == "KIB") shift = 10;
  else if (unit == "M" || unit == "MB" || unit == "MIB") shift = 20;
  else if (unit == "G" || unit == "GB" || unit == "GIB") shift = 30;
  else if (unit == "T" || unit == "TB" || unit == "TIB") shift = 40;
  else throw bad();
  if (n > (uint64_t(1) << (62 - shift))) throw bad();
  return n << shift;
}

DiskStore::Pin::Pin(std::string key) : key_(std::move(key)) {
  std::lock_guard<std::mutex> lock(pins().mu);
  pins().keys.insert(key_);
}

DiskStore::Pin::~Pin() {
  std::lock_guard<std::mutex> lock(pins().mu);
  pins().keys.erase(pins().keys.find(key_));
}

bool DiskStore::pinned(const std::string& key) {
  std::lock_guard<std::mutex> lock(pins().mu);
  return pins().keys.count(key) != 0;
}

DiskStore::DiskStore(std::string dir, uint64_t max_bytes) : dir_(std::move(dir)), max_bytes_(max_bytes) {}

std::string DiskStore::path_for(const std::string& key) const { return dir_ + "/" + key + ".lkjit"; }
std::string DiskStore::lock_path_for(const std::string& key) const { return dir_ + "/" + key + ".lock"; }

namespace {

// Is a directory, owned by this user and writable by nobody else: another user who can write here
// could plant a cubin under any key, so refuse rather than load it.
void check_private_dir(const std::string& dir, const struct stat& st) {
  if (!S_ISDIR(st.st_mode))
    throw CacheError(fmt::format("lkjit: error: {}: cache path is not a directory", dir));
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    throw CacheError(fmt::format(
        "lkjit: error: {}: cache directory is writable by other users (mode {:04o}); refusing to use it. "
        "Fix with: chmod 700 {}", dir, st.st_mode & 07777, dir));
  if (st.st_uid != ::getuid())
    throw CacheError(fmt::format("lkjit: error: {}: cache directory is owned by uid {}, not by this user ({})",
                                 dir, st.st_uid, ::getuid()));
}

}  // namespace

void DiskStore::ensure_dir() const {
  if (auto ec = llvm::sys::fs::create_directories(dir_, true, llvm::sys::fs::perms::owner_all))
    throw CacheError(fmt::format("lkjit: error: {}: cannot create cache directory: {}", dir_, ec.message()));
  struct stat st {};
  if (::stat(dir_.c_str(), &st) != 0)
    throw CacheError(fmt::format("lkjit: error: {}: cannot stat cache directory: {}", dir_, std::strerror(errno)));
  check_private_dir(dir_, st);
}

bool DiskStore::check_existing() const {
  struct stat st {};
  if (::stat(dir_.c_str(), &st) != 0) {
    if (errno == ENOENT) return false;
    throw CacheError(fmt::format("lkjit: error: {}: cannot stat cache directory: {}", dir_, std::strerror(errno)));
  }
  check_private_dir(dir_, st);
  // A listing that silently skips an unreadable directory would report an empty cache.
  DIR* d = ::opendir(dir_.c_str());
  if (!d) throw CacheError(fmt::format("lkjit: error: {}: cannot list cache directory: {}", dir_, std::strerror(errno)));
  ::closedir(d);
  return true;
}

std::optional<Entry> DiskStore::read_checked(const std::string& key, const Lookup* want, std::string* why) const {
  ensure_dir();
  const Pin pin(key);
  const std::string path = path_for(key);
  std::string bytes, problem;
  if (!read_whole_file(path, &bytes, &problem)) {
    if (!problem.empty() && why) *why = problem;  // unreadable (not merely absent)
    return std::nullopt;
  }
  auto e = decode_entry(bytes, key, &problem);
  if (e)  // a lookup's own fields first: they say best why this is not the entry asked for
    if (std::string p = want ? entry_problem(*e, *want) : entry_problem(*e); !p.empty()) {
      problem = "refused: " + p;
      e.reset();
    }
  if (!e) {
    // Corrupt or refused: drop it so that it gets rebuilt. A writer renames whole files only, so what
    // we read is what is there; at worst we remove a good entry published since, and it is rebuilt.
    count_refusal(Source::kDisk);
    const std::error_code ec = llvm::sys::fs::remove(path);
    if (why)
      *why = ec ? fmt::format("{}: {}; cannot remove it: {}", path, problem, ec.message())
                : fmt::format("{}: {}; entry removed", path, problem);
  }
  return e;
}

std::optional<Entry> DiskStore::read(const std::string& key, std::string* why) const {
  return read_checked(key, nullptr, why);
}

std::error_code DiskStore::remove_bad(const std::string& key) const {
  const std::string path = path_for(key);
  std::string bytes, problem;
  if (read_whole_file(path, &bytes, &problem)) {
    if (decode_checked(bytes, key, &problem)) return {};  // a good entry was published meanwhile
  } else if (struct stat st {}; problem.empty() && ::lstat(path.c_str(), &st) != 0) {
    return {};  // gone already (a dangling link is not: it reads as absent, and goes)
  }
  // llvm::sys::fs::remove refuses FIFOs and sockets; unlink takes any name but a folder's.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return llvm::sys::fs::remove(path);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return std::error_code(errno, std::generic_category());
  return {};
}

std::optional<std::string> DiskStore::load(const Lookup& want, std::string* why) const {
  auto e = read_checked(want.key, &want, why);
  if (!e) return std::nullopt;
  stamp_now(path_for(want.key));
  return std::move(e->payload);
}

std::optional<std::string> DiskStore::load(const std::string& key, std::string* why) const {
  auto e = read(key, why);
  if (!e) return std::nullopt;
  stamp_now(path_for(key));
  return std::move(e->payload);
}

void DiskStore::store(const EntryMeta& meta, const std::string& payload) const {
  ensure_dir();
  const Pin pin(meta.key);
  const std::string path = path_for(meta.key);
  forget_eviction(meta.key);
  // No fsync: a torn file after a power loss fails its checksum on load and is rebuilt.
  write_file_atomically(dir_, path, encode_entry(meta, payload));
  if (max_bytes_) prune(max_bytes_);  // notes what it evicts (evicted_by_cap_here)
}

void DiskStore::evict(const std::string& key) const { llvm::sys::fs::remove(path_for(key)); }

}  // namespace lkjit::cache
