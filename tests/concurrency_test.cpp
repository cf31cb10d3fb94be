// The kernel cache from several threads at once and after fork (runtime/jit.cpp, cache/store.cpp), on the
// CPU: N threads compiling one kernel compile it once and all get the same cubin; threads storing and loading
// one key never see a torn entry; a forked child uses the caches, also when it was forked while another
// thread was compiling (its locks must not stay held in the child forever). Children run with a deadline,
// so a deadlock fails the test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cache/entry.h"
#include "cache/store.h"
#include "lkjit/generator.h"
#include "lkjit/wtconv_kernels.h"
#include "lkjit/runtime.h"
#include "tests/cubin_fixture.h"
#include "tests/test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace lkjit;  // NOLINT
using lkjit::test::run_in_child;
using lkjit::test::ScopedEnv;
using lkjit::test::TempDir;

// Fold kernels no other test compiles, so that this process's memory cache has none of them yet.
OpSpec fresh_spec(int k, int L) { return wtconv_spec(kWTConvFold, DType::kF32, k, L, true, 80); }
const Tile kFoldTile = wtconv_tile(0, 0, 0, 0, 256);

size_t entries_in(const std::string& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ".lkjit";
  return n;
}

class Concurrency : public ::testing::Test {
 protected:
  TempDir tmp_{"lkjit-concurrency-test"};
  ScopedEnv dir_{"LKJIT_CACHE_DIR", (tmp_.path() + "/cache").c_str()};
  ScopedEnv on_{"LKJIT_CACHE_DISABLE", nullptr};
  ScopedEnv cap_{"LKJIT_CACHE_MAX_BYTES", nullptr};
  ScopedEnv dump_{"LKJIT_DUMP_DIR", nullptr};
};

TEST_F(Concurrency, ThreadsCompilingOneKernelCompileItOnce) {
  const OpSpec s = fresh_spec(29, 7);
  constexpr int kThreads = 8;
  std::vector<CompiledKernel> out(kThreads);
  std::vector<std::string> errors(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ++ready;
      while (ready < kThreads) std::this_thread::yield();  // all start together
      try {
        out[t] = compile_kernel(s, kFoldTile);
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  std::map<std::string, int> origins;
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_TRUE(errors[t].empty()) << errors[t];
    ++origins[out[t].origin];
    EXPECT_EQ(out[t].cubin, out[0].cubin) << t;
    EXPECT_EQ(out[t].key, out[0].key);
  }
  EXPECT_EQ(origins["compiled"], 1) << "compiled more than once";
  EXPECT_EQ(origins["compiled"] + origins["memory"] + origins["disk"], kThreads);
  EXPECT_EQ(entries_in(tmp_.path() + "/cache"), 1u);
}

TEST_F(Concurrency, ThreadsStoringAndLoadingOneKeyNeverSeeATornEntry) {
  const cache::DiskStore store(tmp_.path() + "/store");
  // A genuine entry (tests/cubin_fixture.h), so that loads pass the trust checks; every writer its own
  // payload, a cubin of the kernel padded to its own length.
  const cache::EntryMeta m = lkjit::test::test_meta("torn");
  std::vector<std::string> payloads;
  for (int t = 0; t < 6; ++t) payloads.push_back(lkjit::test::test_payload(m, 20000 + 1000 * t));
  std::atomic<int> bad{0}, hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        if (t % 2) {
          store.store(m, payloads[t]);
          continue;
        }
        std::string why;
        if (auto p = store.load(m.key, &why)) {
          ++hits;
          // Whole entries only: one writer's bytes exactly.
          bad += std::find(payloads.begin(), payloads.end(), *p) == payloads.end();
        } else if (!why.empty()) {
          ++bad;  // a corrupt entry was seen
        }
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, 0);
  EXPECT_GT(hits, 0);
}

TEST_F(Concurrency, AForkedChildUsesTheCaches) {
  const OpSpec a = fresh_spec(27, 7), b = fresh_spec(27, 8);
  const CompiledKernel parent = compile_kernel(a, kFoldTile);
  // Threads have come and gone (a pool of lookups), as in a process that forks workers later.
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t) pool.emplace_back([&] { compile_kernel(a, kFoldTile); });
  for (auto& th : pool) th.join();
  const auto code = run_in_child(
      [&] {
        const CompiledKernel same = compile_kernel(a, kFoldTile);  // from the memory cache it inherited
        if (same.origin != "memory" || same.cubin != parent.cubin) return 2;
        const CompiledKernel other = compile_kernel(b, kFoldTile);  // a new one: NVRTC and the disk cache
        if (other.origin != "compiled" || other.cubin.empty()) return 3;
        return 0;
      },
      300);
  ASSERT_TRUE(code.has_value()) << "the child hung";
  EXPECT_EQ(*code, 0);
  // The child's entry is on disk for everyone.
  EXPECT_EQ(compile_kernel(b, kFoldTile).origin, "disk");
}

TEST_F(Concurrency, AChildForkedWhileAThreadCompilesDoesNotDeadlock) {
  // A thread compiles kernel c (held: its per-key lock, its file lock, NVRTC); the main thread forks meanwhile.
  // fork waits for NVRTC to return; the child, compiling c itself, waits on c's file lock for the parent's
  // thread to publish, and then loads it; a kernel d it compiles on its own.
  const OpSpec c = fresh_spec(25, 7), d = fresh_spec(25, 8);
  std::atomic<bool> started{false};
  CompiledKernel in_thread;
  std::thread compiler([&] {
    started = true;
    in_thread = compile_kernel(c, kFoldTile);
  });
  while (!started) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // well into generation or NVRTC
  const auto code = run_in_child(
      [&] {
        const CompiledKernel got = compile_kernel(c, kFoldTile);
        if (got.cubin.empty()) return 2;
        if (compile_kernel(d, kFoldTile).cubin.empty()) return 3;
        return 0;
      },
      120);
  compiler.join();
  ASSERT_TRUE(code.has_value()) << "the child deadlocked";
  EXPECT_EQ(*code, 0);
  EXPECT_FALSE(in_thread.cubin.empty());
}

TEST_F(Concurrency, PinsAndEvictionNotesSurviveFork) {
  // Threads store under a tiny cap (pinning, pruning, noting evictions) while the main thread forks; every
  // child stores and prunes once itself and must finish: no lock of a writer thread stays held in it.
  const cache::DiskStore store(tmp_.path() + "/store", 30000);
  cache::EntryMeta m;
  m.kernel_name = "k";
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < 3; ++t)
    writers.emplace_back([&, t] {
      for (int i = 0; !stop; ++i) {
        cache::EntryMeta mm = m;
        mm.key = std::string(63, "abc"[t]) + "0123456789abcdef"[i % 16];
        store.store(mm, std::string(10000, 'x'));
      }
    });
  int failures = 0;
  for (int f = 0; f < 10; ++f) {
    const auto code = run_in_child(
        [&] {
          cache::EntryMeta mm = m;
          mm.key = std::string(64, 'f');
          store.store(mm, std::string(10000, 'y'));  // pins, prunes under the cap, notes evictions
          store.load(mm.key);                          // the writers' prunes may have evicted it: a miss is fine
          return 0;
        },
        60);
    failures += !code || *code != 0;
  }
  stop = true;
  for (auto& th : writers) th.join();
  EXPECT_EQ(failures, 0);
}

}  // namespace
