// WTConv backward, one level on spatial tiles. From a tile of the level-(l-1) low bands of both chains
// (X_{l-1} and dR_l; the first variant forms them from X and dOut scattered by the stride) it forms,
// with a halo of R, the subbands Y_l and dZ_l = Haar(dR_l) on chip, then writes
//   dY_l = dw^T(dZ_l, W~_l) (fp32 scratch, read by wtconv_bwd_synth),
//   X_l = Y_l[LL] and dR_{l+1} = dZ_l[LL] for the next level, and
//   the tile's partial dW~_l = corr(Y_l, dZ_l) (reduced in a fixed order by wtconv_reduce).
// Shared memory: ys, dzs 4 x (TH+2R+vy) x (TW+2R) each; wf 4 k k (flipped taps); red (threads).
#pragma once
#include "wtconv/bwd_common.cuh"

namespace lkjit {

template <class Cfg>
__device__ __forceinline__ void wtconv_bwd_level(const WTConvParams& p) {
  using TIn = typename Cfg::TIn;
  constexpr int K = Cfg::k, R = Cfg::R, V = Cfg::vy, TH = Cfg::tile_h, TW = Cfg::tile_w, NT = Cfg::threads;
  constexpr int KK = K * K, PITCH = odd_pitch(TW + 2 * R), PROW = TH + 2 * R + V, IMG = PROW * PITCH;
  static_assert(TH % V == 0, "tile_h must be a multiple of vy");
  extern __shared__ float smem[];
  float* ys = smem;
  float* dzs = ys + 4 * IMG;
  float* wf = dzs + 4 * IMG;
  float* red = wf + 4 * KK;

  const int l = p.level, h = p.lh[l], w = p.lw[l], hin = p.h_in, win = p.w_in;
  const int tiles = p.tiles_h * p.tiles_w;
  const long long plane = blockIdx.x / tiles;
  const int t = blockIdx.x - (int)(plane * tiles);
  const int ti0 = (t / p.tiles_w) * TH, tj0 = (t % p.tiles_w) * TW;
  const int c = (int)(plane % p.C);
  const int tid = threadIdx.x;

  for (int e = tid; e < 4 * KK; e += NT) {
    const int s = e / KK, q = e - s * KK;
    wf[e] = __ldg(p.wfold + fold_level_w(p.C, l, c, s, KK) + KK - 1 - q);
  }
  // Level-(l-1) low bands of both chains at (y, x), zero outside. The first variant reads X at full
  // resolution: at level 1 directly, deeper as the LL band's closed form, 2^-(l-1) times a
  // 2^(l-1) x 2^(l-1) block sum, so no fp32 X band is kept for it. dR comes from its fp32 band when
  // there is one, else (level 1) from dOut scattered by the stride.
  const TIn* __restrict__ xsrc = Cfg::first ? static_cast<const TIn*>(p.x) + act_plane(p.x_st, plane, p.C)
                                            : static_cast<const TIn*>((const void*)p.low_in) + plane * (long long)hin * win;
  const TIn* __restrict__ gsrc = static_cast<const TIn*>(p.g) + act_plane(p.g_st, plane, p.C);
  const float* __restrict__ gband = p.low2_in ? p.low2_in + plane * (long long)hin * win : nullptr;
  float* xlow = p.low_out ? p.low_out + plane * (long long)h * w : nullptr;
  float* glow = p.low2_out ? p.low2_out + plane * (long long)h * w : nullptr;
  const int m = 1 << (l - 1);
  const float inv_m = 1.f / (float)m;
  auto xval = [&](int y, int x) -> float {
    if (!Cfg::first) return (y < hin && x < win) ? ldg_f32(xsrc + (long long)y * win + x) : 0.f;
    if (m == 1) return (y < p.H && x < p.W) ? ldg_f32(xsrc + act_yx(p.x_st, y, x)) : 0.f;
    float s = 0.f;
    for (int a = 0; a < m; ++a)
      for (int b = 0; b < m; ++b) {
        const int yy = y * m + a, xx = x * m + b;
        if (yy < p.H && xx < p.W) s += ldg_f32(xsrc + act_yx(p.x_st, yy, xx));
      }
    return s * inv_m;
  };
  auto gval = [&](int y, int x) -> float {
    if (gband) return (y < hin && x < win) ? __ldg(gband + (long long)y * win + x) : 0.f;
    return g_full(gsrc, y, x, p.H, p.W, p.stride, p.g_st);
  };
  for (int r = tid; r < IMG; r += NT) {
    const int i = ti0 + r / PITCH - R, j = tj0 + r % PITCH - R;
    float y[4] = {0.f, 0.f, 0.f, 0.f}, dz[4] = {0.f, 0.f, 0.f, 0.f};
    if (i >= 0 && i < h && j >= 0 && j < w) {
      const int i0 = 2 * i, j0 = 2 * j;
      haar4(xval(i0, j0), xval(i0, j0 + 1), xval(i0 + 1, j0), xval(i0 + 1, j0 + 1), y);
      haar4(gval(i0, j0), gval(i0, j0 + 1), gval(i0 + 1, j0), gval(i0 + 1, j0 + 1), dz);
      const int li = i - ti0, lj = j - tj0;
      if (li >= 0 && li < TH && lj >= 0 && lj < TW) {
        if (xlow) xlow[(long long)i * w + j] = y[0];
        if (glow) glow[(long long)i * w + j] = dz[0];
      }
    }
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      ys[s * IMG + r] = y[s];
      dzs[s * IMG + r] = dz[s];
    }
  }
  __syncthreads();

  // dY_l on the tile interior.
  constexpr int STRIPS = TH / V, ITEMS = 4 * STRIPS * TW;
  float* dyl = p.z + p.z_off[l - 1] + plane * 4LL * h * w;
  for (int e = tid; e < ITEMS; e += NT) {
    const int s = e / (STRIPS * TW), r = e - s * (STRIPS * TW);
    const int li0 = (r / TW) * V, lj = r % TW, j = tj0 + lj;
    if (j >= w || ti0 + li0 >= h) continue;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0.f;
    conv_strip<K, V>(dzs + s * IMG + li0 * PITCH + lj, PITCH, wf + s * KK, acc);
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int i = ti0 + li0 + v;
      if (i < h) dyl[(long long)s * h * w + (long long)i * w + j] = acc[v];
    }
  }

  // Tile partial of dW~_l (deterministic: tap rows over threads, row chunks added in order).
  const int hh = min(TH, h - ti0), ww = min(TW, w - tj0);
  float* part = p.partial + p.part_off[l] + ((long long)plane * tiles + t) * (4 * KK);
  wgrad_sets<K>(tid, NT, ys, IMG, PITCH, dzs + R * PITCH + R, IMG, PITCH, hh, ww, 4, part);
}

}  // namespace lkjit
