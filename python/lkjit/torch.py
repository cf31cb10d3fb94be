"""lkjit's PyTorch layers, one line per op family (each family's layer lives in its own module; the shared
plumbing is lkjit/_torch_ops.py). Importing this imports torch and loads liblkjit.so and, where it loads, the
C++ binding (LKJIT_TORCH_BINDING)."""
from .wtconv import WTConv2d, wtconv_bwd, wtconv_fwd  # noqa: F401

__all__ = ["WTConv2d", "wtconv_fwd", "wtconv_bwd"]
