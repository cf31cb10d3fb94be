// Path decisions on the CPU (runtime/tune_paths.cpp) with fake passes and device calls: the fastest tuned pass
// wins and is recorded under the pass key; ties go to the heuristic's path; a faster path whose output disagrees
// with the heuristic's, or whose check throws, is not chosen (the heuristic's is, and recorded); a failing path is
// a result; a device left unusable is a DriverError; lookups stay in the query's shape bucket and skip records
// naming a path that cannot run here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cache/tuning_db.h"
#include "lkjit/error.h"
#include "lkjit/tuning.h"
#include "lkjit/wtconv.h"
#include "runtime/tune_pass.h"
#include "tests/fake_pass_device.h"
#include "tests/test_support.h"

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace lkjit;  // NOLINT

using lkjit::test::TempDir;

const DeviceLimits kLim = DeviceLimits::for_arch(90);
const Shape kShape{4, 8, 16, 16, 1};

// One path's pass: a fixed time per run; its check against another path's returns `disagree` (or throws).
class PathHarness : public PassHarness {
 public:
  PathHarness(int id, double ms) : id(id), ms(ms) {
    info_.op = "fake";
    info_.text = "fake pass, path " + std::to_string(id);
    dev_.name = "Fake GPU";
    dev_.arch = 90;
    dev_.limits = kLim;
    // One fixed entry: tune_pass has nothing to tune, so only the paths are measured.
    PlannedKernel pk = wtconv_plan(WTConvOptions{8, 5, 3, DType::kF32, true, 1, 0}, kShape, kLim, false,
                                   WTConvPath::kPlane).front();
    pk.fixed = true;
    plan_ = {pk};
  }
  const PassInfo& info() const override { return info_; }
  const DeviceInfo& device() const override { return dev_; }
  const std::vector<PlannedKernel>& plan() const override { return plan_; }
  void set_tile(const KernelSelector&, const Tile&) override {}
  void set_tiles(const std::vector<PlannedKernel>&) override {}
  void prepare() override {}
  std::vector<double> time(int, int reps) override {
    if (fail_time) throw DriverError("lkjit: error: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (injected)");
    ++timed;
    return std::vector<double>(size_t(std::max(reps, 1)), ms);
  }
  double traffic_bytes() const override { return 1e6; }
  std::optional<std::string> check_outputs(const std::vector<PlannedKernel>&, const std::vector<PlannedKernel>&) override {
    return std::nullopt;
  }
  std::optional<std::string> check_against(PassHarness& reference, const std::vector<PlannedKernel>&,
                                           const std::vector<PlannedKernel>&) override {
    if (log) (*log)[id].push_back(dynamic_cast<PathHarness&>(reference).id);
    if (throw_check) throw DriverError("lkjit: error: CUDA_ERROR_ILLEGAL_ADDRESS (injected)");
    return disagree;
  }

  int id;
  double ms;
  int timed = 0;
  bool fail_time = false, throw_check = false;
  std::optional<std::string> disagree;
  std::map<int, std::vector<int>>* log = nullptr;  // path id -> the ids it was checked against

 private:
  PassInfo info_;
  DeviceInfo dev_;
  std::vector<PlannedKernel> plan_;
};

// A harness that keeps PassHarness's default check_against (it cannot compare paths).
class NoCompareHarness : public PathHarness {
 public:
  using PathHarness::PathHarness;
  std::optional<std::string> check_against(PassHarness& r, const std::vector<PlannedKernel>& a,
                                           const std::vector<PlannedKernel>& b) override {
    return PassHarness::check_against(r, a, b);
  }
};

using lkjit::test::FakeDevice;

// Paths "rule" (id 7, the heuristic's), "wide" (id 2) and "tc" (id 5), each a PathHarness of the given time (the
// tuner owns them: what tests inspect afterwards is in `checks`).
struct Paths {
  std::map<int, std::vector<int>> checks;
  std::map<int, double> ms{{7, 1.0}, {2, 0.5}, {5, 0.8}};
  std::map<int, std::function<void(PathHarness&)>> tweak;
  bool no_compare = false;
  PassPaths make(const Shape& shape = kShape) {
    PassPaths p;
    p.key = "lkjit_pass_fake_fwd_f32_sm90";
    p.shape = shape;
    p.options = {{7, "rule"}, {2, "wide"}, {5, "tc"}};
    p.harness = [this](int id) -> std::unique_ptr<PassHarness> {
      if (ms.at(id) < 0) throw SpecError("lkjit: error: fake: path " + std::to_string(id) + " cannot run (injected)");
      std::unique_ptr<PathHarness> h = no_compare ? std::make_unique<NoCompareHarness>(id, ms.at(id))
                                                  : std::make_unique<PathHarness>(id, ms.at(id));
      if (tweak.count(id)) tweak[id](*h);
      h->log = &checks;
      return h;
    };
    return p;
  }
};

TuneOptions options(const TempDir& dir) { return lkjit::test::quick_tune_options(dir.path() + "/tuning.json", 6); }

const DeviceClass kFake{"Fake GPU", 90, kLim.sm_count};

PathChoice looked_up(const PassPaths& p, TuneOptions o, TuneMode m = TuneMode::kCached) {
  o.mode = m;
  return lookup_path(p, kFake, o);
}

TEST(TunePaths, TheFastestPathIsCheckedAgainstTheHeuristicsThenChosenAndRecorded) {
  const TempDir dir("lkjit-tune-paths");
  Paths ps;
  FakeDevice dev;
  const TuneOptions o = options(dir);
  const PassPaths p = ps.make();
  const PathTuneReport rep = detail::tune_paths(p, o, dev.fns());
  ASSERT_EQ(rep.paths.size(), 3u);
  EXPECT_EQ(rep.chosen.path.id, 2);
  EXPECT_EQ(rep.chosen.tier, LookupTier::kTuned);
  EXPECT_TRUE(rep.check_failure.empty()) << rep.check_failure;
  EXPECT_DOUBLE_EQ(rep.paths[1].pass.median_ms, 0.5);
  EXPECT_EQ(rep.paths[1].pass.n, 6) << "3 interleaved rounds of final_reps / 3";
  EXPECT_EQ(ps.checks, (std::map<int, std::vector<int>>{{2, {7}}})) << "only the winner, against the heuristic's";
  EXPECT_EQ(rep.db_path, o.db_path);
  // The record: under the pass key, one axis "path" with the id; an exact hit for the same bucket.
  const auto db = cache::TuningDb::load(o.db_path);
  ASSERT_EQ(db.records().size(), 1u);
  EXPECT_EQ(db.records()[0].spec, p.key);
  EXPECT_EQ(db.records()[0].tile, (std::map<std::string, int>{{"path", 2}}));
  EXPECT_DOUBLE_EQ(db.records()[0].time_s, 0.5e-3);
  EXPECT_DOUBLE_EQ(db.records()[0].default_time_s, 1.0e-3);
  const PathChoice c = looked_up(p, o);
  EXPECT_EQ(c.path.name, "wide");
  EXPECT_EQ(c.tier, LookupTier::kExact);
  // Another shape bucket of the same key: no decision (paths move with the map size); another device of the arch,
  // same bucket: its record; mode off: the heuristic whatever is recorded.
  const PathChoice other = looked_up(Paths().make(Shape{8, 8, 32, 32, 1}), o);
  EXPECT_EQ(other.path.id, 7);
  EXPECT_EQ(other.tier, LookupTier::kDefault);
  EXPECT_THAT(other.detail, HasSubstr("none for this shape bucket"));
  TuneOptions cached = o;
  cached.mode = TuneMode::kCached;
  const PathChoice sibling = lookup_path(p, DeviceClass{"Fake GPU 2", 90, 66}, cached);
  EXPECT_EQ(sibling.path.id, 2);
  EXPECT_EQ(sibling.tier, LookupTier::kSameArch);
  EXPECT_EQ(looked_up(p, o, TuneMode::kOff).path.id, 7);
  EXPECT_EQ(looked_up(p, o, TuneMode::kOff).tier, LookupTier::kDefault);
}

TEST(TunePaths, ATieGoesToTheHeuristicsPathUnchecked) {
  const TempDir dir("lkjit-tune-paths");
  Paths ps;
  ps.ms = {{7, 1.0}, {2, 0.99}, {5, 1.2}};  // within min_noise (2 %) of each other
  FakeDevice dev;
  const PathTuneReport rep = detail::tune_paths(ps.make(), options(dir), dev.fns());
  EXPECT_EQ(rep.chosen.path.id, 7);
  EXPECT_EQ(rep.chosen.tier, LookupTier::kTuned);
  EXPECT_TRUE(ps.checks.empty());
}

TEST(TunePaths, AFasterPathThatDisagreesIsNotChosenAndTheHeuristicsIsRecorded) {
  for (bool throws : {false, true}) {
    const TempDir dir("lkjit-tune-paths");
    Paths ps;
    ps.tweak[2] = [&](PathHarness& h) {
      h.disagree = "y: max |err| 4.0e+00 at index 3 (injected)";
      h.throw_check = throws;
    };
    FakeDevice dev;
    const TuneOptions o = options(dir);
    const PassPaths p = ps.make();
    const PathTuneReport rep = detail::tune_paths(p, o, dev.fns());
    EXPECT_EQ(rep.chosen.path.id, 7) << "throws=" << throws;
    EXPECT_EQ(rep.chosen.tier, LookupTier::kTuned);
    EXPECT_THAT(rep.chosen.detail, HasSubstr("a faster path disagreed"));
    EXPECT_THAT(rep.check_failure, AllOf(HasSubstr("path wide"), HasSubstr("so rule is kept"),
                                         HasSubstr(throws ? "ILLEGAL_ADDRESS" : "max |err|")));
    // Recorded as measured, so that the next process does not measure again; never the disagreeing path.
    const PathChoice c = looked_up(p, o);
    EXPECT_EQ(c.path.id, 7);
    EXPECT_EQ(c.tier, LookupTier::kExact);
  }
}

TEST(TunePaths, AHarnessThatCannotCompareKeepsTheHeuristic) {
  const TempDir dir("lkjit-tune-paths");
  Paths ps;
  ps.no_compare = true;
  FakeDevice dev;
  const PathTuneReport rep = detail::tune_paths(ps.make(), options(dir), dev.fns());
  EXPECT_EQ(rep.chosen.path.id, 7);
  EXPECT_THAT(rep.check_failure, HasSubstr("cannot compare paths"));
}

TEST(TunePaths, AFailingPathIsAResultAndTheOthersStillCompete) {
  const TempDir dir("lkjit-tune-paths");
  Paths ps;
  ps.ms[2] = -1;  // its harness cannot be made
  ps.tweak[5] = [](PathHarness& h) { h.fail_time = true; };
  ps.ms[5] = 0.1;
  FakeDevice dev;
  const PathTuneReport rep = detail::tune_paths(ps.make(), options(dir), dev.fns());
  EXPECT_THAT(rep.paths[1].failure, HasSubstr("path 2 cannot run"));
  EXPECT_THAT(rep.paths[2].failure, HasSubstr("OUT_OF_RESOURCES"));
  EXPECT_EQ(rep.paths[2].pass.n, 0);
  EXPECT_EQ(rep.chosen.path.id, 7);
  EXPECT_EQ(rep.chosen.tier, LookupTier::kTuned);
}

TEST(TunePaths, ADeviceLeftUnusableIsADriverError) {
  const TempDir dir("lkjit-tune-paths");
  Paths ps;
  ps.tweak[5] = [](PathHarness& h) { h.fail_time = true; };
  FakeDevice dev;
  dev.device_lost = true;
  try {
    detail::tune_paths(ps.make(), options(dir), dev.fns());
    FAIL() << "no DriverError";
  } catch (const DriverError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("unusable"), HasSubstr("path tc")));
  }
}

TEST(TunePaths, LookupsSkipRecordsOfPathsThatCannotRunHere) {
  const TempDir dir("lkjit-tune-paths");
  const TuneOptions o = options(dir);
  Paths ps;
  PassPaths p = ps.make();
  cache::TuningRecord r;
  r.device = kFake.name, r.arch = 90, r.sm_count = kFake.sm_count;
  r.spec = p.key, r.bucket = bucket_key(kShape);
  r.B = kShape.B, r.C = kShape.C, r.H = kShape.H, r.W = kShape.W;
  r.tile = {{"path", 5}};
  cache::TuningDb::save_merged(o.db_path, {r});
  EXPECT_EQ(looked_up(p, o).path.id, 5);
  p.options.pop_back();  // tc cannot run here (another dtype's rule, an older generator's id)
  const PathChoice c = looked_up(p, o);
  EXPECT_EQ(c.path.id, 7);
  EXPECT_EQ(c.tier, LookupTier::kDefault);
  EXPECT_THAT(c.detail, HasSubstr("naming a path that runs here"));
  // A record with another axis is some other decision, never a path.
  r.tile = {{"path", 2}, {"threads", 128}};
  cache::TuningDb::save_merged(o.db_path, {r});
  EXPECT_EQ(looked_up(p, o).tier, LookupTier::kDefault);
}

TEST(TunePaths, RefusesAProblemWithoutPathsOrHarness) {
  const TempDir dir("lkjit-tune-paths");
  FakeDevice dev;
  PassPaths none;
  none.key = "lkjit_pass_fake";
  EXPECT_THROW(lookup_path(none, kFake, options(dir)), SpecError);
  Paths ps;
  PassPaths p = ps.make();
  p.harness = nullptr;
  try {
    detail::tune_paths(p, options(dir), dev.fns());
    FAIL() << "no SpecError";
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("no pass harness"));
  }
}

}  // namespace
