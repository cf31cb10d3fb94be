// WTConv backward, one level on spatial tiles. From a tile of the level-(l-1) low bands of both chains
// (X_{l-1} and dR_l; at level 1 these are X and dOut scattered by the stride) it forms, with a halo
// of R, the subbands Y_l and dZ_l = Haar(dR_l) on chip, then writes
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
  constexpr int KK = K * K, PITCH = TW + 2 * R, PROW = TH + 2 * R + V, IMG = PROW * PITCH;
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
  const TIn* __restrict__ xsrc = static_cast<const TIn*>(Cfg::first ? p.x : (const void*)p.low_in) +
                                 plane * (long long)hin * win;
  const TIn* __restrict__ gsrc = Cfg::first ? static_cast<const TIn*>(p.g) + plane * (long long)p.H_out * p.W_out
                                            : static_cast<const TIn*>((const void*)p.low2_in) + plane * (long long)hin * win;
  float* xlow = p.low_out ? p.low_out + plane * (long long)h * w : nullptr;
  float* glow = p.low2_out ? p.low2_out + plane * (long long)h * w : nullptr;
  auto gval = [&](int y, int x) -> float {  // dR_l at (y, x) of level l-1, zero outside
    if (Cfg::first) return g_full(gsrc, y, x, hin, win, p.stride, p.W_out);
    return (y < hin && x < win) ? ldg_f32(gsrc + (long long)y * win + x) : 0.f;
  };
  for (int r = tid; r < IMG; r += NT) {
    const int i = ti0 + r / PITCH - R, j = tj0 + r % PITCH - R;
    float y[4] = {0.f, 0.f, 0.f, 0.f}, dz[4] = {0.f, 0.f, 0.f, 0.f};
    if (i >= 0 && i < h && j >= 0 && j < w) {
      const int i0 = 2 * i, j0 = 2 * j;
      const bool r1 = i0 + 1 < hin, c1 = j0 + 1 < win;
      const TIn* s0 = xsrc + (long long)i0 * win + j0;
      haar4(ldg_f32(s0), c1 ? ldg_f32(s0 + 1) : 0.f, r1 ? ldg_f32(s0 + win) : 0.f,
            (r1 && c1) ? ldg_f32(s0 + win + 1) : 0.f, y);
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

  // Tile partial of dW~_l: taps split over threads, rows over chunks; chunk sums added in order.
  constexpr int NV = 4 * KK;
  const int hh = min(TH, h - ti0), ww = min(TW, w - tj0);
  float* part = p.partial + p.part_off[l] + ((long long)plane * tiles + t) * NV;
  if (NV >= NT) {
    for (int idx = tid; idx < NV; idx += NT) {
      const int s = idx / KK, r = idx - s * KK, u = r / K, v = r - u * K;
      part[idx] = wgrad_tap_rows<K>(ys + s * IMG, PITCH, dzs + s * IMG + R * PITCH + R, PITCH, hh, ww, u, v, 0, 1);
    }
  } else {
    constexpr int CH = NT / NV;
    float acc = 0.f;
    if (tid < NV * CH) {
      const int idx = tid % NV, s = idx / KK, r = idx - s * KK, u = r / K, v = r - u * K;
      acc = wgrad_tap_rows<K>(ys + s * IMG, PITCH, dzs + s * IMG + R * PITCH + R, PITCH, hh, ww, u, v, tid / NV, CH);
    }
    red[tid] = acc;
    __syncthreads();
    if (tid < NV) {
      float sum = 0.f;
#pragma unroll
      for (int ch = 0; ch < CH; ++ch) sum += red[ch * NV + tid];
      part[tid] = sum;
    }
  }
}

}  // namespace lkjit
