// WTConv forward, plane-resident (beyond the paper; see docs: "Plane-resident fusion").
// A block owns Cfg::planes whole (b,c) planes: it reads X once, runs every level's Haar analysis and
// scaled k x k conv in shared memory, then writes out = dw(X, W~0) + b~ + closed-form synthesis
// (Eq. 7) once. Device traffic is the 2N floor. Used where the planes fit in shared memory.
//
// Shared memory per plane (fp32, zero halo of R around every image the conv reads):
//   xs  (H+2R+vpad) x (W+2R)                 the input plane
//   ya  4 x (h1+2R+vpad) x (w1+2R)           subbands of odd levels (ping)
//   yb  4 x (h2+2R+vpad) x (w2+2R)           subbands of even levels (pong), L >= 2
//   zs  sum_l 4 h_l w_l                      Z_l = conv(Y_l, W~_l), kept for the synthesis
//   ws  4 k k                                the current level's taps
// vpad = vy rows so a strip of vy outputs never reads past its image.
#pragma once
#include "wtconv/common.cuh"

namespace lkjit {

template <class Cfg>
struct FwdPlaneLayout {
  static constexpr int R = Cfg::R, K = Cfg::k, V = Cfg::vy;
  int xs_pitch, xs_size, ya_size, yb_size, zs_size, per_plane;
  __device__ FwdPlaneLayout(const WTConvParams& p) {
    xs_pitch = p.W + 2 * R;
    xs_size = (p.H + 2 * R + V) * xs_pitch;
    ya_size = Cfg::L >= 1 ? 4 * (p.lh[1] + 2 * R + V) * (p.lw[1] + 2 * R) : 0;
    yb_size = Cfg::L >= 2 ? 4 * (p.lh[2] + 2 * R + V) * (p.lw[2] + 2 * R) : 0;
    zs_size = 0;
    for (int l = 1; l <= Cfg::L; ++l) zs_size += 4 * p.lh[l] * p.lw[l];
    per_plane = xs_size + ya_size + yb_size + zs_size + 4 * K * K;
  }
};

template <class Cfg>
__device__ __forceinline__ void wtconv_fwd_plane(const WTConvParams& p) {
  using T = typename Cfg::T;
  constexpr int K = Cfg::k, R = Cfg::R, V = Cfg::vy, P = Cfg::planes, NT = Cfg::threads;
  extern __shared__ float smem[];
  const FwdPlaneLayout<Cfg> lay(p);
  const long long BC = (long long)p.B * p.C;
  const long long plane0 = (long long)blockIdx.x * P;
  const int np = (int)min((long long)P, BC - plane0);
  const int H = p.H, W = p.W, HW = H * W;
  const int tid = threadIdx.x;
  const T* __restrict__ x = static_cast<const T*>(p.x);

  auto xs = [&](int q) { return smem + q * lay.per_plane; };
  auto ya = [&](int q) { return xs(q) + lay.xs_size; };
  auto yb = [&](int q) { return ya(q) + lay.ya_size; };
  auto zs = [&](int q) { return yb(q) + lay.yb_size; };
  auto ws = [&](int q) { return zs(q) + lay.zs_size; };

  // 1. X planes -> xs with a zero halo. Padded positions are enumerated so the halo is written too.
  {
    const int prow = lay.xs_size / lay.xs_pitch;
    const int n = prow * lay.xs_pitch;
    for (int e = tid; e < np * n; e += NT) {
      const int q = e / n, r = e - q * n;
      const int i = r / lay.xs_pitch - R, j = r % lay.xs_pitch - R;
      float v = 0.f;
      if (i >= 0 && i < H && j >= 0 && j < W) v = ldg_f32(x + (plane0 + q) * HW + i * W + j);
      xs(q)[r] = v;
    }
  }
  __syncthreads();

  // 2. Levels: Haar analysis of the previous low band, then Z_l = conv(Y_l, W~_l).
  int zoff = 0;
#pragma unroll 1
  for (int l = 1; l <= Cfg::L; ++l) {
    const int h = p.lh[l], w = p.lw[l], hin = p.lh[l - 1], win = p.lw[l - 1];
    const int pitch = w + 2 * R, prow = h + 2 * R + V, img = prow * pitch;
    const int spitch = (l == 1) ? lay.xs_pitch : (p.lw[l - 1] + 2 * R);
    const int simg = (l == 1) ? 0 : (p.lh[l - 1] + 2 * R + V) * spitch;
    (void)simg;
    for (int e = tid; e < np * img; e += NT) {
      const int q = e / img, r = e - q * img;
      const int i = r / pitch - R, j = r % pitch - R;
      float y[4] = {0.f, 0.f, 0.f, 0.f};
      if (i >= 0 && i < h && j >= 0 && j < w) {
        // Source low band: the input plane at level 1, else the LL subband of the previous level.
        const float* src = (l == 1) ? xs(q) : ((l & 1) ? yb(q) : ya(q));
        src += R * spitch + R;
        const int i0 = 2 * i, j0 = 2 * j;
        const bool r1 = i0 + 1 < hin, c1 = j0 + 1 < win;  // odd sizes: zero-pad bottom/right
        const float a = src[i0 * spitch + j0];
        const float b = c1 ? src[i0 * spitch + j0 + 1] : 0.f;
        const float c = r1 ? src[(i0 + 1) * spitch + j0] : 0.f;
        const float d = (r1 && c1) ? src[(i0 + 1) * spitch + j0 + 1] : 0.f;
        haar4(a, b, c, d, y);
      }
      float* dst = (l & 1) ? ya(q) : yb(q);
#pragma unroll
      for (int s = 0; s < 4; ++s) dst[s * img + r] = y[s];
    }
    for (int e = tid; e < np * 4 * K * K; e += NT) {
      const int q = e / (4 * K * K), r = e - q * (4 * K * K);
      const int c = (int)((plane0 + q) % p.C);
      ws(q)[r] = __ldg(p.wfold + fold_level_w(p.C, l, c, 0, K * K) + r);
    }
    __syncthreads();
    const int strips = ceil_div(h, V);
    const int items = 4 * strips * w;
    for (int e = tid; e < np * items; e += NT) {
      const int q = e / items, r = e - q * items;
      const int s = r / (strips * w), r2 = r - s * (strips * w);
      const int i0 = (r2 / w) * V, j = r2 % w;
      const float* img_s = ((l & 1) ? ya(q) : yb(q)) + s * img;
      float acc[V];
#pragma unroll
      for (int v = 0; v < V; ++v) acc[v] = 0.f;
      conv_strip<K, V>(img_s + i0 * pitch + j, pitch, ws(q) + s * K * K, acc);
      float* z = zs(q) + zoff + s * h * w;
#pragma unroll
      for (int v = 0; v < V; ++v)
        if (i0 + v < h) z[(i0 + v) * w + j] = acc[v];
    }
    zoff += 4 * h * w;
    __syncthreads();
  }

  // 3. Synthesis, coarse to fine: Z_{l-1}[LL] += crop(Synth(Z_l)) for l = L..2 (the recurrence behind
  //    Eq. 7; each coarse position is read once and feeds its 2x2 block). Base taps load meanwhile.
  for (int e = tid; e < np * K * K; e += NT) {
    const int q = e / (K * K), r = e - q * (K * K);
    const int c = (int)((plane0 + q) % p.C);
    ws(q)[r] = __ldg(p.wfold + fold_base_w(c, K * K) + r);
  }
  int zend = zoff;  // end of level l within zs, walking down from the deepest level
#pragma unroll 1
  for (int l = Cfg::L; l >= 2; --l) {
    const int h = p.lh[l], w = p.lw[l], hw = h * w, hf = p.lh[l - 1], wf = p.lw[l - 1];
    const int zl = zend - 4 * hw, zf = zl - 4 * hf * wf;
    zend = zl;
    for (int e = tid; e < np * hw; e += NT) {
      const int q = e / hw, r = e - q * hw;
      const int i = r / w, j = r - i * w;
      const float* z = zs(q) + zl + r;
      const float ll = z[0], lh = z[hw], hl = z[2 * hw], hh = z[3 * hw];
      float* f = zs(q) + zf + (2 * i) * wf + 2 * j;  // LL band of level l-1
      const bool r1 = 2 * i + 1 < hf, c1 = 2 * j + 1 < wf;   // crop odd sizes
      f[0] += 0.5f * (ll + lh + hl + hh);
      if (c1) f[1] += 0.5f * (ll + lh - hl - hh);
      if (r1) f[wf] += 0.5f * (ll - lh + hl - hh);
      if (r1 && c1) f[wf + 1] += 0.5f * (ll - lh - hl + hh);
    }
    __syncthreads();
  }
  if (Cfg::L < 2) __syncthreads();
  T* __restrict__ out = static_cast<T*>(p.out);
  const int S = p.stride, Ho = p.H_out, Wo = p.W_out;
  const int strips = ceil_div(Ho, V);
  const int items = strips * Wo;
  for (int e = tid; e < np * items; e += NT) {
    const int q = e / items, r = e - q * items;
    const int oy0 = (r / Wo) * V, ox = r % Wo;
    const int c = (int)((plane0 + q) % p.C);
    const float bias = __ldg(p.wfold + fold_bias(p.C, c, K * K));
    float acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = bias;
    if (S == 1) {
      conv_strip<K, V>(xs(q) + oy0 * lay.xs_pitch + ox, lay.xs_pitch, ws(q), acc);
    } else {
#pragma unroll
      for (int v = 0; v < V; ++v) {
        const int y = min((oy0 + v) * S, H - 1);  // rows past Ho are discarded; keep reads in bounds
        const float* src = xs(q) + y * lay.xs_pitch + ox * S;
#pragma unroll(K <= 11 ? K : 1)
        for (int u = 0; u < K; ++u)
#pragma unroll(K <= 11 ? K : 4)
          for (int t = 0; t < K; ++t) acc[v] = fmaf(ws(q)[u * K + t], src[u * lay.xs_pitch + t], acc[v]);
      }
    }
#pragma unroll
    for (int v = 0; v < V; ++v) {
      const int oy = oy0 + v;
      if (oy >= Ho) continue;
      const int y = oy * S, xx = ox * S;
      if (Cfg::L >= 1) {  // level 1 of Eq. 7; deeper levels were folded into its LL band above
        const int w1 = p.lw[1], hw1 = p.lh[1] * w1;
        const float* z = zs(q) + (y >> 1) * w1 + (xx >> 1);
        const float sy = (y & 1) ? -1.f : 1.f, sx = (xx & 1) ? -1.f : 1.f;
        acc[v] += 0.5f * (z[0] + sy * z[hw1] + sx * z[2 * hw1] + sy * sx * z[3 * hw1]);
      }
      out[(plane0 + q) * (long long)(Ho * Wo) + oy * Wo + ox] = from_f32<T>(acc[v]);
    }
  }
}

}  // namespace lkjit
