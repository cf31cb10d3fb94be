// WTConv backward, plane-resident: one warp group per (b,c) plane reads X and dOut once and writes
// dX once, plus this plane's partial parameter gradients (reduced deterministically by wtconv_reduce).
//   dR_1 = G (dOut scattered by the stride); per level: dZ_l = Haar(pad(dR_l)), dR_{l+1} = dZ_l[LL]
//   (analysis is the transpose of synthesis); Y_l = Haar(pad(X_{l-1})) recomputed from X;
//   dY_l = dw^T(dZ_l, W~_l);  dW~_l = corr(Y_l, dZ_l);  dX = dw^T(G, W~0) + Synth-chain(dY_l)
//   (the closed form of Eq. 7 again, folded coarse to fine);  dW~0 = corr(X, G);  db~ = sum G.
// Shared memory per plane (fp32): xs, gs (H+2R+vy) x odd_pitch(W+2R); ya, da level-1 images; yb, db level-2
// images (4 subbands each, zero halo R, vy spare rows); dys sum_l 4 h_l w_l; wf flipped taps
// k*k*(1+4L); red: the db~ warp sums.
#pragma once
#include "wtconv/bwd_common.cuh"
#include "wtconv/plane_common.cuh"

namespace lkjit {

template <class Cfg>
struct BwdPlaneLayout : PlaneImages<Cfg> {
  int wf_size, red_size, per_plane;
  __device__ explicit BwdPlaneLayout(const WTConvParams& p) : PlaneImages<Cfg>(p) {
    wf_size = Cfg::k * Cfg::k * (1 + 4 * Cfg::L);
    red_size = Cfg::threads / Cfg::planes / 32;  // one warp sum each (ordered_sum)
    per_plane = 2 * this->xs_size + 2 * this->l1_size + 2 * this->l2_size + this->levels_size + wf_size + red_size;
  }
};

template <class Cfg>
__device__ __forceinline__ void wtconv_bwd_plane(const WTConvParams& p) {
  using T = typename Cfg::T;
  constexpr int K = Cfg::k, R = Cfg::R, V = Cfg::vy, KK = K * K;
  using G = PlaneGroup<Cfg>;
  constexpr int GT = G::kThreads;
  extern __shared__ float smem[];
  const G g;
  const BwdPlaneLayout<Cfg> lay(p);
  const long long plane = (long long)blockIdx.x * Cfg::planes + g.q;
  if (plane >= (long long)p.B * p.C) return;
  const int c = (int)(plane % p.C);
  const int H = p.H, W = p.W, t = g.t;

  float* xs = smem + g.q * lay.per_plane;
  float* gs = xs + lay.xs_size;
  float* ya = gs + lay.xs_size;
  float* da = ya + lay.l1_size;
  float* yb = da + lay.l1_size;
  float* db = yb + lay.l2_size;
  float* dys = db + lay.l2_size;
  float* wf = dys + lay.levels_size;  // flipped [W~0 | W~_1 (4 subbands) | ...]
  float* red = wf + lay.wf_size;

  // 1. One round trip: X and the scattered dOut (zero halos), and every tap, flipped.
  {
    const T* __restrict__ x = static_cast<const T*>(p.x) + act_plane(p.x_st, plane, p.C);
    const T* __restrict__ go = static_cast<const T*>(p.g) + act_plane(p.g_st, plane, p.C);
    float* const dst[] = {xs, gs};
    stage_plane<GT, R>(t, dst, lay.xs_size, lay.xs_pitch, H, W, [&](int n, int y, int xx) {
      return n == 0 ? ldg_f32(x + act_yx(p.x_st, y, xx)) : g_full(go, y, xx, H, W, p.stride, p.g_st);
    });
    for (int r = t; r < KK; r += GT) wf[r] = __ldg(p.wfold + fold_base_w(c, KK) + KK - 1 - r);
    for (int r = t; r < 4 * KK * Cfg::L; r += GT) {  // every level's taps in one pass
      const int ls = r / KK, q = r - ls * KK, l = 1 + ls / 4, s = ls % 4;
      wf[KK + r] = __ldg(p.wfold + fold_level_w(p.C, l, c, s, KK) + KK - 1 - q);
    }
  }
  g.sync();

  // Warp specialisation: the level chain (phases 2-3) is a sequence of short phases whose barriers idle
  // most of a large group, and the base wgrad needs only X and G. So in groups of 2+ warps the first GA
  // threads run the chain on their own barrier while the last GB threads (a third of the warps, 1 to 5:
  // wgrad_sets keeps at most k tap rows x 32 lanes busy) compute dW~0 meanwhile; everyone meets for dX.
  constexpr int kWarps = GT / 32;
  constexpr int kBWarps = (Cfg::L >= 1 && kWarps >= 2 && Cfg::planes <= 7)
                              ? (kWarps / 3 < 1 ? 1 : kWarps / 3 > 5 ? 5 : kWarps / 3) : 0;
  constexpr int GA = GT - 32 * kBWarps;
  float* part0 = p.partial + p.part_off[0] + plane * (KK + 1);
  if (kBWarps > 0 && t >= GA) {
    wgrad_sets<K, true>(t - GA, GT - GA, xs, 0, lay.xs_pitch, gs + R * lay.xs_pitch + R, 0, lay.xs_pitch, H, W, 1,
                        part0);
  } else {
    const PlaneSubgroup<GA> ga{t, kBWarps > 0 ? 1 + Cfg::planes + g.q : 1 + g.q};

    // 2. Levels, fine to coarse: both Haar chains, the transposed conv, and the level's wgrad.
    int zoff = 0;
#pragma unroll 1
    for (int l = 1; l <= Cfg::L; ++l) {
      const int h = p.lh[l], w = p.lw[l], hin = p.lh[l - 1], win = p.lw[l - 1];
      const int pitch = odd_pitch(w + 2 * R), img = (h + 2 * R + V) * pitch;
      const int spitch = (l == 1) ? lay.xs_pitch : odd_pitch(win + 2 * R);
      const float* sx = ((l == 1) ? xs : ((l & 1) ? yb : ya)) + R * spitch + R;
      const float* sg = ((l == 1) ? gs : ((l & 1) ? db : da)) + R * spitch + R;
      float* dy_img = (l & 1) ? ya : yb;
      float* dz_img = (l & 1) ? da : db;
      const FastDiv fp(pitch);
      for (int r = t; r < img; r += GA) {
        const int i = fp.div(r) - R, j = r - (i + R) * pitch - R;
        float y[4] = {0.f, 0.f, 0.f, 0.f}, dz[4] = {0.f, 0.f, 0.f, 0.f};
        if (i >= 0 && i < h && j >= 0 && j < w) {
          const int i0 = 2 * i, j0 = 2 * j, o = i0 * spitch + j0;
          const bool r1 = i0 + 1 < hin, c1 = j0 + 1 < win;
          haar4(sx[o], c1 ? sx[o + 1] : 0.f, r1 ? sx[o + spitch] : 0.f, (r1 && c1) ? sx[o + spitch + 1] : 0.f, y);
          haar4(sg[o], c1 ? sg[o + 1] : 0.f, r1 ? sg[o + spitch] : 0.f, (r1 && c1) ? sg[o + spitch + 1] : 0.f, dz);
        }
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          dy_img[s * img + r] = y[s];
          dz_img[s * img + r] = dz[s];
        }
      }
      ga.sync();
      // dY_l = dw^T(dZ_l, W~_l) over the level (dZ is zero outside it).
      const int strips = ceil_div(h, V), per_s = strips * w;
      const FastDiv fs(per_s), fw(w);
      for (int e = t; e < 4 * per_s; e += GA) {
        const int s = fs.div(e), r2 = e - s * per_s, si = fw.div(r2), j = r2 - si * w, i0 = si * V;
        float acc[V];
#pragma unroll
        for (int v = 0; v < V; ++v) acc[v] = 0.f;
        conv_strip<K, V>(dz_img + s * img + i0 * pitch + j, pitch, wf + KK + (l - 1) * 4 * KK + s * KK, acc);
        float* d = dys + zoff + s * h * w;
#pragma unroll
        for (int v = 0; v < V; ++v)
          if (i0 + v < h) d[(i0 + v) * w + j] = acc[v];
      }
      // dW~_l[s,u,v] = sum_{i,j} Y_l[s][i+u-R, j+v-R] dZ_l[s][i, j]
      float* part = p.partial + p.part_off[l] + plane * (4 * KK);
      wgrad_sets<K, true>(t, GA, dy_img, img, pitch, dz_img + R * pitch + R, img, pitch, h, w, 4, part);
      zoff += 4 * h * w;
    }
    ga.sync();

    // 3. dY synthesis, coarse to fine (the same recurrence as the forward output).
    plane_fold_levels<Cfg::L>(ga, dys, zoff, p.lh, p.lw);
  }
  g.sync();  // the chain's dY and B's dW~0 are done

  // 4. dX = dw^T(G, W~0) + level-1 synthesis of dY; then (unless the split warps did it) the base wgrad
  // dW~0 = corr(X, G), and db~ = sum G.
  T* __restrict__ dx = static_cast<T*>(p.out) + act_plane(p.out_st, plane, p.C);
  const int strips = ceil_div(H, V);
  const FastDiv fwd(W);
  for (int e = t; e < strips * W; e += GT) {
    const int si = fwd.div(e), x0 = e - si * W, y0 = si * V;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0.f;
    conv_strip<K, V>(gs + y0 * lay.xs_pitch + x0, lay.xs_pitch, wf, acc);
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int y = y0 + v;
      if (y >= H) continue;
      if (Cfg::L >= 1) {
        const int w1 = p.lw[1], hw1 = p.lh[1] * w1;
        const float* z = dys + (y >> 1) * w1 + (x0 >> 1);
        const float sy = (y & 1) ? -1.f : 1.f, sx = (x0 & 1) ? -1.f : 1.f;
        acc[v] += 0.5f * (z[0] + sy * z[hw1] + sx * z[2 * hw1] + sy * sx * z[3 * hw1]);
      }
      dx[act_yx(p.out_st, y, x0)] = from_f32<T>(acc[v]);
    }
  }
  if (kBWarps == 0)
    wgrad_sets<K, true>(t, GT, xs, 0, lay.xs_pitch, gs + R * lay.xs_pitch + R, 0, lay.xs_pitch, H, W, 1, part0);
  // db~ = sum of G over the plane: per-thread strided sums, added in a fixed order.
  {
    float acc = 0.f;
    for (int r = t; r < H * W; r += GT) {
      const int i = fwd.div(r), j = r - i * W;
      acc += gs[(i + R) * lay.xs_pitch + j + R];
    }
    const float s = ordered_sum(acc, t, GT, red, [&] { g.sync(); });
    if (t == 0) part0[KK] = s;
  }
}

}  // namespace lkjit
