// Float64 CPU reference of the depthwise convolution. See include/lkjit/dwconv_reference.h and docs/dwconv.md.
// Each pass is its equation's loop nest; dgrad is the literal scatter adjoint of the forward, not the gather
// or rotated-filter forms the kernels use, so the two formulations check each other.
#include "lkjit/dwconv_reference.h"

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

namespace lkjit::ref {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument("dwconv: " + msg); }

void check_at_least(const char* name, int64_t v, int64_t lo) {
  if (v < lo) fail(std::string(name) + "=" + std::to_string(v) + " is out of range; supported: " + name + " >= " +
                   std::to_string(lo));
}

void check_size(const char* what, size_t got, int64_t expected) {
  if (got != static_cast<size_t>(expected))
    fail(std::string(what) + " has " + std::to_string(got) + " elements, expected " + std::to_string(expected));
}

int64_t out_extent(int64_t n, int k, int s, int d, int before, int after, const char* axis) {
  const int64_t span = n + before + after - int64_t(d) * (k - 1) - 1;
  if (span < 0)
    fail(std::string(axis) + "=" + std::to_string(n) + " with padding " + std::to_string(before) + "+" +
         std::to_string(after) + " is shorter than the dilated filter " + std::to_string(int64_t(d) * (k - 1) + 1) +
         ": no output");
  return span / s + 1;
}

// Validates the arguments and the input extents; returns the output extents.
struct Out {
  int64_t Ho, Wo;
};
Out validate(DWConvShape s, const DWConvArgs& a) {
  check_at_least("B", s.B, 1);
  check_at_least("C", s.C, 1);
  check_at_least("H", s.H, 1);
  check_at_least("W", s.W, 1);
  check_at_least("kh", a.kh, 1);
  check_at_least("kw", a.kw, 1);
  check_at_least("stride", a.stride, 1);
  check_at_least("dil", a.dil, 1);
  check_at_least("pad_top", a.pad_top, 0);
  check_at_least("pad_bottom", a.pad_bottom, 0);
  check_at_least("pad_left", a.pad_left, 0);
  check_at_least("pad_right", a.pad_right, 0);
  return {out_extent(s.H, a.kh, a.stride, a.dil, a.pad_top, a.pad_bottom, "H"),
          out_extent(s.W, a.kw, a.stride, a.dil, a.pad_left, a.pad_right, "W")};
}

}  // namespace

DWConvArgs dwconv_same(int kh, int kw, int dil) {
  DWConvArgs a;
  a.kh = kh;
  a.kw = kw;
  a.dil = dil;
  a.stride = 1;
  a.pad_top = dil * (kh - 1) / 2;
  a.pad_bottom = dil * (kh - 1) - a.pad_top;
  a.pad_left = dil * (kw - 1) / 2;
  a.pad_right = dil * (kw - 1) - a.pad_left;
  return a;
}

int64_t dwconv_out_h(int64_t H, const DWConvArgs& a) {
  return out_extent(H, a.kh, a.stride, a.dil, a.pad_top, a.pad_bottom, "H");
}
int64_t dwconv_out_w(int64_t W, const DWConvArgs& a) {
  return out_extent(W, a.kw, a.stride, a.dil, a.pad_left, a.pad_right, "W");
}

std::vector<double> dwconv_forward(const std::vector<double>& x, DWConvShape s, const std::vector<double>& w,
                                   const std::vector<double>& bias, const DWConvArgs& a) {
  const auto [Ho, Wo] = validate(s, a);
  check_size("x", x.size(), s.numel());
  check_size("w", w.size(), s.C * a.kh * a.kw);
  if (!bias.empty()) check_size("bias", bias.size(), s.C);
  std::vector<double> y(static_cast<size_t>(s.B * s.C * Ho * Wo));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t c = 0; c < s.C; ++c) {
      const double* xp = x.data() + (b * s.C + c) * s.H * s.W;
      const double* wp = w.data() + c * a.kh * a.kw;
      double* yp = y.data() + (b * s.C + c) * Ho * Wo;
      for (int64_t i = 0; i < Ho; ++i)
        for (int64_t j = 0; j < Wo; ++j) {
          double acc = bias.empty() ? 0.0 : bias[c];
          for (int u = 0; u < a.kh; ++u) {
            const int64_t h = i * a.stride + int64_t(u) * a.dil - a.pad_top;
            if (h < 0 || h >= s.H) continue;
            for (int v = 0; v < a.kw; ++v) {
              const int64_t q = j * a.stride + int64_t(v) * a.dil - a.pad_left;
              if (q < 0 || q >= s.W) continue;
              acc += wp[u * a.kw + v] * xp[h * s.W + q];
            }
          }
          yp[i * Wo + j] = acc;
        }
    }
  return y;
}

std::vector<double> dwconv_dgrad(const std::vector<double>& dy, DWConvShape s, const std::vector<double>& w,
                                  const DWConvArgs& a) {
  const auto [Ho, Wo] = validate(s, a);
  check_size("dy", dy.size(), s.B * s.C * Ho * Wo);
  check_size("w", w.size(), s.C * a.kh * a.kw);
  std::vector<double> dx(static_cast<size_t>(s.numel()), 0.0);
  // Scatter: every forward term w[u,v] x[h,q] of y[i,j] sends w[u,v] dy[i,j] to dx[h,q].
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t c = 0; c < s.C; ++c) {
      const double* gp = dy.data() + (b * s.C + c) * Ho * Wo;
      const double* wp = w.data() + c * a.kh * a.kw;
      double* dp = dx.data() + (b * s.C + c) * s.H * s.W;
      for (int64_t i = 0; i < Ho; ++i)
        for (int64_t j = 0; j < Wo; ++j)
          for (int u = 0; u < a.kh; ++u) {
            const int64_t h = i * a.stride + int64_t(u) * a.dil - a.pad_top;
            if (h < 0 || h >= s.H) continue;
            for (int v = 0; v < a.kw; ++v) {
              const int64_t q = j * a.stride + int64_t(v) * a.dil - a.pad_left;
              if (q < 0 || q >= s.W) continue;
              dp[h * s.W + q] += wp[u * a.kw + v] * gp[i * Wo + j];
            }
          }
    }
  return dx;
}

std::vector<double> dwconv_wgrad(const std::vector<double>& x, DWConvShape s, const std::vector<double>& dy,
                                  const DWConvArgs& a) {
  const auto [Ho, Wo] = validate(s, a);
  check_size("x", x.size(), s.numel());
  check_size("dy", dy.size(), s.B * s.C * Ho * Wo);
  std::vector<double> dw(static_cast<size_t>(s.C * a.kh * a.kw), 0.0);
  for (int64_t c = 0; c < s.C; ++c)
    for (int u = 0; u < a.kh; ++u)
      for (int v = 0; v < a.kw; ++v) {
        double acc = 0.0;
        for (int64_t b = 0; b < s.B; ++b) {
          const double* xp = x.data() + (b * s.C + c) * s.H * s.W;
          const double* gp = dy.data() + (b * s.C + c) * Ho * Wo;
          for (int64_t i = 0; i < Ho; ++i) {
            const int64_t h = i * a.stride + int64_t(u) * a.dil - a.pad_top;
            if (h < 0 || h >= s.H) continue;
            for (int64_t j = 0; j < Wo; ++j) {
              const int64_t q = j * a.stride + int64_t(v) * a.dil - a.pad_left;
              if (q < 0 || q >= s.W) continue;
              acc += gp[i * Wo + j] * xp[h * s.W + q];
            }
          }
        }
        dw[(c * a.kh + u) * a.kw + v] = acc;
      }
  return dw;
}

std::vector<double> dwconv_dbias(const std::vector<double>& dy, DWConvShape s, const DWConvArgs& a) {
  const auto [Ho, Wo] = validate(s, a);
  check_size("dy", dy.size(), s.B * s.C * Ho * Wo);
  std::vector<double> db(static_cast<size_t>(s.C), 0.0);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t c = 0; c < s.C; ++c)
      for (int64_t e = 0; e < Ho * Wo; ++e) db[c] += dy[(b * s.C + c) * Ho * Wo + e];
  return db;
}

DWConvParamsRef dwconv_init(int64_t C, int kh, int kw, bool bias, uint64_t seed) {
  check_at_least("C", C, 1);
  check_at_least("kh", kh, 1);
  check_at_least("kw", kw, 1);
  std::mt19937_64 rng(seed);
  const double bound = 1.0 / std::sqrt(double(kh) * kw);
  std::uniform_real_distribution<double> U(-bound, bound);
  DWConvParamsRef p;
  p.w.resize(static_cast<size_t>(C * kh * kw));
  for (double& e : p.w) e = U(rng);
  if (bias) {
    p.bias.resize(static_cast<size_t>(C));
    for (double& e : p.bias) e = U(rng);
  }
  return p;
}

}  // namespace lkjit::ref
