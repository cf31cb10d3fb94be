// Pieces shared by the WBMM kernels: operand types, accumulator stores, the shared-memory size check.
#pragma once
#include "abi/wbmm_params.h"
#include "common/dtype.cuh"
#include "wbmm/gemm.cuh"
#include "wbmm/gemm_wgmma.cuh"
#include "wbmm/geometry.cuh"
#include "wbmm/operand.cuh"
#include "wbmm/tile_io.cuh"

namespace lkjit {
namespace wbmm {

// X if B, else Y (no standard library under NVRTC).
template <bool B, class X, class Y>
struct Select {
  using type = X;
};
template <class X, class Y>
struct Select<false, X, Y> {
  using type = Y;
};

// The element type products read: the activation's own 16-bit type on the 16-bit MMA, fp32 otherwise.
template <class T, int Prec>
struct OperandOf {
  using type = float;
};
template <>
struct OperandOf<f16, kPrecMma16> {
  using type = f16;
};
template <>
struct OperandOf<bf16, kPrecMma16> {
  using type = bf16;
};

// Two fp32 values as one word of 16-bit T, in one cvt: the first operand goes to the upper half (the
// higher address).
__device__ __forceinline__ unsigned pack2(const bf16*, float a, float b) {
  unsigned w;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(b), "f"(a));
  return w;
}
__device__ __forceinline__ unsigned pack2(const f16*, float a, float b) {
  unsigned w;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(w) : "f"(b), "f"(a));
  return w;
}

// Two adjacent outputs, converted to T, in one 4- or 8-byte store (p is even-aligned).
template <class T>
__device__ __forceinline__ void store_pair(T* p, float a, float b) {
  if constexpr (sizeof(T) == 4) {
    *reinterpret_cast<float2*>(p) = make_float2(a, b);
  } else {
    *reinterpret_cast<unsigned*>(p) = pack2(p, a, b);
  }
}
template <class T>
__device__ __forceinline__ void load_pair(const T* p, float& a, float& b) {
  if constexpr (sizeof(T) == 4) {
    const float2 v = *reinterpret_cast<const float2*>(p);
    a = v.x, b = v.y;
  } else {
    const unsigned w = *reinterpret_cast<const unsigned*>(p);
    a = to_f32(T{(unsigned short)(w & 0xffffu)}), b = to_f32(T{(unsigned short)(w >> 16)});
  }
}

// The host sizes dynamic shared memory from the generator's formula (generator/ops/wbmm_geometry.h); a
// launch that gives less than this template's layout needs stops here instead of corrupting memory.
__device__ __forceinline__ void check_smem(int needed) {
  unsigned have;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(have));
  if (have < (unsigned)needed) __trap();
}

// The block's place in the grid: its chunk of window tiles and its channel group. NCHW order puts chunks
// on grid.x (consecutive blocks walk one channel's windows); NHWC order puts channel groups there, so the
// blocks that run together read the neighbouring channels of the same pixels (whole 32-byte sectors).
template <bool NHWC>
__device__ __forceinline__ int chunk_id() { return NHWC ? blockIdx.y : blockIdx.x; }
template <bool NHWC>
__device__ __forceinline__ int group_id() { return NHWC ? blockIdx.x : blockIdx.y; }

// The block's window tiles: [t0, t0 + count) of ceil(N / WPB), chunk `id` of p.chunk_tiles tiles each.
struct Chunk {
  long long t0;
  int count;
  __device__ __forceinline__ Chunk(const WBMMParams& p, int wpb, int id) {
    const long long tiles = ceil_div_ll((long long)p.B * p.nH * p.nW, wpb);
    t0 = (long long)id * p.chunk_tiles;
    const long long left = tiles - t0;
    count = left <= 0 ? 0 : (int)(left < p.chunk_tiles ? left : p.chunk_tiles);
  }
};

}  // namespace wbmm
}  // namespace lkjit
