"""lkjit's PyTorch layers, one entry per op family in _FAMILIES (each family's layer lives in its own module,
which names its public names in __all__; the shared plumbing is lkjit/_torch_ops.py). Importing this imports
torch and loads liblkjit.so and, where it loads, the C++ binding (LKJIT_TORCH_BINDING)."""
import importlib

from ._lib import FAMILIES as _FAMILIES  # one entry per op family (kept in _lib: the torch-free tests read it)

__all__ = []
for _name in _FAMILIES:
    _module = importlib.import_module(f"lkjit.{_name}")
    globals().update({n: getattr(_module, n) for n in _module.__all__})
    __all__ += list(_module.__all__)
