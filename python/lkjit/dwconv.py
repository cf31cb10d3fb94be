"""lkjit.torch.DepthwiseConv2d: a drop-in for a depthwise nn.Conv2d (groups = in_channels = out_channels) running
lkjit's depthwise kernels (include/lkjit/dwconv.h; docs/dwconv.md), and a PyTorch implementation of the same op
for CPU tensors.

Math (nn.Conv2d with groups = C, zero padding):
    y[b,c,i,j] = bias[c] + sum_{u<kh, v<kw} w[c,0,u,v] * x[b, c, i*s + u*d - ph, j*s + v*d - pw]
Gradients: dx (at stride 1 the forward with the filter rotated, at stride 2 a gather), dw and dbias reduced in a
fixed order (bit-identical across runs).

Ops: ``lkjit::dwconv_fwd`` and ``lkjit::dwconv_bwd`` (fake implementations for torch.compile; CUDA kernels through
ctypes over the C ABI; CPU kernels in PyTorch ops, so the ops run, trace and pass opcheck anywhere). One autograd
mechanism, eager and compiled: ``_DWConvFunction`` around the two ops. Autocast: x in the autocast dtype,
parameters fp32. The current CUDA stream; CUDA graphs once a shape has run outside capture (a first call compiles
and allocates). Layout: dense inputs in any dim order are read through their strides (channels_last runs the
NHWC kernels); the output is channels_last for a channels_last input, NCHW contiguous otherwise; dx has x's
strides.
"""
import collections
import math
import threading
import typing

from . import _torch_ops as ops  # imports torch, or says how to install it
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import Tensor, nn  # noqa: E402

from . import _lib  # noqa: E402
from . import _dwconv_abi as _abi  # noqa: E402

__all__ = ["DepthwiseConv2d", "replace_depthwise", "ReplaceReport", "dwconv_fwd", "dwconv_bwd"]

_WHERE = "lkjit.torch.DepthwiseConv2d"


# ---- geometry (the library's rules: runtime/ops/dwconv_plan.cpp) ---------------------------------------------

def _pads(kh, kw, dil, pad_h, pad_w, same):
    """(top, bottom, left, right) zero padding: explicit symmetric, or PyTorch's 'same' (the smaller half before)."""
    if same:
        th, tw = dil * (kh - 1), dil * (kw - 1)
        return th // 2, th - th // 2, tw // 2, tw - tw // 2
    return pad_h, pad_h, pad_w, pad_w


def _out_size(n, k, s, d, before, after):
    return (n + before + after - d * (k - 1) - 1) // s + 1


def _out_shape(x, kh, kw, stride, dil, pad_h, pad_w, same):
    t, b, l, r = _pads(kh, kw, dil, pad_h, pad_w, same)
    return (x.shape[0], x.shape[1], _out_size(x.shape[2], kh, stride, dil, t, b), _out_size(x.shape[3], kw, stride, dil, l, r))


# ---- the PyTorch implementation (CPU tensors, the ops' CPU kernels) -------------------------------------------

def _torch_forward(x, weight, bias, stride, dil, pad_h, pad_w, same):
    """The op in PyTorch ops in fp32 (asymmetric 'same' padding through F.pad)."""
    t, b, l, r = _pads(weight.shape[2], weight.shape[3], dil, pad_h, pad_w, same)
    xp = F.pad(x.float(), (l, r, t, b))
    return F.conv2d(xp, weight.float(), None if bias is None else bias.float(), stride, 0, dil, x.shape[1])


def _torch_backward(grad_out, x, weight, has_bias, stride, dil, pad_h, pad_w, same, need_dx):
    """[dx, dw(, dbias)] in fp32 by torch.nn.grad (no autograd: a kernel runs below the autograd key)."""
    kh, kw = weight.shape[2], weight.shape[3]
    t, b, l, r = _pads(kh, kw, dil, pad_h, pad_w, same)
    xp = F.pad(x.float(), (l, r, t, b))
    g = grad_out.float()
    C = x.shape[1]
    dw = torch.nn.grad.conv2d_weight(xp, weight.shape, g, stride, 0, dil, C)
    out = [None, dw]
    if need_dx:
        dxp = torch.nn.grad.conv2d_input(xp.shape, weight.float(), g, stride, 0, dil, C)
        out[0] = dxp[:, :, t:t + x.shape[2], l:l + x.shape[3]]
    if has_bias:
        out.append(g.sum((0, 2, 3)))
    return out


# ---- ctypes kernels: one lkjit layer per configuration and device, kept for its prepared plans ----------------

_layers = collections.OrderedDict()
_layers_lock = threading.Lock()
_MAX_LAYERS = 256


def _layer(C, kh, kw, stride, dil, pad_h, pad_w, same, dtype, bias, device):
    key = (C, kh, kw, stride, dil, pad_h, pad_w, same, dtype, bias, device)
    with _layers_lock:
        ent = _layers.get(key)
        if ent is None:
            ent = (_abi.DWConvLayer(C, kh, kw, stride, dil, pad_h, pad_w, same, ops.DTYPE_CODES[dtype], bias,
                                    device=device), threading.Lock())
            _layers[key] = ent
            if len(_layers) > _MAX_LAYERS:
                _layers.popitem(last=False)
        else:
            _layers.move_to_end(key)
        return ent


def _dense_out(x, shape):
    return torch.empty(shape, dtype=x.dtype, device=x.device,
                       memory_format=ops.out_format(x, ops.layout_mode(_WHERE)))


def _fwd_cuda(x, weight, bias, stride, dil, pad_h, pad_w, same):
    B, C, H, W = x.shape
    kh, kw = weight.shape[2], weight.shape[3]
    y = _dense_out(x, _out_shape(x, kh, kw, stride, dil, pad_h, pad_w, same))
    w = weight.contiguous()
    layer, lock = _layer(C, kh, kw, stride, dil, pad_h, pad_w, same, x.dtype, bias is not None, x.get_device())
    with lock:
        layer.set_weights(w.data_ptr(), None if bias is None else bias.contiguous().data_ptr())
        layer.forward(x.data_ptr(), y.data_ptr(), B, H, W, ops.current_stream(x.get_device()), ops.c_strides(x),
                      ops.c_strides(y))
    return y


def _dx_like(x):
    return torch.empty_like(x) if ops.dense(x, ops.layout_mode(_WHERE)) else x.new_empty(x.shape)


def _bwd_cuda(grad_out, x, weight, has_bias, stride, dil, pad_h, pad_w, same, need_dx):
    B, C, H, W = x.shape
    kh, kw = weight.shape[2], weight.shape[3]
    if not ops.dense(grad_out, ops.layout_mode(_WHERE)):
        grad_out = grad_out.contiguous()
    dx = _dx_like(x) if need_dx else x.new_empty((0,))
    dw = torch.empty(weight.shape, dtype=torch.float32, device=x.device)
    db = torch.empty((C,), dtype=torch.float32, device=x.device) if has_bias else None
    w = weight.contiguous()
    layer, lock = _layer(C, kh, kw, stride, dil, pad_h, pad_w, same, x.dtype, has_bias, x.get_device())
    with lock:
        layer.set_weights(w.data_ptr(), w.data_ptr() if has_bias else None)  # bias is not read by backward
        layer.backward(x.data_ptr(), grad_out.data_ptr(), dx.data_ptr() if need_dx else None, dw.data_ptr(),
                       None if db is None else db.data_ptr(), B, H, W, ops.current_stream(x.get_device()),
                       ops.c_strides(x), ops.c_strides(grad_out), ops.c_strides(dx) if need_dx else None)
    return [dx, dw] + ([db] if has_bias else [])


def _fwd_fake(x, weight, bias, stride, dil, pad_h, pad_w, same):
    return _dense_out(x, _out_shape(x, weight.shape[2], weight.shape[3], stride, dil, pad_h, pad_w, same))


def _bwd_fake(grad_out, x, weight, has_bias, stride, dil, pad_h, pad_w, same, need_dx):
    dx = _dx_like(x) if need_dx else x.new_empty((0,))
    out = [dx, weight.new_empty(weight.shape, dtype=torch.float32)]
    if has_bias:
        out.append(weight.new_empty((x.shape[1],), dtype=torch.float32))
    return out


def _fwd_cpu(x, weight, bias, stride, dil, pad_h, pad_w, same):
    y = _torch_forward(x, weight, bias, stride, dil, pad_h, pad_w, same).to(x.dtype)
    return y.contiguous(memory_format=ops.out_format(x, ops.layout_mode(_WHERE)))


def _bwd_cpu(grad_out, x, weight, has_bias, stride, dil, pad_h, pad_w, same, need_dx):
    g = _torch_backward(grad_out, x, weight, has_bias, stride, dil, pad_h, pad_w, same, need_dx)
    dx = _dx_like(x) if need_dx else x.new_empty((0,))
    if need_dx:
        dx.copy_(g[0])
    return [dx] + [t.contiguous() for t in g[1:]]


_SCHEMA_ARGS = "int stride, int dil, int pad_h, int pad_w, bool same"
_fwd_op = ops.define_op("dwconv_fwd", f"(Tensor x, Tensor weight, Tensor? bias, {_SCHEMA_ARGS}) -> Tensor", _fwd_fake,
                        _fwd_cuda)
_bwd_op = ops.define_op("dwconv_bwd", f"(Tensor grad_out, Tensor x, Tensor weight, bool has_bias, {_SCHEMA_ARGS}, "
                        "bool need_dx) -> Tensor[]", _bwd_fake, _bwd_cuda)
ops.LIBRARY.impl("dwconv_fwd", _fwd_cpu, "CPU")
ops.LIBRARY.impl("dwconv_bwd", _bwd_cpu, "CPU")


def dwconv_fwd(x: Tensor, weight: Tensor, bias: typing.Optional[Tensor], stride: int, dil: int, pad_h: int, pad_w: int,
               same: bool) -> Tensor:
    """torch.ops.lkjit.dwconv_fwd: y (B, C, Ho, Wo) in x's dtype (channels_last for a channels_last x, else NCHW
    contiguous) = the depthwise conv of x (B, C, H, W; float32/float16/bfloat16, dense in any dim order) with
    weight (C, 1, kh, kw) and bias (C) or None, both float32 on x's device. No autograd of its own."""
    return _fwd_op(x, weight, bias, stride, dil, pad_h, pad_w, same)


def dwconv_bwd(grad_out: Tensor, x: Tensor, weight: Tensor, has_bias: bool, stride: int, dil: int, pad_h: int,
               pad_w: int, same: bool, need_dx: bool = True) -> typing.List[Tensor]:
    """torch.ops.lkjit.dwconv_bwd: [dx (x's dtype and strides; an empty tensor unless need_dx), dw (C, 1, kh, kw)
    float32, dbias (C) float32 if has_bias]; dw and dbias bit-identical across calls."""
    return _bwd_op(grad_out, x, weight, has_bias, stride, dil, pad_h, pad_w, same, need_dx)


class _DWConvFunction(torch.autograd.Function):
    """DepthwiseConv2d's forward/backward around lkjit::dwconv_fwd / lkjit::dwconv_bwd:
    apply(stride, dil, pad_h, pad_w, same, x, weight[, bias])."""

    @staticmethod
    def forward(stride, dil, pad_h, pad_w, same, x, weight, bias=None):
        return _fwd_op(x, weight, bias, stride, dil, pad_h, pad_w, same)

    @staticmethod
    def setup_context(ctx, inputs, output):
        stride, dil, pad_h, pad_w, same, x, weight, *rest = inputs
        ctx.args = (stride, dil, pad_h, pad_w, same)
        ctx.has_bias = len(rest) > 0 and rest[0] is not None  # (dynamo traces len, not bool, of a tuple)
        ctx.save_for_backward(x, weight)

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        need_dx = ctx.needs_input_grad[5]
        g = _bwd_op(grad_out, x, weight, ctx.has_bias, *ctx.args, need_dx)
        return (None,) * 5 + (g[0] if need_dx else None, g[1], g[2] if ctx.has_bias else None)


# ---- the module ----------------------------------------------------------------------------------------------

def _pair(v, name):
    if isinstance(v, (tuple, list)):
        if len(v) != 2:
            raise ValueError(f"{_WHERE}: {name}={tuple(v)!r} must be an int or a pair of ints")
        a, b = (_lib.as_int(e, name, _WHERE) for e in v)
        return a, b
    a = _lib.as_int(v, name, _WHERE)
    return a, a


class DepthwiseConv2d(nn.Module):
    """nn.Conv2d(channels, channels, kernel_size, stride, padding, dilation, groups=channels, bias, padding_mode)
    on lkjit's depthwise kernels, with nn.Conv2d's parameters, state_dict keys ('weight' (C, 1, kh, kw), 'bias'
    (C)) and initialisation. kernel_size: int or (kh, kw), each in [1, 63]; stride: 1 or 2 (both axes alike);
    dilation: 1..4 (both axes alike); padding: int, (ph, pw) in [0, 1000], 'valid' or 'same' (stride 1);
    padding_mode: 'zeros' only; bias: a bool. Anything else raises ValueError (TypeError for a type, such as
    bias='no') naming the value and what is supported.
    Input (B, C, H, W) float32/float16/bfloat16 on CUDA (or the CPU: PyTorch ops), any dense layout. Parameters are
    fp32 unless made otherwise (dtype=, module.to(torch.bfloat16), .half()): the kernels read fp32 filters, so others
    are converted for each call, with gradients in the parameters' dtype, as WTConv2d does. Which kernels
    run (direct, NHWC or tensor-core: lkjit/dwconv.h, DWConvPath) is the tuning database's path decision for the call
    (pass, dtype, layout, filter, padding, shape bucket), else lkjit's rule; with LKJIT_TUNE=tune the first call of
    a shape measures every path and records the fastest (tile decisions too)."""

    def __init__(self, channels, kernel_size, stride=1, padding=0, dilation=1, bias=True, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__()
        C = _lib.as_int(channels, "channels", _WHERE)
        # A flag is a bool: a truthy stand-in such as bias='no' would silently mean True (as WTConv2d's flags).
        bias = _lib.as_bool(bias, "bias", _WHERE)
        kh, kw = _pair(kernel_size, "kernel_size")
        sh, sw = _pair(stride, "stride")
        dh, dw = _pair(dilation, "dilation")
        errors = []
        if sh != sw:
            errors.append(f"stride={(sh, sw)} has different axes; supported: the same stride for both")
        if dh != dw:
            errors.append(f"dilation={(dh, dw)} has different axes; supported: the same dilation for both")
        if padding_mode != "zeros":
            errors.append(f"padding_mode={padding_mode!r} is not supported; supported: 'zeros'")
        same = isinstance(padding, str) and padding == "same"
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                errors.append(f"padding={padding!r} is not supported; supported: an int, a pair, 'valid' or 'same'")
            ph = pw = 0
        else:
            ph, pw = _pair(padding, "padding")
        errors += _lib.range_errors("dwconv", [("channels", "C", C), ("kernel_size", "kh", kh), ("kernel_size", "kw", kw),
                                               ("stride", "stride", sh), ("dilation", "dilation", dh), ("padding", "pad_h", ph),
                                               ("padding", "pad_w", pw)])
        if same and sh != 1:
            errors.append(f"padding='same' with stride={sh}; supported: stride 1 (PyTorch's rule)")
        if errors:
            raise ValueError(f"{_WHERE}: " + "; ".join(dict.fromkeys(errors)))  # (k, k) out of range: once
        self.in_channels = self.out_channels = self.groups = C
        self.kernel_size, self.stride, self.dilation = (kh, kw), (sh, sh), (dh, dh)
        self.padding = padding if isinstance(padding, str) else (ph, pw)
        self.padding_mode = padding_mode
        self._same = same
        self._pad = (ph, pw)
        kw_ = {"device": device, "dtype": dtype if dtype is not None else torch.float32}
        self.weight = nn.Parameter(torch.empty((C, 1, kh, kw), **kw_))
        self.bias = nn.Parameter(torch.empty(C, **kw_)) if bias else None
        self.reset_parameters()

    def reset_parameters(self):
        """nn.Conv2d's initialisation: kaiming_uniform_(a=sqrt(5)) weights, bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.kernel_size[0] * self.kernel_size[1]
            bound = 1 / math.sqrt(fan_in)
            nn.init.uniform_(self.bias, -bound, bound)

    @classmethod
    def from_conv(cls, conv):
        """A DepthwiseConv2d computing what the depthwise nn.Conv2d ``conv`` computes, with copies of its parameters
        (same device, float32). ValueError naming what it cannot take (groups != in_channels != out_channels,
        padding_mode, stride or dilation out of range, ...)."""
        if not isinstance(conv, nn.Conv2d):
            raise ValueError(f"{_WHERE}.from_conv: {type(conv).__name__} is not an nn.Conv2d")
        if not (conv.groups == conv.in_channels == conv.out_channels):
            raise ValueError(f"{_WHERE}.from_conv: groups={conv.groups}, in_channels={conv.in_channels}, out_channels="
                             f"{conv.out_channels}; supported: a depthwise conv (all three equal)")
        m = cls(conv.in_channels, conv.kernel_size, conv.stride, conv.padding, conv.dilation, conv.bias is not None,
                conv.padding_mode, device=conv.weight.device)
        with torch.no_grad():
            m.weight.copy_(conv.weight)
            if conv.bias is not None:
                m.bias.copy_(conv.bias)
        return m

    def extra_repr(self):
        s = f"{self.in_channels}, kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding!r}"
        if self.dilation != (1, 1):
            s += f", dilation={self.dilation}"
        return s + f", bias={self.bias is not None}"

    def _args(self):
        return self.stride[0], self.dilation[0], self._pad[0], self._pad[1], self._same

    def _check(self, x, weight, bias):
        """The C ABI's checks (lkjit_dwconv_check_tensors: the binding's messages) of x and the fp32 parameters the
        kernels read, called only when the plain Python test below fails, so that a good call (and torch.compile's
        trace) never leaves Python."""
        s, d, ph, pw, same = self._args()
        ok = isinstance(x, Tensor) and x.dim() == 4 and x.shape[1] == self.in_channels and \
            x.device.type in ("cuda", "cpu") and x.dtype in ops.DTYPE_CODES and \
            weight.dtype == torch.float32 and weight.device == x.device and \
            (bias is None or (bias.dtype == torch.float32 and bias.device == x.device))
        if ok:
            t, b, l, r = _pads(*self.kernel_size, d, ph, pw, same)
            ok = _out_size(x.shape[2], self.kernel_size[0], s, d, t, b) >= 1 and \
                _out_size(x.shape[3], self.kernel_size[1], s, d, l, r) >= 1
        if not ok:
            if not isinstance(x, Tensor):
                raise TypeError(f"{_WHERE}: input must be a torch.Tensor; got {type(x).__name__}")
            _abi.check_tensors(_WHERE, self.in_channels, *self.kernel_size, *self._args(), ops.tensor_desc(x), None,
                               ops.tensor_desc(weight), None if bias is None else ops.tensor_desc(bias), allow_cpu=True)

    def forward(self, x):
        # Parameters of another dtype as fp32 (differentiably: their gradients come back in their own dtype).
        w, b = ops.f32(self.weight), None if self.bias is None else ops.f32(self.bias)
        self._check(x, w, b)
        if x.device.type == "cpu":  # the same op in PyTorch: runs, traces and exports anywhere
            y = _torch_forward(x, w, b, *self._args())
            return y.to(x.dtype).contiguous(memory_format=ops.out_format(x, ops.layout_mode(_WHERE)))
        dt = ops.autocast_dtype()  # the autocast rule: x in the autocast dtype, parameters fp32
        if dt is not None and x.dtype != dt:
            x = x.to(dt)
        if not ops.dense(x, ops.layout_mode(_WHERE)):
            x = x.contiguous()
        if not torch.is_grad_enabled():
            return _fwd_op(x, w, b, *self._args())
        return _DWConvFunction.apply(*self._args(), x, w, b)


ReplaceReport = collections.namedtuple("ReplaceReport", ["swapped", "skipped"])
ReplaceReport.__doc__ = """What replace_depthwise did: swapped, the names of the modules it replaced; skipped,
(name, reason) of the depthwise nn.Conv2d modules it left alone."""


def replace_depthwise(model):
    """Swaps every depthwise nn.Conv2d of ``model`` (groups == in_channels == out_channels, e.g. timm
    convnext_tiny's ``conv_dw``) for a DepthwiseConv2d with its parameters, in place. Modules it cannot take
    (padding_mode, stride or dilation out of range, ...) are left as they are. Returns a ReplaceReport."""
    swapped, skipped = [], []
    for name, mod in list(model.named_modules()):
        if not isinstance(mod, nn.Conv2d) or not (mod.groups == mod.in_channels == mod.out_channels) or not name:
            continue
        if type(mod) is not nn.Conv2d:
            skipped.append((name, f"{type(mod).__name__} is a subclass of nn.Conv2d (its forward may differ)"))
            continue
        try:
            new = DepthwiseConv2d.from_conv(mod)
        except ValueError as e:
            skipped.append((name, str(e)))
            continue
        new.train(mod.training)
        parent_name, _, leaf = name.rpartition(".")
        setattr(model.get_submodule(parent_name) if parent_name else model, leaf, new)
        swapped.append(name)
    return ReplaceReport(swapped, skipped)
