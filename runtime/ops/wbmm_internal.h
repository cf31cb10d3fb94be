// Internal to the WBMM op layer (runtime/ops/wbmm_*.cpp).
#pragma once
#include <string>

#include "lkjit/wbmm.h"

namespace lkjit::detail::wbmm {

// SpecError naming every bad size: B, H, W >= 1 and within range, C the layer's, B*C*H*W <= 2^40.
void validate_shape(const WBMMOptions& o, const Shape& sh);
// The load/store order of a call: NHWC when x's channels are adjacent (C > 1), else NCHW.
Layout act_layout(const std::array<int64_t, 4>& x_strides, int64_t C);
// The options as the planner sees a call whose activations are in `act`.
WBMMOptions with_layout(WBMMOptions o, Layout act);

}  // namespace lkjit::detail::wbmm
