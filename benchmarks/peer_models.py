"""The model benchmarks' peers, each run in its own process so that nbxtensor's process never imports torch.

``bench_models.py`` runs ``python3 benchmarks/peer_models.py SUBCOMMAND ...`` once per row; the peer prints one
JSON object on stdout (its last line; everything else goes to stderr) and exits 0, also when it fails (then
``{"ok": false, "error": ...}``).

Subcommands:

- ``hello``: versions of torch, transformers, sentence-transformers and the GPU's name.
- ``minilm --model DIR --device D --seq L --reps R --plan '[{"dtype": T, "batch": B, "n": N}, ...]'``:
  sentence-transformers' ``SentenceTransformer.encode`` of the same ``N`` sentences as nbxtensor's side
  (:func:`make_sentences`, every one truncated to exactly ``L`` tokens: ``max_seq_length = L``),
  ``batch_size=B``, on ``D`` in ``T`` (the model cast with ``.to(T)``); sentences per second (median of ``R``
  timed runs after one warm-up), one result per plan item.
- ``llama --config JSON --device D --dtype T --prefill-len P --decode-prompt-len Q --new-tokens N --reps R
  --attn sdpa|eager``: Hugging Face ``LlamaForCausalLM`` with random weights initialised on the device
  (constructed under ``torch.device(D)`` in dtype ``T``; nothing is initialised on the host), PyTorch eager mode
  (no ``torch.compile``); prefill tokens/s = ``P`` / time to the first token of ``model.generate`` on a
  ``P``-token prompt; decode tokens/s = ``(N - 1)`` / (time of the last generated token - time of the first),
  stamped by a streamer, greedy (``do_sample=False``, ``min_new_tokens = max_new_tokens = N``) with its KV cache;
  per decode step the host and device time (:func:`step_split`; on CUDA also the sum of the step's kernel
  durations from ``torch.profiler``).
- ``llamacpp --gguf FILE --ids JSON --new-tokens N --reps R [--threads T]``: llama.cpp (``llama-cpp-python``,
  CPU) greedy on the same prompt ids: decode and prefill tokens/s (median of ``R`` runs after a warm-up).

The inputs (:func:`make_sentences`, :func:`make_prompt`) and the per-step split (:func:`step_split`) are plain
Python/NumPy here and shared with ``bench_models.py``, so both sides measure the same way.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
import traceback

import numpy as np

# Common English words (one WordPiece token each in BERT's uncased vocabulary, mostly): sentences made of 150 of
# them are longer than 128 tokens, so truncation to the benchmark's length gives every sentence exactly that many.
WORDS = ("the of and to in is was he for it with as his on be at by had are but from or have an they which one "
         "you were her all she there would their we him been has when who will more no if out so said what up its "
         "about into than them can only other new some could time these two may then do first any my now such like "
         "our over man me even most made after also did many before must through back years where much your way "
         "well down should because each just those people how too little state good very make world still own see "
         "men work long get here between both life being under never day same another know while last might us "
         "great old year off come since against go came right used take three").split()


SLEEP_CYCLES = 4_000_000  # torch.cuda._sleep: ~2 ms at an H200's ~1.98 GHz (step_split measures it)


def make_sentences(n: int, seed: int = 0, words: int = 150) -> list[str]:
    """``n`` deterministic sentences of ``words`` random common words (the same list in both processes)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(WORDS), size=(n, words))
    return [" ".join(WORDS[j] for j in row).capitalize() + "." for row in idx]


def make_prompt(n: int, vocab: int, seed: int = 0) -> list[int]:
    """``n`` deterministic token ids in ``[3, vocab)`` (ids 0-2 are often special tokens)."""
    rng = np.random.default_rng(seed)
    return [int(x) for x in rng.integers(3, vocab, size=n)]


def step_split(step, *, sync, new_event=None, busy=None, reps: int = 8, warm: int = 2,
               max_busy_calls: int = 256, clock=time.perf_counter) -> dict:
    """Where one decode step's time goes: host time vs device (kernel) time.

    Args:
        step: a callable that queues one decode step (it may also wait for the device; then ``gpu_ms`` is
            reported invalid, see below).
        sync: waits for the device.
        new_event: makes a timing event with ``record()``, ``query()`` and ``elapsed_time(other)`` (CUDA events
            of either library); ``None`` on a CPU (then only host numbers).
        busy: queues some device work of a fixed duration (a large ``fill_``); called repeatedly to keep the
            device busy while the step is queued.
        reps, warm: timed and untimed steps per measurement.
        max_busy_calls: at most this many ``busy()`` calls before one step (the launch queue holds ~1000).
        clock: the host clock in seconds.

    Returns:
        ``host_ms``: wall time of ``step()`` returning, started with the device idle (the host's share: Python,
        argument checks, launches); ``wall_ms``: ``step()`` then ``sync()`` (one step with a sync per step);
        ``gpu_ms``: device time of the step alone: timing events around ``step()``, queued after enough ``busy``
        work that the device had not reached the first event when ``step()`` returned, so the events bracket
        only the step's kernels running back to back (``None`` when no rep qualified: the step waits for the
        device itself, or the launch queue filled up); ``gpu_valid``: qualifying reps / reps; ``busy_calls``.
    """
    for _ in range(warm):
        step()
        sync()
    host, wall = [], []
    for _ in range(reps):
        sync()
        t0 = clock()
        step()
        t1 = clock()
        sync()
        t2 = clock()
        host.append(t1 - t0)
        wall.append(t2 - t0)
    out = {"host_ms": statistics.median(host) * 1e3, "wall_ms": statistics.median(wall) * 1e3, "gpu_ms": None,
           "gpu_valid": None, "busy_calls": 0}
    if new_event is None or busy is None:
        return out
    e0, e1 = new_event(), new_event()
    sync()
    e0.record()
    busy()
    e1.record()
    sync()
    per_busy = max(e0.elapsed_time(e1), 1e-3)
    need = 3.0 * max(out["host_ms"], out["wall_ms"]) + 1.0
    n_busy = max(1, min(max_busy_calls, math.ceil(need / per_busy)))
    out["busy_calls"] = n_busy
    gpu = []
    for _ in range(reps):
        sync()
        for _ in range(n_busy):
            busy()
        e0.record()
        step()
        reached = e0.query()
        e1.record()
        sync()
        if not reached:
            gpu.append(e0.elapsed_time(e1))
    out["gpu_ms"] = statistics.median(gpu) if gpu else None
    out["gpu_valid"] = f"{len(gpu)}/{reps}"
    return out


# ---------------------------------------------------------------------------------------------------------------
# torch side
# ---------------------------------------------------------------------------------------------------------------

def _versions() -> dict:
    import torch
    info = {"torch": torch.__version__, "python": sys.version.split()[0], "cuda_available": torch.cuda.is_available()}
    for mod in ("transformers", "sentence_transformers"):
        try:
            info[mod] = __import__(mod).__version__
        except Exception as e:  # noqa: BLE001 - reported, not fatal
            info[mod] = f"unavailable ({type(e).__name__}: {e})"[:200]
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def _sync_fn(torch, dev):
    return torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)


def _device_name(torch, dev) -> str:
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    import platform
    return platform.processor() or platform.machine() or "cpu"


def cmd_hello(a) -> dict:
    return {"ok": True, **_versions()}


def cmd_minilm(a) -> dict:
    import torch
    from sentence_transformers import SentenceTransformer
    dev = torch.device(a.device)
    sync = _sync_fn(torch, dev)
    results = []
    models = {}
    for item in json.loads(a.plan):
        dt_name, b, n = item["dtype"], int(item["batch"]), int(item["n"])
        try:
            if dt_name not in models:
                models.clear()
                t0 = time.perf_counter()
                model = SentenceTransformer(a.model, device=str(dev)).to(getattr(torch, dt_name))
                model.eval()
                model.max_seq_length = a.seq
                models[dt_name] = (model, time.perf_counter() - t0)
            model, load_s = models[dt_name]
            sents = make_sentences(n, a.seed)
            lens = model.tokenize(sents[:4])["attention_mask"].sum(dim=1).tolist()
            if any(x != a.seq for x in lens):
                raise ValueError(f"sentences tokenize to {lens} tokens, expected {a.seq} each")
            kw = dict(batch_size=b, convert_to_tensor=True, show_progress_bar=False)
            times = []
            with torch.inference_mode():
                model.encode(sents[:max(b, 2)], **kw)
                sync()
                for _ in range(a.reps):
                    sync()
                    t0 = time.perf_counter()
                    emb = model.encode(sents, **kw)
                    sync()
                    times.append(time.perf_counter() - t0)
            results.append({"dtype": dt_name, "batch": b, "n": n, "sentences_per_s": n / statistics.median(times),
                            "seconds": times, "load_s": load_s, "dim": int(emb.shape[-1]),
                            "emb_dtype": str(emb.dtype).replace("torch.", "")})
        except Exception as e:  # noqa: BLE001 - one failing item is reported, the others still run
            traceback.print_exc(file=sys.stderr)
            results.append({"dtype": dt_name, "batch": b, "n": n, "error": f"{type(e).__name__}: {e}"[:300]})
    return {"ok": True, "results": results, "device_name": _device_name(torch, dev), **_versions()}


def cmd_llamacpp(a) -> dict:
    """llama.cpp (``llama-cpp-python``, CPU) on a GGUF file: greedy generation of ``--new-tokens`` after the given
    prompt ids; decode tokens/s after the first token and prefill tokens/s (prompt / time to the first token)."""
    import llama_cpp
    from llama_cpp import Llama
    ids = json.loads(a.ids)
    threads = a.threads or os.cpu_count() or 1
    llm = Llama(model_path=a.gguf, n_ctx=max(512, len(ids) + a.new_tokens + 8), n_threads=threads,
                n_threads_batch=threads, verbose=False)
    dec, pre = [], []
    for _ in range(a.reps + 1):  # the first run warms up
        llm.reset()
        n, t0, t1 = 0, time.perf_counter(), None
        for _tok in llm.generate(ids, temp=0.0, top_k=1, reset=True):
            n += 1
            if n == 1:
                t1 = time.perf_counter()
            if n == a.new_tokens:
                break
        t2 = time.perf_counter()
        dec.append((n - 1) / (t2 - t1) if n > 1 else float("nan"))
        pre.append(len(ids) / (t1 - t0))
    return {"ok": True, "decode_tokens_per_s": statistics.median(dec[1:]), "prefill_tokens_per_s":
            statistics.median(pre[1:]), "llama_cpp": llama_cpp.__version__, "threads": threads}


class _Stamps:
    """A ``transformers`` streamer that stamps the arrival of each generated token (the first ``put`` is the
    prompt)."""

    def __init__(self):
        self.times: list[float] = []
        self._prompt_seen = False

    def put(self, value):
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        self.times.append(time.perf_counter())

    def end(self):
        pass


def _build_llama(torch, a, dev, dt):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(**json.loads(a.config))
    with torch.device(dev):
        try:
            model = LlamaForCausalLM._from_config(cfg, dtype=dt, attn_implementation=a.attn)
        except TypeError:  # transformers before 4.56 names it torch_dtype
            model = LlamaForCausalLM._from_config(cfg, torch_dtype=dt, attn_implementation=a.attn)
    model.eval()
    gc = model.generation_config
    gc.pad_token_id = gc.pad_token_id if gc.pad_token_id is not None else 0
    return model


def _profiled_kernel_ms(torch, step, reps: int) -> float | None:
    """Mean device time per step: the sum of the device activities' durations (kernels, copies) recorded by
    ``torch.profiler`` over ``reps`` steps, divided by ``reps``."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            step()
        torch.cuda.synchronize()
    us = sum(e.time_range.elapsed_us() for e in prof.events() if e.device_type == DeviceType.CUDA)
    return us / 1e3 / reps if us > 0 else None


def cmd_llama(a) -> dict:
    import torch
    import transformers
    dev = torch.device(a.device)
    dt = getattr(torch, a.dtype)
    sync = _sync_fn(torch, dev)
    torch.manual_seed(0)
    t0 = time.perf_counter()
    model = _build_llama(torch, a, dev, dt)
    sync()
    build_s = time.perf_counter() - t0
    vocab = model.config.vocab_size
    n_params = sum(p.numel() for p in model.parameters())
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    res = {"ok": True, "build_s": build_s, "params": n_params, "weight_bytes": weight_bytes,
           "device_name": _device_name(torch, dev), "attn_implementation": a.attn,
           "transformers": transformers.__version__, "torch": torch.__version__}

    def gen(ids, n, streamer=None):
        return model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False, streamer=streamer)

    with torch.inference_mode():
        if a.prefill_len > 0:
            ids = torch.tensor([make_prompt(a.prefill_len, vocab, seed=1)], device=dev)
            gen(ids, 1)
            sync()
            ts = []
            for _ in range(a.reps):
                sync()
                st = _Stamps()
                t0 = time.perf_counter()
                gen(ids, 1, st)
                ts.append(st.times[0] - t0)
            res["prefill_tokens_per_s"] = a.prefill_len / statistics.median(ts)
            res["prefill_s"] = ts
            del ids
        if a.new_tokens > 1:
            ids = torch.tensor([make_prompt(a.decode_prompt_len, vocab, seed=2)], device=dev)
            gen(ids, min(4, a.new_tokens))
            sync()
            rates = []
            for _ in range(a.reps):
                st = _Stamps()
                gen(ids, a.new_tokens, st)
                if len(st.times) != a.new_tokens:
                    return {"ok": False, "error": f"generate gave {len(st.times)} tokens, asked {a.new_tokens}"}
                rates.append((a.new_tokens - 1) / (st.times[-1] - st.times[0]))
            res["decode_tokens_per_s"] = statistics.median(rates)
            res["decode_rates"] = rates
            try:  # a failing split leaves the rates above standing
                # per-step split: the model's forward on one token with its cache (what generate runs per token)
                out = model(ids, use_cache=True, logits_to_keep=1)
                past = out.past_key_values
                tok = out.logits[:, -1:].argmax(-1)
                kw = {"use_cache": True}

                def step():
                    model(tok, past_key_values=past, **kw)

                cuda = dev.type == "cuda"
                busy = None
                if cuda:  # one long kernel per call keeps the launch queue short (a step of the peer launches ~1000)
                    if hasattr(torch.cuda, "_sleep"):
                        busy = lambda: torch.cuda._sleep(SLEEP_CYCLES)  # noqa: E731
                    else:
                        buf = torch.empty(512 << 20, dtype=torch.float32, device=dev)
                        busy = lambda: buf.fill_(1.0)  # noqa: E731
                split = step_split(step, sync=sync, new_event=(lambda: torch.cuda.Event(enable_timing=True))
                                   if cuda else None, busy=busy, reps=a.split_reps)
                if cuda:
                    try:
                        split["kernel_sum_ms"] = _profiled_kernel_ms(torch, step, a.split_reps)
                    except Exception as e:  # noqa: BLE001 - the profiler is optional
                        split["kernel_sum_ms"] = None
                        split["profiler_error"] = f"{type(e).__name__}: {e}"[:200]
                res["split"] = split
                res["context_after_split"] = int(past.get_seq_length())
            except Exception as e:  # noqa: BLE001
                traceback.print_exc(file=sys.stderr)
                res["split"] = {"error": f"{type(e).__name__}: {e}"[:300]}
    return res


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("hello")
    m = sub.add_parser("minilm")
    m.add_argument("--model", required=True)
    m.add_argument("--device", default="cuda")
    m.add_argument("--plan", required=True, help='JSON list of {"dtype", "batch", "n"}')
    m.add_argument("--seq", type=int, default=128)
    m.add_argument("--reps", type=int, default=3)
    m.add_argument("--seed", type=int, default=0)
    g = sub.add_parser("llama")
    g.add_argument("--config", required=True, help="a transformers LlamaConfig as JSON")
    g.add_argument("--device", default="cuda")
    g.add_argument("--dtype", default="bfloat16")
    g.add_argument("--prefill-len", type=int, default=2048)
    g.add_argument("--decode-prompt-len", type=int, default=128)
    g.add_argument("--new-tokens", type=int, default=64)
    g.add_argument("--reps", type=int, default=2)
    g.add_argument("--split-reps", type=int, default=8)
    g.add_argument("--attn", default="sdpa", choices=["sdpa", "eager"])
    c = sub.add_parser("llamacpp")
    c.add_argument("--gguf", required=True)
    c.add_argument("--ids", required=True, help="prompt token ids as a JSON list")
    c.add_argument("--new-tokens", type=int, default=64)
    c.add_argument("--reps", type=int, default=3)
    c.add_argument("--threads", type=int, default=0, help="default: the CPU count")
    a = ap.parse_args(argv)
    proto = sys.stdout
    sys.stdout = sys.stderr  # library prints and warnings must not corrupt the one JSON line
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        res = {"hello": cmd_hello, "minilm": cmd_minilm, "llama": cmd_llama, "llamacpp": cmd_llamacpp}[a.cmd](a)
    except Exception as e:  # noqa: BLE001 - a failing peer is a reply, not a crash
        traceback.print_exc(file=sys.stderr)
        res = {"ok": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:400]}
    proto.write(json.dumps(res) + "\n")
    proto.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
