// Kernel arguments of the scale family (lkjit/scale.h): y = a[c] * x per element, any element strides.
// One plain struct shared by host C++ and NVRTC; the size is asserted on both sides.
#pragma once

namespace lkjit {

struct ScaleParams {
  const void* x;       // (B, C, H, W), dtype Cfg::T, element (b, c, i, j) at x + b*x_st[0] + c*x_st[1] + ...
  void* y;             // (B, C, H, W), dtype Cfg::T; does not overlap itself (the host checked)
  const float* a;      // (C) fp32 per-channel scale
  long long x_st[4];   // element strides, (B, C, H, W) order
  long long y_st[4];
  long long B, C, H, W;
};
static_assert(sizeof(ScaleParams) == 3 * 8 + 8 * 8 + 4 * 8, "ScaleParams layout changed: update both sides");

}  // namespace lkjit
