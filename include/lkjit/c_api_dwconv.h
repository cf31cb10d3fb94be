/* C ABI of the depthwise convolution (lkjit::DepthwiseConv, include/lkjit/dwconv.h); included by lkjit/c_api.h,
 * whose conventions (error codes, thread-local strings, strides, streams, one mutex per handle) hold here.
 * x, dx (B, C, H, W) and y, dout (B, C, Ho, Wo) in the layer's dtype; w, dw (C, 1, kh, kw) and bias, dbias (C)
 * fp32, nn.Conv2d's layouts. Strides: int64_t[4] element strides in (B, C, H, W) order (lkjit_wtconv_*_strided's
 * rules); NULL or all zeros = the dense strides of the layer's layout for that tensor. */
#ifndef LKJIT_C_API_DWCONV_H_
#define LKJIT_C_API_DWCONV_H_

#include "lkjit/c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lkjit_dwconv lkjit_dwconv; /* opaque */

/* Layouts of lkjit_dwconv_create (the dense order of tensors passed without strides). */
enum { LKJIT_LAYOUT_NCHW = 0, LKJIT_LAYOUT_NHWC = 1 };

/* C in [1, 2^24]; kh, kw in [1, 63]; stride 1 or 2; dil in [1, 4]; pad_h, pad_w in [0, 1000] (both sides), or
 * same = 1 (PyTorch's padding='same': stride 1, pads 0); dtype LKJIT_DTYPE_*; bias 0/1; layout LKJIT_LAYOUT_*;
 * CUDA device >= 0. Validates only; allocates nothing on the GPU. */
LKJIT_API int lkjit_dwconv_create(int64_t C, int kh, int kw, int stride, int dil, int pad_h, int pad_w, int same,
                                  int dtype, int bias, int layout, int device, lkjit_dwconv** out);
LKJIT_API void lkjit_dwconv_destroy(lkjit_dwconv* h); /* NULL is a no-op */

/* The parameters later calls read (kept, not copied); bias required iff the layer has one, else NULL. */
LKJIT_API int lkjit_dwconv_set_weights(lkjit_dwconv* h, const float* w, const float* bias);

/* The output extents of an input of H x W (LKJIT_E_INVALID_ARGUMENT naming the value when there is none). */
LKJIT_API int lkjit_dwconv_output_size(lkjit_dwconv* h, int64_t H, int64_t W, int64_t* Ho, int64_t* Wo);

/* y = conv(x). */
LKJIT_API int lkjit_dwconv_forward(lkjit_dwconv* h, const void* x, const int64_t* x_strides, void* y,
                                   const int64_t* y_strides, int64_t B, int64_t H, int64_t W, void* stream);
/* dx (NULL: not computed) and dw, dbias (dw NULL: neither) from dout and x; written, not accumulated; dw and
 * dbias bit-identical across calls. At least one of dx and dw. */
LKJIT_API int lkjit_dwconv_backward(lkjit_dwconv* h, const void* x, const int64_t* x_strides, const void* dout,
                                    const int64_t* dout_strides, void* dx, const int64_t* dx_strides, float* dw,
                                    float* dbias, int64_t B, int64_t H, int64_t W, void* stream);

/* Compiles and loads the kernels of a shape (backward too when backward != 0) for the layer's layout. */
LKJIT_API int lkjit_dwconv_prepare(lkjit_dwconv* h, int64_t B, int64_t H, int64_t W, int backward);
/* The kernels a shape runs for the layer's layout, one line each: "<kernel_name> tile=<tile> shape=<shape>", then
 * "path=<direct|nhwc|mma>". arch = 0 plans for the layer's device (needs a GPU; the path and tiles its tuning
 * database gives, else the rule's); 80, 90, ...: from that arch's table and the rule, no GPU needed. */
LKJIT_API int lkjit_dwconv_describe(lkjit_dwconv* h, int64_t B, int64_t H, int64_t W, int backward, int arch,
                                    const char** text);
/* Device memory the layer owns now (wgrad partials), in bytes. */
LKJIT_API int lkjit_dwconv_workspace_bytes(lkjit_dwconv* h, uint64_t* bytes);

/* Checks the tensors of a call, in this order: x (B, C, H, W) with C == `C` on a CUDA device (or the CPU with
 * LKJIT_CHECK_ALLOW_CPU) in an LKJIT_DTYPE_*; an output for its H, W (the layer's kh, kw, stride, dil and
 * padding: pad_h, pad_w, same as in create); grad_out (NULL in forward) of shape (B, C, Ho, Wo); weight
 * (C, 1, kh, kw) and bias (NULL: none; (C)) on x's device, fp32. Messages start with `where`. Returns
 * LKJIT_E_INVALID_ARGUMENT for the first failed check, *type_error (if non-NULL) = 1 for a dtype. */
LKJIT_API int lkjit_dwconv_check_tensors(const char* where, int64_t C, int kh, int kw, int stride, int dil, int pad_h,
                                         int pad_w, int same, const lkjit_tensor_desc* x,
                                         const lkjit_tensor_desc* grad_out, const lkjit_tensor_desc* weight,
                                         const lkjit_tensor_desc* bias, unsigned flags, int* type_error);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LKJIT_C_API_DWCONV_H_ */
