#include "support/read_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "support/message.h"
#include "support/raise.h"

namespace lkjit::support {
namespace {

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

ReadResult fail(ReadStatus status, int err, std::string reason) {
  ReadResult r;
  r.status = status;
  r.os_error = err;
  r.reason = std::move(reason);
  return r;
}

// " (a symbolic link to TARGET)" when path is a link, else "".
std::string link_note(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return "";
  char target[4096];
  const ssize_t n = ::readlink(path.c_str(), target, sizeof target);
  return fmt::format(" (a symbolic link to {})", n < 0 ? std::string("?") : clip(std::string_view(target, n), kClipPathBytes));
}

}  // namespace

const char* file_kind(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

namespace {

ReadResult read_unnamed(const std::string& path, const ReadOptions& o) {
  auto not_regular = [&](unsigned mode, const char* note) {
    return fail(ReadStatus::kNotRegular, 0, fmt::format("it is {}, not a regular file{}", file_kind(mode), note));
  };
  auto os_error = [&](int err) { return fail(ReadStatus::kError, err, std::strerror(err)); };
  // Refused by its kind before it is opened: opening some devices has effects (a tape rewinds).
  struct stat st {};
  if ((o.follow_links ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) == 0 && !S_ISREG(st.st_mode))
    return not_regular(st.st_mode, S_ISLNK(st.st_mode) ? "; links are not followed here" : "");
  const int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (o.follow_links ? 0 : O_NOFOLLOW);
  Fd fd(::open(path.c_str(), flags));
  if (fd.get() < 0) {
    const int err = errno;
    if (err == ENOENT) return fail(ReadStatus::kMissing, err, std::strerror(err) + link_note(path));
    if (err == ELOOP && !o.follow_links) return not_regular(S_IFLNK, "; links are not followed here");
    if (err == ENXIO) return not_regular(S_IFSOCK, "");  // open(2) answers ENXIO for a socket
    return os_error(err);
  }
  // What was opened, not what the path named a moment before (it may have been swapped).
  if (::fstat(fd.get(), &st) != 0) return os_error(errno);
  if (!S_ISREG(st.st_mode)) return not_regular(st.st_mode, "");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  auto too_large = [&](const std::string& how) {
    ReadResult r = fail(ReadStatus::kTooLarge, 0, fmt::format("it {}; supported: at most {} bytes", how, o.max_bytes));
    r.file_size = size;
    r.mode = st.st_mode;
    r.owner_uid = st.st_uid;
    return r;
  };
  if (size > o.max_bytes && !o.prefix) return too_large(fmt::format("is {} bytes", size));
  // The file may have changed size since fstat: read to EOF, but never past the cap (+1 byte, which tells a
  // file that grew past it).
  const uint64_t cap = o.max_bytes == UINT64_MAX ? o.max_bytes : o.max_bytes + 1;
  const uint64_t want = o.prefix ? std::min(size, o.max_bytes) : cap;
  ReadResult r;
  r.file_size = size;
  r.mode = st.st_mode;
  r.owner_uid = st.st_uid;
  r.bytes.resize(static_cast<size_t>(std::min(size, want)));
  size_t got = 0;
  char probe[65536];
  while (got < want) {
    const bool into_probe = got == r.bytes.size();  // past the size fstat gave: grow only by what arrives
    char* dst = into_probe ? probe : r.bytes.data() + got;
    const size_t room = into_probe ? static_cast<size_t>(std::min<uint64_t>(sizeof probe, want - got)) : r.bytes.size() - got;
    const ssize_t n = ::read(fd.get(), dst, room);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return os_error(errno);
    if (n == 0) break;
    if (into_probe) r.bytes.append(probe, static_cast<size_t>(n));
    got += static_cast<size_t>(n);
  }
  r.bytes.resize(got);
  if (!o.prefix && got > o.max_bytes) return too_large(fmt::format("grew beyond {} bytes while it was read", o.max_bytes));
  r.status = ReadStatus::kOk;
  return r;
}

}  // namespace

ReadResult read_file(const std::string& path, const ReadOptions& o) {
  ReadResult r = read_unnamed(path, o);
  if (!r.ok()) r.why = fmt::format("{}: cannot read {}: {}", clip(path, kClipPathBytes), o.what, r.reason);
  return r;
}

std::string read_file_or_throw(const std::string& path, const ReadOptions& options, ErrorCode code) {
  ReadResult r = read_file(path, options);
  if (!r.ok()) raise(code, "lkjit: error: " + r.why);
  return std::move(r.bytes);
}

}  // namespace lkjit::support
