// The WBMM family's generator-side data and geometry (templates/wbmm/; docs/wbmm.md): spec fields, tile
// axes, each kernel's Cfg, launch grid, block and dynamic shared memory, reject reasons and the heuristic
// default tile. Pure C++17 over plain values (no CUDA includes, no templates included: the shared-memory
// formulas mirror templates/wbmm/geometry.cuh, and tests/wbmm_geometry_test.cpp checks that they agree).
//
// ---- kernels ---------------------------------------------------------------------------------------------
//   wbmm_fwd     wbmm/fwd.cuh     wbmm_fwd<Cfg>     Y = T M_c (+ T) (+ bias), per channel and window
//   wbmm_dgrad   wbmm/fwd.cuh     wbmm_fwd<Cfg>     dX = dY M_c^T (+ dY): the forward with Cfg::rotate
//   wbmm_wgrad   wbmm/wgrad.cuh   wbmm_wgrad<Cfg>   partial dR (table) / dM (dense) + dbias, dX fused
//   wbmm_reduce  wbmm/reduce.cuh  wbmm_reduce<Cfg>  fixed-order sums of the partial rows -> dR / dM, dbias
// All take lkjit::WBMMParams (templates/abi/wbmm_params.h).
//
// ---- spec fields (compile-time; in the cache key) ----------------------------------------------------------
//   name      range   default  token  kernels              meaning
//   wh        1..16   7        wh     all                  window height
//   ww        1..16   7        ww     all                  window width
//   mode      0..1    0        m      all                  0: table R (C, K); 1: dense M (C, d, d)
//   tf32      0..1    0        tf     fwd, dgrad, wgrad    f32 only: 1 allows TF32 products (torch's allow_tf32)
//   identity  0..1    1        id     fwd, dgrad, wgrad    the + T shortcut (0: the deploy form, folded into R)
//   bias      0..1    0        bi     fwd, wgrad, reduce   fwd: + bias[c]; wgrad/reduce: dbias
//   layout    0..1    0        l      fwd, dgrad, wgrad    load/store order: 0 NCHW, 1 NHWC (any strides run)
//   fuse_dx   0..1    1        fx     wgrad                the wgrad also writes dX (3|x| backward traffic)
// Kernel names: lkjit_<kernel>[_<dtype>]_<field tokens>_<tile tokens>_sm<arch> (the generic form; the reduce
// kernel has no dtype), e.g. lkjit_wbmm_fwd_bf16_wh7_ww7_m0_tf0_id1_bi0_l0_e1_wm2_wn2_mt2_s1_c1_st2_vc2_ch8_sm90.
// Axes at 0 (engine 0 = FFMA, fold 0) are not printed: an absent axis reads 0.
//
// ---- tile axes (how; the tuner's choices; tile_axes() below gives each spec's candidates) -----------------
//   name    token  candidates               kernels        meaning
//   engine  e      0, 1 (16-bit: 1; fwd/   fwd/dgrad/wgrad 0: FFMA (f32 only); 1: tensor cores (16-bit MMA,
//                  dgrad on sm_90a: 1, 2)                  or 3xTF32 / TF32 per the tf32 field); 2: wgmma
//                                                           (a warpgroup of wm = 4 warps per m64 tile)
//   wm      wm     1, 2, 4                  fwd/dgrad/wgrad warps along windows (MMA M) per channel (wgrad:
//                                                           of the fused dX product; wn = gm gn / wm there)
//   wn      wn     1, 2, 4, 7, 8            fwd/dgrad      warps along output positions (MMA N) per channel
//   mt      mt     1, 2, 4                  fwd/dgrad      m16 tiles per warp: windows per tile = 16 mt wm
//   split   s      1, 2, 4                  fwd/dgrad/wgrad fwd: M_c column parts (grid z); wgrad: dM row parts
//   kchunk  kt     0, 16, 32, 64 (d > 64)   fwd/dgrad      K-tiling: M_c's rows k streamed in chunks of kchunk
//                                                           through two shared buffers, rebuilt every tile
//                                                           (0: whole; not with wgmma)
//   cpb     c      1, 2, 4, 8 (wgrad 1-4)   fwd/dgrad/wgrad channels per block (one warp group each)
//   stages  st     1, 2                     fwd/dgrad/wgrad 2: the next tile's loads in flight during products
//   vec     vc     1, 2, 4, 8 (f32 1-4)     fwd/dgrad/wgrad elements a global access (up to 16 bytes) where a
//                                                           group of tile columns is a run in memory
//   chunk   ch     1, 2, 4, 8, 16, 32, 64   fwd/dgrad/wgrad window tiles per block (amortises the M_c build)
//   fold    fi     0, 1                     fwd/dgrad/wgrad identity folded into M_c's diagonal (fp32-exact
//                                                           paths with an identity only) instead of the
//                                                           accumulator's start
//   wpb     wp     16, 32, 64, 128          wgrad          windows per tile (the dM product's K)
//   gm      gm     1, 2, 4                  wgrad          warps along dM rows i per channel
//   gn      gn     1, 2, 4, 7, 8, 14        wgrad          warps along dM columns j per channel
//   threads w      128, 256, 512            reduce         threads per block
// Derived (not axes): dp, the padded d (geometry.cuh's fwd_dp / wgrad_dp: whole MMA k steps, n8 tiles per
// warp and parts); the MMA shape, fixed by the precision (m16n8k16 for 16-bit operands, m16n8k8 for TF32:
// the largest k each has, and d is padded to it anyway); threads = 32 x warps per channel x cpb.
//
// ---- Cfg members (generated; templates static_assert every relation) -------------------------------------
//   wbmm_fwd / wbmm_dgrad: T, wh, ww, mode, prec, rotate, identity, fold_identity, bias, nhwc, wgmma, wm, wn, mt,
//                          dp, nsplit, kchunk, cpb, stages, vec, threads
//   wbmm_wgrad:            T, wh, ww, mode, prec, identity, fold_identity, dbias, nhwc, fuse_dx, wpb, gm,
//                          gn, wm, wn, dp, isplit, cpb, stages, vec, threads
//   wbmm_reduce:           wh, ww, mode, dbias, threads
// Runtime values (WBMMParams): pointers, strides, B, C, H, W, nH, nW, chunk_tiles (= the chunk axis),
// parts and chunks (partial rows; partial_rows() below), flags.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <initializer_list>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "lkjit/generator.h"
#include "lkjit/spec.h"
#include "lkjit/wbmm_kernels.h"

namespace lkjit::gen::wbmm {

enum class WBMMKernel { kFwd, kDgrad, kWgrad, kReduce };

// Precisions, as templates/wbmm/geometry.cuh numbers them.
enum { kPrecMma16 = 0, kPrecFfma = 1, kPrec3xTF32 = 2, kPrecTF32 = 3 };
enum { kModeTable = 0, kModeDense = 1 };
inline constexpr int kMaxWindow = 16;
inline constexpr const char* kParamsType = "WBMMParams";

struct WBMMSpec {
  WBMMKernel kernel = WBMMKernel::kFwd;
  DType dtype = DType::kBF16;
  int arch = 90;
  bool arch_specific = false;  // sm_90a: the fwd/dgrad 16-bit tile space gains engine 2 (wgmma)
  int wh = 7, ww = 7, mode = kModeTable, tf32 = 0, identity = 1, bias = 0, layout = 0, fuse_dx = 1;
};

struct WBMMTile {
  int engine = 1, wm = 2, wn = 2, mt = 2, split = 1, kchunk = 0, cpb = 1, stages = 2, chunk = 1, fold = 0, vec = 4;
  int wpb = 64, gm = 2, gn = 2;  // wgrad
  int threads = 256;             // reduce
};

// ---- fields and axes as data (generator/ops/wbmm.cpp declares them as the family's) ----------------------
struct FieldInfo {
  const char* name;
  int lo, hi, def;
  const char* token;
  const char* doc;
};
inline const std::vector<FieldInfo>& spec_fields() {
  static const std::vector<FieldInfo> f = {
      {"wh", 1, kMaxWindow, 7, "wh", "window height"},
      {"ww", 1, kMaxWindow, 7, "ww", "window width"},
      {"mode", 0, 1, 0, "m", "0: relative-position table R (C, K); 1: dense M (C, d, d)"},
      {"tf32", 0, 1, 0, "tf", "f32 inputs: 1 allows TF32 products (10-bit mantissas)"},
      {"identity", 0, 1, 1, "id", "the + T shortcut of the op (0: deploy form, folded into R)"},
      {"bias", 0, 1, 0, "bi", "forward: + bias[c]; wgrad and reduce: dbias"},
      {"layout", 0, 1, 0, "l", "load/store order: 0 NCHW, 1 NHWC (every stride order runs either way)"},
      {"fuse_dx", 0, 1, 1, "fx", "wgrad: also writes dX (one pass over x and dY)"},
  };
  return f;
}
inline std::vector<std::string> kernel_fields(WBMMKernel k) {
  switch (k) {
    case WBMMKernel::kFwd: return {"wh", "ww", "mode", "tf32", "identity", "bias", "layout"};
    case WBMMKernel::kDgrad: return {"wh", "ww", "mode", "tf32", "identity", "layout"};
    case WBMMKernel::kWgrad: return {"wh", "ww", "mode", "tf32", "identity", "bias", "layout", "fuse_dx"};
    case WBMMKernel::kReduce: return {"wh", "ww", "mode", "bias"};
  }
  return {};
}

// The family's tile axes: name, kernel-name token, meaning. Tokens differ from every other family's (the
// generator test checks), so a name parses one way only. Print order: this table's.
struct AxisDef {
  const char* name;
  const char* token;
  const char* doc;
};
inline const std::vector<AxisDef>& axis_defs() {
  static const std::vector<AxisDef> a = {
      {"engine", "e", "0: FFMA (f32 only); 1: tensor cores (16-bit MMA, or 3xTF32 / TF32 per the tf32 field); 2: "
                      "wgmma (16-bit fwd/dgrad on sm_90a)"},
      {"wm", "wm", "warps along windows (MMA M) per channel; wgrad: of the fused dX product"},
      {"wn", "wn", "warps along output positions (MMA N) per channel (wgrad: gm gn / wm)"},
      {"mt", "mt", "m16 tiles per warp: a tile holds 16 mt wm windows (fwd, dgrad)"},
      {"split", "s", "fwd/dgrad: M_c column parts (grid z); wgrad: dM row parts"},
      {"kchunk", "kt", "fwd/dgrad: M_c's rows k streamed in chunks of kchunk, rebuilt every tile (0: whole)"},
      {"cpb", "c", "channels per block, one warp group each"},
      {"stages", "st", "2: the next tile's loads in flight during the products"},
      {"vec", "vc", "elements a global access where tile columns are runs (at most 16 bytes)"},
      {"chunk", "ch", "window tiles a block walks (amortises the M_c build; wgrad: partial rows)"},
      {"fold", "fi", "1: the identity folded into M_c's diagonal (fp32-exact paths only)"},
      {"wpb", "wp", "wgrad: windows per tile (the dM product's K)"},
      {"gm", "gm", "wgrad: warps along dM rows i per channel"},
      {"gn", "gn", "wgrad: warps along dM columns j per channel"},
      {"threads", "w", "reduce: threads per block"},
  };
  return a;
}

// The tile space of a kernel: its axes and their candidates, by the spec (precision, identity, fused dX),
// so that every point is one the kernel can be: engine only for f32, fold only where the identity is
// exact in the product, wm for the fused dX only (wn = gm gn / wm), mt for the forward kernels only.
struct AxisInfo {
  std::string name;
  std::vector<int> values;
};
inline bool is_wgrad(const WBMMSpec& s) { return s.kernel == WBMMKernel::kWgrad; }
inline bool fuses_dx(const WBMMSpec& s) { return is_wgrad(s) && s.fuse_dx; }
// Specs whose products may run on wgmma (engine 2): 16-bit fwd / dgrad compiled for sm_90a.
inline bool wgmma_target(const WBMMSpec& s) {
  return s.arch == 90 && s.arch_specific && s.dtype != DType::kF32 && !is_wgrad(s) && s.kernel != WBMMKernel::kReduce;
}
inline std::vector<AxisInfo> tile_axes(const WBMMSpec& s) {
  if (s.kernel == WBMMKernel::kReduce) return {{"threads", {128, 256, 512}}};
  const bool f32 = s.dtype == DType::kF32;
  // fold needs fp32 operands of an exact path: FFMA or 3xTF32 (tf32 = 0), an identity and, in the wgrad, dX.
  const bool foldable = f32 && !s.tf32 && s.identity && (!is_wgrad(s) || s.fuse_dx);
  std::vector<AxisInfo> v;
  v.push_back({"engine", f32 ? std::vector<int>{0, 1} : wgmma_target(s) ? std::vector<int>{1, 2} : std::vector<int>{1}});
  if (!is_wgrad(s)) {
    v.push_back({"wm", {1, 2, 4}});
    v.push_back({"wn", {1, 2, 4, 7, 8}});
    v.push_back({"mt", {1, 2, 4}});
  } else if (s.fuse_dx) {
    v.push_back({"wm", {1, 2, 4}});
  }
  v.push_back({"split", {1, 2, 4}});
  // K-tiling where M_c's parts are large (d > 64: 14x14, 16x16 windows); wgmma reads M_c whole (reject()).
  if (!is_wgrad(s) && s.wh * s.ww > 64) v.push_back({"kchunk", {0, 16, 32, 64}});
  v.push_back({"cpb", is_wgrad(s) ? std::vector<int>{1, 2, 4} : std::vector<int>{1, 2, 4, 8}});
  v.push_back({"stages", {1, 2}});
  v.push_back({"vec", f32 ? std::vector<int>{1, 2, 4} : std::vector<int>{1, 2, 4, 8}});
  v.push_back({"chunk", {1, 2, 4, 8, 16, 32, 64}});
  if (foldable) v.push_back({"fold", {0, 1}});
  if (is_wgrad(s)) {
    v.push_back({"wpb", {16, 32, 64, 128}});
    v.push_back({"gm", {1, 2, 4}});
    v.push_back({"gn", {1, 2, 4, 7, 8, 14}});
  }
  return v;
}
inline int tile_value(const WBMMTile& t, const std::string& axis) {
  if (axis == "engine") return t.engine;
  if (axis == "wm") return t.wm;
  if (axis == "wn") return t.wn;
  if (axis == "mt") return t.mt;
  if (axis == "split") return t.split;
  if (axis == "kchunk") return t.kchunk;
  if (axis == "cpb") return t.cpb;
  if (axis == "stages") return t.stages;
  if (axis == "vec") return t.vec;
  if (axis == "chunk") return t.chunk;
  if (axis == "fold") return t.fold;
  if (axis == "wpb") return t.wpb;
  if (axis == "gm") return t.gm;
  if (axis == "gn") return t.gn;
  if (axis == "threads") return t.threads;
  return 0;
}
inline bool set_tile_value(WBMMTile& t, const std::string& axis, int v) {
  int* f = axis == "engine" ? &t.engine : axis == "wm" ? &t.wm : axis == "wn" ? &t.wn : axis == "mt" ? &t.mt
         : axis == "split" ? &t.split : axis == "kchunk" ? &t.kchunk : axis == "cpb" ? &t.cpb : axis == "stages" ? &t.stages : axis == "vec" ? &t.vec
         : axis == "chunk" ? &t.chunk : axis == "fold" ? &t.fold : axis == "wpb" ? &t.wpb : axis == "gm" ? &t.gm
         : axis == "gn" ? &t.gn : axis == "threads" ? &t.threads : nullptr;
  if (!f) return false;
  *f = v;
  return true;
}

// ---- names and views ---------------------------------------------------------------------------------------
inline const char* kernel_stem(WBMMKernel k) {
  switch (k) {
    case WBMMKernel::kFwd: return "wbmm_fwd";
    case WBMMKernel::kDgrad: return "wbmm_dgrad";
    case WBMMKernel::kWgrad: return "wbmm_wgrad";
    case WBMMKernel::kReduce: return "wbmm_reduce";
  }
  return "?";
}
inline const char* template_header(WBMMKernel k) {
  return k == WBMMKernel::kWgrad ? "wbmm/wgrad.cuh" : k == WBMMKernel::kReduce ? "wbmm/reduce.cuh" : "wbmm/fwd.cuh";
}
inline const char* device_fn(WBMMKernel k) {
  return k == WBMMKernel::kWgrad ? "wbmm_wgrad" : k == WBMMKernel::kReduce ? "wbmm_reduce" : "wbmm_fwd";
}
inline int spec_value(const WBMMSpec& s, const std::string& f) {
  if (f == "wh") return s.wh;
  if (f == "ww") return s.ww;
  if (f == "mode") return s.mode;
  if (f == "tf32") return s.tf32;
  if (f == "identity") return s.identity;
  if (f == "bias") return s.bias;
  if (f == "layout") return s.layout;
  if (f == "fuse_dx") return s.fuse_dx;
  return 0;
}
inline WBMMKernel kernel_of(const Kernel& k) {
  return k == kWBMMDgrad ? WBMMKernel::kDgrad : k == kWBMMWgrad ? WBMMKernel::kWgrad : k == kWBMMReduce ? WBMMKernel::kReduce
                                                                                                      : WBMMKernel::kFwd;
}
inline const Kernel& kernel_id(WBMMKernel k) {
  switch (k) {
    case WBMMKernel::kFwd: return kWBMMFwd;
    case WBMMKernel::kDgrad: return kWBMMDgrad;
    case WBMMKernel::kWgrad: return kWBMMWgrad;
    case WBMMKernel::kReduce: return kWBMMReduce;
  }
  return kWBMMFwd;
}
// The family's view of a spec (fields it lacks read as the kernel would run: no bias in dgrad, dX fused
// only where the wgrad says so) and back.
inline WBMMSpec wspec(const OpSpec& o) {
  WBMMSpec s;
  s.kernel = kernel_of(o.kernel);
  s.dtype = o.dtype;
  s.arch = o.arch;
  s.arch_specific = o.arch_specific;
  s.wh = o.get("wh"), s.ww = o.get("ww"), s.mode = o.get("mode"), s.tf32 = o.get("tf32");
  s.identity = o.get("identity"), s.bias = o.get("bias"), s.layout = o.get("layout");
  s.fuse_dx = s.kernel == WBMMKernel::kWgrad ? o.get("fuse_dx") : 0;
  return s;
}
inline OpSpec to_opspec(const WBMMSpec& s) {
  OpSpec o = wbmm_spec(kernel_id(s.kernel), s.dtype, s.wh, s.ww, s.mode, s.tf32, s.identity, s.bias, s.layout, s.fuse_dx,
                       s.arch);
  o.arch_specific = s.arch_specific;
  return o;
}
// A tile's axes as the kernel runs them: absent axes read 0 (engine 0: FFMA; fold 0), and the wgrad's
// derived warps filled in: wm = wn = 1 without a fused dX, wn = gm gn / wm with one (0 where wm does not
// divide the warps: reject() names it).
inline WBMMTile wtile(const WBMMSpec& s, const Tile& t) {
  WBMMTile w;
  for (const auto& a : axis_defs()) set_tile_value(w, a.name, t.get(a.name));
  if (is_wgrad(s)) {
    w.mt = 0;
    if (!s.fuse_dx) {
      w.wm = w.wn = 1;
    } else {
      const int g = w.gm * w.gn;
      w.wn = w.wm > 0 && g % w.wm == 0 ? g / w.wm : 0;
    }
  }
  return w;
}
// The Tile of a family tile: the kernel's axes only (tile_axes(s)'s names).
inline Tile to_tile(const WBMMSpec& s, const WBMMTile& w) {
  Tile t;
  for (const auto& a : tile_axes(s)) t.set(a.name, tile_value(w, a.name));
  return t;
}


// ---- derived values (mirroring templates/wbmm/geometry.cuh) ------------------------------------------------
inline int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }
inline int round_up(int a, int b) { return ceil_div(a, b) * b; }
inline int lcm(int a, int b) { return std::lcm(a, b); }
inline int dtype_size(DType t) { return t == DType::kF32 ? 4 : 2; }
inline const char* ctype(DType t) { return t == DType::kF32 ? "float" : t == DType::kF16 ? "lkjit::f16" : "lkjit::bf16"; }
inline int d_of(const WBMMSpec& s) { return s.wh * s.ww; }
inline int table_size(const WBMMSpec& s) { return (2 * s.wh - 1) * (2 * s.ww - 1); }

inline int prec_of(const WBMMSpec& s, const WBMMTile& t) {
  if (s.dtype != DType::kF32) return kPrecMma16;
  if (t.engine == 0) return kPrecFfma;
  return s.tf32 ? kPrecTF32 : kPrec3xTF32;
}
inline int prec_kstep(int prec) { return prec == kPrecMma16 ? 16 : prec == kPrecFfma ? 4 : 8; }
inline int operand_size(const WBMMSpec& s, const WBMMTile& t) { return prec_of(s, t) == kPrecMma16 ? 2 : 4; }
// Windows per tile: 16 mt wm (fwd/dgrad), wpb (wgrad).
inline int wpb_of(const WBMMSpec& s, const WBMMTile& t) { return is_wgrad(s) ? t.wpb : 16 * t.mt * t.wm; }
inline int warps_per_channel(const WBMMSpec& s, const WBMMTile& t) { return is_wgrad(s) ? t.gm * t.gn : t.wm * t.wn; }
inline int threads_of(const WBMMSpec& s, const WBMMTile& t) {
  return s.kernel == WBMMKernel::kReduce ? t.threads : 32 * warps_per_channel(s, t) * t.cpb;
}
inline int dp_of(const WBMMSpec& s, const WBMMTile& t) {
  const int d = d_of(s), prec = prec_of(s, t);
  if (is_wgrad(s))
    return round_up(d, lcm(lcm(16 * t.gm * t.split, 8 * t.gn), fuses_dx(s) ? lcm(prec_kstep(prec), 8 * t.wn * t.split) : 1));
  return round_up(d, lcm(prec_kstep(prec), 8 * t.wn * t.split));
}

// Shared memory (bytes), the layouts of geometry.cuh's fwd_layout / wgrad_layout.
inline int64_t align16(int64_t b) { return (b + 15) & ~int64_t(15); }
inline int64_t operand_pitch(int64_t cols, int bytes) { return cols + (bytes == 2 ? 8 : 4); }
inline int64_t staging_pitch(int64_t cols) { return (cols + 15) / 16 * 16 + 8; }
inline constexpr int kTables = 3, kWinEntry2 = 24, kWinEntry3 = 32;  // sizeof(WinEntry<2>), sizeof(WinEntry<3>)
struct SmemParts {
  int64_t operand = 0, tiles = 0, scratch = 0, tables = 0, total = 0;
};
inline SmemParts smem_parts(const WBMMSpec& s, const WBMMTile& t) {
  SmemParts m;
  if (s.kernel == WBMMKernel::kReduce) return m;
  const int dp = dp_of(s, t), wpb = wpb_of(s, t), tb = dtype_size(s.dtype), ob = operand_size(s, t);
  if (!is_wgrad(s)) {
    const int64_t nb = dp / t.split;  // wgmma's core-matrix layout of M_c has no row padding; K-tiled: 2 buffers
    m.operand = (t.kchunk ? 2 : 1) * align16(int64_t(t.cpb) * nb * (t.engine == 2 ? dp : operand_pitch(t.kchunk ? t.kchunk : dp, ob)) * ob);
    m.tiles = align16(int64_t(t.cpb) * wpb * operand_pitch(dp, tb) * tb) + align16(int64_t(t.cpb) * wpb * staging_pitch(nb) * tb);
    m.tables = kTables * wpb * kWinEntry2;
  } else {
    const int64_t dpi = dp / t.split;
    const int64_t x = align16(int64_t(t.cpb) * wpb * operand_pitch(dpi, tb) * tb);
    const int64_t g = align16(int64_t(t.cpb) * wpb * operand_pitch(dp, tb) * tb);
    const int64_t dx = fuses_dx(s) ? align16(int64_t(t.cpb) * wpb * staging_pitch(dpi) * tb) : 0;
    const int64_t sc = align16(int64_t(t.cpb) * dpi * (dp + 4) * 4);
    m.tiles = std::max(x + g + dx, sc);
    m.operand = fuses_dx(s) ? align16(int64_t(t.cpb) * dpi * operand_pitch(dp, ob) * ob) : 0;
    m.scratch = align16(int64_t(t.cpb) * threads_of(s, t) * 4);
    m.tables = kTables * wpb * kWinEntry3;
  }
  m.total = m.operand + m.tiles + m.scratch + m.tables;
  return m;
}
inline int64_t smem_bytes(const WBMMSpec& s, const WBMMTile& t) { return smem_parts(s, t).total; }

// Registers a thread keeps live at the products, roughly: accumulators, the staged loads of the next tile
// (stages = 2; one 32-bit register an element), fragments and ~40 for addresses and loop state. A guide
// for the default tile (which keeps below ~200 so nothing spills); the compile reports the real count.
inline int estimated_registers(const WBMMSpec& s, const WBMMTile& t) {
  if (s.kernel == WBMMKernel::kReduce) return 32;
  const int dp = dp_of(s, t), wpb = wpb_of(s, t), th = threads_of(s, t), prec = prec_of(s, t);
  // Staged loads: groups of vec columns, wh rows each, packed into 32-bit words.
  const int words = std::max(1, t.vec * dtype_size(s.dtype) / 4);
  const int loads = ceil_div(ceil_div(int64_t(t.cpb) * wpb * s.ww, t.vec), th) * s.wh * words * (is_wgrad(s) ? 2 : 1);
  // Fragment words live at once: A (4 a m16 tile) and B (2 an n8 tile); TF32 keeps the rounded copy, 3xTF32
  // the raw word and both halves.
  const int copies = prec == kPrec3xTF32 ? 3 : prec == kPrecTF32 ? 2 : 1;
  int acc = 0, frag = 0;
  if (!is_wgrad(s)) {
    const int nt = dp / t.split / (8 * t.wn);
    acc = 16 * t.mt * 8 * nt / 32;
    // wgmma: every k step's A fragments live at once (wbmm/gemm_wgmma.cuh), no B fragments.
    frag = t.engine == 2 ? 4 * t.mt * dp / 16 : prec == kPrecFfma ? 4 * (4 * t.mt + nt) : (4 * t.mt + 2 * nt) * copies;
  } else {
    const int dpi = dp / t.split, gmt = dpi / (16 * t.gm), gnt = dp / (8 * t.gn);
    acc = 16 * gmt * 8 * gnt / 32;
    frag = prec == kPrecFfma ? 4 * gmt + gnt : (4 * gmt + 2 * gnt) * copies;
    if (fuses_dx(s)) acc += wpb * dpi / (32 * t.wm * t.wn);
  }
  return acc + frag + (t.stages == 2 ? loads : 0) + 40;
}

// ---- windows and chunks ------------------------------------------------------------------------------------
inline int64_t windows_per_channel(const WBMMSpec& s, const Shape& sh) {
  return sh.B * int64_t(ceil_div(sh.H, s.wh)) * ceil_div(sh.W, s.ww);
}
inline int64_t window_tiles(const WBMMSpec& s, const WBMMTile& t, const Shape& sh) {
  return (windows_per_channel(s, sh) + wpb_of(s, t) - 1) / wpb_of(s, t);
}
// Blocks along the windows (grid.x in NCHW order): chunks of t.chunk tiles (WBMMParams::chunk_tiles).
inline int64_t chunks(const WBMMSpec& s, const WBMMTile& t, const Shape& sh) {
  return (window_tiles(s, t, sh) + t.chunk - 1) / t.chunk;
}

// ---- validation and rejection ------------------------------------------------------------------------------
// Cross-field spec rules (each field's range is the family table's, checked by the generator): one message
// per violated rule.
inline void validate(const WBMMSpec& s, std::vector<std::string>& e) {
  if (s.tf32 && s.dtype != DType::kF32)
    e.push_back(fmt::format("tf32=1 applies to f32 inputs only; {} inputs run on the 16-bit MMA (tf32=0)", to_string(s.dtype)));
  if (s.kernel == WBMMKernel::kReduce && s.dtype != DType::kF32)
    e.push_back(fmt::format("dtype {}: the reduce kernel sums fp32 partial rows; supported: f32", to_string(s.dtype)));
}

// Why tile t cannot run spec s on a device with limits d (and shape sh, if given), or nullopt. Pure.
inline std::optional<std::string> reject(const WBMMSpec& s, const WBMMTile& t, const DeviceLimits& d, const Shape* sh) {
  const auto in = [](int v, std::initializer_list<int> ok) { return std::find(ok.begin(), ok.end(), v) != ok.end(); };
  if (s.kernel == WBMMKernel::kReduce) {
    if (!in(t.threads, {128, 256, 512}))
      return fmt::format("threads={} is not supported; supported: 128, 256, 512", t.threads);
    return std::nullopt;
  }
  if (t.engine < 0 || t.engine > 2)
    return fmt::format("engine={} is out of range; supported: 0 (FFMA), 1 (tensor cores), 2 (wgmma)", t.engine);
  if (t.engine == 2 && !wgmma_target(s))
    return fmt::format("engine=2 (wgmma) runs 16-bit fwd / dgrad kernels compiled for sm_90a; this is a {} {} kernel for {}",
                       to_string(s.dtype), kernel_stem(s.kernel), ArchTarget{s.arch, s.arch_specific}.to_string());
  if (t.engine == 2 && t.wm != 4)
    return fmt::format("engine=2 (wgmma): a warpgroup is wm=4 warps along the windows; wm={} is not supported", t.wm);
  if (t.engine == 0 && s.dtype != DType::kF32)
    return fmt::format("engine=0 (FFMA) runs f32 inputs only; {} inputs run on tensor cores (engine=1)", to_string(s.dtype));
  if (t.fold != 0 && t.fold != 1) return fmt::format("fold={} is out of range; supported: 0, 1", t.fold);
  const int prec = prec_of(s, t);
  if (t.fold && s.identity && (prec == kPrecMma16 || prec == kPrecTF32))
    return fmt::format("fold=1 rounds 1 + R into a {} operand (the identity term loses bits); supported: fold=0 for "
                       "16-bit and TF32 products", prec == kPrecTF32 ? "TF32" : to_string(s.dtype));
  if (t.stages != 1 && t.stages != 2) return fmt::format("stages={} is out of range; supported: 1, 2", t.stages);
  if ((t.vec != 1 && t.vec != 2 && t.vec != 4 && t.vec != 8) || t.vec * dtype_size(s.dtype) > 16)
    return fmt::format("vec={} is not supported for {}; supported: 1, 2, 4, 8 elements, at most 16 bytes", t.vec,
                       to_string(s.dtype));
  if (t.chunk < 1 || t.chunk > 1024) return fmt::format("chunk={} is out of range; supported: [1, 1024]", t.chunk);
  if (t.cpb < 1 || t.cpb > 32) return fmt::format("cpb={} is out of range; supported: [1, 32]", t.cpb);
  if (t.split < 1 || t.split > 8) return fmt::format("split={} is out of range; supported: [1, 8]", t.split);
  if (fuses_dx(s) && t.gm >= 1 && t.gn >= 1 && t.wm >= 1 && t.wn < 1)
    return fmt::format("wm={} does not divide the gm x gn = {} x {} warps that run the fused dX product", t.wm, t.gm, t.gn);
  if (t.wm < 1 || t.wn < 1) return fmt::format("wm={}, wn={}: warps must be >= 1", t.wm, t.wn);
  const int npos = d_of(s), dp = dp_of(s, t);
  if (t.fold && (!s.identity || (is_wgrad(s) && !s.fuse_dx)))
    return std::string("fold=1 has no identity term to fold here; supported: fold=0");
  if (!is_wgrad(s)) {
    if (t.mt < 1 || t.mt > 4) return fmt::format("mt={} is out of range; supported: [1, 4]", t.mt);
    if (t.engine == 2) {  // every k step's A fragments and the accumulators stay in registers
      const int regs = 4 * t.mt * dp / 16 + 4 * t.mt * (dp / t.split / (8 * t.wn));
      if (regs > 224)
        return fmt::format("engine=2 (wgmma) with mt={}, wn={}, split={} keeps {} A-fragment and accumulator registers a "
                           "thread (dp={}); supported: at most 224 (a smaller mt, more wn or split)",
                           t.mt, t.wn, t.split, regs, dp);
    }
    // Every column part must hold output positions (else its blocks compute nothing).
    if ((t.split - 1) * (dp / t.split) >= npos)
      return fmt::format("split={} leaves column part {} without output positions (d={}, dp={})", t.split, t.split - 1, npos, dp);
    if (t.kchunk != 0) {
      if (!in(t.kchunk, {16, 32, 64})) return fmt::format("kchunk={} is not supported; supported: 0, 16, 32, 64", t.kchunk);
      if (t.engine == 2)
        return fmt::format("kchunk={}: engine=2 (wgmma) reads M_c whole in its core-matrix layout; supported: kchunk=0", t.kchunk);
      if (ceil_div(dp, t.kchunk) < 3)
        return fmt::format("kchunk={} makes {} K chunks of dp={}; supported: 3 or more (fewer fit whole: kchunk=0)", t.kchunk,
                           ceil_div(dp, t.kchunk), dp);
    }
  } else {
    if (t.kchunk != 0) return fmt::format("kchunk={}: K-tiling applies to the fwd/dgrad product only; supported: 0", t.kchunk);
    if (t.wpb < 16 || t.wpb % 16 != 0 || t.wpb > 256)
      return fmt::format("wpb={} is not supported; supported: a multiple of 16 in [16, 256]", t.wpb);
    if (t.gm < 1 || t.gn < 1) return fmt::format("gm={}, gn={}: warps must be >= 1", t.gm, t.gn);
    if ((t.split - 1) * (dp / t.split) >= npos)
      return fmt::format("split={} leaves dM row part {} empty (d={}, dp={})", t.split, t.split - 1, npos, dp);
    if (fuses_dx(s)) {
      if (t.wm * t.wn != t.gm * t.gn)
        return fmt::format("fused dX tiling wm x wn = {} x {} must use the gm x gn = {} x {} warps", t.wm, t.wn, t.gm, t.gn);
      if (t.wpb % (16 * t.wm) != 0) return fmt::format("wpb={} is not a multiple of 16 x wm={}", t.wpb, t.wm);
    } else if (t.wm != 1 || t.wn != 1) {
      return fmt::format("wm={}, wn={} tile the fused dX only; supported without fuse_dx: wm=1, wn=1", t.wm, t.wn);
    }
  }
  const int th = threads_of(s, t);
  if (th > d.max_threads_per_block)
    return fmt::format("threads={} (32 x {} warps x cpb={}) exceeds the {} limit of {}", th, warps_per_channel(s, t),
                       t.cpb, arch_name(d.arch), d.max_threads_per_block);
  const int64_t smem = smem_bytes(s, t);
  if (smem > d.max_smem_per_block)
    return fmt::format("shared memory {} B exceeds the {} limit of {} B per block", smem, arch_name(d.arch), d.max_smem_per_block);
  if (sh) {
    if (sh->B < 1 || sh->C < 1 || sh->H < 1 || sh->W < 1)
      return fmt::format("shape {} has an empty extent", sh->to_string());
    // Grid: (chunks, channel groups) in NCHW order, swapped in NHWC order (common.cuh); y holds 65535.
    const int64_t groups = (sh->C + t.cpb - 1) / t.cpb, ch = chunks(s, t, *sh);
    if (!s.layout && groups > 65535) return fmt::format("C={} exceeds 65535 channel groups of cpb={}", sh->C, t.cpb);
    if (s.layout && ch > 65535)
      return fmt::format("{} chunks of chunk={} window tiles exceed the 65535 blocks of grid.y (NHWC order); supported: "
                         "a larger chunk", ch, t.chunk);
    if ((s.layout ? groups : ch) > 2147483647) return fmt::format("{} blocks along grid.x exceed 2^31-1", s.layout ? groups : ch);
  }
  return std::nullopt;
}

// ---- launch geometry ---------------------------------------------------------------------------------------
// The wgrad's partial rows per channel (WBMMParams::parts) and floats of WBMMParams::part / part_bias.
inline int64_t partial_rows(const WBMMSpec& s, const WBMMTile& t, const Shape& sh) {
  return s.mode == kModeTable ? chunks(s, t, sh) * t.split : chunks(s, t, sh);
}
inline int64_t partial_values(const WBMMSpec& s) { return s.mode == kModeTable ? table_size(s) : int64_t(d_of(s)) * d_of(s); }
inline int64_t partial_floats(const WBMMSpec& s, const WBMMTile& t, const Shape& sh) {
  return partial_rows(s, t, sh) * sh.C * partial_values(s);
}
inline int64_t partial_bias_floats(const WBMMSpec& s, const WBMMTile& t, const Shape& sh) {
  return s.bias ? chunks(s, t, sh) * sh.C : 0;
}

// Grid, block, dynamic shared memory. fwd/dgrad/wgrad: (chunks, channel groups, split), chunks and groups
// swapped in NHWC order (templates/wbmm/common.cuh). reduce: one thread per value of C x nv (+ C for dbias).
inline LaunchGeometry geometry(const WBMMSpec& s, const WBMMTile& t, const Shape& sh) {
  LaunchGeometry g;
  if (s.kernel == WBMMKernel::kReduce) {
    const int64_t n = sh.C * partial_values(s) + (s.bias ? sh.C : 0);
    g.grid[0] = static_cast<unsigned>(std::min<int64_t>((n + t.threads - 1) / t.threads, 1 << 20));
    g.block[0] = t.threads;
    return g;
  }
  const unsigned ch = static_cast<unsigned>(chunks(s, t, sh)), groups = static_cast<unsigned>(ceil_div(sh.C, t.cpb));
  g.grid[0] = s.layout ? groups : ch;
  g.grid[1] = s.layout ? ch : groups;
  g.grid[2] = t.split;
  g.block[0] = threads_of(s, t);
  g.smem_bytes = static_cast<unsigned>(smem_bytes(s, t));
  return g;
}

// ---- Cfg -----------------------------------------------------------------------------------------------------
inline std::string cfg_body(const WBMMSpec& s, const WBMMTile& t) {
  const auto b = [](int v) { return v ? "true" : "false"; };
  if (s.kernel == WBMMKernel::kReduce)
    return fmt::format("  static constexpr int wh = {}, ww = {}, mode = {}, threads = {};\n  static constexpr bool dbias = {};\n",
                       s.wh, s.ww, s.mode, t.threads, b(s.bias));
  const int prec = prec_of(s, t);
  std::string c = fmt::format("  using T = {};\n  static constexpr int wh = {}, ww = {}, mode = {}, prec = {};\n", ctype(s.dtype),
                              s.wh, s.ww, s.mode, prec);
  if (!is_wgrad(s)) {
    c += fmt::format("  static constexpr bool rotate = {}, identity = {}, fold_identity = {}, bias = {}, nhwc = {}, wgmma = {};\n",
                     b(s.kernel == WBMMKernel::kDgrad), b(s.identity), b(t.fold), b(s.bias), b(s.layout), b(t.engine == 2));
    c += fmt::format("  static constexpr int wm = {}, wn = {}, mt = {}, dp = {}, nsplit = {}, kchunk = {}, cpb = {}, stages = {}, "
                     "vec = {}, threads = {};\n",
                     t.wm, t.wn, t.mt, dp_of(s, t), t.split, t.kchunk, t.cpb, t.stages, t.vec, threads_of(s, t));
  } else {
    c += fmt::format("  static constexpr bool identity = {}, fold_identity = {}, dbias = {}, nhwc = {}, fuse_dx = {};\n",
                     b(s.identity), b(t.fold), b(s.bias), b(s.layout), b(s.fuse_dx));
    c += fmt::format("  static constexpr int wpb = {}, gm = {}, gn = {}, wm = {}, wn = {}, dp = {}, isplit = {}, cpb = {}, "
                     "stages = {}, vec = {}, threads = {};\n",
                     t.wpb, t.gm, t.gn, t.wm, t.wn, dp_of(s, t), t.split, t.cpb, t.stages, t.vec, threads_of(s, t));
  }
  return c;
}

// ---- default tile ---------------------------------------------------------------------------------------------
// Blocks of this tile an SM holds, by threads, shared memory (1 KiB reserved a block) and estimated registers.
inline int blocks_per_sm(const WBMMSpec& s, const WBMMTile& t, const DeviceLimits& d) {
  const int th = threads_of(s, t);
  const int64_t by_threads = 2048 / th, by_smem = d.smem_per_sm / (smem_bytes(s, t) + 1024);
  // The estimate runs up to ~26 registers under ptxas's count for wide tensor-core tiles (sm_90, NVRTC 13):
  // 16 of headroom, so that a tile the heuristic takes does not spill at its occupancy.
  const int64_t regs = (std::min(estimated_registers(s, t) + 16, 255) + 7) / 8 * 8;
  const int64_t by_regs = d.regs_per_sm / (regs * th);
  return static_cast<int>(std::max<int64_t>(0, std::min({by_threads, by_smem, by_regs, int64_t(32)})));
}

// The chunk (tiles a block walks): the longest that still leaves two waves of blocks, so the M_c build is
// amortised over as many windows as possible while every SM stays busy to the end; at most 64 tiles.
inline int default_chunk(const WBMMSpec& s, WBMMTile t, const Shape& sh, const DeviceLimits& d) {
  const int64_t groups = int64_t(ceil_div(sh.C, t.cpb)) * t.split;
  const int64_t want = 2LL * d.sm_count * std::max(1, blocks_per_sm(s, t, d));
  int best = 1;
  for (int c : {1, 2, 4, 8, 16, 32, 64}) {
    t.chunk = c;
    if (c == 1 || chunks(s, t, sh) * groups >= want) best = c;
  }
  // NHWC order puts chunks on grid.y (65535 blocks): the least chunk that fits, if the choice does not.
  if (s.layout) {
    t.chunk = best;
    while (chunks(s, t, sh) > 65535 && t.chunk < 64) t.chunk *= 2;
    best = t.chunk;
  }
  return best;
}

// The heuristic default per kernel (a pure function; always a tile reject() accepts when any is):
//  - precision: 16-bit inputs on the 16-bit MMA (wgmma for fwd / dgrad on sm_90a above d = 64). f32: FFMA up to d = 64 (2d FLOP an element stay under the
//    memory time: 7x7 is 98 FLOP per 8 bytes moved, below the fp32 ridge of ~15.7 FLOP/B), 3xTF32 above
//    (14x14 in FFMA is compute-bound, AI 49; three TF32 products on tensor cores are not).
//  - windows per tile 64 where shared memory allows (per-block M_c amortised, 16-wide MMA rows full),
//    warps 2 x 2 per channel up to dp = 64, 4 x 2 (wgrad: more columns) above: the accumulators stay near
//    32-64 registers a thread.
//  - NCHW: one channel a block; NHWC: 4 channels a block (8-byte pixel runs, and channel groups on grid.x so
//    concurrent blocks read whole sectors between them).
//  - split 1 (x read once) unless M_c's part does not fit, then the smallest that fits; stages 2; 4-byte
//    global accesses (vec; see below), along the block's channels in NHWC order.
//  - chunk: default_chunk.
//  - the wgrad without dX at 14x14-class windows on sm_90 (NCHW): first the tiles tuning found there
//    (measured below), whatever the register estimate says.
// Other candidates are tried in order and the first accepted with 128 threads or more, estimated registers
// <= 224 and at least one block an SM by them wins (then with fewer threads); if none is, the first tile of the space that reject() accepts.
inline WBMMTile default_tile(const WBMMSpec& s, const Shape& sh, const DeviceLimits& d) {
  WBMMTile best;
  if (s.kernel == WBMMKernel::kReduce) {
    best.threads = 256;
    return best;
  }
  const int d2 = d_of(s);
  const bool f32 = s.dtype == DType::kF32;
  std::vector<WBMMTile> cands;
  // A candidate measured to run without spills though the register estimate (a guide fitted to the forward
  // tiles) exceeds 224: tried first, the estimate not consulted.
  std::optional<WBMMTile> measured;
  WBMMTile base;
  // 16-bit fwd / dgrad on sm_90a with d > 64: wgmma (measured on an H200, bf16 64x256x56x56: 14x14 forward
  // 0.238 ms against 0.271 on mma.sync; 7x7 0.138 against 0.128, so mma.sync stays up to d = 64).
  base.engine = f32 && d2 <= 64 ? 0 : wgmma_target(s) && d2 > 64 ? 2 : 1;
  base.cpb = s.layout ? 4 : 1;
  base.fold = 0;
  base.stages = 2;
  // 4-byte accesses (two 16-bit elements, or one fp32) where the rows allow them: a warp's lanes then stage
  // elements 4 bytes apart, which keeps the shared-memory side conflict-free (16-byte groups put a warp's
  // 2-byte stores 16 bytes apart: 3.5 excess wavefronts each, measured on an H200) and still halves the
  // global instructions for 16-bit data. Rows (NCHW: W) or pixels (NHWC: C) must keep the pairs aligned.
  base.vec = dtype_size(s.dtype) == 2 && (s.layout ? sh.C % 2 == 0 : sh.W % 2 == 0) ? 2 : 1;
  if (!is_wgrad(s)) {
    // (wm, wn, mt) by size, then column splits.
    const std::vector<std::array<int, 3>> shapes = d2 <= 64 ? std::vector<std::array<int, 3>>{{2, 2, 2}, {2, 1, 2}, {2, 2, 1}, {1, 2, 2}}
                                                            : std::vector<std::array<int, 3>>{{4, 2, 1}, {2, 2, 1}, {4, 1, 1}, {2, 1, 1}, {1, 2, 1}};
    for (int cpb : {base.cpb, 2, 1})
      for (int split : {1, 2, 4})
        for (const auto& w : shapes) {
          WBMMTile t = base;
          t.cpb = cpb, t.split = split, t.wm = w[0], t.wn = w[1], t.mt = w[2];
          if (s.layout) t.vec = std::min(base.vec, cpb);
          cands.push_back(t);
        }
  } else {
    // The split backward's wgrad (no dX) at 14x14-class windows: dM rows in two parts, one warp along them, 7-8
    // along its columns, longer window tiles and wider accesses than the estimate allows (H200, 14x14
    // 64x256x56x56, greedy tuning: bf16 wp64 gn8 vc4 0.481 ms against the next default's 0.817; fp32 wp32 gn7
    // vc2 1.749 against 2.188; 248 and 246 registers, no spills with NVRTC 13). Taken where that measurement
    // applies: sm_90, NCHW, d in (192, 256] for bf16 / f16 (dp = 256, as for 14x14) and (192, 224] for fp32 (dp =
    // 224; 7 column warps would pad 16x16 to 448); elsewhere the estimate's tiles stay.
    if (!s.fuse_dx && d.arch == 90 && !s.layout && d2 > 192 && d2 <= (f32 ? 224 : 256)) {
      WBMMTile t = base;
      t.split = 2, t.gm = 1, t.gn = f32 ? 7 : 8, t.wpb = f32 ? 32 : 64, t.wm = t.wn = 1;
      const int v = 2 * base.vec;  // two pixels' worth where the rows keep them aligned
      t.vec = sh.W % v == 0 ? v : base.vec;
      measured = t;
    }
    struct W { int wpb, gm, gn, wm, wn; };
    const std::vector<W> shapes = d2 <= 64 ? std::vector<W>{{64, 2, 2, 2, 2}, {32, 2, 2, 2, 2}, {32, 1, 2, 1, 2}}
                                           : std::vector<W>{{32, 1, 14, 2, 7}, {32, 2, 8, 2, 8}, {32, 1, 8, 2, 4}, {16, 1, 8, 1, 8}, {16, 1, 4, 1, 4}};
    for (int cpb : {base.cpb, 2, 1})
      for (int split : {d2 <= 64 ? 1 : 2, 1, 4})
        for (const auto& w : shapes) {
          WBMMTile t = base;
          t.cpb = cpb, t.split = split, t.wpb = w.wpb, t.gm = w.gm, t.gn = w.gn, t.wm = w.wm, t.wn = w.wn;
          if (!s.fuse_dx) t.wm = t.wn = 1;  // the warps tile the fused dX only
          if (s.layout) t.vec = std::min(base.vec, cpb);
          cands.push_back(t);
        }
  }
  if (measured) {
    measured->chunk = default_chunk(s, *measured, sh, d);
    if (!reject(s, *measured, d, &sh) && blocks_per_sm(s, *measured, d) >= 1) return *measured;
  }
  for (int min_threads : {128, 32})  // 4 warps a block or more where any candidate allows
    for (auto t : cands) {
      t.chunk = default_chunk(s, t, sh, d);
      if (threads_of(s, t) < min_threads || reject(s, t, d, &sh) || estimated_registers(s, t) > 224 ||
          blocks_per_sm(s, t, d) < 1)
        continue;
      return t;
    }
  // Fallback: the first accepted point of the space, chunk aside (its value is default_chunk's).
  auto axes = tile_axes(s);
  axes.erase(std::remove_if(axes.begin(), axes.end(), [](const AxisInfo& a) { return a.name == "chunk"; }), axes.end());
  std::vector<size_t> idx(axes.size(), 0);
  for (;;) {
    Tile pt;
    for (size_t a = 0; a < axes.size(); ++a) pt.set(axes[a].name, axes[a].values[idx[a]]);
    pt.set("chunk", 1);
    WBMMTile t = wtile(s, pt);
    t.chunk = default_chunk(s, t, sh, d);
    if (!reject(s, t, d, &sh)) return t;
    size_t a = 0;
    for (; a < idx.size(); ++a) {
      if (++idx[a] < axes[a].values.size()) break;
      idx[a] = 0;
    }
    if (a == idx.size()) break;
  }
  return best;
}

}  // namespace lkjit::gen::wbmm
