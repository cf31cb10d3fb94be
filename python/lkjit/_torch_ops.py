"""Generic PyTorch plumbing shared by every op family's layer (lkjit/wtconv.py, ...): the C++ binding
(_lkjit_torch.so, LKJIT_TORCH_BINDING) or the ctypes fallback behind each family's custom ops, op definition
(schema, fake implementation, CUDA kernel), per-module layer ids, the current CUDA stream, the activation
layout helpers and LKJIT_TORCH_LAYOUT, autocast, tracing predicates, tensor descriptions for the C ABI's
argument checks, and the translation of the binding's errors into lkjit's exception classes.

The binding (python/csrc/, built by CMake when it finds torch, bundled by ``pip install ./python`` beside
liblkjit.so) registers the CUDA kernels of the ops it implements with the LibTorch stable ABI: it calls only
liblkjit.so's C ABI, through the very liblkjit.so this process loaded (lkjit._lib.load), so both paths share
its caches. ``LKJIT_TORCH_BINDING``: ``auto`` (default) uses it when it loads and falls back to ctypes with one
warning naming why; ``1`` requires it (ImportError naming why); ``0`` never loads it.
"""
import ctypes
import os
import re
import threading
import warnings
import weakref

try:
    import torch
except ModuleNotFoundError as e:
    if e.name != "torch":  # torch is there but broken: its own error says more
        raise
    # Still a ModuleNotFoundError for torch, so that `except ModuleNotFoundError` and importorskip work.
    raise ModuleNotFoundError("lkjit.torch needs PyTorch (torch>=2.4, a CUDA build to run the kernels), "
                              "which is not installed: pip install torch, or install this package with its "
                              "torch extra (pip install './python[torch]' in a source checkout). "
                              "`import lkjit` itself needs no PyTorch.", name="torch") from e

from . import _lib

DTYPE_CODES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
BINDING_NAME = "_lkjit_torch.so"
BINDING_MODES = ("0", "1", "auto")
# The LibTorch stable ABI version the binding is built for (TORCH_TARGET_VERSION in python/csrc/CMakeLists.txt).
BINDING_MIN_TORCH = (2, 10)

# ---- the binding ---------------------------------------------------------------------------------------


class BindingStatus:
    """Whether the C++ binding serves this process: ``loaded``, its ``path``, the ops whose CUDA kernels it
    registered (``ops``: {"lkjit::wtconv_fwd", ...}) and, when not loaded, ``reason``."""

    __slots__ = ("loaded", "path", "ops", "reason", "handle")

    def __init__(self, loaded, path=None, ops=(), reason="", handle=None):
        self.loaded, self.path, self.ops, self.reason, self.handle = loaded, path, frozenset(ops), reason, handle

    def __repr__(self):
        return (f"BindingStatus(loaded={self.loaded}, path={self.path!r}, ops={sorted(self.ops)}"
                + (f", reason={self.reason!r})" if self.reason else ")"))


def _torch_version():
    m = re.match(r"(\d+)\.(\d+)", torch.__version__)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def _binding_candidates():
    """Where _lkjit_torch.so is looked for: beside the liblkjit.so this process loaded (a build folder, or the
    installed package), then beside this file."""
    out = []
    try:
        lib_dir = os.path.dirname(_lib.library_path())
        if lib_dir:
            out.append(os.path.join(lib_dir, BINDING_NAME))
    except _lib.LibraryNotFoundError:
        pass
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), BINDING_NAME)
    if here not in out:
        out.append(here)
    return out


def _load_binding():
    """(BindingStatus, why not) per LKJIT_TORCH_BINDING; raises ImportError when it is 1 and the binding
    does not load, ValueError for another value."""
    mode = os.environ.get("LKJIT_TORCH_BINDING") or "auto"
    if mode not in BINDING_MODES:
        raise ValueError(f"lkjit.torch: LKJIT_TORCH_BINDING={mode!r} is not supported; supported: "
                         f"{', '.join(BINDING_MODES)} (1: require the C++ binding, 0: ctypes only, auto: the binding "
                         f"when it loads)")
    if mode == "0":
        return BindingStatus(False, reason="LKJIT_TORCH_BINDING=0")
    reason, path = None, None
    if _torch_version() < BINDING_MIN_TORCH:
        reason = (f"torch {torch.__version__} is older than {BINDING_MIN_TORCH[0]}.{BINDING_MIN_TORCH[1]}, the "
                  f"LibTorch stable ABI version the binding is built for")
    else:
        try:
            lib_path = _lib.library_path()
        except _lib.LibraryNotFoundError as e:
            lib_path, reason = None, f"liblkjit.so did not load: {e}"
        if lib_path:
            found = [p for p in _binding_candidates() if os.path.isfile(p)]
            if not found:
                reason = (f"{BINDING_NAME} not found (looked in: {', '.join(_binding_candidates())}); build it with "
                          f"`cmake --build build --target lkjit_torch` (CMake builds it when it finds torch)")
            else:
                path = found[0]
                try:
                    torch.ops.load_library(path)
                    handle = ctypes.CDLL(path)  # the same handle: its extern "C" entry points
                    handle.lkjit_torch_init.restype = ctypes.c_int
                    handle.lkjit_torch_init.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
                    err = ctypes.create_string_buffer(1024)
                    if handle.lkjit_torch_init(lib_path.encode(), err, len(err)) != 0:
                        reason = f"{path}: {err.value.decode('utf-8', 'replace')}"
                    else:
                        handle.lkjit_torch_ops.restype = ctypes.c_char_p
                        ops = handle.lkjit_torch_ops().decode().split(",")
                        handle.lkjit_torch_release.argtypes = [ctypes.c_int64]
                        handle.lkjit_torch_release.restype = None
                        handle.lkjit_torch_workspace_bytes.argtypes = [ctypes.c_int64]
                        handle.lkjit_torch_workspace_bytes.restype = ctypes.c_uint64
                        return BindingStatus(True, path, ops, handle=handle)
                except (OSError, RuntimeError, AttributeError) as e:
                    reason = f"{path} did not load: {e}"
    if mode == "1":
        raise ImportError(f"lkjit.torch: LKJIT_TORCH_BINDING=1 but the C++ binding cannot be used: {reason}")
    warnings.warn(f"lkjit.torch: the C++ binding is not used ({reason}); the ops run through ctypes, with more host "
                  f"time per call. LKJIT_TORCH_BINDING=0 chooses ctypes without this warning.", RuntimeWarning,
                  stacklevel=3)
    return BindingStatus(False, path, reason=reason)


BINDING = _load_binding()


# ---- custom ops ------------------------------------------------------------------------------------
# One schema per op for both paths: the binding registers the CUDA kernel of the ops it lists, and every other
# op gets its family's ctypes kernel. Fake implementations (torch.compile, FakeTensorMode, meta) are Python's.

LIBRARY = torch.library.Library("lkjit", "FRAGMENT")  # kept alive: the registrations live as long as it does
# needs_fixed_stride_order: inductor passes the inputs in the stride order they were traced with, so the
# output layout the fake implementation chose from them (channels_last or not) is the one the kernels produce.
TAGS = tuple(getattr(torch.Tag, t) for t in ("needs_fixed_stride_order",) if hasattr(torch.Tag, t))


def define_op(name, schema, fake, ctypes_kernel, autograd=None):
    """Defines lkjit::<name> with ``schema``, its fake implementation, its autograd when ``autograd`` =
    (backward, setup_context) is given (torch.library.register_autograd), and, unless the binding implements it,
    ``ctypes_kernel`` as its CUDA kernel. Returns the op's default overload (torch.ops.lkjit.<name>.default)."""
    LIBRARY.define(f"{name}{schema}", tags=TAGS)
    torch.library.register_fake(f"lkjit::{name}", fake, lib=LIBRARY)
    if autograd is not None:
        torch.library.register_autograd(f"lkjit::{name}", autograd[0], setup_context=autograd[1], lib=LIBRARY)
    if f"lkjit::{name}" not in BINDING.ops:
        LIBRARY.impl(name, ctypes_kernel, "CUDA")
    return getattr(torch.ops.lkjit, name).default


_CODED = re.compile(r"\[lkjit:(\d|T)\] (.*)", re.S)


def translate(e):
    """The lkjit exception a RuntimeError of the binding stands for ("[lkjit:<code>] <message>", T for a dtype
    error: TypeError), or e itself."""
    m = _CODED.search(str(e))
    if not m:
        return e
    code, msg = m.group(1), m.group(2)
    if code == "T":
        return TypeError(msg)
    return _lib._ERRORS.get(int(code), _lib.LkjitError)(msg, int(code))


# ---- per-module layer ids ------------------------------------------------------------------------------
# A module names its lkjit layers (folded weights, workspace) by an id that the ops take as an int argument;
# the ctypes path keeps its state in STATES[id], the binding in C++. Both are released with the module.

STATES = {}
_ids_lock = threading.Lock()
_next_id = [1]


def _release(layer_id):
    STATES.pop(layer_id, None)
    if BINDING.loaded:
        BINDING.handle.lkjit_torch_release(layer_id)


def new_layer_id(owner, state):
    """A fresh id for ``owner`` (a module), with ``state`` as its ctypes-path state; released with the owner."""
    with _ids_lock:
        layer_id = _next_id[0]
        _next_id[0] += 1
        STATES[layer_id] = state
    weakref.finalize(owner, _release, layer_id)
    return layer_id


def binding_workspace_bytes(layer_id):
    """Device memory the binding's lkjit layers of ``layer_id`` own (0 without the binding)."""
    return int(BINDING.handle.lkjit_torch_workspace_bytes(layer_id)) if BINDING.loaded else 0


# ---- streams, autocast, tracing ------------------------------------------------------------------------

if hasattr(torch._C, "_cuda_getCurrentRawStream"):
    # cudaStream_t of the device's current stream as an int, as torch.cuda.current_stream(device).cuda_stream
    # without building a torch.cuda.Stream object (what inductor's generated code calls).
    current_stream = torch._C._cuda_getCurrentRawStream
else:  # a PyTorch built without CUDA (the module then never reaches a kernel)
    def current_stream(device):
        return torch.cuda.current_stream(device).cuda_stream

_DEVICE_AUTOCAST_API = hasattr(torch, "get_autocast_dtype")  # PyTorch >= 2.4


def autocast_dtype():
    """The CUDA autocast dtype when autocast is on for CUDA, else None."""
    if _DEVICE_AUTOCAST_API:
        return torch.get_autocast_dtype("cuda") if torch.is_autocast_enabled("cuda") else None
    return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None


def f32(p):
    return p if p.dtype == torch.float32 else p.float()


is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
if is_compiling is None:  # PyTorch < 2.3
    import torch._dynamo
    is_compiling = torch._dynamo.is_compiling
is_tracing = getattr(torch._C, "_is_tracing", lambda: False)


# ---- layouts ---------------------------------------------------------------------------------------
# The kernels take element strides, so the ops copy only tensors that are not dense. The real ops and their
# fake implementations pick output strides with the same functions: torch.compile checks that they agree.
# The binding applies the same rules in C++ (python/csrc/lkjit_torch.cpp).

LAYOUT_MODES = ("auto", "strided", "nchw")


def layout_mode(where):
    mode = os.environ.get("LKJIT_TORCH_LAYOUT") or "auto"
    if mode not in LAYOUT_MODES:
        raise ValueError(f"{where}: LKJIT_TORCH_LAYOUT={mode!r} is not supported; supported: {', '.join(LAYOUT_MODES)}")
    return mode


def dense(t, mode):
    """Whether t is non-overlapping and dense in some order of its dims (NCHW contiguous, channels_last,
    or any other permutation): the kernels then address it through its strides, with no copy.
    LKJIT_TORCH_LAYOUT=nchw: only NCHW contiguous counts."""
    if t.is_contiguous():
        return True
    if mode == "nchw":
        return False
    if t.is_contiguous(memory_format=torch.channels_last):
        return True
    expected = 1
    for size, st in sorted(zip(t.shape, t.stride()), key=lambda d: d[1]):
        if size != 1:
            if st != expected:
                return False
            expected *= size
    return True


def out_format(x, mode):
    """Memory format of an output shaped like x: channels_last for a channels_last input, else contiguous."""
    if not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last) and mode != "nchw":
        return torch.channels_last
    return torch.contiguous_format


def c_strides(t):
    """Element strides for the C ABI, as its int64_t[4] (a tensor's strides need no range check); None (the
    ABI's default) for an NCHW-contiguous tensor."""
    return None if t.is_contiguous() else _lib.Strides(*t.stride())


# ---- tensor descriptions for the C ABI's argument checks -----------------------------------------------

def device_type_code(device):
    t = device.type
    return _lib.DEVICE_CUDA if t == "cuda" else _lib.DEVICE_CPU if t == "cpu" else _lib.DEVICE_OTHER


def tensor_desc(t):
    """lkjit._lib.TensorDesc of a tensor (its sizes, dtype and device as PyTorch prints them)."""
    return _lib.tensor_desc(tuple(t.shape), DTYPE_CODES.get(t.dtype), t.dtype, device_type_code(t.device), t.device)
