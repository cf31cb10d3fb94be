// y = a[c] * x, one element a thread in a grid-stride loop: the scale family's only kernel.
#pragma once
#include "abi/scale_params.h"
#include "common/dtype.cuh"

namespace lkjit {

template <class Cfg>
__device__ void scale_copy(const ScaleParams& p) {
  using T = typename Cfg::T;
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  const long long n = p.B * p.C * p.H * p.W;
  for (long long i = (long long)blockIdx.x * Cfg::threads + threadIdx.x; i < n;
       i += (long long)gridDim.x * Cfg::threads) {
    const long long j = i % p.W, r = i / p.W, h = r % p.H, bc = r / p.H, c = bc % p.C, b = bc / p.C;
    const float v = ldg_f32(x + b * p.x_st[0] + c * p.x_st[1] + h * p.x_st[2] + j * p.x_st[3]);
    y[b * p.y_st[0] + c * p.y_st[1] + h * p.y_st[2] + j * p.y_st[3]] = from_f32<T>(__ldg(p.a + c) * v);
  }
}

}  // namespace lkjit
