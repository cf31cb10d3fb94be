// Internal to the tuner: the tuning database as the runtime sees it (cached snapshots, decisions as
// records) and option defaults from the environment.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cache/tuning_db.h"
#include "lkjit/tuning.h"

namespace lkjit::detail {

// The database at `path`, re-read only when its size or modification time changed. A missing file
// is an empty database; a corrupt one throws CacheError.
std::shared_ptr<const cache::TuningDb> db_snapshot(const std::string& path);

// db_snapshot, or null (logged once per path) where the file cannot be used: layers never fail on it.
std::shared_ptr<const cache::TuningDb> usable_db(const std::string& path);

// Merges records into the file atomically, forgets its snapshot, and publishes them to the cluster tier.
void save_records(const std::string& path, const std::vector<cache::TuningRecord>& add);
std::string now_utc();  // "2026-01-02T03:04:05Z", a record's tuned_at

// One record per decided result (chosen tile set), merged into the file atomically.
void record_decisions(const std::string& path, const DeviceClass& dev, const std::vector<KernelTuneResult>& results);

// Whether a recorded tile may run `shape`: a point of its space there, or its default (which the tuner measures
// and may record even where it is not a point of the space: candidate_order).
bool fits(const OpSpec& spec, const Tile& t, const DeviceLimits& limits, const Shape& shape);

// The record a decision becomes; the tile of a record (false if an axis name is unknown).
cache::TuningRecord to_record(const DeviceClass& dev, const KernelTuneResult& r);
bool tile_of(const cache::TuningRecord& r, Tile* t);

// Path decisions (runtime/tune_paths.cpp): the database query of a pass's key and bucket on a device, and the
// option a record names (its only axis "path" holds an id among p.options), else null.
cache::TuningQuery query_of(const PassPaths& p, const DeviceClass& dev);
const PathOption* option_of(const PassPaths& p, const cache::TuningRecord& r);

// budget_s if > 0, else LKJIT_TUNE_BUDGET (SpecError naming the value if it is not a positive number).
double resolve_budget(double budget_s);

}  // namespace lkjit::detail
