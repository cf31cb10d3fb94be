// WTConv forward, lane kernel (lane_common.cuh): Cfg::split = 1 or 2 threads per (b,c) plane, stride 1,
// W <= Cfg::wmax. Two threads of a plane are lanes i and i + 16 of one warp (as in bwd_lane.cuh): they
// share the plane's shared-memory column, split every phase by rows or subbands and sync between phases.
//   1. Haar chain: Y_1 from X (global), Y_l from the LL of Y_{l-1}, into the plane's level images.
//   2. Z_l = conv(Y_l, W~_l) in place, subband by subband (register windows).
//   3. Synthesis coarse to fine: Z_{l-1}[LL] += Synth(Z_l), l = L..2 (the recurrence behind Eq. 7).
//   4. Row by row: out = dw(X, W~0) + b~ + the level-1 synthesis of Z_1 (Eq. 7).
// Shared memory: threads / split planes x sum_l 4 sp[l] floats, sp[l] = lh[l] lane_wmax(l) (rounded up to
// odd with two threads a plane; the host's lane_plane_floats).
#pragma once
#include "wtconv/lane_common.cuh"

namespace lkjit {

// Z_l = conv(Y_l, W~_l) in place for levels l..L; thread `role` of a plane takes subbands role,
// role + split, ...
template <class Cfg, int l, int CS>
__device__ __forceinline__ void fwd_lane_convs(LaneMem<CS> m, const int* off, const int* sp, const WTConvParams& p,
                                               int c, int role) {
  if constexpr (l <= Cfg::L) {
    constexpr int K = Cfg::k, KK = K * K, N = lane_wmax(Cfg::wmax, l);
    const int h = p.lh[l];
#pragma unroll 1
    for (int s = role; s < 4; s += Cfg::split) {
      float w[KK];
      lane_load_taps<Cfg::L, KK>(w, p, c, lane_level_v0(KK, l, s));
      lane_conv_image<K, N, CS>(m, off[l] + s * sp[l], h, w);
    }
    fwd_lane_convs<Cfg, l + 1, CS>(m, off, sp, p, c, role);
  }
}

template <class Cfg>
__device__ __forceinline__ void wtconv_fwd_lane(const WTConvParams& p) {
  using T = typename Cfg::T;
  constexpr int K = Cfg::k, KK = K * K, NT = Cfg::threads, L = Cfg::L, N0 = Cfg::wmax, SPLIT = Cfg::split;
  constexpr int N1 = lane_wmax(N0, 1);
  using Thread = LaneThread<NT, SPLIT>;
  constexpr int CS = Thread::CS;
  extern __shared__ float lane_smem[];
  const auto [role, pair, plane] = Thread();
  if (plane >= (long long)p.B * p.C) return;  // a pair leaves together; no block-wide barriers
  const int c = (int)(plane % p.C), H = p.H, W = p.W;
  const LaneLevels<L, N0, SPLIT == 2 ? L : 0> lv(p.lh);
  const LaneMem<CS> m = Thread::mem(lane_smem, lv.off[L + 1]);
  const T* __restrict__ x = static_cast<const T*>(p.x) + act_plane(p.x_st, plane, p.C);
  const long long xsy = p.x_st[2], xsx = p.x_st[3];

  if constexpr (L >= 1) {
    // 1. Haar chain, alternate rows per thread.
    lane_haar_act<N1, CS>(m, lv.off[1], lv.sp[1], p.lh[1], role, SPLIT, x, xsy, xsx, H, W);
    lane_pair_sync<SPLIT>(pair);
    lane_haar_chain<N0, CS, 2, L, SPLIT>(m, lv.off, lv.sp, p.lh, role, pair);
    pdl_wait();  // the fold launched just before, if any (run_list): the level convs read its taps
    // 2. Level convs, in place.
    fwd_lane_convs<Cfg, 1, CS>(m, lv.off, lv.sp, p, c, role);
    lane_pair_sync<SPLIT>(pair);
    // 3. Synthesis, coarse to fine.
    lane_synth_chain<N0, CS, L, SPLIT>(m, lv.off, lv.sp, p.lh, role, pair);
  }

  // 4. Output rows (all, or the first or second half by role): base conv over a window of X rows, plus the
  //    level-1 synthesis.
  const int yh = (H + 1) / 2, y0 = SPLIT == 1 ? 0 : role * yh, y1 = SPLIT == 1 ? H : (role ? H : yh);
  float wb[KK];
  if constexpr (L == 0) pdl_wait();
  lane_load_taps<L, KK>(wb, p, c, 0);
  const float bias = __ldg(p.wfold + fold_t(p.C, L, KK, KK) + c);
  T* __restrict__ out = static_cast<T*>(p.out) + act_plane(p.out_st, plane, p.C);
  lane_output_rows<K, N0, L, CS>(out, p.out_st[2], p.out_st[3], x, xsy, xsx, H, W, wb, bias, m, lv.off[1],
                                 L >= 1 ? lv.sp[1] : 0, y0, y1);
}

}  // namespace lkjit
