// Depthwise k x k convolution (docs/dwconv.md): nn.Conv2d(C, C, (kh, kw), stride, padding, dilation, groups=C),
//
//   y[b,c,i,j] = bias[c] + sum_{u<kh, v<kw} w[c,u,v] * x[b, c, i*s + u*d - ph, j*s + v*d - pw]   (zero padding)
//
// with its input gradient (dgrad: at stride 1 the forward with the filter rotated by 180 degrees, at stride 2 a
// gather over the taps that reach an input element), weight gradient dw[c,u,v] = sum_{b,i,j} dy[b,c,i,j] *
// x[b, c, i*s + u*d - ph, j*s + v*d - pw] and bias gradient dbias[c] = sum_{b,i,j} dy[b,c,i,j]. The float64
// reference (lkjit/dwconv_reference.h) is the executable statement.
//
// Layout and types:
//   x, dx: (B, C, H, W); y, dy: (B, C, Ho, Wo) with Ho = floor((H + ph + ph_after - d(kh-1) - 1) / s) + 1 (Wo
//     alike); dtype = options.dtype (f32, f16 or bf16), device pointers, each addressed through its own element
//     strides (DWConvStrides, the rules of WTConvStrides), by default the dense strides of options.layout.
//   w, dw: (C, 1, kh, kw) fp32 (nn.Conv2d's weight); bias, dbias: (C) fp32. Accumulation is fp32 for every dtype.
//   Streams: a CUstream / cudaStream_t as void*.
// Gradients are written, not accumulated. dw and dbias are reduced deterministically: each block writes fp32
// partial sums of its share of (B, Ho, Wo) and a second kernel adds them in a fixed order, so two calls give
// identical bits (no float atomics); every input element is read a bounded number of times.
// Errors: SpecError for any value out of range (named, with the allowed range); DriverError without a GPU or
// on a failed launch; CompileError / CacheError from the JIT.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lkjit/dwconv_kernels.h"
#include "lkjit/plan.h"
#include "lkjit/runtime.h"
#include "lkjit/spec.h"
#include "lkjit/tuning.h"

namespace lkjit {

struct DWConvOptions {
  int64_t C = 1;        // channels in = channels out (groups = C), 1..2^24
  int kh = 3, kw = 3;   // filter height and width, 1..63 each (odd or even)
  int stride = 1;       // both axes, 1 or 2
  int dil = 1;          // dilation of both axes, 1..4
  // Zero padding: explicit (pad_h rows above and below, pad_w columns left and right, 0..1000: nn.Conv2d's
  // padding=(pad_h, pad_w)), or same = true (PyTorch's padding='same', stride 1 only: d(k-1) in all, the
  // smaller half before; pad_h and pad_w must then be 0).
  int pad_h = 0, pad_w = 0;
  bool same = false;
  DType dtype = DType::kF32;
  bool bias = true;
  int device = 0;       // CUDA device ordinal
  // The dense order of a tensor whose call gives no strides for it; explicit strides override it per tensor.
  Layout layout = Layout::kNCHW;
};

// Element strides (not bytes) of one call's activations in (B, C, H, W) order, as WTConvStrides: all zeros
// means the dense strides of options.layout for that tensor's own extents. >= 1 for dims of size > 1, and the
// written tensor must not overlap itself (SpecError naming the tensor, the dim and the allowed range).
struct DWConvStrides {
  std::array<int64_t, 4> x{};     // x
  std::array<int64_t, 4> dout{};  // dy (backward; ignored by forward)
  std::array<int64_t, 4> out{};   // the written activation: y in forward, dx in backward
};

struct DWConvGradients {
  float* dw = nullptr;     // (C, 1, kh, kw); null: no weight (and bias) gradient
  float* dbias = nullptr;  // (C); written iff options.bias and dw is given (required then)
};

// Which kernels run a call. kAuto: the tuning database's path decision for the call (dwconv_pass_paths; measured in
// tune mode), else this rule: kMma's kernels where they run and pay (dwconv_mma_pays); otherwise
// the NHWC kernels (lanes x cvec channels a block, vector loads along C) for channels_last activations (x's channel
// stride 1, C > 1) when their default tile fits the device (the filters of a block's channels fit shared memory),
// else the direct kernels (a (b, c) plane tile a block, filter and input rows streamed through shared memory),
// which take any strides. kDirect / kNhwc / kMma force one (SpecError when it cannot run the spec). kMma: the
// tensor-core forward and dgrad (mma.sync, each filter row a Toeplitz product; the fp32 weights as two 16-bit
// parts, within 2^-18 (bf16) / 2^-22 (f16) of each tap) and wgrad (dy rows against x rows: exact 16-bit products,
// fp32 sums); f16 and bf16 activations at stride 1, dilation 1, on sm_80 and newer (f16 also needs |w| < 65504).
enum class DWConvPath { kAuto, kDirect, kNhwc, kMma };
// kAuto's rule for the tensor-core kernels (where they run at all): a filter of 13 and more in both axes, an
// output map of 14 x 14 and more.
bool dwconv_mma_pays(int kh, int kw, int64_t Ho, int64_t Wo);
// The path a plan runs (its first kernel's strategy): kDirect, kNhwc or kMma.
DWConvPath dwconv_plan_path(const std::vector<PlannedKernel>& plan);
const char* to_string(DWConvPath p);  // "auto", "direct", "nhwc", "mma"

// The padding and output extents of a call: SpecError naming the value and range for a bad shape (B, C, H, W
// out of [1, 2^24], B*C*H*W >= 2^40, a map smaller than the dilated filter with its padding: no output).
struct DWConvGeometry {
  int64_t Ho = 1, Wo = 1;
  int pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
};
DWConvGeometry dwconv_geometry(const DWConvOptions& o, int64_t B, int64_t H, int64_t W);
void dwconv_check_options(const DWConvOptions& o);  // SpecError naming the bad option and its range

// Pure: the kernels a call runs (no GPU needed; prewarm), in order, with default tiles: forward [fwd]; backward
// [dgrad, wgrad, wgrad_reduce]. Each entry's Shape is the one the kernel sees (generator/ops/dwconv.cpp: the
// extents it iterates over). `act`: the activations' layout, which kAuto reads.
std::vector<PlannedKernel> dwconv_plan(const DWConvOptions& o, int64_t B, int64_t H, int64_t W,
                                       const DeviceLimits& limits, bool backward = false, Layout act = Layout::kNCHW,
                                       DWConvPath path = DWConvPath::kAuto);

// Pure: the path decision of a call (lkjit/tuning.h, "paths"): its key (pass, dtype, `act` layout, kh, kw, stride,
// dilation, padding, bias, arch), its input shape, and the paths that can run it on `limits`, kAuto's choice first
// (ids: DWConvPath values; NHWC only for channels_last activations). kAuto layers look it up, and in tune mode measure it (the harness is left unset here).
PassPaths dwconv_pass_paths(const DWConvOptions& o, int64_t B, int64_t H, int64_t W, const DeviceLimits& limits,
                            bool backward, Layout act);

// The checks a call makes before it touches the device (pure), for bindings: weights (bias iff options.bias),
// gradients, activation pointers (dout: backward; dx or grads.dw needed), and the resolved strides of a call.
void dwconv_check_weights(const DWConvOptions& o, const float* w, const float* bias);
void dwconv_check_gradients(const DWConvOptions& o, const void* dx, const DWConvGradients& g);
void dwconv_check_activations(const void* x, const void* dout, const void* out, bool backward);
DWConvStrides dwconv_resolve_strides(const DWConvOptions& o, int64_t B, int64_t H, int64_t W, const DWConvStrides* s,
                                     bool backward);

// The family's pass harness (the tuner's PassHarness; runtime/ops/dwconv_tune.cpp): a layer with `path`
// pinned (kDirect, kNhwc or kMma) timing a forward or a whole backward of (B, C, H, W) with o.layout activations on
// rotating buffers. DriverError without a GPU.
std::unique_ptr<PassHarness> make_dwconv_harness(const DWConvOptions& o, int64_t B, int64_t H, int64_t W,
                                                 bool backward, DWConvPath path);

class DepthwiseConv {
 public:
  // Validates the options (SpecError); allocates nothing until the first call.
  explicit DepthwiseConv(const DWConvOptions& options);
  ~DepthwiseConv();
  DepthwiseConv(const DepthwiseConv&) = delete;
  DepthwiseConv& operator=(const DepthwiseConv&) = delete;
  const DWConvOptions& options() const { return opt_; }

  // The parameters forward and backward read (device pointers, kept, not copied: the caller keeps them alive
  // and may change their values between calls). bias is required iff options.bias.
  void set_weights(const float* w, const float* bias = nullptr);
  bool has_weights() const;  // set_weights has been called (forward and backward refuse to run before)

  // y = conv(x). B in [1, 2^24], H and W in [1, 2^24], B*C*H*W < 2^40.
  //
  // CUDA graphs: forward and backward may be captured (stream-ordered, no host sync or allocation) once each
  // has run outside capture for the shape and layout: a first call compiles, loads and allocates, which capture
  // forbids, so under capture it throws SpecError instead. Scratch a captured graph may use is never freed
  // while the layer lives (workspace_bytes counts it).
  void forward(const void* x, void* y, int64_t B, int64_t H, int64_t W, Stream s = nullptr,
               const DWConvStrides* strides = nullptr);
  // dx (if non-null) and dw / dbias (if grads.dw) from dy and the forward input x; strides.out is dx's.
  void backward(const void* x, const void* dout, void* dx, const DWConvGradients& grads, int64_t B, int64_t H,
                int64_t W, Stream s = nullptr, const DWConvStrides* strides = nullptr);

  // One forward (dout == nullptr) or backward with an event pair around every kernel: each kernel's time and
  // traffic model. Synchronizes the stream; for benchmarks and reports.
  std::vector<KernelTiming> profile(const void* x, const void* dout, void* out, const DWConvGradients* grads,
                                    int64_t B, int64_t H, int64_t W, Stream s = nullptr,
                                    const DWConvStrides* strides = nullptr);

  // Compiles and loads the kernels of a shape for activations in options().layout (and allocates the wgrad
  // scratch), so that later calls in that layout do no JIT work.
  void prepare(int64_t B, int64_t H, int64_t W, bool backward = false);
  // The plan a shape runs with (kernel names and tiles) for activations in options().layout. Needs a GPU.
  std::vector<PlannedKernel> plan(int64_t B, int64_t H, int64_t W, bool backward = false) const;

  // kAuto (the default) takes each call's path from the tuning database (dwconv_pass_paths' key: a recorded
  // decision, else kAuto's rule); in tune mode a shape without an exact record times every path that runs it,
  // each with its tiles tuned, and records the fastest (lkjit/tuning.h, tune_paths). Another value pins the path.
  void set_path(DWConvPath p);
  // Tile choice (lkjit/tuning.h): cached by default (a tuning-database lookup, never a measurement); LKJIT_TUNE
  // or TuneOptions::mode = tune makes the first call of a shape time the pass's candidates (dwconv_tune.cpp).
  void set_tune_options(const TuneOptions& o);
  void set_tune_mode(TuneMode m);
  // Pins the tile of one kernel (SpecError when a shape's launches are built and it cannot run them).
  void set_tile_override(Kernel kernel, const Tile& tile);
  void clear_tile_overrides();
  // "compiled", "disk" or "memory": where the last prepare/call found its kernels (the worst of them).
  const std::string& last_origin() const { return last_origin_; }
  // The path the last call ran (prepare with backward: the backward's) and how it was chosen (tier kOverride:
  // pinned by set_path; kTuned: measured by this call; kExact / kSameArch: a record; kDefault: the rule).
  const PathChoice& last_path() const { return last_path_; }
  size_t workspace_bytes() const;  // device memory the layer owns now (wgrad partials), bytes

 private:
  struct Impl;
  struct Prepared;
  const Prepared& prepared(int64_t B, int64_t H, int64_t W, bool backward, Layout act, std::optional<Stream> call);
  void run(const Prepared& p, const void* x, const void* g, void* out, const DWConvGradients* grads,
           const DWConvStrides& st, int64_t B, int64_t H, int64_t W, Stream s, std::vector<KernelTiming>* timings);
  DWConvOptions opt_;
  std::string last_origin_;
  PathChoice last_path_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lkjit
