#include "cache/file_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "cache/entry.h"
#include "lkjit/error.h"

namespace lkjit::cache {

bool read_whole_file(const std::string& path, std::string* out, std::string* why, uint64_t max_bytes) {
  support::ReadOptions o;
  o.max_bytes = max_bytes;
  o.what = "cache file";
  support::ReadResult r = support::read_file(path, o);
  if (r.ok()) {
    *out = std::move(r.bytes);
    return true;
  }
  if (r.status != support::ReadStatus::kMissing && why) *why = fmt::format("{}: cannot read: {}", path, r.reason);
  return false;
}

support::ReadResult read_file_prefix(const std::string& path, size_t max_bytes) {
  support::ReadOptions o;
  o.max_bytes = max_bytes;
  o.prefix = true;
  o.what = "cache file";
  return support::read_file(path, o);
}

namespace {

// Why a write failed: the cache's wording ("DIR: cannot create a temporary file: REASON") and, for a file the user
// named, the step and the reason alone ("create", "No such file or directory").
struct WriteFailure {
  std::string message, step, reason;
};

std::optional<WriteFailure> write_atomically(const std::string& dir, const std::string& path, const std::string& bytes,
                                             unsigned mode) {
  // The rename would replace whatever is there: a device or FIFO (--bundle /dev/null as root) is refused.
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
    return WriteFailure{fmt::format("{}: cannot publish: it exists and is not a regular file; supported: a new path or "
                                    "a regular file, which is replaced", path),
                        "replace", "it exists and is not a regular file; supported: a new path or a regular file"};
  int fd = -1;
  llvm::SmallString<256> tmp;
  if (auto ec = llvm::sys::fs::createUniqueFile(dir + "/.tmp-%%%%%%%%%%%%", fd, tmp, llvm::sys::fs::OF_None, mode))
    return WriteFailure{fmt::format("{}: cannot create a temporary file: {}", dir, ec.message()), "create", ec.message()};
  size_t done = 0;
  int err = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      err = w < 0 ? errno : EIO;
      break;
    }
    done += static_cast<size_t>(w);
  }
  if (::close(fd) != 0 && !err) err = errno;
  if (err) {
    llvm::sys::fs::remove(tmp);
    return WriteFailure{fmt::format("{}: write failed: {}", tmp.str().str(), std::strerror(err)), "write",
                        std::strerror(err)};
  }
  if (auto ec = llvm::sys::fs::rename(tmp, path)) {
    llvm::sys::fs::remove(tmp);
    return WriteFailure{fmt::format("{}: cannot publish: {}", path, ec.message()), "create", ec.message()};
  }
  return std::nullopt;
}

}  // namespace

void write_file_atomically(const std::string& dir, const std::string& path, const std::string& bytes, unsigned mode) {
  if (const auto f = write_atomically(dir, path, bytes, mode)) throw CacheError("lkjit: error: " + f->message);
}

void write_output_file(const std::string& path, const std::string& bytes, unsigned mode) {
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty()) dir = ".";
  if (const auto f = write_atomically(dir.str().str(), path, bytes, mode))
    throw Error(ErrorCode::kInvalidArgument, fmt::format("lkjit: error: cannot {} {}: {}", f->step, path, f->reason));
}

void write_file_atomically(const std::string& path, const std::string& bytes, unsigned mode, bool create_dir) {
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty()) dir = ".";
  if (create_dir)
    if (auto ec = llvm::sys::fs::create_directories(dir))
      throw CacheError(fmt::format("lkjit: error: {}: cannot create directory: {}", dir.str().str(), ec.message()));
  write_file_atomically(dir.str().str(), path, bytes, mode);
}

void stamp_now(const std::string& path) { ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

bool file_times(const std::string& path, int64_t* mtime_ns, uint64_t* size) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  *mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  *size = static_cast<uint64_t>(st.st_size);
  return true;
}

bool unfollowable(const std::string& path, int stat_errno, std::string* why, int64_t* mtime_ns) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return false;
  *why = fmt::format("cannot read: {}", std::strerror(stat_errno));
  if (S_ISLNK(st.st_mode)) {
    char target[4096];
    const ssize_t n = ::readlink(path.c_str(), target, sizeof target);
    *why += fmt::format(" (a symbolic link to {})", n < 0 ? "?" : escape_bytes(std::string_view(target, n)));
  }
  if (mtime_ns) *mtime_ns = int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return true;
}

}  // namespace lkjit::cache
