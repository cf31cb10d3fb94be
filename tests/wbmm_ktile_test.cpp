// K-tiling of the WBMM forward / dgrad product (the kchunk axis), CPU side: the chunk walk of
// templates/wbmm/geometry.cuh (k_chunks, the last chunk), where the axis is in the tile space, each refusal's
// message, the two-buffer shared memory against the template's layout (and the dense fp32 16x16 operand that
// now fits without a column split), names, and NVRTC compiles for sm_80 and sm_90 of every precision. The
// products run against the float64 reference in tests/gpu/wbmm_test.cpp (WBMMKTiles).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "generator/ops/wbmm_geometry.h"
#include "lkjit/generator.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/cubin_check.h"
#include "wbmm/geometry.cuh"

namespace {

namespace gen = lkjit::gen::wbmm;
namespace dev = lkjit::wbmm;
using ::testing::HasSubstr;

gen::WBMMSpec spec(gen::WBMMKernel k, lkjit::DType dt, int wh, int ww, int mode = 0) {
  gen::WBMMSpec s;
  s.kernel = k, s.dtype = dt, s.wh = wh, s.ww = ww, s.mode = mode;
  return s;
}
gen::WBMMTile ktile(int kc, int engine = 1) {
  gen::WBMMTile t;
  t.engine = engine, t.wm = 2, t.wn = 2, t.mt = 1, t.split = 1, t.kchunk = kc, t.chunk = 4, t.vec = 1;
  return t;
}

// The chunks cover k = 0 .. dp-1 once, each a whole number of every precision's k steps (16, 8, 4), the
// last one no longer than the others.
TEST(WBMMKTiling, ChunksCoverDpInWholeKSteps) {
  EXPECT_EQ(dev::k_chunks(208, 0), 1);
  EXPECT_EQ(dev::b_buffers(0), 1);
  EXPECT_EQ(dev::b_buffers(32), 2);
  EXPECT_EQ(dev::k_chunks(208, 64), 4);  // 64 + 64 + 64 + 16
  EXPECT_EQ(dev::k_chunks(256, 32), 8);
  for (int dp = 16; dp <= 256; dp += 16)
    for (int kc : {16, 32, 64}) {
      const int n = dev::k_chunks(dp, kc), last = dp - (n - 1) * kc;
      ASSERT_GT(last, 0) << dp << " " << kc;
      ASSERT_LE(last, kc) << dp << " " << kc;
      ASSERT_EQ(last % 16, 0) << dp << " " << kc;
      ASSERT_EQ((n - 1) * kc + last, dp);
    }
}

std::vector<int> kchunks(const gen::WBMMSpec& s) {
  for (const auto& a : gen::tile_axes(s))
    if (a.name == "kchunk") return a.values;
  return {};
}

TEST(WBMMKTiling, AxisOnlyWhereMcIsLarge) {
  using K = gen::WBMMKernel;
  using lkjit::DType;
  const std::vector<int> all = {0, 16, 32, 64};
  EXPECT_EQ(kchunks(spec(K::kFwd, DType::kF32, 14, 14)), all);
  EXPECT_EQ(kchunks(spec(K::kDgrad, DType::kBF16, 16, 16, 1)), all);
  EXPECT_EQ(kchunks(spec(K::kFwd, DType::kF16, 9, 9)), all);  // d = 81
  EXPECT_TRUE(kchunks(spec(K::kFwd, DType::kBF16, 7, 7)).empty());  // d = 49: M_c is small
  EXPECT_TRUE(kchunks(spec(K::kFwd, DType::kF32, 8, 8)).empty());   // d = 64
  EXPECT_TRUE(kchunks(spec(K::kWgrad, DType::kF32, 16, 16)).empty());
}

TEST(WBMMKTiling, RefusalsNameTheRule) {
  using K = gen::WBMMKernel;
  using lkjit::DType;
  const auto lim = lkjit::DeviceLimits::for_arch(90);
  const lkjit::Shape sh{2, 8, 28, 28, 1};
  auto why = [&](const gen::WBMMSpec& s, const gen::WBMMTile& t) { return gen::reject(s, t, lim, &sh).value_or(""); };
  const auto f14 = spec(K::kFwd, DType::kF32, 14, 14);
  EXPECT_EQ(why(f14, ktile(32)), "");
  EXPECT_EQ(why(f14, ktile(16, 0)), "");
  EXPECT_THAT(why(f14, ktile(8)), HasSubstr("kchunk=8 is not supported; supported: 0, 16, 32, 64"));
  EXPECT_THAT(why(f14, ktile(-16)), HasSubstr("kchunk=-16 is not supported"));
  // 9x9 bf16: dp = 96, so 64 makes two chunks, which fit whole.
  EXPECT_THAT(why(spec(K::kFwd, DType::kBF16, 9, 9), ktile(64)),
              HasSubstr("kchunk=64 makes 2 K chunks of dp=96; supported: 3 or more (fewer fit whole: kchunk=0)"));
  gen::WBMMSpec a = spec(K::kFwd, DType::kBF16, 14, 14);
  a.arch_specific = true;
  gen::WBMMTile w = ktile(32, 2);
  w.wm = 4;
  EXPECT_THAT(why(a, w), HasSubstr("kchunk=32: engine=2 (wgmma) reads M_c whole in its core-matrix layout"));
  w.kchunk = 0;
  EXPECT_EQ(why(a, w), "");
  gen::WBMMTile g = ktile(32);
  g.wpb = 32, g.gm = 2, g.gn = 2;
  EXPECT_THAT(why(spec(K::kWgrad, DType::kF32, 14, 14), g), HasSubstr("K-tiling applies to the fwd/dgrad product only"));
}

// Dense fp32 16x16 (d = 256): M_c whole is 256 x 260 floats, past the 227 KiB of sm_90, so the defaults split its
// columns (x read twice); K-tiled it runs whole-width from two 256 x 36-float buffers.
TEST(WBMMKTiling, DenseF32At16x16FitsWithoutAColumnSplit) {
  const auto lim = lkjit::DeviceLimits::for_arch(90);
  const auto s = spec(gen::WBMMKernel::kFwd, lkjit::DType::kF32, 16, 16, 1);
  gen::WBMMTile t = ktile(0);
  ASSERT_EQ(gen::dp_of(s, t), 256);
  EXPECT_THAT(gen::reject(s, t, lim, nullptr).value_or(""), HasSubstr("shared memory"));
  t.kchunk = 32;
  ASSERT_FALSE(gen::reject(s, t, lim, nullptr)) << *gen::reject(s, t, lim, nullptr);
  EXPECT_EQ(gen::smem_parts(s, t).operand, 2 * 256 * 36 * 4);
  EXPECT_LT(gen::smem_bytes(s, t), int64_t(lim.max_smem_per_block));
}

TEST(WBMMKTiling, SharedMemoryMatchesTheTemplateLayout) {
  int n = 0;
  for (auto dt : {lkjit::DType::kF32, lkjit::DType::kBF16})
    for (int w : {9, 14, 16})
      for (int kc : {0, 16, 32, 64})
        for (int engine : {0, 1})
          for (int wn : {1, 2, 4})
            for (int split : {1, 2})
              for (int cpb : {1, 2}) {
                if (dt != lkjit::DType::kF32 && engine == 0) continue;
                const auto s = spec(gen::WBMMKernel::kFwd, dt, w, w);
                gen::WBMMTile t = ktile(kc, engine);
                t.wn = wn, t.split = split, t.cpb = cpb;
                const int dp = gen::dp_of(s, t), tb = gen::dtype_size(dt), ob = gen::operand_size(s, t);
                const auto L = dev::fwd_layout(dp, split, gen::wpb_of(s, t), cpb, tb, ob, false, kc);
                ASSERT_EQ(gen::smem_bytes(s, t), L.total) << gen::cfg_body(s, t);
                ASSERT_EQ(L.a % 16, 0);
                ++n;
              }
  EXPECT_GT(n, 300);
}

TEST(WBMMKTiling, NamesAndCfg) {
  const auto s = spec(gen::WBMMKernel::kDgrad, lkjit::DType::kF32, 14, 14);
  const gen::WBMMTile t = ktile(32);
  const std::string name = lkjit::kernel_name(gen::to_opspec(s), gen::to_tile(s, t));
  EXPECT_THAT(name, HasSubstr("_s1_kt32_c1_"));
  EXPECT_THAT(gen::cfg_body(s, t), HasSubstr("nsplit = 1, kchunk = 32,"));
  const auto parsed = lkjit::parse_kernel_name(name);
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(gen::wtile(s, parsed->tile).kchunk, 32);
  // kchunk = 0 is not printed: names of whole-M_c kernels are unchanged.
  EXPECT_THAT(lkjit::kernel_name(gen::to_opspec(s), gen::to_tile(s, ktile(0))), HasSubstr("_s1_c1_"));
}

// NVRTC compiles of K-tiled kernels: every precision (16-bit MMA, FFMA, 3xTF32, TF32), fwd and dgrad, table and
// dense, the identity in the accumulator and folded, NHWC, one stage, several channels a block, a column split,
// chunks of 16 to 64 with a shorter last one (dp = 208); sm_80 and sm_90 alternate.
TEST(WBMMKTiling, CompilesForSm80AndSm90) {
  using K = gen::WBMMKernel;
  using lkjit::DType;
  struct C {
    K k;
    DType dt;
    int w, mode, tf32, engine, kc, fold, layout, stages, cpb, arch, split = 1;
  };
  const std::vector<C> cases = {
      {K::kFwd, DType::kBF16, 14, 0, 0, 1, 64, 0, 0, 2, 1, 90},  {K::kDgrad, DType::kF16, 16, 1, 0, 1, 32, 0, 1, 1, 2, 80},
      {K::kFwd, DType::kF32, 16, 1, 0, 0, 32, 1, 0, 2, 1, 90},   {K::kDgrad, DType::kF32, 14, 0, 0, 1, 16, 0, 1, 2, 1, 80},
      {K::kFwd, DType::kF32, 14, 0, 1, 1, 64, 0, 0, 1, 1, 90},   {K::kFwd, DType::kF32, 9, 0, 0, 0, 16, 0, 1, 2, 2, 80},
      {K::kDgrad, DType::kBF16, 16, 0, 0, 1, 32, 0, 0, 2, 1, 90, 2},  // with a column split: j0 > 0
  };
  const lkjit::Shape sh{2, 8, 56, 56, 1};
  for (const auto& c : cases) {
    gen::WBMMSpec s = spec(c.k, c.dt, c.w, c.w, c.mode);
    s.arch = c.arch, s.tf32 = c.tf32, s.layout = c.layout, s.bias = c.k == K::kFwd;
    gen::WBMMTile t = ktile(c.kc, c.engine);
    t.fold = c.fold, t.stages = c.stages, t.cpb = c.cpb, t.split = c.split;
    const auto r = gen::reject(s, t, lkjit::DeviceLimits::for_arch(c.arch), &sh);
    ASSERT_FALSE(r) << *r;
    const std::string name = lkjit::kernel_name(gen::to_opspec(s), gen::to_tile(s, t));
    SCOPED_TRACE(name);
    const auto src = lkjit::generate(gen::to_opspec(s), gen::to_tile(s, t));
    EXPECT_THAT(src.source, HasSubstr("kchunk = " + std::to_string(c.kc)));
    lkjit::test::expect_cubin(lkjit::rt::nvrtc_compile(src, c.arch, false).cubin, c.arch, name);
  }
}

}  // namespace
