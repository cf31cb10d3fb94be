// Deterministic reduction of the backward's partial parameter gradients, then scale-gradient recovery
// (I/O-aware reformulation, §4.3, Eq. 9): dW = s dW~, db = s0 db~, ds = <dW~, W> (+ db~ b for s0).
// One block per channel; every sum runs in a fixed order, so two runs give identical bits.
#pragma once
#include "wtconv/common.cuh"

namespace lkjit {

template <class Cfg>
__device__ __forceinline__ void wtconv_reduce(const WTConvParams& p) {
  constexpr int K = Cfg::k, KK = K * K, NT = Cfg::threads;
  extern __shared__ float dwt[];  // [dW~0 (KK) | db~ | dW~_1 (4KK) | ...]
  const int c = blockIdx.x, C = p.C, B = p.B, tid = threadIdx.x;

  // Lanes take 32 consecutive values (coalesced rows of the partial buffer), warps take rows (b, tile)
  // in a fixed stride, and warp 0 adds the warp sums in warp order: the order never depends on
  // scheduling, so results are bit-reproducible.
  constexpr int NW = NT / 32;
  __shared__ float red[NT];
  const int warp = tid / 32, lane = tid % 32;
  int v0 = 0;  // offset of group g in dwt
#pragma unroll 1
  for (int g = 0; g <= Cfg::L; ++g) {
    const int nvals = g == 0 ? KK + 1 : 4 * KK, tiles = p.part_tiles[g], rows = B * tiles;
    const float* base = p.partial + p.part_off[g];
    for (int i0 = 0; i0 < nvals; i0 += 32) {
      const int i = i0 + lane;
      float s = 0.f;
      if (i < nvals) {
#pragma unroll 4
        for (int r = warp; r < rows; r += NW) {
          const int b = r / tiles, t = r - b * tiles;
          s += base[(((long long)b * C + c) * tiles + t) * nvals + i];
        }
      }
      red[tid] = s;
      __syncthreads();
      if (warp == 0 && i < nvals) {
        float sum = 0.f;
#pragma unroll
        for (int w = 0; w < NW; ++w) sum += red[w * 32 + lane];
        dwt[v0 + i] = sum;
      }
      __syncthreads();
    }
    v0 += nvals;
  }

  const float s0 = p.base_s[c];
  for (int i = tid; i < KK; i += NT) p.grad_base_w[(long long)c * KK + i] = s0 * dwt[i];
  for (int l = 1; l <= Cfg::L; ++l)
    for (int i = tid; i < 4 * KK; i += NT) {
      const long long o = (4LL * c) * KK + i;
      p.grad_level_w[l - 1][o] = p.level_s[l - 1][4 * c + i / KK] * dwt[KK + 1 + (l - 1) * 4 * KK + i];
    }
  // Scale gradients: one thread per (level, subband), taps summed in order.
  const int nscale = 1 + 4 * Cfg::L;
  for (int j = tid; j < nscale; j += NT) {
    if (j == 0) {
      const float dbt = dwt[KK];
      float ds = 0.f;
      for (int i = 0; i < KK; ++i) ds += dwt[i] * p.base_w[(long long)c * KK + i];
      if (p.base_b) {
        ds += dbt * p.base_b[c];
        if (p.grad_base_b) p.grad_base_b[c] = s0 * dbt;
      }
      p.grad_base_s[c] = ds;
    } else {
      const int l = 1 + (j - 1) / 4, s = (j - 1) % 4;
      const float* wt = dwt + KK + 1 + (l - 1) * 4 * KK + s * KK;
      const float* wr = p.level_w[l - 1] + (4LL * c + s) * KK;
      float ds = 0.f;
      for (int i = 0; i < KK; ++i) ds += wt[i] * wr[i];
      p.grad_level_s[l - 1][4 * c + s] = ds;
    }
  }
}

}  // namespace lkjit
