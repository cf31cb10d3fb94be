"""The WBMM family's part of liblkjit.so's C ABI (include/lkjit/c_api_wbmm.h): signatures, the layer handle and
the tensor checks the bindings share (check_tensors). The generic plumbing is lkjit/_lib.py. Imports nothing but
the standard library."""
import ctypes

from . import _lib
from ._lib import _INT, _INT64, _c_ints, _check, _ptr, _stream, _strides, arch_code, as_bool, dtype_code, load

TABLE, DENSE = 0, 1                          # LKJIT_WBMM_TABLE, LKJIT_WBMM_DENSE
IDENTITY, BIAS, ALLOW_TF32 = 1, 2, 4         # LKJIT_WBMM_* flags of lkjit_wbmm_create
PATHS = {"auto": 0, "fused": 1, "split": 2}  # lkjit_wbmm_set_backward_path
ALLOW_CPU = 1                                # LKJIT_CHECK_ALLOW_CPU



def _probe_create(**kw):
    """lkjit_wbmm_create (it validates only: no GPU involved) with the given C, wh, ww, device."""
    a = dict(dict(C=8, wh=7, ww=7, device=0), **kw)
    lib = load()
    h = ctypes.c_void_p()
    rc = lib.lkjit_wbmm_create(a["C"], a["wh"], a["ww"], TABLE, 0, IDENTITY, a["device"], ctypes.byref(h))
    out = _lib.probe_outcome(rc)
    if rc == 0:
        lib.lkjit_wbmm_destroy(h)
    return out


def _probe_describe(**kw):
    """lkjit_wbmm_describe of a shape (B, H, W) of a 1-channel 1x1-window layer, planned from sm_90's table."""
    a = dict(dict(B=1, H=1, W=1), **kw)
    lib = load()
    h = ctypes.c_void_p()
    _check(lib.lkjit_wbmm_create(1, 1, 1, TABLE, 0, IDENTITY, 0, ctypes.byref(h)))
    try:
        text = ctypes.c_char_p()
        return _lib.probe_outcome(lib.lkjit_wbmm_describe(h, a["B"], a["H"], a["W"], 0, 90, ctypes.byref(text)))
    finally:
        lib.lkjit_wbmm_destroy(h)


# Copies of the library's ranges (lkjit::wbmm_field_range, runtime/ops/wbmm_plan.cpp), for Python's own
# messages; test_import.py holds each to the library through the probes.
_lib.register_ranges("wbmm", {"C": range(1, (1 << 24) + 1), "wh": range(1, 17), "ww": range(1, 17),
                              "device": range(0, 1 << _INT), "B": range(1, 1 << 31), "H": range(1, (1 << 30) + 1),
                              "W": range(1, (1 << 30) + 1)}, None,
                     {"C": (_probe_create, _INT64), "wh": (_probe_create, _INT), "ww": (_probe_create, _INT),
                      "device": (_probe_create, _INT), "B": (_probe_describe, _INT64), "H": (_probe_describe, _INT64),
                      "W": (_probe_describe, _INT64)})

_c = ctypes
_i64, _vp, _sp, _fp = _c.c_int64, _c.c_void_p, _c.POINTER(_c.c_int64), _c.c_void_p
_TD = _c.POINTER(_lib.TensorDesc)
_lib.declare({
    "lkjit_wbmm_create": (_c.c_int, [_i64, _c.c_int, _c.c_int, _c.c_int, _c.c_int, _c.c_uint, _c.c_int,
                                     _c.POINTER(_c.c_void_p)]),
    "lkjit_wbmm_destroy": (None, [_vp]),
    "lkjit_wbmm_set_weights": (_c.c_int, [_vp, _fp, _fp, _fp]),
    "lkjit_wbmm_forward": (_c.c_int, [_vp, _vp, _sp, _vp, _sp, _i64, _i64, _i64, _vp]),
    "lkjit_wbmm_backward": (_c.c_int, [_vp, _vp, _sp, _vp, _sp, _vp, _sp, _fp, _fp, _fp, _i64, _i64, _i64, _vp]),
    "lkjit_wbmm_set_backward_path": (_c.c_int, [_vp, _c.c_int]),
    "lkjit_wbmm_prepare": (_c.c_int, [_vp, _i64, _i64, _i64, _c.c_int]),
    "lkjit_wbmm_describe": (_c.c_int, [_vp, _i64, _i64, _i64, _c.c_int, _c.c_int, _c.POINTER(_c.c_char_p)]),
    "lkjit_wbmm_workspace_bytes": (_c.c_int, [_vp, _c.POINTER(_c.c_uint64)]),
    "lkjit_wbmm_check_tensors": (_c.c_int, [_c.c_char_p, _i64, _c.c_int, _c.c_int, _c.c_int, _TD, _TD, _TD, _c.c_int,
                                            _c.c_int, _c.c_uint, _c.POINTER(_c.c_int)]),
})


def check_tensors(where, C, wh, ww, dense, x, grad_out, params, allow_cpu=False):
    """lkjit_wbmm_check_tensors on TensorDescs (lkjit._lib.tensor_desc); params = [R or M, (bias)]. Raises the
    library's message, a TypeError for a dtype and a SpecError (a ValueError) otherwise; None when all pass."""
    lib = load()
    arr = (_lib.TensorDesc * len(params))(*params)
    type_error = ctypes.c_int()
    rc = lib.lkjit_wbmm_check_tensors(where.encode(), C, wh, ww, DENSE if dense else TABLE, ctypes.byref(x),
                                      ctypes.byref(grad_out) if grad_out is not None else None, arr, len(params),
                                      int(len(params) > 1), ALLOW_CPU if allow_cpu else 0, ctypes.byref(type_error))
    if rc != 0:
        msg = lib.lkjit_last_error().decode("utf-8", "replace")
        raise (TypeError(msg) if type_error.value else _lib._ERRORS.get(rc, _lib.LkjitError)(msg, rc))


class WBMMLayer:
    """One lkjit::WBMM layer (opaque C handle): fixed C, window (wh, ww), mode, dtype, identity, bias, TF32
    choice and CUDA device. Pointers are ints (tensor.data_ptr(); 0 or None: null), streams cudaStream_t ints,
    strides 4 element strides in (B, C, H, W) order or None (NCHW contiguous). Parameters and gradients fp32,
    contiguous: R (C, (2wh-1)(2ww-1)) or M (C, wh*ww, wh*ww), bias (C). SpecError for out-of-range values
    (named, with the range), TypeError for values of the wrong type."""

    def __init__(self, C, wh=7, ww=7, dense=False, dtype="f32", identity=True, bias=False, allow_tf32=False, device=0):
        lib = load()
        C, wh, ww, device = _c_ints("wbmm", ("C", C, _INT64), ("wh", wh, _INT), ("ww", ww, _INT), ("device", device, _INT))
        flags = (IDENTITY if as_bool(identity, "identity") else 0) | (BIAS if as_bool(bias, "bias") else 0) | \
            (ALLOW_TF32 if as_bool(allow_tf32, "allow_tf32") else 0)
        h = _c.c_void_p()
        _check(lib.lkjit_wbmm_create(C, wh, ww, DENSE if as_bool(dense, "dense") else TABLE,
                                     dtype_code(dtype, "wbmm"), flags, device, _c.byref(h)))
        self._h, self._lib = h, lib
        self.C, self.wh, self.ww, self.dense, self.bias, self.device = C, wh, ww, bool(dense), bool(bias), device

    def __del__(self):
        if getattr(self, "_h", None):
            self._lib.lkjit_wbmm_destroy(self._h)
            self._h = None

    def set_weights(self, weight, bias=None):
        """weight: R (table mode) or M (dense mode); bias iff the layer has one (device pointers)."""
        w, b = _ptr(weight, "weight", "wbmm"), _ptr(bias, "bias", "wbmm")
        _check(self._lib.lkjit_wbmm_set_weights(self._h, None if self.dense else w, w if self.dense else None, b))

    def forward(self, x, out, B, H, W, stream=None, x_strides=None, out_strides=None):
        _check(self._lib.lkjit_wbmm_forward(self._h, _ptr(x, "x", "wbmm"), _strides(x_strides, "x_strides", "wbmm"),
                                            _ptr(out, "out", "wbmm"), _strides(out_strides, "out_strides", "wbmm"),
                                            *self._bhw(B, H, W), _stream(stream, "wbmm")))

    def backward(self, x, dout, dx, grad_weight, grad_bias, B, H, W, stream=None, x_strides=None, dout_strides=None,
                 dx_strides=None):
        """dx None: no dX. grad_weight is dR (table) or dM (dense)."""
        g = _ptr(grad_weight, "grad_weight", "wbmm")
        _check(self._lib.lkjit_wbmm_backward(
            self._h, _ptr(x, "x", "wbmm"), _strides(x_strides, "x_strides", "wbmm"), _ptr(dout, "dout", "wbmm"),
            _strides(dout_strides, "dout_strides", "wbmm"), _ptr(dx, "dx", "wbmm"),
            _strides(dx_strides, "dx_strides", "wbmm"), None if self.dense else g, g if self.dense else None,
            _ptr(grad_bias, "grad_bias", "wbmm"), *self._bhw(B, H, W), _stream(stream, "wbmm")))

    def set_backward_path(self, path):
        if path not in PATHS:
            raise _lib.SpecError(f"lkjit: error: wbmm: backward path {path!r} is not supported; supported: "
                                 f"{', '.join(PATHS)}")
        _check(self._lib.lkjit_wbmm_set_backward_path(self._h, PATHS[path]))

    def prepare(self, B, H, W, backward=False):
        _check(self._lib.lkjit_wbmm_prepare(self._h, *self._bhw(B, H, W), int(as_bool(backward, "backward"))))

    def describe(self, B, H, W, backward=False, arch=0):
        """The kernels a shape runs, one line each. arch=0: for this layer's GPU; 90, 'sm_90', ...: from that
        arch's limits table, no GPU needed."""
        text = ctypes.c_char_p()
        _check(self._lib.lkjit_wbmm_describe(self._h, *self._bhw(B, H, W), int(as_bool(backward, "backward")),
                                             arch_code(arch), ctypes.byref(text)))
        return text.value.decode()

    def workspace_bytes(self):
        v = ctypes.c_uint64()
        _check(self._lib.lkjit_wbmm_workspace_bytes(self._h, ctypes.byref(v)))
        return v.value

    @staticmethod
    def _bhw(B, H, W):
        return _c_ints("wbmm", ("B", B, _INT64), ("H", H, _INT64), ("W", W, _INT64))
