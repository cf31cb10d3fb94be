// Strided device tensors of the depthwise GPU tests: NCHW host values uploaded through element strides (the
// gaps NaN bytes), NaN-poisoned outputs, and downloads back to NCHW host order.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "lkjit/numeric.h"
#include "lkjit/runtime.h"
#include "lkjit/spec.h"

namespace lkjit::testing {

inline size_t extent(const std::vector<int64_t>& st, int64_t B, int64_t C, int64_t H, int64_t W) {
  return size_t((B - 1) * st[0] + (C - 1) * st[1] + (H - 1) * st[2] + (W - 1) * st[3] + 1);
}
// A strided device tensor of dtype t holding the NCHW host values v; the gaps are NaN bytes.
inline DeviceBuffer upload(const std::vector<float>& v, DType t, const std::vector<int64_t>& st, int64_t B, int64_t C, int64_t H,
                    int64_t W) {
  const int eb = dtype_bytes(t);
  std::vector<uint8_t> buf((extent(st, B, C, H, W) * eb + 3) / 4 * 4, 0xff);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          const float f = v[((b * C + c) * H + h) * W + w];
          uint8_t* dst = &buf[(b * st[0] + c * st[1] + h * st[2] + w * st[3]) * eb];
          if (t == DType::kF32) {
            std::memcpy(dst, &f, 4);
          } else {
            const uint16_t h16 = t == DType::kF16 ? f32_to_f16(f) : f32_to_bf16(f);
            std::memcpy(dst, &h16, 2);
          }
        }
  DeviceBuffer d(buf.size());
  d.upload(buf.data(), buf.size());
  return d;
}
inline DeviceBuffer poisoned(size_t bytes) {
  DeviceBuffer d((bytes + 3) / 4 * 4);
  d.fill_u32(0xffffffffu);  // NaN in every dtype
  return d;
}
inline std::vector<float> download(const DeviceBuffer& d, DType t, const std::vector<int64_t>& st, int64_t B, int64_t C, int64_t H,
                            int64_t W) {
  std::vector<uint8_t> buf(d.bytes());
  d.download(buf.data(), buf.size());
  std::vector<float> v(size_t(B * C * H * W));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w)
          v[((b * C + c) * H + h) * W + w] = decode_one(t, buf.data(), b * st[0] + c * st[1] + h * st[2] + w * st[3]);
  return v;
}

}  // namespace lkjit::testing
