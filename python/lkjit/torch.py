"""PyTorch drop-in WTConv2d running lkjit's fused CUDA kernels (through liblkjit.so, ctypes; no build
against PyTorch).

Math: WTConv of Finder et al., "Wavelet Convolutions for Large Receptive Fields" (ECCV 2024),
Algorithm 1 with Haar (db1) filters:
    out = s0 * (dw(X, W0) + b) + sum_l Synth_l(s_l * dw(Haar_l(X), W_l)),  then out[..., ::stride, ::stride]
computed with the I/O-aware reformulation of Aflalo et al. (2026): Haar analysis on chip (§4.1),
closed-form synthesis (Eq. 7), scales folded into the weights (Eq. 8) with gradients recovered by Eq. 9.
The exact operator, padding of odd sizes and crop included: the project's operator spec, docs/wtconv.md.

The forward and backward are the custom ops ``lkjit::wtconv_fwd`` and ``lkjit::wtconv_bwd``
(torch.library.custom_op, with fake implementations), so autograd and torch.compile see them as ops.
"""
import itertools
import math
import threading
import typing
import weakref

import torch
from torch import Tensor, nn

from . import _lib
from ._state_dict import remap_keys

__all__ = ["WTConv2d", "wtconv_fwd", "wtconv_bwd"]

_DTYPE_CODES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
_WHERE = "lkjit.torch.WTConv2d"


# ---- one lkjit layer per (module, dtype, device) ------------------------------------------------------

class _Entry:
    """An lkjit layer and the parameter tensors it folded last (kept alive: the C++ layer keeps their
    pointers for the backward's Eq. 9, and holding them means a new tensor never reuses their address)."""

    __slots__ = ("layer", "key", "refs")

    def __init__(self, layer):
        self.layer, self.key, self.refs = layer, None, None


class _State:
    __slots__ = ("entries", "lock", "always_refold")

    def __init__(self):
        self.entries = {}
        self.lock = threading.Lock()
        self.always_refold = False


_STATES = {}
_ids = itertools.count(1)
_ids_lock = threading.Lock()


def _new_state(owner):
    with _ids_lock:
        layer_id = next(_ids)
        _STATES[layer_id] = _State()
    weakref.finalize(owner, _STATES.pop, layer_id, None)
    return layer_id


def _entry(layer_id, x, k, L, bias, stride):
    st = _STATES.get(layer_id)
    if st is None:
        raise RuntimeError(f"lkjit: error: {_WHERE}: layer id {layer_id} is not registered (its module was "
                           f"deleted while its autograd graph or compiled code was still in use)")
    key = (x.dtype, x.device.index, x.shape[1], k, L, bias, stride)
    with st.lock:
        ent = st.entries.get(key)
        if ent is None:
            ent = _Entry(_lib.WTConvLayer(x.shape[1], k, L, _DTYPE_CODES[x.dtype], bias, stride,
                                          x.device.index or 0))
            st.entries[key] = ent
    return st, ent


def _fold(st, ent, params, base_b, stream):
    """set_weights when the parameters changed since the last fold: another tensor (address) or an
    in-place update (its version counter). ``always_refold`` folds every call."""
    tensors = list(params) + ([base_b] if base_b is not None else [])
    try:
        key = tuple((t.data_ptr(), t._version) for t in tensors)
    except RuntimeError:  # inference tensors have no version counter
        key = None
    if key is not None and not st.always_refold and key == ent.key:
        return
    L = (len(params) - 2) // 2
    bw, bs = params[0], params[1]
    lw, ls = params[2:2 + L], params[2 + L:]
    ent.layer.set_weights(bw.data_ptr(), base_b.data_ptr() if base_b is not None else 0, bs.data_ptr(),
                          [t.data_ptr() for t in lw], [t.data_ptr() for t in ls], stream)
    ent.key = key
    ent.refs = tensors


# ---- checks ----------------------------------------------------------------------------------------

def _check_input(x, C, where=_WHERE):
    if not isinstance(x, Tensor):
        raise TypeError(f"{where}: input must be a torch.Tensor; got {type(x).__name__}")
    if x.dim() != 4:
        raise ValueError(f"{where}: input must be 4-D (B, C, H, W); got shape {tuple(x.shape)}")
    if x.shape[1] != C:
        raise ValueError(f"{where}: input has C={x.shape[1]} channels (shape {tuple(x.shape)}); "
                         f"this layer has in_channels={C}")
    if x.device.type != "cuda":
        raise ValueError(f"{where}: input is on device '{x.device}'; supported: CUDA tensors only (lkjit runs "
                         f"CUDA kernels; move the module and the input to a GPU with .cuda())")
    if x.dtype not in _DTYPE_CODES:
        raise TypeError(f"{where}: input dtype {x.dtype} is not supported; supported: torch.float32, "
                        f"torch.float16, torch.bfloat16")


def _check_params(x, params, where=_WHERE):
    for p in params:
        if p.device != x.device:
            raise ValueError(f"{where}: parameters are on '{p.device}' but the input is on '{x.device}'; "
                             f"move the module with .to('{x.device}')")
        if p.dtype != torch.float32:
            raise TypeError(f"{where}: parameters must be torch.float32 inside the op; got {p.dtype}")


def _check_param_shapes(C, base_w, base_b, base_s, level_w, level_s, where):
    k = base_w.shape[-1]
    want = [("base_w", base_w, (C, 1, k, k)), ("base_s", base_s, (1, C, 1, 1))]
    want += [("base_b", base_b, (C,))] if base_b is not None else []
    if len(level_w) != len(level_s):
        raise ValueError(f"{where}: level_w has {len(level_w)} tensors and level_s {len(level_s)}; they must match")
    for i, (w, s) in enumerate(zip(level_w, level_s)):
        want += [(f"level_w[{i}]", w, (4 * C, 1, k, k)), (f"level_s[{i}]", s, (1, 4 * C, 1, 1))]
    for name, t, shape in want:
        if t.numel() != math.prod(shape) or (t.dim() == 4 and tuple(t.shape) != shape):
            raise ValueError(f"{where}: {name} has shape {tuple(t.shape)}; expected {shape} for C={C}, k={k}")


def _out_hw(H, W, stride):
    return (H + stride - 1) // stride, (W + stride - 1) // stride


# ---- custom ops ------------------------------------------------------------------------------------
# cudagraph_unsafe: a CUDA-graph replay would skip the Python that refolds the weights after a parameter
# update (and the layer may allocate its workspace on a first call), so inductor keeps these ops out of
# CUDA graphs (mode="reduce-overhead" splits the graph around them).
_TAGS = (torch.Tag.cudagraph_unsafe,) if hasattr(torch.Tag, "cudagraph_unsafe") else ()


@torch.library.custom_op("lkjit::wtconv_fwd", mutates_args=(), tags=_TAGS)
def wtconv_fwd(x: Tensor, base_w: Tensor, base_b: typing.Optional[Tensor], base_s: Tensor,
               level_w: typing.List[Tensor], level_s: typing.List[Tensor], layer_id: int, stride: int) -> Tensor:
    """out (B, C, ceil(H/stride), ceil(W/stride)), dtype of x = WTConv(x (B, C, H, W)); fp32 parameters in
    the reference shapes; layer_id names the module whose lkjit layer (folded weights, workspace) runs it."""
    _check_input(x, x.shape[1] if x.dim() == 4 else -1, "lkjit::wtconv_fwd")
    params = [base_w, base_s, *level_w, *level_s]
    _check_params(x, params + ([base_b] if base_b is not None else []), "lkjit::wtconv_fwd")
    _check_param_shapes(x.shape[1], base_w, base_b, base_s, level_w, level_s, "lkjit::wtconv_fwd")
    x = x.contiguous()
    B, C, H, W = x.shape
    out = x.new_empty((B, C, *_out_hw(H, W, stride)))
    if out.numel() == 0:
        return out
    params = [p.contiguous() for p in params]
    base_b = base_b.contiguous() if base_b is not None else None
    st, ent = _entry(layer_id, x, base_w.shape[-1], len(level_w), base_b is not None, stride)
    stream = torch.cuda.current_stream(x.device).cuda_stream
    _fold(st, ent, params, base_b, stream)
    ent.layer.forward(x.data_ptr(), out.data_ptr(), B, H, W, stream)
    return out


@wtconv_fwd.register_fake
def _wtconv_fwd_fake(x, base_w, base_b, base_s, level_w, level_s, layer_id, stride):
    B, C, H, W = x.shape
    return x.new_empty((B, C, *_out_hw(H, W, stride)))


@torch.library.custom_op("lkjit::wtconv_bwd", mutates_args=(), tags=_TAGS)
def wtconv_bwd(grad_out: Tensor, x: Tensor, base_w: Tensor, base_b: typing.Optional[Tensor], base_s: Tensor,
               level_w: typing.List[Tensor], level_s: typing.List[Tensor], layer_id: int,
               stride: int) -> typing.List[Tensor]:
    """[dX, d base_w, d base_s, d level_w[0..L-1], d level_s[0..L-1], (d base_b if bias)]: dX in x's dtype
    and shape (NCHW contiguous), parameter gradients fp32 in the parameters' shapes; deterministic."""
    _check_input(x, x.shape[1] if x.dim() == 4 else -1, "lkjit::wtconv_bwd")
    params = [base_w, base_s, *level_w, *level_s]
    _check_params(x, params + ([base_b] if base_b is not None else []), "lkjit::wtconv_bwd")
    _check_param_shapes(x.shape[1], base_w, base_b, base_s, level_w, level_s, "lkjit::wtconv_bwd")
    x = x.contiguous()
    B, C, H, W = x.shape
    want = (B, C, *_out_hw(H, W, stride))
    if tuple(grad_out.shape) != want:
        raise ValueError(f"lkjit::wtconv_bwd: grad_out has shape {tuple(grad_out.shape)}; expected {want}")
    grad_out = grad_out.to(x.dtype).contiguous()
    params = [p.contiguous() for p in params]
    base_b = base_b.contiguous() if base_b is not None else None
    dx = torch.empty_like(x)
    grads = [torch.empty_like(p) for p in params] + ([torch.empty_like(base_b)] if base_b is not None else [])
    if x.numel() == 0:
        dx.zero_()
        for g in grads:
            g.zero_()
        return [dx] + grads
    L = len(level_w)
    st, ent = _entry(layer_id, x, base_w.shape[-1], L, base_b is not None, stride)
    stream = torch.cuda.current_stream(x.device).cuda_stream
    _fold(st, ent, params, base_b, stream)
    gb = grads[2 + 2 * L].data_ptr() if base_b is not None else 0
    ent.layer.backward(x.data_ptr(), grad_out.data_ptr(), dx.data_ptr(), grads[0].data_ptr(), gb,
                       grads[1].data_ptr(), [g.data_ptr() for g in grads[2:2 + L]],
                       [g.data_ptr() for g in grads[2 + L:2 + 2 * L]], B, H, W, stream)
    return [dx] + grads


@wtconv_bwd.register_fake
def _wtconv_bwd_fake(grad_out, x, base_w, base_b, base_s, level_w, level_s, layer_id, stride):
    params = [base_w, base_s, *level_w, *level_s] + ([base_b] if base_b is not None else [])
    return [x.new_empty(x.shape)] + [p.new_empty(p.shape) for p in params]


def _setup_context(ctx, inputs, output):
    x, base_w, base_b, base_s, level_w, level_s, layer_id, stride = inputs
    ctx.layer_id, ctx.stride, ctx.L, ctx.has_bias = layer_id, stride, len(level_w), base_b is not None
    ctx.save_for_backward(x, base_w, base_s, *level_w, *level_s, *([base_b] if base_b is not None else []))


def _backward(ctx, grad_out):
    L = ctx.L
    saved = ctx.saved_tensors
    x, base_w, base_s = saved[:3]
    level_w, level_s = list(saved[3:3 + L]), list(saved[3 + L:3 + 2 * L])
    base_b = saved[3 + 2 * L] if ctx.has_bias else None
    g = wtconv_bwd(grad_out, x, base_w, base_b, base_s, level_w, level_s, ctx.layer_id, ctx.stride)
    # g = [dX, d base_w, d base_s, d level_w..., d level_s..., (d base_b)]; inputs order as the op's.
    return (g[0], g[1], g[3 + 2 * L] if ctx.has_bias else None, g[2], list(g[3:3 + L]), list(g[3 + L:3 + 2 * L]),
            None, None)


wtconv_fwd.register_autograd(_backward, setup_context=_setup_context)


# ---- the module ------------------------------------------------------------------------------------

_DEVICE_AUTOCAST_API = hasattr(torch, "get_autocast_dtype")  # PyTorch >= 2.4


def _autocast_dtype():
    """The CUDA autocast dtype when autocast is on for CUDA, else None."""
    if _DEVICE_AUTOCAST_API:
        return torch.get_autocast_dtype("cuda") if torch.is_autocast_enabled("cuda") else None
    return torch.get_autocast_gpu_dtype() if torch.is_autocast_enabled() else None


class _Params(nn.Module):
    """Holds `weight` (and `bias`) under the reference module's state_dict names; never called."""

    def __init__(self, weight_shape, bias_shape=None):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(weight_shape))
        if bias_shape is not None:
            self.bias = nn.Parameter(torch.empty(bias_shape))
        else:
            self.register_parameter("bias", None)

    def extra_repr(self):
        return f"weight={tuple(self.weight.shape)}" + (f", bias={tuple(self.bias.shape)}" if self.bias is not None else "")


class WTConv2d(nn.Module):
    """Depthwise wavelet convolution (WTConv, Finder et al., ECCV 2024, Algorithm 1; Haar filters) on
    lkjit's fused CUDA kernels (Aflalo et al. 2026, Eq. 7-9). A drop-in for the reference module:

        WTConv2d(in_channels, out_channels, kernel_size=5, stride=1, bias=True, wt_levels=1, wt_type='db1')

    Input: (B, C, H, W) CUDA tensor, float32 / float16 / bfloat16, any layout (non-contiguous and
    channels_last inputs are copied to NCHW). Output: (B, C, ceil(H/stride), ceil(W/stride)), NCHW
    contiguous, the input's dtype; under CUDA autocast the op runs in the autocast dtype. Parameters
    stay float32 (other dtypes are cast to float32 for the op) and get float32 gradients:

        base_conv.weight (C,1,k,k)   base_conv.bias (C)   base_scale.weight (1,C,1,1)
        wavelet_convs.{i}.weight (4C,1,k,k)   wavelet_scale.{i}.weight (1,4C,1,1),  i = 0..wt_levels-1

    Channel 4c+s of a level tensor is subband s (LL, LH, HL, HH) of channel c. Init as the reference:
    weights kaiming_uniform_(a=sqrt(5)), bias U(-1/k, 1/k) (nn.Conv2d's default), base scale 1.0,
    wavelet scales 0.1. load_state_dict also accepts the reference's fixed wt_filter / iwt_filter /
    stride_filter (checked, then ignored) and the official fused module's names (base_weight, base_bias,
    base_scale, wt_weights.{i}, wt_scales.{i}).

    Folded weights (Eq. 8) are recomputed when a parameter changes: a new tensor or an in-place update
    (version counter). Set ``always_refold = True`` if parameters are written through ``.data`` (which
    bypasses the version counter). Each (dtype, device) gets one lkjit layer that owns its folded
    weights and workspace; one module must not run concurrently on two streams.

    Raises ValueError: in_channels != out_channels, wt_type other than 'db1', kernel_size / wt_levels /
    stride out of range (odd k in [1, 31], levels in [0, 8], stride in [1, 64]); on forward: input not
    4-D, wrong channel count, not on a CUDA device. TypeError: input dtype other than float32, float16,
    bfloat16. lkjit.LibraryNotFoundError: liblkjit.so not found; lkjit.DriverError: no usable GPU.
    """

    def __init__(self, in_channels, out_channels, kernel_size=5, stride=1, bias=True, wt_levels=1, wt_type="db1"):
        super().__init__()
        errors = []
        if in_channels != out_channels:
            errors.append(f"in_channels={in_channels} and out_channels={out_channels} differ; WTConv2d is "
                          f"depthwise: out_channels must equal in_channels")
        if not isinstance(in_channels, int) or not 1 <= in_channels <= 1 << 24:
            errors.append(f"in_channels={in_channels!r} is out of range; supported: [1, 2^24]")
        if wt_type not in ("db1", "haar"):
            errors.append(f"wt_type={wt_type!r} is not supported; supported: 'db1' (Haar)")
        if not isinstance(kernel_size, int) or not (1 <= kernel_size <= 31 and kernel_size % 2 == 1):
            errors.append(f"kernel_size={kernel_size!r} is out of range; supported: odd k in [1, 31]")
        if not isinstance(wt_levels, int) or not 0 <= wt_levels <= _lib.MAX_LEVELS:
            errors.append(f"wt_levels={wt_levels!r} is out of range; supported: [0, {_lib.MAX_LEVELS}]")
        if not isinstance(stride, int) or not 1 <= stride <= 64:
            errors.append(f"stride={stride!r} is out of range; supported: [1, 64]")
        if errors:
            raise ValueError(f"{_WHERE}: " + "; ".join(errors))
        C, k = in_channels, kernel_size
        self.in_channels, self.out_channels, self.kernel_size = C, C, k
        self.stride, self.wt_levels, self.wt_type = stride, wt_levels, wt_type
        self.base_conv = _Params((C, 1, k, k), (C,) if bias else None)
        self.base_scale = _Params((1, C, 1, 1))
        self.wavelet_convs = nn.ModuleList(_Params((4 * C, 1, k, k)) for _ in range(wt_levels))
        self.wavelet_scale = nn.ModuleList(_Params((1, 4 * C, 1, 1)) for _ in range(wt_levels))
        self.reset_parameters()
        self._lkjit_id = _new_state(self)

    def reset_parameters(self):
        """The reference init (nn.Conv2d's default for the convolutions)."""
        k = self.kernel_size
        with torch.no_grad():
            nn.init.kaiming_uniform_(self.base_conv.weight, a=math.sqrt(5))
            if self.base_conv.bias is not None:
                nn.init.uniform_(self.base_conv.bias, -1.0 / k, 1.0 / k)  # 1/sqrt(fan_in), fan_in = k*k
            self.base_scale.weight.fill_(1.0)
            for conv, scale in zip(self.wavelet_convs, self.wavelet_scale):
                nn.init.kaiming_uniform_(conv.weight, a=math.sqrt(5))
                scale.weight.fill_(0.1)

    # A copy (deepcopy, pickle) gets its own lkjit layers.
    def __setstate__(self, state):
        super().__setstate__(state)
        self._lkjit_id = _new_state(self)

    @property
    def always_refold(self):
        return _STATES[self._lkjit_id].always_refold

    @always_refold.setter
    def always_refold(self, value):
        _STATES[self._lkjit_id].always_refold = bool(value)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"bias={self.base_conv.bias is not None}, wt_levels={self.wt_levels}, wt_type={self.wt_type!r}")

    def forward(self, x):
        _check_input(x, self.in_channels)
        dt = _autocast_dtype()
        if dt is not None:
            x = x.to(dt)
        x = x.contiguous()
        f32 = lambda p: p if p.dtype == torch.float32 else p.float()  # noqa: E731
        b = self.base_conv.bias
        return wtconv_fwd(x, f32(self.base_conv.weight), f32(b) if b is not None else None,
                          f32(self.base_scale.weight), [f32(m.weight) for m in self.wavelet_convs],
                          [f32(m.weight) for m in self.wavelet_scale], self._lkjit_id, self.stride)

    # ---- lkjit introspection ----
    def lkjit_plan(self, B, H, W, dtype=torch.float32, backward=False, arch=0, device=0):
        """The lkjit kernels a (B, C, H, W) input runs with, one per line. arch=0 plans for the GPU
        ``device``; arch=80, 90, ... plans without a GPU."""
        layer = _lib.WTConvLayer(self.in_channels, self.kernel_size, self.wt_levels, _DTYPE_CODES[dtype],
                                 self.base_conv.bias is not None, self.stride, device)
        try:
            return layer.describe(B, H, W, backward=backward, arch=arch)
        finally:
            layer.close()

    def lkjit_workspace_bytes(self):
        """Device memory owned by this module's lkjit layers (folded weights + scratch), bytes."""
        st = _STATES.get(self._lkjit_id)
        return sum(e.layer.workspace_bytes() for e in st.entries.values()) if st else 0

    # ---- state_dict compatibility ----
    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        try:
            renames, dropped = remap_keys(list(state_dict.keys()), prefix)
        except ValueError as e:
            error_msgs.append(str(e))
            renames, dropped = {}, []
        C = self.in_channels
        for key in dropped:
            t = state_dict.pop(key)
            want = (4 * C, 1, 2, 2)
            ok = tuple(t.shape) == want and bool(torch.allclose(t.detach().abs().float().cpu(),
                                                                torch.full(want, 0.5), atol=1e-3))
            if not ok:
                error_msgs.append(f"{key}: expected the fixed Haar taps (wt_type='db1'): shape {want}, entries "
                                  f"+-0.5; got shape {tuple(t.shape)}. Only db1 is supported.")
        key = prefix + "stride_filter"  # the reference's fixed ones (C,1,1,1) used for striding
        if key in state_dict:
            t = state_dict.pop(key)
            if tuple(t.shape) != (C, 1, 1, 1) or not bool((t.detach().float().cpu() == 1).all()):
                error_msgs.append(f"{key}: expected ones of shape ({C}, 1, 1, 1); got shape {tuple(t.shape)}")
        shapes = {prefix + n: tuple(p.shape) for n, p in self.named_parameters()}
        for old, new in renames.items():
            t = state_dict.pop(old)
            want = shapes.get(new)
            if want is not None and tuple(t.shape) != want and t.numel() == math.prod(want):
                t = t.reshape(want)  # e.g. a (C,) scale for (1, C, 1, 1)
            state_dict[new] = t
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

