"""Test matrix for pointwise records, generated from the op table (used by test_elementwise.py and
test_activation.py; not a test module itself).

For a record it draws inputs from the record's ``domain`` for each dtype and layout, runs the op on the device
under test, runs the record's float64 oracle on the same (exactly representable) values, casts the oracle's
result to the output dtype and compares with :func:`nbxtensor.dtypes.tolerance` (exact for integers and bool;
NaN equals NaN; infinities must match), widened only by the record's declared ``tolerance`` override.

``NBX_TEST_QUICK=1`` shrinks dtypes, layouts and sizes (the interpreter tier).
"""

from __future__ import annotations

import os

import numpy as np

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.dtypes.casting import cast_array
from nbxtensor.ops import registry
from nbxtensor.ops.dispatch import promote
from nbxtensor.runtime.configs import launch_config

QUICK = os.environ.get("NBX_TEST_QUICK", "0") == "1"
INTERPRET = os.environ.get("NBX_TRITON_INTERPRET", "0") == "1"

ALL_DTYPES = [d for d in T.DTYPES if not d.is_complex]
QUICK_DTYPES = [T.float32, T.float16, T.bfloat16, T.int32, T.uint8, T.bool_, T.float8_e4m3fn]
FLOAT_DTYPES = [T.float16, T.bfloat16, T.float32, T.float64]


def pointwise_records(family: str) -> list:
    """Records of ``family`` with a schema, in table order, except those with ``generic_test=False``."""
    return [r for r in registry.all_ops() if r.family == family and r.extra.get("kind") == "pointwise"
            and r.extra.get("generic_test", True)]


def allowed(rec, args=None) -> list:
    a = rec.extra.get("dtypes")
    if callable(a):
        a = a(args or {})
    refused = rec.extra.get("refused", ())  # dtypes a record refuses with PyTorch's own message (error data)
    return [d for d in ALL_DTYPES if (a is None or d in a) and d not in refused]


def test_dtypes(rec) -> list:
    ds = allowed(rec)
    if QUICK:
        picked = [d for d in QUICK_DTYPES if d in ds]
        return picked[:3] if len(picked) > 3 else picked
    return ds


def block_size(device) -> int:
    return launch_config("pointwise", nbx.device(device), numel=4096)["BLOCK"]


def layouts(device) -> list[str]:
    base = ["contiguous", "transposed", "sliced", "expanded", "broadcast", "zero", "scalar0d", "block_k1"]
    if QUICK:
        return ["contiguous", "transposed", "expanded", "block_k1", "zero"]
    return base + ["5d", "odd_big"]


# ---------------------------------------------------------------------------------------------------------
# Values
# ---------------------------------------------------------------------------------------------------------
def _float_vals(domain: str, n: int, rng, which: int):
    u = rng.uniform
    if domain in ("small",):
        return u(-4, 4, n)
    if domain == "positive" or (domain == "positive2" and which == 1):
        return u(0.05, 8, n)
    if domain == "unit":
        return u(-0.95, 0.95, n)
    if domain == "ge1":
        return u(1, 8, n)
    if domain == "gt-1":
        return u(-0.9, 6, n)
    if domain == "nonzero" or (domain in ("divisor",) and which == 1) or (domain == "divisor3" and which == 2):
        v = u(0.5, 5, n)
        return np.where(rng.random(n) < 0.5, -v, v)
    if domain == "wide":
        v = np.round(u(-20, 20, n) * 4) / 4  # quarters: exact halves for rounding, ties for floor/ceil
        return v
    if domain == "pow":
        return u(0.1, 3, n) if which == 0 else np.round(u(-3, 3, n) * 2) / 2
    if domain == "clamp":
        return u(-4, 4, n)
    return u(-3, 3, n)


def _int_vals(domain: str, n: int, rng, dt, which: int):
    info = np.iinfo(dt.numpy)
    lo, hi = max(int(info.min), -20), min(int(info.max), 40)
    if domain == "shift" and which == 1:
        return rng.integers(0, dt.itemsize * 8, n)
    if domain == "pow":
        return rng.integers(max(lo, -3), min(hi, 4), n) if which == 0 else rng.integers(0, 6, n)
    if domain in ("divisor", "nonzero") and which == 1 or domain == "divisor3" and which == 2:
        v = rng.integers(1, min(hi, 9), n)
        return np.where((rng.random(n) < 0.5) & (lo < 0), -v, v)
    if domain == "small":
        return rng.integers(max(lo, -5), min(hi, 6), n)
    return rng.integers(lo, hi, n)


def values(rec, dt, shape, rng, which: int) -> np.ndarray:
    """Host values of dtype ``dt`` (exactly what the tensor will hold) for operand ``which`` of ``rec``."""
    domain = rec.extra.get("domain", "any")
    n = int(np.prod(shape)) if shape else 1
    if dt is T.bool_ or (domain in ("where", "where2") and which == (0 if domain == "where" else 1)):
        v = rng.random(n) < 0.5
        return v.reshape(shape)
    if dt.kind == T.KIND_FLOAT:
        v = _float_vals(domain, n, rng, which)
        if dt in (T.float8_e4m3fn, T.float8_e5m2):
            v = np.clip(v, -200, 200)
        return cast_array(v.reshape(shape), T.float64, dt)
    v = _int_vals(domain, n, rng, dt, which)
    return cast_array(np.asarray(v, dtype=np.int64).reshape(shape), T.int64, dt)


SPECIAL = {
    T.float16: [0.0, -0.0, np.inf, -np.inf, np.nan, 6e-8, -3e-6, 1.0, -1.0, 0.5, -2.5, 3.0, 1000.0],
    T.bfloat16: [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-39, -5e-40, 1.0, -1.0, 0.5, -2.5, 3.0, 1000.0],
    T.float32: [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -2e-40, 1.0, -1.0, 0.5, -2.5, 3.0, 1000.0],
    T.float64: [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -1e-310, 1.0, -1.0, 0.5, -2.5, 3.0, 1000.0],
}


# ---------------------------------------------------------------------------------------------------------
# Layouts
# ---------------------------------------------------------------------------------------------------------
def make_operand(host: np.ndarray, dt, layout: str, device):
    """A tensor on ``device`` holding ``host`` (shape = the operand's logical shape) in ``layout``."""
    shape = host.shape
    if layout == "transposed" and len(shape) == 2:
        base = nbx.from_numpy(np.ascontiguousarray(host.T)).to(device)
        return base.t()
    if layout == "sliced" and len(shape) == 2:
        big = np.zeros((shape[0] + 2, shape[1] * 2 + 1), dtype=host.dtype)
        big[1:1 + shape[0], 1:1 + 2 * shape[1]:2] = host
        return nbx.from_numpy(big).to(device)[1:1 + shape[0], 1:1 + 2 * shape[1]:2]
    return nbx.from_numpy(np.ascontiguousarray(host)).to(device)


def shapes_for(layout: str, arity: int, block: int) -> list:
    """Operand shapes (before layout) for ``arity`` operands and the result's shape."""
    if layout == "zero":
        return [(0, 3)] * arity
    if layout == "scalar0d":
        return [()] * arity
    if layout == "block_k1":
        return [(block * (1 if QUICK else 2) + 1,)] * arity
    if layout == "broadcast":
        return [(5, 1) if i % 2 == 0 else (1, 6) for i in range(arity)]
    if layout == "expanded":
        return [(1, 7)] * arity  # expanded to (4, 7) with stride 0 below
    if layout == "5d":
        return [(2, 3, 1, 2, 3)] * arity
    if layout == "odd_big":
        return [(1823, 781)] * arity
    if QUICK:
        return [(6, 5)] * arity
    return [(13, 11)] * arity


# ---------------------------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------------------------
def to_oracle_input(host: np.ndarray, dt, compute) -> np.ndarray:
    """float64 values for a floating compute dtype; the compute dtype's exact values otherwise."""
    if compute.kind == T.KIND_FLOAT:
        return cast_array(host, dt, T.float64)
    if dt is compute:
        return host
    return cast_array(host, dt, compute)


def expected(rec, host_inputs, dts, out_dtype, prom, params):
    oins = []
    raw = rec.extra.get("raw", 0)
    ct = rec.extra.get("test_compute", lambda p: p.compute)(prom)
    for k, (h, d) in enumerate(zip(host_inputs, dts)):
        if h is None:
            oins.append(None)
        elif (raw >> k) & 1:
            oins.append(h)
        else:
            oins.append(to_oracle_input(h, d, ct))
    with np.errstate(all="ignore"):
        r = np.asarray(rec.oracle(*oins, **params))
    if r.dtype == object:
        r = r.astype(np.float64)
    src = T.from_numpy_dtype(r.dtype)
    return cast_array(r, src, out_dtype), oins


def assert_close(actual: np.ndarray, exp: np.ndarray, dt, *, extra_atol=None, what=""):
    """Compare by the tolerance table; NaN == NaN; infinities equal; integers and bool exact."""
    assert actual.shape == exp.shape, (what, actual.shape, exp.shape)
    if dt.kind != T.KIND_FLOAT:
        bad = actual != exp
        assert not bad.any(), f"{what}: {bad.sum()} mismatches, e.g. got {actual[bad][:5]} expected {exp[bad][:5]}"
        return
    a = cast_array(actual, dt, T.float64)
    e = cast_array(exp, dt, T.float64)
    tol = nbx.dtypes.tolerance(dt)
    atol = tol.atol + (0 if extra_atol is None else tol.rtol * 4 * np.broadcast_to(extra_atol, e.shape))
    nan_ok = np.isnan(a) == np.isnan(e)
    inf_ok = np.where(np.isinf(e) | np.isinf(a), a == e, True)
    with np.errstate(all="ignore"):
        close = np.where(np.isnan(e) | np.isinf(e) | np.isinf(a), True, np.abs(a - e) <= atol + tol.rtol * np.abs(e))
    ok = nan_ok & inf_ok & close
    if not ok.all():
        idx = np.flatnonzero(~ok.reshape(-1))[:6]
        raise AssertionError(f"{what}: {(~ok).sum()} of {ok.size} elements differ; got {a.reshape(-1)[idx]} "
                             f"expected {e.reshape(-1)[idx]} (dtype {dt.name}, rtol {tol.rtol}, atol {tol.atol})")


def result_host(t) -> np.ndarray:
    return np.asarray(t.cpu().numpy()).copy()


# ---------------------------------------------------------------------------------------------------------
# Generic checks, parametrised over records by the test modules
# ---------------------------------------------------------------------------------------------------------
def _kind(rec, args):
    k = rec.extra.get("promotion", "default")
    return k(args) if callable(k) else k


def param_cases(rec) -> list[dict]:
    return rec.extra.get("param_cases", [{}])


def operand_names(rec):
    return rec.extra["schema_obj"].operands


def _operand_dtype(rec, k, dt):
    raw = rec.extra.get("raw", 0)
    return T.bool_ if (raw >> k) & 1 else dt


def check_oracle(rec, dt, device, layout, params, rng) -> None:
    """One (record, dtype, layout, params) case: the op on ``device`` against the oracle."""
    names = operand_names(rec)
    scalar_ops = rec.extra.get("scalar_operands", ())
    shapes = shapes_for(layout, len(names), block_size(device))
    hosts, dts, args = [], [], []
    for k, (name, shape) in enumerate(zip(names, shapes)):
        d = _operand_dtype(rec, k, dt)
        if name in scalar_ops:
            h = values(rec, d, (), rng, k)
            v = cast_array(h, d, T.float64 if d.kind == T.KIND_FLOAT else T.int64).item() if d is not T.bool_ \
                else bool(h)
            hosts.append(np.asarray(h))
            dts.append(d)
            args.append(v)
            continue
        h = values(rec, d, shape, rng, k)
        t = make_operand(h, d, layout, device)
        if layout == "expanded":
            t = t.expand(4, 7)
            h = np.broadcast_to(h, (4, 7))
        hosts.append(h)
        dts.append(d)
        args.append(t)
    fn = rec.extra["function"]
    res = fn(*args, **params)
    tensors = [a for n, a in zip(names, args) if n in rec.extra.get("promote", names)]
    prom = promote(_kind(rec, params), *tensors)
    assert res.dtype is prom.result, (rec.name, res.dtype, prom.result)
    exp, _ = expected(rec, hosts, dts, res.dtype, prom, oracle_params(rec, args, params, prom))
    extra = rec.extra.get("tolerance")
    extra_atol = None
    if extra:
        with np.errstate(all="ignore"):
            extra_atol = np.asarray(extra["extra_atol"](*[to_oracle_input(h, d, T.float64 if d.kind == T.KIND_FLOAT
                                                                             else d) for h, d in zip(hosts, dts)]),
                                    dtype=np.float64)
    assert_close(result_host(res), np.broadcast_to(exp, tuple(res.shape)), res.dtype, extra_atol=extra_atol,
                 what=f"{rec.name}[{dt.name}, {layout}, {params}]")


def oracle_params(rec, args, params, prom):
    """The parameters the implementations receive (``prepare``'s output), for the oracle."""
    prep = rec.extra.get("prepare")
    sch = rec.extra["schema_obj"]
    a = sch.bind(tuple(args), dict(params))
    a.pop("out", None)
    a.pop("inplace", None)
    if prep is None:
        return {n: a[n] for n in sch.params}
    return prep(a, prom)


# ---------------------------------------------------------------------------------------------------------
# The fast bodies of 16-bit outputs (ops/activation.py, ops/elementwise.py): every finite value of the dtype
# ---------------------------------------------------------------------------------------------------------
def dense_values(dt) -> np.ndarray:
    """Every finite value of a 16-bit dtype with magnitude below 1e30 (beyond, x * 6 in hardswish overflows float32
    in every implementation), every 7th in the quick tier."""
    v = np.arange(0, 65536, 7 if QUICK else 1, dtype=np.uint32).astype(np.uint16).view(dt.numpy)
    f = v.astype(np.float32)
    return v[np.isfinite(f) & (np.abs(f) < 1e30)]


def check_fast_dense(rec, kw, dt, device) -> None:
    """``rec`` on every finite value of ``dt`` (float16/bfloat16, so the fast body runs): within the tolerance of
    the float64 oracle, at most one unit in the last place from the correctly rounded value, and equal to it for
    all but 1 % of the inputs (those next to rounding ties)."""
    x = dense_values(dt)
    got = result_host(rec.extra["function"](nbx.from_numpy(x).to(device), **kw))
    x64 = cast_array(x, dt, T.float64)
    with np.errstate(all="ignore"):
        e = np.asarray(rec.oracle(x64, **kw), np.float64)
    ok = np.isfinite(e)  # (infinities and NaN: the special-value tests)
    exp = cast_array(e[ok], T.float64, dt)
    assert_close(got[ok], exp, dt, what=f"{rec.name} {kw} fast")
    a, b = got[ok].view(np.uint16).astype(np.int64), exp.view(np.uint16).astype(np.int64)
    ulps = np.where((a >> 15) == (b >> 15), np.abs(a - b), (a & 0x7FFF) + (b & 0x7FFF))  # across zero: via +-0
    assert ulps.max() <= 1, (rec.name, kw, x[ok][ulps > 1][:5], got[ok][ulps > 1][:5], exp[ulps > 1][:5])
    assert (ulps > 0).mean() < _off_by_one_share(rec.name, dt, device, x.size), (rec.name, kw,
                                                                                 float((ulps > 0).mean()))


def _off_by_one_share(name: str, dt, device, numel: int) -> float:
    """The share of one-ulp results :func:`check_fast_dense` allows: 1 %, or 3 % (test_fast_math16's bound for
    gelu) where the device's table runs the op's FAST_MATH16 level-2 body (ops/fast_math16.py: a float32
    intermediate within about 2**-13, so more results next to a rounding boundary land one ulp away; gelu float16:
    1.35 % on the H200)."""
    from nbxtensor.ops import fast_math16 as M16
    from nbxtensor.runtime.configs import launch_config
    level = int(launch_config("pointwise", nbx.device(device), dtypes=(dt,), numel=numel).get(M16.KEY, 0))
    return 0.03 if level == 2 and name in M16.OPS2 else 0.01
