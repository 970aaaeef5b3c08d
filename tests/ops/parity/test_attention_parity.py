"""Parity of scaled_dot_product_attention, embedding and RoPE with PyTorch on CPU.

SDPA: the same arguments on both sides (dtypes, 2-d to 5-d shapes with broadcast batch dims, boolean and additive
masks with fully masked rows and finfo.min rows, is_causal alone and with a mask, ``torch.nn.attention.bias``'s
causal_upper_left / causal_lower_right against ours, scale, enable_gqa with unequal key/value heads, Ev != E);
values within the declared attention tolerance (both sides are approximations: twice the rule, scaled by the
oracle's P|V|). The record's error inputs are replayed on PyTorch: same exception type, except the stated
refusals of an inference library. Embedding: lookups, padding_idx, max_norm (the weight rescaled in place as
PyTorch does), errors. RoPE: transformers' ``modeling_rope_utils`` formulas and ``apply_rotary_pos_emb`` written
with torch here (transformers is not installed), float32 frequencies as transformers computes them.
"""

from __future__ import annotations

import math
import os
import sys
import zlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nbxtensor as nbx  # noqa: E402
from nbxtensor.dtypes import table as T  # noqa: E402
from nbxtensor.dtypes.casting import cast_array  # noqa: E402
from nbxtensor.ops import registry  # noqa: E402
from nbxtensor.ops.attention import attention_tolerance, sdpa_oracle  # noqa: E402
from nbxtensor.ops.rope import rope_parameters, rope_tolerance  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/ops: the shared harness
from attention_harness import QUICK, check_close, dev, draw, host  # noqa: E402

pytestmark = [pytest.mark.parity, pytest.mark.filterwarnings("ignore")]

F = nbx.nn.functional
TF = torch.nn.functional
DEVICE = os.environ.get("NBX_TEST_DEVICE", "cpu")


def to_torch(a):
    if a is None:
        return None
    a = np.asarray(a)
    dt = T.dtype_from(a.dtype)
    if dt is T.bfloat16:  # ml_dtypes arrays: through their bits
        return torch.from_numpy(np.array(a, order="C").view(np.uint16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.array(a, order="C", copy=True))


def from_torch(t) -> np.ndarray:
    if t.dtype == torch.bfloat16:
        return t.float().double().numpy()
    return t.double().numpy()


def _seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


# ---------------------------------------------------------------------------------------------------------
# SDPA
# ---------------------------------------------------------------------------------------------------------
# (label, q shape, k shape, v shape, mask kind/shape or bias, kwargs)
SDPA_CASES = [
    ("plain", (2, 4, 17, 64), (2, 4, 33, 64), (2, 4, 33, 64), None, {}),
    ("causal", (1, 4, 33, 64), (1, 4, 33, 64), (1, 4, 33, 64), None, {"is_causal": True}),
    ("causal L<S", (1, 2, 9, 32), (1, 2, 40, 32), (1, 2, 40, 32), None, {"is_causal": True}),
    ("causal L>S", (1, 2, 40, 32), (1, 2, 9, 32), (1, 2, 9, 32), None, {"is_causal": True}),
    ("bool mask + causal", (2, 2, 17, 32), (2, 2, 17, 32), (2, 2, 17, 32), ("bool", (2, 1, 17, 17)),
     {"is_causal": True}),
    ("bool mask 2-d", (2, 3, 17, 80), (2, 3, 21, 80), (2, 3, 21, 80), ("bool", (17, 21)), {}),
    ("float mask", (2, 3, 17, 96), (2, 3, 21, 96), (2, 3, 21, 96), ("float32", (2, 3, 17, 21)), {}),
    ("q-dtype mask", (2, 3, 17, 64), (2, 3, 21, 64), (2, 3, 21, 64), ("qdtype", (1, 3, 17, 21)), {}),
    ("finfo.min rows", (1, 2, 9, 32), (1, 2, 12, 32), (1, 2, 12, 32), ("finfo_min", (9, 12)), {}),
    ("scale", (1, 2, 9, 127), (1, 2, 12, 127), (1, 2, 12, 127), None, {"scale": 0.05}),
    ("gqa 4", (2, 8, 17, 128), (2, 2, 33, 128), (2, 2, 33, 128), None, {"enable_gqa": True, "is_causal": True}),
    ("gqa 8", (1, 8, 17, 64), (1, 1, 20, 64), (1, 1, 20, 64), None, {"enable_gqa": True}),
    ("gqa Hk != Hv", (1, 8, 5, 32), (1, 4, 9, 32), (1, 2, 9, 32), None, {"enable_gqa": True}),
    ("one query row", (2, 8, 1, 64), (2, 2, 50, 64), (2, 2, 50, 64), None, {"enable_gqa": True}),
    ("2-d", (9, 32), (17, 32), (17, 32), None, {}),
    ("3-d", (3, 9, 32), (3, 17, 32), (3, 17, 32), None, {}),
    ("5-d broadcast", (2, 2, 2, 5, 32), (2, 1, 2, 17, 32), (1, 2, 2, 17, 32), None, {}),
    ("head broadcast", (2, 4, 5, 32), (2, 1, 9, 32), (2, 4, 9, 32), None, {}),
    ("Ev != E", (2, 2, 5, 32), (2, 2, 17, 32), (2, 2, 17, 48), None, {"is_causal": True}),
    ("lower_right L<S", (1, 2, 9, 64), (1, 2, 30, 64), (1, 2, 30, 64), "lower_right", {}),
    ("lower_right L>S", (1, 2, 30, 64), (1, 2, 9, 64), (1, 2, 9, 64), "lower_right", {}),
    ("upper_left", (1, 2, 9, 64), (1, 2, 30, 64), (1, 2, 30, 64), "upper_left", {}),
    ("head dim 255", (1, 2, 17, 255), (1, 2, 17, 255), (1, 2, 17, 255), None, {"is_causal": True}),
]
SDPA_DTYPES = [T.float32, T.bfloat16] if QUICK else [T.float32, T.bfloat16, T.float16, T.float64]


def _mask(kind, shape, dt, rng):
    keep = rng.random(shape) < 0.6
    keep[..., 0, :] = False  # a fully masked row
    if kind == "bool":
        return keep
    if kind == "finfo_min":
        return np.where(keep, 0.0, np.finfo(np.float32).min).astype(np.float32)
    m = np.where(keep, rng.standard_normal(shape), -np.inf)
    return cast_array(m, T.float64, T.float32 if kind == "float32" else dt)


_QUICK_HALF = ("causal", "gqa 4", "float mask", "lower_right L>S")  # the quick tier's bfloat16 cases
SDPA_PARAMS = [(c, d) for c in SDPA_CASES for d in SDPA_DTYPES
               if not (QUICK and d is T.bfloat16 and c[0] not in _QUICK_HALF)]


@pytest.mark.parametrize("case,dt", SDPA_PARAMS, ids=[f"{c[0]}-{d.name}" for c, d in SDPA_PARAMS])
def test_sdpa(case, dt):
    from torch.nn.attention.bias import causal_lower_right as t_lr, causal_upper_left as t_ul
    from nbxtensor.nn.attention.bias import causal_lower_right, causal_upper_left
    label, qs, ks, vs, mk, kwargs = case
    rng = np.random.default_rng(_seed(label, dt.name))
    q, k, v = draw(rng, qs, dt), draw(rng, ks, dt), draw(rng, vs, dt)
    n_mask = t_mask = None
    off, causal = 0, bool(kwargs.get("is_causal"))
    mask_arr = None
    if isinstance(mk, tuple):
        mask_arr = _mask(mk[0], mk[1], dt, rng)
        n_mask, t_mask = dev(mask_arr, DEVICE), to_torch(mask_arr)
        if dt is T.float64 and mask_arr.dtype == np.float32:
            # PyTorch 2.13's CPU kernel misreads a float32 mask under a float64 query (its result differs from
            # the same mask in float64, and is not the unmasked result either); compare with the float64 mask
            t_mask = t_mask.double()
    elif mk in ("lower_right", "upper_left"):
        L, S = qs[-2], ks[-2]
        n_mask = (causal_lower_right if mk == "lower_right" else causal_upper_left)(L, S)
        t_mask = (t_lr if mk == "lower_right" else t_ul)(L, S)
        causal, off = True, (S - L if mk == "lower_right" else 0)
    ours = F.scaled_dot_product_attention(dev(q, DEVICE), dev(k, DEVICE), dev(v, DEVICE), attn_mask=n_mask,
                                          **kwargs)
    theirs = TF.scaled_dot_product_attention(to_torch(q), to_torch(k), to_torch(v), attn_mask=t_mask, **kwargs)
    assert tuple(ours.shape) == tuple(theirs.shape) and ours.dtype.name == str(theirs.dtype).split(".")[-1]
    _, mag = sdpa_oracle(q, k, v, mask_arr, causal, kwargs.get("scale"), kwargs.get("enable_gqa", False),
                         causal_offset=off, with_magnitude=True)
    tol = attention_tolerance(dt, qs[-1])
    check_close(ours, from_torch(theirs), 2 * tol.rtol, 2 * tol.atol, np.broadcast_to(mag, ours.shape),
                what=f"{label} {dt.name}")
    assert np.isnan(host(ours)).sum() == np.isnan(from_torch(theirs)).sum() == 0


# nbxtensor refuses on purpose (an inference library), PyTorch computes: (label, reason)
NBX_ONLY_REFUSALS = {
    "dropout": "dropout_p != 0 is refused: no dropout at inference",
    "kv length mismatch": "PyTorch 2.13's CPU kernel accepts a value shorter than the key and returns numbers read "
                          "past the value tensor; nbxtensor refuses",
}


def _torch_arg(x):
    if isinstance(x, nbx.Tensor):
        return to_torch(x.cpu().numpy())
    from nbxtensor.nn.attention.bias import CausalBias, CausalVariant
    if isinstance(x, CausalBias):
        from torch.nn.attention.bias import causal_lower_right as t_lr, causal_upper_left as t_ul
        return (t_lr if x.variant is CausalVariant.LOWER_RIGHT else t_ul)(x.seq_len_q, x.seq_len_kv)
    return x


@pytest.mark.parametrize("case", registry.get("scaled_dot_product_attention").extra["errors"], ids=lambda c: c[0])
def test_sdpa_errors_are_pytorchs(case):
    label, builders, kwargs, exc, msg = case
    d = nbx.device("cpu")
    args = [b(d) for b in builders]
    kw = {k: (v(d) if callable(v) else v) for k, v in kwargs.items()}
    with pytest.raises(exc, match=msg):
        F.scaled_dot_product_attention(*args, **kw)
    if label in NBX_ONLY_REFUSALS:
        return  # PyTorch computes something here: see the reason
    with pytest.raises(exc):
        TF.scaled_dot_product_attention(*[_torch_arg(a) for a in args], **{k: _torch_arg(v) for k, v in kw.items()})


def test_decode_matches_torch_sdpa():
    """decode_attention over per-sequence lengths equals PyTorch SDPA of each sequence's prefix (one query)."""
    dt = T.float32
    rng = np.random.default_rng(7)
    B, Hq, hkv, cap, E = 3, 8, 2, 40, 64
    q, k, v = draw(rng, (B, Hq, E), dt), draw(rng, (B, hkv, cap, E), dt), draw(rng, (B, hkv, cap, E), dt)
    lens = np.array([40, 17, 1], np.int32)
    ours = host(F.decode_attention(dev(q, DEVICE), dev(k, DEVICE), dev(v, DEVICE), dev(lens, DEVICE)))
    for b in range(B):
        n = int(lens[b])
        t = TF.scaled_dot_product_attention(to_torch(q[b:b + 1, :, None]), to_torch(k[b:b + 1, :, :n]),
                                            to_torch(v[b:b + 1, :, :n]), enable_gqa=True)
        np.testing.assert_allclose(ours[b], from_torch(t)[0, :, 0], rtol=2e-5, atol=2e-6)


# ---------------------------------------------------------------------------------------------------------
# Embedding
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("wdt", [T.float32, T.bfloat16, T.int64], ids=lambda d: d.name)
def test_embedding(wdt):
    rng = np.random.default_rng(_seed("emb", wdt.name))
    w = draw(rng, (31, 12), wdt) if wdt.kind == T.KIND_FLOAT else rng.integers(-9, 9, (31, 12))
    for idx in (rng.integers(0, 31, (3, 4)), np.array(5), rng.integers(0, 31, (7,)).astype(np.int32)):
        ours = F.embedding(dev(idx, DEVICE), dev(w, DEVICE), padding_idx=-1)
        theirs = TF.embedding(to_torch(idx), to_torch(w), padding_idx=-1)
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_array_equal(host(ours) if wdt.kind == T.KIND_FLOAT else ours.cpu().numpy(),
                                      from_torch(theirs) if wdt.kind == T.KIND_FLOAT else theirs.numpy())


@pytest.mark.parametrize("p", [2.0, 1.0, float("inf"), 0.0, 3.0])
def test_embedding_max_norm(p):
    rng = np.random.default_rng(_seed("maxnorm", p))
    w = (rng.standard_normal((9, 16)) * 3).astype(np.float32)
    idx = np.array([[1, 1, 4], [7, 1, 0]])
    mn = 2.0 if p else 5.0
    nw, tw = dev(w, DEVICE), to_torch(w)
    ours = F.embedding(dev(idx, DEVICE), nw, max_norm=mn, norm_type=p)
    theirs = TF.embedding(to_torch(idx), tw, max_norm=mn, norm_type=p)
    np.testing.assert_allclose(host(nw), tw.double().numpy(), rtol=3e-6, atol=1e-6)
    np.testing.assert_allclose(host(ours), from_torch(theirs), rtol=3e-6, atol=1e-6)


@pytest.mark.parametrize("case", registry.get("embedding").extra["errors"], ids=lambda c: c[0])
def test_embedding_errors_are_pytorchs(case):
    label, builders, kwargs, exc, msg = case
    d = nbx.device("cpu")
    args = [b(d) for b in builders]
    with pytest.raises(exc, match=msg):
        F.embedding(*args, **kwargs)
    with pytest.raises(exc):
        TF.embedding(*[to_torch(a.numpy()) for a in args], **kwargs)


# ---------------------------------------------------------------------------------------------------------
# RoPE: transformers' formulas written with torch (float32 as transformers computes them)
# ---------------------------------------------------------------------------------------------------------
def t_default(base, dim):
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def t_llama3(base, dim, factor, low, high, old):
    inv = t_default(base, dim)
    low_wl, high_wl = old / low, old / high
    wavelen = 2 * math.pi / inv
    inv_l = torch.where(wavelen > low_wl, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * inv_l / factor + smooth * inv_l
    medium = ~(wavelen < high_wl) * ~(wavelen > low_wl)
    return torch.where(medium, smoothed, inv_l)


def t_yarn(base, dim, factor, orig, beta_fast=32, beta_slow=1):
    def corr(rot):
        return (dim * math.log(orig / (rot * 2 * math.pi))) / (2 * math.log(base))
    low, high = max(math.floor(corr(beta_fast)), 0), min(math.ceil(corr(beta_slow)), dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos = base ** (torch.arange(0, dim, 2).float() / dim)
    extra = 1 - ramp
    return (1.0 / (factor * pos)) * (1 - extra) + (1.0 / pos) * extra, 0.1 * math.log(factor) + 1.0


ROPE_CONFIGS = [
    ("default", {"head_dim": 128, "rope_theta": 500000.0}, lambda: (t_default(500000.0, 128), 1.0)),
    ("linear", {"head_dim": 64, "rope_theta": 10000.0, "rope_scaling": {"rope_type": "linear", "factor": 4.0}},
     lambda: (t_default(10000.0, 64) / 4.0, 1.0)),
    ("dynamic", {"head_dim": 64, "rope_theta": 10000.0, "max_position_embeddings": 2048,
                 "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
     lambda: (t_default(10000.0 * ((2.0 * 5000 / 2048) - 1.0) ** (64 / 62), 64), 1.0)),
    ("llama3", {"head_dim": 128, "rope_theta": 500000.0, "max_position_embeddings": 131072,
                "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}},
     lambda: (t_llama3(500000.0, 128, 8.0, 1.0, 4.0, 8192), 1.0)),
    ("yarn", {"head_dim": 64, "rope_theta": 10000.0, "max_position_embeddings": 32768,
              "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}},
     lambda: t_yarn(10000.0, 64, 4.0, 8192)),
]


def hf_rotate(x, pos, inv, scale, interleaved, dtype):
    """transformers' LlamaRotaryEmbedding.forward + apply_rotary_pos_emb (rotate-half), or GPT-J's
    rotate_every_two, in torch: cos/sin in float32, cast to the input dtype, then multiplied in it."""
    freqs = (inv[None, :, None].float() @ pos[:, None, :].float()).transpose(1, 2)  # [B, S, R/2]
    emb = torch.repeat_interleave(freqs, 2, dim=-1) if interleaved else torch.cat((freqs, freqs), dim=-1)
    cos, sin = (emb.cos() * scale).to(dtype)[:, None], (emb.sin() * scale).to(dtype)[:, None]
    R = emb.shape[-1]
    xr, rest = x[..., :R], x[..., R:]
    if interleaved:
        rot = torch.stack((-xr[..., 1::2], xr[..., ::2]), dim=-1).flatten(-2)
    else:
        rot = torch.cat((-xr[..., R // 2:], xr[..., :R // 2]), dim=-1)
    return torch.cat(((xr * cos) + (rot * sin), rest), dim=-1)


@pytest.mark.parametrize("name,cfg,ref", ROPE_CONFIGS, ids=lambda x: x if isinstance(x, str) else "")
def test_rope_frequencies(name, cfg, ref):
    inv, a = rope_parameters(cfg, seq_len=5000 if name == "dynamic" else None)
    t_inv, t_a = ref()
    np.testing.assert_allclose(inv, t_inv.numpy(), rtol=1e-6, atol=0)  # float32 steps vs one rounding
    assert a == pytest.approx(t_a, rel=1e-12)


@pytest.mark.parametrize("dt", [T.float32, T.bfloat16], ids=lambda d: d.name)
@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("name,cfg,ref", ROPE_CONFIGS[::2] if QUICK else ROPE_CONFIGS,
                         ids=lambda x: x if isinstance(x, str) else "")
def test_rope_rotation(name, cfg, ref, interleaved, dt):
    rng = np.random.default_rng(_seed(name, interleaved, dt.name))
    D = cfg["head_dim"]
    q, k = draw(rng, (2, 4, 6, D), dt), draw(rng, (2, 2, 6, D), dt)
    pos = rng.integers(0, 8192, (2, 6))
    inv, a = rope_parameters(cfg, seq_len=5000 if name == "dynamic" else None)
    yq, yk = F.rotary_embedding(dev(q, DEVICE), dev(k, DEVICE), dev(pos, DEVICE), dev(inv, DEVICE), a, interleaved)
    tdt = getattr(torch, dt.name)
    tol = rope_tolerance(dt)
    for y, x in ((yq, q), (yk, k)):
        t = hf_rotate(to_torch(x), torch.from_numpy(pos), torch.from_numpy(inv), a, interleaved, tdt)
        # transformers rounds cos/sin to the input dtype and multiplies in it: up to three more roundings
        mag = 2 * np.abs(cast_array(x, dt, T.float64)) + 1
        check_close(y, from_torch(t), 4 * tol.rtol, 4 * tol.atol, mag, what=f"rope {name} il={interleaved}")
