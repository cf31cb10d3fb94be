// The kernels of the WTConv family (generator/ops/wtconv*.cpp; templates/wtconv/), and its spec fields:
// k (odd depthwise kernel size, 1..31), L (wavelet levels, 0..8; level kernels: 0, one binary serves every
// level) and first (level kernels: 1 reads X in the dtype, 0 an fp32 low band; others 1); the plane kernels
// also layout (0 NCHW, 1 channels_last).
#pragma once
#include "lkjit/spec.h"

namespace lkjit {

inline const Kernel kWTConvFold{"wtconv_fold"};              // W~ = s*W, b~ = s0*b (Eq. 8), once per weight update
inline const Kernel kWTConvFwdPlane{"wtconv_fwd_plane"};     // whole (b,c) planes in shared memory: every level + synthesis + base conv
inline const Kernel kWTConvFwdLevel{"wtconv_fwd_level"};     // one level, spatial tiles: Haar analysis + scaled k x k conv -> Z_l
inline const Kernel kWTConvFwdSynth{"wtconv_fwd_synth"};     // closed-form synthesis of all levels (Eq. 7) fused with the base conv
inline const Kernel kWTConvBwdPlane{"wtconv_bwd_plane"};     // whole planes: dX and per-plane partial parameter gradients
inline const Kernel kWTConvBwdLevel{"wtconv_bwd_level"};     // one level, spatial tiles: dZ_l from dR_l, dY_l, wgrad partials
inline const Kernel kWTConvBwdSynth{"wtconv_bwd_synth"};     // closed-form synthesis of dY_l fused with the base dgrad + wgrad partials
inline const Kernel kWTConvReduce{"wtconv_reduce"};          // deterministic reduction of per-block partials + Eq. 9
inline const Kernel kWTConvTranspose{"wtconv_transpose"};    // activation layout copy, NHWC <-> NCHW (wtconv_transpose)
inline const Kernel kWTConvFwdLane{"wtconv_fwd_lane"};       // one or two threads per small (b,c) plane of NHWC activations
inline const Kernel kWTConvBwdLane{"wtconv_bwd_lane"};       // the same for dX and partial gradients (channel-innermost blocks)
inline const Kernel kWTConvReduceLane{"wtconv_reduce_lane"};  // kWTConvReduce for the lane backward's partials

// A WTConv spec: kernel, dtype, k, L, first, arch (every WTConv kernel has the three fields), and for the
// plane kernels the activations' layout (their fourth field: 1 = channels_last, whose tiles on sm_90 may
// stage planes through a thread-block cluster; ignored for the other kernels).
inline OpSpec wtconv_spec(const Kernel& kernel, DType dtype, int k, int L, bool first = true, int arch = 90,
                          Layout act = Layout::kNCHW) {
  OpSpec s;
  s.kernel = kernel;
  s.dtype = dtype;
  s.arch = arch;
  s.set("k", k).set("L", L).set("first", first ? 1 : 0);
  if (kernel == kWTConvFwdPlane || kernel == kWTConvBwdPlane) s.set("layout", act == Layout::kNHWC ? 1 : 0);
  return s;
}

// A WTConv tile by its axes in `lkjit compile --tile`'s positional order; 0 = an axis the kernel does not use.
inline Tile wtconv_tile(int tile_h, int tile_w, int planes, int vy, int threads, int blocks = 0) {
  return Tile::of({{"tile_h", tile_h}, {"tile_w", tile_w}, {"planes", planes}, {"vy", vy}, {"threads", threads},
                   {"blocks", blocks}});
}

}  // namespace lkjit
