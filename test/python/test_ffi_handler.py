"""The generated XLA FFI handlers, called directly through the C ABI and through JAX.

The handler of :mod:`mxlower.execution.ffi` answers XLA's metadata query, ignores stages other
than execute, and turns bad calls (wrong counts, dtypes, ranks, shapes) into FFI errors that
JAX raises -- checked here with call frames built from :mod:`mxlower.execution.ffi_abi` and a
stand-in ``XLA_FFI_Error_Create``, and through ``jax.ffi.ffi_call``.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
import pytest

from mxlower.bindings import upstream

pytestmark = pytest.mark.skipif(not upstream.available(), reason="upstream MLIR not installed")

jax = pytest.importorskip("jax")
jnp = jax.numpy

from mxlower.execution import ffi  # noqa: E402
from mxlower.execution import ffi_abi as abi  # noqa: E402
from mxlower.lowering.mx_kernels import KernelSpec  # noqa: E402

SPEC = KernelSpec("quantize", "mxfp8_e4m3")


@pytest.fixture(scope="module")
def kernel():
    return ffi.compile_kernel(SPEC)


class FakeApi:
    """An ``XLA_FFI_Api`` whose ``XLA_FFI_Error_Create`` records the error it is asked for and
    whose thread pool has ``threads`` threads and runs a scheduled task on a new Python thread
    ("thread"), on one that starts only when ``go`` is set ("late"), at once in the caller
    ("inline"), or refuses it ("refuse", an error)."""

    def __init__(self, threads: int = 1, schedule: str = "thread"):
        self.errors: list[tuple[int, str]] = []
        self.destroyed: list[int] = []
        self.scheduled = 0
        self.threads_started: list[threading.Thread] = []
        self.threads, self.mode = threads, schedule
        self.go = threading.Event()
        self._fns = [abi.ErrorCreate(self._record), abi.ErrorDestroy(self._destroy),
                     abi.ThreadPoolSchedule(self._schedule),
                     abi.ThreadPoolNumThreads(self._num_threads)]
        self.api = abi.Api(struct_size=ctypes.sizeof(abi.Api),
                           XLA_FFI_Error_Create=self._fns[0], XLA_FFI_Error_Destroy=self._fns[1],
                           XLA_FFI_ThreadPool_Schedule=self._fns[2],
                           XLA_FFI_ThreadPool_NumThreads=self._fns[3])

    def _record(self, args):
        a = args.contents
        assert a.struct_size == abi.struct_size(abi.ErrorCreateArgs, "errc")
        self.errors.append((a.errc, a.message.decode()))
        return 0xE0  # any non-null pointer stands for the error

    def _destroy(self, args):
        self.destroyed.append(args.contents.error)

    def _num_threads(self, args):
        a = args.contents
        assert a.struct_size == abi.struct_size(abi.ThreadPoolNumThreadsArgs, "num_threads")
        a.num_threads[0] = self.threads
        return None

    def _schedule(self, args):
        a = args.contents
        assert a.struct_size == abi.struct_size(abi.ThreadPoolScheduleArgs, "data")
        self.scheduled += 1
        if self.mode == "refuse":
            return 0xE1
        task = abi.Task(a.task)
        if self.mode == "inline":
            task(a.data)
        else:
            def run(data=a.data):
                if self.mode == "late":
                    self.go.wait()
                task(data)

            t = threading.Thread(target=run)
            t.start()
            self.threads_started.append(t)
        return None


def _buffer(array: np.ndarray, dtype_name: str, keep: list, shape=None) -> ctypes.c_void_p:
    """An XLA_FFI_Buffer of ``array``'s data with ``shape`` (default: the array's)."""
    shape = array.shape if shape is None else shape
    dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    b = abi.Buffer(struct_size=ctypes.sizeof(abi.Buffer), dtype=abi.DTYPES[dtype_name],
                   data=array.ctypes.data, rank=len(shape), dims=dims)
    keep += [dims, b, array]
    return ctypes.cast(ctypes.pointer(b), ctypes.c_void_p)


def _frame(api: FakeApi, args, rets, *, stage=abi.EXECUTE, keep: list) -> abi.CallFrame:
    def group(cls, bufs, field):
        types = (ctypes.c_int32 * max(len(bufs), 1))(*([abi.BUFFER] * len(bufs)))
        ptrs = (ctypes.c_void_p * max(len(bufs), 1))(*bufs)
        keep.extend([types, ptrs])
        return cls(struct_size=ctypes.sizeof(cls), size=len(bufs), types=types,
                   **{field: ptrs})

    return abi.CallFrame(struct_size=abi.struct_size(abi.CallFrame, "attrs"),
                         api=ctypes.addressof(api.api), stage=stage,
                         args=group(abi.Args, args, "args"), rets=group(abi.Rets, rets, "rets"))


def test_abi_struct_sizes_match_the_header():
    # XLA_FFI_STRUCT_SIZE values of c_api.h (FFI API 0.3) on a 64-bit target
    assert abi.struct_size(abi.CallFrame, "attrs") == 168
    assert abi.struct_size(abi.Metadata, "traits") == 36
    assert abi.struct_size(abi.ApiVersion, "minor_version") == 24
    assert abi.struct_size(abi.ErrorCreateArgs, "errc") == 28
    assert abi.Buffer.dims.offset == 40 and abi.CallFrame.args.offset == 40
    assert abi.Api.XLA_FFI_Error_Create.offset == 48


def test_metadata_query_is_answered(kernel):
    api = FakeApi()
    keep: list = []
    frame, md = abi.metadata_frame(ctypes.addressof(api.api), keep)
    md.traits = 0xFFFF
    assert kernel.handler(ctypes.addressof(frame)) is None  # success: a null error
    assert (md.api_version.major_version, md.api_version.minor_version) == (0, 3)
    assert md.api_version.struct_size == abi.struct_size(abi.ApiVersion, "minor_version")
    assert md.traits == 0
    assert api.errors == []


def test_too_small_metadata_is_an_error(kernel):
    api = FakeApi()
    keep: list = []
    frame, _ = abi.metadata_frame(ctypes.addressof(api.api), keep, metadata_size=8)
    assert kernel.handler(ctypes.addressof(frame)) == 0xE0
    assert api.errors == [(abi.ERROR_INVALID_ARGUMENT,
                           f"{SPEC.name}: XLA_FFI_Metadata is smaller than this handler's "
                           "(FFI API 0.3)")]


def test_execute_stage_runs_the_kernel_other_stages_do_nothing(kernel):
    from mxlower import reference

    x = np.linspace(-3, 5, 128, dtype=np.float32).reshape(2, 64)
    api = FakeApi()
    for stage in (0, 1, 2, abi.EXECUTE):
        q = np.zeros((2, 64), np.uint8)
        s = np.zeros((2, 2), np.uint8)
        keep: list = []
        frame = _frame(api, [_buffer(x, "float32", keep)],
                       [_buffer(q, "float8_e4m3fn", keep), _buffer(s, "float8_e8m0fnu", keep)],
                       stage=stage, keep=keep)
        assert kernel.handler(ctypes.addressof(frame)) is None
        if stage != abi.EXECUTE:
            assert not q.any() and not s.any()
    rq, rs = reference.quantize(x, "mxfp8_e4m3")
    np.testing.assert_array_equal(q, rq.view(np.uint8))
    np.testing.assert_array_equal(s, rs.view(np.uint8))
    assert api.errors == []


@pytest.mark.parametrize("case, message", [
    ("dtype", "argument 0 (x) must have dtype float32"),
    ("rank", "result 0 (elements) must have x's shape"),
    ("scales", "result 1 (scales) must have x's shape with the last dimension divided by 32"),
    ("block", "the block size 32 must divide the last dimension of x"),
    ("scalar", "x must have at least one dimension"),
    ("count", "expected 2 results (elements, scales)"),
    ("frame", "XLA_FFI_CallFrame is smaller than this handler's (FFI API 0.3)"),
])
def test_bad_calls_are_ffi_errors(kernel, case, message):
    api = FakeApi()
    keep: list = []
    x = np.ones((2, 64), np.float32)
    q, s = np.zeros((2, 64), np.uint8), np.zeros((2, 2), np.uint8)
    xd, qd, sd = "float32", "float8_e4m3fn", "float8_e8m0fnu"
    if case == "dtype":
        xd = "float16"
    elif case == "rank":
        q = np.zeros((128,), np.uint8)
    elif case == "scales":
        s = np.zeros((2, 3), np.uint8)
    elif case == "block":
        x, q, s = np.ones((2, 48), np.float32), np.zeros((2, 48), np.uint8), s
    elif case == "scalar":
        x = np.ones((), np.float32)
    rets = [_buffer(q, qd, keep), _buffer(s, sd, keep)]
    frame = _frame(api, [_buffer(x, xd, keep)], rets[:1] if case == "count" else rets,
                   keep=keep)
    if case == "frame":
        frame.struct_size = 40
    assert kernel.handler(ctypes.addressof(frame)) == 0xE0
    assert api.errors == [(abi.ERROR_INVALID_ARGUMENT, f"{SPEC.name}: {message}")]
    assert not q.any() and not s.any()  # nothing written


def test_bad_calls_through_jax_raise_not_crash():
    target = ffi.register(SPEC)
    f32 = jnp.ones((4, 64), jnp.float32)
    good = [jax.ShapeDtypeStruct((4, 64), jnp.float8_e4m3fn),
            jax.ShapeDtypeStruct((4, 2), jnp.float8_e8m0fnu)]
    cases = [
        ((f32.astype(jnp.bfloat16),), good, "argument 0 (x) must have dtype float32"),
        ((f32,), [good[0], jax.ShapeDtypeStruct((4, 2), jnp.uint8)],
         "result 1 (scales) must have dtype float8_e8m0fnu"),
        ((f32,), [jax.ShapeDtypeStruct((2, 128), jnp.float8_e4m3fn), good[1]],
         "result 0 (elements) must have x's shape"),
        ((f32, f32), good, "expected 1 argument (x)"),
    ]
    for args, outs, message in cases:
        with pytest.raises(jax.errors.JaxRuntimeError, match=r"INVALID_ARGUMENT: "
                           + SPEC.name + ": " + message.replace("(", r"\(").replace(")", r"\)")):
            jax.block_until_ready(jax.jit(lambda *a: jax.ffi.ffi_call(target, outs)(*a))(*args))
    # the target still works afterwards
    q, s = jax.jit(lambda x: jax.ffi.ffi_call(target, good)(x))(f32)
    assert np.asarray(s).view(np.uint8).tolist() == [[127 - 8] * 2] * 4


def test_compiled_once_per_process():
    a = ffi.compile_kernel(SPEC)
    assert ffi.compile_kernel(KernelSpec("quantize", "mxfp8_e4m3", "f32", "floor")) is a
    assert a.build_s > 0 and a.compile_s > 0
    assert ffi.register(SPEC) == ffi.register(SPEC) == SPEC.name


def test_handler_text_decodes_the_frame_with_header_offsets():
    text = ffi.handler_text(KernelSpec("quantize", "nvfp4", global_scale=True))
    assert "llvm.func @mxlower_quantize_nvfp4_f32_k16_g_ffi(%frame: !llvm.ptr) -> !llvm.ptr" in text
    assert f"[{abi.CallFrame.stage.offset}] : (!llvm.ptr) -> !llvm.ptr, i8" in text
    assert "expected 2 arguments (x, global_scale)" in text
    assert "argument 1 (global_scale) must have shape ()" in text


def test_a_late_thread_leaves_its_chunks_to_the_caller():
    """Chunks are claimed one at a time: a pool thread that has not started when the caller
    runs out of work (a loaded machine) holds nothing, so the call returns without it, with
    every chunk done; the late task then finds no chunk left and frees nothing twice."""
    from mxlower import reference

    spec = KernelSpec("quantize", "mxint8", scale_mode="rceil")
    kernel = ffi.compile_kernel(spec)
    rows = 5 * ffi.THREAD_CHUNK // 1024 + 3  # 5 chunks for 2 workers
    x = np.random.default_rng(8).standard_normal((rows, 1024)).astype(np.float32)
    q = np.zeros(x.shape, np.int8)
    s = np.zeros((rows, 32), np.uint8)
    api = FakeApi(2, "late")
    keep: list = []
    frame = _frame(api, [_buffer(x, "float32", keep)],
                   [_buffer(q, "int8", keep), _buffer(s, "float8_e8m0fnu", keep)], keep=keep)
    assert kernel.handler(ctypes.addressof(frame)) is None
    assert api.scheduled == 1 and all(t.is_alive() for t in api.threads_started)
    rq, rs = reference.quantize(x, "mxint8", scale_mode="rceil")
    np.testing.assert_array_equal(s, rs.view(np.uint8))
    np.testing.assert_array_equal(q, rq)
    api.go.set()
    for t in api.threads_started:
        t.join()
    assert api.errors == []


@pytest.mark.parametrize("threads, mode", [(1, "thread"), (4, "thread"), (3, "inline"),
                                           (4, "refuse"), (64, "thread"), (2, "thread"),
                                           (2, "inline")])
def test_large_calls_split_across_the_thread_pool(threads, mode):
    from mxlower import reference

    spec = KernelSpec("quantize", "mxfp4_e2m1", scale_mode="nearest")
    kernel = ffi.compile_kernel(spec)
    rows = 3 * ffi.THREAD_CHUNK // 1024 + 1  # not a multiple of the chunk count
    x = np.random.default_rng(7).standard_normal((rows, 1024)).astype(np.float32)
    q = np.zeros(x.size // 2, np.uint8)
    s = np.zeros((rows, 32), np.uint8)
    api = FakeApi(threads, mode)
    keep: list = []
    qb = _buffer(q, "float4_e2m1fn", keep, shape=x.shape)  # XLA's packed f4: logical dims
    frame = _frame(api, [_buffer(x, "float32", keep)], [qb, _buffer(s, "float8_e8m0fnu", keep)],
                   keep=keep)
    assert kernel.handler(ctypes.addressof(frame)) is None
    for t in api.threads_started:
        t.join()
    # 3 chunks; one task per thread beyond the caller (2 threads: 3 chunks over 2 workers)
    workers = min(threads, x.size // ffi.THREAD_CHUNK)
    assert api.scheduled == (workers - 1 if workers > 1 else 0)
    assert api.destroyed == ([0xE1] * api.scheduled if mode == "refuse" else [])
    rq, rs = reference.quantize(x, "mxfp4_e2m1", scale_mode="nearest")
    np.testing.assert_array_equal(s, rs.view(np.uint8))
    np.testing.assert_array_equal(q, reference.pack(rq, 4).reshape(-1))
    assert api.errors == []
