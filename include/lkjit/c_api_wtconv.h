/* C ABI of the WTConv layer (lkjit::WTConv, include/lkjit/wtconv.h); included by lkjit/c_api.h, whose
 * conventions (error codes, thread-local strings, strides, streams, one mutex per handle) hold here.
 * X, out, dOut, dX are in the layer's dtype; parameters and gradients fp32 in the reference module's shapes:
 * base_w (C,1,k,k), base_b (C), base_s (1,C,1,1), level_w[l] (4C,1,k,k), level_s[l] (1,4C,1,1). */
#ifndef LKJIT_C_API_WTCONV_H_
#define LKJIT_C_API_WTCONV_H_

#include "lkjit/c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lkjit_wtconv lkjit_wtconv; /* opaque */

/* Creates a layer: C >= 1 channels (in = out), odd k in [1, 31], L in [0, 8], dtype LKJIT_DTYPE_*,
 * bias 0/1, stride in [1, 64], CUDA device ordinal >= 0. Validates only; allocates nothing on the GPU. */
LKJIT_API int lkjit_wtconv_create(int64_t C, int k, int L, int dtype, int bias, int stride, int device,
                                  lkjit_wtconv** out);
LKJIT_API void lkjit_wtconv_destroy(lkjit_wtconv* h); /* NULL is a no-op */

/* Folds the scales into the weights (Eq. 8) on `stream`. level_w / level_s hold L pointers each (may be
 * NULL when L = 0); base_b is required iff bias. The raw pointers are kept for backward (Eq. 9). */
LKJIT_API int lkjit_wtconv_set_weights(lkjit_wtconv* h, const float* base_w, const float* base_b,
                                       const float* base_s, const float* const* level_w,
                                       const float* const* level_s, void* stream);

/* out (B, C, ceil(H/stride), ceil(W/stride)) = WTConv(x (B, C, H, W)). */
LKJIT_API int lkjit_wtconv_forward(lkjit_wtconv* h, const void* x, void* out, int64_t B, int64_t H, int64_t W,
                                   void* stream);

/* dX and every parameter gradient (written, not accumulated; deterministic). grad_base_b is required iff
 * bias; grad_level_w / grad_level_s hold L pointers each. */
LKJIT_API int lkjit_wtconv_backward(lkjit_wtconv* h, const void* x, const void* dout, void* dx,
                                    float* grad_base_w, float* grad_base_b, float* grad_base_s,
                                    float* const* grad_level_w, float* const* grad_level_s, int64_t B,
                                    int64_t H, int64_t W, void* stream);

/* lkjit_wtconv_forward / _backward with each activation's element strides (not bytes): int64_t[4] in
 * (B, C, H, W) order whatever the memory order, so element (b, c, y, x) is at
 * b*s[0] + c*s[1] + y*s[2] + x*s[3]; e.g. channels_last (NHWC) x is {H*W*C, 1, W*C, C}, and out and
 * dout use their own (H_out, W_out). NULL (or all zeros) = NCHW contiguous for that tensor. Strides
 * must be >= 1 for dims of size > 1, and the written tensor (out, dx) must not overlap itself:
 * otherwise LKJIT_E_INVALID_ARGUMENT naming the tensor, the dim and the allowed range, before any GPU
 * call. The old entry points are these with NULL strides. */
LKJIT_API int lkjit_wtconv_forward_strided(lkjit_wtconv* h, const void* x, const int64_t* x_strides, void* out,
                                           const int64_t* out_strides, int64_t B, int64_t H, int64_t W,
                                           void* stream);
LKJIT_API int lkjit_wtconv_backward_strided(lkjit_wtconv* h, const void* x, const int64_t* x_strides,
                                            const void* dout, const int64_t* dout_strides, void* dx,
                                            const int64_t* dx_strides, float* grad_base_w, float* grad_base_b,
                                            float* grad_base_s, float* const* grad_level_w,
                                            float* const* grad_level_s, int64_t B, int64_t H, int64_t W,
                                            void* stream);

/* Flags of lkjit_wtconv_backward_flags. LKJIT_BACKWARD_REUSE_FORWARD_FOLD: the caller guarantees that the
 * layer's fold is still the one its last forward made from the values the parameters hold now: no
 * set_weights, no in-place change of them, and no other forward or graph replay of this layer with other
 * values in between (PyTorch's autograd refuses in-place changes of the tensors a forward saves). A layer
 * captured in a CUDA graph, whose calls otherwise fold first, then reads that fold instead of folding again;
 * if the guarantee is broken, dX and the tap gradients are those of the fold's values. */
enum { LKJIT_BACKWARD_REUSE_FORWARD_FOLD = 1 };

/* lkjit_wtconv_backward_strided with flags (LKJIT_BACKWARD_*; other bits: LKJIT_E_INVALID_ARGUMENT). */
LKJIT_API int lkjit_wtconv_backward_flags(lkjit_wtconv* h, const void* x, const int64_t* x_strides,
                                          const void* dout, const int64_t* dout_strides, void* dx,
                                          const int64_t* dx_strides, float* grad_base_w, float* grad_base_b,
                                          float* grad_base_s, float* const* grad_level_w,
                                          float* const* grad_level_s, int64_t B, int64_t H, int64_t W,
                                          unsigned flags, void* stream);

/* Compiles and loads every kernel of a shape (backward too when backward != 0), for NCHW activations: the
 * first channels_last call of a small map may still compile the lane kernels (lkjit_wtconv_runs_lane). */
LKJIT_API int lkjit_wtconv_prepare(lkjit_wtconv* h, int64_t B, int64_t H, int64_t W, int backward);

/* *lane = 1 when NHWC activations of this shape run a lane kernel in the forward (backward = 0) or backward
 * pass (it reads channels_last directly, so callers need no layout copies for that pass), else 0. Plans for
 * the layer's GPU. */
LKJIT_API int lkjit_wtconv_runs_lane(lkjit_wtconv* h, int64_t B, int64_t H, int64_t W, int backward, int* lane);

/* The kernels a shape runs, one line each: "<kernel_name> tile=<tile> shape=<shape>[ level=<l>]".
 * arch = 0 plans for the layer's device (needs a GPU); arch = 80, 90, ... plans from that arch's table
 * (no GPU needed). */
LKJIT_API int lkjit_wtconv_describe(lkjit_wtconv* h, int64_t B, int64_t H, int64_t W, int backward, int arch,
                                    const char** text);

/* lkjit::wtconv_transpose (wtconv.h): copies activation (B, C, H, W) of dtype LKJIT_DTYPE_* from element
 * strides src_strides to dst_strides (int64_t[4] each, (B, C, H, W) order, as above; both required), e.g.
 * channels_last -> NCHW contiguous, coalesced on both sides, on `stream` of CUDA device `device`.
 * LKJIT_E_INVALID_ARGUMENT before any GPU call for null pointers, extents below 1, C or H*W above 2^31-65,
 * bad strides, a dst that overlaps itself or src (not in place), or more than 2^31-1 blocks. */
LKJIT_API int lkjit_wtconv_transpose(const void* src, const int64_t* src_strides, void* dst,
                                     const int64_t* dst_strides, int dtype, int64_t B, int64_t C, int64_t H,
                                     int64_t W, int device, void* stream);

/* Device memory the layer owns now (folded weights + scratch), in bytes. */
LKJIT_API int lkjit_wtconv_workspace_bytes(lkjit_wtconv* h, uint64_t* bytes);

/* Checks the tensors of a WTConv call, in this order: n_level_w == n_level_s; x (B, C, H, W) with C == `C`
 * (C < 0: any) on a CUDA device in an LKJIT_DTYPE_*; grad_out (NULL in forward) of shape
 * (B, C, ceil(H/stride), ceil(W/stride)); the parameters, in the order [base_w, base_s,
 * level_w[0..L-1], level_s[0..L-1], (base_b)] (n_params = 2 + 2L + bias), on x's device, fp32, in the reference
 * shapes (k from base_w: (C,1,k,k), (1,C,1,1), (4C,1,k,k), (1,4C,1,1), (C); a tensor of another shape but the
 * same number of elements passes unless it is 4-D). Messages start with `where` ("lkjit.torch.WTConv2d: input must be 4-D
 * (B, C, H, W); got shape (4, 8, 8)"). Returns LKJIT_E_INVALID_ARGUMENT for the first failed check, with
 * *type_error (if non-NULL) = 1 when it is a dtype (Python raises TypeError for those, ValueError otherwise). */
LKJIT_API int lkjit_wtconv_check_tensors(const char* where, int64_t C, int stride, const lkjit_tensor_desc* x,
                                         const lkjit_tensor_desc* grad_out, const lkjit_tensor_desc* params,
                                         int n_params, int n_level_w, int n_level_s, int has_bias, unsigned flags,
                                         int* type_error);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LKJIT_C_API_WTCONV_H_ */
