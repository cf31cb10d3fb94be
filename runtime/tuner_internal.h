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

// One record per decided result (chosen tile set), merged into the file atomically.
void record_decisions(const std::string& path, const DeviceClass& dev, const std::vector<KernelTuneResult>& results);

// Whether a recorded tile may run `shape`: a point of its space there, or its default (which the tuner measures
// and may record even where it is not a point of the space: candidate_order).
bool fits(const OpSpec& spec, const Tile& t, const DeviceLimits& limits, const Shape& shape);

// A record of `key` (a spec key or a pass key) and shape on dev, stamped now (tuned_at); the record a tile decision
// becomes; the tile of a record (false if an axis name is unknown).
cache::TuningRecord new_record(const DeviceClass& dev, const std::string& key, const Shape& shape);
cache::TuningRecord to_record(const DeviceClass& dev, const KernelTuneResult& r);
bool tile_of(const cache::TuningRecord& r, Tile* t);

// The lookup of `key` (a spec key or a pass key) for shape's bucket on dev; the lookup tier a database match is.
cache::TuningQuery query_of(const std::string& key, const Shape& shape, const DeviceClass& dev);
cache::TuningQuery query_of(const OpSpec& spec, const Shape& shape, const DeviceClass& dev);
LookupTier tier_of(cache::MatchTier t);

// Path decisions (runtime/tune_paths.cpp): the option a record names (its only axis "path" holds an id among
// p.options), else null.
const PathOption* option_of(const PassPaths& p, const cache::TuningRecord& r);

// budget_s if > 0, else LKJIT_TUNE_BUDGET (SpecError naming the value if it is not a positive number).
double resolve_budget(double budget_s);

}  // namespace lkjit::detail
