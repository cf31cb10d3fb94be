"""PyTorch drop-in WTConv2d running lkjit's fused CUDA kernels (through liblkjit.so, ctypes; no build
against PyTorch).

Math: WTConv of Finder et al., "Wavelet Convolutions for Large Receptive Fields" (ECCV 2024),
Algorithm 1 with Haar (db1) filters:
    out = s0 * (dw(X, W0) + b) + sum_l Synth_l(s_l * dw(Haar_l(X), W_l)),  then out[..., ::stride, ::stride]
computed with the I/O-aware reformulation of Aflalo et al. (2026): Haar analysis on chip (§4.1),
closed-form synthesis (Eq. 7), scales folded into the weights (Eq. 8) with gradients recovered by Eq. 9.
The exact operator, padding of odd sizes and crop included: the project's operator spec, docs/wtconv.md.

Two entry points run the same implementation (``_fwd_impl`` / ``_bwd_impl``: the checks and the ctypes
calls):
- the custom ops ``lkjit::wtconv_fwd`` and ``lkjit::wtconv_bwd`` (torch.library.custom_op, with fake
  implementations and register_autograd), which torch.compile / torch.export / tracing see as ops;
- ``_WTConvFunction`` (torch.autograd.Function), which ``WTConv2d.forward`` uses in eager mode. The
  custom op's Python dispatch (custom_ops backend/autograd wrappers, pytree flattening, dynamo
  disable wrappers) costs about 1 ms of CPU time per training step (forward + backward), more than the
  kernels of a small layer take on the GPU; an autograd.Function node costs a small fraction of that.
WTConv2d.forward picks the path (custom op when compiling, tracing or given tensor subclasses).

Layout: the kernels read and write activations through their strides, so a dense input in any dim order
(NCHW contiguous, channels_last, ...) is used as it is; only inputs with gaps or overlaps are copied.
The output is channels_last for a channels_last input, NCHW contiguous otherwise; dX has x's strides.
Small channels_last maps (W <= 16 at stride 1 with k <= 5, W <= 8 with k = 7; see lkjit::WTConvPath)
run lkjit's lane kernels, forward and backward, one or two threads per channel plane, which read
channels_last directly. The plane kernels read channels_last planes uncoalesced, so for larger
channels_last maps of at least ``_TRANSPOSE_MIN_HW`` pixels the layer runs them on NCHW copies made by
lkjit's coalesced layout transpose (lkjit::wtconv_transpose) and transposes the results back (the eager
backward reuses the forward's copy of x when there is one); ``LKJIT_TORCH_LAYOUT`` = auto (that; the
default) | strided (never transpose) | nchw (PyTorch copies, for comparison). Results are bit-identical
whichever way, except that the lane kernels round differently from the plane kernels an NCHW input runs.
"""
import itertools
import math
import os
import threading
import typing
import weakref

try:
    import torch
except ModuleNotFoundError as e:
    if e.name != "torch":  # torch is there but broken: its own error says more
        raise
    # Still a ModuleNotFoundError for torch, so that `except ModuleNotFoundError` and importorskip work.
    raise ModuleNotFoundError("lkjit.torch needs PyTorch (torch>=2.4, a CUDA build to run the kernels), "
                              "which is not installed: pip install torch, or install this package with its "
                              "torch extra (pip install './python[torch]' in a source checkout). "
                              "`import lkjit` itself needs no PyTorch.", name="torch") from e
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from . import _lib
from ._state_dict import own_keys, remap_keys

__all__ = ["WTConv2d", "wtconv_fwd", "wtconv_bwd"]

_DTYPE_CODES = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}
_WHERE = "lkjit.torch.WTConv2d"
_FWD, _BWD = "lkjit::wtconv_fwd", "lkjit::wtconv_bwd"

# Parameters travel as one flat list in the order of the backward's gradients:
#     [base_w, base_s, level_w[0..L-1], level_s[0..L-1], (base_b if bias)]
# so the layer's gradients map one to one onto the autograd.Function's inputs.


# ---- one lkjit layer per (module, dtype, device) ------------------------------------------------------

class _Entry:
    """An lkjit layer and the parameter tensors it folded last (kept alive: the C++ layer keeps their
    pointers for the backward's Eq. 9, and holding them means a new tensor never reuses their address)."""

    __slots__ = ("layer", "key", "refs", "pins", "lane", "grad_offsets", "grad_numel")

    def __init__(self, layer):
        self.layer, self.key, self.refs = layer, None, None
        # Their storages, held too: a `.data` swap (e.g. model.half().float()) then cannot hand the new
        # storage the old address, which with an unchanged version counter would skip the refold.
        self.pins = None
        self.lane = {}  # (H, W, backward) -> whether channels_last maps of that size run a lane kernel
        # The refs' gradients packed in one fp32 buffer (the eager backward): byte offsets, total floats.
        self.grad_offsets, self.grad_numel = None, 0


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


def _param_key(params):
    """[(address, version counter)] of the flat parameter list; None for inference tensors (no counter)."""
    try:
        return [(t.data_ptr(), t._version) for t in params]
    except RuntimeError:
        return None


def _layer(x, params, L, layer_id, stride, where):
    """(entry, params, stream) for a call: the module's lkjit layer for x's (dtype, device), the flat
    parameter list as the kernels read it (checked, contiguous), folded into the layer's weights (Eq. 8)
    on the device's current stream when it changed since the last fold, and that stream.

    A change is another tensor or address (checked again: device, dtype, shapes) or an in-place update
    (the version counter: an optimizer step; only refolded). The fold is skipped when nothing changed,
    unless ``always_refold`` is set. (CUDA graphs: once a call has been captured, the C++ layer folds
    before every call itself, since a replay can change the parameters without touching the counters.)"""
    st = _STATES.get(layer_id)
    if st is None:
        raise RuntimeError(f"lkjit: error: {_WHERE}: layer id {layer_id} is not registered (its module was "
                           f"deleted while its autograd graph or compiled code was still in use)")
    device = x.get_device()
    stream = _current_stream(device)
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
    _check_params(x, params, L, where)
    params = [p.contiguous() for p in params]
    if ent is None:
        with st.lock:
            ent = st.entries.get(key)
            if ent is None:
                ent = _Entry(_lib.WTConvLayer(x.shape[1], key[3], L, _DTYPE_CODES[x.dtype], key[5], stride, device))
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
    offsets, n = [], 0
    for t in params:
        offsets.append(4 * n)
        n += t.numel()
    ent.grad_offsets, ent.grad_numel = offsets, n


if hasattr(torch._C, "_cuda_getCurrentRawStream"):
    # cudaStream_t of the device's current stream as an int, as torch.cuda.current_stream(device).cuda_stream
    # without building a torch.cuda.Stream object (what inductor's generated code calls).
    _current_stream = torch._C._cuda_getCurrentRawStream
else:  # a PyTorch built without CUDA (the module then never reaches a kernel)
    def _current_stream(device):
        return torch.cuda.current_stream(device).cuda_stream


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


def _flat(base_w, base_b, base_s, level_w, level_s, where):
    """The flat parameter list from the custom ops' arguments."""
    if len(level_w) != len(level_s):
        raise ValueError(f"{where}: level_w has {len(level_w)} tensors and level_s {len(level_s)}; they must match")
    params = [base_w, base_s, *level_w, *level_s]
    if base_b is not None:
        params.append(base_b)
    return params


# (C, L, parameter shapes) that passed _check_param_shapes: a module checks its shapes once, not per call.
_SHAPES_OK = set()


def _check_params(x, params, L, where):
    """Device, dtype and shapes of the flat parameter list (x: a checked 4-D CUDA input)."""
    device = x.device
    for p in params:
        if p.device != device:
            raise ValueError(f"{where}: parameters are on '{p.device}' but the input is on '{x.device}'; "
                             f"move the module with .to('{x.device}')")
        if p.dtype != torch.float32:
            raise TypeError(f"{where}: parameters must be torch.float32 inside the op; got {p.dtype}")
    key = (x.shape[1], L, tuple([p.shape for p in params]))
    if key not in _SHAPES_OK:
        _check_param_shapes(x.shape[1], params, L, where)
        if len(_SHAPES_OK) >= 4096:  # bounded (shapes of a program are few; this only guards odd callers)
            _SHAPES_OK.clear()
        _SHAPES_OK.add(key)


def _check_param_shapes(C, params, L, where):
    k = params[0].shape[-1]
    want = [("base_w", params[0], (C, 1, k, k)), ("base_s", params[1], (1, C, 1, 1))]
    if len(params) > 2 + 2 * L:
        want.append(("base_b", params[2 + 2 * L], (C,)))
    for i in range(L):
        want += [(f"level_w[{i}]", params[2 + i], (4 * C, 1, k, k)),
                 (f"level_s[{i}]", params[2 + L + i], (1, 4 * C, 1, 1))]
    for name, t, shape in want:
        if t.numel() != math.prod(shape) or (t.dim() == 4 and tuple(t.shape) != shape):
            raise ValueError(f"{where}: {name} has shape {tuple(t.shape)}; expected {shape} for C={C}, k={k}")


def _out_hw(H, W, stride):
    return (H + stride - 1) // stride, (W + stride - 1) // stride


# ---- layouts ---------------------------------------------------------------------------------------
# The kernels take element strides, so the ops copy only tensors that are not dense. The real ops and
# their fake implementations pick output strides with the same functions: torch.compile checks that
# they agree.

_LAYOUT_MODES = ("auto", "strided", "nchw")
# Smallest channels_last map (H*W) the layer transposes for: below it the transposes cost more than the
# strided plane loads lose (WTConvNeXt-T's 7x7 stage measured even; bench/RESULTS.md, section 3).
_TRANSPOSE_MIN_HW = 100


def _layout_mode():
    mode = os.environ.get("LKJIT_TORCH_LAYOUT") or "auto"
    if mode not in _LAYOUT_MODES:
        raise ValueError(f"{_WHERE}: LKJIT_TORCH_LAYOUT={mode!r} is not supported; supported: "
                         f"{', '.join(_LAYOUT_MODES)}")
    return mode


# The functions below take the mode a call read once (``mode``; None: read it now). LKJIT_TORCH_LAYOUT=nchw
# copies every non-NCHW activation to NCHW with PyTorch and returns NCHW outputs (the old way to get
# coalesced plane loads; kept for comparison).

def _transposing(x, ent, backward, mode):
    """Whether this call runs the kernels on lkjit-transposed NCHW copies: LKJIT_TORCH_LAYOUT=auto and x
    channels_last (not also NCHW contiguous) with H*W >= _TRANSPOSE_MIN_HW, unless the pass runs a lane
    kernel, which reads channels_last directly (small maps: W <= 16 at stride 1 for k <= 5; the C++
    planner decides)."""
    if not (mode == "auto" and x.shape[2] * x.shape[3] >= _TRANSPOSE_MIN_HW and not x.is_contiguous()
            and x.is_contiguous(memory_format=torch.channels_last)):
        return False
    B, _, H, W = x.shape
    lane = ent.lane.get((H, W, backward))
    if lane is None:
        lane = ent.lane[(H, W, backward)] = ent.layer.runs_lane(B, H, W, backward)
    return not lane


def _copy_layout(src, dst, device, stream):
    """dst[...] = src[...] (same shape and dtype, any dense strides) with lkjit's layout transpose."""
    _lib._transpose(src.data_ptr(), _lib.Strides(*src.stride()), dst.data_ptr(), _lib.Strides(*dst.stride()),
                    _DTYPE_CODES[src.dtype], *src.shape, device, stream)


def _as_nchw(t, device, stream):
    """t itself when NCHW contiguous, else an NCHW-contiguous copy made by lkjit (t dense)."""
    if t.is_contiguous():
        return t
    out = torch.empty(t.shape, dtype=t.dtype, device=t.device)
    _copy_layout(t, out, device, stream)
    return out


def _dense(t, mode=None):
    """Whether t is non-overlapping and dense in some order of its dims (NCHW contiguous, channels_last,
    or any other permutation): the kernels then address it through its strides, with no copy."""
    if t.is_contiguous():
        return True
    if (mode or _layout_mode()) == "nchw":
        return False
    if t.is_contiguous(memory_format=torch.channels_last):
        return True
    expected = 1
    for size, st in sorted(zip(t.shape, t.stride()), key=lambda d: d[1]):
        if size != 1:
            if st != expected:
                return False
            expected *= size
    return True


def _out_format(x, mode=None):
    """Memory format of the forward output: channels_last for a channels_last input, else contiguous."""
    if not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last) and \
            (mode or _layout_mode()) != "nchw":
        return torch.channels_last
    return torch.contiguous_format


def _new_out(x, stride, mode=None):
    B, C, H, W = x.shape
    return torch.empty((B, C, *_out_hw(H, W, stride)), dtype=x.dtype, device=x.device,
                       memory_format=_out_format(x, mode))


# Views of a flat buffer with the shapes of a list of tensors, packed in order (one C++ call).
_unflatten = getattr(torch._C._nn, "unflatten_dense_tensors", None) or torch._utils._unflatten_dense_tensors


def _strides(t):
    """Element strides for the C ABI, as its int64_t[4] (a tensor's strides need no range check); None (the
    ABI's default) for an NCHW-contiguous tensor."""
    return None if t.is_contiguous() else _lib.Strides(*t.stride())


# ---- the implementation (both paths) ---------------------------------------------------------------
# The ctypes calls take _lib's unchecked entry points (_set_weights, _forward, _backward, _transpose): the
# pointers are data_ptr()s and the stream is torch's, valid by construction, and the public methods' checks of
# them would cost every call.

def _fwd_impl(x, params, L, layer_id, stride, where=_FWD, keep_nchw=None, mode=None):
    """WTConv forward: out (B, C, ceil(H/stride), ceil(W/stride)) in x's dtype, channels_last when x is,
    else NCHW contiguous (x is read through its strides; copied only if not dense). ``params``: the flat
    list (fp32, the reference shapes); ``L``: the number of levels; layer_id names the module whose lkjit
    layer (folded weights, workspace) runs it. Checks its arguments (the parameters' when they change).
    keep_nchw: a list that gets the NCHW copy of x when the call transposes (_transposing), so that the
    backward can run on it instead of transposing x again.
    mode: LKJIT_TORCH_LAYOUT as the caller read it, after checking x with _check_input (the module's
    eager path); None: check x and read the mode here."""
    if mode is None:
        _check_input(x, x.shape[1] if x.dim() == 4 else -1, where)
        mode = _layout_mode()  # a bad LKJIT_TORCH_LAYOUT fails every call, whatever the input's layout
    out = _new_out(x, stride, mode)
    if not _dense(x, mode):
        x = x.contiguous()
    B, C, H, W = x.shape
    if out.numel() == 0:
        _check_params(x, params, L, where)
        return out
    ent, params, stream = _layer(x, params, L, layer_id, stride, where)
    device = x.get_device()
    if _transposing(x, ent, False, mode):
        xn, on = _as_nchw(x, device, stream), torch.empty(out.shape, dtype=out.dtype, device=out.device)
        ent.layer._forward(xn.data_ptr(), on.data_ptr(), B, H, W, stream, None, None)
        _copy_layout(on, out, device, stream)
        if keep_nchw is not None:
            keep_nchw.append(xn)
        return out
    ent.layer._forward(x.data_ptr(), out.data_ptr(), B, H, W, stream, _strides(x), _strides(out))
    return out


def _bwd_impl(grad_out, x, params, L, layer_id, stride, check=True, where=_BWD, x_is_nchw_copy=False, mode=None,
              reuse_fold=False):
    """_bwd_run's [dX, one gradient per parameter], each in its own allocation (what the custom op returns)."""
    dx, grads, _ = _bwd_run(grad_out, x, params, L, layer_id, stride, check, where, x_is_nchw_copy, mode,
                            reuse_fold=reuse_fold)
    return [dx] + grads


def _bwd_run(grad_out, x, params, L, layer_id, stride, check=True, where=_BWD, x_is_nchw_copy=False, mode=None,
             packed=False, reuse_fold=False):
    """WTConv backward: (dX, [one gradient per entry of the flat parameter list], flat); dX in x's dtype, shape
    and strides (NCHW contiguous if x is not dense), parameter gradients fp32 in the parameters' shapes;
    deterministic. x and grad_out are read through their strides (copied only if not dense).
    check=False skips the argument checks (for arguments _fwd_impl checked: the autograd.Function's
    saved tensors, whose shapes autograd keeps and whose in-place changes autograd refuses).
    x_is_nchw_copy: x is the forward's NCHW copy of a channels_last input (keep_nchw): the call runs as a
    transposing one on it, and dX gets the dense channels_last strides (x's, but for the strides of any
    size-1 dims, which PyTorch ignores). mode: LKJIT_TORCH_LAYOUT as the forward read it; None: read it.
    packed: the parameter gradients are views of one fp32 buffer, ``flat`` (else None), packed in the list's
    order (one allocation instead of 2L+3; a custom op may not return aliasing tensors).
    reuse_fold: the parameters are the saved tensors of this layer's forward (autograd refuses in-place changes
    of them), so a layer captured in a CUDA graph reads that forward's fold instead of folding again."""
    if check:
        _check_input(x, x.shape[1] if x.dim() == 4 else -1, where)
    if mode is None:
        mode = _layout_mode()
    if not _dense(x, mode):
        x = x.contiguous()
    B, C, H, W = x.shape
    if check:
        want = (B, C, *_out_hw(H, W, stride))
        if tuple(grad_out.shape) != want:
            raise ValueError(f"{where}: grad_out has shape {tuple(grad_out.shape)}; expected {want}")
    if grad_out.dtype != x.dtype:
        grad_out = grad_out.to(x.dtype)
    if not _dense(grad_out, mode):  # e.g. the expanded gradient of out.sum()
        grad_out = grad_out.contiguous()
    if x.numel() == 0:
        if check:
            _check_params(x, params, L, where)
        grads = [torch.zeros(p.shape, dtype=p.dtype, device=p.device) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads]) if packed else None
        return torch.zeros_like(x), grads, flat
    ent, params, stream = _layer(x, params, L, layer_id, stride, where)
    device = x.get_device()
    # x is dense here: dx gets its strides (a forward copy's: those of the channels_last original)
    dx = torch.empty_like(x, memory_format=torch.channels_last) if x_is_nchw_copy else torch.empty_like(x)
    if packed:
        flat = torch.empty(ent.grad_numel, dtype=torch.float32, device=x.device)
        grads = list(_unflatten(flat, params))
        base = flat.data_ptr()
        ptrs = [base + o for o in ent.grad_offsets]
    else:
        flat = None
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
        return dx, grads, flat
    ent.layer._backward(x.data_ptr(), grad_out.data_ptr(), dx.data_ptr(), ptrs[0], gb, ptrs[1], *gw, B, H, W,
                        stream, _strides(x), _strides(grad_out), _strides(dx), reuse_fold)
    return dx, grads, flat


# ---- eager path: autograd.Function -----------------------------------------------------------------

class _WTConvFunction(torch.autograd.Function):
    """WTConv2d's eager forward/backward: the same _fwd_impl / _bwd_run as the custom ops, without their
    Python dispatch (about 1 ms of CPU time per training step). Inputs:
        apply(layer_id, stride, L, mode, x, base_w, base_s, *level_w, *level_s[, base_b])
    (the flat parameter list as separate tensors, so that autograd gives each its gradient; x checked by
    the caller, mode: LKJIT_TORCH_LAYOUT as it read it)."""

    @staticmethod
    def forward(ctx, layer_id, stride, L, mode, x, *params):
        # A transposing forward keeps its NCHW copy of x, which the backward reads instead of x: one layout
        # copy less per training step. The copy replaces x among the saved tensors (x can be freed unless
        # something else holds it; then the copy costs one activation until the backward).
        keep = []
        out = _fwd_impl(x, params, L, layer_id, stride, keep_nchw=keep, mode=mode)
        ctx.layer_id, ctx.stride, ctx.L, ctx.mode, ctx.x_is_nchw_copy = layer_id, stride, L, mode, bool(keep)
        ctx.save_for_backward(keep[0] if keep else x, *params)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        x, *params = ctx.saved_tensors
        # The kernel computes every gradient at once, so needs_input_grad saves nothing; autograd drops
        # the gradients of inputs that do not require one.
        dx, grads, _ = _bwd_run(grad_out, x, params, ctx.L, ctx.layer_id, ctx.stride, check=False,
                                x_is_nchw_copy=ctx.x_is_nchw_copy, mode=ctx.mode, packed=True, reuse_fold=True)
        return (None, None, None, None, dx, *grads)


class _WTConvPackedFunction(torch.autograd.Function):
    """The eager path of a module with packed_params=True: one autograd input, ``packed``, for every
    parameter (autograd's work per step grows with its inputs: ~30 us of host time each, measured).
        apply(layer_id, stride, L, mode, views, x, packed)
    views: the flat parameter list as no-grad views of packed (shapes and addresses for the kernels)."""

    @staticmethod
    def forward(ctx, layer_id, stride, L, mode, views, x, packed):
        keep = []
        out = _fwd_impl(x, views, L, layer_id, stride, keep_nchw=keep, mode=mode)
        ctx.layer_id, ctx.stride, ctx.L, ctx.mode, ctx.x_is_nchw_copy = layer_id, stride, L, mode, bool(keep)
        ctx.views = views  # no-grad views of an input: not saved tensors (packed's saving checks versions)
        ctx.save_for_backward(keep[0] if keep else x, packed)
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        x, _ = ctx.saved_tensors
        dx, _, flat = _bwd_run(grad_out, x, ctx.views, ctx.L, ctx.layer_id, ctx.stride, check=False,
                               x_is_nchw_copy=ctx.x_is_nchw_copy, mode=ctx.mode, packed=True, reuse_fold=True)
        return None, None, None, None, None, dx, flat


# ---- custom ops (torch.compile, torch.export, tracing) ---------------------------------------------
# CUDA graphs (mode="reduce-overhead", torch.cuda.graph): the ops are capturable. Once a call has been
# captured, the C++ layer folds before each call, captured ones included, so a replay folds the parameters'
# values at replay time (a backward through autograd reads its forward's fold: reuse_fold); it keeps any
# scratch a graph may use, and refuses a shape's first call under capture (it compiles and allocates: warm
# up first, as inductor and torch.cuda.make_graphed_callables do).
# needs_fixed_stride_order: inductor passes the inputs in the stride order they were traced with, so the
# output layout the fake implementation chose from them (channels_last or not) is the one the kernels produce.
_TAGS = tuple(getattr(torch.Tag, t) for t in ("needs_fixed_stride_order",) if hasattr(torch.Tag, t))


@torch.library.custom_op("lkjit::wtconv_fwd", mutates_args=(), tags=_TAGS)
def wtconv_fwd(x: Tensor, base_w: Tensor, base_b: typing.Optional[Tensor], base_s: Tensor,
               level_w: typing.List[Tensor], level_s: typing.List[Tensor], layer_id: int, stride: int) -> Tensor:
    """out (B, C, ceil(H/stride), ceil(W/stride)), dtype of x = WTConv(x (B, C, H, W)), channels_last when x
    is channels_last, else NCHW contiguous; x in any layout (read through its strides when dense); fp32
    parameters in the reference shapes; layer_id names the module whose lkjit layer (folded weights,
    workspace) runs it."""
    return _fwd_impl(x, _flat(base_w, base_b, base_s, level_w, level_s, _FWD), len(level_w), layer_id, stride)


@wtconv_fwd.register_fake
def _wtconv_fwd_fake(x, base_w, base_b, base_s, level_w, level_s, layer_id, stride):
    return _new_out(x, stride)  # the strides _fwd_impl's output has


@torch.library.custom_op("lkjit::wtconv_bwd", mutates_args=(), tags=_TAGS)
def wtconv_bwd(grad_out: Tensor, x: Tensor, base_w: Tensor, base_b: typing.Optional[Tensor], base_s: Tensor,
               level_w: typing.List[Tensor], level_s: typing.List[Tensor], layer_id: int,
               stride: int, reuse_fold: bool = False) -> typing.List[Tensor]:
    """[dX, d base_w, d base_s, d level_w[0..L-1], d level_s[0..L-1], (d base_b if bias)]: dX in x's dtype,
    shape and strides (NCHW contiguous if x is not dense), parameter gradients fp32 in the parameters'
    shapes; deterministic. grad_out in any layout. reuse_fold (wtconv_fwd's registered backward sets it): the
    parameters are those the layer's last forward saw, so a layer captured in a CUDA graph reads that
    forward's fold instead of folding again; leave it False when calling the op directly."""
    return _bwd_impl(grad_out, x, _flat(base_w, base_b, base_s, level_w, level_s, _BWD), len(level_w), layer_id,
                     stride, reuse_fold=reuse_fold)


@wtconv_bwd.register_fake
def _wtconv_bwd_fake(grad_out, x, base_w, base_b, base_s, level_w, level_s, layer_id, stride, reuse_fold=False):
    params = [base_w, base_s, *level_w, *level_s] + ([base_b] if base_b is not None else [])
    dx = torch.empty_like(x) if _dense(x) else x.new_empty(x.shape)  # the strides _bwd_impl's dX has
    return [dx] + [p.new_empty(p.shape) for p in params]


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
    # reuse_fold: these are the forward's saved parameters (autograd refuses in-place changes of them).
    g = wtconv_bwd(grad_out, x, base_w, base_b, base_s, level_w, level_s, ctx.layer_id, ctx.stride, True)
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


def _f32(p):
    return p if p.dtype == torch.float32 else p.float()


# Where WTConv2d.forward takes the custom op rather than the autograd.Function: under torch.compile /
# torch.export (dynamo constant-folds is_compiling to True, so the graph holds lkjit::wtconv_fwd with its
# fake implementation; the autograd.Function's ctypes calls cannot run on fake tensors), under
# torch.jit.trace, under torch.func transforms (the Function defines no setup_context / vmap), and for
# tensor subclasses (FakeTensor, FunctionalTensor, ...) whose dispatch the custom op goes through.
_is_compiling = getattr(getattr(torch, "compiler", None), "is_compiling", None)
if _is_compiling is None:  # PyTorch < 2.3 (custom_op itself needs 2.4; kept for safety)
    import torch._dynamo
    _is_compiling = torch._dynamo.is_compiling
_is_tracing = getattr(torch._C, "_is_tracing", lambda: False)
_functorch_active = getattr(torch._C, "_are_functorch_transforms_active", lambda: False)


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

    Eager calls run through an autograd.Function (``_WTConvFunction``); under torch.compile / torch.export
    (and jit tracing, torch.func transforms, tensor subclasses) the module calls the custom ops
    ``lkjit::wtconv_fwd`` / ``lkjit::wtconv_bwd`` instead. Both run the same code and kernels (identical
    results); the custom op's Python dispatch would cost about 1 ms of CPU time per eager training step.
    The eager backward's parameter gradients are views of one buffer per call (one allocation).

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

    # A copy (deepcopy, pickle) gets its own lkjit layers (and its own views of its packed parameter).
    def __getstate__(self):
        state = self.__dict__.copy()
        if "_packed_cache" in state:
            state["_packed_cache"] = None
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._lkjit_id = _new_state(self)

    @property
    def always_refold(self):
        return _STATES[self._lkjit_id].always_refold

    @always_refold.setter
    def always_refold(self, value):
        _STATES[self._lkjit_id].always_refold = _lib.as_bool(value, "always_refold", _WHERE)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}, "
                f"bias={self.base_conv.bias is not None}, wt_levels={self.wt_levels}, wt_type={self.wt_type!r}"
                + (", packed_params=True" if self.packed_params else ""))

    def forward(self, x):
        _check_input(x, self.in_channels)
        dt = _autocast_dtype()
        if dt is not None and x.dtype != dt:
            x = x.to(dt)
        mode = _layout_mode()  # read once per call: every helper below takes it
        if not _dense(x, mode):  # gaps or overlaps: one NCHW copy, which autograd then saves
            x = x.contiguous()
        # Two paths, one implementation (see the module docstring): the custom op where torch.compile /
        # export / tracing need an op (_is_compiling first: under dynamo the rest is never traced), else
        # the autograd.Function, whose CPU cost is a fraction of the custom op's Python dispatch.
        if _is_compiling() or type(x) is not Tensor or _is_tracing() or _functorch_active():
            bw, bs, b = _f32(self.base_conv.weight), _f32(self.base_scale.weight), self.base_conv.bias
            lw = [_f32(m.weight) for m in self.wavelet_convs]
            ls = [_f32(m.weight) for m in self.wavelet_scale]
            return wtconv_fwd(x, bw, None if b is None else _f32(b), bs, lw, ls, self._lkjit_id, self.stride)
        if self.packed_params and self.packed.dtype == torch.float32:
            # One autograd input for all parameters: the views only give the kernels shapes and addresses.
            views = self._packed_views()
            if not torch.is_grad_enabled():
                return _fwd_impl(x, views, self.wt_levels, self._lkjit_id, self.stride, mode=mode)
            return _WTConvPackedFunction.apply(self._lkjit_id, self.stride, self.wt_levels, mode, views, x,
                                               self.packed)
        params = self._flat_params()
        if not torch.is_grad_enabled():  # no_grad / inference_mode: no autograd node to build
            return _fwd_impl(x, params, self.wt_levels, self._lkjit_id, self.stride, mode=mode)
        return _WTConvFunction.apply(self._lkjit_id, self.stride, self.wt_levels, mode, x, *params)

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

    def _flat_params(self):
        """[base_w, base_s, level_w..., level_s..., (base_b)] as fp32 tensors, read from the submodules'
        parameter dicts: nn.Module.__getattr__ would cost a Python call per lookup, 2L+3 times a call."""
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
                return [_f32(p) for p in params]
        return params

    # ---- lkjit introspection ----
    def lkjit_plan(self, B, H, W, dtype=torch.float32, backward=False, arch=0, device=0):
        """The lkjit kernels a (B, C, H, W) input runs with, one per line. arch=0 plans for the GPU
        ``device``; arch=80, 90, ... plans without a GPU."""
        layer = _lib.WTConvLayer(self.in_channels, self.kernel_size, self.wt_levels, _lib.dtype_code(dtype),
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

