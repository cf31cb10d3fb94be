"""lkjit.torch.WTConv2d on a GPU against the float64 reference algorithm (wtconv_reference.py: Algorithm 1
of Finder et al., ECCV 2024, as in docs/wtconv.md), computed on the GPU from the same rounded inputs.
Skips when PyTorch, a CUDA device or liblkjit.so is missing."""
import copy
import math

import pytest

torch = pytest.importorskip("torch")
import lkjit  # noqa: E402

if not torch.cuda.is_available():
    pytest.skip("torch.cuda is not available", allow_module_level=True)
_status = lkjit.gpu_available()
if not _status:
    pytest.skip(f"lkjit cannot use the GPU: {_status.reason}", allow_module_level=True)

from torch import nn  # noqa: E402

from lkjit.torch import WTConv2d  # noqa: E402
from wtconv_reference import ReferenceWTConv2d, haar_filters, params_of, wtconv2d_reference  # noqa: E402

DEV = torch.device("cuda")
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
# Output and dX: one rounding to the dtype plus fp32 accumulation (as tests/gpu/, runtime/testing.cpp).
TOL = {F32: (1e-4, 1e-4), F16: (2e-3, 2e-3), BF16: (1.5e-2, 1.5e-2)}
# Parameter gradients are fp32 sums over B*H*W terms: tolerance relative to the tensor's largest value.
GRAD_REL = {F32: 2e-4, F16: 2e-3, BF16: 2e-3}

# (B, C, H, W, k, L, stride, bias)
SHAPES = [
    (1, 1, 1, 1, 5, 1, 1, True),      # 1x1 map
    (1, 3, 3, 5, 5, 2, 1, True),      # 3x5 map, L beyond log2(size)
    (2, 4, 7, 9, 5, 3, 1, True),      # odd sizes
    (1, 6, 17, 15, 3, 2, 2, False),   # odd sizes, stride 2, no bias
    (3, 5, 10, 1, 5, 2, 1, True),     # a single column
    (2, 8, 28, 28, 5, 4, 1, True),    # a WTConvNeXt-T stage-2 plane
    (1, 4, 33, 31, 7, 0, 1, True),    # L = 0: scaled depthwise conv
    (1, 2, 64, 64, 5, 5, 3, True),    # stride 3
    (1, 2, 256, 260, 5, 3, 1, True),  # planes beyond shared memory: tiled kernels
    (1, 2, 129, 300, 5, 2, 2, True),  # tiled, odd, stride 2
]
HALF_SHAPES = [SHAPES[i] for i in (0, 1, 3, 5, 8)]
CASES = ([pytest.param(s, F32, id=f"f32-{'x'.join(map(str, s[:4]))}-k{s[4]}L{s[5]}s{s[6]}") for s in SHAPES]
         + [pytest.param(s, dt, id=f"{str(dt)[6:]}-{'x'.join(map(str, s[:4]))}-k{s[4]}L{s[5]}s{s[6]}")
            for dt in (F16, BF16) for s in HALF_SHAPES])


def assert_close(got, want, atol, rtol, what):
    """|got - want| <= atol + rtol |want| elementwise, in float64; NaN or inf never passes."""
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)}, expected {tuple(want.shape)}"
    g, w = got.detach().double(), want.detach().double()
    err = (g - w).abs()
    ok = err <= atol + rtol * w.abs()  # False for NaN
    if not bool(ok.all()):
        bad = (~ok).nonzero()[0].tolist()
        raise AssertionError(f"{what}: {int((~ok).sum())} of {ok.numel()} elements out of tolerance "
                             f"(atol {atol:g}, rtol {rtol:g}); first at {bad}: got {g[tuple(bad)].item()!r}, "
                             f"want {w[tuple(bad)].item()!r}; max abs err {err.nan_to_num(float('inf')).max().item():g}")


def make_layer(C, k, L, stride, bias, seed=0):
    """A layer with random scales too (the init's constant scales would hide scale-gradient mistakes)."""
    torch.manual_seed(seed)
    m = WTConv2d(C, C, k, stride=stride, bias=bias, wt_levels=L).to(DEV)
    with torch.no_grad():
        m.base_scale.weight.uniform_(0.5, 1.5)
        for s in m.wavelet_scale:
            s.weight.uniform_(-0.5, 0.5)
    return m


def flat_params(m):
    bw, bb, bs, lw, ls = params_of(m)
    return [bw, bs, *lw, *ls] + ([bb] if bb is not None else [])


def reference(m, x, g, stride):
    """Output, dX and parameter gradients of the reference algorithm in float64 from x, g (any dtype)."""
    bw, bb, bs, lw, ls = [p.detach().double().requires_grad_() if isinstance(p, torch.Tensor) else
                          ([t.detach().double().requires_grad_() for t in p] if isinstance(p, list) else None)
                          for p in params_of(m)]
    x64 = x.detach().double().requires_grad_()
    out = wtconv2d_reference(x64, bw, bb, bs, lw, ls, stride)
    out.backward(g.detach().double())
    grads = [bw.grad, bs.grad, *[t.grad for t in lw], *[t.grad for t in ls]] + ([bb.grad] if bb is not None else [])
    return out.detach(), x64.grad, grads


def assert_eager_path(out):
    """`out` came from the module's eager path (the autograd.Function), not the custom op."""
    assert type(out.grad_fn).__name__ == "_WTConvFunctionBackward", f"grad_fn {out.grad_fn!r}"


def layer_and_inputs(shape, dt, layer_seed, input_seed):
    """A layer for shape = (B, C, H, W, k, L, stride, bias) and fresh random x, dOut in dtype dt."""
    B, C, H, W, k, L, stride, bias = shape
    m = make_layer(C, k, L, stride, bias, seed=layer_seed)
    torch.manual_seed(input_seed)
    x = torch.randn(B, C, H, W, device=DEV).to(dt)
    g = torch.randn(B, C, math.ceil(H / stride), math.ceil(W / stride), device=DEV).to(dt)
    return m, x, g


def run(m, x, g, call=None):
    """Output, dX and parameter gradients of m (called through `call`, e.g. a compiled m, if given; else
    eagerly, checking that the eager path ran)."""
    x = x.detach().requires_grad_()
    m.zero_grad(set_to_none=True)
    out = (m if call is None else call)(x)
    if call is None:
        assert_eager_path(out)
    out.backward(g)
    return out, x.grad, [p.grad for p in flat_params(m)]


def run_custom_op(m, x, g):
    """run() through the custom op lkjit::wtconv_fwd called directly (its own autograd runs lkjit::wtconv_bwd),
    on m's lkjit layer: the two ops that torch.compile's graphs call."""
    x = x.detach().requires_grad_()
    m.zero_grad(set_to_none=True)
    bw, bb, bs, lw, ls = params_of(m)
    out = torch.ops.lkjit.wtconv_fwd(x, bw, bb, bs, lw, ls, m._lkjit_id, m.stride)
    assert out.grad_fn is not None and type(out.grad_fn).__name__ != "_WTConvFunctionBackward"
    out.backward(g)
    return out, x.grad, [p.grad for p in flat_params(m)]


def assert_identical(got, want, what):
    assert torch.equal(got[0], want[0]), f"{what}: out"
    assert torch.equal(got[1], want[1]), f"{what}: dX"
    assert len(got[2]) == len(want[2]), what
    for i, (a, b) in enumerate(zip(got[2], want[2])):
        assert a is not None and torch.equal(a, b), f"{what}: gradient of parameter {i}"


def check_against_reference(m, x, g, dt, stride, what=""):
    out, dx, grads = run(m, x, g)
    r_out, r_dx, r_grads = reference(m, x, g, stride)
    assert out.dtype == dt and dx.dtype == x.dtype
    atol, rtol = TOL[dt]
    assert_close(out, r_out, atol, rtol, f"{what}out")
    assert_close(dx, r_dx, atol, rtol, f"{what}dX")
    names = ["base_conv.weight", "base_scale.weight"] + [f"wavelet_convs.{i}.weight" for i in range(m.wt_levels)] \
        + [f"wavelet_scale.{i}.weight" for i in range(m.wt_levels)] + (["base_conv.bias"] if m.base_conv.bias is not None else [])
    for name, got, want in zip(names, grads, r_grads):
        assert got is not None and got.dtype == torch.float32, f"{what}{name}: gradient {got!r}"
        scale = want.abs().max().item()
        rel = GRAD_REL[dt]
        assert_close(got, want, rel * (scale + 1e-3), rel, f"{what}grad {name}")
    return out, dx, grads


@pytest.mark.parametrize("shape,dt", CASES)
def test_matches_reference(shape, dt):
    m, x, g = layer_and_inputs(shape, dt, layer_seed=shape[0] * 1000 + shape[2], input_seed=7)
    check_against_reference(m, x, g, dt, shape[6])


# The eager path (autograd.Function) and the custom ops (what torch.compile runs) share one implementation;
# on the same lkjit layer they must agree bit for bit.
PATH_CASES = [pytest.param(SHAPES[i], dt, id=f"{str(dt)[6:]}-{'x'.join(map(str, SHAPES[i][:4]))}-k{SHAPES[i][4]}"
                           f"L{SHAPES[i][5]}s{SHAPES[i][6]}{'' if SHAPES[i][7] else '-nobias'}")
              for i, dt in [(2, F32), (3, F32), (6, F32), (1, F16), (5, BF16)]]


@pytest.mark.parametrize("shape,dt", PATH_CASES)
def test_eager_path_matches_the_custom_op(shape, dt):
    m, x, g = layer_and_inputs(shape, dt, layer_seed=20 + shape[2], input_seed=21)
    eager = run(m, x, g)
    assert_identical(run_custom_op(m, x, g), eager, "custom op vs eager")
    assert_identical(run(m, x, g), eager, "eager after the custom op")
    with torch.no_grad():                      # no autograd node: _fwd_impl directly
        assert torch.equal(m(x), eager[0])
    with torch.inference_mode():
        assert torch.equal(m(x), eager[0])
    m.zero_grad(set_to_none=True)              # an input that needs no gradient
    m(x).backward(g)
    for a, b in zip([p.grad for p in flat_params(m)], eager[2]):
        assert torch.equal(a, b)


def test_compiled_module_takes_the_custom_op():
    """Under torch.compile the module's autograd.Function is traced whole (fullgraph: the ctypes calls could
    not run on fake tensors) with lkjit::wtconv_fwd_save in its forward and lkjit::wtconv_bwd in its backward
    (dynamo's graph and the subgraphs of its higher-order ops), and AOT autograd's forward and backward graphs,
    what inductor compiles, call the two ops themselves; outputs and gradients equal the eager path's bit for
    bit."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    m = make_layer(6, 5, 2, 2, True, seed=23)
    torch.manual_seed(24)
    x = torch.randn(2, 6, 19, 22, device=DEV)
    g = torch.randn(2, 6, 10, 11, device=DEV)
    eager = run(m, x, g)
    dynamo_targets, fw_targets, bw_targets = [], [], []

    def targets(gm):  # call_function targets of a graph and of every subgraph it holds
        return [str(n.target) for sub in gm.modules() if isinstance(sub, torch.fx.GraphModule)
                for n in sub.graph.nodes if n.op == "call_function"]

    def recorder(into):
        def compiler(gm, _):
            into.extend(targets(gm))
            return make_boxed_func(gm.forward)  # runs AOT's graph eagerly
        return compiler

    def recording(gm, example_inputs):
        dynamo_targets.extend(targets(gm))
        return aot_autograd(fw_compiler=recorder(fw_targets), bw_compiler=recorder(bw_targets))(gm, example_inputs)

    for backend in (recording, "aot_eager"):
        torch._dynamo.reset()
        got = run(m, x, g, call=torch.compile(m, backend=backend, fullgraph=True))
        assert_identical(got, eager, f"torch.compile(backend={getattr(backend, '__name__', backend)!r})")
    for t in ("lkjit.wtconv_fwd_save.default", "lkjit.wtconv_bwd.default"):
        assert t in dynamo_targets, dynamo_targets
    assert "lkjit.wtconv_fwd_save.default" in fw_targets and "lkjit.wtconv_bwd.default" not in fw_targets, fw_targets
    assert "lkjit.wtconv_bwd.default" in bw_targets and "lkjit.wtconv_fwd_save.default" not in bw_targets, bw_targets
    torch._dynamo.reset()
    assert_identical(run(m, x, g), eager, "eager after compiling")


@pytest.mark.parametrize("dt", [F16, BF16])
def test_autocast(dt):
    m = make_layer(8, 5, 3, 1, True, seed=3)
    x = torch.randn(2, 8, 23, 30, device=DEV, requires_grad=True)
    g = torch.randn(2, 8, 23, 30, device=DEV).to(dt)
    with torch.autocast("cuda", dtype=dt):
        out = m(x)
    assert out.dtype == dt
    assert_eager_path(out)
    out.backward(g)
    assert x.grad.dtype == torch.float32 and all(p.grad.dtype == torch.float32 for p in m.parameters())
    r_out, r_dx, r_grads = reference(m, x.detach().to(dt), g, 1)
    atol, rtol = TOL[dt]
    assert_close(out, r_out, atol, rtol, "autocast out")
    assert_close(x.grad, r_dx, atol, rtol, "autocast dX")
    for got, want in zip([p.grad for p in flat_params(m)], r_grads):
        assert_close(got, want, GRAD_REL[dt] * (want.abs().max().item() + 1e-3), GRAD_REL[dt], "autocast grad")


def test_layouts_give_identical_results():
    m = make_layer(6, 5, 2, 1, True, seed=4)
    x = torch.randn(2, 6, 20, 18, device=DEV)
    g = torch.randn(2, 6, 20, 18, device=DEV)
    base = run(m, x, g)
    for name, xv in [("channels_last", x.to(memory_format=torch.channels_last)),
                     ("strided", torch.randn(2, 6, 20, 36, device=DEV)[..., ::2].copy_(x)),
                     ("transposed", x.transpose(2, 3).contiguous().transpose(2, 3))]:
        assert not xv.is_contiguous()
        got = run(m, xv, g)
        assert torch.equal(got[0], base[0]), name
        assert torch.equal(got[1], base[1]), name
        for a, b in zip(got[2], base[2]):
            assert torch.equal(a, b), name
    # A non-contiguous output gradient (out.sum() gives an expanded one).
    xr = x.clone().requires_grad_()
    m(xr).sum().backward()
    _, r_dx, _ = reference(m, x, torch.ones_like(g), 1)
    assert_close(xr.grad, r_dx, *TOL[F32], "dX from out.sum()")


# channels_last activations are read and written in place: a channels_last input gives a channels_last
# output and input gradient, with the same bits as the NCHW-contiguous run (the kernels do the same
# arithmetic whatever the strides) and no layout copies.
CL_CASES = [pytest.param(SHAPES[i], dt, id=f"{str(dt)[6:]}-{'x'.join(map(str, SHAPES[i][:4]))}-k{SHAPES[i][4]}"
                         f"L{SHAPES[i][5]}s{SHAPES[i][6]}")
            for i, dt in [(2, F32), (3, F32), (3, F16), (5, BF16), (7, F32), (8, F32), (9, F16), (9, BF16)]]


def copies_of(fn, shapes):
    """aten::copy_ calls on tensors of the given shapes while fn runs (layout copies of activations)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        fn()
    shapes = [list(s) for s in shapes]
    return [(e.name, e.input_shapes) for e in prof.events()
            if e.name == "aten::copy_" and any(s in shapes for s in e.input_shapes)]


def runs_lane(m, x, backward=False):
    """Whether channels_last activations shaped like x run lkjit's lane kernel in that pass (small maps at
    stride 1), which rounds differently from the kernels an NCHW x runs."""
    layer = lkjit.WTConvLayer(x.shape[1], m.kernel_size, m.wt_levels, x.dtype, m.base_conv.bias is not None,
                              m.stride, x.get_device())
    try:
        return layer.runs_lane(x.shape[0], x.shape[2], x.shape[3], backward)
    finally:
        layer.close()


@pytest.mark.parametrize("shape,dt", CL_CASES)
def test_channels_last_in_channels_last_out(shape, dt):
    stride = shape[6]
    m, x, g = layer_and_inputs(shape, dt, layer_seed=30 + shape[2], input_seed=31)
    base = run(m, x, g)
    cl = torch.channels_last
    xc, gc = x.to(memory_format=cl), g.to(memory_format=cl)
    got = check_against_reference(m, xc, gc, dt, stride, "channels_last: ")
    assert got[0].is_contiguous(memory_format=cl) and not got[0].is_contiguous(), got[0].stride()
    assert got[1].stride() == xc.stride(), (got[1].stride(), xc.stride())
    # The lane kernels (channels_last x of a small map, both passes) are checked against the reference
    # above; every other kernel is bit-identical across layouts.
    lane = runs_lane(m, xc)
    assert lane == (shape[3] <= 16 and stride == 1), shape
    assert runs_lane(m, xc, backward=True) == lane
    if not lane:
        assert_identical(got, base, "channels_last vs contiguous")
    # Mixed: a channels_last input with an NCHW output gradient (x's layout picks the kernels, which read
    # any strides: the same bits), and the reverse.
    mixed = run(m, xc, g)
    assert mixed[1].stride() == xc.stride()
    assert_identical(mixed, got, "x channels_last, grad_out contiguous")
    assert_identical(run(m, x, gc), base, "x contiguous, grad_out channels_last")

    def step():
        xr = xc.detach().requires_grad_()
        m(xr).backward(gc)
    step()  # warm: kernels compiled and loaded
    assert copies_of(step, [xc.shape, gc.shape]) == []


def test_dense_permuted_layouts_are_taken_in_place():
    """Any dense dim order (here W-major planes) is read through its strides; the output is NCHW
    contiguous and dX has the input's strides."""
    m = make_layer(6, 5, 2, 2, True, seed=32)
    torch.manual_seed(33)
    x = torch.randn(2, 6, 19, 22, device=DEV)
    g = torch.randn(2, 6, 10, 11, device=DEV)
    base = run(m, x, g)
    xt = x.transpose(2, 3).contiguous().transpose(2, 3)
    got = run(m, xt, g)
    assert got[0].is_contiguous() and got[1].stride() == xt.stride()
    assert_identical(got, base, "W-major planes vs contiguous")


def test_layout_nchw_mode_copies_to_nchw(monkeypatch):
    """LKJIT_TORCH_LAYOUT=nchw: a channels_last input is copied to NCHW and the output is NCHW contiguous,
    with the same values as the strided default."""
    m = make_layer(6, 5, 2, 1, True, seed=34)
    torch.manual_seed(35)
    # 17 columns: not a map the lane forward takes (it rounds differently from the NCHW plane kernels)
    x = torch.randn(2, 6, 13, 17, device=DEV).to(memory_format=torch.channels_last)
    g = torch.randn(2, 6, 13, 17, device=DEV).to(memory_format=torch.channels_last)
    base = run(m, x, g)
    assert base[0].is_contiguous(memory_format=torch.channels_last) and not base[0].is_contiguous()
    monkeypatch.setenv("LKJIT_TORCH_LAYOUT", "nchw")
    got = run(m, x, g)
    assert got[0].is_contiguous(), got[0].stride()
    assert_identical(got, base, "LKJIT_TORCH_LAYOUT=nchw vs strided")


def _transposes(fn):
    """(fn(), how many lkjit layout transposes it ran): counted from the profiler's CUDA kernels by name, so the
    binding and the ctypes path count alike."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        res = fn()
        torch.cuda.synchronize()
    return res, sum(e.count for e in prof.key_averages() if "wtconv_transpose" in e.key)


@pytest.mark.parametrize("shape,dt", [((2, 6, 7, 17, 5, 2, 1, True), F32), ((2, 8, 21, 19, 5, 3, 2, True), BF16),
                                      ((1, 5, 6, 17, 3, 2, 1, False), F16), ((2, 8, 6, 18, 5, 3, 1, True), BF16),
                                      ((1, 6, 10, 12, 3, 2, 2, False), F16)])
def test_layout_auto_transposes_channels_last_maps(shape, dt, monkeypatch):
    """LKJIT_TORCH_LAYOUT=auto (the default): channels_last maps of >= 100 pixels run on lkjit-transposed
    NCHW copies (x and out in the forward; dOut and dX in the backward, which reads the forward's copy of x
    through the layer (lkjit::wtconv_fwd_save) and transposes x again through lkjit::wtconv_fwd's own autograd),
    with the strided mode's bits and layouts; smaller maps are read in place, and so are lane maps (W <= 16 at
    stride 1), in both passes."""
    stride = shape[6]
    m, x, g = layer_and_inputs(shape, dt, layer_seed=40, input_seed=41)
    cl = torch.channels_last
    xc, gc = x.to(memory_format=cl), g.to(memory_format=cl)
    monkeypatch.setenv("LKJIT_TORCH_LAYOUT", "strided")
    base = run(m, xc, gc)
    monkeypatch.setenv("LKJIT_TORCH_LAYOUT", "auto")
    got, n = _transposes(lambda: check_against_reference(m, xc, gc, dt, stride, "auto layout: "))
    assert n == 4, n
    assert got[0].is_contiguous(memory_format=cl) and got[1].stride() == xc.stride()
    assert_identical(got, base, "auto (transposed) vs strided")
    xr = xc.detach().requires_grad_()
    y = m(xr)
    saved = y.grad_fn.saved_tensors[0]  # the layer's autograd keeps the forward's copy, not x
    assert saved.is_contiguous() and saved.data_ptr() != xr.data_ptr() and torch.equal(saved, xc)
    got, n = _transposes(lambda: run(m, xc, g))
    assert_identical(got, base, "x channels_last, grad_out contiguous")  # dOut needs no copy
    assert n == 3, n
    op, n = _transposes(lambda: run_custom_op(m, xc, gc))
    assert n == 5, n
    assert op[1].stride() == xc.stride()
    assert_identical(op, base, "custom op, auto (transposed) vs strided")
    small = layer_and_inputs((2, 6, 9, 7, 5, 2, 1, True), dt, layer_seed=42, input_seed=43)
    assert _transposes(lambda: run(small[0], small[1].to(memory_format=cl), small[2].to(memory_format=cl)))[1] == 0
    lane = layer_and_inputs((2, 6, 12, 14, 5, 3, 1, True), dt, layer_seed=44, input_seed=45)
    assert runs_lane(lane[0], lane[1])
    assert runs_lane(lane[0], lane[1], backward=True)
    xl, gl = lane[1].to(memory_format=cl), lane[2].to(memory_format=cl)
    assert _transposes(lambda: check_against_reference(lane[0], xl, gl, dt, 1, "lane: "))[1] == 0
    assert _transposes(lambda: run_custom_op(lane[0], xl, gl))[1] == 0


def test_layout_mode_is_checked(monkeypatch):
    m, x, _ = layer_and_inputs((1, 4, 12, 12, 5, 1, 1, True), F32, layer_seed=44, input_seed=45)
    monkeypatch.setenv("LKJIT_TORCH_LAYOUT", "sideways")
    for xv in (x.to(memory_format=torch.channels_last), x):  # checked whatever the input's layout
        with pytest.raises(ValueError, match="LKJIT_TORCH_LAYOUT='sideways' is not supported"):
            m(xv)
    monkeypatch.setenv("LKJIT_TORCH_LAYOUT", "")  # empty: the default
    assert m(x).shape == x.shape


def test_custom_op_fake_strides_match_the_kernels():
    """The fake implementations return the strides the real ops produce, for every kind of input layout
    (what torch.compile checks); opcheck compares them on real tensors."""
    opcheck = getattr(torch.library, "opcheck", None)
    if opcheck is None:
        pytest.skip("torch.library.opcheck needs PyTorch >= 2.4")
    m = make_layer(4, 5, 2, 2, True, seed=34)
    bw, bb, bs, lw, ls = params_of(m)
    torch.manual_seed(35)
    x = torch.randn(2, 4, 9, 14, device=DEV)
    g = torch.randn(2, 4, 5, 7, device=DEV)
    for name, xv, gv in [("contiguous", x, g),
                         ("channels_last", x.to(memory_format=torch.channels_last), g.to(memory_format=torch.channels_last)),
                         ("mixed", x.to(memory_format=torch.channels_last), g),
                         ("W-major", x.transpose(2, 3).contiguous().transpose(2, 3), g),
                         ("strided", torch.randn(2, 4, 9, 28, device=DEV)[..., ::2],
                          torch.randn(2, 4, 5, 1, device=DEV).expand(2, 4, 5, 7))]:
        fwd_args = (xv, bw.detach(), bb.detach(), bs.detach(), [t.detach() for t in lw], [t.detach() for t in ls],
                    m._lkjit_id, 2)
        opcheck(torch.ops.lkjit.wtconv_fwd.default, fwd_args, test_utils="test_faketensor")
        opcheck(torch.ops.lkjit.wtconv_bwd.default, (gv,) + fwd_args, test_utils="test_faketensor")
        with torch._subclasses.fake_tensor.FakeTensorMode(allow_non_fake_inputs=True) as mode:
            fg, fx = mode.from_tensor(gv), mode.from_tensor(xv)
            f_out = torch.ops.lkjit.wtconv_fwd(fx, *fwd_args[1:])
            f_dx = torch.ops.lkjit.wtconv_bwd(fg, fx, *fwd_args[1:])[0]
        out = torch.ops.lkjit.wtconv_fwd(*fwd_args)
        dx = torch.ops.lkjit.wtconv_bwd(gv, *fwd_args)[0]
        assert f_out.stride() == out.stride(), (name, f_out.stride(), out.stride())
        assert f_dx.stride() == dx.stride(), (name, f_dx.stride(), dx.stride())
    # wtconv_fwd_save's copy and the backward that reads it: channels_last maps that keep one (W > 16, or stride 2,
    # >= 100 pixels), maps that do not (lane widths, small maps, NCHW), each against its fake.
    for shape, stride, keeps in [((2, 4, 9, 17), 1, True), ((2, 4, 12, 12), 2, True), ((2, 4, 12, 14), 1, False),
                                 ((2, 4, 9, 10), 2, False), ((2, 4, 6, 17), 1, True)]:
        m2 = make_layer(4, 5, 2, stride, True, seed=36)
        p2 = [t.detach() if isinstance(t, torch.Tensor) else [u.detach() for u in t] for t in params_of(m2)]
        xc = torch.randn(*shape, device=DEV).to(memory_format=torch.channels_last)
        for xv in (xc, xc.contiguous()):
            args = (xv, *p2, m2._lkjit_id, stride)
            opcheck(torch.ops.lkjit.wtconv_fwd_save.default, args, test_utils=("test_schema", "test_faketensor"))
            out, xn = torch.ops.lkjit.wtconv_fwd_save(*args)
            want = keeps and not xv.is_contiguous()
            assert (xn.numel() > 0) == want, (shape, stride, xv.stride(), xn.shape)
            plain = torch.ops.lkjit.wtconv_fwd(*args)
            assert torch.equal(out, plain) and out.stride() == plain.stride(), (shape, out.stride(), plain.stride())
            if want:
                assert xn.is_contiguous() and torch.equal(xn, xv)
                gv = torch.randn(out.shape, device=DEV).to(memory_format=torch.channels_last)
                opcheck(torch.ops.lkjit.wtconv_bwd.default, (gv, xn, *p2, m2._lkjit_id, stride, False, True),
                        test_utils=("test_schema", "test_faketensor"))
                from_copy = torch.ops.lkjit.wtconv_bwd(gv, xn, *p2, m2._lkjit_id, stride, False, True)
                direct = torch.ops.lkjit.wtconv_bwd(gv, xv, *p2, m2._lkjit_id, stride)
                assert from_copy[0].stride() == xv.stride(), from_copy[0].stride()
                assert len(from_copy) == len(direct)
                for i, (a, b) in enumerate(zip(from_copy, direct)):  # the same kernels on the same values
                    assert torch.equal(a, b), (shape, stride, i)


def test_backward_is_deterministic():
    m = make_layer(4, 5, 3, 1, True, seed=5)
    x = torch.randn(3, 4, 300, 140, device=DEV)
    g = torch.randn_like(x)
    a, b = run(m, x, g), run(m, x, g)
    assert torch.equal(a[1], b[1])
    for p, q in zip(a[2], b[2]):
        assert torch.equal(p, q)


def test_refolds_after_parameter_changes():
    m = make_layer(4, 5, 2, 1, True, seed=6)
    x = torch.randn(2, 4, 16, 16, device=DEV)
    g = torch.randn_like(x)
    check_against_reference(m, x, g, F32, 1, "first: ")
    with torch.no_grad():                      # in-place update: version counter
        m.base_scale.weight.mul_(-2.0)
        m.wavelet_convs[1].weight.add_(0.25)
    check_against_reference(m, x, g, F32, 1, "in-place: ")
    with torch.no_grad():
        m.base_conv.bias.add_(1.0)             # the bias alone (folded as s0 * b)
    check_against_reference(m, x, g, F32, 1, "bias: ")
    m.wavelet_scale[0].weight = nn.Parameter(torch.full_like(m.wavelet_scale[0].weight, 0.7))  # a new tensor
    check_against_reference(m, x, g, F32, 1, "replaced: ")
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    run(m, x, g)
    opt.step()                                 # optimizer step
    check_against_reference(m, x, g, F32, 1, "after step: ")
    m.always_refold = True
    with torch.no_grad():
        m.base_conv.weight.data.mul_(0.5)      # bypasses the version counter
    check_against_reference(m, x, g, F32, 1, "always_refold: ")


def test_two_forwards_then_backward():
    m = make_layer(4, 5, 2, 1, True, seed=8)
    x1, x2 = torch.randn(2, 4, 12, 12, device=DEV), torch.randn(1, 4, 9, 13, device=DEV)
    a, b = x1.clone().requires_grad_(), x2.clone().requires_grad_()
    (m(a).square().sum() + m(b).sum()).backward()
    r_out1, _, _ = reference(m, x1, torch.zeros(2, 4, 12, 12, device=DEV), 1)
    _, r1, _ = reference(m, x1, 2 * r_out1, 1)
    assert_close(a.grad, r1, *TOL[F32], "dX of the first call")
    _, r2, _ = reference(m, x2, torch.ones(1, 4, 9, 13, device=DEV), 1)
    assert_close(b.grad, r2, *TOL[F32], "dX of the second call")


def test_half_parameters_and_dtype_switch():
    m = make_layer(4, 5, 2, 1, True, seed=9)
    x = torch.randn(2, 4, 15, 15, device=DEV)
    g = torch.randn_like(x)
    check_against_reference(m, x, g, F32, 1)
    check_against_reference(m, x.half(), g.half(), F16, 1)   # same module, second lkjit layer
    assert m.lkjit_workspace_bytes() > 0
    mh = copy.deepcopy(m).half()
    out = mh(x.half())
    out.backward(g.half())
    assert out.dtype == F16 and mh.base_conv.weight.grad.dtype == F16
    r_out, _, _ = reference(mh, x.half(), g.half(), 1)
    assert_close(out, r_out, *TOL[F16], "fp16-parameter module")


def test_side_stream():
    m = make_layer(4, 5, 3, 1, True, seed=10)
    x = torch.randn(2, 4, 64, 64, device=DEV)
    want = m(x).detach()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        xs = x * 1.0
        got = m(xs)
    torch.cuda.current_stream().wait_stream(s)
    assert torch.equal(got, want)


def test_empty_batch():
    m = make_layer(4, 5, 2, 1, True)
    x = torch.randn(0, 4, 8, 8, device=DEV, requires_grad=True)
    out = m(x)
    assert out.shape == (0, 4, 8, 8)
    out.sum().backward()
    assert x.grad.shape == x.shape and float(m.base_conv.weight.grad.abs().sum()) == 0.0


def test_errors_name_the_value():
    m = make_layer(4, 5, 2, 1, True)
    with pytest.raises(ValueError, match="C=3"):
        m(torch.randn(1, 3, 8, 8, device=DEV))
    with pytest.raises(ValueError, match="cpu"):
        m(torch.randn(1, 4, 8, 8))
    with pytest.raises(TypeError, match="float64"):
        m(torch.randn(1, 4, 8, 8, device=DEV, dtype=torch.float64))
    with pytest.raises(ValueError, match="4-D"):
        m(torch.randn(4, 8, 8, device=DEV))


def test_state_dicts_round_trip_through_the_reference():
    m = make_layer(6, 5, 3, 1, True, seed=11)
    x = torch.randn(2, 6, 21, 19, device=DEV)
    ref = ReferenceWTConv2d(6, 5, 1, True, 3).to(DEV)
    ref.load_state_dict(m.state_dict())                     # our keys are the reference's
    assert_close(m(x), ref(x), *TOL[F32], "WTConv2d vs reference module")
    sd = {k: v.clone() for k, v in ref.state_dict().items()}
    sd["wt_filter"] = haar_filters(6, torch.float32, DEV)
    sd["iwt_filter"] = haar_filters(6, torch.float32, DEV)
    m2 = WTConv2d(6, 6, 5, wt_levels=3).to(DEV)
    m2.load_state_dict(sd)                                  # filters accepted and ignored
    assert torch.equal(m2(x), m(x))
    fused = {"base_weight": sd["base_conv.weight"], "base_bias": sd["base_conv.bias"],
             "base_scale": sd["base_scale.weight"]}
    for i in range(3):
        fused[f"wt_weights.{i}"] = sd[f"wavelet_convs.{i}.weight"]
        fused[f"wt_scales.{i}"] = sd[f"wavelet_scale.{i}.weight"]
    m3 = WTConv2d(6, 6, 5, wt_levels=3).to(DEV)
    m3.load_state_dict(fused)                               # the official fused module's names
    assert torch.equal(m3(x), m(x))


def test_torch_compile():
    torch._dynamo.reset()
    torch.manual_seed(12)
    model = nn.Sequential(nn.Conv2d(3, 8, 1), WTConv2d(8, 8, 5, wt_levels=2), nn.GELU(), nn.Conv2d(8, 4, 1)).to(DEV)
    x = torch.randn(2, 3, 24, 20, device=DEV)
    want = model(x)
    want.square().mean().backward()
    want_grads = [p.grad.clone() for p in model.parameters()]
    for backend, fullgraph in [("aot_eager", True), ("inductor", False)]:
        model.zero_grad(set_to_none=True)
        compiled = torch.compile(model, backend=backend, fullgraph=fullgraph)
        got = compiled(x)
        got.square().mean().backward()
        assert_close(got, want, 1e-4, 1e-4, f"{backend} out")
        for a, b in zip([p.grad for p in model.parameters()], want_grads):
            assert_close(a, b, 1e-4 * (b.abs().max().item() + 1e-3), 1e-3, f"{backend} grad")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            assert compiled(x).dtype == torch.bfloat16


def test_torch_compile_channels_last():
    """A channels_last network (the timm ConvNeXt case): compiled, the op takes the channels_last
    activations as they are and gives the eager results."""
    torch._dynamo.reset()
    torch.manual_seed(14)
    cl = torch.channels_last
    model = nn.Sequential(nn.Conv2d(3, 8, 1), WTConv2d(8, 8, 5, wt_levels=2), nn.GELU(), WTConv2d(8, 8, 3, stride=2),
                          nn.Conv2d(8, 4, 1)).to(DEV).to(memory_format=cl)
    x = torch.randn(2, 3, 24, 20, device=DEV).to(memory_format=cl)
    xw = x.detach().requires_grad_()
    want = model(xw)
    assert want.is_contiguous(memory_format=cl)
    want.square().mean().backward()
    want_grads = [p.grad.clone() for p in model.parameters()]
    x_grad = xw.grad
    for backend, fullgraph in [("aot_eager", True), ("inductor", False)]:
        model.zero_grad(set_to_none=True)
        compiled = torch.compile(model, backend=backend, fullgraph=fullgraph)
        xr = x.detach().requires_grad_()
        got = compiled(xr)
        got.square().mean().backward()
        assert_close(got, want, 1e-4, 1e-4, f"{backend} out")
        assert_close(xr.grad, x_grad, 1e-4, 1e-3, f"{backend} input grad")
        for a, b in zip([p.grad for p in model.parameters()], want_grads):
            assert_close(a, b, 1e-4 * (b.abs().max().item() + 1e-3), 1e-3, f"{backend} grad")
    torch._dynamo.reset()


def test_cuda_graph_compile_sees_parameter_updates():
    """mode="reduce-overhead": the ops run inside the CUDA graphs, and each replay refolds the weights it
    captured the fold of, so the compiled model follows the optimizer's updates."""
    torch._dynamo.reset()
    torch.manual_seed(13)
    model = nn.Sequential(nn.Conv2d(3, 8, 1), WTConv2d(8, 8, 5, wt_levels=2)).to(DEV)
    compiled = torch.compile(model, mode="reduce-overhead")
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    x = torch.randn(2, 3, 16, 16, device=DEV)
    for i in range(4):
        out = compiled(x)
        with torch.no_grad():
            want = model(x)
        assert_close(out, want, 1e-4, 1e-4, f"step {i}: reduce-overhead out")
        out.square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def test_cuda_graph_of_a_training_step_follows_the_updates():
    """A whole training step (forward, backward, SGD) captured with torch.cuda.graph: every replay folds the
    parameters the previous replay updated (the captured optimizer step changes them without the version
    counters the eager path watches), and so does every eager call between replays. Both match the same
    steps run eagerly on a copy."""
    torch.manual_seed(21)
    model = nn.Sequential(nn.Conv2d(3, 8, 1), WTConv2d(8, 8, 5, wt_levels=2), nn.GELU(), nn.Conv2d(8, 4, 1)).to(DEV)
    twin = copy.deepcopy(model)
    x = torch.randn(2, 3, 24, 20, device=DEV)

    def stepper(m):
        opt = torch.optim.SGD(m.parameters(), lr=0.5)

        def step():
            opt.zero_grad(set_to_none=False)  # a graph keeps its gradient buffers
            loss = m(x).square().mean()
            loss.backward()
            opt.step()
            return loss
        return step

    step, twin_step = stepper(model), stepper(twin)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up: compiles and allocates outside the capture
        for _ in range(2):
            step()
        with torch.no_grad():
            model(x)  # folds the current parameters: the capture sees nothing changed
    torch.cuda.current_stream().wait_stream(side)
    for _ in range(2):
        twin_step()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss = step()
    for i in range(3):
        graph.replay()
        want = twin_step()
        assert_close(loss, want, 1e-6, 1e-5, f"replay {i}: loss")
        with torch.no_grad():
            assert_close(model(x), twin(x), 1e-6, 1e-5, f"eager call after replay {i}")
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        assert_close(p, q, 1e-6, 1e-5, f"after 3 replays: {name}")


def capture_layer(m, x):
    """Captures m(x) in a CUDA graph after an eager warm-up (compiles and allocations stay outside the capture),
    so m's lkjit layer is captured from then on. Returns the graph (keep it alive) and the arguments of m's
    custom-op calls on x: (x, base_w, base_b, base_s, level_w, level_s, layer id, stride 1)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        with torch.no_grad():
            m(x)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        m(x)
    bw, bb, bs, lw, ls = params_of(m)
    return graph, (x, bw.detach(), bb.detach(), bs.detach(), [t.detach() for t in lw], [t.detach() for t in ls],
                   m._lkjit_id, 1)


def test_captured_layer_backward_reuses_the_forward_fold_only_when_told():
    """Once a layer has been captured every call folds first, except a backward told that its parameters are
    the forward's (wtconv_fwd's registered backward and the eager path tell it: autograd refuses in-place
    changes of saved tensors). Parameters changed through .data (no version bump, so Python does not refold)
    show which fold each backward read: with reuse_fold its dX is the old values' (the fold was skipped), and a
    direct wtconv_bwd call (reuse_fold=False) folds the new values first."""
    m = make_layer(4, 5, 2, 1, True, seed=41)
    twin = copy.deepcopy(m)
    torch.manual_seed(42)
    x = torch.randn(2, 4, 12, 10, device=DEV)
    g = torch.randn_like(x)
    graph, args = capture_layer(m, x)
    torch.ops.lkjit.wtconv_fwd(*args)  # folds the current values
    _, old_dx, _ = run(twin, x, g)
    with torch.no_grad():
        for p, q in zip(m.parameters(), twin.parameters()):
            p.data.mul_(1.5)  # hidden from m's Python side: no version bump
            q.mul_(1.5)  # the twin (never captured) refolds on the version bump
    _, new_dx, new_grads = run(twin, x, g)
    assert (new_dx - old_dx).abs().max().item() > 1e-2, "the change must show in dX"
    reused = torch.ops.lkjit.wtconv_bwd(g, *args, True)
    assert_close(reused[0], old_dx, 1e-5, 1e-4, "reuse_fold: dX of the forward's fold")
    folded = torch.ops.lkjit.wtconv_bwd(g, *args)
    assert_close(folded[0], new_dx, 1e-5, 1e-4, "no reuse_fold: dX of the new values")
    # folded's order: dX, base_w, base_s, level_w..., level_s..., base_b; new_grads: flat_params' order (the same)
    for i, (a, b) in enumerate(zip(folded[1:], new_grads)):
        assert_close(a, b, 1e-4 * (b.abs().max().item() + 1e-3), 1e-3, f"no reuse_fold: gradient {i}")
    del graph


@pytest.mark.parametrize("path", ["lane", "plane"])
def test_captured_layer_main_kernels_read_the_fold_of_the_new_values(path):
    """A captured layer folds before every call, and the kernel after the fold may start before the fold ends
    (programmatic dependent launch, sm_90+): it must still read the new fold. Parameters changed behind Python's
    back (.data: no version bump) before each of four rounds of forward and backward calls (reuse_fold=False:
    both fold first) give a never-captured twin's outputs and gradients. channels_last 14x14 runs the lane
    kernels, NCHW 40x36 the plane kernels, both busy enough (8x64 planes) to still run when the fold ends."""
    C = 64
    m = make_layer(C, 5, 3, 1, True, seed=51)
    twin = copy.deepcopy(m)
    torch.manual_seed(52)
    if path == "lane":
        x = torch.randn(8, C, 14, 14, device=DEV).contiguous(memory_format=torch.channels_last)
        assert runs_lane(m, x) and runs_lane(m, x, backward=True)
    else:
        x = torch.randn(8, C, 40, 36, device=DEV)
        layer = lkjit.WTConvLayer(C, 5, 3, "f32", True, 1, x.get_device())
        for bwd, kernel in ((False, "wtconv_fwd_plane"), (True, "wtconv_bwd_plane")):  # not the tiled path
            assert kernel in layer.describe(8, 40, 36, bwd), layer.describe(8, 40, 36, bwd)
        layer.close()
    g = torch.randn_like(x)
    graph, args = capture_layer(m, x)
    for i, f in enumerate([1.5, -0.75, 1.25, -1.1]):
        with torch.no_grad():
            for p, q in zip(m.parameters(), twin.parameters()):
                p.data.mul_(f)  # hidden from m's Python side
                q.mul_(f)
        want_out, want_dx, want_grads = run(twin, x, g)
        out = torch.ops.lkjit.wtconv_fwd(*args)
        assert_close(out, want_out, 1e-5, 1e-4, f"round {i}: out")
        got = torch.ops.lkjit.wtconv_bwd(g, *args)
        assert_close(got[0], want_dx, 1e-5, 1e-4, f"round {i}: dX")
        for j, (a, b) in enumerate(zip(got[1:], want_grads)):
            assert_close(a, b, 1e-4 * (b.abs().max().item() + 1e-3), 1e-3, f"round {i}: gradient {j}")
    del graph


def test_cuda_graph_keeps_scratch_a_larger_shape_outgrew():
    """A captured forward + backward (whose partial gradients live in the layer's scratch) still replays
    correctly after an eager call of a larger shape made the layer grow its scratch: the graph's buffer
    stays allocated."""
    m = make_layer(6, 5, 3, 1, True, seed=22)
    torch.manual_seed(24)
    x = torch.randn(1, 6, 40, 40, device=DEV, requires_grad=True)
    g = torch.randn(1, 6, 40, 40, device=DEV)
    params = list(m.parameters())
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        m(x).backward(g)
    torch.cuda.current_stream().wait_stream(side)
    want = [x.grad.clone()] + [p.grad.clone() for p in params]
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for t in [x] + params:
            t.grad.zero_()
        m(x).backward(g)
    big = torch.randn(2, 6, 300, 300, device=DEV, requires_grad=True)
    m(big).backward(torch.randn_like(big))  # the tiled path: a much larger scratch
    graph.replay()
    torch.cuda.synchronize()
    for i, (got, w) in enumerate(zip([x.grad] + [p.grad for p in params], want)):
        assert torch.equal(got, w), f"gradient {i} after the scratch grew"


def test_first_call_of_a_shape_under_capture_is_refused():
    """Compiling and allocating are not capturable: a layer's first call, or the first call of a new shape,
    inside a capture is a clear error (warm up first), and the layer works afterwards."""
    m = make_layer(4, 5, 2, 1, True, seed=23)
    x = torch.randn(1, 4, 9, 11, device=DEV)
    with pytest.raises(lkjit.SpecError, match="set_weights runs under CUDA graph capture.*run it once before capturing"):
        with torch.no_grad(), torch.cuda.graph(torch.cuda.CUDAGraph()):
            m(x)
    torch.cuda.synchronize()
    with torch.no_grad():
        m(x)
    torch.cuda.synchronize()
    with pytest.raises(lkjit.SpecError, match="the first forward of B=1 H=13 W=11 runs under CUDA graph capture"):
        with torch.no_grad(), torch.cuda.graph(torch.cuda.CUDAGraph()):
            m(torch.randn(1, 4, 13, 11, device=DEV))
    torch.cuda.synchronize()
    got = m(x)
    want = reference(m, x, torch.ones_like(got), 1)[0]
    assert_close(got, want.to(got.dtype), *TOL[F32], "eager call after the refused captures")


def packed_twin(m):
    """A packed_params=True copy of m (same values)."""
    pk = WTConv2d(m.in_channels, m.in_channels, m.kernel_size, stride=m.stride, bias=m.base_conv.bias is not None,
                  wt_levels=m.wt_levels, packed_params=True).to(DEV)
    pk.load_state_dict(m.state_dict())
    return pk


def run_packed(m, x, g):
    """run() for a packed module: its gradients as views of packed.grad, in the flat list's order."""
    x = x.detach().requires_grad_()
    m.zero_grad(set_to_none=True)
    out = m(x)
    assert type(out.grad_fn).__name__ == "_WTConvPackedFunctionBackward", f"grad_fn {out.grad_fn!r}"
    out.backward(g)
    grads = [m.packed.grad.narrow(0, off, math.prod(shape)).view(shape) for _, shape, off in m._packed_layout]
    return out, x.grad, grads


@pytest.mark.parametrize("shape,dt", [pytest.param(SHAPES[i], dt, id=f"{str(dt)[6:]}-{i}")
                                      for i in (1, 2, 3, 5) for dt in (F32, BF16)])
@pytest.mark.parametrize("cl", [False, True], ids=["nchw", "channels_last"])
def test_packed_params_match_the_default_module(shape, dt, cl):
    """packed_params=True runs the same kernels on the same values: bit-identical output and gradients, for
    both layouts (lane, transposed and plane paths), and against the float64 reference."""
    m, x, g = layer_and_inputs(shape, dt, layer_seed=31, input_seed=32)
    if cl:
        x, g = x.to(memory_format=torch.channels_last), g.to(memory_format=torch.channels_last)
    pk = packed_twin(m)
    got = run_packed(pk, x, g)
    assert_identical(got, run(m, x, g), "packed vs default")
    r_out, r_dx, r_grads = reference(m, x, g, shape[6])
    assert_close(got[0], r_out, *TOL[dt], "packed out")
    assert_close(got[1], r_dx, *TOL[dt], "packed dX")
    for i, (a, b) in enumerate(zip(got[2], r_grads)):
        assert_close(a, b, GRAD_REL[dt] * (b.abs().max().item() + 1e-3), GRAD_REL[dt], f"packed grad {i}")


def test_packed_params_follow_optimizer_steps():
    """SGD on packed: each step refolds (the views share packed's version counter), and the module tracks
    the default module stepped the same way."""
    m, x, g = layer_and_inputs((2, 6, 12, 10, 5, 2, 1, True), F32, layer_seed=33, input_seed=34)
    pk = packed_twin(m)
    opt_m, opt_p = torch.optim.SGD(m.parameters(), lr=0.3), torch.optim.SGD(pk.parameters(), lr=0.3)
    for i in range(3):
        for mod, opt in ((m, opt_m), (pk, opt_p)):
            opt.zero_grad(set_to_none=True)
            mod(x).backward(g)
            opt.step()
        with torch.no_grad():
            assert torch.equal(pk(x), m(x)), f"step {i}"


def test_packed_params_compile():
    """torch.compile of a packed module takes the custom op on views of packed: same output and gradient."""
    torch._dynamo.reset()
    torch.manual_seed(35)
    model = nn.Sequential(nn.Conv2d(3, 8, 1), WTConv2d(8, 8, 5, wt_levels=2, packed_params=True)).to(DEV)
    x = torch.randn(2, 3, 20, 18, device=DEV)
    want = model(x)
    want.square().mean().backward()
    want_grad = model[1].packed.grad.clone()
    model.zero_grad(set_to_none=True)
    got = torch.compile(model, backend="aot_eager", fullgraph=True)(x)
    got.square().mean().backward()
    assert_close(got, want, 1e-5, 1e-5, "compiled out")
    assert_close(model[1].packed.grad, want_grad, 1e-5 * (want_grad.abs().max().item() + 1e-3), 1e-4, "compiled grad")
    torch._dynamo.reset()


# ---- the C++ binding (python/csrc/) ----

def test_binding_serves_the_ops_when_built():
    """With _lkjit_torch.so built, lkjit.torch uses it (LKJIT_TORCH_BINDING=auto) for both WTConv ops."""
    from lkjit import _torch_ops
    if not _torch_ops.BINDING.loaded:
        pytest.skip(f"binding not loaded: {_torch_ops.BINDING.reason}")
    assert {"lkjit::wtconv_fwd", "lkjit::wtconv_fwd_save", "lkjit::wtconv_bwd"} <= _torch_ops.BINDING.ops


def test_binding_cuda_graph_capture_and_autocast():
    """The binding's kernels allocate through torch (graph-safe) and follow the current stream: a captured
    forward+backward replays to the eager result; under autocast the output is bf16 from fp32 parameters."""
    m = make_layer(8, 5, 2, 1, True, seed=61)
    torch.manual_seed(62)
    x = torch.randn(4, 8, 14, 14, device=DEV, requires_grad=True)
    g = torch.randn(4, 8, 14, 14, device=DEV)
    out = m(x)
    out.backward(g)
    # Only the values: a live graph keeps its AccumulateGrad nodes, which remember the default stream they
    # were made on, and the captured backward would then sync the legacy stream with the capturing one.
    want, want_dx = out.detach(), x.grad.clone()
    del out
    x.grad = None
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            m(x).backward(g)
            x.grad = None
    torch.cuda.current_stream().wait_stream(s)
    m.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = m(x)
        out.backward(g)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, want) and torch.equal(x.grad, want_dx)
    with torch.autocast("cuda", dtype=BF16):
        y = m(x.detach())
    assert y.dtype == BF16 and m.base_conv.weight.dtype == F32


def test_binding_host_time_per_layer():
    """Host time of an eager forward+backward of a 64x384x14x14 bf16 layer (reported, not asserted: speed is
    shown by bench/bench_torch_host.py); the binding must run it."""
    import time
    from lkjit import _torch_ops
    if not _torch_ops.BINDING.loaded:
        pytest.skip(f"binding not loaded: {_torch_ops.BINDING.reason}")
    m = make_layer(384, 5, 3, 1, True, seed=63)
    x = torch.randn(64, 384, 14, 14, device=DEV).to(BF16).requires_grad_()
    g = torch.randn(64, 384, 14, 14, device=DEV).to(BF16)
    assert_eager_path(m(x))
    for _ in range(5):
        m(x).backward(g)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(50):
        m(x).backward(g)
    host_us = (time.perf_counter() - t0) / 50 * 1e6
    torch.cuda.synchronize()
    print(f"host time per forward+backward: {host_us:.1f} us")
