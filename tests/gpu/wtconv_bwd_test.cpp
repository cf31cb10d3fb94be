// WTConv backward on the GPU against the float64 reference backward: dX and every parameter gradient,
// every problem x dtype x path, random parameters (every scale and bias), dX and the gradients NaN-poisoned
// first and guarded (the guard bytes after each must read back unchanged); and bit-identical gradients
// across runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <tuple>

#include "lkjit/wtconv_kernels.h"
#include "lkjit/numeric.h"
#include "lkjit/testing.h"
#include "tests/gpu/gpu_fixture.h"
#include "tests/gpu/grad_check.h"
#include "tests/gpu/problems.h"

namespace lkjit::testing {
namespace {

using Param = ProblemParam;

struct BwdResult {
  std::vector<float> dx;
  ref::WTConvGrads grads;
  std::vector<uint8_t> dx_bits;
};

// plane_tile, reduce_tile: run the backward plane kernel, the reduce kernel with this tile (no tuning)
// instead of the layer's choice. claim: how the plane kernel's B warps share dX (WTConv::set_claim_for_testing).
BwdResult run_backward(const Problem& pb, DType dt, WTConvPath path, const ref::WTConvParams& params,
                       const std::vector<float>& x, const std::vector<float>& g, const Tile* plane_tile = nullptr,
                       const Tile* reduce_tile = nullptr,
                       WTConv::ClaimForTesting claim = WTConv::ClaimForTesting::kDynamic) {
  WTConv layer({pb.C, pb.k, pb.L, dt, pb.bias, pb.stride, 0});
  layer.set_path(path);
  layer.set_claim_for_testing(claim);
  if (plane_tile || reduce_tile) layer.set_tune_mode(TuneMode::kOff);
  if (plane_tile) layer.set_tile_override(kWTConvBwdPlane, 0, *plane_tile);
  if (reduce_tile) layer.set_tile_override(kWTConvReduce, 0, *reduce_tile);
  auto dp = upload_params(params, /*with_grads=*/true);
  layer.set_weights(dp.weights);
  const auto xb = encode(dt, x), gb = encode(dt, g);
  GuardedBuffer dx(xb.size());
  DeviceBuffer dxin(xb.size()), dg(gb.size() + 4);
  dxin.upload(xb.data(), xb.size());
  dg.upload(gb.data(), gb.size());
  dx.poison();
  dp.poison_grads();
  layer.backward(dxin.data(), dg.data(), dx.data(), dp.grads, pb.B, pb.H, pb.W);
  synchronize();
  EXPECT_EQ(dx.guard_bytes_changed(), 0) << "the backward wrote past dX";
  EXPECT_EQ(dp.grad_guards_changed(), "") << "the backward wrote past a gradient";
  BwdResult r;
  r.dx_bits.resize(xb.size());
  dx.buffer().download(r.dx_bits.data(), r.dx_bits.size());
  r.dx.resize(x.size());
  for (size_t i = 0; i < x.size(); ++i) r.dx[i] = decode_one(dt, r.dx_bits.data(), i);
  r.grads = download_grads(dp, params);
  return r;
}

class WTConvBackward : public GpuTestP<Param> {};

TEST_P(WTConvBackward, MatchesFloat64Reference) {
  const auto& [pb, dt, path] = GetParam();
  if (path == WTConvPath::kPlane) {
    if (const auto why = plane_path_unavailable(pb, dt, /*backward=*/true)) GTEST_SKIP() << *why;
  }
  const uint64_t seed = 17;  // parameters; the input seed + 2, the output gradient seed + 6
  SCOPED_TRACE(seed_note(seed));
  const auto params = random_params(int(pb.C), pb.k, pb.L, pb.bias, seed);
  const ref::Shape4 s4{pb.B, pb.C, pb.H, pb.W};
  const Shape sh{pb.B, pb.C, pb.H, pb.W, pb.stride};
  const auto x = random_tensor(size_t(s4.numel()), dt, seed + 2);
  const auto g = random_tensor(size_t(sh.B * sh.C * sh.H_out() * sh.W_out()), dt, seed + 6);
  const auto r = run_backward(pb, dt, path, params, x, g);
  const auto want = ref::wtconv_backward(std::vector<double>(x.begin(), x.end()), s4, params,
                                         std::vector<double>(g.begin(), g.end()), pb.stride);
  const auto cmp = compare(r.dx, want.dx, tolerance(dt));
  EXPECT_TRUE(cmp.ok) << "dX: " << cmp.to_string();
  expect_grads_close(r.grads, want, pb.bias, pb.L, dt);
}

INSTANTIATE_TEST_SUITE_P(Problems, WTConvBackward, ::testing::ValuesIn(problem_params()), problem_param_name);

class WTConvBackwardDeterminism : public GpuTest {};

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](double x, double y) {
           return std::memcmp(&x, &y, sizeof x) == 0;
         });
}

TEST_F(WTConvBackwardDeterminism, TwoRunsGiveIdenticalBits) {
  for (WTConvPath path : {WTConvPath::kPlane, WTConvPath::kTiled}) {
    const Problem pb{4, 8, 56, 56, 5, 3, 1, true};
    const uint64_t seed = 5;  // parameters; the input seed + 1, the output gradient seed + 2
    SCOPED_TRACE(seed_note(seed));
    const auto params = random_params(int(pb.C), pb.k, pb.L, pb.bias, seed);
    const auto x = random_tensor(size_t(pb.B * pb.C * pb.H * pb.W), DType::kF32, seed + 1);
    const auto g = random_tensor(x.size(), DType::kF32, seed + 2);
    const auto a = run_backward(pb, DType::kF32, path, params, x, g);
    const auto b = run_backward(pb, DType::kF32, path, params, x, g);
    EXPECT_EQ(a.dx_bits, b.dx_bits);
    EXPECT_TRUE(same_bits(a.grads.base_w, b.grads.base_w));
    EXPECT_TRUE(same_bits(a.grads.base_b, b.grads.base_b));
    EXPECT_TRUE(same_bits(a.grads.base_s, b.grads.base_s));
    for (int l = 0; l < pb.L; ++l) {
      EXPECT_TRUE(same_bits(a.grads.level_w[l], b.grads.level_w[l])) << "level " << l;
      EXPECT_TRUE(same_bits(a.grads.level_s[l], b.grads.level_s[l])) << "level " << l;
    }
  }
}

// A stride-1 problem's random inputs (seeds seed, seed + 1, seed + 2) and its float64 backward, for the
// tile sweeps below.
struct BwdCase {
  ref::WTConvParams params;
  std::vector<float> x, g;
  ref::WTConvGrads want;
};
BwdCase make_case(const Problem& pb, DType dt, uint64_t seed) {
  BwdCase c;
  c.params = random_params(int(pb.C), pb.k, pb.L, pb.bias, seed);
  const ref::Shape4 s4{pb.B, pb.C, pb.H, pb.W};
  c.x = random_tensor(size_t(s4.numel()), dt, seed + 1);
  c.g = random_tensor(c.x.size(), dt, seed + 2);
  c.want = ref::wtconv_backward(std::vector<double>(c.x.begin(), c.x.end()), s4, c.params,
                                std::vector<double>(c.g.begin(), c.g.end()), pb.stride);
  return c;
}

// Every tile of the backward plane kernel's space on one problem: each (planes, threads) pair splits its
// warp groups differently (level chain vs base wgrad), with its own named barriers. Each tile runs three
// times: with the B warps claiming dX items as timing allows, all of them, and none; the three must match
// the reference and each other bit for bit (the split must not change a value).
class WTConvBackwardPlaneTiles : public GpuTest {};

void check_every_bwd_tile(const Problem& pb, DType dt, uint64_t seed) {
  SCOPED_TRACE(seed_note(seed));
  const DeviceInfo dev = device_info(0);
  const auto [params, x, g, want] = make_case(pb, dt, seed);
  int tested = 0;
  for (const Tile& t : plane_tiles(kWTConvBwdPlane, pb, dt, dev.arch, dev.limits)) {
    BwdResult first;
    for (auto claim : {WTConv::ClaimForTesting::kDynamic, WTConv::ClaimForTesting::kAll,
                       WTConv::ClaimForTesting::kNone}) {
      SCOPED_TRACE(t.to_string() + (claim == WTConv::ClaimForTesting::kAll    ? " claim all"
                                    : claim == WTConv::ClaimForTesting::kNone ? " claim none"
                                                                              : ""));
      const auto r = run_backward(pb, dt, WTConvPath::kPlane, params, x, g, &t, nullptr, claim);
      const auto cmp = compare(r.dx, want.dx, tolerance(dt));
      EXPECT_TRUE(cmp.ok) << "dX: " << cmp.to_string();
      expect_grads_close(r.grads, want, pb.bias, pb.L, dt);
      if (claim == WTConv::ClaimForTesting::kDynamic) {
        first = r;
      } else {
        EXPECT_EQ(r.dx_bits, first.dx_bits) << "dX depends on how the B warps shared it";
        EXPECT_TRUE(same_bits(r.grads.base_b, first.grads.base_b));
      }
    }
    ++tested;
  }
  EXPECT_GE(tested, 10) << "too few tiles fit";
}

TEST_F(WTConvBackwardPlaneTiles, EveryTileMatchesTheReference) { check_every_bwd_tile(kTileProblem, DType::kF32, 11); }

// 15 planes: blocks of 2, 4, 8 and 16 planes end with groups that have no plane and leave at once, beside
// groups whose B and chain warps use the hand-off barrier; bf16 stages in 16-byte loads (W = 24).
TEST_F(WTConvBackwardPlaneTiles, PartialBlocksBF16) { check_every_bwd_tile({3, 5, 24, 24, 5, 3, 1, true}, DType::kBF16, 13); }

// Every tile of the reduce kernel, after the plane kernel (one partial row per image: with 1024 threads the
// base group's rows split 32 ways, beyond B) and after the tiled path (several tile rows per image).
TEST_F(WTConvBackwardPlaneTiles, EveryReduceTileMatchesTheReference) {
  const Problem pb{19, 3, 23, 17, 5, 3, 1, true};
  const DType dt = DType::kF32;
  const DeviceInfo dev = device_info(0);
  SCOPED_TRACE(seed_note(21));
  const auto [params, x, g, want] = make_case(pb, dt, 21);
  int tested = 0;
  for (WTConvPath path : {WTConvPath::kPlane, WTConvPath::kTiled})
    for (const Tile& t : plane_tiles(kWTConvReduce, pb, dt, dev.arch, dev.limits)) {
      SCOPED_TRACE(std::string(path == WTConvPath::kPlane ? "plane " : "tiled ") + t.to_string());
      const auto r = run_backward(pb, dt, path, params, x, g, nullptr, &t);
      EXPECT_TRUE(compare(r.dx, want.dx, tolerance(dt)).ok);
      expect_grads_close(r.grads, want, pb.bias, pb.L, dt);
      ++tested;
    }
  EXPECT_EQ(tested, 8) << "threads 128..1024, on each path";
}

}  // namespace
}  // namespace lkjit::testing
