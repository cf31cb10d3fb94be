// Internal helpers shared by the WTConv family's forward and backward kernel descriptions.
#pragma once
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "generator/family.h"
#include "lkjit/wtconv_kernels.h"
#include "templates/wtconv/cluster_geometry.cuh"

namespace lkjit::gen::wtconv {

inline constexpr int kMaxK = 31, kMaxL = 8;

// The family's functions read specs and tiles through these views: a WTConv spec's fields, and the
// family's tile axes (absent axes read as 0).
struct WSpec {
  Kernel kernel;
  DType dtype = DType::kF32;
  int k = 5, L = 0;
  bool first = true;
  int arch = 90;
  bool nhwc = false;  // plane kernels: channels_last activations (the spec's layout field)
};
inline WSpec wspec(const OpSpec& s) {
  return {s.kernel, s.dtype, s.get("k"), s.get("L"), s.get("first") != 0, s.arch, s.get("layout") != 0};
}

struct WTile {
  int tile_h = 0, tile_w = 0, planes = 0, vy = 0, threads = 0, blocks = 0, cluster = 0;
  operator Tile() const {
    Tile t = Tile::of({{"tile_h", tile_h}, {"tile_w", tile_w}, {"planes", planes}, {"vy", vy}, {"threads", threads},
                       {"blocks", blocks}});
    if (cluster) t.set("cluster", cluster);  // (only channels_last plane kernels have the axis)
    return t;
  }
  std::string to_string() const { return Tile(*this).to_string(); }
};
inline WTile wtile(const Tile& t) {
  return {t.get("tile_h"), t.get("tile_w"), t.get("planes"), t.get("vy"), t.get("threads"), t.get("blocks"),
          t.get("cluster")};
}

// Adapters from the generator's KernelDef signatures to the family's views.
template <auto F>
TileSpace space_of(const OpSpec& s) { return F(wspec(s)); }
template <auto F>
std::optional<std::string> reject_of(const OpSpec& s, const Tile& t, const DeviceLimits& d, const Shape* sh) {
  return F(wspec(s), wtile(t), d, sh);
}
template <auto F>
Tile default_of(const OpSpec& s, const Shape& sh, const DeviceLimits& d) { return F(wspec(s), sh, d); }
template <auto F>
LaunchGeometry geometry_of(const OpSpec& s, const Tile& t, const Shape& sh) { return F(wspec(s), wtile(t), sh); }
template <auto F>
std::string text_of(const OpSpec& s, const Tile& t) { return F(wspec(s), wtile(t)); }

inline int cdiv(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }
inline int R(const WSpec& s) { return (s.k - 1) / 2; }
// Shared-memory image row pitch: the width rounded up to odd (templates/wtconv/common.cuh, odd_pitch).
inline int64_t odd_pitch(int64_t w) { return w | 1; }

inline const char* ctype(DType t) {
  switch (t) {
    case DType::kF32: return "float";
    case DType::kF16: return "lkjit::f16";
    case DType::kBF16: return "lkjit::bf16";
  }
  return "?";
}

// Cross-field rule (ranges come from the family's field table): k is odd.
inline void validate_wtconv(const OpSpec& s, std::vector<std::string>& e) {
  const int k = s.get("k");
  if (k >= 1 && k <= kMaxK && k % 2 == 0)
    e.push_back(fmt::format("k={} is out of range; supported: odd k in [1, {}]", k, kMaxK));
}

// Level sizes: lh[0] = H, lh[l] = ceil(lh[l-1] / 2) (odd sizes are zero-padded by one).
inline std::vector<int64_t> level_sizes(int64_t n, int L) {
  std::vector<int64_t> v{n};
  for (int l = 1; l <= L; ++l) v.push_back((v.back() + 1) / 2);
  return v;
}

inline std::string base_cfg(const WSpec& s, const WTile& t) {
  return fmt::format("  using T = {};\n  static constexpr int k = {}, R = {}, L = {}, vy = {}, threads = {};\n",
                     ctype(s.dtype), s.k, R(s), s.L, t.vy, t.threads);
}

// The reduce kernels' (wtconv_reduce, wtconv_reduce_lane) compile-time configuration.
inline std::string reduce_cfg(const WSpec& s, const WTile& t) {
  return fmt::format("  static constexpr int k = {}, L = {}, threads = {};\n", s.k, s.L, t.threads);
}
inline std::optional<std::string> reject_threads(const WTile& t, const DeviceLimits& d) {
  if (t.threads < 32 || t.threads > d.max_threads_per_block || t.threads % 32 != 0)
    return fmt::format("threads={} is out of range; supported: a multiple of 32 in [32, {}]", t.threads,
                       d.max_threads_per_block);
  return std::nullopt;
}

inline std::optional<std::string> reject_smem(int64_t bytes, const DeviceLimits& d) {
  if (bytes > d.max_smem_per_block)
    return fmt::format("shared memory {} B exceeds the {} limit of {} B per block", bytes,
                       arch_name(d.arch), d.max_smem_per_block);
  return std::nullopt;
}

// ---- plane-resident kernels: forward and backward differ only in their shared-memory layout ---------
// Row pitch (floats) and conv item columns (vw >= w) of a plane image w columns wide with halo r, whose conv
// items are strips of v rows, one lane per column, consecutive lanes wrapping from one strip's last column
// to the next strip's first. With v*pitch = vw (mod 32), lane n of a warp reads bank (base + n) mod 32 at
// every tap: no conflicts within a subband (the lanes past w idle; a warp that spans two subbands may still
// conflict, as their images are not aligned to the pattern). An odd pitch, the earlier choice, made every load 2-way
// wherever a warp wrapped (all level-conv loads of a 56x56 plane took 2 wavefronts). Of the pitches up to
// a quarter (and 7 floats) above the minimum w + 2r that allow it with at most a quarter of idle lanes, the
// least pitch x vw (shared memory x lanes); where none does (small images, v = 1), the odd pitch and its
// conflicts: a larger pitch there would cost more shared memory than the conflicts cost time.
// The backward takes odd pitches only, up to 3 floats above the minimum: its wgrad lanes walk many rows of
// an image at one column, and an even pitch put them in few banks (measured: pitch 32 for the 28x28 level
// of a 56x56 plane made the backward take 1000 us instead of 573).
struct StripLayout {
  int64_t pitch, vw;
};
inline StripLayout strip_layout(const WSpec& s, int64_t w, int v) {
  const int64_t lo = w + 2 * R(s);
  StripLayout best{lo | 1, w};
  const bool odd = s.kernel == kWTConvBwdPlane;
  int64_t cost = -1;
  for (int64_t p = lo; p <= lo + std::min<int64_t>(odd ? 3 : 7, lo / 4); ++p) {
    if (odd && p % 2 == 0) continue;
    const int64_t vw = w + ((v * p - w) % 32 + 32) % 32;
    if (4 * vw <= 5 * w && (cost < 0 || p * vw < cost)) best = {p, vw}, cost = p * vw;
  }
  return best;
}

// Plane images (templates/wtconv/plane_common.cuh, PlaneImages): the input plane rounded up to a multiple of
// 4 floats, and one 4-subband image per level, each with a zero halo R, vy spare rows and strip_layout's pitch.
inline int64_t round4(int64_t n) { return (n + 3) & ~int64_t(3); }
struct PlaneImageFloats {
  int64_t xs = 0, ys = 0, levels = 0;  // one input-size image, all level images, the coefficient stack
};
inline PlaneImageFloats plane_image_floats(const WSpec& s, int vy, const Shape& sh) {
  const int r = R(s);
  const auto lh = level_sizes(sh.H, s.L), lw = level_sizes(sh.W, s.L);
  PlaneImageFloats f;
  f.xs = round4((sh.H + 2 * r + vy) * strip_layout(s, sh.W, vy).pitch);
  for (int l = 1; l <= s.L; ++l) {
    f.ys += 4 * (lh[l] + 2 * r + vy) * strip_layout(s, lw[l], vy).pitch;
    f.levels += 4 * lh[l] * lw[l];
  }
  return f;
}
using PlaneSmemFloats = int64_t (*)(const WSpec&, const WTile&, const Shape&);

// The plane kernels' channels_last mode (templates/wtconv/cluster_nhwc.cuh): a cluster of `cluster` blocks
// stages and stores the planes of its cluster x planes channels together. Candidates of the axis; only
// channels_last specs on sm_90+ have it.
inline std::vector<int> plane_cluster_values() { return {0, 4, 8}; }
inline std::optional<std::string> plane_cluster_reject(const WSpec& s, const WTile& t, const DeviceLimits& d,
                                                       const Shape* sh) {
  if (t.cluster == 0) return std::nullopt;
  if (!s.nhwc) return fmt::format("cluster={}: only channels_last (layout=1) plane kernels have clusters", t.cluster);
  if (d.arch < 90) return fmt::format("cluster={} needs sm_90 or newer; {} has no thread-block clusters", t.cluster,
                                      arch_name(d.arch));
  if (s.L < 1) return fmt::format("cluster={} needs L >= 1 (the output waits in the level images); L=0", t.cluster);
  const int esize = s.dtype == DType::kF32 ? 4 : 2;
  switch (wtc::cluster_reject(t.cluster, t.planes, esize, sh ? sh->C : int64_t(t.cluster) * t.planes)) {
    case 1: return fmt::format("cluster={} is out of range; supported: a power of two in [2, {}]", t.cluster,
                               int(wtc::kMaxClusterRanks));
    case 2: return fmt::format("cluster={} with planes={}: planes must be a power of two", t.cluster, t.planes);
    case 3: return fmt::format("cluster={} x planes={} channels of {} are {} B a pixel; supported: at least 4 B",
                               t.cluster, t.planes, to_string(s.dtype), t.cluster * t.planes * esize);
    case 4: return fmt::format("C={} is not a multiple of the cluster's cluster x planes = {} channels", sh->C,
                               t.cluster * t.planes);
    default: break;
  }
  if (sh && sh->stride != 1) return fmt::format("cluster={} needs stride 1; stride={}", t.cluster, sh->stride);
  return std::nullopt;
}

// The plane kernels' tile space, forward and backward (threads_doc: how the kernel reads its threads axis).
inline TileSpace plane_space_with(const WSpec& s, const char* threads_doc) {
  TileSpace sp{{{"planes", {1, 2, 4, 8, 16}, "(b,c) planes per block, one warp group each"},
                {"vy", {1, 2, 4, 8}, "output rows per thread"},
                {"threads", {32, 64, 128, 256, 512}, threads_doc}}};
  if (s.nhwc && s.arch >= 90) sp.axes.push_back({"cluster", plane_cluster_values(), "blocks a cluster (0: none)"});
  return sp;
}

inline std::optional<std::string> plane_reject_with(const WSpec& s, const WTile& t, const DeviceLimits& d,
                                                    const Shape* sh, PlaneSmemFloats smem_floats) {
  if (auto r = reject_threads(t, d)) return r;
  if (t.planes < 1 || t.planes > 32) return fmt::format("planes={} is out of range; supported: [1, 32]", t.planes);
  if (t.threads % (32 * t.planes) != 0)
    return fmt::format("threads={} is not a whole number of warps per plane for planes={}", t.threads, t.planes);
  if (t.threads / t.planes > 32 && t.planes > 15)
    return fmt::format("planes={} with multi-warp groups exceeds the 15 named barriers", t.planes);
  if (t.vy < 1 || t.vy > 8) return fmt::format("vy={} is out of range; supported: [1, 8]", t.vy);
  if (auto r = plane_cluster_reject(s, t, d, sh)) return r;
  if (sh) {
    if (sh->H > 1024 || sh->W > 1024) return fmt::format("planes of {}x{} exceed 1024x1024", sh->H, sh->W);
    return reject_smem(smem_floats(s, t, *sh) * 4, d);
  }
  return std::nullopt;
}

// The plane kernels' default tile. Fitted to exhaustive searches on an H200 (lkjit tune, bench/RESULTS.md
// sections 3 and 6) over the WTConvNeXt-T planes, bf16 k=5. Warps per plane: large planes 8 (the backward
// 16 at L = 0, where it has no B warps); mid planes 2 (forward: 28x28 p2_v8_w128 143 us against 154 for 4 warps) or 4 (backward);
// below 512 pixels one warp, alone in its block from 128 pixels on (its phases are short, so independent
// small blocks hide each other's barriers best) and grouped below (7x7 backward: 8 planes a block 175 us
// against 182 alone). Strip rows (vy): the forward 8 from 784 pixels (56x56 233 us against 242 for 4),
// else 4, or 2 below 8 rows; the backward 4 on large planes, else 2. Every block stays within half the
// per-block shared memory (the plan takes the plane path only where two blocks share an SM): fewer spare
// rows first, then grouped planes fill a block of up to 256 threads within budget_bytes (forward 56 KiB,
// which the 28x28 pair at vy 8 takes; backward 80 KiB: a 28x28 backward pair, 71 KiB, took 353 us against
// 400 us for single planes).
inline WTile plane_default_with(const WSpec& s, const Shape& sh, const DeviceLimits& d, PlaneSmemFloats smem_floats,
                               int64_t budget_bytes, bool backward) {
  const int64_t hw = sh.H * sh.W, cap = d.max_smem_per_block / 2;
  // 8 warps a 56x56 backward plane since its B warps also take dX's base term (H200, exhaustive: 469 us
  // against 486 at 16 warps, bf16 64x96x56x56 L=5); L = 0 has no B warps and keeps the earlier 16.
  const int warps = hw >= 2048 ? (backward && s.L == 0 ? 16 : 8) : hw >= 512 ? (backward ? 4 : 2) : 1;
  const int vy = backward ? (hw >= 2048 ? 4 : 2) : sh.H < 8 ? 2 : hw >= 784 ? 8 : 4;
  WTile t{0, 0, 1, vy, 32 * warps};
  // Fewer spare rows where a plane would not fit twice per SM otherwise (large k or L on mid-size planes).
  // Usually that saves memory; strip_layout's pitch depends on vy too, so now and then it costs a little.
  while (t.vy > 1 && smem_floats(s, t, sh) * 4 > cap) t.vy /= 2;
  const int64_t one = smem_floats(s, t, sh) * 4, budget = std::min(budget_bytes, cap);
  const bool group = !(warps == 1 && hw >= 128);
  while (group && t.threads * 2 <= 256 && one * t.planes * 2 <= budget) {
    t.planes *= 2;
    t.threads *= 2;
  }
  // channels_last on sm_90: clusters of 8 blocks where they can run the layer; the plain kernel reads
  // channels_last planes one element at a time (H200, bf16 WTConvNeXt-T 56x56 and 28x28 passes: 1.2-1.5x
  // slower than clusters of 8; bench/RESULTS.md section 13).
  WTile c = t;
  c.cluster = 8;
  if (s.nhwc && !plane_cluster_reject(s, c, d, &sh)) t = c;
  return t;
}

inline LaunchGeometry plane_geometry_with(const WSpec& s, const WTile& t, const Shape& sh,
                                          PlaneSmemFloats smem_floats) {
  LaunchGeometry g;
  g.grid[0] = static_cast<unsigned>(cdiv(sh.B * sh.C, t.planes));
  g.block[0] = t.threads;
  g.smem_bytes = static_cast<unsigned>(smem_floats(s, t, sh) * 4);
  g.blocks = std::ceil(double(sh.B) * double(sh.C) / t.planes);
  // Each level image's row pitch and conv item columns (WTConvParams::lpitch, lvw), as smem_floats sized them.
  const auto lw = level_sizes(sh.W, s.L);
  for (int l = 0; l <= s.L; ++l) {
    const auto st = strip_layout(s, lw[l], t.vy);
    g.values["lpitch" + std::to_string(l)] = st.pitch;
    g.values["lvw" + std::to_string(l)] = st.vw;
  }
  return g;
}

inline std::string plane_cfg(const WSpec& s, const WTile& t) {
  return base_cfg(s, t) + fmt::format("  static constexpr int planes = {}, cluster = {};\n", t.planes, t.cluster);
}
inline int plane_cluster(const WSpec&, const WTile& t) { return t.cluster; }
// "_l1" after the fields for channels_last plane kernels (the layout field's token).
inline const char* layout_word(const WSpec& s) { return s.nhwc ? "_l1" : ""; }

// A 1-D grid of (b,c) planes x tiles over a rows x cols output (no 65535 limit on planes).
inline LaunchGeometry tiled_geometry(const Shape& sh, int64_t rows, int64_t cols, const WTile& t, int64_t smem_floats) {
  LaunchGeometry g;
  const int64_t th = (rows + t.tile_h - 1) / t.tile_h, tw = (cols + t.tile_w - 1) / t.tile_w;
  g.grid[0] = static_cast<unsigned>(sh.B * sh.C * th * tw);
  g.block[0] = t.threads;
  g.smem_bytes = static_cast<unsigned>(smem_floats * 4);
  g.blocks = double(sh.B) * double(sh.C) * double(th) * double(tw);
  g.values["tiles_h"] = th;  // WTConvParams::tiles_h, tiles_w
  g.values["tiles_w"] = tw;
  return g;
}

// The fields as OpSpec::to_string() words them: "k=5 L=3", and " first" / " deeper" for the level kernels.
inline std::string describe_wtconv(const OpSpec& s) {
  const bool level = s.kernel == kWTConvFwdLevel || s.kernel == kWTConvBwdLevel;
  return fmt::format("k={} L={}{}{}", s.get("k"), s.get("L"), level ? (s.get("first") ? " first" : " deeper") : "",
                     s.get("layout") ? " nhwc" : "");
}

// A WTConv kernel: every one has the fields k, L, first, reads WTConvParams and names itself.
template <auto Space, auto Reject, auto Default, auto Geometry, auto Cfg, auto Name>
KernelDef wtconv_kernel(const Kernel& k, const char* header, const char* fn) {
  KernelDef d;
  d.name = k.name();
  d.template_header = header;
  d.device_fn = fn;
  d.params_type = "WTConvParams";
  d.fields = {"k", "L", "first"};
  d.validate = validate_wtconv;
  d.space = space_of<Space>;
  d.reject = reject_of<Reject>;
  d.default_tile = default_of<Default>;
  d.geometry = geometry_of<Geometry>;
  d.cfg_body = text_of<Cfg>;
  d.name_fields = text_of<Name>;
  d.describe = describe_wtconv;
  if (k == kWTConvFwdPlane || k == kWTConvBwdPlane) {
    d.fields.push_back("layout");
    d.cluster = [](const OpSpec& s, const Tile& t) { return plane_cluster(wspec(s), wtile(t)); };
  }
  if (k == kWTConvFwdLevel || k == kWTConvBwdLevel) {  // "wtconv_fwd_level1_..." / "wtconv_fwd_levelN_..."
    d.glued_field = "first";
    d.glued_words = {"1", "N"};
  }
  return d;
}

// Tiled kernels share one tile space and its basic constraints.
TileSpace tiled_space(const WSpec&);
std::optional<std::string> tiled_reject_common(const WTile& t, const DeviceLimits& d);

}  // namespace lkjit::gen::wtconv
