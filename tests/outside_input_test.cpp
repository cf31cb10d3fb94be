// Outside input through the CLI, class by class (issue 24): deeply nested JSON in every JSON file lkjit reads,
// FIFOs, devices, folders and sockets wherever it reads a file, numbers in the wrong base or beyond their
// type, and messages (long arguments clipped, empty --tile, over-long output names). Every run is bounded
// (coreutils timeout: a hang is exit 124, a failure, not a stuck suite). No GPU needed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cache/entry.h"
#include "cache/key.h"
#include "cache/tuning_db.h"
#include "lkjit/cache.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/wtconv_kernels.h"
#include "lkjit/runtime.h"
#include "runtime/env.h"
#include "tests/cubin_fixture.h"
#include "tests/test_support.h"

namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace lkjit;  // NOLINT

using lkjit::test::bounded;
using lkjit::test::CommandResult;
using lkjit::test::read_file;
using lkjit::test::run_command;
using lkjit::test::ScopedEnv;
using lkjit::test::shell_quote;
using lkjit::test::TempDir;
using lkjit::test::write_file;

const std::string kDeep = std::string(50000, '[') + std::string(50000, ']');
const std::string kDeepObjects = [] {
  std::string s;
  for (int i = 0; i < 20000; ++i) s += "{\"a\":";
  return s + "1" + std::string(20000, '}');
}();
const std::string kList = "tune --list --arch sm_90 --shape 1:4:8:8 -k 3 --L 1";

class OutsideInput : public ::testing::Test {
 protected:
  // A run of the CLI with its own cache (created 0700 as lkjit would), bounded to 120 s.
  CommandResult run(const std::string& args, const std::string& env = "", const std::string& cache = "") const {
    return run_command(bounded("env -u LKJIT_CACHE_DISABLE -u LKJIT_DUMP_DIR -u LKJIT_LOG -u LKJIT_CACHE_MAX_BYTES "
                               "-u LKJIT_TUNING_DB -u LKJIT_TUNE LKJIT_CACHE_DIR=" + shell_quote(cache.empty() ? cache_ : cache) +
                               " " + env + " " + shell_quote(LKJIT_CLI_PATH) + " " + args, 120) +
                       " 2>&1");
  }
  std::string file(const std::string& name, const std::string& bytes) const {
    const std::string p = tmp_.path() + "/" + name;
    write_file(p, bytes);
    return p;
  }
  std::string fifo(const std::string& path) const {
    EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
    return path;
  }
  void make_cache() const {
    fs::create_directories(cache_);
    fs::permissions(cache_, fs::perms::owner_all);
  }
  // The key compile_kernel gives the fold kernel k=3 L=1 sm_90 in this build.
  static std::string fold_key() { return kernel_key_inputs(wtconv_spec(kWTConvFold, DType::kF32, 3, 1, true, 90), wtconv_tile(0, 0, 0, 0, 256)).key; }
  // An entry that passes the trust checks (tests/cubin_fixture.h): made-up kernel `tag`, its key the hash of its
  // recorded inputs, a synthetic cubin defining it.
  static cache::EntryMeta genuine_meta(const std::string& tag) { return lkjit::test::test_meta(tag); }
  static std::string genuine_entry(const std::string& tag) {
    const cache::EntryMeta m = genuine_meta(tag);
    return cache::encode_entry(m, lkjit::test::test_payload(m));
  }
  // A well-formed entry of key (fake cubin), as the store writes it.
  static std::string entry_of(const std::string& key, const std::string& payload = "\x7f" "ELF-ish payload") {
    cache::EntryMeta m;
    m.key = key;
    m.kernel_name = "lkjit_wtconv_fold_k3_L1_w256_sm90";
    m.spec = "wtconv_fold";
    m.arch = 90;
    m.nvrtc_version = nvrtc_version();
    return cache::encode_entry(m, payload);
  }

  TempDir tmp_{"lkjit-outside-input-test"};
  std::string cache_ = tmp_.path() + "/cache";
};

// ---- 1. deeply nested or oversized JSON ----------------------------------------------------------------

TEST_F(OutsideInput, DeepJsonIsRefusedInEveryJsonFileNamingIt) {
  for (const std::string& text : {kDeep, kDeepObjects}) {
    const std::string deep = file("deep.json", text);
    // The tuning database of run and tune --list (LKJIT_TUNING_DB and --db): a warning, not SIGSEGV.
    const std::string warning = "lkjit: warning: " + deep + ": tuning database is nested deeper than 32 levels";
    CommandResult r = run(kList, "LKJIT_TUNING_DB=" + shell_quote(deep));
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr(warning));
    r = run(kList + " --db " + shell_quote(deep));
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr(warning));
    // prewarm's manifest and tuning database: bad input, before anything compiles.
    r = run("prewarm --arch sm_90 --manifest " + shell_quote(deep));
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr("lkjit: error: " + deep + ": manifest is nested deeper than 32 levels"));
    r = run("prewarm --arch sm_90 --tuning-db " + shell_quote(deep));
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr("lkjit: error: " + deep + ": tuning database is nested deeper than 32 levels"));
  }
  // The issue's own example: `run` with the database of 50 000 '['.
  std::string why;
  if (gpu_available(&why)) return;  // with a GPU, run would execute the layers; the warning is the same
  const CommandResult r = run("run --dtypes f32 --shapes 1:4:8:8:1 -k 3", "LKJIT_TUNING_DB=" + shell_quote(tmp_.path() + "/deep.json"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("tuning database is nested deeper than 32 levels"));
}

TEST_F(OutsideInput, ADeepEntryMetadataLineIsACorruptEntryNotACrash) {
  make_cache();
  const std::string key(64, 'a'), path = cache_ + "/" + key + ".lkjit";
  // Format 1's magic line has no checksum, so the metadata is parsed before anything vouches for it.
  write_file(path, "LKJIT-KERNEL-CACHE 1\n" + std::string(30000, '[') + "\npayload");
  CommandResult r = run("cache ls");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("(unreadable: metadata is nested deeper than 8 levels"));
  r = run("cache stat");
  EXPECT_THAT(r.output, HasSubstr("unreadable 1")) << r.output;
  r = run("cache explain " + key);
  EXPECT_EQ(r.code, 5) << r.output;
  r = run("cache export " + shell_quote(tmp_.path() + "/out.bundle"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("left out " + key), HasSubstr("nested deeper"), HasSubstr("0 entries")));
  r = run("cache verify");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("corrupt: " + path + ": metadata is nested deeper"), HasSubstr("removed")));
  EXPECT_FALSE(fs::exists(path));
}

TEST_F(OutsideInput, TuningDatabaseLoadAndMergeRefuseDeepJson) {
  const std::string deep = file("tuning.json", kDeep);
  try {
    cache::TuningDb::load(deep);
    ADD_FAILURE() << "loaded";
  } catch (const CacheError& e) {
    EXPECT_THAT(e.what(), HasSubstr(deep + ": tuning database is nested deeper than 32 levels"));
  }
  // A merge moves it aside as corrupt (it is no other format's data), then writes the record.
  cache::TuningRecord rec;
  rec.device = "G", rec.spec = "S", rec.bucket = "B", rec.B = rec.C = rec.H = rec.W = 1, rec.tile = {{"threads", 64}};
  cache::TuningDb::save_merged(deep, {rec});
  EXPECT_EQ(read_file(deep + ".corrupt"), kDeep);
  EXPECT_EQ(cache::TuningDb::load(deep).records().size(), 1u);
}

// ---- 2. files that are not regular files ---------------------------------------------------------------

TEST_F(OutsideInput, AFifoAtAnEntryPathBlocksNoCacheAction) {
  make_cache();
  const std::string key = fold_key(), path = fifo(cache_ + "/" + key + ".lkjit");
  CommandResult r = run("cache ls");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr(key.substr(0, 16) + "  (unreadable: cannot read: it is a FIFO, not a regular file)"));
  r = run("cache stat");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("unreadable 1"));
  r = run("cache explain " + key);
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, HasSubstr("unreadable: cannot read: it is a FIFO"));
  r = run("cache explain lkjit_wtconv_fold_k3_L1_w256_sm90");
  EXPECT_EQ(r.code, 0) << r.output;
  r = run("cache export " + shell_quote(tmp_.path() + "/out.bundle"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("left out " + key + ": " + path + ": cannot read: it is a FIFO"), HasSubstr("0 entries")));
  // compile: the lookup misses, the kernel compiles, and its publish is refused, naming the path.
  r = run("compile --kernel wtconv_fold -k 3 -L 1");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr(path), HasSubstr("not a regular file")));
  // prewarm of that kernel: the same, and it finishes.
  r = run("prewarm --manifest " + shell_quote(file("m.json", R"({"kernels": ["lkjit_wtconv_fold_k3_L1_w256_sm90"]})")) +
          " --arch sm_90 --progress never");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, HasSubstr("could not be stored"));
  // verify removes it, as any entry that does not read.
  r = run("cache verify");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("corrupt: " + path + ": cannot read: it is a FIFO"), HasSubstr("removed")));
  EXPECT_FALSE(fs::exists(fs::symlink_status(path)));
  EXPECT_EQ(run("compile --kernel wtconv_fold -k 3 -L 1").code, 0);
}

TEST_F(OutsideInput, FifosAtLockPathsBlockNothing) {
  // Opening a FIFO for reading waits for a writer: `cache ls` and `stat` ask every entry's lock whether it is
  // held, prune takes .prune.lock, a compile its key's lock.
  make_cache();
  const std::string key = fold_key();
  write_file(cache_ + "/" + key + ".lkjit", entry_of(key));
  fifo(cache_ + "/" + key + ".lock");
  fifo(cache_ + "/.prune.lock");
  CommandResult r = run("cache ls");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr(key.substr(0, 16)), Not(HasSubstr("(compiling)"))));
  r = run("cache stat");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("compiling  0"));
  r = run("cache prune --max-bytes 1");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, HasSubstr(cache_ + "/.prune.lock: cannot use lock file: it is not a regular file"));
  fs::remove(cache_ + "/" + key + ".lkjit");  // a miss: the compile takes the key's lock, which is a FIFO
  r = run("compile --kernel wtconv_fold -k 3 -L 1");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("compiled"));
}

TEST_F(OutsideInput, SocketsAndDevicesAtEntryPathsAreListedUnreadable) {
  make_cache();
  // An entry's path is longer than a socket address holds: the socket sits in a short folder, and the
  // entry's name is a link to it (links are followed, and what they name is checked).
  TempDir short_dir("lks");
  const std::string sock = short_dir.path() + "/s";
  const int s = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(sock.size(), sizeof addr.sun_path);
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock.c_str());
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  fs::create_symlink(sock, cache_ + "/" + std::string(64, 'b') + ".lkjit");
  fs::create_symlink("/dev/zero", cache_ + "/" + std::string(64, 'c') + ".lkjit");  // would be read forever
  CommandResult r = run("cache ls");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr(std::string(16, 'b') + "  (unreadable: cannot read: it is a socket, not a regular file)"),
                              HasSubstr(std::string(16, 'c') + "  (unreadable: cannot read: it is a character device")));
  r = run("cache verify");
  ::close(s);
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, HasSubstr("2 corrupt"));
  EXPECT_TRUE(fs::exists("/dev/zero"));  // the links went, not what they named
  EXPECT_TRUE(fs::exists(fs::symlink_status(sock)));
}

TEST_F(OutsideInput, FifosAndDevicesAsInputFilesAreRefusedNamingThem) {
  const std::string f = fifo(tmp_.path() + "/input.fifo");
  for (const std::string& path : {f, std::string("/dev/zero"), tmp_.path()}) {
    SCOPED_TRACE(path);
    const std::string kind = path == f ? "a FIFO" : path == "/dev/zero" ? "a character device" : "a directory";
    CommandResult r = run("prewarm --arch sm_90 --manifest " + shell_quote(path));
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr("lkjit: error: " + path + ": cannot read manifest: it is " + kind + ", not a regular file"));
    r = run("prewarm --arch sm_90 --tuning-db " + shell_quote(path));
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr(path + ": cannot read tuning database: it is " + kind));
    r = run("cache import " + shell_quote(path));
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_THAT(r.output, HasSubstr(path + ": cannot read bundle file: it is " + kind));
    // The tuning database of run / tune: a warning naming it (layers then take their default tiles).
    r = run(kList, "LKJIT_TUNING_DB=" + shell_quote(path));
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("lkjit: warning: " + path + ": cannot read tuning database: it is " + kind));
    r = run(kList + " --db " + shell_quote(path));
    EXPECT_EQ(r.code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("cannot read tuning database: it is " + kind));
  }
  // The library reads it the same way (TuningDb::load, which layers and the tuner use).
  EXPECT_THROW(cache::TuningDb::load(f), CacheError);
}

TEST_F(OutsideInput, AFifoAtAnImportedEntrysPathRefusesThatEntryOnly) {
  // Two entries exported from one cache (in key order); in the target, a FIFO squats on a's path.
  const std::string from = tmp_.path() + "/from";
  fs::create_directories(from);
  fs::permissions(from, fs::perms::owner_all);
  const std::string a = genuine_meta("a").key, c = genuine_meta("c").key;
  write_file(from + "/" + a + ".lkjit", genuine_entry("a"));
  write_file(from + "/" + c + ".lkjit", genuine_entry("c"));
  const std::string bundle = tmp_.path() + "/two.bundle";
  ASSERT_EQ(run("cache export " + shell_quote(bundle), "", from).code, 0);
  make_cache();
  fifo(cache_ + "/" + a + ".lkjit");
  const CommandResult r = run("cache import " + shell_quote(bundle));
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("import: refused entry " + std::string(a < c ? "1" : "2") + " (key " + a.substr(0, 16) + "): "), HasSubstr("not a regular file"),
                              HasSubstr("2 entries verified, 1 added, 0 already cached, 1 refused"),
                              HasSubstr("1 of its 2 entries could not be imported")));
  EXPECT_TRUE(fs::is_regular_file(cache_ + "/" + c + ".lkjit"));
}

// ---- 3. numbers: decimal only, never truncated ----------------------------------------------------------

TEST_F(OutsideInput, IntegerOptionsAreDecimal) {
  // -k 011 is eleven (LLVM's parser read octal 9), -L 010 is ten (out of range, not 8).
  CommandResult r = run("compile -k 011 --emit-source");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("_k11_"), Not(HasSubstr("_k9_"))));
  r = run("compile -L 010 --emit-source");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit: error: -L=010 is out of range; supported: [0, 8]"));
  r = run("compile -L 03 --emit-source");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("_L3_"));
  // Hex, a sign '+', spaces, fractions and exponents are no decimal integers: usage errors naming the value.
  for (const char* k : {"0x5", "+5", "' 5'", "5.0", "1e1", "5k", "0b101"}) {
    r = run(std::string("compile --emit-source -k ") + k);
    EXPECT_EQ(r.code, 1) << k << ": " << r.output;
    EXPECT_THAT(r.output, AllOf(HasSubstr("-k='"), HasSubstr("' is not a decimal integer; supported: odd k in [1, 31]")))
        << k;
  }
  r = run("run --iters 0x10 --shapes 1:4:8:8:1");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--iters='0x10' is not a decimal integer; supported: [1, 2147483647]"));
  r = run("prewarm -j 0x2 --list --shapes 1:4:8:8");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("-j='0x2' is not a decimal integer"));
}

TEST_F(OutsideInput, ListsShapesAndTilesAreDecimal) {
  // prewarm --k 011 was already 11 (stoll); now every list reads the same way.
  CommandResult r = run("prewarm --arch sm_90 --dtypes f32 --passes fwd --shapes 1:4:8:8 --k 011 --L 01 --list");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("_k11_L1_"), Not(HasSubstr("_k9_"))));
  r = run("prewarm --arch sm_90 --shapes 1:4:8:8 --k 0x5 --list");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--k: '0x5' is not a decimal integer"));
  // "1 1" is no integer (it was 11: spaces inside items were dropped).
  r = run("prewarm --arch sm_90 --shapes 1:4:8:8 --k '1 1' --list");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("'1 1' is not a decimal integer"));
  r = run("prewarm --arch sm_90 --shapes '1:4: 8:8' --k 3 --list");  // spaces around items are fine
  EXPECT_EQ(r.code, 0) << r.output;
  r = run("prewarm --arch sm_90 --shapes 1:4:0x8:8 --list");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--shapes: '0x8' in '1:4:0x8:8' is not a decimal integer"));
  r = run("compile --kernel wtconv_fwd_plane --tile 0,0,01,04,0256 --emit-source");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("_p1_v4_w256_sm90"));
  r = run("compile --kernel wtconv_fwd_plane --tile 0,0,1,4,0x100 --emit-source");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--tile: '0x100' is not a decimal integer"));
  r = run("compile --kernel wtconv_fwd_plane --tile 0,0,1,4,4294967552 --emit-source");
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--tile: '4294967552' is out of range"));
}

TEST_F(OutsideInput, EnvironmentNumbersAreDecimal) {
  make_cache();
  CommandResult r = run("cache stat", "LKJIT_CACHE_MAX_BYTES=010");
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("of 10 B cap"));
  for (const char* v : {"0x10", "+5", "-1", "1e3", "99999999999999999999", "5Q"}) {
    r = run("cache stat", std::string("LKJIT_CACHE_MAX_BYTES=") + shell_quote(v));
    EXPECT_EQ(r.code, 2) << v << ": " << r.output;
    EXPECT_THAT(r.output, AllOf(HasSubstr("LKJIT_CACHE_MAX_BYTES='"), HasSubstr("' is not a size"))) << v;
  }
  // The registry's typed readers (runtime/env.h), for LKJIT_TUNE_BUDGET and any integer variable.
  {
    ScopedEnv budget("LKJIT_TUNE_BUDGET", "2.5");
    EXPECT_EQ(rt::env_seconds("LKJIT_TUNE_BUDGET"), 2.5);
  }
  for (const char* v : {"1e3", "0x10", "inf", "nan", " 10", "0", "-1"}) {
    ScopedEnv budget("LKJIT_TUNE_BUDGET", v);
    try {
      rt::env_seconds("LKJIT_TUNE_BUDGET");
      ADD_FAILURE() << v << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_THAT(e.what(), HasSubstr("LKJIT_TUNE_BUDGET")) << v;
    }
  }
  {
    ScopedEnv budget("LKJIT_TUNE_BUDGET", "011");
    EXPECT_EQ(rt::env_int("LKJIT_TUNE_BUDGET", 1, 100), 11);
  }
  ScopedEnv budget("LKJIT_TUNE_BUDGET", "4294967552");
  EXPECT_THROW(rt::env_int("LKJIT_TUNE_BUDGET", 0, 2147483647), Error);
}

TEST_F(OutsideInput, TuningDatabaseIntegersAreNeverTruncated) {
  // 4294967552 = 2^32 + 256 was read as a tile of 256 threads.
  const std::string records[] = {
      R"({"device": "G", "arch": 90, "sm_count": 132, "spec": "lkjit_wtconv_fold_k3_L1_sm90", "bucket": "B", "shape": [1, 1, 1, 1, 1], "tile": {"threads": 4294967552}})",
      R"({"device": "G", "arch": 4294967386, "sm_count": 132, "spec": "lkjit_wtconv_fold_k3_L1_sm90", "bucket": "B", "shape": [1, 1, 1, 1, 1], "tile": {"threads": 256}})",
      R"({"device": "G", "arch": 90, "sm_count": 132, "spec": "lkjit_wtconv_fold_k3_L1_sm90", "bucket": "B", "shape": [1, 1, 1, 1, 4294967297], "tile": {"threads": 256}})",
      R"({"device": "G", "arch": 90, "sm_count": -1, "spec": "lkjit_wtconv_fold_k3_L1_sm90", "bucket": "B", "shape": [1, 1, 1, 1, 1], "tile": {"threads": 256}})",
  };
  const std::string fields[] = {"tile threads=4294967552", "arch=4294967386", "shape[4] (stride)=4294967297", "sm_count=-1"};
  for (size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(fields[i]);
    const std::string text = R"({"kind": "lkjit-tuning-db", "format": 1, "records": [)" + records[i] + "]}";
    try {
      cache::TuningDb::parse(text, "db.json");
      ADD_FAILURE() << "parsed";
    } catch (const CacheError& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr("db.json: tuning database record 0: " + fields[i] + " is out of range; supported: ["),
                                  HasSubstr("2147483647]")));
    }
  }
  // prewarm --tuning-db reads records on its own: the same refusal, naming the file.
  const std::string db = file("db.json", std::string(R"({"kind": "lkjit-tuning-db", "format": 1, "records": [)") + records[0] + "]}");
  CommandResult r = run("prewarm --arch sm_90 --tuning-db " + shell_quote(db));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr(db + ": tuning database record 0: tile threads=4294967552 is out of range; supported: [0, 2147483647]"));
  r = run(kList, "LKJIT_TUNING_DB=" + shell_quote(db));
  EXPECT_THAT(r.output, HasSubstr("lkjit: warning: " + db + ": tuning database record 0: tile threads=4294967552 is out of range"));
}

TEST_F(OutsideInput, BundleFramingNumbersAreDecimal) {
  make_cache();
  const std::string entry = genuine_entry("a");
  auto bundle = [&](const std::string& size_text, const std::string& count_text) {
    std::string b = "LKJIT-BUNDLE 1\nentry " + size_text + "\n" + entry + "\n";
    return b + "end " + count_text + " " + cache::sha256_hex(b) + "\n";
  };
  EXPECT_EQ(run("cache import " + shell_quote(file("ok.bundle", bundle(std::to_string(entry.size()), "1")))).code, 0);
  // strtoull and sscanf took these: a sign, a space, hex, trailing junk.
  for (const auto& [size, count] : std::vector<std::pair<std::string, std::string>>{
           {"+" + std::to_string(entry.size()), "1"}, {" " + std::to_string(entry.size()), "1"},
           {std::to_string(entry.size()), "0x1"}, {std::to_string(entry.size()), "+1"},
           {std::to_string(entry.size()) + "junk", "1"}, {"18446744073709551617", "1"}}) {
    const CommandResult r = run("cache import " + shell_quote(file("bad.bundle", bundle(size, count))));
    EXPECT_EQ(r.code, 5) << size << " / " << count << ": " << r.output;
    EXPECT_THAT(r.output, AllOf(HasSubstr("not a valid lkjit bundle"), HasSubstr("nothing imported"))) << size << " / " << count;
  }
}

// ---- 7. messages ---------------------------------------------------------------------------------------

TEST_F(OutsideInput, LongArgumentsAreClippedInMessages) {
  const std::string huge(100000, 'x'), digits(100000, '7');
  const std::vector<std::string> cases = {
      "compile --dtype " + huge,
      "compile --kernel " + huge,
      "compile --arch " + huge,
      "compile -k " + digits,
      "compile --tile " + digits + ",1,1,1,1",
      "run --shapes " + huge,
      "run --shapes 1:" + digits + ":8:8:1",
      "prewarm --arch sm_90 --shapes 1:4:8:8 --k " + huge,
      "cache explain " + huge,
      "cache import " + huge,
      "cache " + huge,
      "tune --list --path " + huge,
  };
  for (const auto& args : cases) {
    const CommandResult r = run(args);
    const std::string head = args.substr(0, 40);
    EXPECT_NE(r.code, 0) << head;
    EXPECT_LT(r.output.size(), 2048u) << head << ": " << r.output.substr(0, 300);
    EXPECT_THAT(r.output, HasSubstr("... (100")) << head << ": " << r.output.substr(0, 300);
  }
}

TEST_F(OutsideInput, AnEmptyTileIsRefused) {
  // --tile '' silently meant the default tile.
  const CommandResult r = run("compile --tile '' --emit-source");
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("lkjit: error: --tile is empty; supported: a tile as tile_h,tile_w,planes,vy,threads"));
  EXPECT_EQ(run("compile --emit-source").code, 0);
}

TEST_F(OutsideInput, ExportToANameTheOsRefusesIsBadInput) {
  make_cache();
  // README: exit 2 for a bundle path that cannot be written. It was 5, from the failed rename at the end.
  const std::string long_name = tmp_.path() + "/" + std::string(300, 'n') + ".bundle";
  CommandResult r = run("cache export " + shell_quote(long_name));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("lkjit: error: export "), HasSubstr("cannot be used: File name too long")));
  r = run("prewarm --arch sm_90 --shapes 1:4:8:8 --k 3 --L 1 --bundle " + shell_quote(long_name));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("File name too long"));
  // A path through a regular file as a folder.
  write_file(tmp_.path() + "/plain", "x");
  r = run("cache export " + shell_quote(tmp_.path() + "/plain/out.bundle"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("cannot be used: Not a directory"));
}

}  // namespace
