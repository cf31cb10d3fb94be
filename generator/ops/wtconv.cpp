// The WTConv family: spec rules, tile spaces, heuristic defaults, launch geometry and the Cfg each
// template is instantiated with. Shared-memory formulas here mirror the layouts in templates/wtconv/.
#include <fmt/format.h>

#include <algorithm>

#include "generator/ops/wtconv_common.h"
#include "lkjit/error.h"

namespace lkjit::gen {
namespace wtconv {
// ---- fold -------------------------------------------------------------------------------------
TileSpace fold_space(const OpSpec&) { return {{{"threads", {256}, "threads per block"}}}; }
std::optional<std::string> fold_reject(const OpSpec&, const Tile& t, const DeviceLimits& d, const Shape*) {
  return reject_threads(t, d);
}
Tile fold_default(const OpSpec&, const Shape&, const DeviceLimits&) { return Tile{0, 0, 0, 0, 256}; }
LaunchGeometry fold_geometry(const OpSpec& s, const Tile& t, const Shape& sh) {
  LaunchGeometry g;
  const int64_t n = sh.C * s.k * s.k * (1 + 4 * int64_t(s.L)) + sh.C;
  g.grid[0] = static_cast<unsigned>(std::min<int64_t>(cdiv(n, t.threads), 4096));
  g.block[0] = t.threads;
  return g;
}
std::string fold_cfg(const OpSpec& s, const Tile& t) {
  return fmt::format("  static constexpr int k = {}, L = {}, threads = {};\n", s.k, s.L, t.threads);
}
std::string fold_name(const OpSpec& s, const Tile& t) {
  return fmt::format("wtconv_fold_k{}_L{}_{}", s.k, s.L, t.to_string());
}

// ---- forward, plane-resident --------------------------------------------------------------------
int64_t plane_smem_floats(const OpSpec& s, const Tile& t, const Shape& sh) {
  const auto f = plane_image_floats(s, t.vy, sh);
  const int64_t kk = int64_t(s.k) * s.k, ws = round4(kk + 1) + 4 * round4(kk) * s.L;  // 16-byte aligned tap sets
  return round4(f.xs + f.ys + f.levels + ws) * t.planes;
}

TileSpace plane_space(const OpSpec&) {
  return {{{"planes", {1, 2, 4, 8, 16}, "(b,c) planes per block, one warp group each"},
           {"vy", {1, 2, 4, 8}, "output rows per thread"},
           {"threads", {32, 64, 128, 256, 512}, "threads per block (threads/planes per plane)"}}};
}
std::optional<std::string> plane_reject(const OpSpec& s, const Tile& t, const DeviceLimits& d,
                                        const Shape* sh) {
  return plane_reject_with(s, t, d, sh, plane_smem_floats);
}
Tile plane_default(const OpSpec& s, const Shape& sh, const DeviceLimits& d) {
  return plane_default_with(s, sh, d, plane_smem_floats, 56 * 1024, false);
}
LaunchGeometry plane_geometry(const OpSpec& s, const Tile& t, const Shape& sh) {
  return plane_geometry_with(s, t, sh, plane_smem_floats);
}
std::string fwd_plane_name(const OpSpec& s, const Tile& t) {
  return fmt::format("wtconv_fwd_plane_{}_k{}_L{}_{}", to_string(s.dtype), s.k, s.L, t.to_string());
}

// ---- forward, tiled (level + synthesis) -----------------------------------------------------------
TileSpace tiled_space(const OpSpec&) {
  return {{{"tile_h", {8, 16, 32, 64}, "output rows per block"},
           {"tile_w", {16, 32, 64}, "output cols per block"},
           {"vy", {1, 2, 4, 8}, "output rows per thread"},
           {"threads", {128, 256, 512}, "threads per block"}}};
}
int64_t level_smem_floats(const OpSpec& s, const Tile& t) {
  const int r = R(s);
  return 4 * int64_t(t.tile_h + 2 * r + t.vy) * odd_pitch(t.tile_w + 2 * r) + 4 * s.k * s.k;
}
int64_t synth_smem_floats(const OpSpec& s, const Tile& t, int stride) {
  const int r = R(s);
  int64_t n = int64_t((t.tile_h - 1) * stride + 1 + 2 * r + t.vy) * odd_pitch((t.tile_w - 1) * stride + 1 + 2 * r) +
              s.k * s.k;
  // Z_l under the tile: at most ((extent-1) >> l) + 2 rows/cols per level (alignment adds one).
  for (int l = 1; l <= s.L; ++l)
    n += 4 * int64_t((((t.tile_h - 1) * stride) >> l) + 2) * ((((t.tile_w - 1) * stride) >> l) + 2);
  return n;
}
std::optional<std::string> tiled_reject_common(const Tile& t, const DeviceLimits& d) {
  if (auto r = reject_threads(t, d)) return r;
  if (t.tile_h < 1 || t.tile_w < 1 || t.tile_h > 256 || t.tile_w > 256)
    return fmt::format("tile {}x{} is out of range; supported: [1, 256] each", t.tile_h, t.tile_w);
  if (t.vy < 1 || t.tile_h % t.vy != 0)
    return fmt::format("vy={} must divide tile_h={}", t.vy, t.tile_h);
  return std::nullopt;
}
std::optional<std::string> level_reject(const OpSpec& s, const Tile& t, const DeviceLimits& d, const Shape*) {
  if (auto r = tiled_reject_common(t, d)) return r;
  return reject_smem(level_smem_floats(s, t) * 4, d);
}
std::optional<std::string> synth_reject(const OpSpec& s, const Tile& t, const DeviceLimits& d,
                                        const Shape* sh) {
  if (auto r = tiled_reject_common(t, d)) return r;
  return reject_smem(synth_smem_floats(s, t, sh ? sh->stride : 1) * 4, d);
}
Tile level_default(const OpSpec& s, const Shape& sh, const DeviceLimits&) {
  const int64_t h = (sh.H + 1) / 2;
  if (s.k > 11) return Tile{16, 32, 0, 2, 256};
  return h <= 16 ? Tile{16, 16, 0, 4, 128} : Tile{32, 32, 0, 4, 256};
}
Tile synth_default(const OpSpec& s, const Shape& sh, const DeviceLimits&) {
  if (s.k > 11) return Tile{16, 32, 0, 2, 256};
  // 32x32 tiles at 128 threads: the exhaustive best at 256x256 on an H200 (bench/RESULTS.md section 6).
  return sh.H <= 32 ? Tile{16, 32, 0, 4, 128} : Tile{32, 32, 0, 2, 128};
}
// Level kernel: `shape` is its input low band (H, W = h_{l-1}, w_{l-1}).
LaunchGeometry level_geometry(const OpSpec& s, const Tile& t, const Shape& sh) {
  return tiled_geometry(sh, (sh.H + 1) / 2, (sh.W + 1) / 2, t, level_smem_floats(s, t));
}
LaunchGeometry synth_geometry(const OpSpec& s, const Tile& t, const Shape& sh) {
  return tiled_geometry(sh, sh.H_out(), sh.W_out(), t, synth_smem_floats(s, t, sh.stride));
}
std::string level_cfg(const OpSpec& s, const Tile& t) {
  return fmt::format(
      "  using TIn = {};\n  static constexpr bool first = {};\n"
      "  static constexpr int k = {}, R = {}, vy = {}, tile_h = {}, tile_w = {}, threads = {};\n",
      s.first ? ctype(s.dtype) : "float", s.first ? "true" : "false", s.k, R(s), t.vy, t.tile_h,
      t.tile_w, t.threads);
}
std::string synth_cfg(const OpSpec& s, const Tile& t) {
  return base_cfg(s, t) + fmt::format("  static constexpr int tile_h = {}, tile_w = {};\n", t.tile_h, t.tile_w);
}
std::string fwd_level_name(const OpSpec& s, const Tile& t) {
  // Deeper levels read an fp32 low band whatever the dtype: one binary serves every dtype.
  return fmt::format("wtconv_fwd_level{}_{}_k{}_{}", s.first ? "1" : "N",
                     s.first ? to_string(s.dtype) : "f32", s.k, t.to_string());
}
std::string fwd_synth_name(const OpSpec& s, const Tile& t) {
  return fmt::format("wtconv_fwd_synth_{}_k{}_L{}_{}", to_string(s.dtype), s.k, s.L, t.to_string());
}

// ---- layout transpose (NHWC <-> NCHW around the plane kernels) ---------------------------------------
TileSpace transpose_space(const OpSpec&) { return {{{"threads", {128, 256}, "threads per block"}}}; }
std::optional<std::string> transpose_reject(const OpSpec&, const Tile& t, const DeviceLimits& d, const Shape*) {
  if (t.threads != 128 && t.threads != 256)
    return fmt::format("threads={} is not supported; supported: 128, 256", t.threads);
  return reject_threads(t, d);
}
// 128 threads: 16 word loads in flight per thread (16-bit path) and 13 blocks per SM, by the 16.6 KB tile
// (256 threads: 8 loads and 8 blocks).
Tile transpose_default(const OpSpec&, const Shape&, const DeviceLimits&) { return Tile{0, 0, 0, 0, 128}; }
LaunchGeometry transpose_geometry(const OpSpec&, const Tile& t, const Shape& sh) {
  LaunchGeometry g;  // one block per 64-channel x 64-pixel tile of each image (kTransposeTile)
  g.grid[0] = static_cast<unsigned>(sh.B * cdiv(sh.C, 64) * cdiv(sh.H * sh.W, 64));
  g.block[0] = t.threads;
  return g;
}
std::string transpose_cfg(const OpSpec& s, const Tile& t) {
  return fmt::format("  using T = {};\n  static constexpr int threads = {};\n", ctype(s.dtype), t.threads);
}
std::string transpose_name(const OpSpec& s, const Tile& t) {
  return fmt::format("wtconv_transpose_{}_{}", to_string(s.dtype), t.to_string());
}

}  // namespace wtconv

std::vector<KernelTraits> wtconv_bwd_kernels();   // ops/wtconv_bwd.cpp
std::vector<KernelTraits> wtconv_lane_kernels();  // ops/wtconv_lane.cpp

std::vector<KernelTraits> wtconv_kernels() {
  using namespace wtconv;
  std::vector<KernelTraits> v = {
      {Kernel::kWTConvFold, "wtconv/fold.cuh", "wtconv_fold", "WTConvParams", validate_common,
       fold_space, fold_reject, fold_default, fold_geometry, fold_cfg, fold_name},
      {Kernel::kWTConvFwdPlane, "wtconv/fwd_plane.cuh", "wtconv_fwd_plane", "WTConvParams",
       validate_common, plane_space, plane_reject, plane_default, plane_geometry, plane_cfg,
       fwd_plane_name},
      {Kernel::kWTConvFwdLevel, "wtconv/fwd_level.cuh", "wtconv_fwd_level", "WTConvParams",
       validate_common, tiled_space, level_reject, level_default, level_geometry, level_cfg,
       fwd_level_name},
      {Kernel::kWTConvFwdSynth, "wtconv/fwd_synth.cuh", "wtconv_fwd_synth", "WTConvParams",
       validate_common, tiled_space, synth_reject, synth_default, synth_geometry, synth_cfg,
       fwd_synth_name},
  };
  for (auto& t : wtconv_bwd_kernels()) v.push_back(t);
  for (auto& t : wtconv_lane_kernels()) v.push_back(t);
  v.push_back({Kernel::kWTConvTranspose, "wtconv/transpose.cuh", "wtconv_transpose", "WTConvParams", validate_common,
               transpose_space, transpose_reject, transpose_default, transpose_geometry, transpose_cfg,
               transpose_name});
  return v;
}

}  // namespace lkjit::gen
