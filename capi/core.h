// What every family's C ABI entry points share (include/lkjit/c_api.h's conventions): exceptions turned
// into error codes and a thread-local message, thread-local returned strings, dtype codes, strides, and
// handles that serialise their calls. A family's entry points (capi/<family>.cpp) are thin: checks through
// the family's public C++ API, then the layer's call inside guarded().
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "lkjit/c_api.h"
#include "lkjit/error.h"
#include "lkjit/spec.h"

namespace lkjit::capi {

void set_error(std::string message);  // the thread's lkjit_last_error()
void clear_error();

// Runs f; returns LKJIT_OK, or the error's code with its message kept for lkjit_last_error(). Nothing
// escapes (std::bad_alloc and other exceptions are LKJIT_E_INTERNAL).
template <class F>
int guarded(F&& f) {
  try {
    f();
    clear_error();
    return LKJIT_OK;
  } catch (const Error& e) {
    set_error(e.what());
    return static_cast<int>(e.code());
  } catch (const std::bad_alloc&) {
    set_error("lkjit: error: out of host memory");
    return LKJIT_E_INTERNAL;
  } catch (const std::exception& e) {
    set_error(std::string("lkjit: error: internal: ") + e.what());
    return LKJIT_E_INTERNAL;
  } catch (...) {
    set_error("lkjit: error: internal: unknown exception");
    return LKJIT_E_INTERNAL;
  }
}

// A string returned through `const char**`: kept in thread-local storage until the thread's next call.
const char* keep_text(std::string s);

// LKJIT_DTYPE_* -> DType; SpecError naming `op`, the value and the codes.
DType dtype_of(int code, const char* op);

// Element strides from a C array of 4 (null: all zero, the layer's default layout).
inline void copy_strides(std::array<int64_t, 4>& dst, const int64_t* src) {
  if (src) for (int i = 0; i < 4; ++i) dst[i] = src[i];
}

// SpecError "lkjit: error: <fn>: <what> is null" for a required pointer argument.
void require(const void* p, const char* fn, const char* what);

// An opaque handle: the layer, and the mutex that serialises calls on it.
template <class Layer>
struct Handle {
  template <class... A>
  explicit Handle(A&&... a) : layer(std::forward<A>(a)...) {}
  Layer layer;
  std::mutex mu;
};

// ---- tensor checks of framework bindings (lkjit_tensor_desc) --------------------------------------------
// A shape as Python prints a tuple: (4, 8, 8), (8,), ().
std::string shape_tuple(const int64_t* sizes, int64_t n);
std::string shape_tuple(const std::vector<int64_t>& sizes);
// A failed check: its message, and whether it is about a dtype (Python raises TypeError for those).
struct TensorCheckFailed {
  std::string message;
  bool type_error = false;
};
[[noreturn]] void fail_check(bool type_error, std::string message);
// Runs a family's tensor checks: LKJIT_OK, or LKJIT_E_INVALID_ARGUMENT with the message and *type_error
// (if non-null) set from the first failed check.
int guarded_check(int* type_error, const std::function<void()>& checks);

// The activation input of a call, x (B, C, H, W): 4-D, C channels (C < 0: any), on a CUDA device (or the CPU
// with LKJIT_CHECK_ALLOW_CPU in flags), an LKJIT_DTYPE_*. Messages start with `where`. Returns x's C.
int64_t check_input(const std::string& where, const lkjit_tensor_desc& x, int64_t C, unsigned flags);
// A tensor of exactly `want`'s shape (grad_out).
void check_shape(const std::string& where, const char* name, const lkjit_tensor_desc& t, const std::vector<int64_t>& want);
// Parameters on x's device, fp32.
void check_params_like(const std::string& where, const lkjit_tensor_desc& x, const lkjit_tensor_desc* params, int n);
// A parameter of `want`'s number of elements, and of `want`'s shape if it is 4-D; `for_what` ends the message
// ("for C=8, k=5").
void check_param_shape(const std::string& where, const std::string& name, const lkjit_tensor_desc& t,
                       const std::vector<int64_t>& want, const std::string& for_what);

}  // namespace lkjit::capi
