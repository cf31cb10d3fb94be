"""Host time per WTConv2d layer forward+backward (us), per path: the C++ binding and the ctypes fallback
(LKJIT_TORCH_BINDING=1 / 0, each in its own process), and, on CPU tensors, the autograd mechanism (an
autograd.Function around the ops against register_autograd on the ops) through the tests' CPU kernel.

    PYTHONPATH=python:python/tests LKJIT_LIBRARY=build/liblkjit.so .venv/bin/python bench/bench_torch_host.py
    ... --device cuda   # on a GPU: WTConvNeXt-T's layers at batch 64, bf16, each path (target: <= 30 us/layer)

CPU numbers track regressions only: the reference computation and the test kernel's Python dominate them; the
mechanism comparison uses a 1x1x1x1 map (k=1, L=0) so that the per-call plumbing is most of what is timed."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _time(step, iters, warmup=20):
    for _ in range(warmup):
        step()
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        samples.append((time.perf_counter() - t0) / iters * 1e6)
    return statistics.median(samples)


def one_path(device, iters):
    import torch
    from lkjit import _torch_ops as ops
    from lkjit.torch import WTConv2d
    shapes = [(64, 96, 56, 5), (64, 192, 28, 4), (64, 384, 14, 3), (64, 768, 7, 2)] if device == "cuda" else \
        [(1, 4, 8, 2)]
    out = {"binding": ops.BINDING.loaded, "layers": {}}
    for B, C, HW, L in shapes:
        m = WTConv2d(C, C, 5, wt_levels=L).to(device)
        x = torch.randn(B, C, HW, HW, device=device, requires_grad=True)
        g = torch.randn(B, C, HW, HW, device=device)
        if device == "cuda":
            x = x.detach().to(torch.bfloat16).requires_grad_()
            g = g.to(torch.bfloat16)

        def step():
            m(x).backward(g)
        if device == "cuda":
            torch.cuda.synchronize()
        us = _time(step, iters)  # host time: the GPU runs behind (no synchronize in the loop)
        out["layers"][f"{B}x{C}x{HW}x{HW} L={L}"] = round(us, 1)
    return out


def mechanism(iters):
    """autograd.Function around the ops vs register_autograd on copies of them (lkjit_bench::), CPU kernels that
    only allocate their outputs."""
    import torch
    sys.path.insert(0, os.path.join(ROOT, "python", "tests"))
    from lkjit import wtconv
    torch.set_num_threads(1)
    lib = torch.library.Library("lkjit_bench", "DEF")
    lib.define("wtconv_fwd(Tensor x, Tensor base_w, Tensor? base_b, Tensor base_s, Tensor[] level_w, "
               "Tensor[] level_s, int layer_id, int stride) -> Tensor")
    lib.define("wtconv_fwd_save(Tensor x, Tensor base_w, Tensor? base_b, Tensor base_s, Tensor[] level_w, "
               "Tensor[] level_s, int layer_id, int stride) -> (Tensor, Tensor)")
    lib.define("wtconv_bwd(Tensor grad_out, Tensor x, Tensor base_w, Tensor? base_b, Tensor base_s, Tensor[] level_w, "
               "Tensor[] level_s, int layer_id, int stride, bool reuse_fold=False, bool x_is_nchw_copy=False) -> "
               "Tensor[]")
    # Kernels that only allocate their outputs: what is timed is the dispatch and autograd plumbing.
    lib.impl("wtconv_fwd", lambda x, *a: torch.empty_like(x), "CPU")
    lib.impl("wtconv_fwd_save", lambda x, *a: (torch.empty_like(x), x.new_empty(0)), "CPU")
    lib.impl("wtconv_bwd", lambda g, x, bw, bb, bs, lw, ls, *a: [torch.empty_like(x), torch.empty_like(bw),
                                                                 torch.empty_like(bs)], "CPU")
    wtconv._fwd_op, wtconv._bwd_op = torch.ops.lkjit_bench.wtconv_fwd.default, torch.ops.lkjit_bench.wtconv_bwd.default
    wtconv._fwd_save_op = torch.ops.lkjit_bench.wtconv_fwd_save.default
    fwd, bwd = torch.ops.lkjit_bench.wtconv_fwd, torch.ops.lkjit_bench.wtconv_bwd

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(*[t for t in inputs[:4] if t is not None], *inputs[4], *inputs[5])
        ctx.args = inputs

    def backward(ctx, grad):
        x, bw, bb, bs, lw, ls, lid, stride = ctx.args
        g = bwd(grad, x, bw, bb, bs, lw, ls, lid, stride, True)
        return g[0], g[1], None, g[2], [], [], None, None
    torch.library.register_autograd("lkjit_bench::wtconv_fwd", backward, setup_context=setup_context, lib=lib)
    from lkjit.torch import WTConv2d
    m = WTConv2d(1, 1, 1, wt_levels=0, bias=False)
    x = torch.randn(1, 1, 1, 1, requires_grad=True)
    g = torch.randn(1, 1, 1, 1)
    bw, bs = m.base_conv.weight, m.base_scale.weight

    def via_function():
        wtconv._WTConvFunction.apply(m._lkjit_id, 1, 0, x, bw, bs)[0].backward(g)

    def via_register_autograd():
        fwd(x, bw, None, bs, [], [], m._lkjit_id, 1).backward(g)
    return {"autograd.Function around the ops": round(_time(via_function, iters), 1),
            "register_autograd on the op": round(_time(via_register_autograd, iters), 1)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child == "path":
        print(json.dumps(one_path(a.device, a.iters)))
        return
    if a.child == "mechanism":
        print(json.dumps(mechanism(a.iters)))
        return
    res = {}
    for name, mode in (("binding", "1"), ("ctypes", "0")):
        env = dict(os.environ, LKJIT_TORCH_BINDING=mode)
        r = subprocess.run([sys.executable, "-W", "ignore", __file__, "--child", "path", "--device", a.device, "--iters",
                            str(a.iters)], capture_output=True, text=True, env=env)
        res[name] = json.loads(r.stdout.splitlines()[-1]) if r.returncode == 0 else {"error": r.stderr.strip()[-300:]}
    if a.device == "cpu":
        r = subprocess.run([sys.executable, "-W", "ignore", __file__, "--child", "mechanism", "--iters", str(a.iters)],
                           capture_output=True, text=True, env=dict(os.environ, LKJIT_TORCH_BINDING="0"))
        res["mechanism (CPU, 1x1x1x1 k=1 L=0)"] = json.loads(r.stdout.splitlines()[-1]) if r.returncode == 0 else \
            {"error": r.stderr.strip()[-300:]}
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
