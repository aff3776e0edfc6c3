"""Mutation fuzzing of the command-line tools (test/fuzz/), in CI: the hand-made bad inputs of
issue 11, then mutants of the lit corpus with a fixed seed.  No invocation may crash, hang, print
a traceback or an internal error, exit other than 0/1/2, or fail without clear error lines.

More on demand (reproducers of each distinct failure go under MXLOWER_FUZZ_OUT/failures/)::

    MXLOWER_FUZZ_CASES=5000 MXLOWER_FUZZ_SEED=7 MXLOWER_FUZZ_OUT=/tmp/fuzz \\
        python -m pytest -q test/python/test_fuzz.py -k mutants
    python test/fuzz/mutate.py --cases 5000 --seed 7 --out /tmp/fuzz      # the same, standalone
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

FUZZ = Path(__file__).resolve().parents[1] / "fuzz"
sys.path.insert(0, str(FUZZ))

import corpus as C  # noqa: E402
import harness as H  # noqa: E402
import mutate as M  # noqa: E402

CASES = int(os.environ.get("MXLOWER_FUZZ_CASES", "600"))
SEED = int(os.environ.get("MXLOWER_FUZZ_SEED", "0"))
TIMEOUT = float(os.environ.get("MXLOWER_FUZZ_TIMEOUT", "60"))


def _out(tmp_path: Path, name: str) -> Path:
    base = os.environ.get("MXLOWER_FUZZ_OUT")
    return Path(base) / name if base else tmp_path / name


# --- the oracle and the harness catch what they must ---------------------------------------

def _outcome(rc, stderr="", stdout_bytes=0):
    return H.Outcome(rc, stdout_bytes, stderr, 0.1, "worker")


_OPT = H.Invocation("opt", (H.INPUT,))


@pytest.mark.parametrize(("rc", "stderr", "kind"), [
    (-11, "x.mlir:1:1: error: expected hex string blob\n", "crash"),
    (None, "", "hang"),
    (1, "Traceback (most recent call last):\n  File \"/a/mxlower/x.py\", line 3, in f\n"
        "RecursionError: maximum recursion depth exceeded\n", "traceback"),
    (1, "x.mlir:1:1: error: internal error in pass 'mxlower-legalize-xla-mx': TypeError: "
        "unhashable type: 'list'\n", "internal-error"),
    (3, "x.mlir:1:1: error: bad\n", "exit-code"),
    (1, "something failed\n", "unclear-error"),
    (1, "", "unclear-error"),
    (1, "x.mlir:1:1: warning: odd\n", "unclear-error"),
])
def test_oracle_flags(rc, stderr, kind):
    verdict = H.judge(_OPT, _outcome(rc, stderr))
    assert verdict is not None and verdict[0] == kind, verdict


def test_traceback_frames_are_the_packages_own():
    """A checkout named ``mxlower`` (git's default) puts "/mxlower/" into every path; only files
    of the package itself are mxlower frames in a traceback's signature."""
    err = ("Traceback (most recent call last):\n"
           f'  File "{H.PACKAGE_DIR}/tools/opt.py", line 7, in main\n'
           '  File "/tmp/x/mxlower/test/fuzz/selftest.py", line 3, in traceback\n'
           "ValueError: bad\n")
    assert H.judge(_OPT, _outcome(1, err)) == ("traceback", "ValueError in opt.py:main")
    assert H.in_package(f"{H.PACKAGE_DIR}/x.py") and not H.in_package("/tmp/x/mxlower/t.py")


def test_oracle_flags_output_on_failure():
    verdict = H.judge(_OPT, _outcome(1, "x.mlir:1:1: error: bad\n", stdout_bytes=10))
    assert verdict is not None and verdict[0] == "output-on-failure"


@pytest.mark.parametrize("stderr", [
    "x.mlir:2:5: error: expected ')'\n  %0 = foo(\n    ^\n",
    "mxlower-opt: error: could not open input file 'x': no such file\n",
    "usage: mxlower-opt [-h] ...\nmxlower-opt: error: unrecognized arguments: --x\n",
    "error: module has no location\n",
    "x.mlir:1:1: warning: unused\nx.mlir:2:1: error: bad\n",
])
def test_oracle_accepts_clear_errors(stderr):
    assert H.judge(_OPT, _outcome(1, stderr)) is None
    assert H.judge(_OPT, _outcome(0, "x.mlir:1:1: remark: fine\n")) is None


def test_harness_catches_crash_hang_and_traceback(tmp_path):
    """Stand-in tools (test/fuzz/selftest.py) misbehave in every way the oracle knows: the worker
    is restarted after the crash and the hang, each failure is confirmed in a fresh process and
    gets a reproducer, and the clean errors between them pass."""
    inv = {name: H.Invocation(f"selftest:{name}", (H.INPUT,))
           for name in ("ok", "segfault", "clean_error", "hang", "traceback", "tool_error",
                        "internal_error", "garbage", "odd_status", "ok")}
    case = H.Case("mutant-selftest-0", "module {}\n", list(inv.values()))
    report = H.Fuzzer(tmp_path, jobs=1, timeout=3, memory_gib=0).run([case])
    kinds = {f.kind: f for f in report.failures.values()}
    assert sorted(kinds) == ["crash", "exit-code", "hang", "internal-error", "traceback",
                             "unclear-error"], report.summary()
    crash = kinds["crash"]
    assert "SIGSEGV in __init__.py:string_at (error: about to crash)" in crash.signature
    assert crash.fresh is not None and crash.fresh.rc == -11  # confirmed outside the worker
    assert "about to crash" in (crash.directory / "stderr.txt").read_text()
    assert (crash.directory / "input.mlir").read_text() == "module {}\n"
    assert "selftest:segfault" in (crash.directory / "command.sh").read_text()
    assert kinds["hang"].fresh is not None and kinds["hang"].fresh.timed_out
    assert "ValueError" in kinds["traceback"].signature
    assert report.invocations == len(inv)
    assert report.worker_starts == 3  # first, after the crash, after the hang
    assert (tmp_path / "report.json").is_file()


# --- the corpus and the mutations --------------------------------------------------------------

def test_corpus_covers_lit_tests_and_examples():
    seeds = C.load_corpus()
    names = {s.name.split("#")[0] for s in seeds}
    assert "examples/dense_relu.mlir" in names
    assert any(n.startswith("test/lit/passes/") for n in names)
    assert len(seeds) > 100
    assert not any("// RUN" in s.text or "// CHECK" in s.text for s in seeds)


def test_every_mutation_changes_its_input():
    seeds = C.load_corpus()
    ctx = C.MutationContext.of(seeds)
    text = next(s.text for s in seeds if s.name == "examples/mxfp8_scaled_matmul.mlir")
    for name, op in C.MUTATIONS.items():
        changed = [op(random.Random(i), text, ctx) for i in range(20)]
        assert any(c is not None and c != text for c in changed), name


def test_mutants_are_reproducible():
    names = M.pass_names()
    a = [c.text for c in H.mutant_cases(30, SEED, names, None)]
    b = [c.text for c in H.mutant_cases(10, SEED, names, None, first=20)]
    assert a[20:] == b
    assert a != [c.text for c in H.mutant_cases(30, SEED + 1, names, None)]


def test_every_pass_and_pipeline_is_fuzzed():
    """A parseable mutant goes through mxlower-opt with each registered pass and pipeline."""
    names = M.pass_names()
    invs = H.invocations_for("func.func @main() {\n  return\n}\n",
                             random.Random(0), names, None)
    flags = {inv.args[1] for inv in invs if inv.tool == "opt" and len(inv.args) > 1}
    assert {f"--{n}" for n in names} <= flags
    assert any(inv.tool == "run" for inv in invs)


# --- the fuzzing itself ------------------------------------------------------------------------

_HANDMADE = {c.name: c for c in H.handmade_cases(M.pass_names(), None)}


@pytest.mark.parametrize("name", sorted(_HANDMADE))
def test_handmade_bad_input(name, tmp_path):
    """Issue 11's hand-made cases: 10,000 nested regions, a 5,000-deep pipeline string, a cut-off
    dense_resource blob (jaxlib's parser SIGSEGVs after reporting it), a list-valued
    dequantize_type in __op$block_scaled_dot; and vectors of 2^32 + 1 lanes (found by the mutant
    run).  Each tool must end in clear error lines."""
    cases = M.build_cases(0, SEED, handmade=True, run_timeout=TIMEOUT / 3)
    case = next(c for c in cases if c.name == name)
    report = H.Fuzzer(_out(tmp_path, name), jobs=1, timeout=TIMEOUT).run([case])
    assert not report.failures, report.summary()


def test_mutants(tmp_path):
    """``MXLOWER_FUZZ_CASES`` (default 600) mutants of seed ``MXLOWER_FUZZ_SEED`` (default 0)
    through every pass and pipeline, mxlower-translate and mxlower-run."""
    report = M.fuzz(CASES, SEED, _out(tmp_path, f"mutants-{SEED}"), jobs=2, timeout=TIMEOUT,
                    handmade=False)
    assert report.cases == CASES
    assert not report.failures, report.summary()


# --- generated inputs (issue 22) ---------------------------------------------------------------

import generate as G  # noqa: E402

GEN_SECONDS = float(os.environ.get("MXLOWER_FUZZ_GEN_SECONDS", "20"))
API_SECONDS = float(os.environ.get("MXLOWER_FUZZ_API_SECONDS", "12"))


def test_generators_are_reproducible():
    import itertools
    names = M.pass_names()
    a = [(c.text, c.invocations) for c in itertools.islice(G.tool_cases(SEED, names, 5.0), 60)]
    b = [(c.text, c.invocations) for c in itertools.islice(G.tool_cases(SEED, names, 5.0), 60)]
    assert a == b
    c = [(c.text, c.invocations) for c in itertools.islice(G.tool_cases(SEED + 1, names, 5.0),
                                                            60)]
    assert a != c


def test_generated_pipelines_reach_every_pass_and_pipeline():
    names = M.pass_names()
    rng = random.Random(SEED)
    seen = " ".join(G.pipeline(rng, names) for _ in range(400))
    assert all(n in seen for n in names), [n for n in names if n not in seen]


def test_generated_specs_reach_the_edges():
    rng = random.Random(SEED)
    specs = [G.number_spec(rng) for _ in range(500)]
    assert any(len(s) > 100 for s in specs)  # past the spec length limit
    assert any(len(s) > 25 and s.startswith("e") and "b" in s for s in specs)  # huge bias
    assert any(s.startswith(("int", "uint")) and len(s) > 12 for s in specs)  # huge K
    scales = [G.scale_spec(rng) or "" for _ in range(500)]
    assert any("_t0" in s for s in scales) and any("x" in s.split("_t")[-1] for s in scales)


@pytest.mark.parametrize(("make", "kind"), [
    (lambda: {}["k"], "exception"),
    (lambda: 1 / 0, "exception"),
    (lambda: (_ for _ in ()).throw(OverflowError("x")), "exception"),
])
def test_api_oracle_flags(make, kind):
    import numpy as np
    assert G.api_verdict(G.APICase("f", make, None, ""), np)[0] == kind
    assert G.api_verdict(G.APICase("f", lambda: (_ for _ in ()).throw(ValueError("x")), None,
                                   ""), np) is None
    one, two = (lambda: np.float32([1.0])), (lambda: np.float32([1.0000001]))
    assert G.api_verdict(G.APICase("f", one, two, ""), np)[0] == "wrong-result"
    assert G.api_verdict(G.APICase("f", one, lambda: (_ for _ in ()).throw(ValueError()), ""),
                         np)[0] == "disagreement"


def test_generated_tool_cases(tmp_path):
    """Random specs and attributes in mx ops, random pipelines over every registered pass and
    random command lines of the four tools, for ``MXLOWER_FUZZ_GEN_SECONDS`` (default 20) from
    seed ``MXLOWER_FUZZ_SEED``: the mutants' oracle (no crash, hang, traceback, internal error
    or unclear error)."""
    cases = G.within(G.tool_cases(SEED, M.pass_names(), TIMEOUT / 3), GEN_SECONDS)
    report = H.Fuzzer(_out(tmp_path, f"generated-{SEED}"), jobs=2, timeout=TIMEOUT).run(cases)
    print(report.summary())
    assert report.cases >= 20
    assert not report.failures, report.summary()


def test_generated_api_calls():
    """Random arguments to mxlower.jax and mxlower.reference (quantize, convert, cast, sparse,
    scaled_dot and calls with arguments of every wrong kind) for ``MXLOWER_FUZZ_API_SECONDS``
    (default 12): only TypeError/ValueError, and the same bits as the reference (a dot within
    section 6's bound) where both accept the call."""
    import time

    import jax.numpy as jnp
    import numpy as np

    import mxlower.jax as mj
    from mxlower import reference as R

    import signal

    def hang(*_):
        raise TimeoutError

    found: dict[tuple[str, str], str] = {}
    n, deadline = 0, time.monotonic() + API_SECONDS
    previous = signal.signal(signal.SIGALRM, hang)
    try:
        for case in G.api_cases(SEED, np, jnp, R, mj):
            if time.monotonic() > deadline:
                break
            n += 1
            signal.alarm(int(TIMEOUT))  # a call that never returns is a failure, not a stall
            try:
                verdict = G.api_verdict(case, np)
            except TimeoutError:
                verdict = ("hang", f"{case.name}: no answer within {TIMEOUT:g} s")
            finally:
                signal.alarm(0)
            if verdict is not None:
                found.setdefault(verdict, case.args)
    finally:
        signal.signal(signal.SIGALRM, previous)
    print(f"{n} API calls, {len(found)} distinct failures")
    assert n >= 50
    assert not found, found
