"""The fuzzer's long-lived worker: runs tool invocations in-process, one after another.

Started by :mod:`harness` as ``python worker.py REQUEST_FD RESPONSE_FD``.  Each request is one JSON
line ``{"id": ..., "target": "mxlower.tools.opt:main", "args": [...], "out": PATH,
"err": PATH}``: the worker points
file descriptors 1 and 2 at the two files (so what MLIR's C++ code prints lands there too, even
when the process dies mid-case), calls the target function with ``args`` and answers one JSON
line ``{"id": ..., "rc": ...}``.  An exception escaping ``main`` is printed as the interpreter
would print it (a traceback, which the oracle then reports) with exit status 1, as a standalone
tool would exit.  Standard input is /dev/null, so a tool reading stdin cannot eat the requests.

A crash signal kills the worker (faulthandler prints the Python stack into the case's stderr
first, which names the call that crashed); the harness sees the response pipe close, reruns the case in a
fresh process to confirm, and starts a new worker.
"""

from __future__ import annotations

import faulthandler
import importlib
import json
import os
import sys
import traceback


def _run(target: str, args: list[str]) -> int:
    module, _, function = target.partition(":")
    main = getattr(importlib.import_module(module), function)
    try:
        rc = main(list(args))
    except SystemExit as e:
        if e.code is None:
            return 0
        if isinstance(e.code, int):
            return e.code
        sys.stderr.write(f"{e.code}\n")
        return 1
    except BaseException:  # noqa: BLE001  (what escapes a tool is what the oracle looks for)
        traceback.print_exc()
        return 1
    return 0 if rc is None else int(rc)


def serve(req_fd: int, resp_fd: int) -> None:
    """Answer requests until the request pipe closes."""
    requests = os.fdopen(req_fd, "r", encoding="utf-8")
    responses = os.fdopen(resp_fd, "w", encoding="utf-8", buffering=1)
    saved_out, saved_err = os.dup(1), os.dup(2)
    # on a crash signal, the Python stack goes to fd 2: the case's stderr file at that moment
    faulthandler.enable(file=sys.stderr)
    for line in requests:
        req = json.loads(line)
        with open(req["out"], "wb") as out, open(req["err"], "wb") as err:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(out.fileno(), 1)
            os.dup2(err.fileno(), 2)
            try:
                rc = _run(req["target"], req["args"])
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os.dup2(saved_out, 1)
                os.dup2(saved_err, 2)
        responses.write(json.dumps({"id": req["id"], "rc": rc}) + "\n")


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
