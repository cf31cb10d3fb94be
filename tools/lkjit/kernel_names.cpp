#include "tools/lkjit/kernel_names.h"

#include <cctype>
#include <cstdio>
#include <string_view>

#include "lkjit/generator.h"
#include "tools/lkjit/common.h"

namespace lkjit::tool {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// "k5" with prefix "k" -> 5; false unless the rest is all digits.
bool number_after(const std::string& tok, const char* prefix, int* v) {
  const size_t n = std::char_traits<char>::length(prefix);
  if (tok.size() <= n || tok.compare(0, n, prefix) != 0) return false;
  for (size_t i = n; i < tok.size(); ++i)
    if (!std::isdigit(static_cast<unsigned char>(tok[i]))) return false;
  *v = std::stoi(tok.substr(n));
  return true;
}

}  // namespace

std::optional<NamedKernel> parse_kernel_name(const std::string& name) {
  std::string_view s(name);
  if (!starts_with(s, "lkjit_")) return std::nullopt;
  s.remove_prefix(6);
  const size_t sm = s.rfind("_sm");
  if (sm == std::string_view::npos) return std::nullopt;
  NamedKernel nk;
  if (!number_after(std::string(s.substr(sm + 1)), "sm", &nk.spec.arch)) return std::nullopt;
  s = s.substr(0, sm);
  size_t best = 0;
  for (Kernel k : all_kernels()) {
    const std::string_view base = to_string(k);
    if (starts_with(s, base) && base.size() > best) {
      best = base.size();
      nk.spec.kernel = k;
    }
  }
  if (!best) return std::nullopt;
  std::string rest(s.substr(best));
  const bool level = nk.spec.kernel == Kernel::kWTConvFwdLevel || nk.spec.kernel == Kernel::kWTConvBwdLevel;
  nk.spec.L = 0;
  if (level) {  // "level1_<dtype>..." reads X; "levelN_f32..." an fp32 low band
    if (rest.empty() || (rest[0] != '1' && rest[0] != 'N')) return std::nullopt;
    nk.spec.first = rest[0] == '1';
    rest = rest.substr(1);
  }
  nk.spec.dtype = DType::kF32;
  for (const auto& tok : split(rest, '_')) {
    int a = 0, b = 0;
    if (tok == "f32" || tok == "f16" || tok == "bf16") nk.spec.dtype = parse_dtype(tok);
    else if (number_after(tok, "k", &nk.spec.k) || number_after(tok, "L", &nk.spec.L)) continue;
    else if (number_after(tok, "p", &nk.tile.planes) || number_after(tok, "v", &nk.tile.vy)) continue;
    else if (number_after(tok, "w", &nk.tile.threads) || number_after(tok, "b", &nk.tile.blocks)) continue;
    else if (std::sscanf(tok.c_str(), "t%dx%d", &a, &b) == 2) {
      nk.tile.tile_h = a;
      nk.tile.tile_w = b;
    } else {
      return std::nullopt;
    }
  }
  try {
    if (kernel_name(nk.spec, nk.tile) != name) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return nk;
}

}  // namespace lkjit::tool
