// The depthwise family in the generator (generator/ops/dwconv.cpp) on the CPU: registration as data, tokens
// no other family uses, kernel names that round-trip through parse_kernel_name, default tiles that the
// kernel's reject accepts for their shape, generated units identical to the hand-built instances the block
// emulator and NVRTC tests run (tests/dwconv_instances.h), geometry against brute-force counts, partial
// layouts that give every (chunk, c, tap) its own float, and rejects naming the value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "generator/ops/dwconv_geometry.h"
#include "lkjit/dwconv_kernels.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "tests/dwconv_instances.h"

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace lkjit;  // NOLINT
namespace td = lkjit::test::dwconv;
namespace gd = lkjit::gen::dwconv;

const Kernel kConv[] = {kDWConvFwdDirect, kDWConvDgradDirect, kDWConvFwdNhwc, kDWConvDgradNhwc,
                        kDWConvWgradDirect, kDWConvWgradNhwc};

OpSpec spec(const Kernel& k, DType t, int kh, int kw, int s = 1, int d = 1, int arch = 90) {
  return make_spec(k, t, arch, {{"kh", kh}, {"kw", kw}, {"stride", s}, {"dil", d}});
}

std::string spec_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return e.what();
  }
  return "(no error)";
}

// A pairwise sample: every kernel, dtype, (kh, kw), stride and dilation value appears, not every product.
struct Sample {
  Kernel k;
  DType t;
  int kh, kw, s, d;
  Shape sh;
};
std::vector<Sample> samples() {
  const DType ts[] = {DType::kF32, DType::kF16, DType::kBF16};
  const std::pair<int, int> ks[] = {{1, 1}, {3, 3}, {7, 7}, {13, 13}, {31, 31}, {5, 51}, {51, 5}, {2, 4}, {63, 63}};
  const Shape shapes[] = {{1, 1, 1, 1, 1}, {64, 96, 56, 56, 1}, {2, 30, 7, 9, 1}, {64, 1024, 7, 7, 1}, {1, 3, 200, 13, 1}};
  std::vector<Sample> v;
  int i = 0;
  for (const Kernel& k : kConv)
    for (auto [kh, kw] : ks) {
      ++i;
      v.push_back({k, ts[i % 3], kh, kw, 1 + (i / 3) % 2, 1 + i % 4, shapes[i % 5]});
    }
  return v;
}

TEST(DWConvFamily, IsRegisteredAsData) {
  const FamilyInfo& f = family("dwconv");
  ASSERT_EQ(f.kernels.size(), 10u);
  EXPECT_EQ(f.kernels.front(), kDWConvFwdDirect);
  EXPECT_EQ(f.kernels.back(), kDWConvWgradReduce);
  std::vector<std::string> names;
  for (const auto& x : f.fields) names.push_back(x.name);
  EXPECT_EQ(names, (std::vector<std::string>{"kh", "kw", "stride", "dil"}));
  for (const Kernel& k : kConv) {
    EXPECT_EQ(family_of(k).name, "dwconv");
    EXPECT_EQ(kernel_fields(k), names);
  }
  EXPECT_TRUE(kernel_fields(kDWConvWgradReduce).empty());
  const OpSpec s = make_spec(kDWConvFwdDirect, DType::kF32, 90);
  EXPECT_EQ(s.get("kh"), 3);
  EXPECT_EQ(s.get("dil"), 1);
  EXPECT_EQ(spec(kDWConvFwdNhwc, DType::kBF16, 31, 29, 2, 3).to_string(), "dwconv_fwd_nhwc bf16 kh=31 kw=29 stride=2 dil=3 sm_90");
}

// An axis name two families share has one token; otherwise no token of this family is another family's.
TEST(DWConvFamily, TokensAreItsOwn) {
  std::map<std::string, std::string> token_of;  // axis name -> token, over the other families
  std::set<std::string> other_tokens;
  for (const auto& f : families())
    if (f.name != "dwconv")
      for (const auto& a : f.axes) token_of[a.name] = a.token, other_tokens.insert(a.token);
  for (const auto& a : family("dwconv").axes) {
    if (token_of.count(a.name)) {
      EXPECT_EQ(a.token, token_of[a.name]) << a.name;
    } else {
      EXPECT_EQ(other_tokens.count(a.token), 0u) << a.name << " token " << a.token;
    }
  }
}

TEST(DWConvFamily, SpecRangesNameTheValue) {
  EXPECT_THAT(spec_error([] { validate(spec(kDWConvFwdDirect, DType::kF32, 0, 3)); }),
              AllOf(HasSubstr("dwconv_fwd_direct"), HasSubstr("kh=0"), HasSubstr("[1, 63]")));
  EXPECT_THAT(spec_error([] { validate(spec(kDWConvFwdDirect, DType::kF32, 3, 64)); }),
              AllOf(HasSubstr("kw=64"), HasSubstr("[1, 63]")));
  EXPECT_THAT(spec_error([] { validate(spec(kDWConvWgradNhwc, DType::kF16, 3, 3, 3)); }),
              AllOf(HasSubstr("stride=3"), HasSubstr("[1, 2]")));
  EXPECT_THAT(spec_error([] { validate(spec(kDWConvDgradNhwc, DType::kF16, 3, 3, 1, 5)); }),
              AllOf(HasSubstr("dil=5"), HasSubstr("[1, 4]")));
  EXPECT_THAT(spec_error([] { make_spec(kDWConvWgradReduce, DType::kF32, 90, {{"kh", 3}}); }),
              HasSubstr("'kh' is not a field"));
}

TEST(DWConvFamily, DefaultsAreValidAndNamesRoundTrip) {
  int named = 0;
  for (const auto& x : samples())
    for (int arch : {80, 90}) {
      const OpSpec s = spec(x.k, x.t, x.kh, x.kw, x.s, x.d, arch);
      const auto lim = DeviceLimits::for_arch(arch);
      const Tile t = default_tile(s, x.sh, lim);
      const auto why = reject_reason(s, t, lim, &x.sh);
      // 63x63 NHWC holds no channel group's filters twice an SM: the planner picks the direct kernel there.
      if (why) {
        EXPECT_TRUE(x.k == kDWConvFwdNhwc || x.k == kDWConvDgradNhwc) << s.to_string() << " " << *why;
        continue;
      }
      const std::string name = kernel_name(s, t);
      EXPECT_EQ(name.rfind("lkjit_" + s.kernel.name() + "_" + to_string(x.t) + "_kh", 0), 0u) << name;
      const auto back = parse_kernel_name(name);
      ASSERT_TRUE(back.has_value()) << name;
      EXPECT_EQ(back->spec, s) << name;
      EXPECT_EQ(back->tile, t) << name;
      ++named;
    }
  EXPECT_GE(named, 100);  // of 108: the 63x63 NHWC kernels may have none
  const OpSpec r = make_spec(kDWConvWgradReduce, DType::kF32, 90);
  const Tile rt = default_tile(r, Shape{1, 96, 50, 8, 1}, DeviceLimits::for_arch(90));
  EXPECT_EQ(kernel_name(r, rt), "lkjit_dwconv_wgrad_reduce_w256_sm90");
  ASSERT_TRUE(parse_kernel_name("lkjit_dwconv_wgrad_reduce_w256_sm90").has_value());
  EXPECT_EQ(parse_kernel_name("lkjit_dwconv_wgrad_reduce_w256_sm90")->tile, rt);
}

// Enumerated points are valid, distinct and their names parse back; the spaces stay small enough to list per
// lookup.
TEST(DWConvFamily, SpacesEnumerateRoundTrippingPoints) {
  const Shape sh{8, 64, 28, 28, 1};
  for (const Kernel& k : kConv) {
    const OpSpec s = spec(k, DType::kF16, 7, 7);
    const auto lim = DeviceLimits::for_arch(90);
    const auto all = enumerate(s, lim, &sh);
    ASSERT_GT(all.size(), 1u) << k.name();
    std::set<std::string> names;
    for (size_t i = 0; i < all.size(); i += std::max<size_t>(1, all.size() / 40)) {
      const std::string n = kernel_name(s, all[i]);
      EXPECT_TRUE(names.insert(n).second) << n;
      const auto back = parse_kernel_name(n);
      ASSERT_TRUE(back.has_value()) << n;
      EXPECT_EQ(back->tile, all[i]) << n;
      EXPECT_FALSE(reject_reason(s, all[i], lim, &sh)) << n;
    }
  }
}

// The generated unit is byte for byte the instance the emulation and NVRTC tests check, and so is its geometry.
TEST(DWConvFamily, GeneratedUnitsAreTheTestedInstances) {
  const std::pair<Kernel, td::DWKernel> pairs[] = {
      {kDWConvFwdDirect, td::DWKernel::kFwdDirect}, {kDWConvDgradDirect, td::DWKernel::kDgradDirect},
      {kDWConvFwdNhwc, td::DWKernel::kFwdNhwc},     {kDWConvDgradNhwc, td::DWKernel::kDgradNhwc},
      {kDWConvWgradDirect, td::DWKernel::kWgradDirect}, {kDWConvWgradNhwc, td::DWKernel::kWgradNhwc}};
  int checked = 0;
  for (const auto& x : samples())
    for (const auto& [k, dk] : pairs) {
      if (k != x.k) continue;
      const gd::SpecVals sv{x.t, x.kh, x.kw, x.s, x.d, 90};
      gd::Problem p;
      p.B = x.sh.B, p.C = x.sh.C, p.H = p.Ho = x.sh.H, p.W = p.Wo = x.sh.W;
      const td::Instance in = td::make_instance(dk, sv, p, 0);
      if (!in.ok) continue;
      const OpSpec s = spec(k, x.t, x.kh, x.kw, x.s, x.d);
      const Tile t = default_tile(s, x.sh, DeviceLimits::for_arch(90));
      const auto g = generate(s, t);
      std::string src = in.source;
      for (size_t at; (at = src.find(in.name)) != std::string::npos;) src.replace(at, in.name.size(), g.kernel_name);
      EXPECT_EQ(g.source, src) << g.kernel_name;
      const auto geo = launch_geometry(s, t, x.sh);
      EXPECT_EQ(geo.grid[0], in.launch.grid) << g.kernel_name;
      EXPECT_EQ(geo.block[0], in.launch.block) << g.kernel_name;
      EXPECT_EQ(geo.smem_bytes, in.launch.smem_bytes) << g.kernel_name;
      EXPECT_EQ(geo.value("tiles_h"), in.launch.tiles_h);
      EXPECT_EQ(geo.value("tiles_w"), in.launch.tiles_w);
      EXPECT_DOUBLE_EQ(geo.blocks, double(geo.grid[0]));
      ++checked;
    }
  EXPECT_GE(checked, 40);
}

// The tensor-core kernels: their spec domain (16-bit, stride 1, dilation 1) names the value; their defaults are
// valid, their names round-trip, their spaces enumerate valid points, and the generated unit is the instance the
// NVRTC and GPU tests run.
TEST(DWConvFamily, MmaKernelsTakeTheirDomain) {
  for (const Kernel& k : {kDWConvFwdMma, kDWConvDgradMma}) {
    EXPECT_THAT(spec_error([&] { validate(spec(k, DType::kF32, 31, 31)); }),
                AllOf(HasSubstr(k.name()), HasSubstr("dtype=f32"), HasSubstr("f16 or bf16")));
    EXPECT_THAT(spec_error([&] { validate(spec(k, DType::kBF16, 31, 31, 2)); }), HasSubstr("stride=2"));
    EXPECT_THAT(spec_error([&] { validate(spec(k, DType::kF16, 31, 31, 1, 3)); }), HasSubstr("dil=3"));
    EXPECT_EQ(spec_error([&] { validate(spec(k, DType::kF16, 31, 31)); }), "(no error)");
  }
  const std::pair<int, int> ks[] = {{1, 1}, {3, 3}, {7, 7}, {13, 13}, {31, 31}, {5, 51}, {51, 5}, {2, 4}, {63, 63}};
  const Shape shapes[] = {{1, 1, 1, 1, 1}, {64, 128, 56, 56, 1}, {2, 30, 7, 9, 1}, {64, 512, 14, 14, 1}, {1, 3, 200, 13, 1}};
  int named = 0, units = 0;
  for (const Kernel& k : {kDWConvFwdMma, kDWConvDgradMma})
    for (size_t i = 0; i < std::size(ks); ++i)
      for (int arch : {80, 90}) {
        const DType t = (i + arch) % 2 ? DType::kBF16 : DType::kF16;
        const Shape& sh = shapes[i % std::size(shapes)];
        const OpSpec s = spec(k, t, ks[i].first, ks[i].second, 1, 1, arch);
        const auto lim = DeviceLimits::for_arch(arch);
        const Tile tile = default_tile(s, sh, lim);
        const auto why = reject_reason(s, tile, lim, &sh);
        ASSERT_FALSE(why) << s.to_string() << ": " << *why;
        const auto back = parse_kernel_name(kernel_name(s, tile));
        ASSERT_TRUE(back.has_value()) << kernel_name(s, tile);
        EXPECT_EQ(back->spec, s);
        EXPECT_EQ(back->tile, tile);
        ++named;
        gd::Problem p;
        p.B = sh.B, p.C = sh.C, p.H = p.Ho = sh.H, p.W = p.Wo = sh.W;
        const td::Instance in = td::make_instance(k == kDWConvFwdMma ? td::DWKernel::kFwdMma : td::DWKernel::kDgradMma,
                                                  gd::SpecVals{t, ks[i].first, ks[i].second, 1, 1, arch}, p, 0);
        ASSERT_TRUE(in.ok);
        const auto g = generate(s, tile);
        std::string src = in.source;
        for (size_t at; (at = src.find(in.name)) != std::string::npos;) src.replace(at, in.name.size(), g.kernel_name);
        EXPECT_EQ(g.source, src) << g.kernel_name;
        const auto geo = launch_geometry(s, tile, sh);
        EXPECT_EQ(geo.grid[0], in.launch.grid);
        EXPECT_EQ(geo.block[0], in.launch.block);
        EXPECT_EQ(geo.smem_bytes, in.launch.smem_bytes);
        ++units;
      }
  EXPECT_EQ(named, 36);
  EXPECT_EQ(units, 36);
  const Shape sh{8, 64, 56, 56, 1};
  const OpSpec s = spec(kDWConvFwdMma, DType::kBF16, 31, 31);
  const auto all = enumerate(s, DeviceLimits::for_arch(90), &sh);
  ASSERT_GT(all.size(), 10u);
  for (const Tile& t : all) {
    EXPECT_FALSE(reject_reason(s, t, DeviceLimits::for_arch(90), &sh)) << kernel_name(s, t);
    EXPECT_EQ(parse_kernel_name(kernel_name(s, t))->tile, t);
  }
}

// Grids against brute-force counts: a block per (b, c) plane tile (direct), per (b, channel group) tile (nhwc),
// per (c, chunk) (wgrad_direct) and per (channel group, chunk) (wgrad_nhwc); the reduction a thread per value.
TEST(DWConvFamily, GeometryMatchesBruteForce) {
  const auto lim = DeviceLimits::for_arch(90);
  const Shape sh{3, 37, 29, 45, 1};
  auto count_tiles = [](int64_t n, int t) {
    int64_t c = 0;
    for (int64_t i = 0; i < n; i += t) ++c;
    return c;
  };
  for (const Kernel& k : {kDWConvFwdDirect, kDWConvDgradDirect}) {
    const OpSpec s = spec(k, DType::kF32, 5, 9);
    const Tile t = Tile::of({{"tile_h", 16}, {"tile_w", 32}, {"ry", 2}, {"rx", 4}, {"threads", 64}});
    ASSERT_FALSE(reject_reason(s, t, lim, &sh)) << *reject_reason(s, t, lim, &sh);
    const auto g = launch_geometry(s, t, sh);
    EXPECT_EQ(g.grid[0], sh.B * sh.C * count_tiles(29, 16) * count_tiles(45, 32));
    EXPECT_EQ(g.block[0], 64u);
    EXPECT_GT(g.smem_bytes, 0u);
  }
  {
    const OpSpec s = spec(kDWConvFwdNhwc, DType::kF16, 7, 7);
    const Tile t = Tile::of({{"tile_h", 8}, {"tile_w", 8}, {"ry", 2}, {"rx", 4}, {"lanes", 8}, {"cvec", 2}, {"threads", 64}});
    ASSERT_FALSE(reject_reason(s, t, lim, &sh)) << *reject_reason(s, t, lim, &sh);
    EXPECT_EQ(launch_geometry(s, t, sh).grid[0], sh.B * count_tiles(37, 16) * count_tiles(29, 8) * count_tiles(45, 8));
  }
  for (const Kernel& k : {kDWConvWgradDirect, kDWConvWgradNhwc}) {
    const OpSpec s = spec(k, DType::kBF16, 7, 5);
    const Tile t = default_tile(s, sh, lim);
    const auto g = launch_geometry(s, t, sh);
    const int64_t chunks = g.value("chunks"), taps = 7 * 5;
    EXPECT_GE(chunks, 1);
    const int64_t groups = k == kDWConvWgradDirect ? sh.C : (sh.C + t.get("lanes") * t.get("cvec") - 1) /
                                                                  (t.get("lanes") * t.get("cvec"));
    EXPECT_EQ(g.grid[0], groups * chunks) << k.name();
    // Every (chunk, c, tap) value (tap == taps: dbias) has its own float inside partial_floats.
    const int64_t n = g.value("partial_floats");
    EXPECT_EQ(n, sh.C * chunks * (taps + 1));
    std::vector<char> seen(n, 0);
    for (int64_t ch = 0; ch < chunks; ++ch)
      for (int64_t c = 0; c < sh.C; ++c)
        for (int64_t tap = 0; tap <= taps; ++tap) {
          const int64_t at = ch * g.value("part_st0") + c * g.value("part_st1") + tap * g.value("part_st2");
          ASSERT_TRUE(at >= 0 && at < n && !seen[at]) << k.name() << " " << ch << " " << c << " " << tap;
          seen[at] = 1;
        }
  }
  const OpSpec r = make_spec(kDWConvWgradReduce, DType::kF32, 90);
  const Shape rs{1, 37, 36, 5, 1};
  EXPECT_EQ(launch_geometry(r, Tile::of({{"threads", 128}}), rs).grid[0], (37u * 36 + 127) / 128);
}

TEST(DWConvFamily, RejectsNameTheValue) {
  const auto lim = DeviceLimits::for_arch(90);
  const Shape sh{1, 8, 16, 16, 1};
  const OpSpec d = spec(kDWConvFwdDirect, DType::kF32, 7, 7);
  EXPECT_THAT(reject_reason(d, Tile::of({{"tile_h", 16}, {"tile_w", 32}, {"ry", 2}, {"rx", 4}, {"kc", 7}, {"threads", 64}}),
                            lim, &sh).value_or(""),
              AllOf(HasSubstr("kc=7"), HasSubstr("sub-filter rows")));
  EXPECT_THAT(reject_reason(d, Tile::of({{"tile_h", 16}, {"tile_w", 32}, {"ry", 2}, {"rx", 4}, {"threads", 48}}), lim, &sh)
                  .value_or(""),
              AllOf(HasSubstr("threads=48"), HasSubstr("multiple of 32")));
  EXPECT_THAT(reject_reason(d, Tile::of({{"tile_h", 16}, {"tile_w", 32}, {"ry", 2}, {"rx", 4}, {"threads", 64}, {"planes", 2}}),
                            lim, &sh).value_or(""),
              AllOf(HasSubstr("planes=2"), HasSubstr("no such tile axis")));
  const OpSpec w = spec(kDWConvWgradNhwc, DType::kF16, 3, 3);
  EXPECT_THAT(reject_reason(w, Tile::of({{"lanes", 32}, {"cvec", 2}, {"row_taps", 4}, {"threads", 32}}), lim, &sh).value_or(""),
              AllOf(HasSubstr("row_taps=4"), HasSubstr("kw=3")));
  const OpSpec n = spec(kDWConvFwdNhwc, DType::kF32, 3, 3);
  EXPECT_THAT(reject_reason(n, Tile::of({{"tile_h", 8}, {"tile_w", 8}, {"ry", 1}, {"rx", 1}, {"lanes", 12}, {"cvec", 1}, {"threads", 64}}),
                            lim, &sh).value_or(""),
              AllOf(HasSubstr("lanes=12"), HasSubstr("8, 16, 32")));
}

}  // namespace
