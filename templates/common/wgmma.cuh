// Warpgroup MMA (wgmma; sm_90a only: such kernels compile for the arch-specific target) with A in registers
// and B in shared memory through a descriptor (common/wgmma_layout.h), fp32 accumulators:
// D[64 x N] += A[64 x 16] B[16 x N]. Warp w of the warpgroup holds A rows 16 w .. 16 w + 15 in the fragment
// layout of mma.m16n8k16's A (one ldmatrix x4), and its accumulators as n8 tiles of mma.m16n8k16's C:
// d[4 i + 2 h + e] is row 16 w + g + 8 h, column 8 i + 2 t + e (lane = 4 g + t) (PTX ISA, wgmma .m64nNk16
// register fragments).
// Ordering (PTX ISA, wgmma.fence / commit_group / wait_group): fence() before the first wgmma and after any
// other write of its A or accumulator registers; commit() closes a group of issued wgmmas; wait<N>() returns
// once at most N groups are pending: only then may their registers be touched. Shared memory written by
// ordinary stores becomes visible to wgmma (the async proxy) through fence_proxy_async() before the barrier.
#pragma once
#include "common/dtype.cuh"
#include "common/wgmma_layout.h"

namespace lkjit {
namespace wgmma {

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

// The asm of one m64nNk16 product, for the PTX type TY ("bf16" / "f16"): N / 2 accumulators, 4 A words, the B
// descriptor, and scale-d = 1 (D accumulates).
#define LKJIT_WG_D4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define LKJIT_WGMMA_N8(TY)                                                                                  \
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %9, 0; wgmma.mma_async.sync.aligned.m64n8k16.f32." TY "." TY \
               " {%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1, 0; }"                                           \
               : LKJIT_WG_D4(0)                                                                             \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1))
#define LKJIT_WGMMA_N16(TY)                                                                                   \
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %13, 0; wgmma.mma_async.sync.aligned.m64n16k16.f32." TY "." TY \
               " {%0,%1,%2,%3,%4,%5,%6,%7}, {%8,%9,%10,%11}, %12, p, 1, 1, 0; }"                              \
               : LKJIT_WG_D4(0), LKJIT_WG_D4(4)                                                               \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1))
#define LKJIT_WGMMA_N32(TY)                                                                                      \
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %21, 0; wgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY    \
               " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19}, %20, p, 1, 1, 0; }" \
               : LKJIT_WG_D4(0), LKJIT_WG_D4(4), LKJIT_WG_D4(8), LKJIT_WG_D4(12)                                 \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1))
#define LKJIT_WGMMA_N64(TY)                                                                                            \
  asm volatile("{ .reg .pred p; setp.ne.b32 p, %37, 0; wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY          \
               " {%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%" \
               "27,%28,%29,%30,%31}, {%32,%33,%34,%35}, %36, p, 1, 1, 0; }"                                            \
               : LKJIT_WG_D4(0), LKJIT_WG_D4(4), LKJIT_WG_D4(8), LKJIT_WG_D4(12), LKJIT_WG_D4(16), LKJIT_WG_D4(20),    \
                 LKJIT_WG_D4(24), LKJIT_WG_D4(28)                                                                      \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1))

// D[64 x N] += A B for N in {8, 16, 32, 64}; wider products are issued as several (the same A registers, B
// descriptors N columns apart). d: the thread's N / 2 accumulators.
template <class Op>
struct IsBF16 {
  static constexpr bool value = false;
};
template <>
struct IsBF16<bf16> {
  static constexpr bool value = true;
};
template <class Op, int N>
__device__ __forceinline__ void mma(float* d, const unsigned (&a)[4], unsigned long long b) {
  static_assert(sizeof(Op) == 2, "16-bit operands (bf16, f16)");
  constexpr bool kBF16 = IsBF16<Op>::value;
  if constexpr (N == 8) {
    if constexpr (kBF16)
      LKJIT_WGMMA_N8("bf16");
    else
      LKJIT_WGMMA_N8("f16");
  } else if constexpr (N == 16) {
    if constexpr (kBF16)
      LKJIT_WGMMA_N16("bf16");
    else
      LKJIT_WGMMA_N16("f16");
  } else if constexpr (N == 32) {
    if constexpr (kBF16)
      LKJIT_WGMMA_N32("bf16");
    else
      LKJIT_WGMMA_N32("f16");
  } else {
    static_assert(N == 64, "N: 8, 16, 32 or 64");
    if constexpr (kBF16)
      LKJIT_WGMMA_N64("bf16");
    else
      LKJIT_WGMMA_N64("f16");
  }
}
#undef LKJIT_WGMMA_N8
#undef LKJIT_WGMMA_N16
#undef LKJIT_WGMMA_N32
#undef LKJIT_WGMMA_N64
#undef LKJIT_WG_D4

}  // namespace wgmma
}  // namespace lkjit
