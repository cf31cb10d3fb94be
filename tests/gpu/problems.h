// WTConv problem lists as data: edge cases first, then real layer shapes.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/spec.h"
#include "lkjit/wtconv.h"
#include "lkjit/wtconv_kernels.h"

namespace lkjit::testing {

struct Problem {
  int64_t B, C, H, W;
  int k, L, stride;
  bool bias;
};

inline std::vector<Problem> wtconv_problems() {
  return {
      // Maps smaller than 2^L, 1x1 and 3x5 maps, odd sizes, B = 1, C = 1.
      {1, 1, 1, 1, 5, 3, 1, true},
      {1, 1, 3, 5, 5, 2, 1, true},
      {1, 1, 2, 7, 3, 3, 1, false},
      {2, 3, 7, 9, 5, 3, 1, true},
      {1, 2, 5, 16, 7, 5, 1, true},
      {3, 2, 13, 6, 5, 4, 1, true},
      // k = 1 and the largest k; L = 0 (plain scaled depthwise) and L = 8.
      {2, 3, 9, 11, 1, 2, 1, true},
      {1, 2, 40, 37, 31, 2, 1, true},
      {2, 2, 12, 12, 9, 0, 1, true},
      {1, 2, 40, 40, 3, 8, 1, true},
      // Stride > 1 (subsampling after full-resolution compute).
      {2, 3, 17, 15, 5, 3, 2, true},
      {1, 2, 20, 23, 5, 2, 3, false},
      // Large C, tile edges, real layer shapes at small batch.
      {1, 300, 9, 9, 5, 2, 1, true},
      {2, 4, 33, 47, 5, 4, 1, true},
      {1, 3, 56, 56, 5, 5, 1, true},
      {2, 5, 28, 28, 5, 4, 1, true},
      {2, 6, 7, 7, 5, 2, 1, true},
      {1, 2, 130, 257, 5, 3, 1, true},
      {1, 2, 128, 128, 7, 3, 1, true},
  };
}

// The strided-activation suites' shapes (tests/gpu/wtconv_strides_test.cpp): odd sizes, stride 2, a single
// column (W = 1: NHWC's W stride is on a dim of size 1), C = 1 (NHWC and NCHW nearly coincide), a plane larger
// than the tiles, WTConvNeXt-like planes, and W = 16 (16-byte loads for every dtype in NCHW and kPadded8;
// W = 28 takes 8 bytes in 16-bit types).
inline std::vector<Problem> strided_problems() {
  return {
      {2, 3, 7, 9, 5, 3, 1, true},
      {2, 3, 17, 15, 5, 3, 2, true},
      {3, 5, 10, 1, 5, 2, 1, true},
      {2, 1, 9, 11, 3, 2, 1, false},
      {1, 4, 28, 28, 5, 4, 1, true},
      {1, 2, 131, 67, 5, 3, 2, true},
      {2, 3, 12, 16, 5, 3, 1, true},
  };
}

// A test's seed, for its failure messages: SCOPED_TRACE(seed_note(seed)) (what the seed feeds is the test's).
inline std::string seed_note(uint64_t seed) { return "seed " + std::to_string(seed); }

inline std::string problem_name(const Problem& p, DType t, WTConvPath path) {
  std::string s = std::to_string(p.B) + "x" + std::to_string(p.C) + "x" + std::to_string(p.H) + "x" +
                  std::to_string(p.W) + "_k" + std::to_string(p.k) + "_L" + std::to_string(p.L) + "_s" +
                  std::to_string(p.stride) + (p.bias ? "" : "_nobias") + "_" + to_string(t);
  s += path == WTConvPath::kPlane   ? "_plane"
       : path == WTConvPath::kTiled ? "_tiled"
       : path == WTConvPath::kLane  ? "_lane"
                                    : "_auto";
  return s;
}

// Why the plane-resident path cannot run the problem (its planes do not fit), or nullopt; the plan
// says so without launching.
inline std::optional<std::string> plane_path_unavailable(const Problem& p, DType t, bool backward) {
  try {
    WTConv probe({p.C, p.k, p.L, t, p.bias, p.stride, 0});
    probe.set_path(WTConvPath::kPlane);
    probe.plan(p.B, p.H, p.W, backward);
  } catch (const SpecError& e) {
    return e.what();
  }
  return std::nullopt;
}

// The problems of `problems` x every dtype whose planes do not fit the plane path on `limits`, forward
// ("<problem_name>_fwd") and backward ("_bwd"): the ones the plane suites skip, naming why.
inline std::set<std::string> plane_skips(const std::vector<Problem>& problems, const DeviceLimits& limits) {
  std::set<std::string> out;
  for (const Problem& p : problems)
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16})
      for (bool backward : {false, true}) try {
          wtconv_plan({p.C, p.k, p.L, t, p.bias, p.stride, 0}, Shape{p.B, p.C, p.H, p.W, p.stride}, limits, backward,
                      WTConvPath::kPlane);
        } catch (const SpecError&) {
          out.insert(problem_name(p, t, WTConvPath::kPlane) + (backward ? "_bwd" : "_fwd"));
        }
  return out;
}

// Every dtype and pass of `problems`, named as plane_skips names them.
inline std::set<std::string> every_dtype_and_pass(const std::vector<Problem>& problems) {
  std::set<std::string> out;
  for (const Problem& p : problems)
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16})
      for (const char* pass : {"_fwd", "_bwd"}) out.insert(problem_name(p, t, WTConvPath::kPlane) + pass);
  return out;
}

// What plane_skips must find on an H200 (and sm_90's limits): the suites assert it (GpuProblemLists on the CPU,
// WTConvPlaneSkips on the device), so a problem list whose skips grow (a shape edit, a planner change) fails
// instead of passing on fewer problems. Planes too large for shared memory: k = 31's 40x37 (its halo), 130x257
// and 128x128 (k = 7) at L = 3; of the strided list, 131x67.
inline std::set<std::string> expected_plane_skips() {
  return every_dtype_and_pass({{1, 2, 40, 37, 31, 2, 1, true}, {1, 2, 130, 257, 5, 3, 1, true}, {1, 2, 128, 128, 7, 3, 1, true}});
}
inline std::set<std::string> expected_strided_plane_skips() {
  return every_dtype_and_pass({{1, 2, 131, 67, 5, 3, 2, true}});
}

// The tile tests' problems (odd extents, 3 levels, 16 planes; k=1 at stride 2: no halo, the strided output
// loop) and the tiles of a plane kernel's space that fit one on an sm_`arch` device with `limits`.
inline constexpr Problem kTileProblem{2, 8, 29, 31, 5, 3, 1, true};
inline constexpr Problem kTileProblemStrided{2, 4, 9, 11, 1, 2, 2, true};
inline std::vector<Tile> plane_tiles(Kernel kernel, const Problem& p, DType t, int arch, const DeviceLimits& limits) {
  const Shape sh{p.B, p.C, p.H, p.W, p.stride};
  return enumerate(wtconv_spec(kernel, t, p.k, p.L, true, arch), limits, &sh);
}

// The tiled path's tile sweeps (tests/gpu/wtconv_tiled_tiles_test.cpp): one kernel's plan entries (levels; 0
// for the synthesis kernels, which share one spec) pinned to each tile of its space in turn, f32. The
// backward's levels 1 and 2 both read X: one spec.
struct TiledSweep {
  std::string name;
  Problem pb;
  bool backward;
  Kernel kernel;
  std::vector<int> levels;
  uint64_t seed;
};
inline std::vector<TiledSweep> tiled_sweeps() {
  return {{"ForwardLevel1", kTileProblem, false, kWTConvFwdLevel, {1}, 61},
          {"ForwardDeeperLevels", kTileProblem, false, kWTConvFwdLevel, {2, 3}, 62},
          {"ForwardSynthesis", kTileProblem, false, kWTConvFwdSynth, {0}, 63},
          {"ForwardSynthesisStrided", kTileProblemStrided, false, kWTConvFwdSynth, {0}, 64},
          {"BackwardLevels1And2", kTileProblem, true, kWTConvBwdLevel, {1, 2}, 65},
          {"BackwardDeeperLevel", kTileProblem, true, kWTConvBwdLevel, {3}, 66},
          {"BackwardSynthesis", kTileProblem, true, kWTConvBwdSynth, {0}, 67},
          {"BackwardSynthesisStrided", kTileProblemStrided, true, kWTConvBwdSynth, {0}, 68}};
}
// The plan entries a sweep pins, on `limits`.
inline std::vector<PlannedKernel> sweep_entries(const TiledSweep& s, const DeviceLimits& limits) {
  const Problem& p = s.pb;
  std::vector<PlannedKernel> out;
  for (const auto& pk : wtconv_plan({p.C, p.k, p.L, DType::kF32, p.bias, p.stride, 0}, Shape{p.B, p.C, p.H, p.W, p.stride},
                                    limits, s.backward, WTConvPath::kTiled))
    for (int l : s.levels)
      if (pk.spec.kernel == s.kernel && pk.level == l) out.push_back(pk);
  return out;
}
// 4 tile_h x 3 tile_w x 4 vy x 3 threads: every point of a tiled kernel's space is valid for the sweeps' maps.
inline constexpr int kTiledSpace = 144;

// Every problem x dtype x path: the parameter list of the forward and backward suites.
using ProblemParam = std::tuple<Problem, DType, WTConvPath>;
inline std::vector<ProblemParam> problem_params() {
  std::vector<ProblemParam> v;
  for (const auto& p : wtconv_problems())
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16})
      for (WTConvPath path : {WTConvPath::kPlane, WTConvPath::kTiled}) v.emplace_back(p, t, path);
  return v;
}
inline std::string problem_param_name(const ::testing::TestParamInfo<ProblemParam>& i) {
  return problem_name(std::get<0>(i.param), std::get<1>(i.param), std::get<2>(i.param));
}

}  // namespace lkjit::testing
