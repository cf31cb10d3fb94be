// Each term of WTConv alone, on the GPU against the float64 reference (tests/wtconv_terms.h): every level l of
// each term problem with every other level's scales 0 and no base conv, its scales scaled so that the result
// has RMS 1, then the base alone; forward (out) and backward (dX and every parameter gradient), every dtype, on
// the plane, tiled and (W <= 16) lane paths. A dropped, mis-signed, swapped or misplaced term fails these even
// at level 5 of the 56x56 L=5 layer in bf16 and at levels 7 and 8 of the L=8 ones: tests/wtconv_terms_test.cpp
// shows, on the CPU for the same cases, that every such fault exceeds twice the tolerance used here.
//
// And the LL chain: inputs of large mean, whose raw low band passes the f16 maximum while the outputs stay
// below a quarter of it, must match the reference in f16 and bf16 as in f32, forward and backward (README:
// intermediates are fp32, so the 2x growth per level cannot overflow).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "lkjit/numeric.h"
#include "lkjit/testing.h"
#include "tests/gpu/gpu_fixture.h"
#include "tests/gpu/grad_check.h"
#include "tests/gpu/problems.h"
#include "tests/wtconv_terms.h"

namespace lkjit::testing {
namespace {

// (B, C, H, W) NCHW host order <-> the layout's memory order (NHWC for the lane path).
std::vector<float> to_memory(const std::vector<float>& v, const Problem& p, bool nhwc) {
  if (!nhwc) return v;
  std::vector<float> r(v.size());
  for (int64_t b = 0, i = 0; b < p.B; ++b)
    for (int64_t c = 0; c < p.C; ++c)
      for (int64_t y = 0; y < p.H; ++y)
        for (int64_t x = 0; x < p.W; ++x, ++i) r[size_t(((b * p.H + y) * p.W + x) * p.C + c)] = v[size_t(i)];
  return r;
}
std::vector<float> from_memory(const std::vector<float>& v, const Problem& p, int64_t h, int64_t w, bool nhwc) {
  if (!nhwc) return v;
  std::vector<float> r(v.size());
  for (int64_t b = 0, i = 0; b < p.B; ++b)
    for (int64_t c = 0; c < p.C; ++c)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x, ++i) r[size_t(i)] = v[size_t(((b * h + y) * w + x) * p.C + c)];
  return r;
}

DeviceBuffer upload(DType dt, const std::vector<float>& v) {
  const auto b = encode(dt, v);
  DeviceBuffer d((b.size() + 3) / 4 * 4);
  d.upload(b.data(), b.size());
  return d;
}
std::vector<float> download(DType dt, const GuardedBuffer& g, size_t n) {
  EXPECT_EQ(g.guard_bytes_changed(), 0) << "wrote past the tensor";
  std::vector<uint8_t> raw(n * dtype_bytes(dt));
  g.buffer().download(raw.data(), raw.size());
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = decode_one(dt, raw.data(), i);
  return v;
}

std::unique_ptr<WTConv> make_layer(const Problem& pb, DType dt, WTConvPath path) {
  WTConvOptions o{pb.C, pb.k, pb.L, dt, pb.bias, pb.stride, 0};
  if (path == WTConvPath::kLane) o.layout = Layout::kNHWC;
  auto layer = std::make_unique<WTConv>(o);
  layer->set_path(path);
  layer->set_tune_mode(TuneMode::kOff);
  return layer;
}

// The forward's out, NCHW order.
std::vector<float> run_forward(const Problem& pb, DType dt, WTConvPath path, const ref::WTConvParams& params,
                               const std::vector<float>& x) {
  const bool nhwc = path == WTConvPath::kLane;
  const auto layer = make_layer(pb, dt, path);
  auto dp = upload_params(params);
  layer->set_weights(dp.weights);
  const Shape sh{pb.B, pb.C, pb.H, pb.W, pb.stride};
  const DeviceBuffer dx = upload(dt, to_memory(x, pb, nhwc));
  GuardedBuffer out(out_numel(pb) * dtype_bytes(dt));
  out.poison();
  layer->forward(dx.data(), out.data(), pb.B, pb.H, pb.W);
  synchronize();
  return from_memory(download(dt, out, out_numel(pb)), pb, sh.H_out(), sh.W_out(), nhwc);
}

struct BwdRun {
  std::vector<float> dx;
  ref::WTConvGrads grads;
};
BwdRun run_backward(const Problem& pb, DType dt, WTConvPath path, const ref::WTConvParams& params,
                    const std::vector<float>& x, const std::vector<float>& g) {
  const bool nhwc = path == WTConvPath::kLane;
  const auto layer = make_layer(pb, dt, path);
  auto dp = upload_params(params, /*with_grads=*/true);
  layer->set_weights(dp.weights);
  const DeviceBuffer dxin = upload(dt, to_memory(x, pb, nhwc));
  // dOut NHWC with its own extents on the lane path (stride 1 there: the same as X's).
  const DeviceBuffer dg = upload(dt, nhwc ? to_memory(g, pb, true) : g);
  GuardedBuffer ddx(x.size() * dtype_bytes(dt));
  ddx.poison();
  dp.poison_grads();
  layer->backward(dxin.data(), dg.data(), ddx.data(), dp.grads, pb.B, pb.H, pb.W);
  synchronize();
  EXPECT_EQ(dp.grad_guards_changed(), "") << "the backward wrote past a gradient";
  BwdRun r;
  r.dx = from_memory(download(dt, ddx, x.size()), pb, pb.H, pb.W, nhwc);
  r.grads = download_grads(dp, params);
  return r;
}

bool lane_runs(const Problem& pb) { return pb.stride == 1 && pb.W <= 16; }

// The paths a problem runs on: the plane path where its planes fit (the term problems' do: a plane path that
// cannot run one fails, never skips), the tiled path, and the lane path for lane-sized maps.
std::vector<WTConvPath> paths_of(const Problem& pb) {
  std::vector<WTConvPath> v{WTConvPath::kPlane, WTConvPath::kTiled};
  if (lane_runs(pb)) v.push_back(WTConvPath::kLane);
  return v;
}

// (problem index, dtype, path)
using Param = std::tuple<size_t, DType, WTConvPath>;
std::string param_name(const std::vector<Problem>& list, const ::testing::TestParamInfo<Param>& i) {
  const auto& [pi, dt, path] = i.param;
  return problem_name(list[pi], dt, path);
}

std::vector<Param> params_of(const std::vector<Problem>& list, std::vector<DType> dtypes) {
  std::vector<Param> v;
  for (size_t i = 0; i < list.size(); ++i)
    for (DType dt : dtypes)
      for (WTConvPath path : paths_of(list[i])) v.emplace_back(i, dt, path);
  return v;
}

void expect_plane_path_runs(const Problem& pb, DType dt, WTConvPath path, bool backward) {
  if (path != WTConvPath::kPlane) return;
  const auto why = plane_path_unavailable(pb, dt, backward);
  EXPECT_FALSE(why.has_value()) << "the plane path cannot run a term problem: " << why.value_or("");
}

// ---- isolated terms ----

class WTConvTerms : public GpuTestP<Param> {};

TEST_P(WTConvTerms, EachLevelAloneAndTheBaseAloneForward) {
  const auto& [pi, dt, path] = GetParam();
  const Problem pb = term_problems()[pi];
  expect_plane_path_runs(pb, dt, path, false);
  for (int level = 0; level <= pb.L; ++level) {
    const TermCase c = term_case(pi, level, dt, false);
    SCOPED_TRACE((level ? "level " + std::to_string(level) + " alone, " : "the base alone, ") + seed_note(c.seed));
    const auto cmp = compare(run_forward(pb, dt, path, c.params, c.x), c.want_out, tolerance(dt));
    EXPECT_TRUE(cmp.ok) << "out: " << cmp.to_string();
  }
}

TEST_P(WTConvTerms, EachLevelAloneAndTheBaseAloneBackward) {
  const auto& [pi, dt, path] = GetParam();
  const Problem pb = term_problems()[pi];
  expect_plane_path_runs(pb, dt, path, true);
  for (int level = 0; level <= pb.L; ++level) {
    const TermCase c = term_case(pi, level, dt, true);
    SCOPED_TRACE((level ? "level " + std::to_string(level) + " alone, " : "the base alone, ") + seed_note(c.seed));
    const BwdRun r = run_backward(pb, dt, path, c.params, c.x, c.g);
    const auto cmp = compare(r.dx, c.want.dx, tolerance(dt));
    EXPECT_TRUE(cmp.ok) << "dX: " << cmp.to_string();
    expect_grads_close(r.grads, c.want, pb.bias, pb.L, dt);
  }
}

INSTANTIATE_TEST_SUITE_P(Problems, WTConvTerms,
                         ::testing::ValuesIn(params_of(term_problems(), {DType::kF32, DType::kF16, DType::kBF16})),
                         [](const ::testing::TestParamInfo<Param>& i) { return param_name(term_problems(), i); });

// ---- the LL chain ----

class WTConvChain : public GpuTestP<Param> {};

TEST_P(WTConvChain, LargeMeanInputsForward) {
  const auto& [pi, dt, path] = GetParam();
  const Problem pb = chain_problems()[pi];
  expect_plane_path_runs(pb, dt, path, false);
  const ChainCase c = chain_case(pi, dt);
  SCOPED_TRACE(seed_note(c.seed) + ", mean " + std::to_string(c.mean));
  const auto want = ref::wtconv_forward(as_double(c.x), shape4(pb), c.params, pb.stride);
  const auto cmp = compare(run_forward(pb, dt, path, c.params, c.x), want, chain_tolerance(dt, c.mean));
  EXPECT_TRUE(cmp.ok) << "out: " << cmp.to_string();
}

TEST_P(WTConvChain, LargeMeanInputsBackward) {
  const auto& [pi, dt, path] = GetParam();
  const Problem pb = chain_problems()[pi];
  expect_plane_path_runs(pb, dt, path, true);
  const ChainCase c = chain_case(pi, dt);
  SCOPED_TRACE(seed_note(c.seed) + ", mean " + std::to_string(c.mean));
  const auto want = ref::wtconv_backward(as_double(c.x), shape4(pb), c.params, as_double(c.g), pb.stride);
  const BwdRun r = run_backward(pb, dt, path, c.params, c.x, c.g);
  const auto cmp = compare(r.dx, want.dx, chain_tolerance(dt, c.mean));
  EXPECT_TRUE(cmp.ok) << "dX: " << cmp.to_string();
  // The 16-bit gradient tolerance for every dtype: with large means a gradient sums thousands of same-signed
  // terms of magnitude mean^2 in fp32, whose error grows with the count (not a cancellation the f32 one allows).
  expect_grads_close(r.grads, want, pb.bias, pb.L, DType::kBF16);
}

INSTANTIATE_TEST_SUITE_P(Problems, WTConvChain,
                         ::testing::ValuesIn(params_of(chain_problems(), {DType::kF16, DType::kBF16, DType::kF32})),
                         [](const ::testing::TestParamInfo<Param>& i) { return param_name(chain_problems(), i); });

}  // namespace
}  // namespace lkjit::testing
