"""passes/README.md is generated from the pass registry and kept current (mxlower.tools.gen_docs)."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from mxlower import passes as registry
from mxlower.tools import gen_docs

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "passes" / "README.md"


def _gen_docs(*args: str) -> subprocess.CompletedProcess:
    # In a fresh interpreter: the registry and the type tables are as a user's run sees them
    # (other tests register made-up types and passes in this process).
    return subprocess.run([sys.executable, "-m", "mxlower.tools.gen_docs", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_committed_reference_is_current():
    r = _gen_docs("--check")
    assert r.returncode == 0, (
        "passes/README.md is stale: run `python -m mxlower.tools.gen_docs`\n" + r.stderr)
    assert gen_docs.DEFAULT_OUTPUT == REFERENCE


def test_check_reports_a_stale_file_with_a_diff(tmp_path):
    stale = tmp_path / "README.md"
    stale.write_text(REFERENCE.read_text().replace("mxlower-verify-mx", "mxlower-verify-xx", 1))
    r = _gen_docs("--check", "-o", str(stale))
    assert r.returncode == 1
    assert "is stale; regenerate it with `python -m mxlower.tools.gen_docs`" in r.stderr
    assert "-" in r.stderr and "mxlower-verify-xx" in r.stderr
    assert "Traceback" not in r.stderr


def test_write_and_errors(tmp_path):
    out = tmp_path / "ref.md"
    assert gen_docs.main(["-o", str(out)]) == 0
    assert out.read_text() == gen_docs.render()
    assert gen_docs.main(["--check", "-o", str(out)]) == 0
    r = _gen_docs("-o", str(tmp_path / "missing" / "ref.md"))
    assert r.returncode == 1 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    r = _gen_docs("--check", "-o", str(tmp_path / "nothing.md"))
    assert r.returncode == 1 and "cannot read" in r.stderr and "Traceback" not in r.stderr


def test_every_pass_pipeline_and_option_is_documented():
    text = gen_docs.render()
    for name in registry.all_names():
        cls = registry.get(name)
        assert f"### `{name}`\n" in text
        assert f"| [`{name}`](#{name}) |" in text
        section = text.split(f"### `{name}`\n", 1)[1].split("\n### ", 1)[0]
        assert f"**{cls.summary()}**" in section
        for opt, typ, default, help_, _ in cls.options():
            row = next(line for line in section.splitlines() if line.startswith(f"| `{opt}` |"))
            assert f"`{typ}`" in row and help_.replace("|", "\\|") in row
            assert f"`{gen_docs._value(default)}`" in row or (default == () and "(empty)" in row)
        if name in registry.PIPELINES:
            expansion = section.split("Expands to, with the default options:\n\n```text\n")[1]
            assert " ".join(expansion.split("```")[0].split()) == cls().build()


def test_docstring_conversion():
    doc = '''Summary line.

    Uses ``mx.quantize`` and :mod:`mxlower.reference`; a span ``across
    lines`` stays one span.

    Before::

        %y = "mx.pack"(%x) {axis = 0 : i64} : (tensor<4xf4E2M1FN>) -> tensor<2xui8>

    After (stderr)::

        in.mlir:3:8: error: something

    Example::

        mxlower-opt in.mlir -p 'builtin.module(a,
            b)'
    '''
    md = gen_docs.markdown_of_docstring(inspect.cleandoc(doc), skip_summary=True)
    assert md == '''Uses `mx.quantize` and `mxlower.reference`; a span `across
lines` stays one span.

Before:

```mlir
%y = "mx.pack"(%x) {axis = 0 : i64} : (tensor<4xf4E2M1FN>) -> tensor<2xui8>
```

After (stderr):

```text
in.mlir:3:8: error: something
```

Example:

```sh
mxlower-opt in.mlir -p 'builtin.module(a,
    b)'
```'''


@pytest.mark.parametrize("value, text", [(True, "true"), (False, "false"), ("", '""'),
                                         (("a", "b"), "a,b"), (32, "32")])
def test_option_values_as_written_on_the_command_line(value, text):
    assert gen_docs._value(value) == text
