// Depthwise convolution, register-tiled direct form with the input staged in shared memory: forward, and
// dgrad through the same walk (Cfg::dgrad): at stride 1 the forward over dy with the filter rotated 180
// degrees and the padding mirrored, at stride 2 the polyphase gather (dwconv/geometry.cuh, AxisMap).
// Any activation strides; made for NCHW, where the staging loads of a row are coalesced.
//
// One block per (b, c, output tile tile_h x tile_w); grid 1-D: blockIdx.x = (b*C + c) * tiles + tile.
// Shared memory (DirectLayout): the sub-filters, then a ring of input rows (with halo) of the tile. The
// sub-filter rows stream through the ring kc at a time; a stage loads only the rows the last one did not
// have, so every input row is read once per tile whatever kc.
// A thread owns ry x rx outputs, AxisMap::ostep() apart, that share one register window per input row:
// per row and chunk of bc sub-taps it loads (rx-1)*estep + bc inputs and does ry*rx*bc FMAs; the weights
// are float4 broadcasts. Accumulation in fp32; bias (forward) optional.
#pragma once
#include "dwconv/common.cuh"

namespace lkjit {

namespace dwc {

// acc += the terms of window row m of a register tile (dwconv_direct) through sub-taps [b0, b0 + N): the row's
// window entries [b0, b0 + (rx-1)*estep + N) (float4 loads where dense), then N taps of each output row i
// whose sub-tap a = m - i*estep lies in the stage's [a0, a1) (float4 weight broadcasts).
template <class Cfg, int kMode, int N>
__device__ __forceinline__ void direct_chunk(float (&acc)[Cfg::ry][Cfg::rx], const float* __restrict__ row,
                                             const float* __restrict__ wsub, int m, int a0, int a1, int b0) {
  constexpr DirectLayout L = direct_layout(kMode, Cfg::kh, Cfg::kw, Cfg::stride, Cfg::dil, Cfg::tile_h, Cfg::tile_w,
                                           Cfg::ry, Cfg::rx, Cfg::kc);
  constexpr int RY = Cfg::ry, RX = Cfg::rx, EY = L.ay.estep(), EX = L.ax.estep(), DDX = L.ax.dd(), NAXP = L.naxp();
  constexpr int USED = (RX - 1) * EX + N;
  float win[(USED + 3) / 4 * 4];
  if constexpr (L.vec()) {
#pragma unroll
    for (int q = 0; q < USED; q += 4) {
      const float4 v4 = *reinterpret_cast<const float4*>(row + b0 + q);
      win[q] = v4.x, win[q + 1] = v4.y, win[q + 2] = v4.z, win[q + 3] = v4.w;
    }
  } else {
#pragma unroll
    for (int q = 0; q < USED; ++q) win[q] = row[DDX * (b0 + q)];
  }
#pragma unroll
  for (int i = 0; i < RY; ++i) {
    const int a = m - i * EY;
    if (a < a0 || a >= a1) continue;
    const float* __restrict__ wr = wsub + a * NAXP + b0;
#pragma unroll
    for (int q = 0; q < N; q += 4) {
      const float4 w4 = *reinterpret_cast<const float4*>(wr + q);
      const float wv[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
      for (int qq = 0; qq < 4 && q + qq < N; ++qq)
#pragma unroll
        for (int j = 0; j < RX; ++j) acc[i][j] = fmaf(wv[qq], win[j * EX + q + qq], acc[i][j]);
    }
  }
}

}  // namespace dwc

template <class Cfg>
__device__ __forceinline__ void dwconv_direct(const DWConvParams& p) {
  using T = typename Cfg::T;
  constexpr int kMode = !Cfg::dgrad ? dwc::kFwd : Cfg::stride == 1 ? dwc::kFlip : dwc::kGather;
  constexpr dwc::DirectLayout L = dwc::direct_layout(kMode, Cfg::kh, Cfg::kw, Cfg::stride, Cfg::dil, Cfg::tile_h,
                                                     Cfg::tile_w, Cfg::ry, Cfg::rx, Cfg::kc);
  static_assert(L.valid(), "tile_h must be a multiple of ry*ostep, tile_w of rx*ostep, 1 <= kc <= sub-filter rows");
  constexpr int KH = Cfg::kh, KW = Cfg::kw, TH = Cfg::tile_h, TW = Cfg::tile_w, RY = Cfg::ry, RX = Cfg::rx;
  constexpr int NT = Cfg::threads, KC = Cfg::kc;
  constexpr int NAY = L.nay(), NAX = L.nax(), NAXP = L.naxp(), RING = L.ring(), COLS = L.cols(), PITCH = L.pitch();
  constexpr int EY = L.ay.estep(), DDY = L.ay.dd();
  constexpr int OSY = L.ay.ostep(), OSX = L.ax.ostep(), CX = L.ax.classes();
  constexpr int ITEMS = L.items(), NI = dwc::cdiv(ITEMS, NT), IX = TW / RX, BC = L.bc();
  constexpr int FULL = NAX / BC * BC, TAIL = NAX - FULL;

  extern __shared__ __align__(16) float smem[];
  float* ws = smem;                    // (classes, NAY, NAXP) sub-filters
  float* ring = smem + L.ws_floats();  // (RING, PITCH) input rows

  const dwc::AxisMap ay{kMode, KH, Cfg::stride, Cfg::dil, p.ph}, ax{kMode, KW, Cfg::stride, Cfg::dil, p.pw};
  const int Hin = Cfg::dgrad ? p.Ho : p.H, Win = Cfg::dgrad ? p.Wo : p.W;
  const int Hout = Cfg::dgrad ? p.H : p.Ho, Wout = Cfg::dgrad ? p.W : p.Wo;
  const long long* ist = Cfg::dgrad ? p.dy_st : p.x_st;
  const long long* ost = Cfg::dgrad ? p.dx_st : p.y_st;

  const int tiles = p.tiles_h * p.tiles_w, tid = threadIdx.x;
  const int plane = (int)(blockIdx.x / (unsigned)tiles), t = (int)(blockIdx.x - (unsigned)plane * tiles);
  const int b = plane / p.C, c = plane - b * p.C;  // 32-bit: the generator keeps the grid below 2^31
  const long long o0y = (long long)(t / p.tiles_w) * TH, o0x = (long long)(t % p.tiles_w) * TW;
  const T* __restrict__ in = static_cast<const T*>(Cfg::dgrad ? p.dy : (const void*)p.x) + dwc::plane_off(ist, b, c);
  T* __restrict__ out = static_cast<T*>(Cfg::dgrad ? p.dx : p.y) + dwc::plane_off(ost, b, c);

  // Sub-filters: class (ry, rx) row a column b is forward tap (ay.tap(ry, a), ax.tap(rx, b)); zero where
  // that term does not exist (gather) and in the row padding.
  const float* __restrict__ wc = p.w + (long long)c * KH * KW;
  for (int e = tid; e < L.ws_floats(); e += NT) {
    const int cls = e / (NAY * NAXP), r = e - cls * (NAY * NAXP), a = r / NAXP, bb = r - a * NAXP;
    const int u = ay.tap(cls / CX, a), v = ax.tap(cls % CX, bb);
    ws[e] = (bb < NAX && u >= 0 && v >= 0) ? __ldg(wc + u * KW + v) : 0.f;
  }

  // Input rows [r0, r1) relative to row_lo, each COLS columns from col_lo, zero outside the input.
  const long long row_lo = ay.span_lo(o0y, TH, 0), col_lo = ax.span_lo(o0x, TW, 0);
  auto stage_rows = [&](int r0, int r1) {
    const int n = (r1 - r0) * COLS;
    for (int e = tid; e < n; e += NT) {
      const int rr = e / COLS, cc = e - rr * COLS, r = r0 + rr;
      const long long gi = row_lo + r, gj = col_lo + cc;
      float v = 0.f;
      if (gi >= 0 && gi < Hin && gj >= 0 && gj < Win) v = ldg_f32(in + gi * ist[2] + gj * ist[3]);
      ring[(r % RING) * PITCH + cc] = v;
    }
  };

  const float bias = (!Cfg::dgrad && p.bias) ? __ldg(p.bias + c) : 0.f;
  float acc[NI][RY][RX];
#pragma unroll
  for (int ni = 0; ni < NI; ++ni)
#pragma unroll
    for (int i = 0; i < RY; ++i)
#pragma unroll
      for (int j = 0; j < RX; ++j) acc[ni][i][j] = bias;

  int loaded = 0;  // rows [0, loaded) have been staged
#pragma unroll 1
  for (int stage = 0; stage < L.stages(); ++stage) {
    const dwc::RingStage st = dwc::ring_stage(ay, o0y, TH, KC, stage);
    const int a0 = st.a0, a1 = st.a1;
    if (stage > 0) __syncthreads();  // every read of the rows about to be replaced is done
    stage_rows(loaded > st.lo ? loaded : st.lo, st.hi);
    loaded = st.hi;
    __syncthreads();

#pragma unroll
    for (int ni = 0; ni < NI; ++ni) {
      const int item = tid + ni * NT;
      if (ITEMS % NT != 0 && item >= ITEMS) break;
      const int iy = item / IX, ix = item - iy * IX;
      const long long ofy = ay.first_out(o0y, iy, RY), ofx = ax.first_out(o0x, ix, RX);
      const float* __restrict__ wsub = ws + (ay.cls(ofy) * CX + ax.cls(ofx)) * (NAY * NAXP);
      const int roff = (int)(ay.base(ofy) - row_lo);
      const float* __restrict__ colp = ring + (ax.base(ofx) - col_lo);
      // Window row m = ry*EY + a: sub-tap a of output row ry. All threads walk the same m, so the validity
      // tests in dwc::direct_chunk are warp-uniform. Full chunks of BC sub-taps run as a loop (unrolled, the
      // whole row's loads would be issued first, their values all live), the tail chunk unrolled.
#pragma unroll 1
      for (int m = a0; m < (RY - 1) * EY + a1; ++m) {
        const float* __restrict__ row = colp + ((roff + DDY * m) % RING) * PITCH;
#pragma unroll 1
        for (int b0 = 0; b0 < FULL; b0 += BC)
          dwc::direct_chunk<Cfg, kMode, BC>(acc[ni], row, wsub, m, a0, a1, b0);
        if constexpr (TAIL > 0) dwc::direct_chunk<Cfg, kMode, TAIL>(acc[ni], row, wsub, m, a0, a1, FULL);
      }
    }
  }

  // Outputs: rx adjacent columns in one store where they are dense, aligned and inside the image.
  constexpr int kOutBytes = RX * (int)sizeof(T);
  constexpr bool kOutVec = OSX == 1 && RX > 1 && (kOutBytes == 4 || kOutBytes == 8 || kOutBytes % 16 == 0);
#pragma unroll
  for (int ni = 0; ni < NI; ++ni) {
    const int item = tid + ni * NT;
    if (ITEMS % NT != 0 && item >= ITEMS) break;
    const int iy = item / IX, ix = item - iy * IX;
    const long long ofy = ay.first_out(o0y, iy, RY), ofx = ax.first_out(o0x, ix, RX);
#pragma unroll
    for (int i = 0; i < RY; ++i) {
      const long long oy = ofy + (long long)i * OSY;
      if (oy >= Hout) break;
      T* __restrict__ orow = out + oy * ost[2];
      if constexpr (kOutVec) {
        if (ost[3] == 1 && ofx + RX <= Wout && dwc::aligned_to(orow + ofx, kOutBytes < 16 ? kOutBytes : 16)) {
          dwc::stg_vec<RX>(orow + ofx, acc[ni][i]);
          continue;
        }
      }
#pragma unroll
      for (int j = 0; j < RX; ++j) {
        const long long ox = ofx + (long long)j * OSX;
        if (ox < Wout) orow[ox * ost[3]] = from_f32<T>(acc[ni][i][j]);
      }
    }
  }
}

}  // namespace lkjit
