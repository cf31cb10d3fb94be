// Tests of the float64 WBMM reference (runtime/reference/wbmm_ref.cpp): the direct and bmm forms agree,
// gradients match finite differences, the transpose identity, identity folding, padding and crop, the
// 1x1 and 16x16 windows, hand-computed values, and argument validation.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "lkjit/wbmm_reference.h"

namespace {

using lkjit::ref::WBMMForm;
using lkjit::ref::WBMMGrads;
using lkjit::ref::WBMMShape;
using lkjit::ref::WBMMWeights;
using lkjit::ref::wbmm_backward;
using lkjit::ref::wbmm_fold_identity;
using lkjit::ref::wbmm_forward;
using lkjit::ref::wbmm_init;
using lkjit::ref::wbmm_materialize;
using lkjit::ref::wbmm_rotate_table;
using ::testing::HasSubstr;

std::vector<double> random_vec(size_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> U(-scale, scale);
  std::vector<double> v(n);
  for (double& e : v) e = U(rng);
  return v;
}

// Weights whose window product is as large as the identity term (init's std 0.02 would let a dropped or
// misplaced tap pass unnoticed): every entry ~ U(-0.7, 0.7) / sqrt(d), bias ~ U(-0.5, 0.5).
WBMMWeights random_weights(int C, int wh, int ww, bool dense, bool bias, bool identity, uint64_t seed) {
  WBMMWeights w = wbmm_init(C, wh, ww, dense, bias, seed);
  const double s = 0.7 / std::sqrt(double(wh * ww));
  if (dense) w.M = random_vec(w.M.size(), seed + 1, s);
  else w.R = random_vec(w.R.size(), seed + 1, s);
  if (bias) w.bias = random_vec(w.bias.size(), seed + 2, 0.5);
  w.identity = identity;
  return w;
}

double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (double e : v) m = std::max(m, std::fabs(e));
  return m;
}
// max |a - b| over max(|b|, 1e-300); NaN and a size mismatch give +inf.
double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0.0;
  const double s = std::max(max_abs(b), 1e-300);
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = std::fabs(a[i] - b[i]) / s;
    if (!(e <= m)) m = std::isnan(e) ? INFINITY : e;
  }
  return m;
}

struct Problem {
  int64_t B, C, H, W;
  int wh, ww;
};
std::string describe(const Problem& p, bool dense, bool bias, bool identity) {
  return std::to_string(p.B) + "x" + std::to_string(p.C) + "x" + std::to_string(p.H) + "x" + std::to_string(p.W) +
         " window " + std::to_string(p.wh) + "x" + std::to_string(p.ww) + (dense ? " dense" : " table") +
         (bias ? " bias" : "") + (identity ? " identity" : "");
}

// Edge cases first: 1x1 window, exact multiples, H and W not multiples (padding), rectangular windows,
// a window larger than the map, batch 1, then 14x14 and 16x16.
const std::vector<Problem> kProblems = {
    {2, 3, 4, 5, 1, 1},   {1, 2, 7, 7, 7, 7},    {2, 2, 9, 12, 7, 7},  {1, 3, 10, 11, 3, 5},
    {2, 1, 5, 4, 2, 3},   {1, 2, 3, 2, 4, 5},    {1, 1, 14, 15, 14, 14}, {1, 1, 16, 17, 16, 16},
};

// ---- the two forms agree ---------------------------------------------------------------------------------

TEST(WBMMReference, DirectAndBmmFormsAgreeForward) {
  uint64_t seed = 1;
  for (const auto& p : kProblems)
    for (bool dense : {false, true})
      for (bool bias : {false, true})
        for (bool identity : {false, true}) {
          SCOPED_TRACE(describe(p, dense, bias, identity));
          const WBMMShape s{p.B, p.C, p.H, p.W};
          const auto x = random_vec(size_t(s.numel()), ++seed);
          const auto w = random_weights(int(p.C), p.wh, p.ww, dense, bias, identity, ++seed);
          const auto a = wbmm_forward(x, s, w, WBMMForm::kDirect), b = wbmm_forward(x, s, w, WBMMForm::kBmm);
          EXPECT_LE(max_rel_diff(a, b), 1e-13);
          EXPECT_GT(max_abs(b), 0.1);
        }
}

TEST(WBMMReference, DirectAndBmmFormsAgreeBackward) {
  uint64_t seed = 100;
  for (const auto& p : kProblems)
    for (bool dense : {false, true})
      for (bool bias : {false, true}) {
        SCOPED_TRACE(describe(p, dense, bias, true));
        const WBMMShape s{p.B, p.C, p.H, p.W};
        const auto x = random_vec(size_t(s.numel()), ++seed), g = random_vec(size_t(s.numel()), ++seed);
        const auto w = random_weights(int(p.C), p.wh, p.ww, dense, bias, true, ++seed);
        const WBMMGrads a = wbmm_backward(x, s, w, g, WBMMForm::kDirect), b = wbmm_backward(x, s, w, g, WBMMForm::kBmm);
        EXPECT_LE(max_rel_diff(a.dx, b.dx), 1e-13);
        if (dense) {
          EXPECT_LE(max_rel_diff(a.dM, b.dM), 1e-13);
          EXPECT_TRUE(a.dR.empty() && b.dR.empty());
        } else {
          EXPECT_LE(max_rel_diff(a.dR, b.dR), 1e-13);
          EXPECT_EQ(b.dM.size(), size_t(p.C) * p.wh * p.ww * p.wh * p.ww);  // the bmm form's dM before the reduction
        }
        if (bias) EXPECT_LE(max_rel_diff(a.dbias, b.dbias), 1e-13);
        else EXPECT_TRUE(a.dbias.empty() && b.dbias.empty());
      }
}

// ---- gradients against finite differences ---------------------------------------------------------------
// L = <dy, forward(x)>: dL/dv by central differences for every entry of x, R or M, and bias.
double loss(const std::vector<double>& x, WBMMShape s, const WBMMWeights& w, const std::vector<double>& g) {
  const auto y = wbmm_forward(x, s, w, WBMMForm::kDirect);
  double l = 0.0;
  for (size_t i = 0; i < y.size(); ++i) l += y[i] * g[i];
  return l;
}
void expect_fd(const std::vector<double>& analytic, std::vector<double>& v, const std::function<double()>& f,
               const char* what) {
  ASSERT_EQ(analytic.size(), v.size()) << what;
  const double h = 1e-6;
  double worst = 0.0;
  for (size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    v[i] = keep + h;
    const double lp = f();
    v[i] = keep - h;
    const double lm = f();
    v[i] = keep;
    const double fd = (lp - lm) / (2 * h);
    const double e = std::fabs(fd - analytic[i]) / std::max(1.0, std::fabs(fd));
    if (!(e <= worst)) worst = e;
  }
  EXPECT_LE(worst, 1e-6) << what;
  EXPECT_GT(max_abs(analytic), 1e-3) << what << " is (nearly) zero: the check would pass anything";
}

TEST(WBMMReference, GradientsMatchFiniteDifferences) {
  const std::vector<Problem> problems = {{2, 2, 5, 7, 3, 2}, {1, 2, 6, 6, 4, 4}, {1, 1, 3, 4, 1, 1}};
  uint64_t seed = 300;
  for (const auto& p : problems)
    for (bool dense : {false, true})
      for (WBMMForm form : {WBMMForm::kDirect, WBMMForm::kBmm}) {
        SCOPED_TRACE(describe(p, dense, true, true) + (form == WBMMForm::kDirect ? " direct" : " bmm"));
        const WBMMShape s{p.B, p.C, p.H, p.W};
        auto x = random_vec(size_t(s.numel()), ++seed);
        const auto g = random_vec(size_t(s.numel()), ++seed);
        auto w = random_weights(int(p.C), p.wh, p.ww, dense, true, true, ++seed);
        const WBMMGrads gr = wbmm_backward(x, s, w, g, form);
        const auto f = [&] { return loss(x, s, w, g); };
        expect_fd(gr.dx, x, f, "dx");
        if (dense) expect_fd(gr.dM, w.M, f, "dM");
        else expect_fd(gr.dR, w.R, f, "dR");
        expect_fd(gr.dbias, w.bias, f, "dbias");
      }
}

// The table mode's dM (bmm form) is the gradient with respect to a dense M materialised from R: the
// same numbers as dense mode on that M.
TEST(WBMMReference, TableDMIsTheDenseGradientOfTheMaterialisedM) {
  const WBMMShape s{2, 3, 9, 8};
  const auto x = random_vec(size_t(s.numel()), 7), g = random_vec(size_t(s.numel()), 8);
  const auto w = random_weights(3, 4, 3, false, false, true, 9);
  WBMMWeights dense = w;
  dense.dense = true;
  dense.M = wbmm_materialize(w);
  dense.R.clear();
  const auto a = wbmm_backward(x, s, w, g, WBMMForm::kBmm), b = wbmm_backward(x, s, dense, g, WBMMForm::kDirect);
  EXPECT_LE(max_rel_diff(a.dM, b.dM), 1e-13);
  EXPECT_LE(max_rel_diff(a.dx, b.dx), 1e-13);
  EXPECT_LE(max_rel_diff(wbmm_forward(x, s, w, WBMMForm::kDirect), wbmm_forward(x, s, dense, WBMMForm::kBmm)), 1e-13);
}

// ---- structure --------------------------------------------------------------------------------------------

// M_c^T is the M of the 180-degree-rotated table, for square and rectangular windows.
TEST(WBMMReference, TransposeIdentity) {
  for (auto [wh, ww] : std::vector<std::pair<int, int>>{{1, 1}, {7, 7}, {3, 5}, {16, 2}, {14, 14}}) {
    SCOPED_TRACE(std::to_string(wh) + "x" + std::to_string(ww));
    const auto w = random_weights(2, wh, ww, false, false, true, 11);
    WBMMWeights r = w;
    r.R = wbmm_rotate_table(w.R, 2, wh, ww);
    const auto M = wbmm_materialize(w), Mr = wbmm_materialize(r);
    const int d = wh * ww;
    double worst = 0.0;
    for (int c = 0; c < 2; ++c)
      for (int i = 0; i < d; ++i)
        for (int j = 0; j < d; ++j) worst = std::max(worst, std::fabs(Mr[(c * d + i) * d + j] - M[(c * d + j) * d + i]));
    EXPECT_EQ(worst, 0.0);
    if (d > 1) EXPECT_NE(M, Mr) << "a symmetric M would not test the transpose";  // the random table is not
  }
}

// dX is the forward of dY with the rotated table (plus the identity), the spec's statement of the backward.
TEST(WBMMReference, DxIsTheForwardWithTheRotatedTable) {
  const WBMMShape s{2, 2, 11, 9};
  const auto x = random_vec(size_t(s.numel()), 21), g = random_vec(size_t(s.numel()), 22);
  for (bool identity : {false, true}) {
    auto w = random_weights(2, 5, 4, false, false, identity, 23);
    WBMMWeights r = w;
    r.R = wbmm_rotate_table(w.R, 2, 5, 4);
    EXPECT_LE(max_rel_diff(wbmm_backward(x, s, w, g, WBMMForm::kDirect).dx, wbmm_forward(g, s, r, WBMMForm::kDirect)),
              1e-13);
  }
}

// Folding the identity into the centre tap (dense: the diagonal) leaves the op unchanged, and is not a no-op.
TEST(WBMMReference, IdentityFoldsIntoTheCentreTap) {
  const WBMMShape s{1, 3, 10, 9};
  const auto x = random_vec(size_t(s.numel()), 31);
  for (bool dense : {false, true}) {
    SCOPED_TRACE(dense ? "dense" : "table");
    const auto w = random_weights(3, 4, 5, dense, true, true, 32);
    const auto f = wbmm_fold_identity(w);
    EXPECT_FALSE(f.identity);
    EXPECT_LE(max_rel_diff(wbmm_forward(x, s, f, WBMMForm::kDirect), wbmm_forward(x, s, w, WBMMForm::kBmm)), 1e-14);
    WBMMWeights dropped = w;
    dropped.identity = false;
    EXPECT_GT(max_rel_diff(wbmm_forward(x, s, dropped, WBMMForm::kBmm), wbmm_forward(x, s, w, WBMMForm::kBmm)), 0.1);
    if (!dense) {
      const int centre = 3 * 9 + 4;  // (wh-1)(2ww-1) + ww-1 for 4x5
      EXPECT_DOUBLE_EQ(f.R[centre] - w.R[centre], 1.0);
      EXPECT_DOUBLE_EQ(f.R[centre + 1], w.R[centre + 1]);
    }
  }
}

// H, W not multiples of the window: the result is that of the zero-padded map, cropped; the backward's dx
// likewise, and the weight gradients equal the padded map's with zero dy on the padding.
TEST(WBMMReference, PaddingIsZeroPadThenCrop) {
  for (auto [H, W, wh, ww] : std::vector<std::array<int, 4>>{{9, 12, 7, 7}, {10, 11, 3, 5}, {3, 2, 4, 5}, {17, 30, 16, 16}}) {
    SCOPED_TRACE(std::to_string(H) + "x" + std::to_string(W) + " window " + std::to_string(wh) + "x" + std::to_string(ww));
    const int Hp = (H + wh - 1) / wh * wh, Wp = (W + ww - 1) / ww * ww;
    const WBMMShape s{2, 2, H, W}, sp{2, 2, Hp, Wp};
    const auto x = random_vec(size_t(s.numel()), 41), g = random_vec(size_t(s.numel()), 42);
    std::vector<double> xp(size_t(sp.numel()), 0.0), gp(size_t(sp.numel()), 0.0);
    for (int p = 0; p < 4; ++p)
      for (int y = 0; y < H; ++y)
        for (int q = 0; q < W; ++q) {
          xp[(size_t(p) * Hp + y) * Wp + q] = x[(size_t(p) * H + y) * W + q];
          gp[(size_t(p) * Hp + y) * Wp + q] = g[(size_t(p) * H + y) * W + q];
        }
    const auto w = random_weights(2, wh, ww, false, true, true, 43);
    const auto y = wbmm_forward(x, s, w, WBMMForm::kDirect), yp = wbmm_forward(xp, sp, w, WBMMForm::kBmm);
    const auto gr = wbmm_backward(x, s, w, g, WBMMForm::kDirect), grp = wbmm_backward(xp, sp, w, gp, WBMMForm::kBmm);
    double wy = 0.0, wdx = 0.0;
    for (int p = 0; p < 4; ++p)
      for (int r = 0; r < H; ++r)
        for (int q = 0; q < W; ++q) {
          wy = std::max(wy, std::fabs(y[(size_t(p) * H + r) * W + q] - yp[(size_t(p) * Hp + r) * Wp + q]));
          wdx = std::max(wdx, std::fabs(gr.dx[(size_t(p) * H + r) * W + q] - grp.dx[(size_t(p) * Hp + r) * Wp + q]));
        }
    EXPECT_LE(wy, 1e-13);
    EXPECT_LE(wdx, 1e-13);
    EXPECT_LE(max_rel_diff(gr.dR, grp.dR), 1e-13);
    EXPECT_LE(max_rel_diff(gr.dbias, grp.dbias), 1e-13);
  }
}

// ---- hand-computed cases ----------------------------------------------------------------------------------

// A 1x1 window: y = (R[c, 0] + 1) x + bias[c], per pixel; dR = sum x dy.
TEST(WBMMReference, OneByOneWindowIsAPerChannelAffineMap) {
  const WBMMShape s{2, 2, 3, 2};
  WBMMWeights w;
  w.C = 2, w.wh = 1, w.ww = 1, w.R = {0.5, -2.0}, w.bias = {0.25, 1.0};
  const auto x = random_vec(size_t(s.numel()), 51), g = random_vec(size_t(s.numel()), 52);
  for (WBMMForm form : {WBMMForm::kDirect, WBMMForm::kBmm}) {
    const auto y = wbmm_forward(x, s, w, form);
    const auto gr = wbmm_backward(x, s, w, g, form);
    double dR[2] = {0, 0};
    for (size_t i = 0; i < x.size(); ++i) {
      const int c = int(i / 6) % 2;
      EXPECT_NEAR(y[i], (w.R[c] + 1.0) * x[i] + w.bias[c], 1e-14) << i;
      EXPECT_NEAR(gr.dx[i], (w.R[c] + 1.0) * g[i], 1e-14) << i;
      dR[c] += x[i] * g[i];
    }
    EXPECT_NEAR(gr.dR[0], dR[0], 1e-13);
    EXPECT_NEAR(gr.dR[1], dR[1], 1e-13);
  }
}

// A 2x2 window by hand: y[j] = sum_i x[i] R[I[i, j]] + x[j], I[i, j] = (ih-jh+1)*3 + (iw-jw+1).
TEST(WBMMReference, TwoByTwoWindowByHand) {
  const WBMMShape s{1, 1, 2, 2};
  WBMMWeights w;
  w.C = 1, w.wh = 2, w.ww = 2;
  w.R = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // (dh, dw) = (-1,-1) .. (1, 1), row-major
  const std::vector<double> x = {1, 10, 100, 1000};  // (0,0) (0,1) (1,0) (1,1)
  // Output (0,0): inputs (0,0) tap (0,0)=5, (0,1) tap (0,1)=6, (1,0) tap (1,0)=8, (1,1) tap (1,1)=9.
  const double y00 = 1 * 5 + 10 * 6 + 100 * 8 + 1000 * 9 + 1;
  // Output (1,1): (0,0) tap (-1,-1)=1, (0,1) tap (-1,0)=2, (1,0) tap (0,-1)=4, (1,1) tap (0,0)=5.
  const double y11 = 1 * 1 + 10 * 2 + 100 * 4 + 1000 * 5 + 1000;
  for (WBMMForm form : {WBMMForm::kDirect, WBMMForm::kBmm}) {
    const auto y = wbmm_forward(x, s, w, form);
    EXPECT_DOUBLE_EQ(y[0], y00);
    EXPECT_DOUBLE_EQ(y[3], y11);
  }
}

// Windows never interact: a change in one window leaves every other window's output unchanged.
TEST(WBMMReference, WindowsAreIndependent) {
  const WBMMShape s{1, 1, 14, 21};
  auto x = random_vec(size_t(s.numel()), 61);
  const auto w = random_weights(1, 7, 7, false, false, true, 62);
  const auto y0 = wbmm_forward(x, s, w, WBMMForm::kDirect);
  x[8 * 21 + 9] += 1.0;  // window (1, 1)
  const auto y1 = wbmm_forward(x, s, w, WBMMForm::kDirect);
  for (int r = 0; r < 14; ++r)
    for (int q = 0; q < 21; ++q) {
      const bool inside = r >= 7 && q >= 7 && q < 14;
      if (!inside) EXPECT_EQ(y0[r * 21 + q], y1[r * 21 + q]) << r << "," << q;
    }
  EXPECT_NE(y0[7 * 21 + 7], y1[7 * 21 + 7]);
}

// ---- validation -------------------------------------------------------------------------------------------

TEST(WBMMReference, BadArgumentsNameTheValue) {
  const WBMMShape s{1, 2, 4, 4};
  const auto x = random_vec(size_t(s.numel()), 71);
  const auto ok = random_weights(2, 2, 2, false, false, true, 72);
  const auto expect_error = [&](WBMMWeights w, WBMMShape sh, const std::vector<double>& in, const std::string& what) {
    try {
      wbmm_forward(in, sh, w, WBMMForm::kDirect);
      ADD_FAILURE() << "accepted: " << what;
    } catch (const std::invalid_argument& e) {
      EXPECT_THAT(e.what(), HasSubstr(what));
    }
  };
  WBMMWeights w = ok;
  w.wh = 0;
  expect_error(w, s, x, "wh=0 is out of range; supported: [1, 16]");
  w = ok;
  w.ww = 17;
  expect_error(w, s, x, "ww=17 is out of range; supported: [1, 16]");
  w = ok;
  w.R.pop_back();
  expect_error(w, s, x, "R has 17 elements; expected 18");
  w = ok;
  w.C = 3;
  expect_error(w, s, x, "weights have C=3 channels; the input has C=2");
  w = ok;
  w.bias = {1.0};
  expect_error(w, s, x, "bias has 1 elements; expected 2");
  w = ok;
  w.dense = true;
  expect_error(w, s, x, "M has 0 elements; expected 32");
  expect_error(ok, WBMMShape{1, 2, 0, 4}, {}, "H=0 is out of range");
  expect_error(ok, s, std::vector<double>(5), "x has 5 elements; expected 32");
  EXPECT_THROW(wbmm_backward(x, s, ok, std::vector<double>(3), WBMMForm::kBmm), std::invalid_argument);
  EXPECT_THROW(wbmm_init(0, 7, 7, false, false, 1), std::invalid_argument);
  EXPECT_THROW(wbmm_init(4, 7, 0, false, false, 1), std::invalid_argument);
  EXPECT_THROW(wbmm_rotate_table(std::vector<double>(5), 1, 2, 2), std::invalid_argument);
}

// The reference module's initialisation: trunc_normal(0.02) within two standard deviations.
TEST(WBMMReference, InitIsTruncatedNormal) {
  const auto w = wbmm_init(64, 7, 7, false, false, 5);
  ASSERT_EQ(w.R.size(), 64u * 169);
  double sum = 0, sq = 0;
  for (double r : w.R) {
    EXPECT_LE(std::fabs(r), 0.04);
    sum += r, sq += r * r;
  }
  const double mean = sum / w.R.size(), sd = std::sqrt(sq / w.R.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(sd, 0.0176, 0.002);  // a normal truncated at 2 sd keeps 0.88 of its sd
  EXPECT_EQ(wbmm_init(64, 7, 7, false, false, 5).R, w.R);  // seeded
  EXPECT_TRUE(w.bias.empty());
}

}  // namespace
