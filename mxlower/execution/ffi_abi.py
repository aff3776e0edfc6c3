"""The parts of XLA's FFI C ABI (``xla/ffi/api/c_api.h``, API version 0.3) that mxlower's
handlers use, as ``ctypes`` structures.

These are the one description of the layouts: :mod:`mxlower.execution.ffi` emits its LLVM
dialect handlers with byte offsets read from them (``Struct.field.offset``), and tests build call
frames with them to call a handler directly.  The layouts are those of the header jaxlib ships
(``jaxlib/include/xla/ffi/api/c_api.h``) on a 64-bit target; ``STRUCT_SIZE`` is the header's
``XLA_FFI_STRUCT_SIZE(type, last_field)``: the offset of the last field plus its size (no tail
padding).
"""

from __future__ import annotations

import ctypes

__all__ = [
    "API_MAJOR",
    "API_MINOR",
    "Api",
    "ApiVersion",
    "Args",
    "Attrs",
    "BUFFER",
    "Buffer",
    "CallFrame",
    "DTYPES",
    "ERROR_FAILED_PRECONDITION",
    "ERROR_INTERNAL",
    "ERROR_INVALID_ARGUMENT",
    "ERROR_RESOURCE_EXHAUSTED",
    "ErrorCreate",
    "ErrorCreateArgs",
    "ErrorDestroy",
    "ErrorDestroyArgs",
    "EXECUTE",
    "ExtensionBase",
    "METADATA_EXTENSION",
    "Metadata",
    "MetadataExtension",
    "Rets",
    "StreamGet",
    "StreamGetArgs",
    "Task",
    "ThreadPoolNumThreads",
    "ThreadPoolNumThreadsArgs",
    "ThreadPoolSchedule",
    "ThreadPoolScheduleArgs",
    "buffer_arg",
    "call_frame",
    "metadata_frame",
    "struct_size",
]

#: the FFI API version the handlers are written against (XLA_FFI_API_MAJOR / _MINOR)
API_MAJOR, API_MINOR = 0, 3
METADATA_EXTENSION = 1  #: XLA_FFI_Extension_Metadata
EXECUTE = 3  #: XLA_FFI_ExecutionStage_EXECUTE
BUFFER = 1  #: XLA_FFI_ArgType_BUFFER and XLA_FFI_RetType_BUFFER
ERROR_INVALID_ARGUMENT = 3  #: XLA_FFI_Error_Code_INVALID_ARGUMENT
ERROR_RESOURCE_EXHAUSTED = 8  #: XLA_FFI_Error_Code_RESOURCE_EXHAUSTED
ERROR_FAILED_PRECONDITION = 9  #: XLA_FFI_Error_Code_FAILED_PRECONDITION
ERROR_INTERNAL = 13  #: XLA_FFI_Error_Code_INTERNAL

#: XLA_FFI_DataType codes by storage dtype name
DTYPES = {
    "int8": 2, "uint8": 6, "uint32": 8, "float16": 10, "float32": 11, "bfloat16": 16, "float8_e5m2": 19,
    "float8_e4m3fn": 20, "float4_e2m1fn": 32, "float8_e8m0fnu": 33, "float8_e4m3": 28,
    "float8_e3m4": 29,
}

_p = ctypes.c_void_p
_i64 = ctypes.c_int64
_i32 = ctypes.c_int32


class ExtensionBase(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("type", _i32), ("next", _p)]


class ApiVersion(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p),
                ("major_version", ctypes.c_int), ("minor_version", ctypes.c_int)]


class Metadata(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("api_version", ApiVersion),
                ("traits", ctypes.c_uint32), ("state_type_id", _i64)]


class MetadataExtension(ctypes.Structure):
    _fields_ = [("extension_base", ExtensionBase), ("metadata", ctypes.POINTER(Metadata))]


class ErrorCreateArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p),
                ("message", ctypes.c_char_p), ("errc", _i32)]


class Buffer(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p), ("dtype", _i32),
                ("data", _p), ("rank", _i64), ("dims", ctypes.POINTER(_i64))]


class Args(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p), ("size", _i64),
                ("types", ctypes.POINTER(_i32)), ("args", ctypes.POINTER(_p))]


class Rets(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p), ("size", _i64),
                ("types", ctypes.POINTER(_i32)), ("rets", ctypes.POINTER(_p))]


class Attrs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p), ("size", _i64),
                ("types", ctypes.POINTER(_i32)), ("names", _p), ("attrs", _p)]


class CallFrame(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p), ("api", _p),
                ("ctx", _p), ("stage", _i32), ("args", Args), ("rets", Rets),
                ("attrs", Attrs), ("future", _p)]


class ErrorDestroyArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p), ("error", _p)]


class StreamGetArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p), ("ctx", _p),
                ("stream", _p)]


class ThreadPoolScheduleArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p), ("ctx", _p),
                ("task", _p), ("data", _p)]


class ThreadPoolNumThreadsArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p), ("ctx", _p),
                ("num_threads", ctypes.POINTER(_i64))]


#: the signatures of the API functions the handlers call
ErrorCreate = ctypes.CFUNCTYPE(_p, ctypes.POINTER(ErrorCreateArgs))
ErrorDestroy = ctypes.CFUNCTYPE(None, ctypes.POINTER(ErrorDestroyArgs))
ThreadPoolSchedule = ctypes.CFUNCTYPE(_p, ctypes.POINTER(ThreadPoolScheduleArgs))
ThreadPoolNumThreads = ctypes.CFUNCTYPE(_p, ctypes.POINTER(ThreadPoolNumThreadsArgs))
StreamGet = ctypes.CFUNCTYPE(_p, ctypes.POINTER(StreamGetArgs))
#: XLA_FFI_Task
Task = ctypes.CFUNCTYPE(None, _p)


class Api(ctypes.Structure):
    """The head of ``XLA_FFI_Api``, up to the last function the handlers call (an API whose
    ``struct_size`` ends before the thread-pool functions is used without them)."""

    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", _p),
                ("api_version", ApiVersion), ("internal_api", _p),
                ("XLA_FFI_Error_Create", ErrorCreate), ("XLA_FFI_Error_GetMessage", _p),
                ("XLA_FFI_Error_Destroy", ErrorDestroy), ("XLA_FFI_Handler_Register", _p),
                ("XLA_FFI_Stream_Get", StreamGet), ("XLA_FFI_Type_Register", _p),
                ("XLA_FFI_ExecutionContext_Get", _p), ("XLA_FFI_State_Set", _p),
                ("XLA_FFI_State_Get", _p), ("XLA_FFI_DeviceMemory_Allocate", _p),
                ("XLA_FFI_DeviceMemory_Free", _p),
                ("XLA_FFI_ThreadPool_Schedule", ThreadPoolSchedule),
                ("XLA_FFI_ThreadPool_NumThreads", ThreadPoolNumThreads)]


def struct_size(cls: type[ctypes.Structure], last_field: str) -> int:
    """``XLA_FFI_STRUCT_SIZE(cls, last_field)``."""
    f = getattr(cls, last_field)
    return f.offset + f.size


def buffer_arg(data: int, dtype_name: str, shape: tuple[int, ...], keep: list) -> int:
    """The address of an ``XLA_FFI_Buffer`` of ``shape`` over ``data`` (``keep`` holds what
    must outlive it)."""
    dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    b = Buffer(struct_size=ctypes.sizeof(Buffer), dtype=DTYPES[dtype_name], data=data,
               rank=len(shape), dims=dims)
    keep += [dims, b]
    return ctypes.addressof(b)


def call_frame(api: int, args: list[int], rets: list[int], keep: list, *,
               stage: int = EXECUTE, ctx: int = 0) -> CallFrame:
    """An ``XLA_FFI_CallFrame`` (FFI API 0.3) passing the buffers ``args`` and ``rets`` (from
    :func:`buffer_arg`) with the ``XLA_FFI_Api`` at ``api``: how tests and benchmarks call a
    generated handler directly, without XLA."""
    def group(cls: type[ctypes.Structure], bufs: list[int], field: str) -> ctypes.Structure:
        types = (ctypes.c_int32 * max(len(bufs), 1))(*([BUFFER] * len(bufs)))
        ptrs = (ctypes.c_void_p * max(len(bufs), 1))(*bufs)
        keep.extend([types, ptrs])
        return cls(struct_size=ctypes.sizeof(cls), size=len(bufs), types=types,
                   **{field: ptrs})

    frame = CallFrame(struct_size=struct_size(CallFrame, "attrs"), api=api, ctx=ctx,
                      stage=stage, args=group(Args, args, "args"),
                      rets=group(Rets, rets, "rets"))
    keep.append(frame)
    return frame


def metadata_frame(api: int, keep: list, *, metadata_size: int | None = None
                   ) -> tuple[CallFrame, Metadata]:
    """(frame, metadata): the call frame of XLA's registration-time metadata query (a metadata
    extension whose answer the handler writes into ``metadata``)."""
    md = Metadata(struct_size=ctypes.sizeof(Metadata) if metadata_size is None
                  else metadata_size)
    ext = MetadataExtension(
        extension_base=ExtensionBase(struct_size=ctypes.sizeof(MetadataExtension),
                                     type=METADATA_EXTENSION),
        metadata=ctypes.pointer(md))
    frame = CallFrame(struct_size=struct_size(CallFrame, "attrs"),
                      extension_start=ctypes.addressof(ext), api=api)
    keep += [md, ext, frame]
    return frame, md
