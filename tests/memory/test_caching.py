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
