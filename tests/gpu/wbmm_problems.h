// WBMM problem lists as data (docs/wbmm.md): edge cases first, then the benchmark and network shapes. The
// GPU tests run every correctness problem against the float64 reference (include/lkjit/wbmm_reference.h)
// in each of its precisions and layouts; the benchmarks run the shape lists. Plain data: no runtime
// dependency, so the CPU suite checks the lists against the generator (tests/wbmm_geometry_test.cpp).
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lkjit/spec.h"

namespace lkjit::testing {

// How the products are formed: the dtype of the activations, and for f32 TF32 allowed (tf32) and the
// engine (0: FFMA, 1: tensor cores: 3xTF32, or TF32 with tf32 = 1). 16-bit dtypes run the 16-bit MMA:
// mma.sync (engine 1) or, forward and dgrad on sm_90a, wgmma (engine 2; wgmma_form below).
struct WBMMPrecision {
  DType dtype;
  int tf32, engine;
};
inline const std::vector<WBMMPrecision>& wbmm_precisions() {
  static const std::vector<WBMMPrecision> v = {
      {DType::kBF16, 0, 1}, {DType::kF16, 0, 1}, {DType::kBF16, 0, 2}, {DType::kF16, 0, 2},
      {DType::kF32, 0, 0},  {DType::kF32, 0, 1}, {DType::kF32, 1, 1}};
  return v;
}

// A tile, then the same with half the channels a block, and half again down to one (vec no wider than the
// channels): the forms to try in order where a larger tile may outgrow shared memory.
inline std::vector<Tile> with_fewer_channels(const Tile& t) {
  std::vector<Tile> v = {t};
  for (int cpb = t.get("cpb") / 2; cpb >= 1; cpb /= 2) v.push_back(Tile(t).set("cpb", cpb).set("vec", std::min(t.get("vec"), cpb)));
  return v;
}

// The wgmma (engine 2) forms of a forward / dgrad tile, to try in order: a warpgroup of wm = 4 warps along the
// windows, about the same windows per tile (16 mt wm); then, where the larger tile outgrows shared memory,
// fewer channels a block.
inline std::vector<Tile> wgmma_forms(Tile t) {
  const int windows16 = t.get("wm") * t.get("mt");
  return with_fewer_channels(t.set("engine", 2).set("wm", 4).set("mt", windows16 >= 8 ? windows16 / 4 : 1));
}

struct WBMMProblem {
  int64_t B, C, H, W;
  int wh, ww;
  int mode;      // 0: table R, 1: dense M
  int identity;  // the + T shortcut (0: deploy form)
  int bias;
  int layout;    // 0: NCHW, 1: NHWC (channels_last) activations
};

inline std::string wbmm_problem_name(const WBMMProblem& p, const WBMMPrecision& q) {
  std::string s = std::to_string(p.B) + "x" + std::to_string(p.C) + "x" + std::to_string(p.H) + "x" + std::to_string(p.W) +
                  "_w" + std::to_string(p.wh) + "x" + std::to_string(p.ww) + (p.mode ? "_dense" : "_table") +
                  (p.identity ? "" : "_noid") + (p.bias ? "_bias" : "") + (p.layout ? "_nhwc" : "_nchw") + "_" +
                  to_string(q.dtype);
  if (q.dtype == DType::kF32) s += q.tf32 ? "_tf32" : q.engine ? "_3xtf32" : "_ffma";
  else if (q.engine == 2) s += "_wgmma";
  return s;
}

// Correctness problems, small enough for the float64 reference. Each runs in every precision.
inline std::vector<WBMMProblem> wbmm_problems() {
  return {
      // 1x1 windows (a per-channel affine map), batch 1, C = 1.
      {1, 1, 5, 6, 1, 1, 0, 1, 1, 0},
      {2, 3, 4, 7, 1, 1, 1, 1, 0, 1},
      // 7x7: exact multiples, H and W not multiples (bottom/right padding and crop), a map smaller than a
      // window (H = 3: one padded window a column), odd W (no 4-byte runs: the element path).
      {1, 2, 14, 21, 7, 7, 0, 1, 1, 0},
      {2, 3, 16, 19, 7, 7, 0, 1, 1, 0},
      {2, 5, 15, 14, 7, 7, 1, 1, 1, 1},
      {3, 2, 3, 9, 7, 7, 0, 0, 1, 0},
      {1, 4, 9, 23, 7, 7, 0, 1, 0, 1},
      // Rectangular windows, both orientations; windows wider than tall and a 1 x 16 strip.
      {1, 2, 10, 11, 3, 5, 0, 0, 1, 0},
      {2, 3, 23, 22, 5, 6, 1, 1, 1, 0},
      {1, 2, 17, 9, 6, 2, 0, 1, 0, 1},
      {2, 2, 4, 33, 1, 16, 0, 1, 1, 0},
      // 14x14 and 16x16 (d = 196, 256: M_c tiled along its columns in fp32, dM rows split in the wgrad).
      {1, 2, 28, 28, 14, 14, 0, 1, 1, 0},
      {1, 2, 30, 29, 14, 14, 1, 1, 0, 1},
      {1, 2, 33, 17, 16, 16, 0, 1, 0, 0},
      {1, 2, 20, 16, 16, 16, 1, 1, 1, 1},
      // Channels not a multiple of the block's channels; more windows than one tile; several chunks.
      {2, 7, 28, 35, 7, 7, 0, 1, 1, 1},
      {4, 3, 56, 56, 7, 7, 0, 1, 1, 0},
  };
}

// Benchmark shapes (the PyTorch path's numbers in docs/anchors-h200.md).
// Operator study: C = 256 at 51.4 M elements (64 x 256 x 56 x 56), windows 7 and 14; fp32 (TF32 off and
// on) and bf16.
inline std::vector<WBMMProblem> wbmm_operator_study() {
  return {{64, 256, 56, 56, 7, 7, 0, 1, 0, 0}, {64, 256, 56, 56, 14, 14, 0, 1, 0, 0}};
}
// WBMM-T at 224 x 224, batch 128, 7x7 windows: S1 80 @ 56, S2 160 @ 28, S3 320 @ 14, S4 640 @ 7; in NCHW and
// channels_last (how networks train under bf16 AMP).
inline std::vector<WBMMProblem> wbmm_t_layers() {
  std::vector<WBMMProblem> v;
  for (int layout : {0, 1})
    for (auto [C, HW] : std::vector<std::pair<int64_t, int64_t>>{{80, 56}, {160, 28}, {320, 14}, {640, 7}})
      v.push_back({128, C, HW, HW, 7, 7, 0, 1, 0, layout});
  return v;
}

}  // namespace lkjit::testing
