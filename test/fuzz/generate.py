"""Generative fuzzing (issue 22): inputs built from the grammar rather than mutated from the
corpus -- random number and scale specs in ``mx`` op attributes, random pipelines over every
registered pass, random command lines of the four tools, and random Python API arguments checked
against the NumPy reference.

Every generator takes a ``random.Random`` and is deterministic for a seed.  Values are drawn
from the edges on purpose: huge and negative numbers, 0, empty and near-limit strings, NaN and
infinities, zero-size shapes.  The tool cases go through :class:`harness.Fuzzer` (the same
oracle as the mutants); the API cases are judged in-process by :func:`api_verdict`.

    python test/fuzz/generate.py --seconds 60 --seed 3 --out /tmp/gen     # standalone
"""

from __future__ import annotations

import argparse
import itertools
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import harness as H
import ml_dtypes

# --------------------------------------------------------------------------- numbers in text

_EDGE_INTS = (0, 1, -1, 2, 3, 7, 8, 16, 23, 24, 32, 33, 127, 128, 255, 256, 1023, 1024, 1025,
              2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64, 10**20)


def edge_int(rng: random.Random) -> int:
    """An integer from the edges: small, around powers of two, or huge (up to 40 digits)."""
    r = rng.random()
    if r < 0.6:
        return rng.choice(_EDGE_INTS) * rng.choice((1, 1, 1, -1))
    if r < 0.85:
        return rng.randint(-300, 300)
    return int("9" * rng.randint(10, 40)) * rng.choice((1, -1))


# --------------------------------------------------------------------------- specs

_SUFFIXES = ("", "", "fn", "fnuz", "fo", "ieee", "fnu", "xx")
_NAMES = ("e4m3fn", "e5m2", "e8m0", "e2m1fo", "e3m2fo", "e2m3fo", "int8", "int4", "uint4",
          "uint8", "bfloat16", "float32", "float16", "f8E4M3FN", "float8_e4m3fnuz",
          "torch.float8_e5m2", "e4m3b8fnuz", "e5m6", "e1m0fn", "e1m6fn")


def number_spec(rng: random.Random) -> str:
    """A number spec: a known name, the eXmY[bZ][suffix] / [u]intK grammar with edge values, or
    a near miss (empty, spaces, prefixes, a very long text)."""
    r = rng.random()
    if r < 0.25:
        return rng.choice(_NAMES)
    if r < 0.65:  # mostly in range, a quarter of the parameters from the edges
        x = rng.randint(1, 8) if rng.random() < 0.75 else edge_int(rng)
        y = rng.randint(0, 7) if rng.random() < 0.75 else edge_int(rng)
        bias = ""
        if rng.random() < 0.3:
            bias = f"b{rng.randint(-20, 40) if rng.random() < 0.6 else edge_int(rng)}"
        return f"e{abs(x)}m{abs(y)}{bias}{rng.choice(_SUFFIXES)}"
    if r < 0.85:
        return f"{rng.choice(('int', 'uint'))}{abs(edge_int(rng))}"
    return rng.choice(("", " ", "e", "em", "e4m", "int", "torch.", "float8_", "e4m3b",
                       "e4m3b-", "e4m3b" + "9" * rng.randint(50, 5000),
                       "x" * rng.randint(90, 200), "e4m3\x00", "é4m3", "e4m3 fn"))


def scale_spec(rng: random.Random) -> str | None:
    """A scale spec (or None: unscaled): number[_zero point][_tile] with edge tile sizes and
    dimensions."""
    if rng.random() < 0.15:
        return None
    head = rng.choice(("e8m0", "e8m0", "float32", "bfloat16", "e4m3fn", "float32_uint8",
                       "float32_int8", "e5m3", number_spec(rng)))
    r = rng.random()
    if r < 0.2:
        return head
    a = rng.choice((0, 2, 4, 16, 32, 64, 1024, 2048, 48, abs(edge_int(rng))))
    tile = f"_t{a}"
    if rng.random() < 0.3:
        tile += f"x{rng.choice((2, 4, 32, abs(edge_int(rng))))}"
    for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
        tile += f"d{rng.choice((0, 1, -1, -2, 2, edge_int(rng)))}"
    return head + tile


# --------------------------------------------------------------------------- mx op modules

_SHAPES = ((4, 64), (64,), (2, 3, 32), (0, 32), (32, 0), (1, 1), (8, 96))


def _tensor(shape: tuple[int, ...], elt: str) -> str:
    return f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}{elt}>"


def mx_module(rng: random.Random) -> str:
    """A function with one random ``mx.cast`` / ``mx.sparse`` / ``mx.quantize`` (datatype form)
    whose attributes are drawn from the spec generators and the integer edges."""
    shape = rng.choice(_SHAPES)
    elt = rng.choice(("f32", "f32", "f32", "bf16", "f16", "f16", "f64", "i32"))
    t = _tensor(shape, elt)
    kind = rng.choice(("cast", "cast", "cast", "sparse", "quantize"))
    if kind == "sparse":
        n, m = rng.choice((4, 2, 8, abs(edge_int(rng)))), rng.choice((2, 1, 0, edge_int(rng)))
        dim = f", dim = {rng.choice((0, -1, 1, edge_int(rng)))} : i64" if rng.random() < 0.5 \
            else ""
        body = (f'%y = "mx.sparse"(%x) {{n = {n} : i64, m = {m} : i64{dim}}} : ({t}) -> {t}\n'
                f"  return %y : {t}")
        return f"func.func @main(%x: {t}) -> {t} {{\n  {body}\n}}\n"
    attrs = [f'number = "{_esc(number_spec(rng))}"']
    sc = scale_spec(rng)
    if sc is not None:
        attrs.append(f'scale = "{_esc(sc)}"')
    stochastic = rng.random() < 0.25
    if rng.random() < 0.7:
        mode = "stochastic" if stochastic else rng.choice(("even", "zero", "away", "bogus"))
        attrs.append(f'roundmode = "{mode}"')
    if rng.random() < 0.5:
        attrs.append(f'scalemode = "{rng.choice(("max", "midmax", "floor", "nearest", ""))}"')
    args, types = [f"%x: {t}"], [t]
    operands = "%x"
    if stochastic and rng.random() < 0.9:
        rt = _tensor(shape if rng.random() < 0.9 else (3,), rng.choice(("ui32", "ui32", "i32")))
        args.append(f"%r: {rt}")
        types.append(rt)
        operands += ", %r"
    if kind == "quantize":
        body = (f'%q, %s = "mx.quantize"({operands}) {{{", ".join(attrs)}}} : '
                f"({', '.join(types)}) -> ({t}, {t})\n  return %q : {t}")
    else:
        body = (f'%y = "mx.cast"({operands}) {{{", ".join(attrs)}}} : '
                f"({', '.join(types)}) -> {t}\n  return %y : {t}")
    return f"func.func @main({', '.join(args)}) -> {t} {{\n  {body}\n}}\n"


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace('"', '\\"').replace("\x00", "\\00")


def spec_cases(rng: random.Random, count: int, run_timeout: float | None) -> Iterator[H.Case]:
    """Modules with random specs and attributes through the verifier, the decomposition and
    (a fifth of them) mxlower-run on the interpreter."""
    rt = ("--timeout", f"{run_timeout:g}") if run_timeout else ()
    for i in range(count):
        text = mx_module(rng)
        invs = [H.Invocation("opt", (H.INPUT, "--mxlower-verify-mx")),
                H.Invocation("opt", (H.INPUT, "--mxlower-mx-to-stablehlo"))]
        if rng.random() < 0.2:
            invs.append(H.Invocation("run", (H.INPUT, "-p", "builtin.module(mxlower-mx-to-"
                                             "stablehlo)", "--backend=interpreter",
                                             "--no-print", *rt)))
        yield H.Case(f"gen-spec-{i}", text, invs, {"generator": "spec"})


# --------------------------------------------------------------------------- pipelines

def pipeline(rng: random.Random, names: list[str]) -> str:
    """A pipeline over the registered passes: random nesting, options (the pass's own, unknown
    ones, edge values) and occasionally broken brackets."""
    def element(depth: int) -> str:
        if depth < 3 and rng.random() < 0.2:
            anchor = rng.choice(("func.func", "builtin.module", "any", "gpu.module", "bogus.op"))
            return f"{anchor}({','.join(element(depth + 1) for _ in range(rng.randint(1, 2)))})"
        name = rng.choice(names + ["canonicalize", "cse", "symbol-dce", "inline", "no-such-pass"])
        if rng.random() < 0.3:
            key = rng.choice(("scale-mode", "compute-type", "types", "chip", "via-f32",
                              "vector-width", "out-params", "bogus"))
            value = rng.choice(("", "1", "0", "true", "floor", "f32", "sm_100a", "f8E4M3FN",
                                str(edge_int(rng)), "inf", "{", "a,b"))
            name += f"{{{key}={value}}}"
        return name
    body = ",".join(element(0) for _ in range(rng.randint(1, 4)))
    text = f"builtin.module({body})"
    if rng.random() < 0.15:
        i = rng.randrange(len(text) + 1)
        text = text[:i] + rng.choice(("(", ")", "{", "}", ",", "\"", "=")) + text[i:]
    return text


_MODULES = (
    "func.func @main(%a: tensor<4x32xf32>) -> tensor<4x32xf32> {\n"
    "  %0 = stablehlo.add %a, %a : tensor<4x32xf32>\n  return %0 : tensor<4x32xf32>\n}\n",
    "func.func @main(%x: tensor<2x32xf32>) -> (tensor<2x32xf8E4M3FN>, tensor<2x1xf8E8M0FNU>) {\n"
    '  %q, %s = "mx.quantize"(%x) {format = "mxfp8_e4m3", block_size = 32 : i64, axis = 1 : '
    'i64} : (tensor<2x32xf32>) -> (tensor<2x32xf8E4M3FN>, tensor<2x1xf8E8M0FNU>)\n'
    "  return %q, %s : tensor<2x32xf8E4M3FN>, tensor<2x1xf8E8M0FNU>\n}\n",
    "func.func @main(%a: tensor<4xui8>, %b: tensor<4xui8>) -> tensor<4xui8> {\n"
    "  %0 = stablehlo.divide %a, %b : tensor<4xui8>\n  return %0 : tensor<4xui8>\n}\n",
    "func.func @main(%a: tensor<4xf32>) -> tensor<4xf8E4M3FN> {\n"
    "  %0 = stablehlo.convert %a : (tensor<4xf32>) -> tensor<4xf8E4M3FN>\n"
    "  return %0 : tensor<4xf8E4M3FN>\n}\n",
)


def pipeline_cases(rng: random.Random, count: int, names: list[str]) -> Iterator[H.Case]:
    """Fixed small modules through random pipelines of every registered pass."""
    for i in range(count):
        text = rng.choice(_MODULES)
        invs = [H.Invocation("opt", (H.INPUT, "-p", pipeline(rng, names)))
                for _ in range(3)]
        yield H.Case(f"gen-pipeline-{i}", text, invs, {"generator": "pipeline"})


# --------------------------------------------------------------------------- command lines

_FLAGS = {
    "opt": ("--split-input-file", "--verify-diagnostics", "--allow-unregistered-dialect",
            "--mlir-print-debuginfo", "--print-ir-after-all", "--list-passes", "--version",
            "--mxlower-verify-mx", "--mxlower-mx-to-stablehlo", "-p", "--pass-pipeline",
            "-o", "--bogus", "-", "--mxlower-stablehlo-to-llvm"),
    "run": ("-f", "--function", "-i", "-p", "--pipeline", "--seed", "--backend", "--timeout",
            "--rtol", "--atol", "--print-bits", "--no-print", "--print-ir", "--compare", "-o",
            "--bogus"),
    "translate": ("--emit", "--chip", "-p", "--no-pipeline", "--no-hardware", "--gpu-module",
                  "--ptx-version", "--opt-level", "-o", "--bogus"),
    "cast": ("-d", "--datatype", "-n", "--number", "--scale", "-r", "--roundmode", "-s",
             "--scalemode", "--seed", "--json", "--plot", "--key", "--list-datatypes",
             "--bogus"),
}
_VALUES = ("", "0", "-1", "1e300", "inf", "nan", "-inf", "1", "main", "nope", "llvm", "xla",
           "interpreter", "sm_100a", "sm_1", "ptx", "mlir", "llvmir", "mxfp8_e4m3",
           "e4m3b99999999999999999", "int4", "e8m0_t32", "stochastic", "max",
           "builtin.module(mxlower-verify-mx)", "builtin.module(", "99999999999999999999",
           "{input}", "{input}.out.npz", "{input}.out.svg", "{input}.out.mlir", "{input}.nope",
           "-", "--", "=", "x" * 300)


def command_line(rng: random.Random, tool: str) -> tuple[str, ...]:
    """A random argument vector of ``tool``: its flags with edge values, in any order; output
    paths only ever name files beside the input (or stdout)."""
    args: list[str] = [H.INPUT] if rng.random() < 0.85 else []
    for _ in range(rng.randint(0, 5)):
        flag = rng.choice(_FLAGS[tool])
        args.append(flag)
        if rng.random() < 0.75:
            value = rng.choice(_VALUES)
            if flag == "-o" or flag == "--plot":
                value = rng.choice(("-", "{input}.out.npz", "{input}.out.svg",
                                    "{input}.out.mlir", "{input}.nodir/x"))
            args.append(value)
    rng.shuffle(args)
    return tuple(args)


def command_line_cases(rng: random.Random, count: int) -> Iterator[H.Case]:
    """The four tools on random command lines over a small valid module."""
    for i in range(count):
        invs = [H.Invocation(tool, command_line(rng, tool)) for tool in
                rng.sample(sorted(_FLAGS), k=2)]
        yield H.Case(f"gen-cli-{i}", rng.choice(_MODULES), invs, {"generator": "command-line"})


def tool_cases(seed: int, names: list[str], run_timeout: float | None) -> Iterator[H.Case]:
    """An endless, reproducible stream of generated tool cases: specs, pipelines and command
    lines in turn (cut by the caller's time budget)."""
    rng = random.Random(f"generate/{seed}")
    gens = (lambda k: spec_cases(rng, 1, run_timeout), lambda k: pipeline_cases(rng, 1, names),
            lambda k: command_line_cases(rng, 1))
    for k in itertools.count():
        for case in gens[k % 3](k):
            case.name = f"{case.name.rsplit('-', 1)[0]}-{seed}-{k}"
            yield case


def within(cases: Iterator[H.Case], seconds: float) -> Iterator[H.Case]:
    """``cases`` until ``seconds`` have passed (checked before each case)."""
    deadline = time.monotonic() + seconds
    for case in cases:
        if time.monotonic() > deadline:
            return
        yield case


# --------------------------------------------------------------------------- the Python API

class APICase:
    """One generated API call: ``fn`` (its name), the call and, where the reference defines the
    same result, the reference call."""

    def __init__(self, name: str, call: Callable[[], object],
                 reference: Callable[[], object] | None, args: str,
                 bound: Callable[[], object] | None = None):
        self.name, self.call, self.reference, self.args = name, call, reference, args
        self.bound = bound  # a dot's per-element error bound (section 6); None: bit-exact


def _array(rng: random.Random, np):
    """A small float array (some zero-size, some with NaN/Inf/subnormals/huge values)."""
    shape = rng.choice(((2, 32), (32,), (4, 64), (0, 32), (32, 0), (2, 3, 32), (16,)))
    dtype = rng.choice((np.float32, np.float32, np.float16, "bfloat16"))
    vals = np.random.default_rng(rng.randrange(2**32)).standard_normal(shape).astype(np.float32)
    with np.errstate(over="ignore"):
        vals *= np.float32(rng.choice((1.0, 1e-40, 1e-10, 1e10, 3e38)))
        if vals.size and rng.random() < 0.3:
            vals.flat[rng.randrange(vals.size)] = rng.choice((np.nan, np.inf, -np.inf, -0.0))
        return vals.astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)


def _weird(rng: random.Random, np):
    return rng.choice((None, 0, -1, 2**70, 10**400, 1.5, float("nan"), float("inf"), "x",
                       "", [], (1,), True, object(), np.float32(2), np.int64(32)))


def api_cases(seed: int, np, jnp, R, mj) -> Iterator[APICase]:
    """Random calls of ``mxlower.reference`` and ``mxlower.jax`` (quantize, dequantize,
    convert, cast, sparse, scaled_dot), each with its reference where they must agree."""
    rng = random.Random(f"api/{seed}")
    formats = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4_e2m1", "mxint8",
               "nvfp4", "mxfp8", "bogus"]
    types = ["f8E4M3FN", "f8E5M2", "f8E8M0FNU", "f6E3M2FN", "f4E2M1FN", "f8E4M3FNUZ",
             "f8E5M2FNUZ", "f8E4M3", "f8E3M4", "bogus", "f32", "i8"]
    for k in itertools.count():
        x = _array(rng, np)
        which = rng.choice(("quantize", "convert", "cast", "sparse", "scaled_dot", "weird"))
        if which == "quantize":
            fmt = rng.choice(formats)
            kw = {}
            if rng.random() < 0.3:
                kw["block_size"] = rng.choice((16, 32, 2, 2**70, 0, -32))
            if rng.random() < 0.3:
                kw["axis"] = rng.choice((0, -1, 1, 5))
            if rng.random() < 0.2:
                kw["global_scale"] = rng.choice((1.0, 0.5, 10**400, float("nan"), 0.0, 1e-45))

            def jax_q(x=x, fmt=fmt, kw=kw):
                q = mj.quantize(x, fmt, impl="xla", **kw)
                return [np.asarray(q.elements), np.asarray(q.scales)]
            yield APICase("quantize", jax_q,
                          lambda x=x, fmt=fmt, kw=kw: list(R.quantize(x, fmt, **kw)),
                          f"{x.dtype}{x.shape}, {fmt!r}, {kw}")
        elif which == "convert":
            # mxlower.jax.convert converts between a wide and a narrow type (its docs); the
            # reference also between wide types: only the common cases are compared
            to = rng.choice(types)
            if to in ("f32", "i8"):
                to = "f8E4M3FN"
            yield APICase("convert",
                          lambda x=x, to=to: np.asarray(mj.convert(x, to, impl="xla")),
                          lambda x=x, to=to: R.convert(x, to), f"{x.dtype}{x.shape}, {to!r}")
        elif which == "cast":
            n, s = number_spec(rng), scale_spec(rng)
            mode = rng.choice(("even", "even", "zero", "away", "bogus"))
            yield APICase("cast",
                          lambda x=x, n=n, s=s, m=mode: np.asarray(
                              mj.cast(x, n, s, roundmode=m, impl="xla")),
                          lambda x=x, n=n, s=s, m=mode: R.cast(x, n, s, roundmode=m),
                          f"{x.dtype}{x.shape}, {n!r}, {s!r}, {mode!r}")
        elif which == "sparse":
            n, m = rng.choice((4, 2, 8, 2**40, 0, 3)), rng.choice((2, 1, 0, 5))
            dim = rng.choice((0, -1, 1, 7))
            yield APICase("sparse",
                          lambda x=x, n=n, m=m, d=dim: np.asarray(mj.sparse(x, n, m, dim=d)),
                          lambda x=x, n=n, m=m, d=dim: R.sparse(x, n, m, dim=d),
                          f"{x.dtype}{x.shape}, n={n}, m={m}, dim={dim}")
        elif which == "scaled_dot":
            y = _array(rng, np)
            # the dimension numbers spelled out: the two defaults differ by design (JAX's
            # batches the leading dimensions of operands of equal rank, the reference's
            # never batches), and a case must ask both for the same contraction
            dn = (((max(x.ndim - 1, 0),), (max(y.ndim - 1, 0),)), ((), ()))

            def bound(x=x, y=y, dn=dn):  # 1e-6 * sum |a_i b_i| (docs/semantics.md section 6)
                ax, ay = np.abs(x.astype(np.float32)), np.abs(y.astype(np.float32))
                return 1e-6 * np.asarray(R.scaled_dot(ax, None, ay, None, dimension_numbers=dn),
                                         np.float64)
            yield APICase("scaled_dot",
                          lambda x=x, y=y, dn=dn: np.asarray(mj.scaled_dot(x, y, dn,
                                                                           impl="xla")),
                          lambda x=x, y=y, dn=dn: R.scaled_dot(x, None, y, None,
                                                               dimension_numbers=dn),
                          f"{x.dtype}{x.shape} x {y.dtype}{y.shape}", bound)
        else:
            fn = rng.choice(("quantize", "dequantize", "convert", "cast", "sparse"))
            args = [x] + [_weird(rng, np) for _ in range(rng.randint(1, 3))]
            yield APICase(fn, lambda fn=fn, a=args: getattr(mj, fn)(*a),
                          None, f"{', '.join(type(a).__name__ for a in args)}")


def _bits(np, v):
    v = np.asarray(v)
    if v.dtype.kind == "f" or v.dtype.itemsize in (1, 2, 4, 8):
        return v.view(f"u{v.dtype.itemsize}") if v.dtype.itemsize in (1, 2, 4, 8) else v
    return v


def api_verdict(case: APICase, np) -> tuple[str, str] | None:
    """None if the call behaved, else (class, detail): an exception other than TypeError /
    ValueError, or a result that differs from the reference's bits where both succeed (plain
    dots: within section 6's bound)."""
    try:
        got = case.call()
    except (TypeError, ValueError, AttributeError) as e:
        if isinstance(e, AttributeError):
            return "exception", f"{case.name}: AttributeError"
        got = e
    except Exception as e:  # noqa: BLE001 - what the fuzzer looks for
        return "exception", f"{case.name}: {type(e).__name__}"
    if case.reference is None:
        return None
    try:
        want = case.reference()
    except (TypeError, ValueError) as e:
        want = e
    except Exception as e:  # noqa: BLE001
        return "exception", f"reference.{case.name}: {type(e).__name__}"
    if isinstance(got, Exception) or isinstance(want, Exception):
        if isinstance(got, Exception) != isinstance(want, Exception):
            ok, bad = ("reference", "jax") if isinstance(got, Exception) else ("jax", "reference")
            return "disagreement", f"{case.name}: {bad} refuses what {ok} accepts"
        return None
    gots, wants = (got, want) if isinstance(got, list) else ([got], [want])
    for g, w in zip(gots, wants):
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape:
            return "wrong-result", f"{case.name}: shape {g.shape} != reference {w.shape}"
        if case.bound is not None:
            w64, g64 = w.astype(np.float64), g.astype(np.float64)
            with np.errstate(invalid="ignore"):
                close = (w64 == g64) | (np.abs(g64 - w64) <= case.bound())
            same = bool((close | (np.isnan(w64) & np.isnan(g64))).all())
        else:
            same = np.array_equal(_bits(np, g), _bits(np, w))
        if not same:
            return "wrong-result", f"{case.name}: differs from the reference"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="time budget (default 60)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--jobs", type=int, default=2)
    a = ap.parse_args(argv)
    import mutate as M
    out = a.out or Path(tempfile.mkdtemp(prefix="mxlower-gen-"))
    fuzzer = H.Fuzzer(out, jobs=a.jobs, timeout=60.0, log=lambda s: print(s, file=sys.stderr))
    report = fuzzer.run(within(tool_cases(a.seed, M.pass_names(), 20.0), a.seconds))
    print(report.summary())
    return 1 if report.failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
