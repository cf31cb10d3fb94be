// Deterministic reduction of the backward's partial parameter gradients, then scale-gradient recovery
// (I/O-aware reformulation, §4.3, Eq. 9): dW = s dW~, db = s0 db~, ds = <dW~, W> (+ db~ b for s0).
// One block per (channel, group); every sum runs in a fixed order, so two runs give identical bits.
#pragma once
#include "wtconv/common.cuh"

namespace lkjit {

// Chunk j of one group's task list: 32 consecutive values of the group (k*k+1 values for the base group
// g = 0, 4*k*k for a level), so a warp's loads are coalesced.
template <int KK>
struct ReduceChunk {
  static constexpr int C0 = (KK + 1 + 31) / 32, CL = (4 * KK + 31) / 32;  // chunks of the base, of a level
  int i0, nvals;  // first value of the chunk, group size
  __device__ __forceinline__ ReduceChunk(int g, int j) : i0(32 * j), nvals(g == 0 ? KK + 1 : 4 * KK) {}
};

// Addresses of rows s, s+S, s+2S, ... of one group's partials (base: the group's value i): row
// r = b*tiles + t of channel c is at ((b*C + c)*tiles + t)*nvals. Advancing S rows adds S / tiles to b
// and S % tiles to t, with at most one carry of t into b: no division per row.
struct RowWalk {
  const float* src;
  long long step, carry;
  int t, dt, tiles;
  __device__ __forceinline__ RowWalk(const float* base, int C, int c, int tiles_, int nvals, int s, int S)
      : tiles(tiles_) {
    const int db = S / tiles;
    dt = S - db * tiles;
    t = s % tiles;
    step = ((long long)db * C * tiles + dt) * nvals;
    carry = (long long)(C - 1) * tiles * nvals;
    src = base + (((long long)(s / tiles) * C + c) * tiles + t) * nvals;
  }
  __device__ __forceinline__ const float* next() {  // the current row's address, then advance S rows
    const float* a = src;
    src += step;
    t += dt;
    if (t >= tiles) {
      t -= tiles;
      src += carry;
    }
    return a;
  }
};

// Block (c, g): channel c's group g (0: dW~0 and db~; l >= 1: level l's 4 subbands). A block per channel
// alone left SMs idle at the channel counts of small maps (96 blocks at 64x96x56x56).
template <class Cfg>
__device__ __forceinline__ void wtconv_reduce(const WTConvParams& p) {
  constexpr int K = Cfg::k, KK = K * K, NT = Cfg::threads, NW = NT / 32;
  using Chunk = ReduceChunk<KK>;
  // Rows loaded before they are added: the sums are latency-bound, so each warp keeps U independent
  // loads in flight. 8 at 1024 threads, whose launch bound caps registers at 64.
  constexpr int U = NT > 512 ? 8 : 16;
  extern __shared__ float dwt[];  // this group's dW~ (and db~ after dW~0)
  const int c = blockIdx.x, g = blockIdx.y, C = p.C, B = p.B, tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int T = g == 0 ? Chunk::C0 : Chunk::CL;  // chunks of this group

  // Tasks are (chunk j, part s): part s of a chunk sums rows r = s, s+S, s+2S, ... (r = b*tiles + t)
  // in increasing order. S > 1 (a power of two, S*T <= NW, S <= rows) only when warps outnumber the
  // chunks: it spreads each chunk's rows over otherwise idle warps. S depends only on the launch's
  // shape, never on scheduling, so the order of every sum is fixed and the bits reproducible.
  constexpr bool kSplit = 2 * Chunk::C0 <= NW;  // else S = 1 in every group and red[] is dropped
  __shared__ float red[kSplit ? NT : 1];       // part sums, one 32-value slot per task (task == warp)
  const int tiles = p.part_tiles[g], rows = B * tiles;
  int S = 1;
  if (kSplit)
    while (2 * S * T <= NW && 2 * S <= rows) S *= 2;

#pragma unroll 1
  for (int task = warp; task < T * S; task += NW) {
    const Chunk ch(g, task % T);
    const int s = task / T, i = ch.i0 + lane;
    float sum = 0.f;
    if (i < ch.nvals) {
      RowWalk w(p.partial + p.part_off[g] + i, C, c, tiles, ch.nvals, s, S);
      // Full batches of U rows, loads unconditional; then the last < U rows, loads predicated.
      int r = s;
#pragma unroll 1
      for (; r + (U - 1) * S < rows; r += U * S) {
        float v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = __ldg(w.next());
#pragma unroll
        for (int u = 0; u < U; ++u) sum += v[u];  // in row order
      }
      float v[U - 1];
#pragma unroll
      for (int u = 0; u < U - 1; ++u) {
        const float* a = w.next();
        v[u] = r + u * S < rows ? __ldg(a) : 0.f;
      }
#pragma unroll
      for (int u = 0; u < U - 1; ++u)
        if (r + u * S < rows) sum += v[u];
    }
    if (!kSplit || S == 1) {
      if (i < ch.nvals) dwt[i] = sum;
    } else {
      red[task * 32 + lane] = sum;
    }
  }
  if (kSplit && S > 1) {  // uniform over the block
    // Part slots are task = s*T + j: thread (warp j, lane) adds chunk j's parts in order s = 0..S-1.
    __syncthreads();
    if (warp < T) {
      const int i = Chunk(g, warp).i0 + lane;
      if (i < (g == 0 ? KK + 1 : 4 * KK)) {
        float sum = red[warp * 32 + lane];
        for (int s = 1; s < S; ++s) sum += red[(s * T + warp) * 32 + lane];
        dwt[i] = sum;
      }
    }
  }
  __syncthreads();

  if (g == 0) {
    const float s0 = p.base_s[c];
    for (int i = tid; i < KK; i += NT) p.grad_base_w[(long long)c * KK + i] = s0 * dwt[i];
    if (tid == 0) {  // taps summed in order
      const float dbt = dwt[KK];
      float ds = 0.f;
      for (int i = 0; i < KK; ++i) ds += dwt[i] * p.base_w[(long long)c * KK + i];
      if (p.base_b) {
        ds += dbt * p.base_b[c];
        if (p.grad_base_b) p.grad_base_b[c] = s0 * dbt;
      }
      p.grad_base_s[c] = ds;
    }
    return;
  }
  const int l = g;
  for (int i = tid; i < 4 * KK; i += NT)
    p.grad_level_w[l - 1][4LL * c * KK + i] = p.level_s[l - 1][4 * c + i / KK] * dwt[i];
  if (tid < 4) {  // one thread per subband, taps summed in order
    const int s = tid;
    const float* wr = p.level_w[l - 1] + (4LL * c + s) * KK;
    float ds = 0.f;
    for (int i = 0; i < KK; ++i) ds += dwt[s * KK + i] * wr[i];
    p.grad_level_s[l - 1][4 * c + s] = ds;
  }
}

}  // namespace lkjit
