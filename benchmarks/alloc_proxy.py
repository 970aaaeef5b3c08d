"""Host cost of the caching allocator without a GPU: the cases of bench_runtime.py's ``alloc.*`` rows, run on a
``CachingAllocator`` over a null raw-memory provider (plain integers: no driver call is made once the cache is
warm, so the numbers are the allocator's own Python cost, as on a GPU host).

Cases (one call = one malloc + free pair, from a warm cache, on stream 0):

- ``cached_malloc_free``: ``free(malloc(4096))``: the quick path (the block freed last of the same rounded
  size is taken whole: no split, merge or free-list search). bench_runtime's ``alloc.cached_malloc_free``.
- ``mixed_sizes_8``: eight requests of different sizes held together, then freed (an op sequence's
  temporaries): every request is a quick reuse once warm.
- ``alternating_sizes``: ``free(malloc(4096))`` then ``free(malloc(8192))``: every request misses the quick
  lists (the other size was freed last), so each merges the quick block and splits a free block by best fit:
  the slow path's cost.

Usage: ``PYTHONPATH=src python3 benchmarks/alloc_proxy.py [--calls 100000] [--runs 7]``; prints p50 and min
over the runs of the per-call microseconds (time.perf_counter_ns).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

WARM = 20
MIXED = (4096, 1536, 65536, 512, 12288, 300_000, 2048, 24576)


def alloc_cases(al) -> dict:
    """name -> (callable, malloc/free pairs per call, detail) over caching allocator ``al``. Call a case
    :data:`WARM` times right before timing it (a case's first calls may miss: another case ran last)."""
    m, f = al.malloc, al.free

    def cached():
        f(m(4096))

    def mixed():
        bs = [m(n) for n in MIXED]
        for b in bs:
            f(b)

    def alternating():
        f(m(4096))
        f(m(8192))

    out = {"cached_malloc_free": (cached, 1, "CachingAllocator.malloc(4096) + free, served from the cache (quick "
                                  "reuse of the block freed last)"),
           "mixed_sizes_8": (mixed, len(MIXED), "8 requests of different sizes held together, then freed; per pair"),
           "alternating_sizes": (alternating, 2, "malloc+free of 4096 then 8192 bytes: every request misses the quick "
                                 "lists (merge + best-fit split); per pair")}
    return out


class NullRaw:
    """The RawMemory protocol over integers (segments never adjacent; events complete at once)."""

    def __init__(self):
        self.next = 0x7F00_0000_0000

    def malloc(self, nbytes):
        p = self.next
        self.next += nbytes + (1 << 21)
        return p

    def free(self, ptr):
        pass

    def mem_get_info(self):
        return 1 << 40, 1 << 40

    def record_event(self, stream):
        return None

    def event_done(self, ev):
        return True

    def event_release(self, ev):
        pass

    def synchronize(self):
        pass


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args(argv)
    from nbxtensor.memory import CachingAllocator
    al = CachingAllocator(NullRaw(), "null:0", 0)
    keep = [al.malloc(n) for n in (1000, 8192, 300_000, 5 << 20)]   # a cache with other live blocks
    print(f"python={sys.version.split()[0]} calls={a.calls} runs={a.runs}")
    print(f"{'case':22s} {'p50 us':>8s} {'min us':>8s}  (per malloc+free pair)")
    for name, (fn, pairs, _detail) in alloc_cases(al).items():
        n = max(1, a.calls // pairs)
        for _ in range(WARM):
            fn()
        res = []
        for _ in range(a.runs):
            t0 = time.perf_counter_ns()
            for _ in range(n):
                fn()
            res.append((time.perf_counter_ns() - t0) / (n * pairs) / 1000)
        print(f"{name:22s} {statistics.median(res):8.3f} {min(res):8.3f}", flush=True)
    del keep
    return 0


if __name__ == "__main__":
    sys.exit(main())
