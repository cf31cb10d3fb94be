// The WBMM family in the lkjit CLI (tools/lkjit/ops/wbmm.cpp) without a GPU, run as a subprocess: its shape
// items with the window, the wbmm-t preset, both passes' plans (prewarm lists both backward paths), generated
// source by kernel name, and bad windows and shapes named with their ranges.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tests/test_support.h"

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using lkjit::test::CommandResult;

class WBMMCli : public ::testing::Test {
 protected:
  CommandResult run(const std::string& args) const {
    return lkjit::test::run_command("env -u LKJIT_CACHE_DISABLE -u LKJIT_DUMP_DIR -u LKJIT_LOG LKJIT_CACHE_DIR='" +
                                    tmp_.path() + "/cache' '" + std::string(LKJIT_CLI_PATH) + "' " + args + " 2>&1");
  }
  lkjit::test::TempDir tmp_{"lkjit-wbmm-cli"};
};

TEST_F(WBMMCli, PlansShapesAndPresetWithoutAGpu) {
  // The forward's space (60480 points: bf16 on sm_90a has engines 1 and 2; 14x14 adds the kchunk axis, 4x the
  // points, and a wgrad's has about 10^5, which --list takes half a minute or more to check).
  CommandResult r = run("tune --list --op wbmm --shape 2:8:30:29:7 --dtype bf16 --pass fwd --arch sm_90");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("wbmm fwd bf16 2x8x30x29 window=7x7, limits table of sm_90"),
                              HasSubstr("plan: wbmm_fwd\n"), HasSubstr("60480 points")));
  r = run("prewarm --list --op wbmm --preset wbmm-t --arch sm_90 --dtypes bf16 --passes fwd,bwd");
  EXPECT_EQ(r.code, 0) << r.output;
  // Every layer's forward, and both backward paths: the fused wgrad and the split dgrad + wgrad.
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_wbmm_fwd_bf16_wh7_ww7"), HasSubstr("lkjit_wbmm_dgrad_bf16_wh7_ww7"),
                              HasSubstr("_fx1_"), HasSubstr("_fx0_"), HasSubstr("lkjit_wbmm_reduce_")));
  r = run("prewarm --list --op wbmm --shapes 2:8:30:29:3:5 --arch sm_80 --dtypes f32 --passes fwd");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_wbmm_fwd_f32_wh3_ww5"), HasSubstr("_sm80"), Not(HasSubstr("wgrad"))));
  r = run("compile --op wbmm --kernel wbmm_wgrad --dtype f16 --emit-source");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit_wbmm_wgrad_f16_wh7_ww7_m0_tf0_id1_bi0_l0_fx1_e1_"));
}

// A manifest layer's ww defaults to its wh (a square window), as a shape item's w does.
TEST_F(WBMMCli, ManifestWindowsAreSquareUnlessWwIsGiven) {
  const std::string manifest = tmp_.path() + "/m.json";
  lkjit::test::write_file(manifest, R"({"archs": ["sm_80"], "dtypes": ["f32"], "passes": ["fwd"], "layers": [
    {"op": "wbmm", "C": 8, "H": 28, "W": 28, "wh": 14}, {"op": "wbmm", "C": 8, "H": 30, "W": 30, "wh": 3, "ww": 5}]})");
  CommandResult r = run("prewarm --list --manifest '" + manifest + "'");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit_wbmm_fwd_f32_wh14_ww14"), HasSubstr("lkjit_wbmm_fwd_f32_wh3_ww5"),
                              Not(HasSubstr("_wh14_ww7"))));
}

TEST_F(WBMMCli, BadWindowsAndShapesNameTheValue) {
  CommandResult r = run("tune --list --op wbmm --shape 1:4:8:8:17");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit: error: --shape item '1:4:8:8:17': wh=17 is out of range; supported: [1, 16]"));
  r = run("prewarm --list --op wbmm --shapes 1:4:8:8:7:0");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("ww=0 is out of range; supported: [1, 16]"));
  r = run("run --op wbmm --shapes 1:4:8:8:3:4:5");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("'1:4:8:8:3:4:5' is not B:C:H:W:wh:ww"));
  r = run("tune --list --op wbmm --shape 1:0:8:8");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("C=0 in '1:0:8:8' is out of range; supported: >= 1"));
  r = run("tune --list --op wbmm -k 3");  // WTConv's option is not WBMM's
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("-k is an option of --op wtconv"), HasSubstr(", not of --op wbmm")));
}

}  // namespace
