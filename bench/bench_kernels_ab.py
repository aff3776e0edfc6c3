"""The fused CPU kernels of two source trees, timed in one run: this checkout against a git
revision (``--before``, default ``HEAD``), for refactors that must not slow a kernel down.

The revision's tree is exported (``git archive``) to a temporary directory; a child process
importing *that* ``mxlower`` lowers each kernel to the LLVM dialect with its handler
(:func:`mxlower.execution.ffi.lower_module`) and prints the module texts.  This process
JIT-compiles them (:func:`mxlower.execution.ffi.jit`) next to the same kernels built from the
checkout, registers both as XLA FFI targets (the revision's under ``<name>_before``) and, per
kernel, times the two ``jax.ffi.ffi_call``s interleaved (:func:`mxlower.benchmarking.round_robin`,
best of ``--reps``) on the same input, after checking that they give the same bits.  A kernel
whose lowered text is byte-identical in both trees is marked so (its two timings then measure
only noise).

The kernels: quantize and dequantize of every MX format (f32, block 32 or the format's),
conversions f32 <-> every narrow type, and casts (unscaled and tiled, every rounding mode of
a few datatypes; the MX formats' datatypes with roundmode even, every format at its default
block size and a few other blocks and scale modes, which take the MX kernels' math).
``--only SUBSTRING`` keeps the kernels whose name contains it.

    python bench/bench_kernels_ab.py --before HEAD~1 --size 22
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

from mxlower.benchmarking import Session, round_robin

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: (kind, arguments) of the kernels timed; built into specs in both trees alike
KERNELS = (
    [("quantize", f) for f in ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3",
                               "mxfp4_e2m1", "mxint8", "nvfp4")]
    + [("dequantize", f) for f in ("mxfp8_e4m3", "mxfp6_e2m3", "mxfp4_e2m1", "mxint8",
                                   "nvfp4")]
    + [("convert", ("f32", t)) for t in ("f8E4M3FN", "f8E5M2", "f6E3M2FN", "f4E2M1FN",
                                         "f8E8M0FNU")]
    + [("convert", (t, "f32")) for t in ("f8E4M3FN", "f6E2M3FN", "f4E2M1FN", "f8E8M0FNU")]
    + [("cast", (n, s, r)) for n, s in (("e4m3fn", None), ("e2m1", "e8m0_t32"),
                                        ("e2m1fo", "e4m3fn_t16"), ("e4m3fn", "e8m7_t32"),
                                        ("e5m6", "e8m0_t32"), ("int8", "e8m0_t32"))
       for r in ("even", "nearest")]
    + [("cast", (n, s, "even", m)) for n, s, m in (
        ("e4m3fn", "e8m0_t32", "max"), ("e5m2", "e8m0_t32", "max"), ("e3m2fo", "e8m0_t32", "max"),
        ("e2m3fo", "e8m0_t32", "max"), ("e2m1fo", "e8m0_t32", "max"),
        ("e4m3fn", "e8m0_t32", "rceil"), ("e2m1fo", "e8m0_t32", "nearest"),
        ("int8", "e8m0_t32", "rceil"), ("int8", "e8m0_t8", "max"), ("e4m3fn", "e8m0_t128", "max"),
        ("e2m1fo", "e8m0_t16", "max"), ("e2m1fo", "e4m3fn_t32", "max"))]
)

#: the child's program: lower every kernel of KERNELS (as JSON on stdin) with the mxlower it
#: imports, print {name: LLVM-dialect text}
_CHILD = r"""
import json, sys
from mxlower.execution import ffi
from mxlower.lowering.mx_kernels import CastSpec, ConvertSpec, KernelSpec
def spec(kind, a):
    if kind in ("quantize", "dequantize"):
        return KernelSpec(kind, a)
    if kind == "convert":
        return ConvertSpec(*a)
    return CastSpec(a[0], a[1], "f32", *a[2:])
out = {}
for kind, a in json.load(sys.stdin):
    s = spec(kind, a)
    ctx, module = ffi.lower_module(s)
    out[s.name] = str(module)
json.dump(out, sys.stdout)
"""


def lowered(tree: pathlib.Path | None, kernels: list) -> dict[str, str]:
    """{kernel name: lowered module text} from the mxlower in ``tree`` (None: this one)."""
    return lowered_by(_CHILD, tree, kernels)


def lowered_by(child: str, tree: pathlib.Path | None, kernels: list) -> dict[str, str]:
    """What the program ``child`` prints (JSON) given ``kernels`` (JSON on its stdin), run
    with the mxlower in ``tree`` (None: this one)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree) + os.pathsep + env.get("PYTHONPATH", "")
    res = subprocess.run([sys.executable, "-c", child], input=json.dumps(kernels),
                         capture_output=True, text=True, env=env, check=False,
                         cwd=tree or ROOT)
    if res.returncode:
        raise SystemExit(f"lowering the kernels failed ({tree or 'this checkout'}):\n"
                         f"{res.stderr[-4000:]}")
    return json.loads(res.stdout)


def register_lowered(text: str, name: str, target: str, *, engine: bool = False) -> tuple:
    """Compiles the lowered module ``text`` of kernel ``name`` (as every kernel is: through
    the kernel cache where it is on; ``engine``: by upstream MLIR's ExecutionEngine, the cache
    off) and registers its handler as the XLA FFI target ``target`` for the CPU; what must
    stay alive while it runs."""
    import jax

    from mxlower.bindings import upstream
    from mxlower.execution import ffi

    ir = upstream.module("ir")
    ctx = upstream.context()
    with ctx:
        module = ir.Module.parse(text)
    compiled, address = ffi.jit(ctx, module, f"{name}_ffi_address", cache=not engine)
    handler = ffi.ctypes.CFUNCTYPE(ffi.ctypes.c_void_p, ffi.ctypes.c_void_p)(address)
    jax.ffi.register_ffi_target(target, jax.ffi.pycapsule(handler), platform="cpu",
                                api_version=1)
    return ctx, module, compiled, handler


def export(rev: str, into: pathlib.Path) -> None:
    git = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "mxlower"],
                         capture_output=True, check=False)
    if git.returncode:
        raise SystemExit(f"git archive {rev} failed: {git.stderr.decode()[-2000:]}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=git.stdout, check=True)


def inputs(kind: str, a, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """The operands of one kernel: f32 values of every magnitude for quantize, convert from
    f32 and cast; the quantized / converted codes of those for dequantize / convert to f32."""
    import jax.numpy as jnp

    import mxlower.jax as mxj

    x = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 20, n))).astype(np.float32)
    x = x.reshape(-1, 4096)
    if kind == "dequantize":
        q = mxj.quantize(jnp.asarray(x), a, impl="auto")
        return [q.elements, q.scales]
    if kind == "convert" and a[1] == "f32":
        from mxlower.execution import ffi

        return [ffi.convert(jnp.asarray(x), a[0])]
    return [jnp.asarray(x)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="HEAD", help="the git revision to compare against")
    ap.add_argument("--size", type=int, default=22, help="log2 of the values per kernel call")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--only", default="", help="keep kernels whose name contains this")
    ap.add_argument("--json", help="also save the numbers here")
    a = ap.parse_args(argv)

    import jax
    import jax.numpy as jnp

    from mxlower.execution import ffi

    kernels = [(k, x) for k, x in KERNELS]
    with tempfile.TemporaryDirectory() as tmp:
        export(a.before, pathlib.Path(tmp))
        old = lowered(pathlib.Path(tmp), kernels)
    new = lowered(None, kernels)
    names = list(new)
    keep = [i for i, nm in enumerate(names) if a.only in nm]

    # the revision's kernels: JIT-compiled here, registered as <name>_before, reached through
    # the JAX entry points' platform= (a registrar for the platform "before")
    engines = {}

    def register_before(spec) -> str:
        target = spec.name + "_before"
        if target not in engines:
            engines[target] = register_lowered(old[spec.name], spec.name, target)
        return target

    ffi.add_platform("before", register_before)

    def call(kind, args, ops, platform):
        if kind == "quantize":
            return ffi.quantize(ops[0], args, platform=platform)
        if kind == "dequantize":
            return ffi.dequantize(ops[0], ops[1], args, platform=platform)
        if kind == "convert" and args[0] == "f32":
            return ffi.convert(ops[0], args[1], platform=platform)
        if kind == "convert":
            f6 = ops[0].dtype == np.uint8
            return ffi.convert(ops[0], jnp.float32, source=args[0] if f6 else None,
                               platform=platform)
        return ffi.cast(ops[0], args[0], args[1], roundmode=args[2],
                        scalemode=args[3] if len(args) > 3 else "max", platform=platform)

    rng = np.random.default_rng(0)
    session = Session()
    rows = []
    for i in keep:
        kind, args = kernels[i]
        ops = inputs(kind, args, 1 << a.size, rng)
        fns = {p: jax.jit(lambda *o, p=p: call(kind, args, o, p)) for p in ("before", "cpu")}
        outs = {p: jax.tree_util.tree_leaves(f(*ops)) for p, f in fns.items()}
        same_bits = all(np.array_equal(np.asarray(u).view(np.uint8), np.asarray(v).view(np.uint8))
                        for u, v in zip(outs["before"], outs["cpu"]))
        if not same_bits:
            raise SystemExit(f"{names[i]}: the two trees' kernels give different bits")
        t = round_robin({p: (lambda f=f: jax.block_until_ready(f(*ops)))
                         for p, f in fns.items()}, a.reps)
        rows.append({"kernel": names[i], "identical_text": old[names[i]] == new[names[i]],
                     "before_ms": t["before"] * 1e3, "after_ms": t["cpu"] * 1e3,
                     "after_over_before": t["cpu"] / t["before"]})
        print(f"{names[i]}: {t['before'] * 1e3:.3f} -> {t['cpu'] * 1e3:.3f} ms", file=sys.stderr)

    print(session.header(f"fused CPU kernels: {a.before} against this checkout, "
                         f"2^{a.size} f32 values per call, best of {a.reps}"))
    print("| kernel | lowered text | before (ms) | after (ms) | after / before |")
    print("|---|---|---:|---:|---:|")
    for r in rows:
        print(f"| `{r['kernel']}` | {'identical' if r['identical_text'] else 'changed'} | "
              f"{r['before_ms']:.3f} | {r['after_ms']:.3f} | {r['after_over_before']:.2f} |")
    changed = [r["after_over_before"] for r in rows if not r["identical_text"]]
    same = [r["after_over_before"] for r in rows if r["identical_text"]]
    for label, v in (("changed kernels", changed), ("identical kernels (noise)", same)):
        if v:
            print(f"\n{label}: after / before geometric mean "
                  f"{float(np.exp(np.mean(np.log(v)))):.3f}, range {min(v):.2f}-{max(v):.2f}")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
