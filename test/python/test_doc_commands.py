"""The commands and snippets of README.md, tools/README.md, examples/README.md and docs/jax.md,
run as written (taken from the documents themselves), with their documented output.

Console scripts (``mxlower-run``, ``.venv/bin/mxlower-run``) resolve to the environment running
the tests; ``tools/...`` executables run from the checkout with that environment first on PATH.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
ENV = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def _doc(name: str) -> str:
    return (ROOT / name).read_text()


def _blocks(text: str, lang: str) -> list[str]:
    """The fenced ``lang`` code blocks of ``text``, in order (indentation removed)."""
    return [textwrap.dedent(b) for b in
            re.findall(rf"^ *```{lang}\n(.*?)^ *```", text, flags=re.M | re.S)]


def _after(text: str, heading: str, lang: str, n: int = 0) -> str:
    return _blocks(text[text.index(heading):], lang)[n]


def _sh(cmd: str, timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=timeout)


def _last_line(out: str) -> str:
    return out.rstrip("\n").splitlines()[-1]


#: the error figures of a compare line, which follow XLA:CPU's f32 summation order (it
#: differs between CPUs: AVX2 and AVX-512 kernels add in other orders)
_ERRS = re.compile(r"max abs err ([-+.e\d]+), max rel err ([-+.e\d]+)")


def _same_compare_line(got: str, documented: str) -> None:
    """``got`` is the documented compare line up to the error figures, which stay within the
    documented tolerances (f32 summation order: a few units in the last place)."""
    assert _ERRS.sub("max abs err E, max rel err R", got) == \
        _ERRS.sub("max abs err E, max rel err R", documented), got
    abs_err, rel_err = (float(v) for v in _ERRS.search(got).groups())
    assert abs_err < 1e-5 and rel_err < 1e-6, got


def _readme_quick_start() -> tuple[str, str, str]:
    """(install-and-run command, expected compare line, test command) of the README."""
    text = _doc("README.md")
    quick = text[text.index("## Quick start"):text.index("## Formats")]
    run, test = _blocks(quick, "sh")
    (line,) = _blocks(quick, "text")
    return run.strip(), line.strip(), test.strip()


def test_readme_quick_start_prints_the_documented_line():
    run, line, _ = _readme_quick_start()
    # the venv and the install are the environment running this test; the rest as written
    install, _, main = run.rpartition(" && ")
    assert install.startswith("python3 -m venv .venv") and main.startswith(".venv/bin/mxlower-run ")
    r = _sh(f"{BIN}/{main.removeprefix('.venv/bin/')}")
    assert r.returncode == 0, r.stderr
    _same_compare_line(_last_line(r.stdout), line)


def test_ci_runs_the_readme_test_command_verbatim():
    _, _, test = _readme_quick_start()
    ci = (ROOT / ".ci" / "run").read_text()
    assert f"\n{test} || exit\n" in ci, "the README's test command is not in .ci/run as written"


def test_examples_readme_command_and_its_line():
    text = _doc("examples/README.md")
    cmd = _after(text, "## `mxfp8_scaled_matmul.mlir`", "sh")
    line = _after(text, "## `mxfp8_scaled_matmul.mlir`", "text").strip()
    r = _sh(cmd)
    assert r.returncode == 0, r.stderr
    _same_compare_line(_last_line(r.stdout), line)
    # without the tolerances the compare is bit-exact and fails, as the README says (how
    # many last bits differ follows the CPU's summation order too)
    r = _sh(cmd.replace("--rtol 1e-6 --atol 1e-6", ""))
    m = re.search(r"MISMATCH \(bit-exact\): (\d+) of 512 elements differ", r.stdout)
    assert r.returncode == 2 and m and 1 <= int(m.group(1)) <= 16, r.stdout


def test_tools_readme_run_line():
    (block,) = _blocks(_doc("tools/README.md"), "sh")
    cmd = re.search(r"^tools/mxlower-run .*?(?<!\\)\n", block, flags=re.M | re.S).group()
    r = _sh(cmd)
    assert r.returncode == 0, r.stderr
    assert _last_line(r.stdout).startswith(
        "// compare result #0 with examples/mxfp8_scaled_matmul.ref.npz[result0]: OK")


def test_readme_llvm_example():
    block = _after(_doc("README.md"), "### `mxlower-opt`", "sh")
    (line,) = [ln for ln in block.splitlines() if "mxlower-stablehlo-to-llvm" in ln]
    cmd = line.partition("#")[0].strip()
    assert cmd.startswith("mxlower-opt examples/")
    r = _sh(cmd)
    assert r.returncode == 0, r.stderr
    assert "llvm.func @main(" in r.stdout and "stablehlo." not in r.stdout


_PASS_DRIVER = """
import sys
from mxlower import passes
from mxlower.tools import opt

passes.register("mxlower-my-pass", "my_pass:MyPass")   # as the README's one line does
sys.exit(opt.main(sys.argv[1:]))
"""


def test_readme_writing_a_pass_snippet(tmp_path):
    snippet = _after(_doc("README.md"), "## Writing a pass", "python")
    (tmp_path / "my_pass.py").write_text(snippet)
    src = tmp_path / "in.mlir"
    src.write_text("func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {\n"
                   "  %0 = stablehlo.add %a, %a : tensor<2xf32>\n"
                   "  return %0 : tensor<2xf32>\n}\n")
    env = {**ENV, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}

    def opt(*args):
        return subprocess.run([sys.executable, "-c", _PASS_DRIVER, *args], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=300)

    r = opt("--list-passes")
    assert r.returncode == 0 and "--mxlower-my-pass" in r.stdout, r.stderr
    assert "One-line summary shown by --list-passes." in r.stdout
    assert "forbidden=<list<str>> (default: stablehlo.custom_call)" in r.stdout
    r = opt(str(src), "-p", "builtin.module(mxlower-my-pass)")  # nothing forbidden here
    assert r.returncode == 0 and "stablehlo.add" in r.stdout, r.stderr
    r = opt(str(src), "-p", "builtin.module(mxlower-my-pass{forbidden=stablehlo.add})")
    assert r.returncode == 1 and not r.stdout
    assert r.stderr.startswith(f"{src}:2:8: error: 'stablehlo.add' is not allowed here"), r.stderr


def test_jax_export_snippet(tmp_path):
    """docs/jax.md's export section: serialize (flatbuffers, the 'export' extra), then the
    module runs in a fresh JAX process that never imports mxlower, with the same bits."""
    pytest.importorskip("flatbuffers", reason="the 'export' extra is not installed")
    snippet = _after(_doc("docs/jax.md"), "### Exporting and serializing", "python")
    blob, ref = tmp_path / "f.bin", tmp_path / "ref.npy"
    code = snippet + textwrap.dedent(f"""
        import numpy as np
        assert np.array_equal(np.asarray(y), np.asarray(jax.jit(f)(x, w)))
        open({str(blob)!r}, "wb").write(blob)
        np.save({str(ref)!r}, np.asarray(y))
    """)
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=ENV, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    fresh = textwrap.dedent(f"""
        import sys
        import jax, jax.numpy as jnp, numpy as np
        from jax import export
        x, w = jnp.linspace(-1, 1, 4 * 64).reshape(4, 64), jnp.ones((8, 64))
        y = export.deserialize(open({str(blob)!r}, "rb").read()).call(x, w)
        assert np.array_equal(np.asarray(y), np.load({str(ref)!r}))
        assert not [m for m in sys.modules if m.startswith("mxlower")]
    """)
    r = subprocess.run([sys.executable, "-c", fresh], cwd=ROOT.parent, env=ENV,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("doc", ["README.md", "tools/README.md", "examples/README.md"])
def test_doc_command_lines_parse(doc):
    """Every shell block line of these documents is valid shell (quotes balanced)."""
    for block in _blocks(_doc(doc), "sh"):
        shlex.split(block.replace("\\\n", " "), comments=True)


def test_comparison_doc_commands_print_the_documented_tables(tmp_path):
    """docs/comparison.md's commands, run as written (in a scratch directory), print its
    tables: the same rows, and the same figures to the printed digits (the input streams of
    NumPy's default_rng are stable; a change there shows up here)."""
    doc = _doc("docs/comparison.md")
    cmd = _blocks(doc, "sh")[0]
    documented = _blocks(doc, "text")[0]
    r = subprocess.run(["bash", "-ec", cmd], cwd=tmp_path, env=ENV, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout == documented
