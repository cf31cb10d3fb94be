// Storage types and fp32 conversions for NVRTC, with no toolkit headers: 16-bit types are opaque
// 2-byte structs converted with PTX cvt (sm_80+ for bf16), so every kernel accumulates in fp32.
#pragma once

namespace lkjit {

struct f16 { unsigned short u; };
struct bf16 { unsigned short u; };

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(f16 v) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(v.u));
  return f;
}
__device__ __forceinline__ float to_f32(bf16 v) { return __uint_as_float(((unsigned)v.u) << 16); }

template <class T> __device__ __forceinline__ T from_f32(float f);
template <> __device__ __forceinline__ float from_f32<float>(float f) { return f; }
template <> __device__ __forceinline__ f16 from_f32<f16>(float f) {
  f16 r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r.u) : "f"(f));
  return r;
}
template <> __device__ __forceinline__ bf16 from_f32<bf16>(float f) {
  bf16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r.u) : "f"(f));
  return r;
}

// Read-only global loads through the non-coherent path, widened to fp32.
__device__ __forceinline__ float ldg_f32(const float* p) { return __ldg(p); }
__device__ __forceinline__ float ldg_f32(const f16* p) { return to_f32(f16{__ldg(&p->u)}); }
__device__ __forceinline__ float ldg_f32(const bf16* p) { return to_f32(bf16{__ldg(&p->u)}); }
// Two adjacent elements p[0], p[1] in one load (p aligned to two elements), widened to fp32.
__device__ __forceinline__ float2 ldg_f32x2(const float* p) { return __ldg(reinterpret_cast<const float2*>(p)); }
__device__ __forceinline__ float2 ldg_f32x2(const bf16* p) {
  const unsigned u = __ldg(reinterpret_cast<const unsigned*>(p));
  return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u));
}
__device__ __forceinline__ float2 ldg_f32x2(const f16* p) {
  const unsigned u = __ldg(reinterpret_cast<const unsigned*>(p));
  return make_float2(to_f32(f16{(unsigned short)(u & 0xffffu)}), to_f32(f16{(unsigned short)(u >> 16)}));
}

}  // namespace lkjit
