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
  the percent of the card's bandwidth (issue 6's target: >= 75 % of 4.8 TB/s on an H200).

Usage: ``PYTHONPATH=src python benchmarks/bench_generate.py [--device cpu|cuda] [--tokens 64] [--reps 3]
[--dequantize] [--no-peer] [--json]``. Set ``OPENBLAS_NUM_THREADS=1`` on a busy CPU: OpenBLAS's spinning
threads lose badly to other load (measured here: 20 vs 1.4-7 tokens/s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

PROMPT = "Tell me a long story about a dragon who learns to fly."
GEMV_SHAPES = [(4096, 4096), (14336, 4096), (4096, 14336), (6144, 4096)]  # o/q, gate/up, down, fused qkv rows


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


def bench_gemv(device: str) -> list[dict]:
    import numpy as np
    import harness as H
    import nbxtensor as nbx
    from nbxtensor.quant import int4_linear
    peaks = {"gbps": 4800.0}
    clock = H.EventClock(lambda: nbx.cuda.Event(enable_timing=True), nbx.cuda.synchronize,
                         lambda: flush.fill_(1.0))
    flush = nbx.empty(64 * 2 ** 20, dtype=nbx.float32, device=device)
    rng = np.random.default_rng(0)
    rows = []
    for N, K in GEMV_SHAPES:
        q = nbx.tensor(rng.integers(0, 256, (N, K // 2), dtype=np.uint8), device=device)
        s = nbx.tensor(rng.random((N, K // 32)).astype(np.float16) * 0.01, device=device)
        mn = nbx.tensor(-rng.random((N, K // 32)).astype(np.float16) * 0.08, device=device)
        x = nbx.randn(1, K, dtype=nbx.bfloat16, device=device)
        out = nbx.empty(1, N, dtype=nbx.bfloat16, device=device)
        times = H.run_benchmark(lambda: int4_linear(x, q, s, mn, group_size=32, out=out), clock)
        p20, p50, p80 = H.percentiles(times)
        nbytes = q.nbytes + s.nbytes + mn.nbytes + x.nbytes + out.nbytes
        gbps = nbytes / (p50 * 1e-3) / 1e9
        rows.append({"row": f"int4_gemv.{N}x{K}", "p50_us": p50 * 1e3, "p20_us": p20 * 1e3, "p80_us": p80 * 1e3,
                     "GB/s": gbps, "pct_of_4.8TB/s": 100 * gbps / peaks["gbps"]})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda when available)")
    ap.add_argument("--dtype", default=None, help="activation dtype (default: bfloat16 on CUDA, float32 on CPU)")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dequantize", action="store_true", help="also run with GGUF weights expanded to float")
    ap.add_argument("--no-peer", action="store_true", help="skip llama.cpp")
    ap.add_argument("--peer-threads", type=int, default=os.cpu_count(), help="llama.cpp threads (default: all)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--gemv-only", action="store_true", help="only the int4 GEMV rows (CUDA)")
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
    if dev.startswith("cuda"):
        rows += bench_gemv(dev)
    if args.json:
        print(json.dumps(rows))
        return 0
    for r in rows:
        print(r.pop("row") + ": " + ", ".join(f"{k} {v:.1f}" if isinstance(v, float) else f"{k} {v}"
                                             for k, v in r.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
