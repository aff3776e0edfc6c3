#!/usr/bin/env python3
"""Mutation fuzzer of mxlower's command-line tools, over the lit corpus.

    python test/fuzz/mutate.py --cases 5000 --seed 7 --out /tmp/fuzz     # on demand
    python test/fuzz/mutate.py --cases 200 --seed 0                        # what CI runs
    python test/fuzz/mutate.py --show 17 --seed 7                          # print mutant 17
    python test/fuzz/mutate.py --handmade-only

Every mutant of the lit tests and examples (test/fuzz/corpus.py: line deletion, duplication and
swaps, spliced lines, numbers, identifiers, SSA names, element types, shapes, punctuation,
truncation) goes through ``mxlower-opt`` with no pass and with each registered pass and
pipeline, ``mxlower-translate`` when it has GPU code, and ``mxlower-run`` on the interpreter
backend when it has a function; the hand-made cases of issue 11 run first.  Any crash signal,
traceback, internal error, hang, exit status other than 0/1/2, or failure without clear error
lines is a failure (test/fuzz/harness.py); each distinct one gets a reproducer directory under
``OUT/failures/`` and a line in the summary.  Exit status: 0 when nothing failed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import corpus as C  # noqa: E402
import harness as H  # noqa: E402


def pass_names() -> list[str]:
    """Every registered pass and named pipeline (what ``mxlower-opt --list-passes`` shows)."""
    from mxlower import passes as registry

    return registry.all_names()


def build_cases(cases: int, seed: int, handmade: bool, first: int = 0,
                run_timeout: float | None = None):
    """The hand-made cases (if asked) then ``cases`` mutants of run ``seed``."""
    names = pass_names()
    if run_timeout is not None and not H.run_supports_timeout():
        run_timeout = None
    fixed = H.handmade_cases(names, run_timeout) if handmade else []
    return itertools.chain(fixed, H.mutant_cases(cases, seed, names, run_timeout, first))


def fuzz(cases: int, seed: int, out: Path, *, jobs: int = 2, timeout: float = 30.0,
         handmade: bool = True, first: int = 0, memory_gib: float = 6.0,
         verbose: bool = False) -> H.Report:
    """Run the hand-made cases and ``cases`` mutants; returns the report."""
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if verbose else None
    fuzzer = H.Fuzzer(out, jobs=jobs, timeout=timeout, memory_gib=memory_gib, log=log)
    # programs that never end are bounded by mxlower-run's own --timeout where it has one
    return fuzzer.run(build_cases(cases, seed, handmade, first, run_timeout=timeout / 3))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=200, help="mutants to run (default 200)")
    ap.add_argument("--seed", type=int, default=0, help="run seed (default 0)")
    ap.add_argument("--first", type=int, default=0, help="index of the first mutant")
    ap.add_argument("--out", type=Path, help="directory for reproducers and report.json "
                    "(default: a new temporary directory)")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                    help="workers side by side (default: 2 or the core count if fewer)")
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="seconds one tool call may take before it counts as a hang")
    ap.add_argument("--memory-gib", type=float, default=6.0,
                    help="address-space limit of each worker (0: none)")
    ap.add_argument("--handmade-only", action="store_true", help="only the hand-made cases")
    ap.add_argument("--no-handmade", action="store_true", help="skip the hand-made cases")
    ap.add_argument("--show", type=int, metavar="I",
                    help="print mutant I of --seed and its invocations, then exit")
    args = ap.parse_args(argv)

    if args.show is not None:
        case = next(H.mutant_cases(1, args.seed, pass_names(), None, args.show))
        print(f"// {case.name}: from {case.origin['from']}, "
              f"mutations {', '.join(case.origin['mutations'])}")
        for inv in case.invocations:
            print(f"// $ {inv.shell('mutant.mlir')}")
        sys.stdout.write(case.text)
        return 0

    out = args.out or Path(tempfile.mkdtemp(prefix="mxlower-fuzz-"))
    report = fuzz(0 if args.handmade_only else args.cases, args.seed, out, jobs=args.jobs,
                  timeout=args.timeout, handmade=not args.no_handmade, first=args.first,
                  memory_gib=args.memory_gib, verbose=True)
    print(report.summary())
    print(f"report: {out / 'report.json'}")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
