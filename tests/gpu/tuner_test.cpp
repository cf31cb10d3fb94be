// The tuner on the GPU: a greedy tuning run of a real layer picks tiles no slower than the heuristic
// defaults (fresh interleaved medians, with a noise margin) that still compute the right result, and
// rejects none of its winners in the output check; the harness's output check agrees for every valid tile
// of a plane, lane and tiled kernel, forward and backward; the Tuner's tune-on-miss then exact-hit cycle;
// the layer's tune mode; a tuned backward's gradients. Decisions go to a temporary database, never the user's.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "lkjit/wtconv_kernels.h"
#include "lkjit/error.h"
#include "lkjit/numeric.h"
#include "lkjit/testing.h"
#include "lkjit/tuning.h"
#include "lkjit/wtconv_tune.h"
#include "tests/gpu/gpu_fixture.h"
#include "tests/gpu/problems.h"

namespace lkjit::testing {
namespace {

namespace fs = std::filesystem;

class Tuning : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    std::string t = (fs::temp_directory_path() / "lkjit-gpu-tuner-XXXXXX").string();
    ASSERT_NE(::mkdtemp(t.data()), nullptr);
    dir_ = t;
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  TuneOptions options(double budget, bool save) const {
    TuneOptions o;
    o.strategy = TuneStrategy::kGreedy;
    o.budget_s = budget;
    o.save = save;
    o.db_path = dir_ + "/tuning.json";
    return o;
  }
  std::string dir_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// Forward of `layer` on random X, checked on a few planes against the float64 reference.
void expect_forward_correct(WTConv& layer, const WTConvOptions& o, int64_t B, int64_t H, int64_t W) {
  const uint64_t seed = 5;  // parameters; the input seed + 4
  SCOPED_TRACE(seed_note(seed));
  const auto params = random_params(int(o.C), o.k, o.L, o.bias, seed);
  auto dp = upload_params(params);
  layer.set_weights(dp.weights);
  const Shape sh{B, o.C, H, W, o.stride};
  const auto x = random_tensor(size_t(sh.numel()), o.dtype, seed + 4);
  const auto xb = encode(o.dtype, x);
  const size_t nout = size_t(sh.B * sh.C * sh.H_out() * sh.W_out()), eb = dtype_bytes(o.dtype);
  DeviceBuffer dx(xb.size());
  GuardedBuffer dout(nout * eb);
  dx.upload(xb.data(), xb.size());
  dout.poison();
  layer.forward(dx.data(), dout.data(), B, H, W);
  synchronize();
  EXPECT_EQ(dout.guard_bytes_changed(), 0) << "the forward wrote past out";
  std::vector<uint8_t> raw(nout * eb);
  dout.buffer().download(raw.data(), raw.size());
  const int64_t planes = B * o.C, hw = H * W, hwo = sh.H_out() * sh.W_out();
  for (int64_t pl : {int64_t(0), int64_t(1), planes / 3, planes / 2 + 1, planes - 1}) {
    std::vector<double> xp(x.begin() + pl * hw, x.begin() + (pl + 1) * hw);
    const auto want = ref::wtconv_forward(xp, ref::Shape4{1, 1, H, W}, slice_channel(params, pl % o.C), o.stride);
    std::vector<float> got(hwo);
    for (int64_t j = 0; j < hwo; ++j) got[j] = decode_one(o.dtype, raw.data(), size_t(pl * hwo + j));
    const auto cmp = compare(got, want, tolerance(o.dtype));
    EXPECT_TRUE(cmp.ok) << "plane " << pl << ": " << cmp.to_string();
  }
}

TEST_F(Tuning, GreedyIsNoSlowerThanTheDefaultAndCorrect) {
  WTConvTuneProblem p;
  p.options = WTConvOptions{96, 5, 5, DType::kF32, true, 1, 0};
  p.B = 64, p.H = 56, p.W = 56;
  const auto rep = wtconv_tune(p, {}, options(8, false));
  ASSERT_EQ(rep.kernels.size(), 1u) << "the plane path has one tunable kernel";
  const auto& k = rep.kernels[0];
  ASSERT_NE(k.chosen, Tile{}) << "no candidate measured";
  for (const auto& c : k.candidates)
    if (c.status != CandidateStatus::kOk) ADD_FAILURE() << c.tile.to_string() << " " << to_string(c.status) << ": " << c.reason;
  EXPECT_EQ(k.check_failure, "") << "a correct kernel's winner failed the output check";
  EXPECT_GT(k.default_ms, 0);
  EXPECT_LE(k.best_ms, k.default_ms * 1.05) << "chosen " << k.chosen.to_string();
  EXPECT_TRUE(rep.db_path.empty()) << "save=false wrote " << rep.db_path;

  // A fresh, interleaved comparison of the whole pass.
  WTConvHarness h(p);
  const KernelSelector entry{k.spec.kernel, k.level};
  std::vector<double> d, t;
  for (int r = 0; r < 4; ++r) {
    h.set_tile(entry, k.default_tile);
    h.prepare();
    for (double v : h.time(2, 5)) d.push_back(v);
    h.set_tile(entry, k.chosen);
    h.prepare();
    for (double v : h.time(2, 5)) t.push_back(v);
  }
  EXPECT_LE(median(t), median(d) * 1.05) << "chosen " << k.chosen.to_string() << " " << median(t) << " ms vs default "
                                         << k.default_tile.to_string() << " " << median(d) << " ms";

  WTConv layer(p.options);
  layer.set_tune_mode(TuneMode::kOff);
  layer.set_tile_override(k.spec.kernel, k.level, k.chosen);
  const auto plan = layer.plan(p.B, p.H, p.W);
  EXPECT_EQ(plan.back().tile, k.chosen);
  EXPECT_EQ(plan.back().tier, LookupTier::kOverride);
  expect_forward_correct(layer, p.options, p.B, p.H, p.W);
}

// WTConvHarness::check_outputs on every valid tile of the tuned entry of `p` against its default: a correct
// kernel's tiles all agree (the tuner never rejects a good winner), and the check passes through NaN-poisoned,
// guarded outputs, so each candidate's run wrote every element and nothing past them.
void expect_every_tile_agrees(const WTConvTuneProblem& p, const Kernel& kernel, int level, int min_tiles) {
  SCOPED_TRACE(p.to_string());
  WTConvHarness h(p);
  const auto defaults = h.plan();
  size_t at = defaults.size();
  for (size_t i = 0; i < defaults.size(); ++i)
    if (defaults[i].spec.kernel == kernel && defaults[i].level == level) at = i;
  ASSERT_LT(at, defaults.size()) << "the plan does not run " << to_string(kernel);
  const auto tiles = tune_candidates(defaults[at].spec, defaults[at].shape, h.device().limits);
  EXPECT_GE(int(tiles.size()), min_tiles);
  precompile_candidates(defaults[at].spec, defaults[at].shape, h.device().limits, tiles, 0);
  for (const Tile& t : tiles) {
    auto cand = defaults;
    cand[at].tile = t;
    const auto why = h.check_outputs(defaults, cand);
    EXPECT_FALSE(why.has_value()) << t.to_string() << ": " << why.value_or("");
  }
}

TEST_F(Tuning, HarnessCheckAgreesForEveryPlaneTileForwardAndBackward) {
  WTConvTuneProblem p;
  p.options = WTConvOptions{8, 5, 3, DType::kBF16, true, 1, 0};
  p.B = 3, p.H = 29, p.W = 31;
  p.path = WTConvPath::kPlane;
  expect_every_tile_agrees(p, kWTConvFwdPlane, 0, 10);
  p.backward = true;
  expect_every_tile_agrees(p, kWTConvBwdPlane, 0, 10);
  expect_every_tile_agrees(p, kWTConvReduce, 0, 4);
}

TEST_F(Tuning, HarnessCheckAgreesForEveryLaneTileForwardAndBackward) {
  WTConvTuneProblem p;
  p.options = WTConvOptions{9, 5, 3, DType::kF16, true, 1, 0};
  p.options.layout = Layout::kNHWC;
  p.B = 2, p.H = 11, p.W = 9;
  p.path = WTConvPath::kLane;
  expect_every_tile_agrees(p, kWTConvFwdLane, 0, 20);
  p.backward = true;
  expect_every_tile_agrees(p, kWTConvBwdLane, 0, 20);
}

TEST_F(Tuning, HarnessCheckAgreesForEveryTiledSynthesisTile) {
  WTConvTuneProblem p;
  p.options = WTConvOptions{4, 5, 2, DType::kF32, true, 1, 0};
  p.B = 2, p.H = 37, p.W = 41;
  p.path = WTConvPath::kTiled;
  expect_every_tile_agrees(p, kWTConvFwdSynth, 0, 100);
  p.backward = true;
  expect_every_tile_agrees(p, kWTConvBwdLevel, 1, 100);
}

TEST_F(Tuning, TunerTunesOnAMissThenHitsExactly) {
  const DeviceInfo dev = device_info(0);
  const OpSpec spec = wtconv_spec(kWTConvFwdPlane, DType::kF32, 5, 2, true, dev.arch);
  const Shape sh{4, 8, 16, 16, 1};
  TuneOptions o = options(3, true);
  o.mode = TuneMode::kTune;
  const TunedKernel a = Tuner(o).get(spec, sh);
  EXPECT_EQ(a.tier, LookupTier::kTuned) << a.detail;
  ASSERT_TRUE(a.tuning.has_value());
  EXPECT_EQ(a.tuning->chosen, a.tile);
  ASSERT_NE(a.loaded, nullptr);
  EXPECT_EQ(a.loaded->kernel_name, kernel_name(spec, a.tile));
  EXPECT_EQ(a.geometry.grid[0], launch_geometry(spec, a.tile, sh).grid[0]);
  EXPECT_TRUE(fs::exists(o.db_path));

  const TunedKernel b = Tuner(o).get(spec, sh);
  EXPECT_EQ(b.tier, LookupTier::kExact) << b.detail;
  EXPECT_EQ(b.tile, a.tile);
  EXPECT_FALSE(b.tuning.has_value());

  o.mode = TuneMode::kOff;
  const TunedKernel c = Tuner(o).get(spec, sh);
  EXPECT_EQ(c.tier, LookupTier::kDefault);
  EXPECT_EQ(c.tile, default_tile(spec, sh, dev.limits));

  // A spec for another arch is refused with both named.
  OpSpec other = spec;
  other.arch = dev.arch == 80 ? 90 : 80;
  EXPECT_THROW(Tuner(o).get(other, sh), SpecError);
}

TEST_F(Tuning, LayerTuneModeRecordsAndCachedModeReuses) {
  const WTConvOptions opt{8, 5, 2, DType::kF32, true, 1, 0};
  TuneOptions o = options(3, true);
  {
    WTConv cached(opt);
    TuneOptions c = o;
    c.mode = TuneMode::kCached;
    cached.set_tune_options(c);
    for (const auto& pk : cached.plan(2, 16, 16))
      if (pk.spec.kernel != kWTConvFold) {
        EXPECT_EQ(pk.tier, LookupTier::kDefault) << "empty database";
      }
  }
  WTConv tuned(opt);
  o.mode = TuneMode::kTune;
  tuned.set_tune_options(o);
  tuned.prepare(2, 16, 16);
  EXPECT_TRUE(fs::exists(o.db_path));
  WTConv reuse(opt);
  o.mode = TuneMode::kCached;
  reuse.set_tune_options(o);
  int exact = 0;
  for (const auto& pk : reuse.plan(2, 16, 16))
    if (pk.spec.kernel != kWTConvFold) exact += pk.tier == LookupTier::kExact;
  EXPECT_EQ(exact, 1);
  expect_forward_correct(reuse, opt, 2, 16, 16);
}

// Tuned tiles of the tiled backward change the partial-gradient layout; the gradients must not care.
TEST_F(Tuning, TunedTiledBackwardMatchesTheReference) {
  WTConvTuneProblem p;
  p.options = WTConvOptions{4, 5, 2, DType::kF32, true, 1, 0};
  p.B = 2, p.H = 40, p.W = 40;
  p.backward = true;
  p.path = WTConvPath::kTiled;
  TuneOptions o = options(2, false);
  o.final_reps = 3;
  const auto rep = wtconv_tune(p, {}, o);
  ASSERT_FALSE(rep.kernels.empty());

  WTConv layer(p.options);
  layer.set_path(WTConvPath::kTiled);
  layer.set_tune_mode(TuneMode::kOff);
  for (const auto& k : rep.kernels)
    if (k.chosen != Tile{}) layer.set_tile_override(k.spec.kernel, k.level, k.chosen);
  SCOPED_TRACE(seed_note(17));
  const auto params = random_params(4, 5, 2, true, 17);
  auto dp = upload_params(params, true);
  layer.set_weights(dp.weights);
  const ref::Shape4 s4{2, 4, 40, 40};
  const auto x = random_tensor(size_t(s4.numel()), DType::kF32, 19), g = random_tensor(size_t(s4.numel()), DType::kF32, 23);
  const auto xb = encode(DType::kF32, x), gb = encode(DType::kF32, g);
  DeviceBuffer dxin(xb.size()), dg(gb.size());
  GuardedBuffer dx(xb.size());
  dxin.upload(xb.data(), xb.size());
  dg.upload(gb.data(), gb.size());
  dx.poison();
  dp.poison_grads();
  layer.backward(dxin.data(), dg.data(), dx.data(), dp.grads, 2, 40, 40);
  synchronize();
  EXPECT_EQ(dx.guard_bytes_changed(), 0) << "the backward wrote past dX";
  EXPECT_EQ(dp.grad_guards_changed(), "") << "the backward wrote past a gradient";
  std::vector<float> got(x.size());
  dx.buffer().download(got.data(), got.size() * 4);
  const auto want = ref::wtconv_backward(std::vector<double>(x.begin(), x.end()), s4, params,
                                         std::vector<double>(g.begin(), g.end()));
  const auto cmp = compare(got, want.dx, tolerance(DType::kF32));
  EXPECT_TRUE(cmp.ok) << "dx: " << cmp.to_string();
  const auto grads = download_grads(dp, params);
  double scale = 0;
  for (double v : want.base_w) scale = std::max(scale, std::fabs(v));
  const auto gw = compare(std::vector<float>(grads.base_w.begin(), grads.base_w.end()), want.base_w,
                          {2e-4 * (scale + 1e-3), 2e-4});
  EXPECT_TRUE(gw.ok) << "base_w: " << gw.to_string();
}

}  // namespace
}  // namespace lkjit::testing
