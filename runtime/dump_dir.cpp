#include "runtime/dump_dir.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <llvm/Support/FileSystem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <iostream>

#include "runtime/env.h"
#include "support/message.h"

namespace lkjit::rt {
namespace {

// Writes bytes to name inside the folder dfd: a new temp file, then renamed over name. errno-style result.
int write_in(int dfd, const std::string& name, const std::string& bytes) {
  static std::atomic<unsigned> counter{0};
  const std::string tmp = fmt::format(".{}.tmp-{}-{}", name, ::getpid(), counter++);
  const int fd = ::openat(dfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return errno;
  int err = 0;
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      err = w < 0 ? errno : EIO;
      break;
    }
    done += static_cast<size_t>(w);
  }
  if (::close(fd) != 0 && !err) err = errno;
  if (!err && ::renameat(dfd, tmp.c_str(), dfd, name.c_str()) != 0) err = errno;
  if (err) ::unlinkat(dfd, tmp.c_str(), 0);
  return err;
}

}  // namespace

std::string write_dump(const std::string& dir, const std::string& kernel_name, const std::string& source,
                       const std::string& log) {
  const std::string shown = support::clip(dir, support::kClipPathBytes);
  // A generated name never holds these; refused all the same, so that no name can leave the folder.
  if (kernel_name.empty() || kernel_name[0] == '.' || kernel_name.find('/') != std::string::npos)
    return fmt::format("{}: kernel name '{}' is not a file name", shown, support::clip(kernel_name));
  if (auto ec = llvm::sys::fs::create_directories(dir, /*IgnoreExisting=*/true, llvm::sys::fs::perms::owner_all))
    return fmt::format("{}: cannot create the folder: {}", shown, ec.message());
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return fmt::format("{}: cannot open the folder: {}", shown, std::strerror(errno));
  std::string problem;
  for (const auto& [ext, bytes] : {std::pair<const char*, const std::string*>{".cu", &source}, {".log", &log}})
    if (const int err = write_in(dfd, kernel_name + ext, *bytes)) {
      problem = fmt::format("{}/{}{}: {}", shown, kernel_name, ext, std::strerror(err));
      break;
    }
  ::close(dfd);
  return problem;
}

void dump_source(const GeneratedSource& src, const std::string& log) {
  const std::string dir = env("LKJIT_DUMP_DIR");
  if (dir.empty()) return;
  const std::string problem = write_dump(dir, src.kernel_name, src.source, log);
  static std::atomic<bool> warned{false};
  if (!problem.empty() && !warned.exchange(true))  // a debugging aid: never fails the compile, never floods
    std::cerr << "lkjit: warning: LKJIT_DUMP_DIR: cannot write " << problem
              << "; the compile goes on, and further dump failures are not reported\n";
}

}  // namespace lkjit::rt
