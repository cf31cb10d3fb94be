// Tests of the kernel cache: content keys (cache/key.cpp), entry encoding and the on-disk store
// (cache/store.cpp), and compile_kernel's memory / disk / NVRTC lookup order (runtime/jit.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "cache/entry.h"
#include "generator/family.h"
#include "cache/key.h"
#include "cache/store.h"
#include "lkjit/wtconv_kernels.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/runtime.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/cubin_fixture.h"
#include "tests/test_support.h"

namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace lkjit;         // NOLINT
using namespace lkjit::cache;  // NOLINT

using lkjit::test::read_file;
using lkjit::test::ScopedEnv;
using lkjit::test::TempDir;
using lkjit::test::write_file;

constexpr char kTmpPrefix[] = "lkjit-cache-test";

unsigned mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

// ---- keys ------------------------------------------------------------------------------------------

const std::map<std::string, std::string> kHeaders = {{"abi/p.h", "struct P { int a; };"}, {"wtconv/x.cuh", "#pragma once\n"}};

KeyInputs base_inputs() {
  KeyInputs in;
  in.kernel_name = "lkjit_test_sm90";
  in.source = "#include \"wtconv/x.cuh\"\nstruct Cfg {};\n";
  in.headers = &kHeaders;
  in.options = {"--gpu-architecture=sm_90", "--std=c++17"};
  in.arch = 90;
  in.nvrtc_version = "13.0";
  in.generator_version = 1;
  return in;
}

TEST(CacheKey, IsStableLowercaseHex) {
  const std::string k = make_key(base_inputs());
  EXPECT_TRUE(std::regex_match(k, std::regex("[0-9a-f]{64}"))) << k;
  EXPECT_EQ(make_key(base_inputs()), k);
  // Same header contents in another map object: same key (contents are hashed, not addresses).
  const auto copy = kHeaders;
  KeyInputs in = base_inputs();
  in.headers = &copy;
  EXPECT_EQ(make_key(in), k);
  // The display name is not an input: the source already names the kernel.
  in.kernel_name = "another_name";
  EXPECT_EQ(make_key(in), k);
  // A function of the digests: recomputable from the inputs an entry records.
  EXPECT_EQ(make_key(summarize(base_inputs())), k);
  EntryMeta meta;
  set_inputs(meta, summarize(base_inputs()));
  EXPECT_EQ(make_key(inputs_of(meta)), k);
}

TEST(CacheKey, ChangesWithEveryInput) {
  std::vector<std::pair<std::string, std::string>> keys{{"base", make_key(base_inputs())}};
  auto add = [&](const std::string& what, KeyInputs in) { keys.emplace_back(what, make_key(in)); };
  KeyInputs in;
  in = base_inputs(); in.source += " ";                     add("source", in);
  auto bytes = kHeaders; bytes["abi/p.h"] += " ";
  in = base_inputs(); in.headers = &bytes;                  add("header bytes", in);
  auto renamed = kHeaders; renamed.erase("abi/p.h"); renamed["abi/q.h"] = kHeaders.at("abi/p.h");
  in = base_inputs(); in.headers = &renamed;                add("header name", in);
  auto added = kHeaders; added["extra.h"] = "";
  in = base_inputs(); in.headers = &added;                  add("header added", in);
  in = base_inputs(); in.headers = nullptr;                 add("no headers", in);
  in = base_inputs(); in.options.push_back("-lineinfo");    add("option added", in);
  in = base_inputs(); in.options[1] = "--std=c++20";        add("option changed", in);
  in = base_inputs(); in.options = {"--gpu-architecture=sm_90--std=c++17"};  add("options joined", in);
  in = base_inputs(); in.arch = 80;                         add("arch", in);
  in = base_inputs(); in.nvrtc_version = "13.1";            add("nvrtc version", in);
  in = base_inputs(); in.generator_version = 2;             add("generator version", in);
  // A byte moved from the source into a header must not collide (fields are length-prefixed).
  auto moved = kHeaders; moved["wtconv/x.cuh"] = "\n" + moved["wtconv/x.cuh"];
  in = base_inputs(); in.source.pop_back(); in.headers = &moved;  add("byte moved across fields", in);
  std::map<std::string, std::string> seen;
  for (const auto& [what, key] : keys) {
    auto [it, fresh] = seen.emplace(key, what);
    EXPECT_TRUE(fresh) << "'" << what << "' gives the same key as '" << it->second << "'";
  }
}

TEST(CacheKey, Sha256KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// ---- entries ---------------------------------------------------------------------------------------

EntryMeta meta_for(const std::string& key) {
  EntryMeta m;
  m.key = key;
  m.kernel_name = "lkjit_wtconv_fold_k3_L1_w256_sm90";
  m.spec = "wtconv_fold f32 k=3 L=1 sm_90 w256";
  m.arch = 90;
  m.nvrtc_version = "13.0";
  return m;
}

const std::string kKeyA(64, 'a'), kKeyB(64, 'b');
const std::string kPayload("\x7f" "ELF\0\n\"x", 8);  // NUL, newline and quote must survive

// Inputs as compile_kernel records them (format 2), with stand-in digests.
EntryMeta meta_with_inputs(const std::string& key) {
  EntryMeta m = meta_for(key);
  m.generator_version = 1;
  m.options = {"--gpu-architecture=sm_90", "--std=c++17"};
  m.source_sha256 = sha256_hex("source");
  m.header_sha256 = {{"wtconv/fold.cuh", sha256_hex("fold")}, {"abi/wtconv_params.h", sha256_hex("abi")}};
  return m;
}

std::string golden(const std::string& name) { return read_file(std::string(LKJIT_SOURCE_DIR) + "/tests/data/" + name); }

TEST(CacheEntry, FormatIsPinned) {
  // A change here changes what caches hold: bump kEntryFormatVersion and add a golden for it.
  ASSERT_EQ(kEntryFormatVersion, 2);
  const std::string v2 = golden("cache_entry_v2.lkjit");
  ASSERT_FALSE(v2.empty()) << "tests/data/cache_entry_v2.lkjit is missing";
  EXPECT_EQ(encode_entry(meta_with_inputs(kKeyA), kPayload), v2);
  std::string why;
  const auto e = decode_entry(v2, kKeyA, &why);
  ASSERT_TRUE(e.has_value()) << why;
  EXPECT_EQ(e->payload, kPayload);
  EXPECT_EQ(e->meta.format, 2);
  const KeySummary in = inputs_of(e->meta), want = inputs_of(meta_with_inputs(kKeyA));
  EXPECT_EQ(in.options, want.options);
  EXPECT_EQ(in.source_sha256, want.source_sha256);
  EXPECT_EQ(in.header_sha256, want.header_sha256);
  EXPECT_EQ(in.generator_version, 1);
}

TEST(CacheEntry, StillReadsFormat1) {
  // Keys are derived as before, so the entries of older caches stay valid: readable, not rebuilt.
  const std::string v1 = golden("cache_entry_v1.lkjit");
  ASSERT_FALSE(v1.empty()) << "tests/data/cache_entry_v1.lkjit is missing";
  std::string why;
  const auto e = decode_entry(v1, kKeyA, &why);
  ASSERT_TRUE(e.has_value()) << why;
  EXPECT_EQ(e->payload, kPayload);
  EXPECT_EQ(e->meta.format, 1);
  EXPECT_EQ(e->meta.kernel_name, meta_for(kKeyA).kernel_name);
  EXPECT_TRUE(e->meta.header_sha256.empty());
  std::string bad = v1;
  bad.back() ^= 0x01;
  EXPECT_FALSE(decode_entry(bad, kKeyA, &why));
  EXPECT_THAT(why, HasSubstr("checksum"));
}

TEST(CacheEntry, RoundTrips) {
  for (const std::string& payload : {kPayload, std::string(), std::string(100000, '\0')}) {
    const std::string bytes = encode_entry(meta_for(kKeyA), payload);
    std::string why;
    const auto e = decode_entry(bytes, kKeyA, &why);
    ASSERT_TRUE(e.has_value()) << why;
    EXPECT_EQ(e->payload, payload);
    EXPECT_EQ(e->meta.key, kKeyA);
    EXPECT_EQ(e->meta.kernel_name, meta_for(kKeyA).kernel_name);
    EXPECT_EQ(e->meta.spec, meta_for(kKeyA).spec);
    EXPECT_EQ(e->meta.arch, 90);
    EXPECT_EQ(e->meta.nvrtc_version, "13.0");
    EXPECT_EQ(e->meta.size, payload.size());
    EXPECT_EQ(e->meta.sha256, sha256_hex(payload));
  }
  const std::string bytes = encode_entry(meta_with_inputs(kKeyA), kPayload);
  const auto e = decode_entry(bytes, kKeyA, nullptr);
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(key_differences(inputs_of(e->meta), inputs_of(meta_with_inputs(kKeyA))).empty());
}

TEST(CacheEntry, DetectsTruncationAtEveryLength) {
  const std::string bytes = encode_entry(meta_for(kKeyA), kPayload);
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::string why;
    EXPECT_FALSE(decode_entry(bytes.substr(0, n), kKeyA, &why).has_value()) << "prefix of " << n << " bytes decoded";
    EXPECT_FALSE(why.empty()) << n;
  }
  std::string why;
  EXPECT_FALSE(decode_entry(bytes.substr(0, bytes.size() - 1), kKeyA, &why));
  EXPECT_THAT(why, AllOf(HasSubstr("payload is 7 bytes"), HasSubstr("header says 8")));
  EXPECT_FALSE(decode_entry(bytes + "!", kKeyA, &why));
  EXPECT_THAT(why, HasSubstr("payload is 9 bytes"));
}

TEST(CacheEntry, DetectsAFlippedPayloadByte) {
  const std::string bytes = encode_entry(meta_for(kKeyA), kPayload);
  for (size_t i = bytes.size() - kPayload.size(); i < bytes.size(); ++i) {
    std::string bad = bytes, why;
    bad[i] ^= 0x01;
    EXPECT_FALSE(decode_entry(bad, kKeyA, &why).has_value()) << i;
    EXPECT_THAT(why, HasSubstr("checksum")) << i;
  }
}

TEST(CacheEntry, DetectsAFlippedByteAnywhere) {
  // The magic line's checksum covers the metadata too: a damaged kernel name or spec is caught.
  const std::string bytes = encode_entry(meta_with_inputs(kKeyA), kPayload);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes, why;
    bad[i] ^= 0x04;
    EXPECT_FALSE(decode_entry(bad, kKeyA, &why).has_value()) << "byte " << i << " of " << bytes.size();
    EXPECT_FALSE(why.empty()) << i;
  }
}

TEST(CacheEntry, DetectsWrongKeyBadMagicAndBadMetadata) {
  const std::string bytes = encode_entry(meta_for(kKeyA), kPayload);
  std::string why;
  EXPECT_FALSE(decode_entry(bytes, kKeyB, &why));
  EXPECT_THAT(why, AllOf(HasSubstr("key echo"), HasSubstr(kKeyA), HasSubstr(kKeyB)));
  std::string bad = bytes;
  bad[0] = 'X';
  EXPECT_FALSE(decode_entry(bad, kKeyA, &why));
  EXPECT_THAT(why, HasSubstr("bad magic"));
  bad = bytes;
  bad.replace(bytes.find(" 2 "), 3, " 9 ");  // a future format version
  EXPECT_FALSE(decode_entry(bad, kKeyA, &why));
  EXPECT_THAT(why, HasSubstr("format version"));
  bad = bytes;
  bad[bytes.find('{')] = '[';
  EXPECT_FALSE(decode_entry(bad, kKeyA, &why));
  EXPECT_THAT(why, HasSubstr("JSON"));
  bad = bytes;
  bad.replace(bad.find("\"size\":8"), 8, "\"size\":9");
  EXPECT_FALSE(decode_entry(bad, kKeyA, &why));
  EXPECT_THAT(why, HasSubstr("header says 9"));
}

// ---- disk store ------------------------------------------------------------------------------------

TEST(DiskStore, StoresAndLoadsInAFreshPrivateDirectory) {
  TempDir tmp(kTmpPrefix);
  const std::string dir = tmp.path() + "/a/b/cache";  // created on first use, parents included
  DiskStore store(dir);
  const EntryMeta a = lkjit::test::test_meta("a"), b = lkjit::test::test_meta("b");
  const std::string payload = lkjit::test::test_payload(a);
  EXPECT_EQ(store.path_for(a.key), dir + "/" + a.key + ".lkjit");
  store.store(a, payload);
  EXPECT_EQ(mode_of(dir), 0700u);
  EXPECT_TRUE(fs::exists(store.path_for(a.key)));
  std::string why;
  const auto got = store.load(a.key, &why);
  ASSERT_TRUE(got.has_value()) << why;
  EXPECT_EQ(*got, payload);
  EXPECT_EQ(why, "");
  // A miss is not an error.
  EXPECT_FALSE(store.load(b.key, &why).has_value());
  EXPECT_EQ(why, "");
  // Publishing is temp-then-rename: nothing but the entry is left behind.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  EXPECT_EQ(names, std::vector<std::string>{a.key + ".lkjit"});
  // Overwriting publishes the new bytes.
  const std::string second = lkjit::test::test_payload(a, 5000);
  store.store(a, second);
  EXPECT_EQ(store.load(a.key).value_or(""), second);
  store.evict(a.key);
  EXPECT_FALSE(fs::exists(store.path_for(a.key)));
  EXPECT_FALSE(store.load(a.key).has_value());
}

TEST(DiskStore, CorruptEntriesAreRemovedAndReported) {
  TempDir tmp(kTmpPrefix);
  DiskStore store(tmp.path());
  const EntryMeta a = lkjit::test::test_meta("a"), b = lkjit::test::test_meta("b");
  const std::string payload = lkjit::test::test_payload(a);
  const std::string path = store.path_for(a.key);
  const std::string good = encode_entry(a, payload);
  std::string flipped = good;
  flipped.back() ^= 0x20;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"garbage", "not a cache entry"}, {"truncated", good.substr(0, good.size() - 3)}, {"flipped", flipped}};
  for (const auto& [what, bytes] : cases) {
    SCOPED_TRACE(what);
    write_file(path, bytes);
    std::string why;
    EXPECT_FALSE(store.load(a.key, &why).has_value());
    EXPECT_THAT(why, AllOf(HasSubstr(path), HasSubstr("entry removed")));
    EXPECT_FALSE(fs::exists(path)) << "corrupt entry left in place";
  }
  // An intact entry filed under another key is corrupt too (key echo).
  write_file(store.path_for(b.key), good);
  std::string why;
  EXPECT_FALSE(store.load(b.key, &why).has_value());
  EXPECT_THAT(why, HasSubstr("key echo"));
  // The store still works afterwards.
  store.store(a, payload);
  EXPECT_EQ(store.load(a.key).value_or(""), payload);
}

TEST(DiskStore, RefusesDirectoriesWritableByOthers) {
  for (unsigned mode : {0777u, 0720u, 0702u}) {
    TempDir tmp(kTmpPrefix);
    ASSERT_EQ(::chmod(tmp.path().c_str(), mode), 0);
    DiskStore store(tmp.path());
    for (int op = 0; op < 2; ++op) {
      try {
        if (op == 0) store.store(meta_for(kKeyA), kPayload);
        else store.load(kKeyA);
        ADD_FAILURE() << "mode " << std::oct << mode << " accepted by " << (op ? "load" : "store");
      } catch (const CacheError& e) {
        EXPECT_EQ(e.code(), ErrorCode::kCache);
        EXPECT_THAT(e.what(), AllOf(HasSubstr(tmp.path()), HasSubstr("writable")));
      }
    }
    EXPECT_FALSE(fs::exists(store.path_for(kKeyA)));
  }
  // Read and execute bits for others are fine; only write bits are refused.
  TempDir ok(kTmpPrefix);
  ASSERT_EQ(::chmod(ok.path().c_str(), 0755), 0);
  DiskStore store(ok.path());
  EXPECT_NO_THROW(store.store(meta_for(kKeyA), kPayload));
  EXPECT_EQ(mode_of(ok.path()), 0755u);
}

TEST(DiskStore, ListsEntriesWithTheirProblems) {
  TempDir tmp(kTmpPrefix);
  DiskStore store(tmp.path());
  const EntryMeta a = lkjit::test::test_meta("a"), b = lkjit::test::test_meta("other", 80);
  const std::string payload = lkjit::test::test_payload(a);
  store.store(a, payload);
  store.store(b, lkjit::test::test_payload(b));
  const std::string bad_key(64, 'c');
  write_file(store.path_for(bad_key), "junk");
  write_file(tmp.path() + "/README", "not an entry");  // ignored: not *.lkjit
  const std::string dangling_key(64, 'd');                 // a link whose target is gone: there, but unreadable
  std::filesystem::create_symlink(tmp.path() + "/gone", store.path_for(dangling_key));
  std::map<std::string, DiskStore::Listed> listed;
  for (auto& l : store.list()) listed[l.key] = l;
  ASSERT_EQ(listed.size(), 4u);
  EXPECT_FALSE(listed[dangling_key].ok);
  EXPECT_EQ(listed[dangling_key].problem,
            "cannot read: No such file or directory (a symbolic link to " + tmp.path() + "/gone)");
  EXPECT_EQ(store.list(/*verify=*/false).size(), 4u);
  EXPECT_TRUE(listed[a.key].ok) << listed[a.key].problem;
  EXPECT_EQ(listed[a.key].path, store.path_for(a.key));
  EXPECT_EQ(listed[a.key].meta.kernel_name, a.kernel_name);
  EXPECT_EQ(listed[a.key].meta.size, payload.size());
  EXPECT_TRUE(listed[b.key].ok) << listed[b.key].problem;
  EXPECT_EQ(listed[b.key].meta.kernel_name, "lkjit_test_other_sm80");
  EXPECT_EQ(listed[b.key].meta.arch, 80);
  EXPECT_FALSE(listed[bad_key].ok);
  EXPECT_EQ(listed[bad_key].path, store.path_for(bad_key));
  EXPECT_FALSE(listed[bad_key].problem.empty());
}

TEST(DiskStore, DefaultDirectoryFollowsTheEnvironment) {
  ScopedEnv a("LKJIT_CACHE_DIR", "/some/where");
  ScopedEnv b("XDG_CACHE_HOME", "/xdg");
  ScopedEnv c("HOME", "/home/u");
  EXPECT_EQ(default_cache_dir(), "/some/where");
  EXPECT_EQ(lkjit::cache_dir(), "/some/where");
  ::unsetenv("LKJIT_CACHE_DIR");
  EXPECT_EQ(default_cache_dir(), "/xdg/lkjit");
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(default_cache_dir(), "/home/u/.cache/lkjit");
}

// ---- compile_kernel through the caches --------------------------------------------------------------
// The memory cache is process-wide: each test uses a fold tile (threads) no other test compiles, so
// its first lookup is a miss.

class CompileCache : public ::testing::Test {
 protected:
  TempDir tmp_{kTmpPrefix};
  const std::string dir_ = tmp_.path() + "/kernels";
  ScopedEnv cache_dir_{"LKJIT_CACHE_DIR", dir_.c_str()};
  ScopedEnv enabled_{"LKJIT_CACHE_DISABLE", nullptr};
  ScopedEnv no_dump_{"LKJIT_DUMP_DIR", nullptr};
  const OpSpec spec_ = wtconv_spec(kWTConvFold, DType::kF32, 3, 1, true, 90);
  mutable std::map<std::string, std::string> closure_;

  // The key compile_kernel must use: every documented input, computed here independently.
  std::string expected_key(const Tile& t) const {
    const GeneratedSource src = generate(spec_, t);
    KeyInputs in;
    in.source = src.source;
    closure_ = lkjit::gen::include_closure(embedded_headers(), "wtconv/fold.cuh");  // what the fold reaches
    in.headers = &closure_;
    in.options = rt::nvrtc_options(spec_.arch);
    in.arch = spec_.arch;
    in.nvrtc_version = rt::nvrtc_version();
    in.generator_version = kGeneratorVersion;
    return make_key(in);
  }
};

bool is_elf(const std::string& b) { return b.size() > 4 && b.compare(0, 4, "\x7f" "ELF") == 0; }

TEST_F(CompileCache, CompilesOnceThenHitsMemoryAndWritesDisk) {
  const Tile t = wtconv_tile(0, 0, 0, 0, 64);
  const CompiledKernel a = compile_kernel(spec_, t);
  EXPECT_EQ(a.origin, "compiled");
  EXPECT_EQ(a.key, expected_key(t));
  EXPECT_TRUE(is_elf(a.cubin));
  EXPECT_TRUE(a.seconds >= 0.0);
  // The entry is on disk under its key, verified and carrying its metadata.
  DiskStore store(dir_);
  EXPECT_TRUE(fs::exists(dir_ + "/" + a.key + ".lkjit"));
  EXPECT_EQ(mode_of(dir_), 0700u);
  EXPECT_EQ(store.load(a.key).value_or(""), a.cubin);
  const auto listed = store.list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(listed[0].ok) << listed[0].problem;
  EXPECT_EQ(listed[0].meta.kernel_name, a.kernel_name);
  EXPECT_EQ(listed[0].meta.arch, 90);
  EXPECT_EQ(listed[0].meta.nvrtc_version, nvrtc_version());
  EXPECT_THAT(listed[0].meta.spec, AllOf(HasSubstr(spec_.to_string()), HasSubstr(t.to_string())));
  const CompiledKernel b = compile_kernel(spec_, t);
  EXPECT_EQ(b.origin, "memory");
  EXPECT_EQ(b.key, a.key);
  EXPECT_EQ(b.cubin, a.cubin);
  EXPECT_EQ(b.kernel_name, a.kernel_name);
}

TEST_F(CompileCache, ReadsAnEntryFromDisk) {
  const Tile t = wtconv_tile(0, 0, 0, 0, 96);
  // A stand-in cubin of this kernel under its key and inputs: returned as is proves it came from disk, not NVRTC.
  const KeyInputsInfo in = kernel_key_inputs(spec_, t);
  ASSERT_EQ(in.key, expected_key(t));
  const std::string stand_in = lkjit::test::test_cubin(90, {in.kernel_name}, 3000);
  DiskStore(dir_).store(lkjit::test::meta_from_inputs(in), stand_in);
  const CompiledKernel k = compile_kernel(spec_, t);
  EXPECT_EQ(k.origin, "disk");
  EXPECT_EQ(k.cubin, stand_in);
  EXPECT_EQ(compile_kernel(spec_, t).origin, "memory");
}

TEST_F(CompileCache, RecompilesOverACorruptEntry) {
  const Tile t = wtconv_tile(0, 0, 0, 0, 160);
  const std::string key = expected_key(t);
  fs::create_directories(dir_);
  fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::replace);
  write_file(dir_ + "/" + key + ".lkjit", "LKJIT-KERNEL-CACHE 1\n{}\ntruncated");
  const CompiledKernel k = compile_kernel(spec_, t);
  EXPECT_EQ(k.origin, "compiled");
  EXPECT_TRUE(is_elf(k.cubin));
  EXPECT_EQ(DiskStore(dir_).load(key).value_or(""), k.cubin) << "the corrupt entry was not replaced";
}

TEST_F(CompileCache, RefusesAnUnsafeDirectory) {
  const Tile t = wtconv_tile(0, 0, 0, 0, 192);
  fs::create_directories(dir_);
  ASSERT_EQ(::chmod(dir_.c_str(), 0777), 0);
  try {
    compile_kernel(spec_, t);
    ADD_FAILURE() << "compiled through a world-writable cache";
  } catch (const CacheError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr(dir_), HasSubstr("chmod 700")));
  }
}

TEST_F(CompileCache, DisabledCacheTouchesNoDisk) {
  ScopedEnv disable("LKJIT_CACHE_DISABLE", "1");
  const Tile t = wtconv_tile(0, 0, 0, 0, 224);
  const CompiledKernel k = compile_kernel(spec_, t);
  EXPECT_EQ(k.origin, "compiled");
  EXPECT_TRUE(is_elf(k.cubin));
  EXPECT_FALSE(fs::exists(dir_));
}

}  // namespace
