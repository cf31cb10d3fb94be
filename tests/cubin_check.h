// The compile tests' check of NVRTC's output, read independently of cache/elf (the code it would test):
// the bytes are an ELF64 CUDA cubin (EM_CUDA) for `arch` that defines `symbol`.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace lkjit::test {

inline void expect_cubin(const std::string& cubin, int arch, const std::string& symbol) {
  ASSERT_GT(cubin.size(), 64u);
  ASSERT_EQ(cubin.compare(0, 4, "\x7f" "ELF"), 0) << "no ELF magic";
  EXPECT_EQ(cubin[4], 2) << "not ELF64";
  uint16_t machine = 0;
  uint32_t flags = 0;
  std::memcpy(&machine, cubin.data() + 18, 2);
  std::memcpy(&flags, cubin.data() + 48, 4);
  EXPECT_EQ(machine, 190) << "e_machine is not EM_CUDA";
  // The SM is in e_flags: bits 8..15 from cubin ABI version 8 on (CUDA 12.8+), bits 0..7 before.
  const int abi = static_cast<unsigned char>(cubin[8]);
  EXPECT_EQ(abi >= 8 ? (flags >> 8) & 0xff : flags & 0xff, unsigned(arch)) << "e_flags " << std::hex << flags;
  EXPECT_NE(cubin.find(symbol), std::string::npos) << "the entry symbol is missing";
}

}  // namespace lkjit::test
