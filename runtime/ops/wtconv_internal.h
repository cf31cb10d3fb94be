// Internal to the WTConv op layer.
#pragma once
#include <cstdint>
#include <vector>

#include "lkjit/wtconv.h"

namespace lkjit::detail {

// lh[0] = n, lh[l] = ceil(lh[l-1] / 2): padded level sizes.
std::vector<int64_t> level_sizes(int64_t n, int L);
// SpecError naming every bad option.
void validate_options(const WTConvOptions& o);
// SpecError naming every bad size (B, H, W >= 1 and within range; C and stride as the layer's).
void validate_shape(const WTConvOptions& o, const Shape& sh);

}  // namespace lkjit::detail
