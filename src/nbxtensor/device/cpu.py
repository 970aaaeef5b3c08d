"""The ``cpu`` device: host buffers, 64-byte aligned, with accounting of bytes in use and the peak.

Host memory comes from NumPy (``np.empty`` of uint8, over-allocated by 63 bytes and sliced to a 64-byte
boundary: 64 bytes is a cache line and the widest AVX-512 vector, and the alignment safetensors and DLPack
consumers expect for zero-copy use).
"""

from __future__ import annotations

import ctypes
import threading
import weakref

import numpy as np

from .._errors import check
from .base import Storage, device, register_backend

__all__ = ["CPUBackend", "cpu_backend", "ALIGNMENT", "memory_allocated", "max_memory_allocated",
           "reset_peak_memory_stats", "wrap_host_array"]

ALIGNMENT = 64


class CPUBackend:
    """Host memory behind the device interface of :mod:`nbxtensor.device.base`."""

    type = "cpu"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.allocated = 0
        self.peak = 0

    def canonical(self, dev: device) -> device:
        check(dev.index in (None, 0), lambda: f"cpu device index must be 0, got {dev.index}")
        return device("cpu")

    def _release(self, nbytes: int) -> None:
        with self._lock:
            self.allocated -= nbytes

    def allocate(self, nbytes: int, dev: device | None = None) -> Storage:
        """A new storage of ``nbytes`` uninitialised, 64-byte aligned host bytes.

        Raises:
            ValueError: for a negative size.
            nbxtensor.OutOfMemoryError: when the host cannot provide the bytes.
        """
        check(isinstance(nbytes, int) and nbytes >= 0, lambda: f"cpu allocate: nbytes must be a non-negative int, "
              f"got {nbytes!r}", ValueError)
        try:
            raw = np.empty(nbytes + ALIGNMENT - 1, dtype=np.uint8)
        except MemoryError as e:
            from .._errors import OutOfMemoryError
            raise OutOfMemoryError(f"cpu allocate: could not allocate {nbytes} bytes of host memory "
                                   f"(allocated by nbxtensor: {self.allocated} bytes)") from e
        shift = (-raw.ctypes.data) % ALIGNMENT
        buf = raw[shift:shift + nbytes]
        st = Storage(device("cpu"), nbytes, raw.ctypes.data + shift, buf, self)  # (an empty slice's own pointer
        # is not offset by NumPy, so the aligned address is computed from the raw buffer)
        with self._lock:
            self.allocated += nbytes
            self.peak = max(self.peak, self.allocated)
        # Accounted until the buffer itself dies: NumPy views of a tensor (``numpy()``) keep it alive past the storage.
        weakref.finalize(raw, self._release, nbytes)
        return st

    def write(self, dst: Storage, offset: int, src: np.ndarray) -> None:
        check(not dst.readonly, "cpu write: the destination storage is read-only")
        dst.handle[offset:offset + src.nbytes] = src.reshape(-1).view(np.uint8)

    def read(self, src: Storage, offset: int, nbytes: int) -> np.ndarray:
        return np.array(src.handle[offset:offset + nbytes], copy=True)

    def copy(self, dst: Storage, dst_offset: int, src: Storage, src_offset: int, nbytes: int) -> None:
        check(not dst.readonly, "cpu copy: the destination storage is read-only")
        dst.handle[dst_offset:dst_offset + nbytes] = src.handle[src_offset:src_offset + nbytes]

    def synchronize(self, dev: device | None = None) -> None:
        return None

    def wrap_external(self, ptr: int, nbytes: int, dev: device, owner: object, readonly: bool = False) -> Storage:
        """A storage over ``nbytes`` bytes of host memory at ``ptr`` that another library allocated, without
        copying (used by :func:`nbxtensor.from_dlpack`).

        ``owner`` is kept alive as long as the storage (it releases the memory when it dies). Foreign bytes are not
        counted in :func:`memory_allocated`. With ``readonly`` writes through any view raise.

        Raises:
            ValueError: a negative size, or a NULL address with a non-zero size.
        """
        self.canonical(dev)
        check(isinstance(nbytes, int) and nbytes >= 0, lambda: f"cpu wrap_external: nbytes must be a non-negative "
              f"int, got {nbytes!r}", ValueError)
        check(nbytes == 0 or ptr, lambda: f"cpu wrap_external: NULL address for {nbytes} bytes", ValueError)
        if nbytes == 0:
            buf = np.empty(0, dtype=np.uint8)
        else:
            buf = np.frombuffer(_owned_bytes(ptr, nbytes, owner), dtype=np.uint8)
        if readonly:
            buf.flags.writeable = False
        return Storage(device("cpu"), nbytes, int(ptr or 0), buf, self, readonly=readonly, owner=owner)


cpu_backend = CPUBackend()
register_backend(cpu_backend)


def _owned_bytes(ptr: int, nbytes: int, owner: object):
    """A ctypes byte array over foreign memory that keeps ``owner`` alive: NumPy arrays built on it (a
    tensor's ``numpy()`` view) hold the array, so the memory outlives the storage for as long as they do."""
    holder = (ctypes.c_uint8 * nbytes).from_address(ptr)
    holder._nbx_owner = owner
    return holder


def wrap_host_array(arr: np.ndarray, *, owner: object = None, readonly: bool | None = None) -> tuple[Storage, int]:
    """Wrap the memory under NumPy array ``arr`` (any strides, negative included) as a storage, without copying.

    Returns:
        ``(storage, element_offset)``: the storage spans exactly the bytes ``arr`` touches, and
        ``element_offset`` is where ``arr``'s first element sits in it. ``owner`` (default ``arr``) is kept
        alive as long as the storage. Foreign memory is not counted in :func:`memory_allocated`.

    Raises:
        ValueError: for byte strides that are not multiples of the itemsize.
    """
    itemsize = arr.itemsize
    ro = (not arr.flags.writeable) if readonly is None else readonly
    keep = owner if owner is not None else arr
    if arr.size == 0:
        base = np.empty(0, dtype=np.uint8)
        return Storage(device("cpu"), 0, base.ctypes.data, base, cpu_backend, readonly=ro, owner=keep), 0
    check(all(st % itemsize == 0 for st in arr.strides), lambda: f"wrap_host_array: byte strides {arr.strides} are "
          f"not multiples of the itemsize {itemsize}", ValueError)
    lo = hi = 0
    for size, stride in zip(arr.shape, arr.strides):
        ext = (size - 1) * stride
        if ext > 0:
            hi += ext
        else:
            lo += ext
    nbytes = hi - lo + itemsize
    start = arr.ctypes.data + lo
    buf = np.frombuffer(_owned_bytes(start, nbytes, keep), dtype=np.uint8)
    if ro:
        buf.flags.writeable = False
    st = Storage(device("cpu"), nbytes, start, buf, cpu_backend, readonly=ro, owner=keep)
    return st, (-lo) // itemsize


def memory_allocated() -> int:
    """Bytes of host memory nbxtensor allocated and has not yet freed."""
    return cpu_backend.allocated


def max_memory_allocated() -> int:
    """The peak of :func:`memory_allocated` since start or the last :func:`reset_peak_memory_stats`."""
    return cpu_backend.peak


def reset_peak_memory_stats() -> None:
    """Set the peak to the bytes allocated now."""
    cpu_backend.peak = cpu_backend.allocated
