// Names, parsing and comparison of the plain spec types.
#include "lkjit/spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "lkjit/error.h"

namespace lkjit {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

struct KernelName {
  Kernel kernel;
  const char* name;
};
constexpr KernelName kKernelNames[] = {
    {Kernel::kWTConvFold, "wtconv_fold"},         {Kernel::kWTConvFwdPlane, "wtconv_fwd_plane"},
    {Kernel::kWTConvFwdLevel, "wtconv_fwd_level"}, {Kernel::kWTConvFwdSynth, "wtconv_fwd_synth"},
    {Kernel::kWTConvBwdPlane, "wtconv_bwd_plane"}, {Kernel::kWTConvBwdLevel, "wtconv_bwd_level"},
    {Kernel::kWTConvBwdSynth, "wtconv_bwd_synth"}, {Kernel::kWTConvReduce, "wtconv_reduce"},
    {Kernel::kWTConvTranspose, "wtconv_transpose"}, {Kernel::kWTConvFwdLane, "wtconv_fwd_lane"},
    {Kernel::kWTConvBwdLane, "wtconv_bwd_lane"},   {Kernel::kWTConvReduceLane, "wtconv_reduce_lane"},
};

}  // namespace

const char* to_string(Layout l) { return l == Layout::kNCHW ? "NCHW" : "NHWC"; }

const char* to_string(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
  }
  return "?";
}

DType parse_dtype(const std::string& s) {
  const std::string v = lower(s);
  if (v == "f32" || v == "fp32" || v == "float32" || v == "float") return DType::kF32;
  if (v == "f16" || v == "fp16" || v == "float16" || v == "half") return DType::kF16;
  if (v == "bf16" || v == "bfloat16") return DType::kBF16;
  throw SpecError(fmt::format("lkjit: error: dtype '{}' is not supported; supported: f32, f16, bf16", s));
}

int dtype_bytes(DType t) { return t == DType::kF32 ? 4 : 2; }

const char* to_string(Kernel k) {
  for (const auto& e : kKernelNames)
    if (e.kernel == k) return e.name;
  return "?";
}

Kernel parse_kernel(const std::string& s) {
  for (const auto& e : kKernelNames)
    if (s == e.name) return e.kernel;
  std::string all;
  for (const auto& e : kKernelNames) all += (all.empty() ? "" : ", ") + std::string(e.name);
  throw SpecError(fmt::format("lkjit: error: kernel '{}' is unknown; known: {}", s, all));
}

std::vector<Kernel> all_kernels() {
  std::vector<Kernel> v;
  for (const auto& e : kKernelNames) v.push_back(e.kernel);
  return v;
}

bool OpSpec::operator==(const OpSpec& o) const {
  return kernel == o.kernel && dtype == o.dtype && k == o.k && L == o.L && first == o.first &&
         arch == o.arch;
}

std::string OpSpec::to_string() const {
  return fmt::format("{} {} k={} L={}{} {}", lkjit::to_string(kernel), lkjit::to_string(dtype), k, L,
                     kernel == Kernel::kWTConvFwdLevel || kernel == Kernel::kWTConvBwdLevel
                         ? (first ? " first" : " deeper")
                         : "",
                     arch_name(arch));
}

bool Tile::operator==(const Tile& o) const {
  return tile_h == o.tile_h && tile_w == o.tile_w && planes == o.planes && vy == o.vy &&
         threads == o.threads && blocks == o.blocks;
}

std::string Tile::to_string() const {
  std::string s;
  if (planes) s += fmt::format("p{}_", planes);
  if (tile_h || tile_w) s += fmt::format("t{}x{}_", tile_h, tile_w);
  if (vy) s += fmt::format("v{}_", vy);
  if (blocks) s += fmt::format("b{}_", blocks);
  s += fmt::format("w{}", threads);
  return s;
}

const std::vector<std::string>& tile_axis_names() {
  static const std::vector<std::string> names = {"tile_h", "tile_w", "planes", "vy", "threads", "blocks"};
  return names;
}

int tile_axis(const Tile& t, const std::string& a) {
  if (a == "tile_h") return t.tile_h;
  if (a == "tile_w") return t.tile_w;
  if (a == "planes") return t.planes;
  if (a == "vy") return t.vy;
  if (a == "threads") return t.threads;
  if (a == "blocks") return t.blocks;
  return 0;
}

bool set_tile_axis(Tile& t, const std::string& a, int v) {
  if (a == "tile_h") t.tile_h = v;
  else if (a == "tile_w") t.tile_w = v;
  else if (a == "planes") t.planes = v;
  else if (a == "vy") t.vy = v;
  else if (a == "threads") t.threads = v;
  else if (a == "blocks") t.blocks = v;
  else return false;
  return true;
}

std::string Shape::to_string() const {
  std::string s = fmt::format("{}x{}x{}x{}", B, C, H, W);
  if (stride != 1) s += fmt::format("/s{}", stride);
  return s;
}

DeviceLimits DeviceLimits::for_arch(int arch) {
  DeviceLimits d;
  d.arch = arch;
  switch (arch) {
    case 80: d.sm_count = 108; d.max_smem_per_block = 163 * 1024; d.smem_per_sm = 164 * 1024; break;
    case 86: d.sm_count = 84; d.max_smem_per_block = 99 * 1024; d.smem_per_sm = 100 * 1024; break;
    case 87: d.sm_count = 16; d.max_smem_per_block = 163 * 1024; d.smem_per_sm = 164 * 1024; break;
    case 89: d.sm_count = 128; d.max_smem_per_block = 99 * 1024; d.smem_per_sm = 100 * 1024; break;
    case 90: d.sm_count = 132; d.max_smem_per_block = 227 * 1024; d.smem_per_sm = 228 * 1024; break;
    case 100: case 103: d.sm_count = 148; d.max_smem_per_block = 227 * 1024; d.smem_per_sm = 228 * 1024; break;
    case 120: case 121: d.sm_count = 84; d.max_smem_per_block = 99 * 1024; d.smem_per_sm = 100 * 1024; break;
    default:
      throw SpecError(fmt::format(
          "lkjit: error: arch sm_{} has no limits table; supported: sm_80, sm_86, sm_87, sm_89, sm_90, "
          "sm_100, sm_103, sm_120, sm_121", arch));
  }
  return d;
}

int parse_arch(const std::string& s) {
  std::string v = lower(s);
  if (v.rfind("sm_", 0) == 0) v = v.substr(3);
  else if (v.rfind("sm", 0) == 0) v = v.substr(2);
  if (const auto dot = v.find('.'); dot != std::string::npos && dot + 2 == v.size())
    v = v.substr(0, dot) + v.substr(dot + 1);  // "9.0" -> "90", "10.0" -> "100"
  if (v.empty() || v.size() > 3 || !std::all_of(v.begin(), v.end(), ::isdigit))
    throw SpecError(fmt::format("lkjit: error: arch '{}' is not of the form sm_XY (e.g. sm_90)", s));
  const int a = std::stoi(v);
  if (a < 80)
    throw SpecError(fmt::format("lkjit: error: arch sm_{} is too old; supported: sm_80 and newer", a));
  return a;
}

std::string arch_name(int arch) { return fmt::format("sm_{}", arch); }

}  // namespace lkjit
