"""The caching allocator: one per device, over a :class:`~nbxtensor.memory.allocator.RawMemory` provider.

Rules (those of PyTorch's ``CUDACachingAllocator``, c10/cuda/CUDACachingAllocator.cpp, so memory numbers read
the same):

- **Size classes.** A request is rounded up to a multiple of 512 bytes (at least 512). Requests up to 1 MiB
  come from the *small pool*, cut from 2 MiB segments; larger ones from the *large pool*, cut from 20 MiB
  segments when under 10 MiB, else from a segment of the request rounded up to 2 MiB.
- **Split and merge.** A cached block bigger than the request is split when the rest is at least 512 bytes
  (small pool) or more than 1 MiB (large pool); freeing a block merges it with free neighbours of its segment
  (deferred: see *Quick reuse*).
  Best fit: the smallest cached block that is large enough (ties: lowest address).
- **Streams.** A block is reused only by allocations on the stream it was allocated for (work on one stream is
  ordered, so no synchronisation is needed). A block used by another stream (:meth:`record_stream`) is reused
  only after events recorded at free time on those streams complete.
- **Out of memory.** When the provider has no room, every wholly free cached segment is returned to the device
  and the request retried once; then :class:`nbxtensor.OutOfMemoryError` names the requested, free, total,
  allocated and reserved bytes. A failed call frees nothing the caller holds.
- ``empty_cache`` returns wholly free segments to the device; ``allocated`` counts the rounded sizes of live
  blocks, ``reserved`` the segments held (PyTorch's ``memory_allocated``/``memory_reserved``).
- **Quick reuse.** A freed block (with no other stream to wait for) is not merged at once: it is kept whole,
  in state ``QUICK``, in a per-(pool, stream, size) list, and a later request of the same rounded size on the
  same stream takes the most recently freed one (LIFO) with no split, merge or free-list search. Merging is
  deferred, not dropped: a request that no quick block serves first merges every quick block of its (pool,
  stream) with its free neighbours, then takes the best fit as above (so it is served exactly as by an
  allocator that merges on free); ``empty_cache``, the out-of-memory retry and
  :meth:`CachingAllocator.segments` merge every quick block first. The statistics keep PyTorch's meanings
  (``allocated`` counts live blocks, ``reserved`` the segments held; a quick block is cached memory, neither
  live nor a segment of its own). What differs from merging on free is only which block a same-size request
  gets back (the one freed last, where merge-then-best-fit could pick a lower address), so the layout, and
  with it when a later request needs a new segment, can differ. PyTorch's allocator also hands a request a
  cached block of exactly its size when one exists (its best fit finds the exact size first).

Every live allocation is recorded with its requested and rounded size: :meth:`CachingAllocator.find` answers
which allocation contains an address (own blocks and registered foreign memory).

The hot path (a request served from the quick lists, and its free) is written for host cost: one new block
object per allocation/free pair, two dict look-ups and a list pop/append, the lock taken once per call, no
per-call allocation of other objects; statistics are written out inline.
"""

from __future__ import annotations

import bisect
import operator
import threading

from .._errors import OutOfMemoryError, check
from .allocator import (ALLOCATED, FREE, PENDING, QUICK, RETIRED, Block, ExternalBlock, RawMemory, RawOutOfMemory,
                        Segment, format_bytes)

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
    """Cached blocks of one (pool, stream), sorted by (size, address) as one int key each."""

    __slots__ = ("keys", "blocks")

    def __init__(self):
        self.keys: list[int] = []
        self.blocks: dict[int, Block] = {}

    def add(self, b: Block) -> None:
        bisect.insort(self.keys, (b.size << _SHIFT) | b.ptr)
        self.blocks[b.ptr] = b

    def remove(self, b: Block) -> None:
        keys = self.keys
        k = (b.size << _SHIFT) | b.ptr
        i = bisect.bisect_left(keys, k)
        assert i < len(keys) and keys[i] == k, b
        del keys[i]
        del self.blocks[b.ptr]


_MASK = (1 << _SHIFT) - 1

# Stat slots in CachingAllocator._cur / _peak: kind base + pool (0 all, 1 small, 2 large).
_KINDS = ("allocated_bytes", "reserved_bytes", "requested_bytes", "allocation", "segment")
_POOLS = ("all", "small_pool", "large_pool")
_A_BYTES, _R_BYTES, _Q_BYTES, _A_COUNT, _S_COUNT = 0, 3, 6, 9, 12   # the hot paths use these literals
# Totals in CachingAllocator._tot.
_TOTALS = ("allocation.allocated", "allocation.freed", "segment.allocated", "segment.freed",
           "allocated_bytes.allocated", "allocated_bytes.freed")


class CachingAllocator:
    """A caching allocator for one device (see the module docstring for its rules).

    Args:
        raw: the provider of segments and events.
        name: the device's name for messages (``"cuda:0"``).
        device_index: stored in every segment (the launcher checks it against the launch device).

    Thread-safe. :meth:`release` (used by finalizers) never blocks: when the lock is held (by another thread,
    or by this thread when a garbage collection runs a finalizer inside an allocator call) the block is queued
    and freed by the next call.
    """

    def __init__(self, raw: RawMemory, name: str = "device", device_index: int = 0):
        self.raw = raw
        self.name = name
        self.device_index = device_index
        self._lock = threading.Lock()
        self._deferred: list[Block] = []
        self._fsmall: dict[int, _FreeList] = {}   # stream -> cached small-pool blocks
        self._flarge: dict[int, _FreeList] = {}   # stream -> cached large-pool blocks
        self._segments: dict[int, Segment] = {}
        self._seg_ptrs: list[int] = []           # sorted segment addresses, for find()
        self._ext: dict[int, ExternalBlock] = {}
        self._pending: list[tuple[object, Block]] = []   # (event, pending block waiting for it)
        self._nid = 0                            # the next allocation id
        self._total: int | None = None
        self._limit = -1                         # requests up to this many bytes skip the checks (-1: not known)
        self._qsmall: dict[int, dict[int, list[Block]]] = {}   # stream -> size -> QUICK small-pool blocks
        self._qlarge: dict[int, dict[int, list[Block]]] = {}   # stream -> size -> QUICK large-pool blocks
        n = 3 * len(_KINDS)
        self._cur = [0] * n
        self._peak = [0] * n
        self._tot = [0] * len(_TOTALS)
        self.num_alloc_retries = 0
        self.num_ooms = 0
        self.trace: list[tuple] | None = None
        self._held: dict[int, int] = {}   # pool key -> holders (captured graphs): never released, never evented
        self.capturing = 0                # captures under way on this device: no event queries meanwhile

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
            self._limit = self._total
        return self._total

    def _freelist(self, small: bool, stream: int) -> _FreeList:
        d = self._fsmall if small else self._flarge
        fl = d.get(stream)
        if fl is None:
            fl = d[stream] = _FreeList()
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
        if type(nbytes) is not int or nbytes < 0 or nbytes > self._limit:
            nbytes = self._check_request(nbytes)
        size = 512 if nbytes < 512 else (nbytes + 511) & -512          # round_size, written out
        small = size <= 1048576                                          # SMALL_SIZE
        lock = self._lock
        lock.acquire()
        try:
            if self._deferred:
                self._run_deferred()
            if self._pending and not self.capturing:
                self._process_events()
            qd = (self._qsmall if small else self._qlarge).get(stream)
            if qd is not None and (lst := qd.get(size)):
                b = lst.pop()                 # quick reuse: the block freed last of this size and stream
                b.state = ALLOCATED
            else:
                b = self._best_fit(size, small, stream, nbytes, qd)
            b.requested = nbytes
            b.alloc_id = i = self._nid
            self._nid = i + 1
            # statistics, written out (this is the hot path): allocated bytes, requested bytes, allocations
            cur, peak = self._cur, self._peak
            bsize = b.size
            p = 1 if small else 2
            v = cur[0] + bsize
            cur[0] = v
            if v > peak[0]:
                peak[0] = v
            v = cur[p] + bsize
            cur[p] = v
            if v > peak[p]:
                peak[p] = v
            v = cur[6] + nbytes
            cur[6] = v
            if v > peak[6]:
                peak[6] = v
            v = cur[9] + 1
            cur[9] = v
            if v > peak[9]:
                peak[9] = v
            v = cur[9 + p] + 1
            cur[9 + p] = v
            if v > peak[9 + p]:
                peak[9 + p] = v
            tot = self._tot
            tot[0] += 1
            tot[4] += bsize
            if self.trace is not None:
                self.trace.append(("alloc", i, nbytes, bsize, b.ptr, stream))
            return b
        finally:
            lock.release()

    def _check_request(self, nbytes) -> int:
        """``nbytes`` as an int after the checks of :meth:`malloc` (raises as documented there)."""
        if type(nbytes) is not int:
            check(not isinstance(nbytes, bool) and hasattr(type(nbytes), "__index__"),
                  lambda: f"{self.name} malloc: nbytes must be an int, got {type(nbytes).__name__} {nbytes!r}",
                  TypeError)
            nbytes = operator.index(nbytes)
        if nbytes < 0:
            raise ValueError(f"{self.name} malloc: nbytes must be >= 0, got {nbytes}")
        total = self._total
        if total is None:
            total = self._total_bytes()
        if nbytes > total:
            self.num_ooms += 1
            raise OutOfMemoryError(self._oom_message(nbytes, "it exceeds the device's total memory"))
        return nbytes

    def _best_fit(self, size: int, small: bool, stream: int, nbytes: int, qd: dict | None) -> Block:
        """The ALLOCATED block for a request no quick block serves: merge the quick blocks of (pool, stream)
        (``qd``), then the smallest free block that fits (split when the rest is big enough), else a new
        segment: what an allocator merging on free would do. Caller holds the lock; statistics are the
        caller's."""
        if qd:
            self._merge_quick(qd)
        fl = (self._fsmall if small else self._flarge).get(stream)
        f = None
        if fl is not None:
            keys = fl.keys
            i = bisect.bisect_left(keys, size << _SHIFT)
            if i < len(keys):
                f = fl.blocks[keys[i] & _MASK]
        if f is None:
            f = self._new_segment(size, small, stream, nbytes)
            fl = self._freelist(small, stream)
            fl.add(f)
            keys = fl.keys
            i = bisect.bisect_left(keys, (f.size << _SHIFT) | f.ptr)
        rest = f.size - size
        if (rest >= MIN_BLOCK) if small else (rest > SMALL_SIZE):
            # Split: a new block takes the front; the cached block keeps the rest (re-keyed in place).
            seg = f.segment
            b = Block(f.ptr, size, stream, seg, f.prev, f, ALLOCATED)
            if f.prev is None:
                seg.head = b
            else:
                f.prev.next = b
            f.prev = b
            del keys[i]
            blocks = fl.blocks
            del blocks[f.ptr]
            f.ptr += size
            f.size = rest
            bisect.insort(keys, (rest << _SHIFT) | f.ptr)
            blocks[f.ptr] = f
            seg.nblocks += 1
        else:
            del keys[i]
            del fl.blocks[f.ptr]
            b = f
            b.state = ALLOCATED
        return b

    def _merge_quick(self, qd: dict) -> None:
        """Make every quick block of ``qd`` (size -> blocks, of one pool and stream) free: merged with its free
        neighbours and in its free list."""
        fl = None
        for lst in qd.values():
            for f in lst:                 # _coalesce, written out
                seg = f.segment
                if fl is None:            # every block of qd is in one pool and stream: one free list
                    fl = self._freelist(seg.small, seg.stream)
                    keys, blocks = fl.keys, fl.blocks
                p = f.prev
                if p is not None and p.state == FREE:
                    del keys[bisect.bisect_left(keys, (p.size << _SHIFT) | p.ptr)]
                    del blocks[p.ptr]
                    f.ptr = p.ptr
                    f.size += p.size
                    f.prev = pp = p.prev
                    p.prev = p.next = None
                    seg.nblocks -= 1
                    if pp is None:
                        seg.head = f
                    else:
                        pp.next = f
                n = f.next
                if n is not None and n.state == FREE:
                    del keys[bisect.bisect_left(keys, (n.size << _SHIFT) | n.ptr)]
                    del blocks[n.ptr]
                    f.size += n.size
                    f.next = nn = n.next
                    n.prev = n.next = None
                    seg.nblocks -= 1
                    if nn is not None:
                        nn.prev = f
                f.state = FREE
                bisect.insort(keys, (f.size << _SHIFT) | f.ptr)
                blocks[f.ptr] = f
        qd.clear()

    def _merge_all_quick(self) -> None:
        for d in (self._qsmall, self._qlarge):
            for qd in d.values():
                if qd:
                    self._merge_quick(qd)

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
        seg = Segment(ptr, seg_bytes, small, stream, self, self.device_index)
        self._segments[ptr] = seg
        bisect.insort(self._seg_ptrs, ptr)
        pool = 1 if small else 2
        self._add(_R_BYTES, pool, seg_bytes)
        self._add(_S_COUNT, pool, 1)
        self._tot[2] += 1
        b = Block(ptr, seg_bytes, stream, seg)
        seg.head = b
        return b

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
        lock = self._lock
        lock.acquire()
        try:
            self._free_locked(block)
            if self._deferred:
                self._run_deferred()
        finally:
            lock.release()

    def release(self, block: Block) -> None:
        """Like :meth:`free`, for finalizers: never blocks and never raises. When the lock is busy (another
        thread, or a garbage collection inside an allocator call on this thread) the block is queued and freed
        by the next allocator call."""
        if not self._lock.acquire(False):
            self._deferred.append(block)
            return
        try:
            if type(block) is Block and block.state == ALLOCATED and block.segment.allocator is self:
                self._free_locked(block)
            if self._deferred:
                self._run_deferred()
        finally:
            self._lock.release()

    def _run_deferred(self) -> None:
        d = self._deferred
        while d:
            b = d.pop()
            if b.state == ALLOCATED and b.segment.allocator is self:
                self._free_locked(b)

    def _free_locked(self, b: Block) -> None:
        if type(b) is not Block or b.state != ALLOCATED or b.segment.allocator is not self:
            if type(b) is Block and b.state == RETIRED and b.segment.allocator is self:
                raise RuntimeError(f"{self.name} free: double free of the block at 0x{b.ptr:x} ({b.requested} bytes, "
                                   f"allocation #{b.alloc_id}); it was already freed")
            raise RuntimeError(f"{self.name} free: {b!r} is not a live allocation of this allocator")
        seg = b.segment
        small = seg.small
        bsize = b.size
        cur = self._cur
        p = 1 if small else 2
        cur[0] -= bsize
        cur[p] -= bsize
        cur[6] -= b.requested
        cur[9] -= 1
        cur[9 + p] -= 1
        tot = self._tot
        tot[1] += 1
        tot[5] += bsize
        if self.trace is not None:
            self.trace.append(("free", b.alloc_id))
        prev, nxt = b.prev, b.next
        b.state = RETIRED      # the caller's handle is retired for good; other objects stand for the memory
        b.prev = b.next = None
        if b.stream_uses:
            f = Block(b.ptr, bsize, b.stream, seg, prev, nxt, PENDING)
            self._link(f, seg)
            f.pending = 0
            for s in b.stream_uses:
                self._pending.append((self.raw.record_event(s), f))
                f.pending += 1
            return
        # Quick list: a new object stands for the memory, kept whole until reused or merged.
        stream = seg.stream
        q = Block(b.ptr, bsize, stream, seg, prev, nxt, QUICK)
        if prev is None:
            seg.head = q
        else:
            prev.next = q
        if nxt is not None:
            nxt.prev = q
        d = self._qsmall if small else self._qlarge
        qd = d.get(stream)
        if qd is None:
            d[stream] = {bsize: [q]}
        else:
            lst = qd.get(bsize)
            if lst is None:
                qd[bsize] = [q]
            else:
                lst.append(q)

    @staticmethod
    def _link(f: Block, seg: Segment) -> None:
        if f.prev is None:
            seg.head = f
        else:
            f.prev.next = f
        if f.next is not None:
            f.next.prev = f

    def _coalesce(self, f: Block) -> None:
        """Make pending or quick block ``f`` free: merge it with free neighbours and cache it."""
        seg = f.segment
        fl = self._freelist(seg.small, seg.stream)
        p = f.prev
        if p is not None and p.state == FREE:
            fl.remove(p)
            f.ptr, f.size, f.prev = p.ptr, f.size + p.size, p.prev
            p.prev = p.next = None
            seg.nblocks -= 1
        n = f.next
        if n is not None and n.state == FREE:
            fl.remove(n)
            f.size += n.size
            f.next = n.next
            n.prev = n.next = None
            seg.nblocks -= 1
        self._link(f, seg)
        f.state = FREE
        fl.add(f)

    def _process_events(self) -> None:
        keep = []
        for ev, f in self._pending:
            if self.raw.event_done(ev):
                self.raw.event_release(ev)
                f.pending -= 1
                if f.pending == 0:
                    self._coalesce(f)
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
            check(type(block) is Block and block.state == ALLOCATED and block.segment.allocator is self,
                  lambda: f"{self.name} record_stream: {block!r} is not a live allocation of this allocator")
            if stream != block.stream:
                if block.stream_uses is None:
                    block.stream_uses = set()
                block.stream_uses.add(stream)

    # -- cache release ------------------------------------------------------------------------------
    def _release_cached(self) -> None:
        """Return every wholly free segment to the device (waiting first for pending blocks' events)."""
        self._merge_all_quick()
        if self._pending:
            self.raw.synchronize()
            self._process_events()
        held = self._held
        whole = [b for d in (self._fsmall, self._flarge) for key, fl in d.items() if key not in held
                 for b in fl.blocks.values() if b.prev is None and b.next is None and b.size == b.segment.size]
        if not whole:
            return
        # Cached blocks may still be read by work queued before their free; wait for it before releasing.
        self.raw.synchronize()
        for b in whole:
            seg = b.segment
            self._freelist(seg.small, seg.stream).remove(b)
            del self._segments[seg.ptr]
            del self._seg_ptrs[bisect.bisect_left(self._seg_ptrs, seg.ptr)]
            self.raw.free(seg.ptr)
            pool = 1 if seg.small else 2
            self._add(_R_BYTES, pool, -seg.size)
            self._add(_S_COUNT, pool, -1)
            self._tot[3] += 1

    def empty_cache(self) -> None:
        """Return every wholly free cached segment to the device (``torch.cuda.empty_cache``)."""
        with self._lock:
            if self._deferred:
                self._run_deferred()
            self._release_cached()

    # -- private pools (captured graphs) -------------------------------------------------------------
    def hold_pool(self, key: int) -> None:
        """Keep the cached blocks allocated under ``key`` (a private pool: a stream key no stream has, used by a
        captured CUDA graph) out of :meth:`empty_cache` and out of every other key's reuse, until the matching
        :meth:`release_pool`. A captured graph replays into those blocks, so they must stay its own while it
        lives (PyTorch's graph-private memory pools, c10/cuda/CUDACachingAllocator.cpp)."""
        with self._lock:
            self._held[key] = self._held.get(key, 0) + 1

    def release_pool(self, key: int) -> None:
        """Undo one :meth:`hold_pool`; when no holder is left, the pool's wholly free segments go back to the
        device at the next :meth:`empty_cache`.

        Raises:
            RuntimeError: ``key`` is not held.
        """
        with self._lock:
            n = self._held.get(key, 0)
            check(n > 0, lambda: f"{self.name} release_pool: pool {key} is not held")
            if n == 1:
                del self._held[key]
            else:
                self._held[key] = n - 1

    def held_pools(self) -> dict[int, int]:
        """``{pool key: holders}`` of the private pools held now."""
        with self._lock:
            return dict(self._held)

    # -- lookups ------------------------------------------------------------------------------------
    def find(self, ptr: int) -> Block | ExternalBlock | None:
        """The live allocation containing address ``ptr``: an own block (``ptr`` within its rounded size) or a
        registered foreign region; None when nothing here contains it. O(log segments + blocks of the segment)."""
        with self._lock:
            sp = self._seg_ptrs
            i = bisect.bisect_right(sp, ptr) - 1
            if i >= 0:
                seg = self._segments[sp[i]]
                if ptr < seg.ptr + seg.size:
                    b = seg.head
                    while b is not None and b.ptr + b.size <= ptr:
                        b = b.next
                    if b is not None and b.state == ALLOCATED and b.ptr <= ptr:
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
            e = ExternalBlock(ptr, nbytes, owner, self._nid, self.device_index, readonly, self)
            self._nid += 1
            self._ext[e.alloc_id] = e
        return e

    def unregister_external(self, block: ExternalBlock) -> None:
        """Forget a region from :meth:`register_external` (a second call raises)."""
        with self._lock:
            check(self._ext.pop(block.alloc_id, None) is block, lambda: f"{self.name} unregister_external: {block!r} "
                  "is not registered (unregistered twice?)")
            block.state = RETIRED

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
        ``external.current`` and ``external_bytes.current`` for registered foreign memory; ``pending_frees``.
        (``requested_bytes`` is kept for ``all`` only; its pool entries read 0.)"""
        with self._lock:
            out: dict[str, int] = {}
            for k, kind in enumerate(_KINDS):
                for p, pool in enumerate(_POOLS):
                    out[f"{kind}.{pool}.current"] = self._cur[3 * k + p]
                    out[f"{kind}.{pool}.peak"] = self._peak[3 * k + p]
            for name, v in zip(_TOTALS, self._tot):
                kind, what = name.split(".")
                out[f"{kind}.all.{what}"] = v
            out["num_alloc_retries"] = self.num_alloc_retries
            out["num_ooms"] = self.num_ooms
            out["external.current"] = len(self._ext)
            out["external_bytes.current"] = sum(e.size for e in self._ext.values())
            out["pending_frees"] = len(self._pending)
            return out

    def segments(self) -> list[tuple[int, int, bool, int, int]]:
        """``(ptr, size, small_pool, stream, blocks)`` of every segment held, by address (quick blocks are merged
        first, so ``blocks`` counts the pieces an allocator merging on free would have)."""
        with self._lock:
            self._merge_all_quick()
            return sorted((s.ptr, s.size, s.small, s.stream, s.nblocks) for s in self._segments.values())

    def live_blocks(self) -> list[Block]:
        """Every live block, by address."""
        with self._lock:
            out = []
            for p in self._seg_ptrs:
                b = self._segments[p].head
                while b is not None:
                    if b.state == ALLOCATED:
                        out.append(b)
                    b = b.next
            return out
