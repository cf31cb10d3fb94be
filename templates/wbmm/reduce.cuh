// Deterministic reduction of the WBMM wgrad's partial rows (wbmm/wgrad.cuh): dR[c, k] (table mode) or
// dM[c, i, j] (dense mode) = the sum over partial rows s = 0, 1, ..., p.parts - 1 in that order, and
// dbias[c] over p.chunks rows of part_bias. Thread (c, v): consecutive threads read consecutive values of
// a row (coalesced), each keeps kUnroll row loads in flight (the sums are latency-bound), and the order
// of every sum is fixed by the launch's shape alone: two runs give the same bits.
// Traffic: the partial buffers read once, C*nv (+ C) floats written.
#pragma once
#include "abi/wbmm_params.h"
#include "wbmm/geometry.cuh"

namespace lkjit {

template <class Cfg>
__device__ __forceinline__ void wbmm_reduce(const WBMMParams& p) {
  using namespace wbmm;
  constexpr int NV = partial_values(Cfg::mode, Cfg::wh, Cfg::ww), kUnroll = 8;
  const long long C = p.C, n_values = C * NV, total = n_values + (Cfg::dbias ? C : 0);
  const bool acc = (p.flags & kWBMMFlagAccumulate) != 0;
  for (long long idx = (long long)blockIdx.x * Cfg::threads + threadIdx.x; idx < total;
       idx += (long long)gridDim.x * Cfg::threads) {
    const float* src;
    long long stride;
    int rows;
    float* out;
    if (idx < n_values) {
      src = p.part + idx;  // row 0 of (c, v): partial_index(0, c, v, C, NV) = c*NV + v = idx
      stride = n_values;
      rows = p.parts;
      out = (Cfg::mode == kModeTable ? p.dR : p.dM) + idx;
    } else {
      src = p.part_bias + (idx - n_values);
      stride = C;
      rows = p.chunks;
      out = p.dbias + (idx - n_values);
    }
    float sum = 0.f;
    int s = 0;
#pragma unroll 1
    for (; s + kUnroll <= rows; s += kUnroll) {
      float v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = __ldg(src + (s + u) * stride);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) sum += v[u];  // in row order
    }
#pragma unroll 1
    for (; s < rows; ++s) sum += __ldg(src + s * stride);
    *out = acc ? *out + sum : sum;
  }
}

}  // namespace lkjit
