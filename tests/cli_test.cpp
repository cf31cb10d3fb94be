// Tests of the lkjit CLI (tools/lkjit/*.cpp) run as a subprocess: exit codes (0 ok, 1 usage, 2 bad
// input, 5 cache), messages naming the bad value, the GPU-less `run`, cross-process disk cache hits, --op and
// --tile by axis name; with a second, toy op family (tests/cli_toy_registry.cpp, the lkjit_cli_toy binary),
// what needs two families; and the layering of tools/ (public headers only).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
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
                       " " + env + " " + shell_quote(cli_) + " " + args + " 2>&1");
  }

  size_t cache_entries() const {
    size_t n = 0;
    if (fs::exists(cache_))
      for (const auto& e : fs::directory_iterator(cache_)) n += e.path().extension() == ".lkjit";
    return n;
  }

  TempDir tmp_{"lkjit-cli-test"};
  std::string cache_ = tmp_.path() + "/cache";
  std::string cli_ = LKJIT_CLI_PATH;
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

// ---- --op, --tile by name, full kernel names -----------------------------------------------------------

TEST_F(Cli, OpWtconvIsTheDefaultAndAnUnknownOpIsNamed) {
  // --op wtconv changes nothing: every subcommand gives what it gives without it.
  for (const std::string args : {"compile --kernel wtconv_fold -k 3 -L 1 --emit-source",
                                 "tune --list --shape 1:4:8:8 --L 1 --arch sm_90",
                                 "prewarm --list --shapes 1:4:8:8 --k 3 --L 1 --arch sm_90 --dtypes f32",
                                 "run --dtypes f32 --shapes 1:4:9:9:2 -k 99"}) {
    const CommandResult plain = run(args), op = run(args + " --op wtconv");
    EXPECT_EQ(plain.code, op.code) << args << ": " << op.output;
    EXPECT_EQ(plain.output, op.output) << args;
  }
  for (const char* sub : {"run", "compile", "tune --list", "prewarm --list --preset wtconvnext-t"}) {
    const CommandResult r = run(std::string(sub) + " --op wbmmx");
    EXPECT_EQ(r.code, 2) << sub << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("lkjit: error: --op 'wbmmx' is unknown; supported: wtconv, scale")) << sub;
  }
  EXPECT_EQ(cache_entries(), 0u);
}

// The scale family (lkjit/scale.h) takes part through tools/lkjit/ops/scale.cpp and its registry line alone.
TEST_F(Cli, TheScaleFamilyIsAnOpOfItsOwn) {
  std::string why;
  const bool gpu = lkjit::gpu_available(&why);
  CommandResult r = run("compile --op scale --dtype f16 --tile threads=128 --emit-source");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit_scale_copy_f16_w128_sm90(const __grid_constant__ lkjit::ScaleParams"));
  r = run("compile --kernel scale_copy --tile 64,128");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--tile has 2 integers; supported: 1, threads"));
  r = run("tune --list --op scale --shape 8:64:56:56 --arch sm_90");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit tune --list: scale fwd f32 8x64x56x56, limits table of sm_90"),
                              HasSubstr("scale_copy f32 sm_90 on 8x64x56x56: 4 points, 4 valid"),
                              HasSubstr("lkjit_scale_copy_f32_w512_sm90")));
  r = run("tune --list --op scale --pass bwd");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit: error: scale: there is no backward pass; supported: fwd"));
  r = run("prewarm --list --op scale --shapes 1:4:8:8,2:3:5:7 --arch sm_80,sm_90");  // forward only
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_scale_copy_bf16_w256_sm80"), HasSubstr("6 kernels\n")));
  // WTConv's options are not the scale family's; an unknown shape field is named as for any op.
  for (const std::string args : {"run --op scale -k 3", "prewarm --list --op scale --shapes 1:4:8:8 --L 2",
                                 "tune --list --op scale --nhwc", "compile --op scale --deeper"}) {
    r = run(args);
    EXPECT_EQ(r.code, 1) << args << ": " << r.output;
    // (-k, --nhwc: also the depthwise family's, which the message lists after WTConv)
    EXPECT_THAT(r.output, AllOf(HasSubstr(" is an option of --op wtconv"), HasSubstr(", not of --op scale\n"))) << args;
  }
  r = run("run --op scale --shapes 0:4:8:8");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--shapes: B=0 in '0:4:8:8' is out of range; supported: >= 1"));
  if (!gpu) {
    // Its demo runs when named; `lkjit run` without --op leaves it out (a family for tests and examples).
    r = run("run --op scale --dtypes f32,bf16");
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_scale_copy_f32_w256_sm90"), HasSubstr("lkjit_scale_copy_bf16_w256_sm90"),
                                HasSubstr("2 kernels ready for sm_90")));
    r = run("run --dtypes f32");
    EXPECT_EQ(r.code, 0) << r.output;
    // ... and runs every other family's demo (issue: `lkjit run` shows each registered family).
    EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_wtconv_fwd_plane_f32_k5_L5_"), HasSubstr("lkjit_dwconv_fwd_direct_f32_"),
                                HasSubstr("lkjit_wbmm_fwd_f32_"), Not(HasSubstr("scale")), Not(HasSubstr("_f16_"))));
  }
}

TEST_F(Cli, HelpListsEachOpsOptionsUnderItsName) {
  for (const char* sub : {"run", "compile", "tune", "prewarm"}) {
    const CommandResult r = run(std::string(sub) + " --help");
    EXPECT_EQ(r.code, 0) << sub << ": " << r.output;
    const size_t core = r.output.find(std::string("lkjit ") + sub + " options:"), op = r.output.find("wtconv options:");
    ASSERT_NE(core, std::string::npos) << sub << ": " << r.output;
    ASSERT_NE(op, std::string::npos) << sub << ": " << r.output;
    EXPECT_THAT(r.output.substr(core, op - core), AllOf(HasSubstr("--op="), Not(HasSubstr("-k=")))) << sub;
    EXPECT_THAT(r.output.substr(op), AllOf(HasSubstr("-k=<k>"), HasSubstr("(wtconv: odd"), Not(HasSubstr("--op=")))) << sub;
  }
  EXPECT_THAT(run("compile --help").output, AllOf(HasSubstr("--deeper"), HasSubstr("wtconv: tile_h,tile_w,planes,vy,threads[,blocks,cluster]")));
  EXPECT_THAT(run("prewarm --help").output, HasSubstr("wtconvnext-b (wtconv: "));
}

TEST_F(Cli, CompileTakesTheTileByAxisName) {
  // In any order, the same kernel as the positional form.
  const CommandResult named = run("compile --kernel wtconv_fwd_plane --tile vy=1,threads=128,planes=1 --emit-source");
  EXPECT_EQ(named.code, 0) << named.output;
  EXPECT_THAT(named.output, HasSubstr("lkjit_wtconv_fwd_plane_f32_k5_L3_p1_v1_w128_sm90"));
  EXPECT_EQ(named.output, run("compile --kernel wtconv_fwd_plane --tile 0,0,1,1,128 --emit-source").output);
  CommandResult r = run("compile --kernel wtconv_bwd_lane -k 5 -L 3 --tile blocks=6,threads=64,planes=32,tile_w=14 --emit-source");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit_wtconv_bwd_lane_f32_k5_L3_p32_t0x14_b6_w64_sm90"));
  r = run("compile --kernel wtconv_fold -k 3 -L 1 --tile threads=128");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit_wtconv_fold_k3_L1_w128_sm90  sm_90"));
  // Each refusal names the item and the kernel's axes.
  const std::vector<std::tuple<std::string, int, std::string>> cases = {
      {"thread=128", 2, "--tile: 'thread' is not a tile axis; supported: axis=value items with the axes of "
                        "wtconv_fwd_plane: planes, vy, threads"},
      {"tile_h=8,threads=128", 2, "--tile: wtconv_fwd_plane has no tile_h axis; supported: its axes planes, vy, threads"},
      {"blocks=0,threads=128", 2, "--tile: wtconv_fwd_plane has no blocks axis"},
      {"threads=", 1, "--tile: threads= has no value; supported: axis=value items with the axes of wtconv_fwd_plane: "
                      "planes, vy, threads"},
      {"threads=x", 1, "--tile: threads=x is not a decimal integer; supported: axis=value items with the axes of "
                       "wtconv_fwd_plane: planes, vy, threads"},
      {"threads=0x80", 1, "--tile: threads=0x80 is not a decimal integer"},
      {"threads=1,threads=2", 1, "--tile: threads is given twice"},
      {"threads=128,4", 1, "--tile: '4' is not axis=value"},
      {"=5", 1, "--tile: '=5' is not axis=value"},
      {"threads=99999999999", 2, "--tile: threads=99999999999 is out of range"},
      {"threads=2048,planes=1,vy=1", 2, "wtconv_fwd_plane tile p1_v1_w2048: threads=2048 is out of range"},
      {"threads=128,,vy=1", 1, "--tile: "},
  };
  for (const auto& [tile, code, msg] : cases) {
    r = run("compile --kernel wtconv_fwd_plane --tile " + shell_quote(tile));
    EXPECT_EQ(r.code, code) << tile << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("lkjit: error: " + msg)) << tile;
  }
  EXPECT_EQ(cache_entries(), 1u);  // the fold kernel alone
}

TEST_F(Cli, CompileTakesAFullKernelName) {
  CommandResult r = run("compile --kernel lkjit_wtconv_bwd_lane_bf16_k5_L3_p32_t0x14_b6_w64_sm90 --emit-source");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_wtconv_bwd_lane_bf16_k5_L3_p32_t0x14_b6_w64_sm90(const __grid_constant__"),
                              HasSubstr("struct Cfg")));
  r = run("compile --kernel lkjit_wtconv_fold_k3_L1_w256_sm80");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit_wtconv_fold_k3_L1_w256_sm80  sm_80"));
  EXPECT_EQ(cache_entries(), 1u);
  // The name gives the dtype, the fields, the tile and the arch: an option for them beside it is refused.
  for (const std::string opt : {"--tile threads=128", "-k 3", "-L 1", "--deeper", "--dtype f16", "--arch sm_90"}) {
    r = run("compile --kernel lkjit_wtconv_fold_k3_L1_w256_sm90 " + opt);
    EXPECT_EQ(r.code, 1) << opt << ": " << r.output;
    EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit: error: compile: " + opt.substr(0, opt.find(' ')) +
                                          " does not apply to a full kernel name"),
                                HasSubstr("give the kernel wtconv_fold instead"))) << opt;
  }
  // Names this lkjit does not generate, and valid-looking ones it refuses.
  r = run("compile --kernel lkjit_wtconv_fold_k3_L1_w256");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--kernel 'lkjit_wtconv_fold_k3_L1_w256' is not a kernel name this lkjit generates"));
  r = run("compile --kernel lkjit_wtconv_fold_k3_L1_w2048_sm90");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("threads=2048"));
  r = run("compile --kernel lkjit_wtconv_fold_k4_L1_w256_sm90");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("k=4"));
  EXPECT_EQ(cache_entries(), 1u);
}

// tools/ sit on the public API and the support layer: an include of another layer's internals (cache/, runtime/,
// generator/) fails.
TEST(CliLayering, ToolsIncludeOnlyPublicHeadersAndTools) {
  const std::regex include(R"(^\s*#\s*include\s*"([^"]+)\")");
  size_t files = 0;
  std::string bad;
  for (const auto& e : fs::recursive_directory_iterator(std::string(LKJIT_SOURCE_DIR) + "/tools")) {
    const std::string ext = e.path().extension().string();
    if (ext != ".cpp" && ext != ".h") continue;
    ++files;
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, include)) continue;
      const std::string h = m[1].str();
      if (h.rfind("lkjit/", 0) != 0 && h.rfind("tools/", 0) != 0 && h.rfind("support/", 0) != 0)
        bad += e.path().string() + ": " + h + "\n";
    }
  }
  EXPECT_GT(files, 10u);
  EXPECT_EQ(bad, "") << "tools/ may include only include/lkjit/*.h, support/* and tools/*";
}

// ---- two op families: lkjit_cli_toy (WTConv and the toy op of tests/cli_toy_registry.cpp) ---------------

class CliOps : public Cli {
 protected:
  CliOps() { cli_ = LKJIT_CLI_TOY_PATH; }
};

TEST_F(CliOps, AnOptionOfAnotherOpIsAUsageErrorNamingIt) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"run --window 3 --shapes 1:4:8:8:1", "run: --window is an option of --op toy, not of --op wtconv (the default "
                                            "without --op)"},
      {"run --op toy --path plane", "run: --path is an option of --op wtconv, not of --op toy\n"},
      {"run --op toy --no-bias", "run: --no-bias is an option of --op wtconv, not of --op toy"},
      {"run --op wtconv --window 3", "run: --window is an option of --op toy, not of --op wtconv\n"},
      {"compile --kernel wtconv_fold --window 3", "compile: --window is an option of --op toy, not of --op wtconv (the "
                                                  "op of --kernel wtconv_fold)"},
      {"compile --op toy -L 2", "compile: -L is an option of --op wtconv, not of --op toy"},
      {"compile --op toy --deeper", "compile: --deeper is an option of --op wtconv"},
      {"tune --list --op toy --L 3", "tune: -L is an option of --op wtconv, not of --op toy"},
      {"tune --list --window 3", "tune: --window is an option of --op toy, not of --op wtconv (the default without --op)"},
      {"prewarm --list --op toy --L 3 --shapes 1:4:8:8", "prewarm: -L is an option of --op wtconv, not of --op toy"},
      {"prewarm --list --window 3 --preset wtconvnext-t", "prewarm: --window is an option of --op toy, not of --op "
                                                          "wtconv (the default without --op)"},
      // The first on the command line is named.
      {"run --op toy --stride 2 --path plane", "run: --stride is an option of --op wtconv"},
  };
  for (const auto& [args, msg] : cases) {
    const CommandResult r = run(args);
    EXPECT_EQ(r.code, 1) << args << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("lkjit: error: " + msg)) << args;
  }
  // A mismatched kernel and --op.
  const CommandResult r = run("compile --op toy --kernel wtconv_fwd_plane");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("compile: --kernel wtconv_fwd_plane is a kernel of --op wtconv, not of --op toy"));
  EXPECT_EQ(cache_entries(), 0u);
}

TEST_F(CliOps, SharedOptionsServeEveryOpThatReadsThem) {
  // -k is both ops' (each parses it with its own range and default); one option in each op's help category.
  CommandResult r = run("prewarm --list --op toy --shapes 1:4:8:8 --k 3,5 --arch sm_90 --dtypes f32");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_wtconv_fold_k3_L1_w256_sm90"), HasSubstr("lkjit_wtconv_fold_k5_L1_w256_sm90"),
                              HasSubstr("2 kernels\n")));
  r = run("prewarm --list --shapes 1:4:8:8 --k 3 --L 1 --arch sm_90 --dtypes f32");
  EXPECT_THAT(r.output, HasSubstr("11 kernels\n")) << r.output;
  r = run("run --help");
  EXPECT_EQ(count(r.output, "-k=<k>               - kernel size (wtconv: odd, 1..31; default 5; toy: odd, 1..31; default 3)"),
            2u) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("toy options:"), HasSubstr("wtconv options:"), HasSubstr("--window"),
                              HasSubstr("--op=<string>        - op family: wtconv | toy")));
  // Each op's range: 33 is out of WTConv's, and the toy's even k is refused by its own rule.
  r = run("run --op toy -k 4");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit: error: -k=4 is out of range; supported: odd k in [1, 31]"));
  r = run("run --op toy -k x");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit: error: -k='x' is not a decimal integer; supported: odd k in [1, 31]"));
  EXPECT_EQ(cache_entries(), 0u);
}

TEST_F(CliOps, RunWithoutOptionsRunsEveryOpsDemo) {
  std::string why;
  if (lkjit::gpu_available(&why)) GTEST_SKIP() << "a GPU is present: `lkjit run` would execute, not just compile";
  // No op named, no op's option: every op's demo layers (WTConvNeXt-T's 4 layers; the toy's fold kernel).
  CommandResult r = run("run --dtypes f32");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_wtconv_fold_k5_L5_w256_sm90"), HasSubstr("lkjit_wtconv_fwd_plane_f32_k5_L2_"),
                              HasSubstr("lkjit_wtconv_fold_k3_L1_w256_sm90"), HasSubstr("9 kernels ready for sm_90")));
  // One op: its demo alone, or its shapes. One kernel is "1 kernel", not "1 kernels".
  const std::string kOneReady = "\n1 kernel ready for sm_90; run on a GPU to execute and check it.";
  r = run("run --op toy --dtypes f32");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_wtconv_fold_k3_L1_w256_sm90"), HasSubstr(kOneReady)));
  r = run("run --op toy -k 5 --shapes 1:4:8:8,2:4:8:8 --dtypes f32");
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_wtconv_fold_k5_L1_w256_sm90"), HasSubstr(kOneReady))) << r.output;
  // An op's option alone picks the default op (WTConv: its demo with k=3).
  r = run("run --dtypes f32 -k 3");
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_wtconv_fold_k3_L5_w256_sm90"), HasSubstr("8 kernels ready"))) << r.output;
}

TEST_F(CliOps, PresetsAndManifestLayersAreFoundByOp) {
  CommandResult r = run("prewarm --list --preset toynet,wtconvnext-t --arch sm_90 --dtypes f32 --passes fwd");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_wtconv_fold_k3_L1_w256_sm90"), HasSubstr("lkjit_wtconv_fwd_plane_f32_k5_L5_")));
  r = run("prewarm --list --preset nope");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--preset 'nope' is unknown; supported: wtconvnext-t, wtconvnext-s, wtconvnext-b, toynet"));
  const std::string manifest = tmp_.path() + "/m.json";
  lkjit::test::write_file(manifest, R"({"archs": ["sm_90"], "dtypes": ["f32"], "passes": ["fwd"], "layers": [
    {"op": "toy", "C": 8, "H": 8, "W": 8, "k": 7, "window": 3}, {"C": 8, "H": 8, "W": 8, "k": 9}]})");
  r = run("prewarm --list --manifest " + shell_quote(manifest));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_wtconv_fold_k7_L1_w256_sm90"), HasSubstr("lkjit_wtconv_fwd_plane_f32_k9_L1_")));
  // Each layer's keys are its op's.
  const std::vector<std::pair<std::string, std::string>> layers = {
      {R"({"op": "toy", "C": 8, "H": 8, "W": 8, "L": 2})",
       "layers[0]: unknown key \"L\"; known: B, C, H, W, k, window (op toy) and op"},
      {R"({"C": 8, "H": 8, "W": 8, "window": 2})", "layers[0]: unknown key \"window\"; known: B, C, H, W, k, L, stride (op "
                                                   "wtconv) and op"},
      {R"({"op": "toy", "C": 8, "H": 8, "W": 8, "window": 99})",
       "layers[0]: \"window\" is out of range (99); supported: an integer in [1, 16]"},
      {R"({"op": "toy", "C": 8, "H": 8, "W": 8, "k": 4})", "layers[0]: \"k\" is 4; supported: an odd integer in [1, 31]"},
      {R"({"op": "nope", "C": 8, "H": 8, "W": 8})", "layers[0]: op 'nope' is unknown; supported: wtconv, toy"},
      {R"({"op": 5, "C": 8, "H": 8, "W": 8})", "layers[0]: \"op\" must be a string"},
  };
  for (const auto& [layer, msg] : layers) {
    lkjit::test::write_file(manifest, R"({"layers": [)" + layer + "]}");
    r = run("prewarm --list --manifest " + shell_quote(manifest));
    EXPECT_EQ(r.code, 2) << layer << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("lkjit: error: " + manifest + ": " + msg)) << layer;
  }
}

TEST_F(CliOps, CompileAndTuneTakeTheOp) {
  CommandResult r = run("compile --op toy --emit-source");  // the op's default kernel and fields
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit_wtconv_fold_k3_L1_w256_sm90(const __grid_constant__"));
  r = run("tune --list --op toy --shape 2:8:8:8 --window 5 --arch sm_90");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit tune --list: toy fwd f32 2x8x8x8 k=3 window=5, limits table of sm_90"),
                              HasSubstr("plan: wtconv_fold\n"), HasSubstr("lkjit_wtconv_fold_k3_L1_w256_sm90")));
  EXPECT_EQ(cache_entries(), 0u);
}

}  // namespace
