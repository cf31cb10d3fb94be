// NVRTC compile tests (runtime/jit.cpp, runtime/nvrtc_compiler.cpp), CPU only: every forward
// specialization (k in {1,3,5,7,9,31}, L in 0..5, each dtype) and the backward kernels compile to
// cubins with the default tile for sm_80 and sm_90; error paths carry names and logs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/cubin_check.h"
#include "lkjit/wtconv_kernels.h"
#include "lkjit/error.h"
#include "lkjit/cache.h"
#include "lkjit/generator.h"
#include "lkjit/runtime.h"
#include "runtime/nvrtc_compiler.h"
#include "tests/test_support.h"
#include "tests/parallel_cases.h"

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Contains;
using namespace lkjit;  // NOLINT

using lkjit::test::read_file;
using lkjit::test::ScopedEnv;
using lkjit::test::TempDir;

struct CompileCase {
  OpSpec spec;
  Tile tile;
  std::string name;  // kernel name: unique, and a valid gtest name
};

constexpr int kKs[] = {1, 3, 5, 7, 9, 31};
constexpr DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

// The default tile of the CLI's reference layer (64x96x56x56), as `lkjit compile` picks it.
CompileCase make_case(Kernel kn, DType dt, int k, int L, bool first, int arch) {
  const OpSpec s = wtconv_spec(kn, dt, k, L, first, arch);
  const Tile t = default_tile(s, Shape{64, 96, 56, 56, 1}, DeviceLimits::for_arch(arch));
  return {s, t, kernel_name(s, t)};
}

// Every forward specialization with k in {1,3,5,7,9,31}, L in 0..5 and each dtype (plane and synth
// kernels; level kernels ignore L, fold ignores the dtype). The backward kernels: every (k, L) pair
// with the dtype rotating, (i_k + L) mod 3, so each dtype meets every k and every L.
std::vector<CompileCase> matrix_cases(int arch) {
  std::vector<CompileCase> v;
  for (Kernel kn : {kWTConvFwdPlane, kWTConvFwdSynth})
    for (int k : kKs)
      for (int L = 0; L <= 5; ++L)
        for (DType dt : kDTypes) v.push_back(make_case(kn, dt, k, L, true, arch));
  for (Kernel kn : {kWTConvBwdPlane, kWTConvBwdSynth})
    for (int i = 0; i < 6; ++i)
      for (int L = 0; L <= 5; ++L) v.push_back(make_case(kn, kDTypes[(i + L) % 3], kKs[i], L, true, arch));
  for (int k : kKs) {
    for (Kernel kn : {kWTConvFwdLevel, kWTConvBwdLevel}) {
      for (DType dt : kDTypes) v.push_back(make_case(kn, dt, k, 0, true, arch));
      v.push_back(make_case(kn, DType::kF32, k, 0, false, arch));
    }
    if (k == kKs[0])
      for (DType dt : kDTypes) v.push_back(make_case(kWTConvTranspose, dt, 1, 0, true, arch));
    for (int L = 0; L <= 5; ++L) {
      v.push_back(make_case(kWTConvFold, DType::kF32, k, L, true, arch));
      v.push_back(make_case(kWTConvReduce, DType::kF32, k, L, true, arch));
      if (k <= 9) v.push_back(make_case(kWTConvReduceLane, DType::kF32, k, L, true, arch));  // lane k
    }
  }
  return v;
}

using lkjit::test::expect_cubin;

// Compiles every selected case once, on all cores, into the in-process cache (compile_kernel is
// meant for concurrent callers); serially the sm_90 matrix alone takes minutes. Each test then gets
// its cubin from memory, or recompiles and reports the error itself: failures stay per test.
void prewarm_selected_cases() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::set<std::string> selected = lkjit::test::selected_case_names();  // "ProducesACubin/<kernel name>"
    std::vector<CompileCase> todo;
    for (const auto& cases : {matrix_cases(90), matrix_cases(80)})
      for (const auto& c : cases)
        if (selected.count(c.name)) todo.push_back(c);
    lkjit::test::for_each_on_all_cores(todo.size(), [&](size_t i) {
      try {
        compile_kernel(todo[i].spec, todo[i].tile);
      } catch (...) {  // the test of this case compiles again and reports it
      }
    });
  });
}

class CompileMatrix : public ::testing::TestWithParam<CompileCase> {
 protected:
  // In-memory cache only: these tests are about NVRTC, and must not depend on a disk cache.
  ScopedEnv disable_{"LKJIT_CACHE_DISABLE", "1"};
  ScopedEnv no_dump_{"LKJIT_DUMP_DIR", nullptr};
};

TEST_P(CompileMatrix, ProducesACubin) {
  prewarm_selected_cases();
  const CompileCase& c = GetParam();
  const CompiledKernel ck = compile_kernel(c.spec, c.tile);
  EXPECT_EQ(ck.kernel_name, c.name);
  EXPECT_EQ(ck.arch, c.spec.arch);
  EXPECT_EQ(ck.key.size(), 64u);
  EXPECT_TRUE(ck.origin == "compiled" || ck.origin == "memory") << ck.origin;
  EXPECT_TRUE(ck.seconds >= 0.0) << ck.seconds;  // NaN fails
  expect_cubin(ck.cubin, c.spec.arch, c.name);
}

std::string case_name(const ::testing::TestParamInfo<CompileCase>& info) { return info.param.name; }

INSTANTIATE_TEST_SUITE_P(Sm90, CompileMatrix, ::testing::ValuesIn(matrix_cases(90)), case_name);
INSTANTIATE_TEST_SUITE_P(Sm80, CompileMatrix, ::testing::ValuesIn(matrix_cases(80)), case_name);

TEST(CompileCoverage, EveryArchSeesEveryKLAndDType) {
  // Guards the case lists above against edits that drop a value.
  for (const auto& cases : {matrix_cases(90), matrix_cases(80)})
    for (Kernel kn : {kWTConvFwdPlane, kWTConvFwdSynth, kWTConvFwdLevel, kWTConvFold}) {
      std::set<int> ks, Ls;
      std::set<DType> dts;
      for (const auto& c : cases)
        if (c.spec.kernel == kn) {
          ks.insert(c.spec.get("k"));
          Ls.insert(c.spec.get("L"));
          if (c.spec.get("first")) dts.insert(c.spec.dtype);
        }
      SCOPED_TRACE(to_string(kn));
      EXPECT_EQ(ks, std::set<int>(std::begin(kKs), std::end(kKs)));
      if (kn != kWTConvFwdLevel) EXPECT_EQ(Ls, (std::set<int>{0, 1, 2, 3, 4, 5}));
      if (kn != kWTConvFold) EXPECT_EQ(dts.size(), 3u);
    }
  // Forward: the full k x L x dtype product per arch. Backward: every (k, L) pair, and every dtype
  // with every k and with every L.
  for (const auto& cases : {matrix_cases(90), matrix_cases(80)}) {
    std::set<std::tuple<Kernel, int, int, DType>> full;
    std::set<std::tuple<Kernel, int, int>> kl;
    std::set<std::tuple<Kernel, int, DType>> kd, ld;
    for (const auto& c : cases) {
      full.emplace(c.spec.kernel, c.spec.get("k"), c.spec.get("L"), c.spec.dtype);
      kl.emplace(c.spec.kernel, c.spec.get("k"), c.spec.get("L"));
      kd.emplace(c.spec.kernel, c.spec.get("k"), c.spec.dtype);
      ld.emplace(c.spec.kernel, c.spec.get("L"), c.spec.dtype);
    }
    for (int k : kKs)
      for (int L = 0; L <= 5; ++L)
        for (DType d : kDTypes) {
          for (Kernel kn : {kWTConvFwdPlane, kWTConvFwdSynth})
            EXPECT_TRUE(full.count({kn, k, L, d})) << to_string(kn) << " k=" << k << " L=" << L << " " << to_string(d);
          for (Kernel kn : {kWTConvBwdPlane, kWTConvBwdSynth}) {
            EXPECT_TRUE(kl.count({kn, k, L})) << to_string(kn) << " k=" << k << " L=" << L;
            EXPECT_TRUE(kd.count({kn, k, d})) << to_string(kn) << " k=" << k << " " << to_string(d);
            EXPECT_TRUE(ld.count({kn, L, d})) << to_string(kn) << " L=" << L << " " << to_string(d);
          }
        }
  }
}

// ---- errors ----------------------------------------------------------------------------------------

TEST(CompileErrors, NvrtcTargetsAmpereAndHopper) {
  const auto archs = nvrtc_archs();
  EXPECT_NE(std::find(archs.begin(), archs.end(), 80), archs.end());
  EXPECT_NE(std::find(archs.begin(), archs.end(), 90), archs.end());
  EXPECT_FALSE(nvrtc_version().empty());
  EXPECT_EQ(nvrtc_version(), rt::nvrtc_version());
}

TEST(CompileErrors, ArchBelowSm80IsASpecError) {
  ScopedEnv disable("LKJIT_CACHE_DISABLE", "1");
  const OpSpec s = wtconv_spec(kWTConvFwdPlane, DType::kF32, 5, 3, true, 75);
  try {
    compile_kernel(s, wtconv_tile(0, 0, 1, 4, 256));
    ADD_FAILURE() << "sm_75 compiled";
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("sm_75"));
  }
}

TEST(CompileErrors, ArchUnknownToNvrtcIsACompileErrorListingTheSupportedOnes) {
  GeneratedSource src;
  src.kernel_name = "lkjit_test_trivial_sm61";
  src.source = "extern \"C\" __global__ void lkjit_test_trivial_sm61() {}\n";
  try {
    rt::nvrtc_compile(src, 61);
    ADD_FAILURE() << "sm_61 compiled";
  } catch (const CompileError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kCompile);
    EXPECT_THAT(e.what(), AllOf(HasSubstr(src.kernel_name), HasSubstr("sm_61"), HasSubstr("sm_80"), HasSubstr("sm_90")));
  }
  // The same source is fine for a supported arch (the failure above was the arch).
  const auto out = rt::nvrtc_compile(src, 80);
  expect_cubin(out.cubin, 80, src.kernel_name);
}

TEST(CompileErrors, SyntaxErrorCarriesKernelNameOptionsAndLog) {
  const TempDir tmp("lkjit-compile-test");
  const std::string& dump = tmp.path();
  ScopedEnv dump_env("LKJIT_DUMP_DIR", dump.c_str());
  GeneratedSource src;
  src.kernel_name = "lkjit_test_broken_sm90";
  src.source = "extern \"C\" __global__ void lkjit_test_broken_sm90() { lkjit_undeclared_identifier = 1; }\n";
  try {
    rt::nvrtc_compile(src, 90);
    ADD_FAILURE() << "a syntax error compiled";
  } catch (const CompileError& e) {
    // The identifier appears only in NVRTC's log, so this checks the log is in the message.
    EXPECT_THAT(e.what(), AllOf(HasSubstr("lkjit_test_broken_sm90"), HasSubstr("lkjit_undeclared_identifier"),
                                HasSubstr("--gpu-architecture=sm_90"), HasSubstr("log:")));
  }
  // LKJIT_DUMP_DIR gets the source and the log of the failed compile.
  EXPECT_EQ(read_file(dump + "/lkjit_test_broken_sm90.cu"), src.source);
  EXPECT_THAT(read_file(dump + "/lkjit_test_broken_sm90.log"), HasSubstr("lkjit_undeclared_identifier"));
}

TEST(CompileErrors, GeneratedSourceNeedsItsEmbeddedHeaders) {
  const OpSpec s = wtconv_spec(kWTConvFold, DType::kF32, 3, 1, true, 90);
  GeneratedSource src = generate(s, wtconv_tile(0, 0, 0, 0, 256));
  src.headers = nullptr;  // NVRTC then cannot resolve the template include
  try {
    rt::nvrtc_compile(src, 90);
    ADD_FAILURE() << "compiled without its headers";
  } catch (const CompileError& e) {
    EXPECT_THAT(e.what(), AllOf(HasSubstr(src.kernel_name), HasSubstr("wtconv/fold.cuh")));
  }
}

}  // namespace

// The arch-specific target (sm_90a: wgmma, setmaxnreg) is its own kernel: name, key and NVRTC option.
TEST(ArchSpecific, Sm90aCompilesUnderItsOwnNameAndKey) {
  ScopedEnv disable("LKJIT_CACHE_DISABLE", "1");
  OpSpec s = wtconv_spec(kWTConvFold, DType::kF32, 3, 1, true, 90);
  const Tile t = wtconv_tile(0, 0, 0, 0, 256);
  OpSpec a = s;
  a.arch_specific = true;
  EXPECT_EQ(kernel_name(a, t), "lkjit_wtconv_fold_k3_L1_w256_sm90a");
  EXPECT_EQ(a.target(), "sm_90a");
  const auto back = parse_kernel_name(kernel_name(a, t));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->spec, a);
  EXPECT_FALSE(parse_kernel_name("lkjit_wtconv_fold_k3_L1_w256_sm90b").has_value());
  const auto ka = kernel_key_inputs(a, t), ks = kernel_key_inputs(s, t);
  EXPECT_NE(ka.key, ks.key);
  EXPECT_THAT(ka.options, Contains("--gpu-architecture=sm_90a"));
  const auto ck = compile_kernel(a, t);
  expect_cubin(ck.cubin, 90, ck.kernel_name);
  EXPECT_EQ(parse_target("sm_90a"), (ArchTarget{90, true}));
  EXPECT_EQ(parse_target("90"), (ArchTarget{90, false}));
  EXPECT_THROW(parse_arch("sm_90a"), SpecError);  // the plain parser names a compute capability only
}
