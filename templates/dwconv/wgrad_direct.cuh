// Depthwise convolution wgrad + dbias, per-block partials (docs/dwconv.md, Backward):
//   dw[c,u,v] = sum_{b,i,j} dy[b,c,i,j] * x[b, c, i*s + u*d - ph, j*s + v*d - pw],  dbias[c] = sum dy[b,c,i,j]
// Any activation strides; made for NCHW (the staging loads of a row are coalesced).
//
// One block per (channel c, chunk ch of the channel's (b, dy tile) work units; geometry.cuh chunk_begin);
// grid 1-D: blockIdx.x = c * chunks + ch. Per unit the block stages the dy tile (tile_h x tile_w, zero past
// Ho x Wo) and the x rows and columns it meets through kc tap rows (zero padding) in shared memory, once: an
// input element is read once per tile that covers it (the halo), never once per tap.
// The taps of a stage form a grid of ru x rv register tiles ("items"); thread tid owns item tid % items and
// split tid / items of the tile's (dy row, jc columns) pairs. Per pair it holds jc dy values and, per tap
// row, one register window of (jc-1)*s + (rv-1)*d + 1 x values: ru*rv*jc FMAs for jc + ru*window loads.
// Sums stay in registers over the whole chunk; then the splits are added in split order through shared
// memory and the block writes its partial of every tap (and dbias) of the stage: no float atomics, the
// same bits every run. dwconv_wgrad_reduce adds the chunks.
#pragma once
#include "dwconv/common.cuh"

namespace lkjit {

template <class Cfg>
__device__ __forceinline__ void dwconv_wgrad_direct(const DWConvParams& p) {
  using T = typename Cfg::T;
  constexpr int KH = Cfg::kh, KW = Cfg::kw, S = Cfg::stride, D = Cfg::dil, NT = Cfg::threads;
  constexpr int TH = Cfg::tile_h, TW = Cfg::tile_w, RU = Cfg::ru, RV = Cfg::rv, KC = Cfg::kc;
  constexpr dwc::WgradDirectLayout L{KH, KW, S, D, TH, TW, RU, RV, KC, NT};
  static_assert(L.valid(), "tile_w a multiple of 4, 1 <= kc <= kh, at most `threads` register tiles of taps a stage");
  constexpr int JC = L.jc(), ITEMS = L.items(), SPLITS = L.splits(), PAIRS = L.pairs(), NVB = L.vp() / RV;
  constexpr int XROWS = L.xrows(), XCOLS = L.xcols(), XP = L.xpitch(), GP = L.gpitch(), WIN = L.win();
  constexpr int TAPS = KH * KW, JCS = TW / JC;
  constexpr bool kVec = L.vec();

  extern __shared__ __align__(16) float smem[];
  float* gs = smem;                     // (TH, GP) dy tile
  float* xs = gs + L.gs_floats();       // (XROWS, XP) x rows of the tile and stage
  float* red = xs;                      // (SPLITS, ITEMS, RU*RV) split sums, after the last tile
  float* dbr = xs + (L.xs_floats() > L.red_floats() ? L.xs_floats() : L.red_floats());  // (NT) dbias sums

  const int tid = threadIdx.x, chunks = p.chunks;
  const int c = (int)(blockIdx.x / (unsigned)chunks), ch = (int)(blockIdx.x - (unsigned)c * chunks);
  const int tiles = p.tiles_h * p.tiles_w, total = p.B * tiles;  // < 2^31 (generator)
  const int w0 = dwc::chunk_begin(total, chunks, ch), w1 = dwc::chunk_begin(total, chunks, ch + 1);
  const T* __restrict__ x = static_cast<const T*>(p.x);
  const T* __restrict__ dy = static_cast<const T*>(p.dy);
  const long long* xst = p.x_st;
  const long long* gst = p.dy_st;

  const int item = tid % ITEMS, split = tid / ITEMS;
  const int uf = (item / NVB) * RU, vf = (item % NVB) * RV;  // first tap (row within the stage, column)
  float dbsum = 0.f;

#pragma unroll 1
  for (int stage = 0; stage < L.stages(); ++stage) {
    const int u0 = stage * KC, ucount = KH - u0 < KC ? KH - u0 : KC;
    const bool live = split < SPLITS && uf < ucount;
    float acc[RU][RV];
#pragma unroll
    for (int i = 0; i < RU; ++i)
#pragma unroll
      for (int j = 0; j < RV; ++j) acc[i][j] = 0.f;

    int b = w0 / tiles, t = w0 - b * tiles, ty = t / p.tiles_w, tx = t - ty * p.tiles_w;  // unit w0's (b, tile)
#pragma unroll 1
    for (int wu = w0; wu < w1; ++wu) {
      const long long o0y = (long long)ty * TH, o0x = (long long)tx * TW;
      const T* __restrict__ gp = dy + dwc::plane_off(gst, b, c);
      const T* __restrict__ xp = x + dwc::plane_off(xst, b, c);
      __syncthreads();  // the previous unit's reads are done
      for (int e = tid; e < TH * TW; e += NT) {
        const int i = e / TW, j = e - i * TW;
        const long long oy = o0y + i, ox = o0x + j;
        const float v = (oy < p.Ho && ox < p.Wo) ? ldg_f32(gp + oy * gst[2] + ox * gst[3]) : 0.f;
        gs[i * GP + j] = v;
        if (stage == 0) dbsum += v;  // each thread its own elements, in order
      }
      const long long gy0 = o0y * S - p.ph + (long long)u0 * D, gx0 = o0x * S - p.pw;
      for (int e = tid; e < XROWS * XCOLS; e += NT) {
        const int r = e / XCOLS, cc = e - r * XCOLS;
        const long long gi = gy0 + r, gj = gx0 + cc;
        xs[r * XP + cc] = (gi >= 0 && gi < p.H && gj >= 0 && gj < p.W) ? ldg_f32(xp + gi * xst[2] + gj * xst[3]) : 0.f;
      }
      __syncthreads();
      if (++tx == p.tiles_w) {  // the next unit, without a division
        tx = 0;
        if (++ty == p.tiles_h) ty = 0, ++b;
      }

      if (live) {
#pragma unroll 1
        for (int pr = split; pr < PAIRS; pr += SPLITS) {
          const int i = pr / JCS, j0 = (pr - i * JCS) * JC;
          float g[JC];
          dwc::lds_vec<JC>(gs + i * GP + j0, g);
#pragma unroll
          for (int ru = 0; ru < RU; ++ru) {
            const float* __restrict__ xr = xs + (i * S + (uf + ru) * D) * XP + j0 * S + vf * D;
            float win[kVec ? (WIN + 3) / 4 * 4 : WIN];  // float4 loads: xr is 16-byte aligned, the row has slack
            if constexpr (kVec) {
              dwc::lds_vec<(WIN + 3) / 4 * 4>(xr, win);
            } else {
#pragma unroll
              for (int q = 0; q < WIN; ++q) win[q] = xr[q];
            }
#pragma unroll
            for (int q = 0; q < JC; ++q)
#pragma unroll
              for (int rv = 0; rv < RV; ++rv) acc[ru][rv] = fmaf(g[q], win[q * S + rv * D], acc[ru][rv]);
          }
        }
      }
    }

    // Split sums in split order, then the stage's taps (and dbias) of this chunk.
    __syncthreads();
    if (split < SPLITS) {
#pragma unroll
      for (int ru = 0; ru < RU; ++ru)
#pragma unroll
        for (int rv = 0; rv < RV; ++rv) red[(split * ITEMS + item) * (RU * RV) + ru * RV + rv] = acc[ru][rv];
    }
    if (stage == 0) dbr[tid] = dbsum;
    __syncthreads();
    for (int e = tid; e < ucount * KW; e += NT) {
      const int ul = e / KW, v = e - ul * KW;
      const int it = (ul / RU) * NVB + v / RV, k = (ul % RU) * RV + v % RV;
      float sum = 0.f;
      for (int sp = 0; sp < SPLITS; ++sp) sum += red[(sp * ITEMS + it) * (RU * RV) + k];
      p.partial[dwc::part_index(p.part_st, ch, c, (u0 + ul) * KW + v)] = sum;
    }
    if (stage == 0 && tid == 0) {
      float sum = 0.f;
      for (int i = 0; i < NT; ++i) sum += dbr[i];
      p.partial[dwc::part_index(p.part_st, ch, c, TAPS)] = sum;
    }
  }
}

}  // namespace lkjit
