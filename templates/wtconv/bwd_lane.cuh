// WTConv backward, lane kernel (lane_common.cuh): Cfg::split = 1 or 2 threads per (b,c) plane, stride 1,
// W <= Cfg::wmax. Two threads of a plane are lanes i and i + 16 of one warp (a warp: 16 planes); they
// share the plane's shared-memory column and split every phase below (rows, subbands), syncing between
// phases: a plane's work in half the time per thread at the same shared memory per plane, so twice the
// threads per SM where shared memory caps the residency.
// The same math as the plane kernel (bwd_plane.cuh), G = dOut:
//   1. dZ_l = Haar(LL of dZ_{l-1}) from G into the plane's images. Of the Y_l = Haar(LL of Y_{l-1}) from X,
//      at L = 2 all of Y_2 is stored, at L >= 3 only the LL of Y_2 .. Y_{L-1}, for the deeper levels to start
//      from (Y_2 straight from X both ways).
//   2. Per level and subband: dW~_l[s,u,v] = sum_{i,j} Y_l[s][i+u-R, j+v-R] dZ_l[s][i, j] (written as this
//      plane's partial, lane_partial), then dY_l = dw^T(dZ_l, W~_l) in place of dZ_l. The rows of Y_l[s]
//      not stored are recomputed where the wgrad needs them: Y_1's and Y_2's from X, deeper ones from the
//      stored LL.
//   3. Synthesis of dY, coarse to fine (as the forward's output).
//   4. Row by row: dX = dw^T(G, W~0) + the level-1 synthesis of dY_1.
//   5. dW~0[u,v] = sum_{y,x} X[y+u-R, x+v-R] G[y, x] and db~ = sum G, as partials.
// Shared memory: threads / split planes x (sum_l 4 sp[l]  [dZ_l, then dY_l]  + Y) floats, Y = 4 (sp[2] | 1)
// at L = 2 [Y_2], else sum_{2<=l<L} lh[l] lane_wmax(l) [Y_l's LL]; sp[l] = lh[l] lane_wmax(l), rounded up to
// odd at level 1 (the two threads of a pair on subbands s and s+1 then hit distinct banks there; the small
// deeper levels may share banks two ways).
// That is 292 floats a 14x14 plane at L = 3, so that 6 blocks of 32 planes fit an SM's 228 KiB and all
// 64x384 planes of a WTConvNeXt-T stage run in one wave on 132 SMs; the tile's `blocks` caps the registers
// to match (lane_default).
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

// Y_1's LL, row r (N1 columns) from X rows 2r and 2r + 1, rounded as haar4, into dst[0..N1-1]: zero past
// the plane, and in dst's columns past N1 (the chain's images are zero past their width).
template <int N1, int NA, class T>
__device__ __forceinline__ void lane_ll1_row(float (&dst)[NA], const T* __restrict__ x, long long sy, long long sx,
                                             int r, int H, int W) {
  static_assert(NA >= N1, "a row of Y_1's LL");
  float r0[2 * N1], r1[2 * N1];
  lane_load_act<2 * N1, 0>(r0, x, sy, sx, 2 * r, H, W);
  lane_load_act<2 * N1, 0>(r1, x, sy, sx, 2 * r + 1, H, W);
#pragma unroll
  for (int j = 0; j < N1; ++j) dst[j] = 0.5f * (r0[2 * j] + r0[2 * j + 1] + r1[2 * j] + r1[2 * j + 1]);
#pragma unroll
  for (int j = N1; j < NA; ++j) dst[j] = 0.f;
}

// Row r of subband s of Y_2, N2 = ceil(N1 / 2) columns, into dst[R..R+N2-1], from Y_1's LL rows 2r and
// 2r + 1 recomputed from X (zero past h1 as X is past H).
template <int N1, int R, int NW, class T>
__device__ __forceinline__ void lane_haar2_act_row(float (&dst)[NW], const T* __restrict__ x, long long sy,
                                                   long long sx, int r, int H, int W, int s) {
  constexpr int N2 = (N1 + 1) / 2;
  float a[2 * N2], b[2 * N2];
  lane_ll1_row<N1>(a, x, sy, sx, 2 * r, H, W);
  lane_ll1_row<N1>(b, x, sy, sx, 2 * r + 1, H, W);
#pragma unroll
  for (int j = 0; j < N2; ++j) dst[R + j] = haar4_band(a[2 * j], a[2 * j + 1], b[2 * j], b[2 * j + 1], s);
}

// Row r (>= 0) of subband s of Y_l, l >= 3, N columns, into dst[R..R+N-1], from Y_{l-1}'s LL (hp x NP at
// m[src]); zero at r >= h, as lane_haar_level pads.
template <int N, int NP, int R, int NW, int CS>
__device__ __forceinline__ void lane_haar_band_row(float (&dst)[NW], LaneMem<CS> m, int src, int hp, int h, int r,
                                                   int s) {
  const bool in = r < h, r1 = 2 * r + 1 < hp;
  const int a = src + min(2 * r, hp - 1) * NP, b = src + min(2 * r + 1, hp - 1) * NP;
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const bool c1 = 2 * j + 1 < NP;
    const float p00 = m[a + 2 * j], p01 = c1 ? m[a + 2 * j + 1] : 0.f;
    const float q10 = m[b + 2 * j], q11 = c1 ? m[b + 2 * j + 1] : 0.f;
    const float v = haar4_band(p00, p01, r1 ? q10 : 0.f, r1 ? q11 : 0.f, s);
    dst[R + j] = in ? v : 0.f;
  }
}

// Row r (>= 0) of subband s of Y_l into a window row: at level 1 recomputed from X; at level 2 read from
// Y_2's stored subbands (kY2: L = 2, pitch y2p) or recomputed from X; deeper from Y_{l-1}'s LL at m[ys[l-1]]
// (lh[l-1] x its level's columns).
template <int l, int N0, bool kY2, int R, int NW, int CS, class T>
__device__ __forceinline__ void lane_y_row(float (&dst)[NW], LaneMem<CS> m, const int* ys, int y2p, const int* lh,
                                           const T* __restrict__ x, long long sy, long long sx, int H, int W, int r,
                                           int s) {
  constexpr int N1 = lane_wmax(N0, 1);
  if constexpr (l == 1) lane_haar_act_row<N1, R>(dst, x, sy, sx, r, H, W, s);
  else if constexpr (l == 2 && kY2) lane_load_row<lane_wmax(N0, 2), R>(dst, m, ys[2] + s * y2p, r, lh[2]);
  else if constexpr (l == 2) lane_haar2_act_row<N1, R>(dst, x, sy, sx, r, H, W, s);
  else lane_haar_band_row<lane_wmax(N0, l), lane_wmax(N0, l - 1), R>(dst, m, ys[l - 1], lh[l - 1], lh[l], r, s);
}

// Y_2 from X, rows i0, i0 + di, ... below h2: its first NS subbands (4, or 1: the LL alone) into m[dst],
// h2 x N2 each, pitch apart; as the chain's lane_haar_level computes them from Y_1's LL (lane_ll1_row).
template <int N1, int CS, int NS, class T>
__device__ __forceinline__ void lane_y2_act(LaneMem<CS> m, int dst, int pitch, int h2, int i0, int di,
                                            const T* __restrict__ x, long long sy, long long sx, int H, int W) {
  constexpr int N2 = (N1 + 1) / 2;
#pragma unroll 1
  for (int i = i0; i < h2; i += di) {
    float a[2 * N2], b[2 * N2];
    lane_ll1_row<N1>(a, x, sy, sx, 2 * i, H, W);
    lane_ll1_row<N1>(b, x, sy, sx, 2 * i + 1, H, W);
#pragma unroll
    for (int j = 0; j < N2; ++j) {
      float y[4];
      haar4(a[2 * j], a[2 * j + 1], b[2 * j], b[2 * j + 1], y);
#pragma unroll
      for (int q = 0; q < NS; ++q) m[dst + q * pitch + i * N2 + j] = y[q];
    }
  }
}

// Levels l..L: per subband, the wgrad partial dW~_l[s] = corr(Y_l[s], dZ_l[s]), then dY_l[s] =
// dw^T(dZ_l[s], W~_l[s]) in place of dZ_l[s] (dz[l]: level l's dZ image, subbands sp[l] apart; ys, y2p: the
// stored Y images, lane_y_row). Thread `role` of a plane takes subbands role, role + split, ...
template <class Cfg, int l, int CS, class T>
__device__ __forceinline__ void bwd_lane_levels(LaneMem<CS> m, const int* dz, const int* ys, int y2p, const int* sp,
                                                const WTConvParams& p, long long plane, int c, const T* __restrict__ x,
                                                int role) {
  if constexpr (l <= Cfg::L) {
    constexpr int K = Cfg::k, R = Cfg::R, KK = K * K;
    constexpr int N0 = Cfg::wmax, N = lane_wmax(N0, l), NW = N + K - 1;
    const int h = p.lh[l], H = p.H, W = p.W;
    const long long xsy = p.x_st[2], xsx = p.x_st[3];
    // Partials channel-innermost in blocks of 32 channels (lane_partial), so a warp's stores are runs
    // over consecutive channels.
    float* part = lane_partial(p, l, 4 * KK, plane / p.C, c);
#pragma unroll 1
    for (int s = role; s < 4; s += Cfg::split) {
      const int dzs = dz[l] + s * sp[l];
      float acc[KK];
#pragma unroll
      for (int r = 0; r < KK; ++r) acc[r] = 0.f;
      float win[K][NW];
      lane_zero(win);
#pragma unroll
      for (int u = R; u + 1 < K; ++u) lane_y_row<l, N0, Cfg::L == 2, R>(win[u], m, ys, y2p, p.lh, x, xsy, xsx, H, W, u - R, s);
      float wf[KK];  // this subband's flipped taps, in flight during the wgrad
      lane_load_taps<Cfg::L, KK, true>(wf, p, c, lane_level_v0(KK, l, s));
      float ny[N], ng[N];  // the next Y row and dZ row, loaded while this row's sums run
      lane_y_row<l, N0, Cfg::L == 2, 0>(ny, m, ys, y2p, p.lh, x, xsy, xsx, H, W, R, s);
      lane_load_row<N, 0>(ng, m, dzs, 0, h);
#pragma unroll 1
      for (int i = 0; i < h; ++i) {
        lane_put_row<N, R>(win[K - 1], ny);
        float gz[N];
#pragma unroll
        for (int j = 0; j < N; ++j) gz[j] = ng[j];
        lane_y_row<l, N0, Cfg::L == 2, 0>(ny, m, ys, y2p, p.lh, x, xsy, xsx, H, W, i + R + 1, s);
        lane_load_row<N, 0>(ng, m, dzs, i + 1, h);
        lane_wgrad_row<K, N>(win, gz, acc);
        lane_slide(win);
      }
#pragma unroll
      for (int r = 0; r < KK; ++r) part[(s * KK + r) * 32] = acc[r];
      lane_conv_image<K, N, CS>(m, dzs, h, wf);
    }
    bwd_lane_levels<Cfg, l + 1, CS>(m, dz, ys, y2p, sp, p, plane, c, x, role);
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
  const LaneLevels<L, N0, 1> dz(p.lh);  // dZ_l, then dY_l
  // After the dZ images, Y from X: at L = 2 all of Y_2 (ys[2], subbands y2p apart, odd as dZ_1's), at L >= 3
  // the LL of Y_l for 2 <= l < L (ys[l], lh[l] x lane_wmax(l)); ys[L] is then the column's end.
  constexpr bool kY2 = L == 2;
  int ys[L + 3];
  ys[2] = dz.off[L + 1];
  const int y2p = kY2 ? (p.lh[2] * lane_wmax(N0, 2)) | 1 : 0;
#pragma unroll
  for (int l = 2; l < L; ++l) ys[l + 1] = ys[l] + p.lh[l] * lane_wmax(N0, l);
  const int floats = L >= 3 ? ys[L] : dz.off[L + 1] + 4 * y2p;
  const LaneMem<CS> m = Thread::mem(lane_smem, floats);
  const T* __restrict__ x = static_cast<const T*>(p.x) + act_plane(p.x_st, plane, p.C);
  const T* __restrict__ g = static_cast<const T*>(p.g) + act_plane(p.g_st, plane, p.C);
  const long long xsy = p.x_st[2], xsx = p.x_st[3], gsy = p.g_st[2], gsx = p.g_st[3];

  if constexpr (L >= 1) {
    // 1. dZ_1 from G and Y_2 (or its LL) from X, alternate rows per thread; then the deeper levels of both
    //    chains, alternate rows per thread.
    lane_haar_act<N1, CS>(m, dz.off[1], dz.sp[1], p.lh[1], role, SPLIT, g, gsy, gsx, H, W);
    if constexpr (L >= 2) lane_y2_act<N1, CS, kY2 ? 4 : 1>(m, ys[2], y2p, p.lh[2], role, SPLIT, x, xsy, xsx, H, W);
    lane_pair_sync<SPLIT>(pair);
    lane_haar_chain<N0, CS, 2, L, SPLIT>(m, dz.off, dz.sp, p.lh, role, pair);
    lane_haar_chain<N0, CS, 3, L - 1, SPLIT, 1>(m, ys, dz.sp, p.lh, role, pair);
    pdl_wait();  // the fold launched just before, if any (run_list): the levels read its taps
    // 2. Per level and subband: the wgrad partial, then dY_l in place of dZ_l.
    bwd_lane_levels<Cfg, 1, CS>(m, dz.off, ys, y2p, dz.sp, p, plane, c, x, role);
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
