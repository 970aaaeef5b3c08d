"""Set-up shared by the GPU sweeps (benchmarks/sweep_*.py): the device check, the output folder, the device
facts, the timing settings, the event clock with its L2 flush, and the commit and date the rows carry."""

from __future__ import annotations

import os
import sys
import time
from types import SimpleNamespace

import harness as H


def start(name: str, nbx, dev: str, out: str, smoke: bool, *, warmup_ms: float = 10.0, rep_ms: float = 40.0,
          min_reps: int = 5, max_reps: int = 40):
    """Prepare a sweep named ``name`` on ``dev`` writing into ``out``.

    Returns:
        ``None`` (after saying why on stderr) when ``dev`` is a CUDA device and none is available; else a
        namespace with ``facts`` (bench_ops.device_facts), ``timing`` (a harness.TimingConfig: the given repetition
        settings, an L2 flush of at least 4x the card's L2; one or two short runs for ``smoke`` or the CPU),
        ``notes`` (a list the clock appends to), ``clock``, ``commit`` and ``date``.
    """
    from bench_ops import device_facts, git_commit, make_clock
    if dev.startswith("cuda") and not (hasattr(nbx, "cuda") and nbx.cuda.is_available()):
        print(f"{name}: no CUDA device is available (use --device cpu --smoke with NBX_TRITON_INTERPRET=1)",
              file=sys.stderr)
        return None
    os.makedirs(out, exist_ok=True)
    facts = device_facts(nbx, dev)
    timing = H.TimingConfig(warmup_ms=warmup_ms, rep_ms=rep_ms, min_reps=min_reps, max_reps=max_reps)
    if smoke or dev == "cpu":
        timing = H.TimingConfig(warmup_ms=0.0, rep_ms=1.0, min_reps=1, max_reps=2, flush_bytes=1 << 20)
    elif facts.get("l2"):
        timing.flush_bytes = max(timing.flush_bytes, 4 * facts["l2"])
    notes: list[str] = []
    clock = make_clock(nbx, dev, timing.flush_bytes, notes)
    return SimpleNamespace(facts=facts, timing=timing, notes=notes, clock=clock, commit=git_commit(),
                           date=time.strftime("%Y-%m-%dT%H:%M:%S"))
