"""PEP 517 build backend of the lkjit Python package, standard library only: `pip install ./python` needs
no setuptools and no network (the GPU machine has neither pip access nor a build of its own).

The wheel holds python/lkjit/*.py and, when one is found, a prebuilt liblkjit.so copied into the
package: $LKJIT_LIBRARY, else <repo>/build/liblkjit.so (build it first: cmake --build build --target
lkjit_shared). Without one the wheel is pure Python and lkjit looks for the library at run time
(see lkjit/_lib.py). An editable install (pip install -e ./python) adds python/ to sys.path.
"""
import base64
import hashlib
import io
import os
import re
import sys
import sysconfig
import tarfile
import zipfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # python/
REPO = os.path.dirname(SRC)
NAME = "lkjit"
_EPOCH = (1980, 1, 1, 0, 0, 0)


def _version():
    text = open(os.path.join(SRC, "pyproject.toml"), encoding="utf-8").read()
    m = re.search(r'^version\s*=\s*"([^"]+)"', text, re.M)
    if not m:
        raise RuntimeError("lkjit_build: no version = \"...\" in python/pyproject.toml")
    return m.group(1)


def _prebuilt_library():
    env = os.environ.get("LKJIT_LIBRARY", "")
    if env:
        if not os.path.isfile(env):
            raise RuntimeError(f"lkjit_build: LKJIT_LIBRARY={env} is not a file (give an absolute path: the "
                               f"backend runs in python/)")
        return env
    p = os.path.join(REPO, "build", "liblkjit.so")
    return p if os.path.isfile(p) else None


def _metadata():
    return "\n".join([
        "Metadata-Version: 2.1",
        f"Name: {NAME}",
        f"Version: {_version()}",
        "Summary: WTConv (wavelet convolution) on JIT-generated CUDA kernels: ctypes binding and PyTorch layer",
        "Requires-Python: >=3.9",
        "Provides-Extra: torch",
        'Requires-Dist: torch>=2.4; extra == "torch"',
        "Provides-Extra: test",
        'Requires-Dist: pytest; extra == "test"',
        "",
    ])


def _dist_info():
    return f"{NAME}-{_version()}.dist-info"


def _write_wheel(wheel_directory, files, tag):
    """files: list of (archive name, bytes, executable)."""
    dist = _dist_info()
    purelib = tag.endswith("-any")
    wheel = f"Wheel-Version: 1.0\nGenerator: lkjit_build\nRoot-Is-Purelib: {'true' if purelib else 'false'}\nTag: {tag}\n"
    files = files + [(f"{dist}/METADATA", _metadata().encode(), False), (f"{dist}/WHEEL", wheel.encode(), False)]
    record = []
    for name, data, _ in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files.append((f"{dist}/RECORD", ("\n".join(record) + "\n").encode(), False))
    filename = f"{NAME}-{_version()}-{tag}.whl"
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, executable in files:
            info = zipfile.ZipInfo(name, _EPOCH)
            info.external_attr = (0o755 if executable else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    return filename


def _package_files():
    out = []
    pkg = os.path.join(SRC, NAME)
    for root, dirs, names in os.walk(pkg):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for n in sorted(names):
            if n.endswith(".py"):
                path = os.path.join(root, n)
                arc = os.path.relpath(path, SRC).replace(os.sep, "/")
                out.append((arc, open(path, "rb").read(), False))
    return out


# ---- PEP 517 hooks ----
def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, _dist_info())
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return _dist_info()


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = _package_files()
    lib = _prebuilt_library()
    if lib:
        files.append((f"{NAME}/liblkjit.so", open(lib, "rb").read(), True))
        plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        tag = f"py3-none-{plat}"
        print(f"lkjit_build: bundling {lib}", file=sys.stderr)
        binding = os.path.join(os.path.dirname(lib), "_lkjit_torch.so")  # the PyTorch binding, built beside it
        if os.path.isfile(binding):
            files.append((f"{NAME}/_lkjit_torch.so", open(binding, "rb").read(), True))
            print(f"lkjit_build: bundling {binding}", file=sys.stderr)
    else:
        tag = "py3-none-any"
        print("lkjit_build: no prebuilt liblkjit.so ($LKJIT_LIBRARY or build/liblkjit.so): pure-Python wheel; "
              "set LKJIT_LIBRARY at run time", file=sys.stderr)
    return _write_wheel(wheel_directory, files, tag)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    pth = (SRC + "\n").encode()
    return _write_wheel(wheel_directory, [(f"_{NAME}_editable.pth", pth, False)], "py3-none-any")


def build_sdist(sdist_directory, config_settings=None):
    base = f"{NAME}-{_version()}"
    filename = f"{base}.tar.gz"
    os.makedirs(sdist_directory, exist_ok=True)
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in ["pyproject.toml", "README.md"]:
            tar.add(os.path.join(SRC, rel), f"{base}/{rel}")
        for sub in [NAME, "build_backend"]:
            for root, dirs, names in os.walk(os.path.join(SRC, sub)):
                dirs[:] = sorted(d for d in dirs if d != "__pycache__")
                for n in sorted(names):
                    if n.endswith(".py"):
                        path = os.path.join(root, n)
                        tar.add(path, f"{base}/{os.path.relpath(path, SRC)}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata().encode()
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return filename
