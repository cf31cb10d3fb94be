// Host stand-in for templates/common/dtype.cuh under the block emulator (same names and meaning): 16-bit
// storage types and their fp32 conversions (round to nearest even, as cvt.rn on the GPU), loads widened to fp32.
#pragma once
#include <cstring>

#include "lkjit/numeric.h"

namespace lkjit {

struct f16 {
  unsigned short u;
};
struct bf16 {
  unsigned short u;
};

inline float to_f32(float v) { return v; }
inline float to_f32(f16 v) { return f16_to_f32(v.u); }
inline float to_f32(bf16 v) { return bf16_to_f32(v.u); }

template <class T>
inline T from_f32(float f);
template <>
inline float from_f32<float>(float f) {
  return f;
}
template <>
inline f16 from_f32<f16>(float f) {
  return f16{f32_to_f16(f)};
}
template <>
inline bf16 from_f32<bf16>(float f) {
  return bf16{f32_to_bf16(f)};
}

inline float ldg_f32(const float* p) { return *p; }
inline float ldg_f32(const f16* p) { return to_f32(*p); }
inline float ldg_f32(const bf16* p) { return to_f32(*p); }

// E adjacent elements in one 4-, 8- or 16-byte load on the GPU (p aligned to it); here element by element,
// with the alignment the GPU needs checked.
template <int E, class T>
inline void ldg_f32xn(const T* p, float (&v)[E]) {
  static_assert(E * sizeof(T) == 4 || E * sizeof(T) == 8 || E * sizeof(T) == 16, "4, 8 or 16 bytes a load");
  if (reinterpret_cast<unsigned long long>(p) % (E * sizeof(T)) != 0) __builtin_trap();  // misaligned vector load
  for (int i = 0; i < E; ++i) v[i] = to_f32(p[i]);
}

}  // namespace lkjit
