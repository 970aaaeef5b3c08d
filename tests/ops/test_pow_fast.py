"""pow's ``ALT_POW`` bodies and isclose's body without ``equal_nan`` (ops/elementwise.py ``_pow_a``, ``_pow_k``,
``_isclose_nonan_b``): every 16-bit base against the float64 oracle for the scalar exponents with their own
body and for a grid of exponents (large ones included) through the general body, C99's special values bit for
bit, and the compiled tier's sm_90 instruction budgets.

Runs on the device under test; on the cpu device only under ``NBX_TRITON_INTERPRET=1`` (the bodies are Triton
code; the interpreter flushes where the compiled ``.ftz`` instructions would).
"""

from __future__ import annotations

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.dtypes.casting import cast_array
from nbxtensor.runtime.configs import override
from nbxtensor.runtime.triton_compat import HAVE_TRITON

import pointwise_harness as H

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

_DT = [T.bfloat16, T.float16]
_IDS = ["bfloat16", "float16"]
# the exponents _pow_triton maps to a _pow_k body (2 y in +-1..6)
_SCALARS = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, -0.5, -1.0, -1.5, -2.0, -2.5, -3.0]


def _skip_plain_cpu(device):
    if device == "cpu" and not H.INTERPRET:
        pytest.skip("the cpu device computes with NumPy; the bodies run under the interpreter or on a GPU")


def _every_value(dt, step=1):
    v = np.arange(0, 65536, step * 5 if H.QUICK else step, dtype=np.uint32).astype(np.uint16).view(dt.numpy)
    return np.concatenate([v, np.array([0x7F80, 0xFF80, 0x0000, 0x8000], np.uint16).view(dt.numpy)]) \
        if dt is T.bfloat16 else np.concatenate([v, np.array([0x7C00, 0xFC00, 0x0000, 0x8000], np.uint16).view(
            dt.numpy)])


def _ulps16(got, exp):
    a, b = got.view(np.uint16).astype(np.int64), exp.view(np.uint16).astype(np.int64)
    return np.where((a >> 15) == (b >> 15), np.abs(a - b), (a & 0x7FFF) + (b & 0x7FFF))


def _check(got, x64, y64, dt, what, max_frac):
    """NaN where the oracle is NaN, exact infinities and zeros (signs included) and |x| = 1 / y = 0 results bit for bit,
    the rest within one 16-bit ulp of the correctly rounded value, at most ``max_frac`` of them off by one."""
    # signaling NaN bases quieted first: C99's pow(x, +-0) = 1 holds for every NaN, but libm's pow of a signaling
    # NaN gives NaN, and whether the 16-bit -> float64 cast quiets it depends on the host CPU's conversion path
    # (this oracle gave NaN for the float16 patterns 0x7C01..0x7DFF on an AVX2-only AMD EPYC, 1 elsewhere)
    x64 = np.where(np.isnan(x64), np.nan, x64)
    with np.errstate(all="ignore"):
        e64 = np.power(x64, y64)
        if np.ndim(y64) == 0 and abs(y64) == 0.5:
            # PyTorch's (ATen's kernels for these exponents: sqrt and rsqrt): pow(-0, 0.5) = -0, pow(-inf, 0.5) =
            # NaN, pow(-0, -0.5) = -inf, pow(-inf, -0.5) = NaN (NumPy: the first two; C99: +0, +inf, +inf, +0)
            e64 = np.sqrt(x64) if y64 > 0 else 1.0 / np.sqrt(x64)
    exp = cast_array(e64, T.float64, dt)
    g, e = got.astype(np.float64), exp.astype(np.float64)
    assert (np.isnan(g) == np.isnan(e)).all(), (what, x64[np.isnan(g) != np.isnan(e)][:8])
    fin = ~np.isnan(e)
    # exact zeros and infinities (not those of the rounding: a result at the edge of the range may round either way)
    special = fin & (~np.isfinite(e64) | (e64 == 0) | (np.abs(x64) == 1) | (y64 == 0))
    bad = special & ((g != e) | (np.signbit(g) != np.signbit(e)))
    assert not bad.any(), (what, x64[bad][:8], g[bad][:8], e[bad][:8])
    rest = fin & ~special
    ulps = _ulps16(got[rest], exp[rest])
    worst = int(ulps.max()) if ulps.size else 0
    assert worst <= 1 and (ulps > 0).mean() <= max_frac, (what, worst, float((ulps > 0).mean()))
    return int((ulps > 0).sum())


@pytest.mark.parametrize("dt", _DT, ids=_IDS)
def test_alt_pow_scalar_exponents_every_value(dt, device):
    """Every bfloat16/float16 value (signed zeros, infinities, NaNs, subnormals) to each scalar exponent with a
    _pow_k body (+-0.5 .. +-3): C99's special values, within one ulp of the oracle and equal to its rounding for
    all but 0.2 % (x**2 and x**-1 of a 16-bit x: all); the key off (libdevice's powf) agrees on the specials."""
    _skip_plain_cpu(device)
    x = _every_value(dt)
    x64 = cast_array(x, dt, T.float64)
    xt = nbx.from_numpy(x).to(device)
    for y in _SCALARS:
        with override("pointwise", ALT_POW=1):
            got = H.result_host(nbx.pow(xt, y))
        n = _check(got, x64, np.float64(y), dt, f"ALT_POW y={y}", 0.002)
        if y in (1.0, 2.0, -1.0, 0.5) and dt is T.bfloat16:
            assert n == 0, (y, n)


@pytest.mark.parametrize("dt", _DT, ids=_IDS)
def test_alt_pow_exponent_grid(dt, device):
    """The general ALT_POW body (half-log, (2**(t/2))**2): every 16-bit base to a grid of tensor exponents, from
    subnormal to 2**20, integers odd and even, halves and large ones whose results sit near the ends of the range
    (|y log2 x| up to ~133 for bfloat16): within one ulp of the oracle, off by one for at most 1 % of the finite
    results, C99's special values bit for bit. Every 4th 16-bit pattern as the base (every 20th in the quick tier:
    the interpreter's time)."""
    _skip_plain_cpu(device)
    x = _every_value(dt, 4)
    mags = [2.0 ** -20, 1e-3, 0.1, 1 / 3, 0.5, 1.0, 1.5, 2.0, 3.0, 7.0, 10.5, 33.0, 100.0, 127.0, 1000.0, 11904.0,
            2.0 ** 20] if not H.QUICK else [1e-3, 0.5, 1.0, 2.5, 3.0, 33.0, 1000.0, 11904.0]
    ys = cast_array(np.array(mags + [-m for m in mags] + [0.0, -0.0, np.inf, -np.inf, np.nan], np.float32),
                    T.float32, dt)
    xs, yy = np.meshgrid(x, ys, indexing="ij")
    xs, yy = np.ascontiguousarray(xs.ravel()), np.ascontiguousarray(yy.ravel())
    with override("pointwise", ALT_POW=1):
        got = H.result_host(nbx.pow(nbx.from_numpy(xs).to(device), nbx.from_numpy(yy).to(device)))
    _check(got, cast_array(xs, dt, T.float64), cast_array(yy, dt, T.float64), dt, "ALT_POW tensor", 0.01)


def _pow_grid(dt, step):
    x = _every_value(dt, step)
    mags = [2.0 ** -20, 1e-3, 0.1, 1 / 3, 0.5, 1.0, 1.5, 2.0, 3.0, 7.0, 10.5, 33.0, 100.0, 127.0, 1000.0, 11904.0,
            2.0 ** 20] if not H.QUICK else [1e-3, 0.5, 1.0, 2.5, 3.0, 33.0, 1000.0, 11904.0]
    ys = cast_array(np.array(mags + [-m for m in mags] + [0.0, -0.0, np.inf, -np.inf, np.nan], np.float32),
                    T.float32, dt)
    xs, yy = np.meshgrid(x, ys, indexing="ij")
    return np.ascontiguousarray(xs.ravel()), np.ascontiguousarray(yy.ravel())


def _near_one(dt):
    """Bases in (0.875, 1.125) (the polynomial's range and its edges, where lg2.approx's absolute error would not
    do) with exponents putting |y log2 x| near the ends of the 16-bit range (bfloat16 96..133, float16 12..24), both
    signs, and negative bases to odd integer exponents."""
    info = np.finfo(np.float32)
    lo, hi = (96.0, 133.0) if dt is T.bfloat16 else (12.0, 24.0)
    b = np.arange(0, 65536, 1, dtype=np.uint32).astype(np.uint16).view(dt.numpy)
    b64 = cast_array(b, dt, T.float64)
    x = b[(b64 > 0.8) & (b64 < 1.25) & (b64 != 1)]
    x64 = cast_array(x, dt, T.float64)
    rng = np.random.default_rng(5)
    reps = 4 if H.QUICK else 24
    xs = np.repeat(x, reps)
    t = rng.uniform(lo, hi, xs.size) * rng.choice([-1.0, 1.0], xs.size)
    y = cast_array((t / np.log2(np.repeat(x64, reps))).astype(np.float32), T.float32, dt)
    fin = np.isfinite(y.astype(np.float64)) & (info.max > np.abs(y.astype(np.float64)))
    xs, y = xs[fin], y[fin]
    # odd integer exponents of negative bases (a sign), near the same range where the integers reach it
    yi = np.rint(y.astype(np.float64))
    yi = np.where(yi % 2 == 0, yi + 1, yi)
    yo = cast_array(yi.astype(np.float32), T.float32, dt)
    odd = cast_array(yo, dt, T.float64) % 2 == 1
    xn = cast_array(-cast_array(xs, dt, T.float64), T.float64, dt)
    return np.concatenate([xs, xn[odd]]), np.concatenate([y, yo[odd]])


@pytest.mark.parametrize("err", [0.0, 1.0, -1.0], ids=["exact", "err+", "err-"])
@pytest.mark.parametrize("dt", _DT, ids=_IDS)
def test_alt_pow2_every_base_and_near_one(dt, err, device):
    """ALT_POW = 2 (_pow_a2: lg2.approx, a degree-4 log2(1 + u) fit near 1, one ex2.approx.ftz squared): the exponent
    grid over every 4th 16-bit base and the hard cases near x = 1 with |y log2 x| at the end of the 16-bit range,
    within one ulp of the oracle (off by one for at most 1 % / 3 %), C99's special values bit for bit; under the
    interpreter also with every approximate instruction pushed to either end of its documented error (the
    near-one cases fail with lg2.approx alone there)."""
    _skip_plain_cpu(device)
    if err and not H.INTERPRET:
        pytest.skip("the error push is the interpreter's")
    from triton import language as tl
    from nbxtensor.ops import fast_math16 as M16
    old = M16._ERR
    M16._ERR = tl.constexpr(err)
    try:
        for what, (xs, yy), frac in (("grid", _pow_grid(dt, 4 if err == 0 else 16), 0.01),
                                     ("near one", _near_one(dt), 0.03)):
            with override("pointwise", ALT_POW=2):
                got = H.result_host(nbx.pow(nbx.from_numpy(xs).to(device), nbx.from_numpy(yy).to(device)))
            _check(got, cast_array(xs, dt, T.float64), cast_array(yy, dt, T.float64), dt, f"ALT_POW=2 {what}", frac)
    finally:
        M16._ERR = old


def test_alt_pow_scalar_exponent_picks_the_body(monkeypatch):
    """_pow_triton hands launch_pointwise the _pow_k body for +-0.5 .. +-3 (NumPy or Python scalars, a tensor
    base) and the general body for other exponents, tensor exponents and scalar bases."""
    from nbxtensor.ops import elementwise as E
    seen = []
    monkeypatch.setattr(E, "launch_pointwise", lambda body, out, inputs, ct, pv, **k: seen.append(k["alt"].body))
    x = nbx.tensor([2.0], dtype=nbx.bfloat16)
    prom = type("P", (), {"compute": T.bfloat16})()
    for e, body in ((np.float32(2.5), E._pow_p25), (2, E._pow_p2), (-0.5, E._pow_m05), (np.float32(0.75), E._pow_a),
                    (4.0, E._pow_a), (float("nan"), E._pow_a), (x, E._pow_a)):
        E._pow_triton(x, [x, e], prom, {})
        assert seen[-1] is body, e
    E._pow_triton(x, [np.float32(2.0), x], prom, {})
    assert seen[-1] is E._pow_a


def test_alt_pow_2_takes_the_level_2_body(monkeypatch):
    """ALT_POW = 2: launch_pointwise takes the general Alt's ``body2`` (_pow_a2) for 16-bit outputs of tensor and
    other exponents; the scalar bodies (their Alts have no body2) and ALT_POW = 1 stay; float32 outputs keep the
    default body (a narrow Alt)."""
    from nbxtensor.ops import elementwise as E
    from nbxtensor.ops import pointwise as PW
    seen = []
    monkeypatch.setattr(PW, "_launch_planned", lambda kernel, grid, args, tail: seen.append(tail.meta["BODY"]))
    monkeypatch.setattr(PW, "_PLANS", {})
    x = nbx.tensor([2.0], dtype=nbx.bfloat16)
    prom = type("P", (), {"compute": T.bfloat16})()
    with override("pointwise", ALT_POW=2):
        for e, body in ((x, E._pow_a2), (np.float32(0.75), E._pow_a2), (2, E._pow_p2), (-0.5, E._pow_m05)):
            E._pow_triton(nbx.empty(1, dtype=nbx.bfloat16), [x, e], prom, {})
            assert seen[-1] is body, e
        xf = nbx.tensor([2.0])
        E._pow_triton(nbx.empty(1), [xf, xf], type("P", (), {"compute": T.float32})(), {})
        assert seen[-1] is E._pow_b  # (a narrow Alt: float32 keeps the default body)
    with override("pointwise", ALT_POW=1):
        E._pow_triton(nbx.empty(1, dtype=nbx.bfloat16), [x, x], prom, {})
        assert seen[-1] is E._pow_a


@pytest.mark.parametrize("dt", [T.bfloat16, T.float16, T.float32], ids=["bfloat16", "float16", "float32"])
def test_isclose_without_equal_nan_matches_the_oracle(dt, device):
    """isclose with equal_nan=False takes _isclose_nonan_b: every pair of special and nearby values, both
    parameter sets, equal to the oracle (and to equal_nan=True except on NaN pairs)."""
    from nbxtensor.ops import registry
    rec = registry.get("isclose")
    v = np.array([0.0, -0.0, 1.0, -1.0, 1.0 + 2 ** -7, 1.0 - 2 ** -8, 1e-8, 3e-5, 100.0, 100.5, np.inf, -np.inf,
                  np.nan, 65504.0, 1e30, 2.0 ** -130], np.float64)
    hv = cast_array(v, T.float64, dt)
    a, b = np.meshgrid(hv, hv, indexing="ij")
    a, b = np.ascontiguousarray(a.ravel()), np.ascontiguousarray(b.ravel())
    ta, tb = nbx.from_numpy(a).to(device), nbx.from_numpy(b).to(device)
    for kw in ({}, {"rtol": 0.1, "atol": 0.5}):
        got = H.result_host(nbx.isclose(ta, tb, **kw))
        np.testing.assert_array_equal(got, rec.oracle(a, b, **kw))
        both = H.result_host(nbx.isclose(ta, tb, equal_nan=True, **kw))
        nan2 = np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
        np.testing.assert_array_equal(both, got | nan2)


# sm_90 SASS instructions per element (tests/ops/test_pointwise.py's helpers), bf16 launches as the 32768 x 8192
# benchmark; measured 2026-11-30 (session 6): pow 60.25 -> 48.0, pow(x, 2.5) 51.38 -> 12.0, pow(x, 2.0) 5.0,
# pow(x, -1.0) 11.1, pow(x, -2.5) 14.0, isclose 26.94 -> 20.62.
_BUDGETS = {
    "pow": (lambda: nbx.pow(_e(), _e()), 49),
    "pow 2.5": (lambda: nbx.pow(_e(), 2.5), 12.5),
    "pow 2": (lambda: nbx.pow(_e(), 2.0), 5.5),
    "pow -1": (lambda: nbx.pow(_e(), -1.0), 12),
    "pow -2.5": (lambda: nbx.pow(_e(), -2.5), 14.5),
    "isclose": (lambda: nbx.isclose(_e(), _e()), 21),
    "pow ALT_POW=2": (lambda: nbx.pow(_e(), _e()), 33),
}


def _e():
    return nbx.empty(1024, 8192, dtype=nbx.bfloat16)


@pytest.mark.skipif(H.INTERPRET or not HAVE_TRITON, reason="compiles with Triton's real compiler")
@pytest.mark.parametrize("op", list(_BUDGETS))
def test_sm90_instruction_budget(op, monkeypatch):
    """ALT_POW's bodies (the key on, as sm90.json has it) and isclose compiled for sm_90: 16-byte accesses, within
    budget."""
    from test_pointwise import _bf16_launch, _compile_as_jit, _sass_per_element
    call, budget = _BUDGETS[op]
    with override("pointwise", ALT_POW=2 if op.endswith("ALT_POW=2") else 1):
        kernel, kargs, meta = _bf16_launch(call, monkeypatch)
    per, ops = _sass_per_element(_compile_as_jit(kernel, kargs, meta), meta)
    assert "LDG.E.128" in ops and "STG.E.128" in ops, ops
    assert per <= budget, f"{op}: {per:.2f} SASS instructions per element, budget {budget}"


# ---------------------------------------------------------------------------------------------------------
# ALT_REMAINDER (ops/elementwise.py _remainder_a): bit for bit the default body (ATen's fmod formula)
# ---------------------------------------------------------------------------------------------------------
def _same_bits(got, exp):
    g, e = np.asarray(got).astype(np.float64), np.asarray(exp).astype(np.float64)
    return (g == e) & (np.signbit(g) == np.signbit(e)) | (np.isnan(g) & np.isnan(e))


def _remainder_pairs(dt, rng, n):
    """(fast, mixed): pairs whose quotients stay below 2**21 (every block takes the fma path), among them
    multiples and near-multiples of the divisor (zeros of both signs, both corrections), and random bit patterns
    with every special value (mostly blocks that take the default body)."""
    y = rng.uniform(0.01, 100.0, n) * rng.choice([-1.0, 1.0], n)
    k = rng.integers(-3000, 3000, n).astype(np.float64)
    x = np.concatenate([rng.uniform(-1e3, 1e3, n // 2), k[: n - n // 2] * y[: n - n // 2]])
    # exact multiples (zeros of fmod, signed as x): small integers times divisors of three significant bits
    ex = rng.random(n) < 0.2
    yy = rng.integers(1, 8, n) * 2.0 ** rng.integers(-4, 4, n) * rng.choice([-1.0, 1.0], n)
    x, y = np.where(ex, rng.integers(-20, 21, n) * yy, x), np.where(ex, yy, y)
    x = np.where(rng.random(n) < 0.05, rng.choice([0.0, -0.0], n), x)
    y = np.where(rng.random(n) < 0.02, rng.choice([np.inf, -np.inf, 0.0, -0.0, np.nan], n), y)
    xd, yd = cast_array(x, T.float64, dt), cast_array(y, T.float64, dt)
    # near-multiples in the dtype itself: one unit in the last place up or down (both corrections of t0)
    ib = xd.view(np.uint32 if dt is T.float32 else np.uint16)
    step = np.where(rng.random(n) < 0.4, rng.choice([-1, 1], n), 0).astype(ib.dtype)
    fin = np.isfinite(xd.astype(np.float64)) & (xd.astype(np.float64) != 0)
    xd = np.where(fin, (ib + step).view(xd.dtype), xd)
    if dt is T.float32:
        # x / y just below an integer (within 2**-23 relative: only float32 operands get there), where a quotient
        # rounded up truncates one too far
        m = n // 8
        yb = yd[:m].astype(np.float64)
        xb = (rng.integers(1, 5000, m) * yb).astype(np.float32)
        hi = xb.astype(np.float64) / yb >= np.rint(xb.astype(np.float64) / yb)
        xb = np.where(hi & np.isfinite(xb) & (xb != 0), np.nextafter(xb, np.float32(0)), xb)
        xd = np.concatenate([xb, xd[m:]])
    fast = (xd, yd)
    if dt is T.float32:
        bits = rng.integers(0, 1 << 32, (2, n), dtype=np.uint64).astype(np.uint32).view(np.float32)
    else:
        bits = rng.integers(0, 1 << 16, (2, n)).astype(np.uint16).view(dt.numpy)
    return fast, (bits[0].copy(), bits[1].copy())


@pytest.mark.parametrize("dt", [T.bfloat16, T.float16, T.float32], ids=["bfloat16", "float16", "float32"])
def test_alt_remainder_bit_identical(dt, device):
    """ALT_REMAINDER gives the default body's remainder bit for bit (signed zeros, NaNs, infinities, subnormal
    and huge divisors, large quotients through the slow path), on small quotients (the fma path alone) and on random
    bit patterns (mixing both). On the GPU this is the test of the slow path's PTX; the interpreter takes NumPy's
    fmod where the certificate fails."""
    _skip_plain_cpu(device)
    rng = np.random.default_rng(11)
    n = 4096 if H.QUICK else 65536
    for what, (x, y) in zip(("fast", "mixed"), _remainder_pairs(dt, rng, n)):
        tx, ty = nbx.from_numpy(np.ascontiguousarray(x)).to(device), nbx.from_numpy(np.ascontiguousarray(y)).to(device)
        with override("pointwise", ALT_REMAINDER=0):
            exp = H.result_host(nbx.remainder(tx, ty))
        with override("pointwise", ALT_REMAINDER=1):
            got = H.result_host(nbx.remainder(tx, ty))
        same = _same_bits(got, exp)
        assert same.all(), (what, x[~same][:6], y[~same][:6], got[~same][:6], exp[~same][:6])


@pytest.mark.parametrize("dt", [T.bfloat16, T.float16], ids=["bfloat16", "float16"])
def test_alt_remainder_grid_bit_identical(dt, device):
    """ALT_REMAINDER against the default body bit for bit on a grid of 16-bit pairs: every 64th bit pattern of
    each operand (every 256th in the quick tier), both signs, subnormals, zeros, infinities and NaNs among them and
    added, so that quotients from 2**-280 to 2**280 (bfloat16) meet the fast path, its certificate and the exact
    slow path (y = 0 -> NaN, x = +-inf -> NaN, y = +-inf -> x or x + y)."""
    _skip_plain_cpu(device)
    step = 256 if H.QUICK else 64
    v = np.arange(0, 65536, step, dtype=np.uint32).astype(np.uint16)
    inf, ninf = (0x7F80, 0xFF80) if dt is T.bfloat16 else (0x7C00, 0xFC00)
    nan = 0x7FC0 if dt is T.bfloat16 else 0x7E00
    v = np.concatenate([v, v + 1, np.array([0, 0x8000, 1, 0x8001, inf, ninf, nan, 0x3F80, 0xBF80], np.uint16)])
    v = v.view(dt.numpy)
    xs, ys = np.meshgrid(v, v, indexing="ij")
    xs, ys = np.ascontiguousarray(xs.ravel()), np.ascontiguousarray(ys.ravel())
    tx, ty = nbx.from_numpy(xs).to(device), nbx.from_numpy(ys).to(device)
    with override("pointwise", ALT_REMAINDER=0):
        exp = H.result_host(nbx.remainder(tx, ty))
    with override("pointwise", ALT_REMAINDER=1):
        got = H.result_host(nbx.remainder(tx, ty))
    same = _same_bits(got, exp)
    assert same.all(), (xs[~same][:6], ys[~same][:6], got[~same][:6], exp[~same][:6])


def _fast_path_per_element(sass: str, per_thread: int) -> float:
    """SASS instructions per element outside the slow paths: each `@P BRA P2, target` of _fmod_a's certificate jumps
    over the slow path to the BSYNC at ``target``; the instructions in between are not executed on the fast path."""
    import re
    rows = []  # (address, instruction): Triton's SASS text has one 16-byte instruction a line, from address 0
    for line in sass.splitlines():
        if "\t" in line and not line.startswith("Function"):
            rows.append((16 * len(rows), line.split("\t", 1)[1].strip().rstrip(";")))
    skip = set()
    for i, (addr, ins) in enumerate(rows):
        m = re.match(r"@!?P\d BRA !?P\d, 0x([0-9a-f]+)", ins)
        if m:
            target = int(m.group(1), 16)
            skip.update(a for a, _ in rows[i + 1:] if a < target)
    ops = [ins for a, ins in rows if a not in skip and not ins.startswith("NOP")]
    return len(ops) / per_thread


@pytest.mark.skipif(H.INTERPRET or not HAVE_TRITON, reason="compiles with Triton's real compiler")
def test_sm90_alt_remainder_fast_path(monkeypatch):
    """ALT_REMAINDER compiled for sm_90 at the table's 1024 / 4 warps: 16-byte accesses, no barrier or block
    reduction, one reciprocal per element, and the fast path (everything but the slow paths each certificate's
    branch jumps over) within 23.5 instructions per element (measured 2026-11-30: 22.6; the default body 82.5
    static, branchy; the static count with the slow paths is 127.6)."""
    from test_pointwise import _bf16_launch, _compile_as_jit, _sass_per_element
    with override("pointwise", ALT_REMAINDER=1):
        kernel, kargs, meta = _bf16_launch(lambda: nbx.remainder(_e(), _e()), monkeypatch)
    c = _compile_as_jit(kernel, kargs, meta)
    per, ops = _sass_per_element(c, meta)
    assert "LDG.E.128" in ops and "STG.E.128" in ops, ops
    assert not any(o.startswith(("BAR", "REDUX")) for o in ops), ops
    per_thread = meta["BLOCK"] // (32 * meta.get("num_warps", 4))
    assert ops.count("MUFU.RCP") == per_thread
    fast = _fast_path_per_element(c.asm["sass"], per_thread)
    assert fast <= 23.5, f"fast path {fast:.2f} SASS instructions per element"


# PyTorch 2.13 (CPU), torch.pow(x, e) for x = [-0., -inf, inf, -4., 0., nan, 4.]: a Python-scalar exponent of
# 0.5 / -0.5 is computed as sqrt / rsqrt; a tensor exponent keeps C99's pow
_HALF_X = [-0.0, -np.inf, np.inf, -4.0, 0.0, np.nan, 4.0]
_HALF_EXPECTED = {0.5: [-0.0, np.nan, np.inf, np.nan, 0.0, np.nan, 2.0],
                  -0.5: [-np.inf, np.nan, 0.0, np.nan, np.inf, np.nan, 0.5]}
_C99_HALF = [0.0, np.inf, np.inf, np.nan, 0.0, np.nan, 2.0]


@pytest.mark.parametrize("dt", [T.float32, T.bfloat16, T.float16, T.float64], ids=lambda d: d.name)
def test_scalar_half_exponent_follows_aten(dt, device):
    """pow(Tensor, +-0.5) on every path (NumPy on cpu, the default Triton body under the interpreter and on
    generic GPUs, ALT_POW on sm90) gives PyTorch's sqrt / rsqrt special values; the oracle agrees; the method,
    the operator, the in-place form and a tensor exponent (C99) too."""
    if dt is T.float64 and device != "cpu":
        pytest.skip("float64 runs on the cpu device")
    x = nbx.tensor(_HALF_X, dtype=dt, device=device)
    for e, want in _HALF_EXPECTED.items():
        for got in (nbx.pow(x, e), x ** e, x.clone().pow_(e)):
            np.testing.assert_array_equal(got.float().cpu().numpy(), np.array(want, np.float32))
            g = got.float().cpu().numpy()
            assert list(np.signbit(g) & ~np.isnan(g)) == list(np.signbit(want) & ~np.isnan(want)), (e, dt)
        from nbxtensor.ops import registry
        o = registry.get("pow").oracle(np.array(_HALF_X), np.float64(e), half=1 if e > 0 else -1)
        np.testing.assert_array_equal(o, np.array(want))
    t = nbx.pow(x, nbx.full_like(x, 0.5)).float().cpu().numpy()
    np.testing.assert_array_equal(t, np.array(_C99_HALF, np.float32))
    assert not np.signbit(t[0])


@pytest.mark.parity
def test_parity_scalar_half_exponent():
    torch = pytest.importorskip("torch")
    for e in (0.5, -0.5, 2.0, -1.0, 3.0):
        for dt, tdt in ((nbx.float32, torch.float32), (nbx.bfloat16, torch.bfloat16)):
            got = nbx.pow(nbx.tensor(_HALF_X, dtype=dt), e).float().numpy()
            want = torch.pow(torch.tensor(_HALF_X, dtype=tdt), e).float().numpy()
            np.testing.assert_array_equal(got, want)
            assert list(np.signbit(got) & ~np.isnan(got)) == list(np.signbit(want) & ~np.isnan(want)), (e, dt)


def test_sm90_table_takes_alt_pow_2_and_alt_remainder():
    """sm90.json's pointwise rules for float outputs set ALT_POW 2 and ALT_REMAINDER 1 (H200, session 6,
    sweep_pointwise --group alt / issue4 at dcd7c65, bf16 32768x8192, % of 4.8 TB/s: pow tensor ** tensor ALT_POW 1
    -> 2: 70.5 -> 91.2; remainder table -> ALT_REMAINDER: 77.4 -> 91.6, its outputs bit-equal; float32 remainder
    91.1 either way); the generic and interpreter tables set neither."""
    import json
    from pathlib import Path
    from nbxtensor.runtime import configs
    root = Path(configs.__file__).parent / "configs"
    rules = json.loads((root / "sm90.json").read_text())["pointwise"]
    keyed = [r["config"] for r in rules if "dtypes" not in r]
    assert keyed and all(c.get("ALT_POW") == 2 and c.get("ALT_REMAINDER") == 1 for c in keyed)
    for name in ("generic", "interpret"):
        other = json.loads((root / f"{name}.json").read_text()).get("pointwise", [])
        assert not any(r["config"].get("ALT_POW") or r["config"].get("ALT_REMAINDER") for r in other), name
