// The WBMM op layer: validates calls, plans each shape (wbmm_plan), fills each kernel's params once per shape
// and launches without host syncs or per-call allocations after the first call of a shape (graph friendly).
// Tile choice, compiling, loading, the per-shape cache and scratch are the plan runner's
// (runtime/plan_runner.h).
#include <fmt/format.h>

#include <cstddef>
#include <cstring>
#include <tuple>

#include "abi/wbmm_params.h"
#include "lkjit/error.h"
#include "lkjit/wbmm.h"
#include "lkjit/wbmm_tune.h"
#include "runtime/ops/wbmm_internal.h"
#include "runtime/plan_runner.h"

namespace lkjit {

// The params header asserts its size on both sides; the fields the host fills per call, here.
static_assert(offsetof(WBMMParams, x_st) == 32 && offsetof(WBMMParams, dx_st) == 128 && offsetof(WBMMParams, R) == 160 &&
                  offsetof(WBMMParams, dbias) == 216 && offsetof(WBMMParams, chunk_tiles) == 248,
              "WBMMParams layout changed: update the static_asserts with the device side in mind");

namespace {

using detail::wbmm::act_layout;
using detail::wbmm::with_layout;

enum class Role { kForward, kDgrad, kWgrad, kReduce };

struct PlannedLaunch {
  rt::PreparedKernel k;
  WBMMParams q;
  Role role = Role::kForward;
  bool fused_dx = false;  // a wgrad that writes dX
};

// B, H, W, backward, path, need_dx, act layout.
using ListKey = std::tuple<int64_t, int64_t, int64_t, bool, int, bool, Layout>;

}  // namespace

struct WBMM::LaunchList {
  std::vector<PlannedLaunch> launches;
  size_t scratch_floats = 0;
  int64_t bias_off = 0;  // float offset of the partial dbias rows in scratch
  std::string origin = "memory";
};

struct WBMM::Impl {
  rt::TilePolicy policy{"wbmm"};
  rt::PlanCache<ListKey, LaunchList> lists;
  bool have_device = false;
  DeviceInfo dev;
  rt::Scratch scratch;
  WBMMWeights w;
  bool have_weights = false;
};

WBMM::WBMM(const WBMMOptions& options) : opt_(options), impl_(std::make_unique<Impl>()) {
  wbmm_validate_options(opt_);
}
WBMM::~WBMM() = default;

Shape WBMM::shape_of(int64_t B, int64_t H, int64_t W) const {
  const Shape sh{B, opt_.C, H, W, 1};
  detail::wbmm::validate_shape(opt_, sh);
  return sh;
}

size_t WBMM::workspace_bytes() const { return impl_->scratch.bytes(); }

void WBMM::ensure_device() {
  if (!impl_->have_device) {
    impl_->dev = device_info(opt_.device);
    impl_->have_device = true;
  }
}

std::vector<PlannedKernel> WBMM::choose_tiles(const Shape& sh, const DeviceInfo& dev, bool backward, bool need_dx,
                                              Layout act) const {
  auto pl = wbmm_plan(with_layout(opt_, act), sh, dev.limits, backward, path_, need_dx);
  impl_->policy.choose(pl, dev);
  return pl;
}

std::vector<PlannedKernel> WBMM::plan(int64_t B, int64_t H, int64_t W, bool backward) const {
  const Shape sh = shape_of(B, H, W);
  return choose_tiles(sh, impl_->have_device ? impl_->dev : device_info(opt_.device), backward, true, opt_.layout);
}

void WBMM::set_backward_path(WBMMBackward p) {
  if (p != WBMMBackward::kAuto && p != WBMMBackward::kFused && p != WBMMBackward::kSplit)
    throw SpecError(fmt::format("lkjit: error: wbmm: backward path {} is out of range; supported: auto, fused, split",
                                static_cast<int>(p)));
  path_ = p;
  impl_->lists.clear();
}

void WBMM::set_tune_options(const TuneOptions& o) {
  impl_->policy.set_tune_options(o);
  impl_->lists.clear();
}

void WBMM::set_tune_mode(TuneMode m) {
  impl_->policy.set_tune_mode(m);
  impl_->lists.clear();
}

void WBMM::set_tile_override(Kernel kernel, const Tile& tile) {
  if (family_of(kernel).name != "wbmm")  // SpecError naming an unknown kernel first
    throw SpecError(fmt::format("lkjit: error: wbmm: tile override for {}, a kernel of another family", to_string(kernel)));
  impl_->policy.set_override(kernel, 0, tile);
  impl_->lists.clear();
}

void WBMM::clear_tile_overrides() {
  impl_->policy.clear_overrides();
  impl_->lists.clear();
}

void WBMM::set_weights(const WBMMWeights& w) {
  wbmm_check_weights(opt_, w);
  impl_->w = w;
  if (!opt_.bias) impl_->w.bias = nullptr;
  impl_->have_weights = true;
}

void WBMM::prepare(int64_t B, int64_t H, int64_t W, bool backward) {
  ensure_device();
  last_origin_ = launch_list(B, H, W, false, true, opt_.layout).origin;
  if (backward) last_origin_ = rt::worse_origin(last_origin_, launch_list(B, H, W, true, true, opt_.layout).origin);
}

const WBMM::LaunchList& WBMM::launch_list(int64_t B, int64_t H, int64_t W, bool backward, bool need_dx, Layout act,
                                          std::optional<Stream> call) {
  const ListKey key{B, H, W, backward, static_cast<int>(path_), backward && need_dx, act};
  return impl_->lists.get(key, call, "wbmm",
                          fmt::format("the first {} of B={} H={} W={}", backward ? "backward" : "forward", B, H, W),
                          [&] { return build_list(B, H, W, backward, need_dx, act); });
}

WBMM::LaunchList WBMM::build_list(int64_t B, int64_t H, int64_t W, bool backward, bool need_dx, Layout act) {
  const Shape sh = shape_of(B, H, W);
  auto pl = choose_tiles(sh, impl_->dev, backward, need_dx, act);
  // Tune on a miss only where the mode says so: the layer's default (cached) never measures here.
  impl_->policy.tune_on_miss(pl, [&]() -> std::unique_ptr<PassHarness> {
    WBMMTuneProblem p;
    p.options = with_layout(opt_, act);
    p.B = B, p.H = H, p.W = W, p.backward = backward, p.path = path_, p.need_dx = need_dx;
    return std::make_unique<WBMMHarness>(p);
  });
  const auto prepared = rt::prepare_kernels(pl, opt_.device, "wbmm");

  WBMMParams p;
  std::memset(&p, 0, sizeof(p));
  p.B = static_cast<int>(B);
  p.C = static_cast<int>(opt_.C);
  p.H = static_cast<int>(H);
  p.W = static_cast<int>(W);
  LaunchList list;
  int64_t parts = 0, chunks = 0, part_floats = 0, bias_floats = 0;
  for (const auto& k : prepared) {
    const Kernel& kn = k.planned.spec.kernel;
    PlannedLaunch l;
    l.k = k;
    l.q = p;
    l.q.nH = static_cast<int>(k.geometry.value("nH"));
    l.q.nW = static_cast<int>(k.geometry.value("nW"));
    if (kn == kWBMMReduce) {
      l.role = Role::kReduce;
      l.q.parts = static_cast<int>(parts);  // the wgrad's partial rows, which precede the reduce in the plan
      l.q.chunks = static_cast<int>(chunks);
    } else {
      l.q.chunk_tiles = static_cast<int>(k.geometry.value("chunk_tiles"));
      l.role = kn == kWBMMFwd ? Role::kForward : kn == kWBMMDgrad ? Role::kDgrad : Role::kWgrad;
    }
    if (kn == kWBMMWgrad) {
      l.fused_dx = k.planned.spec.get("fuse_dx") != 0;
      parts = k.geometry.value("parts");
      chunks = k.geometry.value("chunks");
      l.q.parts = static_cast<int>(parts);
      l.q.chunks = static_cast<int>(chunks);
      part_floats = k.geometry.value("partial_floats");
      bias_floats = k.geometry.value("partial_bias_floats");
    }
    list.origin = rt::worse_origin(list.origin, k.origin);
    list.launches.push_back(l);
  }
  // Scratch (floats): [partial rows (parts, C, nv) | partial dbias rows (chunks, C)], 16-byte aligned.
  list.bias_off = (part_floats + 3) / 4 * 4;
  list.scratch_floats = size_t(list.bias_off + bias_floats);
  return list;
}

void WBMM::run_list(const LaunchList& list, const void* x, const void* g, void* out, const WBMMStrides& st,
                    const WBMMGradients* grads, Stream s, std::vector<KernelTiming>* timings) {
  float* scratch = list.scratch_floats
                       ? static_cast<float*>(impl_->scratch.ensure(list.scratch_floats * 4, opt_.device, s, "wbmm"))
                       : nullptr;
  for (const PlannedLaunch& l : list.launches) {
    WBMMParams q = l.q;
    q.x = x;
    q.dy = g;
    std::copy(st.x.begin(), st.x.end(), q.x_st);
    std::copy(st.dout.begin(), st.dout.end(), q.dy_st);
    if (l.role == Role::kForward) {
      q.y = out;
      std::copy(st.out.begin(), st.out.end(), q.y_st);
    } else if (l.role == Role::kDgrad || l.fused_dx) {
      q.dx = out;
      std::copy(st.out.begin(), st.out.end(), q.dx_st);
    }
    q.R = impl_->w.R;
    q.M = impl_->w.M;
    q.bias = impl_->w.bias;
    q.part = scratch;
    q.part_bias = scratch && opt_.bias ? scratch + list.bias_off : nullptr;
    if (grads) {
      q.dR = grads->R;
      q.dM = grads->M;
      q.dbias = opt_.bias ? grads->bias : nullptr;
    }
    rt::launch_prepared(l.k, &q, sizeof(q), s, false, timings);
  }
  last_origin_ = list.origin;
}

void WBMM::forward(const void* x, void* out, int64_t B, int64_t H, int64_t W, Stream s, const WBMMStrides* strides) {
  wbmm_check_activations(x, nullptr, out, false);
  const WBMMStrides st = wbmm_resolve_strides(opt_, B, H, W, strides, false);
  if (!impl_->have_weights) throw SpecError("lkjit: error: wbmm forward: call set_weights() first");
  ensure_device();
  run_list(launch_list(B, H, W, false, true, act_layout(st.x, opt_.C), s), x, nullptr, out, st, nullptr, s);
}

void WBMM::backward(const void* x, const void* dout, void* dx, const WBMMGradients& grads, int64_t B, int64_t H,
                    int64_t W, Stream s, const WBMMStrides* strides) {
  wbmm_check_activations(x, dout, dx, true);
  const WBMMStrides st = wbmm_resolve_strides(opt_, B, H, W, strides, true, dx != nullptr);
  if (!impl_->have_weights) throw SpecError("lkjit: error: wbmm backward: call set_weights() first");
  wbmm_check_gradients(opt_, grads);
  ensure_device();
  run_list(launch_list(B, H, W, true, dx != nullptr, act_layout(st.x, opt_.C), s), x, dout, dx, st, &grads, s);
}

std::vector<KernelTiming> WBMM::profile(const void* x, const void* dout, void* out, const WBMMGradients* grads,
                                        int64_t B, int64_t H, int64_t W, Stream s, const WBMMStrides* strides) {
  const bool backward = dout != nullptr;
  wbmm_check_activations(x, dout, out, backward);
  const WBMMStrides st = wbmm_resolve_strides(opt_, B, H, W, strides, backward, out != nullptr);
  if (!impl_->have_weights) throw SpecError("lkjit: error: wbmm profile: call set_weights() first");
  if (backward && !grads) throw SpecError("lkjit: error: wbmm profile: backward needs gradient buffers");
  if (grads) wbmm_check_gradients(opt_, *grads);
  ensure_device();
  std::vector<KernelTiming> t;
  run_list(launch_list(B, H, W, backward, out != nullptr, act_layout(st.x, opt_.C)), x, dout, out, st, grads, s, &t);
  return t;
}

}  // namespace lkjit
