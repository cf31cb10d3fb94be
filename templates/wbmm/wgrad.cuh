// WBMM weight gradient, with dX fused where it fits (Cfg::fuse_dx) (docs/wbmm.md, Backward):
//   dM[c, i, j] = sum_n T[c, n, i] dY[c, n, j]        (every window of every image)
//   dR[c, k]    = sum_{(i, j): I[i, j] = k} dM[c, i, j]   (table mode)
//   dbias[c]    = sum of dY[c] over the image pixels
//   dT          = dY M_c^T + dY                       (fused dX: the forward's product on the rotated operand)
// Block (chunk, channel group, i-part) = (blockIdx.x, .y, .z), .x and .y swapped in NHWC order:
// Cfg::cpb channels, p.chunk_tiles tiles of Cfg::wpb windows, the rows i of dM in part z (dp / isplit of
// them; with a fused dX also its columns, so x is read once in all and dY isplit times). Per tile: the x
// and dY tiles to shared memory (partition fused into the loads, the next tile's loads in flight with
// stages = 2), dM += X^T G in registers (a gm x gn warp grid per channel), the fused dX product and its
// store. At the end of the chunk the block's dM goes to shared memory and becomes one partial row: dR's
// K taps, each summed over its (i, j) pairs in a fixed order (table mode), or the dM rows themselves
// (dense mode); dbias's partial from fixed per-thread sums. wbmm_reduce adds the partial rows in order:
// no float atomics, the same bits every run.
// Traffic: |x| + isplit |dY| read, |dX| written (fused), partial rows of K (or d^2/isplit) floats per block.
// FLOPs: 2 dp_i dp per window for dM (+ 2 dp dp_i for the fused dX) of padded products. 7x7 bf16 at C = 256,
// 64x56x56: 308 MB moved, 72 us at the copy rate (measured on an H200 with the default tile, with the
// reduce: 217 us, 1.42 TB/s).
#pragma once
#include "wbmm/common.cuh"

namespace lkjit {

template <class Cfg>
__device__ __forceinline__ void wbmm_wgrad(const WBMMParams& p) {
  using namespace wbmm;
  using T = typename Cfg::T;
  constexpr int PREC = Cfg::prec, MODE = Cfg::mode;
  using Op = typename OperandOf<T, PREC>::type;
  constexpr int WH = Cfg::wh, WW = Cfg::ww, D = WH * WW, K = table_size(WH, WW), DP = Cfg::dp, IS = Cfg::isplit;
  constexpr int DPI = DP / IS, WPB = Cfg::wpb, GM = Cfg::gm, GN = Cfg::gn, CPB = Cfg::cpb, NTH = Cfg::threads;
  constexpr int WG = GM * GN, GMT = DPI / (16 * GM), GNT = DP / (8 * GN);
  constexpr bool FUSE = Cfg::fuse_dx;
  constexpr int WM = Cfg::wm, WN = Cfg::wn, MT = FUSE ? WPB / (16 * WM) : 1, NT = FUSE ? DPI / (8 * WN) : 1;
  constexpr int PX = operand_pitch(DPI, sizeof(T)), PG = operand_pitch(DP, sizeof(T)), PDX = staging_pitch(DPI);
  constexpr int PB = operand_pitch(DP, sizeof(Op)), PS = wgrad_scratch_pitch(DP);
  constexpr WgradLayout L = wgrad_layout(DP, IS, WPB, CPB, FUSE, NTH, sizeof(T), sizeof(Op));
  constexpr bool kFold = Cfg::identity && Cfg::fold_identity, kAccId = Cfg::identity && !Cfg::fold_identity;
  using DMTile = WarpTileTN<PREC, Op, GMT, GNT, PX, PG>;
  using DXTile = WarpTileNT<PREC, Op, MT, NT, PG, PB>;
  static_assert(WH >= 1 && WH <= kMaxWindow && WW >= 1 && WW <= kMaxWindow, "window in [1, 16]");
  static_assert(NTH == 32 * WG * CPB, "threads = 32 x gm x gn warps per channel x cpb channels");
  static_assert(DP == wgrad_dp(D, PREC, GM, GN, IS, WN, FUSE), "dp: the padded d of geometry.cuh's wgrad_dp");
  static_assert((PREC == kPrecMma16) == (sizeof(T) == 2), "16-bit inputs on the 16-bit MMA, fp32 on the others");
  static_assert(WPB % 16 == 0 && WPB % DMTile::KS == 0, "whole window steps of the dM product");
  static_assert(!FUSE || (WM * WN == WG && WPB % (16 * WM) == 0 && DPI % (8 * WN) == 0), "fused dX tiling");
  static_assert(Cfg::stages == 1 || Cfg::stages == 2, "stages: 1 or 2");
  static_assert(Cfg::vec >= 1 && Cfg::vec * sizeof(T) <= 16, "vec: elements an access, up to 16 bytes");

  extern __shared__ __align__(16) unsigned char wbmm_smem[];
  T* const Xs = reinterpret_cast<T*>(wbmm_smem + L.x);
  T* const Gs = reinterpret_cast<T*>(wbmm_smem + L.g);
  T* const DXs = reinterpret_cast<T*>(wbmm_smem + L.dx);
  float* const S = reinterpret_cast<float*>(wbmm_smem + L.s);
  Op* const Bt = reinterpret_cast<Op*>(wbmm_smem + L.bt);
  float* const red = reinterpret_cast<float*>(wbmm_smem + L.red);
  WinEntry<3>* const tabs = reinterpret_cast<WinEntry<3>*>(wbmm_smem + L.tab);
  check_smem(L.total);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int c0 = group_id<Cfg::nhwc>() * CPB, cvalid = min_i(CPB, p.C - c0), part = blockIdx.z;
  const int i0 = part * DPI, i1 = min_i(D, i0 + DPI);
  const int chunk_idx = chunk_id<Cfg::nhwc>();
  const Chunk chunk(p, WPB, chunk_idx);
  if (chunk.count == 0) return;  // uniform over the block (the host launches only chunks that have tiles)
  const T* __restrict__ x = static_cast<const T*>(p.x);
  const T* __restrict__ dy = static_cast<const T*>(p.dy);
  const long long* const sts[3] = {p.x_st, p.dy_st, p.dx_st};
  const bool do_bias = Cfg::dbias && part == 0;

  zero_smem(wbmm_smem, L.dx, tid, NTH);  // the X and dY tiles' padding columns stay zero
  if constexpr (FUSE) {
#pragma unroll 1
    for (int cl = 0; cl < CPB; ++cl)
      build_operand<Op, WH, WW, MODE, true, kFold, DP, DPI, PB>(Bt + cl * DPI * PB, p, c0 + cl, cl < cvalid, i0, tid, NTH);
  }
  fill_table<3, WH, WW, WPB>(tabs, chunk.t0, p, sts, c0, tid, NTH);
  __syncthreads();

  constexpr bool kFullX = IS == 1;  // x tile: all positions unless dM rows are split
  TileIO<T, WH, WW, WPB, CPB, Cfg::nhwc, NTH, Cfg::vec> ldx(tid), ldg(tid);
  ldx.template load<kFullX>(x, p.x_st, tabs, 0, i0, i1, cvalid, tid);
  ldg.template load<true>(dy, p.dy_st, tabs, 1, 0, D, cvalid, tid);

  const int cw = warp / WG, wg = warp % WG;
  const int gm0 = (wg % GM) * 16 * GMT, gn0 = (wg / GM) * 8 * GNT;  // this warp's dM tile
  const int m0 = (wg % WM) * 16 * MT, n0 = (wg / WM) * 8 * NT;      // and its fused dX tile
  DMTile dm;
  dm.zero();
  // dbias: each thread sums the dY elements it stages, per channel of the block, in a fixed order.
  float db[CPB];
#pragma unroll
  for (int c = 0; c < CPB; ++c) db[c] = 0.f;

#pragma unroll 1
  for (int t = 0; t < chunk.count; ++t) {
    ldx.template store<PX, kFullX>(Xs, i0, i1, tid);
    if (do_bias) ldg.template store<PG, true, true>(Gs, 0, D, tid, db);
    else ldg.template store<PG, true>(Gs, 0, D, tid);
    if (t + 1 < chunk.count) fill_table<3, WH, WW, WPB>(tabs + ((t + 1) % kTables) * WPB, chunk.t0 + t + 1, p, sts, c0, tid, NTH);
    __syncthreads();
    if (Cfg::stages == 2 && t + 1 < chunk.count) {
      const WinEntry<3>* nt = tabs + ((t + 1) % kTables) * WPB;
      ldx.template load<kFullX>(x, p.x_st, nt, 0, i0, i1, cvalid, tid);
      ldg.template load<true>(dy, p.dy_st, nt, 1, 0, D, cvalid, tid);
    }
    dm.template run<WPB / DMTile::KS>(Xs + cw * WPB * PX + gm0, Gs + cw * WPB * PG + gn0, lane);
    if constexpr (FUSE) {
      DXTile tile;
      const T* a_warp = Gs + (cw * WPB + m0) * PG;
      T* dx_warp = DXs + (cw * WPB + m0) * PDX + n0;
      if constexpr (PREC == kPrecFfma) {
        if constexpr (kAccId) tile.each(lane, [&](int r, int col, float& v) { v = a_warp[r * PG + i0 + n0 + col]; });
        else tile.zero();
        tile.template run<DP / DXTile::KS>(a_warp, Bt + (cw * DPI + n0) * PB, lane);
        tile.each(lane, [&](int r, int col, float& v) { dx_warp[r * PDX + col] = from_f32<T>(v); });
      } else {
        if constexpr (kAccId) {
          tile.pairs(lane, [&](int r, int col, float& v0, float& v1) { load_pair(a_warp + r * PG + i0 + n0 + col, v0, v1); });
        } else {
          tile.zero();
        }
        tile.template run<DP / DXTile::KS>(a_warp, Bt + (cw * DPI + n0) * PB, lane);
        tile.pairs(lane, [&](int r, int col, float& v0, float& v1) { store_pair(dx_warp + r * PDX + col, v0, v1); });
      }
    }
    __syncthreads();
    if constexpr (FUSE)  // dX columns: positions of this part, through the dY tile's columns
      ldg.template unpartition<PDX, IS == 1>(static_cast<T*>(p.dx), p.dx_st, tabs + (t % kTables) * WPB, 2, DXs, i0, i1,
                                            cvalid, tid);
    if (Cfg::stages == 1 && t + 1 < chunk.count) {
      const WinEntry<3>* nt = tabs + ((t + 1) % kTables) * WPB;
      ldx.template load<kFullX>(x, p.x_st, nt, 0, i0, i1, cvalid, tid);
      ldg.template load<true>(dy, p.dy_st, nt, 1, 0, D, cvalid, tid);
    }
  }
  __syncthreads();  // the scratch S reuses the tiles

  // This chunk's dM (rows i0.., all j) to S[cl][i - i0][j].
  float* s_warp = S + (cw * DPI + gm0) * PS + gn0;
  if constexpr (PREC == kPrecFfma) {
    dm.each(lane, [&](int r, int col, float& v) { s_warp[r * PS + col] = v; });
  } else {
    dm.pairs(lane, [&](int r, int col, float& v0, float& v1) {
      *reinterpret_cast<float2*>(s_warp + r * PS + col) = make_float2(v0, v1);
    });
  }
#pragma unroll
  for (int c = 0; c < CPB; ++c) red[c * NTH + tid] = db[c];
  __syncthreads();

  const int row = partial_row(MODE, chunk_idx, part, IS);
  if constexpr (MODE == kModeTable) {
    // Tap k = (dh, dw): the pairs i = (ih, iw), j = (ih - dh, iw - dw) inside the window with i in this part,
    // ih then iw ascending.
    for (int e = tid; e < CPB * K; e += NTH) {
      const int cl = e / K, k = e % K;
      if (cl >= cvalid) continue;
      const int dh = k / (2 * WW - 1) - (WH - 1), dw = k % (2 * WW - 1) - (WW - 1);
      const float* s = S + cl * DPI * PS;
      float sum = 0.f;
      for (int ih = max_i(0, dh); ih < min_i(WH, WH + dh); ++ih)
        for (int iw = max_i(0, dw); iw < min_i(WW, WW + dw); ++iw) {
          const int i = ih * WW + iw;
          if (i >= i0 && i < i1) sum += s[(i - i0) * PS + (ih - dh) * WW + iw - dw];
        }
      p.part[partial_index(row, c0 + cl, k, p.C, K)] = sum;
    }
  } else {
    for (int e = tid; e < CPB * (i1 - i0) * D; e += NTH) {
      const int cl = e / ((i1 - i0) * D), r = e % ((i1 - i0) * D), il = r / D, j = r % D;
      if (cl < cvalid) p.part[partial_index(row, c0 + cl, (i0 + il) * D + j, p.C, D * D)] = S[(cl * DPI + il) * PS + j];
    }
  }
  if (do_bias && tid < cvalid) {  // channel tid's thread sums, in thread order
    float sum = 0.f;
    for (int i = 0; i < NTH; ++i) sum += red[tid * NTH + i];
    p.part_bias[(long long)chunk_idx * p.C + c0 + tid] = sum;
  }
}

}  // namespace lkjit
