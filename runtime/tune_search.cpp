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

  void random() {
    total_ = n();
    std::vector<int> order(n());
    for (int i = 0; i < n(); ++i) order[i] = i;
    // Fisher-Yates over everything after the default, with the engine's raw output (std::shuffle's
    // algorithm is implementation-defined; this order is the same on every platform).
    std::mt19937_64 rng(cfg_.seed);
    for (int i = n() - 1; i > 1; --i) std::swap(order[i], order[1 + static_cast<int>(rng() % uint64_t(i))]);
    evaluate_all(order, true);
  }

  void greedy() {
    // Start at the default (order 0), or the first candidate that measures.
    int cur = -1;
    for (int i = 0; i < n() && cur < 0; ++i) {
      if (i > 0 && over_budget()) {
        budget_hit_ = true;
        return;
      }
      evaluate({i});
      if (measured_ok(res_[i])) cur = i;
    }
    if (cur < 0) return;
    std::set<int> visited{cur};
    // Coordinate descent: along each axis, move to the best point of the line through `cur`. A fixed
    // sweep cap and a revisit stop guarantee termination even when ties walk within the noise.
    for (int sweep = 0; sweep < 8; ++sweep) {
      bool moved = false;
      for (const auto& ax : space_.axes) {
        if (ax.values.size() < 2) continue;
        std::vector<int> line, todo;
        for (int i = 0; i < n(); ++i)
          if (same_except(space_, cands_[i], cands_[cur], ax.name)) {
            line.push_back(i);
            if (!res_[i]) todo.push_back(i);
          }
        if (!todo.empty()) {
          if (over_budget()) {
            budget_hit_ = true;
            return;
          }
          evaluate_all(todo, false);
        }
        std::vector<CandidateResult> on_line;
        for (int i : line)
          if (measured_ok(res_[i])) on_line.push_back(*res_[i]);
        const auto pick = select_best(on_line, cfg_.min_noise);
        if (pick && on_line[*pick].order != cur) {
          cur = on_line[*pick].order;
          moved = true;
          if (!visited.insert(cur).second) return;
        }
      }
      if (!moved) return;
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
  int done_ = 0, total_ = 0;
  bool budget_hit_ = false;
};

}  // namespace

std::vector<Tile> candidate_order(const OpSpec& spec, const Shape& shape, const DeviceLimits& limits) {
  const auto all = enumerate(spec, limits, &shape);
  const Tile def = default_tile(spec, shape, limits);
  std::vector<Tile> out;
  if (std::find(all.begin(), all.end(), def) != all.end()) out.push_back(def);
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
