"""docs/semantics.md: its section numbers stay put and its tables say what the code does."""

from __future__ import annotations

import re
from fractions import Fraction
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from mxlower import reference as R
from mxlower.formats import FLOAT_TYPES, FORMATS

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "semantics.md"
TEXT = DOC.read_text()

#: the section titles other files cite by number (they keep MX-SEMANTICS.md's numbering)
SECTIONS = {
    1: "Formats",
    2: "Plain conversions",
    3: "Quantize (MX formats)",
    4: "Quantize (nvfp4)",
    5: "Dequantize",
    6: "Scaled dot",
    7: "Interchange forms",
    8: "Sub-byte packing",
    9: "Bad input",
    10: "General number formats",
}


def _table(after: str) -> list[list[str]]:
    """The rows (cells stripped, header and rule dropped) of the first table after ``after``."""
    lines = TEXT[TEXT.index(after):].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split("|")])
    return rows


def _number(text: str) -> Fraction:
    """'448', '7.5', '127/64', '2^-9' as exact numbers."""
    text = text.replace("`", "")
    if m := re.fullmatch(r"2\^(-?\d+)", text):
        return Fraction(2) ** int(m.group(1))
    return Fraction(text)


def test_numbered_sections():
    found = {int(n): title for n, title in re.findall(r"^## (\d+)\. (.+)$", TEXT, flags=re.M)}
    assert found == SECTIONS


def test_every_citation_names_an_existing_section():
    """"docs/semantics.md section N" (or "sections N-M") anywhere in the repository."""
    cited = []
    for path in [*ROOT.glob("mxlower/**/*.py"), *ROOT.glob("*.md"), *ROOT.glob("docs/*.md"),
                 *ROOT.glob("dialect/*"), *ROOT.glob("passes/*.md"), *ROOT.glob("test/**/*")]:
        if not path.is_file() or path.suffix not in (".py", ".md", ".mlir", ""):
            continue
        for m in re.finditer(r"semantics\.md\)?`?,? sections? (\d+)(?:\s*(?:-|to)\s*(\d+))?",
                             path.read_text(errors="replace")):
            cited += [int(m.group(1))] + ([int(m.group(2))] if m.group(2) else [])
    assert cited, "no citation found: the pattern is out of date"
    assert set(cited) <= set(SECTIONS), sorted(set(cited) - set(SECTIONS))


def test_format_table_is_mxlower_formats():
    rows = _table("## 1. Formats")
    assert [r[0].strip("`") for r in rows] == list(FORMATS)
    for name, element, emax, max_elem, block, scale in rows:
        fmt = FORMATS[name.strip("`")]
        assert element.split()[0] == fmt.element
        assert (None if emax == "none" else int(emax)) == fmt.emax_elem
        assert _number(max_elem) == Fraction(fmt.max_elem)
        assert int(block) == fmt.block_size
        assert scale.split(",")[0] == fmt.scale


def test_type_table_is_mxlower_types():
    rows = {r[0]: r for r in _table("### 2.1 The types")}
    for name, t in FLOAT_TYPES.items():
        _, np_name, bits, em, bias, largest, smallest, *_ = rows[name]
        assert np_name == t.numpy_name and int(bits) == t.bits and int(bias) == t.bias
        assert [int(x) for x in re.findall(r"\d+", em)] == [t.exp_bits, t.man_bits]
        info = ml_dtypes.finfo(t.dtype)
        assert _number(largest) == Fraction(float(info.max))
        if t.subnormals:
            assert _number(smallest) == Fraction(float(info.smallest_subnormal))
        else:
            assert "none" in smallest and "2^-127" in smallest


@pytest.mark.parametrize("value, code", [
    (0.0, 0xFF), (-1.0, 0xFF), (1.5, 0x80), (1.4999999, 0x7F), (1.5 * 2.0 ** 127, 0xFF),
    (2.0 ** -127, 0x00), (2.0 ** -149, 0x00), (1.25 * 2.0 ** -127, 0x01),
    (1.75 * 2.0 ** -127, 0x01),
])
def test_section_2_5_e8m0_examples(value, code):
    got = R.bits(R.convert(np.array([value], np.float32), "f8E8M0FNU"))[0]
    assert got == code


def test_section_3_nearest_example():
    """The worked example of section 3: v = 2^-127 + 2^-150, taken exactly, is above
    2^-127, so E = -126 (an f32 quotient would round it to 2^-127 and give -127)."""
    x = np.zeros((1, 32), np.float32)
    x[0, 0] = np.float32(2.0 ** -125 + 2.0 ** -148)
    assert float(x[0, 0]) == 2.0 ** -125 + 2.0 ** -148
    with np.errstate(under="ignore"):
        assert float(x[0, 0] / np.float32(4)) == 2.0 ** -127  # the f32 quotient
    _, s = R.quantize(x, "mxfp4_e2m1", scale_mode="nearest")
    assert int(R.bits(s)[0, 0]) == 1
    assert "2^-125 + 2^-148: v = 2^-127 + 2^-150 is above\n     2^-127, so E = -126" in TEXT
