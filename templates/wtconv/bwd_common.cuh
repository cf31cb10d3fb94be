// Pieces shared by the WTConv backward kernels.
#pragma once
#include "wtconv/common.cuh"

namespace lkjit {

// Taps flipped in both axes: the transposed (dgrad) conv is a correlation with flipped taps,
// dY[i,j] = sum_{u,v} W[K-1-u, K-1-v] dZ[i+u-R, j+v-R].
template <int K>
__device__ __forceinline__ float flipped_tap(const float* __restrict__ w, int r) {
  return w[K * K - 1 - r];
}

// Full-resolution output gradient at (y, x): dOut scattered by the stride (zeros elsewhere).
template <class T>
__device__ __forceinline__ float g_full(const T* __restrict__ g, int y, int x, int H, int W, int S, int Wo) {
  if (y < 0 || y >= H || x < 0 || x >= W) return 0.f;
  if (S == 1) return ldg_f32(g + (long long)y * Wo + x);
  if (y % S || x % S) return 0.f;
  return ldg_f32(g + (long long)(y / S) * Wo + x / S);
}

// Deterministic wgrad of one k x k tap set: sum over an h x w region of img[(i+u)*pitch + j+v] *
// gz[i*gpitch + j]. `chunks` threads share one tap, each summing rows i = chunk (mod chunks); the
// chunk sums are then added in chunk order, so the result does not depend on scheduling.
template <int K>
__device__ __forceinline__ float wgrad_tap_rows(const float* __restrict__ img, int pitch,
                                                const float* __restrict__ gz, int gpitch, int h, int w,
                                                int u, int v, int chunk, int chunks) {
  float acc = 0.f;
  for (int i = chunk; i < h; i += chunks) {
    const float* a = img + (i + u) * pitch + v;
    const float* b = gz + i * gpitch;
    for (int j = 0; j < w; ++j) acc = fmaf(a[j], b[j], acc);
  }
  return acc;
}

}  // namespace lkjit
