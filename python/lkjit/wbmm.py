"""PyTorch WBMM2d running lkjit's fused WBMM kernels (liblkjit.so's C ABI through the C++ binding or ctypes:
lkjit/_torch_ops.py), and the same op in PyTorch ops for CPU tensors.

Math: WBMM of Song et al., "WBMM: Windowed Batch Matrix Multiplication for Efficient Large Receptive Field
Convolution" (ICML 2026); the exact operator is the project's spec, docs/wbmm.md:
    T = windows of x (zero-padded bottom/right to multiples of (wh, ww)),  Y_c = T_c M_c + T_c (+ bias_c),
    M[c, i, j] = R[c, I[i, j]],  I[i, j] = (ih - jh + wh - 1)(2ww - 1) + (iw - jw + ww - 1),
    out = un-window(Y) cropped to (H, W).
The kernels fuse the partition into their loads and stores and build M_c on chip: M is never in device memory.

Ops: ``lkjit::wbmm_fwd`` and ``lkjit::wbmm_bwd`` (fake implementations here; CUDA kernels from the binding when it
implements them, else the ctypes kernels below; CPU kernels in PyTorch ops, lkjit/_wbmm_torch_ref.py). The
module's autograd, eager and compiled: ``_WBMMFunction`` around the two ops (it calls wbmm_fwd below autograd);
wbmm_fwd called directly is differentiable too, through its own registered autograd. Activations in float32, float16 or
bfloat16 in any dense layout (NCHW, channels_last, ...: addressed through their strides, not copied); the output
is channels_last for a channels_last input, NCHW contiguous otherwise. Parameters and their gradients float32.
float32 inputs are fp32-accurate unless ``allow_tf32`` (default: torch.backends.cuda.matmul.allow_tf32, read per
call). Autocast: under CUDA autocast the input is cast to the autocast dtype. The ops run on the device's current
stream and may be captured in CUDA graphs once each shape has run outside capture (its first call compiles).
"""
import math
import threading

from . import _torch_ops as ops  # imports torch, or says how to install it
import torch  # noqa: E402
from torch import Tensor, nn  # noqa: E402

from . import _lib  # noqa: E402
from . import _wbmm_abi as _abi  # noqa: E402
from ._wbmm_torch_ref import relative_position_index, table_to_dense, wbmm_torch, wbmm_torch_backward  # noqa: E402

__all__ = ["WBMM2d", "wbmm", "wbmm_fwd", "wbmm_bwd", "wbmm_torch"]

_WHERE = "lkjit.torch.WBMM2d"
_DTYPE_CODES = ops.DTYPE_CODES


def _window(window_size, where=_WHERE):
    """(wh, ww) of an int or a pair, each in [1, 16]."""
    ws = (window_size, window_size) if not isinstance(window_size, (tuple, list)) else tuple(window_size)
    if len(ws) != 2:
        raise ValueError(f"{where}: window_size must be an int or a pair (wh, ww); got {window_size!r}")
    wh, ww = (_lib.as_int(v, "window_size", where) for v in ws)
    errors = _lib.range_errors("wbmm", [("wh", "wh", wh), ("ww", "ww", ww)])
    if errors:
        raise _lib.SpecError(f"{where}: " + "; ".join(errors))
    return wh, ww


# ---- argument checks: every message comes from the C ABI (lkjit_wbmm_check_tensors), as in the binding ------

def _check(where, x, grad_out, weight, bias, wh, ww, dense, allow_cpu):
    params = [weight] + ([bias] if bias is not None else [])
    ok = isinstance(x, Tensor) and x.dim() == 4 and x.dtype in _DTYPE_CODES and \
        (x.device.type == "cuda" or (allow_cpu and x.device.type == "cpu"))
    if ok:
        C, d, K = x.shape[1], wh * ww, (2 * wh - 1) * (2 * ww - 1)
        ok = tuple(weight.shape) == ((C, d, d) if dense else (C, K)) and (bias is None or tuple(bias.shape) == (C,)) \
            and all(p.device == x.device and p.dtype == torch.float32 for p in params) \
            and (grad_out is None or grad_out.shape == x.shape)
    if ok:
        return
    if not isinstance(x, Tensor):
        raise TypeError(f"{where}: input must be a torch.Tensor; got {type(x).__name__}")
    d = ops.tensor_desc
    C = weight.shape[0] if isinstance(weight, Tensor) and weight.dim() >= 1 else -1  # the layer's channels
    _abi.check_tensors(where, C, wh, ww, dense, d(x), None if grad_out is None else d(grad_out),
                       [d(p) for p in params], allow_cpu)
    raise _lib.LkjitError(f"lkjit: error: internal: {where}: Python refused a call the library accepts", 6)


# ---- the ctypes kernels (CUDA tensors when the binding does not implement the ops) ---------------------------

class _State:
    """A module's lkjit layers, one per (dtype, device, C, window, mode, identity, bias, tf32)."""

    __slots__ = ("layers", "lock")

    def __init__(self):
        self.layers, self.lock = {}, threading.Lock()


_SHARED_ID = None  # the functional form's layers


def _layer(x, weight, bias, wh, ww, dense, identity, allow_tf32, layer_id):
    st = ops.STATES.get(layer_id)
    if st is None:
        raise RuntimeError(f"lkjit: error: {_WHERE}: layer id {layer_id} is not registered (its module was deleted "
                           f"while its autograd graph or compiled code was still in use)")
    tf32 = bool(allow_tf32) and x.dtype == torch.float32
    key = (x.dtype, x.get_device(), x.shape[1], wh, ww, dense, identity, bias is not None, tf32)
    layer = st.layers.get(key)
    if layer is None:
        with st.lock:
            layer = st.layers.get(key)
            if layer is None:
                layer = st.layers[key] = _abi.WBMMLayer(x.shape[1], wh, ww, dense, _DTYPE_CODES[x.dtype], identity,
                                                        bias is not None, tf32, x.get_device())
    # Pointers only (no launch): a replayed CUDA graph reads the values the tensors hold at replay.
    layer.set_weights(weight.data_ptr(), 0 if bias is None else bias.data_ptr())
    return layer


def _fwd_impl(x, weight, bias, wh, ww, dense, identity, allow_tf32, layer_id):
    _check(_FWD, x, None, weight, bias, wh, ww, dense, False)
    mode = ops.layout_mode(_WHERE)
    out = _new_out(x, mode)
    if not ops.dense(x, mode):
        x = x.contiguous()
    if out.numel() == 0:
        return out
    weight, bias = weight.contiguous(), None if bias is None else bias.contiguous()
    layer = _layer(x, weight, bias, wh, ww, dense, identity, allow_tf32, layer_id)
    B, C, H, W = x.shape
    layer.forward(x.data_ptr(), out.data_ptr(), B, H, W, ops.current_stream(x.get_device()), ops.c_strides(x),
                  ops.c_strides(out))
    return out


def _bwd_impl(x, grad_out, weight, bias, wh, ww, dense, identity, allow_tf32, need_dx, layer_id):
    _check(_BWD, x, grad_out, weight, bias, wh, ww, dense, False)
    mode = ops.layout_mode(_WHERE)
    if not ops.dense(x, mode):
        x = x.contiguous()
    if grad_out.dtype != x.dtype:
        grad_out = grad_out.to(x.dtype)
    if not ops.dense(grad_out, mode):  # e.g. the expanded gradient of out.sum()
        grad_out = grad_out.contiguous()
    dx = torch.empty_like(x) if need_dx else x.new_empty((0,))
    dw = torch.empty(weight.shape, dtype=torch.float32, device=x.device)
    db = torch.empty(bias.shape if bias is not None else (0,), dtype=torch.float32, device=x.device)
    if x.numel() == 0:
        return [dx.zero_(), dw.zero_(), db.zero_()]
    weight, bias = weight.contiguous(), None if bias is None else bias.contiguous()
    layer = _layer(x, weight, bias, wh, ww, dense, identity, allow_tf32, layer_id)
    B, C, H, W = x.shape
    layer.backward(x.data_ptr(), grad_out.data_ptr(), dx.data_ptr() if need_dx else 0, dw.data_ptr(),
                   db.data_ptr() if bias is not None else 0, B, H, W, ops.current_stream(x.get_device()),
                   ops.c_strides(x), ops.c_strides(grad_out), ops.c_strides(dx) if need_dx else None)
    return [dx, dw, db]


# ---- CPU kernels: the op in PyTorch ops -------------------------------------------------------------------

def _fwd_cpu(x, weight, bias, wh, ww, dense, identity, allow_tf32, layer_id):
    _check(_FWD, x, None, weight, bias, wh, ww, dense, True)
    return wbmm_torch(x, weight, bias, wh, ww, dense, identity).contiguous(
        memory_format=ops.out_format(x, ops.layout_mode(_WHERE)))


def _bwd_cpu(x, grad_out, weight, bias, wh, ww, dense, identity, allow_tf32, need_dx, layer_id):
    _check(_BWD, x, grad_out, weight, bias, wh, ww, dense, True)
    dx, dw, db = wbmm_torch_backward(x, grad_out, weight, bias, wh, ww, dense, identity, need_dx)
    dx = dx.contiguous(memory_format=torch.contiguous_format) if need_dx else x.new_empty((0,))
    if need_dx and ops.dense(x, ops.layout_mode(_WHERE)):
        dx = torch.empty_like(x).copy_(dx)  # x's strides, as the CUDA kernel writes dX
    return [dx, dw, db if db is not None else x.new_empty((0,), dtype=torch.float32)]


# ---- the ops ------------------------------------------------------------------------------------------

def _new_out(x, mode):
    return torch.empty(x.shape, dtype=x.dtype, device=x.device, memory_format=ops.out_format(x, mode))


def _fwd_fake(x, weight, bias, wh, ww, dense, identity, allow_tf32, layer_id):
    return _new_out(x, ops.layout_mode(_WHERE))


def _bwd_fake(x, grad_out, weight, bias, wh, ww, dense, identity, allow_tf32, need_dx, layer_id):
    if need_dx:
        dx = torch.empty_like(x) if ops.dense(x, ops.layout_mode(_WHERE)) else x.new_empty(x.shape)
    else:
        dx = x.new_empty((0,))
    return [dx, weight.new_empty(weight.shape, dtype=torch.float32),
            weight.new_empty(bias.shape if bias is not None else (0,), dtype=torch.float32)]


def _op_setup_context(ctx, inputs, output):
    x, weight, bias, wh, ww, dense, identity, allow_tf32, layer_id = inputs
    ctx.cfg = (wh, ww, dense, identity, allow_tf32, layer_id)
    ctx.save_for_backward(x, weight, bias)


def _op_backward(ctx, grad_out):
    """wbmm_fwd's own autograd (a direct call of the op): lkjit::wbmm_bwd, gradients in the op's input order."""
    x, weight, bias = ctx.saved_tensors
    wh, ww, dense, identity, allow_tf32, layer_id = ctx.cfg
    need_dx = ctx.needs_input_grad[0]
    dx, dw, db = wbmm_bwd(x, grad_out, weight, bias, wh, ww, dense, identity, allow_tf32, need_dx, layer_id)
    return (dx if need_dx else None, dw, db if bias is not None else None) + (None,) * 6


_FWD, _BWD = "lkjit::wbmm_fwd", "lkjit::wbmm_bwd"
wbmm_fwd = ops.define_op(
    "wbmm_fwd", "(Tensor x, Tensor weight, Tensor? bias, int wh, int ww, bool dense, bool identity, bool allow_tf32, "
    "int layer_id) -> Tensor", _fwd_fake, _fwd_impl, autograd=(_op_backward, _op_setup_context))
# No autograd for wbmm_bwd: no double backward.
wbmm_bwd = ops.define_op(
    "wbmm_bwd", "(Tensor x, Tensor grad_out, Tensor weight, Tensor? bias, int wh, int ww, bool dense, bool identity, "
    "bool allow_tf32, bool need_dx, int layer_id) -> Tensor[]", _bwd_fake, _bwd_impl)
ops.LIBRARY.impl("wbmm_fwd", _fwd_cpu, "CPU")
ops.LIBRARY.impl("wbmm_bwd", _bwd_cpu, "CPU")


_BELOW_AUTOGRAD = torch._C._AutoDispatchBelowAutograd


def _fwd_no_autograd(*args):
    """lkjit::wbmm_fwd inside _WBMMFunction: below the autograd keys, so the op's Python autograd wrapper does not
    run on every call (as WTConv's); under torch.compile the plain op, which dynamo records."""
    if ops.is_compiling():
        return wbmm_fwd(*args)
    with _BELOW_AUTOGRAD():
        return wbmm_fwd(*args)


class _WBMMFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, wh, ww, dense, identity, allow_tf32, layer_id):
        w32, b32 = ops.f32(weight), None if bias is None else ops.f32(bias)
        ctx.save_for_backward(x, w32, b32)
        ctx.cfg = (wh, ww, dense, identity, allow_tf32, layer_id)
        ctx.dtypes = (weight.dtype, None if bias is None else bias.dtype)
        return _fwd_no_autograd(x, w32, b32, wh, ww, dense, identity, allow_tf32, layer_id)

    @staticmethod
    def backward(ctx, grad_out):
        x, w32, b32 = ctx.saved_tensors
        wh, ww, dense, identity, allow_tf32, layer_id = ctx.cfg
        need_dx = ctx.needs_input_grad[0]
        dx, dw, db = wbmm_bwd(x, grad_out, w32, b32, wh, ww, dense, identity, allow_tf32, need_dx, layer_id)
        return (dx if need_dx else None, dw.to(ctx.dtypes[0]), None if b32 is None else db.to(ctx.dtypes[1]),
                None, None, None, None, None, None)


def _run(x, weight, bias, wh, ww, dense, identity, allow_tf32, layer_id):
    if allow_tf32 is None:
        allow_tf32 = torch.backends.cuda.matmul.allow_tf32
    if isinstance(x, Tensor) and x.device.type == "cuda":
        cast = ops.autocast_dtype()
        if cast is not None and x.dtype != cast:
            x = x.to(cast)
    return _WBMMFunction.apply(x, weight, bias, wh, ww, bool(dense), bool(identity), bool(allow_tf32), layer_id)


def wbmm(x: Tensor, weight: Tensor, bias: Tensor = None, window_size=7, dense=False, identity=True,
         allow_tf32=None) -> Tensor:
    """WBMM of x (B, C, H, W; float32/float16/bfloat16, any layout, CUDA or CPU) with weight R
    (C, (2wh-1)(2ww-1)) or, dense, M (C, wh*ww, wh*ww), and bias (C) or None: out (B, C, H, W) in x's dtype.
    Differentiable in x, weight and bias. ValueError/TypeError naming a bad argument."""
    global _SHARED_ID
    wh, ww = _window(window_size, "lkjit.torch.wbmm")
    if _SHARED_ID is None:
        _SHARED_ID = ops.new_layer_id(_State, _State())  # lives as long as the class: the process
    return _run(x, weight, bias, wh, ww, dense, identity, allow_tf32, _SHARED_ID)


class WBMM2d(nn.Module):
    """WBMM2d(channels, window_size=7, bias=False, dense=False, identity=True, allow_tf32=None).

    Per-channel matrix products inside non-overlapping windows (Song et al., ICML 2026; docs/wbmm.md): input and
    output (B, channels, H, W), any H and W (zero-padded windows, cropped). Parameters (float32):
      relative_position_bias_table (channels, (2wh-1)(2ww-1)), trunc_normal(std=0.02): the published module's
        name and shape, so its state_dict loads as it is (its relative_position_index buffer, a function of the
        window, is accepted and checked on load); or, with dense=True, M (channels, wh*ww, wh*ww) (rows: input
        positions), for reparameterised models;
      bias (channels), zeros, with bias=True (the deploy form: fuse_bn).
    identity: the op's + x shortcut (fuse_identity() folds it into the weights). allow_tf32 (float32 inputs):
    None follows torch.backends.cuda.matmul.allow_tf32 per call; False is fp32-accurate."""

    def __init__(self, channels, window_size=7, bias=False, dense=False, identity=True, allow_tf32=None):
        super().__init__()
        self.wh, self.ww = _window(window_size)
        C = _lib.as_int(channels, "channels", _WHERE)
        errors = _lib.range_errors("wbmm", [("channels", "C", C)])
        if errors:
            raise _lib.SpecError(f"{_WHERE}: " + "; ".join(errors))
        self.channels = C
        self.dense = _lib.as_bool(dense, "dense", _WHERE)
        self.identity = _lib.as_bool(identity, "identity", _WHERE)
        self.allow_tf32 = allow_tf32
        d, K = self.wh * self.ww, (2 * self.wh - 1) * (2 * self.ww - 1)
        if self.dense:
            self.M = nn.Parameter(torch.zeros(C, d, d))
        else:
            self.relative_position_bias_table = nn.Parameter(torch.empty(C, K))
            nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.bias = nn.Parameter(torch.zeros(C)) if _lib.as_bool(bias, "bias", _WHERE) else None
        self._layer_id = ops.new_layer_id(self, _State())

    @property
    def window_size(self):
        return (self.wh, self.ww)

    @property
    def weight(self):
        """R (table mode) or M (dense mode)."""
        return self.M if self.dense else self.relative_position_bias_table

    def forward(self, x):
        return _run(x, self.weight, self.bias, self.wh, self.ww, self.dense, self.identity, self.allow_tf32,
                    self._layer_id)

    def extra_repr(self):
        return (f"{self.channels}, window_size={self.window_size}, bias={self.bias is not None}, dense={self.dense}, "
                f"identity={self.identity}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        key = prefix + "relative_position_index"
        if key in state_dict:  # the published module's buffer: the index of this window, or the load fails
            idx = state_dict.pop(key)
            want = relative_position_index(self.wh, self.ww)
            if tuple(idx.shape) != tuple(want.shape) or not torch.equal(idx.cpu().long(), want):
                error_msgs.append(f"{_WHERE}: {key} is not the relative position index of window {self.window_size}")
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    @torch.no_grad()
    def fuse_identity(self):
        """Folds the + x shortcut into the weights (R's centre tap, or M's diagonal, += 1); identity becomes
        False and the output is unchanged. Returns self."""
        if self.identity:
            if self.dense:
                self.M.diagonal(dim1=1, dim2=2).add_(1.0)
            else:
                self.relative_position_bias_table[:, (self.wh - 1) * (2 * self.ww - 1) + self.ww - 1] += 1.0
            self.identity = False
        return self

    @torch.no_grad()
    def fuse_bn(self, bn):
        """The deploy form of WBMM2d followed by ``bn`` (a BatchNorm2d in eval mode over the same channels): the
        identity folded in, the weights scaled per channel by s = gamma / sqrt(var + eps), and the bias
        beta - s * mean (+ s * bias). Returns a new WBMM2d with bias; self is unchanged."""
        if not isinstance(bn, nn.BatchNorm2d) or bn.num_features != self.channels or bn.running_var is None:
            raise ValueError(f"{_WHERE}.fuse_bn: bn must be a BatchNorm2d({self.channels}) with running statistics; "
                             f"got {bn!r}")
        out = WBMM2d(self.channels, self.window_size, bias=True, dense=self.dense, identity=self.identity,
                     allow_tf32=self.allow_tf32).to(self.weight.device)
        out.weight.copy_(self.weight)
        out.fuse_identity()
        s = (bn.weight if bn.affine else torch.ones_like(bn.running_var)) / torch.sqrt(bn.running_var + bn.eps)
        out.weight.mul_(s.view(-1, *([1] * (out.weight.dim() - 1))))
        beta = bn.bias if bn.affine else torch.zeros_like(bn.running_mean)
        b = self.bias if self.bias is not None else torch.zeros_like(s)
        out.bias.copy_(beta + s * (b - bn.running_mean))
        return out

    @torch.no_grad()
    def to_dense(self):
        """A dense-mode copy (M = R[:, I]) with the same output; for folding other branches into M."""
        if self.dense:
            return self
        out = WBMM2d(self.channels, self.window_size, bias=self.bias is not None, dense=True, identity=self.identity,
                     allow_tf32=self.allow_tf32).to(self.weight.device)
        out.M.copy_(table_to_dense(self.relative_position_bias_table, self.wh, self.ww))
        if self.bias is not None:
            out.bias.copy_(self.bias)
        return out
