"""benchmarks/bench_generate.py's GEMV rows without a GPU: ``--gemv-only --smoke --device cpu`` runs the single-call
rows and the layer-stream row (every call of the stream timed between one event pair, bytes of all of them) on
tiny shapes through the interpreter (the host has no CUDA graphs: the stream runs eagerly there); the graph path
of the layer-stream row (capture, timed replays, output check, fallback) with a stand-in ``nbx.cuda``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
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
    assert set(rows) == {f"int4_gemv.{N}x{K}" for N, K in B.SMOKE_SHAPES} | {"int4_gemv.layer_stream[2x3]",
                                                                             "int4_gemv.fused.layer_stream[2x2]"}
    for name, layer in (("int4_gemv.layer_stream[2x3]", B.SMOKE_LAYER),
                        ("int4_gemv.fused.layer_stream[2x2]", B.SMOKE_FUSED_LAYER)):
        st = rows[name]
        assert st["calls"] == 2 * len(layer)
        # bytes of every call of the stream: packed weight, float16 scales and minima, x and out (bfloat16)
        want = 2 * sum(N * K // 2 + 2 * 2 * N * (K // 32) + 2 * K + 2 * N for _, N, K in layer)
        assert abs(st["MB"] * 1e6 - want) < 1
        assert st["GB/s"] > 0 and st["p50_us"] > 0
        assert st["per_call_us"] * st["calls"] == pytest.approx(st["p50_us"])
        assert isinstance(st["host_bound"], bool)
    # the full-size fused layer is the runner's: q/k/v and gate/up rows of the seven-projection layer, summed
    seven = {p: N for p, N, _ in B.LAYER}
    fused = {p: N for p, N, _ in B.FUSED_LAYER}
    assert fused["qkv"] == seven["q"] + seven["k"] + seven["v"] and fused["gate_up"] == seven["gate"] + seven["up"]
    assert sum(N * K for _, N, K in B.FUSED_LAYER) == sum(N * K for _, N, K in B.LAYER)


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
    assert len(rows) == 4 and all("replayed" in r for r in rows), rows   # 2 single calls, 2 streams


@pytest.mark.skipif(INTERPRET, reason="runs its own interpreter process")
def test_read_stream_rows_smoke():
    """--read-streams: one graph-able stream of sum calls per size, its bytes the tensors' own."""
    env = dict(os.environ, NBX_TRITON_INTERPRET="1", PYTHONPATH=os.path.join(REPO, "src"))
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "bench_generate.py"), "--device", "cpu", "--gemv-only",
                           "--smoke", "--no-gemv", "--read-streams", "--json"],
                          capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {r["row"]: r for r in json.loads(proc.stdout.strip().splitlines()[-1])}
    sys.path.insert(0, BENCH)
    import bench_generate as B
    assert set(rows) == {f"sum_read.{R}x128.layer_stream[2x1]" for R in B.SMOKE_READ_ROWS}
    for R in B.SMOKE_READ_ROWS:
        r = rows[f"sum_read.{R}x128.layer_stream[2x1]"]
        assert r["calls"] == 2 and abs(r["MB"] * 1e6 - 2 * R * 128 * 2) < 1 and r["p50_us"] > 0


@pytest.mark.skipif(INTERPRET, reason="runs its own interpreter process")
def test_attention_rows_smoke():
    """--attention --no-gemv: one decode-attention stream row per shape (bytes: every call's K and V cache, q and
    out), one set per --attention-config entry, the entry named in the row."""
    env = dict(os.environ, NBX_TRITON_INTERPRET="1", PYTHONPATH=os.path.join(REPO, "src"))
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "bench_generate.py"), "--device", "cpu", "--gemv-only",
                           "--smoke", "--attention", "--no-gemv", "--stream-layers", "2", "--json",
                           "--attention-config", '[{}, {"BLOCK_N": 16}]'],
                          capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = json.loads(proc.stdout.strip().splitlines()[-1])
    sys.path.insert(0, BENCH)
    import bench_generate as B
    (b, hq, hkv, L, d), = B.SMOKE_ATTN_SHAPES
    name = f"decode_attention.{b}x{hq}x{hkv}x{L}x{d}.layer_stream[2x1]"
    assert [r["row"] for r in rows] == [name, name + ' {"BLOCK_N": 16}']
    for r in rows:
        assert r["calls"] == 2 and r["GB/s"] > 0
        assert abs(r["MB"] * 1e6 - 2 * (2 * 2 * b * hkv * L * d + 2 * 2 * b * hq * d)) < 1


class _FakeTensor:
    def __init__(self, value):
        self.value = np.array([value], np.float32)

    def numel(self):
        return 1

    def cpu(self):
        return self

    def numpy(self):
        return self.value


class _FakeCuda:
    """nbx.cuda as far as bench_generate._stream uses it: a graph whose replays are counted (the capture itself
    runs the calls, standing in for the work they would queue)."""

    def __init__(self, fail: bool = False):
        self.fail, self.replays, self.captures = fail, 0, 0
        cuda = self

        class CUDAGraph:
            def replay(self):
                cuda.replays += 1

        class graph:
            def __init__(self, g):
                pass

            def __enter__(self):
                if cuda.fail:
                    raise RuntimeError("capture refused")
                cuda.captures += 1

            def __exit__(self, *exc):
                return False
        self.CUDAGraph, self.graph = CUDAGraph, graph

    def synchronize(self):
        pass


def _stream_with(fake, calls, **kw):
    import types
    sys.path.insert(0, BENCH)
    import bench_generate as B
    import harness as H
    timing = H.TimingConfig(warmup_ms=0.0, rep_ms=0.0, min_reps=3, max_reps=3, flush_bytes=1024)
    return B._stream(types.SimpleNamespace(cuda=fake), H.host_clock(1024), lambda: None, timing, "t", calls,
                     4000, 1, len(calls), **kw)


def test_layer_stream_times_graph_replays():
    """The stream row times replays of one captured graph, keeps the eager sequence's host enqueue time as a
    field, compares the first replay's outputs with the eager calls' and says (graph) in its name."""
    fake = _FakeCuda()
    n = []
    r = _stream_with(fake, [lambda: (n.append(1), _FakeTensor(1.0))[1], lambda: _FakeTensor(2.0)])
    assert r["row"] == "t.layer_stream[1x2] (graph)"
    assert fake.captures == 1 and fake.replays >= 1 + 1 + 5 + 1 + 3 + 1   # check, first, estimate, warm-up, timed, launch
    assert r["graph_mismatch"] == 0 and r["graph_outputs_compared"] == 2 and "graph_error" not in r
    assert r["graph_launch_us"] >= 0
    assert r["host_enqueue_us"] > 0 and isinstance(r["host_bound"], bool) and r["calls"] == 2
    # eager calls: compile, the reference, the capture, the host-enqueue measure (never in the timed runs)
    assert len(n) == 4


def test_layer_stream_graph_mismatch_and_capture_failure():
    k = iter(range(100))
    r = _stream_with(_FakeCuda(), [lambda: _FakeTensor(float(next(k)))])
    assert r["graph_mismatch"] == 1                         # the replay's output differs from the eager call's
    fake = _FakeCuda(fail=True)
    r = _stream_with(fake, [lambda: _FakeTensor(1.0)], replay=False)
    assert r["row"] == "t.layer_stream[1x1] (eager; graph capture failed)" and fake.replays == 0
    assert r["graph_error"] == "RuntimeError: capture refused" and "graph_mismatch" not in r
