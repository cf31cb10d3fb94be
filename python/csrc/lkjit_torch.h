// Generic part of lkjit's PyTorch binding (_lkjit_torch.so), built on the LibTorch stable ABI only
// (torch/csrc/stable, TORCH_TARGET_VERSION 2.10): one build serves every torch from 2.10 on. Each op family's
// kernels live in their own file (wtconv_ops.cpp) and use this: the liblkjit.so C ABI that Python loaded
// (one library per process, so both paths share its caches), stable tensors as C ABI arguments (pointers,
// strides, dtype codes, descriptions for the argument checks), the current CUDA stream, LKJIT_TORCH_LAYOUT,
// allocation through torch's caching allocator (CUDA-graph safe), and errors carrying the C ABI's code.
#pragma once

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "lkjit/c_api.h"

namespace lkjit_torch {

using torch::stable::Tensor;

// The liblkjit.so entry points the binding calls, resolved from the library Python loaded (lkjit_torch_init).
struct CApi {
#define LKJIT_TORCH_FN(name) decltype(&::name) name = nullptr;
#include "capi_fns.inc"
#undef LKJIT_TORCH_FN
};
const CApi& capi();  // throws when lkjit_torch_init has not run

// Throws std::runtime_error("[lkjit:<rc>] <lkjit_last_error()>") when rc != 0; lkjit/_torch_ops.translate turns
// it back into lkjit's exception class for that code.
void check(int rc);
// The same for a failed tensor check (type_error: "[lkjit:T] ", a TypeError in Python).
[[noreturn]] void fail_check(int rc, bool type_error);
// std::runtime_error("[lkjit:2] <message>") (a SpecError, a ValueError, in Python).
[[noreturn]] void fail_spec(const std::string& message);

// A tensor's description for the C ABI's checks. The C struct points into the Desc, so it is built by c() from
// the object at hand, never stored: a copied or moved Desc (into a vector, an optional) would otherwise point
// into the one it came from, whose sizes were freed and whose short strings lived inside it.
struct Desc {
  std::vector<int64_t> sizes;
  std::string dtype_name, device_name;
  int dtype = -1;        // LKJIT_DTYPE_*, or -1
  int device_type = 0;   // LKJIT_DEVICE_*
  lkjit_tensor_desc c() const {
    return {int64_t(sizes.size()), sizes.data(), dtype, dtype_name.c_str(), device_type, device_name.c_str()};
  }
};
Desc describe(const Tensor& t);
int dtype_code(const Tensor& t);  // LKJIT_DTYPE_*, or -1

// cudaStream_t of the current stream of CUDA device `device` (torch's, so torch.cuda.stream() and graph
// capture are followed).
void* current_stream(int device);

// LKJIT_TORCH_LAYOUT: "auto" (default), "strided" or "nchw"; otherwise a ValueError with Python's message.
enum class Layout { kAuto, kStrided, kNchw };
Layout layout_mode(const char* where);

bool is_contiguous(const Tensor& t);             // NCHW contiguous (any size-1 dims aside)
bool is_channels_last(const Tensor& t);          // 4-D channels_last contiguous
bool is_dense(const Tensor& t, Layout mode);     // lkjit/_torch_ops.dense
// Element strides for the C ABI, or nullptr for an NCHW-contiguous tensor (the ABI's default).
const int64_t* c_strides(const Tensor& t, std::array<int64_t, 4>& buf);

// Uninitialised tensors from torch's allocator: sizes with NCHW-contiguous or channels_last strides, or a
// tensor's own strides (empty_like of a dense tensor).
Tensor alloc(const std::vector<int64_t>& sizes, const Tensor& like, int32_t dtype, bool channels_last);
Tensor alloc_like(const Tensor& t);
Tensor alloc_nchw(const Tensor& t, int32_t dtype);  // t's sizes, NCHW-contiguous strides, `dtype`
int32_t torch_dtype_float32();

// A family's per-layer-id state, released with the module (lkjit_torch_release) and counted by
// lkjit_torch_workspace_bytes. Families register one at static-initialisation time.
struct Family {
  const char* ops;  // the ops whose CUDA kernels the family registers: "lkjit::wtconv_fwd,lkjit::wtconv_bwd"
  void (*release)(int64_t layer_id);
  uint64_t (*workspace_bytes)(int64_t layer_id);
};
void register_family(const Family& f);

// A family's lkjit handles: per layer id, one Entry per configuration Key, created on first use. Calls on
// an entry are serialised by holding mutex(). release and workspace_bytes are what a Family registers.
template <class Key, class Entry>
class LayerTable {
 public:
  std::mutex& mutex() { return mu_; }
  std::unique_ptr<Entry>& slot(int64_t layer_id, const Key& key) { return layers_[layer_id][key]; }  // under mutex()
  void release(int64_t layer_id) {
    std::lock_guard<std::mutex> lock(mu_);
    layers_.erase(layer_id);
  }
  // The sum of bytes(entry) over the layer's entries (0 for an unknown id).
  template <class F>
  uint64_t sum(int64_t layer_id, F&& bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    uint64_t n = 0;
    if (auto it = layers_.find(layer_id); it != layers_.end())
      for (const auto& kv : it->second) n += bytes(*kv.second);
    return n;
  }

 private:
  std::mutex mu_;
  std::unordered_map<int64_t, std::map<Key, std::unique_ptr<Entry>>> layers_;
};

}  // namespace lkjit_torch
