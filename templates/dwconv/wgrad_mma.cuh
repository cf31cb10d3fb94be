// Depthwise convolution wgrad + dbias on tensor cores (mma.sync m16n8k16, sm_80+), 16-bit activations, stride 1,
// dilation 1, per-block partials like dwconv_wgrad_direct (same chunks, same partial layout, dwconv_wgrad_reduce
// adds them). dwconv/geometry.cuh (WgradMmaLayout) has the product and the shared-memory layout.
//
// One block per (channel c, chunk ch of the channel's (b, dy tile) work units); grid 1-D: blockIdx.x = c * chunks +
// ch. Per unit the block stages the dy tile and the x rows it meets in shared memory once. Warp w takes the x rows
// rr = w % ksplit (mod ksplit) and the filter blocks of its tap group w / ksplit (warps_u x warps_v groups, each
// mu() / warps_u row blocks and nv() / warps_v column blocks, rounded up): per (rr, dy column block) it loads its
// B words, then per live row block one ldmatrix.x4 of A and the products. Sums stay in registers over the chunk;
// then the ksplit sums are added in order through shared memory: no float atomics, the same bits every run.
#pragma once
#include "common/mma.cuh"
#include "dwconv/common.cuh"

namespace lkjit {

template <class Cfg>
__device__ __forceinline__ void dwconv_wgrad_mma(const DWConvParams& p) {
  using T = typename Cfg::T;
  static_assert(sizeof(T) == 2, "the tensor-core kernels take 16-bit activations");
  static_assert(Cfg::stride == 1 && Cfg::dil == 1, "the tensor-core kernels take stride 1, dilation 1");
  constexpr int KH = Cfg::kh, KW = Cfg::kw, TH = Cfg::tile_h, TW = Cfg::tile_w, NTH = Cfg::threads;
  constexpr int WU = Cfg::warps_u, WV = Cfg::warps_v, WK = Cfg::ksplit;
  constexpr dwc::WgradMmaLayout L{KH, KW, TH, TW, WK, NTH};
  static_assert(L.valid() && NTH == 32 * WU * WV * WK, "tile_w a multiple of 16; threads = 32 warps_u warps_v ksplit");
  constexpr int MU = L.mu(), NV = L.nv(), MP = L.mp(), NP = L.np(), XR = L.xrows(), GR = L.grows();
  constexpr int GP = L.gpitch(), XP = L.xpitch(), MUW = dwc::cdiv(MU, WU), NVW = dwc::cdiv(NV, WV), JB = TW / 16;

  extern __shared__ __align__(16) unsigned char smem_b[];
  unsigned short* gs = reinterpret_cast<unsigned short*>(smem_b);
  unsigned short* xs = reinterpret_cast<unsigned short*>(smem_b + L.xs_offset());
  unsigned short* xo = reinterpret_cast<unsigned short*>(smem_b + L.xo_offset());
  float* red = reinterpret_cast<float*>(smem_b);  // after the last unit
  float* dbr = reinterpret_cast<float*>(smem_b + L.dbias_offset());

  const int tid = threadIdx.x, chunks = p.chunks;
  const int c = (int)(blockIdx.x / (unsigned)chunks), ch = (int)(blockIdx.x - (unsigned)c * chunks);
  const int tiles = p.tiles_h * p.tiles_w, total = p.B * tiles;  // < 2^31 (generator)
  const int w0 = dwc::chunk_begin(total, chunks, ch), w1 = dwc::chunk_begin(total, chunks, ch + 1);
  const unsigned short* __restrict__ x = reinterpret_cast<const unsigned short*>(p.x);
  const unsigned short* __restrict__ dy = reinterpret_cast<const unsigned short*>(p.dy);
  const long long* xst = p.x_st;
  const long long* gst = p.dy_st;

  const int warp = tid >> 5, lane = tid & 31, kidx = warp % WK, grp = warp / WK;
  const int mu0 = grp / WV, nv0 = grp % WV;  // the warp's first row and column blocks (then every WU-th / WV-th)

  // The zero rows of gs above and below the tile stay zero; each unit rewrites the tile's rows.
  for (int e = tid; e < GR * GP; e += NTH) gs[e] = 0;

  float acc[MUW][NVW][4];
#pragma unroll
  for (int a = 0; a < MUW; ++a)
#pragma unroll
    for (int b = 0; b < NVW; ++b)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[a][b][q] = 0.f;
  float dbsum = 0.f;

  // Per lane: the word offsets of its B registers within an x row (xs for even offsets, xo for odd), and its
  // ldmatrix row and column.
  const bool odd = (lane >> 2) & 1;
  const unsigned short* xb = odd ? xo : xs;
  const int lrow = dwc::ldsm_row(lane), lcol = dwc::ldsm_col(lane);
  const unsigned gs_lane = smem_addr(gs) + (unsigned)((MP - 1 - lrow) * GP + lcol) * 2;

  int b = w0 / tiles, t = w0 - b * tiles, ty = t / p.tiles_w, tx = t - ty * p.tiles_w;  // unit w0's (b, tile)
#pragma unroll 1
  for (int wu = w0; wu < w1; ++wu) {
    const long long o0y = (long long)ty * TH, o0x = (long long)tx * TW;
    const unsigned short* __restrict__ gp = dy + dwc::plane_off(gst, b, c);
    const unsigned short* __restrict__ xp = x + dwc::plane_off(xst, b, c);
    __syncthreads();  // the previous unit's reads are done
    for (int e = tid; e < TH * TW; e += NTH) {
      const int i = e / TW, j = e - i * TW;
      const long long oy = o0y + i, ox = o0x + j;
      unsigned short v = 0;
      if (oy < p.Ho && ox < p.Wo) v = __ldg(gp + oy * gst[2] + ox * gst[3]);
      gs[(MP - 1 + i) * GP + j] = v;
      dbsum += to_f32(T{v});  // each thread its own elements, in order
    }
    const long long gy0 = o0y - p.ph, gx0 = o0x - p.pw;
    for (int e = tid; e < XR * XP; e += NTH) {
      const int r = e / XP, cc = e - r * XP;
      const long long gi = gy0 + r, gj = gx0 + cc;
      const bool in0 = gi >= 0 && gi < p.H && gj >= 0 && gj < p.W, in1 = gi >= 0 && gi < p.H && gj + 1 >= 0 && gj + 1 < p.W;
      const unsigned short* q = xp + gi * xst[2] + gj * xst[3];
      xs[e] = in0 ? __ldg(q) : (unsigned short)0;
      xo[e] = (cc + 1 < XP && in1) ? __ldg(q + xst[3]) : (unsigned short)0;
    }
    __syncthreads();
    if (++tx == p.tiles_w) {  // the next unit, without a division
      tx = 0;
      if (++ty == p.tiles_h) ty = 0, ++b;
    }

#pragma unroll 1
    for (int rr = kidx; rr < XR; rr += WK) {
      const unsigned short* xrow = xb + rr * XP;
#pragma unroll 1
      for (int jb = 0; jb < JB; ++jb) {
        unsigned bw[NVW][2];
#pragma unroll
        for (int bb = 0; bb < NVW; ++bb)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int o = dwc::wgrad_mma_b_offset(jb, nv0 + bb * WV, lane, r) - (odd ? 1 : 0);
            bw[bb][r] = *reinterpret_cast<const unsigned*>(xrow + o);
          }
#pragma unroll
        for (int a = 0; a < MUW; ++a) {
          const int mu = mu0 + a * WU;
          if (mu >= MU || !dwc::wgrad_mma_live(rr, mu, TH)) continue;  // warp-uniform
          unsigned av[4];
          ldsm_x4(av, gs_lane + (unsigned)((rr - 16 * mu) * GP + 16 * jb) * 2);
#pragma unroll
          for (int bb = 0; bb < NVW; ++bb)
            if (nv0 + bb * WV < NV) mma16<T>(acc[a][bb], av, bw[bb][0], bw[bb][1]);
        }
      }
    }
  }

  // The ksplit sums in order, then this chunk's partial of every tap (and dbias).
  __syncthreads();
#pragma unroll
  for (int a = 0; a < MUW; ++a)
#pragma unroll
    for (int bb = 0; bb < NVW; ++bb) {
      const int mu = mu0 + a * WU, nv = nv0 + bb * WV;
      if (mu >= MU || nv >= NV) continue;
#pragma unroll
      for (int q = 0; q < 4; ++q)
        red[(kidx * MP + 16 * mu + dwc::mma_c_row(lane, q)) * NP + 8 * nv + dwc::mma_c_col(lane, q)] = acc[a][bb][q];
    }
  dbr[tid] = dbsum;
  __syncthreads();
  for (int e = tid; e < KH * KW; e += NTH) {
    const int u = e / KW, v = e - u * KW;
    float sum = 0.f;
#pragma unroll
    for (int k = 0; k < WK; ++k) sum += red[(k * MP + u) * NP + v];
    p.partial[dwc::part_index(p.part_st, ch, c, e)] = sum;
  }
  if (tid == 0) {
    float sum = 0.f;
    for (int i = 0; i < NTH; ++i) sum += dbr[i];
    p.partial[dwc::part_index(p.part_st, ch, c, KH * KW)] = sum;
  }
}

}  // namespace lkjit
