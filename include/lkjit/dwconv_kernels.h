// The depthwise-convolution family's kernels (generator/ops/dwconv.cpp; docs/dwconv.md), by name. A training
// step runs fwd_*; dgrad_*; wgrad_* then wgrad_reduce. direct: NCHW-friendly (a (b, c) plane a block, filter
// and input rows streamed through shared memory); nhwc: channels_last (lanes x cvec channels a block, vector
// loads along C); mma: tensor cores (mma.sync) for 16-bit activations at stride 1 and dilation 1 (forward and
// dgrad: each filter row a Toeplitz matrix product; wgrad: dy rows against x rows), NCHW-friendly like direct. Every kernel reads and writes through element strides,
// so each runs either layout.
#pragma once
#include "lkjit/spec.h"

namespace lkjit {

inline const Kernel kDWConvFwdDirect{"dwconv_fwd_direct"};
inline const Kernel kDWConvDgradDirect{"dwconv_dgrad_direct"};
inline const Kernel kDWConvFwdNhwc{"dwconv_fwd_nhwc"};
inline const Kernel kDWConvDgradNhwc{"dwconv_dgrad_nhwc"};
inline const Kernel kDWConvFwdMma{"dwconv_fwd_mma"};
inline const Kernel kDWConvDgradMma{"dwconv_dgrad_mma"};
inline const Kernel kDWConvWgradDirect{"dwconv_wgrad_direct"};
inline const Kernel kDWConvWgradNhwc{"dwconv_wgrad_nhwc"};
inline const Kernel kDWConvWgradMma{"dwconv_wgrad_mma"};
inline const Kernel kDWConvWgradReduce{"dwconv_wgrad_reduce"};

}  // namespace lkjit
