#include "cache/store.h"

#include <fmt/format.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/raw_ostream.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "cache/key.h"
#include "lkjit/error.h"

namespace lkjit::cache {
namespace {

constexpr const char* kMagic = "LKJIT-KERNEL-CACHE";

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v && *v) ? std::string(v) : fallback;
}

}  // namespace

std::string default_cache_dir() {
  if (const char* v = std::getenv("LKJIT_CACHE_DIR"); v && *v) return v;
  std::string xdg = env_or("XDG_CACHE_HOME", "");
  if (xdg.empty()) xdg = env_or("HOME", "/tmp") + "/.cache";
  return xdg + "/lkjit";
}

std::string encode_entry(const EntryMeta& m, const std::string& payload) {
  llvm::json::Object o{{"format", kEntryFormatVersion},
                       {"key", m.key},
                       {"kernel", m.kernel_name},
                       {"spec", m.spec},
                       {"arch", m.arch},
                       {"nvrtc", m.nvrtc_version},
                       {"size", static_cast<int64_t>(payload.size())},
                       {"sha256", sha256_hex(payload)}};
  std::string head;
  llvm::raw_string_ostream os(head);
  os << llvm::json::Value(std::move(o));
  os.flush();
  return fmt::format("{} {}\n{}\n", kMagic, kEntryFormatVersion, head) + payload;
}

std::optional<Entry> decode_entry(const std::string& bytes, const std::string& expected_key, std::string* why) {
  auto fail = [&](const std::string& w) -> std::optional<Entry> {
    if (why) *why = w;
    return std::nullopt;
  };
  const size_t nl1 = bytes.find('\n');
  if (nl1 == std::string::npos) return fail("truncated header");
  const std::string magic = fmt::format("{} {}", kMagic, kEntryFormatVersion);
  if (bytes.compare(0, nl1, magic) != 0) return fail(fmt::format("bad magic or format version (expected '{}')", magic));
  const size_t nl2 = bytes.find('\n', nl1 + 1);
  if (nl2 == std::string::npos) return fail("truncated metadata");
  auto parsed = llvm::json::parse(llvm::StringRef(bytes).substr(nl1 + 1, nl2 - nl1 - 1));
  if (!parsed) {
    const std::string msg = llvm::toString(parsed.takeError());
    return fail("metadata is not JSON: " + msg);
  }
  const llvm::json::Object* o = parsed->getAsObject();
  if (!o) return fail("metadata is not a JSON object");
  Entry e;
  auto str = [&](const char* k) { auto v = o->getString(k); return v ? v->str() : std::string(); };
  e.meta.key = str("key");
  e.meta.kernel_name = str("kernel");
  e.meta.spec = str("spec");
  e.meta.nvrtc_version = str("nvrtc");
  e.meta.sha256 = str("sha256");
  e.meta.arch = static_cast<int>(o->getInteger("arch").getValueOr(0));
  e.meta.size = static_cast<uint64_t>(o->getInteger("size").getValueOr(-1));
  if (!expected_key.empty() && e.meta.key != expected_key)
    return fail(fmt::format("key echo {} does not match the requested key {}", e.meta.key, expected_key));
  const uint64_t have = bytes.size() - nl2 - 1;
  if (have != e.meta.size) return fail(fmt::format("payload is {} bytes, header says {}", have, e.meta.size));
  e.payload = bytes.substr(nl2 + 1);
  if (sha256_hex(e.payload) != e.meta.sha256) return fail("payload checksum mismatch");
  return e;
}

DiskStore::DiskStore(std::string dir) : dir_(std::move(dir)) {}

std::string DiskStore::path_for(const std::string& key) const { return dir_ + "/" + key + ".lkjit"; }

void DiskStore::ensure_dir() const {
  if (auto ec = llvm::sys::fs::create_directories(dir_, true, llvm::sys::fs::perms::owner_all))
    throw CacheError(fmt::format("lkjit: error: {}: cannot create cache directory: {}", dir_, ec.message()));
  struct stat st {};
  if (::stat(dir_.c_str(), &st) != 0)
    throw CacheError(fmt::format("lkjit: error: {}: cannot stat cache directory", dir_));
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    throw CacheError(fmt::format(
        "lkjit: error: {}: cache directory is writable by other users (mode {:o}); refusing to load "
        "kernels from it. Fix with: chmod 700 {}", dir_, st.st_mode & 0777, dir_));
  if (st.st_uid != ::getuid())
    throw CacheError(fmt::format("lkjit: error: {}: cache directory is owned by uid {}, not by this user ({})",
                                 dir_, st.st_uid, ::getuid()));
}

std::optional<std::string> DiskStore::load(const std::string& key, std::string* why) const {
  ensure_dir();
  const std::string path = path_for(key);
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf) return std::nullopt;  // a miss
  std::string problem;
  auto e = decode_entry((*buf)->getBuffer().str(), key, &problem);
  if (!e) {
    llvm::sys::fs::remove(path);  // corrupt: drop it so it gets rebuilt
    if (why) *why = fmt::format("{}: {}; entry removed", path, problem);
    return std::nullopt;
  }
  return std::move(e->payload);
}

void DiskStore::store(const EntryMeta& meta, const std::string& payload) const {
  ensure_dir();
  const std::string path = path_for(meta.key);
  const std::string bytes = encode_entry(meta, payload);
  int fd = -1;
  llvm::SmallString<256> tmp;
  if (auto ec = llvm::sys::fs::createUniqueFile(dir_ + "/.tmp-%%%%%%%%%%%%", fd, tmp,
                                                llvm::sys::fs::OF_None, 0600))
    throw CacheError(fmt::format("lkjit: error: {}: cannot create a temporary file: {}", dir_, ec.message()));
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << bytes;
    os.flush();
    if (os.has_error()) {
      const std::string msg = os.error().message();
      os.clear_error();
      llvm::sys::fs::remove(tmp);
      throw CacheError(fmt::format("lkjit: error: {}: write failed: {}", tmp.str().str(), msg));
    }
  }
  if (auto ec = llvm::sys::fs::rename(tmp, path)) {
    llvm::sys::fs::remove(tmp);
    throw CacheError(fmt::format("lkjit: error: {}: cannot publish cache entry: {}", path, ec.message()));
  }
}

void DiskStore::evict(const std::string& key) const { llvm::sys::fs::remove(path_for(key)); }

std::vector<DiskStore::Listed> DiskStore::list() const {
  std::vector<Listed> out;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir_, ec), end; it != end && !ec; it.increment(ec)) {
    const std::string p = it->path();
    if (llvm::sys::path::extension(p) != ".lkjit") continue;
    Listed l;
    l.path = p;
    auto buf = llvm::MemoryBuffer::getFile(p, false, false);
    if (!buf) {
      l.problem = "unreadable";
    } else {
      const std::string key = llvm::sys::path::stem(p).str();
      if (auto e = decode_entry((*buf)->getBuffer().str(), key, &l.problem)) {
        l.meta = e->meta;
        l.ok = true;
      }
    }
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace lkjit::cache
