"""Reductions (src/nbxtensor/ops/reduction.py): every record of the family against its float64 oracle over dtypes x
layouts x dims x keepdim, special values, empty reductions and error inputs from the records, plus the
canonicalisation and the numerics the issue names.

Runs on the device under test (``NBX_TEST_DEVICE``); under ``NBX_TRITON_INTERPRET=1`` the cpu tensors go through
the Triton kernels (the interpreter tier; ``NBX_TEST_QUICK=1`` shrinks the matrix).
"""

from __future__ import annotations

import math
import os
import warnings
import zlib

import numpy as np
import pytest

import nbxtensor as nbx
import reduce_harness as H
from nbxtensor.dtypes import table as T
from nbxtensor.ops import registry
from nbxtensor.ops.reduction import canonical3, collapse_dims, reduce_dims

FAMILY = "reduction"
RECS = H.records(FAMILY)


def _dim_specs(rec, ndim: int) -> list:
    """The dim arguments a record is tested with for an input of ``ndim`` dims."""
    mode = rec.extra["dim_mode"]
    if ndim == 0:
        return [0] if mode in ("multi_required", "single") else [None, 0]
    pair = [(0, ndim - 1)] if ndim >= 2 else []
    return {"multi": [None, 0, -1] + pair, "multi_nokeep": [None, 0] + pair, "multi_required": [0, -1] + pair,
            "single": [0, -1] + ([1] if ndim == 3 else []), "single_or_none": [None, 0, -1]}[mode]


def _cases():
    out = []
    layouts = [la for la in H.layouts() + ["contig3d"] if not (H.SUBSAMPLE and la == "zero_reduced")]
    for rec in RECS:
        variants = list(rec.extra.get("variants", ({},)))
        dts = H.test_dtypes(rec)[: (3 if H.SUBSAMPLE else None)]
        k = 0
        for dt in dts:
            for layout in layouts:
                specs = _dim_specs(rec, H.ndim_for(layout))
                spec = specs[k % len(specs)]
                keep = rec.extra["dim_mode"] != "multi_nokeep" and k % 2 == 1
                out.append((rec.name, dt.name, layout, spec, keep, variants[k % len(variants)]))
                k += 1
        # every dim spec and keepdim on a few layouts in float32 (or the first dtype)
        dt = T.float32 if T.float32 in dts else dts[0]
        for layout in (["contiguous", "contig3d"] if H.SUBSAMPLE else
                       ["contiguous", "transposed", "sliced", "permuted3d", "contig3d", "expanded"]):
            for spec in _dim_specs(rec, H.ndim_for(layout)):
                for keep in ((False,) if rec.extra["dim_mode"] == "multi_nokeep" or (H.SUBSAMPLE and layout != "contiguous")
                             else (False, True)):
                    out.append((rec.name, dt.name, layout, spec, keep, {}))
        for j, v in enumerate(variants[1:]):
            for dt in [d for d in (T.float32, T.float16, T.float64) if d in dts][: (1 if H.SUBSAMPLE else 3)]:
                out.append((rec.name, dt.name, ("contiguous", "transposed", "permuted3d")[j % 3], -1, False, v))
    return out


def _id(case):
    name, dt, layout, spec, keep, v = case
    return f"{name}-{dt}-{layout}-dim{spec}-{'keep' if keep else 'nokeep'}" + (f"-{v}" if v else "")


CASES = _cases()


def _seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def _kwargs(rec, spec, keep, variant):
    kw = dict(variant)
    mode = rec.extra["dim_mode"]
    if spec is not None or mode == "multi_required":
        kw["dim"] = spec
    if mode != "multi_nokeep" and keep and not (spec is None and rec.extra.get("keepdim_needs_dim")):
        kw["keepdim"] = True
    return kw


def _reduced(shape, spec) -> int:
    dims = reduce_dims(spec, len(shape), "test")
    return math.prod(shape[d] for d in dims) if shape else 1


def _outputs(res):
    return list(res) if isinstance(res, tuple) else [res]


def _run_case(rec, dt, host_in, x, kw, what):
    fn = rec.extra["function"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fn(x, **kw)
        exp = rec.oracle(host_in, **kw)
    outs, exps = _outputs(res), (list(exp) if isinstance(exp, tuple) else [exp])
    assert len(outs) == len(exps), what
    spec = kw.get("dim")
    k = _reduced(host_in.shape, spec) if not isinstance(spec, bool) else host_in.size
    for o, e in zip(outs, exps):
        H.assert_close(H.host(o), H.expected_as(e, o.dtype), o.dtype, reduced=k, what=what)
    return res


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_against_oracle(case, device):
    name, dtn, layout, spec, keep, variant = case
    rec = registry.get(name)
    dt = T.dtype_from(dtn)
    base_layout = "contiguous" if layout == "contig3d" else layout
    shape = H.shape_for("permuted3d" if layout == "contig3d" else layout, device)
    rng = np.random.default_rng(_seed(case))
    host_in = H.values(rec.extra.get("domain", "normal"), dt, shape, rng)
    if layout == "expanded":
        host_in = np.broadcast_to(host_in[:1], shape)
    x = H.make(host_in, base_layout, device)
    kw = _kwargs(rec, spec, keep, variant)
    dims = reduce_dims(spec, len(shape), "test", allow_tuple=True)
    out_numel = math.prod(s for d, s in enumerate(shape) if d not in dims) if shape else 1
    if out_numel and any(shape[d] == 0 for d in dims):
        pytest.skip("empty reductions are covered by test_empty_reduction")
    if spec is None and rec.name in ("argmax", "argmin") and not host_in.size:
        pytest.skip("argmax of an empty tensor raises (error cases)")
    if spec is None and rec.name in ("max", "min") and not host_in.size:
        pytest.skip("max() of an empty tensor raises (error cases)")
    _run_case(rec, dt, host_in, x, kw, f"{name}[{dtn}, {layout}, {kw}]")


def _special_cases():
    out = []
    for rec in RECS:
        dts = [d for d in H.FLOATS if d in rec.extra["dtypes"]]
        if H.SUBSAMPLE:
            dts = [d for d in dts if d in (T.float32, T.bfloat16)]
        for dt in dts:
            for spec in _dim_specs(rec, 2)[: (2 if H.SUBSAMPLE else 3)]:
                for v in rec.extra.get("variants", ({},))[: (1 if H.SUBSAMPLE else 7)]:
                    out.append((rec.name, dt.name, spec, v))
    return out


SPECIAL_CASES = _special_cases()


@pytest.mark.parametrize("case", SPECIAL_CASES, ids=[f"{c[0]}-{c[1]}-dim{c[2]}-{c[3]}" for c in SPECIAL_CASES])
def test_special_values(case, device):
    """+-0, +-inf, NaN and subnormals mixed into random data: NaN propagation, inf arithmetic, arg-extrema."""
    name, dtn, spec, variant = case
    rec = registry.get(name)
    dt = T.dtype_from(dtn)
    shape = (5, 6) if H.QUICK else (13, 11)
    host_in = H.special_values(dt, shape, np.random.default_rng(_seed(case)), rec.extra.get("domain", "normal"))
    x = H.make(host_in, "contiguous", device)
    _run_case(rec, dt, host_in, x, _kwargs(rec, spec, False, variant), f"{name}[{dtn}, special, dim={spec}]")


@pytest.mark.parametrize("rec", RECS, ids=[r.name for r in RECS])
def test_empty_reduction(rec, device):
    """Reducing an empty dim gives PyTorch's identity (record field ``empty``) or raises."""
    x = nbx.zeros(0, 3, device=device)
    kw = {"dim": 0}
    fn = rec.extra["function"]
    empty = rec.extra["empty"]
    if isinstance(empty, type):
        with pytest.raises(empty):
            fn(x, **kw)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = fn(x, **kw)
    for o in _outputs(res):
        assert tuple(o.shape) == (3,)
        got = H.host(o).astype(np.float64)
        np.testing.assert_array_equal(got, np.full(3, empty))


ERRORS = H.error_cases(FAMILY)


@pytest.mark.parametrize("rec,err", ERRORS, ids=[f"{r.name}-{e[0]}" for r, e in ERRORS])
def test_error_inputs(rec, err, device):
    label, args, kwargs, exc, match = err[:5]
    a = [H.materialize(v, device) for v in args]
    kw = {k: H.materialize(v, device) for k, v in kwargs.items()}
    with pytest.raises(exc, match=match):
        rec.extra["function"](*a, **kw)


def test_every_record_is_declared_whole():
    for rec in RECS:
        assert rec.cpu is not None and rec.triton is not None and rec.oracle is not None, rec.name
        assert "schema" in rec.extra and "empty" in rec.extra and rec.extra["errors"], rec.name
        c = rec.cost(nbx.zeros(4, 5), **({"dim": 1} if rec.extra["dim_mode"] != "multi_required" else {"dim": 1}))
        assert c.bytes_read == 4 * 5 * 4 and c.bytes_written > 0 and c.flops > 0, rec.name


# ---------------------------------------------------------------------------------------------------------
# Canonicalisation
# ---------------------------------------------------------------------------------------------------------
def test_canonical3_contiguous_and_strided():
    assert canonical3((4, 5, 6), (30, 6, 1), (False, True, False))[:2] == ((4, 5, 6), (30, 6, 1))
    assert canonical3((4, 5, 6), (30, 6, 1), (False, True, True))[:2] == ((4, 30, 1), (30, 1, 0))
    assert canonical3((4, 5, 6), (30, 6, 1), (True, True, False))[:2] == ((1, 20, 6), (0, 6, 1))
    # transposed: reducing logical dim 1 of x.t() is the strided case of memory (5, 4) reducing the outer dim
    assert canonical3((4, 5), (1, 4), (False, True))[:2] == ((1, 5, 4), (0, 4, 1))
    # expanded (stride 0) reduced dim: stride 0 sorts innermost, the kept dim becomes the rows
    assert canonical3((3, 7), (0, 1), (True, False))[:2] == ((7, 3, 1), (1, 0, 0))
    # size-1 dims vanish
    assert canonical3((1, 5, 1), (5, 1, 1), (False, True, False))[:2] == ((1, 5, 1), (0, 1, 0))


def test_canonical3_interleaved_needs_a_copy():
    assert canonical3((4, 5, 6), (30, 6, 1), (True, False, True)) is None
    assert collapse_dims((4, 5), (1, 4), (0, 1)) is None
    assert collapse_dims((4, 5), (5, 1), (0, 1)) == 1


def test_interleaved_layout_matches_oracle(device):
    a = np.random.default_rng(1).standard_normal((4, 5, 6)).astype(np.float32)
    x = nbx.from_numpy(a).to(device)
    np.testing.assert_allclose(H.host(x.sum(dim=(0, 2))), a.sum(axis=(0, 2)), rtol=1e-5)
    np.testing.assert_allclose(H.host(x.amax(dim=(0, 2), keepdim=True)), a.max(axis=(0, 2), keepdims=True))


# ---------------------------------------------------------------------------------------------------------
# Numerics and semantics the issue names
# ---------------------------------------------------------------------------------------------------------
def test_float16_sum_accumulates_in_float32(device):
    # [0.01] * 65536 in float16: the exact sum of the float16 values is 655.0 (PyTorch CPU prints 655.5 from its
    # summation order: both are within one float16 ulp). A float16 accumulator stalls near 32.
    x = nbx.full((65536,), 0.01, dtype=nbx.float16, device=device)
    r = x.sum()
    assert r.dtype is nbx.float16
    assert abs(r.item() - 655.0) <= 0.5


def test_argmax_first_occurrence_and_nan(device):
    x = nbx.tensor([[1.0, 3.0, 3.0, 1.0], [1.0, float("nan"), 2.0, float("nan")]], device=device)
    assert H.host(x.argmax(1)).tolist() == [1, 1]
    assert H.host(x.argmin(1)).tolist() == [0, 1]
    v, i = x.max(1)
    assert H.host(i).tolist() == [1, 1] and np.isnan(H.host(v)[1])
    assert x.argmax().item() == 5  # flat index of the first NaN
    assert np.isnan(x.max().item()) and np.isnan(x.amax(1)[1].item())
    assert x.min(dim=1).indices.tolist() == [0, 1]


def test_return_types_and_methods(device):
    x = nbx.arange(12, dtype=nbx.float32, device=device).view(3, 4)
    r = x.max(dim=1, keepdim=True)
    assert isinstance(r, nbx.ops.reduction.return_types.max) and r._fields == ("values", "indices")
    assert tuple(r.values.shape) == (3, 1) and r.indices.dtype is nbx.int64
    mm = nbx.aminmax(x, dim=0)
    assert mm._fields == ("min", "max") and mm.max.tolist() == [8.0, 9.0, 10.0, 11.0]
    assert x.sum(dim=1, keepdim=True).tolist() == [[6.0], [22.0], [38.0]]
    assert nbx.mean(x, (0, 1)).item() == 5.5 and x.prod(1).tolist()[0] == 0.0
    v, m = nbx.var_mean(x, 1, correction=0)
    np.testing.assert_allclose(v.tolist(), [1.25] * 3)
    assert not hasattr(nbx.Tensor, "var_mean")


def test_result_dtypes(device):
    i8 = nbx.tensor([1, 2, 3], dtype=nbx.int8, device=device)
    assert i8.sum().dtype is nbx.int64 and i8.prod().dtype is nbx.int64 and i8.amax().dtype is nbx.int8
    assert i8.sum(dtype=nbx.int8).dtype is nbx.int8 and i8.logsumexp(0).dtype is nbx.float32
    assert nbx.tensor([True, False], device=device).sum().item() == 1
    u8 = nbx.tensor([2, 3], dtype=nbx.uint8, device=device)
    assert u8.all().dtype is nbx.uint8 and u8.all().item() == 1 and u8.any(0).dtype is nbx.uint8
    h = nbx.ones(3, dtype=nbx.float16, device=device)
    assert h.mean(dtype=nbx.float32).dtype is nbx.float32 and h.var().dtype is nbx.float16
    assert nbx.count_nonzero(h).dtype is nbx.int64
    assert i8.mean(dtype=nbx.float32).item() == 2.0


def test_max_min_elementwise_form(device):
    a, b = nbx.tensor([1.0, 5.0], device=device), nbx.tensor([3.0, 2.0], device=device)
    assert nbx.max(a, b).tolist() == [3.0, 5.0] and a.min(b).tolist() == [1.0, 2.0]


def test_zero_dim_input(device):
    x = nbx.tensor(2.5, device=device)
    assert x.sum().item() == 2.5 and x.sum(0).item() == 2.5 and x.amax(-1).item() == 2.5
    assert x.argmax().item() == 0 and x.argmax(0, keepdim=True).item() == 0
    assert tuple(x.max(0).values.shape) == () and math.isnan(x.var().item())
    assert x.logsumexp(0).item() == 2.5


def test_variance_divisor_rule(device):
    x = nbx.tensor([1.0, 2.0], device=device)
    assert x.var(correction=2).item() == math.inf  # M2 / 0
    assert math.isnan(nbx.ones(2, 3, device=device).var(0, correction=2)[0].item())  # 0 / 0
    assert x.var(correction=1.5).item() == pytest.approx(1.0)
    assert x.var(True).item() == pytest.approx(0.5) and x.var(0, unbiased=False).item() == pytest.approx(0.25)


def test_out_arguments(device):
    x = nbx.ones(2, 3, device=device)
    o = nbx.empty(3, dtype=nbx.float64, device=device)
    assert nbx.sum(x, 0, out=o) is o and o.tolist() == [2.0, 2.0, 2.0]  # sum casts into out
    with pytest.raises(RuntimeError):
        nbx.amax(x, 0, out=nbx.empty(3, dtype=nbx.float64, device=device))
    v, i = nbx.empty(2, device=device), nbx.empty(2, dtype=nbx.int64, device=device)
    r = nbx.max(x, 1, out=(v, i))
    assert r.values is v and i.tolist() == [0, 0]
    big = nbx.empty(5, device=device)
    with pytest.warns(UserWarning):
        nbx.mean(x, 0, out=big)
    assert tuple(big.shape) == (3,)
    # a non-contiguous out= whose layout does not match the input's groups (written through a temporary)
    a = np.random.default_rng(3).standard_normal((4, 5, 6)).astype(np.float32)
    xt = nbx.from_numpy(a).to(device).permute(2, 0, 1)  # (6, 4, 5)
    o2 = nbx.empty(5, 6, device=device).t()  # (6, 5), strides (1, 6)
    nbx.amax(xt, 1, out=o2)
    np.testing.assert_array_equal(H.host(o2), a.transpose(2, 0, 1).max(axis=1))
    o3 = nbx.empty(4, 6, device=device)[:, ::2]  # (4, 3) with a gap
    nbx.sum(nbx.from_numpy(a[:, :3, :3].copy()).to(device), 1, out=o3)
    np.testing.assert_allclose(H.host(o3), a[:, :3, :3].sum(axis=1), rtol=1e-5)


def test_norms(device):
    x = nbx.tensor([[3.0, -4.0], [0.0, 0.0]], device=device)
    assert nbx.vector_norm(x, dim=1).tolist() == [5.0, 0.0]
    assert nbx.vector_norm(x, 0, 1).tolist() == [2.0, 0.0]
    assert x.norm(p=1).item() == 7.0 and x.norm(p="fro").item() == 5.0
    assert nbx.vector_norm(x, math.inf).item() == 4.0 and nbx.vector_norm(x[0], -math.inf).item() == 3.0
    assert nbx.vector_norm(x[0], -1).item() == pytest.approx(1 / (1 / 3 + 1 / 4))
    h = nbx.tensor([3e4, 4e4], dtype=nbx.float16, device=device)
    assert nbx.vector_norm(h).item() == pytest.approx(5e4, rel=1e-3)  # squares overflow float16: fp32 accumulation
    assert nbx.vector_norm(h, dtype=nbx.float64).dtype is nbx.float64


def _first_extreme(a: np.ndarray, largest: bool, axis: int) -> np.ndarray:
    """PyTorch's argmax/argmin along ``axis``: the first NaN if any, else the first occurrence of the extreme."""
    a = np.moveaxis(a, axis, -1)
    if a.dtype.kind == "f":
        nan = np.isnan(a)
        key = np.where(nan, -np.inf if largest else np.inf, a)
        idx = np.argmax(key, -1) if largest else np.argmin(key, -1)
        return np.where(nan.any(-1), np.argmax(nan, -1), idx)
    return np.argmax(a, -1) if largest else np.argmin(a, -1)


def _extreme_rows(n: int, tile: int) -> np.ndarray:
    """float32 rows of length ``n`` that stress the per-lane arg-extrema of the kernels (``tile`` = the config's
    BLOCK_R): ties between lanes and between iterations of one lane, all -inf / all +inf rows, NaN early and
    late, -inf and NaN mixed, and a row whose extreme sits in the last (masked) tile."""
    rng = np.random.default_rng(n)
    rows = [rng.standard_normal(n).astype(np.float32) for _ in range(9)]
    at = lambda *ps: [p % n for p in ps]  # noqa: E731 - positions folded into short rows
    rows[0][at(tile + 5, 2 * tile + 3, n - 1)] = 9.0  # lane 5 of step 1 comes before lane 3 of step 2
    rows[1][at(3, tile + 3, n - 2)] = -9.0  # one lane, several steps
    rows[2][:] = -np.inf
    rows[3][:] = np.inf
    rows[4][at(n - 1, 2)] = np.nan  # NaN wins, the first one
    rows[5][:] = -np.inf
    rows[5][at(tile + 1, n - 3)] = np.nan
    rows[6][n - 1] = 50.0
    rows[6][(n - 1 - tile // 2) % n] = -50.0
    rows[7][:] = 2.0  # all equal: index 0
    rows[8][0] = np.nan
    return np.stack(rows)


@pytest.mark.parametrize("n_tiles", [0.5, 3.4, 9.1])  # shorter than a tile, a few tiles (split into chunks)
def test_arg_extrema_lanes_ties_nan_and_splits(n_tiles, device):
    """max/min with indices, argmax/argmin and amax/amin over the innermost (rows kernel) and a strided dim (cols
    kernel): the per-lane arg-extrema keep PyTorch's first occurrence and NaN rule across lanes, loop steps, masked
    tails and the split reduction's two stages."""
    tile = H.block(device)
    n = max(3, int(tile * n_tiles))
    a = _extreme_rows(n, tile)
    for axis, x in ((1, nbx.from_numpy(a).to(device)), (0, nbx.from_numpy(np.ascontiguousarray(a.T)).to(device))):
        host_a = a if axis == 1 else a.T
        for largest, fn in ((True, nbx.max), (False, nbx.min)):
            v, i = fn(x, axis)
            exp_i = _first_extreme(host_a, largest, axis)
            np.testing.assert_array_equal(H.host(i), exp_i, err_msg=f"{fn.__name__} indices, axis {axis}")
            np.testing.assert_array_equal(H.host(v), np.take_along_axis(np.moveaxis(host_a, axis, -1),
                                                                         exp_i[:, None], -1)[:, 0])
            arg = (nbx.argmax if largest else nbx.argmin)(x, axis)
            np.testing.assert_array_equal(H.host(arg), exp_i)
            ext = (nbx.amax if largest else nbx.amin)(x, axis)
            np.testing.assert_array_equal(H.host(ext), (np.max if largest else np.min)(host_a, axis))


def test_arg_extrema_of_integer_extremes(device):
    """Integer rows equal to the dtype's minimum (or maximum): the kernels' lanes start from the int64
    identity, so no element beats it and the index must still be the first element."""
    tile = H.block(device)
    n = tile * 3 + 1
    for dt, lo, hi in ((np.int8, -128, 127), (np.uint8, 0, 255), (np.int64, -2 ** 63, 2 ** 63 - 1)):
        a = np.full((3, n), lo, dtype=dt)
        a[1] = hi
        a[2, [tile + 1, 2 * tile]] = hi
        x = nbx.from_numpy(a).to(device)
        for largest in (True, False):
            v, i = (nbx.max if largest else nbx.min)(x, 1)
            np.testing.assert_array_equal(H.host(i), _first_extreme(a, largest, 1), err_msg=str(dt))
            np.testing.assert_array_equal(H.host(v), (a.max if largest else a.min)(1))


# The settings benchmarks/sweep_reduce.py tries on the H200, as config overrides: results must not change.
_SWEEP_SETTINGS = {
    "reduce_rows": [dict(LOOP_STAGES=3, EVICT="evict_first"), dict(BLOCK_M=1, BLOCK_R=8, LOOP_STAGES=2),
                    dict(BLOCK_M=1, BLOCK_R=4, UNROLL=4, EVEN=True),
                    dict(BLOCK_M=2, BLOCK_R=4, UNROLL=2, INTERLEAVE=True, target_programs=64, min_chunk=4),
                    dict(BLOCK_M=1, BLOCK_R=4, UNROLL=4, EVEN=True, VAR_SHIFT=True), dict(VAR_SHIFT=True, WORDS=True)],
    "reduce_cols": [dict(LOOP_STAGES=2, EVICT="evict_first"), dict(BLOCK_R=4, BLOCK_I=16, target_programs=16,
                                                                  min_chunk=8),
                    dict(BLOCK_R=2, BLOCK_I=8, UNROLL=4, INTERLEAVE=True, target_per_sm=8, min_chunk=2, EVEN=True),
                    dict(BLOCK_R=2, BLOCK_I=8, UNROLL=2, VAR_SHIFT=True, target_programs=16, min_chunk=4)],
}


@pytest.mark.parametrize("op", sorted(_SWEEP_SETTINGS))
def test_sweep_settings_keep_results(op, device):
    from nbxtensor.runtime.configs import override
    rng = np.random.default_rng(7)
    a = rng.standard_normal((11, 29)).astype(np.float32)
    a[3, 7] = np.nan
    a[5] = -np.inf
    x = nbx.from_numpy(a).to(device)
    axis = 1 if op == "reduce_rows" else 0
    for settings in _SWEEP_SETTINGS[op]:
        with override(op, **settings):
            np.testing.assert_allclose(H.host(nbx.sum(x, axis)), np.nansum(a, axis) * np.where(
                np.isnan(a).any(axis), np.nan, 1), rtol=1e-5, atol=1e-5, err_msg=str(settings))
            np.testing.assert_array_equal(H.host(nbx.amax(x, axis)), a.max(axis))
            for largest in (True, False):
                v, i = (nbx.max if largest else nbx.min)(x, axis)
                np.testing.assert_array_equal(H.host(i), _first_extreme(a, largest, axis), err_msg=str(settings))
            vm = nbx.var_mean(x[6:], axis)
            np.testing.assert_allclose(H.host(vm[0]), a[6:].var(axis, ddof=1), rtol=1e-4)


# The loop settings UNROLL (tiles loaded per iteration), EVEN (unmasked loads), INTERLEAVE (a split's super-tiles
# dealt round-robin) and target_per_sm on shapes that take every path: whole super-tiles (EVEN drops the masks),
# a ragged tail, a split into chunks (contiguous and interleaved, with one program short of a super-tile).
_LOOP_SETTINGS = [dict(UNROLL=2), dict(UNROLL=4, EVEN=True),
                  dict(UNROLL=4, EVEN=True, INTERLEAVE=True, target_programs=64, min_chunk=4),
                  dict(UNROLL=2, INTERLEAVE=True, target_per_sm=4, min_chunk=8),
                  dict(UNROLL=4, EVEN=True, target_per_sm=16, min_chunk=4),
                  dict(UNROLL=4, EVEN=True, VAR_SHIFT=True), dict(UNROLL=2, VAR_SHIFT=True, target_per_sm=4, min_chunk=8),
                  dict(UNROLL=2, VAR_SHIFT=True, INTERLEAVE=True, target_per_sm=4, min_chunk=8),
                  dict(UNROLL=4, EVEN=True, LSE_EX2=True),
                  dict(UNROLL=2, LSE_EX2=True, INTERLEAVE=True, target_per_sm=4, min_chunk=8),
                  dict(UNROLL=2, FINISH_LAST=True, target_per_sm=4, min_chunk=8)]


@pytest.mark.parametrize("n", [128, 77])  # a multiple of every super-tile here (EVEN), and a ragged length
@pytest.mark.parametrize("op", ["reduce_rows", "reduce_cols"])
def test_loop_settings_keep_results(op, n, device):
    """Every kind through UNROLL / EVEN / INTERLEAVE / target_per_sm (small tiles, so the interpreter sees several
    iterations and chunks): arg-extrema keep the first occurrence and NaN across unrolled tiles, interleaved
    chunks and the split's two stages; sums, var and logsumexp match the table's own setting; a split sum gives
    the same bits on every run (no atomics: a fixed order)."""
    from nbxtensor.runtime.configs import override
    rng = np.random.default_rng(11)
    a = rng.standard_normal((4, n)).astype(np.float32)
    a[1, [5, n - 7]] = 9.0  # a tie: the first wins
    a[2, n // 2 + 3] = np.nan
    a[3, :] = -np.inf
    a[3, [n - 1, 17]] = np.nan  # NaN is the extreme: the first one
    axis, host_a = (1, a) if op == "reduce_rows" else (0, np.ascontiguousarray(a.T))
    x = nbx.from_numpy(host_a).to(device)
    tile = dict(BLOCK_M=1, BLOCK_R=8) if op == "reduce_rows" else dict(BLOCK_R=4, BLOCK_I=4)
    ref_sum, ref_var, ref_lse = (H.host(f(x, axis)) for f in (nbx.sum, nbx.var, nbx.logsumexp))
    for settings in _LOOP_SETTINGS:
        with override(op, **tile, **settings):
            msg = f"{op} {settings}"
            s1, s2 = H.host(nbx.sum(x, axis)), H.host(nbx.sum(x, axis))
            np.testing.assert_array_equal(s1, s2, err_msg=msg)
            np.testing.assert_allclose(s1, ref_sum, rtol=1e-5, atol=1e-5, err_msg=msg)
            np.testing.assert_allclose(H.host(nbx.var(x, axis)), ref_var, rtol=1e-5, atol=1e-6, err_msg=msg)
            np.testing.assert_allclose(H.host(nbx.logsumexp(x, axis)), ref_lse, rtol=1e-5, err_msg=msg)
            np.testing.assert_array_equal(H.host(nbx.amax(x, axis)), host_a.max(axis), err_msg=msg)
            for largest in (True, False):
                v, i = (nbx.max if largest else nbx.min)(x, axis)
                exp_i = _first_extreme(host_a, largest, axis)
                np.testing.assert_array_equal(H.host(i), exp_i, err_msg=msg)
                np.testing.assert_array_equal(H.host((nbx.argmax if largest else nbx.argmin)(x, axis)), exp_i)
            # every element: one row split into chunks (the rows kernel's one-row path)
            flat = x[:2].reshape(-1) if op == "reduce_rows" else x[:, :2].reshape(-1)
            hf = host_a[:2].reshape(-1) if op == "reduce_rows" else host_a[:, :2].reshape(-1)
            if op == "reduce_rows":
                f1, f2 = H.host(nbx.sum(flat)), H.host(nbx.sum(flat))
                np.testing.assert_array_equal(f1, f2, err_msg=msg)
                np.testing.assert_allclose(f1, hf.astype(np.float64).sum(), rtol=1e-5, err_msg=msg)
                assert int(H.host(nbx.argmax(flat))) == int(np.argmax(hf)), msg


@pytest.mark.skipif(not H.GPU and os.environ.get("NBX_TRITON_INTERPRET", "0") != "1",
                    reason="the cpu implementation launches no kernel")
@pytest.mark.parametrize("op", ["reduce_rows", "reduce_cols"])
def test_finish_last_is_the_two_launch_split_in_one(op, device):
    """``FINISH_LAST``: a split reduction's combine done by the last program of each output tile in the first
    launch. Every state kind gives the two-launch split's results (integers, indices and extrema exactly; sums
    within float32 reordering), the same bits on every call, one launch in the recorded plan, and leaves the
    arrival counters at zero (the next launch, and a plan's, start clean)."""
    from nbxtensor.ops import matmul as MM, reduction as R
    from nbxtensor.runtime.configs import override
    rng = np.random.default_rng(12)
    a = rng.standard_normal((6, 203)).astype(np.float32)
    a[1, [5, 190]] = 9.0
    a[2, 100] = np.nan
    a[4, ::3] = 0.0
    host_a = a if op == "reduce_rows" else np.ascontiguousarray(a.T)
    axis = 1 if op == "reduce_rows" else 0
    x = nbx.from_numpy(host_a).to(device)
    split = dict(BLOCK_M=2, BLOCK_R=8, target_programs=64, min_chunk=16) if op == "reduce_rows" else \
        dict(BLOCK_R=4, BLOCK_I=4, target_programs=64, min_chunk=16)
    calls = {"sum": lambda: nbx.sum(x, axis), "prod": lambda: nbx.prod(x[:, :3] if axis == 0 else x[:3], axis),
             "amax": lambda: nbx.amax(x, axis), "max": lambda: nbx.max(x, axis), "argmin": lambda: nbx.argmin(x, axis),
             "aminmax": lambda: nbx.aminmax(x, dim=axis), "var_mean": lambda: nbx.var_mean(x, axis),
             "logsumexp": lambda: nbx.logsumexp(x, axis), "nanmean": lambda: nbx.nanmean(x, axis),
             "count_nonzero": lambda: nbx.count_nonzero(x, axis), "all": lambda: nbx.all(x, axis),
             "sum_all": lambda: nbx.sum(x)}
    for name, call in calls.items():
        R.clear_plans()
        with override(op, **split):
            want = _host_all(call())
        R.clear_plans()
        with override(op, **split, FINISH_LAST=True):
            got = _host_all(call())
            again = _host_all(call())                       # through the plan
            if name != "sum_all" or op == "reduce_rows":
                plans = [p for c in R._PLAN_CACHES for p in c.values() if p is not R._NO_PLAN]
                assert len(plans) == 1 and len(plans[0].steps) == 1, name
        for g, g2, w in zip(got, again, want):
            np.testing.assert_array_equal(g, g2, err_msg=name)
            if g.dtype.kind == "f":
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=name)
            else:
                np.testing.assert_array_equal(g, w, err_msg=name)
    locks = MM._locks(x.device, 1)
    assert not H.host(locks).any()


def test_split_plan_targets_programs_per_sm():
    """``target_per_sm`` sets the programs of a split to that many per SM (4 SMs under the interpreter, the
    device's count on a GPU) and wins over ``target_programs``; chunks are whole super-tiles (BLOCK_R * UNROLL)."""
    from nbxtensor.ops.reduction import sm_count, split_plan
    dev = nbx.ones(1).device  # cpu
    cfg = {"BLOCK_R": 8, "UNROLL": 4, "target_programs": 1000, "target_per_sm": 3, "min_chunk": 1}
    split, chunk = split_plan(cfg, 1, 10_000, dev)
    assert split == 3 * sm_count(dev) and chunk % 32 == 0 and (split - 1) * chunk < 10_000 <= split * chunk
    assert not {"target_programs", "target_per_sm", "min_chunk"} & set(cfg)
    assert split_plan({"BLOCK_R": 8, "target_programs": 64, "min_chunk": 4}, 64, 10_000, dev) == (1, 10_000)
    assert split_plan({"BLOCK_R": 16, "UNROLL": 2, "target_programs": 4, "min_chunk": 100}, 1, 150, dev) == (2, 96)


@pytest.mark.skipif(not H.GPU and os.environ.get("NBX_TRITON_INTERPRET", "0") != "1",
                    reason="the cpu implementation launches no kernel")
def test_unroll_must_be_supported(device):
    from nbxtensor.runtime.configs import override
    x = nbx.ones((3, 40)).to(device)
    with override("reduce_rows", UNROLL=3):
        with pytest.raises(ValueError, match="UNROLL must be 1, 2 or 4"):
            nbx.sum(x, 1)


# ---------------------------------------------------------------------------------------------------------
# The kernels compile for the H200 (sm90) here, without a GPU
# ---------------------------------------------------------------------------------------------------------
_AOT = [  # (kind, pre, fin, input type, acc, loadt, out, out2): one per state kind and transform
    ("K_SUM", "P_NONE", "F_NONE", "*bf16", "fp32", "fp32", "*bf16", "*bf16"),
    ("K_SUM", "P_NONE", "F_DIV_N", "*fp16", "fp32", "fp32", "*fp16", "*fp16"),
    ("K_SUM", "P_NONZERO", "F_NONE", "*i1", "i64", "i64", "*i64", "*i64"),
    ("K_MIN", "P_NONZERO", "F_NONE", "*fp32", "i32", "fp32", "*i1", "*i1"),
    ("K_PROD", "P_NONE", "F_NONE", "*fp64", "fp64", "fp64", "*fp64", "*fp64"),
    ("K_MAX", "P_NONE", "F_NONE", "*i8", "i64", "i64", "*i8", "*i8"),
    ("K_ARGMAX", "P_NONE", "F_NONE", "*bf16", "fp32", "fp32", "*bf16", "*i64"),
    ("K_MINMAX", "P_NONE", "F_NONE", "*fp32", "fp32", "fp32", "*fp32", "*fp32"),
    ("K_WELFORD", "P_NONE", "F_STD", "*bf16", "fp32", "fp32", "*bf16", "*bf16"),
    ("K_LSE", "P_NONE", "F_LSE", "*fp16", "fp32", "fp32", "*fp16", "*fp16"),
    ("K_NANMEAN", "P_NONE", "F_RATIO", "*fp32", "fp32", "fp32", "*fp32", "*fp32"),
    ("K_SUM", "P_POW", "F_ROOT_P", "*fp64", "fp64", "fp64", "*fp64", "*fp64"),
]


# every kind single-pass (STAGE 0); the split stages (1: write states, 2: combine them) for the multi-state kinds
_AOT_CASES = [(c, 0) for c in _AOT] + [(c, s) for c in _AOT for s in (1, 2)
                                       if c[0] in ("K_ARGMAX", "K_WELFORD", "K_LSE", "K_NANMEAN", "K_SUM")
                                       and c[1] == "P_NONE" and c[2] == "F_NONE" or c[0] in ("K_WELFORD", "K_LSE",
                                                                                               "K_NANMEAN")]


@pytest.mark.parametrize("case,stage", _AOT_CASES, ids=[f"{c[0]}-{c[1]}-{c[3]}-stage{s}" for c, s in _AOT_CASES])
def test_kernels_compile_for_sm90(case, stage):
    """Every state kind compiles for sm90 with the tables' plain loop, and (raw-element stages) with the sweep's
    loop settings too: a pipelined loop (``LOOP_STAGES``), an eviction policy and a neutral element for masked
    lanes (``OTHER``, where the launcher sets one)."""
    reason = H.aot_skip_reason()
    if reason:
        pytest.skip(reason)
    import triton.language as tl
    from nbxtensor.ops import reduction as R
    kind, pre, fin = getattr(R, case[0]), getattr(R, case[1]), getattr(R, case[2])
    xt, acc, loadt, yt, y2t = case[3], getattr(tl, {"fp32": "float32", "fp64": "float64", "i64": "int64",
                                                   "i32": "int32"}[case[4]]), case[5], case[6], case[7]
    loadt = getattr(tl, {"fp32": "float32", "fp64": "float64", "i64": "int64"}[loadt])
    ident, ident2 = R._identities(kind, H.nbx_dtype(acc))
    ws = ("*" + case[4], "*i64" if kind in (R.K_ARGMAX, R.K_ARGMIN) else "*" + case[4], "*" + case[4])
    x = xt if stage < 2 else ws[0]
    types = {"x_ptr": x, "x1_ptr": ws[1] if stage == 2 else x, "x2_ptr": ws[2] if stage == 2 else x, "y_ptr": yt,
             "y2_ptr": y2t, "w0_ptr": ws[0], "w1_ptr": ws[1], "w2_ptr": ws[2], "locks_ptr": "*i32", "O": "i32", "I": "i32", "R": "i32",
             "chunk": "i32", "n_total": "i64", "sxo": "i64", "sxr": "i64", "sxi": "i64", "syo": "i64", "syi": "i64",
             "sy2o": "i64", "sy2i": "i64", "p": "fp32", "corr": "fp32"}
    consts = dict(KIND=kind, PRE=pre, FIN=fin, STAGE=stage, HAS_Y=True, HAS_Y2=kind in (R.K_ARGMAX, R.K_MINMAX,
                                                                                      R.K_WELFORD),
                  LOADT=loadt, ACC=acc, IDENT=ident, IDENT2=ident2, LOOP_STAGES=None, EVICT="", OTHER=None,
                  UNROLL=1, INTERLEAVE=False, EVEN=False, VAR_SHIFT=False, LSE_EX2=False)
    H.compile_sm90(R._reduce_rows_kernel, types, dict(consts, BLOCK_M=2, BLOCK_R=2048), num_warps=8)
    H.compile_sm90(R._reduce_cols_kernel, types, dict(consts, BLOCK_R=16, BLOCK_I=256), num_warps=8)
    if stage == 0 and kind in (R.K_SUM, R.K_ARGMAX) and xt == "*bf16":
        tuned = dict(consts, LOOP_STAGES=3, EVICT="evict_first", OTHER=ident)
        H.compile_sm90(R._reduce_rows_kernel, types, dict(tuned, BLOCK_M=1, BLOCK_R=4096), num_warps=4)
        H.compile_sm90(R._reduce_cols_kernel, types, dict(tuned, BLOCK_R=32, BLOCK_I=256), num_warps=8)
    if stage < 2 and kind in (R.K_SUM, R.K_ARGMAX, R.K_WELFORD):  # the loop settings of benchmarks/sweep_reduce.py
        for loop in (dict(UNROLL=4, EVEN=True, INTERLEAVE=stage == 1), dict(UNROLL=2)):
            H.compile_sm90(R._reduce_rows_kernel, types, dict(consts, BLOCK_M=1, BLOCK_R=1024, **loop), num_warps=4)
            H.compile_sm90(R._reduce_cols_kernel, types, dict(consts, BLOCK_R=8, BLOCK_I=256, **loop), num_warps=8)
    if stage == 1:  # FINISH_LAST: the split's combine in the first launch, by the tile's last program
        H.compile_sm90(R._reduce_rows_kernel, types, dict(consts, BLOCK_M=1, BLOCK_R=2048, FINISH_LAST=True,
                                                          BLOCK_S=1024), num_warps=8)
        H.compile_sm90(R._reduce_cols_kernel, types, dict(consts, BLOCK_R=8, BLOCK_I=512, FINISH_LAST=True,
                                                          BLOCK_S=4), num_warps=8)


# out= of another dtype (PyTorch 2.13's rules, checked in tests/ops/parity/test_reduction_out_parity.py)
def _bf16_witness(device):
    # 1 + 2**-8 + 2**-9 is exact in float32 and 1.0078125 in bfloat16
    return nbx.tensor([[1.0, 2.0 ** -8, 2.0 ** -9, 0.0]] * 2, dtype=nbx.bfloat16, device=device)


@pytest.mark.parametrize("od", ["float32", "float64"])
def test_out_dtype_is_the_accumulation_dtype(od, device):
    w = _bf16_witness(device)
    for op in (nbx.sum, nbx.nansum):
        assert op(w, 1, out=nbx.empty(0, dtype=getattr(nbx, od), device=device)).tolist() == [1.005859375] * 2
    assert op(w, 1).tolist() == [1.0078125] * 2
    m = nbx.mean(w, 1, out=nbx.empty(0, dtype=getattr(nbx, od), device=device)).tolist()
    assert m == pytest.approx([1.005859375 / 4] * 2, rel=1e-7)
    v = nbx.var(w, 1, out=nbx.empty(0, dtype=getattr(nbx, od), device=device))
    assert v.dtype is getattr(nbx, od) and v.tolist() == pytest.approx([0.24902694] * 2, rel=1e-6)
    lse = nbx.logsumexp(w, 1, out=nbx.empty(0, dtype=getattr(nbx, od), device=device)).tolist()
    assert lse[0] == pytest.approx(math.log(math.exp(1) + math.exp(2 ** -8) + math.exp(2 ** -9) + 1), rel=1e-6)


def test_out_dtype_converts_the_input_first(device):
    f = nbx.tensor([[0.7, 0.7, 0.7, 1.6], [2.5, -1.5, 3.7, 0.2]], device=device)
    for od in ("int64", "int32", "int8"):   # the truncated elements summed (PyTorch: 1 and 4, not 3 and 5)
        assert nbx.sum(f, 1, out=nbx.empty(0, dtype=getattr(nbx, od), device=device)).tolist() == [1, 4]
    assert nbx.prod(f, 1, out=nbx.empty(0, dtype=nbx.int64, device=device)).tolist() == [0, 0]
    assert nbx.sum(f, 1, out=nbx.empty(0, dtype=nbx.bool, device=device)).tolist() == [True, True]
    # bfloat16 1e5 is inf in float16: the sum into a float16 out is NaN (as dtype=float16); mean computes in float32
    x = nbx.tensor([[1e5, -1e5]], dtype=nbx.bfloat16, device=device)
    assert math.isnan(nbx.sum(x, 1, out=nbx.empty(0, dtype=nbx.float16, device=device)).item())
    assert math.isnan(nbx.sum(x, 1, dtype=nbx.float16).item())
    assert nbx.mean(x, 1, out=nbx.empty(0, dtype=nbx.float16, device=device)).item() == 0.0
    e = nbx.empty(2, 0, device=device)
    assert nbx.sum(e, 1, out=nbx.empty(0, dtype=nbx.int32, device=device)).tolist() == [0, 0]


def test_out_dtype_refusals(device):
    x = nbx.ones(2, 3, device=device)

    def o(dt):
        return nbx.empty(0, dtype=dt, device=device)
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype double, but got float instead"):
        nbx.sum(x, 1, dtype=nbx.float64, out=o(nbx.float32))
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype double, but got float instead"):
        nbx.mean(x, 1, dtype=nbx.float64, out=o(nbx.float32))
    with pytest.raises(RuntimeError, match="provided dtype must match dtype of result. Got Float and Double"):
        nbx.nansum(x, 1, dtype=nbx.float64, out=o(nbx.float32))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Long"):
        nbx.mean(x, 1, out=o(nbx.int64))
    with pytest.raises(NotImplementedError, match="'Long'"):
        nbx.nansum(x, 1, out=o(nbx.int64))
    assert nbx.nansum(x, 1, dtype=nbx.int64, out=o(nbx.int64)).tolist() == [3, 3]
    with pytest.raises(NotImplementedError, match="'UInt16'"):
        nbx.sum(x, 1, out=o(nbx.uint16))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Int"):
        nbx.var(x, 1, out=o(nbx.int32))
    with pytest.raises(RuntimeError, match="Expected floating point type for result tensor, but got: Long"):
        nbx.logsumexp(x, 1, out=o(nbx.int64))
    with pytest.raises(RuntimeError, match="got Float for input's dtype and Double for out's dtype"):
        nbx.amax(x, 1, out=o(nbx.float64))
    with pytest.raises(RuntimeError, match="all only supports bool tensor for result, got: Float"):
        nbx.all(x, 1, out=o(nbx.float32))
    assert nbx.any(x, 1, out=o(nbx.uint8)).tolist() == [1, 1]
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype long int, but got int instead"):
        nbx.argmax(x, 1, out=o(nbx.int32))
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float, but got double instead"):
        nbx.max(x, 1, out=(o(nbx.float64), o(nbx.int64)))
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float, but got c10::BFloat16 instead"):
        nbx.vector_norm(x, dim=1, out=o(nbx.bfloat16))
    with pytest.raises(RuntimeError, match="expected input to have floating point or complex dtype but got Int"):
        nbx.nanmean(nbx.ones(2, 3, dtype=nbx.int32, device=device), 1)


# ---------------------------------------------------------------------------------------------------------
# Launch plans (ops/reduction.py "Launch plans"): a repeated signature replays the recorded launches
# ---------------------------------------------------------------------------------------------------------
_PLANNING = H.GPU or os.environ.get("NBX_TRITON_INTERPRET", "0") == "1"
_plans_only = pytest.mark.skipif(not _PLANNING, reason="plans are made on CUDA devices and under the interpreter tier")

# (op, kwargs, shape, dtype): every state kind, keepdim, dtype=, correction, full reductions (split: two launches)
# (bool cases: element counts not a multiple of 4, so the GPU table's WORDS path, which makes no plan, is not taken)
_PLAN_CASES = [
    ("sum", {}, (64, 40), "bfloat16"), ("sum", {"dim": -1}, (6, 70), "bfloat16"),
    ("sum", {"dim": 0, "keepdim": True}, (70, 6), "float32"), ("sum", {"dim": -1, "dtype": T.float32}, (5, 33), "bfloat16"),
    ("nansum", {"dim": 1}, (5, 33), "float32"), ("mean", {"dim": (0, 1)}, (4, 9, 7), "float16"),
    ("nanmean", {"dim": -1}, (5, 33), "float32"), ("prod", {"dim": 1}, (5, 9), "float32"),
    ("amax", {"dim": -1}, (6, 70), "bfloat16"), ("amin", {}, (300,), "float32"),
    ("all", {"dim": -1}, (6, 70), "bool"), ("any", {}, (63, 41), "bool"), ("count_nonzero", {"dim": 0}, (9, 5), "int32"),
    ("logsumexp", {"dim": -1}, (5, 33), "float32"), ("var", {"dim": -1}, (6, 70), "bfloat16"),
    ("var", {"dim": 0, "correction": 0}, (70, 6), "float32"), ("std", {"dim": -1, "keepdim": True}, (5, 33), "float32"),
    ("var", {}, (64, 40), "float32"), ("var_mean", {"dim": -1}, (5, 33), "float32"), ("std_mean", {}, (300,), "float64"),
    ("argmax", {}, (64, 40), "float32"), ("argmin", {"dim": 0, "keepdim": True}, (70, 6), "bfloat16"),
    ("max", {"dim": -1}, (6, 70), "float32"), ("min", {"dim": 0}, (70, 6), "int16"), ("max", {}, (64, 40), "float32"),
    ("aminmax", {"dim": -1}, (5, 33), "float32"), ("vector_norm", {"ord": 3.0, "dim": -1}, (5, 33), "float32"),
    ("norm", {"p": 1}, (64, 40), "float32"),
]


def _plan_input(shape, dtype, seed, device):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) * 3
    if dtype == "bool":
        a = a > 2.5
    elif dtype.startswith("int"):
        a = np.round(a)
    return nbx.tensor(a).to(getattr(T, "bool_" if dtype == "bool" else dtype)).to(device)


def _host_all(res):
    return [H.host(r) for r in _outputs(res)]


@_plans_only
@pytest.mark.parametrize("case", _PLAN_CASES, ids=[f"{c[0]}-{c[1]}-{c[3]}" for c in _PLAN_CASES])
def test_a_repeated_signature_runs_its_plan_with_the_general_paths_results(case, device):
    from nbxtensor.ops import reduction as R
    name, kw, shape, dt = case
    fn = registry.get(name).extra["function"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        R.clear_plans()
        fn(_plan_input(shape, dt, 1, device), **kw)          # records the plan
        assert R.plan_stats() == {"hits": 0, "plans": 1}, name
        x2 = _plan_input(shape, dt, 2, device)
        got = fn(x2, **kw)                                   # through the plan
        assert R.plan_stats()["hits"] == 1
        R.clear_plans()
        want = fn(x2, **kw)                                  # the general path again, on the same values
    assert type(got) is type(want)
    for g, w in zip(_host_all(got), _host_all(want)):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@_plans_only
def test_a_full_reduction_plan_holds_both_launches(device):
    from nbxtensor.ops import reduction as R
    R.clear_plans()
    # large enough that the GPU table (min_chunk 16384 for one row) splits it too
    x = _plan_input((64, 40) if device == "cpu" else (256, 1024), "float32", 3, device)
    x.sum()
    plans = [p for c in R._PLAN_CACHES for p in c.values() if p is not R._NO_PLAN]
    assert len(plans) == 1 and len(plans[0].steps) == 2       # partial states into the workspace, then the combine
    assert len(plans[0].fresh) == 2                           # the result and the workspace, new on every call
    y = x * 0.5
    a, b = x.sum(), y.sum()
    assert R.plan_stats()["hits"] == 2
    assert abs(float(a.item()) - float(np.float64(H.host(x)).sum())) < 1e-3
    assert abs(float(b.item()) - 0.5 * float(a.item())) < 1e-3
    assert a._storage is not b._storage


@_plans_only
@pytest.mark.parametrize("change", ["shape", "strides", "dtype", "dim", "keepdim", "dtype_arg", "correction",
                                    "dim_as_bool"])
def test_a_changed_signature_misses_the_plan(change, device):
    from nbxtensor.ops import reduction as R
    base = _plan_input((8, 12), "float32", 4, device)
    calls = {
        "shape": lambda: _plan_input((8, 13), "float32", 4, device).var(-1),
        "strides": lambda: _plan_input((12, 8), "float32", 4, device).t().var(-1),
        "dtype": lambda: base.to(nbx.float64).var(-1),
        "dim": lambda: base.var(0),
        "keepdim": lambda: base.var(-1, keepdim=True),
        "dtype_arg": None,
        "correction": lambda: base.var(-1, correction=0),
        "dim_as_bool": None,
    }
    if change == "dtype_arg":
        first, second = (lambda: base.sum(-1)), (lambda: base.sum(-1, dtype=nbx.float64))
    elif change == "dim_as_bool":   # var(x, 1) reduces dim 1; var(x, True) is the unbiased overload over all dims
        first, second = (lambda: nbx.var(base, 1)), (lambda: nbx.var(base, True))
    else:
        first, second = (lambda: base.var(-1)), calls[change]
    R.clear_plans()
    first()
    first()
    assert R.plan_stats()["hits"] == 1
    got = second()
    assert R.plan_stats()["hits"] == 1                   # a miss: the general path ran (and recorded)
    R.clear_plans()
    want = second()
    np.testing.assert_array_equal(H.host(got), H.host(want))


@_plans_only
def test_out_and_unreplayable_paths_take_the_general_path_and_overrides_get_their_own_plans(device):
    from nbxtensor.ops import reduction as R
    from nbxtensor.runtime import configs
    x = _plan_input((6, 70), "float32", 5, device)
    R.clear_plans()
    o = nbx.empty((6,), dtype=nbx.float32, device=device)
    for _ in range(3):
        x.sum(-1, out=o)
    assert R.plan_stats() == {"hits": 0, "plans": 0}
    want = H.host(x.sum(-1))                            # the table's plan
    with configs.override("reduce_rows", BLOCK_R=32):
        got = x.sum(-1)                                 # the override's table, not the plan's: a plan of its own
        assert R.plan_stats() == {"hits": 0, "plans": 2}
        x.sum(-1)                                       # served by it (a sweep times the kernel, not the host)
        assert R.plan_stats() == {"hits": 1, "plans": 2}
    x.sum(-1)                 # the table again, not the override's plan (a new config state: planned anew)
    x.sum(-1)
    assert R.plan_stats() == {"hits": 2, "plans": 3}
    blocks = [p.steps[0][4]["BLOCK_R"] for c in R._PLAN_CACHES for p in c.values() if p is not R._NO_PLAN]
    assert len(blocks) == 3 and blocks.count(32) == 1
    np.testing.assert_allclose(H.host(got), want, rtol=1e-6, atol=1e-5)
    R.clear_plans()
    x.sum(-1)
    # a float32 input with dtype=float64 is converted first (a cast launch on a temporary): not replayable
    x.sum(-1, dtype=nbx.float64)
    x.sum(-1, dtype=nbx.float64)
    assert R.plan_stats() == {"hits": 0, "plans": 1}


# ---------------------------------------------------------------------------------------------------------
# Kernel variants selectable by config keys (default off; benchmarks/sweep_reduce.py times them on the H200)
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["bool_", "uint8", "int8"])
def test_words_all_any_match_the_byte_path(dt, device):
    """``WORDS`` (all/any of 1-byte elements read as int32 words): the same results as byte by byte on rows of
    every kind (all zero, all nonzero, one zero byte at each position of a word, bytes other than 0/1), on
    layouts that take the word path (contiguous rows, one row) and those that may not (a length or an offset
    that is not a multiple of 4, transposed)."""
    from nbxtensor.runtime.configs import override
    rng = np.random.default_rng(5)
    a = (rng.integers(1, 4, (9, 40)) if dt != "bool_" else np.ones((9, 40), np.int64)).astype(np.uint8)
    a[0] = 0
    for k in range(4):
        a[1 + k, 20 + k] = 0        # one zero byte, at each position within a word
    a[5, ::3] = 0
    a[6] = 0
    a[6, 37] = 2 if dt != "bool_" else 1  # one nonzero byte
    x = nbx.from_numpy(a).to(getattr(T, dt)).to(device)
    views = [x, x[:, 1:37], x[:, :38], x[3:], x.t(), x.reshape(-1), x[2:7]]
    for v in views:
        for fn in (nbx.all, nbx.any):
            for dim in ((-1, None) if v.ndim == 2 else (None,)):
                ref = fn(v) if dim is None else fn(v, dim)
                with override("reduce_rows", WORDS=True, BLOCK_M=1, BLOCK_R=4, UNROLL=2):
                    got = fn(v) if dim is None else fn(v, dim)
                np.testing.assert_array_equal(H.host(got), H.host(ref), err_msg=f"{fn.__name__} {v.shape} {dim}")
                want = (a if v is x else H.host(v).astype(np.uint8)) != 0
                want = want.all(dim) if fn is nbx.all else want.any(dim)
                np.testing.assert_array_equal(H.host(got), want)


@_plans_only
def test_words_paths_are_planned_per_offset_alignment(device):
    """The ``WORDS`` paths (all/any of bytes, count_nonzero of 16-bit floats, read as int32 words) launch on the
    input itself, so a repeated call replays a plan (session 7's H200 run: all/any took the ~100 us general path
    every call, slower than their 62 us kernel); the plan key holds the offset's alignment, so a view of the same
    shape and strides whose offset rules the words out is planned (and computed) on its own."""
    from nbxtensor.ops import reduction as R
    from nbxtensor.runtime.configs import override
    a = np.zeros((9, 44), np.uint8)
    a[::2, ::3] = 1
    a[1] = 1
    base = nbx.from_numpy(a).to(T.bool_).to(device)
    bf = nbx.from_numpy(a.astype(np.float32)).to(T.bfloat16).to(device)
    with override("reduce_rows", WORDS=True, COUNT32=True, BLOCK_M=1, BLOCK_R=4, UNROLL=2):
        for name, fn, host in (("all", lambda t: nbx.all(t, 1), lambda h: h.all(1)),
                               ("any", lambda t: nbx.any(t, 1), lambda h: h.any(1)),
                               ("count_nonzero", lambda t: nbx.count_nonzero(t, 1), lambda h: (h != 0).sum(1))):
            for src in (base, bf):
                if (name == "count_nonzero") != (src is bf):
                    continue
                R.clear_plans()
                for _ in range(2):
                    np.testing.assert_array_equal(H.host(fn(src[:, :40])), host(a[:, :40] != 0))
                assert R.plan_stats() == {"hits": 1, "plans": 1}
                for _ in range(2):  # offset 1 (2 bytes for bfloat16): the element path, its own plan
                    np.testing.assert_array_equal(H.host(fn(src[:, 1:41])), host(a[:, 1:41] != 0))
                assert R.plan_stats() == {"hits": 2, "plans": 2}


def test_var_shift_keeps_numerics(device):
    """``VAR_SHIFT`` (shifted sums per lane): rows with a large common offset, an outlier as the lanes' first
    element, constant rows (0, never negative), +-inf / NaN (NaN, as Welford) agree with the float64 oracle."""
    from nbxtensor.runtime.configs import override
    rng = np.random.default_rng(9)
    a = rng.standard_normal((6, 64)).astype(np.float32)
    a[0] = 40000 + np.arange(64) % 4
    a[1, :8] = 1e4                      # the first tile: every lane's shift an outlier
    a[2] = 3.25
    a[3, 9] = np.inf
    a[4, 0] = np.nan
    x = nbx.from_numpy(a).to(device)
    exp = a.astype(np.float64).var(1, ddof=1)
    for st in (dict(BLOCK_M=2, BLOCK_R=8, UNROLL=2), dict(BLOCK_M=1, BLOCK_R=8, UNROLL=4, EVEN=True),
               dict(BLOCK_M=1, BLOCK_R=8, target_programs=32, min_chunk=8)):
        with override("reduce_rows", VAR_SHIFT=True, **st):
            v, m = nbx.var_mean(x, 1)
            s = nbx.std(x, 1)
        with override("reduce_rows", **st):   # Welford's step, the same tiles
            ref = H.host(nbx.var(x, 1))
        got = H.host(v)
        # (row 0: float32 means of ~40001.5 combined across lanes cost both methods ~5e-4 of 1.27)
        np.testing.assert_allclose(got, exp, rtol=1e-3, atol=1e-6, err_msg=str(st))
        np.testing.assert_allclose(got, ref, rtol=2e-6, atol=1e-6, err_msg=str(st))
        assert got[2] == 0.0 and H.host(s)[2] == 0.0
        np.testing.assert_allclose(H.host(m)[:3], a[:3].astype(np.float64).mean(1), rtol=1e-6)


def test_variant_kernels_cut_instructions_on_sm90():
    """Offline sm_90 evidence for the variants (compiled as the JIT specializes a contiguous bfloat16 / bool
    32768x8192 call): ``WORDS`` reads all/any through 128-bit loads instead of 8-byte ones, and ``VAR_SHIFT``
    halves the variance's main loop."""
    reason = H.aot_skip_reason()
    if reason:
        pytest.skip(reason)
    import triton.language as tl
    from nbxtensor.ops import reduction as R

    def loop_and_loads(kind, pre, fin, xt, acc, loadt, extra, nw, R_):
        k = H.compile_sm90_jit(R._reduce_rows_kernel, kind, pre, fin, xt, acc, loadt,
                               dict(O=32768, R=R_, chunk=R_, n_total=R_, sxo=R_, sxr=1, syo=1, sy2o=1), extra, nw)
        return H.main_loop(k.asm["sass"])

    tab = dict(BLOCK_M=1, BLOCK_R=1024, UNROLL=2, LOOP_STAGES=3)
    byte = loop_and_loads(R.K_MAX, R.P_NONZERO, R.F_NONE, "*i1", tl.int32, tl.int64, tab, 4, 8192)
    word = loop_and_loads(R.K_MAX, R.P_NONZERO, R.F_NONE, "*i32", tl.int32, tl.int32, tab, 4, 2048)
    assert any("LDGSTS.E.64" in i for i in byte) and not any(".128" in i and "LDGSTS" in i for i in byte)
    assert any("LDGSTS.E.BYPASS.128" in i for i in word)
    # as launch_reduction runs it: the bool input itself, read as words in the kernel (AS_WORDS): the same loads
    asw = loop_and_loads(R.K_MAX, R.P_NONZERO, R.F_NONE, "*i1", tl.int32, tl.int32, dict(tab, AS_WORDS=True), 4, 2048)
    assert any("LDGSTS.E.BYPASS.128" in i for i in asw) and len(asw) == len(word)
    # instructions per input byte: 16 bytes per thread and iteration before, 64 after
    assert len(word) / 64 < 0.5 * len(byte) / 16
    var = dict(BLOCK_M=1, BLOCK_R=512, UNROLL=4, EVEN=True)
    welford = loop_and_loads(R.K_WELFORD, R.P_NONE, R.F_VAR, "*bf16", tl.float32, tl.float32, var, 2, 8192)
    shifted = loop_and_loads(R.K_WELFORD, R.P_NONE, R.F_VAR, "*bf16", tl.float32, tl.float32,
                             dict(var, VAR_SHIFT=True), 2, 8192)
    assert sum("LDG.E.128" in i for i in shifted) == 4 and len(shifted) < 0.6 * len(welford)


def _lse64(a: np.ndarray) -> np.ndarray:
    """float64 logsumexp over the last axis with PyTorch's special values: NaN anywhere -> NaN, a +-inf maximum ->
    that infinity."""
    a = a.astype(np.float64)
    m = a.max(-1)
    with np.errstate(all="ignore"):
        s = np.exp(a - np.where(np.isfinite(m), m, 0.0)[..., None]).sum(-1)
        r = np.where(np.isfinite(m), m + np.log(s), m)
    return np.where(np.isnan(a).any(-1), np.nan, r)


def _lse_ex2_bound(n_lane: int) -> float:
    """reduction.lse_step_ex2's bound on the lane sums' relative error after ``n_lane`` folds."""
    return n_lane * 2.0 ** -24 * (8 + 3 * math.log(max(n_lane, 1)))


def test_lse_ex2_special_values_and_worst_cases(device):
    """``LSE_EX2`` (logsumexp's fold through ``ex2.approx``) against the float64 oracle: rows where every element is a
    new maximum of its lane at steps around the ``|d|`` that maximise the bound's terms (1, ln n_l, 1/4, 8), a
    constant row, huge, subnormal and signed-zero rows, and the special values (all -inf, all +inf, +inf with
    -inf, a NaN, one finite element among -inf), within the table's tolerance and within the docstring's bound;
    through one stage and through a split (stage 2 keeps libdevice's combine); float64 inputs ignore the key."""
    from nbxtensor.runtime.configs import override
    R, blk = 512, 8
    n_l = R // blk
    i = np.arange(R, dtype=np.float64)
    rng = np.random.default_rng(5)
    rows = [i / blk - 100, i * 3 / blk, i / (4 * blk), i * 8 / blk - 5000,   # per lane |d| = 1, 3, 1/4, 8
            np.full(R, 3.25), 1e30 + 0 * i, np.full(R, 1e-40), np.where(i % 2 == 0, 0.0, -0.0),
            rng.standard_normal(R) * 10, np.sin(i) * 50]
    special = [np.full(R, -np.inf), np.full(R, np.inf), np.where(i % 3 == 0, np.inf, -np.inf),
               np.where(i == 300, np.nan, i / blk), np.where(i == 234, 2.5, -np.inf)]
    a = np.stack(rows + special).astype(np.float32)
    x = nbx.from_numpy(a).to(device)
    exp = _lse64(a)
    tile = dict(BLOCK_M=16, BLOCK_R=blk, UNROLL=1)  # one program per chunk: quick under the interpreter
    with override("reduce_rows", **tile):
        ref = H.host(nbx.logsumexp(x, 1))
    for split in ({}, dict(target_programs=64, min_chunk=64)):
        with override("reduce_rows", LSE_EX2=True, **tile, **split):
            got = H.host(nbx.logsumexp(x, 1))
        H.assert_close(got, exp, nbx.float32, reduced=R, what=f"LSE_EX2 {split}")
        fin = np.isfinite(exp)
        err = np.abs(got[fin].astype(np.float64) - exp[fin])
        # the bound plus the final log's and the lanes' tree's roundings (a few ulp of the result)
        assert (err <= _lse_ex2_bound(n_l) + 8 * 2.0 ** -24 * np.maximum(np.abs(exp[fin]), 1)).all(), (split, err)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        np.testing.assert_array_equal(got[~fin], exp[~fin])
        assert got[len(rows) + 4] == np.float32(2.5)
    # bfloat16 input: the same states, rounded once
    xb = x.to(nbx.bfloat16)
    with override("reduce_rows", LSE_EX2=True, **tile):
        gb = H.host(nbx.logsumexp(xb, 1))
    H.assert_close(gb, _lse64(H.host(xb.float())).astype(np.float32), nbx.bfloat16, what="LSE_EX2 bf16")
    # float64 accumulation keeps libdevice's path: bit-equal with and without the key
    xd = x.double()
    with override("reduce_rows", **tile):
        d0 = H.host(nbx.logsumexp(xd, 1))
    with override("reduce_rows", LSE_EX2=True, **tile):
        d1 = H.host(nbx.logsumexp(xd, 1))
    np.testing.assert_array_equal(d0, d1)


def _lse_tile_bound(n_lane: int, per_step: int) -> float:
    """reduction.lse_tile_scale's bound on the lane sums' relative error: ``n_lane`` elements, ``per_step`` a step."""
    return n_lane * 2.0 ** -24 * (6.2 + (7 + 3 * math.log(max(n_lane, 1))) / per_step)


@pytest.mark.parametrize("group", [True, 4])
def test_lse_tile_special_values_and_worst_cases(group, device, monkeypatch):
    """``LSE_TILE`` (logsumexp: one rescale per lane and step; True: a state per tile element, 4: per group of 4
    neighbours) against the float64 oracle: rows where every element is a new maximum of its lane at the ``|d|``
    that maximise the bound (1, 3, 1/4, 8), constant, huge (1e30, 1e10 + steps, +-3e38 where ``m * log2(e)``
    overflows), subnormal and signed-zero rows, and the special values (all -inf, all +inf, +inf with -inf, a NaN,
    one finite element among -inf), within the table's tolerance and the docstring's bound; UNROLL 1/2/4, unmasked
    (EVEN) and ragged rows (masked lanes read -inf), one stage and a split; float64 inputs ignore the key."""
    from nbxtensor.ops import reduction as R
    from nbxtensor.runtime.configs import override
    if device == "cpu" and os.environ.get("NBX_TRITON_INTERPRET", "0") != "1":
        pytest.skip("the cpu implementation launches no kernel")
    seen = []
    real = R.launch_quiet
    monkeypatch.setattr(R, "launch_quiet", lambda k, g, *a_, **m: (seen.append(m.get("LSE_TILE")),
                                                                    real(k, g, *a_, **m))[1])
    n, blk = 512, 8
    i = np.arange(n, dtype=np.float64)
    rng = np.random.default_rng(6)
    rows = [i / blk - 100, i * 3 / blk, i / (4 * blk), i * 8 / blk - 5000, np.full(n, 3.25), 1e30 + 0 * i,
            1e10 + i * 1024, np.where(i == 7, 3e38, i), np.full(n, -3e38), np.where(i % 5 == 0, -3e38, 3e38),
            np.full(n, 1e-40), np.where(i % 2 == 0, 0.0, -0.0), rng.standard_normal(n) * 10, np.sin(i) * 50]
    special = [np.full(n, -np.inf), np.full(n, np.inf), np.where(i % 3 == 0, np.inf, -np.inf),
               np.where(i == 300, np.nan, i / blk), np.where(i == 234, 2.5, -np.inf)]
    a = np.stack(rows + special).astype(np.float32)
    x = nbx.from_numpy(a).to(device)
    g = 1 if group is True else group
    for cols in (n, n - 3):
        v = x[:, :cols]
        exp = _lse64(a[:, :cols])
        fin = np.isfinite(exp)
        for unroll, split in ((1, {}), (2, {}), (4, {}), (4, dict(target_programs=64, min_chunk=64))):
            seen.clear()
            tile = dict(BLOCK_M=32, BLOCK_R=blk, UNROLL=unroll, EVEN=True)
            with override("reduce_rows", LSE_TILE=group, **tile, **split):
                got = H.host(nbx.logsumexp(v, 1))
            assert seen[0] == group, seen
            what = f"LSE_TILE={group} cols={cols} UNROLL={unroll} {split}"
            H.assert_close(got, exp, nbx.float32, reduced=cols, what=what)
            n_lane = -(-cols // (blk // g)) // (2 if split else 1)
            err = np.abs(got[fin].astype(np.float64) - exp[fin])
            # the bound plus the final log's and the lanes' tree's roundings (a few ulp of the result)
            bound = _lse_tile_bound(n_lane, unroll * g) + 8 * 2.0 ** -24 * np.maximum(np.abs(exp[fin]), 1)
            assert (err <= bound).all(), (what, err.max())
            np.testing.assert_array_equal(got[~fin], exp[~fin], err_msg=what)
            assert got[len(rows) + 4] == np.float32(2.5)
    # bfloat16 input: the same states, rounded once
    xb = x.to(nbx.bfloat16)
    with override("reduce_rows", LSE_TILE=group, BLOCK_M=32, BLOCK_R=blk, UNROLL=4):
        gb = H.host(nbx.logsumexp(xb, 1))
    H.assert_close(gb, _lse64(H.host(xb.float())).astype(np.float32), nbx.bfloat16, what="LSE_TILE bf16")
    # float64 accumulation keeps libdevice's path: bit-equal with and without the key
    xd = x[:3].double()
    with override("reduce_rows", BLOCK_M=32, BLOCK_R=blk):
        d0 = H.host(nbx.logsumexp(xd, 1))
    with override("reduce_rows", LSE_TILE=group, BLOCK_M=32, BLOCK_R=blk):
        d1 = H.host(nbx.logsumexp(xd, 1))
    np.testing.assert_array_equal(d0, d1)


def test_lse_ex2_cuts_the_loop_on_sm90():
    """Offline sm_90 evidence for ``LSE_EX2``: logsumexp of contiguous bfloat16 32768x8192 rows on the sm90 table's
    rule (BLOCK_R 512, 2 warps, UNROLL 4, EVEN) spends 25.6 SASS instructions per element in the main loop with
    libdevice's expf and NaN-testing max/min selects, and at most 10.5 with the key (one MUFU.EX2, one max.NaN,
    no NaN tests); ``LSE_TILE`` 8 at most 6.7."""
    reason = H.aot_skip_reason()
    if reason:
        pytest.skip(reason)
    import triton.language as tl
    from nbxtensor.ops import reduction as R

    def loop(extra):
        k = H.compile_sm90_jit(R._reduce_rows_kernel, R.K_LSE, R.P_NONE, R.F_LSE, "*bf16", tl.float32, tl.float32,
                               dict(O=32768, R=8192, chunk=8192, n_total=8192, sxo=8192, sxr=1, syo=1, sy2o=1),
                               dict(BLOCK_M=1, BLOCK_R=512, UNROLL=4, EVEN=True, **extra), 2)
        ops = [i.split()[1] if i.startswith("@") else i.split()[0] for i in H.main_loop(k.asm["sass"])]
        return [o for o in ops if not o.startswith("NOP")]
    per_thread = 512 * 4 / 64
    base, fast = loop({}), loop(dict(LSE_EX2=True))
    assert len(base) / per_thread > 20, len(base) / per_thread
    assert len(fast) / per_thread <= 10.5, len(fast) / per_thread
    assert fast.count("MUFU.EX2") == per_thread and fast.count("FMNMX.NAN") == per_thread
    assert not any(o.startswith("FSETP.NAN") for o in fast)
    # LSE_TILE with groups of 8 (a thread's 16-byte bfloat16 vector): one exponential per element plus one per group
    # and step, the group maximum in registers (no shared memory or barrier in the loop): 6.6 per element
    tile = loop(dict(LSE_TILE=8))
    assert len(tile) / per_thread <= 6.7, len(tile) / per_thread
    assert tile.count("MUFU.EX2") <= per_thread + per_thread // 8, tile.count("MUFU.EX2")
    assert not any(o.startswith(("STS", "LDS", "BAR")) for o in tile)


# ---------------------------------------------------------------------------------------------------------
# ARG_FAST (arg-extrema: one unordered compare and a NaN test per element, two one-value lane trees) and the
# count_nonzero keys WORDS (float16/bfloat16 counted two per int32 word) and COUNT32 (int32 counts)
# ---------------------------------------------------------------------------------------------------------
def _arg_rows(n: int) -> np.ndarray:
    """float64 rows of length ``n`` (odd) for arg-extrema: NaN first occurrence late in a row, all-NaN, all -inf,
    +-inf ties, -0.0 then +0.0 (and the reverse) as the extreme, ties across lanes and across unrolled tiles."""
    rng = np.random.default_rng(21)
    a = rng.standard_normal((10, n))
    a[0, [n - 3, 9]] = np.nan            # the first NaN (position 9) wins over every value
    a[1] = np.nan
    a[2] = -np.inf
    a[3, [4, n - 2]] = np.inf
    a[3, [2, n - 5]] = -np.inf
    a[4] = -1.0
    a[4, [6, 13]] = -0.0                # -0.0 first, then +0.0: a tie, the first wins with its sign
    a[4, [11, 20]] = 0.0
    a[5] = 1.0
    a[5, [3, 17]] = 0.0                 # +0.0 first for argmin
    a[5, [8, 30]] = -0.0
    a[6] = 2.5                          # a constant row: index 0
    a[7, [n - 1, 1]] = 7.0              # ties far apart: the first
    a[7, [n - 4, 5]] = -7.0
    a[8, -1] = np.nan                   # NaN the last element only
    return a


def _assert_same_bits(got, ref, what):
    for g, r in zip(got if isinstance(got, tuple) else (got,), ref if isinstance(ref, tuple) else (ref,)):
        g, r = H.host(g), H.host(r)
        assert g.dtype == r.dtype and g.shape == r.shape, what
        assert g.tobytes() == r.tobytes(), f"{what}: {g} vs {r}"


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float64", "int32"])
def test_arg_fast_keeps_results_bit_for_bit(dt, device):
    """``ARG_FAST``: indices and values equal the pair tree's bit for bit (-0.0 keeps its sign, a NaN its bits) and
    PyTorch's rule (first NaN, else the first occurrence of the extreme; -0.0 == +0.0), along rows (one stage and a
    split) and along columns, with unrolled tiles and ragged tails."""
    from nbxtensor.runtime.configs import override
    a = _arg_rows(45)
    if dt == "int32":
        a = np.nan_to_num(np.round(a * 3), nan=9, posinf=8, neginf=-8)
    x = nbx.from_numpy(a).to(getattr(T, dt)).to(device)
    ha = H.host(x.float() if dt == "bfloat16" else x).astype(np.float64)
    settings = [("reduce_rows", dict(BLOCK_M=2, BLOCK_R=4, UNROLL=2)),
                ("reduce_rows", dict(BLOCK_M=1, BLOCK_R=4, UNROLL=4, EVEN=True)),
                ("reduce_rows", dict(BLOCK_M=1, BLOCK_R=4, target_programs=64, min_chunk=8)),
                ("reduce_cols", dict(BLOCK_R=2, BLOCK_I=4, UNROLL=2)),
                ("reduce_cols", dict(BLOCK_R=2, BLOCK_I=4, target_programs=64, min_chunk=4))]
    for rule, st in settings:
        v = x if rule == "reduce_rows" else x.t().contiguous().t()   # rows along a strided axis: the cols kernel
        for largest in (True, False):
            fn = nbx.max if largest else nbx.min
            with override(rule, **st):
                ref = fn(v, 1)
                ref_i = (nbx.argmax if largest else nbx.argmin)(v, 1)
            with override(rule, ARG_FAST=True, **st):
                got = fn(v, 1)
                got_i = (nbx.argmax if largest else nbx.argmin)(v, 1)
            what = f"{dt} {rule} {st} largest={largest}"
            _assert_same_bits(tuple(got), tuple(ref), what)
            _assert_same_bits(got_i, ref_i, what)
            np.testing.assert_array_equal(H.host(got_i), _first_extreme(ha, largest, 1), err_msg=what)
            if dt in ("float32", "float64"):
                vals = H.host(got[0])
                assert np.signbit(vals[4 if largest else 5]) == largest, what  # the first zero's sign (-0.0 / +0.0)


def test_arg_fast_reaches_the_kernels(device, monkeypatch):
    """The key is a kernel constexpr for raw arg-extrema stages only (not sums, not a split's combine)."""
    from nbxtensor.ops import reduction as R
    from nbxtensor.runtime.configs import override
    seen = []
    real = R.launch_quiet
    monkeypatch.setattr(R, "launch_quiet", lambda k, g, *a, **m: (seen.append((m["KIND"], m["STAGE"],
                                                                                  m["ARG_FAST"])), real(k, g, *a, **m)))
    x = nbx.from_numpy(np.arange(40, dtype=np.float32).reshape(2, 20)).to(device)
    with override("reduce_rows", ARG_FAST=True, BLOCK_M=1, BLOCK_R=4, target_programs=64, min_chunk=8):
        if device == "cpu" and os.environ.get("NBX_TRITON_INTERPRET", "0") != "1":
            pytest.skip("the cpu implementation launches no kernel")
        assert H.host(nbx.argmax(x, 1)).tolist() == [19, 19]
        nbx.sum(x, 1)
    assert (R.K_ARGMAX, 1, True) in seen and (R.K_ARGMAX, 2, False) in seen and (R.K_SUM, 1, False) in seen


@pytest.mark.parametrize("dt", ["bfloat16", "float16"])
def test_count_nonzero_words_and_count32(dt, device, monkeypatch):
    """``WORDS`` counts float16/bfloat16 nonzeros two per int32 word (-0.0 is zero, NaN, inf and subnormals are not;
    every bit pattern of a half checked), ``COUNT32`` counts in int32: the same int64 counts as the default path on
    layouts that take the word path (contiguous rows, an even slice, one row) and those that may not (odd length,
    odd offset, transposed), one stage and split."""
    from nbxtensor.ops import reduction as R
    from nbxtensor.runtime.configs import override
    if device == "cpu" and os.environ.get("NBX_TRITON_INTERPRET", "0") != "1":
        pytest.skip("the cpu implementation launches no kernel")
    rng = np.random.default_rng(3)
    bits = np.arange(1 << 16, dtype=np.uint16)          # every 16-bit pattern once, shuffled into rows
    rng.shuffle(bits)
    allbits = bits.reshape(64, 1024)
    a = rng.standard_normal((7, 66)).astype(np.float32)
    a[a > 0.3] = 0.0
    a[0] = -0.0
    a[1] = 0.0
    a[1, [0, 65]] = -1e-40 if dt == "bfloat16" else -6e-8   # subnormals: nonzero
    a[2, ::2] = np.nan
    a[3, 1::3] = -np.inf
    x = nbx.from_numpy(a).to(getattr(T, dt)).to(device)
    import ml_dtypes
    xb = nbx.from_numpy(allbits.view(ml_dtypes.bfloat16 if dt == "bfloat16" else np.float16)).to(device)
    pres = []
    real = R.launch_quiet
    def spy(k, g, *a_, **m):
        # the CUDA launcher refuses keywords a kernel does not take (the H200 sweep's split variants passed WORDS to
        # the second stage); the interpreter does not check, so check here
        assert "WORDS" not in m and "COUNT32" not in m, sorted(m)
        pres.append(m["PRE"])
        return real(k, g, *a_, **m)
    monkeypatch.setattr(R, "launch_quiet", spy)
    views = [x, x[:, 2:64], x[:, 1:], x[:, :65], x.t(), x[2:5].reshape(-1)]
    for v in views:
        dims = [-1, None] if v.ndim == 2 else [None]
        for d in dims:
            ref = nbx.count_nonzero(v) if d is None else nbx.count_nonzero(v, d)
            want = (H.host(v.float()) != 0).sum(axis=d)
            np.testing.assert_array_equal(H.host(ref), want)
            for st in (dict(WORDS=True, BLOCK_M=2, BLOCK_R=8), dict(WORDS=True, BLOCK_M=1, BLOCK_R=4, UNROLL=4,
                                                                     EVEN=True),
                       dict(WORDS=True, BLOCK_M=1, BLOCK_R=4, target_programs=64, min_chunk=8),
                       dict(COUNT32=True, BLOCK_M=1, BLOCK_R=8, UNROLL=2),
                       dict(COUNT32=True, BLOCK_M=1, BLOCK_R=4, target_programs=64, min_chunk=8)):
                with override("reduce_rows", **st):
                    got = nbx.count_nonzero(v) if d is None else nbx.count_nonzero(v, d)
                assert got.dtype is nbx.int64
                np.testing.assert_array_equal(H.host(got), want, err_msg=f"{v.shape} {d} {st}")
    assert R.P_NZ_PAIRS in pres          # the word path ran
    # every bit pattern once: 65536 - 2 nonzero (+0.0 and -0.0 are zero)
    with override("reduce_rows", WORDS=True, BLOCK_M=1, BLOCK_R=256, UNROLL=4, EVEN=True):
        assert int(H.host(nbx.count_nonzero(xb))) == (1 << 16) - 2


def test_arg_fast_and_count_words_cut_instructions_on_sm90():
    """Offline sm_90 evidence (contiguous bfloat16 32768x8192 rows, the sm90 table's tiles): ``ARG_FAST`` cuts
    max(dim)'s main loop (6.34 -> 5.34 SASS per element, 2 warps, BLOCK_R 512, UNROLL 4, EVEN; kernel 504 -> 484); ``WORDS``
    counts nonzeros in 2.5 loop instructions per element with plain 16-byte loads (BLOCK_R 512 words, UNROLL 4,
    EVEN) against 8.1 for the table's int64 path."""
    reason = H.aot_skip_reason()
    if reason:
        pytest.skip(reason)
    import triton.language as tl
    from nbxtensor.ops import reduction as R
    vals = dict(O=32768, R=8192, chunk=8192, n_total=8192, sxo=8192, sxr=1, syo=1, sy2o=1)

    def build(kind, pre, acc, loadt, xt, extra, nw, values=vals):
        k = H.compile_sm90_jit(R._reduce_rows_kernel, kind, pre, R.F_NONE, xt, acc, loadt, values, extra, nw)
        loop = [i for i in H.main_loop(k.asm["sass"]) if "NOP" not in i]
        return loop, [ln for ln in k.asm["sass"].splitlines() if "\t" in ln and "NOP" not in ln]
    arg = dict(BLOCK_M=1, BLOCK_R=512, UNROLL=4, EVEN=True, OTHER=float("-inf"))
    base, kb = build(R.K_ARGMAX, R.P_NONE, tl.float32, tl.float32, "*bf16", arg, 2)
    fast, kf = build(R.K_ARGMAX, R.P_NONE, tl.float32, tl.float32, "*bf16", dict(arg, ARG_FAST=True), 2)
    per = 512 * 4 / 64
    assert len(fast) / per <= 5.5 < len(base) / per and len(kf) < len(kb), (len(fast), len(base), len(kf), len(kb))
    nz = dict(BLOCK_M=1, BLOCK_R=512, UNROLL=4, EVEN=True)
    words, _ = build(R.K_SUM, R.P_NZ_PAIRS, tl.int32, tl.int32, "*i32", nz, 4,
                     dict(vals, R=4096, chunk=4096, sxo=4096))
    assert sum("LDG.E.128" in i for i in words) == 4 and len(words) / (512 * 4 / 128 * 2) <= 2.6, len(words)
    asw, _ = build(R.K_SUM, R.P_NZ_PAIRS, tl.int32, tl.int32, "*bf16", dict(nz, AS_WORDS=True), 4,
                   dict(vals, R=4096, chunk=4096, sxo=4096))
    assert sum("LDG.E.128" in i for i in asw) == 4 and len(asw) == len(words), (len(asw), len(words))


# ---------------------------------------------------------------------------------------------------------
# ARG_ROW (arg-extrema of whole rows in registers: _arg_row_kernel)
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", ["float32", "bfloat16", "float64", "int32"])
def test_arg_row_keeps_results_bit_for_bit(dt, device, monkeypatch):
    """``ARG_ROW``: values and indices equal the loop kernel's bit for bit (first NaN, all-NaN, all -inf, ties far
    apart, -0.0 before +0.0 keeps its sign, NaN only last) and PyTorch's rule, for odd and power-of-two widths,
    one and several rows per program (programs with and without a NaN row: the block-uniform NaN branch both
    ways; a ragged last program), unmasked (EVEN) and masked; rows wider than the key take the loop kernel."""
    from nbxtensor.ops import reduction as R
    from nbxtensor.runtime.configs import override
    if device == "cpu" and os.environ.get("NBX_TRITON_INTERPRET", "0") != "1":
        pytest.skip("the cpu implementation launches no kernel")
    kernels, st = [], {}
    real = R.launch_quiet
    def spy(k, g, *a_, **m):
        assert not any(k_.startswith("ARG_ROW") for k_ in m), sorted(m)  # the CUDA launcher refuses keywords a
        kernels.append(k)                                                  # kernel does not take
        if k is R._arg_row_kernel and "ARG_ROW_M" in str(st):
            assert m["BLOCK_M"] == 4 and m["num_warps"] == 2, m
        return real(k, g, *a_, **m)
    monkeypatch.setattr(R, "launch_quiet", spy)
    for n in (45, 32):
        a = _arg_rows(n)
        if dt == "int32":
            a = np.nan_to_num(np.round(a * 3), nan=9, posinf=8, neginf=-8)
        x = nbx.from_numpy(a).to(getattr(T, dt)).to(device)
        ha = H.host(x.float() if dt == "bfloat16" else x).astype(np.float64)
        for largest in (True, False):
            fn, afn = (nbx.max, nbx.argmax) if largest else (nbx.min, nbx.argmin)
            ref, ref_i = fn(x, 1), afn(x, 1)
            for st in (dict(ARG_ROW=64), dict(ARG_ROW=n, BLOCK_M=2, EVEN=True), dict(ARG_ROW=64, ARG_ROW_M=4,
                                                                                       ARG_ROW_WARPS=2)):
                kernels.clear()
                with override("reduce_rows", **st):
                    got, got_i = fn(x, 1), afn(x, 1)
                assert kernels == [R._arg_row_kernel] * 2, kernels
                what = f"{dt} n={n} {st} largest={largest}"
                _assert_same_bits(tuple(got), tuple(ref), what)
                _assert_same_bits(got_i, ref_i, what)
                np.testing.assert_array_equal(H.host(got_i), _first_extreme(ha, largest, 1), err_msg=what)
                if dt in ("float32", "float64"):
                    assert np.signbit(H.host(got[0])[4 if largest else 5]) == largest, what
    kernels.clear()
    with override("reduce_rows", ARG_ROW=16, BLOCK_M=1, BLOCK_R=4):   # rows of 32 > 16: the loop kernel
        np.testing.assert_array_equal(H.host(nbx.argmax(x, 1)), _first_extreme(ha, True, 1))
    assert kernels and R._arg_row_kernel not in kernels


def test_arg_row_sass_on_sm90():
    """Offline sm_90 evidence for ``ARG_ROW`` (bfloat16 rows of 8192, one row per program, 4 warps): the row is read
    by 8 plain 16-byte loads per thread (no cp.async, no loop), and the kernel, both sides of its NaN branch
    included, stays under 18 instructions per element (the common path about 7.5; ARG_FAST's loop 5.4 plus its
    per-step and tree overhead)."""
    reason = H.aot_skip_reason()
    if reason:
        pytest.skip(reason)
    from nbxtensor.ops import reduction as R
    k = H.compile_sm90_arg_row(R.K_ARGMAX, 1, 8192, 4)
    sass = [ln for ln in k.asm["sass"].splitlines() if "\t" in ln and "NOP" not in ln]
    assert sum("LDG.E.128" in i for i in sass) == 8 and not any("LDGSTS" in i for i in sass)
    assert len(H.main_loop(k.asm["sass"])) <= 1  # (the closing self-branch after EXIT)
    assert len(sass) / (8192 / 128) < 18, len(sass)


def test_sm90_table_turns_arg_fast_on_for_arg_reductions():
    """runtime/configs/sm90.json: the reduce_rows rule of (value, index) states (argmax/argmin, max/min with
    indices) sets ARG_FAST (H200, sweep_reduce session 6: argmax bf16 32768x8192 80.3 -> 81.9 % of 4.8 TB/s, same
    bits); the generic and interpreter tables leave it off."""
    import json
    from pathlib import Path
    from nbxtensor.runtime import configs
    root = Path(configs.__file__).parent / "configs"
    rules = json.loads((root / "sm90.json").read_text())["reduce_rows"]
    assert [r["config"].get("ARG_FAST") for r in rules if r.get("max_state") == 2] == [True]
    # and LSE_TILE 8 for logsumexp (the same rule; sweep_reduce at aa6074c: logsumexp bf16 72.7 -> 79.2 %)
    assert [r["config"].get("LSE_TILE") for r in rules if r.get("max_state") == 2] == [8]
    for name in ("generic", "interpret"):
        other = json.loads((root / f"{name}.json").read_text()).get("reduce_rows", [])
        assert not any(r["config"].get("ARG_FAST") for r in other), name
