// Window partition and un-partition fused into the loads and stores of the WBMM kernels. A block's tile
// is CPB channels x WPB consecutive windows (n = tile*WPB + wl) x d positions; in shared memory it is
// window-major, [cl][wl][i] with i = ih*ww + iw, the pitch padded (geometry.cuh). Global memory is walked
// in the order its layout is contiguous in (TileColumn): the pixels of a window row, then the next window's
// (the next ww pixels of the same image row), NCHW order; or channels innermost, NHWC order. A thread owns
// groups of V adjacent columns and moves a group's row in one V-element access wherever the group is a run
// in memory (checked per group and tile, so every stride order is right; others take the element path).
// Pixels outside the image (the bottom/right padding) load as zero and are not stored (the crop).
#pragma once
#include "abi/wbmm_params.h"
#include "common/dtype.cuh"
#include "wbmm/geometry.cuh"

namespace lkjit {
namespace wbmm {

// Raw element bits (no conversion) through the read-only path, and back.
template <class T>
__device__ __forceinline__ unsigned ldg_bits(const T* p) {
  if constexpr (sizeof(T) == 4) return __float_as_uint(__ldg(reinterpret_cast<const float*>(p)));
  else return __ldg(&p->u);
}
template <class T>
__device__ __forceinline__ void st_bits(T* p, unsigned b) {
  if constexpr (sizeof(T) == 4) *reinterpret_cast<float*>(p) = __uint_as_float(b);
  else p->u = (unsigned short)b;
}
template <class T>
__device__ __forceinline__ unsigned lds_bits(const T* p) {
  if constexpr (sizeof(T) == 4) return __float_as_uint(*reinterpret_cast<const float*>(p));
  else return p->u;
}
template <class T>
__device__ __forceinline__ float bits_to_f32(unsigned b) {
  if constexpr (sizeof(T) == 4) return __uint_as_float(b);
  else return to_f32(T{(unsigned short)b});
}

// V elements of T packed into 32-bit words (16-bit elements two a word), loaded or stored in one access of
// V * sizeof(T) bytes (2 to 16).
template <class T, int V>
struct Pack {
  static constexpr int kBytes = V * (int)sizeof(T), kWords = (kBytes + 3) / 4, kPerWord = 4 / (int)sizeof(T);
  static_assert(kBytes == 2 || kBytes == 4 || kBytes == 8 || kBytes == 16, "2 to 16 bytes an access");
  unsigned w[kWords];
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < kWords; ++i) w[i] = 0u;
  }
  __device__ __forceinline__ unsigned get(int e) const {
    if constexpr (sizeof(T) == 4) return w[e];
    else return (w[e / 2] >> (16 * (e % 2))) & 0xffffu;
  }
  __device__ __forceinline__ void set(int e, unsigned b) {
    if constexpr (sizeof(T) == 4) w[e] = b;
    else w[e / 2] = (w[e / 2] & (0xffff0000u >> (16 * (e % 2)))) | (b << (16 * (e % 2)));
  }
  __device__ __forceinline__ void load(const T* p) {
    if constexpr (kBytes == 16) {
      const uint4 q = __ldg(reinterpret_cast<const uint4*>(p));
      w[0] = q.x, w[1] = q.y, w[2] = q.z, w[3] = q.w;
    } else if constexpr (kBytes == 8) {
      const uint2 q = __ldg(reinterpret_cast<const uint2*>(p));
      w[0] = q.x, w[1] = q.y;
    } else if constexpr (kBytes == 4) {
      w[0] = __ldg(reinterpret_cast<const unsigned*>(p));
    } else {
      w[0] = ldg_bits(p);
    }
  }
  // PTX vector stores: the front end otherwise splits some uint4 stores into four 32-bit ones.
  __device__ __forceinline__ void store(T* p) const {
    if constexpr (kBytes == 16)
      asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3]) : "memory");
    else if constexpr (kBytes == 8)
      asm volatile("st.global.v2.b32 [%0], {%1, %2};" ::"l"(p), "r"(w[0]), "r"(w[1]) : "memory");
    else if constexpr (kBytes == 4)
      *reinterpret_cast<unsigned*>(p) = w[0];
    else
      st_bits(p, w[0]);
  }
};

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
      // 32-bit division where the window count allows it (a 64-bit one is a long software sequence).
      WindowCoord wc;
      if (N <= 0x7fffffffLL) {
        const int ni = (int)n, r = ni / p.nW;
        wc = WindowCoord{r / p.nH, r % p.nH, ni - r * p.nW};
      } else {
        wc = window_coord(n, p.nH, p.nW);
      }
      w.ext = window_extent(p.H, WH, wc.h) | window_extent(p.W, WW, wc.v) << 8;
#pragma unroll
      for (int q = 0; q < NB; ++q)
        w.base[q] = wc.b * st[q][0] + c0 * st[q][1] + (long long)wc.h * WH * st[q][2] + (long long)wc.v * WW * st[q][3];
    }
    tab[wl] = w;
  }
}

// A thread's column groups: group g holds tile columns g*V .. g*V + V-1 (TileColumn order); a thread owns
// groups tid, tid + threads, ... for the whole kernel (their columns do not change from tile to tile), so
// each element's (cl, wl, iw) is decoded once, packed as wl | iw << 12 | cl << 20.
__device__ __forceinline__ int code_wl(int c) { return c & 0xfff; }
__device__ __forceinline__ int code_iw(int c) { return (c >> 12) & 0xff; }
__device__ __forceinline__ int code_cl(int c) { return c >> 20; }

// One group in one tile: its first element's offset in the activation, its rows inside the image, and
// whether the group is one run of V consecutive elements in memory, aligned in every row, with every
// element inside the image (vec: one access per row). Checked element by element, so any strides are
// right: a group that is not a run takes the element path.
struct GroupAddr {
  long long a0;
  int rows;
  bool vec;
};
template <class T, int V, int NB>
__device__ __forceinline__ GroupAddr group_addr(const T* ptr, const long long (&st)[4], const WinEntry<NB>* tab, int q,
                                                const int (&code)[V], int cvalid) {
  GroupAddr ga{0, 0, true};
#pragma unroll
  for (int e = 0; e < V; ++e) {
    const int wl = code_wl(code[e]), iw = code_iw(code[e]), cl = code_cl(code[e]);
    const int ext = tab[wl].ext;
    const long long a = tab[wl].base[q] + cl * st[1] + iw * st[3];
    const bool valid = cl < cvalid && iw < (ext >> 8);
    const int rows = valid ? ext & 255 : 0;
    if (e == 0) ga.a0 = a, ga.rows = rows;
    ga.vec = ga.vec && valid && rows == ga.rows && a == ga.a0 + e;
  }
  // Aligned at row 0, and at every row: the row stride a multiple of V.
  ga.vec = ga.vec && (reinterpret_cast<unsigned long long>(ptr + ga.a0) % (V * sizeof(T)) == 0) &&
           (ga.rows <= 1 || st[2] % V == 0);
  return ga;
}

// Window partition and un-partition for one thread of a tile of CPB x WPB windows. load() issues every
// global load of a tile (the rows holding positions of [i0, i1)) into registers, store() writes positions
// [i0, i1) to the shared tile (pitch P); the kernels issue the next tile's loads before the current tile's
// products (Cfg::stages = 2). unpartition() writes a staged output tile back through the same columns.
// 16-bit elements stay packed two a register. Full: [i0, i1) = [0, d), checks compiled out.
template <class T, int WH, int WW, int WPB, int CPB, bool NHWC, int NTHREADS, int V>
struct TileIO {
  using Col = TileColumn<WH, WW, WPB, CPB, NHWC>;
  using P = Pack<T, V>;
  static_assert(Col::Q % V == 0, "whole column groups (WPB is a multiple of 16)");
  static constexpr int kGroups = Col::Q / V, kPer = ceil_div(kGroups, NTHREADS);
  static constexpr bool kEven = kGroups % NTHREADS == 0;  // every thread owns kPer groups
  int code[kPer][V];
  P v[kPer][WH];

  __device__ __forceinline__ explicit TileIO(int tid) {
#pragma unroll
    for (int u = 0; u < kPer; ++u)
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const int g = tid + u * NTHREADS;
        const Col c(kEven || g < kGroups ? g * V + e : 0);
        code[u][e] = c.wl | c.iw << 12 | c.cl << 20;
      }
  }
  __device__ __forceinline__ static bool owns(int tid, int u) { return kEven || tid + u * NTHREADS < kGroups; }
  template <bool Full>
  __device__ __forceinline__ static bool row_in(int ih, int i0, int i1) {
    return Full || ((ih + 1) * WW > i0 && ih * WW < i1);
  }

  template <bool Full, int NB>
  __device__ __forceinline__ void load(const T* __restrict__ src, const long long (&st)[4], const WinEntry<NB>* tab,
                                       int q, int i0, int i1, int cvalid, int tid) {
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
#pragma unroll
      for (int ih = 0; ih < WH; ++ih) v[u][ih].zero();
      if (!owns(tid, u)) continue;
      const GroupAddr ga = group_addr<T, V>(src, st, tab, q, code[u], cvalid);
      if (ga.vec) {
        const T* s = src + ga.a0;
#pragma unroll
        for (int ih = 0; ih < WH; ++ih)
          if (ih < ga.rows && row_in<Full>(ih, i0, i1)) v[u][ih].load(s + ih * st[2]);
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const int wl = code_wl(code[u][e]), iw = code_iw(code[u][e]), cl = code_cl(code[u][e]);
          const int ext = tab[wl].ext;
          if (cl >= cvalid || iw >= (ext >> 8)) continue;
          const T* s = src + tab[wl].base[q] + cl * st[1] + iw * st[3];
#pragma unroll
          for (int ih = 0; ih < WH; ++ih)
            if (ih < (ext & 255) && row_in<Full>(ih, i0, i1)) v[u][ih].set(e, ldg_bits(s + ih * st[2]));
        }
      }
    }
  }

  // dst[(cl*WPB + wl)*P + i - i0] for i in [i0, i1). With Sum, also sums[cl] += each element (dbias).
  template <int Pitch, bool Full, bool Sum = false>
  __device__ __forceinline__ void store(T* dst, int i0, int i1, int tid, float* sums = nullptr) const {
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      if (!owns(tid, u)) continue;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const int wl = code_wl(code[u][e]), iw = code_iw(code[u][e]), cl = code_cl(code[u][e]);
        T* d = dst + (cl * WPB + wl) * Pitch + iw - (Full ? 0 : i0);
        float s = 0.f;
#pragma unroll
        for (int ih = 0; ih < WH; ++ih) {
          const unsigned b = v[u][ih].get(e);
          if (Full || (ih * WW + iw >= i0 && ih * WW + iw < i1)) st_bits(d + ih * WW, b);
          if (Sum) s += bits_to_f32<T>(b);
        }
        if constexpr (Sum) {
          if constexpr (CPB == 1) {
            sums[0] += s;
          } else {
#pragma unroll
            for (int k = 0; k < CPB; ++k)
              if (cl == k) sums[k] += s;
          }
        }
      }
    }
  }

  // Un-partition: the staged outputs src[(cl*WPB + wl)*Pitch + j - j0], positions j in [j0, j1), to their
  // pixels, skipping the padding (crop); one access per row where a group is a run and wholly in [j0, j1).
  template <int Pitch, bool Full, int NB>
  __device__ __forceinline__ void unpartition(T* __restrict__ dst, const long long (&st)[4], const WinEntry<NB>* tab, int q,
                                              const T* src, int j0, int j1, int cvalid, int tid) const {
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      if (!owns(tid, u)) continue;
      const GroupAddr ga = group_addr<T, V>(dst, st, tab, q, code[u], cvalid);
      int soff[V], iw_min = WW, iw_max = -1;
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const int iw = code_iw(code[u][e]);
        soff[e] = (code_cl(code[u][e]) * WPB + code_wl(code[u][e])) * Pitch + iw - (Full ? 0 : j0);
        iw_min = min_i(iw_min, iw), iw_max = max_i(iw_max, iw);
      }
      if (ga.vec) {
        T* d = dst + ga.a0;
#pragma unroll
        for (int ih = 0; ih < WH; ++ih) {
          if (ih >= ga.rows) continue;
          if (Full || (ih * WW + iw_min >= j0 && ih * WW + iw_max < j1)) {
            P pk;
#pragma unroll
            for (int e = 0; e < V; ++e) pk.set(e, lds_bits(src + soff[e] + ih * WW));
            pk.store(d + ih * st[2]);
          } else {
#pragma unroll
            for (int e = 0; e < V; ++e) {
              const int j = ih * WW + code_iw(code[u][e]);
              if (j >= j0 && j < j1) d[e + ih * st[2]] = src[soff[e] + ih * WW];
            }
          }
        }
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const int wl = code_wl(code[u][e]), iw = code_iw(code[u][e]), cl = code_cl(code[u][e]);
          const int ext = tab[wl].ext;
          if (cl >= cvalid || iw >= (ext >> 8)) continue;
          T* d = dst + tab[wl].base[q] + cl * st[1] + iw * st[3];
#pragma unroll
          for (int ih = 0; ih < WH; ++ih) {
            const int j = ih * WW + iw;
            if (ih < (ext & 255) && (Full || (j >= j0 && j < j1))) d[ih * st[2]] = src[soff[e] + ih * WW];
          }
        }
      }
    }
  }
};

}  // namespace wbmm
}  // namespace lkjit
