"""Probe: what programmatic dependent launch (PDL) saves per kernel boundary on the H200, eagerly and in a CUDA graph.

A batch-1 decode step is a few hundred dependent kernels, most of them small; between two of them the GPU drains
the first grid, flushes its writes and only then launches the next. With PDL (the launch attribute
``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION``, Triton's ``launch_pdl`` option) the next grid may be
launched before the previous one has finished; its programs then wait in ``griddepcontrol.wait`` (Triton's
``gdc_wait``) until the previous grid has completed and its memory is visible, so a kernel that waits before its
first global access reads and writes exactly what it would without PDL. ``griddepcontrol.launch_dependents``
(``gdc_launch_dependents``) lets the next grid launch as soon as every program of this one has issued it, rather
than when they have exited. See the CUDA C++ Programming Guide, "Programmatic Dependent Launch and
Synchronization", and the PTX ISA, ``griddepcontrol``.

The chain: ``CALLS`` launches of ``y = 0.5 x + 1`` (float32), each reading the previous one's output, at three
sizes: ``tiny`` (4096 elements, one program: an rms_norm of one row), ``32MiB`` (8 Mi elements read, as much
written: a GEMV's weight), and ``mixed`` (tiny and 32 MiB alternating: a decode step's shape). Modes:

- ``plain``: no PDL (today's launches);
- ``wait``: PDL, ``gdc_wait`` first in every program;
- ``wait+trigger``: then ``gdc_launch_dependents`` right after the wait;
- ``trigger+wait``: ``gdc_launch_dependents`` before the wait (up to three grids in flight).

Every mode's final buffer is compared with the plain chain's, byte for byte (a mismatch is printed, never hidden).
Timed with CUDA events around the whole chain (harness.run_benchmark, no L2 flush), eagerly (back-to-back launches)
and as a captured graph's replay; prints the p50 microseconds per launch.

    PYTHONPATH=src python3 benchmarks/probe_pdl.py            # on a CUDA machine
"""
from __future__ import annotations

import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness as H  # noqa: E402
import nbxtensor as nbx  # noqa: E402
from nbxtensor.runtime.launcher import launch  # noqa: E402
from nbxtensor.runtime.triton_compat import jit, tl  # noqa: E402

try:
    from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait
except ImportError:  # pragma: no cover - an older Triton
    gdc_launch_dependents = gdc_wait = None

CALLS = 64
BLOCK = 4096
MODES = {"plain": (False, False, False), "wait": (True, False, False), "wait+trigger": (True, True, False),
         "trigger+wait": (True, True, True)}


@jit
def _chain_kernel(X, Y, n, BLOCK: tl.constexpr, WAIT: tl.constexpr, TRIGGER: tl.constexpr,
                  TRIGGER_FIRST: tl.constexpr):
    if TRIGGER_FIRST:
        gdc_launch_dependents()
    if WAIT:
        gdc_wait()
    if TRIGGER and not TRIGGER_FIRST:
        gdc_launch_dependents()
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(X + offs, mask=m)
    tl.store(Y + offs, x * 0.5 + 1.0, mask=m)


def _chain(bufs, sizes, mode):
    wait, trig, first = MODES[mode]
    for i, n in enumerate(sizes):
        launch(_chain_kernel, ((n + BLOCK - 1) // BLOCK,), bufs[i], bufs[i + 1], n, BLOCK=BLOCK, WAIT=wait,
               TRIGGER=trig, TRIGGER_FIRST=first, launch_pdl=wait, num_warps=8)


def _time(fn) -> float:
    """p50 microseconds of ``fn`` (harness.run_benchmark: CUDA events, no L2 flush: the chain's own timing)."""
    clock = H.EventClock(lambda: nbx.cuda.Event(enable_timing=True), nbx.cuda.synchronize, lambda: None)
    return statistics.median(H.run_benchmark(fn, clock, H.TimingConfig(min_reps=60, max_reps=200))) * 1e3


def main() -> int:
    if gdc_wait is None or not nbx.cuda.is_available():
        print("probe_pdl: needs CUDA and a Triton with triton.language.extra.cuda.gdc_wait")
        return 2
    big = 8 << 20
    shapes = {"tiny": [4096] * CALLS, "32MiB": [big] * CALLS, "mixed": [4096, big] * (CALLS // 2)}
    print(f"{'chain':8s} {'mode':14s} {'eager us/launch':>16s} {'graph us/launch':>16s}  check")
    bad = 0
    for name, sizes in shapes.items():
        n_max = max(sizes)
        bufs = [nbx.randn(n_max, device="cuda") for _ in range(len(sizes) + 1)]
        ref = None
        for mode in MODES:
            for b in bufs[1:]:
                b.zero_()
            _chain(bufs, sizes, mode)
            nbx.cuda.synchronize()
            eager_out = bufs[-1].cpu().numpy().tobytes()
            eager = _time(lambda: _chain(bufs, sizes, mode)) / len(sizes)
            g = nbx.cuda.CUDAGraph()
            with nbx.cuda.graph(g):
                _chain(bufs, sizes, mode)
            for b in bufs[1:]:
                b.zero_()
            g.replay()
            nbx.cuda.synchronize()
            graph_out = bufs[-1].cpu().numpy().tobytes()
            graph = _time(g.replay) / len(sizes)
            ref = eager_out if ref is None else ref
            ok = eager_out == ref and graph_out == ref
            bad += not ok
            print(f"{name:8s} {mode:14s} {eager:16.2f} {graph:16.2f}  {'same bytes' if ok else 'MISMATCH'}")
            g.reset()
        del bufs
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
