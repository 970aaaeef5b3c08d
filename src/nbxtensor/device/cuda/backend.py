"""The ``cuda`` device behind the device interface of :mod:`nbxtensor.device.base`.

Each CUDA device has one :class:`~nbxtensor.memory.caching.CachingAllocator` over :class:`CudaRawMemory`
(``cuMemAlloc``/``cuMemFree`` and driver events). A storage's bytes go back to its allocator when the storage
is garbage-collected; memory imported from elsewhere (DLPack) is registered with :meth:`CudaBackend.wrap_external`
so the launcher accepts it, and is never freed here.

Bad input is refused before anything is queued: a storage of another backend, a freed block (use after free),
offsets or sizes outside the storage, a read-only destination.
"""

from __future__ import annotations

import numpy as np

from ..._errors import check
from ...memory.allocator import ExternalBlock, RawOutOfMemory
from ...memory.caching import CachingAllocator
from ..base import Storage, device, register_backend
from . import context as C
from . import copies
from . import driver as D
from .stream import current_stream_handle

__all__ = ["CudaBackend", "CudaStorage", "CudaRawMemory", "cuda_backend", "allocator", "allocators",
           "find_allocation"]


class CudaRawMemory:
    """Segments and events of CUDA device ``index`` for the caching allocator (the ``RawMemory`` protocol)."""

    def __init__(self, index: int):
        self.index = index

    def malloc(self, nbytes: int) -> int:
        C.ensure_context(self.index)
        if capture_routes:
            # A new segment for a graph's private pool: cuMemAlloc is refused while this thread captures
            # (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, seen on the H200) unless the thread's capture mode is relaxed
            # for the call, as PyTorch's allocator does (c10/cuda CUDAStreamCaptureModeGuard around cudaMalloc).
            relaxed = D.cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED
            prev = D.call(D.cu.cuThreadExchangeStreamCaptureMode, relaxed)
            try:
                r = D.cu.cuMemAlloc(nbytes)
            finally:
                D.cu.cuThreadExchangeStreamCaptureMode(prev)
        else:
            r = D.cu.cuMemAlloc(nbytes)
        code = int(r[0])
        if code == D.OUT_OF_MEMORY:
            raise RawOutOfMemory(nbytes)
        if code:
            D.raise_error(D.cu.cuMemAlloc, code, (nbytes,))
        return int(r[1])

    def free(self, ptr: int) -> None:
        C.ensure_context(self.index)
        D.call(D.cu.cuMemFree, ptr)

    def mem_get_info(self) -> tuple[int, int]:
        return C.mem_get_info(self.index)

    def record_event(self, stream: int):
        C.ensure_context(self.index)
        ev = D.call(D.cu.cuEventCreate, int(D.cu.CUevent_flags.CU_EVENT_DISABLE_TIMING))
        D.call(D.cu.cuEventRecord, ev, stream)
        return ev

    def event_done(self, event) -> bool:
        (err,) = D.cu.cuEventQuery(event)
        code = int(err)
        if code == D.NOT_READY:
            return False
        if code:
            D.raise_error(D.cu.cuEventQuery, code, (event,))
        return True

    def event_release(self, event) -> None:
        D.call(D.cu.cuEventDestroy, event)

    def synchronize(self) -> None:
        C.ensure_context(self.index)
        D.call(D.cu.cuCtxSynchronize)


_allocators: dict[int, CachingAllocator] = {}

# (device index, stream handle) -> private pool key, for the streams a CUDA graph is being captured on
# (:mod:`.graphs`): allocations queued there come from the graph's pool. Empty unless a capture is under way.
capture_routes: dict[tuple[int, int], int] = {}


def _refuse_capture(i: int, what: str) -> None:
    """Host <-> device copies cannot be part of a captured graph (the host side is not replayed): refuse one on a
    capturing stream before the driver invalidates the capture with a less clear error."""
    s = current_stream_handle(i)
    check((i, s) not in capture_routes, lambda: f"{what}: a copy between host and device memory on cuda:{i} while "
          "a CUDA graph is being captured on its current stream (a .item(), .cpu(), .numpy() or a host tensor "
          "moved to the GPU inside the captured code); do it before or after the capture")


def allocator(index: int) -> CachingAllocator:
    """The caching allocator of CUDA device ``index`` (created on first use)."""
    a = _allocators.get(index)
    if a is None:
        a = _allocators.setdefault(index, CachingAllocator(CudaRawMemory(index), f"cuda:{index}", index))
    return a


def allocators() -> dict[int, CachingAllocator]:
    """The allocators created so far, by device index."""
    return dict(_allocators)


def find_allocation(ptr: int):
    """The live allocation (a block or a registered foreign region) of any CUDA device containing ``ptr``, or
    None: what the launcher asks about pointer arguments that are not nbxtensor tensors."""
    for a in list(_allocators.values()):
        b = a.find(ptr)
        if b is not None:
            return b
    return None


class CudaStorage(Storage):
    """A storage on a CUDA device: its block returns to the allocator (or its foreign registration is dropped)
    when the storage is garbage-collected."""

    __slots__ = ()

    def __del__(self):
        h = self.handle
        if h is None:
            return
        try:
            if h.external:
                if not h.freed:
                    h.allocator.unregister_external(h)
            else:
                h.segment.allocator.release(h)   # never blocks or raises; a freed block is ignored
        except Exception:  # interpreter shutdown: modules may already be torn down
            pass


def _live(st: Storage, fn: str, arg: str) -> None:
    check(isinstance(st, CudaStorage), lambda: f"{fn}: {arg} must be a storage of the cuda backend, got "
          f"{type(st).__name__} on {getattr(st, 'device', '?')}", TypeError)
    h = st.handle
    check(h is None or not h.freed, lambda: f"{fn}: {arg} (cuda storage at 0x{st.ptr:x}, {st.nbytes} bytes) was "
          "already freed: use after free")


def _span(st: Storage, offset: int, nbytes: int, fn: str, arg: str) -> None:
    check(isinstance(offset, int) and isinstance(nbytes, int) and offset >= 0 and nbytes >= 0
          and offset + nbytes <= st.nbytes,
          lambda: f"{fn}: {arg} bytes [{offset}, {offset} + {nbytes}) are outside the storage of {st.nbytes} bytes "
                  f"on {st.device}", ValueError)


class CudaBackend:
    """The ``cuda`` device type (see the module docstring)."""

    type = "cuda"

    def canonical(self, dev: device) -> device:
        """``cuda`` -> ``cuda:<current device>``.

        Raises:
            RuntimeError: no CUDA device in this process (with the reason), or an index out of range.
        """
        if not D.available():
            raise RuntimeError(f"device {dev}: {D.unavailable_reason()}")
        i = C.device_index(dev.index if dev.index is not None else None, fn=f"device {dev}")
        return device("cuda", i)

    def allocate(self, nbytes: int, dev: device) -> Storage:
        """``nbytes`` uninitialised bytes on ``dev`` (a ``cuda:i`` device), for use on its current stream.

        Raises:
            TypeError / ValueError: ``nbytes`` not a non-negative int.
            nbxtensor.OutOfMemoryError: see :class:`~nbxtensor.memory.caching.CachingAllocator`.
        """
        if dev.index is None:  # a bare nbx.device("cuda") reaching the backend directly: the current device
            dev = self.canonical(dev)
        i = dev.index
        if nbytes == 0 and type(nbytes) is int:
            return CudaStorage(dev, 0, 0, None, self)
        a = _allocators.get(i)
        if a is None:
            a = allocator(i)
        s = current_stream_handle(i)
        if capture_routes:
            s = capture_routes.get((i, s), s)
        b = a.malloc(nbytes, s)
        return CudaStorage(dev, nbytes, b.ptr, b, self)

    def write(self, dst: Storage, offset: int, src: np.ndarray, non_blocking: bool = False) -> None:
        """Copy host bytes ``src`` into ``dst`` at byte ``offset`` (synchronous unless ``non_blocking``).

        Raises:
            TypeError: ``dst`` is not a cuda storage.
            RuntimeError: ``dst`` was freed or is read-only.
            ValueError: the bytes do not fit in ``dst`` at ``offset``.
        """
        _live(dst, "cuda write", "dst")
        check(not dst.readonly, "cuda write: the destination storage is read-only")
        _span(dst, offset, int(src.nbytes), "cuda write", "dst")
        i = dst.device.index
        if capture_routes:
            _refuse_capture(i, "cuda write")
        copies.h2d(dst.ptr + offset, src, i, current_stream_handle(i), non_blocking)

    def read(self, src: Storage, offset: int, nbytes: int) -> np.ndarray:
        """A host copy (uint8, length ``nbytes``) of ``src``'s bytes from ``offset``, after the work queued on
        the current stream.

        Raises:
            TypeError / RuntimeError / ValueError: as :meth:`write`.
        """
        _live(src, "cuda read", "src")
        _span(src, offset, nbytes, "cuda read", "src")
        out = np.empty(nbytes, dtype=np.uint8)
        i = src.device.index
        if capture_routes:
            _refuse_capture(i, "cuda read")
        copies.d2h(out, src.ptr + offset, i, current_stream_handle(i))
        return out

    def read_into(self, out: np.ndarray, src: Storage, offset: int, non_blocking: bool = False) -> None:
        """Copy ``out.nbytes`` bytes of ``src`` from ``offset`` into host array ``out`` (asynchronous only with
        ``non_blocking`` into pinned memory)."""
        _live(src, "cuda read", "src")
        _span(src, offset, int(out.nbytes), "cuda read", "src")
        i = src.device.index
        if capture_routes:
            _refuse_capture(i, "cuda read")
        copies.d2h(out, src.ptr + offset, i, current_stream_handle(i), non_blocking)

    def copy(self, dst: Storage, dst_offset: int, src: Storage, src_offset: int, nbytes: int) -> None:
        """Queue a copy of ``nbytes`` from ``src`` to ``dst`` (same device, or peer devices) on the current
        stream(s); asynchronous, ordered with later work on those streams.

        Raises:
            TypeError / RuntimeError / ValueError: as :meth:`write`, for either storage.
        """
        _live(dst, "cuda copy", "dst")
        _live(src, "cuda copy", "src")
        check(not dst.readonly, "cuda copy: the destination storage is read-only")
        _span(dst, dst_offset, nbytes, "cuda copy", "dst")
        _span(src, src_offset, nbytes, "cuda copy", "src")
        di, si = dst.device.index, src.device.index
        if di == si:
            copies.d2d(dst.ptr + dst_offset, src.ptr + src_offset, nbytes, di, current_stream_handle(di))
        else:
            copies.peer(dst.ptr + dst_offset, di, src.ptr + src_offset, si, nbytes, current_stream_handle(di),
                        current_stream_handle(si))

    def memset(self, dst: Storage, offset: int, value: int, nbytes: int) -> None:
        """Queue setting ``nbytes`` bytes of ``dst`` from ``offset`` to byte ``value`` on the current stream.

        Raises:
            TypeError / RuntimeError / ValueError: as :meth:`write`; ``value`` not in 0..255.
        """
        _live(dst, "cuda memset", "dst")
        check(not dst.readonly, "cuda memset: the destination storage is read-only")
        _span(dst, offset, nbytes, "cuda memset", "dst")
        i = dst.device.index
        copies.memset(dst.ptr + offset, value, nbytes, i, current_stream_handle(i))

    def synchronize(self, dev: device) -> None:
        """Wait for all work queued on ``dev``."""
        from .stream import synchronize
        synchronize(dev.index)

    def record_stream(self, st: Storage, stream) -> None:
        """Mark ``st`` as used by ``stream`` (a :class:`~nbxtensor.device.cuda.stream.Stream`), so its memory is
        not reused before the work queued there when it is freed completes (``Tensor.record_stream``)."""
        _live(st, "record_stream", "storage")
        if st.handle is not None and not st.handle.external:
            check(stream.device_index == st.device.index, lambda: f"record_stream: stream is on cuda:"
                  f"{stream.device_index} but the storage on {st.device}")
            allocator(st.device.index).record_stream(st.handle, stream.cuda_stream)

    def wrap_external(self, ptr: int, nbytes: int, dev: device, owner: object, readonly: bool = False) -> Storage:
        """A storage over foreign device memory (imported through DLPack, say), registered with ``dev``'s
        allocator so the launcher accepts pointers into it. ``owner`` is kept alive as long as the storage;
        the memory is never freed here.

        Raises:
            ValueError: ``ptr``/``nbytes`` negative or not ints; ``ptr`` is not device memory of ``dev`` (as the
                driver reports it).
        """
        check(isinstance(ptr, int) and isinstance(nbytes, int) and ptr >= 0 and nbytes >= 0,
              lambda: f"wrap_external: ptr and nbytes must be non-negative ints, got ptr={ptr!r}, nbytes={nbytes!r}",
              ValueError)
        dev = self.canonical(dev)
        i = dev.index
        if nbytes and ptr:
            C.ensure_context(i)
            attr = D.cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
            r = D.cu.cuPointerGetAttribute(attr, ptr)
            check(int(r[0]) == 0, lambda: f"wrap_external: 0x{ptr:x} is not CUDA memory known to the driver "
                  f"({D.error_name(int(r[0]))})", ValueError)
            check(int(r[1]) == i, lambda: f"wrap_external: 0x{ptr:x} is memory of cuda:{int(r[1])}, not of {dev}",
                  ValueError)
        e: ExternalBlock = allocator(i).register_external(ptr, nbytes, owner, readonly)
        return CudaStorage(dev, nbytes, ptr, e, self, readonly=readonly, owner=owner)


cuda_backend = CudaBackend()
register_backend(cuda_backend)
