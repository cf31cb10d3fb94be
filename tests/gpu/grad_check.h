// The parameter-gradient check shared by the backward tests.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "lkjit/spec.h"
#include "lkjit/testing.h"

namespace lkjit::testing {

// Parameter gradients are fp32 sums over B*H*W terms: tolerance relative to the tensor's scale.
inline void expect_grad_close(const std::vector<double>& got, const std::vector<double>& want, const std::string& what,
                              DType dt) {
  double scale = 0;
  for (double v : want) scale = std::max(scale, std::fabs(v));
  const double rel = dt == DType::kF32 ? 2e-4 : 2e-3;
  const auto cmp = compare(std::vector<float>(got.begin(), got.end()), want, {rel * (scale + 1e-3), rel});
  EXPECT_TRUE(cmp.ok) << what << ": " << cmp.to_string();
}

}  // namespace lkjit::testing
