// Float64 CPU reference of WBMM, windowed batch matrix multiplication (Song et al., "WBMM: Windowed Batch
// Matrix Multiplication for Efficient Large Receptive Field Convolution", ICML 2026; docs/wbmm.md). The
// ground truth of every WBMM kernel test, in two independent forms:
//   kDirect: on image coordinates, no partition copies. Table mode: a (2wh-1) x (2ww-1) cross-correlation
//            with kernel R_c inside each window, zero at the window borders (it never crosses one):
//            y[b,c,p] = sum_{q in window(p)} x[b,c,q] R[c, tap(q - p)] (+ x[b,c,p]) (+ bias[c]).
//            Dense mode: y[p] = sum_{q in window(p)} x[q] M[c, i(q), j(p)].
//   kBmm:    the published algorithm literally: zero-pad bottom/right to whole windows, partition into
//            T (C, N, d), materialise M (C, d, d), Y = T M (+ T) (+ bias), un-partition and crop.
// Windows: n = (b*nH + h)*nW + v, nH = ceil(H/wh), nW = ceil(W/ww); positions p = ph*ww + pw;
// I[i, j] = (ih - jh + wh - 1)(2ww - 1) + (iw - jw + ww - 1), M[c, i, j] = R[c, I[i, j]] (row i = input).
//
// Layout: NCHW, contiguous, double. Parameters: R (C, K) with K = (2wh-1)(2ww-1) (the reference module's
// relative_position_bias_table), or M (C, d, d), d = wh*ww; bias (C) or empty. Output: (B, C, H, W).
// Errors: std::invalid_argument naming the bad value and the allowed range.
#pragma once
#include <cstdint>
#include <vector>

namespace lkjit::ref {

struct WBMMShape {
  int64_t B = 1, C = 1, H = 1, W = 1;
  int64_t numel() const { return B * C * H * W; }
};

struct WBMMWeights {
  int C = 0, wh = 7, ww = 7;
  bool dense = false;     // false: table R; true: dense M
  bool identity = true;   // the + T shortcut of the op (false: the deploy form, folded into R or M)
  std::vector<double> R;  // (C, K), table mode
  std::vector<double> M;  // (C, d, d), dense mode
  std::vector<double> bias;  // (C), or empty for none
};

struct WBMMGrads {
  std::vector<double> dx;     // (B, C, H, W)
  std::vector<double> dR;     // (C, K), table mode
  std::vector<double> dM;     // (C, d, d): dense mode; table mode too in the bmm form (before the reduction)
  std::vector<double> dbias;  // (C), when the weights have a bias
};

enum class WBMMForm { kDirect, kBmm };

// Forward. Throws std::invalid_argument on bad sizes or windows (wh, ww in [1, 16]).
std::vector<double> wbmm_forward(const std::vector<double>& x, WBMMShape s, const WBMMWeights& w, WBMMForm form);

// Backward (docs/wbmm.md): dT = dY M^T (+ dY), dM = T^T dY over all windows, dR[k] = sum of dM over I = k,
// dbias = sum of dY. dy has the output's shape.
WBMMGrads wbmm_backward(const std::vector<double>& x, WBMMShape s, const WBMMWeights& w, const std::vector<double>& dy,
                        WBMMForm form);

// M (C, d, d): materialised from R in table mode, the given M in dense mode.
std::vector<double> wbmm_materialize(const WBMMWeights& w);

// The 180-degree-rotated table R~[c, k] = R[c, K-1-k]: its M is M_c^T (the transpose identity).
std::vector<double> wbmm_rotate_table(const std::vector<double>& R, int C, int wh, int ww);

// The deploy form: the identity folded into the centre tap R[:, (wh-1)(2ww-1) + ww-1] += 1 (or the diagonal
// of a dense M), identity = false; the op is unchanged.
WBMMWeights wbmm_fold_identity(const WBMMWeights& w);

// Weights as the reference module initialises them: R ~ trunc_normal(std 0.02, [-2, 2] std), from a seeded
// generator; a dense M materialised from such a table plus a small random perturbation (dense mode); bias
// ~ U(-0.1, 0.1) when asked for.
WBMMWeights wbmm_init(int C, int wh, int ww, bool dense, bool bias, uint64_t seed);

}  // namespace lkjit::ref
