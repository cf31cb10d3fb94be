// Depthwise convolution wgrad + dbias for channels_last (NHWC) activations, channel-vectorised, per-block
// partials (the sums of wgrad_direct.cuh, another order of work):
//   dw[c,u,v] = sum_{b,i,j} dy[b,c,i,j] * x[b, c, i*s + u*d - ph, j*s + v*d - pw],  dbias[c] = sum dy[b,c,i,j]
//
// One block per (channel group of cb = cl*cv channels, chunk ch of the (b, dy row) pairs; geometry.cuh
// chunk_begin); grid 1-D: blockIdx.x = ch * cgroups + channel group. Lanes take consecutive channel
// vectors (every access of a warp one contiguous run); the threads / cl groups share out the tasks, a task
// being one tap row u and vc consecutive taps of it. A thread sums its task's vc x cv taps over the chunk
// in registers: per dy row, the columns in phases j = phase + jj*ostep, so that jb consecutive columns of a
// phase meet one dense register window of x (WgradNhwcLayout::win) and the loads per FMA stay at
// (jb + window) / (jb * vc * cv). Task 0 also sums dbias. The block writes its partials channel
// innermost (coalesced); no shared memory, no atomics, the same bits every run.
// x is read once per task through L1/L2: kh * ceil(kw / vc) times for the whole pass, never k^2.
#pragma once
#include "dwconv/common.cuh"

namespace lkjit {
namespace dwc {

// cv channels from q (channel stride cst): one vector load, or element loads with the channel-count test.
template <bool kVec, int CV, class T>
__device__ __forceinline__ void wg_load(const T* q, float (&v)[CV], int c0, int C, long long cst) {
  if constexpr (kVec) {
    ldg_vec<CV>(q, v);
  } else {
#pragma unroll
    for (int k = 0; k < CV; ++k) v[k] = c0 + k < C ? ldg_f32(q + k * cst) : 0.f;
  }
}

template <class Cfg, bool kVec>
__device__ __forceinline__ void wgrad_nhwc_tasks(const DWConvParams& p, int c0, int group, int w0, int w1, int ch) {
  using T = typename Cfg::T;
  constexpr int KH = Cfg::kh, KW = Cfg::kw, S = Cfg::stride, D = Cfg::dil, CV = Cfg::cv, VC = Cfg::vc;
  constexpr WgradNhwcLayout L = wgrad_nhwc_layout(KH, KW, S, D, Cfg::cl, CV, VC, Cfg::threads);
  constexpr int NVC = L.nvc(), TASKS = L.tasks(), TG = L.groups(), JB = L.jb(), WIN = L.win();
  constexpr int E = L.ax.estep(), P = L.ax.ostep(), TAPS = KH * KW;
  const AxisMap ax{kFwd, KW, S, D, p.pw};
  const int C = p.C, H = p.H, W = p.W, Ho = p.Ho, Wo = p.Wo;
  const T* __restrict__ x = static_cast<const T*>(p.x);
  const T* __restrict__ dy = static_cast<const T*>(p.dy);
  const long long* xst = p.x_st;
  const long long* gst = p.dy_st;

#pragma unroll 1
  for (int task = group; task < TASKS; task += TG) {
    const int u = task / NVC, vb = (task - u * NVC) * VC, nv = KW - vb < VC ? KW - vb : VC;
    float acc[VC][CV], db[CV];
#pragma unroll
    for (int k = 0; k < CV; ++k) {
      db[k] = 0.f;
#pragma unroll
      for (int v = 0; v < VC; ++v) acc[v][k] = 0.f;
    }
    int b = w0 / Ho, i = w0 - b * Ho - 1;  // unit w0's (b, dy row), advanced at the top of the loop
#pragma unroll 1
    for (int wu = w0; wu < w1; ++wu) {
      if (++i == Ho) i = 0, ++b;
      const T* __restrict__ grow = dy + plane_off(gst, b, c0) + (long long)i * gst[2];
      const long long R = (long long)i * S - p.ph + (long long)u * D;
      if (R < 0 || R >= H) {  // no x row: no wgrad terms, only dbias's
        if (task == 0) {
#pragma unroll 1
          for (int j = 0; j < Wo; ++j) {
            float g[CV];
            wg_load<kVec>(grow + j * gst[3], g, c0, C, gst[1]);
#pragma unroll
            for (int k = 0; k < CV; ++k) db[k] += g[k];
          }
        }
        continue;
      }
      const T* __restrict__ xrow = x + plane_off(xst, b, c0) + R * xst[2];
#pragma unroll 1
      for (int ph = 0; ph < P; ++ph) {
        // Columns j = ph + jj*P; x column of (jj, v) = xb + D*m, window index m = jj*E + v - vb, inside the
        // row for m in [lo, hi). A block of JB columns whose window lies inside loads without tests; columns
        // past the row's last (the last block's tail) get dy = 0, so their terms vanish.
        const int nj = ph < Wo ? (Wo - ph + P - 1) / P : 0;
        const long long xb = ax.base(ph) + (long long)vb * D;
        const int lo = xb >= 0 ? 0 : (int)((-xb + D - 1) / D), hi = xb >= W ? 0 : (int)((W - xb + D - 1) / D);
        const long long xstep = (long long)D * xst[3], gstep = (long long)P * gst[3];
        const T* __restrict__ gq = grow + (long long)ph * gst[3];
#pragma unroll 1
        for (int J = 0; J < nj; J += JB) {
          const int m0 = J * E;
          const T* __restrict__ xq = xrow + (xb + (long long)D * m0) * xst[3];
          float win[WIN][CV];
          if (m0 >= lo && m0 + WIN <= hi) {
#pragma unroll
            for (int q = 0; q < WIN; ++q, xq += xstep) wg_load<kVec>(xq, win[q], c0, C, xst[1]);
          } else {
#pragma unroll
            for (int q = 0; q < WIN; ++q, xq += xstep) {
              if (m0 + q >= lo && m0 + q < hi) {
                wg_load<kVec>(xq, win[q], c0, C, xst[1]);
              } else {
#pragma unroll
                for (int k = 0; k < CV; ++k) win[q][k] = 0.f;
              }
            }
          }
#pragma unroll
          for (int jj = 0; jj < JB; ++jj, gq += gstep) {
            float g[CV];
            if (J + jj < nj) {
              wg_load<kVec>(gq, g, c0, C, gst[1]);
            } else {
#pragma unroll
              for (int k = 0; k < CV; ++k) g[k] = 0.f;
            }
#pragma unroll
            for (int k = 0; k < CV; ++k) db[k] += g[k];  // used by task 0 only; cheaper than a test
#pragma unroll
            for (int v = 0; v < VC; ++v)
#pragma unroll
              for (int k = 0; k < CV; ++k) acc[v][k] = fmaf(g[k], win[jj * E + v][k], acc[v][k]);
          }
        }
      }
    }
#pragma unroll
    for (int v = 0; v < VC; ++v) {
      if (v >= nv) break;
#pragma unroll
      for (int k = 0; k < CV; ++k)
        if (c0 + k < C) p.partial[part_index(p.part_st, ch, c0 + k, u * KW + vb + v)] = acc[v][k];
    }
    if (task == 0) {
#pragma unroll
      for (int k = 0; k < CV; ++k)
        if (c0 + k < C) p.partial[part_index(p.part_st, ch, c0 + k, TAPS)] = db[k];
    }
  }
}

}  // namespace dwc

template <class Cfg>
__device__ __forceinline__ void dwconv_wgrad_nhwc(const DWConvParams& p) {
  using T = typename Cfg::T;
  constexpr int CL = Cfg::cl, CV = Cfg::cv, CB = CL * CV, NT = Cfg::threads;
  constexpr dwc::WgradNhwcLayout L =
      dwc::wgrad_nhwc_layout(Cfg::kh, Cfg::kw, Cfg::stride, Cfg::dil, CL, CV, Cfg::vc, NT);
  static_assert(L.valid(), "threads a multiple of the channel lanes, 1 <= vc <= kw");
  constexpr int kVecBytes = CV * (int)sizeof(T);
  constexpr bool kCanVec = CV > 1 && (kVecBytes == 4 || kVecBytes == 8 || kVecBytes % 16 == 0);

  const int C = p.C, cgroups = (C + CB - 1) / CB, tid = threadIdx.x;
  const int ch = (int)(blockIdx.x / (unsigned)cgroups), cg = (int)(blockIdx.x - (unsigned)ch * cgroups);
  const int total = p.B * p.Ho;  // < 2^31 (generator)
  const int w0 = dwc::chunk_begin(total, p.chunks, ch), w1 = dwc::chunk_begin(total, p.chunks, ch + 1);
  const int lane = tid % CL, group = tid / CL, c0 = cg * CB + lane * CV;
  if (c0 >= C) return;
  // Dense, aligned channel vectors in both tensors: one load per vector (see dwconv_nhwc).
  const int vb = kVecBytes < 16 ? kVecBytes : 16;
  const bool vec = kCanVec && c0 + CV <= C && p.x_st[1] == 1 && p.dy_st[1] == 1 &&
                   p.x_st[0] % CV == 0 && p.x_st[2] % CV == 0 && p.x_st[3] % CV == 0 && p.dy_st[0] % CV == 0 &&
                   p.dy_st[2] % CV == 0 && p.dy_st[3] % CV == 0 &&
                   dwc::aligned_to(static_cast<const T*>(p.x) + c0, vb) && dwc::aligned_to(static_cast<const T*>(p.dy) + c0, vb);
  if (vec) dwc::wgrad_nhwc_tasks<Cfg, kCanVec>(p, c0, group, w0, w1, ch);
  else dwc::wgrad_nhwc_tasks<Cfg, false>(p, c0, group, w0, w1, ch);
}

}  // namespace lkjit
