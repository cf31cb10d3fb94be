// The WTConv lane kernels (templates/wtconv/{fwd,bwd}_lane.cuh): one thread per (b,c) plane (or two),
// for small planes of channels-innermost (NHWC) activations at stride 1. tile_w is the widest
// plane a binary takes (its register rows); H is free. planes: 0 = one thread per plane, threads / 2 =
// two. Shared-memory formulas mirror the templates' headers.
#include "generator/ops/wtconv_common.h"

namespace lkjit::gen {
namespace wtconv {
namespace {

constexpr int kLaneMaxW = 16;
// Registers the widest phase keeps live (a window of K rows of tile_w + K - 1, a row of sums, the taps):
// above this the window spills to local memory.
constexpr int kLaneMaxRegs = 168;

// Registers of rows and taps the widest phase keeps for plane width w: k rows of w + k - 1, a row of sums,
// the k*k taps (lane_reject's bound, kLaneMaxRegs).
int64_t lane_regs(int k, int64_t w) { return k * (w + k - 1) + w + k * k; }

int64_t lane_wmax(int64_t w, int l) { return l == 0 ? w : (lane_wmax(w, l - 1) + 1) / 2; }

// Floats per plane: the level images (forward: Y_l then Z_l in place; backward: dZ_l then dY_l, then all
// of Y_2 at L = 2, or the LL of Y_l for 2 <= l < L), subbands an odd number of floats apart in a forward
// with two threads a plane, and at the backward's level 1 and its stored Y_2.
int64_t lane_plane_floats(const WSpec& s, const WTile& t, const Shape& sh) {
  const bool bwd = s.kernel == kWTConvBwdLane;
  const auto lh = level_sizes(sh.H, s.L);
  int64_t n = 0;
  for (int l = 1; l <= s.L; ++l) {
    const int64_t sp = lh[l] * lane_wmax(t.tile_w, l);
    const bool odd = bwd ? l == 1 : t.planes != 0;
    n += 4 * (odd ? sp | 1 : sp);
    if (bwd && s.L == 2 && l == 2) n += 4 * (sp | 1);
    if (bwd && l >= 2 && l < s.L) n += sp;
  }
  return n;
}
int lane_block_planes(const WTile& t) { return t.planes ? t.planes : t.threads; }
int64_t lane_smem_bytes(const WSpec& s, const WTile& t, const Shape& sh) {
  return lane_plane_floats(s, t, sh) * lane_block_planes(t) * 4;
}
// Blocks an SM's shared memory holds (1 KiB of it reserved for each block).
int64_t lane_blocks_by_smem(const WSpec& s, const WTile& t, const Shape& sh, const DeviceLimits& d) {
  return d.smem_per_sm / (lane_smem_bytes(s, t, sh) + 1024);
}

TileSpace lane_space(const WSpec&) {
  return {{{"tile_w", {2, 4, 6, 8, 10, 12, 14, 16}, "widest plane (columns) a thread's register rows hold"},
           {"threads", {32, 64, 128, 256}, "threads per block"},
           {"planes", {0, 16, 32, 64, 128}, "(b,c) planes per block: 0 = one per thread, threads/2 = two threads per plane"},
           {"blocks", {0, 3, 6, 12}, "blocks an SM should hold: registers capped to fit them (0: no cap)"}}};
}

// The register cap of `blocks` blocks an SM: what ptxas allocates at most per thread, in its units of 8.
int64_t lane_reg_cap(const WTile& t, const DeviceLimits& d) {
  return d.regs_per_sm / (int64_t(t.blocks) * t.threads) / 8 * 8;
}
// A cap below this spills the register rows (lane_regs' bound plus addresses and counters); above 255
// (the most a thread can have) it caps nothing.
constexpr int kLaneMinRegCap = 168;

std::optional<std::string> lane_reject(const WSpec& s, const WTile& t, const DeviceLimits& d, const Shape* sh) {
  if (auto r = reject_threads(t, d)) return r;
  if (t.planes != 0 && 2 * t.planes != t.threads)
    return fmt::format("planes={} with threads={}; supported: planes = 0 (one thread per plane) or threads/2 "
                       "(two threads per plane)", t.planes, t.threads);
  if (t.tile_w < 1 || t.tile_w > kLaneMaxW)
    return fmt::format("tile_w={} is out of range; supported: [1, {}]", t.tile_w, kLaneMaxW);
  if (sh && sh->W > t.tile_w && sh->W <= kLaneMaxW) {
    // Where no tile_w >= W fits k's register rows, that is the reason (the default tile_w is capped by it).
    const int64_t need = lane_regs(s.k, sh->W);
    if (need > kLaneMaxRegs)
      return fmt::format("k={} with W={} needs tile_w >= {}, which keeps about {} registers of rows and taps; supported: "
                         "k*(tile_w+k-1) + tile_w + k*k <= {}", s.k, sh->W, sh->W, need, kLaneMaxRegs);
  }
  const int64_t regs = lane_regs(s.k, t.tile_w);
  if (regs > kLaneMaxRegs)
    return fmt::format("k={} with tile_w={} keeps about {} registers of rows and taps; supported: "
                       "k*(tile_w+k-1) + tile_w + k*k <= {}", s.k, t.tile_w, regs, kLaneMaxRegs);
  if (t.blocks < 0) return fmt::format("blocks={} is negative; supported: 0 (no cap) or blocks an SM", t.blocks);
  if (t.blocks) {
    const int64_t cap = lane_reg_cap(t, d);
    if (cap < kLaneMinRegCap || cap > 255)
      return fmt::format("blocks={} with threads={} caps registers at {} a thread; supported: a cap of {}..255 "
                         "(blocks * threads in {}..{})", t.blocks, t.threads, cap, kLaneMinRegCap,
                         d.regs_per_sm / 256 + 1, d.regs_per_sm / kLaneMinRegCap);
  }
  if (!sh) return std::nullopt;
  if (sh->stride != 1) return fmt::format("stride={} is not supported by the lane kernels; supported: 1", sh->stride);
  if (sh->W > t.tile_w)
    return fmt::format("W={} exceeds tile_w={} (the widest plane of a lane binary); supported: W <= tile_w <= {}", sh->W,
                       t.tile_w, kLaneMaxW);
  const int64_t bytes = lane_smem_bytes(s, t, *sh);
  if (auto r = reject_smem(bytes, d)) return r;
  // A cap that shared memory cannot use: fewer than `blocks` blocks fit an SM.
  const int64_t fit = lane_blocks_by_smem(s, t, *sh, d);
  if (t.blocks && fit < t.blocks)
    return fmt::format("blocks={}: shared memory holds {} blocks of {} B (and 1 KiB reserved each) an SM for this "
                       "shape; supported: blocks <= {}", t.blocks, fit, bytes, fit);
  return std::nullopt;
}

// The plane's width rounded up to even (one binary for W = 13 and 14), and 64-thread blocks unless a block
// would take over a quarter of an SM's shared memory (then 32: more, smaller blocks per SM). Each plane
// gets two threads where shared memory would hold fewer than 8 warps of one-thread planes per SM
// (registers allow 8-12): measured on an H200, bf16 k=5, 64x384x14x14 L=3 (4 warps of the backward's,
// 6 of the forward's): backward 198 us against 232, forward 41 against 50; 64x768x7x7 L=2 (14 warps):
// backward 93 us against 119 for two threads.
// tile_w is also capped where the register rows would not fit (k = 7: 8), so the default is valid for any
// k the kernels can run; a wider plane then fails lane_reject's W check, as it failed the register one.
WTile lane_default(const WSpec& s, const Shape& sh, const DeviceLimits& d) {
  int wcap = kLaneMaxW;
  while (wcap > 2 && lane_regs(s.k, wcap) > kLaneMaxRegs) wcap -= 2;  // even, as tile_space
  WTile t{0, static_cast<int>(std::min<int64_t>(std::max<int64_t>((sh.W + 1) / 2 * 2, 2), std::min(kLaneMaxW, wcap))),
         0, 0, 64};
  if (d.smem_per_sm / (32 * 4 * std::max<int64_t>(lane_plane_floats(s, t, sh), 1)) < 8) t.planes = t.threads / 2;
  if (lane_smem_bytes(s, t, sh) > d.smem_per_sm / 4) {
    t.threads = 32;
    if (t.planes) t.planes = 16;
  }
  // The backward's registers (190-255 uncapped) allow about 4 of its blocks an SM. Where the planes need
  // more than that, and shared memory holds 12 warps' worth, cap them for 12 warps (168-170 registers, a
  // few spills). Measured on an H200, bf16 B=64 (`lkjit tune`): the 14x14 stage of WTConvNeXt-T (C=384,
  // L=3) in one wave, 0.202 -> 0.146 ms at k=5 and 0.152 -> 0.115 at k=3; smaller problems lose 4-8 % to
  // the spills (C=96 16x16, C=192 8x8 k=7, C=256 12x12), which this rule leaves uncapped.
  WTile capped = t;
  capped.blocks = 384 / t.threads;
  if (s.kernel == kWTConvBwdLane && sh.B * sh.C > 4 * int64_t(lane_block_planes(t)) * d.sm_count &&
      !lane_reject(s, capped, d, &sh))
    t = capped;
  return t;
}

LaunchGeometry lane_geometry(const WSpec& s, const WTile& t, const Shape& sh) {
  LaunchGeometry g;
  g.grid[0] = static_cast<unsigned>(cdiv(sh.B * sh.C, lane_block_planes(t)));
  g.block[0] = t.threads;
  g.blocks = std::ceil(double(sh.B) * double(sh.C) / lane_block_planes(t));
  g.smem_bytes = static_cast<unsigned>(lane_smem_bytes(s, t, sh));
  return g;
}

std::string lane_cfg(const WSpec& s, const WTile& t) {
  return fmt::format("  using T = {};\n  static constexpr int k = {}, R = {}, L = {}, threads = {}, wmax = {}, split = {};\n",
                     ctype(s.dtype), s.k, R(s), s.L, t.threads, t.tile_w, t.threads / lane_block_planes(t));
}
std::string fwd_lane_name(const WSpec& s, const WTile& t) {
  return fmt::format("wtconv_fwd_lane_{}_k{}_L{}_{}", to_string(s.dtype), s.k, s.L, t.to_string());
}
std::string bwd_lane_name(const WSpec& s, const WTile& t) {
  return fmt::format("wtconv_bwd_lane_{}_k{}_L{}_{}", to_string(s.dtype), s.k, s.L, t.to_string());
}

// ---- reduce of the lane backward's channel-innermost partials (reduce_lane.cuh) --------------------
// Blocks of 32 channels x one tap set (W~0 and b~, or one level's subband): warps over the set's values.
TileSpace reduce_lane_space(const WSpec&) {
  return {{{"threads", {64, 128, 256, 512}, "threads per block (32 channels x one tap set; warps over its values)"}}};
}
int64_t reduce_lane_smem_bytes(const WSpec& s) { return (int64_t(s.k) * s.k + 1) * 33 * 4; }
std::optional<std::string> reduce_lane_reject(const WSpec& s, const WTile& t, const DeviceLimits& d, const Shape*) {
  if (auto r = reject_threads(t, d)) return r;
  return reject_smem(reduce_lane_smem_bytes(s), d);
}
// 512: bf16 k=5 on an H200, the layer's backward 201 -> 186 us at 64x384x14x14 L=3 and 94 -> 77 us at
// 64x768x7x7 L=2 against 256 threads (more warps per SM for the few blocks of the (C/32) x (1+4L) grid).
WTile reduce_lane_default(const WSpec&, const Shape&, const DeviceLimits&) { return WTile{0, 0, 0, 0, 512}; }
LaunchGeometry reduce_lane_geometry(const WSpec& s, const WTile& t, const Shape& sh) {
  LaunchGeometry g;
  g.grid[0] = static_cast<unsigned>(cdiv(sh.C, 32));
  g.grid[1] = static_cast<unsigned>(1 + 4 * s.L);
  g.block[0] = t.threads;
  g.smem_bytes = static_cast<unsigned>(reduce_lane_smem_bytes(s));
  return g;
}
std::string reduce_lane_name(const WSpec& s, const WTile& t) {
  return fmt::format("wtconv_reduce_lane_k{}_L{}_{}", s.k, s.L, t.to_string());
}

}  // namespace
}  // namespace wtconv

std::vector<KernelDef> wtconv_lane_kernels() {
  using namespace wtconv;
  return {
      wtconv_kernel<lane_space, lane_reject, lane_default, lane_geometry, lane_cfg, fwd_lane_name>(
          kWTConvFwdLane, "wtconv/fwd_lane.cuh", "wtconv_fwd_lane"),
      wtconv_kernel<lane_space, lane_reject, lane_default, lane_geometry, lane_cfg, bwd_lane_name>(
          kWTConvBwdLane, "wtconv/bwd_lane.cuh", "wtconv_bwd_lane"),
      wtconv_kernel<reduce_lane_space, reduce_lane_reject, reduce_lane_default, reduce_lane_geometry, reduce_cfg,
                    reduce_lane_name>(kWTConvReduceLane, "wtconv/reduce_lane.cuh", "wtconv_reduce_lane"),
  };
}

}  // namespace lkjit::gen
