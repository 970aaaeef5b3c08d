"""CUDA devices and contexts: the device count, each device's properties, and the current device per thread.

Each device is used through its *primary context* (``cuDevicePrimaryCtxRetain``), the context the CUDA runtime,
PyTorch, CuPy and Triton's launcher also use, so memory and streams interoperate with them. The *current
device* is per thread, as in PyTorch: a new thread starts on device 0. Making a device current binds its
primary context to the calling thread (``cuCtxSetCurrent``) the first time the thread needs it.
"""

from __future__ import annotations

import operator
import threading
from dataclasses import dataclass

from ..._errors import check
from . import driver as D

__all__ = ["device_count", "current_device", "set_device", "device_index", "ensure_context", "primary_context",
           "DeviceGuard", "CudaDeviceProperties", "get_device_properties", "get_device_capability",
           "can_device_access_peer", "enable_peer_access", "mem_get_info", "cu_device"]

_tls = threading.local()
_lock = threading.Lock()
_contexts: dict[int, object] = {}
_devices: dict[int, object] = {}
_props: dict[int, "CudaDeviceProperties"] = {}
_count: list[int] = []
_peer_enabled: set[tuple[int, int]] = set()


def device_count() -> int:
    """The number of CUDA devices (0 where CUDA is not usable; never raises)."""
    if not _count:
        if not D.available():
            return 0
        _count.append(int(D.call(D.cu.cuDeviceGetCount)))
    return _count[0]


def device_index(dev=None, *, fn: str = "cuda") -> int:
    """A device index from ``None`` (the current device), an int, ``"cuda:1"`` or an ``nbx.device``.

    Raises:
        ValueError: a device that is not a CUDA device, naming it.
        RuntimeError: no CUDA device here; an index out of range (naming the count).
    """
    if dev is None:
        i = current_device()
    elif isinstance(dev, int) and not isinstance(dev, bool):
        i = dev
    else:
        from ..base import device as Device
        d = dev if isinstance(dev, Device) else Device(dev) if isinstance(dev, str) else None
        check(d is not None and d.type == "cuda", lambda: f"{fn}: expected a CUDA device, got {dev!r}", ValueError)
        i = current_device() if d.index is None else d.index
    i = operator.index(i)
    D.init()
    n = device_count()
    check(0 <= i < n, lambda: f"{fn}: CUDA device index {i} is out of range; this machine has {n} CUDA device"
          f"{'s' if n != 1 else ''}")
    return i


def current_device() -> int:
    """The index of the current device of the calling thread (0 until :func:`set_device`)."""
    return getattr(_tls, "device", 0)


def set_device(dev) -> None:
    """Make ``dev`` the current device of the calling thread (``torch.cuda.set_device``).

    Raises:
        RuntimeError: no such device.
    """
    i = device_index(dev, fn="set_device")
    _tls.device = i
    ensure_context(i)


def cu_device(i: int):
    """The driver's ``CUdevice`` for index ``i``."""
    d = _devices.get(i)
    if d is None:
        D.init()
        d = _devices[i] = D.call(D.cu.cuDeviceGet, i)
    return d


def primary_context(i: int):
    """The retained primary context of device ``i`` (retained once per process)."""
    c = _contexts.get(i)
    if c is None:
        with _lock:
            c = _contexts.get(i)
            if c is None:
                c = _contexts[i] = D.call(D.cu.cuDevicePrimaryCtxRetain, cu_device(i))
    return c


def ensure_context(i: int) -> None:
    """Bind device ``i``'s primary context to the calling thread if it is not bound already."""
    if getattr(_tls, "ctx", -1) != i:
        D.call(D.cu.cuCtxSetCurrent, primary_context(i))
        _tls.ctx = i


class DeviceGuard:
    """``with DeviceGuard(i):`` runs the block with device ``i`` current in this thread, then restores the
    previous device (``torch.cuda.device``). ``None`` leaves the current device alone. Reentrant and nestable."""

    __slots__ = ("idx", "prev")

    def __init__(self, dev):
        self.idx = None if dev is None else device_index(dev, fn="device")
        self.prev: list[int] = []

    def __enter__(self):
        if self.idx is not None:
            self.prev.append(current_device())
            _tls.device = self.idx
            ensure_context(self.idx)
        return self

    def __exit__(self, *exc):
        if self.idx is not None:
            p = self.prev.pop()
            _tls.device = p
            if p != self.idx:
                ensure_context(p)
        return False


@dataclass(frozen=True)
class CudaDeviceProperties:
    """What the driver reports about a device at run time (``torch.cuda.get_device_properties``).

    Sizes in bytes, clocks in kHz. ``arch`` is the facts-file name (``"sm90"``).
    """

    index: int
    name: str
    major: int
    minor: int
    multi_processor_count: int
    total_memory: int
    L2_cache_size: int
    max_threads_per_multi_processor: int
    max_threads_per_block: int
    warp_size: int
    regs_per_multiprocessor: int
    shared_memory_per_block: int
    shared_memory_per_block_optin: int
    shared_memory_per_multiprocessor: int
    clock_rate_khz: int
    memory_clock_rate_khz: int
    memory_bus_width: int
    pci_bus_id: str
    uuid: str

    @property
    def arch(self) -> str:
        return f"sm{self.major}{self.minor}"

    @property
    def peak_dram_bandwidth(self) -> float:
        """Bytes/s from the memory clock and bus width (x2 for double data rate). A rough bound; datasheet
        figures (H200: 4.8 TB/s) are the reference in benchmarks."""
        return 2.0 * self.memory_clock_rate_khz * 1e3 * self.memory_bus_width / 8

    def __repr__(self) -> str:
        return (f"CudaDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
                f"total_memory={self.total_memory // (1 << 20)}MB, multi_processor_count="
                f"{self.multi_processor_count}, L2_cache_size={self.L2_cache_size // (1 << 20)}MB)")


def get_device_properties(dev=None) -> CudaDeviceProperties:
    """The properties of ``dev`` (default: the current device), read from the driver once and cached.

    Raises:
        RuntimeError: no CUDA device, or no such device.
    """
    i = device_index(dev, fn="get_device_properties")
    p = _props.get(i)
    if p is not None:
        return p
    cu = D.cu
    d = cu_device(i)
    A = cu.CUdevice_attribute

    def attr(name: str) -> int:
        return int(D.call(cu.cuDeviceGetAttribute, getattr(A, "CU_DEVICE_ATTRIBUTE_" + name), d))

    raw_name = D.call(cu.cuDeviceGetName, 256, d)
    name = raw_name.split(b"\0", 1)[0].decode() if isinstance(raw_name, bytes) else str(raw_name)
    try:
        u = D.call(cu.cuDeviceGetUuid, d)
        b = bytes(u.bytes) if hasattr(u, "bytes") else b""
        h = b.hex()
        uuid = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}" if len(h) == 32 else ""
    except (D.CudaError, AttributeError, TypeError):
        uuid = ""
    pci = (f"{attr('PCI_DOMAIN_ID'):04x}:{attr('PCI_BUS_ID'):02x}:{attr('PCI_DEVICE_ID'):02x}.0")
    p = CudaDeviceProperties(
        index=i, name=name,
        major=attr("COMPUTE_CAPABILITY_MAJOR"), minor=attr("COMPUTE_CAPABILITY_MINOR"),
        multi_processor_count=attr("MULTIPROCESSOR_COUNT"),
        total_memory=int(D.call(cu.cuDeviceTotalMem, d)),
        L2_cache_size=attr("L2_CACHE_SIZE"),
        max_threads_per_multi_processor=attr("MAX_THREADS_PER_MULTIPROCESSOR"),
        max_threads_per_block=attr("MAX_THREADS_PER_BLOCK"),
        warp_size=attr("WARP_SIZE"),
        regs_per_multiprocessor=attr("MAX_REGISTERS_PER_MULTIPROCESSOR"),
        shared_memory_per_block=attr("MAX_SHARED_MEMORY_PER_BLOCK"),
        shared_memory_per_block_optin=attr("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        shared_memory_per_multiprocessor=attr("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        clock_rate_khz=attr("CLOCK_RATE"), memory_clock_rate_khz=attr("MEMORY_CLOCK_RATE"),
        memory_bus_width=attr("GLOBAL_MEMORY_BUS_WIDTH"), pci_bus_id=pci, uuid=uuid)
    _props[i] = p
    return p


def get_device_capability(dev=None) -> tuple[int, int]:
    """``(major, minor)`` compute capability of ``dev`` (default: current device)."""
    p = get_device_properties(dev)
    return (p.major, p.minor)


def mem_get_info(dev=None) -> tuple[int, int]:
    """``(free, total)`` bytes of ``dev`` as the driver reports them now (``torch.cuda.mem_get_info``)."""
    i = device_index(dev, fn="mem_get_info")
    ensure_context(i)
    free, total = D.call(D.cu.cuMemGetInfo)
    return int(free), int(total)


def can_device_access_peer(dev, peer) -> bool:
    """True when ``dev`` can read and write ``peer``'s memory directly (NVLink or PCIe P2P)."""
    a, b = device_index(dev, fn="can_device_access_peer"), device_index(peer, fn="can_device_access_peer")
    if a == b:
        return True
    return bool(D.call(D.cu.cuDeviceCanAccessPeer, cu_device(a), cu_device(b)))


def enable_peer_access(dev: int, peer: int) -> bool:
    """Let ``dev``'s context access ``peer``'s memory, once per pair; False when the hardware cannot."""
    if (dev, peer) in _peer_enabled or dev == peer:
        return True
    if not can_device_access_peer(dev, peer):
        return False
    prev = current_device()
    ensure_context(dev)
    try:
        r = D.cu.cuCtxEnablePeerAccess(primary_context(peer), 0)
        code = int(r[0])
        if code not in (0, 704):  # 704: CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
            D.raise_error(D.cu.cuCtxEnablePeerAccess, code, (peer, 0))
    finally:
        ensure_context(prev)
    _peer_enabled.add((dev, peer))
    return True
