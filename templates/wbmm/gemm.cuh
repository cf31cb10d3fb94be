// Warp tiles of the WBMM products, from shared memory, fp32 accumulators. Two shapes:
//   NT (forward, dX):  C[m][n] = sum_k A[m][k] B[n][k]  (A: windows x positions, B: M_c rows n, both
//                      k-contiguous): the per-channel window product Y = T M.
//   TN (dM):           C[m][n] = sum_k X[k][m] G[k][n]  (X, G: windows x positions): dM = T^T dY.
// A warp tile is (16 MT) x (8 NT) outputs. The tensor-core paths (kPrecMma16, kPrec3xTF32, kPrecTF32)
// share the mma fragment layout: acc[mi][ni][2h + e] is row 16 mi + g + 8h, column 8 ni + 2t + e
// (lane = 4g + t). The FFMA path keeps 4 MT x NT outputs a lane in its own layout (coord() below).
// Pitches are compile-time (elements), so every shared-memory offset is an immediate.
#pragma once
#include "wbmm/mma.cuh"

namespace lkjit {
namespace wbmm {

// The fp32 accumulators of MT x NT tiles in the m16n8 C layout of mma.sync (and wgmma): acc[mi][ni][2h + e] is
// row MS mi + r0 + g + 8h, column 8 ni + 2t + e (lane = 4g + t; MS: rows per m tile, r0: the warp's first row in
// one). zero() clears them; pairs_from() hands f(row, col, v0, v1) each adjacent pair.
template <int MT, int NT, int MS>
struct MmaAcc {
  float acc[MT][NT][4];

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
#pragma unroll
      for (int ni = 0; ni < NT; ++ni)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mi][ni][e] = 0.f;
  }
  template <class F>
  __device__ __forceinline__ void pairs_from(int lane, int r0, F&& f) {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
#pragma unroll
      for (int ni = 0; ni < NT; ++ni)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          f(MS * mi + r0 + g + 8 * h, 8 * ni + 2 * t, acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
  }
};

// ---- NT ----------------------------------------------------------------------------------------------
template <int Prec, class Op, int MT, int NT, int PA, int PB>
struct WarpTileNT : MmaAcc<MT, NT, 16> {
  static_assert(Prec != kPrecFfma, "the FFMA tile is the specialisation below");
  static constexpr int KS = 32 / (int)sizeof(Op);  // k per step: 16 16-bit or 8 TF32 elements (32 bytes a row)
  static_assert((Prec == kPrecMma16) == (sizeof(Op) == 2), "16-bit operands on the 16-bit MMA, fp32 on TF32");
  using MmaAcc<MT, NT, 16>::acc;
  // f(row, col, v0, v1) with references to the accumulator pair at (row, col), (row, col + 1).
  template <class F>
  __device__ __forceinline__ void pairs(int lane, F&& f) {
    this->pairs_from(lane, 0, f);
  }

  // acc += A B over k in [0, KSTEPS * KS). A: the warp's first row m0, B: its first row n0 (column k = 0).
  template <int KSTEPS>
  __device__ __forceinline__ void run(const Op* A, const Op* B, int lane) {
    constexpr int KH = KS / 2, SZ = (int)sizeof(Op);
    // x4 A: matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15); x4 B: (n 0-7, k lo), (n 0-7, k hi), (n 8-15, k lo), ...
    const unsigned a_addr = smem_addr(A + (lane & 15) * PA + (lane >> 4) * KH);
    const unsigned b_addr = smem_addr(B + (((lane >> 4) << 3) + (lane & 7)) * PB + ((lane >> 3) & 1) * KH);
    const unsigned b2_addr = smem_addr(B + (lane & 7) * PB + ((lane >> 3) & 1) * KH);  // x2: lanes 0-15
#pragma unroll(KSTEPS <= 8 ? KSTEPS : 2)
    for (int ks = 0; ks < KSTEPS; ++ks) {
      unsigned a[MT][4], b[2 * NT];
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) ldsm_x4(a[mi], a_addr + (mi * 16 * PA + ks * KS) * SZ);
#pragma unroll
      for (int nj = 0; nj < NT / 2; ++nj) {
        unsigned r[4];
        ldsm_x4(r, b_addr + (nj * 16 * PB + ks * KS) * SZ);
        b[4 * nj] = r[0], b[4 * nj + 1] = r[1], b[4 * nj + 2] = r[2], b[4 * nj + 3] = r[3];
      }
      if constexpr (NT % 2 == 1) {
        unsigned r[2];
        ldsm_x2(r, b2_addr + ((NT - 1) * 8 * PB + ks * KS) * SZ);
        b[2 * NT - 2] = r[0], b[2 * NT - 1] = r[1];
      }
      if constexpr (Prec == kPrecMma16) {
#pragma unroll
        for (int mi = 0; mi < MT; ++mi)
#pragma unroll
          for (int ni = 0; ni < NT; ++ni) mma16<Op>(acc[mi][ni], a[mi], b[2 * ni], b[2 * ni + 1]);
      } else {
        Tf32Frag<Prec, 2 * NT> bf;
        bf.set(b);
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
          Tf32Frag<Prec, 4> af;
          af.set(a[mi]);
#pragma unroll
          for (int ni = 0; ni < NT; ++ni) mma_tf32x(acc[mi][ni], af, bf, ni);
        }
      }
    }
  }
};

// FFMA: lane (lr, lc) = (lane / 8, lane % 8) owns rows lr + 4r (r < 4 MT) and columns lc + 8q (q < NT);
// per 4 k a lane reads 4 MT + NT float4s (A rows shared by 8 lanes: broadcasts; 8 distinct B rows of a
// pitch = 4 mod 32 words: one wavefront) for 16 MT NT FMAs.
template <int MT, int NT, int PA, int PB>
struct WarpTileNT<kPrecFfma, float, MT, NT, PA, PB> {
  static constexpr int KS = 4;
  float acc[4 * MT][NT];

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int r = 0; r < 4 * MT; ++r)
#pragma unroll
      for (int q = 0; q < NT; ++q) acc[r][q] = 0.f;
  }
  // f(row, col, v) with a reference to each output of the lane.
  template <class F>
  __device__ __forceinline__ void each(int lane, F&& f) {
#pragma unroll
    for (int r = 0; r < 4 * MT; ++r)
#pragma unroll
      for (int q = 0; q < NT; ++q) f((lane >> 3) + 4 * r, (lane & 7) + 8 * q, acc[r][q]);
  }
  template <int KSTEPS>
  __device__ __forceinline__ void run(const float* A, const float* B, int lane) {
    const float* a = A + (lane >> 3) * PA;
    const float* b = B + (lane & 7) * PB;
#pragma unroll(KSTEPS <= 16 ? KSTEPS : 2)
    for (int ks = 0; ks < KSTEPS; ++ks) {
      float4 bv[NT];
#pragma unroll
      for (int q = 0; q < NT; ++q) bv[q] = *reinterpret_cast<const float4*>(b + q * 8 * PB + 4 * ks);
#pragma unroll
      for (int r = 0; r < 4 * MT; ++r) {
        const float4 av = *reinterpret_cast<const float4*>(a + r * 4 * PA + 4 * ks);
#pragma unroll
        for (int q = 0; q < NT; ++q) {
          float s = acc[r][q];
          s = fmaf(av.x, bv[q].x, s);
          s = fmaf(av.y, bv[q].y, s);
          s = fmaf(av.z, bv[q].z, s);
          acc[r][q] = fmaf(av.w, bv[q].w, s);
        }
      }
    }
  }
};

// ---- TN ----------------------------------------------------------------------------------------------
// acc += X^T G over KSTEPS steps of windows: X points at (window 0, m0), G at (window 0, n0).
template <int Prec, class Op, int MT, int NT, int PX, int PG>
struct WarpTileTN : MmaAcc<MT, NT, 16> {
  static_assert(Prec != kPrecFfma, "the FFMA tile is the specialisation below");
  static constexpr int KS = Prec == kPrecMma16 ? 16 : 8;  // windows per step
  using MmaAcc<MT, NT, 16>::acc;
  // f(row, col, v0, v1) with references to the accumulator pair at (row, col), (row, col + 1).
  template <class F>
  __device__ __forceinline__ void pairs(int lane, F&& f) {
    this->pairs_from(lane, 0, f);
  }

  template <int KSTEPS>
  __device__ __forceinline__ void run(const Op* X, const Op* G, int lane) {
    if constexpr (Prec == kPrecMma16) {
      // Rows of the shared tiles are k (windows): ldmatrix .trans yields A = X^T and B fragments. x4 A:
      // (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15), (m 8-15, k 8-15); x4 B: (k lo, n 0-7), (k hi, n 0-7),
      // (k lo, n 8-15), (k hi, n 8-15); x2 B: lanes 0-15 of the same pattern.
      const unsigned a_addr = smem_addr(X + (((lane >> 4) << 3) + (lane & 7)) * PX + ((lane >> 3) & 1) * 8);
      const unsigned b_addr = smem_addr(G + (((lane >> 3) & 1) * 8 + (lane & 7)) * PG + (lane >> 4) * 8);
#pragma unroll(KSTEPS <= 8 ? KSTEPS : 2)
      for (int ks = 0; ks < KSTEPS; ++ks) {
        unsigned a[MT][4], b[2 * NT];
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) ldsm_x4_t(a[mi], a_addr + (ks * 16 * PX + mi * 16) * 2);
#pragma unroll
        for (int nj = 0; nj < NT / 2; ++nj) {
          unsigned r[4];
          ldsm_x4_t(r, b_addr + (ks * 16 * PG + nj * 16) * 2);
          b[4 * nj] = r[0], b[4 * nj + 1] = r[1], b[4 * nj + 2] = r[2], b[4 * nj + 3] = r[3];
        }
        if constexpr (NT % 2 == 1) {
          unsigned r[2];
          ldsm_x2_t(r, b_addr + (ks * 16 * PG + (NT - 1) * 8) * 2);
          b[2 * NT - 2] = r[0], b[2 * NT - 1] = r[1];
        }
#pragma unroll
        for (int mi = 0; mi < MT; ++mi)
#pragma unroll
          for (int ni = 0; ni < NT; ++ni) mma16<Op>(acc[mi][ni], a[mi], b[2 * ni], b[2 * ni + 1]);
      }
    } else {
      // TF32: ldmatrix cannot transpose 32-bit elements, so fragments are read word by word: a0 = X[k=t][m=g],
      // a1 = X[t][g+8], a2 = X[t+4][g], a3 = X[t+4][g+8]; b0 = G[t][n=g], b1 = G[t+4][g].
      const int g = lane >> 2, t = lane & 3;
      const unsigned* x = reinterpret_cast<const unsigned*>(X) + t * PX + g;
      const unsigned* gg = reinterpret_cast<const unsigned*>(G) + t * PG + g;
#pragma unroll(KSTEPS <= 8 ? KSTEPS : 2)
      for (int ks = 0; ks < KSTEPS; ++ks) {
        unsigned braw[2 * NT];
#pragma unroll
        for (int ni = 0; ni < NT; ++ni) {
          braw[2 * ni] = gg[ks * 8 * PG + ni * 8];
          braw[2 * ni + 1] = gg[(ks * 8 + 4) * PG + ni * 8];
        }
        Tf32Frag<Prec, 2 * NT> bf;
        bf.set(braw);
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
          const unsigned araw[4] = {x[ks * 8 * PX + mi * 16], x[ks * 8 * PX + mi * 16 + 8], x[(ks * 8 + 4) * PX + mi * 16],
                                    x[(ks * 8 + 4) * PX + mi * 16 + 8]};
          Tf32Frag<Prec, 4> af;
          af.set(araw);
#pragma unroll
          for (int ni = 0; ni < NT; ++ni) mma_tf32x(acc[mi][ni], af, bf, ni);
        }
      }
    }
  }
};

// FFMA: lane (li, lj) = (lane % 4, lane / 4) owns rows 16r + 4li + e (r < MT, e < 4) and columns lj + 8q
// (q < NT); per window a lane reads MT float4s of X (4 distinct per warp) and NT floats of G (8 consecutive).
template <int MT, int NT, int PX, int PG>
struct WarpTileTN<kPrecFfma, float, MT, NT, PX, PG> {
  static constexpr int KS = 1;
  float acc[MT][4][NT];

  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int r = 0; r < MT; ++r)
#pragma unroll
      for (int e = 0; e < 4; ++e)
#pragma unroll
        for (int q = 0; q < NT; ++q) acc[r][e][q] = 0.f;
  }
  template <class F>
  __device__ __forceinline__ void each(int lane, F&& f) {
#pragma unroll
    for (int r = 0; r < MT; ++r)
#pragma unroll
      for (int e = 0; e < 4; ++e)
#pragma unroll
        for (int q = 0; q < NT; ++q) f(16 * r + 4 * (lane & 3) + e, (lane >> 2) + 8 * q, acc[r][e][q]);
  }
  template <int KSTEPS>
  __device__ __forceinline__ void run(const float* X, const float* G, int lane) {
    const float* x = X + 4 * (lane & 3);
    const float* g = G + (lane >> 2);
#pragma unroll 4
    for (int k = 0; k < KSTEPS; ++k) {
      float gv[NT];
#pragma unroll
      for (int q = 0; q < NT; ++q) gv[q] = g[k * PG + 8 * q];
#pragma unroll
      for (int r = 0; r < MT; ++r) {
        const float4 xv = *reinterpret_cast<const float4*>(x + k * PX + 16 * r);
#pragma unroll
        for (int q = 0; q < NT; ++q) {
          acc[r][0][q] = fmaf(xv.x, gv[q], acc[r][0][q]);
          acc[r][1][q] = fmaf(xv.y, gv[q], acc[r][1][q]);
          acc[r][2][q] = fmaf(xv.z, gv[q], acc[r][2][q]);
          acc[r][3][q] = fmaf(xv.w, gv[q], acc[r][3][q]);
        }
      }
    }
  }
};

}  // namespace wbmm
}  // namespace lkjit
