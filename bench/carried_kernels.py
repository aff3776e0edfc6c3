"""Run a benchmark script that uses ``mxlower.jax`` with ``impl="auto"`` on a machine without
mxlower's MLIR stacks (a lent GPU machine's 16-core host), its CPU kernels compiled here ahead
of time and carried.

``record`` runs the script here once (short: its kernels, not its timings, are what count)
and notes every kernel it registers -- the fused MX kernels (:func:`mxlower.execution.ffi.
compile_kernel`) and the dot kernels (:func:`mxlower.execution.ffi_dot.compile_dot`) -- then
compiles each for the target CPU (llc's ``-mcpu``, default ``sapphirerapids``) into a shared
library with a manifest.  The choices the dot's plan makes depend on the CPU's vendor and
SIMD path (:func:`mxlower.lowering.dot_call.plan`), so ``record`` makes them as the target
would (``--vendor``; the path forced by ``MXLOWER_DOT_PATH``, which ``run`` sets the same;
``--path amx`` where this CPU has no AMX: its kernels recorded, avx512's run in their place,
the same results)::

    python bench/carried_kernels.py record .carried -- bench/bench_jax.py --sharded 8 --reps 1
    # there (carry .carried):
    python3 bench/carried_kernels.py run .carried -- bench/bench_jax.py --sharded 8 --reps 9

``run`` makes ``mxlower.jax`` take its CPU kernels from the carried libraries (a kernel
``record`` did not see is an error naming it) and runs the script.  Both refuse libraries
built from other sources (:func:`mxlower.benchmarking.source_fingerprint`).
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import os
import runpy
import sys
import time

ENV_PATH = "MXLOWER_DOT_PATH"


def _fingerprint() -> str:
    from mxlower.benchmarking import source_fingerprint

    return source_fingerprint(__file__)


def _script(argv: list[str]) -> None:
    """Runs the script ``argv[0]`` as ``__main__`` with ``argv`` as its arguments."""
    if not argv:
        sys.exit("carried_kernels: no script given (after --)")
    sys.argv = list(argv)
    try:
        runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as ex:  # the script's own exit: a failure ends the run
        if ex.code not in (0, None):
            raise


def record(root: str, vendor: str, path: str, cpu: str, argv: list[str]) -> int:
    from mxlower.bindings import upstream
    from mxlower.execution import ffi, ffi_dot, ptx
    from mxlower.lowering import dot_kernels

    os.environ[ENV_PATH] = path
    dot_kernels.cpu_vendor = lambda: vendor  # the plan as the target's CPU makes it
    here = dot_kernels.usable_paths()
    stand_in = None  # the path that runs here in place of amx (the same results)
    if path not in here:
        if path != "amx" or "avx512" not in here:
            sys.exit(f"carried_kernels: path {path} cannot be recorded here (this CPU runs "
                     f"{', '.join(here)})")
        stand_in = "avx512"
        dot_kernels.usable_paths = lambda: ["amx"] + here
    seen: dict[str, tuple[str, object]] = {}
    compile_kernel, compile_dot = ffi.compile_kernel, ffi_dot.compile_dot

    def kernel(spec, *, target="cpu", opt_level=3):
        if target == "cpu":
            seen[spec.name] = ("ffi", spec)
        return compile_kernel(spec, target=target, opt_level=opt_level)

    def dot(spec):
        seen[spec.name] = ("dot", spec)
        if stand_in and spec.path == path:
            return compile_dot(dataclasses.replace(spec, path=stand_in))
        return compile_dot(spec)

    ffi.compile_kernel, ffi_dot.compile_dot = kernel, dot
    _script(argv)
    ffi.compile_kernel, ffi_dot.compile_dot = compile_kernel, compile_dot
    os.makedirs(root, exist_ok=True)
    target = {"fingerprint": _fingerprint(), "vendor": vendor, "path": path, "cpu": cpu}
    entries = {}
    try:  # a second script recorded into the same directory adds its kernels
        with open(os.path.join(root, "manifest.json"), encoding="utf-8") as f:
            m = json.load(f)
        if {k: m[k] for k in target} == target:
            entries = m["kernels"]
    except (OSError, ValueError, KeyError):
        pass
    llvm = upstream.module("dialects.llvm")
    for name, (kind, spec) in sorted(seen.items()):
        if name in entries:
            continue
        t0 = time.perf_counter()
        _, module = (ffi.lower_module(spec) if kind == "ffi" else ffi_dot.lower_module(spec))
        lib = f"{name}.so"
        ptx.host_shared_object(str(llvm.translate_module_to_llvmir(module.operation)),
                               os.path.join(root, lib), cpu=cpu, opt_level=3, optimize=True,
                               triple="x86_64-unknown-linux-gnu")
        entries[name] = {"kind": kind, "lib": lib}
        print(f"{lib}: {time.perf_counter() - t0:.1f} s", flush=True)
    with open(os.path.join(root, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump({**target, "kernels": entries}, f, indent=1)
    print(f"{len(entries)} kernels for {cpu} ({vendor}, path {path}) in {root}")
    return 0


def run(root: str, argv: list[str]) -> int:
    with open(os.path.join(root, "manifest.json"), encoding="utf-8") as f:
        m = json.load(f)
    if m["fingerprint"] != _fingerprint():
        sys.exit(f"carried_kernels: the libraries in {root} were built from other sources; "
                 "record them again")
    os.environ[ENV_PATH] = m["path"]
    from mxlower.execution import ffi, ffi_dot
    import mxlower.jax.kernels as jax_kernels

    libs: dict[str, ffi.CompiledKernel] = {}

    def load(spec) -> ffi.CompiledKernel:
        if spec.name not in libs:
            e = m["kernels"].get(spec.name)
            if e is None:
                raise ffi.FFIError(f"carried_kernels: kernel {spec.name} was not recorded "
                                   f"(record the script again)")
            lib = ctypes.CDLL(os.path.join(root, e["lib"]))
            address = ctypes.cast(getattr(lib, f"{spec.name}_ffi"), ctypes.c_void_p).value
            libs[spec.name] = ffi.CompiledKernel(spec, lib, address, 0.0, 0.0)
        return libs[spec.name]

    def kernel(spec, *, target="cpu", opt_level=3):
        if target != "cpu":
            raise ffi.FFIError(f"carried_kernels: only CPU kernels are carried, not {target}")
        return load(spec)

    ffi.compile_kernel, ffi_dot.compile_dot = kernel, load
    jax_kernels._AVAILABLE["cpu"] = lambda: True  # (the JIT's test: upstream MLIR installed)
    print(f"carried_kernels: {len(m['kernels'])} kernels for {m['cpu']} (path {m['path']})",
          flush=True)
    _script(argv)
    print(f"carried_kernels: {len(libs)} kernels loaded", flush=True)
    return 0


def main() -> int:
    argv = sys.argv[1:]
    script = argv[argv.index("--") + 1:] if "--" in argv else []
    ours = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="run the script here, build its kernels for the target")
    r.add_argument("root")
    r.add_argument("--vendor", default="GenuineIntel", help="the target CPU's vendor_id")
    r.add_argument("--path", default="amx", help="the dot kernels' SIMD path")
    r.add_argument("--cpu", default="sapphirerapids", help="llc's -mcpu")
    u = sub.add_parser("run", help="run the script on the carried kernels")
    u.add_argument("root")
    a = ap.parse_args(ours)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script[0])) if script else ".")
    if a.cmd == "record":
        return record(a.root, a.vendor, a.path, a.cpu, script)
    return run(a.root, script)


if __name__ == "__main__":
    raise SystemExit(main())
