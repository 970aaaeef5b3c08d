"""Cheaper float32 math for elementwise ops whose output is bfloat16 or float16, behind the pointwise rules'
config key ``FAST_MATH16`` (default 0: off in code and in every runtime/configs/*.json).

Why: these ops compute in float32 with libdevice's accurate functions (no flush-to-zero) and round once to 16 bits.
On the H200 that made log, log2, log10, log1p, expm1, tanh, atanh, acosh, erf, erfc, logaddexp, xlogy and atan2
(and asinh, despite its ``fast`` body) instruction-bound (50-82 % of the 4.8 TB/s datasheet bandwidth in bfloat16, session 4). A 16-bit result keeps 8
(bfloat16) or 11 (float16) significant bits, so a float32 intermediate within ~2**-17 relative of the exact value
rounds to the same 16-bit value except right next to a rounding boundary, where it can land one 16-bit ulp away
(the tests count those places per op against the default body, for all 65 536 inputs of each 16-bit dtype).

How: :func:`math16_body` maps an op's default ``@jit`` body to the body here; :func:`.pointwise.launch_pointwise`
takes it, in the ``fast`` slot, when the launch config sets ``FAST_MATH16`` and the output is float16/bfloat16
computed in float32 (float32 and float64 outputs never change). The bodies use the GPU's approximate instructions
through inline PTX, without flush-to-zero where a subnormal can reach them:

- ``lg2.approx.f32`` (MUFU.LG2): absolute error 2**-22 for arguments in [0.5, 2], 2 ulp elsewhere (CUDA C
  Programming Guide, "Intrinsic Functions", ``__log2f``); subnormal arguments are rescaled by ptxas (non-ftz).
  lg2(+0) = -inf, lg2(negative) = NaN, lg2(+inf) = +inf, NaN -> NaN.
- ``ex2.approx.f32`` (MUFU.EX2): 2 ulp (``__exp2f``'s bound; PTX ISA: "maximum relative error 2**-22.5" on the
  reduced range); non-ftz keeps subnormal results; ex2(-inf) = +0, ex2(+inf) = +inf.
- ``rcp.approx.f32``: 1 ulp; rcp(+-0) = +-inf, rcp(+-inf) = +-0. ``sqrt.approx.f32``: about 1 ulp.
- The ``.ftz`` forms (one MUFU instruction, no rescaling) where no subnormal operand or result can matter; each use
  says why, and the interpreter emulates the flush (a subnormal operand or result becomes a zero of its sign), so
  the exhaustive tests check those claims too (they caught atanh(3e38): a subnormal reciprocal flushed to -0).

Near the zeros of a function (where a relative bound is what the tolerance needs and MUFU.LG2's absolute error
is not enough) short polynomials take over: ``log1p(u)`` for ``|u| < 1/16`` (Taylor to u**6, truncation below
2**-26 relative), ``expm1`` for ``|x| < 1/16`` (Taylor to x**6), ``atanh`` for ``|x| < 1/16`` (to x**7), erf on
``|x| < 0.9375`` (a degree-5 fit in x**2, 1.7e-7 relative). erfc beyond 0.9375 is ``z 2**(-t**2 log2 e + G(z))``,
``z = 1/t``, G a degree-8 fit of ``log2(erfc(t) t e**(t**2))`` (9.8e-7 absolute in log2 units, 7e-7 relative; the
rounding of ``t**2`` adds ``t**2 2**-24`` log-units: 6e-6 relative at t = 10, where bfloat16's half ulp is 2e-3
and float16 has long underflowed). Fits: least squares on Chebyshev nodes in float64, reweighted toward minimax.

Error argument (per op, in the bodies' comments): every body's float32 result is within ~2**-16 relative of the
exact value (absolute near a zero of the function only where the function is ~x there, then relative again), so
the rounded 16-bit result is within one 16-bit ulp of the float64 oracle, inside the tolerance table (bfloat16 rtol
1.6e-2 = 4 ulp at 8 bits, float16 1e-3 = 2 ulp at 11 bits). The interpreter tier computes the approximate
instructions exactly (NumPy's log2/exp2/division); the exhaustive tests also run it with every approximate
instruction pushed to the edge of its documented error (:data:`_ERR`, set by the tests), so the argument is
checked for all 65 536 inputs of each 16-bit dtype, not only for the exact primitives.

Level 2 (``FAST_MATH16: 2``, :data:`OPS2`; an op absent there keeps its level-1 body): the float32 intermediate within
about 2**-13 relative (a 16-bit half ulp is >= 2**-12 relative, so a result is still at most one 16-bit ulp from the
correctly rounded value; it lands on the other side of a rounding boundary more often: the tests bound the count per
op), for fewer instructions per element (sm_90, bf16 in and out, level 1 -> 2): erf 24.25 -> 16.12 (1 - 2**(-t Q(t))
with one degree-4 fit on [0, 3], x 2/sqrt(pi) below 2**-8: no second branch), erfc 29.38 -> 17.38 and gelu 21.38 ->
18.38 (erfcx(t) = P(1 / (1 + t/2)), one degree-5 fit on [0, 9.4], times e**(-t**2) by one flushing ex2: no branch
but the sign's), acosh 24.38 -> 15.12 (ln(x + sqrt(x - 1) sqrt(x + 1)) halved against overflow: no branch), asinh
22.12 -> 18.00 (one lg2, x below 2**-6.5), atanh 20.12 -> 15.00 (lg2(1 + a) - lg2(1 - a), x below 2**-7), atan2
42.75 -> 28.75 (degree-4 atan, the operands scaled by an integer-made power of two, no range branches) and tanhshrink
25.88 (libdevice's tanh) -> 16.12 (x**3 Q(x**2) below 0.4, x - 1 + 2 / (e**(2x) + 1) beyond; level 2 only), tanh
21.62 -> 16.12 ((1 - e) / (1 + e) with e = e**(-2|x|) by one flushing ex2, |x| (1 - x**2/3) below 1/16; session 7:
tanh bf16 ran at 84.9 % of 4.8 TB/s on the H200 with level 1's expm1 form).

Not kept: sin, cos and tan by a Cody-Waite reduction (three FMAs, exact for |x| <= 105615) and polynomials, with a
block-uniform branch to libdevice for larger |x|: 27-31 SASS instructions per element on the common path against
libdevice's 81-87 static, but slower on the H200 (bf16 32768x8192, % of 4.8 TB/s, key off / on: sin 74.3 / 69.3,
cos 70.3 / 70.0, tan 80.4 / 66.6; ``sweep_pointwise.py --group math16``, session 5), as ops/elementwise.py's
remainder found for its per-block fallback.

Special values are PyTorch's (checked by the same exhaustive tests): NaN -> NaN, +-inf, -0.0 kept where the
function is odd, domain errors give NaN (log of a negative, log1p below -1, atanh beyond +-1, acosh below 1).

pow already has ``ALT_POW`` (ops/elementwise.py) and cosh ``ALT_COSH``. Not covered: asin and acos (libdevice's are
already 23 SASS instructions per element on sm_90; a fitted polynomial with sqrt.approx took 24-25), tanhshrink at level 1 (x**3 Q(x**2) below 0.75, x - tanh(x) above: 31.3 SASS instructions per
element against libdevice's 25.9; level 2 has one), the other activations (their own ``fast`` bodies). elu, celu and selu take :func:`_em1` here
instead of their ``fast`` bodies' degree-8 Taylor polynomial and non-flushing exp; gelu ('none') its ``fast`` body's
erfcx fit with the constants folded and one flushing ex2 (fast_math16's erf pieces would need three branches
computed per element). An activation's body is added to :data:`OPS` as ("activation", name,
body).
"""

from __future__ import annotations

from ..runtime.triton_compat import HAVE_TRITON, INTERPRET, jit, tl
from .triton_helpers import asinh_poly, atan_poly

__all__ = ["KEY", "math16_body", "OPS"]

KEY = "FAST_MATH16"

# Compiled kernels take the inline PTX; the interpreter computes the same functions exactly.
_HW = tl.constexpr(not INTERPRET) if HAVE_TRITON else False
# Interpreter only (tests): push every approximate instruction to its documented error bound, by this sign (0 off,
# +1 / -1): lg2 by 2**-22 absolute in [0.5, 2] and 2 ulp (2**-22 relative) elsewhere, ex2 by 2 ulp, rcp by 1 ulp.
_ERR = tl.constexpr(0.0) if HAVE_TRITON else 0.0

_C = tl.constexpr if HAVE_TRITON else float
_LN2 = _C(0.6931471805599453)
_LOG10_2 = _C(0.30102999566398120)
_LOG2E = _C(1.4426950408889634)
_LOG10E = _C(0.4342944819032518)


@jit
def _lg2(x):
    """log2(x), lg2.approx.f32 (non-ftz: subnormal arguments rescaled by ptxas)."""
    if _HW:
        r = tl.inline_asm_elementwise("lg2.approx.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True, pack=1)
    else:
        r = tl.log2(x)
        if _ERR != 0.0:
            near = (x >= 0.5) & (x <= 2.0)
            d = tl.where(near, 2.384185791015625e-07, tl.abs(r) * 2.384185791015625e-07)
            r = r + _ERR * tl.where(tl.abs(r) < float("inf"), d, 0.0)
    return r


@jit
def _ex2(t):
    """2**t, ex2.approx.f32 (non-ftz: subnormal results kept)."""
    if _HW:
        r = tl.inline_asm_elementwise("ex2.approx.f32 $0, $1;", "=f,f", [t], dtype=tl.float32, is_pure=True, pack=1)
    else:
        r = tl.exp2(t)
        if _ERR != 0.0:
            r = r * (1.0 + _ERR * 2.384185791015625e-07)
    return r


@jit
def _rcp(d):
    """1 / d, rcp.approx.f32 (non-ftz)."""
    if _HW:
        r = tl.inline_asm_elementwise("rcp.approx.f32 $0, $1;", "=f,f", [d], dtype=tl.float32, is_pure=True, pack=1)
    else:
        r = 1.0 / d
        if _ERR != 0.0:
            r = r * (1.0 + _ERR * 1.1920928955078125e-07)
    return r


@jit
def _flush(x):
    # what .ftz does to a subnormal operand or result: a zero of the same sign (interpreter emulation)
    return tl.where(tl.abs(x) < 1.1754943508222875e-38, x * 0.0, x)


@jit
def _lg2z(x):
    """log2(x), lg2.approx.ftz.f32: one MUFU.LG2, for arguments that are never subnormal (callers say why)."""
    if _HW:
        r = tl.inline_asm_elementwise("lg2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                      pack=1)
    else:
        r = _lg2(_flush(x))
    return r


@jit
def _lg2zo(x):
    """:func:`_lg2z` for the subtrahend of a difference of two lg2: the interpreter pushes its error (``_ERR``) the
    other way, so that the tests see the two errors add."""
    if _HW:
        r = tl.inline_asm_elementwise("lg2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                      pack=1)
    else:
        f = _flush(x)
        r = tl.log2(f)
        if _ERR != 0.0:
            near = (f >= 0.5) & (f <= 2.0)
            d = tl.where(near, 2.384185791015625e-07, tl.abs(r) * 2.384185791015625e-07)
            r = r - _ERR * tl.where(tl.abs(r) < float("inf"), d, 0.0)
    return r


@jit
def _ex2z(t):
    """2**t, ex2.approx.ftz.f32: one MUFU.EX2, where a subnormal result (t < -126) cannot matter (callers say why)."""
    if _HW:
        r = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [t], dtype=tl.float32, is_pure=True,
                                      pack=1)
    else:
        r = _flush(_ex2(_flush(t)))
    return r


@jit
def _rcpz(d):
    """1 / d, rcp.approx.ftz.f32: one MUFU.RCP, for |d| in [2**-126, 2**126] or where the result is discarded."""
    if _HW:
        r = tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=f,f", [d], dtype=tl.float32, is_pure=True,
                                      pack=1)
    else:
        r = _flush(_rcp(_flush(d)))
    return r


@jit
def _sqrtz(x):
    """sqrt(x), sqrt.approx.ftz.f32 (MUFU.RSQ and a multiply; about 1 ulp), for arguments that are never subnormal."""
    if _HW:
        r = tl.inline_asm_elementwise("sqrt.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                      pack=1)
    else:
        r = _flush(tl.sqrt(_flush(x)))
        if _ERR != 0.0:
            r = r * (1.0 + _ERR * 1.1920928955078125e-07)
    return r


@jit
def _ln1p(u):
    """ln(1 + u): Taylor to u**6 for |u| < 1/16 (relative truncation u**6/7 < 2**-26.8; keeps -0.0 and subnormals),
    lg2(1 + u) ln 2 beyond, where |ln(1 + u)| >= 0.06: 1 + u's rounding (2**-24 absolute in the log) and lg2's
    2**-22 absolute are below 2**-17.7 relative. u = -1 -> -inf, u < -1 -> NaN, +inf -> +inf, NaN -> NaN."""
    p = u * -0.16666666666666666 + 0.2
    p = p * u - 0.25
    p = p * u + 0.3333333333333333
    p = p * u - 0.5
    small = u * (u * p + 1.0)  # (not u + u*u*p: -0.0 + 0.0 would lose the zero's sign)
    # 1 + u is never subnormal (0 or >= 2**-24 for float32 u): the flushing lg2
    return tl.where(tl.abs(u) < 0.0625, small, _lg2z(u + 1.0) * _LN2)


@jit
def _ln_m16(x):
    """ln(x): :func:`_ln1p` of x - 1 (exact for x in [0.5, 2], Sterbenz) near 1, lg2(x) ln 2 elsewhere (relative
    2**-21.5 from lg2's 2 ulp plus the product's rounding; x in [0.5, 2] beyond |x - 1| >= 1/16: 2**-22 absolute
    against |ln x| >= 0.06)."""
    u = x - 1.0
    return tl.where(tl.abs(u) < 0.0625, _ln1p(u), _lg2(x) * _LN2)


@jit
def _log_m(x, p0, p1, p2):
    # log: 0 -> -inf (lg2(+-0) = -inf), negative -> NaN, +inf -> +inf, 1 -> +0 (the Taylor branch, u = +0)
    return _ln_m16(x)


@jit
def _log2_m(x, p0, p1, p2):
    # log2 = ln(x) / ln 2 by one more rounding (2**-24): exact powers of two stay exact (lg2 of 2**k is k on the
    # GPU; the product k * ln2 * (1/ln2) may round: the 16-bit rounding absorbs it)
    u = x - 1.0
    return tl.where(tl.abs(u) < 0.0625, _ln1p(u) * _LOG2E, _lg2(x))


@jit
def _log10_m(x, p0, p1, p2):
    u = x - 1.0
    return tl.where(tl.abs(u) < 0.0625, _ln1p(u) * _LOG10E, _lg2(x) * _LOG10_2)


@jit
def _log1p_m(x, p0, p1, p2):
    return _ln1p(x)


@jit
def _em1(x):
    """e**x - 1: Taylor to x**6 for |x| < 1/16 (truncation x**6/5040 < 2**-36 relative; -0.0 and subnormals kept);
    ex2(x log2 e) - 1 beyond: |e**x - 1| >= 0.06 there, so ex2's 2 ulp, the argument's rounding (|x log2 e| 2**-24)
    and the subtraction stay below 2**-18 relative for |x| < 90 (larger x overflow to +inf; -inf -> -1)."""
    p = x * (1.0 / 720.0) + 1.0 / 120.0
    p = p * x + 1.0 / 24.0
    p = p * x + 1.0 / 6.0
    p = p * x + 0.5
    small = x * (x * p + 1.0)  # keeps -0.0
    # flushing ex2: a subnormal argument is in the Taylor branch, a subnormal result (x < -87) gives -1 either way
    return tl.where(tl.abs(x) < 0.0625, small, _ex2z(x * _LOG2E) - 1.0)


@jit
def _expm1_m(x, p0, p1, p2):
    return _em1(x)


@jit
def _tanh_m(x, p0, p1, p2):
    # tanh|x| = -m / (m + 2), m = expm1(-2|x|) in [-1, 0]: no cancellation (m + 2 in [1, 2]), relative error of m
    # (2**-18) plus rcp's 1 ulp; +-inf -> +-1 (m = -1), -0.0 -> -0.0 (copysign), NaN -> NaN
    m = _em1(-2.0 * tl.abs(x))
    return _copysign(-m * _rcpz(m + 2.0), x)  # m + 2 in [1, 2]


@jit
def _copysign(a, b):
    # |a| with b's sign bit (a >= 0 or NaN here)
    ib = b.to(tl.int32, bitcast=True)
    ia = a.to(tl.int32, bitcast=True)
    return ((ia & 0x7FFFFFFF) | (ib & -2147483648)).to(tl.float32, bitcast=True)


@jit
def _atanh_m(x, p0, p1, p2):
    # |x| < 1/16: x + x**3 (1/3 + x**2/5 + x**4/7) (truncation x**8/9 relative < 2**-35); beyond:
    # ln((1 + a) / (1 - a)) / 2, a = |x|, result >= 0.0625: the quotient's roundings and rcp (4 ulp together, 2**-22
    # absolute in the log) and lg2's error stay below 2**-17 relative. |x| = 1 -> +-inf (rcp(0) = inf), |x| > 1 ->
    # NaN (a negative quotient), NaN -> NaN, -0.0 kept.
    a = tl.abs(x)
    w = x * x
    p = w * (1.0 / 7.0) + 0.2
    p = p * w + 0.3333333333333333
    small = x * (w * p + 1.0)
    # 1 - a is 0 or normal for |x| <= 1 and the quotient >= 1: the flushing rcp and lg2; |x| > 1 -> NaN explicitly
    # (1 - a = -3e38 has a subnormal reciprocal, which the flushing rcp makes -0 and lg2 -inf)
    big = _lg2z((1.0 + a) * _rcpz(1.0 - a)) * (0.5 * _LN2)
    return tl.where(a < 0.0625, small, tl.where(a > 1.0, float("nan"), _copysign(big, x)))


@jit
def _acosh_m(x, p0, p1, p2):
    # acosh(x) = ln1p(u + sqrt(u (u + 2))), u = x - 1 (exact near 1, Sterbenz): accurate where the result is small
    # (x -> 1, result ~ sqrt(2u)); ln(2x) = ln x + ln 2 past 2**62 where u**2 would overflow. x < 1 (and -inf)
    # -> NaN explicitly, x = 1 -> +0, +inf -> +inf, NaN -> NaN. u (u + 2) is 0 or >= 2**-10 for 16-bit x >= 1 (the
    # flushing sqrt.approx, 1 ulp; negative -> NaN, discarded).
    u = x - 1.0
    huge = x > 4.611686018427388e18
    v = tl.where(huge, x, u + _sqrtz(u * (u + 2.0)))
    r = _ln1p(v) + tl.where(huge, _LN2, 0.0)
    return tl.where(x < 1.0, float("nan"), r)


@jit
def _erf_small(t):
    # erf(t) for |t| < 0.9375: t P(t**2), degree-5 fit (relative error 1.7e-7 evaluated in float32); odd: -0.0 kept
    s = t * t
    p = s * -0.0005951662413953979 + 0.004985943873477186
    p = p * s - 0.026761979183197754
    p = p * s + 0.11281693585809738
    p = p * s - 0.3761248172542867
    p = p * s + 1.128379147449362
    return t * p


@jit
def _erfc_big(t):
    # erfc(t) for t >= 0.9375 (or +inf): z 2**(-t**2 log2 e + G(z)), z = 1/t, G a degree-8 fit (see the module doc);
    # t = +inf -> z = 0, 2**-inf = 0 -> +0; subnormal results kept (bfloat16 has float32's exponent range)
    z = _rcpz(t)  # t >= 0.9375 where the result is used
    g = z * 0.13440861423103243 - 0.7639843422338123
    g = g * z + 1.846017185279047
    g = g * z - 2.395764887905289
    g = g * z + 1.6025801424888246
    g = g * z - 0.10940290670069282
    g = g * z - 0.7138339167596174
    g = g * z + 2.574342329197954e-05
    g = g * z - 0.8257673218911441
    return _ex2((t * t) * -_LOG2E + g) * z


@jit
def _erf_m(x, p0, p1, p2):
    # |x| < 0.9375: the fit; beyond 1 - erfc(|x|) (:func:`_erfc_erf`), the sign of x.
    # +-inf -> +-1, NaN -> NaN (the second branch: rcp, ex2 propagate it), -0.0 kept.
    a = tl.abs(x)
    return tl.where(a < 0.9375, _erf_small(x), _copysign(1.0 - _erfc_erf(a), x))


@jit
def _erfc_erf(a):
    # erfc(a) for erf's tail: 2**P(t), t = min(a, 4) (erf(4) rounds to 1 in float32; NaN propagates), P a degree-6 fit
    # of log2(erfc) on [0.9375, 4] (8.5e-6 absolute in log2 units: erfc within 6e-6 relative, erf = 1 - erfc within
    # 1e-6 relative); P >= -26 there: the flushing ex2
    t = tl.minimum(a, 4.0, propagate_nan=tl.PropagateNan.ALL)
    p = t * 0.000132912557887499 - 0.002675810822318714
    p = p * t + 0.024060452054179587
    p = p * t - 0.13048203215114107
    p = p * t - 0.9451490879763325
    p = p * t - 1.6090628656487111
    p = p * t - 0.005238378067644984
    return _ex2z(p)


@jit
def _erfc_m(x, p0, p1, p2):
    # |x| < 0.9375: 1 - erf(x) (in [0.18, 1.82]: no cancellation); x >= 0.9375: the tail formula, relative; x <=
    # -0.9375: 2 - erfc(|x|) (in [1.82, 2]). +inf -> +0, -inf -> 2, NaN -> NaN.
    a = tl.abs(x)
    c = _erfc_big(a)
    return tl.where(a < 0.9375, 1.0 - _erf_small(x), tl.where(x < 0, 2.0 - c, c))


@jit
def _logaddexp_m(x, y, p0, p1, p2):
    # ATen's formula, m + log1p(e**-|x - y|), with the pieces above: e**-d in (0, 1] by the non-flushing ex2 (a
    # subnormal e**-d is a bfloat16-representable result when m = 0), its log1p relative (Taylor below 1/16), so
    # the result is within ~2**-18 relative of m + log1p(...) whatever the sizes. x == y == +-inf -> x (ATen), NaN
    # propagates (hardware max.NaN), one infinite operand: +inf -> +inf, -inf -> the other.
    m = tl.maximum(x, y, propagate_nan=tl.PropagateNan.ALL)
    d = tl.abs(x - y)
    r = m + _ln1p(_ex2(d * -_LOG2E))
    return tl.where((x == y) & (tl.abs(x) == float("inf")), x, r)


@jit
def _xlogy_m(x, y, p0, p1, p2):
    # ATen's: 0 where x == 0 (y not NaN), x ln(y) otherwise (ln by :func:`_ln_m16`, relative ~2**-21), NaN y -> NaN
    r = tl.where(x == 0, 0.0, x * _ln_m16(y))
    return tl.where(y != y, y, r)


@jit
def _atan2_m(y, x, p0, p1, p2):
    # atan2(y, x) (ATen's operand order: input = y): z = min(|x|, |y|) / max(|x|, |y|) in [0, 1] (both scaled by 2**64
    # or 2**-64 first where the larger is below 2**-62 or above 2**62, exactly, so that rcp.approx sees a normal
    # number: 2 ulp with the product), atan(z) = z P(z**2) with ops/elementwise.py's _atan_f polynomial (degree 7,
    # relative 1e-7), then pi/2 - r where |y| > |x| and pi - r where x is negative (or -0.0): no cancellation (the
    # results are >= pi/4 and >= pi/2), y's sign. C99's special values (PyTorch's): atan2(+-0, +0) = +-0,
    # atan2(+-0, -0) = +-pi, atan2(+-inf, +-inf) = +-pi/4, +-3pi/4 (z = 1), atan2(y, +inf) = +-0, atan2(y, -inf) =
    # +-pi, NaN -> NaN.
    a = tl.abs(y)
    b = tl.abs(x)
    mx = tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
    mn = tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
    sc = tl.where(mx < 2.168404344971009e-19, 1.8446744073709552e+19,
                  tl.where(mx > 4.611686018427388e+18, 5.421010862427522e-20, 1.0))
    z = (mn * sc) * _rcp(mx * sc)
    z = tl.where(mx == 0, 0.0, tl.where(mn == float("inf"), 1.0, z))
    w = z * z
    p = atan_poly(w)
    r = z * p
    r = tl.where(a > b, 1.5707963267948966 - r, r)
    r = tl.where(x.to(tl.int32, bitcast=True) < 0, 3.141592653589793 - r, r)
    return _copysign(r, y)


@jit
def _asinh_m(x, p0, p1, p2):
    # ops/elementwise.py's ``fast`` body (_asinh_f: |x| P(x**2) below 0.5, ln(|x| + sqrt(x**2 + 1)) through lg2
    # beyond, ln 2 + ln|x| past 2**62) with the flushing sqrt: x**2 + 1 >= 1 is never subnormal (the non-flushing
    # sqrt.approx costs a range test and two rescales); lg2's argument is >= 1.6. +-inf -> +-inf, NaN, -0.0 kept.
    a = tl.abs(x)
    w = a * a
    p = asinh_poly(w)
    huge = a > 4.611686018427388e18
    y = tl.where(huge, a, a + _sqrtz(w + 1.0))
    big = (_lg2z(y) + tl.where(huge, 1.0, 0.0)) * _LN2
    return _copysign(tl.where(a < 0.5, a * p, big), x)


@jit
def _elu_m(x, alpha, p1, p2):
    # ATen's x > 0 ? x : alpha expm1(x), expm1 by :func:`_em1` (2**-18 relative; ops/activation.py's ``fast``
    # body takes a Taylor polynomial to x**8 on (-0.5, 0] and the non-flushing exp beyond). NaN -> NaN, -inf ->
    # -alpha, -0.0 -> alpha * -0.0 (as the default body)
    return tl.where(x > 0, x, alpha * _em1(x))


@jit
def _celu_m(x, alpha, inv_alpha, p2):
    # x > 0 ? x : alpha expm1(x / alpha), x / alpha as x (1/alpha) (ops/activation.py's ``_celu_f``; the host passes
    # 1/alpha, rounded once, as the second parameter to both bodies): one more rounding of the argument, |t| 2**-23
    # relative in e**t, below 2**-16.5 where e**t is not swamped by the -1 (|t| < 88.7, alpha < 0 included: t > 0
    # there, overflowing to +inf as expm1 does). NaN -> NaN, -0.0 -> alpha * (+-0.0) as x / alpha's sign gives.
    return tl.where(x > 0, x, alpha * _em1(x * inv_alpha))


@jit
def _selu_m(x, p0, p1, p2):
    # scale (x > 0 ? x : alpha expm1(x)) with ATen's constants, expm1 by :func:`_em1`
    return 1.0507009873554804934193349852946 * tl.where(x > 0, x, 1.6732632423543772848170429916717 * _em1(x))


@jit
def _gelu_m(x, p0, p1, p2):
    # ops/activation.py's ``_gelu_f`` (x Phi(x), erfc(u) / 2 = s P(s) e**(-u**2), u = |x| / sqrt(2), s = 1 / (1 +
    # 0.425 u), the same degree-7 fit, relative 1.4e-7 on [0, 10]) with the constants folded and the exp by one
    # flushing ex2: e**(-u**2) 2**64 = ex2.ftz(x**2 (-log2(e) / 2) + 64), P's coefficients times 2**-64 (exact), so
    # that the ex2 result is normal (>= 2**-126) for every |x| <= 16.2 and the product rounds once where it is
    # subnormal; beyond, Phi(x) < 1e-57 (ex2 flushes to 0: x Phi(x) -> -0.0 for x < 0, x for x > 0, as the exact
    # result rounds). Error: the rounding of x**2 and of the ex2 argument (x**2 0.72 2**-24 + 2**-19 log2 units:
    # below 2**-17 relative for |x| < 13, where a 16-bit result can be nonzero) and ex2's 2 ulp; s's rcp (1 ulp,
    # argument in [1, inf]: the flushing rcp, 0 for inf). -inf -> NaN (-inf * 0, as the default body), +inf ->
    # +inf, NaN -> NaN.
    s = _rcpz(tl.abs(x) * 0.30052038200428266 + 1.0)  # 0.425 / sqrt(2)
    p = s * 1.9374945953396232e-21 - 8.48845311518043e-21  # _gelu_f's coefficients times 2**-64
    p = p * s + 1.104907256120237e-20
    p = p * s - 2.799173243431859e-21
    p = p * s + 6.91443616905844e-21
    p = p * s + 5.4400537429351136e-21
    p = p * s + 6.555118489350095e-21
    p = p * s + 6.4965012049681846e-21
    h = (s * p) * _ex2z((x * x) * -0.7213475204444817 + 64.0)  # erfc(|x| / sqrt(2)) / 2
    return x * tl.where(x < 0, h, 1.0 - h)


# op name -> (the default body's module and name, the body here)
OPS = {
    "log": ("elementwise", "_log_b", _log_m),
    "log2": ("elementwise", "_log2_b", _log2_m),
    "log10": ("elementwise", "_log10_b", _log10_m),
    "log1p": ("elementwise", "_log1p_b", _log1p_m),
    "expm1": ("elementwise", "_expm1_b", _expm1_m),
    "tanh": ("elementwise", "_tanh_b", _tanh_m),
    "atanh": ("elementwise", "_atanh_b", _atanh_m),
    "acosh": ("elementwise", "_acosh_b", _acosh_m),
    "erf": ("elementwise", "_erf_b", _erf_m),
    "erfc": ("elementwise", "_erfc_b", _erfc_m),
    "logaddexp": ("elementwise", "_logaddexp_b", _logaddexp_m),
    "xlogy": ("elementwise", "_xlogy_b", _xlogy_m),
    "atan2": ("elementwise", "_atan2_b", _atan2_m),
    "asinh": ("elementwise", "_asinh_b", _asinh_m),
    "elu": ("activation", "_elu_b", _elu_m),
    "celu": ("activation", "_celu_b", _celu_m),
    "selu": ("activation", "_selu_b", _selu_m),
    "gelu": ("activation", "_gelu_b", _gelu_m),
}

# ---------------------------------------------------------------------------------------------------------
# Level 2 (``FAST_MATH16: 2``): cheaper bodies, float32 intermediate within about 2**-13 relative (still at most one
# 16-bit ulp from the correctly rounded value: a 16-bit half ulp is >= 2**-12 relative). Fewer branches computed per
# element, lower-degree fits, the flushing MUFU forms.
# ---------------------------------------------------------------------------------------------------------


@jit
def _erf_m2(x, p0, p1, p2):
    # erf|x| = 1 - 2**(-t Q(t)), t = |x|, Q a degree-4 fit of -log2(erfc(t)) / t on [0, 3] (relative 2**-14.6;
    # the relative error of erf is about Q's near 0, smaller beyond); t Q(t) >= 11 for every t >= 2.5 (Q's leading
    # coefficient is positive: erf rounds to 1 there, +inf -> 1), one flushing ex2 (its result is 1 - erf or 0).
    # Below 2**-8: erf(x) = x 2/sqrt(pi) (relative error x**2/3 < 2**-17); at 2**-8 the subtraction's 2**-22
    # absolute (ex2's 2 ulp of ~1) is 2**-14.2 relative. NaN -> NaN, -0.0 kept (the small branch).
    t = tl.abs(x)
    q = t * 0.0023953324100569606 - 0.0273114820028591
    q = q * t + 0.1458313787883
    q = q * t + 0.9195569854256264
    q = q * t + 1.6278428469811361
    r = _copysign(1.0 - _ex2z(-t * q), x)
    return tl.where(t < 0.00390625, x * 1.1283791670955126, r)


@jit
def _erfcx_h(t, k, c5, c4, c3, c2, c1, c0):
    # P(s), s = 1 / (1 + k t) (the flushing rcp: the argument is >= 1 or +inf -> s = 0), P a degree-5 polynomial
    s = _rcpz(t * k + 1.0)
    p = s * c5 + c4
    p = p * s + c3
    p = p * s + c2
    p = p * s + c1
    return p * s + c0


@jit
def _erfc_m2(x, p0, p1, p2):
    # erfc(t) = erfcx(t) e**(-t**2), t = |x|, erfcx(t) = P(s), s = 1 / (1 + t / 2), P a degree-5 fit (relative
    # 2**-15.9 on [0, 9.4]: erfc underflows bfloat16 beyond), its coefficients times 2**-64 and e**(-t**2) 2**64 =
    # ex2.ftz(t**2 (-log2 e) + 64), normal for t <= 10.3 so that the product rounds once where erfc is subnormal
    # (beyond, 0 as erfc rounds); the argument's rounding adds t**2 2**-24 log-units (2**-17.5 at t = 9.4), ex2 2 ulp,
    # rcp 1 ulp (through P). x < 0: 2 - erfc(|x|) in [1, 2]. +inf -> +0, -inf -> 2, NaN -> NaN.
    t = tl.abs(x)
    h = _erfcx_h(t, 0.5, -1.072108864623205e-20, 2.9506686493081264e-20, 1.923094722117342e-21,
                 1.8680882983498365e-20, 1.479248457637668e-20, 2.894476556327459e-23)
    c = h * _ex2z((t * t) * -_LOG2E + 64.0)
    return tl.where(x < 0, 2.0 - c, c)


@jit
def _gelu_m2(x, p0, p1, p2):
    # x Phi(x) = max(x, 0) - |x| h, h = Phi(-|x|) = erfc(|x| / sqrt(2)) / 2 by :func:`_erfc_m2`'s fit (k and the
    # coefficients rescaled: s = 1 / (1 + |x| / (2 sqrt 2)), P times 2**-65), e**(-x**2 / 2) 2**64 by one flushing
    # ex2 (normal for |x| <= 14.6, where a bfloat16 result underflows). x (x < 0 ? h : 1 - h) as :func:`_gelu_m`:
    # -inf -> NaN (-inf * 0, as the default body), +inf -> +inf, NaN -> NaN, zeros signed as x.
    t = tl.abs(x)
    h = _erfcx_h(t, 0.35355339059327373, -5.360544323116025e-21, 1.4753343246540632e-20, 9.61547361058671e-22,
                 9.340441491749183e-21, 7.39624228818834e-21, 1.4472382781637295e-23)
    h = h * _ex2z((x * x) * (-0.5 * _LOG2E) + 64.0)
    return x * tl.where(x < 0, h, 1.0 - h)


@jit
def _acosh_m2(x, p0, p1, p2):
    # acosh(x) = ln(x + sqrt(x**2 - 1)) = ln 2 (lg2((x + sqrt(x - 1) sqrt(x + 1)) / 2) + 1), the half as
    # x / 2 + sqrt((x - 1) / 4) sqrt(x + 1) (no overflow up to 3.4e38; (x - 1) / 4 by one FMA, exact for 16-bit x);
    # near 1 the argument is in [0.5, 2]: lg2's 2**-22 absolute against acosh(1 + 2**-10) = 0.044 (float16's first
    # value past 1) is 2**-17.5 relative. The flushing sqrt (arguments 0 or >= 2**-12) and lg2 (argument >= 0.5).
    # x < 1 and -inf: sqrt of a negative -> NaN; 1 -> +0 explicitly (not lg2(0.5) + 1: lg2.approx's documented
    # bound does not promise -1 there); +inf -> +inf; NaN -> NaN.
    q = _sqrtz(x * 0.25 - 0.25) * _sqrtz(x + 1.0) + x * 0.5
    return tl.where(x == 1.0, 0.0, (_lg2z(q) + 1.0) * _LN2)


@jit
def _asinh_m2(x, p0, p1, p2):
    # asinh|x| = ln(|x| + sqrt(x**2 + 1)) = ln 2 (lg2(h + sqrt(h**2 + 1/4)) + 1), h = |x| / 2, the lg2 argument
    # min(h + sqrt(h**2 + 1/4), |x| + 1/2): the same for finite h**2 (|x| + sqrt(x**2 + 1) <= 2 |x| + 1), |x| past
    # 3.7e19 where h**2 overflows (asinh = ln 2|x| there). |x| < 2**-6.5: x (relative x**2/6 < 2**-15.5); beyond,
    # the lg2 argument's roundings and sqrt's ulp (2**-22.4 absolute) and lg2's 2**-22 against asinh >= 2**-6.5
    # are 2**-15 relative. The flushing sqrt (argument >= 1/4) and lg2 (>= 0.5). +-inf -> +-inf, NaN, -0.0 kept.
    a = tl.abs(x)
    h = a * 0.5
    q = tl.minimum(h + _sqrtz(h * h + 0.25), a + 0.5)
    r = (_lg2z(q) + 1.0) * _LN2
    return tl.where(a < 0.011048543456039806, x, _copysign(r, x))


@jit
def _atanh_m2(x, p0, p1, p2):
    # atanh|x| = (lg2(1 + a) - lg2(1 - a)) ln(2) / 2, a = |x|: the two lg2's 2**-22 absolute and 1 +- a's rounding
    # against atanh >= 2**-7 are 2**-15.4 relative; below 2**-7 x (relative x**2/3 < 2**-15.5). 1 - a is 0 or
    # >= 2**-24 in magnitude (the flushing lg2): |x| = 1 -> +-inf, |x| > 1 -> NaN (lg2 of a negative), NaN -> NaN,
    # -0.0 kept.
    a = tl.abs(x)
    r = (_lg2z(1.0 + a) - _lg2zo(1.0 - a)) * (0.5 * _LN2)
    return tl.where(a < 0.0078125, x, _copysign(r, x))


@jit
def _tanhshrink_m2(x, p0, p1, p2):
    # x - tanh(x): |x| < 0.4: x**3 Q(x**2), Q a degree-2 fit (relative 2**-17), + 0.0 so that -0.0 gives +0 as
    # x - tanh(x) does (a tiny x gives x's sign, the exact result's, where the 16-bit result underflows: PyTorch's
    # x - tanh(x) gives +0.0 where its float32 tanh rounds to x); beyond, x - 1 + 2 / (e**(2x) + 1) (x of either
    # sign: e**(2x) by one flushing ex2 (0 or +inf at the ends: -inf -> -inf, +inf -> +inf), its + 1 >= 1 by the
    # flushing rcp): e**(2x)'s 2 ulp and rcp's 1 ulp, 2**-22 absolute, against x - tanh(x) >= 0.02 are 2**-16
    # relative. NaN -> NaN.
    w = x * x
    p = w * 0.0490793400781124 - 0.13304603494063827
    p = p * w + 0.3333307914126093
    small = (x * w) * p + 0.0
    big = _rcpz(_ex2z(x * (2.0 * _LOG2E)) + 1.0) * 2.0 + (x - 1.0)
    return tl.where(tl.abs(x) < 0.4, small, big)


@jit
def _tanh_m2(x, p0, p1, p2):
    # tanh|x|: |x| < 1/16: |x| (1 - x**2 / 3) (truncation 2 x**4 / 15 < 2**-18.9 relative); beyond, (1 - e) / (1 + e),
    # e = e**(-2|x|) by one flushing ex2 (0 past |x| = 44: 1 exactly; +-inf -> +-1): 1 - e is exact (e in [1/2, 1]
    # or below 1/2 with 1 - e >= 1/2), e's error (ex2's 2 ulp and its argument's rounding) grows by e / (1 - e)
    # <= 7.6 at |x| = 1/16, rcp's 1 ulp: 2**-18.5 relative in all. Sign by copysign (-0.0 -> -0.0), NaN -> NaN.
    # sm_90 bf16 SASS per element 21.62 (level 1's expm1 form) -> 16.12.
    a = tl.abs(x)
    e = _ex2z(a * (-2.0 * _LOG2E))
    big = (1.0 - e) * _rcpz(1.0 + e)
    small = a - (a * (x * x)) * 0.3333333333333333
    return _copysign(tl.where(a < 0.0625, small, big), x)


@jit
def _atan2_m2(y, x, p0, p1, p2):
    # atan2(y, x) as :func:`_atan2_m` with: atan(z) = z P(z**2), P degree 4 (relative 2**-15); z = min / max of |y|,
    # |x| (NaN-propagating) both times sc, about 2**(63 - E / 2) for E the larger's biased exponent (0x5F000000 minus
    # its bits shifted right by one, as an integer: one rounding more in each product, 2**-23 in z), so that the
    # divisor's exponent is in [-65, 64] and the flushing rcp sees a normal number (a subnormal larger one becomes
    # >= 2**-71); the divisor plus 2**-100 (both zero: z = 0; +-inf: rcp = 0, z = 0 for a finite smaller one), z = 1
    # where both are infinite. Special values as :func:`_atan2_m`.
    a = tl.abs(y)
    b = tl.abs(x)
    mx = tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
    mn = tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
    sc = (0x5F000000 - (mx.to(tl.int32, bitcast=True) >> 1)).to(tl.float32, bitcast=True)
    z = (mn * sc) * _rcpz(mx * sc + 7.888609052210118e-31)
    z = tl.where(mn == float("inf"), 1.0, z)
    w = z * z
    p = w * 0.023864362061940633 - 0.09192872315088274
    p = p * w + 0.18521728064353746
    p = p * w - 0.3317012841313778
    p = p * w + 0.9999700670355363
    r = z * p
    r = tl.where(a > b, 1.5707963267948966 - r, r)
    r = tl.where(x.to(tl.int32, bitcast=True) < 0, 3.141592653589793 - r, r)
    return _copysign(r, y)


# op name -> (the default body's module and name, the level-2 body). An op absent here keeps its level-1 body.
OPS2 = {
    "erf": ("elementwise", "_erf_b", _erf_m2),
    "erfc": ("elementwise", "_erfc_b", _erfc_m2),
    "gelu": ("activation", "_gelu_b", _gelu_m2),
    "acosh": ("elementwise", "_acosh_b", _acosh_m2),
    "asinh": ("elementwise", "_asinh_b", _asinh_m2),
    "atanh": ("elementwise", "_atanh_b", _atanh_m2),
    "atan2": ("elementwise", "_atan2_b", _atan2_m2),
    "tanhshrink": ("activation", "_tanhshrink_b", _tanhshrink_m2),
    "tanh": ("elementwise", "_tanh_b", _tanh_m2),
}

_BY_ID: dict | None = None


def _tables() -> dict:
    """{level: {id(default body): fast body}}, built on first use from :data:`OPS`, :data:`OPS2` and
    ops/fast_trig16.py's tables (its ``OPS`` at level 1, ``OPS2`` at level 2)."""
    from . import activation, elementwise, fast_trig16
    mods = {"elementwise": elementwise, "activation": activation}
    one = {**OPS, **getattr(fast_trig16, "OPS", {})}
    two = {**one, **OPS2, **getattr(fast_trig16, "OPS2", {})}
    return {lvl: {id(getattr(mods[m], name)): b for m, name, b in tab.values()} for lvl, tab in ((1, one), (2, two))}


def math16_body(body, level: int = 1):
    """The ``FAST_MATH16`` body replacing the default ``@jit`` body ``body`` at ``level`` (1: :data:`OPS`, about
    2**-16 relative before rounding; 2: :data:`OPS2` where it has the op, else level 1), or None.

    Built lazily from ops/elementwise.py's and ops/activation.py's bodies (those modules import the pointwise
    generator, which asks here). Raises ValueError for a level other than 1 or 2."""
    global _BY_ID
    if level not in (1, 2):
        raise ValueError(f"math16_body: level expected 1 or 2 (the FAST_MATH16 setting), got {level!r}")
    if _BY_ID is None:
        _BY_ID = _tables()
    return _BY_ID[level].get(id(body))
