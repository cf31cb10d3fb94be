#include "support/raise.h"

namespace lkjit::support {

void raise(ErrorCode code, const std::string& message) {
  switch (code) {
    case ErrorCode::kCache: throw CacheError(message);
    case ErrorCode::kCompile: throw CompileError(message);
    case ErrorCode::kDriver: throw DriverError(message);
    default: throw Error(code, message);
  }
}

}  // namespace lkjit::support
