"""nbxtensor.models.sentence: sentence-transformers folders — modules.json, pooling modes, Normalize (also when
its folder is absent), truncation, tokenization, prompts, batching and order, and errors.

Pooling is checked against a float64 NumPy version of sentence-transformers' formulas applied to the encoder's
own hidden states (the encoder itself is checked in test_bert.py); tokenization against the token ids
sentence-transformers produced for the committed reference. The parity suite compares the same settings with
sentence-transformers live.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import nbxtensor as nbx
from minilm_harness import (MODULES_TP, MODULES_TPN, minilm_path, minilm_variant, needs_minilm, not_interpreted,
                            pad_batch, pool64, reference, tiny_bert)
from nbxtensor.models import sentence as S
from nbxtensor.models.sentence import PoolingConfig, SentenceEncoder

pytestmark = [needs_minilm, not_interpreted]

SENTS = ["A man is eating food.", "Hi", "The new movie is awesome, truly!"]


def _hidden(enc: SentenceEncoder, sentences, prompt_len: int = 0):
    toks = enc.tokenize(sentences)
    ids, mask = pad_batch([t for t, _ in toks], enc.pad_id)
    h = enc.encoder(ids, mask).cpu().numpy()
    pm = mask.copy()
    pm[:, :prompt_len] = 0
    return h, pm


def test_tokenization_equals_sentence_transformers_token_ids():
    ref = reference()
    enc = SentenceEncoder(minilm_path())
    assert enc.max_seq_length == ref["max_seq_length"] == 256
    assert [ids for ids, _ in enc.tokenize(ref["sentences"])] == ref["input_ids"]
    assert len(ref["input_ids"][-1]) == 256 and ref["input_ids"][-1][-1] == 102  # truncated, [SEP] kept


def test_packaged_folder_pools_mean_and_normalizes_with_absent_normalize_folder(device):
    p = minilm_path()
    assert "2_Normalize" in (p / "modules.json").read_text() and not (p / "2_Normalize").exists()
    enc = SentenceEncoder(p, device=device)
    assert enc.modules == ["Transformer", "Pooling", "Normalize"] and enc.normalize
    assert enc.pooling.modes == ("mean",) and enc.dimension == 384
    v = enc.encode(SENTS).cpu().numpy()
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-6)
    h, m = _hidden(enc, SENTS)
    np.testing.assert_allclose(v, pool64(h, m, ["mean"], True), atol=1e-6)


@pytest.mark.parametrize("pooling, modes", [
    ({"pooling_mode_cls_token": True}, ["cls"]),
    ({"pooling_mode_max_tokens": True}, ["max"]),
    ({"pooling_mode_mean_sqrt_len_tokens": True}, ["mean_sqrt_len_tokens"]),
    ({"pooling_mode_weightedmean_tokens": True}, ["weightedmean"]),
    ({"pooling_mode_lasttoken": True}, ["lasttoken"]),
    ({"pooling_mode": ["cls", "mean", "max"], "embedding_dimension": 384}, ["cls", "mean", "max"]),
    ({"pooling_mode": "mean", "word_embedding_dimension": 384}, ["mean"]),
])
def test_pooling_modes_match_the_formulas(tmp_path, pooling, modes):
    enc = SentenceEncoder(minilm_variant(tmp_path, modules=MODULES_TP, pooling=pooling))
    assert enc.pooling.modes == tuple(modes) and not enc.normalize and enc.dimension == 384 * len(modes)
    v = enc.encode(SENTS, batch_size=3).numpy()
    h, m = _hidden(enc, SENTS)
    want = pool64(h, m, modes, False)
    assert v.shape == want.shape
    np.testing.assert_allclose(v, want, rtol=1e-5, atol=1e-6)


def test_no_modules_json_means_mean_pooling_without_normalize(tmp_path):
    enc = SentenceEncoder(minilm_variant(tmp_path, modules=None))
    assert enc.modules == ["Transformer", "Pooling"] and not enc.normalize and enc.pooling.modes == ("mean",)
    v = enc.encode(SENTS).numpy()
    h, m = _hidden(enc, SENTS)
    np.testing.assert_allclose(v, pool64(h, m, ["mean"], False), atol=1e-6)
    assert np.abs(np.linalg.norm(v, axis=1) - 1).max() > 0.1


def test_absent_pooling_folder_uses_the_defaults(tmp_path):
    enc = SentenceEncoder(minilm_variant(tmp_path, pooling=None))
    assert enc.pooling == PoolingConfig() and enc.normalize


def test_prompt_is_prepended_and_excluded_from_pooling_when_include_prompt_is_false(tmp_path):
    prompt = "query: "
    for include in (True, False):
        d = minilm_variant(tmp_path / str(include), pooling={"pooling_mode": "mean", "include_prompt": include})
        enc = SentenceEncoder(d)
        v = enc.encode(SENTS, prompt=prompt).numpy()
        plen = 0 if include else len(enc.tokenize([prompt])[0][0]) - 1  # [CLS] query : ([SEP] not counted)
        assert include or plen == 3
        h, m = _hidden(enc, [prompt + s for s in SENTS], plen)
        np.testing.assert_allclose(v, pool64(h, m, ["mean"], True), atol=1e-6)


def test_truncation_follows_sentence_bert_config_and_do_lower_case(tmp_path):
    enc = SentenceEncoder(minilm_variant(tmp_path / "a", sbert={"max_seq_length": 6, "do_lower_case": True}))
    assert enc.max_seq_length == 6
    (ids, types), = enc.tokenize(["One two three four five six seven"])
    assert len(ids) == 6 and ids[0] == 101 and ids[-1] == 102 and types == [0] * 6
    # without sentence_bert_config.json: tokenizer_config.json's model_max_length (512)
    assert SentenceEncoder(minilm_variant(tmp_path / "b", sbert=None)).max_seq_length == 512
    # never beyond the position table (512)
    assert SentenceEncoder(minilm_variant(tmp_path / "c", sbert={"max_seq_length": 1000})).max_seq_length == 512
    # do_lower_case lowercases before the tokenizer: seen with a tokenizer.json whose normalizer keeps case
    for lower in (True, False):
        d = minilm_variant(tmp_path / f"cased{lower}", sbert={"max_seq_length": 16, "do_lower_case": lower})
        spec = json.loads((d / "tokenizer.json").read_text())
        spec["normalizer"]["lowercase"] = False
        (d / "tokenizer.json").unlink()
        (d / "tokenizer.json").write_text(json.dumps(spec))
        enc = SentenceEncoder(d)
        assert (enc.tokenize(["HELLO World"]) == enc.tokenize(["hello world"])) == lower


def test_order_batches_single_string_and_empty_input(device):
    enc = SentenceEncoder(minilm_path(), device=device)
    sents = ["one", "a somewhat longer sentence here", "two words", "x y z w v", "mid length text"]
    full = enc.encode(sents, batch_size=len(sents)).cpu().numpy()
    for bs in (1, 2):
        np.testing.assert_allclose(enc.encode(sents, batch_size=bs).cpu().numpy(), full, atol=1e-6)
    one = enc.encode("two words")
    assert tuple(one.shape) == (384,)
    np.testing.assert_allclose(one.cpu().numpy(), full[2], atol=1e-6)
    assert tuple(enc.encode([]).shape) == (0, 384)


def test_tiny_random_model_folder(tmp_path):
    """Another geometry end to end (width 64, 24 positions: max_seq_length capped at 24)."""
    enc = SentenceEncoder(tiny_bert(tmp_path / "tiny"))
    assert enc.max_seq_length == 24 and enc.dimension == 64
    v = enc.encode(["word " * 40, "short"]).numpy()
    assert v.shape == (2, 64)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-6)


def test_module_level_encode_caches_the_model(monkeypatch):
    S._CACHE.clear()
    a = S.encode(["hello"])
    assert len(S._CACHE) == 1
    enc = next(iter(S._CACHE.values()))
    monkeypatch.setattr(S, "SentenceEncoder", lambda *a, **k: pytest.fail("reloaded"))
    b = S.encode(["hello"], model=minilm_path())
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert next(iter(S._CACHE.values())) is enc


def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model folder"):
        SentenceEncoder(tmp_path / "absent")
    bad = [{"idx": 0, "path": "", "type": "sentence_transformers.models.Transformer"},
           {"idx": 1, "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
           {"idx": 2, "path": "2_Dense", "type": "sentence_transformers.models.Dense"}]
    with pytest.raises(ValueError, match="module type 'sentence_transformers.models.Dense' is not supported"):
        SentenceEncoder(minilm_variant(tmp_path / "a", modules=bad))
    with pytest.raises(ValueError, match="Pooling must follow the Transformer"):
        SentenceEncoder(minilm_variant(tmp_path / "b", modules=[MODULES_TPN[1], MODULES_TPN[0]]))
    with pytest.raises(ValueError, match="pooling modes must be among"):
        SentenceEncoder(minilm_variant(tmp_path / "c", pooling={"pooling_mode": "median"}))
    with pytest.raises(ValueError, match="embedding dimension 768 differs"):
        SentenceEncoder(minilm_variant(tmp_path / "d", pooling={"word_embedding_dimension": 768}))
    d = minilm_variant(tmp_path / "e")
    (d / "tokenizer.json").unlink()
    with pytest.raises(FileNotFoundError, match="has no tokenizer.json"):
        SentenceEncoder(d)
    d = minilm_variant(tmp_path / "f")
    (d / "modules.json").unlink()
    (d / "modules.json").write_text("[{")
    with pytest.raises(ValueError, match="is not valid JSON"):
        SentenceEncoder(d)
    enc = SentenceEncoder(minilm_path())
    with pytest.raises(TypeError, match="sentences must be strings"):
        enc.encode(["a", 3])
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        enc.encode(["a"], batch_size=0)
    with pytest.raises(ValueError, match="dtype must be one of"):
        SentenceEncoder(minilm_path(), dtype="float64")


def test_missing_tokenizers_package_says_how_to_install(monkeypatch):
    import builtins
    real = builtins.__import__

    def fake(name, *a, **k):
        if name == "tokenizers":
            raise ModuleNotFoundError("No module named 'tokenizers'", name="tokenizers")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(ModuleNotFoundError, match="pip install tokenizers"):
        SentenceEncoder(minilm_path())


def test_weights_dtype_follows_the_request():
    enc = SentenceEncoder(minilm_path(), dtype=nbx.bfloat16)
    assert enc.encoder.word.dtype is nbx.bfloat16 and enc.encode(["a"]).dtype is nbx.bfloat16


# -- CUDA graphs (the packing and the captured body run on every device; capture and replay on CUDA) ----------
@pytest.mark.parametrize("modes", [["mean"], ["mean_sqrt_len_tokens", "mean"]])
def test_the_graph_body_on_packed_static_inputs_equals_the_eager_pass(tmp_path, modes):
    pooling = {"word_embedding_dimension": 384, "pooling_mode": modes}
    enc = SentenceEncoder(minilm_variant(tmp_path / "m", pooling=pooling))
    toks = enc.tokenize(SENTS)
    ids, types, mask = enc._pad(toks)
    pool_mask = mask.copy()
    pool_mask[:, :1] = 0                                  # as a prompt excluded from pooling does
    eager = enc._normalize(enc._pool(enc.encoder(ids, mask, types), pool_mask)).numpy()
    key, layout, host = enc._pack(ids, types, mask, pool_mask)
    assert key == (3, ids.shape[1], True) and all(off % 16 == 0 for _, off, _, _ in layout)
    got = enc._graph_body(*enc._static_args(nbx.from_numpy(host), layout)).numpy()
    assert got.tobytes() == eager.tobytes()


def test_packing_checks_the_token_ids_on_the_host():
    enc = SentenceEncoder(minilm_path())
    ids, types, mask = enc._pad(enc.tokenize(["hello there"]))
    ids[0, 1] = 30522                                     # one past the vocabulary
    with pytest.raises(IndexError, match=r"token ids must lie in \[0, 30522\)"):
        enc._pack(ids, types, mask, mask)


def test_cuda_graph_replays_equal_eager_passes_byte_for_byte(device):
    if not str(device).startswith("cuda"):
        pytest.skip("CUDA graphs need a CUDA device")
    enc = SentenceEncoder(minilm_path(), device=device)
    assert enc.cuda_graphs
    sents = SENTS + ["one", "a somewhat longer sentence here"]
    enc.max_graphs = 2
    first = enc.encode(sents, batch_size=5).cpu().numpy()
    assert not enc._graphs                                # a shape seen once runs eagerly
    graphed = [enc.encode(sents, batch_size=b).cpu().numpy() for b in (5, 1, 1, 2, 2)]
    assert 1 <= len(enc._graphs) <= 2 and (5, max(len(t) for t, _ in enc.tokenize(sents)), True) not in enc._graphs
    enc.cuda_graphs = False                               # least recently used graphs were dropped (above)
    eager = [enc.encode(sents, batch_size=b).cpu().numpy() for b in (5, 1, 1, 2, 2)]
    assert first.tobytes() == graphed[0].tobytes()
    for g, e in zip(graphed, eager):
        assert g.tobytes() == e.tobytes()
