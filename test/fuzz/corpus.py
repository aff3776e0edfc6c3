"""The fuzzer's inputs: the seed corpus, the hand-made cases, and the mutation operators.

Seeds are the lit tests and the examples (``test/lit/**/*.mlir``, ``examples/*.mlir``), split at
``// -----`` as ``--split-input-file`` would, with comment-only lines dropped (RUN and CHECK lines
mean nothing to the tools).  A mutant is a seed with one to three mutations applied, drawn from
a ``random.Random`` seeded by ``(seed, index)`` alone, so mutant ``i`` of seed ``s`` is the same
whatever else runs beside it.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_SPLIT_RE = re.compile(r"^// -----\s*$", re.M)


@dataclasses.dataclass(frozen=True)
class Seed:
    """One input of the corpus: its text and where it came from (``file`` or ``file#chunk``)."""

    name: str
    text: str


def corpus_files(root: Path = ROOT) -> list[Path]:
    """The seed files: every lit test and example, in a stable order (lit's Output/ excluded)."""
    files = [p for p in (root / "test" / "lit").rglob("*.mlir") if "Output" not in p.parts]
    files += sorted((root / "examples").glob("*.mlir"))
    return sorted(set(files))


def load_corpus(root: Path = ROOT) -> list[Seed]:
    """The seed inputs: each ``// -----`` chunk of each corpus file, comments dropped."""
    seeds = []
    for path in corpus_files(root):
        rel = path.relative_to(root).as_posix()
        chunks = _SPLIT_RE.split(path.read_text(encoding="utf-8"))
        for i, chunk in enumerate(chunks):
            text = "".join(line for line in chunk.splitlines(keepends=True)
                           if not line.lstrip().startswith("//"))
            if text.strip():
                seeds.append(Seed(f"{rel}#{i}" if len(chunks) > 1 else rel, text))
    return seeds


# --- mutation operators ----------------------------------------------------------------------

ELEMENT_TYPES = ("f32", "bf16", "f16", "f64", "i1", "i4", "i8", "i16", "i32", "i64", "ui8",
                 "ui32", "si8", "index", "f8E4M3FN", "f8E5M2", "f8E8M0FNU", "f6E3M2FN",
                 "f6E2M3FN", "f4E2M1FN", "f8E4M3FNUZ", "f8E4M3B11FNUZ", "tf32", "complex<f32>",
                 "none")
_ELEMENT_RE = re.compile(r"(?<![\w.$])(" + "|".join(
    sorted((re.escape(t) for t in ELEMENT_TYPES), key=len, reverse=True)) + r")(?![\w<])")
_SHAPE_RE = re.compile(r"\b(tensor|memref|vector)<((?:[0-9?]+x)*)")
_NUMBER_RE = re.compile(r"(?<![\w%@^#$])(?:0x[0-9A-Fa-f]+|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)(?![\w])")
_IDENT_RE = re.compile(r"(?<![%@^#\w$])[A-Za-z_][\w$.]*")
_SSA_RE = re.compile(r"%[\w$.#]+")
_SYMBOL_RE = re.compile(r"@[\w$.]+")
INTERESTING_NUMBERS = ("0", "1", "-1", "2", "3", "7", "8", "16", "31", "32", "33", "64", "127",
                       "128", "255", "256", "1024", "65535", "65536", "2147483647", "2147483648",
                       "-2147483649", "4294967296", "9223372036854775807",
                       "18446744073709551616", "1.5", "-0.0", "1.0e39", "1.0e-45", "0x7FC00000",
                       "0xFF", "0x", "nan", "inf")
DIMS = ("0", "1", "2", "3", "4", "7", "16", "31", "32", "33", "64", "?", "-1", "4294967297")
PUNCTUATION = "(){}[]<>,:=\"%@^#-"


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True) or [""]


def _replace_match(rng: random.Random, text: str, regex: re.Pattern,
                   make: Callable[[re.Match], str]) -> str | None:
    matches = list(regex.finditer(text))
    if not matches:
        return None
    m = rng.choice(matches)
    return text[:m.start()] + make(m) + text[m.end():]


def delete_line(rng: random.Random, text: str, ctx: MutationContext) -> str | None:
    lines = _lines(text)
    del lines[rng.randrange(len(lines))]
    return "".join(lines)


def duplicate_line(rng: random.Random, text: str, ctx: MutationContext) -> str | None:
    lines = _lines(text)
    i = rng.randrange(len(lines))
    lines.insert(rng.randrange(len(lines) + 1), lines[i])
    return "".join(lines)


def swap_lines(rng: random.Random, text: str, ctx: MutationContext) -> str | None:
    lines = _lines(text)
    if len(lines) < 2:
        return None
    i = rng.randrange(len(lines))
    j = min(i + 1, len(lines) - 1) if rng.random() < 0.5 else rng.randrange(len(lines))
    lines[i], lines[j] = lines[j], lines[i]
    return "".join(lines)


def splice_line(rng: random.Random, text: str, ctx: MutationContext) -> str | None:
    """A line of another seed inserted at a random place."""
    other = _lines(rng.choice(ctx.seeds).text)
    lines = _lines(text)
    lines.insert(rng.randrange(len(lines) + 1), rng.choice(other))
    return "".join(lines)


def change_number(rng: random.Random, text: str, ctx: MutationContext) -> str | None:
    def make(m: re.Match) -> str:
        if rng.random() < 0.3 and not m.group().startswith("0x"):
            try:
                return str(int(m.group()) + rng.choice((-1, 1)))
            except ValueError:
                pass
        return rng.choice(INTERESTING_NUMBERS)

    return _replace_match(rng, text, _NUMBER_RE, make)


def change_identifier(rng: random.Random, text: str, ctx: MutationContext) -> str | None:
    """An identifier (op name, attribute name, keyword, type) replaced by one seen elsewhere."""
    return _replace_match(rng, text, _IDENT_RE, lambda m: rng.choice(ctx.identifiers))


def change_ssa_name(rng: random.Random, text: str, ctx: MutationContext) -> str | None:
    """An SSA value or symbol reference renamed: to another name of the same input, or a new
    one."""
    regex = _SSA_RE if rng.random() < 0.8 else _SYMBOL_RE
    names = sorted(set(regex.findall(text)))

    def make(m: re.Match) -> str:
        if rng.random() < 0.8 and len(names) > 1:
            return rng.choice(names)
        return m.group()[0] + rng.choice(("undefined", "0", "arg9", "main", "x#1"))

    return _replace_match(rng, text, regex, make)


def change_element_type(rng: random.Random, text: str, ctx: MutationContext) -> str | None:
    return _replace_match(rng, text, _ELEMENT_RE, lambda m: rng.choice(ELEMENT_TYPES))


def change_element_type_everywhere(rng: random.Random, text: str,
                                   ctx: MutationContext) -> str | None:
    """Every use of one element type replaced (keeps the IR type-consistent more often)."""
    present = sorted(set(_ELEMENT_RE.findall(text)))
    if not present:
        return None
    old, new = rng.choice(present), rng.choice(ELEMENT_TYPES)
    return _ELEMENT_RE.sub(lambda m: new if m.group() == old else m.group(), text)


def change_shape(rng: random.Random, text: str, ctx: MutationContext) -> str | None:
    def make(m: re.Match) -> str:
        dims = [d for d in m.group(2).split("x") if d]
        op = rng.randrange(3)
        if op == 0 or not dims:
            dims.insert(rng.randrange(len(dims) + 1), rng.choice(DIMS))
        elif op == 1:
            del dims[rng.randrange(len(dims))]
        else:
            dims[rng.randrange(len(dims))] = rng.choice(DIMS)
        return f"{m.group(1)}<" + "".join(d + "x" for d in dims)

    return _replace_match(rng, text, _SHAPE_RE, make)


def change_dimension_everywhere(rng: random.Random, text: str,
                                ctx: MutationContext) -> str | None:
    """One dimension size replaced in every shape it appears in, and every bare number equal
    to it (block sizes, dimension attributes): changes a shape and keeps it consistent."""
    sizes = sorted({d for m in _SHAPE_RE.finditer(text) for d in m.group(2).split("x")
                    if d.isdigit()})
    if not sizes:
        return None
    old, new = rng.choice(sizes), rng.choice(DIMS)

    def in_shape(m: re.Match) -> str:
        dims = [new if d == old else d for d in m.group(2).split("x") if d]
        return f"{m.group(1)}<" + "".join(d + "x" for d in dims)

    text = _SHAPE_RE.sub(in_shape, text)
    if new.isdigit() and rng.random() < 0.5:
        text = re.sub(rf"(?<![\w%@^#$.]){old}(?![\w.])", new, text)
    return text


def change_number_everywhere(rng: random.Random, text: str,
                             ctx: MutationContext) -> str | None:
    """Every occurrence of one number replaced (a block size, a dimension index, a constant)."""
    present = sorted(set(_NUMBER_RE.findall(text)))
    if not present:
        return None
    old, new = rng.choice(present), rng.choice(INTERESTING_NUMBERS)
    return _NUMBER_RE.sub(lambda m: new if m.group() == old else m.group(), text)


def truncate(rng: random.Random, text: str, ctx: MutationContext) -> str | None:
    if len(text) < 2:
        return None
    return text[:rng.randrange(1, len(text))]


def change_punctuation(rng: random.Random, text: str, ctx: MutationContext) -> str | None:
    """One character deleted, or one punctuation character inserted."""
    if not text:
        return None
    i = rng.randrange(len(text))
    if rng.random() < 0.5:
        return text[:i] + text[i + 1:]
    return text[:i] + rng.choice(PUNCTUATION) + text[i:]


MUTATIONS: dict[str, Callable[[random.Random, str, MutationContext], str | None]] = {
    "delete-line": delete_line,
    "duplicate-line": duplicate_line,
    "swap-lines": swap_lines,
    "splice-line": splice_line,
    "number": change_number,
    "identifier": change_identifier,
    "ssa-name": change_ssa_name,
    "element-type": change_element_type,
    "element-type-all": change_element_type_everywhere,
    "shape": change_shape,
    "dimension-all": change_dimension_everywhere,
    "number-all": change_number_everywhere,
    "truncate": truncate,
    "punctuation": change_punctuation,
}


@dataclasses.dataclass
class MutationContext:
    """What the operators draw replacements from: every seed, and every identifier in them."""

    seeds: list[Seed]
    identifiers: list[str]

    @classmethod
    def of(cls, seeds: list[Seed]) -> MutationContext:
        idents = sorted({m.group() for s in seeds for m in _IDENT_RE.finditer(s.text)})
        return cls(seeds, idents)


@dataclasses.dataclass(frozen=True)
class Mutant:
    """A mutated seed: its text, the seed it came from and the mutations applied, in order."""

    index: int
    seed: str
    mutations: tuple[str, ...]
    text: str


def mutant(ctx: MutationContext, pool: list[Seed], seed: int, index: int) -> Mutant:
    """Mutant ``index`` of run ``seed``: a seed of ``pool`` with 1-3 mutations applied."""
    rng = random.Random(f"{seed}/{index}")
    base = rng.choice(pool)
    text, applied = base.text, []
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
        for _attempt in range(8):  # an operator may find nothing to change: draw another
            name = rng.choice(sorted(MUTATIONS))
            new = MUTATIONS[name](rng, text, ctx)
            if new is not None and new != text:
                text = new
                applied.append(name)
                break
    return Mutant(index, base.name, tuple(applied), text)


# --- hand-made cases (issue 11) --------------------------------------------------------------

def deep_regions(depth: int = 10_000) -> str:
    """A module nested ``depth`` regions deep: the recursive parser and verifier overflow the
    C stack unless the depth is bounded or the work gets a large stack."""
    return "module {\n" * depth + "}\n" * depth


def deep_pipeline(depth: int = 5_000) -> str:
    """A pass pipeline string with ``depth`` nested parentheses."""
    return "builtin.module(" * depth + ")" * depth


def truncated_resource_global() -> str:
    """A generic-form ``memref.global`` whose ``dialect_resources`` hex blob is cut off:
    jaxlib's parser reports the error, then dies of SIGSEGV."""
    return ('"memref.global"() <{constant, initial_value = dense_resource<blob1> : '
            'tensor<4xi1>, sym_name = "from_resource", sym_visibility = "private", '
            'type = memref<4xi1>}> : () -> ()\n\n'
            '{-#\n  dialect_resources: {\n    builtin: {\n      blob1: "0x01000000010001')


def huge_vector() -> str:
    """Vectors of 2^32 + 1 lanes (a mutant of the widen-bool-memrefs lit test, found by this
    fuzzer): upstream MLIR's LLVM lowering of the transfer/masked ops aborts the process."""
    v = "vector<4294967297xi1>"
    return (f"func.func @huge(%m: memref<?xi1>, %i: index, %mask: {v}, %p: i1) -> ({v}, {v}) {{\n"
            f"  %v = vector.load %m[%i] : memref<?xi1>, {v}\n"
            f"  vector.store %v, %m[%i] : memref<?xi1>, {v}\n"
            f"  %r = vector.transfer_read %m[%i], %p : memref<?xi1>, {v}\n"
            f"  vector.transfer_write %r, %m[%i] : {v}, memref<?xi1>\n"
            f"  %ml = vector.maskedload %m[%i], %mask, %v : memref<?xi1>, {v}, {v} into {v}\n"
            f"  vector.maskedstore %m[%i], %mask, %ml : memref<?xi1>, {v}, {v}\n"
            f"  return %r, %ml : {v}, {v}\n}}\n")


def block_scaled_dot_list_dequantize_type() -> str:
    """``__op$block_scaled_dot`` whose backend_config has ``"dequantize_type": [1]``."""
    return (
        "func.func @main(%a: tensor<16x128xf8E4M3FN>, %b: tensor<8x128xf8E4M3FN>, "
        "%as: tensor<16x4xf8E8M0FNU>, %bs: tensor<8x4xf8E8M0FNU>) -> tensor<16x8xf32> {\n"
        "  %0 = stablehlo.custom_call @__op$block_scaled_dot(%a, %b, %as, %bs) "
        "{backend_config = \"{\\22scaled_dot_backend_config\\22: "
        "{\\22dequantize_type\\22: [1]}}\"} : (tensor<16x128xf8E4M3FN>, tensor<8x128xf8E4M3FN>, "
        "tensor<16x4xf8E8M0FNU>, tensor<8x4xf8E8M0FNU>) -> tensor<16x8xf32>\n"
        "  return %0 : tensor<16x8xf32>\n}\n")
