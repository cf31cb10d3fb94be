// The plan of one op call: the kernels an op layer runs for a shape, in order. Plans are pure data (an
// op's planner builds them with no CUDA call, e.g. wtconv_plan); the runtime's plan runner chooses their
// tiles, compiles, loads and launches them, and reports per-kernel timings.
#pragma once
#include <string>

#include "lkjit/spec.h"

namespace lkjit {

// Where a tile came from, best first.
enum class LookupTier {
  kTuned,         // measured by this call
  kExact,         // a record for this device class, spec and shape bucket
  kNearestShape,  // same device class and spec, the nearest other shape whose tile fits this one
  kSameArch,      // same compute capability, another device (name or SM count differ)
  kDefault,       // the heuristic default_tile()
  kOverride,      // pinned by the layer's set_tile_override
};
const char* to_string(LookupTier t);  // "tuned" | "exact" | "nearest_shape" | "same_arch" | ...

// One kernel of a plan: what to compile, with which tile, for which (sub)problem.
struct PlannedKernel {
  OpSpec spec;
  Tile tile;
  Shape shape;       // the problem this kernel sees (a WTConv level kernel: its input low band)
  int level = 0;     // which of a kernel's repeated entries (WTConv level kernels: l in 1..L); else 0
  double bytes = 0;  // device traffic model of one launch (reads + writes), for achieved GB/s
  LookupTier tier = LookupTier::kDefault;  // where `tile` came from
  bool fixed = false;  // launched outside the pass (WTConv's fold): never overridden, looked up or tuned
};

// A plan entry: a kernel, and a level (-1: every level of a repeated kernel).
struct KernelSelector {
  Kernel kernel;
  int level = -1;
};

// Per-kernel CUDA-event timing of one call (a layer's profile()).
struct KernelTiming {
  std::string kernel_name;
  double ms = 0;
  double bytes = 0;  // traffic model (PlannedKernel::bytes)
};

}  // namespace lkjit
