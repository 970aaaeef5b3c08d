"""Probe: how the L2 flush before a timed run changes the measured rate of read-bound kernels (H200).

The harness flushes L2 by writing a 256 MiB buffer before each timed run. That leaves up to an L2's worth of dirty
lines, which the timed kernel then writes back to HBM while it reads. This probe times the same kernels after
three preparations: ``write`` (the harness's memset), ``write+read`` (the memset, then a read-only reduction
of another 256 MiB buffer, which evicts the dirty lines before the start event) and ``read`` (the read only). Prints p50 microseconds and GB/s of each kernel's own bytes per preparation.

    PYTHONPATH=src python3 benchmarks/probe_flush.py
"""
from __future__ import annotations

import sys

import numpy as np

import nbxtensor as nbx
from nbxtensor.device.base import backend_for

MiB = 1 << 20


def main() -> int:
    dev = "cuda"
    F = nbx.nn.functional
    wbuf = nbx.empty(256 * MiB, dtype=nbx.uint8, device=dev)
    rbuf = nbx.ones(64 * MiB, dtype=nbx.float32, device=dev)       # 256 MiB read by a sum
    be = backend_for(wbuf.device)
    st = wbuf.untyped_storage()

    def write():
        be.memset(st, 0, 0, 256 * MiB)

    def read():
        rbuf.sum()

    preps = {"write": [write], "write+read": [write, read], "read": [read]}
    x = nbx.randn(1, 4096, device=dev).to(nbx.bfloat16)
    w14 = (nbx.randn(14336, 4096, device=dev) * 0.02).to(nbx.bfloat16)
    w4 = (nbx.randn(4096, 4096, device=dev) * 0.02).to(nbx.bfloat16)
    s117 = nbx.randn(14336 * 4096, device=dev).to(nbx.bfloat16)
    a = nbx.randn(64 * MiB, device=dev).to(nbx.bfloat16)          # 128 MiB
    cases = [("gemv 4096->14336", lambda: F.linear(x, w14), w14.numel() * 2),
             ("gemv 4096->4096", lambda: F.linear(x, w4), w4.numel() * 2),
             ("sum 117 MB bf16", lambda: s117.sum(), s117.numel() * 2),
             ("neg 128 MiB bf16", lambda: a.neg(), a.numel() * 4)]
    print(f"{'case':22s} " + " ".join(f"{p:>22s}" for p in preps))
    for name, fn, nbytes in cases:
        fn()
        nbx.cuda.synchronize()
        cells = []
        for prep in preps.values():
            times = []
            for _ in range(40):
                for p in prep:
                    p()
                s, e = nbx.cuda.Event(enable_timing=True), nbx.cuda.Event(enable_timing=True)
                s.record()
                fn()
                e.record()
                e.synchronize()
                times.append(s.elapsed_time(e) * 1e3)
            p50 = float(np.percentile(times[5:], 50))
            cells.append(f"{p50:8.1f}us {nbytes / p50 / 1e3:6.0f}GB/s {100 * nbytes / p50 / 1e3 / 4800:3.0f}%")
        print(f"{name:22s} " + " ".join(f"{c:>22s}" for c in cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
