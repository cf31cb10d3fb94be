// Tuning decisions in the cluster tier, keyed like the tuning database (device, arch, SM count, spec,
// shape bucket: TuningRecord::same_key), so that every rank of a job runs the same tile. A decision is
// stored as a one-record tuning database (cache/tuning_db.h), signed like remote entries.
#pragma once
#include <optional>
#include <string>

#include "cache/remote_store.h"
#include "cache/tuning_db.h"

namespace lkjit::cache {

// "<device>|sm_<arch>|<sm count>|<spec>|<bucket>": the Redis key's suffix, and the decision lease's name.
std::string decision_key(const TuningRecord& r);
std::string decision_key(const TuningQuery& q);

// The decision for q's key, or nullopt (none, refused: *refused says why, or the tier is unavailable).
std::optional<TuningRecord> get_decision(RemoteStore& store, const TuningQuery& q, std::string* refused = nullptr);
// Publishes r (write mode "all" only). False when not written.
bool put_decision(RemoteStore& store, const TuningRecord& r);

}  // namespace lkjit::cache
