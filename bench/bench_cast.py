"""mxlower.jax.cast against the ways a cast is emulated today, in one run.

For each datatype, rounding mode and size (f32 ``[n / 4096, 4096]``, tiles along the last
axis) it times, interleaved (:func:`mxlower.benchmarking.round_robin`, best of ``--reps``):

* ``mxlower.jax.cast``: ``jax.jit``-compiled once, steady state (the input already on the
  device, ``block_until_ready``);
* the **ml_dtypes/NumPy emulation** researchers write today, for the datatypes whose element
  type ml_dtypes has and rounding ``even`` (ml_dtypes rounds to nearest even only): per block,
  ``amax``, the shared exponent ``E = floor(log2(amax)) - emax`` (the OCP ``max`` rule) or
  nvfp4's ``s = e4m3(amax / 6)``, ``x / 2^E`` clipped to the element's range,
  ``astype(<ml_dtypes type>).astype(float32) * 2^E``.  Its bits are compared with the oracle
  (the column "= oracle": it differs where the emulation's shortcuts do, e.g. NaN blocks);
* ``mxlower.reference.cast``, the NumPy oracle (exact, f64 internally);
* ``np.copyto`` of the same bytes into a preallocated array: the memory floor (a cast reads
  and writes exactly as many bytes).

``mxlower.jax.cast`` is also checked bit-exact against the oracle on the benchmark input.
XLA:CPU uses every core; NumPy one.  Prints Markdown tables for BENCHMARKS.md with the
machine, the date and the load average; ``--json FILE`` saves the numbers.

    python bench/bench_cast.py                        # ~2 minutes on 2 loaded cores
    python bench/bench_cast.py --sizes 20 --reps 3 --datatypes mxfp8_e4m3
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import time

import jax
import ml_dtypes
import numpy as np

import mxlower.jax as mxj
from mxlower import reference
from mxlower.benchmarking import Session, round_robin
from mxlower.formats import get_datatype

#: (datatype, rounding modes); the element types ml_dtypes has get the emulation too
CASES = [
    ("mxfp8_e4m3", ("even", "stochastic")),
    ("e3m4:e8m0_t32", ("even", "zero")),
    ("mxfp6_e2m3", ("even",)),
    ("mxfp4_e2m1", ("even", "stochastic")),
    ("nvfp4", ("even",)),
    ("e5m6:e8m0_t32", ("even", "nearest")),
    ("int4:e8m0_t32x32", ("even",)),
    # shared micro-exponents and lookup tables (docs/semantics.md 10.3, 10.7)
    ("mx9", ("even",)),
    ("mx6", ("even",)),
    ("mx4", ("even", "stochastic")),
    ("nf4:float32_t64", ("even",)),
    ("nf4:e8m0_t32", ("even",)),
]

#: element number spec code -> the ml_dtypes type of the same values
_ML = {"e4m3fn": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2,
       "e3m4": ml_dtypes.float8_e3m4, "e4m3": ml_dtypes.float8_e4m3,
       "e2m3fo": ml_dtypes.float6_e2m3fn, "e3m2fo": ml_dtypes.float6_e3m2fn,
       "e2m1fo": ml_dtypes.float4_e2m1fn}


def emulation(name: str):
    """The ml_dtypes/NumPy emulation of a 1D-tiled datatype (or None where there is none)."""
    dt = get_datatype(name)
    n, s = dt.number, dt.scale
    if s is None or s.kind != "tile" or s.dims != (-1,):
        return None
    if s.subtile and n.kind == "int":
        return _micro_exponents(n.bits, s.tile[0], s.subtile[0], s.max_offset)
    if n.is_lut and not s.power_of_two:
        return _lookup_table(np.asarray(n.table, np.float32), s.tile[0])
    if n.code not in _ML:
        return None
    ml, k, top = _ML[n.code], s.tile[0], np.float32(n.max)
    if s.power_of_two:
        emax = n.emax

        def run(x):
            b = x.reshape(-1, k)
            amax = np.abs(b).max(axis=1, keepdims=True)
            e = np.floor(np.log2(np.where(amax > 0, amax, 1))) - emax
            scale = np.exp2(e).astype(np.float32)
            y = np.clip(b / scale, -top, top).astype(ml).astype(np.float32) * scale
            return y.reshape(x.shape)

        return run
    sml = _ML.get(s.number.code)
    if sml is None:
        return None

    def run(x):  # float scale (nvfp4): s = round(amax / max), y = round(x / s) * s
        b = x.reshape(-1, k)
        amax = np.abs(b).max(axis=1, keepdims=True)
        sc = (amax / top).astype(sml).astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            y = np.where(sc > 0, np.clip(b / sc, -top, top), 0)
        return (y.astype(ml).astype(np.float32) * sc).reshape(x.shape)

    return run


def _micro_exponents(K: int, k1: int, k2: int, top_offset: int):
    """Shared micro-exponents as a NumPy emulation writes them: per block of k1 the largest
    element exponent E, per subblock of k2 its own, the offset min(E - E_s, top_offset), and
    sign-magnitude elements of K - 1 bits (fixed point, K - 2 fraction bits) rounded with
    np.rint and clipped."""
    top = np.float32((1 << (K - 1)) - 1)

    def run(x):
        b = x.reshape(-1, k1 // k2, k2)
        sub = np.abs(b).max(axis=2, keepdims=True)
        amax = sub.max(axis=1, keepdims=True)
        e = np.floor(np.log2(np.where(amax > 0, amax, 2.0 ** -127)))
        es = np.floor(np.log2(np.where(sub > 0, sub, 2.0 ** -127)))
        step = np.exp2(e - np.minimum(e - es, top_offset) - (K - 2)).astype(np.float32)
        codes = np.clip(np.rint(b / step), -top, top) + np.float32(0)  # ints have no -0
        return (codes * step).reshape(x.shape)

    return run


def _lookup_table(table: np.ndarray, k: int):
    """QLoRA-style absmax scaling to a lookup table (bitsandbytes' NF4 recipe in NumPy):
    per block of k, s = amax / max|table|, the table value nearest x / s (argmin: ties go to
    the lower one), times s."""
    top = np.float32(np.abs(table).max())

    def run(x):
        b = x.reshape(-1, k)
        s = np.abs(b).max(axis=1, keepdims=True) / top
        with np.errstate(divide="ignore", invalid="ignore"):
            v = np.where(s > 0, b / s, 0)
        idx = np.abs(v[..., None] - table).argmin(axis=-1)
        return (table[idx] * s).reshape(x.shape)

    return run


def same(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    nan = np.isnan(a) & np.isnan(b)
    return bool(np.all((a.view(np.uint32) == b.view(np.uint32)) | nan))


def bench(name: str, roundmode: str, size: int, reps: int, ref_reps: int) -> list[dict]:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((size // 4096, 4096)) * np.exp2(
        rng.integers(-8, 8, (size // 4096, 1)))).astype(np.float32)
    r = rng.integers(0, 1 << 32, size=x.shape, dtype=np.uint32) if roundmode == "stochastic" \
        else None
    xj = jax.device_put(x)
    rj = None if r is None else jax.device_put(r)
    f = jax.jit(lambda x, r: mxj.cast(x, name, roundmode=roundmode, rbits=r))
    t0 = time.perf_counter()
    compiled = f.lower(xj, rj).compile()
    compile_s = time.perf_counter() - t0
    want = reference.cast(x, name, None, roundmode, "max", r)
    exact = same(np.asarray(compiled(xj, rj)), want)
    dst = np.empty_like(x)
    fns = {"mxlower.jax.cast": lambda: jax.block_until_ready(compiled(xj, rj)),
           "np.copyto (memory floor)": lambda: np.copyto(dst, x)}
    if roundmode == "stochastic":  # the bits drawn inside the jit from a key instead
        key = jax.random.key(0)
        keyed = jax.jit(lambda x, k: mxj.cast(x, name, roundmode=roundmode, key=k)).lower(
            xj, key).compile()
        fns[KEYED] = lambda: jax.block_until_ready(keyed(xj, key))
    emu = emulation(name) if roundmode == "even" else None
    if emu is not None:
        fns["ml_dtypes/NumPy emulation"] = lambda: emu(x)
    best = round_robin(fns, reps)
    best["mxlower.reference.cast"] = round_robin(
        {"ref": lambda: reference.cast(x, name, None, roundmode, "max", r)}, ref_reps)["ref"]
    rows = []
    for case, sec in best.items():
        agrees = {"mxlower.jax.cast": exact, "mxlower.reference.cast": True,
                  "ml_dtypes/NumPy emulation": emu is not None and same(emu(x), want)}.get(case)
        rows.append({"datatype": name, "roundmode": roundmode, "size": size, "case": case,
                     "ms": sec * 1e3, "vs_jax": sec / best["mxlower.jax.cast"],
                     "gb_s": 2 * x.nbytes / sec / 1e9, "exact": agrees,
                     "compile_s": compile_s if case == "mxlower.jax.cast" else None})
    return rows


KEYED = "mxlower.jax.cast, key="
_COLUMNS = (KEYED, "ml_dtypes/NumPy emulation", "mxlower.reference.cast",
            "np.copyto (memory floor)")


def table(rows: list[dict]) -> str:
    """One line per datatype, rounding mode and size: mxlower.jax.cast's time (and GB/s in +
    out) and each other case's time with its ratio to it; "=" marks a result bit-exact with
    the oracle, "!=" one that is not."""
    groups: dict[tuple, dict[str, dict]] = {}
    for r in rows:
        groups.setdefault((r["datatype"], r["roundmode"], r["size"]), {})[r["case"]] = r
    out = ["| datatype | round | elements | mxlower.jax.cast ms (GB/s) | with key= (bits drawn "
           "in the jit) | ml_dtypes/NumPy emulation | mxlower.reference.cast | np.copyto |",
           "|---|---|---:|---:|---:|---:|---:|---:|"]
    mark = {True: " =", False: " !=", None: ""}
    for (dt, rm, n), cases in groups.items():
        j = cases["mxlower.jax.cast"]
        cells = [f"{j['ms']:.2f} ({j['gb_s']:.1f}){mark[j['exact']]}"]
        for c in _COLUMNS:
            r = cases.get(c)
            cells.append("-" if r is None else
                         f"{r['ms']:.1f} ({r['vs_jax']:.2f}x){mark[r['exact']]}")
        out.append(f"| {dt} | {rm} | 2^{n.bit_length() - 1} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="mxlower.jax.cast vs ml_dtypes/NumPy emulation, "
                                 "the oracle and a memory copy")
    ap.add_argument("--sizes", default="20,22", help="log2 of the element counts (default 20,22)")
    ap.add_argument("--reps", type=int, default=7, help="runs per case (best is kept)")
    ap.add_argument("--ref-reps", type=int, default=2, help="runs of the (slow) oracle")
    ap.add_argument("--datatypes", default=None,
                    help="comma list restricting the datatypes (default: all of CASES)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    only = None if args.datatypes is None else set(args.datatypes.split(","))
    session = Session()
    rows = []
    for size in (1 << int(s) for s in args.sizes.split(",")):
        for name, modes in CASES:
            if only is not None and name not in only:
                continue
            for rm in modes:
                rows += bench(name, rm, size, args.reps, args.ref_reps)
    compiles = {(r["datatype"], r["roundmode"]): r["compile_s"] for r in rows
                if r["compile_s"] is not None}
    extra = (f"{datetime.date.today()}, jax {jax.__version__}, best of {args.reps} "
             f"(oracle: {args.ref_reps}); compile (trace + mxlower pipeline + XLA) "
             f"{min(compiles.values()):.2f}-{max(compiles.values()):.2f} s per cast")
    session.report(table(rows), rows, None, extra)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "load": os.getloadavg()[0]}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
