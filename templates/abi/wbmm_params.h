// Kernel arguments of every WBMM kernel (templates/wbmm/): one plain struct shared by host C++ and NVRTC
// device code (no headers, no framework types). Runtime values live here; anything that changes code
// (window, mode, precision, identity, bias, layout order, tile) is in Cfg. MUST stay layout-identical
// on both sides: the size is asserted below on both (a change that breaks it fails the host and the NVRTC
// compile), the offsets on the host.
#pragma once

namespace lkjit {

// WBMMParams::flags bits. Accumulate: the reduce kernel adds its sums to dR / dM / dbias (gradient
// accumulation) instead of storing them.
enum { kWBMMFlagAccumulate = 1 };

struct WBMMParams {
  // Activations, dtype Cfg::T, (B, C, H, W) each, addressed through 64-bit element strides in (B, C, H, W)
  // order: element (b, c, i, j) of x is at x + b*x_st[0] + c*x_st[1] + i*x_st[2] + j*x_st[3] (NCHW, NHWC or
  // any other order). The host fills every stride it passes a pointer for and has checked that no written
  // tensor overlaps itself.
  const void* x;   // forward input (wbmm_fwd, wbmm_wgrad)
  const void* dy;  // output gradient (wbmm_dgrad, wbmm_wgrad)
  void* y;         // forward output (wbmm_fwd)
  void* dx;        // input gradient (wbmm_dgrad; wbmm_wgrad with a fused dX)
  long long x_st[4];
  long long dy_st[4];
  long long y_st[4];
  long long dx_st[4];

  // Parameters, fp32, contiguous.
  const float* R;     // table mode: (C, K), K = (2wh-1)(2ww-1) (the reference's relative_position_bias_table)
  const float* M;     // dense mode: (C, d, d), M[c][i][j] (row i = input position, column j = output)
  const float* bias;  // (C) per-channel bias of the forward (deploy form), or null

  // Backward scratch and results, fp32 (templates/wbmm/geometry.cuh, partial_index). The wgrad blocks
  // write per-block partial sums; wbmm_reduce adds them in a fixed order (no float atomics).
  float* part;       // (parts, C, nv): nv = K (table: dR) or d*d (dense: dM)
  float* part_bias;  // (chunks, C): partial sums of dY per channel, or null without dbias
  float* dR;         // (C, K) table mode
  float* dM;         // (C, d, d) dense mode
  float* dbias;      // (C) or null

  int B, C, H, W;   // activation extents
  int nH, nW;       // windows per column / row: ceil(H / wh), ceil(W / ww) (bottom/right zero padding)
  int chunk_tiles;  // window tiles each block of wbmm_fwd / wbmm_dgrad / wbmm_wgrad walks (grid.x chunks)
  int parts;        // wbmm_reduce: partial rows per channel in part (geometry.cuh, partial_rows)
  int chunks;       // wbmm_reduce: rows of part_bias
  int flags;        // kWBMMFlag* bits
};

static_assert(sizeof(WBMMParams) == 264, "WBMMParams changed size: host and device must agree");
// NVRTC has no offsetof; the host compile checks the offsets as well.
#if !defined(__CUDACC_RTC__)
static_assert(__builtin_offsetof(WBMMParams, x_st) == 32 && __builtin_offsetof(WBMMParams, R) == 160 &&
                  __builtin_offsetof(WBMMParams, part) == 184 && __builtin_offsetof(WBMMParams, B) == 224 &&
                  __builtin_offsetof(WBMMParams, flags) == 260,
              "WBMMParams changed layout: host and device must agree");
#endif

}  // namespace lkjit
