"""WBMM in PyTorch ops: what WBMM2d runs on CPU tensors, so that a model with the layer runs, traces and exports
anywhere. The operator of Song et al., "WBMM: Windowed Batch Matrix Multiplication for Efficient Large Receptive
Field Convolution" (ICML 2026), as the project's spec (docs/wbmm.md) states it and
runtime/reference/wbmm_ref.cpp computes it in float64, in the published algorithm's form: zero-pad H, W
bottom/right to multiples of the window, partition into windows T (C, N, d), Y = T.M (+ T) with
M[c, i, j] = R[c, I[i, j]], un-partition and crop, + bias. The backward is written out (the op's own
equations), so that dR is the fixed-order sum a deterministic kernel gives.
"""
import math

import torch
import torch.nn.functional as F


def relative_position_index(wh, ww, device=None):
    """I (d, d), int64: I[i, j] = (ih - jh + wh - 1)(2ww - 1) + (iw - jw + ww - 1), positions i = ih*ww + iw."""
    ih, iw = torch.meshgrid(torch.arange(wh, device=device), torch.arange(ww, device=device), indexing="ij")
    ih, iw = ih.reshape(-1), iw.reshape(-1)
    return (ih[:, None] - ih[None, :] + wh - 1) * (2 * ww - 1) + (iw[:, None] - iw[None, :] + ww - 1)


def table_to_dense(R, wh, ww):
    """M (C, d, d) of a table R (C, (2wh-1)(2ww-1)): M[c, i, j] = R[c, I[i, j]]."""
    return R[:, relative_position_index(wh, ww, R.device)]


def _windows(x, wh, ww):
    """T (C, N, d) of x (B, C, H, W), windows n = (b*nH + h)*nW + v of the zero-padded map."""
    B, C, H, W = x.shape
    nH, nW = math.ceil(H / wh), math.ceil(W / ww)
    xp = F.pad(x, (0, nW * ww - W, 0, nH * wh - H))
    return xp.view(B, C, nH, wh, nW, ww).permute(1, 0, 2, 4, 3, 5).reshape(C, B * nH * nW, wh * ww)


def _unwindow(Y, B, H, W, wh, ww):
    C = Y.shape[0]
    nH, nW = math.ceil(H / wh), math.ceil(W / ww)
    out = Y.view(C, B, nH, nW, wh, ww).permute(1, 0, 2, 4, 3, 5).reshape(B, C, nH * wh, nW * ww)
    return out[:, :, :H, :W]


def _dense_m(weight, wh, ww, dense):
    return weight if dense else table_to_dense(weight, wh, ww)


def wbmm_torch(x, weight, bias, wh, ww, dense=False, identity=True):
    """out (B, C, H, W) in x's dtype, NCHW contiguous; computed in float32 (float64 for float64 inputs).
    weight: R (C, (2wh-1)(2ww-1)) or, dense, M (C, wh*ww, wh*ww); bias (C) or None. Autograd differentiates it."""
    B, C, H, W = x.shape
    ct = torch.float64 if x.dtype == torch.float64 else torch.float32
    T = _windows(x.to(ct), wh, ww)
    Y = torch.bmm(T, _dense_m(weight.to(ct), wh, ww, dense))
    if identity:
        Y = Y + T
    out = _unwindow(Y, B, H, W, wh, ww)
    if bias is not None:
        out = out + bias.to(ct).view(1, -1, 1, 1)
    return out.to(x.dtype).contiguous()


def wbmm_torch_backward(x, grad_out, weight, bias, wh, ww, dense=False, identity=True, need_dx=True):
    """(dx or None, dweight, dbias or None) of wbmm_torch: dT = dY M^T (+ dY), dM[c] = sum_n T^T dY,
    dR[c, k] = sum of dM[c] over I = k, dbias[c] = sum of dY[c]. dx in x's dtype; gradients float32."""
    B, C, H, W = x.shape
    ct = torch.float64 if x.dtype == torch.float64 else torch.float32
    T, dY = _windows(x.to(ct), wh, ww), _windows(grad_out.to(ct), wh, ww)
    M = _dense_m(weight.to(ct), wh, ww, dense)
    dx = None
    if need_dx:
        dT = torch.bmm(dY, M.transpose(1, 2))
        if identity:
            dT = dT + dY
        dx = _unwindow(dT, B, H, W, wh, ww).to(x.dtype).contiguous()
    dM = torch.bmm(T.transpose(1, 2), dY)  # (C, d, d)
    if dense:
        dw = dM
    else:
        idx = relative_position_index(wh, ww, x.device).reshape(-1).expand(C, -1)
        dw = torch.zeros(C, (2 * wh - 1) * (2 * ww - 1), dtype=ct, device=x.device).scatter_add_(1, idx, dM.reshape(C, -1))
    db = grad_out.to(ct).sum(dim=(0, 2, 3)) if bias is not None else None
    return dx, dw.float(), None if db is None else db.float()
