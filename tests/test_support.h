// Helpers shared by the CPU tests: scoped environment variables, temporary directories, whole-file
// I/O and subprocesses run through the shell.
#pragma once
#include <gtest/gtest.h>

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

namespace lkjit::test {

// Sets (or unsets, with nullptr) an environment variable for the scope; restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_.c_str(), old_->c_str(), 1);
    else ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// A fresh directory $TMPDIR/<prefix>-XXXXXX, removed with everything in it.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix) {
    std::string tmpl = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (!::mkdtemp(tmpl.data())) ADD_FAILURE() << "mkdtemp failed";
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string read_file(const std::string& path) {
  std::stringstream ss;
  ss << std::ifstream(path, std::ios::binary).rdbuf();
  return ss.str();
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// s in single quotes, safe as one /bin/sh word.
inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct CommandResult {
  int code = -1;       // exit status; -1 if the command did not exit normally
  std::string output;  // its stdout (append 2>&1 to the command for stderr too)
};

// Runs cmd through /bin/sh (popen) and collects its output and exit status.
inline CommandResult run_command(const std::string& cmd) {
  CommandResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) {
    ADD_FAILURE() << "popen failed: " << cmd;
    return r;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  if (status != -1 && WIFEXITED(status)) r.code = WEXITSTATUS(status);
  return r;
}

// Runs fn in a forked child and returns its exit status, or nullopt when it did not finish within seconds
// (the child is then killed): a read that blocks (a FIFO) fails the test instead of hanging the suite. A
// child that throws or dies by a signal returns 255 / 128 + the signal.
template <class Fn>
std::optional<int> run_in_child(Fn fn, double seconds = 20) {
  const pid_t pid = ::fork();
  if (pid < 0) return std::nullopt;
  if (pid == 0) {
    int code = 255;
    try {
      code = fn();
    } catch (...) {
    }
    ::_exit(code);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0 || std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return std::nullopt;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// The CLI command line for run_command, bounded: a run that hangs ends with exit code 124 (coreutils timeout).
inline std::string bounded(const std::string& command, int seconds = 60) {
  return "timeout -k 5 " + std::to_string(seconds) + " " + command;
}

// A cache directory that exists, passes the cache's checks, and takes no writes, for a CLI run:
// mode 0500 for a normal user. Root ignores modes, so for root the run gets a file size limit of 0
// instead (SIGXFSZ ignored, so a write fails with EFBIG). prefix goes before the command line.
struct UnwritableDir {
  std::string prefix;    // shell commands to run first
  std::string os_error;  // the strerror the failed writes report
};
inline UnwritableDir make_unwritable_dir(const std::string& dir) {
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(dir, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  if (::geteuid() != 0) return {"", "Permission denied"};
  return {"trap '' XFSZ; ulimit -f 0; ", "File too large"};
}

}  // namespace lkjit::test
