// Autotuning: which tile a kernel runs with. Candidates are the points of the kernel's tile space
// (enumerate()), measured on the device (warm-up, L2 flushed and inputs rotated before every timed run,
// median of CUDA-event timings, finalists re-measured) and the decision is kept in a tuning database
// (JSON beside the kernel cache: <cache dir>/tuning.json, or LKJIT_TUNING_DB), keyed by device class,
// spec and shape bucket. Lookups go through tiers and report the one used (kernel_launcher's
// WisdomResult). What is timed is a whole pass of an op layer (PassHarness, below): the tuner knows no op;
// each family provides its harness (e.g. lkjit/wtconv_tune.h) and registers it with the runtime.
//
// Errors: SpecError for bad modes, strategies or specs; DriverError where a GPU is needed and absent.
// A candidate that is rejected, fails to compile or fails to launch is a CandidateResult with its
// reason, never an exception.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "lkjit/generator.h"
#include "lkjit/plan.h"
#include "lkjit/runtime.h"
#include "lkjit/spec.h"

namespace lkjit {

// How tiles are chosen (LKJIT_TUNE; an explicit API choice wins over the variable).
enum class TuneMode {
  kOff,     // the heuristic default_tile() only; the database is not read
  kCached,  // database lookup through the tiers, else the default; never measures (layers' default)
  kTune,    // as kCached, and a kernel without an exact record is tuned and recorded (Tuner's default)
  kRetune,  // always tune and overwrite the record
};
const char* to_string(TuneMode m);                // "off" | "cached" | "tune" | "retune"
TuneMode parse_tune_mode(const std::string& s);   // SpecError naming the value and the allowed set
std::optional<TuneMode> tune_mode_from_env();     // LKJIT_TUNE; nullopt when unset; SpecError if bad
// api if set, else LKJIT_TUNE if set, else fallback.
TuneMode resolve_tune_mode(std::optional<TuneMode> api, TuneMode fallback);

// Greedy: a space of at most kGreedyMeasureAllMax candidates (every plane kernel's) is measured whole,
// in random's order and under its budget, because a few seconds of measuring cost less than a local
// optimum: the best tile often differs from the default on two or three axes at once, beyond the
// reach of one-axis-at-a-time descent. A larger space (the tiled kernels', a few hundred points) gets
// multi-start coordinate descent: from the default (each step measures the axis lines through the
// current point and moves to their best), then from the best of each further seeded sample of
// unmeasured candidates, until the budget is spent, everything is measured or a cap of descents is
// reached. Both are deterministic for a seed; the finalists are re-measured as for every strategy.
enum class TuneStrategy {
  kExhaustive,  // every candidate (ignores the budget)
  kRandom,      // default first, then a seeded shuffle, until the budget is spent
  kGreedy,      // small spaces: as random; else multi-start coordinate descent, until out of budget
};
inline constexpr int kGreedyMeasureAllMax = 64;
const char* to_string(TuneStrategy s);               // "exhaustive" | "random" | "greedy"
TuneStrategy parse_tune_strategy(const std::string& s);  // SpecError

// The device a decision holds for: name, compute capability and SM count.
struct DeviceClass {
  std::string name;  // "NVIDIA H200"
  int arch = 0;      // 90
  int sm_count = 0;
  bool operator==(const DeviceClass& o) const { return name == o.name && arch == o.arch && sm_count == o.sm_count; }
  std::string to_string() const;  // "NVIDIA H200 (sm_90, 132 SMs)"
};
DeviceClass device_class(const DeviceInfo& d);

// The shape class a decision holds for: B and C rounded up to powers of two; H and W exact up to 64,
// above that rounded up to a quarter octave (65..80 -> 80, 193..224 -> 224, 225..256 -> 256); stride
// exact. Decisions carry over within a bucket because block counts and per-block work scale alike.
Shape shape_bucket(const Shape& s);
std::string bucket_key(const Shape& s);  // "B64_C128_H56_W56_s1", of shape_bucket(s)


// The database key of a spec: its kernel name without the tile,
// e.g. "lkjit_wtconv_fwd_plane_f32_k5_L3_sm90".
std::string spec_key(const OpSpec& s);

// ---- statistics and selection (pure, no GPU) ------------------------------------------------------
struct Summary {
  double median_ms = 0;
  double noise = 0;  // robust relative stddev: 1.4826 * MAD / median; 0 for one sample
  double min_ms = 0;
  int n = 0;
};
Summary summarize(std::vector<double> ms);

enum class CandidateStatus { kOk, kRejected, kCompileFailed, kLaunchFailed, kError };
const char* to_string(CandidateStatus s);  // "ok" | "rejected" | "compile_failed" | "launch_failed" | "error"

struct CandidateResult {
  Tile tile;
  int order = 0;  // fixed candidate order: 0 = the default, then enumerate() order
  CandidateStatus status = CandidateStatus::kOk;
  std::string reason;              // why it failed (status != kOk)
  std::vector<double> samples_ms;  // behind `summary` (a finalist: its re-measurement rounds)
  Summary summary;
  bool finalist = false;           // among the top few re-measured with more samples
  int regs = -1, spill_bytes = -1, smem_bytes = -1;
  double compile_s = 0;
};

// The choice among ok candidates: the lowest `order` whose median is within the measured noise of the
// best median, tol = max(min_noise, noise of the best, noise of the candidate). Ties thus go to a fixed
// order (the default first), and the result does not depend on the vector's order. nullopt if none ok.
std::optional<size_t> select_best(const std::vector<CandidateResult>& c, double min_noise);
// Indices ranked for reports: ok by median (ties by order), then failures by order.
std::vector<size_t> rank(const std::vector<CandidateResult>& c);

// ---- tuning ---------------------------------------------------------------------------------------
struct TuneProgress {
  std::string what;     // e.g. "wtconv_fwd_plane" or "wtconv_fwd_level l=2"
  int done = 0;         // candidates measured so far
  int total = 0;        // known total (exhaustive, or what is left), else 0
  double elapsed_s = 0;
  double budget_s = 0;  // 0 when unbudgeted
  double best_ms = 0;   // best median so far (0: none)
};

struct TuneOptions {
  std::optional<TuneMode> mode;  // unset: LKJIT_TUNE, else the caller's default
  TuneStrategy strategy = TuneStrategy::kGreedy;
  double budget_s = 0;   // random/greedy, per kernel: no new candidates after this (0: LKJIT_TUNE_BUDGET)
  int top = 4;           // finalists re-measured, plus the default
  int warmup = 2;        // untimed runs before a candidate's samples
  int reps = 5;          // timed runs per candidate during the search
  int final_reps = 15;   // timed runs per finalist, in 3 interleaved rounds (clock drift hits all alike)
  double min_noise = 0.02;  // relative tie tolerance floor (see select_best)
  uint64_t seed = 1;     // random's order and greedy's restart samples
  int jobs = 0;          // parallel NVRTC compiles (0: hardware threads)
  bool save = true;      // record decisions in the database
  std::string db_path;   // empty: tuning_db_path()
  std::function<void(const TuneProgress&)> progress;  // called after each measured batch
};

// The candidates of spec on shape in the tuner's fixed order: the default first (if it runs the shape, also
// where it is not a point of the space: a default fitted to the map), then the rest of enumerate(spec, limits,
// &shape).
std::vector<Tile> tune_candidates(const OpSpec& spec, const Shape& shape, const DeviceLimits& limits);
// Compiles each tile into the kernel cache on `jobs` threads (0: hardware threads); no GPU needed. A
// tile rejected for the shape or failing to compile is a result with its reason (tile, status,
// reason and compile_s are set).
std::vector<CandidateResult> precompile_candidates(const OpSpec& spec, const Shape& shape, const DeviceLimits& limits,
                                                   const std::vector<Tile>& tiles, int jobs = 0);

// LKJIT_TUNING_DB, else <cache_dir()>/tuning.json.
std::string tuning_db_path();
// Why the tuning database file at `path` cannot be used (it cannot be read, is not JSON, or is not lkjit's
// format), without the "lkjit: error: " prefix; "" when it is missing (an empty database) or good. Layers
// and the Tuner read such a file as empty; tools say so.
std::string tuning_db_problem(const std::string& path);

// What tuning one kernel found.
struct KernelTuneResult {
  OpSpec spec;
  Shape shape;    // the shape the kernel sees (a level kernel: its input low band)
  int level = 0;  // level kernels: 1..L
  Tile default_tile, chosen;
  // A winner whose output disagreed with the default tile's (PassHarness::check_outputs): that tile and why.
  // It is not chosen (chosen is then the default) and not recorded.
  Tile rejected;
  std::string check_failure;
  std::vector<CandidateResult> candidates;  // every candidate tried, in the fixed order
  size_t space_size = 0;                    // valid points for this shape
  TuneStrategy strategy = TuneStrategy::kGreedy;
  bool budget_hit = false;
  double seconds = 0;                       // wall time, compiles included
  double best_ms = 0, default_ms = 0;       // medians of the chosen and the default tile (0: failed)
};

struct TileChoice {
  Tile tile;
  LookupTier tier = LookupTier::kDefault;
  std::string detail;  // which record matched, or why none did
};

// A kernel ready to launch with the tile the mode chose.
struct TunedKernel {
  OpSpec spec;
  Shape shape;
  Tile tile;
  LaunchGeometry geometry;
  LookupTier tier = LookupTier::kDefault;
  std::string detail;
  CompiledKernel compiled;
  const LoadedKernel* loaded = nullptr;
  std::optional<KernelTuneResult> tuning;  // set when tier == kTuned
};

// ---- passes ---------------------------------------------------------------------------------------
// What a pass harness runs, for reports and the tune JSON: the op, the pass, dtype, the (B, C, H, W) of its
// input, and the op's own parameters in its order (WTConv: k, L, stride; flags: bias).
struct PassInfo {
  std::string op;  // "wtconv"
  bool backward = false;
  DType dtype = DType::kF32;
  int64_t B = 1, C = 1, H = 1, W = 1;
  std::vector<std::pair<std::string, int64_t>> params;
  std::vector<std::pair<std::string, bool>> flags;
  std::string text;  // the family's words, e.g. "fwd f32 64x96x56x56 k=5 L=5"
};

// One runnable pass of an op layer for timing, behind which the tuner measures candidate tiles: the
// family's layer on its own buffers (rotating input/output sets, an L2 flush before each sample).
// Families implement it (e.g. WTConvHarness); the tuner never sees the op.
class PassHarness {
 public:
  virtual ~PassHarness() = default;
  virtual const PassInfo& info() const = 0;
  virtual const DeviceInfo& device() const = 0;
  // The pinned plan: path resolved, default tiles.
  virtual const std::vector<PlannedKernel>& plan() const = 0;
  virtual void set_tile(const KernelSelector& entry, const Tile& t) = 0;  // an override (level must be exact)
  virtual void set_tiles(const std::vector<PlannedKernel>& plan) = 0;     // every entry's tile
  virtual void prepare() = 0;                                             // compile + load the current tiles
  virtual std::vector<double> time(int warmup, int reps) = 0;             // ms per pass
  virtual double traffic_bytes() const = 0;                               // the plan's traffic model
  // Runs the pass with `reference`'s tiles and with `candidate`'s (plans of this harness: every non-fixed
  // entry's tile) on the same random, non-constant inputs, each run's outputs NaN-poisoned first and its
  // buffers guarded, and compares what they wrote within the dtype's tolerance (NaN fails). Why they
  // disagree (naming the tensor and its worst element), or nullopt. Leaves the harness's tiles unspecified
  // (set them again). tune_pass calls it before it accepts a winner other than the default.
  virtual std::optional<std::string> check_outputs(const std::vector<PlannedKernel>& reference,
                                                   const std::vector<PlannedKernel>& candidate) = 0;
  // As check_outputs, across paths: runs `reference` (a pass of the same problem and memory layout on another
  // path) with its `reference_tiles` and this pass with `tiles` on the same random inputs, and compares what
  // they wrote. tune_paths calls it before it accepts a path other than the heuristic's. The default throws
  // SpecError (a family without paths has nothing to compare), which keeps the heuristic's path.
  virtual std::optional<std::string> check_against(PassHarness& reference,
                                                   const std::vector<PlannedKernel>& reference_tiles,
                                                   const std::vector<PlannedKernel>& tiles);
};

// What tuning a pass found.
struct TuneReport {
  PassInfo problem;
  DeviceInfo device;
  std::vector<PlannedKernel> plan;          // as finally chosen (tiers: tuned for the tuned entries)
  std::vector<KernelTuneResult> kernels;    // one per tuned entry, in plan order
  Summary default_pass, tuned_pass;         // the whole pass with every default / every chosen tile
  double traffic_bytes = 0;                 // sum of the plan's traffic models (GB/s = this / time)
  double seconds = 0;                       // wall time, compiles included
  std::string db_path;                      // where decisions were recorded ("" if not saved)
  std::string save_error;                   // why recording failed ("" if it did not)
};

// Tunes the selected entries of the harness's plan (empty: every entry with more than one candidate for
// its shape; fixed entries never) with `o`, kernel after kernel in plan order, each candidate timed as a
// whole pass, and, if o.save, records each decision in the database. A winner other than the default is
// first checked against every default tile (check_outputs, with the earlier entries' accepted choices in
// place): one that disagrees, or whose check throws, is not chosen and not recorded; the entry keeps its
// default and its result names the tile and why (KernelTuneResult::rejected, check_failure). SpecError
// for a selector that matches no entry; a failing candidate is a result, never an exception; a device
// left unusable by a faulting kernel is a DriverError.
TuneReport tune_pass(PassHarness& h, const std::vector<KernelSelector>& which, const TuneOptions& o);

// The plan entries of a plan worth tuning: not fixed, more than one candidate for their shape.
std::vector<PlannedKernel> tunable(const std::vector<PlannedKernel>& plan, const DeviceLimits& limits);

// ---- paths ----------------------------------------------------------------------------------------
// A pass that several kernel sets can run (a family's paths, e.g. the depthwise direct, NHWC and tensor-core
// kernels) has a decision besides its tiles: which path runs. It is measured and kept like a tile decision: a
// database record under the pass's key (the problem without its shape) and its input's shape bucket, whose one
// axis "path" holds the chosen path's id; lookups take the same tiers (exact, nearest shape, same arch, the
// cluster tier's published decisions) within the query's shape bucket only (which path wins moves with the map
// size, and a path cannot be re-validated for another shape like a tile), and skip a record naming a path that
// cannot run here.
struct PathOption {
  int id = 0;        // stable, recorded: the family's enum value (DWConvPath)
  std::string name;  // "mma"
};
// Every pass key starts with this: such records name no kernel (tools that read records as kernels skip them).
inline constexpr const char kPassKeyPrefix[] = "lkjit_pass_";
struct PassPaths {
  // "lkjit_pass_dwconv_bwd_bf16_nhwc_k31x31_s1_d1_p15x15_bias_sm90": op, pass, dtype, activation layout and
  // every parameter that changes which path is fastest; a family's paths share one key per problem.
  std::string key;
  Shape shape;                      // the pass's input (B, C, H, W, stride): the record's bucket
  std::vector<PathOption> options;  // the paths that run the pass on this device; the first is the heuristic's
  // The pass pinned to path `id`, for tuning (needs a GPU). Unset where only lookups are made (prewarm, plans).
  std::function<std::unique_ptr<PassHarness>(int id)> harness;
};
struct PathChoice {
  PathOption path;
  LookupTier tier = LookupTier::kDefault;  // kTuned, kExact, kSameArch (another device, same bucket) or kDefault
  std::string detail;                      // which record matched, or why none did
};
// The path by the lookup tiers, without measuring (no GPU): mode off (o.mode, else LKJIT_TUNE, else cached),
// or no record naming one of the options: the first option. SpecError when options is empty.
PathChoice lookup_path(const PassPaths& p, const DeviceClass& dev, const TuneOptions& o);

struct PathTuneResult {
  PathOption path;
  TuneReport tiles;     // its kernels' tile tuning (recorded as tune_pass records; empty if it failed)
  Summary pass;         // the whole pass with its chosen tiles, from the interleaved rounds (n = 0: failed)
  std::string failure;  // why it could not be tuned or timed ("" when it was)
};
struct PathTuneReport {
  std::vector<PathTuneResult> paths;  // in options order
  PathChoice chosen;                  // tier kTuned; the first option when nothing ran
  // A faster path whose output disagreed with the first path's (check_against): named and why; not chosen (the
  // first path is, and recorded).
  std::string check_failure;
  double seconds = 0;
  std::string db_path;     // where the decision was recorded ("" if not saved)
  std::string save_error;  // why recording failed
};
// Tunes each option's tiles (tune_pass with o, kernel by kernel), then times every tuned pass in 3 interleaved
// rounds of o.final_reps / 3 runs (at least 1) and takes the fastest by select_best (ties go to the earlier
// option, so to the heuristic's). A winner other than the first is checked against the first path's output
// first; one that disagrees, or whose check throws, is not chosen: the first path is (recorded as the decision,
// so that later processes do not measure again). Every path's tile decisions are recorded as tune_pass records
// them, whichever path wins. With o.save the
// decision is recorded (and published to the cluster tier where it takes writes). A path that fails to build,
// tune or run is a result with its reason, never an exception; a device left unusable is a DriverError;
// SpecError when options is empty or harness is unset.
PathTuneReport tune_paths(const PassPaths& p, const TuneOptions& o);

class Tuner {
 public:
  explicit Tuner(TuneOptions options = {});
  const TuneOptions& options() const { return opt_; }
  TuneMode mode() const;  // options.mode, else LKJIT_TUNE, else kTune
  std::string db_path() const;

  // The tile by the lookup tiers, without measuring (no GPU): off -> the default; otherwise exact,
  // nearest shape, same compute capability (each re-validated for `shape`: a point of
  // enumerate(spec, limits, &shape), or the shape's default), then the default. A corrupt database reads as empty (logged).
  TileChoice lookup(const OpSpec& spec, const Shape& shape, const DeviceClass& dev, const DeviceLimits& limits) const;

  // The tile per the mode (tune: tunes on a miss, i.e. no exact record; retune: always), compiled and
  // loaded on `device`. Tuning runs a pass of the kernel's family that contains it (the family's harness,
  // found through the runtime's op registry). DriverError without a GPU; SpecError if spec.arch is not the
  // device's, or no pass of the family runs the spec on the shape.
  TunedKernel get(const OpSpec& spec, const Shape& shape, int device = 0);

 private:
  TuneOptions opt_;
};

}  // namespace lkjit
