// What a failed driver call means where its CUresult alone does not say it, as one pure function the
// driver wrapper (runtime/driver.cpp) calls and CPU tests check. No cuda.h: results are plain ints.
#pragma once
#include <string>

namespace lkjit::rt {

// For CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222), CUDA_ERROR_NO_BINARY_FOR_GPU (209) and CUDA_ERROR_INVALID_IMAGE
// (200) on loading a cubin: whether the driver is too old for the NVRTC that built it. driver_version is
// cuDriverGetVersion's (12080 = CUDA 12.8; 0 when unknown), nvrtc_version "13.0". "" for other results.
//   "the CUDA driver (CUDA 12.8) is too old for this cubin, built by NVRTC 13.0: update the driver to one for
//    CUDA 13.0 or newer, or prewarm with an NVRTC no newer than the driver"
std::string driver_error_hint(int cuda_result, int driver_version, const std::string& nvrtc_version);

}  // namespace lkjit::rt
