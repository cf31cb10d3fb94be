// Other GPUs, on the CPU: kernels compile with NVRTC for sm_86, sm_89, sm_100 and sm_120 (cubins for exactly
// that arch), tiles that need more shared memory than a block gets there (99 KiB on sm_86/89/120) are refused
// naming the arch and the limit, and a driver too old for a cubin is said in so many words.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/wtconv_kernels.h"
#include "lkjit/runtime.h"
#include "runtime/driver_errors.h"
#include "tests/test_support.h"

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using namespace lkjit;  // NOLINT
using lkjit::test::bounded;
using lkjit::test::run_command;
using lkjit::test::shell_quote;
using lkjit::test::TempDir;

// The SM an NVRTC cubin was built for (e_flags: bits 8..15 from ABI version 8 on, bits 0..7 before).
int cubin_arch(const std::string& cubin) {
  if (cubin.size() < 64 || cubin.compare(0, 4, "\x7f" "ELF") != 0) return -1;
  uint16_t machine = 0;
  uint32_t flags = 0;
  std::memcpy(&machine, cubin.data() + 18, 2);
  std::memcpy(&flags, cubin.data() + 48, 4);
  if (machine != 190) return -2;  // EM_CUDA
  return static_cast<unsigned char>(cubin[8]) >= 8 ? (flags >> 8) & 0xff : flags & 0xff;
}

class OtherArchs : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    const auto archs = nvrtc_archs();
    if (std::find(archs.begin(), archs.end(), GetParam()) == archs.end())
      GTEST_SKIP() << "NVRTC " << nvrtc_version() << " does not target sm_" << GetParam();
  }
};

TEST_P(OtherArchs, DefaultTilesCompileToCubinsForTheArch) {
  const int arch = GetParam();
  const DeviceLimits lim = DeviceLimits::for_arch(arch);
  // One kernel of each kind of code: the fold, a plane-resident forward (shared memory), the lane forward
  // (registers).
  for (const Kernel& kn : {kWTConvFold, kWTConvFwdPlane, kWTConvFwdLane}) {
    const OpSpec s = wtconv_spec(kn, DType::kF16, 5, 2, true, arch);
    const Tile t = default_tile(s, Shape{8, 32, 14, 14, 1}, lim);
    SCOPED_TRACE(kernel_name(s, t));
    ASSERT_NO_THROW(validate(s, t, lim));
    const CompiledKernel ck = compile_kernel(s, t);
    EXPECT_EQ(cubin_arch(ck.cubin), arch);
    EXPECT_NE(ck.cubin.find(ck.kernel_name), std::string::npos) << "the entry symbol is missing";
  }
}

TEST_P(OtherArchs, SharedMemoryLimitsAreTheArchs) {
  const int arch = GetParam();
  const DeviceLimits lim = DeviceLimits::for_arch(arch);
  const bool small = arch == 86 || arch == 89 || arch == 120;  // consumer parts: 99 KiB a block
  EXPECT_EQ(lim.max_smem_per_block, (small ? 99 : 227) * 1024);
  // A level tile at k = 31 needs more than 99 KiB and less than 227 KiB.
  const OpSpec s = wtconv_spec(kWTConvFwdLevel, DType::kF32, 31, 0, true, arch);
  const Tile big = wtconv_tile(64, 64, 0, 8, 256);
  if (!small) {
    EXPECT_NO_THROW(validate(s, big, lim));
    return;
  }
  try {
    validate(s, big, lim);
    ADD_FAILURE() << "accepted on sm_" << arch;
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("shared memory"), HasSubstr("sm_" + std::to_string(arch)), HasSubstr(big.to_string())));
  }
  // The default tile of the same kernel fits, and the planner's plans of a real layer only use fitting tiles.
  EXPECT_NO_THROW(validate(s, default_tile(s, Shape{8, 32, 224, 224, 1}, lim), lim));
}

TEST_P(OtherArchs, TheCliRefusesATileTooBigForTheArch) {
  const int arch = GetParam();
  const bool small = arch == 86 || arch == 89 || arch == 120;
  TempDir tmp("lkjit-arch-test");
  const auto r = run_command(bounded("env LKJIT_CACHE_DIR=" + shell_quote(tmp.path() + "/c") + " " + shell_quote(LKJIT_CLI_PATH) +
                                     " compile --emit-source --kernel wtconv_fwd_level -k 31 --tile 64,64,0,8,256 --arch sm_" +
                                     std::to_string(arch)) + " 2>&1");
  if (!small) {  // 227 KiB a block hold it
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("lkjit_wtconv_fwd_level1_f32_k31_t64x64_v8_w256_sm" + std::to_string(arch)));
    return;
  }
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("shared memory"), HasSubstr("sm_" + std::to_string(arch))));
}

INSTANTIATE_TEST_SUITE_P(Arch, OtherArchs, ::testing::Values(86, 89, 100, 120),
                         [](const auto& info) { return "sm_" + std::to_string(info.param); });

TEST(DriverErrors, ADriverTooOldForTheCubinIsNamed) {
  // CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222), CUDA_ERROR_NO_BINARY_FOR_GPU (209), CUDA_ERROR_INVALID_IMAGE (200).
  for (int r : {222, 209, 200}) {
    SCOPED_TRACE(r);
    EXPECT_EQ(rt::driver_error_hint(r, 12080, "13.0"),
              "the CUDA driver (CUDA 12.8) is too old for this cubin, built by NVRTC 13.0: update the driver to one "
              "for CUDA 13.0 or newer, or prewarm with an NVRTC no newer than the driver");
    EXPECT_THAT(rt::driver_error_hint(r, 0, "13.0"), HasSubstr("the CUDA driver (version unknown) is too old"));
  }
  // A new enough driver: not its age. Another image or GPU for 209 and 200; nothing for 222.
  EXPECT_EQ(rt::driver_error_hint(209, 13000, "13.0"),
            "the driver (CUDA 13.0) is new enough for NVRTC 13.0: the cubin is damaged or for another GPU");
  EXPECT_THAT(rt::driver_error_hint(200, 13020, "13.0"), HasSubstr("new enough"));
  EXPECT_THAT(rt::driver_error_hint(222, 13000, "13.0"), IsEmpty());
  EXPECT_THAT(rt::driver_error_hint(209, 12090, "12.8"), HasSubstr("new enough"));
  EXPECT_THAT(rt::driver_error_hint(209, 12060, "12.8"), HasSubstr("CUDA 12.6) is too old"));
  // Other results and an unreadable version: no hint.
  for (int r : {1, 2, 700, 999}) EXPECT_THAT(rt::driver_error_hint(r, 12000, "13.0"), IsEmpty()) << r;
  EXPECT_THAT(rt::driver_error_hint(209, 12000, "?"), IsEmpty());
}

}  // namespace
