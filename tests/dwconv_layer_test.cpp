// The depthwise layer's pure parts on the CPU (runtime/ops/dwconv_plan.cpp): option and shape errors naming the
// value and the range, output extents against a brute-force count of the valid windows, the planner's kernels,
// shapes and path choice, stride resolution and its errors, the layer's refusals before any GPU call, and the
// family's runtime registry line.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "lkjit/dwconv.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "cache/tuning_db.h"
#include "lkjit/tuning.h"
#include "runtime/op_registry.h"
#include "tests/test_support.h"

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace lkjit;  // NOLINT

std::string spec_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return e.what();
  }
  return "(no error)";
}

DWConvOptions opts(int64_t C, int kh, int kw, int s = 1, int d = 1, int ph = 0, int pw = 0) {
  DWConvOptions o;
  o.C = C, o.kh = kh, o.kw = kw, o.stride = s, o.dil = d, o.pad_h = ph, o.pad_w = pw;
  return o;
}

TEST(DWConvLayer, OptionErrorsNameTheValueAndRange) {
  const std::pair<DWConvOptions, std::vector<std::string>> bad[] = {
      {opts(0, 3, 3), {"C=0", "[1, 2^24]"}},
      {opts(8, 0, 3), {"kh=0", "[1, 63]"}},
      {opts(8, 3, 64), {"kw=64", "[1, 63]"}},
      {opts(8, 3, 3, 3), {"stride=3", "[1, 2]"}},
      {opts(8, 3, 3, 1, 5), {"dilation=5", "[1, 4]"}},
      {opts(8, 3, 3, 1, 1, -1), {"pad_h=-1", "[0, 1000]"}},
      {opts(8, 3, 3, 1, 1, 0, 1001), {"pad_w=1001", "[0, 1000]"}},
  };
  for (const auto& entry : bad) {
    const DWConvOptions& o = entry.first;  // named: a lambda may not capture a structured binding in C++17
    const auto& words = entry.second;
    const std::string e = spec_error([&] { DepthwiseConv layer(o); });
    EXPECT_THAT(e, HasSubstr("lkjit: error: dwconv: "));
    for (const auto& w : words) EXPECT_THAT(e, HasSubstr(w));
  }
  DWConvOptions same = opts(8, 7, 7, 2);
  same.same = true;
  EXPECT_THAT(spec_error([&] { DepthwiseConv layer(same); }), AllOf(HasSubstr("'same'"), HasSubstr("stride=2")));
  same = opts(8, 7, 7, 1, 1, 3);
  same.same = true;
  EXPECT_THAT(spec_error([&] { DepthwiseConv layer(same); }), HasSubstr("pad_h=3"));
  EXPECT_NO_THROW(DepthwiseConv(opts(8, 63, 1, 2, 4, 1000, 0)));
}

// Ho = the number of i >= 0 whose window i*s + u*d - p, u < k, starts inside the padded map and ends inside it.
TEST(DWConvLayer, OutputExtentsMatchBruteForce) {
  for (int k : {1, 2, 3, 7, 8, 31})
    for (int s : {1, 2})
      for (int d : {1, 3})
        for (int p : {0, 1, 5})
          for (int64_t H : {1, 2, 9, 40}) {
            const int64_t span = int64_t(d) * (k - 1) + 1;
            int64_t want = 0;
            for (int64_t i = 0; i * s + span <= H + 2 * p; ++i) ++want;
            const DWConvOptions o = opts(3, k, 1, s, d, p, 0);
            if (want == 0) {
              EXPECT_THAT(spec_error([&] { dwconv_geometry(o, 1, H, 5); }),
                          AllOf(HasSubstr("H=" + std::to_string(H)), HasSubstr("no output")));
              continue;
            }
            const auto g = dwconv_geometry(o, 1, H, 5);
            EXPECT_EQ(g.Ho, want) << "k=" << k << " s=" << s << " d=" << d << " p=" << p << " H=" << H;
            EXPECT_EQ(g.Wo, (5 - 1) / s + 1);  // kw = 1, no padding
          }
  DWConvOptions same = opts(3, 8, 5, 1, 3);
  same.same = true;
  const auto g = dwconv_geometry(same, 2, 17, 4);  // 'same': Ho = H, Wo = W, the smaller half before
  EXPECT_EQ(g.Ho, 17);
  EXPECT_EQ(g.Wo, 4);
  EXPECT_EQ(g.pad_top, 10);
  EXPECT_EQ(g.pad_bottom, 11);
  EXPECT_EQ(g.pad_left, 6);
  EXPECT_EQ(g.pad_right, 6);
  EXPECT_THAT(spec_error([&] { dwconv_geometry(opts(3, 3, 3), 0, 8, 8); }), AllOf(HasSubstr("B=0"), HasSubstr("[1, 2^24]")));
  EXPECT_THAT(spec_error([&] { dwconv_geometry(opts(3, 3, 3), 1, int64_t(1) << 25, 8); }), HasSubstr("H=33554432"));
  EXPECT_THAT(spec_error([&] { dwconv_geometry(opts(1 << 20, 3, 3), 1 << 10, 1 << 10, 1 << 10); }), HasSubstr("2^40"));
}

TEST(DWConvLayer, PlanRunsThePassesKernelsOnTheirShapes) {
  const auto lim = DeviceLimits::for_arch(90);
  DWConvOptions o = opts(96, 7, 7, 1, 1, 3, 3);
  o.dtype = DType::kBF16;
  auto f = dwconv_plan(o, 64, 56, 56, lim);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].spec.kernel, kDWConvFwdDirect);
  EXPECT_EQ(f[0].spec.get("kh"), 7);
  EXPECT_EQ(f[0].spec.dtype, DType::kBF16);
  EXPECT_EQ(f[0].shape.to_string(), "64x96x56x56");
  EXPECT_DOUBLE_EQ(f[0].bytes, 2.0 * 64 * 96 * 56 * 56 * 2 + 96 * 50 * 4);
  f = dwconv_plan(o, 64, 56, 56, lim, false, Layout::kNHWC);
  EXPECT_EQ(f[0].spec.kernel, kDWConvFwdNhwc);
  // Stride 2: the forward and wgrad see the output, dgrad the input.
  o.stride = 2;
  const auto b = dwconv_plan(o, 8, 57, 41, lim, true, Layout::kNHWC);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0].spec.kernel, kDWConvDgradNhwc);
  EXPECT_EQ(b[0].shape.to_string(), "8x96x57x41");
  EXPECT_EQ(b[1].spec.kernel, kDWConvWgradNhwc);
  EXPECT_EQ(b[1].shape.to_string(), "8x96x29x21");
  EXPECT_EQ(b[2].spec.kernel, kDWConvWgradReduce);
  EXPECT_EQ(b[2].spec.dtype, DType::kF32);  // one binary for every dtype
  EXPECT_EQ(b[2].shape.to_string(), "1x96x50x1");
  for (const auto& pk : b) EXPECT_FALSE(reject_reason(pk.spec, pk.tile, lim, &pk.shape)) << pk.spec.to_string();
  EXPECT_EQ(dwconv_plan(o, 8, 57, 41, lim, true, Layout::kNHWC, DWConvPath::kDirect)[1].spec.kernel, kDWConvWgradDirect);
  EXPECT_EQ(dwconv_plan(o, 8, 57, 41, lim, true, Layout::kNCHW, DWConvPath::kNhwc)[0].spec.kernel, kDWConvDgradNhwc);
  // One channel: the direct kernels whatever the layout.
  EXPECT_EQ(dwconv_plan(opts(1, 3, 3), 2, 8, 8, lim, false, Layout::kNHWC)[0].spec.kernel, kDWConvFwdDirect);
}

// kMma: the tensor-core forward, dgrad and wgrad (then the reduction); outside 16-bit, stride 1, dilation 1, sm_80+ an
// error naming the value.
TEST(DWConvLayer, PlanOfTheTensorCorePath) {
  const auto lim = DeviceLimits::for_arch(90);
  DWConvOptions o = opts(128, 31, 31);
  o.dtype = DType::kBF16, o.same = true;
  const auto f = dwconv_plan(o, 64, 56, 56, lim, false, Layout::kNCHW, DWConvPath::kMma);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].spec.kernel, kDWConvFwdMma);
  EXPECT_EQ(dwconv_plan_path(f), DWConvPath::kMma);
  for (Layout act : {Layout::kNCHW, Layout::kNHWC}) {
    const auto b = dwconv_plan(o, 64, 56, 56, lim, true, act, DWConvPath::kMma);
    ASSERT_EQ(b.size(), 3u);
    EXPECT_EQ(b[0].spec.kernel, kDWConvDgradMma);
    EXPECT_EQ(b[1].spec.kernel, kDWConvWgradMma);
    EXPECT_EQ(b[2].spec.kernel, kDWConvWgradReduce);
    for (const auto& pk : b) EXPECT_FALSE(reject_reason(pk.spec, pk.tile, lim, &pk.shape)) << pk.spec.to_string();
  }
  // kAuto takes it for large filters on maps of 14 and more, in either layout; not in fp32, at k = 7 or on 7x7.
  EXPECT_EQ(dwconv_plan_path(dwconv_plan(o, 64, 56, 56, lim)), DWConvPath::kMma);
  EXPECT_EQ(dwconv_plan_path(dwconv_plan(o, 64, 56, 56, lim, true, Layout::kNHWC)), DWConvPath::kMma);
  EXPECT_EQ(dwconv_plan_path(dwconv_plan(o, 64, 14, 14, lim)), DWConvPath::kMma);
  EXPECT_EQ(dwconv_plan_path(dwconv_plan(o, 64, 13, 13, lim)), DWConvPath::kDirect);
  DWConvOptions small = opts(96, 7, 7), k13 = opts(1024, 13, 13), wide = opts(96, 5, 51), fp32 = o;
  small.dtype = k13.dtype = wide.dtype = DType::kBF16, small.same = k13.same = wide.same = true;
  fp32.dtype = DType::kF32;
  EXPECT_EQ(dwconv_plan_path(dwconv_plan(small, 64, 56, 56, lim)), DWConvPath::kDirect);
  EXPECT_EQ(dwconv_plan_path(dwconv_plan(k13, 64, 7, 7, lim, false, Layout::kNHWC)), DWConvPath::kNhwc);
  EXPECT_EQ(dwconv_plan_path(dwconv_plan(wide, 64, 56, 56, lim)), DWConvPath::kDirect);
  EXPECT_EQ(dwconv_plan_path(dwconv_plan(fp32, 64, 56, 56, lim, false, Layout::kNHWC)), DWConvPath::kNhwc);
  EXPECT_EQ(dwconv_plan_path(dwconv_plan(o, 64, 56, 56, DeviceLimits::for_arch(90), false, Layout::kNCHW,
                                         DWConvPath::kDirect)), DWConvPath::kDirect);
  EXPECT_STREQ(to_string(DWConvPath::kMma), "mma");
  auto refused = [&](DWConvOptions x, const DeviceLimits& l) {
    try {
      dwconv_plan(x, 2, 40, 40, l, false, Layout::kNCHW, DWConvPath::kMma);
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  DWConvOptions f32 = o, s2 = o, d2 = o;
  f32.dtype = DType::kF32;
  s2.stride = 2, s2.same = false, s2.pad_h = s2.pad_w = 15;
  d2.dil = 2;
  EXPECT_THAT(refused(f32, lim), AllOf(HasSubstr("path=mma"), HasSubstr("dtype=f32"), HasSubstr("f16 and bf16")));
  EXPECT_THAT(refused(s2, lim), AllOf(HasSubstr("stride=2"), HasSubstr("supported: 1")));
  EXPECT_THAT(refused(d2, lim), AllOf(HasSubstr("dilation=2"), HasSubstr("supported: 1")));
}

std::vector<std::string> path_names(const PassPaths& p) {
  std::vector<std::string> v;
  for (const auto& o : p.options) {
    EXPECT_STREQ(to_string(DWConvPath(o.id)), o.name.c_str()) << "ids are DWConvPath values";
    v.push_back(o.name);
  }
  return v;
}

// The path decision a kAuto layer looks up (and measures in tune mode): kAuto's rule first, then every other path
// that can run the call; the key tells apart everything but the shape, which the record's bucket holds.
TEST(DWConvLayer, PathDecisionsOfACall) {
  using ::testing::ElementsAre;
  const auto lim = DeviceLimits::for_arch(90);
  DWConvOptions big = opts(128, 31, 31), f32 = opts(96, 7, 7);
  big.dtype = DType::kBF16, big.same = f32.same = true;
  EXPECT_THAT(path_names(dwconv_pass_paths(big, 64, 56, 56, lim, true, Layout::kNCHW)), ElementsAre("mma", "direct"));
  EXPECT_THAT(path_names(dwconv_pass_paths(big, 64, 56, 56, lim, true, Layout::kNHWC)),
              ElementsAre("mma", "direct", "nhwc"));
  EXPECT_THAT(path_names(dwconv_pass_paths(big, 64, 13, 13, lim, false, Layout::kNCHW)), ElementsAre("direct", "mma"));
  // fp32 never runs on tensor cores; NHWC kernels only for channels_last activations.
  EXPECT_THAT(path_names(dwconv_pass_paths(f32, 64, 56, 56, lim, false, Layout::kNCHW)), ElementsAre("direct"));
  EXPECT_THAT(path_names(dwconv_pass_paths(f32, 64, 56, 56, lim, false, Layout::kNHWC)), ElementsAre("nhwc", "direct"));
  // On sm_80 the NHWC filters of 63x63 at dilation 4 may not fit: then the path is not offered.
  DWConvOptions huge = opts(1024, 63, 63, 1, 4);
  huge.same = true;
  const auto h = path_names(dwconv_pass_paths(huge, 2, 64, 64, DeviceLimits::for_arch(80), false, Layout::kNHWC));
  EXPECT_EQ(h.front(), to_string(dwconv_plan_path(dwconv_plan(huge, 2, 64, 64, DeviceLimits::for_arch(80), false,
                                                              Layout::kNHWC))));

  const PassPaths p = dwconv_pass_paths(big, 64, 56, 56, lim, true, Layout::kNHWC);
  EXPECT_EQ(p.key, "lkjit_pass_dwconv_bwd_bf16_nhwc_k31x31_s1_d1_p15x15_bias_sm90");
  EXPECT_EQ(bucket_key(p.shape), bucket_key(Shape{64, 128, 56, 56, 1}));
  EXPECT_EQ(p.shape.B * p.shape.C * p.shape.H * p.shape.W, int64_t(64) * 128 * 56 * 56);
  EXPECT_FALSE(p.harness) << "pure: the layer sets the harness";
  std::set<std::string> keys{p.key};
  auto key = [&](DWConvOptions o, bool bwd, Layout act, int arch) {
    return dwconv_pass_paths(o, 64, 56, 56, DeviceLimits::for_arch(arch), bwd, act).key;
  };
  DWConvOptions even = big;
  even.kh = even.kw = 4;  // 'same' pads 1 before and 2 after: not explicit padding 1
  EXPECT_THAT(dwconv_pass_paths(even, 64, 56, 56, lim, false, Layout::kNCHW).key, HasSubstr("_k4x4_s1_d1_p1-2x1-2_bias_"));
  DWConvOptions f16 = big, nobias = big, rect = big, s2 = big, d2 = big, pad = big;
  f16.dtype = DType::kF16, nobias.bias = false, rect.kw = 29;
  s2.same = false, s2.stride = 2, s2.pad_h = s2.pad_w = 15;
  d2.dil = 2;
  pad.same = false, pad.pad_h = 3, pad.pad_w = 15;
  for (const std::string& k : {key(big, false, Layout::kNHWC, 90), key(big, true, Layout::kNCHW, 90), key(f16, true, Layout::kNHWC, 90),
                               key(nobias, true, Layout::kNHWC, 90), key(rect, true, Layout::kNHWC, 90),
                               key(s2, true, Layout::kNHWC, 90), key(d2, true, Layout::kNHWC, 90),
                               key(pad, true, Layout::kNHWC, 90), key(big, true, Layout::kNHWC, 80)})
    EXPECT_TRUE(keys.insert(k).second) << k << " is another problem's key";
  // Bad input is the planner's error.
  EXPECT_THAT(spec_error([&] { dwconv_pass_paths(opts(128, 31, 31), 64, 5, 56, lim, false, Layout::kNCHW); }),
              AllOf(HasSubstr("H=5"), HasSubstr("no output")));
}

// Some depthwise defaults fit the map and are no point of the tile space (a wgrad tile of 56 rows on a 56x56 map):
// the tuner still measures the default first, and a recorded default is an exact hit, not a miss to retune.
TEST(DWConvLayer, TheTunerMeasuresAndKeepsADefaultFittedToTheMap) {
  const auto lim = DeviceLimits::for_arch(90);
  DWConvOptions o = opts(128, 31, 31);
  o.dtype = DType::kBF16, o.same = true;
  const PlannedKernel wg = dwconv_plan(o, 64, 56, 56, lim, true, Layout::kNHWC, DWConvPath::kMma).at(1);
  ASSERT_EQ(wg.spec.kernel, kDWConvWgradMma);
  const Tile def = default_tile(wg.spec, wg.shape, lim);
  ASSERT_FALSE(in_space(wg.spec, def, lim, &wg.shape)) << def.to_string() << " became a point of the space: pick another case";
  const auto c = tune_candidates(wg.spec, wg.shape, lim);
  ASSERT_FALSE(c.empty());
  EXPECT_EQ(c[0], def);
  EXPECT_EQ(c.size(), enumerate(wg.spec, lim, &wg.shape).size() + 1);

  const lkjit::test::TempDir dir("lkjit-dwconv-default");
  const DeviceClass cls{"Fake GPU", 90, lim.sm_count};
  cache::TuningRecord r;
  r.device = cls.name, r.arch = 90, r.sm_count = cls.sm_count;
  r.spec = spec_key(wg.spec), r.bucket = bucket_key(wg.shape);
  r.B = wg.shape.B, r.C = wg.shape.C, r.H = wg.shape.H, r.W = wg.shape.W;
  for (const auto& [axis, v] : def.axes.entries()) r.tile[axis] = v;
  cache::TuningDb::save_merged(dir.path() + "/tuning.json", {r});
  TuneOptions to;
  to.mode = TuneMode::kCached;
  to.db_path = dir.path() + "/tuning.json";
  const TileChoice got = Tuner(to).lookup(wg.spec, wg.shape, cls, lim);
  EXPECT_EQ(got.tile, def);
  EXPECT_EQ(got.tier, LookupTier::kExact) << got.detail;
}

// 63x63 filters of a channel group do not fit an SM twice: kAuto falls back to the direct kernels, a forced
// kNhwc says why.
TEST(DWConvLayer, PlanFallsBackWhenNhwcCannotRun) {
  const auto lim = DeviceLimits::for_arch(80);
  DWConvOptions o = opts(1024, 63, 63, 1, 4);
  o.same = true;
  bool nhwc_fits = true;
  try {
    dwconv_plan(o, 2, 64, 64, lim, false, Layout::kNHWC, DWConvPath::kNhwc);
  } catch (const SpecError& e) {
    nhwc_fits = false;
    EXPECT_THAT(e.what(), AllOf(HasSubstr("dwconv_fwd_nhwc"), HasSubstr("sm_80")));
  }
  const auto p = dwconv_plan(o, 2, 64, 64, lim, false, Layout::kNHWC);
  EXPECT_EQ(p[0].spec.kernel, nhwc_fits ? kDWConvFwdNhwc : kDWConvFwdDirect);
}

TEST(DWConvLayer, StridesResolveAndRefuseNamingTheTensor) {
  DWConvOptions o = opts(4, 3, 3, 2, 1, 1, 1);
  const auto d = dwconv_resolve_strides(o, 2, 9, 7, nullptr, false);
  EXPECT_EQ(d.x, (std::array<int64_t, 4>{4 * 9 * 7, 9 * 7, 7, 1}));
  EXPECT_EQ(d.out, (std::array<int64_t, 4>{4 * 5 * 4, 5 * 4, 4, 1}));  // y: (5, 4)
  o.layout = Layout::kNHWC;
  const auto n = dwconv_resolve_strides(o, 2, 9, 7, nullptr, true);
  EXPECT_EQ(n.x, (std::array<int64_t, 4>{9 * 7 * 4, 1, 7 * 4, 4}));
  EXPECT_EQ(n.dout, (std::array<int64_t, 4>{5 * 4 * 4, 1, 4 * 4, 4}));
  EXPECT_EQ(n.out, n.x);  // dx has x's extents
  DWConvStrides s;
  s.out = {1, 1, 1, 1};  // y overlapping itself
  EXPECT_THAT(spec_error([&] { dwconv_resolve_strides(o, 2, 9, 7, &s, false); }),
              AllOf(HasSubstr("dwconv"), HasSubstr("y")));
  s = {};
  s.x = {0, 1, 1, 1};
  EXPECT_THAT(spec_error([&] { dwconv_resolve_strides(o, 2, 9, 7, &s, false); }), AllOf(HasSubstr("x"), HasSubstr("0")));
}

TEST(DWConvLayer, RefusesBadCallsBeforeTheDevice) {
  DepthwiseConv layer(opts(4, 3, 3));
  int dummy = 0;
  EXPECT_THAT(spec_error([&] { layer.set_weights(nullptr, nullptr); }), HasSubstr("w is null"));
  const float* w = reinterpret_cast<const float*>(&dummy);
  EXPECT_THAT(spec_error([&] { layer.set_weights(w, nullptr); }), HasSubstr("bias is null"));
  EXPECT_THAT(spec_error([&] { layer.forward(&dummy, &dummy, 1, 8, 8); }), HasSubstr("before set_weights"));
  EXPECT_THAT(spec_error([&] { layer.forward(nullptr, &dummy, 1, 8, 8); }), HasSubstr("x is null"));
  EXPECT_THAT(spec_error([&] { layer.backward(&dummy, nullptr, &dummy, {}, 1, 8, 8); }), HasSubstr("dout is null"));
  EXPECT_THAT(spec_error([&] { layer.backward(&dummy, &dummy, nullptr, {}, 1, 8, 8); }), HasSubstr("neither dx nor dw"));
  DWConvGradients g;
  g.dw = reinterpret_cast<float*>(&dummy);
  EXPECT_THAT(spec_error([&] { layer.backward(&dummy, &dummy, nullptr, g, 1, 8, 8); }), HasSubstr("dbias is null"));
  layer.set_weights(w, w);
  EXPECT_THAT(spec_error([&] { layer.forward(&dummy, &dummy, 1, 1, 8); }), AllOf(HasSubstr("H=1"), HasSubstr("no output")));
  EXPECT_THAT(spec_error([&] { layer.set_tile_override(Kernel("scale_copy"), Tile::of({{"threads", 64}})); }),
              HasSubstr("not a kernel of the dwconv family"));
  EXPECT_EQ(layer.workspace_bytes(), 0u);
  EXPECT_EQ(rt::op_runtime("dwconv").family, "dwconv");
}

}  // namespace
