"""The MX format table (docs/semantics.md section 1) and the narrow element types behind it.

:data:`FORMATS` holds the MX block formats: element type, emax_elem, max_elem, default block
size, scale type.  The element and scale types' codec descriptions live in the one scalar-type
table, :mod:`mxlower.types`; :data:`FLOAT_TYPES`, :data:`WIDE_TYPES`, :class:`FloatType` and
:func:`float_type` are re-exported from there for existing callers.

Look-ups: :func:`get_format` by name, :func:`formats_for_element` by element type,
:func:`float_type` by MLIR spelling or ml_dtypes name.

The general model of section 10 (any number format, scaling and rounding) is in
:mod:`mxlower.numbers`; :func:`number`, :func:`scale` and :func:`datatype` are re-exported
here, and :data:`DATATYPES` holds the predefined datatypes of section 10.4: every format above
as a datatype (``mxfp8_e4m3`` = ``e4m3fn`` with ``e8m0_t32`` scales, ``nvfp4`` = ``e2m1fo``
with ``e4m3fn_t16``, ...), ``mxint4``, ``bfp16``, the short aliases ``mxfp8e4`` ...
``mxfp4e2``, and the unscaled MLIR f8 types.  :func:`get_datatype` resolves a name or a
``number[:scale]`` code.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from mxlower import types
from mxlower.numbers import Datatype, NumberSpec, ScaleSpec, SpecError, datatype, number, scale
from mxlower.types import FLOAT_TYPES, WIDE_TYPES, FloatType, float_type

__all__ = [
    "DATATYPES",
    "Datatype",
    "FLOAT_TYPES",
    "FORMATS",
    "MAX_BLOCK_SIZE",
    "NumberSpec",
    "ScaleSpec",
    "UnknownNameError",
    "SpecError",
    "datatype",
    "get_datatype",
    "number",
    "scale",
    "FloatType",
    "MXFormat",
    "MX_SCALE_MODE_OF",
    "SCALEMODE_OF",
    "SCALE_MODES",
    "WIDE_TYPES",
    "block_datatype",
    "float_type",
    "format_of",
    "formats_for_element",
    "last_axis_format",
    "mx_quantize_of",
    "why_not_format",
    "get_format",
]

SCALE_MODES = ("floor", "rceil", "nearest")
#: each section-3 scale mode as section 10's (docs/semantics.md 10.3: floor is max)
SCALEMODE_OF = {"floor": "max", "rceil": "rceil", "nearest": "nearest"}


@dataclasses.dataclass(frozen=True)
class MXFormat:
    """One row of docs/semantics.md section 1."""

    name: str
    element: str  #: MLIR element type spelling ("f8E4M3FN", ..., "i8" for mxint8)
    emax_elem: int | None  #: None for nvfp4 (its scale is not a power of two)
    max_elem: float
    block_size: int  #: default block size
    scale: str  #: MLIR scale type spelling
    global_scale: bool = False  #: takes an optional f32 per-tensor scale (nvfp4)

    @property
    def datatype(self) -> Datatype:
        """The format as a datatype of docs/semantics.md section 10 (its default block size
        along the last dimension; :func:`block_datatype` for others)."""
        return DATATYPES[self.name]

    @property
    def bits(self) -> int:
        """The element bit width (from :mod:`mxlower.types`)."""
        return types.scalar(self.element).bits

    @property
    def element_type(self) -> FloatType | None:
        """The element's codec description (None for mxint8's i8)."""
        return FLOAT_TYPES.get(self.element)

    @property
    def element_dtype(self) -> np.dtype:
        """The NumPy / ml_dtypes dtype of one element (int8 for mxint8)."""
        return types.dtype(self.element)

    @property
    def scale_dtype(self) -> np.dtype:
        """The ml_dtypes dtype of one scale."""
        return types.dtype(self.scale)

    @property
    def value_exponents(self) -> tuple[int, int]:
        """(q, t): every value of a block whose e8m0 scale code is c is a multiple of
        2^(q + c) and at most 2^(t + c) in magnitude (the element type's smallest subnormal,
        mxint8's 2^-6, and 2^(emax_elem + 1), the scale's bias included; code 255, NaN,
        gives a t beyond any use).  nvfp4, whose scales are not powers of two: c = 0, its
        values being multiples of 0.5 * 2^-9 below 6 * 448 < 2^12 whatever the scales.  The
        bounds of the scaled dot's run-time range test (mxlower.lowering.mx_math, and the
        fused dot kernel's own)."""
        if self.is_nvfp4:
            return -10, 12
        t = self.element_type
        return (-6 if self.is_int else 1 - t.bias - t.man_bits) - 127, self.emax_elem + 1 - 127

    @property
    def is_int(self) -> bool:
        """mxint8: i8 codes meaning code * 2^-6."""
        return self.element == "i8"

    @property
    def is_nvfp4(self) -> bool:
        """nvfp4: E4M3 block scales (not powers of two) and an optional global scale."""
        return self.scale == "f8E4M3FN"

    def bytes_per_block(self, block_size: int | None = None) -> float:
        """Packed storage of one block: elements at their bit width plus one scale byte."""
        k = block_size or self.block_size
        return k * self.bits / 8 + 1


FORMATS: dict[str, MXFormat] = {
    f.name: f
    for f in (
        MXFormat("mxfp8_e4m3", "f8E4M3FN", 8, 448.0, 32, "f8E8M0FNU"),
        MXFormat("mxfp8_e5m2", "f8E5M2", 15, 57344.0, 32, "f8E8M0FNU"),
        MXFormat("mxfp6_e3m2", "f6E3M2FN", 4, 28.0, 32, "f8E8M0FNU"),
        MXFormat("mxfp6_e2m3", "f6E2M3FN", 2, 7.5, 32, "f8E8M0FNU"),
        MXFormat("mxfp4_e2m1", "f4E2M1FN", 2, 6.0, 32, "f8E8M0FNU"),
        MXFormat("mxint8", "i8", 0, 127.0 / 64.0, 32, "f8E8M0FNU"),
        MXFormat("nvfp4", "f4E2M1FN", None, 6.0, 16, "f8E4M3FN", global_scale=True),
    )
}


#: the largest block size accepted anywhere (the API, the reference, the ``mx`` verifier): a
#: block is a run of one dimension, and the kernels and IR index it with 32-bit integers
MAX_BLOCK_SIZE = 2**31 - 1


class UnknownNameError(ValueError, KeyError):
    """A format or type name that names nothing: a ValueError saying which names exist (and a
    KeyError, as it was before, for callers that catch that)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def get_format(name: str, what: str = "") -> MXFormat:
    """An MX format by name; :class:`UnknownNameError` naming the known formats otherwise
    (prefixed by ``what``, e.g. ``"quantize: argument 'format'"``, when given)."""
    try:
        return FORMATS[name]
    except (KeyError, TypeError):  # TypeError: an unhashable name
        known = ", ".join(FORMATS)
        raise UnknownNameError(f"{what + ': ' if what else ''}unknown MX format {name!r} "
                               f"(known: {known})") from None


def formats_for_element(element: str, scale: str | None = None) -> list[MXFormat]:
    """The formats whose element type is ``element`` (and scale type ``scale`` when given)."""
    return [f for f in FORMATS.values()
            if f.element == element and (scale is None or f.scale == scale)]


def _format_datatype(f: MXFormat) -> Datatype:
    scale_code = f"{number(f.scale).code}_t{f.block_size}"
    return datatype(number(f.element if not f.is_int else "int8"), scale_code, f.name)


def block_datatype(f: MXFormat, block_size: int | None = None, axis: int = -1, *,
                   global_scale: bool = False) -> Datatype:
    """``f`` as a section-10 datatype with blocks of ``block_size`` (default the format's)
    along ``axis``: the datatype the oracle computes with.  Any block size the MX ops accept
    (1 to :data:`MAX_BLOCK_SIZE`), not only the powers of two a parsed tile code may name
    (``e8m0_t32``).  ``global_scale`` (nvfp4): two-level scaling, an f32 tensor scale over the
    block scales (``e2m1fo:e4m3fn_t16_gf32``)."""
    base = DATATYPES[f.name]
    k = f.block_size if block_size is None else int(block_size)
    if global_scale and not f.global_scale:
        raise ValueError(f"format '{f.name}' takes no global scale (only nvfp4 does)")
    tiles = dataclasses.replace(base.scale, kind="tile", tile=(k,), dims=(axis,),
                                tensor=number("f32") if global_scale else None)
    return dataclasses.replace(base, scale=tiles)


def _matching_format(dt: Datatype) -> MXFormat | None:
    """The MX format whose element and scale number specs ``dt`` has (``dt`` scaled)."""
    for f in FORMATS.values():
        base = DATATYPES[f.name]
        if dt.number == base.number and dt.scale.number == base.scale.number:
            return f
    return None


def format_of(dt: Datatype) -> tuple[MXFormat, int, int] | None:
    """``(format, block size, blocked dimension)`` when ``dt`` is an MX format's datatype
    (:func:`block_datatype`'s inverse): the format's element and scale number specs, 1D tiles
    of any size, no zero point, and a tensor level only where the format has a global scale
    (nvfp4), no subtiles.  ``bfp16`` (int8 with ``e8m0_t8``) is mxint8 with blocks of 8.
    None otherwise."""
    s = dt.scale
    if s is None or s.kind != "tile" or s.zero_point is not None or s.subtile:
        return None
    f = _matching_format(dt)
    if f is None or s.tensor is not None and not f.global_scale:
        return None
    return f, s.tile[0], s.dims[0]


#: section 10's names of the section-3 scale modes (:data:`SCALEMODE_OF` inverted)
MX_SCALE_MODE_OF = {v: k for k, v in SCALEMODE_OF.items()}


def mx_quantize_of(dt: Datatype, roundmode: str,
                   scalemode: str) -> tuple[MXFormat, int, int, str] | None:
    """``(format, block size, blocked dimension, section 3's scale mode)`` when casting or
    quantizing to ``dt`` with section 10's ``roundmode`` / ``scalemode`` is an MX format's
    quantize: :func:`format_of` names a format, ``roundmode`` is "even" and ``scalemode``
    one of the MX scale rules (max, rceil, nearest; nvfp4's float scales only max, its
    "floor").  None otherwise.  The one rule by which the ops, the kernels and the JAX API
    send such a datatype to the format's recipe."""
    m = format_of(dt)
    mode = MX_SCALE_MODE_OF.get(scalemode)
    if m is None or roundmode != "even" or mode is None or m[0].is_nvfp4 and mode != "floor":
        return None
    return (*m, mode)


def last_axis_format(dt: Datatype, why_last: str) -> tuple[MXFormat, int]:
    """``(format, block size)`` of an MX format's datatype whose tiles run along the last
    dimension, as the fused kernels read one; ValueError otherwise, saying why (``why_last``
    explains the last-dimension rule to the caller's user)."""
    m = format_of(dt)
    if m is None:
        raise ValueError(f"datatype {dt.code} is not an MX format's: {why_not_format(dt)}")
    fmt, k, dim = m
    if dim != -1:
        raise ValueError(f"datatype {dt.code} blocks dimension {dim}; {why_last}")
    return fmt, k


def why_not_format(dt: Datatype) -> str | None:
    """Why ``dt`` is no MX format's datatype (where :func:`format_of` gives None), as a
    phrase for an error message; None when it is one."""
    s = dt.scale
    if s is None:
        return ("it is unscaled (an MX format's datatype has block scales, e.g. "
                "'e4m3fn:e8m0_t32')")
    if s.zero_point is not None:
        return f"its scales have a zero point ({s.zero_point.code}); an MX format's have none"
    if s.kind != "tile":
        what = (f"2D tiles ('_t{s.tile[0]}x{s.tile[1]}')" if s.kind == "tile2d" else
                "a scale per channel ('_t0')" if s.kind == "channel" else
                "one scale for the whole tensor")
        return f"it has {what}; an MX format's scales are per 1D block (a tile such as '_t32')"
    if s.subtile:
        return (f"its blocks have subtiles with offsets ('_s{'x'.join(map(str, s.subtile))}"
                f"o{s.offset_bits}'); an MX format's blocks have one scale each")
    f = _matching_format(dt)
    if f is not None:
        if s.tensor is not None and not f.global_scale:
            return (f"it has a tensor scale ('_gf32') over {f.name}'s blocks; of the MX "
                    "formats only nvfp4 has two-level scaling ('e2m1fo:e4m3fn_t16_gf32')")
        return None
    pairs = ", ".join(f"{n} = {d.number.code} + {d.scale.number.code}"
                      for n, d in ((f.name, DATATYPES[f.name]) for f in FORMATS.values()))
    return (f"no MX format has {dt.number.code} elements with {s.number.code} scales "
            f"({pairs})")


#: The predefined datatypes of docs/semantics.md section 10.4, by name.
DATATYPES: dict[str, Datatype] = {f.name: _format_datatype(f) for f in FORMATS.values()}
DATATYPES.update({
    "mxint4": datatype("int4", "e8m0_t32", "mxint4"),
    "bfp16": datatype("int8", "e8m0_t8", "bfp16"),
    # shared micro-exponents (Rouhani et al. 2023, "With Shared Microexponents, A Little
    # Shifting Goes a Long Way", ISCA '23, arXiv:2302.08007, its table of MX formats): blocks of
    # k1 = 16 with an 8-bit shared exponent (d1 = 8), subblocks of k2 = 2 with a 1-bit
    # micro-exponent (d2 = 1), and sign-magnitude elements of m = 7, 4, 2 magnitude bits
    # (no implicit bit): intK with K = m + 1, read as fixed point (docs/semantics.md 10.3)
    "mx9": datatype("int8", "e8m0_t16_s2o1", "mx9"),
    "mx6": datatype("int5", "e8m0_t16_s2o1", "mx6"),
    "mx4": datatype("int3", "e8m0_t16_s2o1", "mx4"),
    **{alias: dataclasses.replace(DATATYPES[target], name=alias) for alias, target in (
        ("mxfp8e5", "mxfp8_e5m2"), ("mxfp8e4", "mxfp8_e4m3"), ("mxfp6e3", "mxfp6_e3m2"),
        ("mxfp6e2", "mxfp6_e2m3"), ("mxfp4e2", "mxfp4_e2m1"))},
    **{t: datatype(t, None, t) for t in (
        "f8E4M3FN", "f8E5M2", "f8E4M3", "f8E3M4", "f8E4M3FNUZ", "f8E5M2FNUZ",
        "f8E4M3B11FNUZ", "f8E8M0FNU") if t in types.SCALARS},
})


def get_datatype(name: str | Datatype) -> Datatype:
    """A datatype by predefined name (:data:`DATATYPES`) or as ``number[:scale]`` codes
    (``"e5m6:e8m0_t32"``, ``"int8"``); :class:`SpecError` otherwise."""
    if isinstance(name, Datatype):
        return name
    if name in DATATYPES:
        return DATATYPES[name]
    head, sep, tail = name.partition(":")
    try:
        return datatype(head, tail if sep else None)
    except SpecError as e:
        known = ", ".join(DATATYPES)
        raise SpecError(f"{e} (predefined datatypes: {known})") from None
