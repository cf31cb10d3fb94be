// The plan runner: what every op layer does between its pure plan and its launches. A layer builds a
// plan (lkjit/plan.h) per shape; the runner chooses each entry's tile (an override, else the tuning
// database through the mode's tiers, else the default; tune-on-miss through the family's pass harness),
// compiles and loads the kernels with the generator's launch geometry, caches the prepared plan per
// shape, owns the layer's scratch (never freed while a captured CUDA graph may hold it) and launches, with
// per-kernel timings on request. The layer fills each kernel's params; nothing here knows an op.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lkjit/plan.h"
#include "lkjit/runtime.h"
#include "lkjit/tuning.h"

namespace lkjit::rt {

// A harness for a layer's pass, made only when tune-on-miss needs one.
using HarnessFactory = std::function<std::unique_ptr<PassHarness>()>;

// Tile choice: overrides and tuning options of one layer.
class TilePolicy {
 public:
  explicit TilePolicy(std::string op) : op_(std::move(op)) {}
  void set_tune_options(const TuneOptions& o);
  void set_tune_mode(TuneMode m);
  const TuneOptions& tune_options() const { return tune_; }
  TuneMode mode() const;  // the options' mode, else LKJIT_TUNE, else cached (layers never measure by default)
  // Pins the tile of plan entries of `kernel` at `level`, checked against each shape's tile space when
  // a plan is prepared (SpecError then).
  void set_override(const Kernel& kernel, int level, const Tile& tile);
  void clear_overrides();
  // Bumped on every change: prepared plans made before are stale.
  uint64_t generation() const { return generation_; }

  // Each non-fixed entry's tile and tier: its override, else the lookup the mode allows, else the default
  // the planner gave it.
  void choose(std::vector<PlannedKernel>& plan, const DeviceInfo& dev) const;
  // In tune/retune mode, tunes the entries without an exact record (retune: all but overrides) as one pass
  // of `make()`, and sets their tiles. Otherwise, or with nothing to tune, does nothing.
  void tune_on_miss(std::vector<PlannedKernel>& plan, const HarnessFactory& make) const;
  // The pass's path (lkjit/tuning.h, "paths"): the lookup the mode allows; in tune mode without an exact record,
  // or in retune mode, measured through p.harness and recorded (tune_paths; its tiles' decisions too), and then
  // *tuned (if given) holds the winner's plan with its tuned tiles, which the layer runs as it is (no second
  // tuning). A layer with tile overrides never measures paths (its pinned tiles are not what tune_paths times).
  // In tune mode the cluster tier's claim comes first: another node's decision published while this one waits
  // is taken without measuring.
  PathChoice choose_path(const PassPaths& p, const DeviceInfo& dev, std::vector<PlannedKernel>* tuned = nullptr) const;

 private:
  struct Override {
    Kernel kernel;
    int level;
    Tile tile;
  };
  std::string op_;
  TuneOptions tune_;
  std::vector<Override> overrides_;
  uint64_t generation_ = 0;
};

// A planned kernel made ready: compiled, loaded on the layer's device, with its launch geometry.
struct PreparedKernel {
  PlannedKernel planned;
  const LoadedKernel* loaded = nullptr;
  LaunchGeometry geometry;
  std::string origin;  // "compiled" | "disk" | "memory"
};

// Compiles and loads each entry (fixed ones too) and takes its geometry from the generator. SpecError for an
// entry needing more than 2^31-1 blocks (grids are 1-D), naming the op, kernel and shape.
std::vector<PreparedKernel> prepare_kernels(const std::vector<PlannedKernel>& plan, int device, const std::string& op);
// The worst of origins: "compiled" over "disk" over "memory".
const std::string& worse_origin(const std::string& a, const std::string& b);

// Launches one prepared kernel with its params; with `timings`, between a pair of events (synchronizes).
void launch_prepared(const PreparedKernel& k, const void* params, size_t params_bytes, Stream s, bool early = false,
                     std::vector<KernelTiming>* timings = nullptr);

// A layer's device scratch. Grows on demand; a buffer outgrown after some call ran under CUDA graph capture
// is kept until the layer dies (a graph may hold its address).
class Scratch {
 public:
  // Scratch of at least `bytes` for a call on stream s (marks the layer captured if s is capturing).
  // Growing it under capture is refused (SpecError naming `what`), since capture forbids allocation.
  void* ensure(size_t bytes, int device, Stream s, const std::string& op);
  bool captured() const { return captured_; }
  size_t bytes() const;  // owned now, retired buffers included

 private:
  DeviceBuffer buf_;
  std::vector<DeviceBuffer> retired_;
  bool captured_ = false;
};

// The SpecError of a first call (compile, load, allocate) under CUDA graph capture, which capture forbids.
[[noreturn]] void refuse_under_capture(const std::string& op, const std::string& what);

// Prepared plans of one layer, by shape key. A miss builds the entry; a miss for a call whose stream is
// capturing is refused before anything compiles (refuse_under_capture).
template <class Key, class Prepared>
class PlanCache {
 public:
  template <class Build>
  const Prepared& get(const Key& key, std::optional<Stream> call, const std::string& op, const std::string& what,
                      Build&& build) {
    if (auto it = map_.find(key); it != map_.end()) return it->second;
    if (call && stream_capturing(*call)) refuse_under_capture(op, what);
    return map_.emplace(key, build()).first->second;
  }
  void clear() { map_.clear(); }

 private:
  std::map<Key, Prepared> map_;
};

}  // namespace lkjit::rt
