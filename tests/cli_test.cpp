// Tests of the lkjit CLI (tools/lkjit/*.cpp) run as a subprocess: exit codes (0 ok, 1 usage, 2 bad
// input, 5 cache), messages naming the bad value, the GPU-less `run`, cross-process disk cache hits.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "lkjit/runtime.h"
#include "lkjit/version.h"
#include "tests/test_support.h"

namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

using lkjit::test::CommandResult;
using lkjit::test::run_command;
using lkjit::test::shell_quote;
using lkjit::test::TempDir;

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// One CLI run per test with its own cache directory; the parent's cache settings never leak in.
class Cli : public ::testing::Test {
 protected:
  // env: extra NAME=VALUE settings for this run.
  CommandResult run(const std::string& args, const std::string& shell_prefix = "", const std::string& env = "") const {
    return run_command(shell_prefix + "env -u LKJIT_CACHE_DISABLE -u LKJIT_DUMP_DIR -u LKJIT_LOG LKJIT_CACHE_DIR=" + shell_quote(cache_) +
                       " " + env + " " + shell_quote(LKJIT_CLI_PATH) + " " + args + " 2>&1");
  }

  size_t cache_entries() const {
    size_t n = 0;
    if (fs::exists(cache_))
      for (const auto& e : fs::directory_iterator(cache_)) n += e.path().extension() == ".lkjit";
    return n;
  }

  TempDir tmp_{"lkjit-cli-test"};
  std::string cache_ = tmp_.path() + "/cache";
};

TEST_F(Cli, Version) {
  const CommandResult r = run("--version");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(std::string("lkjit ") + LKJIT_VERSION));
}

TEST_F(Cli, AnOptionBeforeTheSubcommandSaysSo) {
  const CommandResult r = run("-k 5");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("'-k' needs a subcommand first"), HasSubstr("lkjit run"), Not(HasSubstr("Did you mean"))));
  EXPECT_EQ(run("--help").code, 0);
}

TEST_F(Cli, CompileRejectsEvenK) {
  // Even or beyond [1, 31]: the message says both rules.
  for (const char* k : {"4", "33", "0"}) {
    const CommandResult r = run(std::string("compile -k ") + k);
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr(std::string("k=") + k + " is out of range; supported: odd k in [1, 31]")) << k;
  }
  EXPECT_EQ(cache_entries(), 0u);
}

TEST_F(Cli, CompileRejectsUnknownDType) {
  const CommandResult r = run("compile --dtype f64");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("'f64'"), HasSubstr("f32, f16, bf16")));
}

TEST_F(Cli, CompileRejectsOldArchAndMalformedTile) {
  CommandResult r = run("compile --arch sm_70");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("sm_70"));
  r = run("compile --tile 1,2");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--tile"));
  r = run("compile --tile 1,x,3,4,5");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("'x'"));
  r = run("compile --no-such-option");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no-such-option"));
}

TEST_F(Cli, HelpListsLkjitsOptionsNotLlvmsInternalOnes) {
  const CommandResult r = run("--help-hidden");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("--version"), HasSubstr("prewarm"), Not(HasSubstr("--rng-seed")),
                              Not(HasSubstr("--stats"))));
}

TEST_F(Cli, RunRejectsMalformedShapes) {
  CommandResult r = run("run --shapes 1:2:3");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("'1:2:3'"), HasSubstr("B:C:H:W:L")));
  r = run("run --shapes 1:4:9:9:2,1:4:x:9:2");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("'x'"), HasSubstr("'1:4:x:9:2'")));
  r = run("run --dtypes f64 --shapes 1:4:9:9:2");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("'f64'"));
  EXPECT_EQ(cache_entries(), 0u);
}

TEST_F(Cli, RunRejectsOutOfRangeValuesWith2) {
  // Well-formed values out of range or unknown are bad input (2), checked before anything compiles; none
  // is raised silently (--check-planes 0 used to check one plane). Integers beyond int are no usage error.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--shapes 0:4:9:9:2", "B=0"},
      // Integers beyond int64 too: the field, the value as written and the field's range.
      {"--shapes 1:4:99999999999999999999:9:2",
       "--shapes: H=99999999999999999999 in '1:4:99999999999999999999:9:2' is out of range; supported: [1, 2^30]"},
      {"--shapes 1:4:9:-99999999999999999999:2", "--shapes: W=-99999999999999999999 in"},
      {"--shapes 1:4:9:9:99999999999999999999", "L=99999999999999999999 in '1:4:9:9:99999999999999999999' is out of "
                                                "range; supported: L in [0, 8]"},
      {"--check-planes 0", "--check-planes=0 is out of range; supported: [1, 2147483647]"},
      {"--check-planes -1", "--check-planes=-1 is out of range; supported: [1, 2147483647]"},
      {"--iters 0", "--iters=0 is out of range; supported: [1, 2147483647]"},
      {"--iters 99999999999", "--iters=99999999999 is out of range; supported: [1, 2147483647]"},
      {"-k 99999999999", "-k=99999999999 is out of range; supported: odd k in [1, 31]"},
      {"-k 33", "-k=33 is out of range; supported: odd k in [1, 31]"},
      {"-k 4", "k=4 is out of range; supported: odd k in [1, 31]"},
      {"--stride 99999999999999999999", "--stride=99999999999999999999 is out of range; supported: [1, 64]"},
      {"--path diagonal", "--path 'diagonal' is unknown; supported: auto, plane, tiled, lane"},
  };
  for (const auto& [args, msg] : cases) {
    const std::string shapes = args.rfind("--shapes", 0) == 0 ? "" : "--shapes 1:4:9:9:2 ";
    const CommandResult r = run("run --dtypes f32 " + shapes + args);
    EXPECT_EQ(r.code, 2) << args << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(msg)) << args;
  }
  EXPECT_EQ(cache_entries(), 0u);
}

TEST_F(Cli, EmitSourcePrintsTheTranslationUnit) {
  const CommandResult r = run("compile --emit-source");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("extern \"C\" __global__"), HasSubstr("lkjit_wtconv_fwd_plane_f32_k5_L3_"),
                              HasSubstr("struct Cfg")));
  EXPECT_EQ(cache_entries(), 0u) << "--emit-source compiled something";
}

TEST_F(Cli, CompileHitsTheDiskCacheInTheNextProcess) {
  const std::string args = "compile --kernel wtconv_fold --k 3 --L 1 --arch sm_80,sm_90";
  const CommandResult first = run(args), second = run(args);
  EXPECT_EQ(first.code, 0) << first.output;
  EXPECT_EQ(second.code, 0) << second.output;
  for (const char* name : {"lkjit_wtconv_fold_k3_L1_w256_sm80", "lkjit_wtconv_fold_k3_L1_w256_sm90"}) {
    EXPECT_THAT(first.output, HasSubstr(name));
    EXPECT_THAT(second.output, HasSubstr(name));
  }
  EXPECT_THAT(first.output, AllOf(HasSubstr("compiled"), Not(HasSubstr("disk"))));
  EXPECT_THAT(second.output, AllOf(HasSubstr("disk"), Not(HasSubstr("compiled"))));
  EXPECT_EQ(cache_entries(), 2u);
  struct stat st {};
  ASSERT_EQ(::stat(cache_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(Cli, UnsafeCacheDirectoryExitsWithTheCacheCode) {
  fs::create_directories(cache_);
  ASSERT_EQ(::chmod(cache_.c_str(), 0777), 0);
  const CommandResult r = run("compile --kernel wtconv_fold --k 3 --L 2");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr(cache_), HasSubstr("writable")));
}

TEST_F(Cli, RunChecksTheCacheFolderBeforePrintingAnything) {
  // GPU or not: the error comes alone, not after the run's header.
  fs::create_directories(cache_);
  ASSERT_EQ(::chmod(cache_.c_str(), 0777), 0);
  CommandResult r = run("run --dtypes f32 --shapes 1:8:8:8:1");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit: error: " + cache_ + ": cache directory is writable by other users"),
                              Not(HasSubstr("lkjit run:")), Not(HasSubstr("kernel"))));
  fs::remove(cache_);
  lkjit::test::write_file(cache_, "not a folder");
  r = run("run --dtypes f32 --shapes 1:8:8:8:1");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_EQ(r.output, "lkjit: error: " + cache_ + ": cache path is not a directory\n");
}

TEST_F(Cli, ABrokenTuningDatabaseIsSaidWithoutAGpu) {
  // Layers read the database only on a GPU, and then ignore a broken one quietly: run and tune --list say so
  // at once, naming the file and the parse error, and go on.
  const std::string db = tmp_.path() + "/bad.json", env = "LKJIT_TUNING_DB=" + shell_quote(db);
  lkjit::test::write_file(db, "{\"format\": 1,");
  const std::string warning = "lkjit: warning: " + db + ": tuning database is not JSON: ";
  const std::string list = "tune --list --arch sm_90 --shape 1:4:8:8 -k 3 --L 1";
  CommandResult r = run(list, "", env);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr(warning), HasSubstr("lkjit tune --list:"))) << r.output;
  r = run(list + " --db " + shell_quote(db));
  EXPECT_THAT(r.output, HasSubstr(warning)) << r.output;
  r = run("run --dtypes f32 --shapes 1:4:8:8:1 -k 3", "", env);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(count(r.output, warning), 1u) << r.output;
  // Nothing to say where the database is not read (LKJIT_TUNE=off) or there is none.
  r = run("run --dtypes f32 --shapes 1:4:8:8:1 -k 3", "", env + " LKJIT_TUNE=off");
  EXPECT_THAT(r.output, Not(HasSubstr("warning"))) << r.output;
  r = run(list);
  EXPECT_THAT(r.output, Not(HasSubstr("warning"))) << r.output;
}

TEST_F(Cli, CompileIntoAnUnwritableCacheFailsWithTheCacheCode) {
  // The kernel compiles, but is stored nowhere: that is the cache's failure, not a success.
  const auto dir = lkjit::test::make_unwritable_dir(cache_);
  const CommandResult r = run("compile --kernel wtconv_fold --k 3 --L 1", dir.prefix);
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit: error: " + cache_), HasSubstr("could not be stored"),
                              HasSubstr("not cached")));
  EXPECT_EQ(count(r.output, dir.os_error), 1u) << r.output;
  EXPECT_EQ(cache_entries(), 0u);
}

TEST_F(Cli, CompileDefaultTilesFitTheKernelSize) {
  // The lane kernels' default tile_w shrinks where k's register rows would not fit (k = 7: 8 columns).
  for (const char* kernel : {"wtconv_fwd_lane", "wtconv_bwd_lane"}) {
    const CommandResult r = run(std::string("compile --kernel ") + kernel + " -k 7 -L 2 --emit-source");
    EXPECT_EQ(r.code, 0) << kernel << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("wmax = 8")) << kernel;
  }
  // A kernel size no lane tile fits: the error names the default tile and points to --tile.
  const CommandResult r = run("compile --kernel wtconv_fwd_lane -k 11 -L 2 --emit-source");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("k=11"), HasSubstr("the default tile"), HasSubstr("--tile")));
}

TEST_F(Cli, CompileWarnsOfOptionsThatDoNotApplyToTheKernel) {
  // The kernel is compiled all the same (exit 0), but the option is not dropped silently.
  const std::vector<std::pair<std::string, std::string>> ignored = {
      {"--kernel wtconv_fold --deeper",
       "lkjit: warning: compile: --deeper does not apply to wtconv_fold and is ignored; it applies to "
       "wtconv_fwd_level, wtconv_bwd_level\n"},
      {"--kernel wtconv_fwd_level -L 0", "lkjit: warning: compile: -L does not apply to wtconv_fwd_level and is ignored"},
      {"--kernel wtconv_fold --dtype f16", "lkjit: warning: compile: --dtype does not apply to wtconv_fold and is ignored"},
      {"--kernel wtconv_fwd_level --deeper --dtype f16", "--dtype does not apply to wtconv_fwd_level with --deeper"},
  };
  for (const auto& [args, warning] : ignored) {
    const CommandResult r = run("compile " + args + " --emit-source");
    EXPECT_EQ(r.code, 0) << args << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(warning)) << args;
  }
  for (const char* args : {"--kernel wtconv_fwd_level --deeper", "--kernel wtconv_fold -L 2 -k 3", "--dtype f16 -L 0"}) {
    const CommandResult r = run(std::string("compile ") + args + " --emit-source");
    EXPECT_EQ(r.code, 0) << args << ": " << r.output;
    EXPECT_THAT(r.output, Not(HasSubstr("warning"))) << args;
  }
  EXPECT_EQ(cache_entries(), 0u);
}

TEST_F(Cli, CompileTakesEachArchOnce) {
  const CommandResult r = run("compile --kernel wtconv_fold --k 3 --L 1 --arch sm_90,90,sm_80");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(count(r.output, "lkjit_wtconv_fold_k3_L1_w256_sm90 "), 1u) << r.output;
  EXPECT_EQ(count(r.output, "lkjit_wtconv_fold_k3_L1_w256_sm80 "), 1u) << r.output;
}

TEST_F(Cli, CompileChecksEveryArchBeforeCompilingAny) {
  CommandResult r = run("compile --kernel wtconv_fold --k 3 --L 1 --arch sm_90,sm_999");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("sm_999"), Not(HasSubstr("lkjit_wtconv_fold_k3_L1_w256_sm90"))));
  EXPECT_EQ(cache_entries(), 0u) << "sm_90 was compiled before sm_999 was checked";
  for (const char* archs : {"''", "' '", "sm_90,,sm_80", "sm_90,"}) {
    r = run(std::string("compile --kernel wtconv_fold --k 3 --L 1 --arch ") + archs);
    EXPECT_EQ(r.code, 1) << archs << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("lkjit: error: --arch: ")) << archs;
  }
  r = run("compile --kernel wtconv_fold --tile 0,0,,0,256");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--tile"));
  EXPECT_EQ(cache_entries(), 0u);
}

TEST_F(Cli, CompileRejectsATileAxisTheKernelDoesNotHave) {
  // A plane kernel has no spatial tile, a level kernel no planes: such values would only change the
  // kernel's name and cache key.
  CommandResult r = run("compile --kernel wtconv_fwd_plane --tile 8,8,1,1,128 --emit-source");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("wtconv_fwd_plane has no tile_h axis"), HasSubstr("planes, vy, threads")));
  r = run("compile --kernel wtconv_fwd_level --tile 8,32,2,1,128 --emit-source");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("wtconv_fwd_level has no planes axis"));
  r = run("compile --kernel wtconv_fwd_plane --tile 0,0,1,1,128 --emit-source");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit_wtconv_fwd_plane_f32_k5_L3_p1_v1_w128_sm90"));
  r = run("compile --help");
  for (lkjit::Kernel k : lkjit::all_kernels()) EXPECT_THAT(r.output, HasSubstr(lkjit::to_string(k)));
  EXPECT_EQ(cache_entries(), 0u);
}

TEST_F(Cli, RunWithoutGpuCompilesThePlannedKernels) {
  std::string why;
  if (lkjit::gpu_available(&why)) GTEST_SKIP() << "a GPU is present: `lkjit run` would execute, not just compile";
  const CommandResult r = run("run --dtypes f16 --shapes 1:4:9:9:2");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("no GPU"), HasSubstr(cache_), HasSubstr("lkjit_wtconv_fold_k5_L2_w256_sm90"),
                              HasSubstr("lkjit_wtconv_fwd_"), HasSubstr("_f16_k5_")));
  // Every listed kernel is now in the cache.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"((\d+) kernels ready for sm_90)"))) << r.output;
  EXPECT_GE(std::stoul(m[1].str()), 2u);
  EXPECT_EQ(cache_entries(), std::stoul(m[1].str()));
}

TEST_F(Cli, RunAndTuneRefuseAnUnknownLkjitTune) {
  // Said at once, GPU or not, before anything compiles (without a GPU no layer would read it).
  for (const char* args : {"run --dtypes f32 --shapes 1:8:8:8:1", "tune --list --shape 1:8:8:8 --arch sm_90"}) {
    const CommandResult r = run(args, "", "LKJIT_TUNE=bogus");
    EXPECT_EQ(r.code, 2) << args << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("LKJIT_TUNE='bogus' is unknown; supported: off, cached, tune, retune")) << args;
    EXPECT_EQ(cache_entries(), 0u) << args;
  }
}

TEST_F(Cli, RunWithoutGpuSaysWhenTheDiskCacheIsDisabled) {
  std::string why;
  if (lkjit::gpu_available(&why)) GTEST_SKIP() << "a GPU is present: `lkjit run` would execute, not just compile";
  const CommandResult r = run("run --dtypes f32 --shapes 1:8:8:8:1", "", "LKJIT_CACHE_DISABLE=1");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("disabled by LKJIT_CACHE_DISABLE=1: nothing is kept"), Not(HasSubstr(cache_))));
  EXPECT_EQ(cache_entries(), 0u);
}

TEST_F(Cli, RunWithoutGpuIntoAnUnwritableCacheFailsWithTheCacheCode) {
  std::string why;
  if (lkjit::gpu_available(&why)) GTEST_SKIP() << "a GPU is present: `lkjit run` would execute, not just compile";
  const auto dir = lkjit::test::make_unwritable_dir(cache_);
  const CommandResult r = run("run --dtypes f32 --shapes 1:8:8:8:2", dir.prefix);
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("(not cached)"), HasSubstr("lkjit: error: " + cache_),
                              HasSubstr("could not be stored"), Not(HasSubstr("kernels ready"))));
  EXPECT_EQ(cache_entries(), 0u);
}

}  // namespace
