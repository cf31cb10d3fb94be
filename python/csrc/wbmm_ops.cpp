// WBMM's ops in the PyTorch binding: the CUDA kernels of lkjit::wbmm_fwd and lkjit::wbmm_bwd (schema, fake
// implementations and autograd are Python's, lkjit/wbmm.py), doing in C++ what the ctypes kernels there do per
// call: the C ABI's tensor checks, LKJIT_TORCH_LAYOUT, the module's lkjit layer per (dtype, device, C, window,
// mode, identity, bias, tf32), the weight pointers, strides, the current stream and torch-allocated outputs.
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "lkjit_torch.h"

namespace lkjit_torch {
namespace {

constexpr const char* kWhere = "lkjit.torch.WBMM2d";

// dtype, device, C, wh, ww, dense, identity, bias, tf32
using Key = std::tuple<int, int, int64_t, int64_t, int64_t, bool, bool, bool, bool>;

struct Entry {
  lkjit_wbmm* h = nullptr;
  ~Entry() {
    if (h) capi().lkjit_wbmm_destroy(h);
  }
};

LayerTable<Key, Entry> g_layers;

void check_call(const char* where, const Tensor& x, const Tensor* g, const Tensor& w, const std::optional<Tensor>& b,
                int64_t wh, int64_t ww, bool dense) {
  if (wh < 1 || wh > 16 || ww < 1 || ww > 16)
    fail_spec(std::string(where) + ": window (" + std::to_string(wh) + ", " + std::to_string(ww) +
              ") is out of range; supported: [1, 16] each");
  Desc dx = describe(x);
  std::optional<Desc> dg;
  if (g) dg = describe(*g);
  std::vector<Desc> dp{describe(w)};
  if (b) dp.push_back(describe(*b));
  std::vector<lkjit_tensor_desc> raw;
  for (const auto& d : dp) raw.push_back(d.c());
  const lkjit_tensor_desc cx = dx.c(), cg = dg ? dg->c() : lkjit_tensor_desc{};
  int type_error = 0;
  const int rc = capi().lkjit_wbmm_check_tensors(where, -1, int(wh), int(ww), dense ? LKJIT_WBMM_DENSE : LKJIT_WBMM_TABLE,
                                                 &cx, dg ? &cg : nullptr, raw.data(), int(raw.size()), b ? 1 : 0, 0,
                                                 &type_error);
  if (rc != 0) fail_check(rc, type_error != 0);
}

int32_t dtype_of(const Tensor& t) {
  int32_t dt = 0;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(t.get(), &dt));
  return dt;
}

// The module's lkjit layer for this call (created on first use), pointed at the contiguous weights.
lkjit_wbmm* layer(int64_t layer_id, const Tensor& x, const Tensor& w, const std::optional<Tensor>& b, int64_t wh,
                  int64_t ww, bool dense, bool identity, bool allow_tf32) {
  const bool tf32 = allow_tf32 && dtype_code(x) == LKJIT_DTYPE_F32;
  const int device = x.get_device_index();
  const Key key{dtype_code(x), device, x.size(1), wh, ww, dense, identity, b.has_value(), tf32};
  lkjit_wbmm* h = nullptr;
  {
    std::lock_guard<std::mutex> lock(g_layers.mutex());
    auto& slot = g_layers.slot(layer_id, key);
    if (!slot) {
      auto e = std::make_unique<Entry>();
      const unsigned flags = (identity ? LKJIT_WBMM_IDENTITY : 0u) | (b ? LKJIT_WBMM_BIAS : 0u) |
                             (tf32 ? LKJIT_WBMM_ALLOW_TF32 : 0u);
      check(capi().lkjit_wbmm_create(x.size(1), int(wh), int(ww), dense ? LKJIT_WBMM_DENSE : LKJIT_WBMM_TABLE,
                                     dtype_code(x), flags, device, &e->h));
      slot = std::move(e);
    }
    h = slot->h;
  }
  // Pointers only (no launch): a replayed CUDA graph reads the values the tensors hold at replay.
  const auto* wp = static_cast<const float*>(w.data_ptr());
  check(capi().lkjit_wbmm_set_weights(h, dense ? nullptr : wp, dense ? wp : nullptr,
                                      b ? static_cast<const float*>(b->data_ptr()) : nullptr));
  return h;
}

Tensor dense_params(const Tensor& t) { return t.is_contiguous() ? t : torch::stable::contiguous(t); }

Tensor wbmm_fwd(Tensor x, Tensor w, std::optional<Tensor> b, int64_t wh, int64_t ww, bool dense, bool identity,
                bool allow_tf32, int64_t layer_id) {
  check_call("lkjit::wbmm_fwd", x, nullptr, w, b, wh, ww, dense);
  const Layout mode = layout_mode(kWhere);
  const bool cl = !x.is_contiguous() && is_channels_last(x) && mode != Layout::kNchw;
  if (!is_dense(x, mode)) x = torch::stable::contiguous(x);
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  Tensor out = alloc({B, C, H, W}, x, dtype_of(x), cl);
  if (out.numel() == 0) return out;
  w = dense_params(w);
  if (b) b = dense_params(*b);
  lkjit_wbmm* h = layer(layer_id, x, w, b, wh, ww, dense, identity, allow_tf32);
  std::array<int64_t, 4> xs, os;
  check(capi().lkjit_wbmm_forward(h, x.data_ptr(), c_strides(x, xs), out.data_ptr(), c_strides(out, os), B, H, W,
                                  current_stream(x.get_device_index())));
  return out;
}

std::vector<Tensor> wbmm_bwd(Tensor x, Tensor g, Tensor w, std::optional<Tensor> b, int64_t wh, int64_t ww, bool dense,
                             bool identity, bool allow_tf32, bool need_dx, int64_t layer_id) {
  check_call("lkjit::wbmm_bwd", x, &g, w, b, wh, ww, dense);
  const Layout mode = layout_mode(kWhere);
  if (!is_dense(x, mode)) x = torch::stable::contiguous(x);
  if (g.scalar_type() != x.scalar_type()) g = torch::stable::to(g, x.scalar_type());
  if (!is_dense(g, mode)) g = torch::stable::contiguous(g);
  const int32_t f32 = torch_dtype_float32();
  Tensor dx = need_dx ? alloc_like(x) : alloc({0}, x, dtype_of(x), false);
  Tensor dw = alloc_nchw(w, f32);
  Tensor db = b ? alloc_nchw(*b, f32) : alloc({0}, w, f32, false);
  if (x.numel() == 0) {
    return {torch::stable::new_zeros(x, dx.sizes()), torch::stable::new_zeros(w, dw.sizes()),
            torch::stable::new_zeros(w, db.sizes())};
  }
  w = dense_params(w);
  if (b) b = dense_params(*b);
  lkjit_wbmm* h = layer(layer_id, x, w, b, wh, ww, dense, identity, allow_tf32);
  std::array<int64_t, 4> xs, gs, ds;
  auto* gw = static_cast<float*>(dw.data_ptr());
  check(capi().lkjit_wbmm_backward(h, x.data_ptr(), c_strides(x, xs), g.data_ptr(), c_strides(g, gs),
                                   need_dx ? dx.data_ptr() : nullptr, need_dx ? c_strides(dx, ds) : nullptr,
                                   dense ? nullptr : gw, dense ? gw : nullptr,
                                   b ? static_cast<float*>(db.data_ptr()) : nullptr, x.size(0), x.size(2), x.size(3),
                                   current_stream(x.get_device_index())));
  return {dx, dw, db};
}

void release(int64_t layer_id) { g_layers.release(layer_id); }

uint64_t workspace_bytes(int64_t layer_id) {
  return g_layers.sum(layer_id, [](const Entry& e) {
    uint64_t v = 0;
    return capi().lkjit_wbmm_workspace_bytes(e.h, &v) == 0 ? v : uint64_t(0);
  });
}

const bool kRegistered = (register_family({"lkjit::wbmm_fwd,lkjit::wbmm_bwd", &release, &workspace_bytes}), true);

}  // namespace
}  // namespace lkjit_torch

STABLE_TORCH_LIBRARY_IMPL(lkjit, CUDA, m) {
  m.impl("wbmm_fwd", TORCH_BOX(&lkjit_torch::wbmm_fwd));
  m.impl("wbmm_bwd", TORCH_BOX(&lkjit_torch::wbmm_bwd));
}
