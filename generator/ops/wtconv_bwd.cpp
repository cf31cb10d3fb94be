// The WTConv backward kernels: plane-resident and tiled dgrad/wgrad, and the deterministic reduction.
// Shared-memory formulas mirror templates/wtconv/bwd_*.cuh and reduce.cuh.
#include "generator/ops/wtconv_common.h"

namespace lkjit::gen {
namespace wtconv {
namespace {

// ---- plane-resident ------------------------------------------------------------------------------
int64_t bwd_plane_smem_floats(const WSpec& s, const WTile& t, const Shape& sh) {
  const auto f = plane_image_floats(s, t.vy, sh);
  const int64_t wf = round4(int64_t(s.k) * s.k) * (1 + 4 * s.L), red = t.threads / std::max(t.planes, 1) / 32;
  return round4(2 * f.xs + 2 * f.ys + f.levels + wf + red + 2) * t.planes;  // + 2: the dX claim counter, flag
}
TileSpace bwd_plane_space(const WSpec& s) { return plane_space_with(s, "threads per block"); }
std::optional<std::string> bwd_plane_reject(const WSpec& s, const WTile& t, const DeviceLimits& d, const Shape* sh) {
  return plane_reject_with(s, t, d, sh, bwd_plane_smem_floats);
}
WTile bwd_plane_default(const WSpec& s, const Shape& sh, const DeviceLimits& d) {
  return plane_default_with(s, sh, d, bwd_plane_smem_floats, 80 * 1024, true);
}
LaunchGeometry bwd_plane_geometry(const WSpec& s, const WTile& t, const Shape& sh) {
  return plane_geometry_with(s, t, sh, bwd_plane_smem_floats);
}
std::string bwd_plane_name(const WSpec& s, const WTile& t) {
  return fmt::format("wtconv_bwd_plane_{}_k{}_L{}{}_{}", to_string(s.dtype), s.k, s.L, layout_word(s), t.to_string());
}

// ---- tiled ---------------------------------------------------------------------------------------
int64_t bwd_level_smem_floats(const WSpec& s, const WTile& t) {
  const int r = R(s);
  return 8 * int64_t(t.tile_h + 2 * r + t.vy) * odd_pitch(t.tile_w + 2 * r) + 4 * s.k * s.k + t.threads;
}
int64_t bwd_synth_smem_floats(const WSpec& s, const WTile& t) {
  const int r = R(s);
  int64_t n = 2 * int64_t(t.tile_h + 2 * r + t.vy) * odd_pitch(t.tile_w + 2 * r) + s.k * s.k + t.threads;
  for (int l = 1; l <= s.L; ++l) n += 4 * int64_t(((t.tile_h - 1) >> l) + 2) * (((t.tile_w - 1) >> l) + 2);
  return n;
}
std::optional<std::string> bwd_level_reject(const WSpec& s, const WTile& t, const DeviceLimits& d, const Shape*) {
  if (auto r = tiled_reject_common(t, d)) return r;
  return reject_smem(bwd_level_smem_floats(s, t) * 4, d);
}
std::optional<std::string> bwd_synth_reject(const WSpec& s, const WTile& t, const DeviceLimits& d, const Shape*) {
  if (auto r = tiled_reject_common(t, d)) return r;
  return reject_smem(bwd_synth_smem_floats(s, t) * 4, d);
}
WTile bwd_tiled_default(const WSpec& s, const Shape& sh, const DeviceLimits&) {
  if (s.k > 11) return WTile{16, 32, 0, 2, 256};
  return sh.H <= 32 ? WTile{16, 16, 0, 4, 128} : WTile{32, 32, 0, 4, 256};
}
// Synthesis: 32x64 tiles, two rows per thread: the exhaustive best at 256x256 on an H200 (RESULTS.md §6).
WTile bwd_synth_default(const WSpec& s, const Shape& sh, const DeviceLimits& d) {
  if (s.k > 11 || sh.H <= 32) return bwd_tiled_default(s, sh, d);
  return WTile{32, 64, 0, 2, 256};
}
// Level kernel: `shape` is its input low band (h_{l-1} x w_{l-1}).
LaunchGeometry bwd_level_geometry(const WSpec& s, const WTile& t, const Shape& sh) {
  return tiled_geometry(sh, (sh.H + 1) / 2, (sh.W + 1) / 2, t, bwd_level_smem_floats(s, t));
}
LaunchGeometry bwd_synth_geometry(const WSpec& s, const WTile& t, const Shape& sh) {
  return tiled_geometry(sh, sh.H, sh.W, t, bwd_synth_smem_floats(s, t));
}
std::string bwd_level_cfg(const WSpec& s, const WTile& t) {
  return fmt::format(
      "  using TIn = {};\n  static constexpr bool first = {};\n"
      "  static constexpr int k = {}, R = {}, vy = {}, tile_h = {}, tile_w = {}, threads = {};\n",
      s.first ? ctype(s.dtype) : "float", s.first ? "true" : "false", s.k, R(s), t.vy, t.tile_h, t.tile_w,
      t.threads);
}
std::string bwd_synth_cfg(const WSpec& s, const WTile& t) {
  return base_cfg(s, t) + fmt::format("  static constexpr int tile_h = {}, tile_w = {};\n", t.tile_h, t.tile_w);
}
std::string bwd_level_name(const WSpec& s, const WTile& t) {
  return fmt::format("wtconv_bwd_level{}_{}_k{}_{}", s.first ? "1" : "N", s.first ? to_string(s.dtype) : "f32",
                     s.k, t.to_string());
}
std::string bwd_synth_name(const WSpec& s, const WTile& t) {
  return fmt::format("wtconv_bwd_synth_{}_k{}_L{}_{}", to_string(s.dtype), s.k, s.L, t.to_string());
}

// ---- reduce --------------------------------------------------------------------------------------
// One block per (channel, group: W~0 and b~, or one level); a warp sums 32-value chunks over rows, spare
// warps splitting a chunk's rows: more threads shorten the chain of dependent loads.
TileSpace reduce_space(const WSpec&) {
  return {{{"threads", {128, 256, 512, 1024},
             "threads per block (one block per channel and group; warps over 32-value chunks, then over rows)"}}};
}
// Shared memory: the dynamic dW~ buffer of one group (4k^2 floats, or k^2 + 1 for the base group), and the
// static red[threads] where warps outnumber the base group's 32-value chunks at least twice (the kernel's
// kSplit; else unused).
int64_t reduce_dyn_smem_bytes(const WSpec& s) { return std::max<int64_t>(4 * s.k * s.k, s.k * s.k + 1) * 4; }
int64_t reduce_static_smem_bytes(const WSpec& s, const WTile& t) {
  return 2 * cdiv(s.k * s.k + 1, 32) <= t.threads / 32 ? int64_t(t.threads) * 4 : 0;
}
std::optional<std::string> reduce_reject(const WSpec& s, const WTile& t, const DeviceLimits& d, const Shape*) {
  if (auto r = reject_threads(t, d)) return r;
  return reject_smem(reduce_dyn_smem_bytes(s) + reduce_static_smem_bytes(s, t), d);
}
// 128: bf16 k=5 on an H200, the layer's backward 351 -> 343 us at 64x192x28x28 L=4 and 563 -> 559 at
// 64x96x56x56 L=5 against 512 (per-group blocks: 4 warps for a level's 4 chunks); even at 8x64x256x256.
WTile reduce_default(const WSpec&, const Shape&, const DeviceLimits&) { return WTile{0, 0, 0, 0, 128}; }
LaunchGeometry reduce_geometry(const WSpec& s, const WTile& t, const Shape& sh) {
  LaunchGeometry g;
  g.grid[0] = static_cast<unsigned>(sh.C);
  g.grid[1] = static_cast<unsigned>(1 + s.L);
  g.block[0] = t.threads;
  g.smem_bytes = static_cast<unsigned>(reduce_dyn_smem_bytes(s));
  return g;
}
std::string reduce_name(const WSpec& s, const WTile& t) {
  return fmt::format("wtconv_reduce_k{}_L{}_{}", s.k, s.L, t.to_string());
}

}  // namespace
}  // namespace wtconv

std::vector<KernelDef> wtconv_bwd_kernels() {
  using namespace wtconv;
  return {
      wtconv_kernel<bwd_plane_space, bwd_plane_reject, bwd_plane_default, bwd_plane_geometry, plane_cfg, bwd_plane_name>(
          kWTConvBwdPlane, "wtconv/bwd_plane.cuh", "wtconv_bwd_plane"),
      wtconv_kernel<tiled_space, bwd_level_reject, bwd_tiled_default, bwd_level_geometry, bwd_level_cfg, bwd_level_name>(
          kWTConvBwdLevel, "wtconv/bwd_level.cuh", "wtconv_bwd_level"),
      wtconv_kernel<tiled_space, bwd_synth_reject, bwd_synth_default, bwd_synth_geometry, bwd_synth_cfg, bwd_synth_name>(
          kWTConvBwdSynth, "wtconv/bwd_synth.cuh", "wtconv_bwd_synth"),
      wtconv_kernel<reduce_space, reduce_reject, reduce_default, reduce_geometry, reduce_cfg, reduce_name>(
          kWTConvReduce, "wtconv/reduce.cuh", "wtconv_reduce"),
  };
}

}  // namespace lkjit::gen
