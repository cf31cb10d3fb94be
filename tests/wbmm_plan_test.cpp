// Tests of the WBMM layer without a GPU (runtime/ops/wbmm_plan.cpp, wbmm_layer.cpp, wbmm_tune.cpp): the pure
// planner (kernels, specs, tiles, traffic), option / shape / pointer / stride errors naming the value and the
// range, a layer's calls refused before they touch the device, the tuner's problem for each planned kernel, and
// a tuning-database record of a WBMM kernel found by the lookup tiers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "cache/tuning_db.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/tuning.h"
#include "lkjit/wbmm.h"
#include "lkjit/wbmm_tune.h"
#include "lkjit/wtconv_kernels.h"
#include "runtime/tuner_internal.h"
#include "tests/test_support.h"

namespace {

using namespace lkjit;
using ::testing::AllOf;
using ::testing::HasSubstr;

std::string spec_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const SpecError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("not a SpecError: ") + e.what();
  }
  return "";
}

WBMMOptions opts(int64_t C = 8, int w = 7, DType dt = DType::kBF16) {
  WBMMOptions o;
  o.C = C, o.wh = o.ww = w, o.dtype = dt;
  return o;
}

std::vector<std::string> kernels(const std::vector<PlannedKernel>& p) {
  std::vector<std::string> v;
  for (const auto& pk : p) v.push_back(pk.spec.kernel.name());
  return v;
}

const DeviceLimits kLim = DeviceLimits::for_arch(90);

TEST(WBMMPlan, ForwardAndTheThreeBackwards) {
  const WBMMOptions o = opts();
  const Shape sh{4, 8, 30, 29, 1};
  const auto f = wbmm_plan(o, sh, kLim);
  ASSERT_EQ(kernels(f), (std::vector<std::string>{"wbmm_fwd"}));
  OpSpec fwd = wbmm_spec(kWBMMFwd, DType::kBF16, 7, 7);
  fwd.arch_specific = true;  // 16-bit fwd / dgrad on sm_90: sm_90a (wgmma in the tile space)
  EXPECT_EQ(f[0].spec, fwd);
  EXPECT_EQ(f[0].tile, default_tile(f[0].spec, sh, kLim));
  EXPECT_EQ(f[0].tier, LookupTier::kDefault);
  EXPECT_DOUBLE_EQ(f[0].bytes, 2.0 * sh.numel() * 2);
  // Backward, dX fused into the wgrad (the default); then the split path; then without dX.
  const auto b = wbmm_plan(o, sh, kLim, true);
  ASSERT_EQ(kernels(b), (std::vector<std::string>{"wbmm_wgrad", "wbmm_reduce"}));
  EXPECT_EQ(b[0].spec.get("fuse_dx"), 1);
  EXPECT_EQ(b[1].spec, wbmm_spec(kWBMMReduce, DType::kF32, 7, 7));
  EXPECT_GT(b[0].bytes, 3.0 * sh.numel() * 2);  // activations and the partial rows
  const auto s = wbmm_plan(o, sh, kLim, true, WBMMBackward::kSplit);
  ASSERT_EQ(kernels(s), (std::vector<std::string>{"wbmm_dgrad", "wbmm_wgrad", "wbmm_reduce"}));
  EXPECT_EQ(s[1].spec.get("fuse_dx"), 0);
  const auto n = wbmm_plan(o, sh, kLim, true, WBMMBackward::kFused, false);
  ASSERT_EQ(kernels(n), (std::vector<std::string>{"wbmm_wgrad", "wbmm_reduce"}));
  EXPECT_EQ(n[0].spec.get("fuse_dx"), 0);
}

TEST(WBMMPlan, SpecsFollowTheOptions) {
  WBMMOptions o = opts(16, 14, DType::kF32);
  o.mode = WBMMMode::kDense, o.identity = false, o.bias = true, o.allow_tf32 = true, o.layout = Layout::kNHWC;
  o.wh = 14, o.ww = 5;
  const auto b = wbmm_plan(o, Shape{2, 16, 28, 10, 1}, kLim, true, WBMMBackward::kSplit);
  EXPECT_EQ(b[0].spec, wbmm_spec(kWBMMDgrad, DType::kF32, 14, 5, 1, 1, 0, 0, 1, 0));
  EXPECT_EQ(b[1].spec, wbmm_spec(kWBMMWgrad, DType::kF32, 14, 5, 1, 1, 0, 1, 1, 0));
  EXPECT_EQ(b[2].spec, wbmm_spec(kWBMMReduce, DType::kF32, 14, 5, 1, 0, 0, 1));
  const auto f = wbmm_plan(o, Shape{2, 16, 28, 10, 1}, kLim);
  EXPECT_EQ(f[0].spec, wbmm_spec(kWBMMFwd, DType::kF32, 14, 5, 1, 1, 0, 1, 1));
  // allow_tf32 is an f32 option: 16-bit inputs run the 16-bit MMA whatever it says.
  o.dtype = DType::kBF16;
  EXPECT_EQ(wbmm_plan(o, Shape{2, 16, 28, 10, 1}, kLim)[0].spec.get("tf32"), 0);
  // Every planned tile is a point of its kernel's space, on sm_80 too.
  for (int arch : {80, 90})
    for (bool bwd : {false, true})
      for (const auto& pk : wbmm_plan(opts(64, 7, DType::kF16), Shape{3, 64, 56, 56, 1}, DeviceLimits::for_arch(arch), bwd))
        EXPECT_TRUE(in_space(pk.spec, pk.tile, DeviceLimits::for_arch(arch), &pk.shape)) << pk.spec.to_string();
}

TEST(WBMMPlan, BadOptionsAndShapesNameTheValueAndRange) {
  auto plan = [](WBMMOptions o, Shape sh) { return [=] { wbmm_plan(o, sh, kLim); }; };
  WBMMOptions o = opts();
  EXPECT_EQ(spec_error(plan(o, {1, 8, 7, 7, 1})), "");
  o.C = 0;
  EXPECT_THAT(spec_error([&] { WBMM layer(o); }), HasSubstr("lkjit: error: wbmm: C=0 is out of range; supported: [1, 2^24]"));
  o.C = 8, o.wh = 0, o.ww = 17;
  EXPECT_THAT(spec_error([&] { WBMM layer(o); }),
              AllOf(HasSubstr("wh=0 is out of range; supported: [1, 16]"), HasSubstr("ww=17 is out of range; supported: [1, 16]")));
  o = opts();
  o.mode = static_cast<WBMMMode>(5);
  EXPECT_THAT(spec_error([&] { WBMM layer(o); }), HasSubstr("mode=5 is out of range; supported: table, dense"));
  o = opts();
  o.device = -1;
  EXPECT_THAT(spec_error([&] { WBMM layer(o); }), HasSubstr("device=-1 is out of range; supported: >= 0"));
  o = opts();
  EXPECT_THAT(spec_error(plan(o, {0, 8, 7, 7, 1})), HasSubstr("B=0 is out of range; supported: [1, 2^31-1]"));
  EXPECT_THAT(spec_error(plan(o, {1, 9, 7, 7, 1})), HasSubstr("C=9 does not match the layer's C=8"));
  EXPECT_THAT(spec_error(plan(o, {1, 8, (int64_t(1) << 30) + 1, 7, 1})), HasSubstr("H=1073741825 is out of range; supported: [1, 2^30]"));
  EXPECT_THAT(spec_error(plan(o, {1, 8, 7, 0, 1})), HasSubstr("W=0 is out of range"));
  EXPECT_THAT(spec_error(plan(o, {1, 8, 7, 7, 2})), HasSubstr("stride=2 is out of range; supported: 1"));
  EXPECT_THAT(spec_error(plan(o, {1 << 20, 8, 1 << 14, 1 << 14, 1})), HasSubstr("exceeds the supported 2^40 elements"));
  EXPECT_EQ(wbmm_field_range("wh"), "[1, 16]");
  EXPECT_EQ(wbmm_field_range("k"), "");
  EXPECT_EQ(wbmm_table_size(opts(1, 7)), 169);
  EXPECT_EQ(wbmm_positions(opts(1, 14)), 196);
}

TEST(WBMMPlan, StridesAsWTConvs) {
  const WBMMOptions o = opts(3, 7, DType::kF32);
  const auto d = wbmm_resolve_strides(o, 2, 5, 6, nullptr, true);
  EXPECT_EQ(d.x, (std::array<int64_t, 4>{90, 30, 6, 1}));
  EXPECT_EQ(d.dout, d.x);
  EXPECT_EQ(d.out, d.x);
  WBMMOptions nhwc = o;
  nhwc.layout = Layout::kNHWC;
  EXPECT_EQ(wbmm_resolve_strides(nhwc, 2, 5, 6, nullptr, false).out, (std::array<int64_t, 4>{90, 1, 18, 3}));
  WBMMStrides st;
  st.x = {90, 1, 18, 3};  // a channels_last x; the others default
  const auto r = wbmm_resolve_strides(o, 2, 5, 6, &st, false);
  EXPECT_EQ(r.x, st.x);
  EXPECT_EQ(r.out, (std::array<int64_t, 4>{90, 30, 6, 1}));
  st.out = {90, 30, 5, 1};  // rows overlap: refused for the written tensor
  EXPECT_THAT(spec_error([&] { wbmm_resolve_strides(o, 2, 5, 6, &st, false); }),
              AllOf(HasSubstr("lkjit: error: wbmm: out strides [90, 30, 5, 1] overlap for shape [2, 3, 5, 6]"),
                    HasSubstr("stride[2]=5 (H) is below 6")));
  st.out = {};
  st.x = {90, 30, 0, 1};
  EXPECT_THAT(spec_error([&] { wbmm_resolve_strides(o, 2, 5, 6, &st, false); }),
              HasSubstr("x stride[2]=0 (H of size 5) is out of range; supported: >= 1 for a dim of size > 1"));
  st.x = {};
  st.dout = {-1, 30, 6, 1};
  EXPECT_THAT(spec_error([&] { wbmm_resolve_strides(o, 2, 5, 6, &st, true); }), HasSubstr("dout stride[0]=-1"));
  // A backward without dX does not check dx's strides.
  st.dout = {}, st.out = {1, 1, 1, 1};
  EXPECT_EQ(spec_error([&] { wbmm_resolve_strides(o, 2, 5, 6, &st, true, false); }), "");
  EXPECT_THAT(spec_error([&] { wbmm_resolve_strides(o, 2, 5, 6, &st, true, true); }), HasSubstr("dx strides [1, 1, 1, 1] overlap"));
}

// Every refusal of a layer call comes before it touches the device: these run without a GPU.
TEST(WBMMLayer, CallsAreRefusedBeforeTheDevice) {
  WBMMOptions o = opts(4, 7, DType::kBF16);
  o.bias = true;
  WBMM layer(o);
  int dummy = 0;
  void* p = &dummy;
  EXPECT_THAT(spec_error([&] { layer.forward(p, p, 1, 7, 7); }), HasSubstr("wbmm forward: call set_weights() first"));
  EXPECT_THAT(spec_error([&] { layer.set_weights({}); }), HasSubstr("R (C, K) must be a non-null device pointer in table mode"));
  WBMMWeights w;
  w.R = static_cast<const float*>(p);
  EXPECT_THAT(spec_error([&] { layer.set_weights(w); }), HasSubstr("bias=true but bias is null"));
  w.bias = w.R;
  layer.set_weights(w);
  EXPECT_THAT(spec_error([&] { layer.forward(nullptr, p, 1, 7, 7); }), HasSubstr("x and out must be non-null"));
  EXPECT_THAT(spec_error([&] { layer.forward(p, p, 0, 7, 7); }), HasSubstr("B=0 is out of range"));
  WBMMStrides st;
  st.out = {0, 0, 0, 1};
  st.out[0] = 1;
  EXPECT_THAT(spec_error([&] { layer.forward(p, p, 2, 7, 7, nullptr, &st); }), HasSubstr("out stride[1]=0"));
  WBMMGradients g;
  EXPECT_THAT(spec_error([&] { layer.backward(p, nullptr, p, g, 1, 7, 7); }), HasSubstr("x and dout must be non-null"));
  EXPECT_THAT(spec_error([&] { layer.backward(p, p, p, g, 1, 7, 7); }), HasSubstr("grads.R (C, K) must be a non-null"));
  g.R = static_cast<float*>(p);
  EXPECT_THAT(spec_error([&] { layer.backward(p, p, nullptr, g, 1, 7, 7); }), HasSubstr("bias=true but grads.bias is null"));
  EXPECT_THAT(spec_error([&] { layer.profile(p, p, p, nullptr, 1, 7, 7); }), HasSubstr("backward needs gradient buffers"));
  EXPECT_THAT(spec_error([&] { layer.set_backward_path(static_cast<WBMMBackward>(9)); }), HasSubstr("backward path 9"));
  EXPECT_THAT(spec_error([&] { layer.set_tile_override(Kernel("wtconv_fold"), Tile{}); }), HasSubstr("another family"));
  EXPECT_THAT(spec_error([&] { layer.set_tile_override(Kernel("wbmm_nope"), Tile{}); }), HasSubstr("'wbmm_nope' is unknown"));
  EXPECT_EQ(layer.workspace_bytes(), 0u);
  WBMMOptions dense = o;
  dense.mode = WBMMMode::kDense;
  WBMM dl(dense);
  EXPECT_THAT(spec_error([&] { dl.set_weights(w); }), HasSubstr("M (C, d, d) must be a non-null device pointer in dense mode"));
}

// The tuner times a kernel through the pass whose plan runs it: each planned kernel maps back to a problem
// whose plan has it, on the shape it sees.
TEST(WBMMTune, EveryPlannedKernelHasItsProblem) {
  for (bool bwd : {false, true})
    for (auto path : {WBMMBackward::kFused, WBMMBackward::kSplit})
      for (DType dt : {DType::kF32, DType::kBF16}) {
        WBMMOptions o = opts(6, 7, dt);
        o.layout = path == WBMMBackward::kSplit ? Layout::kNHWC : Layout::kNCHW;
        o.bias = bwd;
        const Shape sh{2, 6, 20, 21, 1};
        for (const auto& pk : wbmm_plan(o, sh, kLim, bwd, path)) {
          const auto [p, sel] = wbmm_problem_for(pk.spec, pk.shape, 0, kLim);
          EXPECT_EQ(sel.kernel, pk.spec.kernel);
          EXPECT_EQ(p.backward, bwd);
          const auto again = wbmm_plan(p.options, p.shape(), kLim, p.backward, p.path, p.need_dx);
          EXPECT_TRUE(std::any_of(again.begin(), again.end(), [&](const PlannedKernel& q) { return q.spec == pk.spec; }))
              << pk.spec.to_string();
          EXPECT_THAT(p.info().text, HasSubstr(bwd ? "bwd" : "fwd"));
        }
      }
  EXPECT_THAT(spec_error([] { wbmm_problem_for(wtconv_spec(kWTConvFold, DType::kF32, 5, 1), Shape{1, 1, 1, 1, 1}, 0, kLim); }), HasSubstr("not a WBMM kernel"));
  EXPECT_THAT(spec_error([] { wbmm_problem_for(wbmm_spec(kWBMMFwd, DType::kF32, 7, 7), Shape{1, 1, 7, 7, 2}, 0, kLim); }),
              HasSubstr("is not a kernel of a WBMM layer pass"));
}

// A tuned WBMM tile in the database is what the layer's cached mode finds (its axes by name).
TEST(WBMMTune, DatabaseRecordIsFoundByTheLookupTiers) {
  test::TempDir tmp{"lkjit-wbmm-db"};
  TuneOptions to;
  to.mode = TuneMode::kCached;
  to.db_path = tmp.path() + "/tuning.json";
  const DeviceClass h200{"NVIDIA H200", 90, 132};
  const OpSpec s = wbmm_spec(kWBMMWgrad, DType::kBF16, 7, 7);
  const Shape sh{64, 256, 56, 56, 1};
  Tile t = default_tile(s, sh, kLim);
  t.set("chunk", t.get("chunk") == 1 ? 2 : 1).set("stages", 1);
  ASSERT_TRUE(in_space(s, t, kLim, &sh));
  KernelTuneResult r;
  r.spec = s, r.shape = sh, r.chosen = t;
  cache::TuningDb::save_merged(to.db_path, {detail::to_record(h200, r)});
  const Tuner tuner(to);
  const auto c = tuner.lookup(s, sh, h200, kLim);
  EXPECT_EQ(c.tier, LookupTier::kExact);
  EXPECT_EQ(c.tile, t);
  EXPECT_EQ(tuner.lookup(wbmm_spec(kWBMMWgrad, DType::kBF16, 7, 7, 1), sh, h200, kLim).tier, LookupTier::kDefault);
}

}  // namespace
