"""``mxlower-cast``: compare datatypes on your own tensor (docs/semantics.md section 10).

    mxlower-cast x.npy --number e3m4 --scale e8m0_t32 --roundmode stochastic --seed 0
    mxlower-cast w.npz --key layer0 -d mxfp8_e4m3,mxfp4_e2m1,nvfp4,e5m6:e8m0_t32 --json
    mxlower-cast x.npy --number e2m1fo,e3m2fo --scale e8m0_t32,e8m0_t16,none --plot err.svg

Every datatype is applied to the input with the exact oracle :func:`mxlower.reference.cast`
(the virtual cast: the quantized-then-dequantized value in the input's dtype) and the error
statistics of :func:`statistics` are printed, one row per datatype x rounding mode x scale mode,
as a table or (``--json``) a JSON document.  ``--plot FILE`` draws the error distribution:
``.svg`` is written by this module itself (no plotting library needed); other extensions
(``.png``, ``.pdf``) need matplotlib.  Datatypes whose error ranges differ by more than a factor
of 4 get panels of their own x range (:func:`panels`), so a precise format is not squeezed into
a few bins by a coarse one; the canvas widens to hold the longest legend label.

Bad input -- a missing or unreadable file, an array that is not float32/bfloat16/float16/float64
data, an empty array, an unknown spec code, a combination section 10 does not define, a tile
that does not fit the input's shape -- is one ``mxlower-cast: error: ...`` line and exit code 1,
checked before anything is computed or written.  This tool imports NumPy and ml_dtypes only
(never JAX or MLIR).
"""

from __future__ import annotations

import argparse
import dataclasses
import html
import io
import json
import math
import os
import sys
from collections.abc import Sequence

import ml_dtypes
import numpy as np

from mxlower import reference, types
from mxlower.diagnostics import InputError
from mxlower.execution.arrays import load_arrays
from mxlower.formats import DATATYPES, Datatype, SpecError, get_datatype
from mxlower.numbers import ROUND_MODES, SCALE_MODES, datatype
from mxlower.tools.source import ArgParser, check_output_path, cli_main, write_output

__all__ = ["Row", "compare", "load_input", "main", "panels", "parse_datatypes", "statistics",
           "svg_plot"]

PROG = "mxlower-cast"

_F64 = np.dtype(np.float64)
_F32 = np.dtype(np.float32)
_BF16 = np.dtype(ml_dtypes.bfloat16)
#: what the tool reads, by dtype; a 2-byte untyped array (``|V2``) is bfloat16, as
#: ``np.save`` writes an ml_dtypes bfloat16 array
_INPUT = {_F32: "float32", _BF16: "bfloat16", np.dtype(np.float16): "float16", _F64: "float64"}

STATISTICS_HELP = """\
statistics (over the elements whose input x is finite; y is the cast value, error = y - x,
computed in float64; elements whose y is not finite -- a tile holding NaN/Inf, an overflow of
the dequantized f32 value -- are left out of the first four and counted by 'nonfinite'):
  bits         bits stored per value: element bits + (scale bits + zero-point bits) / values
               per scale + offset bits / values per subtile
  RMSE         sqrt(mean(error^2))
  max abs      max |error|
  max rel      max |error| / |x| over the elements with x != 0
  SQNR dB      10 log10(sum x^2 / sum error^2); inf when every error is 0
  saturated    fraction of elements beyond the range their tile can represent (|x| above
               the largest magnitude; for uint data, outside [lowest, highest] value; for an
               unscaled exponent type, also 0 < x < its smallest value): they were clipped
  flushed      fraction of elements with x != 0 and y == 0
  nonfinite    fraction of elements with a finite x and a non-finite y
Fractions are of the finite inputs.  JSON writes inf and nan as the strings "inf", "-inf",
"nan".  float64 input is rounded to float32 (the model's input) before the cast; its errors
are measured against the float64 values.  Stochastic rounding draws one uint32 per element
from numpy.random.default_rng(SEED) (the same bits for every datatype)."""


def build_parser() -> argparse.ArgumentParser:
    p = ArgParser(prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
                  description="Cast a tensor to one or more datatypes of docs/semantics.md section "
                  "10 (TensorCast's grammar; docs/compat.md lists where other libraries' "
                  "results differ) with mxlower's exact oracle and print the error "
                  "statistics side by side.", epilog=STATISTICS_HELP)
    p.add_argument("input", nargs="?",
                   help=".npy or .npz file of float32, bfloat16, float16 or float64 data")
    p.add_argument("--key", help="the array of an .npz file (needed when it holds several)")
    p.add_argument("-d", "--datatype", action="append", default=[], metavar="LIST",
                   help="comma list of predefined datatypes (mxfp8_e4m3, nvfp4, mxint4, "
                   "bfp16, f8E4M3, ...; see --list-datatypes) or number[:scale] codes "
                   "(e5m6:e8m0_t32); repeatable")
    p.add_argument("-n", "--number", action="append", default=[], metavar="LIST",
                   help="comma list of number specs (e3m4, e2m1fo, int4, e4m3b8fnuz, ...); "
                   "each is combined with every --scale; repeatable")
    p.add_argument("-s", "--scale", action="append", default=[], metavar="LIST",
                   help="comma list of scale specs (e8m0_t32, e4m3fn_t16, e8m0_t32x32, "
                   "float32_uint8_t0, ...; 'none' for unscaled) for every --number "
                   "(default: none); repeatable")
    p.add_argument("-r", "--roundmode", default="even", metavar="LIST",
                   help=f"comma list of rounding modes ({', '.join(ROUND_MODES)}; default even)")
    p.add_argument("--scalemode", default="max", metavar="LIST",
                   help=f"comma list of scale modes of exponent scales ({', '.join(SCALE_MODES)};"
                   " default max); other datatypes get one row")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the random bits of stochastic rounding (default 0)")
    p.add_argument("--json", action="store_true",
                   help="print a JSON document instead of the table")
    p.add_argument("--plot", metavar="FILE",
                   help="draw the error distribution: .svg written directly; .png/.pdf with "
                   "matplotlib")
    p.add_argument("--list-datatypes", action="store_true",
                   help="list the predefined datatypes and exit")
    return p


# ----------------------------------------------------------------------------- arguments


def _items(lists: Sequence[str], what: str) -> list[str]:
    out = []
    for text in lists:
        for item in text.split(","):
            item = item.strip()
            if not item:
                raise InputError(f"empty item in the {what} list '{text}'")
            out.append(item)
    return out


def parse_datatypes(datatypes: Sequence[str] = (), numbers: Sequence[str] = (),
                    scales: Sequence[str] = ()) -> list[Datatype]:
    """The datatypes named by comma lists: predefined names or ``number[:scale]`` codes, then
    every number spec with every scale spec ("none": unscaled).  Duplicates are dropped;
    :class:`InputError` for a bad code or combination."""
    out: list[Datatype] = []
    try:
        for name in _items(datatypes, "--datatype"):
            dt = get_datatype(name)
            if dt.name is None and name != dt.code:  # a type name: show it as written
                dt = dataclasses.replace(dt, name=name)
            out.append(dt)
        nums = _items(numbers, "--number")
        scs = _items(scales, "--scale") or ["none"]
        if scales and not numbers:
            raise InputError("--scale needs --number (or name whole datatypes with --datatype)")
        for n in nums:
            for s in scs:
                out.append(datatype(n, None if s.lower() == "none" else s))
    except SpecError as e:
        raise InputError(str(e)) from None
    unique: dict[str, Datatype] = {}
    for dt in out:
        unique.setdefault(f"{dt}|{dt.code}", dt)
    return list(unique.values())


def _modes(text: str, known: Sequence[str], what: str) -> list[str]:
    modes = list(dict.fromkeys(_items([text], what)))
    for m in modes:
        if m not in known:
            raise InputError(f"unknown {what} '{m}' (known: {', '.join(known)})")
    return modes


def load_input(path: str, key: str | None = None) -> tuple[np.ndarray, str]:
    """The array of ``path`` (``.npy``, or ``.npz`` with ``key``) and its display name;
    :class:`InputError` for a missing or unreadable file, a missing key, an array that is not
    float32/bfloat16/float16/float64 data, an empty array."""
    arrays = load_arrays([path])
    if path.endswith(".npz"):
        keys = [name[len(path) + 1:-1] for name, _ in arrays]
        if key is None:
            if len(arrays) != 1:
                raise InputError(f"'{path}' holds {len(arrays)} arrays "
                                 f"({', '.join(keys) or 'none'}): choose one with --key")
            name, a = arrays[0]
        elif key in keys:
            name, a = arrays[keys.index(key)]
        else:
            raise InputError(f"'{path}' has no array '{key}' (it has: "
                             f"{', '.join(keys) or 'none'})")
    else:
        if key is not None:
            raise InputError(f"--key selects an array of an .npz file; '{path}' is not one")
        name, a = arrays[0]
    if a.dtype == np.dtype("V2"):
        a = a.view(_BF16)
    if a.dtype not in _INPUT:
        raise InputError(f"{name} holds {a.dtype} data; {PROG} takes float32, bfloat16, "
                         "float16 or float64")
    if a.size == 0:
        raise InputError(f"{name} is empty (shape {a.shape}): nothing to cast")
    if a.dtype == _F64:
        with np.errstate(over="ignore"):
            big = np.isfinite(a) & ~np.isfinite(a.astype(_F32))
        if big.any():
            raise InputError(f"{name} holds float64 values beyond float32's range (e.g. "
                             f"{a[big].flat[0]!r}); the model computes in float32")
    return a, name


def check_fits(dt: Datatype, shape: tuple[int, ...]) -> None:
    """InputError when ``dt``'s scale tiles do not fit an input of ``shape``."""
    if dt.scale is None:
        return
    try:
        if dt.scale.kind != "tensor" and not shape:
            raise SpecError(f"scale '{dt.scale.code}' needs an input with dimensions")
        dt.scale.scales_shape(tuple(shape))
    except SpecError as e:
        raise InputError(f"datatype {_label(dt)} on shape {list(shape)}: {e}") from None


def _label(dt: Datatype) -> str:
    return dt.name if dt.name and dt.name != dt.code else dt.code


# ----------------------------------------------------------------------------- statistics


@dataclasses.dataclass
class Row:
    """One compared cast and its statistics (see :data:`STATISTICS_HELP`)."""

    datatype: Datatype
    roundmode: str
    scalemode: str | None
    bits: float
    stats: dict[str, float]
    error: np.ndarray  # error = y - x over the finite elements with a finite y (float64)

    @property
    def label(self) -> str:
        mode = self.roundmode + (f"/{self.scalemode}" if self.scalemode else "")
        return f"{_label(self.datatype)} {mode}"


def bits_per_value(dt: Datatype, shape: tuple[int, ...]) -> float:
    """Element bits plus the scale's (and zero point's) bits shared over its tile, plus the
    subtile offsets' bits shared over their subtile."""
    bits = float(dt.number.bits)
    s = dt.scale
    if s is not None:
        per = s.number.bits + (s.zero_point.bits if s.zero_point is not None else 0)
        bits += per / max(math.prod(s.tile_shape(tuple(shape))), 1)
        if s.subtile:
            bits += s.offset_bits / math.prod(s.subtile_shape(tuple(shape)))
    return bits


def _full(code: int, spec, shape) -> np.ndarray:
    """Stored codes of ``spec`` (its storage dtype), all ``code``."""
    dt = spec.dtype
    if dt.kind in "iu":
        return np.full(shape, code, dt)
    return np.full(shape, code, types.code_dtype(dt)).view(dt)


def _range(x32: np.ndarray, dt: Datatype, roundmode: str, scalemode: str,
           rbits) -> tuple[np.ndarray, np.ndarray]:
    """(lowest, highest) value each element's tile can represent (f64)."""
    n, s = dt.number, dt.scale
    if s is None:
        hi = float(reference.decode(_full(n.max_code, n, ()), n, dtype=_F32))
        lo = -hi if n.signed else float(reference.decode(_full(0, n, ()), n, dtype=_F32))
        return np.float64(lo), np.float64(hi)
    enc = reference.encode(x32, dt, None, roundmode, scalemode, rbits)
    kw = {"scales": enc.scales, "zero_points": enc.zero_points, "offsets": enc.offsets}
    hi = reference.decode(_full(n.max_code, n, x32.shape), dt, **kw).astype(_F64)
    if n.signed:
        return -hi, hi
    return reference.decode(_full(0, n, x32.shape), dt, **kw).astype(_F64), hi


def statistics(x: np.ndarray, y: np.ndarray, lo, hi, exp_type: bool = False) -> tuple[
        dict[str, float], np.ndarray]:
    """The statistics of :data:`STATISTICS_HELP` of the cast ``y`` of ``x`` (any float
    arrays of one shape), with ``lo``/``hi`` the representable range per element; returns
    them and the error array they were computed from."""
    x = np.asarray(x).astype(_F64)
    y = np.asarray(y).astype(_F64)
    fin = np.isfinite(x)
    n = int(fin.sum())
    xs, ys = x[fin], y[fin]
    lo = np.broadcast_to(lo, x.shape)[fin]
    hi = np.broadcast_to(hi, x.shape)[fin]
    good = np.isfinite(ys)
    err = ys[good] - xs[good]
    xg = xs[good]
    nan = float("nan")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if err.size:
            rmse = float(np.sqrt(np.mean(np.square(err))))
            max_abs = float(np.max(np.abs(err)))
            nz = xg != 0
            max_rel = float(np.max(np.abs(err[nz]) / np.abs(xg[nz]))) if nz.any() else 0.0
            noise = float(np.sum(np.square(err)))
            signal = float(np.sum(np.square(xg)))
            sqnr = math.inf if noise == 0 else (
                -math.inf if signal == 0 else 10 * math.log10(signal / noise))
        else:
            rmse = max_abs = max_rel = sqnr = nan
        below = (xs > 0) & (xs < lo) if exp_type else xs < lo
        sat = (xs > hi) | below
    frac = (lambda m: float(np.count_nonzero(m)) / n) if n else (lambda m: nan)
    stats = {"rmse": rmse, "max_abs_error": max_abs, "max_rel_error": max_rel,
             "sqnr_db": sqnr, "saturated": frac(sat), "flushed_to_zero": frac((xs != 0) & (ys == 0)),
             "nonfinite_results": frac(~good)}
    return stats, err


def compare(x: np.ndarray, datatypes: Sequence[Datatype], roundmodes: Sequence[str] = ("even",),
            scalemodes: Sequence[str] = ("max",), seed: int = 0) -> list[Row]:
    """Cast ``x`` (float32/bfloat16/float16/float64) to every datatype with every rounding
    mode (and every scale mode, for exponent scales) with :func:`mxlower.reference.cast`, and
    measure each against ``x``."""
    x32 = x.astype(_F32) if x.dtype == _F64 else x
    rbits = None
    if "stochastic" in roundmodes:
        rbits = np.random.default_rng(seed).integers(0, 1 << 32, size=x.shape, dtype=np.uint32)
    rows = []
    for dt in datatypes:
        modes = scalemodes if dt.scale is not None and dt.scale.power_of_two else (None,)
        for rm in roundmodes:
            r = rbits if rm == "stochastic" else None
            for sm in modes:
                try:
                    y = reference.cast(x32, dt, None, rm, sm or "max", r)
                    lo, hi = _range(x32, dt, rm, sm or "max", r)
                except (SpecError, ValueError) as e:
                    raise InputError(f"datatype {_label(dt)}: {e}") from None
                stats, err = statistics(x, y, lo, hi, exp_type=dt.number.kind == "exp")
                rows.append(Row(dt, rm, sm, bits_per_value(dt, x.shape), stats, err))
    return rows


# ----------------------------------------------------------------------------- output


def _num(v: float) -> str:
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.4g}"


def format_table(rows: Sequence[Row], header: str) -> str:
    cols = ["datatype", "round", "scale", "bits", "RMSE", "max abs", "max rel", "SQNR dB",
            "saturated", "flushed", "nonfinite"]
    body = []
    for r in rows:
        s = r.stats
        sqnr = "inf" if s["sqnr_db"] == math.inf else (
            "nan" if math.isnan(s["sqnr_db"]) else f"{s['sqnr_db']:.2f}")
        body.append([_label(r.datatype), r.roundmode, r.scalemode or "-", f"{r.bits:.4g}",
                     _num(s["rmse"]), _num(s["max_abs_error"]), _num(s["max_rel_error"]), sqnr,
                     _num(s["saturated"]), _num(s["flushed_to_zero"]),
                     _num(s["nonfinite_results"])])
    widths = [max(len(c), *(len(b[i]) for b in body)) for i, c in enumerate(cols)]
    lines = [header, "  ".join(c.ljust(w) if i < 3 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(cols, widths)))]
    for b in body:
        lines.append("  ".join(v.ljust(w) if i < 3 else v.rjust(w)
                               for i, (v, w) in enumerate(zip(b, widths))))
    return "\n".join(lines) + "\n"


def _json_value(v: float) -> float | str:
    return _num(v) if not math.isfinite(v) else v


def format_json(rows: Sequence[Row], meta: dict) -> str:
    results = []
    for r in rows:
        results.append({"datatype": _label(r.datatype), "code": r.datatype.code,
                        "roundmode": r.roundmode, "scalemode": r.scalemode,
                        "bits_per_value": r.bits,
                        **{k: _json_value(v) for k, v in r.stats.items()}})
    return json.dumps({**meta, "results": results}, indent=2, allow_nan=False) + "\n"


# ----------------------------------------------------------------------------- plot

_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
           "#17becf", "#7f7f7f", "#bcbd22")
#: past ten series the colors repeat with another dash pattern (SVG stroke-dasharray)
_DASHES = ("", "6 3", "2 2", "8 3 2 3")


def _style(i: int) -> tuple[str, str]:
    """(color, dash pattern) of series ``i``: unique for the first 40 series."""
    return _COLORS[i % len(_COLORS)], _DASHES[(i // len(_COLORS)) % len(_DASHES)]
BINS = 81


#: rows whose error ranges lie within this factor of each other share a panel
PANEL_SPREAD = 4.0


def _error_range(r: Row) -> float:
    """The 99.9th percentile of a row's |error| (0 for a row without errors)."""
    return float(np.quantile(np.abs(r.error), 0.999)) if r.error.size else 0.0


def histograms(rows: Sequence[Row], bins: int = BINS) -> tuple[np.ndarray, list[np.ndarray]]:
    """Bin edges over [-R, R] (R: the largest 99.9th percentile of |error| over the rows) and
    each row's fraction of elements per bin; errors beyond R count in the edge bins."""
    R = max([t for t in map(_error_range, rows) if t > 0], default=1.0)
    edges = np.linspace(-R, R, bins + 1)
    out = []
    for r in rows:
        if not r.error.size:
            out.append(np.zeros(bins))
            continue
        h, _ = np.histogram(np.clip(r.error, -R, R), edges)
        out.append(h / r.error.size)
    return edges, out


def panels(rows: Sequence[Row], bins: int = BINS,
           spread: float = PANEL_SPREAD) -> list[tuple[list[int], np.ndarray, list[np.ndarray]]]:
    """The rows split into panels of similar error range, so that a precise format is not
    squeezed into a few bins by a coarse one: rows sorted by range go into one panel while the
    largest range is at most ``spread`` times the smallest (rows without errors join the panel
    of the smallest range).  Panels are ordered by their first row.  Returns, per panel, the
    row indices (in the given order) and :func:`histograms` of those rows."""
    ranges = [_error_range(r) for r in rows]
    groups: list[list[int]] = []
    for i in sorted((i for i, t in enumerate(ranges) if t > 0), key=ranges.__getitem__):
        if groups and ranges[i] <= spread * ranges[groups[-1][0]]:
            groups[-1].append(i)
        else:
            groups.append([i])
    zero = [i for i, t in enumerate(ranges) if t == 0]
    if zero:
        groups = [groups[0] + zero] + groups[1:] if groups else [zero]
    groups = sorted((sorted(g) for g in groups), key=lambda g: g[0])
    return [(g, *histograms([rows[i] for i in g], bins)) for g in groups]


#: SVG geometry: font size, an upper bound of the width of one character of it (sans-serif),
#: legend line height, plot width, panel height, margins
_FONT, _CHAR_W, _LEG_DY, _PW, _PH = 12, 7.6, 18, 480, 240
_LEFT, _TOP, _GAP, _BOTTOM, _LEG_PAD = 70, 40, 64, 20, 56


def text_width(text: str, font_size: float = _FONT) -> float:
    """A generous estimate of the rendered width of ``text`` in the SVG's sans-serif font."""
    return len(text) * _CHAR_W * font_size / _FONT


def svg_plot(rows: Sequence[Row], title: str, bins: int = BINS) -> str:
    """A self-contained SVG of the error histograms, one outlined series per row, with axes,
    ticks and a legend beside each panel (:func:`panels`: formats of very different precision
    get panels of their own x range).  The canvas grows to hold the longest label and every
    legend entry."""
    groups = panels(rows, bins)
    labels = [r.label for r in rows]
    leg_w = _LEG_PAD + max([text_width(t) for t in labels] + [80.0]) + 12
    W = math.ceil(_LEFT + _PW + leg_w)
    heights = [max(_PH, _LEG_DY * len(g) + 20) for g, _, _ in groups]
    H = math.ceil(_TOP + sum(heights) + _GAP * len(groups) + _BOTTOM)
    W = max(W, math.ceil(text_width(title, 14) + 40))
    esc = html.escape
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
             f'viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="{_FONT}">',
             f'<rect width="{W}" height="{H}" fill="white"/>',
             f'<text x="{W / 2:.1f}" y="22" text-anchor="middle" font-size="14">'
             f'{esc(title)}</text>']
    top = _TOP
    for (idx, edges, hists), ph in zip(groups, heights):
        parts += _svg_panel([rows[i] for i in idx], idx, edges, hists, top, ph)
        top += ph + _GAP
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _svg_panel(rows: Sequence[Row], idx: Sequence[int], edges: np.ndarray,
               hists: Sequence[np.ndarray], top: float, ph: float) -> list[str]:
    """One panel of :func:`svg_plot` at ``top``, ``ph`` high: frame, ticks, axis labels, the
    series (colored by their index in the whole plot) and their legend to the right."""
    left, pw = _LEFT, _PW
    ymax = max([float(h.max()) for h in hists] + [1e-12]) * 1.05
    lo, hi = float(edges[0]), float(edges[-1])

    def px(v: float) -> float:
        return left + (v - lo) / (hi - lo) * pw

    def py(v: float) -> float:
        return top + ph - v / ymax * ph

    esc = html.escape
    parts = [f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" '
             'stroke="black"/>']
    for v in np.linspace(lo, hi, 5):
        parts.append(f'<line x1="{px(v):.1f}" y1="{top + ph}" x2="{px(v):.1f}" '
                     f'y2="{top + ph + 5}" stroke="black"/>')
        parts.append(f'<text x="{px(v):.1f}" y="{top + ph + 18}" text-anchor="middle">'
                     f'{v:.3g}</text>')
    for v in np.linspace(0, ymax, 5):
        parts.append(f'<line x1="{left - 5}" y1="{py(v):.1f}" x2="{left}" y2="{py(v):.1f}" '
                     'stroke="black"/>')
        parts.append(f'<text x="{left - 8}" y="{py(v) + 4:.1f}" text-anchor="end">'
                     f'{v:.3g}</text>')
    parts.append(f'<text x="{left + pw / 2:.1f}" y="{top + ph + 36}" text-anchor="middle">'
                 f'error = cast - input (beyond +-{hi:.3g} counted at the edges)</text>')
    mid = top + ph / 2
    parts.append(f'<text x="16" y="{mid:.1f}" text-anchor="middle" '
                 f'transform="rotate(-90 16 {mid:.1f})">fraction of elements</text>')
    for k, (i, r, h) in enumerate(zip(idx, rows, hists)):
        color, dash = _style(i)
        dash = f' stroke-dasharray="{dash}"' if dash else ""
        pts = [f"{px(lo):.1f},{py(0):.1f}"]
        for j, v in enumerate(h):
            pts.append(f"{px(edges[j]):.1f},{py(v):.1f}")
            pts.append(f"{px(edges[j + 1]):.1f},{py(v):.1f}")
        pts.append(f"{px(hi):.1f},{py(0):.1f}")
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5"{dash} '
                     f'points="{" ".join(pts)}"><title>{esc(r.label)}</title></polyline>')
        y = top + 10 + _LEG_DY * k
        x0 = left + pw + 12
        parts.append(f'<line x1="{x0}" y1="{y}" x2="{x0 + 24}" y2="{y}" '
                     f'stroke="{color}" stroke-width="2"{dash}/>')
        parts.append(f'<text x="{x0 + 30}" y="{y + 4}">{esc(r.label)}</text>')
    return parts


def _matplotlib_plot(rows: Sequence[Row], title: str, path: str) -> bytes:
    import matplotlib  # lazy: optional and slow to import; only non-SVG plots need it
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: as above

    groups = panels(rows)
    fig, axes = plt.subplots(len(groups), 1, figsize=(9, 1 + 3.5 * len(groups)), squeeze=False)
    for ax, (idx, edges, hists) in zip(axes[:, 0], groups):
        for i, h in zip(idx, hists):
            color, dash = _style(i)
            ax.stairs(h, edges, label=rows[i].label, color=color,
                      linestyle=(0, tuple(map(float, dash.split()))) if dash else "-")
        ax.set_xlabel(f"error = cast - input (beyond +-{edges[-1]:.3g} counted at the edges)")
        ax.set_ylabel("fraction of elements")
        ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle(title)
    buf = io.BytesIO()
    fig.savefig(buf, format=os.path.splitext(path)[1][1:].lower(), bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _check_plot(path: str) -> None:
    check_output_path(path)
    ext = os.path.splitext(path)[1].lower()
    if ext == ".svg":
        return
    try:
        import matplotlib  # noqa: F401  (lazy: optional, only for non-SVG plots)
    except ImportError:
        raise InputError(f"--plot {path}: writing {ext or 'that format'} needs matplotlib, "
                         "which is not installed; name an .svg file instead") from None


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    return cli_main(PROG, _main, argv)


def _main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.list_datatypes:
        for name, dt in DATATYPES.items():
            sys.stdout.write(f"{name:16} {dt.code}\n")
        return 0
    if args.input is None:
        raise InputError("no input file (a .npy or .npz file of float data)")
    if args.seed < 0:
        raise InputError(f"--seed must be a non-negative integer, got {args.seed}")
    if not (args.datatype or args.number):
        raise InputError("name at least one datatype: --datatype/-d or --number/-n")
    dts = parse_datatypes(args.datatype, args.number, args.scale)
    roundmodes = _modes(args.roundmode, ROUND_MODES, "rounding mode")
    scalemodes = _modes(args.scalemode, SCALE_MODES, "scale mode")
    if args.plot:
        _check_plot(args.plot)
    x, name = load_input(args.input, args.key)
    for dt in dts:
        check_fits(dt, x.shape)
    rows = compare(x, dts, roundmodes, scalemodes, args.seed)
    nonfinite = int(x.size - np.count_nonzero(np.isfinite(x.astype(_F64))))
    kind = _INPUT[x.dtype]
    stochastic = "stochastic" in roundmodes
    if args.plot:
        title = f"error distribution: {os.path.basename(name)}"
        if args.plot.lower().endswith(".svg"):
            write_output(args.plot, svg_plot(rows, title))
        else:
            write_output(args.plot, _matplotlib_plot(rows, title, args.plot))
    if args.json:
        meta = {"input": name, "dtype": kind, "shape": list(x.shape), "elements": int(x.size),
                "nonfinite_inputs": nonfinite, "seed": args.seed if stochastic else None}
        sys.stdout.write(format_json(rows, meta))
    else:
        header = (f"# {name}: {kind} {list(x.shape)}, {x.size} values"
                  + (f" ({nonfinite} not finite: left out)" if nonfinite else "")
                  + (f"; stochastic rounding bits from seed {args.seed}" if stochastic else ""))
        sys.stdout.write(format_table(rows, header))
    return 0
