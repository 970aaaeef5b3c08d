"""``FAST_MATH16`` bodies of ops/fast_trig16.py (asin, acos, atan at levels 1 and 2; sin, cos, tan at level 2).

Interpreter tier (and the GPU tier, NBX_TEST_DEVICE=cuda, with the real approximate instructions): all 65 536 bit
patterns of bfloat16 and of float16 against the float64 oracle by the tolerance table, NaN where it has NaN,
infinities equal, signed zeros as the default body, at most one 16-bit ulp from the correctly rounded value, with
the approximate instructions exact and pushed to both ends of their documented error (fast_math16's ``_ERR``); the
results that differ from the default (libdevice) body are counted and bounded. Also float32 inputs into 16-bit
outputs (``out=``), which take the same bodies. Compiled tier: sm_90 SASS per element with and without the key.
The checks are test_fast_math16's (:class:`test_fast_math16._Case`). sin, cos, tan also: their reduction by pi/2
(fast path and the exact slow path, the interpreter's model of its PTX, or the PTX on the GPU tier) against one with
400 bits of pi, the slow path's constants, and the fast path's SASS count with the PTX slow path cut out. tan's ALT_TAN bodies
(ops/elementwise.py's Alt, 16-bit results) get the same exhaustive, float32-input and SASS checks.
"""

from __future__ import annotations

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.dtypes.casting import cast_array
from nbxtensor.ops import fast_math16 as M16
from nbxtensor.ops import fast_trig16 as TR
from nbxtensor.ops import registry
from nbxtensor.runtime import configs
from nbxtensor.runtime.triton_compat import HAVE_TRITON, tl

import pointwise_harness as H
from test_fast_math16 import _Case, _run, _ulps

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

CASES = [(op, 1) for op in TR.OPS] + [(op, 2) for op in TR.OPS2]
_IDS = [f"{op}-L{lvl}" for op, lvl in CASES]
# Most results that differ from the default body's, of 65 536 inputs: level 1 as test_fast_math16 (1 %); level 2
# (float32 within ~2**-15 relative) moves float16 results next to a rounding boundary more often (0.8 % at most).
_MAX_DIFF = {1: 0.01, 2: 0.02}


def _check(c: _Case, got, base, what, level):
    # test_fast_math16's verify bounds the differing results by its module's _MAX_DIFF: this level's bound instead
    import test_fast_math16 as TM
    old, TM._MAX_DIFF = TM._MAX_DIFF, _MAX_DIFF[level]
    try:
        return c.verify(got, base, what)
    finally:
        TM._MAX_DIFF = old


@pytest.mark.skipif(not H.INTERPRET, reason="runs the Triton bodies under the interpreter")
@pytest.mark.parametrize("dt", [T.bfloat16, T.float16], ids=lambda d: d.name)
@pytest.mark.parametrize("op,level", CASES, ids=_IDS)
def test_exhaustive_16bit(op, level, dt):
    c = _Case(op, dt)
    base = _run(op, c.x, 0)
    for err in ((0.0, 1.0, -1.0) if not H.QUICK else (1.0, -1.0)):
        got = _run(op, c.x, level, err)
        _check(c, got, base, f"{op} {dt.name} FAST_MATH16={level} (approximate instructions at {err:+g} x their "
               "bound)", level)


@pytest.mark.parametrize("dt", [T.bfloat16, T.float16], ids=lambda d: d.name)
@pytest.mark.parametrize("op,level", CASES, ids=_IDS)
def test_exhaustive_16bit_on_the_gpu(op, level, dt, device):
    """GPU tier: the real rcp.approx / sqrt.approx; the count printed is where FAST_MATH16 differs from libdevice."""
    if not device.startswith("cuda"):
        pytest.skip("the GPU tier (NBX_TEST_DEVICE=cuda)")
    c = _Case(op, dt)
    base = _run(op, c.x, 0, device=device)
    _check(c, _run(op, c.x, level, device=device), base, f"{op} {dt.name} FAST_MATH16={level} on {device}", level)


def _float32_inputs() -> np.ndarray:
    """float32 values that no 16-bit dtype holds: around +-1/2 and +-1 (the branch points of asin and acos), near
    0, large and tiny magnitudes, random ones, the floats nearest multiples of pi/2 (sin, cos, tan), and the special
    values."""
    rng = np.random.default_rng(7)
    one = np.float32(1)
    near = [np.nextafter(np.float32(v), np.float32(d), dtype=np.float32) for v in (0.5, -0.5, 1.0, -1.0)
            for d in (-2, 2)]
    ups = np.float32(1) - np.float32(2.0) ** -np.arange(1, 25, dtype=np.float32)
    # sin, cos, tan: the floats nearest multiples of pi/2 below the fast reduction's bound and past it, huge ones
    k = np.concatenate([np.arange(1, 40), rng.integers(40, 67300, 600)]).astype(np.float64)
    m = (k * np.pi / 2).astype(np.float32)
    mults = np.concatenate([m, np.nextafter(m, np.float32(np.inf)), np.nextafter(m, np.float32(0))])
    huge = rng.integers(0x47CE0000, 0x7F800000, 1500, dtype=np.uint32).view(np.float32)
    v = np.concatenate([near, ups, -ups, rng.uniform(-1, 1, 4000), rng.standard_normal(2000) * 1e3, mults, -mults,
                        huge, -huge[:500], [105615.0, -105615.0, 105616.0, 16367173 * 2.0 ** 72],
                        np.float32(2.0) ** np.arange(-149, 128, dtype=np.float32) * 1.2345678,
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, 1e-45, one]]).astype(np.float32)
    return v


@pytest.mark.parametrize("dt", [T.bfloat16, T.float16], ids=lambda d: d.name)
@pytest.mark.parametrize("op,level", CASES, ids=_IDS)
def test_float32_inputs(op, level, dt, device):
    """float32 inputs into 16-bit outputs (``out=``) take the same bodies: within the tolerance, NaN where NumPy
    has NaN, at most one 16-bit ulp from the correctly rounded value."""
    if not (H.INTERPRET or device.startswith("cuda")):
        pytest.skip("runs the Triton bodies (the interpreter or the GPU tier)")
    x = _float32_inputs()
    f = getattr(nbx, op)
    for err in ((0.0,) if device.startswith("cuda") else (1.0, -1.0)):
        old = M16._ERR
        M16._ERR = tl.constexpr(err)
        try:
            with configs.override("pointwise", FAST_MATH16=level):
                o = nbx.empty(x.size, dtype=getattr(nbx, dt.name), device=device)
                got = H.result_host(f(nbx.from_numpy(x).to(device), out=o))
        finally:
            M16._ERR = old
        with np.errstate(all="ignore"):
            cr = cast_array(getattr(np, "arc" + op[1:] if op[0] == "a" else op)(x.astype(np.float64)), T.float64, dt)
        H.assert_close(got, cr, dt, what=f"{op} float32 -> {dt.name}")
        g = got.astype(np.float32)
        assert np.array_equal(np.isnan(g), np.isnan(cr.astype(np.float32)))
        fin = np.isfinite(g)
        u = _ulps(got[fin], cr[fin])
        assert (u <= 1).all(), (x[fin][u > 1][:5], got[fin][u > 1][:5], cr[fin][u > 1][:5])



# ALT_TAN (ops/elementwise.py's Alt for tan, 16-bit results; ops/fast_trig16.py): 1 tan r = r / Q(r**2) and -1/t for
# odd quadrants by a predicated rcp, 2 r P(r**2) of degree 9 and the same rcp. Differing from the default (libdevice)
# body, of 65 536 (bfloat16 / float16), measured 2026-11-30: ALT_TAN 1 80-82 / 790-794, 2 16-18 / 128-132; the
# level-2 sin/cos body 36-38 / 472-474 (each one 16-bit ulp; the bfloat16 ones mostly past 105615, the slow path).
ALT_TAN = [1, 2]


@pytest.mark.skipif(not H.INTERPRET, reason="runs the Triton bodies under the interpreter")
@pytest.mark.parametrize("dt", [T.bfloat16, T.float16], ids=lambda d: d.name)
@pytest.mark.parametrize("alt", ALT_TAN, ids=lambda v: f"ALT_TAN{v}")
def test_exhaustive_16bit_alt_tan(alt, dt):
    c = _Case("tan", dt)
    base = _run("tan", c.x, 0)
    with configs.override("pointwise", ALT_TAN=alt):
        for err in ((0.0, 1.0, -1.0) if not H.QUICK else (1.0, -1.0)):
            got = _run("tan", c.x, 2, err)
            _check(c, got, base, f"tan {dt.name} ALT_TAN={alt} (approximate instructions at {err:+g} x their bound)",
                   2)


@pytest.mark.parametrize("dt", [T.bfloat16, T.float16], ids=lambda d: d.name)
@pytest.mark.parametrize("alt", ALT_TAN, ids=lambda v: f"ALT_TAN{v}")
def test_exhaustive_16bit_alt_tan_on_the_gpu(alt, dt, device):
    """GPU tier: ALT_TAN's bodies with the real rcp.approx and the predicated PTX."""
    if not device.startswith("cuda"):
        pytest.skip("the GPU tier (NBX_TEST_DEVICE=cuda)")
    c = _Case("tan", dt)
    base = _run("tan", c.x, 0, device=device)
    with configs.override("pointwise", ALT_TAN=alt):
        _check(c, _run("tan", c.x, 2, device=device), base, f"tan {dt.name} ALT_TAN={alt} on {device}", 2)


@pytest.mark.parametrize("dt", [T.bfloat16, T.float16], ids=lambda d: d.name)
@pytest.mark.parametrize("alt", ALT_TAN, ids=lambda v: f"ALT_TAN{v}")
def test_float32_inputs_alt_tan(alt, dt, device):
    """float32 inputs into 16-bit outputs through ALT_TAN (the floats nearest multiples of pi/2, huge ones: the
    exact slow path, special values) as :func:`test_float32_inputs`."""
    with configs.override("pointwise", ALT_TAN=alt):
        test_float32_inputs("tan", 2, dt, device)


@pytest.mark.parametrize("alt", ALT_TAN, ids=lambda v: f"ALT_TAN{v}")
def test_alt_tan_selection_and_special_values(alt, device):
    """ALT_TAN serves 16-bit results only (float32 results bit-equal to the default body's) and is taken before
    FAST_MATH16's body (the same results at level 0 and 2); tan(+-0) = +-0, a subnormal x gives x, +-inf and NaN
    give NaN, the floats next to +-pi/2 give large results of the right sign, huge x the exact reduction."""
    if not (H.INTERPRET or device.startswith("cuda")):
        pytest.skip("runs the Triton bodies (the interpreter or the GPU tier)")
    xs = np.float32([0.0, -0.0, 2.0 ** -140, -(2.0 ** -140), np.inf, -np.inf, np.nan, 1.5707963, -1.5707964,
                     0.5, -2.0, 1e5, 3.0e38, -1.0e30, 7.0, 1e-3])
    x = nbx.from_numpy(xs).to(device)
    with configs.override("pointwise", FAST_MATH16=0):
        f32_default = H.result_host(nbx.tan(x))
    got = {}
    for lvl in (0, 2):
        with configs.override("pointwise", FAST_MATH16=lvl, ALT_TAN=alt):
            np.testing.assert_array_equal(H.result_host(nbx.tan(x)), f32_default)
            o = nbx.empty(xs.size, dtype=nbx.float16, device=device)
            got[lvl] = H.result_host(nbx.tan(x, out=o)).astype(np.float32)
    np.testing.assert_array_equal(got[0], got[2])
    g = got[2]
    assert g[0] == 0 and not np.signbit(g[0]) and g[1] == 0 and np.signbit(g[1])
    assert g[2] == 0 and g[3] == 0 and np.signbit(g[3])  # 2**-140 rounds to zero in float16, its sign kept
    assert np.isnan(g[4:7]).all()
    assert g[7] > 1e4 and g[8] > 1e4  # tan(float32(pi/2)) = -22877332 (float16: -inf), tan(-1.5707964) = 1.3e7
    cr = cast_array(np.tan(xs.astype(np.float64)), T.float64, T.float16).astype(np.float32)
    fin = np.isfinite(cr)
    assert (_ulps(got[2][fin].astype(np.float16), cr[fin].astype(np.float16)) <= 1).all(), (g, cr)


def test_tables_replace_default_bodies():
    from nbxtensor.ops import elementwise as E
    for lvl, tab in ((1, TR.OPS), (2, TR.OPS2)):
        for op, (mod, name, body) in tab.items():
            default = getattr(E, name)
            assert mod == "elementwise" and registry.get(op).triton.body is default, op
            assert M16.math16_body(default, lvl) is body, (op, lvl)
    # level 2 falls back to level 1 for an op OPS2 lacks; every OPS2 op has a level-1 body but sin, cos and tan
    # (level 2 only: level 1 keeps libdevice)
    assert set(TR.OPS2) - set(TR.OPS) == {"sin", "cos", "tan"}
    for op in ("sin", "cos", "tan"):
        assert M16.math16_body(getattr(E, f"_{op}_b"), 1) is None, op


# ---------------------------------------------------------------------------------------------------------
# Compiled tier: sm_90 SASS instructions per element, bf16 in and out (ahead of time, no GPU)
# ---------------------------------------------------------------------------------------------------------
# (op, level) -> (allowed with FAST_MATH16, at least this many without). Measured 2026-11-30 (Triton 3.6, sm_90,
# the sm_90 table's large-tensor rule, bf16 in and out; relu takes 5), default -> level 1 / level 2: atan 23.62 (its
# ``fast`` body _atan_f, on by default for 16-bit outputs) -> 16.62 / 15.62, asin 23.25 (libdevice) -> 16.88 /
# 15.88, acos 23.12 (libdevice) -> 19.75 / 18.75.
# sin, cos, tan (level 2 only): test_sm90_trig_fast_path below (their slow path is inline PTX, cut out to count).
_SASS = {
    ("atan", 1): (17, 23), ("atan", 2): (16, 23), ("asin", 1): (17, 23), ("asin", 2): (16, 23),
    ("acos", 1): (20, 23), ("acos", 2): (19, 23),
}


@pytest.mark.skipif(H.INTERPRET or not HAVE_TRITON, reason="compiles with Triton's real compiler")
@pytest.mark.parametrize("op,level", [c for c in CASES if c[0] not in ("sin", "cos", "tan")],
                         ids=[i for c, i in zip(CASES, _IDS) if c[0] not in ("sin", "cos", "tan")])
def test_sm90_instruction_counts(op, level, monkeypatch):
    from test_pointwise import _bf16_launch, _compile_as_jit, _e, _sass_per_element
    budget, before = _SASS[(op, level)]
    f = getattr(nbx, op)
    with configs.override("pointwise", FAST_MATH16=0):
        kernel, kargs, meta = _bf16_launch(lambda: f(_e()), monkeypatch)
    base, _ = _sass_per_element(_compile_as_jit(kernel, kargs, meta), meta)
    with configs.override("pointwise", FAST_MATH16=level):
        kernel, kargs, meta = _bf16_launch(lambda: f(_e()), monkeypatch)
    c = _compile_as_jit(kernel, kargs, meta)
    per, ops = _sass_per_element(c, meta)
    print(f"\n{op} level {level}: {base:.2f} -> {per:.2f} SASS instructions per element")
    assert "LDG.E.128" in ops and "STG.E.128" in ops, ops
    assert per <= budget and base >= before, f"{op}: {per:.2f} with FAST_MATH16 (budget {budget}), {base:.2f} without"
    assert "approx" in c.asm["ptx"], op


# ---------------------------------------------------------------------------------------------------------
# sin, cos, tan: the reduction by pi/2 (fast Cody-Waite path, exact slow path) against one with 400 bits of pi
# ---------------------------------------------------------------------------------------------------------
def _pi_fixed(bits: int) -> int:
    """floor(pi 2**bits) (to within one unit) by Machin's formula, pi = 16 atan(1/5) - 4 atan(1/239), in integers."""
    g = bits + 32
    one = 1 << g

    def atan_inv(n):
        s, t, k, sign = 0, one // n, 1, 1
        while t:
            s += sign * (t // k)
            t //= n * n
            k += 2
            sign = -sign
        return s
    return (16 * atan_inv(5) - 4 * atan_inv(239)) >> 32


_PB = 400
_PI = _pi_fixed(_PB)


def _exact_reduction(x: np.ndarray, mode: int = 0):
    """(r, q) for float32 x (finite), exact rational arithmetic with pi to 400 bits: mode 0 (by pi/2, tan's): q the
    integer nearest x 2/pi, r = x - q pi/2, q mod 4; mode 1 (by pi, sin's): q nearest x/pi, r = x - q pi, q mod 2;
    mode 2 (cos's): q nearest |x|/pi - 1/2, r = |x| - (q + 1/2) pi, q mod 2. r as the float64 of the exact value."""
    unit, mod = (1, 4) if mode == 0 else (2, 2)  # the unit is unit * pi/2
    rs, qs = [], []
    for v in x.astype(np.float64):
        v = abs(v) if mode == 2 else v
        mant, e = np.frexp(v)
        m, e = int(mant * 2 ** 53), int(e) - 53  # v = m 2**e exactly
        # v / (unit pi/2) = num / den
        num, den = (m << (e + 1 + _PB), _PI * unit) if e >= 0 else (m << (1 + _PB), (_PI * unit) << -e)
        if mode == 2:
            num, den = 2 * num - den, 2 * den  # v / pi - 1/2
        q = (2 * num + den) // (2 * den)
        rs.append((num - q * den) / den * (np.pi / 2 * unit))
        qs.append(q % mod)
    return np.array(rs), np.array(qs)


if HAVE_TRITON:
    from nbxtensor.runtime.triton_compat import jit

    @jit
    def _reduce_kernel(X, R, Q, n, MODE: tl.constexpr, SLOW: tl.constexpr, BLOCK: tl.constexpr):
        o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        msk = o < n
        x = tl.load(X + o, mask=msk, other=1.0)
        if SLOW:
            r, q = TR._trig_slow(x, MODE)
        elif MODE == 0:
            r, q = TR._trig_reduce(x)
        else:
            r, q = TR._trig_reduce_pi(x, MODE == 2)
        tl.store(R + o, r, mask=msk)
        tl.store(Q + o, q, mask=msk)


def _reduce(x: np.ndarray, device: str, mode: int = 0, slow: bool = False):
    from nbxtensor.runtime.launcher import launch
    n, block = x.size, 1024
    r = nbx.empty(n, dtype=nbx.float32, device=device)
    q = nbx.empty(n, dtype=nbx.int32, device=device)
    launch(_reduce_kernel, ((n + block - 1) // block,), nbx.from_numpy(x).to(device), r, q, n, MODE=mode, SLOW=slow,
           BLOCK=block)
    return H.result_host(r), H.result_host(q)


def _reduction_inputs(rng) -> np.ndarray:
    # random float32 past the fast bound (every exponent), their negatives, the floats nearest multiples of pi/2
    # (every k below the bound, and one in 50 above it up to 2**24 pi/2), and known hard cases
    huge = rng.integers(0x47CE4781, 0x7F800000, 6000 if H.QUICK else 60000, dtype=np.uint32).view(np.float32)
    k = np.concatenate([np.arange(1, 67300), np.arange(67300, 2 ** 24, 400 if H.QUICK else 50)]).astype(np.float64)
    m = (k * np.pi / 2).astype(np.float32)
    near = np.concatenate([m, np.nextafter(m, np.float32(np.inf)), np.nextafter(m, np.float32(0))])
    hard = np.float32([105615.0, 105616.0, 16367173 * 2.0 ** 72, 3.4028235e38, 1e38, 2.0 ** 100, 8.0e6, 1e5])
    x = np.concatenate([huge, near, hard])
    return np.concatenate([x, -x[::3]]).astype(np.float32)


@pytest.mark.parametrize("mode", [0, 1, 2], ids=["pio2-tan", "pi-sin", "pi-half-cos"])
@pytest.mark.parametrize("slow", [False, True], ids=["reduce", "slow-path-alone"])
def test_trig_reduction(slow, mode, device):
    """The reductions' (r, q) against :func:`_exact_reduction`: the same x (mod 2pi) with r within 2**-20 relative
    (r, q+-1 on the other side of a half unit: both valid), |r| within the polynomials' range. Interpreter tier: the
    fast path by exact FMAs and the slow path's model in 64-bit integers (``_trig_slow``: the PTX step for step);
    GPU tier (NBX_TEST_DEVICE=cuda): the real FMAs and the inline PTX (``slow-path-alone`` tests the interpreter
    model only: on the GPU it is compiled Triton integer code)."""
    if not (H.INTERPRET or device.startswith("cuda")):
        pytest.skip("runs the Triton reduction (the interpreter or the GPU tier)")
    x = _reduction_inputs(np.random.default_rng(11))
    if slow:
        x = x[np.abs(x) > 105615.0]
    r, q = _reduce(x, device, mode, slow)
    er, eq = _exact_reduction(x, mode)
    mod, unit = (4, np.pi / 2) if mode == 0 else (2, np.pi)
    dq = ((q.astype(np.int64) - eq + 1) % mod) - 1  # -1, 0 or +1 (another valid multiple next to a half unit)
    if mod == 2:  # the parity alone: the side from r's sign
        dq = np.where(dq != 0, np.where(er > 0, 1, -1), 0)
    assert np.isin(dq, (-1, 0, 1)).all(), x[~np.isin(dq, (-1, 0, 1))][:5]
    near = np.abs(er) > unit / 2 - 0.005
    assert near[dq != 0].all(), x[(dq != 0) & ~near][:5]
    er = er - dq * unit
    rel = np.abs(r - er) / np.abs(er)
    assert rel.max() < 2.0 ** -20, (x[np.argmax(rel)], r[np.argmax(rel)], er[np.argmax(rel)])
    assert np.abs(r).max() <= (0.7892 if mode == 0 else 1.5765), np.abs(r).max()
    # specials: r NaN for +-inf and NaN; -0.0 -> r = -0.0, q = 0 (sin, tan)
    r, q = _reduce(np.float32([np.inf, -np.inf, np.nan, -0.0, 0.0, 1e-45, -1e-45]), device, mode)
    assert np.isnan(r[:3]).all()
    if mode != 2:
        assert (r[3:] == np.float32([0, 0, 1e-45, -1e-45])).all()
        assert np.signbit(r[3]) and not np.signbit(r[4]) and ((q[3:] & 3) == 0).all()


def test_trig_constants():
    """The slow path's constants: 2/pi's bits (_W, in the PTX too) from Machin's pi, the bound and pi/2 2**-64 as the
    PTX spells them, and pi/2 = P1 + P2 + P3 (float32 pieces) to 2**-70."""
    def val(c):
        return c.value if hasattr(c, "value") else c
    n = 7 * 32 - 9
    w = (2 << (_PB + n)) // _PI
    assert w.bit_length() == n
    assert TR._W == tuple((w >> (32 * (6 - i))) & 0xFFFFFFFF for i in range(7))
    ptx = val(TR._TRIG_PTX)
    for word in TR._W:
        assert f"0x{word:08X}" in ptx, hex(word)
    assert f"0f{np.float32(val(TR._TRIG_BOUND)).view(np.uint32):08X}" in ptx
    assert f"0d{np.float64(val(TR._PIO2_2M64)).view(np.uint64):016X}" in ptx
    for name in ("_SIN_PTX", "_COS_PTX"):
        assert f"0d{np.float64(val(TR._PI_2M64)).view(np.uint64):016X}" in val(getattr(TR, name)), name
    assert val(TR._PI_2M64) == float.fromhex("0x1.921fb54442d18p-63")
    assert np.float32(val(TR._1OPI)) == np.float32(1 / np.pi) and np.float32(1 / np.pi).view(np.uint32) == 0x3EA2F983
    assert val(TR._PIO2_2M64) == float.fromhex("0x1.921fb54442d18p-64")
    from fractions import Fraction
    ps = [val(c) for c in (TR._P1, TR._P2, TR._P3)]
    p = sum(Fraction(c) for c in ps)
    assert all(np.float32(c) == c for c in ps)
    assert abs(p - Fraction(_PI, 2 << _PB)) < Fraction(1, 2 ** 70)
    assert np.float32(val(TR._2OPI)) == np.float32(2 / np.pi)


def _fast_path_count(sass: str) -> tuple[int, int]:
    """(SASS instructions on the fast path, static), NOPs excluded: the static count less the instructions that the
    fast path's branches skip: each ``@!P BRA`` on the predicate of an ``FSETP.GTU.OR`` (the or over an asm
    instance's elements against 105615) jumps to the BSYNC of the innermost BSSY around it (sm_90: 16 bytes per
    instruction; the listing's BSSY targets are one instruction past the BSYNC)."""
    import re
    ins = [ln.split("\t", 1)[1].strip() for ln in sass.splitlines() if "\t" in ln and not ln.startswith("Function")]
    bssy = [(i, int(m.group(1), 16) // 16) for i, s in enumerate(ins)
            if (m := re.match(r"BSSY B\d+, (0x[0-9a-f]+)", s))]
    skipped, pd, branches = set(), None, 0
    for a, s in enumerate(ins):
        if m := re.match(r"FSETP\.GTU\.OR (P\d)", s):
            pd = m.group(1)
        if pd and s.startswith(f"@!{pd} BRA"):
            pd, branches = None, branches + 1
            t = max((b for b in bssy if b[0] < a < b[1]), key=lambda b: b[0])[1]
            t = next(u for u in (t, t - 1) if ins[u].startswith("BSYNC"))
            skipped.update(range(a + 1, t))
    assert branches >= 1, "no fast-path branch found"
    return (sum(1 for i, s in enumerate(ins) if i not in skipped and not s.startswith("NOP")),
            sum(1 for s in ins if not s.startswith("NOP")))


# sin / cos / tan, sm_90 SASS per element (bf16 in and out): the fast path (the instructions the PTX slow paths
# hold excluded; the check of 8 elements, one branch and its BSSY/BSYNC included), measured 2026-11-30: sin 17.62,
# cos 18.12 (reductions by pi, one polynomial), tan 21.75 (by pi/2, two polynomials and a quotient); static with the
# slow paths 73.25 / 69.75 / 77.38; libdevice 84.50 static for sin.
# ALT_TAN (level 2 set too, as the sm_90 table runs it): 1 (r / Q(s), a predicated MUFU.RCP for odd quadrants) 17.62
# (73.25 static), 2 (degree-9 odd polynomial, the same rcp) 18.62 (74.25 static).
_TRIG_SASS = {"sin": 17.75, "cos": 18.25, "tan": 22, "tan ALT_TAN=1": 17.75, "tan ALT_TAN=2": 18.75}


@pytest.mark.skipif(H.INTERPRET or not HAVE_TRITON, reason="compiles with Triton's real compiler")
@pytest.mark.parametrize("case", sorted(_TRIG_SASS))
def test_sm90_trig_fast_path(case, monkeypatch):
    import re
    from test_pointwise import _bf16_launch, _compile_as_jit, _e, _sass_per_element
    op, _, alt = case.partition(" ALT_TAN=")
    f = getattr(nbx, op)
    with configs.override("pointwise", FAST_MATH16=2, **({"ALT_TAN": int(alt)} if alt else {})):
        kernel, kargs, meta = _bf16_launch(lambda: f(_e()), monkeypatch)
    c = _compile_as_jit(kernel, kargs, meta)
    static, ops = _sass_per_element(c, meta)
    fast, total = _fast_path_count(c.asm["sass"])
    per = fast * static / total
    print(f"\n{case} level 2: fast path {per:.2f} SASS instructions per element ({static:.2f} static)")
    assert "LDG.E.128" in ops and "STG.E.128" in ops, ops
    assert per <= _TRIG_SASS[case] and static > per + 40, (per, static)
    if alt:  # -1/t of the odd quadrants: one predicated MUFU.RCP with a negated operand per element, no FSEL
        n = meta["BLOCK"] // (32 * meta.get("num_warps", 4))
        assert len(re.findall(r"@!?P\d MUFU\.RCP R\d+, -R\d+", c.asm["sass"])) == n, c.asm["sass"]
        assert "FSEL" not in c.asm["sass"].split("BSYNC B0")[-1]
