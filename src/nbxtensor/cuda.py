"""``nbx.cuda``: the CUDA device with PyTorch's names (``torch.cuda``), on cuda-bindings, with no torch.

Devices: :func:`is_available`, :func:`device_count`, :func:`get_device_properties`, :func:`get_device_name`,
:func:`get_device_capability`, :func:`current_device`, :func:`set_device`, ``with nbx.cuda.device(i):`` (the
current device is per thread). Streams and events: :class:`Stream`, :func:`current_stream`,
:func:`default_stream`, ``with nbx.cuda.stream(s):``, :class:`Event` (``enable_timing=``, ``record``, ``wait``,
``elapsed_time``, ``synchronize``), :func:`synchronize`. Memory (the caching allocator of each device):
:func:`empty_cache`, :func:`memory_allocated`, :func:`memory_reserved`, :func:`max_memory_allocated`,
:func:`max_memory_reserved`, :func:`reset_peak_memory_stats`, :func:`memory_stats`, :func:`mem_get_info`.
Pinned host memory: :func:`pin_memory`, :func:`is_pinned`. Facts of the device's architecture:
:func:`get_device_facts`.

On a machine with no NVIDIA driver everything imports; :func:`is_available` is False and :func:`device_count`
0, and anything that needs a device raises ``RuntimeError`` saying why.

Example:
    >>> import nbxtensor as nbx
    >>> if nbx.cuda.is_available():
    ...     x = nbx.arange(10, dtype=nbx.float16).cuda()
    ...     s = nbx.cuda.Stream()
    ...     with nbx.cuda.stream(s):
    ...         y = x.clone()
    ...     s.synchronize()
"""

from __future__ import annotations

import ctypes

import numpy as np

from ._errors import OutOfMemoryError
from .device.base import device as _device_type
from .device.cuda import backend as _backend
from .device.cuda import context as _ctx
from .device.cuda import copies as _copies
from .device.cuda import driver as _drv
from .device.cuda import stream as _stream
from .device.cuda.context import CudaDeviceProperties, DeviceGuard
from .device.cuda.driver import CudaError
from .device.cuda.graphs import CUDAGraph, graph, graph_pool_handle, is_current_stream_capturing
from .device.cuda.stream import Event, Stream, StreamContext

__all__ = ["is_available", "device_count", "current_device", "set_device", "device", "device_of",
           "get_device_properties", "get_device_name", "get_device_capability", "get_device_facts",
           "Stream", "Event", "StreamContext", "stream", "current_stream", "default_stream", "set_stream",
           "synchronize", "empty_cache", "memory_allocated", "memory_reserved", "max_memory_allocated",
           "max_memory_reserved", "reset_peak_memory_stats", "memory_stats", "mem_get_info", "pin_memory",
           "is_pinned", "record_stream", "driver_version", "init", "is_initialized", "OutOfMemoryError",
           "CudaError", "CudaDeviceProperties", "can_device_access_peer", "CUDAGraph", "graph", "graph_pool_handle",
           "is_current_stream_capturing"]


def is_available() -> bool:
    """True when the CUDA driver loads and reports at least one device. Never raises."""
    return _drv.available() and _ctx.device_count() > 0


def device_count() -> int:
    """The number of CUDA devices (0 when CUDA is not usable here)."""
    return _ctx.device_count()


def init() -> None:
    """Initialise the driver now (it is otherwise initialised on first use).

    Raises:
        RuntimeError: no CUDA device here, with the reason.
    """
    _drv.init()


def is_initialized() -> bool:
    """True when the driver has been initialised successfully."""
    return _drv._state["done"] and _drv._state["reason"] is None


def driver_version() -> int:
    """The CUDA version the driver supports, as an int (12040 for 12.4)."""
    return _drv.driver_version()


def current_device() -> int:
    """The index of the calling thread's current device."""
    return _ctx.current_device()


def set_device(device) -> None:
    """Make ``device`` (an index, ``"cuda:i"`` or an ``nbx.device``) the calling thread's current device."""
    _ctx.set_device(device)


class device(DeviceGuard):  # noqa: N801 - PyTorch's name
    """``with nbx.cuda.device(i):`` runs the block with device ``i`` current (``torch.cuda.device``); ``None`` or
    a negative index leaves the current device alone."""

    __slots__ = ()

    def __init__(self, device):
        if isinstance(device, int) and device < 0:
            device = None
        super().__init__(device)


def device_of(tensor) -> device:
    """A :class:`device` context for the device of ``tensor`` (a no-op for a CPU tensor)."""
    return device(tensor.device.index if tensor.device.type == "cuda" else None)


def get_device_properties(device=None) -> CudaDeviceProperties:
    """Name, compute capability, SM count, total memory and other driver-reported properties of ``device``."""
    return _ctx.get_device_properties(device)


def get_device_name(device=None) -> str:
    """The name of ``device`` (``"NVIDIA H200"``)."""
    return _ctx.get_device_properties(device).name


def get_device_capability(device=None) -> tuple[int, int]:
    """``(major, minor)`` compute capability of ``device`` (default: current)."""
    return _ctx.get_device_capability(device)


def get_device_facts(device=None) -> dict:
    """The architecture facts (``device/facts/sm<XY>.json``) of ``device``.

    Raises:
        MissingFactError: no facts file for the device's architecture (naming it).
    """
    from .device.facts import facts
    return facts(_ctx.get_device_properties(device).arch)


def can_device_access_peer(device, peer_device) -> bool:
    """True when ``device`` can access ``peer_device``'s memory directly."""
    return _ctx.can_device_access_peer(device, peer_device)


def stream(stream: Stream | None) -> StreamContext:
    """``with nbx.cuda.stream(s):`` makes ``s`` current (and its device) for the block."""
    return StreamContext(stream)


def current_stream(device=None) -> Stream:
    """The calling thread's current stream on ``device`` (default: current device)."""
    return _stream.current_stream(device)


def default_stream(device=None) -> Stream:
    """The default (NULL) stream of ``device``."""
    return _stream.default_stream(device)


def set_stream(stream: Stream) -> None:
    """Make ``stream`` current on its device for the calling thread."""
    _stream.set_stream(stream)


def synchronize(device=None) -> None:
    """Wait for all work queued on ``device`` (default: current)."""
    _stream.synchronize(device)


def _alloc(device=None):
    return _backend.allocator(_ctx.device_index(device, fn="memory"))


def empty_cache() -> None:
    """Return every wholly free cached block of every device to the driver (``torch.cuda.empty_cache``), and
    idle pinned host buffers."""
    for a in _backend.allocators().values():
        a.empty_cache()
    if _drv.available():
        _copies.pinned_pool.empty_cache()


def memory_allocated(device=None) -> int:
    """Bytes held by live tensors on ``device`` (block sizes, rounded up to 512 bytes)."""
    return _alloc(device).allocated


def memory_reserved(device=None) -> int:
    """Bytes the caching allocator holds from the driver on ``device`` (live and cached)."""
    return _alloc(device).reserved


def max_memory_allocated(device=None) -> int:
    """Peak of :func:`memory_allocated` since start or :func:`reset_peak_memory_stats`."""
    return _alloc(device).max_allocated


def max_memory_reserved(device=None) -> int:
    """Peak of :func:`memory_reserved` since start or :func:`reset_peak_memory_stats`."""
    return _alloc(device).max_reserved


def reset_peak_memory_stats(device=None) -> None:
    """Set the peaks of ``device``'s statistics to their current values."""
    _alloc(device).reset_peak_stats()


def memory_stats(device=None) -> dict:
    """The allocator's counters, PyTorch's key names (``allocated_bytes.all.current``, ``num_alloc_retries``, ...)."""
    return _alloc(device).memory_stats()


def mem_get_info(device=None) -> tuple[int, int]:
    """``(free, total)`` bytes of ``device`` as the driver reports them."""
    return _ctx.mem_get_info(device)


def record_stream(tensor, stream: Stream) -> None:
    """Mark ``tensor``'s memory as used by ``stream`` (PyTorch's ``Tensor.record_stream``): when freed, it is
    not reused before the work queued on ``stream`` until then completes."""
    _backend.cuda_backend.record_stream(tensor.untyped_storage(), stream)


def pin_memory(tensor):
    """A copy of CPU tensor ``tensor`` in pinned (page-locked) host memory (``Tensor.pin_memory``).

    Copies between pinned memory and a device run at the full link speed, and ``non_blocking`` copies from it
    are truly asynchronous.

    Raises:
        RuntimeError: ``tensor`` is not on the CPU; no CUDA device.
    """
    from ._errors import check
    from .device.base import Storage
    from .device.cpu import cpu_backend
    from .tensor.core import Tensor, host_view
    check(tensor.device.type == "cpu", lambda: f"pin_memory: expected a cpu tensor, got one on {tensor.device}")
    _drv.init()
    nbytes = tensor.numel() * tensor.dtype.itemsize
    blk = _copies.pinned_pool.alloc(max(nbytes, 1))
    keeper = _PinnedKeeper(blk)
    # The NumPy handle's buffer is a ctypes array holding the keeper: every NumPy view of the tensor's memory
    # (tensor.numpy(), slices of it) keeps the block out of the pool while it exists.
    buf = (ctypes.c_char * max(nbytes, 1)).from_address(blk.ptr)
    buf.keeper = keeper
    handle = np.frombuffer(buf, dtype=np.uint8)[:nbytes]
    st = Storage(_device_type("cpu"), nbytes, blk.ptr, handle, cpu_backend, owner=keeper)
    out = Tensor(st, tuple(tensor.shape), _contiguous(tensor.shape), 0, tensor.dtype)
    if nbytes:
        host_view(out)[...] = host_view(tensor)
    return out


def _contiguous(shape):
    from .shapes import contiguous_strides
    return contiguous_strides(tuple(shape))


class _PinnedKeeper:
    """Returns a pinned block to the pool when the last storage over it goes away."""

    __slots__ = ("block",)

    def __init__(self, block):
        self.block = block

    def __del__(self):
        try:
            _copies.pinned_pool.release(self.block)
        except Exception:
            pass


def is_pinned(tensor) -> bool:
    """True when CPU tensor ``tensor`` lives in pinned host memory (``Tensor.is_pinned``)."""
    if tensor.device.type != "cpu" or not _drv.available():
        return False
    return _copies.is_pinned_ptr(tensor.data_ptr(), max(tensor.nbytes, 64 << 10))
