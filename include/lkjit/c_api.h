/* C ABI of liblkjit.so: each op family's layer behind an opaque handle, for callers that cannot use C++
 * (Python's ctypes in python/lkjit/, the PyTorch binding in python/csrc/). This header holds what every
 * family shares (errors, dtypes, tensor descriptions, library information); each family's entry points are
 * in its own header, included at the end (one line per family): lkjit/c_api_wtconv.h, ...
 *
 * Conventions:
 *   - Every function that can fail returns an lkjit error code (0 = ok; 1 usage, 2 invalid argument,
 *     3 compile, 4 driver, 5 cache, 6 internal: lkjit::ErrorCode plus LKJIT_E_INTERNAL). No exception
 *     crosses this boundary. On failure lkjit_last_error() returns the message
 *     ("lkjit: error: <subject>: <what> ..."), naming the bad value and the allowed range.
 *   - Strings returned through `const char**` live in thread-local storage, valid until the next
 *     lkjit_* call on the same thread; copy them.
 *   - Tensors are device pointers in the layer's dtype, NCHW contiguous or, through the *_strided entry
 *     points, any element strides (int64_t[4] in (B, C, H, W) order, not bytes); parameters and gradients
 *     are fp32 in the reference module's shapes (each family's header says which).
 *   - A stream is a CUstream / cudaStream_t (NULL = the legacy default stream).
 *   - One handle may be used from several threads: calls on it are serialised by a mutex.
 */
#ifndef LKJIT_C_API_H_
#define LKJIT_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define LKJIT_API __attribute__((visibility("default")))
#else
#define LKJIT_API
#endif

/* Bumped when a signature below changes or an entry point is added; python/lkjit checks it.
 * 2: lkjit_wtconv_forward_strided, lkjit_wtconv_backward_strided. 3: lkjit_wtconv_transpose.
 * 4: lkjit_wtconv_backward_flags. 5: lkjit_info, lkjit_tensor_desc, lkjit_wtconv_check_tensors.
 * 6: lkjit_scale_* (the scale family). */
#define LKJIT_C_API_VERSION 6

enum {
  LKJIT_OK = 0,
  LKJIT_E_USAGE = 1,
  LKJIT_E_INVALID_ARGUMENT = 2,
  LKJIT_E_COMPILE = 3,
  LKJIT_E_DRIVER = 4,
  LKJIT_E_CACHE = 5,
  LKJIT_E_INTERNAL = 6 /* a non-lkjit exception (std::bad_alloc, ...) */
};

enum { LKJIT_DTYPE_F32 = 0, LKJIT_DTYPE_F16 = 1, LKJIT_DTYPE_BF16 = 2 };

LKJIT_API const char* lkjit_version(void); /* "0.1.0" */
LKJIT_API int lkjit_c_api_version(void);   /* LKJIT_C_API_VERSION */

/* Message of the last failed call on this thread ("" when none failed). */
LKJIT_API const char* lkjit_last_error(void);

/* 1 when libcuda.so.1 loads and reports a device, else 0 with *why (if non-NULL) saying what is missing. */
LKJIT_API int lkjit_gpu_available(const char** why);

/* What this library runs with, one "key: value" line each: version, c_api, nvrtc (the libnvrtc loaded, or
 * "not loaded: <every place looked>"), nvrtc_version, gpu. Loads NVRTC (and libcuda) if not yet loaded. */
LKJIT_API int lkjit_info(const char** text);

/* ---- argument checks of framework bindings ----
 * A tensor as a binding (lkjit.torch's ctypes layer, the C++ PyTorch binding) sees it, for the checks below:
 * both bindings pass their tensors here, so that they refuse bad calls with the same messages. Only sizes,
 * dtype and device: no data is touched. */
enum { LKJIT_DEVICE_CPU = 0, LKJIT_DEVICE_CUDA = 1, LKJIT_DEVICE_OTHER = 2 };
typedef struct lkjit_tensor_desc {
  int64_t dim;
  const int64_t* sizes;     /* dim entries */
  int dtype;                /* LKJIT_DTYPE_*, or -1 for any other dtype */
  const char* dtype_name;   /* as the framework prints it ("torch.float64"), for messages */
  int device_type;          /* LKJIT_DEVICE_* */
  const char* device_name;  /* as the framework prints it ("cuda:0", "cpu"), for messages */
} lkjit_tensor_desc;

/* Flags of lkjit_wtconv_check_tensors. LKJIT_CHECK_ALLOW_CPU: CPU tensors pass too (the PyTorch layer runs a
 * PyTorch implementation on them); otherwise x must be on a CUDA device. */
enum { LKJIT_CHECK_ALLOW_CPU = 1 };

#ifdef __cplusplus
} /* extern "C" */
#endif

/* The families' entry points (one line each). */
#include "lkjit/c_api_wtconv.h"
#include "lkjit/c_api_scale.h"

#endif /* LKJIT_C_API_H_ */
