/* C ABI of the scale family (lkjit::ScaledCopy, include/lkjit/scale.h): y = a[c] * x. Included by
 * lkjit/c_api.h, whose conventions hold here. x, y in the layer's dtype; a (C) fp32. */
#ifndef LKJIT_C_API_SCALE_H_
#define LKJIT_C_API_SCALE_H_

#include "lkjit/c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct lkjit_scale lkjit_scale; /* opaque */

/* C in [1, 2^24], dtype LKJIT_DTYPE_*, device >= 0. Validates only. */
LKJIT_API int lkjit_scale_create(int64_t C, int dtype, int device, lkjit_scale** out);
LKJIT_API void lkjit_scale_destroy(lkjit_scale* h); /* NULL is a no-op */

/* y (B, C, H, W) = a * x (B, C, H, W); strides int64_t[4] in (B, C, H, W) order, NULL = NCHW contiguous. */
LKJIT_API int lkjit_scale_forward(lkjit_scale* h, const void* x, const int64_t* x_strides, const float* a, void* y,
                                  const int64_t* y_strides, int64_t B, int64_t H, int64_t W, void* stream);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LKJIT_C_API_SCALE_H_ */
