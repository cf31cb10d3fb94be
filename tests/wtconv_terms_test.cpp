// The GPU tests of isolated terms and of the LL chain (tests/gpu/wtconv_terms_test.cpp) can fail: on the
// float64 reference, with the problems, seeds, inputs and tolerances those tests use (tests/wtconv_terms.h),
// every kernel fault of term_faults() moves the result past twice the dtype's tolerance (so past it even after
// a kernel's own rounding, which the tolerance allows once), and the chain inputs take the raw low band past
// the f16 maximum while outputs and dX stay well inside it. Also the random parameters' scales.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "lkjit/numeric.h"
#include "lkjit/reference.h"
#include "lkjit/testing.h"
#include "tests/wtconv_terms.h"

namespace lkjit::testing {
namespace {

// A fault must exceed the tolerance by this factor somewhere: the kernel's own error may use up one tolerance.
constexpr double kMargin = 2;

// What a kernel computing `p` would write: the reference's result rounded to dt.
std::vector<float> written(const std::vector<double>& v, DType dt) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = round_to(dt, float(v[i]));
  return r;
}

std::string pass_name(bool backward) { return backward ? "dX" : "out"; }

TEST(RandomParams, ScalesAreFarFromOneAndTheModulesInitWithBothSigns) {
  const ref::WTConvParams p = random_params(64, 5, 3, true, 7);
  int negative = 0, total = 0;
  auto check = [&](double s) {
    const double m = std::fabs(s);
    EXPECT_TRUE((m >= 0.3 && m <= 0.8) || (m >= 1.25 && m <= 2)) << s;
    negative += s < 0;
    ++total;
  };
  for (double s : p.base_s) check(s);
  for (const auto& ls : p.level_s)
    for (double s : ls) check(s);
  EXPECT_GT(negative, total / 4);
  EXPECT_LT(negative, 3 * total / 4);
  double bmax = 0;
  for (double b : p.base_b) bmax = std::max(bmax, std::fabs(b));
  EXPECT_GT(bmax, 0.5) << "biases U(-1, 1)";
  EXPECT_LE(bmax, 1.0);
  // Weights as the module's init; deterministic in the seed.
  EXPECT_EQ(p.base_w, ref::init_params(64, 5, 3, true, 7).base_w);
  EXPECT_EQ(random_params(64, 5, 3, true, 7).level_s, p.level_s);
  EXPECT_NE(random_params(64, 5, 3, true, 8).level_s, p.level_s);
}

TEST(TermCases, AnIsolatedCaseIsItsTermAlone) {
  // Level 2 alone of the stride-2 problem: the other levels' scales 0, no base; its output is linear in the
  // level's scales and has RMS 1.
  const TermCase c = term_case(2, 2, DType::kF32, false);
  for (double w : c.params.base_w) EXPECT_EQ(w, 0.0);
  for (double b : c.params.base_b) EXPECT_EQ(b, 0.0);
  for (int l : {1, 3})
    for (double s : c.params.level_s[l - 1]) EXPECT_EQ(s, 0.0);
  EXPECT_NEAR(rms(c.want_out), 1.0, 1e-9);
  const Problem pb = term_problems()[2];
  ref::WTConvParams half = c.params;
  for (double& s : half.level_s[1]) s *= 0.5;
  const auto h = ref::wtconv_forward(as_double(c.x), shape4(pb), half, pb.stride);
  for (size_t i = 0; i < h.size(); ++i) EXPECT_NEAR(h[i], 0.5 * c.want_out[i], 1e-9);
  EXPECT_NEAR(rms(term_case(2, 2, DType::kF32, true).want.dx), 1.0, 1e-9);
}

// Every fault of every isolated term of every problem, dtype and pass exceeds the GPU test's tolerance.
TEST(TermCases, EveryFaultOfEveryIsolatedTermFailsTheGpuTolerance) {
  int faults = 0;
  for (size_t i = 0; i < term_problems().size(); ++i) {
    const Problem pb = term_problems()[i];
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
      for (bool backward : {false, true})
        for (int level = 0; level <= pb.L; ++level) {
          const TermCase c = term_case(i, level, dt, backward);
          const auto& want = backward ? c.want.dx : c.want_out;
          SCOPED_TRACE(problem_name(pb, dt, WTConvPath::kAuto) + " " + pass_name(backward) + " level " +
                       std::to_string(level) + " seed " + std::to_string(c.seed));
          for (const auto& [name, q] : term_faults(c.params, level, pb, backward)) {
            const auto got = backward ? ref::wtconv_backward(as_double(c.x), shape4(pb), q, as_double(c.g), pb.stride).dx
                                      : ref::wtconv_forward(as_double(c.x), shape4(pb), q, pb.stride);
            const Comparison cmp = compare(written(got, dt), want, tolerance(dt));
            EXPECT_GE(cmp.worst_ratio, kMargin) << name << ": " << cmp.to_string();
            ++faults;
          }
          // The kernel's exact result passes: the tolerance is not below the output's own rounding.
          EXPECT_TRUE(compare(written(want, dt), want, tolerance(dt)).ok);
        }
  }
  EXPECT_GT(faults, 1500);
}

TEST(ChainCases, TheLowBandPassesTheF16MaximumDoublingPerLevelWhileResultsStayInside) {
  for (size_t i = 0; i < chain_problems().size(); ++i) {
    const Problem pb = chain_problems()[i];
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      const ChainCase c = chain_case(i, dt);
      SCOPED_TRACE(problem_name(pb, dt, WTConvPath::kAuto) + " seed " + std::to_string(c.seed));
      for (const auto* t : {&c.x, &c.g}) {
        const auto peaks = low_band_peaks(as_double(*t), shape4(pb), pb.L);
        EXPECT_GT(*std::max_element(peaks.begin(), peaks.end()), kF16Max);
        // The low band doubles per level while 2^l fits the map: the mean's block sums.
        for (int l = 2; l <= pb.L && (int64_t(1) << l) <= std::min(pb.H, pb.W); ++l)
          EXPECT_NEAR(peaks[l - 1] / peaks[l - 2], 2.0, 0.05) << "level " << l;
      }
      EXPECT_LE(max_abs(ref::wtconv_forward(as_double(c.x), shape4(pb), c.params, pb.stride)), kChainOutMax * (1 + 1e-9));
      EXPECT_LE(max_abs(ref::wtconv_backward(as_double(c.x), shape4(pb), c.params, as_double(c.g), pb.stride).dx),
                kChainOutMax * (1 + 1e-9));
    }
  }
}

// The terms of the levels whose low band passes the f16 maximum show under the chain tolerance: dropping them
// (or the whole wavelet branch) fails by the margin, forward and backward.
TEST(ChainCases, TheOverflowingLevelsTermsExceedTheChainTolerance) {
  for (size_t i = 0; i < chain_problems().size(); ++i) {
    const Problem pb = chain_problems()[i];
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      const ChainCase c = chain_case(i, dt);
      SCOPED_TRACE(problem_name(pb, dt, WTConvPath::kAuto) + " seed " + std::to_string(c.seed));
      const auto peaks = low_band_peaks(as_double(c.x), shape4(pb), pb.L);
      const int first = int(std::find_if(peaks.begin(), peaks.end(), [](double p) { return p > kF16Max; }) - peaks.begin()) + 1;
      ASSERT_LE(first, pb.L);
      for (int from : {1, first}) {
        ref::WTConvParams q = c.params;
        for (int l = from; l <= pb.L; ++l) std::fill(q.level_s[l - 1].begin(), q.level_s[l - 1].end(), 0.0);
        const auto want = ref::wtconv_forward(as_double(c.x), shape4(pb), c.params, pb.stride);
        const auto got = ref::wtconv_forward(as_double(c.x), shape4(pb), q, pb.stride);
        EXPECT_GE(compare(written(got, dt), want, chain_tolerance(dt, c.mean)).worst_ratio, kMargin)
            << "out without levels " << from << ".." << pb.L;
        const auto wdx = ref::wtconv_backward(as_double(c.x), shape4(pb), c.params, as_double(c.g), pb.stride).dx;
        const auto gdx = ref::wtconv_backward(as_double(c.x), shape4(pb), q, as_double(c.g), pb.stride).dx;
        EXPECT_GE(compare(written(gdx, dt), wdx, chain_tolerance(dt, c.mean)).worst_ratio, kMargin)
            << "dX without levels " << from << ".." << pb.L;
      }
    }
  }
}

}  // namespace
}  // namespace lkjit::testing
