"""The machine's peak rate for the instructions the CPU dot kernels are made of, measured
where the kernels run: small JIT-compiled probes (upstream MLIR's ExecutionEngine, as the
kernels are) of independent chains of one instruction -- the f32 FMAs, ``vdpbf16ps``,
``vpdpbusd``, ``vpdpwssd`` -- on every core at once.  ``bench/bench_dot.py`` reports each
GEMM's share of the peak of the instruction it runs on (:func:`gemm_probe`) and XLA's share
of the FMAs'.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from mxlower.bindings import upstream
import mxlower.execution.ffi as ffi
from mxlower.lowering.dot_kernels import AVX512_PATHS, DotSpec

__all__ = ["PROBES", "Probe", "best_peaks", "compiled_probe", "fma_probe", "gemm_probe",
           "path_probes", "peaks", "probe_function"]


@dataclass(frozen=True)
class Probe:
    """One instruction whose peak rate :func:`peaks` measures: ``acc = op(acc, a, b)`` on
    vectors of ``acc_t`` (the accumulator) and ``in_t`` (the operands, read from memory so
    that nothing folds), ``macs`` multiply-adds an instruction, ``per_step`` what each
    instruction adds to every accumulator lane with the probe's operands (all ones)."""

    name: str
    op: str  # "fma" (vector.fma) or an LLVM intrinsic's name
    acc_t: str
    in_t: str
    macs: int
    per_step: int


#: the instructions the dot kernels' GEMMs and streaming tiles are made of (the f32 FMAs of
#: the f32 paths, ``vdpbf16ps`` of the bf16 ones, ``vpdpbusd`` / ``vpdpwssd`` of the exact
#: block sums: :mod:`mxlower.lowering.dot_kernels`), in 512- and 256-bit vectors
PROBES = {p.name: p for p in (
    Probe("f32 FMA zmm", "fma", "vector<16xf32>", "vector<16xf32>", 16, 1),
    Probe("f32 FMA ymm", "fma", "vector<8xf32>", "vector<8xf32>", 8, 1),
    Probe("vdpbf16ps zmm", "llvm.x86.avx512bf16.dpbf16ps.512", "vector<16xf32>",
          "vector<32xbf16>", 32, 2),
    Probe("vpdpbusd zmm", "llvm.x86.avx512.vpdpbusd.512", "vector<16xi32>", "vector<64xi8>",
          64, 4),
    Probe("vpdpwssd zmm", "llvm.x86.avx512.vpdpwssd.512", "vector<16xi32>", "vector<32xi16>",
          32, 2),
    Probe("vpdpbusd ymm", "llvm.x86.avx512.vpdpbusd.256", "vector<8xi32>", "vector<32xi8>",
          32, 4),
    Probe("vpdpwssd ymm", "llvm.x86.avx512.vpdpwssd.256", "vector<8xi32>", "vector<16xi16>",
          16, 2),
)}

#: accumulators a probe keeps in flight: more than any of these instructions' latency times
#: its throughput (a Zen 4: 6 cycles at one a cycle for vdpbf16ps)
PROBE_CHAINS = 12


def _width(path: str) -> str:
    return "zmm" if path in AVX512_PATHS else "ymm"


def fma_probe(path: str) -> str:
    """The probe of the f32 FMAs at a dot-kernel path's vector width."""
    return f"f32 FMA {_width(path)}"


def path_probes(path: str) -> list[str]:
    """The probes of the instructions a dot-kernel path
    (:data:`mxlower.lowering.dot_kernels.PATHS`) runs: the f32 FMAs at its vector width, its
    dot products."""
    if path in AVX512_PATHS:
        return [fma_probe(path), "vdpbf16ps zmm", "vpdpbusd zmm", "vpdpwssd zmm"]
    if path == "vnni":
        return [fma_probe(path), "vpdpbusd ymm", "vpdpwssd ymm"]
    return [fma_probe(path)]


def gemm_probe(spec: DotSpec) -> str | None:
    """The probe of the instruction ``spec``'s GEMM runs on (its packed GEMM's dot products,
    else the f32 FMAs at its path's width); None for AMX tiles, which no probe measures."""
    width = _width(spec.path)
    if spec.amx_dot:
        return None
    if spec.quad_dot:
        return f"vpdpbusd {width}"
    if spec.word_dot and spec.path != "avx2" and not spec.bf16_blocks:
        return f"vpdpwssd {width}"
    if spec.bf16_dot or spec.bf16_blocks:
        return "vdpbf16ps zmm"
    if spec.int_dot:  # avx2's vpmaddubsw / vpmaddwd + adds: no probe
        return None
    return fma_probe(spec.path)


def probe_function(probe: Probe) -> str:
    """``@mxlower_peak_probe(%n: i64, %p: !llvm.ptr)``: :data:`PROBE_CHAINS` accumulators
    starting at the vector at ``p + 128``, each taking ``n`` instructions of ``probe`` with the
    operands at ``p`` and ``p + 64``; their sum stored at ``p + 128``."""
    f = probe.acc_t.split("x")[-1].rstrip(">")
    add = "arith.addf" if f.startswith("f") else "arith.addi"
    lines = ["func.func @mxlower_peak_probe(%n: i64, %p: !llvm.ptr) {",
             f"  %a = llvm.load %p {{alignment = 1 : i64}} : !llvm.ptr -> {probe.in_t}",
             "  %pb = llvm.getelementptr %p[64] : (!llvm.ptr) -> !llvm.ptr, i8",
             f"  %b = llvm.load %pb {{alignment = 1 : i64}} : !llvm.ptr -> {probe.in_t}",
             "  %pc = llvm.getelementptr %p[128] : (!llvm.ptr) -> !llvm.ptr, i8",
             f"  %c = llvm.load %pc {{alignment = 1 : i64}} : !llvm.ptr -> {probe.acc_t}",
             "  %lo = arith.constant 0 : index",
             "  %one = arith.constant 1 : index",
             "  %hi = arith.index_cast %n : i64 to index"]
    accs = [f"%x{j}" for j in range(PROBE_CHAINS)]
    inits = ", ".join(f"{x} = %c" for x in accs)
    types = ", ".join([probe.acc_t] * PROBE_CHAINS)
    lines.append(f"  %r:{PROBE_CHAINS} = scf.for %i = %lo to %hi step %one iter_args({inits}) "
                 f"-> ({types}) {{")
    for j, x in enumerate(accs):
        if probe.op == "fma":
            lines.append(f"    %y{j} = vector.fma %a, %b, {x} : {probe.acc_t}")
        else:
            lines.append(f'    %y{j} = llvm.call_intrinsic "{probe.op}"({x}, %a, %b) : '
                         f"({probe.acc_t}, {probe.in_t}, {probe.in_t}) -> {probe.acc_t}")
    lines.append(f"    scf.yield {', '.join(f'%y{j}' for j in range(PROBE_CHAINS))} : {types}")
    lines.append("  }")
    total = "%r#0"
    for j in range(1, PROBE_CHAINS):
        lines.append(f"  %s{j} = {add} {total}, %r#{j} : {probe.acc_t}")
        total = f"%s{j}"
    lines += [f"  llvm.store {total}, %pc {{alignment = 1 : i64}} : {probe.acc_t}, !llvm.ptr",
              "  return", "}"]
    return "\n".join(lines)


_probes: dict[str, tuple] = {}
_probe_lock = threading.Lock()


def compiled_probe(name: str) -> Callable[[int, int], None]:
    """``fn(n, address)``: :func:`probe_function` of ``PROBES[name]`` JIT-compiled for this CPU
    (once per process) by upstream MLIR's ExecutionEngine, callable from any thread (ctypes
    releases the GIL)."""
    with _probe_lock:
        if name not in _probes:
            ir = upstream.module("ir")
            pm_mod = upstream.module("passmanager")
            ctx = upstream.context()
            with ctx, ir.Location.unknown():
                module = ir.Module.parse(probe_function(PROBES[name]))
                pm_mod.PassManager.parse(ffi.KERNEL_PIPELINE).run(module.operation)
                text = str(module).rstrip()
                module = ir.Module.parse(
                    text[:-1] + "  llvm.func @mxlower_peak_probe_address() -> !llvm.ptr {\n"
                    "    %a = llvm.mlir.addressof @mxlower_peak_probe : !llvm.ptr\n"
                    "    llvm.return %a : !llvm.ptr\n  }\n}")
            engine, address = ffi.jit(ctx, module, "mxlower_peak_probe_address")
            fn = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p)(address)
            _probes[name] = (ctx, module, engine, fn)
        return _probes[name][3]


def peaks(names: list[str], threads: int | None = None, steps: int = 50_000_000,
          reps: int = 7) -> dict[str, dict[str, float]]:
    """Each probe's peak on this machine: ``steps`` instructions of :data:`PROBE_CHAINS`
    independent chains on each of ``threads`` threads at once (default: the CPUs this process
    may run on), each thread timed from a common start; the probes run round-robin, ``reps``
    rounds, and each takes its best round (load from elsewhere only lowers a rate): ``{name:
    {"per_ns": instructions a nanosecond, all threads together, "gflops": 2 x multiply-adds
    a nanosecond, "threads": threads}}``."""
    threads = threads or len(os.sched_getaffinity(0))
    fns = {name: compiled_probe(name) for name in names}
    bufs = [ctypes.create_string_buffer(256) for _ in range(threads)]
    per = max(1, steps // PROBE_CHAINS)
    best = dict.fromkeys(names, 0.0)
    for _ in range(reps):
        for name, fn in fns.items():
            start = threading.Barrier(threads)
            took = [0.0] * threads

            def run(i: int, fn=fn, start=start, took=took) -> None:
                start.wait()
                t0 = time.perf_counter()
                fn(per, ctypes.addressof(bufs[i]))
                took[i] = time.perf_counter() - t0

            workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            rate = sum(per * PROBE_CHAINS / t for t in took) / 1e9
            best[name] = max(best[name], rate)
    return {name: {"per_ns": r, "gflops": 2 * PROBES[name].macs * r, "threads": threads}
            for name, r in best.items()}


def best_peaks(*runs: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """The highest rate of each probe over several :func:`peaks` runs."""
    return {k: max((r[k] for r in runs), key=lambda v: v["per_ns"]) for k in runs[0]}
