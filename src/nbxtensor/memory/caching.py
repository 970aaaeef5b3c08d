"""The caching allocator: one per device, over a :class:`~nbxtensor.memory.allocator.RawMemory` provider.

Rules (those of PyTorch's ``CUDACachingAllocator``, c10/cuda/CUDACachingAllocator.cpp, so memory numbers read
the same):

- **Size classes.** A request is rounded up to a multiple of 512 bytes (at least 512). Requests up to 1 MiB
  come from the *small pool*, cut from 2 MiB segments; larger ones from the *large pool*, cut from 20 MiB
  segments when under 10 MiB, else from a segment of the request rounded up to 2 MiB.
- **Split and merge.** A cached block bigger than the request is split when the rest is at least 512 bytes
  (small pool) or more than 1 MiB (large pool); freeing a block merges it with free neighbours of its segment.
  Best fit: the smallest cached block that is large enough (ties: lowest address).
- **Streams.** A block is reused only by allocations on the stream it was allocated for (work on one stream is
  ordered, so no synchronisation is needed). A block used by another stream (:meth:`record_stream`) is reused
  only after events recorded at free time on those streams complete.
- **Out of memory.** When the provider has no room, every wholly free cached segment is returned to the device
  and the request retried once; then :class:`nbxtensor.OutOfMemoryError` names the requested, free, total,
  allocated and reserved bytes. A failed call frees nothing the caller holds.
- ``empty_cache`` returns wholly free segments to the device; ``allocated`` counts the rounded sizes of live
  blocks, ``reserved`` the segments held (PyTorch's ``memory_allocated``/``memory_reserved``).

Every live allocation is indexed by address: :meth:`CachingAllocator.find` answers which allocation contains
an address (own blocks and registered foreign memory), in O(log n).
"""

from __future__ import annotations

import bisect
import itertools
import operator
import threading

from .._errors import OutOfMemoryError, check
from .allocator import Block, ExternalBlock, RawMemory, RawOutOfMemory, Segment, format_bytes

__all__ = ["CachingAllocator", "round_size", "segment_size", "MIN_BLOCK", "SMALL_SIZE", "SMALL_BUFFER",
           "LARGE_BUFFER", "MIN_LARGE_ALLOC", "ROUND_LARGE"]

MIN_BLOCK = 512            # every block size is a multiple of this
SMALL_SIZE = 1 << 20       # requests up to this size use the small pool
SMALL_BUFFER = 2 << 20     # small-pool segment size
LARGE_BUFFER = 20 << 20    # large-pool segment size for requests under MIN_LARGE_ALLOC
MIN_LARGE_ALLOC = 10 << 20
ROUND_LARGE = 2 << 20      # larger requests get a segment of their size rounded up to this
_SHIFT = 64                # free-list key: size << 64 | address, so one int sorts by (size, address)


def round_size(nbytes: int) -> int:
    """The block size serving a request of ``nbytes``: a multiple of 512, at least 512."""
    return MIN_BLOCK if nbytes < MIN_BLOCK else (nbytes + MIN_BLOCK - 1) & ~(MIN_BLOCK - 1)


def segment_size(size: int) -> int:
    """The segment size to ask the device for when no cached block fits a block of ``size`` bytes."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return (size + ROUND_LARGE - 1) // ROUND_LARGE * ROUND_LARGE


class _FreeList:
    """Cached blocks of one (pool, stream), sorted by (size, address)."""

    __slots__ = ("keys", "blocks")

    def __init__(self):
        self.keys: list[int] = []
        self.blocks: dict[int, Block] = {}

    def add(self, b: Block) -> None:
        bisect.insort(self.keys, (b.size << _SHIFT) | b.ptr)
        self.blocks[b.ptr] = b

    def remove(self, b: Block) -> None:
        k = (b.size << _SHIFT) | b.ptr
        i = bisect.bisect_left(self.keys, k)
        assert i < len(self.keys) and self.keys[i] == k, b
        del self.keys[i]
        del self.blocks[b.ptr]

    def take(self, size: int) -> Block | None:
        keys = self.keys
        i = bisect.bisect_left(keys, size << _SHIFT)
        if i == len(keys):
            return None
        k = keys.pop(i)
        return self.blocks.pop(k & ((1 << _SHIFT) - 1))


# Stat slots: (kind, pool) -> index into CachingAllocator._cur / _peak. Pools: 0 all, 1 small, 2 large.
_KINDS = ("allocated_bytes", "reserved_bytes", "requested_bytes", "allocation", "segment")
_POOLS = ("all", "small_pool", "large_pool")
_A_BYTES, _R_BYTES, _Q_BYTES, _A_COUNT, _S_COUNT = (3 * i for i in range(5))


class CachingAllocator:
    """A caching allocator for one device (see the module docstring for its rules).

    Args:
        raw: the provider of segments and events.
        name: the device's name for messages (``"cuda:0"``).
        device_index: stored in every block (the launcher checks it against the launch device).

    Thread-safe. ``free`` may be called from finalizers, even from inside another call of the same allocator
    on the same thread (a garbage collection inside ``malloc``): such frees are queued and done before that
    call returns.
    """

    def __init__(self, raw: RawMemory, name: str = "device", device_index: int = 0):
        self.raw = raw
        self.name = name
        self.device_index = device_index
        self._lock = threading.Lock()
        self._holder: int | None = None          # thread id inside the lock, to detect re-entrant frees
        self._deferred: list[Block] = []
        self._free: dict[tuple[bool, int], _FreeList] = {}
        self._segments: dict[int, Segment] = {}
        self._live: dict[int, Block] = {}        # address -> live block
        self._live_ptrs: list[int] = []          # sorted addresses of live blocks
        self._ext: dict[int, ExternalBlock] = {}
        self._pending: list[tuple[object, Block]] = []   # (event, free block waiting for it)
        self._ids = itertools.count()
        self._total: int | None = None
        n = 3 * len(_KINDS)
        self._cur = [0] * n
        self._peak = [0] * n
        self._totals = {"allocation.allocated": 0, "allocation.freed": 0, "segment.allocated": 0,
                        "segment.freed": 0, "allocated_bytes.allocated": 0, "allocated_bytes.freed": 0}
        self.num_alloc_retries = 0
        self.num_ooms = 0
        self.trace: list[tuple] | None = None

    # -- helpers ------------------------------------------------------------------------------------
    def _add(self, kind: int, pool: int, delta: int) -> None:
        cur, peak = self._cur, self._peak
        for i in (kind, kind + pool):
            v = cur[i] + delta
            cur[i] = v
            if v > peak[i]:
                peak[i] = v

    def _total_bytes(self) -> int:
        if self._total is None:
            self._total = self.raw.mem_get_info()[1]
        return self._total

    def _freelist(self, small: bool, stream: int) -> _FreeList:
        fl = self._free.get((small, stream))
        if fl is None:
            fl = self._free[(small, stream)] = _FreeList()
        return fl

    # -- allocation ---------------------------------------------------------------------------------
    def malloc(self, nbytes: int, stream: int = 0) -> Block:
        """A block of at least ``nbytes`` bytes for use on ``stream``.

        Args:
            nbytes: requested bytes (0 gives a 512-byte block; the device backend serves empty storages
                without calling this).
            stream: the stream handle the memory will first be used on.

        Raises:
            TypeError: ``nbytes`` is not an int.
            ValueError: ``nbytes`` is negative.
            nbxtensor.OutOfMemoryError: more than the device's total memory, or no room after releasing the
                cache and retrying once (message: requested, free, total, allocated, reserved bytes).
        """
        if type(nbytes) is not int:
            check(not isinstance(nbytes, bool) and hasattr(type(nbytes), "__index__"),
                  lambda: f"{self.name} malloc: nbytes must be an int, got {type(nbytes).__name__} {nbytes!r}",
                  TypeError)
            nbytes = operator.index(nbytes)
        check(nbytes >= 0, lambda: f"{self.name} malloc: nbytes must be >= 0, got {nbytes}", ValueError)
        if nbytes > self._total_bytes():
            self.num_ooms += 1
            raise OutOfMemoryError(self._oom_message(nbytes, "it exceeds the device's total memory"))
        with self._lock:
            self._holder = threading.get_ident()
            try:
                if self._pending:
                    self._process_events()
                b = self._malloc_locked(nbytes, stream)
                if self._deferred:
                    self._run_deferred()
            finally:
                self._holder = None
        return b

    def _malloc_locked(self, nbytes: int, stream: int) -> Block:
        size = MIN_BLOCK if nbytes < MIN_BLOCK else (nbytes + MIN_BLOCK - 1) & ~(MIN_BLOCK - 1)
        small = size <= SMALL_SIZE
        fl = self._free.get((small, stream))
        b = fl.take(size) if fl is not None else None
        if b is None:
            b = self._new_segment(size, small, stream, nbytes)
        rest = b.size - size
        if (rest >= MIN_BLOCK) if small else (rest > SMALL_SIZE):
            r = Block(b.ptr + size, rest, stream, b.segment, self.device_index)
            r.prev, r.next = b, b.next
            if b.next is not None:
                b.next.prev = r
            b.next = r
            b.size = size
            b.segment.nblocks += 1
            self._freelist(small, stream).add(r)
        b.allocated = True
        b.requested = nbytes
        b.alloc_id = next(self._ids)
        self._live[b.ptr] = b
        bisect.insort(self._live_ptrs, b.ptr)
        pool = 1 if small else 2
        self._add(_A_BYTES, pool, b.size)
        self._add(_Q_BYTES, pool, nbytes)
        self._add(_A_COUNT, pool, 1)
        t = self._totals
        t["allocation.allocated"] += 1
        t["allocated_bytes.allocated"] += b.size
        if self.trace is not None:
            self.trace.append(("alloc", b.alloc_id, nbytes, b.size, b.ptr, stream))
        return b

    def _new_segment(self, size: int, small: bool, stream: int, nbytes: int) -> Block:
        seg_bytes = segment_size(size)
        try:
            ptr = self.raw.malloc(seg_bytes)
        except RawOutOfMemory:
            self.num_alloc_retries += 1
            self._release_cached()
            try:
                ptr = self.raw.malloc(seg_bytes)
            except RawOutOfMemory:
                self.num_ooms += 1
                raise OutOfMemoryError(self._oom_message(nbytes, f"a segment of {seg_bytes} bytes did not fit "
                                                                 "after releasing the cache and retrying")) from None
        seg = Segment(ptr, seg_bytes, small, stream)
        self._segments[ptr] = seg
        pool = 1 if small else 2
        self._add(_R_BYTES, pool, seg_bytes)
        self._add(_S_COUNT, pool, 1)
        self._totals["segment.allocated"] += 1
        return Block(ptr, seg_bytes, stream, seg, self.device_index)

    def _oom_message(self, nbytes: int, why: str) -> str:
        try:
            free, total = self.raw.mem_get_info()
        except Exception as e:  # the report must not hide the OOM behind a second error
            free, total = -1, -1
            why += f" (mem_get_info failed: {e})"
        return (f"{self.name} out of memory: tried to allocate {nbytes} bytes ({format_bytes(nbytes)}); {why}. "
                f"Device: {free} bytes free of {total} bytes total ({format_bytes(free)} of {format_bytes(total)}); "
                f"nbxtensor: {self._cur[_A_BYTES]} bytes allocated, {self._cur[_R_BYTES]} bytes reserved "
                f"({format_bytes(self._cur[_A_BYTES])} / {format_bytes(self._cur[_R_BYTES])}). Free tensors you no "
                "longer need, or use smaller batches.")

    # -- freeing ------------------------------------------------------------------------------------
    def free(self, block: Block) -> None:
        """Return ``block`` to the cache (its memory is reused by later allocations on its stream).

        Raises:
            RuntimeError: ``block`` was already freed (double free), or is not a live block of this allocator;
                nothing is changed then.
        """
        if self._holder == threading.get_ident():   # re-entrant: a finalizer ran inside a call of ours
            self._deferred.append(block)
            return
        with self._lock:
            self._holder = threading.get_ident()
            try:
                self._free_locked(block)
                if self._deferred:
                    self._run_deferred()
            finally:
                self._holder = None

    def _run_deferred(self) -> None:
        while self._deferred:
            b = self._deferred.pop()
            if self._live.get(b.ptr) is b:
                self._free_locked(b)

    def _free_locked(self, b: Block) -> None:
        if self._live.get(getattr(b, "ptr", None)) is not b:
            if isinstance(b, Block) and b.freed:
                raise RuntimeError(f"{self.name} free: double free of the block at 0x{b.ptr:x} ({b.requested} bytes, "
                                   f"allocation #{b.alloc_id}); it was already freed")
            raise RuntimeError(f"{self.name} free: {b!r} is not a live allocation of this allocator")
        del self._live[b.ptr]
        i = bisect.bisect_left(self._live_ptrs, b.ptr)
        del self._live_ptrs[i]
        small = b.segment.small
        pool = 1 if small else 2
        self._add(_A_BYTES, pool, -b.size)
        self._add(_Q_BYTES, pool, -b.requested)
        self._add(_A_COUNT, pool, -1)
        t = self._totals
        t["allocation.freed"] += 1
        t["allocated_bytes.freed"] += b.size
        if self.trace is not None:
            self.trace.append(("free", b.alloc_id))
        # The caller's block object is retired for good (so a stale handle reads as freed forever); a new
        # object stands for the free region.
        f = Block(b.ptr, b.size, b.stream, b.segment, self.device_index)
        f.prev, f.next = b.prev, b.next
        if f.prev is not None:
            f.prev.next = f
        if f.next is not None:
            f.next.prev = f
        b.prev = b.next = None
        b.allocated = False
        b.freed = True
        uses = b.stream_uses
        if uses:
            for s in uses:
                self._pending.append((self.raw.record_event(s), f))
                f.pending += 1
            return
        self._insert_free(f)

    def _insert_free(self, f: Block) -> None:
        seg = f.segment
        fl = self._freelist(seg.small, seg.stream)
        p = f.prev
        if p is not None and not p.allocated and p.pending == 0:
            fl.remove(p)
            f.ptr, f.size, f.prev = p.ptr, f.size + p.size, p.prev
            if f.prev is not None:
                f.prev.next = f
            p.prev = p.next = None
            seg.nblocks -= 1
        n = f.next
        if n is not None and not n.allocated and n.pending == 0:
            fl.remove(n)
            f.size += n.size
            f.next = n.next
            if f.next is not None:
                f.next.prev = f
            n.prev = n.next = None
            seg.nblocks -= 1
        fl.add(f)

    def _process_events(self) -> None:
        keep = []
        for ev, f in self._pending:
            if self.raw.event_done(ev):
                self.raw.event_release(ev)
                f.pending -= 1
                if f.pending == 0:
                    self._insert_free(f)
            else:
                keep.append((ev, f))
        self._pending = keep

    def record_stream(self, block: Block, stream: int) -> None:
        """Note that ``stream`` (not the block's own) uses ``block``; its reuse after :meth:`free` waits for the
        work queued on ``stream`` up to that free (PyTorch's ``Tensor.record_stream``).

        Raises:
            RuntimeError: ``block`` is not a live allocation of this allocator.
        """
        with self._lock:
            check(self._live.get(block.ptr) is block, lambda: f"{self.name} record_stream: {block!r} is not a live "
                  "allocation of this allocator")
            if stream != block.stream:
                if block.stream_uses is None:
                    block.stream_uses = set()
                block.stream_uses.add(stream)

    # -- cache release ------------------------------------------------------------------------------
    def _release_cached(self) -> None:
        """Return every wholly free segment to the device (waiting first for deferred frees' events)."""
        if self._pending:
            self.raw.synchronize()
            self._process_events()
        whole = [b for fl in self._free.values() for b in fl.blocks.values()
                 if b.prev is None and b.next is None and b.size == b.segment.size]
        if not whole:
            return
        # Cached blocks may still be read by work queued before their free; wait for it before releasing.
        self.raw.synchronize()
        for b in whole:
            seg = b.segment
            self._freelist(seg.small, seg.stream).remove(b)
            del self._segments[seg.ptr]
            self.raw.free(seg.ptr)
            pool = 1 if seg.small else 2
            self._add(_R_BYTES, pool, -seg.size)
            self._add(_S_COUNT, pool, -1)
            self._totals["segment.freed"] += 1

    def empty_cache(self) -> None:
        """Return every wholly free cached segment to the device (``torch.cuda.empty_cache``)."""
        with self._lock:
            self._holder = threading.get_ident()
            try:
                self._release_cached()
                if self._deferred:
                    self._run_deferred()
            finally:
                self._holder = None

    # -- lookups ------------------------------------------------------------------------------------
    def find(self, ptr: int) -> Block | ExternalBlock | None:
        """The live allocation containing address ``ptr``: an own block (``ptr`` within its rounded size) or a
        registered foreign region; None when nothing here contains it."""
        ptrs = self._live_ptrs
        i = bisect.bisect_right(ptrs, ptr) - 1
        if i >= 0:
            b = self._live.get(ptrs[i])
            if b is not None and ptr < b.ptr + b.size:
                return b
        for e in self._ext.values():
            if e.ptr <= ptr < e.ptr + max(e.size, 1):
                return e
        return None

    def register_external(self, ptr: int, nbytes: int, owner: object, readonly: bool = False) -> ExternalBlock:
        """Make foreign memory (``nbytes`` at ``ptr``, owned by ``owner``) known to :meth:`find`.

        Raises:
            TypeError / ValueError: ``ptr`` or ``nbytes`` not non-negative ints.
        """
        check(isinstance(ptr, int) and isinstance(nbytes, int), lambda: f"{self.name} register_external: ptr and "
              f"nbytes must be ints, got {type(ptr).__name__} and {type(nbytes).__name__}", TypeError)
        check(ptr >= 0 and nbytes >= 0, lambda: f"{self.name} register_external: ptr and nbytes must be >= 0, got "
              f"ptr=0x{ptr:x}, nbytes={nbytes}", ValueError)
        with self._lock:
            e = ExternalBlock(ptr, nbytes, owner, next(self._ids), self.device_index, readonly)
            self._ext[e.alloc_id] = e
        return e

    def unregister_external(self, block: ExternalBlock) -> None:
        """Forget a region from :meth:`register_external` (a second call raises)."""
        with self._lock:
            check(self._ext.pop(block.alloc_id, None) is block, lambda: f"{self.name} unregister_external: {block!r} "
                  "is not registered (unregistered twice?)")
            block.freed = True
            block.allocated = False

    # -- statistics ---------------------------------------------------------------------------------
    @property
    def allocated(self) -> int:
        """Bytes in live blocks (rounded sizes), PyTorch's ``memory_allocated``."""
        return self._cur[_A_BYTES]

    @property
    def reserved(self) -> int:
        """Bytes in segments held from the device, PyTorch's ``memory_reserved``."""
        return self._cur[_R_BYTES]

    @property
    def max_allocated(self) -> int:
        return self._peak[_A_BYTES]

    @property
    def max_reserved(self) -> int:
        return self._peak[_R_BYTES]

    def reset_peak_stats(self) -> None:
        """Set every peak to its current value."""
        with self._lock:
            self._peak[:] = self._cur

    def memory_stats(self) -> dict:
        """Counters under PyTorch's key names: ``<kind>.<pool>.current|peak`` for kinds ``allocated_bytes``,
        ``reserved_bytes``, ``requested_bytes``, ``allocation``, ``segment`` and pools ``all``, ``small_pool``,
        ``large_pool``; ``<kind>.all.allocated|freed`` totals; ``num_alloc_retries``, ``num_ooms``;
        ``external.current`` and ``external_bytes.current`` for registered foreign memory."""
        with self._lock:
            out: dict[str, int] = {}
            for k, kind in enumerate(_KINDS):
                for p, pool in enumerate(_POOLS):
                    out[f"{kind}.{pool}.current"] = self._cur[3 * k + p]
                    out[f"{kind}.{pool}.peak"] = self._peak[3 * k + p]
            for name, v in self._totals.items():
                kind, what = name.split(".")
                out[f"{kind}.all.{what}"] = v
            out["num_alloc_retries"] = self.num_alloc_retries
            out["num_ooms"] = self.num_ooms
            out["external.current"] = len(self._ext)
            out["external_bytes.current"] = sum(e.size for e in self._ext.values())
            out["pending_frees"] = len(self._pending)
            return out

    def segments(self) -> list[tuple[int, int, bool, int, int]]:
        """``(ptr, size, small_pool, stream, blocks)`` of every segment held, by address."""
        with self._lock:
            return sorted((s.ptr, s.size, s.small, s.stream, s.nblocks) for s in self._segments.values())

    def live_blocks(self) -> list[Block]:
        """Every live block, by address."""
        with self._lock:
            return [self._live[p] for p in self._live_ptrs]
