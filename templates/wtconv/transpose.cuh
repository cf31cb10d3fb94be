// Layout copy of an activation tensor: out[b, c, y, x] = x[b, c, y, x] through the element strides
// x_st and out_st, for (B, C, H, W) of the params. Each block moves a 64-channel x 64-pixel tile of one
// image through shared memory, reading with lanes along whichever of C and H*W is contiguous in x and
// writing with lanes along whichever is contiguous in out, so NHWC <-> NCHW is coalesced on both sides.
// The plane kernels read a plane's pixels in lane order: on channels_last tensors those loads are C
// elements apart (measured 20-60 % slower kernels from 14x14 to 56x56; the sm_90 cluster mode, cluster_nhwc.cuh,
// still 13-20 % slower at 28x28 and 56x56), and transposing around them costs less.
// Bits are moved, not converted. Three paths, by what the layouts allow: 16-byte vectors (16-bit dense
// NHWC <-> NCHW, C and H*W multiples of 8), 32-bit words (C and H*W even), one element at a time.
#pragma once
#include "wtconv/common.cuh"

namespace lkjit {

__device__ __forceinline__ unsigned to_bits(float v) { return __float_as_uint(v); }
__device__ __forceinline__ unsigned to_bits(f16 v) { return v.u; }
__device__ __forceinline__ unsigned to_bits(bf16 v) { return v.u; }
template <class T> __device__ __forceinline__ T from_bits(unsigned b);
template <> __device__ __forceinline__ float from_bits<float>(unsigned b) { return __uint_as_float(b); }
template <> __device__ __forceinline__ f16 from_bits<f16>(unsigned b) { return f16{(unsigned short)b}; }
template <> __device__ __forceinline__ bf16 from_bits<bf16>(unsigned b) { return bf16{(unsigned short)b}; }

constexpr int kTransposeTile = 64;

// The element path's shared word: 16 bits for 16-bit elements, 32 otherwise (no <type_traits> under NVRTC).
template <int kBytes> struct TileWord { using type = unsigned; };
template <> struct TileWord<2> { using type = unsigned short; };

// Dense image layouts the 16-bit fast path handles: NHWC (channels fastest) or NCHW (pixels fastest).
__device__ __forceinline__ bool dense_nhwc(const long long (&s)[4], int C, int W) {
  return s[1] == 1 && s[3] == C && s[2] == (long long)W * C;
}
__device__ __forceinline__ bool dense_nchw(const long long (&s)[4], int HW, int W) {
  return s[3] == 1 && s[2] == W && s[1] == HW;
}

// 16-bit NHWC <-> NCHW, as a transpose of each image's row-major R x S matrix (rows = pixels, cols =
// channels for NHWC; the reverse for NCHW), two elements per 32-bit word: a warp moves 128-byte rows on
// both sides, and each output word pairs the halves of two input words (a 2x2 transpose per word pair).
// Needs R, S, both batch strides even and 4-byte aligned bases (checked by the caller).
// kWarps warps, kTransposeTile / kWarps rows each: with fewer warps each thread keeps more loads in
// flight and more blocks fit per SM.
template <int kWarps, class T>
__device__ __forceinline__ void transpose_words(const T* __restrict__ src, T* __restrict__ dst, int R, int S,
                                                int r0, int s0, unsigned* sm) {
  constexpr int P = kTransposeTile / 2 + 1;  // words per smem row (odd: column reads conflict 2-way, not 32)
  constexpr int kPer = kTransposeTile / kWarps;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned* __restrict__ in = reinterpret_cast<const unsigned*>(src);
  unsigned* __restrict__ out = reinterpret_cast<unsigned*>(dst);
  const int sw = S / 2, rw = R / 2;  // words per row of src and of dst
  unsigned v[kPer];
#pragma unroll
  for (int i = 0; i < kPer; ++i) {  // rows warp, warp + kWarps, ...: lane = word of the row
    const int r = warp + i * kWarps, w = s0 / 2 + lane;
    v[i] = (r0 + r < R && w < sw) ? __ldg(in + (long long)(r0 + r) * sw + w) : 0u;
  }
#pragma unroll
  for (int i = 0; i < kPer; ++i) sm[(warp + i * kWarps) * P + lane] = v[i];
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kPer; ++i) {  // output row c = src column s0 + c: lane = word j
    const int c = warp + i * kWarps, j = lane;
    const unsigned a = sm[(2 * j) * P + c / 2], b = sm[(2 * j + 1) * P + c / 2];
    const unsigned word = (c & 1) ? __byte_perm(a, b, 0x7632) : __byte_perm(a, b, 0x5410);
    const int w = r0 / 2 + j;
    if (s0 + c < S && w < rw) out[(long long)(s0 + c) * rw + w] = word;
  }
}

// 16-bit NHWC <-> NCHW in 16-byte vectors: the transpose of each image's row-major R x S matrix (as
// transpose_words), for R and S multiples of 8, 16-byte aligned bases and batch strides. The word path
// issued ~4x the instructions per byte (a 4-byte load, store, two shared loads and a byte permute per word)
// and ran the copies at ~70 % of the copy bandwidth, issue-bound.
// A thread loads 8 columns of two adjacent rows 2p, 2p+1 (two 16-byte loads) and pairs them per column
// into 8 words (row 2p's element low, as in memory along the output row), stored at word (c, p) of a
// [64 columns][32 row pairs] tile, so each 16-byte output vector (column c, rows 8q..8q+7) is one shared
// load of words (c, 4q..4q+3). Swizzle: word (c, p) at c*32 + (p ^ 4*((c >> 3) ^ (c & 7))), keeping
// 4-word groups whole: the stores (a warp: 4 row pairs x 8 column vectors) hit 32 banks, and each
// quarter-warp's 16-byte loads (8 vectors of one column) 8 distinct groups.
template <int kThreads, class T>
__device__ __forceinline__ void transpose_vec16(const T* __restrict__ src, T* __restrict__ dst, int R, int S, int r0,
                                                int s0, unsigned* sm) {
  static_assert(sizeof(T) == 2 && kTransposeTile == 64, "16-bit elements, 64 x 64 tiles");
  auto at = [](int c, int p) { return c * 32 + (p ^ (4 * ((c >> 3) ^ (c & 7)))); };
  const int t = threadIdx.x;
  static_assert(256 % kThreads == 0, "whole items per thread");
#pragma unroll
  for (int k = 0; k < 256 / kThreads; ++k) {  // (row pair p, column vector v): lanes along v (coalesced rows)
    const int i = t + k * kThreads;
    const int p = i >> 3, v = i & 7, r = r0 + 2 * p, c = s0 + 8 * v;
    uint4 a = make_uint4(0u, 0u, 0u, 0u), b = a;
    if (r < R && c < S) {
      a = __ldg(reinterpret_cast<const uint4*>(src + (long long)r * S + c));
      b = __ldg(reinterpret_cast<const uint4*>(src + (long long)(r + 1) * S + c));
    }
    const unsigned wa[4] = {a.x, a.y, a.z, a.w}, wb[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      sm[at(8 * v + 2 * j, p)] = __byte_perm(wa[j], wb[j], 0x5410);      // column 2j: both rows' low halves
      sm[at(8 * v + 2 * j + 1, p)] = __byte_perm(wa[j], wb[j], 0x7632);  // column 2j+1: the high halves
    }
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < 512 / kThreads; ++k) {  // (tile column c, row octet q): lanes along q (coalesced rows)
    const int i = t + k * kThreads;
    const int c = i >> 3, q = i & 7, oc = s0 + c, orow = r0 + 8 * q;
    if (oc < S && orow < R) {
      const uint4 w = *reinterpret_cast<const uint4*>(sm + at(c, 4 * q));
      *reinterpret_cast<uint4*>(dst + (long long)oc * R + orow) = w;
    }
  }
}

// f(ch, px) for each element (c0 + ch, p0 + px) of a kT x kT tile inside C x HW; consecutive lanes take
// consecutive channels when lanes_on_c (the tensor's contiguous dim), else consecutive pixels.
template <int kT, int kRows, class F>
__device__ __forceinline__ void for_each_in_tile(bool lanes_on_c, int c0, int p0, int C, int HW, F f) {
  const int lane = threadIdx.x % 32, row = threadIdx.x / 32;
#pragma unroll 4
  for (int r = row; r < kT; r += kRows)
#pragma unroll
    for (int h = 0; h < kT; h += 32) {
      const int ch = lanes_on_c ? lane + h : r, px = lanes_on_c ? r : lane + h;
      if (c0 + ch < C && p0 + px < HW) f(ch, px);
    }
}

template <class Cfg>
__device__ __forceinline__ void wtconv_transpose(const WTConvParams& p) {
  using T = typename Cfg::T;
  constexpr int kT = kTransposeTile, kRows = Cfg::threads / 32;
  static_assert(kT % kRows == 0, "whole tile rows per warp");
  // The element path's [pixel][channel] tile sizes the shared memory: elements of 16 bits in 16-bit words at a
  // pitch of 33 words (kT + 2 halves), others in 32-bit words at 65; odd word pitches, so lanes along pixels hit
  // distinct banks. For 16-bit elements that is 8.4 KB, the word path's 64 x 33 words and more than the vector
  // path's 64 x 32: against 16.6 KB it made a 56x56 layer's transposes 103 us instead of 119 on an H200 (RESULTS
  // section 16), at the same 12 blocks an SM (by registers; capping them for 16 blocks was no faster).
  using E = typename TileWord<sizeof(T)>::type;
  constexpr int kEP = sizeof(T) == 2 ? kT + 2 : kT + 1;
  constexpr int kWords = kT * kEP * (int)sizeof(E) / 4;
  static_assert(sizeof(T) != 2 || kT * (kT / 2 + 1) <= kWords, "the word path's tile fits");
  __shared__ __align__(16) unsigned tile[kWords];
  E* const etile = reinterpret_cast<E*>(tile);
  const int C = p.C, W = p.W, HW = p.H * p.W;
  // 32-bit block indices (the host keeps the grid below 2^31 blocks): 64-bit divisions cost ~100 instructions.
  const unsigned tc = (C + kT - 1) / kT, tp = (HW + kT - 1) / kT, per_b = tc * tp;
  const unsigned blk = blockIdx.x, b = blk / per_b, rest = blk - b * per_b, ct = rest / tp;
  const int c0 = (int)ct * kT, p0 = (int)(rest - ct * tp) * kT;
  const T* __restrict__ x = static_cast<const T*>(p.x) + b * p.x_st[0];
  T* __restrict__ out = static_cast<T*>(p.out) + b * p.out_st[0];

  // Dense 16-bit NHWC <-> NCHW: the direction decided once, then the widest copy the sizes and alignments
  // allow (16-byte vectors, else 4-byte words). Both copies take the source as nr rows x nc columns (pixels
  // x channels from NHWC, channels x pixels from NCHW) and this block's tile at (r0, k0).
  const bool to_nchw = dense_nhwc(p.x_st, C, W) && dense_nchw(p.out_st, HW, W);
  if (sizeof(T) == 2 && (to_nchw || (dense_nchw(p.x_st, HW, W) && dense_nhwc(p.out_st, C, W)))) {
    const int nr = to_nchw ? HW : C, nc = to_nchw ? C : HW, r0 = to_nchw ? p0 : c0, k0 = to_nchw ? c0 : p0;
    const unsigned long long ptrs = (unsigned long long)p.x | (unsigned long long)p.out;
    if constexpr (sizeof(T) == 2) {
      if (C % 8 == 0 && HW % 8 == 0 && p.x_st[0] % 8 == 0 && p.out_st[0] % 8 == 0 && (ptrs & 15) == 0) {
        transpose_vec16<Cfg::threads>(x, out, nr, nc, r0, k0, tile);
        return;
      }
    }
    if (C % 2 == 0 && HW % 2 == 0 && p.x_st[0] % 2 == 0 && p.out_st[0] % 2 == 0 && (ptrs & 3) == 0) {
      transpose_words<kRows>(x, out, nr, nc, r0, k0, tile);
      return;
    }
  }

  // Any other strides: element by element, lanes along the contiguous dim of each side.
  for_each_in_tile<kT, kRows>(p.x_st[1] == 1 && C > 1, c0, p0, C, HW, [&](int ch, int px) {
    const int c = c0 + ch, q = p0 + px, y = q / W, xx = q - y * W;
    etile[px * kEP + ch] = (E)to_bits(x[c * p.x_st[1] + y * p.x_st[2] + xx * p.x_st[3]]);
  });
  __syncthreads();
  for_each_in_tile<kT, kRows>(p.out_st[1] == 1 && C > 1, c0, p0, C, HW, [&](int ch, int px) {
    const int c = c0 + ch, q = p0 + px, y = q / W, xx = q - y * W;
    out[c * p.out_st[1] + y * p.out_st[2] + xx * p.out_st[3]] = from_bits<T>(etile[px * kEP + ch]);
  });
}

}  // namespace lkjit
