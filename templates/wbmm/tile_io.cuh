// Window partition and un-partition fused into the loads and stores of the WBMM kernels. A block's tile
// is CPB channels x WPB consecutive windows (n = tile*WPB + wl) x d positions; in shared memory it is
// window-major, [cl][wl][i] with i = ih*ww + iw, the pitch padded (geometry.cuh). Global memory is walked
// in the order its layout is contiguous in, for every stride: positions of a window row, then the next
// window (the next ww pixels of the same image row), then rows, then channels (NCHW order); or channels
// innermost (NHWC order). Pixels outside the image (the bottom/right padding) load as zero and are not
// stored (the crop).
#pragma once
#include "abi/wbmm_params.h"
#include "common/dtype.cuh"
#include "wbmm/geometry.cuh"

namespace lkjit {
namespace wbmm {

// Raw element loads (no conversion) through the read-only path.
__device__ __forceinline__ float ldg_raw(const float* p) { return __ldg(p); }
__device__ __forceinline__ f16 ldg_raw(const f16* p) { return f16{__ldg(&p->u)}; }
__device__ __forceinline__ bf16 ldg_raw(const bf16* p) { return bf16{__ldg(&p->u)}; }
template <class T>
__device__ __forceinline__ T zero_of() {
  if constexpr (sizeof(T) == 4) return 0.f;
  else return T{0};
}

// Zeroes `bytes` (a multiple of 16) of shared memory from p (16-byte aligned).
__device__ __forceinline__ void zero_smem(void* p, int bytes, int tid, int nthreads) {
  uint4* q = static_cast<uint4*>(p);
  for (int i = tid; i < bytes / 16; i += nthreads) q[i] = make_uint4(0u, 0u, 0u, 0u);
}

// The window table of tile `tile`: for each window, its origin in each of NB activations (channel c0 of
// the block included) and its extent inside the image (rows | cols << 8; 0 past the last window).
template <int NB, int WH, int WW, int WPB>
__device__ __forceinline__ void fill_table(WinEntry<NB>* tab, long long tile, const WBMMParams& p,
                                           const long long* const (&st)[NB], int c0, int tid, int nthreads) {
  const long long N = (long long)p.B * p.nH * p.nW;
  for (int wl = tid; wl < WPB; wl += nthreads) {
    const long long n = tile * WPB + wl;
    WinEntry<NB> w;
    w.ext = 0, w.pad_ = 0;
#pragma unroll
    for (int q = 0; q < NB; ++q) w.base[q] = 0;
    if (n < N) {
      const WindowCoord wc = window_coord(n, p.nH, p.nW);
      w.ext = window_extent(p.H, WH, wc.h) | window_extent(p.W, WW, wc.v) << 8;
#pragma unroll
      for (int q = 0; q < NB; ++q)
        w.base[q] = wc.b * st[q][0] + c0 * st[q][1] + (long long)wc.h * WH * st[q][2] + (long long)wc.v * WW * st[q][3];
    }
    tab[wl] = w;
  }
}

// A tile's elements in flight in registers: load() issues every global load of the tile (positions i in
// [i0, i1)), store() writes them to the shared tile; the kernels issue the next tile's loads before the
// current tile's products (Cfg::stages = 2).
template <class T, int WH, int WW, int WPB, int CPB, bool NHWC, int NTHREADS>
struct TileLoader {
  using Col = TileColumn<WH, WW, WPB, CPB, NHWC>;
  static constexpr int kCols = ceil_div(Col::Q, NTHREADS);  // columns a thread owns
  T v[kCols][WH];

  template <int NB>
  __device__ __forceinline__ void load(const T* __restrict__ src, const long long (&st)[4], const WinEntry<NB>* tab,
                                       int q, int i0, int i1, int cvalid, int tid) {
#pragma unroll
    for (int u = 0; u < kCols; ++u) {
      const int qc = tid + u * NTHREADS;
      const Col c(qc < Col::Q ? qc : 0);
      const int ext = tab[c.wl].ext;
      const bool col_ok = (Col::Q % NTHREADS == 0 || qc < Col::Q) && c.cl < cvalid && c.iw < (ext >> 8);
      const T* s = src + tab[c.wl].base[q] + c.cl * st[1] + c.iw * st[3];
#pragma unroll
      for (int ih = 0; ih < WH; ++ih) {
        const int i = ih * WW + c.iw;
        v[u][ih] = col_ok && ih < (ext & 255) && i >= i0 && i < i1 ? ldg_raw(s + ih * st[2]) : zero_of<T>();
      }
    }
  }
  // dst[(cl*WPB + wl)*pitch + i - i0] for i in [i0, i1).
  __device__ __forceinline__ void store(T* dst, int pitch, int i0, int i1, int tid) const {
#pragma unroll
    for (int u = 0; u < kCols; ++u) {
      const int qc = tid + u * NTHREADS;
      if (Col::Q % NTHREADS == 0 || qc < Col::Q) {
        const Col c(qc);
        T* d = dst + (c.cl * WPB + c.wl) * pitch + c.iw - i0;
#pragma unroll
        for (int ih = 0; ih < WH; ++ih) {
          const int i = ih * WW + c.iw;
          if (i >= i0 && i < i1) d[ih * WW] = v[u][ih];
        }
      }
    }
  }
};

// Un-partition: the staged outputs src[(cl*WPB + wl)*pitch + j - j0], positions j in [j0, j1), to their
// pixels, skipping the padding (crop).
template <class T, int WH, int WW, int WPB, int CPB, bool NHWC, int NTHREADS, int NB>
__device__ __forceinline__ void store_tile(T* __restrict__ dst, const long long (&st)[4], const WinEntry<NB>* tab, int q,
                                           const T* src, int pitch, int j0, int j1, int cvalid, int tid) {
  using Col = TileColumn<WH, WW, WPB, CPB, NHWC>;
#pragma unroll 1
  for (int qc = tid; qc < Col::Q; qc += NTHREADS) {
    const Col c(qc);
    const int ext = tab[c.wl].ext;
    if (c.cl >= cvalid || c.iw >= (ext >> 8)) continue;
    T* d = dst + tab[c.wl].base[q] + c.cl * st[1] + c.iw * st[3];
    const T* s = src + (c.cl * WPB + c.wl) * pitch + c.iw - j0;
#pragma unroll
    for (int ih = 0; ih < WH; ++ih) {
      const int j = ih * WW + c.iw;
      if (ih < (ext & 255) && j >= j0 && j < j1) d[ih * st[2]] = s[ih * WW];
    }
  }
}

}  // namespace wbmm
}  // namespace lkjit
