"""CPU tests of the lkjit package (no GPU needed; CTest `python_cpu`, label cpu): it installs with pip
(offline, into a --target folder), imports without PyTorch, loads liblkjit.so, reports the missing GPU
with a reason, and maps C ABI errors to exceptions that name the bad value. The PyTorch module's
argument checks and state_dict handling run when torch is importable (skipped otherwise)."""
import os
import re
import subprocess
import sys

import pytest

import lkjit
from lkjit import _state_dict, _wtconv_abi

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_SRC = os.path.dirname(HERE)  # python/


def _library_or_skip():
    try:
        return lkjit.library_path()
    except lkjit.LibraryNotFoundError as e:
        pytest.skip(f"liblkjit.so not built: {e}")


def _pip_or_skip():
    r = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"{sys.executable} has no pip")


def test_versions_agree():
    text = open(os.path.join(PKG_SRC, "pyproject.toml"), encoding="utf-8").read()
    assert re.search(r'^version = "([^"]+)"', text, re.M).group(1) == lkjit.__version__
    _library_or_skip()
    assert lkjit.library_version() == lkjit.__version__


def test_import_does_not_import_torch():
    code = "import sys, lkjit; lkjit.gpu_available(); assert 'torch' not in sys.modules, 'torch was imported'"
    env = dict(os.environ, PYTHONPATH=PKG_SRC)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr


def test_pip_install_into_target(tmp_path):
    _pip_or_skip()
    lib = _library_or_skip()
    target = tmp_path / "site"
    env = dict(os.environ, LKJIT_LIBRARY=lib, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target),
                        PKG_SRC], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert (target / "lkjit" / "liblkjit.so").is_file(), "the prebuilt library was not bundled"
    # The installed copy, with no LKJIT_LIBRARY: it must find the bundled library.
    env = {k: v for k, v in os.environ.items() if k not in ("LKJIT_LIBRARY", "PYTHONPATH")}
    env["PYTHONPATH"] = str(target)
    code = ("import lkjit; s = lkjit.gpu_available(); "
            "print(lkjit.__file__); print(lkjit.library_path()); print(bool(s)); print(s.reason)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert out[0].startswith(str(target)) and out[1] == str(target / "lkjit" / "liblkjit.so")
    if out[2] == "False":
        assert out[3], "a missing GPU must come with a reason"


def test_missing_library_is_reported(tmp_path):
    env = dict(os.environ, PYTHONPATH=PKG_SRC, LKJIT_LIBRARY=str(tmp_path / "nope" / "liblkjit.so"))
    code = ("import lkjit\ns = lkjit.gpu_available()\nassert not s and 'nope' in s.reason, s\n"
            "try:\n    lkjit.WTConvLayer(8)\nexcept lkjit.LibraryNotFoundError as e:\n    print(e)\n"
            "else:\n    raise SystemExit('no error')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "LKJIT_LIBRARY" in r.stdout and "no such file" in r.stdout


def test_gpu_available_reports_a_reason():
    _library_or_skip()
    s = lkjit.gpu_available()
    if s:
        pytest.skip("this machine has a GPU")
    assert s.available is False and not s
    assert "libcuda" in s.reason or "GPU" in s.reason or "device" in s.reason, s.reason


def test_layer_options_are_validated():
    _library_or_skip()
    with pytest.raises(lkjit.SpecError, match=r"k=4 is out of range.*L=9 is out of range") as e:
        lkjit.WTConvLayer(8, k=4, L=9)
    assert e.value.code == 2 and isinstance(e.value, ValueError)
    with pytest.raises(lkjit.SpecError, match="stride=0"):
        lkjit.WTConvLayer(8, stride=0)
    with pytest.raises(lkjit.SpecError, match="C=0"):
        lkjit.WTConvLayer(0)
    with pytest.raises(lkjit.SpecError, match="'f64'"):
        lkjit.WTConvLayer(8, dtype="f64")


def test_plan_without_gpu():
    _library_or_skip()
    layer = lkjit.WTConvLayer(96, k=5, L=5, dtype="bf16")
    fwd = layer.describe(64, 56, 56, arch=90).splitlines()
    assert fwd[0].startswith("lkjit_wtconv_fold_k5_L5") and "bf16" in fwd[1] and "sm90" in fwd[1]
    bwd = layer.describe(8, 512, 512, backward=True, arch=90)
    assert "level=5" in bwd
    with pytest.raises(lkjit.SpecError, match="sm_12|arch|12"):
        layer.describe(1, 8, 8, arch=12)
    with pytest.raises(lkjit.SpecError, match="H=0"):
        layer.describe(1, 0, 8, arch=90)


def test_calls_without_gpu_raise_driver_error():
    _library_or_skip()
    if lkjit.gpu_available():
        pytest.skip("this machine has a GPU")
    layer = lkjit.WTConvLayer(4, L=2)
    with pytest.raises(lkjit.DriverError, match="libcuda|GPU|device"):
        layer.set_weights(1, 1, 1, [1, 1], [1, 1])
    with pytest.raises(lkjit.DriverError):
        layer.forward(1, 1, 1, 8, 8)
    with pytest.raises(lkjit.SpecError, match="L=2"):
        layer.set_weights(1, 1, 1, [1], [1])
    assert layer.workspace_bytes() == 0
    layer.close()
    with pytest.raises(lkjit.SpecError, match="closed"):
        layer.forward(1, 1, 1, 8, 8)


def test_strided_calls_are_checked_before_the_gpu():
    """Bad strides are refused by the C ABI (SpecError, code 2, naming the tensor, the dim and the range)
    before any GPU call, so the same errors come on a machine without one."""
    _library_or_skip()
    layer = lkjit.WTConvLayer(4, L=2)  # x, dx: (1, 4, 8, 8); NCHW strides (256, 64, 8, 1)
    with pytest.raises(lkjit.SpecError, match=r"x stride\[2\]=0 \(H of size 8\) is out of range") as e:
        layer.forward(1, 1, 1, 8, 8, x_strides=(256, 64, 0, 1))
    assert e.value.code == 2 and isinstance(e.value, ValueError)
    with pytest.raises(lkjit.SpecError, match=r"out strides \[256, 64, 4, 1\] overlap"):
        layer.forward(1, 1, 1, 8, 8, out_strides=(256, 64, 4, 1))
    grads = dict(grad_base_w=1, grad_base_b=1, grad_base_s=1, grad_level_w=[1, 1], grad_level_s=[1, 1])
    with pytest.raises(lkjit.SpecError, match=r"dx strides \[256, 1, 24, 3\] overlap"):
        layer.backward(1, 1, 1, B=1, H=8, W=8, dx_strides=(256, 1, 24, 3), **grads)
    with pytest.raises(lkjit.SpecError, match=r"dout stride\[3\]=0 \(W of size 8\)"):
        layer.backward(1, 1, 1, B=1, H=8, W=8, dout_strides=(256, 64, 8, 0), **grads)
    with pytest.raises(lkjit.SpecError, match="x_strides has 3 entries"):
        layer.forward(1, 1, 1, 8, 8, x_strides=(64, 8, 1))
    if not lkjit.gpu_available():  # channels_last strides pass the checks and reach the driver
        with pytest.raises(lkjit.DriverError):
            layer.forward(1, 1, 1, 8, 8, x_strides=(256, 1, 32, 4), out_strides=(256, 1, 32, 4))
        with pytest.raises(lkjit.DriverError):
            layer.backward(1, 1, 1, B=1, H=8, W=8, x_strides=(256, 1, 32, 4), dout_strides=(256, 64, 8, 1),
                           dx_strides=(256, 1, 32, 4), **grads)


def test_null_pointers_are_checked_before_the_gpu():
    """A null pointer is refused by the C ABI (SpecError, code 2, naming it) before any GPU call, so the
    same errors come on a machine without one, not a DriverError."""
    _library_or_skip()
    layer = lkjit.WTConvLayer(4, L=2)
    with pytest.raises(lkjit.SpecError, match="base_w and base_s must be non-null") as e:
        layer.set_weights(0, 1, 1, [1, 1], [1, 1])
    assert e.value.code == 2 and isinstance(e.value, ValueError)
    with pytest.raises(lkjit.SpecError, match="bias=true but base_b is null"):
        layer.set_weights(1, 0, 1, [1, 1], [1, 1])
    with pytest.raises(lkjit.SpecError, match=r"level_w\[1\] and level_s\[1\] must be non-null for L=2"):
        layer.set_weights(1, 1, 1, [1, 0], [1, 1])
    with pytest.raises(lkjit.SpecError, match="x and out must be non-null"):
        layer.forward(0, 1, 1, 8, 8)
    with pytest.raises(lkjit.SpecError, match="x and out must be non-null"):
        layer.forward(1, 0, 1, 8, 8, x_strides=(256, 1, 32, 4))
    grads = dict(grad_base_w=1, grad_base_b=1, grad_base_s=1, grad_level_w=[1, 1], grad_level_s=[1, 1])
    with pytest.raises(lkjit.SpecError, match="x, dout and dx must be non-null"):
        layer.backward(1, 1, 0, B=1, H=8, W=8, **grads)
    with pytest.raises(lkjit.SpecError, match="grads.base_w and grads.base_s must be non-null"):
        layer.backward(1, 1, 1, B=1, H=8, W=8, **dict(grads, grad_base_s=0))
    with pytest.raises(lkjit.SpecError, match=r"grads.level_w\[0\] and grads.level_s\[0\] must be non-null"):
        layer.backward(1, 1, 1, B=1, H=8, W=8, **dict(grads, grad_level_s=[0, 1]))


def test_backward_flags_are_checked_before_the_gpu():
    """lkjit_wtconv_backward_flags refuses unknown bits (code 2, naming the value and the accepted flag) right
    after the handle check, before the pointers; with LKJIT_BACKWARD_REUSE_FORWARD_FOLD the other checks still
    run. The Python method takes the flag as a bool."""
    import ctypes

    from lkjit import _lib
    _library_or_skip()
    lib = _lib.load()
    layer = lkjit.WTConvLayer(4, L=1)
    h = layer._handle()
    lv = (ctypes.c_void_p * 1)(1)

    def call(flags, x=1):
        return lib.lkjit_wtconv_backward_flags(h, x, None, 1, None, 1, None, 1, 1, 1, lv, lv, 1, 8, 8, flags, None)
    assert call(2) == 2
    assert "flags=0x2 has unknown bits; supported: 0 or LKJIT_BACKWARD_REUSE_FORWARD_FOLD (0x1)" in \
        lib.lkjit_last_error().decode()
    assert call(_wtconv_abi.REUSE_FORWARD_FOLD, x=None) == 2
    assert "x, dout and dx must be non-null" in lib.lkjit_last_error().decode()
    grads = dict(grad_base_w=1, grad_base_b=1, grad_base_s=1, grad_level_w=[1], grad_level_s=[1])
    with pytest.raises(TypeError, match="reuse_forward_fold must be a bool"):
        layer.backward(1, 1, 1, B=1, H=8, W=8, reuse_forward_fold=1, **grads)
    with pytest.raises(lkjit.SpecError, match="x, dout and dx must be non-null"):
        layer.backward(0, 1, 1, B=1, H=8, W=8, reuse_forward_fold=True, **grads)


def test_transpose_arguments_are_checked_before_the_gpu():
    """lkjit's layout transpose refuses bad arguments (SpecError naming the value) before any GPU call."""
    _library_or_skip()
    from lkjit import _lib
    nchw, nhwc = (48, 16, 4, 1), (48, 1, 12, 3)
    with pytest.raises(lkjit.SpecError, match="src and dst must be non-null"):
        _wtconv_abi.transpose(0, nchw, 1, nhwc, "f32", 1, 3, 4, 4)
    with pytest.raises(lkjit.SpecError, match="W=0 is out of range"):
        _wtconv_abi.transpose(1, nchw, 2, nhwc, "f32", 1, 3, 4, 0)
    with pytest.raises(lkjit.SpecError, match=r"dst strides \[48, 1, 3, 3\] overlap"):
        _wtconv_abi.transpose(1, nchw, 2, (48, 1, 3, 3), "bf16", 1, 3, 4, 4)
    with pytest.raises(lkjit.SpecError, match="dst_strides is None"):
        _wtconv_abi.transpose(1, nchw, 2, None, "f16", 1, 3, 4, 4)
    with pytest.raises(lkjit.SpecError, match="dtype='f8'"):
        _wtconv_abi.transpose(1, nchw, 2, nhwc, "f8", 1, 3, 4, 4)
    with pytest.raises(lkjit.SpecError, match="src and dst overlap"):
        _wtconv_abi.transpose(4096, nchw, 4096 + 64, nhwc, "f32", 1, 3, 4, 4)
    with pytest.raises(lkjit.SpecError, match=r"H\*W \(H=65536, W=65536\) must each be at most 2\^31-65"):
        _wtconv_abi.transpose(1, (1 << 32, 1 << 32, 65536, 1), 1 << 40, (1 << 32, 1, 1 << 20, 16), "f32", 1, 1, 65536, 65536)


class _Index:
    """An int-like object other than int (as numpy integers are): operator.index takes it."""

    def __init__(self, v):
        self.v = v

    def __index__(self):
        return self.v


def test_sizes_too_large_for_the_c_types_are_named():
    """ctypes wraps a Python int modulo 2^bits (2**64 -> 0): the message must name the value passed."""
    _library_or_skip()
    big = 2 ** 70
    with pytest.raises(lkjit.SpecError, match=rf"C={big} is out of range; supported: \[1, 2\^24\]") as e:
        lkjit.WTConvLayer(big, 5, 2)
    assert e.value.code == 2 and isinstance(e.value, ValueError)
    with pytest.raises(lkjit.SpecError, match=rf"k={2 ** 32 + 5} is out of range; supported: odd k in \[1, 31\]"):
        lkjit.WTConvLayer(8, 2 ** 32 + 5)  # an int: would wrap to 5
    with pytest.raises(lkjit.SpecError, match=rf"L={2 ** 32 + 2} is out of range.*stride={2 ** 32 + 1} is out"):
        lkjit.WTConvLayer(8, 5, 2 ** 32 + 2, stride=2 ** 32 + 1)
    with pytest.raises(lkjit.SpecError, match=rf"device={2 ** 32} is out of range; supported: \[0, 2\^31-1\]"):
        lkjit.WTConvLayer(8, device=2 ** 32)
    layer = lkjit.WTConvLayer(8, 5, 2)
    with pytest.raises(lkjit.SpecError, match=rf"B={2 ** 64} is out of range; supported: \[1, 2\^31-1\]"):
        layer.describe(2 ** 64, 56, 56, arch=90)
    with pytest.raises(lkjit.SpecError, match=rf"H={2 ** 64 + 8} is out of range; supported: \[1, 2\^30\]"):
        layer.describe(1, 2 ** 64 + 8, 8, arch=90)
    for call in (lambda: layer.forward(1, 2, 2 ** 64, 56, 56), lambda: layer.prepare(2 ** 64, 56, 56),
                 lambda: layer.runs_lane(2 ** 64, 56, 56),
                 lambda: layer.backward(1, 1, 1, 1, 1, 1, [1, 1], [1, 1], 2 ** 64, 56, 56)):
        with pytest.raises(lkjit.SpecError, match=rf"B={2 ** 64} is out of range"):
            call()
    with pytest.raises(lkjit.SpecError, match=rf"W={-2 ** 63 - 1} is out of range"):
        layer.forward(1, 2, 1, 8, -2 ** 63 - 1)
    with pytest.raises(lkjit.SpecError, match=rf"x_strides\[2\]={2 ** 64 + 8} is out of range; supported: "
                                              r"\[-2\^63, 2\^63-1\] \(int64_t\)"):
        layer.forward(1, 2, 1, 8, 8, x_strides=(512, 64, 2 ** 64 + 8, 1))
    from lkjit import _lib
    nchw, nhwc = (48, 16, 4, 1), (48, 1, 12, 3)
    with pytest.raises(lkjit.SpecError, match=rf"wtconv_transpose: C={2 ** 64 + 3} is out of range; supported: "
                                              r"\[1, 2\^31-65\]"):
        _wtconv_abi.transpose(1, nchw, 2, nhwc, "f32", 1, 2 ** 64 + 3, 4, 4)
    with pytest.raises(lkjit.SpecError, match=rf"device={2 ** 32} is out of range"):
        _wtconv_abi.transpose(1, nchw, 2, nhwc, "f32", 1, 3, 4, 4, device=2 ** 32)


def test_ranges_match_the_library():
    """lkjit._lib._RANGES copies the library's ranges: WTConv2d checks its options against them, and Python
    states them for values too large for the C ABI's types. The C ABI does not expose the library's limits,
    so each family registers a probe of each range beside it (lkjit._lib._PROBES: the C ABI called directly,
    past Python's checks), and this runs them in and around both ends of every range of every family in
    lkjit._lib.FAMILIES: a value in the range must pass the library's checks, one outside it must be refused
    naming the value, and where the library states the range, the same range; a value the C type cannot hold
    is not probed (that bound is the type's own: the library sets none below it). The same for describe's
    oldest arch (_OLDEST_ARCH). A limit changed on either side fails here, and so does a family's range
    without a probe (register_ranges refuses it)."""
    _library_or_skip()
    import ctypes
    import importlib

    from lkjit import _lib
    lib = _lib.load()
    for family in _lib.FAMILIES:  # each family's C ABI module registers its ranges and probes when imported
        importlib.import_module(f"lkjit._{family}_abi")
    assert {w.split("_")[0] for w in _lib._RANGES} == set(_lib.FAMILIES), sorted(_lib._RANGES)
    assert set(_lib._PROBES) == {(w, n) for w, names in _lib._RANGES.items() for n in names}, "a range is not probed"
    for (where, name), (probe, bits) in sorted(_lib._PROBES.items(), key=lambda kv: kv[0]):
        r = _lib._RANGES[where][name]
        lo, hi = r[0], r[-1]
        values = range(lo - 1, hi + 2) if hi - lo < 100 else (lo - 1, lo, lo + 1, hi - 1, hi, hi + 1)
        for v in values:
            if not -(1 << bits) <= v < 1 << bits:
                continue
            rc, msg = probe(**{name: v})
            named = re.search(rf"(?<![\w*]){name}={v}(?!\d)", msg)
            if v in r:  # up to the C type's own bound, refusals for other reasons (the grid limit) are fine
                assert rc == 0 or (hi == (1 << bits) - 1 and not named), (where, name, v, msg)
                continue
            assert rc == 2 and named, (where, name, v, msg)
            stated = re.search(rf"\b{name}={v} is out of range; supported: (.+?)(?:; \w+=|$)", msg)
            if stated and not stated.group(1).startswith(">="):
                assert stated.group(1) == _lib.supported(where, name), (where, name, msg)
            if v == hi + 1:
                assert _lib._bound_text(hi) in msg, (where, name, msg)
    # "(H*W too)": the transpose's bound holds for the product.
    probe = _lib._PROBES[("wtconv_transpose", "W")][0]
    rc, msg = probe(H=2, W=(_lib._RANGES["wtconv_transpose"]["W"][-1] + 1) // 2)
    assert rc == 2 and "H=2," in msg, msg
    # describe's arch: Python refuses those below _OLDEST_ARCH as too old; the library plans for it, none older.
    h = ctypes.c_void_p()
    assert lib.lkjit_wtconv_create(1, 1, 0, 0, 1, 1, 0, ctypes.byref(h)) == 0
    try:
        text = ctypes.c_char_p()
        for arch in range(1, _lib._OLDEST_ARCH + 1):
            rc = lib.lkjit_wtconv_describe(h, 1, 8, 8, 0, arch, ctypes.byref(text))
            assert rc == (0 if arch == _lib._OLDEST_ARCH else 2), (arch, lib.lkjit_last_error())
    finally:
        lib.lkjit_wtconv_destroy(h)


def test_a_range_without_a_probe_is_refused():
    """register_ranges takes a family's ranges only with a probe of each (and no probe without a range)."""
    from lkjit import _lib
    with pytest.raises(ValueError, match=r"without a probe: \['H'\]; without a range: \[\]"):
        _lib.register_ranges("newfamily", {"C": range(1, 9), "H": range(1, 9)}, None, {"C": (None, 31)})
    with pytest.raises(ValueError, match=r"without a probe: \[\]; without a range: \['W'\]"):
        _lib.register_ranges("newfamily", {"C": range(1, 9)}, None, {"C": (None, 31), "W": (None, 31)})
    assert "newfamily" not in _lib._RANGES


def test_range_messages():
    """How Python states the library's ranges (the library's words; WTConv2d's names via range_errors)."""
    from lkjit import _lib
    assert [_lib.supported("wtconv", n) for n in ("C", "k", "L", "stride", "device", "B", "H")] == [
        "[1, 2^24]", "odd k in [1, 31]", "L in [0, 8]", "[1, 64]", "[0, 2^31-1]", "[1, 2^31-1]", "[1, 2^30]"]
    assert _lib.supported("wtconv_transpose", "H") == "[1, 2^31-65] (H*W too)"
    assert _lib.supported("wtconv_transpose", "B") == "[1, 2^63-1]"
    assert _lib.range_errors("wtconv", [("in_channels", "C", 8), ("kernel_size", "k", 4), ("wt_levels", "L", 9),
                                        ("stride", "stride", 0), ("in_channels", "C", 2 ** 24 + 1)]) == [
        "kernel_size=4 is out of range; supported: odd kernel_size in [1, 31]",
        "wt_levels=9 is out of range; supported: wt_levels in [0, 8]",
        "stride=0 is out of range; supported: [1, 64]",
        "in_channels=16777217 is out of range; supported: [1, 2^24]"]
    assert _lib.range_errors("wtconv", [("kernel_size", "k", 31), ("wt_levels", "L", 0), ("stride", "stride", 64)]) \
        == []


@pytest.mark.parametrize("bad", [96.5, 96.0, "96", True, None, b"96"], ids=repr)
def test_sizes_must_be_integers(bad):
    """Sizes are taken by operator.index: a float, str, bool or None is a TypeError naming the argument
    and the value, on every entry point, before anything reaches the C ABI."""
    _library_or_skip()
    want = re.escape(f"must be an int, got {bad!r} ({type(bad).__name__})")
    for name, make in [("C", lambda: lkjit.WTConvLayer(bad, 5, 2)), ("k", lambda: lkjit.WTConvLayer(8, bad)),
                       ("L", lambda: lkjit.WTConvLayer(8, 5, bad)),
                       ("stride", lambda: lkjit.WTConvLayer(8, stride=bad)),
                       ("device", lambda: lkjit.WTConvLayer(8, device=bad))]:
        with pytest.raises(TypeError, match=rf"wtconv: {name} {want}"):
            make()
    layer = lkjit.WTConvLayer(8, 5, 2)
    for name, call in [("B", lambda: layer.describe(bad, 56, 56, arch=90)),
                       ("H", lambda: layer.describe(1, bad, 56, arch=90)),
                       ("W", lambda: layer.forward(1, 2, 1, 56, bad)), ("B", lambda: layer.prepare(bad, 8, 8)),
                       ("H", lambda: layer.runs_lane(1, bad, 8)),
                       ("W", lambda: layer.backward(1, 1, 1, 1, 1, 1, [1, 1], [1, 1], 1, 8, bad)),
                       ("x_strides[1]", lambda: layer.forward(1, 2, 1, 8, 8, x_strides=(512, bad, 8, 1)))]:
        with pytest.raises(TypeError, match=re.escape(name) + " " + want):
            call()
    from lkjit import _lib
    with pytest.raises(TypeError, match=rf"wtconv_transpose: H {want}"):
        _wtconv_abi.transpose(1, (48, 16, 4, 1), 2, (48, 1, 12, 3), "f32", 1, 3, bad, 4)


_LEVELS = dict(grad_level_w=[1, 1], grad_level_s=[1, 1])
_GRADS = dict(grad_base_w=1, grad_base_b=1, grad_base_s=1, **_LEVELS)


@pytest.mark.parametrize("bad", [1.5, "1", b"1", True, object()], ids=repr)
def test_pointers_and_streams_must_be_ints(bad):
    """ctypes refuses a float or a str for a void* with an ArgumentError that gives only the argument's
    position: every pointer and stream of the public entry points is checked first, and a TypeError names
    the argument, the value and what is accepted (bool is refused too: True is no address)."""
    _library_or_skip()
    from lkjit import _lib
    layer = lkjit.WTConvLayer(4, L=2)
    got = re.escape(f"; got {bad!r} ({type(bad).__name__})")
    ptr = r" must be a device pointer as an int \(e.g. tensor.data_ptr\(\)\), or 0 or None for null" + got
    stream = r"stream must be a CUDA stream handle \(cudaStream_t\) as an int, .* or 0 or None for the legacy " \
             r"default stream" + got
    nchw, nhwc = (48, 16, 4, 1), (48, 1, 12, 3)
    cases = [("x" + ptr, lambda: layer.forward(bad, 1, 1, 8, 8)), ("out" + ptr, lambda: layer.forward(1, bad, 1, 8, 8)),
             (stream, lambda: layer.forward(1, 1, 1, 8, 8, stream=bad)),
             ("base_w" + ptr, lambda: layer.set_weights(bad, 1, 1, [1, 1], [1, 1])),
             ("base_b" + ptr, lambda: layer.set_weights(1, bad, 1, [1, 1], [1, 1])),
             ("base_s" + ptr, lambda: layer.set_weights(1, 1, bad, [1, 1], [1, 1])),
             (r"level_w\[1\]" + ptr, lambda: layer.set_weights(1, 1, 1, [1, bad], [1, 1])),
             (r"level_s\[0\]" + ptr, lambda: layer.set_weights(1, 1, 1, [1, 1], (bad, 1))),
             (stream, lambda: layer.set_weights(1, 1, 1, [1, 1], [1, 1], stream=bad)),
             (stream, lambda: layer.backward(1, 1, 1, B=1, H=8, W=8, stream=bad, **_GRADS))]
    for name in ("x", "dout", "dx"):
        args = dict(dict(x=1, dout=1, dx=1), **{name: bad})
        cases.append((name + ptr, lambda args=args: layer.backward(**args, B=1, H=8, W=8, **_GRADS)))
    for name in ("grad_base_w", "grad_base_b", "grad_base_s"):
        grads = dict(_GRADS, **{name: bad})
        cases.append((name + ptr, lambda grads=grads: layer.backward(1, 1, 1, B=1, H=8, W=8, **grads)))
    cases += [(r"grad_level_s\[1\]" + ptr,
               lambda: layer.backward(1, 1, 1, B=1, H=8, W=8, **dict(_GRADS, grad_level_s=[1, bad]))),
              ("wtconv_transpose: src" + ptr, lambda: _wtconv_abi.transpose(bad, nchw, 2, nhwc, "f32", 1, 3, 4, 4)),
              ("wtconv_transpose: dst" + ptr, lambda: _wtconv_abi.transpose(1, nchw, bad, nhwc, "f32", 1, 3, 4, 4)),
              ("wtconv_transpose: " + stream, lambda: _wtconv_abi.transpose(1, nchw, 2, nhwc, "f32", 1, 3, 4, 4, stream=bad))]
    for want, call in cases:
        with pytest.raises(TypeError, match=want):
            call()


@pytest.mark.parametrize("bad", [-1, -2 ** 63, 2 ** 64, 2 ** 64 + 4096, 2 ** 100], ids=repr)
def test_pointers_and_streams_out_of_range_are_named(bad):
    """ctypes takes a void* modulo 2^64 (2^64 + 4096 would reach the library as 4096, -1 as 2^64-1): a pointer
    or stream outside [0, 2^64-1] is a SpecError (a ValueError) naming the argument, before the C ABI."""
    _library_or_skip()
    from lkjit import _lib
    layer = lkjit.WTConvLayer(4, L=2)
    ptr = re.escape(f"={bad} is out of range; supported: a device address in [0, 2^64-1] (0: null)")
    stream = re.escape(f"stream={bad} is out of range; supported: a cudaStream_t in [0, 2^64-1] (0: the legacy "
                       f"default stream)")
    nchw, nhwc = (48, 16, 4, 1), (48, 1, 12, 3)
    cases = [("x" + ptr, lambda: layer.forward(bad, 1, 1, 8, 8)), ("out" + ptr, lambda: layer.forward(1, bad, 1, 8, 8)),
             (stream, lambda: layer.forward(1, 2, 1, 8, 8, stream=bad)),
             ("base_b" + ptr, lambda: layer.set_weights(1, bad, 1, [1, 1], [1, 1])),
             (r"level_s\[1\]" + ptr, lambda: layer.set_weights(1, 1, 1, [1, 1], [1, bad])),
             (stream, lambda: layer.set_weights(1, 1, 1, [1, 1], [1, 1], stream=bad)),
             ("dx" + ptr, lambda: layer.backward(1, 1, bad, B=1, H=8, W=8, **_GRADS)),
             ("grad_base_s" + ptr, lambda: layer.backward(1, 1, 1, B=1, H=8, W=8, **dict(_GRADS, grad_base_s=bad))),
             (r"grad_level_w\[0\]" + ptr,
              lambda: layer.backward(1, 1, 1, B=1, H=8, W=8, **dict(_GRADS, grad_level_w=[bad, 1]))),
             (stream, lambda: layer.backward(1, 1, 1, B=1, H=8, W=8, stream=bad, **_GRADS)),
             ("wtconv_transpose: src" + ptr, lambda: _wtconv_abi.transpose(bad, nchw, 1 << 20, nhwc, "f32", 1, 3, 4, 4)),
             ("wtconv_transpose: dst" + ptr, lambda: _wtconv_abi.transpose(1, nchw, bad, nhwc, "f32", 1, 3, 4, 4)),
             ("wtconv_transpose: " + stream,
              lambda: _wtconv_abi.transpose(1, nchw, 1 << 20, nhwc, "f32", 1, 3, 4, 4, stream=bad))]
    for want, call in cases:
        with pytest.raises(lkjit.SpecError, match=want) as e:
            call()
        assert isinstance(e.value, ValueError) and e.value.code == 2


def test_pointer_range_ends_reach_the_library():
    """0 and 2^64-1 are pointers the C ABI receives as given: 0 is null (refused by name), 2^64-1 an address."""
    _library_or_skip()
    layer = lkjit.WTConvLayer(4, L=2)
    with pytest.raises(lkjit.SpecError, match="x and out must be non-null"):
        layer.forward(0, 2 ** 64 - 1, 1, 8, 8, stream=2 ** 64 - 1)
    with pytest.raises(lkjit.SpecError, match="x, dout and dx must be non-null"):
        layer.backward(2 ** 64 - 1, 0, 1, B=1, H=8, W=8, stream=2 ** 64 - 1, **_GRADS)


@pytest.mark.parametrize("bad", [5, 2.0, "abcd", b"abcd", object()], ids=repr)
def test_strides_must_be_sequences(bad):
    """A value where 4 strides belong that is no sequence (an int, a str) is a TypeError naming the argument
    and the value, not len()'s unnamed one."""
    _library_or_skip()
    from lkjit import _lib
    layer = lkjit.WTConvLayer(4, L=2)
    want = re.escape(f" must be 4 element strides in (B, C, H, W) order (a tuple or list of ints, or "
                     f"lkjit._lib.Strides), or None for NCHW contiguous; got {bad!r} ({type(bad).__name__})")
    for name, call in [("x_strides", lambda: layer.forward(1, 1, 1, 8, 8, x_strides=bad)),
                       ("out_strides", lambda: layer.forward(1, 1, 1, 8, 8, out_strides=bad)),
                       ("dout_strides", lambda: layer.backward(1, 1, 1, B=1, H=8, W=8, dout_strides=bad, **_GRADS)),
                       ("dx_strides", lambda: layer.backward(1, 1, 1, B=1, H=8, W=8, dx_strides=bad, **_GRADS)),
                       ("wtconv_transpose: src_strides",
                        lambda: _wtconv_abi.transpose(1, bad, 2, (48, 1, 12, 3), "f32", 1, 3, 4, 4))]:
        with pytest.raises(TypeError, match=re.escape(name) + want):
            call()


@pytest.mark.parametrize("bad", [5, None, "ab", {1: 1}], ids=repr)
def test_level_pointer_lists_must_be_lists(bad):
    _library_or_skip()
    layer = lkjit.WTConvLayer(4, L=2)
    want = re.escape(f" must be a list or tuple of device pointers (ints), one per level; got {bad!r} "
                     f"({type(bad).__name__})")
    with pytest.raises(TypeError, match="wtconv: level_w" + want):
        layer.set_weights(1, 1, 1, bad, [1, 1])
    with pytest.raises(TypeError, match="wtconv: grad_level_s" + want):
        layer.backward(1, 1, 1, B=1, H=8, W=8, **dict(_GRADS, grad_level_s=bad))


def test_null_and_default_spellings_still_work():
    """None is a null pointer and the default stream, as 0 is; int-like pointers pass (numpy integers)."""
    _library_or_skip()
    layer = lkjit.WTConvLayer(4, L=2)
    with pytest.raises(lkjit.SpecError, match="x and out must be non-null"):
        layer.forward(None, _Index(1), 1, 8, 8, stream=None)
    with pytest.raises(lkjit.SpecError, match="bias=true but base_b is null"):
        layer.set_weights(1, None, 1, [1, 1], [1, 1], stream=None)
    with pytest.raises(lkjit.SpecError, match=r"level_w\[1\] and level_s\[1\] must be non-null"):
        layer.set_weights(1, 1, 1, (1, None), (1, 1))
    with pytest.raises(lkjit.SpecError, match="x, dout and dx must be non-null"):
        layer.backward(_Index(1), 1, None, B=1, H=8, W=8, stream=_Index(0), **_GRADS)


def test_torch_layer_takes_the_unchecked_entry_points():
    """lkjit.wtconv (whose own tests need torch and a GPU) calls lkjit._lib and lkjit._wtconv_abi from its
    per-call path (the ctypes kernels): every _lib / _abi name it uses exists, every call on a layer names a
    WTConvLayer method that takes its arguments, and the per-call work goes through the unchecked twins
    (_set_weights, _forward, _backward, _transpose), not the public methods whose pointer checks would cost every
    call. Read from the source; no torch needed."""
    import ast
    import ctypes
    import inspect

    from lkjit import _lib
    from lkjit import _wtconv_abi as _abi
    mods = {"_lib": _lib, "_abi": _abi}
    src = open(os.path.join(PKG_SRC, "lkjit", "wtconv.py"), encoding="utf-8").read()
    called = set()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in mods:
            assert hasattr(mods[node.value.id], node.attr), \
                f"lkjit.wtconv uses {node.value.id}.{node.attr}, which it lacks"
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner, name = node.func.value, node.func.attr
        if isinstance(owner, ast.Name) and owner.id in mods:
            fn, lead, kind = getattr(mods[owner.id], name), [], owner.id
        elif (isinstance(owner, ast.Attribute) and owner.attr == "layer") or \
                (isinstance(owner, ast.Name) and owner.id == "layer"):
            assert hasattr(_abi.WTConvLayer, name), f"lkjit.wtconv calls layer.{name}, which WTConvLayer lacks"
            fn, lead, kind = getattr(_abi.WTConvLayer, name), [None], "layer"  # self
        else:
            continue
        called.add((kind, name))
        if isinstance(fn, type) and issubclass(fn, ctypes.Array):  # _lib.Strides(...): no Python signature
            continue
        sig = inspect.signature(fn)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            fixed = [a for a in node.args if not isinstance(a, ast.Starred)]
            assert len(lead) + len(fixed) <= len(sig.parameters), (name, ast.unparse(node))
        else:
            sig.bind(*lead, *[None] * len(node.args), **{k.arg: None for k in node.keywords})
    assert {("layer", "_forward"), ("layer", "_backward"), ("layer", "_set_weights"), ("_abi", "_transpose")} <= called
    checked = {("layer", "forward"), ("layer", "backward"), ("layer", "set_weights"), ("_abi", "transpose")}
    assert not called & checked, sorted(called & checked)


def test_int_like_sizes_are_accepted():
    """Any object with __index__ (numpy integers, ...) counts as an int."""
    _library_or_skip()
    layer = lkjit.WTConvLayer(_Index(96), _Index(5), _Index(5), dtype=_Index(2), stride=_Index(1), device=_Index(0))
    assert (layer.C, layer.k, layer.L, layer.dtype) == (96, 5, 5, 2) and type(layer.C) is int
    assert layer.describe(_Index(64), _Index(56), _Index(56), arch=_Index(90)) == layer.describe(64, 56, 56, arch=90)
    np = pytest.importorskip("numpy")
    layer = lkjit.WTConvLayer(np.int64(96), np.int32(5), np.uint8(5), dtype="bf16")
    assert layer.describe(np.int64(64), 56, np.int16(56), arch=90) == layer.describe(64, 56, 56, arch=90)


def test_torch_import_without_torch_says_how_to_install(tmp_path):
    """Without PyTorch, `import lkjit.torch` says what it needs and how to get it (the package's torch
    extra), chained from the original error; `import lkjit` keeps working."""
    code = ("import sys\nsys.modules['torch'] = None  # as if torch were not installed\nimport lkjit\n"
            "try:\n    import lkjit.torch\nexcept ImportError as e:\n"
            "    assert isinstance(e, ModuleNotFoundError) and e.name == 'torch', (type(e), e.name)\n"
            "    assert isinstance(e.__cause__, ModuleNotFoundError), repr(e.__cause__)\n    print(e)\n"
            "else:\n    raise SystemExit('no error')\n")
    env = dict(os.environ, PYTHONPATH=PKG_SRC)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "lkjit.torch needs PyTorch" in r.stdout and "pip install torch" in r.stdout, r.stdout
    assert "./python[torch]" in r.stdout, r.stdout
    text = open(os.path.join(PKG_SRC, "pyproject.toml"), encoding="utf-8").read()
    assert re.search(r"^torch = \[", text, re.M), "the message names a torch extra that pyproject.toml lacks"


def test_describe_arch_forms_and_messages():
    """describe's arch: 90, 'sm_90', 'sm90', '90', '9.0' alike; too old and malformed values are named with
    what is supported (the CLI's words for the old ones)."""
    _library_or_skip()
    layer = lkjit.WTConvLayer(96, k=5, L=3, dtype="f16")
    want = layer.describe(8, 56, 56, arch=90)
    assert "sm90" in want
    for form in ("sm_90", "sm90", "90", "9.0", "SM_90", " sm_90 "):
        assert layer.describe(8, 56, 56, arch=form) == want, form
    assert layer.describe(8, 56, 56, arch="sm_100") == layer.describe(8, 56, 56, arch=100)

    def outcome(a):  # arch 0 plans for the layer's GPU: a result with one, the driver's error without
        try:
            return layer.describe(8, 56, 56, arch=a)
        except lkjit.LkjitError as e:
            return type(e), str(e)
    assert outcome("0") == outcome(0)
    assert layer.describe(8, 56, 56, arch="10.0") == layer.describe(8, 56, 56, arch=100)
    for old in (52, "sm_52", "5.2"):
        with pytest.raises(lkjit.SpecError, match=r"arch sm_52 is too old; supported: sm_80 and newer"):
            layer.describe(8, 56, 56, arch=old)
    for bad in ("sm_90a", "hopper", "", "sm_", "9.0.1"):
        with pytest.raises(lkjit.SpecError, match=re.escape(f"arch={bad!r} is not an arch; accepted: 0 (this")
                           + r".*'sm_90', 'sm90'"):
            layer.describe(8, 56, 56, arch=bad)
    for bad in (-1, 2 ** 40):
        with pytest.raises(lkjit.SpecError, match=rf"arch={bad} is out of range; supported: 0 "):
            layer.describe(8, 56, 56, arch=bad)
    with pytest.raises(TypeError, match=r"arch must be an int or a string such as 'sm_90', got 9.0 \(float\)"):
        layer.describe(8, 56, 56, arch=9.0)
    with pytest.raises(lkjit.SpecError, match="sm_85 has no limits table; supported: sm_80"):
        layer.describe(8, 56, 56, arch="sm_85")  # of the form, no table: the library lists the ones it has


@pytest.mark.parametrize("bad", ["no", "", 0, 1, None, 1.0, [True]], ids=repr)
def test_flags_must_be_bools(bad):
    """bias and backward are bools: anything else (bias='no' is truthy, so it would mean True) is a TypeError
    naming the argument and the value, before the C ABI sees it."""
    _library_or_skip()
    want = re.escape(f"must be a bool (True or False), got {bad!r} ({type(bad).__name__})")
    with pytest.raises(TypeError, match=r"wtconv: bias " + want):
        lkjit.WTConvLayer(8, bias=bad)
    layer = lkjit.WTConvLayer(8, 5, 2)
    for call in (lambda: layer.describe(1, 8, 8, backward=bad, arch=90), lambda: layer.prepare(1, 8, 8, backward=bad),
                 lambda: layer.runs_lane(1, 8, 8, backward=bad)):
        with pytest.raises(TypeError, match=r"wtconv: backward " + want):
            call()


def test_flags_take_bools():
    _library_or_skip()
    assert lkjit.WTConvLayer(8, bias=False).bias is False and lkjit.WTConvLayer(8, bias=True).bias is True
    layer = lkjit.WTConvLayer(8, 5, 2)
    assert layer.describe(1, 8, 8, backward=True, arch=90) != layer.describe(1, 8, 8, backward=False, arch=90)
    np = pytest.importorskip("numpy")
    assert lkjit.WTConvLayer(8, bias=np.bool_(False)).bias is False
    assert layer.describe(1, 8, 8, backward=np.bool_(True), arch=90) == layer.describe(1, 8, 8, backward=True, arch=90)


def test_dtype_message_lists_the_accepted_spellings():
    _library_or_skip()
    with pytest.raises(lkjit.SpecError, match="dtype='f64' is not supported") as e:
        lkjit.WTConvLayer(8, dtype="f64")
    msg = str(e.value)
    from lkjit import _lib
    for spelling in _lib._DTYPE_ALIASES:  # every spelling the message lists is accepted, and the reverse
        assert repr(spelling) in msg, (spelling, msg)
        assert lkjit.WTConvLayer(8, dtype=spelling).dtype == _lib.DTYPE_CODES[_lib._DTYPE_ALIASES[spelling]]
    listed = re.findall(r"'([a-z0-9]+)'", msg.split("supported:", 1)[1])
    assert set(listed) == set(_lib._DTYPE_ALIASES), listed
    for code in (0, 1, 2):
        assert lkjit.WTConvLayer(8, dtype=code).dtype == code
    for bad in (3, -1, True, "float64", 1.0):
        with pytest.raises(lkjit.SpecError, match=re.escape(f"dtype={bad!r} is not supported; supported: 'f32'")):
            lkjit.WTConvLayer(8, dtype=bad)


def test_state_dict_key_mapping():
    keys = ["m.base_weight", "m.base_bias", "m.base_scale", "m.wt_weights.0", "m.wt_scales.0", "m.wt_weights.1",
            "m.wt_scales.1", "m.wt_filter", "m.iwt_filter", "other.base_weight"]
    renames, dropped = _state_dict.remap_keys(keys, "m.")
    assert renames == {"m.base_weight": "m.base_conv.weight", "m.base_bias": "m.base_conv.bias",
                       "m.base_scale": "m.base_scale.weight", "m.wt_weights.0": "m.wavelet_convs.0.weight",
                       "m.wt_scales.0": "m.wavelet_scale.0.weight", "m.wt_weights.1": "m.wavelet_convs.1.weight",
                       "m.wt_scales.1": "m.wavelet_scale.1.weight"}
    assert dropped == ["m.wt_filter", "m.iwt_filter"]
    # Reference keys are left alone; a tensor given under both names is an error.
    assert _state_dict.remap_keys(_state_dict.own_keys(2, True), "") == ({}, [])
    with pytest.raises(ValueError, match="base_weight.*base_conv.weight"):
        _state_dict.remap_keys(["base_weight", "base_conv.weight"])


# ---- the PyTorch module without a GPU ----

def test_torch_module_on_cpu():
    torch = pytest.importorskip("torch")
    from lkjit.torch import WTConv2d

    m = WTConv2d(8, 8, kernel_size=5, wt_levels=3)
    assert list(m.state_dict()) == _state_dict.own_keys(3, True)
    shapes = {k: tuple(v.shape) for k, v in m.state_dict().items()}
    assert shapes["base_conv.weight"] == (8, 1, 5, 5) and shapes["base_scale.weight"] == (1, 8, 1, 1)
    assert shapes["wavelet_convs.2.weight"] == (32, 1, 5, 5) and shapes["wavelet_scale.2.weight"] == (1, 32, 1, 1)
    assert torch.all(m.base_scale.weight == 1.0) and torch.all(m.wavelet_scale[0].weight == 0.1)
    assert m.base_conv.bias.abs().max() <= 1 / 5 and m.base_conv.weight.abs().max() <= 1 / 5
    assert list(WTConv2d(8, 8, bias=False).state_dict()) == _state_dict.own_keys(1, False)
    with pytest.raises(ValueError, match="C=3"):
        m(torch.randn(1, 3, 16, 16))
    with pytest.raises(ValueError, match="'meta'; supported: CUDA tensors .* and CPU tensors"):
        m(torch.randn(1, 8, 16, 16, device="meta"))
    with pytest.raises(TypeError, match="float64"):
        m(torch.randn(1, 8, 16, 16, dtype=torch.float64))


def test_torch_layout_helpers():
    """Which tensors the ops take in place, and the output strides both the ops and their fake
    implementations produce (torch.compile requires them to agree); meta tensors stand for fake ones."""
    torch = pytest.importorskip("torch")
    from lkjit import _torch_ops as ops
    from lkjit import wtconv

    class _Helpers:  # the names this test used to find in lkjit.torch, where they now live
        _dense = staticmethod(lambda t: ops.dense(t, "auto"))
        _strides = staticmethod(ops.c_strides)
        _new_out = staticmethod(lambda t, s, mode="auto": wtconv._new_out(t, s, mode))
        _wtconv_fwd_fake = staticmethod(wtconv._wtconv_fwd_fake)
        _wtconv_bwd_fake = staticmethod(wtconv._wtconv_bwd_fake)
    lt = _Helpers

    x = torch.empty(2, 4, 9, 7)
    cl = x.to(memory_format=torch.channels_last)
    tr = x.transpose(2, 3)  # dense, W-major planes
    assert lt._dense(x) and lt._dense(cl) and lt._dense(tr)
    assert not lt._dense(x[..., ::2]) and not lt._dense(torch.empty(2, 4, 9, 1).expand(2, 4, 9, 7))
    assert lt._strides(x) is None  # a contiguous tensor needs none; the others come as int64_t[4] arrays
    assert tuple(lt._strides(cl)) == (252, 1, 28, 4) and tuple(lt._strides(tr)) == (252, 63, 1, 7)
    out = lt._new_out(cl, 2)
    assert out.shape == (2, 4, 5, 4) and out.is_contiguous(memory_format=torch.channels_last)
    assert not out.is_contiguous()
    assert lt._new_out(x, 2).is_contiguous() and lt._new_out(tr, 1).is_contiguous()
    assert lt._new_out(x[..., ::2], 1).is_contiguous()

    C, k, L = 4, 5, 2
    w = [torch.empty(C, 1, k, k, device="meta"), None, torch.empty(1, C, 1, 1, device="meta"),
         [torch.empty(4 * C, 1, k, k, device="meta")] * L, [torch.empty(1, 4 * C, 1, 1, device="meta")] * L]
    for xm, want_out, want_dx in [
            (torch.empty(2, C, 9, 7, device="meta"), (C * 5 * 4, 5 * 4, 4, 1), (C * 63, 63, 7, 1)),
            (torch.empty(2, C, 9, 7, device="meta").to(memory_format=torch.channels_last), (5 * 4 * C, 1, 4 * C, C),
             (63 * C, 1, 7 * C, C)),
            (torch.empty(2, C, 7, 9, device="meta").transpose(2, 3), (C * 5 * 4, 5 * 4, 4, 1), (C * 63, 63, 1, 9)),
            (torch.empty(2, C, 9, 14, device="meta")[..., ::2], (C * 5 * 4, 5 * 4, 4, 1), (C * 63, 63, 7, 1))]:
        out = lt._wtconv_fwd_fake(xm, *w, 1, 2)
        assert out.shape == (2, C, 5, 4) and out.stride() == want_out, (xm.stride(), out.stride())
        g = torch.empty(2, C, 5, 4, device="meta")
        dx = lt._wtconv_bwd_fake(g, xm, *w, 1, 2)[0]
        assert dx.shape == xm.shape and dx.stride() == want_dx, (xm.stride(), dx.stride())


def test_torch_module_argument_errors():
    torch = pytest.importorskip("torch")
    from lkjit.torch import WTConv2d

    with pytest.raises(ValueError, match="in_channels=8 and out_channels=16"):
        WTConv2d(8, 16)
    with pytest.raises(ValueError, match="wt_type='db2'"):
        WTConv2d(8, 8, wt_type="db2")
    with pytest.raises(ValueError, match="kernel_size=4"):
        WTConv2d(8, 8, kernel_size=4)
    with pytest.raises(ValueError, match="wt_levels=9"):
        WTConv2d(8, 8, wt_levels=9)
    with pytest.raises(ValueError, match="stride=0"):
        WTConv2d(8, 8, stride=0)
    for bad in (8.0, "8", True):
        with pytest.raises(TypeError, match=re.escape(f"in_channels must be an int, got {bad!r}")):
            WTConv2d(bad, 8)
    with pytest.raises(TypeError, match=r"kernel_size must be an int, got 5.5 \(float\)"):
        WTConv2d(8, 8, kernel_size=5.5)
    with pytest.raises(TypeError, match=r"wt_levels must be an int, got '2' \(str\)"):
        WTConv2d(8, 8, wt_levels="2")
    for name in ("bias", "packed_params"):
        for bad in ("no", 0, 1, None):
            with pytest.raises(TypeError, match=re.escape(f"WTConv2d: {name} must be a bool (True or False), "
                                                          f"got {bad!r} ({type(bad).__name__})")):
                WTConv2d(8, 8, **{name: bad})
    assert WTConv2d(8, 8, bias=False).base_conv.bias is None
    assert WTConv2d(8, 8, bias=False, packed_params=True).base_conv.bias is None
    flags = WTConv2d(8, 8)
    with pytest.raises(TypeError, match=r"WTConv2d: always_refold must be a bool \(True or False\), got 'no'"):
        flags.always_refold = "no"
    flags.always_refold = True
    assert flags.always_refold is True
    m = WTConv2d(_Index(8), _Index(8), kernel_size=_Index(3), stride=_Index(2), wt_levels=_Index(2))
    assert (m.in_channels, m.kernel_size, m.stride, m.wt_levels) == (8, 3, 2, 2) and type(m.stride) is int
    plan = m.lkjit_plan(_Index(2), 32, 32, arch="sm_90")
    assert "_k3_L2_" in plan and "sm90" in plan and "shape=2x8x32x32/s2" in plan, plan
    with pytest.raises(lkjit.SpecError, match="dtype=torch.float64 is not supported"):
        m.lkjit_plan(2, 32, 32, dtype=torch.float64, arch=90)


def test_torch_state_dict_loading():
    torch = pytest.importorskip("torch")
    from lkjit.torch import WTConv2d

    src = WTConv2d(4, 4, 3, wt_levels=2)
    sd = src.state_dict()
    haar = torch.tensor([[1, 1], [1, 1]], dtype=torch.float32).repeat(16, 1, 1, 1) * 0.5
    ref_sd = dict(sd, wt_filter=haar, iwt_filter=-haar, stride_filter=torch.ones(4, 1, 1, 1))
    dst = WTConv2d(4, 4, 3, wt_levels=2)
    dst.load_state_dict(ref_sd)  # strict
    for k, v in sd.items():
        assert torch.equal(dst.state_dict()[k], v), k
    fused = {"base_weight": sd["base_conv.weight"], "base_bias": sd["base_conv.bias"],
             "base_scale": sd["base_scale.weight"].reshape(4)}
    for i in range(2):
        fused[f"wt_weights.{i}"] = sd[f"wavelet_convs.{i}.weight"]
        fused[f"wt_scales.{i}"] = sd[f"wavelet_scale.{i}.weight"]
    dst = WTConv2d(4, 4, 3, wt_levels=2)
    dst.load_state_dict(fused)
    for k, v in sd.items():
        assert torch.equal(dst.state_dict()[k], v), k
    # Nested, with a prefix.
    outer = torch.nn.Sequential(WTConv2d(4, 4, 3, wt_levels=2))
    outer.load_state_dict({f"0.{k}": v for k, v in fused.items()})
    assert torch.equal(outer[0].wavelet_convs[1].weight, sd["wavelet_convs.1.weight"])
    with pytest.raises(RuntimeError, match="wt_filter.*db1"):
        dst.load_state_dict(dict(sd, wt_filter=torch.randn(16, 1, 4, 4)))


def test_torch_packed_params_on_cpu():
    """packed_params=True: one `packed` Parameter, the reference module's attribute names as views of it,
    and the same state_dict keys, values and loading as the default module."""
    torch = pytest.importorskip("torch")
    import copy
    import io

    from lkjit.torch import WTConv2d

    torch.manual_seed(3)
    sep = WTConv2d(4, 4, 3, wt_levels=2)
    with torch.no_grad():
        for p in sep.parameters():
            p.uniform_(-1, 1)
    pk = WTConv2d(4, 4, 3, wt_levels=2, packed_params=True)
    assert [n for n, _ in pk.named_parameters()] == ["packed"]
    assert pk.packed.shape == (sum(p.numel() for p in sep.parameters()),)
    assert torch.all(pk.base_scale.weight == 1.0) and torch.all(pk.wavelet_scale[1].weight == 0.1)
    assert "packed_params=True" in repr(pk)
    pk.load_state_dict(sep.state_dict())  # strict: every reference key is taken
    assert list(pk.state_dict()) == list(sep.state_dict()) == _state_dict.own_keys(2, True)
    for k, v in sep.state_dict().items():
        assert torch.equal(pk.state_dict()[k], v), k
    assert torch.equal(pk.wavelet_convs[1].weight, sep.wavelet_convs[1].weight)
    assert torch.equal(pk.base_conv.bias, sep.base_conv.bias)
    back = WTConv2d(4, 4, 3, wt_levels=2)
    back.load_state_dict(pk.state_dict())
    for k, v in sep.state_dict().items():
        assert torch.equal(back.state_dict()[k], v), k
    fused = {"base_weight": sep.base_conv.weight, "base_bias": sep.base_conv.bias,
             "base_scale": sep.base_scale.weight.reshape(4)}
    for i in range(2):
        fused[f"wt_weights.{i}"] = sep.wavelet_convs[i].weight
        fused[f"wt_scales.{i}"] = sep.wavelet_scale[i].weight
    other = WTConv2d(4, 4, 3, wt_levels=2, packed_params=True)
    other.load_state_dict({k: v.detach() for k, v in fused.items()})
    assert torch.equal(other.packed, pk.packed)
    # The views write through and carry gradients into packed.
    with torch.no_grad():
        other.base_scale.weight.fill_(2.0)
    assert torch.all(other.state_dict()["base_scale.weight"] == 2.0)
    other.wavelet_convs[0].weight.sum().backward()
    grad = other.packed.grad
    assert grad.sum().item() == other.wavelet_convs[0].weight.numel() and grad.abs().max().item() == 1
    # Missing and misshapen tensors are reported by name.
    sd = sep.state_dict()
    del sd["wavelet_scale.1.weight"]
    with pytest.raises(RuntimeError, match="Missing key.*wavelet_scale.1.weight"):
        WTConv2d(4, 4, 3, wt_levels=2, packed_params=True).load_state_dict(sd)
    sd = dict(sep.state_dict(), **{"base_conv.weight": torch.zeros(4, 1, 5, 5)})
    with pytest.raises(RuntimeError, match="size mismatch for base_conv.weight.*\\(4, 1, 3, 3\\)"):
        WTConv2d(4, 4, 3, wt_levels=2, packed_params=True).load_state_dict(sd)
    # Saved tensors own their storage (checkpoint writers such as safetensors refuse shared ones).
    ptrs = [v.untyped_storage().data_ptr() for v in pk.state_dict().values()]
    assert len(set(ptrs)) == len(ptrs) and pk.packed.untyped_storage().data_ptr() not in ptrs
    # Built on the meta device, loaded with assign=True: the values arrive (not a meta tensor).
    with torch.device("meta"):
        meta = WTConv2d(4, 4, 3, wt_levels=2, packed_params=True)
    meta.load_state_dict(sep.state_dict(), assign=True)
    assert not meta.packed.is_meta and meta.packed.dtype == torch.float32
    assert torch.equal(meta.packed, pk.packed)
    # Copies own their parameter, and their views point into it.
    for dup in (copy.deepcopy(pk), _reload(torch, io, pk)):
        assert dup.packed.data_ptr() != pk.packed.data_ptr() and torch.equal(dup.packed, pk.packed)
        with torch.no_grad():
            dup.base_conv.weight.zero_()
        assert torch.all(dup.state_dict()["base_conv.weight"] == 0)
        assert torch.equal(pk.base_conv.weight, sep.base_conv.weight)


def _reload(torch, io, module):
    buf = io.BytesIO()
    torch.save(module, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)
