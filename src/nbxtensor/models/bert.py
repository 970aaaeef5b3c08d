"""A BERT encoder (Devlin et al., "BERT", 2019) on nbxtensor operators: the ``last_hidden_state`` of Hugging Face
``transformers``' ``BertModel`` for BERT-family checkpoints (all-MiniLM-L6-v2, bert-base, bge, e5, ...).

The forward pass, as ``transformers.models.bert.modeling_bert`` computes it in eval mode (dropout off):

- embeddings: ``word[input_ids] + position[0..L) + token_type[token_type_ids]``, then LayerNorm (``eps`` from
  the config, 1e-12 for BERT);
- each of ``num_hidden_layers`` blocks (post-norm):
  ``h = LayerNorm(h + Wo · SDPA(Wq h, Wk h, Wv h, mask) + bo)``;
  ``h = LayerNorm(h + W2 · act(W1 h + b1) + b2)``;
  attention is bidirectional over ``num_attention_heads`` heads of ``hidden_size / heads`` dims, scale
  ``1/sqrt(head_dim)``, with padded key positions masked out (a boolean ``attn_mask``: True = the key takes part,
  the same result as the additive ``finfo.min`` mask of ``transformers``).

Operators: :func:`nbxtensor.nn.functional.embedding`, :func:`~nbxtensor.ops.matmul.linear` (the fused path:
bias, GELU and the residual add in the GEMM's epilogue), ``scaled_dot_product_attention`` and ``layer_norm``.
The query, key and value projections are concatenated at load time into one ``[3H, H]`` weight (one GEMM per
block instead of three). Nothing here imports ``transformers`` or ``torch``.

Weights: a Hugging Face folder with ``config.json`` and ``model.safetensors`` (or a sharded index), loaded with
:func:`nbxtensor.io.load_checkpoint` straight to the device, then cast to the compute dtype (float32, float16 or
bfloat16) there. Tensor names may carry a ``bert.`` prefix (checkpoints of ``BertFor...`` heads); the pooler
(``pooler.dense``) is not used.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
from dataclasses import dataclass

import numpy as np

from .. import dtypes as _dtypes
from .._errors import check
from ..device.base import device as as_device
from ..io import load_checkpoint
from ..nn import functional as F
from ..ops.matmul import linear
from ..tensor import Tensor, empty
from ..tensor.creation import tensor as _tensor

__all__ = ["BertConfig", "BertEncoder", "COMPUTE_DTYPES", "ACTIVATIONS", "as_compute_dtype"]

# Hugging Face ``hidden_act`` names -> the fused linear's activation (transformers' ACT2FN).
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "relu": "relu",
               "silu": "silu", "swish": "silu"}
COMPUTE_DTYPES = {"float32": _dtypes.float32, "float16": _dtypes.float16, "bfloat16": _dtypes.bfloat16}


def as_compute_dtype(dtype, fn: str = "bert") -> _dtypes.DType:
    """``dtype`` (a DType or one of the names ``float32``, ``float16``, ``bfloat16``, ``fp32``, ``fp16``, ``bf16``,
    ``half``) as a DType; ``ValueError`` naming the choices for anything else."""
    if isinstance(dtype, str):
        name = {"fp32": "float32", "fp16": "float16", "half": "float16", "bf16": "bfloat16",
                "float": "float32"}.get(dtype.lower(), dtype.lower())
        check(name in COMPUTE_DTYPES, lambda: f"{fn}: dtype must be one of float32, float16, bfloat16, got "
              f"{dtype!r}", ValueError)
        return COMPUTE_DTYPES[name]
    check(dtype in COMPUTE_DTYPES.values(), lambda: f"{fn}: dtype must be one of float32, float16, bfloat16, got "
          f"{dtype!r}", ValueError)
    return dtype


@dataclass(frozen=True)
class BertConfig:
    """The hyper-parameters of a BERT encoder (the fields of Hugging Face's ``BertConfig`` this runner reads).

    Attributes:
        vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size: sizes.
        hidden_act: the feed-forward activation (a key of :data:`ACTIVATIONS`).
        max_position_embeddings: the longest sequence the position table covers.
        type_vocab_size: rows of the token-type (segment) table.
        layer_norm_eps: LayerNorm's epsilon.
        pad_token_id: the padding token (only used by the tokenizer side).
    """

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    hidden_act: str = "gelu"
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, d: dict, *, source: str = "config") -> "BertConfig":
        """Read a Hugging Face ``config.json`` dictionary.

        Raises:
            ValueError: a ``model_type`` other than ``bert``, a ``position_embedding_type`` other than
                ``absolute``, an unknown ``hidden_act``, a missing size, or a width not divisible by the heads.
        """
        mt = d.get("model_type", "bert")
        check(mt == "bert", lambda: f"BertConfig: {source}: model_type must be 'bert', got {mt!r} (this runner "
              "covers BERT encoders only)", ValueError)
        pe = d.get("position_embedding_type", "absolute")
        check(pe == "absolute", lambda: f"BertConfig: {source}: position_embedding_type must be 'absolute', got "
              f"{pe!r}", ValueError)
        act = d.get("hidden_act", "gelu")
        check(act in ACTIVATIONS, lambda: f"BertConfig: {source}: hidden_act must be one of "
              f"{sorted(ACTIVATIONS)}, got {act!r}", ValueError)
        need = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
        missing = [k for k in need if k not in d]
        check(not missing, lambda: f"BertConfig: {source}: missing {', '.join(missing)}", ValueError)
        kw = {k: int(d[k]) for k in need}
        check(kw["hidden_size"] % kw["num_attention_heads"] == 0, lambda: f"BertConfig: {source}: hidden_size "
              f"{kw['hidden_size']} is not divisible by num_attention_heads {kw['num_attention_heads']}", ValueError)
        return cls(**kw, hidden_act=act, max_position_embeddings=int(d.get("max_position_embeddings", 512)),
                   type_vocab_size=int(d.get("type_vocab_size", 2)),
                   layer_norm_eps=float(d.get("layer_norm_eps", 1e-12)), pad_token_id=int(d.get("pad_token_id") or 0))

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> "BertConfig":
        """Read ``config.json`` (a file, or a folder holding one).

        Raises:
            FileNotFoundError: no such file; ValueError: as :meth:`from_dict`, or a file that is not JSON.
        """
        p = pathlib.Path(path)
        if p.is_dir():
            p = p / "config.json"
        if not p.is_file():
            raise FileNotFoundError(f"BertConfig: no config.json at {p}")
        try:
            d = json.loads(p.read_text())
        except json.JSONDecodeError as e:
            raise ValueError(f"BertConfig: {p} is not valid JSON: {e}") from None
        return cls.from_dict(d, source=str(p))


@dataclass
class _Block:
    qkv_w: Tensor
    qkv_b: Tensor
    o_w: Tensor
    o_b: Tensor
    ln1_w: Tensor
    ln1_b: Tensor
    i_w: Tensor
    i_b: Tensor
    out_w: Tensor
    out_b: Tensor
    ln2_w: Tensor
    ln2_b: Tensor


class BertEncoder:
    """A BERT encoder's forward pass on one device in one compute dtype.

    Args:
        config: the hyper-parameters.
        weights: name -> Tensor as Hugging Face names them (``embeddings.word_embeddings.weight``,
            ``encoder.layer.0.attention.self.query.weight``, ...; a ``bert.`` prefix is accepted), on any device
            and in any floating dtype: they are moved to ``device`` and cast to ``dtype``.
        device: where it runs (``"cpu"``, ``"cuda"``, ``"cuda:1"``).
        dtype: float32 (default), float16 or bfloat16; linear layers accumulate in float32, LayerNorm and softmax
            statistics are float32.

    Raises:
        KeyError: a weight is missing (the message lists the missing names).
        ValueError: a weight's shape disagrees with the config; a bad dtype.

    Example:
        >>> enc = BertEncoder.from_pretrained("path/to/all-MiniLM-L6-v2")  # doctest: +SKIP
        >>> enc(input_ids, attention_mask).shape  # doctest: +SKIP
        nbx.Size([2, 7, 384])
    """

    def __init__(self, config: BertConfig, weights: dict[str, Tensor], *, device="cpu", dtype="float32"):
        self.config = config
        self.device = as_device(device)
        self.dtype = as_compute_dtype(dtype, "BertEncoder")
        c = config
        prefix = "bert." if any(k.startswith("bert.") for k in weights) else ""
        H, I = c.hidden_size, c.intermediate_size

        expected = {"embeddings.word_embeddings.weight": (c.vocab_size, H),
                    "embeddings.position_embeddings.weight": (c.max_position_embeddings, H),
                    "embeddings.token_type_embeddings.weight": (c.type_vocab_size, H),
                    "embeddings.LayerNorm.weight": (H,), "embeddings.LayerNorm.bias": (H,)}
        per_layer = {"attention.self.query.weight": (H, H), "attention.self.query.bias": (H,),
                     "attention.self.key.weight": (H, H), "attention.self.key.bias": (H,),
                     "attention.self.value.weight": (H, H), "attention.self.value.bias": (H,),
                     "attention.output.dense.weight": (H, H), "attention.output.dense.bias": (H,),
                     "attention.output.LayerNorm.weight": (H,), "attention.output.LayerNorm.bias": (H,),
                     "intermediate.dense.weight": (I, H), "intermediate.dense.bias": (I,),
                     "output.dense.weight": (H, I), "output.dense.bias": (H,),
                     "output.LayerNorm.weight": (H,), "output.LayerNorm.bias": (H,)}
        for i in range(c.num_hidden_layers):
            expected.update({f"encoder.layer.{i}.{k}": s for k, s in per_layer.items()})
        missing = [prefix + k for k in expected if prefix + k not in weights]
        if missing:
            more = f" (and {len(missing) - 5} more)" if len(missing) > 5 else ""
            raise KeyError(f"BertEncoder: the weights lack {', '.join(missing[:5])}{more}")
        for k, shape in expected.items():
            got = tuple(weights[prefix + k].shape)
            check(got == shape, lambda: f"BertEncoder: weight {prefix + k} has shape {got}, expected {shape} from "
                  "the config", ValueError)

        def w(name: str) -> Tensor:
            return weights[prefix + name].to(device=self.device, dtype=self.dtype)

        self.word = w("embeddings.word_embeddings.weight")
        self.position = w("embeddings.position_embeddings.weight")
        self.token_type = w("embeddings.token_type_embeddings.weight")
        self.emb_ln = (w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
        self.blocks: list[_Block] = []
        for i in range(c.num_hidden_layers):
            p = f"encoder.layer.{i}."
            qkv_w = empty(3 * H, H, dtype=self.dtype, device=self.device)
            qkv_b = empty(3 * H, dtype=self.dtype, device=self.device)
            for j, part in enumerate(("query", "key", "value")):
                qkv_w[j * H:(j + 1) * H].copy_(w(f"{p}attention.self.{part}.weight"))
                qkv_b[j * H:(j + 1) * H].copy_(w(f"{p}attention.self.{part}.bias"))
            self.blocks.append(_Block(
                qkv_w, qkv_b, w(p + "attention.output.dense.weight"), w(p + "attention.output.dense.bias"),
                w(p + "attention.output.LayerNorm.weight"), w(p + "attention.output.LayerNorm.bias"),
                w(p + "intermediate.dense.weight"), w(p + "intermediate.dense.bias"),
                w(p + "output.dense.weight"), w(p + "output.dense.bias"),
                w(p + "output.LayerNorm.weight"), w(p + "output.LayerNorm.bias")))
        self._act = ACTIVATIONS[c.hidden_act]

    @classmethod
    def from_pretrained(cls, path: str | os.PathLike, *, device="cpu", dtype="float32") -> "BertEncoder":
        """Load a Hugging Face BERT folder (``config.json`` + ``model.safetensors`` or a sharded index).

        The tensors are read straight to ``device`` (:func:`nbxtensor.io.load_checkpoint`: memory-mapped on the
        CPU, streamed to a GPU) and cast to ``dtype`` there.

        Raises:
            FileNotFoundError: no folder, no ``config.json``, or no safetensors weights (a folder with only
                ``pytorch_model.bin`` is refused: pickled weights are not read).
            ValueError, KeyError: as :class:`BertConfig` and :class:`BertEncoder`.
        """
        p = pathlib.Path(path)
        if not p.is_dir():
            raise FileNotFoundError(f"BertEncoder.from_pretrained: no model folder at {p}")
        config = BertConfig.from_file(p)
        dtype = as_compute_dtype(dtype, "BertEncoder.from_pretrained")
        has_st = (p / "model.safetensors").is_file() or (p / "model.safetensors.index.json").is_file()
        if not has_st:
            raise FileNotFoundError(f"BertEncoder.from_pretrained: {p} has no model.safetensors (or "
                                    "model.safetensors.index.json); pickled pytorch_model.bin is not read")
        weights = load_checkpoint(p, device=device)
        return cls(config, weights, device=device, dtype=dtype)

    def _ids(self, x, name: str) -> Tensor:
        if isinstance(x, Tensor):
            check(x.dtype in (_dtypes.int32, _dtypes.int64), lambda: f"BertEncoder: {name} must be int32 or int64, "
                  f"got {x.dtype}", TypeError)
            return x.to(self.device)
        return _tensor(np.asarray(x, dtype=np.int64), device=self.device)

    def __call__(self, input_ids, attention_mask=None, token_type_ids=None) -> Tensor:
        """The last hidden state.

        Args:
            input_ids: [B, L] token ids (int32/int64 Tensor, NumPy array or nested lists).
            attention_mask: ``None`` (every token takes part) or [B, L] with 1 for real tokens and 0 for padding
                (any integer or bool array/Tensor).
            token_type_ids: ``None`` (all 0) or [B, L] segment ids.

        Returns:
            [B, L, hidden_size] in the compute dtype, on the encoder's device. Rows of padding positions are
            computed (their keys are masked out for every query) but mean nothing.

        Raises:
            ValueError: a shape that is not [B, L], ``L`` beyond ``max_position_embeddings``, or mismatched
                shapes of the three inputs.
        """
        c = self.config
        ids = self._ids(input_ids, "input_ids")
        check(ids.ndim == 2, lambda: f"BertEncoder: input_ids must be [batch, seq], got shape {tuple(ids.shape)}",
              ValueError)
        B, L = ids.shape
        check(0 < L <= c.max_position_embeddings, lambda: f"BertEncoder: sequence length must be in [1, "
              f"{c.max_position_embeddings}] (max_position_embeddings), got {L}", ValueError)
        tt = None
        if token_type_ids is not None:
            tt = self._ids(token_type_ids, "token_type_ids")
            check(tuple(tt.shape) == (B, L), lambda: f"BertEncoder: token_type_ids must have shape {(B, L)}, got "
                  f"{tuple(tt.shape)}", ValueError)
        mask = None
        if attention_mask is not None:
            m = attention_mask.cpu().numpy() if isinstance(attention_mask, Tensor) else np.asarray(attention_mask)
            check(m.shape == (B, L), lambda: f"BertEncoder: attention_mask must have shape {(B, L)}, got "
                  f"{tuple(m.shape)}", ValueError)
            if not m.astype(bool).all():  # an all-ones mask is no mask: the kernel's unmasked path
                mask = _tensor(m.astype(bool).reshape(B, 1, 1, L), device=self.device)
        return self.forward(ids, tt, mask)

    def forward(self, ids: Tensor, tt: Tensor | None, mask: Tensor | None) -> Tensor:
        """The last hidden state from device tensors alone (no host reads or copies: capturable in a CUDA graph).

        Args:
            ids: [B, L] int64/int32 token ids on the encoder's device (checked by :meth:`__call__`).
            tt: None (segment 0 everywhere) or [B, L] segment ids on the device.
            mask: None, or a [B, 1, 1, L] bool tensor on the device, True for the keys that take part.

        Returns:
            [B, L, hidden_size] in the compute dtype.
        """
        c = self.config
        B, L = ids.shape
        H, nh, hd = c.hidden_size, c.num_attention_heads, c.head_dim
        h = F.embedding(ids, self.word) + self.position[:L]
        h = h + (F.embedding(tt, self.token_type) if tt is not None else self.token_type[0])
        h = F.layer_norm(h, (H,), *self.emb_ln, c.layer_norm_eps)
        scale = 1.0 / math.sqrt(hd)
        for b in self.blocks:
            qkv = linear(h, b.qkv_w, b.qkv_b).view(B, L, 3, nh, hd).permute(2, 0, 3, 1, 4)
            ctx = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], attn_mask=mask, scale=scale)
            ctx = ctx.transpose(1, 2).reshape(B, L, H)
            h = F.layer_norm(linear(ctx, b.o_w, b.o_b, residual=h), (H,), b.ln1_w, b.ln1_b, c.layer_norm_eps)
            inter = linear(h, b.i_w, b.i_b, activation=self._act)
            h = F.layer_norm(linear(inter, b.out_w, b.out_b, residual=h), (H,), b.ln2_w, b.ln2_b, c.layer_norm_eps)
        return h
