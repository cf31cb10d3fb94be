// WTConv forward, plane-resident (beyond the paper; see the operator spec, "Plane-resident fusion").
// Each warp group owns one whole (b,c) plane: it reads X and every tap once, runs each level's Haar
// analysis and scaled k x k conv in shared memory, folds the synthesis coarse to fine (the recurrence
// behind Eq. 7), and writes out = dw(X, W~0) + b~ + R_1 once: the 2N device-traffic floor.
//
// Shared memory per plane (fp32; every image the conv reads has a zero halo of R, plus vy spare rows
// so a strip of vy outputs never reads past it; the halos are zeroed once, phases write interiors):
//   xs (H+2R+vy) x lpitch[0]   input plane, rounded up to a multiple of 4 floats
//   ys 4 x (h_l+2R+vy) x lpitch[l] for l = 1..L    Y_l, one image per level
//   zs sum_l 4 h_l w_l                  Z_l
//   ws round4(k*k+1) + 4L round4(k*k)   W~0 and b~, then W~_1..L one 16-byte aligned subband each (float4
//                                       tap loads); per_plane rounded up to a multiple of 4
// With Cfg::cluster > 1 (sm_90) and channels_last activations the cluster stages X and writes out for all its
// channels (cluster_nhwc.cuh); out waits, dense, in ys (dead after phase 3; 4 h_1 w_1 >= H W floats).
#pragma once
#include "wtconv/cluster_nhwc.cuh"
#include "wtconv/plane_common.cuh"

namespace lkjit {

template <class Cfg>
struct FwdPlaneLayout : PlaneImages<Cfg> {
  int ws_size, per_plane;
  __device__ explicit FwdPlaneLayout(const WTConvParams& p) : PlaneImages<Cfg>(p) {
    ws_size = round4(Cfg::k * Cfg::k + 1) + 4 * Cfg::L * round4(Cfg::k * Cfg::k);
    per_plane = round4(this->xs_size + this->ys_size + this->levels_size + ws_size);
  }
};

template <class Cfg>
__device__ __forceinline__ void wtconv_fwd_plane(const WTConvParams& p) {
  using T = typename Cfg::T;
  constexpr int K = Cfg::k, R = Cfg::R, V = Cfg::vy, KK = K * K;
  constexpr int KK4 = (KK + 3) / 4 * 4, W1 = (KK + 4) / 4 * 4;  // a subband's tap stride; W~_1's offset
  using G = PlaneGroup<Cfg>;
  constexpr int GT = G::kThreads;
  extern __shared__ float4 smem4[];
  const G g;
  const FwdPlaneLayout<Cfg> lay(p);
  const long long plane = (long long)blockIdx.x * Cfg::planes + g.q;
  if (plane >= (long long)p.B * p.C) return;  // only this group's barriers are affected
  const int c = (int)(plane % p.C);
  const int H = p.H, W = p.W, t = g.t;

  float* xs = reinterpret_cast<float*>(smem4) + g.q * lay.per_plane;
  float* ys = xs + lay.xs_size;  // Y_1 | Y_2 | ... | Y_L
  float* zs = ys + lay.ys_size;
  float* ws = zs + lay.levels_size;  // [W~0 | b~ | W~_1 | ... | W~_L], subbands KK4 apart

  // The cluster's channels_last mode, where the activations allow it (the same answer in every block).
  constexpr bool kCluster = Cfg::cluster > 1;
  bool native = false;
  if constexpr (kCluster)
    native = p.stride == 1 && p.C % (Cfg::cluster * Cfg::planes) == 0 && PlaneCluster<Cfg>::reads(static_cast<const T*>(p.x), p.x_st) &&
             PlaneCluster<Cfg>::reads(static_cast<const T*>(p.out), p.out_st);

  // 1. Zero the images (halos included), then every global read in one round trip: the plane's interior
  // and all taps.
  zero_floats<GT>(t, xs, lay.xs_size + lay.ys_size);
  staged_sync<kCluster>(native, g);  // (cluster: every block's images are zero before any block stages into them)
  {
    if constexpr (kCluster) {
      if (native) {
        const PlaneCluster<Cfg> pc(p.C);
        const T* const src[] = {static_cast<const T*>(p.x) + pc.base(p.x_st)};
        const long long st[1][4] = {{p.x_st[0], p.x_st[1], p.x_st[2], p.x_st[3]}};
        const int region[] = {0};
        cluster_stage<Cfg, R>(pc, reinterpret_cast<float*>(smem4), lay.per_plane, region, lay.xs_pitch, H, W, src, st);
      }
    }
    const T* __restrict__ x = static_cast<const T*>(p.x) + act_plane(p.x_st, plane, p.C);
    if (!native) stage_act_widest<GT, R, 16>(t, xs, lay.xs_pitch, H, W, x, p.x_st);
    pdl_wait();  // the fold launched just before, if any (run_list): its taps are read next
    load_channel_taps<GT, K, Cfg::L>(t, p.wfold, p.C, c,
                                     [&](int j, int i, float v) { ws[j == 0 ? i : W1 + (j - 1) * KK4 + i] = v; });
    if (t == 0) ws[KK] = __ldg(p.wfold + fold_bias(p.C, c, KK));
  }
  staged_sync<kCluster>(native, g);

  // 2. Haar chain, fine to coarse: Y_l = Haar(LL of level l-1), each level into its own image.
  {
    const float* src = xs + R * lay.xs_pitch + R;
    int spitch = lay.xs_pitch, hin = H, win = W;
    float* y = ys;
#pragma unroll 1
    for (int l = 1; l <= Cfg::L; ++l) {
      const LevelImage<Cfg> li(p, l);
      const float* const s1[] = {src};
      float* const d1[] = {y};
      haar_level<GT, R>(t, s1, spitch, hin, win, d1, li.pitch, li.img, li.h, li.w);
      g.sync();
      src = y + R * li.pitch + R;
      spitch = li.pitch, hin = li.h, win = li.w;
      y += 4 * li.img;
    }
  }

  // 3. Z_l = conv(Y_l, W~_l) for every level and subband. No barrier between levels (disjoint outputs),
  // and each level's items start at the warp after the previous level's last, so the small levels
  // fill the big one's idle warps instead of all landing on the first.
  int zoff = 0;
  {
    const float* y = ys;
    int first = 0;  // the warp-aligned thread that takes a level's item 0
#pragma unroll 1
    for (int l = 1; l <= Cfg::L; ++l) {
      const LevelImage<Cfg> li(p, l);
      const int h = li.h, w = li.w, strips = ceil_div(h, V), per_s = strips * li.vw;
      const FastDiv fs(per_s), fw(li.vw);
      for (int e = rotated_index(t, first, GT); e < 4 * per_s; e += GT) {
        const int s = fs.div(e), r2 = e - s * per_s;
        const int si = fw.div(r2), j = r2 - si * li.vw, i0 = si * V;
        if (j >= w) continue;  // a column past w (lvw)
        float acc[V];
#pragma unroll
        for (int v = 0; v < V; ++v) acc[v] = 0.f;
        conv_strip<K, V, true>(y + s * li.img + i0 * li.pitch + j, li.pitch, ws + W1 + ((l - 1) * 4 + s) * KK4, acc);
        float* z = zs + zoff + s * h * w + i0 * w + j;
        for_strip_rows<V, 1>(h - i0, [&](int v) { z[v * w] = acc[v]; });
      }
      zoff += 4 * h * w;
      y += 4 * li.img;
      first = next_first(first, 4 * per_s, GT);
    }
  }
  g.sync();

  // 4. Synthesis, coarse to fine (plane_fold_levels).
  plane_fold_levels<Cfg::L>(g, zs, zoff, p.lh, p.lw);

  // 5. out = dw(X, W~0) + b~ + level-1 synthesis (Eq. 7, l = 1), subsampled by the stride.
  T* __restrict__ out = static_cast<T*>(p.out) + act_plane(p.out_st, plane, p.C);
  const int S = p.stride, Ho = p.H_out, Wo = p.W_out;
  const PlaneAddr oa(p.out_st, Ho, Wo);
  const int strips = ceil_div(Ho, V);
  const float bias = ws[KK];
  const int w1 = p.lw[Cfg::L >= 1 ? 1 : 0], hw1 = p.lh[Cfg::L >= 1 ? 1 : 0] * w1;
  const int ow = S == 1 ? lay.xs_vw : Wo;  // item columns at stride 1: lvw[0]
  const FastDiv fwo(ow);
  for (int e = t; e < strips * ow; e += GT) {
    const int si = fwo.div(e), ox = e - si * ow, oy0 = si * V;
    if (ox >= Wo) continue;
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = bias;
    if (S == 1) {
      conv_strip<K, V, true>(xs + oy0 * lay.xs_pitch + ox, lay.xs_pitch, ws, acc);
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
    if (Cfg::L >= 1) add_level1_synth<V>(acc, zs, w1, hw1, oy0, ox * S, S, Ho);
    keep_or_store_strip<V>(native, ys, Wo, out, oa, oy0, ox, Ho, acc);
  }
  if constexpr (kCluster) {
    if (native)
      cluster_write_out<Cfg>(p, reinterpret_cast<const float*>(smem4), lay.per_plane, lay.xs_size, Ho, Wo,
                             static_cast<T*>(p.out), p.out_st);
  }
}

}  // namespace lkjit
