// Support shared by the tests, the CLI's checks, the tuner's output check and the benchmarks: device copies
// of reference parameters, random parameters, guarded output buffers, per-dtype tolerances, and NaN-safe
// comparisons (against the float64 reference, or of two runs of one pass).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lkjit/reference.h"
#include "lkjit/runtime.h"
#include "lkjit/wtconv.h"

namespace lkjit::testing {

// Guard bytes after a written device buffer: kGuardBytes of a fixed pattern (kGuardByte, which no dtype's
// NaN poison or a small value shares) that a kernel writing past its tensor overwrites.
inline constexpr size_t kGuardBytes = 256;
inline constexpr uint8_t kGuardByte = 0xa5;

// A device buffer of `bytes` for a written tensor, with kGuardBytes of guard right after them (unaligned
// when bytes is, so a 2-byte store past the end shows). poison() fills the tensor with 0xff bytes (NaN in
// f32, f16 and bf16) and writes the guard; guard_bytes_changed() reads the guard back.
class GuardedBuffer {
 public:
  GuardedBuffer() = default;
  explicit GuardedBuffer(size_t bytes, int device = 0);
  void* data() const { return buf_.data(); }
  size_t bytes() const { return bytes_; }
  const DeviceBuffer& buffer() const { return buf_; }
  void poison();
  int64_t guard_bytes_changed() const;  // 0 when the guard reads back unchanged

 private:
  DeviceBuffer buf_;
  size_t bytes_ = 0;
};

// fp32 device copies of reference parameters, with the pointer tables the layer takes.
struct DeviceParams {
  std::vector<DeviceBuffer> bufs;
  WTConvWeights weights;
  // Gradient buffers of the same shapes, each with a guard (filled with NaN and the guard by poison_grads()).
  std::vector<GuardedBuffer> grad_bufs;
  WTConvGradients grads;
  void poison_grads();
  // The gradients whose guards changed since poison_grads(), with the byte counts ("" when none did):
  // "level_w[2]: 4 guard bytes changed".
  std::string grad_guards_changed() const;
};
DeviceParams upload_params(const ref::WTConvParams& p, bool with_grads = false);
// Reads gradients back into the reference layout.
ref::WTConvGrads download_grads(const DeviceParams& d, const ref::WTConvParams& p);

// The parameters of channel c alone (C = 1), for per-plane reference checks.
ref::WTConvParams slice_channel(const ref::WTConvParams& p, int64_t c);

// Parameters for kernel tests: the reference module's shapes, every value random, so that a dropped, swapped
// or misplaced scale or bias shows. Weights kaiming_uniform(a=sqrt(5)) as ref::init_params; biases U(-1, 1);
// every scale (the base scale per channel, the level scales per channel and subband) of random sign with
// |s| in [0.3, 0.8] or [1.25, 2]: at least 0.2 away from 1 and 0.1 (the module's init, which a kernel that
// ignored or fixed a scale would reproduce) and never near 0. Deterministic in seed.
ref::WTConvParams random_params(int C, int k, int L, bool bias, uint64_t seed);

// |got - want| <= atol + rtol * |want| per element; NaN never passes.
struct Tolerance {
  double atol, rtol;
};
Tolerance tolerance(DType t);
// A parameter gradient's: an fp32 sum over B*H*W terms, so relative to `scale`, the largest magnitude of the
// reference gradient (rel 2e-4 in f32, 2e-3 for 16-bit activations).
Tolerance gradient_tolerance(double scale, DType t);

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

// What one run of a pass wrote, for comparing two runs of it on the same inputs (the tuner's check of a
// winning tile against the default): named tensors, each an activation ("out", "dX": compared with
// tolerance(dtype)) or a parameter gradient ("base_w", "level_s[2]": fp32 sums over B*H*W terms, compared
// with a tolerance relative to the reference run's largest magnitude, as the kernel tests do), and which
// guards after the written buffers changed.
struct PassOutputs {
  struct Tensor {
    std::string name;
    bool gradient = false;
    std::vector<float> v;
  };
  std::vector<Tensor> tensors;
  std::string guard_damage;  // "" when every guard read back unchanged, else what changed
};
// Why `got` disagrees with `want` (the reference run), naming the tensor and its worst element, or nullopt
// when every tensor agrees. A NaN in either run, a guard changed in either run, or tensors that differ in
// name, kind or size disagree.
std::optional<std::string> compare_outputs(const PassOutputs& want, const PassOutputs& got, DType dtype);

}  // namespace lkjit::testing
