// Pieces shared by the WTConv backward kernels.
#pragma once
#include "wtconv/common.cuh"

namespace lkjit {

// Full-resolution output gradient at (y, x): dOut scattered by the stride (zeros elsewhere). g points
// at the plane of dOut, whose element strides are st (WTConvParams::g_st).
template <class T>
__device__ __forceinline__ float g_full(const T* __restrict__ g, int y, int x, int H, int W, int S,
                                        const long long (&st)[4]) {
  if (y < 0 || y >= H || x < 0 || x >= W) return 0.f;
  if (S == 1) return ldg_f32(g + act_yx(st, y, x));
  if (y % S || x % S) return 0.f;
  return ldg_f32(g + act_yx(st, y / S, x / S));
}

// One tap row of a k x k wgrad: acc[v] = sum over rows i = chunk (mod chunks) of an h x w region of
// img[(i+u)*pitch + j+v] * gz[i*gpitch + j], v = 0..K-1. A sliding register window over the image row
// makes it 2 shared loads per K FMAs (one tap per thread would need 2 per FMA).
// kZeroPad: gz is zero in the K-1 elements after each row's w values (a zero halo, rows continuing in
// the next row's halo) and img has a spare row below its last one; reads past w then only meet zero
// gradients, so the per-element bounds checks go (same sums, fewer instructions).
template <int K, bool kZeroPad = false>
__device__ __forceinline__ void wgrad_row(const float* __restrict__ img, int pitch, const float* __restrict__ gz,
                                          int gpitch, int h, int w, int u, int chunk, int chunks, float (&acc)[K]) {
#pragma unroll
  for (int v = 0; v < K; ++v) acc[v] = 0.f;
  for (int i = chunk; i < h; i += chunks) {
    const float* a = img + (i + u) * pitch;
    const float* b = gz + i * gpitch;
    float win[K > 1 ? K - 1 : 1];  // a[j0 .. j0+K-2]
#pragma unroll
    for (int q = 0; q < K - 1; ++q) win[q] = a[q];
    for (int j0 = 0; j0 < w; j0 += K) {
      float nw[K];  // a[j0+K-1 .. j0+2K-2]; zero past the row (its gz is zero there too)
#pragma unroll
      for (int q = 0; q < K; ++q) nw[q] = (kZeroPad || j0 + q < w) ? a[j0 + K - 1 + q] : 0.f;
#pragma unroll
      for (int jj = 0; jj < K; ++jj) {
        const float g = (kZeroPad || j0 + jj < w) ? b[j0 + jj] : 0.f;
#pragma unroll
        for (int v = 0; v < K; ++v) {
          const int q = jj + v;
          acc[v] = fmaf(q < K - 1 ? win[q < K - 1 ? q : 0] : nw[q < K - 1 ? 0 : q - (K - 1)], g, acc[v]);
        }
      }
#pragma unroll
      for (int q = 0; q < K - 1; ++q) win[q] = nw[q + 1];
    }
  }
}

// Deterministic wgrad of n tap sets over an h x w region, written to dst[s*K*K + u*K + v]: tap set s
// pairs img + s*img_stride with gz + s*gz_stride. Work items are tap rows (s, u). With fewer rows than
// the nt threads, a power-of-two group of `chunks` adjacent lanes (at most a warp) shares a row, image
// rows split by residue, and a fixed xor butterfly adds their sums: the order never depends on
// scheduling, and no barrier is needed. nt is a multiple of 32 and every thread of the warps must call.
template <int K, bool kZeroPad = false>
__device__ __forceinline__ void wgrad_sets(int t, int nt, const float* img, int img_stride, int pitch, const float* gz,
                                           int gz_stride, int gpitch, int h, int w, int n, float* __restrict__ dst) {
  const int rows = n * K;
  float acc[K];
  if (rows >= nt) {
    for (int r = t; r < rows; r += nt) {
      const int s = r / K, u = r - s * K;
      wgrad_row<K, kZeroPad>(img + s * img_stride, pitch, gz + s * gz_stride, gpitch, h, w, u, 0, 1, acc);
#pragma unroll
      for (int v = 0; v < K; ++v) dst[r * K + v] = acc[v];
    }
    return;
  }
  // chunks = 2^lg lanes a row: the most that leave no row unserved (chunks * rows <= nt), at most a warp, and
  // no more than the h image rows need. Closed form (nt / rows folds to a constant): the doubling loop it
  // replaces and t / chunks cost ~3k warp instructions of a 56x56 backward plane.
  const int lg = min(min(5, 31 - __clz(nt / rows)), h <= 1 ? 0 : 32 - __clz(h - 1)), chunks = 1 << lg;
  const int r = t >> lg, ch = t & (chunks - 1), s = r / K, u = r - s * K;
  if (r < rows) wgrad_row<K, kZeroPad>(img + s * img_stride, pitch, gz + s * gz_stride, gpitch, h, w, u, ch, chunks, acc);
  else {
#pragma unroll
    for (int v = 0; v < K; ++v) acc[v] = 0.f;
  }
  if (t >= ((rows * chunks + 31) & ~31)) return;  // whole warps with no row
  for (int o = chunks / 2; o > 0; o >>= 1) {
#pragma unroll
    for (int v = 0; v < K; ++v) acc[v] += __shfl_xor_sync(0xffffffffu, acc[v], o);
  }
  if (r < rows && ch == 0) {
#pragma unroll
    for (int v = 0; v < K; ++v) dst[r * K + v] = acc[v];
  }
}

// Deterministic sum of one float per thread over nt threads (a multiple of 32): an xor butterfly per
// warp, then the warp sums in warp order by thread 0 (the result is valid there only). red holds
// nt / 32 floats; sync() is the barrier of the nt threads.
template <class Sync>
__device__ __forceinline__ float ordered_sum(float v, int t, int nt, float* red, Sync sync) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((t & 31) == 0) red[t >> 5] = v;
  sync();
  float s = 0.f;
  if (t == 0)
    for (int i = 0; i < nt / 32; ++i) s += red[i];
  return s;
}

}  // namespace lkjit
