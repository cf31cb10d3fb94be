// Element strides of activation tensors, shared by every op layer: one addressing rule (element (b, c, y, x)
// of a tensor at b*s[0] + c*s[1] + y*s[2] + x*s[3], in (B, C, H, W) order whatever the memory order) and one
// set of checks and messages.
#pragma once
#include <array>
#include <cstdint>

#include "lkjit/spec.h"

namespace lkjit::rt {

using Dims4 = std::array<int64_t, 4>;  // (B, C, H, W) order

// The dense strides of extents n in `layout` (NCHW or channels_last).
Dims4 dense_strides(Layout layout, const Dims4& n);

// One tensor's element strides st for extents n: >= 1 for dims of size > 1 (>= 0 for size 1), offsets below
// 2^60, and, for a written tensor, no two elements at one address. SpecError "lkjit: error: <op>: <name> ..."
// naming the dim, the value and the allowed range.
void check_strides(const char* op, const char* name, const Dims4& st, const Dims4& n, bool written);

}  // namespace lkjit::rt
