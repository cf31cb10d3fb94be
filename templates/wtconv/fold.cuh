// Scale folding (I/O-aware reformulation, §4.3, Eq. 8): W~0 = s0 W0, b~ = s0 b, W~_l = s_l W_l, so the
// level and output kernels never multiply by a scale. Runs once per weight update (and, once a layer has
// been captured in a CUDA graph, before each of its calls but a backward reusing its forward's fold: it is
// on every step's critical path).
#pragma once
#include "wtconv/common.cuh"

namespace lkjit {

// Elements e0, e0 + step, ... below n of the folded buffer, indices of type I: 32-bit where n allows (one
// multiply-high per division by a constant; 64-bit divisions cost ~70 instructions each, several an element).
template <int KK, int L, class I>
__device__ __forceinline__ void wtconv_fold_range(const WTConvParams& p, I e0, I step, I n) {
  float* out = const_cast<float*>(p.wfold);
  const I C = (I)p.C, nb = C * KK, per_level = 4 * C * KK;
  for (I e = e0; e < n; e += step) {
    float v;
    I c, vi;  // (channel, value) of e in the value-major copy, as fold_t lays it out
    if (e < nb) {
      c = e / KK, vi = e - c * KK;
      v = p.base_s[c] * p.base_w[e];
    } else if (e < nb + C) {
      c = e - nb, vi = KK;
      v = p.base_b ? p.base_s[c] * p.base_b[c] : 0.f;
    } else {
      I i = e - nb - C;
      int l = 0;
      while (l + 1 < L && i >= per_level) i -= per_level, ++l;  // l < L <= 8: no runtime division
      c = i / (4 * KK), vi = KK + 1 + l * 4 * KK + (i - c * 4 * KK);
      v = p.level_s[l][i / KK] * p.level_w[l][i];
    }
    out[e] = v;
    out[n + vi * C + c] = v;
  }
}

template <class Cfg>
__device__ __forceinline__ void wtconv_fold(const WTConvParams& p) {
  // A main kernel launched right after (WTConv::run_list) may start now: it reads the fold only after
  // pdl_wait(), so its activation loads overlap this kernel.
  pdl_launch_dependents();
  constexpr int KK = Cfg::k * Cfg::k;
  const long long n = (long long)p.C * (KK + 1 + Cfg::L * 4LL * KK);
  const long long e0 = blockIdx.x * (long long)blockDim.x + threadIdx.x, step = (long long)gridDim.x * blockDim.x;
  // Both copies' offsets (up to 2n) in 32 bits where they fit; e + step cannot wrap there either, as
  // fold_geometry caps the grid at 4096 blocks (step <= 2^20, e < n < 2^31).
  if (2 * n < (1LL << 32))
    wtconv_fold_range<KK, Cfg::L, unsigned>(p, (unsigned)e0, (unsigned)step, (unsigned)n);
  else
    wtconv_fold_range<KK, Cfg::L, unsigned long long>(p, e0, step, n);
}

}  // namespace lkjit
