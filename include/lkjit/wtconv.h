// WTConv2d (Finder et al., "Wavelet Convolutions for Large Receptive Fields", ECCV 2024), computed with
// the fused kernels of the I/O-aware reformulation (Aflalo et al., 2026): Haar analysis on chip (§4.1),
// closed-form synthesis (§4.2, Eq. 7), scales folded into the weights (§4.3, Eq. 8-9).
//
//   out = s0 * (dw(X, W0) + b) + sum_l Synth_l(s_l * dw(Haar_l(X), W_l))   (Algorithm 1; lkjit/reference.h
//   is the executable statement, including the padding of odd sizes and the crop), then
//   out[:, :, ::stride, ::stride].
//
// Layout and types:
//   X, out, dOut, dX: dtype = options.dtype (f32, f16 or bf16), device pointers. X and dX are
//     (B, C, H, W); out and dOut are (B, C, ceil(H/stride), ceil(W/stride)). Each is addressed through
//     its own element strides (WTConvStrides: any dim order, e.g. NCHW or channels_last), by default
//     the dense strides of options.layout.
//   Parameters and their gradients: fp32 device pointers with the reference module's shapes:
//     base_w (C,1,k,k), base_b (C) [optional], base_s (1,C,1,1), level_w[l] (4C,1,k,k), level_s[l]
//     (1,4C,1,1) for l = 0..L-1; channel 4c+s of a level tensor is subband s (LL, LH, HL, HH) of c.
//   Accumulation is fp32 for every dtype. Streams: a CUstream / cudaStream_t as void*.
// Errors: SpecError for any value out of range (named, with the allowed range); DriverError without a
// GPU or on a failed launch; CompileError / CacheError from the JIT.
#pragma once
#include <array>
#include <memory>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lkjit/plan.h"
#include "lkjit/runtime.h"
#include "lkjit/spec.h"
#include "lkjit/tuning.h"
#include "lkjit/wtconv_kernels.h"

namespace lkjit {

constexpr int kMaxLevels = 8;

struct WTConvOptions {
  int64_t C = 1;        // channels in = channels out, 1..2^24
  int k = 5;            // odd, 1..31
  int L = 1;            // wavelet levels, 0..8
  DType dtype = DType::kF32;
  bool bias = true;
  int stride = 1;       // 1..64; subsamples the full-resolution output
  int device = 0;       // CUDA device ordinal
  // Memory layout a tensor has when the call gives no strides for it: dense NCHW, or dense NHWC
  // (channels_last). Explicit WTConvStrides override it per tensor. Every kernel takes any strides;
  // NHWC activations of small maps (x's strides decide, per call) run the lane kernels (WTConvPath).
  Layout layout = Layout::kNCHW;
};

// Element strides (not bytes) of the activations of one call, in (B, C, H, W) order whatever the
// memory order: element (b, c, y, x) of a tensor is at b*s[0] + c*s[1] + y*s[2] + x*s[3].
//   NCHW contiguous: {C*H*W, H*W, W, 1};  channels_last (NHWC): {H*W*C, 1, W*C, C}
// (with H, W the tensor's own sizes: H_out, W_out for out and dout). All zeros (the default) means the
// dense strides of options.layout for that tensor. Strides must be >= 1 for dims of size > 1 (any
// value >= 0 for dims of size 1), and the written tensor (out, or dX in backward) must not overlap
// itself: sorted by stride, each dim's stride is at least the span of the dims before it. Read
// tensors may overlap. Violations are a SpecError naming the tensor, the dim and the allowed range.
struct WTConvStrides {
  std::array<int64_t, 4> x{};     // X
  std::array<int64_t, 4> dout{};  // dOut (backward; ignored by forward)
  std::array<int64_t, 4> out{};   // the written tensor: out in forward, dX in backward
};

struct WTConvWeights {
  const float* base_w = nullptr;
  const float* base_b = nullptr;  // required iff options.bias
  const float* base_s = nullptr;
  const float* level_w[kMaxLevels] = {};
  const float* level_s[kMaxLevels] = {};
};

struct WTConvGradients {
  float* base_w = nullptr;
  float* base_b = nullptr;  // written iff options.bias
  float* base_s = nullptr;
  float* level_w[kMaxLevels] = {};
  float* level_s[kMaxLevels] = {};
};

// Which kernels run a shape. kAuto picks the lane kernels, forward and backward, for NHWC activations
// (options.layout, or the strides of a call: a channel stride of 1; C > 1) where they apply (stride 1,
// W <= 16, k small enough for the register rows: k*(W'+k-1) + W' + k*k <= 168 with W' = W rounded up to
// even, i.e. W <= 16 for k <= 5 and W <= 8 for k = 7; a block's images within a quarter of an SM's shared
// memory), else plane-resident kernels where planes fit in shared memory, else the tiled kernels. kLane
// runs the lane kernels whatever the layout (fast only on NHWC: each lane owns a channel; bench/RESULTS.md
// section 3).
enum class WTConvPath { kAuto, kPlane, kTiled, kLane };

// Pure: the kernels forward (and backward, if asked) would run, for activations in o.layout. Used by
// prewarm without a GPU. SpecError when a forced path (kPlane, kLane) cannot run the shape, naming why.
std::vector<PlannedKernel> wtconv_plan(const WTConvOptions& o, const Shape& shape, const DeviceLimits& limits,
                                       bool backward = false, WTConvPath path = WTConvPath::kAuto);

// Copies an activation tensor (B, C, H, W) of `dtype` between layouts: element (b, c, y, x) of dst at
// dst_st (element strides in (B, C, H, W) order, as WTConvStrides) gets the bits of the one of src at
// src_st. Tiled through shared memory so that NHWC <-> NCHW reads and writes are both coalesced. The
// plane kernels read channels_last tensors 20-60 % slower than NCHW ones (uncoalesced plane loads; on sm_90
// with clusters still 13-20 % slower at WTConvNeXt-T's 28x28 and 56x56, transposes included), so the PyTorch
// layer hands them NCHW copies this way (bench/RESULTS.md, sections 3 and 13). Stream-ordered, no
// host sync. Throws SpecError before any GPU call for null pointers, extents below 1, C or H*W above
// 2^31-65, strides below 1, a dst that overlaps itself or src (not in place); DriverError / CompileError
// otherwise.
void wtconv_transpose(const void* src, const std::array<int64_t, 4>& src_st, void* dst,
                      const std::array<int64_t, 4>& dst_st, DType dtype, int64_t B, int64_t C, int64_t H, int64_t W,
                      int device = 0, Stream s = nullptr);
// The checks of wtconv_transpose alone (pure: no CUDA calls).
void wtconv_transpose_check(const void* src, const std::array<int64_t, 4>& src_st, const void* dst,
                            const std::array<int64_t, 4>& dst_st, DType dtype, int64_t B, int64_t C, int64_t H,
                            int64_t W);

// The checks WTConv's calls make before they touch the device (pure, no CUDA calls; SpecError naming the
// bad value and the allowed range), for bindings that check before they make the layer's device current:
// the weight and gradient pointer sets, the activation pointers (dout: backward only), and the element
// strides a call runs with (the resolved strides, WTConvStrides' rules; the shape checked first).
void wtconv_check_weights(const WTConvOptions& o, const WTConvWeights& w);
void wtconv_check_gradients(const WTConvOptions& o, const WTConvGradients& g);
void wtconv_check_activations(const void* x, const void* dout, const void* out, bool backward);
WTConvStrides wtconv_resolve_strides(const WTConvOptions& o, int64_t B, int64_t H, int64_t W, const WTConvStrides* s,
                                     bool backward);
// The allowed range of a layer field ("B", "C", "H", "W", "k", "L", "stride") as errors write it ("[1, 2^24]"
// for C), or "" for another name.
std::string wtconv_field_range(const std::string& field);

class WTConv {
 public:
  // Validates the options (SpecError); allocates nothing until the first call.
  explicit WTConv(const WTConvOptions& options);
  ~WTConv();
  WTConv(const WTConv&) = delete;
  WTConv& operator=(const WTConv&) = delete;

  const WTConvOptions& options() const { return opt_; }

  // Folds scales into the weights on the device (Eq. 8). Call once per weight update; forward and
  // backward read the folded copy. Keeps the raw pointers for the backward's Eq. 9.
  //
  // CUDA graphs: set_weights, forward and backward may be captured (stream-ordered, no host sync), once
  // each has run outside capture for the layer and shape: a first call compiles, loads and allocates,
  // which capture forbids, so under capture it throws SpecError instead. Scratch a captured graph may
  // use is never freed while the layer lives (workspace_bytes counts it). Once a call has been captured,
  // every forward and backward folds first (captured ones too; not a backward told reuse_forward_fold), so
  // replays and the calls between them read the parameters' current values even when a replay changed them
  // behind the caller's back.
  void set_weights(const WTConvWeights& w, Stream s = nullptr);

  // out = WTConv(x). Shape (B, C, H, W) with C == options.C, B in [1, 2^31-1], H and W in [1, 2^30],
  // B*C*H*W <= 2^40 (SpecError otherwise). strides: the tensors'
  // element strides (null: the dense strides of options.layout), checked before anything runs.
  void forward(const void* x, void* out, int64_t B, int64_t H, int64_t W, Stream s = nullptr,
               const WTConvStrides* strides = nullptr);

  // dX and every parameter gradient from dOut and the forward input X. Gradients are written
  // (not accumulated), reduced deterministically: two calls give bit-identical results. strides.out
  // is dX's. reuse_forward_fold: the caller guarantees that the folded copy is still the one this layer's
  // last forward made from the values the parameters hold now (no set_weights, no in-place change, no other
  // forward or graph replay with other values in between; PyTorch's autograd refuses in-place changes of
  // the tensors a forward saves). A layer captured in a CUDA graph, whose calls otherwise fold first, then
  // reads that fold instead of folding again: one launch less per training step. Broken, dX and the tap
  // gradients are those of the fold's values.
  void backward(const void* x, const void* dout, void* dx, const WTConvGradients& grads, int64_t B,
                int64_t H, int64_t W, Stream s = nullptr, const WTConvStrides* strides = nullptr,
                bool reuse_forward_fold = false);

  // Runs forward (dout == nullptr) or backward once with an event pair around every kernel, and returns
  // each kernel's time and traffic model. Synchronizes the stream; for benchmarks and reports.
  std::vector<KernelTiming> profile(const void* x, const void* dout, void* out, const WTConvGradients* grads,
                                    int64_t B, int64_t H, int64_t W, Stream s = nullptr,
                                    const WTConvStrides* strides = nullptr);

  // Compiles and loads every kernel a shape needs for activations in options().layout, so later calls in
  // that layout do no JIT work (a call in the other layout may still compile the lane or plane kernel).
  void prepare(int64_t B, int64_t H, int64_t W, bool backward = false);

  // The plan a shape runs with (kernel names and tiles) for activations in options().layout, for reports.
  std::vector<PlannedKernel> plan(int64_t B, int64_t H, int64_t W, bool backward = false) const;

  // Whether NHWC activations of this shape run a lane kernel in the forward (or backward) pass on this
  // layer's path (it reads channels_last directly: no layout copies needed). Plans for the layer's device
  // (DriverError without a GPU); SpecError for a bad shape.
  bool runs_lane(int64_t B, int64_t H, int64_t W, bool backward) const;

  void set_path(WTConvPath p) { path_ = p; }

  // Tile choice (lkjit/tuning.h). The layer's mode defaults to cached (a tuning-database lookup, never
  // a measurement); LKJIT_TUNE overrides that default and an explicit TuneOptions::mode overrides both. In
  // tune/retune, prepare() or the first call on a shape tunes the kernels without an exact record, at
  // the layer level (wtconv_tune: the whole pass is timed), synchronizing the device.
  void set_tune_options(const TuneOptions& o);
  void set_tune_mode(TuneMode m);
  // Pins the tile of one plan entry (level: 1..L for level kernels, 0 otherwise), e.g. a tuner's
  // candidate. Checked against each shape's tile space when its launches are built (SpecError).
  void set_tile_override(Kernel kernel, int level, const Tile& tile);
  void clear_tile_overrides();
  // Testing: how the backward plane kernel's B warps share dX's base term with the rest of their group.
  // kDynamic (the default) claims items until the level chain is done, so the split depends on timing;
  // kAll and kNone force either extreme, so tests can run both paths deterministically.
  enum class ClaimForTesting { kDynamic, kAll, kNone };
  void set_claim_for_testing(ClaimForTesting c);
  // Where the last prepare/forward found its kernels: "compiled", "disk" or "memory" (worst of all).
  const std::string& last_origin() const { return last_origin_; }
  // Device memory the layer owns now (folded weights + scratch), bytes; 0 before the first call.
  size_t workspace_bytes() const;

 private:
  struct Impl;  // the plan runner's parts: tile policy, prepared plans, device, folded weights, scratch
  struct LaunchList;
  Shape shape_of(int64_t B, int64_t H, int64_t W) const;
  void ensure_device();
  // act: the activations' layout, which picks the lane or plane kernels (kAuto).
  // call: the stream of the call the list is for; a first call of a shape under CUDA graph capture is
  // refused (SpecError) before it compiles anything.
  const LaunchList& launch_list(int64_t B, int64_t H, int64_t W, bool backward, Layout act,
                                std::optional<Stream> call = std::nullopt);
  LaunchList build_list(int64_t B, int64_t H, int64_t W, bool backward, Layout act);
  void launch_fold(Stream s);  // Eq. 8 from the parameters set_weights last gave
  // reuse_fold: a backward that may read the fold of the forward it follows (backward's reuse_forward_fold).
  void run_list(const LaunchList& list, const void* x, const void* g, void* out, const WTConvStrides& st,
                const WTConvGradients* grads, Stream s, std::vector<KernelTiming>* timings = nullptr,
                bool reuse_fold = false);
  // wtconv_plan with each entry's tile from an override, the mode's lookup, or the default.
  std::vector<PlannedKernel> choose_tiles(const Shape& sh, const DeviceInfo& dev, bool backward, Layout act) const;
  WTConvOptions opt_;
  WTConvPath path_ = WTConvPath::kAuto;
  ClaimForTesting claim_ = ClaimForTesting::kDynamic;
  std::string last_origin_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lkjit
