"""The caching allocator's rules, on a fake raw-memory provider (no GPU): size classes, split and merge, best
fit, stream-aware reuse, release and the out-of-memory retry, statistics, the address index, bad input."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbxtensor as nbx
from nbxtensor.memory import CachingAllocator, round_size, segment_size
from nbxtensor.memory.caching import LARGE_BUFFER, MIN_BLOCK, SMALL_BUFFER, SMALL_SIZE

from fake_raw import FakeRaw

MiB = 1 << 20


def test_round_size_and_segment_size():
    assert [round_size(n) for n in (0, 1, 511, 512, 513, 1024, 1025)] == [512, 512, 512, 512, 1024, 1024, 1536]
    assert segment_size(512) == SMALL_BUFFER == 2 * MiB
    assert segment_size(SMALL_SIZE) == SMALL_BUFFER
    assert segment_size(SMALL_SIZE + 512) == LARGE_BUFFER == 20 * MiB
    assert segment_size(10 * MiB - 512) == LARGE_BUFFER
    assert segment_size(10 * MiB) == 10 * MiB
    assert segment_size(11 * MiB) == 12 * MiB
    assert segment_size((5 << 30) + 1) == (5 << 30) + 2 * MiB


def test_small_blocks_are_cut_from_one_segment(alloc, raw):
    a = alloc.malloc(1)
    b = alloc.malloc(700)
    assert (a.size, b.size) == (512, 1024)
    assert b.ptr == a.ptr + 512                      # split from the same 2 MiB segment
    assert raw.calls == [("malloc", SMALL_BUFFER)]
    assert alloc.allocated == 1536 and alloc.reserved == SMALL_BUFFER
    assert (a.requested, b.requested) == (1, 700)


def test_free_then_malloc_reuses_the_block(alloc, raw):
    a = alloc.malloc(4096)
    p = a.ptr
    alloc.free(a)
    assert alloc.allocated == 0 and alloc.reserved == SMALL_BUFFER
    b = alloc.malloc(4000)
    assert b.ptr == p and len(raw.calls) == 1


def test_best_fit_takes_the_smallest_block_that_fits(alloc):
    blocks = [alloc.malloc(n) for n in (8192, 512, 4096, 512, 2048, 512)]
    for k in (0, 2, 4):                       # free 8192, 4096, 2048 (separated by live 512-byte blocks)
        alloc.free(blocks[k])
    c = alloc.malloc(3000)                    # fits 4096 and 8192: takes 4096
    assert c.ptr == blocks[2].ptr
    d = alloc.malloc(2048)
    assert d.ptr == blocks[4].ptr


def test_freeing_merges_neighbours_and_empty_cache_releases_whole_segments(alloc, raw):
    a, b, c = alloc.malloc(1000), alloc.malloc(1000), alloc.malloc(1000)
    seg_ptr = a.ptr
    alloc.free(b)
    alloc.free(a)
    alloc.empty_cache()                       # the segment still holds c: nothing released
    assert alloc.reserved == SMALL_BUFFER and ("free", seg_ptr) not in raw.calls
    alloc.free(c)
    assert alloc.segments() == [(seg_ptr, SMALL_BUFFER, True, 0, 1)]  # merged back into one block
    alloc.empty_cache()
    assert alloc.reserved == 0 and raw.live == {} and ("free", seg_ptr) in raw.calls
    assert alloc.memory_stats()["segment.all.freed"] == 1


def test_large_pool_split_rule():
    raw = FakeRaw()
    alloc = CachingAllocator(raw)
    a = alloc.malloc(5 * MiB)                 # 20 MiB segment, 15 MiB rest > 1 MiB: split
    b = alloc.malloc(5 * MiB)
    assert b.ptr == a.ptr + 5 * MiB and raw.calls == [("malloc", LARGE_BUFFER)]
    c = alloc.malloc(11 * MiB)                # own 12 MiB segment; the 1 MiB rest is not > 1 MiB: no split
    assert raw.calls[-1] == ("malloc", 12 * MiB)
    assert c.size == 12 * MiB                 # the unsplit block keeps the whole segment
    alloc.free(c)
    d = alloc.malloc(SMALL_SIZE + 512)        # large pool, reuses the cached 10 MiB rest of the first segment
    assert d.ptr == b.ptr + 5 * MiB
    assert alloc.memory_stats()["segment.large_pool.current"] == 2


def test_small_and_large_pools_do_not_mix(alloc, raw):
    big = alloc.malloc(2 * MiB)
    alloc.free(big)
    small = alloc.malloc(100)                 # must not be cut from the cached large block
    assert not (big.ptr <= small.ptr < big.ptr + big.size)
    assert alloc.memory_stats()["segment.small_pool.current"] == 1


def test_blocks_are_reused_only_on_their_stream(alloc, raw):
    a = alloc.malloc(4096, stream=0)
    alloc.free(a)
    b = alloc.malloc(4096, stream=7)
    assert b.ptr != a.ptr and b.stream == 7 and len(raw.calls) == 2
    c = alloc.malloc(4096, stream=0)
    assert c.ptr == a.ptr


def test_record_stream_delays_reuse_until_the_event_completes(alloc, raw):
    a = alloc.malloc(4096, stream=1)
    p = a.ptr
    alloc.record_stream(a, 2)
    alloc.record_stream(a, 1)                 # its own stream: no event needed
    alloc.free(a)
    assert len(raw.events) == 1 and raw.events[0].stream == 2
    b = alloc.malloc(4096, stream=1)          # stream 2 may still be reading: not reused
    assert b.ptr != p
    raw.complete(2)
    c = alloc.malloc(4096, stream=1)
    assert c.ptr == p and raw.events[0].released
    assert alloc.memory_stats()["pending_frees"] == 0


def test_empty_cache_waits_for_pending_events(alloc, raw):
    a = alloc.malloc(4096)
    alloc.record_stream(a, 5)
    alloc.free(a)
    alloc.empty_cache()
    assert raw.syncs >= 1 and alloc.reserved == 0 and raw.live == {}


def test_out_of_memory_releases_the_cache_and_retries_once():
    raw = FakeRaw(capacity=24 * MiB)
    alloc = CachingAllocator(raw, "fake:0")
    keep = alloc.malloc(100)                  # 2 MiB small segment, held
    x = alloc.malloc(5 * MiB)                 # 20 MiB large segment
    alloc.free(x)                             # cached: 22 MiB reserved, 2 MiB room left
    y = alloc.malloc(21 * MiB)                # no cached block fits; raw fails; cache released; retry succeeds
    assert alloc.memory_stats()["num_alloc_retries"] == 1
    assert alloc.reserved == SMALL_BUFFER + 22 * MiB
    assert keep.allocated and y.allocated     # what the caller holds is untouched


def test_out_of_memory_error_names_the_numbers():
    raw = FakeRaw(capacity=16 * MiB)
    alloc = CachingAllocator(raw, "fake:0")
    keep = alloc.malloc(100)                  # holds a 2 MiB small segment
    with pytest.raises(nbx.OutOfMemoryError) as ei:
        alloc.malloc(15 * MiB)
    msg = str(ei.value)
    free, total = raw.mem_get_info()
    for part in ("fake:0", f"{15 * MiB} bytes", f"{free} bytes free", f"{total} bytes total",
                 f"{alloc.allocated} bytes allocated", f"{alloc.reserved} bytes reserved"):
        assert part in msg, (part, msg)
    assert isinstance(ei.value, RuntimeError)
    assert keep.allocated and alloc.memory_stats()["num_ooms"] == 1


def test_absurd_and_bad_sizes():
    raw = FakeRaw(capacity=64 * MiB)
    alloc = CachingAllocator(raw, "fake:0")
    with pytest.raises(nbx.OutOfMemoryError, match="exceeds the device's total memory"):
        alloc.malloc(1 << 50)
    assert raw.calls == []                    # refused without asking the device
    with pytest.raises(ValueError, match="nbytes must be >= 0, got -1"):
        alloc.malloc(-1)
    with pytest.raises(TypeError, match="must be an int, got float"):
        alloc.malloc(1.5)
    with pytest.raises(TypeError):
        alloc.malloc(True)
    b = alloc.malloc(np.int64(1000))          # NumPy ints are ints
    assert b.size == 1024


def test_double_free_and_foreign_blocks_are_refused_without_changes(alloc):
    a = alloc.malloc(1000)
    b = alloc.malloc(1000)
    alloc.free(a)
    before = alloc.memory_stats()
    with pytest.raises(RuntimeError, match=r"double free of the block at 0x[0-9a-f]+ \(1000 bytes"):
        alloc.free(a)
    other = CachingAllocator(FakeRaw(), "fake:1").malloc(1000)
    with pytest.raises(RuntimeError, match="not a live allocation of this allocator"):
        alloc.free(other)
    assert alloc.memory_stats() == before and b.allocated


def test_a_freed_handle_stays_freed_after_its_memory_is_reused(alloc):
    a = alloc.malloc(1000)
    alloc.free(a)
    b = alloc.malloc(1000)
    assert b.ptr == a.ptr and b is not a
    assert a.freed and not a.allocated and not b.freed


def test_find_answers_which_allocation_contains_an_address(alloc):
    a, b = alloc.malloc(1000), alloc.malloc(5000)
    assert alloc.find(a.ptr) is a and alloc.find(a.ptr + 1023) is a
    assert alloc.find(b.ptr + 4999) is b
    assert alloc.find(a.ptr - 1) is None
    alloc.free(a)
    assert alloc.find(a.ptr) is None
    e = alloc.register_external(0x1000, 256, owner="dlpack", readonly=True)
    assert alloc.find(0x1000 + 255) is e and alloc.find(0x1000 + 256) is None and e.readonly
    assert alloc.memory_stats()["external_bytes.current"] == 256
    assert alloc.allocated == b.size              # foreign memory is not counted
    alloc.unregister_external(e)
    assert alloc.find(0x1000) is None and e.freed
    with pytest.raises(RuntimeError, match="not registered"):
        alloc.unregister_external(e)
    with pytest.raises(ValueError):
        alloc.register_external(-5, 10, None)


def test_statistics_and_peaks(alloc):
    a = alloc.malloc(1000)
    b = alloc.malloc(3000)
    s = alloc.memory_stats()
    assert s["allocated_bytes.all.current"] == 1024 + 3072 == alloc.allocated
    assert s["requested_bytes.all.current"] == 4000
    assert s["allocation.all.current"] == 2 and s["allocation.small_pool.current"] == 2
    assert s["reserved_bytes.all.current"] == SMALL_BUFFER == alloc.reserved
    alloc.free(b)
    assert alloc.max_allocated == 4096 and alloc.allocated == 1024
    alloc.reset_peak_stats()
    assert alloc.max_allocated == 1024 and alloc.max_reserved == SMALL_BUFFER
    s = alloc.memory_stats()
    assert s["allocation.all.allocated"] == 2 and s["allocation.all.freed"] == 1
    assert s["allocated_bytes.all.peak"] == 1024
    del a


def test_trace_records_every_allocation(alloc):
    alloc.trace = []
    a = alloc.malloc(100)
    alloc.free(a)
    assert alloc.trace == [("alloc", a.alloc_id, 100, 512, a.ptr, 0), ("free", a.alloc_id)]


def test_a_release_inside_an_allocator_call_is_deferred_not_deadlocked(alloc, raw):
    victim = alloc.malloc(1000)
    # A finalizer running during the provider call (e.g. a garbage collection inside malloc) releases a block.
    raw.on_malloc = lambda: alloc.release(victim)
    big = alloc.malloc(3 * MiB)
    assert not victim.freed and alloc.memory_stats()["allocation.all.current"] == 2   # queued, not yet freed
    alloc.empty_cache()                                                                 # the next call frees it
    assert victim.freed and big.allocated
    assert alloc.allocated == big.size
    alloc.release(victim)                  # a finalizer's second release of a freed block is ignored
    alloc.release(big)
    assert alloc.allocated == 0


def test_threads(alloc):
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        held = []
        try:
            for _ in range(300):
                if held and rng.random() < 0.5:
                    alloc.free(held.pop(rng.integers(len(held))))
                else:
                    held.append(alloc.malloc(int(rng.integers(1, 300_000)), stream=seed % 2))
            for b in held:
                alloc.free(b)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors and alloc.allocated == 0
    alloc.empty_cache()
    assert alloc.reserved == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 25 * MiB), st.integers(0, 2), st.integers(0, 10 ** 6)),
                max_size=60))
def test_random_sequences_keep_the_invariants(ops):
    raw = FakeRaw(capacity=1 << 34)
    alloc = CachingAllocator(raw)
    held = []
    for is_free, size, stream, pick in ops:
        if is_free and held:
            alloc.free(held.pop(pick % len(held)))
        else:
            held.append(alloc.malloc(size, stream=stream))
        live = sorted(held, key=lambda b: b.ptr)
        for x, y in zip(live, live[1:]):
            assert x.ptr + x.size <= y.ptr                           # no overlap
        for b in live:
            seg = b.segment
            assert seg.ptr <= b.ptr and b.ptr + b.size <= seg.ptr + seg.size and b.ptr % MIN_BLOCK == 0
            assert b.size >= round_size(b.requested)
        assert alloc.allocated == sum(b.size for b in held)
        assert alloc.reserved == sum(raw.live.values())
    for b in held:
        alloc.free(b)
    alloc.empty_cache()
    assert alloc.reserved == 0 and raw.live == {} and alloc.allocated == 0


def test_a_held_private_pool_is_kept_from_empty_cache_and_from_other_streams(alloc, raw):
    pool = -3                                 # a graph's private pool: a stream key no stream has
    a = alloc.malloc(4096, stream=pool)
    seg_ptr = a.ptr
    alloc.hold_pool(pool)
    alloc.free(a)                             # freed during capture: cached for the pool only
    b = alloc.malloc(4096, stream=0)
    assert b.ptr != seg_ptr                   # the default stream does not take the pool's memory
    alloc.free(b)
    alloc.empty_cache()                       # the default stream's segment goes, the held pool's stays
    assert alloc.segments() == [(seg_ptr, SMALL_BUFFER, True, pool, 1)] and alloc.held_pools() == {pool: 1}
    assert alloc.malloc(4096, stream=pool).ptr == seg_ptr   # a later capture into the same pool reuses it
    alloc.free(alloc.live_blocks()[0])
    alloc.release_pool(pool)
    alloc.empty_cache()                       # no holder left: returned to the device
    assert alloc.reserved == 0 and raw.live == {} and alloc.held_pools() == {}
    with pytest.raises(RuntimeError, match="release_pool: pool -3 is not held"):
        alloc.release_pool(pool)


def test_pools_held_twice_need_two_releases(alloc):
    alloc.hold_pool(-1)
    alloc.hold_pool(-1)
    alloc.release_pool(-1)
    assert alloc.held_pools() == {-1: 1}
    alloc.release_pool(-1)
    assert alloc.held_pools() == {}


def test_no_event_is_queried_while_a_capture_is_under_way(alloc, raw):
    a = alloc.malloc(4096, stream=1)
    alloc.record_stream(a, 2)
    alloc.free(a)
    raw.complete(2)
    alloc.capturing = 1                       # a graph capture forbids event queries (cuEventQuery)
    queried = []
    orig = raw.event_done
    raw.event_done = lambda ev: queried.append(ev) or orig(ev)
    alloc.malloc(4096, stream=1)
    assert queried == [] and alloc.memory_stats()["pending_frees"] == 1
    alloc.capturing = 0
    alloc.malloc(4096, stream=1)
    assert len(queried) == 1 and alloc.memory_stats()["pending_frees"] == 0


# -- quick reuse: a freed block kept whole for the next request of its size ---------------------------------------
def _stats(alloc):
    s = alloc.memory_stats()
    return {k: v for k, v in s.items() if not k.startswith(("external", "pending"))}


def test_a_freed_block_is_reused_whole_by_the_next_request_of_its_size(alloc, raw):
    a, b = alloc.malloc(4096), alloc.malloc(4096)
    keep = alloc.malloc(512)                  # keeps a and b from merging with the segment's free rest
    alloc.free(a)
    alloc.free(b)
    c = alloc.malloc(4000)                    # same rounded size: the block freed last, not merged with a's
    assert c.ptr == b.ptr and c.size == 4096 and c is not b and b.freed and c.allocated
    d = alloc.malloc(4096)
    assert d.ptr == a.ptr and len(raw.calls) == 1
    assert alloc.find(d.ptr + 100) is d and keep.allocated


def test_statistics_through_quick_reuse_read_as_without_it(alloc):
    a = alloc.malloc(4000)
    after_first = _stats(alloc)
    alloc.free(a)
    b = alloc.malloc(3900)                    # quick reuse of a's memory
    s = _stats(alloc)
    assert b.ptr == a.ptr and b.requested == 3900
    assert s["allocated_bytes.all.current"] == s["allocated_bytes.small_pool.current"] == 4096 == alloc.allocated
    assert s["requested_bytes.all.current"] == 3900 and s["requested_bytes.all.peak"] == 4000
    assert s["allocation.all.current"] == s["allocation.small_pool.current"] == 1
    assert s["allocation.all.allocated"] == 2 and s["allocation.all.freed"] == 1
    assert s["allocated_bytes.all.allocated"] == 8192 and s["allocated_bytes.all.freed"] == 4096
    for k in ("reserved_bytes.all.current", "segment.all.current", "allocated_bytes.all.peak", "allocation.all.peak",
              "segment.all.allocated"):
        assert s[k] == after_first[k], k
    alloc.free(b)
    assert alloc.allocated == 0 and alloc.memory_stats()["requested_bytes.all.current"] == 0


def test_a_request_no_quick_block_serves_merges_them_first(alloc, raw):
    a = alloc.malloc(4096)
    alloc.free(a)
    b = alloc.malloc(8192)                    # another size: a's block is merged back, then best fit from the front
    assert b.ptr == a.ptr and len(raw.calls) == 1
    assert alloc.segments() == [(a.ptr, SMALL_BUFFER, True, 0, 2)]
    # quick blocks that together fit a bigger request: merged, no new segment
    xs = [alloc.malloc(256 * 1024) for _ in range(4)]
    alloc.free(b)
    for x in xs:
        alloc.free(x)
    y = alloc.malloc(SMALL_SIZE)
    assert y.ptr == a.ptr and raw.calls == [("malloc", SMALL_BUFFER)]


def test_quick_blocks_are_kept_per_stream_and_pool(alloc, raw):
    a = alloc.malloc(4096, stream=1)
    alloc.free(a)
    b = alloc.malloc(8192, stream=0)          # another stream: neither reuses nor merges stream 1's block
    assert b.segment is not a.segment
    assert alloc.malloc(4096, stream=1).ptr == a.ptr
    x = alloc.malloc(5 * MiB)                 # large pool: quick reuse too
    alloc.free(x)
    assert alloc.malloc(5 * MiB).ptr == x.ptr
    big = alloc.live_blocks()[-1]
    alloc.free(big)
    s = alloc.malloc(100, stream=0)           # a small request does not merge the large pool's quick block
    assert not (big.ptr <= s.ptr < big.ptr + big.size)
    z = alloc.malloc(3 * MiB)                 # a large miss merges it: cut from the front of its segment
    assert z.ptr == x.ptr and alloc.memory_stats()["segment.large_pool.current"] == 1


def test_empty_cache_releases_quick_blocks_of_every_stream_and_pool(alloc, raw):
    blocks = [alloc.malloc(n, stream=s) for s in (0, 1, 5) for n in (100, 4096, 300_000, 3 * MiB, 11 * MiB)]
    for b in blocks:
        alloc.free(b)
    assert alloc.reserved == sum(raw.live.values()) > 0
    alloc.empty_cache()
    assert alloc.reserved == 0 and raw.live == {} and alloc.segments() == []
    assert alloc.memory_stats()["segment.all.freed"] == alloc.memory_stats()["segment.all.allocated"]


def test_out_of_memory_retry_releases_quick_blocks():
    raw = FakeRaw(capacity=20 * MiB)
    alloc = CachingAllocator(raw, "fake:0")
    a = alloc.malloc(4096)                    # 2 MiB small segment
    alloc.free(a)                             # quick-cached, whole segment once merged
    y = alloc.malloc(19 * MiB)                # a 20 MiB segment: raw fails, the cache is released, retry fits
    assert y.allocated and alloc.memory_stats()["num_alloc_retries"] == 1
    assert alloc.reserved == 20 * MiB and ("free", a.ptr) in raw.calls


def test_pending_blocks_and_quick_neighbours_merge_in_any_order(alloc, raw):
    a, b, c = (alloc.malloc(4096, stream=1) for _ in range(3))
    alloc.record_stream(b, 2)
    alloc.free(a)
    alloc.free(c)
    alloc.free(b)                             # pending on stream 2's event, between two quick blocks
    assert alloc.segments()[0][4] == 3 and alloc.memory_stats()["pending_frees"] == 1   # no merge across b yet
    raw.complete(2)
    d = alloc.malloc(12288, stream=1)         # b freed by its event, then the quick blocks merged around it
    assert d.ptr == a.ptr and alloc.memory_stats()["pending_frees"] == 0


def test_freed_handles_of_quick_blocks_are_refused_and_not_found(alloc):
    a = alloc.malloc(1000)
    alloc.free(a)
    assert alloc.find(a.ptr) is None and "freed" in repr(a)
    before = alloc.memory_stats()
    with pytest.raises(RuntimeError, match="double free"):
        alloc.free(a)
    alloc.release(a)                          # a finalizer's late release is ignored
    assert alloc.memory_stats() == before
    b = alloc.malloc(1000)
    assert b.ptr == a.ptr and a.freed and alloc.find(a.ptr) is b


def test_trace_through_quick_reuse(alloc):
    alloc.trace = []
    a = alloc.malloc(100)
    alloc.free(a)
    b = alloc.malloc(200)
    assert b.ptr == a.ptr and b.alloc_id == a.alloc_id + 1
    assert alloc.trace == [("alloc", a.alloc_id, 100, 512, a.ptr, 0), ("free", a.alloc_id),
                           ("alloc", b.alloc_id, 200, 512, a.ptr, 0)]


def _check_structure(alloc, raw, held):
    """Every segment is an exact chain of blocks; free blocks are merged and in their free list with the right
    key; quick blocks are in their quick list; the live blocks are exactly ``held``."""
    from nbxtensor.memory.allocator import ALLOCATED, FREE, PENDING, QUICK
    from nbxtensor.memory.caching import _SHIFT
    assert sorted(alloc._segments) == alloc._seg_ptrs == sorted(raw.live)
    nfree = nquick = 0
    live = []
    for sp in alloc._seg_ptrs:
        seg = alloc._segments[sp]
        assert raw.live[sp] == seg.size
        b, pos, prev, n = seg.head, seg.ptr, None, 0
        while b is not None:
            assert b.ptr == pos and b.segment is seg and b.prev is prev and b.stream == seg.stream and b.size > 0
            assert b.state in (FREE, ALLOCATED, PENDING, QUICK)
            if b.state == FREE:
                assert not (prev is not None and prev.state == FREE), "two adjacent free blocks"
                fl = (alloc._fsmall if seg.small else alloc._flarge)[seg.stream]
                assert fl.blocks[b.ptr] is b and ((b.size << _SHIFT) | b.ptr) in fl.keys
                nfree += 1
            elif b.state == QUICK:
                qd = (alloc._qsmall if seg.small else alloc._qlarge)[seg.stream]
                assert any(q is b for q in qd[b.size])
                nquick += 1
            elif b.state == ALLOCATED:
                live.append(b)
            pos, prev, n = pos + b.size, b, n + 1
            b = b.next
        assert pos == seg.ptr + seg.size and n == seg.nblocks
    assert nfree == sum(len(fl.keys) for d in (alloc._fsmall, alloc._flarge) for fl in d.values())
    assert nfree == sum(len(fl.blocks) for d in (alloc._fsmall, alloc._flarge) for fl in d.values())
    assert nquick == sum(len(v) for d in (alloc._qsmall, alloc._qlarge) for qd in d.values() for v in qd.values())
    assert sorted(map(id, live)) == sorted(map(id, held))


_SIZES = st.one_of(st.sampled_from([0, 1, 512, 4000, 4096, 8192, 100_000, SMALL_SIZE, SMALL_SIZE + 1, 3 * MiB,
                                    11 * MiB]), st.integers(0, 12 * MiB))


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("mmmmfffrcepsq"), _SIZES, st.integers(0, 2), st.integers(0, 10 ** 6)),
                max_size=80))
def test_random_sequences_with_streams_events_and_queries_keep_every_invariant(ops):
    """m malloc, f free, r record_stream, c complete events, e empty_cache, p probe (a request of a cached
    block's size reuses memory: no new segment), s segments(), q find(). After every step: the block structure
    (_check_structure) and memory_stats against a model of the live blocks (currents, peaks, totals)."""
    raw = FakeRaw(capacity=1 << 34)
    alloc = CachingAllocator(raw)
    held = []
    peak = {"a": 0, "q": 0, "n": 0, "as": 0, "al": 0}
    nalloc = nfree = 0

    def model(blocks):
        cur = {"a": sum(b.size for b in blocks), "q": sum(b.requested for b in blocks), "n": len(blocks),
               "as": sum(b.size for b in blocks if b.segment.small),
               "al": sum(b.size for b in blocks if not b.segment.small)}
        for k in peak:
            peak[k] = max(peak[k], cur[k])
        return cur
    for op, size, stream, pick in ops:
        if op == "m" or (op in "fr" and not held):
            held.append(alloc.malloc(size, stream=stream))
            nalloc += 1
        elif op == "f":
            alloc.free(held.pop(pick % len(held)))
            nfree += 1
        elif op == "r":
            alloc.record_stream(held[pick % len(held)], (stream + 1) % 3)
        elif op == "c":
            raw.complete(stream)
        elif op == "e":
            alloc.empty_cache()
        elif op == "p":
            from nbxtensor.memory.allocator import FREE, QUICK
            cached = [b for sp in alloc._seg_ptrs for b in _chain(alloc._segments[sp]) if b.state in (FREE, QUICK)]
            if cached:
                b = cached[pick % len(cached)]
                n = b.size if not b.segment.small else min(b.size, SMALL_SIZE)
                ncalls = len(raw.calls)
                x = alloc.malloc(n, stream=b.stream)
                assert len(raw.calls) == ncalls, "cached memory was not reusable"
                model(held + [x])
                alloc.free(x)
                nalloc += 1
                nfree += 1
        elif op == "s":
            assert sum(s[1] for s in alloc.segments()) == alloc.reserved
        elif op == "q" and held:
            b = held[pick % len(held)]
            assert alloc.find(b.ptr + pick % b.size) is b
        _check_structure(alloc, raw, held)
        live = sorted(held, key=lambda b: b.ptr)
        for x, y in zip(live, live[1:]):
            assert x.ptr + x.size <= y.ptr                           # no overlap
        cur = model(held)
        s = alloc.memory_stats()
        assert (s["allocated_bytes.all.current"], s["allocated_bytes.all.peak"]) == (cur["a"], peak["a"])
        assert (s["requested_bytes.all.current"], s["requested_bytes.all.peak"]) == (cur["q"], peak["q"])
        assert (s["allocation.all.current"], s["allocation.all.peak"]) == (cur["n"], peak["n"])
        assert (s["allocated_bytes.small_pool.current"], s["allocated_bytes.small_pool.peak"]) == (cur["as"], peak["as"])
        assert (s["allocated_bytes.large_pool.current"], s["allocated_bytes.large_pool.peak"]) == (cur["al"], peak["al"])
        assert s["allocation.all.allocated"] == nalloc and s["allocation.all.freed"] == nfree
        assert s["reserved_bytes.all.current"] == sum(raw.live.values()) == alloc.reserved
        assert s["segment.all.current"] == len(raw.live)
    for b in held:
        alloc.free(b)
    raw.complete()
    alloc.free(alloc.malloc(1))                                   # a call that collects the completed events
    _check_structure(alloc, raw, [])
    assert all(n == 1 for *_, n in alloc.segments())              # every free byte merged back
    alloc.empty_cache()
    assert alloc.reserved == 0 and raw.live == {} and alloc.allocated == 0


def _chain(seg):
    b = seg.head
    while b is not None:
        yield b
        b = b.next
