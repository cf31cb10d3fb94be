// Every tile of the tiled path's level and synthesis kernels against the float64 reference, as the plane and
// lane spaces are swept (wtconv_fwd_test.cpp, wtconv_bwd_test.cpp, wtconv_lane_test.cpp): one kernel at a time,
// the others at their defaults, on the tile problem (odd extents, 3 levels: level 1 reads X, levels 2 and 3 an
// fp32 low band; the backward's level 2 reads X too) and, for the synthesis kernels, on the strided tile problem
// (k = 1 at stride 2: the strided output loop). Each tile (tile_h, tile_w, vy, threads) changes the blocks'
// halos, the coefficient windows folded under a tile and the partial-gradient rows. The candidates are
// compiled first in parallel (precompile_candidates), then run one by one; random parameters, outputs and
// gradients poisoned and guarded.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lkjit/numeric.h"
#include "lkjit/testing.h"
#include "lkjit/tuning.h"
#include "lkjit/wtconv_kernels.h"
#include "tests/gpu/gpu_fixture.h"
#include "tests/gpu/grad_check.h"
#include "tests/gpu/problems.h"

namespace lkjit::testing {
namespace {

// A tile for some of one kernel's plan entries (levels; 0 for the synthesis kernel).
struct Pin {
  Kernel kernel;
  std::vector<int> levels;
  Tile tile;
};

std::unique_ptr<WTConv> make_layer(const Problem& pb, DType dt, const Pin& pin) {
  auto layer = std::make_unique<WTConv>(WTConvOptions{pb.C, pb.k, pb.L, dt, pb.bias, pb.stride, 0});
  layer->set_path(WTConvPath::kTiled);
  layer->set_tune_mode(TuneMode::kOff);
  for (int l : pin.levels) layer->set_tile_override(pin.kernel, l, pin.tile);
  return layer;
}

std::vector<float> decode(DType dt, const GuardedBuffer& g, size_t n) {
  EXPECT_EQ(g.guard_bytes_changed(), 0) << "wrote past the tensor";
  std::vector<uint8_t> raw(n * dtype_bytes(dt));
  g.buffer().download(raw.data(), raw.size());
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = decode_one(dt, raw.data(), i);
  return v;
}

struct Case {
  Problem pb;
  DType dt = DType::kF32;
  bool backward = false;
  ref::WTConvParams params;
  std::vector<float> x, g;
  std::vector<double> want_out;
  ref::WTConvGrads want;
};

Case make_case(const Problem& pb, bool backward, uint64_t seed) {
  Case c;
  c.pb = pb;
  c.backward = backward;
  c.params = random_params(int(pb.C), pb.k, pb.L, pb.bias, seed);
  const Shape sh{pb.B, pb.C, pb.H, pb.W, pb.stride};
  c.x = random_tensor(size_t(sh.numel()), c.dt, seed + 1);
  const std::vector<double> xd(c.x.begin(), c.x.end());
  if (backward) {
    c.g = random_tensor(size_t(sh.B * sh.C * sh.H_out() * sh.W_out()), c.dt, seed + 2);
    c.want = ref::wtconv_backward(xd, {pb.B, pb.C, pb.H, pb.W}, c.params, std::vector<double>(c.g.begin(), c.g.end()),
                                  pb.stride);
  } else {
    c.want_out = ref::wtconv_forward(xd, {pb.B, pb.C, pb.H, pb.W}, c.params, pb.stride);
  }
  return c;
}

void run_and_check(const Case& c, const Pin& pin) {
  const Problem& pb = c.pb;
  const auto layer = make_layer(pb, c.dt, pin);
  auto dp = upload_params(c.params, c.backward);
  layer->set_weights(dp.weights);
  const auto xb = encode(c.dt, c.x);
  DeviceBuffer dx((xb.size() + 3) / 4 * 4);
  dx.upload(xb.data(), xb.size());
  if (!c.backward) {
    GuardedBuffer out(c.want_out.size() * dtype_bytes(c.dt));
    out.poison();
    layer->forward(dx.data(), out.data(), pb.B, pb.H, pb.W);
    synchronize();
    const auto cmp = compare(decode(c.dt, out, c.want_out.size()), c.want_out, tolerance(c.dt));
    EXPECT_TRUE(cmp.ok) << "out: " << cmp.to_string();
    return;
  }
  const auto gb = encode(c.dt, c.g);
  DeviceBuffer dg((gb.size() + 3) / 4 * 4);
  dg.upload(gb.data(), gb.size());
  GuardedBuffer ddx(xb.size());
  ddx.poison();
  dp.poison_grads();
  layer->backward(dx.data(), dg.data(), ddx.data(), dp.grads, pb.B, pb.H, pb.W);
  synchronize();
  EXPECT_EQ(dp.grad_guards_changed(), "") << "the backward wrote past a gradient";
  const auto cmp = compare(decode(c.dt, ddx, c.x.size()), c.want.dx, tolerance(c.dt));
  EXPECT_TRUE(cmp.ok) << "dX: " << cmp.to_string();
  expect_grads_close(download_grads(dp, c.params), c.want, pb.bias, pb.L, c.dt);
}

// Every tile of the sweep's kernel valid for each of its plan entries, compiled in parallel, then run against
// the reference. Returns how many tiles ran.
int sweep(const TiledSweep& s) {
  SCOPED_TRACE(seed_note(s.seed));
  const DeviceInfo dev = device_info(0);
  const auto entries = sweep_entries(s, dev.limits);
  EXPECT_EQ(entries.size(), s.levels.size()) << "the plan has not the entries to sweep";
  if (entries.empty()) return 0;
  for (const auto& e : entries) EXPECT_EQ(e.spec, entries[0].spec) << "the swept entries share one spec";
  const auto tiles = enumerate(entries[0].spec, dev.limits, &entries[0].shape);
  for (const auto& r : precompile_candidates(entries[0].spec, entries[0].shape, dev.limits, tiles, 0))
    EXPECT_EQ(r.status, CandidateStatus::kOk) << r.tile.to_string() << ": " << r.reason;
  const Case c = make_case(s.pb, s.backward, s.seed);
  int tested = 0;
  for (const Tile& t : tiles) {
    Pin pin{s.kernel, {}, t};
    for (const auto& e : entries)
      if (!reject_reason(e.spec, t, dev.limits, &e.shape)) pin.levels.push_back(e.level);
    SCOPED_TRACE(std::string(to_string(s.kernel)) + " " + t.to_string());
    run_and_check(c, pin);
    ++tested;
  }
  return tested;
}

class WTConvTiledTiles : public GpuTestP<TiledSweep> {};

TEST_P(WTConvTiledTiles, EveryTileMatchesTheReference) { EXPECT_EQ(sweep(GetParam()), kTiledSpace); }

INSTANTIATE_TEST_SUITE_P(Sweeps, WTConvTiledTiles, ::testing::ValuesIn(tiled_sweeps()),
                         [](const ::testing::TestParamInfo<TiledSweep>& i) { return i.param.name; });

}  // namespace
}  // namespace lkjit::testing
