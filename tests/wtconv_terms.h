// The WTConv cases that isolate one term of the operator, shared by the GPU tests that run them
// (tests/gpu/wtconv_terms_test.cpp) and the CPU tests that prove, on the float64 reference, that they can fail
// (tests/wtconv_terms_test.cpp): the same problems, seeds, parameters and inputs on both sides.
//
// Isolated terms: with random parameters (testing::random_params), every level's scales but level l's set to
// 0 and the base conv's weights and bias to 0, the output (and dX) is level l's term alone; level l's scales
// are then multiplied by a gain that makes its RMS 1, so a dropped, misplaced or mis-signed level-l term
// exceeds every dtype's tolerance even at level 5 of a 56x56 L=5 layer or levels 7 and 8 of an L=8 one. Level
// 0 is the base term alone (every level scale 0).
//
// The LL chain: inputs of large mean (per plane, random sign) drive the raw low band, which doubles per level
// (X_l is 2^l times a block mean), past the f16 maximum while the output stays well inside it: a kernel that
// kept a low band or Z_l in a 16-bit type would overflow there (README: intermediates are fp32).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "lkjit/numeric.h"
#include "lkjit/reference.h"
#include "lkjit/spec.h"
#include "lkjit/testing.h"
#include "tests/gpu/problems.h"

namespace lkjit::testing {

// The layers whose every term is isolated: the 56x56 L=5 stage, the problem list's L=8 case (levels 6-8 on
// 1x1 coarse maps), an odd-sized stride-2 layer, and a lane-sized (W <= 16) L=8 layer with odd W.
inline std::vector<Problem> term_problems() {
  return {{1, 3, 56, 56, 5, 5, 1, true}, {1, 2, 40, 40, 3, 8, 1, true}, {2, 3, 17, 15, 5, 3, 2, true},
          {2, 3, 16, 11, 3, 8, 1, true}};
}

// The seed of problem i's case for `level`, and its parameters (seed), input (seed + 1) and output
// gradient (seed + 2).
inline uint64_t term_seed(size_t problem, int level) { return 9000 + 100 * problem + uint64_t(level); }

inline ref::Shape4 shape4(const Problem& pb) { return {pb.B, pb.C, pb.H, pb.W}; }
inline size_t out_numel(const Problem& pb) {
  const Shape sh{pb.B, pb.C, pb.H, pb.W, pb.stride};
  return size_t(sh.B * sh.C * sh.H_out() * sh.W_out());
}
inline std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

inline double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::fabs(e));
  return m;
}

inline double rms(const std::vector<double>& v) {
  double s = 0;
  for (double e : v) s += e * e;
  return v.empty() ? 0 : std::sqrt(s / double(v.size()));
}

// p with only `level`'s term left (0: the base), that level's scales times `gain`.
inline ref::WTConvParams isolate(ref::WTConvParams p, int level, double gain = 1) {
  if (level > 0) {
    std::fill(p.base_w.begin(), p.base_w.end(), 0.0);
    std::fill(p.base_b.begin(), p.base_b.end(), 0.0);
  }
  for (int l = 1; l <= p.L; ++l)
    for (double& s : p.level_s[l - 1]) s = l == level ? s * gain : 0.0;
  return p;
}

// One isolated case, ready to run: parameters, input, output gradient (backward) and the reference result.
struct TermCase {
  uint64_t seed = 0;
  ref::WTConvParams params;
  std::vector<float> x, g;
  std::vector<double> want_out;  // forward
  ref::WTConvGrads want;         // backward
};

// Problem i's case for `level`, the level's gain chosen on the reference so that the pass's result (out, or
// dX for the backward) has RMS 1.
inline TermCase term_case(size_t i, int level, DType dt, bool backward) {
  const Problem pb = term_problems().at(i);
  TermCase c;
  c.seed = term_seed(i, level);
  const ref::WTConvParams base = random_params(int(pb.C), pb.k, pb.L, pb.bias, c.seed);
  c.x = random_tensor(size_t(shape4(pb).numel()), dt, c.seed + 1);
  if (backward) c.g = random_tensor(out_numel(pb), dt, c.seed + 2);
  auto result = [&](const ref::WTConvParams& p) {
    return backward ? ref::wtconv_backward(as_double(c.x), shape4(pb), p, as_double(c.g), pb.stride).dx
                    : ref::wtconv_forward(as_double(c.x), shape4(pb), p, pb.stride);
  };
  const double r = level > 0 ? rms(result(isolate(base, level))) : 1.0;
  c.params = isolate(base, level, r > 0 ? 1 / r : 1);
  if (backward)
    c.want = ref::wtconv_backward(as_double(c.x), shape4(pb), c.params, as_double(c.g), pb.stride);
  else
    c.want_out = ref::wtconv_forward(as_double(c.x), shape4(pb), c.params, pb.stride);
  return c;
}

// What kernels with one misplaced term would compute, written as parameter changes of problem pb's isolated
// case: the term dropped, one subband's sign flipped, two subbands swapped, a scale ignored or shared across
// subbands, the term computed one level up or down, two channels' terms swapped; for the base, its bias
// dropped or not scaled (forward only: dX does not see the bias; the backward tests see it in db and ds0), its
// scale ignored. LH and HL are not swapped where the level's input is 1x1: padded to 2x2, its LH and HL are
// equal, and the synthesis signs of both are +1 everywhere, so no kernel could tell them apart.
inline std::vector<std::pair<std::string, ref::WTConvParams>> term_faults(const ref::WTConvParams& p, int level,
                                                                          const Problem& pb, bool backward) {
  std::vector<std::pair<std::string, ref::WTConvParams>> f;
  const int kk = p.k * p.k;
  auto add = [&](std::string name, auto change) {
    ref::WTConvParams q = p;
    change(q);
    f.emplace_back(std::move(name), std::move(q));
  };
  if (level == 0) {
    add("base dropped", [](ref::WTConvParams& q) {
      std::fill(q.base_w.begin(), q.base_w.end(), 0.0);
      std::fill(q.base_b.begin(), q.base_b.end(), 0.0);
    });
    if (!p.base_b.empty() && !backward) {
      add("bias dropped", [](ref::WTConvParams& q) { std::fill(q.base_b.begin(), q.base_b.end(), 0.0); });
      add("bias not scaled", [](ref::WTConvParams& q) {  // s0 (w x + b) -> s0 w x + b
        for (int c = 0; c < q.C; ++c) q.base_b[c] /= q.base_s[c];
      });
    }
    add("base scale ignored", [](ref::WTConvParams& q) { std::fill(q.base_s.begin(), q.base_s.end(), 1.0); });
    if (p.C > 1)
      add("channels 0 and 1 swapped", [&](ref::WTConvParams& q) {
        std::swap_ranges(q.base_w.begin(), q.base_w.begin() + kk, q.base_w.begin() + kk);
        std::swap(q.base_s[0], q.base_s[1]);
        if (!q.base_b.empty()) std::swap(q.base_b[0], q.base_b[1]);
      });
    return f;
  }
  const int l = level - 1;
  add("level dropped", [&](ref::WTConvParams& q) { std::fill(q.level_s[l].begin(), q.level_s[l].end(), 0.0); });
  static const char* kBand[4] = {"LL", "LH", "HL", "HH"};
  for (int s = 0; s < 4; ++s)
    add(std::string(kBand[s]) + " sign flipped", [&](ref::WTConvParams& q) {
      for (int c = 0; c < q.C; ++c) q.level_s[l][4 * c + s] = -q.level_s[l][4 * c + s];
    });
  int64_t h = pb.H, w = pb.W;  // the level's input X_{l-1}
  for (int i = 1; i < level; ++i) h = (h + 1) / 2, w = (w + 1) / 2;
  if (h > 1 || w > 1)
    add("LH and HL swapped", [&](ref::WTConvParams& q) {
      for (int c = 0; c < q.C; ++c) {
        std::swap(q.level_s[l][4 * c + 1], q.level_s[l][4 * c + 2]);
        auto wl = q.level_w[l].begin() + (4 * c + 1) * kk;
        std::swap_ranges(wl, wl + kk, wl + kk);
      }
    });
  add("scale ignored", [&](ref::WTConvParams& q) {
    for (double& s : q.level_s[l]) s = s > 0 ? 1.0 : -1.0;  // the gain's sign kept: a scale of magnitude 1
  });
  add("LL's scale on every subband", [&](ref::WTConvParams& q) {
    for (int c = 0; c < q.C; ++c)
      for (int s = 1; s < 4; ++s) q.level_s[l][4 * c + s] = q.level_s[l][4 * c];
  });
  for (int to : {l - 1, l + 1})
    if (to >= 0 && to < p.L)
      add(to < l ? "computed a level finer" : "computed a level coarser", [&](ref::WTConvParams& q) {
        q.level_w[to] = q.level_w[l];
        q.level_s[to] = q.level_s[l];
        std::fill(q.level_s[l].begin(), q.level_s[l].end(), 0.0);
      });
  if (p.C > 1)
    add("channels 0 and 1 swapped", [&](ref::WTConvParams& q) {
      auto w = q.level_w[l].begin();
      std::swap_ranges(w, w + 4 * kk, w + 4 * kk);
      std::swap_ranges(q.level_s[l].begin(), q.level_s[l].begin() + 4, q.level_s[l].begin() + 4);
    });
  return f;
}

// ---- the LL chain ------------------------------------------------------------------------------------------
inline std::vector<Problem> chain_problems() {
  return {{1, 3, 56, 56, 5, 5, 1, true}, {1, 2, 40, 40, 3, 8, 1, true}, {2, 3, 16, 16, 5, 8, 1, true}};
}
inline constexpr double kF16Max = 65504;
inline constexpr double kChainOutMax = kF16Max / 4;  // outputs and dX stay below this
inline uint64_t chain_seed(size_t problem) { return 9500 + 10 * problem; }

// The largest |X_l| of each level l = 1..L (the raw low band: zero pad, (a+b+c+d)/2), in float64.
inline std::vector<double> low_band_peaks(const std::vector<double>& x, const ref::Shape4& s, int L) {
  std::vector<double> peaks;
  std::vector<double> cur = x;
  int64_t h = s.H, w = s.W;
  for (int l = 1; l <= L; ++l) {
    const int64_t h2 = (h + 1) / 2, w2 = (w + 1) / 2;
    std::vector<double> nxt(size_t(s.B * s.C * h2 * w2));
    double peak = 0;
    for (int64_t p = 0; p < s.B * s.C; ++p)
      for (int64_t i = 0; i < h2; ++i)
        for (int64_t j = 0; j < w2; ++j) {
          double sum = 0;
          for (int dy = 0; dy < 2; ++dy)
            for (int dx = 0; dx < 2; ++dx)
              if (2 * i + dy < h && 2 * j + dx < w) sum += cur[size_t((p * h + 2 * i + dy) * w + 2 * j + dx)];
          const double v = nxt[size_t((p * h2 + i) * w2 + j)] = sum / 2;
          peak = std::max(peak, std::fabs(v));
        }
    peaks.push_back(peak);
    cur = std::move(nxt);
    h = h2;
    w = w2;
  }
  return peaks;
}

// A problem's mean: 1.25 times what takes its low band (all ones scaled) to the f16 maximum.
inline double chain_mean(const Problem& pb) {
  const ref::Shape4 one{1, 1, pb.H, pb.W};
  const auto peaks = low_band_peaks(std::vector<double>(size_t(pb.H * pb.W), 1.0), one, pb.L);
  return 1.25 * kF16Max / *std::max_element(peaks.begin(), peaks.end());
}

// Per plane a mean of random sign and magnitude [0.9, 1] * `mean`, plus N(0, 1) * 4 noise, rounded to dt.
inline std::vector<float> chain_tensor(int64_t planes, int64_t hw, double mean, DType dt, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::normal_distribution<double> n(0.0, 1.0);
  std::vector<float> v(size_t(planes * hw));
  for (int64_t p = 0; p < planes; ++p) {
    const double m = (u(rng) < 0.5 ? -1 : 1) * (0.9 + 0.1 * u(rng)) * mean;
    for (int64_t i = 0; i < hw; ++i) v[size_t(p * hw + i)] = round_to(dt, float(m + 4 * n(rng)));
  }
  return v;
}

// The chain cases' tolerance: fp32 sums of terms of magnitude ~2^L * mean carry absolute errors in proportion
// to the mean, so the absolute part scales with it (the relative part is the dtype's).
inline Tolerance chain_tolerance(DType dt, double mean) {
  Tolerance t = tolerance(dt);
  t.atol *= mean;
  return t;
}

struct ChainCase {
  uint64_t seed = 0;
  double mean = 0;
  ref::WTConvParams params;
  std::vector<float> x, g;
};
inline ChainCase chain_case(size_t i, DType dt) {
  const Problem pb = chain_problems().at(i);
  ChainCase c;
  c.seed = chain_seed(i);
  c.mean = chain_mean(pb);
  c.params = random_params(int(pb.C), pb.k, pb.L, pb.bias, c.seed);
  c.x = chain_tensor(pb.B * pb.C, pb.H * pb.W, c.mean, dt, c.seed + 1);
  c.g = chain_tensor(pb.B * pb.C, int64_t(out_numel(pb)) / (pb.B * pb.C), c.mean, dt, c.seed + 2);
  // Weights (and biases) scaled down where the output or dX would pass kChainOutMax: both are linear in them,
  // and the raw low band that overflows does not depend on them.
  const double peak = std::max(max_abs(ref::wtconv_forward(as_double(c.x), shape4(pb), c.params, pb.stride)),
                               max_abs(ref::wtconv_backward(as_double(c.x), shape4(pb), c.params, as_double(c.g),
                                                            pb.stride).dx));
  if (peak > kChainOutMax) {
    const double f = kChainOutMax / peak;
    for (double& w : c.params.base_w) w *= f;
    for (double& b : c.params.base_b) b *= f;
    for (auto& lw : c.params.level_w)
      for (double& w : lw) w *= f;
  }
  return c;
}

}  // namespace lkjit::testing
