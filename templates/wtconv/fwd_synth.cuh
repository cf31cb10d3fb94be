// WTConv forward output pass: the base conv dw(X, W~0) + b~ computed from X on a tile in shared memory,
// plus the closed-form synthesis of every level (I/O-aware reformulation, Eq. 7): pixel (y,x) takes
// 2^-l (Z_l[LL] + sy Z_l[LH] + sx Z_l[HL] + sy sx Z_l[HH]) at (y>>l, x>>l), sy = (-1)^((y>>(l-1))&1).
// Computing the base conv here removes a write and a re-read of N elements versus a separate
// vendor conv. Tiles are in output coordinates; stride > 1 subsamples after full-resolution math.
//
// Shared memory: xs ((TH-1)S+1+2R+vy) x ((TW-1)S+1+2R), ws k k.
#pragma once
#include "wtconv/common.cuh"

namespace lkjit {

template <class Cfg>
__device__ __forceinline__ void wtconv_fwd_synth(const WTConvParams& p) {
  using T = typename Cfg::T;
  constexpr int K = Cfg::k, R = Cfg::R, V = Cfg::vy, TH = Cfg::tile_h, TW = Cfg::tile_w, NT = Cfg::threads;
  static_assert(TH % V == 0, "tile_h must be a multiple of vy");
  extern __shared__ float smem[];
  const int S = p.stride;
  const int pitch = (TW - 1) * S + 1 + 2 * R, prow = (TH - 1) * S + 1 + 2 * R + V;
  float* xs = smem;
  float* ws = smem + prow * pitch;

  const int H = p.H, W = p.W, Ho = p.H_out, Wo = p.W_out;
  const int tiles = p.tiles_h * p.tiles_w;
  const long long plane = blockIdx.x / tiles;
  const int t = blockIdx.x - (int)(plane * tiles);
  const int to0 = (t / p.tiles_w) * TH, tx0 = (t % p.tiles_w) * TW;  // output coords
  const int y0 = to0 * S - R, x0 = tx0 * S - R;                     // input coords of xs[0][0]
  const int c = (int)(plane % p.C);
  const int tid = threadIdx.x;
  const T* __restrict__ x = static_cast<const T*>(p.x) + plane * (long long)H * W;

  for (int e = tid; e < K * K; e += NT) ws[e] = __ldg(p.wfold + fold_base_w(c, K * K) + e);
  for (int r = tid; r < prow * pitch; r += NT) {
    const int i = y0 + r / pitch, j = x0 + r % pitch;
    xs[r] = (i >= 0 && i < H && j >= 0 && j < W) ? ldg_f32(x + (long long)i * W + j) : 0.f;
  }
  __syncthreads();

  const float bias = __ldg(p.wfold + fold_bias(p.C, c, K * K));
  T* __restrict__ out = static_cast<T*>(p.out) + plane * (long long)Ho * Wo;
  constexpr int STRIPS = TH / V, ITEMS = STRIPS * TW;
  for (int e = tid; e < ITEMS; e += NT) {
    const int lo0 = (e / TW) * V, lx = e % TW;
    const int ox = tx0 + lx;
    if (ox >= Wo || to0 + lo0 >= Ho) continue;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = bias;
    if (S == 1) {
      conv_strip<K, V>(xs + lo0 * pitch + lx, pitch, ws, acc);
    } else {
#pragma unroll
      for (int v = 0; v < V; ++v) {
        const float* s0 = xs + (lo0 + v) * S * pitch + lx * S;
        if ((lo0 + v) * S + K > prow) break;
#pragma unroll(K <= 11 ? K : 1)
        for (int u = 0; u < K; ++u)
#pragma unroll(K <= 11 ? K : 4)
          for (int q = 0; q < K; ++q) acc[v] = fmaf(ws[u * K + q], s0[u * pitch + q], acc[v]);
      }
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int oy = to0 + lo0 + v;
      if (oy >= Ho) break;
      const int y = oy * S, xx = ox * S;
      float sc = 0.5f;
#pragma unroll
      for (int l = 1; l <= Cfg::L; ++l) {
        const int h = p.lh[l], w = p.lw[l];
        const long long hw = (long long)h * w;
        const float* z = p.z + p.z_off[l - 1] + plane * 4 * hw + (long long)(y >> l) * w + (xx >> l);
        const float sy = ((y >> (l - 1)) & 1) ? -1.f : 1.f;
        const float sx = ((xx >> (l - 1)) & 1) ? -1.f : 1.f;
        acc[v] += sc * (__ldg(z) + sy * __ldg(z + hw) + sx * __ldg(z + 2 * hw) + sy * sx * __ldg(z + 3 * hw));
        sc *= 0.5f;
      }
      out[(long long)oy * Wo + ox] = from_f32<T>(acc[v]);
    }
  }
}

}  // namespace lkjit
