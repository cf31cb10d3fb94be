// The scale family: y = a[c] * x for activations x, y of shape (B, C, H, W) in f32, f16 or bf16 with any
// element strides ((B, C, H, W) order, as WTConvStrides), and a per-channel scale a (C) in fp32. Accumulates
// in fp32. It is the smallest op family (README, "Adding an op family"): its files are the template every
// family starts from, and the tests use it to check that a family needs no edit of the core.
// Errors: SpecError for any value out of range (named, with the range); DriverError without a GPU.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "lkjit/plan.h"
#include "lkjit/runtime.h"
#include "lkjit/tuning.h"

namespace lkjit {

inline const Kernel kScaleCopy{"scale_copy"};

struct ScaleOptions {
  int64_t C = 1;  // channels, 1..2^24
  DType dtype = DType::kF32;
  int device = 0;
};

// Pure: the one kernel a call runs (no GPU needed). SpecError for bad options or shape.
std::vector<PlannedKernel> scale_plan(const ScaleOptions& o, const Shape& shape, const DeviceLimits& limits);
// The forward of a ScaledCopy on `shape` as the tuner times it (lkjit/tuning.h: tune_pass): rotating buffers of
// constants, the layer's tile mode off. Allocates on the device: DriverError without a GPU; SpecError for a bad
// shape.
std::unique_ptr<PassHarness> make_scale_harness(const ScaleOptions& o, const Shape& shape);

class ScaledCopy {
 public:
  explicit ScaledCopy(const ScaleOptions& options);  // validates; allocates nothing
  ~ScaledCopy();
  ScaledCopy(const ScaledCopy&) = delete;
  ScaledCopy& operator=(const ScaledCopy&) = delete;
  const ScaleOptions& options() const { return opt_; }

  // y = a * x. x, y: device pointers in the dtype; a: (C) fp32 device pointer. Strides: null = dense NCHW;
  // y must not overlap itself. B, H, W in [1, 2^31-1], B*C*H*W <= 2^40.
  void forward(const void* x, const float* a, void* y, int64_t B, int64_t H, int64_t W, Stream s = nullptr,
               const std::array<int64_t, 4>* x_strides = nullptr, const std::array<int64_t, 4>* y_strides = nullptr);
  std::vector<PlannedKernel> plan(int64_t B, int64_t H, int64_t W) const;  // needs a GPU (its limits)
  void set_tile_override(const Tile& tile);
  void set_tune_options(const TuneOptions& o);

 private:
  struct Impl;
  ScaleOptions opt_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lkjit
