// WTConv backward output pass (tiled path), on a tile of dX (full resolution):
//   dX = dw^T(G, W~0) + closed-form synthesis of dY_1..L (Eq. 7 applied to dY, folded coarse to fine
//   on the tile in shared memory), plus the tile's partials of dW~0 = corr(X, G) and db~ = sum G.
// G is dOut scattered by the stride. Shared memory: gs, xs (TH+2R+vy) x (TW+2R); wf k k (flipped);
// per level the 4 subbands of dY under the tile; red (threads).
#pragma once
#include "wtconv/bwd_common.cuh"
#include "wtconv/tile_levels.cuh"

namespace lkjit {

template <class Cfg>
__device__ __forceinline__ void wtconv_bwd_synth(const WTConvParams& p) {
  using T = typename Cfg::T;
  constexpr int K = Cfg::k, R = Cfg::R, V = Cfg::vy, TH = Cfg::tile_h, TW = Cfg::tile_w, NT = Cfg::threads;
  constexpr int KK = K * K, PITCH = odd_pitch(TW + 2 * R), PROW = TH + 2 * R + V;
  static_assert(TH % V == 0, "tile_h must be a multiple of vy");
  extern __shared__ float smem[];
  float* gs = smem;
  float* xs = gs + PROW * PITCH;
  float* wf = xs + PROW * PITCH;
  float* red = wf + KK;
  float* zr = red + NT;

  const int H = p.H, W = p.W;
  const int tiles = p.tiles_h * p.tiles_w;
  const long long plane = blockIdx.x / tiles;
  const int t = blockIdx.x - (int)(plane * tiles);
  const int y0 = (t / p.tiles_w) * TH, x0 = (t % p.tiles_w) * TW;
  const int y1 = min(y0 + TH, H) - 1, x1 = min(x0 + TW, W) - 1;
  const int c = (int)(plane % p.C);
  const int tid = threadIdx.x;
  const T* __restrict__ x = static_cast<const T*>(p.x) + act_plane(p.x_st, plane, p.C);
  const T* __restrict__ go = static_cast<const T*>(p.g) + act_plane(p.g_st, plane, p.C);

  for (int e = tid; e < KK; e += NT) wf[e] = __ldg(p.wfold + fold_base_w(c, KK) + KK - 1 - e);
  for (int r = tid; r < PROW * PITCH; r += NT) {
    const int i = y0 - R + r / PITCH, j = x0 - R + r % PITCH;
    gs[r] = g_full(go, i, j, H, W, p.stride, p.g_st);
    xs[r] = (i >= 0 && i < H && j >= 0 && j < W) ? ldg_f32(x + act_yx(p.x_st, i, j)) : 0.f;
  }
  TileLevels<Cfg::L, NT> lv{y0, x0, y1, x1, {}};
  lv.stage(p, plane, zr, tid);
  __syncthreads();

  lv.fold(p, zr, tid);  // coarse to fine

  T* __restrict__ dx = static_cast<T*>(p.out) + act_plane(p.out_st, plane, p.C);
  constexpr int STRIPS = TH / V, ITEMS = STRIPS * TW;
  for (int e = tid; e < ITEMS; e += NT) {
    const int lo0 = (e / TW) * V, lx = e % TW, xx = x0 + lx;
    if (xx >= W || y0 + lo0 >= H) continue;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0.f;
    conv_strip<K, V>(gs + lo0 * PITCH + lx, PITCH, wf, acc);
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int y = y0 + lo0 + v;
      if (y >= H) continue;
      if (Cfg::L >= 1) acc[v] += lv.level1(zr, y, xx);
      dx[act_yx(p.out_st, y, xx)] = from_f32<T>(acc[v]);
    }
  }

  // Tile partials of dW~0 (taps x row chunks, added in chunk order) and db~ (thread order).
  const int hh = y1 - y0 + 1, ww = x1 - x0 + 1;
  float* part = p.partial + p.part_off[0] + ((long long)plane * tiles + t) * (KK + 1);
  const float* gz = gs + R * PITCH + R;
  wgrad_sets<K>(tid, NT, xs, 0, PITCH, gz, 0, PITCH, hh, ww, 1, part);
  float gsum = 0.f;
  for (int r = tid; r < hh * ww; r += NT) gsum += gz[(r / ww) * PITCH + r % ww];
  const float s = ordered_sum(gsum, tid, NT, red, [] { __syncthreads(); });
  if (tid == 0) part[KK] = s;
}

}  // namespace lkjit
