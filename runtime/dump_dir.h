// LKJIT_DUMP_DIR: each generated source and NVRTC log, written for debugging as <kernel>.cu and <kernel>.log.
// The folder is created mode 0700 when missing. Files are written under a descriptor of the folder to a fresh
// temp name (O_CREAT | O_EXCL | O_NOFOLLOW), then renamed over the final name: a symbolic link planted at
// <kernel>.log is replaced, never written through. A failure never fails the compile; it is warned once per
// process on stderr, naming the folder, the file and the OS reason.
#pragma once
#include <string>

#include "lkjit/generator.h"

namespace lkjit::rt {

// Does nothing when LKJIT_DUMP_DIR is unset.
void dump_source(const GeneratedSource& src, const std::string& log);

// The files into dir; returns "" or what failed ("<dir>/<file>: <reason>"). Throws nothing.
std::string write_dump(const std::string& dir, const std::string& kernel_name, const std::string& source,
                       const std::string& log);

}  // namespace lkjit::rt
