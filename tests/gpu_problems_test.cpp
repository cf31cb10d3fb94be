// The GPU suites' problem lists (tests/gpu/problems.h), checked on the CPU with sm_90's limits: the problems
// the plane suites skip are exactly the expected ones (the GPU suites assert the same on the device).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "lkjit/generator.h"
#include "lkjit/spec.h"
#include "tests/gpu/problems.h"

namespace lkjit::testing {
namespace {

std::string join(const std::set<std::string>& s) {
  std::string r;
  for (const auto& e : s) r += "\n  " + e;
  return r;
}

TEST(GpuProblemLists, ThePlaneSuitesSkipExactlyTheExpectedProblemsOnSm90) {
  const DeviceLimits lim = DeviceLimits::for_arch(90);
  const auto skips = plane_skips(wtconv_problems(), lim);
  EXPECT_EQ(skips, expected_plane_skips()) << "skipped:" << join(skips);
  const auto strided = plane_skips(strided_problems(), lim);
  EXPECT_EQ(strided, expected_strided_plane_skips()) << "skipped:" << join(strided);
}

// The tiled sweeps' entries exist, share one spec, and every point of their space is valid for each entry.
TEST(GpuProblemLists, EveryTiledSweepCoversAWholeSpaceOnSm90) {
  const DeviceLimits lim = DeviceLimits::for_arch(90);
  for (const TiledSweep& s : tiled_sweeps()) {
    SCOPED_TRACE(s.name);
    const auto entries = sweep_entries(s, lim);
    ASSERT_EQ(entries.size(), s.levels.size());
    for (const auto& e : entries) {
      EXPECT_EQ(e.spec, entries[0].spec);
      EXPECT_EQ(int(enumerate(e.spec, lim, &e.shape).size()), kTiledSpace) << e.shape.to_string();
      int points = 1;
      for (const auto& ax : tile_space(e.spec).axes) points *= int(ax.values.size());
      EXPECT_EQ(points, kTiledSpace);
    }
  }
}

}  // namespace
}  // namespace lkjit::testing
