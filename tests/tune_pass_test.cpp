// tune_pass on the CPU with a fake PassHarness and fake device calls (runtime/tune_pass.h): a winning tile
// other than the default is checked against the default tiles' output before it is chosen or recorded; one
// that disagrees, or whose check throws, leaves the default in place, is not recorded, and the report says
// why; a check that leaves the device unusable is a DriverError; each entry is checked with the earlier
// entries' accepted tiles in place.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/testing.h"
#include "lkjit/tuning.h"
#include "lkjit/wtconv.h"
#include "lkjit/wtconv_kernels.h"
#include "runtime/tune_pass.h"
#include "tests/fake_pass_device.h"
#include "tests/test_support.h"

namespace lkjit {
inline void PrintTo(const Tile& t, std::ostream* os) { *os << t.to_string(); }
}  // namespace lkjit

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace lkjit;  // NOLINT

using lkjit::test::TempDir;

// An entry's tile as the fake's sets name it: "<entry index>:<tile>".
std::string at(size_t i, const Tile& t) { return std::to_string(i) + ":" + t.to_string(); }

std::string names(const std::vector<Tile>& v) {
  std::string s;
  for (const Tile& t : v) s += (s.empty() ? "" : " ") + t.to_string();
  return s;
}

// A pass whose time is the sum of its non-fixed entries' costs (1 ms a tile, `fast` ones 0.5 ms) and whose
// check disagrees wherever the candidate plan holds a `wrong` tile (or throws, with throw_check).
class FakeHarness : public PassHarness {
 public:
  explicit FakeHarness(std::vector<PlannedKernel> plan) : plan_(std::move(plan)) {
    info_.op = "wtconv";
    info_.text = "fake pass";
    dev_.name = "Fake GPU";
    dev_.arch = 90;
    dev_.limits = DeviceLimits::for_arch(90);
    for (const auto& pk : plan_) tiles_.push_back(pk.tile);
  }

  const PassInfo& info() const override { return info_; }
  const DeviceInfo& device() const override { return dev_; }
  const std::vector<PlannedKernel>& plan() const override { return plan_; }
  void set_tile(const KernelSelector& e, const Tile& t) override { tiles_[index(e.kernel, e.level)] = t; }
  void set_tiles(const std::vector<PlannedKernel>& plan) override {
    for (const auto& pk : plan)
      if (!pk.fixed) tiles_[index(pk.spec.kernel, pk.level)] = pk.tile;
  }
  void prepare() override {}
  std::vector<double> time(int, int reps) override {
    double ms = 0;
    for (size_t i = 0; i < tiles_.size(); ++i)
      if (!plan_[i].fixed) ms += fast.count(at(i, tiles_[i])) ? 0.5 : 1.0;
    return std::vector<double>(size_t(std::max(reps, 1)), ms);
  }
  double traffic_bytes() const override { return 1e6; }
  std::optional<std::string> check_outputs(const std::vector<PlannedKernel>& reference,
                                           const std::vector<PlannedKernel>& candidate) override {
    checks.push_back({tiles_of(reference), tiles_of(candidate)});
    if (throw_check) throw DriverError("lkjit: error: CUDA_ERROR_ILLEGAL_ADDRESS (injected)");
    const auto tiles = tiles_of(candidate);
    for (size_t i = 0; i < tiles.size(); ++i)
      if (wrong.count(at(i, tiles[i]))) return "out: max |err| 3.0e+00 at index 7 (injected)";
    return std::nullopt;
  }

  const std::vector<Tile>& tiles() const { return tiles_; }

  std::set<std::string> fast, wrong;
  bool throw_check = false;
  struct Check {
    std::vector<Tile> reference, candidate;
  };
  std::vector<Check> checks;

 private:
  size_t index(const Kernel& k, int level) const {
    for (size_t i = 0; i < plan_.size(); ++i)
      if (plan_[i].spec.kernel == k && plan_[i].level == level) return i;
    ADD_FAILURE() << "no entry " << to_string(k) << " level " << level;
    return 0;
  }
  static std::vector<Tile> tiles_of(const std::vector<PlannedKernel>& p) {
    std::vector<Tile> v;
    for (const auto& pk : p) v.push_back(pk.tile);
    return v;
  }
  std::vector<PlannedKernel> plan_;
  std::vector<Tile> tiles_;
  PassInfo info_;
  DeviceInfo dev_;
};

using lkjit::test::FakeDevice;

const DeviceLimits kLim = DeviceLimits::for_arch(90);
const WTConvOptions kOpt{8, 5, 3, DType::kF32, true, 1, 0};
const Shape kShape{4, 8, 16, 16, 1};
const Shape kTiledShape{2, 8, 64, 64, 1};

std::vector<PlannedKernel> plane_plan() { return wtconv_plan(kOpt, kShape, kLim, false, WTConvPath::kPlane); }
std::vector<PlannedKernel> tiled_plan() { return wtconv_plan(kOpt, kTiledShape, kLim, false, WTConvPath::kTiled); }

size_t index_of(const std::vector<PlannedKernel>& plan, const Kernel& k, int level = 0) {
  for (size_t i = 0; i < plan.size(); ++i)
    if (plan[i].spec.kernel == k && plan[i].level == level) return i;
  throw std::logic_error("no such entry");
}
const PlannedKernel& entry(const std::vector<PlannedKernel>& plan, const Kernel& k, int level = 0) {
  return plan[index_of(plan, k, level)];
}

// A valid tile of the entry other than its default.
Tile other_tile(const PlannedKernel& pk, size_t nth = 1) {
  const auto c = tune_candidates(pk.spec, pk.shape, kLim);
  EXPECT_GT(c.size(), nth);
  return c.at(std::min(nth, c.size() - 1));
}

TuneOptions options(const TempDir& dir) { return lkjit::test::quick_tune_options(dir.path() + "/tuning.json", 3); }

DeviceClass fake_class() { return DeviceClass{"Fake GPU", 90, kLim.sm_count}; }

// What the database holds for an entry after the run.
TileChoice recorded(const TuneOptions& o, const PlannedKernel& pk) {
  TuneOptions c = o;
  c.mode = TuneMode::kCached;
  return Tuner(c).lookup(pk.spec, pk.shape, fake_class(), kLim);
}

TEST(TunePassCheck, AWinnerThatAgreesIsCheckedOnceThenChosenAndRecorded) {
  const TempDir dir("lkjit-tune-pass");
  FakeHarness h(plane_plan());
  const PlannedKernel& pk = entry(h.plan(), kWTConvFwdPlane);
  const Tile win = other_tile(pk);
  h.fast = {at(1, win)};
  FakeDevice dev;
  const TuneOptions o = options(dir);
  const TuneReport rep = detail::tune_pass(h, {}, o, dev.fns());
  ASSERT_EQ(rep.kernels.size(), 1u);
  const auto& k = rep.kernels[0];
  EXPECT_EQ(k.chosen, win);
  EXPECT_TRUE(k.check_failure.empty()) << k.check_failure;
  EXPECT_EQ(k.rejected, Tile{});
  EXPECT_DOUBLE_EQ(k.best_ms, 0.5);
  ASSERT_EQ(h.checks.size(), 1u) << "one check, of the winner";
  EXPECT_EQ(h.checks[0].reference, (std::vector<Tile>{h.plan()[0].tile, pk.tile})) << "against every default tile";
  EXPECT_EQ(h.checks[0].candidate, (std::vector<Tile>{h.plan()[0].tile, win})) << names(h.checks[0].candidate);
  EXPECT_EQ(rep.plan.back().tile, win);
  EXPECT_EQ(rep.plan.back().tier, LookupTier::kTuned);
  EXPECT_EQ(h.tiles().back(), win) << "the harness is left on the chosen tiles";
  const TileChoice c = recorded(o, pk);
  EXPECT_EQ(c.tier, LookupTier::kExact) << c.detail;
  EXPECT_EQ(c.tile, win);
}

TEST(TunePassCheck, AWinnerThatDisagreesKeepsTheDefaultIsNotRecordedAndTheReportSaysWhy) {
  const TempDir dir("lkjit-tune-pass");
  FakeHarness h(plane_plan());
  const PlannedKernel& pk = entry(h.plan(), kWTConvFwdPlane);
  const Tile win = other_tile(pk);
  h.fast = {at(1, win)};
  h.wrong = {at(1, win)};
  FakeDevice dev;
  const TuneOptions o = options(dir);
  const TuneReport rep = detail::tune_pass(h, {}, o, dev.fns());
  ASSERT_EQ(rep.kernels.size(), 1u);
  const auto& k = rep.kernels[0];
  EXPECT_EQ(k.chosen, pk.tile) << "the default is kept";
  EXPECT_EQ(k.rejected, win);
  EXPECT_THAT(k.check_failure, AllOf(HasSubstr("wtconv_fwd_plane"), HasSubstr(win.to_string()),
                                     HasSubstr("disagrees with the default tiles' output"), HasSubstr(pk.tile.to_string()),
                                     HasSubstr("out: max |err| 3.0e+00 at index 7 (injected)")));
  EXPECT_DOUBLE_EQ(k.best_ms, k.default_ms);
  EXPECT_EQ(h.checks.size(), 1u);
  EXPECT_EQ(rep.plan.back().tile, pk.tile);
  EXPECT_EQ(rep.plan.back().tier, pk.tier) << "not a tuned decision";
  EXPECT_EQ(h.tiles().back(), pk.tile) << "the harness is left on the default";
  // The whole-pass comparison ran the default both times.
  EXPECT_DOUBLE_EQ(rep.tuned_pass.median_ms, rep.default_pass.median_ms);
  EXPECT_EQ(recorded(o, pk).tier, LookupTier::kDefault) << "the rejected winner was recorded";
}

TEST(TunePassCheck, ADefaultThatWinsIsNotChecked) {
  const TempDir dir("lkjit-tune-pass");
  FakeHarness h(plane_plan());
  const PlannedKernel& pk = entry(h.plan(), kWTConvFwdPlane);
  h.wrong = {at(1, pk.tile)};  // a check would fail it
  FakeDevice dev;
  const TuneReport rep = detail::tune_pass(h, {}, options(dir), dev.fns());
  ASSERT_EQ(rep.kernels.size(), 1u);
  EXPECT_EQ(rep.kernels[0].chosen, pk.tile) << "ties go to the default";
  EXPECT_TRUE(rep.kernels[0].check_failure.empty());
  EXPECT_TRUE(h.checks.empty());
  EXPECT_EQ(recorded(options(dir), pk).tier, LookupTier::kExact);
}

TEST(TunePassCheck, ACheckThatThrowsRejectsTheWinnerWhileTheDeviceStaysUsable) {
  const TempDir dir("lkjit-tune-pass");
  FakeHarness h(plane_plan());
  const PlannedKernel& pk = entry(h.plan(), kWTConvFwdPlane);
  const Tile win = other_tile(pk);
  h.fast = {at(1, win)};
  h.throw_check = true;
  FakeDevice dev;
  const TuneReport rep = detail::tune_pass(h, {}, options(dir), dev.fns());
  ASSERT_EQ(rep.kernels.size(), 1u);
  EXPECT_EQ(rep.kernels[0].chosen, pk.tile);
  EXPECT_EQ(rep.kernels[0].rejected, win);
  EXPECT_THAT(rep.kernels[0].check_failure, HasSubstr("the check failed: lkjit: error: CUDA_ERROR_ILLEGAL_ADDRESS (injected)"));
  EXPECT_EQ(dev.syncs, 1) << "the device is checked after a check throws";
  EXPECT_EQ(recorded(options(dir), pk).tier, LookupTier::kDefault);
}

TEST(TunePassCheck, ACheckThatLeavesTheDeviceUnusableIsADriverError) {
  const TempDir dir("lkjit-tune-pass");
  FakeHarness h(plane_plan());
  const Tile win = other_tile(entry(h.plan(), kWTConvFwdPlane));
  h.fast = {at(1, win)};
  h.throw_check = true;
  FakeDevice dev;
  dev.device_lost = true;
  try {
    detail::tune_pass(h, {}, options(dir), dev.fns());
    FAIL() << "no DriverError";
  } catch (const DriverError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("the device is unusable after checking wtconv_fwd_plane " + win.to_string()),
                                HasSubstr("(injected)"), HasSubstr("(sticky)")));
  }
}

// Two entries of a tiled plan: level 1's winner computes something else, the synthesis kernel's agrees. The
// synthesis check runs with level 1 back at its default, and only the synthesis decision is recorded.
TEST(TunePassCheck, EachEntryIsCheckedWithTheEarlierAcceptedTilesInPlace) {
  const TempDir dir("lkjit-tune-pass");
  FakeHarness h(tiled_plan());
  const PlannedKernel& lv1 = entry(h.plan(), kWTConvFwdLevel, 1);
  const PlannedKernel& syn = entry(h.plan(), kWTConvFwdSynth);
  const size_t il = index_of(h.plan(), kWTConvFwdLevel, 1), is = index_of(h.plan(), kWTConvFwdSynth);
  const Tile lwin = other_tile(lv1, 3), swin = other_tile(syn, 5);
  h.fast = {at(il, lwin), at(is, swin)};
  h.wrong = {at(il, lwin)};
  FakeDevice dev;
  const TuneOptions o = options(dir);
  const TuneReport rep = detail::tune_pass(h, {{kWTConvFwdLevel, 1}, {kWTConvFwdSynth, -1}}, o, dev.fns());
  ASSERT_EQ(rep.kernels.size(), 2u);
  EXPECT_EQ(rep.kernels[0].chosen, lv1.tile);
  EXPECT_EQ(rep.kernels[0].rejected, lwin);
  EXPECT_EQ(rep.kernels[1].chosen, swin);
  EXPECT_TRUE(rep.kernels[1].check_failure.empty());
  ASSERT_EQ(h.checks.size(), 2u);
  std::vector<Tile> defaults, first, second;
  for (const auto& pk : h.plan()) defaults.push_back(pk.tile);
  first = second = defaults;
  first[il] = lwin;
  second[is] = swin;
  EXPECT_EQ(h.checks[0].reference, defaults) << names(h.checks[0].reference);
  EXPECT_EQ(h.checks[0].candidate, first) << names(h.checks[0].candidate);
  EXPECT_EQ(h.checks[1].reference, defaults) << names(h.checks[1].reference);
  EXPECT_EQ(h.checks[1].candidate, second) << "level 1 is back at its default: " << names(h.checks[1].candidate);
  EXPECT_EQ(recorded(o, lv1).tier, LookupTier::kDefault);
  EXPECT_EQ(recorded(o, syn).tier, LookupTier::kExact);
  EXPECT_EQ(recorded(o, syn).tile, swin);
}

// ---- the comparison behind WTConvHarness::check_outputs (lkjit::testing::compare_outputs) ----

lkjit::testing::PassOutputs outputs(std::vector<float> out, std::vector<float> grad = {}) {
  lkjit::testing::PassOutputs o;
  o.tensors.push_back({"dX", false, std::move(out)});
  if (!grad.empty()) o.tensors.push_back({"level_w[1]", true, std::move(grad)});
  return o;
}

TEST(CompareOutputs, AgreementWithinTheDtypesTolerance) {
  const auto want = outputs({1.0f, -2.0f, 0.5f}, {1000.0f, -3.0f});
  EXPECT_EQ(lkjit::testing::compare_outputs(want, want, DType::kF32), std::nullopt);
  // One bf16 rounding step (2^-8 relative) on an activation, 1e-3 of the largest gradient on a gradient.
  EXPECT_EQ(lkjit::testing::compare_outputs(want, outputs({1.00390625f, -2.0f, 0.5f}, {1000.0f, -3.5f}), DType::kBF16),
            std::nullopt);
  // In f32 the same differences are far outside.
  EXPECT_THAT(lkjit::testing::compare_outputs(want, outputs({1.00390625f, -2.0f, 0.5f}, {1000.0f, -3.0f}), DType::kF32).value_or(""),
              AllOf(HasSubstr("dX: "), HasSubstr("at index 0")));
  EXPECT_THAT(lkjit::testing::compare_outputs(want, outputs({1.0f, -2.0f, 0.5f}, {1000.0f, -3.5f}), DType::kF32).value_or(""),
              AllOf(HasSubstr("level_w[1]: "), HasSubstr("at index 1")));
}

TEST(CompareOutputs, NaNInEitherRunFails) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const auto good = outputs({1.0f, 2.0f}), bad = outputs({1.0f, nan});
  EXPECT_THAT(lkjit::testing::compare_outputs(good, bad, DType::kBF16).value_or(""), HasSubstr("dX: "));
  EXPECT_THAT(lkjit::testing::compare_outputs(bad, good, DType::kBF16).value_or(""), HasSubstr("dX: "));
  EXPECT_NE(lkjit::testing::compare_outputs(bad, bad, DType::kBF16), std::nullopt) << "NaN never passes, not even against NaN";
  const auto nan_grad = outputs({1.0f}, {nan, 1.0f});
  EXPECT_THAT(lkjit::testing::compare_outputs(nan_grad, nan_grad, DType::kF32).value_or(""), HasSubstr("level_w[1]"));
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_NE(lkjit::testing::compare_outputs(good, outputs({1.0f, inf}), DType::kF16), std::nullopt);
}

TEST(CompareOutputs, GuardDamageAndMismatchedTensorsFail) {
  const auto good = outputs({1.0f, 2.0f});
  auto damaged = good;
  damaged.guard_damage = "dX: 2 guard bytes changed";
  EXPECT_THAT(lkjit::testing::compare_outputs(good, damaged, DType::kF32).value_or(""),
              AllOf(HasSubstr("wrote past its buffers"), HasSubstr("dX: 2 guard bytes changed")));
  EXPECT_THAT(lkjit::testing::compare_outputs(damaged, good, DType::kF32).value_or(""), HasSubstr("the reference run wrote past"));
  EXPECT_THAT(lkjit::testing::compare_outputs(good, outputs({1.0f, 2.0f, 3.0f}), DType::kF32).value_or(""), HasSubstr("3 elements"));
  EXPECT_THAT(lkjit::testing::compare_outputs(good, outputs({1.0f, 2.0f}, {1.0f}), DType::kF32).value_or(""),
              HasSubstr("2 tensors against the reference run's 1"));
}

}  // namespace
