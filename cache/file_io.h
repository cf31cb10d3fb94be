// File primitives of the cache: whole reads through support/read_file.h (never blocking on a FIFO or
// device, refusing what is not a regular file, bounded, never mmapped), atomic temp-then-rename writes, and
// the last-use stamp.
#pragma once
#include <cstdint>
#include <string>

#include "support/read_file.h"

namespace lkjit::cache {

// The largest cache entry file read (a cubin with its header; lkjit's are well under 10 MB).
constexpr uint64_t kMaxEntryFileBytes = uint64_t(256) << 20;

// Reads the whole file into *out. False when absent (then *why stays empty) or unreadable: a directory,
// FIFO, device or socket, larger than max_bytes, or refused by the OS (*why: "PATH: cannot read: REASON").
bool read_whole_file(const std::string& path, std::string* out, std::string* why,
                     uint64_t max_bytes = kMaxEntryFileBytes);
// At most max_bytes from the start, and the file's size, with the same refusals (status kMissing when absent).
support::ReadResult read_file_prefix(const std::string& path, size_t max_bytes);

// Writes bytes to a unique ".tmp-*" file in dir (mode & ~umask), then renames it over path. Throws
// CacheError naming the path and the OS message; the temp file is removed on failure.
void write_file_atomically(const std::string& dir, const std::string& path, const std::string& bytes,
                           unsigned mode = 0600);
// The same in path's own directory ("." when it has none), creating that directory first if asked.
void write_file_atomically(const std::string& path, const std::string& bytes, unsigned mode, bool create_dir);
// The same for a file the user named (a bundle): a path that cannot be written is the user's bad input, an
// Error (kInvalidArgument, exit 2) "lkjit: error: cannot create PATH: REASON" (or "cannot write" / "cannot
// replace"), not a cache error.
void write_output_file(const std::string& path, const std::string& bytes, unsigned mode);

// Sets the file's modification time to now (the cache's last-use stamp). Best effort.
void stamp_now(const std::string& path);
// Modification time in ns since the epoch, and size; false when the file is gone.
bool file_times(const std::string& path, int64_t* mtime_ns, uint64_t* size);
// Why a name stat cannot follow is there all the same (a symbolic link whose target is gone, or a loop of
// links): "cannot read: REASON (a symbolic link to TARGET)", and the link's own mtime if asked; false when
// the name itself is gone.
bool unfollowable(const std::string& path, int stat_errno, std::string* why, int64_t* mtime_ns = nullptr);

}  // namespace lkjit::cache
