"""nbxtensor.models.bert: the BERT encoder on nbxtensor operators.

- all-MiniLM-L6-v2 embeddings against the committed sentence-transformers reference (PyTorch CPU, float32):
  cosine >= 0.99999 in float32, >= 0.999 in float16 and bfloat16, on the ``device`` fixture;
- hidden states against a float64 NumPy oracle of BERT (padding masks, token types, a tiny random model with
  another geometry, ReLU and ``bert.``-prefixed tensor names);
- config and weight validation errors.

Under the interpreter tier only the two-layer oracle check runs (see minilm_harness).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import nbxtensor as nbx
from minilm_harness import (bert64, cosine_rows, minilm_path, needs_minilm, not_interpreted, numpy_weights,
                            pad_batch, reference, tiny_bert, TINY)
from nbxtensor.models.bert import BertConfig, BertEncoder, as_compute_dtype

pytestmark = needs_minilm

COSINE_MIN = {"float32": 0.99999, "float16": 0.999, "bfloat16": 0.999}


def _encode(device, dtype, sentences, batch_size):
    from nbxtensor.models.sentence import SentenceEncoder
    enc = SentenceEncoder(minilm_path(), device=device, dtype=dtype)
    out = enc.encode(sentences, batch_size=batch_size)
    assert out.dtype is as_compute_dtype(dtype) and out.device == nbx.device(device)
    return out.float().cpu().numpy()


@not_interpreted
def test_reference_float32(device):
    """The committed sentence-transformers vectors: five short sentences in padded batches of 2 (the reference
    used batches of 4: padding must not matter) and one cut to 256 tokens (truncation), alone to keep it cheap."""
    ref = reference()
    got = np.concatenate([_encode(device, "float32", ref["sentences"][:5], 2),
                          _encode(device, "float32", ref["sentences"][5:], 1)])
    want = np.asarray(ref["embeddings"])
    cos = cosine_rows(got, want)
    assert cos.min() >= COSINE_MIN["float32"], cos
    assert np.abs(got - want).max() < 1e-5


def test_first_two_layers_of_minilm_vs_float64_oracle(device):
    """The one model test of the interpreter tier (every operator through its Triton kernel there): MiniLM cut to
    its first two blocks, one 8-token sentence, hidden states against the float64 oracle. The six-layer model
    takes 20-60 s per sentence under the interpreter; the cpu and GPU tiers check it in full above."""
    import dataclasses
    cfg = BertConfig.from_file(minilm_path())
    two = dataclasses.replace(cfg, num_hidden_layers=2)
    enc = BertEncoder(two, nbx.load_file(minilm_path() / "model.safetensors"), device=device)
    ids = np.asarray([reference()["input_ids"][0]])  # "A man is eating food."
    got = enc(ids).cpu().numpy()
    W = numpy_weights(minilm_path())
    want = bert64(W, dict(json.loads((minilm_path() / "config.json").read_text()), num_hidden_layers=2), ids)
    assert got.shape == want.shape == (1, 8, 384)
    assert cosine_rows(got[0], want[0]).min() >= 0.99999 and np.abs(got - want).max() < 1e-4


@not_interpreted
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_reference_16bit(device, dtype):
    """float16/bfloat16 (float32 accumulation) within cosine 0.999; on the cpu the 256-token sentence is left out
    (16-bit NumPy compute is slow and the float32 test covers truncation)."""
    ref = reference()
    n = len(ref["sentences"]) if device.startswith("cuda") else 5
    got = _encode(device, dtype, ref["sentences"][:n], 4)
    cos = cosine_rows(got, np.asarray(ref["embeddings"][:n]))
    assert cos.min() >= COSINE_MIN[dtype], cos


@pytest.fixture(scope="module")
def minilm64():
    p = minilm_path()
    return numpy_weights(p), json.loads((p / "config.json").read_text())


@not_interpreted
def test_hidden_states_match_float64_oracle_with_padding_and_token_types(minilm64, device):
    W, cfg = minilm64
    rng = np.random.default_rng(1)
    ids, mask = pad_batch([[101, *rng.integers(1000, 30000, n), 102] for n in (3, 11, 6)])
    types = (np.arange(ids.shape[1])[None, :] >= 5).astype(np.int64) * mask  # a second segment after position 4
    enc = BertEncoder.from_pretrained(minilm_path(), device=device)
    h = enc(ids, mask, types)
    assert tuple(h.shape) == (3, ids.shape[1], 384) and h.dtype is nbx.float32
    got = h.cpu().numpy()
    want = bert64(W, cfg, ids, mask, types)
    keep = mask.astype(bool)  # padded positions are computed but meaningless
    cos = cosine_rows(got[keep], want[keep])
    assert cos.min() >= 0.99999 and np.abs(got[keep] - want[keep]).max() < 1e-3
    # token types change the result: the oracle with all-zero types differs by far more than the error
    assert np.abs(bert64(W, cfg, ids, mask)[keep] - want[keep]).max() > 1e-2


@not_interpreted
def test_padding_does_not_change_a_sentence(device):
    enc = BertEncoder.from_pretrained(minilm_path(), device=device)
    short = [101, 1037, 4937, 102]
    alone = enc([short]).cpu().numpy()[0]
    ids, mask = pad_batch([short, [101] + list(range(2000, 2012)) + [102]])
    batched = enc(ids, mask).cpu().numpy()[0, :4]
    assert np.abs(alone - batched).max() < 1e-5
    no_mask = enc(ids).cpu().numpy()[0, :4]  # the padding attended to: a different (wrong) result
    assert np.abs(alone - no_mask).max() > 1e-3


@not_interpreted
def test_tiny_random_bert_with_prefix_and_relu_matches_oracle(tmp_path, device):
    path = tiny_bert(tmp_path / "tiny")
    enc = BertEncoder.from_pretrained(path, device=device)
    assert enc.config.head_dim == 16 and enc.config.hidden_act == "relu"
    ids, mask = pad_batch([[101, 2000, 2001, 102], [101, 3000, 102]])
    got = enc(ids, mask).cpu().numpy()
    want = bert64(numpy_weights(path), TINY, ids, mask)
    keep = mask.astype(bool)
    assert np.abs(got[keep] - want[keep]).max() < 1e-4


@not_interpreted
def test_weights_from_another_device_and_dtype_are_converted(device):
    sd = nbx.load_file(minilm_path() / "model.safetensors")
    cfg = BertConfig.from_file(minilm_path())
    bf = {k: (v.to(nbx.bfloat16) if v.dtype.is_floating_point else v) for k, v in sd.items()}
    enc = BertEncoder(cfg, bf, device=device, dtype=nbx.float32)
    assert enc.word.dtype is nbx.float32 and enc.blocks[0].qkv_w.shape == (1152, 384)
    assert enc.word.device == nbx.device(device)
    q = sd["encoder.layer.0.attention.self.value.weight"].to(nbx.bfloat16).float().numpy()
    np.testing.assert_array_equal(enc.blocks[0].qkv_w[768:].cpu().numpy(), q)


def test_config_errors():
    base = json.loads((minilm_path() / "config.json").read_text())
    cases = [({"model_type": "roberta"}, "model_type must be 'bert'"),
             ({"position_embedding_type": "relative_key"}, "position_embedding_type"),
             ({"hidden_act": "quick_gelu"}, "hidden_act must be one of"),
             ({"num_attention_heads": 5}, "not divisible")]
    for change, msg in cases:
        with pytest.raises(ValueError, match=msg):
            BertConfig.from_dict({**base, **change})
    with pytest.raises(ValueError, match="missing hidden_size"):
        BertConfig.from_dict({k: v for k, v in base.items() if k != "hidden_size"})
    c = BertConfig.from_dict(base)
    assert (c.hidden_size, c.num_hidden_layers, c.head_dim, c.layer_norm_eps) == (384, 6, 32, 1e-12)


@not_interpreted
def test_weight_and_input_errors(tmp_path):
    cfg = BertConfig.from_file(minilm_path())
    sd = dict(nbx.load_file(minilm_path() / "model.safetensors"))
    with pytest.raises(KeyError, match="encoder.layer.5.output.dense.bias"):
        BertEncoder(cfg, {k: v for k, v in sd.items() if k != "encoder.layer.5.output.dense.bias"})
    bad = dict(sd, **{"encoder.layer.0.intermediate.dense.weight": nbx.zeros(1536, 383)})
    with pytest.raises(ValueError, match=r"shape \(1536, 383\), expected \(1536, 384\)"):
        BertEncoder(cfg, bad)
    with pytest.raises(ValueError, match="dtype must be one of float32, float16, bfloat16, got 'int8'"):
        BertEncoder(cfg, sd, dtype="int8")
    with pytest.raises(FileNotFoundError, match="no model folder"):
        BertEncoder.from_pretrained(tmp_path / "absent")
    (tmp_path / "config.json").write_text((minilm_path() / "config.json").read_text())
    with pytest.raises(FileNotFoundError, match="pytorch_model.bin is not read"):
        BertEncoder.from_pretrained(tmp_path)
    enc = BertEncoder(cfg, sd)
    with pytest.raises(ValueError, match=r"sequence length must be in \[1, 512\]"):
        enc(np.zeros((1, 513), dtype=np.int64))
    with pytest.raises(ValueError, match="input_ids must be"):
        enc(np.zeros(5, dtype=np.int64))
    with pytest.raises(ValueError, match="attention_mask must have shape"):
        enc(np.zeros((1, 5), dtype=np.int64), np.ones((1, 4)))
    with pytest.raises(TypeError, match="input_ids must be int32 or int64"):
        enc(nbx.zeros(1, 5))
