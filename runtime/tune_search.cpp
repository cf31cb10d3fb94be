// The tuner's search strategies over one kernel's candidates. Pure: the evaluator measures, the clock
// says how much of the budget is spent.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <random>
#include <set>

#include "runtime/tune_search.h"

namespace lkjit::detail {
namespace {

bool measured_ok(const std::optional<CandidateResult>& r) { return r && r->status == CandidateStatus::kOk; }

// True when a and b agree on every axis of the space except `axis`.
bool same_except(const TileSpace& space, const Tile& a, const Tile& b, const std::string& axis) {
  for (const auto& ax : space.axes)
    if (ax.name != axis && tile_axis(a, ax.name) != tile_axis(b, ax.name)) return false;
  return true;
}

// Greedy on a large space: descents at most (the default's, then restarts), and the restart sample.
constexpr int kMaxStarts = 8;
constexpr int kSeedSample = 8;

class Search {
 public:
  Search(const TileSpace& space, const std::vector<Tile>& cands, const SearchConfig& cfg, const EvaluateFn& eval,
         const ClockFn& clock)
      : space_(space), cands_(cands), cfg_(cfg), eval_(eval), clock_(clock), res_(cands.size()) {}

  SearchOutcome run() {
    switch (cfg_.strategy) {
      case TuneStrategy::kExhaustive: exhaustive(); break;
      case TuneStrategy::kRandom: random(); break;
      case TuneStrategy::kGreedy: greedy(); break;
    }
    return finish();
  }

 private:
  int n() const { return static_cast<int>(cands_.size()); }
  bool over_budget() const { return cfg_.budget_s > 0 && clock_() >= cfg_.budget_s; }

  void evaluate(const std::vector<int>& idx) {
    if (idx.empty()) return;
    std::vector<Tile> tiles;
    for (int i : idx) tiles.push_back(cands_[i]);
    auto out = eval_(tiles, cfg_.reps);
    assert(out.size() == tiles.size());
    for (size_t k = 0; k < idx.size() && k < out.size(); ++k) {
      CandidateResult r = std::move(out[k]);
      r.tile = cands_[idx[k]];
      r.order = idx[k];
      r.summary = r.status == CandidateStatus::kOk ? summarize(r.samples_ms) : Summary{};
      if (r.status == CandidateStatus::kOk && r.summary.n == 0) {
        r.status = CandidateStatus::kError;
        r.reason = "no timing samples";
      }
      res_[idx[k]] = std::move(r);
      ++done_;
    }
    report(cfg_.what);
  }

  // In chunks of cfg.batch; with `budgeted`, stops (and says so) once the budget is spent, but always
  // measures the first chunk so there is a result.
  void evaluate_all(const std::vector<int>& idx, bool budgeted) {
    const size_t b = std::max(1, cfg_.batch);
    for (size_t s = 0; s < idx.size(); s += b) {
      if (budgeted && done_ > 0 && over_budget()) {
        budget_hit_ = true;
        return;
      }
      evaluate(std::vector<int>(idx.begin() + s, idx.begin() + std::min(idx.size(), s + b)));
    }
  }

  void report(const std::string& what) {
    if (!cfg_.progress) return;
    TuneProgress p;
    p.what = what;
    p.done = done_;
    p.total = total_;
    p.elapsed_s = clock_();
    p.budget_s = cfg_.strategy == TuneStrategy::kExhaustive ? 0 : cfg_.budget_s;
    for (const auto& r : res_)
      if (measured_ok(r) && (p.best_ms == 0 || r->summary.median_ms < p.best_ms)) p.best_ms = r->summary.median_ms;
    cfg_.progress(p);
  }

  void exhaustive() {
    total_ = n();
    std::vector<int> all(n());
    for (int i = 0; i < n(); ++i) all[i] = i;
    evaluate_all(all, false);
  }

  // Every index, the default first, then a seeded Fisher-Yates shuffle of the rest with the engine's
  // raw output (std::shuffle's algorithm is implementation-defined; this order is the same on every
  // platform).
  std::vector<int> shuffled_order() const {
    std::vector<int> order(n());
    for (int i = 0; i < n(); ++i) order[i] = i;
    std::mt19937_64 rng(cfg_.seed);
    for (int i = n() - 1; i > 1; --i) std::swap(order[i], order[1 + static_cast<int>(rng() % uint64_t(i))]);
    return order;
  }

  void random() {
    total_ = n();
    evaluate_all(shuffled_order(), true);
  }

  // The select_best choice among the measured ones of idx, or -1.
  int best_of(const std::vector<int>& idx) const {
    std::vector<CandidateResult> ok;
    for (int i : idx)
      if (measured_ok(res_[i])) ok.push_back(*res_[i]);
    const auto pick = select_best(ok, cfg_.min_noise);
    return pick ? ok[*pick].order : -1;
  }

  void greedy() {
    // A small space is measured whole: a descent stuck in a local optimum costs more than the sweep.
    if (n() <= cfg_.greedy_all_max) {
      random();
      return;
    }
    const int start = first_ok();
    if (start < 0) return;
    const auto order = shuffled_order();
    size_t next = 1;  // order[0] is the default
    // Multi-start: the best tiles can differ from the default on several axes at once, beyond the
    // descent's reach, so further descents start from the best of fresh seeded samples.
    for (int s = 0, from = start; s < kMaxStarts && from >= 0; ++s) {
      if (!descend(from)) return;
      from = next_seed(order, next);
    }
  }

  // The default, or the first candidate after it that measures; -1 if none does within the budget.
  int first_ok() {
    for (int i = 0; i < n(); ++i) {
      if (i > 0 && over_budget()) {
        budget_hit_ = true;
        return -1;
      }
      evaluate({i});
      if (measured_ok(res_[i])) return i;
    }
    return -1;
  }

  // The axis lines through c: the candidates that differ from c on at most one axis (c included).
  std::vector<int> cross(int c) const {
    std::vector<int> out;
    for (int i = 0; i < n(); ++i)
      for (const auto& ax : space_.axes)
        if (ax.values.size() >= 2 && same_except(space_, cands_[i], cands_[c], ax.name)) {
          out.push_back(i);
          break;
        }
    return out;
  }

  // Coordinate descent from `cur`: measure every axis line through it in one batch (its candidates
  // compile in parallel) and move to the best point on them, until none is better. A point some
  // descent already stood on ends it (the way on from there is known), which also bounds the steps.
  // false when the budget ran out.
  bool descend(int cur) {
    while (visited_.insert(cur).second) {
      const auto line = cross(cur);
      std::vector<int> todo;
      for (int i : line)
        if (!res_[i]) todo.push_back(i);
      if (!todo.empty()) {
        if (over_budget()) {
          budget_hit_ = true;
          return false;
        }
        evaluate_all(todo, false);
      }
      const int pick = best_of(line);
      if (pick < 0 || pick == cur) return true;
      cur = pick;
    }
    return true;
  }

  // The next start: the best of the next unmeasured candidates in the seeded order (at least
  // kSeedSample, a whole evaluator batch if larger). -1 once everything is measured or the budget is
  // spent.
  int next_seed(const std::vector<int>& order, size_t& next) {
    const auto want = static_cast<size_t>(std::max(kSeedSample, cfg_.batch));
    for (;;) {
      std::vector<int> sample;
      for (; next < order.size() && sample.size() < want; ++next)
        if (!res_[order[next]]) sample.push_back(order[next]);
      if (sample.empty()) return -1;
      if (over_budget()) {
        budget_hit_ = true;
        return -1;
      }
      evaluate_all(sample, false);
      if (const int b = best_of(sample); b >= 0) return b;
    }
  }

  SearchOutcome finish() {
    std::vector<int> ok;
    for (int i = 0; i < n(); ++i)
      if (measured_ok(res_[i])) ok.push_back(i);
    std::stable_sort(ok.begin(), ok.end(), [&](int a, int b) {
      return std::make_pair(res_[a]->summary.median_ms, a) < std::make_pair(res_[b]->summary.median_ms, b);
    });
    std::vector<int> fin(ok.begin(), ok.begin() + std::min<size_t>(ok.size(), size_t(std::max(cfg_.top, 1))));
    if (measured_ok(res_[0]) && std::find(fin.begin(), fin.end(), 0) == fin.end()) fin.push_back(0);
    std::sort(fin.begin(), fin.end());
    const bool remeasure = fin.size() >= 2 && cfg_.final_reps > 0;
    if (remeasure) {
      // Interleaved rounds: a clock or thermal drift during re-measurement affects every finalist alike.
      constexpr int kRounds = 3;
      const int per = std::max(1, (cfg_.final_reps + kRounds - 1) / kRounds);
      std::vector<std::vector<double>> samples(fin.size());
      std::vector<Tile> tiles;
      for (int i : fin) tiles.push_back(cands_[i]);
      for (int r = 0; r < kRounds; ++r) {
        auto out = eval_(tiles, per);
        for (size_t k = 0; k < fin.size() && k < out.size(); ++k) {
          if (out[k].status != CandidateStatus::kOk) {
            res_[fin[k]]->status = out[k].status;
            res_[fin[k]]->reason = "re-measurement: " + out[k].reason;
          }
          samples[k].insert(samples[k].end(), out[k].samples_ms.begin(), out[k].samples_ms.end());
        }
        report(cfg_.what + " (finalists)");
      }
      for (size_t k = 0; k < fin.size(); ++k) {
        auto& r = *res_[fin[k]];
        r.finalist = true;
        if (r.status != CandidateStatus::kOk) continue;
        r.samples_ms = samples[k];
        r.summary = summarize(samples[k]);
      }
    }
    SearchOutcome out;
    out.budget_hit = budget_hit_;
    std::vector<int> pool = remeasure ? fin : ok;
    for (int i = 0; i < n(); ++i)
      if (res_[i]) out.candidates.push_back(*res_[i]);
    std::vector<CandidateResult> sel;
    for (int i : pool) sel.push_back(*res_[i]);
    if (auto p = select_best(sel, cfg_.min_noise)) {
      const int order = sel[*p].order;
      for (size_t k = 0; k < out.candidates.size(); ++k)
        if (out.candidates[k].order == order) out.chosen = k;
    }
    return out;
  }

  const TileSpace& space_;
  const std::vector<Tile>& cands_;
  const SearchConfig& cfg_;
  const EvaluateFn& eval_;
  const ClockFn& clock_;
  std::vector<std::optional<CandidateResult>> res_;
  std::set<int> visited_;  // points a greedy descent stood on
  int done_ = 0, total_ = 0;
  bool budget_hit_ = false;
};

}  // namespace

std::vector<Tile> candidate_order(const OpSpec& spec, const Shape& shape, const DeviceLimits& limits) {
  const auto all = enumerate(spec, limits, &shape);
  const Tile def = default_tile(spec, shape, limits);
  std::vector<Tile> out;
  // The default comes first wherever it runs the shape, also when it is not a point of the space (a family's
  // default may fit the map exactly, e.g. a depthwise wgrad tile of 56 rows on a 56x56 map): the search treats
  // index 0 as the default, and a tuner that never measured it could record a slower tile.
  if (std::find(all.begin(), all.end(), def) != all.end() || !reject_reason(spec, def, limits, &shape)) out.push_back(def);
  for (const Tile& t : all)
    if (t != def) out.push_back(t);
  return out;
}

SearchOutcome run_search(const TileSpace& space, const std::vector<Tile>& candidates, const SearchConfig& cfg,
                         const EvaluateFn& eval, const ClockFn& clock) {
  if (candidates.empty()) return {};
  return Search(space, candidates, cfg, eval, clock).run();
}

}  // namespace lkjit::detail
