/* C ABI of the WBMM layer (lkjit::WBMM, include/lkjit/wbmm.h: Song et al., ICML 2026; the operator is
 * docs/wbmm.md); included by lkjit/c_api.h, whose conventions (error codes, thread-local strings, strides,
 * streams, one mutex per handle) hold here. x, out, dout, dx are (B, C, H, W) in the layer's dtype;
 * parameters and gradients fp32, contiguous: the table R (C, K) with K = (2wh-1)(2ww-1) (the reference
 * module's relative_position_bias_table) or, in dense mode, M (C, d, d) with d = wh*ww (M[c][i][j], row i =
 * input position); bias (C) with LKJIT_WBMM_BIAS. */
#ifndef LKJIT_C_API_WBMM_H_
#define LKJIT_C_API_WBMM_H_

#include "lkjit/c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lkjit_wbmm lkjit_wbmm; /* opaque */

enum { LKJIT_WBMM_TABLE = 0, LKJIT_WBMM_DENSE = 1 }; /* mode: M from the table R, or M given dense */

/* Flags of lkjit_wbmm_create. IDENTITY: out = T.M + T (the op; without it the deploy form, identity folded
 * into R or M); BIAS: + bias[c]; ALLOW_TF32: f32 inputs run TF32 products (else fp32-accurate); ignored for
 * 16-bit inputs. */
enum { LKJIT_WBMM_IDENTITY = 1, LKJIT_WBMM_BIAS = 2, LKJIT_WBMM_ALLOW_TF32 = 4 };

/* Creates a layer: C in [1, 2^24], window wh, ww in [1, 16] each, mode LKJIT_WBMM_TABLE / _DENSE, dtype
 * LKJIT_DTYPE_*, flags LKJIT_WBMM_*, CUDA device ordinal >= 0. Validates only; allocates nothing on the GPU. */
LKJIT_API int lkjit_wbmm_create(int64_t C, int wh, int ww, int mode, int dtype, unsigned flags, int device,
                                lkjit_wbmm** out);
LKJIT_API void lkjit_wbmm_destroy(lkjit_wbmm* h); /* NULL is a no-op */

/* The parameters later calls read (device pointers, kept, not copied): R in table mode, M in dense mode (the
 * other NULL), bias iff LKJIT_WBMM_BIAS. */
LKJIT_API int lkjit_wbmm_set_weights(lkjit_wbmm* h, const float* R, const float* M, const float* bias);

/* out (B, C, H, W) = WBMM(x (B, C, H, W)), H and W any size (zero-padded windows, cropped). Element strides
 * int64_t[4] in (B, C, H, W) order (NULL or all zeros = NCHW contiguous), as lkjit_wtconv_forward_strided's:
 * >= 1 for dims of size > 1, out must not overlap itself; otherwise LKJIT_E_INVALID_ARGUMENT before any GPU
 * call. */
LKJIT_API int lkjit_wbmm_forward(lkjit_wbmm* h, const void* x, const int64_t* x_strides, void* out,
                                 const int64_t* out_strides, int64_t B, int64_t H, int64_t W, void* stream);

/* dX (dx NULL: not computed) and the parameter gradients grad_R (table) or grad_M (dense), grad_bias iff
 * bias: written, not accumulated, reduced in a fixed order (bit-identical across runs). */
LKJIT_API int lkjit_wbmm_backward(lkjit_wbmm* h, const void* x, const int64_t* x_strides, const void* dout,
                                  const int64_t* dout_strides, void* dx, const int64_t* dx_strides, float* grad_R,
                                  float* grad_M, float* grad_bias, int64_t B, int64_t H, int64_t W, void* stream);

/* How the backward computes dX: 0 auto, 1 fused into the wgrad pass, 2 split (a dgrad kernel). */
LKJIT_API int lkjit_wbmm_set_backward_path(lkjit_wbmm* h, int path);

/* Compiles and loads every kernel of a shape (backward with dX too when backward != 0). */
LKJIT_API int lkjit_wbmm_prepare(lkjit_wbmm* h, int64_t B, int64_t H, int64_t W, int backward);

/* The kernels a shape runs, one line each: "<kernel_name> tile=<tile> shape=<shape>". arch = 0 plans for the
 * layer's device (needs a GPU); arch = 80, 90, ... from that arch's table (no GPU needed). */
LKJIT_API int lkjit_wbmm_describe(lkjit_wbmm* h, int64_t B, int64_t H, int64_t W, int backward, int arch,
                                  const char** text);

/* Device memory the layer owns now (the backward's partial sums), in bytes. */
LKJIT_API int lkjit_wbmm_workspace_bytes(lkjit_wbmm* h, uint64_t* bytes);

/* Checks the tensors of a WBMM call, in this order: x (B, C, H, W) with C == `C` (C < 0: any) on a CUDA
 * device (or the CPU with LKJIT_CHECK_ALLOW_CPU) in an LKJIT_DTYPE_*; grad_out (NULL in forward) of x's
 * shape; params = [R or M, (bias)] (n_params = 1 + has_bias) on x's device, fp32, R (C, (2wh-1)(2ww-1)) or
 * M (C, wh*ww, wh*ww), bias (C). wh, ww in [1, 16]. Messages start with `where`. Returns
 * LKJIT_E_INVALID_ARGUMENT for the first failed check, with *type_error (if non-NULL) = 1 for a dtype. */
LKJIT_API int lkjit_wbmm_check_tensors(const char* where, int64_t C, int wh, int ww, int mode,
                                       const lkjit_tensor_desc* x, const lkjit_tensor_desc* grad_out,
                                       const lkjit_tensor_desc* params, int n_params, int has_bias, unsigned flags,
                                       int* type_error);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LKJIT_C_API_WBMM_H_ */
