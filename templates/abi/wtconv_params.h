// Kernel arguments of every WTConv kernel: one plain struct shared by host C++ and NVRTC device code
// (no headers, no framework types). Runtime values live here; anything that changes code is in Cfg.
// MUST stay layout-identical on both sides: the size is asserted below, so host and NVRTC compiles
// both fail when a change breaks the layout; the host also asserts offsets (wtconv_layer.cpp).
#pragma once

namespace lkjit {

enum { kWTConvMaxLevels = 8 };
// WTConvParams::flags bits, for tests: the backward plane kernel's B warps claim every dX item (ignoring
// the chain's done flag), or none, so each path runs whatever the timing. 0 in normal use.
enum { kWTConvFlagClaimAll = 1, kWTConvFlagClaimNone = 2 };

struct WTConvParams {
  // Activations, dtype Cfg::T, addressed through element strides in (B, C, H, W) order: element
  // (b, c, i, j) of x is at x + b*x_st[0] + c*x_st[1] + i*x_st[2] + j*x_st[3], likewise g with g_st and
  // out with out_st (act_plane, act_yx in wtconv/common.cuh). The host always fills the strides (NCHW
  // contiguous unless the caller says otherwise) and has checked that out does not overlap itself.
  const void* x;    // (B, C, H, W) forward input
  const void* g;    // (B, C, H_out, W_out) output gradient (backward)
  void* out;        // forward output (B, C, H_out, W_out), or dX (B, C, H, W) in backward
  long long x_st[4];
  long long g_st[4];
  long long out_st[4];

  // Folded parameters, fp32: [W~0: C*k*k][b~: C][W~_1: 4C*k*k]...[W~_L]  (Eq. 8), then the same
  // C*V values (V = k*k + 1 + 4L*k*k per channel) transposed, value-major: value v of channel c at
  // wfold[C*V + v*C + c] (the lane kernels' coalesced reads: consecutive lanes, consecutive channels).
  const float* wfold;
  // Raw parameters, fp32 (fold kernel input; reduce kernel for Eq. 9).
  const float* base_w;   // (C,k,k)
  const float* base_b;   // (C) or null
  const float* base_s;   // (C)
  const float* level_w[kWTConvMaxLevels];  // (4C,k,k)
  const float* level_s[kWTConvMaxLevels];  // (4C)

  // Scratch, fp32 (tiled path): per-level subband tensors (B*C, 4, h_l, w_l) at z + z_off[l-1],
  // and the low band handed from one level kernel to the next.
  float* z;
  const float* low_in;   // (B*C, h_in, w_in), level > 1
  float* low_out;        // (B*C, h_l, w_l), or null at the deepest level
  const float* low2_in;  // backward: second low-band chain (dR_l)
  float* low2_out;

  // Per-block partial parameter gradients (backward), fp32. Group g = 0 (base: dW~0 then db~, k*k+1
  // values) or g = l (level l: dW~_l for the 4 subbands, 4*k*k values); the value idx of plane pl,
  // tile t is at partial[part_off[g] + (pl * part_tiles[g] + t) * nvals(g) + idx]; the lane backward's
  // (one tile) in blocks of 32 channels at part_off[g] + ((c/32 * B + b) * nvals(g) + idx) * 32 + c%32
  // (C rounded up to 32). Reduced in a fixed order (no float atomics; reduce.cuh, reduce_lane.cuh), then
  // Eq. 9 gives the parameter gradients below.
  float* partial;
  long long part_off[kWTConvMaxLevels + 1];
  int part_tiles[kWTConvMaxLevels + 1];
  float* grad_base_w;    // outputs of Eq. 9: (C,k,k)
  float* grad_base_b;    // (C) or null
  float* grad_base_s;    // (C)
  float* grad_level_w[kWTConvMaxLevels];
  float* grad_level_s[kWTConvMaxLevels];

  long long z_off[kWTConvMaxLevels];  // element offsets of each level in z
  int lh[kWTConvMaxLevels + 1];       // padded level sizes: lh[0] = H, lh[l] = ceil(lh[l-1]/2)
  int lw[kWTConvMaxLevels + 1];
  // Plane kernels: row pitch (floats) of the shared-memory image of level l (l = 0: the input plane), and
  // the columns its conv items span, lvw[l] >= lw[l]; the host picks them per kernel (the backward keeps
  // odd pitches), k and vy so that lanes wrapping from one strip to the next keep consecutive banks
  // (generator: wtconv::strip_layout).
  int lpitch[kWTConvMaxLevels + 1];
  int lvw[kWTConvMaxLevels + 1];

  int B, C, H, W;        // input size
  int H_out, W_out;      // output size (= ceil(H/stride), ceil(W/stride))
  int stride;
  int has_bias;
  int level;             // level kernels: l in 1..L
  int h_in, w_in;        // level kernels: size of the input low band (lh[l-1], lw[l-1])
  int tiles_h, tiles_w;  // tiled kernels: tiles per plane
  int flags;             // kWTConvFlag* bits (testing); 0 in normal use
};

static_assert(sizeof(WTConvParams) == 856, "WTConvParams changed size: host and device must agree");

}  // namespace lkjit
