// Internal to the tuner: the search over one kernel's candidates (pure: measurements come from an
// injected evaluator and time from an injected clock, so every strategy is testable on a CPU), and
// the compile step that turns compile/reject failures into recorded results.
#pragma once
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lkjit/runtime.h"
#include "lkjit/tuning.h"

namespace lkjit::detail {

// The candidates of a kernel for a shape in the fixed order: the default first (if it runs the shape, whether
// or not it is a point of the space), then the rest of enumerate(spec, limits, &shape).
std::vector<Tile> candidate_order(const OpSpec& spec, const Shape& shape, const DeviceLimits& limits);

// Measures tiles: one result per tile (same order) with status, reason and `reps` samples if ok.
using EvaluateFn = std::function<std::vector<CandidateResult>(const std::vector<Tile>& tiles, int reps)>;
// Seconds since the search started.
using ClockFn = std::function<double()>;

struct SearchConfig {
  TuneStrategy strategy = TuneStrategy::kGreedy;
  double budget_s = 10;  // random/greedy: no new batch after this
  int top = 4, reps = 5, final_reps = 15;
  double min_noise = 0.02;
  uint64_t seed = 1;     // random's order, greedy's restart samples
  int greedy_all_max = kGreedyMeasureAllMax;  // greedy measures every candidate of a space this small
  int batch = 8;         // candidates per evaluator call (compiled in parallel there)
  std::string what;      // progress label
  std::function<void(const TuneProgress&)> progress;
};

struct SearchOutcome {
  std::vector<CandidateResult> candidates;  // every evaluated one, by order
  std::optional<size_t> chosen;             // index into candidates
  bool budget_hit = false;
};

// Runs the strategy over `candidates` (fixed order, index = order), re-measures the top few plus the
// default in interleaved rounds, and selects with select_best.
SearchOutcome run_search(const TileSpace& space, const std::vector<Tile>& candidates, const SearchConfig& cfg,
                         const EvaluateFn& eval, const ClockFn& clock);

// ---- compile step ---------------------------------------------------------------------------------
using CompileFn = std::function<CompiledKernel(const OpSpec&, const Tile&)>;

struct CompileOutcome {
  CandidateStatus status = CandidateStatus::kOk;
  std::string reason;
  double seconds = 0;
};

// reject_reason for the actual shape first (kRejected, reason names the shape), then `compile` on up
// to `jobs` threads (0: hardware threads). Exceptions become statuses (classify); none escapes.
std::vector<CompileOutcome> compile_candidates(const OpSpec& spec, const Shape& shape, const DeviceLimits& limits,
                                               const std::vector<Tile>& tiles, int jobs,
                                               const CompileFn& compile = compile_kernel);

// SpecError -> kRejected, CompileError -> kCompileFailed, DriverError -> kLaunchFailed, anything else
// -> kError; the reason is the message.
std::pair<CandidateStatus, std::string> classify(std::exception_ptr e);

int resolve_jobs(int jobs);  // 0 -> hardware threads (at least 1)

}  // namespace lkjit::detail
