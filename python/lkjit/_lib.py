"""Generic plumbing of liblkjit.so's C ABI (include/lkjit/c_api.h) for every op family: loading the library
(search order below) and checking its C ABI version, the error classes and their codes, the checks of integer,
pointer, stream and stride arguments, dtype codes, and the tensor descriptions the argument checks take. A
family's declarations and wrappers live in its own module (lkjit/_wtconv_abi.py), which registers its entry
points' signatures here (declare) and its ranges (register_ranges). Imports nothing but the standard library.

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

C_API_VERSION = 6  # the oldest LKJIT_C_API_VERSION with every entry point this package declares

DTYPE_CODES = {"f32": 0, "f16": 1, "bf16": 2}
_DTYPE_ALIASES = {"f32": "f32", "fp32": "f32", "float32": "f32", "float": "f32",
                  "f16": "f16", "fp16": "f16", "float16": "f16", "half": "f16",
                  "bf16": "bf16", "bfloat16": "bf16"}



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


def dtype_code(dtype, where="wtconv"):
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
        raise SpecError(f"lkjit: error: {where}: dtype={dtype!r} is not supported; supported: "
                        f"{_dtype_spellings()}; or torch.float32, torch.float16, torch.bfloat16")
    return DTYPE_CODES[name]


# ---- integer arguments ---------------------------------------------------------------------------------
# ctypes converts a Python int to a C integer modulo 2^bits without a word (2**64 -> 0), so the library
# would report a value the caller never passed. Every integer argument is therefore taken with
# operator.index (ints, numpy integers; not float, str or bool) and checked against its C type first.

_INT = 31    # value bits of the C ABI's int
_INT64 = 63  # and of its int64_t

# The op families, one entry each: lkjit._<name>_abi holds its part of the C ABI (and registers its ranges
# below), lkjit.<name> its PyTorch layer (lkjit.torch re-exports each).
FAMILIES = ("wtconv", "scale")

# The library's range of each value that Python checks or names itself, as Python ranges, per family entry
# point ('wtconv', 'wtconv_transpose', ...): a family module registers its own (register_ranges) with the
# reasons they are copies, and a probe of each, with which test_import.py's test_ranges_match_the_library holds
# every registered range against the library.
_RANGES = {}
# How the library's messages state a range where they say more than "[lo, hi]" ({name}: the value's name).
_RANGE_FORMS = {}
# (where, name) -> (probe, bits): probe(**{name: v}) calls the C ABI with that value (the others valid, past
# Python's checks, no GPU involved) and returns (rc, lkjit_last_error() or ""); bits: the value bits of the C
# type that carries it (31: int, 63: int64_t), beyond which the value is not probed.
_PROBES = {}


def register_ranges(where, ranges, forms=None, probes=None):
    """Adds a family's ranges (name -> Python range) under ``where``, the forms of their messages
    ({name: "odd {name} in {range}"}) and a probe of each ({name: (probe, bits)}, see _PROBES). Every range
    needs a probe: ValueError naming those without one (a range the CPU test could not hold to the library)."""
    probes = dict(probes or {})
    if set(probes) != set(ranges):
        raise ValueError(f"lkjit: internal: register_ranges({where!r}): ranges and probes differ: without a probe: "
                         f"{sorted(set(ranges) - set(probes))}; without a range: {sorted(set(probes) - set(ranges))}")
    _RANGES[where] = dict(ranges)
    for name, form in (forms or {}).items():
        _RANGE_FORMS[(where, name)] = form
    for name, probe in probes.items():
        _PROBES[(where, name)] = probe


def probe_outcome(rc):
    """(rc, lkjit_last_error() when rc != 0, else "") for a probe (see _PROBES)."""
    return rc, ("" if rc == 0 else _lib.lkjit_last_error().decode("utf-8", "replace"))


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

# Entry points' signatures: {name: (restype, argtypes)}. The generic ones here; each family module adds its own
# with declare(), before or after the library is loaded.
_c = ctypes
_SIGNATURES = {
    "lkjit_version": (_c.c_char_p, []),
    "lkjit_last_error": (_c.c_char_p, []),
    "lkjit_gpu_available": (_c.c_int, [_c.POINTER(_c.c_char_p)]),
    "lkjit_info": (_c.c_int, [_c.POINTER(_c.c_char_p)]),
}


def declare(signatures):
    """Registers entry points' signatures ({name: (restype, [argtypes])}); applied to the library now if it is
    loaded, else when it loads. An entry point the library lacks fails the load (naming it)."""
    _SIGNATURES.update(signatures)
    if _lib is not None:
        _apply(_lib, signatures)


def _apply(lib, signatures):
    for name, (res, args) in signatures.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


def _declare(lib):
    """Signatures of the entry points (lkjit_c_api_version's is set by load(), which calls it first)."""
    _apply(lib, _SIGNATURES)


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
                if got < C_API_VERSION:  # entry points are only ever added: a newer library serves this package
                    tried.append(f"{p}: C ABI version {got}, this package needs {C_API_VERSION} or newer "
                                 "(rebuild liblkjit.so)")
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



def info():
    """What liblkjit.so runs with, as a dict: version, c_api, nvrtc (the libnvrtc loaded, or "not loaded: ..."
    naming every place looked), nvrtc_version, gpu; and library (liblkjit.so's path). Loads NVRTC."""
    lib = load()
    text = ctypes.c_char_p()
    _check(lib.lkjit_info(ctypes.byref(text)))
    out = {"library": _lib_path}
    for line in (text.value or b"").decode("utf-8", "replace").splitlines():
        key, _, value = line.partition(": ")
        out[key] = value
    return out


# ---- tensor descriptions for the argument checks (lkjit_tensor_desc) -----------------------------------
DEVICE_CPU, DEVICE_CUDA, DEVICE_OTHER = 0, 1, 2


class TensorDesc(ctypes.Structure):
    """lkjit_tensor_desc: sizes, dtype and device of a tensor, for the C ABI's argument checks."""
    _fields_ = [("dim", ctypes.c_int64), ("sizes", ctypes.POINTER(ctypes.c_int64)), ("dtype", ctypes.c_int),
                ("dtype_name", ctypes.c_char_p), ("device_type", ctypes.c_int), ("device_name", ctypes.c_char_p)]


def tensor_desc(sizes, dtype_code_or_none, dtype_name, device_type, device_name):
    """A TensorDesc (and the array it points to: keep the pair alive for the call)."""
    arr = (ctypes.c_int64 * max(len(sizes), 1))(*sizes)
    d = TensorDesc(len(sizes), ctypes.cast(arr, ctypes.POINTER(ctypes.c_int64)),
                   -1 if dtype_code_or_none is None else dtype_code_or_none, str(dtype_name).encode(), device_type,
                   str(device_name).encode())
    d._keep = arr
    return d

