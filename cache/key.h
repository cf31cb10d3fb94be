// Content key of a compiled binary: SHA-256 over every input that changes the cubin (generated
// source, every embedded header's name and bytes, NVRTC options, arch, NVRTC version, generator
// version). Never a name alone, so an edited template can never load a stale cubin.
#pragma once
#include <map>
#include <string>
#include <vector>

namespace lkjit::cache {

struct KeyInputs {
  std::string kernel_name;  // display only; not hashed (the source already names it)
  std::string source;
  const std::map<std::string, std::string>* headers = nullptr;
  std::vector<std::string> options;
  int arch = 0;
  std::string nvrtc_version;  // "13.0"
  int generator_version = 0;
};

// 64 lowercase hex digits.
std::string make_key(const KeyInputs& in);

// Hex SHA-256 of bytes (entry checksums).
std::string sha256_hex(const std::string& bytes);

}  // namespace lkjit::cache
