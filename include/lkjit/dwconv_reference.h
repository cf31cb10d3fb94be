// Float64 CPU reference of the depthwise convolution, nn.Conv2d(C, C, (kh, kw), stride=s, padding=..., dilation=d,
// groups=C, bias=...), forward and every gradient. It is the ground truth of the depthwise kernels' tests.
// Written as the equations read (docs/dwconv.md), one loop nest each, with no shared index helpers:
//
//   Ho = floor((H + pad_top + pad_bottom - d(kh-1) - 1) / s) + 1         (Wo likewise)
//   y[b,c,i,j]   = bias[c] + sum_{u<kh, v<kw} w[c,u,v] x[b, c, i*s + u*d - pad_top, j*s + v*d - pad_left]
//   dx[b,c,h,w]  = sum_{u,v} w[c,u,v] dy[b, c, (h + pad_top - u*d)/s, (w + pad_left - v*d)/s]
//                  (the terms whose divisions are exact and land inside Ho x Wo)
//   dw[c,u,v]    = sum_{b,i,j} dy[b,c,i,j] x[b, c, i*s + u*d - pad_top, j*s + v*d - pad_left]
//   dbias[c]     = sum_{b,i,j} dy[b,c,i,j]
// with x zero outside [0, H) x [0, W) (zero padding). padding='same' (stride 1) is d(k-1) in total per axis,
// floor of half before and the rest after (PyTorch's rule: an even k pads one more at the bottom/right).
//
// Layout: NCHW, contiguous, double. x (B, C, H, W); w (C, 1, kh, kw), nn.Conv2d's weight: w[(c*kh + u)*kw + v];
// bias (C), or empty for none; y and dy (B, C, Ho, Wo); dx like x; dw like w; dbias (C).
// Errors: std::invalid_argument naming the bad value ("dwconv: kh=0 is out of range; supported: kh >= 1").
#pragma once
#include <cstdint>
#include <vector>

namespace lkjit::ref {

struct DWConvShape {
  int64_t B = 1, C = 1, H = 1, W = 1;
  int64_t numel() const { return B * C * H * W; }
};

struct DWConvArgs {
  int kh = 3, kw = 3, stride = 1, dil = 1;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
};

// The args of padding='same' (stride 1).
DWConvArgs dwconv_same(int kh, int kw, int dil);

// Output extents; throws when the padded input is shorter than the dilated filter (no output).
int64_t dwconv_out_h(int64_t H, const DWConvArgs& a);
int64_t dwconv_out_w(int64_t W, const DWConvArgs& a);

std::vector<double> dwconv_forward(const std::vector<double>& x, DWConvShape s, const std::vector<double>& w,
                                   const std::vector<double>& bias, const DWConvArgs& a);
// dy has the output's shape; the result has x's (s).
std::vector<double> dwconv_dgrad(const std::vector<double>& dy, DWConvShape s, const std::vector<double>& w,
                                  const DWConvArgs& a);
// (C, kh, kw)
std::vector<double> dwconv_wgrad(const std::vector<double>& x, DWConvShape s, const std::vector<double>& dy,
                                  const DWConvArgs& a);
// (C)
std::vector<double> dwconv_dbias(const std::vector<double>& dy, DWConvShape s, const DWConvArgs& a);

// nn.Conv2d's initialisation for a depthwise layer (fan_in = kh*kw): kaiming_uniform(a=sqrt(5)) weights,
// i.e. U(-1/sqrt(fan_in), 1/sqrt(fan_in)), and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)); from a seeded generator.
struct DWConvParamsRef {
  std::vector<double> w, bias;
};
DWConvParamsRef dwconv_init(int64_t C, int kh, int kw, bool bias, uint64_t seed);

}  // namespace lkjit::ref
