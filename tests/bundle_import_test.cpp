// `cache import` of a bundle some of whose entries cannot go in (cache/bundle.cpp): every importable entry
// is published, each other one is refused with its reason, counts are reported, the cap is enforced once
// at the end, and only refusals fail the run; a damaged framing still imports nothing. CPU only.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cache/bundle.h"
#include "cache/entry.h"
#include "cache/key.h"
#include "cache/store.h"
#include "lkjit/cache.h"
#include "lkjit/error.h"
#include "tests/cubin_fixture.h"
#include "tests/test_support.h"

namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using namespace lkjit;         // NOLINT
using namespace lkjit::cache;  // NOLINT
using lkjit::test::bounded;
using lkjit::test::run_command;
using lkjit::test::shell_quote;
using lkjit::test::TempDir;
using lkjit::test::write_file;

// Entries that pass the trust checks (tests/cubin_fixture.h): a made-up kernel per tag, its key the hash of
// its recorded inputs, a synthetic cubin of ~1000 bytes defining it.
EntryMeta meta_of(char c) { return lkjit::test::test_meta(std::string(1, c)); }
std::string key_of(char c) { return meta_of(c).key; }
std::string payload_of(char c) { return lkjit::test::test_payload(meta_of(c), 1000); }
std::string good_entry(char c) { return encode_entry(meta_of(c), payload_of(c)); }

// Metadata naming `key`, for entries refused before their inputs are looked at (a key that is no key).
EntryMeta meta_for(const std::string& key) {
  EntryMeta m;
  m.key = key;
  m.kernel_name = "lkjit_wtconv_fold_k3_L1_w256_sm90";
  m.spec = "wtconv_fold";
  m.arch = 90;
  m.nvrtc_version = "13.0";
  return m;
}

// A bundle of the given entries' bytes, framed and checksummed as export writes it.
std::string bundle_of(const std::vector<std::string>& entries) {
  std::string b = "LKJIT-BUNDLE 1\n";
  for (const auto& e : entries) b += "entry " + std::to_string(e.size()) + "\n" + e + "\n";
  return b + "end " + std::to_string(entries.size()) + " " + sha256_hex(b) + "\n";
}

class BundleImport : public ::testing::Test {
 protected:
  TempDir tmp_{"lkjit-bundle-import-test"};
  const std::string dir_ = tmp_.path() + "/cache", file_ = tmp_.path() + "/b.bundle";
  const std::string payload_ = std::string(1000, 'p');  // of entries refused before their payload is looked at
};

TEST_F(BundleImport, PublishesWhatItCanAndRefusesTheRestWithReasons) {
  std::string corrupt = good_entry('b');
  corrupt[corrupt.size() - 10] ^= 0x20;  // its own checksum fails; the bundle's trailer is computed over it
  write_file(file_, bundle_of({good_entry('a'), corrupt,
                               good_entry('c'), good_entry('d')}));
  const DiskStore store(dir_);
  store.ensure_dir();
  fs::create_directories(store.path_for(key_of('d')) + "/sub");  // d's path is taken by a folder: its publish fails
  const BundleStats st = import_bundle(store, file_);
  EXPECT_EQ(st.entries, 4u);
  EXPECT_THAT(st.added, ElementsAre(key_of('a'), key_of('c')));
  EXPECT_EQ(st.present, 0u);
  ASSERT_EQ(st.refused.size(), 2u);
  EXPECT_THAT(st.refused[0], AllOf(HasSubstr("entry 2: "), HasSubstr("checksum mismatch")));
  EXPECT_THAT(st.refused[1], AllOf(HasSubstr("entry 4 (key " + key_of('d').substr(0, 16) + "): "), HasSubstr(store.path_for(key_of('d')))));
  EXPECT_EQ(store.load(key_of('a')).value_or(""), payload_of('a'));
  EXPECT_EQ(store.load(key_of('c')).value_or(""), payload_of('c'));
  EXPECT_FALSE(store.load(key_of('b')));
  // Again: what went in is already there, the refusals stay.
  const BundleStats again = import_bundle(store, file_);
  EXPECT_TRUE(again.added.empty());
  EXPECT_EQ(again.present, 2u);
  EXPECT_EQ(again.refused.size(), 2u);
}

TEST_F(BundleImport, PrunesToTheCapOnceAtTheEnd) {
  // Four entries of ~1.3 KB under a cap of ~2.5 KB: all four are published, then the prune keeps the newest two.
  std::vector<std::string> entries;
  for (char c : {'a', 'b', 'c', 'd'}) entries.push_back(good_entry(c));
  write_file(file_, bundle_of(entries));
  const DiskStore store(dir_, 2 * entries[0].size() + 100);
  store.ensure_dir();
  const BundleStats st = import_bundle(store, file_);
  EXPECT_EQ(st.added.size(), 4u);
  EXPECT_TRUE(st.refused.empty());
  EXPECT_EQ(st.evicted.size(), 2u);
  size_t left = 0;
  for (const auto& l : store.list(false)) left += l.ok;
  EXPECT_EQ(left, 2u);
  for (const auto& k : st.evicted) EXPECT_TRUE(DiskStore::evicted_by_cap_here(k)) << k;
}

TEST_F(BundleImport, ADamagedFramingStillImportsNothing) {
  std::string b = bundle_of({good_entry('a'), good_entry('c')});
  b[b.size() / 2] ^= 1;  // the trailer's checksum no longer vouches for the bytes
  write_file(file_, b);
  const DiskStore store(dir_);
  EXPECT_THROW(import_bundle(store, file_), CacheError);
  EXPECT_TRUE(store.list(false).empty());
}

TEST_F(BundleImport, TheCliReportsCountsAndExitsNonZeroOnlyForRefusals) {
  auto cli = [&](const std::string& args) {
    return run_command(bounded("env -u LKJIT_CACHE_MAX_BYTES LKJIT_CACHE_DIR=" + shell_quote(dir_) + " " +
                               shell_quote(LKJIT_CLI_PATH) + " " + args) + " 2>&1");
  };
  write_file(file_, bundle_of({good_entry('a'), good_entry('c')}));
  auto r = cli("cache import " + shell_quote(file_));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("import: " + file_ + ": 2 entries verified, 2 added, 0 already cached, 0 refused"));
  std::string bad = encode_entry(meta_for("not-a-key"), payload_);
  write_file(file_, bundle_of({good_entry('a'), bad, good_entry('e')}));
  r = cli("cache import " + shell_quote(file_));
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("import: refused entry 2: key 'not-a-key' is not 64 hex digits"),
                              HasSubstr("3 entries verified, 1 added, 1 already cached, 1 refused"),
                              HasSubstr("lkjit: error: " + file_ + ": 1 of its 3 entries could not be imported")));
  EXPECT_TRUE(fs::is_regular_file(dir_ + "/" + key_of('e') + ".lkjit"));
}

TEST(CapEvictions, OnlyTheCapsEvictionsAreBlamedOnIt) {
  // What prewarm's warning counts: entries this process's cap prunes evicted, not ones removed otherwise (a
  // concurrent `cache clear`).
  TempDir tmp("lkjit-bundle-import-test");
  const std::string dir = tmp.path() + "/cache";
  const std::string payload(1000, 'q');
  const size_t one = encode_entry(meta_for(key_of('1')), payload).size();
  const DiskStore capped(dir, one + 10);  // holds one entry
  std::vector<std::string> keys;
  for (char c : {'1', '2', '3'}) {
    capped.store(meta_for(key_of(c)), payload);
    keys.push_back(key_of(c));
  }
  const KernelCache admin(dir);
  EXPECT_EQ(admin.missing(keys), 2u);
  EXPECT_EQ(admin.evicted_by_cap(keys), 2u);
  // The survivor goes by another hand: missing, but not the cap's doing.
  fs::remove(capped.path_for(key_of('3')));
  EXPECT_EQ(admin.missing(keys), 3u);
  EXPECT_EQ(admin.evicted_by_cap(keys), 2u);
  // Stored again after its eviction, then removed otherwise: no longer counted as the cap's.
  const DiskStore uncapped(dir);
  uncapped.store(meta_for(key_of('1')), payload);
  fs::remove(uncapped.path_for(key_of('1')));
  EXPECT_FALSE(DiskStore::evicted_by_cap_here(key_of('1')));
  EXPECT_EQ(admin.evicted_by_cap(keys), 1u);
}

}  // namespace
