// Tests of the WBMM family as the generator registers it (generator/ops/wbmm.cpp): kernel names in the generic
// form that round-trip through parse_kernel_name, tokens no other family uses, tile spaces whose points are
// valid and hold the default, the generated unit's launch bounds and Cfg, geometry values for the layer, and
// the spec rules through the generic validate().
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "generator/family.h"
#include "generator/ops/wbmm_geometry.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/wbmm_kernels.h"
#include "lkjit/wtconv_kernels.h"

namespace {

using namespace lkjit;
namespace gen = lkjit::gen::wbmm;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

std::string spec_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}

const std::vector<Kernel> kKernels = {kWBMMFwd, kWBMMDgrad, kWBMMWgrad, kWBMMReduce};

// A spread of specs: every kernel, dtype and precision, table and dense, windows 1x1 .. 16x16, layouts,
// identity / bias / fused dX on and off.
std::vector<OpSpec> sample_specs() {
  std::vector<OpSpec> v;
  int i = 0;
  for (const Kernel& k : kKernels)
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16})
      for (auto [wh, ww] : std::vector<std::pair<int, int>>{{1, 1}, {7, 7}, {3, 5}, {14, 14}, {16, 16}, {2, 16}})
        for (int mode : {0, 1}) {
          ++i;
          const int tf32 = dt == DType::kF32 ? i % 2 : 0;
          v.push_back(wbmm_spec(k, dt, wh, ww, mode, tf32, (i / 2) % 2, (i / 3) % 2, (i / 5) % 2, (i / 7) % 2, i % 3 ? 90 : 80));
        }
  return v;
}

TEST(WBMMFamily, IsRegisteredWithItsFieldsAxesAndKernels) {
  const FamilyInfo& f = family("wbmm");
  EXPECT_EQ(f.kernels, kKernels);
  EXPECT_EQ(family_of(kWBMMWgrad).name, "wbmm");
  std::vector<std::string> fields;
  for (const auto& x : f.fields) fields.push_back(x.name);
  EXPECT_EQ(fields, (std::vector<std::string>{"wh", "ww", "mode", "tf32", "identity", "bias", "layout", "fuse_dx"}));
  EXPECT_EQ(kernel_fields(kWBMMReduce), (std::vector<std::string>{"wh", "ww", "mode", "bias"}));
  EXPECT_EQ(kernel_fields(kWBMMDgrad), (std::vector<std::string>{"wh", "ww", "mode", "tf32", "identity", "layout"}));
  // make_spec fills defaults: a 7x7 table forward with the identity and no bias, NCHW order, dX fused.
  const OpSpec s = make_spec(kWBMMWgrad, DType::kBF16, 90);
  EXPECT_EQ(s, wbmm_spec(kWBMMWgrad, DType::kBF16, 7, 7));
  EXPECT_EQ(s.to_string(), "wbmm_wgrad bf16 7x7 table identity dx NCHW sm_90");
  EXPECT_EQ(wbmm_spec(kWBMMFwd, DType::kF32, 14, 14, 1, 1, 0, 1, 1).to_string(),
            "wbmm_fwd f32 14x14 dense tf32 no-identity bias NHWC sm_90");
  EXPECT_EQ(wbmm_spec(kWBMMReduce, DType::kBF16, 7, 7, 0, 0, 1, 1).to_string(), "wbmm_reduce f32 7x7 table dbias sm_90");
  for (const auto& sp : sample_specs()) EXPECT_NO_THROW(validate(sp)) << sp.to_string();
}

// Kernel-name tokens: none of WBMM's field or axis tokens is another family's axis token (parse_kernel_name
// tries every family's axes), except for an axis the families share by name (threads).
TEST(WBMMFamily, TokensAreItsOwn) {
  std::map<std::string, std::string> other;  // token -> axis name, of every other family
  for (const auto& f : lkjit::gen::registered_families())
    if (f.name != "wbmm")
      for (const auto& a : f.axes)
        if (!a.token.empty()) other[a.token] = a.name;
  const auto& me = lkjit::gen::family_def(kWBMMFwd);
  std::set<std::string> mine;
  for (const auto& x : me.fields) {
    EXPECT_EQ(other.count(x.token), 0u) << "field token " << x.token << " is also axis " << other[x.token] << "'s";
    EXPECT_TRUE(mine.insert(x.token).second) << x.token;
  }
  for (const auto& a : me.axes) {
    if (other.count(a.token)) EXPECT_EQ(other[a.token], a.name) << "token " << a.token;
    EXPECT_TRUE(mine.insert(a.token).second) << a.token;
  }
}

// Names: the generic form, no absent axes (no "w0" of WTConv's always-printed threads), the reduce without a
// dtype; every name parses back to the same spec and tile.
TEST(WBMMFamily, NamesAreGenericAndRoundTrip) {
  const auto d = DeviceLimits::for_arch(90);
  const Shape sh{2, 64, 56, 56, 1};
  const OpSpec f = wbmm_spec(kWBMMFwd, DType::kBF16, 7, 7);
  const Tile t = default_tile(f, sh, d);
  const std::string name = kernel_name(f, t);
  EXPECT_THAT(name, AllOf(HasSubstr("lkjit_wbmm_fwd_bf16_wh7_ww7_m0_tf0_id1_bi0_l0_e1_wm"), Not(HasSubstr("_w0")),
                          Not(HasSubstr("_fi"))));
  EXPECT_EQ(kernel_name(wbmm_spec(kWBMMReduce, DType::kF32, 7, 7, 0, 0, 1, 1), Tile::of({{"threads", 256}})),
            "lkjit_wbmm_reduce_wh7_ww7_m0_bi1_w256_sm90");
  // WTConv's names keep their always-printed threads.
  EXPECT_EQ(Tile{}.to_string(), "w0");
  EXPECT_EQ(Tile::of({{"planes", 2}}).to_string(), "p2_w0");
  // FFMA (engine 0) and an unfolded identity are absent axes: not printed, and parsed back as 0.
  const OpSpec x = wbmm_spec(kWBMMFwd, DType::kF32, 7, 7);
  Tile ffma = default_tile(x, sh, d);
  ASSERT_EQ(ffma.get("engine"), 0);
  EXPECT_THAT(kernel_name(x, ffma), Not(HasSubstr("_e")));
  std::mt19937 rng(7);
  int checked = 0;
  for (const auto& sp : sample_specs()) {
    std::vector<Tile> tiles = {default_tile(sp, sh, DeviceLimits::for_arch(sp.arch))};
    const TileSpace space = tile_space(sp);
    for (int r = 0; r < 20; ++r) {  // random points of the space (valid or not: names exist either way)
      Tile u;
      for (const auto& a : space.axes) u.set(a.name, a.values[rng() % a.values.size()]);
      tiles.push_back(u);
    }
    for (const Tile& u : tiles) {
      const std::string n = kernel_name(sp, u);
      const auto back = parse_kernel_name(n);
      ASSERT_TRUE(back) << n;
      EXPECT_EQ(back->spec, sp) << n;
      EXPECT_EQ(back->tile, u) << n;
      ++checked;
    }
  }
  EXPECT_GT(checked, 2000);
  // Near misses are not names.
  for (const char* bad : {"lkjit_wbmm_fwd_bf16_wh7_ww7_m0_tf0_id1_bi0_l0_e1_wm2_wn2_sm", "lkjit_wbmm_fwd_bf16_wh7_sm90",
                          "lkjit_wbmm_reduce_bf16_wh7_ww7_m0_bi1_w256_sm90", "lkjit_wbmm_fwd_bf16_wh7_ww7_m0_tf0_id1_bi0_l0_v4_sm90",
                          "lkjit_wbmm_dgrad_bf16_wh7_ww7_m0_tf0_id1_bi0_l0_sm90"})
    EXPECT_FALSE(parse_kernel_name(bad)) << bad;
}

// Spaces: the axes per kernel and precision; every enumerated point is accepted (for the shape too), the
// default is one, and a whole space enumerates quickly (the tuner lists it before searching).
TEST(WBMMFamily, SpacesHoldValidPointsAndTheDefault) {
  auto names = [](const OpSpec& s) {
    std::vector<std::string> v;
    for (const auto& a : tile_space(s).axes) v.push_back(a.name);
    return v;
  };
  EXPECT_EQ(names(wbmm_spec(kWBMMFwd, DType::kBF16, 7, 7)),
            (std::vector<std::string>{"engine", "wm", "wn", "mt", "split", "cpb", "stages", "vec", "chunk"}));
  EXPECT_EQ(names(wbmm_spec(kWBMMFwd, DType::kF32, 7, 7)),
            (std::vector<std::string>{"engine", "wm", "wn", "mt", "split", "cpb", "stages", "vec", "chunk", "fold"}));
  EXPECT_EQ(names(wbmm_spec(kWBMMFwd, DType::kF32, 7, 7, 0, 1)),  // TF32: no exact identity to fold
            (std::vector<std::string>{"engine", "wm", "wn", "mt", "split", "cpb", "stages", "vec", "chunk"}));
  EXPECT_EQ(names(wbmm_spec(kWBMMWgrad, DType::kBF16, 7, 7)),
            (std::vector<std::string>{"engine", "wm", "split", "cpb", "stages", "vec", "chunk", "wpb", "gm", "gn"}));
  EXPECT_EQ(names(wbmm_spec(kWBMMWgrad, DType::kBF16, 7, 7, 0, 0, 1, 0, 0, 0)),
            (std::vector<std::string>{"engine", "split", "cpb", "stages", "vec", "chunk", "wpb", "gm", "gn"}));
  EXPECT_EQ(names(wbmm_spec(kWBMMReduce, DType::kF32, 7, 7)), (std::vector<std::string>{"threads"}));
  const auto d = DeviceLimits::for_arch(90);
  // A point of the space (lkjit::in_space, checked against enumerate() below).
  auto in_space = [&](const OpSpec& spec, const Tile& t, const Shape& sh) {
    return lkjit::in_space(spec, t, DeviceLimits::for_arch(spec.arch), &sh);
  };
  const std::vector<Shape> shapes = {{1, 1, 1, 1, 1}, {2, 3, 10, 11, 1}, {64, 256, 56, 56, 1}, {128, 640, 7, 7, 1}, {1, 5, 224, 224, 1}};
  int n = 0;
  for (const auto& spec : sample_specs())
    for (const auto& sh : shapes) {
      const Tile def = default_tile(spec, sh, DeviceLimits::for_arch(spec.arch));
      ASSERT_TRUE(in_space(spec, def, sh)) << spec.to_string() << " " << sh.to_string() << ": default "
                                                               << def.to_string() << " is not a point of the space";
      ++n;
    }
  EXPECT_GT(n, 500);
  // Whole spaces (the tuner lists one before searching): every point accepted, the default among them, and
  // quick to list. The largest (dense fp32 wgrad, about 330 000 combinations) takes a few seconds.
  for (const auto& [spec, sh] : std::vector<std::pair<OpSpec, Shape>>{
           {wbmm_spec(kWBMMFwd, DType::kBF16, 7, 7), {64, 256, 56, 56, 1}},
           {wbmm_spec(kWBMMWgrad, DType::kBF16, 7, 7, 0, 0, 1, 0, 1), {128, 640, 7, 7, 1}},
           {wbmm_spec(kWBMMReduce, DType::kF32, 7, 7), {2, 8, 30, 29, 1}}}) {
    SCOPED_TRACE(spec.to_string());
    const auto t0 = std::chrono::steady_clock::now();
    const auto all = enumerate(spec, d, &sh);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0) << all.size() << " points";
    ASSERT_FALSE(all.empty());
    const Tile def = default_tile(spec, sh, d);
    EXPECT_NE(std::find(all.begin(), all.end(), def), all.end()) << "default " << def.to_string() << " not in the space";
    for (size_t i = 0; i < all.size(); i += std::max<size_t>(1, all.size() / 200)) ASSERT_TRUE(in_space(spec, all[i], sh));
  }
}

// in_space (the tuner's re-validation of a database record) is membership in enumerate(), for both families'
// spaces: every listed point is in, and every other point of the axes' product is out.
TEST(WBMMFamily, InSpaceAgreesWithEnumerate) {
  const auto d = DeviceLimits::for_arch(90);
  for (const auto& [spec, sh] : std::vector<std::pair<OpSpec, Shape>>{
           {wtconv_spec(kWTConvFwdPlane, DType::kF32, 5, 3), {8, 16, 56, 56, 1}},
           {wtconv_spec(kWTConvBwdSynth, DType::kBF16, 7, 2), {8, 16, 56, 56, 1}},
           {wbmm_spec(kWBMMReduce, DType::kF32, 7, 7), {2, 8, 30, 29, 1}},
           {wbmm_spec(kWBMMFwd, DType::kF32, 3, 5, 1), {2, 8, 30, 29, 1}}}) {
    SCOPED_TRACE(spec.to_string());
    const auto all = enumerate(spec, d, &sh);
    const std::set<std::string> listed = [&] {
      std::set<std::string> v;
      for (const auto& t : all) v.insert(t.to_string());
      return v;
    }();
    for (const auto& t : all) ASSERT_TRUE(in_space(spec, t, d, &sh)) << t.to_string();
    std::mt19937 rng(3);
    const TileSpace space = tile_space(spec);
    for (int r = 0; r < 2000; ++r) {
      Tile u;
      for (const auto& a : space.axes) u.set(a.name, a.values[rng() % a.values.size()]);
      ASSERT_EQ(in_space(spec, u, d, &sh), listed.count(u.to_string()) == 1) << u.to_string();
    }
    Tile off = all.front();
    off.set(space.axes.front().name, 3);  // a value no axis of these spaces lists
    EXPECT_FALSE(in_space(spec, off, d, &sh));
    off = all.front();
    off.set("gm", 2);  // an axis outside the space
    EXPECT_EQ(in_space(spec, off, d, &sh), false);
  }
}

// The generated unit: the template, the Cfg the generator derives, and __launch_bounds__ of the tile's
// derived threads (32 x warps per channel x channels per block), not of an absent threads axis.
TEST(WBMMFamily, GeneratedUnitHasTheDerivedLaunchBounds) {
  const OpSpec f = wbmm_spec(kWBMMFwd, DType::kF16, 7, 7, 0, 0, 1, 1, 1);
  const Tile t = Tile::of({{"engine", 1}, {"wm", 2}, {"wn", 1}, {"mt", 2}, {"split", 1}, {"cpb", 4}, {"stages", 2},
                           {"vec", 2}, {"chunk", 8}});
  const auto g = generate(f, t);
  EXPECT_THAT(g.source, AllOf(HasSubstr("#include \"wbmm/fwd.cuh\""), HasSubstr("__launch_bounds__(256)\n"),
                              HasSubstr("using T = lkjit::f16;"), HasSubstr("bias = true, nhwc = true, wgmma = false;"),
                              HasSubstr("wm = 2, wn = 1, mt = 2, dp = 64, nsplit = 1, kchunk = 0, cpb = 4, stages = 2, vec = 2, threads = 256;"),
                              HasSubstr("lkjit::wbmm_fwd<Cfg>(p);")));
  EXPECT_EQ(g.headers->count("wbmm/fwd.cuh"), 1u);
  EXPECT_EQ(g.headers->count("wtconv/fwd_plane.cuh"), 0u);  // the closure holds the family's own templates only
  // The fused wgrad: wn = gm gn / wm.
  const OpSpec w = wbmm_spec(kWBMMWgrad, DType::kBF16, 14, 14);
  const Tile wt = Tile::of({{"engine", 1}, {"wm", 2}, {"split", 2}, {"cpb", 1}, {"stages", 2}, {"vec", 2}, {"chunk", 4},
                            {"wpb", 32}, {"gm", 1}, {"gn", 14}});
  const auto gw = generate(w, wt);
  EXPECT_THAT(gw.source, AllOf(HasSubstr("__launch_bounds__(448)\n"), HasSubstr("gm = 1, gn = 14, wm = 2, wn = 7,")));
  const auto gr = generate(wbmm_spec(kWBMMReduce, DType::kF32, 7, 7), Tile::of({{"threads", 512}}));
  EXPECT_THAT(gr.source, HasSubstr("__launch_bounds__(512)\n"));
}

TEST(WBMMFamily, RejectionsNameTheAxisAndTheLimit) {
  const auto d = DeviceLimits::for_arch(90);
  const OpSpec w = wbmm_spec(kWBMMWgrad, DType::kBF16, 7, 7);
  Tile t = default_tile(w, Shape{2, 8, 56, 56, 1}, d);
  t.set("wm", 4).set("gm", 1).set("gn", 2);
  EXPECT_THAT(*reject_reason(w, t, d, nullptr), HasSubstr("wm=4 does not divide the gm x gn = 1 x 2 warps"));
  // An axis the kernel lacks: the generic refusal names the kernel's axes.
  Tile m = default_tile(w, Shape{2, 8, 56, 56, 1}, d);
  m.set("mt", 2);
  EXPECT_THAT(*reject_reason(w, m, d, nullptr), AllOf(HasSubstr("mt=2: wbmm_wgrad has no such tile axis"), HasSubstr("wpb")));
  // Grid limits with a shape: channel groups on grid.y (NCHW order), chunks on grid.y (NHWC order).
  const OpSpec f = wbmm_spec(kWBMMFwd, DType::kBF16, 1, 1);
  Tile ft = Tile::of({{"engine", 1}, {"wm", 1}, {"wn", 1}, {"mt", 1}, {"split", 1}, {"cpb", 1}, {"stages", 1}, {"vec", 1},
                      {"chunk", 1}});
  const Shape wide{1, 70000, 1, 1, 1};
  EXPECT_THAT(*reject_reason(f, ft, d, &wide), HasSubstr("C=70000 exceeds 65535 channel groups of cpb=1"));
  const OpSpec fn = wbmm_spec(kWBMMFwd, DType::kBF16, 1, 1, 0, 0, 1, 0, 1);
  const Shape big{1, 4, 4096, 4096, 1};  // 16 M windows: 1 M tiles of 16
  EXPECT_THAT(*reject_reason(fn, ft, d, &big), HasSubstr("exceed the 65535 blocks of grid.y (NHWC order)"));
  EXPECT_FALSE(reject_reason(fn, default_tile(fn, big, d), d, &big)) << "the default takes a chunk that fits";
}

// The geometry's values are what WBMMParams needs: windows, the chunk, partial rows and scratch floats.
TEST(WBMMFamily, GeometryValuesForTheLayer) {
  const OpSpec w = wbmm_spec(kWBMMWgrad, DType::kBF16, 7, 7, 0, 0, 1, 1);
  const Tile t = Tile::of({{"engine", 1}, {"wm", 2}, {"split", 2}, {"cpb", 1}, {"stages", 2}, {"vec", 2}, {"chunk", 4},
                           {"wpb", 16}, {"gm", 2}, {"gn", 2}});
  const Shape sh{2, 3, 30, 29, 1};  // 5 x 5 windows an image: 50 windows, 4 tiles of 16, one chunk
  const auto g = launch_geometry(w, t, sh);
  EXPECT_EQ(g.value("nH"), 5);
  EXPECT_EQ(g.value("nW"), 5);
  EXPECT_EQ(g.value("chunk_tiles"), 4);
  EXPECT_EQ(g.value("chunks"), 1);
  EXPECT_EQ(g.value("parts"), 2);
  EXPECT_EQ(g.value("partial_floats"), 2 * 3 * 169);
  EXPECT_EQ(g.value("partial_bias_floats"), 3);
  EXPECT_EQ(g.grid[0] * g.grid[1] * g.grid[2], 1u * 3u * 2u);
  EXPECT_EQ(g.block[0], 128u);
  EXPECT_THAT(spec_error([&] { launch_geometry(wbmm_spec(kWBMMReduce, DType::kF32, 7, 7), Tile::of({{"threads", 256}}), sh)
                                   .value("parts"); }),
              HasSubstr("launch value 'parts' is not derived"));
}

}  // namespace
