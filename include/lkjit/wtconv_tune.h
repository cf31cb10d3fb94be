// Tuning the WTConv kernels at the layer level. A kernel cannot run alone (it reads the scratch its
// predecessors write and needs a full WTConvParams), so a candidate tile is measured by running the
// whole forward (or backward) of a real layer problem: the candidate's plan entry is pinned with
// WTConv::set_tile_override while every other entry keeps its current choice, and the pass is timed.
// Kernels are tuned one at a time in plan order (coordinate descent across kernels). Timing the whole
// pass also charges a tile for its effect on its neighbours (e.g. what it leaves in L2).
//
// Timing: warm-up runs, then per sample an L2 flush (cuMemsetD32Async over >= 2x the L2), the next
// of several rotating input/output sets, and a CUDA-event pair around one pass; the median counts.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
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
};

// Which plan entries to tune: a kernel, and a level (-1: every level of a level kernel).
struct KernelSelector {
  Kernel kernel;
  int level = -1;
};

// The plan entries of `p` worth tuning (more than one candidate for their shape), in plan order.
std::vector<PlannedKernel> wtconv_tunable(const WTConvTuneProblem& p, const DeviceLimits& limits);
// The entry that moves the most bytes: the plane kernel, else the synthesis kernel.
KernelSelector wtconv_main_kernel(const std::vector<PlannedKernel>& plan);

struct WTConvTuneReport {
  WTConvTuneProblem problem;
  DeviceInfo device;
  std::vector<PlannedKernel> plan;          // as finally chosen (tiers: tuned for the tuned entries)
  std::vector<KernelTuneResult> kernels;    // one per tuned entry, in plan order
  Summary default_pass, tuned_pass;         // the whole pass with every default / every chosen tile
  double traffic_bytes = 0;                 // sum of the plan's traffic models (GB/s = this / time)
  double seconds = 0;                       // wall time, compiles included
  std::string db_path;                      // where decisions were recorded ("" if not saved)
  std::string save_error;                   // why recording failed ("" if it did not)
};

// Tunes the selected entries (empty: every tunable one) with `o` and, if o.save, records each decision
// in the database. Needs a GPU (DriverError); SpecError for a selector that matches no entry. A failing
// candidate is a result, never an exception; a device left unusable by a faulting kernel is a
// DriverError.
WTConvTuneReport wtconv_tune(const WTConvTuneProblem& p, const std::vector<KernelSelector>& which,
                             const TuneOptions& o);

// A runnable layer problem for timing: its own layer (tune mode off), weights, rotating input/output
// sets, gradient buffers for a backward, and an L2-flush buffer. Inputs hold constants: timing does
// not depend on values.
class WTConvHarness {
 public:
  explicit WTConvHarness(const WTConvTuneProblem& p);
  ~WTConvHarness();
  WTConvHarness(const WTConvHarness&) = delete;
  WTConvHarness& operator=(const WTConvHarness&) = delete;

  const std::vector<PlannedKernel>& plan() const;  // pinned plan: path resolved, default tiles
  void set_tile(const KernelSelector& entry, const Tile& t);  // an override (level must be exact)
  void set_tiles(const std::vector<PlannedKernel>& plan);     // every entry's tile
  void prepare();                                             // compile + load the current tiles
  std::vector<double> time(int warmup, int reps);             // ms per pass
  WTConv& layer();
  const DeviceInfo& device() const;
  double traffic_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lkjit
