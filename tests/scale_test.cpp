// The scale family on the CPU: a family made of its own files and registry lines only (README, "Adding an op
// family"): the generator, kernel names, NVRTC compiles for sm_80 and sm_90, the planner and the layer's
// refusals, with no GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/runtime.h"
#include "lkjit/scale.h"
#include "lkjit/tuning.h"
#include "tests/test_support.h"

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace lkjit;  // NOLINT

TEST(ScaleFamily, IsRegisteredAsData) {
  const FamilyInfo& f = family("scale");
  EXPECT_TRUE(f.fields.empty());
  ASSERT_EQ(f.kernels.size(), 1u);
  EXPECT_EQ(f.kernels[0], kScaleCopy);
  EXPECT_EQ(family_of(kScaleCopy).name, "scale");
  EXPECT_TRUE(kernel_fields(kScaleCopy).empty());
  EXPECT_THROW(make_spec(kScaleCopy, DType::kF32, 90, {{"k", 5}}), SpecError);  // it has no fields
}

TEST(ScaleFamily, NamesRoundTripForEveryTileAndDtype) {
  for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
    for (const Tile& t : enumerate(make_spec(kScaleCopy, dt, 90), DeviceLimits::for_arch(90))) {
      const OpSpec s = make_spec(kScaleCopy, dt, 90);
      const std::string name = kernel_name(s, t);
      EXPECT_EQ(name, "lkjit_scale_copy_" + std::string(to_string(dt)) + "_w" + std::to_string(t.get("threads")) + "_sm90");
      const auto back = parse_kernel_name(name);
      ASSERT_TRUE(back.has_value()) << name;
      EXPECT_EQ(back->spec, s);
      EXPECT_EQ(back->tile, t);
    }
  EXPECT_EQ(enumerate(make_spec(kScaleCopy, DType::kF32, 90), DeviceLimits::for_arch(90)).size(), 4u);
}

TEST(ScaleFamily, RejectsNameTheValue) {
  const OpSpec s = make_spec(kScaleCopy, DType::kF32, 90);
  EXPECT_THAT(reject_reason(s, Tile::of({{"threads", 48}}), DeviceLimits::for_arch(90), nullptr).value_or(""),
              AllOf(HasSubstr("threads=48"), HasSubstr("multiple of 32")));
  EXPECT_THAT(reject_reason(s, Tile::of({{"threads", 64}, {"vy", 2}}), DeviceLimits::for_arch(90), nullptr).value_or(""),
              AllOf(HasSubstr("vy=2"), HasSubstr("no such tile axis"), HasSubstr("threads")));
}

TEST(ScaleFamily, GeometryCoversEveryElementWithACappedGrid) {
  const OpSpec s = make_spec(kScaleCopy, DType::kF16, 90);
  const Tile t = Tile::of({{"threads", 128}});
  EXPECT_EQ(launch_geometry(s, t, Shape{1, 1, 1, 1, 1}).grid[0], 1u);
  EXPECT_EQ(launch_geometry(s, t, Shape{2, 3, 5, 7, 1}).grid[0], 2u);  // 210 elements, 128 a block
  const auto big = launch_geometry(s, t, Shape{64, 384, 56, 56, 1});
  EXPECT_EQ(big.grid[0], 65536u);  // a grid-stride loop covers the rest
  EXPECT_EQ(big.block[0], 128u);
}

TEST(ScaleFamily, CompilesForSm80AndSm90) {
  lkjit::test::ScopedEnv disable("LKJIT_CACHE_DISABLE", "1");
  for (int arch : {80, 90})
    for (DType dt : {DType::kF32, DType::kBF16}) {
      const OpSpec s = make_spec(kScaleCopy, dt, arch);
      const auto ck = compile_kernel(s, default_tile(s, Shape{}, DeviceLimits::for_arch(arch)));
      EXPECT_GT(ck.cubin.size(), 100u) << ck.kernel_name;
      EXPECT_EQ(ck.cubin.compare(0, 4, "\x7f" "ELF"), 0);
    }
}

TEST(ScaleFamily, PlanIsPureAndTheLayerRefusesBadInputWithoutAGpu) {
  const auto plan = scale_plan(ScaleOptions{8, DType::kBF16, 0}, Shape{2, 8, 3, 5, 1}, DeviceLimits::for_arch(90));
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].spec.kernel, kScaleCopy);
  EXPECT_DOUBLE_EQ(plan[0].bytes, 2.0 * 2 * 8 * 3 * 5 * 2);
  EXPECT_THROW(ScaledCopy(ScaleOptions{0}), SpecError);
  EXPECT_THROW(ScaledCopy(ScaleOptions{4, DType::kF32, -1}), SpecError);
  ScaledCopy layer(ScaleOptions{4});
  int dummy = 0;
  EXPECT_THROW(layer.forward(nullptr, nullptr, &dummy, 1, 1, 1), SpecError);
  try {
    const std::array<int64_t, 4> overlapping{0, 1, 1, 1};  // y's elements share addresses
    layer.forward(&dummy, reinterpret_cast<const float*>(&dummy), &dummy, 2, 3, 3, nullptr, nullptr, &overlapping);
    ADD_FAILURE() << "overlapping y accepted";
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("scale"), HasSubstr("y")));
  }
  EXPECT_THROW(layer.forward(&dummy, reinterpret_cast<const float*>(&dummy), &dummy, 0, 1, 1), SpecError);
}

}  // namespace
