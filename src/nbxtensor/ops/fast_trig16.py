"""FAST_MATH16 bodies for the circular functions (sin, cos, tan, asin, acos, atan) with bfloat16/float16 outputs.

Same contract as ops/fast_math16.py (its docstring: accuracy, special values, the ``.ftz`` instructions and their
interpreter emulation, the exhaustive tests); that module merges this one's :data:`OPS` (level 1, float32 within
about 2**-16 relative) and :data:`OPS2` (level 2, about 2**-13 relative) into its tables.

Covered: atan, asin, acos, and (level 2) sin, cos, tan (tests/ops/test_fast_trig16.py: all 65 536 inputs of each
16-bit dtype, float32 inputs, SASS counts).

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

sin, cos, tan (level 2 only, :data:`OPS2`; level 1 keeps libdevice). The bodies see float32 values only (the kernel
converts the operands first, and float32 inputs into 16-bit outputs, ``out=``, reach the same body), so the
reduction must be exact for every float32 up to 3.4e38 without a block-uniform branch (session 5: a branch to
libdevice for a whole block was slower on the H200): as ops/elementwise.py's ``_remainder_a``, a fast path in
Triton and a per-element branch inside inline PTX (:data:`_SIN_PTX`, :data:`_COS_PTX`, :data:`_TRIG_PTX`) to an exact slow path, taken only by the lanes
that need it (|x| > 105615, +-inf, NaN; divergent lanes wait, no barrier). Fast path: CUDA sinf's Cody-Waite
reduction (three FMAs with a three-float pi/2, exact below its bound 105615: tests check the floats nearest every
multiple of pi/2 there), by pi for sin (x = k pi + r, k = rint(x / pi) by the 1.5 * 2**23 trick: sin(x) = (-1)**k
sin r) and cos (|x| = (k + 1/2) pi + r, k = floor(|x| / pi) by fma.rm over 2**23: cos(x) = (-1)**(k + 1) sin r),
by pi/2 for tan (q = rint(x 2/pi): tan r or -cot r). Slow path: Payne-Hanek in integers, the 96 bits of 2/pi that
matter for x's exponent (7 words of 2/pi as immediates, a funnel shift), times x's 24-bit significand mod 2**96: x
2/pi mod 4 (so x/pi mod 2) to 2**-62, the multiple from the top bits and r from the rest through float64. Both
paths give (r, k) to the same polynomial: sin and cos one odd polynomial on |r| <= pi/2 (r (1 + s P(s)), s = r**2,
P of degree 2, 2**-19.7 relative; cos's coefficients negated for its sign) and the sign flip by k's parity; tan sin
r (degree 1 in s, 2**-19.0) and cos r (C0 + s Q(s), 2**-16.3) on |r| <= pi/4 and a quotient by rcp.approx.ftz. The
interpreter computes the FMAs in float64 (exact for these operands), fma.rm by floor, and the slow path's integer
model step for step (:func:`_trig_slow`); tests/ops/test_fast_trig16.py checks all three reductions against one
with 400 bits of pi (Machin's formula in integers) on huge random float32 and the floats nearest multiples of pi/2,
and the GPU tier runs the same test through the PTX. One asm instance takes 8 elements (``pack``): 8 FSETP or-ed
into one predicate, one branch and its BSSY/BSYNC pair per 8 (per element they cost 4 instructions per element).
sm_90 SASS per element (bf16 in and out) on the fast path (the slow paths' instructions excluded): sin 17.62, cos
18.12, tan 21.75 (static with the slow paths 73.25 / 69.75 / 77.38; libdevice 84-86 static). Exhaustive tests,
results that differ from the default body (of 65 536, bfloat16 / float16): sin 8 / 36, cos 4 / 64, tan 36-38 /
472-474 (each one 16-bit ulp).

tan without sin and cos (session 7), behind ops/elementwise.py's ``ALT_TAN`` (an :class:`.pointwise.Alt` for 16-bit
results, default off; taken before the FAST_MATH16 body): the same reduction by pi/2, then t = tan r and, for odd q,
-1/t by :func:`_odd_rcp`: one LOP3 to a predicate and one predicated ``rcp.approx.ftz`` with a negated operand (the
same ``tl.where`` of two values compiles to a MUFU and an FSEL: one more per element). ``ALT_TAN: 1``
(:func:`_tan_rq`): t = r / Q(s), Q = 1 + s (C1 + C2 s) ~ r cot r (2**-15.25 relative; r cot r's series converges
much faster than tan r / r's), two MUFU per element (one predicated); ``ALT_TAN: 2`` (:func:`_tan_p4`): t = r P(s), P
of degree 4 (2**-17.98), one MUFU. sm_90 SASS per element on the fast path (bf16 in and out, BLOCK 2048 / 8 warps):
21.75 (the sin/cos body) -> 17.62 (1) / 18.62 (2); static 77.38 -> 73.25 / 74.25. Results that differ from the
default body (of 65 536, bfloat16 / float16): 80-82 / 790-794 (1), 16-18 / 128-132 (2) (each one 16-bit ulp; the
bfloat16 ones mostly past 105615: 74 of 82 for 1, 30 of 36 for the sin/cos body). Evaluated and not kept: tan r /
r of degree 3 (17.62, 2**-14.2: 2018 float16 results differ, past the tests' 2 %); the quotient forms that swap
numerator and denominator for odd q (r/Q or sin/cos: two selects, about 18.6 at best); the reduction has nothing to
spare (rint by the magic constant: one FFMA and one FADD, q's parity one LOP3 from the magic sum's bits, three FFMAs
for exactness up to 105615: two leave k P3 absolute, up to 2**-31.4 at k = 67000, too much next to the floats
nearest multiples of pi/2, |r| ~ 1e-9).
"""

from __future__ import annotations

from ..runtime.triton_compat import HAVE_TRITON, INTERPRET, jit, tl
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


# ---------------------------------------------------------------------------------------------------------
# sin, cos, tan (level 2): Cody-Waite by pi/2 with a per-element branch, inside inline PTX, to an exact reduction
# ---------------------------------------------------------------------------------------------------------
_HW = tl.constexpr(not INTERPRET) if HAVE_TRITON else False
# |x| <= this: the fast reduction (k = rint(x 2/pi) by the 1.5 * 2**23 trick, r = x - k pi/2 by three FMAs with
# pi/2 = P1 + P2 + P3, CUDA's constants and bound for sinf) leaves r within a few float32 ulps of |r| relative
# (tests: the floats nearest every multiple of pi/2 up to the bound); above it, inf and NaN: the slow path.
_TRIG_BOUND = _C(105615.0)
_P1 = _C(1.5707960128784180)     # 0x1.921fb0p+0
_P2 = _C(3.1391647326017846e-07)  # 0x1.5110b4p-22
_P3 = _C(5.3903025299577648e-15)  # 0x1.846988p-48
_2OPI = _C(0.6366197466850281)     # float32(2/pi)
_MAGIC = _C(12582912.0)          # 1.5 * 2**23: adding it rounds to an integer, kept in the low significand bits
# 2/pi's bits behind 9 zero bits, 7 words (most significant first; tests/ops/test_fast_trig16.py recomputes them
# from pi by Machin's formula): the slow path takes the 96-bit window that starts E + 7 bits in (E = x's exponent
# as m 2**E, m a 24-bit integer), so that m times the window, mod 2**96, is x 2/pi mod 4 in units of 2**-94.
_W = (0x00517CC1, 0xB727220A, 0x94FE13AB, 0xE8FA9A6E, 0xE06DB14A, 0xCC9E21C8, 0x20FF28B1)
_W0, _W1, _W2, _W3, _W4, _W5, _W6 = (_C(w) for w in _W)
_PIO2_2M64 = _C(8.515303950216386e-20)   # pi/2 * 2**-64 (0x3BF921FB54442D18)
_PI_2M64 = _C(1.7030607900432772e-19)    # pi * 2**-64 (0x3C0921FB54442D18)
_1OPI = _C(0.31830987334251404)          # float32(1/pi) (0x3EA2F983)

# Compiled tier: the fast path's (r, k) pass through unless |x| > _TRIG_BOUND or x is NaN (setp.gtu), a branch per
# asm instance (8 elements) and again per element inside it (divergent lanes of a warp wait for each other; no
# barrier). Slow path: Payne-Hanek on the integers.
# x = m 2**E (|x| > 105615: E >= -7, m in [2**23, 2**24)); x 2/pi = m 2**E sum b_i 2**-i, and the terms with
# E - i >= 2 are multiples of 4 (m is an integer): dropped. T = the 96 bits b_{E-1} .. b_{E+94} (b_i = 0 for i <= 0:
# the 9 zero bits), so x 2/pi = m T 2**-94 (mod 4) up to m 2**-94 < 2**-70 (T's truncation). Z = bits 32..95 of
# m T (a 64-bit number: the quadrant in its top 2 bits, the fraction below; the dropped low bits: 2**-62), q =
# (Z + 2**61) >> 62 (rounded to the nearest quadrant), f = (int64)(Z << 2) 2**-64 in [-1/2, 1/2) turns of pi/2,
# r = f pi/2 in float64 (cvt.rn.f64.s64: 53 bits), negated with q for x < 0, rounded to float32. Absolute error
# about 2**-61, so r is within 2**-20 relative for |r| >= 2**-40 (the reduced argument of a float32 is much larger:
# the tests' scan). +-inf and NaN: r = x - x = NaN.
_TRIG_PACK = 8  # elements per asm instance: one branch (and one BSSY/BSYNC pair) for eight elements


# Z (bits 32..95 of m T) is x 2/pi mod 4 in units of 2**-62, so also x/pi mod 2 in units of 2**-63. Mode 0 (by
# pi/2, tan): q = round(Z 2**-62), r = frac pi/2; mode 1 (by pi, sin): k = round(Z 2**-63), r = frac pi; mode 2
# (cos): the same for |x|/pi - 1/2 (Z - 2**62; Z does not see x's sign), so |x| = (k + 1/2) pi + r; modes 0 and 1
# negate r and q for x < 0 (the reduction of -|x|).
_TAILS = {
    0: """add.u64 y, z, 0x2000000000000000;
shr.u64 y, y, 62;
cvt.u32.u64 qq, y;
shl.b64 z, z, 2;
cvt.rn.f64.s64 d, z;
mul.rn.f64 d, d, 0d3BF921FB54442D18;
""",
    1: """add.u64 y, z, 0x4000000000000000;
shr.u64 y, y, 63;
cvt.u32.u64 qq, y;
shl.b64 z, z, 1;
cvt.rn.f64.s64 d, z;
mul.rn.f64 d, d, 0d3C0921FB54442D18;
""",
}
_TAILS[2] = "sub.u64 z, z, 0x4000000000000000;\n" + _TAILS[1]
_NEG = """setp.lt.s32 p, b, 0;
@p neg.f64 d, d;
@p neg.s32 qq, qq;
"""


def _slow_ptx(x: str, r: str, q: str, i: int, mode: int) -> str:
    # the slow path of one element (x's register, the outputs r and q), labels suffixed by i
    return f"""abs.f32 fa, {x};
setp.gtu.f32 p, fa, 0f47CE4780;
@!p bra SKIP{i};
setp.geu.f32 p, fa, 0f7F800000;
@p bra SPEC{i};
mov.b32 b, {x};
bfe.u32 st, b, 23, 8;
sub.s32 st, st, 143;
shr.u32 j, st, 5;
and.b32 o, st, 31;
and.b32 m, b, 0x007FFFFF;
or.b32 m, m, 0x00800000;
mov.b32 a0, 0x00517CC1;
mov.b32 a1, 0xB727220A;
mov.b32 a2, 0x94FE13AB;
mov.b32 a3, 0xE8FA9A6E;
setp.ge.u32 p, j, 1;
@p mov.b32 a0, a1;
@p mov.b32 a1, a2;
@p mov.b32 a2, a3;
@p mov.b32 a3, 0xE06DB14A;
setp.ge.u32 p, j, 2;
@p mov.b32 a0, a1;
@p mov.b32 a1, a2;
@p mov.b32 a2, a3;
@p mov.b32 a3, 0xCC9E21C8;
setp.ge.u32 p, j, 3;
@p mov.b32 a0, a1;
@p mov.b32 a1, a2;
@p mov.b32 a2, a3;
@p mov.b32 a3, 0x20FF28B1;
shf.l.wrap.b32 t0, a1, a0, o;
shf.l.wrap.b32 t1, a2, a1, o;
shf.l.wrap.b32 t2, a3, a2, o;
mul.lo.u32 t0, m, t0;
mul.wide.u32 z, m, t1;
mul.wide.u32 y, m, t2;
shr.u64 y, y, 32;
add.u64 z, z, y;
mov.b32 zr, 0;
mov.b64 y, {{zr, t0}};
add.u64 z, z, y;
{_TAILS[mode]}{"" if mode == 2 else _NEG}cvt.rn.f32.f64 {r}, d;
mov.b32 {q}, qq;
bra SKIP{i};
SPEC{i}:
sub.f32 {r}, {x}, {x};
SKIP{i}:
"""


def _trig_ptx(n: int, mode: int = 0) -> str:
    """The asm of :func:`_trig_reduce` for ``n`` elements: outputs r ($0..), q ($n..); inputs x ($2n..), the fast
    path's r ($3n..) and k bits ($4n..). The fast path: the (r, k) pass through, and one predicate (|x| > 105615 or
    NaN, or-ed over the n elements by setp's combining form) branches to the slow paths, each guarded again."""
    x, rf, kf = (lambda i: f"${2 * n + i}"), (lambda i: f"${3 * n + i}"), (lambda i: f"${4 * n + i}")
    out = ["{", ".reg .pred p, any;", ".reg .f32 fa;",
           ".reg .b32 b, st, j, o, m, a0, a1, a2, a3, t0, t1, t2, qq, zr;", ".reg .b64 z, y;", ".reg .f64 d;"]
    out += [f"mov.b32 ${i}, {rf(i)};\nmov.b32 ${n + i}, {kf(i)};" for i in range(n)]
    for i in range(n):
        out += [f"abs.f32 fa, {x(i)};",
                f"setp.gtu.f32 any, fa, 0f47CE4780;" if i == 0 else f"setp.gtu.or.f32 any, fa, 0f47CE4780, any;"]
    out += ["@!any bra DONE;"] + [_slow_ptx(x(i), f"${i}", f"${n + i}", i, mode) for i in range(n)] + ["DONE:", "}"]
    return "\n".join(out)


_TRIG_PTX = tl.constexpr(_trig_ptx(_TRIG_PACK)) if HAVE_TRITON else None
_SIN_PTX = tl.constexpr(_trig_ptx(_TRIG_PACK, 1)) if HAVE_TRITON else None
_COS_PTX = tl.constexpr(_trig_ptx(_TRIG_PACK, 2)) if HAVE_TRITON else None
_TRIG_N = _C(_TRIG_PACK)
_TRIG_CONS = tl.constexpr(",".join(["=f"] * _TRIG_PACK + ["=r"] * _TRIG_PACK + ["f"] * (2 * _TRIG_PACK)
                                   + ["r"] * _TRIG_PACK)) if HAVE_TRITON else None


@jit
def _fmaf(a, b, c):
    # fmaf; the interpreter (whose fma rounds twice) computes it in float64: exact for the reduction's operands
    # (k < 2**17 times a constant of at most 24 bits, added to a float32 of magnitude < 2**17: within 53 bits)
    if _HW:
        r = tl.fma(a, b, c)
    else:
        r = (a.to(tl.float64) * b + c).to(tl.float32)  # b: a constant; c: a constant or float32
    return r


@jit
def _pick(j, w0, w1, w2, w3):
    return tl.where(j == 0, w0, tl.where(j == 1, w1, tl.where(j == 2, w2, w3)))


@jit
def _trig_slow(x, MODE: tl.constexpr = 0):
    """(r, q) of the exact reduction of x by pi/2 (|x| > 105615; +-inf and NaN give NaN): the interpreter's model of
    :data:`_TRIG_PTX`'s slow path, step for step in 64-bit integers (the tests run it on huge float32 arguments
    against a reduction with 400 bits of pi)."""
    b = x.to(tl.uint32, bitcast=True)
    st = tl.maximum(((b >> 23) & 0xFF).to(tl.int32) - 143, 0)
    j = tl.minimum(st >> 5, 3)
    o = (st & 31).to(tl.uint64)
    m = ((b & 0x7FFFFF) | 0x800000).to(tl.uint64)
    a0 = _pick(j, _W0, _W1, _W2, _W3).to(tl.uint64)
    a1 = _pick(j, _W1, _W2, _W3, _W4).to(tl.uint64)
    a2 = _pick(j, _W2, _W3, _W4, _W5).to(tl.uint64)
    a3 = _pick(j, _W3, _W4, _W5, _W6).to(tl.uint64)
    lo32 = tl.full(x.shape, 0xFFFFFFFF, tl.uint64)
    t0 = (((a0 << 32) | a1) << o) >> 32 & lo32
    t1 = (((a1 << 32) | a2) << o) >> 32 & lo32
    t2 = (((a2 << 32) | a3) << o) >> 32 & lo32
    z = (((m * t0) & lo32) << 32) + m * t1 + ((m * t2) >> 32)
    if MODE == 0:
        q = ((z + (lo32 + 1) * 0x20000000) >> 62).to(tl.int32)
        d = (z << 2).to(tl.int64, bitcast=True).to(tl.float64) * _PIO2_2M64
    else:
        if MODE == 2:
            z = z - (lo32 + 1) * 0x40000000
        q = ((z + (lo32 + 1) * 0x40000000) >> 63).to(tl.int32)
        d = (z << 1).to(tl.int64, bitcast=True).to(tl.float64) * _PI_2M64
    neg = (x < 0) & (MODE != 2)  # cos: the reduction of |x|
    r = tl.where(neg, -d, d).to(tl.float32)
    q = tl.where(neg, -q, q)
    r = tl.where(tl.abs(x) < float("inf"), r, x - x)
    return r, q


@jit
def _trig_reduce(x):
    """(r, q): x = r + q pi/2 (mod 2 pi) with |r| <= pi/4 (a few float32 ulps over), q in 0..3, for every float32
    x (r is NaN for +-inf and NaN); -0.0 gives r = -0.0."""
    t = _fmaf(x, _2OPI, _MAGIC)
    k = t - _MAGIC
    r = _fmaf(k, -_P1, x)
    r = _fmaf(k, -_P2, r)
    r = _fmaf(k, -_P3, r)
    kb = t.to(tl.int32, bitcast=True)  # k in the low bits (two's complement mod 2**22)
    if _HW:
        r, kb = tl.inline_asm_elementwise(_TRIG_PTX, _TRIG_CONS, [x, r, kb], dtype=(tl.float32, tl.int32),
                                          is_pure=True, pack=_TRIG_N)
    else:
        rs, qs = _trig_slow(x)
        slow = ~(tl.abs(x) <= _TRIG_BOUND)
        r = tl.where(slow, rs, r)
        kb = tl.where(slow, qs, kb)
    return r, kb


@jit
def _trig_reduce_pi(x, COS: tl.constexpr):
    """(r, k bits) with x = k pi + r (sin, ``COS`` false) or |x| = (k + 1/2) pi + r (cos), |r| <= pi/2 + 0.0032, for
    every float32 x (r NaN for +-inf and NaN): sin(x) = (-1)**k sin r, cos(x) = (-1)**(k + 1) sin r. The fast path
    is :func:`_trig_reduce`'s by pi/2 with the multiples 2k or 2k + 1 (the three FMAs compute the same values: the
    pi pieces are the pi/2 pieces doubled), k = rint(x / pi) (sin) or floor(|x| / pi) (cos)."""
    if COS:
        # cos is even: |x|, t = 2**23 + floor(|x| / pi) by fma.rm (|x| / pi < 2**22 below the bound: the sum keeps
        # ulp 1), h = t - (2**23 - 1/2) = floor(|x| / pi) + 1/2 exactly; |x| is the one operand of all (the asm's
        # too: one unpacking of the bf16 input, not two)
        a = tl.abs(x)
        if _HW:
            t = tl.inline_asm_elementwise("fma.rm.f32 $0, $1, 0f3EA2F983, 0f4B000000;", "=f,f", [a],
                                          dtype=tl.float32, is_pure=True, pack=1)
        else:
            t = (tl.floor(a.to(tl.float64) * _1OPI) + 8388608.0).to(tl.float32)
        h = t - 8388607.5
    else:
        a = x
        t = _fmaf(x, _1OPI, _MAGIC)
        h = t - _MAGIC
    r = _fmaf(h, -2.0 * _P1, a)
    r = _fmaf(h, -2.0 * _P2, r)
    r = _fmaf(h, -2.0 * _P3, r)
    kb = t.to(tl.int32, bitcast=True)
    if _HW:
        if COS:
            r, kb = tl.inline_asm_elementwise(_COS_PTX, _TRIG_CONS, [a, r, kb], dtype=(tl.float32, tl.int32),
                                              is_pure=True, pack=_TRIG_N)
        else:
            r, kb = tl.inline_asm_elementwise(_SIN_PTX, _TRIG_CONS, [x, r, kb], dtype=(tl.float32, tl.int32),
                                              is_pure=True, pack=_TRIG_N)
    else:
        rs, qs = _trig_slow(a, 2 if COS else 1)
        slow = ~(tl.abs(x) <= _TRIG_BOUND)
        r = tl.where(slow, rs, r)
        kb = tl.where(slow, qs, kb)
    return r, kb


@jit
def _sin_pi(r, NEG: tl.constexpr):
    # sin r (-sin r with NEG: the coefficients negated, no extra instruction) for |r| <= 1.5765 (pi/2 and the
    # reductions' overshoot): r (1 + s (A1 + s (A2 + s A3))), s = r**2, 2**-19.7 relative (fit as _sincos_poly's);
    # -0.0 kept
    s = r * r
    if NEG:
        p = ((s * 0.00018532804668372743 - 0.008313992939514575) * s + 0.166658349040513) * s - 1.0
    else:
        p = ((s * -0.00018532804668372743 + 0.008313992939514575) * s - 0.166658349040513) * s + 1.0
    return r * p


@jit
def _sincos_poly(r):
    # (sin r, cos r) for |r| <= 0.7902 (pi/4 = 0.7854 and the fast reduction's overshoot: its k is rint of x times
    # float32(2/pi), off by up to 0.0013 turns near 105615; tests: |r| <= 0.7892): sin r = r (1 + s (A1 + A2 s)),
    # 2**-18.98 relative; cos r = C0 + s (C1 + C2 s), 2**-16.32 relative (s = r**2; fits for relative error, least squares on Chebyshev nodes
    # reweighted toward minimax). sin(-0.0) = -0.0 (r (1 + s P); r + r s P would give +0.0).
    s = r * r
    sn = r * ((s * 0.0081612 - 0.16663309) * s + 1.0)
    cs = (s * 0.04034631 - 0.49967771) * s + 0.99998779
    return sn, cs


@jit
def _flip(v, bit):
    # v with its sign bit xor-ed with bit 0 of ``bit`` (an int32)
    return (v.to(tl.int32, bitcast=True) ^ (bit << 31)).to(tl.float32, bitcast=True)


@jit
def _sin_m2(x, p0, p1, p2):
    # sin(k pi + r) = (-1)**k sin r. Error: the polynomial's (2**-19.7) plus a few float32 roundings (the reduced r
    # within a few ulps of itself), 2**-18 relative at most: level 2's bound with room.
    r, k = _trig_reduce_pi(x, False)
    return _flip(_sin_pi(r, False), k)


@jit
def _cos_m2(x, p0, p1, p2):
    # cos((k + 1/2) pi + r) = (-1)**(k + 1) sin r: relative to the distance from the zeros of cos, as sin's
    r, k = _trig_reduce_pi(x, True)
    return _flip(_sin_pi(r, True), k)


@jit
def _tan_m2(x, p0, p1, p2):
    # tan(r + q pi/2) = tan r (q even), -cot r (q odd): the quotient by rcp.approx.ftz (1 ulp), 2**-16 relative. Its
    # operand is never subnormal: cos r >= 0.7 (q even; a subnormal x keeps tan(x) = x by the ordinary multiply), sin
    # r with |r| >= 2**-40 (q odd: r is the distance of a float32 from a nonzero multiple of pi/2; tests: >= 1e-9).
    # Near such a multiple -cot r is large and rounds to +-inf in bfloat16 or float16, as it should.
    # q odd: cos r / (-sin r), the negation a free operand modifier of the multiply that makes -sin r (the sign
    # flip by q's bit would take a shift and a LOP3).
    r, q = _trig_reduce(x)
    sn, cs = _sincos_poly(r)
    odd = (q & 1) != 0
    n = tl.where(odd, cs, sn)
    d = tl.where(odd, -sn, cs)
    return n * _rcpz(d)


OPS2.update({
    "sin": ("elementwise", "_sin_b", _sin_m2),
    "cos": ("elementwise", "_cos_b", _cos_m2),
    "tan": ("elementwise", "_tan_b", _tan_m2),
})



# ---------------------------------------------------------------------------------------------------------
# tan without sin and cos (session 7): ALT_TAN (ops/elementwise.py's Alt for tan; default off)
# ---------------------------------------------------------------------------------------------------------
# t where q is even, -1/t where q is odd: one LOP3 to a predicate and one predicated MUFU.RCP whose operand is
# negated by a free modifier (ptxas made an FSEL of a separate MUFU out of the same tl.where: 1 more per element)
_ODD_RCP_PTX = tl.constexpr("""{
.reg .pred p;
.reg .b32 b;
.reg .f32 n;
and.b32 b, $2, 1;
setp.ne.b32 p, b, 0;
mov.b32 $0, $1;
neg.f32 n, $1;
@p rcp.approx.ftz.f32 $0, n;
}""") if HAVE_TRITON else None


@jit
def _odd_rcp(t, q):
    """``t`` where bit 0 of ``q`` (int32) is clear, ``-1/t`` (rcp.approx.ftz, 1 ulp) where it is set: tan(r + q pi/2)
    from t = tan r. The interpreter: the same select of :func:`.fast_math16._rcpz` (its flushes and ``_ERR``)."""
    if _HW:
        r = tl.inline_asm_elementwise(_ODD_RCP_PTX, "=f,f,r", [t, q], dtype=tl.float32, is_pure=True, pack=1)
    else:
        r = tl.where((q & 1) != 0, _rcpz(-t), t)
    return r


@jit
def _tan_rq(x, p0, p1, p2):
    # ALT_TAN 1: tan r = r / Q(s), Q(s) = 1 + s (C1 + C2 s) ~ r cot r (s = r**2, |r| <= 0.7902: 2**-15.25 relative,
    # fit as _sincos_poly's with Q(0) = 1 kept: tan(x) = x exactly for tiny x); then -1/t for odd q (_odd_rcp). r cot
    # r = 1 - s/3 - s**2/45 - ... converges much faster than tan r / r (a degree-3 polynomial for tan r / r reaches
    # only 2**-14.2 and moved 2018 float16 results of 65 536). The quotient: rcp.approx.ftz of Q in [0.78, 1]; the
    # odd case's operand |t| >= |r| >= 1e-9 (r the distance of a float32 from a nonzero multiple of pi/2), never
    # subnormal. Error: 2**-15.25 and two or three roundings of 1 ulp (float32 model: 2**-15.24 both cases). -0.0
    # gives -0.0 (q = 0, r = -0.0); NaN, +-inf give NaN (r is NaN).
    r, q = _trig_reduce(x)
    s = r * r
    return _odd_rcp(r * _rcpz((s * -0.02424074523150921 - 0.33292099833488464) * s + 1.0), q)


@jit
def _tan_p4(x, p0, p1, p2):
    # ALT_TAN 2: tan r = r P(s), P(s) = 1 + s (A1 + s (A2 + s (A3 + s A4))) (2**-17.98 relative on |r| <= 0.7902),
    # then -1/t for odd q: one MUFU per element instead of _tan_rq's two, one FFMA more. -0.0 kept (r times P).
    r, q = _trig_reduce(x)
    s = r * r
    p = ((s * 0.04358067363500595 + 0.040880125015974045) * s + 0.1362261176109314) * s + 0.33314067125320435
    return _odd_rcp(r * (p * s + 1.0), q)
