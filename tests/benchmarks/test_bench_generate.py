"""benchmarks/bench_generate.py's GEMV rows without a GPU: ``--gemv-only --smoke --device cpu`` runs the single-call
rows and the layer-stream row (every call of the stream timed between one event pair, bytes of all of them) on
tiny shapes through the interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(REPO, "benchmarks")
INTERPRET = os.environ.get("NBX_TRITON_INTERPRET", "0") == "1"


@pytest.mark.skipif(INTERPRET, reason="runs its own interpreter process")
def test_gemv_rows_smoke():
    env = dict(os.environ, NBX_TRITON_INTERPRET="1", PYTHONPATH=os.path.join(REPO, "src"))
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "bench_generate.py"), "--device", "cpu", "--gemv-only",
                           "--smoke", "--no-bf16", "--stream-layers", "2", "--json"],
                          capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {r["row"]: r for r in json.loads(proc.stdout.strip().splitlines()[-1])}
    sys.path.insert(0, BENCH)
    import bench_generate as B
    assert set(rows) == {f"int4_gemv.{N}x{K}" for N, K in B.SMOKE_SHAPES} | {"int4_gemv.layer_stream[2x3]"}
    st = rows["int4_gemv.layer_stream[2x3]"]
    assert st["calls"] == 2 * len(B.SMOKE_LAYER)
    # bytes of every call of the stream: packed weight, float16 scales and minima, x and out (bfloat16)
    want = 2 * sum(N * K // 2 + 2 * 2 * N * (K // 32) + 2 * K + 2 * N for _, N, K in B.SMOKE_LAYER)
    assert abs(st["MB"] * 1e6 - want) < 1
    assert st["GB/s"] > 0 and st["p50_us"] > 0 and st["per_call_us"] * st["calls"] == pytest.approx(st["p50_us"])
    assert isinstance(st["host_bound"], bool)


@pytest.mark.skipif(INTERPRET, reason="runs its own interpreter process")
def test_gemv_rows_smoke_with_config_override():
    """--int4-config lays settings over the table (here the word-decode kernel) and the rows replay the recorded
    launches (their names say so)."""
    env = dict(os.environ, NBX_TRITON_INTERPRET="1", PYTHONPATH=os.path.join(REPO, "src"))
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "bench_generate.py"), "--device", "cpu", "--gemv-only",
                           "--smoke", "--no-bf16", "--stream-layers", "1", "--json", "--int4-config",
                           '{"WORD_DECODE": true, "BLOCK_K": 64, "BLOCK_N": 4}'],
                          capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [r["row"] for r in json.loads(proc.stdout.strip().splitlines()[-1])]
    assert len(rows) == 3 and all("replayed" in r for r in rows), rows
