// WTConv backward, lane kernel (lane_common.cuh): Cfg::split = 1 or 2 threads per (b,c) plane, stride 1,
// W <= Cfg::wmax. Two threads of a plane are lanes i and i + 16 of one warp (a warp: 16 planes); they
// share the plane's shared-memory column and split every phase below (rows, subbands, the two Haar
// chains), syncing between phases: a plane's work in half the time per thread at the same shared memory
// per plane, so twice the threads per SM where shared memory caps the residency.
// The same math as the plane kernel (bwd_plane.cuh), G = dOut:
//   1. dZ_l = Haar(LL of dZ_{l-1}) from G, and Y_l = Haar(LL of Y_{l-1}) from X, into the thread's images.
//      Y_1 keeps its LL only: its other subbands are recomputed from X, row by row, where the wgrad needs them.
//   2. Per level and subband: dW~_l[s,u,v] = sum_{i,j} Y_l[s][i+u-R, j+v-R] dZ_l[s][i, j] (written as this
//      plane's partial, lane_partial), then dY_l = dw^T(dZ_l, W~_l) in place of dZ_l.
//   3. Synthesis of dY, coarse to fine (as the forward's output).
//   4. Row by row: dX = dw^T(G, W~0) + the level-1 synthesis of dY_1.
//   5. dW~0[u,v] = sum_{y,x} X[y+u-R, x+v-R] G[y, x] and db~ = sum G, as partials.
// Shared memory: threads / split planes x (sum_l 4 sp[l]  [dZ_l, then dY_l]
//                                          + lh[1] lane_wmax(1) + sum_{l>=2} 4 sp[l]  [Y_1's LL, Y_l]) floats,
// sp[l] = lh[l] lane_wmax(l) rounded up to odd (LaneLevels), plus one float so that Y_1's LL starts at an
// odd element (the two Haar chains of a pair then read level 1 from distinct banks; deeper levels may
// share banks two ways).
#pragma once
#include "wtconv/lane_common.cuh"

namespace lkjit {

// acc[u*K+v] += sum_j g[j] * win[u][j+v]: one row of a k x k wgrad (win: the image rows i-R..i+R).
template <int K, int N>
__device__ __forceinline__ void lane_wgrad_row(const float (&win)[K][N + K - 1], const float (&g)[N], float (&acc)[K * K]) {
#pragma unroll
  for (int u = 0; u < K; ++u)
#pragma unroll
    for (int v = 0; v < K; ++v)
#pragma unroll
      for (int j = 0; j < N; ++j) acc[u * K + v] = fmaf(g[j], win[u][j + v], acc[u * K + v]);
}

// Row r of subband s of Y_l into a window row: recomputed from X at level 1 (only Y_1's LL is stored),
// else read from Y_l's subband image at m[yimg] (h x N).
template <int l, int N1, int N, int R, int NW, int CS, class T>
__device__ __forceinline__ void lane_y_row(float (&dst)[NW], LaneMem<CS> m, int yimg, int h, const T* __restrict__ x,
                                           long long sy, long long sx, int H, int W, int r, int s) {
  if constexpr (l == 1) lane_haar_act_row<N1, R>(dst, x, sy, sx, r, H, W, s);
  else lane_load_row<N, R>(dst, m, yimg, r, h);
}

// Levels l..L: per subband, the wgrad partial dW~_l[s] = corr(Y_l[s], dZ_l[s]), then dY_l[s] =
// dw^T(dZ_l[s], W~_l[s]) in place of dZ_l[s] (dz[l]: level l's dZ image, yo[l]: its Y image, subbands
// sp[l] apart). Thread `role` of a plane takes subbands role, role + split, ...
template <class Cfg, int l, int CS, class T>
__device__ __forceinline__ void bwd_lane_levels(LaneMem<CS> m, const int* dz, const int* yo, const int* sp,
                                                const WTConvParams& p, long long plane, int c, const T* __restrict__ x,
                                                int role) {
  if constexpr (l <= Cfg::L) {
    constexpr int K = Cfg::k, R = Cfg::R, KK = K * K;
    constexpr int N = lane_wmax(Cfg::wmax, l), N1 = lane_wmax(Cfg::wmax, 1), NW = N + K - 1;
    const int h = p.lh[l], H = p.H, W = p.W;
    const long long xsy = p.x_st[2], xsx = p.x_st[3];
    // Partials channel-innermost in blocks of 32 channels (lane_partial), so a warp's stores are runs
    // over consecutive channels.
    float* part = lane_partial(p, l, 4 * KK, plane / p.C, c);
#pragma unroll 1
    for (int s = role; s < 4; s += Cfg::split) {
      const int dzs = dz[l] + s * sp[l], ys = yo[l] + s * sp[l];
      float acc[KK];
#pragma unroll
      for (int r = 0; r < KK; ++r) acc[r] = 0.f;
      float win[K][NW];
      lane_zero(win);
#pragma unroll
      for (int u = R; u + 1 < K; ++u) lane_y_row<l, N1, N, R>(win[u], m, ys, h, x, xsy, xsx, H, W, u - R, s);
      float wf[KK];  // this subband's flipped taps, in flight during the wgrad
      lane_load_taps<Cfg::L, KK, true>(wf, p, c, lane_level_v0(KK, l, s));
      float ny[N], ng[N];  // the next Y row and dZ row, loaded while this row's sums run
      lane_y_row<l, N1, N, 0>(ny, m, ys, h, x, xsy, xsx, H, W, R, s);
      lane_load_row<N, 0>(ng, m, dzs, 0, h);
#pragma unroll 1
      for (int i = 0; i < h; ++i) {
        lane_put_row<N, R>(win[K - 1], ny);
        float gz[N];
#pragma unroll
        for (int j = 0; j < N; ++j) gz[j] = ng[j];
        lane_y_row<l, N1, N, 0>(ny, m, ys, h, x, xsy, xsx, H, W, i + R + 1, s);
        lane_load_row<N, 0>(ng, m, dzs, i + 1, h);
        lane_wgrad_row<K, N>(win, gz, acc);
        lane_slide(win);
      }
#pragma unroll
      for (int r = 0; r < KK; ++r) part[(s * KK + r) * 32] = acc[r];
      lane_conv_image<K, N, CS>(m, dzs, h, wf);
    }
    bwd_lane_levels<Cfg, l + 1, CS>(m, dz, yo, sp, p, plane, c, x, role);
  }
}

template <class Cfg>
__device__ __forceinline__ void wtconv_bwd_lane(const WTConvParams& p) {
  using T = typename Cfg::T;
  constexpr int K = Cfg::k, R = Cfg::R, KK = K * K, NT = Cfg::threads, L = Cfg::L, N0 = Cfg::wmax;
  constexpr int SPLIT = Cfg::split, N1 = lane_wmax(N0, 1);
  using Thread = LaneThread<NT, SPLIT>;
  constexpr int CS = Thread::CS;
  extern __shared__ float lane_smem[];
  const auto [role, pair, plane] = Thread();
  if (plane >= (long long)p.B * p.C) return;  // a pair leaves together; no block-wide barriers
  const int c = (int)(plane % p.C), H = p.H, W = p.W;
  const LaneLevels<L, N0, true> dz(p.lh);  // dZ_l, then dY_l
  // Y images: yo[1] holds Y_1's LL alone (h1 x N1) from an odd element, yo[l] for l >= 2 all of Y_l.
  const int h1 = L >= 1 ? p.lh[1] : 0;
  int yo[L + 2];
  yo[1] = dz.off[L + 1] | 1;
#pragma unroll
  for (int l = 2; l <= L + 1; ++l) yo[l] = yo[1] + h1 * N1 + dz.off[l] - dz.off[2];
  const int floats = L >= 1 ? yo[L + 1] : 0;  // the plane's column: yo[L+1] is the end of its last image
  const LaneMem<CS> m = Thread::mem(lane_smem, floats);
  const T* __restrict__ x = static_cast<const T*>(p.x) + act_plane(p.x_st, plane, p.C);
  const T* __restrict__ g = static_cast<const T*>(p.g) + act_plane(p.g_st, plane, p.C);
  const long long xsy = p.x_st[2], xsx = p.x_st[3], gsy = p.g_st[2], gsx = p.g_st[3];

  if constexpr (L >= 1) {
    // 1. Both Haar chains: level 1 from global memory in alternate rows per thread, then the deeper levels,
    //    dZ's by role 0 and Y's by role 1 (one thread: both).
    lane_haar_act<N1, CS>(m, dz.off[1], dz.sp[1], h1, role, SPLIT, g, gsy, gsx, H, W);
    lane_haar_act<N1, CS, true>(m, yo[1], 0, h1, role, SPLIT, x, xsy, xsx, H, W);
    lane_pair_sync<SPLIT>(pair);
    if constexpr (SPLIT == 1) {
      lane_haar_chain<N0, CS, 2, L>(m, dz.off, dz.sp, p.lh);
      lane_haar_chain<N0, CS, 2, L>(m, yo, dz.sp, p.lh);
    } else {
      int chain[L + 2];
#pragma unroll
      for (int l = 1; l <= L; ++l) chain[l] = role ? yo[l] : dz.off[l];
      lane_haar_chain<N0, CS, 2, L>(m, chain, dz.sp, p.lh);
      lane_pair_sync<SPLIT>(pair);
    }
    pdl_wait();  // the fold launched just before, if any (run_list): the levels read its taps
    // 2. Per level and subband: the wgrad partial, then dY_l in place of dZ_l.
    bwd_lane_levels<Cfg, 1, CS>(m, dz.off, yo, dz.sp, p, plane, c, x, role);
    lane_pair_sync<SPLIT>(pair);
    // 3. Synthesis of dY, coarse to fine.
    lane_synth_chain<N0, CS, L, SPLIT>(m, dz.off, dz.sp, p.lh, role, pair);
  }

  // Rows of phases 4 and 5: all, or the first or second half by role.
  const int yh = (H + 1) / 2, y0 = SPLIT == 1 ? 0 : role * yh, y1 = SPLIT == 1 ? H : (role ? H : yh);

  // 4. dX rows: the transposed base conv over a window of G rows, plus the level-1 synthesis of dY.
  {
    float wf[KK];
    if constexpr (L == 0) pdl_wait();
    lane_load_taps<L, KK, true>(wf, p, c, 0);
    T* __restrict__ dx = static_cast<T*>(p.out) + act_plane(p.out_st, plane, p.C);
    lane_output_rows<K, N0, L, CS>(dx, p.out_st[2], p.out_st[3], g, gsy, gsx, H, W, wf, 0.f, m, dz.off[1],
                                   L >= 1 ? dz.sp[1] : 0, y0, y1);
  }

  // 5. Base wgrad and bias gradient over a window of X rows and the G row between.
  {
    constexpr int NW = N0 + K - 1;
    float win[K][NW];
    float acc[KK], db = 0.f;
#pragma unroll
    for (int r = 0; r < KK; ++r) acc[r] = 0.f;
    lane_zero(win);
#pragma unroll
    for (int u = 0; u + 1 < K; ++u) lane_load_act<N0, R>(win[u], x, xsy, xsx, y0 - R + u, H, W);
    float nx[N0], ng[N0];  // the next X row and G row, loaded while this row's sums run
    lane_load_act<N0, 0>(nx, x, xsy, xsx, y0 + R, H, W);
    lane_load_act<N0, 0>(ng, g, gsy, gsx, y0, H, W);
#pragma unroll 1
    for (int y = y0; y < y1; ++y) {
      lane_put_row<N0, R>(win[K - 1], nx);
      float gy[N0];
#pragma unroll
      for (int j = 0; j < N0; ++j) gy[j] = ng[j];
      lane_load_act<N0, 0>(nx, x, xsy, xsx, y + R + 1, H, W);
      lane_load_act<N0, 0>(ng, g, gsy, gsx, y + 1, H, W);
#pragma unroll
      for (int j = 0; j < N0; ++j) db += gy[j];
      lane_wgrad_row<K, N0>(win, gy, acc);
      lane_slide(win);
    }
    if constexpr (SPLIT == 2) {  // role 0's rows + role 1's rows: the same sum in both threads
#pragma unroll
      for (int r = 0; r < KK; ++r) acc[r] += __shfl_xor_sync(pair, acc[r], 16);
      db += __shfl_xor_sync(pair, db, 16);
    }
    // Values 0..KK-1 dW~0, KK db~ (lane_partial); the two threads of a plane store alternate values.
    float* part0 = lane_partial(p, 0, KK + 1, plane / p.C, c);
#pragma unroll
    for (int r = 0; r < KK; ++r)
      if (r % SPLIT == role) part0[r * 32] = acc[r];
    if (KK % SPLIT == role) part0[KK * 32] = db;
  }
}

}  // namespace lkjit
