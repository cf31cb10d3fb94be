// Tuning the WBMM kernels at the layer level, as WTConv's (lkjit/wtconv_tune.h): a candidate tile is measured
// by running a whole pass of a real layer problem (WBMMHarness, the family's PassHarness), every other plan
// entry keeping its current tile, with an L2 flush and rotating input/output sets before each timed sample.
// The backward's wgrad and reduce are tuned in one pass: the wgrad's tile decides the reduce's partial rows.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "lkjit/runtime.h"
#include "lkjit/tuning.h"
#include "lkjit/wbmm.h"

namespace lkjit {

// One layer pass to measure.
struct WBMMTuneProblem {
  WBMMOptions options;  // C, window, mode, dtype, identity, bias, allow_tf32, layout (the load order), device
  int64_t B = 1, H = 1, W = 1;
  bool backward = false;
  WBMMBackward path = WBMMBackward::kAuto;
  bool need_dx = true;  // backward: dX too
  Shape shape() const { return Shape{B, options.C, H, W, 1}; }
  std::string to_string() const;  // "bwd bf16 64x256x56x56 7x7 table"
  PassInfo info() const;          // the same, as tune reports carry it
};

// A layer problem whose plan runs `spec` on `shape`, and the entry to tune in it: how the Tuner times one WBMM
// kernel (wgrad with fuse_dx=0: the split backward, whose plan has it). Pure. SpecError when none exists.
std::pair<WBMMTuneProblem, KernelSelector> wbmm_problem_for(const OpSpec& spec, const Shape& shape, int device,
                                                            const DeviceLimits& limits);

// tune_pass over a WBMMHarness of `p` (empty `which`: every tunable entry). Needs a GPU (DriverError).
TuneReport wbmm_tune(const WBMMTuneProblem& p, const std::vector<KernelSelector>& which, const TuneOptions& o);

// A runnable layer problem for timing: its own layer (tune mode off, every tile pinned), parameters and
// gradient buffers, rotating input/output sets and an L2-flush buffer. Inputs hold constants: timing does not
// depend on values.
class WBMMHarness : public PassHarness {
 public:
  explicit WBMMHarness(const WBMMTuneProblem& p);
  ~WBMMHarness() override;
  WBMMHarness(const WBMMHarness&) = delete;
  WBMMHarness& operator=(const WBMMHarness&) = delete;

  const PassInfo& info() const override;
  const std::vector<PlannedKernel>& plan() const override;
  void set_tile(const KernelSelector& entry, const Tile& t) override;
  void set_tiles(const std::vector<PlannedKernel>& plan) override;
  void prepare() override;
  std::vector<double> time(int warmup, int reps) override;
  const DeviceInfo& device() const override;
  double traffic_bytes() const override;
  std::optional<std::string> check_outputs(const std::vector<PlannedKernel>& reference,
                                           const std::vector<PlannedKernel>& candidate) override;
  WBMM& layer();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lkjit
