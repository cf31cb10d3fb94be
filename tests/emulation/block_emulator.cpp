// The block emulator (block_emulator.h): one fiber per CUDA thread, a round-robin scheduler that releases a
// barrier once every live thread of the block waits at it.
#include "tests/emulation/block_emulator.h"

#include <ucontext.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

#include "tests/emulation/cuda_shim.h"

Dim3Shim threadIdx, blockIdx, blockDim, gridDim;
namespace lkjit {
alignas(16) float smem[emu::kMaxSmemBytes / sizeof(float)];
}

namespace lkjit::emu {
namespace {

enum class State { kRunnable, kBarrier, kDone };

struct Fiber {
  ucontext_t ctx;
  std::vector<char> stack;
  State state = State::kRunnable;
};

constexpr size_t kStackBytes = 128 * 1024;
ucontext_t g_main;
std::vector<Fiber> g_fibers;
const std::function<void()>* g_body = nullptr;
unsigned g_current = 0;

void entry(unsigned tid) {
  (*g_body)();
  g_fibers[tid].state = State::kDone;
  // Returning resumes uc_link (the scheduler).
}

}  // namespace

void run(unsigned grid, unsigned block, size_t smem_bytes, const std::function<void()>& body) {
  if (block < 1 || block > 1024) throw std::runtime_error("emulator: block of " + std::to_string(block) + " threads");
  if (smem_bytes > kMaxSmemBytes)
    throw std::runtime_error("emulator: " + std::to_string(smem_bytes) + " bytes of shared memory exceed " +
                             std::to_string(kMaxSmemBytes));
  g_body = &body;
  if (g_fibers.size() < block) g_fibers.resize(block);
  blockDim = {block, 1, 1};
  gridDim = {grid, 1, 1};
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx = {b, 0, 0};
    for (size_t i = 0; i < smem_bytes / sizeof(float); ++i) lkjit::smem[i] = std::numeric_limits<float>::quiet_NaN();
    for (unsigned t = 0; t < block; ++t) {
      Fiber& f = g_fibers[t];
      if (f.stack.empty()) f.stack.resize(kStackBytes);
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = f.stack.data();
      f.ctx.uc_stack.ss_size = f.stack.size();
      f.ctx.uc_link = &g_main;
      makecontext(&f.ctx, reinterpret_cast<void (*)()>(entry), 1, t);
      f.state = State::kRunnable;
    }
    for (;;) {
      bool ran = false;
      for (unsigned t = 0; t < block; ++t) {
        if (g_fibers[t].state != State::kRunnable) continue;
        g_current = t;
        threadIdx = {t, 0, 0};
        ran = true;
        swapcontext(&g_main, &g_fibers[t].ctx);
      }
      unsigned waiting = 0, done = 0;
      for (unsigned t = 0; t < block; ++t) {
        waiting += g_fibers[t].state == State::kBarrier;
        done += g_fibers[t].state == State::kDone;
      }
      if (done == block) break;
      // Every live thread waits at the barrier: release it. (Threads that returned do not hold it up, as on
      // sm_70 and newer; the templates return only after their last barrier.)
      if (waiting + done == block) {
        for (unsigned t = 0; t < block; ++t)
          if (g_fibers[t].state == State::kBarrier) g_fibers[t].state = State::kRunnable;
      } else if (!ran) {
        throw std::runtime_error("emulator: block " + std::to_string(b) + " deadlocked");
      }
    }
  }
  g_body = nullptr;
}

}  // namespace lkjit::emu

void __syncthreads() {
  using namespace lkjit::emu;
  g_fibers[g_current].state = State::kBarrier;
  swapcontext(&g_fibers[g_current].ctx, &g_main);
}
