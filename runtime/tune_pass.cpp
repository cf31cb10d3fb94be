// The pass tuner: tunes a plan's entries one kernel at a time, each candidate timed as a whole pass of
// the family's harness (lkjit/tuning.h, tune_pass), and records the decisions.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <tuple>

#include "lkjit/error.h"
#include "lkjit/tuning.h"
#include "runtime/tune_pass.h"
#include "runtime/tune_search.h"
#include "runtime/tuner_internal.h"

namespace lkjit {
namespace {

std::string entry_label(const PlannedKernel& pk) {
  return pk.level > 0 ? fmt::format("{} l={}", to_string(pk.spec.kernel), pk.level) : to_string(pk.spec.kernel);
}

bool matches(const KernelSelector& s, const PlannedKernel& pk) {
  return s.kernel == pk.spec.kernel && (s.level < 0 || s.level == pk.level);
}

// Why the pass with `candidate`'s tiles disagrees with the one with `reference`'s (PassHarness::check_outputs),
// or nullopt. A check that throws counts as a disagreement; a device it leaves unusable is a DriverError.
std::optional<std::string> check_winner(PassHarness& h, const std::vector<PlannedKernel>& reference,
                                        const std::vector<PlannedKernel>& candidate, const std::string& what,
                                        const detail::PassDeviceFns& fns) {
  try {
    return h.check_outputs(reference, candidate);
  } catch (...) {
    const auto why = detail::classify(std::current_exception()).second;
    try {
      fns.synchronize();
    } catch (const DriverError& e) {
      throw DriverError(fmt::format("lkjit: error: tune: the device is unusable after checking {} ({}); {}", what, why,
                                    e.what()));
    }
    return "the check failed: " + why;
  }
}

}  // namespace

std::vector<PlannedKernel> tunable(const std::vector<PlannedKernel>& plan, const DeviceLimits& limits) {
  std::vector<PlannedKernel> out;
  for (const auto& pk : plan)
    if (!pk.fixed && detail::candidate_order(pk.spec, pk.shape, limits).size() > 1) out.push_back(pk);
  return out;
}

namespace detail {

PassDeviceFns device_fns() {
  PassDeviceFns f;
  f.compile = compile_kernel;
  f.resources = [](const CompiledKernel& ck, int device, CandidateResult* r) {
    const LoadedKernel& lk = load_kernel(ck, device);
    r->regs = lk.regs;
    r->spill_bytes = lk.spill_bytes;
    r->smem_bytes = lk.static_smem;
  };
  f.synchronize = [] { lkjit::synchronize(); };
  return f;
}

}  // namespace detail

TuneReport tune_pass(PassHarness& h, const std::vector<KernelSelector>& which, const TuneOptions& o) {
  return detail::tune_pass(h, which, o, detail::device_fns());
}

TuneReport detail::tune_pass(PassHarness& h, const std::vector<KernelSelector>& which, const TuneOptions& o,
                             const PassDeviceFns& fns) {
  const auto t0 = std::chrono::steady_clock::now();
  auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  TuneReport rep;
  rep.problem = h.info();
  rep.device = h.device();
  const DeviceLimits& lim = rep.device.limits;
  const std::vector<PlannedKernel> defaults = h.plan();
  std::vector<PlannedKernel> current = defaults;
  rep.traffic_bytes = h.traffic_bytes();

  for (const auto& s : which)
    if (std::none_of(defaults.begin(), defaults.end(), [&](const PlannedKernel& pk) { return matches(s, pk); })) {
      std::string have;
      for (const auto& pk : defaults) have += (have.empty() ? "" : ", ") + entry_label(pk);
      throw SpecError(fmt::format("lkjit: error: tune: {}{} is not in the plan of {}; the plan runs: {}", to_string(s.kernel),
                                  s.level >= 0 ? fmt::format(" level {}", s.level) : "", h.info().text, have));
    }

  const double budget = detail::resolve_budget(o.budget_s);
  for (size_t i = 0; i < defaults.size(); ++i) {
    const PlannedKernel& pk = defaults[i];
    if (pk.fixed) continue;
    if (!which.empty() && std::none_of(which.begin(), which.end(), [&](const KernelSelector& s) { return matches(s, pk); }))
      continue;
    const auto cands = detail::candidate_order(pk.spec, pk.shape, lim);
    if (cands.size() < 2) continue;  // nothing to choose

    KernelTuneResult kr;
    kr.spec = pk.spec;
    kr.shape = pk.shape;
    kr.level = pk.level;
    kr.default_tile = pk.tile;
    kr.space_size = cands.size();
    kr.strategy = o.strategy;
    const KernelSelector entry{pk.spec.kernel, pk.level};
    const std::string label = entry_label(pk);

    detail::EvaluateFn eval = [&](const std::vector<Tile>& tiles, int reps) {
      const auto comp = detail::compile_candidates(pk.spec, pk.shape, lim, tiles, o.jobs, fns.compile);
      std::vector<CandidateResult> out(tiles.size());
      for (size_t k = 0; k < tiles.size(); ++k) {
        CandidateResult& r = out[k];
        r.tile = tiles[k];
        r.status = comp[k].status;
        r.reason = comp[k].reason;
        r.compile_s = comp[k].seconds;
        if (r.status != CandidateStatus::kOk) continue;
        try {
          h.set_tile(entry, tiles[k]);
          h.prepare();
          fns.resources(fns.compile(pk.spec, tiles[k]), rep.device.ordinal, &r);
          r.smem_bytes = std::max(r.smem_bytes, 0) + static_cast<int>(launch_geometry(pk.spec, tiles[k], pk.shape).smem_bytes);
          r.samples_ms = h.time(o.warmup, reps);
        } catch (...) {
          std::tie(r.status, r.reason) = detail::classify(std::current_exception());
          r.samples_ms.clear();
          // A launch error (too many resources) leaves the context usable; a fault does not.
          try {
            fns.synchronize();
          } catch (const DriverError& e) {
            throw DriverError(fmt::format("lkjit: error: tune: the device is unusable after {} {} failed ({}); {}",
                                          label, tiles[k].to_string(), r.reason, e.what()));
          }
        }
      }
      h.set_tile(entry, current[i].tile);
      return out;
    };
    detail::SearchConfig cfg;
    cfg.strategy = o.strategy;
    cfg.budget_s = budget;
    cfg.top = o.top;
    cfg.reps = std::max(1, o.reps);
    cfg.final_reps = o.final_reps;
    cfg.min_noise = o.min_noise;
    cfg.seed = o.seed;
    cfg.batch = detail::resolve_jobs(o.jobs);
    cfg.what = label;
    cfg.progress = o.progress;
    const auto ks = std::chrono::steady_clock::now();
    const auto res = detail::run_search(tile_space(pk.spec), cands, cfg, eval, [&] { return since(ks); });
    kr.candidates = res.candidates;
    kr.budget_hit = res.budget_hit;
    kr.seconds = since(ks);
    for (const auto& c : kr.candidates)
      if (c.tile == kr.default_tile && c.status == CandidateStatus::kOk) kr.default_ms = c.summary.median_ms;
    if (res.chosen) {
      const Tile& win = kr.candidates[*res.chosen].tile;
      std::vector<PlannedKernel> trial = current;
      trial[i].tile = win;
      // A faster tile is worth nothing if it computes something else: check it against the defaults first.
      const auto bad = win == kr.default_tile
                           ? std::nullopt
                           : check_winner(h, defaults, trial, label + " " + win.to_string(), fns);
      if (bad) {
        kr.rejected = win;
        kr.check_failure = fmt::format("{} {} disagrees with the default tiles' output, so the default {} is kept: {}",
                                       label, win.to_string(), kr.default_tile.to_string(), *bad);
        kr.chosen = kr.default_tile;
        kr.best_ms = kr.default_ms;
      } else {
        kr.chosen = win;
        kr.best_ms = kr.candidates[*res.chosen].summary.median_ms;
        current[i].tile = kr.chosen;
        current[i].tier = LookupTier::kTuned;
      }
      h.set_tiles(current);
    }
    rep.kernels.push_back(std::move(kr));
  }

  // The whole pass with every default vs every chosen tile, interleaved like the finalists.
  if (!rep.kernels.empty() && o.final_reps > 0) {
    const int per = std::max(1, (o.final_reps + 2) / 3);
    std::vector<double> d, t;
    try {
      for (int r = 0; r < 3; ++r) {
        h.set_tiles(defaults);
        h.prepare();
        const auto a = h.time(o.warmup, per);
        d.insert(d.end(), a.begin(), a.end());
        h.set_tiles(current);
        h.prepare();
        const auto b = h.time(o.warmup, per);
        t.insert(t.end(), b.begin(), b.end());
      }
      rep.default_pass = summarize(d);
      rep.tuned_pass = summarize(t);
    } catch (const DriverError&) {
      fns.synchronize();  // a launch error of a default tile: leave the comparison empty
    } catch (const Error&) {
    }
  }
  rep.plan = current;

  // A rejected winner is not a decision: nothing is recorded for its entry.
  std::vector<KernelTuneResult> decided;
  for (const auto& kr : rep.kernels)
    if (kr.check_failure.empty()) decided.push_back(kr);
  if (o.save && !rep.kernels.empty()) {
    rep.db_path = o.db_path.empty() ? tuning_db_path() : o.db_path;
    try {
      if (!decided.empty()) detail::record_decisions(rep.db_path, device_class(rep.device), decided);
    } catch (const Error& e) {
      rep.save_error = e.what();
    }
  }
  rep.seconds = since(t0);
  return rep;
}

}  // namespace lkjit
