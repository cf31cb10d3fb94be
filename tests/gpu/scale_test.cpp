// The scale family on the GPU: y = a * x against a double reference, NaN-poisoned outputs, every dtype,
// NCHW and channels_last inputs, a padded (sliced) output, and tuning through the Tuner (the family's harness
// found through the runtime's op registry).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "lkjit/numeric.h"
#include "lkjit/scale.h"
#include "lkjit/tuning.h"
#include "tests/gpu/gpu_fixture.h"

namespace {

using namespace lkjit;  // NOLINT

struct Case {
  DType dtype;
  int64_t B, C, H, W;
  bool nhwc_in;
};

class ScaleGpu : public lkjit::testing::GpuTestP<Case> {};

TEST_P(ScaleGpu, MatchesTheReference) {
  const Case c = GetParam();
  const int64_t n = c.B * c.C * c.H * c.W;
  std::mt19937 rng(static_cast<unsigned>(n * 7 + int(c.dtype)));
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> x(n), a(c.C);
  for (auto& v : x) v = u(rng);
  for (auto& v : a) v = u(rng);
  const size_t eb = dtype_bytes(c.dtype);
  // x in the test's layout; y into every other column of a buffer twice as wide (a non-dense output).
  const std::array<int64_t, 4> xs = c.nhwc_in ? std::array<int64_t, 4>{c.H * c.W * c.C, 1, c.W * c.C, c.C}
                                              : std::array<int64_t, 4>{c.C * c.H * c.W, c.H * c.W, c.W, 1};
  const std::array<int64_t, 4> ys{c.C * c.H * 2 * c.W, c.H * 2 * c.W, 2 * c.W, 2};
  std::vector<float> xmem(n);  // x in memory order (a dense layout: every element once)
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t ch = 0; ch < c.C; ++ch)
      for (int64_t i = 0; i < c.H; ++i)
        for (int64_t j = 0; j < c.W; ++j) {
          float& v = x[((b * c.C + ch) * c.H + i) * c.W + j];
          v = round_to(c.dtype, v);  // the value the GPU reads
          xmem[b * xs[0] + ch * xs[1] + i * xs[2] + j * xs[3]] = v;
        }
  const std::vector<uint8_t> xbytes = encode(c.dtype, xmem);
  DeviceBuffer dx(xbytes.size()), da(a.size() * 4), dy(2 * n * eb);
  dx.upload(xbytes.data(), xbytes.size());
  da.upload(a.data(), a.size() * 4);
  dy.fill_u32(0xffffffffu);  // NaN in every dtype: an unwritten element fails
  ScaledCopy layer(ScaleOptions{c.C, c.dtype, 0});
  layer.forward(dx.data(), static_cast<const float*>(da.data()), dy.data(), c.B, c.H, c.W, nullptr, &xs, &ys);
  synchronize();
  std::vector<uint8_t> ybytes(2 * n * eb);
  dy.download(ybytes.data(), ybytes.size());
  const double tol = c.dtype == DType::kF32 ? 1e-6 : c.dtype == DType::kF16 ? 2e-3 : 1.6e-2;
  int64_t bad = 0, gaps = 0;
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t ch = 0; ch < c.C; ++ch)
      for (int64_t i = 0; i < c.H; ++i)
        for (int64_t j = 0; j < c.W; ++j) {
          const double want = double(a[ch]) * x[((b * c.C + ch) * c.H + i) * c.W + j];
          const int64_t at = b * ys[0] + ch * ys[1] + i * ys[2] + j * ys[3];
          const double got = decode_one(c.dtype, ybytes.data(), size_t(at));
          bad += !(std::abs(got - want) <= tol * (1 + std::abs(want)));
          gaps += !std::isnan(decode_one(c.dtype, ybytes.data(), size_t(at + 1)));  // the columns between stay untouched
        }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(gaps, 0);
}

INSTANTIATE_TEST_SUITE_P(Cases, ScaleGpu,
                         ::testing::Values(Case{DType::kF32, 1, 1, 1, 1, false}, Case{DType::kF32, 2, 3, 5, 7, false},
                                           Case{DType::kF16, 3, 17, 9, 11, true}, Case{DType::kBF16, 2, 64, 14, 14, true},
                                           Case{DType::kBF16, 1, 5, 33, 1, false}));

TEST(ScaleTune, TheTunerTimesTheFamilysPass) {
  std::string why;
  if (!gpu_available(&why)) GTEST_SKIP() << "no GPU: " << why;
  const DeviceInfo dev = device_info(0);
  TuneOptions o;
  o.mode = TuneMode::kRetune;
  o.strategy = TuneStrategy::kExhaustive;
  o.save = false;
  o.reps = 3;
  o.final_reps = 3;
  Tuner tuner(o);
  const auto k = tuner.get(make_spec(kScaleCopy, DType::kF16, dev.arch), Shape{8, 64, 56, 56, 1});
  EXPECT_EQ(k.tier, LookupTier::kTuned);
  ASSERT_TRUE(k.tuning.has_value());
  EXPECT_EQ(k.tuning->candidates.size(), 4u);
}

}  // namespace
