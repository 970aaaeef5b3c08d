"""DLPack both ways: ``Tensor.__dlpack__`` / ``Tensor.__dlpack_device__`` and :func:`from_dlpack`.

Memory is shared, never copied unless asked: a write through one side is seen on the other. Views keep their
strides (counted in elements, as DLPack counts them); the storage offset travels in the data pointer. The
read-only flag travels both ways. Everything here is ctypes over the C structs of ``dlpack.h``; there is no
compiled extension.

Sources:
    - ``dlpack.h`` v1.1 (https://github.com/dmlc/dlpack/blob/main/include/dlpack/dlpack.h): struct layouts,
      ``DLDeviceType``, ``DLDataTypeCode``, the ``DLPACK_FLAG_BITMASK_*`` flags, the rule that a consumer meeting
      an unknown major version calls the deleter and reads nothing else.
    - The Python specification for DLPack (https://dmlc.github.io/dlpack/latest/python_spec.html): capsule names
      ``dltensor`` / ``dltensor_versioned``, renamed ``used_dltensor`` / ``used_dltensor_versioned`` by the one
      consumer that takes ownership; an unconsumed capsule frees its manager.
    - The array API standard, ``array.__dlpack__`` and ``from_dlpack`` (v2023.12): ``stream``, ``max_version``,
      ``dl_device``, ``copy`` and the consumer's fallback to the legacy call on ``TypeError``.

How ownership works here:
    - Export: each capsule points at a ``DLManagedTensor[Versioned]`` ctypes struct. The struct, its shape and
      strides arrays and the exported tensor (which keeps the memory alive) sit in ``_LIVE``, keyed by the
      struct's address, until the consumer calls the deleter (a ctypes callback that drops the entry).
    - Unconsumed capsules: a ctypes callback cannot keep an exception that its C caller has pending (ctypes'
      own result check replaces it with ``SystemError`` and reports that as unraisable), and consumers destroy
      an unconsumed capsule exactly on such error paths (NumPy refusing a bfloat16 capsule sets its error, then
      drops the capsule). So our capsules carry no destructor callback. This module keeps a reference to each
      capsule it made; a sweep, run after every garbage collection (``gc.callbacks``) and on every export and
      import, frees the manager of a capsule that nobody else references and that was never consumed, and
      forgets capsules that were consumed. Collection (``gc.collect()``, or the automatic gen-0 collections)
      therefore frees an abandoned capsule's manager.
    - The deleter body makes no calls (only dict and int operations), so it completes even when a consumer
      calls it with an exception pending; that exception is then lost to ctypes' check (a known limit of any
      ctypes callback; CPython's own finalizers and weakref callbacks, which the release triggers, save it).
    - Import: the capsule is renamed ``used_*`` once everything in it was checked, and the storage's owner calls
      the producer's deleter exactly once, when the last view of the imported memory dies.
"""

from __future__ import annotations

import ctypes
import enum
import gc
import sys
import threading
import weakref
from ctypes import c_char_p, c_int, c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p

from .._errors import check, fail
from ..device.base import as_device, backend_for
from ..device.base import device as Device
from ..dtypes.table import from_dlpack_code
from ..shapes import contiguous_strides, numel
from .core import Tensor

__all__ = ["from_dlpack", "to_dlpack", "to_dlpack_capsule", "dlpack_device", "DLDeviceType", "DLPACK_VERSION",
           "DLPACK_FLAG_BITMASK_READ_ONLY", "DLPACK_FLAG_BITMASK_IS_COPIED"]

# The newest DLPack this module speaks (float8 type codes are 1.1 additions).
DLPACK_VERSION = (1, 1)
DLPACK_FLAG_BITMASK_READ_ONLY = 1 << 0
DLPACK_FLAG_BITMASK_IS_COPIED = 1 << 1


class DLDeviceType(enum.IntEnum):
    """``DLDeviceType`` of dlpack.h (the values ``__dlpack_device__`` returns)."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17


# -- the C structs of dlpack.h ----------------------------------------------------------------------------
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32), ("dtype", DLDataType),
                ("shape", c_void_p), ("strides", c_void_p), ("byte_offset", c_uint64)]


class DLManagedTensor(ctypes.Structure):
    """The legacy (pre-1.0) managed tensor; ``deleter`` is a ``void (*)(DLManagedTensor *)``."""

    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    """The DLPack 1.x managed tensor; ``version``, ``manager_ctx`` and ``deleter`` keep their place in every
    later major version, so a consumer can always call the deleter."""

    _fields_ = [("version", DLPackVersion), ("manager_ctx", c_void_p), ("deleter", c_void_p), ("flags", c_uint64),
                ("dl_tensor", DLTensor)]


_DELETER_T = ctypes.CFUNCTYPE(None, c_void_p)

# The CPython capsule API, through private prototypes (never by changing ctypes.pythonapi's shared attributes).
_PyCapsule_New = ctypes.PYFUNCTYPE(ctypes.py_object, c_void_p, c_void_p, c_void_p)(("PyCapsule_New", ctypes.pythonapi))
_PyCapsule_IsValid = ctypes.PYFUNCTYPE(c_int, ctypes.py_object, c_void_p)(("PyCapsule_IsValid", ctypes.pythonapi))
_PyCapsule_GetPointer = ctypes.PYFUNCTYPE(c_void_p, ctypes.py_object, c_void_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_PyCapsule_GetName = ctypes.PYFUNCTYPE(c_char_p, ctypes.py_object)(("PyCapsule_GetName", ctypes.pythonapi))
_PyCapsule_SetName = ctypes.PYFUNCTYPE(c_int, ctypes.py_object, c_void_p)(("PyCapsule_SetName", ctypes.pythonapi))

# A capsule stores its name as a borrowed char*: these buffers live as long as the process.
_NAMES = {n: ctypes.create_string_buffer(n) for n in
          (b"dltensor", b"dltensor_versioned", b"used_dltensor", b"used_dltensor_versioned")}
_NAME_ADDR = {n: ctypes.addressof(b) for n, b in _NAMES.items()}

_CAPSULE_TYPE = type(_PyCapsule_New(1, None, None))  # a nameless capsule around a dummy pointer, for its type


# -- export ------------------------------------------------------------------------------------------------
class _Export:
    """What one exported capsule keeps alive: the tensor (hence its memory), the struct, shape and strides."""

    __slots__ = ("tensor", "struct", "shape", "strides")

    def __init__(self, tensor, struct, shape, strides):
        self.tensor, self.struct, self.shape, self.strides = tensor, struct, shape, strides


_LIVE: dict[int, _Export] = {}      # struct address -> what it keeps alive, until the deleter runs
_PENDING: dict[int, object] = {}    # struct address -> the capsule, until it is consumed or abandoned
_DELETER_CALLS = [0]                # how many times consumers called our deleter (tests read it)
_SWEEP_LOCK = threading.Lock()


def _deleter(addr, _live=_LIVE, _calls=_DELETER_CALLS):
    # Called by consumers through C, possibly with their exception pending: no calls in here, only dict and int
    # operations, so the release always completes (see the module docstring). The tables are bound as defaults:
    # a consumer's array can outlive this module's globals at interpreter exit.
    _calls[0] += 1
    if addr in _live:
        del _live[addr]


_DELETER = _DELETER_T(_deleter)
_DELETER_ADDR = ctypes.cast(_DELETER, c_void_p).value
# Immortal: a consumer (a NumPy array from ``np.from_dlpack``) may call the deleter during the interpreter's final
# garbage collection, after this module's dict was cleared; freeing the ctypes trampoline first made that call
# jump into freed memory (a segmentation fault at exit, seen on the GPU machine). One reference that is never
# dropped keeps the trampoline alive for the life of the process.
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_DELETER))


def _value_refcount(d: dict, key) -> int:
    value = d[key]
    return sys.getrefcount(value)


# References a dict value has when nothing else holds it, measured by the same function as the sweep uses.
_ALONE = _value_refcount({0: object()}, 0)


def _sweep() -> None:
    """Forget consumed capsules; free the manager of abandoned, unconsumed ones (see the module docstring)."""
    if not _PENDING or not _SWEEP_LOCK.acquire(blocking=False):
        return
    try:
        for addr in list(_PENDING):
            if addr not in _PENDING:
                continue
            alone = _value_refcount(_PENDING, addr) == _ALONE
            unconsumed = (_PyCapsule_IsValid(_PENDING[addr], _NAME_ADDR[b"dltensor"])
                          or _PyCapsule_IsValid(_PENDING[addr], _NAME_ADDR[b"dltensor_versioned"]))
            if not unconsumed:
                del _PENDING[addr]      # the consumer owns the manager now and will call the deleter
            elif alone:
                del _PENDING[addr]
                _LIVE.pop(addr, None)   # nobody can consume it any more: free the manager here
    finally:
        _SWEEP_LOCK.release()


def _gc_hook(phase, info) -> None:
    if phase == "stop" and _PENDING:
        _sweep()


gc.callbacks.append(_gc_hook)


def _live_exports() -> int:
    """Managers exported and not yet released (for tests and leak hunting)."""
    _sweep()
    return len(_LIVE)


def dlpack_device(t: Tensor) -> tuple[DLDeviceType, int]:
    """``Tensor.__dlpack_device__``: ``(kDLCPU, 0)`` for ``cpu``, ``(kDLCUDA, index)`` for ``cuda:index``.

    Raises:
        BufferError: for a device type DLPack exchange is not implemented for.
    """
    dev = t.device
    if dev.type == "cpu":
        return (DLDeviceType.kDLCPU, 0)
    if dev.type == "cuda":
        return (DLDeviceType.kDLCUDA, dev.index or 0)
    fail(f"__dlpack_device__: DLPack export is not implemented for device type '{dev.type}'", BufferError)


def _device_from_dl(dl_device, *, fn: str, arg: str) -> Device:
    """Our device for a DLPack ``(device_type, device_id)``; pinned host memory is host memory (as PyTorch)."""
    check(isinstance(dl_device, tuple) and len(dl_device) == 2 and all(isinstance(v, int) for v in dl_device),
          lambda: f"{fn}: {arg} must be a (device_type, device_id) tuple of ints, got {dl_device!r}", TypeError)
    kind, index = int(dl_device[0]), int(dl_device[1])
    if kind in (DLDeviceType.kDLCPU, DLDeviceType.kDLCUDAHost):
        check(index == 0, lambda: f"{fn}: {arg} {dl_device!r}: a host device has id 0, got {index}", BufferError)
        return Device("cpu")
    if kind in (DLDeviceType.kDLCUDA, DLDeviceType.kDLCUDAManaged):
        check(index >= 0, lambda: f"{fn}: {arg} {dl_device!r}: negative CUDA device id", BufferError)
        return Device("cuda", index)
    name = DLDeviceType(kind).name if kind in DLDeviceType._value2member_map_ else str(kind)
    fail(f"{fn}: {arg} {dl_device!r}: DLPack device type {name} is not supported by nbxtensor (supported: kDLCPU, "
         "kDLCUDAHost, kDLCUDA, kDLCUDAManaged)", BufferError)


def _with_backend(dev: Device, fn: str) -> Device:
    try:
        return as_device(dev)
    except RuntimeError as e:
        raise BufferError(f"{fn}: memory on {dev} cannot be exchanged: {e}") from e


def _cuda_stream_handle(stream, index: int) -> int:
    """The ``CUstream`` a consumer's ``stream`` argument names on a CUDA device (array API values): None and 1 the
    legacy default stream (handle 0), 2 the per-thread default stream (``CU_STREAM_PER_THREAD``), > 2 a handle.

    Raises:
        ValueError: 0 (ambiguous, disallowed by the standard) or a negative value other than -1.
    """
    if stream is None or stream == 1:
        return 0
    check(stream != 0, "__dlpack__: stream=0 is ambiguous on CUDA and disallowed by the array API standard; pass 1 "
          "for the legacy default stream, 2 for the per-thread default stream, or a stream handle", ValueError)
    check(stream >= 2, lambda: f"__dlpack__: stream must be None, -1, 1, 2 or a CUDA stream handle, got {stream}",
          ValueError)
    return stream


def _make_visible(t: Tensor, stream) -> None:
    """Producer's duty on CUDA: work queued on ``t``'s device so far happens before later work on the consumer's
    ``stream`` (an event recorded on our current stream, waited on by theirs; nothing when they are one stream)."""
    if stream == -1:
        return
    from ..device.cuda import stream as cuda_stream  # only reached with CUDA tensors
    i = t.device.index or 0
    handle = _cuda_stream_handle(stream, i)
    ours = cuda_stream.current_stream(i)
    if ours.cuda_stream == handle:
        return
    theirs = cuda_stream.Stream(_handle=handle, _index=i)
    theirs.wait_event(ours.record_event())


def _check_export_args(t: Tensor, stream, max_version, copy) -> bool:
    """Validate ``__dlpack__``'s keywords; returns whether a versioned capsule was asked for."""
    check(copy is None or isinstance(copy, bool), lambda: f"__dlpack__: copy must be None or a bool, got {copy!r}",
          TypeError)
    check(stream is None or (isinstance(stream, int) and not isinstance(stream, bool)),
          lambda: f"__dlpack__: stream must be an int or None, got {type(stream).__name__}", TypeError)
    if t.device.type == "cpu":
        check(stream is None or stream == -1, lambda: f"__dlpack__: stream must be None for a cpu tensor (the array "
              f"API standard; -1 is accepted as PyTorch does), got {stream}", ValueError)
    if max_version is None:
        return False
    check(isinstance(max_version, tuple) and len(max_version) == 2 and all(isinstance(v, int) for v in max_version),
          lambda: f"__dlpack__: max_version must be a (major, minor) tuple of ints, got {max_version!r}", TypeError)
    return max_version[0] >= 1


def to_dlpack_capsule(t: Tensor, *, stream=None, max_version=None, dl_device=None, copy=None):
    """``Tensor.__dlpack__``: a DLPack capsule sharing ``t``'s memory (array API standard, v2023.12).

    Args:
        stream: the consumer's stream. CUDA: None or 1 the legacy default stream, 2 the per-thread default
            stream, > 2 a ``CUstream`` handle, -1 no synchronisation; work queued on ``t``'s device is made to
            happen before later work on that stream. CPU: None (or -1, as PyTorch accepts).
        max_version: the newest DLPack ``(major, minor)`` the consumer reads. ``None`` or a major below 1 gives
            the legacy ``"dltensor"`` capsule (``DLManagedTensor``); otherwise a ``"dltensor_versioned"`` capsule
            (``DLManagedTensorVersioned``) stamped with ``min(max_version, (1, 1))`` within major 1, else (1, 1).
        dl_device: ``(device_type, device_id)`` the capsule must describe; another device than ``t``'s means a
            copy (cpu <-> cuda through ``Tensor.to``).
        copy: True always copies (the versioned capsule then carries ``IS_COPIED``); False never copies; None
            copies only to change device.

    The data pointer is ``t.data_ptr()`` (the storage offset applied, ``byte_offset`` 0, as PyTorch and NumPy
    export); strides are ``t.stride()`` in elements, stride 0 of expanded dims included. A read-only tensor
    exports with ``DLPACK_FLAG_BITMASK_READ_ONLY``. The capsule keeps the memory alive until the consumer calls
    the deleter, or, unconsumed, until it is garbage collected.

    Raises:
        BufferError: read-only memory asked for as a legacy capsule (it cannot carry the flag; pass copy=True or
            a max_version); a copy needed with copy=False; an unsupported ``dl_device``.
        TypeError: arguments of the wrong type. ValueError: a ``stream`` the device does not accept.
    """
    _sweep()
    versioned = _check_export_args(t, stream, max_version, copy)
    src, copied = t, False
    if dl_device is not None:
        want = _device_from_dl(dl_device, fn="__dlpack__", arg="dl_device")
        if want != t.device:
            check(copy is not False, lambda: f"__dlpack__: dl_device {tuple(dl_device)!r} is {want} but the tensor "
                  f"is on {t.device}: a copy is needed and copy=False", BufferError)
            want = _with_backend(want, "__dlpack__")
            src, copied = t.to(want, copy=True), True
    if copy is True and not copied:
        src, copied = t.clone(), True
    readonly = src._storage.readonly
    check(versioned or not readonly, "__dlpack__: cannot export read-only memory as a legacy DLPack capsule (it "
          "has no read-only flag); the consumer must pass max_version=(1, 0) or newer, or copy=True", BufferError)
    if src.device.type == "cuda":
        _make_visible(src, stream)
    return _new_capsule(src, versioned, _stamp(max_version) if versioned else None,
                        (DLPACK_FLAG_BITMASK_READ_ONLY if readonly else 0)
                        | (DLPACK_FLAG_BITMASK_IS_COPIED if copied else 0))


def _stamp(max_version: tuple[int, int]) -> tuple[int, int]:
    if max_version[0] == DLPACK_VERSION[0]:
        return (1, min(max_version[1], DLPACK_VERSION[1]))
    return DLPACK_VERSION


def _new_capsule(src: Tensor, versioned: bool, version, flags: int):
    nd = src.ndim
    shape = (c_int64 * max(nd, 1))(*src.shape)
    strides = (c_int64 * max(nd, 1))(*src.stride())
    if versioned:
        m = DLManagedTensorVersioned()
        m.version.major, m.version.minor = version
        m.flags = flags
    else:
        m = DLManagedTensor()
    dl = m.dl_tensor
    dl.data = src.data_ptr() or None
    dl.device.device_type, dl.device.device_id = dlpack_device(src)
    dl.ndim = nd
    dl.dtype.code, dl.dtype.bits = src.dtype.dlpack
    dl.dtype.lanes = 1
    dl.shape = ctypes.addressof(shape)
    dl.strides = ctypes.addressof(strides)
    dl.byte_offset = 0
    m.manager_ctx = None
    m.deleter = _DELETER_ADDR
    addr = ctypes.addressof(m)
    _LIVE[addr] = _Export(src, m, shape, strides)
    cap = _PyCapsule_New(addr, _NAME_ADDR[b"dltensor_versioned" if versioned else b"dltensor"], None)
    _PENDING[addr] = cap
    return cap


def to_dlpack(tensor: Tensor):
    """A legacy ``"dltensor"`` capsule of ``tensor`` (``torch.utils.dlpack.to_dlpack``).

    Raises:
        BufferError: ``tensor`` is read-only (a legacy capsule cannot say so; use ``tensor.__dlpack__(
            max_version=(1, 0))``).
    """
    check(isinstance(tensor, Tensor), lambda: f"to_dlpack: expected a Tensor, got {type(tensor).__name__}", TypeError)
    return to_dlpack_capsule(tensor)


# -- import ------------------------------------------------------------------------------------------------
def _call_deleter(deleter: int, managed: int) -> None:
    _DELETER_T(deleter)(managed)


class _DLPackOwner:
    """Owner of imported memory: calls the producer's deleter exactly once, when the storage dies."""

    __slots__ = ("__weakref__",)

    def __init__(self, managed: int, deleter: int):
        if deleter:
            weakref.finalize(self, _call_deleter, deleter, managed).atexit = False


def _read_i64(addr: int, n: int) -> tuple[int, ...]:
    return tuple((c_int64 * n).from_address(addr)) if n else ()


def _import_capsule(capsule) -> tuple[Tensor, bool]:
    """Consume a ``dltensor`` / ``dltensor_versioned`` capsule: a tensor over its memory and its IS_COPIED flag.

    Everything is checked before the capsule is renamed, so a refused capsule stays the producer's to free.
    """
    if _PyCapsule_IsValid(capsule, _NAME_ADDR[b"dltensor_versioned"]):
        versioned, name = True, b"dltensor_versioned"
    elif _PyCapsule_IsValid(capsule, _NAME_ADDR[b"dltensor"]):
        versioned, name = False, b"dltensor"
    else:
        got = _PyCapsule_GetName(capsule)
        used = got in (b"used_dltensor", b"used_dltensor_versioned")
        fail(f"from_dlpack: received an invalid capsule (named {got!r}; expected 'dltensor' or "
             f"'dltensor_versioned')" + ("; a DLPack capsule can be consumed only once and this one already was"
                                         if used else ""), RuntimeError)
    ptr = _PyCapsule_GetPointer(capsule, _NAME_ADDR[name])
    if versioned:
        m = DLManagedTensorVersioned.from_address(ptr)
        if m.version.major != DLPACK_VERSION[0]:
            major, minor, deleter = m.version.major, m.version.minor, m.deleter
            _PyCapsule_SetName(capsule, _NAME_ADDR[b"used_dltensor_versioned"])
            if deleter:  # dlpack.h: on a major mismatch the consumer calls the deleter and reads nothing else
                _call_deleter(deleter, ptr)
            fail(f"from_dlpack: DLPack version {major}.{minor} is not supported (nbxtensor reads major version "
                 f"{DLPACK_VERSION[0]})", BufferError)
        flags = m.flags
    else:
        m = DLManagedTensor.from_address(ptr)
        flags = 0
    dl = m.dl_tensor
    dev = _with_backend(_device_from_dl((dl.device.device_type, dl.device.device_id), fn="from_dlpack",
                                        arg="the capsule's device"), "from_dlpack")
    dtype = from_dlpack_code(dl.dtype.code, dl.dtype.bits, dl.dtype.lanes)
    nd = dl.ndim
    check(nd >= 0, lambda: f"from_dlpack: the capsule has ndim {nd}", BufferError)
    check(nd == 0 or dl.shape, "from_dlpack: the capsule has a NULL shape", BufferError)
    shape = _read_i64(dl.shape, nd)
    check(all(s >= 0 for s in shape), lambda: f"from_dlpack: the capsule has a negative size in {list(shape)}",
          BufferError)
    strides = _read_i64(dl.strides, nd) if dl.strides else contiguous_strides(shape)
    check(all(s >= 0 for s in strides), lambda: f"from_dlpack: the capsule has strides {list(strides)}; tensors with "
          "negative strides are not supported (as PyTorch; make a copy of the producer's array first)", BufferError)
    data = (dl.data or 0) + dl.byte_offset
    count = numel(shape)
    nbytes = 0 if count == 0 else (1 + sum((n - 1) * s for n, s in zip(shape, strides))) * dtype.itemsize
    check(count == 0 or data != 0, "from_dlpack: the capsule has a NULL data pointer and elements", BufferError)
    readonly = bool(flags & DLPACK_FLAG_BITMASK_READ_ONLY)
    # Take ownership: from here on the deleter is ours to call, exactly once.
    _PyCapsule_SetName(capsule, _NAME_ADDR[b"used_" + name])
    owner = _DLPackOwner(ptr, m.deleter or 0)
    storage = backend_for(dev).wrap_external(data, nbytes, dev, owner, readonly)
    return Tensor(storage, shape, strides, 0, dtype), bool(flags & DLPACK_FLAG_BITMASK_IS_COPIED)


def _consumer_stream(dev: Device) -> int:
    """The ``stream`` to pass a CUDA producer: our current stream on ``dev`` (1 for the legacy default stream)."""
    from ..device.cuda import stream as cuda_stream
    handle = cuda_stream.current_stream(dev.index or 0).cuda_stream
    return 1 if handle == 0 else handle


def from_dlpack(ext_tensor, *, device=None, copy: bool | None = None) -> Tensor:
    """A tensor sharing memory with ``ext_tensor``, through DLPack (``torch.from_dlpack``).

    Args:
        ext_tensor: an object with ``__dlpack__`` and ``__dlpack_device__`` (a NumPy array, a PyTorch or CuPy
            tensor, an nbxtensor tensor, ...), or a DLPack capsule (consumed; a capsule can be consumed once).
        device: where the result must live; another device than the producer's means a copy.
        copy: True always copies, False never copies (raises where a copy is needed), None copies only to change
            device.

    Returns:
        A tensor with the producer's shape, strides (in elements) and dtype (from the DLPack code, through the
        dtype table), on ``cpu`` or ``cuda:i``, that shares the producer's memory: a write on either side is seen
        on the other. The producer's memory stays alive while any view of the result lives; the producer's deleter
        is called once, when the last one dies. A read-only producer (a read-only NumPy array) gives a read-only
        tensor: writes raise. The producer is asked for a versioned (DLPack 1.x) capsule first and, on
        ``TypeError``, for the legacy one (array API standard). CUDA producers are passed our current stream.

    Differences from PyTorch: read-only memory imports read-only (PyTorch ignores the flag); negative strides
    raise ``BufferError`` (PyTorch 2.13 aborts the process).

    Raises:
        BufferError: from the producer (NumPy refuses bfloat16 and float8 arrays), or for a capsule with a dtype
            outside the dtype table, vector lanes, negative strides, an unsupported device or DLPack major version.
        RuntimeError: an object that is neither a DLPack producer nor a valid capsule, or an already consumed
            capsule (as PyTorch).
        ValueError: ``copy=False`` with a ``device`` other than the producer's (as PyTorch).
        AssertionError: ``device`` or ``copy`` given with a capsule (as PyTorch).

    Example:
        >>> import numpy as np, nbxtensor as nbx
        >>> a = np.arange(6.0).reshape(2, 3)
        >>> t = nbx.from_dlpack(a)
        >>> t[0, 0] = 9.0
        >>> float(a[0, 0])
        9.0
    """
    _sweep()
    if isinstance(ext_tensor, _CAPSULE_TYPE):
        if device is not None or copy is not None:
            raise AssertionError("from_dlpack: device and copy kwargs not supported when ext_tensor is already a "
                                 "DLPack capsule.")
        return _import_capsule(ext_tensor)[0]
    check(hasattr(ext_tensor, "__dlpack__") and hasattr(ext_tensor, "__dlpack_device__"),
          lambda: f"from_dlpack: expected an object with __dlpack__ and __dlpack_device__ or a DLPack capsule, got "
          f"{type(ext_tensor).__name__}", RuntimeError)
    check(copy is None or isinstance(copy, bool), lambda: f"from_dlpack: copy must be None or a bool, got {copy!r}",
          TypeError)
    dl_dev = tuple(ext_tensor.__dlpack_device__())
    src_dev = _device_from_dl(dl_dev, fn="from_dlpack", arg="__dlpack_device__()")
    target = as_device(device, arg="from_dlpack: device") if device is not None else None
    cross = target is not None and target != src_dev
    check(not (cross and copy is False), lambda: f"from_dlpack: cannot move the tensor from {src_dev} to {target} "
          "without copying. Set copy=None or copy=True.", ValueError)
    kwargs: dict = {"max_version": DLPACK_VERSION}
    if copy is not None:
        kwargs["copy"] = copy
    if target is not None and not cross:
        kwargs["dl_device"] = dl_dev
    if src_dev.type == "cuda":
        kwargs["stream"] = _consumer_stream(src_dev)
    # The array API's fallback (as torch.from_dlpack): on TypeError drop max_version (a pre-1.0 producer), then
    # copy, then dl_device, which older producers do not know; the last call's error propagates.
    attempts = [kwargs]
    for key in ("max_version", "copy", "dl_device"):
        if key in attempts[-1]:
            attempts.append({k: v for k, v in attempts[-1].items() if k != key})
    for i, kw in enumerate(attempts):
        try:
            capsule = ext_tensor.__dlpack__(**kw)
            break
        except TypeError:
            if i == len(attempts) - 1:
                raise
    t, is_copy = _import_capsule(capsule)
    if copy is True and not cross and not is_copy:
        t = t.clone()
    if cross:
        t = t.to(target, copy=True)
    return t
