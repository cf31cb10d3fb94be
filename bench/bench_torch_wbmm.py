"""WBMM rows of bench/bench_torch.py (`--only wbmm`): lkjit.torch.WBMM2d against the PyTorch path, the published
algorithm in PyTorch ops (partition copy, bmm with a materialised M in the input dtype, + T, un-partition copy),
written here from the spec (docs/wbmm.md).

1. The operator study: C = 256 at 51.4 M elements (64 x 256 x 56 x 56), windows 7 and 14, fp32 with TF32 off
   (PyTorch's default, against lkjit's fp32-accurate mode) and on (both TF32), and bf16: forward (no_grad) and
   forward + backward ms, medians of CUDA-event timed iterations, and peak memory of a training step; the issue's
   H200 numbers for the PyTorch path: fp32 W7 0.78 / 2.22, W14 1.19 / 4.88; bf16 W7 0.57 / 1.56, W14 0.66 / 3.10.
2. The WBMM-T layers (batch 128, 7x7 windows: 80 @ 56, 160 @ 28, 320 @ 14, 640 @ 7) in bf16, NCHW and
   channels_last.
3. End to end: a training step (SGD, cross-entropy, bf16 autocast) of a WBMM-T network at batch 128 (fewer with
   --wbmm-batch), 224 x 224: a 4x4 stride-4 stem, stages of depths 3, 3, 18, 3 at 80, 160, 320, 640 channels
   with 2x2 stride-2 downsampling between them, each block ConvNeXt-shaped (token mixer, BatchNorm, 1x1 conv
   to 4C, GELU, 1x1 conv back, residual). The paper's W/D pattern is taken as blocks alternating a WBMM mixer (W:
   7x7 windows) and a 7x7 depthwise conv mixer (D), W first in each stage, as a stand-in where the published
   pattern is not at hand; the same network on the PyTorch path differs only in its W mixers.
"""
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

from lkjit.torch import WBMM2d
from lkjit._wbmm_torch_ref import relative_position_index
from torch_timing import fwd_fn, median_ms, train_fn

DT = {"fp32": torch.float32, "bf16": torch.bfloat16}
STUDY = [(w, dt, tf32) for w in (7, 14) for dt, tf32 in (("fp32", False), ("fp32", True), ("bf16", False))]
WBMM_T = [(80, 56), (160, 28), (320, 14), (640, 7)]
# The PyTorch-path numbers on the H200 (fwd, fwd+bwd ms), fp32 with TF32 off.
ANCHORS = {("fp32", 7): (0.78, 2.22), ("fp32", 14): (1.19, 4.88), ("bf16", 7): (0.57, 1.56), ("bf16", 14): (0.66, 3.10)}
MIB = 1 << 20


class TorchPathWBMM2d(nn.Module):
    """The published algorithm in PyTorch ops, in the input dtype: pad, partition copy, bmm with M = R[:, I],
    + T, un-partition copy, crop. Same parameter as WBMM2d (relative_position_bias_table)."""

    def __init__(self, channels, window_size=7):
        super().__init__()
        self.w = window_size
        self.relative_position_bias_table = nn.Parameter(torch.empty(channels, (2 * window_size - 1) ** 2))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.register_buffer("relative_position_index", relative_position_index(window_size, window_size))

    def forward(self, x):
        B, C, H, W = x.shape
        w = self.w
        nH, nW = math.ceil(H / w), math.ceil(W / w)
        xp = F.pad(x, (0, nW * w - W, 0, nH * w - H))
        T = xp.view(B, C, nH, w, nW, w).permute(1, 0, 2, 4, 3, 5).reshape(C, B * nH * nW, w * w)
        M = self.relative_position_bias_table[:, self.relative_position_index].to(T.dtype)
        Y = torch.bmm(T, M) + T
        out = Y.view(C, B, nH, nW, w, w).permute(1, 0, 2, 4, 3, 5).reshape(B, C, nH * w, nW * w)
        return out[:, :, :H, :W]








def _peak_mib(fn):
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - base) / MIB


def _pair(C, w, dtype):
    torch.manual_seed(0)
    lk = WBMM2d(C, w).cuda()
    ref = TorchPathWBMM2d(C, w).cuda()
    ref.load_state_dict(lk.state_dict(), strict=False)
    return lk, ref


def _layer_row(args, B, C, H, w, dt_name, tf32, channels_last):
    dtype = DT[dt_name]
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        lk, ref = _pair(C, w, dtype)
        x = torch.randn(B, C, H, H, device="cuda", dtype=dtype)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        x.requires_grad_()
        g = torch.randn_like(x)
        row = {"dtype": dt_name, "tf32": tf32, "B": B, "C": C, "H": H, "window": w,
               "layout": "channels_last" if channels_last else "NCHW"}
        with torch.no_grad():
            a, b = lk(x).float(), ref(x).float()
            row["max_rel_diff_vs_torch"] = ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()
        for name, m in (("lkjit", lk), ("torch", ref)):
            row[f"{name}_fwd_ms"] = median_ms(fwd_fn(m, x), args.warmup, args.iters)
            row[f"{name}_train_ms"] = median_ms(train_fn(m, x, g), args.warmup, args.iters)
            row[f"{name}_train_peak_MiB"] = _peak_mib(train_fn(m, x, g))
        row["train_speedup"] = row["torch_train_ms"] / row["lkjit_train_ms"]
        row["issue_torch_ms"] = ANCHORS.get((dt_name, w)) if B == 64 and not tf32 else None
        print(f"  {dt_name}{' tf32' if tf32 else ''} {B}x{C}x{H}x{H} w{w} {row['layout']}: lkjit "
              f"{row['lkjit_fwd_ms']:.3f} / {row['lkjit_train_ms']:.3f} ms, torch {row['torch_fwd_ms']:.3f} / "
              f"{row['torch_train_ms']:.3f} ms", file=sys.stderr)
        return row
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


class Block(nn.Module):
    def __init__(self, C, mixer):
        super().__init__()
        self.mixer, self.norm = mixer, nn.BatchNorm2d(C)
        self.pw1, self.pw2 = nn.Conv2d(C, 4 * C, 1), nn.Conv2d(4 * C, C, 1)

    def forward(self, x):
        return x + self.pw2(F.gelu(self.pw1(self.norm(self.mixer(x)))))


def wbmm_t(lkjit_mixer=True, depths=(3, 3, 18, 3), dims=(80, 160, 320, 640), classes=1000):
    layers = [nn.Conv2d(3, dims[0], 4, stride=4), nn.BatchNorm2d(dims[0])]
    for s, (n, C) in enumerate(zip(depths, dims)):
        if s:
            layers += [nn.BatchNorm2d(dims[s - 1]), nn.Conv2d(dims[s - 1], C, 2, stride=2)]
        for i in range(n):
            if i % 2 == 0:  # W
                mixer = WBMM2d(C, 7) if lkjit_mixer else TorchPathWBMM2d(C, 7)
            else:  # D
                mixer = nn.Conv2d(C, C, 7, padding=3, groups=C)
            layers.append(Block(C, mixer))
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.LayerNorm(dims[-1]), nn.Linear(dims[-1], classes)]
    return nn.Sequential(*layers)


def _network_row(args, lkjit_mixer, B):
    torch.manual_seed(0)
    model = wbmm_t(lkjit_mixer).cuda().train().to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(B, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (B,), device="cuda")
    losses = []

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())

    ms = median_ms(step, args.net_warmup, args.net_iters)
    torch.cuda.reset_peak_memory_stats()
    step()
    torch.cuda.synchronize()
    return {"model": "WBMM-T (" + ("lkjit WBMM2d" if lkjit_mixer else "PyTorch path") + ")", "amp": "bf16", "batch": B,
            "step_ms": ms, "images_per_s": B / (ms / 1000), "peak_MiB": torch.cuda.max_memory_allocated() / MIB,
            "losses_finite": bool(torch.isfinite(torch.stack(losses)).all())}


def bench_wbmm(args):
    res = {"study": [], "wbmm_t_layers": [], "network": []}
    for w, dt_name, tf32 in STUDY:
        res["study"].append(_layer_row(args, 64, 256, 56, w, dt_name, tf32, False))
    for channels_last in (False, True):
        for C, H in WBMM_T:
            res["wbmm_t_layers"].append(_layer_row(args, 128, C, H, 7, "bf16", False, channels_last))
    B = getattr(args, "wbmm_batch", 128)
    for lkjit_mixer in (True, False):
        res["network"].append(_network_row(args, lkjit_mixer, B))
    return res


def print_wbmm_tables(r):
    print("\n### WBMM: lkjit.torch.WBMM2d vs the PyTorch path (published algorithm in PyTorch ops)\n")
    print("| dtype | B x C x H=W | window | layout | lkjit fwd ms | torch fwd ms | lkjit fwd+bwd ms | torch fwd+bwd ms | "
          "fwd+bwd speedup | peak MiB lkjit / torch | issue's torch ms | max rel diff |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for row in r["study"] + r["wbmm_t_layers"]:
        a = row["issue_torch_ms"]
        print(f"| {row['dtype']}{' TF32' if row['tf32'] else ''} | {row['B']}x{row['C']}x{row['H']} | {row['window']} | "
              f"{row['layout']} | {row['lkjit_fwd_ms']:.3f} | {row['torch_fwd_ms']:.3f} | {row['lkjit_train_ms']:.3f} | "
              f"{row['torch_train_ms']:.3f} | {row['train_speedup']:.2f}x | {row['lkjit_train_peak_MiB']:.0f} / "
              f"{row['torch_train_peak_MiB']:.0f} | {'' if a is None else f'{a[0]} / {a[1]}'} | "
              f"{row['max_rel_diff_vs_torch']:.1e} |")
    if r["network"]:
        print("\n| network (bf16 AMP training step) | batch | step ms | images/s | peak MiB | losses finite |")
        print("|---|---|---|---|---|---|")
        for n in r["network"]:
            print(f"| {n['model']} | {n['batch']} | {n['step_ms']:.1f} | {n['images_per_s']:.0f} | {n['peak_MiB']:.0f} | "
                  f"{n['losses_finite']} |")
