"""Elementwise operators: unary math, binary arithmetic, bitwise and logical ops, comparisons and the ternary
ops (``where``, ``lerp``, ``addcmul``, ``addcdiv``, ``clamp``, ``masked_fill``), with PyTorch's names,
arguments, promotion and errors.

Each op is one record (:func:`.pointwise.declare`) holding: the schema (which generates ``nbx.<op>``,
``Tensor.<op>``, ``Tensor.<op>_`` and the operators ``+ - * / // % ** & | ^ ~ << >> < <= == != >= >``,
reflected and in-place, through :mod:`.dispatch`), the promotion kind, the dtypes PyTorch 2.13 implements the
op for (measured on CPU), a scalar ``@jit`` body (the Triton kernel comes from :mod:`.pointwise`), a NumPy
function (the ``cpu`` implementation), a float64 oracle written independently of the NumPy function, the
cost, the input domain the tests draw from, and error inputs as data.

Numerics: float16, bfloat16 and float8 compute in float32 and round once. Transcendentals use libdevice on
the GPU (accurate to a few ulp; correctly rounded division and square root), NumPy on the ``cpu`` device.
On the GPU float32 follows PyTorch's CUDA build (nvcc defaults): subnormals are not flushed to zero (libdevice
compiled without FTZ, :data:`.triton_helpers.IEEE_OPTIONS`), division and square root are IEEE
(:func:`.triton_helpers.div_rn`, :func:`~.triton_helpers.sqrt_rn`, never Triton's approximate float32 ``/``),
and max/min/clamp propagate NaN. Alternative bodies behind config keys (default off, for the H200 sweeps; results
within the tolerance table, PyTorch's special values): ``ALT_RSQRT`` (libdevice's rsqrtf, nvcc's), ``ALT_COSH`` and
``ALT_POW`` (16-bit results: ex2.approx / rcp.approx formulas; products, rcp and sqrt for scalar exponents in
+-{0.5, 1, ..., 3}; ``ALT_POW: 2`` a tensor exponent's body at FAST_MATH16 level 2's accuracy), ``ALT_REMAINDER``
(float32 compute, bit for bit the default: an fma path with an exact certificate and a per-element branch to an exact
fmod on the bits), ``ALT_TAN`` (16-bit results: ops/fast_trig16.py's tan without sin and cos, 1: r / Q(r**2)
and a predicated rcp, 2: a degree-9 odd polynomial).
Formulas follow ATen's CPU kernels where PyTorch defines edge cases (sources in each docstring).

Integer division by zero (``floor_divide``, ``remainder``, ``fmod``, ``div`` with a rounding mode): the
``cpu`` device raises ``RuntimeError("ZeroDivisionError")`` as PyTorch's CPU does; Triton kernels cannot
raise and give -1 for the quotient and the dividend for the remainder (PyTorch's CUDA result is unspecified).
"""

from __future__ import annotations

import math

import numpy as np

from .._errors import check
from ..dtypes import table as T
from ..dtypes.casting import cast_array
from ..dtypes.promotion import get_default_dtype
from ..runtime.triton_compat import HAVE_TRITON, INTERPRET, jit, tl
from ..tensor.core import Tensor
from . import fast_math16 as _M16
from . import fast_trig16 as _TR
from . import triton_helpers as H
from .pointwise import Alt, _cvt, declare, launch_pointwise
from .triton_helpers import libdevice

__all__ = ["ALL", "STD", "FLOATS", "INTS", "FP8", "NO_FP8", "INT_LIKE", "nan_maximum", "nan_minimum"]

# ---------------------------------------------------------------------------------------------------------
# Dtype sets (PyTorch 2.13 CPU support, measured; complex dtypes have no kernels here)
# ---------------------------------------------------------------------------------------------------------
FLOATS = frozenset({T.float16, T.bfloat16, T.float32, T.float64})
INTS = frozenset({T.uint8, T.int8, T.int16, T.int32, T.int64})
BARE_U = frozenset({T.uint16, T.uint32, T.uint64})
FP8 = frozenset({T.float8_e4m3fn, T.float8_e5m2})
STD = frozenset({T.bool_}) | INTS | FLOATS
ALL = STD | BARE_U | FP8
NO_FP8 = ALL - FP8
INT_LIKE = frozenset({T.bool_}) | INTS | BARE_U
NUM = INTS | FLOATS

_FAM = "elementwise"
_INF = float("inf")


def _is_float(prom) -> bool:
    return prom.compute.kind == T.KIND_FLOAT


def _np_zero_div_check(b) -> None:
    check(not np.any(np.asarray(b) == 0), "ZeroDivisionError")


@jit
def nan_maximum(a, b):
    """``torch.maximum`` (NaN if either is NaN) as one hardware ``max.NaN`` (FMNMX.NAN on sm_80+; a compare and
    select for float64; integers: the plain maximum). :func:`.triton_helpers.maximum` spends two NaN tests and
    three selects per element, which made hardtanh/relu6/clamp ALU-bound on the H200 (~0.8x PyTorch). The two
    differ only for a (+0, -0) pair, which gives +0 here in either order (IEEE 754-2019 ``maximum``; CUDA's
    ``fmaxf``, which PyTorch's kernels call, leaves it unspecified)."""
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@jit
def nan_minimum(a, b):
    """``torch.minimum`` (NaN if either is NaN) as one hardware ``min.NaN``: see :func:`nan_maximum` ((+0, -0)
    gives -0)."""
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


# Compiled kernels may use instructions the interpreter lacks: the GPU's exact conversions (pointwise._cvt) and the
# inline PTX of the fast bodies below.
_HW_CVT = tl.constexpr(not INTERPRET) if HAVE_TRITON else False


@jit
def _rcp_f(d):
    """1 / d for float32 d in [1, 2**126] (or +inf), for the fast bodies of 16-bit outputs: rcp.approx.ftz.f32, one
    MUFU.RCP, 1 ulp. Triton's ``1.0 / d`` is div.full.f32, which wraps the same instruction in range checks and
    rescaling for divisors outside that interval (7 instructions); flushing subnormals cannot matter here."""
    if _HW_CVT:
        r = tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [d], dtype=tl.float32, is_pure=True,
                                      pack=1)
    else:
        r = 1.0 / d
    return r


@jit
def _ex2_f(t):
    """2**t for float32 t >= -126 (or +-inf, NaN), for the fast bodies: ex2.approx.ftz.f32, one MUFU.EX2, relative
    error about 2**-22 (PTX ISA). Triton's ``tl.exp2`` under the IEEE launch options is ex2.approx.f32, which
    ptxas widens with a range test and two rescaling multiplies for subnormal results, which cannot occur here."""
    if _HW_CVT:
        r = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=r,r", [t], dtype=tl.float32, is_pure=True,
                                      pack=1)
    else:
        r = tl.exp2(t)
    return r


@jit
def _lg2_f(y):
    """log2(y) for float32 y >= 1 (or +inf, NaN), for the fast bodies: lg2.approx.ftz.f32, one MUFU.LG2, absolute
    error about 2**-22 (Triton's ``tl.log2`` is a 20-instruction polynomial)."""
    if _HW_CVT:
        r = tl.inline_asm_elementwise("lg2.approx.ftz.f32 $0, $1;", "=r,r", [y], dtype=tl.float32, is_pure=True,
                                      pack=1)
    else:
        r = tl.log2(y)
    return r


# =========================================================================================================
# Unary
# =========================================================================================================
# ATen's kernels of these write their input's dtype only: out= of another dtype raises "Found dtype Float but
# expected BFloat16" (dispatch.check_out_dtype); the other unary ops compute in the result dtype and cast to out's.
_SAME_DTYPE_OUT = frozenset({"abs", "neg", "sign", "sgn", "floor", "ceil", "trunc", "frac", "bitwise_not"})


def _unary(name, body, cpu, oracle, *, promotion="default", dtypes=NO_FP8, domain="any", flops=1, dunders=None,
           aliases=(), errors=(), tol=None, **kw):
    if name in _SAME_DTYPE_OUT:
        kw.setdefault("out_dtype", "same")
    declare(name, f"{name}(Tensor input, *, Tensor? out=None)", family=_FAM, body=body, cpu=cpu, oracle=oracle,
            promotion=promotion, dtypes=dtypes, domain=domain, flops=flops, dunders=dunders or {}, inplace=True,
            aliases=aliases, errors=list(errors), tolerance=tol, **kw)


@jit
def _abs_b(x, p0, p1, p2):
    if x.dtype.is_int_unsigned():
        r = x
    else:
        r = tl.where(x < 0, -x, x)
        if x.dtype.is_floating():
            r = tl.abs(x)
    return r


_unary("abs", _abs_b, np.abs, lambda x: np.abs(x), dtypes=INTS | FLOATS | FP8, dunders={"__abs__": "unary"},
       aliases=("absolute",))


@jit
def _neg_b(x, p0, p1, p2):
    return -x


_BOOL_NEG = ("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
             "use the `~` or `logical_not()` operator instead.")


def _neg_prepare(a, prom):
    check(prom.common is not T.bool_, _BOOL_NEG)
    return {}


_unary("neg", _neg_b, np.negative, lambda x: -x, dtypes=STD, dunders={"__neg__": "unary"}, aliases=("negative",),
       prepare=_neg_prepare, refused=frozenset({T.bool_}),
       errors=[(lambda nbx: (nbx.tensor([True]),), {}, RuntimeError, "Negation")])


@jit
def _sign_b(x, p0, p1, p2):
    if x.dtype == tl.int1:
        r = x
    else:
        # (0 < x) - (x < 0): NaN -> 0, as ATen's sign kernel
        r = tl.where(x > 0, 1, tl.where(x < 0, -1, 0)).to(x.dtype)
    return r


def _np_sign(x):
    if x.dtype == np.bool_:
        return x.copy()
    return ((x > 0).astype(x.dtype) - (x < 0).astype(x.dtype)).astype(x.dtype) if x.dtype.kind != "u" else \
        (x > 0).astype(x.dtype)


def _or_sign(x):
    x = np.asarray(x)
    if x.dtype == np.bool_:
        return x
    return np.where(x > 0, 1, np.where(x < 0, -1, 0)).astype(np.float64 if x.dtype.kind == "f" else x.dtype)


_unary("sign", _sign_b, _np_sign, _or_sign, dtypes=STD)
_unary("sgn", _sign_b, _np_sign, _or_sign, dtypes=STD)


def _float_unary(name, body, cpu, oracle, domain="any", flops=4, tol=None, aliases=(), **kw):
    _unary(name, body, cpu, oracle, promotion="int_to_float", dtypes=NO_FP8, domain=domain, flops=flops, tol=tol,
           aliases=aliases, **kw)


@jit
def _exp_b(x, p0, p1, p2):
    return libdevice.exp(x)


@jit
def _exp2_b(x, p0, p1, p2):
    return libdevice.exp2(x)


@jit
def _expm1_b(x, p0, p1, p2):
    return libdevice.expm1(x)


@jit
def _log_b(x, p0, p1, p2):
    return libdevice.log(x)


@jit
def _log2_b(x, p0, p1, p2):
    return libdevice.log2(x)


@jit
def _log10_b(x, p0, p1, p2):
    return libdevice.log10(x)


@jit
def _log1p_b(x, p0, p1, p2):
    return libdevice.log1p(x)


@jit
def _sqrt_b(x, p0, p1, p2):
    return H.sqrt_rn(x)  # correctly rounded (tl.sqrt is an approximation for float32 on the GPU)


@jit
def _rsqrt_b(x, p0, p1, p2):
    # correctly rounded sqrt and division (PyTorch's CUDA rsqrtf is within 2 ulp of this)
    return H.div_rn(tl.full(x.shape, 1.0, x.dtype), H.sqrt_rn(x))


@jit
def _rsqrt_a(x, p0, p1, p2):
    # ALT_RSQRT (float32 compute): libdevice's rsqrtf, which without flush-to-zero is one rsqrt.approx.f32 (MUFU.RSQ
    # with a subnormal rescale): the function ATen's CUDA rsqrt kernel calls (::rsqrt -> rsqrtf), 2 ulp (CUDA C
    # Programming Guide, "Single-Precision Floating-Point Functions"; float32's tolerance allows ~10), IEEE special
    # values: rsqrt(+-0) = +-inf, rsqrt(+inf) = +0, negative and NaN -> NaN. The default body divides correctly
    # rounded by a correctly rounded sqrt (49 SASS instructions per element on sm_90, branches and calls; this: 7).
    return libdevice.rsqrt(x)


@jit
def _recip_b(x, p0, p1, p2):
    return H.div_rn(tl.full(x.shape, 1.0, x.dtype), x)


@jit
def _sin_b(x, p0, p1, p2):
    return libdevice.sin(x)


@jit
def _cos_b(x, p0, p1, p2):
    return libdevice.cos(x)


@jit
def _tan_b(x, p0, p1, p2):
    return libdevice.tan(x)


@jit
def _asin_b(x, p0, p1, p2):
    return libdevice.asin(x)


@jit
def _acos_b(x, p0, p1, p2):
    return libdevice.acos(x)


@jit
def _atan_b(x, p0, p1, p2):
    return libdevice.atan(x)


@jit
def _sinh_b(x, p0, p1, p2):
    return libdevice.sinh(x)


# Fast bodies for float16/bfloat16 results (pointwise.launch_pointwise's ``fast``; the accuracy argument is
# ops/activation.py's "fast float32 pieces"): branch-free, relative error below 2**-20 (2**-17 where exp2's
# argument is large), against libdevice's 50-75 SASS instructions per element with branches (asinh, atan, sinh
# ran at ~0.6x PyTorch eager on the H200 in bfloat16 before the conversion fixes).
@jit
def _sinh_f(x, p0, p1, p2):
    # |x| < 0.5: odd Taylor polynomial to x**9 (truncation ~2e-11 relative); beyond: t - 1/(4t), t = e^|x| / 2
    # (no overflow before sinh itself overflows, at |x| = 89.4)
    a = tl.abs(x)
    w = x * x
    p = w * (1.0 / 362880.0) + 1.0 / 5040.0
    p = p * w + 1.0 / 120.0
    p = p * w + 1.0 / 6.0
    t = tl.exp2(a * 1.4426950408889634 - 1.0)
    big = libdevice.copysign(t - 0.25 * _rcp_f(t), x)
    return tl.where(a < 0.5, x + (x * w) * p, big)


@jit
def _cosh_a(x, p0, p1, p2):
    # ALT_COSH (16-bit results): t + 1/(4t), t = e^|x| / 2 = 2**(|x| log2(e) - 1) (one ex2.approx, one rcp.approx):
    # no overflow before cosh itself overflows (t = inf from |x| = 89.4, as cosh in float32), no cancellation (a sum
    # of positives); relative error below 2**-20 + |x| 2**-24 (the rounded exp2 argument), 2**-17 at the float32
    # overflow threshold (the accuracy argument of the fast bodies above). cosh(+-0) = 1 exactly (t = 0.5),
    # +-inf -> +inf, NaN -> NaN. libdevice's coshf, the default: 25 SASS instructions per element on sm_90
    # (argument reduction with FRND, two exps' worth of fix-ups); this: 8.6.
    t = _ex2_f(tl.abs(x) * 1.4426950408889634 - 1.0)
    return t + 0.25 * _rcp_f(t)


@jit
def _atan_f(x, p0, p1, p2):
    # atan(z), z = min(|x|, 1 / |x|) in [0, 1], as z P(z**2) with P of degree 7 fitted for relative error (1e-7);
    # pi/2 - atan(1 / |x|) above 1; the sign of x (atan(-0) = -0)
    a = tl.abs(x)
    inv = a > 1.0
    z = tl.where(inv, _rcp_f(a), a)
    w = z * z
    p = H.atan_poly(w)
    r = z * p
    return libdevice.copysign(tl.where(inv, 1.5707963267948966 - r, r), x)


@jit
def _asinh_f(x, p0, p1, p2):
    # |x| < 0.5: |x| P(x**2) (asinh_poly); beyond: ln(|x| + sqrt(x**2 + 1)) through log2 (argument >= 1.6, so the
    # result >= 0.48 keeps the log's absolute error relative), and ln(2|x|) = ln 2 + ln|x| past 2**62, where x**2
    # would overflow
    a = tl.abs(x)
    w = a * a
    p = H.asinh_poly(w)
    huge = a > 4.611686018427388e18
    y = tl.where(huge, a, a + tl.sqrt(w + 1.0))
    big = (_lg2_f(y) + tl.where(huge, 1.0, 0.0)) * 0.6931471805599453
    return libdevice.copysign(tl.where(a < 0.5, a * p, big), x)


@jit
def _cosh_b(x, p0, p1, p2):
    return libdevice.cosh(x)


@jit
def _tanh_b(x, p0, p1, p2):
    return libdevice.tanh(x)


@jit
def _asinh_b(x, p0, p1, p2):
    return libdevice.asinh(x)


@jit
def _acosh_b(x, p0, p1, p2):
    return libdevice.acosh(x)


@jit
def _atanh_b(x, p0, p1, p2):
    return libdevice.atanh(x)


@jit
def _erf_b(x, p0, p1, p2):
    return libdevice.erf(x)


@jit
def _erfc_b(x, p0, p1, p2):
    return libdevice.erfc(x)


@jit
def _erfinv_b(x, p0, p1, p2):
    return libdevice.erfinv(x)


_erf_np = np.frompyfunc(math.erf, 1, 1)
_erfc_np = np.frompyfunc(math.erfc, 1, 1)


def _np_erf(x):
    return _erf_np(x.astype(np.float64)).astype(np.float64).astype(x.dtype)


def _np_erfc(x):
    return _erfc_np(x.astype(np.float64)).astype(np.float64).astype(x.dtype)


def _np_erfinv(x):
    return H._erfinv64(x).astype(x.dtype)


def _or_erf(x):
    # Oracle: Maclaurin series for |x| < 2.5, Laplace continued fraction of erfc beyond (A&S 7.1.5, 7.1.14).
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    small = np.abs(x) < 2.5
    xs = x[small]
    term = xs.copy()
    s = xs.copy()
    for n in range(1, 80):
        term = term * (-xs * xs) / n
        s = s + term / (2 * n + 1)
    out[small] = 2.0 / math.sqrt(math.pi) * s
    out[~small] = np.sign(x[~small]) * (1.0 - _or_erfc_cf(np.abs(x[~small])))
    out[np.isnan(x)] = np.nan
    return out


def _or_erfc_cf(z):
    # erfc(z) = exp(-z^2)/sqrt(pi) * 1/(z + 1/2/(z + 1/(z + 3/2/(z + ...)))) for z >= 2.5, evaluated bottom-up
    f = z.copy()
    for k in range(60, 0, -1):
        f = z + (k / 2.0) / f
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(np.isinf(z), 0.0, np.exp(-z * z) / math.sqrt(math.pi) / f)


def _or_erfc(x):
    x = np.asarray(x, dtype=np.float64)
    big = x >= 2.5
    out = np.array(1.0 - _or_erf(x), dtype=np.float64)
    out[big] = _or_erfc_cf(x[big])
    return out


def _or_erfinv(y):
    # Oracle: bisection on the oracle's erf (independent of the Newton iteration the cpu implementation uses).
    y = np.asarray(y, dtype=np.float64)
    lo = np.full(y.shape, -6.0)
    hi = np.full(y.shape, 6.0)
    for _ in range(60):
        mid = (lo + hi) / 2
        up = _or_erf(mid) < y
        lo = np.where(up, mid, lo)
        hi = np.where(up, hi, mid)
    r = (lo + hi) / 2
    r = np.where(y == 1, np.inf, np.where(y == -1, -np.inf, r))
    return np.where((np.abs(y) > 1) | np.isnan(y), np.nan, r)


def _or_f(f):
    def o(x):
        with np.errstate(all="ignore"):
            return f(np.asarray(x, dtype=np.float64))
    return o


_float_unary("exp", _exp_b, np.exp, _or_f(lambda x: np.power(np.e, x)), domain="small")
_float_unary("exp2", _exp2_b, np.exp2, _or_f(lambda x: np.power(2.0, x)), domain="small")
_float_unary("expm1", _expm1_b, np.expm1, _or_f(lambda x: np.where(np.abs(x) < 1e-5, x + x * x / 2 + x ** 3 / 6,
                                                                    np.exp(x) - 1)), domain="small")
_float_unary("log", _log_b, np.log, _or_f(lambda x: np.log2(x) * np.log(2.0)), domain="positive")
_float_unary("log2", _log2_b, np.log2, _or_f(lambda x: np.log(x) / np.log(2.0)), domain="positive")
_float_unary("log10", _log10_b, np.log10, _or_f(lambda x: np.log(x) / np.log(10.0)), domain="positive")
_float_unary("log1p", _log1p_b, np.log1p,
             _or_f(lambda x: np.where(np.abs(x) < 1e-4, x - x * x / 2 + x ** 3 / 3, np.log(1 + x))), domain="gt-1")
_float_unary("sqrt", _sqrt_b, np.sqrt, _or_f(lambda x: np.power(x, 0.5)), domain="positive")
_float_unary("rsqrt", _rsqrt_b, lambda x: 1 / np.sqrt(x), _or_f(lambda x: 1.0 / np.sqrt(x)), domain="positive",
             alt=Alt("ALT_RSQRT", _rsqrt_a))
_float_unary("reciprocal", _recip_b, np.reciprocal, _or_f(lambda x: 1.0 / x), domain="nonzero")
_float_unary("sin", _sin_b, np.sin, _or_f(np.sin))
_float_unary("cos", _cos_b, np.cos, _or_f(np.cos))
_float_unary("tan", _tan_b, np.tan, _or_f(lambda x: np.sin(x) / np.cos(x)),
             alt=Alt("ALT_TAN", _TR._tan_rq, narrow=True, body2=_TR._tan_p4))
_float_unary("asin", _asin_b, np.arcsin, _or_f(lambda x: np.arctan2(x, np.sqrt(1 - x * x))), domain="unit",
             aliases=("arcsin",))
_float_unary("acos", _acos_b, np.arccos, _or_f(lambda x: np.arctan2(np.sqrt(1 - x * x), x)), domain="unit",
             aliases=("arccos",))
_float_unary("atan", _atan_b, np.arctan, _or_f(lambda x: np.arctan2(x, 1.0)), aliases=("arctan",), fast=_atan_f)
# (the oracles of sinh and asinh avoid the cancellation of e^x - e^-x and of log(1 + tiny) near 0)
_float_unary("sinh", _sinh_b, np.sinh, _or_f(lambda x: np.where(np.abs(x) < 1e-3, x + x ** 3 / 6 + x ** 5 / 120,
                                                                 (np.exp(x) - np.exp(-x)) / 2)), domain="small",
             fast=_sinh_f)
_float_unary("cosh", _cosh_b, np.cosh, _or_f(lambda x: (np.exp(x) + np.exp(-x)) / 2), domain="small",
             alt=Alt("ALT_COSH", _cosh_a, narrow=True))
_float_unary("tanh", _tanh_b, np.tanh, _or_f(np.tanh), namespaces=("torch", "functional"))
_float_unary("asinh", _asinh_b, np.arcsinh,
             _or_f(lambda x: np.where(np.isinf(x), x,
                                      np.sign(x) * np.log1p(np.abs(x) + x * x / (1 + np.sqrt(x * x + 1))))),
             aliases=("arcsinh",), fast=_asinh_f)
_float_unary("acosh", _acosh_b, np.arccosh, _or_f(lambda x: np.where(x < 1, np.nan, np.log(x + np.sqrt(x * x - 1)))),
             domain="ge1",
             aliases=("arccosh",))
_float_unary("atanh", _atanh_b, np.arctanh, _or_f(lambda x: 0.5 * np.log((1 + x) / (1 - x))), domain="unit",
             aliases=("arctanh",))
_float_unary("erf", _erf_b, _np_erf, _or_erf)
_float_unary("erfc", _erfc_b, _np_erfc, _or_erfc)
_float_unary("erfinv", _erfinv_b, _np_erfinv, _or_erfinv, domain="unit")


@jit
def _square_b(x, p0, p1, p2):
    return x * x


_unary("square", _square_b, np.square, lambda x: np.asarray(x) * np.asarray(x), promotion="bool_to_long",
       dtypes=STD, domain="small")


@jit
def _floor_b(x, p0, p1, p2):
    if x.dtype.is_floating():
        r = tl.floor(x)
    else:
        r = x
    return r


@jit
def _ceil_b(x, p0, p1, p2):
    if x.dtype.is_floating():
        r = tl.ceil(x)
    else:
        r = x
    return r


@jit
def _trunc_b(x, p0, p1, p2):
    if x.dtype.is_floating():
        r = libdevice.trunc(x)
    else:
        r = x
    return r


@jit
def _round_b(x, p0, p1, p2):
    if x.dtype.is_floating():
        r = libdevice.rint(x)
    else:
        r = x
    return r


@jit
def _round_dec_b(x, p0, p1, p2):
    # ATen's round with decimals: p0 = 10**|decimals|; p1 = 1 when decimals > 0 (scale up, round, scale down)
    up = H.div_rn(libdevice.rint(x * p0), p0)
    down = libdevice.rint(H.div_rn(x, p0)) * p0
    return tl.where(p1 != 0, up, down)


def _np_round(x, decimals=0):
    if x.dtype.kind != "f":
        return x.copy()
    if decimals == 0:
        return np.rint(x)
    ten = x.dtype.type(10.0 ** abs(decimals))
    return np.rint(x * ten) / ten if decimals > 0 else np.rint(x / ten) * ten


def _or_round(x, decimals=0):
    x = np.asarray(x)
    if x.dtype.kind != "f":
        return x
    # Oracle: half-to-even by floor and parity, independent of np.rint.
    def rne(v):
        f = np.floor(v)
        d = v - f
        odd = np.mod(f, 2) != 0
        return np.where(d > 0.5, f + 1, np.where(d < 0.5, f, np.where(odd, f + 1, f)))
    with np.errstate(all="ignore"):
        if decimals == 0:
            r = rne(x)
        else:
            ten = 10.0 ** abs(decimals)
            r = rne(x * ten) / ten if decimals > 0 else rne(x / ten) * ten
        return np.where(np.isfinite(x), r, x)


def _round_prepare(a, prom):
    d = a["decimals"]
    return {"decimals": d, "ten": 10.0 ** abs(d), "up": 1 if d > 0 else 0}


def _round_triton(out, inputs, prom, prm):
    if prm["decimals"] == 0:
        launch_pointwise(_round_b, out, inputs, prom.compute)
    else:
        launch_pointwise(_round_dec_b, out, inputs, prom.compute, [prm["ten"], prm["up"]])


_unary("floor", _floor_b, lambda x: np.floor(x) if x.dtype.kind == "f" else x.copy(),
       lambda x: np.floor(x) if np.asarray(x).dtype.kind == "f" else x, dtypes=NUM | BARE_U, domain="wide")
_unary("ceil", _ceil_b, lambda x: np.ceil(x) if x.dtype.kind == "f" else x.copy(),
       lambda x: -np.floor(-np.asarray(x)) if np.asarray(x).dtype.kind == "f" else x, dtypes=NUM | BARE_U,
       domain="wide")
_unary("trunc", _trunc_b, lambda x: np.trunc(x) if x.dtype.kind == "f" else x.copy(),
       lambda x: np.sign(x) * np.floor(np.abs(x)) if np.asarray(x).dtype.kind == "f" else x, dtypes=NUM | BARE_U,
       domain="wide", aliases=("fix",))

declare("round", "round(Tensor input, *, int decimals=0, Tensor? out=None)", family=_FAM, cpu=lambda x, decimals=0,
        ten=1.0, up=0: _np_round(x, decimals), oracle=lambda x, decimals=0, ten=1.0, up=0: _or_round(x, decimals),
        triton=_round_triton, promotion="default", domain="wide", inplace=True, prepare=_round_prepare,
        out_dtype="same",
        # decimals != 0 is implemented for floating types only (PyTorch: "round_cpu" not implemented for 'Long')
        dtypes=lambda a: NUM | BARE_U if a.get("decimals", 0) == 0 else FLOATS,
        parity_superset={"dtypes": INTS | BARE_U, "reason": "PyTorch 2.13 rounds small integer tensors (a copy) but "
                         "raises '\"round_vml_cpu\" not implemented' for larger ones; nbxtensor always copies"},
        errors=[(lambda nbx: (nbx.tensor([15]),), {"decimals": -1}, NotImplementedError, "not implemented for 'Long'")],
        param_cases=[{"decimals": 0}, {"decimals": 2}, {"decimals": -1}])


@jit
def _frac_b(x, p0, p1, p2):
    return x - libdevice.trunc(x)


_unary("frac", _frac_b, lambda x: x - np.trunc(x), lambda x: np.fmod(x, 1.0), dtypes=FLOATS, domain="wide")


# --- predicates -------------------------------------------------------------------------------------------
def _pred(name, body, cpu, oracle, dtypes=NO_FP8):
    no_out = name in ("isnan", "isinf", "isfinite")  # PyTorch has no out= for these three
    declare(name, f"{name}(Tensor input)" if no_out else f"{name}(Tensor input, *, Tensor? out=None)", family=_FAM,
            body=body, cpu=cpu, oracle=oracle, promotion="always_bool",
            dtypes=dtypes, domain="special", inplace=False, out_dtype=None if no_out else "bool")


@jit
def _isnan_b(x, p0, p1, p2):
    return x != x


@jit
def _isinf_b(x, p0, p1, p2):
    if x.dtype.is_floating():
        r = (x == float("inf")) | (x == float("-inf"))
    else:
        r = x != x
    return r


@jit
def _isfinite_b(x, p0, p1, p2):
    if x.dtype.is_floating():
        r = (x == x) & (x != float("inf")) & (x != float("-inf"))
    else:
        r = x == x
    return r


@jit
def _isposinf_b(x, p0, p1, p2):
    if x.dtype.is_floating():
        r = x == float("inf")
    else:
        r = x != x
    return r


@jit
def _isneginf_b(x, p0, p1, p2):
    if x.dtype.is_floating():
        r = x == float("-inf")
    else:
        r = x != x
    return r


@jit
def _signbit_b(x, p0, p1, p2):
    if x.dtype.is_floating():
        r = H.signbit(x)
    elif x.dtype == tl.int1 or x.dtype.is_int_unsigned():
        r = x != x
    else:
        r = x < 0
    return r


def _fl(x):
    return np.asarray(x).dtype.kind == "f"


_pred("isnan", _isnan_b, np.isnan, lambda x: np.asarray(x) != np.asarray(x), dtypes=ALL)
_pred("isinf", _isinf_b, np.isinf, lambda x: np.abs(x) == np.inf if _fl(x) else np.zeros(np.shape(x), bool),
      dtypes=ALL - {T.float8_e4m3fn})
_pred("isfinite", _isfinite_b, np.isfinite, lambda x: (np.abs(x) < np.inf) if _fl(x) else np.ones(np.shape(x), bool),
      dtypes=ALL - {T.float8_e4m3fn})
_pred("isposinf", _isposinf_b, np.isposinf,
      lambda x: (np.asarray(x) == np.inf) if _fl(x) else np.zeros(np.shape(x), bool))
_pred("isneginf", _isneginf_b, np.isneginf,
      lambda x: (np.asarray(x) == -np.inf) if _fl(x) else np.zeros(np.shape(x), bool))
_pred("signbit", _signbit_b, np.signbit,
      lambda x: np.copysign(1.0, x) < 0 if _fl(x) else (np.asarray(x) < 0) if np.asarray(x).dtype.kind == "i"
      else np.zeros(np.shape(x), bool))


@jit
def _nan_to_num_b(x, p0, p1, p2):
    if x.dtype.is_floating():
        r = tl.where(x != x, p0, tl.where(x == float("inf"), p1, tl.where(x == float("-inf"), p2, x)))
    else:
        r = x
    return r


def _nan_to_num_prepare(a, prom):
    d = prom.common
    if d.kind == T.KIND_FLOAT:
        import ml_dtypes
        fi = np.finfo(d.numpy) if d.numpy.kind == "f" else ml_dtypes.finfo(d.numpy)
        big = float(fi.max)
    else:
        big = 0.0
    nan = 0.0 if a["nan"] is None else a["nan"]
    pos = big if a["posinf"] is None else a["posinf"]
    neg = -big if a["neginf"] is None else a["neginf"]
    return {"nan": nan, "posinf": pos, "neginf": neg}


def _np_nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0):
    if x.dtype.kind != "f":
        return x.copy()
    return np.where(np.isnan(x), x.dtype.type(nan), np.where(x == np.inf, x.dtype.type(posinf),
                                                             np.where(x == -np.inf, x.dtype.type(neginf), x)))


def _or_nan_to_num(x, nan=0.0, posinf=0.0, neginf=0.0):
    x = np.asarray(x)
    if x.dtype.kind != "f":
        return x
    out = x.copy()
    out[x != x] = nan
    out[x == np.inf] = posinf
    out[x == -np.inf] = neginf
    return out


declare("nan_to_num", "nan_to_num(Tensor input, float? nan=0.0, float? posinf=None, float? neginf=None, *, "
        "Tensor? out=None)", family=_FAM, body=_nan_to_num_b, params=("nan", "posinf", "neginf"),
        cpu=_np_nan_to_num, oracle=_or_nan_to_num, promotion="default", dtypes=NO_FP8, domain="special",
        inplace=True, prepare=_nan_to_num_prepare, out_dtype="input", param_cases=[{}, {"nan": 1.5, "posinf": 7.0, "neginf": -3.0}])


@jit
def _logical_not_b(x, p0, p1, p2):
    return x == 0


_unary("logical_not", _logical_not_b, lambda x: x == 0, lambda x: np.logical_not(x), promotion="always_bool",
       dtypes=STD, domain="special")


@jit
def _bitwise_not_b(x, p0, p1, p2):
    if x.dtype == tl.int1:
        r = x == 0
    elif x.dtype.is_int_unsigned():
        r = tl.zeros_like(x) - x - 1  # == ~x modulo 2**bits (the interpreter's ~ builds an out-of-range -1)
    else:
        r = ~x
    return r


_unary("bitwise_not", _bitwise_not_b, np.invert, lambda x: np.invert(np.asarray(x)), dtypes=frozenset({T.bool_}) | INTS,
       dunders={"__invert__": "unary"})


# =========================================================================================================
# Binary
# =========================================================================================================
def _binary(name, body, cpu, oracle, *, other="Tensor|Scalar", input_="Tensor", promotion="default", dtypes=NO_FP8,
            dunders=None, params_sig="", params=(), domain="any", flops=1, aliases=(), errors=(), tol=None,
            inplace=True, has_out=True, **kw):
    sig = f"{name}({input_} input, {other} other{', ' + params_sig if params_sig else ''}, *, Tensor? out=None)"
    if params_sig.startswith("*"):
        sig = f"{name}({input_} input, {other} other, {params_sig}, Tensor? out=None)"
    if not has_out:   # (torch.rsub has no out= argument)
        sig = sig.replace(", *, Tensor? out=None)", ")").replace(", Tensor? out=None)", ")")
    declare(name, sig, family=_FAM, body=body, cpu=cpu, oracle=oracle, params=params, promotion=promotion,
            dtypes=dtypes, dunders=dunders or {}, domain=domain, flops=flops, aliases=aliases, errors=list(errors),
            tolerance=tol, inplace=inplace, **kw)


def _alpha_prepare(a, prom, name="add"):
    # ATen's alpha_check: a bool alpha only for bool results; a floating alpha only for floating results
    alpha = a.get("alpha", 1)
    check(not isinstance(alpha, bool) or prom.common is T.bool_, "Boolean alpha only supported for Boolean results.")
    check(prom.common.kind == T.KIND_FLOAT or not isinstance(alpha, float),
          "For integral input tensors, argument alpha must not be a floating point number.")
    check(not isinstance(alpha, complex), lambda: f"{name}: complex alpha needs complex tensors, which have no "
          "kernels here", TypeError)
    return {"alpha": alpha}


@jit
def _add_b(x, y, alpha, p1, p2):
    if x.dtype == tl.int1:
        r = x | (y & alpha)
    else:
        r = x + alpha * y
    return r


@jit
def _sub_b(x, y, alpha, p1, p2):
    return x - alpha * y


@jit
def _rsub_b(x, y, alpha, p1, p2):
    return y - alpha * x


def _np_add(x, y, alpha=1):
    if x.dtype == np.bool_:
        return x | (y & bool(alpha))
    return x + (y * x.dtype.type(alpha) if alpha != 1 else y)


def _or_add(x, y, alpha=1):
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype == np.bool_:
        return np.logical_or(x, np.logical_and(y, bool(alpha)))
    return x + alpha * y if x.dtype.kind == "f" else (x.astype(np.int64) + int(alpha) * y.astype(np.int64))


_SUB_BOOL2 = ("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
              "`logical_xor()` operator instead.")
_SUB_BOOL1 = ("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a "
              "mask, use the `~` or `logical_not()` operator instead.")


def _sub_prepare(a, prom):
    x, y = a["input"], a["other"]
    xb = isinstance(x, Tensor) and x.dtype is T.bool_ or isinstance(x, bool)
    yb = isinstance(y, Tensor) and y.dtype is T.bool_ or isinstance(y, bool)
    check(not (xb and yb), _SUB_BOOL2)
    check(not (xb or yb), _SUB_BOOL1)
    return _alpha_prepare(a, prom, "sub")


_binary("add", _add_b, _np_add, _or_add, input_="Tensor|Scalar", params_sig="*, Scalar alpha=1", params=("alpha",),
        dtypes=STD,
        prepare=_alpha_prepare, dunders={"__add__": "fwd", "__radd__": "rev", "__iadd__": "inplace"},
        param_cases=[{}, {"alpha": 2}],
        errors=[(lambda nbx: (nbx.tensor([1]), nbx.tensor([1])), {"alpha": 0.5}, RuntimeError, "alpha must not"),
                (lambda nbx: (nbx.tensor([1.]), nbx.tensor([1.])), {"alpha": True}, RuntimeError, "Boolean alpha")])
_binary("sub", _sub_b, lambda x, y, alpha=1: x - (y * x.dtype.type(alpha) if alpha != 1 else y),
        lambda x, y, alpha=1: _or_add(x, -np.asarray(y) if np.asarray(y).dtype.kind == "f" else
                                      -np.asarray(y).astype(np.int64), alpha),
        input_="Tensor|Scalar", params_sig="*, Scalar alpha=1", params=("alpha",), dtypes=STD, prepare=_sub_prepare,
        aliases=("subtract",),
        refused=frozenset({T.bool_}),
        dunders={"__sub__": "fwd", "__rsub__": "rev", "__isub__": "inplace"}, param_cases=[{}, {"alpha": 3}],
        errors=[(lambda nbx: (nbx.tensor([True]), nbx.tensor([True])), {}, RuntimeError, "two bool tensors"),
                (lambda nbx: (nbx.tensor([True]), 1), {}, RuntimeError, "with a bool tensor")])
_binary("rsub", _rsub_b, lambda x, y, alpha=1: y - (x * x.dtype.type(alpha) if alpha != 1 else x),
        lambda x, y, alpha=1: _or_add(y, -np.asarray(x) if np.asarray(x).dtype.kind == "f" else
                                      -np.asarray(x).astype(np.int64), alpha),
        params_sig="*, Scalar alpha=1", params=("alpha",), dtypes=STD, prepare=_sub_prepare, inplace=False,
        refused=frozenset({T.bool_}), has_out=False,
        method=False, param_cases=[{}, {"alpha": 2}])


@jit
def _mul_b(x, y, p0, p1, p2):
    if x.dtype == tl.int1:
        r = x & y
    else:
        r = x * y
    return r


_binary("mul", _mul_b, lambda x, y: x & y if x.dtype == np.bool_ else x * y,
        lambda x, y: np.logical_and(x, y) if np.asarray(x).dtype == np.bool_ else
        np.asarray(x) * np.asarray(y) if np.asarray(x).dtype.kind == "f" else
        np.asarray(x).astype(np.int64) * np.asarray(y).astype(np.int64),
        input_="Tensor|Scalar", dtypes=ALL, aliases=("multiply",),
        dunders={"__mul__": "fwd", "__rmul__": "rev", "__imul__": "inplace"})


# --- division -------------------------------------------------------------------------------------------------
@jit
def _div_true_b(x, y, p0, p1, p2):
    return H.div_rn(x, y)  # IEEE division (Triton's `/` on float32 is a 2-ulp approximation on the GPU)


@jit
def _div_trunc_b(x, y, p0, p1, p2):
    if x.dtype.is_floating():
        r = libdevice.trunc(H.div_rn(x, y))
    else:
        ys = tl.where(y == 0, 1, y)
        r = tl.where(y == 0, (x ^ x) - 1, x // ys)  # C division truncates; a zero divisor gives -1 (all ones)
    return r


@jit
def _div_floor_b(x, y, p0, p1, p2):
    if x.dtype.is_floating():
        r = H.floordiv_float(x, y)
    elif x.dtype.is_int_unsigned():
        ys = tl.where(y == 0, 1, y)
        r = tl.where(y == 0, (x ^ x) - 1, x // ys)  # all ones: -1 as the unsigned dtype
    else:
        r = H.floordiv_int(x, y)
    return r


@jit
def _div_floor16_b(x, y, p0, p1, p2):
    # operands and result of one 16-bit float dtype, computed in float32 (see H.floordiv_float16)
    return H.floordiv_float16(x, y)


def _all_16bit(out, inputs) -> bool:
    """Whether the output is float16/bfloat16 and every operand holds values of that dtype: tensors of it, or
    scalars (converted to the float32 compute dtype) that it represents exactly."""
    d = out.dtype
    if d not in (T.float16, T.bfloat16):
        return False
    for x in inputs:
        if isinstance(x, Tensor):
            if x.dtype != d:
                return False
        else:
            v = np.asarray(x, dtype=np.float32).reshape(1)
            back = cast_array(cast_array(v, T.float32, d), d, T.float32)
            if not (back[0] == v[0] or v[0] != v[0]):
                return False
    return True


def _floor_body(out, inputs):
    """The floor-division body for a launch: :func:`_div_floor16_b` where the output and every operand are one
    float16/bfloat16 dtype (its exactness argument needs both), else :func:`_div_floor_b`."""
    return _div_floor16_b if _all_16bit(out, inputs) else _div_floor_b


def _floor_divide_triton(out, inputs, prom, prm):
    launch_pointwise(_floor_body(out, inputs), out, inputs, prom.compute)


def _np_div_floor(x, y):
    if x.dtype.kind in "iu":
        _np_zero_div_check(y)
        return np.floor_divide(x, y)
    # ATen's div_floor_floating
    mod = np.fmod(x, y)
    div = (x - mod) / y
    div = np.where((mod != 0) & ((y < 0) != (mod < 0)), div - 1, div)
    fl = np.floor(div)
    fl = np.where(div - fl > 0.5, fl + 1, fl)
    res = np.where(div != 0, fl, np.copysign(np.zeros_like(div), x / y))
    return np.where(y == 0, x / y, res).astype(x.dtype)


def _np_div_trunc(x, y):
    if x.dtype.kind in "iu":
        _np_zero_div_check(y)
        q = np.abs(x.astype(np.int64)) // np.abs(y.astype(np.int64)) if x.dtype != np.uint64 else x // y
        return (q * np.sign(x.astype(np.int64)) * np.sign(y.astype(np.int64))).astype(x.dtype) \
            if x.dtype != np.uint64 else q
    return np.trunc(x / y)


def _or_div_floor(x, y):
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    if x.dtype.kind in "iu":
        return np.array([a // b for a, b in zip(x.astype(object).ravel(), y.astype(object).ravel())],
                        dtype=object).reshape(x.shape).astype(x.dtype) if x.size else x.copy()
    # Python's float floor division (CPython's float_floor_div, which ATen's div_floor_floating follows), and
    # IEEE division for a zero divisor (Python raises there)
    with np.errstate(all="ignore"):
        out = [a // b if b != 0 else np.float64(a) / np.float64(b) for a, b in zip(x.ravel().tolist(),
                                                                                   y.ravel().tolist())]
    return np.array(out, dtype=np.float64).reshape(x.shape)


def _or_div_trunc(x, y):
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    if x.dtype.kind in "iu":
        return np.array([int(a / b) if abs(a) < 2 ** 52 else abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
                         for a, b in zip(x.astype(object).ravel(), y.astype(object).ravel())],
                        dtype=object).reshape(x.shape).astype(x.dtype) if x.size else x.copy()
    with np.errstate(all="ignore"):
        return np.trunc(x / y)


def _div_prepare(a, prom):
    rm = a["rounding_mode"]
    check(rm in (None, "trunc", "floor"), lambda: f"div expected rounding_mode to be one of None, 'trunc', or "
          f"'floor' but found '{rm}'")
    return {"rounding_mode": rm}


def _div_triton(out, inputs, prom, prm):
    rm = prm["rounding_mode"]
    body = _div_true_b if rm is None else _div_trunc_b if rm == "trunc" else _floor_body(out, inputs)
    launch_pointwise(body, out, inputs, prom.compute)


def _np_div(x, y, rounding_mode=None):
    if rounding_mode is None:
        return x / y
    return _np_div_trunc(x, y) if rounding_mode == "trunc" else _np_div_floor(x, y)


def _or_div(x, y, rounding_mode=None):
    if rounding_mode is None:
        with np.errstate(all="ignore"):
            return np.asarray(x, dtype=np.float64) / np.asarray(y, dtype=np.float64)
    return _or_div_trunc(x, y) if rounding_mode == "trunc" else _or_div_floor(x, y)


declare("div", "div(Tensor|Scalar input, Tensor|Scalar other, *, str? rounding_mode=None, Tensor? out=None)", family=_FAM,
        cpu=_np_div, oracle=_or_div, triton=_div_triton, domain="divisor", prepare=_div_prepare,
        # true division promotes integers to float; with a rounding mode integers stay integers
        promotion=lambda a: "int_to_float" if a.get("rounding_mode") is None else "default",
        dtypes=lambda a: NO_FP8 if a.get("rounding_mode") is None else NUM, aliases=("divide", "true_divide"),
        inplace=True,
        dunders={"__truediv__": "fwd", "__rtruediv__": "rev", "__itruediv__": "inplace"},
        param_cases=[{}, {"rounding_mode": "trunc"}, {"rounding_mode": "floor"}],
        errors=[(lambda nbx: (nbx.tensor([1.]), 2), {"rounding_mode": "x"}, RuntimeError, "rounding_mode"),
                (lambda nbx: (nbx.tensor([5]), nbx.tensor([0])), {"rounding_mode": "floor"}, RuntimeError,
                 "ZeroDivisionError")], cpu_only_errors=("ZeroDivisionError",))

_binary("floor_divide", None, _np_div_floor, _or_div_floor, input_="Tensor|Scalar", dtypes=NUM,
        domain="divisor", triton=_floor_divide_triton,
        dunders={"__floordiv__": "fwd", "__rfloordiv__": "rev", "__ifloordiv__": "inplace"},
        errors=[(lambda nbx: (nbx.tensor([5]), nbx.tensor([0])), {}, RuntimeError, "ZeroDivisionError")],
        cpu_only_errors=("ZeroDivisionError",))


# remainder's body is ATen's formula around libdevice's fmodf (branchy, inlined per element: sm_90 SASS of the bf16
# kernel at BLOCK 4096 / 8 warps is 82 instructions and 13 branch/convergence instructions per element, 60
# registers). Tried and dropped (commit 77305ea, removed after the session-4 H200 sweep): a branch-free float32
# body bit-identical to this one (rcp.approx quotient, integer by the 1.5 * 2**23 trick, two fmas, an exact
# per-element certificate; 12 instructions per element, 32 registers) with this body as the fallback per element
# (1) or per block (2). benchmarks/sweep_pointwise.py on bf16 remainder of 256 MiB tensors: at BLOCK 4096 / 8 warps
# this body 0.4785 ms, fallback per element 0.5272 ms, per block 0.6527 ms; at BLOCK 1024 / 4 warps (the sm90
# large-tensor rule) this body 0.4361 ms, per block 0.4492 ms; on float32 the best alternative gained 0.4 %
# (noise). Fewer static instructions per element did not make it faster (why was not profiled); re-measure before
# trying again.
@jit
def _remainder_b(x, y, p0, p1, p2):
    if x.dtype.is_floating():
        r = H.remainder_float(x, y)
    elif x.dtype.is_int_unsigned():
        ys = tl.where(y == 0, 1, y)
        r = tl.where(y == 0, x, x % ys)
    else:
        r = H.remainder_int(x, y)
    return r


@jit
def _rcp_rem(d):
    # 1 / d for _remainder_a: rcp.approx.ftz.f32 (1 ulp; subnormal operands and results flush, which its
    # certificate sends to the default body). The interpreter pushes the exact reciprocal 2**-22 up or down (by two
    # significand bits of d), past rcp.approx's error, so that the tests meet both corrections of the quotient.
    if _HW_CVT:
        r = tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [d], dtype=tl.float32, is_pure=True,
                                      pack=1)
    else:
        b = d.to(tl.int32, bitcast=True)
        r = (1.0 / d) * tl.where((((b >> 13) ^ (b >> 16)) & 1) != 0, 1.0 + 2.384185791015625e-07,
                                 1.0 - 2.384185791015625e-07)
    return r


# fmod(x, y) for _remainder_a, compiled tier: the fast path and, under a per-element branch, the exact slow path
# (musl's fmodf on the bits: normalise, one bit per step, renormalise). PTX labels are local to the { } block.
_FMOD_PTX = tl.constexpr("""{
.reg .pred p, pn;
.reg .f32 ax, ay, q, r;
.reg .b32 ux, uy, t, t2, ex, ey, sx, mx, my, i, lz;
abs.f32 ax, $1;
abs.f32 ay, $2;
rcp.approx.ftz.f32 q, ay;
mul.rn.f32 q, ax, q;
fma.rn.f32 q, q, 0f35000000, q;
cvt.rzi.f32.f32 q, q;
neg.f32 q, q;
fma.rn.f32 r, q, ay, ax;
setp.ge.f32 p, r, 0f00000000;
setp.lt.and.f32 p, r, ay, p;
copysign.f32 $0, $1, r;
@p bra DONE;
mov.b32 ux, $1;
mov.b32 uy, $2;
shl.b32 t, uy, 1;
shl.b32 t2, ux, 1;
and.b32 sx, ux, 0x80000000;
setp.eq.u32 pn, t, 0;
setp.gt.or.u32 pn, t, 0xff000000, pn;
setp.ge.or.u32 pn, t2, 0xff000000, pn;
@pn bra NAN;
setp.lt.u32 pn, t2, t;
@pn bra SMALL;
setp.eq.u32 pn, t2, t;
@pn bra ZERO;
bfe.u32 ex, ux, 23, 8;
bfe.u32 ey, uy, 23, 8;
and.b32 mx, ux, 0x007fffff;
and.b32 my, uy, 0x007fffff;
setp.eq.u32 pn, ex, 0;
@!pn or.b32 mx, mx, 0x00800000;
@pn clz.b32 lz, mx;
@pn sub.s32 lz, lz, 8;
@pn shl.b32 mx, mx, lz;
@pn sub.s32 ex, 1, lz;
setp.eq.u32 pn, ey, 0;
@!pn or.b32 my, my, 0x00800000;
@pn clz.b32 lz, my;
@pn sub.s32 lz, lz, 8;
@pn shl.b32 my, my, lz;
@pn sub.s32 ey, 1, lz;
LOOP:
setp.le.s32 pn, ex, ey;
@pn bra TAIL;
sub.s32 i, mx, my;
setp.ge.s32 pn, i, 0;
@pn mov.b32 mx, i;
shl.b32 mx, mx, 1;
sub.s32 ex, ex, 1;
bra LOOP;
TAIL:
sub.s32 i, mx, my;
setp.ge.s32 pn, i, 0;
@pn mov.b32 mx, i;
setp.eq.u32 pn, mx, 0;
@pn bra ZERO;
clz.b32 lz, mx;
sub.s32 lz, lz, 8;
shl.b32 mx, mx, lz;
sub.s32 ex, ex, lz;
setp.gt.s32 pn, ex, 0;
@pn sub.s32 mx, mx, 0x00800000;
@pn shl.b32 t, ex, 23;
@pn or.b32 mx, mx, t;
@!pn sub.s32 t, 1, ex;
@!pn shr.u32 mx, mx, t;
or.b32 mx, mx, sx;
mov.b32 $0, mx;
bra DONE;
ZERO:
mov.b32 $0, sx;
bra DONE;
SMALL:
mov.b32 $0, ux;
bra DONE;
NAN:
mov.b32 $0, 0x7fffffff;
DONE:
}""") if HAVE_TRITON else None


@jit
def _fmod_a(x, y):
    # fmod(x, y) for _remainder_a (float32): q = trunc(|x| rcp.approx(|y|) (1 + 2**-21)), r = fma(-q, |y|, |x|),
    # and r with x's sign when 0 <= r < |y| (the certificate), else the exact slow path. The certificate is sound for
    # any q: r is |x| - q|y| rounded once, so q one too large gives r < 0 and one too small r >= |y| (rounding is
    # monotone, and a nonzero multiple of the operands' unit never rounds to zero); with q the true truncated
    # quotient r is fmod's result exactly (representable, one rounding). It passes unless |x / y| is near or above
    # 2**20 (rcp.approx's 1 ulp and the product's rounding, 2**-22.4, against the bias 2**-21: a quotient that is an
    # integer N < 2**20 truncates to N, any other to its integer part while 2**-20.4 relative from the next integer,
    # so every quotient below 2**12 of 16-bit operands (8 or 11 significant bits: a fraction of at least 2**-11
    # relative of its integer part)), and fails for the special operands (y = 0, +-inf or NaN, x = +-inf or NaN,
    # subnormal y: rcp.approx.ftz flushes), which the slow path handles as fmod does. The interpreter computes the
    # same fast path, with the reciprocal pushed 2**-22 up or down as _rcp_rem does, and libdevice's fmod (NumPy's)
    # where the certificate fails.
    if _HW_CVT:
        m = tl.inline_asm_elementwise(_FMOD_PTX, "=f,f,f", [x, y], dtype=tl.float32, is_pure=True, pack=1)
    else:
        ax = tl.abs(x)
        ay = tl.abs(y)
        rc = _rcp_rem(ay)
        rc = tl.where(tl.abs(rc) < 1.1754943508222875e-38, rc * 0.0, rc)  # .ftz: a subnormal result flushes
        rc = tl.where(ay < 1.1754943508222875e-38, float("inf"), rc)      # .ftz: a subnormal operand flushes
        q = ax * rc
        q = libdevice.trunc(libdevice.fma(q, 4.76837158203125e-07, q))
        r = libdevice.fma(q * -1.0, ay, ax)
        ok = (r >= 0.0) & (r < ay)
        m = tl.where(ok, libdevice.copysign(r, x), libdevice.fmod(x, y))
    return m


@jit
def _remainder_a(x, y, p0, p1, p2):
    # ALT_REMAINDER (float32 compute: float32, float16 and bfloat16 results, bit for bit the default body's): ATen's
    # formula around _fmod_a (a fast fma path with an exact certificate, and a per-element branch to an exact fmod on
    # the bits where it fails: large quotients and special operands), the step "+ y where fmod's sign differs from
    # y's" rounded once as ATen. Replaces session 6's first ALT_REMAINDER (the same fma path for quotients below
    # 2**21 with the default body for any block holding a larger one, a block-uniform branch at one warp per
    # program: 63.3 % of 4.8 TB/s on bf16 32768x8192, against the default's 77 %).
    if x.dtype.is_floating():
        m = _fmod_a(x, y)
        r = tl.where((m != 0) & ((y < 0) != (m < 0)), m + y, m)
    else:
        r = _remainder_b(x, y, p0, p1, p2)
    return r


@jit
def _fmod_b(x, y, p0, p1, p2):
    if x.dtype.is_floating():
        r = libdevice.fmod(x, y)
    else:
        ys = tl.where(y == 0, 1, y)
        r = tl.where(y == 0, x, x % ys)  # C remainder: the sign of the dividend, as fmod
    return r


def _np_remainder(x, y):
    if x.dtype.kind in "iu":
        _np_zero_div_check(y)
        return np.remainder(x, y)
    mod = np.fmod(x, y)
    return np.where((mod != 0) & ((y < 0) != (mod < 0)), mod + y, mod).astype(x.dtype)


def _np_fmod(x, y):
    if x.dtype.kind in "iu":
        _np_zero_div_check(y)
    return np.fmod(x, y)


def _or_remainder(x, y):
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    if x.dtype.kind in "iu":
        return np.array([a % b for a, b in zip(x.astype(object).ravel(), y.astype(object).ravel())],
                        dtype=object).reshape(x.shape).astype(x.dtype) if x.size else x.copy()
    with np.errstate(all="ignore"):
        r = x - np.floor(x / y) * y
        m = np.fmod(x, y)
        alt = np.where((m != 0) & ((y < 0) != (m < 0)), m + y, m)
        # x - floor(x/y)*y loses digits for large quotients; use it only as a check of the sign rule
        return np.where(np.isfinite(r), alt, alt)


def _or_fmod(x, y):
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    if x.dtype.kind in "iu":
        return np.array([math.fmod(a, b) if abs(a) < 2 ** 52 else (abs(a) % abs(b)) * (1 if a >= 0 else -1)
                         for a, b in zip(x.astype(object).ravel(), y.astype(object).ravel())],
                        dtype=object).reshape(x.shape).astype(x.dtype) if x.size else x.copy()
    with np.errstate(all="ignore"):
        return np.array([math.fmod(a, b) if b != 0 and math.isfinite(a) and b == b else float("nan")
                         for a, b in zip(x.ravel().tolist(), y.ravel().tolist())]).reshape(x.shape) \
            if x.size else x.copy()


_SUBNORMAL_DIVISOR = {
    "mask": lambda x, y: (y != 0) & (np.abs(y) < np.finfo(np.float32).tiny),
    "reason": "PyTorch's CPU fmod/remainder kernels return NaN for subnormal divisors; the exact result is finite"}
_binary("remainder", _remainder_b, _np_remainder, _or_remainder, input_="Tensor|Scalar", dtypes=NUM,
        parity_exclude=_SUBNORMAL_DIVISOR, alt=Alt("ALT_REMAINDER", _remainder_a),
        domain="divisor", dunders={"__mod__": "fwd", "__rmod__": "rev", "__imod__": "inplace"},
        errors=[(lambda nbx: (nbx.tensor([5]), nbx.tensor([0])), {}, RuntimeError, "ZeroDivisionError")],
        cpu_only_errors=("ZeroDivisionError",))
_binary("fmod", _fmod_b, _np_fmod, _or_fmod, dtypes=NUM, domain="divisor", parity_exclude=_SUBNORMAL_DIVISOR,
        errors=[(lambda nbx: (nbx.tensor([5]), nbx.tensor([0])), {}, RuntimeError, "ZeroDivisionError")],
        cpu_only_errors=("ZeroDivisionError",))


# --- pow ----------------------------------------------------------------------------------------------------
@jit
def _ipow(b, e):
    # Integer power by squaring over the exponent's bits; negative exponents as ATen's powi: 1 ** e = 1,
    # (-1) ** e = +-1, anything else 0.
    BITS: tl.constexpr = b.dtype.primitive_bitwidth
    r = tl.full(b.shape, 1, b.dtype)
    base = b
    ee = e
    for _ in tl.static_range(BITS):
        r = tl.where((ee & 1) != 0, r * base, r)
        base = base * base
        ee = ee >> 1
    if not b.dtype.is_int_unsigned():
        neg = tl.where(b == 1, 1, tl.where(b == -1, tl.where((e & 1) != 0, -1, 1), 0)).to(b.dtype)
        r = tl.where(e < 0, neg, r)
    return r


@jit
def _pow_b(x, y, p0, p1, p2):
    if x.dtype.is_floating():
        r = libdevice.pow(x, y)
    elif x.dtype == tl.int1:
        r = x | (y == 0)
    else:
        r = _ipow(x, y)
    return r


@jit
def _pow_a(x, y, p0, p1, p2):
    # ALT_POW (16-bit results; float32 compute): 2**t, t = y log2|x|, evaluated as (2**(t/2))**2, instead of
    # libdevice's powf (double-float log and exp, 124 SASS instructions per element on sm_90 with both branches).
    # Half the logarithm: h = log2|x| / 2 = k/2 + atanh(s) / ln 2, |x| = 2**k m, m in [sqrt(1/2), sqrt(2)) from the
    # exponent bits (subnormals scaled by 2**23 first, the 23 taken off k in the integer domain), s = (m - 1) /
    # (m + 1) = (m - 1) rcp.approx(m + 1) (m - 1 exact; 1 ulp + a rounding), |s| <= 0.1716, atanh(s) / (s ln 2) a
    # degree-3 fit in s**2 (2**-26.2 relative). h's relative error is below 2**-22 (the rcp and the roundings), so
    # t = 2 y h is off by |t| 2**-22: ln 2 |t| 2**-22 relative in the result, 2**-15.4 at the end of bfloat16's range
    # (|t| = 133) and 2**-18 for |t| <= 16 (every finite non-zero float16 result), under the 2**-9 / 2**-12 of a
    # bfloat16 / float16 half-ulp (the tolerance table allows 1.6e-2 / 1e-3). 2**(t/2) is one ex2.approx.ftz
    # (2**-22 relative): t/2 >= -126 unless 2**t < 2**-252, which is 0 either way; its square (one rounding,
    # no flush) is 2**t, subnormal results included. (Session 6; the body before, log2 through the series to s**8 and
    # a non-flushing ex2: 60.25 SASS instructions per element, pow bf16 53.6 %, pow(x, 2.5) 42.7 % of 4.8 TB/s.)
    # Special values as C99 pow (PyTorch's): y == 0 or x == 1 -> 1 (NaN operands too), x == -1 and y == +-inf -> 1,
    # a negative finite x to a finite non-integer y -> NaN, an odd integer y keeps x's sign (x = -0 and -inf
    # included), 0 and inf through h = -inf / +inf (0**-y = inf, inf**-y = 0, ...), NaN otherwise propagated.
    a = tl.abs(x)
    sub = a < 1.1754943508222875e-38
    a2 = tl.where(sub, a * 8388608.0, a)
    ib = a2.to(tl.int32, bitcast=True) - tl.where(sub, 0x0B800000, 0)    # 23 << 23: the scaling undone in k
    k = (ib - 0x3F3504F3) >> 23                                           # 0x3F3504F3: sqrt(1/2)
    m = (ib - (k << 23)).to(tl.float32, bitcast=True)
    s = (m - 1.0) * _rcp_f(m + 1.0)
    z = s * s
    q = z * 0.21586792171001434 + 0.2883571982383728
    q = q * z + 0.4808994233608246
    q = q * z + 1.4426950216293335                                        # 1 / ln 2
    h = k.to(tl.float32) * 0.5 + s * q
    h = tl.where(a2 < float("inf"), h, a2)                                # +inf, NaN
    h = tl.where(a2 == 0, float("-inf"), h)
    # y == 0 or |x| == 1 (h == 0 exactly, and only there): t = 0, 2**0 = 1 (0 * inf, 0 * NaN are not NaN here);
    # x == -1 keeps the sign and NaN rules below: -1 for odd y, NaN for non-integer y and for y = NaN
    e = _ex2_f(tl.where((y == 0) | (h == 0), 0.0, y * h))
    res = e * e
    hy = 0.5 * y
    odd = tl.abs(hy - libdevice.rint(hy)) == 0.5                          # (NaN for y = +-inf: even)
    nonint = libdevice.rint(y) != y                                       # NaN y too (NaN either way)
    res = tl.where((x < 0) & (h < float("inf")) & nonint, float("nan"), res)    # h < inf: x > -inf
    return tl.where(odd, libdevice.copysign(res, x), res)


@jit
def _pow2_base(ry, y, x):
    # _pow_a2's log2 operand: x where y is not an integer (rint(y) != y, NaN y too) and x > -inf, else |x|. The two
    # tests combine in one predicate (setp.and: FSETP, FSETP.AND, FSEL), where Triton's select of an "and" becomes a
    # chain of two selects.
    if _HW_CVT:
        r = tl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .f32 t; setp.neu.f32 p, $1, $2; setp.gt.and.f32 p, $3, 0fFF800000, p; "
            "abs.f32 t, $3; selp.f32 $0, $3, t, p; }", "=f,f,f,f", [ry, y, x], dtype=tl.float32, is_pure=True, pack=1)
    else:
        r = tl.where((ry != y) & (x > float("-inf")), x, tl.abs(x))
    return r


@jit
def _pow2_half_t(hy, lg):
    # _pow_a2's t / 2 = hy lg, 0 where hy == 0 or lg == 0 (0 * inf and 0 * NaN included): one predicate (setp.or)
    if _HW_CVT:
        r = tl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .f32 t; setp.eq.f32 p, $1, 0f00000000; setp.eq.or.f32 p, $2, 0f00000000, p; "
            "mul.rn.f32 t, $1, $2; selp.f32 $0, 0f00000000, t, p; }", "=f,f,f", [hy, lg], dtype=tl.float32,
            is_pure=True, pack=1)
    else:
        r = tl.where((hy == 0) | (lg == 0), 0.0, hy * lg)
    return r


@jit
def _pow2_sign(res, x, ry, y, rh, hy):
    # _pow_a2's sign: copysign(res, x) where y is an odd integer (rint(y) == y and rint(y / 2) != y / 2), else res;
    # one predicate (setp.and)
    if _HW_CVT:
        r = tl.inline_asm_elementwise(
            "{ .reg .pred p; .reg .f32 t; setp.eq.f32 p, $3, $4; setp.neu.and.f32 p, $5, $6, p; "
            "copysign.f32 t, $2, $1; selp.f32 $0, t, $1, p; }", "=f,f,f,f,f,f,f", [res, x, ry, y, rh, hy],
            dtype=tl.float32, is_pure=True, pack=1)
    else:
        r = tl.where((ry == y) & (rh != hy), libdevice.copysign(res, x), res)
    return r


@jit
def _pow_a2(x, y, p0, p1, p2):
    # ALT_POW = 2 (16-bit results, a tensor exponent; float32 compute): FAST_MATH16 level 2's accuracy (the float32
    # result within about 2**-13 relative, so at most one 16-bit ulp from the correctly rounded value) for fewer
    # instructions than _pow_a's half-log series. 2**t, t = y log2|x|, as (2**(t/2))**2 (one ex2.approx.ftz and a
    # square: t/2 < -126 means 2**t < 2**-252, zero either way; subnormal results come from the unflushed square).
    # log2|x|: lg2.approx.f32 (MUFU.LG2, unflushed: ptxas rescales subnormals), absolute error 2**-22 in [0.5, 2] and
    # 2**-22 relative elsewhere, except for |x| in (0.875, 1.125), where an absolute error is not enough (x = 1 + u,
    # log2 x ~ u / ln 2 is small while |y| may reach |t| / |log2 x|): there log2(1 + u) = u P(u), u = |x| - 1
    # exact, P a degree-4 fit (2**-21.4 relative on [-0.125, 0.126]). Outside it |log2 x| >= 2**-2.56, so log2|x|
    # is within 2**-19.4 relative everywhere; t is then off by |t| 2**-19.4 (plus t's rounding, 2**-24 |t|) and
    # 2**t by ln 2 |t| 2**-19.4 relative, <= 2**-13.2 for |t| <= 133 (bfloat16's range: beyond it the result is
    # 0 or inf whatever the error) and <= 2**-15.2 for |t| <= 25 (float16's), plus 2**-21 from ex2 and the square.
    # Special values as C99 pow (PyTorch's; _pow_a's rules, fewer selects): y == 0 or |x| == 1 -> 1 (log2|x| is 0
    # exactly there and only there; NaN operands too); 0 and inf through log2 = -inf / +inf; a negative finite x
    # to a non-integer y (NaN y too) takes log2 of x itself, NaN; an odd integer y gives x's sign (-0, -inf too).
    ry = libdevice.rint(y)
    hy = 0.5 * y                                              # exact: y >= 2**-133 (a 16-bit exponent) or 0
    a = _pow2_base(ry, y, x)                                  # |x| for -inf: (-inf)**0.5 = inf, (-inf)**-0.5 = 0
    u = a - 1.0
    q = u * 0.2927178144454956 - 0.3654635548591614
    q = q * u + 0.4808785915374756
    q = q * u - 0.721328616142273
    q = q * u + 1.4426950216293335
    lg = tl.where(tl.abs(u) < 0.125, u * q, _M16._lg2(a))
    e = _M16._ex2z(_pow2_half_t(hy, lg))
    return _pow2_sign(e * e, x, ry, y, libdevice.rint(hy), hy)   # (y = +-inf: even)


@jit
def _rsqrt_k(d):
    # 1 / sqrt(d) for _pow_k, rsqrt.approx.ftz.f32 (one MUFU.RSQ; about 1 ulp) for operands whose flush cannot matter
    # (the caller says why): rsqrt(+0) = +inf, rsqrt(+inf) = +0, negative -> NaN
    if _HW_CVT:
        r = tl.inline_asm_elementwise("rsqrt.approx.ftz.f32 $0, $1;", "=r,r", [d], dtype=tl.float32, is_pure=True,
                                      pack=1)
    else:
        d = tl.where(tl.abs(d) < 1.1754943508222875e-38, d * 0.0, d)
        r = 1.0 / tl.sqrt(d)
    return r


@jit
def _pow_k(x, N: tl.constexpr, HALF: tl.constexpr, NEG: tl.constexpr):
    # ALT_POW with a scalar exponent y = +-(N + HALF / 2), N <= 3, and a tensor base (16-bit results; float32
    # compute): x**y = b**N sqrt(c)**HALF, c = x (x + 0 for a half-integer y: -0 -> +0), 1 / c for y < 0, b = c
    # (|c| for a half-integer y): at most four float32 roundings and rcp.approx / sqrt.approx (1 ulp each), 2**-20
    # relative, against the general body's log2 and exp2 (43.6 SASS instructions per element for pow(bf16, 2.5) on
    # sm_90; this: 12). Flush-to-zero (one MUFU instruction, no rescaling) where |y| > 1: a subnormal 1 / x
    # (|x| > 2**126) or a subnormal x under sqrt gives a result below 2**-189, zero either way, and 1 / x of a
    # subnormal x overflows either way; |y| <= 1 keeps subnormals (x**-1, x**+-0.5).
    # Special values: y = 0.5 and -0.5 as ATen's kernels for them, sqrt(x) and rsqrt(x) (PyTorch: pow(-0, 0.5) =
    # -0, pow(-inf, 0.5) = NaN, pow(-0, -0.5) = -inf, pow(-inf, -0.5) = NaN; C99's powf, the default body's:
    # +0, +inf, +inf, +0); the others C99's, as PyTorch's: integer y keeps x's sign through the products
    # (1 / -0 = -inf), half-integer y on a negative x is NaN through sqrt(c), -inf to a half-integer power +inf
    # (y > 0) or +0 (y < 0) by a select; NaN propagates.
    FTZ: tl.constexpr = N + HALF > 1
    if N == 0:
        if NEG:
            r = libdevice.rsqrt(x)       # rsqrt.approx.f32 without flush-to-zero (ALT_RSQRT's)
        else:
            r = tl.sqrt(x)
    else:
        if HALF:
            c = x + 0.0
            b = tl.abs(c)
        else:
            c = x
            b = c
        if NEG:  # rcp.approx (1 ulp), flushing where FTZ (fast_math16's one-instruction helpers)
            if FTZ:
                b = _M16._rcpz(b)
            else:
                b = _M16._rcp(b)
        if HALF:
            if NEG:
                r = b * 4096.0
            else:
                r = b * 0.000244140625
        else:
            r = b
        for _ in tl.static_range(N - 1):
            r = r * b
        if HALF:
            # sqrt(c 2**24) 2**-12 (rsqrt(c 2**24) 2**12 for y < 0), with c = x + 0: a negative subnormal c stays
            # negative under the flushing sqrt / rsqrt (NaN); c 2**24 overflows only where the result overflows
            # or underflows either way (|x| >= 2**104), b 2**+-12 is subnormal or infinite only there too
            if NEG:
                r = r * _rsqrt_k(c * 16777216.0)
            else:
                r = r * (_M16._sqrtz(c * 16777216.0) if FTZ else tl.sqrt(c * 16777216.0))
            r = tl.where(x == float("-inf"), 0.0 if NEG else float("inf"), r)
    return r


@jit
def _pow_p05(x, y, p0, p1, p2):
    return _pow_k(x, 0, 1, 0)


@jit
def _pow_p1(x, y, p0, p1, p2):
    return _pow_k(x, 1, 0, 0)


@jit
def _pow_p15(x, y, p0, p1, p2):
    return _pow_k(x, 1, 1, 0)


@jit
def _pow_p2(x, y, p0, p1, p2):
    return _pow_k(x, 2, 0, 0)


@jit
def _pow_p25(x, y, p0, p1, p2):
    return _pow_k(x, 2, 1, 0)


@jit
def _pow_p3(x, y, p0, p1, p2):
    return _pow_k(x, 3, 0, 0)


@jit
def _pow_m05(x, y, p0, p1, p2):
    return _pow_k(x, 0, 1, 1)


@jit
def _pow_m1(x, y, p0, p1, p2):
    return _pow_k(x, 1, 0, 1)


@jit
def _pow_m15(x, y, p0, p1, p2):
    return _pow_k(x, 1, 1, 1)


@jit
def _pow_m2(x, y, p0, p1, p2):
    return _pow_k(x, 2, 0, 1)


@jit
def _pow_m25(x, y, p0, p1, p2):
    return _pow_k(x, 2, 1, 1)


@jit
def _pow_m3(x, y, p0, p1, p2):
    return _pow_k(x, 3, 0, 1)


_POW_ALT = Alt("ALT_POW", _pow_a, narrow=True, body2=_pow_a2)  # ALT_POW = 2: _pow_a2 for tensor exponents
# ALT_POW's bodies for a Python-scalar exponent y (a tensor base), by 2 y
_POW_K_ALTS = {k: Alt("ALT_POW", b, narrow=True) for k, b in (
    (1, _pow_p05), (2, _pow_p1), (3, _pow_p15), (4, _pow_p2), (5, _pow_p25), (6, _pow_p3),
    (-1, _pow_m05), (-2, _pow_m1), (-3, _pow_m15), (-4, _pow_m2), (-5, _pow_m25), (-6, _pow_m3))}


@jit
def _pow_sqrt_b(x, y, p0, p1, p2):
    # pow(Tensor, 0.5) as ATen's pow_tensor_scalar kernels compute it: sqrt(x) (pow(-0, 0.5) = -0, pow(-inf, 0.5)
    # = NaN, where C99's pow gives +0 and +inf)
    return _sqrt_b(x, p0, p1, p2)


@jit
def _pow_rsqrt_b(x, y, p0, p1, p2):
    # pow(Tensor, -0.5) as ATen: rsqrt(x) (pow(-0, -0.5) = -inf, pow(-inf, -0.5) = NaN; C99: +inf and +0)
    return _rsqrt_b(x, p0, p1, p2)


def _pow_triton(out, inputs, prom, prm):
    # pointwise.make's implementation, with the ALT_POW body picked by the exponent: a scalar (the dispatcher
    # hands it over as a NumPy scalar of the compute dtype) in +-{0.5, 1, ..., 3} with a tensor base takes its
    # _pow_k body, anything else _pow_a. A Python-scalar exponent of +-0.5 (``half``, from _pow_prepare) takes
    # ATen's sqrt / rsqrt bodies by default too.
    alt, e = _POW_ALT, inputs[1]
    if inputs[0].__class__ is Tensor and isinstance(e, (float, int, np.floating, np.integer)) and \
            not isinstance(e, bool):
        alt = _POW_K_ALTS.get(2.0 * float(e), _POW_ALT)
    half = prm.get("half", 0)
    body = _pow_sqrt_b if half > 0 else _pow_rsqrt_b if half < 0 else _pow_b
    launch_pointwise(body, out, inputs, prom.compute, (), alt=alt)


_pow_triton.body, _pow_triton.fast, _pow_triton.alt = _pow_b, None, _POW_ALT


def _np_pow(x, y, half=0):
    if half:  # a Python-scalar exponent of +-0.5: ATen's sqrt / rsqrt (see _pow_prepare)
        return np.sqrt(x) if half > 0 else 1 / np.sqrt(x)
    if x.dtype == np.bool_:
        return x | ~np.asarray(y, dtype=bool)
    if x.dtype.kind in "iu":
        e = np.broadcast_to(y, np.broadcast_shapes(np.shape(x), np.shape(y)))
        xb = np.broadcast_to(x, e.shape)
        with np.errstate(all="ignore"):
            pos = np.power(xb, np.where(e < 0, 0, e))
        if x.dtype.kind == "i":
            neg = np.where(xb == 1, 1, np.where(xb == -1, np.where(e % 2 != 0, -1, 1), 0)).astype(x.dtype)
            return np.where(e < 0, neg, pos).astype(x.dtype)
        return pos.astype(x.dtype)
    return np.power(x, y)


def _or_pow(x, y, half=0):
    x, y = np.asarray(x), np.asarray(y)
    if half:  # ATen's sqrt / rsqrt for a Python-scalar exponent of +-0.5 (see _pow_prepare)
        with np.errstate(all="ignore"):
            r = np.sqrt(x.astype(np.float64))
            return r if half > 0 else 1 / r
    if x.dtype == np.bool_:
        return np.where(np.asarray(y, dtype=bool), x, True)
    if x.dtype.kind in "iu":
        bits = x.dtype.itemsize * 8
        xs, ys = np.broadcast_arrays(x.astype(object), y.astype(object))
        out = []
        for a, b in zip(xs.ravel().tolist(), ys.ravel().tolist()):
            if b < 0:
                v = 1 if a == 1 else ((-1 if b % 2 else 1) if a == -1 else 0)
            else:
                v = pow(int(a), int(b), 1 << bits)
            out.append(v)
        arr = np.array(out, dtype=object).reshape(xs.shape) if out else np.zeros(xs.shape, dtype=object)
        return np.array([int(v) % (1 << bits) for v in arr.ravel()], dtype=np.uint64).reshape(xs.shape).astype(
            x.dtype) if arr.size else np.zeros(xs.shape, x.dtype)
    with np.errstate(all="ignore"):
        return np.power(x.astype(np.float64), y.astype(np.float64))


def _pow_prepare(a, prom):
    x, e = a["input"], a["exponent"]
    if isinstance(x, Tensor) and x.dtype.kind in (T.KIND_INT, T.KIND_UINT, T.KIND_BOOL) and \
            isinstance(e, int) and not isinstance(e, bool):
        check(e >= 0, "Integers to negative integer powers are not allowed.")
    # ATen's pow(Tensor, Scalar) copies or fills for a bool exponent; its tensor kernel has no bool instance
    check(prom.input is not T.bool_ or not isinstance(e, Tensor), "\"pow\" not implemented for 'Bool' (bool ** "
          "bool tensors; a Python bool exponent is accepted)", NotImplementedError)
    # ATen's pow(Tensor, Scalar) computes an exponent of 0.5 as sqrt and -0.5 as rsqrt, whose special values differ
    # from C99's pow at -0 and -inf (PyTorch 2.13: pow(-0., 0.5) = -0., pow(-inf, 0.5) = nan, pow(-0., -0.5) =
    # -inf, pow(-inf, -0.5) = nan); a tensor exponent of 0.5 keeps C99's pow
    half = 0
    if isinstance(x, Tensor) and isinstance(e, (float, np.floating)) and prom.compute.kind == T.KIND_FLOAT and \
            float(e) in (0.5, -0.5):
        half = 1 if float(e) > 0 else -1
    return {"half": half}


declare("pow", "pow(Tensor|Scalar input, Tensor|Scalar exponent, *, Tensor? out=None)", family=_FAM, body=_pow_b,
        alt=_POW_ALT, triton=_pow_triton,
        cpu=_np_pow, oracle=_or_pow, promotion="default", dtypes=NUM | {T.bool_}, domain="pow", prepare=_pow_prepare,
        flops=8, refused=frozenset({T.bool_}),   # bool ** bool tensors: PyTorch's NotImplementedError (error data)
        inplace=True, dunders={"__pow__": "fwd", "__rpow__": "rev", "__ipow__": "inplace"},
        errors=[(lambda nbx: (nbx.tensor([2]), -1), {}, RuntimeError, "negative integer powers"),
                (lambda nbx: (nbx.tensor([True]), nbx.tensor([True])), {}, NotImplementedError,
                 "not implemented for 'Bool'"),
                (lambda nbx: (True, nbx.tensor([True])), {}, NotImplementedError, "not implemented for 'Bool'")])


# --- max / min ------------------------------------------------------------------------------------------------
@jit
def _maximum_b(x, y, p0, p1, p2):
    if x.dtype == tl.int1:
        r = x | y
    else:
        r = nan_maximum(x, y)
    return r


@jit
def _minimum_b(x, y, p0, p1, p2):
    if x.dtype == tl.int1:
        r = x & y
    else:
        r = nan_minimum(x, y)
    return r


@jit
def _fmax_b(x, y, p0, p1, p2):
    if x.dtype == tl.int1:
        r = x | y
    elif x.dtype.is_floating():
        r = tl.where(x != x, y, tl.where(y != y, x, tl.where(x > y, x, y)))
    else:
        r = tl.where(x > y, x, y)
    return r


@jit
def _fmin_b(x, y, p0, p1, p2):
    if x.dtype == tl.int1:
        r = x & y
    elif x.dtype.is_floating():
        r = tl.where(x != x, y, tl.where(y != y, x, tl.where(x < y, x, y)))
    else:
        r = tl.where(x < y, x, y)
    return r


def _or_max(x, y):
    x, y = np.asarray(x), np.asarray(y)
    return np.where(np.isnan(x) | np.isnan(y), np.nan, np.where(x > y, x, y)) if _fl(x) else np.where(x > y, x, y)


def _or_min(x, y):
    x, y = np.asarray(x), np.asarray(y)
    return np.where(np.isnan(x) | np.isnan(y), np.nan, np.where(x < y, x, y)) if _fl(x) else np.where(x < y, x, y)


def _or_fmax(x, y):
    x, y = np.asarray(x), np.asarray(y)
    if not _fl(x):
        return np.where(x > y, x, y)
    return np.where(np.isnan(x), y, np.where(np.isnan(y), x, np.where(x > y, x, y)))


def _or_fmin(x, y):
    x, y = np.asarray(x), np.asarray(y)
    if not _fl(x):
        return np.where(x < y, x, y)
    return np.where(np.isnan(x), y, np.where(np.isnan(y), x, np.where(x < y, x, y)))


_binary("maximum", _maximum_b, np.maximum, _or_max, other="Tensor", dtypes=STD, domain="special", inplace=False,
        errors=[(lambda nbx: (nbx.tensor([1]), 2), {}, TypeError, "must be Tensor")])
_binary("minimum", _minimum_b, np.minimum, _or_min, other="Tensor", dtypes=STD, domain="special", inplace=False)
_binary("fmax", _fmax_b, np.fmax, _or_fmax, other="Tensor", dtypes=STD, domain="special", inplace=False)
_binary("fmin", _fmin_b, np.fmin, _or_fmin, other="Tensor", dtypes=STD, domain="special", inplace=False)


# --- float binary math ------------------------------------------------------------------------------------------
def _complex(re, im):
    re, im = np.broadcast_arrays(re, im)
    z = np.empty(re.shape, np.complex128)
    z.real, z.imag = re, im  # keeps the signs of zeros (re + 1j*im would not)
    return z



@jit
def _atan2_b(x, y, p0, p1, p2):
    return libdevice.atan2(x, y)


@jit
def _hypot_b(x, y, p0, p1, p2):
    return libdevice.hypot(x, y)


@jit
def _copysign_b(x, y, p0, p1, p2):
    return libdevice.copysign(x, y)


@jit
def _logaddexp_b(x, y, p0, p1, p2):
    # ATen: m = max(a, b); a == b == +-inf gives a; else m + log1p(exp(-|a - b|))
    m = nan_maximum(x, y)
    d = tl.abs(x - y)
    r = m + libdevice.log1p(libdevice.exp(-d))
    return tl.where((x == y) & ((x == float("inf")) | (x == float("-inf"))), x, r)


@jit
def _xlogy_b(x, y, p0, p1, p2):
    r = tl.where(x == 0, tl.zeros_like(x), x * libdevice.log(y))
    return tl.where(y != y, y, r)


def _np_logaddexp(x, y):
    return np.logaddexp(x, y)


def _or_logaddexp(x, y):
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    with np.errstate(all="ignore"):
        m = np.maximum(x, y)
        r = m + np.log(1 + np.exp(-np.abs(x - y)))
        return np.where((x == y) & np.isinf(x), x, r)


def _np_xlogy(x, y):
    with np.errstate(all="ignore"):
        r = np.where(x == 0, x.dtype.type(0), x * np.log(y))
    return np.where(np.isnan(y), y, r).astype(x.dtype)


def _or_xlogy(x, y):
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    with np.errstate(all="ignore"):
        r = np.where(x == 0, 0.0, x * np.log2(y) / np.log2(np.e))
    return np.where(np.isnan(y), np.nan, r)


_binary("atan2", _atan2_b, np.arctan2,
        lambda x, y: np.angle(_complex(np.asarray(y, np.float64), np.asarray(x, np.float64))),
        other="Tensor", promotion="int_to_float", dtypes=NO_FP8, flops=8, aliases=("arctan2",))
_binary("hypot", _hypot_b, np.hypot, lambda x, y: np.where(np.isinf(x) | np.isinf(y), np.inf, np.sqrt(
            np.asarray(x, np.float64) ** 2 + np.asarray(y, np.float64) ** 2)),
        other="Tensor", dtypes=FLOATS, flops=4, domain="small")
_binary("copysign", _copysign_b, np.copysign, lambda x, y: np.abs(np.asarray(x, np.float64)) *
        np.where(np.signbit(np.asarray(y, np.float64)), -1.0, 1.0), promotion="int_to_float", dtypes=NO_FP8,
        domain="special")
_binary("logaddexp", _logaddexp_b, _np_logaddexp, _or_logaddexp, other="Tensor", dtypes=FLOATS, flops=8,
        inplace=False)
_binary("xlogy", _xlogy_b, _np_xlogy, _or_xlogy, input_="Tensor|Scalar", promotion="int_to_float", dtypes=NO_FP8,
        domain="positive2", flops=4)


# --- bitwise ------------------------------------------------------------------------------------------------------
@jit
def _and_b(x, y, p0, p1, p2):
    return x & y


@jit
def _or_b(x, y, p0, p1, p2):
    return x | y


@jit
def _xor_b(x, y, p0, p1, p2):
    return x ^ y


@jit
def _lshift_b(x, y, p0, p1, p2):
    # ATen: a shift by a negative amount or by >= the width gives 0
    BITS: tl.constexpr = x.dtype.primitive_bitwidth
    bad = (y < 0) | (y >= BITS)
    s = tl.where(bad, 0, y)
    return tl.where(bad, tl.zeros_like(x), x << s)


@jit
def _rshift_b(x, y, p0, p1, p2):
    # ATen: a negative shift or one >= the width shifts by width - 1 (sign fill for signed types)
    BITS: tl.constexpr = x.dtype.primitive_bitwidth
    bad = (y < 0) | (y >= BITS)
    s = tl.where(bad, BITS - 1, y).to(x.dtype)
    r = x >> s
    if x.dtype.is_int_unsigned():
        r = tl.where(bad, tl.zeros_like(x), r)
    return r


def _np_lshift(x, y):
    bits = x.dtype.itemsize * 8
    bad = (y < 0) | (y >= bits)
    return np.where(bad, x.dtype.type(0), np.left_shift(x, np.where(bad, 0, y).astype(x.dtype))).astype(x.dtype)


def _np_rshift(x, y):
    bits = x.dtype.itemsize * 8
    bad = (y < 0) | (y >= bits)
    r = np.right_shift(x, np.where(bad, bits - 1, y).astype(x.dtype))
    if x.dtype.kind == "u":
        r = np.where(bad, 0, r)
    return r.astype(x.dtype)


def _or_shift(left):
    def o(x, y):
        x, y = np.asarray(x), np.asarray(y)
        bits = x.dtype.itemsize * 8
        xs, ys = np.broadcast_arrays(x.astype(object), y.astype(object))
        out = []
        for a, b in zip(xs.ravel().tolist(), ys.ravel().tolist()):
            if left:
                v = 0 if (b < 0 or b >= bits) else (a << b)
            else:
                v = a >> (bits - 1 if (b < 0 or b >= bits) else b)
                if x.dtype.kind == "u" and (b < 0 or b >= bits):
                    v = 0
            out.append(int(v) % (1 << bits))
        return np.array(out, dtype=np.uint64).reshape(xs.shape).astype(x.dtype) if out else np.zeros(xs.shape, x.dtype)
    return o


_BIT = frozenset({T.bool_}) | INTS | BARE_U
_binary("bitwise_and", _and_b, np.bitwise_and, lambda x, y: np.bitwise_and(np.asarray(x), np.asarray(y)),
        input_="Tensor|Scalar", dtypes=_BIT, dunders={"__and__": "fwd", "__rand__": "rev", "__iand__": "inplace"})
_binary("bitwise_or", _or_b, np.bitwise_or, lambda x, y: np.bitwise_or(np.asarray(x), np.asarray(y)),
        input_="Tensor|Scalar", dtypes=_BIT, dunders={"__or__": "fwd", "__ror__": "rev", "__ior__": "inplace"})
_binary("bitwise_xor", _xor_b, np.bitwise_xor, lambda x, y: np.bitwise_xor(np.asarray(x), np.asarray(y)),
        input_="Tensor|Scalar", dtypes=_BIT, dunders={"__xor__": "fwd", "__rxor__": "rev", "__ixor__": "inplace"})
_binary("bitwise_left_shift", _lshift_b, _np_lshift, _or_shift(True), input_="Tensor|Scalar", dtypes=INTS,
        domain="shift", dunders={"__lshift__": "fwd", "__rlshift__": "rev", "__ilshift__": "inplace"})
_binary("bitwise_right_shift", _rshift_b, _np_rshift, _or_shift(False), input_="Tensor|Scalar", dtypes=INTS,
        domain="shift", dunders={"__rshift__": "fwd", "__rrshift__": "rev", "__irshift__": "inplace"})


# --- logical and comparisons ------------------------------------------------------------------------------------------
@jit
def _land_b(x, y, p0, p1, p2):
    return (x != 0) & (y != 0)


@jit
def _lor_b(x, y, p0, p1, p2):
    return (x != 0) | (y != 0)


@jit
def _lxor_b(x, y, p0, p1, p2):
    return (x != 0) != (y != 0)


for _n, _b, _f in (("logical_and", _land_b, np.logical_and), ("logical_or", _lor_b, np.logical_or),
                   ("logical_xor", _lxor_b, np.logical_xor)):
    _binary(_n, _b, _f, (lambda f: lambda x, y: f(np.asarray(x) != 0, np.asarray(y) != 0))(_f), other="Tensor",
            promotion="always_bool", dtypes=STD, domain="special", inplace=True)


@jit
def _eq_b(x, y, p0, p1, p2):
    return x == y


@jit
def _ne_b(x, y, p0, p1, p2):
    return x != y


@jit
def _lt_b(x, y, p0, p1, p2):
    return x < y


@jit
def _le_b(x, y, p0, p1, p2):
    return x <= y


@jit
def _gt_b(x, y, p0, p1, p2):
    return x > y


@jit
def _ge_b(x, y, p0, p1, p2):
    return x >= y


def _cmp_oracle(f):
    # Exact comparisons in the compute dtype: an oracle in float64 would be the same comparison.
    return lambda x, y: f(np.asarray(x), np.asarray(y))


for _n, _b, _f, _d, _al, _dt in (
        ("eq", _eq_b, np.equal, "__eq__", (), ALL), ("ne", _ne_b, np.not_equal, "__ne__", ("not_equal",), ALL),
        ("lt", _lt_b, np.less, "__lt__", ("less",), STD), ("le", _le_b, np.less_equal, "__le__", ("less_equal",), STD),
        ("gt", _gt_b, np.greater, "__gt__", ("greater",), STD),
        ("ge", _ge_b, np.greater_equal, "__ge__", ("greater_equal",), STD)):
    _binary(_n, _b, _f, _cmp_oracle(_f), promotion="always_bool", dtypes=_dt, domain="special", dunders={_d: "fwd"},
            aliases=_al, inplace=True)


@jit
def _rnd(v, DT: tl.constexpr):
    # round an intermediate to the inputs' dtype: ATen's isclose is a composite of tensor ops in that dtype
    if DT == tl.float16 or DT == tl.bfloat16:
        r = _cvt(_cvt(v, DT, _HW_CVT), tl.float32, _HW_CVT)
    else:
        r = v
    return r


@jit
def _isclose_b(x, y, rtol, atol, equal_nan):
    # x, y arrive raw (the inputs' dtype); rtol/atol/equal_nan in the compute dtype
    DT: tl.constexpr = x.dtype
    xf = H.convert(x, rtol.dtype)
    yf = H.convert(y, rtol.dtype)
    close = xf == yf
    if DT.is_floating():
        close = close | ((equal_nan != 0) & (xf != xf) & (yf != yf))
    err = tl.abs(_rnd(xf - yf, DT))
    allowed = _rnd(atol + tl.abs(_rnd(rtol * yf, DT)), DT)
    fin = (err == err) & (err != float("inf"))
    return close | (fin & (err <= allowed))


@jit
def _isclose_nonan_b(x, y, rtol, atol, equal_nan):
    # _isclose_b for equal_nan=False (the host picks it): no NaN-pair test (3 of the 27 sm_90 SASS instructions per
    # element of the bf16 kernel)
    DT: tl.constexpr = x.dtype
    xf = H.convert(x, rtol.dtype)
    yf = H.convert(y, rtol.dtype)
    err = tl.abs(_rnd(xf - yf, DT))
    allowed = _rnd(atol + tl.abs(_rnd(rtol * yf, DT)), DT)
    return (xf == yf) | ((err <= allowed) & (err < float("inf")))


@jit
def _isclose_exact_b(x, y, rtol, atol, equal_nan):
    # rtol == atol == 0: ATen returns the equality test (plus NaN == NaN under equal_nan) without error terms
    xf = H.convert(x, rtol.dtype)
    yf = H.convert(y, rtol.dtype)
    close = xf == yf
    if x.dtype.is_floating():
        close = close | ((equal_nan != 0) & (xf != xf) & (yf != yf))
    return close


def _isclose_prepare(a, prom):
    x, y = a["input"], a["other"]
    check(x.dtype is y.dtype, lambda: f"isclose: {x.dtype.name} did not match {y.dtype.name}")
    check(a["rtol"] >= 0, lambda: f"rtol must be greater than or equal to zero, but got {a['rtol']}")
    check(a["atol"] >= 0, lambda: f"atol must be greater than or equal to zero, but got {a['atol']}")
    return {"rtol": a["rtol"], "atol": a["atol"], "equal_nan": 1.0 if a["equal_nan"] else 0.0}


def _np_isclose(x, y, rtol=1e-5, atol=1e-8, equal_nan=0.0):
    # x, y raw: floating inputs compute in their own dtype (NumPy rounds each op to it, as ATen's composite)
    if x.dtype.kind != "f" and x.dtype != T.bfloat16.numpy and x.dtype != T.float16.numpy:
        ft = get_default_dtype().numpy
        x, y = x.astype(ft), y.astype(ft)
        floating = False
    else:
        floating = True
    close = x == y
    if floating and equal_nan:
        close = close | (np.isnan(x) & np.isnan(y))
    if rtol == 0 and atol == 0:
        return close
    t = x.dtype.type
    err = np.abs(x - y)
    return close | (np.isfinite(err) & (err <= t(atol) + np.abs(t(rtol) * y)))


def _or_isclose(x, y, rtol=1e-5, atol=1e-8, equal_nan=0.0):
    # Oracle: float64 arithmetic with each intermediate rounded to the inputs' dtype by the casting rules.
    src = T.from_numpy_dtype(np.asarray(x).dtype)
    if src.kind != T.KIND_FLOAT:
        src = get_default_dtype()
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    else:
        x, y = cast_array(np.asarray(x), src, T.float64), cast_array(np.asarray(y), src, T.float64)

    def rnd(v):
        return cast_array(cast_array(np.asarray(v, np.float64), T.float64, src), src, T.float64)

    with np.errstate(all="ignore"):
        close = (x == y) | (bool(equal_nan) & np.isnan(x) & np.isnan(y))
        if rtol == 0 and atol == 0:
            return close
        err = np.abs(rnd(x - y))
        allowed = rnd(atol + np.abs(rnd(rtol * y)))
        return close | (np.isfinite(err) & (err <= allowed))


def _isclose_compute(prom):
    # Floating inputs: their own dtype, rounded per step in the kernel (float32 registers for 16-bit types);
    # integers and bool: the default float dtype, as ATen casts them before the error terms.
    return prom.compute if prom.input.kind == T.KIND_FLOAT else get_default_dtype()


def _isclose_triton(out, inputs, prom, prm):
    ct = _isclose_compute(prom)
    body = _isclose_exact_b if prm["rtol"] == 0 and prm["atol"] == 0 else \
        _isclose_b if prm["equal_nan"] else _isclose_nonan_b
    launch_pointwise(body, out, inputs, ct, [prm["rtol"], prm["atol"], prm["equal_nan"]], raw=3)


declare("isclose", "isclose(Tensor input, Tensor other, float rtol=1e-05, float atol=1e-08, bool equal_nan=False)",
        family=_FAM, cpu=_np_isclose, oracle=_or_isclose, triton=_isclose_triton, raw=3, promotion="always_bool",
        dtypes=NO_FP8, domain="special", prepare=_isclose_prepare, inplace=False, flops=5,
        param_cases=[{}, {"rtol": 0.1, "atol": 0.5, "equal_nan": True}, {"rtol": 0.0, "atol": 0.0}],
        errors=[(lambda nbx: (nbx.tensor([1.]), nbx.tensor([1.], dtype=nbx.float64)), {}, RuntimeError, "match"),
                (lambda nbx: (nbx.tensor([1.]), nbx.tensor([1.])), {"rtol": -1.0}, RuntimeError, "rtol")])


# =========================================================================================================
# Ternary
# =========================================================================================================
@jit
def _where_b(c, x, y, p0, p1, p2):
    return tl.where(c != 0, x, y)


def _where_prepare(a, prom):
    c = a["condition"]
    check(isinstance(c, Tensor) and c.dtype in (T.bool_, T.uint8), lambda: "where expected condition to be a boolean "
          f"tensor, but got a tensor with dtype {getattr(c, 'dtype', type(c)).__repr__()}")
    return {}


declare("where", "where(Tensor condition, Tensor|Scalar input, Tensor|Scalar other, *, Tensor? out=None)",
        family=_FAM, body=_where_b, raw=1, cpu=lambda c, x, y: np.where(c != 0, x, y),
        oracle=lambda c, x, y: np.choose(np.asarray(c != 0, dtype=np.int64), [np.broadcast_to(y, np.shape(c)),
                                                                             np.broadcast_to(x, np.shape(c))])
        if np.shape(c) == np.broadcast_shapes(np.shape(c), np.shape(x), np.shape(y)) else np.where(c, x, y),
        promotion="default", promote=("input", "other"), dtypes=ALL, domain="where", prepare=_where_prepare,
        inplace=False, method=True, out_dtype="result",
        errors=[(lambda nbx: (nbx.tensor([1., 0.]), nbx.tensor([1.]), nbx.tensor([2.])), {}, RuntimeError,
                 "boolean")])


@jit
def _lerp_b(x, e, w, p0, p1, p2):
    # ATen's lerp: two formulas so that w = 0 gives x and w = 1 gives e exactly
    d = e - x
    return tl.where(tl.abs(w) < 0.5, x + w * d, e - d * (1.0 - w))


def _np_lerp(x, e, w):
    d = e - x
    return np.where(np.abs(w) < 0.5, x + w * d, e - d * (1 - w)).astype(x.dtype)


def _lerp_prepare(a, prom):
    x, e, w = a["input"], a["end"], a["weight"]
    check(e.dtype is x.dtype, lambda: f"expected dtype {x.dtype.name} for `end` but got dtype {e.dtype.name}")
    if isinstance(w, Tensor):
        check(w.dtype is x.dtype, lambda: f"expected dtype {x.dtype.name} for `weight` but got dtype {w.dtype.name}")
    return {}


declare("lerp", "lerp(Tensor input, Tensor end, Tensor|Scalar weight, *, Tensor? out=None)", family=_FAM,
        body=_lerp_b, cpu=_np_lerp, oracle=lambda x, e, w: np.asarray(x, np.float64) + np.asarray(w, np.float64) *
        (np.asarray(e, np.float64) - np.asarray(x, np.float64)), promotion="default", promote=("input", "end"),
        dtypes=FLOATS, domain="any", prepare=_lerp_prepare, inplace=True, flops=3,
        # ATen's lerp with a tensor weight writes its input's dtype only; with a scalar weight it casts to out's
        out_dtype=lambda a: "same" if isinstance(a["weight"], Tensor) else None,
        tolerance={"extra_atol": lambda x, e, w: np.maximum(np.abs(x), np.abs(e)),
                   "reason": "x + w*(e - x) cancels: the rounding error scales with |x| and |e|, not the result"},
        errors=[(lambda nbx: (nbx.tensor([1.]), nbx.tensor([1.], dtype=nbx.float64), 0.5), {}, RuntimeError,
                 "expected dtype")])


def _value_prepare(name):
    def prep(a, prom):
        v = a["value"]
        if prom.common.kind in (T.KIND_INT, T.KIND_UINT):
            check(not isinstance(v, float), lambda: f"For integral input tensors, argument value must not be a "
                  "floating point number.")
        return {"value": v}
    return prep


@jit
def _addcmul_b(x, a, b, v, p1, p2):
    return x + v * a * b


@jit
def _addcdiv_b(x, a, b, v, p1, p2):
    return x + v * H.div_rn(a, b)


def _addcdiv_dtypes(a) -> frozenset:
    """addcdiv's dtypes (floating), after PyTorch's refusal of integer tensor1 and tensor2, which ATen makes before
    any dtype check (``addcdiv(int, int, int)`` is that RuntimeError, not "not implemented for 'Long'")."""
    t1, t2 = a.get("tensor1"), a.get("tensor2")
    if isinstance(t1, Tensor) and isinstance(t2, Tensor):
        _addcdiv_prepare(a, None)
    return FLOATS


def _addcdiv_prepare(a, prom):
    t1, t2 = a["tensor1"], a["tensor2"]
    ints = (T.KIND_INT, T.KIND_UINT, T.KIND_BOOL)
    check(not (t1.dtype.kind in ints and t2.dtype.kind in ints), "Integer division with addcdiv is no longer "
          "supported, and in a future  release addcdiv will perform a true division of tensor1 and tensor2. The "
          "historic addcdiv behavior can be implemented as (input + value * torch.trunc(tensor1 / tensor2))."
          "to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The "
          "future addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), for all "
          "dtypes.")
    return {"value": a["value"]}


def _or_addc(div):
    def o(x, a, b, value=1):
        x, a, b = (np.asarray(v) for v in (x, a, b))
        if x.dtype.kind != "f":
            return x.astype(np.int64) + int(value) * a.astype(np.int64) * b.astype(np.int64)
        with np.errstate(all="ignore"):
            return x + value * (a / b if div else a * b)
    return o


declare("addcmul", "addcmul(Tensor input, Tensor tensor1, Tensor tensor2, *, Scalar value=1, Tensor? out=None)",
        family=_FAM, body=_addcmul_b, params=("value",),
        cpu=lambda x, a, b, value=1: x + x.dtype.type(value) * a * b, oracle=_or_addc(False), promotion="default",
        dtypes=NUM, domain="any", prepare=_value_prepare("addcmul"), inplace=True, flops=3,
        param_cases=[{}, {"value": 2}])
declare("addcdiv", "addcdiv(Tensor input, Tensor tensor1, Tensor tensor2, *, Scalar value=1, Tensor? out=None)",
        family=_FAM, body=_addcdiv_b, params=("value",),
        cpu=lambda x, a, b, value=1: x + x.dtype.type(value) * (a / b), oracle=_or_addc(True), promotion="default",
        dtypes=_addcdiv_dtypes, domain="divisor3", prepare=_addcdiv_prepare, inplace=True, flops=3,
        param_cases=[{}, {"value": 0.5}],
        errors=[(lambda nbx: (nbx.tensor([1.]), nbx.tensor([1]), nbx.tensor([1])), {}, RuntimeError,
                 "Integer division"),
                (lambda nbx: (nbx.tensor([1]), nbx.tensor([1]), nbx.tensor([1])), {}, RuntimeError,
                 "Integer division")])


# --- clamp ------------------------------------------------------------------------------------------------------------
@jit
def _clamp_b(x, lo, hi, p0, p1, p2):
    if x.dtype == tl.int1:
        r = (x | lo) & hi
    else:
        r = nan_minimum(nan_maximum(x, lo), hi)
    return r


@jit
def _clamp_min_b(x, lo, p0, p1, p2):
    if x.dtype == tl.int1:
        r = x | lo
    else:
        r = nan_maximum(x, lo)
    return r


@jit
def _clamp_max_b(x, hi, p0, p1, p2):
    if x.dtype == tl.int1:
        r = x & hi
    else:
        r = nan_minimum(x, hi)
    return r


def _np_clamp(x, lo, hi):
    if lo is not None:
        x = np.maximum(x, lo)
    if hi is not None:
        x = np.minimum(x, hi)
    return x


def _or_clamp(x, lo=None, hi=None):
    x = np.asarray(x)
    f = np.float64 if x.dtype.kind == "f" else x.dtype
    r = x.astype(f)
    if lo is not None:
        lo = np.asarray(lo, f)
        r = np.where(np.isnan(r) | np.isnan(lo), np.nan, np.where(r < lo, lo, r)) if f == np.float64 else \
            np.where(r < lo, lo, r)
    if hi is not None:
        hi = np.asarray(hi, f)
        r = np.where(np.isnan(r) | np.isnan(hi), np.nan, np.where(r > hi, hi, r)) if f == np.float64 else \
            np.where(r > hi, hi, r)
    return r


def _clamp1_dtypes(bound):
    # PyTorch 2.13: clamp_min/clamp_max take bool with a tensor bound, not with a scalar one
    return lambda a: NUM | {T.bool_} if isinstance(a.get(bound), Tensor) else NUM


def _clamp_out(*bounds):
    # ATen's clamp with a scalar bound writes the common dtype only (out= of another raises "Found dtype ..."); with
    # tensor bounds it casts to out's dtype
    return lambda a: "same" if any(a.get(b) is not None and not isinstance(a[b], Tensor) for b in bounds) else None


def _clamp_prepare(a, prom):
    check(a.get("min") is not None or a.get("max") is not None,
          "torch.clamp: At least one of 'min' or 'max' must not be None")
    return {}


def _clamp_triton(out, inputs, prom, prm):
    x, lo, hi = inputs
    if lo is not None and hi is not None:
        launch_pointwise(_clamp_b, out, [x, lo, hi], prom.compute)
    elif lo is not None:
        launch_pointwise(_clamp_min_b, out, [x, lo], prom.compute)
    else:
        launch_pointwise(_clamp_max_b, out, [x, hi], prom.compute)


declare("clamp", "clamp(Tensor input, Tensor|Scalar? min=None, Tensor|Scalar? max=None, *, Tensor? out=None)",
        family=_FAM, cpu=_np_clamp, oracle=_or_clamp, triton=_clamp_triton, promotion="default", dtypes=NUM,
        domain="clamp", prepare=_clamp_prepare, inplace=True, aliases=("clip",), flops=2,
        out_dtype=_clamp_out("min", "max"),
        errors=[(lambda nbx: (nbx.tensor([1.]),), {}, RuntimeError, "At least one")])
declare("clamp_min", "clamp_min(Tensor input, Tensor|Scalar min, *, Tensor? out=None)", family=_FAM,
        body=_clamp_min_b, cpu=lambda x, lo: np.maximum(x, lo), oracle=lambda x, lo: _or_clamp(x, lo, None),
        promotion="default", dtypes=_clamp1_dtypes("min"), domain="clamp", inplace=True, out_dtype=_clamp_out("min"))
declare("clamp_max", "clamp_max(Tensor input, Tensor|Scalar max, *, Tensor? out=None)", family=_FAM,
        body=_clamp_max_b, cpu=lambda x, hi: np.minimum(x, hi), oracle=lambda x, hi: _or_clamp(x, None, hi),
        promotion="default", dtypes=_clamp1_dtypes("max"), domain="clamp", inplace=True, out_dtype=_clamp_out("max"))


# --- masked_fill ------------------------------------------------------------------------------------------------------
@jit
def _masked_fill_b(x, m, v, p0, p1, p2):
    return tl.where(m != 0, v, x)


def _masked_fill_prepare(a, prom):
    m, v = a["mask"], a["value"]
    check(m.dtype is T.bool_, lambda: f"masked_fill_ only supports boolean masks, but got mask with dtype "
          f"{m.dtype.name}")
    if isinstance(v, Tensor):
        check(v.ndim == 0, lambda: f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
              f"{v.ndim} dimension(s).")
    else:
        from ..dtypes.casting import checked_scalar
        checked_scalar(v, a["input"].dtype, "masked_fill")
    return {}


def _masked_fill_driver(rec, args, *, out=None, inplace=None):
    from .dispatch import pointwise
    v = args["value"]
    if isinstance(v, Tensor) and v.ndim == 0 and (v.device.type == "cpu" or v.device == args["input"].device):
        args = dict(args, value=v.item()) if v.device.type == "cpu" else args
    return pointwise(rec, args, out=out, inplace=inplace)


declare("masked_fill", "masked_fill(Tensor input, Tensor mask, Tensor|Scalar value)", family=_FAM,
        body=_masked_fill_b, raw=2, cpu=lambda x, m, v: np.where(m, v, x),
        oracle=lambda x, m, v: np.where(np.asarray(m), np.asarray(v), np.asarray(x)), promotion="default",
        promote=("input",), dtypes=STD, domain="where2", prepare=_masked_fill_prepare, driver=_masked_fill_driver,
        scalar_operands=("value",),
        inplace=True,
        errors=[(lambda nbx: (nbx.tensor([1, 2]), nbx.tensor([1., 0.]), 2), {}, RuntimeError, "boolean masks"),
                (lambda nbx: (nbx.tensor([1, 2]), nbx.tensor([True, False]), nbx.tensor([1])), {}, RuntimeError,
                 "0-dimensional"),
                (lambda nbx: (nbx.tensor([1, 2], dtype=nbx.int8), nbx.tensor([True, False]), 300), {}, RuntimeError,
                 "overflow")])
