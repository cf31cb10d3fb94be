// Pieces shared by the depthwise-convolution kernels: strided activation addressing and vector loads and
// stores of a few adjacent elements, widened to / narrowed from fp32.
#pragma once
#include "abi/dwconv_params.h"
#include "common/dtype.cuh"
#include "dwconv/geometry.cuh"

namespace lkjit {
namespace dwc {

// A compile-time bool as a value, to instantiate a generic lambda twice (fast path and general path).
template <bool V>
struct BoolTag {
  static constexpr bool value = V;
};

// Element offset of (b, c) in a tensor with element strides st, (B, C, H, W) order (DWConvParams::x_st ...).
__device__ __forceinline__ long long plane_off(const long long* st, long long b, long long c) {
  return b * st[0] + c * st[1];
}

__device__ __forceinline__ bool aligned_to(const void* ptr, int bytes) {
  return (reinterpret_cast<unsigned long long>(ptr) & (unsigned long long)(bytes - 1)) == 0;
}

// N adjacent elements p[0..N-1] widened to fp32 in 4-, 8- or 16-byte loads (p aligned to the load, at most
// 16 bytes each): the channel vector of an NHWC thread, a row piece of an NCHW one.
template <int N, class T>
__device__ __forceinline__ void ldg_vec(const T* p, float (&v)[N]) {
  constexpr int kBytes = N * (int)sizeof(T);
  if constexpr (N == 1) {
    v[0] = ldg_f32(p);
  } else if constexpr (kBytes <= 16) {
    ldg_f32xn<N>(p, v);
  } else {
    static_assert(kBytes % 16 == 0, "vector loads are 4, 8, 16 bytes or a multiple of 16");
    constexpr int kPer = 16 / (int)sizeof(T);
#pragma unroll
    for (int i = 0; i < N / kPer; ++i) {
      float h[kPer];
      ldg_f32xn<kPer>(p + i * kPer, h);
#pragma unroll
      for (int j = 0; j < kPer; ++j) v[i * kPer + j] = h[j];
    }
  }
}

// Two fp32 values as one 32-bit word of T (16-bit T), or one value's bits (fp32: one word per value).
__device__ __forceinline__ unsigned pack_word(const float* v, const float*) { return __float_as_uint(v[0]); }
__device__ __forceinline__ unsigned pack_word(const float* v, const f16*) {
  return (unsigned)from_f32<f16>(v[0]).u | ((unsigned)from_f32<f16>(v[1]).u << 16);
}
__device__ __forceinline__ unsigned pack_word(const float* v, const bf16*) {
  return (unsigned)from_f32<bf16>(v[0]).u | ((unsigned)from_f32<bf16>(v[1]).u << 16);
}

// p[0..N-1] = v narrowed to T, in 4-, 8- or 16-byte stores (p aligned to them).
template <int N, class T>
__device__ __forceinline__ void stg_vec(T* p, const float (&v)[N]) {
  constexpr int kBytes = N * (int)sizeof(T), kPer = 4 / (int)sizeof(T);  // elements a word
  if constexpr (N == 1) {
    *p = from_f32<T>(v[0]);
  } else {
    static_assert(kBytes == 4 || kBytes == 8 || kBytes % 16 == 0, "vector stores are 4, 8 or 16 bytes");
    constexpr int kWords = kBytes / 4;
    unsigned w[kWords];
#pragma unroll
    for (int i = 0; i < kWords; ++i) w[i] = pack_word(v + i * kPer, p);
    if constexpr (kWords == 1) {
      *reinterpret_cast<unsigned*>(p) = w[0];
    } else if constexpr (kWords == 2) {
      *reinterpret_cast<uint2*>(p) = uint2{w[0], w[1]};
    } else {
#pragma unroll
      for (int i = 0; i < kWords / 4; ++i)
        reinterpret_cast<uint4*>(p)[i] = uint4{w[4 * i], w[4 * i + 1], w[4 * i + 2], w[4 * i + 3]};
    }
  }
}

// N fp32 values from shared memory at p (16-byte aligned where N is a multiple of 4, 8-byte where N = 2).
template <int N>
__device__ __forceinline__ void lds_vec(const float* p, float (&v)[N]) {
  if constexpr (N % 4 == 0) {
#pragma unroll
    for (int i = 0; i < N / 4; ++i) {
      const float4 q = reinterpret_cast<const float4*>(p)[i];
      v[4 * i] = q.x, v[4 * i + 1] = q.y, v[4 * i + 2] = q.z, v[4 * i + 3] = q.w;
    }
  } else if constexpr (N == 2) {
    const float2 q = *reinterpret_cast<const float2*>(p);
    v[0] = q.x, v[1] = q.y;
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) v[i] = p[i];
  }
}

}  // namespace dwc
}  // namespace lkjit
