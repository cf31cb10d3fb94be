// The depthwise-convolution family (docs/dwconv.md) as generator data: its spec fields, tile axes and ten
// kernels, adapters from OpSpec / Tile / Shape to the plain values of generator/ops/dwconv_geometry.h, which
// owns the math (Cfg members, launch geometry, rejects, default tiles). Generic kernel names, e.g.
// lkjit_dwconv_fwd_direct_bf16_kh31_kw31_s1_d1_t32x64_b2_w128_ry4_rx4_sm90 (tile_h/tile_w, blocks and threads
// print with the tokens and in the order WTConv registered those axes; this family's own axes follow).
//
// The Shape a kernel sees (the tuning database's shape key): (B, C) and the extents the kernel iterates
// over, since padding is a runtime value that no Shape holds: the forward and wgrad kernels the output
// (Ho, Wo), dgrad the input (H, W); dwconv_wgrad_reduce (1, C, kh*kw + 1, 1): the values it adds a channel.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "generator/family.h"
#include "generator/ops/dwconv_geometry.h"

namespace lkjit::gen {
namespace {

namespace gd = dwconv;

enum class Which { kFwdDirect, kDgradDirect, kFwdNhwc, kDgradNhwc, kFwdMma, kDgradMma, kWgradDirect, kWgradNhwc, kWgradMma,
                   kReduce };

// The kernel a spec names (the KernelDef's function pointers are shared, so they ask).
Which which(const std::string& n) {
  if (n == "dwconv_fwd_direct") return Which::kFwdDirect;
  if (n == "dwconv_dgrad_direct") return Which::kDgradDirect;
  if (n == "dwconv_fwd_nhwc") return Which::kFwdNhwc;
  if (n == "dwconv_dgrad_nhwc") return Which::kDgradNhwc;
  if (n == "dwconv_fwd_mma") return Which::kFwdMma;
  if (n == "dwconv_dgrad_mma") return Which::kDgradMma;
  if (n == "dwconv_wgrad_direct") return Which::kWgradDirect;
  if (n == "dwconv_wgrad_nhwc") return Which::kWgradNhwc;
  if (n == "dwconv_wgrad_mma") return Which::kWgradMma;
  return Which::kReduce;
}
Which which(const OpSpec& s) { return which(s.kernel.name()); }
gd::Pass pass_of(Which w) {
  return w == Which::kDgradDirect || w == Which::kDgradNhwc || w == Which::kDgradMma ? gd::Pass::kDgrad
                                                                                     : gd::Pass::kForward;
}

gd::SpecVals vals(const OpSpec& s) {
  gd::SpecVals v;
  v.dtype = s.dtype, v.arch = s.arch;
  v.kh = s.get("kh"), v.kw = s.get("kw"), v.stride = s.get("stride"), v.dil = s.get("dil");
  return v;
}
// The problem behind a kernel's Shape (see the header comment): input and output extents both the iterated ones.
gd::Problem problem(const Shape& sh) {
  gd::Problem p;
  p.B = sh.B, p.C = sh.C, p.H = p.Ho = sh.H, p.W = p.Wo = sh.W;
  return p;
}

gd::DirectTile direct_tile(const Tile& t) {
  return {t.get("tile_h"), t.get("tile_w"), t.get("ry"), t.get("rx"), t.get("kc"), t.get("threads"), t.get("blocks")};
}
gd::NhwcTile nhwc_tile(const Tile& t) {
  return {t.get("tile_h"), t.get("tile_w"), t.get("ry"), t.get("rx"), t.get("lanes"), t.get("cvec"), t.get("threads"),
          t.get("blocks")};
}
gd::MmaTile mma_tile(const Tile& t) {
  return {t.get("tile_h"), t.get("tile_w"), t.get("mwarps"), t.get("nwarps"), t.get("blocks")};
}
gd::WgradMmaTile wgrad_mma_tile(const Tile& t) {
  return {t.get("tile_h"), t.get("tile_w"), t.get("mwarps"), t.get("nwarps"), t.get("ksplit"), t.get("blocks")};
}
gd::WgradDirectTile wgrad_direct_tile(const Tile& t) {
  return {t.get("tile_h"), t.get("tile_w"), t.get("tap_rows"), t.get("tap_cols"), t.get("kc"), t.get("threads"),
          t.get("blocks")};
}
gd::WgradNhwcTile wgrad_nhwc_tile(const Tile& t) {
  return {t.get("lanes"), t.get("cvec"), t.get("row_taps"), t.get("threads"), t.get("blocks")};
}

Tile of(const gd::DirectTile& t) {
  return Tile::of({{"tile_h", t.tile_h}, {"tile_w", t.tile_w}, {"ry", t.ry}, {"rx", t.rx}, {"kc", t.kc},
                   {"threads", t.threads}, {"blocks", t.blocks}});
}
Tile of(const gd::NhwcTile& t) {
  return Tile::of({{"tile_h", t.tile_h}, {"tile_w", t.tile_w}, {"ry", t.ry}, {"rx", t.rx}, {"lanes", t.lanes},
                   {"cvec", t.vec}, {"threads", t.threads}, {"blocks", t.blocks}});
}
Tile of(const gd::MmaTile& t) {
  return Tile::of({{"tile_h", t.tile_h}, {"tile_w", t.tile_w}, {"mwarps", t.warps_m}, {"nwarps", t.warps_n},
                   {"blocks", t.blocks}});
}
Tile of(const gd::WgradMmaTile& t) {
  return Tile::of({{"tile_h", t.tile_h}, {"tile_w", t.tile_w}, {"mwarps", t.warps_u}, {"nwarps", t.warps_v},
                   {"ksplit", t.ksplit}, {"blocks", t.blocks}});
}
Tile of(const gd::WgradDirectTile& t) {
  return Tile::of({{"tile_h", t.tile_h}, {"tile_w", t.tile_w}, {"tap_rows", t.tap_rows}, {"tap_cols", t.tap_cols},
                   {"kc", t.kc}, {"threads", t.threads}, {"blocks", t.blocks}});
}
Tile of(const gd::WgradNhwcTile& t) {
  return Tile::of({{"lanes", t.lanes}, {"cvec", t.vec}, {"row_taps", t.vc}, {"threads", t.threads}, {"blocks", t.blocks}});
}

// ---- spaces -------------------------------------------------------------------------------------------
// Candidates of the tuner. Register-cap blocks and threads take the values the defaults reach on common
// shapes; the defaults themselves pass reject() for their shape and are measured first (tune_candidates).
const std::vector<int> kBlocks = {0, 1, 2, 3, 4, 5, 6, 7, 8};

std::vector<int> upto(std::vector<int> v, int hi) {  // the values <= hi, and hi itself when below the largest
  std::set<int> s;
  for (int x : v) s.insert(std::min(x, hi));
  return {s.begin(), s.end()};
}
// kc: 0 (every sub-filter row in one stage) or fewer rows a stage than the rows there are.
std::vector<int> kc_values(int rows) {
  std::vector<int> v = {0};
  for (int x : {1, 2, 4, 8, 16})
    if (x < rows) v.push_back(x);
  return v;
}
int sub_rows(const OpSpec& s) {  // sub-filter rows of the direct kernels (the dgrad gather's are fewer)
  const auto v = vals(s);
  const gd::DirectTile t{8, 8, 1, 1, 0, 64, 0};
  return gd::direct_layout(v, t, pass_of(which(s))).nay();
}
std::vector<int> cvec_values(DType t) { return t == DType::kF32 ? std::vector<int>{1, 2, 4} : std::vector<int>{1, 2, 4, 8}; }

TileSpace space(const OpSpec& s) {
  const auto v = vals(s);
  switch (which(s)) {
    case Which::kFwdDirect:
    case Which::kDgradDirect:
      return {{{"tile_h", {8, 16, 32, 64}, "output rows of a block"},
               {"tile_w", {16, 32, 64, 128}, "output columns of a block"},
               {"ry", {1, 2, 4, 8}, "output rows a thread"},
               {"rx", {1, 2, 4, 8}, "output columns a thread"},
               {"kc", kc_values(sub_rows(s)), "sub-filter rows a shared-memory stage (0: all)"},
               {"threads", {64, 128, 256}, "threads a block"},
               {"blocks", kBlocks, "blocks an SM holds: registers capped to fit (0: no cap)"}}};
    case Which::kFwdNhwc:
    case Which::kDgradNhwc:
      return {{{"tile_h", {4, 8, 16, 32}, "output rows of a block"},
               {"tile_w", {4, 8, 16, 32}, "output columns of a block"},
               {"ry", {1, 2, 4}, "output rows a thread"},
               {"rx", {1, 2, 4}, "output columns a thread"},
               {"lanes", {8, 16, 32}, "channel lanes of a block"},
               {"cvec", cvec_values(s.dtype), "channels a lane (vector loads)"},
               {"threads", {64, 128, 256}, "threads a block"},
               {"blocks", kBlocks, "blocks an SM holds: registers capped to fit (0: no cap)"}}};
    case Which::kFwdMma:
    case Which::kDgradMma:
      return {{{"tile_h", {16, 32, 64, 128}, "output rows of a block (whole 16-row blocks)"},
               {"tile_w", {16, 32, 64, 128}, "output columns of a block (whole 16-column groups)"},
               {"mwarps", {1, 2, 4}, "warps along output rows"},
               {"nwarps", {1, 2, 4}, "warps along output columns"},
               {"blocks", kBlocks, "blocks an SM holds: registers capped to fit (0: no cap)"}}};
    case Which::kWgradDirect:
      return {{{"tile_h", {8, 16, 32, 64}, "dy rows of a block"},
               {"tile_w", {16, 32, 64}, "dy columns of a block"},
               {"tap_rows", upto({1, 2, 4}, v.kh), "tap rows a thread"},
               {"tap_cols", {4, 8}, "tap columns a thread"},
               {"kc", kc_values(v.kh), "tap rows a shared-memory stage (0: all)"},
               {"threads", {128, 256}, "threads a block"},
               {"blocks", kBlocks, "blocks an SM holds: registers capped to fit (0: no cap)"}}};
    case Which::kWgradNhwc: {
      std::vector<int> rt = upto({1, 2, 4, 8, 16}, v.kw);
      for (int x = std::min(v.kw, 8); x >= 1; x /= 2) rt.push_back(x);  // the default's halvings
      std::sort(rt.begin(), rt.end());
      rt.erase(std::unique(rt.begin(), rt.end()), rt.end());
      return {{{"lanes", {8, 16, 32}, "channel lanes of a block"},
               {"cvec", cvec_values(s.dtype), "channels a lane (vector loads)"},
               {"row_taps", rt, "taps of one filter row a task"},
               {"threads", {32, 64, 96, 128, 160, 192, 224, 256}, "threads a block (lanes x thread groups)"},
               {"blocks", kBlocks, "blocks an SM holds: registers capped to fit (0: no cap)"}}};
    }
    case Which::kWgradMma:
      return {{{"tile_h", {16, 32, 64}, "dy rows of a block"},
               {"tile_w", {16, 32, 64}, "dy columns of a block (whole 16-column groups)"},
               {"mwarps", {1, 2, 4}, "warps along the filter's 16-row blocks"},
               {"nwarps", {1, 2, 4, 8}, "warps along the filter's 8-column blocks"},
               {"ksplit", {1, 2, 4, 8}, "warps splitting the x rows"},
               {"blocks", kBlocks, "blocks an SM holds: registers capped to fit (0: no cap)"}}};
    case Which::kReduce: return {{{"threads", {64, 128, 256, 512}, "threads a block"}}};
  }
  return {};
}

// ---- rejects, defaults, geometry, Cfg -------------------------------------------------------------------

std::optional<std::string> reject(const OpSpec& s, const Tile& t, const DeviceLimits& d, const Shape* sh) {
  const auto v = vals(s);
  const auto w = which(s);
  std::optional<gd::Problem> p;
  if (sh) p = problem(*sh);
  const gd::Problem* pp = p ? &*p : nullptr;
  switch (w) {
    case Which::kFwdDirect:
    case Which::kDgradDirect: {
      const auto dt = direct_tile(t);
      if (dt.kc > 0 && dt.kc >= sub_rows(s))
        return fmt::format("kc={} is not below the {} sub-filter rows; supported: 0 (all) or [1, {}]", dt.kc, sub_rows(s),
                           sub_rows(s) - 1);
      return gd::direct_reject(v, dt, pass_of(w), d, pp);
    }
    case Which::kFwdNhwc:
    case Which::kDgradNhwc: return gd::nhwc_reject(v, nhwc_tile(t), pass_of(w), d, pp);
    case Which::kFwdMma:
    case Which::kDgradMma: return gd::mma_reject(v, mma_tile(t), pass_of(w), d, pp);
    case Which::kWgradDirect: {
      const auto wt = wgrad_direct_tile(t);
      if (wt.kc > 0 && wt.kc >= v.kh)
        return fmt::format("kc={} is not below kh={}; supported: 0 (all) or [1, {}]", wt.kc, v.kh, v.kh - 1);
      return gd::wgrad_direct_reject(v, wt, d, pp);
    }
    case Which::kWgradNhwc: {
      const auto wt = wgrad_nhwc_tile(t);
      if (wt.vc > v.kw) return fmt::format("row_taps={} exceeds kw={}; supported: [1, {}]", wt.vc, v.kw, std::min(16, v.kw));
      return gd::wgrad_nhwc_reject(v, wt, d, pp);
    }
    case Which::kWgradMma: return gd::wgrad_mma_reject(v, wgrad_mma_tile(t), d, pp);
    case Which::kReduce: {
      if (sh && sh->C * sh->H > INT32_MAX)
        return fmt::format("C x (kh*kw + 1) = {} values exceed 2^31-1", sh->C * sh->H);
      return gd::detail::reject_threads(t.get("threads"), d);
    }
  }
  return std::nullopt;
}

Tile default_tile(const OpSpec& s, const Shape& sh, const DeviceLimits& d) {
  const auto v = vals(s);
  const auto p = problem(sh);
  switch (which(s)) {
    case Which::kFwdDirect:
    case Which::kDgradDirect: return of(gd::direct_default(v, pass_of(which(s)), p, d));
    case Which::kFwdNhwc:
    case Which::kDgradNhwc: return of(gd::nhwc_default(v, pass_of(which(s)), p, d));
    case Which::kFwdMma:
    case Which::kDgradMma: return of(gd::mma_default(v, pass_of(which(s)), p, d));
    case Which::kWgradDirect: return of(gd::wgrad_direct_default(v, p, d));
    case Which::kWgradNhwc: return of(gd::wgrad_nhwc_default(v, p, d));
    case Which::kWgradMma: return of(gd::wgrad_mma_default(v, p, d));
    case Which::kReduce: return Tile::of({{"threads", gd::ReduceTile{}.threads}});
  }
  return {};
}

LaunchGeometry geometry(const OpSpec& s, const Tile& t, const Shape& sh) {
  const auto v = vals(s);
  const auto p = problem(sh);
  gd::Launch l;
  LaunchGeometry g;
  std::optional<dwc::PartStrides> part;
  switch (which(s)) {
    case Which::kFwdDirect:
    case Which::kDgradDirect: l = gd::direct_geometry(v, direct_tile(t), pass_of(which(s)), p); break;
    case Which::kFwdNhwc:
    case Which::kDgradNhwc: l = gd::nhwc_geometry(v, nhwc_tile(t), pass_of(which(s)), p); break;
    case Which::kFwdMma:
    case Which::kDgradMma: l = gd::mma_geometry(v, mma_tile(t), pass_of(which(s)), p); break;
    case Which::kWgradDirect:
      l = gd::wgrad_direct_geometry(v, wgrad_direct_tile(t), p);
      part = gd::wgrad_direct_part_strides(v, p, l.chunks);
      break;
    case Which::kWgradNhwc:
      l = gd::wgrad_nhwc_geometry(v, wgrad_nhwc_tile(t), p);
      part = gd::wgrad_nhwc_part_strides(v, p, l.chunks);
      break;
    case Which::kWgradMma:
      l = gd::wgrad_mma_geometry(v, wgrad_mma_tile(t), p);
      part = gd::wgrad_mma_part_strides(v, p, l.chunks);
      break;
    case Which::kReduce: {
      const int threads = t.get("threads");
      const int64_t blocks = (sh.C * sh.H + threads - 1) / threads;
      g.grid[0] = static_cast<unsigned>(blocks);
      g.block[0] = static_cast<unsigned>(threads);
      g.blocks = double(blocks);
      return g;
    }
  }
  g.grid[0] = l.grid;
  g.block[0] = l.block;
  g.smem_bytes = l.smem_bytes;
  // The grid count in floating point, from the same products as the Launch (which is 32-bit).
  const int64_t tiles = int64_t(std::max(l.tiles_h, 1)) * std::max(l.tiles_w, 1);
  switch (which(s)) {
    case Which::kFwdDirect:
    case Which::kDgradDirect:
    case Which::kFwdMma:
    case Which::kDgradMma: g.blocks = double(p.B) * double(p.C) * double(tiles); break;
    case Which::kFwdNhwc:
    case Which::kDgradNhwc: {
      const auto nt = nhwc_tile(t);
      g.blocks = double(p.B) * double((p.C + nt.lanes * nt.vec - 1) / (nt.lanes * nt.vec)) * double(tiles);
      break;
    }
    case Which::kWgradDirect:
    case Which::kWgradMma: g.blocks = double(p.C) * l.chunks; break;
    case Which::kWgradNhwc: {
      const auto nt = wgrad_nhwc_tile(t);
      g.blocks = double((p.C + nt.lanes * nt.vec - 1) / (nt.lanes * nt.vec)) * l.chunks;
      break;
    }
    case Which::kReduce: break;
  }
  g.values["tiles_h"] = l.tiles_h;
  g.values["tiles_w"] = l.tiles_w;
  if (part) {
    g.values["chunks"] = l.chunks;
    g.values["part_st0"] = part->st[0];
    g.values["part_st1"] = part->st[1];
    g.values["part_st2"] = part->st[2];
    g.values["partial_floats"] = dwc::part_floats(static_cast<int>(p.C), l.chunks, v.kh * v.kw);
  }
  return g;
}

std::string cfg(const OpSpec& s, const Tile& t) {
  const auto v = vals(s);
  switch (which(s)) {
    case Which::kFwdDirect:
    case Which::kDgradDirect: return gd::direct_cfg(v, direct_tile(t), pass_of(which(s)));
    case Which::kFwdNhwc:
    case Which::kDgradNhwc: return gd::nhwc_cfg(v, nhwc_tile(t), pass_of(which(s)));
    case Which::kFwdMma:
    case Which::kDgradMma: return gd::mma_cfg(v, mma_tile(t), pass_of(which(s)));
    case Which::kWgradDirect: return gd::wgrad_direct_cfg(v, wgrad_direct_tile(t));
    case Which::kWgradNhwc: return gd::wgrad_nhwc_cfg(v, wgrad_nhwc_tile(t));
    case Which::kWgradMma: return gd::wgrad_mma_cfg(v, wgrad_mma_tile(t));
    case Which::kReduce: return gd::wgrad_reduce_cfg(gd::ReduceTile{t.get("threads")});
  }
  return {};
}

std::string describe(const OpSpec& s) {
  if (which(s) == Which::kReduce) return "";
  return fmt::format("kh={} kw={} stride={} dil={}", s.get("kh"), s.get("kw"), s.get("stride"), s.get("dil"));
}

bool is_mma(Which w) { return w == Which::kFwdMma || w == Which::kDgradMma || w == Which::kWgradMma; }

// The tensor-core kernels' spec domain (16-bit, stride 1, dilation 1); threads from their warps.
void validate_mma(const OpSpec& s, std::vector<std::string>& e) {
  if (auto r = gd::mma_spec_error(vals(s))) e.push_back(*r);
}
int mma_threads(const OpSpec& s, const Tile& t) {
  return which(s) == Which::kWgradMma ? gd::wgrad_mma_threads(wgrad_mma_tile(t)) : gd::mma_threads(mma_tile(t));
}

KernelDef kernel(const char* name, const char* header, const char* fn) {
  KernelDef k;
  k.name = name;
  k.template_header = header;
  k.device_fn = fn;
  k.params_type = "DWConvParams";
  k.fields = {"kh", "kw", "stride", "dil"};
  k.space = space;
  k.reject = reject;
  k.default_tile = default_tile;
  k.geometry = geometry;
  k.cfg_body = cfg;
  k.describe = describe;
  return k;
}

}  // namespace

FamilyDef dwconv_family() {
  FamilyDef f;
  f.name = "dwconv";
  for (const auto& x : gd::spec_fields()) {
    SpecField sf;
    sf.name = x.name, sf.lo = x.lo, sf.hi = x.hi, sf.def = x.def, sf.token = x.token, sf.doc = x.doc;
    f.fields.push_back(sf);
  }
  // Axes WTConv also has (tile_h/tile_w, threads, blocks) are declared as WTConv declares them; the others'
  // tokens are this family's own (no other family's token, so names parse one way).
  f.axes = {
      {"tile_h", "t", "output rows of a block (wgrad: dy rows)", 0, "tile_w"},
      {"tile_w", "", "output columns of a block (wgrad: dy columns)", 0},
      {"ry", "ry", "direct, nhwc: output rows a thread (register tile)", 1},
      {"rx", "rx", "direct, nhwc: output columns a thread", 2},
      {"kc", "kc", "direct, wgrad_direct: sub-filter (tap) rows a shared-memory stage; 0: all", 3},
      {"lanes", "ln", "nhwc kernels: channel lanes of a block", 4},
      {"cvec", "cv", "nhwc kernels: channels a lane (vector loads of cvec elements)", 5},
      {"tap_rows", "tr", "wgrad_direct: tap rows a thread", 6},
      {"tap_cols", "tc", "wgrad_direct: tap columns a thread", 7},
      {"row_taps", "rt", "wgrad_nhwc: taps of one filter row a task", 8},
      {"mwarps", "mw", "mma kernels: warps along output rows (threads = 32 mwarps nwarps)", 9},
      {"nwarps", "nw", "mma kernels: warps along output columns (wgrad_mma: along the filter's 8-column blocks)", 10},
      {"ksplit", "ks", "wgrad_mma: warps splitting the x rows, their sums added in order", 11},
      {"blocks", "b", "blocks an SM should hold: registers capped to fit them (__launch_bounds__); 0: no cap", 12},
      {"threads", "w", "threads per block", 13, "", true},
  };
  f.kernels = {kernel("dwconv_fwd_direct", "dwconv/direct.cuh", "dwconv_direct"),
               kernel("dwconv_dgrad_direct", "dwconv/direct.cuh", "dwconv_direct"),
               kernel("dwconv_fwd_nhwc", "dwconv/nhwc.cuh", "dwconv_nhwc"),
               kernel("dwconv_dgrad_nhwc", "dwconv/nhwc.cuh", "dwconv_nhwc"),
               kernel("dwconv_fwd_mma", "dwconv/mma.cuh", "dwconv_mma"),
               kernel("dwconv_dgrad_mma", "dwconv/mma.cuh", "dwconv_mma"),
               kernel("dwconv_wgrad_direct", "dwconv/wgrad_direct.cuh", "dwconv_wgrad_direct"),
               kernel("dwconv_wgrad_nhwc", "dwconv/wgrad_nhwc.cuh", "dwconv_wgrad_nhwc"),
               kernel("dwconv_wgrad_mma", "dwconv/wgrad_mma.cuh", "dwconv_wgrad_mma"),
               kernel("dwconv_wgrad_reduce", "dwconv/wgrad_reduce.cuh", "dwconv_wgrad_reduce")};
  for (auto& k : f.kernels)
    if (is_mma(which(k.name))) k.validate = validate_mma, k.threads = mma_threads;
  auto& red = f.kernels.back();
  red.fields = {};
  red.has_dtype = false;  // fp32 partials whatever the activations' dtype: one binary
  return f;
}

}  // namespace lkjit::gen
