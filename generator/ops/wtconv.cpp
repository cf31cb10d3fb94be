// The WTConv family: spec rules, tile spaces, heuristic defaults, launch geometry and the Cfg each
// template is instantiated with. Shared-memory formulas here mirror the layouts in templates/wtconv/.
#include <fmt/format.h>

#include <algorithm>

#include "generator/ops/wtconv_common.h"
#include "lkjit/error.h"

namespace lkjit::gen {
namespace wtconv {
// ---- fold -------------------------------------------------------------------------------------
TileSpace fold_space(const WSpec&) { return {{{"threads", {256}, "threads per block"}}}; }
std::optional<std::string> fold_reject(const WSpec&, const WTile& t, const DeviceLimits& d, const Shape*) {
  return reject_threads(t, d);
}
WTile fold_default(const WSpec&, const Shape&, const DeviceLimits&) { return WTile{0, 0, 0, 0, 256}; }
LaunchGeometry fold_geometry(const WSpec& s, const WTile& t, const Shape& sh) {
  LaunchGeometry g;
  const int64_t n = sh.C * s.k * s.k * (1 + 4 * int64_t(s.L)) + sh.C;
  g.grid[0] = static_cast<unsigned>(std::min<int64_t>(cdiv(n, t.threads), 4096));
  g.block[0] = t.threads;
  return g;
}
std::string fold_cfg(const WSpec& s, const WTile& t) {
  return fmt::format("  static constexpr int k = {}, L = {}, threads = {};\n", s.k, s.L, t.threads);
}
std::string fold_name(const WSpec& s, const WTile& t) {
  return fmt::format("wtconv_fold_k{}_L{}_{}", s.k, s.L, t.to_string());
}

// ---- forward, plane-resident --------------------------------------------------------------------
int64_t plane_smem_floats(const WSpec& s, const WTile& t, const Shape& sh) {
  const auto f = plane_image_floats(s, t.vy, sh);
  const int64_t kk = int64_t(s.k) * s.k, ws = round4(kk + 1) + 4 * round4(kk) * s.L;  // 16-byte aligned tap sets
  return round4(f.xs + f.ys + f.levels + ws) * t.planes;
}

TileSpace plane_space(const WSpec& s) { return plane_space_with(s, "threads per block (threads/planes per plane)"); }
std::optional<std::string> plane_reject(const WSpec& s, const WTile& t, const DeviceLimits& d,
                                        const Shape* sh) {
  return plane_reject_with(s, t, d, sh, plane_smem_floats);
}
WTile plane_default(const WSpec& s, const Shape& sh, const DeviceLimits& d) {
  return plane_default_with(s, sh, d, plane_smem_floats, 56 * 1024, false);
}
LaunchGeometry plane_geometry(const WSpec& s, const WTile& t, const Shape& sh) {
  return plane_geometry_with(s, t, sh, plane_smem_floats);
}
std::string fwd_plane_name(const WSpec& s, const WTile& t) {
  return fmt::format("wtconv_fwd_plane_{}_k{}_L{}{}_{}", to_string(s.dtype), s.k, s.L, layout_word(s), t.to_string());
}

// ---- forward, tiled (level + synthesis) -----------------------------------------------------------
TileSpace tiled_space(const WSpec&) {
  return {{{"tile_h", {8, 16, 32, 64}, "output rows per block"},
           {"tile_w", {16, 32, 64}, "output cols per block"},
           {"vy", {1, 2, 4, 8}, "output rows per thread"},
           {"threads", {128, 256, 512}, "threads per block"}}};
}
int64_t level_smem_floats(const WSpec& s, const WTile& t) {
  const int r = R(s);
  return 4 * int64_t(t.tile_h + 2 * r + t.vy) * odd_pitch(t.tile_w + 2 * r) + 4 * s.k * s.k;
}
int64_t synth_smem_floats(const WSpec& s, const WTile& t, int stride) {
  const int r = R(s);
  int64_t n = int64_t((t.tile_h - 1) * stride + 1 + 2 * r + t.vy) * odd_pitch((t.tile_w - 1) * stride + 1 + 2 * r) +
              s.k * s.k;
  // Z_l under the tile: at most ((extent-1) >> l) + 2 rows/cols per level (alignment adds one).
  for (int l = 1; l <= s.L; ++l)
    n += 4 * int64_t((((t.tile_h - 1) * stride) >> l) + 2) * ((((t.tile_w - 1) * stride) >> l) + 2);
  return n;
}
std::optional<std::string> tiled_reject_common(const WTile& t, const DeviceLimits& d) {
  if (auto r = reject_threads(t, d)) return r;
  if (t.tile_h < 1 || t.tile_w < 1 || t.tile_h > 256 || t.tile_w > 256)
    return fmt::format("tile {}x{} is out of range; supported: [1, 256] each", t.tile_h, t.tile_w);
  if (t.vy < 1 || t.tile_h % t.vy != 0)
    return fmt::format("vy={} must divide tile_h={}", t.vy, t.tile_h);
  return std::nullopt;
}
std::optional<std::string> level_reject(const WSpec& s, const WTile& t, const DeviceLimits& d, const Shape*) {
  if (auto r = tiled_reject_common(t, d)) return r;
  return reject_smem(level_smem_floats(s, t) * 4, d);
}
std::optional<std::string> synth_reject(const WSpec& s, const WTile& t, const DeviceLimits& d,
                                        const Shape* sh) {
  if (auto r = tiled_reject_common(t, d)) return r;
  return reject_smem(synth_smem_floats(s, t, sh ? sh->stride : 1) * 4, d);
}
WTile level_default(const WSpec& s, const Shape& sh, const DeviceLimits&) {
  const int64_t h = (sh.H + 1) / 2;
  if (s.k > 11) return WTile{16, 32, 0, 2, 256};
  return h <= 16 ? WTile{16, 16, 0, 4, 128} : WTile{32, 32, 0, 4, 256};
}
WTile synth_default(const WSpec& s, const Shape& sh, const DeviceLimits&) {
  if (s.k > 11) return WTile{16, 32, 0, 2, 256};
  // 32x32 tiles at 128 threads: the exhaustive best at 256x256 on an H200 (bench/RESULTS.md section 6).
  return sh.H <= 32 ? WTile{16, 32, 0, 4, 128} : WTile{32, 32, 0, 2, 128};
}
// Level kernel: `shape` is its input low band (H, W = h_{l-1}, w_{l-1}).
LaunchGeometry level_geometry(const WSpec& s, const WTile& t, const Shape& sh) {
  return tiled_geometry(sh, (sh.H + 1) / 2, (sh.W + 1) / 2, t, level_smem_floats(s, t));
}
LaunchGeometry synth_geometry(const WSpec& s, const WTile& t, const Shape& sh) {
  return tiled_geometry(sh, sh.H_out(), sh.W_out(), t, synth_smem_floats(s, t, sh.stride));
}
std::string level_cfg(const WSpec& s, const WTile& t) {
  return fmt::format(
      "  using TIn = {};\n  static constexpr bool first = {};\n"
      "  static constexpr int k = {}, R = {}, vy = {}, tile_h = {}, tile_w = {}, threads = {};\n",
      s.first ? ctype(s.dtype) : "float", s.first ? "true" : "false", s.k, R(s), t.vy, t.tile_h,
      t.tile_w, t.threads);
}
std::string synth_cfg(const WSpec& s, const WTile& t) {
  return base_cfg(s, t) + fmt::format("  static constexpr int tile_h = {}, tile_w = {};\n", t.tile_h, t.tile_w);
}
std::string fwd_level_name(const WSpec& s, const WTile& t) {
  // Deeper levels read an fp32 low band whatever the dtype: one binary serves every dtype.
  return fmt::format("wtconv_fwd_level{}_{}_k{}_{}", s.first ? "1" : "N",
                     s.first ? to_string(s.dtype) : "f32", s.k, t.to_string());
}
std::string fwd_synth_name(const WSpec& s, const WTile& t) {
  return fmt::format("wtconv_fwd_synth_{}_k{}_L{}_{}", to_string(s.dtype), s.k, s.L, t.to_string());
}

// ---- layout transpose (NHWC <-> NCHW around the plane kernels) ---------------------------------------
TileSpace transpose_space(const WSpec&) { return {{{"threads", {128, 256}, "threads per block"}}}; }
std::optional<std::string> transpose_reject(const WSpec&, const WTile& t, const DeviceLimits& d, const Shape*) {
  if (t.threads != 128 && t.threads != 256)
    return fmt::format("threads={} is not supported; supported: 128, 256", t.threads);
  return reject_threads(t, d);
}
// 128 threads: 16 word loads in flight per thread (16-bit path) and 13 blocks per SM, by the 16.6 KB tile
// (256 threads: 8 loads and 8 blocks).
WTile transpose_default(const WSpec&, const Shape&, const DeviceLimits&) { return WTile{0, 0, 0, 0, 128}; }
LaunchGeometry transpose_geometry(const WSpec&, const WTile& t, const Shape& sh) {
  LaunchGeometry g;  // one block per 64-channel x 64-pixel tile of each image (kTransposeTile)
  g.grid[0] = static_cast<unsigned>(sh.B * cdiv(sh.C, 64) * cdiv(sh.H * sh.W, 64));
  g.block[0] = t.threads;
  return g;
}
std::string transpose_cfg(const WSpec& s, const WTile& t) {
  return fmt::format("  using T = {};\n  static constexpr int threads = {};\n", ctype(s.dtype), t.threads);
}
std::string transpose_name(const WSpec& s, const WTile& t) {
  return fmt::format("wtconv_transpose_{}_{}", to_string(s.dtype), t.to_string());
}

}  // namespace wtconv

std::vector<KernelDef> wtconv_bwd_kernels();   // ops/wtconv_bwd.cpp
std::vector<KernelDef> wtconv_lane_kernels();  // ops/wtconv_lane.cpp

// The family: its spec fields, tile axes (declared in --tile's positional order; printed p, t, v, b, w)
// and kernels.
FamilyDef wtconv_family() {
  using namespace wtconv;
  FamilyDef f;
  f.name = "wtconv";
  f.fields = {
      {"k", 1, kMaxK, 5, "k", "odd depthwise kernel size", fmt::format("odd k in [1, {}]", kMaxK)},
      {"L", 0, kMaxL, 0, "L", "wavelet levels (level kernels: 0, one binary serves every level)",
       fmt::format("L in [0, {}]", kMaxL)},
      {"first", 0, 1, 1, "", "level kernels: 1 reads X in the dtype, 0 an fp32 low band (others: 1)", ""},
      {"layout", 0, 1, 0, "l", "plane kernels: activations 0 NCHW, 1 channels_last (adds the cluster axis)", ""},
  };
  f.axes = {
      {"tile_h", "t", "output rows per block (tiled kernels)", 1, "tile_w"},
      {"tile_w", "", "output cols per block (tiled kernels); the widest plane (lane kernels)", 1},
      {"planes", "p", "(b,c) planes per block (plane and lane kernels)", 0},
      {"vy", "v", "output rows per thread (register blocking of the k x k conv)", 2},
      {"threads", "w", "threads per block", 4, "", true},
      {"blocks", "b", "blocks an SM should hold: registers capped to fit them (__launch_bounds__); 0: no cap", 3},
      {"cluster", "cl", "channels_last plane kernels (sm_90): blocks a thread-block cluster, staging their "
                        "channels' planes together; 0: none", 5},
  };
  f.kernels = {
      wtconv_kernel<fold_space, fold_reject, fold_default, fold_geometry, fold_cfg, fold_name>(
          kWTConvFold, "wtconv/fold.cuh", "wtconv_fold"),
      wtconv_kernel<plane_space, plane_reject, plane_default, plane_geometry, plane_cfg, fwd_plane_name>(
          kWTConvFwdPlane, "wtconv/fwd_plane.cuh", "wtconv_fwd_plane"),
      wtconv_kernel<tiled_space, level_reject, level_default, level_geometry, level_cfg, fwd_level_name>(
          kWTConvFwdLevel, "wtconv/fwd_level.cuh", "wtconv_fwd_level"),
      wtconv_kernel<tiled_space, synth_reject, synth_default, synth_geometry, synth_cfg, fwd_synth_name>(
          kWTConvFwdSynth, "wtconv/fwd_synth.cuh", "wtconv_fwd_synth"),
  };
  for (auto& k : wtconv_bwd_kernels()) f.kernels.push_back(k);
  for (auto& k : wtconv_lane_kernels()) f.kernels.push_back(k);
  f.kernels.push_back(wtconv_kernel<transpose_space, transpose_reject, transpose_default, transpose_geometry,
                                    transpose_cfg, transpose_name>(kWTConvTranspose, "wtconv/transpose.cuh",
                                                                   "wtconv_transpose"));
  return f;
}

}  // namespace lkjit::gen
