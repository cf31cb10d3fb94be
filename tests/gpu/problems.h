// WTConv problem lists as data: edge cases first, then real layer shapes.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/spec.h"
#include "lkjit/wtconv.h"

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

inline std::string problem_name(const Problem& p, DType t, WTConvPath path) {
  std::string s = std::to_string(p.B) + "x" + std::to_string(p.C) + "x" + std::to_string(p.H) + "x" +
                  std::to_string(p.W) + "_k" + std::to_string(p.k) + "_L" + std::to_string(p.L) + "_s" +
                  std::to_string(p.stride) + (p.bias ? "" : "_nobias") + "_" + to_string(t);
  s += path == WTConvPath::kPlane ? "_plane" : path == WTConvPath::kTiled ? "_tiled" : "_auto";
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

// The tile tests' problems (odd extents, 3 levels, 16 planes; k=1 at stride 2: no halo, the strided output
// loop) and the tiles of a plane kernel's space that fit one on an sm_`arch` device with `limits`.
inline constexpr Problem kTileProblem{2, 8, 29, 31, 5, 3, 1, true};
inline constexpr Problem kTileProblemStrided{2, 4, 9, 11, 1, 2, 2, true};
inline std::vector<Tile> plane_tiles(Kernel kernel, const Problem& p, DType t, int arch, const DeviceLimits& limits) {
  const Shape sh{p.B, p.C, p.H, p.W, p.stride};
  return enumerate(wtconv_spec(kernel, t, p.k, p.L, true, arch), limits, &sh);
}

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
