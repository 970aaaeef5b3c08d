"""Scans (src/nbxtensor/ops/scan.py): every record against its float64 oracle (PyTorch's sequential rules) over
dtypes x layouts x dims, special values, error inputs from the records, and the cases the issue names.

Runs on the device under test; under ``NBX_TRITON_INTERPRET=1`` through the Triton kernels (``NBX_TEST_QUICK=1``
shrinks the matrix).
"""

from __future__ import annotations

import math
import warnings
import zlib

import numpy as np
import pytest

import nbxtensor as nbx
import reduce_harness as H
from nbxtensor.dtypes import table as T
from nbxtensor.ops import registry

FAMILY = "scan"
RECS = H.records(FAMILY)
LAYOUTS = [la for la in H.layouts() if la not in ("zero_reduced",)] + ["contig3d"]


def _dims(ndim: int) -> list:
    return [0] if ndim == 0 else ([0, -1] + ([1] if ndim == 3 else []))


def _cases():
    out = []
    for rec in RECS:
        dts = H.test_dtypes(rec)[: (3 if H.SUBSAMPLE else None)]
        k = 0
        for dt in dts:
            for layout in LAYOUTS:
                ds = _dims(H.ndim_for(layout))
                out.append((rec.name, dt.name, layout, ds[k % len(ds)], {}))
                k += 1
        dt = T.float32 if T.float32 in dts else dts[0]
        for layout in ("contiguous", "contig3d", "transposed", "permuted3d"):
            for d in _dims(3 if "3d" in layout else 2):
                out.append((rec.name, dt.name, layout, d, {}))
        if rec.name in ("cumsum", "cumprod"):
            for dt2, to in ((T.float16, T.float32), (T.int32, T.float64), (T.float32, T.int32)):
                out.append((rec.name, dt2.name, "contiguous", -1, {"dtype": to}))
    return out


CASES = _cases()


def _seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def _check(rec, host_in, x, kw, what):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = rec.extra["function"](x, **kw)
        exp = rec.oracle(host_in, **kw)
    outs = list(res) if isinstance(res, tuple) else [res]
    exps = list(exp) if isinstance(exp, tuple) else [exp]
    k = host_in.shape[kw["dim"]] if host_in.ndim else 1
    for o, e in zip(outs, exps):
        H.assert_close(H.host(o), H.expected_as(e, o.dtype), o.dtype, reduced=k, what=what)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}-dim{c[3]}" + (f"-{c[4]}" if c[4] else "")
                                             for c in CASES])
def test_against_oracle(case, device):
    name, dtn, layout, dim, kw = case
    rec = registry.get(name)
    dt = T.dtype_from(dtn)
    shape = H.shape_for("permuted3d" if layout == "contig3d" else layout, device, "scan_rows")
    host_in = H.values(rec.extra.get("domain", "normal"), dt, shape, np.random.default_rng(_seed(case)))
    if layout == "expanded":
        host_in = np.broadcast_to(host_in[:1], shape)
    x = H.make(host_in, "contiguous" if layout == "contig3d" else layout, device)
    _check(rec, host_in, x, {"dim": dim, **kw}, f"{name}[{dtn}, {layout}, dim={dim}, {kw}]")


SPECIAL = [(r.name, d.name, dim) for r in RECS for d in H.FLOATS
           if d in r.extra["dtypes"] and (not H.SUBSAMPLE or d in (T.float32, T.bfloat16)) for dim in (0, 1)]


@pytest.mark.parametrize("case", SPECIAL, ids=[f"{c[0]}-{c[1]}-dim{c[2]}" for c in SPECIAL])
def test_special_values(case, device):
    name, dtn, dim = case
    rec = registry.get(name)
    dt = T.dtype_from(dtn)
    shape = (5, 9) if H.QUICK else (13, 40)
    host_in = H.special_values(dt, shape, np.random.default_rng(_seed(case)), rec.extra.get("domain", "normal"))
    _check(rec, host_in, H.make(host_in, "contiguous", device), {"dim": dim}, f"{name}[{dtn}, special, dim={dim}]")


ERRORS = H.error_cases(FAMILY)


@pytest.mark.parametrize("rec,err", ERRORS, ids=[f"{r.name}-{e[0]}" for r, e in ERRORS])
def test_error_inputs(rec, err, device):
    label, args, kwargs, exc, match = err[:5]
    with pytest.raises(exc, match=match):
        rec.extra["function"](*[H.materialize(v, device) for v in args],
                              **{k: H.materialize(v, device) for k, v in kwargs.items()})


def test_records_are_whole():
    for rec in RECS:
        assert rec.cpu and rec.triton and rec.oracle and rec.extra["errors"], rec.name
        c = rec.cost(nbx.zeros(4, 5), 1)
        assert c.bytes_read == 80 and c.bytes_written >= 80 and c.flops > 0


def test_half_cumsum_accumulates_in_float32(device):
    r = nbx.ones(4096, dtype=nbx.float16, device=device).cumsum(0)
    assert r.dtype is nbx.float16 and r[-1].item() == 4096.0 and r[2047].item() == 2048.0


def test_cummax_cummin_ties_and_nan(device):
    nan = float("nan")
    v, i = nbx.tensor([1.0, 3.0, nan, 3.0, nan], device=device).cummax(0)
    assert i.tolist() == [0, 1, 2, 2, 4] and np.isnan(H.host(v)[2:]).all()
    assert nbx.tensor([1.0, 3.0, 2.0, 3.0, 1.0], device=device).cummax(0).indices.tolist() == [0, 1, 1, 3, 3]
    assert nbx.tensor([1.0, 0.0, 2.0, 0.0, 1.0], device=device).cummin(0).indices.tolist() == [0, 1, 1, 3, 3]
    assert nbx.tensor([3, 1, 1, 2], device=device).cummin(0).indices.tolist() == [0, 1, 2, 2]
    r = nbx.tensor([True, False, True], device=device).cummax(0)
    assert r._fields == ("values", "indices") and r.indices.tolist() == [0, 0, 2]


def test_logcumsumexp_infinities(device):
    ni = float("-inf")
    r = nbx.logcumsumexp(nbx.tensor([ni, ni, 0.0, float("inf"), 1.0], device=device), 0)
    assert r.tolist() == [ni, ni, 0.0, math.inf, math.inf]
    r = nbx.tensor([1.0, float("nan"), 1.0], device=device).logcumsumexp(0)
    assert r[0].item() == 1.0 and np.isnan(H.host(r)[1:]).all()


def test_dtypes_and_zero_dim(device):
    assert nbx.cumsum(nbx.tensor([1, 2], dtype=nbx.int8, device=device), 0).dtype is nbx.int64
    assert nbx.cumprod(nbx.tensor([True, False], device=device), 0).tolist() == [1, 0]
    assert nbx.cumsum(nbx.ones(3, device=device), 0, dtype=nbx.int32).tolist() == [1, 2, 3]
    assert nbx.tensor(2.5, device=device).cumsum(0).item() == 2.5
    e = nbx.ones(0, 3, device=device).cummax(0)
    assert tuple(e.values.shape) == (0, 3) and e.indices.dtype is nbx.int64


def test_out_and_methods(device):
    x = nbx.ones(2, 3, device=device)
    o = nbx.empty(2, 3, dtype=nbx.float64, device=device)
    assert nbx.cumsum(x, 1, out=o) is o and o.tolist() == [[1.0, 2.0, 3.0]] * 2
    v, i = nbx.empty(2, 3, device=device), nbx.empty(2, 3, dtype=nbx.int64, device=device)
    r = nbx.cummin(x, 0, out=(v, i))
    assert r.values is v and i.tolist() == [[0, 0, 0], [1, 1, 1]]
    assert x.cumprod(dim=1).tolist() == [[1.0, 1.0, 1.0]] * 2


@pytest.mark.parametrize("kind", range(5))
@pytest.mark.parametrize("xt", ["*bf16", "*i32", "*fp64"])
def test_kernels_compile_for_sm90(kind, xt):
    """The scan kernels compile for the H200 (sm90) here, without a GPU (Triton's LLVM and bundled ptxas)."""
    reason = H.aot_skip_reason()
    if reason:
        pytest.skip(reason)
    import triton.language as tl
    from nbxtensor.ops import scan as S
    if kind == S.S_LSE and xt == "*i32":
        pytest.skip("logcumsumexp takes floating inputs")
    acc = {"*bf16": tl.float32, "*i32": tl.int64, "*fp64": tl.float64}[xt]
    yt = "*i64" if xt == "*i32" else xt
    types = {"x_ptr": xt, "y_ptr": yt, "yi_ptr": "*i64", "O": "i32", "I": "i32", "R": "i32", "sxo": "i64", "sxr": "i64",
             "sxi": "i64", "syo": "i64", "syr": "i64", "syi": "i64", "sio": "i64", "sir": "i64", "sii": "i64"}
    consts = dict(KIND=kind, HAS_I=kind in (S.S_MAX, S.S_MIN), ACC=acc, IDENT=S._ident(kind, H.nbx_dtype(acc)))
    H.compile_sm90(S._scan_rows_kernel, types, dict(consts, BLOCK_M=4, BLOCK_R=512))
    H.compile_sm90(S._scan_cols_kernel, types, dict(consts, BLOCK_R=16, BLOCK_I=128))


def test_out_dtype_is_the_computation_dtype(device):
    # as torch.cumsum: out's dtype is the accumulation dtype (1 + 2**-8 + 2**-9 is exact in float32, not in bfloat16)
    w = nbx.tensor([[1.0, 2.0 ** -8, 2.0 ** -9]], dtype=nbx.bfloat16, device=device)
    assert nbx.cumsum(w, 1, out=nbx.empty(0, device=device)).tolist() == [[1.0, 1.00390625, 1.005859375]]
    assert nbx.cumsum(w, 1).tolist()[0][-1] == 1.0078125
    f = nbx.tensor([[0.7, 0.7, 0.7, 1.6]], device=device)   # the input converted first: truncated
    assert nbx.cumsum(f, 1, out=nbx.empty(0, dtype=nbx.int8, device=device)).tolist() == [[0, 0, 0, 1]]
    assert nbx.cumprod(f, 1, out=nbx.empty(0, dtype=nbx.float64, device=device)).tolist()[0][1] == \
        pytest.approx(0.49, rel=1e-6)


def test_out_dtype_refusals(device):
    x = nbx.ones(2, 3, device=device)

    def o(dt):
        return nbx.empty(0, dtype=dt, device=device)
    with pytest.raises(NotImplementedError, match="'Bool'"):
        nbx.cumsum(x, 1, out=o(nbx.bool))
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype double, but got float instead"):
        nbx.cumprod(x, 1, dtype=nbx.float64, out=o(nbx.float32))
    with pytest.raises(RuntimeError, match="expected scalar_type Float but found Double"):
        nbx.logcumsumexp(x, 1, out=o(nbx.float64))
    with pytest.raises(RuntimeError, match="expected scalar_type Long but found Int"):
        nbx.cummax(x, 1, out=(o(nbx.float32), o(nbx.int32)))
