// NVRTC compiles of the depthwise-convolution kernels (templates/dwconv/), CPU only: hand-built instance units in
// the generator's translation-unit form, compiled through lkjit::rt::nvrtc_compile with the embedded templates,
// for a pairwise sample (not the full product) of kernel x dtype x (kh, kw) x stride x dilation x arch x tile
// variant. Each cubin must be an sm_80 / sm_90 CUDA ELF defining its entry, with no local memory (no spills:
// the frame size in .nv.info is 0) and its register count near the generator's estimate, which the tile
// rejection relies on. The resources are read from the cubin's .nv.info (no driver, no cuobjdump).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "tests/cubin_check.h"
#include "generator/ops/dwconv_geometry.h"
#include "lkjit/error.h"
#include "tests/dwconv_instances.h"
#include "tests/parallel_cases.h"
#include "lkjit/generator.h"
#include "runtime/nvrtc_compiler.h"

namespace {

using namespace lkjit;  // NOLINT
namespace gd = lkjit::gen::dwconv;

// ---- cubin resources (.nv.info: EIATTR_REGCOUNT 0x2f, EIATTR_FRAME_SIZE 0x11, both EIFMT_SVAL) ----------

struct Resources {
  int regs = -1, frame = -1;
};

template <class T>
T read_at(const std::string& b, size_t off) {
  T v{};
  if (off + sizeof(T) <= b.size()) std::memcpy(&v, b.data() + off, sizeof(T));
  return v;
}

// Registers and frame size of function `fn` in a CUDA ELF64 cubin; -1 where absent.
Resources cubin_resources(const std::string& b, const std::string& fn) {
  Resources r;
  if (b.size() < 64 || b.compare(0, 4, "\x7f" "ELF") != 0) return r;
  const uint64_t shoff = read_at<uint64_t>(b, 0x28);
  const uint16_t shentsize = read_at<uint16_t>(b, 0x3a), shnum = read_at<uint16_t>(b, 0x3c);
  const uint16_t shstrndx = read_at<uint16_t>(b, 0x3e);
  auto sec = [&](int i, int field, bool wide) -> uint64_t {
    const size_t o = shoff + size_t(i) * shentsize + field;
    return wide ? read_at<uint64_t>(b, o) : read_at<uint32_t>(b, o);
  };
  auto cstr = [&](uint64_t off) { return off < b.size() ? std::string(b.c_str() + off) : std::string(); };
  const uint64_t shstr = sec(shstrndx, 0x18, true);
  int info = -1, symtab = -1;
  for (int i = 0; i < shnum; ++i) {
    if (cstr(shstr + sec(i, 0, false)) == ".nv.info") info = i;
    if (sec(i, 4, false) == 2) symtab = i;  // SHT_SYMTAB
  }
  if (info < 0 || symtab < 0) return r;
  const uint64_t syms = sec(symtab, 0x18, true), strs = sec(static_cast<int>(sec(symtab, 0x28, false)), 0x18, true);
  auto sym_name = [&](uint32_t idx) { return cstr(strs + read_at<uint32_t>(b, syms + uint64_t(idx) * 24)); };
  for (uint64_t o = sec(info, 0x18, true), end = o + sec(info, 0x20, true); o + 2 <= end;) {
    const uint8_t format = b[o], attr = b[o + 1];
    if (format == 4) {  // EIFMT_SVAL: u16 size, then (u32 symbol, u32 value) for the per-function attributes
      const uint16_t size = read_at<uint16_t>(b, o + 2);
      if (size == 8 && sym_name(read_at<uint32_t>(b, o + 4)) == fn) {
        const int v = static_cast<int>(read_at<uint32_t>(b, o + 8));
        if (attr == 0x2f) r.regs = v;
        if (attr == 0x11) r.frame = v;
      }
      o += 4 + size;
    } else {
      o += format == 3 ? 4 : format == 2 ? 3 : 2;  // HVAL, BVAL, NVAL
    }
  }
  return r;
}

using lkjit::test::expect_cubin;

// The reader itself: a kernel with a dynamically indexed local array has a frame, a plain one has none.
TEST(DWConvCompileResources, FrameSizeShowsLocalMemory) {
  GeneratedSource plain, local;
  plain.kernel_name = "lkjit_test_plain_sm90";
  plain.source = "extern \"C\" __global__ void lkjit_test_plain_sm90(float* o) { o[threadIdx.x] = 2.f * o[threadIdx.x]; }\n";
  local.kernel_name = "lkjit_test_local_sm90";
  local.source =
      "extern \"C\" __global__ void lkjit_test_local_sm90(float* o, int k) {\n"
      "  float a[64];\n  for (int i = 0; i < 64; ++i) a[(i * k) & 63] = o[i];\n  o[threadIdx.x] = a[threadIdx.x & 63];\n}\n";
  const auto a = cubin_resources(rt::nvrtc_compile(plain, 90).cubin, plain.kernel_name);
  const auto b = cubin_resources(rt::nvrtc_compile(local, 90).cubin, local.kernel_name);
  EXPECT_GT(a.regs, 0);
  EXPECT_EQ(a.frame, 0);
  EXPECT_GT(b.regs, 0);
  EXPECT_GE(b.frame, 256);
}

// ---- the pairwise sample ------------------------------------------------------------------------------

using lkjit::test::dwconv::DWKernel;
using lkjit::test::dwconv::Instance;
constexpr DWKernel kKernels[] = {DWKernel::kFwdDirect, DWKernel::kDgradDirect, DWKernel::kFwdNhwc,
                                 DWKernel::kDgradNhwc, DWKernel::kWgradDirect, DWKernel::kWgradNhwc};
constexpr DType kDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};
constexpr std::pair<int, int> kSizes[] = {{1, 1}, {3, 3}, {4, 4}, {7, 7}, {2, 5}, {13, 13}, {31, 31}, {51, 5}, {5, 51}, {63, 63}};
constexpr int kArchs[] = {80, 90};
constexpr int kVariants = 3;  // 0: the default tile, 1 and 2: variants that reach other code paths

struct Case {
  DWKernel kernel;
  DType dtype;
  int size;  // index into kSizes
  int stride, dil, arch;
  Instance in;
};

// The reference layer the default tiles are chosen for (the CLI's 64x96x56x56), 'same' padding at stride 1.
gd::Problem reference_problem(const gd::SpecVals& s) {
  const gd::Padding pad = s.stride == 1 ? gd::same_padding(s)
                                        : gd::Padding{s.dil * (s.kh - 1) / 2, s.dil * (s.kh - 1) / 2,
                                                      s.dil * (s.kw - 1) / 2, s.dil * (s.kw - 1) / 2};
  return gd::make_problem(s, 64, 96, 56, 56, pad);
}

// A greedy pairwise (strength-2 covering) design over the factors: every pair of values of any two factors
// appears in some case. Deterministic: each row starts from the first uncovered pair and fills the other
// factors with the value covering most uncovered pairs (ties: the smallest).
std::vector<std::vector<int>> pairwise(const std::vector<int>& levels) {
  const int nf = static_cast<int>(levels.size());
  std::set<std::tuple<int, int, int, int>> todo;
  for (int f = 0; f < nf; ++f)
    for (int g = f + 1; g < nf; ++g)
      for (int a = 0; a < levels[f]; ++a)
        for (int b = 0; b < levels[g]; ++b) todo.emplace(f, a, g, b);
  std::vector<std::vector<int>> rows;
  while (!todo.empty()) {
    std::vector<int> row(nf, -1);
    const auto [f0, a0, g0, b0] = *todo.begin();
    row[f0] = a0, row[g0] = b0;
    for (int f = 0; f < nf; ++f) {
      if (row[f] >= 0) continue;
      int best = 0, best_gain = -1;
      for (int a = 0; a < levels[f]; ++a) {
        int gain = 0;
        for (int g = 0; g < nf; ++g)
          if (g != f && row[g] >= 0) gain += todo.count(f < g ? std::make_tuple(f, a, g, row[g]) : std::make_tuple(g, row[g], f, a));
        if (gain > best_gain) best = a, best_gain = gain;
      }
      row[f] = best;
    }
    for (int f = 0; f < nf; ++f)
      for (int g = f + 1; g < nf; ++g) todo.erase({f, row[f], g, row[g]});
    rows.push_back(row);
  }
  return rows;
}

enum Factor { kKernel, kDType, kSize, kStride, kDil, kArch, kVariant, kFactors };
const std::vector<int>& levels() {
  static const std::vector<int> v = {6, 3, 10, 2, 4, 2, kVariants};
  return v;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> all = [] {
    std::vector<Case> v;
    std::set<std::string> names;
    for (const auto& row : pairwise(levels())) {
      Case c{kKernels[row[kKernel]], kDTypes[row[kDType]], row[kSize], row[kStride] + 1, row[kDil] + 1,
             kArchs[row[kArch]], {}};
      const gd::SpecVals s{c.dtype, kSizes[c.size].first, kSizes[c.size].second, c.stride, c.dil, c.arch};
      c.in = lkjit::test::dwconv::make_instance(c.kernel, s, reference_problem(s), row[kVariant]);
      if (c.in.ok && names.insert(c.in.name).second) v.push_back(c);
    }
    return v;
  }();
  return all;
}

// Compiles every case once, on all cores, before the first test reads its result (serially the sample
// takes about twice as long on two cores).
struct Compiled {
  std::string cubin, error;
};
const std::map<std::string, Compiled>& compiled() {
  static const std::map<std::string, Compiled> out = [] {
    std::map<std::string, Compiled> m;
    std::mutex mu;
    const auto& cs = cases();
    lkjit::test::for_each_on_all_cores(cs.size(), [&](size_t i) {
      GeneratedSource src;
      src.kernel_name = cs[i].in.name;
      src.source = cs[i].in.source;
      src.headers = &embedded_headers();
      Compiled r;
      try {
        r.cubin = rt::nvrtc_compile(src, cs[i].arch).cubin;
      } catch (const std::exception& e) {
        r.error = e.what();
      }
      std::lock_guard<std::mutex> lock(mu);
      m[cs[i].in.name] = std::move(r);
    });
    return m;
  }();
  return out;
}

class DWConvCompile : public ::testing::TestWithParam<Case> {};

TEST_P(DWConvCompile, CubinHasNoSpillsAndTheEstimatedRegisters) {
  const Case& c = GetParam();
  const Instance& in = c.in;
  const Compiled& r = compiled().at(in.name);
  ASSERT_TRUE(r.error.empty()) << r.error;
  expect_cubin(r.cubin, c.arch, in.name);
  const Resources res = cubin_resources(r.cubin, in.name);
  ASSERT_GT(res.regs, 0) << "no EIATTR_REGCOUNT for " << in.name;
  EXPECT_EQ(res.frame, 0) << "local memory (spills) in " << in.name << ": " << res.frame << " bytes, " << res.regs << " registers";
  // The register budget: within the cap of `blocks` blocks an SM (ptxas enforces it; checked so that a
  // changed cap shows), and the estimate the tile rules use not far below what ptxas needs.
  const int cap = gd::detail::reg_cap(in.threads, in.blocks ? in.blocks : 1, DeviceLimits::for_arch(c.arch));
  EXPECT_LE(res.regs, cap) << "blocks=" << in.blocks;
  EXPECT_LE(res.regs, in.regs_estimate * 3 / 2 + 16) << "estimate " << in.regs_estimate;
  RecordProperty("registers", res.regs);
  RecordProperty("estimate", in.regs_estimate);
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) { return info.param.in.name; }
INSTANTIATE_TEST_SUITE_P(Pairwise, DWConvCompile, ::testing::ValuesIn(cases()), case_name);

// The tensor-core kernels have a smaller domain (f16 and bf16, stride 1, dilation 1): their own pairwise sample
// over kernel x dtype x (kh, kw) x arch x tile variant.
const std::vector<Case>& mma_cases() {
  static const std::vector<Case> all = [] {
    constexpr DWKernel kMma[] = {DWKernel::kFwdMma, DWKernel::kDgradMma, DWKernel::kWgradMma};
    std::vector<Case> v;
    std::set<std::string> names;
    for (const auto& row : pairwise({3, 2, 10, 2, kVariants})) {
      Case c{kMma[row[0]], row[1] ? DType::kBF16 : DType::kF16, row[2], 1, 1, kArchs[row[3]], {}};
      const gd::SpecVals s{c.dtype, kSizes[c.size].first, kSizes[c.size].second, 1, 1, c.arch};
      c.in = lkjit::test::dwconv::make_instance(c.kernel, s, reference_problem(s), row[4]);
      if (c.in.ok && names.insert(c.in.name).second) v.push_back(c);
    }
    return v;
  }();
  return all;
}

class DWConvMmaCompile : public ::testing::TestWithParam<Case> {};

TEST_P(DWConvMmaCompile, CubinHasNoSpillsAndTheEstimatedRegisters) {
  const Case& c = GetParam();
  GeneratedSource src;
  src.kernel_name = c.in.name;
  src.source = c.in.source;
  src.headers = &embedded_headers();
  const std::string cubin = rt::nvrtc_compile(src, c.arch).cubin;
  expect_cubin(cubin, c.arch, c.in.name);
  const Resources res = cubin_resources(cubin, c.in.name);
  ASSERT_GT(res.regs, 0) << "no EIATTR_REGCOUNT for " << c.in.name;
  EXPECT_EQ(res.frame, 0) << "local memory (spills) in " << c.in.name << ": " << res.frame << " bytes, " << res.regs
                          << " registers";
  EXPECT_LE(res.regs, gd::detail::reg_cap(c.in.threads, c.in.blocks ? c.in.blocks : 1, DeviceLimits::for_arch(c.arch)));
  EXPECT_LE(res.regs, c.in.regs_estimate * 3 / 2 + 16) << "estimate " << c.in.regs_estimate;
  RecordProperty("registers", res.regs);
  RecordProperty("estimate", c.in.regs_estimate);
}
INSTANTIATE_TEST_SUITE_P(Pairwise, DWConvMmaCompile, ::testing::ValuesIn(mma_cases()), case_name);

TEST(DWConvMmaCompile, SampleMeetsEveryVariantAndSize) {
  std::set<std::pair<int, int>> kernel_variant;
  std::set<int> sizes;
  for (const Case& c : mma_cases()) {
    kernel_variant.emplace(int(c.kernel), c.in.variant);
    sizes.insert(c.size);
  }
  EXPECT_EQ(kernel_variant.size(), 3u * kVariants);
  EXPECT_EQ(sizes.size(), std::size(kSizes));
  EXPECT_LE(mma_cases().size(), 45u) << "the sample grew: CI compiles each case";
}

TEST(DWConvCompile, ReduceCompilesForEachArch) {
  for (int arch : kArchs) {
    const gd::SpecVals s{DType::kF32, 3, 3, 1, 1, arch};
    const Instance in = lkjit::test::dwconv::make_instance(DWKernel::kWgradReduce, s, reference_problem(s), 0);
    GeneratedSource src;
    src.kernel_name = in.name;
    src.source = in.source;
    src.headers = &embedded_headers();
    const auto out = rt::nvrtc_compile(src, arch);
    expect_cubin(out.cubin, arch, in.name);
    EXPECT_EQ(cubin_resources(out.cubin, in.name).frame, 0);
  }
}

// Every pair of factor values appears among the cases that compile (the variants counted as realised).
TEST(DWConvCompile, SampleIsPairwise) {
  std::set<std::tuple<int, int, int, int>> seen;
  for (const Case& c : cases()) {
    const int vals[kFactors] = {int(std::find(std::begin(kKernels), std::end(kKernels), c.kernel) - std::begin(kKernels)),
                                int(c.dtype), c.size, c.stride - 1, c.dil - 1,
                                int(std::find(std::begin(kArchs), std::end(kArchs), c.arch) - std::begin(kArchs)),
                                c.in.variant};
    for (int f = 0; f < kFactors; ++f)
      for (int g = f + 1; g < kFactors; ++g) seen.emplace(f, vals[f], g, vals[g]);
  }
  int missing = 0;
  for (int f = 0; f < kFactors; ++f)
    for (int g = f + 1; g < kFactors; ++g)
      for (int a = 0; a < levels()[f]; ++a)
        for (int b = 0; b < levels()[g]; ++b) {
          if (seen.count({f, a, g, b})) continue;
          // A tile variant that cannot run a spec fell back to the default: only pairs with the variant factor may
          // miss, and each kernel still meets every variant somewhere.
          if (g != kVariant) ADD_FAILURE() << "factor " << f << "=" << a << " never meets factor " << g << "=" << b;
          ++missing;
        }
  EXPECT_LE(missing, 12) << "too many tile variants fell back to the default";
  for (int k = 0; k < 6; ++k)
    for (int v = 0; v < kVariants; ++v)
      EXPECT_TRUE(seen.count({kKernel, k, kVariant, v})) << lkjit::test::dwconv::kernel_stem(kKernels[k]) << " variant " << v;
  EXPECT_LE(cases().size(), 100u) << "the sample grew: CI compiles each case";
}

}  // namespace
