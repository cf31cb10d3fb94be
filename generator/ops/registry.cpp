// The explicit list of op families (static libraries drop self-registering objects): one line each.
#include "generator/family.h"

namespace lkjit::gen {

FamilyDef wtconv_family();  // ops/wtconv.cpp
FamilyDef scale_family();   // ops/scale.cpp
FamilyDef dwconv_family();  // ops/dwconv.cpp
FamilyDef wbmm_family();    // ops/wbmm.cpp

const std::vector<FamilyDef>& registered_families() {
  static const std::vector<FamilyDef> all = {
      wtconv_family(),
      scale_family(),
      dwconv_family(),
      wbmm_family(),
  };
  return all;
}

}  // namespace lkjit::gen
