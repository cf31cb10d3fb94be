// Programmatic dependent launch (sm_90+). A kernel launched with the programmatic-serialization attribute
// may start while the kernel before it in the stream still runs, once every block of that kernel has
// called pdl_launch_dependents() or exited. It must call pdl_wait() before its first read of anything the
// earlier kernel writes: pdl_wait() returns once that grid has completed and its writes are visible.
// Both are no-ops before sm_90, and pdl_wait() returns at once in a kernel launched without the attribute.
// The host decides which launch carries the attribute (WTConv::run_list: only the kernel right after a fold),
// so a kernel that lets dependents start early trusts that only such followers are launched after it.
#pragma once

namespace lkjit {

__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace lkjit
