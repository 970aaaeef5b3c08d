"""Programmatic dependent launch (runtime/pdl.py) in a real decode step: Llama-3-8B-shaped batch-1 decode tokens/s
with PDL off and on, in one process, in rounds of alternating order (the card's power cap can make a later run
slower: compare rounds).

The model is bench_models.py's ``llama8b`` row (random bfloat16 weights drawn on the device, 32 layers, hidden
4096, GQA 8 KV heads, intermediate 14336, vocab 128256): ``--decode-prompt-len`` (128) prompt tokens, then
``--new-tokens`` (64) greedy tokens, each step a CUDA graph replay (``LlamaModel.decode_step``). Per mode a new
KV cache (so a new graph: captured with that mode's launches). PDL off is every PDL-aware op's config with
``PDL=0`` laid over it (:func:`nbxtensor.runtime.configs.override`). The greedy tokens of every mode must equal
the first mode's, and the last step's logits bytes too (PDL changes when a kernel starts, never what it
computes); a difference is printed and fails the run.

    PYTHONPATH=src python3 benchmarks/bench_pdl.py [--rounds 2] [--new-tokens 64] [--out DIR]
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))

PDL_OPS = ("gemv", "norm_rows", "rope", "decode_attention", "kv_append", "pointwise", "int4_gemv")
MODES = ("off", "pdl")


@contextlib.contextmanager
def mode(name: str):
    from nbxtensor.runtime import configs
    with contextlib.ExitStack() as st:
        if name == "off":
            for op in PDL_OPS:
                st.enter_context(configs.override(op, PDL=0))
        yield


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--decode-prompt-len", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated, among off,pdl")
    ap.add_argument("--out", default=None)
    ap.add_argument("--smoke", action="store_true", help="the tiny 2-layer model on the CPU device (PDL is off "
                    "there, so both modes compute alike; checks the script)")
    a = ap.parse_args()
    import nbxtensor as nbx
    from bench_models import LLAMA8B, TINY_LLAMA
    from peer_models import make_prompt
    from nbxtensor.models.llama import LlamaModel
    from nbxtensor.runtime import pdl
    dev, cfg = ("cpu", TINY_LLAMA) if a.smoke else ("cuda", LLAMA8B)
    m = LlamaModel.random(cfg, device=dev, dtype="float32" if a.smoke else "bfloat16", seed=0)
    print(f"model: {m}; PDL supported: {pdl.supported(nbx.device(dev))}, NBX_PDL on: {pdl.ENV_ON}")
    ids = make_prompt(4 if a.smoke else a.decode_prompt_len, cfg["vocab_size"], seed=2)
    N = 2 if a.smoke else a.new_tokens
    a.reps = 1 if a.smoke else a.reps
    rows, ref, bad = [], None, 0
    names = [s for s in a.modes.split(",") if s]
    for r in range(a.rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            with mode(name):
                cache = m.new_cache(1, len(ids) + N + 1)
                toks = list(m.generate(ids, N, stop_ids=[], cache=cache))       # compiles, captures, checks
                logits = cache.graph[2].cpu().numpy().tobytes() if cache.graph is not None else None
                tps = []
                for _ in range(a.reps):
                    got = list(m.generate(ids, N, stop_ids=[], cache=cache))
                    tps.append(m.stats.decode_tokens_per_s or 0.0)
                    if got != toks:
                        bad += 1
                        print(f"{name}: tokens differ between repetitions")
                del cache
            if ref is None:
                ref = (toks, logits, name)
            elif toks != ref[0] or logits != ref[1]:
                bad += 1
                print(f"MISMATCH: {name} tokens/logits differ from {ref[2]}'s")
            row = {"round": r, "mode": name, "decode_tokens_per_s": statistics.median(tps), "all": tps}
            rows.append(row)
            print(f"round {r} {name:18s} decode {row['decode_tokens_per_s']:7.2f} tokens/s  ({', '.join(f'{t:.1f}' for t in tps)})",
                  flush=True)
    base = statistics.median([x["decode_tokens_per_s"] for x in rows if x["mode"] == names[0]])
    for name in names:
        v = statistics.median([x["decode_tokens_per_s"] for x in rows if x["mode"] == name])
        print(f"{name:18s} median {v:7.2f} tokens/s, {v / base if base else float('nan'):.3f}x {names[0]}")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "pdl.json"), "w") as f:
            json.dump(rows, f, indent=1)
    print("tokens and logits equal across modes" if not bad else f"{bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
