"""liblkjit.so loads NVRTC with dlopen (runtime/nvrtc_loader.cpp), so it needs no CUDA toolkit at run time: these
CPU tests hide the toolkit (CUDA_ROOT pointing nowhere) and check which libnvrtc lkjit.info() reports, that a
failure names every place looked, and that a kernel compiles with the wheel's NVRTC and its builtins."""
import ast
import glob
import os
import subprocess
import sys

import pytest

import lkjit

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_SRC = os.path.dirname(HERE)


def _lib_or_skip():
    try:
        return lkjit.library_path()
    except lkjit.LibraryNotFoundError as e:
        pytest.skip(f"liblkjit.so not built: {e}")


def _wheel_nvrtc_or_skip():
    """libnvrtc.so.13 of torch's nvidia-cuda-nvrtc wheel in this interpreter's site-packages."""
    for site in sys.path:
        for sub in ("nvidia/cu13/lib", "nvidia/cuda_nvrtc/lib"):
            hits = glob.glob(os.path.join(site, sub, "libnvrtc.so.13"))
            if hits:
                return hits[0]
    pytest.skip("no nvidia-cuda-nvrtc wheel in this interpreter (pip install nvidia-cuda-nvrtc, or torch)")


def _run(code, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("LKJIT_NVRTC_LIBRARY", "CUDA_ROOT", "LD_LIBRARY_PATH")}
    e.update(PYTHONPATH=PKG_SRC, LKJIT_LIBRARY=_lib_or_skip(), **env)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_explicit_library_that_does_not_exist_is_named():
    out = _run("import lkjit; print(lkjit.info()['nvrtc'])", LKJIT_NVRTC_LIBRARY="/nowhere/libnvrtc.so.13")
    assert out.startswith("not loaded:") and "/nowhere/libnvrtc.so.13 (LKJIT_NVRTC_LIBRARY): no such file" in out, out
    assert "LKJIT_NVRTC_LIBRARY" in out and "nvidia-cuda-nvrtc" in out, out


def test_every_place_looked_is_named():
    """No explicit library, no toolkit: the message lists the toolkit path and the linker path at least."""
    out = _run("import lkjit; print(lkjit.info()['nvrtc'])", CUDA_ROOT="/nonexistent")
    if not out.startswith("not loaded:"):
        assert os.path.isfile(out.strip()) or "libnvrtc" in out, out  # found on the linker path or a wheel
        return
    assert "/nonexistent/lib64/libnvrtc.so.13 (toolkit): no such file" in out and "(linker path)" in out, out


def test_torch_wheel_is_found_without_the_toolkit():
    """With torch imported and CUDA_ROOT hiding the toolkit, NVRTC comes from torch's wheel beside it, and its
    builtins from the same folder."""
    pytest.importorskip("torch")
    wheel = _wheel_nvrtc_or_skip()
    code = ("import torch, lkjit\nprint(lkjit.info()['nvrtc'])\n"
            "print([l.split()[-1] for l in open('/proc/self/maps') if 'libnvrtc-builtins' in l][:1])")
    out = _run(code, CUDA_ROOT="/nonexistent").splitlines()
    assert os.path.realpath(out[0]) == os.path.realpath(wheel), out
    maps = ast.literal_eval(out[1])  # the mapped builtins, as /proc/self/maps names them (links resolved)
    want = os.path.realpath(os.path.join(os.path.dirname(wheel), "libnvrtc-builtins.so.13.0"))
    assert [os.path.realpath(m) for m in maps] == [want], out


def test_wheel_nvrtc_compiles_a_kernel(tmp_path):
    """The CLI compiles a kernel with only the wheel's NVRTC (toolkit hidden, no LD_LIBRARY_PATH)."""
    lib = _lib_or_skip()
    cli = os.path.join(os.path.dirname(lib), "lkjit")
    if not os.path.isfile(cli):
        pytest.skip("the lkjit CLI is not built beside liblkjit.so")
    wheel = _wheel_nvrtc_or_skip()
    env = {k: v for k, v in os.environ.items() if k not in ("CUDA_ROOT", "LD_LIBRARY_PATH")}
    env.update(CUDA_ROOT="/nonexistent", LKJIT_NVRTC_LIBRARY=wheel, LKJIT_LOG="1", LKJIT_CACHE_DIR=str(tmp_path))
    r = subprocess.run([cli, "compile", "--arch", "sm_90", "-L", "1"], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"loaded NVRTC 13." in r.stderr and wheel in r.stderr and "compiled" in r.stdout, r.stdout + r.stderr
