// A node-local exclusive lock on one path (a cache key's "<key>.lock"), held through flock(2).
//
// Why flock and not llvm::LockFileManager: the kernel drops an flock the moment its owner exits or
// is killed (kill -9, OOM), so a crashed compile can never leave a lock that makes later runs wait,
// and there is no pid to misjudge (a zombie or a reused pid looks alive to LockFileManager's check).
// LockFileManager also installs LLVM's signal handlers in the host process (PyTorch's, here).
// The holder unlinks the file on release; a waiter that then wins the unlinked inode sees that the
// path no longer names it and retries, so two owners can never both believe they hold the lock.
#pragma once
#include <chrono>
#include <string>

namespace lkjit::cache {

class FileLock {
 public:
  enum class State {
    kOwned,     // this object holds the lock
    kTimedOut,  // another owner held it for longer than the wait allowed
    kError,     // the lock file could not be opened (read-only directory, ...): see error()
  };

  // Waits up to max_wait for the lock (0: one try). Never throws.
  static FileLock acquire(const std::string& path, std::chrono::milliseconds max_wait);

  FileLock() = default;
  ~FileLock() { release(); }
  FileLock(FileLock&& o) noexcept;
  FileLock& operator=(FileLock&& o) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  State state() const { return state_; }
  bool owned() const { return state_ == State::kOwned; }
  bool waited() const { return waited_; }  // another owner held it when we first asked
  const std::string& error() const { return error_; }
  // Unlinks the lock file and drops the lock. False, with *why naming the path and the OS message,
  // when the file could not be unlinked (a read-only directory); the lock is dropped all the same.
  bool release(std::string* why = nullptr);

 private:
  std::string path_;
  int fd_ = -1;
  State state_ = State::kError;
  bool waited_ = false;
  std::string error_;
};

// True while some process holds the lock at path (false when the file is absent or unlocked).
bool is_locked(const std::string& path);

}  // namespace lkjit::cache
