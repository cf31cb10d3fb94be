// The Tuner: tiered lookups in the tuning database, tune-on-miss through a pass of the kernel's family
// that contains it (the runtime's op registry), and the database glue (snapshots, decisions as records).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>

#include "lkjit/error.h"
#include "lkjit/tuning.h"
#include "lkjit/version.h"
#include "runtime/env.h"
#include "runtime/op_registry.h"
#include "runtime/remote_tier.h"
#include "runtime/tuner_internal.h"

namespace lkjit {
namespace detail {
namespace {

namespace fs = std::filesystem;

struct Snapshot {
  fs::file_time_type mtime;
  uintmax_t size = 0;
  std::shared_ptr<const cache::TuningDb> db;
};

std::mutex& snapshot_mutex() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, Snapshot>& snapshots() {
  static std::map<std::string, Snapshot> m;
  return m;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

LookupTier tier_of(cache::MatchTier t) {
  switch (t) {
    case cache::MatchTier::kExact: return LookupTier::kExact;
    case cache::MatchTier::kNearestShape: return LookupTier::kNearestShape;
    case cache::MatchTier::kSameArch: return LookupTier::kSameArch;
  }
  return LookupTier::kDefault;
}

bool fits(const OpSpec& spec, const Tile& t, const DeviceLimits& limits, const Shape& shape) {
  return in_space(spec, t, limits, &shape) || t == default_tile(spec, shape, limits);
}

std::shared_ptr<const cache::TuningDb> db_snapshot(const std::string& path) {
  static const auto empty = std::make_shared<const cache::TuningDb>();
  std::error_code ec;
  if (!fs::exists(path, ec)) return empty;
  const auto mtime = fs::last_write_time(path, ec);
  const auto size = fs::file_size(path, ec);
  std::lock_guard<std::mutex> lock(snapshot_mutex());
  auto& s = snapshots()[path];
  if (!s.db || s.mtime != mtime || s.size != size) {
    s.db.reset();
    s.db = std::make_shared<const cache::TuningDb>(cache::TuningDb::load(path));
    s.mtime = mtime;
    s.size = size;
  }
  return s.db;
}

cache::TuningRecord new_record(const DeviceClass& dev, const std::string& key, const Shape& shape) {
  cache::TuningRecord rec;
  rec.device = dev.name;
  rec.arch = dev.arch;
  rec.sm_count = dev.sm_count;
  rec.spec = key;
  rec.bucket = bucket_key(shape);
  rec.B = shape.B, rec.C = shape.C, rec.H = shape.H, rec.W = shape.W, rec.stride = shape.stride;
  rec.tuned_at = utc_now();
  return rec;
}

cache::TuningRecord to_record(const DeviceClass& dev, const KernelTuneResult& r) {
  cache::TuningRecord rec = new_record(dev, spec_key(r.spec), r.shape);
  for (const auto& [a, v] : r.chosen.axes.entries()) rec.tile[a] = v;
  rec.time_s = r.best_ms * 1e-3;
  rec.default_time_s = r.default_ms * 1e-3;
  rec.strategy = to_string(r.strategy);
  rec.tried = static_cast<int>(r.candidates.size());
  return rec;
}

cache::TuningQuery query_of(const std::string& key, const Shape& shape, const DeviceClass& dev) {
  return {dev.name, dev.arch, dev.sm_count, key, bucket_key(shape), shape.B, shape.C, shape.H, shape.W, shape.stride};
}

cache::TuningQuery query_of(const OpSpec& spec, const Shape& shape, const DeviceClass& dev) {
  return query_of(spec_key(spec), shape, dev);
}

bool tile_of(const cache::TuningRecord& r, Tile* t) {
  *t = Tile{};
  for (const auto& [axis, v] : r.tile)
    if (!set_tile_axis(*t, axis, v)) return false;
  return true;
}

std::shared_ptr<const cache::TuningDb> usable_db(const std::string& path) {
  try {
    return db_snapshot(path);
  } catch (const Error& e) {
    // A layer must not fail because of the database: warn once per path and use the default.
    static std::mutex mu;
    static std::set<std::string> warned;
    std::lock_guard<std::mutex> lock(mu);
    if (warned.insert(path).second) rt::log_line(std::string("warning: tuning database ignored: ") + e.what());
    return nullptr;
  }
}

void record_decisions(const std::string& path, const DeviceClass& dev, const std::vector<KernelTuneResult>& results) {
  std::vector<cache::TuningRecord> add;
  for (const auto& r : results)
    if (r.chosen != Tile{}) add.push_back(to_record(dev, r));
  save_records(path, add);
}

void save_records(const std::string& path, const std::vector<cache::TuningRecord>& add) {
  if (add.empty()) return;
  cache::TuningDb::save_merged(path, add);
  {
    std::lock_guard<std::mutex> lock(snapshot_mutex());
    snapshots().erase(path);
  }
  rt::publish_decisions(add);  // the cluster tier's copy (LKJIT_REMOTE_CACHE_WRITE=all; else a no-op)
}

double resolve_budget(double budget_s) {
  if (budget_s > 0) return budget_s;
  const std::string v = rt::env("LKJIT_TUNE_BUDGET");
  try {
    size_t pos = 0;
    const double b = std::stod(v, &pos);
    if (pos == v.size() && b > 0) return b;
  } catch (const std::exception&) {
  }
  throw SpecError(fmt::format("lkjit: error: LKJIT_TUNE_BUDGET='{}' is not a number of seconds; supported: > 0", v));
}

}  // namespace detail

Tuner::Tuner(TuneOptions options) : opt_(std::move(options)) {}

TuneMode Tuner::mode() const { return resolve_tune_mode(opt_.mode, TuneMode::kTune); }

std::string Tuner::db_path() const { return opt_.db_path.empty() ? tuning_db_path() : opt_.db_path; }

TileChoice Tuner::lookup(const OpSpec& spec, const Shape& shape, const DeviceClass& dev,
                         const DeviceLimits& limits) const {
  TileChoice c{default_tile(spec, shape, limits), LookupTier::kDefault, "heuristic default"};
  if (mode() == TuneMode::kOff) return c;
  const auto db = detail::usable_db(db_path());
  if (!db) {
    c.detail = "database unreadable";
    return c;
  }
  const cache::TuningQuery q = detail::query_of(spec, shape, dev);
  const auto matches = db->lookup(q);
  // Re-validated for the actual shape: a point of its space (so also a tile the current generator has),
  // checked without listing the space (some have a few hundred thousand combinations).
  for (const auto& m : matches) {
    const auto& r = db->records()[m.index];
    Tile t;
    if (!detail::tile_of(r, &t) || !detail::fits(spec, t, limits, shape)) continue;
    c.tile = t;
    c.tier = detail::tier_of(m.tier);
    c.detail = fmt::format("record of {} (sm_{}, {} SMs) for {}x{}x{}x{}", r.device, r.arch, r.sm_count, r.B, r.C,
                           r.H, r.W);
    if (c.tier == LookupTier::kExact) return c;
    break;
  }
  // No exact local record: another node's decision for exactly this key (the cluster tier), if it fits.
  if (auto r = rt::remote_decision(q)) {
    Tile t;
    if (detail::tile_of(*r, &t) && detail::fits(spec, t, limits, shape))
      return {t, LookupTier::kExact,
              fmt::format("remote decision of {} (sm_{}, {} SMs) for {}x{}x{}x{}", r->device, r->arch, r->sm_count, r->B,
                          r->C, r->H, r->W)};
  }
  if (c.tier == LookupTier::kDefault && !matches.empty())
    c.detail = fmt::format("{} record(s), none fits {}", matches.size(), shape.to_string());
  return c;
}

TunedKernel Tuner::get(const OpSpec& spec, const Shape& shape, int device) {
  validate(spec);
  const DeviceInfo dev = device_info(device);
  if (spec.arch != dev.arch)
    throw SpecError(fmt::format("lkjit: error: tuner: {} targets {} but device {} ({}) is {}; supported: the device's arch",
                                spec.to_string(), arch_name(spec.arch), device, dev.name, arch_name(dev.arch)));
  TunedKernel out;
  out.spec = spec;
  out.shape = shape;
  const TuneMode m = mode();
  TileChoice c = lookup(spec, shape, device_class(dev), dev.limits);
  const bool miss = c.tier != LookupTier::kExact;
  // One node of a cluster tunes each key: the claim waits for another node's published decision, or holds
  // the lease while this one tunes (released at the end of this scope; a no-op without the cluster tier).
  rt::TuningClaim claim;
  const bool wants_tuning =
      tune_candidates(spec, shape, dev.limits).size() > 1 && ((m == TuneMode::kTune && miss) || m == TuneMode::kRetune);
  if (wants_tuning && m == TuneMode::kTune) {
    claim = rt::claim_tuning(detail::query_of(spec, shape, device_class(dev)));
    Tile t;
    if (claim.decision && detail::tile_of(*claim.decision, &t) && detail::fits(spec, t, dev.limits, shape))
      c = {t, LookupTier::kExact, fmt::format("remote decision of {} (published while this process waited)", claim.decision->device)};
  }
  if (wants_tuning && c.tier != LookupTier::kExact) {
    auto [harness, sel] = rt::op_runtime(family_of(spec.kernel).name).harness_for(spec, shape, device, dev.limits);
    const auto rep = tune_pass(*harness, {sel}, opt_);
    if (!rep.save_error.empty()) rt::log_line("warning: " + rep.save_error);
    if (!rep.kernels.empty() && rep.kernels[0].chosen != Tile{}) {
      c = {rep.kernels[0].chosen, LookupTier::kTuned,
           fmt::format("tuned: {} of {} candidates, {}{}", rep.kernels[0].candidates.size(), rep.kernels[0].space_size,
                       to_string(rep.kernels[0].strategy),
                       rep.kernels[0].check_failure.empty() ? "" : "; not recorded: " + rep.kernels[0].check_failure)};
      out.tuning = rep.kernels[0];
    }
  }
  out.tile = c.tile;
  out.tier = c.tier;
  out.detail = c.detail;
  out.compiled = compile_kernel(spec, out.tile);
  out.loaded = &load_kernel(out.compiled, device);
  out.geometry = launch_geometry(spec, out.tile, shape);
  return out;
}

}  // namespace lkjit
