// The plane kernels' channels_last cluster mode on the CPU: the index math the kernels use
// (templates/wtconv/cluster_geometry.cuh), the generator's rules for the cluster axis, the default tiles, the
// names and sources, NVRTC compiles for sm_90, and the planner's choice. The GPU side: tests/gpu/
// wtconv_strides_test.cpp (WTConvPlaneCluster).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "lkjit/error.h"
#include "lkjit/generator.h"
#include "lkjit/wtconv.h"
#include "runtime/nvrtc_compiler.h"
#include "templates/wtconv/cluster_geometry.cuh"
#include "tests/cubin_check.h"

namespace {

using ::testing::HasSubstr;
using namespace lkjit;  // NOLINT
using wtc::ClusterNhwc;

const DeviceLimits kH200 = DeviceLimits::for_arch(90), kA100 = DeviceLimits::for_arch(80);

OpSpec plane(bool bwd, DType dt, int L, bool nhwc, int arch = 90) {
  return wtconv_spec(bwd ? kWTConvBwdPlane : kWTConvFwdPlane, dt, 5, L, true, arch,
                     nhwc ? Layout::kNHWC : Layout::kNCHW);
}
Tile with_cluster(Tile t, int cluster) {
  t.set("cluster", cluster);
  return t;
}

// Every (item, element) of one pixel names each of the cluster's channels exactly once, in the order of the
// pixel's memory (a piece is a contiguous run); the owner (block rank, group) of channel ch is the plane the
// grid gives it: blocks of a cluster consecutive, groups of a block consecutive.
TEST(WTConvClusterGeometry, PiecesCoverEveryChannelOnceAndOwnersAreTheGridsPlanes) {
  for (int esize : {2, 4})
    for (int ranks : {2, 4, 8})
      for (int planes : {1, 2, 4}) {
        const ClusterNhwc g{ranks, planes, esize};
        if (wtc::cluster_reject(ranks, planes, esize, g.channels())) continue;
        SCOPED_TRACE(::testing::Message() << ranks << " ranks, " << planes << " planes, " << esize << " B");
        EXPECT_EQ(g.piece_elems() * g.pieces(), g.channels());
        EXPECT_LE(g.piece_bytes(), 16);
        EXPECT_GE(g.piece_bytes(), 4);
        const int h = 3, w = 5;
        EXPECT_EQ(g.items(h, w), h * w * g.pieces());
        for (int px = 0; px < h * w; ++px) {
          int next = 0;
          for (int i = px * g.pieces(); i < (px + 1) * g.pieces(); ++i) {
            ASSERT_EQ(g.pixel_of(i), px);
            for (int e = 0; e < g.piece_elems(); ++e) EXPECT_EQ(g.channel_of(i, e), next++);
          }
          EXPECT_EQ(next, g.channels());
        }
        const int first_block = 5 * ranks;  // a cluster's first block is a multiple of its size
        for (int ch = 0; ch < g.channels(); ++ch) {
          const int block = first_block + g.rank_of(ch), q = g.group_of(ch);
          EXPECT_EQ(block * planes + q, first_block * planes + ch);
        }
      }
}

TEST(WTConvClusterGeometry, RejectCodesAndInPlaceReads) {
  EXPECT_EQ(wtc::cluster_reject(8, 1, 2, 96), 0);
  EXPECT_EQ(wtc::cluster_reject(1, 1, 2, 96), 1);
  EXPECT_EQ(wtc::cluster_reject(16, 1, 2, 96), 1);
  EXPECT_EQ(wtc::cluster_reject(6, 1, 2, 96), 1);
  EXPECT_EQ(wtc::cluster_reject(4, 3, 2, 96), 2);
  EXPECT_EQ(wtc::cluster_reject(2, 1, 2, 96), 0);  // 4 B
  EXPECT_EQ(wtc::cluster_reject(8, 1, 2, 90), 4);
  EXPECT_EQ(wtc::cluster_reject(8, 2, 2, 96), 0);
  EXPECT_EQ(wtc::cluster_reject(8, 2, 2, 88), 4);  // 16 channels a cluster
  const ClusterNhwc g{8, 1, 2};                     // 16-byte pieces
  const long long nhwc[4] = {56 * 56 * 96, 1, 56 * 96, 96}, nchw[4] = {96 * 3136, 3136, 56, 1},
                  odd_pixels[4] = {56 * 56 * 97, 1, 56 * 97, 97};
  EXPECT_TRUE(wtc::cluster_reads(g, nhwc, 4096));
  EXPECT_FALSE(wtc::cluster_reads(g, nhwc, 4096 + 2)) << "a misaligned pointer";
  EXPECT_FALSE(wtc::cluster_reads(g, nchw, 4096)) << "channels not adjacent";
  EXPECT_FALSE(wtc::cluster_reads(g, odd_pixels, 4096)) << "pixels 97 elements apart";
}

TEST(WTConvClusterGenerator, OnlyChannelsLastSm90PlaneSpecsHaveTheAxis) {
  auto has_axis = [](const OpSpec& s) {
    for (const auto& a : tile_space(s).axes)
      if (a.name == "cluster") return true;
    return false;
  };
  for (bool bwd : {false, true}) {
    EXPECT_TRUE(has_axis(plane(bwd, DType::kBF16, 5, true)));
    EXPECT_FALSE(has_axis(plane(bwd, DType::kBF16, 5, false)));
    EXPECT_FALSE(has_axis(plane(bwd, DType::kBF16, 5, true, 80)));
  }
  // The other kernels have no layout field: wtconv_spec leaves it out.
  EXPECT_EQ(wtconv_spec(kWTConvFwdLane, DType::kF32, 5, 2, true, 90, Layout::kNHWC).fields.get("layout", -1), -1);
}

TEST(WTConvClusterGenerator, RejectsEachBadUseWithTheReason) {
  const Shape sh{4, 96, 56, 56, 1};
  const Tile t = with_cluster(wtconv_tile(0, 0, 1, 4, 256), 8);
  EXPECT_EQ(reject_reason(plane(false, DType::kBF16, 5, true), t, kH200, &sh), std::nullopt);
  EXPECT_THAT(reject_reason(plane(false, DType::kBF16, 5, false), t, kH200, &sh).value_or(""),
              HasSubstr("no such tile axis"));
  EXPECT_THAT(reject_reason(plane(false, DType::kBF16, 0, true), t, kH200, &sh).value_or(""), HasSubstr("L >= 1"));
  const Shape c90{4, 90, 56, 56, 1}, s2{4, 96, 56, 56, 2};
  EXPECT_THAT(reject_reason(plane(true, DType::kBF16, 5, true), t, kH200, &c90).value_or(""),
              HasSubstr("C=90 is not a multiple of the cluster's cluster x planes = 8 channels"));
  EXPECT_THAT(reject_reason(plane(true, DType::kBF16, 5, true), t, kH200, &s2).value_or(""), HasSubstr("stride 1"));
  EXPECT_THAT(reject_reason(plane(false, DType::kBF16, 5, true), with_cluster(t, 3), kH200, &sh).value_or(""),
              HasSubstr("cluster=3 is out of range"));
  // Through generate(): the same reason, before NVRTC.
  OpSpec a80 = plane(false, DType::kBF16, 5, true, 80);
  try {
    generate(a80, t);
    ADD_FAILURE() << "an sm_80 cluster tile generated";
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cluster"));
  }
}

TEST(WTConvClusterGenerator, DefaultTilesClusterWhereTheyCan) {
  for (bool bwd : {false, true}) {
    // WTConvNeXt-T's stages: 56x56 and 28x28 (2 planes a block forward: 16 channels a cluster).
    const Tile t56 = default_tile(plane(bwd, DType::kBF16, 5, true), Shape{64, 96, 56, 56, 1}, kH200);
    EXPECT_EQ(t56.get("cluster"), 8) << t56.to_string();
    const Tile t28 = default_tile(plane(bwd, DType::kBF16, 4, true), Shape{64, 192, 28, 28, 1}, kH200);
    EXPECT_EQ(t28.get("cluster"), 8) << t28.to_string();
    EXPECT_TRUE(in_space(plane(bwd, DType::kBF16, 4, true), t28, kH200, nullptr));
    // The same shapes on NCHW, C = 90, stride 2 and sm_80: no cluster, and the other axes as before.
    const Tile n56 = default_tile(plane(bwd, DType::kBF16, 5, false), Shape{64, 96, 56, 56, 1}, kH200);
    EXPECT_EQ(n56.get("cluster"), 0);
    EXPECT_EQ(n56.get("planes"), t56.get("planes"));
    EXPECT_EQ(n56.get("threads"), t56.get("threads"));
    EXPECT_EQ(n56.get("vy"), t56.get("vy"));
    EXPECT_EQ(default_tile(plane(bwd, DType::kBF16, 5, true), Shape{64, 90, 56, 56, 1}, kH200).get("cluster"), 0);
    EXPECT_EQ(default_tile(plane(bwd, DType::kBF16, 3, true), Shape{64, 96, 56, 56, 2}, kH200).get("cluster"), 0);
    EXPECT_EQ(default_tile(plane(bwd, DType::kBF16, 5, true, 80), Shape{64, 96, 56, 56, 1}, kA100).get("cluster"), 0);
  }
}

TEST(WTConvClusterGenerator, NamesParseBackAndSourcesDeclareTheCluster) {
  const OpSpec s = plane(false, DType::kBF16, 5, true);
  const Tile t = with_cluster(wtconv_tile(0, 0, 1, 8, 256), 8);
  const std::string name = kernel_name(s, t);
  EXPECT_EQ(name, "lkjit_wtconv_fwd_plane_bf16_k5_L5_l1_p1_v8_w256_cl8_sm90");
  const auto nk = parse_kernel_name(name);
  ASSERT_TRUE(nk);
  EXPECT_EQ(nk->spec, s);
  EXPECT_EQ(nk->tile, t);
  EXPECT_THAT(generate(s, t).source, HasSubstr("__cluster_dims__(8, 1, 1)"));
  // The NCHW kernel keeps its name and has no cluster; a channels_last tile without one names its layout.
  EXPECT_EQ(kernel_name(plane(false, DType::kBF16, 5, false), wtconv_tile(0, 0, 1, 8, 256)),
            "lkjit_wtconv_fwd_plane_bf16_k5_L5_p1_v8_w256_sm90");
  EXPECT_THAT(generate(plane(false, DType::kBF16, 5, false), wtconv_tile(0, 0, 1, 8, 256)).source,
              ::testing::Not(HasSubstr("__cluster_dims__")));
  EXPECT_EQ(kernel_name(s, wtconv_tile(0, 0, 1, 8, 256)), "lkjit_wtconv_fwd_plane_bf16_k5_L5_l1_p1_v8_w256_sm90");
  EXPECT_THAT(s.to_string(), HasSubstr("nhwc"));
}

// Forward and backward, 16-bit and fp32, every piece width (4, 8, 16 and two 16-byte pieces a pixel).
TEST(WTConvClusterCompile, ClusterKernelsCompileForSm90) {
  struct Case {
    bool bwd;
    DType dt;
    int planes, cluster;
  };
  for (const Case& c : {Case{false, DType::kBF16, 1, 8}, Case{true, DType::kBF16, 1, 8}, Case{false, DType::kF16, 1, 2},
                        Case{true, DType::kF32, 2, 4}, Case{false, DType::kF32, 2, 8}, Case{true, DType::kBF16, 1, 4}}) {
    const OpSpec s = plane(c.bwd, c.dt, 3, true);
    const Tile t = with_cluster(wtconv_tile(0, 0, c.planes, 4, 64 * c.planes), c.cluster);
    const GeneratedSource src = generate(s, t);
    SCOPED_TRACE(src.kernel_name);
    lkjit::test::expect_cubin(rt::nvrtc_compile(src, 90).cubin, 90, src.kernel_name);
  }
}

TEST(WTConvClusterPlan, ChannelsLastCallsPlanTheClusterTile) {
  WTConvOptions o{96, 5, 5, DType::kBF16, true, 1, 0};
  o.layout = Layout::kNHWC;
  for (bool bwd : {false, true}) {
    const auto pl = wtconv_plan(o, Shape{64, 96, 56, 56, 1}, kH200, bwd);
    ASSERT_GE(pl.size(), 2u);
    EXPECT_EQ(pl[1].spec.get("layout"), 1);
    EXPECT_EQ(pl[1].tile.get("cluster"), 8);
  }
  o.layout = Layout::kNCHW;
  EXPECT_EQ(wtconv_plan(o, Shape{64, 96, 56, 56, 1}, kH200)[1].tile.get("cluster"), 0);
  // Where no cluster can run, channels_last calls plan the NCHW kernel (its binaries and records serve): sm_80,
  // stride 2, L = 0, C not a multiple of 4. C = 12 can (clusters of 4) but the default's 8 cannot.
  struct Off {
    WTConvOptions o;
    DeviceLimits lim;
    int layout;
  };
  const Off offs[] = {{{96, 5, 5, DType::kBF16, true, 1, 0}, kA100, 0},
                      {{96, 5, 3, DType::kBF16, true, 2, 0}, kH200, 0},
                      {{96, 5, 0, DType::kBF16, true, 1, 0}, kH200, 0},
                      {{90, 5, 5, DType::kBF16, true, 1, 0}, kH200, 0},
                      {{12, 5, 5, DType::kBF16, true, 1, 0}, kH200, 1}};
  for (Off c : offs) {
    c.o.layout = Layout::kNHWC;
    const auto pl = wtconv_plan(c.o, Shape{2, c.o.C, 56, 56, c.o.stride}, c.lim, false, WTConvPath::kPlane);
    EXPECT_EQ(pl[1].spec.get("layout"), c.layout) << c.o.C << " " << c.o.stride << " " << c.o.L;
    EXPECT_EQ(pl[1].tile.get("cluster"), 0);
  }
}

// The GPU suite's in-place placements (tests/gpu/wtconv_strides_test.cpp, WTConvPlaneCluster) are ones the
// kernels read in place, so that suite runs the cluster path and not only its fallback; the odd slice is not.
TEST(WTConvClusterGeometry, TheGpuSuitesPlacementsAreReadInPlace) {
  struct Tile2 {
    int planes, ranks;
  };
  const long long h = 13, w = 27;
  for (long long C : {8, 16, 24, 32})
    for (const Tile2 t : {Tile2{1, 8}, Tile2{2, 4}, Tile2{1, 4}, Tile2{2, 8}})
      for (int esize : {2, 4}) {
        if (wtc::cluster_reject(t.ranks, t.planes, esize, C)) continue;
        const ClusterNhwc g{t.ranks, t.planes, esize};
        const unsigned long long buf = 1 << 20;  // an allocation's alignment
        const long long ct = C + 16, hp = h + 2, wp = w + 3, cs = 2 * C + 3;
        const long long nhwc[4] = {h * w * C, 1, w * C, C}, sliced8[4] = {h * w * ct, 1, w * ct, ct},
                        cropped[4] = {hp * wp * C, 1, wp * C, C}, sliced[4] = {h * w * cs, 1, w * cs, cs};
        SCOPED_TRACE(::testing::Message() << "C=" << C << " p" << t.planes << " cl" << t.ranks << " " << esize << " B");
        EXPECT_TRUE(wtc::cluster_reads(g, nhwc, buf));
        EXPECT_TRUE(wtc::cluster_reads(g, sliced8, buf + 8 * esize));
        EXPECT_TRUE(wtc::cluster_reads(g, cropped, buf + (wp + 2) * C * esize));
        EXPECT_FALSE(wtc::cluster_reads(g, sliced, buf + (C + 1) * esize));
      }
}

}  // namespace
