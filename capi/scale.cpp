// The scale family's C ABI (include/lkjit/c_api_scale.h): thin entry points over lkjit::ScaledCopy.
#include <fmt/format.h>

#include "capi/core.h"
#include "lkjit/c_api.h"
#include "lkjit/error.h"
#include "lkjit/runtime.h"
#include "lkjit/scale.h"

struct lkjit_scale : lkjit::capi::Handle<lkjit::ScaledCopy> {
  using Handle::Handle;
};

using lkjit::capi::guarded;

extern "C" {

int lkjit_scale_create(int64_t C, int dtype, int device, lkjit_scale** out) {
  return guarded([&] {
    lkjit::capi::require(out, "lkjit_scale_create", "out");
    *out = nullptr;
    *out = new lkjit_scale(lkjit::ScaleOptions{C, lkjit::capi::dtype_of(dtype, "scale"), device});
  });
}

void lkjit_scale_destroy(lkjit_scale* h) { delete h; }

int lkjit_scale_forward(lkjit_scale* h, const void* x, const int64_t* x_strides, const float* a, void* y,
                        const int64_t* y_strides, int64_t B, int64_t H, int64_t W, void* stream) {
  return guarded([&] {
    lkjit::capi::require(h, "lkjit_scale_forward", "the layer handle");
    std::lock_guard<std::mutex> lock(h->mu);
    std::array<int64_t, 4> xs{}, ys{};
    lkjit::capi::copy_strides(xs, x_strides);
    lkjit::capi::copy_strides(ys, y_strides);
    lkjit::set_current_device(h->layer.options().device);
    h->layer.forward(x, a, y, B, H, W, stream, &xs, &ys);
  });
}

}  // extern "C"
