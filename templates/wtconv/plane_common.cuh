// Plane-resident kernels: a thread block holds Cfg::planes independent groups of warps, one (b,c)
// plane each. A group synchronises only itself (__syncwarp for one warp, a named barrier otherwise),
// so the load, level, synthesis and store phases of different planes overlap and hide each other's
// latency. Index math uses fp32 reciprocals: every index here is below 2^16 (planes fit on chip).
#pragma once
#include "wtconv/common.cuh"

namespace lkjit {

// Global loads each thread keeps in flight while staging a plane.
constexpr int kPlaneLoadUnroll = 4;

// Barrier of N threads that synchronise alone: __syncwarp for one warp, else named barrier `id`.
template <int N>
__device__ __forceinline__ void group_barrier(int id) {
  if (N == 32) __syncwarp();
  else asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(N) : "memory");
}

template <class Cfg>
struct PlaneGroup {
  static constexpr int kThreads = Cfg::threads / Cfg::planes;  // threads per plane
  static_assert(kThreads % 32 == 0, "threads / planes must be a whole number of warps");
  static_assert(kThreads == 32 || Cfg::planes <= 15, "named barriers 1..15: at most 15 multi-warp groups");
  int q;  // group (plane slot) in the block
  int t;  // thread within the group
  __device__ PlaneGroup() : q(threadIdx.x / kThreads), t(threadIdx.x % kThreads) {}
  __device__ __forceinline__ void sync() const { group_barrier<kThreads>(q + 1); }
};

// The first N threads of a plane group, synchronising alone on named barrier `id` (one warp: __syncwarp).
template <int N>
struct PlaneSubgroup {
  static constexpr int kThreads = N;
  int t;   // thread within the subgroup (= within the group)
  int id;  // named barrier
  __device__ __forceinline__ void sync() const { group_barrier<N>(id); }
};

// Sizes (floats) of one plane's zero-haloed images, shared by the forward and backward layouts: the
// input plane (H+2R+vy) x (W+2R), one level-1 and one level-2 subband image (4 subbands each; odd and
// even levels reuse them), and the stack of every level's coefficients (sum_l 4 h_l w_l).
template <class Cfg>
struct PlaneImages {
  static constexpr int R = Cfg::R, K = Cfg::k, V = Cfg::vy;
  int xs_pitch, xs_size, l1_size, l2_size, levels_size;
  __device__ explicit PlaneImages(const WTConvParams& p) {
    xs_pitch = odd_pitch(p.W + 2 * R);
    xs_size = (p.H + 2 * R + V) * xs_pitch;
    l1_size = Cfg::L >= 1 ? 4 * (p.lh[1] + 2 * R + V) * odd_pitch(p.lw[1] + 2 * R) : 0;
    l2_size = Cfg::L >= 2 ? 4 * (p.lh[2] + 2 * R + V) * odd_pitch(p.lw[2] + 2 * R) : 0;
    levels_size = 0;
    for (int l = 1; l <= Cfg::L; ++l) levels_size += 4 * p.lh[l] * p.lw[l];
  }
};

// r / d for 0 <= r < 2^16, d >= 1, through an fp32 reciprocal (exact in that range).
struct FastDiv {
  int d;
  float inv;
  __device__ explicit FastDiv(int d_) : d(d_), inv(1.f / (float)d_) {}
  __device__ __forceinline__ int div(int r) const { return __float2int_rz(((float)r + 0.5f) * inv); }
};

// Stages N zero-haloed H x W images of one plane: dst[n][r] for r < size (row pitch `pitch`, halo R)
// gets load(n, y, x), element (y, x) of image n, inside the image and zero in the halo. GT threads,
// this one t; kPlaneLoadUnroll loads per image stay in flight per thread: the phase is latency-bound.
template <int GT, int R, int N, class Load>
__device__ __forceinline__ void stage_plane(int t, float* const (&dst)[N], int size, int pitch, int H, int W, Load load) {
  constexpr int U = kPlaneLoadUnroll;
  const FastDiv fp(pitch);
  for (int r0 = t; r0 < size; r0 += U * GT) {
    float v[U][N];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int r = r0 + u * GT, i = fp.div(r), y = i - R, xx = r - i * pitch - R;
      const bool in = r < size && y >= 0 && y < H && xx >= 0 && xx < W;
#pragma unroll
      for (int n = 0; n < N; ++n) v[u][n] = in ? load(n, y, xx) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (r0 + u * GT < size) {
#pragma unroll
        for (int n = 0; n < N; ++n) dst[n][r0 + u * GT] = v[u][n];
      }
  }
}

// Synthesis, coarse to fine, over one plane's level stack in shared memory (levels 1..L stored back to
// back, 4 subbands of lh[l] x lw[l] each, ending at `zend`): Z_{l-1}[LL] += crop(Synth(Z_l)) for
// l = L..2, the recurrence behind Eq. 7. Each coarse position is read once and feeds its 2x2 block.
template <int L, class G>
__device__ __forceinline__ void plane_fold_levels(const G& g, float* z, int zend, const int* lh, const int* lw) {
#pragma unroll 1
  for (int l = L; l >= 2; --l) {
    const int h = lh[l], w = lw[l], hw = h * w, hf = lh[l - 1], wf = lw[l - 1];
    const int zl = zend - 4 * hw, zf = zl - 4 * hf * wf;
    zend = zl;
    const FastDiv fw(w);
    for (int r = g.t; r < hw; r += G::kThreads) {
      const int i = fw.div(r), j = r - i * w;
      const float* c = z + zl + r;
      const float ll = c[0], lh_ = c[hw], hl = c[2 * hw], hh = c[3 * hw];
      float* f = z + zf + (2 * i) * wf + 2 * j;
      const bool r1 = 2 * i + 1 < hf, c1 = 2 * j + 1 < wf;  // crop odd sizes
      f[0] += 0.5f * (ll + lh_ + hl + hh);
      if (c1) f[1] += 0.5f * (ll + lh_ - hl - hh);
      if (r1) f[wf] += 0.5f * (ll - lh_ + hl - hh);
      if (r1 && c1) f[wf + 1] += 0.5f * (ll - lh_ - hl + hh);
    }
    g.sync();
  }
}

}  // namespace lkjit
