// WTConv forward and backward on strided activations against the float64 reference: channels_last
// (NHWC) tensors, mixed layouts (x NHWC with dOut NCHW, ...) and padded rows, on both paths, every
// dtype. Each tensor is placed in its layout by permuting on the host; gaps of every buffer are NaN
// (a kernel that reads one fails the comparison, one that writes one fails the gap check), and written
// tensors are NaN-poisoned before the launch. Strided results must also be bit-identical to NCHW ones:
// the kernels do the same arithmetic whatever the addresses.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "lkjit/numeric.h"
#include "lkjit/testing.h"
#include "tests/gpu/gpu_fixture.h"
#include "tests/gpu/grad_check.h"
#include "tests/gpu/problems.h"

namespace lkjit::testing {
namespace {

// Memory order of one activation tensor.
enum class Mem { kNCHW, kNHWC, kPadded, kPadded8, kPadded4, kShifted, kShifted2, kShifted4, kSliced, kSliced8, kCropped };
const char* mem_name(Mem m) {
  switch (m) {
    case Mem::kNHWC: return "nhwc";
    case Mem::kSliced: return "sliced";
    case Mem::kSliced8: return "sliced8";
    case Mem::kCropped: return "cropped";
    case Mem::kPadded: return "padded";
    case Mem::kPadded8: return "padded8";
    case Mem::kPadded4: return "padded4";
    case Mem::kShifted: return "shifted";
    case Mem::kShifted2: return "shifted2";
    case Mem::kShifted4: return "shifted4";
    case Mem::kNCHW: break;
  }
  return "nchw";
}

struct Dims {
  int64_t B, C, h, w;
  int64_t numel() const { return B * C * h * w; }
};

// Element strides in (B, C, H, W) order, the offset of element 0 and the buffer size (elements) of a
// tensor in memory order m. kPadded: NCHW with 3 spare columns per row and a spare row per plane, so
// there are gaps everywhere. kPadded8: rows of a multiple of 8 elements (at least one spare column) and a
// spare row per plane, so the plane kernels' 8- and 16-byte loads apply where W allows, beside gaps.
// kPadded4: rows of 4 (mod 8) elements, so a 16-bit W = 16 takes 8-byte loads where 16 would cross rows.
// kShifted, kShifted2, kShifted4: dense NCHW 1, 2 or 4 elements into the (aligned) buffer, so the first
// plane starts 1, 2 or 4 elements past an alignment boundary, and later planes wherever H*W puts them: the
// plane kernels take narrower loads there, or none.
// kSliced: channels C+1 .. 2C of a channels_last tensor of 2C+3 channels (x[:, C+1:2C+1] of a PyTorch
// channels_last tensor): channel stride 1, pixels 2C+3 apart. kCropped: the (1, 2) .. (h, w+1) window of a
// channels_last tensor of (h+2) x (w+3) pixels: dense pixels, rows (w+3)*C apart, gaps around every plane.
// kSliced8: channels 8 .. C+7 of a channels_last tensor of C+16 channels (aligned runs of channels, gaps
// between pixels: the plane kernels' cluster mode reads it in place, kSliced's odd offset it cannot).
struct Placement {
  std::array<int64_t, 4> st;
  int64_t elems;
  int64_t base = 0;
};
Placement placement(Mem m, const Dims& d) {
  switch (m) {
    case Mem::kNHWC: return {{d.h * d.w * d.C, 1, d.w * d.C, d.C}, d.numel()};
    case Mem::kPadded: {
      const int64_t pitch = d.w + 3, plane = (d.h + 1) * pitch;
      return {{d.C * plane, plane, pitch, 1}, d.B * d.C * plane};
    }
    case Mem::kPadded8: {
      const int64_t pitch = (d.w + 8) / 8 * 8, plane = (d.h + 1) * pitch;
      return {{d.C * plane, plane, pitch, 1}, d.B * d.C * plane};
    }
    case Mem::kPadded4: {
      const int64_t pitch = (d.w + 4) / 8 * 8 + 4, plane = (d.h + 1) * pitch;
      return {{d.C * plane, plane, pitch, 1}, d.B * d.C * plane};
    }
    case Mem::kShifted:
    case Mem::kShifted2:
    case Mem::kShifted4: {
      const int64_t shift = m == Mem::kShifted ? 1 : m == Mem::kShifted2 ? 2 : 4;
      return {{d.C * d.h * d.w, d.h * d.w, d.w, 1}, d.numel() + shift, shift};
    }
    case Mem::kSliced: {
      const int64_t ct = 2 * d.C + 3;
      return {{d.h * d.w * ct, 1, d.w * ct, ct}, d.B * d.h * d.w * ct, d.C + 1};
    }
    case Mem::kSliced8: {
      const int64_t ct = d.C + 16;
      return {{d.h * d.w * ct, 1, d.w * ct, ct}, d.B * d.h * d.w * ct, 8};
    }
    case Mem::kCropped: {
      const int64_t hp = d.h + 2, wp = d.w + 3;
      return {{hp * wp * d.C, 1, wp * d.C, d.C}, d.B * hp * wp * d.C, (wp + 2) * d.C};
    }
    case Mem::kNCHW: break;
  }
  return {{d.C * d.h * d.w, d.h * d.w, d.w, 1}, d.numel()};
}

// f(i, off) for every element: i its NCHW index, off its offset in the placement.
template <class F>
void for_each_element(const Dims& d, const Placement& p, F f) {
  int64_t i = 0;
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t c = 0; c < d.C; ++c)
      for (int64_t y = 0; y < d.h; ++y)
        for (int64_t x = 0; x < d.w; ++x, ++i)
          f(size_t(i), size_t(p.base + b * p.st[0] + c * p.st[1] + y * p.st[2] + x * p.st[3]));
}

// A device copy of an NCHW host tensor in placement p (dtype t), gaps NaN.
DeviceBuffer place(DType t, const std::vector<float>& v, const Dims& d, const Placement& p) {
  std::vector<float> mem(size_t(p.elems), std::numeric_limits<float>::quiet_NaN());
  for_each_element(d, p, [&](size_t i, size_t off) { mem[off] = v[i]; });
  const auto bytes = encode(t, mem);
  DeviceBuffer buf((bytes.size() + 7) / 4 * 4);
  buf.upload(bytes.data(), bytes.size());
  return buf;
}

// A NaN-poisoned device buffer for a written tensor in placement p, with kGuardBytes of guard after its span.
DeviceBuffer poisoned(DType t, const Placement& p) {
  const size_t bytes = size_t(p.elems) * dtype_bytes(t);
  DeviceBuffer buf((bytes + kGuardBytes + 3) / 4 * 4);
  buf.fill_u32(0xffffffffu);  // NaN in f32, f16 and bf16
  const std::vector<uint8_t> guard(buf.bytes() - bytes, kGuardByte);
  buf.upload(guard.data(), guard.size(), bytes);
  return buf;
}

// The NCHW values of a written tensor, how many bytes of its gaps lost their poison, and (a poisoned()
// buffer) how many of the guard after its span changed.
struct ReadBack {
  std::vector<float> v;
  std::vector<uint8_t> bits;  // the NCHW values' encodings, for bitwise comparisons
  int64_t gap_bytes_written = 0;
  int64_t guard_bytes_changed = 0;
};
ReadBack read_back(DType t, const DeviceBuffer& buf, const Dims& d, const Placement& p) {
  const size_t eb = dtype_bytes(t), span = size_t(p.elems) * eb;
  std::vector<uint8_t> raw(buf.bytes());
  buf.download(raw.data(), raw.size());
  ReadBack r;
  r.v.resize(size_t(d.numel()));
  r.bits.resize(size_t(d.numel()) * eb);
  std::vector<char> used(size_t(p.elems), 0);
  for_each_element(d, p, [&](size_t i, size_t off) {
    r.v[i] = decode_one(t, raw.data(), off);
    std::memcpy(r.bits.data() + i * eb, raw.data() + off * eb, eb);
    used[off] = 1;
  });
  for (size_t off = 0; off < used.size(); ++off)
    if (!used[off])
      for (size_t k = 0; k < eb; ++k) r.gap_bytes_written += raw[off * eb + k] != 0xff;
  if (raw.size() >= span + kGuardBytes)
    r.guard_bytes_changed = std::count_if(raw.begin() + span, raw.end(), [](uint8_t b) { return b != kGuardByte; });
  return r;
}

// The address of element 0 of a tensor placed in buf.
void* at(const DeviceBuffer& buf, const Placement& p, DType t) {
  return static_cast<char*>(buf.data()) + p.base * int64_t(dtype_bytes(t));
}

Dims in_dims(const Problem& pb) { return {pb.B, pb.C, pb.H, pb.W}; }
Dims out_dims(const Problem& pb) {
  const Shape sh{pb.B, pb.C, pb.H, pb.W, pb.stride};
  return {pb.B, pb.C, sh.H_out(), sh.W_out()};
}

// The layer of a problem on `path`: the lane path on channels_last activations (options.layout; the calls'
// strides say where each tensor is).
WTConvOptions layer_options(const Problem& pb, DType dt, WTConvPath path) {
  WTConvOptions o{pb.C, pb.k, pb.L, dt, pb.bias, pb.stride, 0};
  if (path == WTConvPath::kLane) o.layout = Layout::kNHWC;
  return o;
}

// tile: where given, the plane kernel's tile (an override).
ReadBack run_forward(const Problem& pb, DType dt, WTConvPath path, const ref::WTConvParams& params,
                     const std::vector<float>& x, Mem mx, Mem mout, const Tile* tile = nullptr) {
  WTConv layer(layer_options(pb, dt, path));
  layer.set_path(path);
  if (tile) layer.set_tile_override(kWTConvFwdPlane, 0, *tile);
  auto dp = upload_params(params);
  layer.set_weights(dp.weights);
  const Placement px = placement(mx, in_dims(pb)), po = placement(mout, out_dims(pb));
  const DeviceBuffer dx = place(dt, x, in_dims(pb), px);
  DeviceBuffer dout = poisoned(dt, po);
  WTConvStrides st;
  st.x = px.st;
  st.out = po.st;
  layer.forward(at(dx, px, dt), at(dout, po, dt), pb.B, pb.H, pb.W, nullptr, &st);
  synchronize();
  return read_back(dt, dout, out_dims(pb), po);
}

struct BwdResult {
  ReadBack dx;
  ref::WTConvGrads grads;
  std::string grad_guards;  // DeviceParams::grad_guards_changed()
};

BwdResult run_backward(const Problem& pb, DType dt, WTConvPath path, const ref::WTConvParams& params,
                       const std::vector<float>& x, const std::vector<float>& g, Mem mx, Mem mg, Mem mdx,
                       const Tile* tile = nullptr) {
  WTConv layer(layer_options(pb, dt, path));
  layer.set_path(path);
  if (tile) layer.set_tile_override(kWTConvBwdPlane, 0, *tile);
  auto dp = upload_params(params, /*with_grads=*/true);
  layer.set_weights(dp.weights);
  const Placement px = placement(mx, in_dims(pb)), pg = placement(mg, out_dims(pb)), pdx = placement(mdx, in_dims(pb));
  const DeviceBuffer dxin = place(dt, x, in_dims(pb), px), dg = place(dt, g, out_dims(pb), pg);
  DeviceBuffer ddx = poisoned(dt, pdx);
  dp.poison_grads();
  WTConvStrides st;
  st.x = px.st;
  st.dout = pg.st;
  st.out = pdx.st;
  layer.backward(at(dxin, px, dt), at(dg, pg, dt), at(ddx, pdx, dt), dp.grads, pb.B, pb.H, pb.W, nullptr, &st);
  synchronize();
  return {read_back(dt, ddx, in_dims(pb), pdx), download_grads(dp, params), dp.grad_guards_changed()};
}

void expect_grads_close(const BwdResult& r, const ref::WTConvGrads& want, const Problem& pb, DType dt) {
  expect_grad_close(r.grads.base_w, want.base_w, "base_w", dt);
  if (pb.bias) expect_grad_close(r.grads.base_b, want.base_b, "base_b", dt);
  expect_grad_close(r.grads.base_s, want.base_s, "base_s", dt);
  for (int l = 0; l < pb.L; ++l) {
    expect_grad_close(r.grads.level_w[l], want.level_w[l], "level_w[" + std::to_string(l) + "]", dt);
    expect_grad_close(r.grads.level_s[l], want.level_s[l], "level_s[" + std::to_string(l) + "]", dt);
  }
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

// ---- forward ----

using FwdParam = std::tuple<Problem, DType, WTConvPath, Mem, Mem>;  // x, out

std::vector<FwdParam> fwd_params() {
  const std::vector<std::array<Mem, 2>> layouts = {
      {Mem::kNHWC, Mem::kNHWC},       {Mem::kNHWC, Mem::kNCHW},     {Mem::kNCHW, Mem::kNHWC},
      {Mem::kPadded, Mem::kPadded},   {Mem::kPadded8, Mem::kPadded8}, {Mem::kShifted, Mem::kShifted},
      {Mem::kShifted2, Mem::kNCHW},   {Mem::kShifted4, Mem::kPadded4}, {Mem::kPadded4, Mem::kNCHW}};
  std::vector<FwdParam> v;
  const auto problems = strided_problems();
  for (size_t i = 0; i < problems.size(); ++i)
    for (const auto& m : layouts)
      for (WTConvPath path : {WTConvPath::kPlane, WTConvPath::kTiled}) {
        // Every dtype for channels_last in and out; f32 and one 16-bit type for the other layouts.
        std::vector<DType> dts{DType::kF32, i % 2 ? DType::kBF16 : DType::kF16};
        if (m[0] == Mem::kNHWC && m[1] == Mem::kNHWC) dts = {DType::kF32, DType::kF16, DType::kBF16};
        for (DType dt : dts) v.emplace_back(problems[i], dt, path, m[0], m[1]);
      }
  return v;
}

std::string fwd_param_name(const ::testing::TestParamInfo<FwdParam>& i) {
  const auto& [pb, dt, path, mx, mo] = i.param;
  return problem_name(pb, dt, path) + "_x" + mem_name(mx) + "_out" + mem_name(mo);
}

class WTConvForwardStrided : public GpuTestP<FwdParam> {};

TEST_P(WTConvForwardStrided, MatchesFloat64Reference) {
  const auto& [pb, dt, path, mx, mo] = GetParam();
  if (path == WTConvPath::kPlane) {
    if (const auto why = plane_path_unavailable(pb, dt, /*backward=*/false)) GTEST_SKIP() << *why;
  }
  const uint64_t seed = 31;  // parameters; the input seed + 6
  SCOPED_TRACE(seed_note(seed));
  const auto params = random_params(int(pb.C), pb.k, pb.L, pb.bias, seed);
  const ref::Shape4 s4{pb.B, pb.C, pb.H, pb.W};
  const auto x = random_tensor(size_t(s4.numel()), dt, seed + 6);
  const auto got = run_forward(pb, dt, path, params, x, mx, mo);
  EXPECT_EQ(got.gap_bytes_written, 0) << "the kernels wrote into gaps of out";
  EXPECT_EQ(got.guard_bytes_changed, 0) << "the kernels wrote past out";
  const auto want = ref::wtconv_forward(std::vector<double>(x.begin(), x.end()), s4, params, pb.stride);
  const auto cmp = compare(got.v, want, tolerance(dt));
  EXPECT_TRUE(cmp.ok) << cmp.to_string();
  // The same arithmetic as the NCHW-contiguous run, bit for bit.
  const auto nchw = run_forward(pb, dt, path, params, x, Mem::kNCHW, Mem::kNCHW);
  EXPECT_TRUE(got.bits == nchw.bits) << "strided out differs from the NCHW run";
}

INSTANTIATE_TEST_SUITE_P(Layouts, WTConvForwardStrided, ::testing::ValuesIn(fwd_params()), fwd_param_name);

// ---- backward ----

using BwdParam = std::tuple<Problem, DType, WTConvPath, Mem, Mem, Mem>;  // x, dout, dx

std::vector<BwdParam> bwd_params() {
  const std::vector<std::array<Mem, 3>> layouts = {{Mem::kNHWC, Mem::kNHWC, Mem::kNHWC},
                                                   {Mem::kNHWC, Mem::kNCHW, Mem::kNHWC},
                                                   {Mem::kNCHW, Mem::kNHWC, Mem::kNCHW},
                                                   {Mem::kNCHW, Mem::kNCHW, Mem::kNHWC},
                                                   {Mem::kPadded, Mem::kPadded, Mem::kPadded},
                                                   {Mem::kPadded8, Mem::kPadded8, Mem::kPadded8},
                                                   {Mem::kNCHW, Mem::kPadded8, Mem::kNCHW},
                                                   {Mem::kNCHW, Mem::kShifted, Mem::kShifted},
                                                   {Mem::kNCHW, Mem::kPadded4, Mem::kNCHW},
                                                   {Mem::kShifted4, Mem::kNCHW, Mem::kShifted2},
                                                   {Mem::kShifted2, Mem::kPadded8, Mem::kNCHW}};
  std::vector<BwdParam> v;
  const auto problems = strided_problems();
  for (size_t i = 0; i < problems.size(); ++i)
    for (const auto& m : layouts)
      for (WTConvPath path : {WTConvPath::kPlane, WTConvPath::kTiled}) {
        std::vector<DType> dts{DType::kF32, i % 2 ? DType::kF16 : DType::kBF16};
        if (m[0] == Mem::kNHWC && m[1] == Mem::kNHWC) dts = {DType::kF32, DType::kF16, DType::kBF16};
        for (DType dt : dts) v.emplace_back(problems[i], dt, path, m[0], m[1], m[2]);
      }
  return v;
}

std::string bwd_param_name(const ::testing::TestParamInfo<BwdParam>& i) {
  const auto& [pb, dt, path, mx, mg, mdx] = i.param;
  return problem_name(pb, dt, path) + "_x" + mem_name(mx) + "_dout" + mem_name(mg) + "_dx" + mem_name(mdx);
}

class WTConvBackwardStrided : public GpuTestP<BwdParam> {};

TEST_P(WTConvBackwardStrided, MatchesFloat64Reference) {
  const auto& [pb, dt, path, mx, mg, mdx] = GetParam();
  if (path == WTConvPath::kPlane) {
    if (const auto why = plane_path_unavailable(pb, dt, /*backward=*/true)) GTEST_SKIP() << *why;
  }
  const uint64_t seed = 41;  // parameters; the input seed + 2, the output gradient seed + 6
  SCOPED_TRACE(seed_note(seed));
  const auto params = random_params(int(pb.C), pb.k, pb.L, pb.bias, seed);
  const ref::Shape4 s4{pb.B, pb.C, pb.H, pb.W};
  const auto x = random_tensor(size_t(s4.numel()), dt, seed + 2);
  const auto g = random_tensor(size_t(out_dims(pb).numel()), dt, seed + 6);
  const auto r = run_backward(pb, dt, path, params, x, g, mx, mg, mdx);
  EXPECT_EQ(r.dx.gap_bytes_written, 0) << "the kernels wrote into gaps of dX";
  EXPECT_EQ(r.dx.guard_bytes_changed, 0) << "the kernels wrote past dX";
  EXPECT_EQ(r.grad_guards, "") << "the kernels wrote past a gradient";
  const auto want = ref::wtconv_backward(std::vector<double>(x.begin(), x.end()), s4, params,
                                         std::vector<double>(g.begin(), g.end()), pb.stride);
  const auto cmp = compare(r.dx.v, want.dx, tolerance(dt));
  EXPECT_TRUE(cmp.ok) << "dX: " << cmp.to_string();
  expect_grads_close(r, want, pb, dt);
  // The same arithmetic as the NCHW-contiguous run, bit for bit (dX and every parameter gradient).
  const auto nchw = run_backward(pb, dt, path, params, x, g, Mem::kNCHW, Mem::kNCHW, Mem::kNCHW);
  EXPECT_TRUE(r.dx.bits == nchw.dx.bits) << "strided dX differs from the NCHW run";
  EXPECT_TRUE(same_bits(r.grads.base_w, nchw.grads.base_w));
  EXPECT_TRUE(same_bits(r.grads.base_s, nchw.grads.base_s));
  for (int l = 0; l < pb.L; ++l) {
    EXPECT_TRUE(same_bits(r.grads.level_w[l], nchw.grads.level_w[l])) << "level " << l;
    EXPECT_TRUE(same_bits(r.grads.level_s[l], nchw.grads.level_s[l])) << "level " << l;
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, WTConvBackwardStrided, ::testing::ValuesIn(bwd_params()), bwd_param_name);

// ---- the lane kernels on channels_last tensors that are not dense ----

// Lane-sized problems (stride 1, W <= 16): odd extents, C = 1 beside C = 2 and 5, and L up to 8.
std::vector<Problem> lane_strided_problems() {
  return {{2, 3, 7, 9, 5, 3, 1, true}, {1, 5, 16, 16, 3, 8, 1, true}, {3, 2, 12, 7, 5, 6, 1, false}};
}

// Problem, dtype, then x, dout and out (the forward's out, the backward's dX): channel slices and spatial
// crops of channels_last tensors, mixed with dense ones.
using LaneParam = std::tuple<Problem, DType, Mem, Mem, Mem>;

std::vector<LaneParam> lane_params() {
  const std::vector<std::array<Mem, 3>> layouts = {{Mem::kSliced, Mem::kSliced, Mem::kSliced},
                                                   {Mem::kCropped, Mem::kCropped, Mem::kCropped},
                                                   {Mem::kSliced, Mem::kCropped, Mem::kNHWC},
                                                   {Mem::kNHWC, Mem::kSliced, Mem::kCropped}};
  std::vector<LaneParam> v;
  for (const Problem& p : lane_strided_problems())
    for (const auto& m : layouts)
      for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) v.emplace_back(p, dt, m[0], m[1], m[2]);
  return v;
}

std::string lane_param_name(const ::testing::TestParamInfo<LaneParam>& i) {
  const auto& [pb, dt, mx, mg, mo] = i.param;
  return problem_name(pb, dt, WTConvPath::kLane) + "_x" + mem_name(mx) + "_dout" + mem_name(mg) + "_out" + mem_name(mo);
}

class WTConvLaneStrided : public GpuTestP<LaneParam> {};

TEST_P(WTConvLaneStrided, ForwardMatchesFloat64ReferenceAndTheDenseRun) {
  const auto& [pb, dt, mx, mg, mo] = GetParam();
  const uint64_t seed = 71;  // parameters; the input seed + 1
  SCOPED_TRACE(seed_note(seed));
  const auto params = random_params(int(pb.C), pb.k, pb.L, pb.bias, seed);
  const auto x = random_tensor(size_t(in_dims(pb).numel()), dt, seed + 1);
  const auto got = run_forward(pb, dt, WTConvPath::kLane, params, x, mx, mo);
  EXPECT_EQ(got.gap_bytes_written, 0) << "the lane forward wrote into gaps of out";
  EXPECT_EQ(got.guard_bytes_changed, 0) << "the lane forward wrote past out";
  const auto want = ref::wtconv_forward(std::vector<double>(x.begin(), x.end()), {pb.B, pb.C, pb.H, pb.W}, params, 1);
  const auto cmp = compare(got.v, want, tolerance(dt));
  EXPECT_TRUE(cmp.ok) << cmp.to_string();
  EXPECT_TRUE(got.bits == run_forward(pb, dt, WTConvPath::kLane, params, x, Mem::kNHWC, Mem::kNHWC).bits)
      << "strided out differs from the dense channels_last run";
}

TEST_P(WTConvLaneStrided, BackwardMatchesFloat64ReferenceAndTheDenseRun) {
  const auto& [pb, dt, mx, mg, mo] = GetParam();
  const uint64_t seed = 73;  // parameters; the input seed + 1, the output gradient seed + 2
  SCOPED_TRACE(seed_note(seed));
  const auto params = random_params(int(pb.C), pb.k, pb.L, pb.bias, seed);
  const auto x = random_tensor(size_t(in_dims(pb).numel()), dt, seed + 1);
  const auto g = random_tensor(size_t(in_dims(pb).numel()), dt, seed + 2);
  const auto r = run_backward(pb, dt, WTConvPath::kLane, params, x, g, mx, mg, mo);
  EXPECT_EQ(r.dx.gap_bytes_written, 0) << "the lane backward wrote into gaps of dX";
  EXPECT_EQ(r.dx.guard_bytes_changed, 0) << "the lane backward wrote past dX";
  EXPECT_EQ(r.grad_guards, "") << "the lane backward wrote past a gradient";
  const auto want = ref::wtconv_backward(std::vector<double>(x.begin(), x.end()), {pb.B, pb.C, pb.H, pb.W}, params,
                                         std::vector<double>(g.begin(), g.end()), 1);
  const auto cmp = compare(r.dx.v, want.dx, tolerance(dt));
  EXPECT_TRUE(cmp.ok) << "dX: " << cmp.to_string();
  expect_grads_close(r, want, pb, dt);
  const auto dense = run_backward(pb, dt, WTConvPath::kLane, params, x, g, Mem::kNHWC, Mem::kNHWC, Mem::kNHWC);
  EXPECT_TRUE(r.dx.bits == dense.dx.bits) << "strided dX differs from the dense channels_last run";
  for (int l = 0; l < pb.L; ++l) EXPECT_TRUE(same_bits(r.grads.level_w[l], dense.grads.level_w[l])) << "level " << l;
}

INSTANTIATE_TEST_SUITE_P(Layouts, WTConvLaneStrided, ::testing::ValuesIn(lane_params()), lane_param_name);

// ---- the plane kernels' channels_last cluster mode (sm_90) ----

// Problems with C a multiple of the clusters' channels (8 or 16): odd extents, a tiny map, batch 1, a
// 56x56 L = 5 plane (WTConvNeXt-T's first stage), L up to 6, k 3 to 7, with and without bias.
struct ClusterCase {
  Problem pb;
  int planes, cluster;  // the plane tile's groups a block and blocks a cluster
};
std::vector<ClusterCase> cluster_cases() {
  return {{{2, 16, 13, 27, 5, 3, 1, true}, 1, 8}, {{2, 16, 13, 27, 5, 3, 1, true}, 2, 4},
          {{3, 8, 5, 3, 3, 2, 1, false}, 1, 8},   {{3, 8, 5, 3, 3, 2, 1, false}, 2, 4},
          {{1, 32, 28, 28, 5, 4, 1, true}, 2, 8}, {{1, 16, 56, 56, 5, 5, 1, true}, 1, 8},
          {{2, 24, 9, 64, 7, 6, 1, true}, 1, 4}};
}

// Case, dtype, and the memory order of x, of dOut and of out / dX: dense channels_last and aligned slices and
// crops of it (read and written in place), and mixes with NCHW or an odd slice, where the kernel falls back
// to element-wise staging (one plane per block).
using ClusterParam = std::tuple<ClusterCase, DType, Mem, Mem, Mem>;

std::vector<ClusterParam> cluster_params() {
  const std::vector<std::array<Mem, 3>> layouts = {{Mem::kNHWC, Mem::kNHWC, Mem::kNHWC},
                                                   {Mem::kSliced8, Mem::kCropped, Mem::kSliced8},
                                                   {Mem::kNHWC, Mem::kSliced, Mem::kNCHW}};
  std::vector<ClusterParam> v;
  for (const auto& c : cluster_cases())
    for (const auto& m : layouts)
      for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) v.emplace_back(c, dt, m[0], m[1], m[2]);
  return v;
}

std::string cluster_param_name(const ::testing::TestParamInfo<ClusterParam>& i) {
  const auto& [c, dt, mx, mg, mo] = i.param;
  return fmt::format("{}_p{}_cl{}_x{}_dout{}_out{}", problem_name(c.pb, dt, WTConvPath::kPlane), c.planes, c.cluster,
                     mem_name(mx), mem_name(mg), mem_name(mo));
}

class WTConvPlaneCluster : public GpuTestP<ClusterParam> {
 protected:
  void SetUp() override {
    GpuTestP<ClusterParam>::SetUp();
    if (IsSkipped()) return;
    if (device_info(0).arch < 90) GTEST_SKIP() << "thread-block clusters need sm_90";
  }
  // The case's tile: two warps a plane, strips of 4 rows; with the cluster or (cluster = 0) without.
  static Tile tile(const ClusterCase& c, int cluster) {
    Tile t = wtconv_tile(0, 0, c.planes, 4, 64 * c.planes);
    if (cluster) t.set("cluster", cluster);
    return t;
  }
};

TEST_P(WTConvPlaneCluster, ForwardMatchesFloat64ReferenceAndThePlainKernelBitForBit) {
  const auto& [c, dt, mx, mg, mo] = GetParam();
  const Problem& pb = c.pb;
  const uint64_t seed = 83;  // parameters; the input seed + 1
  SCOPED_TRACE(seed_note(seed));
  const auto params = random_params(int(pb.C), pb.k, pb.L, pb.bias, seed);
  const auto x = random_tensor(size_t(in_dims(pb).numel()), dt, seed + 1);
  const Tile with = tile(c, c.cluster), without = tile(c, 0);
  const auto got = run_forward(pb, dt, WTConvPath::kPlane, params, x, mx, mo, &with);
  EXPECT_EQ(got.gap_bytes_written, 0) << "the cluster forward wrote into gaps of out";
  EXPECT_EQ(got.guard_bytes_changed, 0) << "the cluster forward wrote past out";
  const auto want = ref::wtconv_forward(std::vector<double>(x.begin(), x.end()), {pb.B, pb.C, pb.H, pb.W}, params, 1);
  const auto cmp = compare(got.v, want, tolerance(dt));
  EXPECT_TRUE(cmp.ok) << cmp.to_string();
  EXPECT_TRUE(got.bits == run_forward(pb, dt, WTConvPath::kPlane, params, x, Mem::kNCHW, Mem::kNCHW, &without).bits)
      << "out differs from the plain kernel's on NCHW";
}

TEST_P(WTConvPlaneCluster, BackwardMatchesFloat64ReferenceAndThePlainKernelBitForBit) {
  const auto& [c, dt, mx, mg, mo] = GetParam();
  const Problem& pb = c.pb;
  const uint64_t seed = 89;  // parameters; the input seed + 1, the output gradient seed + 2
  SCOPED_TRACE(seed_note(seed));
  const auto params = random_params(int(pb.C), pb.k, pb.L, pb.bias, seed);
  const auto x = random_tensor(size_t(in_dims(pb).numel()), dt, seed + 1);
  const auto g = random_tensor(size_t(in_dims(pb).numel()), dt, seed + 2);
  const Tile with = tile(c, c.cluster), without = tile(c, 0);
  const auto r = run_backward(pb, dt, WTConvPath::kPlane, params, x, g, mx, mg, mo, &with);
  EXPECT_EQ(r.dx.gap_bytes_written, 0) << "the cluster backward wrote into gaps of dX";
  EXPECT_EQ(r.dx.guard_bytes_changed, 0) << "the cluster backward wrote past dX";
  EXPECT_EQ(r.grad_guards, "") << "the cluster backward wrote past a gradient";
  const auto want = ref::wtconv_backward(std::vector<double>(x.begin(), x.end()), {pb.B, pb.C, pb.H, pb.W}, params,
                                         std::vector<double>(g.begin(), g.end()), 1);
  const auto cmp = compare(r.dx.v, want.dx, tolerance(dt));
  EXPECT_TRUE(cmp.ok) << "dX: " << cmp.to_string();
  expect_grads_close(r, want, pb, dt);
  const auto plain = run_backward(pb, dt, WTConvPath::kPlane, params, x, g, Mem::kNCHW, Mem::kNCHW, Mem::kNCHW, &without);
  EXPECT_TRUE(r.dx.bits == plain.dx.bits) << "dX differs from the plain kernel's on NCHW";
  EXPECT_TRUE(same_bits(r.grads.base_w, plain.grads.base_w));
  for (int l = 0; l < pb.L; ++l) EXPECT_TRUE(same_bits(r.grads.level_w[l], plain.grads.level_w[l])) << "level " << l;
}

INSTANTIATE_TEST_SUITE_P(Tiles, WTConvPlaneCluster, ::testing::ValuesIn(cluster_params()), cluster_param_name);

// ---- wtconv_transpose: layout copies, bit for bit ----

class WTConvTranspose : public GpuTest {};

// Every pair of layouts (NCHW, NHWC, padded) both ways, every dtype, sizes that leave partial 64x64 tiles
// (and C = 1, B = 1): dst holds src's bits, dst's gaps keep their poison, src is untouched.
TEST_F(WTConvTranspose, CopiesEveryLayoutPairBitForBit) {
  // 16-bit dense NHWC <-> NCHW: C and H*W multiples of 8 take the 16-byte vector path (partial tiles on
  // both axes in 2x96x8x9 and 1x136x4x22), other even ones the word path; the rest the element path.
  // Many pixel tiles on the vector path: 2x72x20x20 (7, and a partial channel tile) and 1x16x40x48 (30).
  const std::vector<Dims> dims = {{2, 96, 7, 9},  {1, 3, 33, 31},  {3, 1, 5, 70}, {1, 40, 1, 1},     {2, 96, 6, 9},
                                  {1, 130, 10, 13}, {3, 64, 8, 8}, {2, 96, 8, 9}, {1, 136, 4, 22}, {2, 72, 20, 20},
                                  {1, 16, 40, 48}};
  int runs = 0;
  auto check = [&](const Dims& d, DType dt, Mem ms, Mem md) {
    SCOPED_TRACE(fmt::format("{}x{}x{}x{} {} {} -> {}", d.B, d.C, d.h, d.w, to_string(dt), mem_name(ms), mem_name(md)));
    const auto v = random_tensor(size_t(d.numel()), dt, 97 + runs);
    const Placement ps = placement(ms, d), pd = placement(md, d);
    const DeviceBuffer src = place(dt, v, d, ps);
    DeviceBuffer dst = poisoned(dt, pd);
    wtconv_transpose(at(src, ps, dt), ps.st, at(dst, pd, dt), pd.st, dt, d.B, d.C, d.h, d.w);
    synchronize();
    const auto got = read_back(dt, dst, d, pd), want = read_back(dt, src, d, ps);
    EXPECT_TRUE(got.bits == want.bits) << "dst differs from src";
    EXPECT_EQ(got.gap_bytes_written, 0) << "wrote into gaps of dst";
    EXPECT_EQ(got.guard_bytes_changed, 0) << "wrote past dst";
    ++runs;
  };
  const Mem mems[] = {Mem::kNCHW, Mem::kNHWC, Mem::kPadded};
  // Dense NCHW shifted off the 16-byte boundary: 16-bit copies fall back from the vector path to words (4- and
  // 8-byte aligned bases) or single elements (2-byte).
  const std::pair<Mem, Mem> shifted[] = {{Mem::kShifted2, Mem::kNHWC}, {Mem::kNHWC, Mem::kShifted4}, {Mem::kShifted, Mem::kNHWC}};
  for (const Dims& d : dims)
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (Mem ms : mems)
        for (Mem md : mems)
          if (ms != md || ms == Mem::kPadded) check(d, dt, ms, md);
      for (const auto& [ms, md] : shifted) check(d, dt, ms, md);
    }
  EXPECT_EQ(runs, 330);  // 11 sizes x 3 dtypes x (7 layout pairs + 3 shifted)
}

TEST_F(WTConvTranspose, RejectsBadArgumentsBeforeTheGpu) {
  DeviceBuffer a(4096), b(4096);
  const std::array<int64_t, 4> nchw{48, 16, 4, 1}, nhwc{48, 1, 12, 3};
  auto err = [&](auto f) {
    try {
      f();
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_THAT(err([&] { wtconv_transpose(nullptr, nchw, b.data(), nhwc, DType::kF32, 1, 3, 4, 4); }),
              ::testing::HasSubstr("non-null"));
  EXPECT_THAT(err([&] { wtconv_transpose(a.data(), nchw, b.data(), nhwc, DType::kF32, 1, 3, 0, 4); }),
              ::testing::HasSubstr("H=0 is out of range"));
  EXPECT_THAT(err([&] { wtconv_transpose(a.data(), nchw, b.data(), {48, 1, 3, 3}, DType::kF32, 1, 3, 4, 4); }),
              ::testing::HasSubstr("dst strides [48, 1, 3, 3] overlap"));
  EXPECT_THAT(err([&] { wtconv_transpose(a.data(), {48, 16, 0, 1}, b.data(), nhwc, DType::kF32, 1, 3, 4, 4); }),
              ::testing::HasSubstr("src stride[2]=0"));
  EXPECT_THAT(err([&] { wtconv_transpose(a.data(), nchw, a.data(), nhwc, DType::kF32, 1, 3, 4, 4); }),
              ::testing::HasSubstr("src and dst overlap"));
  // dst starts inside src's span (48 f16 = 96 bytes): still an overlap; right after it is fine.
  auto* a8 = static_cast<char*>(a.data());
  EXPECT_THAT(err([&] { wtconv_transpose(a8, nchw, a8 + 94, nhwc, DType::kF16, 1, 3, 4, 4); }),
              ::testing::HasSubstr("src and dst overlap"));
  EXPECT_NO_THROW(wtconv_transpose_check(a8, nchw, a8 + 96, nhwc, DType::kF16, 1, 3, 4, 4));
}

// ---- options.layout = NHWC: tensors without strides are channels_last ----

class WTConvLayoutOption : public GpuTest {};

TEST_F(WTConvLayoutOption, NHWCMakesChannelsLastTheDefault) {
  const Problem pb{2, 3, 17, 15, 5, 3, 2, true};
  const DType dt = DType::kF32;
  const uint64_t seed = 53;  // parameters; the input seed + 6, the output gradient seed + 8
  SCOPED_TRACE(seed_note(seed));
  const auto params = random_params(int(pb.C), pb.k, pb.L, pb.bias, seed);
  const ref::Shape4 s4{pb.B, pb.C, pb.H, pb.W};
  const auto x = random_tensor(size_t(s4.numel()), dt, seed + 6);
  const auto g = random_tensor(size_t(out_dims(pb).numel()), dt, seed + 8);
  for (WTConvPath path : {WTConvPath::kPlane, WTConvPath::kTiled}) {
    WTConvOptions o{pb.C, pb.k, pb.L, dt, pb.bias, pb.stride, 0};
    o.layout = Layout::kNHWC;
    WTConv layer(o);
    layer.set_path(path);
    auto dp = upload_params(params, /*with_grads=*/true);
    layer.set_weights(dp.weights);
    const Placement px = placement(Mem::kNHWC, in_dims(pb)), po = placement(Mem::kNHWC, out_dims(pb));
    const DeviceBuffer dxin = place(dt, x, in_dims(pb), px), dg = place(dt, g, out_dims(pb), po);
    DeviceBuffer out = poisoned(dt, po), dx = poisoned(dt, px);
    layer.forward(dxin.data(), out.data(), pb.B, pb.H, pb.W);  // no strides: NHWC from the options
    dp.poison_grads();
    layer.backward(dxin.data(), dg.data(), dx.data(), dp.grads, pb.B, pb.H, pb.W);
    synchronize();
    const auto want = ref::wtconv_forward(std::vector<double>(x.begin(), x.end()), s4, params, pb.stride);
    const auto cmp = compare(read_back(dt, out, out_dims(pb), po).v, want, tolerance(dt));
    EXPECT_TRUE(cmp.ok) << "out: " << cmp.to_string();
    const auto wb = ref::wtconv_backward(std::vector<double>(x.begin(), x.end()), s4, params,
                                         std::vector<double>(g.begin(), g.end()), pb.stride);
    const auto cdx = compare(read_back(dt, dx, in_dims(pb), px).v, wb.dx, tolerance(dt));
    EXPECT_TRUE(cdx.ok) << "dX: " << cdx.to_string();
    expect_grads_close({{}, download_grads(dp, params)}, wb, pb, dt);
  }
}

}  // namespace
}  // namespace lkjit::testing
