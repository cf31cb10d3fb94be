"""The depthwise family's part of liblkjit.so's C ABI (include/lkjit/c_api_dwconv.h): signatures, the layer
handle DWConvLayer and the argument checks of the PyTorch layer's tensors (check_tensors). The generic plumbing
is lkjit/_lib.py. Imports nothing but the standard library."""
import ctypes

from . import _lib
from ._lib import _INT, _INT64, _c_ints, _check, _ptr, _stream, _strides, arch_code, dtype_code, load

def _probe_create(**kw):
    """lkjit_dwconv_create (it validates only: no GPU involved) with the given values, the others valid."""
    a = dict(dict(C=8, kh=3, kw=3, stride=1, dilation=1, pad_h=0, pad_w=0, device=0), **kw)
    lib = load()
    h = _c.c_void_p()
    rc = lib.lkjit_dwconv_create(a["C"], a["kh"], a["kw"], a["stride"], a["dilation"], a["pad_h"], a["pad_w"], 0, 0, 1,
                                 0, a["device"], _c.byref(h))
    out = _lib.probe_outcome(rc)
    if rc == 0:
        lib.lkjit_dwconv_destroy(h)
    return out


# Ranges Python names itself (values too large for the C ABI's int never reach the library); the library's own
# checks (dwconv_check_options in runtime/ops/dwconv_plan.cpp) are the authority, held to them by test_import.py
# through the probes.
_RANGES = {"C": range(1, (1 << 24) + 1), "kh": range(1, 64), "kw": range(1, 64), "stride": range(1, 3),
           "dilation": range(1, 5), "pad_h": range(0, 1001), "pad_w": range(0, 1001), "device": range(0, 1 << _INT)}
_lib.register_ranges("dwconv", _RANGES, None,
                     {n: (_probe_create, _INT64 if n == "C" else _INT) for n in _RANGES})

LAYOUT_NCHW, LAYOUT_NHWC = 0, 1
ALLOW_CPU = 1  # LKJIT_CHECK_ALLOW_CPU

_c = ctypes
_i, _i64, _vp, _sp = _c.c_int, _c.c_int64, _c.c_void_p, _c.POINTER(_c.c_int64)
_td = _c.POINTER(_lib.TensorDesc)
_lib.declare({
    "lkjit_dwconv_create": (_i, [_i64, _i, _i, _i, _i, _i, _i, _i, _i, _i, _i, _i, _c.POINTER(_vp)]),
    "lkjit_dwconv_destroy": (None, [_vp]),
    "lkjit_dwconv_set_weights": (_i, [_vp, _vp, _vp]),
    "lkjit_dwconv_output_size": (_i, [_vp, _i64, _i64, _sp, _sp]),
    "lkjit_dwconv_forward": (_i, [_vp, _vp, _sp, _vp, _sp, _i64, _i64, _i64, _vp]),
    "lkjit_dwconv_backward": (_i, [_vp, _vp, _sp, _vp, _sp, _vp, _sp, _vp, _vp, _i64, _i64, _i64, _vp]),
    "lkjit_dwconv_prepare": (_i, [_vp, _i64, _i64, _i64, _i]),
    "lkjit_dwconv_describe": (_i, [_vp, _i64, _i64, _i64, _i, _i, _c.POINTER(_c.c_char_p)]),
    "lkjit_dwconv_workspace_bytes": (_i, [_vp, _c.POINTER(_c.c_uint64)]),
    "lkjit_dwconv_check_tensors": (_i, [_c.c_char_p, _i64, _i, _i, _i, _i, _i, _i, _i, _td, _td, _td, _td, _c.c_uint,
                                        _c.POINTER(_i)]),
})


def check_tensors(where, C, kh, kw, stride, dil, pad_h, pad_w, same, x, grad_out, weight, bias, allow_cpu=False):
    """lkjit_dwconv_check_tensors on TensorDescs (lkjit._lib.tensor_desc): raises the library's message, as a
    TypeError for a dtype and a SpecError (a ValueError) otherwise."""
    lib = load()
    type_error = _c.c_int()
    ref = lambda d: _c.byref(d) if d is not None else None  # noqa: E731
    rc = lib.lkjit_dwconv_check_tensors(where.encode(), C, kh, kw, stride, dil, pad_h, pad_w, int(same), _c.byref(x),
                                        ref(grad_out), _c.byref(weight), ref(bias), ALLOW_CPU if allow_cpu else 0,
                                        _c.byref(type_error))
    if rc != 0:
        msg = lib.lkjit_last_error().decode("utf-8", "replace")
        raise (TypeError(msg) if type_error.value else _lib._ERRORS.get(rc, _lib.LkjitError)(msg, rc))


class DWConvLayer:
    """One lkjit::DepthwiseConv (opaque C handle): fixed C, (kh, kw), stride, dilation, padding, dtype, bias and
    CUDA device. Pointers are ints (``tensor.data_ptr()``; 0 or None: null); a stream is a cudaStream_t as an int;
    strides: 4 element strides in (B, C, H, W) order (``tensor.stride()``) or None for NCHW contiguous. x, dx
    (B, C, H, W) and y, dout (B, C, Ho, Wo) in ``dtype``; weight and dw (C, 1, kh, kw), bias and dbias (C) fp32.
    Raises SpecError for out-of-range options (named, with the range)."""

    def __init__(self, C, kh, kw, stride=1, dil=1, pad_h=0, pad_w=0, same=False, dtype="f32", bias=True,
                 layout="NCHW", device=0):
        lib = load()
        C, kh, kw, stride, dil, pad_h, pad_w, device = _c_ints(
            "dwconv", ("C", C, _INT64), ("kh", kh, _INT), ("kw", kw, _INT), ("stride", stride, _INT),
            ("dilation", dil, _INT), ("pad_h", pad_h, _INT), ("pad_w", pad_w, _INT), ("device", device, _INT))
        lay = {"NCHW": LAYOUT_NCHW, "NHWC": LAYOUT_NHWC}.get(layout)
        if lay is None:
            raise _lib.SpecError(f"lkjit: error: dwconv: layout={layout!r} is not supported; supported: 'NCHW', 'NHWC'")
        h = _c.c_void_p()
        _check(lib.lkjit_dwconv_create(C, kh, kw, stride, dil, pad_h, pad_w, int(bool(same)), dtype_code(dtype, "dwconv"),
                                       int(bool(bias)), lay, device, _c.byref(h)))
        self._h, self._lib = h, lib
        self.C, self.kh, self.kw, self.bias, self.device = C, kh, kw, bool(bias), device

    def __del__(self):
        if getattr(self, "_h", None):
            self._lib.lkjit_dwconv_destroy(self._h)
            self._h = None

    def output_size(self, H, W):
        """(Ho, Wo) of an H x W input; SpecError when there is no output."""
        ho, wo = _c.c_int64(), _c.c_int64()
        _check(self._lib.lkjit_dwconv_output_size(self._h, H, W, _c.byref(ho), _c.byref(wo)))
        return ho.value, wo.value

    def set_weights(self, w, bias=None):
        _check(self._lib.lkjit_dwconv_set_weights(self._h, _ptr(w, "w", "dwconv"), _ptr(bias, "bias", "dwconv")))

    def forward(self, x, y, B, H, W, stream=None, x_strides=None, y_strides=None):
        _check(self._lib.lkjit_dwconv_forward(self._h, _ptr(x, "x", "dwconv"), _strides(x_strides, "x_strides", "dwconv"),
                                              _ptr(y, "y", "dwconv"), _strides(y_strides, "y_strides", "dwconv"), B, H,
                                              W, _stream(stream, "dwconv")))

    def backward(self, x, dout, dx, dw, dbias, B, H, W, stream=None, x_strides=None, dout_strides=None,
                 dx_strides=None):
        _check(self._lib.lkjit_dwconv_backward(
            self._h, _ptr(x, "x", "dwconv"), _strides(x_strides, "x_strides", "dwconv"), _ptr(dout, "dout", "dwconv"),
            _strides(dout_strides, "dout_strides", "dwconv"), _ptr(dx, "dx", "dwconv"),
            _strides(dx_strides, "dx_strides", "dwconv"), _ptr(dw, "dw", "dwconv"), _ptr(dbias, "dbias", "dwconv"),
            B, H, W, _stream(stream, "dwconv")))

    def prepare(self, B, H, W, backward=False):
        _check(self._lib.lkjit_dwconv_prepare(self._h, B, H, W, int(bool(backward))))

    def describe(self, B, H, W, backward=False, arch=0):
        """The kernels a shape runs, one line each, then "path=direct|nhwc|mma"; arch 0: this layer's GPU (its tuning
        database's path and tiles), else that arch's table and the rule (no GPU)."""
        text = _c.c_char_p()
        _check(self._lib.lkjit_dwconv_describe(self._h, B, H, W, int(bool(backward)), arch_code(arch), _c.byref(text)))
        return text.value.decode()

    def workspace_bytes(self):
        n = _c.c_uint64()
        _check(self._lib.lkjit_dwconv_workspace_bytes(self._h, _c.byref(n)))
        return n.value
