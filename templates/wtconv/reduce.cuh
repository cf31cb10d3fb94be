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

  auto sum_group = [&](int g, int nvals, int idx) {
    const int tiles = p.part_tiles[g];
    const float* base = p.partial + p.part_off[g] + idx;
    float s = 0.f;
    for (int b = 0; b < B; ++b) {
      const long long row0 = ((long long)b * C + c) * tiles;
      for (int t = 0; t < tiles; ++t) s += base[(row0 + t) * nvals];
    }
    return s;
  };
  for (int i = tid; i < KK + 1; i += NT) dwt[i] = sum_group(0, KK + 1, i);
  for (int l = 1; l <= Cfg::L; ++l)
    for (int i = tid; i < 4 * KK; i += NT) dwt[KK + 1 + (l - 1) * 4 * KK + i] = sum_group(l, 4 * KK, i);
  __syncthreads();

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
