#include "tools/lkjit/prewarm_set.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/wtconv.h"
#include "tools/lkjit/common.h"

namespace lkjit::tool {

const char* const kPresetNames = "wtconvnext-t, wtconvnext-s, wtconvnext-b";

std::vector<PrewarmLayer> preset_layers(const std::string& name, const std::string& where) {
  // Stem stride 4 then 2x downsampling per stage: 56, 28, 14, 7 at 224x224.
  std::vector<int64_t> channels;
  if (name == "wtconvnext-t" || name == "wtconvnext-s") channels = {96, 192, 384, 768};  // -s: more blocks only
  else if (name == "wtconvnext-b") channels = {128, 256, 512, 1024};
  else
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("lkjit: error: {} '{}' is unknown; supported: {}", where, name, kPresetNames));
  const int64_t hw[] = {56, 28, 14, 7};
  const int levels[] = {5, 4, 3, 2};
  std::vector<PrewarmLayer> out;
  for (int s = 0; s < 4; ++s) out.push_back({64, channels[s], hw[s], hw[s], 5, levels[s], 1});
  return out;
}

std::vector<PrewarmLayer> parse_shapes(const std::string& shapes, const std::vector<int>& ks, const std::vector<int>& Ls) {
  std::vector<PrewarmLayer> out;
  for (const auto& item : split_list(shapes, "--shapes")) {
    const auto v = parse_dims(item, "--shapes", "B:C:H:W");
    // A well-formed value out of range is bad input (2), as in `run --shapes`, not a usage error (1).
    require_positive_bchw(v, "--shapes", item);
    for (int k : ks)
      for (int L : Ls) out.push_back({v[0], v[1], v[2], v[3], k, L, 1});
  }
  return out;
}

PrewarmPlan expand(const PrewarmSet& set) {
  std::map<std::string, PrewarmJob> jobs;
  std::set<std::string> notes;
  auto add = [&](const OpSpec& spec, const Tile& tile) {
    const std::string name = kernel_name(spec, tile);
    jobs.emplace(name, PrewarmJob{spec, tile, name});
  };
  std::vector<bool> passes;
  if (set.forward) passes.push_back(false);
  if (set.backward) passes.push_back(true);
  for (int arch : set.archs) {
    const DeviceLimits lim = DeviceLimits::for_arch(arch);
    for (const auto& ly : set.layers)
      for (DType dt : set.dtypes)
        for (bool bwd : passes)
          for (WTConvPath path : {WTConvPath::kPlane, WTConvPath::kTiled, WTConvPath::kLane}) {
            const WTConvOptions o{ly.C, ly.k, ly.L, dt, true, ly.stride, 0};
            const Shape sh{ly.B, ly.C, ly.H, ly.W, ly.stride};
            std::vector<PlannedKernel> plan;
            if (path != WTConvPath::kTiled) {
              try {
                plan = wtconv_plan(o, sh, lim, bwd, path);
              } catch (const SpecError&) {  // plane: the planes do not fit (the runtime takes the tiled path);
                // lane: NHWC activations of this shape take the plane or tiled kernels
                if (path == WTConvPath::kPlane)
                  notes.insert(fmt::format("plane path left out for {} L={} k={} on {}: planes do not fit",
                                           sh.to_string(), ly.L, ly.k, arch_name(arch)));
                continue;
              }
            } else {
              plan = wtconv_plan(o, sh, lim, bwd, path);  // invalid options: the user's error, thrown
            }
            for (const auto& pk : plan) {
              add(pk.spec, pk.tile);
              if (set.all_tiles)
                for (const Tile& t : enumerate(pk.spec, lim, &pk.shape)) add(pk.spec, t);
            }
          }
  }
  size_t other_arch = 0;
  for (const auto& name : set.kernel_names) {
    const auto nk = parse_kernel_name(name);
    if (!nk) {
      notes.insert(fmt::format("kernel '{}' is not a kernel name this lkjit generates; left out", name));
    } else if (std::find(set.archs.begin(), set.archs.end(), nk->spec.arch) == set.archs.end()) {
      ++other_arch;
    } else {
      add(nk->spec, nk->tile);
    }
  }
  if (other_arch)
    notes.insert(fmt::format("{} named kernel(s) for archs not in {} ({}) left out", other_arch, set.archs_from,
                             join_archs(set.archs)));
  PrewarmPlan p;
  for (auto& [name, job] : jobs) p.jobs.push_back(std::move(job));
  p.notes.assign(notes.begin(), notes.end());
  return p;
}

}  // namespace lkjit::tool
