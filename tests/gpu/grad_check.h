// The parameter-gradient check shared by the backward tests.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "lkjit/reference.h"
#include "lkjit/spec.h"
#include "lkjit/testing.h"

namespace lkjit::testing {

// Parameter gradients are fp32 sums over B*H*W terms: tolerance relative to the tensor's scale.
inline void expect_grad_close(const std::vector<double>& got, const std::vector<double>& want, const std::string& what,
                              DType dt) {
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  const auto cmp = compare(std::vector<float>(got.begin(), got.end()), want, gradient_tolerance(scale, dt));
  EXPECT_TRUE(cmp.ok) << what << ": " << cmp.to_string();
}

// Every parameter gradient of a backward against the reference's (base_b only with a bias).
inline void expect_grads_close(const ref::WTConvGrads& got, const ref::WTConvGrads& want, bool bias, int L, DType dt) {
  expect_grad_close(got.base_w, want.base_w, "base_w", dt);
  if (bias) expect_grad_close(got.base_b, want.base_b, "base_b", dt);
  expect_grad_close(got.base_s, want.base_s, "base_s", dt);
  for (int l = 0; l < L; ++l) {
    expect_grad_close(got.level_w[l], want.level_w[l], "level_w[" + std::to_string(l) + "]", dt);
    expect_grad_close(got.level_s[l], want.level_s[l], "level_s[" + std::to_string(l) + "]", dt);
  }
}

}  // namespace lkjit::testing
