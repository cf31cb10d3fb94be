// Host definitions of the CUDA built-ins the depthwise templates use, so that the templates compile as plain C++
// and run on the CPU under the block emulator (block_emulator.h): execution-space keywords, the vector types,
// threadIdx / blockIdx / blockDim / gridDim, dynamic shared memory, __syncthreads, __ldg and bit casts.
// Include it before any template; tests/emulation also shadows "common/dtype.cuh" (-iquote) with a host copy.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
#define __shared__
#define __align__(n)
#define __grid_constant__
#define __restrict__ __restrict

struct Dim3Shim {
  unsigned x = 0, y = 0, z = 0;
};
extern Dim3Shim threadIdx, blockIdx, blockDim, gridDim;

struct float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};

// The block's dynamic shared memory: `extern __shared__ float smem[]` in a template (namespace lkjit) names this
// array. The emulator fills it with NaN before each block, so that a read of a never-written element poisons a
// result.
namespace lkjit {
extern float smem[];
}

// A barrier of the block's threads (fibers): returns once every live thread of the block has reached it.
void __syncthreads();

template <class T>
inline T __ldg(const T* p) {
  return *p;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
