// The per-channel operand of the window product, built on chip: M_c never exists in device memory. The
// shared tile holds NB rows n (output positions jn = n0 + n of the block's column part) of KC input
// positions k = k0 .. k0 + KC - 1 (the whole 0..dp-1 unless the product streams M_c in K chunks), row-major
// with pitch PB, or with Core in wgmma's core-matrix layout (K = DP; common/wgmma_layout.h):
//   forward:  B[n][k] = M[c][k][jn]     (Y[j] = sum_i T[i] M[i][j])
//   rotate:   B[n][k] = M[c][jn][k]     (dX[i] = sum_j dY[j] M[i][j]: M_c^T, the M of the rotated table)
// Table mode reads M[c][i][j] = R[c][I[i, j]] (the rotated form as R[c][K-1-I[k, jn]]); dense mode reads M.
// Fold adds the identity shortcut to the diagonal (the centre tap, I[i, i]). Entries past d are zero.
#pragma once
#include "abi/wbmm_params.h"
#include "common/dtype.cuh"
#include "common/wgmma_layout.h"
#include "wbmm/geometry.cuh"

namespace lkjit {
namespace wbmm {

template <class Op, int WH, int WW, int Mode, bool Rotate, bool Fold, int DP, int NB, int PB, bool Core = false, int KC = DP>
__device__ __forceinline__ void build_operand(Op* __restrict__ dst, const WBMMParams& p, int c, bool valid, int n0,
                                              int tid, int nthreads, int k0 = 0) {
  constexpr int D = WH * WW, K = table_size(WH, WW);
  static_assert(!Core || KC == DP, "wgmma's core layout holds the whole K");
  // Dense forward reads M column-wise: walk n fastest so consecutive threads read consecutive floats.
  constexpr bool kNFast = Mode == kModeDense && !Rotate;
  const float* __restrict__ src = Mode == kModeTable ? p.R + (long long)c * K : p.M + (long long)c * D * D;
  // Unrolled 4 where B is built whole, once a block: 4 gathers in flight a thread (H200, bf16 14x14 64x256x56x56:
  // the wgmma forward 0.206 ms against 0.237 without); not unrolled where K-tiled (a chunk of every tile, inside
  // the product loop whose accumulators stay live).
#pragma unroll(KC == DP ? 4 : 1)
  for (int e = tid; e < NB * KC; e += nthreads) {
    const int n = kNFast ? e % NB : e / KC, kl = kNFast ? e / NB : e % KC, k = k0 + kl, jn = n0 + n;
    float v = 0.f;
    if (valid && jn < D && k < D) {
      if constexpr (Mode == kModeTable) {
        const int idx = rel_index(k, jn, WH, WW);
        v = __ldg(src + (Rotate ? rotated_index(idx, WH, WW) : idx));
      } else {
        v = __ldg(src + (Rotate ? jn * D + k : k * D + jn));
      }
      if (Fold && k == jn) v += 1.f;
    }
    dst[Core ? wgmma::core_offset(n, k, DP) : n * PB + kl] = from_f32<Op>(v);
  }
}

}  // namespace wbmm
}  // namespace lkjit
