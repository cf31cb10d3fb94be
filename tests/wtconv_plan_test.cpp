// The WTConv planner (runtime/ops/wtconv_plan.cpp), CPU only: which kernels a shape runs, the errors
// for bad options and sizes, and the activation strides a call resolves and checks before any GPU work.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "lkjit/error.h"
#include "lkjit/wtconv.h"
#include "runtime/ops/wtconv_internal.h"

namespace {

using ::testing::AllOf;
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
            (std::vector<Kernel>{kWTConvFold, kWTConvFwdPlane}));
  const WTConvOptions big{64, 5, 3, DType::kF32, true, 1, 0};
  const auto plan = wtconv_plan(big, Shape{8, 64, 256, 256, 1}, kH200);
  EXPECT_EQ(kernels_of(plan), (std::vector<Kernel>{kWTConvFold, kWTConvFwdLevel, kWTConvFwdLevel,
                                                   kWTConvFwdLevel, kWTConvFwdSynth}));
  // Level kernels see their input low band: 256, 128, 64.
  EXPECT_EQ(plan[1].shape.H, 256);
  EXPECT_EQ(plan[2].shape.H, 128);
  EXPECT_EQ(plan[3].shape.H, 64);
  EXPECT_TRUE(plan[1].spec.get("first"));
  EXPECT_FALSE(plan[2].spec.get("first"));
  // The backward's levels 1 and 2 read X (level 2 through block sums); level 3 fp32 bands.
  const WTConvOptions s2{64, 5, 3, DType::kF32, true, 2, 0};
  const auto bwd = wtconv_plan(s2, Shape{8, 64, 256, 256, 2}, kH200, true, WTConvPath::kTiled);
  ASSERT_EQ(kernels_of(bwd), (std::vector<Kernel>{kWTConvFold, kWTConvBwdLevel, kWTConvBwdLevel,
                                                  kWTConvBwdLevel, kWTConvBwdSynth,
                                                  kWTConvReduce}));
  EXPECT_TRUE(bwd[1].spec.get("first") && bwd[2].spec.get("first") && !bwd[3].spec.get("first"));
  EXPECT_EQ(bwd[2].spec.dtype, DType::kF32);
  EXPECT_EQ(bwd[2].shape.H, 128);
  EXPECT_EQ(bwd[2].shape.stride, 2);  // the X-reading variant keeps the layer's stride
  EXPECT_EQ(bwd[3].shape.stride, 1);
}

// NHWC activations of small planes take the lane kernels, forward and backward (the backward with two
// threads per plane where shared memory would hold fewer than 8 warps of one-thread planes); NCHW ones,
// stride > 1, W > 16 and k too large for the register rows do not, and forcing the lane path there names
// the reason.
TEST(WTConvPlan, NHWCSmallPlanesRunLaneKernels) {
  WTConvOptions o{384, 5, 3, DType::kBF16, true, 1, 0};
  o.layout = Layout::kNHWC;
  EXPECT_EQ(kernels_of(wtconv_plan(o, Shape{64, 384, 14, 14, 1}, kH200)),
            (std::vector<Kernel>{kWTConvFold, kWTConvFwdLane}));
  const auto bwd = wtconv_plan(o, Shape{64, 384, 14, 14, 1}, kH200, true);
  EXPECT_EQ(kernels_of(bwd), (std::vector<Kernel>{kWTConvFold, kWTConvBwdLane, kWTConvReduceLane}));
  // 1168 B per plane: 6 warps of one-thread planes per SM, so two threads a plane; 24576 planes need more than
  // 4 blocks an SM, so registers capped for 6 (12 warps), which shared memory holds.
  EXPECT_EQ(bwd[1].tile, (wtconv_tile(0, 14, 32, 0, 64, 6)));
  EXPECT_EQ(kernels_of(wtconv_plan(o, Shape{64, 384, 14, 14, 1}, kH200, true, WTConvPath::kLane)), kernels_of(bwd));
  {
    WTConvOptions o7 = o;
    o7.C = 768, o7.L = 2;
    const auto bwd7 = wtconv_plan(o7, Shape{64, 768, 7, 7, 1}, kH200, true);
    EXPECT_EQ(bwd7[1].spec.kernel, kWTConvBwdLane);
    EXPECT_EQ(bwd7[1].tile, (wtconv_tile(0, 8, 0, 0, 64, 6)));  // 416 B per plane: one thread each; capped as above
  }
  EXPECT_EQ(wtconv_plan(o, Shape{64, 384, 13, 13, 1}, kH200)[1].tile.get("tile_w"), 14);  // W rounded up to even
  EXPECT_EQ(wtconv_plan(o, Shape{64, 384, 28, 28, 1}, kH200)[1].spec.kernel, kWTConvFwdPlane);
  // A tall plane whose 32-plane block would fill an SM's shared memory: the plane kernel, unless forced.
  EXPECT_EQ(wtconv_plan(o, Shape{64, 384, 48, 16, 1}, kH200)[1].spec.kernel, kWTConvFwdPlane);
  EXPECT_EQ(wtconv_plan(o, Shape{64, 384, 48, 16, 1}, kH200, false, WTConvPath::kLane)[1].spec.kernel,
            kWTConvFwdLane);
  {  // C = 1: NHWC and NCHW are the same memory; the layer calls that NCHW (act_layout), and so does the plan
    WTConvOptions one = o;
    one.C = 1;
    EXPECT_EQ(wtconv_plan(one, Shape{64, 1, 14, 14, 1}, kH200)[1].spec.kernel, kWTConvFwdPlane);
  }
  o.layout = Layout::kNCHW;
  EXPECT_EQ(wtconv_plan(o, Shape{64, 384, 14, 14, 1}, kH200)[1].spec.kernel, kWTConvFwdPlane);
  o.layout = Layout::kNHWC;
  o.stride = 2;
  EXPECT_EQ(wtconv_plan(o, Shape{64, 384, 14, 14, 2}, kH200)[1].spec.kernel, kWTConvFwdPlane);
  // Forced onto the lane path, a shape it cannot run is refused with the reason.
  auto refusal = [](const WTConvOptions& opt, const Shape& sh) -> std::string {
    try {
      wtconv_plan(opt, sh, kH200, false, WTConvPath::kLane);
    } catch (const SpecError& e) {
      return e.what();
    }
    return "accepted by the lane path";
  };
  EXPECT_THAT(refusal(o, Shape{64, 384, 14, 14, 2}), HasSubstr("stride=2"));
  o.stride = 1;
  EXPECT_THAT(refusal(o, Shape{64, 384, 14, 17, 1}), HasSubstr("W=17 exceeds tile_w=16"));
  o.k = 9;  // 9*(14+8) + 14 + 81 registers of rows and taps
  EXPECT_EQ(wtconv_plan(o, Shape{64, 384, 14, 14, 1}, kH200)[1].spec.kernel, kWTConvFwdPlane);
  EXPECT_THAT(refusal(o, Shape{64, 384, 14, 14, 1}), HasSubstr("k=9 with W=14 needs tile_w >= 14, which keeps about 293"));
}

TEST(WTConvPlan, BackwardEndsWithTheDeterministicReduction) {
  const WTConvOptions o{8, 5, 3, DType::kF32, true, 1, 0};
  for (WTConvPath path : {WTConvPath::kPlane, WTConvPath::kTiled}) {
    const auto plan = wtconv_plan(o, Shape{2, 8, 56, 56, 1}, kH200, true, path);
    ASSERT_FALSE(plan.empty());
    EXPECT_EQ(plan.back().spec.kernel, kWTConvReduce);
    for (const auto& pk : plan) EXPECT_NE(pk.spec.kernel, kWTConvFwdPlane);
  }
}

TEST(WTConvPlan, TrafficModelCountsTheTwoNFloorForThePlanePath) {
  const WTConvOptions o{96, 5, 5, DType::kF16, true, 1, 0};
  const auto plan = wtconv_plan(o, Shape{64, 96, 56, 56, 1}, kH200);
  EXPECT_DOUBLE_EQ(plan.back().bytes, 2.0 * 64 * 96 * 56 * 56 * 2);
}

// Where the lane kernels do not apply (W > 16, stride > 1, k too large for the register rows, level images
// too large for shared memory), the layout only sets default strides: NHWC plans exactly the kernels,
// tiles and sub-shapes NCHW does.
TEST(WTConvPlan, NHWCLayoutPlansTheSameKernelsWhereTheLaneForwardDoesNotApply) {
  auto expect_same = [](const std::vector<PlannedKernel>& nchw, const std::vector<PlannedKernel>& nhwc) {
    ASSERT_EQ(nchw.size(), nhwc.size());
    for (size_t i = 0; i < nchw.size(); ++i) {
      // The plane kernels' specs may name the layout (tests/wtconv_cluster_test.cpp: where a cluster can run).
      OpSpec want = nchw[i].spec;
      if (want.kernel == kWTConvFwdPlane || want.kernel == kWTConvBwdPlane) want.set("layout", nhwc[i].spec.get("layout"));
      EXPECT_EQ(want, nhwc[i].spec) << i;
      EXPECT_EQ(nchw[i].tile, nhwc[i].tile) << i;
      EXPECT_EQ(nchw[i].shape.to_string(), nhwc[i].shape.to_string()) << i;
      EXPECT_EQ(nchw[i].level, nhwc[i].level) << i;
      EXPECT_NE(nhwc[i].spec.kernel, kWTConvFwdLane) << i;
      EXPECT_NE(nhwc[i].spec.kernel, kWTConvBwdLane) << i;
    }
  };
  struct Case {
    WTConvOptions o;
    Shape sh;
    Kernel fwd_main;  // the forward's kernel after the fold, for both layouts
    const char* why;  // the lane path's refusal
  };
  const Case cases[] = {
      {{4, 5, 2, DType::kF32, true, 1, 0}, Shape{1, 4, 8, 24, 1}, kWTConvFwdPlane, "W=24 exceeds tile_w=16"},
      {{4, 5, 2, DType::kF32, true, 2, 0}, Shape{1, 4, 8, 8, 2}, kWTConvFwdPlane, "stride=2"},
      {{4, 9, 2, DType::kF32, true, 1, 0}, Shape{1, 4, 14, 14, 1}, kWTConvFwdPlane, "k=9 with W=14 needs tile_w >= 14"},
      {{4, 5, 1, DType::kF32, true, 1, 0}, Shape{1, 4, 4096, 8, 1}, kWTConvFwdLevel, "shared memory"},
      {{64, 5, 3, DType::kBF16, true, 1, 0}, Shape{8, 64, 256, 256, 1}, kWTConvFwdLevel, "W=256 exceeds"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.sh.to_string() + " k=" + std::to_string(c.o.k));
    for (bool bwd : {false, true}) {
      WTConvOptions o = c.o;
      const auto nchw = wtconv_plan(o, c.sh, kH200, bwd);
      o.layout = Layout::kNHWC;
      const auto nhwc = wtconv_plan(o, c.sh, kH200, bwd);
      ASSERT_GE(nchw.size(), 2u);
      if (!bwd) EXPECT_EQ(nchw[1].spec.kernel, c.fwd_main);
      expect_same(nchw, nhwc);
      try {
        wtconv_plan(o, c.sh, kH200, bwd, WTConvPath::kLane);
        ADD_FAILURE() << "the lane path accepted " << c.sh.to_string() << (bwd ? " bwd" : " fwd");
      } catch (const SpecError& e) {
        EXPECT_THAT(e.what(), AllOf(HasSubstr("the lane path cannot run " + c.sh.to_string()), HasSubstr(c.why)));
      }
    }
  }
  // The old test's shape, 8x8 at stride 1: NHWC swaps the plane kernels for the lane kernels (and the
  // backward's reduce for the lane one) and keeps the fold.
  WTConvOptions o{4, 5, 2, DType::kF32, true, 1, 0};
  const Shape sh{1, 4, 8, 8, 1};
  const auto nchw_f = wtconv_plan(o, sh, kH200), nchw_b = wtconv_plan(o, sh, kH200, true);
  o.layout = Layout::kNHWC;
  const auto nhwc_f = wtconv_plan(o, sh, kH200), nhwc_b = wtconv_plan(o, sh, kH200, true);
  EXPECT_EQ(kernels_of(nchw_f), (std::vector<Kernel>{kWTConvFold, kWTConvFwdPlane}));
  ASSERT_EQ(kernels_of(nhwc_f), (std::vector<Kernel>{kWTConvFold, kWTConvFwdLane}));
  EXPECT_EQ(nchw_f[0].spec, nhwc_f[0].spec);
  EXPECT_EQ(nchw_f[0].tile, nhwc_f[0].tile);
  EXPECT_EQ(nhwc_f[1].spec, (wtconv_spec(kWTConvFwdLane, DType::kF32, 5, 2, true, 90)));
  EXPECT_EQ(nhwc_f[1].tile.get("tile_w"), 8);
  EXPECT_EQ(kernels_of(nchw_b), (std::vector<Kernel>{kWTConvFold, kWTConvBwdPlane, kWTConvReduce}));
  EXPECT_EQ(kernels_of(nhwc_b), (std::vector<Kernel>{kWTConvFold, kWTConvBwdLane, kWTConvReduceLane}));
  EXPECT_EQ(nchw_b[0].spec, nhwc_b[0].spec);
  // Forced, the lane path runs both passes whatever the layout; so do the plane and tiled paths.
  EXPECT_EQ(kernels_of(wtconv_plan(o, sh, kH200, true, WTConvPath::kLane)),
            (std::vector<Kernel>{kWTConvFold, kWTConvBwdLane, kWTConvReduceLane}));
  for (WTConvPath path : {WTConvPath::kPlane, WTConvPath::kTiled})
    for (bool bwd : {false, true}) {
      WTConvOptions n = o;
      n.layout = Layout::kNCHW;
      expect_same(wtconv_plan(n, sh, kH200, bwd, path), wtconv_plan(o, sh, kH200, bwd, path));
    }
  o.layout = static_cast<Layout>(7);
  try {
    wtconv_plan(o, sh, kH200);
    FAIL() << "layout=7 accepted";
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("layout=7 is out of range"));
    EXPECT_THAT(e.what(), HasSubstr("NHWC"));
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
  // Too many elements: the product is stated as computed, without int64 overflow (16 * 4 * 2^30 * 2^30 = 2^66).
  try {
    wtconv_plan(o, Shape{16, 4, int64_t(1) << 30, int64_t(1) << 30, 1}, kH200);
    FAIL() << "2^66 elements accepted";
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("B*C*H*W=7.379e+19 exceeds the supported 2^40 elements"));
  }
}

// ---- strides (detail::resolve_strides; WTConv::forward/backward check them before any device work) ----

using S4 = std::array<int64_t, 4>;

TEST(WTConvStrides, DefaultsAreTheDenseStridesOfTheLayout) {
  WTConvOptions o{4, 5, 2, DType::kF32, true, 2, 0};  // stride 2: out and dout are 4 x 5 for 7 x 9
  const Shape sh{2, 4, 7, 9, 2};
  const auto f = detail::resolve_strides(o, sh, nullptr, false);
  EXPECT_EQ(f.x, (S4{4 * 7 * 9, 7 * 9, 9, 1}));
  EXPECT_EQ(f.out, (S4{4 * 4 * 5, 4 * 5, 5, 1}));
  const auto b = detail::resolve_strides(o, sh, nullptr, true);
  EXPECT_EQ(b.dout, (S4{4 * 4 * 5, 4 * 5, 5, 1}));
  EXPECT_EQ(b.out, (S4{4 * 7 * 9, 7 * 9, 9, 1}));  // dX has x's shape
  o.layout = Layout::kNHWC;
  const auto n = detail::resolve_strides(o, sh, nullptr, true);
  EXPECT_EQ(n.x, (S4{7 * 9 * 4, 1, 9 * 4, 4}));
  EXPECT_EQ(n.dout, (S4{4 * 5 * 4, 1, 5 * 4, 4}));
  EXPECT_EQ(n.out, (S4{7 * 9 * 4, 1, 9 * 4, 4}));
}

TEST(WTConvStrides, GivenStridesAreKeptAndZerosMeanTheDefault) {
  const WTConvOptions o{4, 5, 2, DType::kF32, true, 1, 0};
  const Shape sh{2, 4, 8, 6, 1};
  WTConvStrides s;
  s.x = {8 * 6 * 4, 1, 6 * 4, 4};          // channels_last
  s.dout = {4 * 8 * 6, 8 * 6, 1, 8};       // H and W swapped in memory
  const auto r = detail::resolve_strides(o, sh, &s, true);
  EXPECT_EQ(r.x, s.x);
  EXPECT_EQ(r.dout, s.dout);
  EXPECT_EQ(r.out, (S4{4 * 8 * 6, 8 * 6, 6, 1}));  // all zeros: NCHW contiguous
  // Padded rows, and any stride >= 0 on a dim of size 1.
  const WTConvOptions c1{1, 5, 2, DType::kF32, true, 1, 0};
  WTConvStrides p;
  p.x = {0, 0, 6, 1};
  p.out = {1000, 200, 20, 1};
  const auto q = detail::resolve_strides(c1, Shape{1, 1, 8, 6, 1}, &p, true);
  EXPECT_EQ(q.x, p.x);
  EXPECT_EQ(q.out, p.out);
}

void expect_spec_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no SpecError; expected one naming " << ::testing::PrintToString(parts);
  } catch (const SpecError& e) {
    for (const auto& p : parts) EXPECT_THAT(e.what(), HasSubstr(p));
  }
}

TEST(WTConvStrides, RejectsStridesBelowOneOnDimsOfSizeAboveOne) {
  const WTConvOptions o{4, 5, 2, DType::kF32, true, 1, 0};
  WTConvStrides s;
  s.x = {256, 64, 0, 1};
  expect_spec_error([&] { detail::resolve_strides(o, Shape{1, 4, 8, 8, 1}, &s, false); },
                    {"x stride[2]=0", "H of size 8", ">= 1 for a dim of size > 1"});
  s.x = {};
  s.dout = {256, -64, 8, 1};
  expect_spec_error([&] { detail::resolve_strides(o, Shape{1, 4, 8, 8, 1}, &s, true); }, {"dout stride[1]=-64", "C of size 4"});
  s.dout = {-1, 64, 8, 1};  // B = 1: any stride >= 0
  expect_spec_error([&] { detail::resolve_strides(o, Shape{1, 4, 8, 8, 1}, &s, true); }, {"dout stride[0]=-1", ">= 0"});
  s.dout = {0, 0, 0, 0};
  s.x = {int64_t(1) << 40, int64_t(1) << 50, int64_t(1) << 58, 1};  // offsets past 2^60
  expect_spec_error([&] { detail::resolve_strides(o, Shape{1, 4, 8, 8, 1}, &s, false); }, {"x strides", "2^60"});
}

TEST(WTConvStrides, RejectsAWrittenTensorThatOverlapsItself) {
  const WTConvOptions o{4, 5, 2, DType::kF32, true, 1, 0};
  WTConvStrides s;
  s.out = {256, 64, 4, 1};  // rows 4 apart but 8 wide
  expect_spec_error([&] { detail::resolve_strides(o, Shape{1, 4, 8, 8, 1}, &s, false); },
                    {"out strides [256, 64, 4, 1] overlap", "stride[2]=4 (H) is below 8", "(W)"});
  s.out = {192, 1, 24, 3};  // channels_last with one channel too few between pixels
  expect_spec_error([&] { detail::resolve_strides(o, Shape{2, 4, 8, 8, 1}, &s, true); },
                    {"dx strides [192, 1, 24, 3] overlap", "stride[3]=3 (W) is below 4", "(C)"});
  s.out = {0, 64, 8, 1};  // two images on one address
  expect_spec_error([&] { detail::resolve_strides(o, Shape{2, 4, 8, 8, 1}, &s, true); }, {"dx stride[0]=0", "B of size 2"});
  // The same strides on a read tensor are fine (x may overlap itself).
  WTConvStrides r;
  r.x = {256, 64, 4, 1};
  EXPECT_NO_THROW(detail::resolve_strides(o, Shape{1, 4, 8, 8, 1}, &r, false));
}

// wtconv_transpose's checks are pure: every refusal comes before the driver, with or without a GPU.
TEST(WTConvTransposeCheck, NamesEveryBadArgument) {
  alignas(16) static char buf[4096];
  const std::array<int64_t, 4> nchw{48, 16, 4, 1}, nhwc{48, 1, 12, 3};
  auto check = [&](const void* s, const std::array<int64_t, 4>& ss, const void* d, const std::array<int64_t, 4>& ds,
                   DType dt, int64_t B, int64_t C, int64_t H, int64_t W) {
    return [=] { wtconv_transpose_check(s, ss, d, ds, dt, B, C, H, W); };
  };
  EXPECT_NO_THROW(check(buf, nchw, buf + 192, nhwc, DType::kF32, 1, 3, 4, 4)());  // 48 floats = 192 bytes
  EXPECT_NO_THROW(check(buf, nchw, buf + 96, nhwc, DType::kF16, 1, 3, 4, 4)());
  expect_spec_error(check(nullptr, nchw, buf, nhwc, DType::kF32, 1, 3, 4, 4), {"src and dst must be non-null"});
  expect_spec_error(check(buf, nchw, buf + 2048, nhwc, DType::kF32, 1, 0, 4, 4), {"C=0 is out of range", ">= 1"});
  expect_spec_error(check(buf, nchw, buf + 188, nhwc, DType::kF32, 1, 3, 4, 4), {"src and dst overlap", "not in place"});
  expect_spec_error(check(buf + 94, nchw, buf, nhwc, DType::kF16, 1, 3, 4, 4), {"src and dst overlap"});
  expect_spec_error(check(buf, nchw, buf + 2048, {48, 1, 3, 3}, DType::kF32, 1, 3, 4, 4),
                    {"dst strides [48, 1, 3, 3] overlap"});
  expect_spec_error(check(buf, {48, 16, 0, 1}, buf + 2048, nhwc, DType::kF32, 1, 3, 4, 4), {"src stride[2]=0"});
  expect_spec_error(check(buf, nchw, buf + 2048, nhwc, DType::kF32, 1, 3, 65536, 65536),
                    {"H*W (H=65536, W=65536)", "2^31-65"});
}

// The layer checks strides before it needs weights or a device: these calls fail the same way on a
// machine without a GPU (the pointers are never dereferenced).
TEST(WTConvStrides, LayerCallsCheckStridesFirst) {
  WTConv layer({4, 5, 2, DType::kF32, true, 1, 0});
  int dummy = 0;
  WTConvStrides s;
  s.out = {256, 64, 4, 1};
  expect_spec_error([&] { layer.forward(&dummy, &dummy, 1, 8, 8, nullptr, &s); }, {"out strides", "overlap"});
  s.out = {};
  s.dout = {256, 64, 8, 0};
  const WTConvGradients g{};
  expect_spec_error([&] { layer.backward(&dummy, &dummy, &dummy, g, 1, 8, 8, nullptr, &s); }, {"dout stride[3]=0"});
  expect_spec_error([&] { layer.profile(&dummy, &dummy, &dummy, &g, 1, 8, 8, nullptr, &s); }, {"dout stride[3]=0"});
  // Valid strides get as far as the next check.
  s.dout = {256, 1, 32, 4};
  expect_spec_error([&] { layer.forward(&dummy, &dummy, 1, 8, 8, nullptr, &s); }, {"set_weights"});
}

TEST(WTConvPlan, PlanePathRefusedWhereThePlanesDoNotFit) {
  const WTConvOptions o{2, 7, 3, DType::kF32, true, 1, 0};
  try {
    wtconv_plan(o, Shape{1, 2, 128, 128, 1}, kH200, false, WTConvPath::kPlane);
    ADD_FAILURE() << "the plane path accepted 1x2x128x128";
  } catch (const SpecError& e) {  // the size it needs, the limit, and the way out
    EXPECT_THAT(e.what(), AllOf(HasSubstr("1x2x128x128 planes do not fit"), HasSubstr("exceeds the sm_90 limit"),
                                HasSubstr("the tiled path takes any size")));
  }
  EXPECT_NO_THROW(wtconv_plan(o, Shape{1, 2, 128, 128, 1}, kH200, false, WTConvPath::kTiled));
  // The default tile's block fits one block but not half: the rule is the default tile's (tuned tiles of
  // planes that pass it may use more).
  try {
    wtconv_plan(o, Shape{1, 2, 80, 80, 1}, kH200, false, WTConvPath::kPlane);
    ADD_FAILURE() << "the plane path accepted 1x2x80x80";
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("one block of the default tile p1_v1_w256 takes 117120 B"),
                                HasSubstr("planes whose default tile's block takes at most half of sm_90's 232448 B of "
                                          "shared memory per block, so that two blocks share an SM"),
                                HasSubstr("on planes that pass it, tuned tiles may take more"),
                                HasSubstr("the tiled path takes any size")));
  }
}

}  // namespace
