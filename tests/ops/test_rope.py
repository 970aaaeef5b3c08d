"""RoPE: the frequency schedules of Hugging Face configs (default, linear, dynamic NTK, Llama 3, YaRN) against
transformers' formulas re-derived here in float64, and the rotation kernel (rotate-half and interleaved,
partial rotary, GQA keys, in place, strided views) against the float64 oracle and against an explicit
transformers-style ``q * cos + rotate_half(q) * sin``.

Runs on the ``device`` fixture; ``NBX_TRITON_INTERPRET=1`` runs the Triton kernel on the cpu device.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.nn import RotaryEmbedding, rope_parameters
from nbxtensor.ops import registry
from nbxtensor.ops.rope import rope_oracle, rope_tolerance

from attention_harness import QUICK, check_close, dev, draw, host

F = nbx.nn.functional
REC = registry.get("rotary_embedding")


# ---------------------------------------------------------------------------------------------------------
# transformers' formulas (modeling_rope_utils), written out again in float64
# ---------------------------------------------------------------------------------------------------------
def hf_default(base, dim):
    return 1.0 / base ** (np.arange(0, dim, 2, dtype=np.float64) / dim)


def hf_llama3(base, dim, factor, low, high, old):
    inv = hf_default(base, dim)
    wavelen = 2 * math.pi / inv
    out = np.where(wavelen > old / low, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = (wavelen >= old / high) & (wavelen <= old / low)
    return np.where(medium, smoothed, out)


def hf_yarn(base, dim, factor, orig, beta_fast=32, beta_slow=1, truncate=True, mscale=None, mscale_all=None,
            attention_factor=None):
    def corr(rot):
        return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))
    lo, hi = corr(beta_fast), corr(beta_slow)
    if truncate:
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, dim - 1)
    if lo == hi:
        hi += 0.001
    ramp = np.clip((np.arange(dim // 2) - lo) / (hi - lo), 0, 1)
    pos = base ** (np.arange(0, dim, 2) / dim)
    extra = 1 - ramp
    inv = (1 / (factor * pos)) * (1 - extra) + (1 / pos) * extra

    def gm(s, m=1.0):
        return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0
    if attention_factor is None:
        attention_factor = gm(factor, mscale) / gm(factor, mscale_all) if (mscale and mscale_all) else gm(factor)
    return inv, attention_factor


def _cmp(inv, ref, what):
    # float32 rounding of each frequency (transformers rounds its float32 steps too: a few ulps)
    np.testing.assert_allclose(inv.astype(np.float64), ref, rtol=5e-7, atol=0, err_msg=what)
    assert inv.dtype == np.float32


def test_default_and_linear():
    inv, a = rope_parameters({"head_dim": 128, "rope_theta": 500000.0})
    _cmp(inv, hf_default(500000.0, 128), "default")
    assert a == 1.0 and inv.shape == (64,)
    inv, _ = rope_parameters({"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 10000.0,
                              "rope_scaling": {"type": "linear", "factor": 4.0}})
    _cmp(inv, hf_default(10000.0, 128) / 4.0, "linear (4.x 'type' key)")
    inv, _ = rope_parameters({"head_dim": 64, "partial_rotary_factor": 0.5, "rope_theta": 10000.0})
    _cmp(inv, hf_default(10000.0, 32), "partial rotary")


def test_dynamic_ntk():
    cfg = {"head_dim": 64, "rope_theta": 10000.0, "max_position_embeddings": 2048,
           "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}
    inv, _ = rope_parameters(cfg)
    _cmp(inv, hf_default(10000.0, 64), "dynamic at max_position_embeddings = default")
    inv, _ = rope_parameters(cfg, seq_len=1000)
    _cmp(inv, hf_default(10000.0, 64), "dynamic below max_position_embeddings")
    inv, _ = rope_parameters(cfg, seq_len=6000)
    base = 10000.0 * ((2.0 * 6000 / 2048) - 1.0) ** (64 / 62)
    _cmp(inv, hf_default(base, 64), "dynamic beyond")


def test_llama3():
    cfg = {"head_dim": 128, "rope_theta": 500000.0, "max_position_embeddings": 131072,
           "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 8192}}
    inv, a = rope_parameters(cfg)
    _cmp(inv, hf_llama3(500000.0, 128, 8.0, 1.0, 4.0, 8192), "llama3")
    assert a == 1.0
    raw = hf_default(500000.0, 128)
    assert inv[0] == np.float32(raw[0]) and abs(inv[-1] / raw[-1] - 1 / 8) < 1e-6  # high kept, low divided


@pytest.mark.parametrize("extra", [{}, {"beta_fast": 16, "beta_slow": 2}, {"truncate": False},
                                   {"mscale": 1.0, "mscale_all_dim": 0.707}, {"attention_factor": 1.25}])
def test_yarn(extra):
    cfg = {"head_dim": 64, "rope_theta": 10000.0, "max_position_embeddings": 32768,
           "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192, **extra}}
    inv, a = rope_parameters(cfg)
    ref, ra = hf_yarn(10000.0, 64, 4.0, 8192, extra.get("beta_fast", 32), extra.get("beta_slow", 1),
                      extra.get("truncate", True), extra.get("mscale"), extra.get("mscale_all_dim"),
                      extra.get("attention_factor"))
    _cmp(inv, ref, f"yarn {extra}")
    assert a == pytest.approx(ra, rel=1e-15)


def test_yarn_factor_from_lengths_and_v5_dict():
    """Without factor, YaRN takes max_position_embeddings / original_max_position_embeddings; transformers v5's
    rope_parameters dict (rope_theta inside) is read like 4.x's rope_theta + rope_scaling."""
    inv, a = rope_parameters({"head_dim": 64, "max_position_embeddings": 16384,
                              "rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0,
                                                  "original_max_position_embeddings": 4096}})
    ref, ra = hf_yarn(10000.0, 64, 4.0, 4096)
    _cmp(inv, ref, "yarn factor from lengths")
    assert a == pytest.approx(ra)


def test_unknown_type():
    with pytest.raises(ValueError, match="longrope"):
        rope_parameters({"head_dim": 64, "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0]}})
    with pytest.raises(ValueError, match="low_freq_factor"):
        rope_parameters({"head_dim": 64, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}})


# ---------------------------------------------------------------------------------------------------------
# The rotation
# ---------------------------------------------------------------------------------------------------------
def hf_apply(x, pos, inv, scale, interleaved):
    """transformers' apply_rotary_pos_emb (rotate-half) or GPT-J's rotate_every_two, float64, with cos/sin
    tables of the full rotary width; the angles are float32 products as transformers computes them."""
    theta = (np.asarray(pos, np.float32)[..., None] * inv.astype(np.float32)).astype(np.float64)  # [B, S, R/2]
    R = 2 * inv.shape[0]
    if interleaved:
        emb = np.repeat(theta, 2, axis=-1)
    else:
        emb = np.concatenate([theta, theta], axis=-1)
    cos, sin = (np.cos(emb) * scale)[:, None], (np.sin(emb) * scale)[:, None]
    xr = x[..., :R].astype(np.float64)
    if interleaved:
        rot = np.stack([-xr[..., 1::2], xr[..., ::2]], axis=-1).reshape(xr.shape)
    else:
        rot = np.concatenate([-xr[..., R // 2:], xr[..., :R // 2]], axis=-1)
    return np.concatenate([xr * cos + rot * sin, x[..., R:].astype(np.float64)], axis=-1)


def _cases():
    c = [(T.float32, False, 64, 64), (T.float32, True, 64, 64), (T.bfloat16, False, 128, 128),
         (T.float16, True, 64, 32), (T.float32, False, 80, 40), (T.float64, False, 64, 64), (T.bfloat16, True, 96, 64)]
    return c[:5] if QUICK else c


@pytest.mark.parametrize("dt,interleaved,D,R", _cases(), ids=lambda x: getattr(x, "name", str(x)))
def test_rotation(dt, interleaved, D, R, device):
    """q and k (fewer key heads) rotated at [B, S] positions up to 131072: the oracle's rule and the explicit
    transformers-style formula agree; channels past the rotary dims pass through unchanged."""
    rng = np.random.default_rng(D + R + interleaved)
    B, Hq, Hk, S = 2, 4, 2, 5
    q, k = draw(rng, (B, Hq, S, D), dt), draw(rng, (B, Hk, S, D), dt)
    pos = rng.integers(0, 131072, (B, S))
    pos[0, 0] = 0
    inv, scale = rope_parameters(head_dim=R, rope_theta=500000.0)
    scale = 1.1 if dt is T.float32 else scale
    yq, yk = F.rotary_embedding(dev(q, device), dev(k, device), dev(pos, device), dev(inv, device), scale, interleaved)
    rq, rk = rope_oracle(q, k, pos, inv, scale, interleaved)
    tol = rope_tolerance(dt)
    for y, r, x, name in ((yq, rq, q, "q"), (yk, rk, k, "k")):
        assert y.dtype == dt and tuple(y.shape) == x.shape
        mag = np.abs(x.astype(np.float64))
        mag = mag + np.roll(mag, inv.shape[0] if not interleaved else 1, axis=-1)  # the pair's partner, roughly
        check_close(y, r, tol.rtol, tol.atol, 2 * mag, what=f"{name} {dt.name} il={interleaved} D={D} R={R}")
        np.testing.assert_allclose(r, hf_apply(x, pos, inv, scale, interleaved), rtol=1e-12, atol=1e-12)
        if R < D:
            assert host(y)[..., R:].tobytes() == x[..., R:].astype(np.float64).tobytes()
    np.testing.assert_allclose(host(yq)[0, :, 0, :R], q[0, :, 0, :R].astype(np.float64) * scale,
                               rtol=4 * tol.rtol, atol=tol.atol)  # position 0: no rotation


def test_positions_1d_and_inplace(device):
    """position_ids of shape [S] (shared by the batch); inplace=True writes into q and k; key None."""
    dt = T.float32
    rng = np.random.default_rng(1)
    q, k = draw(rng, (2, 3, 6, 32), dt), draw(rng, (2, 1, 6, 32), dt)
    pos = np.arange(100, 106)
    inv, _ = rope_parameters(head_dim=32)
    tq, tk = dev(q, device), dev(k, device)
    yq, yk = F.rotary_embedding(tq, tk, dev(pos, device), dev(inv, device), inplace=True)
    assert yq is tq and yk is tk
    rq, rk = rope_oracle(q, k, pos, inv)
    tol = rope_tolerance(dt)
    check_close(tq, rq, tol.rtol, tol.atol, 2 * np.abs(q) + 2, what="in place q")
    check_close(tk, rk, tol.rtol, tol.atol, 2 * np.abs(k) + 2, what="in place k")
    yq, none = F.rotary_embedding(dev(q, device), None, dev(pos.astype(np.int32), device), dev(inv, device))
    assert none is None
    check_close(yq, rq, tol.rtol, tol.atol, 2 * np.abs(q) + 2, what="no key, int32 positions")


def test_strided_input(device):
    """q as the projection layout [B, S, H, D] viewed as [B, H, S, D] (head dim contiguous)."""
    dt = T.bfloat16
    rng = np.random.default_rng(2)
    qb = draw(rng, (2, 7, 4, 64), dt)
    tq = dev(qb, device).transpose(1, 2)
    pos = rng.integers(0, 4096, (2, 7))
    inv, _ = rope_parameters(head_dim=64)
    yq, _ = F.rotary_embedding(tq, None, dev(pos, device), dev(inv, device))
    q = qb.transpose(0, 2, 1, 3)
    rq, _ = rope_oracle(q, None, pos, inv)
    tol = rope_tolerance(dt)
    check_close(yq, rq, tol.rtol, tol.atol, 2 * np.abs(q.astype(np.float64)) + 2, what="strided")


def test_rotary_embedding_class(device):
    """RotaryEmbedding.from_config with YaRN scales cos/sin by the attention factor; dynamic NTK follows
    transformers' cache: the frequencies grow with the longest sequence and reset below the original length."""
    dt = T.float32
    rng = np.random.default_rng(3)
    q = draw(rng, (1, 2, 3, 64), dt)
    pos = np.array([[0, 1, 5000]])
    rope = RotaryEmbedding.from_config({"head_dim": 64, "rope_theta": 10000.0, "max_position_embeddings": 4096,
                                        "rope_scaling": {"type": "yarn", "factor": 4.0}}, device=device)
    yq, _ = rope(dev(q, device), None, dev(pos, device))
    rq, _ = rope_oracle(q, None, pos, rope.inv_freq, rope.attention_scaling)
    tol = rope_tolerance(dt)
    check_close(yq, rq, tol.rtol, tol.atol, 2 * np.abs(q) + 2, what="yarn class")
    assert rope.attention_scaling == pytest.approx(0.1 * math.log(4.0) + 1.0)

    dyn = RotaryEmbedding(64, rope_scaling={"rope_type": "dynamic", "factor": 2.0}, max_position_embeddings=2048,
                          device=device)
    base = dyn.inv_freq
    dyn(dev(q, device), None, dev(np.array([[0, 1, 4999]]), device))
    grown = dyn.inv_freq
    assert dyn.max_seq_len_cached == 5000 and grown[-1] < base[-1]
    dyn(dev(q, device), None, dev(np.array([[0, 1, 2999]]), device))  # between: keeps the grown frequencies
    assert dyn.inv_freq is grown
    dyn(dev(q, device), None, dev(np.array([[0, 1, 2]]), device))  # short again: reset
    assert dyn.inv_freq is base and dyn.max_seq_len_cached == 2048


@pytest.mark.parametrize("case", REC.extra["errors"], ids=lambda c: c[0])
def test_errors(case, device):
    label, builders, kwargs, exc, msg = case
    d = nbx.device(device)
    args = [b(d) if callable(b) else b for b in builders]
    with pytest.raises(exc, match=msg):
        F.rotary_embedding(*args, **kwargs)


def test_cost():
    q, k = nbx.empty(1, 32, 100, 128, dtype=nbx.bfloat16), nbx.empty(1, 8, 100, 128, dtype=nbx.bfloat16)
    pos, inv = nbx.empty(1, 100, dtype=nbx.int64), nbx.empty(64)
    c = REC.cost(q, k, pos, inv)
    n = (q.numel() + k.numel())
    assert c.bytes_written == n * 2 and c.bytes_read == n * 2 + 800 + 256 and c.flops == 6 * (n // 128) * 64


def test_a_signature_that_passed_its_checks_is_not_rechecked_but_others_are():
    from nbxtensor.ops import rope as R
    rope = registry.get("rotary_embedding").extra["function"]
    q, k = nbx.randn(1, 4, 3, 8), nbx.randn(1, 2, 3, 8)
    pos = nbx.tensor(np.array([0, 1, 2], np.int64))
    inv = nbx.tensor((1.0 / 10000 ** (np.arange(0, 8, 2) / 8)).astype(np.float32))
    first = [t.numpy().copy() for t in rope(q, k, pos, inv, 1.0, False)]
    n = len(R._VALID)
    again = [t.numpy() for t in rope(q, k, pos, inv, 1.0, False)]
    assert len(R._VALID) == n and all(np.array_equal(a, b) for a, b in zip(first, again))
    with pytest.raises(RuntimeError, match="query and key must share a dtype"):
        rope(q, k.to(nbx.float64), pos, inv, 1.0, False)
    with pytest.raises(RuntimeError, match="position_ids must be"):
        rope(q, k, nbx.tensor(np.array([0, 1], np.int64)), inv, 1.0, False)
    with pytest.raises(RuntimeError, match="inv_freq must be a 1-d float32"):
        rope(q, k, pos, inv.to(nbx.float64), 1.0, False)
    with pytest.raises(RuntimeError, match="rotary dims must be in"):
        rope(q, k, pos, nbx.tensor(np.ones(5, np.float32)), 1.0, False)
