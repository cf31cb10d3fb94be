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
// E adjacent elements p[0..E-1] in one 4-, 8- or 16-byte load (p aligned to it), widened to fp32: a
// dense plane row in a quarter to an eighth of the loads and address math of one element at a time.
__device__ __forceinline__ void widen_word(unsigned u, const float*, float* v) { v[0] = __uint_as_float(u); }
__device__ __forceinline__ void widen_word(unsigned u, const bf16*, float* v) {
  v[0] = __uint_as_float(u << 16), v[1] = __uint_as_float(u & 0xffff0000u);
}
__device__ __forceinline__ void widen_word(unsigned u, const f16*, float* v) {
  v[0] = to_f32(f16{(unsigned short)(u & 0xffffu)}), v[1] = to_f32(f16{(unsigned short)(u >> 16)});
}
template <int E, class T>
__device__ __forceinline__ void ldg_f32xn(const T* p, float (&v)[E]) {
  constexpr int kWords = E * (int)sizeof(T) / 4, kPer = 4 / (int)sizeof(T);  // 32-bit words; elements a word
  static_assert(kWords == 1 || kWords == 2 || kWords == 4, "4, 8 or 16 bytes a load");
  unsigned w[kWords];
  if constexpr (kWords == 4) {
    const uint4 q = __ldg(reinterpret_cast<const uint4*>(p));
    w[0] = q.x, w[1] = q.y, w[2] = q.z, w[3] = q.w;
  } else if constexpr (kWords == 2) {
    const uint2 q = __ldg(reinterpret_cast<const uint2*>(p));
    w[0] = q.x, w[1] = q.y;
  } else {
    w[0] = __ldg(reinterpret_cast<const unsigned*>(p));
  }
#pragma unroll
  for (int i = 0; i < kWords; ++i) widen_word(w[i], p, v + i * kPer);
}

}  // namespace lkjit
