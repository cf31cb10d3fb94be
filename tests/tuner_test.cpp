// Tests of the tuner's CPU parts (runtime/tune_*.cpp, runtime/tuner.cpp, tools/lkjit/tune.cpp): modes
// from the API and LKJIT_TUNE, names and keys, statistics and deterministic selection, every search
// strategy against a synthetic cost model, the compile step's failure handling, candidate spaces of
// the WTConv kernels, and `lkjit tune` without a GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "lkjit/wtconv_kernels.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/tuning.h"
#include "lkjit/wtconv_tune.h"
#include "runtime/tune_search.h"
#include "runtime/tuner_internal.h"
#include "tests/test_support.h"

namespace lkjit {
// Tiles by name in failure messages (found by argument-dependent lookup).
inline void PrintTo(const Tile& t, std::ostream* os) { *os << t.to_string(); }
}  // namespace lkjit

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace lkjit;  // NOLINT

using lkjit::test::CommandResult;
using lkjit::test::run_command;
using lkjit::test::ScopedEnv;
using lkjit::test::shell_quote;
using lkjit::test::TempDir;

template <class F>
std::string spec_error(F f) {
  try {
    f();
  } catch (const SpecError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected SpecError";
  return {};
}

// ---- modes, names, keys -----------------------------------------------------------------------------

TEST(TuneMode, ParsesEveryNameAndNamesTheAllowedSet) {
  for (TuneMode m : {TuneMode::kOff, TuneMode::kCached, TuneMode::kTune, TuneMode::kRetune})
    EXPECT_EQ(parse_tune_mode(to_string(m)), m);
  EXPECT_THAT(spec_error([] { parse_tune_mode("fast"); }), AllOf(HasSubstr("'fast'"), HasSubstr("off, cached, tune, retune")));
  for (TuneStrategy s : {TuneStrategy::kExhaustive, TuneStrategy::kRandom, TuneStrategy::kGreedy})
    EXPECT_EQ(parse_tune_strategy(to_string(s)), s);
  EXPECT_THAT(spec_error([] { parse_tune_strategy("annealing"); }),
              AllOf(HasSubstr("'annealing'"), HasSubstr("exhaustive, random, greedy")));
}

TEST(TuneMode, ApiBeatsEnvironmentBeatsDefault) {
  {
    ScopedEnv e("LKJIT_TUNE", nullptr);
    EXPECT_EQ(tune_mode_from_env(), std::nullopt);
    EXPECT_EQ(resolve_tune_mode(std::nullopt, TuneMode::kCached), TuneMode::kCached);  // layers
    EXPECT_EQ(Tuner().mode(), TuneMode::kTune);                                         // tuner API
  }
  {
    ScopedEnv e("LKJIT_TUNE", "retune");
    EXPECT_EQ(tune_mode_from_env(), TuneMode::kRetune);
    EXPECT_EQ(resolve_tune_mode(std::nullopt, TuneMode::kCached), TuneMode::kRetune);
    EXPECT_EQ(resolve_tune_mode(TuneMode::kOff, TuneMode::kCached), TuneMode::kOff);
    TuneOptions o;
    o.mode = TuneMode::kCached;
    EXPECT_EQ(Tuner(o).mode(), TuneMode::kCached);
    EXPECT_EQ(Tuner().mode(), TuneMode::kRetune);
  }
  {
    ScopedEnv e("LKJIT_TUNE", "bogus");
    EXPECT_THAT(spec_error([] { resolve_tune_mode(std::nullopt, TuneMode::kCached); }), HasSubstr("LKJIT_TUNE='bogus'"));
    EXPECT_EQ(resolve_tune_mode(TuneMode::kTune, TuneMode::kCached), TuneMode::kTune) << "an explicit mode never reads the variable";
  }
}

TEST(TuneMode, BudgetFromApiOrEnvironment) {
  ScopedEnv e("LKJIT_TUNE_BUDGET", nullptr);
  EXPECT_DOUBLE_EQ(detail::resolve_budget(3), 3);
  EXPECT_DOUBLE_EQ(detail::resolve_budget(0), 10);
  ScopedEnv f("LKJIT_TUNE_BUDGET", "2.5");
  EXPECT_DOUBLE_EQ(detail::resolve_budget(0), 2.5);
  ScopedEnv g("LKJIT_TUNE_BUDGET", "soon");
  EXPECT_THAT(spec_error([] { detail::resolve_budget(0); }), AllOf(HasSubstr("LKJIT_TUNE_BUDGET='soon'"), HasSubstr("> 0")));
}

TEST(TuningDbPath, FromEnvironmentOrBesideTheCache) {
  {
    ScopedEnv e("LKJIT_TUNING_DB", "/x/y.json");
    EXPECT_EQ(tuning_db_path(), "/x/y.json");
  }
  ScopedEnv e("LKJIT_TUNING_DB", nullptr);
  ScopedEnv c("LKJIT_CACHE_DIR", "/tmp/some-cache");
  EXPECT_EQ(tuning_db_path(), "/tmp/some-cache/tuning.json");
}

TEST(ShapeBucket, PowersOfTwoForBAndCExactSmallMapsQuarterOctavesAbove) {
  EXPECT_EQ(bucket_key(Shape{64, 96, 56, 56, 1}), "B64_C128_H56_W56_s1");
  EXPECT_EQ(bucket_key(Shape{63, 128, 7, 9, 2}), "B64_C128_H7_W9_s2");
  EXPECT_EQ(bucket_key(Shape{1, 1, 64, 65, 1}), "B1_C1_H64_W80_s1");
  EXPECT_EQ(bucket_key(Shape{8, 64, 224, 256, 1}), "B8_C64_H224_W256_s1");
  EXPECT_EQ(bucket_key(Shape{8, 64, 193, 257, 1}), "B8_C64_H224_W320_s1");
  EXPECT_EQ(bucket_key(Shape{8, 64, 250, 256, 1}), bucket_key(Shape{5, 40, 256, 250, 1}));
}

TEST(SpecKey, IsTheKernelNameWithoutTheTile) {
  const OpSpec plane = wtconv_spec(kWTConvFwdPlane, DType::kF32, 5, 5, true, 90);
  EXPECT_EQ(spec_key(plane), "lkjit_wtconv_fwd_plane_f32_k5_L5_sm90");
  const Tile t = wtconv_tile(0, 0, 1, 4, 256);
  const std::string name = kernel_name(plane, t);
  const std::string key = spec_key(plane);
  EXPECT_EQ(name, key.substr(0, key.size() - 5) + "_" + t.to_string() + "_sm90");
  // A deeper level reads fp32 whatever the layer's dtype: one key (and one binary).
  EXPECT_EQ(spec_key(wtconv_spec(kWTConvFwdLevel, DType::kF16, 5, 0, false, 90)),
            spec_key(wtconv_spec(kWTConvFwdLevel, DType::kF32, 5, 0, false, 90)));
  EXPECT_NE(spec_key(wtconv_spec(kWTConvFwdLevel, DType::kF16, 5, 0, true, 90)),
            spec_key(wtconv_spec(kWTConvFwdLevel, DType::kF32, 5, 0, true, 90)));
  EXPECT_EQ(spec_key(wtconv_spec(kWTConvReduce, DType::kF32, 3, 2, true, 80)), "lkjit_wtconv_reduce_k3_L2_sm80");
}

TEST(TileAxes, GetAndSetByName) {
  // WTConv's axes come first, in their declared order.
  Tile t;
  const auto& wt = family("wtconv").axes;
  for (size_t i = 0; i < wt.size(); ++i) {
    EXPECT_EQ(tile_axis_names()[i], wt[i].name);
    EXPECT_TRUE(set_tile_axis(t, tile_axis_names()[i], int(i) + 1));
  }
  Tile want = wtconv_tile(1, 2, 3, 4, 5, 6);
  want.set("cluster", 7);
  EXPECT_EQ(t, want);
  for (size_t i = 0; i < wt.size(); ++i) EXPECT_EQ(tile_axis(t, tile_axis_names()[i]), int(i) + 1);
  EXPECT_FALSE(set_tile_axis(t, "warps", 4));
  EXPECT_EQ(tile_axis(t, "warps"), 0);
  // Every axis of every WTConv kernel's space has a field.
  for (Kernel k : family("wtconv").kernels)
    for (const auto& ax : tile_space(wtconv_spec(k, DType::kF32, 5, 2, true, 90)).axes) {
      Tile u;
      EXPECT_TRUE(set_tile_axis(u, ax.name, 7)) << ax.name;
    }
}

// ---- statistics and selection -------------------------------------------------------------------------

TEST(Summarize, MedianMinAndRobustNoise) {
  auto s = summarize({3, 1, 2});
  EXPECT_DOUBLE_EQ(s.median_ms, 2);
  EXPECT_DOUBLE_EQ(s.min_ms, 1);
  EXPECT_EQ(s.n, 3);
  EXPECT_DOUBLE_EQ(s.noise, 1.4826 * 1 / 2);
  EXPECT_DOUBLE_EQ(summarize({4, 1, 3, 2}).median_ms, 2.5);
  EXPECT_DOUBLE_EQ(summarize({5, 5, 5, 5}).noise, 0);
  EXPECT_DOUBLE_EQ(summarize({5}).noise, 0);
  EXPECT_EQ(summarize({}).n, 0);
  // One outlier (a clock change) does not move the median or the noise much.
  EXPECT_LT(summarize({1.0, 1.01, 0.99, 1.0, 50.0}).noise, 0.02);
}

CandidateResult cand(int order, std::vector<double> ms, CandidateStatus st = CandidateStatus::kOk) {
  CandidateResult c;
  c.order = order;
  c.tile = wtconv_tile(0, 0, 0, 0, 32 * (order + 1));
  c.status = st;
  c.samples_ms = ms;
  c.summary = st == CandidateStatus::kOk ? summarize(ms) : Summary{};
  return c;
}

TEST(SelectBest, AClearWinnerWins) {
  const std::vector<CandidateResult> c = {cand(0, {1.0, 1.0, 1.0}), cand(1, {0.8, 0.8, 0.8}), cand(2, {0.9, 0.9, 0.9})};
  EXPECT_EQ(select_best(c, 0.02), 1u);
}

TEST(SelectBest, WithinNoiseOfTheBestTheFirstInFixedOrderWins) {
  // Order 3 is 1% faster than the default (order 0): within the 2% floor, so the default stays.
  std::vector<CandidateResult> c = {cand(3, {0.990, 0.991, 0.989}), cand(0, {1.000, 1.001, 0.999}),
                                    cand(5, {1.2, 1.2, 1.2})};
  EXPECT_EQ(c[*select_best(c, 0.02)].order, 0);
  // With a tighter floor it does not.
  EXPECT_EQ(c[*select_best(c, 0.001)].order, 3);
  // A noisy best widens the tolerance: 5% apart, but the best's samples scatter by ~10%.
  c = {cand(4, {0.90, 1.00, 0.81, 0.95, 0.86}), cand(1, {0.95, 0.95, 0.95, 0.95, 0.95})};
  EXPECT_EQ(c[*select_best(c, 0.02)].order, 1);
}

TEST(SelectBest, DoesNotDependOnInputOrderAndRepeats) {
  std::vector<CandidateResult> c;
  std::mt19937 rng(7);
  for (int i = 0; i < 20; ++i) {
    const double base = 1.0 + 0.004 * ((i * 7) % 10);  // many within 2% of each other
    c.push_back(cand(i, {base, base * 1.001, base * 0.999}));
  }
  const int want = c[*select_best(c, 0.02)].order;
  for (int trial = 0; trial < 10; ++trial) {
    std::shuffle(c.begin(), c.end(), rng);
    EXPECT_EQ(c[*select_best(c, 0.02)].order, want);
  }
}

TEST(SelectBest, FailuresAreNeverChosen) {
  auto failed = cand(0, {}, CandidateStatus::kCompileFailed);
  failed.summary.median_ms = 0.001;  // even a bogus fast time
  const std::vector<CandidateResult> c = {failed, cand(1, {1.0}), cand(2, {1.1})};
  EXPECT_EQ(select_best(c, 0.02), 1u);
  EXPECT_EQ(select_best({failed}, 0.02), std::nullopt);
  EXPECT_EQ(select_best({}, 0.02), std::nullopt);
}

TEST(Rank, OkByTimeThenFailuresByOrder) {
  const std::vector<CandidateResult> c = {cand(0, {2.0}), cand(1, {}, CandidateStatus::kLaunchFailed), cand(2, {1.0}),
                                          cand(3, {}, CandidateStatus::kRejected), cand(4, {2.0})};
  EXPECT_EQ(rank(c), (std::vector<size_t>{2, 0, 4, 1, 3}));
}

// ---- search strategies (synthetic cost model, fake clock) -------------------------------------------------

// The plane kernel's real space and candidate order on 64x96x56x56 with a separable cost whose minimum
// is p2_v2_w256, plus a deterministic +-0.1% jitter per sample.
struct Synthetic {
  OpSpec spec = wtconv_spec(kWTConvFwdPlane, DType::kF32, 5, 5, true, 90);
  Shape shape{64, 96, 56, 56, 1};
  DeviceLimits lim = DeviceLimits::for_arch(90);
  std::vector<Tile> cands = detail::candidate_order(spec, shape, lim);
  std::set<int> fail_threads;  // injected failures
  int calls = 0, evaluated = 0;
  std::vector<Tile> visited;
  std::function<double(const Tile&)> model = cost;

  static double cost(const Tile& t) {
    auto sq = [](double x) { return x * x; };
    return 1.0 + 0.1 * sq(std::log2(t.get("planes")) - 1) + 0.07 * sq(std::log2(t.get("vy")) - 1) + 0.05 * sq(std::log2(t.get("threads")) - 8);
  }
  detail::EvaluateFn eval() {
    return [this](const std::vector<Tile>& tiles, int reps) {
      ++calls;
      std::vector<CandidateResult> out;
      for (const Tile& t : tiles) {
        CandidateResult r;
        r.tile = t;
        visited.push_back(t);
        ++evaluated;
        if (fail_threads.count(t.get("threads"))) {
          r.status = CandidateStatus::kCompileFailed;
          r.reason = "injected failure";
        } else {
          for (int i = 0; i < reps; ++i) r.samples_ms.push_back(model(t) * (1 + 0.001 * ((i * 3 + t.get("threads")) % 3 - 1)));
        }
        out.push_back(r);
      }
      return out;
    };
  }
  detail::SearchConfig config(TuneStrategy s) const {
    detail::SearchConfig c;
    c.strategy = s;
    c.budget_s = 1000;
    c.batch = 4;
    return c;
  }
  Tile best_valid() const {
    Tile best = cands[0];
    for (const Tile& t : cands)
      if (!fail_threads.count(t.get("threads")) && (fail_threads.count(best.get("threads")) || cost(t) < cost(best))) best = t;
    return best;
  }
};

detail::ClockFn zero_clock() {
  return [] { return 0.0; };
}

TEST(Search, ExhaustiveMeasuresEveryCandidateAndFindsTheMinimum) {
  Synthetic s;
  ASSERT_GT(s.cands.size(), 10u);
  const auto out = detail::run_search(tile_space(s.spec), s.cands, s.config(TuneStrategy::kExhaustive), s.eval(), zero_clock());
  ASSERT_EQ(out.candidates.size(), s.cands.size());
  for (size_t i = 0; i < out.candidates.size(); ++i) EXPECT_EQ(out.candidates[i].order, int(i));
  ASSERT_TRUE(out.chosen);
  EXPECT_EQ(out.candidates[*out.chosen].tile, (wtconv_tile(0, 0, 2, 2, 256)));
  EXPECT_TRUE(out.candidates[*out.chosen].finalist);
  EXPECT_EQ(out.candidates[*out.chosen].summary.n, 15) << "3 rounds of 5 re-measured samples";
  EXPECT_FALSE(out.budget_hit);
}

TEST(Search, GreedyMeasuresASmallSpaceWhole) {
  Synthetic s;
  ASSERT_LE(s.cands.size(), size_t(kGreedyMeasureAllMax));
  const auto out = detail::run_search(tile_space(s.spec), s.cands, s.config(TuneStrategy::kGreedy), s.eval(), zero_clock());
  ASSERT_TRUE(out.chosen);
  EXPECT_EQ(out.candidates[*out.chosen].tile, (wtconv_tile(0, 0, 2, 2, 256)));
  EXPECT_EQ(out.candidates.size(), s.cands.size());
  EXPECT_EQ(s.visited.front(), s.cands.front()) << "greedy starts at the default";
  EXPECT_FALSE(out.budget_hit);
}

// Axes on which a and b differ.
int axes_apart(const TileSpace& space, const Tile& a, const Tile& b) {
  int d = 0;
  for (const auto& ax : space.axes) d += tile_axis(a, ax.name) != tile_axis(b, ax.name);
  return d;
}

// True when every other point on the axis lines through `t` costs more: a descent at t stays there.
bool local_minimum(const TileSpace& space, const std::vector<Tile>& cands, const std::function<double(const Tile&)>& cost,
                   const Tile& t) {
  for (const Tile& o : cands)
    if (axes_apart(space, o, t) == 1 && cost(o) <= cost(t)) return false;
  return true;
}

TEST(Search, GreedyFindsASmallSpacesOptimumTwoAxesFromTheDefault) {
  // A bowl around the default with a deeper pocket two axes away: descent from the default stays put.
  Synthetic s;
  const TileSpace space = tile_space(s.spec);
  const Tile def = s.cands[0];
  Tile pocket;
  for (const Tile& t : s.cands)
    if (axes_apart(space, t, def) == 2 && t.get("vy") == def.get("vy")) pocket = t;
  ASSERT_NE(pocket, Tile{}) << "no candidate two axes from the default";
  s.model = [def, pocket](const Tile& t) {
    if (t == pocket) return 0.8;
    auto sq = [](double x) { return x * x; };
    return 1.0 + 0.05 * (sq(std::log2(double(t.get("planes")) / def.get("planes"))) + sq(std::log2(double(t.get("vy")) / def.get("vy"))) +
                         sq(std::log2(double(t.get("threads")) / def.get("threads"))));
  };
  ASSERT_TRUE(local_minimum(space, s.cands, s.model, def)) << "coordinate descent alone would stop at the default";
  const auto out = detail::run_search(space, s.cands, s.config(TuneStrategy::kGreedy), s.eval(), zero_clock());
  ASSERT_TRUE(out.chosen);
  EXPECT_EQ(out.candidates[*out.chosen].tile, pocket) << "default " << def.to_string();
}

// ---- greedy on a space above the measure-everything threshold --------------------------------------

// 256 tiles of a made-up tiled kernel, the default first. The cost has two basins: a shallow one
// around the default D = t32x32_v4_w256 and a deeper one around G = t8x8_v1_w64, which differs from D
// on every axis; D is a strict minimum along each of its axes. Every measured candidate advances the
// clock by 50 ms, as a real measurement would.
struct Landscape {
  TileSpace space{{{"tile_h", {8, 16, 32, 64}, ""},
                   {"tile_w", {8, 16, 32, 64}, ""},
                   {"vy", {1, 2, 4, 8}, ""},
                   {"threads", {64, 128, 256, 512}, ""}}};
  static inline const Tile kDefault = wtconv_tile(32, 32, 0, 4, 256);
  static inline const Tile kBest = wtconv_tile(8, 8, 0, 1, 64);
  std::vector<Tile> cands;
  std::function<bool(const Tile&)> fails = [](const Tile&) { return false; };
  std::vector<Tile> visited;

  Landscape() {
    cands.push_back(kDefault);
    for (int h : space.axes[0].values)
      for (int w : space.axes[1].values)
        for (int vy : space.axes[2].values)
          for (int th : space.axes[3].values)
            if (Tile t = wtconv_tile(h, w, 0, vy, th); t != kDefault) cands.push_back(t);
    std::reverse(cands.begin() + 1, cands.end());  // G last in the fixed order, not next to the default
  }
  static double dist2(const Tile& a, const Tile& b) {
    auto sq = [](double x) { return x * x; };
    return sq(std::log2(double(a.get("tile_h")) / b.get("tile_h"))) + sq(std::log2(double(a.get("tile_w")) / b.get("tile_w"))) +
           sq(std::log2(double(a.get("vy")) / b.get("vy"))) + sq(std::log2(double(a.get("threads")) / b.get("threads")));
  }
  static double cost(const Tile& t) { return std::min(1.0 + 0.02 * dist2(t, kDefault), 0.85 + 0.03 * dist2(t, kBest)); }
  detail::EvaluateFn eval() {
    return [this](const std::vector<Tile>& tiles, int reps) {
      std::vector<CandidateResult> out;
      for (const Tile& t : tiles) {
        visited.push_back(t);
        CandidateResult r;
        if (fails(t)) {
          r.status = CandidateStatus::kLaunchFailed;
          r.reason = "injected failure";
        } else {
          r.samples_ms.assign(reps, cost(t));
        }
        out.push_back(r);
      }
      return out;
    };
  }
  detail::ClockFn clock() {
    return [this] { return 0.05 * visited.size(); };
  }
  detail::SearchConfig config(double budget_s, uint64_t seed = 1) const {
    detail::SearchConfig c;
    c.strategy = TuneStrategy::kGreedy;
    c.budget_s = budget_s;
    c.batch = 4;
    c.seed = seed;
    return c;
  }
  detail::SearchOutcome run(const detail::SearchConfig& c) { return detail::run_search(space, cands, c, eval(), clock()); }
  static Tile chosen(const detail::SearchOutcome& o) { return o.chosen ? o.candidates[*o.chosen].tile : Tile{}; }
};

TEST(Search, GreedyMultiStartLeavesALocalMinimumOfALargeSpace) {
  {
    Landscape l;
    ASSERT_GT(l.cands.size(), size_t(kGreedyMeasureAllMax));
    ASSERT_TRUE(local_minimum(l.space, l.cands, Landscape::cost, Landscape::kDefault)) << "one descent stays at D";
  }
  for (uint64_t seed : {1, 2, 3}) {
    Landscape l;
    const auto out = l.run(l.config(/*budget_s=*/6, seed));  // at most ~120 of 256 measurements
    EXPECT_EQ(Landscape::chosen(out), Landscape::kBest) << "seed " << seed;
    EXPECT_LT(out.candidates.size(), l.cands.size()) << "seed " << seed;
    EXPECT_EQ(l.visited.front(), Landscape::kDefault) << "the first descent starts at the default";
  }
}

TEST(Search, GreedyWithoutABudgetStopsAfterItsDescents) {
  Landscape l;
  const auto out = detail::run_search(l.space, l.cands, l.config(/*budget_s=*/0), l.eval(), zero_clock());
  EXPECT_FALSE(out.budget_hit);
  EXPECT_EQ(Landscape::chosen(out), Landscape::kBest);
  EXPECT_LT(out.candidates.size(), l.cands.size()) << "cheaper than exhaustive";
}

TEST(Search, GreedyIsDeterministicForASeed) {
  Landscape a, b, c;
  const auto ra = a.run(a.config(3));
  const auto rb = b.run(b.config(3));
  EXPECT_EQ(a.visited, b.visited);
  EXPECT_EQ(Landscape::chosen(ra), Landscape::chosen(rb));
  EXPECT_NE(Landscape::chosen(ra), Tile{});
  c.run(c.config(3, /*seed=*/7));
  EXPECT_NE(a.visited, c.visited) << "the restarts follow the seed";
}

TEST(Search, GreedyOnALargeSpaceStopsAtTheBudget) {
  // The first descent ends at D after 13 measurements (0.65 s); the restarts then run into the budget.
  Landscape l;
  const auto out = l.run(l.config(/*budget_s=*/1));
  EXPECT_TRUE(out.budget_hit);
  EXPECT_GT(out.candidates.size(), 13u) << "restarted";
  EXPECT_LE(out.candidates.size(), 20u + 13u) << "nothing new after 1 s (20 measurements) but the batch under way";
  EXPECT_TRUE(out.chosen);
  // A budget spent by the default's measurement still yields the default.
  Landscape t;
  const auto ot = t.run(t.config(/*budget_s=*/0.01));
  EXPECT_TRUE(ot.budget_hit);
  EXPECT_EQ(ot.candidates.size(), 1u);
  EXPECT_EQ(Landscape::chosen(ot), Landscape::kDefault);
}

TEST(Search, GreedySkipsFailedCandidatesOfALargeSpace) {
  // The default and every tile_w=16 tile fail: greedy starts at the first candidate that measures.
  Landscape l;
  l.fails = [](const Tile& t) { return t == Landscape::kDefault || t.get("tile_w") == 16; };
  const auto out = l.run(l.config(/*budget_s=*/6));
  ASSERT_TRUE(out.chosen);
  EXPECT_EQ(Landscape::chosen(out), Landscape::kBest);
  int failed = 0;
  for (const auto& c : out.candidates)
    if (l.fails(c.tile)) {
      EXPECT_EQ(c.status, CandidateStatus::kLaunchFailed);
      EXPECT_EQ(c.reason, "injected failure");
      EXPECT_FALSE(c.finalist);
      ++failed;
    }
  EXPECT_GT(failed, 1);
  // Nothing measures: no choice, no crash.
  Landscape none;
  none.fails = [](const Tile&) { return true; };
  const auto on = none.run(none.config(/*budget_s=*/6));
  EXPECT_FALSE(on.chosen);
  EXPECT_FALSE(on.candidates.empty());
}

TEST(Search, RandomIsSeededAndStopsAtTheBudget) {
  int ticks = 0;
  auto clock = [&ticks] { return double(ticks++); };  // one second per clock read
  Synthetic a, b, c;
  auto cfg = a.config(TuneStrategy::kRandom);
  cfg.budget_s = 3;
  ticks = 0;
  const auto ra = detail::run_search(tile_space(a.spec), a.cands, cfg, a.eval(), clock);
  ticks = 0;
  const auto rb = detail::run_search(tile_space(b.spec), b.cands, cfg, b.eval(), clock);
  EXPECT_TRUE(ra.budget_hit);
  EXPECT_LT(ra.candidates.size(), a.cands.size());
  EXPECT_EQ(a.visited, b.visited) << "same seed, different order";
  EXPECT_EQ(a.visited.front(), a.cands.front()) << "the default is measured first";
  ASSERT_TRUE(ra.chosen && rb.chosen);
  EXPECT_EQ(ra.candidates[*ra.chosen].tile, rb.candidates[*rb.chosen].tile);
  cfg.seed = 99;
  ticks = 0;
  detail::run_search(tile_space(c.spec), c.cands, cfg, c.eval(), clock);
  EXPECT_NE(a.visited, c.visited);
  // Without a budget the random order visits everything once.
  Synthetic d;
  auto all = d.config(TuneStrategy::kRandom);
  all.budget_s = 0;
  const auto rd = detail::run_search(tile_space(d.spec), d.cands, all, d.eval(), zero_clock());
  EXPECT_EQ(rd.candidates.size(), d.cands.size());
  EXPECT_EQ(rd.candidates[*rd.chosen].tile, (wtconv_tile(0, 0, 2, 2, 256)));
}

TEST(Search, GreedyStopsAtTheBudget) {
  int ticks = 0;
  Synthetic s;
  auto cfg = s.config(TuneStrategy::kGreedy);
  cfg.budget_s = 2;
  const auto out = detail::run_search(tile_space(s.spec), s.cands, cfg, s.eval(), [&] { return double(ticks++); });
  EXPECT_TRUE(out.budget_hit);
  EXPECT_TRUE(out.chosen) << "the default was measured";
}

TEST(Search, FailedCandidatesAreRecordedWithTheirReasonAndSkipped) {
  Synthetic s;
  s.fail_threads = {256};  // the true minimum's thread count
  const auto out = detail::run_search(tile_space(s.spec), s.cands, s.config(TuneStrategy::kExhaustive), s.eval(), zero_clock());
  int failed = 0;
  for (const auto& c : out.candidates)
    if (c.tile.get("threads") == 256) {
      EXPECT_EQ(c.status, CandidateStatus::kCompileFailed);
      EXPECT_EQ(c.reason, "injected failure");
      ++failed;
    }
  EXPECT_GT(failed, 0);
  ASSERT_TRUE(out.chosen);
  EXPECT_NE(out.candidates[*out.chosen].tile.get("threads"), 256);
  EXPECT_EQ(out.candidates[*out.chosen].tile, s.best_valid());
  // Greedy from a failing default still starts from the first candidate that measures.
  Synthetic g;
  g.fail_threads = {g.cands[0].get("threads")};
  const auto og = detail::run_search(tile_space(g.spec), g.cands, g.config(TuneStrategy::kGreedy), g.eval(), zero_clock());
  ASSERT_TRUE(og.chosen);
  EXPECT_EQ(og.candidates.front().status, CandidateStatus::kCompileFailed);
}

TEST(Search, FlatCostKeepsTheDefaultAndRepeats) {
  // Every candidate within 0.5%: ties go to the fixed order, whose first point is the default.
  for (TuneStrategy st : {TuneStrategy::kExhaustive, TuneStrategy::kGreedy, TuneStrategy::kRandom}) {
    Synthetic s;
    detail::EvaluateFn flat = [](const std::vector<Tile>& tiles, int reps) {
      std::vector<CandidateResult> out;
      for (const Tile& t : tiles) {
        CandidateResult r;
        for (int i = 0; i < reps; ++i) r.samples_ms.push_back(1.0 - 0.005 * ((t.get("threads") + t.get("vy") + t.get("planes")) % 2));
        out.push_back(r);
      }
      return out;
    };
    auto cfg = s.config(st);
    const auto a = detail::run_search(tile_space(s.spec), s.cands, cfg, flat, zero_clock());
    const auto b = detail::run_search(tile_space(s.spec), s.cands, cfg, flat, zero_clock());
    ASSERT_TRUE(a.chosen && b.chosen);
    EXPECT_EQ(a.candidates[*a.chosen].tile, s.cands[0]) << to_string(st);
    EXPECT_EQ(a.candidates[*a.chosen].tile, b.candidates[*b.chosen].tile);
  }
}

TEST(Search, ReportsProgress) {
  Synthetic s;
  auto cfg = s.config(TuneStrategy::kExhaustive);
  std::vector<TuneProgress> seen;
  cfg.what = "wtconv_fwd_plane";
  cfg.progress = [&](const TuneProgress& p) { seen.push_back(p); };
  detail::run_search(tile_space(s.spec), s.cands, cfg, s.eval(), zero_clock());
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front().what, "wtconv_fwd_plane");
  EXPECT_EQ(seen.front().total, int(s.cands.size()));
  int max_done = 0;
  for (const auto& p : seen) max_done = std::max(max_done, p.done);
  EXPECT_EQ(max_done, int(s.cands.size()));
  EXPECT_GT(seen.back().best_ms, 0);
}

// ---- the compile step -------------------------------------------------------------------------------

TEST(CompileStep, FailuresBecomeResultsWithReasons) {
  const OpSpec s = wtconv_spec(kWTConvFwdPlane, DType::kF32, 5, 5, true, 90);
  const Shape sh{64, 96, 56, 56, 1};
  const DeviceLimits lim = DeviceLimits::for_arch(90);
  const std::vector<Tile> tiles = {
      wtconv_tile(0, 0, 1, 4, 256),   // ok
      wtconv_tile(0, 0, 1, 2, 256),   // NVRTC fails (injected)
      wtconv_tile(0, 0, 1, 1, 256),   // generate() rejects (injected SpecError)
      wtconv_tile(0, 0, 2, 1, 128),   // some other exception
      wtconv_tile(0, 0, 16, 1, 512),  // rejected for this shape before compiling: 16 planes of 56x56
      wtconv_tile(0, 0, 1, 1, 48),    // rejected: not a whole warp
  };
  std::atomic<int> compiled{0};
  detail::CompileFn fake = [&](const OpSpec& spec, const Tile& t) -> CompiledKernel {
    ++compiled;
    if (t == tiles[1]) throw CompileError("lkjit: error: " + kernel_name(spec, t) + ": NVRTC failed: injected");
    if (t == tiles[2]) throw SpecError("lkjit: error: injected reject");
    if (t == tiles[3]) throw std::runtime_error("injected surprise");
    return CompiledKernel{};
  };
  const auto out = detail::compile_candidates(s, sh, lim, tiles, 4, fake);
  ASSERT_EQ(out.size(), tiles.size());
  EXPECT_EQ(out[0].status, CandidateStatus::kOk);
  EXPECT_EQ(out[1].status, CandidateStatus::kCompileFailed);
  EXPECT_THAT(out[1].reason, HasSubstr("injected"));
  EXPECT_EQ(out[2].status, CandidateStatus::kRejected);
  EXPECT_EQ(out[3].status, CandidateStatus::kError);
  EXPECT_EQ(out[3].reason, "injected surprise");
  EXPECT_EQ(out[4].status, CandidateStatus::kRejected);
  EXPECT_THAT(out[4].reason, AllOf(HasSubstr("p16_v1_w512"), HasSubstr("64x96x56x56"), HasSubstr("shared memory")));
  EXPECT_EQ(out[5].status, CandidateStatus::kRejected);
  EXPECT_THAT(out[5].reason, HasSubstr("threads=48"));
  EXPECT_EQ(compiled.load(), 4) << "rejected tiles never reach the compiler";
}

TEST(CompileStep, ClassifiesByExceptionType) {
  auto st = [](auto e) { return detail::classify(std::make_exception_ptr(e)).first; };
  EXPECT_EQ(st(SpecError("x")), CandidateStatus::kRejected);
  EXPECT_EQ(st(CompileError("x")), CandidateStatus::kCompileFailed);
  EXPECT_EQ(st(DriverError("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")), CandidateStatus::kLaunchFailed);
  EXPECT_EQ(st(CacheError("x")), CandidateStatus::kError);
  EXPECT_EQ(st(std::bad_alloc()), CandidateStatus::kError);
  EXPECT_EQ(detail::classify(std::make_exception_ptr(42)).second, "unknown exception");
}

// Through the real compile_kernel (NVRTC, a private cache): a valid tile compiles, a rejected one is a
// result with its reason.
TEST(CompileStep, RealCompilerThroughPrecompileCandidates) {
  const TempDir tmp("lkjit-tuner-test");
  const std::string dir = tmp.path() + "/cache";
  ScopedEnv cache("LKJIT_CACHE_DIR", dir.c_str());
  ScopedEnv disable("LKJIT_CACHE_DISABLE", nullptr);
  const OpSpec s = wtconv_spec(kWTConvReduce, DType::kF32, 3, 1, true, 90);
  const Shape sh{2, 8, 16, 16, 1};
  const auto out = precompile_candidates(s, sh, DeviceLimits::for_arch(90), {wtconv_tile(0, 0, 0, 0, 128), wtconv_tile(0, 0, 0, 0, 2048)}, 2);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].status, CandidateStatus::kOk) << out[0].reason;
  EXPECT_GT(out[0].compile_s, 0);
  EXPECT_EQ(out[1].status, CandidateStatus::kRejected);
  EXPECT_THAT(out[1].reason, HasSubstr("threads=2048"));
}

// ---- candidate spaces of the WTConv kernels -------------------------------------------------------------

std::vector<std::pair<WTConvTuneProblem, std::string>> anchor_problems() {
  std::vector<std::pair<WTConvTuneProblem, std::string>> v;
  const int64_t rows[][5] = {{8, 64, 256, 256, 3}, {64, 96, 56, 56, 5}, {64, 192, 28, 28, 4}, {64, 384, 14, 14, 3},
                             {64, 768, 7, 7, 2}, {2, 3, 17, 15, 3}};
  // Each in both layouts (NHWC activations of the planes up to 16 wide, 14x14, 7x7 and 17x15, plan the lane
  // kernels), and those three also on the forced lane path.
  for (const auto& r : rows)
    for (bool bwd : {false, true})
      for (DType dt : {DType::kF32, DType::kBF16})
        for (Layout layout : {Layout::kNCHW, Layout::kNHWC})
          for (WTConvPath path : {WTConvPath::kAuto, WTConvPath::kLane}) {
            if (path == WTConvPath::kLane && (layout != Layout::kNHWC || r[3] > 16)) continue;
            WTConvTuneProblem p;
            p.options = WTConvOptions{r[1], 5, int(r[4]), dt, true, 1, 0};
            p.options.layout = layout;
            p.B = r[0], p.H = r[2], p.W = r[3];
            p.backward = bwd;
            p.path = path;
            v.emplace_back(p, p.to_string() + (layout == Layout::kNHWC ? " nhwc" : " nchw") +
                                  (path == WTConvPath::kLane ? " lane" : ""));
          }
  return v;
}

TEST(CandidateSpace, EveryPlannedKernelHasAValidSpaceWithTheDefaultFirst) {
  const DeviceLimits lim = DeviceLimits::for_arch(90);
  std::set<Kernel> seen;
  int auto_lane = 0, forced_lane = 0;  // plans with a lane kernel
  for (const auto& [p, name] : anchor_problems())
    for (const auto& pk : wtconv_plan(p.options, p.shape(), lim, p.backward, p.path)) {
      SCOPED_TRACE(name + " " + pk.spec.to_string() + " on " + pk.shape.to_string());
      if (pk.spec.kernel == kWTConvFwdLane || pk.spec.kernel == kWTConvBwdLane ||
          pk.spec.kernel == kWTConvReduceLane)
        EXPECT_EQ(p.options.layout, Layout::kNHWC) << "NCHW activations planned a lane kernel";
      if (pk.spec.kernel == kWTConvFwdLane || pk.spec.kernel == kWTConvBwdLane)
        ++(p.path == WTConvPath::kLane ? forced_lane : auto_lane);
      const auto c = tune_candidates(pk.spec, pk.shape, lim);
      ASSERT_FALSE(c.empty());
      EXPECT_EQ(c[0], default_tile(pk.spec, pk.shape, lim)) << "the default is not first";
      EXPECT_EQ(c[0], pk.tile) << "the plan's tile is the default";
      std::set<std::string> uniq;
      for (const Tile& t : c) {
        EXPECT_TRUE(uniq.insert(t.to_string()).second) << "duplicate " << t.to_string();
        EXPECT_FALSE(reject_reason(pk.spec, t, lim, &pk.shape)) << t.to_string();
      }
      EXPECT_EQ(c.size(), enumerate(pk.spec, lim, &pk.shape).size());
      seen.insert(pk.spec.kernel);
    }
  // Every kernel but the layout transpose, which the PyTorch layer calls around the plan; the lane
  // kernels only from the NHWC problems.
  EXPECT_EQ(seen.size(), family("wtconv").kernels.size() - 1) << "some WTConv kernel never planned";
  EXPECT_EQ(seen.count(kWTConvTranspose), 0u);
  EXPECT_EQ(seen.count(kWTConvFwdLane), 1u);
  EXPECT_EQ(seen.count(kWTConvBwdLane), 1u);
  EXPECT_EQ(seen.count(kWTConvReduceLane), 1u);
  EXPECT_EQ(auto_lane, 12) << "the NHWC 14x14, 7x7 and 17x15 problems, f32 and bf16, fwd and bwd";
  EXPECT_EQ(forced_lane, 12) << "the same problems forced onto the lane path, fwd and bwd";
}

TEST(CandidateSpace, TunableAndMainKernels) {
  const DeviceLimits lim = DeviceLimits::for_arch(90);
  WTConvTuneProblem plane;
  plane.options = WTConvOptions{96, 5, 5, DType::kF32, true, 1, 0};
  plane.B = 64, plane.H = 56, plane.W = 56;
  auto t = wtconv_tunable(plane, lim);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].spec.kernel, kWTConvFwdPlane);
  EXPECT_EQ(wtconv_main_kernel(wtconv_plan(plane.options, plane.shape(), lim)).kernel, kWTConvFwdPlane);
  plane.backward = true;
  t = wtconv_tunable(plane, lim);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1].spec.kernel, kWTConvReduce);
  WTConvTuneProblem tiled;
  tiled.options = WTConvOptions{64, 5, 3, DType::kF32, true, 1, 0};
  tiled.B = 8, tiled.H = 256, tiled.W = 256;
  t = wtconv_tunable(tiled, lim);
  ASSERT_EQ(t.size(), 4u);  // three levels and the synthesis; no fold
  EXPECT_EQ(t[1].level, 2);
  const auto main = wtconv_main_kernel(wtconv_plan(tiled.options, tiled.shape(), lim));
  EXPECT_EQ(main.kernel, kWTConvFwdSynth);
}

// Tuner::get tunes a lone kernel inside a layer problem that runs it.
TEST(CandidateSpace, EveryPlannedKernelHasALayerProblemThatRunsIt) {
  const DeviceLimits lim = DeviceLimits::for_arch(90);
  int checked = 0;
  for (const auto& [p, name] : anchor_problems())
    for (const auto& pk : wtconv_plan(p.options, p.shape(), lim, p.backward, p.path)) {
      if (pk.spec.kernel == kWTConvFold) continue;
      SCOPED_TRACE(name + " " + pk.spec.to_string() + " on " + pk.shape.to_string());
      const auto [q, sel] = wtconv_problem_for(pk.spec, pk.shape, 0, lim);
      bool found = false;
      for (const auto& e : wtconv_plan(q.options, q.shape(), lim, q.backward, q.path))
        found = found || (e.spec == pk.spec && e.level == sel.level && e.shape.H == pk.shape.H && e.shape.W == pk.shape.W);
      EXPECT_TRUE(found);
      ++checked;
    }
  EXPECT_GT(checked, 20);
  const OpSpec bad = wtconv_spec(kWTConvFwdLevel, DType::kF32, 5, 3, true, 90);
  EXPECT_THAT(spec_error([&] { wtconv_problem_for(bad, Shape{2, 4, 32, 32, 1}, 0, lim); }),
              AllOf(HasSubstr("wtconv_fwd_level"), HasSubstr("L=0")));
}

// ---- `lkjit tune` without a GPU ---------------------------------------------------------------------------

CommandResult run_cli(const std::string& args) {
  const TempDir tmp("lkjit-tune-cli");
  const std::string dir = tmp.path() + "/cache";
  return run_command("env -u LKJIT_TUNE -u LKJIT_CACHE_DISABLE LKJIT_CACHE_DIR=" + shell_quote(dir) +
                     " LKJIT_TUNING_DB=" + shell_quote(dir + "/tuning.json") + " " + shell_quote(LKJIT_CLI_PATH) +
                     " tune " + args + " 2>&1");
}

TEST(TuneCli, ListShowsValidAndRejectedCandidatesWithoutAGpu) {
  const auto r = run_cli("--list --shape 64:96:56:56 --L 5 --arch sm_90");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("wtconv_fwd_plane f32 k=5 L=5 sm_90 on 64x96x56x56"), HasSubstr("valid"),
                              HasSubstr("default"), HasSubstr("rejected"), HasSubstr("shared memory"),
                              HasSubstr("lkjit_wtconv_fwd_plane_f32_k5_L5_p1_v4_w512_sm90"), HasSubstr("axis planes")));
}

TEST(TuneCli, ListOneLevelOfATiledPlan) {
  const auto r = run_cli("--list --shape 8:64:256:256 --L 3 --pass bwd --kernel wtconv_bwd_level:3 --arch sm_90");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("wtconv_bwd_level f32 k=5 L=0 deeper sm_90 level 3 on 8x64x64x64"),
                              Not(HasSubstr("level 1 on")), Not(HasSubstr("wtconv_bwd_synth f32"))));
  // The backward's level 2 reads X too (the first variant, on the level-1 extent).
  const auto r2 = run_cli("--list --shape 8:64:256:256 --L 3 --pass bwd --kernel wtconv_bwd_level:2 --arch sm_90");
  EXPECT_EQ(r2.code, 0) << r2.output;
  EXPECT_THAT(r2.output, HasSubstr("wtconv_bwd_level f32 k=5 L=0 first sm_90 level 2 on 8x64x128x128"));
}

// --nhwc plans the lane kernels where they apply, forward and backward; --path lane forces them, and names
// why where it cannot run the shape.
TEST(TuneCli, NHWCAndTheLanePathListTheLaneKernels) {
  const std::string shape = "--list --shape 64:384:14:14 --L 3 --arch sm_90 ";
  auto r = run_cli(shape + "--nhwc");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("plan: wtconv_fold (not tuned) wtconv_fwd_lane\n"),
                              HasSubstr("wtconv_fwd_lane f32 k=5 L=3 sm_90 on 64x384x14x14: 640 points, 17 valid"),
                              HasSubstr("default p32_t0x14_w64"), HasSubstr("lkjit_wtconv_fwd_lane_f32_k5_L3_t0x14_w32_sm90"),
                              HasSubstr("W=14 exceeds tile_w=12")));
  r = run_cli(shape + "--nhwc --pass bwd");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("plan: wtconv_fold (not tuned) wtconv_bwd_lane wtconv_reduce_lane\n"),
                              HasSubstr("default p32_t0x14_b6_w64"),
                              HasSubstr("lkjit_wtconv_bwd_lane_f32_k5_L3_p32_t0x14_w64_sm90"),
                              HasSubstr("lkjit_wtconv_bwd_lane_f32_k5_L3_p32_t0x14_b6_w64_sm90"),
                              HasSubstr("lkjit_wtconv_bwd_lane_f32_k5_L3_t0x14_w32_sm90"),
                              HasSubstr("lkjit_wtconv_reduce_lane_k5_L3_w512_sm90")));
  // Points no shape could run make one line (with an example), not one each.
  EXPECT_THAT(r.output, AllOf(HasSubstr("528 more rejected on sm_90 whatever the shape, e.g. p16_t0x2_w64: planes=16 "
                                        "with threads=64"),
                              Not(HasSubstr("planes=32 with threads=32")), HasSubstr("W=14 exceeds tile_w=12")));
  r = run_cli(shape + "--path lane --pass bwd");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("plan: wtconv_fold (not tuned) wtconv_bwd_lane wtconv_reduce_lane\n"),
                              HasSubstr("lkjit_wtconv_bwd_lane_f32_k5_L3_p32_t0x14_w64_sm90")));
  r = run_cli(shape);  // NCHW: the plane kernel
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("plan: wtconv_fold (not tuned) wtconv_fwd_plane\n"), Not(HasSubstr("_lane"))));
  r = run_cli("--list --shape 64:384:28:28 --L 3 --arch sm_90 --nhwc");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("plan: wtconv_fold (not tuned) wtconv_fwd_plane\n"), Not(HasSubstr("_lane"))));
  r = run_cli("--list --shape 64:384:28:28 --L 3 --arch sm_90 --path lane");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit: error: wtconv: the lane path cannot run 64x384x28x28 with k=5 L=3: W=28 "
                                  "exceeds tile_w=16"));
}

TEST(TuneCli, BadValuesAreNamed) {
  auto r = run_cli("--list --kernel bogus");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("'bogus'"));
  r = run_cli("--list --strategy annealing");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("'annealing'"));
  r = run_cli("--list --shape 1:2:3");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("B:C:H:W"));
}

TEST(TuneCli, AKernelThePlanDoesNotTuneIsAnError) {
  // Each would select nothing and tune nothing: exit 2 naming the request and the plan's tunable kernels.
  const std::string plane = "--list --shape 64:96:56:56 --L 5 --arch sm_90 ";
  for (const std::string& kernel : {"wtconv_fwd_level:2", "wtconv_fwd_level:9", "wtconv_bwd_plane", "wtconv_fold",
                                    "main,wtconv_fwd_synth"}) {
    const auto r = run_cli(plane + "--kernel " + kernel);
    EXPECT_EQ(r.code, 2) << kernel << ": " << r.output;
    const std::string bad = kernel.substr(kernel.find(',') + 1);
    EXPECT_THAT(r.output, AllOf(HasSubstr("--kernel '" + bad + "' is not a tunable kernel of this plan"),
                                HasSubstr("supported: all, main, wtconv_fwd_plane\n"), Not(HasSubstr("points,"))))
        << kernel;
  }
  // On a tiled plan the levels are listed; a level beyond L or below 1 selects nothing either.
  for (const std::string& kernel : {"wtconv_fwd_level:9", "wtconv_fwd_level:-1", "wtconv_fwd_level:0"}) {
    const auto r = run_cli("--list --shape 8:64:256:256 --L 3 --path tiled --arch sm_90 --kernel " + kernel);
    EXPECT_EQ(r.code, 2) << kernel << ": " << r.output;
    EXPECT_THAT(r.output, AllOf(HasSubstr("'" + kernel + "' is not a tunable kernel"),
                                HasSubstr("wtconv_fwd_level:1, wtconv_fwd_level:2, wtconv_fwd_level:3")))
        << kernel;
  }
  // An empty level is malformed, not "every level".
  const auto r = run_cli("--list --shape 8:64:256:256 --L 3 --path tiled --arch sm_90 --kernel wtconv_fwd_level:");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--kernel 'wtconv_fwd_level:' is not <kernel>[:level]"));
}

TEST(TuneCli, OutOfRangeValuesExitWith2) {
  // Well-formed values out of range or unknown are bad input (2); malformed ones usage errors (1).
  const std::vector<std::tuple<std::string, int, std::string>> cases = {
      {"--shape 0:96:56:56", 2, "--shape: B=0 in '0:96:56:56' is out of range; supported: >= 1"},
      {"--shape 8:96:-5:56", 2, "--shape: H=-5 in '8:96:-5:56' is out of range"},
      {"--shape 8:x:56:56", 1, "--shape: 'x' in '8:x:56:56' is not a decimal integer"},
      {"--shape 8:99999999999999999999:56:56", 2,
       "--shape: C=99999999999999999999 in '8:99999999999999999999:56:56' is out of range; supported: [1, 2^24]"},
      {"--pass sideways", 2, "--pass 'sideways' is unknown; supported: fwd, bwd"},
      {"--path diagonal", 2, "--path 'diagonal' is unknown; supported: auto, plane, tiled, lane"},
      {"--budget -1", 2, "tune: --budget=-1 is out of range; supported: >= 0"},
      {"--reps 0", 2, "--reps=0 is out of range; supported: [1, 2147483647]"},
      {"--top 99999999999", 2, "--top=99999999999 is out of range; supported: [1, 2147483647]"},
      {"-L 9", 2, "-L=9 is out of range; supported: [0, 8]"},
      {"-k 33", 2, "-k=33 is out of range; supported: odd k in [1, 31]"},
      {"-j 99999999999", 2, "-j=99999999999 is out of range; supported: [0, 2147483647]"},
      {"--seed 4294967296", 2, "--seed=4294967296 is out of range; supported: [0, 4294967295]"},
      {"--min-noise -0.5", 2, "tune: --min-noise=-0.5 is out of range; supported: >= 0"},
      {"--progress sometimes", 2, "--progress 'sometimes' is unknown; supported: auto, always, never"},
      // --list measures nothing: a report file it would leave unwritten is refused.
      {"--csv out.csv", 1, "tune: --csv writes measured results, and --list measures nothing"},
      {"--plot out.svg", 1, "tune: --plot writes measured results"},
      // An empty path names no file: refused (--list took an empty --csv for none given).
      {"--csv ''", 1, "--csv is empty; supported: a file path"},
      {"--db ''", 1, "--db is empty; supported: a file path"},
  };
  for (const auto& [args, code, msg] : cases) {
    const auto r = run_cli("--list --arch sm_90 " + args);
    EXPECT_EQ(r.code, code) << args << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("lkjit: error: " + msg)) << args;
  }
  // The message names only the bad option.
  auto r = run_cli("--list --arch sm_90 --budget -1");
  EXPECT_THAT(r.output, AllOf(Not(HasSubstr("--reps")), Not(HasSubstr("--top")), Not(HasSubstr("--warmup"))));
  // An empty report path is refused before anything is tuned, GPU or not.
  r = run_cli("--shape 2:8:16:16 --L 2 --json ''");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit: error: --json is empty; supported: a file path"));
}

TEST(TuneCli, TuningWithoutAGpuSaysItNeedsOne) {
  if (gpu_available()) GTEST_SKIP() << "a GPU is present: `lkjit tune` would tune";
  const auto r = run_cli("--shape 2:8:16:16 --L 2");
  EXPECT_EQ(r.code, 4) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("tuning needs a GPU"), HasSubstr("--list")));
}

}  // namespace
