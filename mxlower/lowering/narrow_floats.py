"""What the narrow-float passes share: which types are narrow, the choice of codec entry point
for a conversion, and the arith-level rewrite.

:class:`NarrowFloatLowering` is ``mxlower-lower-narrow-floats-to-llvm``'s rewrite on upstream
MLIR: ``arith.truncf``/``extf`` to integer ops and narrow storage to one i8 code per element
(``mxlower-lower-narrow-floats-to-nvvm{narrow-storage}`` runs it after its own lowering).
The StableHLO side (``mxlower-expand-narrow-floats``) is
:mod:`mxlower.lowering.narrow_floats_stablehlo`.

Everything looks the narrow types up in :mod:`mxlower.types` when it runs, so a type added with
:func:`mxlower.types.register` is handled like the built-in ones.  Nothing here imports a binding
stack: :class:`NarrowFloatLowering` takes the ``ir`` and ``arith`` modules of the IR it rewrites.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np

from mxlower import diagnostics as diag
from mxlower.bindings import attribute_items, collect_ops
from mxlower.ir.literals import dense_body, element_codes
from mxlower.ir.typeconv import (element_type, map_function_type, retype_op, verify_retyped,
                                 with_element_type)
import mxlower.lowering.codec as codec
import mxlower.lowering.int_builders as int_builders
from mxlower.types import FLOAT_TYPES, is_narrow_float, is_wide_float

__all__ = [
    "NarrowFloatLowering",
    "emit_conversion",
    "narrow_name",
    "narrow_pattern",
    "rounding_of",
    "truncf_roundmode",
]


# ============================================================================ types and literals


def narrow_name(t: Any) -> str | None:
    """The MLIR spelling of ``t`` when it is a narrow float type, else None."""
    s = str(t)
    return s if is_narrow_float(s) else None


@functools.cache
def _pattern(names: tuple[str, ...]) -> re.Pattern:
    return re.compile("(" + "|".join(map(re.escape, names)) + r")(?![\w])")


def narrow_pattern() -> re.Pattern:
    """A narrow type's spelling anywhere in printed IR ("f8E4M3FN", "4xf8E4M3FN", but not
    "f8E4M3FNUZ"), for the narrow types registered now."""
    return _pattern(tuple(sorted(FLOAT_TYPES, key=len, reverse=True)))


def emit_conversion(b: int_builders.IntBuilder, x: Any, src: str, dst: str, *,
                    code_bits: int = 8, roundmode: str = "even") -> Any:
    """The codec entry point for one conversion between a narrow type and a wide float type or
    another narrow type: narrow -> narrow codes, wide floats -> ``code_bits``-wide codes, or
    codes -> wide floats.  ``roundmode`` (conversions to a narrow type): ``even`` (section 2),
    ``zero`` or ``nearest`` (:func:`mxlower.lowering.codec.emit_truncf`)."""
    if not is_narrow_float(dst):
        return codec.emit_extf(b, x, src, dst)
    if is_narrow_float(src):
        if roundmode == "even":
            return codec.emit_convert_codes(b, x, src, dst, code_bits=code_bits)
        x, src = codec.emit_extf(b, x, src, "f32"), "f32"  # f32 holds every narrow value
    return codec.emit_truncf(b, x, src, dst, roundmode=roundmode, code_bits=code_bits)


#: arith's RoundingMode enum, in order
_ROUNDING_NAMES = ("to_nearest_even", "downward", "upward", "toward_zero", "to_nearest_away")


def rounding_of(o: Any) -> str:
    """The ``roundingmode`` of an ``arith.truncf`` by name ("to_nearest_even" when absent)."""
    if "roundingmode" not in o.attributes:
        return "to_nearest_even"
    text = str(o.attributes["roundingmode"])  # "2 : i32" (arith's RoundingMode enum)
    head = text.split(":")[0].strip()
    if head.isdigit() and int(head) < len(_ROUNDING_NAMES):
        return _ROUNDING_NAMES[int(head)]
    for name in _ROUNDING_NAMES:
        if name in text:
            return name
    return text


def truncf_roundmode(o: Any, dst: str) -> str:
    """The codec rounding mode of a narrow ``arith.truncf`` (``even``, ``zero``, ``nearest``);
    a located error for ``upward``/``downward``, which have no section 2 meaning here."""
    mode = rounding_of(o)
    if mode not in codec.TRUNCF_MODES:
        raise diag.error(o, f"arith.truncf to {dst} with rounding mode '{mode}' is not "
                         "supported (supported: to_nearest_even, toward_zero, "
                         "to_nearest_away)")
    return codec.TRUNCF_MODES[mode]


# ============================================================================ arith / LLVM


#: ops of the storage dialects that only move, select or reinterpret values: retyped as they are
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


class NarrowFloatLowering:
    """Lowers every narrow conversion under ``root`` (``arith.truncf``/``extf``) to the codec's
    integer ops and retypes narrow storage to i8.  Ops of the ``nvvm`` dialect are left as
    they are (their type attributes name a cvt's format, not storage); names (symbols,
    strings) are never storage.  ``ir`` / ``arith``: the upstream modules; ``via_f32``: see
    mxlower-lower-narrow-floats-to-llvm."""

    def __init__(self, ir: Any, arith: Any, root: Any, via_f32: bool = False):
        self.ir, self.arith, self.root, self.via_f32 = ir, arith, root, via_f32
        self.i8 = ir.IntegerType.get_signless(8, context=root.context)
        self.pattern = narrow_pattern()

    # ------------------------------------------------------------------------- types
    def elem(self, t: Any) -> Any:
        return element_type(self.ir, t)

    def map_type(self, t: Any) -> Any | None:
        """``t`` with every narrow float replaced by i8, or None when ``t`` has none."""
        ir = self.ir
        if narrow_name(t):
            return self.i8
        if isinstance(t, ir.FunctionType):
            return map_function_type(ir, t, self.map_type)
        if not isinstance(t, ir.ShapedType) or not narrow_name(t.element_type):
            if self.pattern.search(str(t)):
                raise ValueError(f"type '{t}'")
            return None
        return with_element_type(ir, t, self.i8)

    def map_attr(self, a: Any) -> Any | None:
        """An attribute with narrow floats re-expressed on i8, or None when it has none."""
        ir = self.ir
        if isinstance(a, (ir.StringAttr, ir.FlatSymbolRefAttr, ir.SymbolRefAttr)):
            return None  # a name such as @to_f4E2M1FN, not a value
        if isinstance(a, ir.TypeAttr):
            t = self.map_type(a.value)
            return None if t is None else ir.TypeAttr.get(t)
        text = str(a)
        if not self.pattern.search(text):
            return None
        if isinstance(a, ir.FloatAttr) and narrow_name(a.type):
            code = element_codes(text.rsplit(" : ", 1)[0], narrow_name(a.type), 1)[0]
            return ir.IntegerAttr.get(self.i8, int(np.int8(code)))
        if isinstance(a, ir.DenseElementsAttr) and narrow_name(a.type.element_type):
            st = a.type
            n = int(np.prod(st.shape)) if st.shape else 1
            codes = element_codes(dense_body(text), narrow_name(st.element_type), n)
            return ir.DenseElementsAttr.get(codes.view(np.int8).reshape(st.shape),
                                            type=self.map_type(st))
        raise ValueError(f"attribute '{text}'")

    # ------------------------------------------------------------------------- driver
    def run(self) -> None:
        ops = collect_ops(self.root, pre_order=True)
        convs, casts = [], []
        for o in ops:
            with o.location:
                kind = self.classify(o)
            if kind == "conv":
                dst = str(self.elem(o.results[0].type))
                mode = truncf_roundmode(o, dst) if o.name == "arith.truncf" else "even"
                convs.append((o, str(self.elem(o.operands[0].type)), dst, mode))
            elif kind == "cast":
                casts.append(o)
        for o in ops:
            try:
                self.retype(o)
            except ValueError as err:  # a container type map_type does not know
                raise diag.error(o, f"'{o.name}' has a {err} holding a narrow float type that "
                                 "mxlower-lower-narrow-floats-to-llvm cannot convert") from None
        for o, src, dst, mode in convs:
            self.lower_conversion(o, src, dst, mode)
        for o in casts:
            self.fold_cast(o)
        # an op of a storage dialect that cared about float-ness
        verify_retyped(self.ir, self.root, "retyping narrow floats to i8")

    def classify(self, o: Any) -> str | None:
        """'conv' (a conversion to lower), 'cast' (a cast to fold after retyping), or None;
        reports ops that compute on narrow floats."""
        name = o.name
        types = [v.type for v in (*o.operands, *o.results)]
        narrow = [n for n in (narrow_name(self.elem(t)) for t in types) if n]
        if name in ("arith.truncf", "arith.extf"):
            src = str(self.elem(o.operands[0].type))
            dst = str(self.elem(o.results[0].type))
            if not narrow:
                return None
            if name == "arith.truncf":
                truncf_roundmode(o, dst)
            for t in (src, dst):
                if not (is_narrow_float(t) or is_wide_float(t)):
                    raise diag.error(o, f"{name} from {src} to {dst} is not supported: "
                                     "narrow float types convert to and from f64, f32, bf16, "
                                     "f16 and each other")
            return "conv"
        for named, attr in attribute_items(o):
            try:
                if attr is None:  # a dense array of an element type the bindings cannot type
                    raise ValueError(named)
                self.map_attr(attr)
            except ValueError:
                raise diag.error(o, f"'{name}' has an attribute '{named}' holding a narrow "
                                 "float type that mxlower-lower-narrow-floats-to-llvm cannot "
                                 "convert") from None
        if not narrow:
            for r in o.regions:
                for b in r.blocks:
                    if any(narrow_name(self.elem(a.type)) for a in b.arguments):
                        narrow = ["block argument"]
            if not narrow:
                return None
        dialect = name.split(".")[0]
        what = narrow[0]
        if name in _BIT_WIDTH_OPS and any(FLOAT_TYPES[n].is_subbyte for n in narrow
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

    def lower_conversion(self, o: Any, src: str, dst: str, roundmode: str = "even") -> None:
        ir, arith = self.ir, self.arith
        x = o.operands[0]
        with ir.InsertionPoint(o), o.location:
            b = int_builders.ArithBuilder(ir, arith, x.type)
            if self.via_f32 and src in ("bf16", "f16") and is_narrow_float(dst):  # exact
                x, src = arith.ExtFOp(with_element_type(ir, x.type, "f32"), x).result, "f32"
            y = emit_conversion(b, x, src, dst, roundmode=roundmode)
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
