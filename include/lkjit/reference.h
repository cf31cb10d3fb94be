// Float64 CPU reference of WTConv (Finder et al., ECCV 2024, Algorithm 1), written to follow the
// reference PyTorch module literally: level by level, zero-pad odd sizes, Haar, depthwise conv,
// synthesis, crop. It is the ground truth for every kernel test and for `lkjit run`.
//
// Layout: NCHW, contiguous, double. Parameters use the reference module's shapes:
//   base_w  (C,1,k,k)   base_b (C) or empty   base_s (C) elements, the module's (1,C,1,1) flattened
//   level_w[l] (4C,1,k,k)   level_s[l] (4C), the module's (1,4C,1,1)   for l = 0..L-1 (paper's level l+1);
//   channel 4c+s of a level tensor is subband s (LL, LH, HL, HH) of channel c.
// Output shape: (B, C, ceil(H/stride), ceil(W/stride)).
#pragma once
#include <cstdint>
#include <vector>

namespace lkjit::ref {

struct WTConvParams {
  int C = 0, k = 5, L = 1;
  std::vector<double> base_w;                // C*k*k
  std::vector<double> base_b;                // C, or empty for no bias
  std::vector<double> base_s;                // C
  std::vector<std::vector<double>> level_w;  // L x (4C*k*k)
  std::vector<std::vector<double>> level_s;  // L x (4C)
};

struct WTConvGrads {
  std::vector<double> dx;                     // B*C*H*W
  std::vector<double> base_w, base_b, base_s; // shapes as the parameters (base_b empty without bias)
  std::vector<std::vector<double>> level_w, level_s;
};

struct Shape4 {
  int64_t B = 1, C = 1, H = 1, W = 1;
  int64_t numel() const { return B * C * H * W; }
};

// Literal Algorithm 1. Throws std::invalid_argument on inconsistent sizes.
std::vector<double> wtconv_forward(const std::vector<double>& x, Shape4 s, const WTConvParams& p,
                                   int stride = 1);

// Closed-form synthesis (I/O-aware reformulation, Eq. 7) with the base conv: an independent
// formulation used to cross-check the literal one.
std::vector<double> wtconv_forward_closed_form(const std::vector<double>& x, Shape4 s,
                                               const WTConvParams& p, int stride = 1);

// Literal backward (reverse-mode of Algorithm 1). g has the output's shape.
WTConvGrads wtconv_backward(const std::vector<double>& x, Shape4 s, const WTConvParams& p,
                            const std::vector<double>& g, int stride = 1);

// Parameters initialised as the reference module does (kaiming_uniform(a=sqrt(5)) weights,
// U(-1/k,1/k) bias, base scale 1, level scales 0.1), from a seeded generator.
WTConvParams init_params(int C, int k, int L, bool bias, uint64_t seed);

}  // namespace lkjit::ref
