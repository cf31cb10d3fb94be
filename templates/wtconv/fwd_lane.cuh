// WTConv forward, lane kernel (lane_common.cuh): one thread per (b,c) plane, stride 1, W <= Cfg::wmax.
//   1. Haar chain: Y_1 from X (global), Y_l from the LL of Y_{l-1}, into the thread's level images.
//   2. Z_l = conv(Y_l, W~_l) in place, subband by subband (register windows).
//   3. Synthesis coarse to fine: Z_{l-1}[LL] += Synth(Z_l), l = L..2 (the recurrence behind Eq. 7).
//   4. Row by row: out = dw(X, W~0) + b~ + the level-1 synthesis of Z_1 (Eq. 7).
// Shared memory: threads x sum_l 4 lh[l] lane_wmax(l) floats (the host's lane_plane_floats).
#pragma once
#include "wtconv/lane_common.cuh"

namespace lkjit {

// Z_l = conv(Y_l, W~_l) in place for levels l..L, subband by subband.
template <class Cfg, int l>
__device__ __forceinline__ void fwd_lane_convs(LaneMem<Cfg::threads> m, const int* off, const int* sp,
                                               const WTConvParams& p, int c) {
  if constexpr (l <= Cfg::L) {
    constexpr int K = Cfg::k, KK = K * K, N = lane_wmax(Cfg::wmax, l);
    const int h = p.lh[l];
#pragma unroll 1
    for (int s = 0; s < 4; ++s) {
      float w[KK];
      lane_load_taps<Cfg::L, KK>(w, p, c, lane_level_v0(KK, l, s));
      lane_conv_image<K, N, Cfg::threads>(m, off[l] + s * sp[l], h, w);
    }
    fwd_lane_convs<Cfg, l + 1>(m, off, sp, p, c);
  }
}

template <class Cfg>
__device__ __forceinline__ void wtconv_fwd_lane(const WTConvParams& p) {
  using T = typename Cfg::T;
  constexpr int K = Cfg::k, KK = K * K, NT = Cfg::threads, L = Cfg::L, N0 = Cfg::wmax;
  constexpr int N1 = lane_wmax(N0, 1);
  extern __shared__ float lane_smem[];
  const long long plane = (long long)blockIdx.x * NT + threadIdx.x;
  if (plane >= (long long)p.B * p.C) return;  // no barriers: threads are independent
  const int c = (int)(plane % p.C), H = p.H, W = p.W;
  const LaneMem<NT> m{lane_smem + threadIdx.x};
  const LaneLevels<L, N0> lv(p.lh);
  const T* __restrict__ x = static_cast<const T*>(p.x) + act_plane(p.x_st, plane, p.C);
  const long long xsy = p.x_st[2], xsx = p.x_st[3];

  if constexpr (L >= 1) {
    // 1. Haar chain.
    lane_haar_act<N1, NT>(m, lv.off[1], lv.sp[1], p.lh[1], 0, 1, x, xsy, xsx, H, W);
    lane_haar_chain<N0, NT, 2, L>(m, lv.off, lv.sp, p.lh);
    // 2. Level convs, in place.
    fwd_lane_convs<Cfg, 1>(m, lv.off, lv.sp, p, c);
    // 3. Synthesis, coarse to fine.
    lane_synth_chain<N0, NT, L>(m, lv.off, lv.sp, p.lh);
  }

  // 4. Output rows: base conv over a window of X rows, plus the level-1 synthesis.
  float wb[KK];
  lane_load_taps<L, KK>(wb, p, c, 0);
  const float bias = __ldg(p.wfold + fold_t(p.C, L, KK, KK) + c);
  T* __restrict__ out = static_cast<T*>(p.out) + act_plane(p.out_st, plane, p.C);
  lane_output_rows<K, N0, L, NT>(out, p.out_st[2], p.out_st[3], x, xsy, xsx, H, W, wb, bias, m, lv.off[1], lv.sp[1], 0, H);
}

}  // namespace lkjit
