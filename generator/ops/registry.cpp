// The explicit list of op families (static libraries drop self-registering objects): one line each.
#include "generator/family.h"

namespace lkjit::gen {

const std::vector<FamilyDef>& registered_families() {
  static const std::vector<FamilyDef> all = {
      wtconv_family(),
      wbmm_family(),
  };
  return all;
}

}  // namespace lkjit::gen
