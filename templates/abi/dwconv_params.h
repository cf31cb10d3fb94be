// Kernel arguments of every depthwise-convolution kernel (templates/dwconv/): one plain struct shared by
// host C++ and NVRTC device code (no headers, no framework types). Runtime values live here; anything
// that changes code (kh, kw, stride, dilation, tile) is in the kernel's Cfg.
// MUST stay layout-identical on both sides: the size is asserted below on both (host and NVRTC compiles
// fail when a change breaks it) and the offsets on the host, which has offsetof.
//
// The op (docs/dwconv.md), nn.Conv2d(C, C, (kh, kw), stride=s, padding=(ph, pw), dilation=d, groups=C):
//   y[b,c,i,j] = bias[c] + sum_{u<kh, v<kw} w[c,u,v] * x[b, c, i*s + u*d - ph, j*s + v*d - pw]   (zero outside)
#pragma once

namespace lkjit {

// DWConvParams::flags bits. 0 in normal use.
enum { kDWConvFlagNone = 0 };

struct DWConvParams {
  // Activations, dtype Cfg::T, addressed through 64-bit element strides in (B, C, H, W) order: element
  // (b, c, i, j) of x is at x + b*x_st[0] + c*x_st[1] + i*x_st[2] + j*x_st[3] (NCHW contiguous:
  // {C*H*W, H*W, W, 1}; channels_last: {H*W*C, 1, W*C, C}). Likewise y/dy with (Ho, Wo) extents and dx
  // with (H, W). The host always fills every stride of a tensor a kernel touches, and has checked that a
  // written tensor does not overlap itself.
  const void* x;      // (B, C, H, W)   forward input; wgrad input
  const float* w;     // (C, 1, kh, kw) fp32, nn.Conv2d's layout: w[(c*kh + u)*kw + v]
  const float* bias;  // (C) fp32, or null (forward only)
  void* y;            // (B, C, Ho, Wo) forward output
  const void* dy;     // (B, C, Ho, Wo) output gradient (dgrad, wgrad)
  void* dx;           // (B, C, H, W)   input gradient (dgrad)

  // wgrad: per-block partial sums, fp32: value `tap` (u*kw + v, or kh*kw for dbias) of channel c over
  // chunk ch of (B, H, W) at partial[ch*part_st[0] + c*part_st[1] + tap*part_st[2]] (dwconv/geometry.cuh,
  // part_index). The wgrad kernel writes every value of every chunk; dwconv_wgrad_reduce adds the chunks
  // of each value in increasing ch, so two runs give identical bits (no float atomics).
  float* partial;
  float* dw;          // (C, 1, kh, kw) fp32 weight gradient (reduce output)
  float* dbias;       // (C) fp32, or null: no bias gradient

  long long x_st[4];
  long long y_st[4];
  long long dy_st[4];
  long long dx_st[4];
  long long part_st[3];  // (chunk, c, tap) element strides of partial

  int B, C, H, W;     // input extents
  int Ho, Wo;         // output extents (out_extent in dwconv/geometry.cuh; 'same' padding included)
  int ph, pw;         // padding before (top, left), >= 0; the padding after is implied by Ho, Wo
  int tiles_h, tiles_w;  // output tiles per plane of the launched kernel (the generator's geometry)
  int chunks;         // wgrad: chunks of (B, H, W) per channel = partial values per (c, tap)
  int taps;           // kh*kw (wgrad_reduce, which is compiled once for every kernel size)
  int flags;          // kDWConvFlag* bits
  int reserved;       // zero; keeps the size a multiple of 8
};

static_assert(sizeof(DWConvParams) == 280, "DWConvParams changed size: host and device must agree");
#ifndef __CUDACC_RTC__  // NVRTC has no offsetof; the host compile pins the offsets
static_assert(__builtin_offsetof(DWConvParams, x_st) == 72, "DWConvParams: pointer block changed");
static_assert(__builtin_offsetof(DWConvParams, part_st) == 200, "DWConvParams: stride block changed");
static_assert(__builtin_offsetof(DWConvParams, B) == 224, "DWConvParams: extents moved");
static_assert(__builtin_offsetof(DWConvParams, flags) == 272, "DWConvParams: flags moved");
#endif

}  // namespace lkjit
