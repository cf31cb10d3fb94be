// What a kernel is (OpSpec), how it is tiled (Tile), what it runs on (DeviceLimits) and the problem
// it runs on (Shape). Plain values: no CUDA or LLVM types, comparable, printable, hashable. The op
// families' own fields and tile axes are data (lkjit/generator.h: families()), read by name.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lkjit {

// Element type of activations. Parameters are fp32 and every kernel accumulates in fp32.
enum class DType { kF32, kF16, kBF16 };

// Memory layout of activations: the dense order a tensor has when a call gives no strides for it.
// Kernels read and write through element strides, so one binary serves both.
enum class Layout { kNCHW, kNHWC };
const char* to_string(Layout l);  // "NCHW" | "NHWC"

const char* to_string(DType t);          // "f32" | "f16" | "bf16"
DType parse_dtype(const std::string& s);  // accepts f32/fp32/float32, f16/fp16/half, bf16; SpecError
int dtype_bytes(DType t);

// A kernel of an op family, by its registered name (e.g. "wtconv_fwd_plane"): one template under
// templates/<family>/. The families register their kernels (generator/ops/registry.cpp);
// parse_kernel() and all_kernels() in lkjit/generator.h list them. A family's public header names its
// kernels as constants (lkjit/wtconv_kernels.h: kWTConvFwdPlane, ...).
class Kernel {
 public:
  Kernel() = default;
  explicit Kernel(std::string name) : name_(std::move(name)) {}
  const std::string& name() const { return name_; }
  bool empty() const { return name_.empty(); }
  friend bool operator==(const Kernel& a, const Kernel& b) { return a.name_ == b.name_; }
  friend bool operator!=(const Kernel& a, const Kernel& b) { return a.name_ != b.name_; }
  friend bool operator<(const Kernel& a, const Kernel& b) { return a.name_ < b.name_; }

 private:
  std::string name_;
};
const char* to_string(const Kernel& k);  // its name

// Named integers: a spec's family fields or a tile's axes, sorted by name (a few entries each).
class NamedInts {
 public:
  NamedInts() = default;
  NamedInts(std::initializer_list<std::pair<std::string, int>> values);
  int get(std::string_view name, int absent = 0) const;
  bool has(std::string_view name) const;
  void set(std::string_view name, int value);
  void erase(std::string_view name);
  bool empty() const { return v_.empty(); }
  const std::vector<std::pair<std::string, int>>& entries() const { return v_; }
  friend bool operator==(const NamedInts& a, const NamedInts& b) { return a.v_ == b.v_; }
  friend bool operator!=(const NamedInts& a, const NamedInts& b) { return a.v_ != b.v_; }

 private:
  std::vector<std::pair<std::string, int>> v_;
};

// What is compiled. Everything that changes generated code is here, so it is in the cache key: the
// kernel, dtype, target, and the family's spec fields (WTConv: k, L, first; each family declares its
// fields with their ranges and kernel-name tokens). B, C, H, W are never here: one binary serves
// every shape. Build one with make_spec() (lkjit/generator.h), which fills the kernel's fields with
// their defaults, or with a family's helper (wtconv_spec()).
struct OpSpec {
  Kernel kernel;
  DType dtype = DType::kF32;
  int arch = 90;               // target compute capability: 80 = sm_80, 90 = sm_90, ...
  bool arch_specific = false;  // the arch-specific target sm_XYa (wgmma, setmaxnreg): names end "_sm90a"
  NamedInts fields;            // the family's spec fields of this kernel

  int get(std::string_view field) const { return fields.get(field); }
  OpSpec& set(std::string_view field, int value) {
    fields.set(field, value);
    return *this;
  }
  bool operator==(const OpSpec& o) const;
  bool operator!=(const OpSpec& o) const { return !(*this == o); }
  std::string target() const;     // "sm_90", "sm_90a"
  std::string to_string() const;  // e.g. "wtconv_fwd_plane f32 k=5 L=3 sm_90" (the family words its fields)
};

// How it is tiled: named axes (tile_space(spec).axes names them; WTConv's are tile_h, tile_w, planes,
// vy, threads, blocks). An axis a kernel does not use is absent, and reads as 0.
struct Tile {
  NamedInts axes;

  Tile() = default;
  // Tile::of({{"tile_h", 16}, {"tile_w", 32}, {"vy", 2}, {"threads", 256}}); zero values are dropped.
  static Tile of(std::initializer_list<std::pair<std::string, int>> values);
  int get(std::string_view axis) const { return axes.get(axis); }
  Tile& set(std::string_view axis, int value);  // 0 drops the axis
  bool empty() const { return axes.empty(); }
  bool operator==(const Tile& o) const { return axes == o.axes; }
  bool operator!=(const Tile& o) const { return axes != o.axes; }
  // The axes' kernel-name tokens in the registered order, e.g. "t32x32_v4_w256" / "p2_v4_w256" /
  // "p32_t0x14_b6_w64"; Tile{} prints as "w0".
  std::string to_string() const;
};

// Tile axes by name across every family: the names are the JSON keys and table columns. tile_axis: 0 for an
// absent axis; set_tile_axis: false (and no change) for a name no family registers; tile_axis_names: every
// registered axis, each family's in its declared order (WTConv's first: tile_h, tile_w, planes, vy,
// threads, blocks, cluster).
int tile_axis(const Tile& t, const std::string& axis);
bool set_tile_axis(Tile& t, const std::string& axis, int value);
const std::vector<std::string>& tile_axis_names();

// Problem size: the logical (B, C, H, W) extents (the memory layout is separate: element strides at the
// call). stride subsamples the full-resolution output (WTConv).
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
  // Table for GPU-less prewarm: sm_80, 86, 87, 89, 90, 100, 103, 120, 121; SpecError for another arch.
  static DeviceLimits for_arch(int arch);
};

// Parses "sm_90" / "90" / "9.0" into 90; SpecError otherwise (also for "sm_90a": see parse_target).
int parse_arch(const std::string& s);
std::string arch_name(int arch);  // 90 -> "sm_90"

// A compile target: a compute capability and whether it is the arch-specific variant ("sm_90a").
struct ArchTarget {
  int arch = 90;
  bool specific = false;
  bool operator==(const ArchTarget& o) const { return arch == o.arch && specific == o.specific; }
  std::string to_string() const;  // "sm_90" / "sm_90a"
};
// Parses what parse_arch does, and "sm_90a" / "90a"; SpecError otherwise.
ArchTarget parse_target(const std::string& s);

}  // namespace lkjit
