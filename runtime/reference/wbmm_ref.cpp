// Float64 CPU reference of WBMM. See include/lkjit/wbmm_reference.h and docs/wbmm.md. Written for
// clarity: the direct form walks image pixels and taps, the bmm form copies windows out and back exactly as
// the published PyTorch code does; they share only validation.
#include "lkjit/wbmm_reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>

namespace lkjit::ref {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::invalid_argument("wbmm: " + msg); }

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int table_size(int wh, int ww) { return (2 * wh - 1) * (2 * ww - 1); }
int rel_index(int i, int j, int wh, int ww) {
  return (i / ww - j / ww + wh - 1) * (2 * ww - 1) + (i % ww - j % ww + ww - 1);
}

void check_size(const char* what, size_t got, size_t expected) {
  if (got != expected)
    fail(std::string(what) + " has " + std::to_string(got) + " elements; expected " + std::to_string(expected));
}

void validate(const std::vector<double>& x, WBMMShape s, const WBMMWeights& w) {
  const auto range = [](const char* name, int64_t v, int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      fail(std::string(name) + "=" + std::to_string(v) + " is out of range; supported: [" + std::to_string(lo) + ", " +
           std::to_string(hi) + "]");
  };
  range("wh", w.wh, 1, 16);
  range("ww", w.ww, 1, 16);
  range("B", s.B, 1, INT32_MAX);
  range("C", s.C, 1, INT32_MAX);
  range("H", s.H, 1, INT32_MAX);
  range("W", s.W, 1, INT32_MAX);
  if (w.C != s.C) fail("weights have C=" + std::to_string(w.C) + " channels; the input has C=" + std::to_string(s.C));
  check_size("x", x.size(), static_cast<size_t>(s.numel()));
  const size_t C = static_cast<size_t>(w.C), d = static_cast<size_t>(w.wh) * w.ww;
  if (w.dense) check_size("M", w.M.size(), C * d * d);
  else check_size("R", w.R.size(), C * table_size(w.wh, w.ww));
  if (!w.bias.empty()) check_size("bias", w.bias.size(), C);
}

// M[c, i, j] of either mode.
double m_at(const WBMMWeights& w, int64_t c, int i, int j) {
  const int d = w.wh * w.ww;
  if (w.dense) return w.M[(c * d + i) * d + j];
  return w.R[c * table_size(w.wh, w.ww) + rel_index(i, j, w.wh, w.ww)];
}

// ---- direct form ----------------------------------------------------------------------------------------
// Pixel (y, x) of an image, its window's origin and its position in the window.
struct Pix {
  int64_t y0, x0;  // window origin
  int i;           // position in the window
};
Pix pix(int64_t y, int64_t x, int wh, int ww) {
  return {y / wh * wh, x / ww * ww, static_cast<int>((y % wh) * ww + x % ww)};
}

std::vector<double> forward_direct(const std::vector<double>& x, WBMMShape s, const WBMMWeights& w) {
  std::vector<double> out(x.size());
  const int wh = w.wh, ww = w.ww, K = table_size(wh, ww);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t c = 0; c < s.C; ++c) {
      const double* xp = x.data() + (b * s.C + c) * s.H * s.W;
      double* op = out.data() + (b * s.C + c) * s.H * s.W;
      for (int64_t py = 0; py < s.H; ++py)
        for (int64_t px = 0; px < s.W; ++px) {
          const Pix o = pix(py, px, wh, ww);
          double acc = 0.0;
          if (!w.dense) {
            // Cross-correlation with the (2wh-1) x (2ww-1) kernel R_c: tap (dh, dw) reads pixel (py+dh, px+dw),
            // zero outside the window (the window's zero padding and its border alike).
            for (int dh = -(wh - 1); dh <= wh - 1; ++dh)
              for (int dw = -(ww - 1); dw <= ww - 1; ++dw) {
                const int64_t qy = py + dh, qx = px + dw;
                if (qy < o.y0 || qy >= o.y0 + wh || qx < o.x0 || qx >= o.x0 + ww || qy >= s.H || qx >= s.W) continue;
                acc += xp[qy * s.W + qx] * w.R[c * K + (dh + wh - 1) * (2 * ww - 1) + dw + ww - 1];
              }
          } else {
            for (int64_t qy = o.y0; qy < std::min(o.y0 + wh, s.H); ++qy)
              for (int64_t qx = o.x0; qx < std::min(o.x0 + ww, s.W); ++qx)
                acc += xp[qy * s.W + qx] * m_at(w, c, pix(qy, qx, wh, ww).i, o.i);
          }
          if (w.identity) acc += xp[py * s.W + px];
          if (!w.bias.empty()) acc += w.bias[c];
          op[py * s.W + px] = acc;
        }
    }
  return out;
}

WBMMGrads backward_direct(const std::vector<double>& x, WBMMShape s, const WBMMWeights& w, const std::vector<double>& g) {
  const int wh = w.wh, ww = w.ww, K = table_size(wh, ww), d = wh * ww;
  WBMMGrads r;
  r.dx.assign(x.size(), 0.0);
  if (w.dense) r.dM.assign(static_cast<size_t>(s.C) * d * d, 0.0);
  else r.dR.assign(static_cast<size_t>(s.C) * K, 0.0);
  if (!w.bias.empty()) r.dbias.assign(static_cast<size_t>(s.C), 0.0);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t c = 0; c < s.C; ++c) {
      const size_t plane = static_cast<size_t>((b * s.C + c) * s.H * s.W);
      const double* xp = x.data() + plane;
      const double* gp = g.data() + plane;
      double* dxp = r.dx.data() + plane;
      // Adjoint of the forward, pixel pair by pixel pair: output p read input q with weight M[i(q), j(p)].
      for (int64_t py = 0; py < s.H; ++py)
        for (int64_t px = 0; px < s.W; ++px) {
          const Pix o = pix(py, px, wh, ww);
          const double gv = gp[py * s.W + px];
          for (int64_t qy = o.y0; qy < std::min(o.y0 + wh, s.H); ++qy)
            for (int64_t qx = o.x0; qx < std::min(o.x0 + ww, s.W); ++qx) {
              const int i = pix(qy, qx, wh, ww).i;
              const double xq = xp[qy * s.W + qx];
              if (w.dense) {
                dxp[qy * s.W + qx] += m_at(w, c, i, o.i) * gv;
                r.dM[(c * d + i) * d + o.i] += xq * gv;
              } else {
                const int k = (int)(qy - py + wh - 1) * (2 * ww - 1) + (int)(qx - px) + ww - 1;
                dxp[qy * s.W + qx] += w.R[c * K + k] * gv;
                r.dR[c * K + k] += xq * gv;
              }
            }
          if (w.identity) dxp[py * s.W + px] += gv;
          if (!w.bias.empty()) r.dbias[c] += gv;
        }
    }
  return r;
}

// ---- bmm form ------------------------------------------------------------------------------------------
struct Windows {
  int64_t nH, nW, N;  // per image, per channel: N = B nH nW
};
Windows windows(WBMMShape s, const WBMMWeights& w) {
  Windows v{ceil_div(s.H, w.wh), ceil_div(s.W, w.ww), 0};
  v.N = s.B * v.nH * v.nW;
  return v;
}

// Zero-pad bottom/right, partition: T[c][n][i] (C, N, d).
std::vector<double> partition(const std::vector<double>& x, WBMMShape s, const WBMMWeights& w, Windows v) {
  const int wh = w.wh, ww = w.ww, d = wh * ww;
  std::vector<double> t(static_cast<size_t>(s.C * v.N * d), 0.0);
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < v.nH; ++h)
        for (int64_t u = 0; u < v.nW; ++u) {
          const int64_t n = (b * v.nH + h) * v.nW + u;
          for (int i = 0; i < d; ++i) {
            const int64_t y = h * wh + i / ww, xx = u * ww + i % ww;
            if (y < s.H && xx < s.W) t[(c * v.N + n) * d + i] = x[((b * s.C + c) * s.H + y) * s.W + xx];
          }
        }
  return t;
}

// Un-partition and crop: (C, N, d) -> (B, C, H, W).
std::vector<double> unpartition(const std::vector<double>& t, WBMMShape s, const WBMMWeights& w, Windows v) {
  const int wh = w.wh, ww = w.ww, d = wh * ww;
  std::vector<double> out(static_cast<size_t>(s.numel()), 0.0);
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t h = 0; h < v.nH; ++h)
        for (int64_t u = 0; u < v.nW; ++u) {
          const int64_t n = (b * v.nH + h) * v.nW + u;
          for (int i = 0; i < d; ++i) {
            const int64_t y = h * wh + i / ww, xx = u * ww + i % ww;
            if (y < s.H && xx < s.W) out[((b * s.C + c) * s.H + y) * s.W + xx] = t[(c * v.N + n) * d + i];
          }
        }
  return out;
}

std::vector<double> forward_bmm(const std::vector<double>& x, WBMMShape s, const WBMMWeights& w) {
  const Windows v = windows(s, w);
  const int d = w.wh * w.ww;
  const std::vector<double> T = partition(x, s, w, v), M = wbmm_materialize(w);
  std::vector<double> Y(T.size(), 0.0);
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t n = 0; n < v.N; ++n) {
      const double* tr = T.data() + (c * v.N + n) * d;
      double* yr = Y.data() + (c * v.N + n) * d;
      for (int j = 0; j < d; ++j) {
        double acc = 0.0;
        for (int i = 0; i < d; ++i) acc += tr[i] * M[(c * d + i) * d + j];
        if (w.identity) acc += tr[j];
        if (!w.bias.empty()) acc += w.bias[c];
        yr[j] = acc;
      }
    }
  return unpartition(Y, s, w, v);
}

WBMMGrads backward_bmm(const std::vector<double>& x, WBMMShape s, const WBMMWeights& w, const std::vector<double>& g) {
  const Windows v = windows(s, w);
  const int wh = w.wh, ww = w.ww, d = wh * ww, K = table_size(wh, ww);
  const std::vector<double> T = partition(x, s, w, v), G = partition(g, s, w, v), M = wbmm_materialize(w);
  std::vector<double> dT(T.size(), 0.0);
  WBMMGrads r;
  r.dM.assign(static_cast<size_t>(s.C) * d * d, 0.0);
  for (int64_t c = 0; c < s.C; ++c)
    for (int64_t n = 0; n < v.N; ++n) {
      const double* tr = T.data() + (c * v.N + n) * d;
      const double* gr = G.data() + (c * v.N + n) * d;
      double* dr = dT.data() + (c * v.N + n) * d;
      for (int i = 0; i < d; ++i) {
        double acc = 0.0;
        for (int j = 0; j < d; ++j) acc += gr[j] * M[(c * d + i) * d + j];  // dY M^T
        dr[i] = acc + (w.identity ? gr[i] : 0.0);
        for (int j = 0; j < d; ++j) r.dM[(c * d + i) * d + j] += tr[i] * gr[j];  // T^T dY
      }
    }
  r.dx = unpartition(dT, s, w, v);
  if (!w.dense) {
    r.dR.assign(static_cast<size_t>(s.C) * K, 0.0);
    for (int64_t c = 0; c < s.C; ++c)
      for (int i = 0; i < d; ++i)
        for (int j = 0; j < d; ++j) r.dR[c * K + rel_index(i, j, wh, ww)] += r.dM[(c * d + i) * d + j];
  }
  if (!w.bias.empty()) {
    r.dbias.assign(static_cast<size_t>(s.C), 0.0);
    for (int64_t c = 0; c < s.C; ++c)
      for (int64_t n = 0; n < v.N * d; ++n) r.dbias[c] += G[c * v.N * d + n];  // padded entries are zero
  }
  return r;
}

}  // namespace

std::vector<double> wbmm_materialize(const WBMMWeights& w) {
  const int d = w.wh * w.ww;
  if (w.dense) return w.M;
  std::vector<double> M(static_cast<size_t>(w.C) * d * d);
  for (int64_t c = 0; c < w.C; ++c)
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j) M[(c * d + i) * d + j] = w.R[c * table_size(w.wh, w.ww) + rel_index(i, j, w.wh, w.ww)];
  return M;
}

std::vector<double> wbmm_rotate_table(const std::vector<double>& R, int C, int wh, int ww) {
  const int K = table_size(wh, ww);
  check_size("R", R.size(), static_cast<size_t>(C) * K);
  std::vector<double> r(R.size());
  for (int64_t c = 0; c < C; ++c)
    for (int k = 0; k < K; ++k) r[c * K + k] = R[c * K + K - 1 - k];
  return r;
}

WBMMWeights wbmm_fold_identity(const WBMMWeights& w) {
  WBMMWeights f = w;
  if (!w.identity) return f;
  const int d = w.wh * w.ww, K = table_size(w.wh, w.ww), centre = (w.wh - 1) * (2 * w.ww - 1) + w.ww - 1;
  for (int64_t c = 0; c < w.C; ++c) {
    if (w.dense)
      for (int i = 0; i < d; ++i) f.M[(c * d + i) * d + i] += 1.0;
    else
      f.R[c * K + centre] += 1.0;
  }
  f.identity = false;
  return f;
}

WBMMWeights wbmm_init(int C, int wh, int ww, bool dense, bool bias, uint64_t seed) {
  if (C < 1) fail("C=" + std::to_string(C) + " is out of range; supported: C >= 1");
  if (wh < 1 || wh > 16 || ww < 1 || ww > 16)
    fail("window " + std::to_string(wh) + "x" + std::to_string(ww) + " is out of range; supported: [1, 16] each");
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> N(0.0, 0.02);
  std::uniform_real_distribution<double> U(-0.1, 0.1);
  WBMMWeights w;
  w.C = C, w.wh = wh, w.ww = ww;
  w.R.resize(static_cast<size_t>(C) * table_size(wh, ww));
  for (double& r : w.R) {
    double v;
    do v = N(rng);
    while (std::fabs(v) > 0.04);
    r = v;
  }
  if (dense) {
    w.M = wbmm_materialize(w);
    for (double& m : w.M) m += 0.2 * U(rng);  // dense M needs no Toeplitz structure
    w.R.clear();
    w.dense = true;
  }
  if (bias) {
    w.bias.resize(static_cast<size_t>(C));
    for (double& b : w.bias) b = U(rng);
  }
  return w;
}

std::vector<double> wbmm_forward(const std::vector<double>& x, WBMMShape s, const WBMMWeights& w, WBMMForm form) {
  validate(x, s, w);
  return form == WBMMForm::kDirect ? forward_direct(x, s, w) : forward_bmm(x, s, w);
}

WBMMGrads wbmm_backward(const std::vector<double>& x, WBMMShape s, const WBMMWeights& w, const std::vector<double>& dy,
                        WBMMForm form) {
  validate(x, s, w);
  check_size("dy", dy.size(), static_cast<size_t>(s.numel()));
  return form == WBMMForm::kDirect ? backward_direct(x, s, w, dy) : backward_bmm(x, s, w, dy);
}

}  // namespace lkjit::ref
