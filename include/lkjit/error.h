// One exception hierarchy for the whole library. Every message names the bad value and the allowed
// range, in the form `lkjit: error: <subject>: <what> ...`.
#pragma once
#include <stdexcept>
#include <string>

namespace lkjit {

// Stable codes; the CLI maps them to exit codes (0 ok, 1 usage, 2 bad input, 3 compile, 4 driver,
// 5 cache) and the C ABI returns them.
enum class ErrorCode : int {
  kOk = 0,
  kUsage = 1,
  kInvalidArgument = 2,
  kCompile = 3,
  kDriver = 4,
  kCache = 5,
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// A spec, shape or argument outside the supported range.
class SpecError : public Error {
 public:
  explicit SpecError(const std::string& msg) : Error(ErrorCode::kInvalidArgument, msg) {}
};

// NVRTC rejected a generated source, or the arch / builtins are unavailable. what() carries the log.
class CompileError : public Error {
 public:
  explicit CompileError(const std::string& msg) : Error(ErrorCode::kCompile, msg) {}
};

// No driver, no GPU, or a CUresult other than CUDA_SUCCESS (its name is in the message).
class DriverError : public Error {
 public:
  explicit DriverError(const std::string& msg) : Error(ErrorCode::kDriver, msg) {}
};

// The on-disk cache could not be read or written (path and OS message in the message).
class CacheError : public Error {
 public:
  explicit CacheError(const std::string& msg) : Error(ErrorCode::kCache, msg) {}
};

}  // namespace lkjit
