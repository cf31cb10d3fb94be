// WTConv forward, plane-resident (beyond the paper; see the operator spec, "Plane-resident fusion").
// Each warp group owns one whole (b,c) plane: it reads X and every tap once, runs each level's Haar
// analysis and scaled k x k conv in shared memory, folds the synthesis coarse to fine (the recurrence
// behind Eq. 7), and writes out = dw(X, W~0) + b~ + R_1 once: the 2N device-traffic floor.
//
// Shared memory per plane (fp32; every image the conv reads has a zero halo of R, plus vy spare rows
// so a strip of vy outputs never reads past it):
//   xs (H+2R+vy) x (W+2R)        input plane          ya 4 x (h1+2R+vy) x (w1+2R)   odd levels
//   yb 4 x (h2+2R+vy) x (w2+2R)  even levels (L>=2)   zs sum_l 4 h_l w_l            Z_l
//   ws k*k + 1 + 4*k*k*L         W~0, b~, W~_1..L
#pragma once
#include "wtconv/plane_common.cuh"

namespace lkjit {

template <class Cfg>
struct FwdPlaneLayout : PlaneImages<Cfg> {
  int ws_size, per_plane;
  __device__ explicit FwdPlaneLayout(const WTConvParams& p) : PlaneImages<Cfg>(p) {
    ws_size = Cfg::k * Cfg::k * (1 + 4 * Cfg::L) + 1;
    per_plane = this->xs_size + this->l1_size + this->l2_size + this->levels_size + ws_size;
  }
};

template <class Cfg>
__device__ __forceinline__ void wtconv_fwd_plane(const WTConvParams& p) {
  using T = typename Cfg::T;
  constexpr int K = Cfg::k, R = Cfg::R, V = Cfg::vy, KK = K * K;
  using G = PlaneGroup<Cfg>;
  constexpr int GT = G::kThreads;
  extern __shared__ float smem[];
  const G g;
  const FwdPlaneLayout<Cfg> lay(p);
  const long long plane = (long long)blockIdx.x * Cfg::planes + g.q;
  if (plane >= (long long)p.B * p.C) return;  // only this group's barriers are affected
  const int c = (int)(plane % p.C);
  const int H = p.H, W = p.W, t = g.t;

  float* xs = smem + g.q * lay.per_plane;
  float* ya = xs + lay.xs_size;
  float* yb = ya + lay.l1_size;
  float* zs = yb + lay.l2_size;
  float* ws = zs + lay.levels_size;  // [W~0 | b~ | W~_1 | ... | W~_L]

  // 1. Every global read up front, in one round trip: the plane (with its zero halo) and all taps.
  {
    const T* __restrict__ x = static_cast<const T*>(p.x) + act_plane(p.x_st, plane, p.C);
    float* const dst[] = {xs};
    stage_plane<GT, R>(t, dst, lay.xs_size, lay.xs_pitch, H, W,
                       [&](int, int y, int xx) { return ldg_f32(x + act_yx(p.x_st, y, xx)); });
    for (int r = t; r < KK; r += GT) ws[r] = __ldg(p.wfold + fold_base_w(c, KK) + r);
    if (t == 0) ws[KK] = __ldg(p.wfold + fold_bias(p.C, c, KK));
    // Every level's taps in one pass (level l, subband s are contiguous in the folded buffer).
    for (int r = t; r < 4 * KK * Cfg::L; r += GT) {
      const int ls = r / (4 * KK), q = r - ls * 4 * KK;
      ws[KK + 1 + r] = __ldg(p.wfold + fold_level_w(p.C, 1 + ls, c, 0, KK) + q);
    }
  }
  g.sync();

  // 2. Levels: Y_l = Haar(previous low band) into a zero-haloed image, then Z_l = conv(Y_l, W~_l).
  int zoff = 0;
#pragma unroll 1
  for (int l = 1; l <= Cfg::L; ++l) {
    const int h = p.lh[l], w = p.lw[l], hin = p.lh[l - 1], win = p.lw[l - 1];
    const int pitch = odd_pitch(w + 2 * R), img = (h + 2 * R + V) * pitch;
    const int spitch = (l == 1) ? lay.xs_pitch : odd_pitch(win + 2 * R);
    const float* src = ((l == 1) ? xs : ((l & 1) ? yb : ya)) + R * spitch + R;  // LL of level l-1
    float* dst = (l & 1) ? ya : yb;
    const FastDiv fp(pitch);
    for (int r = t; r < img; r += GT) {
      const int i = fp.div(r) - R, j = r - (i + R) * pitch - R;
      float y[4] = {0.f, 0.f, 0.f, 0.f};
      if (i >= 0 && i < h && j >= 0 && j < w) {
        const int i0 = 2 * i, j0 = 2 * j;
        const bool r1 = i0 + 1 < hin, c1 = j0 + 1 < win;  // odd sizes: zero-pad bottom/right
        const float* s0 = src + i0 * spitch + j0;
        haar4(s0[0], c1 ? s0[1] : 0.f, r1 ? s0[spitch] : 0.f, (r1 && c1) ? s0[spitch + 1] : 0.f, y);
      }
#pragma unroll
      for (int s = 0; s < 4; ++s) dst[s * img + r] = y[s];
    }
    g.sync();
    const int strips = ceil_div(h, V), per_s = strips * w;
    const FastDiv fs(per_s), fw(w);
    for (int e = t; e < 4 * per_s; e += GT) {
      const int s = fs.div(e), r2 = e - s * per_s;
      const int si = fw.div(r2), j = r2 - si * w, i0 = si * V;
      float acc[V];
#pragma unroll
      for (int v = 0; v < V; ++v) acc[v] = 0.f;
      conv_strip<K, V>(dst + s * img + i0 * pitch + j, pitch, ws + KK + 1 + (l - 1) * 4 * KK + s * KK, acc);
      float* z = zs + zoff + s * h * w;
#pragma unroll
      for (int v = 0; v < V; ++v)
        if (i0 + v < h) z[(i0 + v) * w + j] = acc[v];
    }
    zoff += 4 * h * w;
    g.sync();
  }

  // 3. Synthesis, coarse to fine (plane_fold_levels).
  plane_fold_levels<Cfg::L>(g, zs, zoff, p.lh, p.lw);

  // 4. out = dw(X, W~0) + b~ + level-1 synthesis (Eq. 7, l = 1), subsampled by the stride.
  T* __restrict__ out = static_cast<T*>(p.out) + act_plane(p.out_st, plane, p.C);
  const int S = p.stride, Ho = p.H_out, Wo = p.W_out;
  const int strips = ceil_div(Ho, V);
  const float bias = ws[KK];
  const FastDiv fwo(Wo);
  for (int e = t; e < strips * Wo; e += GT) {
    const int si = fwo.div(e), ox = e - si * Wo, oy0 = si * V;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = bias;
    if (S == 1) {
      conv_strip<K, V>(xs + oy0 * lay.xs_pitch + ox, lay.xs_pitch, ws, acc);
    } else {
#pragma unroll
      for (int v = 0; v < V; ++v) {
        const int y = min((oy0 + v) * S, H - 1);  // rows past Ho are discarded; keep reads in bounds
        const float* s0 = xs + y * lay.xs_pitch + ox * S;
#pragma unroll(K <= 11 ? K : 1)
        for (int u = 0; u < K; ++u)
#pragma unroll(K <= 11 ? K : 4)
          for (int q = 0; q < K; ++q) acc[v] = fmaf(ws[u * K + q], s0[u * lay.xs_pitch + q], acc[v]);
      }
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int oy = oy0 + v;
      if (oy >= Ho) continue;
      const int y = oy * S, xx = ox * S;
      if (Cfg::L >= 1) {
        const int w1 = p.lw[1], hw1 = p.lh[1] * w1;
        const float* z = zs + (y >> 1) * w1 + (xx >> 1);
        const float sy = (y & 1) ? -1.f : 1.f, sx = (xx & 1) ? -1.f : 1.f;
        acc[v] += 0.5f * (z[0] + sy * z[hw1] + sx * z[2 * hw1] + sy * sx * z[3 * hw1]);
      }
      out[act_yx(p.out_st, oy, ox)] = from_f32<T>(acc[v]);
    }
  }
}

}  // namespace lkjit
