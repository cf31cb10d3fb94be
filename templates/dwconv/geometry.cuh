// Index math of the depthwise-convolution kernels, shared by the templates (NVRTC) and the CPU tests (g++):
// output extents, 'same' padding, the per-axis map from a thread's outputs to the input window it reads
// (forward, dgrad as the rotated forward, dgrad gather at stride 2), tile spans, thread -> output
// assignment, chunking of wgrad's reduction and the partial-buffer index. No system headers.
//
// The op (docs/dwconv.md), one spatial axis at a time (the two axes are independent):
//   forward   y[i]  = sum_u w[u] x[i*s + u*d - p]                          i < n_out
//   dgrad     dx[h] = sum_u w[u] dy[(h + p - u*d) / s]   (terms where the division is exact, in range)
//   wgrad     dw[u] = sum_i dy[i] x[i*s + u*d - p]
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define LKJIT_DWC_HD __host__ __device__
#else
#define LKJIT_DWC_HD
#endif

namespace lkjit {
namespace dwc {

enum { kMaxK = 63, kMaxDil = 4, kMaxStride = 2 };

LKJIT_DWC_HD constexpr int gcd(int a, int b) { return b == 0 ? a : gcd(b, a % b); }
LKJIT_DWC_HD constexpr int cdiv(int a, int b) { return (a + b - 1) / b; }
LKJIT_DWC_HD constexpr int round_up(int a, int m) { return (a + m - 1) / m * m; }
LKJIT_DWC_HD constexpr int imin(int a, int b) { return a < b ? a : b; }
LKJIT_DWC_HD constexpr int imax(int a, int b) { return a > b ? a : b; }
LKJIT_DWC_HD constexpr long long floor_div(long long a, long long b) {  // b > 0
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}

// Output extent of one axis: floor((n + pad_before + pad_after - d(k-1) - 1) / s) + 1, or 0 where the
// padded input is shorter than the dilated filter (no output: the host rejects that).
LKJIT_DWC_HD constexpr long long out_extent(long long n, int k, int s, int d, int pad_before, int pad_after) {
  return n + pad_before + pad_after - (long long)d * (k - 1) - 1 < 0
             ? 0
             : (n + pad_before + pad_after - (long long)d * (k - 1) - 1) / s + 1;
}
// padding='same' (stride 1): total d(k-1), floor of half before and the rest after (PyTorch's rule: an
// even k pads one more at the bottom/right).
LKJIT_DWC_HD constexpr int same_pad_before(int k, int d) { return d * (k - 1) / 2; }
LKJIT_DWC_HD constexpr int same_pad_after(int k, int d) { return d * (k - 1) - d * (k - 1) / 2; }

// How a kernel walks one axis.
enum AxisMode {
  kFwd = 0,     // forward: output i reads x[i*s - p + u*d]
  kFlip = 1,    // dgrad at stride 1: the forward over dy with the taps reversed and the padding mirrored,
                // p' = d(k-1) - p: dx[h] = sum_a w[k-1-a] dy[h - p' + a*d]
  kGather = 2,  // dgrad at stride 2, gathered: output h takes the taps u with (h + p - u*d) even. Split by
                // the class r = (h + p) & 1 into polyphase sub-filters (below).
};

// One axis of a kernel: which input indices a thread's outputs read and with which forward taps.
// A thread owns R outputs o_f + j*ostep() (j < R); output j and sub-tap a (a < taps()) read input index
//   base(o_f) + dd() * (j*estep() + a)
// so the R outputs of a thread share one register window of (R-1)*estep() + taps() inputs. The spacing
// ostep() is what makes that window dense: at stride s and dilation d the outputs are d/gcd(s,d) apart
// (stride 1, d = 2: outputs 0, 2, 4 read 0+2a, 2+2a, 4+2a, window step 1 in units of d).
//
// Gather (stride 2). For d odd, class r takes the taps u = 2b + r; its outputs read
// dy[(h + p - r*d)/2 - b*d], b < n_r = (k + 1 - r)/2. Reversed (a = NA-1-b, NA = (k+1)/2) it is a
// forward correlation with dilation d over dy: base(h) = (h + p - r*d)/2 - (NA-1)*d, and the sub-filter
// tap a is u = 2(NA-1-a) + r, absent (zero) where u >= k. For d even every u*d is even: class 0 takes
// all k taps, dy[(h + p)/2 - u*d/2] (dilation d/2), and class 1 none (its dx is zero).
// A thread's outputs keep one class: ostep() = 2*dd() is even.
struct AxisMap {
  int mode;  // AxisMode
  int k;     // forward filter extent
  int s;     // forward stride
  int d;     // forward dilation
  int p;     // forward padding before (runtime; the compile-time members ignore it)

  LKJIT_DWC_HD constexpr int taps() const { return mode == kGather ? (d % 2 ? (k + 1) / 2 : k) : k; }
  LKJIT_DWC_HD constexpr int dd() const { return mode == kGather && d % 2 == 0 ? d / 2 : d; }
  LKJIT_DWC_HD constexpr int ostep() const {
    return mode == kFwd ? d / gcd(s, d) : mode == kFlip ? d : 2 * dd();
  }
  LKJIT_DWC_HD constexpr int estep() const { return mode == kFwd ? s / gcd(s, d) : 1; }
  LKJIT_DWC_HD constexpr int classes() const { return mode == kGather ? 2 : 1; }
  // Padding seen by the walk: the forward's, or the mirrored one of the rotated forward.
  LKJIT_DWC_HD constexpr int walk_pad() const { return mode == kFlip ? d * (k - 1) - p : p; }
  // Input-index delta of class 1 against class 0 in base(): d (odd d) or 1 (even d; class 1 has no taps).
  LKJIT_DWC_HD constexpr int delta() const { return d % 2 ? d : 1; }

  LKJIT_DWC_HD constexpr int cls(long long o) const { return mode == kGather ? (int)((o + p) & 1) : 0; }
  LKJIT_DWC_HD constexpr long long base(long long o) const {
    return mode == kFwd    ? o * s - p
           : mode == kFlip ? o - walk_pad()
                           : (o + p - cls(o) * delta()) / 2 - (long long)(taps() - 1) * dd();
  }
  // Forward filter index of sub-tap a for outputs of class r, or -1 where that term does not exist.
  LKJIT_DWC_HD constexpr int tap(int r, int a) const {
    return mode == kFwd    ? a
           : mode == kFlip ? k - 1 - a
           : d % 2         ? (2 * (taps() - 1 - a) + r < k ? 2 * (taps() - 1 - a) + r : -1)
                           : (r == 0 ? k - 1 - a : -1);
  }

  // Input indices [lo, hi] that the outputs [o0, o0 + n) read through sub-taps [a0, a1) (n >= 1, a1 > a0).
  // base() is monotone in the forward walks; in the gather it is monotone per class, so both classes'
  // first and last outputs bound it.
  LKJIT_DWC_HD constexpr long long span_lo(long long o0, int n, int a0) const {
    return (mode == kGather && n > 1 && base(o0 + 1) < base(o0) ? base(o0 + 1) : base(o0)) + (long long)dd() * a0;
  }
  LKJIT_DWC_HD constexpr long long span_hi(long long o0, int n, int a1) const {
    return (mode == kGather && n > 1 && base(o0 + n - 2) > base(o0 + n - 1) ? base(o0 + n - 2) : base(o0 + n - 1)) +
           (long long)dd() * (a1 - 1);
  }
  // An upper bound of span_hi - span_lo + 1 over every o0 and p: the rows (or columns) a shared-memory
  // stage of n outputs x na sub-taps needs. Forward walks: (n-1)*step + (na-1)*dd + 1 exactly. Gather:
  // the bases of n consecutive outputs (both classes) lie within (n - 1 + delta)/2 of each other.
  LKJIT_DWC_HD constexpr int span_max(int n, int na) const {
    return (mode == kFwd ? (n - 1) * s : mode == kFlip ? n - 1 : (n - 1 + delta()) / 2) + (na - 1) * dd() + 1;
  }

  // The first output of thread slot idx (idx < n / R) in a tile of n outputs from o0, n a multiple of
  // R*ostep(): slots come in groups of ostep(), each group spanning R*ostep() consecutive outputs, so
  // every output of the tile is owned by exactly one slot.
  LKJIT_DWC_HD constexpr long long first_out(long long o0, int idx, int R) const {
    return o0 + (long long)(idx / ostep()) * R * ostep() + idx % ostep();
  }
};

// The axis maps of a kernel pass: forward, and dgrad (flip at stride 1, gather at stride 2).
LKJIT_DWC_HD constexpr AxisMap fwd_axis(int k, int s, int d, int p) { return AxisMap{kFwd, k, s, d, p}; }
LKJIT_DWC_HD constexpr AxisMap dgrad_axis(int k, int s, int d, int p) {
  return AxisMap{s == 1 ? kFlip : kGather, k, s, d, p};
}

LKJIT_DWC_HD constexpr int tiles(long long n, int t) { return (int)((n + t - 1) / t); }

// wgrad's reduction is split into `chunks` contiguous, balanced ranges of the `total` work units of a
// channel (units: (b, tile) pairs or (b, row) pairs, per kernel; total < 2^31, which the generator checks):
// chunk ch is [begin(ch), begin(ch+1)), the first total % chunks chunks one unit longer. 32-bit: a 64-bit
// division is a subroutine call on the GPU. Empty chunks (chunks > total) still write their zero partials.
LKJIT_DWC_HD constexpr int chunk_begin(int total, int chunks, int ch) {
  return ch * (total / chunks) + imin(ch, total % chunks);
}

// Partial buffer (DWConvParams::partial): value tap (< kh*kw + 1; the last is dbias) of channel c, chunk ch.
LKJIT_DWC_HD constexpr long long part_index(const long long (&st)[3], int ch, int c, int tap) {
  return ch * st[0] + c * st[1] + tap * st[2];
}
// The two layouts: channel-major (the NCHW wgrad: one block per (c, chunk) writes a contiguous run of
// taps+1 values) and channel-innermost (the NHWC wgrad: consecutive lanes on consecutive channels).
struct PartStrides {
  long long st[3];
};
LKJIT_DWC_HD constexpr PartStrides part_strides_direct(int /*C*/, int chunks, int taps) {
  return PartStrides{{(long long)taps + 1, (long long)chunks * (taps + 1), 1}};
}
LKJIT_DWC_HD constexpr PartStrides part_strides_nhwc(int C, int /*chunks*/, int taps) {
  return PartStrides{{(long long)(taps + 1) * C, 1, (long long)C}};
}
LKJIT_DWC_HD constexpr long long part_floats(int C, int chunks, int taps) { return (long long)C * chunks * (taps + 1); }


// ---- Shared-memory layouts (floats; every region starts 16-byte aligned) ----------------------------------
// One definition for the kernels (which carve their dynamic shared memory with it) and the generator (which
// sizes the launch and rejects tiles with it).

// dwconv_direct (templates/dwconv/direct.cuh), forward or dgrad: an output tile th x tw of one (b, c) plane,
// ry x rx outputs a thread. Sub-filters ws [classes][nay][naxp], then a ring of `ring` input rows of
// `pitch` floats; the sub-tap rows stream through the ring kc at a time (kc = nay: one stage).
struct DirectLayout {
  AxisMap ay, ax;
  int th, tw, ry, rx, kc;
  LKJIT_DWC_HD constexpr int nay() const { return ay.taps(); }
  LKJIT_DWC_HD constexpr int nax() const { return ax.taps(); }
  LKJIT_DWC_HD constexpr int stages() const { return cdiv(nay(), kc); }
  LKJIT_DWC_HD constexpr int classes() const { return ay.classes() * ax.classes(); }
  LKJIT_DWC_HD constexpr int naxp() const { return round_up(nax(), 4); }  // weight row pitch (float4 loads)
  LKJIT_DWC_HD constexpr int bc() const { return imin(nax(), 16); }     // window chunk: sub-taps per register window
  LKJIT_DWC_HD constexpr int win() const { return (rx - 1) * ax.estep() + bc(); }  // window registers
  LKJIT_DWC_HD constexpr int ring() const { return ay.span_max(th, kc); }
  LKJIT_DWC_HD constexpr int cols() const { return ax.span_max(tw, nax()); }
  // Row pitch: the span rounded to float4, plus one float4 of slack for the last window's rounding.
  LKJIT_DWC_HD constexpr int pitch() const { return round_up(cols(), 4) + 4; }
  LKJIT_DWC_HD constexpr int items() const { return (th / ry) * (tw / rx); }
  LKJIT_DWC_HD constexpr int ws_floats() const { return classes() * nay() * naxp(); }
  LKJIT_DWC_HD constexpr int floats() const { return ws_floats() + ring() * pitch(); }
  // Window loads as float4: dense columns (dilation 1, no gather) and every thread's first column at a
  // multiple of 4 from the staged origin.
  LKJIT_DWC_HD constexpr bool vec() const { return ax.mode != kGather && ax.d == 1 && (rx * ax.estep()) % 4 == 0; }
  LKJIT_DWC_HD constexpr bool valid() const {
    return th >= 1 && tw >= 1 && ry >= 1 && rx >= 1 && th % (ry * ay.ostep()) == 0 && tw % (rx * ax.ostep()) == 0 &&
           kc >= 1 && kc <= nay();
  }
};
// Stage `stage` of a tile whose first output row is o0 (direct.cuh): sub-tap rows [a0, a1), and the input rows
// it needs, [lo, hi) relative to the tile's first input row (ay.span_lo(o0, th, 0)). Row r lives in ring slot
// r % ring(); a stage loads [max(lo, the previous stage's hi), hi), which never overwrites a row it needs
// (hi - lo <= ring()).
struct RingStage {
  int a0, a1, lo, hi;
};
LKJIT_DWC_HD constexpr RingStage ring_stage(const AxisMap& ay, long long o0, int th, int kc, int stage) {
  return RingStage{stage * kc, imin(ay.taps(), (stage + 1) * kc), ay.dd() * stage * kc,
                   (int)(ay.span_hi(o0, th, imin(ay.taps(), (stage + 1) * kc)) - ay.span_lo(o0, th, 0)) + 1};
}

LKJIT_DWC_HD constexpr DirectLayout direct_layout(int mode, int kh, int kw, int s, int d, int th, int tw, int ry,
                                                  int rx, int kc) {
  return DirectLayout{AxisMap{mode, kh, s, d, 0}, AxisMap{mode, kw, s, d, 0}, th, tw, ry, rx, kc};
}

// dwconv_nhwc (templates/dwconv/nhwc.cuh): cl channel lanes x cv channels a thread = cb channels a block.
// Sub-filters ws [classes][nay][nax][cbp], channel innermost (a lane's cv weights of a tap are adjacent);
// cbp = cb + cv spreads the staging stores (taps innermost in global) over the banks.
struct NhwcLayout {
  AxisMap ay, ax;
  int th, tw, ry, rx, cl, cv;
  LKJIT_DWC_HD constexpr int nay() const { return ay.taps(); }
  LKJIT_DWC_HD constexpr int nax() const { return ax.taps(); }
  LKJIT_DWC_HD constexpr int classes() const { return ay.classes() * ax.classes(); }
  LKJIT_DWC_HD constexpr int cb() const { return cl * cv; }
  LKJIT_DWC_HD constexpr int cbp() const { return cl * cv + cv; }
  LKJIT_DWC_HD constexpr int bc() const { return imin(nax(), 8); }
  LKJIT_DWC_HD constexpr int win() const { return (rx - 1) * ax.estep() + bc(); }  // window entries (cv floats each)
  LKJIT_DWC_HD constexpr int items() const { return (th / ry) * (tw / rx); }
  LKJIT_DWC_HD constexpr int floats() const { return round_up(classes() * nay() * nax() * cbp(), 4); }
  LKJIT_DWC_HD constexpr bool valid() const {
    return th >= 1 && tw >= 1 && ry >= 1 && rx >= 1 && th % (ry * ay.ostep()) == 0 && tw % (rx * ax.ostep()) == 0 &&
           cl >= 1 && cv >= 1;
  }
};
LKJIT_DWC_HD constexpr NhwcLayout nhwc_layout(int mode, int kh, int kw, int s, int d, int th, int tw, int ry, int rx,
                                              int cl, int cv) {
  return NhwcLayout{AxisMap{mode, kh, s, d, 0}, AxisMap{mode, kw, s, d, 0}, th, tw, ry, rx, cl, cv};
}

// dwconv_wgrad_direct (templates/dwconv/wgrad_direct.cuh): a dy tile th x tw and the x rows and columns it
// meets through kc tap rows; a thread owns ru x rv taps (items of the stage's tap grid) and a split of the
// tile's (row, jc-column) pairs. Regions: gs [th][gpitch] | union(xs [xrows][xpitch], red [splits][items][ru*rv])
// | dbias sums [threads].
struct WgradDirectLayout {
  int kh, kw, s, d, th, tw, ru, rv, kc, threads;
  LKJIT_DWC_HD constexpr int jc() const { return tw % 8 == 0 ? 8 : 4; }
  LKJIT_DWC_HD constexpr int stages() const { return cdiv(kh, kc); }
  LKJIT_DWC_HD constexpr int ucp() const { return round_up(kc, ru); }
  LKJIT_DWC_HD constexpr int vp() const { return round_up(kw, rv); }
  LKJIT_DWC_HD constexpr int items() const { return (ucp() / ru) * (vp() / rv); }
  LKJIT_DWC_HD constexpr int splits() const { return threads / items(); }
  LKJIT_DWC_HD constexpr int pairs() const { return th * (tw / jc()); }
  LKJIT_DWC_HD constexpr int xrows() const { return (th - 1) * s + (ucp() - 1) * d + 1; }
  LKJIT_DWC_HD constexpr int xcols() const { return (tw - 1) * s + (vp() - 1) * d + 1; }
  LKJIT_DWC_HD constexpr int xpitch() const { return round_up(xcols(), 4) + 4; }
  LKJIT_DWC_HD constexpr int gpitch() const { return round_up(tw, 4); }
  LKJIT_DWC_HD constexpr int win() const { return (jc() - 1) * s + (rv - 1) * d + 1; }
  LKJIT_DWC_HD constexpr int gs_floats() const { return th * gpitch(); }
  LKJIT_DWC_HD constexpr int xs_floats() const { return xrows() * xpitch(); }
  LKJIT_DWC_HD constexpr int red_floats() const { return round_up(splits() * items() * ru * rv, 4); }
  LKJIT_DWC_HD constexpr int floats() const { return gs_floats() + imax(xs_floats(), red_floats()) + threads; }
  // float4 loads of g rows and x windows: dense, and every window starting at a multiple of 4.
  LKJIT_DWC_HD constexpr bool vec() const { return s == 1 && d == 1 && rv % 4 == 0; }
  LKJIT_DWC_HD constexpr bool valid() const {
    return th >= 1 && tw >= 4 && tw % 4 == 0 && ru >= 1 && rv >= 1 && kc >= 1 && kc <= kh && items() <= threads;
  }
};

// dwconv_wgrad_nhwc (templates/dwconv/wgrad_nhwc.cuh): cl channel lanes x cv channels a thread; a task is
// one tap row u and vc consecutive taps of it, tasks spread over the threads / cl groups. Register window:
// jb consecutive dy columns of one phase (below) against vc taps. No shared memory.
struct WgradNhwcLayout {
  AxisMap ax;  // the forward walk of the width: dy column j reads x column j*s - pw + v*d
  int kh, kw, cl, cv, vc, threads;
  LKJIT_DWC_HD constexpr int jb() const { return 8; }
  LKJIT_DWC_HD constexpr int nvc() const { return cdiv(kw, vc); }
  LKJIT_DWC_HD constexpr int tasks() const { return kh * nvc(); }
  LKJIT_DWC_HD constexpr int groups() const { return threads / cl; }
  // Phases: dy columns j = phase + jj*ostep read x columns base(phase) + d*(jj*estep + v), a dense window.
  LKJIT_DWC_HD constexpr int win() const { return (jb() - 1) * ax.estep() + vc; }
  LKJIT_DWC_HD constexpr bool valid() const { return cl >= 1 && cv >= 1 && vc >= 1 && vc <= kw && threads % cl == 0; }
};
LKJIT_DWC_HD constexpr WgradNhwcLayout wgrad_nhwc_layout(int kh, int kw, int s, int d, int cl, int cv, int vc,
                                                         int threads) {
  return WgradNhwcLayout{AxisMap{kFwd, kw, s, d, 0}, kh, kw, cl, cv, vc, threads};
}

// ---- The tensor-core kernels (dwconv/mma.cuh) ------------------------------------------------------------
// The Toeplitz form of a stride-1, dilation-1 correlation on mma.sync m16n8k16, the fragment coordinates and
// the shared-memory layout.
//
// One filter row u at a time, 16 output rows i and a group of 16 output columns j (two n8 tiles) are a product
//   Y[i, j] += sum_m X_u[i, m] T_u[m, j],   X_u[i, m] = in[i0 + i + u - ph, j0 + m - pw],   T_u[m, j] = w[u, m - j]
// with T_u zero where m - j is outside [0, kw): (16 x K) times (K x 16), K = 16 + kw - 1 rounded up to whole
// k16 steps (mma_ksteps; any 8 columns of the group need the same steps). Tensor-core MACs per output and
// filter row: 16 ksteps against kw useful ones (48 / 31 = 1.55x at kw = 31; twice that for the two weight
// parts below). dgrad at stride 1 is the same walk over dy with the filter rotated 180 degrees and the padding
// mirrored (k - 1 - p).
//
// Weights: the fp32 filter split into two 16-bit parts, w = hi + lo (lo scaled for fp16: mma_lo_scale), and both
// products taken. The activations are exact in their 16-bit dtype and each product is exact in fp32, so the
// result carries the fp32 weights to within 2^-18 (bf16) or 2^-22 (fp16) of each tap, where a single 16-bit
// copy of the weights would round each tap by 2^-9 / 2^-12.
//
// Fragments (PTX ISA, mma.m16n8k16, lane = 4g + t): A registers a0..a3 hold (row g, cols 2t, 2t+1),
// (row g+8, same cols), (row g, cols 2t+8, 2t+9), (row g+8, cols 2t+8, 2t+9); B registers b0, b1 hold
// (k rows 2t, 2t+1 of column g), (k rows 2t+8, 2t+9); the accumulators c0..c3 (row g, cols 2t, 2t+1),
// (row g+8, cols 2t, 2t+1). Register halves: the lower 16 bits are the first element.

// k16 steps of input columns a group of 16 output columns reads: ceil((16 + kw - 1) / 16).
LKJIT_DWC_HD constexpr int mma_ksteps(int kw) { return (kw + 30) / 16; }

// The filter tap v (filter column; T_u[m, j] = w[u, v], v = m - j) of element e (0, 1) of B register r (0, 1)
// of `lane`, at k-step s, n-tile h (columns 8h .. 8h+7 of the group). e = 1 is always v + 1.
LKJIT_DWC_HD constexpr int mma_b_tap(int s, int h, int lane, int r, int e) {
  return 16 * s + 8 * r + 2 * (lane & 3) + e - 8 * h - (lane >> 2);
}
// Row and column within a 16 x 16 A block of element e of A register r (0..3) of `lane`.
LKJIT_DWC_HD constexpr int mma_a_row(int lane, int r) { return (lane >> 2) + 8 * (r & 1); }
LKJIT_DWC_HD constexpr int mma_a_col(int lane, int r, int e) { return 2 * (lane & 3) + 8 * (r >> 1) + e; }
// Row and column within a 16 x 8 n-tile of accumulator q (0..3) of `lane`.
LKJIT_DWC_HD constexpr int mma_c_row(int lane, int q) { return (lane >> 2) + 8 * (q >> 1); }
LKJIT_DWC_HD constexpr int mma_c_col(int lane, int q) { return 2 * (lane & 3) + (q & 1); }
// The A-block row and column whose address `lane` gives ldmatrix.x4 (matrix lane / 8: rows 8 (q & 1),
// columns 8 (q >> 1)), so that its four registers are a0..a3 above.
LKJIT_DWC_HD constexpr int ldsm_row(int lane) { return (lane & 7) + 8 * ((lane >> 3) & 1); }
LKJIT_DWC_HD constexpr int ldsm_col(int lane) { return 8 * (lane >> 4); }

// Where a block's weights and input tile live (bytes from the dynamic shared memory's start, 16-byte aligned):
//   whi, wlo  kh x wrow() 32-bit words each: word e of row u packs taps e - kWOff and e - kWOff + 1 of the
//             (rotated, for dgrad) filter row u, hi or lo parts, zero outside [0, kw): every B register is
//             one word at index mma_b_tap(s, h, lane, r, 0) + kWOff
//   xs        rows() x pitch() 16-bit elements: the input rows [row_lo, row_lo + rows()) and columns
//             [col_lo, col_lo + cols()) of the tile, zero outside the input. pitch() * 2 bytes is an odd
//             multiple of 16, so the eight 16-byte rows an ldmatrix phase reads fall in distinct bank groups.
// The tile (tile_h x tile_w outputs) is warps_m x warps_n warps of (16 mt) x (16 nt) outputs each.
struct MmaLayout {
  enum { kWOff = 16 };
  int kh, kw, tile_h, tile_w;
  LKJIT_DWC_HD constexpr int ksteps() const { return mma_ksteps(kw); }
  LKJIT_DWC_HD constexpr int rows() const { return tile_h + kh - 1; }
  LKJIT_DWC_HD constexpr int cols() const { return tile_w + 16 * (ksteps() - 1); }
  LKJIT_DWC_HD constexpr int pitch() const { return cols() + 8; }  // cols() is a multiple of 16
  LKJIT_DWC_HD constexpr int wrow() const { return 16 * ksteps() + kWOff; }
  LKJIT_DWC_HD constexpr int w_bytes() const { return 2 * kh * wrow() * 4; }
  LKJIT_DWC_HD constexpr int xs_offset() const { return w_bytes(); }
  LKJIT_DWC_HD constexpr int bytes() const { return w_bytes() + rows() * pitch() * 2; }
  // A tile is whole 16 x 16 blocks of outputs.
  LKJIT_DWC_HD constexpr bool valid() const { return tile_h % 16 == 0 && tile_w % 16 == 0 && tile_h > 0 && tile_w > 0; }
};

// The lo parts' scale: fp16's are multiplied by 2^11 into its normal range (a weight's remainder is about 2^-11 of
// it, subnormal in fp16 for weights below ~0.03) and their products summed in accumulators of their own, which
// the kernel scales back at the end; bf16 has fp32's exponent range, so its lo products share the accumulators.
LKJIT_DWC_HD constexpr float mma_lo_scale(bool f16) { return f16 ? 2048.f : 1.f; }

// Padding the walk sees: the forward's, or dgrad's mirrored k - 1 - p (stride 1, dilation 1; negative where the
// padding exceeds the filter, which only shifts the input tile).
LKJIT_DWC_HD constexpr int mma_walk_pad(bool dgrad, int k, int p) { return dgrad ? k - 1 - p : p; }
// Filter tap (u, v) of the walk as an index into nn.Conv2d's (kh, kw) filter: itself, or rotated for dgrad.
LKJIT_DWC_HD constexpr int mma_filter_index(bool dgrad, int kh, int kw, int u, int v) {
  return dgrad ? (kh - 1 - u) * kw + (kw - 1 - v) : u * kw + v;
}

// dwconv_wgrad_mma (templates/dwconv/wgrad_mma.cuh): the weight gradient of a stride-1, dilation-1 correlation on
// mma.sync m16n8k16. For a dy tile (rows [o0y, o0y + th), columns [o0x, o0x + tw)) and each x row r of the rows it
// meets, rr = r - (o0y - ph) in [0, th + kh - 1):
//   dW[u, v] += sum_j A_r[u, j] B_r[j, v],   A_r[u, j] = dy[r + ph - u, o0x + j] (zero outside the tile),
//                                             B_r[j, v] = x[r, o0x + j + v - pw]
// with M = 16 filter rows u, N = 8 filter columns v, K = 16 dy columns j. Every product is a term of the op except
// the padding taps u >= kh, v >= kw and the zero rows outside the tile, and a product of two 16-bit values is exact
// in fp32: the sums are fp32 sums of exact terms, as in the FFMA kernels.
// Regions (each 16-byte aligned): gs, grows() x gpitch() 16-bit: the dy tile at rows mp() - 1 .. (zero above and
// below, so that A row u of block mu is gs row rr - 16 mu - u + mp() - 1); xs and xo, xrows() x xpitch() 16-bit:
// the x rows of the tile (zero outside x) and the same shifted by one element (xo[k] = xs[k + 1]), so that every B
// register, an element pair at an offset of either parity, is one aligned word; red, over the same bytes once the
// chunk is done: ksplit x mp() x np() floats, the K-split warps' sums; then threads floats of dbias sums.
struct WgradMmaLayout {
  int kh, kw, th, tw, ksplit, threads;
  LKJIT_DWC_HD constexpr int mu() const { return cdiv(kh, 16); }  // m16 blocks of filter rows
  LKJIT_DWC_HD constexpr int nv() const { return cdiv(kw, 8); }   // n8 blocks of filter columns
  LKJIT_DWC_HD constexpr int mp() const { return 16 * mu(); }
  LKJIT_DWC_HD constexpr int np() const { return 8 * nv(); }
  LKJIT_DWC_HD constexpr int xrows() const { return th + kh - 1; }
  LKJIT_DWC_HD constexpr int grows() const { return xrows() + mp() - 1; }
  LKJIT_DWC_HD constexpr int gpitch() const { return tw + 8; }  // an odd number of 16-byte units (tw % 16 == 0)
  LKJIT_DWC_HD constexpr int xpitch() const { return tw + np() + 8; }
  LKJIT_DWC_HD constexpr int gs_bytes() const { return round_up(grows() * gpitch() * 2, 16); }
  LKJIT_DWC_HD constexpr int xs_bytes() const { return round_up(xrows() * xpitch() * 2, 16); }
  LKJIT_DWC_HD constexpr int red_bytes() const { return ksplit * mp() * np() * 4; }
  LKJIT_DWC_HD constexpr int xs_offset() const { return gs_bytes(); }
  LKJIT_DWC_HD constexpr int xo_offset() const { return gs_bytes() + xs_bytes(); }
  LKJIT_DWC_HD constexpr int dbias_offset() const { return imax(gs_bytes() + 2 * xs_bytes(), red_bytes()); }
  LKJIT_DWC_HD constexpr int bytes() const { return dbias_offset() + threads * 4; }
  LKJIT_DWC_HD constexpr bool valid() const { return th >= 1 && tw >= 16 && tw % 16 == 0 && ksplit >= 1; }
};
// The xs element offset of element 0 of B register r (0, 1) of `lane` for dy column block jb, filter column block nv
// (B[k][n] = xs[rr][16 jb + k + 8 nv + n], k = 2t + 8r + e, n = g).
LKJIT_DWC_HD constexpr int wgrad_mma_b_offset(int jb, int nv, int lane, int r) {
  return 16 * jb + 8 * nv + 2 * (lane & 3) + 8 * r + (lane >> 2);
}
// The gs row of A row u (within block mu) at x region row rr.
LKJIT_DWC_HD constexpr int wgrad_mma_a_row(int rr, int mu, int u, int mp) { return rr - 16 * mu - u + mp - 1; }
// Whether filter-row block mu meets the dy tile at x region row rr (some u of the block has 0 <= rr - u < th): the
// others multiply zeros only, and are skipped.
LKJIT_DWC_HD constexpr bool wgrad_mma_live(int rr, int mu, int th) { return rr >= 16 * mu && rr < th + 16 * mu + 15; }

}  // namespace dwc
}  // namespace lkjit
