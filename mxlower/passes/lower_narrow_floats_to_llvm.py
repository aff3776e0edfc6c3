"""``mxlower-lower-narrow-floats-to-llvm``: narrow float conversions and storage to integers.

Runs on upstream MLIR (``stack = "upstream"``), after bufferization and before
``convert-to-llvm``.  See :class:`LowerNarrowFloatsToLLVM`.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, ClassVar

import numpy as np

from mxlower import codec
from mxlower import diagnostics as diag
from mxlower.bindings import collect_ops
from mxlower.formats import FLOAT_TYPES
from mxlower.passes.base import ModulePass, option

#: a narrow type's spelling in printed IR ("f8E4M3FN", "4xf8E4M3FN", but not "f8E4M3FNUZ")
_NARROW_RE = re.compile(r"(" + "|".join(FLOAT_TYPES) + r")(?![\w])")
_WIDE = ("f64", "f32", "bf16", "f16")

#: ops that only move, select or reinterpret values: retyped to i8 as they are
_STORAGE_DIALECTS = frozenset({"memref", "vector", "scf", "cf", "func", "bufferization",
                               "tensor", "affine", "builtin", "ub", "gpu"})
_STORAGE_OPS = frozenset({"arith.constant", "arith.select", "arith.bitcast", "linalg.generic",
                          "linalg.yield", "linalg.copy", "linalg.fill", "linalg.transpose",
                          "linalg.broadcast", "linalg.index"})
#: ops of those dialects that compute on their element values
_COMPUTE_OPS = frozenset({"vector.contract", "vector.reduction", "vector.multi_reduction",
                          "vector.fma", "vector.outerproduct", "vector.scan",
                          "memref.atomic_rmw"})
#: ops whose meaning depends on the element's bit width (f4/f6 are i8 after this pass)
_BIT_WIDTH_OPS = frozenset({"vector.bitcast", "memref.view", "vector.interleave",
                            "vector.deinterleave"})


@dataclasses.dataclass(frozen=True)
class LowerNarrowFloatsToLLVM(ModulePass):
    """Lower arith.truncf/extf on f8/f6/f4 types to integer ops, and their storage to i8.

    Every ``arith.truncf`` / ``arith.extf`` (scalar, vector or tensor) converting between
    f64/f32/bf16/f16 and f8E4M3FN, f8E5M2, f8E8M0FNU, f6E2M3FN, f6E3M2FN or f4E2M1FN becomes
    the branch-free integer ops :mod:`mxlower.codec` generates (MX-SEMANTICS section 2,
    bit-exact with ml_dtypes; one rounding, also from f64; upstream ``arith-expand`` is not
    exact, see test/lit/run/arith-expand-f4-differs.mlir).  A conversion between two narrow
    types gives the result of going through f32 (which is exact).

    Storage: every narrow float type in the module -- scalars, vectors, memrefs and tensors,
    function signatures, block arguments, ``arith.constant`` and ``memref.global`` values --
    becomes ``i8`` holding the code in its low bits (upper bits zero), the layout of
    ml_dtypes' arrays (one byte per element, also for f4/f6).  MLIR 22's ``convert-to-llvm``
    would map f8 to ``i8`` but f6/f4 to ``i6``/``i4``, whose in-memory upper bits LLVM leaves
    unspecified and whose vectors it packs; this pass makes every one of them ``i8``.  A
    caller of a lowered function passes and receives the i8 codes (``array.view(np.uint8)``).

    With ``via-f32``, a bf16/f16 source is first extended to f32 (exact, so the result is the
    same) and converted with 32-bit integer ops, which x86 vectorizes 3-4x faster than the
    16-bit ones (AVX2 has no 16-bit variable shifts); mxlower-stablehlo-to-llvm sets it.

    Only ``truncf``/``extf`` may compute on narrow values: ``arith.addf`` on ``f8E4M3FN``,
    ``vector.bitcast`` of f4/f6 vectors, conversions from or to other float types (tf32, ...),
    and truncf with a rounding mode other than to-nearest-even are reported as errors.

    Before::

        %c = arith.truncf %x : vector<8xf32> to vector<8xf4E2M1FN>
        vector.store %c, %m[%i] : memref<?xf4E2M1FN>, vector<8xf4E2M1FN>

    After (abridged)::

        %b = arith.bitcast %x : vector<8xf32> to vector<8xi32>
        %e = arith.shrui %b, %cst23 : vector<8xi32>
        ...
        %c = arith.trunci %r : vector<8xi32> to vector<8xi8>
        vector.store %c, %m[%i] : memref<?xi8>, vector<8xi8>

    Example::

        mxlower-opt in.mlir -p 'builtin.module(one-shot-bufferize{bufferize-function-boundaries},
            convert-linalg-to-loops, mxlower-lower-narrow-floats-to-llvm, convert-to-llvm,
            reconcile-unrealized-casts)'
    """

    name: ClassVar[str] = "mxlower-lower-narrow-floats-to-llvm"
    stack: ClassVar[str] = "upstream"
    via_f32: bool = option(False, "truncate bf16/f16 to narrow types through an exact "
                           "arith.extf to f32 (same results), so the integer code works on "
                           "32-bit lanes: 3-4x faster on x86 AVX2, which has no 16-bit "
                           "variable shifts; a bf16 extf then needs arith-expand{include-bf16}")

    def run(self, op: Any) -> None:
        from mxlower.bindings import upstream

        NarrowFloatLowering(upstream.module("ir"), upstream.module("dialects.arith"), op,
                            self.via_f32).run()


def _narrow_name(t: Any) -> str | None:
    s = str(t)
    return s if s in FLOAT_TYPES else None


class NarrowFloatLowering:
    """The rewrite behind the pass (also used by mxlower-lower-narrow-floats-to-nvvm for the
    storage of GPU kernels): lowers every narrow conversion under ``root`` and retypes narrow
    storage to i8.  Ops of the ``nvvm`` dialect are left as they are (their type attributes
    name a cvt's format, not storage); names (symbols, strings) are never storage."""

    def __init__(self, ir: Any, arith: Any, root: Any, via_f32: bool = False):
        self.ir, self.arith, self.root, self.via_f32 = ir, arith, root, via_f32
        self.i8 = ir.IntegerType.get_signless(8, context=root.context)

    # ------------------------------------------------------------------------- types
    def elem(self, t: Any) -> Any:
        ir = self.ir
        return ir.ShapedType(t).element_type if isinstance(t, ir.ShapedType) else t

    def like(self, t: Any, elem: str) -> Any:
        """``t`` (a scalar or vector/tensor type) with element type ``elem``."""
        ir = self.ir
        e = ir.Type.parse(elem)
        if isinstance(t, ir.VectorType):
            scal = list(t.scalable_dims)
            return (ir.VectorType.get(t.shape, e, scalable=scal) if any(scal)
                    else ir.VectorType.get(t.shape, e))
        if isinstance(t, ir.RankedTensorType):
            return ir.RankedTensorType.get(t.shape, e, t.encoding)
        return e

    def map_type(self, t: Any) -> Any | None:
        """``t`` with every narrow float replaced by i8, or None when ``t`` has none."""
        ir = self.ir
        if _narrow_name(t):
            return self.i8
        if isinstance(t, ir.FunctionType):
            return map_function_type(ir, t, self.map_type)
        if not isinstance(t, ir.ShapedType) or not _narrow_name(ir.ShapedType(t).element_type):
            if _NARROW_RE.search(str(t)):
                raise ValueError(f"type '{t}'")
            return None
        if isinstance(t, ir.VectorType):
            scal = list(t.scalable_dims)
            return (ir.VectorType.get(t.shape, self.i8, scalable=scal) if any(scal)
                    else ir.VectorType.get(t.shape, self.i8))
        if isinstance(t, ir.MemRefType):
            return ir.MemRefType.get(t.shape, self.i8, t.layout, t.memory_space)
        if isinstance(t, ir.UnrankedMemRefType):
            return ir.UnrankedMemRefType.get(self.i8, t.memory_space)
        if isinstance(t, ir.RankedTensorType):
            return ir.RankedTensorType.get(t.shape, self.i8, t.encoding)
        if isinstance(t, ir.UnrankedTensorType):
            return ir.UnrankedTensorType.get(self.i8)
        raise ValueError(f"type '{t}'")

    def map_attr(self, a: Any) -> Any | None:
        """An attribute with narrow floats re-expressed on i8, or None when it has none."""
        ir = self.ir
        if isinstance(a, (ir.StringAttr, ir.FlatSymbolRefAttr, ir.SymbolRefAttr)):
            return None  # a name such as @to_f4E2M1FN, not a value
        if isinstance(a, ir.TypeAttr):
            t = self.map_type(a.value)
            return None if t is None else ir.TypeAttr.get(t)
        text = str(a)
        if not _NARROW_RE.search(text):
            return None
        if isinstance(a, ir.FloatAttr) and _narrow_name(a.type):
            code = _codes(text.rsplit(" : ", 1)[0], _narrow_name(a.type), 1)[0]
            return ir.IntegerAttr.get(self.i8, int(np.int8(code)))
        if isinstance(a, ir.DenseElementsAttr) and _narrow_name(a.type.element_type):
            st = a.type
            n = int(np.prod(st.shape)) if st.shape else 1
            body = text[len("dense<"):text.rindex("> : ")]
            codes = _codes(body, _narrow_name(st.element_type), n).view(np.int8)
            return ir.DenseElementsAttr.get(codes.reshape(st.shape), type=self.map_type(st))
        raise ValueError(f"attribute '{text}'")

    # ------------------------------------------------------------------------- driver
    def run(self) -> None:
        ops = collect_ops(self.root, pre_order=True)
        convs, casts = [], []
        for o in ops:
            with o.location:
                kind = self.classify(o)
            if kind == "conv":
                convs.append((o, str(self.elem(o.operands[0].type)),
                              str(self.elem(o.results[0].type))))
            elif kind == "cast":
                casts.append(o)
        for o in ops:
            try:
                self.retype(o)
            except ValueError as err:  # a container type map_type does not know
                raise diag.error(o, f"'{o.name}' has a {err} holding a narrow float type that "
                                 "mxlower-lower-narrow-floats-to-llvm cannot convert") from None
        for o, src, dst in convs:
            self.lower_conversion(o, src, dst)
        for o in casts:
            self.fold_cast(o)
        # an op of a storage dialect that cared about float-ness
        verify_retyped(self.ir, self.root, "retyping narrow floats to i8")

    def classify(self, o: Any) -> str | None:
        """'conv' (a conversion to lower), 'cast' (a cast to fold after retyping), or None;
        reports ops that compute on narrow floats."""
        name = o.name
        types = [v.type for v in (*o.operands, *o.results)]
        narrow = [n for n in (_narrow_name(self.elem(t)) for t in types) if n]
        if name in ("arith.truncf", "arith.extf"):
            src = str(self.elem(o.operands[0].type))
            dst = str(self.elem(o.results[0].type))
            if not narrow:
                return None
            if name == "arith.truncf" and "roundingmode" in o.attributes:
                mode = str(o.attributes["roundingmode"]).split(" :")[0]
                if mode != "0":  # arith::RoundingMode::to_nearest_even
                    raise diag.error(o, f"arith.truncf to {dst} with a rounding mode other than "
                                     "to_nearest_even is not supported (narrow float "
                                     "conversions round to nearest even)")
            for t in (src, dst):
                if t not in FLOAT_TYPES and t not in _WIDE:
                    raise diag.error(o, f"{name} from {src} to {dst} is not supported: "
                                     "narrow float types convert to and from f64, f32, bf16, "
                                     "f16 and each other")
            return "conv"
        for named in o.attributes:
            try:
                self.map_attr(o.attributes[named])
            except ValueError:
                raise diag.error(o, f"'{name}' has an attribute '{named}' holding a narrow "
                                 "float type that mxlower-lower-narrow-floats-to-llvm cannot "
                                 "convert") from None
        if not narrow:
            for r in o.regions:
                for b in r.blocks:
                    if any(_narrow_name(self.elem(a.type)) for a in b.arguments):
                        narrow = ["block argument"]
            if not narrow:
                return None
        dialect = name.split(".")[0]
        what = narrow[0]
        if name in _BIT_WIDTH_OPS and any(FLOAT_TYPES[n].bits < 8 for n in narrow
                                          if n in FLOAT_TYPES):
            raise diag.error(o, f"'{name}' on {what} is not supported: the pass stores "
                             f"{what} in i8, which changes the op's bit-width arithmetic")
        if name in _COMPUTE_OPS or (name not in _STORAGE_OPS and dialect not in
                                    _STORAGE_DIALECTS):
            raise diag.error(o, f"'{name}' computes on {what}, which has no LLVM lowering; only "
                             "arith.truncf and arith.extf convert to and from narrow float "
                             "types (extend the operands to f32 first)")
        if name in ("arith.bitcast", "builtin.unrealized_conversion_cast"):
            return "cast"
        return None

    def retype(self, o: Any) -> None:
        if o.name.split(".")[0] != "nvvm":
            retype_op(o, self.map_type, self.map_attr)

    def lower_conversion(self, o: Any, src: str, dst: str) -> None:
        ir, arith = self.ir, self.arith
        x = o.operands[0]
        with ir.InsertionPoint(o), o.location:
            b = codec.ArithBuilder(ir, arith, x.type)
            if src in FLOAT_TYPES and dst in FLOAT_TYPES:
                y = codec.emit_convert_codes(b, x, src, dst, code_bits=8)
            elif dst in FLOAT_TYPES:
                if self.via_f32 and src in ("bf16", "f16"):  # exact
                    x, src = arith.ExtFOp(self.like(x.type, "f32"), x).result, "f32"
                y = codec.emit_truncf(b, x, src, dst, code_bits=8)
            else:
                y = codec.emit_extf(b, x, src, dst)
        o.results[0].replace_all_uses_with(y)
        o.erase()

    def fold_cast(self, o: Any) -> None:
        """A bitcast / unrealized cast that touched a narrow type, after retyping."""
        ir, arith = self.ir, self.arith
        if len(o.operands) != 1 or len(o.results) != 1:
            return
        x, r = o.operands[0], o.results[0]
        if x.type == r.type:
            r.replace_all_uses_with(x)
            o.erase()
            return
        xe, re_ = self.elem(x.type), self.elem(r.type)
        if not (isinstance(xe, ir.IntegerType) and isinstance(re_, ir.IntegerType)):
            return
        if xe.width == re_.width:
            return
        with ir.InsertionPoint(o), o.location:
            op = arith.ExtUIOp if re_.width > xe.width else arith.TruncIOp
            y = op(r.type, x).result
        r.replace_all_uses_with(y)
        o.erase()


def map_function_type(ir: Any, t: Any, map_type: Any) -> Any | None:
    """A FunctionType with ``map_type`` applied to its inputs and results, or None when none of
    them changes.  Shared with mxlower-widen-bool-memrefs."""
    ins = [map_type(x) or x for x in t.inputs]
    outs = [map_type(x) or x for x in t.results]
    if list(ins) == list(t.inputs) and list(outs) == list(t.results):
        return None
    return ir.FunctionType.get(ins, outs)


def retype_op(o: Any, map_type: Any, map_attr: Any) -> None:
    """Retype ``o``'s results, its regions' block arguments and its attributes in place
    (``Value.set_type``): ``map_type`` / ``map_attr`` return the new type / attribute, or None
    to keep it.  Shared with mxlower-widen-bool-memrefs."""
    with o.location:
        for r in o.results:
            t = map_type(r.type)
            if t is not None:
                r.set_type(t)
        for region in o.regions:
            for block in region.blocks:
                for a in block.arguments:
                    t = map_type(a.type)
                    if t is not None:
                        a.set_type(t)
        for named in list(o.attributes):
            new = map_attr(o.attributes[named])
            if new is not None:
                o.attributes[named] = new


def verify_retyped(ir: Any, root: Any, what: str) -> None:
    """Verify ``root`` after retyping; the first verifier error becomes a diagnostic
    ``"<what> made an op invalid: ..."`` at the op."""
    try:
        root.verify()
    except ir.MLIRError as err:
        diags = getattr(err, "error_diagnostics", None) or []
        where = diags[0].location if diags else root.location
        msg = diags[0].message if diags else str(err)
        raise diag.error(where, f"{what} made an op invalid: {msg}") from None


_TOKEN_RE = re.compile(r'"0x[0-9A-Fa-f]*"|0x[0-9A-Fa-f]+|[-+]?(?:inf|nan|\d+(?:\.\d*)?'
                       r'(?:[eE][-+]?\d+)?)', re.I)


def _codes(body: str, type_name: str, count: int) -> np.ndarray:
    """The codes (uint8) of the ``count`` elements printed in ``body`` -- ``dense<body>`` or a
    FloatAttr's value: decimals (printed so that they round back to the element), ``0x..``
    bit patterns, or a ``"0x.."`` blob of one byte per element (storage of <= 8-bit types)."""
    from mxlower import reference

    tokens = _TOKEN_RE.findall(body)
    if len(tokens) == 1 and tokens[0].startswith('"'):
        blob = bytes.fromhex(tokens[0][3:-1])
        out = np.frombuffer(blob, dtype=np.uint8)
        return np.broadcast_to(out, (count,)).copy() if out.size == 1 else out.copy()
    codes = np.empty(len(tokens), dtype=np.uint8)
    for i, tok in enumerate(tokens):
        if tok.lower().startswith("0x"):
            codes[i] = int(tok, 16)
        else:
            v = np.array([float(tok)], dtype=np.float64)
            codes[i] = reference.bits(reference.convert(v, type_name))[0]
    if codes.size == 1 and count != 1:
        codes = np.broadcast_to(codes, (count,)).copy()
    if codes.size != count:
        raise ValueError(f"expected {count} elements, found {codes.size}")
    return codes
