// Tests of the tuning database (cache/tuning_db.cpp) and of the Tuner's tiered lookup over it
// (runtime/tuner.cpp): JSON round trip, atomic merged saves, corrupt and other-format files, the golden
// of format 1, and the tiers exact / nearest shape (re-validated for the actual shape) / same compute
// capability / default, with the tier reported. CPU only.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cache/tuning_db.h"
#include "lkjit/wtconv_kernels.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/tuning.h"
#include "runtime/tuner_internal.h"
#include "tests/test_support.h"

namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace lkjit;  // NOLINT

using lkjit::test::read_file;
using lkjit::test::TempDir;
using lkjit::test::write_file;

constexpr char kTmpPrefix[] = "lkjit-tuning-db-test";

cache::TuningRecord record(const std::string& device, const std::string& spec, const std::string& bucket, int64_t B,
                           int64_t C, int64_t H, int64_t W, std::map<std::string, int> tile, int arch = 90, int sms = 132) {
  cache::TuningRecord r;
  r.device = device;
  r.arch = arch;
  r.sm_count = sms;
  r.spec = spec;
  r.bucket = bucket;
  r.B = B, r.C = C, r.H = H, r.W = W;
  r.tile = std::move(tile);
  r.time_s = 1.25e-3;
  r.default_time_s = 1.5e-3;
  r.strategy = "greedy";
  r.tried = 17;
  r.tuned_at = "2026-01-02T03:04:05Z";
  return r;
}

// ---- the file --------------------------------------------------------------------------------------

TEST(TuningDb, RoundTripsThroughJson) {
  cache::TuningDb db;
  db.upsert(record("NVIDIA H200", "lkjit_wtconv_fwd_plane_f32_nchw_k5_L5_sm90", "B64_C128_H56_W56_s1", 64, 96, 56, 56,
                   {{"planes", 1}, {"vy", 4}, {"threads", 256}}));
  db.upsert(record("NVIDIA H200", "lkjit_wtconv_fwd_synth_f32_nchw_k5_L3_sm90", "B8_C64_H256_W256_s1", 8, 64, 256, 256,
                   {{"tile_h", 32}, {"tile_w", 64}, {"vy", 4}, {"threads", 256}}));
  const std::string text = db.serialize();
  EXPECT_THAT(text, AllOf(HasSubstr("\"kind\": \"lkjit-tuning-db\""), HasSubstr("\"format\": 1")));
  const auto back = cache::TuningDb::parse(text, "<memory>");
  ASSERT_EQ(back.records().size(), 2u);
  for (const auto& r : db.records()) {
    bool found = false;
    for (const auto& b : back.records()) found = found || b == r;
    EXPECT_TRUE(found) << r.spec;
  }
  EXPECT_EQ(back.serialize(), text) << "serialization is not deterministic";
}

TEST(TuningDb, UpsertReplacesTheRecordWithTheSameKey) {
  cache::TuningDb db;
  auto a = record("G", "S", "B1_C1_H1_W1_s1", 1, 1, 1, 1, {{"threads", 128}});
  db.upsert(a);
  a.tile = {{"threads", 256}};
  db.upsert(a);
  ASSERT_EQ(db.records().size(), 1u);
  EXPECT_EQ(db.records()[0].tile.at("threads"), 256);
  auto b = a;
  b.bucket = "B2_C1_H1_W1_s1";
  db.upsert(b);
  EXPECT_EQ(db.records().size(), 2u);
}

TEST(TuningDb, SaveMergesAtomicallyAndLeavesNoTemporaryFiles) {
  TempDir tmp(kTmpPrefix);
  const std::string path = tmp.path() + "/sub/dir/tuning.json";  // directories are created
  const auto a = record("G", "S1", "k1", 1, 2, 3, 4, {{"threads", 128}});
  const auto b = record("G", "S2", "k2", 1, 2, 3, 4, {{"threads", 256}});
  cache::TuningDb::save_merged(path, {a});
  cache::TuningDb::save_merged(path, {b});
  auto db = cache::TuningDb::load(path);
  EXPECT_EQ(db.records().size(), 2u) << "the second save dropped the first record";
  auto a2 = a;
  a2.tile = {{"threads", 512}};
  cache::TuningDb::save_merged(path, {a2});
  db = cache::TuningDb::load(path);
  ASSERT_EQ(db.records().size(), 2u);
  for (const auto& r : db.records())
    if (r.spec == "S1") {
      EXPECT_EQ(r.tile.at("threads"), 512);
    }
  for (const auto& e : fs::directory_iterator(fs::path(path).parent_path()))
    EXPECT_EQ(e.path().filename(), "tuning.json") << "left behind: " << e.path();
}

TEST(TuningDb, MissingFileIsEmpty) {
  TempDir tmp(kTmpPrefix);
  EXPECT_TRUE(cache::TuningDb::load(tmp.path() + "/none.json").records().empty());
}

TEST(TuningDb, CorruptFileNamesThePathAndIsMovedAsideOnSave) {
  TempDir tmp(kTmpPrefix);
  const std::string path = tmp.path() + "/tuning.json";
  write_file(path, "{ not json");
  try {
    cache::TuningDb::load(path);
    FAIL() << "corrupt file accepted";
  } catch (const CacheError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr(path), HasSubstr("not JSON")));
  }
  cache::TuningDb::save_merged(path, {record("G", "S", "k", 1, 1, 1, 1, {{"threads", 128}})});
  EXPECT_EQ(cache::TuningDb::load(path).records().size(), 1u);
  EXPECT_EQ(read_file(path + ".corrupt"), "{ not json");
}

TEST(TuningDb, RecordWithoutATileIsRejectedByName) {
  const std::string text = R"({"kind": "lkjit-tuning-db", "format": 1, "records": [
      {"device": "G", "arch": 90, "sm_count": 132, "spec": "S", "bucket": "k", "shape": [1, 1, 1, 1, 1]}]})";
  try {
    cache::TuningDb::parse(text, "x.json");
    FAIL();
  } catch (const CacheError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr("x.json"), HasSubstr("record 0"), HasSubstr("'tile'")));
  }
}

TEST(TuningDb, AnotherFormatIsNeitherReadNorOverwritten) {
  TempDir tmp(kTmpPrefix);
  const std::string path = tmp.path() + "/tuning.json";
  const std::string future = R"({"kind": "lkjit-tuning-db", "format": 2, "records": []})";
  write_file(path, future);
  try {
    cache::TuningDb::load(path);
    FAIL();
  } catch (const CacheError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr(path), HasSubstr("format 2"), HasSubstr("reads format 1")));
  }
  EXPECT_THROW(cache::TuningDb::save_merged(path, {record("G", "S", "k", 1, 1, 1, 1, {{"threads", 128}})}), CacheError);
  EXPECT_EQ(read_file(path), future);
}

// The golden of format 1: a change of the layout must bump kTuningDbFormatVersion and add a golden.
TEST(TuningDb, GoldenFormat1) {
  const std::string path = std::string(LKJIT_SOURCE_DIR) + "/tests/data/tuning_db_v1.json";
  const std::string text = read_file(path);
  ASSERT_FALSE(text.empty()) << path;
  const auto db = cache::TuningDb::parse(text, path);
  ASSERT_EQ(db.records().size(), 2u);
  const auto& r = db.records()[0];
  EXPECT_EQ(r.device, "NVIDIA H200");
  EXPECT_EQ(r.arch, 90);
  EXPECT_EQ(r.sm_count, 132);
  EXPECT_EQ(r.spec, "lkjit_wtconv_fwd_plane_f32_nchw_k5_L5_sm90");
  EXPECT_EQ(r.bucket, "B64_C128_H56_W56_s1");
  EXPECT_EQ(r.C, 96);
  EXPECT_EQ(r.tile, (std::map<std::string, int>{{"planes", 1}, {"threads", 256}, {"vy", 4}}));
  EXPECT_DOUBLE_EQ(r.time_s, 0.00081);
  EXPECT_EQ(db.serialize(), text) << "format 1 no longer serializes as its golden";
  EXPECT_EQ(cache::kTuningDbFormatVersion, 1);
}

// ---- tiers (database level) -------------------------------------------------------------------------

cache::TuningQuery query(const std::string& device, const std::string& spec, const std::string& bucket, int64_t B,
                         int64_t C, int64_t H, int64_t W, int arch = 90, int sms = 132) {
  return cache::TuningQuery{device, arch, sms, spec, bucket, B, C, H, W, 1};
}

TEST(TuningDb, LookupOrdersByTierThenDistance) {
  cache::TuningDb db;
  db.upsert(record("H200", "S", "far", 64, 768, 7, 7, {{"threads", 1}}));     // 0 nearest, far
  db.upsert(record("H200", "S", "near", 32, 96, 56, 56, {{"threads", 2}}));   // 1 nearest, near
  db.upsert(record("H200", "S", "q", 64, 96, 56, 56, {{"threads", 3}}));      // 2 exact
  db.upsert(record("H100", "S", "q", 64, 96, 56, 56, {{"threads", 4}}));      // 3 same arch
  db.upsert(record("A100", "S", "q", 64, 96, 56, 56, {{"threads", 5}}, 80));  // other arch: never
  db.upsert(record("H200", "T", "q", 64, 96, 56, 56, {{"threads", 6}}));      // other spec: never
  db.upsert(record("H200", "S", "q2", 64, 96, 56, 56, {{"threads", 7}}, 90, 114));  // other SM count: same arch
  const auto m = db.lookup(query("H200", "S", "q", 64, 96, 56, 56));
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0].index, 2u);
  EXPECT_EQ(m[0].tier, cache::MatchTier::kExact);
  EXPECT_EQ(m[1].index, 1u);
  EXPECT_EQ(m[1].tier, cache::MatchTier::kNearestShape);
  EXPECT_EQ(m[2].index, 0u);
  EXPECT_EQ(m[2].tier, cache::MatchTier::kNearestShape);
  EXPECT_LT(m[1].distance, m[2].distance);
  EXPECT_EQ(m[3].tier, cache::MatchTier::kSameArch);
  EXPECT_EQ(m[4].tier, cache::MatchTier::kSameArch);
  EXPECT_EQ(m[3].index, 3u) << "equal distance: record order";
  EXPECT_TRUE(db.lookup(query("H200", "none", "q", 1, 1, 1, 1)).empty());
}

TEST(TuningDb, ShapeDistanceIsLogRatiosPlusStride) {
  const auto r = record("G", "S", "k", 64, 96, 56, 56, {{"threads", 1}});
  EXPECT_DOUBLE_EQ(cache::shape_distance(r, query("G", "S", "k", 64, 96, 56, 56)), 0);
  EXPECT_DOUBLE_EQ(cache::shape_distance(r, query("G", "S", "k", 32, 192, 28, 112)), 4);
  auto q = query("G", "S", "k", 64, 96, 56, 56);
  q.stride = 2;
  EXPECT_DOUBLE_EQ(cache::shape_distance(r, q), 4);
}

// ---- tiers (the Tuner: re-validation for the actual shape) -----------------------------------------

class TunerLookup : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = tmp_.path() + "/tuning.json";
    TuneOptions o;
    o.mode = TuneMode::kCached;
    o.db_path = path_;
    tuner_ = Tuner(o);
  }
  void add(const DeviceClass& dev, const OpSpec& s, const Shape& sh, const Tile& t) {
    KernelTuneResult r;
    r.spec = s;
    r.shape = sh;
    r.chosen = t;
    cache::TuningDb::save_merged(path_, {detail::to_record(dev, r)});
  }
  TempDir tmp_{kTmpPrefix};
  std::string path_;
  Tuner tuner_;
  const DeviceClass h200_{"NVIDIA H200", 90, 132}, h100_{"NVIDIA H100 80GB HBM3", 90, 132};
  const DeviceLimits lim_ = DeviceLimits::for_arch(90);
  const OpSpec plane_ = wtconv_spec(kWTConvFwdPlane, DType::kF32, 5, 5, true, 90);
  const Shape s56_{64, 96, 56, 56, 1}, s7_{64, 768, 7, 7, 1};
};

TEST_F(TunerLookup, EmptyDatabaseGivesTheDefault) {
  const auto c = tuner_.lookup(plane_, s56_, h200_, lim_);
  EXPECT_EQ(c.tier, LookupTier::kDefault);
  EXPECT_EQ(c.tile, default_tile(plane_, s56_, lim_));
}

TEST_F(TunerLookup, ExactRecord) {
  const Tile t = wtconv_tile(0, 0, 2, 1, 128);
  ASSERT_FALSE(reject_reason(plane_, t, lim_, &s56_));
  add(h200_, plane_, s56_, t);
  const auto c = tuner_.lookup(plane_, s56_, h200_, lim_);
  EXPECT_EQ(c.tier, LookupTier::kExact);
  EXPECT_EQ(c.tile, t);
  EXPECT_THAT(c.detail, HasSubstr("NVIDIA H200"));
  // Same bucket, other exact shape (C=100 rounds to 128 like 96): still exact.
  EXPECT_EQ(tuner_.lookup(plane_, Shape{64, 100, 56, 56, 1}, h200_, lim_).tier, LookupTier::kExact);
}

TEST_F(TunerLookup, NearestShapeWhenItsTileFits) {
  const Tile t = wtconv_tile(0, 0, 2, 1, 128);
  add(h200_, plane_, s56_, t);
  const Shape other{16, 96, 56, 56, 1};  // bucket B16: not exact
  const auto c = tuner_.lookup(plane_, other, h200_, lim_);
  EXPECT_EQ(c.tier, LookupTier::kNearestShape);
  EXPECT_EQ(c.tile, t);
}

TEST_F(TunerLookup, NearestShapeWhoseTileDoesNotFitFallsThrough) {
  // 16 planes of 7x7 fit in shared memory; 16 planes of 56x56 do not.
  const Tile big = wtconv_tile(0, 0, 16, 1, 512);
  ASSERT_FALSE(reject_reason(plane_, big, lim_, &s7_));
  ASSERT_TRUE(reject_reason(plane_, big, lim_, &s56_));
  add(h200_, plane_, s7_, big);
  auto c = tuner_.lookup(plane_, s56_, h200_, lim_);
  EXPECT_EQ(c.tier, LookupTier::kDefault);
  EXPECT_EQ(c.tile, default_tile(plane_, s56_, lim_));
  EXPECT_THAT(c.detail, HasSubstr("none fits"));
  // A same-arch record that fits is the next tier.
  const Tile fits = wtconv_tile(0, 0, 1, 2, 256);
  add(h100_, plane_, s56_, fits);
  c = tuner_.lookup(plane_, s56_, h200_, lim_);
  EXPECT_EQ(c.tier, LookupTier::kSameArch);
  EXPECT_EQ(c.tile, fits);
}

TEST_F(TunerLookup, SameArchOtherDevice) {
  const Tile t = wtconv_tile(0, 0, 1, 2, 128);
  add(h100_, plane_, s56_, t);
  const auto c = tuner_.lookup(plane_, s56_, h200_, lim_);
  EXPECT_EQ(c.tier, LookupTier::kSameArch);
  EXPECT_EQ(c.tile, t);
  // Another compute capability never matches.
  EXPECT_EQ(tuner_.lookup(plane_, s56_, DeviceClass{"NVIDIA A100", 80, 108}, DeviceLimits::for_arch(80)).tier,
            LookupTier::kDefault);
}

TEST_F(TunerLookup, ModeOffIgnoresTheDatabase) {
  add(h200_, plane_, s56_, wtconv_tile(0, 0, 2, 1, 128));
  TuneOptions o;
  o.mode = TuneMode::kOff;
  o.db_path = path_;
  const auto c = Tuner(o).lookup(plane_, s56_, h200_, lim_);
  EXPECT_EQ(c.tier, LookupTier::kDefault);
  EXPECT_EQ(c.tile, default_tile(plane_, s56_, lim_));
}

TEST_F(TunerLookup, ATileOutsideTheSpaceIsIgnored) {
  // Passes reject_reason but is not a point of the space (threads=96): a stale record.
  add(h200_, plane_, s56_, wtconv_tile(0, 0, 1, 1, 96));
  EXPECT_EQ(tuner_.lookup(plane_, s56_, h200_, lim_).tier, LookupTier::kDefault);
}

TEST_F(TunerLookup, CorruptDatabaseReadsAsEmpty) {
  write_file(path_, "garbage");
  const auto c = tuner_.lookup(plane_, s56_, h200_, lim_);
  EXPECT_EQ(c.tier, LookupTier::kDefault);
}

TEST_F(TunerLookup, SeesRecordsWrittenAfterTheFirstLookup) {
  EXPECT_EQ(tuner_.lookup(plane_, s56_, h200_, lim_).tier, LookupTier::kDefault);
  add(h200_, plane_, s56_, wtconv_tile(0, 0, 2, 1, 128));
  EXPECT_EQ(tuner_.lookup(plane_, s56_, h200_, lim_).tier, LookupTier::kExact);
}

TEST(TuningRecord, TileRoundTripsThroughARecord) {
  KernelTuneResult r;
  r.spec = wtconv_spec(kWTConvFwdSynth, DType::kF16, 7, 3, true, 90);
  r.shape = Shape{8, 64, 256, 256, 1};
  r.chosen = wtconv_tile(32, 64, 0, 4, 256);
  r.best_ms = 1.5;
  const auto rec = detail::to_record(DeviceClass{"G", 90, 132}, r);
  EXPECT_EQ(rec.spec, "lkjit_wtconv_fwd_synth_f16_k7_L3_sm90");
  EXPECT_EQ(rec.bucket, "B8_C64_H256_W256_s1");
  EXPECT_EQ(rec.tile.count("planes"), 0u) << "unused axes are not written";
  EXPECT_DOUBLE_EQ(rec.time_s, 1.5e-3);
  Tile t;
  ASSERT_TRUE(detail::tile_of(rec, &t));
  EXPECT_EQ(t, r.chosen);
  auto bad = rec;
  bad.tile["warps"] = 4;
  EXPECT_FALSE(detail::tile_of(bad, &t));
}

}  // namespace
