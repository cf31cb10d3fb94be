"""WTConv's part of liblkjit.so's C ABI (the lkjit_wtconv_* entry points of include/lkjit/c_api.h): their
signatures, the layer handle WTConvLayer, the layout transpose, the argument checks of the PyTorch layer's
tensors (check_tensors), and the ranges Python names itself. The generic plumbing is lkjit/_lib.py. Imports
nothing but the standard library."""
import ctypes

from . import _lib
from ._lib import (SpecError, _INT, _INT64, _I64_LO, _I64_HI, _c_ints, _check, _ptr, _ptr_list, _ptrs, _stream,
                   _strides, arch_code, as_bool, dtype_code, load)

REUSE_FORWARD_FOLD = 1  # LKJIT_BACKWARD_REUSE_FORWARD_FOLD
MAX_LEVELS = 8

# The library's range of each value that Python checks or names itself, as Python ranges (k: odd values
# only). _c_ints states them for values too large for the C ABI's types, which the library would never see,
# and WTConv2d checks its options against them (range_errors). The library is the authority (validate_options
# and validate_shape in runtime/ops/wtconv_plan.cpp, wtconv_transpose_check) and its C ABI does not expose
# them, so test_import.py's test_ranges_match_the_library calls the C ABI in and around both ends of every
# range here, through the probes below: a change on either side fails the CPU tests. An upper bound that is the
# C type's own (device, the transpose's B) means the library sets none below it.

def _probe_create(**kw):
    """lkjit_wtconv_create (it validates only: no GPU involved) with the given C, k, L, stride, device."""
    a = dict(dict(C=8, k=5, L=1, stride=1, device=0), **kw)
    lib = load()
    h = ctypes.c_void_p()
    rc = lib.lkjit_wtconv_create(a["C"], a["k"], a["L"], 0, 1, a["stride"], a["device"], ctypes.byref(h))
    out = _lib.probe_outcome(rc)
    if rc == 0:
        lib.lkjit_wtconv_destroy(h)
    return out


def _probe_describe(**kw):
    """lkjit_wtconv_describe of a shape (B, H, W), planned from sm_90's table: no GPU involved."""
    a = dict(dict(B=1, H=1, W=1), **kw)
    lib = load()
    h = ctypes.c_void_p()
    _check(lib.lkjit_wtconv_create(1, 1, 0, 0, 1, 1, 0, ctypes.byref(h)))
    try:
        text = ctypes.c_char_p()
        return _lib.probe_outcome(lib.lkjit_wtconv_describe(h, a["B"], a["H"], a["W"], 0, 90, ctypes.byref(text)))
    finally:
        lib.lkjit_wtconv_destroy(h)


def _probe_transpose(**kw):
    """lkjit_wtconv_transpose with src = dst: refused by its last check (overlap) when every other one passes,
    which counts as passing here (no GPU involved)."""
    a = dict(dict(B=1, C=1, H=1, W=1, device=0), **kw)
    st = _lib.Strides(a["C"] * a["H"] * a["W"], a["H"] * a["W"], a["W"], 1)
    rc, msg = _lib.probe_outcome(load().lkjit_wtconv_transpose(4096, st, 4096, st, 0, a["B"], a["C"], a["H"], a["W"],
                                                               a["device"], None))
    return (0, "") if "src and dst overlap" in msg else (rc, msg)


_lib.register_ranges("wtconv", {"C": range(1, (1 << 24) + 1), "k": range(1, 32, 2), "L": range(0, MAX_LEVELS + 1),
                                "stride": range(1, 65), "device": range(0, 1 << _INT), "B": range(1, 1 << 31),
                                "H": range(1, (1 << 30) + 1), "W": range(1, (1 << 30) + 1)},
                     {"k": "odd {name} in {range}", "L": "{name} in {range}"},
                     {"C": (_probe_create, _INT64), "k": (_probe_create, _INT), "L": (_probe_create, _INT),
                      "stride": (_probe_create, _INT), "device": (_probe_create, _INT),
                      "B": (_probe_describe, _INT64), "H": (_probe_describe, _INT64), "W": (_probe_describe, _INT64)})
_lib.register_ranges("wtconv_transpose", {"B": range(1, 1 << _INT64), "C": range(1, (1 << 31) - 64),
                                          "H": range(1, (1 << 31) - 64), "W": range(1, (1 << 31) - 64),
                                          "device": range(0, 1 << _INT)},
                     {"H": "{range} (H*W too)", "W": "{range} (H*W too)"},
                     {**{n: (_probe_transpose, _INT64) for n in "BCHW"}, "device": (_probe_transpose, _INT)})

_c = ctypes
_i64, _vp, _pp, _sp = _c.c_int64, _c.c_void_p, _c.POINTER(_c.c_void_p), _c.POINTER(_c.c_int64)
_lib.declare({
    "lkjit_wtconv_create": (_c.c_int, [_i64, _c.c_int, _c.c_int, _c.c_int, _c.c_int, _c.c_int, _c.c_int, _pp]),
    "lkjit_wtconv_destroy": (None, [_vp]),
    "lkjit_wtconv_set_weights": (_c.c_int, [_vp, _vp, _vp, _vp, _pp, _pp, _vp]),
    "lkjit_wtconv_forward": (_c.c_int, [_vp, _vp, _vp, _i64, _i64, _i64, _vp]),
    "lkjit_wtconv_backward": (_c.c_int, [_vp, _vp, _vp, _vp, _vp, _vp, _vp, _pp, _pp, _i64, _i64, _i64, _vp]),
    "lkjit_wtconv_forward_strided": (_c.c_int, [_vp, _vp, _sp, _vp, _sp, _i64, _i64, _i64, _vp]),
    "lkjit_wtconv_backward_strided": (_c.c_int, [_vp, _vp, _sp, _vp, _sp, _vp, _sp, _vp, _vp, _vp, _pp, _pp, _i64, _i64,
                                                 _i64, _vp]),
    "lkjit_wtconv_backward_flags": (_c.c_int, [_vp, _vp, _sp, _vp, _sp, _vp, _sp, _vp, _vp, _vp, _pp, _pp, _i64, _i64,
                                               _i64, _c.c_uint, _vp]),
    "lkjit_wtconv_prepare": (_c.c_int, [_vp, _i64, _i64, _i64, _c.c_int]),
    "lkjit_wtconv_describe": (_c.c_int, [_vp, _i64, _i64, _i64, _c.c_int, _c.c_int, _c.POINTER(_c.c_char_p)]),
    "lkjit_wtconv_runs_lane": (_c.c_int, [_vp, _i64, _i64, _i64, _c.c_int, _c.POINTER(_c.c_int)]),
    "lkjit_wtconv_workspace_bytes": (_c.c_int, [_vp, _c.POINTER(_c.c_uint64)]),
    "lkjit_wtconv_transpose": (_c.c_int, [_vp, _sp, _vp, _sp, _c.c_int, _i64, _i64, _i64, _i64, _c.c_int, _vp]),
    "lkjit_wtconv_check_tensors": (_c.c_int, [_c.c_char_p, _i64, _c.c_int, _c.POINTER(_lib.TensorDesc),
                                              _c.POINTER(_lib.TensorDesc), _c.POINTER(_lib.TensorDesc), _c.c_int,
                                              _c.c_int, _c.c_int, _c.c_int, _c.c_uint, _c.POINTER(_c.c_int)]),
})
ALLOW_CPU = 1  # LKJIT_CHECK_ALLOW_CPU


def _bhw(B, H, W):
    """A shape's (B, H, W) for the C ABI's int64_t. Plain ints in range (every call from lkjit.torch: tensor
    sizes) take two comparisons each; anything else gets the full check."""
    if type(B) is int and type(H) is int and type(W) is int and \
            _I64_LO <= B <= _I64_HI and _I64_LO <= H <= _I64_HI and _I64_LO <= W <= _I64_HI:
        return B, H, W
    return _c_ints("wtconv", ("B", B, _INT64), ("H", H, _INT64), ("W", W, _INT64))



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




def check_tensors(where, C, stride, x, grad_out, params, n_level_w, n_level_s, has_bias, allow_cpu=False):
    """lkjit_wtconv_check_tensors on TensorDescs (lkjit._lib.tensor_desc): raises the library's message, as a
    TypeError for a dtype and a SpecError (a ValueError) otherwise; returns None when every check passes."""
    lib = load()
    arr = (_lib.TensorDesc * len(params))(*params)
    type_error = ctypes.c_int()
    rc = lib.lkjit_wtconv_check_tensors(where.encode(), C, stride, ctypes.byref(x),
                                        ctypes.byref(grad_out) if grad_out is not None else None, arr, len(params),
                                        n_level_w, n_level_s, int(has_bias), ALLOW_CPU if allow_cpu else 0,
                                        ctypes.byref(type_error))
    if rc != 0:
        msg = lib.lkjit_last_error().decode("utf-8", "replace")
        raise (TypeError(msg) if type_error.value else _lib._ERRORS.get(rc, _lib.LkjitError)(msg, rc))


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
