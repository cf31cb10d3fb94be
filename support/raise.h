// Throws the lkjit exception of an error code (include/lkjit/error.h), so that a caller's catch of
// CacheError also catches the support layer's cache-coded errors.
#pragma once
#include <string>

#include "lkjit/error.h"

namespace lkjit::support {

// kCache: CacheError, kCompile: CompileError, kDriver: DriverError, any other code: Error(code).
[[noreturn]] void raise(ErrorCode code, const std::string& message);

}  // namespace lkjit::support
