// The kernels of the WBMM family (generator/ops/wbmm.cpp; templates/wbmm/) and a spec helper. Spec fields
// (compile-time, in the cache key; ranges in generator/ops/wbmm_geometry.h):
//   wh, ww    window height and width, 1..16
//   mode      0: relative-position table R (C, K); 1: dense M (C, d, d)
//   tf32      f32 inputs: 1 allows TF32 products (10-bit mantissas); 0: fp32-accurate (FFMA or 3xTF32)
//   identity  1: the op's + T shortcut; 0: the deploy form (the identity folded into R or M)
//   bias      forward: + bias[c]; wgrad and reduce: dbias
//   layout    load/store order of the activations: 0 NCHW, 1 NHWC (any strides run either way)
//   fuse_dx   wgrad: 1 also writes dX (one pass over x and dY)
#pragma once
#include "lkjit/spec.h"

namespace lkjit {

inline const Kernel kWBMMFwd{"wbmm_fwd"};        // Y = T M_c (+ T) (+ bias): window partition fused into loads/stores
inline const Kernel kWBMMDgrad{"wbmm_dgrad"};    // dX = dY M_c^T (+ dY): the forward on the 180-degree-rotated table
inline const Kernel kWBMMWgrad{"wbmm_wgrad"};    // partial dR / dM (+ dbias) per block, dX fused (fuse_dx)
inline const Kernel kWBMMReduce{"wbmm_reduce"};  // fixed-order sums of the partials: dR / dM, dbias (deterministic)

// A WBMM spec of `kernel` with the fields it has (wbmm_reduce: wh, ww, mode, bias; dgrad: no bias; only
// wgrad has fuse_dx); the others are dropped. The reduce kernel sums fp32 partials: its dtype is always f32.
inline OpSpec wbmm_spec(const Kernel& kernel, DType dtype, int wh, int ww, int mode = 0, int tf32 = 0, int identity = 1,
                        int bias = 0, int layout = 0, int fuse_dx = 1, int arch = 90) {
  OpSpec s;
  s.kernel = kernel;
  s.dtype = kernel == kWBMMReduce ? DType::kF32 : dtype;
  s.arch = arch;
  s.set("wh", wh).set("ww", ww).set("mode", mode);
  if (kernel != kWBMMReduce) s.set("tf32", tf32).set("identity", identity).set("layout", layout);
  if (kernel != kWBMMDgrad) s.set("bias", bias);
  if (kernel == kWBMMWgrad) s.set("fuse_dx", fuse_dx);
  return s;
}

}  // namespace lkjit
