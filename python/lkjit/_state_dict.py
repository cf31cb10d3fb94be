"""state_dict key names of WTConv2d (pure Python, no torch).

The layer's own keys are the reference module's (Finder et al., ECCV 2024):
  base_conv.weight (C,1,k,k)  base_conv.bias (C)  base_scale.weight (1,C,1,1)
  wavelet_convs.{i}.weight (4C,1,k,k)  wavelet_scale.{i}.weight (1,4C,1,1)
The reference also stores the fixed Haar taps wt_filter / iwt_filter (4C,1,2,2): accepted on load and
dropped. The official fused module (fast_wtconv) names the same tensors base_weight, base_bias,
base_scale, wt_weights.{i}, wt_scales.{i}; they are renamed on load.
"""
import re

FILTER_KEYS = ("wt_filter", "iwt_filter")

_FUSED = [
    (re.compile(r"base_weight"), "base_conv.weight"),
    (re.compile(r"base_bias"), "base_conv.bias"),
    (re.compile(r"base_scale"), "base_scale.weight"),
    (re.compile(r"wt_weights\.(\d+)"), "wavelet_convs.{}.weight"),
    (re.compile(r"wt_scales\.(\d+)"), "wavelet_scale.{}.weight"),
]


def own_keys(levels, bias):
    """The layer's state_dict keys, in order."""
    keys = ["base_conv.weight"] + (["base_conv.bias"] if bias else []) + ["base_scale.weight"]
    keys += [f"wavelet_convs.{i}.weight" for i in range(levels)]
    keys += [f"wavelet_scale.{i}.weight" for i in range(levels)]
    return keys


def remap_keys(keys, prefix=""):
    """Plans the renaming of the keys under ``prefix``.

    Returns (renames, dropped): renames maps a fused-module key to the reference key it stands for;
    dropped lists the fixed-filter keys to discard. Raises ValueError when a tensor is given under both
    names (e.g. base_weight and base_conv.weight)."""
    keys = list(keys)
    present = set(keys)
    renames, dropped = {}, []
    for key in keys:
        if not key.startswith(prefix):
            continue
        name = key[len(prefix):]
        if name in FILTER_KEYS:
            dropped.append(key)
            continue
        for pattern, target in _FUSED:
            m = pattern.fullmatch(name)
            if m:
                new = prefix + target.format(*m.groups())
                if new in present:
                    raise ValueError(f"lkjit.torch.WTConv2d: state_dict has both {key!r} and {new!r}; "
                                     f"give each tensor once")
                renames[key] = new
                break
    return renames, dropped
