// What a kernel is (OpSpec), how it is tiled (Tile), what it runs on (DeviceLimits) and the problem
// it runs on (Shape). Plain aggregates: no CUDA or LLVM types, comparable, printable, hashable.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lkjit {

// Element type of activations (input X, output, dX, dOut). Parameters are always fp32 and every
// kernel accumulates in fp32.
enum class DType { kF32, kF16, kBF16 };

// Memory layout of activations: the dense order a tensor has when a WTConv call gives no strides for it
// (WTConvOptions::layout). Kernels read and write through element strides, so one binary serves both.
enum class Layout { kNCHW, kNHWC };
const char* to_string(Layout l);  // "NCHW" | "NHWC"

const char* to_string(DType t);          // "f32" | "f16" | "bf16"
DType parse_dtype(const std::string& s);  // accepts f32/fp32/float32, f16/fp16/half, bf16; SpecError
int dtype_bytes(DType t);

// The kernels of the WTConv family. Each is one template under templates/wtconv/.
enum class Kernel {
  kWTConvFold,       // W~ = s*W, b~ = s0*b (Eq. 8), once per weight update
  kWTConvFwdPlane,   // whole (b,c) planes in shared memory: every level + synthesis + base conv
  kWTConvFwdLevel,   // one level, spatial tiles: Haar analysis on chip + scaled k x k conv -> Z_l
  kWTConvFwdSynth,   // closed-form synthesis of all levels (Eq. 7) fused with the base conv
  kWTConvBwdPlane,   // whole planes: dX and per-plane partial parameter gradients
  kWTConvBwdLevel,   // one level, spatial tiles: dZ_l from dR_l, dY_l, wgrad partials
  kWTConvBwdSynth,   // closed-form synthesis of dY_l fused with the base dgrad + wgrad partials
  kWTConvReduce,     // deterministic reduction of per-block partials + scale-gradient recovery (Eq. 9)
  kWTConvTranspose,  // activation layout copy, NHWC <-> NCHW (wtconv_transpose in wtconv.h; not planned)
  kWTConvFwdLane,    // one or two threads per small (b,c) plane of NHWC activations: register rows, per-plane smem images
  kWTConvBwdLane,    // the same for dX and per-plane partial parameter gradients (channel-innermost, 32-channel blocks)
  kWTConvReduceLane, // kWTConvReduce for the lane backward's channel-innermost partials
};
const char* to_string(Kernel k);
Kernel parse_kernel(const std::string& s);
std::vector<Kernel> all_kernels();

// What is compiled. Fields that change generated code are here, so they are in the cache key.
// B, C, H, W are never here: one binary serves every shape.
struct OpSpec {
  Kernel kernel = Kernel::kWTConvFwdPlane;
  DType dtype = DType::kF32;
  int k = 5;       // odd depthwise kernel size, 1..31
  int L = 1;       // wavelet levels, 0..8 (plane/synth/reduce kernels); level kernels: see `first`
  bool first = true;  // level kernels: reads X (dtype) when true, an fp32 low band otherwise
  int arch = 90;   // target SM: 80 = sm_80, 90 = sm_90, ...

  bool operator==(const OpSpec& o) const;
  bool operator!=(const OpSpec& o) const { return !(*this == o); }
  std::string to_string() const;  // e.g. "wtconv_fwd_plane f32 k=5 L=3 sm_90"
};

// How it is tiled. Axes unused by a kernel are 0. Names are the tile-space axis names.
struct Tile {
  int tile_h = 0;   // output rows per block (tiled kernels)
  int tile_w = 0;   // output cols per block (tiled kernels)
  int planes = 0;   // (b,c) planes per block (plane kernels)
  int vy = 0;       // output rows per thread (register blocking of the k x k conv)
  int threads = 0;  // threads per block
  int blocks = 0;   // blocks an SM should hold at once: registers capped to fit them (__launch_bounds__); 0: no cap

  bool operator==(const Tile& o) const;
  bool operator!=(const Tile& o) const { return !(*this == o); }
  std::string to_string() const;  // e.g. "t32x32_v4_w256" / "p2_v4_w256" / "p32_t0x14_b6_w64"
};

// Tile fields by tile-space axis name ("tile_h", "tile_w", "planes", "vy", "threads", "blocks", in the
// fields' order): the names are the JSON keys and table columns. get: 0 for an unknown name; set: false for
// an unknown name.
int tile_axis(const Tile& t, const std::string& axis);
bool set_tile_axis(Tile& t, const std::string& axis, int value);
const std::vector<std::string>& tile_axis_names();

// Problem size: the logical (B, C, H, W) extents (the memory layout is separate: element strides at the
// call). stride subsamples the full-resolution output.
struct Shape {
  int64_t B = 1, C = 1, H = 1, W = 1;
  int stride = 1;
  int64_t numel() const { return B * C * H * W; }
  int64_t H_out() const { return (H + stride - 1) / stride; }
  int64_t W_out() const { return (W + stride - 1) / stride; }
  std::string to_string() const;  // "64x96x56x56" (+ "/s2")
};

// Limits the generator checks tiles against. From the driver, or a per-arch table when there is no GPU.
struct DeviceLimits {
  int arch = 90;
  int sm_count = 132;
  int max_threads_per_block = 1024;
  int max_smem_per_block = 227 * 1024;  // opt-in maximum, bytes
  int smem_per_sm = 228 * 1024;
  int regs_per_sm = 65536;
  static DeviceLimits for_arch(int arch);  // table for GPU-less prewarm; SpecError for unknown arch
};

// Parses "sm_90" / "90" / "9.0" into 90; SpecError otherwise.
int parse_arch(const std::string& s);
std::string arch_name(int arch);  // 90 -> "sm_90"

}  // namespace lkjit
