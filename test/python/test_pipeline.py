"""The pass-pipeline parser, option parsing, the registry and the pass manager adapter."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

import pytest

from mxlower import passes as registry
from mxlower.bindings import jaxlib as J
from mxlower.diagnostics import DiagnosticEngine, PassFailure
from mxlower.passes import test_diagnostics
from mxlower.passes.base import ModulePass, OptionError, Pipeline, option, parse_options
from mxlower.pipeline.manager import PassPipeline, cached_pipeline, run_pipeline
from mxlower.pipeline.parser import Nested, PassRef, PipelineError, parse_pipeline, render


# ----------------------------------------------------------------------------- the parser
def test_parse_nested_pipeline_with_options():
    p = parse_pipeline("builtin.module(canonicalize{max-iterations=3}, func.func(cse, a{x={1 2} "
                       "y=\"s p\"}), symbol-dce)")
    assert p.anchor == "builtin.module"
    assert [type(e) for e in p.elements] == [PassRef, Nested, PassRef]
    assert p.elements[0] == PassRef("canonicalize", "max-iterations=3", 15)
    nested = p.elements[1]
    assert nested.anchor == "func.func"
    assert nested.elements[0].name == "cse"
    assert nested.elements[1].options == 'x={1 2} y="s p"'
    assert render(p) == ("builtin.module(canonicalize{max-iterations=3}, func.func(cse, "
                         "a{x={1 2} y=\"s p\"}), symbol-dce)")


def test_parse_empty_pipeline_body():
    assert parse_pipeline("builtin.module()").elements == []
    assert parse_pipeline("  builtin.module( )  ").elements == []


@pytest.mark.parametrize("text,pos,fragment", [
    ("", 0, "empty pass pipeline"),
    ("cse", 3, "a pipeline must be anchored"),
    ("builtin.module(cse", 18, "expected ',' or ')'"),
    ("builtin.module(cse,)", 19, "expected a pass name"),
    ("builtin.module(cse) x", 20, "unexpected 'x' after"),
    ("builtin.module(a{x=1)", 16, "expected '}'"),
    ("builtin.module(a{x=\"1})", 19, "unterminated string"),
    ("builtin.module(func.func(cse)", 29, "expected ',' or ')' in the pass pipeline"),
    ("builtin.module(,)", 15, "expected a pass name"),
])
def test_parse_errors_point_at_the_column(text, pos, fragment):
    with pytest.raises(PipelineError) as e:
        parse_pipeline(text)
    assert fragment in e.value.message
    assert e.value.pos == pos
    formatted = e.value.format()
    assert formatted.startswith(f"<pass-pipeline>:1:{pos + 1}: error: ")
    assert formatted.splitlines()[-1] == " " * pos + "^"


# ----------------------------------------------------------------------------- options
def test_parse_options_forms():
    assert parse_options("") == {}
    assert parse_options("a=1 b=x,y  flag c=\"s p\" d={n e} e='q'") == {
        "a": "1", "b": "x,y", "flag": "true", "c": "s p", "d": "{n e}", "e": "q"}
    with pytest.raises(OptionError, match="given twice"):
        parse_options("a=1 a=2")
    with pytest.raises(OptionError, match="unbalanced"):
        parse_options("a={x")


@dataclasses.dataclass(frozen=True)
class _Opts(ModulePass):
    """Options test pass.

    More text.
    """

    name: ClassVar[str] = "mxlower-test-opts"
    count: int = option(2, "a count")
    ratio: float = option(0.5, "a ratio")
    enabled: bool = option(False, "a flag")
    mode: str = option("floor", "a mode", choices=("floor", "rceil"))
    types: tuple[str, ...] = option(("a", "b"), "a list", choices=("a", "b", "c"))
    sizes: tuple[int, ...] = option((), "ints")


def test_option_conversion_and_rendering():
    p = _Opts.from_options("count=0x10 ratio=2.5 enabled mode=rceil types=c,a sizes=1,2,3")
    assert p == _Opts(16, 2.5, True, "rceil", ("c", "a"), (1, 2, 3))
    assert str(p) == ("mxlower-test-opts{count=16 ratio=2.5 enabled=true mode=rceil types=c,a "
                      "sizes=1,2,3}")
    assert _Opts.from_options(p.option_string()[1:-1]) == p
    assert _Opts.from_options("enabled=off").enabled is False
    assert _Opts.summary() == "Options test pass."
    names = [o[0] for o in _Opts.options()]
    assert names == ["count", "ratio", "enabled", "mode", "types", "sizes"]
    assert _Opts.options()[4][1] == "list<str>"


@pytest.mark.parametrize("text,fragment", [
    ("nope=1", "unknown option 'nope' for 'mxlower-test-opts' (its options: count, ratio,"),
    ("count=x", "option 'count' of 'mxlower-test-opts' expects int, got 'x'"),
    ("ratio=", "expects float"),
    ("enabled=2", "expects bool"),
    ("mode=ceil", "invalid value 'ceil' (expected one of: floor, rceil)"),
    ("types=a,d", "invalid value 'd'"),
])
def test_option_errors(text, fragment):
    with pytest.raises(OptionError, match=None) as e:
        _Opts.from_options(text)
    assert fragment in str(e.value)


# ----------------------------------------------------------------------------- registry
def test_registry_is_lazy_and_consistent():
    for name in registry.all_names():
        cls = registry.get(name)
        assert cls is not None and cls.name == name
        assert issubclass(cls, (ModulePass, Pipeline))
        assert cls.summary(), f"{name} has no docstring summary"
        assert name.startswith("mxlower-")
    assert registry.get("no-such-pass") is None
    assert registry.suggest("mxlower-test-diagnostic") == ["mxlower-test-diagnostics"]


def test_unknown_flag_hint_suggests_mxlower_and_upstream_passes():
    assert registry.registry_unknown_flag_hint("mxlower-test-diagnostic") == (
        "; did you mean '--mxlower-test-diagnostics'?")
    assert registry.registry_unknown_flag_hint("canonicalise") == "; did you mean '--canonicalize'?"
    assert registry.registry_unknown_flag_hint("zzzz") == ""


# ----------------------------------------------------------------------------- the manager
_MODULE = """
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.add %a, %a : tensor<4xf32>
  %1 = stablehlo.add %a, %a : tensor<4xf32>
  %2 = stablehlo.multiply %0, %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}
"""


def _module(ctx, text=_MODULE):
    with ctx:
        return J.ir.Module.parse(text)


def test_mixed_pipeline_runs_in_order_and_nests():
    ctx = J.make_context(allow_unregistered=True)
    pipe = PassPipeline.parse(
        "builtin.module(cse, func.func(mxlower-test-diagnostics{tag-ops=1 prefix=p}), "
        "canonicalize)", ctx)
    assert pipe.pass_names == ["cse", "mxlower-test-diagnostics", "canonicalize"]
    assert "mxlower-test-diagnostics{tag-ops=true prefix=p ops=}" in str(pipe)
    assert "canonicalize{" in str(pipe) and "max-iterations=10" in str(pipe)
    m = _module(ctx)
    out = pipe.run(m, DiagnosticEngine())
    text = str(out)
    assert text.count("stablehlo.add") == 1  # cse ran first
    assert 'mxlower.visited = "p"' in text  # nested pass ran on the function
    assert not pipe.ends_upstream


def test_named_pipeline_expansion(monkeypatch):
    @dataclasses.dataclass(frozen=True)
    class Twice(Pipeline):
        """Test pipeline."""

        name: ClassVar[str] = "mxlower-test-twice"
        prefix: str = option("x", "tag")

        def build(self):
            return f"cse, mxlower-test-diagnostics{{tag-ops prefix={self.prefix}}}"

    monkeypatch.setitem(registry._loaded, "mxlower-test-twice", Twice)
    monkeypatch.setitem(registry.PIPELINES, "mxlower-test-twice", "unused:Twice")
    ctx = J.make_context()
    pipe = PassPipeline.parse("builtin.module(mxlower-test-twice{prefix=q}, canonicalize)", ctx)
    assert pipe.pass_names == ["cse", "mxlower-test-diagnostics", "canonicalize"]
    with pytest.raises(PipelineError, match="unknown option 'bad' for 'mxlower-test-twice'"):
        PassPipeline.parse("builtin.module(mxlower-test-twice{bad=1})", ctx)


def test_pass_errors_become_diagnostics_and_failure():
    ctx = J.make_context()
    m = _module(ctx, _MODULE.replace("stablehlo.multiply %0, %1",
                                     'stablehlo.multiply %0, %1 {mxlower.test_diag = "error: bad"}'))
    with pytest.raises(PassFailure) as e:
        run_pipeline(m, "builtin.module(mxlower-test-diagnostics)")
    d = e.value.diagnostics[0]
    assert (d.severity, d.message, d.line) == ("error", "bad", 5)


def test_internal_errors_are_reported_not_raised(monkeypatch):
    def boom(self, op):
        raise ZeroDivisionError("oops")

    monkeypatch.setattr(test_diagnostics.TestDiagnostics, "run", boom)
    ctx = J.make_context()
    engine = DiagnosticEngine()
    pipe = PassPipeline.parse("builtin.module(mxlower-test-diagnostics)", ctx)
    assert pipe.run(_module(ctx), engine) is None
    msg = engine.diagnostics[0].message
    assert "internal error in pass 'mxlower-test-diagnostics': ZeroDivisionError: oops" in msg


def test_hand_over_to_upstream_mlir():
    ctx = J.make_context()
    pipe = PassPipeline.parse(
        "builtin.module(stablehlo-legalize-to-linalg, one-shot-bufferize{"
        "bufferize-function-boundaries}, convert-linalg-to-loops, convert-scf-to-cf, "
        "convert-to-llvm, reconcile-unrealized-casts)", ctx)
    assert pipe.ends_upstream
    out = pipe.run(_module(ctx), DiagnosticEngine())
    assert type(out).__module__.startswith("mlir.")  # an upstream-stack operation now
    text = str(out)
    assert "llvm.func @f" in text and "stablehlo" not in text


def test_unknown_pass_suggestions():
    ctx = J.make_context()
    with pytest.raises(PipelineError) as e:
        PassPipeline.parse("builtin.module(canonicalise)", ctx)
    assert e.value.message == "unknown pass 'canonicalise'; did you mean 'canonicalize'?"


def test_cached_pipeline_is_per_context_and_reusable():
    ctx1, ctx2 = J.make_context(), J.make_context()
    text = "builtin.module(cse, mxlower-test-diagnostics{tag-ops}, canonicalize)"
    p1 = cached_pipeline(text, ctx1)
    assert cached_pipeline(text, ctx1) is p1
    assert cached_pipeline(text, ctx2) is not p1
    for _ in range(2):  # the same pipeline (and its PassManagers) runs again correctly
        m = _module(ctx1)
        out = run_pipeline(m, text)
        assert str(out).count("stablehlo.add") == 1 and "mxlower.visited" in str(out)
