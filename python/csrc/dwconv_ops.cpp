// The depthwise family's ops in the PyTorch binding: the CUDA kernels of lkjit::dwconv_fwd and lkjit::dwconv_bwd
// (schema, fake and CPU implementations and autograd are Python's, lkjit/dwconv.py), doing in C++ what the ctypes
// kernels there do per call: the C ABI's tensor checks, LKJIT_TORCH_LAYOUT, one lkjit layer per configuration and
// device (kept for its prepared plans), strides, the current stream and torch-allocated outputs with the strides
// the fake implementations give.
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>

#include "lkjit_torch.h"

namespace lkjit_torch {
namespace {

constexpr const char* kWhere = "lkjit.torch.DepthwiseConv2d";

// dtype, device, C, kh, kw, stride, dil, pad_h, pad_w, same, bias
using Key = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool>;

struct Entry {
  lkjit_dwconv* h = nullptr;
  ~Entry() {
    if (h) capi().lkjit_dwconv_destroy(h);
  }
};

std::mutex g_mu;
std::map<Key, std::unique_ptr<Entry>> g_layers;

int32_t dtype_of(const Tensor& t) {
  int32_t dt = 0;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(t.get(), &dt));
  return dt;
}

void check_call(const char* where, const Tensor& x, const Tensor* g, const Tensor& w, const std::optional<Tensor>& b,
                int64_t stride, int64_t dil, int64_t ph, int64_t pw, bool same) {
  for (int64_t v : {stride, dil, ph, pw})
    if (v < 0 || v > (1 << 30)) fail_spec(std::string(where) + ": stride, dilation and padding must be in [0, 2^30]");
  if (w.dim() != 4) fail_spec(std::string(where) + ": weight must be (C, 1, kh, kw)");
  Desc dx = describe(x), dw = describe(w);
  std::optional<Desc> dg, db;
  if (g) dg = describe(*g);
  if (b) db = describe(*b);
  const lkjit_tensor_desc cx = dx.c(), cw = dw.c(), cg = dg ? dg->c() : lkjit_tensor_desc{},
                          cb = db ? db->c() : lkjit_tensor_desc{};
  int type_error = 0;
  const int rc = capi().lkjit_dwconv_check_tensors(where, -1, int(w.size(2)), int(w.size(3)), int(stride), int(dil),
                                                   int(ph), int(pw), same ? 1 : 0, &cx, dg ? &cg : nullptr, &cw,
                                                   db ? &cb : nullptr, 0, &type_error);
  if (rc != 0) fail_check(rc, type_error != 0);
}

// The lkjit layer of this configuration, created on first use. Calls on it are serialised by g_mu's holder.
Entry& entry(const Tensor& x, const Tensor& w, bool bias, int64_t stride, int64_t dil, int64_t ph, int64_t pw, bool same) {
  const int device = x.get_device_index();
  const Key key{dtype_code(x), device, x.size(1), w.size(2), w.size(3), stride, dil, ph, pw, same, bias};
  auto& slot = g_layers[key];
  if (!slot) {
    auto e = std::make_unique<Entry>();
    check(capi().lkjit_dwconv_create(x.size(1), int(w.size(2)), int(w.size(3)), int(stride), int(dil), int(ph), int(pw),
                                     same ? 1 : 0, dtype_code(x), bias ? 1 : 0, LKJIT_LAYOUT_NCHW, device, &e->h));
    slot = std::move(e);
  }
  return *slot;
}

Tensor dense_copy(const Tensor& t) { return t.is_contiguous() ? t : torch::stable::contiguous(t); }

Tensor dwconv_fwd(Tensor x, Tensor w, std::optional<Tensor> b, int64_t stride, int64_t dil, int64_t ph, int64_t pw,
                  bool same) {
  check_call("lkjit::dwconv_fwd", x, nullptr, w, b, stride, dil, ph, pw, same);
  const Layout mode = layout_mode(kWhere);
  const bool cl = !x.is_contiguous() && is_channels_last(x) && mode != Layout::kNchw;  // dwconv.py's out_format
  if (!is_dense(x, mode)) x = torch::stable::contiguous(x);
  const int64_t B = x.size(0), H = x.size(2), W = x.size(3);
  std::lock_guard<std::mutex> lock(g_mu);
  Entry& e = entry(x, w, b.has_value(), stride, dil, ph, pw, same);
  int64_t Ho = 0, Wo = 0;
  check(capi().lkjit_dwconv_output_size(e.h, H, W, &Ho, &Wo));
  Tensor y = alloc({B, x.size(1), Ho, Wo}, x, dtype_of(x), cl);
  const Tensor wc = dense_copy(w);
  std::optional<Tensor> bc;
  if (b) bc = dense_copy(*b);
  check(capi().lkjit_dwconv_set_weights(e.h, static_cast<const float*>(wc.data_ptr()),
                                        bc ? static_cast<const float*>(bc->data_ptr()) : nullptr));
  std::array<int64_t, 4> xs, ys;
  check(capi().lkjit_dwconv_forward(e.h, x.data_ptr(), c_strides(x, xs), y.data_ptr(), c_strides(y, ys), B, H, W,
                                    current_stream(x.get_device_index())));
  return y;
}

std::vector<Tensor> dwconv_bwd(Tensor g, Tensor x, Tensor w, bool has_bias, int64_t stride, int64_t dil, int64_t ph,
                               int64_t pw, bool same, bool need_dx) {
  check_call("lkjit::dwconv_bwd", x, &g, w, std::nullopt, stride, dil, ph, pw, same);
  const Layout mode = layout_mode(kWhere);
  if (!is_dense(x, mode)) x = torch::stable::contiguous(x);
  if (g.scalar_type() != x.scalar_type()) g = torch::stable::to(g, x.scalar_type());
  if (!is_dense(g, mode)) g = torch::stable::contiguous(g);
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int32_t f32 = torch_dtype_float32();
  std::vector<Tensor> res;
  res.push_back(need_dx ? alloc_like(x) : alloc({0}, x, dtype_of(x), false));
  res.push_back(alloc_nchw(w, f32));
  if (has_bias) res.push_back(alloc({C}, x, f32, false));
  const Tensor wc = dense_copy(w);
  std::lock_guard<std::mutex> lock(g_mu);
  Entry& e = entry(x, w, has_bias, stride, dil, ph, pw, same);
  // backward reads no bias; the layer takes one iff it has one: the weight's address stands in for it.
  check(capi().lkjit_dwconv_set_weights(e.h, static_cast<const float*>(wc.data_ptr()),
                                        has_bias ? static_cast<const float*>(wc.data_ptr()) : nullptr));
  std::array<int64_t, 4> xs, gs, ds;
  check(capi().lkjit_dwconv_backward(e.h, x.data_ptr(), c_strides(x, xs), g.data_ptr(), c_strides(g, gs),
                                     need_dx ? res[0].data_ptr() : nullptr, need_dx ? c_strides(res[0], ds) : nullptr,
                                     static_cast<float*>(res[1].data_ptr()),
                                     has_bias ? static_cast<float*>(res[2].data_ptr()) : nullptr, B, H, W,
                                     current_stream(x.get_device_index())));
  return res;
}

// The ops take no layer id: their layers live as long as the process, shared by every module.
void release(int64_t) {}
uint64_t workspace_bytes(int64_t) { return 0; }

const bool kRegistered = (register_family({"lkjit::dwconv_fwd,lkjit::dwconv_bwd", &release, &workspace_bytes}), true);

}  // namespace
}  // namespace lkjit_torch

STABLE_TORCH_LIBRARY_IMPL(lkjit, CUDA, m) {
  m.impl("dwconv_fwd", TORCH_BOX(&lkjit_torch::dwconv_fwd));
  m.impl("dwconv_bwd", TORCH_BOX(&lkjit_torch::dwconv_bwd));
}
