// WTConv forward output pass (tiled path): out = dw(X, W~0) + b~ + R_1 on a tile of output pixels.
// The base conv is computed here from X, which saves writing and re-reading a base output (N elements
// each way) versus a separate vendor conv. R_1 is the closed-form synthesis of Eq. 7, evaluated as its
// recurrence on the tile: the Z_l coefficients under the tile are staged in shared memory once,
// folded coarse to fine (Z_{l-1}[LL] += Synth(Z_l)), and level 1 is applied per pixel.
// Tiles are in output coordinates; stride > 1 subsamples after full-resolution math.
//
// Shared memory: xs ((TH-1)S+1+2R+vy) x ((TW-1)S+1+2R), ws k*k, then per level l the 4 subbands of
// rows (y_first >> l)..(y_last >> l) x cols likewise (see synth_smem_floats in the generator).
#pragma once
#include "wtconv/tile_levels.cuh"

namespace lkjit {

template <class Cfg>
__device__ __forceinline__ void wtconv_fwd_synth(const WTConvParams& p) {
  using T = typename Cfg::T;
  constexpr int K = Cfg::k, R = Cfg::R, V = Cfg::vy, TH = Cfg::tile_h, TW = Cfg::tile_w, NT = Cfg::threads;
  static_assert(TH % V == 0, "tile_h must be a multiple of vy");
  extern __shared__ float smem[];
  const int S = p.stride;
  const int pitch = odd_pitch((TW - 1) * S + 1 + 2 * R), prow = (TH - 1) * S + 1 + 2 * R + V;
  float* xs = smem;
  float* ws = xs + prow * pitch;
  float* zr = ws + K * K;

  const int H = p.H, W = p.W, Ho = p.H_out, Wo = p.W_out;
  const int tiles = p.tiles_h * p.tiles_w;
  const long long plane = blockIdx.x / tiles;
  const int t = blockIdx.x - (int)(plane * tiles);
  const int to0 = (t / p.tiles_w) * TH, tx0 = (t % p.tiles_w) * TW;  // output coords of the tile
  const int ya0 = to0 * S, xa0 = tx0 * S;                           // first input pixel it needs
  const int ya1 = (to0 + TH - 1) * S, xa1 = (tx0 + TW - 1) * S;      // last
  const int c = (int)(plane % p.C);
  const int tid = threadIdx.x;
  const T* __restrict__ x = static_cast<const T*>(p.x) + act_plane(p.x_st, plane, p.C);

  // Stage X (with halo), the base taps and, per level, the Z_l coefficients under the tile.
  for (int e = tid; e < K * K; e += NT) ws[e] = __ldg(p.wfold + fold_base_w(c, K * K) + e);
  const FastDiv fpitch(pitch);  // staged extents stay below 2^16
  for (int r = tid; r < prow * pitch; r += NT) {
    const int ri = fpitch.div(r);
    const int i = ya0 - R + ri, j = xa0 - R + (r - ri * pitch);
    xs[r] = (i >= 0 && i < H && j >= 0 && j < W) ? ldg_f32(x + act_yx(p.x_st, i, j)) : 0.f;
  }
  TileLevels<Cfg::L, NT> lv{ya0, xa0, ya1, xa1, {}};
  lv.stage(p, plane, zr, tid);
  __syncthreads();

  lv.fold(p, zr, tid);  // coarse to fine

  const float bias = __ldg(p.wfold + fold_bias(p.C, c, K * K));
  T* __restrict__ out = static_cast<T*>(p.out) + act_plane(p.out_st, plane, p.C);
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
#pragma unroll(K <= 11 ? K : 1)
        for (int u = 0; u < K; ++u)
#pragma unroll(K <= 11 ? K : 4)
          for (int q = 0; q < K; ++q) acc[v] = fmaf(ws[u * K + q], s0[u * pitch + q], acc[v]);
      }
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int oy = to0 + lo0 + v;
      if (oy >= Ho) continue;
      const int y = oy * S, xx = ox * S;
      if (Cfg::L >= 1) acc[v] += lv.level1(zr, y, xx);
      out[act_yx(p.out_st, oy, ox)] = from_f32<T>(acc[v]);
    }
  }
}

}  // namespace lkjit
