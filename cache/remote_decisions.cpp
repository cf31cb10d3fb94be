#include "cache/remote_decisions.h"

#include <fmt/format.h>

#include "lkjit/error.h"

namespace lkjit::cache {

std::string decision_key(const TuningRecord& r) {
  return fmt::format("{}|sm_{}|{}|{}|{}", r.device, r.arch, r.sm_count, r.spec, r.bucket);
}

std::string decision_key(const TuningQuery& q) {
  return fmt::format("{}|sm_{}|{}|{}|{}", q.device, q.arch, q.sm_count, q.spec, q.bucket);
}

std::optional<TuningRecord> get_decision(RemoteStore& store, const TuningQuery& q, std::string* refused) {
  const std::string key = decision_key(q);
  std::string why;
  const auto text = store.get_decision(key, &why);
  if (!text) {
    if (refused) *refused = why;
    return std::nullopt;
  }
  try {
    const TuningDb db = TuningDb::parse(*text, "remote decision " + key);
    // Exactly one record, of exactly this key: a value moved between keys or padded with others is refused.
    if (db.records().size() == 1 && decision_key(db.records()[0]) == key) return db.records()[0];
    why = fmt::format("holds {} record(s), not the one of its key", db.records().size());
  } catch (const CacheError& e) {
    why = e.what();
  }
  count_refusal(Source::kRemote);
  if (refused) *refused = why;
  return std::nullopt;
}

bool put_decision(RemoteStore& store, const TuningRecord& r) {
  TuningDb db;
  db.upsert(r);
  return store.put_decision(decision_key(r), db.serialize());
}

}  // namespace lkjit::cache
