"""A CPU kernel for lkjit::wtconv_fwd, lkjit::wtconv_fwd_save and lkjit::wtconv_bwd, registered only by the tests
(register()): the reference algorithm (lkjit/_wtconv_torch_ref.py) in fp32, so that torch.library.opcheck,
torch.compile and the host-time benchmark can run the ops on a machine without a GPU. Production registers no CPU kernel: WTConv2d
runs CPU tensors through PyTorch ops directly."""
import threading

import torch

from lkjit import _torch_ops as ops
from lkjit._wtconv_torch_ref import wtconv2d_torch

_registered = []


def _fwd(x, base_w, base_b, base_s, level_w, level_s, layer_id, stride):
    out = wtconv2d_torch(x.float(), base_w, base_b, base_s, level_w, level_s, stride).to(x.dtype)
    return out.contiguous(memory_format=ops.out_format(x, ops.layout_mode("cpu kernel")))


def _fwd_save(x, base_w, base_b, base_s, level_w, level_s, layer_id, stride):
    return _fwd(x, base_w, base_b, base_s, level_w, level_s, layer_id, stride), x.new_empty(0)  # CPU: no copy


def _bwd(grad_out, x, base_w, base_b, base_s, level_w, level_s, layer_id, stride, reuse_fold=False,
         x_is_nchw_copy=False):
    params = [base_w, base_s, *level_w, *level_s] + ([base_b] if base_b is not None else [])
    L = len(level_w)

    res = []

    def run():  # autograd of the reference; in a thread of its own, since a kernel runs below the autograd key
        xs = x.detach().float().requires_grad_()
        ps = [p.detach().requires_grad_() for p in params]
        out = wtconv2d_torch(xs, ps[0], ps[2 + 2 * L] if base_b is not None else None, ps[1], ps[2:2 + L],
                             ps[2 + L:2 + 2 * L], stride)
        res.append(torch.autograd.grad(out, [xs, *ps], grad_out.float()))
    t = threading.Thread(target=run)
    t.start()
    t.join()
    grads = res[0]
    if x_is_nchw_copy:
        dx = torch.empty_like(x, memory_format=torch.channels_last)
    else:
        dx = torch.empty_like(x) if ops.dense(x, "auto") else x.new_empty(x.shape)
    dx.copy_(grads[0])
    return [dx] + [g.contiguous() for g in grads[1:]]


def register():
    """Registers the CPU kernels once per process (a torch.library.Library kept alive here)."""
    if not _registered:
        lib = torch.library.Library("lkjit", "IMPL")
        lib.impl("wtconv_fwd", _fwd, "CPU")
        lib.impl("wtconv_fwd_save", _fwd_save, "CPU")
        lib.impl("wtconv_bwd", _bwd, "CPU")
        _registered.append(lib)
