// Lane kernels: one thread per (b,c) plane, for small planes of channels-innermost activations (NHWC).
// Consecutive lanes take consecutive channels, so every global access of a warp is one contiguous run
// (a pixel's 32 channels), every shared-memory access hits 32 distinct banks (a thread's images live in
// its own column: element e at e * threads), and no phase needs a barrier: a thread only reads what it
// wrote. Rows are register windows over compile-time widths (Cfg::wmax >= W; level l: lane_wmax(l)),
// so the k x k convs run as unrolled FMAs on registers with one load per input element. With two threads
// per plane (LaneThread, SPLIT = 2), lanes i and i + 16 share the plane's column (element e at e * 16 in
// their warp's region) and order their phases with lane_pair_sync.
#pragma once
#include "wtconv/common.cuh"

namespace lkjit {

// Columns of level l's images for planes up to wmax wide: ceil(wmax / 2^l), as the level sizes halve.
// Closed form: NVRTC compiled the recursive one as a real call (with a stack frame) where l is a runtime value.
__host__ __device__ constexpr int lane_wmax(int wmax, int l) { return (wmax + (1 << l) - 1) >> l; }

// A plane's column of shared memory: element e at p[e * CS]. CS, the column stride, is the block's
// threads where a thread owns a plane, 16 where two threads of a warp share one (a warp's 16 planes then
// fill its 32 banks when the two threads' elements are an odd distance apart).
template <int CS>
struct LaneMem {
  float* p;
  __device__ __forceinline__ float& operator[](int e) const { return p[e * CS]; }
};

// A thread's place in a lane block of NT threads, SPLIT = 1 or 2 threads per plane: its role (0; or lanes
// i and i + 16 of warp w on the block's plane 16w + i, roles 0 and 1, pair their lane mask), its plane in
// the launch, and the plane's shared-memory column (mem).
template <int NT, int SPLIT>
struct LaneThread {
  static_assert(SPLIT == 1 || (SPLIT == 2 && NT % 32 == 0), "one thread per plane, or two in one warp");
  static constexpr int CS = SPLIT == 1 ? NT : 16;  // LaneMem's column stride
  int role;
  unsigned pair;
  long long plane;
  __device__ LaneThread() {
    const int tid = threadIdx.x, lane = tid & 31;
    role = SPLIT == 1 ? 0 : lane >> 4;
    pair = SPLIT == 1 ? 0u : 0x10001u << (lane & 15);
    plane = (long long)blockIdx.x * (NT / SPLIT) + (SPLIT == 1 ? tid : (tid >> 5) * 16 + (lane & 15));
  }
  // The column of a plane of `floats` elements: the thread's own, or its warp's 16-plane region.
  static __device__ LaneMem<CS> mem(float* smem, int floats) {
    const int tid = threadIdx.x;
    return {SPLIT == 1 ? smem + tid : smem + (tid >> 5) * 16 * floats + (tid & 15)};
  }
};

// Element offsets of a plane's level images: level l (1..L) holds 4 subbands of lh[l] x lane_wmax(l),
// subband s at off[l] + s * sp[l], sp[l] = lh[l] * lane_wmax(l), rounded up to odd for levels l <= kOddUpTo
// (two threads on subbands s and s+1 then hit distinct banks). off[L+1] is the total (the host's
// lane_plane_floats for the forward; the backward's Y images follow, bwd_lane.cuh).
template <int L, int WMAX, int kOddUpTo = 0>
struct LaneLevels {
  int off[L + 2], sp[L + 1];
  __device__ explicit LaneLevels(const int* lh) {
    off[1] = 0;
#pragma unroll
    for (int l = 1; l <= L; ++l) {
      sp[l] = lh[l] * lane_wmax(WMAX, l);
      if (l <= kOddUpTo) sp[l] |= 1;
      off[l + 1] = off[l] + 4 * sp[l];
    }
  }
};

// out[j] += sum_{u,q} w[u*K+q] * win[u][j+q], j < N: one row of a 'same' k x k cross-correlation from K
// window rows of N + K - 1 columns (zero halo columns included).
template <int K, int N>
__device__ __forceinline__ void lane_conv_row(const float (&win)[K][N + K - 1], const float (&w)[K * K],
                                              float (&out)[N]) {
#pragma unroll
  for (int u = 0; u < K; ++u)
#pragma unroll
    for (int q = 0; q < K; ++q)
#pragma unroll
      for (int j = 0; j < N; ++j) out[j] = fmaf(w[u * K + q], win[u][j + q], out[j]);
}

// Copies a prefetched row into a window row's interior (dst[R..R+N-1]).
template <int N, int R, int NW>
__device__ __forceinline__ void lane_put_row(float (&dst)[NW], const float (&src)[N]) {
#pragma unroll
  for (int j = 0; j < N; ++j) dst[R + j] = src[j];
}

// Zeroes a window (its halo columns stay zero: every row put into it writes interiors only).
template <int K, int NW>
__device__ __forceinline__ void lane_zero(float (&win)[K][NW]) {
#pragma unroll
  for (int u = 0; u < K; ++u)
#pragma unroll
    for (int j = 0; j < NW; ++j) win[u][j] = 0.f;
}

// Window rows 0..K-2 slide up by one (the next row is loaded into row K-1).
template <int K, int NW>
__device__ __forceinline__ void lane_slide(float (&win)[K][NW]) {
#pragma unroll
  for (int u = 0; u + 1 < K; ++u)
#pragma unroll
    for (int j = 0; j < NW; ++j) win[u][j] = win[u + 1][j];
}

// Loads row `row` of an h x N image at m[base] into a window row's interior (columns R..R+N-1), zero
// outside [0, h). The address is clamped into the image, so no load leaves it.
template <int N, int R, int NW, int CS>
__device__ __forceinline__ void lane_load_row(float (&dst)[NW], LaneMem<CS> m, int base, int row, int h) {
  const bool in = row >= 0 && row < h;
  const int r = min(max(row, 0), h - 1);
#pragma unroll
  for (int j = 0; j < N; ++j) {
    const float v = m[base + r * N + j];
    dst[R + j] = in ? v : 0.f;
  }
}

// img = corr(img, w) in place ('same', zero padding), for an h x N image at m[base] whose columns past
// the level's width are zero. Output row i is written once rows up to i+R are in the window, and no later
// step reads rows <= i+R from memory, so one image serves as input and output.
template <int K, int N, int CS>
__device__ __forceinline__ void lane_conv_image(LaneMem<CS> m, int base, int h, const float (&w)[K * K]) {
  constexpr int R = K / 2, NW = N + K - 1;
  float win[K][NW];
  lane_zero(win);
#pragma unroll
  for (int u = R; u + 1 < K; ++u) lane_load_row<N, R>(win[u], m, base, u - R, h);
  float nxt[N];  // the next window row, loaded while this output row is computed (row i+R+1 > i: not yet
  lane_load_row<N, 0>(nxt, m, base, R, h);  // overwritten)
#pragma unroll 1
  for (int i = 0; i < h; ++i) {
    lane_put_row<N, R>(win[K - 1], nxt);
    lane_load_row<N, 0>(nxt, m, base, i + R + 1, h);
    float out[N];
#pragma unroll
    for (int j = 0; j < N; ++j) out[j] = 0.f;
    lane_conv_row<K, N>(win, w, out);
#pragma unroll
    for (int j = 0; j < N; ++j) m[base + i * N + j] = out[j];
    lane_slide(win);
  }
}

// Loads one activation row (y, 0..N-1) of a plane into dst[R..R+N-1], zero outside the H x W plane. The
// branches are uniform (every lane has the same y, H, W); a plane as wide as the registers (the default
// tile) takes neither a clamp nor a select per element.
template <int N, int R, int NW, class T>
__device__ __forceinline__ void lane_load_act(float (&dst)[NW], const T* __restrict__ a, long long sy, long long sx,
                                              int y, int H, int W) {
  if (y < 0 || y >= H) {
#pragma unroll
    for (int j = 0; j < N; ++j) dst[R + j] = 0.f;
    return;
  }
  const T* row = a + y * sy;
  if (W >= N) {
#pragma unroll
    for (int j = 0; j < N; ++j) dst[R + j] = ldg_f32(row + j * sx);
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const float v = ldg_f32(row + min(j, W - 1) * sx);  // in the plane, whatever j
      dst[R + j] = j < W ? v : 0.f;
    }
  }
}


// Orders a plane's shared-memory column between the phases of its two threads (SPLIT = 2; pair: their
// lanes). One thread per plane needs no ordering: it reads only what it wrote.
template <int SPLIT>
__device__ __forceinline__ void lane_pair_sync(unsigned pair) {
  if constexpr (SPLIT > 1) __syncwarp(pair);
}

// Haar analysis, level 1, of an H x W activation plane into 4 subbands of lh[1] x N1 (N1 = lane_wmax(1))
// at m[base], subband s at s * pitch: zero padding past H and W (odd
// sizes), and zero columns past w_1. Rows i0, i0 + di, ... below h1 (di = 2: a plane's two threads
// take alternate rows).
template <int N1, int CS, class T>
__device__ __forceinline__ void lane_haar_act(LaneMem<CS> m, int base, int pitch, int h1, int i0, int di,
                                              const T* __restrict__ a, long long sy, long long sx, int H, int W) {
  constexpr int N = 2 * N1;
  float n0[N], n1[N];  // the next row pair, loaded while this one is transformed
  lane_load_act<N, 0>(n0, a, sy, sx, 2 * i0, H, W);
  lane_load_act<N, 0>(n1, a, sy, sx, 2 * i0 + 1, H, W);
#pragma unroll 1
  for (int i = i0; i < h1; i += di) {
    float r0[N], r1[N];
#pragma unroll
    for (int j = 0; j < N; ++j) r0[j] = n0[j], r1[j] = n1[j];
    lane_load_act<N, 0>(n0, a, sy, sx, 2 * (i + di), H, W);
    lane_load_act<N, 0>(n1, a, sy, sx, 2 * (i + di) + 1, H, W);
#pragma unroll
    for (int j = 0; j < N1; ++j) {
      float y[4];
      haar4(r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1], y);
#pragma unroll
      for (int s = 0; s < 4; ++s) m[base + s * pitch + i * N1 + j] = y[s];
    }
  }
}

// Row r of subband s (0..3: LL, LH, HL, HH) of an activation plane's level-1 Haar analysis, N1 columns,
// into dst[R..R+N1-1]: zero outside [0, h1) as the padded plane is (recomputed instead of stored).
template <int N1, int R, int NW, class T>
__device__ __forceinline__ void lane_haar_act_row(float (&dst)[NW], const T* __restrict__ a, long long sy,
                                                  long long sx, int r, int H, int W, int s) {
  constexpr int N = 2 * N1;
  float r0[N], r1[N];
  lane_load_act<N, 0>(r0, a, sy, sx, 2 * r, H, W);
  lane_load_act<N, 0>(r1, a, sy, sx, 2 * r + 1, H, W);
#pragma unroll
  for (int j = 0; j < N1; ++j) dst[R + j] = haar4_band(r0[2 * j], r0[2 * j + 1], r1[2 * j], r1[2 * j + 1], s);
}

// Haar analysis of level l > 1 from the LL subband of level l-1 (hp x NP at m[src], zero past its width)
// into the first NS of the 4 subbands of h x N at m[dst], subband s at s * pitch (h = ceil(hp/2),
// N = ceil(NP/2)). Rows i0, i0 + di, ...
template <int N, int NP, int CS, int NS = 4>
__device__ __forceinline__ void lane_haar_level(LaneMem<CS> m, int src, int hp, int dst, int pitch, int h, int i0 = 0,
                                                int di = 1) {
#pragma unroll 1
  for (int i = i0; i < h; i += di) {
    const bool r1 = 2 * i + 1 < hp;
    const int a = src + 2 * i * NP, b = src + min(2 * i + 1, hp - 1) * NP;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const bool c1 = 2 * j + 1 < NP;
      const float p00 = m[a + 2 * j], p01 = c1 ? m[a + 2 * j + 1] : 0.f;
      const float q10 = m[b + 2 * j], q11 = c1 ? m[b + 2 * j + 1] : 0.f;
      float y[4];
      haar4(p00, p01, r1 ? q10 : 0.f, r1 ? q11 : 0.f, y);
#pragma unroll
      for (int s = 0; s < NS; ++s) m[dst + s * pitch + i * N + j] = y[s];
    }
  }
}

// Levels l..L of a Haar chain: level l from the LL subband (subband 0) of the image at off[l-1], its
// first NS subbands sp[l] apart (NS = 1: the LL alone). Level indices are template arguments (recursion;
// NVRTC takes no generic lambdas), as register rows need them. With SPLIT = 2 threads on one chain,
// thread `role` takes alternate rows and the pair syncs after each level.
template <int N0, int CS, int l, int L, int SPLIT = 1, int NS = 4>
__device__ __forceinline__ void lane_haar_chain(LaneMem<CS> m, const int* off, const int* sp, const int* lh,
                                                int role = 0, unsigned pair = 0) {
  if constexpr (l <= L) {
    lane_haar_level<lane_wmax(N0, l), lane_wmax(N0, l - 1), CS, NS>(m, off[l - 1], lh[l - 1], off[l], sp[l], lh[l],
                                                                     role, SPLIT);
    lane_pair_sync<SPLIT>(pair);
    lane_haar_chain<N0, CS, l + 1, L, SPLIT, NS>(m, off, sp, lh, role, pair);
  }
}

// Synthesis of level l into the LL subband of level l-1 (the recurrence behind Eq. 7): the 4 subbands
// of h x N at m[src], pitch apart, add 0.5 (LL +- LH +- HL +- HH) into the 2x2 blocks of the hf x NF
// image at m[dst]; rows past hf and columns past NF are cropped (odd sizes), garbage past a level's
// width only ever lands past the next level's width. Rows i0, i0 + di, ... (disjoint 2x2 blocks).
template <int N, int NF, int CS>
__device__ __forceinline__ void lane_synth_level(LaneMem<CS> m, int src, int pitch, int h, int dst, int hf, int i0,
                                                 int di) {
#pragma unroll 1
  for (int i = i0; i < h; i += di) {
    const bool r1 = 2 * i + 1 < hf;
#pragma unroll
    for (int j = 0; j < N; ++j) {
      const int a = src + i * N + j;
      const float ll = m[a], lh = m[a + pitch], hl = m[a + 2 * pitch], hh = m[a + 3 * pitch];
      const int f = dst + 2 * i * NF + 2 * j;
      m[f] += 0.5f * (ll + lh + hl + hh);
      if (2 * j + 1 < NF) m[f + 1] += 0.5f * (ll + lh - hl - hh);
      if (r1) {
        m[f + NF] += 0.5f * (ll - lh + hl - hh);
        if (2 * j + 1 < NF) m[f + NF + 1] += 0.5f * (ll - lh - hl + hh);
      }
    }
  }
}

// Synthesis coarse to fine, levels l = L..2 of the images at off[] (lane_synth_level each); with SPLIT = 2
// threads per plane, thread `role` takes alternate rows and the pair syncs after each level.
template <int N0, int CS, int l, int SPLIT = 1>
__device__ __forceinline__ void lane_synth_chain(LaneMem<CS> m, const int* off, const int* sp, const int* lh,
                                                 int role = 0, unsigned pair = 0) {
  if constexpr (l >= 2) {
    lane_synth_level<lane_wmax(N0, l), lane_wmax(N0, l - 1), CS>(m, off[l], sp[l], lh[l], off[l - 1], lh[l - 1], role,
                                                                  SPLIT);
    lane_pair_sync<SPLIT>(pair);
    lane_synth_chain<N0, CS, l - 1, SPLIT>(m, off, sp, lh, role, pair);
  }
}

// acc[x] += the level-1 synthesis at full-resolution row y (Eq. 7, l = 1): 0.5 (LL + sy LH + sx HL + sy sx HH)
// of the 4 subbands (N1 columns at m[z], pitch apart) at (y/2, x/2), sy and sx the signs of y's and x's
// parities.
template <int N0, int N1, int CS>
__device__ __forceinline__ void lane_add_synth1(float (&acc)[N0], LaneMem<CS> m, int z, int pitch, int y) {
  const int r = z + (y >> 1) * N1;
  const float sy = (y & 1) ? -0.5f : 0.5f;
#pragma unroll
  for (int jc = 0; jc < N1; ++jc) {
    const float ll = m[r + jc], lh = m[r + pitch + jc], hl = m[r + 2 * pitch + jc], hh = m[r + 3 * pitch + jc];
    const float a = fmaf(0.5f, ll, sy * lh), b = fmaf(0.5f, hl, sy * hh);  // x even: a + b, odd: a - b
    if (2 * jc < N0) acc[2 * jc] += a + b;
    if (2 * jc + 1 < N0) acc[2 * jc + 1] += a - b;
  }
}

// Full-resolution rows y0 <= y < y1 of a pass's output o (strides osy, osx): init + corr(a, w) over a
// window of the activation a's rows (the next row loaded while this one is summed), plus, for L >= 1, the
// level-1 synthesis of the 4 subbands at m[z1] (pitch1 apart; lane_add_synth1). The forward's out (a = X,
// init b~) and the backward's dX (a = G, flipped taps, init 0).
template <int K, int N0, int L, int CS, class T>
__device__ __forceinline__ void lane_output_rows(T* __restrict__ o, long long osy, long long osx, const T* __restrict__ a,
                                                 long long sy, long long sx, int H, int W, const float (&w)[K * K],
                                                 float init, LaneMem<CS> m, int z1, int pitch1, int y0, int y1) {
  constexpr int R = K / 2, NW = N0 + K - 1;
  float win[K][NW];
  lane_zero(win);
#pragma unroll
  for (int u = 0; u + 1 < K; ++u) lane_load_act<N0, R>(win[u], a, sy, sx, y0 - R + u, H, W);
  float nxt[N0];
  lane_load_act<N0, 0>(nxt, a, sy, sx, y0 + R, H, W);
#pragma unroll 1
  for (int y = y0; y < y1; ++y) {
    lane_put_row<N0, R>(win[K - 1], nxt);
    lane_load_act<N0, 0>(nxt, a, sy, sx, y + R + 1, H, W);
    float acc[N0];
#pragma unroll
    for (int j = 0; j < N0; ++j) acc[j] = init;
    lane_conv_row<K, N0>(win, w, acc);
    if constexpr (L >= 1) lane_add_synth1<N0, lane_wmax(N0, 1), CS>(acc, m, z1, pitch1, y);
    T* oy = o + (long long)y * osy;
#pragma unroll
    for (int j = 0; j < N0; ++j)
      if (j < W) oy[(long long)j * osx] = from_f32<T>(acc[j]);
    lane_slide(win);
  }
}

// Channel c's taps v0 .. v0+KK-1 from the value-major folded copy (fold_t: a warp reads 32 consecutive
// floats per tap), optionally flipped (w[KK-1-r]: the transposed conv). v0: 0 for W~0, kk + 1 +
// ((l-1)*4 + s)*kk for subband s of W~_l.
template <int L, int KK, bool kFlip = false>
__device__ __forceinline__ void lane_load_taps(float (&w)[KK], const WTConvParams& p, int c, int v0) {
  const float* __restrict__ src = p.wfold + fold_t(p.C, L, KK, v0) + c;
#pragma unroll
  for (int r = 0; r < KK; ++r) w[kFlip ? KK - 1 - r : r] = __ldg(src + (long long)r * p.C);
}
__host__ __device__ constexpr int lane_level_v0(int KK, int l, int s) { return KK + 1 + ((l - 1) * 4 + s) * KK; }

}  // namespace lkjit
