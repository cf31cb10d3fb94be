// Tests of the float64 WTConv reference (runtime/reference/wtconv_ref.cpp): hand-computed cases,
// literal vs closed-form forward, backward vs finite differences, argument validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "lkjit/reference.h"

namespace {

using lkjit::ref::init_params;
using lkjit::ref::Shape4;
using lkjit::ref::WTConvGrads;
using lkjit::ref::WTConvParams;
using lkjit::ref::wtconv_backward;
using lkjit::ref::wtconv_forward;
using lkjit::ref::wtconv_forward_closed_form;

std::vector<double> random_vec(size_t n, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> U(lo, hi);
  std::vector<double> v(n);
  for (double& e : v) e = U(rng);
  return v;
}

// Initialised parameters with the scales randomised too: the defaults (1 and 0.1, all equal)
// would hide a missing or misplaced scale.
WTConvParams random_params(int C, int k, int L, bool bias, uint64_t seed) {
  WTConvParams p = init_params(C, k, L, bias, seed);
  p.base_s = random_vec(p.base_s.size(), seed + 1, 0.5, 1.5);
  for (int l = 0; l < L; ++l) p.level_s[l] = random_vec(p.level_s[l].size(), seed + 2 + l);
  return p;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t out_numel(Shape4 s, int stride) {
  return s.B * s.C * ceil_div(s.H, stride) * ceil_div(s.W, stride);
}

double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (double e : v) m = std::max(m, std::fabs(e));
  return m;
}

std::string describe(Shape4 s, int k, int L, int stride, bool bias) {
  return "B=" + std::to_string(s.B) + " C=" + std::to_string(s.C) + " H=" + std::to_string(s.H) +
         " W=" + std::to_string(s.W) + " k=" + std::to_string(k) + " L=" + std::to_string(L) +
         " stride=" + std::to_string(stride) + " bias=" + std::to_string(bias);
}

// ---------------------------------------------------------------------------------------------
// Hand-computed cases

TEST(ReferenceHand, L0K1IsScaledAffine) {
  // L=0, k=1: out = s0 * (w * x + b), per channel.
  const Shape4 s{1, 2, 2, 3};
  WTConvParams p;
  p.C = 2;
  p.k = 1;
  p.L = 0;
  p.base_w = {0.5, -2.0};
  p.base_b = {0.25, 1.0};
  p.base_s = {2.0, -0.5};
  const std::vector<double> x = {1, 2, 3, 4, 5, 6,  // channel 0
                                 -1, 0, 1, 2, 3, 4};
  const std::vector<double> expected = {
      2 * (0.5 * 1 + 0.25), 2 * (0.5 * 2 + 0.25), 2 * (0.5 * 3 + 0.25),
      2 * (0.5 * 4 + 0.25), 2 * (0.5 * 5 + 0.25), 2 * (0.5 * 6 + 0.25),
      -0.5 * (-2 * -1 + 1), -0.5 * (-2 * 0 + 1), -0.5 * (-2 * 1 + 1),
      -0.5 * (-2 * 2 + 1),  -0.5 * (-2 * 3 + 1), -0.5 * (-2 * 4 + 1)};
  const auto out = wtconv_forward(x, s, p);
  ASSERT_EQ(out.size(), expected.size());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], expected[i], 1e-15) << i;

  // Stride 2 keeps rows {0} and cols {0, 2}: output (1, 2, 1, 2).
  const auto out2 = wtconv_forward(x, s, p, 2);
  const std::vector<double> expected2 = {expected[0], expected[2], expected[6], expected[8]};
  ASSERT_EQ(out2.size(), expected2.size());
  for (size_t i = 0; i < out2.size(); ++i) EXPECT_NEAR(out2[i], expected2[i], 1e-15) << i;
}

TEST(ReferenceHand, TwoByTwoL1K1) {
  // x = [[1, 2], [4, 8]]; base w0 = 0.5, b = 0.25, s0 = 2 -> base = 2*(0.5x + 0.25) = x + 0.5.
  // Haar: LL = (1+2+4+8)/2 = 7.5, LH = (1+2-4-8)/2 = -4.5, HL = (1-2+4-8)/2 = -2.5,
  //       HH = (1-2-4+8)/2 = 1.5.
  // Level weights (k=1) w = [1, 2, -1, 3], scales s = [0.1, 0.2, 0.3, 0.4]:
  //   Z = s*w*Y = [0.75, -1.8, 0.75, 1.8].
  // Synthesis x[p,q] = (LL + (-1)^p LH + (-1)^q HL + (-1)^(p+q) HH) / 2:
  //   R[0,0] = (0.75 - 1.8 + 0.75 + 1.8)/2 = 0.75    R[0,1] = (0.75 - 1.8 - 0.75 - 1.8)/2 = -1.8
  //   R[1,0] = (0.75 + 1.8 + 0.75 - 1.8)/2 = 0.75    R[1,1] = (0.75 + 1.8 - 0.75 + 1.8)/2 = 1.8
  // out = base + R = [1.5 + 0.75, 2.5 - 1.8, 4.5 + 0.75, 8.5 + 1.8] = [2.25, 0.7, 5.25, 10.3].
  const Shape4 s{1, 1, 2, 2};
  WTConvParams p;
  p.C = 1;
  p.k = 1;
  p.L = 1;
  p.base_w = {0.5};
  p.base_b = {0.25};
  p.base_s = {2.0};
  p.level_w = {{1.0, 2.0, -1.0, 3.0}};
  p.level_s = {{0.1, 0.2, 0.3, 0.4}};
  const std::vector<double> x = {1, 2, 4, 8};
  const std::vector<double> expected = {2.25, 0.7, 5.25, 10.3};
  for (const auto& out : {wtconv_forward(x, s, p), wtconv_forward_closed_form(x, s, p)}) {
    ASSERT_EQ(out.size(), 4u);
    for (size_t i = 0; i < 4; ++i) EXPECT_NEAR(out[i], expected[i], 1e-14) << i;
  }
}

TEST(ReferenceHand, OneByOneL1PadsThenCrops) {
  // x = [[4]] padded to [[4, 0], [0, 0]]: all four subbands are 4/2 = 2.
  // Z = s*w*2 with w = [1, 2, -1, 3], s = [0.1, 0.2, 0.3, 0.4]: [0.2, 0.8, -0.6, 2.4].
  // R[0,0] = (0.2 + 0.8 - 0.6 + 2.4)/2 = 1.4; base = 1*(0.5*4 + 0) = 2 (no bias); out = 3.4.
  const Shape4 s{1, 1, 1, 1};
  WTConvParams p;
  p.C = 1;
  p.k = 1;
  p.L = 1;
  p.base_w = {0.5};
  p.base_s = {1.0};
  p.level_w = {{1.0, 2.0, -1.0, 3.0}};
  p.level_s = {{0.1, 0.2, 0.3, 0.4}};
  const auto out = wtconv_forward({4.0}, s, p);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NEAR(out[0], 3.4, 1e-14);
}

TEST(ReferenceHand, K3L0MatchesExplicitLoops) {
  const Shape4 s{2, 2, 4, 5};
  const int k = 3;
  const WTConvParams p = random_params(2, k, 0, true, 11);
  const auto x = random_vec(s.numel(), 12);
  std::vector<double> expected(x.size());
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t c = 0; c < s.C; ++c)
      for (int64_t h = 0; h < s.H; ++h)
        for (int64_t w = 0; w < s.W; ++w) {
          double acc = p.base_b[c];
          for (int u = 0; u < k; ++u)
            for (int v = 0; v < k; ++v) {
              const int64_t y = h + u - 1, xx = w + v - 1;  // R = 1, zero outside
              if (y < 0 || y >= s.H || xx < 0 || xx >= s.W) continue;
              acc += p.base_w[(c * k + u) * k + v] * x[((b * s.C + c) * s.H + y) * s.W + xx];
            }
          expected[((b * s.C + c) * s.H + h) * s.W + w] = p.base_s[c] * acc;
        }
  const auto out = wtconv_forward(x, s, p);
  ASSERT_EQ(out.size(), expected.size());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], expected[i], 1e-14) << i;

  // Stride 2 on 4x5 keeps rows {0, 2}, cols {0, 2, 4}.
  const auto out2 = wtconv_forward(x, s, p, 2);
  ASSERT_EQ(out2.size(), static_cast<size_t>(2 * 2 * 2 * 3));
  size_t i = 0;
  for (int64_t bc = 0; bc < s.B * s.C; ++bc)
    for (int64_t h = 0; h < s.H; h += 2)
      for (int64_t w = 0; w < s.W; w += 2, ++i)
        EXPECT_NEAR(out2[i], expected[(bc * s.H + h) * s.W + w], 1e-14) << i;
}

TEST(ReferenceHand, DeepLowBandIsBlockMean) {
  // Only level 2's LL path is on (k=1, weight 1, scale 1), base off: R_1 = 2^-2 * X_2 broadcast,
  // and X_2 = 2^-2 * (sum over the zero-extended 4x4 block), so out = block sum / 16.
  const Shape4 s{1, 1, 6, 7};
  WTConvParams p = init_params(1, 1, 2, false, 3);
  p.base_w = {0.0};
  p.level_w = {{0, 0, 0, 0}, {1, 0, 0, 0}};
  p.level_s = {{1, 1, 1, 1}, {1, 1, 1, 1}};
  const auto x = random_vec(s.numel(), 4);
  const auto out = wtconv_forward(x, s, p);
  ASSERT_EQ(out.size(), x.size());
  for (int64_t h = 0; h < s.H; ++h)
    for (int64_t w = 0; w < s.W; ++w) {
      double sum = 0.0;
      for (int64_t y = h / 4 * 4; y < std::min<int64_t>(h / 4 * 4 + 4, s.H); ++y)
        for (int64_t xx = w / 4 * 4; xx < std::min<int64_t>(w / 4 * 4 + 4, s.W); ++xx)
          sum += x[y * s.W + xx];
      EXPECT_NEAR(out[h * s.W + w], sum / 16.0, 1e-14) << h << "," << w;
    }
}

TEST(ReferenceHand, OutputShapeFollowsStride) {
  const WTConvParams p = init_params(2, 3, 2, true, 5);
  const Shape4 s{3, 2, 7, 8};
  const auto x = random_vec(s.numel(), 6);
  for (int stride : {1, 2, 3, 4, 9}) {
    EXPECT_EQ(wtconv_forward(x, s, p, stride).size(), static_cast<size_t>(out_numel(s, stride)));
    EXPECT_EQ(wtconv_forward_closed_form(x, s, p, stride).size(),
              static_cast<size_t>(out_numel(s, stride)));
  }
}

TEST(ReferenceInit, DeterministicWithReferenceBoundsAndScales) {
  const int C = 3, k = 5, L = 2;
  const WTConvParams a = init_params(C, k, L, true, 42), b = init_params(C, k, L, true, 42);
  const WTConvParams c = init_params(C, k, L, true, 43);
  EXPECT_EQ(a.base_w, b.base_w);
  EXPECT_EQ(a.level_w, b.level_w);
  EXPECT_NE(a.base_w, c.base_w);
  ASSERT_EQ(a.base_w.size(), static_cast<size_t>(C * k * k));
  ASSERT_EQ(a.base_b.size(), static_cast<size_t>(C));
  ASSERT_EQ(a.level_w.size(), static_cast<size_t>(L));
  const double bound = 1.0 / k;
  auto in_bounds = [&](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [&](double e) { return std::fabs(e) <= bound; });
  };
  EXPECT_TRUE(in_bounds(a.base_w));
  EXPECT_TRUE(in_bounds(a.base_b));
  // Not all crammed near zero: the sample spans most of the range.
  EXPECT_GT(max_abs(a.base_w), 0.8 * bound);
  for (int l = 0; l < L; ++l) {
    ASSERT_EQ(a.level_w[l].size(), static_cast<size_t>(4 * C * k * k));
    EXPECT_TRUE(in_bounds(a.level_w[l]));
    EXPECT_EQ(a.level_s[l], std::vector<double>(4 * C, 0.1));
  }
  EXPECT_EQ(a.base_s, std::vector<double>(C, 1.0));
  EXPECT_TRUE(init_params(C, k, L, false, 42).base_b.empty());
}

// ---------------------------------------------------------------------------------------------
// Literal vs closed form

TEST(ReferenceClosedForm, MatchesLiteral) {
  const std::vector<Shape4> shapes = {{1, 1, 1, 1}, {1, 1, 3, 5},  {1, 1, 2, 7},
                                      {2, 3, 8, 8}, {1, 2, 13, 6}, {2, 1, 37, 37}};
  uint64_t seed = 100;
  int checked = 0;
  for (const Shape4& s : shapes)
    for (int L = 0; L <= 5; ++L)
      for (int k : {1, 3, 5, 7})
        for (int stride : {1, 2, 3})
          for (bool bias : {false, true}) {
            SCOPED_TRACE(describe(s, k, L, stride, bias));
            const WTConvParams p = random_params(static_cast<int>(s.C), k, L, bias, seed++);
            const auto x = random_vec(s.numel(), seed++, -2.0, 2.0);
            const auto lit = wtconv_forward(x, s, p, stride);
            const auto cf = wtconv_forward_closed_form(x, s, p, stride);
            ASSERT_EQ(lit.size(), static_cast<size_t>(out_numel(s, stride)));
            ASSERT_EQ(cf.size(), lit.size());
            const double scale = std::max(1.0, max_abs(lit));
            double err = 0.0;
            for (size_t i = 0; i < lit.size(); ++i) {
              const double d = std::fabs(lit[i] - cf[i]);
              err = std::isnan(d) ? d : std::max(err, d);  // keep a NaN once seen
              if (std::isnan(err)) break;
            }
            EXPECT_TRUE(err <= 1e-12 * scale) << "max |diff| = " << err;
            ++checked;
          }
  EXPECT_EQ(checked, 6 * 6 * 4 * 3 * 2);
}

// ---------------------------------------------------------------------------------------------
// Backward vs central finite differences

// Checks d(<g, forward>)/d(v[i]) against the analytic gradient for (a subset of) the entries of v.
// The loss is linear in every single entry, so central differences are exact up to rounding.
void check_fd(const char* name, std::vector<double>& v, const std::vector<double>& analytic,
              const std::function<double()>& loss, std::mt19937_64& rng) {
  ASSERT_EQ(analytic.size(), v.size()) << name;
  std::vector<size_t> idx(v.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  const size_t max_checked = 64;
  if (idx.size() > max_checked) {
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(max_checked);
  }
  const double h = 1e-6;
  for (size_t i : idx) {
    const double orig = v[i];
    v[i] = orig + h;
    const double fp = loss();
    v[i] = orig - h;
    const double fm = loss();
    v[i] = orig;
    const double fd = (fp - fm) / (2 * h);
    const double err = std::fabs(fd - analytic[i]);
    EXPECT_TRUE(err <= 1e-6 * std::max(1.0, std::fabs(analytic[i])))
        << name << "[" << i << "]: analytic " << analytic[i] << " fd " << fd;
  }
}

TEST(ReferenceBackward, MatchesFiniteDifferences) {
  const std::vector<Shape4> shapes = {{1, 1, 5, 7}, {2, 2, 6, 3}, {1, 2, 1, 2}, {1, 1, 8, 8}};
  std::mt19937_64 rng(7);
  uint64_t seed = 1000;
  for (const Shape4& s : shapes)
    for (int L = 0; L <= 3; ++L)
      for (int stride : {1, 2, 3})
        for (bool bias : {false, true}) {
          const int k = (L % 2 == 0) ? 3 : 5;
          SCOPED_TRACE(describe(s, k, L, stride, bias));
          WTConvParams p = random_params(static_cast<int>(s.C), k, L, bias, seed++);
          std::vector<double> x = random_vec(s.numel(), seed++);
          const std::vector<double> g = random_vec(out_numel(s, stride), seed++);
          const WTConvGrads gr = wtconv_backward(x, s, p, g, stride);

          auto loss = [&]() {
            const auto out = wtconv_forward(x, s, p, stride);
            double acc = 0.0;
            for (size_t i = 0; i < out.size(); ++i) acc += g[i] * out[i];
            return acc;
          };
          check_fd("dx", x, gr.dx, loss, rng);
          check_fd("base_w", p.base_w, gr.base_w, loss, rng);
          check_fd("base_s", p.base_s, gr.base_s, loss, rng);
          if (bias)
            check_fd("base_b", p.base_b, gr.base_b, loss, rng);
          else
            EXPECT_TRUE(gr.base_b.empty());
          ASSERT_EQ(gr.level_w.size(), static_cast<size_t>(L));
          ASSERT_EQ(gr.level_s.size(), static_cast<size_t>(L));
          for (int l = 0; l < L; ++l) {
            check_fd(("level_w[" + std::to_string(l) + "]").c_str(), p.level_w[l], gr.level_w[l],
                     loss, rng);
            check_fd(("level_s[" + std::to_string(l) + "]").c_str(), p.level_s[l], gr.level_s[l],
                     loss, rng);
          }
        }
}

TEST(ReferenceBackward, StrideIgnoresDroppedPixels) {
  // With stride 2 on a 1x1 conv (L=0, k=1), pixels off the kept grid get no gradient at all.
  const Shape4 s{1, 1, 3, 4};
  const WTConvParams p = random_params(1, 1, 0, true, 21);
  const auto x = random_vec(s.numel(), 22);
  const std::vector<double> g = {1.0, 2.0, 3.0, 4.0};  // output 2x2: (0,0) (0,2) (2,0) (2,2)
  const WTConvGrads gr = wtconv_backward(x, s, p, g, 2);
  ASSERT_EQ(gr.dx.size(), x.size());
  const double w = p.base_w[0] * p.base_s[0];
  const std::vector<double> expected = {1 * w, 0, 2 * w, 0, 0, 0, 0, 0, 3 * w, 0, 4 * w, 0};
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(gr.dx[i], expected[i], 1e-15) << i;
  ASSERT_EQ(gr.base_b.size(), 1u);
  EXPECT_NEAR(gr.base_b[0], p.base_s[0] * 10.0, 1e-14);
}

// ---------------------------------------------------------------------------------------------
// Argument validation

TEST(ReferenceInvalid, ForwardAndBackwardRejectBadArguments) {
  const Shape4 s{2, 3, 5, 6};
  const WTConvParams good = init_params(3, 3, 2, true, 1);
  const auto x = random_vec(s.numel(), 2);
  const auto g = random_vec(s.numel(), 3);
  ASSERT_NO_THROW(wtconv_forward(x, s, good));
  ASSERT_NO_THROW(wtconv_forward_closed_form(x, s, good));
  ASSERT_NO_THROW(wtconv_backward(x, s, good, g));

  // Each case is one bad input; every entry point must reject it.
  struct Case {
    std::string what;
    std::function<void(std::vector<double>&, Shape4&, WTConvParams&, int&)> corrupt;
  };
  const std::vector<Case> cases = {
      {"x too short", [](auto& xx, auto&, auto&, auto&) { xx.pop_back(); }},
      {"H = 0", [](auto&, auto& ss, auto&, auto&) { ss.H = 0; }},
      {"B = -1", [](auto&, auto& ss, auto&, auto&) { ss.B = -1; }},
      {"C mismatch", [](auto&, auto& ss, auto&, auto&) { ss.C = 2; }},
      {"k even", [](auto&, auto&, auto& p, auto&) { p.k = 4; }},
      {"k = 0", [](auto&, auto&, auto& p, auto&) { p.k = 0; }},
      {"L < 0", [](auto&, auto&, auto& p, auto&) { p.L = -1; }},
      {"L vs level_w count", [](auto&, auto&, auto& p, auto&) { p.L = 3; }},
      {"stride 0", [](auto&, auto&, auto&, auto& st) { st = 0; }},
      {"base_w size", [](auto&, auto&, auto& p, auto&) { p.base_w.pop_back(); }},
      {"base_b size", [](auto&, auto&, auto& p, auto&) { p.base_b.push_back(0.0); }},
      {"base_s size", [](auto&, auto&, auto& p, auto&) { p.base_s.pop_back(); }},
      {"level_w[1] size", [](auto&, auto&, auto& p, auto&) { p.level_w[1].pop_back(); }},
      {"level_s[0] size", [](auto&, auto&, auto& p, auto&) { p.level_s[0].push_back(1.0); }},
      {"level_s count", [](auto&, auto&, auto& p, auto&) { p.level_s.pop_back(); }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::vector<double> xx = x;
    Shape4 ss = s;
    WTConvParams p = good;
    int stride = 1;
    c.corrupt(xx, ss, p, stride);
    EXPECT_THROW(wtconv_forward(xx, ss, p, stride), std::invalid_argument);
    EXPECT_THROW(wtconv_forward_closed_form(xx, ss, p, stride), std::invalid_argument);
    EXPECT_THROW(wtconv_backward(xx, ss, p, g, stride), std::invalid_argument);
  }

  // g must have the (strided) output's size.
  EXPECT_THROW(wtconv_backward(x, s, good, g, 2), std::invalid_argument);
  EXPECT_THROW(wtconv_backward(x, s, good, std::vector<double>(g.begin(), g.end() - 1)),
               std::invalid_argument);

  // The message names the bad value.
  try {
    wtconv_forward(x, s, good, -3);
    ADD_FAILURE() << "stride -3 accepted";
  } catch (const std::invalid_argument& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("stride"), std::string::npos) << msg;
    EXPECT_NE(msg.find("-3"), std::string::npos) << msg;
  }
}

TEST(ReferenceInvalid, InitParamsRejectsBadArguments) {
  EXPECT_THROW(init_params(0, 3, 1, true, 1), std::invalid_argument);
  EXPECT_THROW(init_params(2, 2, 1, true, 1), std::invalid_argument);
  EXPECT_THROW(init_params(2, -1, 1, true, 1), std::invalid_argument);
  EXPECT_THROW(init_params(2, 3, -1, true, 1), std::invalid_argument);
  EXPECT_NO_THROW(init_params(2, 1, 0, false, 1));
}

}  // namespace
