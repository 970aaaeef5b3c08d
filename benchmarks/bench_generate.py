"""Generation benchmarks: SmolLM2-135M-Instruct (Q4_1 GGUF) decode and prefill tokens/s, llama.cpp on the same
file as the CPU peer, and the int4 GEMV's bandwidth on Llama-3-8B layer shapes (CUDA).

Rows:

- ``smollm2.<device>.<dtype>.<packed|dequantized>``: greedy generation of ``--tokens`` tokens after a chat prompt
  (``--reps`` runs; the first run on a GPU compiles and is not counted); decode tokens/s (after the first new
  token) and prefill tokens/s, median over runs.
- ``llama.cpp.cpu`` (with ``--device cpu`` when ``llama-cpp-python`` is installed): the same prompt and token
  count, ``--peer-threads`` threads (default: the CPU count).
- ``int4_gemv.NxK`` (CUDA): ``int4_linear`` of one row by a Q4_1-style packed weight (group 32, float16 scales and
  minima) through the harness's timing (L2 flushed); GB/s of packed weight + scales + minima + activations, and
  the percent of the card's bandwidth (issue 6's target: >= 75 % of 4.8 TB/s on an H200). This single-call
  number is the primary one.
- ``bf16_gemv.NxK`` (CUDA): the same for ``nn.functional.linear`` of one bfloat16 row by a bfloat16 weight
  (issue 5's target: >= 85 % of 4.8 TB/s).
- ``int4_gemv.layer_stream[LxP] (graph)`` and ``bf16_gemv.layer_stream[LxP] (graph)`` (CUDA), a second,
  separate measure: a decode step runs its GEMVs back to back over different weights, so the seven projections
  of Llama-3-8B (q, k, v, o, gate, up, down) of ``--stream-layers`` layers (default 4: 545 MB packed, 1.75 GB in
  bfloat16, well above the H200's 50 MB L2) are captured once in a CUDA graph (``nbx.cuda.graph``, as the
  models' decode steps are) and each replay is timed between one CUDA event pair after the L2 flush; GB/s = all
  their bytes / that time. Launched eagerly the 28 calls took the host longer to issue than the device to run
  (H200: 469-753 us of host enqueue vs 382-525 us), so an eager stream timed the host; a replay is one driver
  call, and the kernels run back to back as in a graph-captured decode step. The first replay's outputs are
  compared with the eager calls' (``graph_mismatch``: outputs whose bytes differ, of
  ``graph_outputs_compared``; replayed launches return none). ``host_enqueue_us`` is the
  host's time to issue the eager sequence (after a synchronisation); ``host_bound`` says it exceeds the graph's
  ``p50_us`` (an eager decode step of these calls would wait on the host). Without CUDA (``--smoke --device
  cpu``) the calls run eagerly and the row's name has no ``(graph)``; a capture that fails falls back the same
  way and says why in ``graph_error``.
- ``sum_read.Rx4096.layer_stream[8x1] (graph)`` (``--read-streams``): eight ``sum`` calls over distinct bfloat16
  ``[R, 4096]`` tensors back to back in a graph: what launches of a decode linear's size read within a step, to
  set beside bench_ops' per-launch ``read-ceiling`` rows.
- ``int4_gemv.fused.layer_stream[LxP] (graph)`` and ``bf16_gemv.fused.layer_stream[LxP] (graph)``: the same layers
  as the Llama runner launches them, four products (q/k/v fused, o, gate/up fused, down): the per-step measure of
  the runner's GEMVs, where the seven-projection stream above stays for comparison with earlier runs.
- ``decode_attention.BxHqxHkvxLxD.layer_stream[Lx1] (graph)`` (``--attention``, CUDA): decode attention of one
  query token over a bfloat16 K/V cache (GQA), ``--stream-layers`` calls over caches of their own captured in a
  CUDA graph and replayed, as a decode step runs them; GB/s of K + V (+ q and out) per replay (issue 5: >= 80 %
  of 4.8 TB/s at 4k-32k context). An eager batch-1 call is host-bound: its event-timed rows in
  sweep_decode_attention.py include the host's enqueue of the split and combine launches.
- ``--gemv-config`` / ``--int4-config`` JSON: settings laid over the table's rule (a sweep's winner, before it is
  written into runtime/configs/sm90.json); those rows then replay the recorded kernel launches and say so.
- ``--flush clean|write``: the L2 flush before each timed run (harness.py, "Timing"; bench_ops.make_clock, the one
  nbxtensor-side flush): ``clean`` (default) writes a buffer then reads another, so the flush's dirty lines do not
  cost the timed GEMVs; ``write`` is the write alone (Triton's ``do_bench``). Every row has ``flush``.

Usage: ``PYTHONPATH=src python benchmarks/bench_generate.py [--device cpu|cuda] [--tokens 64] [--reps 3]
[--dequantize] [--no-peer] [--json] [--gemv-only] [--stream-layers 4] [--flush clean|write] [--attention]
[--no-gemv]``; ``--gemv-only
--smoke --device cpu`` with ``NBX_TRITON_INTERPRET=1`` runs the GEMV rows on tiny shapes through the interpreter (host smoke test). Set ``OPENBLAS_NUM_THREADS=1`` on a busy CPU: OpenBLAS's spinning
threads lose badly to other load (measured here: 20 vs 1.4-7 tokens/s).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

PROMPT = "Tell me a long story about a dragon who learns to fly."
# o/q, gate/up, down, fused qkv rows, fused gate_up rows (the Llama runner's products)
GEMV_SHAPES = [(4096, 4096), (14336, 4096), (4096, 14336), (6144, 4096), (28672, 4096)]


def bench_smollm2(device: str, dtype: str | None, tokens: int, reps: int, dequantize: bool) -> dict:
    from nbxtensor.models.llama import LlamaModel
    t0 = time.perf_counter()
    m = LlamaModel.load(None, device=device, dtype=dtype, dequantize=dequantize)
    load_s = time.perf_counter() - t0
    ids = m.codec.encode(m.codec.apply_chat_template([{"role": "user", "content": PROMPT}]))
    if device.startswith("cuda"):
        list(m.generate(ids, 4, stop_ids=[]))  # compiles
    dec, pre = [], []
    for _ in range(reps):
        list(m.generate(ids, tokens, stop_ids=[]))
        dec.append(m.stats.decode_tokens_per_s)
        pre.append(m.stats.prefill_tokens_per_s)
    return {"row": f"smollm2.{device}.{m.dtype.name}.{'packed' if m.quantized() else 'dequantized'}",
            "decode_tokens_per_s": statistics.median(dec), "prefill_tokens_per_s": statistics.median(pre),
            "prompt_tokens": len(ids), "new_tokens": tokens, "load_s": load_s, "weight_bytes": m.weight_bytes()}


def bench_llama_cpp(tokens: int, reps: int, threads: int) -> dict | None:
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    from nbxtensor.models.chat import TextCodec
    from nbxtensor.io.gguf import GGUFFile
    from nbxtensor.models.llama import default_chat_model
    path = default_chat_model()
    codec = TextCodec.from_gguf(GGUFFile(path))
    ids = codec.encode(codec.apply_chat_template([{"role": "user", "content": PROMPT}]))
    llm = Llama(model_path=path, n_ctx=1024, n_threads=threads, n_threads_batch=threads, verbose=False)
    dec, pre = [], []
    for _ in range(reps):
        llm.reset()
        n, t0, t1 = 0, time.perf_counter(), None
        for _tok in llm.generate(ids, temp=0.0, top_k=1, reset=True):
            n += 1
            if n == 1:
                t1 = time.perf_counter()
            if n == tokens:
                break
        t2 = time.perf_counter()
        dec.append((n - 1) / (t2 - t1))
        pre.append(len(ids) / (t1 - t0))
    import llama_cpp
    return {"row": f"llama.cpp.cpu ({llama_cpp.__version__}, {threads} threads)",
            "decode_tokens_per_s": statistics.median(dec), "prefill_tokens_per_s": statistics.median(pre),
            "prompt_tokens": len(ids), "new_tokens": tokens}


# (projection, N outputs, K inputs) of one Llama-3-8B layer; tiny ones for --smoke
LAYER = [("q", 4096, 4096), ("k", 1024, 4096), ("v", 1024, 4096), ("o", 4096, 4096), ("gate", 14336, 4096),
         ("up", 14336, 4096), ("down", 4096, 14336)]
SMOKE_LAYER = [("q", 64, 128), ("k", 16, 128), ("down", 64, 256)]
# the same layer as the Llama runner launches it (models/llama.py: q, k, v fused; gate, up fused)
FUSED_LAYER = [("qkv", 6144, 4096), ("o", 4096, 4096), ("gate_up", 28672, 4096), ("down", 4096, 14336)]
SMOKE_FUSED_LAYER = [("qkv", 96, 128), ("down", 64, 256)]
SMOKE_SHAPES = [(64, 128), (32, 256)]


def _int4_case(nbx, device, rng, N, K):
    """x (1, K) bfloat16, packed Q4_1-style weight (group 32), out (1, N); returns (call, bytes)."""
    from nbxtensor.quant import int4_linear
    q = nbx.tensor(rng.integers(0, 256, (N, K // 2), dtype=np.uint8), device=device)
    s = nbx.tensor((rng.random((N, K // 32)) * 0.01).astype(np.float16), device=device)
    mn = nbx.tensor((-rng.random((N, K // 32)) * 0.08).astype(np.float16), device=device)
    x = nbx.randn(1, K, dtype=nbx.bfloat16, device=device)
    out = nbx.empty(1, N, dtype=nbx.bfloat16, device=device)
    return (lambda: int4_linear(x, q, s, mn, group_size=32, out=out),
            q.nbytes + s.nbytes + mn.nbytes + x.nbytes + out.nbytes)


def _bf16_case(nbx, device, N, K):
    """x (1, K) and w (N, K) bfloat16, out (1, N); returns (call, bytes)."""
    import nbxtensor.nn.functional as F
    w = (nbx.randn(N, K, dtype=nbx.float32, device=device) * 0.02).to(nbx.bfloat16)
    x = nbx.randn(1, K, dtype=nbx.bfloat16, device=device)
    return (lambda: F.linear(x, w)), w.nbytes + x.nbytes + 2 * N


# decode attention streams (--attention): (batch, query heads, kv heads, context, head dim), bfloat16; Llama-3-8B's
# 32 query heads over 8 kv heads (GQA 4) and the GQA 8 (4 kv heads)
ATTN_SHAPES = [(1, 32, 4, 4096, 128), (1, 32, 4, 16384, 128), (1, 32, 4, 32768, 128), (1, 32, 8, 32768, 128),
               (8, 32, 4, 32768, 128)]
SMOKE_ATTN_SHAPES = [(1, 4, 2, 64, 16)]


def _timing(nbx, device: str, flush_mode: str):
    """``(timing, sync, clock)`` of the GEMV and attention rows: the harness's defaults and CUDA events after the
    L2 flush on a GPU; one untimed-warmup run on the host clock otherwise (the interpreter smoke test)."""
    import harness as H
    from bench_ops import make_clock
    cuda = device.startswith("cuda")
    if cuda:
        timing = H.TimingConfig(flush_mode=flush_mode)
        sync = nbx.cuda.synchronize
    else:
        timing = H.TimingConfig(warmup_ms=0.0, rep_ms=0.0, min_reps=1, max_reps=1, flush_bytes=1 << 20,
                                flush_mode=flush_mode)
        sync = lambda: None  # noqa: E731
    return timing, sync, make_clock(nbx, "cpu" if not cuda else device, timing.flush_bytes, [], flush_mode)


def _attn_case(nbx, device, B, Hq, Hkv, L, D):
    """One decode-attention call: q (B, Hq, 1, D), a K/V cache (B, Hkv, L, D) of its own, bfloat16; returns
    (call, bytes: the cache's K and V plus q and the output)."""
    import nbxtensor.nn.functional as F
    q = nbx.randn(B, Hq, 1, D, dtype=nbx.bfloat16, device=device)
    k = nbx.randn(B, Hkv, L, D, dtype=nbx.bfloat16, device=device)
    v = nbx.randn(B, Hkv, L, D, dtype=nbx.bfloat16, device=device)
    return (lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)), k.nbytes + v.nbytes + 2 * q.nbytes


def bench_attention(device: str, smoke: bool = False, layers: int = 4, flush_mode: str = "clean") -> list[dict]:
    """Decode attention (``scaled_dot_product_attention`` with one query token, GQA) as a decode step runs it:
    ``layers`` calls over caches of their own, captured in a CUDA graph and replayed (``_stream``), one row per
    shape (issue 5: >= 80 % of 4.8 TB/s at 4k-32k context). A single eager call at batch 1 is host-bound (the
    sweep's event-timed rows include the host's enqueue of the split and combine launches); the graph row times
    the kernels. Without CUDA (``--smoke --device cpu``) the calls run eagerly."""
    import nbxtensor as nbx
    cuda = device.startswith("cuda")
    timing, sync, clock = _timing(nbx, device, flush_mode)
    rows = []
    for B, Hq, Hkv, L, D in (SMOKE_ATTN_SHAPES if smoke else ATTN_SHAPES):
        cases = [_attn_case(nbx, device, B, Hq, Hkv, L, D) for _ in range(layers)]
        r = _stream(nbx, clock, sync, timing, f"decode_attention.{B}x{Hq}x{Hkv}x{L}x{D}", [c for c, _ in cases],
                    sum(b for _, b in cases), layers, 1, graph=cuda)
        r["flush"] = flush_mode
        rows.append(r)
        del cases
    return rows


def _row(name: str, times: list, nbytes: int, **extra) -> dict:
    import harness as H
    p20, p50, p80 = H.percentiles(times)
    gbps = nbytes / (p50 * 1e-3) / 1e9
    return {"row": name, "p50_us": p50 * 1e3, "p20_us": p20 * 1e3, "p80_us": p80 * 1e3, "GB/s": gbps,
            "pct_of_4.8TB/s": 100 * gbps / 4800.0, **extra}


def _recorded(calls: list) -> list:
    """Each call's kernel launches, recorded once (run) and returned as replays of those launches (the same
    compiled kernels and buffers): a call under a config override takes the general host path, slower than a
    launch plan, so the stream would time the host."""
    from nbxtensor.ops import matmul as MM
    out, real = [], MM.launch
    for c in calls:
        got = []
        MM.launch = lambda k, g, *a, **m: (got.append((k, g, a, m)), real(k, g, *a, **m))[1]
        try:
            c()
        finally:
            MM.launch = real
        out += [lambda k=k, g=g, a=a, m=m: real(k, g, *a, **m) for k, g, a, m in got]
    return out


def _captured(nbx, calls: list):
    """``(replay, mismatches, compared, error)``: the ``calls`` captured once in a CUDA graph and its replay
    function; the number of tensor outputs of the first replay whose bytes differ from an eager run's, and how many
    were compared (calls returning no tensor, such as replayed launches, are not); ``error`` (``None``, or why the
    capture failed: ``replay`` is then ``None``)."""
    def tensors(outs):
        return [o for o in outs if hasattr(o, "cpu") and hasattr(o, "numel")]
    ref = [o.cpu().numpy().tobytes() for o in tensors([c() for c in calls])]
    g = nbx.cuda.CUDAGraph()
    try:
        with nbx.cuda.graph(g):
            outs = tensors([c() for c in calls])
        g.replay()
        nbx.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - the row falls back to the eager sequence and says why
        return None, 0, 0, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
    got = [o.cpu().numpy().tobytes() for o in outs]
    bad = sum(a != b for a, b in zip(ref, got)) + abs(len(ref) - len(got))
    return g.replay, bad, len(ref), None


def _stream(nbx, clock, sync, timing, name: str, calls: list, nbytes: int, layers: int, per_layer: int,
            replay: bool = False, graph: bool = True) -> dict:
    """The ``calls`` of a layer stream (see the module docstring): captured in a CUDA graph (``graph``) whose
    replays are timed, else launched back to back between one event pair; ``replay``: their recorded launches
    (:func:`_recorded`). ``host_enqueue_us`` times the host issuing the eager sequence."""
    import harness as H
    n_calls = len(calls)
    if replay:
        calls = _recorded(calls)
    batch = lambda: [c() for c in calls]  # noqa: E731
    batch()                                # compiles
    sync()
    extra: dict = {}
    timed = batch
    if graph:
        g_replay, bad, compared, err = _captured(nbx, calls)
        if err is None:
            timed = g_replay
            extra.update(graph_mismatch=bad, graph_outputs_compared=compared)
        else:
            extra["graph_error"] = err
    times = H.run_benchmark(timed, clock, timing)
    sync()
    t0 = time.perf_counter()
    batch()
    host_us = (time.perf_counter() - t0) * 1e6
    sync()
    if timed is not batch:
        t0 = time.perf_counter()
        timed()
        extra["graph_launch_us"] = (time.perf_counter() - t0) * 1e6
        sync()
    tags = (["graph"] if timed is not batch else ["eager; graph capture failed"] if graph else []) + \
        (["replayed launches"] if replay else [])
    r = _row(f"{name}.layer_stream[{layers}x{per_layer}]" + (f" ({', '.join(tags)})" if tags else ""), times,
             nbytes, calls=n_calls, MB=nbytes / 1e6, host_enqueue_us=host_us, **extra)
    r["per_call_us"] = r["p50_us"] / n_calls
    r["host_bound"] = host_us > r["p50_us"]
    return r


# read-only streams (--read-streams): bfloat16 [rows, 4096] tensors, the sizes of the decode linears' weights (k/v,
# q/o, gate/up, the fused gate_up) and of the benchmark's read-ceiling rows (benchmarks/shapes.json)
READ_ROWS = [1024, 4096, 14336, 28672]
SMOKE_READ_ROWS = [16, 64]


def bench_read_streams(device: str, smoke: bool = False, calls: int = 8, flush_mode: str = "clean") -> list[dict]:
    """``sum_read.Rx4096.layer_stream[Cx1] (graph)``: ``calls`` full ``sum`` reductions over distinct bfloat16
    ``[R, 4096]`` tensors (``smoke``: 2 calls, ``[R, 128]``), back to back in one CUDA graph (as :func:`_stream`
    times the GEMV streams); GB/s = their bytes over the replay's p50. The per-launch read ceiling of bench_ops
    (``sum [read-ceiling]`` rows: one launch between event pairs) is what one isolated launch reads; this is what
    launches of the same size read back to back in a graph-captured decode step, the question behind per-launch
    against per-step bandwidth targets."""
    import nbxtensor as nbx
    timing, sync, clock = _timing(nbx, device, flush_mode)
    calls = 2 if smoke else calls
    rows = []
    for R in (SMOKE_READ_ROWS if smoke else READ_ROWS):
        K = 128 if smoke else 4096
        ts = [nbx.randn(R, K, dtype=nbx.bfloat16, device=device) for _ in range(calls)]
        fns = [(lambda t=t: nbx.sum(t)) for t in ts]
        rows.append(_stream(nbx, clock, sync, timing, f"sum_read.{R}x{K}", fns, sum(t.nbytes for t in ts), calls, 1,
                            graph=device.startswith("cuda")))
        del ts, fns
    for r in rows:
        r["flush"] = flush_mode
    return rows


def bench_gemv(device: str, smoke: bool = False, stream_layers: int = 4, bf16: bool = True,
               gemv_config: dict | None = None, int4_config: dict | None = None,
               flush_mode: str = "clean") -> list[dict]:
    """The GEMV rows (module docstring): single calls on Llama-3-8B shapes (primary), then the layer streams.
    ``smoke``: tiny shapes and the host clock (``--device cpu`` under the interpreter). ``gemv_config`` /
    ``int4_config``: settings laid over the config table's ``gemv`` / ``int4_gemv`` rule (e.g. a sweep's winner
    before it is written into the table); the rows then time the recorded launches (the general host path of a
    call under an override is slower than the launch plans a decode step uses) and their names say so.
    ``flush_mode``: the L2 flush before each timed run (harness.FLUSH_MODES)."""
    import contextlib
    from nbxtensor.runtime.configs import override
    with contextlib.ExitStack() as st:
        if gemv_config:
            st.enter_context(override("gemv", **gemv_config))
        if int4_config:
            st.enter_context(override("int4_gemv", **int4_config))
        return _bench_gemv(device, smoke, stream_layers, bf16, bool(gemv_config), bool(int4_config), flush_mode)


def _bench_gemv(device: str, smoke: bool, stream_layers: int, bf16: bool, bf16_set: bool, int4_set: bool,
                flush_mode: str = "clean"):
    import harness as H
    import nbxtensor as nbx
    rng = np.random.default_rng(0)
    cuda = device.startswith("cuda")
    timing, sync, clock = _timing(nbx, device, flush_mode)
    shapes = SMOKE_SHAPES if smoke else GEMV_SHAPES
    layer = SMOKE_LAYER if smoke else LAYER
    rows = []
    tag = {True: " (config override, replayed launch)", False: ""}
    for N, K in shapes:
        call, nbytes = _int4_case(nbx, device, rng, N, K)
        call = _recorded([call])[0] if int4_set else call
        rows.append(_row(f"int4_gemv.{N}x{K}{tag[int4_set]}", H.run_benchmark(call, clock, timing), nbytes))
    if bf16:
        for N, K in shapes:
            call, nbytes = _bf16_case(nbx, device, N, K)
            call = _recorded([call])[0] if bf16_set else call
            rows.append(_row(f"bf16_gemv.{N}x{K}{tag[bf16_set]}", H.run_benchmark(call, clock, timing), nbytes))
    streams = (("", layer), (".fused", SMOKE_FUSED_LAYER if smoke else FUSED_LAYER)) if stream_layers > 0 else ()
    for name, lay in streams:
        cases = [_int4_case(nbx, device, rng, N, K) for _ in range(stream_layers) for _, N, K in lay]
        rows.append(_stream(nbx, clock, sync, timing, "int4_gemv" + name, [c for c, _ in cases],
                            sum(b for _, b in cases), stream_layers, len(lay), replay=int4_set, graph=cuda))
        del cases
        if bf16:
            cases = [_bf16_case(nbx, device, N, K) for _ in range(stream_layers) for _, N, K in lay]
            rows.append(_stream(nbx, clock, sync, timing, "bf16_gemv" + name, [c for c, _ in cases],
                                sum(b for _, b in cases), stream_layers, len(lay), replay=bf16_set, graph=cuda))
            del cases
    for r in rows:
        r["flush"] = flush_mode
    return rows


def main() -> int:
    import harness as H
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda when available)")
    ap.add_argument("--dtype", default=None, help="activation dtype (default: bfloat16 on CUDA, float32 on CPU)")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dequantize", action="store_true", help="also run with GGUF weights expanded to float")
    ap.add_argument("--no-peer", action="store_true", help="skip llama.cpp")
    ap.add_argument("--peer-threads", type=int, default=os.cpu_count(), help="llama.cpp threads (default: all)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--gemv-only", action="store_true", help="only the GEMV rows (CUDA; the cpu with --smoke)")
    ap.add_argument("--stream-layers", type=int, default=4, help="layers of the layer-stream rows (0: none)")
    ap.add_argument("--no-bf16", action="store_true", help="leave out the bfloat16 GEMV rows")
    ap.add_argument("--gemv-config", type=json.loads, default=None, help="JSON settings laid over the gemv table "
                    "rule for the GEMV rows, e.g. '{\"PERSIST\": 4}' (rows then time recorded launches)")
    ap.add_argument("--int4-config", type=json.loads, default=None, help="JSON settings laid over the int4_gemv "
                    "table rule, e.g. '{\"WORD_DECODE\": true, \"BLOCK_N\": 16}'")
    ap.add_argument("--flush", choices=H.FLUSH_MODES, default="clean", help="L2 flush before each timed GEMV "
                    "run: clean (write, then read another buffer; default) or write (the write alone, as Triton's "
                    "do_bench); harness.py, 'Timing'")
    ap.add_argument("--attention", action="store_true", help="also the decode-attention stream rows (CUDA graph "
                    "replays of --stream-layers calls per shape; with --gemv-only, only these and the GEMV rows)")
    ap.add_argument("--attention-config", type=json.loads, default=None, help="JSON list of settings dicts laid "
                    "over the decode_attention table rule, one set of attention rows each (e.g. '[{}, "
                    "{\"fuse_combine\": 256}]'; {} is the table)")
    ap.add_argument("--no-gemv", action="store_true", help="leave out the GEMV rows (e.g. --gemv-only --attention "
                    "--no-gemv: the attention rows alone)")
    ap.add_argument("--read-streams", action="store_true", help="also read-only streams: 8 sum calls over distinct "
                    "bfloat16 [R, 4096] tensors per size, graph-replayed (the in-graph counterpart of bench_ops' "
                    "read-ceiling rows)")
    ap.add_argument("--smoke", action="store_true", help="GEMV rows on tiny shapes (with --device cpu under "
                    "NBX_TRITON_INTERPRET=1: a host smoke test)")
    args = ap.parse_args()
    import nbxtensor as nbx
    dev = args.device or ("cuda" if nbx.cuda.is_available() else "cpu")
    rows = [] if args.gemv_only else [bench_smollm2(dev, args.dtype, args.tokens, args.reps, False)]
    if args.dequantize and not args.gemv_only:
        rows.append(bench_smollm2(dev, args.dtype, args.tokens, args.reps, True))
    if dev == "cpu" and not args.no_peer and not args.gemv_only:
        r = bench_llama_cpp(args.tokens, args.reps, args.peer_threads)
        if r:
            rows.append(r)
    if args.attention and (dev.startswith("cuda") or args.smoke):
        from nbxtensor.runtime.configs import override
        for cfg in args.attention_config or [None]:
            with override("decode_attention", **cfg) if cfg else contextlib.nullcontext():
                got = bench_attention(dev, smoke=args.smoke, layers=max(1, args.stream_layers), flush_mode=args.flush)
            for r in got:
                if cfg:
                    r["row"] += f" {json.dumps(cfg, sort_keys=True)}"
            rows += got
    if args.read_streams and (dev.startswith("cuda") or args.smoke):
        rows += bench_read_streams(dev, smoke=args.smoke, flush_mode=args.flush)
    if (dev.startswith("cuda") or (args.smoke and args.gemv_only)) and not args.no_gemv:
        rows += bench_gemv(dev, smoke=args.smoke, stream_layers=args.stream_layers, bf16=not args.no_bf16,
                           gemv_config=args.gemv_config, int4_config=args.int4_config, flush_mode=args.flush)
    if args.json:
        print(json.dumps(rows))
        return 0
    for r in rows:
        print(r.pop("row") + ": " + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}"
                                             for k, v in r.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
