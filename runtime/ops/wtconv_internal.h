// Internal to the WTConv op layer.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "lkjit/wtconv.h"

namespace lkjit::detail {

// lh[0] = n, lh[l] = ceil(lh[l-1] / 2): padded level sizes.
std::vector<int64_t> level_sizes(int64_t n, int L);
// The allowed range of a layer field (B, C, H, W, k, L, stride) as the errors write it: "[1, 2^24]" for C;
// "" for a name that is none of them. validate_options, validate_shape and the CLI's shape parsing all say it.
std::string field_range(const std::string& field);
// SpecError naming every bad option.
void validate_options(const WTConvOptions& o);
// SpecError naming every bad size (B, H, W >= 1 and within range; C and stride as the layer's).
void validate_shape(const WTConvOptions& o, const Shape& sh);
// The element strides a call runs with: `s` (null: all default) with each all-zero member replaced by
// the dense strides of o.layout for that tensor's shape (out: (B, C, H_out, W_out) in forward, dX's
// (B, C, H, W) in backward; dout: (B, C, H_out, W_out)). Validates the shape, then the strides as
// WTConvStrides documents (dout only in backward). Pure: no CUDA calls. SpecError naming the tensor,
// the dim, the value and the allowed range.
WTConvStrides resolve_strides(const WTConvOptions& o, const Shape& sh, const WTConvStrides* s, bool backward);
// SpecError naming the null pointer a call needs: the activations (dout: backward only), the weights or
// the gradients (base_b only with bias, L level pointers). Pure: the C ABI checks before it touches the
// driver, so a null pointer is a spec error with or without a GPU.
void check_activations(const void* x, const void* dout, const void* out, bool backward);
// One tensor's element strides st for extents n, both in (B, C, H, W) order: >= 1 for dims of size > 1,
// offsets below 2^60, and (written) no two elements at one address. SpecError naming `name`.
void check_strides(const char* name, const std::array<int64_t, 4>& st, const std::array<int64_t, 4>& n, bool written);
void check_weights(const WTConvOptions& o, const WTConvWeights& w);
void check_gradients(const WTConvOptions& o, const WTConvGradients& g);

}  // namespace lkjit::detail
