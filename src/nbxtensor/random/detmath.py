"""float64 ``log``, ``exp`` and ``sincos(2*pi*t)`` that give the same bits on the CPU and on the GPU.

The transforms of :mod:`.distributions` and :mod:`.sampling` need logarithms, exponentials, sines and cosines.
NumPy's (the C library's) and CUDA's libdevice versions differ in the last bit now and then, which would break
the promise that a seed gives the same numbers on both devices. These versions use only IEEE-754 float64
``+ - * /``, ``sqrt``, ``floor`` and integer operations on the bits, which are correctly rounded on both
devices, in the same order in the NumPy and the Triton code. Conditions for bit equality on the GPU:

- no contraction of ``a*b + c`` into a fused multiply-add: every kernel using these is launched with Triton's
  ``enable_fp_fusion=False`` (a compile option the launcher forwards);
- float64 only: float64 division and ``sqrt_rn`` are IEEE on NVIDIA GPUs, and float64 never flushes subnormals
  (float32 division in Triton is the approximate ``div.full.f32``, so no float32 arithmetic here).

Accuracy (tested against NumPy in ``tests/random/test_philox.py``): a few units in the last place, which is all
a random-number transform needs.

Sources: the polynomials are fdlibm's (Sun Microsystems, 1993; as in FreeBSD msun): ``e_log.c`` (``Lg1..Lg7``),
``e_exp.c`` (``P1..P5``), ``k_sin.c`` (``S1..S6``), ``k_cos.c`` (``C1..C6``), evaluated in the same nesting.
"""

from __future__ import annotations

import numpy as np

from ..runtime.triton_compat import jit, tl

__all__ = ["log_np", "exp_np", "sincos2pi_np", "log_f64", "exp_f64", "sincos2pi_f64", "SQRT2", "LN2_HI",
           "LN2_LO"]

SQRT2 = 1.4142135623730951
LN2_HI = 6.93147180369123816490e-01  # fdlibm ln2_hi: ln 2 to 32 bits, so k * LN2_HI is exact for |k| < 2**20
LN2_LO = 1.90821492927058770002e-10  # fdlibm ln2_lo: ln 2 - LN2_HI
INV_LN2 = 1.44269504088896338700e+00
TWO_PI = 6.283185307179586

LG1, LG2, LG3, LG4 = 6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01, \
    2.222219843214978396e-01
LG5, LG6, LG7 = 1.818357216161805012e-01, 1.531383769920937332e-01, 1.479819860511658591e-01
P1, P2, P3 = 1.66666666666666019037e-01, -2.77777777770155933842e-03, 6.61375632143793436117e-05
P4, P5 = -1.65339022054652515390e-06, 4.13813679705723846039e-08
S1, S2, S3 = -1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04
S4, S5, S6 = 2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10
C1, C2, C3 = 4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05
C4, C5, C6 = -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11

_EXP_MASK = 0x000FFFFFFFFFFFFF
_ONE_BITS = 0x3FF0000000000000


# ---------------------------------------------------------------------------------------------------------
# NumPy
# ---------------------------------------------------------------------------------------------------------
def log_np(u: np.ndarray) -> np.ndarray:
    """Natural log of positive, normal float64 values (the uniforms of the transforms: u in [2**-64, 1])."""
    u = np.asarray(u, dtype=np.float64)
    bits = u.view(np.int64)
    e = (bits >> 52) - 1023
    m = ((bits & _EXP_MASK) | _ONE_BITS).view(np.float64)  # the significand, in [1, 2)
    big = m > SQRT2
    m = np.where(big, m * 0.5, m)  # now in [sqrt(2)/2, sqrt(2)]
    k = (e + big).astype(np.float64)
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (LG2 + w * (LG4 + w * LG6))
    t2 = z * (LG1 + w * (LG3 + w * (LG5 + w * LG7)))
    r = t2 + t1
    hfsq = 0.5 * f * f
    return k * LN2_HI - ((hfsq - (s * (hfsq + r) + k * LN2_LO)) - f)


def exp_np(x: np.ndarray) -> np.ndarray:
    """``exp`` of float64 values <= 0 (``-inf`` gives 0): the softmax numerators of the sampler."""
    x = np.asarray(x, dtype=np.float64)
    xc = np.maximum(x, -746.0)
    k = np.floor(xc * INV_LN2 + 0.5)
    hi = xc - k * LN2_HI
    lo = k * LN2_LO
    r = hi - lo
    t = r * r
    c = r - t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))))
    y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
    ki = k.astype(np.int64)
    deep = ki < -1000
    k1 = np.where(deep, ki + 1000, ki)
    y = y * ((k1 + 1023) << 52).view(np.float64)
    y = np.where(deep, y * 9.332636185032189e-302, y)  # 2**-1000: one rounding into the subnormals
    return np.where(x < -745.5, 0.0, y)


def sincos2pi_np(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(sin(2*pi*t), cos(2*pi*t))`` for float64 ``t`` in [0, 1): the Box-Muller angle in turns, so the range
    reduction ``t - q/4`` is exact."""
    t = np.asarray(t, dtype=np.float64)
    q = np.floor(t * 4.0 + 0.5)
    a = (t - q * 0.25) * TWO_PI  # |a| <= pi/4 (+ rounding)
    z = a * a
    sa = a + (z * a) * (S1 + z * (S2 + z * (S3 + z * (S4 + z * (S5 + z * S6)))))
    ca = 1.0 - (0.5 * z - z * (z * (C1 + z * (C2 + z * (C3 + z * (C4 + z * (C5 + z * C6)))))))
    qi = q.astype(np.int64) & 3
    s = np.where(qi == 0, sa, np.where(qi == 1, ca, np.where(qi == 2, -sa, -ca)))
    c = np.where(qi == 0, ca, np.where(qi == 1, -sa, np.where(qi == 2, -ca, sa)))
    return s, c


# ---------------------------------------------------------------------------------------------------------
# Triton (same operations, same order)
# ---------------------------------------------------------------------------------------------------------
@jit
def log_f64(u):
    """:func:`log_np` for a float64 block."""
    bits = u.to(tl.int64, bitcast=True)
    e = (bits >> 52) - 1023
    m = ((bits & 0x000FFFFFFFFFFFFF) | 0x3FF0000000000000).to(tl.float64, bitcast=True)
    big = m > 1.4142135623730951
    m = tl.where(big, m * 0.5, m)
    k = (e + big.to(tl.int64)).to(tl.float64)
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (3.999999999940941908e-01 + w * (2.222219843214978396e-01 + w * 1.531383769920937332e-01))
    t2 = z * (6.666666666666735130e-01 + w * (2.857142874366239149e-01 + w * (1.818357216161805012e-01
                                                                              + w * 1.479819860511658591e-01)))
    r = t2 + t1
    hfsq = 0.5 * f * f
    return k * 6.93147180369123816490e-01 - ((hfsq - (s * (hfsq + r) + k * 1.90821492927058770002e-10)) - f)


@jit
def exp_f64(x):
    """:func:`exp_np` for a float64 block."""
    xc = tl.maximum(x, -746.0)
    k = tl.floor(xc * 1.44269504088896338700e+00 + 0.5)
    hi = xc - k * 6.93147180369123816490e-01
    lo = k * 1.90821492927058770002e-10
    r = hi - lo
    t = r * r
    c = r - t * (1.66666666666666019037e-01 + t * (-2.77777777770155933842e-03 + t * (
        6.61375632143793436117e-05 + t * (-1.65339022054652515390e-06 + t * 4.13813679705723846039e-08))))
    y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi)
    ki = k.to(tl.int64)
    deep = ki < -1000
    k1 = tl.where(deep, ki + 1000, ki)
    y = y * ((k1 + 1023) << 52).to(tl.float64, bitcast=True)
    y = tl.where(deep, y * 9.332636185032189e-302, y)
    return tl.where(x < -745.5, 0.0, y)


@jit
def sincos2pi_f64(t):
    """:func:`sincos2pi_np` for a float64 block: returns ``(sin, cos)``."""
    q = tl.floor(t * 4.0 + 0.5)
    a = (t - q * 0.25) * 6.283185307179586
    z = a * a
    sa = a + (z * a) * (-1.66666666666666324348e-01 + z * (8.33333333332248946124e-03 + z * (
        -1.98412698298579493134e-04 + z * (2.75573137070700676789e-06 + z * (
            -2.50507602534068634195e-08 + z * 1.58969099521155010221e-10)))))
    ca = 1.0 - (0.5 * z - z * (z * (4.16666666666666019037e-02 + z * (-1.38888888888741095749e-03 + z * (
        2.48015872894767294178e-05 + z * (-2.75573143513906633035e-07 + z * (
            2.08757232129817482790e-09 + z * -1.13596475577881948265e-11)))))))
    qi = q.to(tl.int64) & 3
    s = tl.where(qi == 0, sa, tl.where(qi == 1, ca, tl.where(qi == 2, -sa, -ca)))
    c = tl.where(qi == 0, ca, tl.where(qi == 1, -sa, tl.where(qi == 2, -ca, sa)))
    return s, c
