// Tuning the WTConv kernels at the layer level. A kernel cannot run alone (it reads the scratch its
// predecessors write and needs a full WTConvParams), so a candidate tile is measured by running the
// whole forward (or backward) of a real layer problem: WTConvHarness, the family's PassHarness
// (lkjit/tuning.h), pins the candidate's plan entry with WTConv::set_tile_override while every other entry
// keeps its current choice, and tune_pass times the pass. Kernels are tuned one at a time in plan order
// (coordinate descent across kernels). Timing the whole pass also charges a tile for its effect on its
// neighbours (e.g. what it leaves in L2).
//
// Timing: warm-up runs, then per sample an L2 flush (cuMemsetD32Async over >= 2x the L2), the next
// of several rotating input/output sets, and a CUDA-event pair around one pass; the median counts.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lkjit/runtime.h"
#include "lkjit/tuning.h"
#include "lkjit/wtconv.h"

namespace lkjit {

// One layer pass to measure.
struct WTConvTuneProblem {
  WTConvOptions options;  // C, k, L, dtype, bias, stride, device
  int64_t B = 1, H = 1, W = 1;
  bool backward = false;
  WTConvPath path = WTConvPath::kAuto;
  Shape shape() const { return Shape{B, options.C, H, W, options.stride}; }
  std::string to_string() const;  // "fwd f32 64x96x56x56 k=5 L=5"
  PassInfo info() const;          // the same, as tune reports carry it
};

// The plan entries of `p` worth tuning (more than one candidate for their shape), in plan order.
std::vector<PlannedKernel> wtconv_tunable(const WTConvTuneProblem& p, const DeviceLimits& limits);
// The entry that moves the most bytes: the plane or lane kernel, else the synthesis kernel.
KernelSelector wtconv_main_kernel(const std::vector<PlannedKernel>& plan);

// A layer problem whose plan runs `spec` on `shape` (as that kernel sees it), and the entry to tune in it:
// how the Tuner times one WTConv kernel. Pure (no GPU). SpecError when no such problem exists (e.g. a
// level kernel's spec with L != 0, or planes that do not fit).
std::pair<WTConvTuneProblem, KernelSelector> wtconv_problem_for(const OpSpec& spec, const Shape& shape, int device,
                                                                const DeviceLimits& limits);

using WTConvTuneReport = TuneReport;

// tune_pass over a WTConvHarness of `p`: tunes the selected entries (empty: every tunable one) and, if
// o.save, records each decision. Needs a GPU (DriverError); SpecError for a selector that matches no entry.
WTConvTuneReport wtconv_tune(const WTConvTuneProblem& p, const std::vector<KernelSelector>& which,
                             const TuneOptions& o);

// A runnable layer problem for timing: its own layer (tune mode off), random weights and scales
// (testing::random_params), rotating input/output sets, gradient buffers for a backward, and an L2-flush
// buffer. The timed inputs hold constants (timing does not depend on values); check_outputs runs on its
// own random inputs (normal, seeded) and guarded outputs, made on first use, and compares the output (dX)
// with tolerance(dtype) and, for a backward, every parameter gradient relative to its scale.
class WTConvHarness : public PassHarness {
 public:
  explicit WTConvHarness(const WTConvTuneProblem& p);
  ~WTConvHarness() override;
  WTConvHarness(const WTConvHarness&) = delete;
  WTConvHarness& operator=(const WTConvHarness&) = delete;

  const PassInfo& info() const override;
  const std::vector<PlannedKernel>& plan() const override;  // pinned plan: path resolved, default tiles
  void set_tile(const KernelSelector& entry, const Tile& t) override;
  void set_tiles(const std::vector<PlannedKernel>& plan) override;
  void prepare() override;
  std::vector<double> time(int warmup, int reps) override;
  const DeviceInfo& device() const override;
  double traffic_bytes() const override;
  std::optional<std::string> check_outputs(const std::vector<PlannedKernel>& reference,
                                           const std::vector<PlannedKernel>& candidate) override;
  WTConv& layer();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lkjit
