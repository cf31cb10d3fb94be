// Tests of the float64 depthwise-convolution reference (runtime/reference/dwconv_ref.cpp): a hand-computed
// case, the forward against an independent padded-buffer loop, every gradient against central finite
// differences of the forward (random shapes: even and rectangular k, stride 2, dilation, H or W < k, batch 1,
// asymmetric padding), 'same' padding against PyTorch's rule, and argument validation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "lkjit/dwconv_reference.h"

namespace {

using ::testing::HasSubstr;
using lkjit::ref::DWConvArgs;
using lkjit::ref::DWConvShape;
using lkjit::ref::dwconv_dbias;
using lkjit::ref::dwconv_dgrad;
using lkjit::ref::dwconv_forward;
using lkjit::ref::dwconv_out_h;
using lkjit::ref::dwconv_out_w;
using lkjit::ref::dwconv_same;
using lkjit::ref::dwconv_wgrad;

std::vector<double> random_vec(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> U(-1.0, 1.0);
  std::vector<double> v(n);
  for (double& e : v) e = U(rng);
  return v;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

struct Case {
  DWConvShape s;
  DWConvArgs a;
  bool bias;
};

std::string describe(const Case& c) {
  return "B=" + std::to_string(c.s.B) + " C=" + std::to_string(c.s.C) + " H=" + std::to_string(c.s.H) +
         " W=" + std::to_string(c.s.W) + " k=" + std::to_string(c.a.kh) + "x" + std::to_string(c.a.kw) +
         " s=" + std::to_string(c.a.stride) + " d=" + std::to_string(c.a.dil) + " pad=" + std::to_string(c.a.pad_top) +
         "," + std::to_string(c.a.pad_bottom) + "," + std::to_string(c.a.pad_left) + "," +
         std::to_string(c.a.pad_right) + " bias=" + std::to_string(c.bias);
}

DWConvArgs args(int kh, int kw, int s, int d, int pt, int pb, int pl, int pr) {
  DWConvArgs a;
  a.kh = kh, a.kw = kw, a.stride = s, a.dil = d;
  a.pad_top = pt, a.pad_bottom = pb, a.pad_left = pl, a.pad_right = pr;
  return a;
}

// The edge cases first (H or W < k, batch 1, even and rectangular k, stride 2 with every dilation parity,
// padding beyond the filter, asymmetric 'same'), then seeded random ones whose output is not empty.
std::vector<Case> cases() {
  std::vector<Case> v = {
      {{1, 1, 1, 1}, args(1, 1, 1, 1, 0, 0, 0, 0), true},
      {{1, 2, 3, 2}, args(5, 4, 1, 1, 2, 2, 2, 1), true},        // H, W < k
      {{2, 1, 4, 6}, args(3, 3, 2, 1, 1, 1, 1, 1), false},       // stride 2
      {{1, 2, 7, 6}, args(4, 2, 2, 1, 1, 2, 0, 1), true},        // even k, stride 2
      {{1, 1, 9, 8}, args(3, 3, 2, 2, 2, 2, 2, 2), true},        // stride 2, even dilation
      {{1, 2, 11, 9}, args(3, 2, 2, 3, 3, 3, 1, 2), false},      // stride 2, odd dilation
      {{2, 1, 6, 5}, args(2, 3, 1, 2, 1, 1, 2, 2), true},        // dilation, rectangular
      {{1, 1, 5, 5}, args(3, 3, 1, 1, 4, 3, 5, 2), true},        // padding beyond the filter
      {{1, 1, 3, 17}, args(1, 13, 1, 1, 0, 0, 6, 6), true},      // 1 x 13
      {{1, 1, 15, 3}, args(13, 1, 1, 1, 6, 6, 0, 0), false},     // 13 x 1
      {{2, 2, 6, 7}, dwconv_same(4, 6, 1), true},                // 'same', even k: asymmetric
      {{1, 1, 9, 9}, dwconv_same(2, 3, 3), true},                // 'same' with dilation
  };
  std::mt19937_64 rng(20261201);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  while (v.size() < 40) {
    Case c;
    c.s = {pick(1, 2), pick(1, 2), pick(1, 10), pick(1, 10)};
    c.a = args(pick(1, 7), pick(1, 7), pick(1, 2), pick(1, 4), 0, 0, 0, 0);
    const int spanh = c.a.dil * (c.a.kh - 1), spanw = c.a.dil * (c.a.kw - 1);
    c.a.pad_top = pick(0, spanh + 1), c.a.pad_bottom = pick(0, spanh + 1);
    c.a.pad_left = pick(0, spanw + 1), c.a.pad_right = pick(0, spanw + 1);
    c.bias = pick(0, 1);
    if (c.s.H + c.a.pad_top + c.a.pad_bottom - spanh - 1 < 0) continue;
    if (c.s.W + c.a.pad_left + c.a.pad_right - spanw - 1 < 0) continue;
    v.push_back(c);
  }
  return v;
}

// An independent forward: the input copied into a zero-padded buffer first, then every output a plain
// strided, dilated window sum; its own output-extent formula.
std::vector<double> padded_forward(const std::vector<double>& x, DWConvShape s, const std::vector<double>& w,
                                   const std::vector<double>& bias, const DWConvArgs& a) {
  const int64_t Hp = s.H + a.pad_top + a.pad_bottom, Wp = s.W + a.pad_left + a.pad_right;
  int64_t Ho = 0, Wo = 0;
  while (Ho * a.stride + int64_t(a.dil) * (a.kh - 1) < Hp) ++Ho;
  while (Wo * a.stride + int64_t(a.dil) * (a.kw - 1) < Wp) ++Wo;
  std::vector<double> y;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t c = 0; c < s.C; ++c) {
      std::vector<double> xp(static_cast<size_t>(Hp * Wp), 0.0);
      for (int64_t h = 0; h < s.H; ++h)
        for (int64_t q = 0; q < s.W; ++q)
          xp[(h + a.pad_top) * Wp + q + a.pad_left] = x[((b * s.C + c) * s.H + h) * s.W + q];
      for (int64_t i = 0; i < Ho; ++i)
        for (int64_t j = 0; j < Wo; ++j) {
          double acc = 0.0;
          for (int u = 0; u < a.kh; ++u)
            for (int v = 0; v < a.kw; ++v)
              acc += w[(c * a.kh + u) * a.kw + v] * xp[(i * a.stride + u * a.dil) * Wp + j * a.stride + v * a.dil];
          y.push_back(acc + (bias.empty() ? 0.0 : bias[c]));
        }
    }
  return y;
}

TEST(DWConvReferenceHand, TwoByTwoFilterOnThreeByThree) {
  // x = [[1 2 3] [4 5 6] [7 8 9]], w = [[1 -1] [2 0.5]], bias 0.25, stride 1, no padding:
  // y[0,0] = 1 - 2 + 8 + 2.5 + 0.25 = 9.75    y[0,1] = 2 - 3 + 10 + 3 + 0.25 = 12.25
  // y[1,0] = 4 - 5 + 14 + 4 + 0.25 = 17.25    y[1,1] = 5 - 6 + 16 + 4.5 + 0.25 = 19.75
  const DWConvShape s{1, 1, 3, 3};
  const DWConvArgs a = args(2, 2, 1, 1, 0, 0, 0, 0);
  const auto y = dwconv_forward({1, 2, 3, 4, 5, 6, 7, 8, 9}, s, {1, -1, 2, 0.5}, {0.25}, a);
  const std::vector<double> want = {9.75, 12.25, 17.25, 19.75};
  ASSERT_EQ(y.size(), want.size());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], want[i]) << i;
  // Stride 2, padding 1 on all sides, no bias: y[i,j] = sum w[u,v] x[2i+u-1, 2j+v-1], output (2, 2):
  // y[0,0] = 0.5*x[0,0]   y[0,1] = 2*x[0,1] + 0.5*x[0,2]   y[1,0] = -x[1,0] + 0.5*x[2,0]   y[1,1] = all four taps.
  const auto y2 = dwconv_forward({1, 2, 3, 4, 5, 6, 7, 8, 9}, s, {1, -1, 2, 0.5}, {}, args(2, 2, 2, 1, 1, 1, 1, 1));
  const std::vector<double> want2 = {0.5, 4 + 1.5, -4 + 0.5 * 7, 5 - 6 + 2 * 8 + 0.5 * 9};
  ASSERT_EQ(y2.size(), want2.size());
  for (size_t i = 0; i < y2.size(); ++i) EXPECT_EQ(y2[i], want2[i]) << i;
}

TEST(DWConvReference, ForwardMatchesPaddedBufferLoop) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(describe(c));
    const auto x = random_vec(c.s.numel(), 1), w = random_vec(c.s.C * c.a.kh * c.a.kw, 2);
    const auto bias = c.bias ? random_vec(c.s.C, 3) : std::vector<double>{};
    const auto y = dwconv_forward(x, c.s, w, bias, c.a), want = padded_forward(x, c.s, w, bias, c.a);
    ASSERT_EQ(y.size(), want.size());
    ASSERT_EQ(y.size(), static_cast<size_t>(c.s.B * c.s.C * dwconv_out_h(c.s.H, c.a) * dwconv_out_w(c.s.W, c.a)));
    for (size_t i = 0; i < y.size(); ++i) ASSERT_TRUE(std::fabs(y[i] - want[i]) <= 1e-12) << i << ": " << y[i] << " vs " << want[i];
  }
}

// f = <r, forward(x, w, bias)> for a random r; its gradients are dgrad(r), wgrad(x, r) and dbias(r). f is
// linear in each argument, so a central difference is exact but for rounding: every component is checked
// at a tolerance that any missing or misplaced term (|term| ~ 0.1) exceeds by orders of magnitude.
TEST(DWConvReference, GradientsMatchFiniteDifferences) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(describe(c));
    const int64_t Ho = dwconv_out_h(c.s.H, c.a), Wo = dwconv_out_w(c.s.W, c.a);
    auto x = random_vec(c.s.numel(), 11), w = random_vec(c.s.C * c.a.kh * c.a.kw, 12);
    auto bias = random_vec(c.s.C, 13);
    const auto r = random_vec(c.s.B * c.s.C * Ho * Wo, 14);
    auto f = [&] { return dot(r, dwconv_forward(x, c.s, w, bias, c.a)); };
    const double h = 0.25;
    auto check = [&](std::vector<double>& param, const std::vector<double>& grad, const char* name) {
      ASSERT_EQ(grad.size(), param.size()) << name;
      for (size_t i = 0; i < param.size(); ++i) {
        const double keep = param[i];
        param[i] = keep + h;
        const double fp = f();
        param[i] = keep - h;
        const double fm = f();
        param[i] = keep;
        const double fd = (fp - fm) / (2 * h);
        ASSERT_TRUE(std::fabs(fd - grad[i]) <= 1e-10 * (1 + std::fabs(fd))) << name << "[" << i << "]: " << grad[i]
                                                                              << " vs finite difference " << fd;
      }
    };
    check(x, dwconv_dgrad(r, c.s, w, c.a), "dx");
    check(w, dwconv_wgrad(x, c.s, r, c.a), "dw");
    check(bias, dwconv_dbias(r, c.s, c.a), "dbias");
  }
}

// The adjoint identities on layer-sized problems (large k, H or W < k): <dy, A x> = <A^T dy, x> = <dW, w>.
TEST(DWConvReference, AdjointIdentitiesAtLargeK) {
  const Case big[] = {
      {{1, 2, 20, 23}, args(13, 13, 1, 1, 6, 6, 6, 6), false},
      {{2, 1, 9, 40}, args(5, 31, 1, 1, 2, 2, 15, 15), false},
      {{1, 1, 33, 30}, args(27, 7, 2, 1, 13, 13, 3, 3), false},
      {{1, 1, 12, 12}, args(31, 31, 1, 1, 15, 15, 15, 15), false},  // the map is smaller than the filter
  };
  for (const Case& c : big) {
    SCOPED_TRACE(describe(c));
    const auto x = random_vec(c.s.numel(), 21), w = random_vec(c.s.C * c.a.kh * c.a.kw, 22);
    const auto y = dwconv_forward(x, c.s, w, {}, c.a);
    const auto r = random_vec(y.size(), 23);
    const double a = dot(r, y), b = dot(dwconv_dgrad(r, c.s, w, c.a), x), d = dot(dwconv_wgrad(x, c.s, r, c.a), w);
    EXPECT_TRUE(std::fabs(a - b) <= 1e-10 * (1 + std::fabs(a))) << a << " vs " << b;
    EXPECT_TRUE(std::fabs(a - d) <= 1e-10 * (1 + std::fabs(a))) << a << " vs " << d;
  }
}

// PyTorch's rule (torch/nn/modules/conv.py, _ConvNd with padding='same'): total = d*(k-1) per axis,
// left = total // 2, right = total - left; the output keeps the input's size.
TEST(DWConvReference, SamePaddingIsPyTorchsRule) {
  for (int k = 1; k <= 63; ++k)
    for (int d = 1; d <= 4; ++d) {
      const DWConvArgs a = dwconv_same(k, 64 - k, d);
      const int total = d * (k - 1), total_w = d * (64 - k - 1);
      EXPECT_EQ(a.pad_top, total / 2) << k << " " << d;
      EXPECT_EQ(a.pad_bottom, total - total / 2) << k << " " << d;
      EXPECT_EQ(a.pad_left, total_w / 2) << k << " " << d;
      EXPECT_EQ(a.pad_right, total_w - total_w / 2) << k << " " << d;
      EXPECT_EQ(a.stride, 1);
      for (int64_t n : {1, 2, 7, 56})
        EXPECT_EQ(dwconv_out_h(n, a), n) << "k=" << k << " d=" << d << " H=" << n;
    }
  // Even k pads one more after: k=4, d=1 gives 1 before, 2 after.
  const DWConvArgs a = dwconv_same(4, 4, 1);
  EXPECT_EQ(a.pad_top, 1);
  EXPECT_EQ(a.pad_bottom, 2);
}

std::string invalid_argument(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "no std::invalid_argument";
  return "";
}

TEST(DWConvReference, BadParametersNameTheValue) {
  const DWConvShape s{1, 2, 5, 5};
  const auto x = random_vec(s.numel(), 1), w = random_vec(2 * 9, 2);
  const DWConvArgs ok = args(3, 3, 1, 1, 1, 1, 1, 1);
  auto with = [&](auto edit) {
    DWConvArgs a = ok;
    edit(a);
    return a;
  };
  EXPECT_THAT(invalid_argument([&] { dwconv_forward(x, s, w, {}, with([](DWConvArgs& a) { a.kh = 0; })); }),
              HasSubstr("kh=0 is out of range"));
  EXPECT_THAT(invalid_argument([&] { dwconv_forward(x, s, w, {}, with([](DWConvArgs& a) { a.stride = 0; })); }),
              HasSubstr("stride=0"));
  EXPECT_THAT(invalid_argument([&] { dwconv_forward(x, s, w, {}, with([](DWConvArgs& a) { a.dil = -1; })); }),
              HasSubstr("dil=-1"));
  EXPECT_THAT(invalid_argument([&] { dwconv_forward(x, s, w, {}, with([](DWConvArgs& a) { a.pad_left = -2; })); }),
              HasSubstr("pad_left=-2"));
  EXPECT_THAT(invalid_argument([&] { dwconv_forward(x, s, random_vec(17, 3), {}, ok); }),
              HasSubstr("w has 17 elements, expected 18"));
  EXPECT_THAT(invalid_argument([&] { dwconv_forward(x, s, w, {1.0}, ok); }), HasSubstr("bias has 1 elements, expected 2"));
  EXPECT_THAT(invalid_argument([&] { dwconv_forward(random_vec(49, 4), s, w, {}, ok); }),
              HasSubstr("x has 49 elements, expected 50"));
  // A 5-row input, no padding, 7 rows of filter: no output row.
  EXPECT_THAT(invalid_argument([&] { dwconv_forward(x, s, random_vec(2 * 7 * 3, 5), {}, args(7, 3, 1, 1, 0, 0, 1, 1)); }),
              HasSubstr("H=5 with padding 0+0 is shorter than the dilated filter 7"));
  EXPECT_THAT(invalid_argument([&] { dwconv_dgrad(random_vec(3, 6), s, w, ok); }), HasSubstr("dy has 3 elements"));
  EXPECT_THAT(invalid_argument([&] { dwconv_wgrad(x, DWConvShape{1, 0, 5, 5}, {}, ok); }), HasSubstr("C=0"));
}

}  // namespace
