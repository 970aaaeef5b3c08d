"""benchmarks/alloc_proxy.py (the cases of bench_runtime.py's alloc rows, with no GPU): each case runs the
allocator path it is named for, and the script prints a row per case."""

from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import alloc_proxy  # noqa: E402
from nbxtensor.memory import CachingAllocator  # noqa: E402


def test_cases_run_the_paths_they_are_named_for(monkeypatch):
    al = CachingAllocator(alloc_proxy.NullRaw(), "null:0", 0)
    misses = []
    orig = al._best_fit
    monkeypatch.setattr(al, "_best_fit", lambda *a: misses.append(a[0]) or orig(*a))
    cases = alloc_proxy.alloc_cases(al)
    assert set(cases) == {"cached_malloc_free", "mixed_sizes_8", "alternating_sizes"}
    for name, hits in (("cached_malloc_free", True), ("mixed_sizes_8", True), ("alternating_sizes", False)):
        fn, pairs, detail = cases[name]
        for _ in range(alloc_proxy.WARM):
            fn()
        misses.clear()
        for _ in range(3):
            fn()
        assert misses == ([] if hits else [4096, 8192] * 3), name      # quick reuse only / a miss per request
        assert detail and pairs >= 1
    assert al.allocated == 0 and len(al.segments()) == 1


def test_script_prints_a_row_per_case(capsys):
    assert alloc_proxy.main(["--calls", "200", "--runs", "2"]) == 0
    out = capsys.readouterr().out
    for name in ("cached_malloc_free", "mixed_sizes_8", "alternating_sizes"):
        row = [ln.split() for ln in out.splitlines() if ln.startswith(name)]
        assert len(row) == 1 and float(row[0][1]) > 0, out
