"""The allocator interface: what a device allocator provides and what it asks of the raw memory below it.

An :class:`Allocator` hands out :class:`Block` objects (an address and a size on one device, tagged with the
stream they were allocated for) and takes them back. It never touches a driver itself: it asks a
:class:`RawMemory` provider for whole segments and for stream events. The CUDA device supplies a provider over
``cuMemAlloc``/``cuEventRecord`` (:mod:`nbxtensor.device.cuda.backend`); tests supply a fake over plain integers,
so every rule of the allocator (rounding, split, merge, stream-aware reuse, out-of-memory retry) is tested on a
machine with no GPU.

Every allocator also answers :meth:`Allocator.find`: which live allocation (its own, or foreign memory
registered with :meth:`Allocator.register_external`, e.g. imported through DLPack) contains an address. The
launcher uses it to refuse pointers that nothing in this process allocated.
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["Block", "Segment", "FREE", "ALLOCATED", "PENDING", "RETIRED", "QUICK", "ExternalBlock", "RawMemory",
           "RawOutOfMemory", "Allocator", "format_bytes"]


class RawOutOfMemory(Exception):
    """Raised by a :class:`RawMemory` provider when the device cannot give a segment of the asked size."""


class RawMemory(Protocol):
    """Segments and stream events of one device, as an allocator needs them.

    Addresses are ints; ``stream`` is an opaque int handle (0 is the default stream).
    """

    def malloc(self, nbytes: int) -> int:
        """A new segment of ``nbytes`` bytes; raise :class:`RawOutOfMemory` when the device has no room."""

    def free(self, ptr: int) -> None:
        """Return a segment obtained from :meth:`malloc` (never a part of one)."""

    def mem_get_info(self) -> tuple[int, int]:
        """``(free, total)`` bytes of the device, as the driver reports them now."""

    def record_event(self, stream: int) -> Any:
        """An event recorded now on ``stream`` (completes when the work queued so far on it completes)."""

    def event_done(self, event: Any) -> bool:
        """True once ``event`` has completed (does not block)."""

    def event_release(self, event: Any) -> None:
        """Destroy an event from :meth:`record_event`."""

    def synchronize(self) -> None:
        """Wait for all work queued on the device."""


# Block states.
FREE = 0        # cached: in its pool's free list, may be reused
ALLOCATED = 1   # held by a caller
PENDING = 2     # returned, but another stream may still use it: waits for events before becoming FREE
RETIRED = 3     # a caller's handle after its free; the memory belongs to another block object now
QUICK = 4       # returned and kept whole (not merged) for a request of the same size; merged when needed


class Block:
    """One allocation (or a free piece of a segment) of a caching allocator.

    Attributes:
        ptr: device address of the first byte.
        size: bytes the block spans (the request rounded up to the size class).
        requested: bytes the caller asked for (``<= size``; allocated blocks only).
        stream: handle of the stream the block was allocated for; only that stream reuses it.
        segment: the :class:`Segment` the block lies in.
        prev, next: neighbours in the segment (address order), for merging.
        state: ``FREE``, ``ALLOCATED``, ``PENDING``, ``RETIRED`` (a handle whose allocation was freed: it
            stays retired even when the memory is reused, so use-after-free and double free are detected) or
            ``QUICK`` (returned, kept whole for the next request of its size on its stream; see
            :mod:`nbxtensor.memory.caching`).
        stream_uses: other streams that used the block (:meth:`Allocator.record_stream`); reuse waits for them.
        alloc_id: sequence number of the allocation (unique per allocator), for traces and error messages.
    """

    __slots__ = ("ptr", "size", "requested", "stream", "segment", "prev", "next", "state", "stream_uses", "pending",
                 "alloc_id")

    external = False

    def __init__(self, ptr: int, size: int, stream: int, segment: "Segment", prev=None, next=None, state=FREE):
        self.ptr = ptr
        self.size = size
        self.stream = stream
        self.segment = segment
        self.prev = prev
        self.next = next
        self.state = state
        self.stream_uses = None

    @property
    def allocated(self) -> bool:
        return self.state == ALLOCATED

    @property
    def freed(self) -> bool:
        """True for a caller's handle whose allocation was freed."""
        return self.state == RETIRED

    @property
    def device_index(self) -> int:
        return self.segment.device_index

    @property
    def end(self) -> int:
        return self.ptr + self.size

    def __repr__(self) -> str:
        state = ("cached", "allocated", "pending", "freed", "quick-cached")[self.state]
        return (f"Block(ptr=0x{self.ptr:x}, size={self.size}, requested={getattr(self, 'requested', 0)}, "
                f"stream=0x{self.stream:x}, {state}, id={getattr(self, 'alloc_id', -1)})")


class Segment:
    """One raw allocation from the provider, cut into blocks.

    Attributes:
        ptr, size: the address and bytes the provider returned.
        small: True for the small pool (requests up to ``SMALL_SIZE``).
        stream: the stream whose blocks live in it (blocks never move between streams).
        nblocks: how many blocks it is cut into now (1 when whole).
        head: its first block (address order).
        allocator: the allocator owning it (a freed storage finds its allocator through its block).
        device_index: the device it is on.
    """

    __slots__ = ("ptr", "size", "small", "stream", "nblocks", "head", "allocator", "device_index")

    def __init__(self, ptr: int, size: int, small: bool, stream: int, allocator=None, device_index: int = 0):
        self.ptr = ptr
        self.size = size
        self.small = small
        self.stream = stream
        self.nblocks = 1
        self.head = None
        self.allocator = allocator
        self.device_index = device_index


class ExternalBlock:
    """Foreign memory registered with an allocator (imported through DLPack, wrapped from another library).

    The allocator never frees it: ``owner`` (kept alive as long as the block) owns the bytes.
    """

    __slots__ = ("ptr", "size", "requested", "owner", "state", "alloc_id", "device_index", "readonly", "allocator",
                 "__weakref__")

    external = True

    def __init__(self, ptr: int, size: int, owner: object, alloc_id: int, device_index: int, readonly: bool,
                 allocator=None):
        self.allocator = allocator
        self.ptr = ptr
        self.size = size
        self.requested = size
        self.owner = owner
        self.state = ALLOCATED      # RETIRED once unregistered
        self.alloc_id = alloc_id
        self.device_index = device_index
        self.readonly = readonly

    @property
    def allocated(self) -> bool:
        return self.state == ALLOCATED

    @property
    def freed(self) -> bool:
        return self.state == RETIRED

    @property
    def end(self) -> int:
        return self.ptr + self.size

    def __repr__(self) -> str:
        return f"ExternalBlock(ptr=0x{self.ptr:x}, size={self.size}, owner={type(self.owner).__name__})"


class Allocator(Protocol):
    """What every device allocator offers (the caching pool now; an arena and a static planner later)."""

    def malloc(self, nbytes: int, stream: int = 0) -> Block:
        """A block of at least ``nbytes`` bytes for use on ``stream``."""

    def free(self, block: Block) -> None:
        """Return ``block``; raises on a double free or a block of another allocator."""

    def record_stream(self, block: Block, stream: int) -> None:
        """Note that ``stream`` uses ``block``: its reuse waits for the work queued on ``stream`` at free time."""

    def find(self, ptr: int) -> "Block | ExternalBlock | None":
        """The live allocation (own or registered external) containing address ``ptr``, or None."""

    def register_external(self, ptr: int, nbytes: int, owner: object, readonly: bool = False) -> ExternalBlock:
        """Make foreign memory known (to :meth:`find`) until :meth:`unregister_external`."""

    def unregister_external(self, block: ExternalBlock) -> None:
        """Forget foreign memory."""

    def empty_cache(self) -> None:
        """Give every wholly free cached segment back to the device."""

    def memory_stats(self) -> dict:
        """Counters, PyTorch's key names (``allocated_bytes.all.current`` ...)."""


def format_bytes(n: int) -> str:
    """``n`` bytes in a human unit (``1.50 GiB``), for error messages."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} bytes"
