// Index math of the WBMM family (Song et al., ICML 2026; docs/wbmm.md), shared by the kernels (NVRTC)
// and the CPU tests (g++): windows, positions, the relative-position index I, the padded MMA extent,
// the kernels' shared-memory layouts and the partial-buffer indexing. No headers, no CUDA types.
//
// Terms (docs/wbmm.md): window (wh, ww), d = wh*ww positions in raster order p = ph*ww + pw,
// K = (2wh-1)(2ww-1) table taps; windows n = (b*nH + h)*nW + v with nH = ceil(H/wh), nW = ceil(W/ww)
// (bottom/right zero padding); M[c, i, j] = R[c, I[i, j]], row i = input position, column j = output.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define LKJIT_HD __host__ __device__
#else
#define LKJIT_HD
#endif

namespace lkjit {
namespace wbmm {

enum { kMaxWindow = 16 };                 // wh, ww in [1, 16]: d <= 256
enum { kModeTable = 0, kModeDense = 1 };  // M from the table R (C, K), or given dense (C, d, d)
// How products are formed; every path accumulates in fp32.
//   kPrecMma16: bf16/f16 operands on tensor cores (mma.sync m16n8k16), the activation dtype's own.
//   kPrecFfma:  fp32 FMAs on CUDA cores (fp32-accurate).
//   kPrec3xTF32: fp32 split into big + small TF32 halves, three m16n8k8 products (fp32-accurate to
//               within rounding: the dropped small*small term is below 2^-22 relative).
//   kPrecTF32:  one TF32 m16n8k8 product (10-bit mantissas; the explicit opt-in, like torch's allow_tf32).
enum { kPrecMma16 = 0, kPrecFfma = 1, kPrec3xTF32 = 2, kPrecTF32 = 3 };

LKJIT_HD constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
LKJIT_HD constexpr long long ceil_div_ll(long long a, long long b) { return (a + b - 1) / b; }
LKJIT_HD constexpr int round_up(int a, int b) { return ceil_div(a, b) * b; }
LKJIT_HD constexpr int gcd(int a, int b) { return b == 0 ? a : gcd(b, a % b); }
LKJIT_HD constexpr int lcm(int a, int b) { return a / gcd(a, b) * b; }
LKJIT_HD constexpr int max_i(int a, int b) { return a > b ? a : b; }
LKJIT_HD constexpr int min_i(int a, int b) { return a < b ? a : b; }

// ---- windows and positions ---------------------------------------------------------------------------
// Windows along an extent of n pixels: ceil(n / w); the last one is zero-padded past the edge.
LKJIT_HD constexpr int windows_along(int n, int w) { return ceil_div(n, w); }
// Pixels of window `index` (0-based) that lie inside an extent of n: w, or fewer for the padded last one.
LKJIT_HD constexpr int window_extent(int n, int w, int index) { return min_i(w, n - index * w); }

struct WindowCoord {
  int b, h, v;  // image, window row, window column
};
// n = (b*nH + h)*nW + v, and back.
LKJIT_HD constexpr long long window_index(int b, int h, int v, int nH, int nW) {
  return ((long long)b * nH + h) * nW + v;
}
LKJIT_HD inline WindowCoord window_coord(long long n, int nH, int nW) {
  const long long r = n / nW;
  return WindowCoord{(int)(r / nH), (int)(r % nH), (int)(n % nW)};
}

// Position p = ph*ww + pw of a window.
LKJIT_HD constexpr int pos_h(int p, int ww) { return p / ww; }
LKJIT_HD constexpr int pos_w(int p, int ww) { return p % ww; }

// ---- the relative-position table ---------------------------------------------------------------------
LKJIT_HD constexpr int table_size(int wh, int ww) { return (2 * wh - 1) * (2 * ww - 1); }
// Tap of offset (dh, dw) = (ih - jh, iw - jw), each in [-(w-1), w-1].
LKJIT_HD constexpr int tap_index(int dh, int dw, int wh, int ww) { return (dh + wh - 1) * (2 * ww - 1) + dw + ww - 1; }
// I[i, j] = (ih - jh + wh - 1)(2ww - 1) + (iw - jw + ww - 1) (docs/wbmm.md).
LKJIT_HD constexpr int rel_index(int i, int j, int wh, int ww) {
  return tap_index(i / ww - j / ww, i % ww - j % ww, wh, ww);
}
// The 180-degree-rotated table R~[k] = R[K-1-k]: M_c^T is the M of R~, so I[j, i] = K-1-I[i, j].
LKJIT_HD constexpr int rotated_index(int k, int wh, int ww) { return table_size(wh, ww) - 1 - k; }
// The centre tap (dh, dw) = (0, 0), the diagonal of M: folding the identity shortcut adds 1 here.
LKJIT_HD constexpr int centre_tap(int wh, int ww) { return (wh - 1) * (2 * ww - 1) + ww - 1; }
// Pairs (i, j) of one window with I[i, j] = tap (dh, dw): the multiplicity of that tap in M.
LKJIT_HD constexpr int tap_pairs(int dh, int dw, int wh, int ww) {
  return (wh - (dh < 0 ? -dh : dh)) * (ww - (dw < 0 ? -dw : dw));
}

// ---- tile columns -----------------------------------------------------------------------------------
// Column q of a tile <-> (cl, wl, iw); a column holds the wh rows ih of one pixel column of a window.
// Consecutive q walk global memory contiguously where the layout is: NCHW order q = (cl*WPB + wl)*ww + iw
// (the ww pixels of a window row, then the next window's, which follow in the same image row), NHWC order
// q = (wl*ww + iw)*CPB + cl (channels innermost). A thread owns columns tid, tid + threads, ...: their
// (cl, wl, iw) do not change from tile to tile, and a column's wh elements differ by the row stride only.
template <int WH, int WW, int WPB, int CPB, bool NHWC>
struct TileColumn {
  static constexpr int Q = CPB * WPB * WW;  // columns of a tile
  int cl, wl, iw;
  LKJIT_HD explicit TileColumn(int q) {
    if constexpr (NHWC) {
      cl = q % CPB, q /= CPB;
      iw = q % WW, wl = q / WW;
    } else {
      iw = q % WW, q /= WW;
      wl = q % WPB, cl = q / WPB;
    }
  }
};

// ---- padded extents ------------------------------------------------------------------------------------
// K step of one product: the MMA's k (16 for 16-bit operands, 8 for TF32), or a float4 for FFMA.
LKJIT_HD constexpr int prec_kstep(int prec) { return prec == kPrecMma16 ? 16 : prec == kPrecFfma ? 4 : 8; }
// The padded d of the forward / dX kernel: a multiple of the K step, and of the columns the N split and
// warps divide (each of nsplit parts holds whole n8 tiles for each of wn warps).
LKJIT_HD constexpr int fwd_dp(int d, int prec, int wn, int nsplit) {
  return round_up(d, lcm(prec_kstep(prec), 8 * wn * nsplit));
}
// The padded d of the wgrad kernel: dM rows i split into isplit parts of whole m16 tiles for gm warps,
// columns j in n8 tiles for gn warps; with a fused dX, a part is also dX's N extent (wn warps) and dY's
// K (the K step).
LKJIT_HD constexpr int wgrad_dp(int d, int prec, int gm, int gn, int isplit, int wn, bool fuse_dx) {
  return round_up(d, lcm(lcm(16 * gm * isplit, 8 * gn), fuse_dx ? lcm(prec_kstep(prec), 8 * wn * isplit) : 1));
}

// ---- shared memory -------------------------------------------------------------------------------------
// Row pitch (elements) of an operand tile of `cols` columns. 16-bit: +8 elements (16 bytes), so the 8
// rows an ldmatrix reads fall in 8 distinct 16-byte bank groups (cols is a multiple of 16, the pitch an
// odd multiple of 16 bytes). fp32: +4 (the same for ldmatrix and the FFMA path's float4 rows).
LKJIT_HD constexpr int operand_pitch(int cols, int elem_bytes) { return cols + (elem_bytes == 2 ? 8 : 4); }
// Row pitch (elements) of an output staging tile: a multiple of 16 plus 8, so the accumulator pairs a warp
// stores (rows g = 0..7, columns 2t) hit 32 distinct banks for 16-bit elements, and a half-warp's float2
// pairs (rows 0..3) 16 distinct bank pairs for fp32.
LKJIT_HD constexpr int staging_pitch(int cols) { return round_up(cols, 16) + 8; }
LKJIT_HD constexpr int align16(int bytes) { return (bytes + 15) & ~15; }

// Window-table entry: per window of the current tile, the element offset of its origin in each
// activation (channel c0 of the block included) and its rows | cols << 8 inside the image (0: no window).
template <int NB>
struct WinEntry {
  long long base[NB];
  int ext;
  int pad_;
};
enum { kTables = 3 };  // tile t uses table t % 3: loads of t+1 and stores of t overlap writes for t+2

// K-tiling of the forward / dX product (the kchunk axis): 0 keeps M_c's part whole in shared memory; kc > 0
// streams its rows k in chunks of kc (the last one dp - (chunks - 1) kc) through two buffers, rebuilt for every
// window tile (the next chunk built while this one's products run), so that d x d operands that do not fit
// whole run without a column split.
LKJIT_HD constexpr int k_chunks(int dp, int kc) { return kc == 0 ? 1 : ceil_div(dp, kc); }
LKJIT_HD constexpr int b_buffers(int kc) { return kc == 0 ? 1 : 2; }

// Forward / dX kernel (wbmm/fwd.cuh), byte offsets into dynamic shared memory:
//   B:   cpb x NB x PB of the operand type (NB = dp/nsplit rows n, PB = pitch over k = dp)   M_c or M_c^T
//        (core: wgmma's core-matrix layout, NB x dp elements without padding; K-tiled: two buffers of
//        cpb x NB x PB(kc), chunk g of the walk in buffer g % 2)
//   A:   cpb x WPB x PA of T   (PA = pitch over dp)                                        input tile
//   Y:   cpb x WPB x PY of T   (PY = pitch over NB)                                        output staging
//   tab: kTables x WPB window entries (2 bases: input, output)
struct FwdLayout {
  int b, a, y, tab, total;
};
LKJIT_HD constexpr FwdLayout fwd_layout(int dp, int nsplit, int wpb, int cpb, int t_bytes, int op_bytes, bool core = false,
                                        int kc = 0) {
  const int nb = dp / nsplit;
  const int b_bytes =
      b_buffers(kc) * align16(cpb * nb * (core ? dp : operand_pitch(kc ? kc : dp, op_bytes)) * op_bytes);
  const int a_bytes = align16(cpb * wpb * operand_pitch(dp, t_bytes) * t_bytes);
  const int y_bytes = align16(cpb * wpb * staging_pitch(nb) * t_bytes);
  const int tab_bytes = kTables * wpb * (int)sizeof(WinEntry<2>);
  return FwdLayout{0, b_bytes, b_bytes + a_bytes, b_bytes + a_bytes + y_bytes, b_bytes + a_bytes + y_bytes + tab_bytes};
}

// wgrad kernel (wbmm/wgrad.cuh): X tile (the block's dp_i = dp/isplit positions i), dY tile (all dp), and
// with a fused dX its output staging and the rotated operand (dp_i rows n = i, pitch over k = j); at the
// end the dM accumulators go to an fp32 scratch (dp_i rows x pitch dp + 4) that reuses the tile region.
//   tiles: X cpb x WPB x PA(dp_i) of T | G cpb x WPB x PA(dp) of T | DX cpb x WPB x PY(dp_i) of T
//   S:     cpb x dp_i x (dp + 4) floats, aliasing the tiles;  B~: cpb x dp_i x PB(dp) (fused dX only)
//   red:   cpb x threads floats (dbias block sums);  tab: kTables x WPB entries (3 bases: x, dy, dx)
struct WgradLayout {
  int x, g, dx, s, bt, red, tab, total;
};
LKJIT_HD constexpr int wgrad_scratch_pitch(int dp) { return dp + 4; }
LKJIT_HD constexpr WgradLayout wgrad_layout(int dp, int isplit, int wpb, int cpb, bool fuse_dx, int threads,
                                            int t_bytes, int op_bytes) {
  const int dpi = dp / isplit;
  const int x_bytes = align16(cpb * wpb * operand_pitch(dpi, t_bytes) * t_bytes);
  const int g_bytes = align16(cpb * wpb * operand_pitch(dp, t_bytes) * t_bytes);
  const int dx_bytes = fuse_dx ? align16(cpb * wpb * staging_pitch(dpi) * t_bytes) : 0;
  const int s_bytes = align16(cpb * dpi * wgrad_scratch_pitch(dp) * 4);
  const int tiles = max_i(x_bytes + g_bytes + dx_bytes, s_bytes);
  const int bt_bytes = fuse_dx ? align16(cpb * dpi * operand_pitch(dp, op_bytes) * op_bytes) : 0;
  const int red_bytes = align16(cpb * threads * 4);
  const int tab_bytes = kTables * wpb * (int)sizeof(WinEntry<3>);
  return WgradLayout{0, x_bytes, x_bytes + g_bytes, 0, tiles, tiles + bt_bytes, tiles + bt_bytes + red_bytes,
                     tiles + bt_bytes + red_bytes + tab_bytes};
}

// ---- partial sums of the backward -----------------------------------------------------------------------
// Values a channel's partial row holds: K taps (table mode, dR) or d*d entries of dM (dense mode).
LKJIT_HD constexpr int partial_values(int mode, int wh, int ww) {
  return mode == kModeTable ? table_size(wh, ww) : wh * ww * wh * ww;
}
// Partial rows per channel: one per (chunk, part) in table mode (each i-part adds to every tap); one per
// chunk in dense mode (the parts own disjoint rows i of dM).
LKJIT_HD constexpr int partial_rows(int mode, int chunks, int isplit) { return mode == kModeTable ? chunks * isplit : chunks; }
LKJIT_HD constexpr int partial_row(int mode, int chunk, int part, int isplit) {
  return mode == kModeTable ? chunk * isplit + part : chunk;
}
// Value v of channel c in partial row s: part[(s*C + c)*nv + v]; dbias's: part_bias[chunk*C + c]. The
// reduce kernel sums rows s = 0, 1, ... in order, so a launch's result is the same bits every run.
LKJIT_HD constexpr long long partial_index(int s, int c, int v, int C, int nv) {
  return ((long long)s * C + c) * nv + v;
}

}  // namespace wbmm
}  // namespace lkjit
