// The WTConv lane kernels (templates/wtconv/{fwd,bwd}_lane.cuh): one thread per (b,c) plane, for small
// planes of channels-innermost (NHWC) activations at stride 1. tile_w is the widest plane a binary takes
// (its register rows); H is free. Shared-memory formulas mirror the templates' headers.
#include "generator/ops/wtconv_common.h"

namespace lkjit::gen {
namespace wtconv {
namespace {

constexpr int kLaneMaxW = 16;
// Registers the widest phase keeps live (a window of K rows of tile_w + K - 1, a row of sums, the taps):
// above this the window spills to local memory.
constexpr int kLaneMaxRegs = 168;

int64_t lane_wmax(int64_t w, int l) { return l == 0 ? w : (lane_wmax(w, l - 1) + 1) / 2; }

// Floats per thread: the level images (forward: Y_l then Z_l in place; backward: dZ_l then dY_l), and in the
// backward also Y_1's LL and Y_l for l >= 2.
int64_t lane_thread_floats(const OpSpec& s, const Tile& t, const Shape& sh) {
  const auto lh = level_sizes(sh.H, s.L);
  int64_t n = 0;
  for (int l = 1; l <= s.L; ++l) n += 4 * lh[l] * lane_wmax(t.tile_w, l);
  if (s.kernel == Kernel::kWTConvBwdLane && s.L >= 1) n += n - 3 * lh[1] * lane_wmax(t.tile_w, 1);
  return n;
}
int64_t lane_smem_bytes(const OpSpec& s, const Tile& t, const Shape& sh) {
  return lane_thread_floats(s, t, sh) * t.threads * 4;
}

TileSpace lane_space(const OpSpec&) {
  return {{{"tile_w", {2, 4, 6, 8, 10, 12, 14, 16}, "widest plane (columns) a thread's register rows hold"},
           {"threads", {32, 64, 128, 256}, "threads per block, one (b,c) plane each"}}};
}

std::optional<std::string> lane_reject(const OpSpec& s, const Tile& t, const DeviceLimits& d, const Shape* sh) {
  if (auto r = reject_threads(t, d)) return r;
  if (t.tile_w < 1 || t.tile_w > kLaneMaxW)
    return fmt::format("tile_w={} is out of range; supported: [1, {}]", t.tile_w, kLaneMaxW);
  const int regs = s.k * (t.tile_w + s.k - 1) + t.tile_w + s.k * s.k;
  if (regs > kLaneMaxRegs)
    return fmt::format("k={} with tile_w={} keeps about {} registers of rows and taps; supported: "
                       "k*(tile_w+k-1) + tile_w + k*k <= {}", s.k, t.tile_w, regs, kLaneMaxRegs);
  if (!sh) return std::nullopt;
  if (sh->stride != 1) return fmt::format("stride={} is not supported by the lane kernels; supported: 1", sh->stride);
  if (sh->W > t.tile_w)
    return fmt::format("W={} exceeds tile_w={} (the widest plane of a lane binary); supported: W <= tile_w <= {}", sh->W,
                       t.tile_w, kLaneMaxW);
  return reject_smem(lane_smem_bytes(s, t, *sh), d);
}

// The plane's width rounded up to even (one binary for W = 13 and 14), and 64-thread blocks unless a block
// would take over a quarter of an SM's shared memory (then 32: more, smaller blocks per SM).
Tile lane_default(const OpSpec& s, const Shape& sh, const DeviceLimits& d) {
  Tile t{0, static_cast<int>(std::min<int64_t>(std::max<int64_t>((sh.W + 1) / 2 * 2, 2), kLaneMaxW)), 0, 0, 64};
  if (lane_smem_bytes(s, t, sh) > d.smem_per_sm / 4) t.threads = 32;
  return t;
}

LaunchGeometry lane_geometry(const OpSpec& s, const Tile& t, const Shape& sh) {
  LaunchGeometry g;
  g.grid[0] = static_cast<unsigned>(cdiv(sh.B * sh.C, t.threads));
  g.block[0] = t.threads;
  g.smem_bytes = static_cast<unsigned>(lane_smem_bytes(s, t, sh));
  return g;
}

std::string lane_cfg(const OpSpec& s, const Tile& t) {
  return fmt::format("  using T = {};\n  static constexpr int k = {}, R = {}, L = {}, threads = {}, wmax = {};\n",
                     ctype(s.dtype), s.k, R(s), s.L, t.threads, t.tile_w);
}
std::string fwd_lane_name(const OpSpec& s, const Tile& t) {
  return fmt::format("wtconv_fwd_lane_{}_k{}_L{}_{}", to_string(s.dtype), s.k, s.L, t.to_string());
}
std::string bwd_lane_name(const OpSpec& s, const Tile& t) {
  return fmt::format("wtconv_bwd_lane_{}_k{}_L{}_{}", to_string(s.dtype), s.k, s.L, t.to_string());
}

}  // namespace
}  // namespace wtconv

std::vector<KernelTraits> wtconv_lane_kernels() {
  using namespace wtconv;
  return {
      {Kernel::kWTConvFwdLane, "wtconv/fwd_lane.cuh", "wtconv_fwd_lane", "WTConvParams", validate_common, lane_space,
       lane_reject, lane_default, lane_geometry, lane_cfg, fwd_lane_name},
      {Kernel::kWTConvBwdLane, "wtconv/bwd_lane.cuh", "wtconv_bwd_lane", "WTConvParams", validate_common, lane_space,
       lane_reject, lane_default, lane_geometry, lane_cfg, bwd_lane_name},
  };
}

}  // namespace lkjit::gen
