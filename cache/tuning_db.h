// The tuning database: one decision (a tile) per (device class, spec, shape bucket), as a JSON file
// published by atomic rename. Plain strings and numbers: nothing here knows about CUDA or the
// generator; the runtime (runtime/tuner.cpp) maps tiles and validates matches for the actual shape.
//
// File (format 1):
//   {"format": 1, "kind": "lkjit-tuning-db", "records": [
//     {"device": "NVIDIA H200", "arch": 90, "sm_count": 132,
//      "spec": "lkjit_wtconv_fwd_plane_f32_k5_L5_sm90", "bucket": "B64_C128_H56_W56_s1",
//      "shape": [64, 96, 56, 56, 1], "tile": {"planes": 1, "threads": 256, "vy": 4},
//      "time_s": 0.00081, "default_time_s": 0.00093, "strategy": "greedy", "tried": 17,
//      "tuned_at": "2026-01-02T03:04:05Z"}, ...]}
// Timings are the medians behind the decision (seconds), kept for reports only.
//
// Outside input: the file is read through support/read_file.h (a FIFO, device or directory is refused without
// blocking; at most kMaxTuningDbBytes), its JSON nesting is checked before parsing, and every integer must fit
// its field (a tile value of 4294967552 is out of range, not 256). Records are indexed: loading n records,
// merging and serializing cost O(n log n), a lookup O(m log m) in the m records of its spec and arch.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace lkjit::cache {

// Bump on any layout change; tests/data/tuning_db_v<N>.json is the golden of each version.
constexpr int kTuningDbFormatVersion = 1;
// The largest tuning database read: 40 000 records are about 16 MB.
constexpr uint64_t kMaxTuningDbBytes = uint64_t(256) << 20;

struct TuningRecord {
  std::string device;  // GPU name
  int arch = 0;        // compute capability, 90
  int sm_count = 0;
  std::string spec;    // spec key (lkjit::spec_key)
  std::string bucket;  // shape bucket key (lkjit::bucket_key)
  int64_t B = 0, C = 0, H = 0, W = 0;  // the exact shape it was tuned on
  int stride = 1;
  std::map<std::string, int> tile;  // axis name -> value (axes the kernel uses)
  double time_s = 0, default_time_s = 0;
  std::string strategy;
  int tried = 0;
  std::string tuned_at;  // ISO 8601 UTC

  bool same_key(const TuningRecord& o) const;  // device, arch, sm_count, spec, bucket
  bool operator==(const TuningRecord& o) const;
};

// What a lookup asks for.
struct TuningQuery {
  std::string device;
  int arch = 0, sm_count = 0;
  std::string spec, bucket;
  int64_t B = 0, C = 0, H = 0, W = 0;
  int stride = 1;
};

enum class MatchTier { kExact, kNearestShape, kSameArch };

struct TuningMatch {
  size_t index;      // into records()
  MatchTier tier;
  double distance;   // shape distance (sum of |log2| ratios, +4 for another stride)
};

class TuningDb {
 public:
  TuningDb() = default;
  // Missing file: empty. CacheError naming the path for unreadable (not a regular file, too large), corrupt or
  // other-format files.
  static TuningDb load(const std::string& path);
  // CacheError naming `origin` (a path, for messages) when the text is not a format-1 database, nests too
  // deep, or holds an integer outside its field's range.
  static TuningDb parse(const std::string& text, const std::string& origin);
  std::string serialize() const;  // deterministic: records sorted by key, keys sorted

  const std::vector<TuningRecord>& records() const { return records_; }
  void upsert(const TuningRecord& r);  // replaces the record with the same key

  // Candidates for a query, in tier order (exact; nearest shape; same arch) and nearest first within
  // a tier (ties by record order). The caller takes the first whose tile fits the actual shape.
  std::vector<TuningMatch> lookup(const TuningQuery& q) const;

  // Re-reads `path`, upserts `add`, writes a temp file in the same directory and renames it over
  // `path` (creating the directory). A corrupt file is moved aside to <path>.corrupt first; a file of
  // another format, or one that cannot be read (not a regular file, too large), is left alone (CacheError).
  // Concurrent merges (threads or processes on one machine) take turns on the lock "<path>.lock", so none
  // loses another's records; where that lock cannot be had (a read-only folder, a wait over 60 s) the merge
  // goes on without it, and the last writer wins.
  static void save_merged(const std::string& path, const std::vector<TuningRecord>& add);

 private:
  using Key = std::tuple<std::string, int, int, std::string, std::string>;  // device, arch, sm_count, spec, bucket
  std::vector<TuningRecord> records_;
  std::map<Key, size_t> by_key_;                                  // -> index in records_
  std::map<std::pair<std::string, int>, std::vector<size_t>> by_spec_;  // (spec, arch) -> indices, ascending
};

// Distance used by lookup(): sum over B, C, H, W of |log2(a/b)|, plus 4 if strides differ.
double shape_distance(const TuningRecord& r, const TuningQuery& q);

}  // namespace lkjit::cache
