"""scaled_dot_product_attention against the float64 oracle: head dims {32, 64, 80, 96, 112, 127, 128, 129, 160, 192,
255, 256}, sequence lengths BLOCK * k + 1 of the device's table, boolean and additive masks with fully masked rows,
GQA ratios 1/4/8, causal top-left and lower-right (PyTorch's bias objects), scale, layouts, the tensor-descriptor
(Hopper) path, errors as data, cost.

Tolerance: the record's declared rule (:func:`nbxtensor.ops.attention.attention_tolerance`),
``|out - ref| <= atol + rtol * (|ref| + P|V|)``. Runs on the ``device`` fixture; under
``NBX_TRITON_INTERPRET=1`` the cpu device runs the Triton kernel; ``NBX_TEST_QUICK=1`` shrinks the matrix.
"""

from __future__ import annotations

import math
import re
import warnings

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.dtypes.casting import cast_array
from nbxtensor.nn.attention.bias import CausalBias, CausalVariant, causal_lower_right, causal_upper_left
from nbxtensor.ops import registry
from nbxtensor.ops.attention import attention_tolerance, causal_pairs, sdpa_oracle

from nbxtensor.runtime.triton_compat import HAVE_TRITON, INTERPRET

from attention_harness import GPU, QUICK, block_lengths, check_close, dev, draw, host

F = nbx.nn.functional
REC = registry.get("scaled_dot_product_attention")
HEAD_DIMS = [32, 64, 80, 96, 112, 127, 128, 129, 160, 192, 255, 256]
DTYPES = [T.float32, T.bfloat16, T.float16, T.float64]


def _lens(device, dt, E=64):
    return block_lengths("sdpa_fwd", device, dt, head_dim=max(16, 1 << (E - 1).bit_length()), q_len=64, causal=1)


def run(device, q, k, v, *, dt, mask=None, bias=None, is_causal=False, scale=None, gqa=False, what=""):
    """SDPA on the device vs the oracle on the same (rounded) values; returns the device output (host)."""
    mt = None if mask is None else dev(mask, device)
    am = bias if bias is not None else mt
    out = F.scaled_dot_product_attention(dev(q, device), dev(k, device), dev(v, device), attn_mask=am,
                                         is_causal=is_causal, scale=scale, enable_gqa=gqa)
    assert out.dtype == dt and out.device == nbx.device(device)
    off = 0
    causal = is_causal
    if bias is not None:
        causal, off = True, bias.offset
    ref, mag = sdpa_oracle(q, k, v, mask, causal, scale, gqa, causal_offset=off, with_magnitude=True)
    tol = attention_tolerance(dt, q.shape[-1])
    check_close(out, ref, tol.rtol, tol.atol, mag, what=what)
    return host(out)


def _head_dim_cases():
    if QUICK:  # one dtype per head dim, cycling, so every dim and every dtype runs once
        cyc = [T.bfloat16, T.float32, T.float16]
        return [(cyc[i % 3], e) for i, e in enumerate(HEAD_DIMS)] + [(T.float64, 80)]
    return [(d, e) for d in DTYPES for e in HEAD_DIMS]


@pytest.mark.parametrize("dt,E", _head_dim_cases(), ids=lambda x: getattr(x, "name", str(x)))
def test_head_dims(dt, E, device):
    """Every head dim (powers of two, 80/96/192 and the odd 127/129/255 padded inside the kernel), query and key
    lengths BLOCK*k+1, causal and not."""
    rng = np.random.default_rng(E)
    lens = _lens(device, dt, E)
    L, S = lens[0], lens[-1]
    B, H = (1, 2)
    q, k, v = draw(rng, (B, H, L, E), dt), draw(rng, (B, H, S, E), dt), draw(rng, (B, H, S, E), dt)
    for causal in (False, True):
        run(device, q, k, v, dt=dt, is_causal=causal, what=f"{dt.name} E={E} L={L} S={S} causal={causal}")
    if not QUICK:  # the square causal case of a prefill
        q2 = draw(rng, (B, H, S, E), dt)
        run(device, q2, k, v, dt=dt, is_causal=True, what=f"{dt.name} E={E} square causal")


def _mask_cases():
    cases = [("bool", (None, None)), ("bool", (2, 1)), ("bool", (2, 3)), ("additive", (None, None)),
             ("additive", (2, 1)), ("finfo_min", (1, 1)), ("bool_causal", (None, None)), ("additive_qdtype", (2, 3))]
    return cases[::2] + [cases[-1]] if QUICK else cases


@pytest.mark.parametrize("kind,lead", _mask_cases(), ids=lambda x: str(x))
def test_masks(kind, lead, device):
    """Boolean (True = take part) and additive masks, broadcast from [L, S], [B, 1, L, S], [B, H, L, S]; rows with
    every key masked give 0 (bool or -inf), rows of equal finite values (finfo.min) stay a uniform average."""
    dt = T.float32 if kind != "additive_qdtype" else T.bfloat16
    rng = np.random.default_rng(len(kind) * 7 + (lead[0] or 0))
    lens = _lens(device, dt)
    B, H, L, S, E = 2, 3, lens[0], lens[-1], 64
    q, k, v = draw(rng, (B, H, L, E), dt), draw(rng, (B, H, S, E), dt), draw(rng, (B, H, S, E), dt)
    mshape = (L, S) if lead[0] is None else (lead[0], lead[1], L, S)
    keep = rng.random(mshape) < 0.6
    keep[..., 1, :] = False  # a fully masked row
    keep[..., L - 1, :] = False
    if kind.startswith("bool"):
        mask = keep
    elif kind == "finfo_min":
        mask = np.where(keep, 0.0, np.finfo(np.float32).min).astype(np.float32)
    else:  # additive: float32, or the query's dtype (PyTorch accepts both)
        mask = cast_array(np.where(keep, rng.standard_normal(mshape), -np.inf), T.float64,
                          T.float32 if kind == "additive" else dt)
    out = run(device, q, k, v, dt=dt, mask=mask, is_causal=kind == "bool_causal", what=f"mask {kind} {mshape}")
    assert not np.isnan(out).any()
    if kind != "finfo_min":
        assert np.all(out[:, :, 1] == 0) and np.all(out[:, :, L - 1] == 0), "fully masked rows must give exactly 0"
    else:  # PyTorch: a row of equal finite scores is uniform, not masked
        np.testing.assert_allclose(out[:, :, 1], np.broadcast_to(v.astype(np.float64).mean(axis=2), out[:, :, 1].shape),
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("ratio", [1, 4, 8])
def test_gqa(ratio, device):
    """enable_gqa: query head h reads key/value head h // ratio; prefill (causal) and a single query row (the
    decode path)."""
    dt = T.bfloat16
    rng = np.random.default_rng(ratio)
    lens = _lens(device, dt)
    Hq, E = 8, 64
    L, S = lens[0], lens[-1]
    q = draw(rng, (2, Hq, L, E), dt)
    k, v = draw(rng, (2, Hq // ratio, S, E), dt), draw(rng, (2, Hq // ratio, S, E), dt)
    run(device, q, k, v, dt=dt, gqa=True, is_causal=True, what=f"gqa {ratio} causal")
    run(device, q[:, :, -1:], k, v, dt=dt, gqa=True, what=f"gqa {ratio} one query row")
    if not QUICK:
        run(device, q, k, v, dt=dt, gqa=True, what=f"gqa {ratio}")


def test_gqa_unequal_kv_heads(device):
    """PyTorch accepts different key and value head counts under enable_gqa (each divides the query heads)."""
    rng = np.random.default_rng(3)
    q, k, v = draw(rng, (1, 8, 5, 32), T.float32), draw(rng, (1, 4, 9, 32), T.float32), draw(rng, (1, 2, 9, 32),
                                                                                              T.float32)
    run(device, q, k, v, dt=T.float32, gqa=True, what="Hk=4 Hv=2")


@pytest.mark.parametrize("variant,L,S", [("top_left", 13, 40), ("top_left", 40, 13), ("lower_right", 13, 40),
                                         ("lower_right", 40, 13), ("lower_right", 21, 21), ("upper_left", 13, 40)])
def test_causal_variants(variant, L, S, device):
    """is_causal (top-left), causal_lower_right (a chunk of new tokens over a cache: j <= i + S - L; with L > S
    the first L - S rows see no key and give 0) and causal_upper_left."""
    dt = T.float32
    rng = np.random.default_rng(L * S)
    B, H, E = 1, 2, 64
    q, k, v = draw(rng, (B, H, L, E), dt), draw(rng, (B, H, S, E), dt), draw(rng, (B, H, S, E), dt)
    if variant == "top_left":
        out = run(device, q, k, v, dt=dt, is_causal=True, what=f"is_causal {L}x{S}")
    else:
        bias = causal_lower_right(L, S) if variant == "lower_right" else causal_upper_left(L, S)
        out = run(device, q, k, v, dt=dt, bias=bias, what=f"{variant} {L}x{S}")
        if variant == "lower_right" and L > S:
            assert np.all(out[:, :, :L - S] == 0)
    assert not np.isnan(out).any()


def test_lower_right_equals_materialized_mask(device):
    """A CausalBias gives the same values as its materialised boolean mask."""
    dt = T.float32
    rng = np.random.default_rng(11)
    q, k, v = draw(rng, (1, 2, 9, 32), dt), draw(rng, (1, 2, 30, 32), dt), draw(rng, (1, 2, 30, 32), dt)
    b = causal_lower_right(9, 30)
    a = F.scaled_dot_product_attention(dev(q, device), dev(k, device), dev(v, device), attn_mask=b)
    m = F.scaled_dot_product_attention(dev(q, device), dev(k, device), dev(v, device),
                                       attn_mask=dev(b.materialize(), device))
    np.testing.assert_allclose(host(a), host(m), rtol=1e-5, atol=1e-6)
    assert b.variant is CausalVariant.LOWER_RIGHT and isinstance(b, CausalBias)


def test_scale(device):
    """An explicit scale replaces 1/sqrt(E); scale 0 gives the plain average of the values."""
    dt = T.float32
    rng = np.random.default_rng(5)
    q, k, v = draw(rng, (1, 2, 7, 48), dt), draw(rng, (1, 2, 19, 48), dt), draw(rng, (1, 2, 19, 48), dt)
    run(device, q, k, v, dt=dt, scale=0.37, what="scale 0.37")
    # a negative scale: the row maximum cannot be taken on unscaled products (the kernel's FOLD path is off)
    run(device, q, k, v, dt=dt, scale=-0.37, what="scale -0.37")
    run(device, q, k, v, dt=dt, scale=-0.37, is_causal=True, what="scale -0.37 causal")
    keep = np.random.default_rng(6).random((7, 19)) < 0.5
    keep[3] = False
    run(device, q, k, v, dt=dt, scale=-0.37, mask=keep, what="scale -0.37 bool mask")
    out = run(device, q, k, v, dt=dt, scale=0.0, what="scale 0")
    np.testing.assert_allclose(out, np.broadcast_to(v.astype(np.float64).mean(axis=2, keepdims=True), out.shape),
                               rtol=1e-5, atol=1e-6)


def test_layouts(device):
    """2-d and 3-d inputs, 5-d batch dims, a key/value batch broadcast against the query's, a value head dim that
    differs from the query's, strided views (the [B, L, H, E] projection layout transposed), empty sequences."""
    dt = T.float32
    rng = np.random.default_rng(7)
    q2, k2, v2 = draw(rng, (9, 32), dt), draw(rng, (17, 32), dt), draw(rng, (17, 32), dt)
    out = run(device, q2, k2, v2, dt=dt, what="2-d")
    assert out.shape == (9, 32)
    run(device, draw(rng, (3, 9, 32), dt), draw(rng, (3, 17, 32), dt), draw(rng, (3, 17, 32), dt), dt=dt, what="3-d")
    run(device, draw(rng, (2, 2, 2, 5, 32), dt), draw(rng, (2, 1, 2, 17, 32), dt), draw(rng, (1, 2, 2, 17, 32), dt),
        dt=dt, what="5-d with broadcast batch dims")
    run(device, draw(rng, (2, 2, 5, 32), dt), draw(rng, (2, 2, 17, 32), dt), draw(rng, (2, 2, 17, 40), dt), dt=dt,
        is_causal=True, what="Ev != E")
    # the projection layout: [B, L, H, E] viewed as [B, H, L, E]
    qb, kb, vb = draw(rng, (2, 9, 3, 32), dt), draw(rng, (2, 17, 3, 32), dt), draw(rng, (2, 17, 3, 32), dt)
    qt, kt, vt = (dev(a, device).transpose(1, 2) for a in (qb, kb, vb))
    assert not qt.is_contiguous()
    out = F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    ref, mag = sdpa_oracle(qb.transpose(0, 2, 1, 3), kb.transpose(0, 2, 1, 3), vb.transpose(0, 2, 1, 3), None, True,
                           with_magnitude=True)
    tol = attention_tolerance(dt, 32)
    check_close(out, ref, tol.rtol, tol.atol, mag, what="transposed views")
    # empty query and empty keys (every row fully masked -> zeros)
    e = F.scaled_dot_product_attention(dev(q2[:0], device), dev(k2, device), dev(v2, device))
    assert tuple(e.shape) == (0, 32)
    z = F.scaled_dot_product_attention(dev(q2, device), dev(k2[:0], device), dev(v2[:0], device))
    assert tuple(z.shape) == (9, 32) and np.all(host(z) == 0)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the interpreter's NumPy on inf - inf
@pytest.mark.parametrize("plain_max", [False, True])
def test_special_values(device, plain_max):
    """NaN in a query row makes that row NaN and no other; +inf in an additive mask makes its row NaN (PyTorch);
    -inf everywhere gives 0. ``PLAIN_MAX`` (the table key: ``tl.max`` for the running maximum, no NaN-propagating
    max) keeps all three: a NaN score reaches the row's sums through its exp2."""
    from nbxtensor.runtime.configs import override
    with override("sdpa_fwd", PLAIN_MAX=plain_max):
        _special_values(device)


def _special_values(device):
    dt = T.float32
    rng = np.random.default_rng(9)
    q, k, v = draw(rng, (1, 1, 5, 32), dt), draw(rng, (1, 1, 7, 32), dt), draw(rng, (1, 1, 7, 32), dt)
    qn = q.copy()
    qn[0, 0, 2, 3] = np.nan
    out = host(F.scaled_dot_product_attention(dev(qn, device), dev(k, device), dev(v, device)))
    assert np.isnan(out[0, 0, 2]).all() and not np.isnan(np.delete(out[0, 0], 2, axis=0)).any()
    m = np.zeros((5, 7), np.float32)
    m[1, 4] = np.inf
    m[3, :] = -np.inf
    out = host(F.scaled_dot_product_attention(dev(q, device), dev(k, device), dev(v, device), attn_mask=dev(m, device)))
    assert np.isnan(out[0, 0, 1]).all() and np.all(out[0, 0, 3] == 0)
    assert not np.isnan(out[0, 0, [0, 2, 4]]).any()


def test_deterministic(device):
    """Two runs on the same inputs are byte-identical (no atomics, fixed order)."""
    rng = np.random.default_rng(13)
    dt = T.bfloat16
    lens = _lens(device, dt)
    q, k, v = (dev(draw(rng, (1, 4, lens[-1], 64), dt), device) for _ in range(3))
    a = F.scaled_dot_product_attention(q, k, v, is_causal=True).cpu().numpy()
    b = F.scaled_dot_product_attention(q, k, v, is_causal=True).cpu().numpy()
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("case", REC.extra["errors"], ids=lambda c: c[0])
def test_errors(case, device):
    """Error inputs declared in the record: the exception type and message."""
    label, builders, kwargs, exc, msg = case
    d = nbx.device(device)
    args = [b(d) if callable(b) else b for b in builders]
    kw = {k: (v(d) if callable(v) else v) for k, v in kwargs.items()}
    with pytest.raises(exc, match=msg):
        F.scaled_dot_product_attention(*args, **kw)


def test_errors_cross_device():
    if not GPU:
        pytest.skip("needs a second device type")
    q = nbx.zeros(1, 2, 3, 8)
    with pytest.raises(RuntimeError, match="same device"):
        F.scaled_dot_product_attention(q, q.cuda(), q)


def test_cost():
    """The declared cost: 4*B*H*L*S*D flops (visible pairs under a causal mask), bytes of q, k, v, mask, out."""
    q, k = nbx.empty(2, 8, 100, 64, dtype=nbx.bfloat16), nbx.empty(2, 2, 300, 64, dtype=nbx.bfloat16)
    c = REC.cost(q, k, k, enable_gqa=True)
    assert c.flops == 4 * 2 * 8 * 100 * 300 * 64
    assert c.bytes_read == (q.numel() + 2 * k.numel()) * 2 and c.bytes_written == q.numel() * 2
    c = REC.cost(q, k, k, attn_mask=causal_lower_right(100, 300), enable_gqa=True)
    assert c.flops == 2 * 2 * 8 * causal_pairs(100, 300, 200) * 128
    assert causal_pairs(4, 4, 0) == 10 and causal_pairs(5, 3, -2) == 0 + 0 + 1 + 2 + 3
    assert causal_pairs(3, 5, 2) == 3 + 4 + 5
    qq = nbx.empty(1, 4, 4096, 128, dtype=nbx.bfloat16)
    assert REC.cost(qq, qq, qq, is_causal=True).flops == 2 * 4 * (4096 * 4097 // 2) * 256
    m = nbx.empty(100, 300, dtype=nbx.bool)
    assert REC.cost(q, k, k, attn_mask=m, enable_gqa=True).bytes_read == (q.numel() + 2 * k.numel()) * 2 + m.numel()


def test_dropout_refused(device):
    q = dev(np.zeros((1, 1, 2, 8), np.float32), device)
    with pytest.raises(NotImplementedError, match=re.escape("dropout_p=0.5")):
        F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)


def test_oracle_is_definition():
    """The oracle itself against a hand computation (softmax of scaled scores times values)."""
    q = np.array([[1.0, 0.0]])
    k = np.array([[1.0, 0.0], [0.0, 1.0]])
    v = np.array([[2.0, 0.0], [0.0, 4.0]])
    w = np.exp(np.array([1.0, 0.0]) / math.sqrt(2))
    w /= w.sum()
    np.testing.assert_allclose(sdpa_oracle(q, k, v), (w[:, None] * v).sum(0)[None], rtol=1e-15)


def _tma_runs(device) -> bool:
    from nbxtensor.runtime.launcher import interpreting
    if device == "cpu":
        return interpreting()
    return nbx.cuda.get_device_capability(nbx.device(device).index or 0)[0] >= 9


@pytest.mark.parametrize("E,causal,ratio", [(64, False, 1), (80, True, 4), (128, True, 1)] if QUICK else
                         [(64, False, 1), (64, True, 8), (80, True, 4), (96, False, 1), (128, True, 1),
                          (128, False, 4), (256, True, 1)])
def test_tensor_descriptor_kernel(E, causal, ratio, device):
    """The Hopper path (keys and values through tensor descriptors, zero-filled past S and E) against the oracle;
    runs under the interpreter and on GPUs of compute capability >= 9."""
    if not _tma_runs(device):
        pytest.skip("tensor descriptors run under the interpreter or on sm90+")
    from nbxtensor.ops.attention import launch_attention, tma_ok
    dt = T.bfloat16
    rng = np.random.default_rng(E + ratio)
    lens = _lens(device, dt, E)
    L, S = lens[0], lens[-1]
    q, k, v = draw(rng, (2, 8, L, E), dt), draw(rng, (2, 8 // ratio, S, E), dt), draw(rng, (2, 8 // ratio, S, E), dt)
    tq, tk, tv = dev(q, device), dev(k, device), dev(v, device)
    assert tma_ok(tk, tv)
    out = nbx.empty(2, 8, L, E, dtype=nbx.bfloat16, device=device)
    launch_attention(tq, tk, tv, None, out, scale=1 / math.sqrt(E), causal=causal, causal_off=S - L if causal else 0,
                     group_k=ratio, group_v=ratio, tma=True)
    ref, mag = sdpa_oracle(q, k, v, None, causal, None, ratio > 1, causal_offset=S - L if causal else 0,
                           with_magnitude=True)
    tol = attention_tolerance(dt, E)
    check_close(out, ref, tol.rtol, tol.atol, mag, what=f"tma E={E} causal={causal} ratio={ratio}")


def test_tma_rules():
    """Tensor descriptors need 16-byte aligned bases and strides and a unit head-dim stride."""
    from nbxtensor.ops.attention import tma_ok
    a = nbx.empty(1, 2, 16, 64, dtype=nbx.bfloat16)
    assert tma_ok(a, a)
    assert not tma_ok(nbx.empty(1, 2, 16, 127, dtype=nbx.bfloat16), a)  # rows of 254 bytes
    assert not tma_ok(a.transpose(2, 3), a)
    assert not tma_ok(nbx.empty(1, 2, 16, 64), a)  # float32: the pointer kernel
    assert not tma_ok(a[:, :, :, 1:], a)  # a base 2 bytes past alignment


def _captured_meta(monkeypatch):
    """Record the meta of every attention-kernel launch while still running it."""
    import nbxtensor.ops.attention as A
    metas = []
    real = A.launch

    def spy(kernel, grid, *args, **meta):
        metas.append(meta)
        return real(kernel, grid, *args, **meta)
    monkeypatch.setattr(A, "launch", spy)
    return metas


@pytest.mark.parametrize("E,causal,ratio,Lk,Sk,bm", [(64, False, 8, 1, 2, None), (128, True, 1, 2, 2, None),
                                                      (64, True, 1, 3, 1, None), (128, False, 1, 2, 2, 128),
                                                      (128, True, 4, 3, 2, 128)]
                         + ([] if QUICK else [(80, True, 4, 1, 2, None), (64, False, 1, 2, 3, None),
                                              (96, False, 2, 1, 3, 128), (128, True, 1, 1, 1, 128)]))
def test_warp_specialized_kernel(E, causal, ratio, Lk, Sk, bm, device, monkeypatch):
    """The warp-specialized variant (one key loop with the diagonal and bounds masks on every tile, the query
    loaded and the output stored through descriptors): query and key lengths that are and are not multiples of the
    tiles, lower-right causal offsets of both signs (L > S: the first rows see no key and give 0), GQA, and 128-row
    query tiles (``bm``), which Triton splits between two consumer warp groups: with them the variant computed wrong
    rows on the H200 while it stored through pointers. The launch is checked to have taken the variant where
    :func:`ws_verified` holds (everywhere under the interpreter), the plain kernel elsewhere; the output is right
    in both cases."""
    if not _tma_runs(device):
        pytest.skip("tensor descriptors run under the interpreter or on sm90+")
    if bm and device == "cpu" and QUICK:
        pytest.skip("128-row tiles under the interpreter: slow; the quick matrix keeps the table's tiles")
    from nbxtensor.ops.attention import launch_attention, ws_verified
    from nbxtensor.runtime.configs import launch_config, override
    dt = T.bfloat16
    bd = max(16, 1 << (E - 1).bit_length())  # the head dim padded, as the op asks the table
    cfg = launch_config("sdpa_fwd", nbx.device(device), dtypes=(dt,), head_dim=bd, q_len=64,
                        causal=2 if causal else 1)
    # the tiles pinned: the launch's rule follows its own query length, which may pass the 64 asked here
    tiles = dict(BLOCK_M=bm, BLOCK_N=128) if bm else dict(BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"])
    block_m, block_n = tiles["BLOCK_M"], tiles["BLOCK_N"]
    L = block_m * Lk + (0 if causal else 3)
    S = block_n * Sk + (1 if Lk == 1 else 0)  # some S a multiple of BLOCK_N (EVEN_S), some not
    rng = np.random.default_rng(E * 7 + ratio + Lk)
    q, k, v = draw(rng, (1, 8, L, E), dt), draw(rng, (1, 8 // ratio, S, E), dt), draw(rng, (1, 8 // ratio, S, E), dt)
    out = nbx.full((1, 8, L, E), float("nan"), dtype=nbx.bfloat16, device=device)  # a row never stored stays NaN
    off = S - L if causal else 0
    metas = _captured_meta(monkeypatch)
    with override("sdpa_fwd", WARP_SPEC=True, ws_warps=4, ws_stages=2, **tiles), \
            warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always", RuntimeWarning)  # "not verified" or "failed": the plain kernel, checked below
        launch_attention(dev(q, device), dev(k, device), dev(v, device), None, out, scale=1 / math.sqrt(E),
                         causal=causal, causal_off=off, group_k=ratio, group_v=ratio, tma=True)
    ran = bool(metas) and all(m.get("WARP_SPEC") for m in metas)
    # A compile failure of the variant is the op's documented fallback (a warning, the plain kernel): accepted except
    # at the sm90 table's own setting (128 x 128 tiles, head dim 128, no causal mask) and under the interpreter.
    failed = any("warp-specialized kernel failed" in str(w.message) for w in warned)
    must_run = device == "cpu" or (bm == 128 and bd == 128 and not causal)
    if device == "cpu" or ws_verified(block_m, block_n, bd, bd, causal):
        assert ran or (failed and not must_run), "the warp-specialized variant did not run"
        assert all(m["EVEN_S"] == (S % block_n == 0) and m["BLOCK_M"] == block_m for m in metas)
    else:  # tiles where the variant computed wrong rows on the H200 (Triton 3.6): the plain kernel runs
        assert metas and not any(m.get("WARP_SPEC") for m in metas)
    ref, mag = sdpa_oracle(q, k, v, None, causal, None, ratio > 1, causal_offset=off, with_magnitude=True)
    tol = attention_tolerance(dt, E)
    check_close(out, ref, tol.rtol, tol.atol, mag,
                what=f"warp-specialized E={E} causal={causal} L={L} S={S} BLOCK_M={block_m}")
    if causal and off < 0:
        assert np.all(host(out)[:, :, :-off] == 0)


@pytest.mark.parametrize("E,ratio,Lk,Sk,dL,bm", [(64, 1, 3, 3, 0, None), (128, 4, 2, 3, 5, 128),
                                                 (128, 1, 3, 2, -7, 128)]
                         + ([] if QUICK else [(96, 2, 2, 2, 1, None), (128, 8, 4, 4, 0, 128), (128, 1, 1, 1, 0, 128)]))
def test_causal_split(E, ratio, Lk, Sk, dL, bm, device, monkeypatch):
    """The causal split (the table's ``"CAUSAL_SPLIT"``): the warp-specialized variant over the keys every row
    of a query tile sees, with no mask (where it is verified on the H200), its float32 partials and log-sum-exp
    to a workspace, then the plain kernel over the diagonal tiles from that state. Against the oracle: lower-right
    offsets of both signs (rows that see no key give 0, tiles whose unmasked part is empty), L and S not multiples
    of the tiles, GQA. Both parts are checked to have run, the first as the variant
    (on GPUs at the 128 x 128 tiles of the sm90 rule, where a compile failure is not accepted)."""
    if not _tma_runs(device):
        pytest.skip("tensor descriptors run under the interpreter or on sm90+")
    if bm and device == "cpu" and QUICK:
        pytest.skip("128-row tiles under the interpreter: slow; the quick matrix keeps the table's tiles")
    import nbxtensor.ops.attention as A
    from nbxtensor.ops.attention import launch_attention
    from nbxtensor.runtime.configs import launch_config, override
    # what the op remembers of other tests' launches in this process (a compile failure, a warned unverified
    # setting) is not this test's: it starts from none
    monkeypatch.setattr(A, "_WS_BROKEN", set())
    monkeypatch.setattr(A, "_TMA_BROKEN", set())
    dt = T.bfloat16
    bd = max(16, 1 << (E - 1).bit_length())
    cfg = launch_config("sdpa_fwd", nbx.device(device), dtypes=(dt,), head_dim=bd, q_len=64, causal=2)
    if bm:
        tiles = dict(BLOCK_M=bm, BLOCK_N=128)
    elif device == "cpu":  # the interpreter's own (small) tiles
        tiles = dict(BLOCK_M=cfg["BLOCK_M"], BLOCK_N=cfg["BLOCK_N"])
    else:  # 64-row tiles: verified at every head dim (ws_verified)
        tiles = dict(BLOCK_M=64, BLOCK_N=64)
    L, S = tiles["BLOCK_M"] * Lk + max(dL, 0), tiles["BLOCK_N"] * Sk + max(-dL, 0)
    rng = np.random.default_rng(E + 31 * ratio + Lk)
    q, k, v = draw(rng, (2, 8, L, E), dt), draw(rng, (2, 8 // ratio, S, E), dt), draw(rng, (2, 8 // ratio, S, E), dt)
    out = nbx.full((2, 8, L, E), float("nan"), dtype=nbx.bfloat16, device=device)
    off = S - L
    metas = _captured_meta(monkeypatch)
    with override("sdpa_fwd", WARP_SPEC=True, ws_warps=4, ws_stages=2, CAUSAL_SPLIT=True, **tiles), \
            warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no fallback: both parts must run
        launch_attention(dev(q, device), dev(k, device), dev(v, device), None, out, scale=1 / math.sqrt(E),
                         causal=True, causal_off=off, group_k=ratio, group_v=ratio, tma=True)
    assert [m.get("PART") for m in metas] == [1, 2], metas
    assert metas[0]["WARP_SPEC"] and not metas[1].get("WARP_SPEC")
    ref, mag = sdpa_oracle(q, k, v, None, True, None, ratio > 1, causal_offset=off, with_magnitude=True)
    tol = attention_tolerance(dt, E)
    check_close(out, ref, tol.rtol, tol.atol, mag, what=f"causal split E={E} L={L} S={S} BLOCK_M={tiles['BLOCK_M']}")
    if off < 0:
        assert np.all(host(out)[:, :, :-off] == 0)


def test_causal_split_not_disabled_by_the_unverified_variant(monkeypatch):
    """The op remembers per launch key that the warp-specialized variant is not verified (causal, 128-row tiles)
    or failed; the causal split at the same tiles is another variant with a key of its own, so it still runs after
    that warning (the GPU tier ran the two tests in one worker and the split silently took the plain kernel)."""
    import nbxtensor.ops.attention as A
    from nbxtensor.runtime.configs import override
    monkeypatch.setattr(A, "_WS_BROKEN", set())
    monkeypatch.setattr(A, "interpreting", lambda: False)  # GPU rules for ws_verified, on whatever runs the kernel
    rng = np.random.default_rng(3)
    q = dev(draw(rng, (1, 1, 16, 128), T.bfloat16), "cpu")  # head dim 128: the split's verified tiles
    out = nbx.empty(1, 1, 16, 128, dtype=nbx.bfloat16)
    seen = []
    monkeypatch.setattr(A, "launch", lambda kernel, grid, *args, **meta: seen.append(meta.get("PART")))
    tiles = dict(BLOCK_M=128, BLOCK_N=128, ws_warps=4, ws_stages=2, TMA=True, WARP_SPEC=True)
    with override("sdpa_fwd", **tiles), warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always", RuntimeWarning)
        A.launch_attention(q, q, q, None, out, scale=0.25, causal=True, causal_off=0, group_k=1, group_v=1, tma=True)
    assert any("not verified" in str(w.message) for w in warned) and seen == [None] and len(A._WS_BROKEN) == 1
    seen.clear()
    with override("sdpa_fwd", CAUSAL_SPLIT=True, **tiles):
        A.launch_attention(q, q, q, None, out, scale=0.25, causal=True, causal_off=0, group_k=1, group_v=1, tma=True)
    assert seen == [1, 2]


def test_causal_split_cost(monkeypatch):
    """The split's float32 partials are declared where the table takes the split: workspace ``Z*H*Lp*(Ev+1)*4``
    bytes (query rows padded to whole tiles), written once and read once; none without the split, without the
    causal mask, with a tensor mask, or for one query row."""
    from nbxtensor.ops import attention as A
    from nbxtensor.runtime import configs
    q, m = nbx.empty(2, 4, 200, 128, dtype=nbx.bfloat16), nbx.ones(200, 200, dtype=nbx.bool)
    monkeypatch.setattr(A, "interpreting", lambda: True)  # the cpu device runs the kernels, as under the tier
    monkeypatch.setattr(configs, "arch_of", lambda device: "sm90")
    ws = 8 * 256 * 129 * 4
    with configs.override("sdpa_fwd", WARP_SPEC=True, TMA=True, CAUSAL_SPLIT=True, BLOCK_M=128):
        c, plain = REC.cost(q, q, q, is_causal=True), REC.cost(q, q, q, is_causal=False)
        assert c.workspace_bytes == ws and plain.workspace_bytes == 0
        assert c.bytes_read == plain.bytes_read + ws and c.bytes_written == plain.bytes_written + ws
        assert REC.cost(q, q, q, attn_mask=m, is_causal=True).workspace_bytes == 0
        assert A.split_workspace_bytes(q.device, q.dtype, 8, 1, 128, 128) == 0
    with configs.override("sdpa_fwd", WARP_SPEC=True, TMA=True, CAUSAL_SPLIT=False, BLOCK_M=128):
        assert REC.cost(q, q, q, is_causal=True).workspace_bytes == 0


def test_ws_verified_region():
    """The tiles where the warp-specialized variant runs on GPUs: 64-row tiles, and 128 x 128 tiles with head dim
    128 without the causal mask; not a 64-wide head dim, 64-key tiles under 128-row ones, or causal 128-row tiles
    (wrong rows on the H200 with Triton 3.6)."""
    from nbxtensor.ops.attention import ws_verified
    assert ws_verified(64, 64, 128, 128, True) and ws_verified(64, 128, 64, 64, False)
    assert ws_verified(128, 128, 128, 128, False)
    assert not ws_verified(128, 128, 128, 128, True)
    assert not ws_verified(128, 64, 128, 128, False) and not ws_verified(128, 128, 64, 64, False)
    assert ws_verified(64, 64, 128, 128, False, stages=2) and not ws_verified(64, 64, 128, 128, False, stages=3)


def test_sm90_table_takes_the_variant_only_where_verified(monkeypatch):
    """sm90.json selects the warp-specialized variant for bf16 prefill with head dim 128 (padded) and no causal
    mask (sweep_attention on the H200, session 9: 552/561 TFLOP/s at 4k/16k against the plain kernel's 476/504),
    and the causal split for bf16 causal prefill past 8192 query rows, at tiles :func:`ws_verified` accepts;
    shorter causal prefill, float16 and other head dims keep the plain kernel's rule."""
    from nbxtensor.ops.attention import ws_verified
    from nbxtensor.runtime import configs
    monkeypatch.setattr(configs, "arch_of", lambda device: "sm90")
    dev_ = nbx.device("cpu")

    def rule(dt, hd, causal, q_len=4096):
        return configs.launch_config("sdpa_fwd", dev_, dtypes=(dt,), head_dim=hd, q_len=q_len,
                                     causal=2 if causal else 1)
    ws = rule(T.bfloat16, 128, False)
    assert ws.get("WARP_SPEC") and ws["ws_warps"] == 4 and ws["ws_stages"] == 2
    assert ws_verified(ws["BLOCK_M"], ws["BLOCK_N"], 128, 128, False)
    for args in ((T.bfloat16, 128, True), (T.float16, 128, False), (T.bfloat16, 64, False), (T.bfloat16, 256, False),
                 (T.bfloat16, 128, False, 64), (T.bfloat16, 128, True, 8192), (T.float16, 128, True, 16384)):
        assert not rule(*args).get("WARP_SPEC") and not rule(*args).get("CAUSAL_SPLIT"), args
    # causal prefill past 8192 query rows takes the causal split (session 10, sweep_attention --rounds 2, batch 2:
    # 16k 501/487 TFLOP/s against 478/476; at 4k the split lost, 363/347 against 407/400); its variant runs without
    # the mask, so its tiles need only be verified for that
    split = rule(T.bfloat16, 128, True, 8193)
    assert split.get("WARP_SPEC") and split.get("CAUSAL_SPLIT") and split["ws_stages"] == 2
    assert ws_verified(split["BLOCK_M"], split["BLOCK_N"], 128, 128, False, split["ws_stages"])
    assert not rule(T.bfloat16, 128, False, 16384).get("CAUSAL_SPLIT")


def test_warp_specialized_needs_descriptors_and_no_mask(device, monkeypatch):
    """With a tensor mask (or without descriptors) the table's WARP_SPEC is ignored: the plain kernel runs."""
    if not _tma_runs(device):
        pytest.skip("tensor descriptors run under the interpreter or on sm90+")
    from nbxtensor.ops.attention import launch_attention
    from nbxtensor.runtime.configs import override
    dt = T.bfloat16
    rng = np.random.default_rng(17)
    q, k, v = draw(rng, (1, 2, 9, 64), dt), draw(rng, (1, 2, 21, 64), dt), draw(rng, (1, 2, 21, 64), dt)
    keep = rng.random((1, 2, 9, 21)) < 0.7
    out = nbx.empty(1, 2, 9, 64, dtype=nbx.bfloat16, device=device)
    metas = _captured_meta(monkeypatch)
    with override("sdpa_fwd", WARP_SPEC=True):
        launch_attention(dev(q, device), dev(k, device), dev(v, device), dev(keep, device), out, scale=0.125,
                         causal=False, causal_off=0, group_k=1, group_v=1, tma=True)
        launch_attention(dev(q, device), dev(k, device), dev(v, device), None, out, scale=0.125,
                         causal=False, causal_off=0, group_k=1, group_v=1, tma=False)
    assert len(metas) == 2 and not any(m.get("WARP_SPEC") for m in metas)
    assert "ws_warps" not in metas[0] and "ws_stages" not in metas[0]


@pytest.mark.skipif(INTERPRET or not HAVE_TRITON, reason="compiles with Triton's real compiler for sm_90")
def test_sm90_key_loop_code(monkeypatch):
    """The code the H200 runs (compiled ahead of time for sm_90, no GPU): the scores' exponential is the single
    ``ex2.approx.ftz.f32`` (Triton's IEEE ``ex2.approx.f32`` costs ptxas's range fix-up: a compare and two
    predicated multiplies per score) except the per-row rescale factors; ``FAST_EXP: false`` brings the IEEE form
    back; the warp-specialized variant really is specialized (the producer group's warps are added)."""
    from test_ptx_audit import captured, compile_sm90

    from nbxtensor.runtime.configs import override
    F = nbx.nn.functional
    q = nbx.zeros(1, 2, 256, 128, dtype=nbx.bfloat16)

    with captured(monkeypatch) as got:  # launches recorded, not run; patched once for the whole test
        pass

    def ptx_and_warps(causal, **settings):
        got.clear()
        with override("sdpa_fwd", TMA=True, **settings):
            F.scaled_dot_product_attention(q, q, q, is_causal=causal)
        (kernel, args, meta), = [g for g in got if g[0].__name__ == "_attn_fwd_kernel"]
        c = compile_sm90(kernel, args, meta)
        return c.asm["ptx"], c.metadata.num_warps, meta

    for causal in (False, True):
        ptx, warps, meta = ptx_and_warps(causal, WARP_SPEC=False)
        fast, ieee = len(re.findall(r"ex2\.approx\.ftz\.f32", ptx)), len(re.findall(r"ex2\.approx\.f32", ptx))
        scores_per_thread = meta["BLOCK_M"] * meta["BLOCK_N"] // (32 * meta["num_warps"])
        assert fast >= 2 * scores_per_thread, (causal, fast)  # both key loops, one per score
        assert ieee < scores_per_thread // 4, (causal, ieee)  # the per-row factors (a few per thread) only
    ptx, _, _ = ptx_and_warps(False, WARP_SPEC=False, FAST_EXP=False)
    assert "ex2.approx.ftz.f32" not in ptx
    for causal, bm in ((False, 128), (True, 64)):  # the verified tiles (ws_verified): causal takes 64-row ones
        _, warps, meta = ptx_and_warps(causal, WARP_SPEC=True, ws_warps=4, ws_stages=2, BLOCK_M=bm, BLOCK_N=128)
        assert meta["WARP_SPEC"] and meta["num_warps"] == 4 and warps > 4, (causal, warps)


def test_a_decode_step_takes_the_short_host_path_first(monkeypatch):
    """F.scaled_dot_product_attention offers every call to decode_attention.sdpa_decode first; what it declines
    (or None off the Triton devices) goes the general way, with the same result."""
    import nbxtensor as nbx
    from nbxtensor.ops import attention as A
    from nbxtensor.ops.decode_attention import sdpa_decode
    seen = []

    def spy(*a):
        r = sdpa_decode(*a)
        seen.append(r is not None)
        return r

    monkeypatch.setattr(A, "_sdpa_decode", spy)
    rng = np.random.default_rng(3)
    q, k, v = (nbx.tensor(rng.standard_normal(s).astype(np.float32)) for s in ((2, 4, 1, 16), (2, 2, 9, 16),
                                                                               (2, 2, 9, 16)))
    got = nbx.nn.functional.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    assert len(seen) == 1
    kk, vv = (np.repeat(t.numpy().astype(np.float64), 2, axis=1) for t in (k, v))
    s = q.numpy().astype(np.float64) @ kk.transpose(0, 1, 3, 2) / 4.0
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ vv
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    nbx.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=nbx.ones(1, 9, dtype=nbx.bool),
                                                   enable_gqa=True)
    assert len(seen) == 2 and seen[1] is False              # a mask: declined, the general path ran
