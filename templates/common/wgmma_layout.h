// Shared-memory operand layout and matrix descriptor of Hopper's warpgroup MMA (wgmma, sm_90a), host and
// device: the kernels build descriptors with these functions and the CPU tests check them. No CUDA types.
//
// Layout (PTX ISA, "Shared Memory Matrix Layout", no swizzle): an operand of R rows (M or N) by K elements,
// K-major, is tiled into core matrices of 8 rows x 16 bytes (8 16-bit elements), each 128 contiguous
// bytes. Core matrices adjacent along K are 128 bytes apart (the descriptor's leading-dimension byte
// offset, LBO), those adjacent along the rows 8 x K x 2 bytes apart (stride byte offset, SBO): one row group
// of 8 rows holds all of K. A k16 step of a wgmma reads two core matrices along K: 256 bytes further.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define LKJIT_WG_HD __host__ __device__
#else
#define LKJIT_WG_HD
#endif

namespace lkjit {
namespace wgmma {

enum { kCoreRows = 8, kCoreElems = 8, kCoreBytes = 128 };

// Element offset of (row r, k) in the K-major core-matrix layout of an operand with K = kdim (a multiple of
// 8) of 16-bit elements.
LKJIT_WG_HD constexpr int core_offset(int r, int k, int kdim) {
  return (r / kCoreRows) * (kCoreRows * kdim) + (k / kCoreElems) * (kCoreRows * kCoreElems) + (r % kCoreRows) * kCoreElems +
         k % kCoreElems;
}
LKJIT_WG_HD constexpr unsigned lbo_bytes() { return kCoreBytes; }
LKJIT_WG_HD constexpr unsigned sbo_bytes(int kdim) { return unsigned(kCoreRows * kdim * 2); }

// The 64-bit matrix descriptor (PTX ISA, "Matrix Descriptor Format"): start address, LBO and SBO in 16-byte
// units (14 bits each: bits 0-13, 16-29, 32-45), base offset 0 (bits 49-51), swizzle mode 0 = none (bits 62-63).
LKJIT_WG_HD constexpr unsigned long long desc_field(unsigned bytes) { return (bytes & 0x3FFFFu) >> 4; }
LKJIT_WG_HD constexpr unsigned long long make_desc(unsigned smem_byte_addr, unsigned lbo, unsigned sbo) {
  return desc_field(smem_byte_addr) | (desc_field(lbo) << 16) | (desc_field(sbo) << 32);
}

}  // namespace wgmma
}  // namespace lkjit
