// Support shared by the tests, the CLI's checks and the benchmarks: device copies of reference
// parameters, per-dtype tolerances, and a NaN-safe comparison against the float64 reference.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lkjit/reference.h"
#include "lkjit/runtime.h"
#include "lkjit/wtconv.h"

namespace lkjit::testing {

// fp32 device copies of reference parameters, with the pointer tables the layer takes.
struct DeviceParams {
  std::vector<DeviceBuffer> bufs;
  WTConvWeights weights;
  // Gradient buffers of the same shapes (filled with NaN by poison()).
  std::vector<DeviceBuffer> grad_bufs;
  WTConvGradients grads;
  void poison_grads();
};
DeviceParams upload_params(const ref::WTConvParams& p, bool with_grads = false);
// Reads gradients back into the reference layout.
ref::WTConvGrads download_grads(const DeviceParams& d, const ref::WTConvParams& p);

// The parameters of channel c alone (C = 1), for per-plane reference checks.
ref::WTConvParams slice_channel(const ref::WTConvParams& p, int64_t c);

// |got - want| <= atol + rtol * |want| per element; NaN never passes.
struct Tolerance {
  double atol, rtol;
};
Tolerance tolerance(DType t);

struct Comparison {
  bool ok = true;
  double max_abs_err = 0;
  double worst_ratio = 0;  // max of err / (atol + rtol |want|); > 1 fails
  int64_t worst_index = -1;
  double worst_got = 0, worst_want = 0;
  std::string to_string() const;
};
Comparison compare(const std::vector<float>& got, const std::vector<double>& want, Tolerance tol);

// Normal(0,1) values rounded to dtype t, from a seeded generator.
std::vector<float> random_tensor(size_t n, DType t, uint64_t seed);

}  // namespace lkjit::testing
