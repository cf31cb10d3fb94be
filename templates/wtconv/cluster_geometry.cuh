// Index math of the plane kernels' channels_last mode, shared by the templates (NVRTC), the generator's
// rules and the CPU tests (g++). No system headers.
//
// A thread-block cluster of `ranks` blocks, `planes` plane groups each, holds ranks x planes consecutive
// channels of one image. In a channels_last tensor those channels of one pixel are adjacent, so the
// cluster reads (and writes) each pixel's run of channels in pieces of up to 16 bytes, and moves every
// element to (from) the shared memory of the block and group that owns its channel through distributed
// shared memory (sm_90). Channel ch of the cluster (0 <= ch < ranks x planes) lives in block ch / planes,
// group ch % planes: the blocks of a cluster are consecutive in the grid, and so are the groups of a block.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define LKJIT_WTC_HD __host__ __device__
#else
#define LKJIT_WTC_HD
#endif

namespace lkjit {
namespace wtc {

enum { kMaxClusterRanks = 8, kMaxPieceBytes = 16 };  // portable cluster size; widest global access

struct ClusterNhwc {
  int ranks;   // blocks per cluster (>= 2)
  int planes;  // plane groups per block
  int esize;   // bytes per activation element (2 or 4)

  LKJIT_WTC_HD constexpr int channels() const { return ranks * planes; }
  // Bytes of one access: the pixel's whole run of channels, at most 16.
  LKJIT_WTC_HD constexpr int piece_bytes() const {
    return channels() * esize < kMaxPieceBytes ? channels() * esize : kMaxPieceBytes;
  }
  LKJIT_WTC_HD constexpr int piece_elems() const { return piece_bytes() / esize; }
  LKJIT_WTC_HD constexpr int pieces() const { return channels() / piece_elems(); }  // accesses per pixel
  LKJIT_WTC_HD constexpr int rank_of(int ch) const { return ch / planes; }
  LKJIT_WTC_HD constexpr int group_of(int ch) const { return ch % planes; }
  // Item i of a plane's h x w pixels: pixel i / pieces(), piece i % pieces() (pixel-major, so consecutive
  // threads read one pixel's run, then the next pixel's).
  LKJIT_WTC_HD constexpr int items(int h, int w) const { return h * w * pieces(); }
  LKJIT_WTC_HD constexpr int pixel_of(int i) const { return i / pieces(); }
  LKJIT_WTC_HD constexpr int channel_of(int i, int e) const { return (i % pieces()) * piece_elems() + e; }
};

// Why a (ranks, planes, dtype) cannot run a layer of C channels, as a code (0: it can): 1 ranks outside
// [2, 8] or not a power of two; 2 planes not a power of two; 3 accesses below 4 bytes; 4 C not a multiple
// of the cluster's channels (a cluster would straddle two images).
LKJIT_WTC_HD constexpr int cluster_reject(int ranks, int planes, int esize, long long C) {
  return (ranks < 2 || ranks > kMaxClusterRanks || (ranks & (ranks - 1)) != 0)  ? 1
         : (planes < 1 || (planes & (planes - 1)) != 0)                          ? 2
         : ClusterNhwc{ranks, planes, esize}.piece_bytes() < 4                    ? 3
         : C % (ranks * planes) != 0                                             ? 4
                                                                                 : 0;
}

// Whether an activation (strides st in B, C, H, W order, elements; base address addr) can be read in the
// cluster's pieces: channels adjacent, and every piece's start aligned to its size (the pointer, the image,
// row and pixel strides; a cluster's first channel is a multiple of channels() >= piece_elems()).
LKJIT_WTC_HD constexpr bool cluster_reads(const ClusterNhwc& c, const long long (&st)[4], unsigned long long addr) {
  return st[1] == 1 && addr % (unsigned long long)c.piece_bytes() == 0 &&
         (st[0] * c.esize) % c.piece_bytes() == 0 && (st[2] * c.esize) % c.piece_bytes() == 0 &&
         (st[3] * c.esize) % c.piece_bytes() == 0;
}

}  // namespace wtc
}  // namespace lkjit
