// The plane kernels' channels_last mode (sm_90): a thread-block cluster stages the planes of its channels
// from, and writes them back to, channels_last activations with one access per pixel's run of channels
// (cluster_geometry.cuh), moving each element to or from the owning block's shared memory over distributed
// shared memory. A plane read one element at a time from channels_last touches a 32-byte sector per 2 or 4
// useful bytes; the transposes around NCHW planes cost a read and a write of every activation.
// Everything here is a template, so sm_80 builds of the plain kernels never meet the cluster PTX.
#pragma once
#include "wtconv/cluster_geometry.cuh"
#include "wtconv/plane_common.cuh"

namespace lkjit {

// Arrive and wait at the cluster barrier (every thread of every block; release / acquire orders the
// distributed shared memory accesses around it).
template <int = 0>
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}
template <int = 0>
__device__ __forceinline__ int cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return (int)r;
}
// The shared::cluster address of `local` (this block's shared memory) in block `rank` of the cluster.
template <int = 0>
__device__ __forceinline__ unsigned dsmem_addr(const float* local, int rank) {
  const unsigned a = (unsigned)__cvta_generic_to_shared(local);
  unsigned d;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(rank));
  return d;
}
template <int = 0>
__device__ __forceinline__ void dsmem_store(unsigned addr, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(addr), "f"(v) : "memory");
}
template <int = 0>
__device__ __forceinline__ float dsmem_load(unsigned addr) {
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(addr) : "memory");
  return v;
}

// E fp32 values narrowed to T and stored as one 4-, 8- or 16-byte access at p (aligned to it).
template <int E, class T>
__device__ __forceinline__ void stg_from_f32xn(T* p, const float (&v)[E]) {
  constexpr int kWords = E * (int)sizeof(T) / 4;
  static_assert(kWords == 1 || kWords == 2 || kWords == 4, "4, 8 or 16 bytes a store");
  unsigned w[kWords];
#pragma unroll
  for (int i = 0; i < kWords; ++i) {
    if constexpr (sizeof(T) == 4) {
      w[i] = __float_as_uint(v[i]);
    } else {
      w[i] = (unsigned)from_f32<T>(v[2 * i]).u | ((unsigned)from_f32<T>(v[2 * i + 1]).u << 16);
    }
  }
  if constexpr (kWords == 4) *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
  else if constexpr (kWords == 2) *reinterpret_cast<uint2*>(p) = make_uint2(w[0], w[1]);
  else *reinterpret_cast<unsigned*>(p) = w[0];
}

// The cluster this block belongs to: its geometry, this thread's index among all the cluster's threads, and
// the (image, first channel) offset of its channels in an activation of strides st.
template <class Cfg>
struct PlaneCluster {
  static constexpr wtc::ClusterNhwc kGeo{Cfg::cluster, Cfg::planes, (int)sizeof(typename Cfg::T)};
  static constexpr int kThreads = Cfg::cluster * Cfg::threads;
  int ct;               // thread within the cluster
  long long b, c0;      // image and first channel
  __device__ PlaneCluster(int C) {
    const int rank = cluster_rank();
    ct = rank * Cfg::threads + (int)threadIdx.x;
    const long long first = ((long long)blockIdx.x - rank) * Cfg::planes;  // the cluster's first (b,c) plane
    b = first / C, c0 = first % C;
  }
  __device__ __forceinline__ long long base(const long long (&st)[4]) const { return b * st[0] + c0; }
  // Whether activations at `a` (strides st) can be staged and stored this way; the same in every block.
  template <class T>
  static __device__ __forceinline__ bool reads(const T* a, const long long (&st)[4]) {
    return wtc::cluster_reads(kGeo, st, reinterpret_cast<unsigned long long>(a));
  }
};

// Stages the h x w interiors of N planes of every group in the cluster: smem[g * per_plane + region[n] +
// (y+R) * pitch + x + R] of the block owning channel ch = value (y, x, ch) of activation n (strides st[n],
// pointer a[n] at the cluster's image and first channel). Loads first, then the remote stores.
template <class Cfg, int R, int N, class T>
__device__ __forceinline__ void cluster_stage(const PlaneCluster<Cfg>& pc, float* smem, int per_plane,
                                              const int (&region)[N], int pitch, int h, int w,
                                              const T* const (&a)[N], const long long (&st)[N][4]) {
  constexpr auto G = PlaneCluster<Cfg>::kGeo;
  constexpr int E = G.piece_elems(), P = G.pieces(), U = 2;
  const int n_items = G.items(h, w);
  const FastDiv fw(w);
  for (int i0 = pc.ct; i0 < n_items; i0 += U * PlaneCluster<Cfg>::kThreads) {
    float v[U][N][E];
    int y[U], x[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = min(i0 + u * PlaneCluster<Cfg>::kThreads, n_items - 1), px = G.pixel_of(i);
      y[u] = fw.div(px), x[u] = px - y[u] * w;
#pragma unroll
      for (int n = 0; n < N; ++n)
        ldg_f32xn<E>(a[n] + y[u] * st[n][2] + x[u] * st[n][3] + (i % P) * E, v[u][n]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = i0 + u * PlaneCluster<Cfg>::kThreads;
      if (i >= n_items) break;
      const int at = (y[u] + R) * pitch + x[u] + R;
#pragma unroll
      for (int e = 0; e < E; ++e) {
        const int ch = G.channel_of(i, e);
#pragma unroll
        for (int n = 0; n < N; ++n)
          dsmem_store(dsmem_addr(smem + G.group_of(ch) * per_plane + region[n] + at, G.rank_of(ch)), v[u][n][e]);
      }
    }
  }
}

// Writes every group's h x w output plane, kept dense at smem[g * per_plane + region + y * w + x] in the
// block owning its channel, to channels_last `out` (strides st, pointer at the cluster's image and first
// channel): one store per pixel's run of channels.
template <class Cfg, class T>
__device__ __forceinline__ void cluster_store(const PlaneCluster<Cfg>& pc, const float* smem, int per_plane, int region,
                                              int h, int w, T* out, const long long (&st)[4]) {
  constexpr auto G = PlaneCluster<Cfg>::kGeo;
  constexpr int E = G.piece_elems(), P = G.pieces();
  const int n_items = G.items(h, w);
  const FastDiv fw(w);
  for (int i = pc.ct; i < n_items; i += PlaneCluster<Cfg>::kThreads) {
    const int px = G.pixel_of(i), y = fw.div(px), x = px - y * w;
    float v[E];
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int ch = G.channel_of(i, e);
      v[e] = dsmem_load(dsmem_addr(smem + G.group_of(ch) * per_plane + region + px, G.rank_of(ch)));
    }
    stg_from_f32xn<E>(out + y * st[2] + x * st[3] + (i % P) * E, v);
  }
}

// The plane kernels' barrier after a phase that staged planes: the cluster's in channels_last mode (other
// blocks wrote into this one), else the group's. native is the same in every block of the cluster.
template <bool kCluster, class G>
__device__ __forceinline__ void staged_sync(bool native, const G& g) {
  if constexpr (kCluster) {
    if (native) {
      cluster_sync();
      return;
    }
  }
  g.sync();
}

// A strip of V output rows oy0.. at column ox: kept, dense (h x w), in `stage` for cluster_write_out in
// channels_last mode, else stored to out.
template <int V, class T>
__device__ __forceinline__ void keep_or_store_strip(bool native, float* stage, int w, T* __restrict__ out,
                                                    const PlaneAddr& oa, int oy0, int ox, int h, const float (&acc)[V]) {
  if (native) {
    float* st = stage + oy0 * w + ox;
    for_strip_rows<V, 1>(h - oy0, [&](int v) { st[v * w] = acc[v]; });
  } else {
    store_strip<V>(out, oa, oy0, ox, h, acc);
  }
}

// Channels_last mode's last phase: once every group's output waits in its stage (float offset `region` of each
// group's per_plane floats), the cluster writes them all to out (strides st) and stays until every block is done
// reading the others' shared memory.
template <class Cfg, class T>
__device__ __forceinline__ void cluster_write_out(const WTConvParams& p, const float* smem, int per_plane, int region,
                                                  int h, int w, T* out, const long long (&st)[4]) {
  const PlaneCluster<Cfg> pc(p.C);
  cluster_sync();
  cluster_store(pc, smem, per_plane, region, h, w, out + pc.base(st), st);
  cluster_sync();
}

}  // namespace lkjit
