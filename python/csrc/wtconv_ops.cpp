// WTConv's ops in the PyTorch binding: the CUDA kernels of lkjit::wtconv_fwd, lkjit::wtconv_fwd_save (the forward that
// also returns its NCHW copy of a channels_last x, which the layer's backward reads) and lkjit::wtconv_bwd (their schema,
// fake implementations and autograd are Python's, lkjit/wtconv.py), doing in C++ what the ctypes kernels
// (_fwd_impl / _bwd_impl there) do per call: the C ABI's tensor checks, LKJIT_TORCH_LAYOUT, the module's lkjit
// layer per (dtype, device, C, k, L, bias, stride), the fold, lane lookup, transposes, strides, the current
// stream and torch-allocated outputs. The fold runs before every forward: the stable ABI has no version counters
// to skip it by, and it is one small kernel (the ctypes path skips it while no parameter changed).
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "lkjit_torch.h"

namespace lkjit_torch {
namespace {

constexpr const char* kWhere = "lkjit.torch.WTConv2d";
constexpr int64_t kTransposeMinHW = 100;  // lkjit/wtconv.py's _TRANSPOSE_MIN_HW
constexpr int64_t kLaneMaxW = 16;         // lkjit/wtconv.py's _LANE_MAX_W (the lane kernels' widest map)

using Key = std::tuple<int, int, int64_t, int64_t, int, int, int>;  // dtype, device, C, k, L, bias, stride

struct Entry {
  lkjit_wtconv* h = nullptr;
  std::vector<Tensor> refs;  // the parameters of the last fold (alive: the layer keeps their pointers, Eq. 9)
  std::map<std::tuple<int64_t, int64_t, bool>, bool> lane;  // (H, W, backward) -> runs a lane kernel
  ~Entry() {
    if (h) capi().lkjit_wtconv_destroy(h);
  }
};

LayerTable<Key, Entry> g_layers;

// params: [base_w, base_s, level_w..., level_s..., (base_b)], as lkjit/wtconv.py's flat list.
std::vector<Tensor> flat(const Tensor& bw, const std::optional<Tensor>& bb, const Tensor& bs,
                         const std::vector<Tensor>& lw, const std::vector<Tensor>& ls) {
  std::vector<Tensor> p{bw, bs};
  p.insert(p.end(), lw.begin(), lw.end());
  p.insert(p.end(), ls.begin(), ls.end());
  if (bb) p.push_back(*bb);
  return p;
}

void check_call(const char* where, const Tensor& x, const Tensor* g, int64_t stride, const std::vector<Tensor>& p,
                size_t n_lw, size_t n_ls, bool bias) {
  if (stride < 1 || stride > (1 << 30)) fail_spec(std::string(where) + ": stride=" + std::to_string(stride) + " is out of range");
  Desc dx = describe(x);
  std::optional<Desc> dg;
  if (g) dg = describe(*g);
  std::vector<Desc> dp;
  dp.reserve(p.size());
  std::vector<lkjit_tensor_desc> raw;
  for (const auto& t : p) dp.push_back(describe(t));
  for (const auto& d : dp) raw.push_back(d.c());
  const lkjit_tensor_desc cx = dx.c(), cg = dg ? dg->c() : lkjit_tensor_desc{};
  int type_error = 0;
  const int rc = capi().lkjit_wtconv_check_tensors(where, -1, int(stride), &cx, dg ? &cg : nullptr, raw.data(),
                                                   int(raw.size()), int(n_lw), int(n_ls), bias ? 1 : 0, 0, &type_error);
  if (rc != 0) fail_check(rc, type_error != 0);
}

std::vector<const float*> ptrs(const std::vector<Tensor>& p, size_t from, size_t n) {
  std::vector<const float*> out;
  for (size_t i = from; i < from + n; ++i) out.push_back(static_cast<const float*>(p[i].data_ptr()));
  return out;
}

// The module's lkjit layer for this call, created on first use.
Entry& entry(int64_t layer_id, const Tensor& x, const std::vector<Tensor>& p, int L, int64_t stride) {
  const bool bias = p.size() > size_t(2 + 2 * L);
  const int device = x.get_device_index();
  const Key key{dtype_code(x), device, x.size(1), p[0].size(p[0].dim() - 1), L, bias, int(stride)};
  std::lock_guard<std::mutex> lock(g_layers.mutex());
  auto& slot = g_layers.slot(layer_id, key);
  if (!slot) {
    auto e = std::make_unique<Entry>();
    check(capi().lkjit_wtconv_create(x.size(1), int(std::get<3>(key)), L, dtype_code(x), bias, int(stride), device, &e->h));
    slot = std::move(e);
  }
  return *slot;
}

// set_weights (Eq. 8) from contiguous parameters; the entry keeps them alive for the backward (Eq. 9).
void fold(Entry& e, const std::vector<Tensor>& params, int L, void* stream) {
  std::vector<Tensor> p;
  p.reserve(params.size());
  for (const auto& t : params) p.push_back(t.is_contiguous() ? t : torch::stable::contiguous(t));
  const auto lw = ptrs(p, 2, L), ls = ptrs(p, 2 + L, L);
  const float* bb = p.size() > size_t(2 + 2 * L) ? static_cast<const float*>(p[2 + 2 * L].data_ptr()) : nullptr;
  check(capi().lkjit_wtconv_set_weights(e.h, static_cast<const float*>(p[0].data_ptr()), bb,
                                        static_cast<const float*>(p[1].data_ptr()), lw.data(), ls.data(), stream));
  e.refs = std::move(p);
}

bool same_params(const Entry& e, const std::vector<Tensor>& p) {
  if (e.refs.size() != p.size()) return false;
  for (size_t i = 0; i < p.size(); ++i)
    if (e.refs[i].data_ptr() != p[i].data_ptr()) return false;
  return true;
}

bool transposing(Entry& e, const Tensor& x, bool backward, Layout mode) {
  if (!(mode == Layout::kAuto && x.size(2) * x.size(3) >= kTransposeMinHW && !x.is_contiguous() && is_channels_last(x)))
    return false;
  const auto k = std::make_tuple(x.size(2), x.size(3), backward);
  auto it = e.lane.find(k);
  if (it == e.lane.end()) {
    int lane = 0;
    check(capi().lkjit_wtconv_runs_lane(e.h, x.size(0), x.size(2), x.size(3), backward, &lane));
    it = e.lane.emplace(k, lane != 0).first;
  }
  return !it->second;
}

void copy_layout(const Tensor& src, const Tensor& dst, void* stream) {
  std::array<int64_t, 4> ss, ds;
  for (int i = 0; i < 4; ++i) {
    ss[i] = src.stride(i);
    ds[i] = dst.stride(i);
  }
  check(capi().lkjit_wtconv_transpose(src.data_ptr(), ss.data(), dst.data_ptr(), ds.data(), dtype_code(src), src.size(0),
                                      src.size(1), src.size(2), src.size(3), src.get_device_index(), stream));
}

Tensor as_nchw(const Tensor& t, void* stream) {
  if (t.is_contiguous()) return t;
  int32_t dt = 0;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(t.get(), &dt));
  Tensor out = alloc_nchw(t, dt);
  copy_layout(t, out, stream);
  return out;
}

int32_t dtype_of(const Tensor& t) {
  int32_t dt = 0;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(t.get(), &dt));
  return dt;
}

// lkjit/wtconv.py's _keeps_nchw: a transposed channels_last map that no lane kernel can take, decided from x's
// shape and layout alone (as the fake implementation decides it).
bool keeps_nchw(const Tensor& x, int64_t stride, Layout mode) {
  return mode == Layout::kAuto && x.size(2) * x.size(3) >= kTransposeMinHW && (x.size(3) > kLaneMaxW || stride != 1) &&
         !x.is_contiguous() && is_channels_last(x);
}

// The forward of both ops; with `keep`, the NCHW copy of x a keeping call made too (else none).
std::pair<Tensor, std::optional<Tensor>> forward(Tensor x, const Tensor& bw, const std::optional<Tensor>& bb,
                                                 const Tensor& bs, const std::vector<Tensor>& lw,
                                                 const std::vector<Tensor>& ls, int64_t layer_id, int64_t stride,
                                                 bool keep, const char* where) {
  const auto p = flat(bw, bb, bs, lw, ls);
  check_call(where, x, nullptr, stride, p, lw.size(), ls.size(), bb.has_value());
  const Layout mode = layout_mode(kWhere);
  const int L = int(lw.size());
  const bool cl = !x.is_contiguous() && is_channels_last(x) && mode != Layout::kNchw;
  if (!is_dense(x, mode)) x = torch::stable::contiguous(x);
  keep = keep && keeps_nchw(x, stride, mode);
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  Tensor out = alloc({B, C, (H + stride - 1) / stride, (W + stride - 1) / stride}, x, dtype_of(x), cl);
  if (out.numel() == 0) return {out, keep ? std::optional<Tensor>(alloc_nchw(x, dtype_of(x))) : std::nullopt};
  Entry& e = entry(layer_id, x, p, L, stride);
  void* stream = current_stream(x.get_device_index());
  fold(e, p, L, stream);
  // (keep implies transposing: no lane kernel takes W > kLaneMaxW or stride > 1.)
  if (keep || transposing(e, x, false, mode)) {
    Tensor xn = as_nchw(x, stream);
    Tensor on = alloc_nchw(out, dtype_of(out));
    check(capi().lkjit_wtconv_forward_strided(e.h, xn.data_ptr(), nullptr, on.data_ptr(), nullptr, B, H, W, stream));
    copy_layout(on, out, stream);
    return {out, keep ? std::optional<Tensor>(xn) : std::nullopt};
  }
  std::array<int64_t, 4> xs, os;
  check(capi().lkjit_wtconv_forward_strided(e.h, x.data_ptr(), c_strides(x, xs), out.data_ptr(), c_strides(out, os), B,
                                            H, W, stream));
  return {out, std::nullopt};
}

Tensor wtconv_fwd(Tensor x, Tensor bw, std::optional<Tensor> bb, Tensor bs, std::vector<Tensor> lw,
                  std::vector<Tensor> ls, int64_t layer_id, int64_t stride) {
  return forward(std::move(x), bw, bb, bs, lw, ls, layer_id, stride, false, "lkjit::wtconv_fwd").first;
}

std::tuple<Tensor, Tensor> wtconv_fwd_save(Tensor x, Tensor bw, std::optional<Tensor> bb, Tensor bs,
                                           std::vector<Tensor> lw, std::vector<Tensor> ls, int64_t layer_id,
                                           int64_t stride) {
  auto r = forward(x, bw, bb, bs, lw, ls, layer_id, stride, true, "lkjit::wtconv_fwd_save");
  return {r.first, r.second ? *r.second : alloc({0}, x, dtype_of(x), false)};  // empty: nothing kept
}

std::vector<Tensor> wtconv_bwd(Tensor g, Tensor x, Tensor bw, std::optional<Tensor> bb, Tensor bs,
                               std::vector<Tensor> lw, std::vector<Tensor> ls, int64_t layer_id, int64_t stride,
                               bool reuse_fold, bool x_is_nchw_copy) {
  const auto p = flat(bw, bb, bs, lw, ls);
  check_call("lkjit::wtconv_bwd", x, &g, stride, p, lw.size(), ls.size(), bb.has_value());
  if (x_is_nchw_copy && !x.is_contiguous()) {
    std::string st;
    for (int64_t v : x.strides()) st += (st.empty() ? "" : ", ") + std::to_string(v);
    fail_spec("lkjit: error: lkjit::wtconv_bwd: x_is_nchw_copy=True with an x that is not NCHW contiguous (strides (" + st +
              ")); supported: the forward's NCHW copy (lkjit::wtconv_fwd_save's second output)");
  }
  const Layout mode = layout_mode(kWhere);
  const int L = int(lw.size());
  if (!is_dense(x, mode)) x = torch::stable::contiguous(x);
  if (g.scalar_type() != x.scalar_type()) g = torch::stable::to(g, x.scalar_type());
  if (!is_dense(g, mode)) g = torch::stable::contiguous(g);
  std::vector<Tensor> res;
  if (x.numel() == 0) {  // (dX channels_last for a kept copy, as the fake has it; no elements to zero)
    res.push_back(x_is_nchw_copy ? alloc(std::vector<int64_t>(x.sizes().begin(), x.sizes().end()), x, dtype_of(x), true)
                                 : torch::stable::new_zeros(x, x.sizes()));
    for (const auto& t : p) res.push_back(torch::stable::new_zeros(t, t.sizes()));
    return res;
  }
  const int64_t B = x.size(0), H = x.size(2), W = x.size(3);
  Entry& e = entry(layer_id, x, p, L, stride);
  void* stream = current_stream(x.get_device_index());
  // reuse_fold: these are the forward's saved parameters; fold only where that forward's fold is not there.
  const bool reuse = reuse_fold && same_params(e, p);
  if (!reuse) fold(e, p, L, stream);
  // dX: x's strides, or channels_last where x is the forward's NCHW copy of a channels_last input.
  Tensor dx = x_is_nchw_copy ? alloc(std::vector<int64_t>(x.sizes().begin(), x.sizes().end()), x, dtype_of(x), true)
                             : alloc_like(x);
  res.push_back(dx);
  const int32_t f32 = torch_dtype_float32();
  for (const auto& t : p) res.push_back(alloc_nchw(t, f32));
  std::vector<float*> gw, gs;
  for (int l = 0; l < L; ++l) {
    gw.push_back(static_cast<float*>(res[3 + l].data_ptr()));
    gs.push_back(static_cast<float*>(res[3 + L + l].data_ptr()));
  }
  auto* gbw = static_cast<float*>(res[1].data_ptr());
  auto* gbs = static_cast<float*>(res[2].data_ptr());
  float* gbb = bb ? static_cast<float*>(res[3 + 2 * L].data_ptr()) : nullptr;
  const unsigned flags = reuse ? LKJIT_BACKWARD_REUSE_FORWARD_FOLD : 0u;
  std::array<int64_t, 4> xs, gsb, ds;
  if (x_is_nchw_copy || transposing(e, x, true, mode)) {
    Tensor xn = as_nchw(x, stream), gn = as_nchw(g, stream);
    Tensor dxn = alloc_nchw(x, dtype_of(x));
    check(capi().lkjit_wtconv_backward_flags(e.h, xn.data_ptr(), nullptr, gn.data_ptr(), nullptr, dxn.data_ptr(), nullptr,
                                             gbw, gbb, gbs, gw.data(), gs.data(), B, H, W, flags, stream));
    copy_layout(dxn, dx, stream);
    return res;
  }
  check(capi().lkjit_wtconv_backward_flags(e.h, x.data_ptr(), c_strides(x, xs), g.data_ptr(), c_strides(g, gsb),
                                           dx.data_ptr(), c_strides(dx, ds), gbw, gbb, gbs, gw.data(), gs.data(), B, H, W,
                                           flags, stream));
  return res;
}

void release(int64_t layer_id) { g_layers.release(layer_id); }

uint64_t workspace_bytes(int64_t layer_id) {
  return g_layers.sum(layer_id, [](const Entry& e) {
    uint64_t b = 0;
    return capi().lkjit_wtconv_workspace_bytes(e.h, &b) == 0 ? b : uint64_t(0);
  });
}

const bool kRegistered = (register_family({"lkjit::wtconv_fwd,lkjit::wtconv_fwd_save,lkjit::wtconv_bwd", &release, &workspace_bytes}), true);

}  // namespace
}  // namespace lkjit_torch

STABLE_TORCH_LIBRARY_IMPL(lkjit, CUDA, m) {
  m.impl("wtconv_fwd", TORCH_BOX(&lkjit_torch::wtconv_fwd));
  m.impl("wtconv_fwd_save", TORCH_BOX(&lkjit_torch::wtconv_fwd_save));
  m.impl("wtconv_bwd", TORCH_BOX(&lkjit_torch::wtconv_bwd));
}
