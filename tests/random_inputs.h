// Random test inputs shared by the depthwise tests (CPU emulation and GPU): N(0, 1) values rounded to a dtype,
// so that the float64 reference sees exactly what the kernels read, and their float64 copies (or |values|, for
// the sums of |terms| that scale a tolerance).
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "lkjit/numeric.h"

namespace lkjit::test {

inline std::vector<float> randn(size_t n, DType t, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<float> N(0.f, 1.f);
  std::vector<float> v(n);
  for (float& e : v) e = round_to(t, N(g));
  return v;
}

inline std::vector<double> as_double(const std::vector<float>& v, bool abs = false) {
  std::vector<double> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = abs ? std::fabs(v[i]) : v[i];
  return r;
}

}  // namespace lkjit::test
