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

// Marks this thread's arrival at named barrier `id` of N threads without waiting (the producer side of a
// hand-off: the threads that bar.sync on it wait for every arrival, and see what was written before it).
template <int N>
__device__ __forceinline__ void group_arrive(int id) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(N) : "memory");
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

// One zero-haloed image per level l = 1..L (4 subbands of (h_l+2R+vy) x lpitch[l] each): the pitch and
// subband stride of level l, and the columns its conv items span (lvw[l] >= w_l; the host's strip layout:
// see WTConvParams::lpitch). Every level has its own images, so their halos are zeroed once per plane and
// the phases write interiors only.
template <class Cfg>
struct LevelImage {
  int h, w, vw, pitch, img;  // level extent, conv item columns, row pitch, one subband's size (floats)
  __device__ LevelImage(const WTConvParams& p, int l)
      : h(p.lh[l]), w(p.lw[l]), vw(p.lvw[l]), pitch(p.lpitch[l]), img((h + 2 * Cfg::R + Cfg::vy) * pitch) {}
};

// n rounded up to a multiple of 4 floats: 16-byte aligned plane regions and float4 zeroing.
__device__ __forceinline__ int round4(int n) { return (n + 3) & ~3; }

// Sizes (floats) of one plane's images, shared by the forward and backward layouts: the input plane
// (H+2R+vy) x lpitch[0] rounded up to a multiple of 4 (float4 zeroing), every level's image
// (ys_size = sum_l 4 img_l), and the stack of every level's coefficients (sum_l 4 h_l w_l).
template <class Cfg>
struct PlaneImages {
  static constexpr int R = Cfg::R, V = Cfg::vy;
  int xs_pitch, xs_vw, xs_size, ys_size, levels_size;  // xs_vw: the columns of a stride-1 output loop
  __device__ explicit PlaneImages(const WTConvParams& p) {
    xs_pitch = p.lpitch[0];
    xs_vw = p.lvw[0];
    xs_size = round4((p.H + 2 * R + V) * xs_pitch);
    ys_size = 0;
    levels_size = 0;
    for (int l = 1; l <= Cfg::L; ++l) {
      ys_size += 4 * LevelImage<Cfg>(p, l).img;
      levels_size += 4 * p.lh[l] * p.lw[l];
    }
  }
};

// r / d for 0 <= r < 2^16, d >= 1, through an fp32 reciprocal: exact in that range even with PTX's approximate
// reciprocal (rcp.approx, relative error below 2^-22): (r + 0.5) / d lies at least 0.5 / d from an integer, and
// the relative error of (r + 0.5) * inv is below 2^-21, so its absolute error is below 2^-5 / d. rcp.approx is one
// MUFU.RCP; 1.f / d was a rounded division with a slow-path branch (4.6 % of the 56x56 forward's instructions).
struct FastDiv {
  int d;
  float inv;
  __device__ explicit FastDiv(int d_) : d(d_) { asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(inv) : "f"((float)d_)); }
  __device__ __forceinline__ int div(int r) const { return __float2int_rz(((float)r + 0.5f) * inv); }
};

// Zeroes n floats from p (16-byte aligned, n a multiple of 4) with GT threads: a plane's whole images,
// halos, spare rows and interiors, before any phase writes an interior. The backward's stride > 1
// staging relies on the zero interior too (G is zero between dOut's samples).
template <int GT>
__device__ __forceinline__ void zero_floats(int t, float* p, int n) {
  float4* q = reinterpret_cast<float4*>(p);
  for (int i = t; i < n / 4; i += GT) q[i] = make_float4(0.f, 0.f, 0.f, 0.f);
}

// Every tap of channel c from the folded buffer: store(j, i, v) gets tap i of set j, where set 0 is W~0 and
// set 1 + 4(l-1) + s is level l's subband s. One flat pass over the GT threads: W~0 one float a thread,
// then each level's 4 k*k contiguous taps as k*k float4 (they are 16-byte aligned when C*(k*k+1) is a
// multiple of 4; else one float each). A loop per level kept every warp busy with ~60 instructions of
// address math a level for a few loads (4.7k warp instructions of a 56x56 backward plane, 7 % of it).
template <int GT, int K, int L, class Store>
__device__ __forceinline__ void load_channel_taps(int t, const float* __restrict__ wfold, int C, int c, Store store) {
  constexpr int KK = K * K;
  const float* base = wfold + fold_base_w(c, KK);
  const float* lv = wfold + fold_level_w(C, 1, c, 0, KK);  // level 1, LL, tap 0
  const long long lstride = 4LL * C * KK;                  // one level's taps of c to the next's
  const bool q4 = (reinterpret_cast<unsigned long long>(lv) & 15) == 0;
  const int n = KK + (q4 ? L * KK : 4 * L * KK);
  for (int r = t; r < n; r += GT) {
    if (r < KK) {
      store(0, r, __ldg(base + r));
    } else if (q4) {
      const int l = (r - KK) / KK, q = r - KK - l * KK;  // float4 q of level l + 1
      const float4 v = __ldg(reinterpret_cast<const float4*>(lv + l * lstride) + q);
      const float f[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int idx = 4 * q + e, s = idx / KK;
        store(1 + 4 * l + s, idx - s * KK, f[e]);
      }
    } else {
      const int l = (r - KK) / (4 * KK), idx = r - KK - l * 4 * KK, s = idx / KK;
      store(1 + 4 * l + s, idx - s * KK, __ldg(lv + l * lstride + idx));
    }
  }
}

// Element offsets y*st[2] + x*st[3] within one plane of a strided activation, in 32 bits where the
// plane's span allows it (every realistic tensor, NCHW or channels_last), else in 64.
struct PlaneOff32 {
  int sy, sx;
  __device__ __forceinline__ int at(int y, int x) const { return y * sy + x * sx; }
};
struct PlaneOff64 {
  long long sy, sx;
  __device__ __forceinline__ long long at(int y, int x) const { return y * sy + x * sx; }
};
__device__ __forceinline__ bool plane_fits32(const long long (&st)[4], int h, int w) {
  return (h - 1) * st[2] + (w - 1) * st[3] < (1LL << 31);
}
// Output offsets (store_strip: once per strip), 32-bit math where the plane's span allows. Plain
// PlaneOff64 would do as well now that it is not per store; kept while that change is unmeasured.
struct PlaneAddr {
  long long sy, sx;
  bool fits32;
  __device__ PlaneAddr(const long long (&st)[4], int h, int w) : sy(st[2]), sx(st[3]), fits32(plane_fits32(st, h, w)) {}
  __device__ __forceinline__ long long at(int y, int x) const {
    return fits32 ? (long long)(y * (int)sy + x * (int)sx) : y * sy + x * sx;
  }
};

// Level work items rotate over a group of n threads: a level's item 0 goes to thread `first` (warp-aligned),
// so the small levels fill the warps a big level leaves idle. rotated_index: thread t's first item;
// next_first: the warp after `items` items from `first`, where the next level (or set) starts.
__device__ __forceinline__ int rotated_index(int t, int first, int n) { return (t - first + n) % n; }
__device__ __forceinline__ int next_first(int first, int items, int n) { return (first + ((items + 31) & ~31)) % n; }

// E consecutive pixels of a row, widened to fp32 (what a staging load returns).
template <int E>
struct Pixels {
  float v[E];
};

// Stages the interiors of N plane images: dst[n][(i*S+R)*pitch + j*S+R] = load(n, i, j) for i < h,
// j < w (the halos and, for S > 1, the positions between are zero already). GT threads, this one t.
// kPlaneLoadUnroll x N loads stay in flight per thread (the phase is latency-bound): past the end a
// thread re-reads the last element instead of branching, and only the stores are guarded. With E > 1
// (w a multiple of E) each load returns the E pixels (i, j..j+E-1): less index math per pixel.
template <int GT, int R, int E = 1, int U = kPlaneLoadUnroll, int N, class Load>
__device__ __forceinline__ void stage_plane(int t, float* const (&dst)[N], int pitch, int h, int w, int S, Load load) {
  const int we = (int)((unsigned)w / E);  // loads per row (w >= 0)
  const FastDiv fw(we);
  const int n = h * we;
  for (int r0 = t; r0 < n; r0 += U * GT) {
    Pixels<E> v[U][N];
    int o[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int r = min(r0 + u * GT, n - 1), i = fw.div(r), j = E * (r - i * we);
      o[u] = (i * S + R) * pitch + j * S + R;
#pragma unroll
      for (int k = 0; k < N; ++k) v[u][k] = load(k, i, j);
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
      if (r0 + u * GT < n) {
#pragma unroll
        for (int k = 0; k < N; ++k)
#pragma unroll
          for (int e = 0; e < E; ++e) dst[k][o[u] + e * S] = v[u][k].v[e];
      }
  }
}

// stage_plane for activations of type T: one plane a (offsets oa), or two planes a, b of the same
// extents (stride 1). Off is PlaneOff32 or PlaneOff64, chosen by the caller once per plane.
template <int GT, int R, class T, class Off>
__device__ __forceinline__ void stage_act(int t, float* d, int pitch, int h, int w, int S, const T* a, Off oa) {
  float* const dst[] = {d};
  stage_plane<GT, R>(t, dst, pitch, h, w, S, [&](int, int y, int x) { return Pixels<1>{{ldg_f32(a + oa.at(y, x))}}; });
}
template <int GT, int R, class T, class Off>
__device__ __forceinline__ void stage_act(int t, float* da, float* db, int pitch, int h, int w, const T* a, Off oa,
                                          const T* b, Off ob) {
  float* const dst[] = {da, db};
  stage_plane<GT, R>(t, dst, pitch, h, w, 1, [&](int n, int y, int x) {
    return Pixels<1>{{n == 0 ? ldg_f32(a + oa.at(y, x)) : ldg_f32(b + ob.at(y, x))}};
  });
}
__device__ __forceinline__ PlaneOff32 off32(const long long (&st)[4]) { return {(int)st[2], (int)st[3]}; }
__device__ __forceinline__ PlaneOff64 off64(const long long (&st)[4]) { return {st[2], st[3]}; }

// The most pixels (E = 16, 8 or 4 bytes' worth, at least 2, at most kMaxBytes) that one load of plane a
// can return: unit x stride; row stride and width multiples of E (a load never crosses a row); the
// start aligned to E elements; 32-bit offsets. 1 where none applies. Dense NCHW planes of an even W*H
// take 16 bytes where W is a multiple of 8 (16-bit) or 4 (fp32).
template <int kMaxBytes, class T>
__device__ __forceinline__ int act_vec(const T* a, const long long (&st)[4], int h, int w) {
  if (st[3] != 1 || !plane_fits32(st, h, w)) return 1;
  const unsigned long long addr = reinterpret_cast<unsigned long long>(a);
#pragma unroll
  for (int bytes = kMaxBytes; bytes >= 4; bytes /= 2) {
    const int e = bytes / (int)sizeof(T);
    if (e >= 2 && st[2] % e == 0 && w % e == 0 && (addr & (bytes - 1)) == 0) return e;
  }
  return 1;
}

// stage_act in loads of E pixels (act_vec returned E for plane a, and for b where given; row strides
// sa, sb). Each thread keeps up to 16 floats of loads in flight (fewer loads, more bytes each).
template <int GT, int R, int E, class T>
__device__ __forceinline__ void stage_act_vec(int t, float* d, int pitch, int h, int w, const T* a, int sa) {
  float* const dst[] = {d};
  stage_plane<GT, R, E, (16 / E < 1 ? 1 : 16 / E > 4 ? 4 : 16 / E)>(t, dst, pitch, h, w, 1, [&](int, int y, int x) {
    Pixels<E> p;
    ldg_f32xn<E>(a + y * sa + x, p.v);
    return p;
  });
}
template <int GT, int R, int E, class T>
__device__ __forceinline__ void stage_act_vec(int t, float* da, float* db, int pitch, int h, int w, const T* a, int sa,
                                              const T* b, int sb) {
  float* const dst[] = {da, db};
  stage_plane<GT, R, E, (8 / E < 1 ? 1 : 8 / E > 4 ? 4 : 8 / E)>(t, dst, pitch, h, w, 1, [&](int n, int y, int x) {
    Pixels<E> p;
    ldg_f32xn<E>(n == 0 ? a + y * sa + x : b + y * sb + x, p.v);
    return p;
  });
}

// Stages plane a (strides st) with the widest loads act_vec<kMaxBytes> allows, else element by element.
template <int GT, int R, int kMaxBytes, class T>
__device__ __forceinline__ void stage_act_widest(int t, float* d, int pitch, int h, int w, const T* a,
                                                 const long long (&st)[4]) {
  constexpr int E16 = 16 / (int)sizeof(T), E8 = 8 / (int)sizeof(T), E4 = 4 / (int)sizeof(T);
  const int e = act_vec<kMaxBytes>(a, st, h, w), sa = (int)st[2];
  if (e == E16) stage_act_vec<GT, R, E16>(t, d, pitch, h, w, a, sa);
  else if (e == E8) stage_act_vec<GT, R, E8>(t, d, pitch, h, w, a, sa);
  else if (E4 >= 2 && e == E4) stage_act_vec<GT, R, (E4 >= 2 ? E4 : 2)>(t, d, pitch, h, w, a, sa);
  else if (plane_fits32(st, h, w)) stage_act<GT, R>(t, d, pitch, h, w, 1, a, off32(st));
  else stage_act<GT, R>(t, d, pitch, h, w, 1, a, off64(st));
}

// One Haar analysis level of N chains: the 4 subbands of a level (interiors of dst[n], subband stride
// img, row pitch `pitch`, extent h x w) from the low band of the level above (src[n] points at its
// interior origin, row pitch spitch, extent hin x win). Odd extents read the zero halo past the low
// band (zero padding); with R = 0 there is none, so they test instead.
template <int GT, int R, int N>
__device__ __forceinline__ void haar_level(int t, const float* const (&src)[N], int spitch, int hin, int win,
                                           float* const (&dst)[N], int pitch, int img, int h, int w) {
  const FastDiv fw(w);
  for (int r = t; r < h * w; r += GT) {
    const int i = fw.div(r), j = r - i * w, o = 2 * i * spitch + 2 * j, d = (i + R) * pitch + j + R;
    const bool r1 = R > 0 || 2 * i + 1 < hin, c1 = R > 0 || 2 * j + 1 < win;
#pragma unroll
    for (int k = 0; k < N; ++k) {
      const float* s = src[k] + o;
      float y[4];
      haar4(s[0], c1 ? s[1] : 0.f, r1 ? s[spitch] : 0.f, (r1 && c1) ? s[spitch + 1] : 0.f, y);
#pragma unroll
      for (int q = 0; q < 4; ++q) dst[k][q * img + d] = y[q];
    }
  }
}

// f(v) for the rows v = 0, D, 2D, ... < V of a strip that exist (v < n): with no check per row where the whole
// strip exists (n >= V, every strip but a map's last), which takes the row tests and their predicated address
// math out of the strip epilogues (level Z stores, the level-1 synthesis, output stores).
template <int V, int D, class F>
__device__ __forceinline__ void for_strip_rows(int n, F&& f) {
  if (n >= V) {
#pragma unroll
    for (int v = 0; v < V; v += D) f(v);
  } else {
#pragma unroll
    for (int v = 0; v < V; v += D) {
      if (v >= n) break;
      f(v);
    }
  }
}

// acc[v] += the level-1 synthesis at output row oy0 + v (full-resolution row y = (oy0+v)*S), full-resolution
// column x (Eq. 7, l = 1): with Z_1's subbands z (LL, LH, HL, HH at strides hw1, row pitch w1) at (y/2, x/2),
// 0.5 (LL + sy LH + sx HL + sy sx HH), sy and sx the signs of y's and x's parities. For S = 1 from an even
// oy0 (vy even), each pair of rows shares its coarse row: one set of reads, giving a + b and a - b. No row
// oy0 + v >= h_out is read; the pair path may add into acc of the one row past h_out (never stored).
template <int V>
__device__ __forceinline__ void add_level1_synth(float (&acc)[V], const float* zs, int w1, int hw1, int oy0, int x,
                                                 int S, int h_out) {
  const float* zc = zs + (x >> 1);
  const float hx = (x & 1) ? -0.5f : 0.5f;  // sx / 2
  if (V % 2 == 0 && S == 1) {
    const float* z = zc + (oy0 >> 1) * w1;  // the pair v, v+1's coarse row: v/2 rows below
    for_strip_rows<V, 2>(h_out - oy0, [&](int v) {
      const float* zr = z + (v >> 1) * w1;
      const float a = fmaf(hx, zr[2 * hw1], 0.5f * zr[0]), b = fmaf(hx, zr[3 * hw1], 0.5f * zr[hw1]);
      acc[v] += a + b;
      if (v + 1 < V) acc[v + 1] += a - b;
    });
    return;
  }
  for_strip_rows<V, 1>(h_out - oy0, [&](int v) {
    const int y = (oy0 + v) * S;
    const float* z = zc + (y >> 1) * w1;
    const float a = fmaf(hx, z[2 * hw1], 0.5f * z[0]), b = fmaf(hx, z[3 * hw1], 0.5f * z[hw1]);
    acc[v] += (y & 1) ? a - b : a + b;
  });
}

// Stores a strip of V output rows oy0.. (those below h_out) at column ox: one address, then a row stride each.
template <int V, class T>
__device__ __forceinline__ void store_strip(T* __restrict__ out, const PlaneAddr& oa, int oy0, int ox, int h_out,
                                            const float (&acc)[V]) {
  T* o = out + oa.at(oy0, ox);
  for_strip_rows<V, 1>(h_out - oy0, [&](int v) { o[v * oa.sy] = from_f32<T>(acc[v]); });
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
