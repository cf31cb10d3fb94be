// Building blocks shared by the WTConv kernels: the register-blocked k x k strip convolution and the
// folded-weight layout. Cfg supplies k (odd), R = (k-1)/2 and vy (output rows per thread).
#pragma once
#include "abi/wtconv_params.h"
#include "common/dtype.cuh"
#include "common/pdl.cuh"

namespace lkjit {

// Offsets into the folded weight buffer [W~0: C*k*k][b~: C][W~_1: 4C*k*k]...
__device__ __forceinline__ long long fold_base_w(int c, int kk) { return (long long)c * kk; }
__device__ __forceinline__ long long fold_bias(int C, int c, int kk) { return (long long)C * kk + c; }
__device__ __forceinline__ long long fold_level_w(int C, int l, int c, int s, int kk) {
  return (long long)C * kk + C + ((long long)(l - 1) * 4 * C + 4LL * c + s) * kk;
}
// The value-major copy after them (WTConvParams::wfold): value v of a channel's V = kk + 1 + 4L*kk, in the
// order W~0, b~, W~_1 (subbands LL..HH), ..., W~_L; fold_t(C, L, kk, v) + c is channel c's.
__device__ __forceinline__ long long fold_t(int C, int L, int kk, int v) {
  return (long long)C * (kk + 1 + 4LL * L * kk) + (long long)v * C;
}

// The lane backward's partial gradients of group g (0: W~0 and b~, l: level l; nvals values a plane) in
// blocks of 32 channels: value v of plane (b, c) at part_off[g] + ((c/32 * B + b) * nvals + v) * 32 + c%32
// (this returns value 0's address). A warp's stores (consecutive channels) coalesce, and reduce_lane's
// block of 32 channels reads one contiguous run of its values per batch element: laid out channel-innermost
// over all of C, those were 128-byte pieces 4C bytes apart, and the sums ran at ~0.9 TB/s from DRAM.
__device__ __forceinline__ float* lane_partial(const WTConvParams& p, int g, int nvals, long long b, int c) {
  return p.partial + p.part_off[g] + (((long long)(c >> 5) * p.B + b) * nvals) * 32 + (c & 31);
}

// Strided activations (x, g, out; WTConvParams::x_st etc.): plane pl = b*C + c starts at
// b*st[0] + c*st[1] elements, and (y, x) of a plane is at y*st[2] + x*st[3] from there. 64-bit: a
// strided tensor's offsets need not fit in 32 bits even where the plane itself is small.
__device__ __forceinline__ long long act_plane(const long long (&st)[4], long long plane, int C) {
  return (plane / C) * st[0] + (plane % C) * st[1];
}
__device__ __forceinline__ long long act_yx(const long long (&st)[4], long long y, long long x) {
  return y * st[2] + x * st[3];
}

// acc[v] += sum_{u,q} w[u*K+q] * src[(v+u)*pitch + q] for v in [0, V): V vertically adjacent outputs
// of a zero-haloed fp32 smem image, reading V+K-1 rows once instead of V*K (register blocking).
// Small K keeps the K*K taps in registers, loaded as float4 where kW4 says w is 16-byte aligned with
// round4(K*K) floats readable (a quarter of the loads: the level convs reload taps per item); larger K
// reads them from shared memory.
template <int K, int V, bool kW4 = false>
__device__ __forceinline__ void conv_strip(const float* __restrict__ src, int pitch,
                                           const float* __restrict__ w, float (&acc)[V]) {
  constexpr bool kRegs = K <= 9;
  constexpr int kN = kRegs ? (K * K + 3) / 4 * 4 : 1;
  float wr[kN];
  if (kRegs && kW4) {
#pragma unroll
    for (int i = 0; i < kN / 4; ++i) {
      const float4 q = reinterpret_cast<const float4*>(w)[i];
      wr[4 * i] = q.x, wr[4 * i + 1] = q.y, wr[4 * i + 2] = q.z, wr[4 * i + 3] = q.w;
    }
  } else if (kRegs) {
#pragma unroll
    for (int i = 0; i < (kRegs ? K * K : 1); ++i) wr[i] = w[i];
  }
#pragma unroll(K <= 11 ? V + K - 1 : 1)
  for (int r = 0; r < V + K - 1; ++r) {
    const float* row = src + r * pitch;
#pragma unroll(K <= 11 ? K : 4)
    for (int q = 0; q < K; ++q) {
      const float xv = row[q];
#pragma unroll
      for (int v = 0; v < V; ++v) {
        const int u = r - v;
        if (u >= 0 && u < K) acc[v] = fmaf(kRegs ? wr[(kRegs ? u * K + q : 0)] : w[u * K + q], xv, acc[v]);
      }
    }
  }
}

// One Haar analysis step on a 2x2 block (a b / c d), taps exactly 1/2 (spec: subbands LL, LH, HL, HH).
__device__ __forceinline__ void haar4(float a, float b, float c, float d, float (&y)[4]) {
  y[0] = 0.5f * (a + b + c + d);
  y[1] = 0.5f * (a + b - c - d);
  y[2] = 0.5f * (a - b + c - d);
  y[3] = 0.5f * (a - b - c + d);
}

// Subband s (0..3) of haar4(a, b, c, d) for a runtime s, rounded as haar4 rounds it: the products with
// +-1 are exact, so each sum is the same sum.
__device__ __forceinline__ float haar4_band(float a, float b, float c, float d, int s) {
  const float sb = (s & 2) ? -1.f : 1.f, sc = (s & 1) ? -1.f : 1.f;
  return 0.5f * (a + sb * b + sc * c + (sb * sc) * d);
}

__device__ __forceinline__ int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Row pitch (floats) of a tiled kernel's shared-memory image: the width rounded up to odd. Threads that
// walk different rows of an image at the same column (wgrad row chunks, strips) then fall in different
// banks; an even pitch such as 32 or 60 put them in 1-8 banks (measured: 4.3-way conflicts on average).
// The generator's tiled formulas use the same rounding; plane images take the generator's strip_layout.
__host__ __device__ constexpr int odd_pitch(int w) { return w | 1; }

}  // namespace lkjit
