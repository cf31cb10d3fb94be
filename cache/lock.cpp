#include "cache/lock.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace lkjit::cache {
namespace {

bool same_file(int fd, const std::string& path) {
  struct stat a {}, b {};
  return ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

}  // namespace

FileLock FileLock::acquire(const std::string& path, std::chrono::milliseconds max_wait) {
  FileLock l;
  l.path_ = path;
  const auto deadline = std::chrono::steady_clock::now() + max_wait;
  auto pause = std::chrono::milliseconds(2);
  for (;;) {
    // O_NOFOLLOW: a symlink planted under a lock's name must not get its target truncated. O_NONBLOCK: a FIFO
    // there must not block the open (it is refused below; on a regular file the flag changes nothing).
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (fd < 0) {
      l.error_ = fmt::format("{}: cannot open lock file: {}", path, std::strerror(errno));
      return l;
    }
    if (struct stat st {}; ::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      l.error_ = fmt::format("{}: cannot use lock file: it is not a regular file", path);
      return l;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      if (same_file(fd, path)) {
        // The pid is only for people reading the directory; the lock itself is the flock.
        const std::string pid = std::to_string(::getpid()) + "\n";
        const bool noted = ::ftruncate(fd, 0) == 0 && ::write(fd, pid.data(), pid.size()) > 0;
        (void)noted;
        l.fd_ = fd;
        l.state_ = State::kOwned;
        return l;
      }
      ::close(fd);  // the previous owner unlinked this inode on release: lock the new file
      continue;
    }
    const int err = errno;
    ::close(fd);
    if (err != EWOULDBLOCK && err != EINTR) {
      l.error_ = fmt::format("{}: cannot lock: {}", path, std::strerror(err));
      return l;
    }
    l.waited_ = true;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      l.state_ = State::kTimedOut;
      return l;
    }
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(50));
  }
}

FileLock::FileLock(FileLock&& o) noexcept { *this = std::move(o); }

FileLock& FileLock::operator=(FileLock&& o) noexcept {
  if (this != &o) {
    release();
    path_ = std::move(o.path_);
    fd_ = o.fd_;
    state_ = o.state_;
    waited_ = o.waited_;
    error_ = std::move(o.error_);
    o.fd_ = -1;
    o.state_ = State::kError;
  }
  return *this;
}

bool FileLock::release(std::string* why) {
  if (fd_ < 0) return true;
  // Unlinked while still held: nobody can be between "locked" and "checked the path".
  const bool unlinked = ::unlink(path_.c_str()) == 0 || errno == ENOENT;
  if (!unlinked && why) *why = fmt::format("cannot remove {}: {}", path_, std::strerror(errno));
  ::close(fd_);
  fd_ = -1;
  state_ = State::kError;
  return unlinked;
}

bool is_locked(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return false;
  struct stat st {};
  const bool held = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::flock(fd, LOCK_SH | LOCK_NB) != 0 &&
                    errno == EWOULDBLOCK;
  ::close(fd);
  return held;
}

}  // namespace lkjit::cache
