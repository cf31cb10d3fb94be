"""lkjit.torch.ScaledCopy: y = a[c] * x, the scale family's layer (include/lkjit/scale.h). The smallest op
family: its modules show what a family adds to the Python side (its C ABI declarations, one custom op with a
fake implementation, a CPU implementation in torch ops, the module) and nothing more; the tests use it to
check that adding a family needs no edit of the shared plumbing (lkjit/_torch_ops.py)."""
import torch
from torch import Tensor, nn

from . import _torch_ops as ops
from ._scale_abi import ScaleLayer

__all__ = ["ScaledCopy", "scale_copy"]


def _fake(x, a):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _cuda(x, a):
    y = torch.empty_like(x, memory_format=torch.contiguous_format)
    layer = ScaleLayer(x.shape[1], ops.DTYPE_CODES[x.dtype], x.get_device())
    B, C, H, W = x.shape
    layer.forward(x.data_ptr(), a.data_ptr(), y.data_ptr(), B, H, W, ops.current_stream(x.get_device()), ops.c_strides(x),
                  ops.c_strides(y))
    return y


_op = ops.define_op("scale_copy", "(Tensor x, Tensor a) -> Tensor", _fake, _cuda)
ops.LIBRARY.impl("scale_copy", lambda x, a: (x.float() * a.view(1, -1, 1, 1)).to(x.dtype).contiguous(), "CPU")


def scale_copy(x: Tensor, a: Tensor) -> Tensor:
    """torch.ops.lkjit.scale_copy: y (B, C, H, W), x's dtype, NCHW contiguous = a[c] * x; x (B, C, H, W) in
    float32/float16/bfloat16 in any layout; a (C) float32 on x's device."""
    if x.dim() != 4 or a.shape != (x.shape[1],):
        raise ValueError(f"lkjit.torch.scale_copy: x must be (B, C, H, W) and a (C,); got {tuple(x.shape)} and "
                         f"{tuple(a.shape)}")
    return _op(x, a.float())


class ScaledCopy(nn.Module):
    """y = scale[c] * x with a per-channel buffer ``scale`` (C,), initialised to ones."""

    def __init__(self, channels):
        super().__init__()
        self.register_buffer("scale", torch.ones(channels))

    def forward(self, x):
        return scale_copy(x, self.scale)
