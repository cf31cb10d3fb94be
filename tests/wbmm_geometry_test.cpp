// Tests of the WBMM index math shared by the kernels and the host (templates/wbmm/geometry.cuh) against
// brute force at its boundaries, and of the generator-side geometry (generator/ops/wbmm_geometry.h): its
// shared-memory formulas agree with the template's layouts, spec and tile rejections name the value and
// the limit, and every default tile is accepted.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "generator/ops/wbmm_geometry.h"
#include "lkjit/error.h"
#include "tests/gpu/wbmm_problems.h"
#include "wbmm/geometry.cuh"

namespace {

namespace dev = lkjit::wbmm;      // the template's (host + device) functions
namespace gen = lkjit::gen::wbmm;  // the generator's
using ::testing::AllOf;
using ::testing::HasSubstr;

// The kernel name of a family spec and tile (the tile's axes the kernel has).
std::string name_of(const gen::WBMMSpec& s, const gen::WBMMTile& t) {
  return lkjit::kernel_name(gen::to_opspec(s), gen::to_tile(s, t));
}

TEST(WBMMGeometry, WindowCountsAndExtents) {
  for (int w = 1; w <= 16; ++w)
    for (int n = 1; n <= 3 * 16 + 1; ++n) {
      int count = 0;
      for (int p = 0; p < n; p += w) ++count;  // windows that start inside the extent
      ASSERT_EQ(dev::windows_along(n, w), count) << n << " " << w;
      int covered = 0;
      for (int i = 0; i < count; ++i) {
        const int e = dev::window_extent(n, w, i);
        ASSERT_GE(e, 1);
        ASSERT_LE(e, w);
        ASSERT_EQ(e < w, i == count - 1 && n % w != 0) << "only the last window is padded";
        covered += e;
      }
      ASSERT_EQ(covered, n);
    }
}

TEST(WBMMGeometry, WindowIndexRoundTrip) {
  for (auto [B, nH, nW] : std::vector<std::tuple<int, int, int>>{{1, 1, 1}, {3, 1, 5}, {2, 4, 1}, {2, 3, 7}}) {
    long long n = 0;
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < nH; ++h)
        for (int v = 0; v < nW; ++v, ++n) {
          ASSERT_EQ(dev::window_index(b, h, v, nH, nW), n);
          const auto c = dev::window_coord(n, nH, nW);
          ASSERT_EQ(std::make_tuple(c.b, c.h, c.v), std::make_tuple(b, h, v));
        }
  }
  // 64-bit window counts: a 2^31-window launch still decodes.
  const long long big = (1LL << 31) + 12345;
  const auto c = dev::window_coord(big, 1 << 10, 1 << 12);
  EXPECT_EQ(dev::window_index(c.b, c.h, c.v, 1 << 10, 1 << 12), big);
}

TEST(WBMMGeometry, PositionsAreRasterOrder) {
  for (int wh = 1; wh <= 16; ++wh)
    for (int ww = 1; ww <= 16; ++ww) {
      int p = 0;
      for (int ph = 0; ph < wh; ++ph)
        for (int pw = 0; pw < ww; ++pw, ++p) ASSERT_TRUE(dev::pos_h(p, ww) == ph && dev::pos_w(p, ww) == pw);
    }
}

// I[i, j] for every window 1..16 x 1..16 against the spec's formula on explicit coordinates; its range,
// the rotation (I[j, i] = K-1-I[i, j]), the centre tap on the diagonal, and each tap's pair count.
TEST(WBMMGeometry, RelativeIndexAgainstBruteForce) {
  for (int wh = 1; wh <= 16; ++wh)
    for (int ww = 1; ww <= 16; ++ww) {
      const int K = dev::table_size(wh, ww), d = wh * ww;
      ASSERT_EQ(K, (2 * wh - 1) * (2 * ww - 1));
      std::vector<int> count(K, 0);
      for (int ih = 0; ih < wh; ++ih)
        for (int iw = 0; iw < ww; ++iw)
          for (int jh = 0; jh < wh; ++jh)
            for (int jw = 0; jw < ww; ++jw) {
              const int i = ih * ww + iw, j = jh * ww + jw;
              const int k = (ih - jh + wh - 1) * (2 * ww - 1) + (iw - jw + ww - 1);
              ASSERT_EQ(dev::rel_index(i, j, wh, ww), k);
              ASSERT_EQ(dev::tap_index(ih - jh, iw - jw, wh, ww), k);
              ASSERT_EQ(dev::rel_index(j, i, wh, ww), dev::rotated_index(k, wh, ww));
              ++count[k];
            }
      for (int i = 0; i < d; ++i) ASSERT_EQ(dev::rel_index(i, i, wh, ww), dev::centre_tap(wh, ww));
      for (int k = 0; k < K; ++k) {
        const int dh = k / (2 * ww - 1) - (wh - 1), dw = k % (2 * ww - 1) - (ww - 1);
        ASSERT_EQ(dev::tap_pairs(dh, dw, wh, ww), count[k]) << "tap " << k;
        ASSERT_GE(count[k], 1) << "every tap is used";
      }
      ASSERT_EQ(dev::rotated_index(0, wh, ww), K - 1);
      ASSERT_EQ(dev::rotated_index(dev::centre_tap(wh, ww), wh, ww), dev::centre_tap(wh, ww));
    }
}

// The padded d: a multiple of the K step and of the N split, never below d, the least such.
TEST(WBMMGeometry, PaddedDIsTheLeastMultiple) {
  for (int d = 1; d <= 256; ++d)
    for (int prec : {dev::kPrecMma16, dev::kPrecFfma, dev::kPrec3xTF32, dev::kPrecTF32})
      for (int wn : {1, 2, 4, 7, 8})
        for (int ns : {1, 2, 4}) {
          const int dp = dev::fwd_dp(d, prec, wn, ns), step = dev::prec_kstep(prec);
          ASSERT_GE(dp, d);
          ASSERT_EQ(dp % step, 0);
          ASSERT_EQ(dp % (8 * wn * ns), 0);
          ASSERT_LT(dp - dev::lcm(step, 8 * wn * ns), d) << "not the least";
        }
  EXPECT_EQ(dev::fwd_dp(49, dev::kPrecMma16, 2, 1), 64);
  EXPECT_EQ(dev::fwd_dp(196, dev::kPrecMma16, 2, 1), 208);
  EXPECT_EQ(dev::fwd_dp(256, dev::kPrec3xTF32, 2, 2), 256);
  EXPECT_EQ(dev::fwd_dp(1, dev::kPrecFfma, 1, 1), 8);
  for (int d : {1, 49, 196, 256})
    for (int gm : {1, 2, 7})
      for (int gn : {1, 2, 14})
        for (int is : {1, 2, 4})
          for (bool fuse : {false, true}) {
            const int dp = dev::wgrad_dp(d, dev::kPrecMma16, gm, gn, is, 2, fuse);
            ASSERT_GE(dp, d);
            ASSERT_EQ(dp % (16 * gm * is), 0);  // whole m16 tiles for each part's gm warps
            ASSERT_EQ(dp % (8 * gn), 0);
            if (fuse) ASSERT_EQ(dp % (16 * is), 0);
          }
}

// Tile columns: a bijection onto (cl, wl, iw); in NCHW order consecutive columns of a window row and of
// the next window in the same image row are consecutive pixels, in NHWC order consecutive channels.
template <int WH, int WW, int WPB, int CPB, bool NHWC>
void check_columns() {
  using Col = dev::TileColumn<WH, WW, WPB, CPB, NHWC>;
  std::set<std::tuple<int, int, int>> seen;
  for (int q = 0; q < Col::Q; ++q) {
    const Col c(q);
    ASSERT_TRUE(c.cl >= 0 && c.cl < CPB && c.wl >= 0 && c.wl < WPB && c.iw >= 0 && c.iw < WW);
    seen.insert({c.cl, c.wl, c.iw});
    if (q == 0) continue;
    const Col p(q - 1);
    if (NHWC) {
      if (c.cl != 0) ASSERT_TRUE(c.cl == p.cl + 1 && c.wl == p.wl && c.iw == p.iw);
    } else if (c.cl == p.cl) {
      ASSERT_EQ(c.wl * WW + c.iw, p.wl * WW + p.iw + 1) << "the next pixel of an image row of adjacent windows";
    }
  }
  ASSERT_EQ(int(seen.size()), Col::Q);
}
TEST(WBMMGeometry, TileColumnsCoverTheTileInMemoryOrder) {
  check_columns<7, 7, 64, 1, false>();
  check_columns<7, 7, 32, 4, true>();
  check_columns<3, 5, 16, 2, false>();
  check_columns<16, 16, 16, 3, true>();
  check_columns<1, 1, 16, 1, false>();
}

// Partial rows: every (row, channel, value) has its own slot, rows outermost (the reduce's fixed order).
TEST(WBMMGeometry, PartialIndexing) {
  for (int mode : {dev::kModeTable, dev::kModeDense}) {
    const int wh = 3, ww = 2, C = 5, chunks = 3, isplit = 2, nv = dev::partial_values(mode, wh, ww);
    EXPECT_EQ(nv, mode == dev::kModeTable ? 15 : 36);
    const int rows = dev::partial_rows(mode, chunks, isplit);
    EXPECT_EQ(rows, mode == dev::kModeTable ? 6 : 3);
    std::set<int> rowset;
    for (int ch = 0; ch < chunks; ++ch)
      for (int part = 0; part < isplit; ++part) rowset.insert(dev::partial_row(mode, ch, part, isplit));
    EXPECT_EQ(int(rowset.size()), rows);
    EXPECT_EQ(*rowset.rbegin(), rows - 1);
    long long expect = 0;
    for (int s = 0; s < rows; ++s)
      for (int c = 0; c < C; ++c)
        for (int v = 0; v < nv; ++v) ASSERT_EQ(dev::partial_index(s, c, v, C, nv), expect++);
  }
}

// ---- the generator's formulas mirror the template's -----------------------------------------------------

std::vector<gen::WBMMSpec> sample_specs() {
  std::vector<gen::WBMMSpec> v;
  for (auto k : {gen::WBMMKernel::kFwd, gen::WBMMKernel::kDgrad, gen::WBMMKernel::kWgrad})
    for (auto dt : {lkjit::DType::kF32, lkjit::DType::kF16, lkjit::DType::kBF16})
      for (auto [wh, ww] : std::vector<std::pair<int, int>>{{1, 1}, {7, 7}, {3, 5}, {14, 14}, {16, 16}})
        for (int mode : {0, 1}) {
          gen::WBMMSpec s;
          s.kernel = k, s.dtype = dt, s.wh = wh, s.ww = ww, s.mode = mode, s.fuse_dx = (wh + mode) % 2;
          s.bias = k == gen::WBMMKernel::kDgrad ? 0 : 1;
          s.arch_specific = true;  // sm_90a: engine 2 where the kernel has it
          v.push_back(s);
        }
  return v;
}
std::vector<gen::WBMMTile> sample_tiles(const gen::WBMMSpec& s) {
  std::vector<gen::WBMMTile> v;
  for (int engine : {0, 1, 2})
    for (int wm : {1, 2, 4})
      for (int wn : {1, 2, 7})
        for (int split : {1, 2})
          for (int cpb : {1, 3}) {
            gen::WBMMTile t;
            t.engine = engine, t.wm = wm, t.wn = wn, t.split = split, t.cpb = cpb, t.mt = 1 + (wm + wn) % 3;
            t.wpb = 16 * wm * (1 + split % 2), t.gm = wn, t.gn = wm;
            if (s.kernel == gen::WBMMKernel::kWgrad && !s.fuse_dx) t.wm = t.wn = 1;
            v.push_back(t);
          }
  return v;
}

TEST(WBMMGeometry, GeneratorSharedMemoryMatchesTheTemplateLayout) {
  int checked = 0;
  for (const auto& s : sample_specs())
    for (const auto& t : sample_tiles(s)) {
      SCOPED_TRACE(name_of(s, t));
      const int prec = gen::prec_of(s, t), tb = gen::dtype_size(s.dtype), ob = gen::operand_size(s, t);
      const int dp = gen::dp_of(s, t), wpb = gen::wpb_of(s, t);
      int total = 0;
      if (s.kernel == gen::WBMMKernel::kWgrad) {
        ASSERT_EQ(dp, dev::wgrad_dp(s.wh * s.ww, prec, t.gm, t.gn, t.split, t.wn, s.fuse_dx));
        const auto L = dev::wgrad_layout(dp, t.split, wpb, t.cpb, s.fuse_dx, gen::threads_of(s, t), tb, ob);
        total = L.total;
        // Regions are 16-byte aligned and in order; the scratch S aliases the tiles only.
        for (int off : {L.x, L.g, L.dx, L.s, L.bt, L.red, L.tab}) ASSERT_EQ(off % 16, 0);
        ASSERT_LE(L.dx, L.bt);
        ASSERT_LE(L.bt, L.red);
        ASSERT_LT(L.red, L.tab);
      } else {
        ASSERT_EQ(dp, dev::fwd_dp(s.wh * s.ww, prec, t.wn, t.split));
        const auto L = dev::fwd_layout(dp, t.split, wpb, t.cpb, tb, ob, t.engine == 2);
        total = L.total;
        for (int off : {L.b, L.a, L.y, L.tab}) ASSERT_EQ(off % 16, 0);
        ASSERT_TRUE(L.b < L.a && L.a < L.y && L.y < L.tab && L.tab < L.total);
      }
      ASSERT_EQ(gen::smem_bytes(s, t), total);
      ++checked;
    }
  EXPECT_GT(checked, 1000);
}

TEST(WBMMGeometry, GeneratorPrecisionAndOperandTypes) {
  gen::WBMMSpec s;
  gen::WBMMTile t;
  s.dtype = lkjit::DType::kBF16;
  EXPECT_EQ(gen::prec_of(s, t), gen::kPrecMma16);
  s.dtype = lkjit::DType::kF32;
  t.engine = 0;
  EXPECT_EQ(gen::prec_of(s, t), gen::kPrecFfma);
  t.engine = 1;
  EXPECT_EQ(gen::prec_of(s, t), gen::kPrec3xTF32);
  s.tf32 = 1;
  EXPECT_EQ(gen::prec_of(s, t), gen::kPrecTF32);
  EXPECT_EQ(gen::operand_size(s, t), 4);
  // The template numbers precisions the same way.
  EXPECT_EQ(int(gen::kPrecMma16), int(dev::kPrecMma16));
  EXPECT_EQ(int(gen::kPrecFfma), int(dev::kPrecFfma));
  EXPECT_EQ(int(gen::kPrec3xTF32), int(dev::kPrec3xTF32));
  EXPECT_EQ(int(gen::kPrecTF32), int(dev::kPrecTF32));
  EXPECT_EQ(gen::kWinEntry2, int(sizeof(dev::WinEntry<2>)));
  EXPECT_EQ(gen::kWinEntry3, int(sizeof(dev::WinEntry<3>)));
}

// ---- spec and tile rejections ------------------------------------------------------------------------------

// The generator's validation of the spec (the family table's ranges and the cross-field rules).
std::string spec_errors(const gen::WBMMSpec& s) {
  try {
    lkjit::validate(gen::to_opspec(s));
  } catch (const lkjit::SpecError& e) {
    return e.what();
  }
  return "";
}

TEST(WBMMGeometry, SpecErrorsNameTheValueAndRange) {
  gen::WBMMSpec s;
  EXPECT_EQ(spec_errors(s), "");
  s.wh = 0;
  EXPECT_THAT(spec_errors(s), HasSubstr("lkjit: error: wbmm_fwd: wh=0 is out of range; supported: [1, 16]"));
  s.wh = 7, s.ww = 17;
  EXPECT_THAT(spec_errors(s), HasSubstr("ww=17 is out of range; supported: [1, 16]"));
  s.ww = 7, s.mode = 2;
  EXPECT_THAT(spec_errors(s), HasSubstr("mode=2 is out of range; supported: [0, 1]"));
  s.mode = 0, s.tf32 = 1;
  EXPECT_THAT(spec_errors(s), HasSubstr("tf32=1 applies to f32 inputs only; bf16 inputs run on the 16-bit MMA"));
  s.tf32 = 0, s.arch = 75;
  EXPECT_THAT(spec_errors(s), HasSubstr("sm_75 is not supported"));
  // Every violated rule at once.
  s.arch = 90, s.wh = 0, s.ww = 0, s.tf32 = 1;
  EXPECT_THAT(spec_errors(s), AllOf(HasSubstr("wh=0"), HasSubstr("ww=0"), HasSubstr("tf32=1")));
  // The reduce kernel: fp32 partials only; a dgrad has no bias field.
  lkjit::OpSpec r = gen::to_opspec(gen::WBMMSpec{gen::WBMMKernel::kReduce});
  r.dtype = lkjit::DType::kBF16;
  EXPECT_THAT([&] { try { lkjit::validate(r); } catch (const lkjit::SpecError& e) { return std::string(e.what()); } return std::string(); }(),
              HasSubstr("the reduce kernel sums fp32 partial rows; supported: f32"));
  EXPECT_THROW(lkjit::make_spec(lkjit::kWBMMDgrad, lkjit::DType::kF32, 90, {{"bias", 1}}), lkjit::SpecError);
}

TEST(WBMMGeometry, TileRejectionsNameTheValueAndLimit) {
  const auto d90 = lkjit::DeviceLimits::for_arch(90), d80 = lkjit::DeviceLimits::for_arch(80);
  gen::WBMMSpec s;
  gen::WBMMTile t;
  ASSERT_FALSE(gen::reject(s, t, d90, nullptr)) << *gen::reject(s, t, d90, nullptr);
  t.engine = 0;
  EXPECT_THAT(*gen::reject(s, t, d90, nullptr), HasSubstr("engine=0 (FFMA) runs f32 inputs only"));
  t.engine = 1, t.fold = 1;
  EXPECT_THAT(*gen::reject(s, t, d90, nullptr), HasSubstr("fold=1 rounds 1 + R into a bf16 operand"));
  t.fold = 0, t.stages = 3;
  EXPECT_THAT(*gen::reject(s, t, d90, nullptr), HasSubstr("stages=3 is out of range; supported: 1, 2"));
  t.stages = 2, t.vec = 16;
  EXPECT_THAT(*gen::reject(s, t, d90, nullptr), HasSubstr("vec=16 is not supported for bf16"));
  t.vec = 4, t.cpb = 32;
  EXPECT_THAT(*gen::reject(s, t, d90, nullptr), HasSubstr("exceeds the sm_90 limit of 1024"));
  // 16x16 bf16 with M_c whole: fits sm_90's 227 KiB, not sm_80's 163 KiB.
  s.wh = s.ww = 16, t.cpb = 1, t.wm = 4, t.wn = 2, t.mt = 1;
  EXPECT_FALSE(gen::reject(s, t, d90, nullptr));
  EXPECT_THAT(*gen::reject(s, t, d80, nullptr), HasSubstr("exceeds the sm_80 limit of 166912 B per block"));
  // dense fp32 16x16: M_c is 256 KiB, so only a column split fits.
  s.dtype = lkjit::DType::kF32, s.mode = 1, t.wm = 2;
  EXPECT_THAT(*gen::reject(s, t, d90, nullptr), HasSubstr("shared memory"));
  t.split = 2;
  EXPECT_FALSE(gen::reject(s, t, d90, nullptr)) << *gen::reject(s, t, d90, nullptr);
  // A split past the positions.
  s.wh = s.ww = 1, t.split = 4, t.wn = 1;
  EXPECT_THAT(*gen::reject(s, t, d90, nullptr), HasSubstr("split=4 leaves column part 3 without output positions"));
  // wgrad: the fused dX must use the dM warps.
  gen::WBMMSpec w;
  w.kernel = gen::WBMMKernel::kWgrad;
  gen::WBMMTile wt;
  wt.gm = 2, wt.gn = 2, wt.wm = 4, wt.wn = 2;
  EXPECT_THAT(*gen::reject(w, wt, d90, nullptr), HasSubstr("fused dX tiling wm x wn = 4 x 2 must use the gm x gn = 2 x 2 warps"));
  w.fuse_dx = 0;
  EXPECT_THAT(*gen::reject(w, wt, d90, nullptr), HasSubstr("supported without fuse_dx: wm=1, wn=1"));
  wt.wm = wt.wn = 1, wt.wpb = 24;
  EXPECT_THAT(*gen::reject(w, wt, d90, nullptr), HasSubstr("wpb=24 is not supported"));
  gen::WBMMSpec r;
  r.kernel = gen::WBMMKernel::kReduce;
  gen::WBMMTile rt;
  rt.threads = 100;
  EXPECT_THAT(*gen::reject(r, rt, d90, nullptr), HasSubstr("threads=100 is not supported; supported: 128, 256, 512"));
}

// Every default tile is accepted, for the benchmark and edge shapes, every kernel, dtype and mode, on sm_80
// and sm_90; its chunk leaves at least one block; the geometry is consistent with the Cfg.
TEST(WBMMGeometry, DefaultTilesAreAccepted) {
  const std::vector<lkjit::Shape> shapes = {{1, 1, 1, 1, 1},     {2, 3, 10, 11, 1},   {64, 256, 56, 56, 1},
                                            {128, 80, 56, 56, 1}, {128, 640, 7, 7, 1}, {1, 5, 224, 224, 1}};
  int n = 0;
  for (int arch : {80, 90})
    for (auto k : {gen::WBMMKernel::kFwd, gen::WBMMKernel::kDgrad, gen::WBMMKernel::kWgrad, gen::WBMMKernel::kReduce})
      for (auto dt : {lkjit::DType::kF32, lkjit::DType::kF16, lkjit::DType::kBF16})
        for (int w : {1, 2, 7, 9, 14, 16})
          for (int mode : {0, 1})
            for (int layout : {0, 1})
              for (const auto& sh : shapes) {
                gen::WBMMSpec s;
                s.kernel = k, s.dtype = dt, s.arch = arch, s.wh = w, s.ww = w == 9 ? 4 : w, s.mode = mode, s.layout = layout;
                const auto lim = lkjit::DeviceLimits::for_arch(arch);
                const auto t = gen::default_tile(s, sh, lim);
                SCOPED_TRACE(name_of(s, t) + " " + sh.to_string());
                const auto why = gen::reject(s, t, lim, &sh);
                ASSERT_FALSE(why) << *why;
                const auto g = gen::geometry(s, t, sh);
                ASSERT_GE(g.grid[0], 1u);
                ASSERT_EQ(g.block[0], unsigned(gen::threads_of(s, t)));
                ASSERT_LE(g.smem_bytes, unsigned(lim.max_smem_per_block));
                if (k != gen::WBMMKernel::kReduce) {
                  ASSERT_EQ(uint64_t(g.grid[0]) * g.grid[1], uint64_t(gen::chunks(s, t, sh)) * ((sh.C + t.cpb - 1) / t.cpb));
                  ASSERT_EQ(g.grid[2], unsigned(t.split));
                  ASSERT_LE((gen::chunks(s, t, sh) - 1) * t.chunk, gen::window_tiles(s, t, sh) - 1) << "an empty chunk";
                }
                ++n;
              }
  EXPECT_GT(n, 3000);
}

// The wgrad without dX at 14x14-class windows on sm_90, NCHW (the split backward's) takes the tiles greedy tuning
// found on an H200 (dM rows in two parts, 1 x 8 or 1 x 7 warps, longer window tiles, wider accesses); where that
// was not measured (sm_80, NHWC, fp32 16x16, 9x9) the estimate's tiles stay.
TEST(WBMMGeometry, SplitWgradDefaultsAtD196AreTheTunedTiles) {
  const lkjit::Shape sh{64, 256, 56, 56, 1};
  const auto d90 = lkjit::DeviceLimits::for_arch(90), d80 = lkjit::DeviceLimits::for_arch(80);
  auto wgrad = [](lkjit::DType dt, int w, int layout = 0) {
    gen::WBMMSpec s;
    s.kernel = gen::WBMMKernel::kWgrad, s.dtype = dt, s.wh = s.ww = w, s.fuse_dx = 0, s.layout = layout;
    return s;
  };
  auto tuned = [](const gen::WBMMTile& t, bool f32) {
    return t.split == 2 && t.gm == 1 && t.gn == (f32 ? 7 : 8) && t.wpb == (f32 ? 32 : 64);
  };
  for (auto dt : {lkjit::DType::kBF16, lkjit::DType::kF16, lkjit::DType::kF32})
    for (int w : {14, 16}) {
      const bool f32 = dt == lkjit::DType::kF32;
      gen::WBMMSpec s = wgrad(dt, w);
      const auto t = gen::default_tile(s, sh, d90);
      SCOPED_TRACE(name_of(s, t));
      EXPECT_FALSE(gen::reject(s, t, d90, &sh));
      EXPECT_EQ(tuned(t, f32), !(f32 && w == 16));  // fp32 16x16: 7 column warps would pad d = 256 to 448
      if (tuned(t, f32)) EXPECT_EQ(t.vec, f32 ? 2 : 4);
      s.arch = 80;
      EXPECT_FALSE(tuned(gen::default_tile(s, sh, d80), f32));
      EXPECT_FALSE(tuned(gen::default_tile(wgrad(dt, w, 1), sh, d90), f32));
    }
  EXPECT_FALSE(tuned(gen::default_tile(wgrad(lkjit::DType::kBF16, 9), sh, d90), false));
  // A width the wider accesses do not divide keeps the base vector width.
  EXPECT_EQ(gen::default_tile(wgrad(lkjit::DType::kBF16, 14), {64, 256, 58, 58, 1}, d90).vec, 2);
}

TEST(WBMMGeometry, CfgBodyAndNames) {
  gen::WBMMSpec s;
  gen::WBMMTile t;
  s.wh = s.ww = 14;
  t.wm = 4, t.wn = 2, t.mt = 1, t.chunk = 8;
  const std::string cfg = gen::cfg_body(s, t);
  EXPECT_THAT(cfg, HasSubstr("using T = lkjit::bf16;"));
  EXPECT_THAT(cfg, HasSubstr("wh = 14, ww = 14, mode = 0, prec = 0;"));
  EXPECT_THAT(cfg, HasSubstr("rotate = false, identity = true, fold_identity = false, bias = false, nhwc = false, wgmma = false;"));
  EXPECT_THAT(cfg, HasSubstr("wm = 4, wn = 2, mt = 1, dp = 208, nsplit = 1, kchunk = 0, cpb = 1, stages = 2, vec = 4, threads = 256;"));
  EXPECT_EQ(name_of(s, t), "lkjit_wbmm_fwd_bf16_wh14_ww14_m0_tf0_id1_bi0_l0_e1_wm4_wn2_mt1_s1_c1_st2_vc4_ch8_sm90");
  s.kernel = gen::WBMMKernel::kDgrad;
  EXPECT_THAT(gen::cfg_body(s, t), HasSubstr("rotate = true"));
  const auto g = lkjit::generate(gen::to_opspec(s), gen::to_tile(s, t));
  EXPECT_THAT(g.source, HasSubstr("#include \"wbmm/fwd.cuh\""));
  EXPECT_THAT(g.source, HasSubstr("extern \"C\" __global__ void __launch_bounds__(256)\n"
                                  "lkjit_wbmm_dgrad_bf16_wh14_ww14_m0_tf0_id1_l0_e1_wm4_wn2_mt1_s1_c1_st2_vc4_ch8_sm90("
                                  "const __grid_constant__ lkjit::WBMMParams p) {\n  lkjit::wbmm_fwd<Cfg>(p);"));
  // A name is a cache key and a symbol: one name, one Cfg (through the generator's view of the named tile);
  // and the sample's distinct Cfgs all have distinct names.
  std::map<std::string, std::string> units;
  std::set<std::string> bodies;
  for (const auto& sp : sample_specs())
    for (const auto& tl : sample_tiles(sp)) {
      if (gen::reject(sp, gen::wtile(sp, gen::to_tile(sp, tl)), lkjit::DeviceLimits::for_arch(90), nullptr)) continue;
      const std::string name = name_of(sp, tl);
      const std::string unit = gen::cfg_body(sp, gen::wtile(sp, gen::to_tile(sp, tl))) + gen::kernel_stem(sp.kernel);
      const auto [it, fresh] = units.emplace(name, unit);
      ASSERT_EQ(it->second, unit) << name << " names two different units";
      bodies.insert(unit);
    }
  EXPECT_EQ(units.size(), bodies.size());
  EXPECT_GT(units.size(), 300u);
}

// The GPU tests' problem lists (tests/gpu/wbmm_problems.h) run with default tiles on sm_80 and sm_90 in
// every precision, have distinct names, and keep their edge cases.
TEST(WBMMGeometry, GpuProblemListsRunWithDefaultTiles) {
  using lkjit::testing::WBMMProblem;
  std::vector<WBMMProblem> all = lkjit::testing::wbmm_problems();
  for (const auto& p : lkjit::testing::wbmm_operator_study()) all.push_back(p);
  for (const auto& p : lkjit::testing::wbmm_t_layers()) all.push_back(p);
  std::set<std::string> names;
  for (const auto& p : all)
    for (const auto& q : lkjit::testing::wbmm_precisions()) {
      ASSERT_TRUE(names.insert(lkjit::testing::wbmm_problem_name(p, q)).second) << lkjit::testing::wbmm_problem_name(p, q);
      for (int arch : {80, 90})
        for (auto k : {gen::WBMMKernel::kFwd, gen::WBMMKernel::kDgrad, gen::WBMMKernel::kWgrad, gen::WBMMKernel::kReduce}) {
          gen::WBMMSpec s;
          s.kernel = k, s.dtype = q.dtype, s.tf32 = q.tf32, s.arch = arch, s.wh = p.wh, s.ww = p.ww, s.mode = p.mode;
          s.identity = p.identity, s.bias = k == gen::WBMMKernel::kDgrad ? 0 : p.bias, s.layout = p.layout;
          ASSERT_EQ(spec_errors(s), "");
          const lkjit::Shape sh{p.B, p.C, p.H, p.W, 1};
          const auto lim = lkjit::DeviceLimits::for_arch(arch);
          auto t = gen::default_tile(s, sh, lim);
          if (k != gen::WBMMKernel::kReduce && q.dtype == lkjit::DType::kF32) t.engine = q.engine;
          if (q.engine == 2) {  // the GPU test's first wgmma form that fits, where the spec has it (sm_90a fwd / dgrad)
            s.arch_specific = true;
            if (!gen::wgmma_target(s)) continue;
            for (const auto& f : lkjit::testing::wgmma_forms(gen::to_tile(s, t))) {
              t = gen::wtile(s, f);
              if (!gen::reject(s, t, lim, &sh)) break;
            }
          }
          const auto why = gen::reject(s, t, lim, &sh);
          ASSERT_FALSE(why) << lkjit::testing::wbmm_problem_name(p, q) << " " << name_of(s, t) << ": " << *why;
        }
    }
  std::set<int> windows;
  bool padded = false, batch1 = false, dense = false, nhwc = false, rect = false;
  for (const auto& p : lkjit::testing::wbmm_problems()) {
    windows.insert(p.wh), windows.insert(p.ww);
    padded |= p.H % p.wh != 0 || p.W % p.ww != 0, batch1 |= p.B == 1, dense |= p.mode == 1, nhwc |= p.layout == 1;
    rect |= p.wh != p.ww;
  }
  for (int w : {1, 7, 14, 16}) EXPECT_TRUE(windows.count(w)) << "window " << w;
  EXPECT_TRUE(padded && batch1 && dense && nhwc && rect);
  EXPECT_EQ(lkjit::testing::wbmm_t_layers().size(), 8u);
}

TEST(WBMMGeometry, ScratchSizes) {
  gen::WBMMSpec s;
  s.kernel = gen::WBMMKernel::kWgrad, s.bias = 1;
  gen::WBMMTile t;
  t.wpb = 64, t.chunk = 4, t.split = 2;
  const lkjit::Shape sh{2, 3, 30, 29, 1};  // 5 x 5 windows of 7x7 a channel and image: 50 windows
  EXPECT_EQ(gen::windows_per_channel(s, sh), 50);
  EXPECT_EQ(gen::window_tiles(s, t, sh), 1);
  EXPECT_EQ(gen::chunks(s, t, sh), 1);
  EXPECT_EQ(gen::partial_rows(s, t, sh), 2);  // table mode: a row per (chunk, part)
  EXPECT_EQ(gen::partial_floats(s, t, sh), 2 * 3 * 169);
  EXPECT_EQ(gen::partial_bias_floats(s, t, sh), 3);
  s.mode = 1;
  EXPECT_EQ(gen::partial_rows(s, t, sh), 1);  // dense: parts own disjoint rows of dM
  EXPECT_EQ(gen::partial_floats(s, t, sh), 3 * 49 * 49);
}

}  // namespace
