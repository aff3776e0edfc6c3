"""llama.cpp's ggml as a peer of mxlower's scaled dot on the CPU: f32 activations x MXFP4 (and
NVFP4) weights, GEMV and GEMM, against ``mxlower.jax.scaled_dot`` and XLA's f32 dot of the
dequantized weights; prints Markdown for BENCHMARKS.md.

ggml is not a Python package here: ``llama-cpp-python`` (an optional peer, never a
dependency) ships only as a source distribution that vendors llama.cpp, and its Python API
runs whole GGUF models, not one matmul.  So ``build`` fetches that source distribution with
pip (or takes ``--sdist``), builds ggml's CPU backend alone with CMake (``-DGGML_NATIVE=ON``:
the host's SIMD), and compiles ``bench/ggml_matmul.c`` against it: a graph of one
``ggml_mul_mat`` on a ggml thread pool, timed over repeats.  ``run`` times, for each case:

* ``ggml``: the harness (the weights quantized by ``ggml_quantize_chunk``; **approximate**:
  ggml converts the activations to its vec-dot type first -- Q8_0, 8-bit, for MXFP4 -- so
  its products are not the f32 ones the contract asks for; the error column says how far);
* ``mxlower``: ``scaled_dot(x, w)`` under jit (``impl="auto"``: the fused dot kernel for the
  GEMVs, the dequantize kernels + XLA's dot for a GEMM with a plain side), within
  docs/semantics.md section 6 (1e-6 of ``sum |x||w|``);
* ``XLA f32``: ``x @ w.T`` with the weights already dequantized to f32; ``ggml f32``: ggml's
  own f32 matmul of those (its baseline).

The harness runs as a subprocess between the in-process timings (ggml's threads and XLA's do
not run at once); each number is the fastest of its repeats, taken two ways: ``hot``
(back-to-back repeats: the weights may stay in the last-level cache, 32 MB on the EPYC
this was written on) and ``cold`` (64 MB written between repeats, untimed, so the weights
come from memory, as in an inference step that reads every layer once).  ``err`` = the largest
``|y - exact| / sum_k |x_k w_k|`` over the outputs (exact: the f64 product of x and the
dequantized weights).

    python bench/bench_dot_ggml.py build .ggml          # once: pip download + cmake (~2 min)
    python bench/bench_dot_ggml.py run .ggml            # GEMV M=1,8 (N=K=4096), GEMM 1024^3
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
#: the peer's version (a source distribution vendoring llama.cpp with GGML_TYPE_MXFP4/NVFP4)
SDIST = "llama-cpp-python==0.3.36"
#: mxlower format -> the harness's weight type
TYPES = {"mxfp4_e2m1": "mxfp4", "nvfp4": "nvfp4"}


def _sh(argv: list[str], **kw) -> None:
    print("+ " + " ".join(argv), flush=True)
    subprocess.run(argv, check=True, **kw)


def build(root: str, sdist: str | None) -> str:
    """ggml's CPU backend and the harness under ``root``; the harness's path."""
    root = os.path.abspath(root)
    exe = os.path.join(root, "ggml_matmul")
    os.makedirs(root, exist_ok=True)
    if sdist is None:
        found = glob.glob(os.path.join(root, "llama_cpp_python-*.tar.gz"))
        if not found:
            _sh([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                 SDIST, "-d", root])
            found = glob.glob(os.path.join(root, "llama_cpp_python-*.tar.gz"))
        sdist = found[0]
    src = os.path.join(root, "src")
    if not os.path.isdir(src):
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            with tarfile.open(sdist) as tf:
                tf.extractall(tmp, filter="data")
            (top,) = os.listdir(tmp)
            shutil.move(os.path.join(tmp, top, "vendor", "llama.cpp", "ggml"), src)
    pc = os.path.join(src, "ggml.pc.in")
    if not os.path.exists(pc):  # the source distribution leaves out this template
        with open(pc, "w", encoding="utf-8") as f:
            f.write("Name: ggml\nDescription: ggml\nVersion: 0\n")
    bdir = os.path.join(root, "build")
    gen = ["-G", "Ninja"] if shutil.which("ninja") else []
    _sh(["cmake", "-S", src, "-B", bdir, *gen, "-DCMAKE_BUILD_TYPE=Release",
         "-DGGML_NATIVE=ON", "-DBUILD_SHARED_LIBS=ON", "-DGGML_BUILD_TESTS=OFF",
         "-DGGML_BUILD_EXAMPLES=OFF", "-DGGML_OPENMP=OFF"], stdout=subprocess.DEVNULL)
    _sh(["cmake", "--build", bdir, "-j", str(os.cpu_count() or 2)], stdout=subprocess.DEVNULL)
    lib = os.path.join(bdir, "src")
    cc = os.environ.get("CC") or shutil.which("cc") or "gcc"
    _sh([cc, "-O2", "-o", exe, os.path.join(HERE, "ggml_matmul.c"),
         "-I", os.path.join(src, "include"), "-L", lib, "-lggml", "-lggml-base", "-lggml-cpu",
         f"-Wl,-rpath,{lib}"])
    return exe


#: MB written between "cold" repeats (more than the last-level cache)
FLUSH_MB = 64


def _ggml(exe: str, typ: str, w: np.ndarray, x: np.ndarray, reps: int,
          cold: bool) -> tuple[float, np.ndarray]:
    M, K = x.shape
    N = w.shape[0]
    env = dict(os.environ, FLUSH_MB=str(FLUSH_MB if cold else 0))
    with tempfile.TemporaryDirectory() as d:
        paths = [os.path.join(d, n) for n in ("w.f32", "x.f32", "y.f32")]
        w.astype(np.float32).tofile(paths[0])
        x.astype(np.float32).tofile(paths[1])
        out = subprocess.run([exe, typ, str(M), str(N), str(K), str(os.cpu_count() or 1),
                              str(reps), *paths], check=True, capture_output=True, text=True,
                             env=env)
        return float(out.stdout.split()[-1]), np.fromfile(paths[2], np.float32).reshape(M, N)


def _err(y, x, wd) -> float:
    exact = x.astype(np.float64) @ wd.astype(np.float64).T
    mag = np.abs(x.astype(np.float64)) @ np.abs(wd.astype(np.float64)).T
    return float(np.max(np.abs(np.asarray(y, np.float64) - exact) / np.maximum(mag, 1e-300)))


def run(root: str, reps: int, gemv: list[int], nk: int, gemm: list[int]) -> None:
    import jax
    import jax.numpy as jnp

    import mxlower.jax as mxj
    from mxlower.benchmarking import round_robin

    exe = os.path.join(os.path.abspath(root), "ggml_matmul")
    if not os.path.exists(exe):
        sys.exit(f"no harness in {root}: run  python bench/bench_dot_ggml.py build {root}")
    print(f"threads: {os.cpu_count()}; load average at start: {os.getloadavg()}\n")
    print("| M x N x K | weights | cache | ggml ms | ggml f32 ms | mxlower ms | XLA f32 ms | "
          "ggml / mxlower | ggml err | mxlower err |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    rng = np.random.default_rng(0)
    junk = np.zeros(FLUSH_MB << 18, np.float32)  # FLUSH_MB of f32, written before cold runs
    cases = [(m, nk, nk) for m in gemv] + [(n, n, n) for n in gemm]
    for M, N, K in cases:
        w = rng.standard_normal((N, K)).astype(np.float32)
        x = rng.standard_normal((M, K)).astype(np.float32)
        for fmt, typ in TYPES.items():
            q = mxj.quantize(w, fmt, impl="xla")
            wd = np.asarray(mxj.dequantize(q))
            xj, wdj = jnp.asarray(x), jnp.asarray(wd)
            sd = jax.jit(lambda u, v: mxj.scaled_dot(u, v))
            xla = jax.jit(lambda u, v: u @ v.T)
            ours = lambda: jax.block_until_ready(sd(xj, q))  # noqa: B023, E731
            theirs = lambda: jax.block_until_ready(xla(xj, wdj))  # noqa: B023, E731
            for cold in (False, True):
                g1, yg = _ggml(exe, typ, w, x, reps, cold)
                # each alone, so that "hot" repeats are back to back
                flush = (lambda: junk.fill(1.0)) if cold else None
                tm, tx = (round_robin({"f": f}, n, flush)["f"] * 1e3
                          for f, n in ((ours, reps), (theirs, max(3, reps // 2))))
                g2, _ = _ggml(exe, typ, w, x, reps, cold)
                gf, _ = _ggml(exe, "f32", wd, x, max(3, reps // 2), cold)
                tg = min(g1, g2)
                print(f"| {M}x{N}x{K} | {fmt} | {'cold' if cold else 'hot'} | {tg:.3f} | "
                      f"{gf:.3f} | {tm:.3f} | {tx:.3f} | {tg / tm:.2f}x | "
                      f"{_err(yg, x, wd):.1e} | {_err(sd(xj, q), x, wd):.1e} |", flush=True)
    print(f"\nload average at end: {os.getloadavg()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="fetch llama-cpp-python's source, build ggml + the harness")
    b.add_argument("root")
    b.add_argument("--sdist", help="a llama_cpp_python-*.tar.gz already downloaded")
    r = sub.add_parser("run", help="time the cases")
    r.add_argument("root")
    r.add_argument("--reps", type=int, default=10)
    r.add_argument("--gemv", default="1,8", help="M of the GEMVs ('' for none)")
    r.add_argument("--nk", type=int, default=4096)
    r.add_argument("--gemm", default="1024", help="n of the n^3 GEMMs ('' for none)")
    a = ap.parse_args()
    if a.cmd == "build":
        print(build(a.root, a.sdist))
        return
    ints = [int(v) for v in a.gemv.split(",") if v]
    run(a.root, a.reps, ints, a.nk, [int(v) for v in a.gemm.split(",") if v])


if __name__ == "__main__":
    main()
