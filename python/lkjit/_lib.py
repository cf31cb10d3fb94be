"""ctypes binding of liblkjit.so's C ABI (include/lkjit/c_api.h). Imports nothing but the standard library.

Where the library is found, first match wins:
  1. ``$LKJIT_LIBRARY``: a path to liblkjit.so (an error if it does not load; no fallback).
  2. ``liblkjit.so`` beside this file (``pip install ./python`` copies a prebuilt one there).
  3. a source checkout: ``<repo>/build/liblkjit.so``, then ``<repo>/build*/liblkjit.so``, newest first.
  4. the dynamic linker's search path (``LD_LIBRARY_PATH``, ldconfig).
"""
import ctypes
import glob
import operator
import os
import threading

C_API_VERSION = 4  # LKJIT_C_API_VERSION this binding was written for
REUSE_FORWARD_FOLD = 1  # LKJIT_BACKWARD_REUSE_FORWARD_FOLD

DTYPE_CODES = {"f32": 0, "f16": 1, "bf16": 2}
_DTYPE_ALIASES = {"f32": "f32", "fp32": "f32", "float32": "f32", "float": "f32",
                  "f16": "f16", "fp16": "f16", "float16": "f16", "half": "f16",
                  "bf16": "bf16", "bfloat16": "bf16"}
MAX_LEVELS = 8


class LkjitError(RuntimeError):
    """An error reported by liblkjit; ``code`` is the C ABI's error code (see c_api.h)."""

    code = 6

    def __init__(self, message, code=None):
        super().__init__(message)
        if code is not None:
            self.code = code


class SpecError(LkjitError, ValueError):
    """A value out of the supported range (the message names it and the range). Code 2."""
    code = 2


class CompileError(LkjitError):
    """NVRTC rejected a generated kernel (the message carries the log). Code 3."""
    code = 3


class DriverError(LkjitError):
    """No CUDA driver or GPU, or a failed CUDA driver call (the CUresult is named). Code 4."""
    code = 4


class CacheError(LkjitError):
    """The on-disk kernel cache could not be read or written (path and OS message). Code 5."""
    code = 5


class LibraryNotFoundError(LkjitError, OSError):
    """liblkjit.so could not be found or loaded; the message lists every place tried."""
    code = 1


_ERRORS = {1: LkjitError, 2: SpecError, 3: CompileError, 4: DriverError, 5: CacheError, 6: LkjitError}


def _dtype_spellings():
    # The message lists what dtype_code accepts, grouped by code, from the alias table itself.
    groups = {}
    for alias, name in _DTYPE_ALIASES.items():
        groups.setdefault(name, []).append(repr(alias))
    return "; ".join(f"{' | '.join(v)} (code {DTYPE_CODES[k]})" for k, v in groups.items())


def dtype_code(dtype):
    """'f32' | 'fp32' | 'float32' | 'float' | 'f16' | 'fp16' | 'float16' | 'half' | 'bf16' | 'bfloat16',
    the matching torch dtypes, or the codes 0, 1, 2 -> 0, 1, 2.

    Raises SpecError naming the value and listing the accepted spellings otherwise."""
    if not isinstance(dtype, (bool, str)) and hasattr(type(dtype), "__index__"):
        code = operator.index(dtype)
        if code in DTYPE_CODES.values():
            return code
        name = None
    else:
        name = _DTYPE_ALIASES.get(str(dtype).lower().replace("torch.", ""))
    if name is None:
        raise SpecError(f"lkjit: error: wtconv: dtype={dtype!r} is not supported; supported: "
                        f"{_dtype_spellings()}; or torch.float32, torch.float16, torch.bfloat16")
    return DTYPE_CODES[name]


# ---- integer arguments ---------------------------------------------------------------------------------
# ctypes converts a Python int to a C integer modulo 2^bits without a word (2**64 -> 0), so the library
# would report a value the caller never passed. Every integer argument is therefore taken with
# operator.index (ints, numpy integers; not float, str or bool) and checked against its C type first.

_INT = 31    # value bits of the C ABI's int
_INT64 = 63  # and of its int64_t

# The library's range of each value that Python checks or names itself, as Python ranges (k: odd values
# only). _c_ints states them for values too large for the C ABI's types, which the library would never see,
# and WTConv2d checks its options against them (range_errors). The library is the authority (validate_options
# and validate_shape in runtime/ops/wtconv_plan.cpp, wtconv_transpose_check) and its C ABI does not expose
# them, so test_import.py's test_ranges_match_the_library calls the C ABI in and around both ends of every
# range here: a change on either side fails the CPU tests. An upper bound that is the C type's own (device,
# the transpose's B) means the library sets none below it.
_RANGES = {
    "wtconv": {"C": range(1, (1 << 24) + 1), "k": range(1, 32, 2), "L": range(0, MAX_LEVELS + 1),
               "stride": range(1, 65), "device": range(0, 1 << _INT), "B": range(1, 1 << 31),
               "H": range(1, (1 << 30) + 1), "W": range(1, (1 << 30) + 1)},
    "wtconv_transpose": {"B": range(1, 1 << _INT64), "C": range(1, (1 << 31) - 64), "H": range(1, (1 << 31) - 64),
                         "W": range(1, (1 << 31) - 64), "device": range(0, 1 << _INT)},
}
# How the library's messages state a range where they say more than "[lo, hi]" ({name}: the value's name).
_RANGE_FORMS = {("wtconv", "k"): "odd {name} in {range}", ("wtconv", "L"): "{name} in {range}",
                ("wtconv_transpose", "H"): "{range} (H*W too)", ("wtconv_transpose", "W"): "{range} (H*W too)"}


def _bound_text(v):
    """A bound as the library's messages write it: 2^24, 2^31-1, 2^31-65 for large ones, else decimal."""
    if v >= 1 << 10:
        n = v.bit_length()
        if v == 1 << (n - 1):
            return f"2^{n - 1}"
        if (1 << n) - v < 1 << 10:
            return f"2^{n}-{(1 << n) - v}"
    return str(v)


def supported(where, name, label=None):
    """The library's range of ``name`` ('C', 'k', ... of ``where``: 'wtconv' or 'wtconv_transpose') as its
    messages state it, e.g. "[1, 2^24]" or "odd k in [1, 31]" (``label`` in place of the name there)."""
    r = _RANGES[where][name]
    return _RANGE_FORMS.get((where, name), "{range}").format(
        name=label or name, range=f"[{_bound_text(r[0])}, {_bound_text(r[-1])}]")


def range_errors(where, values):
    """A message for each (label, name, int value) outside the library's range of ``name``, e.g.
    ("kernel_size", "k", 4) -> "kernel_size=4 is out of range; supported: odd kernel_size in [1, 31]"."""
    return [f"{label}={v} is out of range; supported: {supported(where, name, label)}"
            for label, name, v in values if v not in _RANGES[where][name]]


def as_int(value, name, where="lkjit: error: wtconv"):
    """``value`` as a Python int (operator.index: ints and int-like objects such as numpy integers).
    Raises TypeError naming ``name`` for anything else, bool included (True is no size)."""
    if type(value) is int:
        return value
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{where}: {name} must be an int, got {value!r} ({type(value).__name__})")
    return operator.index(value)


def as_bool(value, name, where="lkjit: error: wtconv"):
    """``value`` as a Python bool: True, False or a numpy bool. Raises TypeError naming ``name`` for anything
    else: a flag given as 'no', 0, 1 or None would otherwise count by its truthiness ('no' is True)."""
    if type(value) is bool:
        return value
    t = type(value)
    if t.__module__ == "numpy" and t.__name__ in ("bool_", "bool"):  # numpy.bool_ (numpy.bool in numpy 2)
        return bool(value)
    raise TypeError(f"{where}: {name} must be a bool (True or False), got {value!r} ({t.__name__})")


def _c_ints(where, *args):
    """(name, value, bits) triples -> the values as ints that fit their C type (``bits`` value bits,
    signed). TypeError for a non-integer; SpecError naming every value that does not fit, with the
    library's range for it (or the C type's, where the library states none)."""
    out, errors = [], []
    for name, value, bits in args:
        v = as_int(value, name, f"lkjit: error: {where}")
        if not -(1 << bits) <= v < 1 << bits:
            rng = supported(where, name) if name in _RANGES.get(where, ()) else None
            errors.append(f"{name}={v} is out of range; supported: "
                          + (rng or f"[-2^{bits}, 2^{bits}-1] ({'int64_t' if bits == _INT64 else 'int'})"))
        out.append(v)
    if errors:
        raise SpecError(f"lkjit: error: {where}: " + "; ".join(errors))
    return out


_I64_LO, _I64_HI = -(1 << _INT64), (1 << _INT64) - 1


def _bhw(B, H, W):
    """A shape's (B, H, W) for the C ABI's int64_t. Plain ints in range (every call from lkjit.torch: tensor
    sizes) take two comparisons each; anything else gets the full check."""
    if type(B) is int and type(H) is int and type(W) is int and \
            _I64_LO <= B <= _I64_HI and _I64_LO <= H <= _I64_HI and _I64_LO <= W <= _I64_HI:
        return B, H, W
    return _c_ints("wtconv", ("B", B, _INT64), ("H", H, _INT64), ("W", W, _INT64))


# The oldest arch the library plans for (DeviceLimits::for_arch; test_ranges_match_the_library checks it), and
# the forms of describe's arch, as the CLI's --arch takes them (generator/spec.cpp, parse_arch).
_OLDEST_ARCH = 80
_ARCH_FORMS = f"0 (this layer's GPU), or sm_{_OLDEST_ARCH} and newer as 90, 'sm_90', 'sm90', '90' or '9.0'"


def arch_code(arch):
    """describe's ``arch`` as the C ABI's int: 0, or a compute capability of sm_80 and newer given as 90,
    'sm_90', 'sm90', '90' or '9.0'. Raises TypeError for other types, SpecError for other values. Archs of
    that form without a limits table (e.g. 85) are left to the library, whose message lists them."""
    if isinstance(arch, str):
        v = arch.strip().lower()
        v = v[3:] if v.startswith("sm_") else v[2:] if v.startswith("sm") else v
        if len(v) >= 3 and v[-2] == "." and v[-1].isdigit():
            v = v[:-2] + v[-1]  # "9.0" -> "90", "10.0" -> "100"
        if not (1 <= len(v) <= 3 and v.isascii() and v.isdigit()):
            raise SpecError(f"lkjit: error: wtconv: arch={arch!r} is not an arch; accepted: {_ARCH_FORMS}")
        a = int(v)
    else:
        if isinstance(arch, bool) or not hasattr(type(arch), "__index__"):
            raise TypeError(f"lkjit: error: wtconv: arch must be an int or a string such as 'sm_90', got "
                            f"{arch!r} ({type(arch).__name__})")
        a = operator.index(arch)
        if not 0 <= a <= 999:
            raise SpecError(f"lkjit: error: wtconv: arch={a} is out of range; supported: {_ARCH_FORMS}")
    if a == 0:
        return 0
    if a < _OLDEST_ARCH:  # the CLI's words (parse_arch); the C ABI would say only that sm_52 has no limits table
        raise SpecError(f"lkjit: error: arch sm_{a} is too old; supported: sm_{_OLDEST_ARCH} and newer")
    return a


def _candidates():
    env = os.environ.get("LKJIT_LIBRARY", "")
    if env:
        return [env], True
    here = os.path.dirname(os.path.abspath(__file__))
    out = [os.path.join(here, "liblkjit.so")]
    repo = os.path.dirname(os.path.dirname(here))  # python/lkjit -> repo root
    if os.path.isfile(os.path.join(repo, "CMakeLists.txt")):
        out.append(os.path.join(repo, "build", "liblkjit.so"))
        more = [p for p in glob.glob(os.path.join(repo, "build*", "liblkjit.so")) if p not in out]
        out += sorted(more, key=lambda p: -os.path.getmtime(p))
    out.append("liblkjit.so")  # dynamic linker search path
    return out, False


_lock = threading.Lock()
_lib = None
_lib_path = None


def _declare(lib):
    """Signatures of the entry points (lkjit_c_api_version's is set by load(), which calls it first)."""
    c = ctypes
    i64, vp, pp, sp = c.c_int64, c.c_void_p, c.POINTER(c.c_void_p), c.POINTER(c.c_int64)
    sigs = {
        "lkjit_version": (c.c_char_p, []),
        "lkjit_last_error": (c.c_char_p, []),
        "lkjit_gpu_available": (c.c_int, [c.POINTER(c.c_char_p)]),
        "lkjit_wtconv_create": (c.c_int, [i64, c.c_int, c.c_int, c.c_int, c.c_int, c.c_int, c.c_int, pp]),
        "lkjit_wtconv_destroy": (None, [vp]),
        "lkjit_wtconv_set_weights": (c.c_int, [vp, vp, vp, vp, pp, pp, vp]),
        "lkjit_wtconv_forward": (c.c_int, [vp, vp, vp, i64, i64, i64, vp]),
        "lkjit_wtconv_backward": (c.c_int, [vp, vp, vp, vp, vp, vp, vp, pp, pp, i64, i64, i64, vp]),
        "lkjit_wtconv_forward_strided": (c.c_int, [vp, vp, sp, vp, sp, i64, i64, i64, vp]),
        "lkjit_wtconv_backward_strided": (c.c_int, [vp, vp, sp, vp, sp, vp, sp, vp, vp, vp, pp, pp, i64, i64, i64,
                                                    vp]),
        "lkjit_wtconv_backward_flags": (c.c_int, [vp, vp, sp, vp, sp, vp, sp, vp, vp, vp, pp, pp, i64, i64, i64,
                                                  c.c_uint, vp]),
        "lkjit_wtconv_prepare": (c.c_int, [vp, i64, i64, i64, c.c_int]),
        "lkjit_wtconv_describe": (c.c_int, [vp, i64, i64, i64, c.c_int, c.c_int, c.POINTER(c.c_char_p)]),
        "lkjit_wtconv_runs_lane": (c.c_int, [vp, i64, i64, i64, c.c_int, c.POINTER(c.c_int)]),
        "lkjit_wtconv_workspace_bytes": (c.c_int, [vp, c.POINTER(c.c_uint64)]),
        "lkjit_wtconv_transpose": (c.c_int, [vp, sp, vp, sp, c.c_int, i64, i64, i64, i64, c.c_int, vp]),
    }
    for name, (res, args) in sigs.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


def load():
    """The loaded library (a ctypes.CDLL), loading it on first use. Raises LibraryNotFoundError."""
    global _lib, _lib_path
    with _lock:
        if _lib is not None:
            return _lib
        paths, from_env = _candidates()
        tried = []
        for p in paths:
            if os.sep in p and not os.path.exists(p):
                tried.append(f"{p}: no such file")
                continue
            try:
                lib = ctypes.CDLL(p)
                lib.lkjit_c_api_version.restype, lib.lkjit_c_api_version.argtypes = ctypes.c_int, []
                # The version first: an older library lacks newer entry points, and naming its version
                # says more than the first missing symbol would.
                got = lib.lkjit_c_api_version()
                if got != C_API_VERSION:
                    tried.append(f"{p}: C ABI version {got}, this package needs {C_API_VERSION} (rebuild liblkjit.so)")
                    continue
                _declare(lib)
            except (OSError, AttributeError) as e:
                tried.append(f"{p}: {e}")
                continue
            _lib, _lib_path = lib, (os.path.abspath(p) if os.sep in p else p)
            return lib
        raise LibraryNotFoundError(
            "lkjit: error: liblkjit.so could not be loaded" + (" from $LKJIT_LIBRARY" if from_env else "")
            + "; tried: " + "; ".join(tried)
            + ". Build it (cmake --build build --target lkjit_shared) and set LKJIT_LIBRARY to its path.")


def library_path():
    """Path of the loaded liblkjit.so, loading it if needed. Raises LibraryNotFoundError."""
    load()
    return _lib_path


def _check(rc):
    if rc != 0:
        msg = _lib.lkjit_last_error().decode("utf-8", "replace")
        raise _ERRORS.get(rc, LkjitError)(msg or f"lkjit: error: code {rc}", rc)


# The C ABI's strides argument. A caller that builds it itself (lkjit.torch, from a tensor's own int64
# strides) skips the per-element checks below, which cost more than the call's other Python work.
Strides = ctypes.c_int64 * 4


def _strides(s, name, where="wtconv"):
    """int64_t[4] of element strides in (B, C, H, W) order for a C ABI call; None -> NULL (NCHW contiguous);
    a Strides array as it is. TypeError naming ``name`` for anything that is not a sequence of ints."""
    if s is None or type(s) is Strides:
        return s
    if isinstance(s, (str, bytes)) or not hasattr(s, "__len__"):
        raise TypeError(f"lkjit: error: {where}: {name} must be 4 element strides in (B, C, H, W) order (a tuple "
                        f"or list of ints, or lkjit._lib.Strides), or None for NCHW contiguous; got {s!r} "
                        f"({type(s).__name__})")
    if len(s) != 4:
        raise SpecError(f"lkjit: error: {where}: {name} has {len(s)} entries; expected 4 element strides in "
                        f"(B, C, H, W) order")
    for i, v in enumerate(s):
        if type(v) is not int or not _I64_LO <= v <= _I64_HI:  # torch's strides pass at once
            _c_ints(where, (f"{name}[{i}]", v, _INT64))
    return Strides(*s)


# ---- pointers and streams ------------------------------------------------------------------------------
# ctypes refuses a float or a str for a void* with an ArgumentError that names only the argument's position,
# and takes an int modulo 2^64 (-1 -> 2^64-1, 2^64 -> NULL). The public entry points (WTConvLayer.set_weights
# / forward / backward, transpose) therefore check every pointer and stream first, type and range, and name
# the bad one. lkjit.torch calls their unchecked twins (_set_weights,
# _forward, _backward, _transpose): its pointers are tensors' data_ptr() and its streams torch's own handles,
# valid by construction, and checking them would cost every call.

_PTR_BITS = 8 * ctypes.sizeof(ctypes.c_void_p)  # a void*'s range: [0, 2^_PTR_BITS - 1]


def _address(value, name, where, what, kind, null):
    """An address-sized int for the C ABI (operator.index; not bool) in a void*'s range, or None. TypeError for
    another type and SpecError (a ValueError) out of range, naming ``name``; ``what`` describes the value that
    is expected, ``kind`` its range and ``null`` what 0 means."""
    if value is None:
        return None
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"lkjit: error: {where}: {name} must be {what}, or 0 or None for {null}; "
                        f"got {value!r} ({type(value).__name__})")
    v = operator.index(value)
    if not 0 <= v < 1 << _PTR_BITS:
        raise SpecError(f"lkjit: error: {where}: {name}={v} is out of range; supported: {kind} in "
                        f"[0, 2^{_PTR_BITS}-1] (0: {null})")
    return v


def _ptr(value, name, where):
    """A device pointer for the C ABI: an int such as tensor.data_ptr(), or None; 0 and None are null."""
    return _address(value, name, where, "a device pointer as an int (e.g. tensor.data_ptr())", "a device address",
                    "null")


def _stream(value, where):
    """A CUDA stream for the C ABI: a cudaStream_t as an int, or None; 0 and None are the legacy default
    stream."""
    return _address(value, "stream", where, "a CUDA stream handle (cudaStream_t) as an int, e.g. "
                    "torch.cuda.current_stream().cuda_stream", "a cudaStream_t", "the legacy default stream")


def _ptr_list(values, name, where):
    """A list or tuple of device pointers (level_w, ...), each checked by _ptr."""
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"lkjit: error: {where}: {name} must be a list or tuple of device pointers (ints), one per "
                        f"level; got {values!r} ({type(values).__name__})")
    return [_ptr(v, f"{name}[{i}]", where) for i, v in enumerate(values)]


def _ptrs(values):
    arr = (ctypes.c_void_p * max(len(values), 1))()
    for i, v in enumerate(values):
        arr[i] = v
    return arr


def transpose(src, src_strides, dst, dst_strides, dtype, B, C, H, W, device=0, stream=0):
    """lkjit::wtconv_transpose: copies activation (B, C, H, W) of ``dtype`` ('f32' | 'f16' | 'bf16') from
    ``src`` (device pointer, element strides ``src_strides`` in (B, C, H, W) order) to ``dst`` (its own
    strides), e.g. channels_last -> NCHW contiguous, coalesced on both sides, on ``stream`` (a cudaStream_t
    as an int; 0 or None: the legacy default stream). Raises SpecError for bad sizes or strides and for a dst
    that overlaps itself, TypeError naming an argument of the wrong type."""
    where = "wtconv_transpose"
    _transpose(_ptr(src, "src", where), src_strides, _ptr(dst, "dst", where), dst_strides, dtype, B, C, H, W,
               device, _stream(stream, where))


def _transpose(src, src_strides, dst, dst_strides, dtype, B, C, H, W, device=0, stream=0):
    """transpose without the checks of src, dst and stream (see "pointers and streams" above)."""
    lib = load()
    for s, name in ((src_strides, "src_strides"), (dst_strides, "dst_strides")):
        if s is None:
            raise SpecError(f"lkjit: error: wtconv_transpose: {name} is None; expected 4 element strides")
    if not (type(B) is int and type(C) is int and type(H) is int and type(W) is int and type(device) is int and
            0 <= min(B, C, H, W, device) and max(B, C, H, W) <= _I64_HI and device < 1 << _INT):  # lkjit.torch's
        B, C, H, W, device = _c_ints("wtconv_transpose", ("B", B, _INT64), ("C", C, _INT64), ("H", H, _INT64),
                                     ("W", W, _INT64), ("device", device, _INT))
    _check(lib.lkjit_wtconv_transpose(src, _strides(src_strides, "src_strides", "wtconv_transpose"), dst,
                                      _strides(dst_strides, "dst_strides", "wtconv_transpose"), dtype_code(dtype),
                                      B, C, H, W, device, stream or None))


class GpuStatus:
    """Truthy when a GPU can run lkjit kernels; ``reason`` says why not otherwise."""

    __slots__ = ("available", "reason")

    def __init__(self, available, reason=""):
        self.available = bool(available)
        self.reason = reason

    def __bool__(self):
        return self.available

    def __repr__(self):
        return f"GpuStatus(available={self.available}, reason={self.reason!r})"


def gpu_available():
    """GpuStatus: whether libcuda.so.1 loads and reports a device (and liblkjit.so loads)."""
    try:
        lib = load()
    except LibraryNotFoundError as e:
        return GpuStatus(False, str(e))
    why = ctypes.c_char_p()
    ok = lib.lkjit_gpu_available(ctypes.byref(why))
    return GpuStatus(ok == 1, "" if ok == 1 else (why.value or b"").decode("utf-8", "replace"))


class WTConvLayer:
    """One lkjit::WTConv layer (opaque C handle): fixed C, k, L, dtype, bias, stride and CUDA device.

    Pointers are integers (e.g. ``tensor.data_ptr()``; 0 or None: null); a stream is a cudaStream_t as an int
    (0 or None: the legacy default stream); a list of level pointers is a list or tuple. X / out / dOut / dX
    in ``dtype``: NCHW contiguous, or addressed through the ``*_strides`` arguments: 4 element strides (not
    bytes) in (B, C, H, W) order, e.g. ``tensor.stride()`` of a channels_last tensor; None = NCHW
    contiguous. Parameters and their gradients: fp32, the reference module's shapes (see
    include/lkjit/wtconv.h).
    Sizes (C, k, L, stride, device, B, H, W, strides) are ints or int-like (operator.index): TypeError
    naming the argument otherwise (float, str, bool). Flags (bias, backward) are bools (numpy bools too):
    TypeError naming the argument otherwise (0, 1, 'no', None). Pointers, streams and strides of another
    type: TypeError naming the argument, the value and what is accepted. Raises SpecError for out-of-range
    options, checked in Python for values that do not fit the C ABI's integer types (pointers and streams
    too: [0, 2^64-1]), LibraryNotFoundError without liblkjit.so.
    lkjit.torch calls the unchecked twins of set_weights, forward and backward (see "pointers and streams").
    """

    def __init__(self, C, k=5, L=1, dtype="f32", bias=True, stride=1, device=0):
        self._h = None  # before anything can raise: __del__ reads it
        self.C, self.k, self.L, self.stride, self.device = _c_ints(
            "wtconv", ("C", C, _INT64), ("k", k, _INT), ("L", L, _INT), ("stride", stride, _INT),
            ("device", device, _INT))
        self.bias = as_bool(bias, "bias")
        self.dtype = dtype_code(dtype)
        lib = load()
        self._lib = lib
        h = ctypes.c_void_p()
        _check(lib.lkjit_wtconv_create(self.C, self.k, self.L, self.dtype, int(self.bias), self.stride,
                                       self.device, ctypes.byref(h)))
        self._h = h

    def close(self):
        if self._h is not None and self._h.value:
            self._lib.lkjit_wtconv_destroy(self._h)
        self._h = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _handle(self):
        if self._h is None:
            raise SpecError("lkjit: error: wtconv: the layer was closed")
        return self._h

    def set_weights(self, base_w, base_b, base_s, level_w, level_s, stream=0):
        """Folds the scales into the weights (Eq. 8 of Aflalo et al.) on ``stream``. level_w, level_s: lists
        of L pointers."""
        w = "wtconv"
        self._set_weights(_ptr(base_w, "base_w", w), _ptr(base_b, "base_b", w), _ptr(base_s, "base_s", w),
                          _ptr_list(level_w, "level_w", w), _ptr_list(level_s, "level_s", w), _stream(stream, w))

    def _set_weights(self, base_w, base_b, base_s, level_w, level_s, stream=0):
        """set_weights without the pointer and stream checks (see "pointers and streams" above)."""
        self._check_levels(level_w, level_s, "level_w", "level_s")
        _check(self._lib.lkjit_wtconv_set_weights(self._handle(), base_w, base_b or None, base_s,
                                                  _ptrs(level_w), _ptrs(level_s), stream or None))

    def forward(self, x, out, B, H, W, stream=0, x_strides=None, out_strides=None):
        """out (B, C, ceil(H/stride), ceil(W/stride)) = WTConv(x (B, C, H, W)). Raises SpecError for bad sizes or
        strides (an out that overlaps itself, a stride < 1 on a dim of size > 1) before any GPU call."""
        w = "wtconv"
        self._forward(_ptr(x, "x", w), _ptr(out, "out", w), B, H, W, _stream(stream, w), x_strides, out_strides)

    def _forward(self, x, out, B, H, W, stream=0, x_strides=None, out_strides=None):
        """forward without the pointer and stream checks (see "pointers and streams" above)."""
        B, H, W = _bhw(B, H, W)
        _check(self._lib.lkjit_wtconv_forward_strided(self._handle(), x, _strides(x_strides, "x_strides"), out,
                                                      _strides(out_strides, "out_strides"), B, H, W, stream or None))

    def backward(self, x, dout, dx, grad_base_w, grad_base_b, grad_base_s, grad_level_w, grad_level_s, B, H, W,
                 stream=0, x_strides=None, dout_strides=None, dx_strides=None, reuse_forward_fold=False):
        """dX and the parameter gradients (written, deterministic); strides as forward's, dx's checked like out's.
        grad_level_w, grad_level_s: lists of L pointers. reuse_forward_fold: the caller guarantees that the
        layer's fold is still the one its last forward made from these parameter values (no set_weights, and no
        other forward or graph replay with other values, in between), so a layer captured in a CUDA graph reads
        it instead of folding again (LKJIT_BACKWARD_REUSE_FORWARD_FOLD)."""
        w = "wtconv"
        self._backward(_ptr(x, "x", w), _ptr(dout, "dout", w), _ptr(dx, "dx", w), _ptr(grad_base_w, "grad_base_w", w),
                       _ptr(grad_base_b, "grad_base_b", w), _ptr(grad_base_s, "grad_base_s", w),
                       _ptr_list(grad_level_w, "grad_level_w", w), _ptr_list(grad_level_s, "grad_level_s", w), B, H,
                       W, _stream(stream, w), x_strides, dout_strides, dx_strides,
                       as_bool(reuse_forward_fold, "reuse_forward_fold"))

    def _backward(self, x, dout, dx, grad_base_w, grad_base_b, grad_base_s, grad_level_w, grad_level_s, B, H, W,
                  stream=0, x_strides=None, dout_strides=None, dx_strides=None, reuse_forward_fold=False):
        """backward without the pointer and stream checks (see "pointers and streams" above)."""
        self._check_levels(grad_level_w, grad_level_s, "grad_level_w", "grad_level_s")
        B, H, W = _bhw(B, H, W)
        _check(self._lib.lkjit_wtconv_backward_flags(
            self._handle(), x, _strides(x_strides, "x_strides"), dout, _strides(dout_strides, "dout_strides"), dx,
            _strides(dx_strides, "dx_strides"), grad_base_w, grad_base_b or None, grad_base_s, _ptrs(grad_level_w),
            _ptrs(grad_level_s), B, H, W, REUSE_FORWARD_FOLD if reuse_forward_fold else 0, stream or None))

    def prepare(self, B, H, W, backward=False):
        """Compiles and loads every kernel of a shape."""
        B, H, W = _bhw(B, H, W)
        _check(self._lib.lkjit_wtconv_prepare(self._handle(), B, H, W, int(as_bool(backward, "backward"))))

    def runs_lane(self, B, H, W, backward=False):
        """Whether channels_last activations of this shape run a lane kernel in the forward (or backward)
        pass, which reads them in place."""
        B, H, W = _bhw(B, H, W)
        lane = ctypes.c_int()
        _check(self._lib.lkjit_wtconv_runs_lane(self._handle(), B, H, W, int(as_bool(backward, "backward")),
                                                ctypes.byref(lane)))
        return bool(lane.value)

    def describe(self, B, H, W, backward=False, arch=0):
        """The kernels a shape runs, one line each. arch=0: for this layer's GPU; 90, 'sm_90', 'sm90', '9.0'
        (sm_80 and newer): from that arch's limits table, no GPU needed."""
        B, H, W = _bhw(B, H, W)
        arch = arch_code(arch)
        text = ctypes.c_char_p()
        _check(self._lib.lkjit_wtconv_describe(self._handle(), B, H, W, int(as_bool(backward, "backward")), arch,
                                               ctypes.byref(text)))
        return (text.value or b"").decode()

    def workspace_bytes(self):
        """Device memory this layer owns now (folded weights + scratch), bytes."""
        n = ctypes.c_uint64()
        _check(self._lib.lkjit_wtconv_workspace_bytes(self._handle(), ctypes.byref(n)))
        return n.value

    def _check_levels(self, a, b, na, nb):
        if len(a) != self.L or len(b) != self.L:
            raise SpecError(f"lkjit: error: wtconv: {na} and {nb} hold {len(a)} and {len(b)} pointers; "
                            f"this layer has L={self.L}")
