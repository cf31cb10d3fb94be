// Depthwise convolution, channel-vectorised for channels_last (NHWC) activations: forward, and dgrad
// through the same walk (Cfg::dgrad; rotated filter at stride 1, polyphase gather at stride 2, as in
// direct.cuh). Consecutive lanes take consecutive channel vectors of cv channels, so every activation
// access of a warp is one contiguous run of cl*cv elements (4-16 bytes a lane); any other strides work
// too, element by element.
//
// One block per (b, output tile tile_h x tile_w, cb = cl*cv channels); grid 1-D:
// blockIdx.x = ((b * tiles) + tile) * cgroups + channel group, so blocks next to each other in the grid
// read adjacent channel groups of the same pixels.
// Threads: tid = group * cl + lane; lane -> channels c0 .. c0+cv-1, group -> register tiles of the output
// tile (ry x rx outputs, AxisMap::ostep() apart, as in direct.cuh). Inputs come straight from global memory
// (L1) into a register window per input row; the sub-filters of the block's channels sit in shared memory,
// channel innermost (NhwcLayout), read as one cv-float vector per tap.
#pragma once
#include "dwconv/common.cuh"

namespace lkjit {

namespace dwc {

// Runtime state of a thread of dwconv_nhwc (the item loop's arguments).
template <class T, int CV>
struct NhwcCtx {
  AxisMap ay, ax;
  int Hin, Win, Hout, Wout;
  const long long* ist;
  const long long* ost;
  const T* in;  // (b, c0) of the input
  T* out;       // (b, c0) of the output
  long long o0y, o0x;
  int c0, C, group;
  bool vout;
  const float* wl;  // the lane's first weight: ws + lane*cv
  float bias[CV];
};

// cv channels from q (channel stride cst): one vector load, or element loads with the channel-count test.
template <bool kVec, int CV, class T>
__device__ __forceinline__ void nhwc_load(const T* q, float (&v)[CV], int c0, int C, long long cst) {
  if constexpr (kVec) {
    ldg_vec<CV>(q, v);
  } else {
#pragma unroll
    for (int k = 0; k < CV; ++k) v[k] = c0 + k < C ? ldg_f32(q + k * cst) : 0.f;
  }
}

// acc += the terms of window row m of one item through sub-taps [b0, b0 + N) (dwconv_nhwc): the row's window
// entries [b0, b0 + (RX-1)*EX + N) from pq on, then N taps of each output row i with a = m - i*EY in range.
// kChecked: entries outside [lo, hi) are zero (columns outside the input), tested per load.
template <class Cfg, int kMode, int N, bool kVin, bool kChecked, class T, int CV>
__device__ __forceinline__ void nhwc_chunk(float (&acc)[Cfg::ry][Cfg::rx][CV], const T* __restrict__ pq, int m, int b0,
                                           int lo, int hi, const float* __restrict__ wsub, const NhwcCtx<T, CV>& x) {
  constexpr NhwcLayout L = nhwc_layout(kMode, Cfg::kh, Cfg::kw, Cfg::stride, Cfg::dil, Cfg::tile_h, Cfg::tile_w,
                                       Cfg::ry, Cfg::rx, Cfg::cl, Cfg::cv);
  constexpr int RY = Cfg::ry, RX = Cfg::rx, CBP = L.cbp(), NAY = L.nay(), NAX = L.nax(), EY = L.ay.estep();
  constexpr int EX = L.ax.estep(), DDX = L.ax.dd(), USED = (RX - 1) * EX + N;
  const long long xstep = DDX * x.ist[3];
  float win[USED][CV];
#pragma unroll
  for (int q = 0; q < USED; ++q, pq += xstep) {
    if (!kChecked || (b0 + q >= lo && b0 + q < hi)) {
      nhwc_load<kVin>(pq, win[q], x.c0, x.C, x.ist[1]);
    } else {
#pragma unroll
      for (int k = 0; k < CV; ++k) win[q][k] = 0.f;
    }
  }
#pragma unroll
  for (int i = 0; i < RY; ++i) {
    const int a = m - i * EY;
    if (a < 0 || a >= NAY) continue;
    const float* __restrict__ wr = wsub + (a * NAX + b0) * CBP;
#pragma unroll
    for (int q = 0; q < N; ++q) {
      float wv[CV];
      lds_vec<CV>(wr + q * CBP, wv);
#pragma unroll
      for (int j = 0; j < RX; ++j)
#pragma unroll
        for (int k = 0; k < CV; ++k) acc[i][j][k] = fmaf(wv[k], win[j * EX + q][k], acc[i][j][k]);
    }
  }
}

// acc += the item's terms (dwconv_nhwc): window rows m = i*EY + a. The full chunks of bc sub-taps run as a loop,
// not unrolled: unrolled, the compiler issues every load of the row first and keeps each one's 64-bit address
// and value live, ~3 registers a tap (226 at 63 taps); the tail chunk is unrolled.
template <class Cfg, int kMode, bool kVin, bool kChecked, class T, int CV>
__device__ __forceinline__ void nhwc_accumulate(float (&acc)[Cfg::ry][Cfg::rx][CV], const T* __restrict__ xcol,
                                                long long iby, int qlo, int qhi, const float* __restrict__ wsub,
                                                const NhwcCtx<T, CV>& x) {
  constexpr NhwcLayout L = nhwc_layout(kMode, Cfg::kh, Cfg::kw, Cfg::stride, Cfg::dil, Cfg::tile_h, Cfg::tile_w,
                                       Cfg::ry, Cfg::rx, Cfg::cl, Cfg::cv);
  constexpr int RY = Cfg::ry, NAY = L.nay(), NAX = L.nax(), EY = L.ay.estep(), DDY = L.ay.dd(), DDX = L.ax.dd();
  constexpr int BC = L.bc(), FULL = NAX / BC * BC, TAIL = NAX - FULL;
  const long long xstep = DDX * x.ist[3];
#pragma unroll 1
  for (int m = 0; m < (RY - 1) * EY + NAY; ++m) {
    const long long gi = iby + (long long)DDY * m;
    if (gi < 0 || gi >= x.Hin) continue;  // a zero row: no terms
    const T* __restrict__ pq = xcol + gi * x.ist[2];
#pragma unroll 1
    for (int b0 = 0; b0 < FULL; b0 += BC, pq += BC * xstep)
      nhwc_chunk<Cfg, kMode, BC, kVin, kChecked>(acc, pq, m, b0, qlo, qhi, wsub, x);
    if constexpr (TAIL > 0) nhwc_chunk<Cfg, kMode, TAIL, kVin, kChecked>(acc, pq, m, FULL, qlo, qhi, wsub, x);
  }
}

template <class Cfg, int kMode, bool kVin, class T, int CV>
__device__ __forceinline__ void nhwc_items(const NhwcCtx<T, CV>& x) {
  constexpr NhwcLayout L = nhwc_layout(kMode, Cfg::kh, Cfg::kw, Cfg::stride, Cfg::dil, Cfg::tile_h, Cfg::tile_w,
                                       Cfg::ry, Cfg::rx, Cfg::cl, Cfg::cv);
  constexpr int TW = Cfg::tile_w, RY = Cfg::ry, RX = Cfg::rx, CBP = L.cbp(), SG = Cfg::threads / Cfg::cl;
  constexpr int NAY = L.nay(), NAX = L.nax(), EX = L.ax.estep(), DDX = L.ax.dd();
  constexpr int OSY = L.ay.ostep(), OSX = L.ax.ostep(), CX = L.ax.classes();
  constexpr int ITEMS = L.items(), IX = TW / RX, SPAN = (RX - 1) * EX + NAX;  // window entries of an item row
  constexpr int kVecBytes = CV * (int)sizeof(T);
  constexpr bool kCanVec = CV > 1 && (kVecBytes == 4 || kVecBytes == 8 || kVecBytes % 16 == 0);
  const AxisMap& ay = x.ay;
  const AxisMap& ax = x.ax;
  const long long* ist = x.ist;
  const long long* ost = x.ost;
  const int c0 = x.c0, C = x.C, Win = x.Win, Hout = x.Hout, Wout = x.Wout;
  T* __restrict__ out = x.out;
#pragma unroll 1
  for (int item = x.group; item < ITEMS; item += SG) {
    const int iy = item / IX, ix = item - iy * IX;
    const long long ofy = ay.first_out(x.o0y, iy, RY), ofx = ax.first_out(x.o0x, ix, RX);
    const float* __restrict__ wsub = x.wl + (ay.cls(ofy) * CX + ax.cls(ofx)) * (NAY * NAX * CBP);
    const long long iby = ay.base(ofy), ibx = ax.base(ofx);
    // Window entries q (input column ibx + DDX*q) inside the input: [qlo, qhi), once per item.
    const int qlo = ibx >= 0 ? 0 : (int)((-ibx + DDX - 1) / DDX);
    const int qhi = ibx >= Win ? 0 : (int)((Win - ibx + DDX - 1) / DDX);
    float acc[RY][RX][CV];
#pragma unroll
    for (int i = 0; i < RY; ++i)
#pragma unroll
      for (int j = 0; j < RX; ++j)
#pragma unroll
        for (int k = 0; k < CV; ++k) acc[i][j][k] = x.bias[k];
    const T* __restrict__ xcol = x.in + ibx * ist[3];
    if (qlo == 0 && qhi >= SPAN) nhwc_accumulate<Cfg, kMode, kVin, false>(acc, xcol, iby, qlo, qhi, wsub, x);
    else nhwc_accumulate<Cfg, kMode, kVin, true>(acc, xcol, iby, qlo, qhi, wsub, x);

#pragma unroll
    for (int i = 0; i < RY; ++i) {
      const long long oy = ofy + (long long)i * OSY;
      if (oy >= Hout) break;
#pragma unroll
      for (int j = 0; j < RX; ++j) {
        const long long ox = ofx + (long long)j * OSX;
        if (ox >= Wout) break;
        T* __restrict__ o = out + oy * ost[2] + ox * ost[3];
        if constexpr (kCanVec) {
          if (x.vout) {
            dwc::stg_vec<CV>(o, acc[i][j]);
            continue;
          }
        }
#pragma unroll
        for (int k = 0; k < CV; ++k)
          if (c0 + k < C) o[k * ost[1]] = from_f32<T>(acc[i][j][k]);
      }
    }
  }
}

}  // namespace dwc

template <class Cfg>
__device__ __forceinline__ void dwconv_nhwc(const DWConvParams& p) {
  using T = typename Cfg::T;
  constexpr int kMode = !Cfg::dgrad ? dwc::kFwd : Cfg::stride == 1 ? dwc::kFlip : dwc::kGather;
  constexpr dwc::NhwcLayout L = dwc::nhwc_layout(kMode, Cfg::kh, Cfg::kw, Cfg::stride, Cfg::dil, Cfg::tile_h,
                                                 Cfg::tile_w, Cfg::ry, Cfg::rx, Cfg::cl, Cfg::cv);
  static_assert(L.valid(), "tile_h must be a multiple of ry*ostep, tile_w of rx*ostep");
  constexpr int KH = Cfg::kh, KW = Cfg::kw, TH = Cfg::tile_h, TW = Cfg::tile_w;
  constexpr int NT = Cfg::threads, CL = Cfg::cl, CV = Cfg::cv, CB = CL * CV, CBP = L.cbp();
  static_assert(NT % CL == 0, "threads must be a multiple of the channel lanes");
  constexpr int NAY = L.nay(), NAX = L.nax(), CX = L.ax.classes(), TAPS = L.classes() * NAY * NAX;
  constexpr int kVecBytes = CV * (int)sizeof(T);
  constexpr bool kCanVec = CV > 1 && (kVecBytes == 4 || kVecBytes == 8 || kVecBytes % 16 == 0);

  extern __shared__ __align__(16) float smem[];
  float* ws = smem;  // (classes, NAY, NAX, CBP)

  const dwc::AxisMap ay{kMode, KH, Cfg::stride, Cfg::dil, p.ph}, ax{kMode, KW, Cfg::stride, Cfg::dil, p.pw};
  const int Hin = Cfg::dgrad ? p.Ho : p.H, Win = Cfg::dgrad ? p.Wo : p.W;
  const int Hout = Cfg::dgrad ? p.H : p.Ho, Wout = Cfg::dgrad ? p.W : p.Wo;
  const long long* ist = Cfg::dgrad ? p.dy_st : p.x_st;
  const long long* ost = Cfg::dgrad ? p.dx_st : p.y_st;

  const int C = p.C, cgroups = (C + CB - 1) / CB, tiles = p.tiles_h * p.tiles_w, tid = threadIdx.x;
  const int rest = (int)(blockIdx.x / (unsigned)cgroups), cg = (int)(blockIdx.x - (unsigned)rest * cgroups);
  const int b = rest / tiles, t = rest - b * tiles;  // 32-bit: the generator keeps the grid below 2^31
  const long long o0y = (long long)(t / p.tiles_w) * TH, o0x = (long long)(t % p.tiles_w) * TW;
  const int cbase = cg * CB;

  // Sub-filters of the block's channels, taps innermost in the loop (contiguous global reads).
  for (int e = tid; e < TAPS * CB; e += NT) {
    const int cb = e / TAPS, tp = e - cb * TAPS, cls = tp / (NAY * NAX), r = tp - cls * (NAY * NAX);
    const int a = r / NAX, bb = r - a * NAX, c = cbase + cb;
    const int u = ay.tap(cls / CX, a), v = ax.tap(cls % CX, bb);
    ws[tp * CBP + cb] = (c < C && u >= 0 && v >= 0) ? __ldg(p.w + ((long long)c * KH + u) * KW + v) : 0.f;
  }
  __syncthreads();

  const int lane = tid % CL, group = tid / CL, c0 = cbase + lane * CV;
  if (c0 >= C) return;  // no barrier below
  const T* __restrict__ in = static_cast<const T*>(Cfg::dgrad ? p.dy : (const void*)p.x) + dwc::plane_off(ist, b, c0);
  T* __restrict__ out = static_cast<T*>(Cfg::dgrad ? p.dx : p.y) + dwc::plane_off(ost, b, c0);
  // A channel vector is one load where it is dense and aligned: unit channel stride, the other strides and the
  // pointer multiples of the vector, and all cv channels present.
  const bool full = c0 + CV <= C;
  const bool vin = kCanVec && full && ist[1] == 1 && ist[0] % CV == 0 && ist[2] % CV == 0 && ist[3] % CV == 0 &&
                   dwc::aligned_to(in, kVecBytes < 16 ? kVecBytes : 16);
  const bool vout = kCanVec && full && ost[1] == 1 && ost[0] % CV == 0 && ost[2] % CV == 0 && ost[3] % CV == 0 &&
                    dwc::aligned_to(out, kVecBytes < 16 ? kVecBytes : 16);
  dwc::NhwcCtx<T, CV> cx{ay, ax, Hin, Win, Hout, Wout, ist, ost, in, out, o0y, o0x, c0, C, group, vout,
                         ws + lane * CV, {}};
#pragma unroll
  for (int k = 0; k < CV; ++k) cx.bias[k] = (!Cfg::dgrad && p.bias && c0 + k < C) ? __ldg(p.bias + c0 + k) : 0.f;
  // The item loop twice, with dense vector loads or element ones: the choice is per thread, and a test
  // per load inside the loop would cost as much as the load.
  if (vin) dwc::nhwc_items<Cfg, kMode, kCanVec>(cx);
  else dwc::nhwc_items<Cfg, kMode, false>(cx);
}

}  // namespace lkjit
