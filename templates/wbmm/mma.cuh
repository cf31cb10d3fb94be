// Tensor-core building blocks of the WBMM kernels (sm_80+): mma.sync for TF32 operands and the fp32 -> TF32
// conversions (ldmatrix and the 16-bit mma.sync are common/mma.cuh). Fragment layouts (PTX ISA, "Matrix
// fragments for mma.m16n8k16 / m16n8k8"): lane = 4g + t holds A rows g and g+8, B column g, and the
// accumulators of rows g and g+8 at columns 2t, 2t+1.
//
// mma.sync here; wgmma (sm_90a) in wbmm/gemm_wgmma.cuh for the 16-bit forward / dgrad (engine 2). The
// product is per channel, so each block's B (M_c, at most 256 x 256) serves only its own windows, and the op
// is memory-bound up to 7x7 in bf16: there mma.sync's rate keeps the products below the memory time and its
// smaller tiles win (H200, bf16 64x256x56x56 7x7 forward: 0.128 ms against 0.138 on wgmma). From 14x14 on
// (98 FLOP/B against a ridge near 185) the products approach the memory time and wgmma wins (0.238 against
// 0.271 ms), the default there.
#pragma once
#include "common/mma.cuh"
#include "wbmm/geometry.cuh"

namespace lkjit {
namespace wbmm {

// D += A B, m16n8k8 TF32 (operands: fp32 bit patterns rounded to TF32).
__device__ __forceinline__ void mma_tf32(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
               "{%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// fp32 -> TF32, rounded to nearest (ties away), as an fp32 bit pattern with the low 13 bits clear.
__device__ __forceinline__ unsigned to_tf32(float f) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
  return r;
}

// N fragment words of one operand, converted once after loading and used by every product that shares
// them. TF32: the rounded words. 3xTF32: x = big + small, both TF32; big*big + big*small + small*big
// recovers an fp32 product to within 2^-22 relative (the dropped small*small term).
template <int Prec, int N>
struct Tf32Frag {
  static constexpr bool kSplit = Prec == kPrec3xTF32;
  unsigned big[N], small[kSplit ? N : 1];
  __device__ __forceinline__ void set(const unsigned* raw) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      big[i] = to_tf32(__uint_as_float(raw[i]));
      if constexpr (kSplit) small[i] = to_tf32(__uint_as_float(raw[i]) - __uint_as_float(big[i]));
    }
  }
};

// D += A B for the n8 tile whose B words are b[2*q], b[2*q + 1].
template <int Prec, int NB>
__device__ __forceinline__ void mma_tf32x(float (&d)[4], const Tf32Frag<Prec, 4>& a, const Tf32Frag<Prec, NB>& b, int q) {
  if constexpr (Prec == kPrec3xTF32) {
    mma_tf32(d, a.small, b.big[2 * q], b.big[2 * q + 1]);  // small terms first, the large one last
    mma_tf32(d, a.big, b.small[2 * q], b.small[2 * q + 1]);
  }
  mma_tf32(d, a.big, b.big[2 * q], b.big[2 * q + 1]);
}

}  // namespace wbmm
}  // namespace lkjit
