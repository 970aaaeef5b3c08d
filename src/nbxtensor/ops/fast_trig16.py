"""FAST_MATH16 bodies for the circular functions (sin, cos, tan, asin, acos, atan) with bfloat16/float16 outputs.

Same contract as ops/fast_math16.py (its docstring: accuracy, special values, the ``.ftz`` instructions and their
interpreter emulation, the exhaustive tests); that module merges this one's :data:`OPS` (level 1, float32 within
about 2**-16 relative) and :data:`OPS2` (level 2, about 2**-13 relative) into its tables.

Covered: atan, asin, acos (tests/ops/test_fast_trig16.py: all 65 536 inputs of each 16-bit dtype, SASS counts).

- atan: ``z = x`` for ``|x| <= 1``, ``-1/x`` (rcp.approx.ftz) beyond; ``atan(z) = z P(z**2)`` and the quadrant's
  offset (``+-pi/2`` beyond 1, else a zero of x's sign) added by the same FMA: ``atan(x) = fma(z, P(z**2), off)``.
  P: degree 5 in z**2 (level 1, relative 2**-17.8 on [0, 1]) or 4 (level 2, 2**-15.0), fitted for relative error
  (least squares on Chebyshev nodes in float64, reweighted toward minimax: Lawson). ops/elementwise.py's
  ``_atan_f`` (the 16-bit ``fast`` body without the key) takes degree 7 and a select more.
- asin: ``asin(s) = s + s z P(z)``, ``z = s**2``, on ``|s| <= 1/2`` (P of degree 2, 2**-19.1, level 1; degree 1,
  2**-14.7, level 2); beyond 1/2, ``pi/2 - 2 asin(sqrt((1 - |x|) / 2))`` (sqrt.approx.ftz: its argument is 0 or at
  least 2**-25 for float32 inputs) with the sign of x. One polynomial serves both ranges (``z`` and ``s`` are
  selected before it). acos: the same ``r``, then ``pi/2 - r`` (``|x| <= 1/2``, no cancellation: ``r`` is at most
  pi/6), ``2r`` (x > 1/2: the small result stays relative) or ``pi - 2r`` (x < -1/2), by one FMA whose multiplier
  and offset are selected.

sm_90 SASS instructions per element (bf16 in and out, the sm_90 table's large-tensor rule; relu takes 5), default
-> level 1 / level 2: atan 23.62 (its ``fast`` body) -> 16.62 / 15.62, asin 23.25 (libdevice) -> 16.88 / 15.88, acos
23.12 (libdevice) -> 19.75 / 18.75. Exhaustive tests, results that differ from the default body (of 65 536, level 1
/ level 2): bfloat16 0 / 0-4, float16 atan 70 / 536, asin 14-16 / 266, acos 8 / 68 (each one 16-bit ulp).

Not covered: sin, cos and tan. The bodies see float32 values only (the kernel converts the operands first), and
float32 inputs into 16-bit outputs (``out=``) reach the same body, so a reduction must be exact enough for every
float32 up to 3.4e38, branch-free (session 5: a block-uniform branch to libdevice was slower on the H200; the
module docstring of ops/fast_math16.py). Measured with scratch bodies compiled as the tests do: a Cody-Waite
reduction by pi (3 FMAs, k by the 1.5 * 2**23 trick) and one odd polynomial, 16.25 per element, is exact only
below |x| ~ 1e5 (every float16, but not bfloat16's or float32's large values); the full-range shape, frac(M G_E)
turns with ``G_E = frac(2**E / 2pi)`` per exponent as a float32 pair (two-product, rint, a sin(pi v) polynomial,
the parity's sign, small |x| passed through), 29.25 with the table lookup stood in by two multiplies, against
libdevice's 84.50 static (a Payne-Hanek branch that the common path skips; 74 % of 4.8 TB/s on the H200). Computing
``G_E`` in the body instead (a barrel shift of 1/2pi's bits, or frac(2**E C_i) over ~7 float32 pieces) costs more
still; a lookup needs a table operand (a pointer argument of the pointwise kernels, or a per-program table in
shared memory built from the bits of 1/2pi and read by ``tl.gather``), which ops/pointwise.py does not have.
"""

from __future__ import annotations

from ..runtime.triton_compat import HAVE_TRITON, jit, tl
from .fast_math16 import _copysign, _rcpz, _sqrtz

_C = tl.constexpr if HAVE_TRITON else float
_PIO2 = _C(1.5707963267948966)


@jit
def _signed(bits, x):
    # the float32 whose bits are ``bits`` (a positive constant) with the sign bit of x: one LOP3
    return ((x.to(tl.int32, bitcast=True) & -2147483648) | bits).to(tl.float32, bitcast=True)


@jit
def _atan_p5(w):
    # atan(z) / z on [0, 1] as a polynomial in w = z**2, degree 5: relative 2**-17.8 (level 1)
    p = w * -0.013482003742023962 + 0.057481563015255976
    p = p * w - 0.12124335083185349
    p = p * w + 0.19563781058157287
    p = p * w - 0.3329949356995966
    return p * w + 0.9999956465965071


@jit
def _atan_p4(w):
    # degree 4: relative 2**-15.0 (level 2)
    p = w * 0.023866551134322428 - 0.09193370215950307
    p = p * w + 0.1852210561788827
    p = p * w - 0.33170234428070433
    return p * w + 0.9999701472199772


@jit
def _atan16(x, LEVEL: tl.constexpr):
    # |x| <= 1: atan(x) = x P(x**2); |x| > 1: sign(x) pi/2 + atan(-1/x), -1/x by the flushing rcp (|x| > 1: a
    # subnormal 1/x, |x| > 2**126, flushes to 0 and gives +-pi/2, as it rounds). One FMA adds the offset: +-pi/2
    # or a zero of x's sign (which keeps atan(-0.0) = -0.0 and changes no other sum). Error: P's (level 1: 2**-17.8
    # relative; 2: 2**-15.0) plus rcp's ulp and a few float32 roundings; beyond 1 the result is >= pi/4 and the
    # term z P at most pi/4, so the relative bound holds there too. +-inf -> +-pi/2 (rcp(inf) = 0), NaN -> NaN
    # (|x| > 1 is false).
    inv = tl.abs(x) > 1.0
    z = tl.where(inv, _rcpz(-x), x)
    w = z * z
    if LEVEL == 1:
        p = _atan_p5(w)
    else:
        p = _atan_p4(w)
    off = _signed(tl.where(inv, 0x3FC90FDB, 0), x)  # +-float32(pi/2) or +-0.0, the sign of x
    return z * p + off


@jit
def _atan_m(x, p0, p1, p2):
    return _atan16(x, 1)


@jit
def _atan_m2(x, p0, p1, p2):
    return _atan16(x, 2)


@jit
def _asin_core(x, LEVEL: tl.constexpr):
    # (r, big): big = |x| > 1/2; r = asin(x) where not big (odd: the sign of x, -0.0 kept), asin(sqrt((1 - |x|) /
    # 2)) >= 0 where big (so that asin(x) = sign(x) (pi/2 - 2r) and acos(x) = 2r or pi - 2r). s + s z P(z) on
    # |s| <= 1/2, z = s**2 <= 1/4: P of degree 2 (2**-19.1 relative, level 1) or 1 (2**-14.7, level 2); the
    # flushing sqrt.approx (1 ulp) of z = (1 - |x|) / 2, exact (Sterbenz), 0 or >= 2**-25 for float32 x; |x| > 1
    # (inf included) gives z < 0 and NaN, as NaN does.
    a = tl.abs(x)
    big = a > 0.5
    z = tl.where(big, a * -0.5 + 0.5, x * x)
    s = tl.where(big, _sqrtz(z), x)
    if LEVEL == 1:
        p = z * 0.06410727308624675 + 0.0718998152439563
        p = p * z + 0.16680125749191949
    else:
        p = z * 0.09429869241991286 + 0.16505776227060437
    return (s * z) * p + s, big


@jit
def _asin16(x, LEVEL: tl.constexpr):
    # beyond 1/2: pi/2 - 2r >= pi/6 (r <= pi/12), the sign of x; no cancellation
    r, big = _asin_core(x, LEVEL)
    return tl.where(big, _copysign(r * -2.0 + _PIO2, x), r)


@jit
def _asin_m(x, p0, p1, p2):
    return _asin16(x, 1)


@jit
def _asin_m2(x, p0, p1, p2):
    return _asin16(x, 2)


@jit
def _acos16(x, LEVEL: tl.constexpr):
    # acos(x) = fma(r, k, off): |x| <= 1/2: pi/2 - r (r = asin(x), |r| <= pi/6: the result >= pi/3); x > 1/2: 2r
    # (relative as r); x < -1/2: pi - 2r (>= 2pi/3). k = -1 or copysign(2, x); off = pi/2, or pi/2 - copysign(pi/2,
    # x) (0 or pi, exact). NaN and |x| > 1 -> NaN (r is NaN).
    r, big = _asin_core(x, LEVEL)
    k = tl.where(big, _signed(0x40000000, x), -1.0)  # copysign(2, x)
    off = tl.where(big, _PIO2 - _signed(0x3FC90FDB, x), _PIO2)
    return r * k + off


@jit
def _acos_m(x, p0, p1, p2):
    return _acos16(x, 1)


@jit
def _acos_m2(x, p0, p1, p2):
    return _acos16(x, 2)


# op name -> (the default body's module and name, the body here)
OPS: dict = {
    "atan": ("elementwise", "_atan_b", _atan_m),
    "asin": ("elementwise", "_asin_b", _asin_m),
    "acos": ("elementwise", "_acos_b", _acos_m),
}
OPS2: dict = {
    "atan": ("elementwise", "_atan_b", _atan_m2),
    "asin": ("elementwise", "_asin_b", _asin_m2),
    "acos": ("elementwise", "_acos_b", _acos_m2),
}
