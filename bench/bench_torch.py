#!/usr/bin/env python3
"""PyTorch-level benchmark of lkjit.torch.WTConv2d on one GPU (written for an H200).

1. Layers, at the rows of docs/anchors-h200.md (k = 5): lkjit vs the reference algorithm in PyTorch
   (python/tests/wtconv_reference.py, in the input dtype) vs cuDNN depthwise 5x5 / 7x7
   (cudnn.benchmark=True). "fwd" = forward under no_grad; "train" = forward + backward (dX and every
   parameter gradient). Median over timed iterations after warm-up, CUDA events per iteration.
2. Peak memory of one training step of the layer alone, fp32 8x64x256x256, L=3: the rise of
   torch.cuda.max_memory_allocated over what was allocated before the step (X, dOut and parameters
   excluded), plus the device memory lkjit's layer owns (folded weights + scratch, allocated outside
   PyTorch's allocator). The official fused kernels measured 496 MiB, the reference 1184, dw7 256.
3. Kernels: each WTConvNeXt-T layer's bf16 AMP training step alone, NCHW and channels_last input, against
   cuDNN's 7x7 depthwise conv in the same layout (torch.profiler kernel times; `--only kernels`).
4. End to end: a training step (SGD, cross-entropy) of timm's convnext_tiny, batch 64, 224x224, as is and
   with every block's 7x7 depthwise conv_dw replaced by WTConv2d(k=5, L = 5, 4, 3, 2 by stage), in fp32
   and under bf16 autocast: images/s and peak memory (max_memory_allocated + lkjit workspaces). Each step
   runs eagerly (the host can bound it) and as one CUDA graph replayed (GPU time). `--graph-rounds R`: only
   the bf16 CUDA-graph step of both models, alternated R times (the target's comparison, drift spread evenly).
5. Host: CPU time per call of each WTConvNeXt-T layer against dw7 (batch 1), and per training step of both
   networks at batch 8, where the GPU waits for the host (`--only host`).

    PYTHONPATH=python LKJIT_LIBRARY=build/liblkjit.so python3 bench/bench_torch.py [--quick] [--json out.json]

Prints markdown tables. --quick (about 150 s on an H200 with a cold kernel cache): 10 + 20 iterations per
layer measurement, 3 + 10 network steps. Default: 10 + 30 and 5 + 20.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python", "tests"))
if "lkjit" not in sys.modules:
    sys.path.insert(0, os.path.join(REPO, "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import lkjit  # noqa: E402
from lkjit.torch import WTConv2d  # noqa: E402
from wtconv_reference import ReferenceWTConv2d  # noqa: E402
from torch_timing import fwd_fn, median_ms, train_fn  # noqa: E402

DT = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
LK_DT = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}
# docs/anchors-h200.md: (dtype, B, C, H=W, L, also time cuDNN depthwise)
ROWS = [
    ("fp32", 8, 64, 256, 1, True), ("fp32", 8, 64, 256, 3, False), ("fp32", 8, 64, 256, 5, False),
    ("fp32", 8, 128, 128, 3, True), ("fp16", 8, 64, 256, 3, True), ("fp16", 8, 128, 128, 5, True),
    ("bf16", 8, 64, 256, 3, True),
    ("fp32", 64, 96, 56, 5, True), ("fp32", 64, 192, 28, 4, True), ("fp32", 64, 384, 14, 3, True),
    ("fp32", 64, 768, 7, 2, True),
    ("fp16", 64, 96, 56, 5, True), ("fp16", 64, 192, 28, 4, True), ("fp16", 64, 384, 14, 3, True),
    ("fp16", 64, 768, 7, 2, True),
]
# WTConvNeXt-T's layers, one per stage: (B, C, H=W, L); every block of a stage has the same shape.
NET_LAYERS = [(64, 96, 56, 5), (64, 192, 28, 4), (64, 384, 14, 3), (64, 768, 7, 2)]
MIB = 1 << 20




def first_call_s(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t






def depthwise(C, k, dtype):
    return nn.Conv2d(C, C, k, padding=k // 2, groups=C, bias=True).cuda().to(dtype)


def lkjit_workspace(model):
    return sum(m.lkjit_workspace_bytes() for m in model.modules() if isinstance(m, WTConv2d))


# ---- optional: compile every lkjit kernel up front, in parallel, with the lkjit CLI -------------------

def prewarm(cli, arch):
    if cli == "off":
        return None
    if cli == "auto":
        lib = os.environ.get("LKJIT_LIBRARY") or ""
        cands = [os.path.join(os.path.dirname(lib), "lkjit")] if lib else []
        cands.append(os.path.join(REPO, "build", "lkjit"))
        cli = next((c for c in cands if os.path.isfile(c) and os.access(c, os.X_OK)), None)
        if cli is None:
            return None
    layers = [{"B": B, "C": C, "H": H, "W": H, "k": 5, "L": L, "stride": 1} for (_, B, C, H, L, _) in ROWS]
    layers += [{"B": B, "C": C, "H": H, "W": H, "k": 5, "L": L, "stride": 1} for B, C, H, L in NET_LAYERS]
    # The layout transposes the layer runs around the plane kernels on channels_last maps are not part of a
    # layer's plan: named explicitly.
    manifest = {"dtypes": ["f32", "f16", "bf16"], "passes": ["fwd", "bwd"], "layers": layers,
                "kernels": [f"lkjit_wtconv_transpose_{dt}_w128_sm{arch}" for dt in ("f32", "f16", "bf16")]}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(manifest, f)
    t = time.perf_counter()
    r = subprocess.run([cli, "prewarm", f"--arch=sm_{arch}", f"--manifest={f.name}"], capture_output=True, text=True)
    os.unlink(f.name)
    dt = time.perf_counter() - t
    if r.returncode != 0:
        print(f"(prewarm with {cli} failed, rc {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}; "
              f"kernels compile on first use instead)", file=sys.stderr)
        return None
    return dt


# ---- 1. layers ----------------------------------------------------------------------------------------

def bench_layers(args):
    out = []
    for dt_name, B, C, H, L, with_dw in ROWS:
        dt = DT[dt_name]
        torch.manual_seed(0)
        x = torch.randn(B, C, H, H, device="cuda", dtype=dt)
        g = torch.randn_like(x)
        lk = WTConv2d(C, C, 5, wt_levels=L).cuda()
        ref = ReferenceWTConv2d(C, 5, 1, True, L).cuda()
        ref.load_state_dict(lk.state_dict())
        ref = ref.to(dt)
        row = {"dtype": dt_name, "B": B, "C": C, "H": H, "W": H, "L": L, "k": 5}
        row["lkjit_first_call_s"] = first_call_s(fwd_fn(lk, x)) + first_call_s(train_fn(lk, x.requires_grad_(), g))
        with torch.no_grad():
            diff = (lk(x).float() - ref(x).float()).abs().max().item()
        row["max_abs_diff_vs_ref"] = diff
        row["lkjit_fwd"] = median_ms(fwd_fn(lk, x), args.warmup, args.iters)
        row["lkjit_train"] = median_ms(train_fn(lk, x, g), args.warmup, args.iters)
        row["ref_fwd"] = median_ms(fwd_fn(ref, x), args.warmup, args.iters)
        row["ref_train"] = median_ms(train_fn(ref, x, g), args.warmup, args.iters)
        if with_dw:
            for k in (5, 7):
                dw = depthwise(C, k, dt)
                row[f"dw{k}_fwd"] = median_ms(fwd_fn(dw, x), args.warmup, args.iters)
                row[f"dw{k}_train"] = median_ms(train_fn(dw, x, g), args.warmup, args.iters)
        row["lkjit_plan"] = lk.lkjit_plan(B, H, H, dtype=dt, backward=False).splitlines()
        out.append(row)
        print(f"  {dt_name} {B}x{C}x{H}x{H} L{L}: lkjit {row['lkjit_fwd']:.3f} / {row['lkjit_train']:.3f} ms, "
              f"ref {row['ref_fwd']:.3f} / {row['ref_train']:.3f} ms", file=sys.stderr)
        del x, g, lk, ref
    return out


# ---- 2. layer memory ----------------------------------------------------------------------------------

def step_memory(m, x, g):
    train_fn(m, x, g)()  # warm: JIT, workspace, cuDNN algorithms
    x.grad = None
    for p in m.parameters():
        p.grad = None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    out = m(x)
    out.backward(g)
    del out
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def bench_memory():
    B, C, H, L = 8, 64, 256, 3
    torch.manual_seed(0)
    x = torch.randn(B, C, H, H, device="cuda", requires_grad=True)
    g = torch.randn_like(x)
    res = {"shape": f"{B}x{C}x{H}x{H}", "L": L, "dtype": "fp32"}
    lk = WTConv2d(C, C, 5, wt_levels=L).cuda()
    torch_part = step_memory(lk, x, g)
    ws = lk.lkjit_workspace_bytes()
    res["lkjit"] = {"torch_MiB": torch_part / MIB, "workspace_MiB": ws / MIB, "total_MiB": (torch_part + ws) / MIB}
    del lk
    for name, m in [("ref", ReferenceWTConv2d(C, 5, 1, True, L).cuda()), ("dw7", depthwise(C, 7, torch.float32))]:
        res[name] = {"total_MiB": step_memory(m, x, g) / MIB}
        del m
    res["fused_official_MiB"] = 496.0
    return res


# ---- 3. convnext_tiny -----------------------------------------------------------------------------------

def convnext(with_wtconv, packed=False):
    import timm
    model = timm.create_model("convnext_tiny", pretrained=False)
    if with_wtconv:
        for stage, (*_, L) in zip(model.stages, NET_LAYERS):
            for blk in stage.blocks:
                C = blk.conv_dw.in_channels
                blk.conv_dw = WTConv2d(C, C, 5, stride=1, bias=blk.conv_dw.bias is not None, wt_levels=L,
                                       packed_params=packed)
    return model.cuda()


def network_step(args, amp, with_wt, B=64, graph=False, packed=False):
    """One training step's median time. graph: the whole step (forward, backward, SGD) captured once in a
    CUDA graph after the warm-up and replayed (PyTorch's whole-network capture), which takes the host out.
    As in PyTorch's whole-network example, the gradients are set to None before the capture and not zeroed
    inside it: each replay's backward then writes fresh gradients into the graph's pool. (Zeroing them inside
    the step instead captured a memset and an accumulating add per parameter tensor: 176 in convnext_tiny,
    314 in WTConvNeXt-T.) packed: WTConv2d(packed_params=True)."""
    torch.manual_seed(0)
    model = convnext(with_wt, packed).train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(B, 3, 224, 224, device="cuda")
    y = torch.randint(0, 1000, (B,), device="cuda")
    losses = []

    def step():
        if not capturing:
            opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp, cache_enabled=not graph):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    capturing = False
    run = lambda: losses.append(step().detach())  # noqa: E731
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up on a side stream, as graph capture asks
        first = first_call_s(run)
        for _ in range(max(args.net_warmup - 1, 0)):
            run()
    torch.cuda.current_stream().wait_stream(side)
    if graph:
        opt.zero_grad(set_to_none=True)
        capturing = True
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_loss = step()

        def run():
            g.replay()
            losses.append(static_loss.clone())
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    ms = median_ms(run, 0, args.net_iters)
    peak = torch.cuda.max_memory_allocated()
    ws = lkjit_workspace(model)
    return {"model": "convnext_tiny" + (" + WTConv2d" if with_wt else ""), "amp": "bf16" if amp else "fp32",
            "mode": ("CUDA graph" if graph else "eager") + (", packed_params" if packed else ""),
            "batch": B, "step_ms": ms, "images_per_s": B / (ms / 1000), "first_step_s": first,
            "peak_MiB": (peak + ws) / MIB, "torch_peak_MiB": peak / MIB, "lkjit_workspace_MiB": ws / MIB,
            "losses_finite": bool(torch.isfinite(torch.stack(losses)).all())}


def profile_network(args, B=64, steps=3):
    """Per-kernel CUDA time of a bf16 AMP training step of each model (torch.profiler, mean of `steps`): the
    same step as network_step (zero_grad, forward, backward, SGD), so no gradient accumulates. Prints lkjit's
    and cuDNN's depthwise kernels one by one (us and calls per step), then the top rows of all kernels."""
    from torch.profiler import ProfilerActivity, profile
    for with_wt in (False, True):
        torch.manual_seed(0)
        model = convnext(with_wt).train()
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
        x = torch.randn(B, 3, 224, 224, device="cuda")
        y = torch.randint(0, 1000, (B,), device="cuda")

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()

        for _ in range(3):
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                step()
            torch.cuda.synchronize()
        name = "WTConvNeXt-T (lkjit)" if with_wt else "convnext_tiny"
        events = sorted(prof.key_averages(), key=lambda e: -e.self_device_time_total)
        total = sum(e.self_device_time_total for e in events) / 1000 / steps
        print(f"\n#### {name}, bf16 AMP training step: {total:.2f} ms of kernels (mean of {steps} steps)\n")
        print("| us/step | calls/step | kernel |\n|---|---|---|")
        for e in events:
            if e.key.startswith("lkjit_") or "c1_k1_nhwc" in e.key:  # lkjit, or cuDNN's depthwise kernels
                print(f"| {e.self_device_time_total / steps:.1f} | {e.count / steps:g} | {e.key} |")
        print()
        print(prof.key_averages().table(sort_by="self_device_time_total", row_limit=args.profile_rows, max_name_column_width=70))
        model = opt = None  # freed before the next model


def step_kernels_us(m, x, g, steps=10):
    """Self CUDA time (us per step) of each kernel of a bf16 AMP training step of layer m alone. Each step
    starts with every gradient set to None, as the network's step does (zero_grad(set_to_none=True)): the
    backward writes fresh gradients, so no accumulating add per parameter tensor (WTConv2d has 2L+3, a
    depthwise conv 2) or into x.grad is timed."""
    from torch.profiler import ProfilerActivity, profile

    def step():
        m.zero_grad(set_to_none=True)
        x.grad = None
        with torch.autocast("cuda", dtype=torch.bfloat16):
            y = m(x)
        y.backward(g)

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    return {e.key: (e.self_device_time_total / steps, e.count / steps) for e in prof.key_averages()
            if e.self_device_time_total > 0}


def copy_us(x, iters=20, l2_bytes=50 << 20):
    """Device time of one copy of x in its own layout from DRAM (torch.profiler, as the layers' kernels): the
    bandwidth a layout transpose is held to. The copies rotate over pairs of buffers that together exceed 4x
    the L2 cache (50 MiB on an H200), so no copy reads what an earlier one left in L2."""
    from torch.profiler import ProfilerActivity, profile
    pairs = max(2, -(-4 * l2_bytes // (2 * x.numel() * x.element_size())))
    bufs = [(x.clone(), torch.empty_like(x)) for _ in range(pairs)]
    for src, dst in bufs:
        dst.copy_(src)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(iters):
            src, dst = bufs[i % pairs]
            dst.copy_(src)
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.self_device_time_total > 0]
    if len(events) != 1 or events[0].count != iters:  # one copy kernel (or memcpy), once per iteration
        raise RuntimeError(f"copy_us: expected {iters} runs of one copy, got {[(e.key, e.count) for e in events]}")
    return events[0].self_device_time_total / iters


def bench_kernels(args):
    """Kernel time of each WTConvNeXt-T layer's bf16 AMP training step, NCHW vs channels_last input, against
    the 7x7 depthwise conv it replaces (cuDNN) in the same layout: what the network pays per block."""
    out = []
    for B, C, H, L in NET_LAYERS:
        torch.manual_seed(0)
        wt = WTConv2d(C, C, 5, wt_levels=L).cuda()
        dw7 = depthwise(C, 7, torch.float32)
        saved = os.environ.get("LKJIT_TORCH_LAYOUT")
        try:
            for layout, mode in (("nchw", "auto"), ("channels_last", "strided"), ("channels_last", "auto")):
                os.environ["LKJIT_TORCH_LAYOUT"] = mode
                x = torch.randn(B, C, H, H, device="cuda", dtype=torch.bfloat16)
                if layout == "channels_last":
                    x = x.contiguous(memory_format=torch.channels_last)
                x.requires_grad_(True)
                g = torch.randn_like(x)
                k = step_kernels_us(wt, x, g)
                d = step_kernels_us(dw7.to(memory_format=torch.channels_last) if layout == "channels_last" else dw7, x, g)
                part = lambda key: sum(v[0] for n, v in k.items() if key in n)  # noqa: E731
                transposes = sum(v[1] for n, v in k.items() if "wtconv_transpose" in n)
                r = {"B": B, "C": C, "H": H, "L": L, "layout": layout if layout == "nchw" else f"{layout}, {mode}",
                     "lkjit_fwd_us": part("wtconv_fwd_plane") + part("wtconv_fwd_lane"),
                     "lkjit_bwd_us": part("wtconv_bwd_plane") + part("wtconv_bwd_lane"),
                     "lkjit_transpose_us": part("wtconv_transpose"), "transposes_per_step": transposes,
                     "lkjit_all_us": sum(v[0] for v in k.values()), "dw7_all_us": sum(v[0] for v in d.values())}
                if transposes:  # each moves x's bytes once each way, as a copy of x does
                    r["transpose_pct_of_copy"] = 100 * transposes * copy_us(x.detach()) / r["lkjit_transpose_us"]
                out.append(r)
                print(f"  {B}x{C}x{H}x{H} L={L} {r['layout']}: lkjit {r['lkjit_all_us']:.0f} us, dw7 {r['dw7_all_us']:.0f} us",
                      file=sys.stderr)
        finally:
            if saved is None:
                os.environ.pop("LKJIT_TORCH_LAYOUT", None)
            else:
                os.environ["LKJIT_TORCH_LAYOUT"] = saved
    return out


def bench_network(args):
    if args.graph_rounds:
        return bench_network_graph_rounds(args)
    out = []
    # (WTConv2d, CUDA graph, packed_params)
    runs = [(False, False, False), (True, False, False), (True, False, True), (False, True, False), (True, True, False)]
    for amp in (False, True):
        for with_wt, graph, packed in runs:
            r = network_step(args, amp, with_wt, graph=graph, packed=packed)
            torch.cuda.empty_cache()
            out.append(r)
            print(f"  {r['model']} {r['amp']} {r['mode']}: {r['images_per_s']:.0f} img/s, {r['peak_MiB']:.0f} MiB",
                  file=sys.stderr)
    return out


def bench_network_graph_rounds(args):
    """The bf16 CUDA-graph rows alone (the target's comparison): convnext_tiny and WTConvNeXt-T alternated
    args.graph_rounds times, so that drift over the run falls on both; each row reports the median of its
    rounds (round_ms lists them), and the other fields of its round with the highest peak memory."""
    rows = {}
    for _ in range(args.graph_rounds):
        for with_wt in (False, True):
            r = network_step(args, True, with_wt, graph=True)
            torch.cuda.empty_cache()
            rows.setdefault(with_wt, []).append(r)
            print(f"  {r['model']} bf16 CUDA graph: {r['step_ms']:.3f} ms", file=sys.stderr)
    out = []
    for with_wt in (False, True):
        rs = rows[with_wt]
        ms = statistics.median(r["step_ms"] for r in rs)
        r = dict(max(rs, key=lambda r: r["peak_MiB"]), step_ms=ms, images_per_s=rs[0]["batch"] / (ms / 1000),
                 round_ms=[round(r["step_ms"], 3) for r in rs], losses_finite=all(r["losses_finite"] for r in rs),
                 mode=f"CUDA graph, median of {len(rs)} rounds")
        out.append(r)
    return out


# ---- 5. host time per call --------------------------------------------------------------------------------

def host_us(fn, n):
    """CPU time of one call (us): n calls back to back, timed on the host. The maps are small enough that the
    GPU keeps up, so this is the time the host spends per call (argument checks, allocations, autograd,
    launches)."""
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    dt = time.perf_counter() - t
    torch.cuda.synchronize()
    return dt / n * 1e6


def bench_host(args):
    """Host time per call of each WTConvNeXt-T layer (batch 1, channels_last, bf16 autocast, as in the network)
    against dw7, and per training step of both networks at batch 8 (where the GPU waits for the host)."""
    n = 100 if args.quick else 300
    layers = []
    for _, C, H, L in NET_LAYERS:
        torch.manual_seed(0)
        x = torch.randn(1, C, H, H, device="cuda").contiguous(memory_format=torch.channels_last).requires_grad_()
        g = torch.randn(1, C, H, H, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=torch.channels_last)
        row = {"C": C, "H": H, "L": L}
        for name, m in (("lkjit", WTConv2d(C, C, 5, wt_levels=L).cuda()),
                        ("packed", WTConv2d(C, C, 5, wt_levels=L, packed_params=True).cuda()),
                        ("dw7", depthwise(C, 7, torch.float32))):
            def fwd():
                with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
                    m(x)

            def train():
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    y = m(x)
                y.backward(g)
            # median of 3 runs: the host's timing noise is larger than the GPU's
            row[f"{name}_fwd_us"] = statistics.median(host_us(fwd, n) for _ in range(3))
            row[f"{name}_train_us"] = statistics.median(host_us(train, n) for _ in range(3))
        layers.append(row)
        print(f"  1x{C}x{H}x{H} L={L}: train lkjit {row['lkjit_train_us']:.0f} us, packed {row['packed_train_us']:.0f} us, "
              f"dw7 {row['dw7_train_us']:.0f} us", file=sys.stderr)
    nets = []
    try:
        import timm  # noqa: F401
    except ImportError:
        return {"layers": layers, "network_b8": []}
    for with_wt, packed in ((False, False), (True, False), (True, True)):
        r = network_step(argparse.Namespace(net_warmup=3, net_iters=10 if args.quick else 20), True, with_wt, B=8,
                         packed=packed)
        nets.append(r)
        torch.cuda.empty_cache()
    return {"layers": layers, "network_b8": nets}


# ---- report -----------------------------------------------------------------------------------------------

def fmt(v, nd=2):
    return "" if v is None else f"{v:.{nd}f}"


def print_tables(res):
    d = res["device"]
    print(f"\n### lkjit.torch.WTConv2d ({d['name']}, torch {d['torch']}, CUDA {d['cuda']}, cuDNN {d['cudnn']}, "
          f"lkjit {d['lkjit']}; {res['iters']['layer']}; {d['date']})\n")
    if res.get("prewarm_s") is not None:
        print(f"Kernels prewarmed with `lkjit prewarm` in {res['prewarm_s']:.1f} s.\n")
    if res.get("layers"):
        print("| dtype | B | C | H=W | L | lkjit fwd/train | ref fwd/train | dw5 fwd/train | dw7 fwd/train "
              "| train vs ref | train vs dw7 | lkjit 1st call s | max abs diff |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in res["layers"]:
            pair = lambda k: f"{fmt(r.get(k + '_fwd'))} / {fmt(r.get(k + '_train'))}" if k + "_fwd" in r else ""  # noqa: E731
            vs_dw7 = f"{r['dw7_train'] / r['lkjit_train']:.2f}x" if "dw7_train" in r else ""
            print(f"| {r['dtype']} | {r['B']} | {r['C']} | {r['H']} | {r['L']} | {pair('lkjit')} | {pair('ref')} | "
                  f"{pair('dw5')} | {pair('dw7')} | {r['ref_train'] / r['lkjit_train']:.2f}x | {vs_dw7} | "
                  f"{r['lkjit_first_call_s']:.2f} | {r['max_abs_diff_vs_ref']:.1e} |")
        print("\nTimes in ms (median). \"vs\" = speed-up of lkjit's training step. max abs diff: lkjit vs the reference "
              "algorithm, forward, in the row's dtype.")
    if res.get("kernels"):
        print("\n### WTConvNeXt-T layers: kernel time of one bf16 AMP training step (torch.profiler, us)\n")
        print("| B x C x H=W | L | input layout, LKJIT_TORCH_LAYOUT | lkjit fwd (plane or lane) | lkjit bwd (plane or lane) | "
              "lkjit transposes | lkjit all kernels | dw7 all kernels | lkjit / dw7 |")
        print("|---|---|---|---|---|---|---|---|---|")
        tpct = lambda r: (f" ({r['transposes_per_step']:g}, {r['transpose_pct_of_copy']:.0f} % of copy)"  # noqa: E731
                          if "transpose_pct_of_copy" in r else "")
        for r in res["kernels"]:
            print(f"| {r['B']}x{r['C']}x{r['H']} | {r['L']} | {r['layout']} | {r['lkjit_fwd_us']:.0f} | "
                  f"{r['lkjit_bwd_us']:.0f} | {r['lkjit_transpose_us']:.0f}{tpct(r)} | {r['lkjit_all_us']:.0f} | "
                  f"{r['dw7_all_us']:.0f} | {r['lkjit_all_us'] / r['dw7_all_us']:.2f} |")
        print("\nOne layer alone, dOut given, gradients set to None before each step (as the network's step); "
              "\"all kernels\" includes autocast weight casts. Transposes: their time (how many a step, and their "
              "throughput as a % of a copy's: as many DRAM-to-DRAM copies of the activation, timed in the same run, "
              "over the transposes' time). The network runs channels_last (auto: lkjit transposes maps of >= 100 pixels to "
              "NCHW around the plane kernels, and runs the lane kernels on channels_last maps up to 16 wide; strided: "
              "reads them in place). Below 1.00 lkjit is the faster layer.")
    m = res.get("memory")
    if m:
        lk = m["lkjit"]
        print(f"\n### Peak memory of a training step, layer alone ({m['dtype']} {m['shape']}, L={m['L']})\n")
        print("| layer | MiB |\n|---|---|")
        print(f"| lkjit | {lk['total_MiB']:.0f} (PyTorch {lk['torch_MiB']:.0f} + lkjit workspace "
              f"{lk['workspace_MiB']:.0f}) |")
        print(f"| reference | {m['ref']['total_MiB']:.0f} |\n| dw7 | {m['dw7']['total_MiB']:.0f} |")
        print(f"| official fused (anchor) | {m['fused_official_MiB']:.0f} |")
        print("\nRise of max_memory_allocated over the memory held before the step (X, dOut, parameters), plus "
              "the device memory lkjit's layer owns.")
    if res.get("network"):
        print(f"\n### convnext_tiny training step, batch 64, 224x224 ({res['iters']['network']})\n")
        print("| model | precision | mode | step ms | images/s | peak MiB | of which lkjit workspace | 1st step s | "
              "losses finite |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in res["network"]:
            print(f"| {r['model']} | {r['amp']} | {r['mode']} | {r['step_ms']:.2f} | {r['images_per_s']:.0f} | "
                  f"{r['peak_MiB']:.0f} | {r['lkjit_workspace_MiB']:.0f} | {r['first_step_s']:.1f} | "
                  f"{r['losses_finite']} |")
        rounds = [r for r in res["network"] if "round_ms" in r]
        if len(rounds) == 2:
            print("\nRounds (ms): " + "; ".join(f"{r['model']} {r['round_ms']}" for r in rounds)
                  + f". Step-time ratio convnext_tiny / WTConvNeXt-T: **{rounds[0]['step_ms'] / rounds[1]['step_ms']:.4f}**.")
        print("\nWTConv2d: k=5, L = 5, 4, 3, 2 by stage, replacing each block's 7x7 depthwise conv_dw. Peak = "
              "max_memory_allocated + lkjit workspaces. fp32 runs with PyTorch's default TF32 settings "
              f"(cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}, "
              f"matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}). eager: the step as written, which "
              "the host can bound; CUDA graph: the same step captured once and replayed (GPU time).")
    h = res.get("host")
    if h:
        print("\n### Host time per call (us; batch 1, channels_last, bf16 autocast; median of 3 runs)\n")
        print("| C x H=W | L | lkjit fwd | packed fwd | dw7 fwd | lkjit fwd+bwd | packed fwd+bwd | dw7 fwd+bwd |")
        print("|---|---|---|---|---|---|---|---|")
        for r in h["layers"]:
            print(f"| {r['C']}x{r['H']} | {r['L']} | {r['lkjit_fwd_us']:.0f} | {r['packed_fwd_us']:.0f} | "
                  f"{r['dw7_fwd_us']:.0f} | {r['lkjit_train_us']:.0f} | {r['packed_train_us']:.0f} | "
                  f"{r['dw7_train_us']:.0f} |")
        print("\npacked: WTConv2d(packed_params=True), one autograd input for all 2L+3 parameters.")
        if h["network_b8"]:
            print("\nbf16 AMP training step at batch 8, where the GPU waits for the host: "
                  + ", ".join(f"{r['model']} ({r['mode']}) {r['step_ms']:.1f} ms" for r in h["network_b8"]) + ".")


def rounds_arg(v):
    n = int(v)
    if n < 0:
        raise argparse.ArgumentTypeError(f"{v} is below 0; supported: 0 (every network row) or a number of rounds")
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer iterations (10 + 20 per layer, 3 + 10 network steps)")
    ap.add_argument("--json", help="write the results to this JSON file")
    ap.add_argument("--only", default="layers,memory,network,kernels,host",
                    help="comma-separated: layers, memory, network, kernels, host, wbmm (bench/bench_torch_wbmm.py)")
    ap.add_argument("--wbmm-batch", type=int, default=128, help="batch of the WBMM-T network step (--only wbmm)")
    ap.add_argument("--graph-rounds", type=rounds_arg, default=0, metavar="R",
                    help="network: only the bf16 CUDA-graph step of both models, alternated R times (median of "
                         "each; run-to-run drift then falls on both)")
    ap.add_argument("--profile", action="store_true",
                    help="only print the per-kernel CUDA time of a bf16 AMP training step of each network (torch.profiler)")
    ap.add_argument("--profile-rows", type=int, default=25, help="rows of the --profile tables")
    ap.add_argument("--prewarm", default="off",
                    help="compile every kernel first, in parallel, with the lkjit CLI: off (kernels compile on first "
                         "use, timed in the '1st call' column), auto (the CLI beside $LKJIT_LIBRARY or build/lkjit), "
                         "or its path")
    args = ap.parse_args()
    args.warmup, args.iters = (10, 20) if args.quick else (10, 30)
    args.net_warmup, args.net_iters = (3, 10) if args.quick else (5, 20)
    if not torch.cuda.is_available():
        sys.exit("bench_torch: error: torch.cuda is not available")
    status = lkjit.gpu_available()
    if not status:
        sys.exit(f"bench_torch: error: lkjit cannot use the GPU: {status.reason}")
    torch.backends.cudnn.benchmark = True
    only = set(args.only.split(","))
    t0 = time.perf_counter()
    cap = torch.cuda.get_device_capability()
    res = {"device": {"name": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
                      "cudnn": torch.backends.cudnn.version(), "lkjit": lkjit.library_version(),
                      "date": time.strftime("%Y-%m-%d")},
           "iters": {"layer": f"{args.warmup} warm-up + {args.iters} timed iterations",
                     "network": f"{args.net_warmup} warm-up + {args.net_iters} timed steps"}}
    res["prewarm_s"] = prewarm(args.prewarm, cap[0] * 10 + cap[1])
    if args.profile:
        profile_network(args)
        return
    if "kernels" in only:
        print("kernels:", file=sys.stderr)
        res["kernels"] = bench_kernels(args)
    if "layers" in only:
        print("layers:", file=sys.stderr)
        res["layers"] = bench_layers(args)
    if "memory" in only:
        res["memory"] = bench_memory()
    if "network" in only:
        print("network:", file=sys.stderr)
        try:
            import timm  # noqa: F401
        except ImportError as e:
            print(f"(timm not importable: {e}; network benchmark skipped)", file=sys.stderr)
        else:
            res["network"] = bench_network(args)
    if "host" in only:
        print("host:", file=sys.stderr)
        res["host"] = bench_host(args)
    if "wbmm" in only:
        print("wbmm:", file=sys.stderr)
        from bench_torch_wbmm import bench_wbmm
        res["wbmm"] = bench_wbmm(args)
    res["total_s"] = time.perf_counter() - t0
    print_tables(res)
    if "wbmm" in res:
        from bench_torch_wbmm import print_wbmm_tables
        print_wbmm_tables(res["wbmm"])
    print(f"\nTotal {res['total_s']:.0f} s.")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
