// The tuning database at scale and under concurrency (cache/tuning_db.cpp): 40 000 records load, merge and
// look up as the linear scans they replace did (same records, same order), and merges from several threads
// and processes at once lose nothing. Speed itself is bench_cache's (BM_TuningDb*), never asserted here.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cache/tuning_db.h"
#include "tests/test_support.h"

namespace {

using namespace lkjit::cache;  // NOLINT
using lkjit::test::run_in_child;
using lkjit::test::TempDir;

TuningRecord record(size_t i, int threads = 256) {
  TuningRecord r;
  r.device = i % 3 ? "NVIDIA H200" : "NVIDIA H100";
  r.arch = 90;
  r.sm_count = i % 3 ? 132 : 114;
  r.spec = fmt::format("lkjit_wtconv_fwd_plane_f32_k5_L{}_s{}_sm90", i % 8, i % 50);
  r.bucket = fmt::format("B{}_C96_H56_W56_s1", 1 + i / 50);
  r.B = 1 + static_cast<int64_t>(i / 50), r.C = 96 + static_cast<int64_t>(i % 7), r.H = 56, r.W = 56;
  r.stride = 1 + static_cast<int>(i % 2);
  r.tile = {{"planes", 1 + static_cast<int>(i % 4)}, {"threads", threads}, {"vy", 4}};
  r.time_s = 1e-3 * static_cast<double>(i % 97);
  r.strategy = "greedy";
  return r;
}

// What lookup() returned before the index: a scan of every record, then the same sort.
std::vector<TuningMatch> scan_lookup(const std::vector<TuningRecord>& records, const TuningQuery& q) {
  std::vector<TuningMatch> out;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    if (r.spec != q.spec || r.arch != q.arch) continue;
    const bool same_device = r.device == q.device && r.sm_count == q.sm_count;
    const MatchTier tier = !same_device ? MatchTier::kSameArch : r.bucket == q.bucket ? MatchTier::kExact : MatchTier::kNearestShape;
    out.push_back({i, tier, shape_distance(r, q)});
  }
  std::stable_sort(out.begin(), out.end(), [](const TuningMatch& a, const TuningMatch& b) {
    return std::make_tuple(int(a.tier), a.distance, a.index) < std::make_tuple(int(b.tier), b.distance, b.index);
  });
  return out;
}

TEST(TuningDbScale, FortyThousandRecordsBehaveAsTheScanDid) {
  constexpr size_t kN = 40000;
  TuningDb db;
  std::vector<TuningRecord> reference;  // upsert by scanning, as before
  for (size_t i = 0; i < kN; ++i) {
    db.upsert(record(i));
    reference.push_back(record(i));
  }
  // Re-tuned records replace theirs in place (the same key, another tile); none is added.
  for (size_t i = 0; i < kN; i += 97) {
    db.upsert(record(i, 512));
    reference[i] = record(i, 512);
  }
  ASSERT_EQ(db.records().size(), kN);
  for (size_t i = 0; i < kN; ++i) ASSERT_TRUE(db.records()[i] == reference[i]) << i;
  // A round trip through the file keeps every record; the file is sorted, so compare as sets of keys.
  const std::string text = db.serialize();
  const TuningDb back = TuningDb::parse(text, "<memory>");
  ASSERT_EQ(back.records().size(), kN);
  EXPECT_EQ(back.serialize(), text);
  // Lookups give the scan's matches in the scan's order, for exact, nearest and other-device queries.
  for (size_t i : {size_t(0), size_t(1), size_t(7), size_t(12345), kN - 1}) {
    const TuningRecord& r = reference[i];
    for (const auto& [device, sms, bucket] : {std::make_tuple(r.device, r.sm_count, r.bucket),
                                              std::make_tuple(r.device, r.sm_count, std::string("B3_C96_H56_W56_s1")),
                                              std::make_tuple(std::string("other"), 1, r.bucket)}) {
      const TuningQuery q{device, r.arch, sms, r.spec, bucket, 9, 100, 56, 56, 1};
      const auto got = db.lookup(q), want = scan_lookup(reference, q);
      ASSERT_EQ(got.size(), want.size()) << i;
      ASSERT_FALSE(got.empty());
      for (size_t j = 0; j < got.size(); ++j) {
        EXPECT_EQ(got[j].index, want[j].index) << i << " " << j;
        EXPECT_EQ(int(got[j].tier), int(want[j].tier));
        EXPECT_EQ(got[j].distance, want[j].distance);
      }
    }
  }
  EXPECT_TRUE(db.lookup(TuningQuery{"x", 90, 1, "no such spec", "b"}).empty());
  EXPECT_TRUE(db.lookup(TuningQuery{reference[0].device, 80, 132, reference[0].spec, reference[0].bucket}).empty());
  // A file that repeats a key keeps the last record of it, as the scan did.
  auto rec = [](int threads) {
    return fmt::format(R"({{"device": "G", "arch": 90, "sm_count": 1, "spec": "S", "bucket": "B", "shape": [1, 1, 1, 1, 1], )"
                       R"("tile": {{"threads": {}}}}})", threads);
  };
  const TuningDb dup = TuningDb::parse(R"({"kind": "lkjit-tuning-db", "format": 1, "records": [)" + rec(128) + ", " +
                                           rec(64) + ", " + rec(256) + "]}", "<memory>");
  ASSERT_EQ(dup.records().size(), 1u);
  EXPECT_EQ(dup.records()[0].tile.at("threads"), 256);
}

TEST(TuningDbScale, ConcurrentMergesLoseNoRecord) {
  TempDir tmp("lkjit-tuning-scale-test");
  const std::string path = tmp.path() + "/sub/tuning.json";
  // 8 threads, 5 merges each of 3 records: every one of the 120 records is in the file afterwards.
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int m = 0; m < 5; ++m) {
        std::vector<TuningRecord> add;
        for (int k = 0; k < 3; ++k) add.push_back(record(size_t(1000 + t * 100 + m * 10 + k)));
        TuningDb::save_merged(path, add);
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(TuningDb::load(path).records().size(), 120u);
  // 4 processes at once, 10 records each (fork after the threads: the child merges on its own).
  std::vector<pid_t> kids;
  for (int p = 0; p < 4; ++p) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      int code = 0;
      try {
        for (int k = 0; k < 10; ++k) TuningDb::save_merged(path, {record(size_t(5000 + p * 100 + k))});
      } catch (...) {
        code = 1;
      }
      ::_exit(code);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const TuningDb db = TuningDb::load(path);
  EXPECT_EQ(db.records().size(), 160u);
  std::set<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(tmp.path() + "/sub")) files.insert(e.path().filename().string());
  EXPECT_EQ(files, std::set<std::string>{"tuning.json"}) << "a lock or temp file stayed";
}

TEST(TuningDbScale, ConcurrentReadersSeeTheSameMatches) {
  TuningDb db;
  for (size_t i = 0; i < 5000; ++i) db.upsert(record(i));
  const TuningRecord& r = db.records()[42];
  const TuningQuery q{r.device, r.arch, r.sm_count, r.spec, r.bucket, r.B, r.C, r.H, r.W, r.stride};
  const auto want = db.lookup(q);
  std::vector<std::thread> threads;
  std::vector<int> same(8, 0);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 200; ++k) {
        const auto got = db.lookup(q);
        same[t] += got.size() == want.size() && std::equal(got.begin(), got.end(), want.begin(), [](const auto& a, const auto& b) {
                     return a.index == b.index;
                   });
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) EXPECT_EQ(same[t], 200) << t;
}

}  // namespace
