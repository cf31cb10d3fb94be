// The lane kernels (one thread per (b,c) plane, NHWC activations) on the GPU against the float64
// reference: forward output, dX and every parameter gradient, over small planes with odd extents, maps
// below 2^L, C = 1 and partial blocks, k in {1, 3, 5, 7}, L in [0, 8], every dtype, random parameters;
// written tensors and gradients NaN-poisoned first and guarded; both passes with one and with two threads
// per plane. Also every tile of the lane space on one problem, and the layer's choice: NHWC activations
// take the lane kernels on their own (kAuto), NCHW ones do not. (Non-dense channels_last tensors on the lane
// kernels: wtconv_strides_test.cpp, WTConvLaneStrided.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "lkjit/wtconv_kernels.h"
#include "lkjit/numeric.h"
#include "lkjit/testing.h"
#include "tests/gpu/gpu_fixture.h"
#include "tests/gpu/grad_check.h"
#include "tests/gpu/problems.h"

namespace lkjit::testing {
namespace {

// (B, C, H, W) in NCHW order <-> NHWC memory order, host side.
std::vector<float> to_nhwc(const std::vector<float>& v, const Problem& p) {
  std::vector<float> r(v.size());
  for (int64_t b = 0, i = 0; b < p.B; ++b)
    for (int64_t c = 0; c < p.C; ++c)
      for (int64_t y = 0; y < p.H; ++y)
        for (int64_t x = 0; x < p.W; ++x, ++i) r[size_t(((b * p.H + y) * p.W + x) * p.C + c)] = v[size_t(i)];
  return r;
}
std::vector<float> from_nhwc(const std::vector<float>& v, const Problem& p) {
  std::vector<float> r(v.size());
  for (int64_t b = 0, i = 0; b < p.B; ++b)
    for (int64_t c = 0; c < p.C; ++c)
      for (int64_t y = 0; y < p.H; ++y)
        for (int64_t x = 0; x < p.W; ++x, ++i) r[size_t(i)] = v[size_t(((b * p.H + y) * p.W + x) * p.C + c)];
  return r;
}

DeviceBuffer upload_nhwc(DType dt, const std::vector<float>& v, const Problem& p) {
  const auto bytes = encode(dt, to_nhwc(v, p));
  DeviceBuffer buf(bytes.size() + 4);
  buf.upload(bytes.data(), bytes.size());
  return buf;
}
// A written NHWC tensor: NaN-poisoned, with its guard.
GuardedBuffer written_nhwc(DType dt, const Problem& p) {
  GuardedBuffer buf(size_t(p.B * p.C * p.H * p.W) * dtype_bytes(dt));
  buf.poison();
  return buf;
}
std::vector<float> download_nhwc(DType dt, const GuardedBuffer& g, const Problem& p) {
  EXPECT_EQ(g.guard_bytes_changed(), 0) << "the lane kernels wrote past the tensor";
  const DeviceBuffer& buf = g.buffer();
  std::vector<uint8_t> raw(size_t(p.B * p.C * p.H * p.W) * dtype_bytes(dt));
  buf.download(raw.data(), raw.size());
  std::vector<float> v(size_t(p.B * p.C * p.H * p.W));
  for (size_t i = 0; i < v.size(); ++i) v[i] = decode_one(dt, raw.data(), i);
  return from_nhwc(v, p);
}

// A layer on NHWC activations (options.layout, no strides), on `path`, optionally with a pinned lane tile.
std::unique_ptr<WTConv> make_layer(const Problem& pb, DType dt, WTConvPath path, const Tile* tile, bool backward) {
  WTConvOptions o{pb.C, pb.k, pb.L, dt, pb.bias, pb.stride, 0};
  o.layout = Layout::kNHWC;
  auto layer = std::make_unique<WTConv>(o);
  layer->set_path(path);
  layer->set_tune_mode(TuneMode::kOff);
  if (tile) layer->set_tile_override(backward ? kWTConvBwdLane : kWTConvFwdLane, 0, *tile);
  return layer;
}

bool plans_kernel(const WTConv& layer, const Problem& pb, bool backward, Kernel k) {
  const auto pl = layer.plan(pb.B, pb.H, pb.W, backward);
  return std::any_of(pl.begin(), pl.end(), [&](const PlannedKernel& pk) { return pk.spec.kernel == k; });
}

void check_forward(const Problem& pb, DType dt, const Tile* tile = nullptr) {
  const uint64_t seed = 31;  // parameters; the input seed + 1
  SCOPED_TRACE(seed_note(seed));
  const auto params = random_params(int(pb.C), pb.k, pb.L, pb.bias, seed);
  const auto x = random_tensor(size_t(pb.B * pb.C * pb.H * pb.W), dt, seed + 1);
  auto lp = make_layer(pb, dt, WTConvPath::kLane, tile, false);
  WTConv& layer = *lp;
  ASSERT_TRUE(plans_kernel(layer, pb, false, kWTConvFwdLane));
  auto dp = upload_params(params);
  layer.set_weights(dp.weights);
  DeviceBuffer dx = upload_nhwc(dt, x, pb);
  GuardedBuffer dout = written_nhwc(dt, pb);
  layer.forward(dx.data(), dout.data(), pb.B, pb.H, pb.W);
  synchronize();
  const auto want = ref::wtconv_forward(std::vector<double>(x.begin(), x.end()), {pb.B, pb.C, pb.H, pb.W}, params, 1);
  const auto cmp = compare(download_nhwc(dt, dout, pb), want, tolerance(dt));
  EXPECT_TRUE(cmp.ok) << "out: " << cmp.to_string();
}

// reduce_tile: the reduce_lane kernel's tile instead of its default.
void check_backward(const Problem& pb, DType dt, const Tile* tile = nullptr, const Tile* reduce_tile = nullptr) {
  const uint64_t seed = 41;  // parameters; the input seed + 1, the output gradient seed + 2
  SCOPED_TRACE(seed_note(seed));
  const auto params = random_params(int(pb.C), pb.k, pb.L, pb.bias, seed);
  const size_t n = size_t(pb.B * pb.C * pb.H * pb.W);
  const auto x = random_tensor(n, dt, seed + 1), g = random_tensor(n, dt, seed + 2);
  auto lp = make_layer(pb, dt, WTConvPath::kLane, tile, true);
  WTConv& layer = *lp;
  if (reduce_tile) layer.set_tile_override(kWTConvReduceLane, 0, *reduce_tile);
  ASSERT_TRUE(plans_kernel(layer, pb, true, kWTConvBwdLane));
  auto dp = upload_params(params, /*with_grads=*/true);
  layer.set_weights(dp.weights);
  DeviceBuffer dxin = upload_nhwc(dt, x, pb), dg = upload_nhwc(dt, g, pb);
  GuardedBuffer ddx = written_nhwc(dt, pb);
  dp.poison_grads();
  layer.backward(dxin.data(), dg.data(), ddx.data(), dp.grads, pb.B, pb.H, pb.W);
  synchronize();
  EXPECT_EQ(dp.grad_guards_changed(), "") << "the lane backward wrote past a gradient";
  const auto want = ref::wtconv_backward(std::vector<double>(x.begin(), x.end()), {pb.B, pb.C, pb.H, pb.W}, params,
                                         std::vector<double>(g.begin(), g.end()), 1);
  const auto cmp = compare(download_nhwc(dt, ddx, pb), want.dx, tolerance(dt));
  EXPECT_TRUE(cmp.ok) << "dX: " << cmp.to_string();
  expect_grads_close(download_grads(dp, params), want, pb.bias, pb.L, dt);
}

// Small planes the lane kernels take (stride 1, W <= 16): maps below 2^L, odd extents, C = 1, B*C not a
// multiple of the block, tall planes, k = 1 and k = 7 (W <= 8 for the register rows), L = 0, and L = 5..8
// (the deepest levels on 1x1 maps, a tall plane's on 2x1 and 1x2).
std::vector<Problem> lane_problems() {
  return {
      {1, 1, 1, 1, 5, 3, 1, true},   {1, 1, 3, 5, 5, 2, 1, true},  {1, 1, 2, 7, 3, 3, 1, false},
      {2, 3, 7, 9, 5, 3, 1, true},   {3, 2, 13, 6, 5, 4, 1, true}, {2, 3, 9, 11, 1, 2, 1, true},
      {2, 2, 12, 8, 7, 2, 1, true},  {2, 5, 10, 10, 5, 0, 1, true}, {1, 300, 9, 9, 5, 2, 1, true},
      {65, 3, 7, 7, 5, 2, 1, true},  {2, 5, 14, 14, 5, 3, 1, true}, {1, 33, 16, 16, 3, 4, 1, true},
      {2, 4, 40, 15, 5, 3, 1, true}, {2, 3, 16, 16, 5, 5, 1, true}, {1, 4, 11, 13, 3, 6, 1, false},
      {2, 3, 9, 7, 7, 7, 1, true},   {1, 2, 48, 9, 5, 8, 1, true},  {33, 2, 16, 15, 5, 8, 1, true},
  };
}

using LaneParam = std::tuple<Problem, DType>;
class WTConvLane : public GpuTestP<LaneParam> {};

TEST_P(WTConvLane, ForwardMatchesFloat64Reference) {
  const auto& [pb, dt] = GetParam();
  check_forward(pb, dt);
}

TEST_P(WTConvLane, BackwardMatchesFloat64Reference) {
  const auto& [pb, dt] = GetParam();
  check_backward(pb, dt);
}

// Each pass with the default tile's other thread count per plane: one <-> two threads per plane.
Tile other_split(Kernel kn, const Problem& pb, DType dt) {
  const DeviceInfo dev = device_info(0);
  Tile t = default_tile(wtconv_spec(kn, dt, pb.k, pb.L, true, dev.arch), Shape{pb.B, pb.C, pb.H, pb.W, 1}, dev.limits);
  t.set("planes", t.get("planes") ? 0 : t.get("threads") / 2);
  return t;
}

TEST_P(WTConvLane, ForwardWithTheOtherThreadsPerPlaneMatches) {
  const auto& [pb, dt] = GetParam();
  const Tile t = other_split(kWTConvFwdLane, pb, dt);
  SCOPED_TRACE(t.to_string());
  check_forward(pb, dt, &t);
}

TEST_P(WTConvLane, BackwardWithTheOtherThreadsPerPlaneMatches) {
  const auto& [pb, dt] = GetParam();
  const Tile t = other_split(kWTConvBwdLane, pb, dt);
  SCOPED_TRACE(t.to_string());
  check_backward(pb, dt, &t);
}

std::vector<LaneParam> lane_params() {
  std::vector<LaneParam> v;
  for (const auto& p : lane_problems())
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) v.emplace_back(p, dt);
  return v;
}

std::string lane_param_name(const ::testing::TestParamInfo<LaneParam>& info) {
  const auto& [pb, dt] = info.param;
  std::string s = problem_name(pb, dt, WTConvPath::kAuto);
  return s.substr(0, s.size() - 5) + "_lane";  // "_auto" -> "_lane"
}

INSTANTIATE_TEST_SUITE_P(Problems, WTConvLane, ::testing::ValuesIn(lane_params()), lane_param_name);

// Every tile of the lane space that fits one problem: tile_w (the register rows past W idle), threads, and
// one or two threads per plane.
class WTConvLaneTiles : public GpuTest {};

TEST_F(WTConvLaneTiles, EveryTileMatchesTheReference) {
  const Problem pb{2, 9, 11, 9, 5, 3, 1, true};
  const DeviceInfo dev = device_info(0);
  int tested = 0;
  for (const Tile& t : plane_tiles(kWTConvFwdLane, pb, DType::kF32, dev.arch, dev.limits)) {
    SCOPED_TRACE("forward " + t.to_string());
    check_forward(pb, DType::kF32, &t);
    ++tested;
  }
  EXPECT_GE(tested, 28) << "tile_w 10..16 x threads 32..256, but the largest blocks, one or two threads a plane";
  tested = 0;
  for (const Tile& t : plane_tiles(kWTConvBwdLane, pb, DType::kF32, dev.arch, dev.limits)) {
    SCOPED_TRACE("backward " + t.to_string());
    check_backward(pb, DType::kF32, &t);
    ++tested;
  }
  EXPECT_GE(tested, 24) << "tile_w 10..16 x threads 32..128 at least, one or two threads per plane";
}

// Every reduce_lane tile at B = 41 (one 32-batch, one 8-batch and one single step of its sums) and C = 33
// (a second block of one channel).
TEST_F(WTConvLaneTiles, EveryReduceTileMatchesTheReference) {
  const Problem pb{41, 33, 7, 6, 5, 2, 1, true};
  const DeviceInfo dev = device_info(0);
  int tested = 0;
  for (const Tile& t : plane_tiles(kWTConvReduceLane, pb, DType::kF32, dev.arch, dev.limits)) {
    SCOPED_TRACE("reduce_lane " + t.to_string());
    check_backward(pb, DType::kF32, nullptr, &t);
    ++tested;
  }
  EXPECT_GE(tested, 4) << "threads 64..512";
}

// kAuto: NHWC activations of a small plane take the lane kernels, forward and backward, NCHW ones the plane
// kernels; the layer decides by the call's strides as well as by options.layout.
TEST_F(WTConvLaneTiles, AutoPicksLaneForNHWCOnly) {
  const Problem pb{2, 5, 14, 14, 5, 3, 1, true};
  const auto nhwc = make_layer(pb, DType::kF32, WTConvPath::kAuto, nullptr, false);
  EXPECT_TRUE(plans_kernel(*nhwc, pb, false, kWTConvFwdLane));
  EXPECT_TRUE(plans_kernel(*nhwc, pb, true, kWTConvBwdLane));
  EXPECT_TRUE(plans_kernel(*nhwc, pb, true, kWTConvReduceLane));
  WTConv nchw({pb.C, pb.k, pb.L, DType::kF32, pb.bias, 1, 0});
  EXPECT_TRUE(plans_kernel(nchw, pb, false, kWTConvFwdPlane));
  EXPECT_TRUE(plans_kernel(nchw, pb, true, kWTConvBwdPlane));
  // The NCHW layer called with channels_last strides runs the lane kernels (no tile exists for them in a
  // plane launch: a wrong pick would fail the pinned override below) and matches the reference.
  nchw.set_tune_mode(TuneMode::kOff);
  nchw.set_tile_override(kWTConvFwdLane, 0, wtconv_tile(0, 16, 0, 0, 32));
  nchw.set_tile_override(kWTConvFwdPlane, 0, wtconv_tile(0, 0, 1, 2, 32000));  // rejected if ever planned
  nchw.set_tile_override(kWTConvBwdPlane, 0, wtconv_tile(0, 0, 1, 2, 32000));
  const uint64_t seed = 51;  // parameters; the input seed + 1, the output gradient seed + 2
  SCOPED_TRACE(seed_note(seed));
  const auto params = random_params(int(pb.C), pb.k, pb.L, pb.bias, seed);
  const auto x = random_tensor(size_t(pb.B * pb.C * pb.H * pb.W), DType::kF32, seed + 1);
  auto dp = upload_params(params);
  nchw.set_weights(dp.weights);
  DeviceBuffer dx = upload_nhwc(DType::kF32, x, pb);
  GuardedBuffer dout = written_nhwc(DType::kF32, pb);
  WTConvStrides st;
  st.x = st.out = {pb.H * pb.W * pb.C, 1, pb.W * pb.C, pb.C};
  nchw.forward(dx.data(), dout.data(), pb.B, pb.H, pb.W, nullptr, &st);
  synchronize();
  const auto want = ref::wtconv_forward(std::vector<double>(x.begin(), x.end()), {pb.B, pb.C, pb.H, pb.W}, params, 1);
  const auto cmp = compare(download_nhwc(DType::kF32, dout, pb), want, tolerance(DType::kF32));
  EXPECT_TRUE(cmp.ok) << cmp.to_string();
  // The backward, all three activations channels_last: the lane backward, checked on dX and one gradient.
  auto dpg = upload_params(params, /*with_grads=*/true);
  nchw.set_weights(dpg.weights);
  const auto g = random_tensor(x.size(), DType::kF32, seed + 2);
  DeviceBuffer dg = upload_nhwc(DType::kF32, g, pb);
  GuardedBuffer ddx = written_nhwc(DType::kF32, pb);
  dpg.poison_grads();
  st.dout = st.x;
  nchw.backward(dx.data(), dg.data(), ddx.data(), dpg.grads, pb.B, pb.H, pb.W, nullptr, &st);
  synchronize();
  const auto wb = ref::wtconv_backward(std::vector<double>(x.begin(), x.end()), {pb.B, pb.C, pb.H, pb.W}, params,
                                       std::vector<double>(g.begin(), g.end()), 1);
  const auto cdx = compare(download_nhwc(DType::kF32, ddx, pb), wb.dx, tolerance(DType::kF32));
  EXPECT_TRUE(cdx.ok) << "dX: " << cdx.to_string();
  expect_grad_close(download_grads(dpg, params).level_w[0], wb.level_w[0], "level_w[0]", DType::kF32);
}

}  // namespace
}  // namespace lkjit::testing
