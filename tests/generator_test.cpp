// Tests of the generator (generator/spec.cpp, emit.cpp, ops/wtconv.cpp): spec validation messages,
// deterministic emission, kernel names, tile enumeration, default tiles, launch geometry, parsing.
// Pure C++: no NVRTC, no GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "generator/family.h"
#include "generator/ops/wtconv_common.h"
#include "lkjit/wtconv_kernels.h"
#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/spec.h"

namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace lkjit;  // NOLINT: the test exercises most of the namespace

// The forward kernels and the fold: the ones these tests cover.
const std::vector<Kernel> kGenerated = {kWTConvFold, kWTConvFwdPlane, kWTConvFwdLevel,
                                        kWTConvFwdSynth};
const std::vector<DType> kDTypes = {DType::kF32, DType::kF16, DType::kBF16};

// Runs f and returns the SpecError's message; any other outcome is a test failure.
std::string spec_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const SpecError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected SpecError, got another exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected SpecError, nothing was thrown";
  return {};
}

OpSpec spec_of(Kernel kernel, DType dt = DType::kF32, int k = 5, int L = 3, bool first = true, int arch = 90) {
  return wtconv_spec(kernel, dt, k, L, first, arch);
}

// Every point of the tile space, built independently of enumerate().
std::vector<Tile> full_product(const TileSpace& space) {
  std::vector<Tile> out;
  std::function<void(size_t, Tile)> rec = [&](size_t a, Tile t) {
    if (a == space.axes.size()) {
      out.push_back(t);
      return;
    }
    for (int v : space.axes[a].values) {
      Tile u = t;
      const std::string& n = space.axes[a].name;
      if (n == "tile_h") u.set("tile_h", v);
      else if (n == "tile_w") u.set("tile_w", v);
      else if (n == "planes") u.set("planes", v);
      else if (n == "vy") u.set("vy", v);
      else if (n == "threads") u.set("threads", v);
      else if (n == "blocks") u.set("blocks", v);
      else ADD_FAILURE() << "unknown tile axis " << n;
      rec(a + 1, u);
    }
  };
  rec(0, Tile{});
  return out;
}

bool contains(const std::vector<Tile>& v, const Tile& t) {
  for (const auto& u : v)
    if (u == t) return true;
  return false;
}

// The generated source without its first line (a comment naming the spec): the code NVRTC compiles.
std::string code_of(const GeneratedSource& g) { return g.source.substr(g.source.find('\n') + 1); }

// ---- validation ----------------------------------------------------------------------------------

TEST(SpecValidation, RejectsEachBadValueNamingValueAndRange) {
  for (Kernel kn : kGenerated) {
    SCOPED_TRACE(to_string(kn));
    EXPECT_THAT(spec_error([&] { validate(spec_of(kn, DType::kF32, 4)); }),
                AllOf(HasSubstr("k=4"), HasSubstr("[1, 31]"), HasSubstr(to_string(kn))));
    EXPECT_THAT(spec_error([&] { validate(spec_of(kn, DType::kF32, 0)); }), AllOf(HasSubstr("k=0"), HasSubstr("[1, 31]")));
    EXPECT_THAT(spec_error([&] { validate(spec_of(kn, DType::kF32, 33)); }), AllOf(HasSubstr("k=33"), HasSubstr("[1, 31]")));
    EXPECT_THAT(spec_error([&] { validate(spec_of(kn, DType::kF32, -3)); }), AllOf(HasSubstr("k=-3"), HasSubstr("[1, 31]")));
    EXPECT_THAT(spec_error([&] { validate(spec_of(kn, DType::kF32, 5, 9)); }), AllOf(HasSubstr("L=9"), HasSubstr("[0, 8]")));
    EXPECT_THAT(spec_error([&] { validate(spec_of(kn, DType::kF32, 5, -1)); }), AllOf(HasSubstr("L=-1"), HasSubstr("[0, 8]")));
    EXPECT_THAT(spec_error([&] { validate(spec_of(kn, DType::kF32, 5, 3, true, 70)); }),
                AllOf(HasSubstr("sm_70"), HasSubstr("sm_80 and newer")));
  }
}

TEST(SpecValidation, AcceptsTheBoundaries) {
  for (Kernel kn : kGenerated)
    for (int k : {1, 3, 29, 31})
      for (int L : {0, 1, 8})
        for (int arch : {80, 90, 120}) EXPECT_NO_THROW(validate(spec_of(kn, DType::kBF16, k, L, true, arch)));
}

TEST(SpecValidation, NamesEveryViolation) {
  for (Kernel kn : kGenerated) {
    SCOPED_TRACE(to_string(kn));
    const std::string msg = spec_error([&] { validate(spec_of(kn, DType::kF16, 4, 9, true, 70)); });
    EXPECT_THAT(msg, AllOf(HasSubstr("lkjit: error: "), HasSubstr("k=4"), HasSubstr("[1, 31]"), HasSubstr("L=9"),
                           HasSubstr("[0, 8]"), HasSubstr("sm_70")));
  }
}

TEST(SpecValidation, GenerateValidatesSpecAndTile) {
  EXPECT_THAT(spec_error([] { generate(spec_of(kWTConvFwdPlane, DType::kF32, 4), wtconv_tile(0, 0, 1, 4, 256)); }),
              HasSubstr("k=4"));
  // threads must be a multiple of 32 within the device limit.
  EXPECT_THAT(spec_error([] { generate(spec_of(kWTConvFwdPlane), wtconv_tile(0, 0, 1, 4, 48)); }),
              AllOf(HasSubstr("threads=48"), HasSubstr("multiple of 32")));
  EXPECT_THAT(spec_error([] { generate(spec_of(kWTConvFold), wtconv_tile(0, 0, 0, 0, 2048)); }),
              AllOf(HasSubstr("threads=2048"), HasSubstr("[32, 1024]")));
  EXPECT_THAT(spec_error([] { generate(spec_of(kWTConvFwdLevel), wtconv_tile(16, 16, 0, 3, 128)); }),
              AllOf(HasSubstr("vy=3"), HasSubstr("tile_h=16")));
  // The level tile's smem does not fit sm_86's 99 KiB at k=31 (it does on sm_90).
  const Tile big = wtconv_tile(64, 64, 0, 8, 256);
  const OpSpec lv86 = spec_of(kWTConvFwdLevel, DType::kF32, 31, 0, true, 86);
  EXPECT_THAT(spec_error([&] { validate(lv86, big, DeviceLimits::for_arch(86)); }),
              AllOf(HasSubstr("shared memory"), HasSubstr("sm_86"), HasSubstr(big.to_string())));
  OpSpec lv90 = lv86;
  lv90.arch = 90;
  EXPECT_NO_THROW(validate(lv90, big, DeviceLimits::for_arch(90)));
}

// ---- emission ------------------------------------------------------------------------------------

TEST(Emission, IsDeterministicAndSelfContained) {
  const auto& headers = embedded_headers();
  for (Kernel kn : kGenerated)
    for (DType dt : kDTypes)
      for (bool first : {true, false}) {
        const OpSpec s = spec_of(kn, dt, 7, 2, first, 90);
        const Tile t = default_tile(s, Shape{8, 16, 40, 40, 1}, DeviceLimits::for_arch(90));
        const GeneratedSource a = generate(s, t), b = generate(OpSpec(s), Tile(t));
        SCOPED_TRACE(a.kernel_name);
        EXPECT_EQ(a.source, b.source);
        EXPECT_EQ(a.kernel_name, b.kernel_name);
        EXPECT_EQ(a.kernel_name, kernel_name(s, t));
        ASSERT_NE(a.headers, nullptr);
        EXPECT_THAT(a.source, HasSubstr("extern \"C\" __global__ void __launch_bounds__(" +
                                        std::to_string(t.get("threads")) + ")\n" + a.kernel_name + "("));
        // Every quoted include, transitively, is an embedded header: NVRTC opens no files.
        std::vector<std::string> todo{a.source};
        std::set<std::string> seen;
        const std::regex inc(R"re(#include\s*"([^"]+)")re");
        while (!todo.empty()) {
          const std::string text = todo.back();
          todo.pop_back();
          for (std::sregex_iterator it(text.begin(), text.end(), inc), end; it != end; ++it) {
            const std::string name = (*it)[1];
            if (!seen.insert(name).second) continue;
            auto h = headers.find(name);
            if (h == headers.end()) {
              ADD_FAILURE() << "#include \"" << name << "\" is not an embedded header";
              continue;
            }
            todo.push_back(h->second);
          }
        }
        EXPECT_FALSE(seen.empty());
        // NVRTC gets (and the key hashes) exactly the headers the source reaches, nothing else.
        std::set<std::string> given;
        for (const auto& [name, text] : *a.headers) {
          given.insert(name);
          EXPECT_EQ(text, headers.at(name));
        }
        EXPECT_EQ(given, seen);
      }
}

TEST(Emission, AnotherFamilysTemplatesAreOutsideAKernelsHeaders) {
  // A new family's templates, even one that includes shared headers, join no existing kernel's closure.
  auto table = embedded_headers();
  const std::string root = "wtconv/fwd_plane.cuh";
  const auto before = gen::include_closure(table, root);
  table["newfamily/fwd.cuh"] = "#include \"common/dtype.cuh\"\n#include \"abi/newfamily_params.h\"\n";
  table["abi/newfamily_params.h"] = "struct NewFamilyParams { int n; };\n";
  table["common/newfamily_extra.cuh"] = "// unused by wtconv\n";
  EXPECT_EQ(gen::include_closure(table, root), before);
  EXPECT_EQ(gen::include_closure(table, "newfamily/fwd.cuh").count("common/dtype.cuh"), 1u);
  EXPECT_EQ(before.count("wtconv/bwd_plane.cuh"), 0u);  // the forward's closure holds no backward template
  table["wtconv/fwd_plane.cuh"] += "\n#include \"missing/none.cuh\"\n";
  EXPECT_THAT(spec_error([&] { gen::include_closure(table, root); }), HasSubstr("missing/none.cuh"));
}

TEST(KernelName, IsPinned) {
  // Names are the cache display name, bench labels and test names: a change must be deliberate.
  EXPECT_EQ(kernel_name(spec_of(kWTConvFwdPlane, DType::kF32, 5, 3), wtconv_tile(0, 0, 1, 4, 256)),
            "lkjit_wtconv_fwd_plane_f32_k5_L3_p1_v4_w256_sm90");
  EXPECT_EQ(kernel_name(spec_of(kWTConvFwdSynth, DType::kBF16, 31, 8, true, 80), wtconv_tile(16, 32, 0, 2, 256)),
            "lkjit_wtconv_fwd_synth_bf16_k31_L8_t16x32_v2_w256_sm80");
  EXPECT_EQ(kernel_name(spec_of(kWTConvFwdLevel, DType::kF16, 3, 0, true), wtconv_tile(16, 16, 0, 4, 128)),
            "lkjit_wtconv_fwd_level1_f16_k3_t16x16_v4_w128_sm90");
  EXPECT_EQ(kernel_name(spec_of(kWTConvFwdLevel, DType::kF16, 3, 0, false), wtconv_tile(16, 16, 0, 4, 128)),
            "lkjit_wtconv_fwd_levelN_f32_k3_t16x16_v4_w128_sm90");
  EXPECT_EQ(kernel_name(spec_of(kWTConvFold, DType::kF32, 9, 1), wtconv_tile(0, 0, 0, 0, 256)),
            "lkjit_wtconv_fold_k9_L1_w256_sm90");
}

// Parses a name back into its fields; they must be the spec's and the tile's.
TEST(KernelName, ParsesBackToSpecAndTile) {
  const std::regex plane(R"(lkjit_wtconv_fwd_plane_(f32|f16|bf16)_k(\d+)_L(\d+)_p(\d+)_v(\d+)_w(\d+)_sm(\d+))");
  const std::regex synth(R"(lkjit_wtconv_fwd_synth_(f32|f16|bf16)_k(\d+)_L(\d+)_t(\d+)x(\d+)_v(\d+)_w(\d+)_sm(\d+))");
  const std::regex level(R"(lkjit_wtconv_fwd_level(1|N)_(f32|f16|bf16)_k(\d+)_t(\d+)x(\d+)_v(\d+)_w(\d+)_sm(\d+))");
  const std::regex fold(R"(lkjit_wtconv_fold_k(\d+)_L(\d+)_w(\d+)_sm(\d+))");
  int checked = 0;
  for (Kernel kn : kGenerated)
    for (DType dt : kDTypes)
      for (int k : {1, 7, 31})
        for (int L : {0, 5, 8})
          for (bool first : {true, false})
            for (int arch : {80, 90}) {
              const OpSpec s = spec_of(kn, dt, k, L, first, arch);
              const auto tiles = enumerate(s, DeviceLimits::for_arch(arch));
              ASSERT_FALSE(tiles.empty()) << s.to_string();
              for (const Tile& t : {tiles.front(), tiles.back()}) {
                const std::string n = kernel_name(s, t);
                SCOPED_TRACE(n);
                std::smatch m;
                auto num = [&](int i) { return std::stoi(m[i].str()); };
                if (kn == kWTConvFwdPlane) {
                  ASSERT_TRUE(std::regex_match(n, m, plane));
                  EXPECT_EQ(m[1].str(), to_string(dt));
                  EXPECT_EQ(num(2), k);
                  EXPECT_EQ(num(3), L);
                  EXPECT_EQ(num(4), t.get("planes"));
                  EXPECT_EQ(num(5), t.get("vy"));
                  EXPECT_EQ(num(6), t.get("threads"));
                  EXPECT_EQ(num(7), arch);
                } else if (kn == kWTConvFwdSynth) {
                  ASSERT_TRUE(std::regex_match(n, m, synth));
                  EXPECT_EQ(m[1].str(), to_string(dt));
                  EXPECT_EQ(num(2), k);
                  EXPECT_EQ(num(3), L);
                  EXPECT_EQ(num(4), t.get("tile_h"));
                  EXPECT_EQ(num(5), t.get("tile_w"));
                  EXPECT_EQ(num(6), t.get("vy"));
                  EXPECT_EQ(num(7), t.get("threads"));
                  EXPECT_EQ(num(8), arch);
                } else if (kn == kWTConvFwdLevel) {
                  ASSERT_TRUE(std::regex_match(n, m, level));
                  EXPECT_EQ(m[1].str(), first ? "1" : "N");
                  // Deeper levels read the fp32 low band whatever the activation dtype.
                  EXPECT_EQ(m[2].str(), first ? to_string(dt) : "f32");
                  EXPECT_EQ(num(3), k);
                  EXPECT_EQ(num(4), t.get("tile_h"));
                  EXPECT_EQ(num(5), t.get("tile_w"));
                  EXPECT_EQ(num(6), t.get("vy"));
                  EXPECT_EQ(num(7), t.get("threads"));
                  EXPECT_EQ(num(8), arch);
                } else {
                  ASSERT_TRUE(std::regex_match(n, m, fold));
                  EXPECT_EQ(num(1), k);
                  EXPECT_EQ(num(2), L);
                  EXPECT_EQ(num(3), t.get("threads"));
                  EXPECT_EQ(num(4), arch);
                }
                ++checked;
              }
            }
  EXPECT_GT(checked, 0);
}

// The name identifies the compiled code: equal names <=> equal code (source minus the comment line).
// So distinct specializations never share a name and binaries are never told apart by a comment only.
TEST(KernelName, IdentifiesTheCode) {
  std::map<std::string, std::string> code_by_name, name_by_code;
  std::set<std::string> names;
  for (Kernel kn : kGenerated)
    for (DType dt : kDTypes)
      for (int k : {1, 5, 31})
        for (int L : {0, 2, 8})
          for (bool first : {true, false})
            for (int arch : {80, 90}) {
              const OpSpec s = spec_of(kn, dt, k, L, first, arch);
              const auto tiles = enumerate(s, DeviceLimits::for_arch(arch));
              for (size_t i : {size_t(0), tiles.size() / 2, tiles.size() - 1}) {
                const GeneratedSource g = generate(s, tiles[i]);
                const std::string code = code_of(g);
                names.insert(g.kernel_name);
                auto [it, fresh] = code_by_name.emplace(g.kernel_name, code);
                if (!fresh)
                  EXPECT_EQ(it->second, code) << g.kernel_name << " names two different codes (" << s.to_string() << ")";
                auto [jt, fresh2] = name_by_code.emplace(code, g.kernel_name);
                if (!fresh2) EXPECT_EQ(jt->second, g.kernel_name) << "one code under two names";
              }
            }
  // Distinct specs do give distinct names (a constant name would pass the checks above).
  EXPECT_GT(names.size(), 300u);
  EXPECT_NE(kernel_name(spec_of(kWTConvFwdPlane, DType::kF16), wtconv_tile(0, 0, 1, 4, 256)),
            kernel_name(spec_of(kWTConvFwdPlane, DType::kBF16), wtconv_tile(0, 0, 1, 4, 256)));
  EXPECT_NE(kernel_name(spec_of(kWTConvFwdPlane), wtconv_tile(0, 0, 1, 4, 256)),
            kernel_name(spec_of(kWTConvFwdPlane), wtconv_tile(0, 0, 2, 4, 256)));
}

// ---- tile spaces -----------------------------------------------------------------------------------

TEST(Enumerate, IsExactlyTheSpaceMinusRejects) {
  const Shape shapes[] = {{64, 96, 7, 7, 1}, {64, 96, 56, 56, 1}, {2, 8, 256, 256, 2}};
  int accepted = 0, rejected = 0;
  for (Kernel kn : kGenerated)
    for (int k : {1, 31})
      for (int L : {0, 8})
        for (int arch : {80, 86, 90}) {
          const OpSpec s = spec_of(kn, DType::kF16, k, L, true, arch);
          const DeviceLimits lim = DeviceLimits::for_arch(arch);
          const auto all = full_product(tile_space(s));
          ASSERT_FALSE(all.empty());
          for (int si = -1; si < 3; ++si) {
            const Shape* sh = si < 0 ? nullptr : &shapes[si];
            SCOPED_TRACE(s.to_string() + (sh ? " " + sh->to_string() : " no shape"));
            const auto got = enumerate(s, lim, sh);
            EXPECT_EQ(got, enumerate(s, lim, sh)) << "order is not fixed";
            for (size_t i = 0; i < got.size(); ++i)
              for (size_t j = i + 1; j < got.size(); ++j) EXPECT_NE(got[i], got[j]) << "duplicate " << got[i].to_string();
            for (const Tile& t : got) EXPECT_TRUE(contains(all, t)) << t.to_string() << " is not in the space";
            for (const Tile& t : all) {
              const auto why = reject_reason(s, t, lim, sh);
              EXPECT_EQ(contains(got, t), !why) << t.to_string() << (why ? ": " + *why : "");
              (why ? rejected : accepted)++;
            }
          }
        }
  // Both outcomes occur, so the equivalence above was tested in both directions.
  EXPECT_GT(accepted, 0);
  EXPECT_GT(rejected, 0);
}

TEST(Enumerate, PlaneTilesRespectSharedMemoryForTheShape) {
  const DeviceLimits lim = DeviceLimits::for_arch(90);
  const OpSpec s = spec_of(kWTConvFwdPlane, DType::kF32, 31, 2);
  const Shape small{64, 96, 7, 7, 1}, large{1, 1, 256, 256, 1};
  const auto any = enumerate(s, lim), fit_small = enumerate(s, lim, &small);
  EXPECT_FALSE(fit_small.empty());
  EXPECT_LT(fit_small.size(), any.size()) << "32 planes of 7x7 at k=31 cannot all fit";
  // A 256x256 plane alone needs more than 227 KiB: no plane tile exists (the op takes the tiled path).
  EXPECT_TRUE(enumerate(s, lim, &large).empty());
  for (const Tile& t : any) {
    const auto why = reject_reason(s, t, lim, &large);
    ASSERT_TRUE(why.has_value());
    EXPECT_THAT(*why, AllOf(HasSubstr("shared memory"), HasSubstr("sm_90")));
  }
}

const Shape kDefaultShapes[] = {{64, 96, 7, 7, 1},   {64, 384, 14, 14, 1}, {64, 96, 56, 56, 1},
                                 {1, 8, 256, 256, 1}, {64, 768, 7, 7, 1},   {2, 3, 57, 31, 2}};

// Calls f(spec, limits, shape, default tile) over kernels x dtypes x k x L x arch x kDefaultShapes.
void for_each_default(const std::function<void(const OpSpec&, const DeviceLimits&, const Shape&, const Tile&)>& f) {
  for (Kernel kn : kGenerated)
    for (DType dt : kDTypes)
      for (int k : {1, 5, 31})
        for (int L : {0, 3, 8})
          for (int arch : {80, 90}) {
            const OpSpec s = spec_of(kn, dt, k, L, true, arch);
            const DeviceLimits lim = DeviceLimits::for_arch(arch);
            for (const Shape& sh : kDefaultShapes) {
              const Tile t = default_tile(s, sh, lim);
              SCOPED_TRACE(s.to_string() + " " + sh.to_string() + " -> " + t.to_string());
              f(s, lim, sh, t);
            }
          }
}

TEST(DefaultTile, IsAPointOfEnumerate) {
  int checked = 0;
  for_each_default([&](const OpSpec& s, const DeviceLimits& lim, const Shape& sh, const Tile& t) {
    EXPECT_EQ(t, default_tile(s, sh, lim)) << "not pure";
    EXPECT_TRUE(contains(enumerate(s, lim), t)) << "the default tile is not a point of enumerate()";
    ++checked;
  });
  EXPECT_GT(checked, 0);
}

TEST(DefaultTile, FitsTheShapeWheneverATileDoes) {
  int checked = 0, plane_checked = 0;
  for_each_default([&](const OpSpec& s, const DeviceLimits& lim, const Shape& sh, const Tile& t) {
    const bool any_fits = !enumerate(s, lim, &sh).empty();
    // Only whole-plane kernels can be too large for a shape (the op then runs the tiled path).
    if (s.kernel != kWTConvFwdPlane) EXPECT_TRUE(any_fits);
    if (!any_fits) return;
    const auto why = reject_reason(s, t, lim, &sh);
    EXPECT_FALSE(why.has_value()) << *why;
    EXPECT_LE(launch_geometry(s, t, sh).smem_bytes, unsigned(lim.max_smem_per_block));
    ++checked;
    plane_checked += s.kernel == kWTConvFwdPlane;
  });
  EXPECT_GT(plane_checked, 0);
  EXPECT_GT(checked, plane_checked);
}

// The plan takes the plane path only where the default plane tile needs at most half a block's
// maximum shared memory (two blocks per SM). So the default drops spare rows and skips grouping to stay
// there whenever a single plane with one spare row would: the 56x56 k=7 L=3 backward on sm_90, and the
// 28x28 k=5 L=4 backward on the 99 KiB archs, which an 80 KiB pair would push off the plane path.
TEST(DefaultTile, PlaneDefaultStaysWithinHalfTheBlockWheneverOnePlaneCan) {
  int checked = 0, capped = 0;
  for (Kernel kn : {kWTConvFwdPlane, kWTConvBwdPlane})
    for (int arch : {80, 86, 90})
      for (int k : {1, 5, 7, 13, 31})
        for (int L : {0, 3, 4, 5, 8})
          for (const Shape& sh : {Shape{64, 96, 56, 56, 1}, Shape{64, 192, 28, 28, 1}, Shape{8, 16, 40, 40, 1},
                                  Shape{64, 384, 14, 14, 1}, Shape{2, 3, 57, 31, 2}}) {
            const OpSpec s = spec_of(kn, DType::kBF16, k, L, true, arch);
            const DeviceLimits lim = DeviceLimits::for_arch(arch);
            const Tile t = default_tile(s, sh, lim);
            const Tile one = wtconv_tile(0, 0, 1, 1, t.get("threads") / t.get("planes"));
            const unsigned cap = unsigned(lim.max_smem_per_block / 2);
            SCOPED_TRACE(s.to_string() + " " + sh.to_string() + " -> " + t.to_string());
            if (launch_geometry(s, one, sh).smem_bytes > cap) continue;
            EXPECT_LE(launch_geometry(s, t, sh).smem_bytes, cap);
            ++checked;
            capped += t.get("vy") == 1 || t.get("planes") == 1;
          }
  EXPECT_GT(checked, 100);
  EXPECT_GT(capped, 0);
  const Shape s56{64, 96, 56, 56, 1}, s28{64, 192, 28, 28, 1};
  const Tile t56 = default_tile(spec_of(kWTConvBwdPlane, DType::kBF16, 7, 3, true, 90), s56,
                                DeviceLimits::for_arch(90));
  EXPECT_EQ(t56.get("vy"), 2) << t56.to_string();
  const Tile t28 = default_tile(spec_of(kWTConvBwdPlane, DType::kBF16, 5, 4, true, 86), s28,
                                DeviceLimits::for_arch(86));
  EXPECT_EQ(t28.get("planes"), 1) << t28.to_string();
  const Tile t28h = default_tile(spec_of(kWTConvBwdPlane, DType::kBF16, 5, 4, true, 90), s28,
                                 DeviceLimits::for_arch(90));
  EXPECT_EQ(t28h.get("planes"), 2) << t28h.to_string();  // the measured 28x28 pair on the H200
}

TEST(DefaultTile, PlanesOf256x256NeverFit) {
  // One 256x256 fp32 plane with its halo is over 256 KiB: more than any arch's block maximum.
  const Shape sh{1, 8, 256, 256, 1};
  for (int arch : {80, 90})
    for (int k : {1, 31}) {
      const OpSpec s = spec_of(kWTConvFwdPlane, DType::kF16, k, 1, true, arch);
      EXPECT_TRUE(enumerate(s, DeviceLimits::for_arch(arch), &sh).empty()) << s.to_string();
    }
}

// ---- launch geometry -------------------------------------------------------------------------------

void expect_valid_grid(const LaunchGeometry& g, const DeviceLimits& lim) {
  EXPECT_GE(g.grid[0], 1u);
  EXPECT_LE(g.grid[0], 2147483647u);
  EXPECT_GE(g.grid[1], 1u);
  EXPECT_LE(g.grid[1], 65535u);
  EXPECT_GE(g.grid[2], 1u);
  EXPECT_LE(g.grid[2], 65535u);
  EXPECT_LE(uint64_t(g.block[0]) * g.block[1] * g.block[2], uint64_t(lim.max_threads_per_block));
  EXPECT_LE(g.smem_bytes, unsigned(lim.max_smem_per_block));
}

TEST(LaunchGeometry, PlaneGridIsOneBlockPerPlaneGroup) {
  const DeviceLimits lim = DeviceLimits::for_arch(90);
  const OpSpec s = spec_of(kWTConvFwdPlane, DType::kF16, 5, 2);
  // 64x1024 = 65536 planes, one per block: a 1-D grid (y and z would stop at 65535).
  const Shape big{64, 1024, 7, 7, 1};
  const Tile one = wtconv_tile(0, 0, 1, 4, 256);
  ASSERT_FALSE(reject_reason(s, one, lim, &big).has_value());
  const LaunchGeometry g = launch_geometry(s, one, big);
  EXPECT_EQ(g.grid[0], 65536u);
  EXPECT_EQ(g.grid[1], 1u);
  EXPECT_EQ(g.grid[2], 1u);
  EXPECT_EQ(g.block[0], 256u);
  EXPECT_EQ(g.block[1], 1u);
  expect_valid_grid(g, lim);
  // 3x1001 = 3003 planes: the last block is partial, so the count rounds up.
  const Shape odd{3, 1001, 7, 7, 1};
  int tested = 0;
  for (const Tile& t : enumerate(s, lim, &odd)) {
    SCOPED_TRACE(t.to_string());
    const LaunchGeometry h = launch_geometry(s, t, odd);
    EXPECT_EQ(h.grid[0], unsigned((3003 + t.get("planes") - 1) / t.get("planes")));
    EXPECT_EQ(h.block[0], unsigned(t.get("threads")));
    expect_valid_grid(h, lim);
    tested += t.get("planes") > 1;
  }
  EXPECT_GT(tested, 0) << "no multi-plane tile was tested";
  const Tile d = default_tile(s, big, lim);
  EXPECT_EQ(launch_geometry(s, d, big).grid[0], unsigned((65536 + d.get("planes") - 1) / d.get("planes"))) << d.to_string();
  // Shared memory is per plane: twice the planes, twice the bytes.
  const unsigned bytes = launch_geometry(s, one, big).smem_bytes;
  EXPECT_GT(bytes, 0u);
  EXPECT_EQ(launch_geometry(s, wtconv_tile(0, 0, 2, 4, 256), big).smem_bytes, 2 * bytes);
}

// The lane backward of the 14x14 planes of a WTConvNeXt-T stage asks ptxas for 12 warps an SM (the tile's
// blocks, __launch_bounds__'s second argument), and its shared memory keeps them: 6 blocks of 32
// two-thread planes an SM on sm_90 (1 KiB reserved a block), so the 64x384 planes run in one wave on 132
// SMs. A problem that 4 blocks an SM hold, the forward, and sm_80 (whose shared memory holds 4) keep the
// plain bound.
TEST(LaunchGeometry, LaneBackwardKeepsTwelveWarpsAnSMAt14x14) {
  const DeviceLimits lim = DeviceLimits::for_arch(90);
  const Shape sh{64, 384, 14, 14, 1};
  const OpSpec bwd = spec_of(kWTConvBwdLane, DType::kBF16, 5, 3);
  const Tile t = default_tile(bwd, sh, lim);
  EXPECT_EQ(t, (wtconv_tile(0, 14, 32, 0, 64, 6)));
  EXPECT_THAT(generate(bwd, t).source, HasSubstr("__launch_bounds__(64, 6)\n"));
  const int64_t blocks = lim.smem_per_sm / (launch_geometry(bwd, t, sh).smem_bytes + 1024);
  EXPECT_GE(blocks, 6);
  EXPECT_GE(blocks * lim.sm_count * t.get("planes"), sh.B * sh.C);
  Tile uncapped = t;
  uncapped.set("blocks", 0);
  EXPECT_THAT(generate(bwd, uncapped).source, HasSubstr("__launch_bounds__(64)\n"));
  EXPECT_EQ(default_tile(bwd, Shape{64, 96, 14, 14, 1}, lim).get("blocks"), 0);
  EXPECT_EQ(default_tile(bwd, sh, DeviceLimits::for_arch(80)).get("blocks"), 0);
  const OpSpec fwd = spec_of(kWTConvFwdLane, DType::kBF16, 5, 3);
  EXPECT_EQ(default_tile(fwd, sh, lim).get("blocks"), 0);
}

// A register cap must leave the register rows unspilled (>= 168 a thread) and cap something (<= 255), and
// shared memory must hold that many blocks; each refusal names the value and the range.
TEST(Enumerate, LaneRegisterCapsAreUsableOnes) {
  const DeviceLimits lim = DeviceLimits::for_arch(90);
  const OpSpec bwd = spec_of(kWTConvBwdLane, DType::kBF16, 5, 3);
  const Shape sh{64, 384, 14, 14, 1};
  EXPECT_THAT(reject_reason(bwd, wtconv_tile(0, 14, 32, 0, 64, 12), lim, &sh).value_or(""),
              AllOf(HasSubstr("blocks=12 with threads=64 caps registers at 80"), HasSubstr("168..255")));
  EXPECT_THAT(reject_reason(bwd, wtconv_tile(0, 14, 32, 0, 64, 3), lim, &sh).value_or(""),
              HasSubstr("caps registers at 336"));
  EXPECT_THAT(reject_reason(bwd, wtconv_tile(0, 14, 0, 0, 32, 12), lim, &sh).value_or(""),
              AllOf(HasSubstr("blocks=12"), HasSubstr("supported: blocks <= ")));
  int capped = 0;
  for (const Tile& t : enumerate(bwd, lim, &sh)) {
    if (!t.get("blocks")) continue;
    ++capped;
    const int64_t cap = lim.regs_per_sm / (int64_t(t.get("blocks")) * t.get("threads")) / 8 * 8;
    EXPECT_TRUE(cap >= 168 && cap <= 255) << t.to_string();
  }
  EXPECT_GT(capped, 0);
  // Kernels without the axis take no cap: it would change their code behind their tile space's back.
  const OpSpec plane = spec_of(kWTConvFwdPlane, DType::kF16, 5, 3);
  EXPECT_THAT(reject_reason(plane, wtconv_tile(0, 0, 2, 2, 256, 12), lim, nullptr).value_or(""),
              AllOf(HasSubstr("blocks=12"), HasSubstr("wtconv_fwd_plane has no register-cap axis"),
                    HasSubstr("supported: blocks=0")));
  EXPECT_THAT(spec_error([&] { generate(plane, wtconv_tile(0, 0, 2, 2, 256, 12)); }), HasSubstr("blocks=12"));
  EXPECT_FALSE(reject_reason(plane, wtconv_tile(0, 0, 2, 2, 256), lim, nullptr).has_value());
}

// The layout transpose: one block per 64-channel x 64-pixel tile of each image, whatever the direction.
TEST(LaunchGeometry, TransposeCoversEveryTile) {
  const DeviceLimits lim = DeviceLimits::for_arch(90);
  for (DType dt : {DType::kF32, DType::kBF16}) {
    const OpSpec s = spec_of(kWTConvTranspose, dt, 1, 0);
    const Shape sh{3, 96, 7, 9, 1};
    const Tile t = default_tile(s, sh, lim);
    EXPECT_EQ(t, (wtconv_tile(0, 0, 0, 0, 128)));
    EXPECT_EQ(enumerate(s, lim, &sh).size(), 2u);  // 128 and 256 threads
    for (int threads : {128, 256}) {
      const LaunchGeometry g = launch_geometry(s, wtconv_tile(0, 0, 0, 0, threads), sh);
      EXPECT_EQ(g.grid[0], 3u * 2u * 1u);  // ceil(96/64) x ceil(63/64) per image, whatever the block size
      EXPECT_EQ(g.block[0], static_cast<unsigned>(threads));
      expect_valid_grid(g, lim);
    }
    EXPECT_EQ(kernel_name(s, t), std::string("lkjit_wtconv_transpose_") + to_string(dt) + "_w128_sm90");
    EXPECT_TRUE(reject_reason(s, wtconv_tile(0, 0, 0, 0, 64), lim, &sh).has_value());
    EXPECT_TRUE(reject_reason(s, wtconv_tile(0, 0, 0, 0, 512), lim, &sh).has_value());
  }
}

TEST(LaunchGeometry, TiledGridsCoverTheOutput) {
  const DeviceLimits lim = DeviceLimits::for_arch(90);
  const Tile t = wtconv_tile(16, 32, 0, 4, 256);
  // Level kernel: the shape is its input band; the output band is ceil(H/2) x ceil(W/2).
  const OpSpec lv = spec_of(kWTConvFwdLevel, DType::kF32, 5, 0);
  EXPECT_EQ(launch_geometry(lv, t, Shape{2, 3, 56, 56, 1}).grid[0], 2u * 3 * 2 * 1);   // 28x28 -> 2x1 tiles
  EXPECT_EQ(launch_geometry(lv, t, Shape{2, 3, 65, 130, 1}).grid[0], 2u * 3 * 3 * 3);  // 33x65 -> 3x3 tiles
  EXPECT_EQ(launch_geometry(lv, t, Shape{1, 1, 1, 1, 1}).grid[0], 1u);
  // Synthesis: tiles of the strided output.
  const OpSpec sy = spec_of(kWTConvFwdSynth, DType::kF32, 5, 3);
  EXPECT_EQ(launch_geometry(sy, t, Shape{2, 3, 56, 56, 1}).grid[0], 2u * 3 * 4 * 2);
  EXPECT_EQ(launch_geometry(sy, t, Shape{2, 3, 56, 56, 2}).grid[0], 2u * 3 * 2 * 1);  // 28x28 out
  EXPECT_EQ(launch_geometry(sy, t, Shape{2, 3, 57, 57, 2}).grid[0], 2u * 3 * 2 * 1);  // 29x29 out
  const LaunchGeometry big = launch_geometry(sy, t, Shape{64, 1024, 224, 224, 1});
  EXPECT_EQ(big.grid[0], 65536u * 14 * 7);
  expect_valid_grid(big, lim);
  for (const OpSpec& s : {lv, sy}) {
    const LaunchGeometry g = launch_geometry(s, t, Shape{64, 96, 56, 56, 1});
    EXPECT_EQ(g.block[0], 256u);
    EXPECT_GT(g.smem_bytes, 0u);
    expect_valid_grid(g, lim);
  }
}

TEST(LaunchGeometry, FoldGridCoversEveryParameterUpToACap) {
  const DeviceLimits lim = DeviceLimits::for_arch(90);
  const Tile t = wtconv_tile(0, 0, 0, 0, 256);
  // C*k*k (W0) + C (b) + L*4C*k*k (levels) = 96*25 + 96 + 3*4*96*25 = 31296 floats -> 123 blocks.
  const LaunchGeometry g = launch_geometry(spec_of(kWTConvFold, DType::kF32, 5, 3), t, Shape{1, 96, 1, 1, 1});
  EXPECT_EQ(g.grid[0], 123u);
  EXPECT_EQ(g.block[0], 256u);
  expect_valid_grid(g, lim);
  // Huge parameter sets use a capped grid (the template loops grid-stride).
  const LaunchGeometry h = launch_geometry(spec_of(kWTConvFold, DType::kF32, 31, 8), t, Shape{1, 768, 1, 1, 1});
  EXPECT_EQ(h.grid[0], 4096u);
  expect_valid_grid(h, lim);
}

// ---- parsing and printing --------------------------------------------------------------------------

TEST(Parse, DType) {
  for (DType t : kDTypes) EXPECT_EQ(parse_dtype(to_string(t)), t);
  EXPECT_EQ(parse_dtype("fp32"), DType::kF32);
  EXPECT_EQ(parse_dtype("float32"), DType::kF32);
  EXPECT_EQ(parse_dtype("half"), DType::kF16);
  EXPECT_EQ(parse_dtype("FP16"), DType::kF16);
  EXPECT_EQ(parse_dtype("bfloat16"), DType::kBF16);
  EXPECT_EQ(parse_dtype("BF16"), DType::kBF16);
  EXPECT_EQ(dtype_bytes(DType::kF32), 4);
  EXPECT_EQ(dtype_bytes(DType::kF16), 2);
  EXPECT_EQ(dtype_bytes(DType::kBF16), 2);
  EXPECT_THAT(spec_error([] { parse_dtype("f64"); }), AllOf(HasSubstr("'f64'"), HasSubstr("f32, f16, bf16")));
  EXPECT_THAT(spec_error([] { parse_dtype(""); }), HasSubstr("''"));
  EXPECT_THAT(spec_error([] { parse_dtype("f16 "); }), HasSubstr("'f16 '"));
}

TEST(Parse, Arch) {
  EXPECT_EQ(parse_arch("sm_90"), 90);
  EXPECT_EQ(parse_arch("90"), 90);
  EXPECT_EQ(parse_arch("9.0"), 90);
  EXPECT_EQ(parse_arch("8.6"), 86);
  EXPECT_EQ(parse_arch("SM_80"), 80);
  EXPECT_EQ(parse_arch("sm80"), 80);
  EXPECT_EQ(parse_arch("sm_100"), 100);
  for (int a : {80, 86, 87, 89, 90, 100, 103, 120, 121}) {
    EXPECT_EQ(arch_name(a), "sm_" + std::to_string(a));
    EXPECT_EQ(parse_arch(arch_name(a)), a);
  }
  EXPECT_THAT(spec_error([] { parse_arch("sm_75"); }), AllOf(HasSubstr("sm_75"), HasSubstr("sm_80")));
  EXPECT_THAT(spec_error([] { parse_arch("70"); }), HasSubstr("sm_70"));
  for (const char* bad : {"", "sm_", "abc", "sm_9x", "sm_1000", "9.0.1", "-90"})
    EXPECT_THAT(spec_error([&] { parse_arch(bad); }), HasSubstr(std::string("'") + bad + "'")) << bad;
}

TEST(Parse, Kernel) {
  const auto all = family("wtconv").kernels;
  EXPECT_EQ(all.size(), 12u);  // 9 and the lane kernels (forward, backward, their reduce)
  for (Kernel k : all) EXPECT_NE(std::find(all_kernels().begin(), all_kernels().end(), k), all_kernels().end());
  std::set<std::string> names;
  for (Kernel k : all) {
    EXPECT_EQ(parse_kernel(to_string(k)), k);
    names.insert(to_string(k));
  }
  EXPECT_EQ(names.size(), all.size());
  EXPECT_EQ(std::string(to_string(kWTConvFwdLane)), "wtconv_fwd_lane");
  EXPECT_EQ(std::string(to_string(kWTConvBwdLane)), "wtconv_bwd_lane");
  EXPECT_EQ(parse_kernel("wtconv_fwd_lane"), kWTConvFwdLane);
  EXPECT_EQ(parse_kernel("wtconv_bwd_lane"), kWTConvBwdLane);
  EXPECT_EQ(parse_kernel("wtconv_reduce_lane"), kWTConvReduceLane);
  EXPECT_THAT(spec_error([] { parse_kernel("wtconv_fwd"); }),
              AllOf(HasSubstr("'wtconv_fwd'"), HasSubstr("wtconv_fwd_plane"), HasSubstr("wtconv_fold"),
                    HasSubstr("wtconv_fwd_lane"), HasSubstr("wtconv_bwd_lane")));
  EXPECT_THAT(spec_error([] { parse_kernel("WTCONV_FOLD"); }), HasSubstr("'WTCONV_FOLD'"));
}

TEST(Print, SpecTileShape) {
  EXPECT_EQ(spec_of(kWTConvFwdPlane, DType::kF32, 5, 3).to_string(), "wtconv_fwd_plane f32 k=5 L=3 sm_90");
  EXPECT_EQ(spec_of(kWTConvFwdLevel, DType::kF16, 7, 0, false, 80).to_string(),
            "wtconv_fwd_level f16 k=7 L=0 deeper sm_80");
  EXPECT_EQ((wtconv_tile(0, 0, 2, 4, 256)).to_string(), "p2_v4_w256");
  EXPECT_EQ((wtconv_tile(32, 32, 0, 4, 256)).to_string(), "t32x32_v4_w256");
  EXPECT_EQ((wtconv_tile(0, 0, 0, 0, 256)).to_string(), "w256");
  EXPECT_EQ((Shape{64, 96, 56, 56, 1}).to_string(), "64x96x56x56");
  EXPECT_EQ((Shape{1, 2, 3, 4, 2}).to_string(), "1x2x3x4/s2");
  EXPECT_EQ((Shape{1, 2, 5, 4, 2}).H_out(), 3);
  // Equality sees every field.
  const OpSpec a = spec_of(kWTConvFwdLevel);
  EXPECT_EQ(a, spec_of(kWTConvFwdLevel));
  EXPECT_NE(a, spec_of(kWTConvFwdSynth));
  EXPECT_NE(a, spec_of(kWTConvFwdLevel, DType::kBF16));
  EXPECT_NE(a, spec_of(kWTConvFwdLevel, DType::kF32, 7));
  EXPECT_NE(a, spec_of(kWTConvFwdLevel, DType::kF32, 5, 2));
  EXPECT_NE(a, spec_of(kWTConvFwdLevel, DType::kF32, 5, 3, false));
  EXPECT_NE(a, spec_of(kWTConvFwdLevel, DType::kF32, 5, 3, true, 80));
  Tile t = wtconv_tile(16, 16, 0, 4, 128), u = t;
  u.set("vy", 2);
  EXPECT_NE(t, u);
}

TEST(DeviceLimits, KnownArchsAndUnknownArchError) {
  for (int a : {80, 86, 87, 89, 90, 100, 103, 120, 121}) {
    const DeviceLimits d = DeviceLimits::for_arch(a);
    EXPECT_EQ(d.arch, a);
    EXPECT_GT(d.sm_count, 0);
    EXPECT_EQ(d.max_threads_per_block, 1024);
    EXPECT_GT(d.max_smem_per_block, 48 * 1024);
    EXPECT_LE(d.max_smem_per_block, d.smem_per_sm);
  }
  EXPECT_EQ(DeviceLimits::for_arch(80).max_smem_per_block, 163 * 1024);
  EXPECT_EQ(DeviceLimits::for_arch(90).max_smem_per_block, 227 * 1024);
  for (int a : {0, 70, 75, 91})
    EXPECT_THAT(spec_error([&] { DeviceLimits::for_arch(a); }),
                AllOf(HasSubstr("sm_" + std::to_string(a)), HasSubstr("supported: sm_80"), HasSubstr("sm_90")))
        << a;
}

// Plane images' strip layout: where it claims conflict-free loads, every warp of consecutive conv items
// (strips of v rows, vw columns each) reads 32 distinct banks at every tap; elsewhere it is the odd pitch.
TEST(StripLayout, WrappingWarpsHitDistinctBanksOrTheOddPitchIsKept) {
  int free_seen = 0, odd_seen = 0;
  for (Kernel kn : {kWTConvFwdPlane, kWTConvBwdPlane})
    for (int k : {1, 5, 7, 31})
      for (int v = 1; v <= 8; ++v)
        for (int64_t w = 1; w <= 300; ++w) {
          const OpSpec s = wtconv_spec(kn, DType::kF32, k, 2, true, 90);
          const auto st = gen::wtconv::strip_layout(gen::wtconv::wspec(s), w, v);
          const int64_t lo = w + (k - 1);
          SCOPED_TRACE(s.to_string() + " v=" + std::to_string(v) + " w=" + std::to_string(w));
          ASSERT_GE(st.pitch, lo);
          ASSERT_GE(st.vw, w);
          if (kn == kWTConvBwdPlane) EXPECT_EQ(st.pitch % 2, 1);  // the wgrad's row walks
          if (st.pitch == (lo | 1) && st.vw == w && (v * st.pitch - w) % 32 != 0) {
            ++odd_seen;
            continue;
          }
          ++free_seen;
          EXPECT_LE(st.pitch, lo + std::min<int64_t>(7, lo / 4));
          EXPECT_LE(4 * st.vw, 5 * w);
          for (int64_t e0 = 0; e0 < 4 * st.vw; e0 += 32) {
            std::set<int64_t> banks;
            for (int64_t e = e0; e < e0 + 32; ++e) banks.insert(((e / st.vw) * v * st.pitch + e % st.vw) % 32);
            ASSERT_EQ(banks.size(), 32u) << "warp at item " << e0;
          }
        }
  EXPECT_GT(free_seen, 1000);
  EXPECT_GT(odd_seen, 100);
  const OpSpec fwd = wtconv_spec(kWTConvFwdPlane, DType::kBF16, 5, 5, true, 90);
  const OpSpec bwd = wtconv_spec(kWTConvBwdPlane, DType::kBF16, 5, 5, true, 90);
  EXPECT_EQ(gen::wtconv::strip_layout(gen::wtconv::wspec(fwd), 56, 4).pitch, 62);  // 4 * 62 = 56 (mod 32)
  EXPECT_EQ(gen::wtconv::strip_layout(gen::wtconv::wspec(fwd), 28, 4).vw, 32);      // pitch 32: 4 idle lanes beat 39 floats
  EXPECT_EQ(gen::wtconv::strip_layout(gen::wtconv::wspec(bwd), 56, 4).vw, 60);      // odd 63: 4 * 63 = 60 (mod 32)
  EXPECT_EQ(gen::wtconv::strip_layout(gen::wtconv::wspec(bwd), 28, 4).pitch, 33);   // no odd pitch within 3: conflicts kept
}

}  // namespace
