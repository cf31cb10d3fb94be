// The scale family's layer and planner (lkjit/scale.h): one kernel, its params filled per call; tile
// choice, compiling, the per-shape cache and launching are the plan runner's.
#include <fmt/format.h>

#include <cstring>
#include <tuple>

#include "abi/scale_params.h"
#include "lkjit/error.h"
#include "lkjit/scale.h"
#include "runtime/plan_runner.h"
#include "runtime/strides.h"

namespace lkjit {
namespace {

void validate_options(const ScaleOptions& o) {
  if (o.C < 1 || o.C > (int64_t(1) << 24))
    throw SpecError(fmt::format("lkjit: error: scale: C={} is out of range; supported: [1, 2^24]", o.C));
  if (o.device < 0) throw SpecError(fmt::format("lkjit: error: scale: device={} is out of range; supported: >= 0", o.device));
}

void validate_shape(const Shape& sh) {
  for (auto [name, v] : {std::pair<const char*, int64_t>{"B", sh.B}, {"H", sh.H}, {"W", sh.W}})
    if (v < 1 || v > (int64_t(1) << 31) - 1)
      throw SpecError(fmt::format("lkjit: error: scale: {}={} is out of range; supported: [1, 2^31-1]", name, v));
  if (double(sh.B) * double(sh.C) * double(sh.H) * double(sh.W) > double(int64_t(1) << 40))
    throw SpecError("lkjit: error: scale: B*C*H*W exceeds the supported 2^40 elements");
}

}  // namespace

std::vector<PlannedKernel> scale_plan(const ScaleOptions& o, const Shape& sh, const DeviceLimits& lim) {
  validate_options(o);
  validate_shape(sh);
  PlannedKernel pk;
  pk.spec = make_spec(kScaleCopy, o.dtype, lim.arch);
  pk.shape = sh;
  pk.tile = default_tile(pk.spec, sh, lim);
  pk.bytes = 2.0 * double(sh.numel()) * dtype_bytes(o.dtype);
  return {pk};
}

struct ScaledCopy::Impl {
  rt::TilePolicy policy{"scale"};
  std::optional<Tile> override_tile;
  rt::PlanCache<std::tuple<int64_t, int64_t, int64_t>, rt::PreparedKernel> kernels;
  bool have_device = false;
  DeviceInfo dev;
};

ScaledCopy::ScaledCopy(const ScaleOptions& options) : opt_(options), impl_(std::make_unique<Impl>()) {
  validate_options(opt_);
}
ScaledCopy::~ScaledCopy() = default;

std::vector<PlannedKernel> ScaledCopy::plan(int64_t B, int64_t H, int64_t W) const {
  const DeviceInfo dev = impl_->have_device ? impl_->dev : device_info(opt_.device);
  auto pl = scale_plan(opt_, Shape{B, opt_.C, H, W, 1}, dev.limits);
  impl_->policy.choose(pl, dev);
  return pl;
}

void ScaledCopy::set_tile_override(const Tile& tile) {
  impl_->policy.set_override(kScaleCopy, 0, tile);
  impl_->kernels.clear();
}

void ScaledCopy::set_tune_options(const TuneOptions& o) {
  impl_->policy.set_tune_options(o);
  impl_->kernels.clear();
}

void ScaledCopy::forward(const void* x, const float* a, void* y, int64_t B, int64_t H, int64_t W, Stream s,
                         const std::array<int64_t, 4>* x_strides, const std::array<int64_t, 4>* y_strides) {
  if (!x || !a || !y) throw SpecError("lkjit: error: scale forward: x, a and y must be non-null device pointers");
  const Shape sh{B, opt_.C, H, W, 1};
  validate_shape(sh);
  const rt::Dims4 n{B, opt_.C, H, W};
  const rt::Dims4 xs = x_strides && *x_strides != rt::Dims4{} ? *x_strides : rt::dense_strides(Layout::kNCHW, n);
  const rt::Dims4 ys = y_strides && *y_strides != rt::Dims4{} ? *y_strides : rt::dense_strides(Layout::kNCHW, n);
  rt::check_strides("scale", "x", xs, n, false);
  rt::check_strides("scale", "y", ys, n, true);
  if (!impl_->have_device) {
    impl_->dev = device_info(opt_.device);
    impl_->have_device = true;
  }
  const auto& k = impl_->kernels.get({B, H, W}, s, "scale", fmt::format("the first call of B={} H={} W={}", B, H, W), [&] {
    auto pl = scale_plan(opt_, sh, impl_->dev.limits);
    impl_->policy.choose(pl, impl_->dev);
    impl_->policy.tune_on_miss(pl, [&] { return make_scale_harness(opt_, sh); });
    return rt::prepare_kernels(pl, opt_.device, "scale").front();
  });
  ScaleParams p;
  std::memset(&p, 0, sizeof(p));
  p.x = x;
  p.y = y;
  p.a = a;
  for (int i = 0; i < 4; ++i) p.x_st[i] = xs[i], p.y_st[i] = ys[i];
  p.B = B, p.C = opt_.C, p.H = H, p.W = W;
  rt::launch_prepared(k, &p, sizeof(p), s);
}

}  // namespace lkjit
