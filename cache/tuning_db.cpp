#include "cache/tuning_db.h"

#include <fmt/format.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/Path.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

#include "cache/file_io.h"
#include "cache/lock.h"
#include "lkjit/error.h"
#include "support/json_limits.h"
#include "support/parse_int.h"
#include "support/read_file.h"

namespace lkjit::cache {
namespace {

namespace json = llvm::json;
constexpr const char* kKind = "lkjit-tuning-db";

auto key_tuple(const TuningRecord& r) { return std::tie(r.device, r.arch, r.sm_count, r.spec, r.bucket); }

[[noreturn]] void bad(const std::string& origin, const std::string& what) {
  throw CacheError(fmt::format("lkjit: error: {}: tuning database {}", origin, what));
}

constexpr int64_t kIntMax = std::numeric_limits<int>::max();

// An integer of a record, within its field's range: never truncated (4294967552 is not 256).
int64_t in_range(int64_t v, const std::string& origin, size_t i, const std::string& field, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    bad(origin, fmt::format("record {}: {}={} is out of range; supported: {}", i, field, v, support::range_text(lo, hi)));
  return v;
}

TuningRecord record_from(const json::Object& o, const std::string& origin, size_t i) {
  TuningRecord r;
  auto str = [&](const char* k) -> std::string {
    auto v = o.getString(k);
    if (!v) bad(origin, fmt::format("record {} has no string '{}'", i, k));
    return v->str();
  };
  auto integer = [&](const char* k) -> int64_t {
    auto v = o.getInteger(k);
    if (!v) bad(origin, fmt::format("record {} has no integer '{}'", i, k));
    return *v;
  };
  r.device = str("device");
  r.arch = static_cast<int>(in_range(integer("arch"), origin, i, "arch", 0, kIntMax));
  r.sm_count = static_cast<int>(in_range(integer("sm_count"), origin, i, "sm_count", 0, kIntMax));
  r.spec = str("spec");
  r.bucket = str("bucket");
  const json::Array* shape = o.getArray("shape");
  if (!shape || shape->size() != 5) bad(origin, fmt::format("record {}: 'shape' must be [B, C, H, W, stride]", i));
  int64_t v[5];
  for (size_t j = 0; j < 5; ++j) {
    auto x = (*shape)[j].getAsInteger();
    if (!x || *x < 1) bad(origin, fmt::format("record {}: shape[{}] must be an integer >= 1", i, j));
    v[j] = *x;
  }
  r.B = v[0], r.C = v[1], r.H = v[2], r.W = v[3];
  r.stride = static_cast<int>(in_range(v[4], origin, i, "shape[4] (stride)", 1, kIntMax));
  const json::Object* tile = o.getObject("tile");
  if (!tile || tile->empty()) bad(origin, fmt::format("record {} has no 'tile' object", i));
  for (const auto& kv : *tile) {
    auto x = kv.second.getAsInteger();
    if (!x) bad(origin, fmt::format("record {}: tile axis '{}' is not an integer", i, kv.first.str()));
    r.tile[kv.first.str()] = static_cast<int>(in_range(*x, origin, i, "tile " + kv.first.str(), 0, kIntMax));
  }
  r.time_s = o.getNumber("time_s").getValueOr(0);
  r.default_time_s = o.getNumber("default_time_s").getValueOr(0);
  if (auto s = o.getString("strategy")) r.strategy = s->str();
  r.tried = static_cast<int>(in_range(o.getInteger("tried").getValueOr(0), origin, i, "tried", 0, kIntMax));
  if (auto s = o.getString("tuned_at")) r.tuned_at = s->str();
  return r;
}

json::Object record_to(const TuningRecord& r) {
  json::Object tile;
  for (const auto& [k, v] : r.tile) tile[k] = v;
  return json::Object{{"device", r.device},
                      {"arch", r.arch},
                      {"sm_count", r.sm_count},
                      {"spec", r.spec},
                      {"bucket", r.bucket},
                      {"shape", json::Array{r.B, r.C, r.H, r.W, r.stride}},
                      {"tile", std::move(tile)},
                      {"time_s", r.time_s},
                      {"default_time_s", r.default_time_s},
                      {"strategy", r.strategy},
                      {"tried", r.tried},
                      {"tuned_at", r.tuned_at}};
}

}  // namespace

bool TuningRecord::same_key(const TuningRecord& o) const { return key_tuple(*this) == key_tuple(o); }

bool TuningRecord::operator==(const TuningRecord& o) const {
  return same_key(o) && B == o.B && C == o.C && H == o.H && W == o.W && stride == o.stride && tile == o.tile &&
         time_s == o.time_s && default_time_s == o.default_time_s && strategy == o.strategy && tried == o.tried &&
         tuned_at == o.tuned_at;
}

TuningDb TuningDb::parse(const std::string& text, const std::string& origin) {
  // json::parse recurses once per nesting level: 50 000 '[' would overflow the stack.
  support::check_json_limits(text, origin, "tuning database", ErrorCode::kCache,
                             {support::JsonLimits{}.max_depth, kMaxTuningDbBytes});
  auto parsed = json::parse(text);
  if (!parsed) bad(origin, "is not JSON: " + llvm::toString(parsed.takeError()));
  const json::Object* root = parsed->getAsObject();
  if (!root) bad(origin, "is not a JSON object");
  auto kind = root->getString("kind");
  if (!kind || *kind != kKind) bad(origin, fmt::format("has no \"kind\": \"{}\"", kKind));
  const int64_t format = root->getInteger("format").getValueOr(-1);
  if (format != kTuningDbFormatVersion)
    bad(origin, fmt::format("has format {}; this lkjit reads format {}", format, kTuningDbFormatVersion));
  const json::Array* recs = root->getArray("records");
  if (!recs) bad(origin, "has no \"records\" array");
  TuningDb db;
  for (size_t i = 0; i < recs->size(); ++i) {
    const json::Object* o = (*recs)[i].getAsObject();
    if (!o) bad(origin, fmt::format("record {} is not an object", i));
    db.upsert(record_from(*o, origin, i));
  }
  return db;
}

namespace {

// The file's text; nullopt when it does not exist. CacheError naming the path when it cannot be read.
std::optional<std::string> read_db(const std::string& path) {
  support::ReadOptions o;
  o.max_bytes = kMaxTuningDbBytes;
  o.what = "tuning database";
  support::ReadResult r = support::read_file(path, o);
  if (r.status == support::ReadStatus::kMissing) return std::nullopt;  // a dangling link too, as before
  if (!r.ok()) throw CacheError("lkjit: error: " + r.why);
  return std::move(r.bytes);
}

}  // namespace

TuningDb TuningDb::load(const std::string& path) {
  const auto text = read_db(path);
  return text ? parse(*text, path) : TuningDb{};
}

std::string TuningDb::serialize() const {
  std::vector<TuningRecord> sorted = records_;
  std::sort(sorted.begin(), sorted.end(), [](const TuningRecord& a, const TuningRecord& b) { return key_tuple(a) < key_tuple(b); });
  json::Array recs;
  for (const auto& r : sorted) recs.push_back(record_to(r));
  json::Value root = json::Object{{"kind", kKind}, {"format", kTuningDbFormatVersion}, {"records", std::move(recs)}};
  return llvm::formatv("{0:2}", root).str() + "\n";
}

void TuningDb::upsert(const TuningRecord& r) {
  const auto [it, added] = by_key_.emplace(Key{r.device, r.arch, r.sm_count, r.spec, r.bucket}, records_.size());
  if (!added) {
    records_[it->second] = r;  // same key, so the same (spec, arch): by_spec_ holds it already
    return;
  }
  by_spec_[{r.spec, r.arch}].push_back(records_.size());
  records_.push_back(r);
}

double shape_distance(const TuningRecord& r, const TuningQuery& q) {
  auto d = [](int64_t a, int64_t b) { return std::fabs(std::log2(double(std::max<int64_t>(a, 1))) - std::log2(double(std::max<int64_t>(b, 1)))); };
  return d(r.B, q.B) + d(r.C, q.C) + d(r.H, q.H) + d(r.W, q.W) + (r.stride != q.stride ? 4.0 : 0.0);
}

std::vector<TuningMatch> TuningDb::lookup(const TuningQuery& q) const {
  std::vector<TuningMatch> out;
  const auto candidates = by_spec_.find({q.spec, q.arch});
  if (candidates == by_spec_.end()) return out;
  for (const size_t i : candidates->second) {
    const auto& r = records_[i];
    const bool same_device = r.device == q.device && r.sm_count == q.sm_count;
    const MatchTier tier = !same_device ? MatchTier::kSameArch
                           : r.bucket == q.bucket ? MatchTier::kExact
                                                  : MatchTier::kNearestShape;
    out.push_back({i, tier, shape_distance(r, q)});
  }
  std::stable_sort(out.begin(), out.end(), [](const TuningMatch& a, const TuningMatch& b) {
    return std::make_tuple(int(a.tier), a.distance, a.index) < std::make_tuple(int(b.tier), b.distance, b.index);
  });
  return out;
}

void TuningDb::save_merged(const std::string& path, const std::vector<TuningRecord>& add) {
  llvm::SmallString<256> dir(path);
  llvm::sys::path::remove_filename(dir);
  if (dir.empty()) dir = ".";
  if (auto ec = llvm::sys::fs::create_directories(dir))
    throw CacheError(fmt::format("lkjit: error: {}: cannot create directory: {}", dir.str().str(), ec.message()));
  // Read, merge and publish under one lock: two merges at once would each drop the other's records.
  const FileLock lock = FileLock::acquire(path + ".lock", std::chrono::seconds(60));
  TuningDb db;
  // Unreadable (a FIFO, a folder, too large): not ours to move aside. CacheError naming the path.
  if (const auto text = read_db(path)) {
    try {
      db = parse(*text, path);
    } catch (const CacheError&) {
      // Another format is someone else's data: keep it. Anything else is corrupt: move it aside.
      bool other_format = false;
      if (!support::json_limit_problem(*text, {support::JsonLimits{}.max_depth, kMaxTuningDbBytes})) {
        if (auto v = json::parse(*text)) {
          if (const json::Object* o = v->getAsObject()) {
            auto kind = o->getString("kind");
            other_format = kind && *kind == kKind && o->getInteger("format").getValueOr(-1) != kTuningDbFormatVersion;
          }
        } else {
          llvm::consumeError(v.takeError());
        }
      }
      if (other_format) throw;
      if (auto ec = llvm::sys::fs::rename(path, path + ".corrupt"))
        throw CacheError(fmt::format("lkjit: error: {}: cannot move the corrupt tuning database aside: {}", path, ec.message()));
    }
  }
  for (const auto& r : add) db.upsert(r);
  write_file_atomically(path, db.serialize(), 0644, /*create_dir=*/false);
}

}  // namespace lkjit::cache
