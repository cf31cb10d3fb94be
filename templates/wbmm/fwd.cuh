// WBMM forward, and dX (Cfg::rotate): per channel c and window n, Y[n, j] = sum_i T[n, i] M[c, i, j]
// (+ T[n, j] with the identity shortcut, + bias[c]) (Song et al., ICML 2026; docs/wbmm.md). dX is the same
// product on dY with M_c^T, the M of the 180-degree-rotated table, plus the identity: one kernel.
//
// Block (chunk, channel group, column part) = (blockIdx.x, .y, .z), .x and .y swapped in NHWC order
// (common.cuh): Cfg::cpb channels, a chunk of p.chunk_tiles tiles of WPB = 16 mt wm consecutive windows,
// and the output positions j of part z: dp / nsplit of them (M_c tiled along its columns; or along its rows,
// K-tiled, below). A group of wm x wn warps per channel; warp (wmi, wni) computes windows
// 16 mt wmi .. 16 mt (wmi + 1) - 1 and the wni-th slice of the part's columns.
//   once:     B = M_c (or its part) built on chip from R (or read from dense M), identity folded into the
//             diagonal if Cfg::fold_identity; never written to device memory. K-tiled (Cfg::kchunk = kc > 0):
//             rows k of B in chunks of kc through two buffers instead, rebuilt every tile, chunk g + 1
//             built while chunk g's products run (a barrier after every chunk but a tile's last, whose
//             barrier is the epilogue's).
//   per tile: global -> registers (window partition fused into the loads, Cfg::vec elements an access
//             where the tile's columns are runs; the next tile's loads in flight during this tile's
//             products with stages = 2) -> A in shared memory -> warp products
//             (mma.sync, wgmma with Cfg::wgmma, or FFMA) -> + identity (accumulator init, exact) + bias -> staging -> global
//             (un-partition and crop fused into the stores).
// Traffic: |x| read once (nsplit times with a column split) and |y| written once; R or M_c read once per
// block from L2 (K-tiled: once per tile, from L1/L2). FLOPs: 2 dp^2 per window of padded products (2 d^2 needed), + the B build of dp^2/nsplit
// entries per block (K-tiled: NB x kc x chunks per tile). 7x7 bf16 (dp = 64): 167 padded FLOP an element against 4 bytes moved; at C = 256,
// 64x56x56 that is 8.6 GFLOP and 206 MB, 48 us at the 4.27 TB/s copy rate (measured on an H200 with the
// default tile: 132 us, 1.56 TB/s).
#pragma once
#include "wbmm/common.cuh"

namespace lkjit {

template <class Cfg>
__device__ __forceinline__ void wbmm_fwd(const WBMMParams& p) {
  using namespace wbmm;
  using T = typename Cfg::T;
  constexpr int PREC = Cfg::prec;
  using Op = typename OperandOf<T, PREC>::type;
  constexpr int WH = Cfg::wh, WW = Cfg::ww, D = WH * WW, DP = Cfg::dp, NS = Cfg::nsplit, NB = DP / NS;
  constexpr int WM = Cfg::wm, WN = Cfg::wn, MT = Cfg::mt, CPB = Cfg::cpb, NTH = Cfg::threads;
  constexpr int WG = WM * WN, WPB = 16 * MT * WM, NT = NB / (8 * WN);
  // Cfg::wgmma: a warpgroup (wm = 4 warps) per m64 tile of windows on sm_90a's wgmma, M_c in the
  // core-matrix layout its descriptors read (wbmm/gemm_wgmma.cuh); else per-warp mma.sync or FFMA tiles.
  constexpr bool kWgmma = Cfg::wgmma;
  // K-tiling: KC rows k of B a chunk, NK chunks, the last one KLAST rows (KC = DP, NK = 1: B whole).
  constexpr int KC = Cfg::kchunk == 0 ? DP : Cfg::kchunk, NK = k_chunks(DP, Cfg::kchunk), KLAST = DP - (NK - 1) * KC;
  constexpr int PA = operand_pitch(DP, sizeof(T)), PB = operand_pitch(KC, sizeof(Op)), PY = staging_pitch(NB);
  constexpr FwdLayout L = fwd_layout(DP, NS, WPB, CPB, sizeof(T), sizeof(Op), kWgmma, Cfg::kchunk);
  constexpr int kBChannel = NB * (kWgmma ? DP : PB);  // operand elements per channel (and buffer)
  constexpr int kBBuf = CPB * kBChannel;               // operand elements per buffer
  constexpr bool kFold = Cfg::identity && Cfg::fold_identity, kAccId = Cfg::identity && !Cfg::fold_identity;
  using Tile = typename Select<kWgmma, WarpGroupTileNT<Op, MT, NT, PA, DP>, WarpTileNT<PREC, Op, MT, NT, PA, PB>>::type;
  static_assert(!kWgmma || (PREC == kPrecMma16 && WM == 4), "wgmma: 16-bit operands, a warpgroup of wm = 4 warps");
  static_assert(WH >= 1 && WH <= kMaxWindow && WW >= 1 && WW <= kMaxWindow, "window in [1, 16]");
  static_assert(NTH == 32 * WG * CPB, "threads = 32 x wm x wn warps per channel x cpb channels");
  static_assert(DP == fwd_dp(D, PREC, WN, NS), "dp: the padded d of geometry.cuh's fwd_dp");
  static_assert((PREC == kPrecMma16) == (sizeof(T) == 2), "16-bit inputs on the 16-bit MMA, fp32 on the others");
  static_assert(Cfg::stages == 1 || Cfg::stages == 2, "stages: 1 or 2");
  static_assert(!Cfg::rotate || !Cfg::bias, "dX has no bias");
  static_assert(DP % Tile::KS == 0 && NB % (8 * WN) == 0, "whole k steps and n8 tiles");
  static_assert(Cfg::vec >= 1 && Cfg::vec * sizeof(T) <= 16, "vec: elements an access, up to 16 bytes");
  static_assert(Cfg::kchunk == 0 || (!kWgmma && KC % Tile::KS == 0 && KLAST % Tile::KS == 0 && NK >= 3),
                "kchunk: whole k steps, 3 or more chunks of dp (two would fit whole), not with wgmma");
  static_assert(kBBuf * sizeof(Op) % 16 == 0, "buffers 16-byte aligned");

  extern __shared__ __align__(16) unsigned char wbmm_smem[];
  Op* const Bs = reinterpret_cast<Op*>(wbmm_smem + L.b);
  T* const As = reinterpret_cast<T*>(wbmm_smem + L.a);
  T* const Ys = reinterpret_cast<T*>(wbmm_smem + L.y);
  WinEntry<2>* const tabs = reinterpret_cast<WinEntry<2>*>(wbmm_smem + L.tab);
  check_smem(L.total);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int c0 = group_id<Cfg::nhwc>() * CPB, cvalid = min_i(CPB, p.C - c0);
  const int j0 = blockIdx.z * NB, j1 = min_i(D, j0 + NB);
  const int chunk_idx = chunk_id<Cfg::nhwc>();
  const Chunk chunk(p, WPB, chunk_idx);
  if (chunk.count == 0) return;  // uniform over the block
  const T* __restrict__ in = static_cast<const T*>(Cfg::rotate ? p.dy : p.x);
  T* __restrict__ out = static_cast<T*>(Cfg::rotate ? p.dx : p.y);
  const long long(&ist)[4] = Cfg::rotate ? p.dy_st : p.x_st;
  const long long(&ost)[4] = Cfg::rotate ? p.dx_st : p.y_st;
  const long long* const sts[2] = {ist, ost};

  // The input tile's padding columns (i >= d) stay zero: loads never write them.
  zero_smem(As, L.y - L.a, tid, NTH);
  // Chunk kk of every channel's B into buffer buf (the whole B with NK = 1).
  const auto build = [&](int buf, int kk) {
#pragma unroll 1
    for (int cl = 0; cl < CPB; ++cl)
      build_operand<Op, WH, WW, Cfg::mode, Cfg::rotate, kFold, DP, NB, PB, kWgmma, KC>(
          Bs + buf * kBBuf + cl * kBChannel, p, c0 + cl, cl < cvalid, j0, tid, NTH, kk * KC);
  };
  build(0, 0);
  fill_table<2, WH, WW, WPB>(tabs, chunk.t0, p, sts, c0, tid, NTH);
  if constexpr (kWgmma) wgmma::fence_proxy_async();  // M_c's stores, visible to the wgmma reads after the barrier
  __syncthreads();

  TileIO<T, WH, WW, WPB, CPB, Cfg::nhwc, NTH, Cfg::vec> io(tid);
  io.template load<true>(in, ist, tabs, 0, 0, D, cvalid, tid);

  // This warp's channel and tile of the block's (WPB x NB) output (with wgmma: its warpgroup's tile; the
  // warp's rows within it are the tile's).
  const int cw = warp / WG, wg = warp % WG, m0 = kWgmma ? 0 : (wg % WM) * 16 * MT, n0 = (wg / WM) * 8 * NT;
  const float bias = Cfg::bias && cw < cvalid ? __ldg(p.bias + c0 + cw) : 0.f;
  const T* const a_warp = As + (cw * WPB + m0) * PA;
  const Op* const b_warp = Bs + cw * kBChannel + n0 * (kWgmma ? DP : PB);  // core layout: n0 is a multiple of 8
  T* const y_warp = Ys + (cw * WPB + m0) * PY + n0;

  [[maybe_unused]] int g = 0;  // K-tiled: chunks walked so far (chunk g in buffer g % 2)
#pragma unroll 1
  for (int t = 0; t < chunk.count; ++t) {
    io.template store<PA, true>(As, 0, D, tid);
    if (t + 1 < chunk.count) fill_table<2, WH, WW, WPB>(tabs + ((t + 1) % kTables) * WPB, chunk.t0 + t + 1, p, sts, c0, tid, NTH);
    __syncthreads();
    if (Cfg::stages == 2 && t + 1 < chunk.count)
      io.template load<true>(in, ist, tabs + ((t + 1) % kTables) * WPB, 0, 0, D, cvalid, tid);

    Tile tile = [&] {
      if constexpr (kWgmma) return Tile(warp);
      else return Tile();
    }();
    // acc += A B over all k. K-tiled: chunk g + 1 (this tile's next, or the next tile's first) is built into
    // the other buffer before chunk g's products; the barrier after them orders both for the next chunk
    // (the last chunk's is the epilogue's).
    const auto products = [&] {
      if constexpr (kWgmma) {
        tile.run(a_warp, b_warp, lane);
      } else if constexpr (NK == 1) {
        tile.template run<DP / Tile::KS>(a_warp, b_warp, lane);
      } else {
#pragma unroll 1
        for (int kk = 0; kk < NK; ++kk, ++g) {
          if (kk + 1 < NK || t + 1 < chunk.count) build((g + 1) & 1, kk + 1 < NK ? kk + 1 : 0);
          if (kk + 1 < NK) tile.template run<KC / Tile::KS>(a_warp + kk * KC, b_warp + (g & 1) * kBBuf, lane);
          else tile.template run<KLAST / Tile::KS>(a_warp + kk * KC, b_warp + (g & 1) * kBBuf, lane);
          if (kk + 1 < NK) __syncthreads();
        }
      }
    };
    if constexpr (PREC == kPrecFfma) {
      if constexpr (kAccId) {
        tile.each(lane, [&](int r, int col, float& v) { v = a_warp[r * PA + j0 + n0 + col]; });
      } else {
        tile.zero();
      }
      products();
      tile.each(lane, [&](int r, int col, float& v) { y_warp[r * PY + col] = from_f32<T>(v + bias); });
    } else {
      if constexpr (kAccId) {
        tile.pairs(lane, [&](int r, int col, float& v0, float& v1) { load_pair(a_warp + r * PA + j0 + n0 + col, v0, v1); });
      } else {
        tile.zero();
      }
      products();
      tile.pairs(lane, [&](int r, int col, float& v0, float& v1) { store_pair(y_warp + r * PY + col, v0 + bias, v1 + bias); });
    }
    __syncthreads();
    io.template unpartition<PY, NS == 1>(out, ost, tabs + (t % kTables) * WPB, 1, Ys, j0, j1, cvalid, tid);
    if (Cfg::stages == 1 && t + 1 < chunk.count)
      io.template load<true>(in, ist, tabs + ((t + 1) % kTables) * WPB, 0, 0, D, cvalid, tid);
  }
}

}  // namespace lkjit
