"""mxlower.execution.peaks (what bench/bench_dot.py reports the GEMMs' share of the
machine's peak against): each probe JIT-compiles and computes what its instruction must --
PROBE_CHAINS chains of n instructions on operands of ones -- so a probe of the wrong
instruction, operands or chains fails here, not silently in a benchmark."""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import pytest

from mxlower.execution import peaks as B
from mxlower.execution import ffi_dot

#: the probes this host can run: those of its dot-kernel paths
HOST = sorted({name for path in ffi_dot.kernel_paths() for name in B.path_probes(path)})


def _operand(t: str) -> np.ndarray:
    n, e = t.removeprefix("vector<").rstrip(">").split("x")
    dt = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "i8": np.int8, "i16": np.int16}[e]
    return np.ones(int(n), dt)


@pytest.mark.parametrize("name", HOST)
def test_probe_computes_its_instruction(name):
    p = B.PROBES[name]
    buf = ctypes.create_string_buffer(256)
    a = _operand(p.in_t).view(np.uint8)
    acc_dt = np.float32 if p.acc_t.endswith("xf32>") else np.int32
    lanes = int(p.acc_t.removeprefix("vector<").split("x")[0])
    start = (np.arange(lanes) % 3).astype(acc_dt)  # each chain starts at 0, 1 or 2 per lane
    ctypes.memmove(buf, a.tobytes(), a.size)
    ctypes.memmove(ctypes.addressof(buf) + 64, a.tobytes(), a.size)
    ctypes.memmove(ctypes.addressof(buf) + 128, start.tobytes(), start.nbytes)
    n = 1001
    B.compiled_probe(name)(n, ctypes.addressof(buf))
    got = np.frombuffer(buf.raw[128:128 + start.nbytes], acc_dt)
    want = B.PROBE_CHAINS * (start + n * p.per_step)
    assert np.array_equal(got, want.astype(acc_dt)), (name, got, want)
    assert p.macs == lanes * p.per_step


def test_peaks_report_every_probe():
    got = B.peaks(HOST[:1], threads=2, steps=120_000, reps=1)
    (name, v), = got.items()
    assert name == HOST[0] and v["threads"] == 2 and v["per_ns"] > 0
    assert v["gflops"] == pytest.approx(2 * B.PROBES[name].macs * v["per_ns"])


def test_path_probes():
    assert B.path_probes("avx512") == ["f32 FMA zmm", "vdpbf16ps zmm", "vpdpbusd zmm",
                                        "vpdpwssd zmm"]
    assert B.path_probes("amx") == B.path_probes("avx512")
    assert B.path_probes("vnni") == ["f32 FMA ymm", "vpdpbusd ymm", "vpdpwssd ymm"]
    assert B.path_probes("avx2") == B.path_probes("portable") == ["f32 FMA ymm"]
    for path in ("avx512", "vnni", "portable"):
        assert all(name in B.PROBES for name in B.path_probes(path))


def test_gemm_probes():
    """The instruction each packed GEMM runs on: e3m2's pairs vpdpwssd on vnni, vdpbf16ps on
    avx512 (their exact block sums on bf16 dot products)."""
    from mxlower.lowering.dot_kernels import DotSpec
    e3m2 = ("mxfp6_e3m2", "mxfp6_e3m2")
    assert B.gemm_probe(DotSpec(*e3m2, path="vnni")) == "vpdpwssd ymm"
    assert B.gemm_probe(DotSpec(*e3m2, path="avx512")) == "vdpbf16ps zmm"
    assert B.gemm_probe(DotSpec("mxint8", "mxint8", path="avx512")) == "vpdpbusd zmm"
    assert B.gemm_probe(DotSpec("mxfp8_e4m3", "mxfp8_e4m3", path="avx512")) == "vdpbf16ps zmm"
    assert B.gemm_probe(DotSpec(*e3m2, path="amx")) is None
