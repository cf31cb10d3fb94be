// Depthwise convolution on tensor cores (mma.sync m16n8k16, sm_80+), 16-bit activations, stride 1, dilation 1:
// the forward, and dgrad as the forward over dy with the filter rotated (Cfg::dgrad). Each filter row is a
// Toeplitz matrix product (dwconv/geometry.cuh has the math, the fragment coordinates and the layout).
// Any activation strides; made for NCHW, where the staging loads of a row are contiguous.
//
// One block per (b, c, output tile tile_h x tile_w); grid 1-D: blockIdx.x = (b*C + c) * tiles + tile. The block
// stages the filter's hi/lo words and the tile's input rows (with halo) in shared memory once; warp (wy, wx)
// owns 16 mt rows x 16 nt columns of outputs. Per filter row it loads 4 S words of B fragments, then per m16
// block the nt + S - 1 A blocks (one ldmatrix.x4 each) its groups share, and issues 4 nt S products
// (2 n-tiles x hi/lo): A block cb feeds group n at k-step cb - n.
#pragma once
#include "common/mma.cuh"
#include "dwconv/common.cuh"

namespace lkjit {
namespace dwc {
template <class T>
struct MmaIsF16 {
  static constexpr bool value = false;
};
template <>
struct MmaIsF16<f16> {
  static constexpr bool value = true;
};
}  // namespace dwc

template <class Cfg>
__device__ __forceinline__ void dwconv_mma(const DWConvParams& p) {
  using T = typename Cfg::T;
  static_assert(sizeof(T) == 2, "the tensor-core kernels take 16-bit activations");
  static_assert(Cfg::stride == 1 && Cfg::dil == 1, "the tensor-core kernels take stride 1, dilation 1");
  constexpr dwc::MmaLayout L{Cfg::kh, Cfg::kw, Cfg::tile_h, Cfg::tile_w};
  static_assert(L.valid(), "tile_h and tile_w must be multiples of 16");
  constexpr int KH = Cfg::kh, KW = Cfg::kw, S = L.ksteps(), PITCH = L.pitch(), ROWS = L.rows(), COLS = L.cols();
  constexpr int WROW = L.wrow(), MT = Cfg::mt, NT = Cfg::nt, WN = Cfg::warps_n, NTH = Cfg::threads;
  static_assert(Cfg::tile_h == 16 * MT * Cfg::warps_m && Cfg::tile_w == 16 * NT * WN, "tile = warps x 16 mt x 16 nt");
  constexpr bool kDgrad = Cfg::dgrad;
  constexpr bool kF16 = dwc::MmaIsF16<T>::value;
  constexpr float kLoScale = dwc::mma_lo_scale(kF16);

  extern __shared__ __align__(16) unsigned smem_w[];
  unsigned* whi = smem_w;
  unsigned* wlo = smem_w + KH * WROW;
  unsigned short* xs = reinterpret_cast<unsigned short*>(reinterpret_cast<unsigned char*>(smem_w) + L.xs_offset());

  const int Hin = kDgrad ? p.Ho : p.H, Win = kDgrad ? p.Wo : p.W;
  const int Hout = kDgrad ? p.H : p.Ho, Wout = kDgrad ? p.W : p.Wo;
  const long long* ist = kDgrad ? p.dy_st : p.x_st;
  const long long* ost = kDgrad ? p.dx_st : p.y_st;
  const int ph = dwc::mma_walk_pad(kDgrad, KH, p.ph), pw = dwc::mma_walk_pad(kDgrad, KW, p.pw);

  const int tiles = p.tiles_h * p.tiles_w, tid = threadIdx.x;
  const int plane = (int)(blockIdx.x / (unsigned)tiles), t = (int)(blockIdx.x - (unsigned)plane * tiles);
  const int b = plane / p.C, c = plane - b * p.C;
  const long long o0y = (long long)(t / p.tiles_w) * Cfg::tile_h, o0x = (long long)(t % p.tiles_w) * Cfg::tile_w;
  const T* __restrict__ in = static_cast<const T*>(kDgrad ? p.dy : (const void*)p.x) + dwc::plane_off(ist, b, c);
  T* __restrict__ out = static_cast<T*>(kDgrad ? p.dx : p.y) + dwc::plane_off(ost, b, c);

  // Filter words: hi = the tap rounded to T, lo = the rest rounded to T (both zero outside the filter row).
  const float* __restrict__ wc = p.w + (long long)c * KH * KW;
  for (int e = tid; e < KH * WROW; e += NTH) {
    const int u = e / WROW, v0 = e - u * WROW - dwc::MmaLayout::kWOff;
    unsigned short hi[2], lo[2];
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      const int v = v0 + q;
      const float f = (v >= 0 && v < KW) ? __ldg(wc + dwc::mma_filter_index(kDgrad, KH, KW, u, v)) : 0.f;
      const T h = from_f32<T>(f);
      hi[q] = h.u, lo[q] = from_f32<T>((f - to_f32(h)) * kLoScale).u;
    }
    whi[e] = (unsigned)hi[0] | ((unsigned)hi[1] << 16);
    wlo[e] = (unsigned)lo[0] | ((unsigned)lo[1] << 16);
  }

  // Input tile, raw 16-bit patterns (no conversion), zero outside the input.
  const long long row_lo = o0y - ph, col_lo = o0x - pw;
  const unsigned short* __restrict__ inu = reinterpret_cast<const unsigned short*>(in);
  for (int e = tid; e < ROWS * COLS; e += NTH) {
    const int r = e / COLS, cc = e - r * COLS;
    const long long gi = row_lo + r, gj = col_lo + cc;
    unsigned short v = 0;
    if (gi >= 0 && gi < Hin && gj >= 0 && gj < Win) v = __ldg(inu + gi * ist[2] + gj * ist[3]);
    xs[r * PITCH + cc] = v;
  }

  const float bias = (!kDgrad && p.bias) ? __ldg(p.bias + c) : 0.f;
  constexpr int NACC = MT * NT * 8;  // accumulators a thread, seen flat where each is treated alike
  float acc[MT][NT][2][4];
  float acc_lo[kF16 ? MT : 1][kF16 ? NT : 1][2][4];  // fp16: the scaled lo products
  float* const accf = &acc[0][0][0][0];
  float* const lof = &acc_lo[0][0][0][0];
#pragma unroll
  for (int i = 0; i < NACC; ++i) {
    accf[i] = bias;
    if constexpr (kF16) lof[i] = 0.f;
  }
  __syncthreads();

  const int warp = tid >> 5, lane = tid & 31, wy = warp / WN, wx = warp - wy * WN;
  const int row0 = 16 * MT * wy, col0 = 16 * NT * wx;  // the warp's outputs within the tile
  const unsigned xs_lane = smem_addr(xs) + ((row0 + dwc::ldsm_row(lane)) * PITCH + col0 + dwc::ldsm_col(lane)) * 2;
  int widx[S][2][2];  // B word of (k-step, n-tile, register) within a filter row
#pragma unroll
  for (int s = 0; s < S; ++s)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int r = 0; r < 2; ++r) widx[s][h][r] = dwc::mma_b_tap(s, h, lane, r, 0) + dwc::MmaLayout::kWOff;

#pragma unroll 1
  for (int u = 0; u < KH; ++u) {
    unsigned bh[S][2][2], bl[S][2][2];
    const unsigned* wh = whi + u * WROW;
    const unsigned* wl = wlo + u * WROW;
#pragma unroll
    for (int s = 0; s < S; ++s)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int r = 0; r < 2; ++r) bh[s][h][r] = wh[widx[s][h][r]], bl[s][h][r] = wl[widx[s][h][r]];
#pragma unroll
    for (int m = 0; m < MT; ++m) {
      const unsigned arow = xs_lane + ((16 * m + u) * PITCH) * 2;
#pragma unroll
      for (int cb = 0; cb < NT + S - 1; ++cb) {
        unsigned a[4];
        ldsm_x4(a, arow + 16 * cb * 2);
#pragma unroll
        for (int n = 0; n < NT; ++n) {
          const int s = cb - n;
          if (s < 0 || s >= S) continue;
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            if constexpr (kF16) mma16<T>(acc_lo[m][n][h], a, bl[s][h][0], bl[s][h][1]);
            else mma16<T>(acc[m][n][h], a, bl[s][h][0], bl[s][h][1]);  // the small part first
            mma16<T>(acc[m][n][h], a, bh[s][h][0], bh[s][h][1]);
          }
        }
      }
    }
  }

  if constexpr (kF16) {
#pragma unroll
    for (int i = 0; i < NACC; ++i) accf[i] = fmaf(lof[i], 1.f / kLoScale, accf[i]);
  }

  // Outputs: each accumulator pair is two adjacent columns, one 32-bit store where dense and aligned.
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int n = 0; n < NT; ++n)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int q = 0; q < 4; q += 2) {
          const long long oy = o0y + row0 + 16 * m + dwc::mma_c_row(lane, q);
          const long long ox = o0x + col0 + 16 * n + 8 * h + dwc::mma_c_col(lane, q);
          if (oy >= Hout || ox >= Wout) continue;
          T* o = out + oy * ost[2] + ox * ost[3];
          if (ost[3] == 1 && ox + 1 < Wout && dwc::aligned_to(o, 4)) {
            const float v[2] = {acc[m][n][h][q], acc[m][n][h][q + 1]};
            dwc::stg_vec<2>(o, v);
          } else {
            *o = from_f32<T>(acc[m][n][h][q]);
            if (ox + 1 < Wout) o[ost[3]] = from_f32<T>(acc[m][n][h][q + 1]);
          }
        }
}

}  // namespace lkjit
