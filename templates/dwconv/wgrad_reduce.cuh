// Deterministic reduction of the wgrad partials (dwconv_wgrad_direct, dwconv_wgrad_nhwc):
//   dw[c, tap] = sum_{ch < chunks} partial[ch, c, tap],  dbias[c] = sum_ch partial[ch, c, kh*kw]
// added in increasing ch, so two runs give identical bits. One thread per (c, tap) value, taken in the
// order of the partial layout's unit stride (channel innermost or tap innermost) so that a warp's loads of
// one chunk are contiguous. Compiled once for every kernel size: taps (= kh*kw) is a runtime value.
// Grid 1-D over ceil(C * (taps + 1) / threads) blocks.
#pragma once
#include "dwconv/common.cuh"

namespace lkjit {

template <class Cfg>
__device__ __forceinline__ void dwconv_wgrad_reduce(const DWConvParams& p) {
  constexpr int NT = Cfg::threads, U = 8;  // loads in flight per thread
  const int V = p.taps + 1, C = p.C;
  const int idx = (int)(blockIdx.x * NT + threadIdx.x);  // C * V < 2^31 (generator)
  if (idx >= C * V) return;
  const bool c_inner = p.part_st[1] == 1;
  const int c = c_inner ? idx % C : idx / V, tap = c_inner ? idx / C : idx % V;
  const float* __restrict__ src = p.partial + dwc::part_index(p.part_st, 0, c, tap);
  const long long st = p.part_st[0];
  float sum = 0.f;
  int ch = 0;
#pragma unroll 1
  for (; ch + U <= p.chunks; ch += U) {
    float v[U];
#pragma unroll
    for (int k = 0; k < U; ++k) v[k] = __ldg(src + (long long)(ch + k) * st);
#pragma unroll
    for (int k = 0; k < U; ++k) sum += v[k];  // in chunk order
  }
#pragma unroll 1
  for (; ch < p.chunks; ++ch) sum += __ldg(src + (long long)ch * st);
  if (tap < p.taps) p.dw[(long long)c * p.taps + tap] = sum;
  else if (p.dbias) p.dbias[c] = sum;
}

}  // namespace lkjit
