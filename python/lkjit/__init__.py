"""lkjit: JIT-generated CUDA kernels for WTConv (Finder et al., "Wavelet Convolutions for Large Receptive
Fields", ECCV 2024), computed as in Aflalo et al. 2026 (I/O-aware reformulation), driven from Python
through liblkjit.so's C ABI with ctypes. Needs no compiler and no build against PyTorch.

    import lkjit
    lkjit.gpu_available()            # GpuStatus: truthy, or .reason says what is missing
    lkjit.info()                     # dict: liblkjit.so, NVRTC (which one was loaded), GPU, binding
    from lkjit.torch import WTConv2d # the PyTorch layer (imports torch)

``import lkjit`` imports only the standard library; liblkjit.so is loaded on first use (see
lkjit._lib for where it is looked for; ``$LKJIT_LIBRARY`` overrides).
"""
from ._lib import (CacheError, CompileError, DriverError, GpuStatus, LibraryNotFoundError, LkjitError,
                   SpecError, gpu_available, info, library_path)
from ._wtconv_abi import WTConvLayer

__version__ = "0.1.0"

__all__ = ["CacheError", "CompileError", "DriverError", "GpuStatus", "LibraryNotFoundError", "LkjitError",
           "SpecError", "WTConvLayer", "gpu_available", "info", "library_path", "library_version", "__version__"]


def library_version():
    """Version string of the loaded liblkjit.so (e.g. "0.1.0"). Raises LibraryNotFoundError."""
    from . import _lib
    return _lib.load().lkjit_version().decode()


def __getattr__(name):
    # `lkjit.torch` on first access, so that `import lkjit` does not import PyTorch.
    if name == "torch":
        import importlib
        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'lkjit' has no attribute {name!r}")
