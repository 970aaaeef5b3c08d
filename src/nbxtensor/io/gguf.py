"""GGUF files (llama.cpp's format): tensors, hyper-parameters, tokenizer and chat template, parsed with the
``gguf`` package (https://github.com/ggml-org/llama.cpp/tree/master/gguf-py; the format:
https://github.com/ggml-org/ggml/blob/master/docs/gguf.md).

**Tensors.** GGUF lists dims innermost first (``ne0`` = columns); :class:`GGUFFile` reports shapes rows first, as
NumPy and safetensors do. Types read here, with ggml's block layouts (``ggml-common.h``):

- ``F32``, ``F16``, ``BF16``: plain arrays;
- ``Q8_0``: blocks of 32 values, ``{float16 d; int8 q[32]}`` (34 bytes), ``w = d * q``;
- ``Q4_0``: ``{float16 d; uint8 qs[16]}`` (18 bytes), ``w[j] = d * ((qs[j] & 15) - 8)``,
  ``w[j + 16] = d * ((qs[j] >> 4) - 8)``;
- ``Q4_1``: ``{float16 d; float16 m; uint8 qs[16]}`` (20 bytes), ``w[j] = d * (qs[j] & 15) + m``,
  ``w[j + 16] = d * (qs[j] >> 4) + m``.

:meth:`GGUFFile.numpy` dequantizes to float32; every value is the exact value rounded once (``d * q`` is exact in
float32: an 11-bit significand times a 4- or 8-bit integer); :func:`dequantize_reference` computes the exact
values in float64 from the same bytes (the oracle). Q4_0 and Q4_1 are grouped int4 with group 32 in ggml's
nibble order, which is :mod:`nbxtensor.quant.int4`'s layout: :meth:`GGUFFile.packed_int4` only separates the
codes from the scales (and minima), and :meth:`GGUFFile.quant_linear` puts them on a device as a
:class:`~nbxtensor.quant.QuantLinear` (packed; dequantized by the kernels).

**Hyper-parameters.** :meth:`GGUFFile.config` maps ``<arch>.*`` keys to a Hugging Face style config dict
(``hidden_size``, ``num_attention_heads``, ``rope_theta``, ...) for the Llama-family runner; GGUF tensor names
map to Hugging Face names with :func:`hf_name`. Note for ``llama`` files: llama.cpp's converter permutes the rows
of the Q and K projections so that its RoPE, which rotates adjacent pairs (GPT-J style), matches the Hugging Face
model, which rotates halves; ``config()["rope_interleaved"]`` says which form the stored weights need (True for
``llama``; ``qwen2``/``qwen3`` use the rotate-half form, unpermuted).

**Tokenizer.** :func:`build_tokenizer` rebuilds a ``tokenizers`` Tokenizer from ``tokenizer.ggml.tokens`` and
``merges`` for ``tokenizer.ggml.model == "gpt2"`` (byte-level BPE) with the pre-tokenizer llama.cpp uses for
``tokenizer.ggml.pre`` (``llama-vocab.cpp``): ``smollm``/``starcoder``/``refact``: single digits, then GPT-2's
regex; ``gpt2``/``default``: GPT-2's regex; ``llama-bpe`` (Llama 3) and ``qwen2``: their split regexes. Control
(type 3) tokens are special tokens (matched whole in text, skipped when decoding with
``skip_special_tokens``); user-defined (type 4) tokens are added tokens.

Nothing here executes code from the file: the chat template is returned as text (rendered by
:mod:`nbxtensor.models.chat`).
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from .._errors import check

__all__ = ["GGUFFile", "GGUFTensorInfo", "dequantize_reference", "dequantize", "q4_to_int4", "build_tokenizer",
           "hf_name", "SUPPORTED_TYPES", "QUANT_BLOCKS"]

# ggml type -> (values per block, bytes per block)
QUANT_BLOCKS = {"Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_1": (32, 20)}
PLAIN = {"F32": np.float32, "F16": np.float16}
SUPPORTED_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1")
_TOKEN_CONTROL, _TOKEN_USER = 3, 4


def _gguf():
    try:
        import gguf
    except ImportError as e:  # pragma: no cover - the [models] extra
        raise RuntimeError("GGUF files need the 'gguf' package: pip install gguf") from e
    return gguf


class GGUFTensorInfo(NamedTuple):
    """One tensor of a GGUF file: name, ggml type name, shape (rows first), bytes in the file, file offset."""

    name: str
    type: str
    shape: tuple
    nbytes: int
    offset: int


# ---------------------------------------------------------------------------------------------------------
# Block formats
# ---------------------------------------------------------------------------------------------------------
def _blocks(qtype: str, raw: np.ndarray, shape: tuple) -> np.ndarray:
    per, nb = QUANT_BLOCKS[qtype]
    K = shape[-1]
    check(K % per == 0, lambda: f"gguf: a {qtype} tensor's rows must hold whole blocks of {per}, got {K} values")
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    b = np.ascontiguousarray(raw).view(np.uint8).reshape(-1)
    check(b.size == rows * (K // per) * nb, lambda: f"gguf: {qtype} tensor of shape {list(shape)} needs "
          f"{rows * (K // per) * nb} bytes, got {b.size}")
    return b.reshape(rows, K // per, nb)


def _f16(b: np.ndarray, lo: int) -> np.ndarray:
    return np.ascontiguousarray(b[..., lo:lo + 2]).view(np.float16)[..., 0]


def _codes4(qs: np.ndarray) -> np.ndarray:
    # qs [..., 16] -> codes [..., 32]: low nibbles are values 0..15, high nibbles 16..31
    return np.concatenate([qs & np.uint8(15), qs >> np.uint8(4)], axis=-1)


def dequantize_reference(qtype: str, raw: np.ndarray, shape: tuple) -> np.ndarray:
    """The exact float64 values of a tensor stored as ``qtype`` (any of :data:`SUPPORTED_TYPES`), from its bytes
    ``raw``; ``shape`` rows first. The oracle of :func:`dequantize`."""
    shape = tuple(int(s) for s in shape)
    if qtype in PLAIN:
        return np.ascontiguousarray(raw).view(PLAIN[qtype]).reshape(shape).astype(np.float64)
    if qtype == "BF16":
        u = np.ascontiguousarray(raw).view(np.uint16).astype(np.uint32) << np.uint32(16)
        return u.view(np.float32).reshape(shape).astype(np.float64)
    check(qtype in QUANT_BLOCKS, lambda: f"gguf: unsupported tensor type {qtype} (supported: {SUPPORTED_TYPES})",
          NotImplementedError)
    b = _blocks(qtype, raw, shape)
    d = _f16(b, 0).astype(np.float64)[..., None]
    if qtype == "Q8_0":
        w = d * np.ascontiguousarray(b[..., 2:]).view(np.int8).astype(np.float64)
    elif qtype == "Q4_0":
        w = d * (_codes4(b[..., 2:]).astype(np.float64) - 8.0)
    else:
        w = d * _codes4(b[..., 4:]).astype(np.float64) + _f16(b, 2).astype(np.float64)[..., None]
    return w.reshape(shape)


def dequantize(qtype: str, raw: np.ndarray, shape: tuple) -> np.ndarray:
    """float32 values of a tensor stored as ``qtype`` (the exact values rounded once; see the module docstring).

    Raises:
        NotImplementedError: a type outside :data:`SUPPORTED_TYPES`. RuntimeError: bytes and shape disagree.
    """
    shape = tuple(int(s) for s in shape)
    if qtype == "F32":
        return np.ascontiguousarray(raw).view(np.float32).reshape(shape)
    if qtype in ("F16", "BF16"):
        return dequantize_reference(qtype, raw, shape).astype(np.float32)
    check(qtype in QUANT_BLOCKS, lambda: f"gguf: unsupported tensor type {qtype} (supported: {SUPPORTED_TYPES})",
          NotImplementedError)
    b = _blocks(qtype, raw, shape)
    d = _f16(b, 0).astype(np.float32)[..., None]
    if qtype == "Q8_0":
        w = d * np.ascontiguousarray(b[..., 2:]).view(np.int8).astype(np.float32)
    elif qtype == "Q4_0":
        w = d * (_codes4(b[..., 2:]).astype(np.float32) - np.float32(8))
    else:  # d * q is exact in float32, so the sum rounds once
        w = d * _codes4(b[..., 4:]).astype(np.float32) + _f16(b, 2).astype(np.float32)[..., None]
    return w.reshape(shape)


def q4_to_int4(qtype: str, raw: np.ndarray, shape: tuple):
    """Q4_0/Q4_1 bytes of a ``[N, K]`` tensor as :mod:`nbxtensor.quant.int4` arrays with group 32:
    ``(qweight uint8 [N, K/2], scales float16 [N, K/32], mins float16 [N, K/32] or None)``. The codes are not
    repacked: ggml's nibble order is the int4 layout."""
    check(qtype in ("Q4_0", "Q4_1"), lambda: f"gguf: {qtype} is not a 4-bit type (Q4_0, Q4_1)")
    check(len(shape) == 2, lambda: f"gguf: packed int4 needs a 2-D tensor, got shape {list(shape)}")
    N, K = (int(s) for s in shape)
    b = _blocks(qtype, raw, (N, K))
    lo = 2 if qtype == "Q4_0" else 4
    qweight = np.ascontiguousarray(b[..., lo:]).reshape(N, K // 2)
    scales = np.ascontiguousarray(_f16(b, 0))
    mins = np.ascontiguousarray(_f16(b, 2)) if qtype == "Q4_1" else None
    return qweight, scales, mins


# ---------------------------------------------------------------------------------------------------------
# Names
# ---------------------------------------------------------------------------------------------------------
_GLOBAL_NAMES = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
                 "output.weight": "lm_head.weight", "rope_freqs.weight": "rope_freqs"}
_BLOCK_NAMES = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
                "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
                "attn_output": "self_attn.o_proj", "attn_q_norm": "self_attn.q_norm",
                "attn_k_norm": "self_attn.k_norm", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                "ffn_down": "mlp.down_proj"}


def hf_name(name: str) -> str | None:
    """The Hugging Face Llama-family name of a GGUF tensor name (``blk.3.attn_q.weight`` ->
    ``model.layers.3.self_attn.q_proj.weight``), or ``None`` for a name the runner does not use."""
    if name in _GLOBAL_NAMES:
        return _GLOBAL_NAMES[name]
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in _BLOCK_NAMES:
        return f"model.layers.{parts[1]}.{_BLOCK_NAMES[parts[2]]}.{parts[3]}"
    return None


# ---------------------------------------------------------------------------------------------------------
# Tokenizer
# ---------------------------------------------------------------------------------------------------------
_GPT2_RE = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
_LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
              r"\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
             r"\s*[\r\n]+|\s+(?!\S)|\s+")
PRE_TOKENIZERS = ("smollm", "starcoder", "refact", "gpt2", "gpt-2", "default", "llama-bpe", "llama3", "qwen2")


def _pre_tokenizer(pre: str):
    from tokenizers import Regex, pre_tokenizers as P
    if pre in ("smollm", "starcoder", "refact"):
        return P.Sequence([P.Digits(individual_digits=True), P.ByteLevel(add_prefix_space=False, use_regex=True)])
    if pre in ("gpt2", "gpt-2", "default"):
        return P.ByteLevel(add_prefix_space=False, use_regex=True)
    regex = _LLAMA3_RE if pre in ("llama-bpe", "llama3") else _QWEN2_RE
    return P.Sequence([P.Split(Regex(regex), behavior="isolated", invert=False),
                       P.ByteLevel(add_prefix_space=False, use_regex=False)])


def build_tokenizer(tokens: list[str], merges: list[str], token_types=None, *, model: str = "gpt2",
                    pre: str = "default"):
    """A ``tokenizers.Tokenizer`` from GGUF vocabulary fields (see the module docstring).

    Raises:
        NotImplementedError: a tokenizer model other than ``gpt2`` or an unknown pre-tokenizer.
    """
    check(model == "gpt2", lambda: f"gguf: tokenizer model '{model}' is not supported (only 'gpt2', byte-level "
          "BPE)", NotImplementedError)
    check(pre in PRE_TOKENIZERS, lambda: f"gguf: pre-tokenizer '{pre}' is not supported (supported: "
          f"{', '.join(PRE_TOKENIZERS)})", NotImplementedError)
    from tokenizers import AddedToken, Tokenizer, decoders, models
    vocab = {t: i for i, t in enumerate(tokens)}
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    bpe = models.BPE(vocab=vocab, merges=pairs, fuse_unk=False, byte_fallback=False,
                     ignore_merges=pre in ("llama-bpe", "llama3"))
    tok = Tokenizer(bpe)
    tok.pre_tokenizer = _pre_tokenizer(pre)
    tok.decoder = decoders.ByteLevel()
    if token_types is not None:
        tt = np.asarray(token_types)
        special = [AddedToken(tokens[i], special=True, normalized=False) for i in np.nonzero(tt == _TOKEN_CONTROL)[0]]
        user = [AddedToken(tokens[i], special=False, normalized=False) for i in np.nonzero(tt == _TOKEN_USER)[0]]
        if special:
            tok.add_special_tokens(special)
        if user:
            tok.add_tokens(user)
    return tok


# ---------------------------------------------------------------------------------------------------------
# The file
# ---------------------------------------------------------------------------------------------------------
class GGUFFile:
    """A GGUF file, memory-mapped read-only.

    Attributes:
        path: the file. metadata: key -> Python value (strings, numbers, lists; token arrays included).
        architecture: ``general.architecture``. tensors: name -> :class:`GGUFTensorInfo`, in file order.

    Raises:
        FileNotFoundError: no such file. ValueError: not a GGUF file (the ``gguf`` package's message).

    Example::

        f = GGUFFile("SmolLM2-135M-Instruct.Q4_1.gguf")
        f.config()["num_hidden_layers"]          # 30
        lin = f.quant_linear("blk.0.attn_q.weight", device="cuda")
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        check(os.path.isfile(self.path), lambda: f"gguf: no such file: {self.path}", FileNotFoundError)
        with open(self.path, "rb") as f:
            magic = f.read(4)
        check(magic == b"GGUF", lambda: f"gguf: {self.path} is not a GGUF file (magic {magic!r}, expected b'GGUF')",
              ValueError)
        self._reader = _gguf().GGUFReader(self.path, "r")
        self.metadata = {}
        for k, f in self._reader.fields.items():
            if k.startswith("GGUF."):
                continue
            try:
                self.metadata[k] = f.contents()
            except Exception:  # a field type this gguf version cannot decode: keep the key, say so
                self.metadata[k] = None
        self.architecture = self.metadata.get("general.architecture", "")
        self.tensors: dict[str, GGUFTensorInfo] = {}
        self._raw = {}
        for t in self._reader.tensors:
            shape = tuple(int(s) for s in reversed(t.shape.tolist()))
            self.tensors[t.name] = GGUFTensorInfo(t.name, t.tensor_type.name, shape, int(t.n_bytes),
                                                  int(t.data_offset))
            self._raw[t.name] = t.data

    # -- tensors --------------------------------------------------------------------------------------
    def info(self, name: str) -> GGUFTensorInfo:
        t = self.tensors.get(name)
        check(t is not None, lambda: f"gguf: {self.path} has no tensor named {name!r}", KeyError)
        return t

    def raw(self, name: str) -> np.ndarray:
        """The tensor's bytes in the file (a read-only view of the memory map)."""
        self.info(name)
        return self._raw[name]

    def numpy(self, name: str) -> np.ndarray:
        """The tensor as float32 (dequantized; see the module docstring), shape rows first."""
        t = self.info(name)
        return dequantize(t.type, self._raw[name], t.shape)

    def reference(self, name: str) -> np.ndarray:
        """The tensor's exact float64 values (:func:`dequantize_reference`)."""
        t = self.info(name)
        return dequantize_reference(t.type, self._raw[name], t.shape)

    def is_int4(self, name: str) -> bool:
        """True for a Q4_0/Q4_1 tensor (kept packed by :meth:`quant_linear`)."""
        return self.info(name).type in ("Q4_0", "Q4_1")

    def packed_int4(self, name: str):
        """``(qweight, scales, mins)`` of a Q4_0/Q4_1 tensor (:func:`q4_to_int4`)."""
        t = self.info(name)
        return q4_to_int4(t.type, self._raw[name], t.shape)

    def tensor(self, name: str, device="cpu", dtype=None):
        """The tensor as a float nbxtensor Tensor on ``device``: F16/BF16/F32 keep their dtype unless ``dtype`` is
        given; quantized types become ``dtype`` (default float32) through the exact float32 values."""
        from ..device import device as _device
        from ..dtypes import table as T
        from ..tensor.core import from_host_array
        t = self.info(name)
        dev = _device(device)
        if t.type == "F16" and dtype in (None, T.float16):
            return from_host_array(np.ascontiguousarray(self._raw[name]).view(np.float16).reshape(t.shape),
                                   T.float16, dev)
        if t.type == "BF16" and dtype in (None, T.bfloat16):
            a = np.ascontiguousarray(self._raw[name]).view(T.bfloat16.numpy).reshape(t.shape)
            return from_host_array(a, T.bfloat16, dev)
        out = from_host_array(np.ascontiguousarray(self.numpy(name)), T.float32, dev)
        want = T.dtype_from(dtype) if dtype is not None else T.float32
        return out if want is T.float32 else out.to(want)

    def quant_linear(self, name: str, device="cpu", *, cache: bool = True):
        """A :class:`~nbxtensor.quant.QuantLinear` of a Q4_0/Q4_1 weight on ``device`` (packed)."""
        from ..quant import QuantLinear
        q, s, m = self.packed_int4(name)
        return QuantLinear.from_packed(q, s, m, group_size=32, device=device, cache=cache)

    # -- hyper-parameters -------------------------------------------------------------------------------
    def _arch(self, key: str, default=None):
        return self.metadata.get(f"{self.architecture}.{key}", default)

    def config(self) -> dict:
        """A Hugging Face style config of the model (see the module docstring).

        Raises:
            RuntimeError: a required key is missing.
        """
        a = self.architecture
        need = ("embedding_length", "block_count", "attention.head_count", "feed_forward_length")
        for k in need:
            check(self._arch(k) is not None, lambda: f"gguf: {self.path} lacks {a}.{k}")
        heads = int(self._arch("attention.head_count"))
        hidden = int(self._arch("embedding_length"))
        kv = self._arch("attention.head_count_kv", heads)
        tokens = self.metadata.get("tokenizer.ggml.tokens")
        emb = self.tensors.get("token_embd.weight")
        vocab = self._arch("vocab_size") or (len(tokens) if tokens else (emb.shape[0] if emb else None))
        cfg = {
            "model_type": a, "architectures": [a],
            "vocab_size": int(vocab), "hidden_size": hidden,
            "intermediate_size": int(self._arch("feed_forward_length")),
            "num_hidden_layers": int(self._arch("block_count")), "num_attention_heads": heads,
            "num_key_value_heads": int(kv if not isinstance(kv, list) else kv[0]),
            "head_dim": int(self._arch("attention.key_length", hidden // heads)),
            "rms_norm_eps": float(self._arch("attention.layer_norm_rms_epsilon", 1e-5)),
            "rope_theta": float(self._arch("rope.freq_base", 10000.0)),
            "max_position_embeddings": int(self._arch("context_length", 2048)),
            "tie_word_embeddings": "output.weight" not in self.tensors,
            "rope_interleaved": a in ("llama", "mistral", "granite"),
            "attention_bias": "blk.0.attn_q.bias" in self.tensors,
            "qk_norm": "blk.0.attn_q_norm.weight" in self.tensors,
        }
        rot = self._arch("rope.dimension_count")
        if rot is not None and int(rot) != cfg["head_dim"]:
            cfg["partial_rotary_factor"] = int(rot) / cfg["head_dim"]
        stype = self._arch("rope.scaling.type")
        if stype in ("linear", "yarn"):
            sc = {"rope_type": stype, "factor": float(self._arch("rope.scaling.factor", 1.0))}
            if self._arch("rope.scaling.original_context_length") is not None:
                sc["original_max_position_embeddings"] = int(self._arch("rope.scaling.original_context_length"))
            cfg["rope_scaling"] = sc
        for k, key in (("bos_token_id", "tokenizer.ggml.bos_token_id"), ("eos_token_id", "tokenizer.ggml.eos_token_id")):
            if self.metadata.get(key) is not None:
                cfg[k] = int(self.metadata[key])
        return cfg

    # -- tokenizer -------------------------------------------------------------------------------------
    def tokenizer(self):
        """The file's tokenizer as a ``tokenizers.Tokenizer`` (:func:`build_tokenizer`)."""
        md = self.metadata
        check(md.get("tokenizer.ggml.tokens"), lambda: f"gguf: {self.path} has no tokenizer.ggml.tokens")
        return build_tokenizer(md["tokenizer.ggml.tokens"], md.get("tokenizer.ggml.merges") or [],
                               md.get("tokenizer.ggml.token_type"), model=md.get("tokenizer.ggml.model", "gpt2"),
                               pre=md.get("tokenizer.ggml.pre", "default"))

    def special_tokens(self) -> dict:
        """``bos``, ``eos`` (ids or None), ``add_bos`` (bool) and ``eog``: the ids that end a generation (eos,
        eot, and the control tokens llama.cpp treats as end-of-generation by their text)."""
        md = self.metadata
        toks = md.get("tokenizer.ggml.tokens") or []
        bos, eos = md.get("tokenizer.ggml.bos_token_id"), md.get("tokenizer.ggml.eos_token_id")
        eot = md.get("tokenizer.ggml.eot_token_id")
        eog = {int(i) for i in (eos, eot) if i is not None}
        for text in ("<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>",
                     "<|end_of_text|>"):
            if text in toks:
                eog.add(toks.index(text))
        return {"bos": None if bos is None else int(bos), "eos": None if eos is None else int(eos),
                "add_bos": bool(md.get("tokenizer.ggml.add_bos_token", False)), "eog": sorted(eog)}

    def chat_template(self) -> str | None:
        """``tokenizer.chat_template`` (Jinja text, not executed here), or None."""
        return self.metadata.get("tokenizer.chat_template")

    def summary(self) -> dict:
        """Counts and bytes per ggml type: ``{type: (tensors, elements, bytes)}``."""
        out: dict = {}
        for t in self.tensors.values():
            n, e, b = out.get(t.type, (0, 0, 0))
            out[t.type] = (n + 1, e + int(np.prod(t.shape)), b + t.nbytes)
        return out
