// Deterministic reduction of the lane backward's partial gradients (bwd_lane.cuh), then scale-gradient
// recovery as in reduce.cuh (§4.3, Eq. 9). The lane kernel writes partials channel-innermost in blocks
// of 32 channels (lane_partial, common.cuh; group g: 0 W~0 then b~, k*k + 1 values; l >= 1: level l, 4 k*k
// values, subband-major). Block (x, y) takes channels 32x..32x+31 and tap set y (0: W~0 and b~;
// 1 + 4(l-1) + s: subband s of level l): warps over the set's values, lanes over channels, each sum over
// b = 0..B-1 in order, so loads coalesce, the block's warps read one contiguous run per b, and two runs
// give identical bits.
#pragma once
#include "wtconv/common.cuh"

namespace lkjit {

// acc += src[b * step] for b = b0, b0+1, ... in batches of U rows, loads first (latency-bound: each
// thread keeps U loads in flight), adds in b order; returns the first b not taken (< U rows left).
template <int U>
__device__ __forceinline__ int sum_rows(float& acc, const float* __restrict__ src, long long step, int b, int B) {
#pragma unroll 1
  for (; b + U <= B; b += U) {
    float v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = __ldg(src + (b + u) * step);
#pragma unroll
    for (int u = 0; u < U; ++u) acc += v[u];
  }
  return b;
}

template <class Cfg>
__device__ __forceinline__ void wtconv_reduce_lane(const WTConvParams& p) {
  constexpr int KK = Cfg::k * Cfg::k, NT = Cfg::threads, NW = NT / 32;
  extern __shared__ float sums[];  // [value][channel], value i of channel cl at i * 33 + cl (padded: the
                                   // epilogue reads down a column)
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, C = p.C, B = p.B;
  const int c0 = blockIdx.x * 32, set = blockIdx.y;
  const int l = set == 0 ? 0 : 1 + (set - 1) / 4, s = set == 0 ? 0 : (set - 1) % 4;
  const int nvals = l == 0 ? KK + 1 : 4 * KK, n = l == 0 ? KK + 1 : KK, v0 = l == 0 ? 0 : s * KK;
  const int c = c0 + lane;
  const long long step = nvals * 32LL;  // one batch element further
#pragma unroll 1
  for (int i = warp; i < n; i += NW) {
    float acc = 0.f;
    if (c < C) {
      // A grid of (C/32) x (1+4L) blocks leaves few warps per SM: each keeps up to 32 loads in flight,
      // then 8, then one. The order of the adds is b's either way.
      const float* __restrict__ src = lane_partial(p, l, nvals, 0, c) + (v0 + i) * 32;
      int b = sum_rows<32>(acc, src, step, 0, B);
      b = sum_rows<8>(acc, src, step, b, B);
      sum_rows<1>(acc, src, step, b, B);
    }
    sums[i * 33 + lane] = acc;
  }
  __syncthreads();

  const int nc = min(32, C - c0);
  if (l == 0) {
    // dW0 = s0 dW~0 (consecutive threads on consecutive taps of a channel), then per channel db and ds0.
    for (int e = tid; e < nc * KK; e += NT) {
      const int cl = e / KK, i = e - cl * KK;
      p.grad_base_w[(long long)(c0 + cl) * KK + i] = p.base_s[c0 + cl] * sums[i * 33 + cl];
    }
    if (tid < nc) {
      const int cc = c0 + tid;
      const float dbt = sums[KK * 33 + tid];
      float ds = 0.f;
      for (int i = 0; i < KK; ++i) ds += sums[i * 33 + tid] * p.base_w[(long long)cc * KK + i];
      if (p.base_b) {
        ds += dbt * p.base_b[cc];
        if (p.grad_base_b) p.grad_base_b[cc] = p.base_s[cc] * dbt;
      }
      p.grad_base_s[cc] = ds;
    }
  } else {
    // dW_l[s] = s_l[s] dW~_l[s], then ds_l[s] = <dW~_l[s], W_l[s]>.
    for (int e = tid; e < nc * KK; e += NT) {
      const int cl = e / KK, i = e - cl * KK;
      const long long o = (4LL * (c0 + cl) + s) * KK + i;
      p.grad_level_w[l - 1][o] = p.level_s[l - 1][4 * (c0 + cl) + s] * sums[i * 33 + cl];
    }
    if (tid < nc) {
      const int cc = c0 + tid;
      const float* wr = p.level_w[l - 1] + (4LL * cc + s) * KK;
      float ds = 0.f;
      for (int i = 0; i < KK; ++i) ds += sums[i * 33 + tid] * wr[i];
      p.grad_level_s[l - 1][4 * cc + s] = ds;
    }
  }
}

}  // namespace lkjit
