"""``nbx inspect``: GGUF and safetensors checkpoints described from their headers (tensors, dtypes, quantization,
shapes, bytes, totals) and validated (readable types, the Llama-family runner's weights and shapes)."""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from nbxtensor import cli

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "models"))
pytest.importorskip("gguf", reason="the models extra (gguf) is not installed")  # GGUF files are written with it
from llama_helpers import random_weights, save_gguf, save_hf_folder, tiny_config  # noqa: E402


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    cfg = tiny_config(vocab=280)
    w = random_weights(cfg, seed=2)
    d = tmp_path_factory.mktemp("inspect")
    g = save_gguf(str(d / "t.gguf"), cfg, w, qtypes={"_proj.weight": "Q4_1", "embed_tokens.weight": "Q8_0"})
    return cfg, w, g, save_hf_folder(str(d / "hf"), cfg, w)


def _json(capsys, argv):
    rc = cli.main(["inspect", *argv, "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_gguf_report(files, capsys):
    cfg, w, g, _ = files
    rc, rep = _json(capsys, [g])
    assert rc == 0 and rep["valid"] and rep["format"] == "gguf" and rep["architecture"] == "llama"
    assert rep["totals"]["Q4_1"]["tensors"] == 14 and rep["totals"]["Q8_0"]["tensors"] == 1
    assert rep["total_elements"] == sum(int(np.prod(a.shape)) for a in w.values())
    q = next(t for t in rep["tensors"] if t["name"] == "blk.0.attn_q.weight")
    assert q["shape"] == [64, 64] and q["bytes"] == 64 * 2 * 20 and "int4 asymmetric" in q["quantization"]
    assert rep["config"]["num_key_value_heads"] == 2 and rep["tokenizer"]["pre"] == "smollm"
    assert {c["check"] for c in rep["checks"]} >= {"tensor types readable", "runnable by nbx generate"}
    assert cli.main(["inspect", g]) == 0
    out = capsys.readouterr().out
    assert "Q4_1: 14 tensors" in out and "ok: runnable by nbx generate" in out and f"total: {len(w)} tensors" in out


def test_folder_report_and_a_missing_weight(files, capsys, tmp_path):
    cfg, w, _, folder = files
    rc, rep = _json(capsys, [folder])
    assert rc == 0 and rep["format"] == "safetensors" and rep["totals"]["float32"]["tensors"] == len(w)
    bad = dict(w)
    del bad["model.layers.1.mlp.down_proj.weight"]
    save_hf_folder(str(tmp_path / "bad"), cfg, bad)
    rc, rep = _json(capsys, [str(tmp_path / "bad")])
    assert rc == 1 and not rep["valid"]
    assert any(not c["ok"] and "down_proj" in c["detail"] for c in rep["checks"])


def test_unsupported_gguf_type_fails_validation(tmp_path, capsys):
    import gguf
    w = gguf.GGUFWriter(str(tmp_path / "q5.gguf"), "llama")
    w.add_tensor("x.weight", gguf.quants.quantize(np.ones((2, 32), np.float32), gguf.GGMLQuantizationType.Q5_0),
                 raw_dtype=gguf.GGMLQuantizationType.Q5_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    rc, rep = _json(capsys, [str(tmp_path / "q5.gguf")])
    assert rc == 1 and any(c["check"] == "tensor types readable" and not c["ok"] and "Q5_0" in c["detail"]
                           for c in rep["checks"])


def test_errors_are_one_line(tmp_path, capsys):
    assert cli.main(["inspect", str(tmp_path / "nothing")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("nbx inspect: error:") and err.count("\n") == 1
    p = tmp_path / "broken.safetensors"
    p.write_bytes((10 ** 6).to_bytes(8, "little") + b"{}")
    assert cli.main(["inspect", str(p)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("nbx inspect: error:") and "Traceback" not in err


@pytest.mark.parametrize("content, starts", [
    (b"import os\nprint('hello world')\n", "it starts with b'import o'"),
    (b"abc", "it has only 3 bytes"),
    (b"", "it has only 0 bytes"),
    ((123).to_bytes(8, "little") + b"[1, 2]", "it starts with b'{\\x00"),
])
def test_a_file_that_is_neither_format_says_so(tmp_path, capsys, content, starts):
    """A Python file (or any non-checkpoint) is named as such, not reported as a safetensors header breaking a
    rule ('[header-too-large] header length 7935470578271546729 ...')."""
    p = tmp_path / "snips.py"
    p.write_bytes(content)
    assert cli.main(["inspect", str(p)]) == 1
    err = capsys.readouterr().err
    assert err == f"nbx inspect: error: {p} is not a safetensors or GGUF file ({starts}" + err.split(starts, 1)[1]
    assert err.count("\n") == 1 and "header-too-large" not in err and "GGUF" in err


def test_a_file_that_looks_like_safetensors_keeps_the_strict_errors(tmp_path, capsys):
    p = tmp_path / "bad.safetensors"
    p.write_bytes((5).to_bytes(8, "little") + b"{abcd")
    assert cli.main(["inspect", str(p)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"nbx inspect: error: {p}: [header-json]") and err.count("\n") == 1, err
    p.write_bytes((10 ** 9).to_bytes(8, "little") + b"{}")
    assert cli.main(["inspect", str(p)]) == 1
    assert "[header-too-large]" in capsys.readouterr().err


@pytest.mark.parametrize("content", [b"GGUF", b"GGUFjunkjunkjunk"])
def test_a_damaged_gguf_is_one_line(tmp_path, capsys, content):
    p = tmp_path / "bad.gguf"
    p.write_bytes(content)
    assert cli.main(["inspect", str(p)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"nbx inspect: error: {p} starts with GGUF's magic but cannot be parsed") and \
        err.count("\n") == 1, err


def test_sniff_format(files, tmp_path):
    from nbxtensor.cli.inspect import sniff_format
    _, _, g, folder = files
    assert sniff_format(g) == "gguf" and sniff_format(folder) == "folder"
    assert sniff_format(os.path.join(folder, "model.safetensors")) == "safetensors"
