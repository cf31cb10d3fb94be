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
from lkjit import _state_dict

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


def test_transpose_arguments_are_checked_before_the_gpu():
    """lkjit's layout transpose refuses bad arguments (SpecError naming the value) before any GPU call."""
    _library_or_skip()
    from lkjit import _lib
    nchw, nhwc = (48, 16, 4, 1), (48, 1, 12, 3)
    with pytest.raises(lkjit.SpecError, match="src and dst must be non-null"):
        _lib.transpose(0, nchw, 1, nhwc, "f32", 1, 3, 4, 4)
    with pytest.raises(lkjit.SpecError, match="W=0 is out of range"):
        _lib.transpose(1, nchw, 2, nhwc, "f32", 1, 3, 4, 0)
    with pytest.raises(lkjit.SpecError, match=r"dst strides \[48, 1, 3, 3\] overlap"):
        _lib.transpose(1, nchw, 2, (48, 1, 3, 3), "bf16", 1, 3, 4, 4)
    with pytest.raises(lkjit.SpecError, match="dst_strides is None"):
        _lib.transpose(1, nchw, 2, None, "f16", 1, 3, 4, 4)
    with pytest.raises(lkjit.SpecError, match="dtype='f8'"):
        _lib.transpose(1, nchw, 2, nhwc, "f8", 1, 3, 4, 4)
    with pytest.raises(lkjit.SpecError, match="src and dst overlap"):
        _lib.transpose(4096, nchw, 4096 + 64, nhwc, "f32", 1, 3, 4, 4)
    with pytest.raises(lkjit.SpecError, match=r"H\*W \(H=65536, W=65536\) must each be at most 2\^31-65"):
        _lib.transpose(1, (1 << 32, 1 << 32, 65536, 1), 1 << 40, (1 << 32, 1, 1 << 20, 16), "f32", 1, 1, 65536, 65536)


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
    with pytest.raises(ValueError, match="cpu"):
        m(torch.randn(1, 8, 16, 16))
    with pytest.raises(ValueError, match="C=3"):
        m(torch.randn(1, 3, 16, 16))


def test_torch_layout_helpers():
    """Which tensors the ops take in place, and the output strides both the ops and their fake
    implementations produce (torch.compile requires them to agree); meta tensors stand for fake ones."""
    torch = pytest.importorskip("torch")
    from lkjit import torch as lt

    x = torch.empty(2, 4, 9, 7)
    cl = x.to(memory_format=torch.channels_last)
    tr = x.transpose(2, 3)  # dense, W-major planes
    assert lt._dense(x) and lt._dense(cl) and lt._dense(tr)
    assert not lt._dense(x[..., ::2]) and not lt._dense(torch.empty(2, 4, 9, 1).expand(2, 4, 9, 7))
    assert lt._strides(x) is None and lt._strides(cl) == (252, 1, 28, 4) and lt._strides(tr) == (252, 63, 1, 7)
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
    pytest.importorskip("torch")
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
