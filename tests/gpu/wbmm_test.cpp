// WBMM on the GPU through the layer (lkjit::WBMM): every correctness problem (tests/gpu/wbmm_problems.h: windows
// 1, 7, 14, 16 and rectangular, padded maps, batch 1, dense, deploy form, bias, NCHW and NHWC) in every precision
// against the float64 reference, forward and both backward paths, with NaN-poisoned outputs and gradients; an
// error bound per element from the reference on |x|, |weights|, |dY| (so that a dropped term or a wrong tap
// fails and rounding passes); the weight gradients bit-identical across runs; strided (padded) tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "lkjit/generator.h"
#include "lkjit/numeric.h"
#include "lkjit/wbmm.h"
#include "lkjit/wbmm_reference.h"
#include "tests/gpu/gpu_fixture.h"
#include "tests/gpu/wbmm_problems.h"

namespace {

using namespace lkjit;  // NOLINT
using lkjit::testing::WBMMPrecision;
using lkjit::testing::WBMMProblem;

struct Param {
  WBMMProblem p;
  WBMMPrecision q;
};

std::vector<Param> params() {
  std::vector<Param> v;
  for (const auto& p : lkjit::testing::wbmm_problems())
    for (const auto& q : lkjit::testing::wbmm_precisions()) v.push_back({p, q});
  return v;
}

// Relative error allowed against the bound S = the reference on absolute values (sum of |terms|).
double tolerance(const WBMMPrecision& q) {
  if (q.dtype == DType::kBF16) return 1.2e-2;
  if (q.dtype == DType::kF16) return 2e-3;
  return q.tf32 ? 2e-3 : 2e-5;  // TF32 products, or fp32-accurate (FFMA or 3xTF32)
}

std::vector<double> abs_of(std::vector<double> v) {
  for (auto& e : v) e = std::abs(e);
  return v;
}

// Host data of one problem, in the dtype's values (rounded as the GPU reads them).
struct Data {
  ref::WBMMShape s;
  ref::WBMMWeights w;
  std::vector<double> x, dy;
  std::array<int64_t, 4> st{};  // element strides of the activations
  int64_t span = 0;             // elements the strided buffers hold
};

Data make(const WBMMProblem& p, DType dt, unsigned seed) {
  Data d;
  d.s = {p.B, p.C, p.H, p.W};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::normal_distribution<double> nd(0.0, 1.0);
  const int dd = p.wh * p.ww, K = (2 * p.wh - 1) * (2 * p.ww - 1);
  d.w.C = int(p.C), d.w.wh = p.wh, d.w.ww = p.ww, d.w.dense = p.mode == 1, d.w.identity = p.identity != 0;
  // Weights of scale 1/sqrt(d): the product term moves the output by O(1), as the identity and bias do.
  const double sc = 1.0 / std::sqrt(double(dd));
  if (d.w.dense) {
    d.w.M.resize(size_t(p.C) * dd * dd);
    for (auto& v : d.w.M) v = double(float(nd(rng) * sc));
  } else {
    d.w.R.resize(size_t(p.C) * K);
    for (auto& v : d.w.R) v = double(float(nd(rng) * sc));
  }
  if (p.bias) {
    d.w.bias.resize(size_t(p.C));
    for (auto& v : d.w.bias) v = double(float(u(rng)));
  }
  d.x.resize(size_t(d.s.numel()));
  d.dy.resize(d.x.size());
  for (auto& v : d.x) v = round_to(dt, float(u(rng)));
  for (auto& v : d.dy) v = round_to(dt, float(u(rng)));
  // NHWC problems: channels_last; NCHW problems: rows padded by 3 elements (a non-dense, strided tensor).
  if (p.layout)
    d.st = {p.H * p.W * p.C, 1, p.W * p.C, p.C};
  else
    d.st = {p.C * p.H * (p.W + 3), p.H * (p.W + 3), p.W + 3, 1};
  d.span = p.B * d.st[0];
  return d;
}

std::vector<uint8_t> to_device_order(DType dt, const std::vector<double>& v, const Data& d) {
  std::vector<float> mem(size_t(d.span), 0.f);
  for (int64_t b = 0; b < d.s.B; ++b)
    for (int64_t c = 0; c < d.s.C; ++c)
      for (int64_t y = 0; y < d.s.H; ++y)
        for (int64_t x = 0; x < d.s.W; ++x)
          mem[size_t(b * d.st[0] + c * d.st[1] + y * d.st[2] + x * d.st[3])] =
              float(v[size_t(((b * d.s.C + c) * d.s.H + y) * d.s.W + x)]);
  return encode(dt, mem);
}

// Counts elements outside |got - want| <= tol * (1 + bound); NaN counts as bad.
template <class Get>
int64_t count_bad(const std::vector<double>& want, const std::vector<double>& bound, double tol, Get got,
                  std::string* first) {
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double g = got(i);
    if (!(std::abs(g - want[i]) <= tol * (1 + bound[i]))) {
      if (!bad && first) *first = "at " + std::to_string(i) + ": got " + std::to_string(g) + ", want " + std::to_string(want[i]);
      ++bad;
    }
  }
  return bad;
}

// Tile axes set on top of the planned tile or its wgmma form (0: that tile's own value), for the wgmma and
// K-tiling sweeps; kchunk (K-tiling) applies to the forward and dgrad kernels only.
struct Variant {
  int wn = 0, mt = 0, split = 0, cpb = 0, stages = 0, kchunk = 0, chunk = 0, fold = 0;
};
Tile with(Tile t, const Variant& v) {
  for (auto [axis, value] : {std::pair<const char*, int>{"wn", v.wn}, {"mt", v.mt}, {"split", v.split}, {"cpb", v.cpb},
                             {"stages", v.stages}, {"kchunk", v.kchunk}, {"chunk", v.chunk}, {"fold", v.fold}})
    if (value) t.set(axis, value);
  return t;
}

// Problems run the engine the precision names where the planned tile with that engine is a point of its
// space (f32: FFMA or tensor cores; 16-bit: mma.sync, or wgmma in its form, fwd / dgrad on sm_90a); elsewhere the
// planner's choice stands. A K-tiling variant is set on the fwd / dgrad tiles. Returns how many kernels were
// switched; *ktiled counts the K-tiled ones.
int force_engine(WBMM& layer, const WBMMProblem& p, bool backward, const WBMMPrecision& q, const Variant& v = {},
                 int* ktiled = nullptr) {
  int n = 0;
  for (const auto& pk : layer.plan(p.B, p.H, p.W, backward)) {
    const std::string k = pk.spec.kernel.name();
    const bool ktile = v.kchunk && (k == "wbmm_fwd" || k == "wbmm_dgrad");
    // (wgmma tiles are set even where the default already is one: the sweep's variants apply to it.)
    if (k == "wbmm_reduce" || (pk.tile.get("engine") == q.engine && q.engine != 2 && !ktile)) continue;
    std::vector<Tile> ts;
    if (q.engine == 2) {
      for (const auto& f : lkjit::testing::wgmma_forms(pk.tile)) ts.push_back(with(f, v));
    } else if (ktile) {  // two buffers of M_c's chunks may outgrow shared memory
      ts = lkjit::testing::with_fewer_channels(with(Tile(pk.tile).set("engine", q.engine), v));
    } else {
      ts.push_back(Tile(pk.tile).set("engine", q.engine));
    }
    for (const auto& t : ts)
      if (in_space(pk.spec, t, DeviceLimits::for_arch(pk.spec.arch), &pk.shape)) {
        layer.set_tile_override(pk.spec.kernel, t), ++n;
        if (ktiled && ktile) ++*ktiled;
        break;
      }
  }
  return n;
}

// One problem in one precision (and, for wgmma, tile variant): forward and both backward paths against the
// reference.
void check_problem(const WBMMProblem& p, const WBMMPrecision& q, const Variant& v = {}) {
  const DType dt = q.dtype;
  const Data d = make(p, dt, unsigned(p.B * 1000 + p.C * 100 + p.H * 10 + p.W + int(dt)));
  WBMMOptions o;
  o.C = p.C, o.wh = p.wh, o.ww = p.ww, o.mode = p.mode ? WBMMMode::kDense : WBMMMode::kTable, o.dtype = dt;
  o.identity = p.identity != 0, o.bias = p.bias != 0, o.allow_tf32 = q.tf32 != 0;
  o.layout = p.layout ? Layout::kNHWC : Layout::kNCHW;
  // The f32 engine: FFMA (engine 0) or tensor cores (3xTF32, or TF32 with allow_tf32); the planner's choice
  // is overridden where the problem asks for the other one.
  WBMM layer(o);
  const auto xb = to_device_order(dt, d.x, d), gb = to_device_order(dt, d.dy, d);
  DeviceBuffer dx_in(xb.size()), dg_in(gb.size()), dout(xb.size()), ddx(xb.size());
  dx_in.upload(xb.data(), xb.size());
  dg_in.upload(gb.data(), gb.size());
  const auto& wv = p.mode ? d.w.M : d.w.R;
  std::vector<float> wf(wv.begin(), wv.end()), bf(d.w.bias.begin(), d.w.bias.end());
  DeviceBuffer dw(wf.size() * 4), dbias(std::max<size_t>(bf.size(), 1) * 4), dgw(wf.size() * 4), dgb(dbias.bytes());
  dw.upload(wf.data(), wf.size() * 4);
  if (!bf.empty()) dbias.upload(bf.data(), bf.size() * 4);
  WBMMWeights w;
  (p.mode ? w.M : w.R) = static_cast<const float*>(dw.data());
  if (p.bias) w.bias = static_cast<const float*>(dbias.data());
  layer.set_weights(w);
  int ktiled = 0;
  if (force_engine(layer, p, false, q, v, &ktiled) == 0 && q.engine == 2) {
    const OpSpec fwd = layer.plan(p.B, p.H, p.W).front().spec;
    if (!fwd.arch_specific) GTEST_SKIP() << "wgmma runs on sm_90a; this device's forward kernel is for " << fwd.target();
    FAIL() << "the wgmma tile is not a point of the forward's space";
  }
  if (v.kchunk && ktiled == 0) FAIL() << "the K-tiled tile (kchunk=" << v.kchunk << ") is not a point of the forward's space";
  WBMMStrides st;
  st.x = st.dout = st.out = d.st;

  // Forward.
  dout.fill_u32(0xffffffffu);  // NaN in every dtype
  layer.forward(dx_in.data(), dout.data(), p.B, p.H, p.W, nullptr, &st);
  synchronize();
  std::vector<uint8_t> ob(xb.size());
  dout.download(ob.data(), ob.size());
  const auto want = ref::wbmm_forward(d.x, d.s, d.w, ref::WBMMForm::kDirect);
  ref::WBMMWeights aw = d.w;
  aw.R = abs_of(aw.R), aw.M = abs_of(aw.M), aw.bias = abs_of(aw.bias);
  const auto bound = ref::wbmm_forward(abs_of(d.x), d.s, aw, ref::WBMMForm::kDirect);
  auto at = [&](size_t i) {
    const int64_t x = int64_t(i) % p.W, y = int64_t(i) / p.W % p.H, c = int64_t(i) / (p.W * p.H) % p.C, b = int64_t(i) / (p.W * p.H * p.C);
    return size_t(b * d.st[0] + c * d.st[1] + y * d.st[2] + x * d.st[3]);
  };
  std::string first;
  EXPECT_EQ(count_bad(want, bound, tolerance(q), [&](size_t i) { return double(decode_one(dt, ob.data(), at(i))); }, &first), 0)
      << "forward " << first;

  // Backward, both paths; the weight gradients bit-identical run to run and path to path.
  const auto gref = ref::wbmm_backward(d.x, d.s, d.w, d.dy, ref::WBMMForm::kDirect);
  const auto gbound = ref::wbmm_backward(abs_of(d.x), d.s, aw, abs_of(d.dy), ref::WBMMForm::kDirect);
  std::vector<float> first_gw;
  for (auto path : {WBMMBackward::kFused, WBMMBackward::kSplit}) {
    SCOPED_TRACE(path == WBMMBackward::kFused ? "fused" : "split");
    layer.set_backward_path(path);
    layer.clear_tile_overrides();  // a fused wgrad's tile is no split wgrad's (wm, wn)
    ktiled = 0;
    force_engine(layer, p, true, q, v, &ktiled);  // wgmma, K-tiling: the split path's dgrad
    if (v.kchunk && path == WBMMBackward::kSplit && ktiled == 0) FAIL() << "the K-tiled tile is not a point of the dgrad's space";
    for (int rep = 0; rep < 2; ++rep) {
      ddx.fill_u32(0xffffffffu);
      dgw.fill_u32(0xffffffffu);
      dgb.fill_u32(0xffffffffu);
      WBMMGradients g;
      (p.mode ? g.M : g.R) = static_cast<float*>(dgw.data());
      if (p.bias) g.bias = static_cast<float*>(dgb.data());
      layer.backward(dx_in.data(), dg_in.data(), ddx.data(), g, p.B, p.H, p.W, nullptr, &st);
      synchronize();
      std::vector<uint8_t> gxb(xb.size());
      ddx.download(gxb.data(), gxb.size());
      std::vector<float> gw(wf.size()), gbias(bf.size());
      dgw.download(gw.data(), gw.size() * 4);
      if (!bf.empty()) dgb.download(gbias.data(), gbias.size() * 4);
      EXPECT_EQ(count_bad(gref.dx, gbound.dx, tolerance(q), [&](size_t i) { return double(decode_one(dt, gxb.data(), at(i))); }, &first), 0)
          << "dx " << first;
      const auto& wref = p.mode ? gref.dM : gref.dR;
      const auto& wbnd = p.mode ? gbound.dM : gbound.dR;
      EXPECT_EQ(count_bad(wref, wbnd, tolerance(q), [&](size_t i) { return double(gw[i]); }, &first), 0) << "dweight " << first;
      if (p.bias)
        EXPECT_EQ(count_bad(gref.dbias, gbound.dbias, tolerance(q), [&](size_t i) { return double(gbias[i]); }, &first), 0)
            << "dbias " << first;
      if (first_gw.empty())
        first_gw = gw;
      else if (rep == 1)  // determinism: the same reduction order every run
        EXPECT_EQ(0, std::memcmp(first_gw.data(), gw.data(), gw.size() * 4)) << "dweight differs between runs";
    }
    first_gw.clear();
  }
}

class WBMMGpu : public lkjit::testing::GpuTestP<Param> {};

TEST_P(WBMMGpu, ForwardAndBackwardMatchTheReference) { check_problem(GetParam().p, GetParam().q); }

INSTANTIATE_TEST_SUITE_P(Problems, WBMMGpu, ::testing::ValuesIn(params()), [](const auto& info) {
  return lkjit::testing::wbmm_problem_name(info.param.p, info.param.q);
});

// The wgmma engine's tile space: N per warpgroup from 8 to 256 columns (products of 8-64 issued together),
// two m64 tiles, column splits, several channels a block (warpgroups of different channels), one stage;
// on windows 7x7 (NCHW, padded), 14x14 (NHWC, dense) and 5x6.
struct WgmmaCase {
  WBMMProblem p;
  DType dt;
  Variant v;
};
std::vector<WgmmaCase> wgmma_cases() {
  const WBMMProblem w7{2, 3, 16, 19, 7, 7, 0, 1, 1, 0}, w14{1, 2, 30, 29, 14, 14, 1, 1, 0, 1}, w56{2, 3, 23, 22, 5, 6, 1, 1, 1, 0};
  const WBMMProblem w16{1, 2, 33, 17, 16, 16, 0, 1, 0, 0};
  return {{w7, DType::kBF16, {1, 2, 1, 1, 2}}, {w7, DType::kF16, {2, 1, 2, 2, 1}}, {w7, DType::kBF16, {4, 1, 1, 2, 2}},
          {w14, DType::kBF16, {1, 1, 1, 1, 2}}, {w14, DType::kF16, {2, 1, 2, 2, 2}}, {w14, DType::kBF16, {7, 2, 1, 1, 1}},
          {w56, DType::kF16, {1, 2, 1, 2, 2}}, {w56, DType::kBF16, {2, 1, 2, 1, 1}}, {w16, DType::kBF16, {1, 1, 1, 1, 2}},
          {w16, DType::kF16, {4, 1, 2, 1, 2}}};
}
class WBMMWgmmaTiles : public lkjit::testing::GpuTestP<WgmmaCase> {};
TEST_P(WBMMWgmmaTiles, MatchTheReference) {
  const auto& c = GetParam();
  check_problem(c.p, WBMMPrecision{c.dt, 0, 2}, c.v);
}
INSTANTIATE_TEST_SUITE_P(Tiles, WBMMWgmmaTiles, ::testing::ValuesIn(wgmma_cases()), [](const auto& info) {
  const auto& v = info.param.v;
  return lkjit::testing::wbmm_problem_name(info.param.p, WBMMPrecision{info.param.dt, 0, 2}) + "_wn" + std::to_string(v.wn) +
         "_mt" + std::to_string(v.mt) + "_s" + std::to_string(v.split) + "_c" + std::to_string(v.cpb) + "_st" +
         std::to_string(v.stages);
});

// K-tiling (kchunk): M_c's rows streamed in chunks through two buffers, fwd and dgrad, every precision; chunk
// counts odd and even with a shorter last chunk (dp = 208: 13, 7, 4 chunks; dp = 256: 16, 8, 4; 9x9: dp = 96),
// blocks walking two tiles (chunk = 2: the buffers' parity carries across tiles), a column split on top (j0 > 0),
// 4 warps along the columns, dense fp32 16x16 without a column split (too large for shared memory whole), the
// identity folded into the streamed diagonal, one stage, two channels a block, NHWC.
struct KTileCase {
  WBMMProblem p;
  WBMMPrecision q;
  Variant v;
};
std::vector<KTileCase> ktile_cases() {
  const WBMMProblem big14{2, 2, 112, 98, 14, 14, 0, 1, 1, 0}, d14{1, 2, 30, 29, 14, 14, 1, 1, 0, 1};
  const WBMMProblem t16{1, 2, 33, 17, 16, 16, 0, 1, 0, 0}, d16{1, 2, 20, 16, 16, 16, 1, 1, 1, 1}, w9{2, 3, 19, 20, 9, 9, 0, 0, 1, 0};
  const WBMMPrecision bf{DType::kBF16, 0, 1}, f16{DType::kF16, 0, 1}, ffma{DType::kF32, 0, 0}, x3{DType::kF32, 0, 1},
      tf{DType::kF32, 1, 1};
  auto kv = [](int kchunk, int split, int chunk, int stages = 0, int cpb = 0, int fold = 0) {
    Variant v;
    v.kchunk = kchunk, v.split = split, v.chunk = chunk, v.stages = stages, v.cpb = cpb, v.fold = fold;
    return v;
  };
  auto wn4 = [](Variant v) {
    v.wn = 4;
    return v;
  };
  return {{big14, bf, kv(32, 1, 2)},        {big14, ffma, kv(16, 1, 2)},        {big14, x3, kv(64, 1, 2)},
          {big14, ffma, kv(32, 1, 2, 1, 0, 1)}, {d14, f16, kv(64, 1, 1)},       {d14, tf, kv(32, 1, 1)},
          {d16, ffma, kv(32, 1, 1)},        {d16, x3, kv(32, 1, 1, 0, 0, 1)},   {t16, bf, kv(16, 1, 1, 1)},
          {w9, bf, kv(32, 1, 1, 0, 2)},     {w9, ffma, kv(16, 1, 1)},           {big14, bf, kv(32, 2, 2)},
          {big14, x3, wn4(kv(32, 1, 2))}};
}
class WBMMKTiles : public lkjit::testing::GpuTestP<KTileCase> {};
TEST_P(WBMMKTiles, MatchTheReference) { check_problem(GetParam().p, GetParam().q, GetParam().v); }
INSTANTIATE_TEST_SUITE_P(Tiles, WBMMKTiles, ::testing::ValuesIn(ktile_cases()), [](const auto& info) {
  const auto& v = info.param.v;
  return lkjit::testing::wbmm_problem_name(info.param.p, info.param.q) + "_kt" + std::to_string(v.kchunk) + "_ch" +
         std::to_string(v.chunk) + (v.split == 2 ? "_s2" : "") + (v.wn ? "_wn" + std::to_string(v.wn) : "") +
         (v.stages == 1 ? "_st1" : "") + (v.cpb ? "_c" + std::to_string(v.cpb) : "") +
         (v.fold == 1 ? "_fold" : "");
});

// A backward without dX runs the wgrad alone and writes the same weight gradients.
TEST(WBMMGpuOnce, BackwardWithoutDxWritesTheSameGradients) {
  std::string why;
  if (!gpu_available(&why)) GTEST_SKIP() << "no GPU: " << why;
  const WBMMProblem p{2, 6, 20, 23, 7, 7, 0, 1, 1, 0};
  const Data d = make(p, DType::kBF16, 5);
  WBMMOptions o;
  o.C = p.C, o.dtype = DType::kBF16, o.bias = true;
  WBMM layer(o);
  const auto xb = to_device_order(DType::kBF16, d.x, d), gb = to_device_order(DType::kBF16, d.dy, d);
  DeviceBuffer dx_in(xb.size()), dg_in(gb.size()), ddx(xb.size());
  dx_in.upload(xb.data(), xb.size());
  dg_in.upload(gb.data(), gb.size());
  std::vector<float> wf(d.w.R.begin(), d.w.R.end()), bf(d.w.bias.begin(), d.w.bias.end());
  DeviceBuffer dw(wf.size() * 4), db(bf.size() * 4), g1(wf.size() * 4), g2(wf.size() * 4), b1(bf.size() * 4), b2(bf.size() * 4);
  dw.upload(wf.data(), wf.size() * 4);
  db.upload(bf.data(), bf.size() * 4);
  layer.set_weights({static_cast<const float*>(dw.data()), nullptr, static_cast<const float*>(db.data())});
  WBMMStrides st;
  st.x = st.dout = st.out = d.st;
  layer.backward(dx_in.data(), dg_in.data(), ddx.data(), {static_cast<float*>(g1.data()), nullptr, static_cast<float*>(b1.data())},
                 p.B, p.H, p.W, nullptr, &st);
  layer.backward(dx_in.data(), dg_in.data(), nullptr, {static_cast<float*>(g2.data()), nullptr, static_cast<float*>(b2.data())},
                 p.B, p.H, p.W, nullptr, &st);
  synchronize();
  std::vector<float> a(wf.size()), b(wf.size()), ab(bf.size()), bb(bf.size());
  g1.download(a.data(), a.size() * 4);
  g2.download(b.data(), b.size() * 4);
  b1.download(ab.data(), ab.size() * 4);
  b2.download(bb.data(), bb.size() * 4);
  EXPECT_EQ(a, b);
  EXPECT_EQ(ab, bb);
  EXPECT_GT(layer.workspace_bytes(), 0u);
}

}  // namespace
