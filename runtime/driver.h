// The only file that touches libcuda. It is dlopen'ed (libcuda.so.1) on first use, so everything that
// does not run a kernel works on machines without a driver or GPU.
#pragma once
#include <cuda.h>

#include <string>

namespace lkjit::rt {

// Resolved driver entry points (cuda.h's versioned names: cuMemAlloc -> cuMemAlloc_v2, ...).
struct Driver {
#define LKJIT_DRIVER_FN(name) decltype(&::name) name = nullptr;
#include "runtime/driver_fns.inc"
#undef LKJIT_DRIVER_FN
};

// Loads libcuda and runs cuInit once. Throws DriverError ("no CUDA driver" / "no GPU") otherwise.
const Driver& driver();
// True when a driver and at least one device exist; *why says otherwise.
bool driver_available(std::string* why);

// Throws DriverError naming the call and the CUresult when r != CUDA_SUCCESS.
void check(CUresult r, const char* call, const std::string& what = "");

// Makes the primary context of `ordinal` current on this thread (interoperates with the CUDA runtime
// and PyTorch, which use the same context).
void make_current(int ordinal);

}  // namespace lkjit::rt

#define LKJIT_CU(call) ::lkjit::rt::check(::lkjit::rt::driver().call, #call)
