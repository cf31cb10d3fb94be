// Plane-resident kernels: a thread block holds Cfg::planes independent groups of warps, one (b,c)
// plane each. A group synchronises only itself (__syncwarp for one warp, a named barrier otherwise),
// so the load, level, synthesis and store phases of different planes overlap and hide each other's
// latency. Index math uses fp32 reciprocals: every index here is below 2^16 (planes fit on chip).
#pragma once
#include "wtconv/common.cuh"

namespace lkjit {

template <class Cfg>
struct PlaneGroup {
  static constexpr int kThreads = Cfg::threads / Cfg::planes;  // threads per plane
  static_assert(kThreads % 32 == 0, "threads / planes must be a whole number of warps");
  static_assert(kThreads == 32 || Cfg::planes <= 15, "named barriers 1..15: at most 15 multi-warp groups");
  int q;  // group (plane slot) in the block
  int t;  // thread within the group
  __device__ PlaneGroup() : q(threadIdx.x / kThreads), t(threadIdx.x % kThreads) {}
  __device__ __forceinline__ void sync() const {
    if (kThreads == 32) __syncwarp();
    else asm volatile("bar.sync %0, %1;" ::"r"(q + 1), "r"(kThreads) : "memory");
  }
};

// r / d for 0 <= r < 2^16, d >= 1, through an fp32 reciprocal (exact in that range).
struct FastDiv {
  int d;
  float inv;
  __device__ explicit FastDiv(int d_) : d(d_), inv(1.f / (float)d_) {}
  __device__ __forceinline__ int div(int r) const { return __float2int_rz(((float)r + 0.5f) * inv); }
};

}  // namespace lkjit
