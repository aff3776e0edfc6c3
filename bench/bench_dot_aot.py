"""mxlower's fused block-scaled dot kernel compiled ahead of time for another x86-64 CPU, run
there without mxlower's MLIR stacks: correctness against the reference, then GEMV and GEMM
timings against memory copies and XLA's f32 dot, in one run.

A lent GPU machine's host (16 cores of a Xeon with AVX-512, AVX512-VNNI/BF16 and AMX) has
JAX but neither upstream MLIR nor the xtc tools, so the kernels are built here (``build``:
``mxlower.execution.ffi_dot.shared_object`` per kernel and target CPU, a manifest beside
them) and carried; ``run`` loads each library with ctypes, registers its handler with
``jax.ffi`` and calls it as ``ffi_dot.dot`` does (the same handler: its own range test,
XLA's thread pool).  Each kernel is built for several targets (llc's ``-mcpu`` / ``-mattr``)
so one run compares the instruction sets on the same machine:

* ``avx2``: ``x86-64-v3`` -- what the JIT emits on an AVX2 host;
* ``spr``: ``sapphirerapids`` with LLVM's default tuning (256-bit vectors preferred);
* ``spr512``: ``sapphirerapids`` with ``-prefer-256-bit`` off: the kernels' 32-lane f32
  vectors in zmm registers.

The GEMM kernels are built for the ``avx2`` path on every target, and on the targets that
have VNNI and AVX512-BF16 for the ``vnni`` path (the integer GEMM on ``vpdpbusd`` /
``vpdpwssd`` in 256-bit vectors), the ``avx512`` path (those and the bf16 GEMM on
``vdpbf16ps``, in 512-bit vectors), where they differ from avx2's, and the ``amx`` path
(every pair's GEMM on AMX-BF16 tiles; ``run`` asks Linux for the tile state first);
``gemmtile`` builds the avx512 path's with other tile heights (:data:`GEMM_TILES`); ``kn``
and ``knmx`` weights held K-major (``[K, N]``, :data:`K_MAJOR`): the K-major kernel against
plain rows, the handler's transposed copy against MX rows; ``chunks`` the avx512 path's
GEMVs of 4 to 16 rows split in other chunks (:data:`STREAM_CHUNKS`), ``gemmchunks`` the
packed GEMMs' (:data:`GEMM_CHUNKS`).

::

    python bench/bench_dot_aot.py build .dot-aot                  # here (the xtc tools)
    python bench/bench_dot_aot.py run .dot-aot --out results.json # there (JAX, NumPy)
    python bench/bench_dot_aot.py build .dot-aot --what gemm --targets avx2,spr  # a subset

``run`` checks every kernel against the exact dot (docs/semantics.md section 6's bound:
``1e-6 * sum |a b|``) on ragged shapes and on scales at both ends of the range (the kernel's
f64 contraction) before timing it, and refuses libraries built from other sources.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Iterator

import numpy as np

TARGETS = {"avx2": ("x86-64-v3", None), "spr": ("sapphirerapids", None),
           "spr512": ("sapphirerapids", "-prefer-256-bit")}
#: the targets with VNNI and AVX512-BF16 (the vnni and avx512 paths build for these only)
VNNI_TARGETS = ("spr", "spr512")
#: the kernels' SIMD paths, per kind of kernel (vnni changes only the integer GEMM, avx512
#: adds the bf16 GEMM)
PATHS_OF = {"gemv": ("avx2", "avx512"), "tile": ("avx2",),
            "gemm": ("avx2", "vnni", "avx512", "amx"), "gemmtile": ("avx512",),
            "amxsteps": ("amx",), "kn": ("avx2", "avx512"),
            "knmx": ("avx2", "vnni", "avx512", "amx"), "chunks": ("avx512",),
            "gemmchunks": ("avx512", "amx")}
#: (lhs, rhs, what): the GEMV's kernels (plain f32 or bf16 activations, MX weights) and the GEMM's
KERNELS = [(x, f, "gemv") for x in ("f32", "bf16")
           for f in ("mxfp4_e2m1", "mxfp6_e2m3", "mxfp8_e4m3", "nvfp4", "mxint8")]
KERNELS += [(f, f, "gemm") for f in ("mxfp4_e2m1", "nvfp4", "mxfp6_e2m3", "mxfp6_e3m2",
                                    "mxint8", "mxfp8_e4m3")]
#: weights held K-major ([K, N], blocked along K): read as stored against plain rows ("kn":
#: the K-major kernel), transposed by the handler against MX rows ("knmx"); a mixed pair
KERNELS += [(x, f, "kn") for x in ("f32", "bf16") for f in ("mxfp4_e2m1", "mxfp8_e4m3", "nvfp4")]
KERNELS += [(f, f, "knmx") for f in ("mxfp4_e2m1", "mxint8", "mxfp8_e4m3")]
KERNELS += [("mxfp8_e4m3", "mxfp4_e2m1", "gemm")]
#: the kinds whose weights are K-major
K_MAJOR = ("kn", "knmx")
#: the kinds timed as GEMMs
GEMMS = ("gemm", "gemmtile", "amxsteps", "knmx", "gemmchunks")
#: tile shapes of the streaming path's row tiles (M from 5 to 16) to compare at M = 8:
#: (MR_STREAM, NR_STREAM_TILE["avx2"]) of mxlower.lowering.dot_kernels, the first the default
TILES = [(8, 1), (8, 2), (4, 2), (4, 4), (6, 2)]
TILE_FORMATS = ("mxfp4_e2m1", "mxfp8_e4m3", "mxint8")
#: rows of the avx512 path's packed GEMM tiles (dot_kernels.MR_INT["avx512"]) to compare
#: ("gemmtile": 512-bit vectors with 32 registers), besides the default
GEMM_TILES = (6, 8, 12)
#: (ffi_dot.STREAM_CHUNK_PANELS, ffi_dot.STREAM_THREAD_CHUNKS) -- the fewest units per chunk
#: and the most chunks per thread of a call whose streaming tiles take 3 or more plain rows --
#: to compare ("chunks", M = 4 to 16), the first the defaults
STREAM_CHUNKS = ((8, 4), (8, 1), (1, 1))
CHUNK_KERNELS = (("f32", "mxfp4_e2m1"), ("bf16", "mxfp4_e2m1"), ("bf16", "nvfp4"),
                 ("bf16", "mxfp8_e4m3"), ("bf16", "mxint8"))
#: chunks per thread of a packed GEMM's call (ffi_dot.GEMM_THREAD_CHUNKS, the first the
#: default) to compare ("gemmchunks")
GEMM_CHUNKS = (1, 2, 4)
#: K steps between the amx path's loads and stores of its result tiles
#: (dot_kernels.AMX_STEPS) to compare ("amxsteps"), besides the default
AMX_STEPS = (2, 8, 16)


#: kind -> its libraries' name suffix, from the variant's values (the other kinds: the
#: streaming tile's, where given)
SUFFIXES = {"gemmtile": "mr{}", "amxsteps": "steps{}", "chunks": "chunk{}x{}",
            "gemmchunks": "gchunk{}"}


def _knobs(what: str) -> list[tuple[object, str]]:
    """The build-time constants (holder, name) a kind's variants set, in the order of its
    values: a module's attribute or a dictionary's key."""
    from mxlower.execution import ffi_dot
    from mxlower.lowering import dot_kernels

    return {"gemmtile": [(dot_kernels.MR_INT, "avx512")],
            "amxsteps": [(dot_kernels, "AMX_STEPS")],
            "chunks": [(ffi_dot, "STREAM_CHUNK_PANELS"), (ffi_dot, "STREAM_THREAD_CHUNKS")],
            "gemmchunks": [(ffi_dot, "GEMM_THREAD_CHUNKS")]}.get(
                what, [(dot_kernels, "MR_STREAM"), (dot_kernels.NR_STREAM_TILE, "avx2")])


@contextlib.contextmanager
def _setting(knobs: list[tuple[object, str]], values: tuple) -> Iterator[None]:
    """``knobs`` set to ``values`` while the block runs, then restored."""
    def put(holder: object, name: str, v: object) -> None:
        if isinstance(holder, dict):
            holder[name] = v
        else:
            setattr(holder, name, v)

    old = [h[n] if isinstance(h, dict) else getattr(h, n) for h, n in knobs]
    for (h, n), v in zip(knobs, values):
        put(h, n, v)
    try:
        yield
    finally:
        for (h, n), v in zip(knobs, old):
            put(h, n, v)


def _fingerprint() -> str:
    """mxlower's sources and this file: what the carried libraries must come from."""
    from mxlower.benchmarking import source_fingerprint

    return source_fingerprint(__file__)


def build(root: str, whats: set[str] | None = None) -> None:
    from mxlower.execution import ffi_dot
    from mxlower.lowering.dot_kernels import DotSpec

    from mxlower.lowering import dot_kernels

    os.makedirs(root, exist_ok=True)
    entries = []
    jobs = [(lhs, rhs, what, None) for lhs, rhs, what in KERNELS]
    jobs += [("f32", f, "tile", tile) for f in TILE_FORMATS for tile in TILES[1:]]
    jobs += [(f, f, "gemmtile", (mr,)) for f in TILE_FORMATS for mr in GEMM_TILES]
    jobs += [(f, f, "amxsteps", (st,)) for f in TILE_FORMATS for st in AMX_STEPS]
    jobs += [(x, f, "chunks", c) for x, f in CHUNK_KERNELS for c in STREAM_CHUNKS]
    jobs += [(f, f, "gemmchunks", (c,)) for f in TILE_FORMATS for c in GEMM_CHUNKS]
    jobs = [j for j in jobs if whats is None or j[2] in whats]
    default = (dot_kernels.MR_STREAM, dot_kernels.NR_STREAM_TILE["avx2"])
    builds = [(DotSpec(lhs, rhs, path=path, rhs_kn=what in K_MAJOR), what, tile, target)
              for lhs, rhs, what, tile in jobs for path in PATHS_OF[what]
              for target in TARGETS if path == "avx2" or target in VNNI_TARGETS]
    for spec, what, tile, target in builds:
        if (spec.path == "vnni" and not spec.int_dot  # the same kernel as avx2's
                or spec.path in ("avx512", "amx") and what in GEMMS
                and not spec.packed_gemm):
            continue
        cpu, features = TARGETS[target]
        suffix = f"__{target}" + ("__" + SUFFIXES.get(what, "mr{}nr{}").format(*tile)
                                  if tile else "")
        lib = f"{spec.name}{suffix}.so"
        t0 = time.perf_counter()
        with _setting(_knobs(what), tile or default):
            ffi_dot.shared_object(spec, os.path.join(root, lib), cpu=cpu, features=features)
        print(f"{lib}: {time.perf_counter() - t0:.1f} s", flush=True)
        entries.append({"lhs": spec.lhs, "rhs": spec.rhs, "what": what, "name": spec.name,
                        "path": spec.path, "target": target, "lib": lib, "suffix": suffix,
                        "tile": list(tile or default)})
    with open(os.path.join(root, "manifest.json"), "w", encoding="utf-8") as f:
        json.dump({"fingerprint": _fingerprint(), "kernels": entries}, f, indent=1)


# ============================================================================ on the target


def _load(root: str) -> list[dict]:
    import ctypes

    import jax

    with open(os.path.join(root, "manifest.json"), encoding="utf-8") as f:
        m = json.load(f)
    if m["fingerprint"] != _fingerprint():
        sys.exit(f"the libraries in {root} were built from other sources; rebuild with: "
                 f"python bench/bench_dot_aot.py build {root}")
    kernels = [e for e in m["kernels"] if e["target"] in TARGETS]
    for e in kernels:
        lib = ctypes.CDLL(os.path.join(root, e["lib"]))
        fn = getattr(lib, f"{e['name']}_ffi")
        e["target_name"] = e["name"] + e["suffix"]
        e["_lib"] = lib  # kept alive
        jax.ffi.register_ffi_target(e["target_name"], jax.ffi.pycapsule(fn), platform="cpu")
    return kernels


def _side(rng, fmt: str, rows: int, K: int, codes=None):
    """(operands for the call, f32 values [rows, K]) of random data: plain f32, or MX
    quantized by mxlower.reference (elements as XLA holds them, f6 as uint8 codes), its scale
    codes optionally drawn from ``codes``."""
    from mxlower import reference as R
    from mxlower.formats import FLOAT_TYPES, FORMATS

    x = (rng.standard_normal((rows, K)) * np.exp2(rng.integers(-3, 4, (rows, K)))).astype(
        np.float32)
    if fmt in ("f32", "bf16"):
        import ml_dtypes

        v = x.astype(ml_dtypes.bfloat16) if fmt == "bf16" else x
        return [v], v.astype(np.float32)
    e, s = R.quantize(x, fmt)
    if codes is not None:
        s = rng.choice(np.asarray(list(codes), np.uint8), s.shape).view(s.dtype)
    v = R.dequantize(e, s, fmt)
    t = FLOAT_TYPES.get(FORMATS[fmt].element)
    if t is not None and t.bits == 6:  # XLA:CPU has no f6 type: the codes, one per byte
        e = e.view(np.uint8)
    return [e, s], v


def _call(name: str, a: list, b: list, M: int, N: int, kn: bool = False):
    """The jitted call of kernel ``name`` and its operands; ``kn``: B's arrays (given [N,
    ...]) passed K-major."""
    import jax

    if kn:
        b = [np.ascontiguousarray(o.T) for o in b]
    ops = [jax.device_put(o[None]) for o in a + b]  # [1, rows, K]: one batch, on the device
    # once (a NumPy argument would be copied, and f4 packed, on every call)
    f = jax.jit(lambda *o: jax.ffi.ffi_call(name, jax.ShapeDtypeStruct((1, M, N), np.float32))(*o))
    return f, ops


def _check(got, va, vb, what: str) -> str | None:
    ref = va.astype(np.float64) @ vb.astype(np.float64).T
    mag = np.abs(va.astype(np.float64)) @ np.abs(vb.astype(np.float64)).T
    got = np.asarray(got, np.float64)[0]
    want = ref.astype(np.float32).astype(np.float64)
    err = np.abs(got - want)
    bad = ~(err <= 1e-6 * mag)
    bad &= np.isfinite(want)  # an overflow: the same Inf
    bad |= ~np.isfinite(want) & (got != want)
    if bad.any():
        return f"{what}: {int(bad.sum())} of {bad.size} results off the bound"
    return None


def correctness(kernels: list[dict]) -> list[str]:
    rng = np.random.default_rng(0)
    errors = []
    for e in kernels:
        shapes = ((1, 37, 64), (3, 70, 96), (13, 33, 128), (20, 35, 64), (41, 70, 160))
        kn = e["what"] in K_MAJOR
        if e["what"] in GEMMS:  # blocks of rows; K not a whole
            # AMX tile
            shapes += ((1100, 33, 96),) + (((35, 40, 48),) if e["lhs"] == "nvfp4" else ())
        for M, N, K in shapes if e["what"] != "tile" else ((8, 37, 96), (13, 70, 64)):
            N += N % 2 if kn else 0  # K-major f4 weights: whole bytes along N
            # ordinary scales (the f32 paths); the smallest and the largest codes on B (the
            # kernel's f64 contraction: subnormal products; sums that might overflow)
            for codes in (None, range(0, 5), range(236, 241)):
                a, va = _side(rng, e["lhs"], M, K)
                b, vb = _side(rng, e["rhs"], N, K, codes if e["rhs"] != "nvfp4" else None)
                f, ops = _call(e["target_name"], a, b, M, N, kn)
                what = f"{e['target_name']} {M}x{N}x{K} {codes}"
                try:
                    err = _check(f(*ops), va, vb, what)
                except Exception as ex:  # noqa: BLE001 -- a handler's error: recorded
                    err = f"{what}: {type(ex).__name__}: {str(ex)[:200]}"
                if err:
                    errors.append(err)
    return errors


def _best(fn, reps: int) -> float:
    """The fastest of ``reps`` runs of ``fn`` (waited for), in seconds."""
    import jax

    from mxlower.benchmarking import round_robin

    return round_robin({"f": lambda: jax.block_until_ready(fn())}, reps)["f"]


def timings(kernels: list[dict], reps: int) -> list[dict]:
    import jax
    import jax.numpy as jnp

    rng = np.random.default_rng(1)
    rows = []
    NK = 4096
    cache: dict = {}
    for e in kernels:
        kn = e["what"] in K_MAJOR
        if e["what"] in ("gemv", "tile", "kn", "chunks"):
            key = e["rhs"]
            if key not in cache:
                w, vw = _side(rng, e["rhs"], NK, NK)
                # as XLA holds them: f4 two codes per byte, f6 one
                packed = sum(o.nbytes // (2 if o.dtype.itemsize == 1 and "float4" in o.dtype.name
                                           else 1) for o in w)
                buf = np.zeros(packed, np.uint8)
                dst = np.empty_like(buf)
                wf, wt = jnp.asarray(vw), jnp.asarray(np.ascontiguousarray(vw.T))
                xla_copy = jax.jit(lambda u: u ^ np.uint8(1))
                ub = jnp.asarray(buf)
                cache[key] = (w, packed, {
                    "memcpy 1 thread": _best(lambda: np.copyto(dst, buf), reps),
                    "XLA read+write of the packed bytes": _best(lambda: xla_copy(ub), reps),
                }, wf, wt)
            w, packed, base, wf, wt = cache[key]
            for M in ((1, 8) if e["what"] in ("gemv", "kn") else
                      (4, 8, 16) if e["what"] == "chunks" else (8,)):
                x = rng.standard_normal((M, NK)).astype(np.float32)
                if e["lhs"] == "bf16":
                    import ml_dtypes

                    x = x.astype(ml_dtypes.bfloat16)
                f, ops = _call(e["target_name"], [x], w, M, NK, kn)
                x = x.astype(np.float32)
                xj = jnp.asarray(x)
                xla = jax.jit(lambda u, v: jnp.dot(u, v.T, precision="highest"))
                xla_kn = jax.jit(lambda u, v: jnp.dot(u, v, precision="highest"))
                t = _best(lambda: f(*ops), reps)
                rows.append({"case": "gemv kn" if kn else e["what"] if e["what"] == "chunks"
                             else "gemv", "M": M, "weights": e["rhs"],
                             "target": e["target"], "x": e["lhs"], "path": e.get("path", "avx2"),
                             "tile": e["tile"],
                             "kernel_ms": t * 1e3, "packed_MB": packed / 1e6,
                             "GBps": packed / t / 1e9,
                             **{f"{k} ms": v * 1e3 for k, v in base.items()},
                             "XLA f32 GEMV [N,K] ms": _best(lambda: xla(xj, wf), reps) * 1e3,
                             "XLA f32 GEMV [K,N] ms": _best(lambda: xla_kn(xj, wt), reps) * 1e3})
                print(json.dumps(rows[-1]), flush=True)
        else:
            for n in (1024, 2048) + ((4096,) if e["path"] in ("avx512", "amx") else ()):
                if (e["lhs"], e["rhs"], n) not in cache:
                    cache[(e["lhs"], e["rhs"], n)] = (_side(rng, e["lhs"], n, n),
                                                      _side(rng, e["rhs"], n, n))
                (a, va), (b, vb) = cache[(e["lhs"], e["rhs"], n)]
                f, ops = _call(e["target_name"], a, b, n, n, kn)
                ja, jb = jnp.asarray(va), jnp.asarray(vb)
                xla = jax.jit(lambda u, v: jnp.dot(u, v.T, precision="highest"))
                t = _best(lambda: f(*ops), max(3, reps // 4))
                tx = _best(lambda: xla(ja, jb), max(3, reps // 4))
                rows.append({"case": e["what"], "n": n, "format": e["lhs"], "rhs": e["rhs"],
                             "target": e["target"], "path": e.get("path", "avx2"),
                             "tile": e["tile"],
                             "kernel_ms": t * 1e3, "GFLOPs": 2 * n ** 3 / t / 1e9,
                             "XLA f32 dot ms": tx * 1e3, "XLA GFLOPs": 2 * n ** 3 / tx / 1e9})
                print(json.dumps(rows[-1]), flush=True)
    return rows


def run(root: str, out: str | None, reps: int, whats: set[str] | None = None) -> int:
    import jax

    from mxlower.lowering.dot_kernels import request_amx

    kernels = [e for e in _load(root) if whats is None or e["what"] in whats]
    info = {"jax": jax.__version__, "devices": str(jax.devices("cpu")),
            "cpu_count": os.cpu_count(), "amx_granted": request_amx()}
    if not info["amx_granted"]:  # a tile instruction would kill the process
        kernels = [e for e in kernels if e["path"] != "amx"]
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            info["cpu"] = next(line.split(":", 1)[1].strip() for line in f
                               if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(json.dumps(info), flush=True)
    t0 = time.perf_counter()
    errors = correctness(kernels)
    print(f"correctness: {len(kernels)} kernels, {len(errors)} errors "
          f"({time.perf_counter() - t0:.1f} s)", flush=True)
    for err in errors[:20]:
        print("  " + err, flush=True)
    rows = timings(kernels, reps)
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"info": info, "errors": errors, "rows": rows}, f, indent=1)
    return 1 if errors else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the libraries (needs the xtc tools)")
    b.add_argument("root")
    r = sub.add_parser("run", help="check and time the carried libraries (needs JAX)")
    r.add_argument("root")
    r.add_argument("--out")
    r.add_argument("--reps", type=int, default=20)
    for p in (b, r):
        p.add_argument("--targets", default="", help="comma-separated subset of the targets")
        p.add_argument("--what", default="", help="comma-separated subset of the kinds (PATHS_OF)")
    a = ap.parse_args()
    if a.targets:
        global TARGETS
        TARGETS = {k: v for k, v in TARGETS.items() if k in a.targets.split(",")}
    whats = set(a.what.split(",")) if a.what else None
    if a.cmd == "build":
        build(a.root, whats)
        return 0
    return run(a.root, a.out, a.reps, whats)


if __name__ == "__main__":
    raise SystemExit(main())
