// Runs a kernel body on the CPU: the blocks of a 1-D grid one after another, the threads of a block as fibers
// (ucontext) that switch only at __syncthreads. A thread runs until it reaches a barrier or returns before the
// next one starts, so a missing barrier shows as a read of another thread's not-yet-written shared memory (NaN,
// see cuda_shim.h), and a barrier some threads never reach is reported. Shared memory is at most kMaxSmemBytes.
// For CPU tests of the device templates (tests/dwconv_emulation_test.cpp): slow, small problems only.
#pragma once
#include <cstddef>
#include <functional>
#include <string>

namespace lkjit::emu {

inline constexpr size_t kMaxSmemBytes = 256 * 1024;

// body() is one thread's kernel; threadIdx, blockIdx, blockDim, gridDim are set for it. Throws std::runtime_error
// for a block larger than 1024 threads, more shared memory than kMaxSmemBytes, or a barrier deadlock.
void run(unsigned grid, unsigned block, size_t smem_bytes, const std::function<void()>& body);

}  // namespace lkjit::emu
