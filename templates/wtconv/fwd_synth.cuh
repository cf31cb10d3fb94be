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
#include "wtconv/plane_common.cuh"  // FastDiv

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
  const T* __restrict__ x = static_cast<const T*>(p.x) + plane * (long long)H * W;

  // Stage X (with halo), the base taps and, per level, the Z_l coefficients under the tile.
  for (int e = tid; e < K * K; e += NT) ws[e] = __ldg(p.wfold + fold_base_w(c, K * K) + e);
  const FastDiv fpitch(pitch);  // staged extents stay below 2^16
  for (int r = tid; r < prow * pitch; r += NT) {
    const int ri = fpitch.div(r);
    const int i = ya0 - R + ri, j = xa0 - R + (r - ri * pitch);
    xs[r] = (i >= 0 && i < H && j >= 0 && j < W) ? ldg_f32(x + (long long)i * W + j) : 0.f;
  }
  int zoff[Cfg::L + 1];
  {
    int o = 0;
#pragma unroll
    for (int l = 1; l <= Cfg::L; ++l) {
      const int r0 = ya0 >> l, c0 = xa0 >> l, rl = (ya1 >> l) - r0 + 1, cl = (xa1 >> l) - c0 + 1;
      const int h = p.lh[l], w = p.lw[l];
      const float* z = p.z + p.z_off[l - 1] + plane * 4LL * h * w;
      zoff[l] = o;
      const FastDiv fn(rl * cl), fc(cl);
      for (int e = tid; e < 4 * rl * cl; e += NT) {
        const int s = fn.div(e), r = e - s * rl * cl, ri = fc.div(r), i = r0 + ri, j = c0 + (r - ri * cl);
        zr[o + e] = (i < h && j < w) ? __ldg(z + (long long)s * h * w + (long long)i * w + j) : 0.f;
      }
      o += 4 * rl * cl;
    }
  }
  __syncthreads();

  // Coarse to fine: the LL band of level l-1 collects the synthesis of level l (crop at odd sizes).
#pragma unroll
  for (int l = Cfg::L; l >= 2; --l) {
    const int r0 = ya0 >> l, c0 = xa0 >> l, rl = (ya1 >> l) - r0 + 1, cl = (xa1 >> l) - c0 + 1;
    const int f0 = ya0 >> (l - 1), g0 = xa0 >> (l - 1);
    const int rf = (ya1 >> (l - 1)) - f0 + 1, cf = (xa1 >> (l - 1)) - g0 + 1;
    const int hf = p.lh[l - 1], wf = p.lw[l - 1];
    const float* z = zr + zoff[l];
    float* f = zr + zoff[l - 1];
    const FastDiv fc(cl);
    for (int e = tid; e < rl * cl; e += NT) {
      const int i = fc.div(e), j = e - i * cl;
      const float ll = z[e], lh = z[rl * cl + e], hl = z[2 * rl * cl + e], hh = z[3 * rl * cl + e];
      const float v[4] = {0.5f * (ll + lh + hl + hh), 0.5f * (ll + lh - hl - hh), 0.5f * (ll - lh + hl - hh),
                          0.5f * (ll - lh - hl + hh)};
#pragma unroll
      for (int pq = 0; pq < 4; ++pq) {
        const int fi = 2 * (r0 + i) + (pq >> 1), fj = 2 * (c0 + j) + (pq & 1);
        if (fi >= f0 && fi < f0 + rf && fj >= g0 && fj < g0 + cf && fi < hf && fj < wf)
          f[(fi - f0) * cf + (fj - g0)] += v[pq];
      }
    }
    __syncthreads();
  }

  const float bias = __ldg(p.wfold + fold_bias(p.C, c, K * K));
  T* __restrict__ out = static_cast<T*>(p.out) + plane * (long long)Ho * Wo;
  constexpr int STRIPS = TH / V, ITEMS = STRIPS * TW;
  const int r01 = ya0 >> 1, c01 = xa0 >> 1, cl1 = (xa1 >> 1) - c01 + 1, n1 = ((ya1 >> 1) - r01 + 1) * cl1;
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
      if (Cfg::L >= 1) {
        const float* z = zr + ((y >> 1) - r01) * cl1 + ((xx >> 1) - c01);
        const float sy = (y & 1) ? -1.f : 1.f, sx = (xx & 1) ? -1.f : 1.f;
        acc[v] += 0.5f * (z[0] + sy * z[n1] + sx * z[2 * n1] + sy * sx * z[3 * n1]);
      }
      out[(long long)oy * Wo + ox] = from_f32<T>(acc[v]);
    }
  }
}

}  // namespace lkjit
