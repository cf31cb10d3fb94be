// The registered op families as data: lookups by kernel and family name, and specs built from them.
#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "generator/family.h"
#include "lkjit/error.h"

namespace lkjit {
namespace gen {
namespace {

struct Index {
  std::unordered_map<std::string, std::pair<const FamilyDef*, const KernelDef*>> kernels;
  std::vector<FamilyInfo> infos;
};

const Index& index() {
  static const Index ix = [] {
    Index i;
    for (const auto& f : registered_families()) {
      FamilyInfo info{f.name, f.fields, f.axes, {}};
      for (const auto& k : f.kernels) {
        // Two families claiming one kernel name would make names ambiguous: a registry bug.
        if (!i.kernels.emplace(k.name, std::make_pair(&f, &k)).second)
          throw SpecError(fmt::format("lkjit: error: generator: kernel {} is registered twice", k.name));
        info.kernels.push_back(Kernel(k.name));
      }
      i.infos.push_back(std::move(info));
    }
    return i;
  }();
  return ix;
}

std::string known_kernels() {
  std::string all;
  for (const auto& f : registered_families())
    for (const auto& k : f.kernels) all += (all.empty() ? "" : ", ") + k.name;
  return all;
}

}  // namespace

const KernelDef& kernel_def(const Kernel& k) {
  const auto& ix = index();
  auto it = ix.kernels.find(k.name());
  if (it == ix.kernels.end())
    throw SpecError(fmt::format("lkjit: error: kernel '{}' is unknown; known: {}", k.name(), known_kernels()));
  return *it->second.second;
}

const FamilyDef& family_def(const Kernel& k) {
  kernel_def(k);  // the error names the kernel
  return *index().kernels.at(k.name()).first;
}

}  // namespace gen

const std::vector<FamilyInfo>& families() { return gen::index().infos; }

const FamilyInfo& family(const std::string& name) {
  for (const auto& f : families())
    if (f.name == name) return f;
  std::string all;
  for (const auto& f : families()) all += (all.empty() ? "" : ", ") + f.name;
  throw SpecError(fmt::format("lkjit: error: op family '{}' is unknown; known: {}", name, all));
}

const FamilyInfo& family_of(const Kernel& k) { return family(gen::family_def(k).name); }

Kernel parse_kernel(const std::string& s) {
  gen::kernel_def(Kernel(s));
  return Kernel(s);
}

std::vector<Kernel> all_kernels() {
  std::vector<Kernel> v;
  for (const auto& f : families())
    for (const auto& k : f.kernels) v.push_back(k);
  return v;
}

std::vector<std::string> kernel_fields(const Kernel& k) { return gen::kernel_def(k).fields; }

OpSpec make_spec(const Kernel& k, DType dtype, int arch, const NamedInts& fields, bool arch_specific) {
  const auto& def = gen::kernel_def(k);
  const auto& fam = gen::family_def(k);
  OpSpec s;
  s.kernel = k;
  s.dtype = dtype;
  s.arch = arch;
  s.arch_specific = arch_specific;
  for (const auto& [name, v] : fields.entries())
    if (std::find(def.fields.begin(), def.fields.end(), name) == def.fields.end()) {
      std::string have;
      for (const auto& f : def.fields) have += (have.empty() ? "" : ", ") + f;
      throw SpecError(fmt::format("lkjit: error: {}: '{}' is not a field of this kernel; its fields: {}", k.name(), name,
                                  have.empty() ? "(none)" : have));
    }
  for (const auto& name : def.fields) {
    const auto f = std::find_if(fam.fields.begin(), fam.fields.end(), [&](const SpecField& x) { return x.name == name; });
    s.set(name, fields.has(name) ? fields.get(name) : f->def);
  }
  return s;
}

}  // namespace lkjit
