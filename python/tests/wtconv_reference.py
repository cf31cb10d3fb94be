"""WTConv written in PyTorch the way the reference computes it: Algorithm 1 of Finder et al.,
"Wavelet Convolutions for Large Receptive Fields" (ECCV 2024), as specified in the project's
docs/wtconv.md. Ground truth for tests/test_torch_gpu.py and the baseline "ref" of bench/bench_torch.py.

Level by level: zero-pad an odd size by one row/col at the bottom/right, Haar analysis as a fixed 2x2
stride-2 depthwise conv (4 subbands per channel, channel 4c+s = subband s = LL, LH, HL, HH of c),
scaled k x k depthwise conv on all four subbands, the RAW low band feeds the next level; synthesis from
the deepest level up as a 2x2 stride-2 transposed conv of (Z_l[LL] + R_{l+1}, Z_l[LH], Z_l[HL], Z_l[HH]),
cropped to the level's input size; out = s0 * (dw(X, W0) + b) + R_1, then out[..., ::stride, ::stride].
Haar taps are exactly +-1/2 (LL = (a+b+c+d)/2, LH = (a+b-c-d)/2, HL = (a-b+c-d)/2, HH = (a-b-c+d)/2).
Autograd differentiates all of it, so the same code gives reference gradients.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn


def haar_filters(C, dtype, device):
    """(4C, 1, 2, 2): for each channel the LL, LH, HL, HH taps; entries +-1/2."""
    f = torch.tensor([[[1, 1], [1, 1]],      # LL
                      [[1, 1], [-1, -1]],    # LH: top row minus bottom row
                      [[1, -1], [1, -1]],    # HL: left col minus right col
                      [[1, -1], [-1, 1]]],   # HH
                     dtype=dtype, device=device) * 0.5
    return f.unsqueeze(1).repeat(C, 1, 1, 1)


def wtconv2d_reference(x, base_w, base_b, base_s, level_w, level_s, stride=1):
    """x (B, C, H, W); base_w (C,1,k,k); base_b (C) or None; base_s (1,C,1,1); level_w[l] (4C,1,k,k);
    level_s[l] (1,4C,1,1). Everything in x's dtype and device. Returns (B, C, ceil(H/s), ceil(W/s))."""
    B, C, H, W = x.shape
    k = base_w.shape[-1]
    pad = k // 2
    filt = haar_filters(C, x.dtype, x.device)
    cur, sizes, zs = x, [], []
    for w, s in zip(level_w, level_s):
        h, wd = cur.shape[-2:]
        sizes.append((h, wd))
        if h % 2 or wd % 2:
            cur = F.pad(cur, (0, wd % 2, 0, h % 2))
        y = F.conv2d(cur, filt, stride=2, groups=C)                  # Y_l: (B, 4C, h', w')
        zs.append(F.conv2d(y, w, padding=pad, groups=4 * C) * s)      # Z_l = s_l * dw(Y_l, W_l)
        cur = y[:, 0::4]                                              # X_l = Y_l[LL], raw
    r = None
    for z, (h, wd) in zip(reversed(zs), reversed(sizes)):
        if r is not None:
            zb = z.reshape(B, C, 4, z.shape[-2], z.shape[-1])
            z = torch.cat([zb[:, :, :1] + r.unsqueeze(2), zb[:, :, 1:]], dim=2).reshape(z.shape)
        r = F.conv_transpose2d(z, filt, stride=2, groups=C)[..., :h, :wd]
    out = F.conv2d(x, base_w, base_b, padding=pad, groups=C) * base_s
    if r is not None:
        out = out + r
    if stride > 1:
        out = out[..., ::stride, ::stride]
    return out


class ReferenceWTConv2d(nn.Module):
    """The reference algorithm as a module, with the reference state_dict names and init; runs in the
    dtype of its parameters (convert with .to(dtype)). Used as the baseline in bench/bench_torch.py."""

    def __init__(self, channels, kernel_size=5, stride=1, bias=True, wt_levels=1):
        super().__init__()
        C, k = channels, kernel_size
        self.stride = stride
        self.base_conv = nn.Conv2d(C, C, k, padding=k // 2, groups=C, bias=bias)
        self.base_scale = _Scale((1, C, 1, 1), 1.0)
        self.wavelet_convs = nn.ModuleList(nn.Conv2d(4 * C, 4 * C, k, padding=k // 2, groups=4 * C, bias=False)
                                           for _ in range(wt_levels))
        self.wavelet_scale = nn.ModuleList(_Scale((1, 4 * C, 1, 1), 0.1) for _ in range(wt_levels))

    def forward(self, x):
        return wtconv2d_reference(x, self.base_conv.weight, self.base_conv.bias, self.base_scale.weight,
                                  [m.weight for m in self.wavelet_convs], [m.weight for m in self.wavelet_scale],
                                  self.stride)


class _Scale(nn.Module):
    def __init__(self, shape, value):
        super().__init__()
        self.weight = nn.Parameter(torch.full(shape, float(value)))


def params_of(module):
    """(base_w, base_b, base_s, level_w list, level_s list) of a WTConv2d-like module."""
    return (module.base_conv.weight, module.base_conv.bias, module.base_scale.weight,
            [m.weight for m in module.wavelet_convs], [m.weight for m in module.wavelet_scale])


def out_size(n, stride):
    return math.ceil(n / stride)
