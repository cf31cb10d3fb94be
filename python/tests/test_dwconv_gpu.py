"""lkjit.torch.DepthwiseConv2d on a GPU against torch.nn.functional.conv2d in float64: forward and every gradient
on random sizes, kernel sizes (square, rectangular, even), strides, dilations and paddings, every dtype, NCHW and
channels_last; wgrad bit-identical across calls; fp16/bf16 parameters; autocast; the current stream; CUDA graph
capture and replay; torch.compile; replace_depthwise on a small network. Skips without CUDA."""
import random

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

import lkjit.torch as lt  # noqa: E402

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
TOL = {torch.float32: 1e-4, torch.float16: 4e-3, torch.bfloat16: 3e-2}  # relative to the sum of |terms|


def _ref(x, w, b, s, pad, d):
    """nn.Conv2d's depthwise conv in float64 on the GPU, and the sums of |terms| (the tolerance's scale)."""
    C = x.shape[1]
    y = F.conv2d(x.double(), w.double(), None if b is None else b.double(), s, pad, d, C)
    scale = F.conv2d(x.double().abs(), w.double().abs(), None if b is None else b.double().abs(), s, pad, d, C)
    return y, scale


# Half the spacing of the dtype's subnormals: results below the smallest normal (fp16: 6.1e-5) are rounded to
# that absolute step, which a bound relative to the sum of |terms| alone does not allow for.
SUBNORMAL_HALF_STEP = {torch.float32: 2.0 ** -150, torch.float16: 2.0 ** -25, torch.bfloat16: 2.0 ** -134}


def _close(name, got, want, scale, tol):
    err = (got.double() - want).abs()
    bound = tol * scale + SUBNORMAL_HALF_STEP[got.dtype]
    assert torch.isfinite(got).all(), f"{name}: non-finite output"
    ratio = err / bound
    if not bool((ratio <= 1).all()):
        i = int(ratio.argmax())
        at = tuple(int(v) for v in torch.unravel_index(torch.tensor(i), got.shape))
        raise AssertionError(f"{name}: {int((ratio > 1).sum())} of {got.numel()} elements out of tolerance; worst at "
                             f"{at}: got {got.flatten()[i].item():.6g}, want {want.flatten()[i].item():.6g}, sum of "
                             f"|terms| {scale.flatten()[i].item():.3g}, bound {bound.flatten()[i].item():.3g}")


def _cases():
    rng = random.Random(3)
    out = []
    for i in range(36):
        kh, kw = rng.choice([(1, 1), (3, 3), (7, 7), (13, 13), (31, 31), (2, 4), (5, 51), (51, 5), (4, 6)])
        s, d = rng.choice([1, 1, 2]), rng.choice([1, 1, 2, 3])
        same = s == 1 and rng.random() < 0.5
        pad = "same" if same else (rng.randint(0, kh // 2 + 1) * d, rng.randint(0, kw // 2 + 1) * d)
        C = rng.choice([1, 3, 8, 37, 64])
        B = rng.choice([1, 2])
        H = max(1, d * (kh - 1) + 1 - (0 if same else 2 * pad[0])) + rng.randint(0, 20)
        W = max(1, d * (kw - 1) + 1 - (0 if same else 2 * pad[1])) + rng.randint(0, 20)
        out.append((DTYPES[i % 3], ("nchw", "nhwc")[(i // 3) % 2], B, C, H, W, (kh, kw), s, d, pad, i % 4 != 3))
    return out


@pytest.mark.parametrize("dtype,layout,B,C,H,W,k,s,d,pad,bias", _cases())
def test_matches_conv2d_in_float64(dtype, layout, B, C, H, W, k, s, d, pad, bias):
    torch.manual_seed(0)
    m = lt.DepthwiseConv2d(C, k, s, pad, d, bias).cuda()
    with torch.no_grad():
        m.weight.normal_(0, 1 / (k[0] * k[1]) ** 0.5)
        if bias:
            m.bias.normal_()
    x = torch.randn(B, C, H, W, device="cuda").to(dtype)
    if layout == "nhwc":
        x = x.contiguous(memory_format=torch.channels_last)
    x.requires_grad_()
    y = m(x)
    assert y.dtype == dtype
    want, scale = _ref(x.detach(), m.weight.detach(), None if m.bias is None else m.bias.detach(), s, pad, d)
    assert y.shape == want.shape
    if layout == "nhwc" and C > 1 and y.shape[2] * y.shape[3] > 1:
        assert y.is_contiguous(memory_format=torch.channels_last)
    _close("y", y, want, scale, TOL[dtype])
    g = torch.randn_like(y)
    y.backward(g)
    xd = x.detach().double().requires_grad_()
    wd = m.weight.detach().double().requires_grad_()
    bd = m.bias.detach().double().requires_grad_() if bias else None
    yr = F.conv2d(xd, wd, bd, s, pad, d, C)
    gx, gw, *gb = torch.autograd.grad(yr, [xd, wd] + ([bd] if bias else []), g.double())
    # Gradient scales: the same sums with |dy|, |w|, |x|.
    sx = torch.autograd.grad(F.conv2d(xd, wd.abs(), None, s, pad, d, C), xd, g.double().abs())[0]
    sw = torch.autograd.grad(F.conv2d(xd.abs(), wd, None, s, pad, d, C), wd, g.double().abs())[0]
    _close("dx", x.grad, gx, sx, TOL[dtype])
    _close("dw", m.weight.grad, gw, sw, 1e-4)
    if bias:
        _close("dbias", m.bias.grad, gb[0], g.double().abs().sum((0, 2, 3)), 1e-4)
    # wgrad is deterministic: a second backward gives the same bits.
    first = m.weight.grad.clone()
    m.weight.grad = None
    m(x).backward(g)
    assert torch.equal(first, m.weight.grad)


@pytest.mark.parametrize("pdt", [torch.float16, torch.bfloat16])
def test_low_precision_parameters_run_the_kernels_as_fp32(pdt):
    # module.to(pdt): the kernels read the parameters converted to fp32; gradients come back in pdt.
    torch.manual_seed(0)
    m = lt.DepthwiseConv2d(16, 7, padding=3).cuda().to(pdt)
    x = torch.randn(2, 16, 20, 20, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    y = m(x)
    assert y.dtype == torch.bfloat16
    want, scale = _ref(x.detach(), m.weight.detach(), m.bias.detach(), 1, 3, 1)
    _close("y", y.detach(), want, scale, TOL[torch.bfloat16])
    y.float().sum().backward()
    assert m.weight.grad.dtype == pdt and m.bias.grad.dtype == pdt and x.grad.dtype == torch.bfloat16
    dw = torch.nn.grad.conv2d_weight(x.detach().double(), m.weight.shape, torch.ones_like(want), 1, 3, 1, 16)
    assert float((m.weight.grad.double() - dw).abs().max()) <= 2e-2 * float(dw.abs().max())


def test_autocast_current_stream_graph_and_compile():
    m = lt.DepthwiseConv2d(32, 7, padding=3).cuda()
    x = torch.randn(4, 32, 20, 20, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = m(x)
    assert y.dtype == torch.bfloat16 and m.weight.dtype == torch.float32
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        ys = m(x)
    s.synchronize()
    assert torch.equal(ys, m(x))
    # CUDA graph: warm up on a side stream outside capture (PyTorch's rule for capturing backward: gradients that
    # warm-up accumulated on the legacy stream cannot be accumulated into under capture), capture forward +
    # backward, replay with new input values.
    # y and ys keep their autograd graphs, whose AccumulateGrad node for the weight would run on the stream of that
    # first forward (the legacy stream) inside the capture: drop them first.
    del y, ys
    xs = x.clone().requires_grad_()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            m(xs).sum().backward()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    m.zero_grad(set_to_none=True)
    xs.grad = None
    with torch.cuda.graph(g):
        out = m(xs)
        out.sum().backward()
    with torch.no_grad():
        xs.copy_(torch.randn_like(xs))
    m.weight.grad.zero_()
    g.replay()
    torch.cuda.synchronize()
    want = F.conv2d(xs.detach(), m.weight.detach(), m.bias.detach(), 1, 3, 1, 32)
    assert (out - want).abs().max() < 1e-4
    # The captured backward's gradients are the new input's (written into the tensors allocated under capture).
    xd = xs.detach().double()
    dw = torch.nn.grad.conv2d_weight(xd, m.weight.shape, torch.ones_like(want).double(), 1, 3, 1, 32)
    assert (m.weight.grad.double() - dw).abs().max() <= 1e-4 * dw.abs().max()
    dx = torch.nn.grad.conv2d_input(xd.shape, m.weight.detach().double(), torch.ones_like(want).double(), 1, 3, 1, 32)
    assert (xs.grad.double() - dx).abs().max() <= 1e-4 * dx.abs().max()
    compiled = torch.compile(m, fullgraph=True)
    assert (compiled(x) - m(x)).abs().max() < 1e-5


def test_replace_depthwise_on_a_network():
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.Conv2d(16, 16, 7, padding=3, groups=16),
                              torch.nn.GELU(), torch.nn.Conv2d(16, 16, 5, padding=2, groups=16)).cuda()
    x = torch.randn(2, 3, 24, 24, device="cuda")
    want = net(x)
    report = lt.replace_depthwise(net)
    assert report.swapped == ["1", "3"] and report.skipped == []
    assert (net(x) - want).abs().max() < 1e-4
