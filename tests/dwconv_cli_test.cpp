// The depthwise family in the lkjit CLI (tools/lkjit/ops/dwconv.cpp), run as a subprocess with no GPU: compile
// with its fields, kernel names by axis, its presets in prewarm --list, tune --list's space, and values out of
// range or options of another family refused with the value and the range.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/test_support.h"

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using lkjit::test::CommandResult;

class DWConvCli : public ::testing::Test {
 protected:
  CommandResult run(const std::string& args) const {
    return lkjit::test::run_command("env -u LKJIT_CACHE_DISABLE -u LKJIT_DUMP_DIR -u LKJIT_LOG LKJIT_CACHE_DIR=" +
                                    lkjit::test::shell_quote(tmp_.path() + "/cache") + " " +
                                    lkjit::test::shell_quote(LKJIT_CLI_PATH) + " " + args + " 2>&1");
  }
  lkjit::test::TempDir tmp_{"lkjit-dwconv-cli-test"};
};

TEST_F(DWConvCli, CompilesItsKernelsByFieldAndAxis) {
  CommandResult r = run("compile --op dwconv -k 31 --emit-source");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_dwconv_fwd_direct_f32_kh31_kw31_s1_d1_"),
                              HasSubstr("(const __grid_constant__ lkjit::DWConvParams p)")));
  r = run("compile --op dwconv --kernel dwconv_fwd_nhwc -k 5 --kw 51 --stride 2 --dil 2 --dtype bf16 --emit-source "
          "--tile tile_h=8,tile_w=8,ry=1,rx=2,lanes=32,cvec=2,threads=128");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit_dwconv_fwd_nhwc_bf16_kh5_kw51_s2_d2_t8x8_w128_ry1_rx2_ln32_cv2_sm90"));
  r = run("compile --op dwconv --kernel dwconv_wgrad_reduce --emit-source");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit_dwconv_wgrad_reduce_w256_sm90"));
}

TEST_F(DWConvCli, PresetsAndSpacesListWithoutAGpu) {
  CommandResult r = run("prewarm --list --preset replknet-31b --arch sm_90 --dtypes bf16 --passes fwd,bwd");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_dwconv_fwd_direct_bf16_kh31_kw31_s1_d1_"),
                              HasSubstr("lkjit_dwconv_wgrad_nhwc_bf16_kh13_kw13_s1_d1_"),
                              HasSubstr("lkjit_dwconv_wgrad_reduce_w256_sm90")));
  r = run("prewarm --list --preset convnext-t --arch sm_80 --dtypes f32");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_dwconv_fwd_direct_f32_kh7_kw7_s1_d1_"), HasSubstr("_sm80")));
  r = run("tune --list --op dwconv --shape 8:32:14:14 -k 5 --arch sm_90");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("dwconv_fwd_direct f32 kh=5 kw=5 stride=1 dil=1 sm_90 on 8x32x14x14"));
}

// A manifest layer's kw defaults to its kh, as -k sets both on the command line.
TEST_F(DWConvCli, ManifestFiltersAreSquareUnlessKwIsGiven) {
  const std::string manifest = tmp_.path() + "/m.json";
  lkjit::test::write_file(manifest, R"({"archs": ["sm_90"], "dtypes": ["bf16"], "passes": ["fwd"], "layers": [
    {"op": "dwconv", "C": 96, "H": 56, "W": 56, "kh": 31}, {"op": "dwconv", "C": 96, "H": 56, "W": 56, "kh": 51, "kw": 5}]})");
  CommandResult r = run("prewarm --list --manifest " + lkjit::test::shell_quote(manifest));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("_kh31_kw31_"), HasSubstr("_kh51_kw5_"))) << r.output;
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("_kh31_kw7_"))) << r.output;
}

// tune --paths: the path decision's key and options in --list (no GPU); refused with --kernel, and for an op of one
// path per problem, before any GPU is asked for.
TEST_F(DWConvCli, TunePathsListsThePathsAndRefusesWhatItCannotDo) {
  CommandResult r = run("tune --list --paths --op dwconv --shape 64:128:56:56 -k 31 --dtype bf16 --pass bwd --nhwc --arch sm_90");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("paths of lkjit_pass_dwconv_bwd_bf16_nhwc_k31x31_s1_d1_p15x15_bias_sm90: mma, direct, "
                                        "nhwc"),
                              HasSubstr("dwconv_dgrad_mma bf16")));
  r = run("tune --list --paths --op dwconv --shape 64:96:56:56 -k 7 --arch sm_90");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("_nchw_k7x7_s1_d1_p3x3_bias_sm90: direct ("));
  r = run("tune --paths --op dwconv --kernel main --shape 8:32:14:14");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("--paths tunes every kernel"), HasSubstr("--kernel main")));
  r = run("tune --paths --op wtconv --shape 8:32:14:14");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("--paths: wtconv runs one path per problem"), HasSubstr("dwconv")));
}

// prewarm's -k and --stride are comma-separated lists crossed with --shapes, as their help says and as WTConv's are;
// an item's own k (B:C:H:W:k) is kept.
TEST_F(DWConvCli, PrewarmCrossesShapesWithKAndStrideLists) {
  CommandResult r = run("prewarm --list --op dwconv --shapes 2:8:16:16,2:8:16:16:5 -k 3,7 --stride 1,2 --arch sm_90 "
                        "--dtypes f32 --passes fwd");
  ASSERT_EQ(r.code, 0) << r.output;
  for (const char* f : {"_kh3_kw3_s1_", "_kh3_kw3_s2_", "_kh7_kw7_s1_", "_kh7_kw7_s2_", "_kh5_kw5_s1_", "_kh5_kw5_s2_"})
    EXPECT_THAT(r.output, HasSubstr(std::string("lkjit_dwconv_fwd_direct_f32") + f)) << f;
  r = run("prewarm --list --op dwconv --shapes 2:8:16:16 -k 3,64 --arch sm_90");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit: error: --k: '64' is out of range; supported: [1, 63]"));
  r = run("prewarm --list --op dwconv --shapes 2:8:16:16 -k 3,,5 --arch sm_90");
  EXPECT_EQ(r.code, 1) << r.output;
  // Without --shapes the options would change nothing: a preset's layers have their own filters.
  r = run("prewarm --list --op dwconv --preset convnext-t -k 3 --arch sm_90");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("apply to --shapes, which is missing"));
  EXPECT_THAT(run("prewarm --help").output, HasSubstr("kernel sizes for --shapes, comma-separated"));
}

TEST_F(DWConvCli, RefusesValuesOutOfRangeAndOtherFamiliesOptions) {
  CommandResult r = run("compile --op dwconv -k 64");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("64"), HasSubstr("[1, 63]")));
  r = run("prewarm --list --op dwconv --shapes 2:8:9:9:3 --stride 3 --arch sm_90");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit: error: --stride: '3' is out of range; supported: [1, 2]"));
  r = run("prewarm --list --op dwconv --shapes 2:8:9:9:0 --arch sm_90");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("k=0"), HasSubstr("[1, 63]")));
  r = run("compile --op dwconv --deeper");  // WTConv's
  EXPECT_EQ(r.code, 1) << r.output;
  r = run("compile --op wtconv --kw 5");  // the depthwise family's
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("dwconv"));
}

}  // namespace
