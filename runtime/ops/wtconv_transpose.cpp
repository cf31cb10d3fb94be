// wtconv_transpose: the activation layout copy (templates/wtconv/transpose.cuh) behind a plain call.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

#include "abi/wtconv_params.h"
#include "lkjit/error.h"
#include "lkjit/wtconv.h"
#include "runtime/driver.h"
#include "runtime/ops/wtconv_internal.h"

namespace lkjit {

void wtconv_transpose_check(const void* src, const std::array<int64_t, 4>& src_st, const void* dst,
                            const std::array<int64_t, 4>& dst_st, DType dtype, int64_t B, int64_t C, int64_t H,
                            int64_t W) {
  if (!src || !dst) throw SpecError("lkjit: error: wtconv_transpose: src and dst must be non-null device pointers");
  const int64_t n[4] = {B, C, H, W};
  const char* names[4] = {"B", "C", "H", "W"};
  for (int d = 0; d < 4; ++d)
    if (n[d] < 1)
      throw SpecError(fmt::format("lkjit: error: wtconv_transpose: {}={} is out of range; supported: >= 1", names[d], n[d]));
  // The kernel's tile indices are 32-bit and run up to a tile (64) past C and H*W.
  constexpr int64_t kMax = INT_MAX - 64;
  if (C > kMax || H > kMax / W)
    throw SpecError(fmt::format("lkjit: error: wtconv_transpose: C={} and H*W (H={}, W={}) must each be at most "
                                "2^31-65", C, H, W));
  const double blocks = double(B) * double((C + 63) / 64) * double((H * W + 63) / 64);
  if (blocks > double(INT_MAX))
    throw SpecError(fmt::format("lkjit: error: wtconv_transpose: {}x{}x{}x{} needs {:.0f} blocks, above the grid limit "
                                "2^31-1", B, C, H, W, blocks));
  detail::check_strides("src", src_st, {B, C, H, W}, false);
  detail::check_strides("dst", dst_st, {B, C, H, W}, true);
  // Not in place: the byte ranges the two tensors span must be disjoint (blocks read and write at once).
  auto end = [&](const void* p, const std::array<int64_t, 4>& st) {
    int64_t last = 0;
    for (int d = 0; d < 4; ++d) last += (n[d] - 1) * st[d];
    return reinterpret_cast<uintptr_t>(p) + uintptr_t(last + 1) * uintptr_t(dtype_bytes(dtype));
  };
  const uintptr_t s0 = reinterpret_cast<uintptr_t>(src), d0 = reinterpret_cast<uintptr_t>(dst);
  if (s0 < end(dst, dst_st) && d0 < end(src, src_st))
    throw SpecError("lkjit: error: wtconv_transpose: src and dst overlap; supported: distinct buffers (the copy is "
                    "not in place)");
}

void wtconv_transpose(const void* src, const std::array<int64_t, 4>& src_st, void* dst,
                      const std::array<int64_t, 4>& dst_st, DType dtype, int64_t B, int64_t C, int64_t H, int64_t W,
                      int device, Stream s) {
  wtconv_transpose_check(src, src_st, dst, dst_st, dtype, B, C, H, W);
  // One kernel per (device, dtype), looked up once: this runs twice per layer call in the PyTorch layer.
  static std::mutex mu;
  struct Entry {
    const LoadedKernel* k;
    OpSpec spec;
    Tile tile;
  };
  static std::map<std::pair<int, DType>, Entry> kernels;
  Entry e;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = kernels.find({device, dtype});
    if (it == kernels.end()) {
      const DeviceInfo dev = device_info(device);
      const OpSpec spec = wtconv_spec(kWTConvTranspose, dtype, 1, 0, true, dev.arch);
      const Tile t = default_tile(spec, Shape{B, C, H, W, 1}, dev.limits);
      it = kernels.emplace(std::make_pair(device, dtype), Entry{&load_kernel(compile_kernel(spec, t), device), spec, t})
               .first;
    }
    e = it->second;
  }
  rt::make_current(device);
  WTConvParams p;
  std::memset(&p, 0, sizeof(p));
  p.x = src;
  p.out = dst;
  p.B = static_cast<int>(std::min<int64_t>(B, INT_MAX));
  p.C = static_cast<int>(C);
  p.H = static_cast<int>(H);
  p.W = static_cast<int>(W);
  p.stride = 1;
  for (int d = 0; d < 4; ++d) {
    p.x_st[d] = src_st[d];
    p.out_st[d] = dst_st[d];
  }
  launch(*e.k, launch_geometry(e.spec, e.tile, Shape{B, C, H, W, 1}), &p, sizeof(p), s);
}

}  // namespace lkjit
