"""dialect/mx.irdl.mlir stays in sync with mxlower's verifier (mxlower/dialect/mx.py).

The IRDL definition is read with upstream MLIR's Python bindings and loaded into an upstream
context (as ``mlir-opt --irdl-file`` does), then compared with the Python verifier:

* the same ops; per op the same attribute names, split into required (IRDL ``irdl.attributes``),
  optional (constraints tagged ``mx.optional_attribute``) and alternatives (tagged
  ``mx.alternative_attribute``: quantize's and dequantize's ``format`` / ``number``, exactly one
  of which Python requires) as the Python verifier requires or defaults them; the same allowed
  values (formats, scale modes, round modes, compute types);
* operand and result counts: every count the Python verifier accepts is in IRDL's range, and
  counts outside it are rejected by both;
* a corpus of ops built by mxlower's own builders for every format, scale mode, wide type and
  scaled_dot operand form, and datatype casts: Python accepts all of them, and IRDL accepts all
  but the forms it cannot express (scaled_dot with five operands, the unscaled datatype
  quantize / dequantize; see the definition's header);
* the lit files under test/lit/dialect: chunks IRDL accepts or rejects are accepted or rejected
  by the Python verifier as those files say.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from pathlib import Path

import pytest

from mxlower.bindings import jaxlib as J
from mxlower.bindings import collect_ops, upstream
from mxlower.dialect import mx
from mxlower.formats import FORMATS, SCALE_MODES, WIDE_TYPES
from mxlower.numbers import ROUND_MODES, lut_spec
from mxlower.numbers import SCALE_MODES as CAST_SCALE_MODES

ROOT = Path(__file__).resolve().parents[2]
IRDL_FILE = ROOT / "dialect" / "mx.irdl.mlir"
LIT_DIR = ROOT / "test" / "lit" / "dialect"

jir = J.ir
uir = upstream.module("ir")
irdl = upstream.module("dialects.irdl")

#: mx.py's attribute table (op name -> attribute names it knows).  Read from the private name
#: until mx.py exposes a public one.
PY_ATTRIBUTES: dict[str, tuple[str, ...]] = getattr(mx, "ATTRIBUTES", None) or mx._ATTRS

#: the Python tables behind each enumerated attribute
PY_VALUES = {
    "format": set(FORMATS),
    "lhs_format": set(FORMATS),
    "rhs_format": set(FORMATS),
    "scale_mode": set(SCALE_MODES),
    "compute_type": set(WIDE_TYPES),
    "roundmode": set(ROUND_MODES),
    "scalemode": set(CAST_SCALE_MODES),
}
#: string attributes whose values are open (number and scale specs; a scaled_dot side's too)
STRING_ATTRIBUTES = {"number", "scale", "lhs_number", "lhs_scale", "rhs_number", "rhs_scale"}

# ----------------------------------------------------------------------------- the definition


@dataclasses.dataclass(frozen=True)
class Constraint:
    kind: str  #: "is", "any_of", "base" or "any"
    values: frozenset[str]  #: accepted values (is, any_of) or the base name (base)


@dataclasses.dataclass
class OpDef:
    operands: list[tuple[str, str]]  #: (name, variadicity)
    results: list[tuple[str, str]]
    operand_constraints: list[Constraint]
    required: dict[str, Constraint]
    optional: dict[str, Constraint]
    alternative: dict[str, Constraint] = dataclasses.field(default_factory=dict)

    @property
    def constrained(self) -> dict[str, Constraint]:
        return {**self.required, **self.optional, **self.alternative}

    @staticmethod
    def _range(group: list[tuple[str, str]]) -> tuple[int, int | None]:
        lo = sum(v == "single" for _, v in group)
        hi = None if any(v == "variadic" for _, v in group) else len(group)
        return lo, hi

    def operand_range(self) -> tuple[int, int | None]:
        return self._range(self.operands)

    def result_range(self) -> tuple[int, int | None]:
        return self._range(self.results)


def _attr_text(a) -> str:
    if isinstance(a, uir.StringAttr):
        return a.value
    if isinstance(a, uir.TypeAttr):
        return str(a.value)
    return str(a)


def _constraint(value) -> Constraint:
    op = value.owner
    name = op.name
    if name == "irdl.is":
        return Constraint("is", frozenset([_attr_text(op.attributes["expected"])]))
    if name == "irdl.any_of":
        parts = [_constraint(v) for v in op.operands]
        assert all(p.kind == "is" for p in parts), "any_of over non-irdl.is constraints"
        return Constraint("any_of", frozenset().union(*(p.values for p in parts)))
    if name == "irdl.base":
        return Constraint("base", frozenset([_attr_text(op.attributes["base_name"])]))
    if name == "irdl.any":
        return Constraint("any", frozenset())
    raise AssertionError(f"constraint op {name} is not read by this test")


def _names_and_variadicity(op) -> list[tuple[str, str]]:
    names = [uir.StringAttr(a).value for a in uir.ArrayAttr(op.attributes["names"])]
    # printed as #irdl<variadicity_array[ single,  optional]>
    listed = str(op.attributes["variadicity"]).partition("[")[2]
    variadicity = re.findall(r"\b(single|optional|variadic)\b", listed)
    assert len(names) == len(variadicity)
    return list(zip(names, variadicity))


def _read_definition(ctx) -> tuple[object, dict[str, OpDef]]:
    module = uir.Module.parse(IRDL_FILE.read_text())
    [dialect] = module.body.operations
    assert dialect.name == "irdl.dialect" and dialect.attributes["sym_name"].value == "mx"
    ops: dict[str, OpDef] = {}
    for op in dialect.regions[0].blocks[0].operations:
        assert op.name == "irdl.operation"
        d = OpDef([], [], [], {}, {})
        for c in op.regions[0].blocks[0].operations:
            c = c.operation
            if c.name == "irdl.operands":
                d.operands = _names_and_variadicity(c)
                d.operand_constraints = [_constraint(v) for v in c.operands]
            elif c.name == "irdl.results":
                d.results = _names_and_variadicity(c)
            elif c.name == "irdl.attributes":
                names = [uir.StringAttr(a).value
                         for a in uir.ArrayAttr(c.attributes["attributeValueNames"])]
                d.required = {n: _constraint(v) for n, v in zip(names, c.operands)}
            elif "mx.optional_attribute" in c.attributes:
                name = c.attributes["mx.optional_attribute"].value
                assert name not in d.optional, f"{name} tagged twice"
                d.optional[name] = _constraint(c.results[0])
            elif "mx.alternative_attribute" in c.attributes:
                name = c.attributes["mx.alternative_attribute"].value
                assert name not in d.alternative, f"{name} tagged twice"
                d.alternative[name] = _constraint(c.results[0])
        ops["mx." + op.attributes["sym_name"].value] = d
    return module, ops


@pytest.fixture(scope="module")
def upstream_ctx():
    """An upstream context with the IRDL definition loaded (``mlir-opt --irdl-file``)."""
    ctx = uir.Context()
    ctx.allow_unregistered_dialects = True  # for #stablehlo.dot<...>
    with ctx:
        module, ops = _read_definition(ctx)
        irdl.load_dialects(module)
        yield ctx, ops


@pytest.fixture(scope="module")
def definition(upstream_ctx):
    return upstream_ctx[1]


def irdl_errors(upstream_ctx, text: str) -> list[str]:
    """The errors upstream MLIR reports parsing and verifying ``text`` against the IRDL."""
    ctx, _ = upstream_ctx
    with ctx:
        try:
            uir.Module.parse(text)
        except uir.MLIRError as e:
            return [d.message for d in e.error_diagnostics] or [str(e)]
    return []


# ----------------------------------------------------------------------------- mxlower's side


@pytest.fixture(scope="module")
def jctx():
    with J.make_context(allow_unregistered=True) as c, jir.Location.unknown():
        yield c


def python_errors(jctx, text: str) -> list[str]:
    """What mxlower's verifier says about every mx op in ``text`` (parsed by jaxlib)."""
    with jctx:
        m = jir.Module.parse(text)
        return [msg for _, msg in mx.verify(m.operation)]


def _mx_ops(module) -> list:
    return collect_ops(module.operation, mx.is_mx_op)


def _attrs(op) -> dict:
    """An op's attributes by name (jaxlib iterates an op's attributes as names)."""
    names = [a if isinstance(a, str) else a.name for a in op.attributes]
    return {n: op.attributes[n] for n in names}


def _build(jctx, arg_types: list[str], make) -> str:
    """A function of ``arg_types`` whose body is what ``make(args, ip)`` builds; as text."""
    sig = ", ".join(f"%a{i}: {t}" for i, t in enumerate(arg_types))
    with jctx:
        m = jir.Module.parse(f"func.func @f({sig}) {{\n  return\n}}")
        block = m.body.operations[0].regions[0].blocks[0]
        make(list(block.arguments), jir.InsertionPoint(block.operations[0]))
        return str(m)


def _t(shape, elt: str) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + elt + ">"


#: labels of corpus ops IRDL cannot express (start of the label)
IRDL_CANNOT = ("unscaled datatype",)


def builder_corpus(jctx) -> list[tuple[str, str, int]]:
    """(label, module text, operand count of its mx op) for ops built by mxlower's builders."""
    out = []
    wide = list(WIDE_TYPES)

    def add(label, types, make):
        text = _build(jctx, types, make)
        with jctx:
            [op] = _mx_ops(jir.Module.parse(text))
            out.append((label, text, len(op.operands)))

    # section 10: casts, sparsity, datatype quantize / dequantize
    for i, (number, scale) in enumerate([
            ("e5m6", "e8m0_t32"), ("e2m1fo", "e8m0_t16x16"), ("int4", "bfloat16_t0"),
            ("e4m3fn", "e8m0"), ("uint4", "float32_uint8_t16"), ("uint8", "float16_e5m10_t0d0"),
            ("e3m4b5", None), ("mxint4", None), ("nvfp4", None),
            (lut_spec([-1.5, -0.5, 0.5, 1.5]), "e8m0_t32")]):  # number = "lut", table
        for mode in ("even", "stochastic"):
            types = [_t((16, 64), wide[i % 3])] + ([_t((16, 64), "ui32")]
                                                    if mode == "stochastic" else [])
            add(f"cast {number} {scale} {mode}", types,
                lambda a, ip, number=number, scale=scale, mode=mode: mx.cast(
                    a[0], number, scale, roundmode=mode,
                    rbits=a[1] if mode == "stochastic" else None, ip=ip))
            label = ("unscaled datatype " if scale is None and ":" not in str(number)
                     and number not in ("mxint4", "nvfp4") else "") + "quantize"
            add(f"{label} {number} {scale} {mode}", types,
                lambda a, ip, number=number, scale=scale, mode=mode: mx.quantize(
                    a[0], number=number, scale=scale, roundmode=mode,
                    rbits=a[1] if mode == "stochastic" else None, ip=ip))
        q_text = out[-1][1]
        with jctx:
            q_module = jir.Module.parse(q_text)
            [q] = _mx_ops(q_module)
            rtypes = [str(r.type) for r in q.results]
            del q, q_module
        label = "unscaled datatype " if len(rtypes) == 1 else ""
        add(f"{label}dequantize {number} {scale}", rtypes,
            lambda a, ip, number=number, scale=scale, n=len(rtypes), i=i: mx.dequantize(
                a[0], a[1] if n > 1 else None, number=number, scale=scale,
                zero_points=a[2] if n > 2 else None, result_type=wide[i % 3], ip=ip))
    # subtile offsets: quantize's third result, dequantize's third operand; a two-level cast
    # takes its tensor scale g as the second operand
    add("quantize mx9", [_t((16, 64), "f32")],
        lambda a, ip: mx.quantize(a[0], number="mx9", ip=ip))
    add("dequantize mx9", [_t((16, 64), "i8"), _t((16, 4), "f8E8M0FNU"), _t((16, 32), "ui8")],
        lambda a, ip: mx.dequantize(a[0], a[1], number="mx9", offsets=a[2], ip=ip))
    add("cast two-level", [_t((16, 64), "bf16"), "tensor<f32>"],
        lambda a, ip: mx.cast(a[0], "int8", "e8m0_t16_s2o1_gf32", tensor_scale=a[1], ip=ip))
    # the datatype quantize / dequantize of a two-level datatype: g their last operand
    add("quantize two-level", [_t((16, 64), "f32"), "tensor<f32>"],
        lambda a, ip: mx.quantize(a[0], number="e4m3fn", scale="e8m0_t32_gf32",
                                  global_scale=a[1], ip=ip))
    add("dequantize two-level", [_t((16, 64), "f8E4M3FN"), _t((16, 2), "f8E8M0FNU"),
                                 "tensor<f32>"],
        lambda a, ip: mx.dequantize(a[0], a[1], number="e4m3fn", scale="e8m0_t32_gf32",
                                    tensor_scale=a[2], result_type="bf16", ip=ip))
    for n, m, dim in ((4, 2, 1), (2, 1, 0), (8, 8, -1)):
        add(f"sparse {n} {m} {dim}", [_t((16, 64), "bf16")],
            lambda a, ip, n=n, m=m, dim=dim: mx.sparse(a[0], n, m, dim=dim, ip=ip))

    for fmt in FORMATS.values():
        modes = [None] if fmt.is_nvfp4 else list(SCALE_MODES)
        globals_ = [False, True] if fmt.global_scale else [False]
        for in_t, mode, glob, (shape, axis) in itertools.product(
                wide, modes, globals_, [((4, 64), 1), ((64, 3), 0), (("?", 64), 1)]):
            types = [_t(shape, in_t)] + (["tensor<f32>"] if glob else [])
            add(f"quantize {fmt.name} {in_t} {mode} global={glob} {shape}", types,
                lambda a, ip, fmt=fmt, mode=mode, axis=axis, glob=glob: mx.quantize(
                    a[0], fmt.name, axis=axis, scale_mode=mode,
                    global_scale=a[1] if glob else None, ip=ip))
        for out_t, glob in itertools.product(wide, globals_):
            k = fmt.block_size
            types = [_t((4, 64), fmt.element), _t((4, 64 // k), fmt.scale)]
            types += ["tensor<f32>"] if glob else []
            add(f"dequantize {fmt.name} -> {out_t} global={glob}", types,
                lambda a, ip, fmt=fmt, out_t=out_t, glob=glob: mx.dequantize(
                    a[0], a[1], fmt.name, result_type=out_t, axis=1,
                    global_scale=a[2] if glob else None, ip=ip))
    sides = [None, *FORMATS]
    for n, (lf, rf, glob) in enumerate(itertools.product(sides, sides, [False, True])):
        if lf is None and rf is None:
            continue
        types, order = [], {}
        for side, f, rows, plain in (("lhs", lf, 4, "bf16"), ("rhs", rf, 8, "f16")):
            order[side] = len(types)
            if f is None:
                types.append(_t((rows, 64), plain))
            else:
                fmt = FORMATS[f]
                types += [_t((rows, 64), fmt.element),
                          _t((rows, 64 // fmt.block_size), fmt.scale)]
        if glob:
            types.append("tensor<f32>")

        def make(a, ip, lf=lf, rf=rf, glob=glob, order=order, n=n):
            li, ri = order["lhs"], order["rhs"]
            mx.scaled_dot(a[li], a[li + 1] if lf else None, a[ri], a[ri + 1] if rf else None,
                          lhs_format=lf, rhs_format=rf, lhs_contracting=(1,),
                          rhs_contracting=(1,), lhs_axis=1 if lf and n % 4 < 2 else None,
                          rhs_axis=1 if rf and n % 3 == 0 else None, result_type=wide[n % 3],
                          compute_type=wide[(n // 3) % 3],
                          global_scale=a[-1] if glob else None, ip=ip)

        add(f"scaled_dot {lf} x {rf} global={glob}", types, make)
    # sides named by their MX format's datatype (at most four operands: IRDL's forms)
    for label, types, sides, glob in [
            ("specs x name", [_t((4, 64), "f8E4M3FN"), _t((4, 2), "f8E8M0FNU"),
                              _t((8, 64), "i8"), _t((8, 8), "f8E8M0FNU")],
             dict(lhs_number="e4m3fn", lhs_scale="e8m0_t32", rhs_number="bfp16"), False),
            ("code x plain", [_t((4, 64), "f4E2M1FN"), _t((4, 2), "f8E8M0FNU"),
                              _t((8, 64), "bf16")],
             dict(lhs_number="e2m1fo:e8m0_t32d1"), False),
            ("plain x nvfp4 two-level", [_t((4, 64), "f16"), _t((8, 64), "f4E2M1FN"),
                                         _t((8, 4), "f8E4M3FN"), "tensor<f32>"],
             dict(rhs_number="e2m1fo", rhs_scale="e4m3fn_t16_gf32"), True)]:
        def make(a, ip, sides=sides, glob=glob):
            scaled = [s for s in ("lhs", "rhs") if f"{s}_number" in sides]
            li = 0
            ri = 2 if "lhs" in scaled else 1
            mx.scaled_dot(a[li], a[li + 1] if "lhs" in scaled else None, a[ri],
                          a[ri + 1] if "rhs" in scaled else None, lhs_contracting=(1,),
                          rhs_contracting=(1,), global_scale=a[-1] if glob else None, ip=ip,
                          **sides)

        add(f"scaled_dot datatype {label}", types, make)
    for elt, bits in mx.PACKABLE.items():
        n = 8 * 3  # fills whole bytes for every width
        add(f"pack {elt}", [_t((2, n), elt)],
            lambda a, ip: mx.pack(a[0], axis=1, ip=ip))
        add(f"unpack {elt}", [_t((2, n * bits // 8), "ui8")],
            lambda a, ip, elt=elt: mx.unpack(a[0], elt, axis=1, ip=ip))
    return out


@pytest.fixture(scope="module")
def corpus(jctx):
    return builder_corpus(jctx)


def _chunks(path: Path) -> list[str]:
    return re.split(r"^// -----\s*$", path.read_text(), flags=re.M)


# ----------------------------------------------------------------------------- tests


def test_same_ops(definition):
    assert set(definition) == set(mx.OP_NAMES) == set(PY_ATTRIBUTES)


def test_same_attribute_names(definition):
    for name, d in definition.items():
        groups = [set(d.required), set(d.optional), set(d.alternative)]
        assert sum(map(len, groups)) == len(set().union(*groups)), name
        assert set(d.constrained) == set(PY_ATTRIBUTES[name]), name


def test_same_allowed_values(definition):
    """Every enumerated attribute lists exactly the Python table's values; the others are
    integers (block sizes, axes), a dense array (a lookup table's values) or, for
    dot_dimension_numbers, anything (StableHLO's attribute is opaque to upstream MLIR)."""
    seen = set()
    for name, d in definition.items():
        for attr, c in d.constrained.items():
            if attr in STRING_ATTRIBUTES:
                assert (c.kind, c.values) == ("base", frozenset(["#builtin.string"])), \
                    (name, attr)
            elif attr in PY_VALUES:
                assert c.kind in ("is", "any_of"), (name, attr)
                assert c.values == PY_VALUES[attr], (name, attr)
                seen.add(attr)
            elif attr == "dot_dimension_numbers":
                assert c.kind == "any"
            elif attr == "table":  # a custom lookup table's values, array<f32: ...>
                assert (c.kind, c.values) == ("base", frozenset(["#builtin.dense_array"]))
            else:
                assert (c.kind, c.values) == ("base", frozenset(["#builtin.integer"])), \
                    (name, attr)
                assert attr in ("axis", "dim", "n", "m") or attr.endswith(("_axis", "block_size")), \
                    (name, attr)
    assert seen == set(PY_VALUES)


def test_operands_and_results_are_ranked_tensors_and_global_scales_f32(definition):
    for name, d in definition.items():
        for (operand, _), c in zip(d.operands, d.operand_constraints):
            want = "tensor<f32>" if operand == "global_scale" else "!builtin.tensor"
            assert want in c.values, (name, operand)


def test_builder_corpus_is_valid_for_python(jctx, corpus):
    assert len(corpus) > 250
    for label, text, _ in corpus:
        assert python_errors(jctx, text) == [], label


def test_irdl_accepts_the_builder_corpus_except_five_operand_scaled_dots(upstream_ctx, corpus):
    five = unscaled = 0
    for label, text, n_operands in corpus:
        errors = irdl_errors(upstream_ctx, text)
        if label.startswith("scaled_dot") and n_operands == 5:
            five += 1
            assert len(errors) == 1 and "but got 'tensor<f32>'" in errors[0], (label, errors)
        elif label.startswith(IRDL_CANNOT):
            unscaled += 1
            assert len(errors) == 1 and "expects at least 2" in errors[0], (label, errors)
        else:
            assert errors == [], (label, errors)
    assert five == len(FORMATS) ** 2
    assert unscaled == 3


def test_operand_and_result_counts(jctx, upstream_ctx, definition, corpus):
    """The counts Python accepts lie in IRDL's range (and fill it where it is bounded); one
    fewer than the minimum and one more than the most Python accepts are rejected by both."""
    seen: dict[str, set[int]] = {}
    seen_results: dict[str, set[int]] = {}
    for label, text, n in corpus:
        if label.startswith(IRDL_CANNOT):
            continue
        name = re.search(r'"(mx\.\w+)"', text).group(1)
        seen.setdefault(name, set()).add(n)
        results = re.search(r'\) -> \(?(.*)$', text, flags=re.M).group(1)
        seen_results.setdefault(name, set()).add(results.count("tensor<"))
    for name, d in definition.items():
        lo, hi = d.operand_range()
        assert min(seen[name]) >= lo and (hi is None or max(seen[name]) <= hi), name
        if hi is not None:
            assert seen[name] == set(range(lo, hi + 1)), name
        rlo, rhi = d.result_range()
        assert seen_results[name] == set(range(rlo, rhi + 1)), name
        # mutants of one valid op: operands dropped / appended, a result dropped / appended
        text = next(t for _, t, _ in corpus if f'"{name}"' in t)
        for mutant in _count_mutants(jctx, text, drop_to=lo - 1, grow_to=max(seen[name]) + 1):
            assert python_errors(jctx, mutant), (name, mutant)
            count = len(re.search(r'"mx\.\w+"\(([^)]*)\)', mutant).group(1).split(","))
            if count < lo or (hi is not None and count > hi):
                assert irdl_errors(upstream_ctx, mutant), (name, mutant)
        for mutant in _result_mutants(jctx, text):
            assert python_errors(jctx, mutant), (name, mutant)
            count = re.search(r'\) -> \(?(.*)$', mutant, flags=re.M).group(1).count("tensor<")
            if not rlo <= count <= rhi:
                assert irdl_errors(upstream_ctx, mutant), (name, mutant)


def _count_mutants(jctx, text: str, drop_to: int, grow_to: int) -> list[str]:
    """``text``'s mx op with its operand list cut to ``drop_to`` and grown to ``grow_to``
    (repeating its last operand)."""
    out = []
    for n in (max(drop_to, 0), grow_to):
        out.append(_mutate(jctx, text, lambda ops, types: (
            ops[:n] + [ops[-1]] * max(0, n - len(ops)), types)))
    return out


def _result_mutants(jctx, text: str) -> list[str]:
    return [_mutate(jctx, text, lambda ops, types: (ops, types[:-1])),
            _mutate(jctx, text, lambda ops, types: (ops, types + [types[-1]]))]


def _mutate(jctx, text: str, change) -> str:
    """``text`` with its (unused) mx op rebuilt from ``change(operands, result_types)``."""
    with jctx:
        m = jir.Module.parse(text)
        [op] = _mx_ops(m)
        operands, types = change(list(op.operands), [r.type for r in op.results])
        jir.Operation.create(op.name, results=types, operands=operands,
                             attributes=_attrs(op),
                             loc=op.location, ip=jir.InsertionPoint(op))
        op.erase()
        return str(m)


def test_required_and_optional_attributes_match(jctx, definition, corpus):
    """An IRDL-required attribute is required by Python: dropping it from any valid op makes
    the op invalid.  An optional one is optional for Python: some valid op lacks it (a corpus
    op or a corpus op with that attribute dropped).  Of two alternatives every valid op has
    exactly one, and dropping it makes the op invalid."""
    texts = [t for _, t, _ in corpus] + _chunks(LIT_DIR / "mx-irdl.mlir")
    optional_seen: dict[str, set[str]] = {name: set() for name in definition}
    for text in texts:
        with jctx:
            m = jir.Module.parse(text)
            for op in _mx_ops(m):
                d = definition[op.name]
                present = set(_attrs(op))
                if d.alternative:
                    assert len(present & set(d.alternative)) == 1, (op.name, present)
                optional_seen[op.name] |= set(d.optional) - present
                for attr in present & set(d.constrained):
                    value = op.attributes[attr]
                    del op.attributes[attr]
                    ok = not mx.verify(op)
                    op.attributes[attr] = value
                    if attr in d.required or attr in d.alternative:
                        assert not ok, (op.name, attr)
                    elif ok:
                        optional_seen[op.name].add(attr)
    for name, d in definition.items():
        assert optional_seen[name] == set(d.optional), name


def test_values_outside_the_definition_are_rejected_by_python(jctx, definition, corpus):
    bad = {"string": lambda: jir.StringAttr.get("bogus"),
           "type": lambda: jir.TypeAttr.get(jir.IntegerType.get_signless(32)),
           "int": lambda: jir.IntegerAttr.get(jir.IntegerType.get_signless(64), 7)}
    checked = set()
    for _, text, _ in corpus:
        with jctx:
            m = jir.Module.parse(text)
            for op in _mx_ops(m):
                d = definition[op.name]
                for attr, c in d.constrained.items():
                    if attr not in op.attributes or c.kind == "any":
                        continue
                    if attr in STRING_ATTRIBUTES:
                        values = [bad["string"](), bad["int"]()]
                    elif c.kind == "base":
                        values = [bad["string"]()]
                    elif attr == "compute_type":
                        values = [bad["type"](), bad["string"]()]
                    else:
                        values = [bad["string"](), bad["int"]()]
                    old = op.attributes[attr]
                    for v in values:
                        op.attributes[attr] = v
                        assert mx.verify(op), (op.name, attr, v)
                    op.attributes[attr] = old
                    checked.add((op.name, attr))
    want = {(n, a) for n, d in definition.items() for a, c in d.constrained.items()
            if c.kind != "any"}
    assert checked == want


@pytest.mark.parametrize("path, irdl_ok, python_ok", [
    ("mx-irdl.mlir", True, True),
    ("mx-irdl-invalid.mlir", False, False),
    ("mx-irdl-limits.mlir", True, False),
    ("mx-irdl-five-operands.mlir", False, True),
    ("mx-irdl-unscaled.mlir", False, True),
])
def test_lit_files(jctx, upstream_ctx, path, irdl_ok, python_ok):
    """Each chunk of the lit files is judged as the file says, by both verifiers."""
    chunks = _chunks(LIT_DIR / path)
    assert len(chunks) >= 1
    for chunk in chunks:
        assert (python_errors(jctx, chunk) == []) == python_ok, chunk
        assert (irdl_errors(upstream_ctx, chunk) == []) == irdl_ok, chunk
