"""lkjit.torch.WBMM2d on a GPU against the published algorithm written here in PyTorch ops from the spec
(docs/wbmm.md: zero-pad, partition, bmm with M = R[:, I], + T, un-partition, crop), computed in float64 on the GPU
from the same rounded inputs: every dtype, fp32 accurate and TF32, NCHW and channels_last, windows 7, 14 and
rectangular, odd sizes with padding, batch 1, dense mode, bias; NaN-free outputs, dR bit-identical across runs,
CUDA-graph capture and replay with parameter updates, autocast, a side stream. Skips without a GPU."""
import math

import pytest

torch = pytest.importorskip("torch")
import lkjit  # noqa: E402

if not torch.cuda.is_available():
    pytest.skip("torch.cuda is not available", allow_module_level=True)
_status = lkjit.gpu_available()
if not _status:
    pytest.skip(f"lkjit cannot use the GPU: {_status.reason}", allow_module_level=True)

import torch.nn.functional as F  # noqa: E402

from lkjit.torch import WBMM2d  # noqa: E402

DEV = torch.device("cuda")
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16


def published(x, weight, bias, wh, ww, dense=False, identity=True):
    """float64 WBMM as the published code computes it (partition, bmm, add, un-partition)."""
    B, C, H, W = x.shape
    x, weight = x.double(), weight.double()
    nH, nW = math.ceil(H / wh), math.ceil(W / ww)
    xp = F.pad(x, (0, nW * ww - W, 0, nH * wh - H))
    T = xp.view(B, C, nH, wh, nW, ww).permute(1, 0, 2, 4, 3, 5).reshape(C, B * nH * nW, wh * ww)
    if dense:
        M = weight
    else:
        ih, iw = torch.meshgrid(torch.arange(wh, device=x.device), torch.arange(ww, device=x.device), indexing="ij")
        ih, iw = ih.reshape(-1), iw.reshape(-1)
        idx = (ih[:, None] - ih[None, :] + wh - 1) * (2 * ww - 1) + (iw[:, None] - iw[None, :] + ww - 1)
        M = weight[:, idx]
    Y = torch.bmm(T, M) + (T if identity else 0)
    out = Y.view(C, B, nH, nW, wh, ww).permute(1, 0, 2, 4, 3, 5).reshape(B, C, nH * wh, nW * ww)[:, :, :H, :W]
    return out + (bias.double().view(1, -1, 1, 1) if bias is not None else 0)


def bound_of(x, weight, bias, wh, ww, dense, identity):
    """The sum of |terms| of each output: the scale rounding errors are relative to."""
    return published(x.abs(), weight.abs(), None if bias is None else bias.abs(), wh, ww, dense, identity)


def assert_within(got, want, bound, tol, what):
    err = (got.double() - want).abs()
    ok = err <= tol * (1 + bound)  # False for NaN
    assert bool(ok.all()), (f"{what}: {int((~ok).sum())} of {ok.numel()} out of tolerance {tol:g}; max err "
                            f"{err.nan_to_num(float('inf')).max().item():g}")


TOL = {(F32, False): 2e-5, (F32, True): 2e-3, (F16, False): 2e-3, (BF16, False): 1.2e-2}
SHAPES = [  # (B, C, H, W, window, bias, dense)
    (1, 3, 14, 14, 7, False, False), (2, 5, 17, 23, 7, True, False), (1, 4, 28, 30, 14, True, False),
    (2, 3, 9, 11, (3, 5), False, True), (1, 2, 20, 16, 14, False, True), (3, 16, 56, 56, 7, False, False),
    (1, 1, 1, 1, 1, True, False),
]
CASES = [pytest.param(s, dt, tf32, cl, id=f"{str(dt)[6:]}{'-tf32' if tf32 else ''}-{'cl' if cl else 'nchw'}-"
                      f"{'x'.join(map(str, s[:4]))}-w{s[4]}{'-bias' if s[5] else ''}{'-dense' if s[6] else ''}")
         for s in SHAPES for dt, tf32 in ((F32, False), (F32, True), (F16, False), (BF16, False)) for cl in (False, True)]


def _module(C, window, bias, dense, seed):
    torch.manual_seed(seed)
    m = WBMM2d(C, window, bias=bias, dense=dense).to(DEV)
    wh, ww = m.window_size
    with torch.no_grad():  # every term moves the output by O(1)
        m.weight.normal_(0, 1 / math.sqrt(wh * ww))
        if bias:
            m.bias.uniform_(-1, 1)
    return m


@pytest.mark.parametrize("shape,dtype,tf32,channels_last", CASES)
def test_matches_the_published_algorithm(shape, dtype, tf32, channels_last):
    B, C, H, W, window, bias, dense = shape
    m = _module(C, window, bias, dense, seed=B + C + H + W)
    m.allow_tf32 = tf32
    wh, ww = m.window_size
    x = torch.randn(B, C, H, W, device=DEV).to(dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    x.requires_grad_()
    out = m(x)
    assert out.dtype == dtype
    assert out.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    b = None if m.bias is None else m.bias.detach()
    tol = TOL[(dtype, tf32)]
    assert_within(out, published(x.detach(), m.weight.detach(), b, wh, ww, dense),
                  bound_of(x.detach(), m.weight.detach(), b, wh, ww, dense, True), tol, "out")
    g = torch.randn_like(out)
    out.backward(g)
    x64 = x.detach().double().requires_grad_()
    w64 = m.weight.detach().double().requires_grad_()
    b64 = None if b is None else b.double().requires_grad_()
    published(x64, w64, b64, wh, ww, dense).backward(g.double())
    # Gradient bounds from the absolute values: dX's is the forward's on |dY| with |M|^T (sum of |terms|).
    xa, wa = x64.detach().abs().requires_grad_(), w64.detach().abs().requires_grad_()
    published(xa, wa, None, wh, ww, dense).backward(g.double().abs())
    assert_within(x.grad, x64.grad, xa.grad, tol, "dx")
    assert_within(m.weight.grad, w64.grad, wa.grad, tol, "dweight")
    if bias:
        assert_within(m.bias.grad, b64.grad, g.double().abs().sum((0, 2, 3)), tol, "dbias")


def test_weight_gradients_are_bit_identical_across_runs():
    m = _module(64, 7, True, False, seed=1)
    x = torch.randn(8, 64, 56, 56, device=DEV, dtype=BF16, requires_grad=True)
    g = torch.randn_like(x)
    grads = []
    for _ in range(3):
        m.zero_grad(set_to_none=True)
        m(x).backward(g)
        grads.append((m.relative_position_bias_table.grad.clone(), m.bias.grad.clone()))
    for a, b in grads[1:]:
        assert torch.equal(a, grads[0][0]) and torch.equal(b, grads[0][1])


def test_cuda_graph_capture_sees_parameter_updates():
    m = _module(32, 7, False, False, seed=2)
    x = torch.randn(4, 32, 28, 28, device=DEV, requires_grad=True)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up the shape outside capture (the first call compiles)
        for _ in range(2):
            m(x).sum().backward()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    m.zero_grad(set_to_none=True)
    x.grad = None
    with torch.cuda.graph(graph):
        out = m(x)
        out.sum().backward()
    with torch.no_grad():
        m.relative_position_bias_table.mul_(-2.0)  # read at replay: the graph holds pointers, not values
    graph.replay()
    torch.cuda.synchronize()
    want = published(x.detach(), m.relative_position_bias_table.detach(), None, 7, 7)
    assert_within(out, want, bound_of(x.detach(), m.relative_position_bias_table.detach(), None, 7, 7, False, True),
                  2e-5, "replayed out")


def test_autocast_and_a_side_stream():
    m = _module(16, 7, True, False, seed=3)
    x = torch.randn(2, 16, 21, 19, device=DEV)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s), torch.autocast("cuda", dtype=torch.bfloat16):
        out = m(x)
    s.synchronize()
    assert out.dtype == BF16
    xb = x.to(BF16)
    assert_within(out, published(xb, m.weight.detach(), m.bias.detach(), 7, 7),
                  bound_of(xb, m.weight.detach(), m.bias.detach(), 7, 7, False, True), 1.2e-2, "autocast out")


def test_fuse_identity_and_bn_on_the_gpu():
    m = _module(24, 7, False, False, seed=4).eval()
    x = torch.randn(2, 24, 30, 30, device=DEV)
    bn = torch.nn.BatchNorm2d(24).to(DEV).eval()
    with torch.no_grad():
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.5, 2)
        want = bn(m(x))
        fused = m.fuse_bn(bn)
        assert torch.allclose(fused(x), want, atol=1e-4, rtol=1e-4)
