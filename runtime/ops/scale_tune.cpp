// The scale family's pass harness (its PassHarness, for the tuner): a ScaledCopy on rotating buffers.
#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <optional>

#include "lkjit/error.h"
#include "lkjit/numeric.h"
#include "lkjit/scale.h"
#include "lkjit/testing.h"
#include "runtime/op_registry.h"
#include "runtime/pass_timer.h"

namespace lkjit {
namespace {

class ScaleHarness : public PassHarness {
 public:
  ScaleHarness(const ScaleOptions& o, const Shape& sh)
      : opt_(o), sh_(sh), dev_(device_info(o.device)), layer_(o), timer_(dev_) {
    info_.op = "scale";
    info_.dtype = o.dtype;
    info_.B = sh.B, info_.C = sh.C, info_.H = sh.H, info_.W = sh.W;
    info_.text = fmt::format("fwd {} {}", to_string(o.dtype), sh.to_string());
    plan_ = scale_plan(o, sh, dev_.limits);
    TuneOptions off;
    off.mode = TuneMode::kOff;
    layer_.set_tune_options(off);
    const size_t bytes = (size_t(sh.numel()) * dtype_bytes(o.dtype) + 3) / 4 * 4;
    sets_ = rt::PassTimer::sets_for(dev_, 2 * bytes);
    for (size_t i = 0; i < sets_; ++i) {
      x_.emplace_back(bytes, o.device);
      x_.back().fill_u32(0x3f803f80u);  // ones in 16-bit, about 1 in f32: timing does not depend on values
      y_.emplace_back(bytes, o.device);
    }
    a_ = DeviceBuffer(size_t(o.C) * 4, o.device);
    a_.fill_u32(0x3f800000u);
    synchronize();
  }
  const PassInfo& info() const override { return info_; }
  const DeviceInfo& device() const override { return dev_; }
  const std::vector<PlannedKernel>& plan() const override { return plan_; }
  void set_tile(const KernelSelector&, const Tile& t) override { layer_.set_tile_override(t); }
  void set_tiles(const std::vector<PlannedKernel>& plan) override { layer_.set_tile_override(plan.at(0).tile); }
  void prepare() override { run(0); synchronize(); }
  std::vector<double> time(int warmup, int reps) override {
    return timer_.time(warmup, reps, sets_, [&](size_t s) { run(s); });
  }
  double traffic_bytes() const override { return plan_.at(0).bytes; }
  // Both tiles' outputs on one random x and a (a in [0.5, 1.5), so no channel's scale vanishes), each
  // written into a NaN-poisoned, guarded y.
  std::optional<std::string> check_outputs(const std::vector<PlannedKernel>& reference,
                                           const std::vector<PlannedKernel>& candidate) override {
    const size_t n = size_t(sh_.numel());
    if (!check_x_.data()) {
      const auto xb = encode(opt_.dtype, testing::random_tensor(n, opt_.dtype, 0x5ca1e));
      check_x_ = DeviceBuffer((xb.size() + 3) / 4 * 4, opt_.device);
      check_x_.upload(xb.data(), xb.size());
      std::vector<float> a = testing::random_tensor(size_t(opt_.C), DType::kF32, 0x5ca1f);
      for (float& v : a) v = 1.0f + 0.5f * std::tanh(v);
      check_a_ = DeviceBuffer(a.size() * 4, opt_.device);
      check_a_.upload(a.data(), a.size() * 4);
      check_y_ = testing::GuardedBuffer(n * dtype_bytes(opt_.dtype), opt_.device);
    }
    auto run_with = [&](const std::vector<PlannedKernel>& tiles) {
      set_tiles(tiles);
      check_y_.poison();
      layer_.forward(check_x_.data(), static_cast<const float*>(check_a_.data()), check_y_.data(), sh_.B, sh_.H,
                     sh_.W);
      synchronize();
      std::vector<uint8_t> raw(n * dtype_bytes(opt_.dtype));
      check_y_.buffer().download(raw.data(), raw.size());
      testing::PassOutputs o;
      o.tensors.push_back({"y", false, std::vector<float>(n)});
      for (size_t i = 0; i < n; ++i) o.tensors[0].v[i] = decode_one(opt_.dtype, raw.data(), i);
      if (const int64_t bad = check_y_.guard_bytes_changed()) o.guard_damage = fmt::format("y: {} guard bytes changed", bad);
      return o;
    };
    const testing::PassOutputs want = run_with(reference);
    const testing::PassOutputs got = run_with(candidate);
    return testing::compare_outputs(want, got, opt_.dtype);
  }

 private:
  void run(size_t s) {
    layer_.forward(x_[s].data(), static_cast<const float*>(a_.data()), y_[s].data(), sh_.B, sh_.H, sh_.W);
  }
  ScaleOptions opt_;
  Shape sh_;
  DeviceInfo dev_;
  ScaledCopy layer_;
  rt::PassTimer timer_;
  PassInfo info_;
  std::vector<PlannedKernel> plan_;
  std::vector<DeviceBuffer> x_, y_;
  DeviceBuffer a_;
  size_t sets_ = 1;
  DeviceBuffer check_x_, check_a_;  // check_outputs' inputs and output, made on first use
  testing::GuardedBuffer check_y_;
};

std::pair<std::unique_ptr<PassHarness>, KernelSelector> harness_for(const OpSpec& spec, const Shape& sh, int device,
                                                                    const DeviceLimits&) {
  if (spec.kernel != kScaleCopy)
    throw SpecError(fmt::format("lkjit: error: tuner: {} is not a kernel of the scale family", spec.to_string()));
  return {std::make_unique<ScaleHarness>(ScaleOptions{sh.C, spec.dtype, device}, sh), KernelSelector{kScaleCopy, 0}};
}

}  // namespace

std::unique_ptr<PassHarness> make_scale_harness(const ScaleOptions& o, const Shape& sh) {
  return std::make_unique<ScaleHarness>(o, sh);
}

namespace rt {
OpRuntime scale_runtime() { return {"scale", harness_for}; }
}  // namespace rt

}  // namespace lkjit
