// A bounded reader of CUDA ELF images (cubins), enough to tell whether bytes from a cache are a cubin
// for one GPU arch that defines one kernel, before any of them reaches the driver. Every offset, size
// and count is checked against the buffer (64-bit sums, no pointer arithmetic past it), so any input,
// however damaged or hostile, gives a reason and never a crash; nothing is decompressed or followed.
//
// What a cubin looks like (measured on NVRTC 13.0 output for sm_75 ... sm_121):
//   e_ident: ELFCLASS64, little endian, OS/ABI 0x41 with ABI version 8 (CUDA 12.8 and later; older
//            toolkits wrote OS/ABI 0x33, ABI version 7); e_machine EM_CUDA (190); e_type ET_EXEC.
//   e_flags: ABI version 8 keeps the SM number in bits 8..15 (sm_90: 0x06005a04, sm_120: 0x06007802);
//            ABI version 7 kept it in bits 0..7 and the PTX arch in bits 16..23. An arch-specific
//            target (sm_90a, sm_100a, sm_100f) has the same e_flags as its base arch: the suffix shows
//            only in the .nv.compat attributes and the tool-kit note, so it reads as its base SM here.
//   kernels: each extern "C" __global__ is an STT_FUNC, STB_GLOBAL symbol of .symtab defined in its
//            own executable section ".text.<name>".
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lkjit::cache {

struct CubinInfo {
  int sm = 0;            // 90 for sm_90 (and sm_90a)
  int abi_version = 0;   // e_ident[EI_ABIVERSION]
  int type = 0;          // e_type: 2 executable (what NVRTC writes), 1 relocatable
  std::vector<std::string> kernels;  // global functions defined in executable sections, in symbol order
};

// Limits on what a cubin may hold; beyond them the image is refused, not read.
constexpr size_t kMaxCubinSections = 1 << 16;
constexpr size_t kMaxCubinSymbols = 1 << 20;

// Parses the header, the section table and every symbol table. nullopt with *why naming the first
// thing that is wrong ("section 3 (offset 4096, 512 bytes) runs past the end of the 4000-byte image").
std::optional<CubinInfo> read_cubin(std::string_view bytes, std::string* why);

// Empty when bytes are a CUDA ELF for sm_<arch> that defines kernel as a global function; otherwise
// what did not match, e.g. "cubin is for sm_80, expected sm_90" or "cubin defines no kernel evil
// (it defines lkjit_wtconv_fold_k5_L3_w256_sm90)".
std::string cubin_problem(std::string_view bytes, int arch, const std::string& kernel);

}  // namespace lkjit::cache
