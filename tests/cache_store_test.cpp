// Tests of the cache's concurrency and maintenance (cache/lock.cpp, cache/prune.cpp, cache/bundle.cpp,
// runtime/cache_admin.cpp): key locks across processes and a killed owner, LRU eviction under the size
// cap and what it must never evict, corruption recovery through compile_kernel, bundles, sizes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cache/bundle.h"
#include "cache/key.h"
#include "cache/lock.h"
#include "cache/store.h"
#include "lkjit/wtconv_kernels.h"
#include "lkjit/cache.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/runtime.h"
#include "tests/cubin_fixture.h"
#include "tests/test_support.h"

namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace lkjit;         // NOLINT
using namespace lkjit::cache;  // NOLINT
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

using lkjit::test::read_file;
using lkjit::test::ScopedEnv;
using lkjit::test::TempDir;
using lkjit::test::write_file;

constexpr char kTmpPrefix[] = "lkjit-store-test";

// Entries that pass the trust checks: kernel lkjit_test_<c>_sm90, inputs hashing to key_of(c), a cubin.
EntryMeta meta_of(char c) { return lkjit::test::test_meta(std::string(1, c)); }
std::string key_of(char c) { return meta_of(c).key; }
std::string payload_of(char c, size_t min_bytes = 0) { return lkjit::test::test_payload(meta_of(c), min_bytes); }

EntryMeta meta_for(const std::string& key, const std::string& kernel = "lkjit_wtconv_fold_k3_L1_w256_sm90") {
  EntryMeta m;
  m.key = key;
  m.kernel_name = kernel;
  m.spec = "wtconv_fold f32 k=3 L=1 sm_90 w256";
  m.arch = 90;
  m.nvrtc_version = "13.0";
  m.generator_version = 1;
  m.options = {"--gpu-architecture=sm_90"};
  m.source_sha256 = sha256_hex(key);
  return m;
}

// Sets an entry's last-use stamp (its mtime) to `seconds_ago` before now.
void set_last_used(const std::string& path, int seconds_ago) {
  fs::last_write_time(path, fs::file_time_type::clock::now() - std::chrono::seconds(seconds_ago));
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::vector<std::string> entry_keys(const DiskStore& s) {
  std::vector<std::string> keys;
  for (const auto& l : s.list(false)) keys.push_back(l.key);
  std::sort(keys.begin(), keys.end());
  return keys;
}

// Runs fn in a forked child and returns its pid; the child exits with fn's result.
template <class Fn>
pid_t fork_child(Fn fn) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(fn());
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// ---- locks ------------------------------------------------------------------------------------------

TEST(FileLock, ExcludesAndCleansUp) {
  TempDir tmp(kTmpPrefix);
  const std::string path = tmp.path() + "/k.lock";
  FileLock a = FileLock::acquire(path, milliseconds(0));
  ASSERT_TRUE(a.owned()) << a.error();
  EXPECT_FALSE(a.waited());
  EXPECT_TRUE(is_locked(path));
  const auto t0 = Clock::now();
  FileLock b = FileLock::acquire(path, milliseconds(200));
  EXPECT_EQ(b.state(), FileLock::State::kTimedOut);
  EXPECT_TRUE(b.waited());
  EXPECT_GE(Clock::now() - t0, milliseconds(190));
  a.release();
  EXPECT_FALSE(fs::exists(path)) << "a released lock leaves its file behind";
  EXPECT_FALSE(is_locked(path));
  FileLock c = FileLock::acquire(path, milliseconds(0));
  EXPECT_TRUE(c.owned());
}

TEST(FileLock, ReportsAnUnusableDirectory) {
  FileLock l = FileLock::acquire("/nonexistent-lkjit-dir/k.lock", milliseconds(0));
  EXPECT_EQ(l.state(), FileLock::State::kError);
  EXPECT_THAT(l.error(), HasSubstr("/nonexistent-lkjit-dir/k.lock"));
}

TEST(FileLock, AKilledOwnerReleasesAtOnce) {
  TempDir tmp(kTmpPrefix);
  const std::string path = tmp.path() + "/k.lock";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = fork_child([&] {
    FileLock l = FileLock::acquire(path, milliseconds(0));
    const char c = l.owned() ? 'y' : 'n';
    if (::write(ready[1], &c, 1) != 1) return 1;
    ::pause();  // holds the lock until killed
    return 0;
  });
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  EXPECT_TRUE(is_locked(path));
  ::kill(child, SIGKILL);
  wait_exit(child);
  ::close(ready[0]);
  ::close(ready[1]);
  EXPECT_TRUE(fs::exists(path)) << "the scenario needs the dead owner's lock file left behind";
  const auto t0 = Clock::now();
  FileLock l = FileLock::acquire(path, milliseconds(60000));
  EXPECT_TRUE(l.owned());
  EXPECT_LT(Clock::now() - t0, milliseconds(1000)) << "waited on a dead owner";
}

TEST(FileLock, SerializesProcessesAndThreads) {
  // Read-increment-write of a counter under the lock from 3 processes x 2 threads: no lost update.
  TempDir tmp(kTmpPrefix);
  const std::string lock = tmp.path() + "/c.lock", counter = tmp.path() + "/counter";
  write_file(counter, "0");
  constexpr int kProcs = 3, kThreads = 2, kIters = 40;
  auto work = [&] {
    for (int i = 0; i < kIters; ++i) {
      FileLock l = FileLock::acquire(lock, milliseconds(30000));
      if (!l.owned()) return 1;
      const int n = std::stoi(read_file(counter));
      write_file(counter + ".tmp", std::to_string(n + 1));
      fs::rename(counter + ".tmp", counter);
    }
    return 0;
  };
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p)
    kids.push_back(fork_child([&] {
      std::atomic<int> bad{0};
      std::vector<std::thread> ts;
      for (int t = 0; t < kThreads; ++t) ts.emplace_back([&] { bad += work(); });
      for (auto& t : ts) t.join();
      return bad.load();
    }));
  for (pid_t k : kids) EXPECT_EQ(wait_exit(k), 0);
  EXPECT_EQ(std::stoi(read_file(counter)), kProcs * kThreads * kIters);
}

// ---- size cap and LRU -------------------------------------------------------------------------------

class StoreTest : public ::testing::Test {
 protected:
  // Four entries of the same size, last used A (oldest) .. D (newest).
  void fill() {
    const DiskStore s(tmp_.path());
    for (char c : {'a', 'b', 'c', 'd'}) s.store(meta_of(c), payload_of(c, 1000));
    int age = 400;
    for (char c : {'a', 'b', 'c', 'd'}) set_last_used(s.path_for(key_of(c)), age -= 100);
    entry_bytes_ = fs::file_size(s.path_for(key_of('a')));
  }
  TempDir tmp_{kTmpPrefix};
  uint64_t entry_bytes_ = 0;
};

TEST_F(StoreTest, EvictsLeastRecentlyUsedFirst) {
  fill();
  const DiskStore s(tmp_.path());
  // A hit makes A the most recently used: B and C go first.
  ASSERT_TRUE(s.load(key_of('a')).has_value());
  const auto r = s.prune(2 * entry_bytes_);
  EXPECT_EQ(r.removed, 2u);
  EXPECT_EQ(r.removed_bytes, 2 * entry_bytes_);
  EXPECT_EQ(r.remaining, 2u);
  EXPECT_EQ(entry_keys(s), sorted({key_of('a'), key_of('d')}));
}

TEST_F(StoreTest, TheCapIsEnforcedOnStore) {
  fill();
  // Room for three: storing E evicts the least recently used (A), never E itself.
  const DiskStore capped(tmp_.path(), 3 * entry_bytes_ + entry_bytes_ / 2);
  capped.store(meta_of('e'), payload_of('e', 1000));
  const auto keys = entry_keys(capped);
  EXPECT_EQ(keys.size(), 3u);
  EXPECT_EQ(std::count(keys.begin(), keys.end(), key_of('e')), 1) << "the entry just stored was evicted";
  EXPECT_EQ(std::count(keys.begin(), keys.end(), key_of('a')), 0);
  EXPECT_EQ(std::count(keys.begin(), keys.end(), key_of('b')), 0);
  // A cap below one entry still keeps the newest.
  const DiskStore tiny(tmp_.path(), 1);
  tiny.store(meta_of('f'), payload_of('f'));
  EXPECT_EQ(entry_keys(tiny), std::vector<std::string>{key_of('f')});
}

TEST_F(StoreTest, NeverEvictsEntriesInUse) {
  fill();
  const DiskStore s(tmp_.path());
  const DiskStore::Pin loading(key_of('a'));                            // being loaded here
  FileLock compiling = FileLock::acquire(s.lock_path_for(key_of('b')), milliseconds(0));  // locked by a compile
  ASSERT_TRUE(compiling.owned());
  const auto r = s.prune(0);
  EXPECT_EQ(r.kept_in_use, 2u);
  EXPECT_EQ(r.removed, 2u);
  EXPECT_EQ(entry_keys(s), sorted({key_of('a'), key_of('b')}));
  // clear() spares them too.
  compiling.release();
  const auto cleared = s.clear();
  EXPECT_EQ(cleared.removed, 1u);
  EXPECT_TRUE(cleared.failed.empty());
  EXPECT_EQ(cleared.in_use, std::vector<std::string>{key_of('a')}) << "clear did not say what it kept";
  EXPECT_EQ(entry_keys(s), std::vector<std::string>{key_of('a')});
}

TEST_F(StoreTest, CompilingCountsHeldLocksNotLockedEntries) {
  fill();
  const DiskStore s(tmp_.path());
  write_file(s.lock_path_for(key_of('e')), "12345\n");  // its owner died: nobody holds it
  FileLock recompiling = FileLock::acquire(s.lock_path_for(key_of('a')), milliseconds(0));  // has an entry
  FileLock first = FileLock::acquire(s.lock_path_for(key_of('f')), milliseconds(0));        // no entry yet
  FileLock pruning = FileLock::acquire(tmp_.path() + "/.prune.lock", milliseconds(0));       // not a kernel
  ASSERT_TRUE(recompiling.owned() && first.owned() && pruning.owned());
  EXPECT_EQ(s.compiling(), 2u);
  EXPECT_EQ(KernelCache(tmp_.path()).compiling(), 2u);
  first.release();
  EXPECT_EQ(s.compiling(), 1u);
  EXPECT_EQ(KernelCache(tmp_.path() + "/none").compiling(), 0u);
}

TEST_F(StoreTest, PruneRemovesWhatDeadWritersLeft) {
  fill();
  const DiskStore s(tmp_.path());
  const std::string old_tmp = tmp_.path() + "/.tmp-deadbeef0000", new_tmp = tmp_.path() + "/.tmp-inflight000";
  write_file(old_tmp, "half an entry");
  set_last_used(old_tmp, 7200);
  write_file(new_tmp, "being written");
  write_file(s.lock_path_for(key_of('c')), "12345\n");  // its owner died: nobody holds it
  FileLock live = FileLock::acquire(s.lock_path_for(key_of('d')), milliseconds(0));
  const auto r = s.prune(UINT64_MAX);
  EXPECT_EQ(r.removed, 0u);
  EXPECT_EQ(r.stale_files, 2u);
  EXPECT_FALSE(fs::exists(old_tmp));
  EXPECT_TRUE(fs::exists(new_tmp)) << "a fresh temp file may belong to a live writer";
  EXPECT_FALSE(fs::exists(s.lock_path_for(key_of('c'))));
  EXPECT_TRUE(fs::exists(s.lock_path_for(key_of('d'))));
}

TEST(CacheSize, ParsesAndNamesBadValues) {
  EXPECT_EQ(lkjit::parse_byte_size("0", "X"), 0u);
  EXPECT_EQ(lkjit::parse_byte_size("4096", "X"), 4096u);
  EXPECT_EQ(lkjit::parse_byte_size("512K", "X"), 512u << 10);
  EXPECT_EQ(lkjit::parse_byte_size("3MiB", "X"), 3u << 20);
  EXPECT_EQ(lkjit::parse_byte_size("1g", "X"), uint64_t(1) << 30);
  EXPECT_EQ(lkjit::parse_byte_size("2 TB", "X"), uint64_t(2) << 40);
  for (const char* bad : {"", "-1", "1.5G", "G", "12Q", "99999999999999999999", "5000000000T"}) {
    try {
      lkjit::parse_byte_size(bad, "LKJIT_CACHE_MAX_BYTES");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_THAT(e.what(), AllOf(HasSubstr(std::string("LKJIT_CACHE_MAX_BYTES='") + bad + "'"), HasSubstr("K, M, G or T")));
    }
  }
}

// ---- compile_kernel: corruption recovery, the cap, the lock --------------------------------------------
// Each test uses a fold tile (threads) no other test compiles, so its first lookup is a miss.

class CompileRecovery : public ::testing::Test {
 protected:
  TempDir tmp_{kTmpPrefix};
  const std::string dir_ = tmp_.path() + "/kernels";
  ScopedEnv cache_dir_{"LKJIT_CACHE_DIR", dir_.c_str()};
  ScopedEnv enabled_{"LKJIT_CACHE_DISABLE", nullptr};
  ScopedEnv cap_{"LKJIT_CACHE_MAX_BYTES", nullptr};
  ScopedEnv log_{"LKJIT_LOG", "1"};
  const OpSpec spec_ = wtconv_spec(kWTConvFold, DType::kF32, 5, 2, true, 80);
};

// Drops (spec, tile) from this process's memory cache, so a test's first lookup is a miss even when
// the test runs again (--gtest_repeat).
void forget(const OpSpec& spec, const Tile& t) {
  CompiledKernel k;
  k.key = kernel_key_inputs(spec, t).key;
  evict_compiled(k);
}

// Compiles t in this process (it is not in the memory cache yet), damages its entry with `damage`,
// then looks it up from a fresh process's point of view: the entry must be detected, removed,
// rebuilt and logged, and the cubin handed out must be the real one.
void expect_recovery(const OpSpec& spec, const Tile& t, const std::string& dir,
                     const std::function<void(std::string&)>& damage, const char* what) {
  SCOPED_TRACE(what);
  forget(spec, t);
  const CompiledKernel good = compile_kernel(spec, t);
  ASSERT_EQ(good.origin, "compiled");
  const std::string path = dir + "/" + good.key + ".lkjit";
  std::string bytes = read_file(path);
  damage(bytes);
  evict_compiled(good);     // drops the memory copy (and the entry), as in a fresh process
  write_file(path, bytes);  // then the damaged entry is what the lookup finds
  ::testing::internal::CaptureStderr();
  const CompiledKernel again = compile_kernel(spec, t);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(again.origin, "compiled");
  EXPECT_EQ(again.cubin, good.cubin) << "a damaged cubin reached the caller";
  EXPECT_THAT(log, AllOf(HasSubstr("bad cache entry"), HasSubstr(path), HasSubstr("entry removed")));
  std::string why;
  EXPECT_EQ(DiskStore(dir).load(good.key, &why).value_or(""), good.cubin) << why;
}

TEST_F(CompileRecovery, TruncatedFlippedAndWrongKeyEntriesAreRebuilt) {
  expect_recovery(spec_, wtconv_tile(0, 0, 0, 0, 32), dir_, [](std::string& b) { b.resize(b.size() / 2); }, "truncated");
  expect_recovery(spec_, wtconv_tile(0, 0, 0, 0, 64), dir_, [](std::string& b) { b[b.size() - 100] ^= 0x10; }, "flipped byte");
  expect_recovery(spec_, wtconv_tile(0, 0, 0, 0, 96),
                  dir_, [](std::string& b) {
                    // An intact entry of another key: checksum fine, key echo wrong.
                    EntryMeta m = meta_for(key_of('e'));
                    b = encode_entry(m, "\x7f" "ELF not this kernel");
                  },
                  "wrong key echo");
}

TEST_F(CompileRecovery, AStoreOverTheCapKeepsTheNewEntry) {
  ScopedEnv cap("LKJIT_CACHE_MAX_BYTES", "1");
  forget(spec_, wtconv_tile(0, 0, 0, 0, 128));
  forget(spec_, wtconv_tile(0, 0, 0, 0, 160));
  const CompiledKernel a = compile_kernel(spec_, wtconv_tile(0, 0, 0, 0, 128));
  const CompiledKernel b = compile_kernel(spec_, wtconv_tile(0, 0, 0, 0, 160));
  EXPECT_EQ(entry_keys(DiskStore(dir_)), std::vector<std::string>{b.key});
  EXPECT_NE(a.key, b.key);
}

TEST_F(CompileRecovery, AMalformedCapNamesTheValue) {
  ScopedEnv cap("LKJIT_CACHE_MAX_BYTES", "lots");
  forget(spec_, wtconv_tile(0, 0, 0, 0, 192));
  try {
    compile_kernel(spec_, wtconv_tile(0, 0, 0, 0, 192));
    ADD_FAILURE() << "compiled with LKJIT_CACHE_MAX_BYTES=lots";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("LKJIT_CACHE_MAX_BYTES='lots'"));
  }
}

TEST_F(CompileRecovery, AFailedStoreIsReportedWithTheCubin) {
  // The entry's path is taken by a directory, so publishing fails (EISDIR, even for root): the caller
  // still gets the cubin, and learns that nothing was stored.
  const Tile t = wtconv_tile(0, 0, 0, 0, 288);
  forget(spec_, t);
  const std::string key = kernel_key_inputs(spec_, t).key, path = dir_ + "/" + key + ".lkjit";
  fs::create_directories(path);
  fs::permissions(dir_, fs::perms::owner_all);
  ::testing::internal::CaptureStderr();
  const CompiledKernel k = compile_kernel(spec_, t);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(k.origin, "compiled");
  EXPECT_FALSE(k.cubin.empty());
  EXPECT_THAT(k.store_error, AllOf(HasSubstr(path), HasSubstr("cannot publish")));
  EXPECT_EQ(k.store_error.rfind("lkjit: error: ", 0), std::string::npos) << k.store_error;
  EXPECT_THAT(log, HasSubstr("lkjit: warning: " + path + ": cannot publish"));
  EXPECT_THAT(log, ::testing::Not(HasSubstr("lkjit: error:"))) << "doubled prefix in the log line";
  fs::remove(path);
  // A store that works reports nothing.
  forget(spec_, t);
  EXPECT_EQ(compile_kernel(spec_, t).store_error, "");
  EXPECT_TRUE(fs::is_regular_file(path));
}

TEST_F(CompileRecovery, WaitsForAnotherCompilerThenLoadsItsEntry) {
  // Another process holds the key's lock and publishes the entry: this one must not compile.
  const Tile t = wtconv_tile(0, 0, 0, 0, 224);
  forget(spec_, t);
  const KeyInputsInfo in = kernel_key_inputs(spec_, t);
  DiskStore store(dir_);
  store.ensure_dir();
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const pid_t other = fork_child([&] {
    FileLock l = FileLock::acquire(store.lock_path_for(in.key), milliseconds(0));
    char c = l.owned() ? 'y' : 'n';
    if (::write(go[1], &c, 1) != 1) return 1;
    std::this_thread::sleep_for(milliseconds(300));  // "compiling"
    store.store(lkjit::test::meta_from_inputs(in), lkjit::test::test_cubin(spec_.arch, {in.kernel_name}, 5000));
    return 0;
  });
  char c = 0;
  ASSERT_EQ(::read(go[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  const CompiledKernel k = compile_kernel(spec_, t);
  EXPECT_EQ(wait_exit(other), 0);
  ::close(go[0]);
  ::close(go[1]);
  EXPECT_EQ(k.origin, "disk");
  EXPECT_EQ(k.cubin, lkjit::test::test_cubin(spec_.arch, {in.kernel_name}, 5000)) << "not the other process's entry";
}

// ---- KernelCache: every action checks the directory -------------------------------------------------

TEST(KernelCacheAdmin, PruneToZeroMeansNoCap) {
  TempDir tmp(kTmpPrefix);
  const DiskStore s(tmp.path());
  for (char c : {'a', 'b'}) s.store(meta_of(c), payload_of(c, 1000));
  EXPECT_EQ(KernelCache(tmp.path(), 0).prune(0).removed, 0u);
  EXPECT_EQ(KernelCache(tmp.path(), 1).prune(0).removed, 0u);
  EXPECT_EQ(KernelCache(tmp.path(), 0).prune().removed, 0u);
  EXPECT_EQ(entry_keys(s).size(), 2u);
  EXPECT_EQ(KernelCache(tmp.path(), 0).prune(1).removed, 2u);
}

TEST(KernelCacheAdmin, UnsafeOrUnusableDirectoriesAreCacheErrors) {
  TempDir tmp(kTmpPrefix);
  const std::string open = tmp.path() + "/open", file = tmp.path() + "/file", none = tmp.path() + "/none";
  DiskStore(open).store(meta_of('a'), payload_of('a'));
  fs::permissions(open, fs::perms::all | fs::perms::sticky_bit);
  write_file(file, "x");
  for (const std::string& dir : {open, file}) {
    SCOPED_TRACE(dir);
    const KernelCache c(dir, 0);
    const std::vector<std::pair<const char*, std::function<void()>>> actions = {
        {"exists", [&] { c.exists(); }},
        {"list", [&] { c.list(); }},
        {"prune", [&] { c.prune(); }},
        {"clear", [&] { c.clear(); }},
        {"export", [&] { c.export_bundle(tmp.path() + "/b"); }},
    };
    for (const auto& [what, fn] : actions) {
      try {
        fn();
        ADD_FAILURE() << what << " accepted " << dir;
      } catch (const CacheError& e) {
        EXPECT_THAT(e.what(), HasSubstr("lkjit: error: " + dir + ": ")) << what;
        if (dir == open) EXPECT_THAT(e.what(), HasSubstr("mode 1777")) << what;
      }
    }
  }
  EXPECT_FALSE(fs::exists(tmp.path() + "/b"));
  EXPECT_EQ(fs::status(open).permissions() & fs::perms::all, fs::perms::all) << "a check changed the mode";
  // Not created yet: an empty cache, and looking does not create it.
  const KernelCache c(none, 0);
  EXPECT_FALSE(c.exists());
  EXPECT_TRUE(c.list().empty());
  EXPECT_EQ(c.clear().removed, 0u);
  EXPECT_FALSE(fs::exists(none));
}

TEST(KernelCacheAdmin, NamesFilesItCannotRemove) {
  TempDir tmp(kTmpPrefix);
  const DiskStore s(tmp.path());
  // A non-empty directory under an entry's name: no process can remove it, root included.
  const std::string stuck = s.path_for(key_of('a'));
  fs::create_directories(stuck);
  write_file(stuck + "/inside", "x");
  const std::string expected = "cannot remove " + stuck + ": Directory not empty";
  const KernelCache c(tmp.path(), 0);
  s.store(meta_of('b'), payload_of('b'));
  const auto pruned = c.prune(1);
  EXPECT_EQ(pruned.removed, 1u);
  EXPECT_EQ(pruned.remaining, 1u);
  EXPECT_EQ(pruned.failed, std::vector<std::string>{expected});
  s.store(meta_of('b'), payload_of('b'));
  const auto cleared = c.clear();
  EXPECT_EQ(cleared.removed, 1u);
  EXPECT_EQ(cleared.failed, std::vector<std::string>{expected});
  // verify says which bad files stayed; a stray file is no entry of any key.
  write_file(tmp.path() + "/notakey.lkjit", "junk");
  const auto checked = c.verify();
  ASSERT_EQ(checked.size(), 2u);
  for (const auto& e : checked) {
    SCOPED_TRACE(e.path);
    EXPECT_FALSE(e.ok);
    EXPECT_EQ(e.stray, e.key == "notakey");
    EXPECT_EQ(e.remove_error, e.stray ? "" : "Directory not empty");
  }
  EXPECT_TRUE(fs::is_directory(stuck));
  EXPECT_FALSE(fs::exists(tmp.path() + "/notakey.lkjit"));
}

TEST(EntryFormat, ProblemsEscapeBinaryBytes) {
  std::string why;
  EXPECT_FALSE(decode_entry("\x1b[31mLKJIT\x01\xfe\n{}\n", "", &why));
  EXPECT_THAT(why, HasSubstr("'\\x1b[31mLKJIT\\x01\\xfe'"));
  for (char c : why) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << int(static_cast<unsigned char>(c));
  // A key echo from the metadata is escaped too.
  EntryMeta m = meta_for(std::string("\x1b]0;title\x07", 10));
  EXPECT_FALSE(decode_entry(encode_entry(m, "x"), key_of('a'), &why));
  EXPECT_THAT(why, HasSubstr("key echo \\x1b]0;title\\x07 does not match"));
}

// ---- bundles ----------------------------------------------------------------------------------------

class BundleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (char c : {'a', 'b', 'c'}) from_.store(meta_of(c), payload_of(c, 300));
  }
  TempDir tmp_{kTmpPrefix};
  const DiskStore from_{tmp_.path() + "/from"}, to_{tmp_.path() + "/to"};
  const std::string file_ = tmp_.path() + "/kernels.bundle";
};

TEST_F(BundleTest, RoundTrips) {
  const auto out = export_bundle(from_, {}, file_);
  EXPECT_EQ(out.entries, 3u);
  EXPECT_TRUE(out.skipped.empty());
  EXPECT_EQ(out.bytes, fs::file_size(file_));
  const auto in = import_bundle(to_, file_);
  EXPECT_EQ(in.entries, 3u);
  EXPECT_EQ(in.added.size(), 3u);
  EXPECT_EQ(in.present, 0u);
  for (char c : {'a', 'b', 'c'}) {
    std::string why;
    EXPECT_EQ(to_.load(key_of(c), &why).value_or(""), payload_of(c, 300)) << why;
  }
  for (const auto& l : to_.list(true)) EXPECT_TRUE(l.ok) << l.problem;
  EXPECT_EQ(import_bundle(to_, file_).present, 3u);
  // A subset by key; unknown keys are reported, not fatal.
  const auto some = export_bundle(from_, {key_of('b'), key_of('z')}, file_);
  EXPECT_EQ(some.entries, 1u);
  ASSERT_EQ(some.skipped.size(), 1u);
  EXPECT_THAT(some.skipped[0], HasSubstr(key_of('z')));
}

TEST_F(BundleTest, ADamagedBundleImportsNothing) {
  export_bundle(from_, {}, file_);
  const std::string good = read_file(file_);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"truncated", good.substr(0, good.size() / 2)},
      {"flipped", [&] { std::string b = good; b[b.size() / 2] ^= 0x01; return b; }()},
      {"not a bundle", "hello\n"},
      {"empty", ""},
  };
  for (const auto& [what, bytes] : cases) {
    SCOPED_TRACE(what);
    write_file(file_, bytes);
    try {
      import_bundle(to_, file_);
      ADD_FAILURE() << "imported";
    } catch (const CacheError& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr(file_), HasSubstr("nothing imported")));
    }
    EXPECT_TRUE(to_.list(false).empty());
  }
}

TEST_F(BundleTest, RefusesKeysThatAreNotKeys) {
  // A well-formed bundle whose entry claims a path as its key must not write outside the cache: that entry is
  // refused with the reason, and the good one beside it is imported.
  const EntryMeta e = lkjit::test::test_meta("e");
  const std::string payload = lkjit::test::test_payload(e);
  std::string entry = encode_entry(meta_for("../../escape"), "x"), good = encode_entry(e, payload);
  std::string body = "LKJIT-BUNDLE 1\nentry " + std::to_string(entry.size()) + "\n" + entry + "\n";
  body += "entry " + std::to_string(good.size()) + "\n" + good + "\n";
  body += "end 2 " + sha256_hex(body) + "\n";
  write_file(file_, body);
  const auto r = import_bundle(to_, file_);
  EXPECT_EQ(r.entries, 2u);
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_THAT(r.refused[0], AllOf(HasSubstr("entry 1: "), HasSubstr("not 64 hex digits")));
  EXPECT_EQ(r.added, std::vector<std::string>{e.key});
  EXPECT_FALSE(fs::exists(tmp_.path() + "/escape.lkjit"));
  EXPECT_EQ(to_.load(e.key).value_or(""), payload);
}

TEST(BundleFormat, IsPinned) {
  // A change here changes what bundles hold: bump kBundleFormatVersion and add a golden for it.
  ASSERT_EQ(kBundleFormatVersion, 2);
  TempDir tmp(kTmpPrefix);
  const DiskStore store(tmp.path() + "/c");
  const std::string data = std::string(LKJIT_SOURCE_DIR) + "/tests/data/";
  const std::string v2 = read_file(data + "bundle_v2.lkjit-bundle");
  ASSERT_FALSE(v2.empty()) << "tests/data/bundle_v2.lkjit-bundle is missing";
  // The format 1 golden's entry, exported again, gives the format 2 golden byte for byte.
  const auto r = import_bundle(store, data + "bundle_v1_cubin.lkjit-bundle");
  EXPECT_EQ(r.entries, 1u);
  EXPECT_EQ(r.added.size(), 1u);
  export_bundle(store, {}, tmp.path() + "/again");
  EXPECT_EQ(read_file(tmp.path() + "/again"), v2);
}

// ---- key inputs -------------------------------------------------------------------------------------

TEST(KeyInputs, DifferencesNameTheInput) {
  const OpSpec s = wtconv_spec(kWTConvFold, DType::kF32, 3, 1, true, 90);
  const KeyInputsInfo a = kernel_key_inputs(s, wtconv_tile(0, 0, 0, 0, 256));
  EXPECT_EQ(a.key.size(), 64u);
  EXPECT_EQ(a.kernel_name, "lkjit_wtconv_fold_k3_L1_w256_sm90");
  // The fold template's include closure, no other template.
  std::set<std::string> names;
  for (const auto& [n, h] : a.header_sha256) names.insert(n);
  EXPECT_EQ(names, (std::set<std::string>{"abi/wtconv_params.h", "common/dtype.cuh", "common/pdl.cuh", "wtconv/common.cuh",
                                          "wtconv/fold.cuh"}));
  EXPECT_TRUE(key_input_differences(a, a).empty());
  KeyInputsInfo b = a;
  b.nvrtc_version = "12.8";
  b.header_sha256.begin()->second = sha256_hex("edited");
  b.header_sha256["extra.cuh"] = sha256_hex("");
  const auto d = key_input_differences(b, a);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_THAT(d[0], AllOf(HasSubstr("nvrtc"), HasSubstr("12.8 -> " + a.nvrtc_version)));
  EXPECT_THAT(d[1], HasSubstr("header " + a.header_sha256.begin()->first));
  EXPECT_THAT(d[2], HasSubstr("header extra.cuh: removed"));
}

}  // namespace
