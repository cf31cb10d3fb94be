"""The scale family's part of liblkjit.so's C ABI (include/lkjit/c_api_scale.h): signatures and the layer
handle. The generic plumbing is lkjit/_lib.py. Imports nothing but the standard library."""
import ctypes

from . import _lib
from ._lib import _INT, _INT64, _c_ints, _check, _ptr, _stream, _strides, dtype_code, load


def _probe_create(**kw):
    """lkjit_scale_create (it validates only: no GPU involved) with the given C, device."""
    a = dict(dict(C=8, device=0), **kw)
    lib = load()
    h = _c.c_void_p()
    rc = lib.lkjit_scale_create(a["C"], 0, a["device"], _c.byref(h))
    out = _lib.probe_outcome(rc)
    if rc == 0:
        lib.lkjit_scale_destroy(h)
    return out


# The library's ranges (validate_options in runtime/ops/scale_layer.cpp), held to it by test_import.py through
# the probes.
_lib.register_ranges("scale", {"C": range(1, (1 << 24) + 1), "device": range(0, 1 << _INT)}, None,
                     {"C": (_probe_create, _INT64), "device": (_probe_create, _INT)})

_c = ctypes
_i64, _vp, _sp = _c.c_int64, _c.c_void_p, _c.POINTER(_c.c_int64)
_lib.declare({
    "lkjit_scale_create": (_c.c_int, [_i64, _c.c_int, _c.c_int, _c.POINTER(_c.c_void_p)]),
    "lkjit_scale_destroy": (None, [_vp]),
    "lkjit_scale_forward": (_c.c_int, [_vp, _vp, _sp, _vp, _vp, _sp, _i64, _i64, _i64, _vp]),
})


class ScaleLayer:
    """A lkjit::ScaledCopy: y = a[c] * x on CUDA device pointers (ints), any element strides."""

    def __init__(self, C, dtype="f32", device=0):
        lib = load()
        C, device = _c_ints("scale", ("C", C, _INT64), ("device", device, _INT))
        h = _c.c_void_p()
        _check(lib.lkjit_scale_create(C, dtype_code(dtype, "scale"), device, _c.byref(h)))
        self._h, self._lib, self.C = h, lib, C

    def __del__(self):
        if getattr(self, "_h", None):
            self._lib.lkjit_scale_destroy(self._h)
            self._h = None

    def forward(self, x, a, y, B, H, W, stream=None, x_strides=None, y_strides=None):
        _check(self._lib.lkjit_scale_forward(self._h, _ptr(x, "x", "scale"), _strides(x_strides, "x_strides", "scale"),
                                             _ptr(a, "a", "scale"), _ptr(y, "y", "scale"),
                                             _strides(y_strides, "y_strides", "scale"), B, H, W,
                                             _stream(stream, "scale")))
