"""PyTorch drop-in WTConv2d running lkjit's fused CUDA kernels (the C++ binding over liblkjit.so's C ABI, or
its ctypes fallback: lkjit/_torch_ops.py), and a PyTorch implementation of the same op for CPU tensors.

Math: WTConv of Finder et al., "Wavelet Convolutions for Large Receptive Fields" (ECCV 2024),
Algorithm 1 with Haar (db1) filters:
    out = s0 * (dw(X, W0) + b) + sum_l Synth_l(s_l * dw(Haar_l(X), W_l)),  then out[..., ::stride, ::stride]
computed with the I/O-aware reformulation of Aflalo et al. (2026): Haar analysis on chip (§4.1),
closed-form synthesis (Eq. 7), scales folded into the weights (Eq. 8) with gradients recovered by Eq. 9.
The exact operator, padding of odd sizes and crop included: the project's operator spec, docs/wtconv.md.

Ops: ``lkjit::wtconv_fwd``, ``lkjit::wtconv_fwd_save`` (the layer's forward: also the NCHW copy of x its
kernels read, for the backward) and ``lkjit::wtconv_bwd`` (one schema; fake implementations here; CUDA kernels
from the binding, else ``_fwd_impl`` / ``_fwd_save_impl`` / ``_bwd_impl`` below through ctypes). One autograd
mechanism for the layer, eager and compiled alike: ``_WTConvFunction`` (torch.autograd.Function) around
wtconv_fwd_save and wtconv_bwd, which torch.compile traces with the ops inside. Measured host time per forward+backward on CPU tensors through a
test-only CPU kernel (bench/bench_torch_host.py): the autograd.Function around the ops costs less than
register_autograd on the op, whose Python wrapper (pytree flattening, custom-op autograd glue) runs on every
call; bench/RESULTS.md has the numbers. wtconv_fwd still has that autograd, for direct calls of the op; the
layer calls the op below the autograd keys (_fwd_no_autograd), so the wrapper never runs for it.

Layout: the kernels read and write activations through their strides, so a dense input in any dim order
(NCHW contiguous, channels_last, ...) is used as it is; only inputs with gaps or overlaps are copied.
The output is channels_last for a channels_last input, NCHW contiguous otherwise; dX has x's strides.
Small channels_last maps (W <= 16 at stride 1 with k <= 5, W <= 8 with k = 7; see lkjit::WTConvPath)
run lkjit's lane kernels, forward and backward, which read channels_last directly. For larger
channels_last maps of at least ``_TRANSPOSE_MIN_HW`` pixels the ops run the plane kernels on NCHW copies made
by lkjit's coalesced layout transpose (lkjit::wtconv_transpose) and transpose the results back (the layer's
backward reads its forward's copy of x where the map is wider than ``_LANE_MAX_W`` or strided);
``LKJIT_TORCH_LAYOUT`` = auto (that; the default) | strided (never transpose) | nchw (PyTorch copies, for
comparison). Results are bit-identical whichever way, except that the lane kernels round differently from
the plane kernels an NCHW input runs.
"""
import itertools
import math
import threading
import typing

from . import _torch_ops as ops  # imports torch, or says how to install it
import torch  # noqa: E402
from torch import Tensor, nn  # noqa: E402

from . import _lib  # noqa: E402
from . import _wtconv_abi as _abi  # noqa: E402
from ._state_dict import own_keys, remap_keys  # noqa: E402
from ._wtconv_torch_ref import wtconv2d_torch  # noqa: E402

__all__ = ["WTConv2d", "wtconv_fwd", "wtconv_bwd"]

_DTYPE_CODES = ops.DTYPE_CODES
_WHERE = "lkjit.torch.WTConv2d"
_FWD, _FWD_SAVE, _BWD = "lkjit::wtconv_fwd", "lkjit::wtconv_fwd_save", "lkjit::wtconv_bwd"
# Smallest channels_last map (H*W) the layer transposes for: below it the transposes cost more than the
# strided plane loads lose (WTConvNeXt-T's 7x7 stage measured even; bench/RESULTS.md, section 3). The binding
# has the same constant (python/csrc/wtconv_ops.cpp).
_TRANSPOSE_MIN_HW = 100
# The widest map a lane kernel takes (kLaneMaxW, generator/ops/wtconv_lane.cpp; the lane kernels run stride 1
# only): a transposed channels_last map wider than this, or strided, always runs on the NCHW copy, so the
# layer's forward can hand that copy to its backward (_keeps_nchw). The binding has the same constant.
_LANE_MAX_W = 16

# Parameters travel as one flat list in the order of the backward's gradients:
#     [base_w, base_s, level_w[0..L-1], level_s[0..L-1], (base_b if bias)]
# so the layer's gradients map one to one onto the autograd.Function's inputs.


# ---- argument checks -------------------------------------------------------------------------------
# Every message comes from the C ABI (lkjit_wtconv_check_tensors), which the binding calls too, so both paths
# refuse a bad call alike. Python tests the common case itself first (a few attribute reads) and asks the
# library only when something is off.

def _tensor_check_failed(where, C, stride, x, grad_out, params, n_lw, n_ls, bias, allow_cpu):
    """Raises the library's message for the call; an internal error if the library finds nothing wrong."""
    d = ops.tensor_desc
    _abi.check_tensors(where, C, stride, d(x), None if grad_out is None else d(grad_out), [d(p) for p in params],
                       n_lw, n_ls, bias, allow_cpu)
    raise _lib.LkjitError(f"lkjit: error: internal: {where}: Python refused a call the library accepts", 6)


def _check_input(x, C, where=_WHERE, allow_cpu=False):
    if not isinstance(x, Tensor):
        raise TypeError(f"{where}: input must be a torch.Tensor; got {type(x).__name__}")
    dev = x.device.type
    if x.dim() != 4 or (C >= 0 and x.shape[1] != C) or not (dev == "cuda" or (allow_cpu and dev == "cpu")) or \
            x.dtype not in _DTYPE_CODES:
        # the parameters are not checked here: a 1-tensor stand-in list passes the counts
        _tensor_check_failed(where, C, 1, x, None, [x.new_empty((0,), dtype=torch.float32)], 0, 0, False, allow_cpu)


def _flat(base_w, base_b, base_s, level_w, level_s):
    """The flat parameter list from the custom ops' arguments."""
    params = [base_w, base_s, *level_w, *level_s]
    if base_b is not None:
        params.append(base_b)
    return params


# (C, L, parameter shapes) that passed the shape checks: a module checks its shapes once, not per call.
_SHAPES_OK = set()


def _check_call(where, x, grad_out, stride, base_w, base_b, base_s, level_w, level_s):
    """The op's arguments (the checks of lkjit_wtconv_check_tensors), x first."""
    params = _flat(base_w, base_b, base_s, level_w, level_s)
    n_lw, n_ls = len(level_w), len(level_s)
    ok = n_lw == n_ls and x.dim() == 4 and x.device.type == "cuda" and x.dtype in _DTYPE_CODES
    if ok and grad_out is not None:
        B, C, H, W = x.shape
        ok = tuple(grad_out.shape) == (B, C, (H + stride - 1) // stride, (W + stride - 1) // stride)
    if ok:
        device = x.device
        ok = all(p.device == device and p.dtype == torch.float32 for p in params)
    if ok:
        key = (x.shape[1], n_lw, tuple([p.shape for p in params]))
        if key not in _SHAPES_OK:
            if not _shapes_ok(x.shape[1], params, n_lw):
                _tensor_check_failed(where, -1, stride, x, grad_out, params, n_lw, n_ls, base_b is not None, False)
            if len(_SHAPES_OK) >= 4096:  # bounded (shapes of a program are few; this only guards odd callers)
                _SHAPES_OK.clear()
            _SHAPES_OK.add(key)
        return params
    _tensor_check_failed(where, -1, stride, x, grad_out, params, n_lw, n_ls, base_b is not None, False)


def _shapes_ok(C, params, L):
    k = params[0].shape[-1] if params[0].dim() else 0
    want = [(params[0], (C, 1, k, k)), (params[1], (1, C, 1, 1))]
    if len(params) > 2 + 2 * L:
        want.append((params[2 + 2 * L], (C,)))
    for i in range(L):
        want += [(params[2 + i], (4 * C, 1, k, k)), (params[2 + L + i], (1, 4 * C, 1, 1))]
    return all(t.numel() == math.prod(shape) and (t.dim() != 4 or tuple(t.shape) == shape) for t, shape in want)


def _out_hw(H, W, stride):
    return (H + stride - 1) // stride, (W + stride - 1) // stride


def _new_out(x, stride, mode):
    B, C, H, W = x.shape
    return torch.empty((B, C, *_out_hw(H, W, stride)), dtype=x.dtype, device=x.device,
                       memory_format=ops.out_format(x, mode))


# ---- the ctypes kernels (the fallback when the binding does not load) ------------------------------

class _Entry:
    """An lkjit layer and the parameter tensors it folded last (kept alive: the C++ layer keeps their
    pointers for the backward's Eq. 9, and holding them means a new tensor never reuses their address)."""

    __slots__ = ("layer", "key", "refs", "pins", "lane")

    def __init__(self, layer):
        self.layer, self.key, self.refs = layer, None, None
        # Their storages, held too: a `.data` swap (e.g. model.half().float()) then cannot hand the new
        # storage the old address, which with an unchanged version counter would skip the refold.
        self.pins = None
        self.lane = {}  # (H, W, backward) -> whether channels_last maps of that size run a lane kernel


class _State:
    __slots__ = ("entries", "lock", "always_refold")

    def __init__(self):
        self.entries = {}
        self.lock = threading.Lock()
        self.always_refold = False


def _param_key(params):
    """[(address, version counter)] of the flat parameter list; None for inference tensors (no counter)."""
    try:
        return [(t.data_ptr(), t._version) for t in params]
    except RuntimeError:
        return None


def _layer(x, params, L, layer_id, stride):
    """(entry, params, stream) for a call: the module's lkjit layer for x's (dtype, device), the flat
    parameter list as the kernels read it (contiguous), folded into the layer's weights (Eq. 8) on the
    device's current stream when it changed since the last fold, and that stream.

    A change is another tensor or address or an in-place update (the version counter: an optimizer step).
    The fold is skipped when nothing changed, unless ``always_refold`` is set. (CUDA graphs: once a call has
    been captured, the C++ layer folds before every call itself.)"""
    st = ops.STATES.get(layer_id)
    if st is None:
        raise RuntimeError(f"lkjit: error: {_WHERE}: layer id {layer_id} is not registered (its module was "
                           f"deleted while its autograd graph or compiled code was still in use)")
    device = x.get_device()
    stream = ops.current_stream(device)
    key = (x.dtype, device, x.shape[1], params[0].shape[-1], L, len(params) > 2 + 2 * L, stride)
    ent = st.entries.get(key)  # a dict read is atomic; the lock only guards creation
    if ent is not None and ent.key is not None and len(params) == len(ent.refs) and \
            all(p is r for p, r in zip(params, ent.refs)):
        now = _param_key(params)
        if now == ent.key and not st.always_refold:
            return ent, ent.refs, stream
        if now is not None and all(a[0] == b[0] for a, b in zip(now, ent.key)):  # same storage
            _fold(ent, ent.refs, now, L, stream)
            return ent, ent.refs, stream
    params = [p.contiguous() for p in params]
    if ent is None:
        with st.lock:
            ent = st.entries.get(key)
            if ent is None:
                ent = _Entry(_abi.WTConvLayer(x.shape[1], key[3], L, _DTYPE_CODES[x.dtype], key[5], stride, device))
                st.entries[key] = ent
    _fold(ent, params, _param_key(params), L, stream)
    return ent, params, stream


def _fold(ent, params, key, L, stream):
    """set_weights: the layer folds the scales into the weights (Eq. 8) and keeps the parameters'
    addresses for the backward (Eq. 9); ent keeps the tensors alive, so no other tensor takes them."""
    base_b = params[2 + 2 * L].data_ptr() if len(params) > 2 + 2 * L else 0
    ent.layer._set_weights(params[0].data_ptr(), base_b, params[1].data_ptr(),
                           [t.data_ptr() for t in params[2:2 + L]], [t.data_ptr() for t in params[2 + L:2 + 2 * L]],
                           stream)
    ent.key = key
    ent.refs = params
    ent.pins = [t.detach() for t in params]


def _transposing(x, ent, backward, mode):
    """Whether this call runs the kernels on lkjit-transposed NCHW copies: LKJIT_TORCH_LAYOUT=auto and x
    channels_last (not also NCHW contiguous) with H*W >= _TRANSPOSE_MIN_HW, unless the pass runs a lane
    kernel, which reads channels_last directly (small maps: W <= 16 at stride 1 for k <= 5; the C++
    planner decides). The plane kernels' cluster mode reads channels_last in place too, but the copies
    around the NCHW kernel are faster (bench/RESULTS.md section 13)."""
    if not (mode == "auto" and x.shape[2] * x.shape[3] >= _TRANSPOSE_MIN_HW and not x.is_contiguous()
            and x.is_contiguous(memory_format=torch.channels_last)):
        return False
    B, _, H, W = x.shape
    lane = ent.lane.get((H, W, backward))
    if lane is None:
        lane = ent.lane[(H, W, backward)] = ent.layer.runs_lane(B, H, W, backward)
    return not lane


def _keeps_nchw(x, stride, mode):
    """Whether lkjit::wtconv_fwd_save returns its NCHW copy of x for the backward: a channels_last CUDA map that
    the forward transposes and no lane kernel can take (W > _LANE_MAX_W, or stride > 1). Decided from x's shape
    and layout alone, so that the fake implementation gives the kernel's answer."""
    return (x.is_cuda and mode == "auto" and x.shape[2] * x.shape[3] >= _TRANSPOSE_MIN_HW
            and (x.shape[3] > _LANE_MAX_W or stride != 1) and not x.is_contiguous()
            and x.is_contiguous(memory_format=torch.channels_last))


def _copy_layout(src, dst, device, stream):
    """dst[...] = src[...] (same shape and dtype, any dense strides) with lkjit's layout transpose."""
    _abi._transpose(src.data_ptr(), _lib.Strides(*src.stride()), dst.data_ptr(), _lib.Strides(*dst.stride()),
                    _DTYPE_CODES[src.dtype], *src.shape, device, stream)


def _as_nchw(t, device, stream):
    """t itself when NCHW contiguous, else an NCHW-contiguous copy made by lkjit (t dense)."""
    if t.is_contiguous():
        return t
    out = torch.empty(t.shape, dtype=t.dtype, device=t.device)
    _copy_layout(t, out, device, stream)
    return out


# The ctypes calls take _abi's unchecked entry points (_set_weights, _forward, _backward, _transpose): the
# pointers are data_ptr()s and the stream is torch's, valid by construction, and the public methods' checks of
# them would cost every call.

def _forward(where, keep, x, base_w, base_b, base_s, level_w, level_s, layer_id, stride):
    """Both forward ops' ctypes kernel: (out, the NCHW copy of x where keep and _keeps_nchw, else None)."""
    params = _check_call(where, x, None, stride, base_w, base_b, base_s, level_w, level_s)
    mode = ops.layout_mode(_WHERE)  # a bad LKJIT_TORCH_LAYOUT fails every call, whatever the input's layout
    L = len(level_w)
    out = _new_out(x, stride, mode)
    if not ops.dense(x, mode):
        x = x.contiguous()
    keep = keep and _keeps_nchw(x, stride, mode)
    B, C, H, W = x.shape
    if out.numel() == 0:
        return out, (torch.empty(x.shape, dtype=x.dtype, device=x.device) if keep else None)
    ent, params, stream = _layer(x, params, L, layer_id, stride)
    device = x.get_device()
    if keep or _transposing(x, ent, False, mode):  # (keep implies transposing: no lane kernel takes the map)
        xn, on = _as_nchw(x, device, stream), torch.empty(out.shape, dtype=out.dtype, device=out.device)
        ent.layer._forward(xn.data_ptr(), on.data_ptr(), B, H, W, stream, None, None)
        _copy_layout(on, out, device, stream)
        return out, (xn if keep else None)
    ent.layer._forward(x.data_ptr(), out.data_ptr(), B, H, W, stream, ops.c_strides(x), ops.c_strides(out))
    return out, None


def _fwd_impl(x, base_w, base_b, base_s, level_w, level_s, layer_id, stride):
    """lkjit::wtconv_fwd's ctypes kernel (see wtconv_fwd)."""
    return _forward(_FWD, False, x, base_w, base_b, base_s, level_w, level_s, layer_id, stride)[0]


def _fwd_save_impl(x, base_w, base_b, base_s, level_w, level_s, layer_id, stride):
    """lkjit::wtconv_fwd_save's ctypes kernel (see _fwd_save_op)."""
    out, xn = _forward(_FWD_SAVE, True, x, base_w, base_b, base_s, level_w, level_s, layer_id, stride)
    return out, (xn if xn is not None else x.new_empty(0))


def _check_nchw_copy(x, x_is_nchw_copy):
    if x_is_nchw_copy and not x.is_contiguous():
        raise _lib.SpecError(f"lkjit: error: {_BWD}: x_is_nchw_copy=True with an x that is not NCHW contiguous (strides "
                         f"{tuple(x.stride())}); supported: the forward's NCHW copy ({_FWD_SAVE}'s second output)")


def _bwd_impl(grad_out, x, base_w, base_b, base_s, level_w, level_s, layer_id, stride, reuse_fold=False,
              x_is_nchw_copy=False):
    """lkjit::wtconv_bwd's ctypes kernel (see wtconv_bwd)."""
    params = _check_call(_BWD, x, grad_out, stride, base_w, base_b, base_s, level_w, level_s)
    _check_nchw_copy(x, x_is_nchw_copy)
    mode = ops.layout_mode(_WHERE)
    L = len(level_w)
    if not ops.dense(x, mode):
        x = x.contiguous()
    B, C, H, W = x.shape
    if grad_out.dtype != x.dtype:
        grad_out = grad_out.to(x.dtype)
    if not ops.dense(grad_out, mode):  # e.g. the expanded gradient of out.sum()
        grad_out = grad_out.contiguous()
    if x.numel() == 0:
        dx = torch.zeros_like(x, memory_format=torch.channels_last) if x_is_nchw_copy else torch.zeros_like(x)
        return [dx] + [torch.zeros(p.shape, dtype=p.dtype, device=p.device) for p in params]
    ent, params, stream = _layer(x, params, L, layer_id, stride)
    device = x.get_device()
    # x is dense here: dx gets its strides, or channels_last ones where x is the forward's copy of such an input
    dx = torch.empty_like(x, memory_format=torch.channels_last) if x_is_nchw_copy else torch.empty_like(x)
    grads = [torch.empty_like(p) for p in params]
    ptrs = [g.data_ptr() for g in grads]
    gb = ptrs[2 + 2 * L] if len(params) > 2 + 2 * L else 0
    gw = (ptrs[2:2 + L], ptrs[2 + L:2 + 2 * L])
    if x_is_nchw_copy or _transposing(x, ent, True, mode):
        xn, gn = _as_nchw(x, device, stream), _as_nchw(grad_out, device, stream)
        dxn = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        ent.layer._backward(xn.data_ptr(), gn.data_ptr(), dxn.data_ptr(), ptrs[0], gb, ptrs[1], *gw, B, H, W,
                            stream, None, None, None, reuse_fold)
        _copy_layout(dxn, dx, device, stream)
        return [dx] + grads
    ent.layer._backward(x.data_ptr(), grad_out.data_ptr(), dx.data_ptr(), ptrs[0], gb, ptrs[1], *gw, B, H, W,
                        stream, ops.c_strides(x), ops.c_strides(grad_out), ops.c_strides(dx), reuse_fold)
    return [dx] + grads


# ---- the ops ---------------------------------------------------------------------------------------
# CUDA graphs (mode="reduce-overhead", torch.cuda.graph): the ops are capturable. Once a call has been
# captured, the C++ layer folds before each call, captured ones included, so a replay folds the parameters'
# values at replay time (a backward through autograd reads its forward's fold: reuse_fold); it keeps any
# scratch a graph may use, and refuses a shape's first call under capture (it compiles and allocates: warm
# up first, as inductor and torch.cuda.make_graphed_callables do). The binding folds before every forward
# (the stable ABI has no version counters to skip it by; a fold is one small kernel).

def _wtconv_fwd_fake(x, base_w, base_b, base_s, level_w, level_s, layer_id, stride):
    return _new_out(x, stride, ops.layout_mode(_WHERE))  # the strides the kernels' output has


def _wtconv_fwd_save_fake(x, base_w, base_b, base_s, level_w, level_s, layer_id, stride):
    mode = ops.layout_mode(_WHERE)
    keep = _keeps_nchw(x if ops.dense(x, mode) else x.contiguous(), stride, mode)
    return _new_out(x, stride, mode), x.new_empty(x.shape) if keep else x.new_empty(0)


def _wtconv_bwd_fake(grad_out, x, base_w, base_b, base_s, level_w, level_s, layer_id, stride, reuse_fold=False,
                     x_is_nchw_copy=False):
    _check_nchw_copy(x, x_is_nchw_copy)
    params = [base_w, base_s, *level_w, *level_s] + ([base_b] if base_b is not None else [])
    if x_is_nchw_copy:
        dx = torch.empty_like(x, memory_format=torch.channels_last)
    else:
        dx = torch.empty_like(x) if ops.dense(x, ops.layout_mode(_WHERE)) else x.new_empty(x.shape)  # as dX's
    return [dx] + [p.new_empty(p.shape) for p in params]


def _op_setup_context(ctx, inputs, output):
    x, base_w, base_b, base_s, level_w, level_s, layer_id, stride = inputs
    ctx.layer_id, ctx.stride, ctx.L, ctx.has_bias = layer_id, stride, len(level_w), base_b is not None
    ctx.save_for_backward(x, base_w, base_s, *level_w, *level_s, *([base_b] if base_b is not None else []))


def _op_backward(ctx, grad_out):
    """wtconv_fwd's own autograd (a direct call of the op): lkjit::wtconv_bwd, gradients in the op's input order."""
    L = ctx.L
    saved = ctx.saved_tensors
    x, base_w, base_s = saved[:3]
    level_w, level_s = list(saved[3:3 + L]), list(saved[3 + L:3 + 2 * L])
    base_b = saved[3 + 2 * L] if ctx.has_bias else None
    # reuse_fold: these are the forward's saved parameters (autograd refuses in-place changes of them).
    g = _bwd_op(grad_out, x, base_w, base_b, base_s, level_w, level_s, ctx.layer_id, ctx.stride, True)
    # g = [dX, d base_w, d base_s, d level_w..., d level_s..., (d base_b)]
    return (g[0], g[1], g[3 + 2 * L] if ctx.has_bias else None, g[2], list(g[3:3 + L]), list(g[3 + L:3 + 2 * L]),
            None, None)


_fwd_op = ops.define_op(
    "wtconv_fwd", "(Tensor x, Tensor base_w, Tensor? base_b, Tensor base_s, Tensor[] level_w, Tensor[] level_s, "
    "int layer_id, int stride) -> Tensor", _wtconv_fwd_fake, _fwd_impl,
    autograd=(_op_backward, _op_setup_context))
# The layer's forward (inside its autograd.Functions, below autograd): wtconv_fwd's out, and the NCHW copy of x
# that the plane kernels read where x is a channels_last map the forward transposes and no lane kernel can take
# (_keeps_nchw), else an empty tensor (0 elements). The backward reads that copy (x_is_nchw_copy) instead of
# transposing x again: one layout copy less a training step, and x itself need not stay alive.
_fwd_save_op = ops.define_op(
    "wtconv_fwd_save", "(Tensor x, Tensor base_w, Tensor? base_b, Tensor base_s, Tensor[] level_w, "
    "Tensor[] level_s, int layer_id, int stride) -> (Tensor, Tensor)", _wtconv_fwd_save_fake, _fwd_save_impl)
# No autograd for wtconv_bwd: WTConv has no double backward (torch's fallback warns if one is attempted).
_bwd_op = ops.define_op(
    "wtconv_bwd", "(Tensor grad_out, Tensor x, Tensor base_w, Tensor? base_b, Tensor base_s, Tensor[] level_w, "
    "Tensor[] level_s, int layer_id, int stride, bool reuse_fold=False, bool x_is_nchw_copy=False) -> Tensor[]",
    _wtconv_bwd_fake, _bwd_impl)


_BELOW_AUTOGRAD = torch._C._AutoDispatchBelowAutograd


def _fwd_no_autograd(*args):
    """lkjit::wtconv_fwd where no autograd node of the op is wanted (under no_grad): below the autograd keys,
    so the op's Python autograd wrapper (pytree flattening, custom-op glue) does not run on every call. Under
    torch.compile the plain op: dynamo records it (AOT autograd differentiates the enclosing code, not the op)."""
    if ops.is_compiling():
        return _fwd_op(*args)
    with _BELOW_AUTOGRAD():
        return _fwd_op(*args)


def _fwd_save(*args):
    """lkjit::wtconv_fwd_save inside the layer's autograd.Functions (no autograd of its own), as _fwd_no_autograd."""
    if ops.is_compiling():
        return _fwd_save_op(*args)
    with _BELOW_AUTOGRAD():
        return _fwd_save_op(*args)


def _save_input(ctx, x, output):
    """setup_context's half for x: saves the forward's NCHW copy of x where it made one (and then not x), and
    marks that copy as no output to differentiate. Returns the tensor to save."""
    xn = output[1]
    ctx.mark_non_differentiable(xn)
    ctx.set_materialize_grads(False)  # no zero gradient of the copy's size for the backward
    ctx.x_is_nchw_copy = xn.numel() > 0
    return xn if ctx.x_is_nchw_copy else x



def wtconv_fwd(x: Tensor, base_w: Tensor, base_b: typing.Optional[Tensor], base_s: Tensor,
               level_w: typing.List[Tensor], level_s: typing.List[Tensor], layer_id: int, stride: int) -> Tensor:
    """torch.ops.lkjit.wtconv_fwd: out (B, C, ceil(H/stride), ceil(W/stride)), dtype of x = WTConv(x (B, C, H,
    W)), channels_last when x is channels_last, else NCHW contiguous; x (CUDA) in any layout (read through its
    strides when dense); fp32 parameters in the reference shapes; layer_id names the module whose lkjit layer
    (folded weights, workspace) runs it. Differentiable: its registered autograd runs lkjit::wtconv_bwd (WTConv2d
    itself calls it below autograd, inside its own autograd.Function _WTConvFunction)."""
    return _fwd_op(x, base_w, base_b, base_s, level_w, level_s, layer_id, stride)


def wtconv_bwd(grad_out: Tensor, x: Tensor, base_w: Tensor, base_b: typing.Optional[Tensor], base_s: Tensor,
               level_w: typing.List[Tensor], level_s: typing.List[Tensor], layer_id: int,
               stride: int, reuse_fold: bool = False, x_is_nchw_copy: bool = False) -> typing.List[Tensor]:
    """torch.ops.lkjit.wtconv_bwd: [dX, d base_w, d base_s, d level_w[0..L-1], d level_s[0..L-1], (d base_b if
    bias)]: dX in x's dtype, shape and strides (NCHW contiguous if x is not dense), parameter gradients fp32 in
    the parameters' shapes; deterministic. grad_out in any layout. reuse_fold (the layer's backward sets it):
    the parameters are those the layer's last forward saw, so a layer captured in a CUDA graph reads that
    forward's fold instead of folding again; leave it False when calling the op directly. x_is_nchw_copy (the
    layer's backward sets it where its forward kept one): x is the NCHW-contiguous copy of a channels_last input
    (lkjit::wtconv_fwd_save's second output), and dX is channels_last; SpecError (a ValueError) if x is not NCHW
    contiguous. Not differentiable (no double backward)."""
    return _bwd_op(grad_out, x, base_w, base_b, base_s, level_w, level_s, layer_id, stride, reuse_fold,
                   x_is_nchw_copy)


# ---- autograd: one mechanism, eager and compiled ---------------------------------------------------

class _WTConvFunction(torch.autograd.Function):
    """WTConv2d's forward/backward around lkjit::wtconv_fwd / lkjit::wtconv_bwd (traced as those ops by
    torch.compile; setup_context so that torch.func transforms take it too). Inputs:
        apply(layer_id, stride, L, x, base_w, base_s, *level_w, *level_s[, base_b])
    (the flat parameter list as separate tensors, so that autograd gives each its gradient)."""

    @staticmethod
    def forward(layer_id, stride, L, x, *params):
        bias = params[2 + 2 * L] if len(params) > 2 + 2 * L else None
        return _fwd_save(x, params[0], bias, params[1], list(params[2:2 + L]), list(params[2 + L:2 + 2 * L]),
                         layer_id, stride)

    @staticmethod
    def setup_context(ctx, inputs, output):
        layer_id, stride, L, x, *params = inputs
        ctx.layer_id, ctx.stride, ctx.L = layer_id, stride, L
        ctx.save_for_backward(_save_input(ctx, x, output), *params)

    @staticmethod
    def backward(ctx, grad_out, _):
        x, *params = ctx.saved_tensors
        L = ctx.L
        bias = params[2 + 2 * L] if len(params) > 2 + 2 * L else None
        # reuse_fold: these are the forward's saved parameters (autograd refuses in-place changes of them). The
        # kernel computes every gradient at once, so needs_input_grad saves nothing. (grad_out is a tensor: the
        # copy is not differentiable, so autograd calls this only for out's gradient.)
        g = _bwd_op(grad_out, x, params[0], bias, params[1], params[2:2 + L], params[2 + L:2 + 2 * L], ctx.layer_id,
                    ctx.stride, True, ctx.x_is_nchw_copy)
        return (None, None, None, *g)


class _WTConvPackedFunction(torch.autograd.Function):
    """The path of a module with packed_params=True: one autograd input, ``packed``, for every parameter
    (autograd's work per step grows with its inputs: ~30 us of host time each, measured).
        apply(layer_id, stride, L, views, x, packed)
    views: the flat parameter list as no-grad views of packed (shapes and addresses for the kernels); the
    backward returns packed's gradient as the parameter gradients laid end to end."""

    @staticmethod
    def forward(layer_id, stride, L, views, x, packed):
        bias = views[2 + 2 * L] if len(views) > 2 + 2 * L else None
        return _fwd_save(x, views[0], bias, views[1], list(views[2:2 + L]), list(views[2 + L:2 + 2 * L]), layer_id,
                         stride)

    @staticmethod
    def setup_context(ctx, inputs, output):
        layer_id, stride, L, views, x, packed = inputs
        ctx.layer_id, ctx.stride, ctx.L = layer_id, stride, L
        ctx.views = views  # no-grad views of an input: not saved tensors (packed's saving checks versions)
        ctx.save_for_backward(_save_input(ctx, x, output), packed)

    @staticmethod
    def backward(ctx, grad_out, _):
        x, _ = ctx.saved_tensors
        v, L = ctx.views, ctx.L
        bias = v[2 + 2 * L] if len(v) > 2 + 2 * L else None
        g = _bwd_op(grad_out, x, v[0], bias, v[1], list(v[2:2 + L]), list(v[2 + L:2 + 2 * L]), ctx.layer_id,
                    ctx.stride, True, ctx.x_is_nchw_copy)
        return None, None, None, None, g[0], torch.cat([t.reshape(-1) for t in g[1:]])



# ---- the module ------------------------------------------------------------------------------------

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


def _unpack_state_dict(module, state_dict, prefix, local_metadata):
    """state_dict hook of a module with packed_params=True: the reference module's keys in place of
    ``packed``, so that checkpoints do not depend on the packing. Each is a copy with its own storage
    (savers such as safetensors refuse tensors that share one); with keep_vars=True, views of the
    Parameter (they carry gradients to it, but are not Parameters themselves)."""
    t = state_dict.pop(prefix + "packed", None)
    if t is None:
        return
    views = isinstance(t, nn.Parameter)  # keep_vars=True
    where = {name: (shape, off) for name, shape, off in module._packed_layout}
    for name in own_keys(module.wt_levels, module.base_conv.bias is not None):
        shape, off = where[name]
        v = t.narrow(0, off, math.prod(shape)).view(shape)
        state_dict[prefix + name] = v if views else v.clone()


class _PackedSlot:
    """What stands for base_conv, base_scale, wavelet_convs[i], wavelet_scale[i] in a module built with
    packed_params=True: ``weight`` (and ``bias``) are views of the module's ``packed`` parameter, made on
    each access (they carry gradients into it; in-place writes under no_grad change it)."""

    __slots__ = ("_owner", "_w", "_b")

    def __init__(self, owner, w, b=None):
        self._owner, self._w, self._b = owner, w, b

    @property
    def weight(self):
        return self._owner._packed_view(self._w)

    @property
    def bias(self):
        return None if self._b is None else self._owner._packed_view(self._b)

    def __repr__(self):
        return f"_PackedSlot(weight={tuple(self.weight.shape)})"


class WTConv2d(nn.Module):
    """Depthwise wavelet convolution (WTConv, Finder et al., ECCV 2024, Algorithm 1; Haar filters) on
    lkjit's fused CUDA kernels (Aflalo et al. 2026, Eq. 7-9). A drop-in for the reference module:

        WTConv2d(in_channels, out_channels, kernel_size=5, stride=1, bias=True, wt_levels=1, wt_type='db1')

    Input: (B, C, H, W) CUDA tensor, float32 / float16 / bfloat16, any layout: dense ones (NCHW
    contiguous, channels_last, any dim order) are read in place, others are copied to NCHW first.
    Output: (B, C, ceil(H/stride), ceil(W/stride)), the input's dtype, channels_last for a
    channels_last input and NCHW contiguous otherwise; the input's gradient has the input's strides.
    Under CUDA autocast the op runs in the autocast dtype. Parameters stay float32 (other dtypes are
    cast to float32 for the op) and get float32 gradients:

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

    Calls run through an autograd.Function (``_WTConvFunction``) around the custom ops ``lkjit::wtconv_fwd`` /
    ``lkjit::wtconv_bwd``, eager and under torch.compile alike (dynamo traces the Function with the ops inside;
    AOT autograd's forward and backward graphs call the ops), so both run the same code and kernels
    (identical results). The op's own autograd (for direct calls of the op) is bypassed: its Python wrapper
    would cost host time on every eager call.

    packed_params=True keeps all 2L+3 parameters in one fp32 Parameter, ``packed`` (the flat order: base
    weight, base scale, level weights, level scales, bias), for speed: autograd's host work per training
    step grows with the number of parameter tensors (about 30 us each on an H200 host, against 200 us for
    a whole call), and small eager steps are bound by it. The reference names stay: ``m.base_conv.weight``
    etc. are views of ``packed`` (differentiable; in-place writes under no_grad update it), and state_dict
    saves and loads the reference keys as above. What changes is ``parameters()``: one 1-D tensor, so
    optimizer settings by parameter name or dimension (e.g. no weight decay on 1-D tensors) treat all of
    the layer's parameters alike; and base_conv, base_scale, wavelet_convs[i], wavelet_scale[i] are plain
    objects holding those views, not modules (no requires_grad_(), not visited by modules() / apply()).

    CUDA graphs (torch.cuda.graph, make_graphed_callables, torch.compile mode="reduce-overhead") capture
    the layer: once captured, it refolds before every call (a backward reads its forward's fold), so replays
    (and the eager calls between them) use the parameters' current values. Run each input shape once before
    capturing it (the first call compiles kernels and allocates scratch, which capture forbids:
    lkjit.SpecError says so). A captured step is not bound by the host time per call (bench/RESULTS.md,
    section 3).

    Raises ValueError: in_channels != out_channels, wt_type other than 'db1', kernel_size / wt_levels /
    stride out of range (odd k in [1, 31], levels in [0, 8], stride in [1, 64]); on forward: input not
    4-D, wrong channel count, not on a CUDA device. TypeError: a size (in_channels, out_channels,
    kernel_size, stride, wt_levels) that is not an int (operator.index: float, str and bool are refused);
    a flag (bias, packed_params, always_refold) that is not a bool (numpy bools pass; 0, 1, 'no', None are
    refused); input dtype other than float32, float16, bfloat16. lkjit.LibraryNotFoundError: liblkjit.so
    not found; lkjit.DriverError: no usable GPU.
    """

    def __init__(self, in_channels, out_channels, kernel_size=5, stride=1, bias=True, wt_levels=1, wt_type="db1",
                 packed_params=False):
        super().__init__()
        # Sizes by operator.index (ints, numpy integers): a float, str or bool is a TypeError naming it.
        in_channels, out_channels, kernel_size, stride, wt_levels = (
            _lib.as_int(v, n, _WHERE) for v, n in ((in_channels, "in_channels"), (out_channels, "out_channels"),
                                                    (kernel_size, "kernel_size"), (stride, "stride"),
                                                    (wt_levels, "wt_levels")))
        # Flags are bools: a truthy stand-in such as bias='no' would silently mean True.
        bias = _lib.as_bool(bias, "bias", _WHERE)
        packed_params = _lib.as_bool(packed_params, "packed_params", _WHERE)
        errors = []
        if in_channels != out_channels:
            errors.append(f"in_channels={in_channels} and out_channels={out_channels} differ; WTConv2d is "
                          f"depthwise: out_channels must equal in_channels")
        # The library's ranges (lkjit._lib._RANGES, which a CPU test checks against the library itself).
        errors += _lib.range_errors("wtconv", [("in_channels", "C", in_channels)])
        if wt_type not in ("db1", "haar"):
            errors.append(f"wt_type={wt_type!r} is not supported; supported: 'db1' (Haar)")
        errors += _lib.range_errors("wtconv", [("kernel_size", "k", kernel_size), ("wt_levels", "L", wt_levels),
                                               ("stride", "stride", stride)])
        if errors:
            raise ValueError(f"{_WHERE}: " + "; ".join(errors))
        C, k = in_channels, kernel_size
        self.in_channels, self.out_channels, self.kernel_size = C, C, k
        self.stride, self.wt_levels, self.wt_type = stride, wt_levels, wt_type
        self.packed_params = packed_params
        if self.packed_params:
            # The flat list's order ([base_w, base_s, level_w..., level_s..., (base_b)]), one tensor.
            L = wt_levels
            names = (["base_conv.weight", "base_scale.weight"] + [f"wavelet_convs.{i}.weight" for i in range(L)]
                     + [f"wavelet_scale.{i}.weight" for i in range(L)] + (["base_conv.bias"] if bias else []))
            shapes = ([(C, 1, k, k), (1, C, 1, 1)] + [(4 * C, 1, k, k)] * L + [(1, 4 * C, 1, 1)] * L
                      + ([(C,)] if bias else []))
            offsets = list(itertools.accumulate([0] + [math.prod(sh) for sh in shapes]))
            self._packed_layout = list(zip(names, shapes, offsets))
            self._packed_cache = None  # (packed tensor, its address, no-grad views of it)
            self.packed = nn.Parameter(torch.empty(offsets[-1]))
            self.base_conv = _PackedSlot(self, 0, 2 + 2 * L if bias else None)
            self.base_scale = _PackedSlot(self, 1)
            self.wavelet_convs = [_PackedSlot(self, 2 + i) for i in range(L)]
            self.wavelet_scale = [_PackedSlot(self, 2 + L + i) for i in range(L)]
            self._register_state_dict_hook(_unpack_state_dict)
        else:
            self.base_conv = _Params((C, 1, k, k), (C,) if bias else None)
            self.base_scale = _Params((1, C, 1, 1))
            self.wavelet_convs = nn.ModuleList(_Params((4 * C, 1, k, k)) for _ in range(wt_levels))
            self.wavelet_scale = nn.ModuleList(_Params((1, 4 * C, 1, 1)) for _ in range(wt_levels))
        self.reset_parameters()
        self._lkjit_id = ops.new_layer_id(self, _State())

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

    # A copy (deepcopy, pickle) gets its own lkjit layers (and its own views of its packed parameter).
    def __getstate__(self):
        state = self.__dict__.copy()
        if "_packed_cache" in state:
            state["_packed_cache"] = None
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._lkjit_id = ops.new_layer_id(self, _State())

    @property
    def always_refold(self):
        return ops.STATES[self._lkjit_id].always_refold

    @always_refold.setter
    def always_refold(self, value):
        ops.STATES[self._lkjit_id].always_refold = _lib.as_bool(value, "always_refold", _WHERE)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"bias={self.base_conv.bias is not None}, wt_levels={self.wt_levels}, wt_type={self.wt_type!r}"
                + (", packed_params=True" if self.packed_params else ""))

    def forward(self, x):
        _check_input(x, self.in_channels, allow_cpu=True)
        if x.device.type == "cpu":  # the same op in PyTorch: runs, traces and exports anywhere
            return self._forward_cpu(x)
        dt = ops.autocast_dtype()  # the autocast rule: x in the autocast dtype, parameters fp32
        if dt is not None and x.dtype != dt:
            x = x.to(dt)
        if not ops.dense(x, ops.layout_mode(_WHERE)):  # gaps or overlaps: one NCHW copy, which autograd saves
            x = x.contiguous()
        if not ops.BINDING.loaded or ops.is_compiling():
            return self._forward_op(x)
        try:
            return self._forward_op(x)
        except RuntimeError as e:  # the binding's errors carry the C ABI's code: lkjit's exception classes
            t = ops.translate(e)
            if t is e:
                raise
            raise t from None

    def _forward_op(self, x):
        L = self.wt_levels
        if self.packed_params and self.packed.dtype == torch.float32 and not (ops.is_compiling() or ops.is_tracing()):
            # One autograd input for all parameters: the views only give the kernels shapes and addresses.
            views = self._packed_views()
            if not torch.is_grad_enabled():
                return _fwd_no_autograd(x, views[0], views[2 + 2 * L] if len(views) > 2 + 2 * L else None,
                                        views[1], views[2:2 + L], views[2 + L:2 + 2 * L], self._lkjit_id, self.stride)
            return _WTConvPackedFunction.apply(self._lkjit_id, self.stride, L, views, x, self.packed)[0]
        params = self._flat_params()
        if not torch.is_grad_enabled():  # no_grad / inference_mode: no autograd node to build
            return _fwd_no_autograd(x, params[0], params[2 + 2 * L] if len(params) > 2 + 2 * L else None,
                                    params[1], params[2:2 + L], params[2 + L:2 + 2 * L], self._lkjit_id, self.stride)
        return _WTConvFunction.apply(self._lkjit_id, self.stride, L, x, *params)[0]

    def _forward_cpu(self, x):
        """WTConv in PyTorch ops (lkjit/_wtconv_torch_ref.py) in fp32, output in x's dtype and memory format."""
        p = self._flat_params(differentiable=True)
        L = self.wt_levels
        dev = x.device
        for t in p:
            if t.device != dev:  # e.g. a CPU input to a module on the GPU: the library's message names both
                _tensor_check_failed(_WHERE, self.in_channels, self.stride, x, None, p, L, L, len(p) > 2 + 2 * L,
                                     allow_cpu=True)
        out = wtconv2d_torch(x.float(), p[0], p[2 + 2 * L] if len(p) > 2 + 2 * L else None, p[1], p[2:2 + L],
                             p[2 + L:2 + 2 * L], self.stride)
        return out.to(x.dtype).contiguous(memory_format=ops.out_format(x, ops.layout_mode(_WHERE)))

    def _packed_view(self, i):
        """Tensor i of the flat list as a view of ``packed`` (differentiable)."""
        _, shape, off = self._packed_layout[i]
        return self.packed.narrow(0, off, math.prod(shape)).view(shape)

    def _packed_views(self):
        """The flat list as no-grad views of ``packed`` (for shapes and addresses only: the autograd input
        is ``packed`` itself), made once per packed tensor and address. Views share its version counter, so
        an optimizer step still triggers the refold."""
        p = self.packed  # not _parameters["packed"]: DataParallel replicas hold it as a plain attribute
        c = self._packed_cache
        if c is None or c[0] is not p or c[1] != p.data_ptr():
            with torch.no_grad():
                views = [p.narrow(0, off, math.prod(shape)).view(shape) for _, shape, off in self._packed_layout]
            c = self._packed_cache = (p, p.data_ptr(), views)
        return c[2]

    def _flat_params(self, differentiable=False):
        """[base_w, base_s, level_w..., level_s..., (base_b)] as fp32 tensors, read from the submodules'
        parameter dicts: nn.Module.__getattr__ would cost a Python call per lookup, 2L+3 times a call.
        packed_params=True: views of ``packed`` (differentiable)."""
        if self.packed_params:
            return [ops.f32(self._packed_view(i)) for i in range(len(self._packed_layout))]
        mods = self._modules
        try:
            base = mods["base_conv"]._parameters
            params = [base["weight"], mods["base_scale"]._parameters["weight"]]
            params += [m._parameters["weight"] for m in mods["wavelet_convs"]._modules.values()]
            params += [m._parameters["weight"] for m in mods["wavelet_scale"]._modules.values()]
            b = base["bias"]
        except KeyError:  # a parameter replaced by a plain attribute: take the slow way
            params = [self.base_conv.weight, self.base_scale.weight, *[m.weight for m in self.wavelet_convs],
                      *[m.weight for m in self.wavelet_scale]]
            b = self.base_conv.bias
        if b is not None:
            params.append(b)
        for p in params:
            if p.dtype != torch.float32:
                return [ops.f32(p) for p in params]
        return params

    # ---- lkjit introspection ----
    def lkjit_plan(self, B, H, W, dtype=torch.float32, backward=False, arch=0, device=0):
        """The lkjit kernels a (B, C, H, W) input runs with, one per line. arch=0 plans for the GPU
        ``device``; arch=80, 90, ... plans without a GPU."""
        layer = _abi.WTConvLayer(self.in_channels, self.kernel_size, self.wt_levels, _lib.dtype_code(dtype),
                                 self.base_conv.bias is not None, self.stride, device)
        try:
            return layer.describe(B, H, W, backward=backward, arch=arch)
        finally:
            layer.close()

    def lkjit_workspace_bytes(self):
        """Device memory owned by this module's lkjit layers (folded weights + scratch), bytes."""
        st = ops.STATES.get(self._lkjit_id)
        own = sum(e.layer.workspace_bytes() for e in st.entries.values()) if st else 0
        return own + ops.binding_workspace_bytes(self._lkjit_id)

    # ---- state_dict compatibility ----
    def _pack_state_dict(self, state_dict, prefix, missing_keys, error_msgs):
        """Loading into packed_params=True: the reference module's keys become one ``packed`` tensor.
        Tensors not given keep their values and are reported missing; shape mismatches are errors."""
        given = [state_dict[prefix + name] for name, _, _ in self._packed_layout if prefix + name in state_dict]
        if not given:  # none of the layer's keys: leave packed alone (super() reports it missing)
            missing_keys.extend(prefix + name for name, _, _ in self._packed_layout)
            return
        if self.packed.is_meta:  # built on the meta device (load_state_dict(assign=True) then installs flat)
            flat = torch.empty(self.packed.shape, dtype=self.packed.dtype, device=given[0].device)
        else:
            flat = self.packed.detach().clone()
        for name, shape, off in self._packed_layout:
            key = prefix + name
            if key not in state_dict:
                missing_keys.append(key)
                continue
            t = state_dict.pop(key)
            if tuple(t.shape) != shape:
                error_msgs.append(f"size mismatch for {key}: copying a param with shape {tuple(t.shape)} from "
                                  f"checkpoint, the shape in current model is {shape}.")
                continue
            with torch.no_grad():
                flat.narrow(0, off, math.prod(shape)).copy_(t.detach().reshape(-1))
        state_dict[prefix + "packed"] = flat

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
        if self.packed_params:
            shapes = {prefix + name: shape for name, shape, _ in self._packed_layout}
        else:
            shapes = {prefix + n: tuple(p.shape) for n, p in self.named_parameters()}
        for old, new in renames.items():
            t = state_dict.pop(old)
            want = shapes.get(new)
            if want is not None and tuple(t.shape) != want and t.numel() == math.prod(want):
                t = t.reshape(want)  # e.g. a (C,) scale for (1, C, 1, 1)
            state_dict[new] = t
        if self.packed_params and prefix + "packed" not in state_dict:
            self._pack_state_dict(state_dict, prefix, missing_keys, error_msgs)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

