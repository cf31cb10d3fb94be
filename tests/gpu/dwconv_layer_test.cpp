// GPU tests of lkjit::DepthwiseConv (the layer on the plan runner) against the float64 reference: every small
// problem of tests/gpu/dwconv_problems.h with symmetric or 'same' padding (what the layer takes), every dtype,
// the NCHW, channels_last and padded-row layouts through element strides, each path (auto, direct, nhwc where
// it can run), forward and backward (dx and dw/dbias together, then each alone), outputs NaN-poisoned before
// every call, dw and dbias bit-identical across calls; the plan cache (a second call compiles nothing); tune
// mode on a miss records a decision and runs the tuned tiles correctly. Skips without a GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "lkjit/dwconv.h"
#include "lkjit/dwconv_reference.h"
#include "lkjit/error.h"
#include "lkjit/numeric.h"
#include "lkjit/runtime.h"
#include "lkjit/tuning.h"
#include "tests/gpu/dwconv_buffers.h"
#include "tests/gpu/dwconv_problems.h"
#include "tests/gpu/gpu_fixture.h"
#include "tests/random_inputs.h"
#include "tests/parallel_cases.h"

namespace {

using namespace lkjit;           // NOLINT
using namespace lkjit::testing;  // NOLINT

struct LayerCase {
  size_t problem;
  DType dtype;
  DWConvLayout layout;
  DWConvPath path;
};

bool symmetric(const DWConvProblem& q) { return q.same || (q.pad_top == q.pad_bottom && q.pad_left == q.pad_right); }

// Pairwise, not the product (the kernel tests run every dtype x layout of each problem): each problem runs every
// path, and over the problems every (dtype, layout, path) pair comes up.
std::vector<LayerCase> layer_cases() {
  std::vector<LayerCase> v;
  const auto& ps = dwconv_problems();
  const DWConvPath paths[] = {DWConvPath::kAuto, DWConvPath::kDirect, DWConvPath::kNhwc};
  int n = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    if (dwconv_is_layer(ps[i]) || !symmetric(ps[i])) continue;
    for (int p = 0; p < 3; ++p, ++n) v.push_back({i, kDWConvDTypes[(n + n / 3) % 3], kDWConvLayouts[(n + 2 * (n / 9)) % 3], paths[p]});
  }
  // The tensor-core path on every problem of its domain (16-bit, stride 1, dilation 1), dtypes and layouts in turn.
  int m = 0;
  for (size_t i = 0; i < ps.size(); ++i, ++m) {
    if (dwconv_is_layer(ps[i]) || !symmetric(ps[i]) || ps[i].stride != 1 || ps[i].dil != 1) continue;
    v.push_back({i, m % 2 ? DType::kBF16 : DType::kF16, kDWConvLayouts[m % 3], DWConvPath::kMma});
  }
  return v;
}

DWConvOptions options_of(const DWConvProblem& q, DType t) {
  DWConvOptions o;
  o.C = q.C, o.kh = q.kh, o.kw = q.kw, o.stride = q.stride, o.dil = q.dil, o.dtype = t, o.bias = q.bias;
  o.same = q.same;
  if (!q.same) o.pad_h = q.pad_top, o.pad_w = q.pad_left;
  return o;
}

using lkjit::test::as_double;
using lkjit::test::randn;

// |got - want| <= ulp(dtype) |want| + (4 * 2^-24 * sqrt(terms) + weight_rel) * sum |terms|; NaN fails. weight_rel:
// the relative error of the weights the kernels multiply by (kMma's two 16-bit parts, dwconv/geometry.cuh).
void expect_close(const std::string& what, const std::vector<float>& got, const std::vector<double>& want,
                  const std::vector<double>& scale, DType out, double terms, double weight_rel = 0) {
  const double ulp = out == DType::kF32 ? 0.0 : out == DType::kF16 ? 1.01 / 2048 : 1.01 / 256;
  const double acc = 4.0 * std::ldexp(1.0, -24) * std::sqrt(std::max(1.0, terms)) + weight_rel;
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  std::string first;
  for (size_t j = 0; j < want.size(); ++j) {
    const double tol = ulp * std::fabs(want[j]) + acc * scale[j] + 1e-30;
    if (!(std::fabs(got[j] - want[j]) <= tol) && bad++ == 0)
      first = "element " + std::to_string(j) + ": got " + std::to_string(got[j]) + ", want " + std::to_string(want[j]);
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << want.size() << " out of tolerance; first " << first;
}

std::array<int64_t, 4> arr(const std::vector<int64_t>& v) { return {v[0], v[1], v[2], v[3]}; }

// Compiles every case's kernels into the kernel cache on all cores first (one by one through the layer they
// would take minutes).
class DWConvLayerGpu : public GpuTestP<LayerCase> {
 public:
  static void SetUpTestSuite() {
    std::string why;
    if (!gpu_available(&why)) return;
    const auto lim = device_info().limits;
    std::vector<PlannedKernel> all;
    for (const auto& c : layer_cases()) {
      const auto& q = dwconv_problems()[c.problem];
      for (bool bwd : {false, true})
        for (Layout act : {Layout::kNCHW, Layout::kNHWC}) {
          try {
            const auto pl = dwconv_plan(options_of(q, c.dtype), q.B, q.H, q.W, lim, bwd, act, c.path);
            all.insert(all.end(), pl.begin(), pl.end());
          } catch (const SpecError&) {  // a forced NHWC path that cannot run: the case skips
          }
        }
    }
    lkjit::test::for_each_on_all_cores(
        all.size(), [&](size_t i) { precompile_candidates(all[i].spec, all[i].shape, lim, {all[i].tile}, 1); });
  }
};

TEST_P(DWConvLayerGpu, MatchesTheReference) {
  const LayerCase& cs = GetParam();
  const DWConvProblem& q = dwconv_problems()[cs.problem];
  const DType t = cs.dtype;
  const DWConvOptions o = options_of(q, t);
  const DWConvGeometry g = dwconv_geometry(o, q.B, q.H, q.W);
  if (cs.path == DWConvPath::kNhwc) {
    try {
      dwconv_plan(o, q.B, q.H, q.W, device_info().limits, true, Layout::kNHWC, DWConvPath::kNhwc);
    } catch (const SpecError& e) {
      GTEST_SKIP() << "the NHWC kernels cannot run this spec: " << e.what();
    }
  }
  const int64_t B = q.B, C = q.C, H = q.H, W = q.W, Ho = g.Ho, Wo = g.Wo, KK = int64_t(q.kh) * q.kw;
  ref::DWConvArgs a;
  a.kh = q.kh, a.kw = q.kw, a.stride = q.stride, a.dil = q.dil;
  a.pad_top = g.pad_top, a.pad_bottom = g.pad_bottom, a.pad_left = g.pad_left, a.pad_right = g.pad_right;
  const auto x = randn(B * C * H * W, t, 21 + cs.problem), dy = randn(B * C * Ho * Wo, t, 22 + cs.problem);
  auto w = randn(C * KK, DType::kF32, 23);
  for (float& e : w) e /= std::sqrt(float(KK));
  const auto bias = q.bias ? randn(C, DType::kF32, 24) : std::vector<float>{};
  const ref::DWConvShape sh{B, C, H, W};
  const auto y_want = ref::dwconv_forward(as_double(x), sh, as_double(w), as_double(bias), a);
  const auto y_scale = ref::dwconv_forward(as_double(x, true), sh, as_double(w, true), as_double(bias, true), a);
  const auto dx_want = ref::dwconv_dgrad(as_double(dy), sh, as_double(w), a);
  const auto dx_scale = ref::dwconv_dgrad(as_double(dy, true), sh, as_double(w, true), a);
  const auto dw_want = ref::dwconv_wgrad(as_double(x), sh, as_double(dy), a);
  const auto dw_scale = ref::dwconv_wgrad(as_double(x, true), sh, as_double(dy, true), a);
  const auto db_want = ref::dwconv_dbias(as_double(dy), sh, a);
  const auto db_scale = ref::dwconv_dbias(as_double(dy, true), sh, a);

  const auto xst = dwconv_strides(cs.layout, C, H, W), yst = dwconv_strides(cs.layout, C, Ho, Wo);
  DeviceBuffer xd = upload(x, t, xst, B, C, H, W), dyd = upload(dy, t, yst, B, C, Ho, Wo);
  DeviceBuffer wd(w.size() * 4), bd(std::max<size_t>(4, bias.size() * 4));
  wd.upload(w.data(), w.size() * 4);
  if (q.bias) bd.upload(bias.data(), bias.size() * 4);
  const int eb = dtype_bytes(t);
  DeviceBuffer yd = poisoned(extent(yst, B, C, Ho, Wo) * eb), dxd = poisoned(extent(xst, B, C, H, W) * eb);
  DeviceBuffer dwd = poisoned(C * KK * 4), dbd = poisoned(C * 4);

  DepthwiseConv layer(o);
  layer.set_path(cs.path);
  layer.set_weights(static_cast<const float*>(wd.data()), q.bias ? static_cast<const float*>(bd.data()) : nullptr);
  DWConvStrides st;
  st.x = arr(xst), st.out = arr(yst);
  layer.forward(xd.data(), yd.data(), B, H, W, nullptr, &st);
  synchronize();
  const double wrel = cs.path != DWConvPath::kMma ? 0 : std::ldexp(1.0, t == DType::kBF16 ? -17 : -21);
  expect_close("y", download(yd, t, yst, B, C, Ho, Wo), y_want, y_scale, t, double(KK), wrel);
  layer.forward(xd.data(), yd.data(), B, H, W, nullptr, &st);
  EXPECT_EQ(layer.last_origin(), "memory");  // the plan cache: nothing compiled or loaded again

  DWConvStrides bst;
  bst.x = arr(xst), bst.dout = arr(yst), bst.out = arr(xst);
  DWConvGradients gr;
  gr.dw = static_cast<float*>(dwd.data());
  gr.dbias = q.bias ? static_cast<float*>(dbd.data()) : nullptr;
  std::vector<float> first_dw;
  for (int run = 0; run < 2; ++run) {
    dxd.fill_u32(0xffffffffu), dwd.fill_u32(0xffffffffu), dbd.fill_u32(0xffffffffu);
    layer.backward(xd.data(), dyd.data(), dxd.data(), gr, B, H, W, nullptr, &bst);
    synchronize();
    std::vector<float> dwv(C * KK), dbv(C);
    dwd.download(dwv.data(), dwv.size() * 4);
    dbd.download(dbv.data(), dbv.size() * 4);
    if (run == 0) {
      expect_close("dx", download(dxd, t, xst, B, C, H, W), dx_want, dx_scale, t, double(KK), wrel);
      expect_close("dw", dwv, dw_want, dw_scale, DType::kF32, double(B) * Ho * Wo);
      if (q.bias) expect_close("dbias", dbv, db_want, db_scale, DType::kF32, double(B) * Ho * Wo);
      first_dw = dwv;
    } else {
      EXPECT_EQ(std::memcmp(first_dw.data(), dwv.data(), dwv.size() * 4), 0) << "dw is not bit-identical across calls";
    }
  }
  // dx alone leaves dw untouched; dw alone leaves dx untouched.
  dwd.fill_u32(0xffffffffu), dxd.fill_u32(0xffffffffu);
  layer.backward(xd.data(), dyd.data(), dxd.data(), DWConvGradients{}, B, H, W, nullptr, &bst);
  synchronize();
  expect_close("dx alone", download(dxd, t, xst, B, C, H, W), dx_want, dx_scale, t, double(KK), wrel);
  std::vector<float> untouched(C * KK);
  dwd.download(untouched.data(), untouched.size() * 4);
  for (float v : untouched) ASSERT_TRUE(std::isnan(v)) << "dw written by a dx-only backward";
  dxd.fill_u32(0xffffffffu);
  layer.backward(xd.data(), dyd.data(), nullptr, gr, B, H, W, nullptr, &bst);
  synchronize();
  std::vector<float> dwv(C * KK);
  dwd.download(dwv.data(), dwv.size() * 4);
  EXPECT_EQ(std::memcmp(first_dw.data(), dwv.data(), dwv.size() * 4), 0) << "dw alone differs from dw with dx";
  for (float v : download(dxd, t, xst, B, C, H, W)) ASSERT_TRUE(std::isnan(v)) << "dx written by a dw-only backward";
  EXPECT_GT(layer.workspace_bytes(), 0u);
}

std::string layer_case_name(const ::testing::TestParamInfo<LayerCase>& info) {
  const auto& c = info.param;
  const char* path = to_string(c.path);
  return dwconv_problem_name(dwconv_problems()[c.problem], c.dtype, c.layout) + "_" + path;
}
INSTANTIATE_TEST_SUITE_P(Problems, DWConvLayerGpu, ::testing::ValuesIn(layer_cases()), layer_case_name);

// Tune mode on a miss: the first call times the pass's candidates through the family's harness, records the
// decisions (a private database), and the tuned tiles give the reference's answer.
class DWConvTuneGpu : public GpuTest {};

TEST_F(DWConvTuneGpu, TuneOnMissRecordsAndRunsTheTunedTiles) {
  const std::string db = ::testing::TempDir() + "/lkjit_dwconv_tuning.json";
  std::remove(db.c_str());
  DWConvOptions o;
  o.C = 24, o.kh = 5, o.kw = 5, o.pad_h = 2, o.pad_w = 2;
  const int64_t B = 2, H = 20, W = 18;
  TuneOptions to;
  to.mode = TuneMode::kTune;
  to.budget_s = 2;
  to.db_path = db;
  DepthwiseConv layer(o);
  layer.set_tune_options(to);
  const auto x = randn(B * o.C * H * W, DType::kF32, 5);
  auto w = randn(o.C * 25, DType::kF32, 6);
  const auto bias = randn(o.C, DType::kF32, 7);
  DeviceBuffer xd(x.size() * 4), wd(w.size() * 4), bd(bias.size() * 4), yd = poisoned(x.size() * 4);
  xd.upload(x.data(), x.size() * 4), wd.upload(w.data(), w.size() * 4), bd.upload(bias.data(), bias.size() * 4);
  layer.set_weights(static_cast<const float*>(wd.data()), static_cast<const float*>(bd.data()));
  layer.forward(xd.data(), yd.data(), B, H, W);
  synchronize();
  const auto plan = layer.plan(B, H, W);
  EXPECT_EQ(plan.at(0).tier, LookupTier::kExact) << "the decision was not recorded";
  ref::DWConvArgs a;
  a.kh = a.kw = 5, a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 2;
  const ref::DWConvShape sh{B, o.C, H, W};
  expect_close("y (tuned)", download(yd, DType::kF32, {o.C * H * W, H * W, W, 1}, B, o.C, H, W),
               ref::dwconv_forward(as_double(x), sh, as_double(w), as_double(bias), a),
               ref::dwconv_forward(as_double(x, true), sh, as_double(w, true), as_double(bias, true), a), DType::kF32, 25);
  std::remove(db.c_str());
}

// Tune mode on a path miss: a kAuto layer times every path that runs the call (bf16 k15 on channels_last: mma,
// direct and nhwc), each with its tiles tuned, records the fastest, runs it correctly, and a fresh layer in cached
// mode takes the recorded path. Forward and backward are separate decisions.
TEST_F(DWConvTuneGpu, TuneModeChoosesAPathRecordsItAndRunsIt) {
  const std::string db = ::testing::TempDir() + "/lkjit_dwconv_paths.json";
  std::remove(db.c_str());
  DWConvOptions o;
  o.C = 32, o.kh = o.kw = 15, o.same = true, o.dtype = DType::kBF16, o.layout = Layout::kNHWC;
  const int64_t B = 2, H = 20, W = 21, C = o.C, KK = 225;
  const auto paths = dwconv_pass_paths(o, B, H, W, device_info().limits, false, Layout::kNHWC);
  ASSERT_EQ(paths.options.size(), 3u) << paths.key;
  TuneOptions to;
  to.mode = TuneMode::kTune;
  to.budget_s = 1;
  to.db_path = db;
  const auto x = randn(B * C * H * W, o.dtype, 31), dy = randn(B * C * H * W, o.dtype, 32);
  auto w = randn(C * KK, DType::kF32, 33);
  for (float& e : w) e /= 15.0f;
  const auto bias = randn(C, DType::kF32, 34);
  const auto st = dwconv_strides(DWConvLayout::kNHWC, C, H, W);
  DeviceBuffer xd = upload(x, o.dtype, st, B, C, H, W), dyd = upload(dy, o.dtype, st, B, C, H, W);
  DeviceBuffer wd(w.size() * 4), bd(bias.size() * 4);
  wd.upload(w.data(), w.size() * 4), bd.upload(bias.data(), bias.size() * 4);
  const size_t bytes = extent(st, B, C, H, W) * 2;
  DeviceBuffer yd = poisoned(bytes), dxd = poisoned(bytes), dwd = poisoned(C * KK * 4), dbd = poisoned(C * 4);
  ref::DWConvArgs a;
  a.kh = a.kw = 15, a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = 7;
  const ref::DWConvShape sh{B, C, H, W};
  auto wrel = [](const PathChoice& c) { return c.path.id == int(DWConvPath::kMma) ? std::ldexp(1.0, -17) : 0.0; };

  DepthwiseConv layer(o);
  layer.set_tune_options(to);
  layer.set_weights(static_cast<const float*>(wd.data()), static_cast<const float*>(bd.data()));
  layer.forward(xd.data(), yd.data(), B, H, W);
  synchronize();
  const PathChoice fwd = layer.last_path();
  EXPECT_EQ(fwd.tier, LookupTier::kTuned) << fwd.detail;
  expect_close("y (tuned path " + fwd.path.name + ")", download(yd, o.dtype, st, B, C, H, W),
               ref::dwconv_forward(as_double(x), sh, as_double(w), as_double(bias), a),
               ref::dwconv_forward(as_double(x, true), sh, as_double(w, true), as_double(bias, true), a), o.dtype,
               double(KK), wrel(fwd));
  DWConvGradients gr;
  gr.dw = static_cast<float*>(dwd.data()), gr.dbias = static_cast<float*>(dbd.data());
  layer.backward(xd.data(), dyd.data(), dxd.data(), gr, B, H, W);
  synchronize();
  const PathChoice bwd = layer.last_path();
  EXPECT_EQ(bwd.tier, LookupTier::kTuned) << bwd.detail;
  expect_close("dx (tuned path " + bwd.path.name + ")", download(dxd, o.dtype, st, B, C, H, W),
               ref::dwconv_dgrad(as_double(dy), sh, as_double(w), a),
               ref::dwconv_dgrad(as_double(dy, true), sh, as_double(w, true), a), o.dtype, double(KK), wrel(bwd));
  std::vector<float> dwv(C * KK);
  dwd.download(dwv.data(), dwv.size() * 4);
  expect_close("dw (tuned path " + bwd.path.name + ")", dwv, ref::dwconv_wgrad(as_double(x), sh, as_double(dy), a),
               ref::dwconv_wgrad(as_double(x, true), sh, as_double(dy, true), a), DType::kF32, double(B) * H * W);

  // A fresh layer reads both decisions back.
  TuneOptions cached = to;
  cached.mode = TuneMode::kCached;
  DepthwiseConv again(o);
  again.set_tune_options(cached);
  again.set_weights(static_cast<const float*>(wd.data()), static_cast<const float*>(bd.data()));
  again.forward(xd.data(), yd.data(), B, H, W);
  EXPECT_EQ(again.last_path().tier, LookupTier::kExact) << again.last_path().detail;
  EXPECT_EQ(again.last_path().path.id, fwd.path.id);
  again.backward(xd.data(), dyd.data(), dxd.data(), gr, B, H, W);
  synchronize();
  EXPECT_EQ(again.last_path().tier, LookupTier::kExact);
  EXPECT_EQ(again.last_path().path.id, bwd.path.id);
  // Mode off and a pinned path ignore the record.
  TuneOptions off = to;
  off.mode = TuneMode::kOff;
  DepthwiseConv pinned(o);
  pinned.set_tune_options(off);
  pinned.set_weights(static_cast<const float*>(wd.data()), static_cast<const float*>(bd.data()));
  pinned.forward(xd.data(), yd.data(), B, H, W);
  EXPECT_EQ(pinned.last_path().tier, LookupTier::kDefault);
  EXPECT_EQ(pinned.last_path().path.id, paths.options[0].id);
  pinned.set_path(DWConvPath::kDirect);
  pinned.forward(xd.data(), yd.data(), B, H, W);
  synchronize();
  EXPECT_EQ(pinned.last_path().tier, LookupTier::kOverride);
  std::remove(db.c_str());
}

}  // namespace
