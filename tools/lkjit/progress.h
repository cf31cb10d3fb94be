// A one-line progress bar on stderr for the CLI's long loops (no Debian package provides a C++ one).
// Thread-safe; redraws at most every 100 ms; when disabled it prints nothing at all, so logs and
// pipes stay clean.
#pragma once
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

namespace lkjit::tool {

class Progress {
 public:
  Progress(size_t total, bool enabled) : total_(total), enabled_(enabled), start_(Clock::now()) {}
  ~Progress() { finish(); }

  // One item done; label names it (the kernel just compiled).
  void tick(const std::string& label) {
    std::lock_guard<std::mutex> lock(mu_);
    ++done_;
    if (!enabled_) return;
    const auto now = Clock::now();
    if (done_ != total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    draw(label);
  }

  void finish() {
    std::lock_guard<std::mutex> lock(mu_);
    if (!enabled_ || finished_) return;
    finished_ = true;
    std::fputs("\r\033[K", stderr);  // leave the line for the summary
    std::fflush(stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;

  void draw(const std::string& label) {
    constexpr int kWidth = 30;
    const int filled = total_ ? static_cast<int>(kWidth * done_ / total_) : kWidth;
    const double s = std::chrono::duration<double>(Clock::now() - start_).count();
    std::string bar(static_cast<size_t>(filled), '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r\033[K[%s] %zu/%zu %3d%% %6.1fs  %.60s", bar.c_str(), done_, total_,
                 total_ ? static_cast<int>(100 * done_ / total_) : 100, s, label.c_str());
    std::fflush(stderr);
  }

  std::mutex mu_;
  size_t total_ = 0, done_ = 0;
  bool enabled_ = false, finished_ = false;
  Clock::time_point start_, last_draw_{};
};

}  // namespace lkjit::tool
