"""The depthwise family's Python side without a GPU: DepthwiseConv2d's construction (bias a bool), nn.Conv2d's
state_dict keys and init, fp16/bf16 parameters (read as fp32), from_conv / replace_depthwise (swapped and skipped
with reasons), the CPU implementation and both ops' CPU kernels against nn.Conv2d in float64 (forward and every
gradient, random sizes, strides, dilations and paddings), opcheck (schema, fake tensors, AOT dispatch), fake-tensor
shapes, and the C ABI's refusals through ctypes (option ranges held against the library, tensor checks)."""
import random

import pytest

torch = pytest.importorskip("torch")

import lkjit  # noqa: E402
from lkjit import _lib  # noqa: E402
from lkjit._dwconv_abi import DWConvLayer  # noqa: E402


@pytest.fixture(scope="module")
def lt():
    import lkjit.torch as m
    return m


def _conv(C, k, s=1, p=0, d=1, bias=True):
    return torch.nn.Conv2d(C, C, k, s, p, d, groups=C, bias=bias)


def test_module_has_conv2d_keys_init_and_repr(lt):
    m = lt.DepthwiseConv2d(8, 7, padding=3)
    assert set(m.state_dict()) == {"weight", "bias"}
    assert m.weight.shape == (8, 1, 7, 7) and m.bias.shape == (8,)
    assert m.weight.dtype == torch.float32
    bound = 1 / 7  # nn.Conv2d's: kaiming_uniform(a=sqrt(5)) -> U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = 49
    assert m.weight.abs().max() <= bound and m.bias.abs().max() <= bound
    assert m.weight.std() > bound / 4  # not all zeros
    c = _conv(8, 7, p=3)
    m.load_state_dict(c.state_dict())  # round trips both ways
    c.load_state_dict(m.state_dict())
    assert torch.equal(c.weight, m.weight)
    assert "kernel_size=(7, 7)" in repr(m)
    assert lt.DepthwiseConv2d(4, (5, 51), padding=(2, 25), bias=False).bias is None


@pytest.mark.parametrize("kwargs,words", [
    ({"kernel_size": 64}, ["kernel_size=64", "[1, 63]"]),
    ({"kernel_size": 0}, ["kernel_size=0"]),
    ({"kernel_size": 3, "stride": 3}, ["stride=3", "[1, 2]"]),
    ({"kernel_size": 3, "stride": (1, 2)}, ["stride=(1, 2)", "same stride"]),
    ({"kernel_size": 3, "dilation": 5}, ["dilation=5", "[1, 4]"]),
    ({"kernel_size": 3, "padding": 1001}, ["padding=1001", "[0, 1000]"]),
    ({"kernel_size": 3, "padding": "same", "stride": 2}, ["'same'", "stride=2"]),
    ({"kernel_size": 3, "padding": "full"}, ["padding='full'"]),
    ({"kernel_size": 3, "padding_mode": "reflect"}, ["padding_mode='reflect'", "'zeros'"]),
])
def test_bad_options_raise_naming_the_value(lt, kwargs, words):
    with pytest.raises(ValueError) as e:
        lt.DepthwiseConv2d(8, **kwargs)
    for w in words:
        assert w in str(e.value)
    with pytest.raises(ValueError, match="channels=0"):
        lt.DepthwiseConv2d(0, 3)


@pytest.mark.parametrize("bias", ["no", "", 0, 1, None, 1.0])
def test_bias_must_be_a_bool(lt, bias):
    # A truthy stand-in would silently mean True ('no' gave a bias), as WTConv2d refuses it (_lib.as_bool).
    with pytest.raises(TypeError) as e:
        lt.DepthwiseConv2d(8, 3, bias=bias)
    assert f"bias must be a bool (True or False), got {bias!r}" in str(e.value)
    assert "DepthwiseConv2d" in str(e.value)
    assert lt.DepthwiseConv2d(8, 3, bias=False).bias is None
    np = pytest.importorskip("numpy")
    assert lt.DepthwiseConv2d(8, 3, bias=np.bool_(True)).bias is not None


@pytest.mark.parametrize("pdt", [torch.bfloat16, torch.float16])
def test_low_precision_parameters_are_read_as_fp32(lt, pdt):
    # module.to(bf16) / .half() / dtype=: the kernels read fp32 filters, so the parameters are converted for the call
    # (as WTConv2d's) and their gradients come back in their own dtype.
    torch.manual_seed(0)
    for m in (lt.DepthwiseConv2d(6, 5, padding=2).to(pdt), lt.DepthwiseConv2d(6, 5, padding=2, dtype=pdt)):
        assert m.weight.dtype == pdt and m.bias.dtype == pdt
        for xdt in (pdt, torch.float32):
            x = torch.randn(2, 6, 9, 11, dtype=xdt, requires_grad=True)
            y = m(x)
            assert y.dtype == xdt
            want = torch.nn.functional.conv2d(x.detach().double(), m.weight.detach().double(), m.bias.detach().double(),
                                              1, 2, 1, 6)
            tol = 1e-5 if xdt == torch.float32 else 2e-2
            assert float((y.detach().double() - want).abs().max()) <= tol * (1 + float(want.abs().max()))
            m.zero_grad()
            y.float().sum().backward()
            assert m.weight.grad.dtype == pdt and m.bias.grad.dtype == pdt and x.grad.dtype == xdt
            dw = torch.nn.grad.conv2d_weight(x.detach().double(), m.weight.shape, torch.ones_like(want), 1, 2, 1, 6)
            assert float((m.weight.grad.double() - dw).abs().max()) <= 2e-2 * (1 + float(dw.abs().max()))
    # A dtype the kernels cannot take for x is still refused, naming it.
    with pytest.raises(TypeError, match="float64"):
        lt.DepthwiseConv2d(6, 5, padding=2).to(pdt)(torch.randn(1, 6, 9, 9, dtype=torch.float64))


def _random_case(rng):
    C = rng.choice([1, 3, 8])
    kh, kw = rng.choice([(1, 1), (3, 3), (2, 4), (7, 5), (5, 1)])
    s, d = rng.choice([1, 2]), rng.choice([1, 2, 3])
    same = s == 1 and rng.random() < 0.3
    ph, pw = (0, 0) if same else (rng.randint(0, 3), rng.randint(0, 3))
    H = max(1, d * (kh - 1) + 1 - 2 * ph) + rng.randint(0, 6)
    W = max(1, d * (kw - 1) + 1 - 2 * pw) + rng.randint(0, 6)
    return C, (kh, kw), s, d, "same" if same else (ph, pw), rng.choice([1, 2]), H, W


def test_cpu_module_matches_conv2d_in_float64_forward_and_gradients(lt):
    rng = random.Random(7)
    for _ in range(25):
        C, k, s, d, pad, B, H, W = _random_case(rng)
        ref = _conv(C, k, s, pad, d).double()
        m = lt.DepthwiseConv2d(C, k, s, pad, d)
        with torch.no_grad():
            ref.weight.normal_(), ref.bias.normal_()  # every term of unit scale: dropping one fails
            m.weight.copy_(ref.weight), m.bias.copy_(ref.bias)
        x = torch.randn(B, C, H, W, dtype=torch.float64)
        xr, xm = x.clone().requires_grad_(), x.float().requires_grad_()
        yr, ym = ref(xr), m(xm)
        assert ym.shape == yr.shape and ym.dtype == torch.float32
        g = torch.randn_like(yr)
        yr.backward(g)
        ym.backward(g.float())
        tol = 1e-4 * (1 + k[0] * k[1])
        assert (ym.double() - yr).abs().max() <= tol
        assert (xm.grad.double() - xr.grad).abs().max() <= tol
        assert (m.weight.grad.double() - ref.weight.grad).abs().max() <= tol * B * H * W
        assert (m.bias.grad.double() - ref.bias.grad).abs().max() <= tol * B * H * W


def test_cpu_ops_match_conv2d_and_channels_last_stays_channels_last(lt):
    rng = random.Random(11)
    for _ in range(15):
        C, k, s, d, pad, B, H, W = _random_case(rng)
        ref = _conv(C, k, s, pad, d).double()
        same = pad == "same"
        ph, pw = (0, 0) if same else pad
        x = torch.randn(B, C, H, W, dtype=torch.float64)
        w, b = ref.weight.detach(), ref.bias.detach()
        xr = x.clone().requires_grad_()
        yr = ref(xr)
        g = torch.randn_like(yr)
        gx, gw, gb = torch.autograd.grad(yr, [xr, ref.weight, ref.bias], g)
        xl = x.float().contiguous(memory_format=torch.channels_last)
        y = lt.dwconv_fwd(xl, w.float(), b.float(), s, d, ph, pw, same)
        assert y.shape == yr.shape
        if C > 1 and H * W > 1 and y.shape[2] * y.shape[3] > 1:
            assert y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous()
        dx, dw, db = lt.dwconv_bwd(g.float(), xl, w.float(), True, s, d, ph, pw, same, True)
        tol = 1e-4 * (1 + k[0] * k[1])
        assert (y.double() - yr).abs().max() <= tol
        assert dx.stride() == xl.stride()
        assert (dx.double() - gx).abs().max() <= tol
        assert (dw.double() - gw).abs().max() <= tol * B * H * W
        assert (db.double() - gb).abs().max() <= tol * B * H * W
        assert lt.dwconv_bwd(g.float(), xl, w.float(), False, s, d, ph, pw, same, False)[0].numel() == 0


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("s,same,bias", [(1, True, True), (2, False, False)])
def test_opcheck(lt, layout, s, same, bias):
    x = torch.randn(2, 4, 9, 8)
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    w, b = torch.randn(4, 1, 3, 5), torch.randn(4) if bias else None
    args = (x, w, b, s, 1, 0 if same else 1, 0 if same else 2, same)
    utils = ("test_schema", "test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic")
    torch.library.opcheck(torch.ops.lkjit.dwconv_fwd.default, args, test_utils=utils)
    g = torch.randn(lt.dwconv_fwd(*args).shape)
    torch.library.opcheck(torch.ops.lkjit.dwconv_bwd.default, (g, x, w, bias, s, 1, 0 if same else 1,
                                                                0 if same else 2, same, True), test_utils=utils)


def test_fake_shapes_at_replknet_sizes(lt):
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        for C, HW, k in ((128, 56, 31), (256, 28, 29), (512, 14, 27), (1024, 7, 13)):
            x = torch.empty(64, C, HW, HW, dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
            y = lt.dwconv_fwd(x, torch.empty(C, 1, k, k), torch.empty(C), 1, 1, k // 2, k // 2, False)
            assert y.shape == (64, C, HW, HW) and y.dtype == torch.bfloat16
            assert y.is_contiguous(memory_format=torch.channels_last)
            dx, dw, db = lt.dwconv_bwd(y, x, torch.empty(C, 1, k, k), True, 1, 1, k // 2, k // 2, False, True)
            assert dx.shape == x.shape and dw.shape == (C, 1, k, k) and dw.dtype == torch.float32 and db.shape == (C,)
        y = lt.dwconv_fwd(torch.empty(2, 8, 57, 40), torch.empty(8, 1, 51, 5), None, 2, 1, 25, 2, False)
        assert y.shape == (2, 8, 29, 20)


class _Conv2dSubclass(torch.nn.Conv2d):
    pass


def test_from_conv_and_replace_depthwise(lt):
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1),                        # not depthwise: untouched, not reported
        torch.nn.Sequential(_conv(8, 7, p=3)),                      # swapped (nested)
        torch.nn.Conv2d(8, 8, 5, padding=2, groups=8, padding_mode="reflect"),  # skipped: padding mode
        torch.nn.Conv2d(8, 8, 3, stride=3, groups=8),               # skipped: stride
        _conv(8, 3, p="same", bias=False),                          # swapped
        _Conv2dSubclass(8, 8, 3, padding=1, groups=8),              # skipped: a subclass
    )
    x = torch.randn(2, 3, 16, 16)
    want = model(x)
    report = lt.replace_depthwise(model)
    assert report.swapped == ["1.0", "4"]
    assert [n for n, _ in report.skipped] == ["2", "3", "5"]
    assert "padding_mode='reflect'" in report.skipped[0][1] and "stride=3" in report.skipped[1][1]
    assert "_Conv2dSubclass is a subclass of nn.Conv2d" in report.skipped[2][1]
    assert isinstance(model[1][0], lt.DepthwiseConv2d) and isinstance(model[4], lt.DepthwiseConv2d)
    assert type(model[2]) is torch.nn.Conv2d
    assert model[4].bias is None
    assert torch.allclose(model(x), want, atol=1e-5)
    with pytest.raises(ValueError, match="groups=1"):
        lt.DepthwiseConv2d.from_conv(torch.nn.Conv2d(4, 4, 3))


def test_input_checks_name_the_problem(lt):
    m = lt.DepthwiseConv2d(8, 7)
    with pytest.raises(ValueError, match=r"input must be 4-D"):
        m(torch.randn(8, 9, 9))
    with pytest.raises(ValueError, match=r"C=4 channels"):
        m(torch.randn(1, 4, 9, 9))
    with pytest.raises(ValueError, match=r"H=3 .*no output"):
        m(torch.randn(1, 8, 3, 9))
    with pytest.raises(TypeError, match="float64"):
        m(torch.randn(1, 8, 9, 9, dtype=torch.float64))


def test_library_refusals_through_ctypes():
    with pytest.raises(lkjit.SpecError, match=r"kh=0 is out of range; supported: \[1, 63\]"):
        DWConvLayer(8, 0, 3)
    with pytest.raises(lkjit.SpecError, match=r"'same' with stride=2"):
        DWConvLayer(8, 3, 3, stride=2, same=True)
    with pytest.raises(lkjit.SpecError, match="layout"):
        DWConvLayer(8, 3, 3, layout="CHWN")
    layer = DWConvLayer(8, 7, 7, pad_h=3, pad_w=3, dtype="bf16")
    assert layer.output_size(56, 56) == (56, 56)
    assert layer.output_size(1, 56) == (1, 56)  # 1 + 3 + 3 rows hold one 7-row window
    with pytest.raises(lkjit.SpecError, match=r"H=6 with padding 0\+0 .*no output"):
        DWConvLayer(8, 7, 7).output_size(6, 56)
    with pytest.raises(lkjit.SpecError, match="before set_weights"):
        layer.forward(16, 16, 1, 8, 8)
    with pytest.raises(lkjit.SpecError, match="x is null"):
        layer.forward(0, 16, 1, 8, 8)
    with pytest.raises(lkjit.SpecError, match="neither dx nor dw"):
        layer.backward(16, 16, 0, 0, 0, 1, 8, 8)
    text = layer.describe(64, 56, 56, backward=True, arch=90)
    lines = text.splitlines()
    assert [ln.split()[0].split("_bf16")[0] for ln in lines[:2]] == ["lkjit_dwconv_dgrad_direct", "lkjit_dwconv_wgrad_direct"]
    assert lines[2].startswith("lkjit_dwconv_wgrad_reduce_w")
    assert lines[3:] == ["path=direct"]
    big = DWConvLayer(128, 31, 31, pad_h=15, pad_w=15, dtype="bf16")
    assert big.describe(64, 56, 56, backward=True, arch=90).splitlines()[-1] == "path=mma"
    assert layer.workspace_bytes() == 0


@pytest.mark.parametrize("bias", [True, False])
def test_autograd_function_compiles_as_one_graph(bias):
    # torch.compile traces the layer's autograd.Function (its setup_context takes len(), not bool(), of the packed
    # inputs: dynamo cannot trace the latter); the ops' CPU kernels run the compiled graph, forward and backward.
    from lkjit.dwconv import _DWConvFunction
    x = torch.randn(2, 4, 9, 11, requires_grad=True)
    w, b = torch.randn(4, 1, 5, 5), torch.randn(4) if bias else None
    args = (1, 1, 2, 2, False)

    def f(x):
        return _DWConvFunction.apply(*args, x, w, b) if bias else _DWConvFunction.apply(*args, x, w)

    y = torch.compile(f, fullgraph=True, backend="aot_eager")(x)
    want = torch.nn.functional.conv2d(x.detach().double(), w.double(), None if b is None else b.double(), 1, 2, 1, 4)
    assert (y.double() - want).abs().max() < 1e-4
    y.sum().backward()
    dx = torch.nn.grad.conv2d_input(x.shape, w.double(), torch.ones_like(want), 1, 2, 1, 4)
    assert (x.grad.double() - dx).abs().max() < 1e-4
