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

}  // namespace dwc
}  // namespace lkjit
