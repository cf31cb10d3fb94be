// The WTConv planner (runtime/ops/wtconv_plan.cpp), CPU only: which kernels a shape runs, and the
// errors for bad options and sizes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lkjit/error.h"
#include "lkjit/wtconv.h"

namespace {

using ::testing::HasSubstr;
using namespace lkjit;  // NOLINT

const DeviceLimits kH200 = DeviceLimits::for_arch(90);

std::vector<Kernel> kernels_of(const std::vector<PlannedKernel>& plan) {
  std::vector<Kernel> v;
  for (const auto& pk : plan) v.push_back(pk.spec.kernel);
  return v;
}

TEST(WTConvPlan, SmallPlanesRunPlaneResidentLargeOnesTiled) {
  const WTConvOptions o{96, 5, 5, DType::kF16, true, 1, 0};
  EXPECT_EQ(kernels_of(wtconv_plan(o, Shape{64, 96, 56, 56, 1}, kH200)),
            (std::vector<Kernel>{Kernel::kWTConvFold, Kernel::kWTConvFwdPlane}));
  const WTConvOptions big{64, 5, 3, DType::kF32, true, 1, 0};
  const auto plan = wtconv_plan(big, Shape{8, 64, 256, 256, 1}, kH200);
  EXPECT_EQ(kernels_of(plan), (std::vector<Kernel>{Kernel::kWTConvFold, Kernel::kWTConvFwdLevel, Kernel::kWTConvFwdLevel,
                                                   Kernel::kWTConvFwdLevel, Kernel::kWTConvFwdSynth}));
  // Level kernels see their input low band: 256, 128, 64.
  EXPECT_EQ(plan[1].shape.H, 256);
  EXPECT_EQ(plan[2].shape.H, 128);
  EXPECT_EQ(plan[3].shape.H, 64);
  EXPECT_TRUE(plan[1].spec.first);
  EXPECT_FALSE(plan[2].spec.first);
  // The backward's levels 1 and 2 read X (level 2 through block sums); level 3 fp32 bands.
  const WTConvOptions s2{64, 5, 3, DType::kF32, true, 2, 0};
  const auto bwd = wtconv_plan(s2, Shape{8, 64, 256, 256, 2}, kH200, true, WTConvPath::kTiled);
  ASSERT_EQ(kernels_of(bwd), (std::vector<Kernel>{Kernel::kWTConvFold, Kernel::kWTConvBwdLevel, Kernel::kWTConvBwdLevel,
                                                  Kernel::kWTConvBwdLevel, Kernel::kWTConvBwdSynth,
                                                  Kernel::kWTConvReduce}));
  EXPECT_TRUE(bwd[1].spec.first && bwd[2].spec.first && !bwd[3].spec.first);
  EXPECT_EQ(bwd[2].spec.dtype, DType::kF32);
  EXPECT_EQ(bwd[2].shape.H, 128);
  EXPECT_EQ(bwd[2].shape.stride, 2);  // the X-reading variant keeps the layer's stride
  EXPECT_EQ(bwd[3].shape.stride, 1);
}

TEST(WTConvPlan, BackwardEndsWithTheDeterministicReduction) {
  const WTConvOptions o{8, 5, 3, DType::kF32, true, 1, 0};
  for (WTConvPath path : {WTConvPath::kPlane, WTConvPath::kTiled}) {
    const auto plan = wtconv_plan(o, Shape{2, 8, 56, 56, 1}, kH200, true, path);
    ASSERT_FALSE(plan.empty());
    EXPECT_EQ(plan.back().spec.kernel, Kernel::kWTConvReduce);
    for (const auto& pk : plan) EXPECT_NE(pk.spec.kernel, Kernel::kWTConvFwdPlane);
  }
}

TEST(WTConvPlan, TrafficModelCountsTheTwoNFloorForThePlanePath) {
  const WTConvOptions o{96, 5, 5, DType::kF16, true, 1, 0};
  const auto plan = wtconv_plan(o, Shape{64, 96, 56, 56, 1}, kH200);
  EXPECT_DOUBLE_EQ(plan.back().bytes, 2.0 * 64 * 96 * 56 * 56 * 2);
}

TEST(WTConvPlan, RejectsOtherLayoutsNamingThem) {
  WTConvOptions o{4, 5, 2, DType::kF32, true, 1, 0};
  o.layout = Layout::kNHWC;
  try {
    wtconv_plan(o, Shape{1, 4, 8, 8, 1}, kH200);
    FAIL() << "NHWC accepted";
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("layout NHWC"));
    EXPECT_THAT(e.what(), HasSubstr("NCHW"));
  }
}

TEST(WTConvPlan, RejectsBadSizesNamingEveryOne) {
  const WTConvOptions o{4, 5, 2, DType::kF32, true, 1, 0};
  try {
    wtconv_plan(o, Shape{0, 4, 0, 8, 1}, kH200);
    FAIL() << "B=0, H=0 accepted";
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("B=0"));
    EXPECT_THAT(e.what(), HasSubstr("H=0"));
  }
  EXPECT_THROW(wtconv_plan(o, Shape{1, 5, 8, 8, 1}, kH200), SpecError);  // C differs from the layer's
  EXPECT_THROW(wtconv_plan({4, 4, 2, DType::kF32, true, 1, 0}, Shape{1, 4, 8, 8, 1}, kH200), SpecError);  // even k
}

TEST(WTConvPlan, PlanePathRefusedWhereThePlanesDoNotFit) {
  const WTConvOptions o{2, 7, 3, DType::kF32, true, 1, 0};
  EXPECT_THROW(wtconv_plan(o, Shape{1, 2, 128, 128, 1}, kH200, false, WTConvPath::kPlane), SpecError);
  EXPECT_NO_THROW(wtconv_plan(o, Shape{1, 2, 128, 128, 1}, kH200, false, WTConvPath::kTiled));
}

}  // namespace
