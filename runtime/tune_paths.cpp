// Path decisions (lkjit/tuning.h, "paths"): which of a family's kernel sets runs a pass, looked up through the
// tuning database's tiers like a tile, or measured: every path's tiles tuned, the tuned passes timed against
// each other in interleaved rounds, a faster path checked against the heuristic's output before it is kept.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "lkjit/error.h"
#include "lkjit/tuning.h"
#include "runtime/remote_tier.h"
#include "runtime/tune_pass.h"
#include "runtime/tuner_internal.h"

namespace lkjit {
namespace {

constexpr const char* kAxis = "path";

void require_options(const PassPaths& p) {
  if (p.options.empty()) throw SpecError(fmt::format("lkjit: error: tune: {} has no path that runs it", p.key));
}

using detail::option_of;

std::string record_text(const cache::TuningRecord& r, const char* what) {
  return fmt::format("{} of {} (sm_{}, {} SMs) for {}x{}x{}x{}", what, r.device, r.arch, r.sm_count, r.B, r.C, r.H, r.W);
}

}  // namespace

const PathOption* detail::option_of(const PassPaths& p, const cache::TuningRecord& r) {
  if (r.tile.size() != 1 || r.tile.count(kAxis) == 0) return nullptr;
  const int id = r.tile.at(kAxis);
  for (const auto& o : p.options)
    if (o.id == id) return &o;
  return nullptr;
}

std::optional<std::string> PassHarness::check_against(PassHarness&, const std::vector<PlannedKernel>&,
                                                      const std::vector<PlannedKernel>&) {
  throw SpecError(fmt::format("lkjit: error: tune: the {} harness cannot compare paths", info().op));
}

PathChoice lookup_path(const PassPaths& p, const DeviceClass& dev, const TuneOptions& o) {
  require_options(p);
  PathChoice c{p.options.front(), LookupTier::kDefault, "heuristic"};
  if (resolve_tune_mode(o.mode, TuneMode::kCached) == TuneMode::kOff) return c;
  const auto db = detail::usable_db(o.db_path.empty() ? tuning_db_path() : o.db_path);
  if (!db) {
    c.detail = "heuristic (database unreadable)";
    return c;
  }
  const cache::TuningQuery q = detail::query_of(p.key, p.shape, dev);
  const auto matches = db->lookup(q);
  for (const auto& m : matches) {
    const auto& r = db->records()[m.index];
    // Only the query's own bucket: which path wins moves with the map size (a tensor-core tile that pays on 56x56
    // is 81 % idle on 7x7), and unlike a tile a path cannot be re-validated for another shape.
    if (r.bucket != q.bucket) continue;
    if (const PathOption* opt = option_of(p, r)) {
      c = {*opt, detail::tier_of(m.tier), record_text(r, "record")};
      if (c.tier == LookupTier::kExact) return c;
      break;
    }
  }
  if (auto r = rt::remote_decision(q))
    if (const PathOption* opt = option_of(p, *r)) return {*opt, LookupTier::kExact, record_text(*r, "remote decision")};
  if (c.tier == LookupTier::kDefault && !matches.empty())
    c.detail = fmt::format("heuristic ({} record(s) of the key, none for this shape bucket naming a path that runs here)",
                           matches.size());
  return c;
}

PathTuneReport tune_paths(const PassPaths& p, const TuneOptions& o) { return detail::tune_paths(p, o, detail::device_fns()); }

PathTuneReport detail::tune_paths(const PassPaths& p, const TuneOptions& o, const PassDeviceFns& fns) {
  require_options(p);
  if (!p.harness) throw SpecError(fmt::format("lkjit: error: tune: {} has no pass harness to time its paths", p.key));
  const auto t0 = std::chrono::steady_clock::now();
  PathTuneReport rep;
  rep.chosen = {p.options.front(), LookupTier::kDefault, "heuristic (no path ran)"};
  std::vector<std::unique_ptr<PassHarness>> hs(p.options.size());
  // A failure leaves the device usable (a launch error) or not (a fault): the latter ends the tuning.
  auto fail = [&](size_t i, const std::string& why) {
    rep.paths[i].failure = why;
    hs[i].reset();
    try {
      fns.synchronize();
    } catch (const DriverError& e) {
      throw DriverError(fmt::format("lkjit: error: tune: the device is unusable after path {} of {} failed ({}); {}",
                                    p.options[i].name, p.key, why, e.what()));
    }
  };
  for (size_t i = 0; i < p.options.size(); ++i) {
    rep.paths.push_back({p.options[i], {}, {}, ""});
    try {
      hs[i] = p.harness(p.options[i].id);
      if (!hs[i]) throw SpecError(fmt::format("lkjit: error: tune: no pass harness for path {}", p.options[i].name));
      rep.paths[i].tiles = detail::tune_pass(*hs[i], {}, o, fns);  // its tile decisions recorded as usual
      hs[i]->set_tiles(rep.paths[i].tiles.plan);
      hs[i]->prepare();
    } catch (...) {
      fail(i, detail::classify(std::current_exception()).second);
    }
  }

  // The tuned passes against each other, interleaved so that clock drift hits every path alike.
  const int per = std::max(1, (o.final_reps + 2) / 3);
  std::vector<std::vector<double>> samples(p.options.size());
  for (int round = 0; round < 3; ++round)
    for (size_t i = 0; i < hs.size(); ++i) {
      if (!hs[i]) continue;
      try {
        const auto t = hs[i]->time(o.warmup, per);
        samples[i].insert(samples[i].end(), t.begin(), t.end());
      } catch (...) {
        samples[i].clear();
        fail(i, detail::classify(std::current_exception()).second);
      }
    }
  std::vector<CandidateResult> ranked(p.options.size());
  for (size_t i = 0; i < hs.size(); ++i) {
    ranked[i].order = static_cast<int>(i);
    if (!hs[i]) {
      ranked[i].status = CandidateStatus::kError;
      continue;
    }
    rep.paths[i].pass = summarize(samples[i]);
    ranked[i].summary = rep.paths[i].pass;
  }
  auto best = select_best(ranked, o.min_noise);
  auto finish = [&] {
    rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return rep;
  };
  if (!best) return finish();
  // A faster path is worth nothing if it computes something else: check it against the heuristic's first.
  if (*best != 0) {
    std::optional<std::string> bad;
    if (!hs[0]) {
      bad = "the heuristic's path " + p.options[0].name + " did not run, so there is nothing to check it against";
    } else {
      try {
        bad = hs[*best]->check_against(*hs[0], rep.paths[0].tiles.plan, rep.paths[*best].tiles.plan);
      } catch (...) {
        bad = "the check failed: " + detail::classify(std::current_exception()).second;
        try {
          fns.synchronize();
        } catch (const DriverError& e) {
          throw DriverError(fmt::format("lkjit: error: tune: the device is unusable after checking path {} of {} ({}); {}",
                                        p.options[*best].name, p.key, *bad, e.what()));
        }
      }
    }
    if (bad) {
      rep.check_failure = fmt::format("path {} of {} disagrees with path {}'s output, so {} is kept: {}",
                                      p.options[*best].name, p.key, p.options[0].name, p.options[0].name, *bad);
      if (!hs[0]) {
        rep.chosen = {p.options[0], LookupTier::kDefault, "heuristic (" + rep.check_failure + ")"};
        return finish();
      }
      best = 0;  // measured and recorded: later processes need not measure it again
    }
  }
  const PathTuneResult& win = rep.paths[*best];
  rep.chosen = {win.path, LookupTier::kTuned,
                fmt::format("tuned: {} of {} paths ran, {} {:.4f} ms{}", std::count_if(hs.begin(), hs.end(),
                                                                                      [](const auto& h) { return !!h; }),
                            p.options.size(), win.path.name, win.pass.median_ms,
                            rep.check_failure.empty() ? "" : " (a faster path disagreed)")};
  if (o.save) {
    rep.db_path = o.db_path.empty() ? tuning_db_path() : o.db_path;
    cache::TuningRecord r = detail::new_record(device_class(hs[*best]->device()), p.key, p.shape);
    r.tile[kAxis] = win.path.id;
    r.time_s = win.pass.median_ms * 1e-3;
    r.default_time_s = rep.paths[0].pass.n ? rep.paths[0].pass.median_ms * 1e-3 : 0;
    r.strategy = to_string(o.strategy);
    r.tried = static_cast<int>(p.options.size());
    try {
      detail::save_records(rep.db_path, {r});
    } catch (const Error& e) {
      rep.save_error = e.what();
    }
  }
  return finish();
}

}  // namespace lkjit
