"""Normalisation layers (src/nbxtensor/ops/norm.py): layer_norm, rms_norm, group_norm and batch_norm against their
float64 oracles over dtypes x layouts x parameter choices (affine or not, float32 parameters with half inputs,
rows that fit one tile and rows that take the looped path), the rows the issue names, and error inputs from the
records.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

import nbxtensor as nbx
import reduce_harness as H
from nbxtensor.dtypes import table as T
from nbxtensor.ops import registry

FAMILY = "norm"
RECS = H.records(FAMILY)
F = nbx.nn.functional
LAYOUTS = ["contiguous", "transposed", "sliced", "expanded", "permuted3d", "zero_rows", "long_rows", "odd_big"]
if H.QUICK or H.GPU:
    LAYOUTS.remove("odd_big")


def _seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def _input_shape(name, layout, device):
    tile = H.block(device, "norm_rows", "BLOCK_N")
    if layout == "long_rows":
        return {"group_norm": (2, 4, tile + 3), "batch_norm": (2, 3, tile + 3)}.get(name, (3, tile * 2 + 5))
    if layout == "odd_big":
        return (1823, 781) if name not in ("group_norm", "batch_norm") else (1823, 8, 97)
    if layout == "zero_rows":
        return (0, 4) if name not in ("group_norm", "batch_norm") else (0, 4, 3)
    if layout == "permuted3d":
        return (3, 4, 5) if H.QUICK else (5, 6, 7)
    if name in ("group_norm", "batch_norm"):
        return (2, 4, 6) if layout != "expanded" else (3, 4, 6)
    return (6, 5) if H.QUICK else (13, 11)


def _param(rng, shape, dt):
    return H.values("normal", dt, shape, rng)


def _build(name, x_shape, dt, pdt, affine, rng, variant):
    """(extra positional args as host arrays, kwargs as host arrays) for op ``name``."""
    if name in ("layer_norm", "rms_norm"):
        ns = list(x_shape[-2:]) if variant == "2d" and len(x_shape) >= 2 else [x_shape[-1]]
        kw = {}
        if affine:
            kw["weight"] = _param(rng, tuple(ns), pdt)
            if name == "layer_norm":
                kw["bias"] = _param(rng, tuple(ns), pdt)
        if variant == "eps":
            kw["eps"] = 1e-2
        if name == "rms_norm" and variant == "eps_none":
            kw["eps"] = None
        return [ns], kw
    c = x_shape[1]
    if name == "group_norm":
        kw = {"eps": 1e-3} if variant == "eps" else {}
        if affine:
            kw.update(weight=_param(rng, (c,), pdt), bias=_param(rng, (c,), pdt))
        return [2 if c % 2 == 0 else 1], kw
    rm = _param(rng, (c,), pdt)
    rv = H.values("near_one", pdt, (c,), rng)
    kw = {"eps": 1e-3} if variant == "eps" else {}
    if affine:
        kw.update(weight=_param(rng, (c,), pdt), bias=_param(rng, (c,), pdt))
    return [rm, rv], kw


def _cases():
    out = []
    variants = {"layer_norm": [None, "2d", "eps"], "rms_norm": [None, "eps_none", "2d"], "group_norm": [None, "eps"],
                "batch_norm": [None, "eps"]}
    for rec in RECS:
        k = 0
        for dt in H.test_dtypes(rec):
            for layout in LAYOUTS:
                vs = variants[rec.name]
                pdt = T.float32 if (dt in (T.float16, T.bfloat16) and k % 2) else dt
                out.append((rec.name, dt.name, layout, pdt.name, k % 3 != 2, vs[k % len(vs)]))
                k += 1
    return out


CASES = _cases()


def _to(v, device):
    return H.make(v, "contiguous", device) if isinstance(v, np.ndarray) else v


def _reduced(name, x_shape, pos):
    if name in ("layer_norm", "rms_norm"):
        return int(np.prod(pos[0]))
    if name == "group_norm":
        return int(np.prod(x_shape[1:])) // pos[0]
    return 1


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}-w{c[3]}-{'affine' if c[4] else 'plain'}-{c[5]}"
                                             for c in CASES])
def test_against_oracle(case, device):
    name, dtn, layout, pdtn, affine, variant = case
    rec = registry.get(name)
    dt, pdt = T.dtype_from(dtn), T.dtype_from(pdtn)
    rng = np.random.default_rng(_seed(case))
    shape = _input_shape(name, layout, device)
    host_in = H.values("normal", dt, shape, rng)
    base = "contiguous" if layout in ("long_rows", "odd_big", "zero_rows") else layout
    if layout == "expanded":
        host_in = np.broadcast_to(host_in[:1], shape)
    if base == "transposed" and host_in.ndim != 2:
        base = "contiguous"
    x = H.make(host_in, base, device)
    pos, kw = _build(name, shape, dt, pdt, affine, rng, variant)
    res = rec.extra["function"](x, *[_to(v, device) for v in pos], **{k: _to(v, device) for k, v in kw.items()})
    assert res.dtype is dt and tuple(res.shape) == shape
    with np.errstate(all="ignore"):
        exp = rec.oracle(host_in, *pos, **kw)
    H.assert_close(H.host(res), H.expected_as(exp, dt), dt, reduced=_reduced(name, shape, pos),
                   what=f"{name}[{dtn}, {layout}, params {pdtn}, affine={affine}, {variant}]")


ERRORS = H.error_cases(FAMILY)


@pytest.mark.parametrize("rec,err", ERRORS, ids=[f"{r.name}-{e[0]}" for r, e in ERRORS])
def test_error_inputs(rec, err, device):
    label, args, kwargs, exc, match = err[:5]
    with pytest.raises(exc, match=match):
        rec.extra["function"](*[H.materialize(v, device) for v in args],
                              **{k: H.materialize(v, device) for k, v in kwargs.items()})


@pytest.mark.parametrize("long_row", [False, True])
def test_layer_norm_large_offset_rows(long_row, device):
    """Statistics by a stable method: E[x^2] - E[x]^2 would cancel to garbage here in float32."""
    pad = H.block(device, "norm_rows", "BLOCK_N") + 4 if long_row else 0
    row = np.array([40000.0, 40001.0, 40002.0, 40003.0] * (1 + pad // 4), dtype=np.float32)
    y = H.host(F.layer_norm(nbx.from_numpy(row[None]).to(device), [row.size]))[0]
    d = row.astype(np.float64) - row.mean(dtype=np.float64)
    np.testing.assert_allclose(y, d / np.sqrt((d * d).mean() + 1e-5), rtol=1e-5, atol=1e-5)
    if not long_row:
        np.testing.assert_allclose(y, [-1.3416, -0.4472, 0.4472, 1.3416], atol=1e-4)


def test_rms_norm_half_squares_beyond_half_range(device):
    x = nbx.tensor([300.0, -300.0, 100.0, 0.0], dtype=nbx.float16, device=device)
    y = F.rms_norm(x, [4])
    assert y.dtype is nbx.float16
    np.testing.assert_allclose(H.host(y).astype(np.float64), [1.3770, -1.3770, 0.4587, 0.0], atol=2e-3)


def test_constant_rows_and_nan(device):
    x = nbx.tensor([[2.0, 2.0, 2.0], [1.0, float("nan"), 0.0]], device=device)
    y = H.host(F.layer_norm(x, [3]))
    assert (y[0] == 0).all() and np.isnan(y[1]).all()
    assert np.isnan(H.host(F.rms_norm(x, [3]))[1]).all()


def test_group_and_batch_norm_semantics(device):
    x = nbx.arange(24, dtype=nbx.float32, device=device).view(2, 4, 3)
    y = H.host(F.group_norm(x, 2))
    g = np.arange(24, dtype=np.float64).reshape(2, 2, 6)
    e = ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + 1e-5)).reshape(2, 4, 3)
    np.testing.assert_allclose(y, e, rtol=1e-5, atol=1e-5)
    b = F.batch_norm(nbx.ones(2, 3, 4, device=device), nbx.zeros(3, device=device), nbx.full((3,), 4.0, device=device),
                     weight=nbx.full((3,), 2.0, device=device), bias=nbx.ones(3, device=device))
    np.testing.assert_allclose(H.host(b), np.full((2, 3, 4), 2.0), rtol=1e-5)
    assert F.batch_norm(nbx.ones(2, 3, dtype=nbx.float16, device=device), nbx.zeros(3, device=device),
                        nbx.ones(3, device=device)).dtype is nbx.float16
    assert tuple(F.group_norm(nbx.ones(2, 4, 0, device=device), 2).shape) == (2, 4, 0)


# The settings benchmarks/sweep_reduce.py tries on the H200, as config overrides: results must not change. With
# programs_per_sm the grid is persistent (4 SMs under the interpreter): programs loop over row blocks and, for
# layer_norm/rms_norm rows that fit one tile, load weight and bias once.
_SWEEP_SETTINGS = [dict(programs_per_sm=1, LOOP_STAGES=3, EVICT="evict_last", EVICT2="evict_first"),
                   dict(BLOCK_M=1, programs_per_sm=2), dict(LOOP_STAGES=2, EVICT2="evict_first"),
                   dict(HOIST_PARAMS=True)]


@pytest.mark.parametrize("settings", _SWEEP_SETTINGS, ids=[str(i) for i in range(len(_SWEEP_SETTINGS))])
def test_sweep_settings_keep_results(settings, device):
    from nbxtensor.runtime.configs import override
    tile = H.block(device, "norm_rows", "BLOCK_N")
    rng = np.random.default_rng(9)
    with override("norm_rows", **settings):
        for n in (tile - 3, tile * 2 + 3):  # one tile, looped
            a = rng.standard_normal((11, n)).astype(np.float32) * 3 + 5.0
            w, b = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
            x, wt, bt = (nbx.from_numpy(v).to(device) for v in (a, w, b))
            for name, args in (("layer_norm", (wt, bt)), ("rms_norm", (wt,)), ("layer_norm", ())):
                rec = registry.get(name)
                res = rec.extra["function"](x, [n], *args)
                exp = rec.oracle(a, [n], *[H.host(t) for t in args])
                H.assert_close(H.host(res), H.expected_as(exp, T.float32), T.float32, reduced=n,
                               what=f"{name}[{settings}, {n}, {len(args)} params]")
        g = rng.standard_normal((3, 4, tile // 2 + 1)).astype(np.float32)
        gw, gb = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
        res = F.group_norm(*(nbx.from_numpy(v).to(device) for v in (g,)), 2, nbx.from_numpy(gw).to(device),
                           nbx.from_numpy(gb).to(device))
        exp = registry.get("group_norm").oracle(g, 2, gw, gb)
        H.assert_close(H.host(res), H.expected_as(exp, T.float32), T.float32, reduced=g[0].size // 2,
                       what=f"group_norm[{settings}]")


def test_records_are_whole():
    for rec in RECS:
        assert rec.cpu and rec.triton and rec.oracle and rec.extra["errors"], rec.name
        assert not hasattr(nbx.Tensor, rec.name) and hasattr(F, rec.name)
    c = registry.get("layer_norm").cost(nbx.zeros(4, 8), [8], nbx.ones(8), nbx.zeros(8))
    assert c.bytes_read == 4 * 32 + 64 and c.bytes_written == 128


@pytest.mark.parametrize("one_tile", [True, False])
@pytest.mark.parametrize("rms", [False, True])
@pytest.mark.parametrize("xt,wt", [("*bf16", "*fp32"), ("*fp64", "*fp64")])
def test_kernels_compile_for_sm90(xt, wt, rms, one_tile):
    """The norm kernels compile for the H200 (sm90) here, without a GPU (Triton's LLVM and bundled ptxas)."""
    reason = H.aot_skip_reason()
    if reason:
        pytest.skip(reason)
    import triton.language as tl
    from nbxtensor.ops import norm as N
    acc = tl.float64 if xt == "*fp64" else tl.float32
    types = {"x_ptr": xt, "w_ptr": wt, "b_ptr": wt, "y_ptr": xt, "M": "i32", "N": "i32", "G": "i32", "CPG": "i32",
             "HW": "i32", "eps": "fp32", "NBLK": "i32"}
    loop = dict(LOOP_STAGES=None, ROW_STAGES=None, EVICT="", EVICT2="", HW_CVT=True)
    for grouped in ((False, True) if not one_tile and not rms else (False,)):
        H.compile_sm90(N._norm_rows_kernel, types, dict(RMS=rms, HAS_W=True, HAS_B=not rms, ONE_TILE=one_tile,
                                                        GROUPED=grouped, SHARED=False, ACC=acc, BLOCK_M=1,
                                                        BLOCK_N=8192, **loop), num_warps=16)
    # the sweep's settings: persistent grid with parameters loaded once and a pipelined row loop (one tile), or
    # pipelined column loops; eviction policies
    if xt != "*bf16":
        return
    tuned = dict(loop, LOOP_STAGES=3, ROW_STAGES=3 if one_tile else None, EVICT="evict_last", EVICT2="evict_first")
    H.compile_sm90(N._norm_rows_kernel, types, dict(RMS=rms, HAS_W=True, HAS_B=not rms, ONE_TILE=one_tile,
                                                    GROUPED=False, SHARED=one_tile, ACC=acc, BLOCK_M=2, BLOCK_N=4096,
                                                    **tuned), num_warps=8)
    if not rms and one_tile:
        types = {"x_ptr": xt, "rm_ptr": wt, "rv_ptr": wt, "w_ptr": wt, "b_ptr": wt, "y_ptr": xt, "M": "i32", "S": "i32",
                 "C": "i32", "eps": "fp32"}
        H.compile_sm90(N._batch_norm_kernel, types, dict(HAS_W=True, HAS_B=True, ACC=acc, BLOCK_M=4, BLOCK_S=1024))


def test_a_norm_signature_that_passed_its_checks_is_not_rechecked_but_others_are():
    from nbxtensor.ops import norm as N
    x, w, b = nbx.randn(2, 8), nbx.randn(8), nbx.randn(8)
    first = F.layer_norm(x, (8,), w, b).numpy().copy()
    n = len(N._ROWS_VALID)
    np.testing.assert_array_equal(F.layer_norm(x, [8], w, b).numpy(), first)    # a list: the same signature
    assert len(N._ROWS_VALID) == n
    np.testing.assert_array_equal(F.layer_norm(x.t().contiguous().t(), (8,), w, b).numpy(), first)
    with pytest.raises(TypeError, match="normalized_shape"):
        F.layer_norm(x, (8.0,), w, b)
    with pytest.raises(RuntimeError, match="Expected weight to be of same shape"):
        F.layer_norm(x, (8,), nbx.randn(4), b)
    with pytest.raises(RuntimeError, match="expected input with shape"):
        F.layer_norm(nbx.randn(2, 4), (8,), w, b)
    with pytest.raises(RuntimeError, match="weight must be a floating tensor"):
        F.rms_norm(x, (8,), nbx.ones(8, dtype=nbx.int32))
    one, w1 = nbx.randn(2, 1), nbx.randn(1)
    F.rms_norm(one, (1,), w1)                      # passes, and its signature is remembered ...
    with pytest.raises(TypeError, match="normalized_shape"):
        F.rms_norm(one, (True,), w1)               # ... but True is not 1 to the memo: refused as PyTorch does
