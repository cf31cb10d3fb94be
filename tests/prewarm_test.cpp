// Tests of `lkjit prewarm` and `lkjit cache` (tools/lkjit/prewarm*.cpp, cache.cpp) run as subprocesses
// with no GPU: sm_80 and sm_90 kernels, 8 processes sharing one cache, a prewarm killed mid-compile,
// bundles, the spec sets (preset, lists, manifest, tuning database) and the cache maintenance actions.
// Spec sets are tiny (k=3, L=1, 4x8x8): a compile takes a fraction of a second on 2 cores.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cache/entry.h"
#include "cache/key.h"
#include "cache/lock.h"
#include "lkjit/cache.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/wtconv.h"
#include "tests/cubin_fixture.h"
#include "tests/test_support.h"

extern char** environ;

namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using Clock = std::chrono::steady_clock;

using lkjit::test::CommandResult;
using lkjit::test::read_file;
using lkjit::test::run_command;
using lkjit::test::shell_quote;
using lkjit::test::TempDir;
using lkjit::test::write_file;

// The first integer captured by `re` in s, or -1.
long number(const std::string& s, const std::string& re) {
  std::smatch m;
  return std::regex_search(s, m, std::regex(re)) ? std::stol(m[1].str()) : -1;
}

// Tiny sets: 10 kernels per arch for one dtype (plane, level, synth and lane, forward and backward; fold and
// reduce), 8 more per further dtype (the fold and the reduction are fp32 whatever the dtype). 8x8 planes at
// stride 1 take the lane kernels, so prewarm plans the lane path too.
const std::string kSmall = "--shapes 1:4:8:8 --k 3 --L 1 --progress never";

class Prewarm : public ::testing::Test {
 protected:
  std::string env_prefix(const std::string& cache, const std::string& extra = "") const {
    return "env -u LKJIT_CACHE_DISABLE -u LKJIT_DUMP_DIR -u LKJIT_LOG -u LKJIT_CACHE_MAX_BYTES LKJIT_CACHE_DIR=" +
           shell_quote(cache) + " " + extra + " ";
  }

  CommandResult run(const std::string& args, const std::string& cache = "", const std::string& extra_env = "",
                    const std::string& shell_prefix = "") const {
    return run_command(shell_prefix + env_prefix(cache.empty() ? cache_ : cache, extra_env) + shell_quote(LKJIT_CLI_PATH) +
                       " " + args + " 2>&1");
  }

  std::vector<std::string> files_with(const std::string& suffix) const {
    std::vector<std::string> v;
    if (fs::exists(cache_))
      for (const auto& e : fs::directory_iterator(cache_)) {
        const std::string n = e.path().filename().string();
        if (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) v.push_back(n);
      }
    return v;
  }

  TempDir tmp_dir_{"lkjit-prewarm-test"};
  std::string tmp_ = tmp_dir_.path(), cache_ = tmp_ + "/cache";
};

TEST_F(Prewarm, CompilesForSm80AndSm90WithoutAGpu) {
  const std::string args = "prewarm --arch sm_80,sm_90 --dtypes f32 " + kSmall;
  const CommandResult first = run(args);
  ASSERT_EQ(first.code, 0) << first.output;
  EXPECT_THAT(first.output,
              AllOf(HasSubstr("22 kernels for sm_80, sm_90 (f32)"), HasSubstr("22 compiled, 0 already cached, 0 failed")));
  EXPECT_EQ(files_with(".lkjit").size(), 22u);
  EXPECT_TRUE(files_with(".lock").empty()) << "locks left behind";
  const CommandResult list = run("cache ls");
  for (const char* name : {"lkjit_wtconv_fwd_plane_f32_k3_L1_", "lkjit_wtconv_bwd_plane_f32_k3_L1_",
                           "lkjit_wtconv_fwd_level1_f32_", "lkjit_wtconv_bwd_level1_f32_", "lkjit_wtconv_fwd_synth_",
                           "lkjit_wtconv_bwd_synth_", "lkjit_wtconv_reduce_k3_L1_w128_sm80",
                           "lkjit_wtconv_fold_k3_L1_w256_sm90", "lkjit_wtconv_fwd_lane_f32_k3_L1_t0x8_w64_sm80",
                           "lkjit_wtconv_fwd_lane_f32_k3_L1_t0x8_w64_sm90", "lkjit_wtconv_bwd_lane_f32_k3_L1_t0x8_w64_sm80",
                           "lkjit_wtconv_bwd_lane_f32_k3_L1_t0x8_w64_sm90", "lkjit_wtconv_reduce_lane_k3_L1_w512_sm80"})
    EXPECT_THAT(list.output, HasSubstr(name));
  const CommandResult verify = run("cache verify");
  EXPECT_EQ(verify.code, 0) << verify.output;
  EXPECT_THAT(verify.output, HasSubstr("22 entries ok, 0 corrupt"));
  const CommandResult again = run(args);
  EXPECT_EQ(again.code, 0) << again.output;
  EXPECT_THAT(again.output, HasSubstr("0 compiled, 22 already cached, 0 failed"));
}

TEST_F(Prewarm, EightProcessesCompileEachKernelOnce) {
  // The ranks of a training job prewarming one cache together: every process succeeds, each kernel
  // is compiled by exactly one of them (the others wait for its lock and load its entry).
  constexpr int kProcs = 8;
  std::string script;
  for (int i = 0; i < kProcs; ++i)
    script += "(" + env_prefix(cache_, "LKJIT_LOG=1") + shell_quote(LKJIT_CLI_PATH) + " prewarm --arch sm_90 --dtypes f32,f16 " +
              kSmall + " > " + shell_quote(tmp_ + "/out." + std::to_string(i)) + " 2>&1; echo $? > " +
              shell_quote(tmp_ + "/rc." + std::to_string(i)) + ") & ";
  script += "wait";
  ASSERT_EQ(std::system(script.c_str()), 0);
  long compiled = 0, compiling_logged = 0, kernels = -1;
  for (int i = 0; i < kProcs; ++i) {
    const std::string out = read_file(tmp_ + "/out." + std::to_string(i));
    EXPECT_EQ(read_file(tmp_ + "/rc." + std::to_string(i)), "0\n") << out;
    EXPECT_THAT(out, HasSubstr(" 0 failed")) << out;
    EXPECT_THAT(out, Not(HasSubstr("corrupt"))) << out;
    compiled += number(out, R"((\d+) compiled)");
    const long n = number(out, R"((\d+) kernels for)");
    EXPECT_TRUE(kernels == -1 || n == kernels);
    kernels = n;
    for (size_t at = out.find("lkjit: compiling "); at != std::string::npos; at = out.find("lkjit: compiling ", at + 1))
      ++compiling_logged;
  }
  EXPECT_EQ(kernels, 19);  // 11 for f32, 8 more for f16 (the lane kernels among them; the reduces are f32)
  EXPECT_EQ(compiled, kernels) << "some kernel was compiled twice, or not at all";
  EXPECT_EQ(compiling_logged, kernels);
  const CommandResult verify = run("cache verify");
  EXPECT_EQ(verify.code, 0) << verify.output;
  EXPECT_THAT(verify.output, HasSubstr("19 entries ok, 0 corrupt"));
  const std::string list = run("cache ls").output;
  for (const char* name : {"lkjit_wtconv_fwd_lane_f32_k3_L1_t0x8_w64_sm90", "lkjit_wtconv_bwd_lane_f32_k3_L1_t0x8_w64_sm90",
                           "lkjit_wtconv_fwd_lane_f16_k3_L1_t0x8_w64_sm90", "lkjit_wtconv_bwd_lane_f16_k3_L1_t0x8_w64_sm90"})
    EXPECT_THAT(list, HasSubstr(name));
  EXPECT_TRUE(files_with(".lock").empty());
}

TEST_F(Prewarm, AKilledPrewarmLeavesNothingThatBlocks) {
  const std::string args = "prewarm --arch sm_90 --dtypes f32,bf16 -j 1 " + kSmall;
  // Start one directly (no shell between), so that SIGKILL hits the compiling process itself.
  std::vector<std::string> argv_s = {LKJIT_CLI_PATH};
  {
    std::istringstream ss(args);
    for (std::string a; ss >> a;) argv_s.push_back(a);
  }
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s = {"LKJIT_CACHE_DIR=" + cache_};
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("LKJIT_", 0) != 0) env_s.push_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ASSERT_GT(pid, 0);
  // Kill it while it holds a key's lock, i.e. in the middle of a compile.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (files_with(".lock").empty() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);  // reaped: no zombie that could look alive
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_FALSE(files_with(".lock").empty()) << "killed after the compile ended: the scenario did not happen";

  const auto t0 = Clock::now();
  const CommandResult r = run(args);
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_LT(s, 60.0) << "the new prewarm waited on the dead one";
  EXPECT_THAT(r.output, AllOf(HasSubstr("19 kernels"), HasSubstr(" 0 failed")));
  const CommandResult verify = run("cache verify");
  EXPECT_EQ(verify.code, 0) << verify.output;
  EXPECT_THAT(verify.output, HasSubstr("19 entries ok, 0 corrupt"));
  // The dead process's lock file is swept by the next prune.
  EXPECT_EQ(run("cache prune").code, 0);
  EXPECT_TRUE(files_with(".lock").empty());
}

TEST_F(Prewarm, WarnsWhenTheSizeCapEvictsWhatItJustStored) {
  // A cap far below the set keeps almost nothing: prewarm and import say so (still exit 0: the cache works
  // as configured), instead of reporting success over an emptied cache.
  const std::string bundle = tmp_ + "/kernels.bundle";
  CommandResult r = run("prewarm --arch sm_90 --dtypes f16 --passes fwd " + kSmall + " --bundle " + shell_quote(bundle));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("warning")));  // the default cap holds them
  r = run("cache import " + shell_quote(bundle), tmp_ + "/capped", "LKJIT_CACHE_MAX_BYTES=1");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("5 added"), HasSubstr("lkjit: warning: import: the cache's size cap (1 B, "
                                                              "LKJIT_CACHE_MAX_BYTES) evicted 5 of the 5 entries just stored")));
  r = run("prewarm --arch sm_90 --dtypes f16 --passes fwd " + kSmall, tmp_ + "/capped2", "LKJIT_CACHE_MAX_BYTES=1");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("5 compiled"), HasSubstr("lkjit: warning: prewarm: the cache's size cap (1 B"),
                              HasSubstr("of the 5 entries just stored")));
}

TEST_F(Prewarm, BundlesRoundTripToAnotherCache) {
  const std::string bundle = tmp_ + "/kernels.bundle";
  const CommandResult made = run("prewarm --arch sm_90 --dtypes f16 --passes fwd " + kSmall + " --bundle " + shell_quote(bundle));
  ASSERT_EQ(made.code, 0) << made.output;
  EXPECT_THAT(made.output, HasSubstr("bundle " + bundle + ": 5 entries"));  // fold, plane, level, synth, lane
  const std::string other = tmp_ + "/other";
  const CommandResult imported = run("cache import " + shell_quote(bundle), other);
  ASSERT_EQ(imported.code, 0) << imported.output;
  EXPECT_THAT(imported.output, HasSubstr("5 entries verified, 5 added, 0 already cached, 0 refused"));
  EXPECT_THAT(run("cache verify", other).output, HasSubstr("5 entries ok, 0 corrupt"));
  EXPECT_THAT(run("cache ls", other).output,
              AllOf(HasSubstr("lkjit_wtconv_fwd_lane_f16_k3_L1_t0x8_w64_sm90"), Not(HasSubstr("bwd_lane"))));
  const CommandResult warm = run("prewarm --arch sm_90 --dtypes f16 --passes fwd " + kSmall, other);
  EXPECT_THAT(warm.output, HasSubstr("0 compiled, 5 already cached")) << warm.output;
  // A damaged bundle is refused whole, with the cache's exit code.
  std::string bytes = read_file(bundle);
  bytes[bytes.size() / 2] ^= 0x01;
  write_file(bundle, bytes);
  const CommandResult bad = run("cache import " + shell_quote(bundle), tmp_ + "/third");
  EXPECT_EQ(bad.code, 5) << bad.output;
  EXPECT_THAT(bad.output, AllOf(HasSubstr(bundle), HasSubstr("nothing imported")));
  // A file that is not there, or is a folder, is the user's bad input, not the cache's failure.
  for (const std::string& file : {tmp_ + "/missing.bundle", tmp_}) {
    const CommandResult r = run("cache import " + shell_quote(file), tmp_ + "/third");
    EXPECT_EQ(r.code, 2) << file << ": " << r.output;
    EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit: error: " + file + ": "), HasSubstr("supported: a bundle file")))
        << file;
  }
}

TEST_F(Prewarm, RefusesAWorldWritableCache) {
  fs::create_directories(cache_);
  ASSERT_EQ(::chmod(cache_.c_str(), 0777), 0);
  const CommandResult r = run("prewarm --arch sm_90 --dtypes f32 " + kSmall);
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr(cache_), HasSubstr("writable by other users"), HasSubstr("chmod 700")));
  EXPECT_TRUE(files_with(".lkjit").empty());
}

TEST_F(Prewarm, PresetCoversForwardBackwardAndEveryPath) {
  const CommandResult r = run("prewarm --preset wtconvnext-t --arch sm_80,sm_90 --list");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* arch : {"_sm80", "_sm90"})
    for (const char* dt : {"f32", "f16", "bf16"})
      for (const char* kind : {"fwd_plane", "bwd_plane", "fwd_synth", "bwd_synth", "fwd_level1", "bwd_level1"})
        EXPECT_TRUE(std::regex_search(r.output, std::regex(std::string("lkjit_wtconv_") + kind + "_" + dt + "_k5_.*" + arch)))
            << kind << " " << dt << " " << arch;
  for (const char* name : {"lkjit_wtconv_fwd_levelN_f32_k5_", "lkjit_wtconv_bwd_levelN_f32_k5_",
                           "lkjit_wtconv_reduce_k5_L5_", "lkjit_wtconv_fold_k5_L2_"})
    EXPECT_THAT(r.output, HasSubstr(name));
  // The lane path: the 14x14 (L=3) and 7x7 (L=2) stages only, forward and backward, every dtype and arch,
  // and the lane reduce (f32) of each.
  long lanes = 0;
  for (size_t at = r.output.find("_lane_"); at != std::string::npos; at = r.output.find("_lane_", at + 1)) ++lanes;
  EXPECT_EQ(lanes, 28);
  for (const char* arch : {"sm80", "sm90"}) {
    for (const char* dt : {"f32", "f16", "bf16"})
      for (const auto& [pass, rest] : std::vector<std::pair<std::string, std::string>>{
               {"fwd", "_k5_L3_p32_t0x14_w64_"},  // 14x14: two threads a plane; the backward capped for 6
               {"bwd", std::string(arch) == "sm90" ? "_k5_L3_p32_t0x14_b6_w64_" : "_k5_L3_p32_t0x14_w64_"},  // blocks
               {"fwd", "_k5_L2_t0x8_w64_"},   // an SM where shared memory holds them (sm_80: 4)
               {"bwd", "_k5_L2_t0x8_b6_w64_"}})
        EXPECT_THAT(r.output, HasSubstr("lkjit_wtconv_" + pass + "_lane_" + dt + rest + arch));
    for (const char* name : {"reduce_lane_k5_L3_w512_", "reduce_lane_k5_L2_w512_"})
      EXPECT_THAT(r.output, HasSubstr(std::string("lkjit_wtconv_") + name + arch));
  }
  const long n = number(r.output, R"((\d+) kernels\n)");
  EXPECT_GT(n, 100);
  // -s has the same layer shapes; -b other channels, the same kernels (C is not in a spec).
  EXPECT_EQ(number(run("prewarm --preset wtconvnext-s --arch sm_80,sm_90 --list").output, R"((\d+) kernels\n)"), n);
  EXPECT_EQ(files_with(".lkjit").size(), 0u) << "--list compiled something";
}

TEST_F(Prewarm, AllTilesAddsEveryCandidate) {
  const long plain = number(run("prewarm --arch sm_90 --dtypes f32 --list " + kSmall).output, R"((\d+) kernels\n)");
  const std::string all_list = run("prewarm --arch sm_90 --dtypes f32 --all-tiles --list " + kSmall).output;
  const long all = number(all_list, R"((\d+) kernels\n)");
  EXPECT_EQ(plain, 11);
  EXPECT_GT(all, 4 * plain);
  // The lane kernels' every valid tile for 8-wide planes: tile_w 8..16 (even) x 32..256 threads, each with
  // one or two threads per plane (planes = 0 or threads / 2): 40; and those of 32..128 threads again with
  // the registers capped for 12 warps an SM (b12, b6, b3): 30.
  for (const char* pass : {"fwd", "bwd"}) {
    long lanes = 0;
    const std::string prefix = std::string("lkjit_wtconv_") + pass + "_lane_f32_k3_L1_";
    for (size_t at = all_list.find(prefix); at != std::string::npos; at = all_list.find(prefix, at + 1)) ++lanes;
    EXPECT_EQ(lanes, 70) << pass;
    EXPECT_THAT(all_list, HasSubstr(prefix + "p16_t0x8_w32_sm90")) << pass;
    EXPECT_THAT(all_list, HasSubstr(prefix + "p32_t0x8_b6_w64_sm90")) << pass;
    for (const char* tile : {"t0x8_w32", "t0x8_w64", "t0x16_w256"}) EXPECT_THAT(all_list, HasSubstr(prefix + tile + "_sm90")) << pass;
    EXPECT_THAT(all_list, Not(HasSubstr(prefix + "t0x6_"))) << pass << ": W=8 exceeds tile_w=6";
  }
}

TEST_F(Prewarm, StrideListsPlanTheKernelsStridedLayersLoad) {
  // --stride, as on run and tune: 8x8 planes take the lane kernels at stride 1 only, so the sets differ.
  const std::string base = "prewarm --list --arch sm_90 --dtypes f32 --shapes 1:4:8:8 --k 3 --L 1";
  const CommandResult one = run(base), two = run(base + " --stride 2"), both = run(base + " --stride 1,2");
  ASSERT_EQ(two.code, 0) << two.output;
  EXPECT_EQ(number(one.output, R"((\d+) kernels\n)"), 11);
  EXPECT_EQ(number(two.output, R"((\d+) kernels\n)"), 8);
  EXPECT_THAT(one.output, HasSubstr("_lane_"));
  EXPECT_THAT(two.output, Not(HasSubstr("_lane_")));
  EXPECT_EQ(number(both.output, R"((\d+) kernels\n)"), 11);  // the union: stride 2's are stride 1's here
  // A manifest layer of stride 2 plans the same set.
  const std::string manifest = tmp_ + "/m.json";
  write_file(manifest, R"({"layers": [{"C": 4, "H": 8, "W": 8, "k": 3, "L": 1, "stride": 2}]})");
  EXPECT_EQ(run("prewarm --list --arch sm_90 --dtypes f32 --manifest " + shell_quote(manifest)).output, two.output);
  // Every kernel a stride-2 layer loads, forward and backward, NCHW or channels_last, is in the set.
  for (const lkjit::Layout layout : {lkjit::Layout::kNCHW, lkjit::Layout::kNHWC})
    for (const bool backward : {false, true}) {
      lkjit::WTConvOptions o;
      o.C = 4, o.k = 3, o.L = 1, o.stride = 2, o.layout = layout;
      for (const auto& pk : lkjit::wtconv_plan(o, lkjit::Shape{1, 4, 8, 8, 2}, lkjit::DeviceLimits::for_arch(90), backward))
        EXPECT_THAT(two.output, HasSubstr(lkjit::kernel_name(pk.spec, pk.tile) + "  ")) << backward;
    }
  CommandResult r = run(base + " --stride 0");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit: error: --stride: '0' is out of range; supported: [1, 64]"));
  r = run("prewarm --list --stride 2");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--stride apply to --shapes, which is missing"));
}

TEST_F(Prewarm, ReadsAManifestAndATuningDatabase) {
  const std::string manifest = tmp_ + "/m.json", db = tmp_ + "/tuning.json";
  write_file(manifest, R"({"archs": ["sm_86"], "dtypes": ["bf16"], "passes": ["fwd"],
    "layers": [{"B": 2, "C": 8, "H": 16, "W": 16, "k": 7, "L": 2}],
    "kernels": ["lkjit_wtconv_fold_k9_L1_w256_sm86", "lkjit_wtconv_fold_k9_L1_w256_sm90"]})");
  CommandResult r = run("prewarm --list --manifest " + shell_quote(manifest));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_wtconv_fwd_plane_bf16_k7_L2_"), HasSubstr("_sm86"),
                              HasSubstr("lkjit_wtconv_fold_k9_L1_w256_sm86"), Not(HasSubstr("_sm90")), Not(HasSubstr("bwd_"))));
  // lkjit's tuning database: a record's spec key and tile make a kernel name.
  write_file(db, R"({"format": 1, "kind": "lkjit-tuning-db", "records": [
    {"device": "NVIDIA H200", "arch": 90, "sm_count": 132, "spec": "lkjit_wtconv_fwd_plane_f16_k5_L3_sm90",
     "bucket": "B64_C128_H56_W56_s1", "shape": [64, 96, 56, 56, 1], "tile": {"planes": 2, "threads": 256, "vy": 2}},
    {"device": "NVIDIA H200", "arch": 90, "sm_count": 132, "spec": "lkjit_wtconv_bwd_lane_bf16_k5_L3_sm90",
     "bucket": "B64_C512_H14_W14_s1", "shape": [64, 384, 14, 14, 1],
     "tile": {"tile_w": 14, "planes": 32, "threads": 64, "blocks": 6}},
    {"device": "NVIDIA H200", "arch": 90, "sm_count": 132,
     "spec": "lkjit_pass_dwconv_bwd_bf16_nhwc_k31x31_s1_d1_p15x15_bias_sm90", "bucket": "B64_C128_H56_W56_s1",
     "shape": [64, 128, 56, 56, 1], "tile": {"path": 3}}]})");
  r = run("prewarm --list --arch sm_90 --shapes 1:4:8:8 --k 3 --L 1 --dtypes f32 --passes fwd --tuning-db " + shell_quote(db));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_wtconv_fwd_plane_f16_k5_L3_p2_v2_w256_sm90"),
                              HasSubstr("lkjit_wtconv_bwd_lane_bf16_k5_L3_p32_t0x14_b6_w64_sm90")));
  // Its kernel names this lkjit does not generate (a newer lkjit's) are noted and left out.
  write_file(db, R"({"entries": [{"kernel": "lkjit_wtconv_future_k3_sm90"}]})");
  r = run("prewarm --list --arch sm_90 --shapes 1:4:8:8 --k 3 --L 1 --dtypes f32 --passes fwd --tuning-db " + shell_quote(db));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("'lkjit_wtconv_future_k3_sm90' is not a kernel name this lkjit generates; left out"));
  // A manifest's kernel name with a register cap (b6) parses back to its tile.
  write_file(manifest, R"({"kernels": ["lkjit_wtconv_bwd_lane_bf16_k5_L3_p32_t0x14_b6_w64_sm90"]})");
  r = run("prewarm --list --manifest " + shell_quote(manifest));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("wtconv_bwd_lane bf16 k=5 L=3 sm_90  p32_t0x14_b6_w64"));
}

TEST_F(Prewarm, ManifestLayersNameTheirOp) {
  // "op" is optional (the default op, wtconv): a layer with it plans what the same layer without it plans.
  const std::string plain = tmp_ + "/plain.json", named = tmp_ + "/named.json";
  write_file(plain, R"({"archs": ["sm_90"], "dtypes": ["f16"], "layers": [{"B": 2, "C": 8, "H": 16, "W": 16, "k": 7, "L": 2}]})");
  write_file(named, R"({"archs": ["sm_90"], "dtypes": ["f16"],
    "layers": [{"op": "wtconv", "B": 2, "C": 8, "H": 16, "W": 16, "k": 7, "L": 2}]})");
  const CommandResult a = run("prewarm --list --manifest " + shell_quote(plain));
  const CommandResult b = run("prewarm --list --manifest " + shell_quote(named));
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_EQ(a.output, b.output);
  EXPECT_THAT(b.output, AllOf(HasSubstr("lkjit_wtconv_fwd_plane_f16_k7_L2_"), HasSubstr("lkjit_wtconv_bwd_plane_f16_k7_L2_")));
  // --op wtconv is the default too, and an unknown op is named with the known ones.
  EXPECT_EQ(run("prewarm --list --op wtconv --manifest " + shell_quote(plain)).output, a.output);
  write_file(named, R"({"layers": [{"op": "wbmm9", "C": 8, "H": 16, "W": 16}]})");
  const CommandResult r = run("prewarm --list --manifest " + shell_quote(named));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit: error: " + named + ": layers[0]: op 'wbmm9' is unknown; supported: wtconv"));
  EXPECT_TRUE(files_with(".lkjit").empty());
}

TEST_F(Prewarm, ABrokenTuningDatabaseIsAnError) {
  // Given explicitly, a database that cannot be used is the user's error, alone or with other sets.
  const std::string db = tmp_ + "/tuning.json";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"records\": [", "not JSON"},
      {"{}", "no \"records\" or \"entries\" array"},
      {R"({"decisions": []})", "unknown tuning database format"},
      {R"({"records": [{"spec": "lkjit_wtconv_fold_k3_L1_sm90"}]})", "no \"tile\""},
  };
  for (const auto& [text, problem] : cases) {
    SCOPED_TRACE(text);
    write_file(db, text);
    for (const std::string& also : {std::string(), "--preset wtconvnext-t " + kSmall}) {
      const CommandResult r = run("prewarm --arch sm_90 --dtypes f32 --tuning-db " + shell_quote(db) + " " + also);
      EXPECT_EQ(r.code, 2) << also << ": " << r.output;
      EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit: error: " + db + ": "), HasSubstr(problem), Not(HasSubstr("nothing to prewarm"))))
          << also;
    }
  }
  CommandResult r = run("prewarm --arch sm_90 --tuning-db " + shell_quote(tmp_ + "/missing.json"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr(tmp_ + "/missing.json"), HasSubstr("cannot read")));
  // A valid database without records: nothing to prewarm, and it says which option gave nothing.
  write_file(db, R"({"format": 1, "kind": "lkjit-tuning-db", "records": []})");
  r = run("prewarm --arch sm_90 --tuning-db " + shell_quote(db));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("nothing to prewarm"), HasSubstr(db + " has no tuned kernels")));
  EXPECT_TRUE(files_with(".lkjit").empty());
}

TEST_F(Prewarm, ManifestKernelNamesAreCheckedBeforeCompiling) {
  const std::string manifest = tmp_ + "/m.json";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"lkjit_nope_sm90", "is not a kernel name this lkjit generates"},
      {"lkjit_wtconv_fold_k4_L1_w256_sm90", "k=4"},
      {"lkjit_wtconv_fold_k3_L1_w2048_sm90", "threads=2048"},
      {"lkjit_wtconv_fold_k3_L1_w256_sm75", "sm_75"},
      {"lkjit_wtconv_fwd_plane_f16_k5_L3_p2_v2_b12_w256_sm90", "blocks=12"},  // a register cap it does not tile
  };
  for (const auto& [name, why] : cases) {
    SCOPED_TRACE(name);
    // The good kernel first: nothing may be compiled before the bad name is seen.
    write_file(manifest, R"({"kernels": ["lkjit_wtconv_fold_k3_L1_w256_sm90", ")" + name + "\"]}");
    for (const char* list : {"", "--list"}) {
      const CommandResult r = run("prewarm --arch sm_90 --progress never " + std::string(list) + " --manifest " + shell_quote(manifest));
      EXPECT_EQ(r.code, 2) << r.output;
      EXPECT_THAT(r.output, AllOf(HasSubstr(manifest + ": kernels[1]: '" + name + "'"), HasSubstr(why)));
    }
  }
  EXPECT_TRUE(files_with(".lkjit").empty());
}

TEST_F(Prewarm, EmptyListsAndItemsAreUsageErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--arch ''", "--arch"},          {"--arch ' '", "--arch"},       {"--dtypes ''", "--dtypes"},
      {"--dtypes f16,,f32", "--dtypes"}, {"--arch sm_90,", "--arch"},   {"--passes fwd,,bwd", "--passes"},
      {"--k 3,,5", "--k"},               {"--shapes 1:4:8:8,", "--shapes"},
  };
  for (const auto& [args, option] : cases) {
    const std::string shapes = args.rfind("--shapes", 0) == 0 ? "" : "--shapes 1:4:8:8 ";
    const CommandResult r = run("prewarm --progress never " + shapes + args);
    EXPECT_EQ(r.code, 1) << args << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("lkjit: error: " + option + ": ")) << args;
  }
  EXPECT_TRUE(files_with(".lkjit").empty());
}

TEST_F(Prewarm, AnUnwritableCacheIsAFailureWithTheCacheCode) {
  // Every kernel compiles, none is stored: counted as failed, the reason said once, exit 5.
  const auto dir = lkjit::test::make_unwritable_dir(cache_);
  const CommandResult r = run("prewarm --arch sm_90 --dtypes f32 --passes fwd " + kSmall, "", "", dir.prefix);
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit: error: " + cache_ + ": 5 compiled kernels could not be stored"),
                              HasSubstr("0 compiled, 0 already cached, 5 failed")));
  size_t times = 0;
  for (size_t at = r.output.find(dir.os_error); at != std::string::npos; at = r.output.find(dir.os_error, at + 1)) ++times;
  EXPECT_EQ(times, 1u) << r.output;
  EXPECT_TRUE(files_with(".lkjit").empty());
}

TEST_F(Prewarm, RefusesWhenTheDiskCacheIsDisabled) {
  const CommandResult r = run("prewarm --arch sm_90 --dtypes f32 --passes fwd " + kSmall, "", "LKJIT_CACHE_DISABLE=1");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("disabled by LKJIT_CACHE_DISABLE=1"), HasSubstr(cache_), Not(HasSubstr("compiled,"))));
  EXPECT_FALSE(fs::exists(cache_));
  // Listing compiles nothing, so it still works.
  EXPECT_EQ(run("prewarm --list --arch sm_90 --dtypes f32 " + kSmall, "", "LKJIT_CACHE_DISABLE=1").code, 0);
}

TEST_F(Prewarm, BadInputsNameTheValue) {
  CommandResult r = run("prewarm --preset wtconvnext-xl --list");
  EXPECT_EQ(r.code, 2) << r.output;  // well-formed but unknown: bad input, as an unknown --passes
  EXPECT_THAT(r.output, AllOf(HasSubstr("'wtconvnext-xl'"), HasSubstr("wtconvnext-t, wtconvnext-s, wtconvnext-b")));
  for (const char* option : {"--bundle", "--manifest", "--tuning-db"}) {
    r = run(std::string("prewarm --preset wtconvnext-t --list ") + option + " ''");
    EXPECT_EQ(r.code, 1) << option << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(std::string(option) + " is empty; supported: a file path")) << option;
  }
  r = run("prewarm --preset wtconvnext-t --bundle " + shell_quote(tmp_ + "/no/such/dir/b.lkjit"));
  EXPECT_EQ(r.code, 2) << r.output;  // before any compile
  EXPECT_THAT(r.output, AllOf(HasSubstr("does not exist"), Not(HasSubstr("compiled"))));
  for (const std::string& target : {tmp_, tmp_ + "/b.lkjit/", std::string("/dev/null")}) {
    r = run("prewarm --preset wtconvnext-t --bundle " + shell_quote(target));
    EXPECT_EQ(r.code, 2) << target << ": " << r.output;
    EXPECT_THAT(r.output, AllOf(HasSubstr("is not a file"), Not(HasSubstr("compiled")))) << target;
  }
  r = run("prewarm --preset wtconvnext-t --list --progress sometimes");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--progress 'sometimes' is unknown; supported: auto, always, never"));
  r = run("prewarm --arch sm_70 --preset wtconvnext-t --list");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("sm_70"));
  r = run("prewarm --shapes 1:4:8:8 --k 4 --list");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--k: '4' is out of range; supported: odd k in [1, 31]"));
  r = run("prewarm --k 3");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--shapes"));
  r = run("prewarm");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("nothing to prewarm"));
  const std::string manifest = tmp_ + "/m.json";
  write_file(manifest, R"({"layer": []})");
  r = run("prewarm --manifest " + shell_quote(manifest));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr(manifest), HasSubstr("unknown key \"layer\"")));
  write_file(manifest, R"({"layers": [{"C": 8, "H": 8, "W": 8, "L": 9}]})");
  r = run("prewarm --manifest " + shell_quote(manifest));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("layers[0]"), HasSubstr("\"L\""), HasSubstr("[0, 8]")));
  write_file(manifest, R"({"passes": [], "layers": [{"C": 8, "H": 8, "W": 8}]})");
  r = run("prewarm --list --manifest " + shell_quote(manifest));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\"passes\" is empty; supported: fwd, bwd or both"));
  write_file(manifest, R"({"layers": [{"B": 2147483648, "C": 8, "H": 8, "W": 8}]})");
  r = run("prewarm --list --manifest " + shell_quote(manifest));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("layers[0]: \"B\" is out of range"), HasSubstr("[1, 2147483647]")));
  write_file(manifest, R"({"archs": ["sm_90"], "layers": []})");
  r = run("prewarm --list --manifest " + shell_quote(manifest));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("nothing to prewarm: " + manifest + " names no \"layers\""));
  // A misspelt layer key is refused, not replaced by its default; so are strings and even k.
  const std::vector<std::pair<std::string, std::string>> layers = {
      {R"({"C": 8, "H": 8, "W": 8, "l": 5})", "layers[0]: unknown key \"l\"; known: B, C, H, W, k, L, stride"},
      {R"({"C": 8, "H": 8, "W": 8, "L": 2, "stirde": 2})", "unknown key \"stirde\""},
      {R"({"C": "96", "H": 8, "W": 8})", "layers[0]: \"C\" is not an integer (\"96\"); supported: an integer in [1, 16777216]"},
      {R"({"C": 8, "H": 8, "W": 8, "k": 4})", "layers[0]: \"k\" is 4; supported: an odd integer in [1, 31]"},
      // Numbers as written: json::parse reads the first as INT64_MAX, and 1e30 is an integer out of range.
      {R"({"B": 99999999999999999999, "C": 8, "H": 8, "W": 8})",
       "layers[0]: \"B\" is out of range (99999999999999999999); supported: an integer in [1, 2147483647]"},
      {R"({"C": 1e30, "H": 8, "W": 8})", "layers[0]: \"C\" is out of range (1e30); supported: an integer in [1, 16777216]"},
      {R"({"C": 2.5, "H": 8, "W": 8})", "layers[0]: \"C\" is not an integer (2.5)"},
      // json::parse would keep one of the two silently; keys compare decoded.
      {R"({"C": 8, "H": 8, "W": 8, "C": 16})", "layers[0]: duplicate key \"C\"; supported: each key once per object"},
      {R"({"C": 8, "H": 8, "W": 8, "\u0043": 16})", "layers[0]: duplicate key \"C\""},
  };
  for (const auto& [layer, msg] : layers) {
    write_file(manifest, R"({"layers": [)" + layer + "]}");
    r = run("prewarm --list --manifest " + shell_quote(manifest));
    EXPECT_EQ(r.code, 2) << layer << ": " << r.output;
    EXPECT_THAT(r.output, AllOf(HasSubstr(manifest), HasSubstr(msg))) << layer;
  }
  // The file's other values name it too, with where in it they are.
  const std::vector<std::pair<std::string, std::string>> files = {
      {R"({"dtypes": ["f16", "f64"], "layers": [{"C": 8, "H": 8, "W": 8}]})", ": dtypes[1]: dtype 'f64' is not supported"},
      {R"({"archs": ["sm_7x"], "layers": [{"C": 8, "H": 8, "W": 8}]})", ": archs[0]: arch 'sm_7x' is not of the form sm_XY"},
      {R"({"presets": ["wtconvnext-t", "wtconvnext-xl"]})",
       ": presets[1]: preset 'wtconvnext-xl' is unknown; supported: wtconvnext-t, wtconvnext-s, wtconvnext-b"},
      {R"({"archs": ["sm_90"], "layers": [{"C": 8, "H": 8, "W": 8}], "archs": ["sm_80"]})",
       ": duplicate key \"archs\"; supported: each key once per object"},
  };
  for (const auto& [text, msg] : files) {
    write_file(manifest, text);
    r = run("prewarm --list --manifest " + shell_quote(manifest));
    EXPECT_EQ(r.code, 2) << text << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("lkjit: error: " + manifest + msg)) << text;
  }
}

TEST_F(Prewarm, OutOfRangeValuesExitWith2) {
  // Well-formed values out of range or unknown are bad input (2), as in `run`; malformed ones usage errors (1).
  const std::vector<std::tuple<std::string, int, std::string>> cases = {
      {"--shapes 0:4:8:8", 2, "--shapes: B=0 in '0:4:8:8' is out of range; supported: >= 1"},
      {"--shapes 1:4:8:8,1:-4:8:8", 2, "--shapes: C=-4 in '1:-4:8:8' is out of range"},
      {"--shapes 1:4:x:8", 1, "--shapes: 'x' in '1:4:x:8' is not a decimal integer"},
      {"--shapes 99999999999999999999:4:8:8", 2,
       "--shapes: B=99999999999999999999 in '99999999999999999999:4:8:8' is out of range; supported: [1, 2^31-1]"},
      {"--shapes 1:4:8:8 --passes sideways", 2, "--passes: 'sideways' is unknown; supported: fwd, bwd"},
      // Integers beyond int are out of range too, not malformed.
      {"--shapes 1:4:8:8 --k 3,99999999999", 2, "--k: '99999999999' is out of range; supported: odd k in [1, 31]"},
      {"--shapes 1:4:8:8 --k 33", 2, "--k: '33' is out of range; supported: odd k in [1, 31]"},
      {"--shapes 1:4:8:8 --L 99999999999999999999", 2, "--L: '99999999999999999999' is out of range; supported: [0, 8]"},
      {"--shapes 1:4:8:8 -j 99999999999", 2, "-j=99999999999 is out of range; supported: [0, 2147483647]"},
      {"--shapes 1:4:8:8 -j -1", 2, "-j=-1 is out of range; supported: [0, 2147483647]"},
  };
  for (const auto& [args, code, msg] : cases) {
    const CommandResult r = run("prewarm --arch sm_90 --progress never " + args);
    EXPECT_EQ(r.code, code) << args << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("lkjit: error: " + msg)) << args;
  }
  EXPECT_TRUE(files_with(".lkjit").empty());
}

TEST_F(Prewarm, NamedKernelsAllLeftOutIsAnError) {
  // The manifest's own archs exclude its kernels: the note names that list, not --arch (not given), and
  // compiling nothing is exit 2, not a success.
  const std::string manifest = tmp_ + "/m.json";
  write_file(manifest, R"({"archs": ["sm_86"], "kernels": ["lkjit_wtconv_fold_k3_L1_w256_sm90"]})");
  for (const char* list : {"", "--list"}) {
    const CommandResult r = run("prewarm --progress never " + std::string(list) + " --manifest " + shell_quote(manifest));
    EXPECT_EQ(r.code, 2) << list << ": " << r.output;
    EXPECT_THAT(r.output, AllOf(HasSubstr("1 named kernel for archs not in " + manifest + ": \"archs\" (sm_86) left out"),
                                HasSubstr("lkjit: error: nothing to prewarm: every named kernel was left out (1 kernel; see"),
                                Not(HasSubstr("--arch")), Not(HasSubstr("0 kernels"))))
        << list;
  }
  // --arch wins over the manifest's archs and is then the one named.
  CommandResult r = run("prewarm --progress never --arch sm_80 --manifest " + shell_quote(manifest));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("for archs not in --arch (sm_80) left out"));
  EXPECT_TRUE(files_with(".lkjit").empty());
  // With a kernel for a target arch, the other is a note and the rest compiles.
  r = run("prewarm --progress never --arch sm_80,sm_90 --manifest " + shell_quote(manifest));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(Not(HasSubstr("left out")), HasSubstr("1 kernel for sm_80, sm_90")));
}

TEST_F(Prewarm, AFailedCompileExitsWith3) {
  // A tuned tile this build rejects (2048 threads) fails; the rest still compile. (In a manifest the
  // name would be refused before compiling; a tuning database may come from another build.)
  const std::string db = tmp_ + "/tuning.json";
  write_file(db, R"({"entries": [{"kernel": "lkjit_wtconv_fold_k3_L1_w2048_sm90"}, {"kernel": "lkjit_wtconv_fold_k3_L1_w256_sm90"}]})");
  const CommandResult r = run("prewarm --arch sm_90 --progress never --tuning-db " + shell_quote(db));
  EXPECT_EQ(r.code, 3) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("failed: lkjit_wtconv_fold_k3_L1_w2048_sm90"), HasSubstr("threads=2048"),
                              HasSubstr("1 compiled, 0 already cached, 1 failed")));
}

TEST_F(Prewarm, CacheExplainNamesTheDifferingInput) {
  ASSERT_EQ(run("compile --kernel wtconv_fold --k 3 --L 1 --arch sm_90").code, 0);
  const std::string name = "lkjit_wtconv_fold_k3_L1_w256_sm90";
  CommandResult r = run("cache explain " + name);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("cached (a lookup hits)"), HasSubstr("nvrtc"),
                              HasSubstr("header     wtconv/fold.cuh sha256")));
  const std::string key = r.output.substr(r.output.find(" has key ") + 9, 64);
  // An entry of the same kernel from another toolchain and template: explain says what differs.
  lkjit::cache::EntryMeta m;
  m.key = std::string(64, 'e');
  m.kernel_name = name;
  m.spec = "wtconv_fold f32 k=3 L=1 sm_90 w256";
  m.arch = 90;
  m.nvrtc_version = "12.8";
  m.generator_version = 1;
  m.options = {"--gpu-architecture=sm_90", "--std=c++17", "--restrict", "-lineinfo"};
  m.header_sha256 = {{"wtconv/fold.cuh", lkjit::cache::sha256_hex("an older fold.cuh")}};
  write_file(cache_ + "/" + m.key + ".lkjit", lkjit::cache::encode_entry(m, "old cubin"));
  r = run("cache explain " + name);
  EXPECT_THAT(r.output, AllOf(HasSubstr("entry eeeeeeeeeeeeeeee"), HasSubstr("nvrtc: 12.8 -> "),
                              HasSubstr("header wtconv/fold.cuh: "),
                              HasSubstr("header wtconv/common.cuh: added")));
  // Only the fold's own headers are inputs: another kernel's template is never named.
  EXPECT_THAT(r.output, Not(HasSubstr("fwd_plane.cuh")));
  r = run("cache explain " + m.key.substr(0, 12));
  EXPECT_THAT(r.output, AllOf(HasSubstr("lookups miss this entry"), HasSubstr("nvrtc: 12.8 -> "),
                              HasSubstr("entry " + key.substr(0, 16))));
  r = run("cache explain " + std::string(64, 'f') + " --kernel " + name);
  EXPECT_THAT(r.output, AllOf(HasSubstr("is not in the cache"), HasSubstr("this lkjit computes key " + key),
                              HasSubstr("entry eeeeeeeeeeeeeeee")));
  r = run("cache explain nonsense");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("'nonsense' is neither a key"));
}

TEST_F(Prewarm, CacheStatPruneAndClear) {
  ASSERT_EQ(run("prewarm --arch sm_90 --dtypes f32 --passes fwd " + kSmall).code, 0);
  write_file(cache_ + "/" + std::string(64, 'c') + ".lkjit", "junk");
  CommandResult r = run("cache stat", "", "LKJIT_CACHE_MAX_BYTES=64M");
  // 5 kernels (fold, plane, level, synth, lane) and the junk.
  EXPECT_THAT(r.output, AllOf(HasSubstr("entries    6"), HasSubstr("of 64.0 MiB cap"), HasSubstr("unreadable 1"),
                              HasSubstr("sm_90 / NVRTC")));
  r = run("cache verify");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("5 entries ok, 1 corrupt"), HasSubstr(std::string(64, 'c'))));
  EXPECT_EQ(run("cache verify").code, 0) << "verify did not remove the corrupt entry";
  r = run("cache prune --max-bytes 1");
  EXPECT_THAT(r.output, AllOf(HasSubstr("removed 5 entries"), HasSubstr("0 entries")));
  ASSERT_EQ(run("prewarm --arch sm_90 --dtypes f32 --passes fwd " + kSmall).code, 0);
  r = run("cache clear");
  EXPECT_THAT(r.output, HasSubstr("removed 5 entries"));
  EXPECT_TRUE(files_with(".lkjit").empty());
  r = run("cache prune --max-bytes lots");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--max-bytes='lots'"));
}

// Fake entries (the CLI lists them by name and header; no compile needed).
std::string fake_entry(char c, size_t payload_bytes) {
  lkjit::cache::EntryMeta m;
  m.key = std::string(64, c);
  m.kernel_name = "lkjit_wtconv_fold_k3_L1_w256_sm90";
  m.arch = 90;
  m.nvrtc_version = "13.0";
  return lkjit::cache::encode_entry(m, std::string(payload_bytes, c));
}

// The line of out that holds what, or "" (for checking what was said about one file).
std::string line_with(const std::string& out, const std::string& what) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.find(what) != std::string::npos) return line;
  return "";
}

TEST_F(Prewarm, PruneMaxBytesZeroMeansNoCap) {
  fs::create_directories(cache_);
  fs::permissions(cache_, fs::perms::owner_all);
  for (char c : {'a', 'b'}) write_file(cache_ + "/" + std::string(64, c) + ".lkjit", fake_entry(c, 1000));
  write_file(cache_ + "/" + std::string(64, 'a') + ".lock", "12345\n");  // its owner died
  CommandResult r = run("cache prune --max-bytes 0");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("removed 0 entries"), HasSubstr("2 entries"), HasSubstr("1 stale file removed")));
  EXPECT_EQ(files_with(".lkjit").size(), 2u) << "--max-bytes 0 emptied the cache";
  r = run("cache prune", "", "LKJIT_CACHE_MAX_BYTES=0");
  EXPECT_THAT(r.output, HasSubstr("removed 0 entries"));
  EXPECT_EQ(files_with(".lkjit").size(), 2u);
  EXPECT_THAT(run("cache --help").output, HasSubstr("0: no limit"));
}

TEST_F(Prewarm, ExportReplacesOnlyRegularFiles) {
  // The bundle is published by a rename, which would replace a FIFO or a device node (/dev/null as root).
  fs::create_directories(cache_);
  ASSERT_EQ(::chmod(cache_.c_str(), 0700), 0);
  write_file(cache_ + "/" + std::string(64, 'a') + ".lkjit", fake_entry('a', 100));
  const std::string fifo = tmp_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // The CLI refuses it before exporting (bad input, like a missing folder) ...
  const CommandResult r = run("cache export " + shell_quote(fifo));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("export " + fifo + ": is not a file; supported: a new or regular file"));
  EXPECT_EQ(run("cache export " + shell_quote(tmp_ + "/no/such/folder.bundle")).code, 2);
  // ... and the library refuses to publish over it (bad input: the caller's path) for callers that do not check first.
  try {
    lkjit::KernelCache(cache_).export_bundle(fifo);
    ADD_FAILURE() << "exported over a FIFO";
  } catch (const lkjit::Error& e) {
    EXPECT_EQ(e.code(), lkjit::ErrorCode::kInvalidArgument) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("lkjit: error: cannot replace " + fifo + ": it exists and is not a regular file"));
  }
  struct stat st {};
  ASSERT_EQ(::lstat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
}

TEST_F(Prewarm, AnExportPathThatCannotBeCreatedIsBadInput) {
  // README: exit 2 for a bundle path that cannot be written. A folder that passes the check before the work (root
  // may write anywhere, by access(2)) but takes no new file (/proc) was a cache error, exit 5.
  fs::create_directories(cache_);
  ASSERT_EQ(::chmod(cache_.c_str(), 0700), 0);
  write_file(cache_ + "/" + std::string(64, 'a') + ".lkjit", fake_entry('a', 100));
  const std::string target = "/proc/lkjit-test-" + std::to_string(::getpid()) + ".bundle";
  for (const std::string& args : {"cache export " + target, "prewarm --arch sm_90 --dtypes f32 --passes fwd --bundle " +
                                                                target + " " + kSmall}) {
    const CommandResult r = run(args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(target)) << args;
    EXPECT_THAT(r.output, Not(HasSubstr("temporary file"))) << args;
  }
  try {
    lkjit::KernelCache(cache_).export_bundle(target);
    ADD_FAILURE() << "exported to " << target;
  } catch (const lkjit::Error& e) {
    EXPECT_EQ(e.code(), lkjit::ErrorCode::kInvalidArgument) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("lkjit: error: cannot create " + target + ": "));
  }
}

TEST_F(Prewarm, AnEntryThatCannotBeReadIsListedAsUnreadable) {
  // A folder under an entry's name cannot be read, even by root: stat counts it, ls shows it.
  fs::create_directories(cache_);
  ASSERT_EQ(::chmod(cache_.c_str(), 0700), 0);
  write_file(cache_ + "/" + std::string(64, 'a') + ".lkjit", fake_entry('a', 100));
  const std::string stuck = cache_ + "/" + std::string(64, 'c') + ".lkjit";
  fs::create_directories(stuck + "/x");
  // So can a symbolic link whose target is gone.
  const std::string dangling = cache_ + "/" + std::string(64, 'd') + ".lkjit";
  fs::create_symlink(tmp_ + "/gone", dangling);
  CommandResult r = run("cache stat");
  EXPECT_THAT(r.output, AllOf(HasSubstr("entries    3"), HasSubstr("unreadable 2"))) << r.output;
  r = run("cache ls");
  EXPECT_THAT(r.output, AllOf(HasSubstr(std::string(16, 'c') + "  (unreadable: cannot read: "),
                              HasSubstr(std::string(16, 'd') + "  (unreadable: cannot read: No such file or directory (a "
                                        "symbolic link to " + tmp_ + "/gone))")))
      << r.output;
  // verify reports it as the other unreadable entries, and removes the link (not its target).
  r = run("cache verify");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(line_with(r.output, dangling),
              AllOf(HasSubstr("corrupt: " + dangling + ": cannot read: "), HasSubstr("(removed; it is rebuilt on next use)")))
      << r.output;
  EXPECT_FALSE(fs::is_symlink(fs::symlink_status(dangling)));
}

TEST_F(Prewarm, ExportAndStatTreatADanglingLinkAsUnreadable) {
  // export says why it leaves the link out, as ls and verify do, and stat counts no bytes for it (prune
  // counts none either): the size is the real entry's alone.
  fs::create_directories(cache_);
  ASSERT_EQ(::chmod(cache_.c_str(), 0700), 0);
  const lkjit::cache::EntryMeta m = lkjit::test::test_meta("a");  // export ships only entries that pass the checks
  const std::string entry = cache_ + "/" + m.key + ".lkjit";
  write_file(entry, lkjit::cache::encode_entry(m, lkjit::test::test_payload(m)));
  ASSERT_LT(fs::file_size(entry), 4096u);
  const std::string dangling = cache_ + "/" + std::string(64, 'd') + ".lkjit";
  fs::create_symlink(tmp_ + "/gone", dangling);
  CommandResult r = run("cache stat");
  EXPECT_THAT(r.output, AllOf(HasSubstr("entries    2"), HasSubstr("unreadable 1"),
                              HasSubstr("size       " + fmt::format("{:.1f} KiB", fs::file_size(entry) / 1024.0) + " of")))
      << r.output;
  r = run("cache export " + shell_quote(tmp_ + "/out.bundle"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("export: left out " + std::string(64, 'd') + ": " + dangling +
                                        ": cannot read: No such file or directory (a symbolic link to " + tmp_ + "/gone)"),
                              Not(HasSubstr("not in the cache")), HasSubstr(": 1 entry, ")))
      << r.output;
}

TEST_F(Prewarm, StaleSweepLeavesSymlinksAndForeignLocksAlone) {
  // A lock file is opened without following links, and only lkjit's own (key-named) locks are swept.
  fs::create_directories(cache_);
  ASSERT_EQ(::chmod(cache_.c_str(), 0700), 0);
  const std::string target = tmp_ + "/precious.txt", other = tmp_ + "/other.txt";
  write_file(target, "precious data\n");
  write_file(other, "other data\n");
  fs::create_symlink(target, cache_ + "/" + std::string(64, 'b') + ".lock");
  fs::create_symlink(other, cache_ + "/whatever.lock");
  for (const char* action : {"prune --max-bytes 0", "clear"}) {
    const CommandResult r = run(std::string("cache ") + action);
    EXPECT_THAT(r.output, Not(HasSubstr("2 stale files removed"))) << action;
    std::ifstream a(target), b(other);
    std::stringstream sa, sb;
    sa << a.rdbuf();
    sb << b.rdbuf();
    EXPECT_EQ(sa.str(), "precious data\n") << action;
    EXPECT_EQ(sb.str(), "other data\n") << action;
  }
}

TEST_F(Prewarm, EveryCacheActionChecksTheDirectory) {
  const std::string bundle = tmp_ + "/out.bundle";
  const std::vector<std::string> actions = {"stat", "ls", "prune", "clear", "explain lkjit_wtconv_fold_k3_L1_w256_sm90",
                                            "export " + shell_quote(bundle), "verify", "import " + shell_quote(bundle)};
  // Writable by others: refused by every action, and nothing leaves it in a bundle.
  fs::create_directories(cache_);
  write_file(cache_ + "/" + std::string(64, 'a') + ".lkjit", fake_entry('a', 100));
  ASSERT_EQ(::chmod(cache_.c_str(), 0777), 0);
  for (const auto& a : actions) {
    const CommandResult r = run("cache " + a);
    EXPECT_EQ(r.code, 5) << a << ": " << r.output;
    EXPECT_THAT(r.output, AllOf(HasSubstr(cache_), HasSubstr("writable by other users"))) << a;
  }
  EXPECT_FALSE(fs::exists(bundle));
  // A regular file.
  const std::string file = tmp_ + "/a-file";
  write_file(file, "not a directory");
  for (const auto& a : actions) {
    const CommandResult r = run("cache " + a, file);
    EXPECT_EQ(r.code, 5) << a << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(file + ": ")) << a;
    EXPECT_THAT(r.output, Not(HasSubstr("0 entries"))) << a;
  }
  // An option the action does not take is a usage error (1), not ignored.
  for (const char* a : {"verify --max-bytes 1K", "ls --kernel x", "prune --kernel x"}) {
    const CommandResult r = run(std::string("cache ") + a);
    EXPECT_EQ(r.code, 1) << a << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(" applies to ")) << a;
  }
  // Not there yet: an empty cache, said so, and not created by looking.
  const std::string none = tmp_ + "/none";
  for (const char* a : {"stat", "ls", "verify", "prune", "clear"}) {
    const CommandResult r = run(std::string("cache ") + a, none);
    EXPECT_EQ(r.code, 0) << a << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("no cache at " + none + " yet")) << a;
  }
  EXPECT_FALSE(fs::exists(none));
  // Unreadable (root reads it anyway).
  if (::geteuid() != 0) {
    const std::string closed = tmp_ + "/closed";
    fs::create_directories(closed);
    ASSERT_EQ(::chmod(closed.c_str(), 0300), 0);
    for (const char* a : {"ls", "stat", "verify", "prune"}) {
      const CommandResult r = run(std::string("cache ") + a, closed);
      EXPECT_EQ(r.code, 5) << a << ": " << r.output;
      EXPECT_THAT(r.output, AllOf(HasSubstr(closed), HasSubstr("Permission denied"), Not(HasSubstr("0 entries")))) << a;
    }
    ::chmod(closed.c_str(), 0700);
  }
}

TEST_F(Prewarm, CacheVerifyEscapesBinaryHeaders) {
  fs::create_directories(cache_);
  fs::permissions(cache_, fs::perms::owner_all);
  for (const char* a : {"verify", "ls"}) {  // verify removes the entry: write it for each
    write_file(cache_ + "/" + std::string(64, 'a') + ".lkjit", "\x1b[2J\x1b]0;owned\x07\x01\xff\nrest");
    const CommandResult r = run(std::string("cache ") + a);
    EXPECT_THAT(r.output, AllOf(HasSubstr("bad magic"), HasSubstr("\\x1b[2J\\x1b]0;owned\\x07\\x01\\xff"))) << a;
    for (char c : r.output) EXPECT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << a << ": byte " << int(static_cast<unsigned char>(c));
  }
}

TEST_F(Prewarm, CacheStatPrintsHumanSizesAndTheFullMode) {
  fs::create_directories(cache_);
  fs::permissions(cache_, fs::perms::owner_all);
  write_file(cache_ + "/" + std::string(64, 'a') + ".lkjit", std::string(48 * 1024, 'x'));
  CommandResult r = run("cache stat", "", "LKJIT_CACHE_MAX_BYTES=2G");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("size       48.0 KiB of 2.0 GiB cap"), Not(HasSubstr("MiB"))));
  write_file(cache_ + "/" + std::string(64, 'a') + ".lkjit", std::string(100, 'x'));
  EXPECT_THAT(run("cache stat").output, HasSubstr("size       100 B of 1.0 GiB cap"));
  ASSERT_EQ(::chmod(cache_.c_str(), 01777), 0);
  r = run("cache stat");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, HasSubstr("(mode 1777)"));
}

// A file name in the cache that no process can remove, root included: a non-empty directory.
void make_unremovable(const std::string& path) {
  fs::create_directories(path);
  write_file(path + "/inside", "x");
}

TEST_F(Prewarm, ClearAndPruneNameWhatTheyCannotRemove) {
  fs::create_directories(cache_);
  fs::permissions(cache_, fs::perms::owner_all);
  const std::string stuck = cache_ + "/" + std::string(64, 'a') + ".lkjit", fine = cache_ + "/" + std::string(64, 'b') + ".lkjit";
  make_unremovable(stuck);
  write_file(fine, fake_entry('b', 100));
  CommandResult r = run("cache prune --max-bytes 1");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("prune: cannot remove " + stuck + ": Directory not empty"),
                              HasSubstr("removed 1 entry ("), HasSubstr("; 1 entry ("), HasSubstr(") remains;"),
                              HasSubstr("lkjit: error: " + cache_ + ": 1 file could not be removed")));
  EXPECT_FALSE(fs::exists(fine));
  write_file(fine, fake_entry('b', 100));
  r = run("cache clear");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("clear: cannot remove " + stuck + ": Directory not empty"),
                              HasSubstr("clear: removed 1 entry from " + cache_),
                              HasSubstr("lkjit: error: " + cache_ + ": 1 file could not be removed")));
  EXPECT_FALSE(fs::exists(fine));
  EXPECT_TRUE(fs::is_directory(stuck));
  // Once it can go, clear succeeds.
  fs::remove(stuck + "/inside");
  r = run("cache clear");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(fs::exists(stuck));
}

TEST_F(Prewarm, PruneEvictsNothingWithoutItsLock) {
  // A folder in the way of .prune.lock makes the lock impossible to create, for root too.
  fs::create_directories(cache_ + "/.prune.lock");
  fs::permissions(cache_, fs::perms::owner_all);
  for (char c : {'a', 'b'}) write_file(cache_ + "/" + std::string(64, c) + ".lkjit", fake_entry(c, 1000));
  const std::string stale_lock = cache_ + "/" + std::string(64, 'c') + ".lock";
  write_file(stale_lock, "12345\n");  // its owner died
  CommandResult r = run("cache prune --max-bytes 1");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("removed 0 entries"), HasSubstr("1 stale file removed"),
                              HasSubstr("lkjit: error: " + cache_ + "/.prune.lock: cannot open lock file: Is a directory; "
                                        "prune evicts only under this lock, so nothing was evicted")))
      << r.output;
  EXPECT_EQ(files_with(".lkjit").size(), 2u) << "entries were evicted without the lock";
  EXPECT_FALSE(fs::exists(stale_lock)) << "the stale-file sweep needs no lock";
  // Nothing over the cap: nothing to guard, so no error.
  for (const char* args : {"prune --max-bytes 0", "prune --max-bytes 1M", "prune"}) {
    r = run(std::string("cache ") + args);
    EXPECT_EQ(r.code, 0) << args << ": " << r.output;
    EXPECT_THAT(r.output, AllOf(HasSubstr("removed 0 entries"), Not(HasSubstr("error")))) << args;
  }
}

TEST_F(Prewarm, VerifySaysWhatItRemovedAndWhatItCouldNot) {
  fs::create_directories(cache_);
  fs::permissions(cache_, fs::perms::owner_all);
  const std::string stuck = cache_ + "/" + std::string(64, 'a') + ".lkjit", corrupt = cache_ + "/" + std::string(64, 'b') + ".lkjit",
                    stray = cache_ + "/notakey.lkjit";
  make_unremovable(stuck);
  write_file(corrupt, "junk");
  write_file(stray, fake_entry('c', 10));
  CommandResult r = run("cache verify");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(line_with(r.output, stuck), AllOf(HasSubstr("corrupt: "), HasSubstr("could not remove it: Directory not empty"),
                                                Not(HasSubstr("removed;"))))
      << r.output;
  EXPECT_THAT(line_with(r.output, corrupt), HasSubstr("(removed; it is rebuilt on next use)")) << r.output;
  EXPECT_EQ(line_with(r.output, stray), "not a cache entry: " + stray + " (its name is not a key; removed)") << r.output;
  EXPECT_THAT(r.output, HasSubstr("verify: 0 entries ok, 2 corrupt, 1 stray file; 1 could not be removed")) << r.output;
  EXPECT_TRUE(fs::is_directory(stuck));
  EXPECT_FALSE(fs::exists(corrupt));
  EXPECT_FALSE(fs::exists(stray));
  r = run("cache verify");
  EXPECT_EQ(r.code, 5) << "a corrupt entry is still there: " << r.output;
  EXPECT_THAT(r.output, HasSubstr("0 entries ok, 1 corrupt; 1 could not be removed"));
}

// The user's case: a cache this user can read but not write. Root writes anyway, so there it is skipped
// (the tests above make removal fail for root too).
TEST_F(Prewarm, MaintenanceOfAReadOnlyCacheFailsWithTheReason) {
  fs::create_directories(cache_);
  fs::permissions(cache_, fs::perms::owner_all);
  const std::string corrupt = cache_ + "/" + std::string(64, 'a') + ".lkjit", good = cache_ + "/" + std::string(64, 'b') + ".lkjit";
  write_file(corrupt, "junk");
  write_file(good, fake_entry('b', 100));
  const std::string stale_lock = cache_ + "/" + std::string(64, 'c') + ".lock";
  write_file(stale_lock, "12345\n");  // its owner died
  ASSERT_EQ(::chmod(cache_.c_str(), 0500), 0);
  const std::string probe = cache_ + "/probe";
  if (const int fd = ::open(probe.c_str(), O_CREAT | O_WRONLY, 0600); fd >= 0) {
    ::close(fd);
    ::unlink(probe.c_str());
    ::chmod(cache_.c_str(), 0700);
    GTEST_SKIP() << "this user can write " << cache_ << " despite mode 0500 (root?)";
  }
  CommandResult r = run("cache clear");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("cannot remove " + good + ": Permission denied"),
                              HasSubstr("cannot remove " + stale_lock + ": Permission denied"),
                              HasSubstr("removed 0 entries"), HasSubstr("3 files could not be removed")));
  // prune cannot create its lock there, so it tries no eviction; the stale sweep still runs.
  r = run("cache prune --max-bytes 1");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("cannot remove " + stale_lock + ": Permission denied"),
                              HasSubstr(".prune.lock: cannot open lock file: Permission denied"),
                              HasSubstr("nothing was evicted"), Not(HasSubstr("cannot remove " + good))));
  EXPECT_THAT(run("cache prune --max-bytes 0").output, HasSubstr("0 stale files removed"));
  r = run("cache verify");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(line_with(r.output, corrupt), AllOf(HasSubstr("could not remove it: Permission denied"), Not(HasSubstr("removed;"))))
      << r.output;
  ::chmod(cache_.c_str(), 0700);
  EXPECT_TRUE(fs::exists(corrupt) && fs::exists(good) && fs::exists(stale_lock));
}

TEST_F(Prewarm, ClearNamesTheEntriesItKeptInUse) {
  fs::create_directories(cache_);
  fs::permissions(cache_, fs::perms::owner_all);
  for (char c : {'a', 'b'}) write_file(cache_ + "/" + std::string(64, c) + ".lkjit", fake_entry(c, 100));
  // A live process compiling 'a' holds its lock: clear keeps it, and says so.
  auto held = lkjit::cache::FileLock::acquire(cache_ + "/" + std::string(64, 'a') + ".lock", std::chrono::milliseconds(0));
  ASSERT_TRUE(held.owned()) << held.error();
  const CommandResult r = run("cache clear");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("clear: kept " + std::string(16, 'a') + "  lkjit_wtconv_fold_k3_L1_w256_sm90 (in use: "
                                        "a live process holds its lock)"),
                              HasSubstr("clear: removed 1 entry from " + cache_ + "; kept 1 in use\n")));
  EXPECT_EQ(files_with(".lkjit"), std::vector<std::string>{std::string(64, 'a') + ".lkjit"});
}

TEST_F(Prewarm, CacheStatCountsKernelsBeingCompiled) {
  fs::create_directories(cache_);
  fs::permissions(cache_, fs::perms::owner_all);
  write_file(cache_ + "/" + std::string(64, 'a') + ".lkjit", fake_entry('a', 100));
  write_file(cache_ + "/" + std::string(64, 'd') + ".lock", "12345\n");  // stale: its owner died
  using lkjit::cache::FileLock;
  std::vector<FileLock> held;
  // 'a' is cached and being compiled again; 'b' and 'c' have no entry yet. The prune guard is no kernel.
  for (const std::string name : {std::string(64, 'a'), std::string(64, 'b'), std::string(64, 'c'), std::string(".prune")}) {
    held.push_back(FileLock::acquire(cache_ + "/" + name + ".lock", std::chrono::milliseconds(0)));
    ASSERT_TRUE(held.back().owned()) << held.back().error();
  }
  CommandResult r = run("cache stat");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("entries    1\n"), HasSubstr("compiling  3\n")));
  held.clear();
  r = run("cache stat");
  EXPECT_THAT(r.output, HasSubstr("compiling  0\n"));
  EXPECT_EQ(files_with(".lock").size(), 1u) << "stat removed the stale lock";
}

}  // namespace
