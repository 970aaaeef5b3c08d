"""Elementwise ops, generated from the op table: every record x dtype x layout against its float64 oracle,
special values, integer extremes, Python-scalar operands, out=/in-place forms, operators, errors as data,
cost declarations; plus PyTorch semantics worth pinning by name (uint8 wrap, floor division, NaN rules).

Runs on the device under test (``device`` fixture); under ``NBX_TRITON_INTERPRET=1`` the cpu device runs the
Triton kernels through the interpreter; ``NBX_TEST_QUICK=1`` shrinks the matrix.
"""

from __future__ import annotations

import contextlib
import re
import warnings

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.dtypes.casting import cast_array
from nbxtensor.ops import dispatch, registry
from nbxtensor.ops.dispatch import PROMOTION_KINDS, promote

import pointwise_harness as H

# Floating-point warnings of IEEE results (x / 0, inf - inf) raised by NumPy inside Triton's interpreter.
pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

FAMILY = "elementwise"
RECS = H.pointwise_records(FAMILY)
CASES = [(r, d) for r in RECS for d in H.test_dtypes(r)]


def _id(case):
    r, d = case
    return f"{r.name}-{d.name}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_matches_oracle(case, device):
    rec, dt = case
    rng = np.random.default_rng(abs(hash((rec.name, dt.name))) % 2 ** 32)
    for params in H.param_cases(rec):
        if dt not in H.allowed(rec, params):
            continue
        for layout in H.layouts(device):
            if layout == "odd_big" and (dt not in (T.float32, T.int32) or device != "cpu"):
                continue  # one big odd-shaped case per op, on the cpu device only
            H.check_oracle(rec, dt, device, layout, params, rng)


def _special_cases():
    out = []
    for r in RECS:
        if len(H.operand_names(r)) > 2 or r.extra.get("scalar_operands"):
            continue
        # float64 in the quick tiers too: the only Triton run of the float64 kernels there
        for d in H.FLOAT_DTYPES if not H.QUICK else [T.float32, T.bfloat16, T.float64]:
            if d in H.allowed(r):
                out.append((r, d))
    return out


SPECIAL_CASES = _special_cases()


@pytest.mark.parametrize("case", SPECIAL_CASES, ids=[_id(c) for c in SPECIAL_CASES])
def test_special_values(case, device):
    """+-0, +-inf, NaN, subnormals (and every pair of them for binary ops) against the oracle."""
    rec, dt = case
    sv = cast_array(np.array(H.SPECIAL[dt]), T.float64, dt)
    names = H.operand_names(rec)
    if len(names) == 1:
        hosts = [sv]
    else:
        a, b = np.meshgrid(sv, sv, indexing="ij")
        hosts = [np.ascontiguousarray(a), np.ascontiguousarray(b)]
    for params in H.param_cases(rec):
        if dt not in H.allowed(rec, params):
            continue
        args = [nbx.from_numpy(h).to(device) for h in hosts]
        res = rec.extra["function"](*args, **params)
        prom = promote(H._kind(rec, params), *args)
        exp, _ = H.expected(rec, hosts, [dt] * len(hosts), res.dtype, prom, H.oracle_params(rec, args, params, prom))
        extra = rec.extra.get("tolerance")
        ea = None
        if extra:
            with np.errstate(all="ignore"):
                ea = np.nan_to_num(np.asarray(extra["extra_atol"](*[cast_array(h, dt, T.float64) for h in hosts]),
                                              dtype=np.float64), posinf=0.0)
        H.assert_close(H.result_host(res), exp, res.dtype, extra_atol=ea, what=f"{rec.name} specials {params}")


def _extreme_cases():
    out = []
    for r in RECS:
        if len(H.operand_names(r)) > 2 or r.extra.get("domain") in ("divisor", "pow", "shift", "divisor3") \
                or r.extra.get("scalar_operands"):
            continue
        for d in ([T.int8, T.uint8, T.int64] if not H.QUICK else [T.int8]):
            if d in H.allowed(r):
                out.append((r, d))
    return out


EXTREME_CASES = _extreme_cases()


@pytest.mark.parametrize("case", EXTREME_CASES, ids=[_id(c) for c in EXTREME_CASES])
def test_integer_extremes(case, device):
    """min, max, -1, 0, 1 (and all pairs): wrap-around as PyTorch (abs(INT_MIN), uint8 overflow ...)."""
    rec, dt = case
    info = np.iinfo(dt.numpy)
    vals = np.array(sorted({int(info.min), int(info.max), 0, 1, 2} | ({-1} if info.min < 0 else set())),
                    dtype=dt.numpy)
    names = H.operand_names(rec)
    hosts = [vals] if len(names) == 1 else [np.ascontiguousarray(m) for m in np.meshgrid(vals, vals, indexing="ij")]
    for params in H.param_cases(rec):
        if dt not in H.allowed(rec, params):
            continue
        args = [nbx.from_numpy(h).to(device) for h in hosts]
        try:
            res = rec.extra["function"](*args, **params)
        except RuntimeError as e:  # a record's declared refusal (e.g. integer alpha rules) is not a wrong result
            pytest.skip(f"{rec.name} refuses {dt.name}: {e}")
        prom = promote(H._kind(rec, params), *args)
        exp, _ = H.expected(rec, hosts, [dt] * len(hosts), res.dtype, prom, H.oracle_params(rec, args, params, prom))
        H.assert_close(H.result_host(res), exp, res.dtype, what=f"{rec.name} extremes")


def _scalar_cases():
    out = []
    for r in RECS:
        sch = r.extra["schema_obj"]
        if len(sch.operands) != 2:
            continue
        by = {a.name: a for a in sch.args}
        for pos, name in enumerate(sch.operands):
            if "Scalar" in by[name].types:
                out.append((r, pos))
    return out


SCALAR_CASES = _scalar_cases()


@pytest.mark.parametrize("case", SCALAR_CASES, ids=[f"{r.name}-pos{p}" for r, p in SCALAR_CASES])
def test_python_scalar_operand(case, device):
    """A Python number in either position is a weak operand: promotion as result_type, values as the oracle."""
    rec, pos = case
    rng = np.random.default_rng(7)
    for dt in ([T.float32, T.int32, T.uint8, T.float16] if not H.QUICK else [T.float32, T.int32]):
        if dt not in H.allowed(rec):
            continue
        for pyval in (2, 1.5, True):
            hv = H.values(rec, dt, (3, 4), rng, 1 - pos)
            t = nbx.from_numpy(hv).to(device)
            args = [t, pyval] if pos == 1 else [pyval, t]
            params = H.param_cases(rec)[0]
            try:
                prom = promote(H._kind(rec, params), *args)
            except RuntimeError:
                continue
            if prom.input not in H.allowed(rec, params) or (dt.kind != T.KIND_FLOAT and rec.extra.get("domain") in
                                                              ("divisor", "pow", "shift")):
                continue
            try:
                res = rec.extra["function"](*args, **params)
            except (RuntimeError, TypeError, NotImplementedError):
                continue  # declared refusals (bool subtraction, alpha rules) are tested as error data
            assert res.dtype is prom.result, (rec.name, dt, pyval, res.dtype, prom.result)
            sv = np.asarray(dispatch.scalar_to(pyval, prom.compute))
            hosts = [hv, sv] if pos == 1 else [sv, hv]
            dts = [dt, prom.compute] if pos == 1 else [prom.compute, dt]
            exp, _ = H.expected(rec, hosts, dts, res.dtype, prom, H.oracle_params(rec, args, params, prom))
            H.assert_close(H.result_host(res), np.broadcast_to(exp, res.shape), res.dtype,
                           what=f"{rec.name}({args[0] if pos else pyval}, ...)")


OUT_RECS = [r for r in RECS if r.extra["schema_obj"].has_out]


def _first_dtype(rec):
    for d in (T.float32, T.int32, T.bool_):
        if d in H.allowed(rec, H.param_cases(rec)[0]):
            return d
    return H.allowed(rec)[0]


def _inputs(rec, device, dt):
    rng = np.random.default_rng(3)
    names = H.operand_names(rec)
    args = []
    for k, n in enumerate(names):
        d = H._operand_dtype(rec, k, dt)
        h = H.values(rec, d, () if n in rec.extra.get("scalar_operands", ()) else (3, 4), rng, k)
        args.append(nbx.from_numpy(np.ascontiguousarray(h)).to(device) if n not in rec.extra.get("scalar_operands", ())
                    else h.item())
    return args


@pytest.mark.parametrize("rec", OUT_RECS, ids=[r.name for r in OUT_RECS])
def test_out_argument(rec, device):
    """out= of the right shape is written; a wrong shape is resized with a warning; an uncastable dtype raises."""
    dt = _first_dtype(rec)
    params = H.param_cases(rec)[0]
    args = _inputs(rec, device, dt)
    fn = rec.extra["function"]
    ref = fn(*args, **params)
    out = nbx.empty(ref.shape, dtype=ref.dtype, device=device)
    r = fn(*args, **params, out=out)
    assert r is out
    np.testing.assert_array_equal(H.result_host(out), H.result_host(ref))
    out2 = nbx.empty(2, dtype=ref.dtype, device=device)
    with pytest.warns(UserWarning, match="resized"):
        fn(*args, **params, out=out2)
    assert tuple(out2.shape) == tuple(ref.shape)
    np.testing.assert_array_equal(H.result_host(out2), H.result_host(ref))
    # ops whose ATen kernels write their input's dtype only refuse other outs (dispatch.check_out_dtype)
    other = "Found dtype|non-boolean outputs|Expected out type|should be same as input"
    if ref.dtype.kind == T.KIND_FLOAT:
        with pytest.raises(RuntimeError, match="can't be cast" if rec.extra.get("out_dtype") is None else
                           f"can't be cast|{other}"):
            fn(*args, **params, out=nbx.empty(ref.shape, dtype=nbx.int64, device=device))
    # a wider out dtype receives the converted result
    if ref.dtype in (T.float32, T.int32):
        wide = nbx.empty(ref.shape, dtype=nbx.float64, device=device)
        try:
            fn(*args, **params, out=wide)
        except RuntimeError as e:
            assert rec.extra.get("out_dtype") is not None and re.search(other, str(e)), e
            return
        np.testing.assert_allclose(H.result_host(wide), H.result_host(ref).astype(np.float64), rtol=0, atol=0)


INPLACE_RECS = [r for r in RECS if r.extra.get("inplace")]


@pytest.mark.parametrize("rec", INPLACE_RECS, ids=[r.name for r in INPLACE_RECS])
def test_inplace_method(rec, device):
    """``x.op_(...)`` writes op(x, ...) into x (when the result dtype is x's) and returns x."""
    dt = _first_dtype(rec)
    params = H.param_cases(rec)[0]
    args = _inputs(rec, device, dt)
    ref = rec.extra["function"](*args, **params)
    if not nbx.can_cast(ref.dtype, args[0].dtype) or tuple(ref.shape) != tuple(args[0].shape):
        with pytest.raises(RuntimeError):
            getattr(args[0].clone(), rec.name + "_")(*args[1:], **params)
        return
    x = args[0].clone()
    r = getattr(x, rec.name + "_")(*args[1:], **params)
    assert r is x  # the result is converted to x's dtype (eq_ on a float tensor writes 1.0 / 0.0, as PyTorch)
    np.testing.assert_array_equal(H.result_host(x), H.result_host(ref.to(x.dtype)))


DUNDERS = [(r, d, m) for r in registry.all_ops() if r.family in ("elementwise", "activation")
           for d, m in r.extra.get("dunders", {}).items()]


@pytest.mark.parametrize("case", DUNDERS, ids=[d for _, d, _ in DUNDERS])
def test_operator(case, device):
    """Every operator the table declares: forward, reflected (Python number on the left) and in-place."""
    rec, dunder, mode = case
    dt = T.int32 if rec.extra.get("domain") in ("shift",) or T.float32 not in H.allowed(rec) else T.float32
    if dt not in H.allowed(rec):
        dt = T.bool_
    rng = np.random.default_rng(5)
    a = nbx.from_numpy(H.values(rec, dt, (2, 3), rng, 0)).to(device)
    b = nbx.from_numpy(H.values(rec, dt, (2, 3), rng, 1)).to(device)
    fn = rec.extra["function"]
    if mode == "unary":
        np.testing.assert_array_equal(H.result_host(getattr(a, dunder)()), H.result_host(fn(a)))
    elif mode == "fwd":
        np.testing.assert_array_equal(H.result_host(getattr(a, dunder)(b)), H.result_host(fn(a, b)))
        assert getattr(a, dunder)("x") is NotImplemented
    elif mode == "rev":
        s = 3 if dt is not T.bool_ else True
        ref = dispatch.pointwise(rec, {**dispatch._defaults(rec.extra["schema_obj"]),
                                       rec.extra["schema_obj"].operands[0]: s,
                                       rec.extra["schema_obj"].operands[1]: a})
        np.testing.assert_array_equal(H.result_host(getattr(a, dunder)(s)), H.result_host(ref))
    else:
        ref = fn(a, b)
        if ref.dtype is not a.dtype:
            return
        x = a.clone()
        r = getattr(x, dunder)(b)
        assert r is x
        np.testing.assert_array_equal(H.result_host(x), H.result_host(ref))


def test_python_operators_end_to_end(device):
    x = nbx.tensor([[1.0, -2.0, 3.0]], device=device)
    i = nbx.tensor([7, -7, 5], device=device)
    assert (x + 1).tolist() == [[2.0, -1.0, 4.0]]
    assert (1 - x).tolist() == [[0.0, 3.0, -2.0]]
    assert (2 * x).tolist() == [[2.0, -4.0, 6.0]]
    assert (6 / x).tolist() == [[6.0, -3.0, 2.0]]
    assert (i // 2).tolist() == [3, -4, 2]
    assert (-7 // nbx.tensor([2], device=device)).tolist() == [-4]
    assert (i % 3).tolist() == [1, 2, 2]
    assert (i % -3).tolist() == [-2, -1, -1]
    assert (2 ** nbx.tensor([3, 0], device=device)).tolist() == [8, 1]
    assert (x ** 2).tolist() == [[1.0, 4.0, 9.0]]
    assert (~nbx.tensor([True, False], device=device)).tolist() == [False, True]
    assert (i & 3).tolist() == [3, 1, 1] and (i | 8).tolist() == [15, -7, 13] and (i ^ 1).tolist() == [6, -8, 4]
    assert (i << 1).tolist() == [14, -14, 10] and (i >> 1).tolist() == [3, -4, 2]
    assert (x < 0).tolist() == [[False, True, False]] and (x >= 1).tolist() == [[True, False, True]]
    assert (x == 3).tolist() == [[False, False, True]] and (x != 3).tolist() == [[True, True, False]]
    assert (abs(x)).tolist() == [[1.0, 2.0, 3.0]] and (-x).tolist() == [[-1.0, 2.0, -3.0]]
    y = x.clone()
    y += 1
    y *= 2
    y -= x
    assert y.tolist() == [[3.0, 0.0, 5.0]]
    assert (x == None) is False  # noqa: E711  (PyTorch returns False for a comparison with None)
    with pytest.raises(TypeError):
        x + "a"


def test_promotion_examples(device):
    """The issue's examples and PyTorch's wrapped-number rules."""
    u = nbx.tensor([200], dtype=nbx.uint8, device=device)
    r = u + 100
    assert r.dtype is nbx.uint8 and r.tolist() == [44]
    assert (u + 300).tolist() == [244]
    f = nbx.tensor([1], dtype=nbx.uint8, device=device) + 1.5
    assert f.dtype is nbx.float32 and f.tolist() == [2.5]
    h = nbx.tensor([1.0], dtype=nbx.float16, device=device) * 2.5
    assert h.dtype is nbx.float16
    assert (nbx.tensor([1, 2], device=device) / 2).dtype is nbx.float32
    assert (nbx.tensor([True], device=device) + nbx.tensor([True], device=device)).tolist() == [True]
    assert nbx.square(nbx.tensor([True], device=device)).dtype is nbx.int64
    assert nbx.exp(nbx.tensor([0], device=device)).dtype is nbx.float32
    assert nbx.sign(nbx.tensor([True, False], device=device)).dtype is nbx.bool
    with pytest.raises(RuntimeError, match="negative integer powers"):
        nbx.tensor([2], device=device) ** -1
    assert (nbx.tensor([2.0], device=device) ** -1).tolist() == [0.5]
    assert (nbx.tensor([2, 1, -1, -1], device=device) ** nbx.tensor([-1, -2, -3, -2], device=device)).tolist() == \
        [0, 1, -1, 1]


def test_nan_rules(device):
    nan = float("nan")
    a = nbx.tensor([nan, 1.0, 2.0], device=device)
    b = nbx.tensor([1.0, nan, 1.0], device=device)
    assert np.isnan(nbx.maximum(a, b).numpy()[:2]).all() and nbx.maximum(a, b).tolist()[2] == 2.0
    assert nbx.fmax(a, b).tolist() == [1.0, 1.0, 2.0]
    assert nbx.fmin(a, b).tolist() == [1.0, 1.0, 1.0]
    c = nbx.clamp(nbx.tensor([nan, 5.0], device=device), min=3, max=4)
    assert np.isnan(c.tolist()[0]) and c.tolist()[1] == 4.0
    assert nbx.clamp(nbx.tensor([1.0, 5.0], device=device), min=3, max=2).tolist() == [2.0, 2.0]
    assert nbx.sign(nbx.tensor([nan, -0.0, -3.0], device=device)).tolist() == [0.0, 0.0, -1.0]
    assert nbx.nan_to_num(nbx.tensor([float("inf"), nan], dtype=nbx.float16, device=device)).tolist() == \
        [65504.0, 0.0]


def test_rounding(device):
    x = nbx.tensor([0.5, 1.5, 2.5, -0.5, -2.5, 2.4999], device=device)
    assert nbx.round(x).tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, 2.0]
    assert nbx.round(nbx.tensor([1.25, 2.5, 15.0], device=device), decimals=1).tolist() == \
        pytest.approx([1.2, 2.5, 15.0])
    assert nbx.round(nbx.tensor([15.0, 25.0], device=device), decimals=-1).tolist() == [20.0, 20.0]
    assert nbx.floor(nbx.tensor([-1.5], device=device)).tolist() == [-2.0]
    assert nbx.div(nbx.tensor([-7.0, 7.0], device=device), 2, rounding_mode="floor").tolist() == [-4.0, 3.0]
    assert nbx.div(nbx.tensor([-7, 7], device=device), 2, rounding_mode="trunc").tolist() == [-3, 3]
    assert nbx.div(nbx.tensor([-7, 7], device=device), 2, rounding_mode="trunc").dtype is nbx.int64
    assert nbx.remainder(nbx.tensor([-7.0], device=device), 3).tolist() == [2.0]
    assert nbx.fmod(nbx.tensor([-7.0], device=device), 3).tolist() == [-1.0]
    assert nbx.fmod(nbx.tensor([-7], device=device), 3).tolist() == [-1]
    assert nbx.remainder(5, nbx.tensor([3, -3], device=device)).tolist() == [2, -1]


def test_where_masked_fill_clamp(device):
    c = nbx.tensor([True, False, True], device=device)
    x = nbx.tensor([1.0, 2.0, 3.0], dtype=nbx.float16, device=device)
    r = nbx.where(c, x, 2.5)
    assert r.dtype is nbx.float16 and r.tolist() == [1.0, 2.5, 3.0]
    assert nbx.where(c, 1.0, 0).dtype is nbx.float32
    assert x.masked_fill(c, -1).tolist() == [-1.0, 2.0, -1.0]
    xi = nbx.tensor([1, 2], device=device)
    assert xi.masked_fill(nbx.tensor([True, False], device=device), 2.7).tolist() == [2, 2]
    assert xi.masked_fill(nbx.tensor([True, False], device=device), nbx.tensor(5)).tolist() == [5, 2]
    y = xi.clone()
    y.masked_fill_(nbx.tensor([False, True], device=device), 9)
    assert y.tolist() == [1, 9]
    assert nbx.clamp(nbx.tensor([1, 5], device=device), min=1.5).dtype is nbx.float32
    assert nbx.clamp(nbx.tensor([0.0, 5.0, 9.0], device=device), nbx.tensor([1.0], device=device),
                     nbx.tensor([2.0, 6.0, 7.0], device=device)).tolist() == [1.0, 5.0, 7.0]
    assert nbx.clip(nbx.tensor([-3.0], device=device), -1, 1).tolist() == [-1.0]
    assert nbx.clamp_min(nbx.tensor([1, 5], device=device), nbx.tensor([2.5], device=device)).tolist() == [2.5, 5.0]
    assert nbx.lerp(nbx.tensor([0.0, 10.0], device=device), nbx.tensor([10.0, 20.0], device=device), 0.5).tolist() \
        == [5.0, 15.0]
    assert nbx.addcmul(nbx.tensor([1.0], device=device), nbx.tensor([2.0], device=device),
                       nbx.tensor([3.0], device=device), value=2).tolist() == [13.0]
    assert nbx.addcdiv(nbx.tensor([1.0], device=device), nbx.tensor([3.0], device=device),
                       nbx.tensor([2.0], device=device), value=2).tolist() == [4.0]
    assert nbx.isclose(nbx.tensor([1.0, float("nan")], device=device), nbx.tensor([1.0 + 1e-9, float("nan")],
                       device=device), equal_nan=True).tolist() == [True, True]
    assert nbx.isclose(nbx.tensor([100], device=device), nbx.tensor([101], device=device), rtol=0.01).tolist() == \
        [True]


def test_shifts_and_bitwise(device):
    i8 = nbx.tensor([1, -128, 127, -5], dtype=nbx.int8, device=device)
    s = nbx.tensor([1, 8, -1, 9], dtype=nbx.int8, device=device)
    assert (i8 << s).tolist() == [2, 0, 0, 0]
    assert (i8 >> s).tolist() == [0, -1, 0, -1]
    assert (nbx.tensor([200], dtype=nbx.uint8, device=device) >> nbx.tensor([9], dtype=nbx.uint8,
                                                                              device=device)).tolist() == [0]
    assert nbx.bitwise_not(nbx.tensor([0, -1], dtype=nbx.int16, device=device)).tolist() == [-1, 0]
    assert nbx.logical_xor(nbx.tensor([0.0, 2.0], device=device), nbx.tensor([1, 1], device=device)).tolist() == \
        [True, False]


@pytest.mark.skipif(H.INTERPRET, reason="the Triton kernels cannot raise ZeroDivisionError (documented)")
def test_integer_division_by_zero_raises_on_cpu(device):
    if device != "cpu":
        pytest.skip("PyTorch raises on CPU only")
    for f in (lambda: nbx.tensor([5]) // nbx.tensor([0]), lambda: nbx.tensor([5]) % nbx.tensor([0]),
              lambda: nbx.fmod(nbx.tensor([5]), 0), lambda: nbx.div(nbx.tensor([5]), 0, rounding_mode="trunc")):
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            f()


def test_integer_division_by_zero_in_kernels():
    """The Triton kernels' documented result for an integer zero divisor: quotient -1, remainder the dividend."""
    if not H.INTERPRET:
        pytest.skip("checks the Triton kernels (interpreter tier)")
    a = nbx.tensor([5, -5])
    z = nbx.tensor([0, 0])
    assert (a // z).tolist() == [-1, -1] and (a % z).tolist() == [5, -5]


def test_float_division_by_zero(device):
    x = nbx.tensor([1.0, -1.0, 0.0], device=device)
    r = (x / 0).tolist()
    assert r[0] == float("inf") and r[1] == float("-inf") and np.isnan(r[2])
    r = (x // 0).tolist()
    assert r[0] == float("inf") and r[1] == float("-inf") and np.isnan(r[2])


ERROR_CASES = [(r, i, e) for r in registry.all_ops() if r.family in ("elementwise", "activation")
               for i, e in enumerate(r.extra.get("errors", []))]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[f"{r.name}-{i}" for r, i, _ in ERROR_CASES])
def test_errors_as_data(case, device):
    """Every error case a record declares raises PyTorch's exception type with its message."""
    rec, _, (build, kwargs, exc, pattern) = case
    if pattern in rec.extra.get("cpu_only_errors", ()) and (H.INTERPRET or device != "cpu"):
        pytest.skip("raised by the cpu device only (kernels cannot raise)")
    args = [a.to(device) if isinstance(a, nbx.Tensor) and a.ndim > 0 else a for a in build(nbx)]
    with pytest.raises(exc, match=pattern):
        rec.extra["function"](*args, **kwargs)


def test_dtype_refusals(device):
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        nbx.frac(nbx.tensor([1], device=device))
    with pytest.raises(NotImplementedError, match="Float"):
        nbx.tensor([1.0], device=device) & nbx.tensor([1.0], device=device)
    with pytest.raises(NotImplementedError, match="Bool"):
        nbx.abs(nbx.tensor([True], device=device))


def test_inplace_rules(device):
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type Long"):
        nbx.tensor([1], device=device).add_(1.5)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        nbx.ones(3, device=device).add_(nbx.ones(2, 3, device=device))
    x = nbx.ones(2, 3, device=device)
    with pytest.raises(RuntimeError, match="single memory location"):
        x[:, 1:].add_(x[:, :2])
    e = nbx.ones(1, 3, device=device).expand(2, 3)
    with pytest.raises(RuntimeError, match="more than one element"):
        e.add_(1)
    y = nbx.ones(2, 3, device=device)
    y.mul_(y)  # full overlap is fine
    assert y.tolist() == [[1.0] * 3] * 2


def test_zero_size_launches_nothing(device, monkeypatch):
    calls = []
    rec = registry.get("add")
    real = registry.impl

    def spy(name, dt):
        calls.append(name)
        return real(name, dt)

    monkeypatch.setattr(registry, "impl", spy)
    r = nbx.add(nbx.empty(0, 3, device=device), 1.0)
    assert tuple(r.shape) == (0, 3) and calls == []
    r = nbx.exp(nbx.empty(4, 0, device=device))
    assert tuple(r.shape) == (4, 0) and calls == []
    _ = rec


def test_table_records_are_complete():
    """Every elementwise/activation record has everything the table promises."""
    for r in registry.all_ops():
        if r.family not in ("elementwise", "activation"):
            continue
        assert r.cpu is not None and r.triton is not None and r.oracle is not None, r.name
        assert "schema_obj" in r.extra and "function" in r.extra, r.name
        k = r.extra.get("promotion", "default")
        assert callable(k) or k in PROMOTION_KINDS, r.name
        assert callable(r.extra.get("dtypes")) or r.extra.get("dtypes"), r.name
        ns = r.extra.get("namespaces", ("torch",))
        if "torch" in ns:
            assert getattr(nbx, r.name) is r.extra["function"], r.name
        if "functional" in ns:
            assert getattr(nbx.nn.functional, r.name) is r.extra["function"], r.name
        tol = r.extra.get("tolerance")
        assert tol is None or (callable(tol["extra_atol"]) and tol["reason"]), r.name
        assert r.extra["function"].__doc__


def test_cost_declarations():
    c = registry.get("add").cost((4, 5), T.float32, [((4, 5), T.float32), ((1, 5), T.float32)])
    assert c.flops == 20 and c.bytes_read == 4 * 20 + 4 * 5 and c.bytes_written == 80
    c = registry.get("exp").cost((10,), T.float16, [((10,), T.float16)])
    assert c.bytes_read == 20 and c.bytes_written == 20 and c.flops == 10 * registry.get("exp").cost.flops_per_element
    for r in RECS:
        assert r.cost((2, 3), T.float32, [((2, 3), T.float32)]).bytes_written == 24


def test_generated_signatures():
    with pytest.raises(TypeError, match=r"argument 'input' \(position 1\) must be Tensor, not int"):
        nbx.maximum(2, nbx.tensor([1]))
    assert nbx.add(2, nbx.tensor([1])).tolist() == [3]  # PyTorch accepts a Python number first for add
    with pytest.raises(TypeError, match="must be Tensor"):
        nbx.maximum(nbx.tensor([1]), 2)
    with pytest.raises(TypeError, match="unexpected keyword"):
        nbx.add(nbx.tensor([1]), 1, beta=2)
    with pytest.raises(TypeError, match="missing required argument"):
        nbx.add(nbx.tensor([1]))
    assert nbx.add(nbx.tensor([1]), 2, alpha=3).tolist() == [7]
    assert nbx.true_divide is nbx.div and nbx.Tensor.divide is nbx.div
    assert nbx.pow(2.5, nbx.tensor([1, 3])).tolist() == pytest.approx([2.5, 15.625])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nbx.add(nbx.ones(2), 1, out=nbx.empty(0))  # resizing an empty out= is silent


# The fast bodies of 16-bit outputs (ops/elementwise.py): every finite input of the dtype
FAST_UNARY = ["sinh", "atan", "asinh"]


@pytest.mark.parametrize("dt", [T.bfloat16, T.float16], ids=["bfloat16", "float16"])
@pytest.mark.parametrize("name", FAST_UNARY)
def test_fast_bodies_round_like_the_oracle(name, dt, device):
    """float16/bfloat16 results of sinh, atan and asinh come from branch-free float32 bodies (polynomials, the
    GPU's exp2/log2/reciprocal approximations): within the tolerance of the oracle, at most one unit in the last
    place from the correctly rounded value and equal to it but next to rounding ties, over every finite input."""
    if device == "cpu" and not H.INTERPRET:
        pytest.skip("the cpu device computes with NumPy; the bodies run under the interpreter or on a GPU")
    H.check_fast_dense(registry.get(name), {}, dt, device)


# The alternative bodies behind config keys (ops/pointwise.py ``Alt``; default off, for the H200 sweeps)
ALT_UNARY = [("cosh", "ALT_COSH"), ("rsqrt", "ALT_RSQRT")]


@pytest.mark.parametrize("dt", [T.bfloat16, T.float16], ids=["bfloat16", "float16"])
@pytest.mark.parametrize("name,key", ALT_UNARY, ids=[n for n, _ in ALT_UNARY])
def test_alt_bodies_round_like_the_oracle(name, key, dt, device):
    """cosh (one ex2.approx and one rcp.approx) and rsqrt (libdevice's rsqrtf: rsqrt.approx.f32) behind their
    config keys: every finite float16/bfloat16 input within the tolerance of the oracle, at most one unit in the
    last place from the correctly rounded value and equal to it but next to rounding ties."""
    from nbxtensor.runtime.configs import override
    if device == "cpu" and not H.INTERPRET:
        pytest.skip("the cpu device computes with NumPy; the bodies run under the interpreter or on a GPU")
    with override("pointwise", **{key: 1}):
        H.check_fast_dense(registry.get(name), {}, dt, device)


@pytest.mark.parametrize("dt", [T.bfloat16, T.float16, T.float32], ids=["bfloat16", "float16", "float32"])
def test_alt_bodies_special_values(dt, device):
    """Special values through ``ALT_COSH`` / ``ALT_RSQRT`` as PyTorch: cosh(+-0) = 1, cosh(+-inf) = inf, cosh
    past float32's overflow (89.5) = inf, subnormals -> 1, NaN -> NaN; rsqrt(+-0) = +-inf, rsqrt(inf) = +0,
    negatives and NaN -> NaN, subnormal inputs not flushed (float32: rsqrt(2**-140) = 2**70). float32 results of
    cosh keep the default body (the key serves 16-bit results only): bit-equal with and without it. Other ops
    ignore the keys."""
    from nbxtensor.runtime.configs import override
    sub = {T.bfloat16: 2.0 ** -130, T.float16: 2.0 ** -24, T.float32: 2.0 ** -140}[dt]
    xs = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, sub, -sub, 1.0, 4.0, 0.25, -2.0, 89.5, -89.5, 10.0], np.float32)
    x = nbx.from_numpy(cast_array(xs, T.float32, dt)).to(device)
    with override("pointwise", ALT_COSH=1, ALT_RSQRT=1):
        c = H.result_host(nbx.cosh(x)).astype(np.float64)
        r = H.result_host(nbx.rsqrt(x)).astype(np.float64)
        e = H.result_host(nbx.exp(x)).astype(np.float64)
    assert c[:2].tolist() == [1.0, 1.0] and c[2] == c[3] == np.inf and np.isnan(c[4]) and c[5] == c[6] == 1.0
    assert c[11] == c[12] == np.inf or dt is T.float16
    assert c[7] == pytest.approx(np.cosh(1.0), rel=4e-3) and c[13] == pytest.approx(np.cosh(10.0), rel=4e-3)
    assert r[0] == np.inf and r[1] == -np.inf and r[2] == 0.0 and not np.signbit(r[2])
    assert np.isnan(r[[3, 4, 6, 10]]).all() and r[7] == 1.0 and r[8] == 0.5 and r[9] == 2.0
    assert r[5] == pytest.approx(sub ** -0.5, rel=4e-3)
    np.testing.assert_array_equal(e, H.result_host(nbx.exp(x)).astype(np.float64))
    if dt is T.float32:
        np.testing.assert_array_equal(c, H.result_host(nbx.cosh(x)).astype(np.float64))
        rng = np.random.default_rng(3)
        v = np.concatenate([rng.uniform(0, 1e4, 4096), 2.0 ** rng.uniform(-149, 127, 4096)]).astype(np.float32)
        t = nbx.from_numpy(v).to(device)
        with override("pointwise", ALT_RSQRT=1):
            got = H.result_host(nbx.rsqrt(t))
        H.assert_close(got, registry.get("rsqrt").oracle(v.astype(np.float64)), T.float32, what="ALT_RSQRT")


def _ulps16(got, exp):
    a, b = got.view(np.uint16).astype(np.int64), exp.view(np.uint16).astype(np.int64)
    return np.where((a >> 15) == (b >> 15), np.abs(a - b), (a & 0x7FFF) + (b & 0x7FFF))


@pytest.mark.parametrize("dt", [T.bfloat16, T.float16], ids=["bfloat16", "float16"])
def test_alt_pow_rounds_like_the_oracle(dt, device):
    """``ALT_POW`` (2**(y log2|x|), ops/elementwise.py ``_pow_a``): every finite float16/bfloat16 base to scalar
    exponents (integers odd and even, halves, thirds, large ones) and random tensor exponents, within the tolerance
    of the float64 oracle, at most one unit in the last place from the correctly rounded value and equal to it for
    all but 1 % of the inputs."""
    from nbxtensor.runtime.configs import override
    if device == "cpu" and not H.INTERPRET:
        pytest.skip("the cpu device computes with NumPy; the bodies run under the interpreter or on a GPU")
    x = H.dense_values(dt)
    x = x[np.isfinite(x.astype(np.float32))]
    x64 = cast_array(x, dt, T.float64)
    rng = np.random.default_rng(8)
    ys = cast_array(rng.uniform(-6, 6, x.size), T.float64, dt)
    xt = nbx.from_numpy(x).to(device)
    for y in (2.5, 3.0, -3.0, -1.5, 0.5, 1 / 3, 20.0, "tensor"):
        with override("pointwise", ALT_POW=1):
            got = H.result_host(nbx.pow(xt, nbx.from_numpy(ys).to(device) if y == "tensor" else y))
        y64 = cast_array(ys, dt, T.float64) if y == "tensor" else np.float64(np.float32(y))
        with np.errstate(all="ignore"):
            e = np.power(x64, y64)
        ok = np.isfinite(e) & (e != 0)
        exp = cast_array(e[ok], T.float64, dt)
        H.assert_close(got[ok], exp, dt, what=f"ALT_POW y={y}")
        ulps = _ulps16(got[ok], exp)
        assert ulps.max() <= 1 and (ulps > 0).mean() < 0.01, (y, int(ulps.max()), float((ulps > 0).mean()))


@pytest.mark.parametrize("dt", [T.bfloat16, T.float16, T.float32], ids=["bfloat16", "float16", "float32"])
def test_alt_pow_special_values(dt, device):
    """``ALT_POW`` on every pair of special bases and exponents gives C99's pow (PyTorch's) bit for bit, signed zeros
    and infinities included: pow(x, 0) = pow(1, y) = 1 (NaN too), pow(-1, +-inf) = 1, negative finite bases to
    non-integer exponents NaN, odd integer exponents keep the base's sign (-0, -inf), 0 and inf to positive and
    negative powers, subnormal bases (bfloat16, float32). float32 results keep libdevice's powf: bit-equal with and
    without the key."""
    from nbxtensor.runtime.configs import override
    sub = {T.bfloat16: 2.0 ** -130, T.float16: 2.0 ** -24, T.float32: 2.0 ** -140}[dt]
    vals = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 2.5, -2.5, np.inf, -np.inf, np.nan, sub,
                     -sub, 0.25, 7.0, -7.0, 1e-3, 100.0], np.float32)
    xs, ys = np.meshgrid(vals, vals, indexing="ij")
    xh, yh = cast_array(xs.ravel(), T.float32, dt), cast_array(ys.ravel(), T.float32, dt)
    x, y = nbx.from_numpy(xh).to(device), nbx.from_numpy(yh).to(device)
    with override("pointwise", ALT_POW=1):
        got = H.result_host(nbx.pow(x, y)).astype(np.float64)
    with np.errstate(all="ignore"):
        e = cast_array(np.power(cast_array(xh, dt, T.float64), cast_array(yh, dt, T.float64)), T.float64, dt)
    e = np.asarray(e).astype(np.float64)
    special = ~np.isfinite(e) | (e == 0) | (np.abs(cast_array(xh, dt, T.float64)) == 1) | (yh.astype(np.float64) == 0)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(e))
    fin = ~np.isnan(e)
    assert (got[fin & special] == e[fin & special]).all() and (np.signbit(got[fin]) == np.signbit(e[fin])).all()
    from nbxtensor.dtypes.tolerance import tolerance
    tol = tolerance(dt)
    np.testing.assert_allclose(got[fin & ~special], e[fin & ~special], rtol=tol.rtol, atol=tol.atol)
    if dt is T.float32:
        np.testing.assert_array_equal(got, H.result_host(nbx.pow(x, y)).astype(np.float64))


# ---------------------------------------------------------------------------------------------------------
# Floor division and remainder of floats: the one-division kernels (ops/triton_helpers.py) against ATen's
# fmod-based formulas evaluated by NumPy (elementwise._np_div_floor / _np_remainder), bit for bit
# ---------------------------------------------------------------------------------------------------------
def _same_bits(got, exp):
    g, e = np.asarray(got), np.asarray(exp)
    return (g == e) & (np.signbit(g) == np.signbit(e)) | (np.isnan(g) & np.isnan(e))


def _divisors16(dt, k, seed):
    """Special divisors of ``dt`` (signed zeros, infinities, NaN, subnormal extremes, the largest value, powers
    of two, odd mantissas) and ``k`` random bit patterns, as float32."""
    import ml_dtypes
    info = ml_dtypes.finfo(dt.numpy)
    sub = float(info.smallest_subnormal)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, sub, -sub, float(info.max), -float(info.max), 1.0, -1.0, 2.0,
               -0.5, 3.0, -3.0, 7.0, 0.1, -0.3, float(info.tiny), 255.0, 1e-3]
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 1 << 16, k).astype(np.uint16).view(dt.numpy).astype(np.float32)
    return np.concatenate([cast_array(np.array(special, np.float32), T.float32, dt).astype(np.float32), bits])


@pytest.mark.parametrize("dt", [T.bfloat16, T.float16], ids=["bfloat16", "float16"])
def test_floor_divide_and_remainder_16bit_every_dividend(dt, device):
    """floor_divide, div(rounding_mode='floor') and remainder of float16/bfloat16 tensors (the one-division
    kernels: floordiv_float16 with no fmod, remainder_float's fma path and its fmod fallback for quotients of
    2**22 and more) equal ATen's formulas computed in float32 and rounded once, bit for bit: every one of the
    65 536 dividends against special and sampled divisors (NBX_TEST_EXHAUSTIVE=1: every divisor)."""
    import os
    from nbxtensor.ops.elementwise import _np_div_floor, _np_remainder
    from nbxtensor.runtime import configs
    a16 = np.arange(1 << 16, dtype=np.uint16).view(dt.numpy)
    a = nbx.from_numpy(a16).to(device)
    if os.environ.get("NBX_TEST_EXHAUSTIVE") == "1":
        divisors = a16.astype(np.float32)
    else:
        divisors = _divisors16(dt, 3 if H.QUICK else 24, seed=4 + (dt is T.float16))
    af = a16.astype(np.float32)
    with np.errstate(all="ignore"), configs.override("pointwise", BLOCK=1 << 16):
        for bv in divisors:
            b = nbx.full((1 << 16,), float(bv), dtype=dt, device=device)
            bf = np.full_like(af, bv)
            for name, got, ref in (
                    ("floor_divide", nbx.floor_divide(a, b), _np_div_floor),
                    ("div floor", nbx.div(a, b, rounding_mode="floor"), _np_div_floor),
                    ("remainder", a % b, _np_remainder)):
                exp = cast_array(ref(af, bf).astype(np.float32), T.float32, dt)
                g = got.cpu().numpy()
                ok = _same_bits(g.astype(np.float32), exp.astype(np.float32))
                assert ok.all(), (name, float(bv), af[~ok][:5], g[~ok][:5], exp[~ok][:5])


@pytest.mark.parametrize("dt", [T.float32, T.float64], ids=["float32", "float64"])
def test_floor_divide_and_remainder_large_quotients(dt, device):
    """float32/float64 floor division and remainder take one division and an fma below 2**21 (2**50), and
    ATen's fmod-based steps for larger quotients: blocks mixing both, subnormal, huge and zero operands, and
    quotients next to the thresholds, bit for bit against ATen's formulas in the same dtype."""
    from nbxtensor.ops.elementwise import _np_div_floor, _np_remainder
    rng = np.random.default_rng(11)
    npd = dt.numpy
    n = 600 if dt is T.float32 else 150
    lim = 2.0 ** (21 if dt is T.float32 else 50)
    a = np.concatenate([rng.uniform(-50, 50, n), rng.uniform(-1, 1, n) * lim * rng.choice([0.5, 1, 2, 4, 2 ** 10], n),
                        [lim, -lim, lim * 2 - 1, 1e30 if dt is T.float32 else 1e300, 3.0, -3.0, 0.0, -0.0,
                         np.inf, -np.inf, np.nan, 5e-45 if dt is T.float32 else 5e-324, 7.0, -7.0]]).astype(npd)
    b = np.concatenate([rng.uniform(-7, 7, n), rng.uniform(0.2, 3, n) * rng.choice([-1, 1], n),
                        [1.0, 1.0, -1.0, 3e-7 if dt is T.float32 else 3e-17, 1e-45 if dt is T.float32 else 5e-324,
                         -2.0, 0.0, 5.0, 2.0, -2.0, 1.0, 3.0, np.inf, -np.inf]]).astype(npd)
    ta, tb = nbx.from_numpy(a).to(device), nbx.from_numpy(b).to(device)
    with np.errstate(all="ignore"):
        eq, er = _np_div_floor(a, b), _np_remainder(a, b)
    for name, got, exp in (("floor_divide", nbx.floor_divide(ta, tb), eq), ("remainder", ta % tb, er)):
        g = got.cpu().numpy()
        ok = _same_bits(g, exp)
        assert ok.all(), (name, a[~ok][:5], b[~ok][:5], g[~ok][:5], exp[~ok][:5])


def _kernels_run(device) -> bool:
    """Whether ops on ``device`` run the Triton kernels (the interpreter tier or a GPU), not the NumPy ones."""
    return H.INTERPRET or str(device).startswith("cuda")


@pytest.mark.parametrize("dt", [T.bfloat16, T.float16, T.float32], ids=["bfloat16", "float16", "float32"])
def test_remainder_mixed_operands_one_launch_bit_for_bit(dt, device):
    """remainder's kernel (ATen's fmod formula computed in float32, rounded once to the 16-bit dtype) equals
    NumPy's ATen formula bit for bit with every float16 / bfloat16 dividend against special divisors (signed
    zeros, infinities, NaN, subnormal extremes, the largest value, odd mantissas) and random ones, all in one
    launch so that the fma path and the fmod fallback share blocks; float32 pairs with exact multiples and their
    neighbours, quotients from 2**-20 to 2**40 (the fmod fallback beyond 2**22), subnormal, huge and non-finite
    operands. (These once checked the dropped fast bodies of commit 77305ea against this one.)"""
    from nbxtensor.ops.elementwise import _np_remainder
    from nbxtensor.runtime import configs
    if not _kernels_run(device):
        pytest.skip("the NumPy kernel is the reference itself: interpreter tier or GPU")
    rng = np.random.default_rng(21)
    if dt is not T.float32:
        a16 = np.arange(1 << 16, dtype=np.uint16).view(dt.numpy).astype(np.float32)
        divs = _divisors16(dt, 2 if H.QUICK else 16, seed=31 + (dt is T.float16))
        a, b = np.tile(a16, len(divs)), np.repeat(divs, len(a16))
    else:
        n = 4000 if H.QUICK else 40000
        b = (rng.standard_normal(n) * np.exp2(rng.integers(-20, 21, n))).astype(np.float32)
        a = (b.astype(np.float64) * rng.uniform(-1, 1, n) * np.exp2(rng.integers(-20, 41, n))).astype(np.float32)
        k = n // 8
        a[:k] = (b[:k].astype(np.float64) * rng.integers(-5000, 5000, k)).astype(np.float32)  # exact multiples
        a[k:2 * k] = np.nextafter(a[:k], np.float32(np.inf))
        a[2 * k:3 * k] = np.nextafter(a[:k], np.float32(-np.inf))
        sp = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, 1.17549435e-38, 3.4e38, -3.4e38,
                       2.0 ** 126, -2.0 ** 127, 1.0, -1.0, 3.0, 4194304.0, -4194303.5, 8388609.0, -1e-10], np.float32)
        m = len(sp)
        a[3 * k:3 * k + m * m], b[3 * k:3 * k + m * m] = np.repeat(sp, m), np.tile(sp, m)
    with np.errstate(all="ignore"):
        exp = cast_array(_np_remainder(a, b).astype(np.float32), T.float32, dt)
    ta = nbx.from_numpy(cast_array(a, T.float32, dt)).to(device)
    tb = nbx.from_numpy(cast_array(b, T.float32, dt)).to(device)
    big = {"BLOCK": 1 << 14} if H.INTERPRET else {}  # (fewer interpreted programs; the GPU keeps its schedule)
    with configs.override("pointwise", **big) if big else contextlib.nullcontext():
        got = (ta % tb).cpu().numpy()
    ok = _same_bits(got.astype(np.float32), exp.astype(np.float32))
    assert ok.all(), (int((~ok).sum()), a[~ok][:5], b[~ok][:5], got[~ok][:5], exp[~ok][:5])


def test_16bit_floor_division_takes_the_general_body_for_other_operands(device):
    """The no-fmod body needs operands that are values of the 16-bit output dtype: a Python scalar that
    bfloat16 cannot hold (0.1, computed in float32) or a float32 output keeps the general body, and the results
    still equal ATen's formula."""
    from nbxtensor.ops.elementwise import _floor_body, _div_floor16_b, _div_floor_b, _np_div_floor
    x = nbx.tensor([1e6, -7.0, 3.0, 1e30], dtype=nbx.bfloat16, device=device)
    assert _floor_body(x, [x, x]) is _div_floor16_b
    assert _floor_body(x, [x, np.float32(0.5)]) is _div_floor16_b
    assert _floor_body(x, [x, np.float32(0.1)]) is _div_floor_b
    assert _floor_body(x.float(), [x.float(), x.float()]) is _div_floor_b
    assert _floor_body(x, [x, x.half()]) is _div_floor_b
    xf = x.cpu().float().numpy()
    with np.errstate(all="ignore"):
        exp = cast_array(_np_div_floor(xf, np.full_like(xf, np.float32(0.1))), T.float32, T.bfloat16)
    got = (x // 0.1).cpu().numpy()
    assert _same_bits(got.astype(np.float32), exp.astype(np.float32)).all(), (got, exp)


def test_unsigned_division_by_zero_in_kernels():
    """uint8 floor and trunc division by zero give all ones (255, CUDA's -1) in the kernels (``-1`` itself
    did not compile for unsigned dtypes)."""
    if not H.INTERPRET:
        pytest.skip("checks the Triton kernels (interpreter tier)")
    a, z = nbx.tensor([5, 7], dtype=nbx.uint8), nbx.tensor([0, 2], dtype=nbx.uint8)
    assert (a // z).tolist() == [255, 3]
    assert nbx.div(a, z, rounding_mode="trunc").tolist() == [255, 3]
    assert nbx.div(a, z, rounding_mode="floor").tolist() == [255, 3]


# SASS instructions per element on sm_90 (H200), the benchmark's large-tensor launch. Before the one-division
# kernels (fmod inline, two IEEE divisions): floor_divide/div floor 128.2 (bfloat16), 128.3 (float16), 125.4
# (float32); remainder 81.1, 79.9, 79.8 -- and uint8 floor division did not compile. At 4096 elements / 8 warps the
# one-division bodies took <= 40; the table's large-tensor launch is now 1024 / 4 warps (8 elements per thread, less
# to spread the fixed instructions over): 45.0 (bfloat16), 44.1 (float16).
_DIV_BUDGETS = {
    ("floor_divide", "bfloat16"): 48, ("floor_divide", "float16"): 48, ("div_floor", "bfloat16"): 48,
    ("floor_divide", "uint8"): 20,
}


@pytest.mark.skipif(H.INTERPRET, reason="compiles with Triton's real compiler")
@pytest.mark.parametrize("case", list(_DIV_BUDGETS), ids=["-".join(c) for c in _DIV_BUDGETS])
def test_sm90_floor_division_instruction_budget(case, monkeypatch):
    """The bfloat16/float16 floor-division kernels compile for sm_90 with 16-byte accesses and no fmod."""
    pytest.importorskip("triton")
    from test_pointwise import _bf16_launch, _compile_as_jit, _sass_per_element
    name, dtn = case
    dt = getattr(nbx, dtn)
    e = lambda: nbx.empty(1024, 8192, dtype=dt)  # noqa: E731
    call = (lambda: nbx.floor_divide(e(), e())) if name == "floor_divide" else \
        (lambda: nbx.div(e(), e(), rounding_mode="floor"))
    kernel, kargs, meta = _bf16_launch(call, monkeypatch)
    per, ops = _sass_per_element(_compile_as_jit(kernel, kargs, meta), meta)
    assert "LDG.E.128" in ops and "STG.E.128" in ops, ops
    assert per <= _DIV_BUDGETS[case], f"{case}: {per:.1f} SASS instructions per element"


def test_signature_and_dtype_refusals_as_pytorch(device):
    a = nbx.tensor([1, 2, 3], device=device)
    with pytest.raises(TypeError, match="out"):   # torch.rsub has no out= argument
        nbx.rsub(a, a, out=nbx.empty(3, dtype=nbx.int64, device=device))
    b = nbx.tensor([True, False, True], device=device)
    for call in (lambda: nbx.pow(b, b), lambda: b ** b, lambda: nbx.pow(True, b), lambda: b.clone().pow_(b)):
        with pytest.raises(NotImplementedError, match="\"pow\" not implemented for 'Bool'"):
            call()
    assert nbx.pow(b, True).tolist() == [True, False, True] and nbx.pow(b, 2).tolist() == [1, 0, 1]
    for x in (a, a.float()):
        with pytest.raises(RuntimeError, match="Integer division with addcdiv is no longer supported"):
            nbx.addcdiv(x, a, a)
    with pytest.raises(RuntimeError, match="Integer division with addcdiv"):
        nbx.addcdiv(b, b, b)
    assert nbx.addcdiv(a, a.float(), a.float()).tolist() == [2.0, 3.0, 4.0]
