// WTConv forward, one level on spatial tiles (I/O-aware reformulation, §4.1 "analysis on chip").
// A block reads its tile of the previous low band X_{l-1} (plus a halo of R coefficients = 2R pixels),
// forms the four Haar subbands in shared memory, and writes Z_l = conv(Y_l, W~_l) (scale folded, Eq. 8)
// and, when another level follows, the raw low band X_l = Y_l[LL]. Used where planes do not fit on chip.
//
// Grid: 1-D, blockIdx.x = plane * tiles + tile (no 65535 limit on planes).
// Shared memory: ys 4 x (TH+2R+vy) x (TW+2R), ws 4 k k.
#pragma once
#include "wtconv/common.cuh"

namespace lkjit {

template <class Cfg>
__device__ __forceinline__ void wtconv_fwd_level(const WTConvParams& p) {
  using TIn = typename Cfg::TIn;  // dtype T at level 1, fp32 low band deeper
  constexpr int K = Cfg::k, R = Cfg::R, V = Cfg::vy, TH = Cfg::tile_h, TW = Cfg::tile_w, NT = Cfg::threads;
  static_assert(TH % V == 0, "tile_h must be a multiple of vy");
  constexpr int PITCH = odd_pitch(TW + 2 * R), PROW = TH + 2 * R + V, IMG = PROW * PITCH;
  extern __shared__ float smem[];
  float* ys = smem;
  float* ws = smem + 4 * IMG;

  const int l = p.level, h = p.lh[l], w = p.lw[l], hin = p.h_in, win = p.w_in;
  const int tiles = p.tiles_h * p.tiles_w;
  const long long plane = blockIdx.x / tiles;
  const int t = blockIdx.x - (int)(plane * tiles);
  const int ti0 = (t / p.tiles_w) * TH, tj0 = (t % p.tiles_w) * TW;
  const int c = (int)(plane % p.C);
  const int tid = threadIdx.x;

  // Level 1 reads X through its strides; deeper levels read the dense fp32 low band.
  const TIn* __restrict__ src = Cfg::first ? static_cast<const TIn*>(p.x) + act_plane(p.x_st, plane, p.C)
                                           : static_cast<const TIn*>((const void*)p.low_in) + plane * (long long)hin * win;
  const long long sy = Cfg::first ? p.x_st[2] : win, sx = Cfg::first ? p.x_st[3] : 1;
  for (int e = tid; e < 4 * K * K; e += NT) ws[e] = __ldg(p.wfold + fold_level_w(p.C, l, c, 0, K * K) + e);

  // Subbands of the tile + halo; zero outside the level (conv padding) and past odd edges (Haar pad).
  float* low = p.low_out ? p.low_out + plane * (long long)h * w : nullptr;
  for (int r = tid; r < IMG; r += NT) {
    const int i = ti0 + r / PITCH - R, j = tj0 + r % PITCH - R;
    float y[4] = {0.f, 0.f, 0.f, 0.f};
    if (i >= 0 && i < h && j >= 0 && j < w) {
      const int i0 = 2 * i, j0 = 2 * j;
      const bool r1 = i0 + 1 < hin, c1 = j0 + 1 < win;
      const TIn* s0 = src + i0 * sy + j0 * sx;
      const float a = ldg_f32(s0);
      const float b = c1 ? ldg_f32(s0 + sx) : 0.f;
      const float cc = r1 ? ldg_f32(s0 + sy) : 0.f;
      const float d = (r1 && c1) ? ldg_f32(s0 + sy + sx) : 0.f;
      haar4(a, b, cc, d, y);
      const int li = i - ti0, lj = j - tj0;
      if (low && li >= 0 && li < TH && lj >= 0 && lj < TW) low[(long long)i * w + j] = y[0];
    }
#pragma unroll
    for (int s = 0; s < 4; ++s) ys[s * IMG + r] = y[s];
  }
  __syncthreads();

  constexpr int STRIPS = TH / V, ITEMS = 4 * STRIPS * TW;
  float* zl = p.z + p.z_off[l - 1] + plane * 4LL * h * w;
  for (int e = tid; e < ITEMS; e += NT) {
    const int s = e / (STRIPS * TW), r = e - s * (STRIPS * TW);
    const int li0 = (r / TW) * V, lj = r % TW;
    const int j = tj0 + lj;
    if (j >= w || ti0 + li0 >= h) continue;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0.f;
    conv_strip<K, V>(ys + s * IMG + li0 * PITCH + lj, PITCH, ws + s * K * K, acc);
    float* z = zl + (long long)s * h * w;
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int i = ti0 + li0 + v;
      if (i < h) z[(long long)i * w + j] = acc[v];
    }
  }
}

}  // namespace lkjit
