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

// One record per decided result (chosen tile set), merged into the file atomically.
void record_decisions(const std::string& path, const DeviceClass& dev, const std::vector<KernelTuneResult>& results);

// The record a decision becomes; the tile of a record (false if an axis name is unknown).
cache::TuningRecord to_record(const DeviceClass& dev, const KernelTuneResult& r);
bool tile_of(const cache::TuningRecord& r, Tile* t);

// budget_s if > 0, else LKJIT_TUNE_BUDGET (SpecError naming the value if it is not a positive number).
double resolve_budget(double budget_s);

}  // namespace lkjit::detail
