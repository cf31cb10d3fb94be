#!/usr/bin/env python3
"""PyTorch-level benchmark of lkjit.torch.DepthwiseConv2d on one GPU (written for an H200).

1. Layers: lkjit vs nn.Conv2d (groups=C) in NCHW and in channels_last (the baseline is the faster of the two),
   forward (no_grad) and training step (forward + backward: dx, dw, dbias), at ConvNeXt-T's 7x7 layers and
   RepLKNet-31B's (batch 64), SLaK's 51x5 / 5x51, and the 51.4 M-element fp32 k = 5 / 13 / 27 rows of
   docs/anchors-h200.md. Median of CUDA-event timings after warm-up, L2 flushed before each.
2. End to end: a training step (SGD, cross-entropy) of timm's convnext_tiny at batch 64, 224x224, as is and with
   replace_depthwise, fp32 and bf16 autocast, eager and as one replayed CUDA graph (skipped without timm).

    PYTHONPATH=python LKJIT_LIBRARY=build/liblkjit.so python3 bench/bench_torch_dwconv.py [--quick] [--json f]

Prints markdown tables; with $OUT set (or --json) writes the rows as JSON too.
"""
import argparse
import json
import os
import re
import statistics
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if "lkjit" not in sys.modules:
    sys.path.insert(0, os.path.join(REPO, "python"))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import lkjit.torch as lt  # noqa: E402

DT = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# (tag, dtype, B, C, H=W, kh, kw)
ROWS = [("convnext-t", "bf16", 64, c, hw, 7, 7) for c, hw in ((96, 56), (192, 28), (384, 14), (768, 7))] + \
       [("convnext-t", "fp32", 64, 96, 56, 7, 7)] + \
       [("replknet-31b", "bf16", 64, c, hw, k, k) for c, hw, k in ((128, 56, 31), (256, 28, 29), (512, 14, 27),
                                                                  (1024, 7, 13))] + \
       [("replknet-31b", "fp32", 64, 128, 56, 31, 31), ("slak", "bf16", 64, 96, 56, 51, 5),
        ("slak", "bf16", 64, 96, 56, 5, 51)] + \
       [("anchor", "fp32", 64, 256, 56, k, k) for k in (5, 13, 27)]

_flush = None


def timed(fn, warmup, iters):
    """Median ms of fn() over iters CUDA-event timings, L2 flushed before each."""
    global _flush
    if _flush is None:
        _flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(iters):
        _flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ms.append(a.elapsed_time(b))
    return statistics.median(ms)


def layer_rows(args):
    out = []
    print("| layer | dtype | pass | lkjit NCHW | lkjit NHWC | torch NCHW | torch NHWC | best torch / best lkjit |")
    print("|---|---|---|---|---|---|---|---|")
    for tag, dt, B, C, HW, kh, kw in ROWS:
        if args.rows and not re.search(args.rows, f"{tag}/{dt}/k{kh}x{kw}"):
            continue
        dtype = DT[dt]
        conv = nn.Conv2d(C, C, (kh, kw), padding=(kh // 2, kw // 2), groups=C).cuda()
        ours = lt.DepthwiseConv2d.from_conv(conv)  # fp32 parameters; the input in dtype
        torch_m = {"nchw": conv.to(dtype), "nhwc": nn.Conv2d(C, C, (kh, kw), padding=(kh // 2, kw // 2), groups=C)
                   .cuda().to(dtype).to(memory_format=torch.channels_last)}  # parameters in the input dtype
        for train in (False, True):
            t = {}
            for who in ("lkjit", "torch"):
                for layout in ("nchw", "nhwc"):
                    mm = ours if who == "lkjit" else torch_m[layout]
                    x = torch.randn(B, C, HW, HW, device="cuda", dtype=dtype)
                    if layout == "nhwc":
                        x = x.contiguous(memory_format=torch.channels_last)
                    x.requires_grad_(train)

                    def step():
                        if train:
                            y = mm(x)
                            y.backward(torch.ones_like(y))
                        else:
                            with torch.no_grad():
                                mm(x)
                    try:
                        t[(who, layout)] = timed(step, args.warmup, args.iters)
                    except (RuntimeError, ValueError) as e:
                        t[(who, layout)] = float("nan")
                        print(f"<!-- {who} {layout} {tag} failed: {e} -->")
            best_t = min(t[("torch", "nchw")], t[("torch", "nhwc")])
            best_l = min(t[("lkjit", "nchw")], t[("lkjit", "nhwc")])
            name = f"{tag} {B}x{C}x{HW}x{HW} k{kh}x{kw}"
            print(f"| {name} | {dt} | {'train' if train else 'fwd'} | {t[('lkjit', 'nchw')]:.3f} | "
                  f"{t[('lkjit', 'nhwc')]:.3f} | {t[('torch', 'nchw')]:.3f} | {t[('torch', 'nhwc')]:.3f} | "
                  f"{best_t / best_l:.2f}x |")
            out.append({"layer": name, "dtype": dt, "pass": "train" if train else "fwd",
                        **{f"{w}_{l}_ms": v for (w, l), v in t.items()}, "speedup": best_t / best_l})
    return out


def network_rows(args):
    try:
        import timm
    except ImportError:
        print("\nconvnext_tiny: timm is not installed; skipped")
        return []
    out = []
    print("\n| convnext_tiny, batch 64 | precision | mode | images/s unmodified | images/s replace_depthwise | ratio |")
    print("|---|---|---|---|---|---|")
    for amp in (False, True):
        for graph in (False, True):
            ips = {}
            for swapped in (False, True):
                torch.manual_seed(0)
                net = timm.create_model("convnext_tiny").cuda().to(memory_format=torch.channels_last)
                if swapped:
                    lt.replace_depthwise(net)
                opt = torch.optim.SGD(net.parameters(), lr=0.01)
                x = torch.randn(64, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
                target = torch.randint(0, 1000, (64,), device="cuda")

                def step():
                    opt.zero_grad(set_to_none=False)
                    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                        loss = nn.functional.cross_entropy(net(x), target)
                    loss.backward()
                    opt.step()
                run = step
                if graph:
                    s = torch.cuda.Stream()
                    s.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(s):
                        for _ in range(3):
                            step()
                    torch.cuda.current_stream().wait_stream(s)
                    g = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(g):
                        step()
                    run = g.replay
                ms = timed(run, args.net_warmup, args.net_iters)
                ips[swapped] = 64 / (ms * 1e-3)
            prec, mode = "bf16 AMP" if amp else "fp32", "CUDA graph" if graph else "eager"
            print(f"| | {prec} | {mode} | {ips[False]:.0f} | {ips[True]:.0f} | {ips[True] / ips[False]:.2f}x |")
            out.append({"precision": prec, "mode": mode, "ips_unmodified": ips[False], "ips_lkjit": ips[True]})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="5 + 10 iterations per layer, 3 + 5 network steps")
    ap.add_argument("--only", default="layers,network", help="comma-separated: layers, network")
    ap.add_argument("--rows", help="layers whose tag/dtype/kKHxKW matches this regex (e.g. 'replknet-31b/bf16')")
    ap.add_argument("--json", help="write the results to this JSON file (default: $OUT/bench_torch_dwconv.json)")
    args = ap.parse_args()
    args.warmup, args.iters = (5, 10) if args.quick else (10, 30)
    args.net_warmup, args.net_iters = (3, 5) if args.quick else (5, 20)
    if not torch.cuda.is_available():
        print("bench_torch_dwconv: no CUDA device")
        return 0
    torch.backends.cudnn.benchmark = True
    print(f"## DepthwiseConv2d on {torch.cuda.get_device_name()} (torch {torch.__version__})\n")
    only = set(args.only.split(","))
    res = {"layers": layer_rows(args) if "layers" in only else [],
           "network": network_rows(args) if "network" in only else []}
    path = args.json or (os.path.join(os.environ["OUT"], "bench_torch_dwconv.json") if os.environ.get("OUT") else None)
    if path:
        with open(path, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
