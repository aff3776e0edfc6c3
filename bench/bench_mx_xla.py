"""Throughput of mxlower's MX quantize and dequantize on XLA:CPU.

For every format, at 2^16 .. 2^24 elements (blocks along the last axis of a [n / 1024, 1024]
tensor, the format's default block size, scale mode floor), ``mx.quantize`` (f32 -> elements +
scales) and ``mx.dequantize`` (elements + scales -> f32) are lowered by
``mxlower-mx-to-stablehlo`` and compiled once, in two variants:

* ``native``: the final narrow conversions are XLA:CPU's own ``stablehlo.convert`` (f6, which
  XLA:CPU lacks, goes through ``mxlower-expand-narrow-floats{types=f6...}``);
* ``expanded``: ``mxlower-expand-narrow-floats`` appended for every narrow type (integer ops
  instead of XLA's converts; narrow values cross the boundary as ui8 codes).

Each is timed against baselines measured in the same run, interleaved with it:

* ``copy``: an XLA module that reads and writes the same number of bytes with no arithmetic
  (quantize: f32 in, one byte per element out; dequantize: one byte in, f32 out), run the same
  way.  "% of copy" compares bytes moved per second (quantize moves 4 + 1 + 1/k bytes per
  element, dequantize 1 + 1/k + 4);
* ``memcpy``: ``np.copyto`` between preallocated byte arrays moving as many bytes;
* for mxfp8_e4m3 (scale mode rceil, the closest to it, in both variants) and nvfp4: JAX's
  own quantizer, ``jax._src.cudnn.scaled_matmul_stablehlo.quantize``, jitted for CPU (it
  divides by the scale in f32 and converts with XLA's native converts; it is not exact on
  XLA:CPU's flushed subnormals).

``--baseline-tree DIR`` also lowers every MX module with the mxlower package of ``DIR`` (a
checkout of another revision, e.g. ``git worktree add /tmp/base HEAD~1``; lowered in a child
process) and times those modules interleaved with this tree's, for a before/after table of
a lowering change measured in one run.

``--scale-mode`` sets the quantize modules' scale rule (default floor); the format
``nvfp4+g`` is nvfp4 with a global scale (an f32 argument of quantize and dequantize).
``--dots MxNxK,...`` adds ``mx.scaled_dot`` modules ``[M, K] x [N, K] -> [M, N]`` (f32) of
mxfp8_e4m3 and mxfp4_e2m1 operands, on ordinary data (quantized normal values) and on data
with one scale code 0x00 in the lhs (which a lowering that must keep subnormal products may
treat differently), timed against their baseline-tree lowering when one is given.

Steady state throughout: every XLA run (JAX's included, through ``donate_argnums``) writes
into the previous run's output buffers, and each time is the fastest of ``--reps`` runs after
two warm-up runs.  Results print as Markdown tables for BENCHMARKS.md.

    python bench/bench_mx_xla.py                      # a few minutes on 2 cores
    python bench/bench_mx_xla.py --sizes 16,20 --formats mxfp8_e4m3,nvfp4 --reps 5
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from mxlower import reference as R
from mxlower.benchmarking import Session, round_robin
from mxlower.bindings import jaxlib as J
from mxlower.execution import xla
from mxlower.formats import FORMATS
from mxlower.pipeline.manager import run_pipeline
from mxlower.tools.run import DTYPES, select_function

ROW = 1024
ALIAS = "tf.aliasing_output"
F6 = ("f6E3M2FN", "f6E2M3FN")


#: the global scale of the ``nvfp4+g`` modules
GLOBAL = 0.37


def _fmt(name: str) -> tuple[str, bool]:
    """(format, with a global scale) of a benchmark format name (``nvfp4+g``)."""
    fmt, _, g = name.partition("+")
    return fmt, g == "g"


def _t(shape, elt: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + elt + ">"


def quantize_text(name: str, n: int, mode: str) -> str:
    fmt, with_g = _fmt(name)
    f = FORMATS[fmt]
    x, q = (n // ROW, ROW), (n // ROW, ROW)
    s = (n // ROW, ROW // f.block_size)
    sm = "" if f.is_nvfp4 else f', scale_mode = "{mode}"'
    g_arg, g_op, g_t = (", %g: tensor<f32>", ", %g", ", tensor<f32>") if with_g else ("", "", "")
    return (f"func.func @main(%x: {_t(x, 'f32')}{g_arg}, %oq: {_t(q, f.element)} "
            f"{{{ALIAS} = 0 : i32}}, %os: {_t(s, f.scale)} {{{ALIAS} = 1 : i32}}) -> "
            f"({_t(q, f.element)}, {_t(s, f.scale)}) {{\n"
            f'  %q, %s = "mx.quantize"(%x{g_op}) {{format = "{fmt}", block_size = '
            f"{f.block_size} : i64, axis = 1 : i64{sm}}} : ({_t(x, 'f32')}{g_t}) -> "
            f"({_t(q, f.element)}, {_t(s, f.scale)})\n"
            f"  return %q, %s : {_t(q, f.element)}, {_t(s, f.scale)}\n}}\n")


def dequantize_text(name: str, n: int) -> str:
    fmt, with_g = _fmt(name)
    f = FORMATS[fmt]
    q = (n // ROW, ROW)
    s = (n // ROW, ROW // f.block_size)
    g_arg, g_op, g_t = (", %g: tensor<f32>", ", %g", ", tensor<f32>") if with_g else ("", "", "")
    return (f"func.func @main(%q: {_t(q, f.element)}, %s: {_t(s, f.scale)}{g_arg}, "
            f"%o: {_t(q, 'f32')} {{{ALIAS} = 0 : i32}}) -> {_t(q, 'f32')} {{\n"
            f'  %d = "mx.dequantize"(%q, %s{g_op}) {{format = "{fmt}", block_size = '
            f"{f.block_size} : i64, axis = 1 : i64}} : ({_t(q, f.element)}, {_t(s, f.scale)}"
            f"{g_t}) -> {_t(q, 'f32')}\n"
            f"  return %d : {_t(q, 'f32')}\n}}\n")


def dot_text(fmt: str, m: int, n: int, k: int) -> str:
    """``mx.scaled_dot`` of two ``fmt`` operands, [m, k] x [n, k] -> [m, n] f32."""
    f = FORMATS[fmt]
    a, sa = (m, k), (m, k // f.block_size)
    b, sb = (n, k), (n, k // f.block_size)
    ins = [_t(a, f.element), _t(sa, f.scale), _t(b, f.element), _t(sb, f.scale)]
    out = _t((m, n), "f32")
    return (f"func.func @main(%a: {ins[0]}, %as: {ins[1]}, %b: {ins[2]}, %bs: {ins[3]}, "
            f"%o: {out} {{{ALIAS} = 0 : i32}}) -> {out} {{\n"
            f'  %r = "mx.scaled_dot"(%a, %as, %b, %bs) {{dot_dimension_numbers = '
            f"#stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = "
            f'[1]>, lhs_format = "{fmt}", rhs_format = "{fmt}", lhs_block_size = '
            f"{f.block_size} : i64, rhs_block_size = {f.block_size} : i64}} : "
            f"({', '.join(ins)}) -> {out}\n  return %r : {out}\n}}\n")


def copy_text(kind: str, n: int) -> str:
    shape = (n // ROW, ROW)
    if kind == "quantize":
        return (f"func.func @main(%x: {_t(shape, 'f32')}, %o: {_t(shape, 'ui8')} "
                f"{{{ALIAS} = 0 : i32}}) -> {_t(shape, 'ui8')} {{\n"
                f"  %0 = stablehlo.bitcast_convert %x : ({_t(shape, 'f32')}) -> {_t(shape, 'i32')}\n"
                f"  %1 = stablehlo.convert %0 : ({_t(shape, 'i32')}) -> {_t(shape, 'ui8')}\n"
                f"  return %1 : {_t(shape, 'ui8')}\n}}\n")
    return (f"func.func @main(%x: {_t(shape, 'ui8')}, %o: {_t(shape, 'f32')} "
            f"{{{ALIAS} = 0 : i32}}) -> {_t(shape, 'f32')} {{\n"
            f"  %0 = stablehlo.convert %x : ({_t(shape, 'ui8')}) -> {_t(shape, 'i32')}\n"
            f"  %1 = stablehlo.bitcast_convert %0 : ({_t(shape, 'i32')}) -> {_t(shape, 'f32')}\n"
            f"  return %1 : {_t(shape, 'f32')}\n}}\n")


def lower(text: str, variant: str) -> tuple[str, list[np.dtype]]:
    """The lowered module and the dtypes of its arguments."""
    f6 = [t for t in F6 if t in text]
    passes = ["mxlower-mx-to-stablehlo"]
    if variant == "expanded":
        passes.append("mxlower-expand-narrow-floats")
    elif variant == "native" and f6:
        passes.append("mxlower-expand-narrow-floats{types=" + ",".join(f6) + "}")
    with J.make_context(allow_unregistered=True):
        m = J.ir.Module.parse(text)
        if variant != "copy":
            run_pipeline(m, "builtin.module(" + ",".join(passes) + ")")
        sig = select_function(m.operation, "main")
        return str(m), [DTYPES[e] for _, e in _args(sig)]


def runner(text: str, variant: str, data: list[np.ndarray]):
    """A function running the compiled module once; outputs donated to the next run."""
    lowered, dtypes = lower(text, variant)
    exe = xla.compile(lowered)
    ins = [xla.device_put(_as(a, dt)) for a, dt in zip(data, dtypes)]
    n_out = len(dtypes) - len(data)
    state = [xla.device_put(np.zeros(shape, dt)) for shape, dt in
             zip(_arg_shapes(lowered)[len(data):], dtypes[len(data):])]

    def once():
        outs = exe.execute(ins + state)
        state[:] = outs[:n_out]
        return outs

    return once


def _arg_shapes(text: str) -> list[tuple[int, ...]]:
    with J.make_context(allow_unregistered=True):
        sig = select_function(J.ir.Module.parse(text).operation, "main")
    return [s for s, _ in _args(sig)]


def _args(sig) -> list[tuple[tuple[int, ...], str]]:
    """(shape, element type) of each argument: mxlower.ir.signature's TensorSpecs, or the
    pairs of a checkout from before them (--baseline-tree runs this file there too)."""
    return [(a.shape, a.element) if hasattr(a, "element") else a for a in sig.args]


def _as(a: np.ndarray, dt: np.dtype) -> np.ndarray:
    """``a`` (typed data) as the lowered module's argument dtype (ui8 codes after expansion)."""
    if a.dtype == dt:
        return a
    return a.view(dt)


def jax_quantize_runner(fmt: str, x: np.ndarray):
    import jax
    from mxlower.bindings.jax_private import jax_quantize as quantize  # JAX's own quantizer

    mode = "mxfp8" if fmt == "mxfp8_e4m3" else "nvfp4"
    cfg = jax.nn.get_scaled_dot_general_config(mode)
    f = jax.jit(lambda v, oq, os_: quantize(v, cfg), donate_argnums=(1, 2))
    xd = jax.device_put(x)
    q, s = jax.block_until_ready(quantize(xd, cfg))
    state = [jax.device_put(np.asarray(q)), jax.device_put(np.asarray(s))]

    def once():
        state[:] = jax.block_until_ready(f(xd, *state))

    return once


_LOWER_ELSEWHERE = r"""
import importlib.util, json, os, sys
tree, bench = sys.argv[1], sys.argv[2]
sys.path.insert(0, tree)
import mxlower
if not os.path.realpath(mxlower.__file__).startswith(os.path.realpath(tree) + os.sep):
    sys.exit(f"the child imported mxlower from {mxlower.__file__}, not from {tree}")
spec = importlib.util.spec_from_file_location("bench_mx_xla_base", bench)
B = importlib.util.module_from_spec(spec)
spec.loader.exec_module(B)
jobs = json.load(sys.stdin)
json.dump({k: B.lower(text, variant)[0] for k, (text, variant) in jobs.items()}, sys.stdout)
"""


def lower_elsewhere(tree: str, jobs: dict[str, tuple[str, str]]) -> dict[str, str]:
    """``lower(text, variant)`` of each job by the mxlower package in ``tree``."""
    import json
    import os
    import subprocess

    proc = subprocess.run([sys.executable, "-c", _LOWER_ELSEWHERE, os.path.abspath(tree),
                           os.path.abspath(__file__)], input=json.dumps(jobs),
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        sys.exit(f"bench_mx_xla: lowering with {tree} failed:\n{proc.stderr.strip()}")
    return json.loads(proc.stdout)


def data_for(name: str, n: int, rng) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The quantize module's inputs (x[, g]) and the dequantize module's (q, s[, g])."""
    fmt, with_g = _fmt(name)
    x = (rng.standard_normal((n // ROW, ROW)) * np.exp2(rng.integers(-20, 20, (n // ROW, 1))))
    x = x.astype(np.float32)
    x.reshape(-1)[::4099] = np.nan
    g = [np.array(GLOBAL, np.float32)] if with_g else []
    q, s = R.quantize(x, fmt, axis=1, global_scale=GLOBAL if with_g else None)
    return [x, *g], [q, s, *g]


def spot_check(name: str, variant: str) -> None:
    """The benchmarked modules compute the right thing (the tests do this thoroughly)."""
    n = 1 << 14
    fmt, with_g = _fmt(name)
    qin, din = data_for(name, n, np.random.default_rng(1))
    q, s = din[:2]
    qf = runner(quantize_text(name, n, "floor"), variant, qin)()
    got = [np.asarray(o) for o in qf]
    assert np.array_equal(R.bits(got[0]).ravel() & 0xFF, R.bits(q).ravel()), (name, variant)
    assert np.array_equal(R.bits(got[1]).ravel(), R.bits(s).ravel()), (name, variant)
    (d,) = [np.asarray(o) for o in runner(dequantize_text(name, n), variant, din)()]
    want = R.dequantize(q, s, fmt, axis=1, global_scale=GLOBAL if with_g else None)
    assert np.array_equal(np.isnan(d), np.isnan(want))
    assert np.array_equal(d[~np.isnan(d)], want[~np.isnan(want)]), (fmt, variant)


def bench(formats, sizes, reps, variants, baseline_tree: str | None = None,
          mode: str = "floor") -> list[dict]:
    rng = np.random.default_rng(0)
    rows = []
    for logn in sizes:
        n = 1 << logn
        x32 = rng.standard_normal((n // ROW, ROW)).astype(np.float32)
        x8 = rng.integers(0, 256, (n // ROW, ROW), dtype=np.uint8)
        a, b = np.ones(5 * n // 2, np.uint8), np.zeros(5 * n // 2, np.uint8)
        fns = {("copy", "quantize"): runner(copy_text("quantize", n), "copy", [x32]),
               ("copy", "dequantize"): runner(copy_text("dequantize", n), "copy", [x8]),
               ("memcpy",): lambda a=a, b=b: np.copyto(b, a)}
        base_jobs, base_data = {}, {}
        for fmt in formats:
            qin, din = data_for(fmt, n, rng)
            x = qin[0]
            for v in variants:
                jobs = {"quantize": (quantize_text(fmt, n, mode), qin),
                        "dequantize": (dequantize_text(fmt, n), din)}
                for op, (text, data) in jobs.items():
                    fns[(fmt, v, op)] = runner(text, v, data)
                    base_jobs[f"{fmt}|{v}|{op}"] = (text, v)
                    base_data[f"{fmt}|{v}|{op}"] = data
            if fmt in ("mxfp8_e4m3", "nvfp4"):
                for v in variants:
                    fns[(fmt, "rceil-" + v, "quantize")] = runner(
                        quantize_text(fmt, n, "rceil"), v, [x])
                fns[(fmt, "jax", "quantize")] = jax_quantize_runner(fmt, x)
        if baseline_tree:
            for key, text in lower_elsewhere(baseline_tree, base_jobs).items():
                fmt, v, op = key.split("|")
                fns[(fmt, v + "@base", op)] = runner(text, "copy", base_data[key])
        best = round_robin(fns, reps)
        for fmt in formats:
            k = FORMATS[_fmt(fmt)[0]].block_size
            moved = n * (5 + 1 / k)
            for op in ("quantize", "dequantize"):
                for v in variants:
                    t = best[(fmt, v, op)]
                    row = {"log2n": logn, "format": fmt, "op": op, "variant": v,
                           "ns_per_elem": t / n * 1e9, "gbps": moved / t / 1e9,
                           "vs_copy": best[("copy", op)] / t * (moved / (5 * n)),
                           "vs_memcpy": best[("memcpy",)] / t * (moved / (5 * n)),
                           "vs_jax": None}
                    if (fmt, v + "@base", op) in best:
                        row["base_ns_per_elem"] = best[(fmt, v + "@base", op)] / n * 1e9
                    if op == "quantize" and (fmt, "jax", op) in best:
                        rc = best[(fmt, "rceil-" + v, op)]
                        row["vs_jax"] = best[(fmt, "jax", op)] / rc
                        row["rceil_ns_per_elem"] = rc / n * 1e9
                        row["jax_ns_per_elem"] = best[(fmt, "jax", op)] / n * 1e9
                    rows.append(row)
                    print(f"2^{logn} {fmt} {op} {v}: {row['ns_per_elem']:.2f} ns/elem, "
                          f"{100 * row['vs_copy']:.0f}% of XLA copy, "
                          f"{100 * row['vs_memcpy']:.0f}% of memcpy"
                          + (f", {row['vs_jax']:.2f}x JAX's quantize" if row["vs_jax"] else "")
                          + (f", {row['base_ns_per_elem'] / row['ns_per_elem']:.2f}x the "
                             "baseline tree" if "base_ns_per_elem" in row else ""),
                          file=sys.stderr, flush=True)
    return rows


def dot_data(fmt: str, m: int, n: int, k: int, rng, tiny: bool) -> list[np.ndarray]:
    a, sa = R.quantize(rng.standard_normal((m, k)).astype(np.float32), fmt)
    b, sb = R.quantize(rng.standard_normal((n, k)).astype(np.float32), fmt)
    if tiny:
        sa = sa.copy()
        sa.reshape(-1)[0] = R.from_bits(np.array([0], np.uint8), "f8E8M0FNU")[0]
    return [a, sa, b, sb]


def bench_dots(shapes, reps, variant: str, baseline_tree: str | None) -> list[dict]:
    """Scaled dots of each shape, format and data kind, this tree's lowering interleaved with
    the baseline tree's."""
    rng = np.random.default_rng(2)
    fns, base_jobs, base_data = {}, {}, {}
    for m, n, k in shapes:
        for fmt in ("mxfp8_e4m3", "mxfp4_e2m1"):
            for kind in ("ordinary", "one lhs scale 0x00"):
                data = dot_data(fmt, m, n, k, rng, kind != "ordinary")
                key = f"{m}x{n}x{k}|{fmt}|{kind}"
                fns[(key, "")] = runner(dot_text(fmt, m, n, k), variant, data)
                base_jobs[key] = (dot_text(fmt, m, n, k), variant)
                base_data[key] = data
    if baseline_tree:
        for key, text in lower_elsewhere(baseline_tree, base_jobs).items():
            fns[(key, "@base")] = runner(text, "copy", base_data[key])
    best = round_robin(fns, reps)
    rows = []
    for key in base_jobs:
        shape, fmt, kind = key.split("|")
        m, n, k = (int(v) for v in shape.split("x"))
        t = best[(key, "")]
        row = {"shape": shape, "format": fmt, "data": kind, "variant": variant, "ms": t * 1e3,
               "gflop_s": 2 * m * n * k / t / 1e9}
        if (key, "@base") in best:
            row["base_ms"] = best[(key, "@base")] * 1e3
        rows.append(row)
    return rows


def dot_markdown(rows) -> str:
    base = any("base_ms" in r for r in rows)
    out = ["| [M, K] x [N, K] | format | data | ms | GFLOP/s |"
           + (" baseline tree ms | speed-up |" if base else ""),
           "|---|---|---|---|---|" + ("---|---|" if base else "")]
    for r in rows:
        m, n, k = r["shape"].split("x")
        line = (f"| [{m}, {k}] x [{n}, {k}] | {r['format']} | {r['data']} | {r['ms']:.2f} | "
                f"{r['gflop_s']:.1f} |")
        if "base_ms" in r:
            line += f" {r['base_ms']:.2f} | {r['base_ms'] / r['ms']:.2f}x |"
        out.append(line)
    return "\n".join(out)


def markdown(rows) -> str:
    out = ["| elements | format | op | variant | ns/elem | GB/s moved | % of XLA copy | "
           "% of memcpy |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| 2^{r['log2n']} | {r['format']} | {r['op']} | {r['variant']} | "
                   f"{r['ns_per_elem']:.2f} | {r['gbps']:.2f} | {100 * r['vs_copy']:.0f}% | "
                   f"{100 * r['vs_memcpy']:.0f}% |")
    jax_rows = [r for r in rows if r["vs_jax"]]
    if jax_rows:
        out += ["", "| elements | format | variant | mxlower ns/elem (mxfp8: rceil) | JAX quantize "
                "ns/elem | mxlower speed-up |", "|---|---|---|---|---|---|"]
        for r in jax_rows:
            out.append(f"| 2^{r['log2n']} | {r['format']} | {r['variant']} | "
                       f"{r['rceil_ns_per_elem']:.2f} | {r['jax_ns_per_elem']:.2f} | "
                       f"{r['vs_jax']:.2f}x |")
    base_rows = [r for r in rows if "base_ns_per_elem" in r]
    if base_rows:
        out += ["", "| elements | format | op | variant | baseline tree ns/elem | ns/elem | "
                "speed-up |", "|---|---|---|---|---|---|---|"]
        for r in base_rows:
            out.append(f"| 2^{r['log2n']} | {r['format']} | {r['op']} | {r['variant']} | "
                       f"{r['base_ns_per_elem']:.2f} | {r['ns_per_elem']:.2f} | "
                       f"{r['base_ns_per_elem'] / r['ns_per_elem']:.2f}x |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16,18,20,22,24", help="log2 element counts")
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--variants", default="native,expanded")
    ap.add_argument("--reps", type=int, default=7, help="timed runs of each module")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--baseline-tree", metavar="DIR",
                    help="also time the modules as lowered by the mxlower package in DIR")
    ap.add_argument("--scale-mode", default="floor", choices=("floor", "rceil", "nearest"),
                    help="scale rule of the quantize modules")
    ap.add_argument("--dots", default="", metavar="MxNxK,...",
                    help="also time mx.scaled_dot modules of these shapes")
    a = ap.parse_args(argv)
    formats = [f for f in a.formats.split(",") if f]
    variants = a.variants.split(",")
    sizes = [int(s) for s in a.sizes.split(",") if s]
    shapes = [tuple(int(v) for v in d.split("x")) for d in a.dots.split(",") if d]
    for fmt in formats:
        for v in variants:
            spot_check(fmt, v)
    session = Session()
    rows = bench(formats, sizes, a.reps, variants, a.baseline_tree, a.scale_mode)
    dots = bench_dots(shapes, a.reps, variants[-1], a.baseline_tree) if shapes else []
    table = markdown(rows) if rows else ""
    if dots:
        table += ("\n\n" if table else "") + dot_markdown(dots)
    session.report(table, rows + dots, a.json, f"quantize scale mode {a.scale_mode}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
