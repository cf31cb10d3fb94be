// Kernel name -> (spec, tile), from the families' tokens; accepted only when kernel_name() gives the name
// back. Names come from outside (tuning databases, manifests, the command line): nothing here throws.
#include <algorithm>
#include <limits>
#include <string_view>

#include "generator/family.h"
#include "lkjit/generator.h"
#include "support/parse_int.h"

namespace lkjit {
namespace {

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Decimal digits only, within int: no sign, no other base, no overflow (the one decimal parser,
// support/parse_int.h; a name's numbers are never negative, and "-0" is no number of a name).
std::optional<int> digits(std::string_view s) {
  if (!s.empty() && s[0] == '-') return std::nullopt;
  return support::to_int(s, 0, std::numeric_limits<int>::max());
}

std::vector<std::string_view> split(std::string_view s) {
  std::vector<std::string_view> v;
  size_t i = 0;
  while (i <= s.size()) {
    const size_t j = std::min(s.find('_', i), s.size());
    v.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return v;
}

// One decoding of `rest` (what follows the stem) as kernel `def`'s fields and tile; kernel_name() then
// decides whether it is the name.
std::optional<NamedKernel> decode(const gen::FamilyDef& fam, const gen::KernelDef& def, std::string_view rest,
                                  int arch, bool specific) {
  NamedKernel nk;
  nk.spec = make_spec(Kernel(def.name), DType::kF32, arch, {}, specific);
  if (!def.glued_field.empty()) {
    if (starts_with(rest, def.glued_words.first)) {
      nk.spec.set(def.glued_field, 1);
      rest.remove_prefix(def.glued_words.first.size());
    } else if (starts_with(rest, def.glued_words.second)) {
      nk.spec.set(def.glued_field, 0);
      rest.remove_prefix(def.glued_words.second.size());
    } else {
      return std::nullopt;
    }
  }
  if (rest.empty()) return nk;
  if (rest[0] != '_') return std::nullopt;
  rest.remove_prefix(1);
  // Tokens, longest first, so that "kh31" is not read as k=h31 and "w256" not as a field "w".
  struct Tok {
    std::string token, name;
    bool field;
    std::string pair;
  };
  std::vector<Tok> toks;
  for (const auto& f : fam.fields)
    if (!f.token.empty() && std::find(def.fields.begin(), def.fields.end(), f.name) != def.fields.end())
      toks.push_back({f.token, f.name, true, ""});
  for (const auto& f : gen::registered_families())
    for (const auto& a : f.axes) toks.push_back({a.token, a.name, false, a.pair_with});
  std::stable_sort(toks.begin(), toks.end(), [](const Tok& a, const Tok& b) { return a.token.size() > b.token.size(); });
  for (std::string_view t : split(rest)) {
    if (t == "f32" || t == "f16" || t == "bf16") {
      nk.spec.dtype = t == "f32" ? DType::kF32 : t == "f16" ? DType::kF16 : DType::kBF16;
      continue;
    }
    bool matched = false;
    for (const auto& k : toks) {
      if (k.token.empty() || !starts_with(t, k.token)) continue;
      std::string_view num = t.substr(k.token.size());
      if (!k.pair.empty()) {  // "t32x64"
        const size_t x = num.find('x');
        if (x == std::string_view::npos) continue;
        auto a = digits(num.substr(0, x)), b = digits(num.substr(x + 1));
        if (!a || !b) continue;
        nk.tile.set(k.name, *a);
        nk.tile.set(k.pair, *b);
      } else {
        auto v = digits(num);
        if (!v) continue;
        if (k.field) nk.spec.set(k.name, *v);
        else nk.tile.set(k.name, *v);
      }
      matched = true;
      break;
    }
    if (!matched) return std::nullopt;
  }
  return nk;
}

}  // namespace

std::optional<NamedKernel> parse_kernel_name(const std::string& name) {
  try {
    std::string_view s(name);
    if (!starts_with(s, "lkjit_")) return std::nullopt;
    s.remove_prefix(6);
    const size_t sm = s.rfind("_sm");
    if (sm == std::string_view::npos) return std::nullopt;
    std::string_view target = s.substr(sm + 3);
    const bool specific = !target.empty() && target.back() == 'a';
    if (specific) target.remove_suffix(1);
    const auto arch = digits(target);
    if (!arch) return std::nullopt;
    s = s.substr(0, sm);
    // Longest stem first: "wtconv_reduce_lane" before "wtconv_reduce".
    std::vector<std::pair<const gen::FamilyDef*, const gen::KernelDef*>> defs;
    for (const auto& f : gen::registered_families())
      for (const auto& k : f.kernels) defs.emplace_back(&f, &k);
    std::stable_sort(defs.begin(), defs.end(),
                     [](const auto& a, const auto& b) { return a.second->name.size() > b.second->name.size(); });
    for (const auto& [fam, def] : defs) {
      if (!starts_with(s, def->name)) continue;
      auto nk = decode(*fam, *def, s.substr(def->name.size()), *arch, specific);
      if (nk && kernel_name(nk->spec, nk->tile) == name) return nk;
    }
  } catch (const std::exception&) {  // a name no family can print: not a kernel name
  }
  return std::nullopt;
}

}  // namespace lkjit
