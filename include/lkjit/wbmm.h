// WBMM, windowed batch matrix multiplication (Song et al., "WBMM: Windowed Batch Matrix Multiplication for
// Efficient Large Receptive Field Convolution", ICML 2026), on fused kernels: the window partition and
// un-partition fused into the loads and stores, M_c built on chip from the table (never in device memory),
// the products on tensor cores (or FFMA), fp32 accumulation. The exact operator is docs/wbmm.md; the float64
// reference (lkjit/wbmm_reference.h) is its executable statement:
//
//   windows n = (b*nH + h)*nW + v with nH = ceil(H/wh), nW = ceil(W/ww) (bottom/right zero padding),
//   T[c, n, i] = x[b, c, h*wh + ih, v*ww + iw],  positions i = ih*ww + iw,  d = wh*ww,
//   M[c, i, j] = R[c, I[i, j]],  I[i, j] = (ih - jh + wh - 1)(2ww - 1) + (iw - jw + ww - 1)   (table mode),
//   Y[c, n, j] = sum_i T[c, n, i] M[c, i, j]  (+ T[c, n, j] with the identity)  (+ bias[c]),
//   out = un-window(Y), cropped to (H, W).
// Backward: dT = dY M_c^T (+ dY) (the forward with the 180-degree-rotated table), dM[c] = sum_n T^T dY over
// every window of every image, dR[c, k] = the sum of dM[c] over I = k, dbias[c] = the sum of dY[c].
//
// Layout and types:
//   x, out, dOut, dX: (B, C, H, W), dtype = options.dtype (f32, f16 or bf16), device pointers, each through its
//     own element strides (WBMMStrides: NCHW, channels_last or any order), by default the dense strides of
//     options.layout.
//   Parameters, fp32 device pointers, contiguous: R (C, K), K = (2wh-1)(2ww-1) (the reference module's
//     relative_position_bias_table), or M (C, d, d) in dense mode (M[c][i][j], row i = input position);
//     bias (C) with options.bias. Their gradients: the same shapes, fp32, written (not accumulated), reduced
//     in a fixed order: two calls give bit-identical results.
//   Precision: 16-bit inputs on the 16-bit MMA (mma.sync); f32 inputs fp32-accurate (FFMA, or 3xTF32 on
//   tensor cores: within fp32 rounding), or TF32 products with options.allow_tf32. fp32 accumulation always.
//   Streams: a CUstream / cudaStream_t as void*.
// Errors: SpecError for any value out of range (named, with the allowed range); DriverError without a GPU or
// on a failed launch; CompileError / CacheError from the JIT.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lkjit/plan.h"
#include "lkjit/runtime.h"
#include "lkjit/spec.h"
#include "lkjit/tuning.h"
#include "lkjit/wbmm_kernels.h"

namespace lkjit {

enum class WBMMMode { kTable, kDense };  // M from the table R (C, K), or given dense (C, d, d)

struct WBMMOptions {
  int64_t C = 1;          // channels, 1..2^24
  int wh = 7, ww = 7;     // window height and width, 1..16 each
  WBMMMode mode = WBMMMode::kTable;
  DType dtype = DType::kF32;
  bool identity = true;     // the op's + T shortcut; false: the deploy form (identity folded into R or M)
  bool bias = false;        // + bias[c] (the deploy form: a BatchNorm folded in)
  bool allow_tf32 = false;  // f32 inputs: TF32 products (as torch.backends.cuda.matmul.allow_tf32, default off);
                            // off: fp32-accurate. Ignored for f16 / bf16.
  int device = 0;           // CUDA device ordinal
  // Memory layout a tensor has when the call gives no strides for it. Every kernel takes any strides; the
  // load/store order (NCHW or NHWC, a spec field) follows x's strides per call.
  Layout layout = Layout::kNCHW;
};

// Element strides (not bytes) of one call's activations in (B, C, H, W) order, as WTConvStrides: element
// (b, c, y, x) of a tensor is at b*s[0] + c*s[1] + y*s[2] + x*s[3]; all zeros (the default) = the dense strides
// of options.layout. Strides must be >= 1 for dims of size > 1, and the written tensor (out, or dX in
// backward) must not overlap itself; read tensors may. Violations are a SpecError naming the tensor and dim.
struct WBMMStrides {
  std::array<int64_t, 4> x{};     // x
  std::array<int64_t, 4> dout{};  // dOut (backward; ignored by forward)
  std::array<int64_t, 4> out{};   // the written tensor: out in forward, dX in backward
};

struct WBMMWeights {
  const float* R = nullptr;     // (C, K): table mode
  const float* M = nullptr;     // (C, d, d): dense mode
  const float* bias = nullptr;  // (C): required iff options.bias
};

struct WBMMGradients {
  float* R = nullptr;     // dR (C, K): table mode
  float* M = nullptr;     // dM (C, d, d): dense mode
  float* bias = nullptr;  // dbias (C): required iff options.bias
};

// How the backward computes dX. kFused: the wgrad kernel writes dX in the same pass over x and dY (about 3|x|
// of traffic); kSplit: a dgrad kernel (the forward on the rotated table) and a wgrad without dX. kAuto: fused,
// except where the dgrad runs on wgmma (16-bit, sm_90, d > 64) and for fp32 with d > 144 on sm_90, where split
// is faster (measured on an H200; bench/RESULTS.md). A backward with
// dx == nullptr runs the wgrad alone.
enum class WBMMBackward { kAuto, kFused, kSplit };

// Pure: the kernels a pass runs for activations in o.layout (backward: with dX unless need_dx is false).
// No GPU needed (prewarm, reports). SpecError for bad options or shapes.
std::vector<PlannedKernel> wbmm_plan(const WBMMOptions& o, const Shape& shape, const DeviceLimits& limits,
                                     bool backward = false, WBMMBackward path = WBMMBackward::kAuto, bool need_dx = true);

// The checks WBMM's calls make before they touch the device (pure; SpecError naming the bad value), for
// bindings: the options, the weight and gradient pointers of the layer's mode, the activation pointers (dout:
// backward; dx may be null there: no dX), and the strides a call runs with (WBMMStrides' rules; the shape
// first: B in [1, 2^31-1], H and W in [1, 2^30], B*C*H*W <= 2^40).
void wbmm_validate_options(const WBMMOptions& o);
void wbmm_check_weights(const WBMMOptions& o, const WBMMWeights& w);
void wbmm_check_gradients(const WBMMOptions& o, const WBMMGradients& g);
void wbmm_check_activations(const void* x, const void* dout, const void* out, bool backward);
WBMMStrides wbmm_resolve_strides(const WBMMOptions& o, int64_t B, int64_t H, int64_t W, const WBMMStrides* s,
                                 bool backward, bool need_dx = true);
// The allowed range of a layer field ("B", "C", "H", "W", "wh", "ww") as errors write it, or "" for another.
std::string wbmm_field_range(const std::string& field);
// K = (2wh-1)(2ww-1) and d = wh*ww of the options: R is (C, K), M is (C, d, d).
int wbmm_table_size(const WBMMOptions& o);
int wbmm_positions(const WBMMOptions& o);

class WBMM {
 public:
  // Validates the options (SpecError); allocates nothing until the first call.
  explicit WBMM(const WBMMOptions& options);
  ~WBMM();
  WBMM(const WBMM&) = delete;
  WBMM& operator=(const WBMM&) = delete;

  const WBMMOptions& options() const { return opt_; }

  // The parameters every later call reads (device pointers, kept; nothing is copied or launched). Change
  // them in place, or call again with other pointers. CUDA graphs: a captured call holds the pointers it ran
  // with and reads their values at replay.
  void set_weights(const WBMMWeights& w);

  // out = WBMM(x). C == options.C; B in [1, 2^31-1], H and W in [1, 2^30], B*C*H*W <= 2^40. strides: the
  // tensors' element strides (null: the dense strides of options.layout), checked before anything runs.
  //
  // CUDA graphs: forward and backward may be captured (stream-ordered, no host sync, no allocation) once each
  // has run outside capture for the shape (the first call compiles, loads and allocates scratch: under capture
  // that is a SpecError instead). Scratch a captured graph may use is never freed while the layer lives.
  void forward(const void* x, void* out, int64_t B, int64_t H, int64_t W, Stream s = nullptr,
               const WBMMStrides* strides = nullptr);

  // dX (if dx is non-null; strides.out is its strides) and the parameter gradients from dOut and the forward
  // input x. Gradients are written, reduced deterministically (bit-identical across runs).
  void backward(const void* x, const void* dout, void* dx, const WBMMGradients& grads, int64_t B, int64_t H,
                int64_t W, Stream s = nullptr, const WBMMStrides* strides = nullptr);

  // Runs forward (dout == nullptr) or backward once with an event pair around every kernel; each kernel's
  // time and traffic model. Synchronizes the stream; for benchmarks and reports.
  std::vector<KernelTiming> profile(const void* x, const void* dout, void* out, const WBMMGradients* grads,
                                    int64_t B, int64_t H, int64_t W, Stream s = nullptr,
                                    const WBMMStrides* strides = nullptr);

  // Compiles and loads every kernel of a shape (backward too, with dX) for activations in options().layout.
  void prepare(int64_t B, int64_t H, int64_t W, bool backward = false);

  // The plan a shape runs with (kernel names, tiles, their tiers) for activations in options().layout.
  // Plans for the layer's device: DriverError without a GPU.
  std::vector<PlannedKernel> plan(int64_t B, int64_t H, int64_t W, bool backward = false) const;

  void set_backward_path(WBMMBackward p);

  // Tile choice (lkjit/tuning.h), as WTConv's: the mode defaults to cached (a tuning-database lookup, never
  // a measurement); LKJIT_TUNE overrides that and an explicit TuneOptions::mode both. In tune/retune, the
  // first call on a shape (or prepare) tunes the kernels without an exact record by timing whole passes.
  void set_tune_options(const TuneOptions& o);
  void set_tune_mode(TuneMode m);
  // Pins the tile of one plan entry (a WBMM kernel), checked against each shape's space when planned.
  void set_tile_override(Kernel kernel, const Tile& tile);
  void clear_tile_overrides();
  // Where the last prepare / call found its kernels: "compiled", "disk" or "memory" (the worst of all).
  const std::string& last_origin() const { return last_origin_; }
  // Device memory the layer owns now (the backward's partial sums), bytes; 0 before the first backward.
  size_t workspace_bytes() const;

 private:
  struct Impl;  // tile policy, prepared plans, device, weights, scratch
  struct LaunchList;
  Shape shape_of(int64_t B, int64_t H, int64_t W) const;
  void ensure_device();
  const LaunchList& launch_list(int64_t B, int64_t H, int64_t W, bool backward, bool need_dx, Layout act,
                                std::optional<Stream> call = std::nullopt);
  LaunchList build_list(int64_t B, int64_t H, int64_t W, bool backward, bool need_dx, Layout act);
  void run_list(const LaunchList& list, const void* x, const void* g, void* out, const WBMMStrides& st,
                const WBMMGradients* grads, Stream s, std::vector<KernelTiming>* timings = nullptr);
  std::vector<PlannedKernel> choose_tiles(const Shape& sh, const DeviceInfo& dev, bool backward, bool need_dx,
                                          Layout act) const;
  WBMMOptions opt_;
  WBMMBackward path_ = WBMMBackward::kAuto;
  std::string last_origin_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lkjit
