// The explicit list of op families (static libraries drop self-registering objects): one line each.
#include "generator/family.h"

namespace lkjit::gen {

FamilyDef wtconv_family();  // ops/wtconv.cpp
FamilyDef scale_family();   // ops/scale.cpp

const std::vector<FamilyDef>& registered_families() {
  static const std::vector<FamilyDef> all = {
      wtconv_family(),
      scale_family(),
  };
  return all;
}

}  // namespace lkjit::gen
