"""CPU tests of lkjit's PyTorch layer (no GPU): the ops' schema, fake implementations and AOT dispatch
(torch.library.opcheck through the test-only CPU kernel, cpu_kernel.py), torch.compile(fullgraph=True,
backend="aot_eager") of a small model, FakeTensorMode at WTConvNeXt-T shapes (no recompile per batch size with
dynamic=True), CPU tensors computed by PyTorch ops against the float64 reference, the C++ binding forced on and
off giving the same results and errors, and the binding's stable-ABI compliance (its undefined symbols)."""
import os
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
import lkjit  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_SRC = os.path.dirname(HERE)


def _lib_or_skip():
    try:
        return lkjit.library_path()
    except lkjit.LibraryNotFoundError as e:
        pytest.skip(f"liblkjit.so not built: {e}")


@pytest.fixture(scope="module")
def wt():
    _lib_or_skip()
    from lkjit import wtconv
    import cpu_kernel
    cpu_kernel.register()
    return wtconv


def _layer(C=4, k=5, L=2, stride=1, bias=True, seed=0):
    from lkjit.torch import WTConv2d
    torch.manual_seed(seed)
    m = WTConv2d(C, C, k, stride=stride, bias=bias, wt_levels=L)
    with torch.no_grad():
        m.base_scale.weight.uniform_(0.5, 1.5)
        for s in m.wavelet_scale:
            s.weight.uniform_(-0.5, 0.5)
    return m


def _op_args(m, x):
    from wtconv_reference import params_of
    bw, bb, bs, lw, ls = params_of(m)
    return (x, bw.detach(), None if bb is None else bb.detach(), bs.detach(), [t.detach() for t in lw],
            [t.detach() for t in ls], m._lkjit_id, m.stride)


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("stride,bias", [(1, True), (2, False)])
def test_opcheck(wt, layout, stride, bias):
    """Schema, fake tensor, AOT dispatch (dynamic too) of both ops on CPU tensors through the test-only CPU kernel,
    and wtconv_fwd's autograd registration (on inputs that require grad). wtconv_bwd has none (no double
    backward)."""
    m = _layer(4, 5, 2, stride, bias, seed=1)
    torch.manual_seed(2)
    x = torch.randn(2, 4, 9, 14)
    if layout == "channels_last":
        x = x.to(memory_format=torch.channels_last)
    args = _op_args(m, x)
    g = torch.randn(2, 4, -(-9 // stride), -(-14 // stride))
    utils = ("test_schema", "test_faketensor", "test_aot_dispatch_static", "test_aot_dispatch_dynamic")
    torch.library.opcheck(torch.ops.lkjit.wtconv_fwd.default, args, test_utils=utils)
    torch.library.opcheck(torch.ops.lkjit.wtconv_fwd_save.default, args, test_utils=utils)
    torch.library.opcheck(torch.ops.lkjit.wtconv_bwd.default, (g,) + args, test_utils=utils)
    # The backward of the layer's kept NCHW copy: dX channels_last.
    gc = g.to(memory_format=torch.channels_last)
    nchw_args = (gc, args[0].contiguous()) + args[1:] + (False, True)
    torch.library.opcheck(torch.ops.lkjit.wtconv_bwd.default, nchw_args, test_utils=utils)
    assert torch.ops.lkjit.wtconv_bwd(*nchw_args)[0].is_contiguous(memory_format=torch.channels_last)
    grad_args = (args[0].detach().requires_grad_(), *[
        None if a is None else [t.detach().requires_grad_() for t in a] if isinstance(a, list) else
        a.detach().requires_grad_() for a in args[1:6]], *args[6:])
    torch.library.opcheck(torch.ops.lkjit.wtconv_fwd.default, grad_args, test_utils=("test_autograd_registration",))


def test_direct_op_call_is_differentiable(wt):
    """torch.ops.lkjit.wtconv_fwd called directly (not through WTConv2d) has its own autograd, which runs
    lkjit::wtconv_bwd: dX and every parameter gradient (bias too) equal the layer's autograd.Function path bit
    for bit (the same kernels), with no warning from torch's autograd fallback."""
    import warnings
    from wtconv_reference import params_of
    for stride, bias in [(1, True), (2, False)]:
        m = _layer(4, 5, 2, stride, bias, seed=11)
        torch.manual_seed(12)
        x = torch.randn(2, 4, 9, 14)
        g = torch.randn(2, 4, -(-9 // stride), -(-14 // stride))
        results = []
        for direct in (True, False):
            xr = x.clone().requires_grad_()
            m.zero_grad(set_to_none=True)
            bw, bb, bs, lw, ls = params_of(m)
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # the fallback's "autograd kernel was not registered" fails
                if direct:
                    out = torch.ops.lkjit.wtconv_fwd(xr, bw, bb, bs, lw, ls, m._lkjit_id, stride)
                    assert type(out.grad_fn).__name__ != "_WTConvFunctionBackward", out.grad_fn
                else:
                    out = wt._WTConvFunction.apply(m._lkjit_id, stride, 2, xr, *m._flat_params())[0]
                    assert type(out.grad_fn).__name__ == "_WTConvFunctionBackward", out.grad_fn
                out.backward(g)
            grads = [xr.grad, bw.grad, bs.grad, *[t.grad for t in lw], *[t.grad for t in ls]] + \
                ([bb.grad] if bias else [])
            assert all(t is not None for t in grads), [t is None for t in grads]
            results.append((out.detach(), grads))
        (o1, g1), (o2, g2) = results
        assert torch.equal(o1, o2)
        for i, (a, b) in enumerate(zip(g1, g2)):
            assert torch.equal(a, b), f"gradient {i} (0: dX)"


def test_cpu_input_to_a_module_elsewhere_names_both_devices():
    """A CPU input to a module whose parameters are on another device (meta here; cuda on a GPU machine) gets
    the library's message naming both devices, not an error from inside the PyTorch implementation."""
    _lib_or_skip()
    m = _layer(4, 5, 2, 1, True, seed=13).to("meta")
    with pytest.raises(ValueError, match=r"parameters are on 'meta' but the input is on 'cpu'; move the module"):
        m(torch.randn(1, 4, 8, 8))


def test_cpu_tensors_run_the_pytorch_implementation():
    """WTConv2d on CPU tensors (no custom op): output, dX and every parameter gradient against the float64
    reference (wtconv_reference.py), fp32 and bf16, NCHW and channels_last (layout kept)."""
    _lib_or_skip()
    from wtconv_reference import params_of, wtconv2d_reference
    for dt, cl, tol in [(torch.float32, False, 1e-4), (torch.float32, True, 1e-4), (torch.bfloat16, False, 3e-2)]:
        m = _layer(6, 5, 3, 2, True, seed=3)
        torch.manual_seed(4)
        x = torch.randn(2, 6, 17, 13).to(dt)
        if cl:
            x = x.to(memory_format=torch.channels_last)
        x.requires_grad_()
        out = m(x)
        assert out.dtype == dt and out.shape == (2, 6, 9, 7)
        assert out.is_contiguous(memory_format=torch.channels_last) == cl
        g = torch.randn(out.shape).to(dt)
        out.backward(g)
        bw, bb, bs, lw, ls = [p.detach().double().requires_grad_() if isinstance(p, torch.Tensor) else
                              [q.detach().double().requires_grad_() for q in p] for p in params_of(m)]
        xd = x.detach().double().requires_grad_()
        ref = wtconv2d_reference(xd, bw, bb, bs, lw, ls, 2)
        ref.backward(g.double())
        assert float((out.double() - ref).abs().max()) <= tol * (1 + float(ref.abs().max()))
        assert float((x.grad.double() - xd.grad).abs().max()) <= tol * (1 + float(xd.grad.abs().max()))
        got = [p.grad for p in (m.base_conv.weight, m.base_conv.bias, m.base_scale.weight)]
        for a, b in zip(got + [q.weight.grad for q in m.wavelet_convs], [bw, bb, bs] + lw):
            assert float((a.double() - b.grad).abs().max()) <= 1e-3 * (1 + float(b.grad.abs().max()))


def test_compile_fullgraph_aot_eager(wt):
    """A small model compiles whole (fullgraph) with aot_eager: on CUDA-less CPU tensors it traces the PyTorch
    implementation; through the ops (the autograd.Function path, which CUDA inputs take) with the test-only CPU
    kernel, forward and backward equal eager's."""
    m = torch.nn.Sequential(torch.nn.Conv2d(4, 4, 1), _layer(4, 5, 2, 1, True, seed=5), torch.nn.GELU())
    torch.manual_seed(6)
    x = torch.randn(2, 4, 12, 10, requires_grad=True)
    eager = m(x)
    eager.sum().backward()
    want = [x.grad.clone()] + [p.grad.clone() for p in m.parameters()]
    x.grad = None
    m.zero_grad(set_to_none=True)
    torch._dynamo.reset()
    got = torch.compile(m, fullgraph=True, backend="aot_eager")(x)
    got.sum().backward()
    assert torch.allclose(got, eager, atol=1e-5)
    for a, b in zip([x.grad] + [p.grad for p in m.parameters()], want):
        assert torch.allclose(a, b, atol=1e-5)
    # The op path, as CUDA inputs take it: the autograd.Function around lkjit::wtconv_fwd_save / _bwd.
    layer = m[1]
    params = layer._flat_params()
    fn = wt._WTConvFunction

    def f(x):
        return fn.apply(layer._lkjit_id, layer.stride, layer.wt_levels, x, *params)[0].square().sum()
    torch._dynamo.reset()
    seen = []

    def record(g, _):  # the AOT forward and backward graphs: the ops themselves
        seen.extend(str(n.target) for n in g.graph.nodes if n.op == "call_function")
        return g

    def backend(gm, example_inputs):
        from torch._dynamo.backends.common import aot_autograd
        return aot_autograd(fw_compiler=record, bw_compiler=record)(gm, example_inputs)
    xc = torch.randn(2, 4, 12, 10, requires_grad=True)
    out = torch.compile(f, fullgraph=True, backend=backend)(xc)
    out.backward()
    xe = xc.detach().clone().requires_grad_()
    f(xe).backward()
    assert torch.allclose(xc.grad, xe.grad, atol=1e-5)
    assert "lkjit.wtconv_fwd_save.default" in seen and "lkjit.wtconv_bwd.default" in seen, seen


WTCONVNEXT_T = [(96, 56, 5), (192, 28, 4), (384, 14, 3), (768, 7, 2)]  # C, H=W, L at a 224x224 input


@pytest.mark.parametrize("B", [64, 1])
def test_fake_tensor_mode_at_wtconvnext_t_shapes(wt, B):
    """The ops' fake implementations at the four WTConvNeXt-T layers (fake CUDA tensors, no GPU): output and
    dX shapes and strides as the kernels produce them, NCHW and channels_last."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode(allow_non_fake_inputs=False):
        for C, HW, L in WTCONVNEXT_T:
            for cl in (False, True):
                x = torch.empty(B, C, HW, HW, device="meta")
                if cl:
                    x = x.to(memory_format=torch.channels_last)
                bw, bs = torch.empty(C, 1, 5, 5, device="meta"), torch.empty(1, C, 1, 1, device="meta")
                lw = [torch.empty(4 * C, 1, 5, 5, device="meta") for _ in range(L)]
                ls = [torch.empty(1, 4 * C, 1, 1, device="meta") for _ in range(L)]
                bb = torch.empty(C, device="meta")
                out = torch.ops.lkjit.wtconv_fwd(x, bw, bb, bs, lw, ls, 1, 1)
                assert out.shape == x.shape and out.stride() == x.stride(), (C, cl, out.stride())
                g = torch.ops.lkjit.wtconv_bwd(out, x, bw, bb, bs, lw, ls, 1, 1, True)
                assert len(g) == 4 + 2 * L and g[0].stride() == x.stride() and g[1].shape == bw.shape


@pytest.mark.parametrize("B", [64, 1])
def test_fake_forward_keeps_the_nchw_copy_where_the_kernels_make_one(wt, B):
    """lkjit::wtconv_fwd_save's fake on fake CUDA tensors (no GPU) at the WTConvNeXt-T layers: channels_last 56x56
    and 28x28 maps keep the forward's NCHW copy for the backward, the lane maps (14x14, 7x7) and NCHW inputs do
    not, a strided 14x14 map does; the backward of a kept copy gives a channels_last dX; a copy that is not NCHW
    contiguous is refused, naming the strides."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode(allow_non_fake_inputs=False):
        for C, HW, L in WTCONVNEXT_T:
            for cl, stride in ((False, 1), (True, 1), (True, 2)):
                x = torch.empty(B, C, HW, HW, device="cuda", dtype=torch.bfloat16)
                if cl:
                    x = x.to(memory_format=torch.channels_last)
                bw, bs = torch.empty(C, 1, 5, 5, device="cuda"), torch.empty(1, C, 1, 1, device="cuda")
                lw = [torch.empty(4 * C, 1, 5, 5, device="cuda") for _ in range(L)]
                ls = [torch.empty(1, 4 * C, 1, 1, device="cuda") for _ in range(L)]
                out, xn = torch.ops.lkjit.wtconv_fwd_save(x, bw, None, bs, lw, ls, 1, stride)
                keeps = cl and (HW > 16 or stride == 2) and HW * HW >= 100
                assert (tuple(xn.shape) == tuple(x.shape) and xn.is_contiguous()) if keeps else xn.numel() == 0, \
                    (C, HW, cl, stride, xn.shape)
                assert out.is_contiguous(memory_format=torch.channels_last) == cl
                if keeps:
                    g = torch.ops.lkjit.wtconv_bwd(out, xn, bw, None, bs, lw, ls, 1, stride, True, True)
                    assert g[0].shape == x.shape and g[0].stride() == x.stride(), g[0].stride()
        x = torch.empty(2, 4, 20, 20, device="cuda").to(memory_format=torch.channels_last)
        w = (torch.empty(4, 1, 5, 5, device="cuda"), None, torch.empty(1, 4, 1, 1, device="cuda"), [], [], 1, 1)
        with pytest.raises(ValueError, match=r"x_is_nchw_copy=True with an x that is not NCHW contiguous \(strides "
                                             r"\(1600, 1, 80, 4\)\)"):
            torch.ops.lkjit.wtconv_bwd(x, x, *w, False, True)


def test_compile_dynamic_does_not_recompile_per_batch(wt):
    """torch.compile(dynamic=True) through the ops: one graph for batches 2, 3 and 5."""
    m = _layer(4, 5, 2, 1, True, seed=7)
    params = m._flat_params()
    fn = wt._WTConvFunction
    frames = []

    def backend(gm, example_inputs):
        frames.append(gm)
        return gm.forward

    f = torch.compile(lambda x: fn.apply(m._lkjit_id, 1, 2, x, *params)[0], dynamic=True, fullgraph=True, backend=backend)
    torch._dynamo.reset()
    for B in (2, 3, 5):
        assert f(torch.randn(B, 4, 10, 9)).shape == (B, 4, 10, 9)
    assert len(frames) == 1, len(frames)


_ERROR_CASES = r'''
import json, torch
from lkjit import _torch_ops as ops
from lkjit.torch import WTConv2d
out = {"binding": ops.BINDING.loaded}
x = torch.randn(2, 4, 8, 8)
p = [torch.randn(4, 1, 5, 5), torch.randn(1, 4, 1, 1), torch.randn(16, 1, 5, 5), torch.randn(1, 16, 1, 1)]
ks = torch._C.DispatchKeySet(torch._C.DispatchKey.CUDA)  # the CUDA kernel itself, on CPU tensors
cases = {"fwd cpu": (torch.ops.lkjit.wtconv_fwd, (x, p[0], None, p[1], [p[2]], [p[3]], 1, 1)),
         "fwd 3-D": (torch.ops.lkjit.wtconv_fwd, (x[0], p[0], None, p[1], [p[2]], [p[3]], 1, 1)),
         "fwd levels": (torch.ops.lkjit.wtconv_fwd, (x, p[0], None, p[1], [p[2]], [], 1, 1)),
         "bwd cpu": (torch.ops.lkjit.wtconv_bwd, (x, x, p[0], None, p[1], [p[2]], [p[3]], 1, 1)),
         "bwd 5-D": (torch.ops.lkjit.wtconv_bwd, (x, x[None], p[0], None, p[1], [p[2]], [p[3]], 1, 1))}
for name, (op, args) in cases.items():
    try:
        op.default.redispatch(ks, *args)
        out[name] = "no error"
    except Exception as e:
        e = ops.translate(e)
        out[name] = [type(e).__name__, str(e)]
torch.manual_seed(0)
m = WTConv2d(4, 4, 5, wt_levels=2)
for name, t in {"module C": torch.randn(1, 3, 8, 8), "module dtype": torch.randn(1, 4, 8, 8, dtype=torch.float64),
                "module 2-D": torch.randn(4, 8)}.items():
    try:
        m(t)
    except Exception as e:
        out[name] = [type(e).__name__, str(e)]
out["cpu result"] = m(torch.randn(2, 4, 9, 7)).sum().item()
print(json.dumps(out))
'''


def _run_cases(mode):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PKG_SRC, HERE]), LKJIT_TORCH_BINDING=mode,
               LKJIT_LIBRARY=_lib_or_skip())
    r = subprocess.run([sys.executable, "-W", "ignore", "-c", _ERROR_CASES], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    import json
    return json.loads(r.stdout.strip().splitlines()[-1])


def _binding_path_or_skip():
    lib = _lib_or_skip()
    path = os.path.join(os.path.dirname(lib), "_lkjit_torch.so")
    if not os.path.isfile(path):
        pytest.skip("_lkjit_torch.so is not built beside liblkjit.so (CMake builds it when it finds torch >= 2.10)")
    return path


def test_binding_on_and_off_give_the_same_results_and_errors():
    """The CUDA kernels of the binding and of the ctypes path refuse bad calls with the same exception class and
    message (both from lkjit_wtconv_check_tensors), and the module gives the same results."""
    _binding_path_or_skip()
    on, off = _run_cases("1"), _run_cases("0")
    assert on.pop("binding") is True and off.pop("binding") is False
    assert on == off
    assert on["fwd cpu"][0] == "SpecError" and "input is on device 'cpu'" in on["fwd cpu"][1]
    assert on["fwd 3-D"] == ["SpecError", "lkjit::wtconv_fwd: input must be 4-D (B, C, H, W); got shape (4, 8, 8)"]
    assert on["module dtype"][0] == "TypeError" and "torch.float64" in on["module dtype"][1]


def test_binding_mode_is_checked():
    env = dict(os.environ, PYTHONPATH=PKG_SRC, LKJIT_TORCH_BINDING="maybe", LKJIT_LIBRARY=_lib_or_skip())
    r = subprocess.run([sys.executable, "-c", "import lkjit.torch"], capture_output=True, text=True, env=env)
    assert r.returncode != 0 and "LKJIT_TORCH_BINDING='maybe' is not supported; supported: 0, 1, auto" in r.stderr


def test_binding_required_but_missing_is_an_import_error(tmp_path):
    """LKJIT_TORCH_BINDING=1 with no binding beside the library: ImportError naming why; auto: one warning."""
    import shutil
    lib = shutil.copy(_lib_or_skip(), tmp_path / "liblkjit.so")
    base = dict(os.environ, PYTHONPATH=PKG_SRC, LKJIT_LIBRARY=str(lib))
    r = subprocess.run([sys.executable, "-c", "import lkjit.torch"], capture_output=True, text=True,
                       env=dict(base, LKJIT_TORCH_BINDING="1"))
    assert r.returncode != 0 and "ImportError: lkjit.torch: LKJIT_TORCH_BINDING=1" in r.stderr, r.stderr
    assert "_lkjit_torch.so not found" in r.stderr
    r = subprocess.run([sys.executable, "-c", "import lkjit.torch"], capture_output=True, text=True,
                       env=dict(base, LKJIT_TORCH_BINDING="auto"))
    assert r.returncode == 0 and r.stderr.count("RuntimeWarning: lkjit.torch: the C++ binding is not used") == 1


# Undefined symbols a stable-ABI module may import: libtorch's C shim (aoti_torch_*, torch_*), the C/C++ runtime
# (versioned glibc, libstdc++, libgcc symbols, and std:: names), and the toolchain's weak hooks.
_ALLOWED = re.compile(r"^(aoti_torch_\w+|torch_\w+|__gmon_start__|_ITM_\w+|_ZN?K?St\w+|_ZSt\w+|"
                      r".+@(GLIBC|GLIBCXX|CXXABI|GCC)_[\d.]+)$")


def test_binding_imports_only_the_stable_abi():
    """The stable-ABI audit: every undefined symbol of _lkjit_torch.so is on the allow-list, none is a C++ symbol
    of libtorch or c10 (at::, c10::, torch:: mangled names), and every shim symbol exists in this torch's
    libtorch_cpu.so."""
    path = _binding_path_or_skip()
    r = subprocess.run(["nm", "-D", "--undefined-only", path], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"nm failed: {r.stderr}")
    syms = [line.split()[-1] for line in r.stdout.splitlines() if line.strip()]
    bad = [s for s in syms if not _ALLOWED.match(s) or re.match(r"_ZN(K)?(2at|3c10|5torch)", s)]
    assert not bad, f"symbols outside the stable ABI: {bad}"
    shim = {s for s in syms if s.startswith(("aoti_torch_", "torch_"))}
    assert shim, "no stable-ABI symbol at all"
    cpu = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")
    r = subprocess.run(["nm", "-D", "--defined-only", cpu], capture_output=True, text=True)
    have = {line.split()[-1] for line in r.stdout.splitlines() if line.strip()}
    assert shim <= have, sorted(shim - have)


def test_gpu_tests_name_only_what_exists():
    """test_torch_gpu.py, which runs only on a GPU machine, names lkjit's modules and their attributes as this
    package has them (lkjit.X.Y chains, and chains on names imported from lkjit): a renamed or moved internal
    fails here, on the CPU, instead of only on the GPU."""
    import ast
    import importlib
    _lib_or_skip()
    importlib.import_module("lkjit.torch")
    tree = ast.parse(open(os.path.join(HERE, "test_torch_gpu.py")).read())
    roots = {"lkjit": lkjit}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "lkjit":
            mod = importlib.import_module(node.module)
            for a in node.names:
                roots[a.asname or a.name] = getattr(mod, a.name) if hasattr(mod, a.name) else \
                    importlib.import_module(f"{node.module}.{a.name}")
    missing, checked = [], 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain, n = [], node
        while isinstance(n, ast.Attribute):
            chain.append(n.attr)
            n = n.value
        if not isinstance(n, ast.Name) or n.id not in roots:
            continue
        obj = roots[n.id]
        for name in reversed(chain):
            if not hasattr(obj, name):
                missing.append(f"line {node.lineno}: {n.id}." + ".".join(reversed(chain)))
                break
            obj = getattr(obj, name)
        checked += 1
    assert checked > 10, checked  # the walk found the file's uses
    assert not missing, sorted(set(missing))


def test_the_layer_path_skips_the_ops_autograd_wrapper(wt):
    """The layer's autograd.Function and its no_grad calls run wtconv_fwd below autograd: torch.library's Python
    autograd wrapper of the op (autograd_impl, which costs host time per call) runs for a direct call only."""
    m = _layer(4, 5, 2, 1, True, seed=14)
    params = m._flat_params()
    x = torch.randn(2, 4, 9, 11, requires_grad=True)
    op_args = (x, params[0], params[-1], params[1], params[2:4], params[4:6], m._lkjit_id, 1)
    calls = []

    def profile(frame, event, arg):
        if event == "call":
            calls.append(frame.f_code.co_name)

    def wrapper_calls(fn):
        calls.clear()
        sys.setprofile(profile)
        try:
            fn()
        finally:
            sys.setprofile(None)
        return calls.count("autograd_impl")

    assert wrapper_calls(lambda: wt._WTConvFunction.apply(m._lkjit_id, 1, 2, x, *params)[0].sum().backward()) == 0
    with torch.no_grad():
        assert wrapper_calls(lambda: m._forward_op(x)) == 0
    assert wrapper_calls(lambda: torch.ops.lkjit.wtconv_fwd(*op_args)) == 1  # the probe sees the wrapper
