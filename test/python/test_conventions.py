"""Project conventions that every pass must keep (DEVELOPERS.md, STYLE.md)."""

from __future__ import annotations

import ast
import pathlib

import pytest

from mxlower import passes as registry

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIT = ROOT / "test" / "lit"


@pytest.mark.parametrize("name", sorted(registry.PASSES))
def test_pass_has_docs_and_a_lit_test_named_after_it(name):
    cls = registry.get(name)
    doc = cls.description()
    assert name.startswith("mxlower-")
    assert cls.summary(), f"{name}: no summary line"
    assert "mxlower-opt" in doc, f"{name}: docstring lacks an example command line"
    tests = list(LIT.rglob(f"{name}.mlir"))
    assert tests, f"{name}: no test/lit/**/{name}.mlir"
    text = tests[0].read_text()
    assert "// RUN:" in text
    assert "expected-error" in text or "expected-warning" in text, (
        f"{name}: its lit test has no negative case (--verify-diagnostics + expected-error)")


@pytest.mark.parametrize("name", sorted(registry.PIPELINES))
def test_pipeline_is_documented_and_tested(name):
    cls = registry.get(name)
    assert cls.summary()
    assert list(LIT.rglob(f"{name}.mlir")), f"{name}: no lit test named after it"


def test_one_pass_per_file():
    files = [target.partition(":")[0] for target in registry.PASSES.values()]
    assert len(files) == len(set(files)), "two passes share a module"


def test_only_binding_modules_import_mlir():
    offenders = []
    for path in (ROOT / "mxlower").rglob("*.py"):
        if path.parent.name == "bindings":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            for n in names:
                if n == "mlir" or n.startswith(("mlir.", "jaxlib.mlir")):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}: {n}")
    assert not offenders, "MLIR bindings imported outside mxlower/bindings:\n" + "\n".join(
        offenders)


def test_readme_lists_every_pass_and_pipeline():
    readme = (ROOT / "README.md").read_text()
    missing = [n for n in registry.all_names() if f"`{n}`" not in readme]
    assert not missing, f"README.md does not mention: {', '.join(missing)}"
