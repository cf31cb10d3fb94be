"""Timing helpers the PyTorch-level benchmarks share (bench_torch.py, bench_torch_wbmm.py): median CUDA-event
time of back-to-back calls, and the forward / training-step closures of a module."""
import statistics

import torch


def median_ms(fn, warmup, iters):
    """Median ms of fn() over `iters` back-to-back calls, each between two CUDA events, after `warmup` calls."""
    for _ in range(warmup):
        fn()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev)


def fwd_fn(m, x):
    """m(x) without autograd."""
    def f():
        with torch.no_grad():
            m(x)
    return f


def train_fn(m, x, g):
    """A training step's forward and backward of m: m(x).backward(g), gradients reset first."""
    def f():
        x.grad = None
        for p in m.parameters():
            p.grad = None
        m(x).backward(g)
    return f
