// WTConv backward, plane-resident: one warp group per (b,c) plane reads X and dOut once and writes
// dX once, plus this plane's partial parameter gradients (reduced deterministically by wtconv_reduce).
//   dR_1 = G (dOut scattered by the stride); per level: dZ_l = Haar(pad(dR_l)), dR_{l+1} = dZ_l[LL]
//   (analysis is the transpose of synthesis); Y_l = Haar(pad(X_{l-1})) recomputed from X;
//   dY_l = dw^T(dZ_l, W~_l);  dW~_l = corr(Y_l, dZ_l);  dX = dw^T(G, W~0) + Synth-chain(dY_l)
//   (the closed form of Eq. 7 again, folded coarse to fine);  dW~0 = corr(X, G);  db~ = sum G.
// Shared memory per plane (fp32): xs, gs (H+2R+vy) x lpitch[0], each rounded up to a multiple of
// 4 floats; ys, dzs: per level l = 1..L, 4 subbands of (h_l+2R+vy) x lpitch[l] (Y_l and dZ_l; zero
// halos R and vy spare rows, zeroed once: phases write interiors); dys sum_l 4 h_l w_l; wf flipped taps,
// round4(k*k) per tap set (16-byte aligned: float4 tap loads); red: the db~ warp sums; ctl: 2 ints, the
// dX claim counter and the chain's done flag (per_plane rounded up to a multiple of 4).
// With Cfg::cluster > 1 (sm_90) and channels_last activations the cluster stages X and dOut and writes dX for
// all its channels (cluster_nhwc.cuh); dX waits, dense, in ys (dead after the chain; 4 h_1 w_1 >= H W floats).
#pragma once
#include "wtconv/bwd_common.cuh"
#include "wtconv/cluster_nhwc.cuh"
#include "wtconv/plane_common.cuh"

namespace lkjit {

template <class Cfg>
struct BwdPlaneLayout : PlaneImages<Cfg> {
  int wf_size, red_size, per_plane;
  __device__ explicit BwdPlaneLayout(const WTConvParams& p) : PlaneImages<Cfg>(p) {
    wf_size = round4(Cfg::k * Cfg::k) * (1 + 4 * Cfg::L);
    red_size = Cfg::threads / Cfg::planes / 32;  // one warp sum each (ordered_sum)
    per_plane = round4(2 * this->xs_size + 2 * this->ys_size + this->levels_size + wf_size + red_size + 2);
  }
};

// Thread t's share of sum G over an H x W plane (interior at gs + R * pitch + R): elements t, t + n, ... in
// that order, so the db~ sums are the same whichever threads take them.
template <int R>
__device__ __forceinline__ float strided_plane_sum(const float* gs, int pitch, int H, int W, const FastDiv& fw, int t,
                                                   int n) {
  float acc = 0.f;
  for (int r = t; r < H * W; r += n) {
    const int i = fw.div(r), j = r - i * W;
    acc += gs[(i + R) * pitch + j + R];
  }
  return acc;
}

template <class Cfg>
__device__ __forceinline__ void wtconv_bwd_plane(const WTConvParams& p) {
  using T = typename Cfg::T;
  constexpr int K = Cfg::k, R = Cfg::R, V = Cfg::vy, KK = K * K, KK4 = (KK + 3) / 4 * 4;  // KK4: tap set stride
  using G = PlaneGroup<Cfg>;
  constexpr int GT = G::kThreads;
  extern __shared__ float4 smem4[];
  const G g;
  const BwdPlaneLayout<Cfg> lay(p);
  const long long plane = (long long)blockIdx.x * Cfg::planes + g.q;
  if (plane >= (long long)p.B * p.C) return;
  const int c = (int)(plane % p.C);
  const int H = p.H, W = p.W, t = g.t;

  float* xs = reinterpret_cast<float*>(smem4) + g.q * lay.per_plane;
  float* gs = xs + lay.xs_size;
  float* ys = gs + lay.xs_size;   // Y_1 | ... | Y_L
  float* dzs = ys + lay.ys_size;  // dZ_1 | ... | dZ_L
  float* dys = dzs + lay.ys_size;
  float* wf = dys + lay.levels_size;  // flipped [W~0 | W~_1 (4 subbands) | ...], KK4 apart
  float* red = wf + lay.wf_size;
  int* ctl = reinterpret_cast<int*>(red + lay.red_size);  // [0] dX items claimed by B, [1] the chain is done

  // 1. Zero the images (halos included), then one round trip: the interiors of X and of the scattered
  // dOut G (zeros between dOut's samples for stride > 1), and every tap, flipped.
  constexpr bool kCluster = Cfg::cluster > 1;
  bool native = false;  // the cluster's channels_last mode, where the activations allow it (every block agrees)
  if constexpr (kCluster)
    native = p.stride == 1 && p.C % (Cfg::cluster * Cfg::planes) == 0 && PlaneCluster<Cfg>::reads(static_cast<const T*>(p.x), p.x_st) &&
             PlaneCluster<Cfg>::reads(static_cast<const T*>(p.g), p.g_st) &&
             PlaneCluster<Cfg>::reads(static_cast<const T*>(p.out), p.out_st);
  zero_floats<GT>(t, xs, 2 * lay.xs_size + 2 * lay.ys_size);
  if (t == 0) ctl[0] = 0, ctl[1] = 0;
  staged_sync<kCluster>(native, g);  // (cluster: every block's images are zero before any block stages into them)
  if constexpr (kCluster) {
    if (native) {
      const PlaneCluster<Cfg> pc(p.C);
      const T* const src[] = {static_cast<const T*>(p.x) + pc.base(p.x_st), static_cast<const T*>(p.g) + pc.base(p.g_st)};
      const long long st[2][4] = {{p.x_st[0], p.x_st[1], p.x_st[2], p.x_st[3]},
                                  {p.g_st[0], p.g_st[1], p.g_st[2], p.g_st[3]}};
      const int region[] = {0, lay.xs_size};
      cluster_stage<Cfg, R>(pc, reinterpret_cast<float*>(smem4), lay.per_plane, region, lay.xs_pitch, H, W, src, st);
    }
  }
  if (native) {
    pdl_wait();
    load_channel_taps<GT, K, Cfg::L>(t, p.wfold, p.C, c, [&](int j, int i, float v) { wf[j * KK4 + (KK - 1 - i)] = v; });
  } else {
    const T* __restrict__ x = static_cast<const T*>(p.x) + act_plane(p.x_st, plane, p.C);
    const T* __restrict__ go = static_cast<const T*>(p.g) + act_plane(p.g_st, plane, p.C);
    const int Ho = p.H_out, Wo = p.W_out, S = p.stride;
    const bool fits = plane_fits32(p.x_st, H, W) && plane_fits32(p.g_st, Ho, Wo);
    // 8- and 16-byte loads where both planes allow them (4-byte pairs were no faster here, and 12 % slower
    // at 7x7); the smaller of two act_vec results suits both planes.
    constexpr int E16 = 16 / (int)sizeof(T), E8 = 8 / (int)sizeof(T);
    const int e = S == 1 && fits ? min(act_vec<16>(x, p.x_st, H, W), act_vec<16>(go, p.g_st, H, W)) : 1;
    if (e == E16) {
      stage_act_vec<GT, R, E16>(t, xs, gs, lay.xs_pitch, H, W, x, (int)p.x_st[2], go, (int)p.g_st[2]);
    } else if (e == E8) {
      stage_act_vec<GT, R, E8>(t, xs, gs, lay.xs_pitch, H, W, x, (int)p.x_st[2], go, (int)p.g_st[2]);
    } else if (S == 1 && fits) {
      stage_act<GT, R>(t, xs, gs, lay.xs_pitch, H, W, x, off32(p.x_st), go, off32(p.g_st));
    } else if (S == 1) {
      stage_act<GT, R>(t, xs, gs, lay.xs_pitch, H, W, x, off64(p.x_st), go, off64(p.g_st));
    } else {  // G holds dOut at multiples of the stride (zero between); 64-bit offsets on this rare path
      stage_act<GT, R>(t, xs, lay.xs_pitch, H, W, 1, x, off64(p.x_st));
      stage_act<GT, R>(t, gs, lay.xs_pitch, Ho, Wo, S, go, off64(p.g_st));
    }
    pdl_wait();  // the fold launched just before, if any (run_list): its taps are read next
    load_channel_taps<GT, K, Cfg::L>(t, p.wfold, p.C, c,  // each k x k flipped
                                     [&](int j, int i, float v) { wf[j * KK4 + (KK - 1 - i)] = v; });
  }
  staged_sync<kCluster>(native, g);

  // Warp specialisation: the level chain (phases 2-3) is a sequence of short phases whose barriers idle
  // most of a large group, and the base wgrad needs only X and G. So in groups of 2+ warps the first GA
  // threads run the chain on their own barrier while the last GB threads (a third of the warps, 1 to 5:
  // wgrad_sets keeps at most k tap rows x 32 lanes busy) compute dW~0 meanwhile; everyone meets for dX.
  constexpr int kWarps = GT / 32;
  constexpr int kBWarps = (Cfg::L >= 1 && kWarps >= 2 && Cfg::planes <= 7)
                              ? (kWarps / 3 < 1 ? 1 : kWarps / 3 > 5 ? 5 : kWarps / 3) : 0;
  constexpr int GA = GT - 32 * kBWarps;
  // The B warps finish the base wgrad well before the chain (about 2x sooner at 56x56). With kBdx they
  // then sum db~ and take dX's base term dw^T(G, W~0) item by item (a warp claims 32 at a time) until the
  // chain says it is done (tests can force all or none: WTConvParams::flags), keeping each in xs: X is dead once the chain's level-1 Haar has read it (the hand-off
  // barrier). Everyone then finishes the claimed items from xs and the rest from scratch: the same
  // values either way. Named barriers: q+1, 1+planes+q (the chain), 1+2 planes+q (hand-off), so at most
  // 5 planes a block.
  constexpr bool kBdx = kBWarps > 0 && Cfg::planes <= 5;
  const int handoff = 1 + 2 * Cfg::planes + g.q;
  const int strips = ceil_div(H, V), items = strips * lay.xs_vw;  // dX items: (strip, column)
  const FastDiv fvw(lay.xs_vw), fwd(W);
  float* part0 = p.partial + p.part_off[0] + plane * (KK + 1);
  if (kBWarps > 0 && t >= GA) {
    wgrad_sets<K, true>(t - GA, GT - GA, xs, 0, lay.xs_pitch, gs + R * lay.xs_pitch + R, 0, lay.xs_pitch, H, W, 1,
                        part0);
    if constexpr (kBdx) {
      // db~ = sum G here too: per-thread strided sums in a fixed order, warp sums added in warp order.
      const int lane = t & 31;
      float acc = strided_plane_sum<R>(gs, lay.xs_pitch, H, W, fwd, t - GA, GT - GA);
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
      if (lane == 0) red[(t - GA) >> 5] = acc;
      group_barrier<GT>(handoff);  // every B thread is past its wgrad reads of X, and the chain past its own
      if (t == GA) {
        float s = 0.f;
        for (int i = 0; i < kBWarps; ++i) s += red[i];
        part0[KK] = s;
      }
      for (;;) {
        int base = 0;
        if (lane == 0) {  // (atomics: no data race on the flag)
          const bool stop = (p.flags & kWTConvFlagClaimNone) ||
                            (!(p.flags & kWTConvFlagClaimAll) && atomicAdd(ctl + 1, 0));
          base = stop ? items : atomicAdd(ctl, 32);
        }
        base = __shfl_sync(0xffffffffu, base, 0);
        if (base >= items) break;
        const int e = base + lane, si = fvw.div(e), x0 = e - si * lay.xs_vw, y0 = si * V;
        if (e < items && x0 < W) {  // (x0 >= W: a column past W, lvw)
          float acc[V];
#pragma unroll
          for (int v = 0; v < V; ++v) acc[v] = 0.f;
          conv_strip<K, V, true>(gs + y0 * lay.xs_pitch + x0, lay.xs_pitch, wf, acc);
          float* d = xs + y0 * lay.xs_pitch + x0;
          for_strip_rows<V, 1>(H - y0, [&](int v) { d[v * lay.xs_pitch] = acc[v]; });
        }
      }
    }
  } else {
    const PlaneSubgroup<GA> ga{t, kBWarps > 0 ? 1 + Cfg::planes + g.q : 1 + g.q};

    // 2. Both Haar chains, fine to coarse, each level into its own images: Y_l = Haar(LL of Y_{l-1}),
    // dZ_l = Haar(LL of dZ_{l-1}) (analysis is the transpose of synthesis; level 0 is X and G).
    {
      const float* sx = xs + R * lay.xs_pitch + R;
      const float* sg = gs + R * lay.xs_pitch + R;
      int spitch = lay.xs_pitch, hin = H, win = W, off = 0;
#pragma unroll 1
      for (int l = 1; l <= Cfg::L; ++l) {
        const LevelImage<Cfg> li(p, l);
        const float* const src[] = {sx, sg};
        float* const dst[] = {ys + off, dzs + off};
        haar_level<GA, R>(t, src, spitch, hin, win, dst, li.pitch, li.img, li.h, li.w);
        if (kBdx && l == 1) group_arrive<GT>(handoff);  // done with X (xs): B may overwrite it
        ga.sync();
        sx = ys + off + R * li.pitch + R;
        sg = dzs + off + R * li.pitch + R;
        spitch = li.pitch, hin = li.h, win = li.w;
        off += 4 * li.img;
      }
    }

    // Per level (no barrier between levels: disjoint outputs): dY_l = dw^T(dZ_l, W~_l), and
    // dW~_l[s,u,v] = sum_{i,j} Y_l[s][i+u-R, j+v-R] dZ_l[s][i, j]. Each level's conv items start at the
    // warp after the previous level's last conv item (as in the forward); its wgrad rows start at the warp
    // after its own last conv item, and so does the next level's conv.
    int zoff = 0, off = 0, first = 0;
#pragma unroll 1
    for (int l = 1; l <= Cfg::L; ++l) {
      const LevelImage<Cfg> li(p, l);
      const int h = li.h, w = li.w, pitch = li.pitch, img = li.img;
      const float* dz_img = dzs + off;
      const int strips = ceil_div(h, V), per_s = strips * li.vw;
      const FastDiv fs(per_s), fw(li.vw);
      for (int e = rotated_index(t, first, GA); e < 4 * per_s; e += GA) {
        const int s = fs.div(e), r2 = e - s * per_s, si = fw.div(r2), j = r2 - si * li.vw, i0 = si * V;
        if (j >= w) continue;  // a column past w (lvw)
        float acc[V];
#pragma unroll
        for (int v = 0; v < V; ++v) acc[v] = 0.f;
        conv_strip<K, V, true>(dz_img + s * img + i0 * pitch + j, pitch, wf + KK4 * (1 + (l - 1) * 4 + s), acc);
        float* d = dys + zoff + s * h * w + i0 * w + j;
        for_strip_rows<V, 1>(h - i0, [&](int v) { d[v * w] = acc[v]; });
      }
      float* part = p.partial + p.part_off[l] + plane * (4 * KK);
      first = next_first(first, 4 * per_s, GA);
      wgrad_sets<K, true>(rotated_index(t, first, GA), GA, ys + off, img, pitch, dz_img + R * pitch + R, img, pitch, h, w, 4,
                          part);
      zoff += 4 * h * w;
      off += 4 * img;
    }
    ga.sync();

    // 3. dY synthesis, coarse to fine (the same recurrence as the forward output).
    plane_fold_levels<Cfg::L>(ga, dys, zoff, p.lh, p.lw);
    if (kBdx && t == 0) atomicExch(ctl + 1, 1);  // B: claim no more
  }
  g.sync();  // the chain's dY, B's dW~0 and B's claimed dX items are done

  // 4. dX = dw^T(G, W~0) + level-1 synthesis of dY; then (unless the split warps did them) the base wgrad
  // dW~0 = corr(X, G), and db~ = sum G.
  T* __restrict__ dx = static_cast<T*>(p.out) + act_plane(p.out_st, plane, p.C);
  const PlaneAddr da(p.out_st, H, W);
  const int w1 = p.lw[Cfg::L >= 1 ? 1 : 0], hw1 = p.lh[Cfg::L >= 1 ? 1 : 0] * w1;
  const int claimed = kBdx ? min(ctl[0], items) : 0;  // items below it hold their base term in xs
  for (int e = t; e < items; e += GT) {
    const int si = fvw.div(e), x0 = e - si * lay.xs_vw, y0 = si * V;
    if (x0 >= W) continue;  // a column past W (lvw)
    float acc[V];
    if (e < claimed) {
#pragma unroll
      for (int v = 0; v < V; ++v) acc[v] = 0.f;
      const float* b = xs + y0 * lay.xs_pitch + x0;
      for_strip_rows<V, 1>(H - y0, [&](int v) { acc[v] = b[v * lay.xs_pitch]; });
    } else {
#pragma unroll
      for (int v = 0; v < V; ++v) acc[v] = 0.f;
      conv_strip<K, V, true>(gs + y0 * lay.xs_pitch + x0, lay.xs_pitch, wf, acc);
    }
    if (Cfg::L >= 1) add_level1_synth<V>(acc, dys, w1, hw1, y0, x0, 1, H);
    keep_or_store_strip<V>(native, ys, W, dx, da, y0, x0, H, acc);
  }
  if constexpr (kCluster) {
    if (native)
      cluster_write_out<Cfg>(p, reinterpret_cast<const float*>(smem4), lay.per_plane, 2 * lay.xs_size, H, W,
                             static_cast<T*>(p.out), p.out_st);
  }
  if (kBWarps == 0)
    wgrad_sets<K, true>(t, GT, xs, 0, lay.xs_pitch, gs + R * lay.xs_pitch + R, 0, lay.xs_pitch, H, W, 1, part0);
  // db~ = sum of G over the plane (unless the B threads did it): per-thread strided sums, added in a fixed order.
  if constexpr (!kBdx) {
    const float acc = strided_plane_sum<R>(gs, lay.xs_pitch, H, W, fwd, t, GT);
    const float s = ordered_sum(acc, t, GT, red, [&] { g.sync(); });
    if (t == 0) part0[KK] = s;
  }
}

}  // namespace lkjit
