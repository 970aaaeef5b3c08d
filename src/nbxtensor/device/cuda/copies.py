"""Copies between host and device, device and device, devices and peers; memset; pinned host memory.

Host to device and device to host:

- from/to **pinned** host memory (allocated here, or registered with the driver): one ``cuMemcpy*Async`` on
  the current stream; the DMA engine reads host memory directly.
- from/to **pageable** memory, small (under :data:`STAGE_MIN` bytes): one driver copy (the driver stages it).
- pageable, large: through two pinned staging buffers of :data:`STAGE_CHUNK` bytes, double-buffered so the
  host-side copy of one chunk (spread over a few threads; NumPy releases the GIL for plain copies) overlaps
  the DMA of the other.
- ``non_blocking=True`` host to device from pageable memory: the bytes are first copied into a pinned buffer
  (so the caller may reuse its array at once), then the DMA is queued and the call returns; the buffer goes
  back to the pinned pool when an event recorded after the DMA completes. Device to host with
  ``non_blocking=True`` is asynchronous only into pinned memory (the caller must synchronise before reading);
  into pageable memory it is synchronous (staged), as nothing could tell the caller when the bytes arrive.

Sizes are Python ints passed as ``size_t``: transfers above 2 GiB work. Every synchronous copy waits for its
stream only, not the whole device.
"""

from __future__ import annotations

import bisect
import ctypes
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..._errors import check
from . import context as C
from . import driver as D

__all__ = ["h2d", "d2h", "d2d", "peer", "memset", "PinnedPool", "pinned_pool", "is_pinned_ptr", "STAGE_MIN",
           "STAGE_CHUNK", "host_copy"]

STAGE_MIN = int(os.environ.get("NBX_CUDA_STAGE_MIN", 4 << 20))     # pageable copies from this size are staged
STAGE_CHUNK = int(os.environ.get("NBX_CUDA_STAGE_CHUNK", 32 << 20))  # staging buffer size
_PARALLEL_MIN = 4 << 20            # host copies from this size are split over threads
_THREADS = max(1, min(8, (os.cpu_count() or 1) // 2))
_pool_exec: list[ThreadPoolExecutor] = []


def host_copy(dst: np.ndarray, src: np.ndarray) -> None:
    """``dst[:] = src`` for 1-D uint8 arrays, split over a few threads when large (memcpy bandwidth of one core
    is below a PCIe 5 link's)."""
    n = src.nbytes
    if n < _PARALLEL_MIN or _THREADS == 1:
        np.copyto(dst, src)
        return
    if not _pool_exec:
        _pool_exec.append(ThreadPoolExecutor(_THREADS, thread_name_prefix="nbx-hostcopy"))
    step = -(-n // _THREADS)
    step = (step + 4095) & ~4095
    parts = [(dst[o:o + step], src[o:o + step]) for o in range(0, n, step)]
    list(_pool_exec[0].map(lambda p: np.copyto(p[0], p[1]), parts))


def _as_array(ptr: int, nbytes: int) -> np.ndarray:
    if nbytes == 0:
        return np.empty(0, dtype=np.uint8)
    return np.frombuffer((ctypes.c_char * nbytes).from_address(ptr), dtype=np.uint8)


class PinnedBlock:
    """A block of pinned (page-locked) host memory from :class:`PinnedPool`.

    Attributes:
        ptr, size: address and bytes.
        array: a 1-D uint8 NumPy view of the bytes.
        events: driver events of asynchronous copies that read or write it; the block is not reused before
            they complete.
    """

    __slots__ = ("ptr", "size", "array", "events", "in_use", "__weakref__")

    def __init__(self, ptr: int, size: int):
        self.ptr = ptr
        self.size = size
        self.array = _as_array(ptr, size)
        self.events: list = []
        self.in_use = False


class PinnedPool:
    """A caching pool of pinned host memory (``cuMemHostAlloc``, portable across contexts).

    Sizes are rounded up to a power of two (at least 4 KiB) so blocks are reused across similar requests.
    Pinning is slow (about a millisecond per 100 MB) and pinned memory cannot be swapped, so blocks are cached,
    and :meth:`empty_cache` gives idle ones back.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._free: dict[int, list[PinnedBlock]] = {}
        self._all: dict[int, PinnedBlock] = {}
        self._bases: list[int] = []
        self.reserved = 0

    @staticmethod
    def _round(n: int) -> int:
        return max(4096, 1 << (max(n, 1) - 1).bit_length())

    def _ready(self, b: PinnedBlock) -> bool:
        while b.events:
            (err,) = D.cu.cuEventQuery(b.events[-1])
            if int(err) == D.NOT_READY:
                return False
            if int(err):
                D.raise_error(D.cu.cuEventQuery, int(err), ())
            for ev in b.events:
                D.cu.cuEventDestroy(ev)
            b.events.clear()
        return True

    def alloc(self, nbytes: int) -> PinnedBlock:
        """A pinned block of at least ``nbytes`` bytes, marked in use until :meth:`release`.

        Raises:
            nbxtensor.OutOfMemoryError: the driver cannot pin that much host memory.
        """
        size = self._round(nbytes)
        with self._lock:
            for b in self._free.get(size, ()):
                if self._ready(b):
                    self._free[size].remove(b)
                    b.in_use = True
                    return b
        C.ensure_context(C.current_device())
        r = D.cu.cuMemHostAlloc(size, int(D.cu.CU_MEMHOSTALLOC_PORTABLE))
        if int(r[0]):
            if int(r[0]) == D.OUT_OF_MEMORY:
                self.empty_cache()
                r = D.cu.cuMemHostAlloc(size, int(D.cu.CU_MEMHOSTALLOC_PORTABLE))
            if int(r[0]):
                from ..._errors import OutOfMemoryError
                raise OutOfMemoryError(f"pinned host memory: cuMemHostAlloc({size}) failed with "
                                       f"{D.error_name(int(r[0]))} (pool holds {self.reserved} bytes)")
        b = PinnedBlock(int(r[1]), size)
        b.in_use = True
        with self._lock:
            self._all[b.ptr] = b
            bisect.insort(self._bases, b.ptr)
            self.reserved += size
        return b

    def release(self, b: PinnedBlock) -> None:
        """Return ``b`` to the pool (reused once its events complete)."""
        with self._lock:
            if b.in_use:
                b.in_use = False
                self._free.setdefault(b.size, []).append(b)

    def find(self, ptr: int) -> PinnedBlock | None:
        """The pool block containing host address ``ptr``, or None."""
        bases = self._bases
        i = bisect.bisect_right(bases, ptr) - 1
        if i >= 0:
            b = self._all.get(bases[i])
            if b is not None and ptr < b.ptr + b.size:
                return b
        return None

    def empty_cache(self) -> None:
        """Free every idle block whose events completed."""
        with self._lock:
            for size, blocks in self._free.items():
                keep = []
                for b in blocks:
                    if self._ready(b):
                        D.call(D.cu.cuMemFreeHost, b.ptr)
                        del self._all[b.ptr]
                        self._bases.remove(b.ptr)
                        self.reserved -= b.size
                    else:
                        keep.append(b)
                self._free[size] = keep


pinned_pool = PinnedPool()
_registered_hint: dict[int, bool] = {}


def is_pinned_ptr(ptr: int, nbytes: int = 0) -> bool:
    """True when host address ``ptr`` is page-locked: in the pinned pool, or registered with the driver by
    anyone (asked of the driver for spans of at least 64 KiB; below that the answer does not change the
    copy's speed)."""
    if pinned_pool.find(ptr) is not None:
        return True
    if nbytes < (64 << 10) or ptr == 0:
        return False
    attr = D.cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_MEMORY_TYPE
    r = D.cu.cuPointerGetAttribute(attr, ptr)
    if int(r[0]):
        return False  # CUDA_ERROR_INVALID_VALUE: plain pageable memory the driver does not know
    return int(r[1]) == int(D.cu.CUmemorytype.CU_MEMORYTYPE_HOST)


class _Events:
    """Two reusable timing-free events per (thread, device), for double buffering."""

    _tls = threading.local()

    @classmethod
    def get(cls, i: int) -> list:
        m = getattr(cls._tls, "m", None)
        if m is None:
            m = cls._tls.m = {}
        evs = m.get(i)
        if evs is None:
            flags = int(D.cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)
            evs = m[i] = [D.call(D.cu.cuEventCreate, flags), D.call(D.cu.cuEventCreate, flags)]
        return evs


def _new_event():
    return D.call(D.cu.cuEventCreate, int(D.cu.CUevent_flags.CU_EVENT_DISABLE_TIMING))


def _check_host(a: np.ndarray, fn: str) -> np.ndarray:
    check(isinstance(a, np.ndarray), lambda: f"{fn}: host data must be a NumPy array, got {type(a).__name__}",
          TypeError)
    if a.dtype != np.uint8 or a.ndim != 1:
        a = a.reshape(-1).view(np.uint8) if a.flags.c_contiguous else np.ascontiguousarray(a).reshape(-1).view(np.uint8)
    check(a.flags.c_contiguous, lambda: f"{fn}: host data must be contiguous")
    return a


def h2d(dptr: int, src: np.ndarray, device_index: int, stream: int, non_blocking: bool = False) -> None:
    """Copy host bytes ``src`` to device address ``dptr`` on device ``device_index``, queued on ``stream``.

    Synchronous unless ``non_blocking`` (see the module docstring): on return the device holds the bytes, or,
    with ``non_blocking``, ``src`` may be reused and the copy is ordered on ``stream``.

    Raises:
        CudaError: a driver call failed (naming it).
    """
    src = _check_host(src, "h2d")
    n = src.nbytes
    if n == 0:
        return
    C.ensure_context(device_index)
    cu = D.cu
    sptr = src.ctypes.data
    pinned = pinned_pool.find(sptr)
    if pinned is not None or is_pinned_ptr(sptr, n):
        D.call(cu.cuMemcpyHtoDAsync, dptr, sptr, n, stream)
        if non_blocking:
            if pinned is not None:  # keep the pool from reusing the block before the DMA has read it
                ev = _new_event()
                D.call(cu.cuEventRecord, ev, stream)
                pinned.events.append(ev)
        else:
            D.call(cu.cuStreamSynchronize, stream)
        return
    if non_blocking:
        b = pinned_pool.alloc(n)
        host_copy(b.array[:n], src)
        D.call(cu.cuMemcpyHtoDAsync, dptr, b.ptr, n, stream)
        ev = _new_event()
        D.call(cu.cuEventRecord, ev, stream)
        b.events.append(ev)
        pinned_pool.release(b)
        return
    if n < STAGE_MIN:
        D.call(cu.cuMemcpyHtoDAsync, dptr, sptr, n, stream)
        D.call(cu.cuStreamSynchronize, stream)
        return
    _h2d_staged(dptr, src, device_index, stream)


def _h2d_staged(dptr: int, src: np.ndarray, device_index: int, stream: int) -> None:
    cu = D.cu
    n = src.nbytes
    chunk = min(STAGE_CHUNK, n)
    bufs = [pinned_pool.alloc(chunk), pinned_pool.alloc(chunk)]
    evs = _Events.get(device_index)
    used = [False, False]
    try:
        for j, off in enumerate(range(0, n, chunk)):
            k = j & 1
            if used[k]:
                D.call(cu.cuEventSynchronize, evs[k])  # the DMA that read this buffer has finished
            m = min(chunk, n - off)
            host_copy(bufs[k].array[:m], src[off:off + m])
            D.call(cu.cuMemcpyHtoDAsync, dptr + off, bufs[k].ptr, m, stream)
            D.call(cu.cuEventRecord, evs[k], stream)
            used[k] = True
        D.call(cu.cuStreamSynchronize, stream)
    finally:
        for b in bufs:
            pinned_pool.release(b)


def d2h(dst: np.ndarray, dptr: int, device_index: int, stream: int, non_blocking: bool = False) -> None:
    """Copy ``dst.nbytes`` bytes from device address ``dptr`` into host array ``dst``, queued on ``stream``
    after the work already there. Synchronous unless ``non_blocking`` and ``dst`` is pinned.

    Raises:
        CudaError: a driver call failed (naming it).
    """
    dst = _check_host(dst, "d2h")
    n = dst.nbytes
    if n == 0:
        return
    check(dst.flags.writeable, "d2h: the host destination is read-only")
    C.ensure_context(device_index)
    cu = D.cu
    hptr = dst.ctypes.data
    if pinned_pool.find(hptr) is not None or is_pinned_ptr(hptr, n):
        D.call(cu.cuMemcpyDtoHAsync, hptr, dptr, n, stream)
        if not non_blocking:
            D.call(cu.cuStreamSynchronize, stream)
        return
    if n < STAGE_MIN:
        D.call(cu.cuMemcpyDtoHAsync, hptr, dptr, n, stream)
        D.call(cu.cuStreamSynchronize, stream)
        return
    chunk = min(STAGE_CHUNK, n)
    bufs = [pinned_pool.alloc(chunk), pinned_pool.alloc(chunk)]
    evs = _Events.get(device_index)
    try:
        prev = None
        for j, off in enumerate(range(0, n, chunk)):
            k = j & 1
            m = min(chunk, n - off)
            D.call(cu.cuMemcpyDtoHAsync, bufs[k].ptr, dptr + off, m, stream)
            D.call(cu.cuEventRecord, evs[k], stream)
            if prev is not None:  # drain the previous chunk while this one is in flight
                pk, poff, pm = prev
                D.call(cu.cuEventSynchronize, evs[pk])
                host_copy(dst[poff:poff + pm], bufs[pk].array[:pm])
            prev = (k, off, m)
        pk, poff, pm = prev
        D.call(cu.cuEventSynchronize, evs[pk])
        host_copy(dst[poff:poff + pm], bufs[pk].array[:pm])
    finally:
        for b in bufs:
            pinned_pool.release(b)


def d2d(dst: int, src: int, nbytes: int, device_index: int, stream: int) -> None:
    """Queue a copy of ``nbytes`` between two addresses of one device on ``stream`` (asynchronous)."""
    if nbytes:
        C.ensure_context(device_index)
        D.call(D.cu.cuMemcpyDtoDAsync, dst, src, nbytes, stream)


def peer(dst: int, dst_index: int, src: int, src_index: int, nbytes: int, dst_stream: int, src_stream: int) -> None:
    """Copy ``nbytes`` from device ``src_index`` to device ``dst_index`` (``cuMemcpyPeerAsync``, through host
    memory when the devices have no peer path). Ordered after the work queued on both devices' streams, and
    work queued later on either stream runs after it (two events), as PyTorch's cross-device ``copy_``."""
    if not nbytes:
        return
    cu = D.cu
    C.enable_peer_access(dst_index, src_index)
    C.ensure_context(src_index)
    ev_src = _new_event()
    D.call(cu.cuEventRecord, ev_src, src_stream)
    C.ensure_context(dst_index)
    D.call(cu.cuStreamWaitEvent, dst_stream, ev_src, 0)
    D.call(cu.cuMemcpyPeerAsync, dst, C.primary_context(dst_index), src, C.primary_context(src_index), nbytes,
           dst_stream)
    ev_dst = _new_event()
    D.call(cu.cuEventRecord, ev_dst, dst_stream)
    C.ensure_context(src_index)
    D.call(cu.cuStreamWaitEvent, src_stream, ev_dst, 0)
    D.call(cu.cuEventDestroy, ev_src)   # destroying a recorded event is safe: the driver releases it when done
    D.call(cu.cuEventDestroy, ev_dst)


def memset(dptr: int, value: int, nbytes: int, device_index: int, stream: int) -> None:
    """Queue setting ``nbytes`` bytes at ``dptr`` to ``value`` (0..255) on ``stream`` (asynchronous).

    Raises:
        ValueError: ``value`` outside 0..255.
    """
    check(0 <= value <= 255, lambda: f"memset: value must be a byte (0..255), got {value}", ValueError)
    if nbytes:
        C.ensure_context(device_index)
        D.call(D.cu.cuMemsetD8Async, dptr, value, nbytes, stream)
