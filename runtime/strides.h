// Element strides of activation tensors, shared by the op layers: the dense strides of a layout, and the
// checks every layer makes of a call's strides (same rules, same messages, the op's name as the subject).
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "lkjit/spec.h"

namespace lkjit::rt {

using Dims4 = std::array<int64_t, 4>;  // (B, C, H, W) order

// Dense strides of extents n in `layout`: NCHW {C*H*W, H*W, W, 1}, NHWC {H*W*C, 1, W*C, C}.
Dims4 dense_strides(Layout layout, const Dims4& n);

// One tensor's element strides st for extents n: >= 1 for dims of size > 1 (>= 0 for size 1), offsets below
// 2^60, and for a written tensor no two elements at one address (the dims of size > 1, sorted by stride,
// each step past the span of the dims before them: sufficient for no overlap, and true of every dense
// layout). SpecError "lkjit: error: <op>: <name> ..." naming the dim, the value and the allowed range.
void check_strides(const std::string& op, const char* name, const Dims4& st, const Dims4& n, bool written);

}  // namespace lkjit::rt
