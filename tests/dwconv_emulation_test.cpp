// The depthwise kernels (templates/dwconv/*.cuh) run on the CPU under the block emulator (tests/emulation/):
// each thread a fiber, __syncthreads a barrier, shared memory NaN-filled, outputs NaN-poisoned; results against
// the float64 reference. Catches what the NVRTC compile and the index-math tests cannot: wrong loops, staging,
// ring stages, windows, channel vectors, partials and reduction, and missing barriers (a thread runs to its next
// barrier before the others start). Not timing, bank conflicts or races between warps. The configurations reach
// every code path: float4 and scalar windows, one- and multi-stage rings, flip and both gather parities, dilated
// output spacing, partial channel vectors, chunked filter rows, tap-row stages; launch geometry and shared memory
// come from the generator-side functions (generator/ops/dwconv_geometry.h), as for a real launch.
#include "tests/emulation/cuda_shim.h"  // first: the templates below compile as host code

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "dwconv/direct.cuh"
#include "dwconv/nhwc.cuh"
#include "dwconv/wgrad_direct.cuh"
#include "dwconv/wgrad_nhwc.cuh"
#include "dwconv/wgrad_reduce.cuh"
#include "generator/ops/dwconv_geometry.h"
#include "lkjit/dwconv_reference.h"
#include "tests/emulation/block_emulator.h"
#include "tests/random_inputs.h"

namespace {

using namespace lkjit;  // NOLINT
namespace gd = lkjit::gen::dwconv;

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::kF32; }
template <> constexpr DType dtype_of<f16>() { return DType::kF16; }
template <> constexpr DType dtype_of<bf16>() { return DType::kBF16; }

template <class T_, int KH, int KW, int S, int D>
struct SpecCfg {
  using T = T_;
  static constexpr int kh = KH, kw = KW, stride = S, dil = D;
};
template <class T_, bool DG, int KH, int KW, int S, int D, int TH, int TW, int RY, int RX, int KC, int NT>
struct DirectCfg : SpecCfg<T_, KH, KW, S, D> {
  static constexpr bool dgrad = DG;
  // The generator emits kc clamped to the pass's sub-filter rows (the gather has about half of kh).
  static constexpr int nay = dwc::AxisMap{!DG ? dwc::kFwd : S == 1 ? dwc::kFlip : dwc::kGather, KH, S, D, 0}.taps();
  static constexpr int tile_h = TH, tile_w = TW, ry = RY, rx = RX, kc = KC < nay ? KC : nay, threads = NT;
};
template <class T_, bool DG, int KH, int KW, int S, int D, int TH, int TW, int RY, int RX, int CL, int CV, int NT>
struct NhwcCfg : SpecCfg<T_, KH, KW, S, D> {
  static constexpr bool dgrad = DG;
  static constexpr int tile_h = TH, tile_w = TW, ry = RY, rx = RX, cl = CL, cv = CV, threads = NT;
};
template <class T_, int KH, int KW, int S, int D, int TH, int TW, int RU, int RV, int KC, int NT>
struct WgradDirectCfg : SpecCfg<T_, KH, KW, S, D> {
  static constexpr int tile_h = TH, tile_w = TW, ru = RU, rv = RV, kc = KC, threads = NT;
};
template <class T_, int KH, int KW, int S, int D, int CL, int CV, int VC, int NT>
struct WgradNhwcCfg : SpecCfg<T_, KH, KW, S, D> {
  static constexpr int cl = CL, cv = CV, vc = VC, threads = NT;
};
struct ReduceCfg {
  static constexpr int threads = 64;
};

// kPadded: NCHW rows W + 3 apart; kNHWCPadC: channels_last with the channel pitch rounded up to 8, so that the
// vector loads of a partial last channel vector would reach into the gap.
enum class Layout { kNCHW, kNHWC, kPadded, kNHWCPadC };
std::vector<int64_t> strides(Layout l, int64_t C, int64_t H, int64_t W) {
  const int64_t Cp = (C + 7) / 8 * 8;
  if (l == Layout::kNHWC) return {H * W * C, 1, W * C, C};
  if (l == Layout::kPadded) return {C * H * (W + 3), H * (W + 3), W + 3, 1};
  if (l == Layout::kNHWCPadC) return {H * W * Cp, 1, W * Cp, Cp};
  return {C * H * W, H * W, W, 1};
}
const char* name(Layout l) {
  return l == Layout::kNCHW ? "NCHW" : l == Layout::kNHWC ? "NHWC" : l == Layout::kPadded ? "padded rows" : "NHWC, padded C";
}

// One problem on the host: inputs (rounded to the dtype), strided copies, the reference and its error scales.
struct Problem {
  int64_t B, C, H, W;
  bool same;
  gd::Padding pad;  // used where !same
  bool bias;
};

template <class T>
struct Host {
  gd::SpecVals spec;
  gd::Problem p;
  ref::DWConvArgs a;
  std::vector<float> x, dy, w, bias;
  std::vector<double> y_ref, y_sc, dx_ref, dx_sc, dw_ref, dw_sc, db_ref, db_sc;
};

using lkjit::test::as_double;
using lkjit::test::randn;

template <class Cfg>
Host<typename Cfg::T> make_host(const Problem& q) {
  using T = typename Cfg::T;
  Host<T> h;
  h.spec = {dtype_of<T>(), Cfg::kh, Cfg::kw, Cfg::stride, Cfg::dil, 90};
  const gd::Padding pad = q.same ? gd::same_padding(h.spec) : q.pad;
  if (auto e = gd::problem_error(h.spec, q.B, q.C, q.H, q.W, pad)) ADD_FAILURE() << *e;
  h.p = gd::make_problem(h.spec, q.B, q.C, q.H, q.W, pad);
  h.a.kh = Cfg::kh, h.a.kw = Cfg::kw, h.a.stride = Cfg::stride, h.a.dil = Cfg::dil;
  h.a.pad_top = pad.top, h.a.pad_bottom = pad.bottom, h.a.pad_left = pad.left, h.a.pad_right = pad.right;
  const DType t = dtype_of<T>();
  const auto& p = h.p;
  h.x = randn(p.B * p.C * p.H * p.W, t, 1);
  h.dy = randn(p.B * p.C * p.Ho * p.Wo, t, 2);
  h.w = randn(p.C * Cfg::kh * Cfg::kw, DType::kF32, 3);
  if (q.bias) h.bias = randn(p.C, DType::kF32, 4);
  const ref::DWConvShape sh{p.B, p.C, p.H, p.W};
  h.y_ref = ref::dwconv_forward(as_double(h.x), sh, as_double(h.w), as_double(h.bias), h.a);
  h.y_sc = ref::dwconv_forward(as_double(h.x, true), sh, as_double(h.w, true), as_double(h.bias, true), h.a);
  h.dx_ref = ref::dwconv_dgrad(as_double(h.dy), sh, as_double(h.w), h.a);
  h.dx_sc = ref::dwconv_dgrad(as_double(h.dy, true), sh, as_double(h.w, true), h.a);
  h.dw_ref = ref::dwconv_wgrad(as_double(h.x), sh, as_double(h.dy), h.a);
  h.dw_sc = ref::dwconv_wgrad(as_double(h.x, true), sh, as_double(h.dy, true), h.a);
  h.db_ref = ref::dwconv_dbias(as_double(h.dy), sh, h.a);
  h.db_sc = ref::dwconv_dbias(as_double(h.dy, true), sh, h.a);
  return h;
}

// A strided tensor of T holding NCHW values (NaN elsewhere), and back.
template <class T>
std::vector<T> to_strided(const std::vector<float>& v, const std::vector<int64_t>& st, int64_t B, int64_t C, int64_t H,
                          int64_t W) {
  std::vector<T> out(size_t((B - 1) * st[0] + (C - 1) * st[1] + (H - 1) * st[2] + (W - 1) * st[3] + 1));
  std::memset(out.data(), 0xff, out.size() * sizeof(T));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j)
          out[b * st[0] + c * st[1] + i * st[2] + j * st[3]] = from_f32<T>(v[((b * C + c) * H + i) * W + j]);
  return out;
}
// The elements of a strided buffer outside the tensor (the gaps) must keep their NaN bytes: no kernel writes there.
template <class T>
void expect_gaps_untouched(const char* what, const std::vector<T>& v, const std::vector<int64_t>& st, int64_t B,
                           int64_t C, int64_t H, int64_t W) {
  std::vector<char> inside(v.size(), 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j) inside[b * st[0] + c * st[1] + i * st[2] + j * st[3]] = 1;
  int written = 0;
  for (size_t e = 0; e < v.size(); ++e) {
    if (inside[e]) continue;
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(&v[e]);
    for (size_t k = 0; k < sizeof(T); ++k) written += bytes[k] != 0xff;
  }
  EXPECT_EQ(written, 0) << what << ": bytes written outside the tensor";
}
template <class T>
std::vector<float> from_strided(const std::vector<T>& v, const std::vector<int64_t>& st, int64_t B, int64_t C, int64_t H,
                                int64_t W) {
  std::vector<float> out(size_t(B * C * H * W));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < H; ++i)
        for (int64_t j = 0; j < W; ++j) out[((b * C + c) * H + i) * W + j] = to_f32(v[b * st[0] + c * st[1] + i * st[2] + j * st[3]]);
  return out;
}

void expect_close(const char* what, const std::vector<float>& got, const std::vector<double>& want,
                  const std::vector<double>& scale, DType out, double terms) {
  ASSERT_EQ(got.size(), want.size());
  const double ulp = out == DType::kF32 ? 0.0 : out == DType::kF16 ? 1.01 / 2048 : 1.01 / 256;
  const double acc = 4.0 * std::ldexp(1.0, -24) * std::sqrt(std::max(1.0, terms));
  int bad = 0;
  std::string first;
  for (size_t i = 0; i < want.size(); ++i) {
    const double tol = ulp * std::fabs(want[i]) + acc * scale[i] + 1e-30;
    if (!(std::fabs(got[i] - want[i]) <= tol) && bad++ == 0)
      first = std::to_string(i) + ": got " + std::to_string(got[i]) + ", want " + std::to_string(want[i]);
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << want.size() << " out of tolerance; first " << first;
}

template <class T>
DWConvParams params(const Host<T>& h, const std::vector<int64_t>& xst, const std::vector<int64_t>& yst) {
  DWConvParams p{};
  for (int i = 0; i < 4; ++i) p.x_st[i] = p.dx_st[i] = xst[i], p.y_st[i] = p.dy_st[i] = yst[i];
  p.w = h.w.data();
  p.bias = h.bias.empty() ? nullptr : h.bias.data();
  p.B = int(h.p.B), p.C = int(h.p.C), p.H = int(h.p.H), p.W = int(h.p.W), p.Ho = int(h.p.Ho), p.Wo = int(h.p.Wo);
  p.ph = h.p.ph, p.pw = h.p.pw, p.taps = int(h.a.kh * h.a.kw);
  return p;
}

constexpr Layout kLayouts[] = {Layout::kNCHW, Layout::kNHWC, Layout::kPadded, Layout::kNHWCPadC};

// Forward and dgrad of a direct or NHWC kernel pair (Fwd, Dgrad Cfgs) on problem q in every layout.
template <class Fwd, class Dgrad, bool kNhwc, class Tile>
void run_pass_pair(const Problem& q, const Tile& tile) {
  using T = typename Fwd::T;
  const auto h = make_host<Fwd>(q);
  const auto& p = h.p;
  for (Layout l : kLayouts) {
    SCOPED_TRACE(name(l));
    const auto xst = strides(l, p.C, p.H, p.W), yst = strides(l, p.C, p.Ho, p.Wo);
    auto x = to_strided<T>(h.x, xst, p.B, p.C, p.H, p.W), dy = to_strided<T>(h.dy, yst, p.B, p.C, p.Ho, p.Wo);
    auto y = to_strided<T>(std::vector<float>(h.y_ref.size(), NAN), yst, p.B, p.C, p.Ho, p.Wo);
    auto dx = to_strided<T>(std::vector<float>(h.dx_ref.size(), NAN), xst, p.B, p.C, p.H, p.W);
    DWConvParams prm = params(h, xst, yst);
    prm.x = x.data(), prm.y = y.data(), prm.dy = dy.data(), prm.dx = dx.data();
    for (gd::Pass pass : {gd::Pass::kForward, gd::Pass::kDgrad}) {
      gd::Launch g;
      if constexpr (kNhwc) {
        g = gd::nhwc_geometry(h.spec, tile, pass, p);
      } else {
        g = gd::direct_geometry(h.spec, tile, pass, p);
      }
      prm.tiles_h = g.tiles_h, prm.tiles_w = g.tiles_w;
      lkjit::emu::run(g.grid, g.block, g.smem_bytes, [&] {
        if (pass == gd::Pass::kForward) {
          if constexpr (kNhwc) dwconv_nhwc<Fwd>(prm);
          else dwconv_direct<Fwd>(prm);
        } else {
          if constexpr (kNhwc) dwconv_nhwc<Dgrad>(prm);
          else dwconv_direct<Dgrad>(prm);
        }
      });
      if (pass == gd::Pass::kForward) {
        expect_close("y", from_strided(y, yst, p.B, p.C, p.Ho, p.Wo), h.y_ref, h.y_sc, dtype_of<T>(), Fwd::kh * Fwd::kw);
        expect_gaps_untouched("y", y, yst, p.B, p.C, p.Ho, p.Wo);
      } else {
        expect_close("dx", from_strided(dx, xst, p.B, p.C, p.H, p.W), h.dx_ref, h.dx_sc, dtype_of<T>(), Fwd::kh * Fwd::kw);
        expect_gaps_untouched("dx", dx, xst, p.B, p.C, p.H, p.W);
      }
    }
  }
}

template <class Cfg, bool kNhwc, class Tile>
void run_wgrad(const Problem& q, const Tile& tile) {
  using T = typename Cfg::T;
  const auto h = make_host<Cfg>(q);
  const auto& p = h.p;
  for (Layout l : kLayouts) {
    SCOPED_TRACE(name(l));
    const auto xst = strides(l, p.C, p.H, p.W), yst = strides(l, p.C, p.Ho, p.Wo);
    auto x = to_strided<T>(h.x, xst, p.B, p.C, p.H, p.W), dy = to_strided<T>(h.dy, yst, p.B, p.C, p.Ho, p.Wo);
    DWConvParams prm = params(h, xst, yst);
    prm.x = x.data(), prm.dy = dy.data();
    gd::Launch g;
    if constexpr (kNhwc) g = gd::wgrad_nhwc_geometry(h.spec, tile, p);
    else g = gd::wgrad_direct_geometry(h.spec, tile, p);
    // Three chunks (the generator picks up to ~1024 blocks' worth): several units a chunk and several chunks to
    // reduce, at an emulator's pace.
    g.chunks = std::min(g.chunks, 3);
    if constexpr (kNhwc) g.grid = unsigned((p.C + tile.lanes * tile.vec - 1) / (tile.lanes * tile.vec) * g.chunks);
    else g.grid = unsigned(p.C * g.chunks);
    const dwc::PartStrides st = kNhwc ? gd::wgrad_nhwc_part_strides(h.spec, p, g.chunks)
                                      : gd::wgrad_direct_part_strides(h.spec, p, g.chunks);
    std::vector<float> part(size_t(dwc::part_floats(int(p.C), g.chunks, int(Cfg::kh * Cfg::kw))), NAN);
    std::vector<float> dw(size_t(p.C * Cfg::kh * Cfg::kw), NAN), db(size_t(p.C), NAN);
    prm.tiles_h = g.tiles_h, prm.tiles_w = g.tiles_w, prm.chunks = g.chunks;
    for (int i = 0; i < 3; ++i) prm.part_st[i] = st.st[i];
    prm.partial = part.data(), prm.dw = dw.data(), prm.dbias = q.bias ? db.data() : nullptr;
    lkjit::emu::run(g.grid, g.block, g.smem_bytes, [&] {
      if constexpr (kNhwc) dwconv_wgrad_nhwc<Cfg>(prm);
      else dwconv_wgrad_direct<Cfg>(prm);
    });
    const auto rg = gd::wgrad_reduce_geometry(h.spec, gd::ReduceTile{ReduceCfg::threads}, p);
    lkjit::emu::run(rg.grid, rg.block, 0, [&] { dwconv_wgrad_reduce<ReduceCfg>(prm); });
    const double terms = double(p.B) * p.Ho * p.Wo;
    expect_close("dw", dw, h.dw_ref, h.dw_sc, DType::kF32, terms);
    if (q.bias) expect_close("dbias", db, h.db_ref, h.db_sc, DType::kF32, terms);
  }
}

// The tile structs the generator would derive these Cfgs from (for the geometry).
template <class Cfg>
gd::DirectTile direct_tile() {
  return {Cfg::tile_h, Cfg::tile_w, Cfg::ry, Cfg::rx, Cfg::kc, Cfg::threads, 0};
}
template <class Cfg>
gd::NhwcTile nhwc_tile() {
  return {Cfg::tile_h, Cfg::tile_w, Cfg::ry, Cfg::rx, Cfg::cl, Cfg::cv, Cfg::threads, 0};
}

#define LKJIT_DIRECT_PAIR(NAME, T, KH, KW, S, D, TH, TW, RY, RX, KC, NT, ...)                          \
  TEST(DWConvEmulation, NAME) {                                                                          \
    using F = DirectCfg<T, false, KH, KW, S, D, TH, TW, RY, RX, KC, NT>;                                \
    using G = DirectCfg<T, true, KH, KW, S, D, TH, TW, RY, RX, KC, NT>;                                 \
    for (const Problem& q : std::vector<Problem>{__VA_ARGS__}) {                                        \
      SCOPED_TRACE("B=" + std::to_string(q.B) + " C=" + std::to_string(q.C) + " H=" + std::to_string(q.H) + \
                   " W=" + std::to_string(q.W));                                                         \
      run_pass_pair<F, G, false>(q, direct_tile<F>());                                                   \
    }                                                                                                    \
  }
#define LKJIT_NHWC_PAIR(NAME, T, KH, KW, S, D, TH, TW, RY, RX, CL, CV, NT, ...)                       \
  TEST(DWConvEmulation, NAME) {                                                                          \
    using F = NhwcCfg<T, false, KH, KW, S, D, TH, TW, RY, RX, CL, CV, NT>;                              \
    using G = NhwcCfg<T, true, KH, KW, S, D, TH, TW, RY, RX, CL, CV, NT>;                               \
    for (const Problem& q : std::vector<Problem>{__VA_ARGS__}) {                                        \
      SCOPED_TRACE("B=" + std::to_string(q.B) + " C=" + std::to_string(q.C) + " H=" + std::to_string(q.H) + \
                   " W=" + std::to_string(q.W));                                                         \
      run_pass_pair<F, G, true>(q, nhwc_tile<F>());                                                      \
    }                                                                                                    \
  }

// ---- direct (forward + dgrad) -----------------------------------------------------------------------------
// float4 windows, one stage; 'same' padding and a map smaller than the filter.
LKJIT_DIRECT_PAIR(DirectF32K3, float, 3, 3, 1, 1, 8, 16, 2, 4, 3, 32, Problem{2, 3, 13, 11, true, {}, true},
                  Problem{1, 2, 2, 3, true, {}, false})
// Even rectangular filter, two ring stages of two sub-filter rows, asymmetric padding.
LKJIT_DIRECT_PAIR(DirectBF16K4x6Ring, bf16, 4, 6, 1, 1, 8, 16, 2, 4, 2, 32, Problem{2, 2, 17, 19, true, {}, true},
                  Problem{1, 1, 9, 21, false, {0, 3, 2, 1}, false})
// Stride 2: forward windows with estep 2; dgrad the gather at odd dilation 1 (two classes a row and a column).
LKJIT_DIRECT_PAIR(DirectF16K3S2, f16, 3, 3, 2, 1, 8, 8, 2, 2, 3, 16, Problem{2, 2, 15, 13, false, {1, 1, 1, 1}, true},
                  Problem{1, 1, 8, 9, false, {0, 2, 1, 0}, true})
// Stride 2, dilation 3: output spacing 3 (forward), gather classes 6 apart (dgrad), one sub-filter row a stage,
// several register tiles a thread.
LKJIT_DIRECT_PAIR(DirectF32K5x3S2D3, float, 5, 3, 2, 3, 12, 12, 1, 1, 1, 32,
                  Problem{1, 2, 23, 20, false, {6, 3, 3, 2}, true}, Problem{2, 1, 13, 7, false, {6, 6, 3, 3}, false})
// Stride 2, even dilation: the gather's class 1 has no taps (its dx rows and columns are zero).
LKJIT_DIRECT_PAIR(DirectF32K3S2D2, float, 3, 3, 2, 2, 8, 8, 2, 2, 3, 16, Problem{1, 2, 19, 21, false, {2, 2, 2, 2}, true})
// Stride 1, dilation 2: the rotated filter with outputs spaced by the dilation.
LKJIT_DIRECT_PAIR(DirectBF16K3D2, bf16, 3, 3, 1, 2, 8, 16, 2, 4, 3, 32, Problem{2, 3, 24, 25, true, {}, true})
// 7x7 with float4 windows on a larger tile; 13x13 with a full window chunk and a tail.
LKJIT_DIRECT_PAIR(DirectF32K7, float, 7, 7, 1, 1, 16, 32, 4, 4, 7, 32, Problem{2, 2, 33, 35, true, {}, true})
LKJIT_DIRECT_PAIR(DirectF16K17, f16, 17, 17, 1, 1, 8, 16, 2, 4, 6, 16, Problem{1, 2, 20, 23, true, {}, true})
LKJIT_DIRECT_PAIR(DirectF32K1, float, 1, 1, 1, 1, 8, 8, 2, 4, 1, 8, Problem{2, 2, 5, 9, false, {0, 0, 0, 0}, true})
// The default tiles of the late stages' small maps (direct_default): one output a thread on a 7x7 map, 2x2
// register tiles on 14x14 (and on a 13x11 map that leaves the tile's last row and columns idle).
LKJIT_DIRECT_PAIR(DirectF16K7Map7, f16, 7, 7, 1, 1, 8, 8, 1, 1, 7, 64, Problem{2, 3, 7, 7, true, {}, true})
LKJIT_DIRECT_PAIR(DirectBF16K7Map14, bf16, 7, 7, 1, 1, 16, 16, 2, 2, 7, 64, Problem{1, 2, 14, 14, true, {}, true},
                  Problem{2, 1, 13, 11, true, {}, false})

// ---- NHWC (forward + dgrad) -------------------------------------------------------------------------------
// 2-channel vectors, C = 20 (a partial last channel group).
LKJIT_NHWC_PAIR(NhwcBF16K3, bf16, 3, 3, 1, 1, 8, 8, 2, 4, 8, 2, 32, Problem{2, 20, 11, 13, true, {}, true})
// Element loads, stride 2 and dilation 3 (gather classes in dgrad), C = 9.
LKJIT_NHWC_PAIR(NhwcF32K5x4S2D3, float, 5, 4, 2, 3, 6, 6, 1, 1, 8, 1, 32,
                Problem{1, 9, 23, 20, false, {6, 3, 3, 2}, true}, Problem{2, 3, 8, 8, false, {6, 6, 4, 5}, false})
// 8-byte vectors of 4 channels at C = 37 (the last vector partial: element loads), dilation 2.
LKJIT_NHWC_PAIR(NhwcF16K3D2, f16, 3, 3, 1, 2, 8, 8, 2, 2, 8, 4, 32, Problem{2, 37, 10, 9, true, {}, true})
// 13 taps a row: one chunk of 8 and a tail of 5; 16-bit pairs.
LKJIT_NHWC_PAIR(NhwcBF16K13, bf16, 13, 13, 1, 1, 4, 4, 2, 2, 8, 2, 16, Problem{1, 16, 15, 14, true, {}, true})
LKJIT_NHWC_PAIR(NhwcF32K7, float, 7, 7, 1, 1, 8, 8, 2, 4, 8, 2, 64, Problem{2, 16, 12, 12, true, {}, false})

// ---- wgrad + reduction ------------------------------------------------------------------------------------
TEST(DWConvEmulation, WgradDirect) {
  // float4 windows and one stage; scalar windows with tap-row stages at stride 2, dilation 3; dilation 2; 7x7 in
  // two stages with float4 windows.
  // Threads = register tiles x row pieces, so that every split sums some rows.
  run_wgrad<WgradDirectCfg<float, 3, 3, 1, 1, 8, 16, 2, 4, 3, 32>, false>(Problem{2, 3, 13, 21, true, {}, true},
                                                                          gd::WgradDirectTile{8, 16, 2, 4, 3, 32, 0});
  run_wgrad<WgradDirectCfg<bf16, 4, 6, 2, 3, 4, 8, 1, 4, 2, 16>, false>(Problem{1, 2, 23, 30, false, {3, 4, 5, 6}, true},
                                                                        gd::WgradDirectTile{4, 8, 1, 4, 2, 16, 0});
  run_wgrad<WgradDirectCfg<f16, 5, 5, 1, 2, 8, 8, 4, 8, 5, 16>, false>(Problem{2, 2, 12, 14, true, {}, false},
                                                                       gd::WgradDirectTile{8, 8, 4, 8, 5, 16, 0});
  run_wgrad<WgradDirectCfg<float, 7, 7, 1, 1, 8, 16, 4, 8, 4, 16>, false>(Problem{1, 2, 20, 19, true, {}, true},
                                                                          gd::WgradDirectTile{8, 16, 4, 8, 4, 16, 0});
  // The default tiles of 7x7 and 14x14 maps (wgrad_direct_default): the tile is the map, 32 threads.
  run_wgrad<WgradDirectCfg<bf16, 7, 7, 1, 1, 7, 8, 2, 4, 7, 32>, false>(Problem{3, 2, 7, 7, true, {}, true},
                                                                        gd::WgradDirectTile{7, 8, 2, 4, 7, 32, 0});
  run_wgrad<WgradDirectCfg<f16, 7, 7, 1, 1, 14, 16, 4, 8, 7, 32>, false>(Problem{2, 2, 14, 14, true, {}, true},
                                                                         gd::WgradDirectTile{14, 16, 4, 8, 7, 32, 0});
}

TEST(DWConvEmulation, WgradNhwc) {
  // 2-channel vectors; element loads at stride 2, dilation 3 (three phases); 4-channel vectors at C = 37.
  run_wgrad<WgradNhwcCfg<bf16, 3, 3, 1, 1, 8, 2, 3, 32>, true>(Problem{2, 20, 11, 13, true, {}, true},
                                                               gd::WgradNhwcTile{8, 2, 3, 32, 0});
  run_wgrad<WgradNhwcCfg<float, 5, 4, 2, 3, 8, 1, 2, 64>, true>(Problem{1, 9, 23, 20, false, {6, 3, 3, 2}, true},
                                                                gd::WgradNhwcTile{8, 1, 2, 64, 0});
  run_wgrad<WgradNhwcCfg<f16, 7, 7, 1, 2, 8, 4, 4, 32>, true>(Problem{2, 37, 16, 15, true, {}, false},
                                                              gd::WgradNhwcTile{8, 4, 4, 32, 0});
}

}  // namespace
