// Tests of the depthwise kernels' shared index math (templates/dwconv/geometry.cuh, compiled here as plain C++)
// against brute force at its boundaries: output extents, the axis maps' terms (forward, rotated dgrad, stride-2
// gather) against the op's equations, thread slots covering a tile once, input spans and their bounds, the
// ring stages of direct.cuh, window reads inside the staged rows, wgrad's phases, regions, chunks and
// partial indexing. Then the generator-side functions (generator/ops/dwconv_geometry.h): every default
// tile is accepted, rejections name the value, spec and problem errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <set>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

#include "generator/ops/dwconv_geometry.h"
#include "templates/dwconv/geometry.cuh"

namespace {

using ::testing::HasSubstr;
using lkjit::dwc::AxisMap;
namespace dwc = lkjit::dwc;
namespace gd = lkjit::gen::dwconv;

constexpr int kKs[] = {1, 2, 3, 4, 5, 6, 7, 9, 13, 31, 63};

long long mod(long long a, long long m) { return ((a % m) + m) % m; }

// Every (mode, k, s, d, p) of one axis the kernels take: forward at stride 1 and 2, dgrad (flip at stride 1,
// gather at 2), every dilation, padding 0 .. d(k-1)+1.
template <class F>
void for_each_axis(F f, bool small_k = false) {
  for (int k : kKs) {
    if (small_k && k > 13) continue;
    for (int s = 1; s <= 2; ++s)
      for (int d = 1; d <= 4; ++d)
        for (int p : {0, 1, d * (k - 1) / 2, d * (k - 1), d * (k - 1) + 1}) {
          f(dwc::fwd_axis(k, s, d, p));
          f(dwc::dgrad_axis(k, s, d, p));
        }
  }
}

std::string name(const AxisMap& m) {
  return "mode=" + std::to_string(m.mode) + " k=" + std::to_string(m.k) + " s=" + std::to_string(m.s) +
         " d=" + std::to_string(m.d) + " p=" + std::to_string(m.p);
}

TEST(DWConvGeometry, OutExtentCountsTheWindowsThatFit) {
  for (int n = 1; n <= 20; ++n)
    for (int k = 1; k <= 9; ++k)
      for (int s = 1; s <= 2; ++s)
        for (int d = 1; d <= 4; ++d)
          for (int pb = 0; pb <= 4; ++pb)
            for (int pa = 0; pa <= 4; ++pa) {
              long long count = 0;
              while (count * s + (long long)d * (k - 1) <= n + pb + pa - 1) ++count;
              ASSERT_EQ(dwc::out_extent(n, k, s, d, pb, pa), count)
                  << "n=" << n << " k=" << k << " s=" << s << " d=" << d << " pads " << pb << "," << pa;
            }
}

TEST(DWConvGeometry, SamePaddingKeepsTheSizeWithTheSmallerHalfBefore) {
  for (int k = 1; k <= 63; ++k)
    for (int d = 1; d <= 4; ++d) {
      const int b = dwc::same_pad_before(k, d), a = dwc::same_pad_after(k, d);
      EXPECT_EQ(b + a, d * (k - 1));
      EXPECT_EQ(b, d * (k - 1) / 2);
      EXPECT_GE(a, b);
      for (int n : {1, 5, 56}) EXPECT_EQ(dwc::out_extent(n, k, 1, d, b, a), n);
    }
}

// The (forward tap u, input index) pairs an axis map gives output o are exactly the op's terms:
// forward y[o] takes x[o*s + u*d - p] for every u; dgrad dx[o] takes dy[i] for every u with o = i*s + u*d - p.
TEST(DWConvGeometry, AxisMapTermsAreTheOpsTerms) {
  for_each_axis([](const AxisMap& m) {
    SCOPED_TRACE(name(m));
    for (long long o = 0; o < 24; ++o) {
      std::set<std::pair<int, long long>> got, want;
      for (int a = 0; a < m.taps(); ++a) {
        const int u = m.tap(m.cls(o), a);
        if (u < 0) continue;
        ASSERT_LT(u, m.k);
        ASSERT_TRUE(got.insert({u, m.base(o) + (long long)m.dd() * a}).second) << "tap u=" << u << " twice";
      }
      for (int u = 0; u < m.k; ++u) {
        if (m.mode == dwc::kFwd) {
          want.insert({u, o * m.s + (long long)u * m.d - m.p});
        } else if (mod(o + m.p - (long long)u * m.d, m.s) == 0) {
          want.insert({u, (o + m.p - (long long)u * m.d) / m.s});
        }
      }
      ASSERT_EQ(got, want) << "o=" << o;
    }
  });
}

// Thread slots: the R outputs of each slot, ostep() apart, cover a tile of n = R*ostep()*m outputs exactly once,
// keep one class, and read one dense window (base() advances by dd()*estep() per output).
TEST(DWConvGeometry, ThreadSlotsCoverTheTileOnceAndShareAWindow) {
  for_each_axis(
      [](const AxisMap& m) {
        SCOPED_TRACE(name(m));
        for (int R : {1, 2, 3, 4, 8})
          for (int mult = 1; mult <= 3; ++mult) {
            const int n = R * m.ostep() * mult;
            for (long long o0 : {0LL, (long long)n, 3LL * n}) {
              std::vector<int> seen(n, 0);
              for (int idx = 0; idx < n / R; ++idx) {
                const long long f = m.first_out(o0, idx, R);
                for (int j = 0; j < R; ++j) {
                  const long long o = f + (long long)j * m.ostep();
                  ASSERT_GE(o, o0);
                  ASSERT_LT(o, o0 + n);
                  ++seen[o - o0];
                  ASSERT_EQ(m.cls(o), m.cls(f));
                  ASSERT_EQ(m.base(o), m.base(f) + (long long)m.dd() * m.estep() * j) << "R=" << R << " j=" << j;
                }
              }
              for (int i = 0; i < n; ++i) ASSERT_EQ(seen[i], 1) << "output " << o0 + i << " R=" << R;
            }
          }
      },
      true);
}

// span_lo / span_hi are the exact extremes of the inputs a tile reads through a range of sub-taps, and
// span_max bounds their extent for every tile start (exactly, in the forward walks).
TEST(DWConvGeometry, SpansAreTheExtremesAndSpanMaxBoundsThem) {
  for_each_axis([](const AxisMap& m) {
    SCOPED_TRACE(name(m));
    for (int n = 1; n <= 12; ++n)
      for (int a0 = 0; a0 < m.taps(); a0 += std::max(1, m.taps() / 3))
        for (int a1 : {a0 + 1, m.taps()}) {
          if (a1 <= a0) continue;
          for (long long o0 = 0; o0 < 8; ++o0) {
            long long lo = 1LL << 40, hi = -(1LL << 40);
            for (long long o = o0; o < o0 + n; ++o)
              for (int a = a0; a < a1; ++a) {
                lo = std::min(lo, m.base(o) + (long long)m.dd() * a);
                hi = std::max(hi, m.base(o) + (long long)m.dd() * a);
              }
            ASSERT_EQ(m.span_lo(o0, n, a0), lo) << "o0=" << o0 << " n=" << n << " a0=" << a0;
            ASSERT_EQ(m.span_hi(o0, n, a1), hi) << "o0=" << o0 << " n=" << n << " a1=" << a1;
            ASSERT_LE(hi - lo + 1, m.span_max(n, a1 - a0)) << "o0=" << o0 << " n=" << n;
            if (m.mode != dwc::kGather) {
              ASSERT_EQ(hi - lo + 1, m.span_max(n, a1 - a0));
            }
          }
        }
  });
}

// direct.cuh's ring: simulate its stages (rows loaded into slot r % ring) and check that every row a thread
// reads in a stage is present, for every tile start, thread slot and window row m that has a valid tap.
TEST(DWConvGeometry, RingStagesHoldEveryRowTheThreadsRead) {
  for_each_axis(
      [](const AxisMap& m0) {
        for (int th_mult : {1, 2}) {
          for (int R : {1, 2, 4}) {
            const int th = R * m0.ostep() * th_mult;
            for (int kc : {1, 2, 3, 8, 64}) {
              const int nay = m0.taps(), kce = std::min(kc, nay);
              const dwc::DirectLayout L = dwc::direct_layout(m0.mode, m0.k, m0.k, m0.s, m0.d, th, th, R, R, kce);
              SCOPED_TRACE(name(m0) + " th=" + std::to_string(th) + " R=" + std::to_string(R) + " kc=" + std::to_string(kce));
              ASSERT_TRUE(L.valid());
              const int ring = L.ring(), EY = m0.estep(), DD = m0.dd();
              for (long long o0 : {0LL, (long long)th, 5LL * th}) {
                const AxisMap& ay = m0;
                const long long row_lo = ay.span_lo(o0, th, 0);
                std::vector<long long> slot(ring, -1);
                int loaded = 0;
                for (int st = 0; st < L.stages(); ++st) {
                  const dwc::RingStage g = dwc::ring_stage(ay, o0, th, kce, st);
                  ASSERT_EQ(g.a0, st * kce);
                  ASSERT_LE(g.hi - g.lo, ring);
                  for (int r = std::max(loaded, g.lo); r < g.hi; ++r) slot[r % ring] = r;
                  loaded = g.hi;
                  for (int iy = 0; iy < th / R; ++iy) {
                    const long long f = ay.first_out(o0, iy, R);
                    const long long roff = ay.base(f) - row_lo;
                    ASSERT_GE(roff, 0);
                    for (int mm = g.a0; mm < (R - 1) * EY + g.a1; ++mm) {
                      bool used = false;
                      for (int i = 0; i < R; ++i) used |= mm - i * EY >= g.a0 && mm - i * EY < g.a1;
                      if (!used) continue;
                      const long long row = roff + (long long)DD * mm;
                      ASSERT_LT(row, g.hi);
                      ASSERT_EQ(slot[row % ring], row) << "stage " << st << " slot " << iy << " m=" << mm;
                    }
                  }
                }
              }
            }
          }
        }
      },
      true);
}

// Every column a thread of direct.cuh reads lies in the staged columns [0, cols()), and its float4 window
// reads (dense layouts) are aligned and inside the row pitch.
TEST(DWConvGeometry, DirectWindowsReadInsideTheStagedRow) {
  for_each_axis([](const AxisMap& ax) {
    for (int rx : {1, 2, 4, 8}) {
      const int tw = rx * ax.ostep() * 2;
      const dwc::DirectLayout L = dwc::direct_layout(ax.mode, ax.k, ax.k, ax.s, ax.d, tw, tw, rx, rx, 1);
      SCOPED_TRACE(name(ax) + " rx=" + std::to_string(rx));
      ASSERT_EQ(L.pitch() % 4, 0);
      ASSERT_EQ(L.ws_floats() % 4, 0);
      const int EX = ax.estep(), BC = L.bc(), NAX = L.nax();
      for (long long o0 : {0LL, (long long)tw, 3LL * tw}) {
        const long long col_lo = ax.span_lo(o0, tw, 0);
        for (int ix = 0; ix < tw / rx; ++ix) {
          const long long off = ax.base(ax.first_out(o0, ix, rx)) - col_lo;
          ASSERT_GE(off, 0);
          if (L.vec()) {
            ASSERT_EQ(off % 4, 0) << "ix=" << ix;
          }
          for (int b0 = 0; b0 < NAX; b0 += BC) {
            const int n = std::min(BC, NAX - b0), used = (rx - 1) * EX + n;
            ASSERT_LE(used, L.win());
            for (int j = 0; j < rx; ++j)
              for (int b = 0; b < n; ++b) ASSERT_LT(off + (long long)ax.dd() * (j * EX + b0 + b), L.cols());
            const long long last = L.vec() ? off + b0 + (used + 3) / 4 * 4 - 1 : off + (long long)ax.dd() * (b0 + used - 1);
            ASSERT_LT(last, L.pitch()) << "ix=" << ix << " b0=" << b0;
          }
        }
      }
    }
  });
}

// wgrad_nhwc.cuh: the phases j = ph + jj*ostep cover every dy column once, and (jj, v) reads x column
// j*s - p + v*d through the dense window index jj*estep + v.
TEST(DWConvGeometry, WgradPhasesCoverEveryColumnOnce) {
  for (int s = 1; s <= 2; ++s)
    for (int d = 1; d <= 4; ++d)
      for (int kw : {1, 3, 4, 7}) {
        const auto L = dwc::wgrad_nhwc_layout(3, kw, s, d, 32, 2, std::min(kw, 4), 128);
        const AxisMap ax{dwc::kFwd, kw, s, d, 2};
        const int P = L.ax.ostep(), E = L.ax.estep();
        for (int Wo = 1; Wo <= 13; ++Wo) {
          std::vector<int> seen(Wo, 0);
          for (int ph = 0; ph < P; ++ph)
            for (int jj = 0; ph + jj * P < Wo; ++jj) {
              const int j = ph + jj * P;
              ++seen[j];
              for (int v = 0; v < kw; ++v)
                ASSERT_EQ(ax.base(ph) + (long long)d * (jj * E + v), (long long)j * s - 2 + (long long)v * d);
            }
          for (int j = 0; j < Wo; ++j) ASSERT_EQ(seen[j], 1) << "s=" << s << " d=" << d << " Wo=" << Wo;
        }
      }
}

// wgrad_direct.cuh's shared memory: the x region covers every (dy row, tap row) and (dy column, tap column)
// the register tiles read, the float4 window reads stay in the pitch, and the split sums fit.
TEST(DWConvGeometry, WgradDirectRegionsHoldEveryTerm) {
  for (int kh : {1, 3, 7, 13, 31})
    for (int kw : {1, 2, 7, 31})
      for (int s = 1; s <= 2; ++s)
        for (int d = 1; d <= 4; d *= 2)
          for (int ru : {1, 2, 4})
            for (int rv : {4, 8})
              for (int kc : {1, 4, 64}) {
                const dwc::WgradDirectLayout L{kh, kw, s, d, 8, 32, ru, rv, std::min(kc, kh), 256};
                if (!L.valid()) continue;
                SCOPED_TRACE("k=" + std::to_string(kh) + "x" + std::to_string(kw) + " s=" + std::to_string(s) +
                             " d=" + std::to_string(d) + " ru=" + std::to_string(ru) + " rv=" + std::to_string(rv));
                const int jc = L.jc();
                ASSERT_EQ(32 % jc, 0);
                for (int uf = 0; uf < L.ucp(); uf += ru)
                  for (int vf = 0; vf < L.vp(); vf += rv)
                    for (int j0 = 0; j0 < 32; j0 += jc) {
                      ASSERT_LT((7 * s + (uf + ru - 1) * d), L.xrows());
                      const int first = j0 * s + vf * d, last = first + L.win() - 1;
                      ASSERT_LT(last, L.xcols());
                      if (L.vec()) {
                        ASSERT_EQ(first % 4, 0);
                        ASSERT_LT(first + (L.win() + 3) / 4 * 4 - 1, L.xpitch());
                      }
                    }
                ASSERT_LE(L.splits() * L.items() * ru * rv, L.red_floats());
                ASSERT_GE(L.splits(), 1);
              }
}

TEST(DWConvGeometry, ChunksPartitionTheWorkEvenly) {
  for (int total : {0, 1, 7, 64, 1000, 3 << 29, 0x7fffffff})
    for (int chunks : {1, 2, 3, 7, 64, 1000, 65536}) {
      long long prev = 0, lo = 1LL << 62, hi = 0;
      ASSERT_EQ(dwc::chunk_begin(total, chunks, 0), 0);
      for (int ch = 0; ch < chunks; ++ch) {
        const long long b = dwc::chunk_begin(total, chunks, ch), e = dwc::chunk_begin(total, chunks, ch + 1);
        ASSERT_EQ(b, prev);
        ASSERT_LE(b, e);
        lo = std::min(lo, e - b), hi = std::max(hi, e - b);
        prev = e;
      }
      ASSERT_EQ(prev, total);
      ASSERT_LE(hi - lo, 1) << "total=" << total << " chunks=" << chunks;
    }
}

TEST(DWConvGeometry, PartialIndexIsABijection) {
  for (int C : {1, 3, 32, 33})
    for (int chunks : {1, 4, 5})
      for (int taps : {1, 9, 49}) {
        for (const auto& st : {dwc::part_strides_direct(C, chunks, taps), dwc::part_strides_nhwc(C, chunks, taps)}) {
          std::vector<int> hit(static_cast<size_t>(dwc::part_floats(C, chunks, taps)), 0);
          for (int ch = 0; ch < chunks; ++ch)
            for (int c = 0; c < C; ++c)
              for (int t = 0; t <= taps; ++t) {
                const long long i = dwc::part_index(st.st, ch, c, t);
                ASSERT_GE(i, 0);
                ASSERT_LT(i, (long long)hit.size());
                ++hit[i];
              }
          for (int h : hit) ASSERT_EQ(h, 1);
        }
        // The NHWC layout keeps channels adjacent (coalesced stores), the direct one taps.
        EXPECT_EQ(dwc::part_strides_nhwc(C, chunks, taps).st[1], 1);
        EXPECT_EQ(dwc::part_strides_direct(C, chunks, taps).st[2], 1);
      }
}

// ---- generator/ops/dwconv_geometry.h ---------------------------------------------------------------------

std::vector<gd::SpecVals> specs() {
  std::vector<gd::SpecVals> v;
  for (lkjit::DType t : {lkjit::DType::kF32, lkjit::DType::kF16, lkjit::DType::kBF16})
    for (auto [kh, kw] : std::vector<std::pair<int, int>>{{1, 1}, {3, 3}, {4, 4}, {7, 7}, {13, 13}, {31, 31},
                                                          {27, 27}, {51, 5}, {5, 51}, {63, 63}, {2, 6}})
      for (int s = 1; s <= 2; ++s)
        for (int d : {1, 2, 3})
          v.push_back({t, kh, kw, s, d, 90});
  return v;
}

std::vector<gd::Problem> problems(const gd::SpecVals& s) {
  std::vector<gd::Problem> v;
  for (auto [B, C, H, W] : std::vector<std::array<int64_t, 4>>{
           {1, 1, 1, 1}, {1, 3, 5, 7}, {64, 96, 56, 56}, {64, 768, 7, 7}, {2, 128, 130, 257}, {1, 1024, 14, 14}}) {
    const gd::Padding pad = s.stride == 1 ? gd::same_padding(s)
                                          : gd::Padding{s.dil * (s.kh - 1) / 2, s.dil * (s.kh - 1) / 2,
                                                        s.dil * (s.kw - 1) / 2, s.dil * (s.kw - 1) / 2};
    if (gd::problem_error(s, B, C, H, W, pad)) continue;
    v.push_back(gd::make_problem(s, B, C, H, W, pad));
  }
  return v;
}

// ---- the tensor-core kernels' Toeplitz walk (dwconv/mma.cuh), emulated on the CPU ---------------------------

// The kernel's walk of one (b, c) plane for a tile shape: the staged input tile (zero outside), the hi and lo
// filter words, every lane's ldmatrix.x4 and B registers from the shared coordinates, each m16n8k16 product by
// the PTX fragment definitions (A registers at mma_a_row/col, B at k = 2t + 8r + e, column g), and the stores
// at mma_c_row/col. Weights are half-integers split hi = floor(w), lo = w - hi, so a dropped part shows; sums
// are exact in double.
struct MmaCase {
  int kh, kw, hin, win, hout, wout, ph, pw;  // the walk's input and output extents and padding (already mirrored)
  bool dgrad;
  int tile_h, tile_w, warps_m, warps_n;
  bool f16;  // lo parts scaled and summed apart (dwc::mma_lo_scale)
};
std::vector<double> mma_emulate(const MmaCase& c, const std::vector<double>& in, const std::vector<double>& w,
                                double bias) {
  const dwc::MmaLayout L{c.kh, c.kw, c.tile_h, c.tile_w};
  const int S = L.ksteps(), mt = c.tile_h / (16 * c.warps_m), nt = c.tile_w / (16 * c.warps_n);
  std::vector<double> out(size_t(c.hout) * c.wout, std::nan(""));
  // Filter words: word e of row u holds taps e - kWOff and e - kWOff + 1.
  auto tap = [&](int u, int v) { return v >= 0 && v < c.kw ? w[dwc::mma_filter_index(c.dgrad, c.kh, c.kw, u, v)] : 0.0; };
  const double lo_scale = dwc::mma_lo_scale(c.f16);
  auto word = [&](int u, int e, int half, bool lo) {
    const double f = tap(u, e - dwc::MmaLayout::kWOff + half), hi = std::floor(f);
    return lo ? (f - hi) * lo_scale : hi;
  };
  for (int t0 = 0; t0 < dwc::tiles(c.hout, c.tile_h) * dwc::tiles(c.wout, c.tile_w); ++t0) {
    const int o0y = t0 / dwc::tiles(c.wout, c.tile_w) * c.tile_h, o0x = t0 % dwc::tiles(c.wout, c.tile_w) * c.tile_w;
    std::vector<double> xs(size_t(L.rows()) * L.pitch(), 0.0);
    for (int r = 0; r < L.rows(); ++r)
      for (int cc = 0; cc < L.cols(); ++cc) {
        const int gi = o0y - c.ph + r, gj = o0x - c.pw + cc;
        if (gi >= 0 && gi < c.hin && gj >= 0 && gj < c.win) xs[size_t(r) * L.pitch() + cc] = in[size_t(gi) * c.win + gj];
      }
    for (int wy = 0; wy < c.warps_m; ++wy)
      for (int wx = 0; wx < c.warps_n; ++wx) {
        const int row0 = 16 * mt * wy, col0 = 16 * nt * wx;
        std::vector<double> acc(size_t(mt) * nt * 2 * 16 * 8, bias);  // [m][n][h] 16 x 8 blocks
        std::vector<double> acc_lo(acc.size(), 0.0);                    // fp16: the scaled lo products
        for (int u = 0; u < c.kh; ++u)
          for (int m = 0; m < mt; ++m)
            for (int cb = 0; cb < nt + S - 1; ++cb) {
              // ldmatrix.x4: matrix q row i from the address of lane 8q + i; lane l's register q gets its row l / 4,
              // elements 2 (l % 4) and 2 (l % 4) + 1. Placed into A through the fragment definition.
              double A[16][16];
              for (int i = 0; i < 16; ++i)
                for (int j = 0; j < 16; ++j) A[i][j] = std::nan("");
              for (int l = 0; l < 32; ++l)
                for (int q = 0; q < 4; ++q)
                  for (int e = 0; e < 2; ++e) {
                    const int src = 8 * q + l / 4;
                    const int r = row0 + 16 * m + u + dwc::ldsm_row(src), col = col0 + 16 * cb + dwc::ldsm_col(src);
                    A[dwc::mma_a_row(l, q)][dwc::mma_a_col(l, q, e)] = xs[size_t(r) * L.pitch() + col + 2 * (l % 4) + e];
                  }
              for (int n = 0; n < nt; ++n) {
                const int s = cb - n;
                if (s < 0 || s >= S) continue;
                for (int h = 0; h < 2; ++h)
                  for (bool lo : {true, false}) {
                    double B[16][8];
                    for (int l = 0; l < 32; ++l)
                      for (int r = 0; r < 2; ++r)
                        for (int e = 0; e < 2; ++e)
                          B[2 * (l % 4) + 8 * r + e][l / 4] = word(u, dwc::mma_b_tap(s, h, l, r, 0) + dwc::MmaLayout::kWOff, e, lo);
                    double* D = (lo && c.f16 ? acc_lo : acc).data() + ((size_t(m) * nt + n) * 2 + h) * 128;
                    for (int i = 0; i < 16; ++i)
                      for (int j = 0; j < 8; ++j)
                        for (int k = 0; k < 16; ++k) D[i * 8 + j] += A[i][k] * B[k][j];
                  }
              }
            }
        for (int l = 0; l < 32; ++l)
          for (int m = 0; m < mt; ++m)
            for (int n = 0; n < nt; ++n)
              for (int h = 0; h < 2; ++h)
                for (int q = 0; q < 4; ++q) {
                  const int oy = o0y + row0 + 16 * m + dwc::mma_c_row(l, q), ox = o0x + col0 + 16 * n + 8 * h + dwc::mma_c_col(l, q);
                  const size_t at = ((size_t(m) * nt + n) * 2 + h) * 128 + dwc::mma_c_row(l, q) * 8 + dwc::mma_c_col(l, q);
                  if (oy < c.hout && ox < c.wout) out[size_t(oy) * c.wout + ox] = acc[at] + acc_lo[at] / lo_scale;
                }
      }
  }
  return out;
}

TEST(DWConvGeometry, MmaToeplitzWalkIsTheCorrelation) {
  std::mt19937 rng(11);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const std::array<int, 4> tiles[] = {{16, 16, 1, 1}, {16, 32, 1, 1}, {64, 32, 1, 2}, {32, 32, 2, 2}, {32, 64, 2, 1}};
  const std::pair<int, int> ks[] = {{1, 1}, {2, 3}, {3, 3}, {7, 7}, {4, 6}, {13, 13}, {31, 31}, {5, 51}, {51, 5}, {63, 63}};
  int checked = 0;
  for (int it = 0; it < 40; ++it) {
    const auto [kh, kw] = ks[it % std::size(ks)];
    const auto& tl = tiles[it % std::size(tiles)];
    const bool dgrad = it % 2 == 1;
    // The forward problem: x (H, W), padding before/after, y (Ho, Wo); dgrad walks dy (Ho, Wo) into dx (H, W).
    const int pt = uni(0, kh), pb = uni(0, kh), pl = uni(0, kw), pr = uni(0, kw);
    const int H = std::max(1, kh - pt - pb) + uni(0, 40), W = std::max(1, kw - pl - pr) + uni(0, 40);
    const int Ho = H + pt + pb - kh + 1, Wo = W + pl + pr - kw + 1;
    ASSERT_GE(Ho, 1);
    ASSERT_GE(Wo, 1);
    MmaCase c{kh, kw, dgrad ? Ho : H, dgrad ? Wo : W, dgrad ? H : Ho, dgrad ? W : Wo,
              dwc::mma_walk_pad(dgrad, kh, pt), dwc::mma_walk_pad(dgrad, kw, pl), dgrad, tl[0], tl[1], tl[2], tl[3],
              it % 3 == 0};
    std::vector<double> in(size_t(c.hin) * c.win), w(size_t(kh) * kw);
    for (auto& v : in) v = uni(-8, 8);
    for (auto& v : w) v = uni(-16, 16) / 2.0;  // half-integers: hi and lo both nonzero
    const double bias = dgrad ? 0.0 : uni(-4, 4);
    const auto got = mma_emulate(c, in, w, bias);
    SCOPED_TRACE(fmt::format("{} k={}x{} in {}x{} pad {},{} tile {}x{} warps {}x{}", dgrad ? "dgrad" : "fwd", kh, kw, c.hin,
                             c.win, pt, pl, tl[0], tl[1], tl[2], tl[3]));
    for (int i = 0; i < c.hout; ++i)
      for (int j = 0; j < c.wout; ++j) {
        double want = bias;
        for (int u = 0; u < kh; ++u)
          for (int v = 0; v < kw; ++v) {
            // forward: x[i + u - pt][j + v - pl]; dgrad (the op's equation): dy[i + pt - u][j + pl - v]
            const int a = dgrad ? i + pt - u : i + u - pt, b = dgrad ? j + pl - v : j + v - pl;
            if (a >= 0 && a < c.hin && b >= 0 && b < c.win) want += w[size_t(u) * kw + v] * in[size_t(a) * c.win + b];
          }
        ASSERT_EQ(got[size_t(i) * c.wout + j], want) << "output (" << i << ", " << j << ")";
        ++checked;
      }
  }
  EXPECT_GT(checked, 10000);
}

// dwconv_wgrad_mma's walk of one (b, c) plane, emulated the same way: the staged dy tile with its zero rows, the x
// rows and their one-element shift, every lane's B words (the even or the shifted copy by the parity of its
// offset) and ldmatrix.x4 rows, the skipped blocks, the ksplit warps' sums added in order. Integer inputs: exact.
std::vector<double> wgrad_mma_emulate(int kh, int kw, int H, int W, int Ho, int Wo, int ph, int pw, int th, int tw,
                                      int wu, int wv, int wk, const std::vector<double>& x, const std::vector<double>& dy) {
  const dwc::WgradMmaLayout L{kh, kw, th, tw, wk, 32 * wu * wv * wk};
  const int MU = L.mu(), NV = L.nv(), MP = L.mp(), NP = L.np(), XR = L.xrows(), GP = L.gpitch(), XP = L.xpitch();
  const int MUW = dwc::cdiv(MU, wu), NVW = dwc::cdiv(NV, wv);
  std::vector<double> red(size_t(wk) * MP * NP, 0.0);
  for (int o0y = 0; o0y < Ho; o0y += th)
    for (int o0x = 0; o0x < Wo; o0x += tw) {
      std::vector<double> gs(size_t(L.grows()) * GP, 0.0), xs(size_t(XR) * XP, 0.0), xo(size_t(XR) * XP, 0.0);
      for (int i = 0; i < th; ++i)
        for (int j = 0; j < tw; ++j)
          if (o0y + i < Ho && o0x + j < Wo) gs[size_t(MP - 1 + i) * GP + j] = dy[size_t(o0y + i) * Wo + o0x + j];
      auto xat = [&](int gi, int gj) { return gi >= 0 && gi < H && gj >= 0 && gj < W ? x[size_t(gi) * W + gj] : 0.0; };
      for (int r = 0; r < XR; ++r)
        for (int cc = 0; cc < XP; ++cc) {
          xs[size_t(r) * XP + cc] = xat(o0y - ph + r, o0x - pw + cc);
          xo[size_t(r) * XP + cc] = cc + 1 < XP ? xat(o0y - ph + r, o0x - pw + cc + 1) : 0.0;
        }
      for (int warp = 0; warp < wu * wv * wk; ++warp) {
        const int kidx = warp % wk, grp = warp / wk, mu0 = grp / wv, nv0 = grp % wv;
        for (int rr = kidx; rr < XR; rr += wk)
          for (int jb = 0; jb < tw / 16; ++jb)
            for (int a = 0; a < MUW; ++a) {
              const int mu = mu0 + a * wu;
              if (mu >= MU || !dwc::wgrad_mma_live(rr, mu, th)) continue;
              double A[16][16];
              for (int l = 0; l < 32; ++l)
                for (int q = 0; q < 4; ++q)
                  for (int e = 0; e < 2; ++e) {
                    const int src = 8 * q + l / 4;  // the lane whose address gives matrix q's row l / 4
                    const int row = rr - 16 * mu + MP - 1 - dwc::ldsm_row(src), col = 16 * jb + dwc::ldsm_col(src);
                    A[dwc::mma_a_row(l, q)][dwc::mma_a_col(l, q, e)] = gs[size_t(row) * GP + col + 2 * (l % 4) + e];
                  }
              for (int bb = 0; bb < NVW; ++bb) {
                const int nv = nv0 + bb * wv;
                if (nv >= NV) continue;
                double B[16][8];
                for (int l = 0; l < 32; ++l)
                  for (int r = 0; r < 2; ++r) {
                    const bool odd = (l >> 2) & 1;
                    const int o = dwc::wgrad_mma_b_offset(jb, nv, l, r) - (odd ? 1 : 0);
                    EXPECT_EQ(o % 2, 0);
                    const auto& src = odd ? xo : xs;
                    for (int e = 0; e < 2; ++e) B[2 * (l % 4) + 8 * r + e][l / 4] = src[size_t(rr) * XP + o + e];
                  }
                for (int i = 0; i < 16; ++i)
                  for (int j = 0; j < 8; ++j)
                    for (int k = 0; k < 16; ++k)
                      red[(size_t(kidx) * MP + 16 * mu + i) * NP + 8 * nv + j] += A[i][k] * B[k][j];
              }
            }
      }
    }
  std::vector<double> dw(size_t(kh) * kw, 0.0);
  for (int u = 0; u < kh; ++u)
    for (int v = 0; v < kw; ++v)
      for (int k = 0; k < wk; ++k) dw[size_t(u) * kw + v] += red[(size_t(k) * MP + u) * NP + v];
  return dw;
}

TEST(DWConvGeometry, WgradMmaWalkIsTheWeightGradient) {
  std::mt19937 rng(12);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const std::pair<int, int> ks[] = {{1, 1}, {3, 5}, {7, 7}, {13, 13}, {17, 9}, {31, 31}, {5, 51}, {51, 5}, {63, 63}};
  const std::array<int, 5> tiles[] = {{16, 16, 1, 1, 1}, {7, 32, 1, 1, 4}, {64, 16, 2, 2, 1}, {33, 48, 1, 2, 2}, {20, 32, 2, 1, 8}};
  for (int it = 0; it < 27; ++it) {
    const auto [kh, kw] = ks[it % std::size(ks)];
    auto tl = tiles[it % std::size(tiles)];
    tl[2] = std::min(tl[2], dwc::cdiv(kh, 16)), tl[3] = std::min(tl[3], dwc::cdiv(kw, 8));
    const int pt = uni(0, kh), pb = uni(0, kh), pl = uni(0, kw), pr = uni(0, kw);
    const int H = std::max(1, kh - pt - pb) + uni(0, 36), W = std::max(1, kw - pl - pr) + uni(0, 36);
    const int Ho = H + pt + pb - kh + 1, Wo = W + pl + pr - kw + 1;
    std::vector<double> x(size_t(H) * W), dy(size_t(Ho) * Wo);
    for (auto& v : x) v = uni(-8, 8);
    for (auto& v : dy) v = uni(-8, 8);
    SCOPED_TRACE(fmt::format("k={}x{} x {}x{} pad {},{} tile {}x{} warps {}x{}x{}", kh, kw, H, W, pt, pl, tl[0], tl[1],
                             tl[2], tl[3], tl[4]));
    const auto got = wgrad_mma_emulate(kh, kw, H, W, Ho, Wo, pt, pl, tl[0], tl[1], tl[2], tl[3], tl[4], x, dy);
    for (int u = 0; u < kh; ++u)
      for (int v = 0; v < kw; ++v) {
        double want = 0;
        for (int i = 0; i < Ho; ++i)
          for (int j = 0; j < Wo; ++j) {
            const int a = i + u - pt, b = j + v - pl;
            if (a >= 0 && a < H && b >= 0 && b < W) want += dy[size_t(i) * Wo + j] * x[size_t(a) * W + b];
          }
        ASSERT_EQ(got[size_t(u) * kw + v], want) << "tap (" << u << ", " << v << ")";
      }
  }
}

// The walk's shared-memory layout: conflict-free ldmatrix rows, every A block and B word inside its region.
TEST(DWConvGeometry, MmaLayoutHoldsEveryRead) {
  for (int kw = 1; kw <= 63; ++kw)
    for (int tw : {16, 32, 64, 128}) {
      const dwc::MmaLayout L{7, kw, 32, tw};
      ASSERT_TRUE(L.valid());
      EXPECT_EQ(L.pitch() * 2 / 16 % 2, 1) << "pitch " << L.pitch() << ": not an odd number of 16-byte units";
      EXPECT_GE(16 * L.ksteps(), 16 + kw - 1);
      EXPECT_LT(16 * (L.ksteps() - 1), 16 + kw - 1) << "a k-step more than the span needs";
      // The last A block of the last column group ends at cols(); B words stay in [0, wrow()).
      EXPECT_EQ(tw - 16 + 16 * (L.ksteps() - 1) + 16, L.cols());
      for (int s = 0; s < L.ksteps(); ++s)
        for (int h = 0; h < 2; ++h)
          for (int lane = 0; lane < 32; ++lane)
            for (int r = 0; r < 2; ++r) {
              const int e = dwc::mma_b_tap(s, h, lane, r, 0) + dwc::MmaLayout::kWOff;
              EXPECT_GE(e, 0);
              EXPECT_LT(e, L.wrow());
            }
      EXPECT_EQ(L.xs_offset() % 16, 0);
    }
}

TEST(DWConvGenerator, DefaultTilesAreAcceptedAndLaunchable) {
  for (int arch : {80, 90}) {
    const auto lim = lkjit::DeviceLimits::for_arch(arch);
    for (gd::SpecVals s : specs()) {
      s.arch = arch;
      for (const gd::Problem& p : problems(s)) {
        const std::string what = fmt::format("sm_{} {} k={}x{} s={} d={} problem {}x{}x{}x{}", arch,
                                             lkjit::to_string(s.dtype), s.kh, s.kw, s.stride, s.dil, p.B, p.C, p.H, p.W);
        SCOPED_TRACE(what);
        for (gd::Pass pass : {gd::Pass::kForward, gd::Pass::kDgrad}) {
          const auto dt = gd::direct_default(s, pass, p, lim);
          const auto why = gd::direct_reject(s, dt, pass, lim, &p);
          EXPECT_FALSE(why) << "direct: " << *why;
          const auto g = gd::direct_geometry(s, dt, pass, p);
          EXPECT_GE(g.grid, 1u);
          EXPECT_EQ(g.smem_bytes, unsigned(gd::direct_layout(s, dt, pass).floats() * 4));
          // Worth a nhwc default only where the filters fit at all (63x63 at 8 channels does not, on sm_80).
          const auto nt = gd::nhwc_default(s, pass, p, lim);
          const auto nwhy = gd::nhwc_reject(s, nt, pass, lim, &p);
          if (gd::nhwc_smem_bytes(s, nt, pass) <= lim.max_smem_per_block) {
            EXPECT_FALSE(nwhy) << "nhwc: " << *nwhy;
          }
        }
        if (!gd::mma_spec_error(s))
          for (gd::Pass pass : {gd::Pass::kForward, gd::Pass::kDgrad}) {
            const auto mt = gd::mma_default(s, pass, p, lim);
            const auto mwhy = gd::mma_reject(s, mt, pass, lim, &p);
            EXPECT_FALSE(mwhy) << "mma: " << *mwhy;
            EXPECT_EQ(gd::mma_geometry(s, mt, pass, p).smem_bytes, unsigned(gd::mma_layout(s, mt).bytes()));
          }
        const auto wt = gd::wgrad_direct_default(s, p, lim);
        const auto wwhy = gd::wgrad_direct_reject(s, wt, lim, &p);
        EXPECT_FALSE(wwhy) << "wgrad_direct: " << *wwhy;
        const auto wg = gd::wgrad_direct_geometry(s, wt, p);
        EXPECT_GE(wg.chunks, 1);
        EXPECT_LE(wg.chunks, p.B * wg.tiles_h * wg.tiles_w);
        const auto nt = gd::wgrad_nhwc_default(s, p, lim);
        const auto nwhy = gd::wgrad_nhwc_reject(s, nt, lim, &p);
        EXPECT_FALSE(nwhy) << "wgrad_nhwc: " << *nwhy;
      }
    }
  }
}

// Small maps get tiles that cover them, not tiles running far past their edge (a 16x64 tile on the 14x14 map of
// ConvNeXt-T's third stage was 81% idle); the large maps keep their measured defaults.
TEST(DWConvGenerator, DirectDefaultTilesFitSmallMaps) {
  const auto lim = lkjit::DeviceLimits::for_arch(90);
  for (int k : {3, 5, 7, 13, 31})
    for (int64_t m : {5, 7, 11, 14, 20})
      for (gd::Pass pass : {gd::Pass::kForward, gd::Pass::kDgrad}) {
        const gd::SpecVals s{lkjit::DType::kBF16, k, k, 1, 1, 90};
        const gd::Problem p = gd::make_problem(s, 64, 96, m, m, gd::same_padding(s));
        const auto t = gd::direct_default(s, pass, p, lim);
        SCOPED_TRACE(fmt::format("k={} map {}x{} pass {}: tile {}x{} ry={} rx={}", k, m, m, int(pass), t.tile_h,
                                 t.tile_w, t.ry, t.rx));
        EXPECT_FALSE(gd::direct_reject(s, t, pass, lim, &p));
        const auto g = gd::direct_geometry(s, t, pass, p);
        const double covered = double(g.tiles_h) * t.tile_h * g.tiles_w * t.tile_w;
        EXPECT_LE(covered / double(m * m), m >= 7 ? 1.35 : 3.0);  // 8x8 on 7x7: 1.31; 6x11 on 5x5: 2.64
        EXPECT_GE(t.threads, 64);
      }
  for (int k : {3, 7, 13, 31})
    for (int64_t m : {5, 7, 14}) {
      const gd::SpecVals s{lkjit::DType::kBF16, k, k, 1, 1, 90};
      const gd::Problem p = gd::make_problem(s, 64, 96, m, m, gd::same_padding(s));
      const auto t = gd::wgrad_direct_default(s, p, lim);
      SCOPED_TRACE(fmt::format("wgrad k={} map {}x{}: tile {}x{} taps {}x{} threads {}", k, m, m, t.tile_h, t.tile_w,
                               t.tap_rows, t.tap_cols, t.threads));
      EXPECT_FALSE(gd::wgrad_direct_reject(s, t, lim, &p));
      EXPECT_LE(double(t.tile_h) * t.tile_w / double(m * m), 2.0);  // 7x8 on 7x7: 1.14; 5x8 on 5x5: 1.6
    }
  const gd::SpecVals s{lkjit::DType::kBF16, 31, 31, 1, 1, 90};
  const auto big = gd::direct_default(s, gd::Pass::kForward, gd::make_problem(s, 64, 128, 56, 56, gd::same_padding(s)), lim);
  EXPECT_EQ(std::make_tuple(big.tile_h, big.tile_w, big.ry, big.rx, big.threads), std::make_tuple(32, 64, 4, 4, 128));
}

TEST(DWConvGenerator, RejectionsNameTheValue) {
  const auto lim80 = lkjit::DeviceLimits::for_arch(80);
  const gd::SpecVals s{lkjit::DType::kF32, 7, 7, 1, 1, 80};
  gd::DirectTile t;
  t.threads = 48;
  EXPECT_THAT(*gd::direct_reject(s, t, gd::Pass::kForward, lim80), HasSubstr("threads=48 is out of range"));
  t = gd::DirectTile{};
  t.tile_h = 30;
  EXPECT_THAT(*gd::direct_reject(s, t, gd::Pass::kForward, lim80), HasSubstr("tile_h=30 is not a multiple of ry*ostep=4*1"));
  // A 63x63 fp32 filter at 32 lanes x 4 channels: ~2 MB of sub-filters.
  const gd::SpecVals big{lkjit::DType::kF32, 63, 63, 1, 1, 80};
  gd::NhwcTile n;
  n.lanes = 32, n.vec = 4, n.tile_h = 8, n.tile_w = 8, n.ry = 1, n.rx = 1, n.threads = 256;
  EXPECT_THAT(*gd::nhwc_reject(big, n, gd::Pass::kForward, lim80),
              HasSubstr("KB exceeds the sm_80 limit of 163 KB per block"));
  n.vec = 3;
  EXPECT_THAT(*gd::nhwc_reject(big, n, gd::Pass::kForward, lim80), HasSubstr("vec=3 (12 bytes of f32) is not supported"));
  gd::WgradNhwcTile w;
  w.lanes = 32, w.vec = 8, w.vc = 16, w.threads = 224;  // 8 fp32 channels x 7 taps x a 14-column window
  EXPECT_THAT(*gd::wgrad_nhwc_reject(s, w, lim80), HasSubstr("registers a thread"));
  gd::WgradDirectTile wd;
  wd.threads = 64, wd.tap_rows = 1, wd.tap_cols = 4;  // 7 x 2 = 14 tap tiles fit; 63 x 16 do not
  EXPECT_FALSE(gd::wgrad_direct_reject(s, wd, lim80));
  EXPECT_THAT(*gd::wgrad_direct_reject(big, wd, lim80), HasSubstr("register tiles of 1x4 taps exceed 64 threads"));
  // The wgrad and reduce kernels count in 32 bits: a channel's work units and the values to reduce.
  const gd::Problem tall = gd::make_problem(s, int64_t(1) << 24, 1, 200, 1, gd::same_padding(s));
  EXPECT_THAT(*gd::wgrad_nhwc_reject(s, gd::wgrad_nhwc_default(s, tall, lim80), lim80, &tall),
              HasSubstr("dy rows a channel group exceed 2^31-1"));
  EXPECT_THAT(*gd::wgrad_direct_reject(s, gd::WgradDirectTile{1, 4, 4, 8, 0, 256, 0}, lim80, &tall),
              HasSubstr("work units a channel exceed 2^31-1"));
  const gd::Problem wide = gd::make_problem(big, 1, int64_t(1) << 24, 64, 64, gd::same_padding(big));
  EXPECT_THAT(*gd::wgrad_reduce_reject(big, gd::ReduceTile{}, lim80, &wide), HasSubstr("values exceed 2^31-1"));
  EXPECT_FALSE(gd::wgrad_reduce_reject(s, gd::ReduceTile{}, lim80, &tall));
}

TEST(DWConvGenerator, SpecAndProblemErrorsNameTheValue) {
  std::vector<std::string> e;
  gd::validate_spec({lkjit::DType::kF32, 0, 64, 3, 5, 75}, e);
  ASSERT_EQ(e.size(), 5u);
  EXPECT_EQ(e[0], "kh=0 is out of range; supported: [1, 63]");
  EXPECT_EQ(e[1], "kw=64 is out of range; supported: [1, 63]");
  EXPECT_EQ(e[2], "stride=3 is out of range; supported: [1, 2]");
  EXPECT_EQ(e[3], "dil=5 is out of range; supported: [1, 4]");
  EXPECT_THAT(e[4], HasSubstr("sm_75"));
  const gd::SpecVals s{lkjit::DType::kF16, 31, 31, 1, 1, 90};
  EXPECT_THAT(*gd::problem_error(s, 1, 8, 20, 40, gd::Padding{}), HasSubstr("H=20 with padding 0+0 is shorter than the dilated filter"));
  EXPECT_THAT(*gd::problem_error(s, 0, 8, 40, 40, gd::same_padding(s)), HasSubstr("B=0 is out of range"));
  EXPECT_THAT(*gd::problem_error(s, 1, 8, 40, 40, gd::Padding{-1, 0, 0, 0}), HasSubstr("padding top=-1 is out of range"));
  EXPECT_FALSE(gd::problem_error(s, 1, 8, 20, 40, gd::same_padding(s)));
  const gd::Problem p = gd::make_problem(s, 1, 8, 20, 40, gd::same_padding(s));
  EXPECT_EQ(p.Ho, 20);
  EXPECT_EQ(p.Wo, 40);
  EXPECT_EQ(p.ph, 15);
}

}  // namespace
