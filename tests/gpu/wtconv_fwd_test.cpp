// WTConv forward on the GPU against the float64 reference: every problem x dtype x path, random parameters
// (every scale and bias), outputs NaN-poisoned first and guarded (the guard bytes after them must read back
// unchanged), per-dtype tolerances; the problems the plane path skips are exactly the expected ones.
#include <gtest/gtest.h>

#include <tuple>

#include "lkjit/wtconv_kernels.h"
#include "lkjit/error.h"
#include "lkjit/numeric.h"
#include "lkjit/testing.h"
#include "tests/gpu/gpu_fixture.h"
#include "tests/gpu/problems.h"

namespace lkjit::testing {
namespace {

using Param = ProblemParam;

// The output; a failure if a guard byte after it changed.
std::vector<float> run_forward(const Problem& pb, DType dt, WTConvPath path, const ref::WTConvParams& params,
                               const std::vector<float>& x, const Tile* plane_tile = nullptr) {
  WTConv layer({pb.C, pb.k, pb.L, dt, pb.bias, pb.stride, 0});
  layer.set_path(path);
  if (plane_tile) layer.set_tile_override(kWTConvFwdPlane, 0, *plane_tile);
  auto dp = upload_params(params);
  layer.set_weights(dp.weights);
  const Shape sh{pb.B, pb.C, pb.H, pb.W, pb.stride};
  const size_t nout = size_t(sh.B * sh.C * sh.H_out() * sh.W_out());
  const auto xb = encode(dt, x);
  DeviceBuffer dx(xb.size());
  GuardedBuffer dout(nout * dtype_bytes(dt));
  dx.upload(xb.data(), xb.size());
  dout.poison();
  layer.forward(dx.data(), dout.data(), pb.B, pb.H, pb.W);
  synchronize();
  EXPECT_EQ(dout.guard_bytes_changed(), 0) << "the forward wrote past out";
  std::vector<uint8_t> raw(nout * dtype_bytes(dt));
  dout.buffer().download(raw.data(), raw.size());
  std::vector<float> got(nout);
  for (size_t i = 0; i < nout; ++i) got[i] = decode_one(dt, raw.data(), i);
  return got;
}

class WTConvForward : public GpuTestP<Param> {};

TEST_P(WTConvForward, MatchesFloat64Reference) {
  const auto& [pb, dt, path] = GetParam();
  const uint64_t seed = 7;  // parameters; the input seed + 4
  SCOPED_TRACE(seed_note(seed));
  const auto params = random_params(int(pb.C), pb.k, pb.L, pb.bias, seed);
  const ref::Shape4 s4{pb.B, pb.C, pb.H, pb.W};
  const auto x = random_tensor(size_t(s4.numel()), dt, seed + 4);
  if (path == WTConvPath::kPlane) {
    if (const auto why = plane_path_unavailable(pb, dt, /*backward=*/false)) GTEST_SKIP() << *why;
  }
  const auto got = run_forward(pb, dt, path, params, x);
  const auto want = ref::wtconv_forward(std::vector<double>(x.begin(), x.end()), s4, params, pb.stride);
  const auto cmp = compare(got, want, tolerance(dt));
  EXPECT_TRUE(cmp.ok) << cmp.to_string();
}

INSTANTIATE_TEST_SUITE_P(Problems, WTConvForward, ::testing::ValuesIn(problem_params()), problem_param_name);

// The plane suites skip where planes do not fit (plane_path_unavailable, through the layer on this device):
// exactly the expected problems, so a list whose skips grow fails here.
class WTConvPlaneSkips : public GpuTest {};

TEST_F(WTConvPlaneSkips, AreExactlyTheExpectedProblems) {
  const DeviceLimits lim = device_info(0).limits;
  EXPECT_EQ(plane_skips(wtconv_problems(), lim), expected_plane_skips());
  EXPECT_EQ(plane_skips(strided_problems(), lim), expected_strided_plane_skips());
  int skipped = 0;
  for (const auto& list : {wtconv_problems(), strided_problems()})
    for (const Problem& p : list)
      for (DType t : {DType::kF32, DType::kF16, DType::kBF16})
        for (bool backward : {false, true}) {
          const std::string name = problem_name(p, t, WTConvPath::kPlane) + (backward ? "_bwd" : "_fwd");
          const bool skips = plane_path_unavailable(p, t, backward).has_value();
          EXPECT_EQ(skips, expected_plane_skips().count(name) + expected_strided_plane_skips().count(name) > 0) << name;
          skipped += skips;
        }
  EXPECT_EQ(skipped, 24) << "3 problems of the list and 1 of the strided list, every dtype and pass";
}

// Every tile of the forward plane kernel's space on one problem with odd extents: each (planes, threads,
// vy) changes the warp groups, the strip rows and the images' pitches (strip_layout).
class WTConvForwardPlaneTiles : public GpuTest {};

TEST_F(WTConvForwardPlaneTiles, EveryTileMatchesTheReference) {
  const DType dt = DType::kF32;
  const DeviceInfo dev = device_info(0);
  for (const Problem& pb : {kTileProblem, kTileProblemStrided}) {
    SCOPED_TRACE(problem_name(pb, dt, WTConvPath::kPlane));
    const uint64_t seed = 17;  // parameters; the input seed + 1
    SCOPED_TRACE(seed_note(seed));
    const auto params = random_params(int(pb.C), pb.k, pb.L, pb.bias, seed);
    const auto x = random_tensor(size_t(pb.B * pb.C * pb.H * pb.W), dt, seed + 1);
    const auto want = ref::wtconv_forward(std::vector<double>(x.begin(), x.end()), {pb.B, pb.C, pb.H, pb.W}, params,
                                          pb.stride);
    int tested = 0;
    for (const Tile& t : plane_tiles(kWTConvFwdPlane, pb, dt, dev.arch, dev.limits)) {
      SCOPED_TRACE(t.to_string());
      const auto cmp = compare(run_forward(pb, dt, WTConvPath::kPlane, params, x, &t), want, tolerance(dt));
      EXPECT_TRUE(cmp.ok) << cmp.to_string();
      ++tested;
    }
    EXPECT_GE(tested, 10) << "too few tiles fit";
  }
}

class WTConvForwardLarge : public GpuTest {};

// Sampled planes of tensors past 2^31 elements (64-bit indexing) and of 65536 planes (grid limits).
void check_sampled(const Problem& pb, DType dt) {
  const uint64_t seed = 3;  // parameters; the sampled planes' inputs seed + 97 + i
  SCOPED_TRACE(seed_note(seed));
  const auto params = random_params(int(pb.C), pb.k, pb.L, pb.bias, seed);
  WTConv layer({pb.C, pb.k, pb.L, dt, pb.bias, pb.stride, 0});
  auto dp = upload_params(params);
  layer.set_weights(dp.weights);
  const int64_t hw = pb.H * pb.W, planes = pb.B * pb.C;
  const size_t eb = dtype_bytes(dt);
  DeviceBuffer dx(size_t(planes * hw) * eb);
  GuardedBuffer dout(size_t(planes * hw) * eb);
  // A deterministic pattern per plane, uploaded for the sampled planes only; others zero.
  dx.fill_u32(0);
  dout.poison();
  const std::vector<int64_t> sample = {0, 1, planes / 2, planes - 2, planes - 1};
  std::vector<std::vector<float>> xs;
  for (size_t i = 0; i < sample.size(); ++i) {
    xs.push_back(random_tensor(size_t(hw), dt, seed + 97 + i));
    const auto b = encode(dt, xs.back());
    dx.upload(b.data(), b.size(), size_t(sample[i] * hw) * eb);
  }
  layer.forward(dx.data(), dout.data(), pb.B, pb.H, pb.W);
  synchronize();
  EXPECT_EQ(dout.guard_bytes_changed(), 0) << "the forward wrote past out";
  for (size_t i = 0; i < sample.size(); ++i) {
    std::vector<uint8_t> raw(size_t(hw) * eb);
    dout.buffer().download(raw.data(), raw.size(), size_t(sample[i] * hw) * eb);
    std::vector<float> got(hw);
    for (int64_t j = 0; j < hw; ++j) got[j] = decode_one(dt, raw.data(), size_t(j));
    const auto want = ref::wtconv_forward(std::vector<double>(xs[i].begin(), xs[i].end()), {1, 1, pb.H, pb.W},
                                          slice_channel(params, sample[i] % pb.C), pb.stride);
    const auto cmp = compare(got, want, tolerance(dt));
    EXPECT_TRUE(cmp.ok) << "plane " << sample[i] << ": " << cmp.to_string();
  }
}

TEST_F(WTConvForwardLarge, PastTwoTo31ElementsBF16) { check_sampled({2, 256, 2048, 2050, 5, 3, 1, true}, DType::kBF16); }
TEST_F(WTConvForwardLarge, SixtyFiveThousandPlanes) { check_sampled({64, 1024, 7, 7, 5, 2, 1, true}, DType::kF32); }

TEST_F(WTConvForwardLarge, RejectsBadShapesWithNamedValues) {
  WTConv layer({4, 5, 2, DType::kF32, true, 1, 0});
  EXPECT_THROW(layer.forward(nullptr, nullptr, 1, 4, 4), SpecError);
  try {
    layer.plan(0, 4, 4);
    FAIL() << "B=0 accepted";
  } catch (const SpecError& e) {
    EXPECT_NE(std::string(e.what()).find("B=0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lkjit::testing
