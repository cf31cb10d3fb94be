"""CPU tests of the WBMM family's Python side (no GPU): WBMM2d's construction, parameters and state_dict (the
published module's names, its relative_position_index accepted), the CPU implementation against an independent
float64 reference in the windowed direct-conv form (odd sizes with padding, batch 1, tiny maps, both modes, bias,
layouts, every dtype), gradients against autograd of that reference, fuse_identity / fuse_bn / to_dense keeping
the output, the ops' schema, fake tensors and AOT dispatch (opcheck), fake shapes at WBMM-T sizes, and the C ABI's
refusals through ctypes, with the library's messages."""
import math
import re

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import lkjit  # noqa: E402


def _lib_or_skip():
    try:
        return lkjit.library_path()
    except lkjit.LibraryNotFoundError as e:
        pytest.skip(f"liblkjit.so not built: {e}")


@pytest.fixture(scope="module")
def lt():
    _lib_or_skip()
    import lkjit.torch as lt
    return lt


def conv_reference(x, weight, bias, wh, ww, dense=False, identity=True):
    """float64 WBMM in the windowed direct-conv form (docs/wbmm.md): each zero-padded window is its own image,
    cross-correlated with R_c as a (2wh-1) x (2ww-1) kernel at padding (wh-1, ww-1); dense M as explicit sums."""
    x, weight = x.double(), weight.double()
    B, C, H, W = x.shape
    nH, nW = math.ceil(H / wh), math.ceil(W / ww)
    xp = F.pad(x, (0, nW * ww - W, 0, nH * wh - H))
    win = xp.view(B, C, nH, wh, nW, ww).permute(0, 2, 4, 1, 3, 5).reshape(B * nH * nW, C, wh, ww)
    if dense:
        t = win.reshape(-1, C, wh * ww)
        y = torch.einsum("nci,cij->ncj", t, weight).reshape(win.shape)
    else:
        y = F.conv2d(win, weight.view(C, 1, 2 * wh - 1, 2 * ww - 1), padding=(wh - 1, ww - 1), groups=C)
    if identity:
        y = y + win
    out = y.view(B, nH, nW, C, wh, ww).permute(0, 3, 1, 4, 2, 5).reshape(B, C, nH * wh, nW * ww)[:, :, :H, :W]
    if bias is not None:
        out = out + bias.double().view(1, -1, 1, 1)
    return out


def _module(lt, C, window, bias=False, dense=False, seed=0):
    torch.manual_seed(seed)
    m = lt.WBMM2d(C, window, bias=bias, dense=dense)
    wh, ww = m.window_size
    with torch.no_grad():
        # Weights large enough that the product, the identity and the bias each move the output by O(1).
        m.weight.normal_(0, 1.0 / math.sqrt(wh * ww))
        if bias:
            m.bias.uniform_(-1, 1)
    return m


CASES = [  # (B, C, H, W, window, bias, dense)
    (2, 3, 14, 14, 7, False, False),   # exact multiples
    (1, 4, 17, 10, 7, True, False),    # padding bottom/right, batch 1, bias
    (2, 2, 3, 5, (4, 2), False, True),  # rectangular window, dense, tiny map
    (1, 1, 1, 1, 1, True, False),      # 1x1 window and map
    (1, 2, 20, 9, (14, 3), True, True),
]


@pytest.mark.parametrize("B,C,H,W,window,bias,dense", CASES)
def test_cpu_forward_and_backward_match_the_float64_reference(lt, B, C, H, W, window, bias, dense):
    m = _module(lt, C, window, bias, dense, seed=B * 100 + H)
    wh, ww = m.window_size
    torch.manual_seed(H * W)
    x = torch.randn(B, C, H, W, requires_grad=True)
    out = m(x)
    assert out.shape == x.shape and out.dtype == torch.float32
    x64 = x.detach().double().requires_grad_()
    w64 = m.weight.detach().double().requires_grad_()
    b64 = m.bias.detach().double().requires_grad_() if bias else None
    want = conv_reference(x64, w64, b64, wh, ww, dense)
    err = (out.double() - want).abs().max().item()
    assert err <= 1e-5, err
    # Dropping the identity or the bias would fail: each moves the output by far more than the tolerance.
    assert (want - conv_reference(x64, w64, b64, wh, ww, dense, identity=False)).abs().max().item() > 0.1
    g = torch.randn_like(out)
    out.backward(g)
    want.backward(g.double())
    for got, ref, name in [(x.grad, x64.grad, "dx"), (m.weight.grad, w64.grad, "dweight")] + \
            ([(m.bias.grad, b64.grad, "dbias")] if bias else []):
        e = (got.double() - ref).abs().max().item() / max(ref.abs().max().item(), 1.0)
        assert e <= 1e-5, (name, e)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_cpu_16bit_inputs_and_channels_last(lt, dtype):
    m = _module(lt, 5, 7, bias=True, seed=3)
    x = torch.randn(2, 5, 9, 16).to(dtype).contiguous(memory_format=torch.channels_last)
    out = m(x)
    assert out.dtype == dtype and out.is_contiguous(memory_format=torch.channels_last)
    want = conv_reference(x, m.weight.detach(), m.bias.detach(), 7, 7)
    tol = 2e-2 if dtype == torch.bfloat16 else 4e-3
    err = ((out.double() - want).abs() / (1 + want.abs())).max().item()
    assert err <= tol, err


def test_parameters_init_and_state_dict(lt):
    torch.manual_seed(0)
    m = lt.WBMM2d(256, 7)
    R = m.relative_position_bias_table
    assert R.shape == (256, 169) and R.dtype == torch.float32
    assert 0.018 < R.std().item() < 0.022 and R.abs().max().item() <= 2.0  # trunc_normal(std=0.02)
    assert list(m.state_dict()) == ["relative_position_bias_table"]
    mb = lt.WBMM2d(8, (3, 5), bias=True)
    assert mb.relative_position_bias_table.shape == (8, 5 * 9) and list(mb.state_dict()) == \
        ["relative_position_bias_table", "bias"]
    md = lt.WBMM2d(4, 2, dense=True)
    assert list(md.state_dict()) == ["M"] and md.M.shape == (4, 4, 4)
    # The published module's state_dict (with its relative_position_index buffer) loads; a wrong index does not.
    from lkjit._wbmm_torch_ref import relative_position_index
    sd = {"relative_position_bias_table": torch.randn(8, 45), "bias": torch.randn(8),
          "relative_position_index": relative_position_index(3, 5)}
    mb.load_state_dict(sd)
    assert torch.equal(mb.relative_position_bias_table, sd["relative_position_bias_table"])
    bad = dict(sd, relative_position_index=relative_position_index(5, 3))
    with pytest.raises(RuntimeError, match="not the relative position index of window"):
        mb.load_state_dict(bad)
    with pytest.raises(RuntimeError, match="size mismatch"):
        mb.load_state_dict(dict(sd, relative_position_bias_table=torch.randn(8, 169)))
    assert "window_size=(3, 5)" in repr(mb)


def test_relative_position_index_is_the_spec(lt):
    from lkjit._wbmm_torch_ref import relative_position_index
    wh, ww = 3, 4
    idx = relative_position_index(wh, ww)
    for i in range(wh * ww):
        for j in range(wh * ww):
            ih, iw, jh, jw = i // ww, i % ww, j // ww, j % ww
            assert idx[i, j] == (ih - jh + wh - 1) * (2 * ww - 1) + (iw - jw + ww - 1)


@pytest.mark.parametrize("dense", [False, True])
def test_fuse_identity_fuse_bn_and_to_dense_keep_the_output(lt, dense):
    m = _module(lt, 6, (5, 3), bias=False, dense=dense, seed=7)
    x = torch.randn(2, 6, 11, 7)
    with torch.no_grad():
        y = m(x)
        if not dense:
            assert torch.allclose(m.to_dense()(x), y, atol=1e-5)
        bn = torch.nn.BatchNorm2d(6).eval()
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        bn.weight.uniform_(0.5, 2)
        bn.bias.uniform_(-1, 1)
        fused = m.fuse_bn(bn)
        assert fused.bias is not None and not fused.identity and m.identity
        assert torch.allclose(fused(x), bn(y), atol=1e-4)
        m.fuse_identity()
        assert not m.identity
        assert torch.allclose(m(x), y, atol=1e-5)
    with pytest.raises(ValueError, match="BatchNorm2d\\(6\\)"):
        m.fuse_bn(torch.nn.BatchNorm2d(5))


@pytest.mark.parametrize("bias,dense,need_dx", [(True, False, True), (False, True, False)])
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_opcheck(lt, bias, dense, need_dx, layout):
    """Schema, fake tensor and AOT dispatch of both ops on CPU tensors, and wbmm_fwd's autograd registration
    (wbmm_bwd has none: no double backward)."""
    C, wh, ww = 3, 4, 3
    x = torch.randn(2, C, 9, 7)
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    w = torch.randn(C, wh * ww, wh * ww) if dense else torch.randn(C, (2 * wh - 1) * (2 * ww - 1))
    b = torch.randn(C) if bias else None
    tests = ("test_schema", "test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic")
    torch.library.opcheck(torch.ops.lkjit.wbmm_fwd.default, (x, w, b, wh, ww, dense, True, False, 1),
                          test_utils=tests + ("test_autograd_registration",))
    torch.library.opcheck(torch.ops.lkjit.wbmm_bwd.default, (x, torch.randn_like(x), w, b, wh, ww, dense, True, False,
                                                             need_dx, 1), test_utils=tests)


def test_fake_shapes_at_wbmm_t_sizes(lt):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        for C, HW in [(80, 56), (160, 28), (320, 14), (640, 7)]:
            m = lt.WBMM2d(C, 7)
            x = torch.empty(128, C, HW, HW, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
            y = m(x)
            assert y.shape == x.shape and y.dtype == torch.bfloat16
            assert y.is_contiguous(memory_format=torch.channels_last)


def test_torch_compile_aot_eager(lt):
    m = _module(lt, 4, 5, bias=True, seed=11)
    x = torch.randn(2, 4, 12, 10, requires_grad=True)
    f = torch.compile(m, backend="aot_eager", fullgraph=True)
    y = f(x)
    y.sum().backward()
    want = conv_reference(x.detach(), m.weight.detach(), m.bias.detach(), 5, 5)
    assert (y.double() - want).abs().max().item() <= 1e-5


def test_bad_arguments_name_the_value(lt):
    from lkjit._wbmm_abi import WBMMLayer
    with pytest.raises(lkjit.SpecError, match=r"channels=0 is out of range; supported: \[1, 2\^24\]"):
        lt.WBMM2d(0)
    with pytest.raises(lkjit.SpecError, match=r"wh=17 is out of range; supported: \[1, 16\]"):
        lt.WBMM2d(4, (17, 7))
    with pytest.raises(ValueError, match="window_size must be an int or a pair"):
        lt.WBMM2d(4, (7, 7, 7))
    with pytest.raises(TypeError, match="window_size must be an int"):
        lt.WBMM2d(4, 7.0)
    m = lt.WBMM2d(4, 7)
    with pytest.raises(ValueError, match=r"input must be 4-D"):
        m(torch.randn(4, 8, 8))
    with pytest.raises(TypeError, match="float64"):
        m(torch.randn(1, 4, 8, 8, dtype=torch.float64))
    with pytest.raises(ValueError, match="input has C=5 channels"):
        m(torch.randn(1, 5, 8, 8))
    with pytest.raises(ValueError, match=r"relative_position_bias_table has shape \(4, 100\); expected \(4, 169\)"):
        lt.wbmm(torch.randn(1, 4, 8, 8), torch.randn(4, 100))
    with pytest.raises(ValueError, match=r"M has shape \(4, 49, 48\); expected \(4, 49, 49\)"):
        lt.wbmm(torch.randn(1, 4, 8, 8), torch.randn(4, 49, 48), dense=True)
    with pytest.raises(ValueError, match=r"bias has shape \(3,\); expected \(4,\)"):
        lt.wbmm(torch.randn(1, 4, 8, 8), torch.randn(4, 169), torch.randn(3))
    # The C ABI's own checks, through ctypes (no GPU needed: they come before the device).
    with pytest.raises(lkjit.SpecError, match=r"wh=0 is out of range; supported: \[1, 16\]"):
        WBMMLayer(8, 0, 7)
    with pytest.raises(lkjit.SpecError, match=r"C=16777217 is out of range; supported: \[1, 2\^24\]"):
        WBMMLayer((1 << 24) + 1)
    layer = WBMMLayer(8, 7, 7, dtype="bf16", bias=True)
    with pytest.raises(lkjit.SpecError, match="bias=true but bias is null"):
        layer.set_weights(4096, None)
    with pytest.raises(lkjit.SpecError, match="R \\(C, K\\) must be a non-null device pointer in table mode"):
        layer.set_weights(None, 4096)
    with pytest.raises(lkjit.SpecError, match="call set_weights\\(\\) first|x and out must be non-null"):
        layer.forward(0, 4096, 1, 7, 7)
    layer.set_weights(4096, 4096)
    with pytest.raises(lkjit.SpecError, match="x and out must be non-null"):
        layer.forward(0, 4096, 1, 7, 7)
    with pytest.raises(lkjit.SpecError, match="B=0 is out of range"):
        layer.forward(4096, 4096, 0, 7, 7)
    with pytest.raises(lkjit.SpecError, match=r"out stride\[1\]=0"):
        layer.forward(4096, 8192, 2, 7, 7, out_strides=(392, 0, 7, 1))
    with pytest.raises(lkjit.SpecError, match="grads.R \\(C, K\\) must be a non-null"):
        layer.backward(4096, 4096, 4096, None, 4096, 1, 7, 7)
    with pytest.raises(lkjit.SpecError, match="backward path 'x' is not supported"):
        layer.set_backward_path("x")
    with pytest.raises(TypeError, match="x must be a device pointer"):
        layer.forward(1.5, 4096, 1, 7, 7)


def test_describe_plans_without_a_gpu(lt):
    from lkjit._wbmm_abi import WBMMLayer
    layer = WBMMLayer(256, 7, 7, dtype="bf16")
    fwd = layer.describe(64, 56, 56, arch=90).splitlines()
    assert len(fwd) == 1 and fwd[0].startswith("lkjit_wbmm_fwd_bf16_") and "tile=" in fwd[0]
    bwd = [ln.split()[0] for ln in layer.describe(64, 56, 56, backward=True, arch="sm_80").splitlines()]
    assert [n.split("_")[2] for n in bwd] == ["wgrad", "reduce"]
    with pytest.raises(lkjit.SpecError, match="W=0 is out of range"):
        layer.describe(1, 7, 0, arch=90)
    assert layer.workspace_bytes() == 0


def test_python_ranges_are_the_librarys(lt):
    """_wbmm_abi's copies of the library's ranges, held against the library's messages."""
    from lkjit import _lib
    from lkjit._wbmm_abi import WBMMLayer
    layer = WBMMLayer(4, 7, 7)
    for name, call in [("B", lambda v: layer.describe(v, 7, 7, arch=90)), ("H", lambda v: layer.describe(1, v, 7, arch=90)),
                       ("W", lambda v: layer.describe(1, 7, v, arch=90))]:
        r = _lib._RANGES["wbmm"][name]
        want = f"{name}={r[-1] + 1} is out of range; supported: {_lib.supported('wbmm', name)}"
        with pytest.raises(lkjit.SpecError, match=re.escape(want)):
            call(r[-1] + 1)
    for name, args in [("wh", (4, 17, 7)), ("ww", (4, 7, 0)), ("C", (0, 7, 7))]:
        with pytest.raises(lkjit.SpecError, match=re.escape(_lib.supported("wbmm", name))):
            WBMMLayer(*args)


def test_the_op_called_directly_is_differentiable(lt):
    """torch.ops.lkjit.wbmm_fwd's own autograd gives the module's gradients (the module calls it below autograd)."""
    m = _module(lt, 3, (3, 4), bias=True, seed=21)
    x = torch.randn(2, 3, 7, 9, requires_grad=True)
    g = torch.randn(2, 3, 7, 9)
    m(x).backward(g)
    want = (x.grad.clone(), m.weight.grad.clone(), m.bias.grad.clone())
    x.grad = None
    w, b = m.weight.detach().clone().requires_grad_(), m.bias.detach().clone().requires_grad_()
    torch.ops.lkjit.wbmm_fwd(x, w, b, 3, 4, False, True, False, m._layer_id).backward(g)
    for got, ref in zip((x.grad, w.grad, b.grad), want):
        assert torch.equal(got, ref)
