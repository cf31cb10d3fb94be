"""WTConv in PyTorch ops: what WTConv2d runs on CPU tensors, so that a model with the layer runs, traces and
exports anywhere (no lkjit kernel, no custom op in the graph). Algorithm 1 of Finder et al., "Wavelet
Convolutions for Large Receptive Fields" (ECCV 2024), as the project's operator spec (docs/wtconv.md) states
it and runtime/reference/wtconv_ref.cpp computes it in float64:

level by level, zero-pad an odd size by one row/col at the bottom/right, Haar analysis as a fixed 2x2 stride-2
depthwise conv (channel 4c+s = subband s = LL, LH, HL, HH of c; taps exactly +-1/2), scaled k x k depthwise
conv of all four subbands; the raw LL band feeds the next level; synthesis from the deepest level up as the
transposed Haar conv of (Z_l[LL] + R_{l+1}, Z_l[LH], Z_l[HL], Z_l[HH]), cropped to the level's input size;
out = s0 * (dw(X, W0) + b) + R_1, then out[..., ::stride, ::stride]. Autograd differentiates it.
"""
import torch
import torch.nn.functional as F


def haar_taps(C, dtype, device):
    """(4C, 1, 2, 2): LL, LH, HL, HH taps of each channel; entries +-1/2."""
    f = torch.tensor([[[1, 1], [1, 1]], [[1, 1], [-1, -1]], [[1, -1], [1, -1]], [[1, -1], [-1, 1]]],
                     dtype=dtype, device=device) * 0.5
    return f.unsqueeze(1).repeat(C, 1, 1, 1)


def wtconv2d_torch(x, base_w, base_b, base_s, level_w, level_s, stride=1):
    """x (B, C, H, W); base_w (C,1,k,k); base_b (C) or None; base_s (1,C,1,1); level_w[l] (4C,1,k,k);
    level_s[l] (1,4C,1,1) (same number of elements in other shapes is reshaped); all in x's dtype and device.
    Returns (B, C, ceil(H/stride), ceil(W/stride))."""
    B, C, H, W = x.shape
    k = base_w.shape[-1]
    pad = k // 2
    taps = haar_taps(C, x.dtype, x.device)
    cur, sizes, zs = x, [], []
    for w, s in zip(level_w, level_s):
        h, wd = cur.shape[-2:]
        sizes.append((h, wd))
        if h % 2 or wd % 2:
            cur = F.pad(cur, (0, wd % 2, 0, h % 2))
        y = F.conv2d(cur, taps, stride=2, groups=C)                                   # Y_l (B, 4C, h', w')
        zs.append(F.conv2d(y, w.reshape(4 * C, 1, k, k), padding=pad, groups=4 * C) * s.reshape(1, 4 * C, 1, 1))
        cur = y[:, 0::4]                                                              # X_l = Y_l[LL], raw
    r = None
    for z, (h, wd) in zip(reversed(zs), reversed(sizes)):
        if r is not None:
            zb = z.reshape(B, C, 4, z.shape[-2], z.shape[-1])
            z = torch.cat([zb[:, :, :1] + r.unsqueeze(2), zb[:, :, 1:]], dim=2).reshape(z.shape)
        r = F.conv_transpose2d(z, taps, stride=2, groups=C)[..., :h, :wd]
    out = F.conv2d(x, base_w.reshape(C, 1, k, k), None if base_b is None else base_b.reshape(C), padding=pad,
                   groups=C) * base_s.reshape(1, C, 1, 1)
    if r is not None:
        out = out + r
    if stride > 1:
        out = out[..., ::stride, ::stride]
    return out
