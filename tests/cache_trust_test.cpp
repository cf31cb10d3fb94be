// Tests of what the cache trusts (cache/elf.cpp, cache/trust.cpp, cache/signing.cpp, signed bundles in
// cache/bundle.cpp): the CUDA ELF reader on real NVRTC cubins of every arch and on each kind of damage,
// entries that are not what they say or not what a lookup asked for, Ed25519 keys and signatures, and
// bundles that are unsigned, signed by an untrusted key or changed after signing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <nvrtc.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cache/bundle.h"
#include "cache/elf.h"
#include "cache/entry.h"
#include "cache/key.h"
#include "cache/signing.h"
#include "cache/store.h"
#include "cache/trust.h"
#include "lkjit/cache.h"
#include "lkjit/error.h"
#include "lkjit/runtime.h"
#include "lkjit/wtconv_kernels.h"
#include "runtime/nvrtc_loader.h"
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
using lkjit::test::test_cubin;
using lkjit::test::test_meta;
using lkjit::test::test_payload;
using lkjit::test::write_file;

constexpr char kTmpPrefix[] = "lkjit-trust-test";
constexpr char kKernel[] = "lkjit_wtconv_fold_k5_L3_w256_sm90";

// A real cubin from the installed NVRTC for --gpu-architecture=<target>, defining kKernel and a second
// kernel (so that "defines X" is a choice among several). Compiled once per target.
const std::string& nvrtc_cubin(const std::string& target) {
  static std::map<std::string, std::string> done;
  auto it = done.find(target);
  if (it != done.end()) return it->second;
  const std::string src = std::string("extern \"C\" __global__ void ") + kKernel +
                          "(float* p, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] *= 2.f; }\n"
                          "extern \"C\" __global__ void lkjit_other(float* p) { p[threadIdx.x] = 0.f; }\n";
  const auto& nv = lkjit::rt::nvrtc();  // the NVRTC the library loaded
  nvrtcProgram prog = nullptr;
  EXPECT_EQ(nv.nvrtcCreateProgram(&prog, src.c_str(), "k.cu", 0, nullptr, nullptr), NVRTC_SUCCESS);
  const std::string arch = "--gpu-architecture=" + target;
  const char* opts[] = {arch.c_str()};
  std::string cubin;
  if (nv.nvrtcCompileProgram(prog, 1, opts) == NVRTC_SUCCESS) {
    size_t n = 0;
    nv.nvrtcGetCUBINSize(prog, &n);
    cubin.resize(n);
    nv.nvrtcGetCUBIN(prog, cubin.data());
  }
  nv.nvrtcDestroyProgram(&prog);
  return done.emplace(target, std::move(cubin)).first->second;
}

template <class T>
void poke(std::string& b, size_t at, T v) {
  std::memcpy(&b[at], &v, sizeof v);
}
template <class T>
T peek(const std::string& b, size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

// ---- the ELF reader on real cubins ------------------------------------------------------------------

TEST(CubinReader, ReadsNvrtcCubinsOfEveryArch) {
  // The SM number as NVRTC 13 encodes it; sm_90a and sm_100a share their base arch's e_flags.
  const std::vector<std::pair<std::string, int>> targets = {{"sm_80", 80},   {"sm_86", 86},   {"sm_89", 89},
                                                            {"sm_90", 90},   {"sm_90a", 90},  {"sm_100", 100},
                                                            {"sm_100a", 100}, {"sm_120", 120}};
  const auto supported = nvrtc_archs();
  for (const auto& [target, sm] : targets) {
    SCOPED_TRACE(target);
    if (std::find(supported.begin(), supported.end(), sm) == supported.end()) continue;
    const std::string& b = nvrtc_cubin(target);
    ASSERT_FALSE(b.empty()) << "NVRTC did not compile for " << target;
    std::string why;
    const auto info = read_cubin(b, &why);
    ASSERT_TRUE(info.has_value()) << why;
    EXPECT_EQ(info->sm, sm);
    EXPECT_EQ(info->type, 2);
    EXPECT_GE(info->abi_version, 7);
    auto kernels = info->kernels;
    std::sort(kernels.begin(), kernels.end());
    EXPECT_EQ(kernels, (std::vector<std::string>{"lkjit_other", kKernel}));
    EXPECT_EQ(cubin_problem(b, sm, kKernel), "");
    EXPECT_EQ(cubin_problem(b, sm == 90 ? 80 : 90, kKernel),
              fmt::format("cubin is for sm_{}, expected sm_{}", sm, sm == 90 ? 80 : 90));
    EXPECT_THAT(cubin_problem(b, sm, "evil"), AllOf(HasSubstr("defines no kernel evil"), HasSubstr(kKernel)));
  }
}

TEST(CubinReader, OnlyGlobalFunctionsCountAsKernels) {
  // A section symbol and an undefined weak object are in every cubin: neither names a kernel.
  const std::string& b = nvrtc_cubin("sm_90");
  EXPECT_THAT(cubin_problem(b, 90, ".text." + std::string(kKernel)), HasSubstr("defines no kernel"));
  EXPECT_THAT(cubin_problem(b, 90, ".nv.reservedSmem.offset0"), HasSubstr("defines no kernel"));
}

TEST(CubinReader, RefusesEveryTruncation) {
  const std::string& b = nvrtc_cubin("sm_90");
  for (size_t n = 0; n < b.size(); ++n) {
    std::string why;
    EXPECT_FALSE(read_cubin(std::string_view(b).substr(0, n), &why).has_value()) << "a " << n << "-byte prefix passed";
    EXPECT_FALSE(why.empty()) << n;
  }
  std::string why;
  read_cubin(b.substr(0, 40), &why);
  EXPECT_EQ(why, "cubin is 40 bytes, shorter than an ELF header (64 bytes)");
  read_cubin(b.substr(0, b.size() - 1), &why);
  EXPECT_THAT(why, HasSubstr("past the end of the " + std::to_string(b.size() - 1) + "-byte image"));
}

TEST(CubinReader, NamesEachKindOfDamage) {
  const std::string& good = nvrtc_cubin("sm_90");
  const uint64_t shoff = peek<uint64_t>(good, 40);
  const uint16_t shnum = peek<uint16_t>(good, 60);
  // The symbol table's section header, and its string table's.
  size_t symtab = 0;
  for (size_t i = 0; i < shnum; ++i)
    if (peek<uint32_t>(good, shoff + i * 64 + 4) == 2) symtab = shoff + i * 64;
  ASSERT_NE(symtab, 0u);
  struct Case {
    const char* what;
    std::function<void(std::string&)> damage;
    const char* reason;
  };
  const std::vector<Case> cases = {
      {"garbage", [](std::string& b) { b = std::string(100, 'x'); }, "payload is not an ELF image"},
      {"32-bit", [](std::string& b) { b[4] = 1; }, "ELF class is 1, expected 2"},
      {"big endian", [](std::string& b) { b[5] = 2; }, "data encoding is 2"},
      {"x86-64", [](std::string& b) { poke<uint16_t>(b, 18, 62); }, "ELF machine is 62, expected 190 (EM_CUDA)"},
      {"other OS/ABI", [](std::string& b) { b[7] = 0; }, "OS/ABI is 0x00"},
      {"shared object", [](std::string& b) { poke<uint16_t>(b, 16, 3); }, "ELF type is 3"},
      {"no SM", [](std::string& b) { poke<uint32_t>(b, 48, 0x06000004u); }, "name no SM"},
      {"section table past the end", [&](std::string& b) { poke<uint64_t>(b, 40, b.size() - 64); }, "section table"},
      {"section table offset wraps", [](std::string& b) { poke<uint64_t>(b, 40, ~uint64_t(0) - 63); }, "section table"},
      {"header size", [](std::string& b) { poke<uint16_t>(b, 58, 40); }, "section header size is 40"},
      {"no sections", [](std::string& b) { poke<uint16_t>(b, 60, 0); }, "no section table"},
      {"name table index", [&](std::string& b) { poke<uint16_t>(b, 62, shnum); }, "section name table index"},
      {"section past the end", [&](std::string& b) { poke<uint64_t>(b, symtab + 32, uint64_t(1) << 40); }, "runs past the end"},
      {"section size wraps", [&](std::string& b) { poke<uint64_t>(b, symtab + 32, ~uint64_t(0)); }, "runs past the end"},
      {"symbol size", [&](std::string& b) { poke<uint64_t>(b, symtab + 56, 16); }, "entries of 16 bytes"},
      {"symbol table link", [&](std::string& b) { poke<uint32_t>(b, symtab + 40, 0); }, "not a string table"},
      {"symbol name outside its table",
       [&](std::string& b) {
         // Every global function's name offset beyond the string table.
         const uint64_t off = peek<uint64_t>(b, symtab + 24), size = peek<uint64_t>(b, symtab + 32);
         for (uint64_t at = off; at < off + size; at += 24)
           if (static_cast<uint8_t>(b[at + 4]) == 0x12) poke<uint32_t>(b, at, 0x7fffffff);
       },
       "a name outside its string table"},
      {"no symbol table", [&](std::string& b) { poke<uint32_t>(b, symtab + 4, 1); }, "no symbol table"},
      {"program headers past the end", [&](std::string& b) { poke<uint64_t>(b, 32, b.size() - 8); }, "program headers"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    std::string b = good;
    c.damage(b);
    std::string why;
    EXPECT_FALSE(read_cubin(b, &why).has_value());
    EXPECT_THAT(why, HasSubstr(c.reason));
    EXPECT_THAT(cubin_problem(b, 90, kKernel), HasSubstr(c.reason));
  }
  // The kernel's symbol made local, or moved to a data section: no kernel of that name any more.
  std::string b = good;
  const uint64_t off = peek<uint64_t>(b, symtab + 24), size = peek<uint64_t>(b, symtab + 32);
  for (uint64_t at = off; at < off + size; at += 24)
    if (static_cast<uint8_t>(b[at + 4]) == 0x12) b[at + 4] = 0x02;  // STB_LOCAL
  EXPECT_THAT(cubin_problem(b, 90, kKernel), HasSubstr("it defines none"));
}

TEST(CubinReader, SurvivesRandomDamage) {
  // Any bytes give an answer, never a crash or a read outside the buffer (CI also runs this under ASan).
  const std::string& good = nvrtc_cubin("sm_90");
  std::mt19937 rng(24);
  for (int i = 0; i < 3000; ++i) {
    std::string b = good;
    const int flips = 1 + static_cast<int>(rng() % 8);
    for (int f = 0; f < flips; ++f) {
      // Mostly the header and the section table, where offsets live.
      const size_t at = (rng() % 2) ? rng() % 64 : peek<uint64_t>(good, 40) + rng() % (good.size() - peek<uint64_t>(good, 40));
      b[at] = static_cast<char>(rng());
    }
    std::string why;
    const auto info = read_cubin(b, &why);
    EXPECT_TRUE(info.has_value() || !why.empty());
  }
}

TEST(CubinReader, TheTestFixtureLooksLikeNvrtcOutput) {
  std::string why;
  const auto info = read_cubin(test_cubin(90, {"k_a", "k_b"}, 4096), &why);
  ASSERT_TRUE(info.has_value()) << why;
  EXPECT_EQ(info->sm, 90);
  EXPECT_EQ(info->abi_version, 8);
  EXPECT_EQ(info->kernels, (std::vector<std::string>{"k_a", "k_b"}));
  EXPECT_EQ(test_cubin(80, {"k"}, 4096).size(), 4096u);
  // The older encoding (ABI version 7: the SM in bits 0..7) is read too.
  std::string v7 = test_cubin(86, {"k"});
  v7[7] = 0x33;
  v7[8] = 7;
  poke<uint32_t>(v7, 48, 0x00560556u);
  EXPECT_EQ(cubin_problem(v7, 86, "k"), "");
}

// ---- entries: what they say and what was asked -----------------------------------------------------

Entry entry_of(const EntryMeta& m, const std::string& payload) {
  std::string why;
  auto e = decode_entry(encode_entry(m, payload), "", &why);
  EXPECT_TRUE(e.has_value()) << why;
  return *e;
}

TEST(EntryTrust, AGoodEntryPasses) {
  const EntryMeta m = test_meta("a");
  const Entry e = entry_of(m, test_payload(m));
  EXPECT_EQ(entry_problem(e), "");
  EXPECT_EQ(entry_problem(e, lookup_for(m.key, inputs_of(m))), "");
}

TEST(EntryTrust, RefusesEntriesThatAreNotWhatTheySay) {
  const EntryMeta a = test_meta("a"), b = test_meta("b");
  // Metadata and payload of key b filed under key a (the key echo says a, so the checksum is fine).
  EntryMeta moved = b;
  moved.key = a.key;
  EXPECT_THAT(entry_problem(entry_of(moved, test_payload(b))), HasSubstr("does not match its recorded inputs"));
  // A 100-byte garbage payload under correct metadata.
  EXPECT_THAT(entry_problem(entry_of(a, std::string(100, '\x5a'))), HasSubstr("payload is not an ELF image"));
  // Kernel `evil` on sm_12345, with a key recomputed to match.
  EntryMeta evil = a;
  evil.kernel_name = "evil";
  evil.arch = 12345;
  evil.key = make_key(inputs_of(evil));
  EXPECT_EQ(entry_problem(entry_of(evil, test_payload(a))), "arch sm_12345 is out of range; supported: sm_30 to sm_255");
  evil.arch = 90;
  evil.key = make_key(inputs_of(evil));
  EXPECT_EQ(entry_problem(entry_of(evil, test_payload(a))),
            "cubin defines no kernel evil (it defines lkjit_test_a_sm90)");
  // The metadata's arch is not the cubin's.
  EntryMeta arch = test_meta("a", 80);
  EXPECT_EQ(entry_problem(entry_of(arch, test_cubin(90, {arch.kernel_name}))), "cubin is for sm_90, expected sm_80");
  // A truncated cubin, checksummed as it is.
  const std::string cubin = test_payload(a);
  EXPECT_THAT(entry_problem(entry_of(a, cubin.substr(0, cubin.size() - 10))), HasSubstr("runs past the end"));
  // The kernel name is checked as an identifier before it is looked for.
  EntryMeta control = a;
  control.kernel_name = "k\x1b[2J";
  control.key = make_key(inputs_of(control));
  EXPECT_EQ(entry_problem(entry_of(control, test_payload(a))), "kernel name 'k\\x1b[2J' is not a C identifier");
  // Format 1 recorded no inputs.
  Entry v1 = entry_of(a, test_payload(a));
  v1.meta.format = 1;
  EXPECT_THAT(entry_problem(v1), HasSubstr("format 1 entry records no key inputs"));
}

TEST(EntryTrust, RefusesEntriesThatAreNotWhatTheLookupAsked) {
  const EntryMeta m = test_meta("a");
  const Entry e = entry_of(m, test_payload(m));
  const Lookup want = lookup_for(m.key, inputs_of(m));
  Lookup w = want;
  w.key = test_meta("b").key;
  EXPECT_THAT(entry_problem(e, w), HasSubstr("expected " + w.key.substr(0, 16)));
  w = want;
  w.kernel_name = "lkjit_test_b_sm90";
  EXPECT_EQ(entry_problem(e, w), "kernel lkjit_test_a_sm90, expected lkjit_test_b_sm90");
  w = want;
  w.arch = 80;
  EXPECT_EQ(entry_problem(e, w), "arch sm_90, expected sm_80");
  w = want;
  w.nvrtc_version = "13.1";
  EXPECT_EQ(entry_problem(e, w), "NVRTC 13.0, expected 13.1");
  w = want;
  w.generator_version = 7;
  EXPECT_EQ(entry_problem(e, w), "generator v1, expected v7");
  // The kernel name is not hashed: an entry of another kernel that copies this lookup's inputs passes its
  // own checks (its cubin defines what it claims), and only the lookup's name catches it.
  EntryMeta other = m;
  other.kernel_name = "lkjit_test_b_sm90";
  const Entry forged = entry_of(other, test_payload(other));
  EXPECT_EQ(entry_problem(forged), "");
  EXPECT_EQ(entry_problem(forged, want), "kernel lkjit_test_b_sm90, expected lkjit_test_a_sm90");
}

TEST(EntryTrust, TheDiskStoreRemovesAndCountsWhatItRefuses) {
  TempDir tmp(kTmpPrefix);
  const DiskStore store(tmp.path());
  const EntryMeta a = test_meta("a");
  const Lookup want = lookup_for(a.key, inputs_of(a));
  store.store(a, std::string(100, 'g'));  // store() takes bytes; every read checks them
  const uint64_t before = refusals(Source::kDisk);
  std::string why;
  EXPECT_FALSE(store.load(want, &why).has_value());
  EXPECT_THAT(why, AllOf(HasSubstr(store.path_for(a.key)), HasSubstr("refused: payload is not an ELF image"),
                         HasSubstr("entry removed")));
  EXPECT_FALSE(fs::exists(store.path_for(a.key)));
  EXPECT_EQ(refusals(Source::kDisk), before + 1);
  EXPECT_EQ(cache_refusals().disk, before + 1);
  // Listing and verify refuse it too; a good entry loads.
  store.store(a, std::string(100, 'g'));
  const auto listed = store.list(/*verify=*/true);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_FALSE(listed[0].ok);
  EXPECT_THAT(listed[0].problem, HasSubstr("refused: payload is not an ELF image"));
  const auto checked = KernelCache(tmp.path()).verify();
  ASSERT_EQ(checked.size(), 1u);
  EXPECT_FALSE(checked[0].ok);
  EXPECT_FALSE(fs::exists(store.path_for(a.key))) << "verify left a refused entry in place";
  store.store(a, test_payload(a));
  EXPECT_EQ(store.load(want, &why).value_or(""), test_payload(a)) << why;
  // An entry of another kernel under the same inputs: refused for this lookup, and removed.
  EntryMeta other = a;
  other.kernel_name = "lkjit_test_b_sm90";
  store.store(other, test_payload(other));
  EXPECT_FALSE(store.load(want, &why).has_value());
  EXPECT_THAT(why, HasSubstr("refused: kernel lkjit_test_b_sm90, expected lkjit_test_a_sm90"));
}

// ---- compile_kernel never serves a refused entry ----------------------------------------------------

class CompileTrust : public ::testing::Test {
 protected:
  TempDir tmp_{kTmpPrefix};
  const std::string dir_ = tmp_.path() + "/kernels";
  ScopedEnv cache_dir_{"LKJIT_CACHE_DIR", dir_.c_str()};
  ScopedEnv enabled_{"LKJIT_CACHE_DISABLE", nullptr};
  ScopedEnv log_{"LKJIT_LOG", "1"};
  const OpSpec spec_ = wtconv_spec(kWTConvFold, DType::kF32, 5, 3, true, 90);

  // Plants `m` + payload under the lookup's key, then looks the kernel up as a fresh process would.
  void expect_refused(const Tile& t, EntryMeta m, const std::string& payload, const std::string& reason) {
    CompiledKernel drop;
    drop.key = kernel_key_inputs(spec_, t).key;
    evict_compiled(drop);
    DiskStore store(dir_);
    store.ensure_dir();
    m.key = drop.key;
    write_file(store.path_for(drop.key), encode_entry(m, payload));
    const uint64_t before = cache_refusals().disk;
    ::testing::internal::CaptureStderr();
    const CompiledKernel k = compile_kernel(spec_, t);
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(k.origin, "compiled") << "a refused entry was served";
    EXPECT_EQ(cubin_problem(k.cubin, 90, k.kernel_name), "");
    EXPECT_THAT(log, AllOf(HasSubstr("bad cache entry"), HasSubstr(reason), HasSubstr("entry removed")));
    EXPECT_GE(cache_refusals().disk, before + 1);
    std::string why;
    EXPECT_EQ(store.load(lookup_for(k.key, inputs_of(store.read(k.key)->meta)), &why).value_or(""), k.cubin)
        << "the refused entry was not rebuilt: " << why;
  }
};

TEST_F(CompileTrust, RebuildsOverGarbageAForeignKernelAndAnotherKeysEntry) {
  const Tile garbage = wtconv_tile(0, 0, 0, 0, 288), foreign = wtconv_tile(0, 0, 0, 0, 320),
             moved = wtconv_tile(0, 0, 0, 0, 352), arch = wtconv_tile(0, 0, 0, 0, 384);
  const EntryMeta inputs = lkjit::test::meta_from_inputs(kernel_key_inputs(spec_, garbage));
  expect_refused(garbage, inputs, std::string(100, '\x01'), "payload is not an ELF image");
  // kernel `evil` on sm_12345: caught by the lookup before anything else.
  EntryMeta evil = lkjit::test::meta_from_inputs(kernel_key_inputs(spec_, foreign));
  evil.kernel_name = "evil";
  evil.arch = 12345;
  expect_refused(foreign, evil, test_cubin(90, {"evil"}), "refused: kernel evil, expected lkjit_wtconv_fold");
  // Metadata and payload of another (genuine) key, under this key.
  const EntryMeta b = test_meta("b");
  expect_refused(moved, b, test_payload(b), "refused: kernel lkjit_test_b_sm90, expected");
  // This kernel's inputs and name, but a cubin for sm_80.
  const EntryMeta m = lkjit::test::meta_from_inputs(kernel_key_inputs(spec_, arch));
  expect_refused(arch, m, test_cubin(80, {m.kernel_name}), "cubin is for sm_80, expected sm_90");
}

// ---- keys and signatures -----------------------------------------------------------------------------

struct KeyFiles {
  std::string priv, pub;
};
KeyFiles write_key_pair(const std::string& dir, const std::string& name) {
  const KeyPairPem k = generate_key_pair();
  KeyFiles f{dir + "/" + name + ".pem", dir + "/" + name + ".pub.pem"};
  write_file(f.priv, k.private_pem);
  ::chmod(f.priv.c_str(), 0600);
  write_file(f.pub, k.public_pem);
  return f;
}

TEST(Signing, SignsAndVerifies) {
  const KeyPairPem k = generate_key_pair();
  const Signer s = Signer::from_pem(k.private_pem, "test key");
  EXPECT_EQ(s.key_id().size(), kKeyIdHexDigits);
  const TrustedKeys t = TrustedKeys::from_pem(k.public_pem, "test keys");
  ASSERT_EQ(t.key_ids(), std::vector<std::string>{s.key_id()});
  EXPECT_EQ(TrustedKeys::from_pem(s.public_pem(), "x").key_ids(), t.key_ids());
  const std::string sig = s.sign("bundle", "bytes");
  EXPECT_EQ(sig.size(), kSignatureBytes);
  EXPECT_TRUE(t.verify("bundle", "bytes", sig, s.key_id()).ok);
  // Another byte, another context, another length, a damaged signature: each fails.
  EXPECT_THAT(t.verify("bundle", "bytez", sig, s.key_id()).reason, HasSubstr("bad signature"));
  EXPECT_THAT(t.verify("remote-entry", "bytes", sig, s.key_id()).reason, HasSubstr("bad signature"));
  std::string bad = sig;
  bad[10] ^= 1;
  EXPECT_FALSE(t.verify("bundle", "bytes", bad, s.key_id()).ok);
  EXPECT_THAT(t.verify("bundle", "bytes", sig.substr(1), s.key_id()).reason, HasSubstr("signature is 63 bytes"));
  // A key that is not in the set, even with a valid signature of its own.
  const Signer other = Signer::from_pem(generate_key_pair().private_pem, "other");
  EXPECT_THAT(t.verify("bundle", "bytes", other.sign("bundle", "bytes"), other.key_id()).reason,
              HasSubstr("which is not trusted"));
  // A trusted key's id on another key's signature.
  EXPECT_THAT(t.verify("bundle", "bytes", other.sign("bundle", "bytes"), s.key_id()).reason, HasSubstr("bad signature"));
}

TEST(Signing, TheSignedMessageIsDomainSeparatedAndFramed) {
  const std::string m = signed_message("bundle", "ab", "xyz");
  EXPECT_EQ(m, std::string("lkjit-signature-v1\ncontext 6 bundle\nkey 2 ab\nbytes 3\nxyz"));
  // A byte moved between fields gives another message.
  EXPECT_NE(signed_message("bundl", "eab", "xyz"), m);
  EXPECT_NE(signed_message("bundle", "a", "bxyz"), m);
}

TEST(Signing, KeyFilesAreChecked) {
  TempDir tmp(kTmpPrefix);
  const KeyFiles k = write_key_pair(tmp.path(), "signer");
  EXPECT_EQ(Signer::load(k.priv).key_id().size(), kKeyIdHexDigits);
  for (unsigned mode : {0644u, 0640u, 0604u, 0660u}) {
    SCOPED_TRACE(mode);
    ::chmod(k.priv.c_str(), mode);
    try {
      Signer::load(k.priv);
      ADD_FAILURE() << "a private key of mode " << std::oct << mode << " was used";
    } catch (const CacheError& e) {
      EXPECT_THAT(e.what(), AllOf(HasSubstr(k.priv), HasSubstr(fmt::format("mode {:04o}", mode)), HasSubstr("chmod 600")));
    }
  }
  ::chmod(k.priv.c_str(), 0400);
  EXPECT_NO_THROW(Signer::load(k.priv));
  auto refused = [](const std::function<void()>& fn, const std::string& what) {
    try {
      fn();
      ADD_FAILURE() << "accepted";
    } catch (const CacheError& e) {
      EXPECT_THAT(e.what(), HasSubstr(what));
    }
  };
  refused([&] { Signer::load(k.pub); }, "mode 0644");  // a public key file is no private key (and readable)
  const std::string pub_private = tmp.path() + "/pub-as-private.pem";
  write_file(pub_private, read_file(k.pub));
  ::chmod(pub_private.c_str(), 0600);
  refused([&] { Signer::load(pub_private); }, "not a PEM private key");
  refused([&] { Signer::load(tmp.path() + "/missing.pem"); }, "missing.pem: cannot read the signing key");
  refused([&] { Signer::load(tmp.path()); }, "is not a regular file");
  // Keys of another algorithm are refused by type.
  EVP_PKEY* ec = EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256");
  ASSERT_NE(ec, nullptr);
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PUBKEY(bio, ec);
  char* data = nullptr;
  const long ec_pub_size = BIO_get_mem_data(bio, &data);  // first: argument order is unspecified (clang reads data first)
  const std::string ec_pub(data, static_cast<size_t>(ec_pub_size));
  BIO_free(bio);
  EVP_PKEY_free(ec);
  refused([&] { TrustedKeys::from_pem(ec_pub, "ec.pem"); }, "ec.pem: trusted key 1 is of type");
  // Trusted key files: several keys in one file, several files; a file with none is an error.
  const KeyFiles k2 = write_key_pair(tmp.path(), "second");
  const std::string both = tmp.path() + "/both.pem";
  write_file(both, read_file(k.pub) + read_file(k2.pub));
  EXPECT_EQ(TrustedKeys::load({both}).size(), 2u);
  EXPECT_EQ(TrustedKeys::load({k.pub, k2.pub, both}).size(), 2u);
  const std::string empty = tmp.path() + "/empty.pem";
  write_file(empty, "no key here\n");
  refused([&] { TrustedKeys::load({k.pub, empty}); }, "empty.pem: holds no PEM public key");
}

// ---- signed bundles ------------------------------------------------------------------------------------

class SignedBundle : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* tag : {"a", "b"}) from_.store(test_meta(tag), test_payload(test_meta(tag), 2000));
    keys_ = write_key_pair(tmp_.path(), "signer");
    other_ = write_key_pair(tmp_.path(), "other");
  }
  TrustedKeys trusted() const { return TrustedKeys::load({keys_.pub}); }
  // import_bundle's CacheError message, or "" when it imported.
  std::string import_error(const TrustedKeys* t) const {
    try {
      import_bundle(to_, file_, t);
      return "";
    } catch (const CacheError& e) {
      return e.what();
    }
  }
  TempDir tmp_{kTmpPrefix};
  const DiskStore from_{tmp_.path() + "/from"}, to_{tmp_.path() + "/to"};
  const std::string file_ = tmp_.path() + "/kernels.bundle";
  KeyFiles keys_, other_;
};

TEST_F(SignedBundle, ASignedBundleImportsWithItsKeyTrusted) {
  const Signer s = Signer::load(keys_.priv);
  const auto out = export_bundle(from_, {}, file_, &s);
  EXPECT_EQ(out.signer, s.key_id());
  const std::string bytes = read_file(file_);
  EXPECT_THAT(bytes, HasSubstr("\nsignature ed25519 " + s.key_id() + " "));
  const TrustedKeys t = trusted();
  const auto in = import_bundle(to_, file_, &t);
  EXPECT_EQ(in.added.size(), 2u);
  EXPECT_EQ(in.signer, s.key_id());
  EXPECT_TRUE(in.refused.empty());
  // Without trusted keys it imports too; the signature is read, not checked.
  const DiskStore third(tmp_.path() + "/third");
  EXPECT_EQ(import_bundle(third, file_).added.size(), 2u);
}

TEST_F(SignedBundle, RefusesUnsignedUntrustedAndTamperedBundles) {
  const TrustedKeys t = trusted();
  export_bundle(from_, {}, file_);  // unsigned
  EXPECT_THAT(import_error(&t), AllOf(HasSubstr(file_), HasSubstr("it is not signed"), HasSubstr("nothing imported")));
  const Signer stranger = Signer::load(other_.priv);
  export_bundle(from_, {}, file_, &stranger);
  EXPECT_THAT(import_error(&t), AllOf(HasSubstr("signed by key " + stranger.key_id().substr(0, 16)),
                                      HasSubstr("which is not trusted")));
  const Signer s = Signer::load(keys_.priv);
  export_bundle(from_, {}, file_, &s);
  const std::string good = read_file(file_);
  // A byte of an entry changed after signing, with the end line's checksum recomputed to match, as an
  // attacker would: only the signature catches it.
  std::string b = good;
  const size_t sig_at = b.rfind("signature ");
  const size_t end_at = b.rfind("end ", sig_at);
  b[end_at / 2] ^= 0x01;
  b.replace(end_at, sig_at - end_at, fmt::format("end 2 {}\n", sha256_hex(std::string_view(b).substr(0, end_at))));
  write_file(file_, b);
  EXPECT_THAT(import_error(&t), HasSubstr("bad signature"));
  // The signature line itself changed, or swapped for the other key's id.
  b = good;
  b[b.size() - 5] = b[b.size() - 5] == '0' ? '1' : '0';
  write_file(file_, b);
  EXPECT_THAT(import_error(&t), HasSubstr("bad signature"));
  b = good;
  b.replace(sig_at + 18, 64, stranger.key_id());
  write_file(file_, b);
  EXPECT_THAT(import_error(&t), HasSubstr("which is not trusted"));
  // The signature line dropped: unsigned.
  write_file(file_, good.substr(0, sig_at));
  EXPECT_THAT(import_error(&t), HasSubstr("it is not signed"));
  EXPECT_TRUE(to_.list(false).empty()) << "a refused bundle imported something";
  // Malformed signature lines are framing errors.
  write_file(file_, good.substr(0, sig_at) + "signature ed25519 abc def\n");
  EXPECT_THAT(import_error(nullptr), HasSubstr("malformed signature line"));
}

TEST_F(SignedBundle, RefusesEntriesThatAreNotWhatTheySayAndImportsTheRest) {
  // A bundle a trusted signer made, holding a made-up entry: signatures say who wrote it, not that it is right.
  const EntryMeta a = test_meta("a"), b = test_meta("b");
  EntryMeta moved = b;
  moved.key = a.key;
  EntryMeta evil = test_meta("e");
  evil.kernel_name = "evil";
  evil.arch = 12345;
  evil.key = make_key(inputs_of(evil));
  const std::vector<std::string> entries = {encode_entry(moved, test_payload(b)), encode_entry(b, std::string(100, 'g')),
                                            encode_entry(evil, test_payload(a)), encode_entry(a, test_payload(a))};
  std::string body = "LKJIT-BUNDLE 2\n";
  for (const auto& e : entries) body += "entry " + std::to_string(e.size()) + "\n" + e + "\n";
  body += "end 4 " + sha256_hex(body) + "\n";
  const Signer s = Signer::load(keys_.priv);
  body += "signature ed25519 " + s.key_id() + " " + to_hex(s.sign("bundle", body)) + "\n";
  write_file(file_, body);
  const TrustedKeys t = trusted();
  const uint64_t before = refusals(Source::kBundle);
  const auto r = import_bundle(to_, file_, &t);
  EXPECT_EQ(r.entries, 4u);
  EXPECT_EQ(r.added, std::vector<std::string>{a.key});
  ASSERT_EQ(r.refused.size(), 3u);
  EXPECT_THAT(r.refused[0], AllOf(HasSubstr("entry 1"), HasSubstr("does not match its recorded inputs")));
  EXPECT_THAT(r.refused[1], AllOf(HasSubstr("entry 2 (lkjit_test_b_sm90"), HasSubstr("payload is not an ELF image")));
  EXPECT_THAT(r.refused[2], AllOf(HasSubstr("entry 3 (evil"), HasSubstr("arch sm_12345 is out of range")));
  EXPECT_EQ(refusals(Source::kBundle), before + 3);
  EXPECT_EQ(to_.list(false).size(), 1u);
}

// The CLI: import names each refused entry and exits 5; export signs with LKJIT_CACHE_SIGNING_KEY and refuses a
// key file others can read; verify removes entries that are not what they say.
TEST_F(SignedBundle, TheCliNamesRefusalsAndKeyFiles) {
  using lkjit::test::run_command;
  using lkjit::test::shell_quote;
  auto cli = [&](const std::string& env, const std::string& args) {
    return run_command("env -u LKJIT_CACHE_SIGNING_KEY -u LKJIT_CACHE_TRUSTED_KEYS LKJIT_CACHE_DIR=" +
                       shell_quote(from_.dir()) + " " + env + " " + shell_quote(LKJIT_CLI_PATH) + " " + args + " 2>&1");
  };
  auto r = cli("LKJIT_CACHE_SIGNING_KEY=" + shell_quote(keys_.priv), "cache export " + shell_quote(file_));
  EXPECT_EQ(r.code, 0) << r.output;
  const Signer s = Signer::load(keys_.priv);
  EXPECT_THAT(r.output, HasSubstr("2 entries, 5.3 KiB, signed by key " + s.key_id().substr(0, 16)));
  const std::string to = "LKJIT_CACHE_DIR=" + shell_quote(to_.dir()) + " ";
  r = cli(to + "LKJIT_CACHE_TRUSTED_KEYS=" + shell_quote(other_.pub + ":" + keys_.pub), "cache import " + shell_quote(file_));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("signed by key " + s.key_id().substr(0, 16) + " (trusted, signature verified)"),
                              HasSubstr("2 entries verified, 2 added, 0 already cached, 0 refused")));
  r = cli(to + "LKJIT_CACHE_TRUSTED_KEYS=" + shell_quote(other_.pub), "cache import " + shell_quote(file_));
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("bundle refused: signed by key"), HasSubstr("which is not trusted")));
  ::chmod(keys_.priv.c_str(), 0644);
  r = cli("LKJIT_CACHE_SIGNING_KEY=" + shell_quote(keys_.priv), "cache export " + shell_quote(file_ + "2"));
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr(keys_.priv + ": the signing key has mode 0644"), HasSubstr("chmod 600")));
  EXPECT_FALSE(fs::exists(file_ + "2"));
  // A made-up entry planted in a cache: verify refuses and removes it; export leaves it out.
  EntryMeta evil = test_meta("e");
  evil.kernel_name = "evil";
  evil.arch = 12345;
  evil.key = make_key(inputs_of(evil));
  write_file(from_.path_for(evil.key), encode_entry(evil, std::string(100, 'g')));
  r = cli("", "cache export " + shell_quote(file_));
  EXPECT_THAT(r.output, AllOf(HasSubstr("left out " + evil.key), HasSubstr("arch sm_12345 is out of range"),
                              HasSubstr("2 entries")));
  r = cli("", "cache verify");
  EXPECT_EQ(r.code, 5) << r.output;
  EXPECT_THAT(r.output, AllOf(HasSubstr("corrupt: " + from_.path_for(evil.key) + ": refused: arch sm_12345"),
                              HasSubstr("2 entries ok, 1 corrupt")));
  EXPECT_FALSE(fs::exists(from_.path_for(evil.key)));
}

// Golden bundles (tests/data): a format 1 bundle still imports without trusted keys, and a signed format 2
// bundle with its public key verifies. Their entries hold a synthetic cubin, so they stay valid whatever
// NVRTC or generator is installed (entries record their inputs; the key is recomputed from them).
TEST(BundleGoldens, Format1And2StillImport) {
  ASSERT_EQ(kBundleFormatVersion, 2);
  const std::string data = std::string(LKJIT_SOURCE_DIR) + "/tests/data/";
  TempDir tmp(kTmpPrefix);
  const DiskStore store(tmp.path() + "/c");
  const auto v1 = import_bundle(store, data + "bundle_v1_cubin.lkjit-bundle");
  EXPECT_EQ(v1.format, 1);
  EXPECT_EQ(v1.added.size(), 1u);
  EXPECT_TRUE(v1.refused.empty()) << v1.refused[0];
  const TrustedKeys t = TrustedKeys::load({data + "bundle_v2_signer.pub.pem"});
  try {
    import_bundle(store, data + "bundle_v1_cubin.lkjit-bundle", &t);
    ADD_FAILURE() << "an unsigned format 1 bundle imported with trusted keys set";
  } catch (const CacheError& e) {
    EXPECT_THAT(e.what(), HasSubstr("it is not signed"));
  }
  const auto v2 = import_bundle(store, data + "bundle_v2_signed.lkjit-bundle", &t);
  EXPECT_EQ(v2.format, 2);
  EXPECT_EQ(v2.entries, 2u);
  EXPECT_EQ(v2.signer, t.key_ids()[0]);
  EXPECT_TRUE(v2.refused.empty());
  // The format 1 golden of the earlier version held a made-up entry: it reads, and its entry is refused.
  const auto old = import_bundle(store, data + "bundle_v1.lkjit-bundle");
  ASSERT_EQ(old.refused.size(), 1u);
  EXPECT_THAT(old.refused[0], HasSubstr("does not match its recorded inputs"));
}

// Writes the goldens above (run once by hand: --gtest_also_run_disabled_tests
// --gtest_filter='*WriteGoldens*' with LKJIT_GOLDEN_DIR=tests/data); a signing key is made for it and only
// its public half is kept.
TEST(BundleGoldens, DISABLED_WriteGoldens) {
  const char* out = std::getenv("LKJIT_GOLDEN_DIR");
  ASSERT_NE(out, nullptr);
  TempDir tmp(kTmpPrefix);
  const DiskStore store(tmp.path() + "/c");
  const EntryMeta g = test_meta("golden"), h = test_meta("golden2", 80);
  store.store(g, test_payload(g, 512));
  std::string entry = encode_entry(g, test_payload(g, 512));
  std::string v1 = "LKJIT-BUNDLE 1\nentry " + std::to_string(entry.size()) + "\n" + entry + "\n";
  v1 += "end 1 " + sha256_hex(v1) + "\n";
  write_file(std::string(out) + "/bundle_v1_cubin.lkjit-bundle", v1);
  export_bundle(store, {}, std::string(out) + "/bundle_v2.lkjit-bundle");
  store.store(h, test_payload(h, 512));
  const KeyFiles k = write_key_pair(tmp.path(), "golden");
  const Signer s = Signer::load(k.priv);
  export_bundle(store, {}, std::string(out) + "/bundle_v2_signed.lkjit-bundle", &s);
  write_file(std::string(out) + "/bundle_v2_signer.pub.pem", read_file(k.pub));
}

}  // namespace
