// The WBMM forward / dgrad kernels on Hopper's wgmma (engine 2, sm_90a), CPU side: the core-matrix layout and
// descriptor bits the kernels hand the tensor cores (templates/common/wgmma_layout.h), where the engine is in
// the tile space and why it is refused elsewhere, its shared memory, the planner's sm_90a specs, and NVRTC
// compiles for sm_90a of a sample of tiles. The products themselves run in tests/gpu/wbmm_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "common/wgmma_layout.h"
#include "generator/ops/wbmm_geometry.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/wbmm.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/cubin_check.h"

namespace {

namespace gen = lkjit::gen::wbmm;
namespace wg = lkjit::wgmma;
using ::testing::HasSubstr;

// Every (row, k) of an operand lands on its own element, the whole operand is dense, and the strides between
// core matrices are the descriptor's LBO (along K) and SBO (along rows): what the hardware walks.
TEST(WgmmaLayout, CoreMatricesTileTheOperandAtTheDescriptorsStrides) {
  for (int kdim : {16, 64, 208, 256}) {
    SCOPED_TRACE(kdim);
    const int rows = 24;
    std::set<int> seen;
    for (int r = 0; r < rows; ++r)
      for (int k = 0; k < kdim; ++k) {
        const int o = wg::core_offset(r, k, kdim);
        ASSERT_TRUE(o >= 0 && o < rows * kdim) << r << "," << k;
        seen.insert(o);
        // Inside a core matrix: 8 elements (16 bytes) a row, rows 16 bytes apart.
        if (k % 8) ASSERT_EQ(o, wg::core_offset(r, k - 1, kdim) + 1);
        if (r % 8) ASSERT_EQ(o, wg::core_offset(r - 1, k, kdim) + 8);
        if (k >= 8 && k % 8 == 0) ASSERT_EQ(2 * (o - wg::core_offset(r, k - 8, kdim)), int(wg::lbo_bytes()));
        if (r >= 8 && r % 8 == 0) ASSERT_EQ(2 * (o - wg::core_offset(r - 8, k, kdim)), int(wg::sbo_bytes(kdim)));
      }
    EXPECT_EQ(int(seen.size()), rows * kdim);
  }
}

TEST(WgmmaLayout, DescriptorFields) {
  const unsigned long long d = wg::make_desc(0x1230, 128, 3328);
  EXPECT_EQ(d & 0x3FFF, 0x123u);              // start address / 16
  EXPECT_EQ((d >> 16) & 0x3FFF, 128u / 16);   // LBO / 16
  EXPECT_EQ((d >> 32) & 0x3FFF, 3328u / 16);  // SBO / 16
  EXPECT_EQ(d >> 46, 0u);                     // base offset 0, no swizzle
  // The kernels add byte offsets / 16 to a descriptor: the same as a descriptor of the moved address.
  EXPECT_EQ(d + 0x400 / 16, wg::make_desc(0x1230 + 0x400, 128, 3328));
  EXPECT_EQ(wg::make_desc(0x3FFF0, 16, 16) & 0x3FFF, 0x3FFFu);  // the largest shared address (18 bits)
}

gen::WBMMSpec spec(gen::WBMMKernel k, lkjit::DType dt, int w, bool specific = true, int arch = 90) {
  gen::WBMMSpec s;
  s.kernel = k, s.dtype = dt, s.wh = s.ww = w, s.arch = arch, s.arch_specific = specific;
  return s;
}
std::vector<int> engines(const gen::WBMMSpec& s) {
  for (const auto& a : gen::tile_axes(s))
    if (a.name == "engine") return a.values;
  return {};
}
gen::WBMMTile wgmma_tile(int wn = 2, int mt = 1) {
  gen::WBMMTile t;
  t.engine = 2, t.wm = 4, t.wn = wn, t.mt = mt, t.chunk = 4;
  return t;
}

TEST(WBMMWgmma, EngineTwoOnlyFor16BitFwdAndDgradOnSm90a) {
  using K = gen::WBMMKernel;
  using lkjit::DType;
  EXPECT_EQ(engines(spec(K::kFwd, DType::kBF16, 7)), (std::vector<int>{1, 2}));
  EXPECT_EQ(engines(spec(K::kDgrad, DType::kF16, 14)), (std::vector<int>{1, 2}));
  EXPECT_EQ(engines(spec(K::kFwd, DType::kBF16, 7, false)), (std::vector<int>{1}));    // sm_90: no wgmma
  EXPECT_EQ(engines(spec(K::kFwd, DType::kBF16, 7, true, 100)), (std::vector<int>{1}));  // sm_100a: not sm_90a
  EXPECT_EQ(engines(spec(K::kFwd, DType::kF32, 7)), (std::vector<int>{0, 1}));
  EXPECT_EQ(engines(spec(K::kWgrad, DType::kBF16, 7)), (std::vector<int>{1}));
}

TEST(WBMMWgmma, RefusalsNameTheRule) {
  using K = gen::WBMMKernel;
  using lkjit::DType;
  const auto lim = lkjit::DeviceLimits::for_arch(90);
  const lkjit::Shape sh{2, 8, 28, 28, 1};
  auto why = [&](const gen::WBMMSpec& s, const gen::WBMMTile& t) { return gen::reject(s, t, lim, &sh).value_or(""); };
  EXPECT_EQ(why(spec(K::kFwd, DType::kBF16, 7), wgmma_tile()), "");
  EXPECT_THAT(why(spec(K::kFwd, DType::kBF16, 7, false), wgmma_tile()), HasSubstr("compiled for sm_90a; this is a bf16 wbmm_fwd kernel for sm_90"));
  EXPECT_THAT(why(spec(K::kFwd, DType::kF32, 7), wgmma_tile()), HasSubstr("16-bit fwd / dgrad"));
  EXPECT_THAT(why(spec(K::kWgrad, DType::kBF16, 7), wgmma_tile()), HasSubstr("wbmm_wgrad"));
  gen::WBMMTile t = wgmma_tile();
  t.wm = 2;
  EXPECT_THAT(why(spec(K::kFwd, DType::kBF16, 7), t), HasSubstr("a warpgroup is wm=4 warps along the windows; wm=2"));
  t = wgmma_tile(1, 2);  // 16x16: 2 m64 tiles x (16 k steps of A + 32 n8 tiles) = 384 registers
  EXPECT_THAT(why(spec(K::kFwd, DType::kBF16, 16), t), HasSubstr("keeps 384 A-fragment and accumulator registers"));
  t = wgmma_tile();
  t.engine = 3;
  EXPECT_THAT(why(spec(K::kFwd, DType::kBF16, 7), t), HasSubstr("engine=3 is out of range; supported: 0 (FFMA), 1 (tensor cores), 2 (wgmma)"));
  // Through the generator: a kernel name asking for wgmma on plain sm_90 is refused, naming sm_90a.
  gen::WBMMSpec plain = spec(K::kFwd, DType::kBF16, 7, false);
  EXPECT_THROW(lkjit::generate(gen::to_opspec(plain), gen::to_tile(plain, wgmma_tile())), lkjit::SpecError);
}

TEST(WBMMWgmma, MCIsStoredUnpaddedAndTheCfgSaysWgmma) {
  const gen::WBMMSpec s = spec(gen::WBMMKernel::kFwd, lkjit::DType::kBF16, 14);
  gen::WBMMTile t = wgmma_tile();
  gen::WBMMTile m = t;
  m.engine = 1;
  const int dp = gen::dp_of(s, t);
  ASSERT_EQ(dp, 208);
  EXPECT_EQ(gen::smem_parts(s, t).operand, int64_t(dp) * dp * 2);
  EXPECT_EQ(gen::smem_parts(s, m).operand, int64_t(dp) * (dp + 8) * 2);  // mma.sync: pitched rows
  EXPECT_THAT(gen::cfg_body(s, t), HasSubstr("nhwc = false, wgmma = true;"));
  EXPECT_THAT(gen::cfg_body(s, m), HasSubstr("nhwc = false, wgmma = false;"));
  const std::string name = lkjit::kernel_name(gen::to_opspec(s), gen::to_tile(s, t));
  EXPECT_THAT(name, HasSubstr("_e2_wm4_wn2_mt1_"));
  EXPECT_THAT(name, ::testing::EndsWith("_sm90a"));
  // The name parses back to the same spec (sm_90a included) and tile.
  const auto parsed = lkjit::parse_kernel_name(name);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_TRUE(parsed->spec.arch_specific);
  EXPECT_EQ(gen::wtile(s, parsed->tile).engine, 2);
}

TEST(WBMMWgmma, PlannerCompiles16BitFwdAndDgradForSm90a) {
  lkjit::WBMMOptions o;
  o.C = 8;
  const lkjit::Shape sh{2, 8, 28, 28, 1};
  for (auto dt : {lkjit::DType::kBF16, lkjit::DType::kF16, lkjit::DType::kF32})
    for (int arch : {80, 90}) {
      o.dtype = dt;
      const auto lim = lkjit::DeviceLimits::for_arch(arch);
      std::vector<lkjit::PlannedKernel> all = lkjit::wbmm_plan(o, sh, lim);
      for (const auto& pk : lkjit::wbmm_plan(o, sh, lim, true, lkjit::WBMMBackward::kSplit)) all.push_back(pk);
      for (const auto& pk : all) {
        const std::string k = pk.spec.kernel.name();
        const bool want = arch == 90 && dt != lkjit::DType::kF32 && (k == "wbmm_fwd" || k == "wbmm_dgrad");
        EXPECT_EQ(pk.spec.arch_specific, want) << k << " " << lkjit::to_string(dt) << " sm_" << arch;
      }
    }
}

// The defaults: wgmma above d = 64 (14x14: measured faster than mma.sync; 7x7: slower), and there the backward's
// auto path splits (the wgmma dgrad and a wgrad without dX beat the fused wgrad), as it does for fp32 on sm_90.
TEST(WBMMWgmma, DefaultsTakeWgmmaAboveD64AndSplitTheBackwardThere) {
  const auto lim = lkjit::DeviceLimits::for_arch(90);
  const lkjit::Shape sh{64, 256, 56, 56, 1};
  for (int w : {7, 14, 16})
    for (auto dt : {lkjit::DType::kBF16, lkjit::DType::kF16, lkjit::DType::kF32}) {
      SCOPED_TRACE(std::to_string(w) + " " + lkjit::to_string(dt));
      lkjit::WBMMOptions o;
      o.C = 256, o.wh = o.ww = w, o.dtype = dt;
      const bool f32 = dt == lkjit::DType::kF32, wgmma = w > 7 && !f32;
      const auto f = lkjit::wbmm_plan(o, sh, lim);
      EXPECT_EQ(f[0].tile.get("engine") == 2, wgmma);
      // The auto backward splits above d = 64 for the wgmma dgrad and above d = 144 for fp32 (both measured faster).
      const auto b = lkjit::wbmm_plan(o, sh, lim, true);
      EXPECT_EQ(b[0].spec.kernel.name(), w > 7 ? "wbmm_dgrad" : "wbmm_wgrad");
      if (wgmma) EXPECT_EQ(b[0].tile.get("engine"), 2);
      EXPECT_EQ(lkjit::wbmm_plan(o, sh, lim, true, lkjit::WBMMBackward::kFused)[0].spec.kernel.name(), "wbmm_wgrad");
      // sm_80: no wgmma and nothing measured: the fused default.
      const auto b80 = lkjit::wbmm_plan(o, sh, lkjit::DeviceLimits::for_arch(80), true);
      EXPECT_EQ(b80[0].spec.kernel.name(), "wbmm_wgrad");
    }
}

// NVRTC compiles of engine-2 tiles for sm_90a: both 16-bit types, fwd and dgrad, windows 1 to 16 (N from 8
// to 256 columns in products of 8-64), m64 tiles 1 and 2, NHWC, column splits, several channels a block,
// one stage, dense M.
TEST(WBMMWgmma, CompilesForSm90a) {
  using K = gen::WBMMKernel;
  using lkjit::DType;
  struct C {
    K k;
    DType dt;
    int w, mode, layout, wn, mt, split, cpb, stages;
  };
  const std::vector<C> cases = {
      {K::kFwd, DType::kBF16, 7, 0, 0, 1, 2, 1, 1, 2},  {K::kDgrad, DType::kF16, 14, 1, 1, 2, 1, 2, 2, 2},
      {K::kFwd, DType::kF16, 16, 1, 0, 4, 1, 1, 1, 1},  {K::kDgrad, DType::kBF16, 3, 0, 1, 1, 1, 1, 4, 2},
      {K::kFwd, DType::kBF16, 1, 0, 1, 1, 1, 1, 2, 1},
  };
  const auto lim = lkjit::DeviceLimits::for_arch(90);
  const lkjit::Shape sh{2, 8, 56, 56, 1};
  for (const auto& c : cases) {
    gen::WBMMSpec s = spec(c.k, c.dt, c.w);
    s.mode = c.mode, s.layout = c.layout, s.bias = c.k == K::kFwd;
    if (c.w == 3) s.ww = 5;
    gen::WBMMTile t = wgmma_tile(c.wn, c.mt);
    t.split = c.split, t.cpb = c.cpb, t.stages = c.stages, t.vec = 2;
    const auto r = gen::reject(s, t, lim, &sh);
    ASSERT_FALSE(r) << *r;
    const std::string name = lkjit::kernel_name(gen::to_opspec(s), gen::to_tile(s, t));
    SCOPED_TRACE(name);
    const auto src = lkjit::generate(gen::to_opspec(s), gen::to_tile(s, t));
    EXPECT_THAT(src.source, HasSubstr("wgmma = true"));
    lkjit::test::expect_cubin(lkjit::rt::nvrtc_compile(src, 90, true).cubin, 90, name);
  }
}

}  // namespace
