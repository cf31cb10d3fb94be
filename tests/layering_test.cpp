// The architecture's one-way flow, checked on the sources (README, "Layout"): spec -> generator -> compiler
// -> cache -> runtime -> op layers -> C ABI, CLI and Python. Each source file belongs to a layer by its path;
// each quoted #include must name a file of a layer it may use. A new edge is a decision: add it here, with
// the reason, or route the dependency through a public header.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Layers, lowest first. Public headers (include/lkjit/*) belong to the layer that implements them.
struct Layer {
  const char* name;
  std::vector<std::string> paths;  // path prefixes (relative to the source root), longest match wins
  std::vector<std::string> uses;   // layers whose files it may include (itself always)
};

const std::vector<Layer>& layers() {
  static const std::vector<Layer> v = {
      // The exception types: below everything, so that support/ throws lkjit errors (its one use of ours).
      {"error", {"include/lkjit/error.h"}, {}},
      {"support", {"support/"}, {"error"}},
      {"device", {"templates/"}, {}},  // NVRTC-only templates (and templates/abi/, shared with host code)
      {"spec", {"include/lkjit/spec.h", "include/lkjit/version.h", "include/lkjit/numeric.h",
                "include/lkjit/generator.h", "include/lkjit/wtconv_kernels.h", "include/lkjit/wbmm_kernels.h"},
       {"support", "error"}},
      // device: a family's __host__ __device__ index and shared-memory math (templates/dwconv/geometry.cuh), so
      // that the bytes a launch asks for are the bytes the kernel carves.
      {"generator", {"generator/"}, {"spec", "error", "support", "device"}},
      {"cache", {"cache/"}, {"spec", "error", "support"}},
      {"runtime_api", {"include/lkjit/runtime.h", "include/lkjit/tuning.h", "include/lkjit/plan.h",
                       "include/lkjit/cache.h", "include/lkjit/remote_cache.h"}, {"spec", "error"}},
      {"runtime", {"runtime/"}, {"runtime_api", "spec", "error", "cache", "support"}},
      {"reference", {"runtime/reference/", "include/lkjit/reference.h", "include/lkjit/dwconv_reference.h",
                     "include/lkjit/wbmm_reference.h"}, {"spec", "error"}},
      // Every other public header is an op family's (wtconv.h, scale.h, ...): the op layers' API.
      {"ops_api", {"include/lkjit/"},
       {"runtime_api", "spec", "error", "reference"}},
      {"ops", {"runtime/ops/"}, {"ops_api", "runtime", "runtime_api", "spec", "error", "device", "reference", "support"}},
      {"capi_api", {"include/lkjit/c_api.h", "include/lkjit/c_api_"}, {}},
      {"capi", {"capi/"}, {"capi_api", "ops_api", "runtime_api", "spec", "error"}},
      {"cli", {"tools/"}, {"ops_api", "runtime_api", "spec", "error", "reference", "support"}},
      {"binding", {"python/csrc/"}, {"capi_api"}},
  };
  return v;
}

const Layer* layer_of(const std::string& path) {
  const Layer* best = nullptr;
  size_t len = 0;
  for (const auto& l : layers())
    for (const auto& p : l.paths)
      if (path.compare(0, p.size(), p) == 0 && p.size() > len) best = &l, len = p.size();
  return best;
}

// How a quoted include resolves: against the source root, then templates/ (NVRTC's and the ops' "abi/..."),
// then include/.
std::string resolve(const std::string& inc) {
  const fs::path root(LKJIT_SOURCE_DIR);
  for (const char* base : {"", "templates/", "include/"})
    if (fs::exists(root / base / inc)) return std::string(base) + inc;
  return "";
}

struct Edge {
  std::string from, to;
};

std::vector<Edge> violations() {
  const fs::path root(LKJIT_SOURCE_DIR);
  const std::regex inc(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<Edge> bad;
  for (const char* dir : {"support", "templates", "include", "generator", "cache", "runtime", "capi", "tools",
                          "python/csrc"}) {
    if (!fs::exists(root / dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      if (!e.is_regular_file()) continue;
      const std::string ext = e.path().extension().string();
      if (ext != ".h" && ext != ".cpp" && ext != ".cuh" && ext != ".inc") continue;
      const std::string path = fs::relative(e.path(), root).string();
      const Layer* from = layer_of(path);
      if (!from) continue;
      std::ifstream f(e.path());
      for (std::string line; std::getline(f, line);) {
        std::smatch m;
        if (!std::regex_search(line, m, inc)) continue;
        const std::string target = resolve(m[1]);
        if (target.empty() || target == path) continue;  // generated files (embedded_templates.cpp), self
        const Layer* to = layer_of(target);
        if (!to || to == from) continue;
        const bool allowed = std::find(from->uses.begin(), from->uses.end(), to->name) != from->uses.end();
        if (!allowed) bad.push_back({path + " (" + from->name + ")", target + " (" + to->name + ")"});
      }
    }
  }
  return bad;
}

TEST(Layering, EveryIncludeGoesToALayerBelow) {
  const auto bad = violations();
  std::string list;
  for (const auto& e : bad) list += "\n  " + e.from + " includes " + e.to;
  EXPECT_TRUE(bad.empty()) << bad.size() << " include(s) against the layering:" << list;
}

TEST(Layering, EverySourceFileHasALayer) {
  const fs::path root(LKJIT_SOURCE_DIR);
  std::vector<std::string> orphans;
  for (const char* dir : {"support", "generator", "cache", "runtime", "capi", "tools", "include"}) {
    if (!fs::exists(root / dir)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / dir))
      if (e.is_regular_file() && !layer_of(fs::relative(e.path(), root).string()))
        orphans.push_back(fs::relative(e.path(), root).string());
  }
  EXPECT_TRUE(orphans.empty()) << "files outside every layer: " << ::testing::PrintToString(orphans);
}

}  // namespace
