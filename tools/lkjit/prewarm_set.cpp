#include "tools/lkjit/prewarm_set.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "tools/lkjit/common.h"

namespace lkjit::tool {

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
    for (const auto& ly : set.layers) {
      const OpCli& op = op_cli(ly.op, "op");
      for (DType dt : set.dtypes)
        for (bool bwd : passes)
          for (const auto& pk : op.plan(ly, dt, bwd, lim, PlanScope::kEveryPath, &notes)) {
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
    notes.insert(fmt::format("{} for archs not in {} ({}) left out", counted(other_arch, "named kernel"), set.archs_from,
                             join_archs(set.archs)));
  PrewarmPlan p;
  for (auto& [name, job] : jobs) p.jobs.push_back(std::move(job));
  p.notes.assign(notes.begin(), notes.end());
  return p;
}

}  // namespace lkjit::tool
