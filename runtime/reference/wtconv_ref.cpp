// Float64 CPU reference of WTConv. See include/lkjit/reference.h and docs/wtconv.md.
// Written for clarity: every step of Algorithm 1 is a separate whole-tensor pass.
#include "lkjit/reference.h"

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

namespace lkjit::ref {
namespace {

// A dense (B, C, H, W) tensor. Level tensors use C = 4*channels, channel 4c+s = subband s of c.
struct Tensor {
  int64_t B = 0, C = 0, H = 0, W = 0;
  std::vector<double> v;

  Tensor() = default;
  Tensor(int64_t b, int64_t c, int64_t h, int64_t w)
      : B(b), C(c), H(h), W(w), v(static_cast<size_t>(b * c * h * w), 0.0) {}

  size_t idx(int64_t b, int64_t c, int64_t y, int64_t x) const {
    return static_cast<size_t>(((b * C + c) * H + y) * W + x);
  }
  double& at(int64_t b, int64_t c, int64_t y, int64_t x) { return v[idx(b, c, y, x)]; }
  double at(int64_t b, int64_t c, int64_t y, int64_t x) const { return v[idx(b, c, y, x)]; }
};

enum Subband { LL = 0, LH = 1, HL = 2, HH = 3 };

// ---------------------------------------------------------------------------------------------
// Validation

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument("wtconv: " + msg); }

void check_kernel_size(int k) {
  // Even k is legal in the reference module (asymmetric pad) but not supported here: reject it.
  if (k < 1 || k % 2 == 0) fail("kernel size k must be odd and >= 1, got " + std::to_string(k));
}

void check_size(const char* what, size_t got, size_t expected) {
  if (got != expected)
    fail(std::string(what) + " has " + std::to_string(got) + " elements, expected " +
         std::to_string(expected));
}

void validate(const std::vector<double>& x, Shape4 s, const WTConvParams& p, int stride) {
  if (s.B < 1) fail("batch B must be >= 1, got " + std::to_string(s.B));
  if (s.C < 1) fail("channels C must be >= 1, got " + std::to_string(s.C));
  if (s.H < 1) fail("height H must be >= 1, got " + std::to_string(s.H));
  if (s.W < 1) fail("width W must be >= 1, got " + std::to_string(s.W));
  if (stride < 1) fail("stride must be >= 1, got " + std::to_string(stride));
  check_kernel_size(p.k);
  if (p.L < 0) fail("levels L must be >= 0, got " + std::to_string(p.L));
  if (p.C != s.C)
    fail("params.C = " + std::to_string(p.C) + " does not match input C = " + std::to_string(s.C));
  check_size("x", x.size(), static_cast<size_t>(s.numel()));
  const size_t C = static_cast<size_t>(p.C), kk = static_cast<size_t>(p.k) * p.k;
  check_size("base_w", p.base_w.size(), C * kk);
  if (!p.base_b.empty()) check_size("base_b", p.base_b.size(), C);
  check_size("base_s", p.base_s.size(), C);
  check_size("level_w (number of levels)", p.level_w.size(), static_cast<size_t>(p.L));
  check_size("level_s (number of levels)", p.level_s.size(), static_cast<size_t>(p.L));
  for (int l = 0; l < p.L; ++l) {
    const std::string i = "[" + std::to_string(l) + "]";
    check_size(("level_w" + i).c_str(), p.level_w[l].size(), 4 * C * kk);
    check_size(("level_s" + i).c_str(), p.level_s[l].size(), 4 * C);
  }
}

int64_t out_size(int64_t n, int stride) { return (n + stride - 1) / stride; }

// ---------------------------------------------------------------------------------------------
// Building blocks (and their adjoints)

// Depthwise 'same' cross-correlation with zero padding: y[c,h,w] = sum w[c,u,v] x[c,h+u-R,w+v-R].
Tensor dw(const Tensor& x, const std::vector<double>& w, int k) {
  const int R = (k - 1) / 2;
  Tensor y(x.B, x.C, x.H, x.W);
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t c = 0; c < x.C; ++c)
      for (int64_t h = 0; h < x.H; ++h)
        for (int64_t q = 0; q < x.W; ++q) {
          double acc = 0.0;
          for (int u = 0; u < k; ++u) {
            const int64_t iy = h + u - R;
            if (iy < 0 || iy >= x.H) continue;
            for (int v = 0; v < k; ++v) {
              const int64_t ix = q + v - R;
              if (ix < 0 || ix >= x.W) continue;
              acc += w[(c * k + u) * k + v] * x.at(b, c, iy, ix);
            }
          }
          y.at(b, c, h, q) = acc;
        }
  return y;
}

// Adjoint of dw with respect to its input: dx[h+u-R, w+v-R] += w[u,v] dy[h,w].
Tensor dw_input_grad(const Tensor& dy, const std::vector<double>& w, int k) {
  const int R = (k - 1) / 2;
  Tensor dx(dy.B, dy.C, dy.H, dy.W);
  for (int64_t b = 0; b < dy.B; ++b)
    for (int64_t c = 0; c < dy.C; ++c)
      for (int64_t h = 0; h < dy.H; ++h)
        for (int64_t q = 0; q < dy.W; ++q) {
          const double g = dy.at(b, c, h, q);
          for (int u = 0; u < k; ++u) {
            const int64_t iy = h + u - R;
            if (iy < 0 || iy >= dy.H) continue;
            for (int v = 0; v < k; ++v) {
              const int64_t ix = q + v - R;
              if (ix < 0 || ix >= dy.W) continue;
              dx.at(b, c, iy, ix) += w[(c * k + u) * k + v] * g;
            }
          }
        }
  return dx;
}

// Adjoint of dw with respect to its weights: dw[c,u,v] = sum_{b,h,w} x[c,h+u-R,w+v-R] dy[c,h,w].
std::vector<double> dw_weight_grad(const Tensor& x, const Tensor& dy, int k) {
  const int R = (k - 1) / 2;
  std::vector<double> dwt(static_cast<size_t>(x.C) * k * k, 0.0);
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t c = 0; c < x.C; ++c)
      for (int64_t h = 0; h < x.H; ++h)
        for (int64_t q = 0; q < x.W; ++q) {
          const double g = dy.at(b, c, h, q);
          for (int u = 0; u < k; ++u) {
            const int64_t iy = h + u - R;
            if (iy < 0 || iy >= x.H) continue;
            for (int v = 0; v < k; ++v) {
              const int64_t ix = q + v - R;
              if (ix < 0 || ix >= x.W) continue;
              dwt[(c * k + u) * k + v] += x.at(b, c, iy, ix) * g;
            }
          }
        }
  return dwt;
}

// Multiplies channel c by s[c].
Tensor scaled(const Tensor& x, const std::vector<double>& s) {
  Tensor y = x;
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t c = 0; c < x.C; ++c)
      for (int64_t h = 0; h < x.H; ++h)
        for (int64_t q = 0; q < x.W; ++q) y.at(b, c, h, q) *= s[c];
  return y;
}

// Per-channel sum over (b, h, w) of a * b.
std::vector<double> channel_dot(const Tensor& a, const Tensor& b) {
  std::vector<double> r(static_cast<size_t>(a.C), 0.0);
  for (int64_t n = 0; n < a.B; ++n)
    for (int64_t c = 0; c < a.C; ++c)
      for (int64_t h = 0; h < a.H; ++h)
        for (int64_t q = 0; q < a.W; ++q) r[c] += a.at(n, c, h, q) * b.at(n, c, h, q);
  return r;
}

// One Haar analysis level: zero-pad one row/col bottom/right if odd, then the 2x2 transform with
// taps exactly 1/2. (B,C,h,w) -> (B,4C,ceil(h/2),ceil(w/2)).
Tensor haar_analysis(const Tensor& x) {
  Tensor y(x.B, 4 * x.C, (x.H + 1) / 2, (x.W + 1) / 2);
  auto px = [&](int64_t b, int64_t c, int64_t r, int64_t q) {
    return (r < x.H && q < x.W) ? x.at(b, c, r, q) : 0.0;  // the zero pad
  };
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t c = 0; c < x.C; ++c)
      for (int64_t i = 0; i < y.H; ++i)
        for (int64_t j = 0; j < y.W; ++j) {
          const double a = px(b, c, 2 * i, 2 * j), bb = px(b, c, 2 * i, 2 * j + 1);
          const double cc = px(b, c, 2 * i + 1, 2 * j), d = px(b, c, 2 * i + 1, 2 * j + 1);
          y.at(b, 4 * c + LL, i, j) = 0.5 * (a + bb + cc + d);
          y.at(b, 4 * c + LH, i, j) = 0.5 * (a + bb - cc - d);
          y.at(b, 4 * c + HL, i, j) = 0.5 * (a - bb + cc - d);
          y.at(b, 4 * c + HH, i, j) = 0.5 * (a - bb - cc + d);
        }
  return y;
}

// One Haar synthesis level cropped to (h, w). The 2x2 matrix is symmetric and self-inverse, so this
// is both the inverse and the transpose (adjoint) of haar_analysis: crop is the adjoint of the pad.
Tensor haar_synthesis(const Tensor& y, int64_t h, int64_t w) {
  Tensor x(y.B, y.C / 4, h, w);
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t c = 0; c < x.C; ++c)
      for (int64_t r = 0; r < h; ++r)
        for (int64_t q = 0; q < w; ++q) {
          const int64_t i = r / 2, j = q / 2;
          const double sy = (r & 1) ? -1.0 : 1.0, sx = (q & 1) ? -1.0 : 1.0;
          x.at(b, c, r, q) = 0.5 * (y.at(b, 4 * c + LL, i, j) + sy * y.at(b, 4 * c + LH, i, j) +
                                    sx * y.at(b, 4 * c + HL, i, j) +
                                    sy * sx * y.at(b, 4 * c + HH, i, j));
        }
  return x;
}

// LL band of a level tensor: (B,4C,h,w) -> (B,C,h,w).
Tensor low_band(const Tensor& y) {
  Tensor x(y.B, y.C / 4, y.H, y.W);
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t c = 0; c < x.C; ++c)
      for (int64_t r = 0; r < x.H; ++r)
        for (int64_t q = 0; q < x.W; ++q) x.at(b, c, r, q) = y.at(b, 4 * c + LL, r, q);
  return x;
}

// y[LL] += x, the inverse shape mapping of low_band.
void add_to_low_band(Tensor& y, const Tensor& x) {
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t c = 0; c < x.C; ++c)
      for (int64_t r = 0; r < x.H; ++r)
        for (int64_t q = 0; q < x.W; ++q) y.at(b, 4 * c + LL, r, q) += x.at(b, c, r, q);
}

// ---------------------------------------------------------------------------------------------
// Forward, keeping what the backward needs

struct Analysis {
  std::vector<int64_t> h, w;  // spatial size of X_{l-1}, index l-1 (before padding)
  std::vector<Tensor> Y;      // Y_l = Haar(pad(X_{l-1}))
  std::vector<Tensor> conv;   // dw(Y_l, W_l), before the level scale
};

// Analysis chain: the raw (unfiltered) LL of each level feeds the next.
Analysis analyse(const Tensor& X, const WTConvParams& p) {
  Analysis a;
  Tensor cur = X;
  for (int l = 0; l < p.L; ++l) {
    a.h.push_back(cur.H);
    a.w.push_back(cur.W);
    a.Y.push_back(haar_analysis(cur));
    a.conv.push_back(dw(a.Y.back(), p.level_w[l], p.k));
    cur = low_band(a.Y.back());
  }
  return a;
}

// dw(X, W0) + b, before the base scale.
Tensor base_conv(const Tensor& X, const WTConvParams& p) {
  Tensor y = dw(X, p.base_w, p.k);
  if (!p.base_b.empty())
    for (int64_t b = 0; b < y.B; ++b)
      for (int64_t c = 0; c < y.C; ++c)
        for (int64_t r = 0; r < y.H; ++r)
          for (int64_t q = 0; q < y.W; ++q) y.at(b, c, r, q) += p.base_b[c];
  return y;
}

Tensor to_tensor(const std::vector<double>& x, Shape4 s) {
  Tensor t(s.B, s.C, s.H, s.W);
  t.v = x;
  return t;
}

// Full-resolution output (before stride subsampling).
Tensor forward_full(const WTConvParams& p, const Tensor& base, const Analysis& a) {
  // Synthesis bottom-up: R_l = crop(Synth(Z_l + [R_{l+1} into LL])).
  Tensor R;
  for (int l = p.L - 1; l >= 0; --l) {
    Tensor Z = scaled(a.conv[l], p.level_s[l]);
    if (l + 1 < p.L) add_to_low_band(Z, R);
    R = haar_synthesis(Z, a.h[l], a.w[l]);
  }
  Tensor out = scaled(base, p.base_s);  // the base scale multiplies the bias too
  if (p.L > 0)
    for (size_t i = 0; i < out.v.size(); ++i) out.v[i] += R.v[i];
  return out;
}

std::vector<double> subsample(const Tensor& t, int stride) {
  const int64_t Ho = out_size(t.H, stride), Wo = out_size(t.W, stride);
  std::vector<double> o;
  o.reserve(static_cast<size_t>(t.B * t.C * Ho * Wo));
  for (int64_t b = 0; b < t.B; ++b)
    for (int64_t c = 0; c < t.C; ++c)
      for (int64_t r = 0; r < Ho; ++r)
        for (int64_t q = 0; q < Wo; ++q) o.push_back(t.at(b, c, r * stride, q * stride));
  return o;
}

// Adjoint of subsample: g placed at the kept positions of a zero full-resolution tensor.
Tensor scatter(const std::vector<double>& g, Shape4 s, int stride) {
  const int64_t Ho = out_size(s.H, stride), Wo = out_size(s.W, stride);
  Tensor t(s.B, s.C, s.H, s.W);
  size_t i = 0;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t c = 0; c < s.C; ++c)
      for (int64_t r = 0; r < Ho; ++r)
        for (int64_t q = 0; q < Wo; ++q) t.at(b, c, r * stride, q * stride) = g[i++];
  return t;
}

}  // namespace

// -----------------------------------------------------------------------------------------------

std::vector<double> wtconv_forward(const std::vector<double>& x, Shape4 s, const WTConvParams& p,
                                   int stride) {
  validate(x, s, p, stride);
  const Tensor X = to_tensor(x, s);
  return subsample(forward_full(p, base_conv(X, p), analyse(X, p)), stride);
}

std::vector<double> wtconv_forward_closed_form(const std::vector<double>& x, Shape4 s,
                                               const WTConvParams& p, int stride) {
  validate(x, s, p, stride);
  const Tensor X = to_tensor(x, s);
  const Analysis a = analyse(X, p);
  std::vector<Tensor> Z;
  for (int l = 0; l < p.L; ++l) Z.push_back(scaled(a.conv[l], p.level_s[l]));

  // Only the kept output pixels are computed, base conv included, straight from X and Z_l.
  const int R = (p.k - 1) / 2;
  const int64_t Ho = out_size(s.H, stride), Wo = out_size(s.W, stride);
  std::vector<double> out;
  out.reserve(static_cast<size_t>(s.B * s.C * Ho * Wo));
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t c = 0; c < s.C; ++c)
      for (int64_t oy = 0; oy < Ho; ++oy)
        for (int64_t ox = 0; ox < Wo; ++ox) {
          const int64_t y = oy * stride, xx = ox * stride;
          double base = p.base_b.empty() ? 0.0 : p.base_b[c];
          for (int u = 0; u < p.k; ++u)
            for (int v = 0; v < p.k; ++v) {
              const int64_t iy = y + u - R, ix = xx + v - R;
              if (iy >= 0 && iy < s.H && ix >= 0 && ix < s.W)
                base += p.base_w[(c * p.k + u) * p.k + v] * X.at(b, c, iy, ix);
            }
          // Eq. 7: level l (1-based) contributes 2^-l times a signed sum of its four subbands at
          // (y >> l, x >> l); the sign picks the position inside each 2x2 block on the way up.
          double r = 0.0;
          for (int l = 1; l <= p.L; ++l) {
            const Tensor& z = Z[l - 1];
            const int64_t i = y >> l, j = xx >> l;
            const double sy = ((y >> (l - 1)) & 1) ? -1.0 : 1.0;
            const double sx = ((xx >> (l - 1)) & 1) ? -1.0 : 1.0;
            r += std::ldexp(z.at(b, 4 * c + LL, i, j) + sy * z.at(b, 4 * c + LH, i, j) +
                                sx * z.at(b, 4 * c + HL, i, j) +
                                sy * sx * z.at(b, 4 * c + HH, i, j),
                            -l);
          }
          out.push_back(p.base_s[c] * base + r);
        }
  return out;
}

WTConvGrads wtconv_backward(const std::vector<double>& x, Shape4 s, const WTConvParams& p,
                            const std::vector<double>& g, int stride) {
  validate(x, s, p, stride);
  check_size("g", g.size(),
             static_cast<size_t>(s.B * s.C * out_size(s.H, stride) * out_size(s.W, stride)));
  const Tensor X = to_tensor(x, s);
  const Tensor base = base_conv(X, p);
  const Analysis a = analyse(X, p);
  const Tensor G = scatter(g, s, stride);
  WTConvGrads gr;

  // Base path: out = s0 * (dw(X, W0) + b).
  const Tensor sG = scaled(G, p.base_s);
  Tensor dX = dw_input_grad(sG, p.base_w, p.k);
  gr.base_w = dw_weight_grad(X, sG, p.k);
  gr.base_s = channel_dot(G, base);
  if (!p.base_b.empty()) {
    gr.base_b.assign(static_cast<size_t>(s.C), 0.0);
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t c = 0; c < s.C; ++c)
        for (int64_t r = 0; r < s.H; ++r)
          for (int64_t q = 0; q < s.W; ++q) gr.base_b[c] += sG.at(b, c, r, q);
  }

  // Synthesis backward, top-down: the adjoint of crop(Synth(.)) is Haar(pad(.)); R_{l+1} entered
  // level l's LL band, so its gradient is dZ_l[LL].
  std::vector<Tensor> dZ;
  Tensor dR = G;
  for (int l = 0; l < p.L; ++l) {
    dZ.push_back(haar_analysis(dR));
    dR = low_band(dZ.back());
  }

  // Per level: Z_l = s_l * dw(Y_l, W_l).
  std::vector<Tensor> dY;
  for (int l = 0; l < p.L; ++l) {
    const Tensor sdZ = scaled(dZ[l], p.level_s[l]);
    dY.push_back(dw_input_grad(sdZ, p.level_w[l], p.k));
    gr.level_w.push_back(dw_weight_grad(a.Y[l], sdZ, p.k));
    gr.level_s.push_back(channel_dot(dZ[l], a.conv[l]));
  }

  // Analysis backward, bottom-up: X_l = Y_l[LL] routes X_l's gradient into Y_l's LL band, and the
  // adjoint of Haar(pad(.)) is crop(Synth(.)).
  Tensor carry;
  for (int l = p.L - 1; l >= 0; --l) {
    if (l + 1 < p.L) add_to_low_band(dY[l], carry);
    carry = haar_synthesis(dY[l], a.h[l], a.w[l]);
  }
  if (p.L > 0)
    for (size_t i = 0; i < dX.v.size(); ++i) dX.v[i] += carry.v[i];
  gr.dx = std::move(dX.v);
  return gr;
}

WTConvParams init_params(int C, int k, int L, bool bias, uint64_t seed) {
  if (C < 1) fail("channels C must be >= 1, got " + std::to_string(C));
  check_kernel_size(k);
  if (L < 0) fail("levels L must be >= 0, got " + std::to_string(L));

  // kaiming_uniform(a=sqrt(5)), fan_in = k*k: gain = sqrt(2/(1+a^2)) = 1/sqrt(3), bound =
  // gain * sqrt(3/fan_in) = 1/sqrt(fan_in) = 1/k. The conv bias uses U(-1/sqrt(fan_in), ..) too.
  std::mt19937_64 rng(seed);
  const double bound = 1.0 / k;
  std::uniform_real_distribution<double> U(-bound, bound);
  auto fill = [&](size_t n) {
    std::vector<double> v(n);
    for (double& e : v) e = U(rng);
    return v;
  };

  WTConvParams p;
  p.C = C;
  p.k = k;
  p.L = L;
  const size_t kk = static_cast<size_t>(k) * k;
  p.base_w = fill(static_cast<size_t>(C) * kk);
  if (bias) p.base_b = fill(static_cast<size_t>(C));
  p.base_s.assign(static_cast<size_t>(C), 1.0);
  for (int l = 0; l < L; ++l) {
    p.level_w.push_back(fill(4 * static_cast<size_t>(C) * kk));
    p.level_s.emplace_back(4 * static_cast<size_t>(C), 0.1);
  }
  return p;
}

}  // namespace lkjit::ref
