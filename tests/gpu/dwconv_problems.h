// Depthwise-convolution problems as plain data: edge cases first (H or W < k, batch 1, odd sizes, C that
// leaves partial channel vectors, stride 2 with every dilation parity, dilation, rectangular and even k,
// asymmetric 'same' padding, padding beyond the filter, no bias), then the layers of the networks that use
// the op: ConvNeXt-T's 7x7 (batch 64), RepLKNet-31B's 31/29/27/13, SLaK's 51x5 and 5x51. Each problem runs in
// every dtype and layout (kDWConvDTypes x kDWConvLayouts); the layers are checked on sampled planes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lkjit/spec.h"

namespace lkjit::testing {

struct DWConvProblem {
  int64_t B, C, H, W;
  int kh, kw, stride, dil;
  // Padding before / after each axis; same = true takes PyTorch's 'same' (stride 1) instead.
  bool same;
  int pad_top, pad_bottom, pad_left, pad_right;
  bool bias;
  const char* tag;  // what the case is for (part of the test name)
};

// Layouts of the activations, as (B, C, H, W) element strides of x, y, dy, dx alike.
enum class DWConvLayout { kNCHW, kNHWC, kPadded };  // kPadded: NCHW with a row pitch of W + 3 elements
inline const DWConvLayout kDWConvLayouts[] = {DWConvLayout::kNCHW, DWConvLayout::kNHWC, DWConvLayout::kPadded};
inline const DType kDWConvDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

inline std::vector<int64_t> dwconv_strides(DWConvLayout l, int64_t C, int64_t H, int64_t W) {
  switch (l) {
    case DWConvLayout::kNCHW: return {C * H * W, H * W, W, 1};
    case DWConvLayout::kNHWC: return {H * W * C, 1, W * C, C};
    case DWConvLayout::kPadded: return {C * H * (W + 3), H * (W + 3), W + 3, 1};
  }
  return {};
}
inline const char* to_string(DWConvLayout l) {
  return l == DWConvLayout::kNCHW ? "nchw" : l == DWConvLayout::kNHWC ? "nhwc" : "padded";
}

inline const std::vector<DWConvProblem>& dwconv_problems() {
  static const std::vector<DWConvProblem> v = {
      // ---- edge cases ----
      {1, 1, 1, 1, 1, 1, 1, 1, false, 0, 0, 0, 0, true, "one_pixel"},
      {2, 3, 7, 9, 1, 1, 1, 1, false, 0, 0, 0, 0, true, "k1"},
      {1, 3, 5, 4, 7, 7, 1, 1, true, 0, 0, 0, 0, true, "map_smaller_than_k"},
      {1, 5, 13, 11, 5, 5, 1, 1, true, 0, 0, 0, 0, false, "batch1_odd_nobias"},
      {2, 37, 9, 10, 3, 3, 1, 1, true, 0, 0, 0, 0, true, "c37_partial_vectors"},
      {2, 4, 15, 17, 3, 3, 2, 1, false, 1, 1, 1, 1, true, "stride2"},
      {1, 3, 16, 13, 4, 4, 2, 1, false, 1, 2, 1, 2, true, "stride2_even_k"},
      {1, 2, 19, 21, 3, 3, 2, 2, false, 2, 2, 2, 2, true, "stride2_dil2"},
      {1, 2, 23, 20, 5, 3, 2, 3, false, 6, 3, 3, 2, false, "stride2_dil3_rect"},
      {2, 3, 24, 25, 3, 3, 1, 4, true, 0, 0, 0, 0, true, "dil4"},
      {1, 4, 12, 40, 3, 13, 1, 1, true, 0, 0, 0, 0, true, "rect_3x13"},
      {1, 4, 40, 12, 13, 3, 1, 1, true, 0, 0, 0, 0, true, "rect_13x3"},
      {2, 5, 10, 11, 4, 6, 1, 1, true, 0, 0, 0, 0, true, "even_k_same"},
      {1, 2, 6, 6, 3, 3, 1, 1, false, 4, 4, 4, 4, true, "pad_beyond_filter"},
      {2, 40, 57, 59, 7, 7, 1, 1, true, 0, 0, 0, 0, true, "k7_tile_edges"},
      {1, 3, 40, 37, 31, 31, 1, 1, true, 0, 0, 0, 0, true, "k31"},
      {1, 2, 33, 35, 27, 27, 2, 1, false, 13, 13, 13, 13, true, "k27_stride2"},
      {1, 2, 70, 66, 63, 63, 1, 1, true, 0, 0, 0, 0, true, "k63"},
      {1, 3, 30, 60, 51, 5, 1, 1, true, 0, 0, 0, 0, true, "k51x5_map_shorter"},
      {1, 3, 60, 30, 5, 51, 1, 1, true, 0, 0, 0, 0, true, "k5x51_map_narrower"},
      // ---- ConvNeXt-T, 7x7 depthwise of each stage at a 224x224 input, batch 64 ----
      {64, 96, 56, 56, 7, 7, 1, 1, true, 0, 0, 0, 0, true, "convnext_t_s1"},
      {64, 192, 28, 28, 7, 7, 1, 1, true, 0, 0, 0, 0, true, "convnext_t_s2"},
      {64, 384, 14, 14, 7, 7, 1, 1, true, 0, 0, 0, 0, true, "convnext_t_s3"},
      {64, 768, 7, 7, 7, 7, 1, 1, true, 0, 0, 0, 0, true, "convnext_t_s4"},
      // ---- RepLKNet-31B, batch 64 ----
      {64, 128, 56, 56, 31, 31, 1, 1, true, 0, 0, 0, 0, true, "replknet31b_s1"},
      {64, 256, 28, 28, 29, 29, 1, 1, true, 0, 0, 0, 0, true, "replknet31b_s2"},
      {64, 512, 14, 14, 27, 27, 1, 1, true, 0, 0, 0, 0, true, "replknet31b_s3"},
      {64, 1024, 7, 7, 13, 13, 1, 1, true, 0, 0, 0, 0, true, "replknet31b_s4"},
      // ---- SLaK-T stage 1 (51x51 decomposed into 51x5 and 5x51), batch 64 ----
      {64, 96, 56, 56, 51, 5, 1, 1, true, 0, 0, 0, 0, true, "slak_t_51x5"},
      {64, 96, 56, 56, 5, 51, 1, 1, true, 0, 0, 0, 0, true, "slak_t_5x51"},
  };
  return v;
}

// Layer-sized problems (batch 64) are checked on sampled planes; the rest whole.
inline bool dwconv_is_layer(const DWConvProblem& p) { return p.B * p.C * p.H * p.W > (int64_t(1) << 22); }

inline std::string dwconv_problem_name(const DWConvProblem& p, DType t, DWConvLayout l) {
  return std::string(p.tag) + "_" + std::to_string(p.B) + "x" + std::to_string(p.C) + "x" + std::to_string(p.H) + "x" +
         std::to_string(p.W) + "_k" + std::to_string(p.kh) + "x" + std::to_string(p.kw) + "_s" + std::to_string(p.stride) +
         "_d" + std::to_string(p.dil) + "_" + to_string(t) + "_" + to_string(l);
}

}  // namespace lkjit::testing
