"""On a real NVIDIA GPU: kernels built by ``mxlower-gpu-to-nvvm`` + llc (+ ptxas when present)
run through CuPy or cuda-python and are bit-exact with mxlower's reference (ml_dtypes plus
docs/semantics.md section 2) on all inputs -- every bf16/f16 pattern, > 200k f32 probes, every
narrow code -- for the hardware cvt paths the device's chip has and the integer fallbacks for
the rest.  This is also the check of :mod:`mxlower.lowering.nvvm_model` against hardware (the
NaN codes and the f4/f6 Inf saturation the ISA text leaves implicit).

The execution tests are marked ``gpu`` and skip without a CUDA device or without both CuPy
and cuda-python.  Run::

    pytest test/python/test_gpu_nvvm.py -m gpu -v

The unmarked tests at the end run everywhere: they build (and, with ptxas, assemble) the very
kernels the GPU tests launch for the chips a lent machine may have, and check the kernel ABI
the launcher assumes, so a GPU session spends its time on the hardware run alone.

A GPU machine need not have mxlower's MLIR stacks (jaxlib, the xtc wheels): build the
kernels where they are and carry them.  With ``MXLOWER_GPU_IMAGES=DIR`` the tests load
``DIR/<chip>-hw.cubin`` / ``-sw.cubin`` (or ``.ptx``) instead of building, and then need only
NumPy, ml_dtypes, pytest and CuPy or cuda-python (this module and the mxlower modules it
uses import no MLIR)::

    python test/python/test_gpu_nvvm.py build .gpu sm_90a sm_100a     # here
    MXLOWER_GPU_IMAGES=.gpu PYTHONPATH=. python3 -m pytest -q -m gpu \
        test/python/test_gpu_nvvm.py                                  # on the GPU machine
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

import mxlower
from mxlower import reference as R
from mxlower.benchmarking import source_fingerprint
from mxlower.execution import ptx
from mxlower.formats import FLOAT_TYPES
from mxlower.lowering import nvvm_model
from mxlower.types import probe_values

N = 1 << 19  # elements per launch (probe sets are processed in chunks of N)
BLOCK = 256
DT = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16),
      "bf16": np.dtype(ml_dtypes.bfloat16), **{k: t.dtype for k, t in FLOAT_TYPES.items()}}


# ----------------------------------------------------------------------------- device access


class _Device:
    """The minimum of a CUDA driver: load a module, copy arrays, launch (CuPy or cuda-python)."""

    def __init__(self):
        try:
            import cupy

            cupy.cuda.runtime.getDeviceCount()
            self.cp = cupy
            self.drv = None
            self.cc = int(cupy.cuda.Device().compute_capability)  # "89", "100", ...
            return
        except Exception:  # noqa: BLE001 - fall back to cuda-python
            self.cp = None
        from cuda.bindings import driver as drv  # cuda-python >= 12.6

        self.drv = drv
        self._ok(drv.cuInit(0))
        dev = self._ok(drv.cuDeviceGet(0))
        major = self._ok(drv.cuDeviceGetAttribute(
            drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev))
        minor = self._ok(drv.cuDeviceGetAttribute(
            drv.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
        self.cc = major * 10 + minor
        self.ctx = self._ok(drv.cuDevicePrimaryCtxRetain(dev))
        self._ok(drv.cuCtxSetCurrent(self.ctx))

    @staticmethod
    def _ok(res):
        err, *rest = res if isinstance(res, tuple) else (res,)
        if int(err) != 0:
            raise RuntimeError(f"CUDA driver error {err}")
        return rest[0] if len(rest) == 1 else (rest or None)

    @property
    def chip(self) -> str:
        suffix = "a" if self.cc >= 90 else ""
        name = f"sm_{self.cc}{suffix}"
        return name if name in nvvm_model.CHIPS else f"sm_{self.cc}"

    def run(self, image: bytes, kernel: str, x: np.ndarray, out_dtype: np.dtype) -> np.ndarray:
        n = x.size
        grid = (n // 2 + BLOCK - 1) // BLOCK
        is_cubin = image[:4] == b"\x7fELF"
        if self.cp is not None:
            import tempfile

            cp = self.cp
            with tempfile.NamedTemporaryFile(suffix=".cubin" if is_cubin else ".ptx") as f:
                f.write(image)
                f.flush()
                mod = cp.RawModule(path=f.name)
                fn = mod.get_function(kernel)
            dx = cp.asarray(x.view(np.uint8).reshape(n, -1))
            dy = cp.zeros((n, out_dtype.itemsize), cp.uint8)
            fn((grid,), (BLOCK,), (dx, dy, np.int64(n)))
            return cp.asnumpy(dy).reshape(-1).view(out_dtype)
        drv = self.drv
        mod = self._ok(drv.cuModuleLoadData(image if is_cubin else image + b"\0"))
        fn = self._ok(drv.cuModuleGetFunction(mod, kernel.encode()))
        xs = np.ascontiguousarray(x).view(np.uint8)
        y = np.zeros(n * out_dtype.itemsize, np.uint8)
        dx = self._ok(drv.cuMemAlloc(xs.nbytes))
        dy = self._ok(drv.cuMemAlloc(y.nbytes))
        try:
            self._ok(drv.cuMemcpyHtoD(dx, xs.ctypes.data, xs.nbytes))
            args = [np.array([int(dx)], np.uint64), np.array([int(dy)], np.uint64),
                    np.array([n], np.int64)]
            ptrs = np.array([a.ctypes.data for a in args], np.uint64)
            self._ok(drv.cuLaunchKernel(fn, grid, 1, 1, BLOCK, 1, 1, 0, 0, ptrs.ctypes.data, 0))
            self._ok(drv.cuCtxSynchronize())
            self._ok(drv.cuMemcpyDtoH(y.ctypes.data, dy, y.nbytes))
        finally:
            drv.cuMemFree(dx)
            drv.cuMemFree(dy)
            drv.cuModuleUnload(mod)
        return y.view(out_dtype)


@functools.cache
def device() -> _Device:
    try:
        return _Device()
    except Exception as e:  # noqa: BLE001 - no CuPy/cuda-python, no driver, no device
        pytest.skip(f"no usable CUDA device ({type(e).__name__}: {e})")


# ----------------------------------------------------------------------------- kernels


def _kernel(name: str, src: str, dst: str, extra: str = "") -> str:
    """Thread t converts elements 2t and 2t+1 (a vector<2>) if 2t < n (n even)."""
    op = "arith.extf" if src in FLOAT_TYPES else "arith.truncf"
    vi, vo = f"vector<2x{src}>", f"vector<2x{dst}>"
    return f"""
  gpu.func @{name}(%x: memref<{N}x{src}>, %y: memref<{N}x{dst}>, %n: index) kernel {{
    %c2 = arith.constant 2 : index
    %b = gpu.block_id x
    %d = gpu.block_dim x
    %t = gpu.thread_id x
    %bd = arith.muli %b, %d : index
    %g = arith.addi %bd, %t : index
    %i = arith.muli %g, %c2 : index
    %in = arith.cmpi ult, %i, %n : index
    scf.if %in {{
      %v = vector.load %x[%i] : memref<{N}x{src}>, {vi}
      %c = {op} %v{extra} : {vi} to {vo}
      vector.store %c, %y[%i] : memref<{N}x{dst}>, {vo}
    }}
    gpu.return
  }}"""


TRUNC = [(s, d) for d in FLOAT_TYPES for s in ("f32", "f16", "bf16")]
EXT = [(s, d) for s in FLOAT_TYPES for d in ("f32", "f16", "bf16")]


#: name -> (source type, destination type, rounding and attributes) of every kernel in the
#: module the GPU tests load
KERNELS = {
    **{f"t_{s}_{d}": (s, d, "") for s, d in TRUNC},
    **{f"e_{s}_{d}": (s, d, "") for s, d in EXT},
    **{f"r_{s}_{r}": (s, "f8E8M0FNU", f" {r} {{mxlower.satfinite}}")
       for s in ("f32", "bf16") for r in ("upward", "toward_zero")},
}


@functools.cache
def _ptx(chip: str, hardware: bool) -> str:
    from mxlower.bindings import upstream

    if not upstream.available() or upstream.tool("llc") is None:
        pytest.skip("building kernels needs mxlower's MLIR stacks (jaxlib, the xtc wheels) and "
                    "llc; on a GPU machine without them, carry images (MXLOWER_GPU_IMAGES)")
    from mxlower.bindings import jaxlib as J
    from mxlower.diagnostics import DiagnosticEngine
    from mxlower.pipeline.manager import PassPipeline

    fns = [_kernel(name, *spec) for name, spec in KERNELS.items()]
    text = "gpu.module @mx {" + "".join(fns) + "\n}\n"
    ctx = J.make_context()
    with ctx:
        module = J.ir.Module.parse(text)
    eng = DiagnosticEngine()
    hw = "true" if hardware else "false"
    out = PassPipeline.parse(f"builtin.module(mxlower-gpu-to-nvvm{{chip={chip} hardware={hw}}})",
                             ctx).run(module.operation, eng)
    assert out is not None, [d.format() for d in eng.diagnostics]
    return ptx.compile_ptx(ptx.translate_to_llvmir(ptx.device_module(out.get_asm())), chip)


IMAGES_ENV = "MXLOWER_GPU_IMAGES"


def _image_name(chip: str, hardware: bool) -> str:
    return f"{chip}-{'hw' if hardware else 'sw'}"


def build_image(chip: str, hardware: bool) -> tuple[bytes, str]:
    """(image, extension): a cubin when ptxas is here, else the PTX for the driver to JIT."""
    asm = _ptx(chip, hardware)
    if ptx.ptxas_path() is not None:
        return ptx.assemble(asm, chip), ".cubin"
    return asm.encode(), ".ptx"


def _fingerprint() -> str:
    """mxlower's sources and this file: what carried builds must come from."""
    return source_fingerprint(__file__)


def _manifest() -> str:
    return "\n".join([f"fingerprint {_fingerprint()}", *KERNELS]) + "\n"


def _prebuilt(root: str, chip: str, hardware: bool) -> bytes:
    build = f"python test/python/test_gpu_nvvm.py build {root} {chip}"
    try:
        with open(os.path.join(root, "kernels.txt"), encoding="utf-8") as f:
            listed = f.read()
    except OSError:
        pytest.fail(f"{IMAGES_ENV}={root} holds no kernels.txt; build the images with: {build}")
    if listed != _manifest():
        pytest.fail(f"the images in {root} were built from other sources (mxlower or this "
                    f"test's kernels changed since); rebuild them with: {build}")
    for ext in (".cubin", ".ptx"):
        path = os.path.join(root, _image_name(chip, hardware) + ext)
        if os.path.exists(path):
            with open(path, "rb") as f:
                return f.read()
    pytest.fail(f"{IMAGES_ENV}={root} has no image for {chip}; build it with: {build}")


@functools.cache
def _image(chip: str, hardware: bool) -> bytes:
    root = os.environ.get(IMAGES_ENV)
    if root:
        return _prebuilt(root, chip, hardware)
    return build_image(chip, hardware)[0]


def build_images(root: str, chips: list[str]) -> list[str]:
    """Write every chip's hardware and fallback images and ``kernels.txt`` into ``root``."""
    os.makedirs(root, exist_ok=True)
    written = []
    for chip in chips:
        for hardware in (True, False):
            img, ext = build_image(chip, hardware)
            for old in (".cubin", ".ptx"):  # a stale image of the other kind would win
                stale = os.path.join(root, _image_name(chip, hardware) + old)
                if os.path.exists(stale):
                    os.remove(stale)
            path = os.path.join(root, _image_name(chip, hardware) + ext)
            with open(path, "wb") as f:
                f.write(img)
            written.append(path)
    with open(os.path.join(root, "kernels.txt"), "w", encoding="utf-8") as f:
        f.write(_manifest())
    return written


def _run(kernel: str, x: np.ndarray, dst: str, hardware: bool = True) -> np.ndarray:
    dev = device()
    img = _image(dev.chip, hardware)
    outs = []
    for k in range(0, x.size, N):
        chunk = x[k:k + N]
        pad = np.zeros(N, chunk.dtype)  # the kernels' memrefs are static (bare pointers)
        pad[:chunk.size] = chunk
        outs.append(dev.run(img, kernel, pad, DT[dst])[:chunk.size])
    return np.concatenate(outs)


@functools.cache
def _probes(name: str) -> np.ndarray:
    return probe_values(name)


@pytest.mark.gpu
@pytest.mark.parametrize("hardware", [True, False])
@pytest.mark.parametrize("src,dst", TRUNC)
def test_truncf_on_gpu_is_bit_exact(src, dst, hardware):
    device()
    x = _probes(src)
    got = _run(f"t_{src}_{dst}", x, dst, hardware).view(np.uint8)
    want = R.bits(R.convert(x, dst))
    bad = np.flatnonzero(got != want)
    assert not bad.size, (device().chip, [(hex(int(R.bits(x[i]))), hex(got[i]), hex(want[i]))
                                          for i in bad[:6]])


@pytest.mark.gpu
@pytest.mark.parametrize("hardware", [True, False])
@pytest.mark.parametrize("src,dst", EXT)
def test_extf_on_gpu_is_bit_exact(src, dst, hardware):
    device()
    t = FLOAT_TYPES[src]
    x = np.arange(1 << t.bits, dtype=np.uint8).view(t.dtype)
    got = _run(f"e_{src}_{dst}", x, dst, hardware)
    want = R.convert(x, dst)
    nan = np.isnan(want.astype(np.float64))
    same = np.where(nan, np.isnan(got.astype(np.float64)), R.bits(got) == R.bits(want))
    assert same.all(), device().chip


@pytest.mark.gpu
@pytest.mark.parametrize("src", ["f32", "bf16"])
@pytest.mark.parametrize("rounding,rnd", [("upward", "rp"), ("toward_zero", "rz")])
def test_ue8m0_scale_forms_on_gpu(src, rounding, rnd):
    device()
    x = _probes("f32")
    x = x[~np.signbit(x)].astype(DT[src])
    got = _run(f"r_{src}_{rounding}", x, "f8E8M0FNU").view(np.uint8)
    assert np.array_equal(got, nvvm_model.cvt_ue8m0(x, rnd)), device().chip


# ----------------------------------------------------------------------------- without a GPU

#: the chips of the GPUs a task may be lent (H100/H200: sm_90a) and the two newer families
HARNESS_CHIPS = ("sm_89", "sm_90a", "sm_100a", "sm_120a")

_ENTRY = re.compile(r"\.visible \.entry (\w+)\(\s*([^)]*)\)")


@pytest.mark.parametrize("hardware", [True, False])
@pytest.mark.parametrize("chip", HARNESS_CHIPS)
def test_gpu_kernels_build_with_the_launchers_abi(chip, hardware):
    """Every kernel the GPU tests launch exists for the chip, takes (x*, y*, n) as three
    64-bit parameters (bare-pointer memrefs: what both launchers pass), and assembles."""
    asm = _ptx(chip, hardware)
    entries = {m.group(1): m.group(2) for m in _ENTRY.finditer(asm)}
    assert set(entries) == set(KERNELS)
    for name, params in entries.items():
        kinds = [p.split()[1] for p in params.split(",")]
        assert kinds == [".u64"] * 3, (name, params)
    cvts = re.findall(r"\bcvt\.r[npz](?:\.satfinite)?(?:\.relu)?\.(\w+x2)", asm)
    if hardware and chip != "sm_89" and chip != "sm_90a":
        assert {"e2m1x2", "e4m3x2", "ue8m0x2"} <= set(cvts), chip
    elif hardware:
        assert set(cvts) >= {"e4m3x2", "e5m2x2"} and "e2m1x2" not in cvts, chip
    else:
        assert not cvts, chip
    if ptx.ptxas_path() is not None:
        assert _image(chip, hardware)[:4] == b"\x7fELF"


@pytest.mark.parametrize("cc,chip", [(89, "sm_89"), (90, "sm_90a"), (100, "sm_100a"),
                                     (103, "sm_103a"), (120, "sm_120a"), (121, "sm_121a"),
                                     (80, "sm_80"), (75, "sm_75")])
def test_device_chip_from_compute_capability(cc, chip):
    dev = object.__new__(_Device)
    dev.cc = cc
    assert dev.chip == chip


def test_prebuilt_images_are_what_the_tests_load(tmp_path, monkeypatch):
    """The carried images: built once, found by chip and mode, and refused when missing or
    built from other sources (another mxlower or another kernel list)."""
    build_images(str(tmp_path), ["sm_90a"])
    monkeypatch.setenv(IMAGES_ENV, str(tmp_path))
    assert _prebuilt(str(tmp_path), "sm_90a", True) == build_image("sm_90a", True)[0]
    assert _prebuilt(str(tmp_path), "sm_90a", False) == build_image("sm_90a", False)[0]
    with pytest.raises(pytest.fail.Exception, match="has no image for sm_100a"):
        _prebuilt(str(tmp_path), "sm_100a", True)
    manifest = (tmp_path / "kernels.txt").read_text()
    (tmp_path / "kernels.txt").write_text(manifest.replace("fingerprint ", "fingerprint 0"))
    with pytest.raises(pytest.fail.Exception, match="built from other sources"):
        _prebuilt(str(tmp_path), "sm_90a", True)
    (tmp_path / "kernels.txt").unlink()
    with pytest.raises(pytest.fail.Exception, match="holds no kernels.txt"):
        _prebuilt(str(tmp_path), "sm_90a", True)


def test_the_gpu_side_imports_no_mlir(tmp_path):
    """On a GPU machine without jaxlib or the xtc wheels, this module and what it imports
    load, and find carried images (imports of jax, jaxlib or mlir fail in the child)."""
    build_images(str(tmp_path), ["sm_90a"])
    from mxlower.testing import run_without_mlir  # here, not on the GPU side: it has jaxlib

    code = """
import test_gpu_nvvm as G
img = G._image("sm_90a", True)
x = G._probes("f32")
assert len(img) > 1000 and x.size > 200000
print("ok", sorted(m for m in sys.modules if m.startswith("mxlower")))
"""
    r = run_without_mlir(code, os.path.dirname(os.path.abspath(__file__)),
                         dict(os.environ, **{IMAGES_ENV: str(tmp_path)}))
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stderr[-2000:]


def _main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] != "build":
        sys.stderr.write("usage: python test/python/test_gpu_nvvm.py build DIR CHIP...\n")
        return 2
    for path in build_images(argv[1], argv[2:]):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
