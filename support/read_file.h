// The one reader of files that come from outside lkjit (cache entries, bundles, tuning databases,
// manifests). It never blocks: a FIFO, device, socket or directory at the path is refused, naming it, before
// a byte is read (the file is opened O_NONBLOCK and checked with fstat, so a FIFO swapped in after the check
// cannot block either); it never reads more than a cap; it retries reads interrupted by signals; and where
// links matter it refuses to follow one (O_NOFOLLOW). It never mmaps: a file truncated under an mmap would
// SIGBUS the reader.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "lkjit/error.h"

namespace lkjit::support {

enum class ReadStatus {
  kOk,
  kMissing,     // no such file (also a symbolic link whose target is missing: `why` then says so)
  kNotRegular,  // a directory, FIFO, device, socket, or a link where links are refused
  kTooLarge,    // bigger than max_bytes
  kError,       // the OS refused (permission, I/O error, name too long...)
};

struct ReadOptions {
  uint64_t max_bytes = uint64_t(64) << 20;
  bool follow_links = true;  // false: a symbolic link at the path itself is kNotRegular
  bool prefix = false;       // true: read at most max_bytes from the start of a larger file (kOk)
  const char* what = "file";  // for messages: "tuning database", "bundle", "manifest"
};

struct ReadResult {
  ReadStatus status = ReadStatus::kError;
  std::string bytes;
  uint64_t file_size = 0;  // the file's size when it was opened
  unsigned mode = 0;       // st_mode of the file that was opened (kOk, kTooLarge), for permission checks
  unsigned owner_uid = 0;  // its st_uid
  int os_error = 0;        // errno for kMissing and kError
  // Empty when kOk; else "PATH: cannot read <what>: <reason>".
  std::string why;
  // Why, without the path: "it is a FIFO, not a regular file", "it is N bytes; supported: at most M bytes",
  // "Permission denied", "No such file or directory (a symbolic link to TARGET)".
  std::string reason;

  bool ok() const { return status == ReadStatus::kOk; }
};

ReadResult read_file(const std::string& path, const ReadOptions& options);

// The same, throwing "lkjit: error: <why>" unless kOk, as the exception of code (support/raise.h).
std::string read_file_or_throw(const std::string& path, const ReadOptions& options,
                               ErrorCode code = ErrorCode::kInvalidArgument);

// "a directory", "a FIFO", "a character device", "a block device", "a socket", "a symbolic link", "a regular
// file" for a stat mode.
const char* file_kind(unsigned mode);

}  // namespace lkjit::support
