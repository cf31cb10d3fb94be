// The depthwise-convolution family (docs/dwconv.md) as plain data and pure functions, for the family's
// generator file: per kernel the Cfg members, the launch geometry (grid, block, dynamic shared memory), why a
// tile cannot run, and a heuristic default tile, as functions of plain values. Host-only C++17; the index
// math and shared-memory layouts are the templates' own (templates/dwconv/geometry.cuh, included here as
// plain C++), so the bytes a launch asks for are the bytes the kernel carves.
//
// ---- Spec fields (compile-time: in the Cfg, the cache key and the kernel name) -------------------------
//   name    range    default  token  meaning
//   kh      [1, 63]  3        kh     filter height (odd or even)
//   kw      [1, 63]  3        kw     filter width
//   stride  [1, 2]   1        s      stride of both axes
//   dil     [1, 4]   1        d      dilation of both axes
// plus the dtype (f32, f16, bf16 activations; weights, bias, gradients of parameters and accumulation fp32)
// and the arch (sm_80 and newer). wgrad_reduce has none of the fields (one binary for every kernel size).
// Runtime (DWConvParams): B, C, H, W, Ho, Wo, padding ph, pw (before; 'same' = same_padding), strides.
// Kernel name: lkjit_<kernel>_<dtype>_kh31_kw31_s1_d1_<tile tokens>_sm90, e.g.
// lkjit_dwconv_fwd_direct_bf16_kh31_kw31_s1_d1_th32_tw64_r4_c4_u0_w128_b5_sm90 (tests/dwconv_instances.h).
//
// ---- Tile axes (name, token, candidates; 0 = the axis' "all" value where noted) --------------------------
//   tile_h     th  {4, 8, 16, 32, 64}     output rows of a block (wgrad: dy rows)
//   tile_w     tw  {8, 16, 32, 64, 128}   output columns of a block (wgrad: dy columns)
//   ry         r   {1, 2, 4, 8}           output rows a thread (register tile)
//   rx         c   {1, 2, 4, 8}           output columns a thread
//   kc         u   {0, 2, 4, 8, 16}       sub-filter rows a shared-memory stage; 0: all (one stage)
//   lanes      l   {8, 16, 32}            NHWC: channel lanes of a block (lanes x vec channels)
//   vec        v   {1, 2, 4, 8}           NHWC: channels a thread (vector loads of vec elements)
//   tap_rows   tr  {1, 2, 4}              wgrad_direct: tap rows a thread
//   tap_cols   tc  {4, 8}                 wgrad_direct: tap columns a thread
//   vc         q   {2, 4, 8, 16}          wgrad_nhwc: taps of one row a task
//   mwarps     mw  {1, 2, 4}              mma: warps along output rows (threads = 32 mwarps nwarps)
//   nwarps     nw  {1, 2, 4}              mma: warps along output columns (wgrad_mma: along filter blocks)
//   ksplit     ks  {1, 2, 4, 8}           wgrad_mma: warps splitting the x rows (their sums added in order)
//   threads    w   {64, 128, 256, 512}    threads a block
//   blocks     b   {0, 1, 2, 3, 4, 6, 8}  blocks an SM should hold: __launch_bounds__(threads, blocks) caps the
//                                         registers to fit; 0: no cap (every kernel has the axis: with no cap
//                                         ptxas spills a long-lived value or two to meet its own occupancy target,
//                                         with a cap that fits the register tile it allocates without spills)
//
// ---- Kernels: template, device function, fields, Cfg members ---------------------------------------------
//   dwconv_fwd_direct    dwconv/direct.cuh        dwconv_direct        kh kw s d   T dgrad=false kh kw stride dil tile_h tile_w ry rx kc threads
//   dwconv_dgrad_direct  dwconv/direct.cuh        dwconv_direct        kh kw s d   T dgrad=true  (same members)
//   dwconv_fwd_nhwc      dwconv/nhwc.cuh          dwconv_nhwc          kh kw s d   T dgrad=false kh kw stride dil tile_h tile_w ry rx cl cv threads
//   dwconv_dgrad_nhwc    dwconv/nhwc.cuh          dwconv_nhwc          kh kw s d   T dgrad=true  (same members)
//   dwconv_fwd_mma       dwconv/mma.cuh           dwconv_mma           kh kw s d   T dgrad=false kh kw stride dil tile_h tile_w warps_m warps_n mt nt threads
//   dwconv_dgrad_mma     dwconv/mma.cuh           dwconv_mma           kh kw s d   T dgrad=true  (same members); both 16-bit, s = d = 1
//   dwconv_wgrad_mma     dwconv/wgrad_mma.cuh     dwconv_wgrad_mma     kh kw s d   T kh kw stride dil tile_h tile_w warps_u warps_v ksplit threads
//   dwconv_wgrad_direct  dwconv/wgrad_direct.cuh  dwconv_wgrad_direct  kh kw s d   T kh kw stride dil tile_h tile_w ru rv kc threads
//   dwconv_wgrad_nhwc    dwconv/wgrad_nhwc.cuh    dwconv_wgrad_nhwc    kh kw s d   T kh kw stride dil cl cv vc threads
//   dwconv_wgrad_reduce  dwconv/wgrad_reduce.cuh  dwconv_wgrad_reduce  -           threads
// All take `const __grid_constant__ lkjit::DWConvParams` (templates/abi/dwconv_params.h); blocks is not a Cfg
// member but the entry's __launch_bounds__(threads, blocks) (launch_bounds below).
// A training step: fwd_*; dgrad_*; wgrad_* then wgrad_reduce (the partials are scratch of
// dwc::part_floats(C, chunks, kh*kw) floats, chunks and part_st from wgrad_*_geometry and wgrad_*_part_strides).
// The op layer fills DWConvParams: pointers, strides, extents (make_problem), tiles_h/tiles_w/chunks from the
// kernel's Launch, taps = kh*kw.
//
// ---- Default tiles (reasoning from instruction counts; to be refitted by lkjit tune on an H200) ----------------
//   direct (fwd, dgrad): rx = 4 outputs a thread along the row (float4 windows and 16-byte weight broadcasts at
//     dilation 1; 2 for the gather), ry = 4 (2 for k <= 3): per input row and 16 sub-taps a thread loads
//     rx-1+16 inputs for 16*rx*ry FMAs: the hot loop is 85-87 % FFMA in the SASS of 27x27 and 31x31, 77 % at 7x7.
//     tile_w = 64 (32, 16 on narrow maps), tile_h = 32 (16): 128 threads, one register tile each; the halo costs
//     (tile + k - 1)^2 / tile^2 of the input reads, from L2. kc = all sub-filter rows unless the ring would not
//     leave two blocks an SM, then the largest that does (and lower tiles where one row a stage does not fit).
//   nhwc (fwd, dgrad): 4 bytes of channels a lane (16-bit 2, f32 1; halved while C is not a multiple), so a warp's
//     load is one 128-byte line (8 bytes doubled the window registers and halved the warps an SM); lanes = the
//     most of 32, 16, 8 whose block width divides C; the channels' sub-filters must fit twice an SM (k = 31: 8
//     lanes). ry x rx = 2 x 4 (2 x 2 for the gather) on the first of 8x8 .. 32x32 that gives eight warps of
//     register tiles: the block's filter copy is paid once per tile. Hot loop ~50-55 % FFMA (global loads,
//     their widening and 64-bit addresses): the first thing to tune on the GPU.
//   mma (fwd, dgrad): tiles of whole 16x16 blocks, 64 from 48 outputs on (32, 16 below), a warp 2 x 2 blocks:
//     the 56x56 map in one 64x64 tile of four warps, 28x28 in 32x32 of one. wgrad_mma: dy tiles of up to 64 x 64, a
//     warp up to 32 x 32 taps, four warps splitting the x rows. Measured on the H200, not yet tuned there.
//   wgrad_direct: tap tiles tr x tc = 4 x 8 (float4 windows at stride and dilation 1: 89 % FFMA in the SASS of
//     7x7, 27x27 and 31x31), tile 16 x 64 (32 x 64 when one register tile holds every tap), 256 threads; kc = all
//     rows unless the x region takes more than half an SM's shared memory.
//   wgrad_nhwc: 4 bytes of channels a lane, vc = kw (<= 8), thread groups that divide the tasks (kh x ceil(kw/vc))
//     so that every group does the same work (32 lanes where the chosen lanes cannot), at most 256 threads. Hot
//     loop ~26 % FFMA (each x and dy element a global load): correct and coalesced, not yet efficient.
//   wgrad_reduce: 256 threads.
//   blocks (every kernel): the most blocks an SM holds whose register cap leaves ptxas a quarter above the estimate.
//   chunks (runtime, not a tile axis): from the shape only, never the device, so that the sums' order (hence
//     the bits) is the same on every GPU: about 1024 blocks, at least one work unit a chunk.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lkjit/spec.h"
#include "templates/dwconv/geometry.cuh"

namespace lkjit::gen::dwconv {

inline constexpr int kMaxK = dwc::kMaxK, kMaxDil = dwc::kMaxDil, kMaxStride = dwc::kMaxStride;
inline constexpr int kMaxPad = 1024;
inline constexpr int kMaxRegisters = 200;  // estimate cap: ptxas lands within ~15 % of it, below the 255 limit

// ---- spec and problem ---------------------------------------------------------------------------------

struct SpecVals {
  DType dtype = DType::kF32;
  int kh = 3, kw = 3, stride = 1, dil = 1;
  int arch = 90;
};

struct SpecFieldInfo {
  const char* name;
  int lo, hi, def;
  const char* token;
  const char* doc;
};
inline const std::vector<SpecFieldInfo>& spec_fields() {
  static const std::vector<SpecFieldInfo> v = {
      {"kh", 1, kMaxK, 3, "kh", "filter height"},
      {"kw", 1, kMaxK, 3, "kw", "filter width"},
      {"stride", 1, kMaxStride, 1, "s", "stride of both axes"},
      {"dil", 1, kMaxDil, 1, "d", "dilation of both axes"},
  };
  return v;
}

inline void validate_spec(const SpecVals& s, std::vector<std::string>& e) {
  const int vals[] = {s.kh, s.kw, s.stride, s.dil};
  for (size_t i = 0; i < spec_fields().size(); ++i) {
    const auto& f = spec_fields()[i];
    if (vals[i] < f.lo || vals[i] > f.hi)
      e.push_back(fmt::format("{}={} is out of range; supported: [{}, {}]", f.name, vals[i], f.lo, f.hi));
  }
  if (s.arch < 80) e.push_back(fmt::format("arch sm_{} is not supported; supported: sm_80 and newer", s.arch));
}

// A run's runtime values: input extents, padding before (ph, pw) and after, and the output extents.
struct Problem {
  int64_t B = 1, C = 1, H = 1, W = 1, Ho = 1, Wo = 1;
  int ph = 0, pw = 0;
};

struct Padding {
  int top = 0, bottom = 0, left = 0, right = 0;
};
// padding='same' (PyTorch's rule, stride 1 only): d(k-1) in total, the smaller half before.
inline Padding same_padding(const SpecVals& s) {
  return {dwc::same_pad_before(s.kh, s.dil), dwc::same_pad_after(s.kh, s.dil), dwc::same_pad_before(s.kw, s.dil),
          dwc::same_pad_after(s.kw, s.dil)};
}

// Why (B, C, H, W) with padding `pad` cannot run `s` (each message names the value and the range), or nullopt.
inline std::optional<std::string> problem_error(const SpecVals& s, int64_t B, int64_t C, int64_t H, int64_t W,
                                                const Padding& pad) {
  const int64_t kMaxExtent = int64_t(1) << 24;
  const struct {
    const char* n;
    int64_t v;
  } ext[] = {{"B", B}, {"C", C}, {"H", H}, {"W", W}};
  for (const auto& x : ext)
    if (x.v < 1 || x.v > kMaxExtent)
      return fmt::format("{}={} is out of range; supported: [1, {}]", x.n, x.v, kMaxExtent);
  const struct {
    const char* n;
    int v;
  } pads[] = {{"padding top", pad.top}, {"padding bottom", pad.bottom}, {"padding left", pad.left},
              {"padding right", pad.right}};
  for (const auto& x : pads)
    if (x.v < 0 || x.v > kMaxPad) return fmt::format("{}={} is out of range; supported: [0, {}]", x.n, x.v, kMaxPad);
  if (dwc::out_extent(H, s.kh, s.stride, s.dil, pad.top, pad.bottom) < 1)
    return fmt::format("H={} with padding {}+{} is shorter than the dilated filter d*(kh-1)+1={}: no output", H,
                       pad.top, pad.bottom, s.dil * (s.kh - 1) + 1);
  if (dwc::out_extent(W, s.kw, s.stride, s.dil, pad.left, pad.right) < 1)
    return fmt::format("W={} with padding {}+{} is narrower than the dilated filter d*(kw-1)+1={}: no output", W,
                       pad.left, pad.right, s.dil * (s.kw - 1) + 1);
  if (B * C * H * W >= (int64_t(1) << 40)) return fmt::format("B*C*H*W={} exceeds 2^40 elements", B * C * H * W);
  return std::nullopt;
}
// The problem of a valid (problem_error == nullopt) run.
inline Problem make_problem(const SpecVals& s, int64_t B, int64_t C, int64_t H, int64_t W, const Padding& pad) {
  return {B, C, H, W, dwc::out_extent(H, s.kh, s.stride, s.dil, pad.top, pad.bottom),
          dwc::out_extent(W, s.kw, s.stride, s.dil, pad.left, pad.right), pad.top, pad.left};
}

// ---- tiles and launches ---------------------------------------------------------------------------------

struct TileAxisInfo {
  const char* name;
  const char* token;
  std::vector<int> values;
  const char* doc;
};
inline const std::vector<TileAxisInfo>& tile_axes() {
  static const std::vector<TileAxisInfo> v = {
      {"tile_h", "th", {4, 8, 16, 32, 64}, "output rows of a block (wgrad: dy rows)"},
      {"tile_w", "tw", {8, 16, 32, 64, 128}, "output columns of a block (wgrad: dy columns)"},
      {"ry", "r", {1, 2, 4, 8}, "output rows a thread"},
      {"rx", "c", {1, 2, 4, 8}, "output columns a thread"},
      {"kc", "u", {0, 2, 4, 8, 16}, "sub-filter rows a shared-memory stage (0: all)"},
      {"lanes", "l", {8, 16, 32}, "NHWC: channel lanes of a block"},
      {"vec", "v", {1, 2, 4, 8}, "NHWC: channels a thread"},
      {"tap_rows", "tr", {1, 2, 4}, "wgrad_direct: tap rows a thread"},
      {"tap_cols", "tc", {4, 8}, "wgrad_direct: tap columns a thread"},
      {"vc", "q", {2, 4, 8, 16}, "wgrad_nhwc: taps of one row a task"},
      {"threads", "w", {64, 128, 256, 512}, "threads a block"},
      {"blocks", "b", {0, 1, 2, 3, 4, 6, 8}, "blocks an SM should hold: registers capped to fit (0: no cap)"},
  };
  return v;
}

struct Launch {
  unsigned grid = 1, block = 1, smem_bytes = 0;
  int tiles_h = 0, tiles_w = 0;  // DWConvParams::tiles_h, tiles_w
  int chunks = 0;                // DWConvParams::chunks (wgrad)
};

enum class Pass { kForward, kDgrad };
inline int axis_mode(Pass pass, int stride) {
  return pass == Pass::kForward ? dwc::kFwd : stride == 1 ? dwc::kFlip : dwc::kGather;
}
inline const char* ctype(DType t) {
  switch (t) {
    case DType::kF32: return "float";
    case DType::kF16: return "lkjit::f16";
    case DType::kBF16: return "lkjit::bf16";
  }
  return "?";
}
inline std::string field_cfg(const SpecVals& s) {
  return fmt::format("  using T = {};\n  static constexpr int kh = {}, kw = {}, stride = {}, dil = {};\n", ctype(s.dtype),
                     s.kh, s.kw, s.stride, s.dil);
}

// The entry's __launch_bounds__ arguments: threads, and the register cap's blocks where the tile has one.
inline std::string launch_bounds(int threads, int blocks) {
  return blocks ? fmt::format("{}, {}", threads, blocks) : std::to_string(threads);
}

namespace detail {
inline int64_t kib_ceil(int64_t bytes) { return (bytes + 1023) / 1024; }
inline std::optional<std::string> reject_smem(int64_t bytes, const DeviceLimits& d) {
  if (bytes > d.max_smem_per_block)
    return fmt::format("shared memory {} KB exceeds the {} limit of {} KB per block", kib_ceil(bytes),
                       arch_name(d.arch), d.max_smem_per_block / 1024);
  return std::nullopt;
}
inline std::optional<std::string> reject_threads(int threads, const DeviceLimits& d) {
  if (threads < 32 || threads > d.max_threads_per_block || threads % 32 != 0)
    return fmt::format("threads={} is out of range; supported: a multiple of 32 in [32, {}]", threads,
                       d.max_threads_per_block);
  return std::nullopt;
}
inline std::optional<std::string> reject_regs(int est) {
  if (est > kMaxRegisters)
    return fmt::format("the register tile needs about {} registers a thread; supported: at most {} (no spills)", est,
                       kMaxRegisters);
  return std::nullopt;
}
// Threads an SM holds (sm_86, sm_89, sm_120: 1536).
inline int threads_per_sm(int arch) { return arch == 86 || arch == 89 || arch == 120 || arch == 121 ? 1536 : 2048; }
// The register cap of `blocks` blocks of `threads` threads an SM: the register file is four partitions of a
// quarter each, a warp lives in one, so the warps of a partition share its quarter; ptxas allocates in units of
// 8 registers a thread (64 threads x 5 blocks: 3 warps a partition, 170 -> 168, not 65536 / 320 = 204).
inline int reg_cap(int threads, int blocks, const DeviceLimits& d) {
  const int warps = (threads + 31) / 32 * blocks, per_partition = (warps + 3) / 4;
  return std::min(255, d.regs_per_sm / 4 / (per_partition * 32) / 8 * 8);
}
inline std::optional<std::string> reject_blocks(int threads, int blocks, int est, int64_t smem_bytes,
                                                const DeviceLimits& d) {
  if (blocks < 0 || blocks > 32)
    return fmt::format("blocks={} is out of range; supported: 0 (no register cap) or [1, 32]", blocks);
  if (blocks == 0) return std::nullopt;
  if (threads * blocks > threads_per_sm(d.arch))
    return fmt::format("blocks={} of {} threads exceed the {} threads an {} SM holds", blocks, threads,
                       threads_per_sm(d.arch), arch_name(d.arch));
  if ((smem_bytes + 1024) * blocks > d.smem_per_sm)
    return fmt::format("blocks={} of {} KB of shared memory exceed the {} KB an {} SM holds", blocks,
                       kib_ceil(smem_bytes + 1024), d.smem_per_sm / 1024, arch_name(d.arch));
  if (reg_cap(threads, blocks, d) < est)
    return fmt::format("blocks={} caps registers at {} a thread, below the ~{} the register tile needs", blocks,
                       reg_cap(threads, blocks, d), est);
  return std::nullopt;
}
// The most blocks an SM holds (threads, shared memory) whose register cap leaves ptxas a quarter above the
// estimate; at least 1.
inline int default_blocks(int threads, int est, int64_t smem_bytes, const DeviceLimits& d) {
  const int need = est * 5 / 4 + 8;
  const int64_t most = std::min<int64_t>({8, threads_per_sm(d.arch) / threads, d.smem_per_sm / (smem_bytes + 1024)});
  int b = 1;
  while (b < most && reg_cap(threads, b + 1, d) >= need) ++b;
  return b;
}
inline std::optional<std::string> reject_grid(int64_t blocks) {
  if (blocks > INT32_MAX) return fmt::format("{} blocks exceed the grid limit of 2^31-1", blocks);
  return std::nullopt;
}
inline int vec_bytes(DType t, int cv) { return cv * dtype_bytes(t); }
inline bool vec_ok(DType t, int cv) {
  const int b = vec_bytes(t, cv);
  return cv == 1 || b == 4 || b == 8 || b % 16 == 0;
}
// Output extents a pass writes: the forward's y, dgrad's dx.
inline int64_t out_h(const Problem& p, Pass pass) { return pass == Pass::kForward ? p.Ho : p.H; }
inline int64_t out_w(const Problem& p, Pass pass) { return pass == Pass::kForward ? p.Wo : p.W; }
// Chunks of a channel's `units` wgrad work units that give about `target` blocks over `groups` channel groups.
inline int chunks_for(int64_t units, int64_t groups, int64_t target = 1024) {
  const int64_t want = (target + groups - 1) / groups;
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({want, units, 65536})));
}
// The kernels with a block per (b, c) plane tile of the pass's output (direct, mma): their grid's bound, and
// their launch.
inline std::optional<std::string> reject_plane_tiles(const Problem* p, Pass pass, int tile_h, int tile_w) {
  if (!p) return std::nullopt;
  return reject_grid(p->B * p->C * dwc::tiles(out_h(*p, pass), tile_h) * dwc::tiles(out_w(*p, pass), tile_w));
}
inline Launch plane_tile_launch(const Problem& p, Pass pass, int tile_h, int tile_w, int threads, int64_t smem_bytes) {
  Launch g;
  g.tiles_h = dwc::tiles(out_h(p, pass), tile_h);
  g.tiles_w = dwc::tiles(out_w(p, pass), tile_w);
  g.grid = static_cast<unsigned>(p.B * p.C * g.tiles_h * g.tiles_w);
  g.block = threads;
  g.smem_bytes = static_cast<unsigned>(smem_bytes);
  return g;
}
// The tiled wgrad kernels (wgrad_direct, wgrad_mma): work units of a channel are (b, dy tile) pairs, below 2^31; a
// block per (c, chunk), chunks from the shape only (see the header comment).
inline std::optional<std::string> reject_wgrad_units(const Problem* p, int tile_h, int tile_w) {
  if (!p) return std::nullopt;
  const int64_t units = p->B * dwc::tiles(p->Ho, std::max(1, tile_h)) * dwc::tiles(p->Wo, std::max(1, tile_w));
  if (units > INT32_MAX) return fmt::format("B x tiles = {} work units a channel exceed 2^31-1", units);
  return std::nullopt;
}
inline Launch wgrad_tile_launch(const Problem& p, int tile_h, int tile_w, int threads, int64_t smem_bytes) {
  Launch g;
  g.tiles_h = dwc::tiles(p.Ho, tile_h);
  g.tiles_w = dwc::tiles(p.Wo, tile_w);
  g.chunks = chunks_for(p.B * g.tiles_h * g.tiles_w, p.C);
  g.grid = static_cast<unsigned>(p.C * g.chunks);
  g.block = threads;
  g.smem_bytes = static_cast<unsigned>(smem_bytes);
  return g;
}
}  // namespace detail

// ---- dwconv_fwd_direct / dwconv_dgrad_direct ------------------------------------------------------------

struct DirectTile {
  int tile_h = 32, tile_w = 64, ry = 4, rx = 4, kc = 0, threads = 128, blocks = 0;
};
inline dwc::DirectLayout direct_layout(const SpecVals& s, const DirectTile& t, Pass pass) {
  const int mode = axis_mode(pass, s.stride);
  const dwc::DirectLayout probe = dwc::direct_layout(mode, s.kh, s.kw, s.stride, s.dil, t.tile_h, t.tile_w, t.ry, t.rx, 1);
  const int kc = t.kc <= 0 ? probe.nay() : std::min(t.kc, probe.nay());
  return dwc::direct_layout(mode, s.kh, s.kw, s.stride, s.dil, t.tile_h, t.tile_w, t.ry, t.rx, kc);
}
inline int64_t direct_smem_bytes(const SpecVals& s, const DirectTile& t, Pass pass) {
  return int64_t(direct_layout(s, t, pass).floats()) * 4;
}
inline int direct_regs(const SpecVals& s, const DirectTile& t, Pass pass) {
  const auto L = direct_layout(s, t, pass);
  const int ni = (L.items() + t.threads - 1) / t.threads;
  // Fitted to ptxas on sm_80/sm_90 (tests/dwconv_compile_test.cpp): scalar windows (dilation, gather) are
  // loaded a row ahead, so they count twice.
  return ni * t.ry * t.rx + (L.vec() ? 1 : 2) * L.win() + 36;
}
inline std::string direct_cfg(const SpecVals& s, const DirectTile& t, Pass pass) {
  return field_cfg(s) + fmt::format(
                            "  static constexpr bool dgrad = {};\n"
                            "  static constexpr int tile_h = {}, tile_w = {}, ry = {}, rx = {}, kc = {}, threads = {};\n",
                            pass == Pass::kDgrad ? "true" : "false", t.tile_h, t.tile_w, t.ry, t.rx,
                            direct_layout(s, t, pass).kc, t.threads);
}
inline std::optional<std::string> direct_reject(const SpecVals& s, const DirectTile& t, Pass pass,
                                                const DeviceLimits& d, const Problem* p = nullptr) {
  if (auto r = detail::reject_threads(t.threads, d)) return r;
  if (t.ry < 1 || t.ry > 8 || t.rx < 1 || t.rx > 8)
    return fmt::format("ry={} rx={} is out of range; supported: [1, 8] each", t.ry, t.rx);
  if (t.tile_h < 1 || t.tile_h > 256 || t.tile_w < 1 || t.tile_w > 256)
    return fmt::format("tile {}x{} is out of range; supported: [1, 256] each", t.tile_h, t.tile_w);
  const auto L = direct_layout(s, t, pass);
  if (t.tile_h % (t.ry * L.ay.ostep()) != 0)
    return fmt::format("tile_h={} is not a multiple of ry*ostep={}*{}", t.tile_h, t.ry, L.ay.ostep());
  if (t.tile_w % (t.rx * L.ax.ostep()) != 0)
    return fmt::format("tile_w={} is not a multiple of rx*ostep={}*{}", t.tile_w, t.rx, L.ax.ostep());
  if (t.kc < 0) return fmt::format("kc={} is out of range; supported: 0 (all) or [1, {}]", t.kc, L.nay());
  if (L.items() < t.threads)
    return fmt::format("tile {}x{} holds {} register tiles of {}x{} for {} threads: {} idle", t.tile_h, t.tile_w,
                       L.items(), t.ry, t.rx, t.threads, t.threads - L.items());
  if (L.items() > 4 * t.threads)
    return fmt::format("tile {}x{} holds {} register tiles of {}x{}: more than 4 a thread for {} threads", t.tile_h,
                       t.tile_w, L.items(), t.ry, t.rx, t.threads);
  if (auto r = detail::reject_regs(direct_regs(s, t, pass))) return r;
  if (auto r = detail::reject_smem(direct_smem_bytes(s, t, pass), d)) return r;
  if (auto r = detail::reject_blocks(t.threads, t.blocks, direct_regs(s, t, pass), direct_smem_bytes(s, t, pass), d))
    return r;
  return detail::reject_plane_tiles(p, pass, t.tile_h, t.tile_w);
}
inline Launch direct_geometry(const SpecVals& s, const DirectTile& t, Pass pass, const Problem& p) {
  return detail::plane_tile_launch(p, pass, t.tile_h, t.tile_w, t.threads, direct_smem_bytes(s, t, pass));
}
inline DirectTile direct_default(const SpecVals& s, Pass pass, const Problem& p, const DeviceLimits& d) {
  const dwc::AxisMap ay{axis_mode(pass, s.stride), s.kh, s.stride, s.dil, 0};
  const dwc::AxisMap ax{axis_mode(pass, s.stride), s.kw, s.stride, s.dil, 0};
  DirectTile t;
  t.rx = ax.mode == dwc::kGather ? 2 : 4;
  t.ry = std::max(s.kh, s.kw) <= 3 ? 2 : 4;
  const int64_t wo = detail::out_w(p, pass), ho = detail::out_h(p, pass);
  int gx = t.rx * ax.ostep(), gy = t.ry * ay.ostep();  // tile granules
  const auto fit = [](int want, int g) { return std::max(g, want / g * g); };
  const auto cover = [](int64_t n, int g) { return int((n + g - 1) / g * g); };  // the map, in granules
  t.tile_w = fit(wo >= 48 ? 64 : wo >= 24 ? 32 : 16, gx);
  t.tile_h = fit(ho >= 24 ? 32 : 16, gy);
  // Maps smaller than the smallest tile (the 7x7 and 14x14 of late stages) get a tile no larger than the map;
  // larger maps keep the tiles the benchmarks were measured with.
  if (wo < 16) t.tile_w = std::min(t.tile_w, cover(wo, gx));
  if (ho < 16) t.tile_h = std::min(t.tile_h, cover(ho, gy));
  const auto items = [&] { return (t.tile_h / t.ry) * (t.tile_w / t.rx); };
  while (items() > 256 && t.tile_h > gy) t.tile_h = fit(t.tile_h / 2, gy);
  // Two warps at least: widen (up to 128 columns) and heighten while the map goes on; then smaller register
  // tiles, the larger side first, rather than a tile running past the map (a 16x64 tile on a 14x14 map was
  // 81% idle); only a map too small for 64 single outputs grows the tile past its edge.
  while (items() < 64) {
    if (t.tile_w + gx <= std::max(128, gx) && t.tile_w < cover(wo, gx)) {
      t.tile_w += gx;
    } else if (t.tile_h < cover(ho, gy)) {
      t.tile_h += gy;
    } else if (t.rx > 1 || t.ry > 1) {
      if (t.rx >= t.ry) t.rx /= 2;
      else t.ry /= 2;
      gx = t.rx * ax.ostep(), gy = t.ry * ay.ostep();
    } else if (t.tile_w + gx <= std::max(128, gx)) {
      t.tile_w += gx;
    } else {
      t.tile_h += gy;
    }
  }
  t.threads = std::max(32, items() / 32 * 32);  // every thread holds a tile, a few hold two
  // kc: all sub-filter rows unless that leaves fewer than two blocks an SM; then the largest that does, and
  // lower tiles where even one row a stage does not fit.
  for (;;) {
    const auto L = direct_layout(s, t, pass);
    for (int kc = L.nay(); kc >= 1; kc = kc > 8 ? kc / 2 : kc - 1) {
      t.kc = kc == L.nay() ? 0 : kc;
      if (direct_smem_bytes(s, t, pass) * 2 <= d.smem_per_sm) break;
    }
    // (a lower tile keeps a warp's worth of register tiles: one block an SM rather than idle threads)
    if (direct_smem_bytes(s, t, pass) * 2 <= d.smem_per_sm || t.tile_h <= gy ||
        (fit(t.tile_h / 2, gy) / t.ry) * (t.tile_w / t.rx) < 32)
      break;
    t.tile_h = fit(t.tile_h / 2, gy);
    t.threads = std::max(32, items() / 32 * 32);
  }
  t.blocks = detail::default_blocks(t.threads, direct_regs(s, t, pass), direct_smem_bytes(s, t, pass), d);
  return t;
}

// ---- dwconv_fwd_nhwc / dwconv_dgrad_nhwc ---------------------------------------------------------------

struct NhwcTile {
  int tile_h = 8, tile_w = 8, ry = 2, rx = 4, lanes = 32, vec = 2, threads = 256, blocks = 0;
};
inline dwc::NhwcLayout nhwc_layout(const SpecVals& s, const NhwcTile& t, Pass pass) {
  return dwc::nhwc_layout(axis_mode(pass, s.stride), s.kh, s.kw, s.stride, s.dil, t.tile_h, t.tile_w, t.ry, t.rx,
                          t.lanes, t.vec);
}
inline int64_t nhwc_smem_bytes(const SpecVals& s, const NhwcTile& t, Pass pass) {
  return int64_t(nhwc_layout(s, t, pass).floats()) * 4;
}
inline int nhwc_regs(const SpecVals& s, const NhwcTile& t, Pass pass) {
  const auto L = nhwc_layout(s, t, pass);
  return t.ry * t.rx * t.vec + 2 * L.win() * t.vec + 2 * t.vec + 40;  // window loaded a row ahead
}
inline std::string nhwc_cfg(const SpecVals& s, const NhwcTile& t, Pass pass) {
  return field_cfg(s) + fmt::format(
                            "  static constexpr bool dgrad = {};\n"
                            "  static constexpr int tile_h = {}, tile_w = {}, ry = {}, rx = {}, cl = {}, cv = {}, "
                            "threads = {};\n",
                            pass == Pass::kDgrad ? "true" : "false", t.tile_h, t.tile_w, t.ry, t.rx, t.lanes, t.vec,
                            t.threads);
}
inline std::optional<std::string> nhwc_reject(const SpecVals& s, const NhwcTile& t, Pass pass, const DeviceLimits& d,
                                              const Problem* p = nullptr) {
  if (auto r = detail::reject_threads(t.threads, d)) return r;
  if (t.lanes != 8 && t.lanes != 16 && t.lanes != 32)
    return fmt::format("lanes={} is not supported; supported: 8, 16, 32", t.lanes);
  if (t.vec < 1 || t.vec > 8 || !detail::vec_ok(s.dtype, t.vec))
    return fmt::format("vec={} ({} bytes of {}) is not supported; supported: 1 or 4, 8, 16, 32 bytes", t.vec,
                       detail::vec_bytes(s.dtype, t.vec), to_string(s.dtype));
  if (t.ry < 1 || t.ry > 8 || t.rx < 1 || t.rx > 8)
    return fmt::format("ry={} rx={} is out of range; supported: [1, 8] each", t.ry, t.rx);
  if (t.tile_h < 1 || t.tile_h > 64 || t.tile_w < 1 || t.tile_w > 64)
    return fmt::format("tile {}x{} is out of range; supported: [1, 64] each", t.tile_h, t.tile_w);
  const auto L = nhwc_layout(s, t, pass);
  if (t.tile_h % (t.ry * L.ay.ostep()) != 0)
    return fmt::format("tile_h={} is not a multiple of ry*ostep={}*{}", t.tile_h, t.ry, L.ay.ostep());
  if (t.tile_w % (t.rx * L.ax.ostep()) != 0)
    return fmt::format("tile_w={} is not a multiple of rx*ostep={}*{}", t.tile_w, t.rx, L.ax.ostep());
  const int groups = t.threads / t.lanes;
  if (L.items() < groups && t.threads > 32)
    return fmt::format("tile {}x{} holds {} register tiles of {}x{} for {} thread groups: {} idle", t.tile_h, t.tile_w,
                       L.items(), t.ry, t.rx, groups, groups - L.items());
  if (auto r = detail::reject_regs(nhwc_regs(s, t, pass))) return r;
  if (auto r = detail::reject_smem(nhwc_smem_bytes(s, t, pass), d)) return r;
  if (auto r = detail::reject_blocks(t.threads, t.blocks, nhwc_regs(s, t, pass), nhwc_smem_bytes(s, t, pass), d))
    return r;
  if (p) {
    const int64_t cg = (p->C + t.lanes * t.vec - 1) / (t.lanes * t.vec);
    if (auto r = detail::reject_grid(p->B * cg * dwc::tiles(detail::out_h(*p, pass), t.tile_h) *
                                     dwc::tiles(detail::out_w(*p, pass), t.tile_w)))
      return r;
  }
  return std::nullopt;
}
inline Launch nhwc_geometry(const SpecVals& s, const NhwcTile& t, Pass pass, const Problem& p) {
  Launch g;
  g.tiles_h = dwc::tiles(detail::out_h(p, pass), t.tile_h);
  g.tiles_w = dwc::tiles(detail::out_w(p, pass), t.tile_w);
  const int64_t cg = (p.C + t.lanes * t.vec - 1) / (t.lanes * t.vec);
  g.grid = static_cast<unsigned>(p.B * cg * g.tiles_h * g.tiles_w);
  g.block = t.threads;
  g.smem_bytes = static_cast<unsigned>(nhwc_smem_bytes(s, t, pass));
  return g;
}
// Channel vector: `bytes` a lane, halved while C is not a multiple of it; lanes: the most of 32, 16, 8 whose
// block width divides C, else 32 (a partial last group).
inline void pick_channels(DType dt, int64_t C, int& lanes, int& vec, int bytes = 4) {
  vec = std::max(1, bytes / dtype_bytes(dt));
  while (vec > 1 && C % vec != 0) vec /= 2;
  lanes = 32;
  for (int l : {32, 16, 8})
    if (C % (int64_t(l) * vec) == 0) {
      lanes = l;
      break;
    }
  if (C < 32 * vec) lanes = C <= 8 * vec ? 8 : C <= 16 * vec ? 16 : 32;
}
inline NhwcTile nhwc_default(const SpecVals& s, Pass pass, const Problem& p, const DeviceLimits& d) {
  NhwcTile t;
  pick_channels(s.dtype, p.C, t.lanes, t.vec);  // 4 bytes a lane: a warp's load is one 128-byte line
  const dwc::AxisMap ay{axis_mode(pass, s.stride), s.kh, s.stride, s.dil, 0};
  const dwc::AxisMap ax{axis_mode(pass, s.stride), s.kw, s.stride, s.dil, 0};
  t.ry = 2;
  t.rx = ax.mode == dwc::kGather ? 2 : 4;
  // The sub-filters of lanes*vec channels (independent of the tile) must fit twice an SM: fewer lanes, then a
  // shorter vector.
  while (nhwc_smem_bytes(s, t, pass) * 2 > d.smem_per_sm && (t.lanes > 8 || t.vec > 1)) {
    if (t.lanes > 8) t.lanes /= 2;
    else t.vec /= 2;
  }
  // The first of 8x8 .. 32x32 that gives eight warps of register tiles (lanes x tiles >= 256), or covers the
  // map: each block stages its channels' filters, so a large filter wants a large tile.
  const int gx = t.rx * ax.ostep(), gy = t.ry * ay.ostep();
  const auto up = [](int v, int g) { return (v + g - 1) / g * g; };
  const int64_t ho = detail::out_h(p, pass), wo = detail::out_w(p, pass);
  for (auto [h, w] : {std::pair{8, 8}, {8, 16}, {16, 16}, {16, 32}, {32, 32}}) {
    t.tile_h = up(h, gy), t.tile_w = up(w, gx);
    if (t.lanes * nhwc_layout(s, t, pass).items() >= 256 || (t.tile_h >= ho && t.tile_w >= wo)) break;
  }
  while (t.lanes * nhwc_layout(s, t, pass).items() < 64 && t.tile_h < 64) t.tile_h += gy;  // tiny maps: two warps
  while (nhwc_regs(s, t, pass) > kMaxRegisters && (t.rx > 1 || t.vec > 1)) {
    if (t.rx > 1) t.rx /= 2;
    else t.vec /= 2;
  }
  t.threads = std::max(32, std::min(256, t.lanes * nhwc_layout(s, t, pass).items()) / 32 * 32);
  t.blocks = detail::default_blocks(t.threads, nhwc_regs(s, t, pass), nhwc_smem_bytes(s, t, pass), d);
  return t;
}

// ---- dwconv_fwd_mma / dwconv_dgrad_mma -----------------------------------------------------------------

// The tensor-core kernels' domain: 16-bit activations, stride 1, dilation 1 (why not, or nullopt).
inline std::optional<std::string> mma_spec_error(const SpecVals& s) {
  if (s.dtype == DType::kF32)
    return std::string("dtype=f32: the tensor-core kernels take f16 or bf16 activations");
  if (s.stride != 1) return fmt::format("stride={}: the tensor-core kernels take stride 1", s.stride);
  if (s.dil != 1) return fmt::format("dil={}: the tensor-core kernels take dilation 1", s.dil);
  return std::nullopt;
}

struct MmaTile {
  int tile_h = 64, tile_w = 64, warps_m = 2, warps_n = 2, blocks = 0;
};
inline dwc::MmaLayout mma_layout(const SpecVals& s, const MmaTile& t) { return {s.kh, s.kw, t.tile_h, t.tile_w}; }
inline int mma_threads(const MmaTile& t) { return 32 * t.warps_m * t.warps_n; }
inline int mma_mt(const MmaTile& t) { return t.warps_m > 0 ? t.tile_h / (16 * t.warps_m) : 0; }  // m16 blocks a warp
inline int mma_nt(const MmaTile& t) { return t.warps_n > 0 ? t.tile_w / (16 * t.warps_n) : 0; }  // 16-column groups
inline int64_t mma_smem_bytes(const SpecVals& s, const MmaTile& t) { return mma_layout(s, t).bytes(); }
// Accumulators (8 a 16x16 block), two parts of B words for every k-step and their indices, A, addresses.
inline int mma_regs(const SpecVals& s, const MmaTile& t) {
  return 8 * mma_mt(t) * mma_nt(t) + 12 * dwc::mma_ksteps(s.kw) + 40;
}
inline std::string mma_cfg(const SpecVals& s, const MmaTile& t, Pass pass) {
  return field_cfg(s) +
         fmt::format("  static constexpr bool dgrad = {};\n"
                     "  static constexpr int tile_h = {}, tile_w = {}, warps_m = {}, warps_n = {}, mt = {}, nt = {}, "
                     "threads = {};\n",
                     pass == Pass::kDgrad ? "true" : "false", t.tile_h, t.tile_w, t.warps_m, t.warps_n, mma_mt(t),
                     mma_nt(t), mma_threads(t));
}
inline std::optional<std::string> mma_reject(const SpecVals& s, const MmaTile& t, Pass pass, const DeviceLimits& d,
                                             const Problem* p = nullptr) {
  if (auto r = mma_spec_error(s)) return r;
  if (t.warps_m < 1 || t.warps_m > 8 || t.warps_n < 1 || t.warps_n > 8)
    return fmt::format("mwarps={} nwarps={} is out of range; supported: [1, 8] each", t.warps_m, t.warps_n);
  if (auto r = detail::reject_threads(mma_threads(t), d)) return r;
  if (t.tile_h < 16 || t.tile_h > 256 || t.tile_w < 16 || t.tile_w > 256 || !mma_layout(s, t).valid())
    return fmt::format("tile {}x{} is out of range; supported: multiples of 16 in [16, 256] each", t.tile_h, t.tile_w);
  if (t.tile_h % (16 * t.warps_m) != 0 || t.tile_w % (16 * t.warps_n) != 0)
    return fmt::format("tile {}x{} does not split into mwarps={} x nwarps={} warps of whole 16x16 blocks", t.tile_h,
                       t.tile_w, t.warps_m, t.warps_n);
  if (mma_mt(t) > 4 || mma_nt(t) > 4)
    return fmt::format("tile {}x{} gives a warp {}x{} blocks of 16x16; supported: at most 4x4", t.tile_h, t.tile_w,
                       mma_mt(t), mma_nt(t));
  if (auto r = detail::reject_regs(mma_regs(s, t))) return r;
  if (auto r = detail::reject_smem(mma_smem_bytes(s, t), d)) return r;
  if (auto r = detail::reject_blocks(mma_threads(t), t.blocks, mma_regs(s, t), mma_smem_bytes(s, t), d)) return r;
  return detail::reject_plane_tiles(p, pass, t.tile_h, t.tile_w);
}
inline Launch mma_geometry(const SpecVals& s, const MmaTile& t, Pass pass, const Problem& p) {
  return detail::plane_tile_launch(p, pass, t.tile_h, t.tile_w, mma_threads(t), mma_smem_bytes(s, t));
}
// Tiles of whole 16x16 blocks that cover the map with the least excess (64 from 48 outputs on, then 32, 16), a
// warp 2 x 2 blocks where the tile has them; the register cap of the most blocks an SM holds.
inline MmaTile mma_default(const SpecVals& s, Pass pass, const Problem& p, const DeviceLimits& d) {
  const auto side = [](int64_t n) { return n >= 48 ? 64 : n >= 24 ? 32 : 16; };
  MmaTile t;
  t.tile_h = side(detail::out_h(p, pass)), t.tile_w = side(detail::out_w(p, pass));
  t.warps_m = std::max(1, t.tile_h / 32), t.warps_n = std::max(1, t.tile_w / 32);
  t.blocks = detail::default_blocks(mma_threads(t), mma_regs(s, t), mma_smem_bytes(s, t), d);
  return t;
}

// ---- dwconv_wgrad_mma ----------------------------------------------------------------------------------

struct WgradMmaTile {
  int tile_h = 64, tile_w = 64, warps_u = 1, warps_v = 1, ksplit = 4, blocks = 0;
};
inline dwc::WgradMmaLayout wgrad_mma_layout(const SpecVals& s, const WgradMmaTile& t) {
  return {s.kh, s.kw, t.tile_h, t.tile_w, t.ksplit, 32 * t.warps_u * t.warps_v * t.ksplit};
}
inline int wgrad_mma_threads(const WgradMmaTile& t) { return 32 * t.warps_u * t.warps_v * t.ksplit; }
inline int64_t wgrad_mma_smem_bytes(const SpecVals& s, const WgradMmaTile& t) { return wgrad_mma_layout(s, t).bytes(); }
// Accumulators (4 a 16x8 block), the B words, A, addresses.
inline int wgrad_mma_regs(const SpecVals& s, const WgradMmaTile& t) {
  const auto L = wgrad_mma_layout(s, t);
  const int muw = dwc::cdiv(L.mu(), std::max(1, t.warps_u)), nvw = dwc::cdiv(L.nv(), std::max(1, t.warps_v));
  return 4 * muw * nvw + 2 * nvw + 48;
}
inline std::string wgrad_mma_cfg(const SpecVals& s, const WgradMmaTile& t) {
  return field_cfg(s) + fmt::format("  static constexpr int tile_h = {}, tile_w = {}, warps_u = {}, warps_v = {}, ksplit = {}, "
                                    "threads = {};\n",
                                    t.tile_h, t.tile_w, t.warps_u, t.warps_v, t.ksplit, wgrad_mma_threads(t));
}
inline std::optional<std::string> wgrad_mma_reject(const SpecVals& s, const WgradMmaTile& t, const DeviceLimits& d,
                                                   const Problem* p = nullptr) {
  if (auto r = mma_spec_error(s)) return r;
  const auto L = wgrad_mma_layout(s, t);
  if (t.warps_u < 1 || t.warps_u > L.mu() || t.warps_v < 1 || t.warps_v > L.nv())
    return fmt::format("mwarps={} nwarps={} is out of range; supported: [1, {}] and [1, {}] (the filter's 16-row and "
                       "8-column blocks)", t.warps_u, t.warps_v, L.mu(), L.nv());
  if (t.ksplit < 1 || t.ksplit > 8) return fmt::format("ksplit={} is out of range; supported: [1, 8]", t.ksplit);
  if (auto r = detail::reject_threads(wgrad_mma_threads(t), d)) return r;
  if (t.tile_h < 1 || t.tile_h > 128 || t.tile_w < 16 || t.tile_w > 128 || t.tile_w % 16 != 0)
    return fmt::format("tile {}x{} is out of range; supported: tile_h in [1, 128], tile_w a multiple of 16 in [16, 128]",
                       t.tile_h, t.tile_w);
  if (t.ksplit > L.xrows())
    return fmt::format("ksplit={} exceeds the {} x rows of a {}-row tile: idle warps", t.ksplit, L.xrows(), t.tile_h);
  if (auto r = detail::reject_regs(wgrad_mma_regs(s, t))) return r;
  if (auto r = detail::reject_smem(wgrad_mma_smem_bytes(s, t), d)) return r;
  if (auto r = detail::reject_blocks(wgrad_mma_threads(t), t.blocks, wgrad_mma_regs(s, t), wgrad_mma_smem_bytes(s, t), d))
    return r;
  return detail::reject_wgrad_units(p, t.tile_h, t.tile_w);
}
inline Launch wgrad_mma_geometry(const SpecVals& s, const WgradMmaTile& t, const Problem& p) {
  return detail::wgrad_tile_launch(p, t.tile_h, t.tile_w, wgrad_mma_threads(t), wgrad_mma_smem_bytes(s, t));
}
inline dwc::PartStrides wgrad_mma_part_strides(const SpecVals& s, const Problem& p, int chunks) {
  return dwc::part_strides_direct(int(p.C), chunks, s.kh * s.kw);
}
// dy tiles of whole 16-column groups (64 from 48 columns on, then 32, 16) and up to 64 rows (each filter-row block
// meets th + 15 x rows, so taller tiles waste less); a warp up to 2 x 4 filter blocks (32 x 32 taps), the rest of
// four warps splitting the x rows.
inline WgradMmaTile wgrad_mma_default(const SpecVals& s, const Problem& p, const DeviceLimits& d) {
  WgradMmaTile t;
  const auto side = [](int64_t n) { return n >= 48 ? 64 : n >= 24 ? 32 : 16; };
  t.tile_w = side(p.Wo);
  t.tile_h = int(std::min<int64_t>(side(p.Ho), p.Ho));
  const auto L = wgrad_mma_layout(s, t);
  t.warps_u = dwc::cdiv(L.mu(), 2), t.warps_v = dwc::cdiv(L.nv(), 4);
  t.ksplit = std::max(1, 4 / (t.warps_u * t.warps_v));
  t.ksplit = std::min(t.ksplit, wgrad_mma_layout(s, t).xrows());
  t.blocks = detail::default_blocks(wgrad_mma_threads(t), wgrad_mma_regs(s, t), wgrad_mma_smem_bytes(s, t), d);
  return t;
}

// ---- dwconv_wgrad_direct -------------------------------------------------------------------------------

struct WgradDirectTile {
  int tile_h = 16, tile_w = 64, tap_rows = 4, tap_cols = 8, kc = 0, threads = 256, blocks = 0;
};
inline dwc::WgradDirectLayout wgrad_direct_layout(const SpecVals& s, const WgradDirectTile& t) {
  const int kc = t.kc <= 0 ? s.kh : std::min(t.kc, s.kh);
  return dwc::WgradDirectLayout{s.kh, s.kw, s.stride, s.dil, t.tile_h, t.tile_w, t.tap_rows, t.tap_cols, kc, t.threads};
}
inline int64_t wgrad_direct_smem_bytes(const SpecVals& s, const WgradDirectTile& t) {
  return int64_t(wgrad_direct_layout(s, t).floats()) * 4;
}
inline int wgrad_direct_regs(const SpecVals& s, const WgradDirectTile& t) {
  const auto L = wgrad_direct_layout(s, t);
  return t.tap_rows * t.tap_cols + L.jc() + (L.win() + 3) / 4 * 4 + 44;
}
inline std::string wgrad_direct_cfg(const SpecVals& s, const WgradDirectTile& t) {
  return field_cfg(s) + fmt::format("  static constexpr int tile_h = {}, tile_w = {}, ru = {}, rv = {}, kc = {}, threads = {};\n",
                                    t.tile_h, t.tile_w, t.tap_rows, t.tap_cols, wgrad_direct_layout(s, t).kc, t.threads);
}
inline std::optional<std::string> wgrad_direct_reject(const SpecVals& s, const WgradDirectTile& t, const DeviceLimits& d,
                                                      const Problem* p = nullptr) {
  if (auto r = detail::reject_wgrad_units(p, t.tile_h, t.tile_w)) return r;
  if (auto r = detail::reject_threads(t.threads, d)) return r;
  if (t.tile_h < 1 || t.tile_h > 128 || t.tile_w < 4 || t.tile_w > 256 || t.tile_w % 4 != 0)
    return fmt::format("tile {}x{} is out of range; supported: tile_h in [1, 128], tile_w a multiple of 4 in [4, 256]",
                       t.tile_h, t.tile_w);
  if (t.tap_rows < 1 || t.tap_rows > 8 || t.tap_cols < 1 || t.tap_cols > 16)
    return fmt::format("tap_rows={} tap_cols={} is out of range; supported: [1, 8] and [1, 16]", t.tap_rows, t.tap_cols);
  if (t.kc < 0) return fmt::format("kc={} is out of range; supported: 0 (all) or [1, {}]", t.kc, s.kh);
  const auto L = wgrad_direct_layout(s, t);
  if (L.items() > t.threads)
    return fmt::format("{} register tiles of {}x{} taps exceed {} threads", L.items(), t.tap_rows, t.tap_cols, t.threads);
  if (L.splits() > L.pairs())
    return fmt::format("tile {}x{} has {} row pieces for {} splits of the threads: {} idle", t.tile_h, t.tile_w,
                       L.pairs(), L.splits(), L.splits() - L.pairs());
  if (auto r = detail::reject_regs(wgrad_direct_regs(s, t))) return r;
  if (auto r = detail::reject_smem(wgrad_direct_smem_bytes(s, t), d)) return r;
  return detail::reject_blocks(t.threads, t.blocks, wgrad_direct_regs(s, t), wgrad_direct_smem_bytes(s, t), d);
}
inline Launch wgrad_direct_geometry(const SpecVals& s, const WgradDirectTile& t, const Problem& p) {
  return detail::wgrad_tile_launch(p, t.tile_h, t.tile_w, t.threads, wgrad_direct_smem_bytes(s, t));
}
inline WgradDirectTile wgrad_direct_default(const SpecVals& s, const Problem& p, const DeviceLimits& d) {
  WgradDirectTile t;
  t.tap_rows = std::min(4, s.kh);
  t.tap_cols = s.kw > 4 ? 8 : 4;
  t.tile_w = p.Wo >= 48 ? 64 : p.Wo >= 24 ? 32 : 16;
  t.tile_h = 16;
  const auto L = [&] { return wgrad_direct_layout(s, t); };
  // Maps smaller than the tile (the 7x7 and 14x14 of late stages): a tile no larger than the map (16 rows of
  // which 7 exist, grown to 64 for the splits, summed 95% zeros), and where its row pieces are too few for the
  // threads' splits, fewer threads, then smaller tap tiles (more of them), before a taller tile.
  const bool small = p.Wo < 16 || p.Ho < 16;
  if (p.Wo < 16) t.tile_w = std::max(4, int((p.Wo + 3) / 4 * 4));
  if (p.Ho < 16) t.tile_h = int(p.Ho);
  // Enough (row, column piece) pairs for every split of the threads (the splits follow kc: run again after it).
  const auto fit_splits = [&] {
    if (small)
      while (L().splits() > L().pairs()) {
        if (t.threads > 32 && L().items() <= t.threads / 2) t.threads /= 2;
        else if (t.tap_cols > 4) t.tap_cols /= 2;
        else if (t.tap_rows > 1) t.tap_rows /= 2;
        else if (t.tap_cols > 1) t.tap_cols /= 2;
        else break;
      }
    while (L().splits() > L().pairs() && t.tile_h < 128) t.tile_h *= 2;
  };
  fit_splits();
  // kc: all tap rows unless the x region leaves fewer than two blocks an SM.
  for (int kc = s.kh; kc >= 1; kc = kc > 8 ? kc / 2 : kc - 1) {
    t.kc = kc == s.kh ? 0 : kc;
    if (wgrad_direct_smem_bytes(s, t) * 2 <= d.smem_per_sm) break;
  }
  fit_splits();
  t.blocks = detail::default_blocks(t.threads, wgrad_direct_regs(s, t), wgrad_direct_smem_bytes(s, t), d);
  return t;
}
// Partial buffer of wgrad_direct: channel-major (geometry.cuh part_strides_direct).
inline dwc::PartStrides wgrad_direct_part_strides(const SpecVals& s, const Problem& p, int chunks) {
  return dwc::part_strides_direct(static_cast<int>(p.C), chunks, s.kh * s.kw);
}

// ---- dwconv_wgrad_nhwc ---------------------------------------------------------------------------------

struct WgradNhwcTile {
  int lanes = 32, vec = 2, vc = 8, threads = 256, blocks = 0;
};
inline dwc::WgradNhwcLayout wgrad_nhwc_layout(const SpecVals& s, const WgradNhwcTile& t) {
  return dwc::wgrad_nhwc_layout(s.kh, s.kw, s.stride, s.dil, t.lanes, t.vec, std::min(t.vc, s.kw), t.threads);
}
inline int wgrad_nhwc_regs(const SpecVals& s, const WgradNhwcTile& t) {
  const auto L = wgrad_nhwc_layout(s, t);
  return L.vc * t.vec + 2 * L.win() * t.vec + 2 * t.vec + 40;  // window loaded a block ahead
}
inline std::string wgrad_nhwc_cfg(const SpecVals& s, const WgradNhwcTile& t) {
  return field_cfg(s) + fmt::format("  static constexpr int cl = {}, cv = {}, vc = {}, threads = {};\n", t.lanes, t.vec,
                                    std::min(t.vc, s.kw), t.threads);
}
inline std::optional<std::string> wgrad_nhwc_reject(const SpecVals& s, const WgradNhwcTile& t, const DeviceLimits& d,
                                                    const Problem* p = nullptr) {
  if (p && p->B * p->Ho > INT32_MAX)
    return fmt::format("B x Ho = {} dy rows a channel group exceed 2^31-1", p->B * p->Ho);
  if (auto r = detail::reject_threads(t.threads, d)) return r;
  if (t.lanes != 8 && t.lanes != 16 && t.lanes != 32)
    return fmt::format("lanes={} is not supported; supported: 8, 16, 32", t.lanes);
  if (t.vec < 1 || t.vec > 8 || !detail::vec_ok(s.dtype, t.vec))
    return fmt::format("vec={} ({} bytes of {}) is not supported; supported: 1 or 4, 8, 16, 32 bytes", t.vec,
                       detail::vec_bytes(s.dtype, t.vec), to_string(s.dtype));
  if (t.vc < 1 || t.vc > 16) return fmt::format("vc={} is out of range; supported: [1, 16]", t.vc);
  const auto L = wgrad_nhwc_layout(s, t);
  if (L.groups() > L.tasks() && t.threads > 32)
    return fmt::format("{} thread groups for {} tasks (kh x ceil(kw/vc)): {} idle", L.groups(), L.tasks(),
                       L.groups() - L.tasks());
  if (auto r = detail::reject_regs(wgrad_nhwc_regs(s, t))) return r;
  return detail::reject_blocks(t.threads, t.blocks, wgrad_nhwc_regs(s, t), 0, d);
}
// Work units of a channel group: (b, dy row) pairs.
inline Launch wgrad_nhwc_geometry(const SpecVals&, const WgradNhwcTile& t, const Problem& p) {
  Launch g;
  const int64_t cg = (p.C + t.lanes * t.vec - 1) / (t.lanes * t.vec);
  g.chunks = detail::chunks_for(p.B * p.Ho, cg);
  g.grid = static_cast<unsigned>(cg * g.chunks);
  g.block = t.threads;
  return g;
}
inline WgradNhwcTile wgrad_nhwc_default(const SpecVals& s, const Problem& p, const DeviceLimits& d) {
  WgradNhwcTile t;
  pick_channels(s.dtype, p.C, t.lanes, t.vec);  // 4 bytes a lane; 8 doubled the registers and halved the warps
  t.vc = std::min(s.kw, 8);
  while (wgrad_nhwc_regs(s, t) > kMaxRegisters && (t.vc > 2 || t.vec > 1)) {  // stride 2: wider windows
    if (t.vc > 2) t.vc /= 2;
    else t.vec /= 2;
  }
  // Thread groups that divide the tasks (each group's share equal: the block takes as long as its longest group),
  // whole warps, at most 256 threads; 32 lanes where the chosen lanes cannot divide them so.
  const int tasks = wgrad_nhwc_layout(s, t).tasks();
  const auto best_groups = [&](int lanes) {
    int g = 0;
    for (int c = 1; c <= std::min(tasks, 256 / lanes); ++c)
      if (tasks % c == 0 && (lanes * c) % 32 == 0) g = c;
    return g;
  };
  int g = best_groups(t.lanes);
  if (g == 0 || g * 2 < std::min(tasks, 256 / t.lanes)) {
    const int g32 = best_groups(32);
    if (g32 > 0) t.lanes = 32, g = g32;
  }
  t.threads = g ? t.lanes * g : 32;
  t.blocks = detail::default_blocks(t.threads, wgrad_nhwc_regs(s, t), 0, d);
  return t;
}
inline dwc::PartStrides wgrad_nhwc_part_strides(const SpecVals& s, const Problem& p, int chunks) {
  return dwc::part_strides_nhwc(static_cast<int>(p.C), chunks, s.kh * s.kw);
}

// ---- dwconv_wgrad_reduce -------------------------------------------------------------------------------

struct ReduceTile {
  int threads = 256;
};
inline std::string wgrad_reduce_cfg(const ReduceTile& t) {
  return fmt::format("  static constexpr int threads = {};\n", t.threads);
}
inline std::optional<std::string> wgrad_reduce_reject(const SpecVals& s, const ReduceTile& t, const DeviceLimits& d,
                                                      const Problem* p = nullptr) {
  if (p && p->C * (int64_t(s.kh) * s.kw + 1) > INT32_MAX)
    return fmt::format("C x (kh*kw + 1) = {} values exceed 2^31-1", p->C * (int64_t(s.kh) * s.kw + 1));
  return detail::reject_threads(t.threads, d);
}
inline Launch wgrad_reduce_geometry(const SpecVals& s, const ReduceTile& t, const Problem& p) {
  Launch g;
  g.grid = static_cast<unsigned>((p.C * (int64_t(s.kh) * s.kw + 1) + t.threads - 1) / t.threads);
  g.block = t.threads;
  return g;
}

}  // namespace lkjit::gen::dwconv
