// Host-side fp16 / bf16 conversions (round to nearest even), for tests, the CLI and benchmarks.
#pragma once
#include <cstdint>
#include <cstring>

namespace lkjit {

inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_to_f32(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);
  } else if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { ++e; man <<= 1; } while (!(man & 0x400u));
      u = sign | uint32_t(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else {
    u = sign | (exp + 112) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;               // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;              // overflow (>= 65520) -> inf
  if (a < 0x38800000u) {                                    // subnormal or zero in fp16
    if (a < 0x33000000u) return sign;                       // < 2^-25 rounds to 0
    const uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
    const int shift = 126 - int(e);                         // 14..24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return sign | static_cast<uint16_t>(r);
  }
  uint32_t r = a - 0x38000000u;                             // rebias 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return sign | static_cast<uint16_t>(r >> 13);
}

}  // namespace lkjit

#include <vector>

#include "lkjit/spec.h"

namespace lkjit {

// Values rounded to dtype t (what a tensor of that dtype holds).
inline float round_to(DType t, float v) {
  if (t == DType::kF16) return f16_to_f32(f32_to_f16(v));
  if (t == DType::kBF16) return bf16_to_f32(f32_to_bf16(v));
  return v;
}

// Device encoding of host floats in dtype t (4 or 2 bytes each).
inline std::vector<uint8_t> encode(DType t, const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * (t == DType::kF32 ? 4 : 2));
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DType::kF32) {
      std::memcpy(out.data() + 4 * i, &v[i], 4);
    } else {
      const uint16_t h = t == DType::kF16 ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

inline float decode_one(DType t, const uint8_t* p, size_t i) {
  if (t == DType::kF32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return t == DType::kF16 ? f16_to_f32(h) : bf16_to_f32(h);
}

}  // namespace lkjit
