// The NT window product of wbmm/gemm.cuh (C[m][n] = sum_k A[m][k] B[n][k], the per-channel Y = T M) on
// Hopper's warpgroup MMA (sm_90a; common/wgmma.cuh): a warpgroup of 4 consecutive warps computes
// (64 MT) x (8 NT) outputs. A (windows x positions) stays in the pitched layout the 16-bit mma.sync path
// reads and reaches the tensor cores as ldmatrix fragments in registers; B (M_c, NB rows n by DP k) is in
// the core-matrix layout of common/wgmma_layout.h, read by the hardware through descriptors.
// Accumulators: acc[mi][ni][2h + e] is row 64 mi + 16 w + g + 8 h, column 8 ni + 2 t + e (warp w of the
// group, lane = 4 g + t): mma.sync's n8 tiles, so the kernels' epilogues (pairs()) are the same.
// Against mma.sync: B is never loaded into registers (a warp of mma.sync re-reads its B fragments from
// shared memory for every m16 tile), and one instruction issues 64 x N x 16 products.
#pragma once
#include "common/mma.cuh"
#include "common/wgmma.cuh"
#include "wbmm/gemm.cuh"

namespace lkjit {
namespace wbmm {

template <class Op, int MT, int NT, int PA, int DP>
struct WarpGroupTileNT : MmaAcc<MT, NT, 64> {
  static constexpr int KS = 16;  // k per wgmma (16-bit operands)
  static_assert(sizeof(Op) == 2, "wgmma here takes 16-bit operands");
  static_assert(DP % KS == 0, "whole k16 steps");
  using MmaAcc<MT, NT, 64>::acc;
  int w;  // warp of the warpgroup: rows 16 w .. 16 w + 15 of each m64 tile

  __device__ __forceinline__ explicit WarpGroupTileNT(int warp) : w(warp & 3) {}

  template <class F>
  __device__ __forceinline__ void pairs(int lane, F&& f) {
    this->pairs_from(lane, 16 * w, f);
  }

  // acc += A B over k in [0, DP). A: the group's first row (pitch PA); B: row n0 of the core-matrix operand
  // (K = DP). All A fragments are loaded first (4 MT DP / 16 registers), then every product is issued in one
  // commit group and waited for: the registers they read are not rewritten while the tensor cores run.
  __device__ __forceinline__ void run(const Op* A, const Op* B, int lane) {
    constexpr int KSTEPS = DP / KS, SZ = (int)sizeof(Op);
    const unsigned a_addr = smem_addr(A + (16 * w + (lane & 15)) * PA + (lane >> 4) * 8);
    unsigned a[KSTEPS][MT][4];
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks)
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) ldsm_x4(a[ks][mi], a_addr + (mi * 64 * PA + ks * KS) * SZ);
    // One descriptor; the products' operands are byte offsets from it (added in 16-byte units to the start
    // address field, which cannot carry: shared addresses stay below 2^18).
    const unsigned long long desc = wgmma::make_desc(smem_addr(B), wgmma::lbo_bytes(), wgmma::sbo_bytes(DP));
    wgmma::fence();
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks)
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) issue<0>(a[ks][mi], desc + ks * 2 * wgmma::kCoreBytes / 16, acc[mi]);
    wgmma::commit();
    wgmma::wait<0>();
  }

 private:
  // The n8 tiles [N0, NT) of one k16 step, in products of up to 64 columns (8 n8 tiles) each.
  template <int N0>
  __device__ __forceinline__ void issue(const unsigned (&a)[4], unsigned long long desc, float (&d)[NT][4]) {
    if constexpr (N0 < NT) {
      constexpr int LEFT = NT - N0, P = LEFT >= 8 ? 8 : LEFT >= 4 ? 4 : LEFT >= 2 ? 2 : 1;
      wgmma::mma<Op, 8 * P>(&d[N0][0], a, desc + N0 * 8 * DP * 2 / 16);  // row group N0 of 8 rows x DP
      issue<N0 + P>(a, desc, d);
    }
  }
};

}  // namespace wbmm
}  // namespace lkjit
