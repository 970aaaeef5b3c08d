"""The wrapped Triton primitives (ops/triton_helpers.py), each against PyTorch's definition: integer and
floating floor division and remainder (special values included), IEEE division and square root in float32
and float64, NaN-propagating max/min and their reductions (argmax with NaN as the extreme, first index on
ties), signbit, rint, conversions.

Kernels run under the interpreter (``NBX_TRITON_INTERPRET=1``) or on a CUDA device (``NBX_TEST_DEVICE=cuda``);
in the plain cpu tier these tests skip (tests/ops/test_pointwise.py compiles every helper for sm_90 there).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.runtime.launcher import launch
from nbxtensor.runtime.triton_compat import HAVE_TRITON, jit, tl
from nbxtensor.ops import triton_helpers as TH

import pointwise_harness as H

pytestmark = [pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning"),
              pytest.mark.skipif(not HAVE_TRITON, reason="needs Triton")]


@pytest.fixture
def kdevice(device):
    if device == "cpu" and not H.INTERPRET:
        pytest.skip("Triton kernels on the cpu device need the interpreter tier (NBX_TRITON_INTERPRET=1)")
    return device


@jit
def _binary_kernel(O, A, B, N, FN: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    a = tl.load(A + i, mask=m)
    b = tl.load(B + i, mask=m)
    tl.store(O + i, FN(a, b), mask=m)


@jit
def _unary_kernel(O, A, N, FN: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = i < N
    tl.store(O + i, FN(tl.load(A + i, mask=m)), mask=m)


def _run2(fn, a: np.ndarray, b: np.ndarray, out_dtype, device):
    A, B = nbx.from_numpy(a).to(device), nbx.from_numpy(b).to(device)
    O = nbx.empty(a.shape, dtype=out_dtype, device=device)
    launch(_binary_kernel, ((a.size + 255) // 256,), O, A, B, a.size, FN=fn, BLOCK=256, **TH.ieee_options())
    return O.cpu().numpy()


def _run1(fn, a: np.ndarray, out_dtype, device):
    A = nbx.from_numpy(a).to(device)
    O = nbx.empty(a.shape, dtype=out_dtype, device=device)
    launch(_unary_kernel, ((a.size + 255) // 256,), O, A, a.size, FN=fn, BLOCK=256, **TH.ieee_options())
    return O.cpu().numpy()


@pytest.mark.parametrize("dt", [np.int8, np.int32, np.int64])
def test_integer_floor_division_and_remainder(dt, kdevice):
    v = np.arange(-9, 10)
    a, b = (np.ascontiguousarray(x.ravel()).astype(dt) for x in np.meshgrid(v, v, indexing="ij"))
    q = _run2(TH.floordiv_int, a, b, nbx.from_numpy(a).dtype, kdevice)
    r = _run2(TH.remainder_int, a, b, nbx.from_numpy(a).dtype, kdevice)
    nz = b != 0
    assert (q[nz] == np.array([int(x) // int(y) for x, y in zip(a[nz], b[nz])])).all()
    assert (r[nz] == np.array([int(x) % int(y) for x, y in zip(a[nz], b[nz])])).all()
    assert (q[~nz] == -1).all() and (r[~nz] == a[~nz]).all()  # the documented zero-divisor result
    assert (a // np.where(nz, b, 1))[nz].tolist() == q[nz].tolist()  # Triton's own // would truncate


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_float_floor_division_and_remainder(dt, kdevice):
    rng = np.random.default_rng(0)
    a = np.concatenate([rng.uniform(-50, 50, 300), [5.0, -5.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, 7.0,
                                                    0.3]]).astype(dt)
    b = np.concatenate([rng.uniform(-7, 7, 300), [0.0, 0.0, 2.0, 2.0, 2.0, -2.0, 1.0, -3.0, 0.1, 0.1]]).astype(dt)
    q = _run2(TH.floordiv_float, a, b, nbx.from_numpy(a).dtype, kdevice)
    r = _run2(TH.remainder_float, a, b, nbx.from_numpy(a).dtype, kdevice)
    for x, y, qq, rr in zip(a.tolist(), b.tolist(), q.tolist(), r.tolist()):
        if y == 0:
            with np.errstate(all="ignore"):
                e = np.float64(x) / np.float64(y)
            assert (math.isnan(qq) and math.isnan(e)) or qq == e
            continue
        eq = x // y if math.isfinite(x) else float("nan")
        er = x % y if math.isfinite(x) else float("nan")
        assert (math.isnan(qq) and math.isnan(eq)) or qq == eq or dt is np.float32, (x, y, qq, eq)
        if dt is np.float32 and not math.isnan(eq):
            assert abs(qq - eq) <= 1, (x, y, qq, eq)
        if not math.isnan(er):
            assert abs(rr - er) <= 1e-5 * max(1.0, abs(y)) or (abs(rr) == abs(y) and abs(er) < 1e-5), (x, y, rr, er)


# +-0, subnormals, huge values, +-inf and NaN: the values where Triton's defaults on the GPU (libdevice with
# flush-to-zero, float32 `/` as div.full.f32) differ from PyTorch's CUDA kernels.
_SPECIAL32 = [0.0, -0.0, 1e-45, -2e-40, 1.0, -1.0, 2.5, -7.0, 3e38, -3e38, np.inf, -np.inf, np.nan]
_SPECIAL64 = [0.0, -0.0, 5e-324, -1e-310, 1.0, -1.0, 2.5, -7.0, 1e308, -1e308, np.inf, -np.inf, np.nan]


def _pairs(dt):
    v = np.array(_SPECIAL32 if dt is np.float32 else _SPECIAL64, dtype=dt)
    a, b = np.meshgrid(v, v, indexing="ij")
    return np.ascontiguousarray(a.ravel()), np.ascontiguousarray(b.ravel())


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_ieee_division_and_sqrt(dt, kdevice):
    """div_rn and sqrt_rn are correctly rounded for float32 and float64 (NumPy's IEEE results, bit for bit,
    signed zeros included): subnormal quotients of huge divisors (div.full.f32 returns 0), subnormal operands,
    infinities, NaN. Triton's own tl.div_rn/tl.sqrt_rn refuse float64."""
    a, b = _pairs(dt)
    a = np.concatenate([a, np.array([1.0, 3.0, 2.0, 1e-3], dt)])
    b = np.concatenate([b, np.array([3.0, 7.0, 3e38 if dt is np.float32 else 1.5e308, 3.0], dt)])
    with np.errstate(all="ignore"):
        q = a / b
        r = np.sqrt(np.abs(a))
    bits = np.uint32 if dt is np.float32 else np.uint64
    got = _run2(TH.div_rn, a, b, nbx.from_numpy(a).dtype, kdevice)
    ok = ~np.isnan(q)
    np.testing.assert_array_equal(got[ok].view(bits), q[ok].view(bits))
    assert np.isnan(got[~ok]).all()
    s = _run1(TH.sqrt_rn, np.abs(a), nbx.from_numpy(a).dtype, kdevice)
    ok = ~np.isnan(r)
    np.testing.assert_array_equal(s[ok].view(bits), r[ok].view(bits))
    assert np.isnan(s[~ok]).all()


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_float_floor_division_special_values(dt, kdevice):
    """floordiv_float and remainder_float on every pair of special values equal ATen's formulas evaluated by
    NumPy in the same dtype, bit for bit (signed zeros, subnormal dividends and divisors, huge values, inf,
    NaN): the H200 gave NaN and -0 here while libdevice flushed subnormals."""
    from nbxtensor.ops.elementwise import _np_div_floor, _np_remainder
    a, b = _pairs(dt)
    q = _run2(TH.floordiv_float, a, b, nbx.from_numpy(a).dtype, kdevice)
    r = _run2(TH.remainder_float, a, b, nbx.from_numpy(a).dtype, kdevice)
    with np.errstate(all="ignore"):
        eq, er = _np_div_floor(a, b), _np_remainder(a, b)
    for got, exp, what in ((q, eq, "floordiv"), (r, er, "remainder")):
        same = (got == exp) & (np.signbit(got) == np.signbit(exp)) | (np.isnan(got) & np.isnan(exp))
        assert same.all(), (what, a[~same], b[~same], got[~same], exp[~same])


def test_nan_maximum_minimum(kdevice):
    nan = np.nan
    a = np.array([nan, 1.0, 2.0, nan, -0.0], np.float32)
    b = np.array([1.0, nan, 1.0, nan, 0.0], np.float32)
    mx = _run2(TH.maximum, a, b, nbx.float32, kdevice)
    mn = _run2(TH.minimum, a, b, nbx.float32, kdevice)
    assert np.isnan(mx[[0, 1, 3]]).all() and mx[2] == 2.0
    assert np.isnan(mn[[0, 1, 3]]).all() and mn[2] == 1.0
    ai = np.array([3, -4, 7], np.int32)
    bi = np.array([5, -9, 7], np.int32)
    assert _run2(TH.maximum, ai, bi, nbx.int32, kdevice).tolist() == [5, -4, 7]


@jit
def _reduce_kernel(V, I, X, N: tl.constexpr, OP: tl.constexpr):
    offs = tl.arange(0, N)
    row = tl.program_id(0)
    x = tl.load(X + row * N + offs)
    if OP == 0:
        tl.store(V + row, TH.nan_max(x, 0))
    elif OP == 1:
        tl.store(V + row, TH.nan_min(x, 0))
    elif OP == 2:
        v, i = TH.nan_argmax(x, offs, 0)
        tl.store(V + row, v)
        tl.store(I + row, i)
    else:
        v, i = TH.nan_argmin(x, offs, 0)
        tl.store(V + row, v)
        tl.store(I + row, i)


def test_nan_reductions_and_argmax(kdevice):
    nan = np.nan
    rows = np.array([[1, 5, 5, 2, -1, 0, 3, 5],
                     [1, nan, 5, nan, -1, 0, 3, 5],
                     [-2, -7, 4, -7, 4, 1, 1, -7],
                     [nan, nan, nan, nan, nan, nan, nan, nan]], dtype=np.float32)
    X = nbx.from_numpy(rows).to(kdevice)
    for op in range(4):
        V = nbx.empty(4, device=kdevice)
        I = nbx.empty(4, dtype=nbx.int32, device=kdevice)
        launch(_reduce_kernel, (4,), V, I, X, N=8, OP=op)
        v, i = V.cpu().numpy(), I.cpu().numpy()
        if op in (0, 2):
            assert v[0] == 5 and np.isnan(v[1]) and v[2] == 4 and np.isnan(v[3])
        else:
            assert v[0] == -1 and np.isnan(v[1]) and v[2] == -7 and np.isnan(v[3])
        if op == 2:
            assert i.tolist() == [1, 1, 2, 0]  # first maximum; the first NaN
        if op == 3:
            assert i.tolist() == [4, 1, 1, 0]  # first minimum; the first NaN


def test_signbit_rint(kdevice):
    a = np.array([-0.0, 0.0, -1.5, 2.5, 0.5, -2.5, np.nan, -np.inf], np.float32)
    assert _run1(TH.signbit, a, nbx.bool, kdevice).tolist()[:6] == [True, False, True, False, False, True]
    assert _run1(TH.rint, a, nbx.float32, kdevice).tolist()[2:6] == [-2.0, 2.0, 0.0, -2.0]
    d = a.astype(np.float64)
    assert _run1(TH.signbit, d, nbx.bool, kdevice).tolist()[:3] == [True, False, True]


@jit
def _to_uint8(x):
    return TH.convert(x, tl.uint8)


@jit
def _to_e4m3(x):
    return TH.convert(x, tl.float8e4nv)


def test_convert_rules(kdevice):
    a = np.array([np.nan, np.inf, -np.inf, 300.0, -3.0, 2.9, 255.5], np.float32)
    assert _run1(_to_uint8, a, nbx.uint8, kdevice).tolist() == [0, 255, 0, 255, 0, 2, 255]
    # 2**-10 is half the smallest subnormal (a tie: to even, 0); 3 * 2**-10 is a tie between 1 and 2 (-> 2)
    e = _run1(_to_e4m3, np.array([500.0, 480.0, -np.inf, 2.0 ** -10, 3 * 2.0 ** -10], np.float32),
              nbx.float8_e4m3fn, kdevice)
    assert e.astype(np.float32).tolist() == [448.0, 448.0, -448.0, 0.0, 2.0 ** -8]


def test_interpreter_libdevice_names():
    for sym in ("__nv_tanf", "__nv_tan", "__nv_erfinvf", "__nv_fmodf", "__nv_signbitd", "__nv_rintf"):
        assert TH._extern_name(sym) in TH._EXTERN_NUMPY
    with pytest.raises(NotImplementedError, match="no NumPy mapping"):
        TH._extern_name("__nv_frexpf")
    y = np.array([-0.999, -0.5, 0.0, 0.3, 0.99999, 1.0, -1.0, 2.0])
    r = TH._erfinv64(y)
    assert np.allclose([math.erf(v) for v in r[:5]], y[:5], rtol=1e-14, atol=1e-15)
    assert r[5] == np.inf and r[6] == -np.inf and np.isnan(r[7])
