// Names, parsing and comparison of the plain spec types.
#include "lkjit/spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "generator/family.h"
#include "lkjit/error.h"

namespace lkjit {
namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Every registered tile axis once, in kernel-name order: each family's axes by print rank, families in
// registry order (an axis a later family shares keeps its first place).
const std::vector<const TileAxisDef*>& print_order() {
  static const std::vector<const TileAxisDef*> order = [] {
    std::vector<const TileAxisDef*> v;
    for (const auto& f : gen::registered_families()) {
      std::vector<const TileAxisDef*> axes;
      for (const auto& a : f.axes) axes.push_back(&a);
      std::stable_sort(axes.begin(), axes.end(),
                       [](const TileAxisDef* a, const TileAxisDef* b) { return a->print_rank < b->print_rank; });
      for (const auto* a : axes)
        if (std::none_of(v.begin(), v.end(), [&](const TileAxisDef* b) { return b->name == a->name; })) v.push_back(a);
    }
    return v;
  }();
  return order;
}

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

const char* to_string(const Kernel& k) { return k.name().c_str(); }

// ---- NamedInts ------------------------------------------------------------------------------------
NamedInts::NamedInts(std::initializer_list<std::pair<std::string, int>> values) {
  for (const auto& [n, v] : values) set(n, v);
}

int NamedInts::get(std::string_view name, int absent) const {
  for (const auto& [n, v] : v_)
    if (n == name) return v;
  return absent;
}

bool NamedInts::has(std::string_view name) const {
  return std::any_of(v_.begin(), v_.end(), [&](const auto& e) { return e.first == name; });
}

void NamedInts::set(std::string_view name, int value) {
  auto it = std::lower_bound(v_.begin(), v_.end(), name, [](const auto& e, std::string_view n) { return e.first < n; });
  if (it != v_.end() && it->first == name) it->second = value;
  else v_.insert(it, {std::string(name), value});
}

void NamedInts::erase(std::string_view name) {
  v_.erase(std::remove_if(v_.begin(), v_.end(), [&](const auto& e) { return e.first == name; }), v_.end());
}

// ---- OpSpec ---------------------------------------------------------------------------------------
bool OpSpec::operator==(const OpSpec& o) const {
  return kernel == o.kernel && dtype == o.dtype && arch == o.arch && arch_specific == o.arch_specific &&
         fields == o.fields;
}

std::string OpSpec::target() const { return ArchTarget{arch, arch_specific}.to_string(); }

std::string OpSpec::to_string() const {
  std::string f;
  const gen::KernelDef* def = nullptr;
  try {
    def = &gen::kernel_def(kernel);
  } catch (const SpecError&) {  // an unregistered kernel still prints
  }
  if (def && def->describe) {
    f = def->describe(*this);
  } else {
    for (const auto& [n, v] : fields.entries()) f += fmt::format("{}{}={}", f.empty() ? "" : " ", n, v);
  }
  return fmt::format("{} {}{}{} {}", lkjit::to_string(kernel), lkjit::to_string(dtype), f.empty() ? "" : " ", f,
                     target());
}

// ---- Tile -----------------------------------------------------------------------------------------
Tile Tile::of(std::initializer_list<std::pair<std::string, int>> values) {
  Tile t;
  for (const auto& [n, v] : values) t.set(n, v);
  return t;
}

Tile& Tile::set(std::string_view axis, int value) {
  if (value == 0) axes.erase(axis);
  else axes.set(axis, value);
  return *this;
}

std::string Tile::to_string() const {
  std::vector<std::string> parts;
  std::vector<std::string> printed;
  for (const TileAxisDef* a : print_order()) {
    if (std::find(printed.begin(), printed.end(), a->name) != printed.end()) continue;
    if (!a->pair_with.empty()) {
      const int x = get(a->name), y = get(a->pair_with);
      printed.push_back(a->pair_with);
      if (x || y || a->always) parts.push_back(fmt::format("{}{}x{}", a->token, x, y));
    } else if (const int v = get(a->name); v || a->always) {
      parts.push_back(fmt::format("{}{}", a->token, v));
    }
    printed.push_back(a->name);
  }
  // Axes no family registers (never from the generator) still print, after the known ones.
  for (const auto& [n, v] : axes.entries())
    if (std::find(printed.begin(), printed.end(), n) == printed.end()) parts.push_back(fmt::format("{}{}", n, v));
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : "_") + p;
  return s;
}

const std::vector<std::string>& tile_axis_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& f : gen::registered_families())
      for (const auto& a : f.axes)
        if (std::find(v.begin(), v.end(), a.name) == v.end()) v.push_back(a.name);
    return v;
  }();
  return names;
}

int tile_axis(const Tile& t, const std::string& a) { return t.get(a); }

bool set_tile_axis(Tile& t, const std::string& a, int v) {
  const auto& names = tile_axis_names();
  if (std::find(names.begin(), names.end(), a) == names.end()) return false;
  t.set(a, v);
  return true;
}

// ---- Shape, limits, archs -------------------------------------------------------------------------
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

namespace {
// "sm_90" / "90" / "9.0" -> 90; `specific` is set (and accepted) for a trailing 'a' when allowed.
int parse_arch_digits(const std::string& s, bool allow_a, bool* specific) {
  std::string v = lower(s);
  if (v.rfind("sm_", 0) == 0) v = v.substr(3);
  else if (v.rfind("sm", 0) == 0) v = v.substr(2);
  if (allow_a && !v.empty() && v.back() == 'a') {
    *specific = true;
    v.pop_back();
  }
  if (const auto dot = v.find('.'); dot != std::string::npos && dot + 2 == v.size())
    v = v.substr(0, dot) + v.substr(dot + 1);  // "9.0" -> "90", "10.0" -> "100"
  if (v.empty() || v.size() > 3 || !std::all_of(v.begin(), v.end(), ::isdigit))
    throw SpecError(fmt::format("lkjit: error: arch '{}' is not of the form sm_XY{} (e.g. sm_90)", s,
                                allow_a ? " or sm_XYa" : ""));
  const int a = std::stoi(v);  // at most 3 digits: cannot overflow
  if (a < 80)
    throw SpecError(fmt::format("lkjit: error: arch sm_{} is too old; supported: sm_80 and newer", a));
  return a;
}
}  // namespace

int parse_arch(const std::string& s) {
  bool specific = false;
  return parse_arch_digits(s, false, &specific);
}

std::string arch_name(int arch) { return fmt::format("sm_{}", arch); }

std::string ArchTarget::to_string() const { return fmt::format("sm_{}{}", arch, specific ? "a" : ""); }

ArchTarget parse_target(const std::string& s) {
  ArchTarget t;
  t.arch = parse_arch_digits(s, true, &t.specific);
  return t;
}

}  // namespace lkjit
