"""The generated XLA FFI handlers, called directly through the C ABI and through JAX.

The handler of :mod:`mxlower.execution.ffi` answers XLA's metadata query, ignores stages other
than execute, and turns bad calls (wrong counts, dtypes, ranks, shapes) into FFI errors that
JAX raises -- checked here with call frames built from :mod:`mxlower.execution.ffi_abi` and a
stand-in ``XLA_FFI_Error_Create``, and through ``jax.ffi.ffi_call``.
"""

from __future__ import annotations

import ctypes

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
    """An ``XLA_FFI_Api`` whose ``XLA_FFI_Error_Create`` records the error it is asked for."""

    def __init__(self):
        self.errors: list[tuple[int, str]] = []
        self._create = abi.ErrorCreate(self._record)
        self.api = abi.Api(struct_size=ctypes.sizeof(abi.Api), XLA_FFI_Error_Create=self._create)

    def _record(self, args):
        a = args.contents
        assert a.struct_size == abi.struct_size(abi.ErrorCreateArgs, "errc")
        self.errors.append((a.errc, a.message.decode()))
        return 0xE0  # any non-null pointer stands for the error


def _buffer(array: np.ndarray, dtype_name: str, keep: list) -> ctypes.c_void_p:
    dims = (ctypes.c_int64 * max(array.ndim, 1))(*array.shape)
    b = abi.Buffer(struct_size=ctypes.sizeof(abi.Buffer), dtype=abi.DTYPES[dtype_name],
                   data=array.ctypes.data, rank=array.ndim, dims=dims)
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
    md = abi.Metadata(struct_size=ctypes.sizeof(abi.Metadata), traits=0xFFFF)
    ext = abi.MetadataExtension(
        extension_base=abi.ExtensionBase(struct_size=ctypes.sizeof(abi.MetadataExtension),
                                         type=abi.METADATA_EXTENSION),
        metadata=ctypes.pointer(md))
    api = FakeApi()
    frame = abi.CallFrame(struct_size=abi.struct_size(abi.CallFrame, "attrs"),
                          extension_start=ctypes.addressof(ext), api=ctypes.addressof(api.api))
    assert kernel.handler(ctypes.addressof(frame)) is None  # success: a null error
    assert (md.api_version.major_version, md.api_version.minor_version) == (0, 3)
    assert md.api_version.struct_size == abi.struct_size(abi.ApiVersion, "minor_version")
    assert md.traits == 0
    assert api.errors == []


def test_too_small_metadata_is_an_error(kernel):
    md = abi.Metadata(struct_size=8)
    ext = abi.MetadataExtension(extension_base=abi.ExtensionBase(type=abi.METADATA_EXTENSION),
                                metadata=ctypes.pointer(md))
    api = FakeApi()
    frame = abi.CallFrame(struct_size=abi.struct_size(abi.CallFrame, "attrs"),
                          extension_start=ctypes.addressof(ext), api=ctypes.addressof(api.api))
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
