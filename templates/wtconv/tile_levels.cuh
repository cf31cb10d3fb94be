// The level coefficients under one output tile (tiled synthesis kernels, forward and backward):
// for each level l the 4 subbands of rows (y0 >> l)..(y1 >> l) x cols (x0 >> l)..(x1 >> l) of the
// scratch tensor at p.z + p.z_off[l-1] are staged in shared memory, then folded coarse to fine
// (Z_{l-1}[LL] += Synth(Z_l), the recurrence behind Eq. 7), leaving level 1 ready per pixel.
#pragma once
#include "wtconv/plane_common.cuh"  // FastDiv

namespace lkjit {

template <int L, int NT>
struct TileLevels {
  int y0, x0, y1, x1;  // first and last full-resolution row / col the tile needs
  int zoff[L + 1];     // level offsets in the staging buffer

  // Issues the loads; the caller's barrier publishes them.
  __device__ __forceinline__ void stage(const WTConvParams& p, long long plane, float* zr, int tid) {
    int o = 0;
#pragma unroll
    for (int l = 1; l <= L; ++l) {
      const int r0 = y0 >> l, c0 = x0 >> l, rl = (y1 >> l) - r0 + 1, cl = (x1 >> l) - c0 + 1;
      const int h = p.lh[l], w = p.lw[l];
      const float* z = p.z + p.z_off[l - 1] + plane * 4LL * h * w;
      zoff[l] = o;
      const FastDiv fn(rl * cl), fc(cl);
      for (int e = tid; e < 4 * rl * cl; e += NT) {
        const int s = fn.div(e), r = e - s * rl * cl, ri = fc.div(r), i = r0 + ri, j = c0 + (r - ri * cl);
        zr[o + e] = (i < h && j < w) ? __ldg(z + (long long)s * h * w + (long long)i * w + j) : 0.f;
      }
      o += 4 * rl * cl;
    }
  }

  // Coarse to fine, after the staging barrier; ends with a barrier.
  __device__ __forceinline__ void fold(const WTConvParams& p, float* zr, int tid) const {
#pragma unroll
    for (int l = L; l >= 2; --l) {
      const int r0 = y0 >> l, c0 = x0 >> l, rl = (y1 >> l) - r0 + 1, cl = (x1 >> l) - c0 + 1;
      const int f0 = y0 >> (l - 1), g0 = x0 >> (l - 1);
      const int rf = (y1 >> (l - 1)) - f0 + 1, cf = (x1 >> (l - 1)) - g0 + 1;
      const int hf = p.lh[l - 1], wf = p.lw[l - 1];
      const float* z = zr + zoff[l];
      float* f = zr + zoff[l - 1];
      const FastDiv fc(cl);
      for (int e = tid; e < rl * cl; e += NT) {
        const int i = fc.div(e), j = e - i * cl;
        const float ll = z[e], lh = z[rl * cl + e], hl = z[2 * rl * cl + e], hh = z[3 * rl * cl + e];
        const float v[4] = {0.5f * (ll + lh + hl + hh), 0.5f * (ll + lh - hl - hh), 0.5f * (ll - lh + hl - hh),
                            0.5f * (ll - lh - hl + hh)};
#pragma unroll
        for (int pq = 0; pq < 4; ++pq) {
          const int fi = 2 * (r0 + i) + (pq >> 1), fj = 2 * (c0 + j) + (pq & 1);
          if (fi >= f0 && fi < f0 + rf && fj >= g0 && fj < g0 + cf && fi < hf && fj < wf)
            f[(fi - f0) * cf + (fj - g0)] += v[pq];
        }
      }
      __syncthreads();
    }
  }

  // Level-1 synthesis at full-resolution (y, x) from the folded buffer (Eq. 7, l = 1).
  __device__ __forceinline__ float level1(const float* zr, int y, int x) const {
    const int r01 = y0 >> 1, c01 = x0 >> 1, cl1 = (x1 >> 1) - c01 + 1, n1 = ((y1 >> 1) - r01 + 1) * cl1;
    const float* z = zr + ((y >> 1) - r01) * cl1 + ((x >> 1) - c01);
    const float sy = (y & 1) ? -1.f : 1.f, sx = (x & 1) ? -1.f : 1.f;
    return 0.5f * (z[0] + sy * z[n1] + sx * z[2 * n1] + sy * sx * z[3 * n1]);
  }
};

}  // namespace lkjit
