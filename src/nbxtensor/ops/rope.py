"""Rotary position embeddings (RoPE): ``nbx.nn.functional.rotary_embedding`` and :class:`RotaryEmbedding`,
with the frequency schedules of Hugging Face configs (:func:`rope_parameters`).

RoPE (Su et al., "RoFormer", 2021) rotates pairs of channels of the queries and keys by the angle
``theta_i = position * inv_freq[i]``, ``i < R/2`` (``R`` the rotary dims, ``R = 2 * len(inv_freq) <= head_dim``;
channels ``R..head_dim-1`` pass through unchanged, as GPT-NeoX/Phi's partial rotary):

- rotate-half (Llama, GPT-NeoX; transformers' ``rotate_half``): pairs ``(i, i + R/2)``;
- interleaved (GPT-J, GGUF/llama.cpp's layout; ``interleaved=True``): pairs ``(2i, 2i + 1)``;

``y_a = x_a * c - x_b * s``, ``y_b = x_b * c + x_a * s`` with ``c = cos(theta) * attention_scaling``,
``s = sin(theta) * attention_scaling`` (YaRN's attention factor scales cos and sin, as transformers does).
``theta`` is the float32 product of the float32 position and the float32 ``inv_freq`` (transformers computes
``inv_freq @ position_ids`` in float32: one rounded product per element); cos and sin are float32 (libdevice
``cosf``/``sinf`` on the GPU, accurate for large angles); the rotation is computed in float32 and rounded once
to the input dtype (transformers rounds cos/sin to the input dtype first, then multiplies in it: within one
rounding of ours).

**Frequencies** (:func:`rope_parameters`): transformers' ``modeling_rope_utils`` (v5;
https://github.com/huggingface/transformers/blob/main/src/transformers/modeling_rope_utils.py):
``default`` ``inv_freq[i] = 1 / base^(2i / R)``; ``linear`` ``/ factor``; ``dynamic`` (NTK-aware, for
``seq_len > max_position_embeddings`` the base becomes ``base * (factor * seq_len / max_pos - (factor -
1))^(R / (R - 2))``); ``llama3`` (low/high frequency bands of ``original_max_position_embeddings / low_freq_factor``
and ``/ high_freq_factor`` wavelengths: low frequencies divided by ``factor``, high ones kept, a linear blend
between); ``yarn`` (Peng et al., "YaRN", 2023: interpolation ``1 / (factor * pos_freq)`` blended with
extrapolation by a ramp over the correction range of ``beta_fast``/``beta_slow`` rotations, ``truncate``,
and ``attention_factor = 0.1 * ln(factor) + 1`` or ``mscale``/``mscale_all_dim``'s ratio). The formulas are
evaluated in float64 and rounded once to float32 (transformers rounds each float32 step; the two agree to a
few float32 ulps). Stated difference from transformers 4.x: YaRN keeps ``factor`` when the config gives one
(4.x replaced it by ``max_position_embeddings / original_max_position_embeddings`` whenever the latter was
present; v5 does so only without ``factor``).

**Kernel** (``_rope_kernel``): one program per (token, tensor q/k), looping over head blocks; it computes the
angles from ``inv_freq`` in registers (no cos/sin table in memory) and rotates both q and k in one launch.
"""

from __future__ import annotations

import math

import numpy as np

from .._errors import check
from ..device import device as _device
from ..dtypes import table as T
from ..dtypes.casting import cast_array
from ..dtypes.tolerance import Tolerance, tolerance
from ..runtime.configs import launch_config
from ..runtime.configs import state as config_state
from ..runtime.launcher import Tail, launch, launch_tail
from ..runtime.pdl import enter as pdl_enter
from ..runtime.pdl import settings as pdl_settings
from ..runtime.triton_compat import jit, tl
from ..tensor.core import Tensor, from_host_array, host_view, new_empty
from . import registry
from .registry import Cost, OpRecord, register
from .triton_helpers import TL_DTYPES, convert, libdevice

__all__ = ["rope_parameters", "RotaryEmbedding", "launch_rope", "rope_oracle", "rope_tolerance", "ROPE_TYPES"]

ROPE_TYPES = ("default", "linear", "dynamic", "llama3", "yarn")
FLOATS = frozenset({T.float16, T.bfloat16, T.float32, T.float64})
INDEX_DTYPES = frozenset({T.int32, T.int64})


# ---------------------------------------------------------------------------------------------------------
# Frequencies (transformers' modeling_rope_utils)
# ---------------------------------------------------------------------------------------------------------
def _get(config, key: str, default=None):
    if config is None:
        return default
    if isinstance(config, dict):
        v = config.get(key, default)
    else:
        v = getattr(config, key, default)
    return default if v is None else v


def _scaling_of(config) -> tuple[float, dict]:
    """``(rope_theta, scaling dict)`` from a transformers config: v5's ``rope_parameters`` or 4.x's
    ``rope_theta`` + ``rope_scaling`` (``type`` is 4.x's old name of ``rope_type``)."""
    params = _get(config, "rope_parameters")
    if isinstance(params, dict) and "rope_theta" in params:
        return float(params["rope_theta"]), dict(params)
    return float(_get(config, "rope_theta", 10000.0)), dict(_get(config, "rope_scaling", None) or {})


def _default_inv_freq64(base: float, dim: int) -> np.ndarray:
    """``1 / base^(arange(0, dim, 2) / dim)`` with transformers' float32 rounding of ``base`` and of the
    exponent, the power evaluated in float64 (rounded by the caller)."""
    e = (np.arange(0, dim, 2).astype(np.float32) / np.float32(dim)).astype(np.float64)
    return 1.0 / np.power(np.float64(np.float32(base)), e)


def rope_parameters(config=None, *, head_dim: int | None = None, rope_theta: float | None = None,
                    rope_scaling: dict | None = None, max_position_embeddings: int | None = None,
                    partial_rotary_factor: float | None = None, seq_len: int | None = None) -> tuple[np.ndarray, float]:
    """The inverse frequencies and attention scaling of a RoPE schedule, as transformers'
    ``ROPE_INIT_FUNCTIONS[rope_type](config, device, seq_len)``.

    Args:
        config: a transformers-style config (dict or object): ``rope_theta``, ``rope_scaling`` (4.x) or
            ``rope_parameters`` (v5), ``max_position_embeddings``, ``head_dim`` (else ``hidden_size //
            num_attention_heads``), ``partial_rotary_factor``. Keyword arguments override it.
        rope_scaling: ``{"rope_type": "linear"|"dynamic"|"llama3"|"yarn"|"default", "factor": ...}`` with the
            type's keys (``low_freq_factor``, ``high_freq_factor``, ``original_max_position_embeddings``,
            ``attention_factor``, ``beta_fast``, ``beta_slow``, ``mscale``, ``mscale_all_dim``, ``truncate``).
        seq_len: the current sequence length (``dynamic`` only; default ``max_position_embeddings``).

    Returns:
        ``(inv_freq, attention_scaling)``: float32 NumPy array of ``R // 2`` frequencies (``R = int(head_dim *
        partial_rotary_factor)``) and a float.

    Raises:
        ValueError: an unknown ``rope_type`` (``longrope`` and others are not implemented), a missing key of
            the type, or no head dim.
    """
    base, scaling = _scaling_of(config)
    if rope_theta is not None:
        base = float(rope_theta)
    if rope_scaling is not None:
        scaling = dict(rope_scaling)
    hd = head_dim or _get(config, "head_dim")
    if hd is None and _get(config, "hidden_size") and _get(config, "num_attention_heads"):
        hd = _get(config, "hidden_size") // _get(config, "num_attention_heads")
    check(hd, "rope_parameters: no head dim: pass head_dim= or a config with head_dim or hidden_size and "
          "num_attention_heads", ValueError)
    prf = partial_rotary_factor if partial_rotary_factor is not None else \
        float(scaling.get("partial_rotary_factor", _get(config, "partial_rotary_factor", 1.0)))
    dim = int(hd * prf)
    check(dim >= 2 and dim % 2 == 0, lambda: f"rope_parameters: rotary dims {dim} must be even and >= 2", ValueError)
    max_pos = int(max_position_embeddings or _get(config, "max_position_embeddings", 2048))
    rtype = scaling.get("rope_type", scaling.get("type", "default"))
    check(rtype in ROPE_TYPES, lambda: f"rope_parameters: rope_type {rtype!r} is not implemented (supported: "
          f"{ROPE_TYPES})", ValueError)

    def need(key):
        check(key in scaling and scaling[key] is not None, lambda: f"rope_parameters: rope_type {rtype!r} needs "
              f"'{key}' in rope_scaling, got keys {sorted(scaling)}", ValueError)
        return scaling[key]

    attn = 1.0
    if rtype == "default":
        inv = _default_inv_freq64(base, dim)
    elif rtype == "linear":
        inv = _default_inv_freq64(base, dim) / float(need("factor"))
    elif rtype == "dynamic":
        factor = float(need("factor"))
        sl = max_pos if seq_len is None else max(int(seq_len), max_pos)
        nbase = base * ((factor * sl / max_pos) - (factor - 1)) ** (dim / (dim - 2))
        inv = _default_inv_freq64(nbase, dim)
    elif rtype == "llama3":
        factor = float(need("factor"))
        low, high = float(need("low_freq_factor")), float(need("high_freq_factor"))
        old = float(need("original_max_position_embeddings"))
        inv0 = _default_inv_freq64(base, dim).astype(np.float32).astype(np.float64)
        wavelen = 2 * math.pi / inv0
        lo_wl, hi_wl = old / low, old / high
        inv = np.where(wavelen > lo_wl, inv0 / factor, inv0)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * inv / factor + smooth * inv
        medium = ~(wavelen < hi_wl) & ~(wavelen > lo_wl)
        inv = np.where(medium, smoothed, inv)
    else:  # yarn
        orig = int(scaling.get("original_max_position_embeddings") or max_pos)
        factor = scaling.get("factor")
        factor = float(factor) if factor is not None else max_pos / orig
        attn_f = scaling.get("attention_factor")
        mscale, mscale_all = scaling.get("mscale"), scaling.get("mscale_all_dim")

        def get_mscale(scale, m=1.0):
            return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

        if attn_f is None:
            attn_f = get_mscale(factor, mscale) / get_mscale(factor, mscale_all) if (mscale and mscale_all) \
                else get_mscale(factor)
        attn = float(attn_f)
        beta_fast = scaling.get("beta_fast") or 32
        beta_slow = scaling.get("beta_slow") or 1

        def corr_dim(rot):
            return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))

        lo, hi = corr_dim(beta_fast), corr_dim(beta_slow)
        if scaling.get("truncate", True):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, dim - 1)
        if lo == hi:
            hi += 0.001
        ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - lo) / (hi - lo), 0, 1)
        extrap = 1 - ramp
        pos_freqs = 1.0 / _default_inv_freq64(base, dim)
        inv = (1.0 / (factor * pos_freqs)) * (1 - extrap) + (1.0 / pos_freqs) * extrap
    return np.asarray(inv, dtype=np.float64).astype(np.float32), attn


class RotaryEmbedding:
    """RoPE for one model: frequencies from a transformers config, applied to q and k with position ids.

    Mirrors transformers' ``LlamaRotaryEmbedding`` (and ``dynamic_rope_update`` for ``dynamic``: the
    frequencies grow with the longest sequence seen and return to the original ones when a sequence shorter
    than ``max_position_embeddings`` comes; this object keeps that state).

    Example::

        rope = RotaryEmbedding.from_config({"head_dim": 128, "rope_theta": 500000.0,
                                            "max_position_embeddings": 131072,
                                            "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                                             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                             "original_max_position_embeddings": 8192}},
                                           device="cuda")
        q, k = rope(q, k, position_ids)       # q [B, Hq, S, 128], k [B, Hk, S, 128], position_ids [B, S]
    """

    def __init__(self, head_dim: int, *, rope_theta: float = 10000.0, rope_scaling: dict | None = None,
                 max_position_embeddings: int = 2048, partial_rotary_factor: float = 1.0, interleaved: bool = False,
                 device="cpu"):
        self._kw = dict(head_dim=head_dim, rope_theta=rope_theta, rope_scaling=dict(rope_scaling or {}),
                        max_position_embeddings=max_position_embeddings, partial_rotary_factor=partial_rotary_factor)
        self.interleaved = bool(interleaved)
        self.device = _device(device)
        sc = self._kw["rope_scaling"]
        self.rope_type = sc.get("rope_type", sc.get("type", "default"))
        self.max_position_embeddings = int(max_position_embeddings)
        self.original_inv_freq, self.attention_scaling = rope_parameters(**self._kw)
        self.inv_freq = self.original_inv_freq
        self.max_seq_len_cached = self.max_position_embeddings
        self._dev = {}

    @classmethod
    def from_config(cls, config, *, interleaved: bool = False, device="cpu") -> "RotaryEmbedding":
        """From a transformers config (dict or object; see :func:`rope_parameters`)."""
        base, scaling = _scaling_of(config)
        hd = _get(config, "head_dim") or _get(config, "hidden_size") // _get(config, "num_attention_heads")
        prf = float(scaling.pop("partial_rotary_factor", _get(config, "partial_rotary_factor", 1.0)))
        scaling.pop("rope_theta", None)
        return cls(hd, rope_theta=base, rope_scaling=scaling or None,
                   max_position_embeddings=int(_get(config, "max_position_embeddings", 2048)),
                   partial_rotary_factor=prf, interleaved=interleaved, device=device)

    def update(self, seq_len: int) -> None:
        """transformers' ``dynamic_frequency_update`` for ``seq_len`` (a no-op for other types)."""
        if self.rope_type != "dynamic":
            return
        if seq_len > self.max_seq_len_cached:
            self.inv_freq, self.attention_scaling = rope_parameters(**self._kw, seq_len=seq_len)
            self.max_seq_len_cached = seq_len
        if seq_len < self.max_position_embeddings < self.max_seq_len_cached:
            self.inv_freq = self.original_inv_freq
            self.max_seq_len_cached = self.max_position_embeddings

    def frequencies(self) -> Tensor:
        """The current ``inv_freq`` as a float32 tensor on the device (cached per schedule)."""
        key = self.inv_freq.tobytes()
        t = self._dev.get(key)
        if t is None:
            t = from_host_array(self.inv_freq, T.float32, self.device)
            self._dev = {key: t}
        return t

    def __call__(self, query: Tensor, key: Tensor | None, position_ids: Tensor, *, seq_len: int | None = None,
                 inplace: bool = False):
        """Rotate ``query`` and ``key`` (``[B, H, S, D]``) at ``position_ids`` (``[B, S]`` or ``[S]``).

        ``seq_len`` (``dynamic`` only): the longest position + 1; when omitted it is read from
        ``position_ids`` (a device-to-host copy), as transformers does.

        Returns:
            ``(query, key)`` rotated (new tensors, or the inputs with ``inplace=True``).
        """
        if self.rope_type == "dynamic":
            if seq_len is None:
                seq_len = int(position_ids.cpu().numpy().max()) + 1 if position_ids.numel() else 0
            self.update(seq_len)
        return registry.get("rotary_embedding").extra["function"](query, key, position_ids, self.frequencies(), self.attention_scaling,
                                  self.interleaved, inplace=inplace)


# ---------------------------------------------------------------------------------------------------------
# Kernel
# ---------------------------------------------------------------------------------------------------------
@jit
def _rope_kernel(XQ, YQ, XK, YK, POS, INV, S, HQ, HK, R2, D, attn_scale,
                 sqb, sqh, sqs, syqb, syqh, syqs, skb, skh, sks, sykb, sykh, syks, spb, sps,
                 INTERLEAVED: tl.constexpr, COPY_REST: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_R: tl.constexpr,
                 BLOCK_P: tl.constexpr, ACC: tl.constexpr, PDL: tl.constexpr = False):
    """Rotate every head of token ``program_id(0)`` of q (``program_id(1) == 0``) or k (``== 1``). The head dim
    has stride 1 (the host makes it so). PDL: runtime/pdl.py."""
    pdl_enter(PDL)
    pid = tl.program_id(0)
    b = (pid // S).to(tl.int64)
    s = (pid % S).to(tl.int64)
    if tl.program_id(1) == 0:
        X = XQ
        Y = YQ
        H = HQ
        xrow = b * sqb + s * sqs
        yrow = b * syqb + s * syqs
        sxh = sqh
        syh = syqh
    else:
        X = XK
        Y = YK
        H = HK
        xrow = b * skb + s * sks
        yrow = b * sykb + s * syks
        sxh = skh
        syh = sykh
    pos = tl.load(POS + b * spb + s * sps).to(tl.float32)
    i = tl.arange(0, BLOCK_R)
    i_ok = i < R2
    ang = pos * tl.load(INV + i, mask=i_ok, other=0.0)
    c = libdevice.cos(ang) * attn_scale
    sn = libdevice.sin(ang) * attn_scale
    if INTERLEAVED:
        ca = 2 * i
        cb = 2 * i + 1
    else:
        ca = i
        cb = i + R2
    for h0 in range(0, H, BLOCK_H):
        h = (h0 + tl.arange(0, BLOCK_H)).to(tl.int64)
        h_ok = h < H
        m = h_ok[:, None] & i_ok[None, :]
        xp = X + xrow + h[:, None] * sxh
        yp = Y + yrow + h[:, None] * syh
        xa = convert(tl.load(xp + ca[None, :], mask=m, other=0.0), ACC)
        xb = convert(tl.load(xp + cb[None, :], mask=m, other=0.0), ACC)
        ya = xa * c[None, :] - xb * sn[None, :]
        yb = xb * c[None, :] + xa * sn[None, :]
        tl.store(yp + ca[None, :], convert(ya, Y.dtype.element_ty), mask=m)
        tl.store(yp + cb[None, :], convert(yb, Y.dtype.element_ty), mask=m)
        if COPY_REST:
            for j0 in range(2 * R2, D, BLOCK_P):
                j = j0 + tl.arange(0, BLOCK_P)
                mj = h_ok[:, None] & (j < D)[None, :]
                tl.store(yp + j[None, :], tl.load(xp + j[None, :], mask=mj), mask=mj)


def launch_rope(q: Tensor, yq: Tensor, k: Tensor | None, yk: Tensor | None, pos: Tensor, inv: Tensor,
                attn_scale: float, interleaved: bool) -> None:
    """Rotate ``q [B, HQ, S, D]`` into ``yq`` and ``k`` into ``yk`` (``pos [B, S]`` view with stride 0 for a
    broadcast batch; ``inv`` float32 ``[R/2]``); the head dims of all four have stride 1.

    Grid, sizes, strides and keywords are planned once per layout (:data:`_PLANS`); CUDA launches pass the
    strides and keywords as a planned :class:`~nbxtensor.runtime.launcher.Tail`."""
    kk, ykk = (k, yk) if k is not None else (q, yq)
    key = (q._dtype, q._shape, q._stride, yq._stride, kk._shape, kk._stride, ykk._stride, k is None, yq is q,
           pos._shape, pos._stride, inv._shape, bool(interleaved), q._storage.device, config_state(), launch_config)
    plan = _PLANS.get(key)
    if plan is None:
        B, HQ, S, D = q.shape
        r2 = inv.shape[0]
        cfg = launch_config("rope", q.device, dtypes=(q.dtype,), head_dim=D)
        hk = k.shape[1] if k is not None else 0
        acc = "float64" if q.dtype is T.float64 else "float32"
        bp = cfg.pop("BLOCK_P")
        cfg.update(pdl_settings(cfg, q.device))
        strides = (q.stride(0), q.stride(1), q.stride(2), yq.stride(0), yq.stride(1), yq.stride(2),
                   kk.stride(0), kk.stride(1), kk.stride(2), ykk.stride(0), ykk.stride(1), ykk.stride(2),
                   pos.stride(0), pos.stride(1))
        meta = dict(INTERLEAVED=bool(interleaved), COPY_REST=(yq is not q) and 2 * r2 < D,
                    BLOCK_R=max(2, 1 << max(0, r2 - 1).bit_length()), BLOCK_P=bp, ACC=TL_DTYPES[acc], **cfg)
        if len(_PLANS) >= 1024:
            _PLANS.clear()
        plan = _PLANS[key] = ((B * S, 2 if k is not None else 1), (S, HQ, hk, r2, D), strides, meta,
                              Tail(strides, meta) if q._storage.device.type == "cuda" else None)
    grid, sizes, strides, meta, tail = plan
    if tail is not None:
        launch_tail(_rope_kernel, grid, (q, yq, kk, ykk, pos, inv, *sizes, float(attn_scale)), tail)
    else:
        launch(_rope_kernel, grid, q, yq, kk, ykk, pos, inv, *sizes, float(attn_scale), *strides, **meta)


_PLANS: dict = {}


# ---------------------------------------------------------------------------------------------------------
# CPU implementation and oracle
# ---------------------------------------------------------------------------------------------------------
def _angles32(pos: np.ndarray, inv: np.ndarray) -> np.ndarray:
    """``theta[b, s, i] = float32(pos) * float32(inv_freq[i])`` rounded to float32 (transformers' float32
    product)."""
    return np.asarray(pos, dtype=np.float32)[..., None] * np.asarray(inv, dtype=np.float32)


def _pairs(D: int, r2: int, interleaved: bool):
    i = np.arange(r2)
    return (2 * i, 2 * i + 1) if interleaved else (i, i + r2)


def _rotate(x: np.ndarray, theta: np.ndarray, scale, interleaved: bool, dtype) -> np.ndarray:
    """``x [B, H, S, D]`` rotated by ``theta [B, S, R/2]`` in ``dtype``."""
    r2 = theta.shape[-1]
    a, b = _pairs(x.shape[-1], r2, interleaved)
    c = (np.cos(theta.astype(dtype)) * dtype(scale)).astype(dtype)[:, None]
    s = (np.sin(theta.astype(dtype)) * dtype(scale)).astype(dtype)[:, None]
    y = np.array(x, dtype=dtype, copy=True)
    xa, xb = x[..., a].astype(dtype), x[..., b].astype(dtype)
    y[..., a] = xa * c - xb * s
    y[..., b] = xb * c + xa * s
    return y


def _rope_cpu(q: Tensor, yq: Tensor, k: Tensor | None, yk: Tensor | None, pos: Tensor, inv: Tensor,
              attn_scale: float, interleaved: bool) -> None:
    acc = T.float64 if q.dtype is T.float64 else T.float32
    theta = _angles32(np.asarray(host_view(pos)), np.asarray(host_view(inv)))
    for x, y in ((q, yq), (k, yk)):
        if x is None:
            continue
        xa = cast_array(np.asarray(host_view(x)), x.dtype, acc)
        host_view(y)[...] = cast_array(_rotate(xa, theta, attn_scale, interleaved, acc.numpy.type), acc, y.dtype)


def rope_oracle(query, key, position_ids, inv_freq, attention_scaling=1.0, interleaved=False, **_):
    """float64 RoPE on host arrays (the angles are transformers' float32 products, the rest float64).

    Returns:
        ``(q_rot, k_rot)`` (``k_rot`` None without a key).
    """
    pos = np.asarray(position_ids)
    if pos.ndim == 1:
        pos = pos[None, :]
    theta = _angles32(pos, inv_freq)
    outs = []
    for x in (query, key):
        if x is None:
            outs.append(None)
            continue
        xa = np.asarray(x)
        xf = cast_array(xa, T.dtype_from(xa.dtype), T.float64)
        outs.append(_rotate(xf, np.broadcast_to(theta, (xf.shape[0],) + theta.shape[1:]), attention_scaling,
                            interleaved, np.float64))
    return tuple(outs)


def rope_tolerance(dtype) -> Tolerance:
    """Declared rule: ``|y - ref| <= atol + rtol * (|ref| + |x_a| + |x_b|)`` with the dtype's tolerance widened
    for a sum of two products (``reduced=2``): cancellation between the two products makes ``|ref|`` alone too
    small a scale; cos/sin of float32 angles add a few float32 ulps."""
    d = T.dtype_from(dtype)
    base = tolerance(d, reduced=2)
    if d is T.float64:  # float32 cos/sin on the GPU: the result cannot beat float32
        return Tolerance(max(base.rtol, 4e-7), base.atol)
    return base


# ---------------------------------------------------------------------------------------------------------
# Driver and record
# ---------------------------------------------------------------------------------------------------------
_FN = "rotary_embedding"


def _stride1(t: Tensor) -> Tensor:
    return t if t.stride(-1) == 1 or t.shape[-1] <= 1 else t.contiguous()


_VALID: set = set()   # argument signatures (dtypes, shapes, devices) that passed _validate


def _validate(q: Tensor, k: Tensor | None, pos: Tensor, inv: Tensor) -> None:
    fn = _FN
    check(q.ndim == 4, lambda: f"{fn}: query must be [batch, heads, seq, head_dim], got {list(q.shape)}")
    B, _, S, D = q.shape
    if k is not None:
        check(k.ndim == 4 and k.shape[0] == B and k.shape[2] == S and k.shape[3] == D, lambda: f"{fn}: key must be "
              f"[batch={B}, kv_heads, seq={S}, head_dim={D}], got {list(k.shape)}")
        check(k.dtype == q.dtype, lambda: f"{fn}: query and key must share a dtype, got {q.dtype.name} and "
              f"{k.dtype.name}")
    check(q.dtype in FLOATS, lambda: f"{fn}: expected a floating query, got {q.dtype.name}")
    check(pos.dtype in INDEX_DTYPES, lambda: f"{fn}: position_ids must be int32 or int64, got {pos.dtype.name}")
    check(pos.ndim in (1, 2) and pos.shape[-1] == S and (pos.ndim == 1 or pos.shape[0] in (1, B)),
          lambda: f"{fn}: position_ids must be [seq={S}] or [batch={B} or 1, seq={S}], got {list(pos.shape)}")
    check(inv.dtype is T.float32 and inv.ndim == 1, lambda: f"{fn}: inv_freq must be a 1-d float32 tensor, got "
          f"{inv.dtype.name} {list(inv.shape)}")
    r2 = inv.shape[0]
    check(0 < 2 * r2 <= D, lambda: f"{fn}: inv_freq has {r2} frequencies: 2 * {r2} rotary dims must be in [2, "
          f"head_dim={D}]")
    for name, t in (("key", k), ("position_ids", pos), ("inv_freq", inv)):
        check(t is None or t.device == q.device, lambda: f"{fn}: {name} is on {t.device}, query on {q.device}")


def _driver(rec, args, *, out=None, inplace=None):
    fn = _FN
    q, k, pos, inv = args["query"], args["key"], args["position_ids"], args["inv_freq"]
    # the checks depend on dtypes, shapes and devices only: a signature that passed once passes again
    sig = (q._dtype, q._shape, q._storage.device, pos._dtype, pos._shape, pos._storage.device, inv._dtype,
           inv._shape, inv._storage.device, None if k is None else (k._dtype, k._shape, k._storage.device))
    if sig not in _VALID:
        _validate(q, k, pos, inv)
        if len(_VALID) >= 1024:
            _VALID.clear()
        _VALID.add(sig)
    B, _, S, D = q.shape
    pos2 = pos.reshape(1, S) if pos.ndim == 1 else pos
    if pos2.shape[0] != B:
        pos2 = pos2.expand(B, S)
    if inplace is not None:
        for name, t in (("query", q), ("key", k)):
            check(t is None or (not t.untyped_storage().readonly and t.stride(-1) == 1),
                  lambda: f"{fn}: inplace=True needs a writable {name} with a unit stride on head_dim")
        xq, yq, xk, yk = q, q, k, k
    else:
        xq, xk = _stride1(q), (_stride1(k) if k is not None else None)
        yq = new_empty(tuple(q.shape), q.dtype, q.device)
        yk = new_empty(tuple(k.shape), k.dtype, k.device) if k is not None else None
    if q.numel() or (k is not None and k.numel()):
        registry.impl(fn, q.device.type)(xq, yq, xk, yk, pos2, inv, float(args["attention_scaling"]),
                                         bool(args["interleaved"]))
    return yq, yk


def _cpu(*a):
    _rope_cpu(*a)


def _triton(*a):
    launch_rope(*a)


def _cost(query, key, position_ids, inv_freq, attention_scaling=1.0, interleaved=False) -> Cost:
    """q and k read and written once (the rotated channels; all channels out of place: counted as all), the
    positions and frequencies read; 6 flops per rotated pair."""
    n = query.numel() + (key.numel() if key is not None else 0)
    it = query.dtype.itemsize
    pairs = n // query.shape[-1] * inv_freq.shape[0]
    return Cost(flops=6 * pairs, bytes_read=n * it + position_ids.numel() * position_ids.dtype.itemsize
                + inv_freq.numel() * 4, bytes_written=n * it)


def _t(*shape, dtype=T.float32):
    return lambda dev: new_empty(shape, dtype, dev).fill_(0)


_ERRORS = [
    ("3-d query", (_t(2, 3, 8), None, _t(3, dtype=T.int64), _t(4)), {}, RuntimeError, "head_dim"),
    ("float positions", (_t(1, 2, 3, 8), None, _t(3), _t(4)), {}, RuntimeError, "int32 or int64"),
    ("too many frequencies", (_t(1, 2, 3, 8), None, _t(3, dtype=T.int64), _t(5)), {}, RuntimeError, "rotary dims"),
    ("position length", (_t(1, 2, 3, 8), None, _t(4, dtype=T.int64), _t(4)), {}, RuntimeError, "position_ids"),
    ("key shape", (_t(1, 2, 3, 8), _t(1, 2, 4, 8), _t(3, dtype=T.int64), _t(4)), {}, RuntimeError, "key must be"),
    ("float64 frequencies", (_t(1, 2, 3, 8), None, _t(3, dtype=T.int64), _t(4, dtype=T.float64)), {}, RuntimeError,
     "float32"),
]

register(OpRecord(
    name=_FN, family="rope", cpu=_cpu, triton=_triton, oracle=rope_oracle, cost=_cost,
    extra=dict(schema=f"{_FN}(Tensor query, Tensor? key, Tensor position_ids, Tensor inv_freq, "
                      "float attention_scaling=1.0, bool interleaved=False, bool inplace=False)",
               driver=_driver, dtypes=FLOATS, namespaces=("functional",), method=False, errors=_ERRORS,
               tolerance=dict(rule=rope_tolerance, cause="cancellation between the two products of a rotation"),
               doc="``rotary_embedding(query, key, position_ids, inv_freq, attention_scaling=1.0, interleaved=False, "
                   "inplace=False) -> (query_rot, key_rot)``: RoPE on ``[batch, heads, seq, head_dim]`` (see "
                   ":mod:`nbxtensor.ops.rope`; frequencies from :func:`nbxtensor.nn.rope_parameters`).")),
)
