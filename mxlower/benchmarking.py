"""Shared plumbing of the scripts in ``bench/``: interleaved timing, the machine report, and
the fingerprint of the sources that builds carried to another machine are checked against.

Benchmarks never run in the test suite as timed assertions; their results, with the machine
and the date, go to BENCHMARKS.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import platform
import subprocess
import time
from collections.abc import Callable

import numpy as np

from mxlower.formats import FORMATS

__all__ = ["Session", "cpu_model", "evictor", "packed_nbytes", "round_robin"]


def cpu_model() -> str:
    """The CPU's model name as ``lscpu`` prints it (else the platform's processor string)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        out = ""
    for line in out.splitlines():
        if line.startswith("Model name:"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def evictor(mib: int = 64) -> Callable[[], object]:
    """A call that reads a ``mib`` MiB buffer (written once), so that what a timed run reads
    next comes from memory, not from the caches (64 MiB: twice a 32 MiB L3) -- as a GEMV of
    inference reads its weights; for :func:`round_robin`'s ``before``.  It reads rather than
    writes: a cache left full of dirty lines would make the timed run pay their write-backs
    (a memcpy of 9 MB measured 15-20% slower after a 64 MiB write than after a read)."""
    buf = np.ones(mib << 17, np.int64)
    return lambda: int(np.bitwise_or.reduce(buf))


def packed_nbytes(q: object) -> int:
    """The bytes XLA holds for an MX array ``q`` (:class:`mxlower.jax.MXArray`): its elements
    (f4 two per byte, every other format one per byte) and its scales -- what a memcpy
    baseline copies."""
    elements, scales = np.asarray(q.elements), np.asarray(q.scales)
    per = 2 if FORMATS[q.format].bits == 4 else 1
    return elements.size // per + scales.nbytes


def round_robin(fns: dict[str, Callable[[], object]], reps: int,
                before: Callable[[], object] | None = None) -> dict[str, float]:
    """The fastest of ``reps`` runs of each candidate, timed interleaved so that load from other
    processes spreads over all of them alike (after two warm-up calls each); ``before``, if
    given, runs untimed before each timed run (e.g. to evict the operands from the caches)."""
    best = {k: float("inf") for k in fns}
    for fn in fns.values():
        fn()
        fn()
    for _ in range(reps):
        for k, fn in fns.items():
            if before is not None:
                before()
            t0 = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


class Session:
    """Wall time and load average over a benchmark run, and its report."""

    def __init__(self) -> None:
        self.model = cpu_model()
        self.t0 = time.perf_counter()
        self.load0 = os.getloadavg()[0]

    def header(self, extra: str = "") -> str:
        cores = len(os.sched_getaffinity(0))
        return (f"CPU: {self.model}, {cores} cores; load average {self.load0:.1f} at the start, "
                f"{os.getloadavg()[0]:.1f} at the end; {time.perf_counter() - self.t0:.0f} s"
                + (f"; {extra}" if extra else ""))

    def report(self, table: str, rows: list, json_path: str | None, extra: str = "") -> None:
        """Print the header and the markdown table; save the rows as JSON when asked."""
        print(self.header(extra))
        print(table)
        if json_path:
            with open(json_path, "w") as f:
                json.dump({"cpu": self.model, "load": [self.load0, os.getloadavg()[0]],
                           "rows": rows}, f, indent=1)


def source_fingerprint(*extra: str) -> str:
    """A hash of mxlower's Python sources and the files ``extra`` (the script or test that
    builds and checks a carried build: GPU images, CUDA handlers, ahead-of-time dot kernels):
    computable without MLIR, so a machine without the MLIR stacks can refuse a build that
    came from other sources."""
    h = hashlib.sha256()
    root = pathlib.Path(__file__).parent  # the mxlower package
    for path in sorted(root.rglob("*.py")) + [pathlib.Path(p) for p in extra]:
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()
