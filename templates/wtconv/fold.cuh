// Scale folding (I/O-aware reformulation, §4.3, Eq. 8): W~0 = s0 W0, b~ = s0 b, W~_l = s_l W_l, so the
// level and output kernels never multiply by a scale. Runs once per weight update, not per call.
#pragma once
#include "wtconv/common.cuh"

namespace lkjit {

template <class Cfg>
__device__ __forceinline__ void wtconv_fold(const WTConvParams& p) {
  constexpr int KK = Cfg::k * Cfg::k;
  float* out = const_cast<float*>(p.wfold);
  const long long C = p.C;
  const long long n = C * KK + C + Cfg::L * 4 * C * KK;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
       e += (long long)gridDim.x * blockDim.x) {
    float v;
    if (e < C * KK) {
      v = p.base_s[e / KK] * p.base_w[e];
    } else if (e < C * KK + C) {
      const long long c = e - C * KK;
      v = p.base_b ? p.base_s[c] * p.base_b[c] : 0.f;
    } else {
      const long long r = e - C * KK - C;
      const int l = (int)(r / (4 * C * KK));
      const long long i = r - l * 4 * C * KK;
      v = p.level_s[l][i / KK] * p.level_w[l][i];
    }
    out[e] = v;
    // The value-major copy: (channel c, value vi) of e, as fold_t lays it out.
    long long c, vi;
    if (e < C * KK) {
      c = e / KK, vi = e - c * KK;
    } else if (e < C * KK + C) {
      c = e - C * KK, vi = KK;
    } else {
      const long long r = e - C * KK - C, l = r / (4 * C * KK), i = r - l * 4 * C * KK;
      c = i / (4 * KK), vi = KK + 1 + l * 4 * KK + (i - c * 4 * KK);
    }
    out[n + vi * C + c] = v;
  }
}

}  // namespace lkjit
