// NVRTC compile tests of the WBMM templates (templates/wbmm/), CPU only: the generator's units
// (lkjit::generate of the family's specs and tiles: template include, struct Cfg, extern "C" entry) compiled
// to cubins for sm_80 and sm_90 through rt::nvrtc_compile with the embedded templates they include. The cases are a pairwise sample: every pair of values of kernel x precision x mode x window x
// tile x arch appears in some case (a greedy covering over the valid combinations), plus the reduce kernel.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/cubin_check.h"
#include "tests/parallel_cases.h"
#include "generator/ops/wbmm_geometry.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "runtime/nvrtc_compiler.h"

namespace {

namespace gen = lkjit::gen::wbmm;
using ::testing::HasSubstr;

struct Case {
  gen::WBMMSpec spec;
  gen::WBMMTile tile;  // as the kernel runs it (gen::wtile of its Tile)
  std::string name;    // the kernel's symbol: unique, and the gtest parameter name
};

// The tile as its kernel name gives it back: the kernel's axes only, the wgrad's derived warps filled in.
gen::WBMMTile canonical(const gen::WBMMSpec& s, const gen::WBMMTile& t) { return gen::wtile(s, gen::to_tile(s, t)); }
std::string name_of(const gen::WBMMSpec& s, const gen::WBMMTile& t) {
  return lkjit::kernel_name(gen::to_opspec(s), gen::to_tile(s, t));
}
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Factor values. Precision: (dtype, tf32, engine). Tiles: the default for a 2x64x56x56 map, then variants
// that switch on the other code paths (one stage and NHWC order with 2 channels a block; a column / row
// split; the identity folded into M_c where the precision allows it, else without the identity).
struct Prec {
  lkjit::DType dtype;
  int tf32, engine;
};
const std::vector<gen::WBMMKernel> kKernels = {gen::WBMMKernel::kFwd, gen::WBMMKernel::kDgrad, gen::WBMMKernel::kWgrad};
const std::vector<Prec> kPrecs = {{lkjit::DType::kBF16, 0, 1}, {lkjit::DType::kF16, 0, 1}, {lkjit::DType::kF32, 0, 0},
                                  {lkjit::DType::kF32, 0, 1},  {lkjit::DType::kF32, 1, 1}};
const std::vector<std::pair<int, int>> kWindows = {{1, 1}, {3, 5}, {7, 7}, {14, 14}, {16, 16}};
constexpr int kModes = 2, kTileVariants = 3;
const std::vector<int> kArchs = {80, 90};

// The case of one combination, or nothing where its tile does not fit the arch.
std::optional<Case> make_case(int k, int p, int m, int w, int v, int a) {
  gen::WBMMSpec s;
  s.kernel = kKernels[k], s.dtype = kPrecs[p].dtype, s.tf32 = kPrecs[p].tf32, s.arch = kArchs[a];
  s.wh = kWindows[w].first, s.ww = kWindows[w].second, s.mode = m;
  s.bias = s.kernel != gen::WBMMKernel::kDgrad && (k + w) % 2 == 0;
  s.fuse_dx = (p + w) % 3 != 0;
  if (v == 1) s.layout = 1;
  const auto lim = lkjit::DeviceLimits::for_arch(s.arch);
  const lkjit::Shape sh{2, 64, 56, 56, 1};
  gen::WBMMTile t = gen::default_tile(s, sh, lim);
  t.engine = kPrecs[p].engine;
  if (v == 1) t.stages = 1, t.cpb = 2;
  if (v == 2) {
    t.split = 2;
    if (t.engine == 0 || (s.dtype == lkjit::DType::kF32 && !s.tf32)) t.fold = 1;
    else s.identity = 0;
    if (s.kernel == gen::WBMMKernel::kWgrad && !s.fuse_dx) t.fold = 0;
  }
  t = canonical(s, t);
  if (gen::reject(s, t, lim, &sh)) {
    // The variant's other choices on the default warps may not fit (a large window's smem, a split past d):
    // try the default warp shapes of smaller windows before giving the combination up.
    for (auto [wm, wn, mt] : std::vector<std::array<int, 3>>{{2, 2, 1}, {2, 1, 1}, {1, 2, 1}, {1, 1, 1}}) {
      t.wm = wm, t.wn = wn, t.mt = mt;
      if (s.kernel == gen::WBMMKernel::kWgrad) t.gm = wm, t.gn = wn, t.wpb = 32;
      t = canonical(s, t);
      if (!gen::reject(s, t, lim, &sh)) break;
    }
    if (gen::reject(s, t, lim, &sh)) return std::nullopt;
  }
  return Case{s, t, name_of(s, t)};
}

// Greedy pairwise covering: repeatedly take the valid combination that covers the most uncovered value
// pairs (first such in a fixed order), until every pair some valid combination has is covered.
std::vector<Case> pairwise_cases() {
  const std::array<int, 6> sizes = {int(kKernels.size()), int(kPrecs.size()), kModes, int(kWindows.size()), kTileVariants,
                                    int(kArchs.size())};
  struct Combo {
    std::array<int, 6> v;
    Case c;
  };
  std::vector<Combo> all;
  for (int k = 0; k < sizes[0]; ++k)
    for (int p = 0; p < sizes[1]; ++p)
      for (int m = 0; m < sizes[2]; ++m)
        for (int w = 0; w < sizes[3]; ++w)
          for (int v = 0; v < sizes[4]; ++v)
            for (int a = 0; a < sizes[5]; ++a)
              if (auto c = make_case(k, p, m, w, v, a)) all.push_back({{k, p, m, w, v, a}, *c});
  const auto pairs_of = [](const std::array<int, 6>& v) {
    std::vector<std::array<int, 4>> out;
    for (int f = 0; f < 6; ++f)
      for (int g = f + 1; g < 6; ++g) out.push_back({f, v[f], g, v[g]});
    return out;
  };
  std::set<std::array<int, 4>> uncovered;
  for (const auto& c : all)
    for (const auto& pr : pairs_of(c.v)) uncovered.insert(pr);
  std::vector<Case> out;
  std::set<std::string> names;
  while (!uncovered.empty()) {
    size_t best = 0;
    int best_gain = -1;
    for (size_t i = 0; i < all.size(); ++i) {
      int gain = 0;
      for (const auto& pr : pairs_of(all[i].v)) gain += int(uncovered.count(pr));
      if (gain > best_gain) best_gain = gain, best = i;
    }
    for (const auto& pr : pairs_of(all[best].v)) uncovered.erase(pr);
    if (names.insert(all[best].c.name).second) out.push_back(all[best].c);
  }
  // The reduce kernel: both modes, with and without dbias, small and large windows, each arch.
  for (int a : kArchs)
    for (auto [w, mode, bias] : std::vector<std::array<int, 3>>{{1, 0, 1}, {7, 0, 0}, {14, 1, 1}, {16, 0, 1}}) {
      gen::WBMMSpec s;
      s.kernel = gen::WBMMKernel::kReduce, s.arch = a, s.wh = s.ww = w, s.mode = mode, s.bias = bias;
      gen::WBMMTile t;
      t.threads = w == 7 ? 512 : 256;
      out.push_back({s, canonical(s, t), name_of(s, t)});
    }
  return out;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> c = pairwise_cases();
  return c;
}

lkjit::GeneratedSource source_of(const Case& c) { return lkjit::generate(gen::to_opspec(c.spec), gen::to_tile(c.spec, c.tile)); }

// Compiles every selected case once, on all cores, before the first test reads its cubin.
std::map<std::string, std::string>& cubins() {
  static std::map<std::string, std::string> m;
  return m;
}
void compile_selected() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::set<std::string> selected = lkjit::test::selected_case_names();  // "Compiles/<kernel name>"
    std::vector<const Case*> todo;
    for (const auto& c : cases())
      if (selected.count(c.name)) todo.push_back(&c);
    std::vector<std::string> out(todo.size());
    lkjit::test::for_each_on_all_cores(todo.size(), [&](size_t i) {
      try {
        out[i] = lkjit::rt::nvrtc_compile(source_of(*todo[i]), todo[i]->spec.arch).cubin;
      } catch (...) {  // the case's own test compiles again and reports the error
      }
    });
    for (size_t i = 0; i < todo.size(); ++i) cubins()[todo[i]->name] = out[i];
  });
}

using lkjit::test::expect_cubin;

class WBMMCompile : public ::testing::TestWithParam<Case> {};

TEST_P(WBMMCompile, Compiles) {
  compile_selected();
  const Case& c = GetParam();
  std::string cubin = cubins()[c.name];
  if (cubin.empty()) cubin = lkjit::rt::nvrtc_compile(source_of(c), c.spec.arch).cubin;  // throws with the log
  expect_cubin(cubin, c.spec.arch, c.name);
}

INSTANTIATE_TEST_SUITE_P(Pairwise, WBMMCompile, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

// Guards the sample against edits that drop a value or leave a pair uncovered.
TEST(WBMMCompileCoverage, EveryPairOfValuesIsCompiled) {
  std::set<std::string> kernels, precs, windows, archs, modes;
  std::set<std::pair<std::string, std::string>> kernel_prec, prec_window, kernel_window;
  for (const auto& c : cases()) {
    const auto& s = c.spec;
    const std::string k = gen::kernel_stem(s.kernel);
    const std::string p = std::string(lkjit::to_string(s.dtype)) + (s.dtype == lkjit::DType::kF32 ? (s.tf32 ? "-tf32" : c.tile.engine ? "-3xtf32" : "-ffma") : "");
    const std::string w = std::to_string(s.wh) + "x" + std::to_string(s.ww);
    kernels.insert(k), windows.insert(w), archs.insert(std::to_string(s.arch)), modes.insert(std::to_string(s.mode));
    if (s.kernel == gen::WBMMKernel::kReduce) continue;
    precs.insert(p);
    kernel_prec.insert({k, p}), prec_window.insert({p, w}), kernel_window.insert({k, w});
  }
  EXPECT_EQ(kernels.size(), 4u);
  EXPECT_EQ(precs.size(), 5u);
  EXPECT_EQ(windows.size(), 5u);
  EXPECT_EQ(archs.size(), 2u);
  EXPECT_EQ(modes.size(), 2u);
  EXPECT_EQ(kernel_prec.size(), 3u * 5u);
  EXPECT_EQ(kernel_window.size(), 3u * 5u);
  EXPECT_GE(prec_window.size(), 5u * 5u - 2u);  // f32 16x16 fits some precisions only with a split
  EXPECT_LE(cases().size(), 60u) << "keep the NVRTC time of the CPU suite small";
}

// A unit whose Cfg breaks a template relation fails to compile, naming it (the static_asserts hold).
TEST(WBMMCompileErrors, CfgMismatchIsACompileErrorNamingTheRule) {
  gen::WBMMSpec s;
  gen::WBMMTile t;
  t.vec = 2;
  Case c{s, canonical(s, t), name_of(s, t)};
  lkjit::GeneratedSource g = source_of(c);
  const std::string good = "dp = 64,";
  const auto at = g.source.find(good);
  ASSERT_NE(at, std::string::npos) << g.source;
  g.source.replace(at, good.size(), "dp = 80,");
  try {
    lkjit::rt::nvrtc_compile(g, 90);
    ADD_FAILURE() << "a wrong dp compiled";
  } catch (const lkjit::CompileError& e) {
    EXPECT_THAT(e.what(), HasSubstr("dp: the padded d of geometry.cuh's fwd_dp"));
  }
}

}  // namespace
