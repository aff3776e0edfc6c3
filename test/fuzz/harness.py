"""The fuzzer's driver: cases, long-lived workers, the oracle, reproducers and the report.

A *case* is one input text and the tool invocations it goes through: ``mxlower-opt`` with no
pass and with each registered pass and pipeline, ``mxlower-translate`` for GPU inputs, and
``mxlower-run`` on the interpreter backend for inputs with a function.  Invocations run
in-process in a worker (:mod:`worker`), ``jobs`` workers side by side, so the tools' start-up is
paid once per worker, not per invocation.

The oracle (:func:`judge`), for every invocation: no crash signal, exit status 0, 1 or 2, no
Python traceback, no "internal error", no hang (``timeout`` seconds), and on failure, error lines
only -- the first line a diagnostic (``file:line:col: error: ...``, ``error: ...``) or the tool's
one-line error (``mxlower-opt: error: ...``) -- and nothing on standard output.

A failure is rerun in a fresh process (the tool exactly as a user runs it) to confirm it; the
worker is restarted after a crash or a hang.  Failures are grouped by a signature (tool, kind,
the message with numbers and names taken out); each group keeps its smallest reproducer under
``OUT/failures/<nnn>-<slug>/``: ``input.mlir``, ``command.sh`` (the invocation), ``stderr.txt``,
``info.json``.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import random
import re
import resource
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import corpus as C

FUZZ_DIR = Path(__file__).resolve().parent
ROOT = C.ROOT
INPUT = "{input}"  # placeholder for the input file in an invocation's arguments
TOOLS = {"opt": "mxlower.tools.opt:main", "run": "mxlower.tools.run:main",
         "translate": "mxlower.tools.translate:main", "cast": "mxlower.tools.cast:main"}
#: The mxlower package's own directory.  A traceback's mxlower frames are the files under it, not
#: every path with "/mxlower/" in it: a checkout named ``mxlower`` (git's default) puts that into
#: the harness's, the stand-in tools' and the tests' paths too.
PACKAGE_DIR = os.path.realpath(os.path.dirname(importlib.util.find_spec("mxlower").origin))


def in_package(path: str) -> bool:
    """Whether a traceback frame's file lies in the mxlower package."""
    return os.path.realpath(path).startswith(PACKAGE_DIR + os.sep)


@dataclasses.dataclass(frozen=True)
class Invocation:
    """One tool call: ``tool`` is a key of TOOLS (or ``module:function``), ``args`` its command
    line with ``{input}`` where the input file goes."""

    tool: str
    args: tuple[str, ...]

    @property
    def target(self) -> str:
        return TOOLS.get(self.tool, self.tool)

    @property
    def plain(self) -> bool:
        """``mxlower-opt`` with no pass: parse, verify, print."""
        return self.tool == "opt" and all(a == INPUT or a == "--allow-unregistered-dialect"
                                          for a in self.args)

    def argv(self, input_path: str) -> list[str]:
        """The arguments with the input file's path for ``{input}`` (also inside an argument:
        ``{input}.out.npz`` names a file beside it)."""
        return [a.replace(INPUT, input_path) for a in self.args]

    def shell(self, input_path: str, abbreviate: bool = False) -> str:
        """The command as a user would type it (long arguments shortened if asked)."""
        prog = f"mxlower-{self.tool}" if self.tool in TOOLS else f"python -c <{self.target}>"
        args = [shlex.quote(a) for a in self.argv(input_path)]
        if abbreviate:
            args = [a if len(a) <= 120 else f"{a[:60]}...({len(a)} chars)" for a in args]
        return " ".join([prog, *args])


@dataclasses.dataclass
class Case:
    """An input and the invocations it goes through."""

    name: str
    text: str
    invocations: list[Invocation]
    origin: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Outcome:
    """What one invocation did."""

    rc: int | None  # exit status; negative: killed by that signal; None: timed out
    stdout_bytes: int
    stderr: str
    seconds: float
    where: str  # "worker" or "fresh process"

    @property
    def timed_out(self) -> bool:
        return self.rc is None


# --- the oracle ------------------------------------------------------------------------------

_HEAD_RE = re.compile(r"^(?:.+:\d+:\d+: |mxlower-(?:opt|run|translate|cast): |)"
                      r"(error|warning|note|remark): \S")
_TRACEBACK = "Traceback (most recent call last)"
_INTERNAL_RE = re.compile(r"internal error(?: in pass '([^']*)')?: (\w+(?:\.\w+)*)?")
_FRAME_RE = re.compile(r'^  File "([^"]+)", line \d+, in (\S+)', re.M)
# LLVM's own last words before an abort
_NATIVE_RE = re.compile(r"LLVM ERROR: .*|Assertion `.*' failed|UNREACHABLE executed at \S+")
_FAULT_FRAME_RE = re.compile(r'^  File "([^"]+)", line \d+ in (\S+)', re.M)  # faulthandler's


def _signal_name(n: int) -> str:
    try:
        return signal.Signals(n).name
    except ValueError:
        return f"signal {n}"


def _normalize(msg: str) -> str:
    """A message with locations, numbers, quoted names and types taken out, for grouping."""
    msg = re.sub(r"^.*?:\d+:\d+: ", "", msg)
    msg = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "'_'", msg)
    msg = re.sub(r"[%@^#][\w$.#]*", "%_", msg)
    msg = re.sub(r"<[^<>]*>", "<_>", msg)
    msg = re.sub(r"\b\d+\b|0x[0-9a-fA-F]+", "N", msg)
    return msg.strip()[:160]


def _native(msg: str) -> str:
    """An LLVM fatal message for grouping: "LLVM ERROR: Unsupported op" without the op."""
    return _normalize(": ".join(msg.split(": ")[:2]))


def _heads(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if _HEAD_RE.match(ln)]


def judge(inv: Invocation, out: Outcome) -> tuple[str, str] | None:
    """None if ``out`` is acceptable, else (kind, signature detail)."""
    err = out.stderr
    if out.timed_out:
        return "hang", "no answer within the timeout"
    if out.rc < 0:
        heads = [h for h in _heads(err) if "error" in h]
        last = _normalize(heads[-1]) if heads else "no error printed"
        native = _NATIVE_RE.search(err)
        if native:  # LLVM's own message names the defect better than where Python was
            return "crash", f"killed by {_signal_name(-out.rc)} ({_native(native.group())})"
        # faulthandler lists the crashing thread's stack innermost first
        frames = [f for f in _FAULT_FRAME_RE.findall(err) if Path(f[0]).name != "worker.py"]
        frames = [f for f in frames if in_package(f[0])] or frames
        where = f" in {Path(frames[0][0]).name}:{frames[0][1]}" if frames else ""
        return "crash", f"killed by {_signal_name(-out.rc)}{where} ({last})"
    if _TRACEBACK in err:
        frames = [f for f in _FRAME_RE.findall(err) if in_package(f[0])]
        where = (f" in {Path(frames[-1][0]).name}:{frames[-1][1]}" if frames else "")
        last = err.rstrip().splitlines()[-1] if err.strip() else ""
        return "traceback", f"{last.split(':')[0]}{where}"
    m = _INTERNAL_RE.search(err)
    if m:
        return "internal-error", f"in pass '{m.group(1) or '?'}': {m.group(2) or '?'}"
    if out.rc not in (0, 1, 2):
        return "exit-code", f"exit status {out.rc}"
    if out.rc == 0:
        return None
    lines = [ln for ln in err.splitlines() if ln.strip()]
    while lines and (lines[0].startswith("usage:") or lines[0].startswith(" ")):
        lines.pop(0)  # argparse's usage lines precede the tool's one-line error
    if not lines or not _HEAD_RE.match(lines[0]):
        first = lines[0] if lines else "(nothing on stderr)"
        native = _NATIVE_RE.match(first)
        return "unclear-error", f"first line: {_native(first) if native else _normalize(first)}"
    if not any(h.split(": ")[0].endswith("error") or ": error: " in h for h in _heads(err)):
        return "unclear-error", "exit status 1 or 2 without an error line"
    if out.stdout_bytes and inv.tool in ("opt", "translate"):
        return "output-on-failure", f"{out.stdout_bytes} bytes on stdout with exit status {out.rc}"
    return None


# --- running invocations -----------------------------------------------------------------------

def _limit_memory(limit_bytes: int):
    def apply() -> None:
        if limit_bytes > 0:
            resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))
        os.setsid()  # killing the worker's group also ends what it started (llc, mlir-translate)
    return apply


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


_FRESH = ("import sys; sys.path.insert(0, {dir!r}); from {mod} import {fn} as main; "
          "sys.exit(main(sys.argv[1:]))")


def run_fresh(inv: Invocation, input_path: str, timeout: float, memory: int) -> Outcome:
    """One invocation in a fresh interpreter, exactly as its console script runs it."""
    mod, _, fn = inv.target.partition(":")
    cmd = [sys.executable, "-X", "faulthandler", "-c", _FRESH.format(dir=str(FUZZ_DIR), mod=mod, fn=fn),
           *inv.argv(input_path)]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=Path(input_path).parent, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_limit_memory(memory))
    try:
        out, err = proc.communicate(timeout=timeout)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        out, err = proc.communicate()
        rc = None
    return Outcome(rc, len(out), err.decode("utf-8", "replace")[-200_000:],
                   time.monotonic() - t0, "fresh process")


class Worker:
    """A long-lived worker process (worker.py) running invocations in-process."""

    def __init__(self, workdir: Path, timeout: float, memory: int, recycle: int = 400):
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.timeout, self.memory, self.recycle = timeout, memory, recycle
        self.proc: subprocess.Popen | None = None
        self.served = 0
        self.starts = 0

    def _start(self) -> None:
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        log = open(self.dir / "worker.log", "ab")  # noqa: SIM115  (owned by the process)
        self.proc = subprocess.Popen(
            [sys.executable, str(FUZZ_DIR / "worker.py"), str(req_r), str(resp_w)],
            cwd=self.dir, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            pass_fds=(req_r, resp_w), preexec_fn=_limit_memory(self.memory))
        log.close()
        os.close(req_r)
        os.close(resp_w)
        self.req = os.fdopen(req_w, "w", encoding="utf-8", buffering=1)
        self.resp = resp_r
        self.buf = b""
        self.served = 0
        self.starts += 1

    def stop(self) -> None:
        """End the worker (closing its request pipe lets it finish on its own)."""
        if self.proc is None:
            return
        try:
            self.req.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            _kill_group(self.proc)
        os.close(self.resp)
        self.proc = None

    def _dead(self) -> None:
        try:
            self.req.close()
        except OSError:
            pass
        os.close(self.resp)
        self.proc = None

    def run(self, inv: Invocation, input_path: str, case_id: str) -> Outcome:
        """Run one invocation; on a crash or a hang the worker is gone and the next call starts
        a new one."""
        if self.proc is not None and self.served >= self.recycle:
            self.stop()
        if self.proc is None:
            self._start()
        out, err = self.dir / "stdout.txt", self.dir / "stderr.txt"
        t0 = time.monotonic()
        try:
            self.req.write(json.dumps({"id": case_id, "target": inv.target,
                                       "args": inv.argv(input_path), "out": str(out),
                                       "err": str(err)}) + "\n")
        except BrokenPipeError:
            pass
        self.served += 1
        rc = self._answer(t0)
        if rc == "timeout":
            _kill_group(self.proc)
            self._dead()
            code: int | None = None
        elif rc == "died":
            self.proc.wait()
            code = self.proc.returncode if self.proc.returncode < 0 else -256 - self.proc.returncode
            self._dead()
        else:
            code = rc
        stderr = err.read_bytes()[-200_000:].decode("utf-8", "replace") if err.exists() else ""
        size = out.stat().st_size if out.exists() else 0
        if code is not None and code <= -256:  # the worker exited, not a signal: judge afresh
            stderr += f"\n(worker exited with status {-256 - code})"
        return Outcome(code, size, stderr, time.monotonic() - t0, "worker")

    def _answer(self, t0: float) -> int | str:
        while b"\n" not in self.buf:
            left = self.timeout - (time.monotonic() - t0)
            if left <= 0:
                return "timeout"
            ready, _, _ = select.select([self.resp], [], [], left)
            if not ready:
                return "timeout"
            chunk = os.read(self.resp, 65536)
            if not chunk:
                return "died"
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return int(json.loads(line)["rc"])


# --- cases ---------------------------------------------------------------------------------

def run_supports_timeout() -> bool:
    """Whether mxlower-run has a --timeout option (the fuzzer then bounds programs with it)."""
    from mxlower.tools import run as run_tool

    parser = run_tool.build_parser() if hasattr(run_tool, "build_parser") else None
    return parser is not None and "--timeout" in parser._option_string_actions  # noqa: SLF001


_FUNC_RE = re.compile(r"func\.func\s+(?:(?:public|private|nested)\s+)?@([\w$.]+)")


def invocations_for(text: str, rng: random.Random, pass_names: list[str],
                    run_timeout: float | None) -> list[Invocation]:
    """The tool calls one mutant goes through (drawn from ``rng``: the pass flags, whether
    unregistered dialects are allowed, which function mxlower-run runs, what translate emits)."""
    extra = ("--allow-unregistered-dialect",) if rng.random() < 0.25 else ()
    invs = [Invocation("opt", (INPUT, *extra))]
    invs += [Invocation("opt", (INPUT, f"--{name}", *extra)) for name in pass_names]
    if rng.random() < 0.15:
        invs.append(Invocation("opt", (INPUT, "-p", mutate_pipeline(rng, pass_names), *extra)))
    if "gpu" in text or rng.random() < 0.05:
        emit = rng.choice(("llvmir", "llvmir", "mlir", "ptx"))
        invs.append(Invocation("translate", (INPUT, "--chip=sm_100a", f"--emit={emit}")))
    funcs = _FUNC_RE.findall(text)
    if funcs:
        fn = "main" if "main" in funcs else rng.choice(funcs)
        args = [INPUT, "--backend=interpreter", "-p", "builtin.module(mxlower-mx-to-stablehlo)",
                "--no-print", "-f", fn]
        if run_timeout:
            args += ["--timeout", f"{run_timeout:g}"]
        invs.append(Invocation("run", tuple(args)))
    return invs


def mutate_pipeline(rng: random.Random, pass_names: list[str]) -> str:
    """A pass pipeline string, sometimes broken: options, nesting and brackets changed."""
    names = rng.sample(pass_names, k=min(len(pass_names), rng.randint(1, 3)))
    body = ",".join(names)
    if rng.random() < 0.5:
        body = rng.choice(("func.func(canonicalize)", "cse", "func.func(" + body + ")")) + ","
        body += ",".join(names)
    text = f"builtin.module({body})"
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(text) + 1)
        text = text[:i] + rng.choice(("(", ")", "{", "}", "{x=1}", "{scale-mode=}", ",", "=",
                                      "builtin.module(", "func.func(", "\"", " ")) + text[i:]
    return text


def handmade_cases(pass_names: list[str], run_timeout: float | None) -> list[Case]:
    """The hand-made cases of issue 11: each must end in clear error lines (or success)."""
    rt = ("--timeout", f"{run_timeout:g}") if run_timeout else ()
    dense = (ROOT / "examples" / "dense_relu.mlir").read_text(encoding="utf-8")
    deep_pipe = C.deep_pipeline()
    interp = ("--backend=interpreter", "--no-print")
    return [
        Case("deep-regions", C.deep_regions(), [
            Invocation("opt", (INPUT,)),
            Invocation("opt", (INPUT, "--mxlower-mx-to-stablehlo")),
            Invocation("run", (INPUT, *interp, *rt)),
            Invocation("translate", (INPUT, "--chip=sm_100a", "--emit=llvmir")),
        ]),
        Case("deep-pipeline", dense, [
            Invocation("opt", (INPUT, "-p", deep_pipe)),
            Invocation("run", (INPUT, "-p", deep_pipe, *interp, *rt)),
            Invocation("translate", (INPUT, "-p", deep_pipe, "--chip=sm_100a")),
        ]),
        Case("truncated-resource-blob", C.truncated_resource_global(), [
            Invocation("opt", (INPUT, "--allow-unregistered-dialect")),
            Invocation("opt", (INPUT,)),
            Invocation("opt", (INPUT, "--mxlower-widen-bool-memrefs")),
            Invocation("run", (INPUT, *interp, *rt)),
            Invocation("translate", (INPUT, "--chip=sm_100a", "--emit=llvmir")),
        ]),
        Case("huge-vector", C.huge_vector(), [
            Invocation("opt", (INPUT, "--mxlower-stablehlo-to-llvm")),
            Invocation("opt", (INPUT, "--convert-vector-to-llvm")),
            Invocation("run", (INPUT, "--backend=llvm", "--no-print", *rt)),
            Invocation("translate", (INPUT, "--emit=llvmir")),
        ]),
        Case("block-scaled-dot-list-dequantize-type", C.block_scaled_dot_list_dequantize_type(), [
            Invocation("opt", (INPUT, "--mxlower-legalize-xla-mx")),
            Invocation("opt", (INPUT, "--mxlower-mx-to-stablehlo")),
            Invocation("run", (INPUT, "-p", "builtin.module(mxlower-mx-to-stablehlo)", *interp,
                               *rt)),
        ]),
    ]


def mutant_cases(count: int, seed: int, pass_names: list[str],
                 run_timeout: float | None, first: int = 0) -> Iterator[Case]:
    """Mutants ``first`` .. ``first + count - 1`` of run ``seed``, with their invocations."""
    seeds = C.load_corpus()
    pool = seeds + [C.Seed("handmade:truncated-resource-blob", C.truncated_resource_global()),
                    C.Seed("handmade:block-scaled-dot",
                           C.block_scaled_dot_list_dequantize_type())]
    ctx = C.MutationContext.of(pool)
    for i in range(first, first + count):
        m = C.mutant(ctx, pool, seed, i)
        rng = random.Random(f"{seed}/{i}/invocations")
        yield Case(f"mutant-{seed}-{i}", m.text,
                   invocations_for(m.text, rng, pass_names, run_timeout),
                   {"seed": seed, "index": i, "from": m.seed, "mutations": list(m.mutations)})


# --- the run -------------------------------------------------------------------------------

@dataclasses.dataclass
class Failure:
    """One distinct failure (a signature) and its smallest reproducer."""

    signature: str
    kind: str
    case: str
    invocation: Invocation
    outcome: Outcome
    fresh: Outcome | None
    directory: Path
    count: int = 1
    size: int = 0

    def line(self) -> str:
        fresh = ("" if self.fresh is None else
                 f"; fresh process: {describe(self.fresh)}")
        return (f"[{self.kind}] {self.signature}\n    x{self.count}, reproducer "
                f"{self.directory / 'input.mlir'}\n    $ "
                f"{self.invocation.shell(str(self.directory / 'input.mlir'), True)}\n"
                f"    {self.outcome.where}: {describe(self.outcome)}{fresh}")


def describe(out: Outcome) -> str:
    """An outcome in a few words."""
    if out.timed_out:
        return f"no answer after {out.seconds:.0f} s"
    if out.rc < 0 and out.rc > -256:
        return f"killed by {_signal_name(-out.rc)}"
    if out.rc <= -256:
        return f"worker exited with status {-256 - out.rc}"
    return f"exit {out.rc}"


@dataclasses.dataclass
class Report:
    """Counts and the distinct failures of a run."""

    cases: int = 0
    invocations: int = 0
    seconds: float = 0.0
    worker_starts: int = 0
    exits: dict[str, int] = dataclasses.field(default_factory=dict)  # "mxlower-opt exit 0": n
    failures: dict[str, Failure] = dataclasses.field(default_factory=dict)

    def summary(self) -> str:
        head = (f"{self.cases} cases, {self.invocations} tool invocations in {self.seconds:.1f} s "
                f"({self.worker_starts} worker starts); {len(self.failures)} distinct failures")
        exits = "exits: " + ", ".join(f"{k} x{v}" for k, v in sorted(self.exits.items()))
        return "\n".join([head, exits, *(f.line() for f in self.failures.values())])


class Fuzzer:
    """Runs cases on ``jobs`` workers and collects failures under ``out``."""

    def __init__(self, out: Path, jobs: int = 2, timeout: float = 30.0,
                 memory_gib: float = 6.0, confirm: bool = True, log=None):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.jobs = max(1, jobs)
        self.timeout = timeout
        self.memory = int(memory_gib * 2**30)
        self.confirm = confirm
        self.report = Report()
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.log = log

    def run(self, cases: Iterable[Case]) -> Report:
        """Run every case; returns the report (also written to OUT/report.json)."""
        t0 = self.started = time.monotonic()
        it = iter(cases)
        workers = [Worker(self.out / "work" / f"w{k}", self.timeout, self.memory)
                   for k in range(self.jobs)]
        threads = [threading.Thread(target=self._loop, args=(w, it)) for w in workers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for w in workers:
            w.stop()
            self.report.worker_starts += w.starts
        self.report.seconds = time.monotonic() - t0
        self._write_report()
        return self.report

    def _next(self, it: Iterator[Case]) -> Case | None:
        with self.lock:
            return next(it, None)

    def _loop(self, worker: Worker, it: Iterator[Case]) -> None:
        while (case := self._next(it)) is not None:
            path = worker.dir / "input.mlir"
            path.write_text(case.text, encoding="utf-8")
            skip_passes = False
            for k, inv in enumerate(case.invocations):
                if skip_passes and inv.tool == "opt":
                    continue
                outcome = worker.run(inv, str(path), case.name)
                fresh = None
                if outcome.rc is not None and outcome.rc <= -256:
                    # the worker exited by itself (no signal): only a fresh run can tell
                    outcome = fresh = run_fresh(inv, str(path), self.timeout, self.memory)
                verdict = judge(inv, outcome)
                if verdict is not None:
                    self._record(case, inv, outcome, verdict, fresh, path)
                if k == 0 and inv.plain and outcome.rc == 1 and case.name.startswith("mutant-"):
                    # the mutant does not parse or verify: every pass would stop at the same
                    # error; mxlower-run and -translate still read it through their own paths
                    skip_passes = True
                key = f"{inv.tool if inv.tool in TOOLS else inv.target} {describe(outcome)}"
                with self.lock:
                    self.report.invocations += 1
                    self.report.exits[key] = self.report.exits.get(key, 0) + 1
            with self.lock:
                self.report.cases += 1
                if self.log and self.report.cases % 50 == 0:
                    self.log(f"  {self.report.cases} cases, {self.report.invocations} "
                             f"invocations, {len(self.report.failures)} distinct failures, "
                             f"{time.monotonic() - self.started:.0f} s")

    def _record(self, case: Case, inv: Invocation, outcome: Outcome, verdict: tuple[str, str],
                fresh: Outcome | None, path: Path) -> None:
        kind, detail = verdict
        what = inv.tool if inv.tool in TOOLS else inv.target
        signature = f"mxlower-{what}: {detail}" if inv.tool in TOOLS else f"{what}: {detail}"
        if not case.name.startswith("mutant-"):  # each hand-made case is its own known defect
            signature = f"{case.name}: {signature}"
        size = len(case.text)
        with self.lock:
            known = self.report.failures.get(signature)
            if known is not None:
                known.count += 1
                if size >= known.size:
                    return
        # a new failure, or a smaller reproducer of a known one: confirm in a fresh process
        if fresh is None and self.confirm:
            fresh = run_fresh(inv, str(path), self.timeout, self.memory)
        with self.lock:
            known = self.report.failures.get(signature)
            if known is None:
                slug = re.sub(r"[^a-z0-9]+", "-", f"{kind}-{what}-{detail}".lower())[:60]
                directory = (self.out / "failures" /
                             f"{len(self.report.failures):03d}-{slug.strip('-')}")
                failure = Failure(signature, kind, case.name, inv, outcome, fresh, directory,
                                  1, size)
                self.report.failures[signature] = failure
                if self.log:
                    self.log("FAILURE " + failure.line())
            elif size < known.size:
                failure = known
                failure.case, failure.invocation, failure.outcome = case.name, inv, outcome
                failure.fresh, failure.size = fresh, size
            else:
                return
            self._write_reproducer(failure, case)

    @staticmethod
    def _write_reproducer(f: Failure, case: Case) -> None:
        d = f.directory
        d.mkdir(parents=True, exist_ok=True)
        (d / "input.mlir").write_text(case.text, encoding="utf-8")
        (d / "stderr.txt").write_text(f.outcome.stderr, encoding="utf-8")
        (d / "command.sh").write_text(
            f"#!/bin/sh\n# {f.signature}\ncd \"$(dirname \"$0\")\"\n"
            f"{f.invocation.shell('input.mlir')}\n", encoding="utf-8")
        info = {"signature": f.signature, "kind": f.kind, "case": f.case, "origin": case.origin,
                "tool": f.invocation.target, "args": list(f.invocation.args),
                "outcome": dataclasses.asdict(f.outcome) | {"stderr": None},
                "fresh": None if f.fresh is None else
                dataclasses.asdict(f.fresh) | {"stderr": f.fresh.stderr[-4000:]}}
        (d / "info.json").write_text(json.dumps(info, indent=1), encoding="utf-8")

    def _write_report(self) -> None:
        rep = self.report
        data = {"cases": rep.cases, "invocations": rep.invocations, "seconds": rep.seconds,
                "worker_starts": rep.worker_starts, "exits": rep.exits,
                "failures": [{"signature": f.signature, "kind": f.kind, "count": f.count,
                              "case": f.case, "reproducer": str(f.directory / "input.mlir"),
                              "command": f.invocation.shell(str(f.directory / "input.mlir"),
                                                            True),
                              "outcome": describe(f.outcome),
                              "fresh": None if f.fresh is None else describe(f.fresh)}
                             for f in rep.failures.values()]}
        (self.out / "report.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
