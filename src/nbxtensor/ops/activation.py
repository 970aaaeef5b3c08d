"""Activation functions, exported in ``nbxtensor.nn.functional`` under PyTorch's names and arguments:
relu, relu6, gelu ('none' | 'tanh'), silu, mish, softplus, sigmoid (in :mod:`.elementwise`, also here),
logsigmoid, hardsigmoid, hardswish, hardtanh, elu, celu, selu, leaky_relu, threshold, glu, softsign,
tanhshrink.

Each is one pointwise record (:func:`.pointwise.declare`): a ``@jit`` scalar body for the Triton kernel, a
NumPy function for the ``cpu`` device and an independent float64 oracle. Formulas are ATen's CPU kernels
(aten/src/ATen/native/cpu/Activation.cpp), so edge cases (NaN, the softplus threshold, the celu alpha)
match; float16 and bfloat16 compute in float32 and round once. For float16 and bfloat16 results the smooth
activations (gelu both ways, silu, sigmoid, mish, softplus, logsigmoid, elu, celu, selu, hardsigmoid,
hardswish, glu) run ``fast`` float32 bodies built on the GPU's exp2 and reciprocal approximations: relative
error below 2**-15 (gelu's far tail) and usually a few ulp of float32, so the 16-bit result is the correctly
rounded one except next to rounding ties, where it is one unit in the last place away (tests/ops/
test_activation.py checks every finite input). float32 and float64 keep libdevice and IEEE division.
Functions that take ``inplace=`` in PyTorch take it here and write into ``input``.
"""

from __future__ import annotations

import math

import numpy as np

from .._errors import check
from ..dtypes import table as T
from ..runtime.triton_compat import jit, tl
from ..shapes import wrap_dim
from . import triton_helpers as H
from .elementwise import FLOATS, INTS, NO_FP8, _erf_np, _or_erfc, _rcp_f, nan_maximum, nan_minimum
from .pointwise import declare, launch_pointwise
from .triton_helpers import libdevice

__all__: list[str] = []

_FAM = "activation"
_F = ("functional",)
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946


def _act(name, sig, body, cpu, oracle, *, dtypes=FLOATS, params=(), namespaces=_F, method=False, inplace=False,
         domain="any", flops=4, **kw):
    declare(name, sig, family=_FAM, body=body, cpu=cpu, oracle=oracle, params=params, promotion="default",
            dtypes=dtypes, namespaces=namespaces, method=method, inplace=inplace, domain=domain, flops=flops, **kw)


def _f64(x):
    return np.asarray(x, dtype=np.float64)


# --- relu family ----------------------------------------------------------------------------------------------
@jit
def _relu_b(x, p0, p1, p2):
    if x.dtype.is_int_unsigned():
        r = x
    else:
        r = nan_maximum(x, tl.zeros_like(x))  # NaN stays NaN; one max.NaN (relu(-0.) is +0, as PyTorch's CUDA)
    return r


_act("relu", "relu(Tensor input, bool inplace=False)", _relu_b, lambda x, **k: np.where(x < 0, x.dtype.type(0), x),
     lambda x: np.where(_f64(x) < 0, 0.0, _f64(x)) if np.asarray(x).dtype.kind == "f" else np.maximum(x, 0),
     dtypes=INTS | FLOATS, namespaces=("torch", "functional"), method=True, inplace=True, flops=1)


@jit
def _hardtanh_b(x, lo, hi, p2):
    return nan_minimum(nan_maximum(x, lo), hi)


def _np_hardtanh(x, min_val=-1.0, max_val=1.0):
    return np.minimum(np.maximum(x, x.dtype.type(min_val)), x.dtype.type(max_val))


def _or_hardtanh(x, min_val=-1.0, max_val=1.0):
    x = np.asarray(x)
    f = np.float64 if x.dtype.kind == "f" else np.int64
    v = x.astype(f)
    return np.where(np.isnan(v), v, np.where(v < min_val, min_val, np.where(v > max_val, max_val, v))) \
        if f == np.float64 else np.clip(v, int(min_val), int(max_val))


def _hardtanh_prepare(a, prom, name="hardtanh"):
    lo, hi = a.get("min_val", 0.0), a.get("max_val", 6.0)
    if lo > hi:
        raise ValueError("min_val cannot be greater than max_val")
    # ATen checks the limits converted to the integer type (so -0.5, which truncates to 0, passes)
    check(not (prom.common.kind == T.KIND_UINT and (int(lo) < 0 or int(hi) < 0)),
          lambda: f"cannot do {name} on an unsigned type with negative limits")
    return {"min_val": lo, "max_val": hi}


_HT_DT = (INTS - {T.uint8}) | FLOATS
_act("hardtanh", "hardtanh(Tensor input, float min_val=-1.0, float max_val=1.0, bool inplace=False)", _hardtanh_b,
     _np_hardtanh, _or_hardtanh, dtypes=_HT_DT | {T.uint8}, params=("min_val", "max_val"), prepare=_hardtanh_prepare,
     inplace=True, domain="wide", flops=2, param_cases=[{}, {"min_val": -0.5, "max_val": 2.0}],
     refused=frozenset({T.uint8}),  # with its default limits (-1, 1): PyTorch's own error, tested as data
     errors=[(lambda nbx: (nbx.tensor([1.]), 2.0, 1.0), {}, ValueError, "min_val cannot be greater"),
             (lambda nbx: (nbx.tensor([1], dtype=nbx.uint8),), {}, RuntimeError, "unsigned type")])


def _relu6_prepare(a, prom):
    return _hardtanh_prepare({"min_val": 0.0, "max_val": 6.0}, prom, "relu6")


def _relu6_triton(out, inputs, prom, prm):
    launch_pointwise(_hardtanh_b, out, inputs, prom.compute, [0.0, 6.0])


declare("relu6", "relu6(Tensor input, bool inplace=False)", family=_FAM, triton=_relu6_triton,
        cpu=lambda x, min_val, max_val: _np_hardtanh(x, 0.0, 6.0),
        oracle=lambda x, min_val=0.0, max_val=6.0: _or_hardtanh(x, 0.0, 6.0), promotion="default",
        dtypes=INTS | FLOATS, namespaces=_F, method=False, inplace=True, prepare=_relu6_prepare, domain="wide",
        flops=2)


@jit
def _leaky_relu_b(x, slope, p1, p2):
    return tl.where(x > 0, x, x * slope)


_act("leaky_relu", "leaky_relu(Tensor input, float negative_slope=0.01, bool inplace=False)", _leaky_relu_b,
     lambda x, negative_slope=0.01: np.where(x > 0, x, x * x.dtype.type(negative_slope)),
     lambda x, negative_slope=0.01: np.where(_f64(x) > 0, _f64(x), _f64(x) * negative_slope),
     params=("negative_slope",), inplace=True, flops=2, param_cases=[{}, {"negative_slope": 0.2}])


@jit
def _threshold_aten_b(x, th, value, p2):
    # ATen: x <= threshold ? value : x  (NaN <= th is false, so NaN passes through)
    return tl.where(x <= th, value, x)


_act("threshold", "threshold(Tensor input, float threshold, float value, bool inplace=False)", _threshold_aten_b,
     lambda x, threshold, value: np.where(x <= x.dtype.type(threshold), x.dtype.type(value), x),
     lambda x, threshold, value: np.where(_f64(x) <= threshold, value, _f64(x)) if np.asarray(x).dtype.kind == "f"
     else np.where(np.asarray(x) <= threshold, value, np.asarray(x)),
     dtypes=INTS | FLOATS, params=("threshold", "value"), namespaces=("torch", "functional"), inplace=True,
     flops=1, param_cases=[{"threshold": 0.5, "value": 2.0}, {"threshold": 3, "value": 7}])


# --- fast float32 pieces for 16-bit outputs ----------------------------------------------------------------------
# A float16 or bfloat16 result keeps 11 or 8 significant bits. Computed in float32 with a relative error below
# 2**-17 (2**-15 in gelu's far tail), it rounds to the same 16-bit value as the exact result except next to a
# rounding tie, where the two are one unit in the last place apart (inside the tolerance table's rtol for both
# dtypes). The ``_f`` helpers reach that with the GPU's exp2 approximation (``tl.exp``: ex2.approx.f32 of
# x*log2(e), relative error about 2**-22 + |x| 2**-24; subnormal results kept) and reciprocal (:func:`_rcp_f`,
# 1 ulp, for divisors in [1, 2**126], the only ones they divide by) instead of libdevice's full-range functions
# and nvcc's correctly rounded division, which cost two to four times as many instructions and made the smooth
# activations compute-bound on the H200 (gelu tanh 0.75x, mish 0.78x, logsigmoid 0.78x PyTorch eager; SASS
# per element before -> after, bf16: gelu tanh 39 -> 17, mish 70 -> 15, logsigmoid 54 -> 20, softplus 72 ->
# 23). float32 and float64 outputs keep the exact bodies (:func:`.pointwise.launch_pointwise`'s ``fast``). Under
# the interpreter tier these run through NumPy, so there the tests check the formulas; the error bounds above add
# the GPU instructions' documented accuracy (PTX ISA: ex2.approx, rcp.approx), checked on the GPU tier by the
# same tests and by benchmarks/sweep_pointwise.py's numerics pass.


@jit
def _sigmoid_f(v):
    # 1 / (1 + e^-v) from z = e^-|v| in (0, 1]: the divisor stays in [1, 2] and no branch overflows
    z = tl.exp(-tl.abs(v))
    s = _rcp_f(1.0 + z)
    return tl.where(v >= 0, s, z * s)


@jit
def _log1p_unit_f(z):
    # log1p(z) for z in [0, 1] (or NaN) as 2 atanh(s) = s (2 + w R(w)), s = z / (2 + z) in [0, 1/3], w = s**2:
    # R of degree 3 fitted for relative error (4.5e-9 on [0, 1]); no cancellation near 0 and no log instruction
    s = z * _rcp_f(2.0 + z)
    w = s * s
    r = w * 0.2801098649895687 + 0.2800199383512705
    r = r * w + 0.4002151674063076
    r = r * w + 0.6666641644664891
    return s * (w * r + 2.0)


@jit
def _expm1_neg_f(t):
    # expm1(t) for t <= 0 (the branch of elu/celu/selu that uses it; NaN passes): Taylor to t**8 on (-0.5, 0]
    # (truncation below 0.5**8 / 9! ~ 1.1e-8 relative), where e^t - 1 would cancel; e^t - 1 below -0.5
    p = t * (1.0 / 40320.0) + 1.0 / 5040.0
    p = p * t + 1.0 / 720.0
    p = p * t + 1.0 / 120.0
    p = p * t + 1.0 / 24.0
    p = p * t + 1.0 / 6.0
    p = p * t + 0.5
    p = p * t + 1.0
    return tl.where(t > -0.5, p * t, tl.exp(t) - 1.0)


# --- smooth activations -----------------------------------------------------------------------------------------
@jit
def _gelu_b(x, p0, p1, p2):
    return 0.5 * x * (1.0 + libdevice.erf(x * 0.7071067811865476))


@jit
def _gelu_tanh_b(x, p0, p1, p2):
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    return 0.5 * x * (1.0 + libdevice.tanh(inner))


def _np_gelu(x, approximate="none"):
    if approximate == "tanh":
        return (0.5 * x * (1 + np.tanh(x.dtype.type(math.sqrt(2 / math.pi)) * (x + x.dtype.type(0.044715) * x ** 3))))
    e = _erf_np(x.astype(np.float64) / math.sqrt(2)).astype(np.float64).astype(x.dtype)
    return 0.5 * x * (1 + e)


def _or_gelu(x, approximate="none"):
    # Written without the cancellation of 1 + erf(v) and 1 + tanh(u) for negative arguments, so that the oracle
    # keeps its relative accuracy in the tail (x < -6), where the 16-bit results are still normal numbers:
    # 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)) and 0.5 (1 + erf(v)) = 0.5 erfc(-v) (the oracle's continued fraction).
    x = _f64(x)
    with np.errstate(over="ignore", invalid="ignore"):
        if approximate == "tanh":
            return x / (1 + np.exp(-2 * math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
        return 0.5 * x * _or_erfc(-x / math.sqrt(2))


def _gelu_prepare(a, prom):
    ap = a["approximate"]
    check(ap in ("none", "tanh"), lambda: f"approximate argument must be either none or tanh.")
    return {"approximate": ap}


@jit
def _gelu_tanh_f(x, p0, p1, p2):
    # 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x**3): the same function, without the
    # cancellation of 1 + tanh(u) for negative u; +-inf and NaN give PyTorch's results (inf, NaN, NaN)
    x2 = x * x
    v = x * (1.5957691216057308 + 0.07135481627260025 * x2)
    return x * _sigmoid_f(v)


@jit
def _gelu_f(x, p0, p1, p2):
    # x Phi(x) with Phi(x) = erfc(-x / sqrt(2)) / 2 and erfc(u) = e^(-u^2) erfcx(u), u = |x| / sqrt(2): erfcx
    # as s P(s), s = 1 / (1 + 0.425 u), P of degree 7 fitted for relative error (1.4e-7 on [0, 10]). One
    # formula, no branch and no cancellation: Phi = erfc / 2 below 0 (relative accuracy in the tail), 1 - erfc / 2
    # above. Simulated in float32 with the GPU's exp: relative error below 2e-5 wherever the result is a normal
    # float32, below 3e-6 for |x| < 5 (libdevice's erff costs ~1.5x the instructions). +-inf and NaN as PyTorch.
    u = tl.abs(x) * 0.7071067811865476
    s = _rcp_f(1.0 + 0.425 * u)
    p = s * 0.03574046694442548 - 0.15658432219741597
    p = p * s + 0.20381941378834664
    p = p * s - 0.05163563243956299
    p = p * s + 0.12754883442462175
    p = p * s + 0.10035127914314977
    p = p * s + 0.12092059314588277
    p = p * s + 0.11983929510259382
    h = (s * p) * tl.exp(-(u * u))  # erfc(u) / 2 (the coefficients here are the fit's halves)
    return x * tl.where(x < 0, h, 1.0 - h)


def _gelu_triton(out, inputs, prom, prm):
    if prm["approximate"] == "tanh":
        launch_pointwise(_gelu_tanh_b, out, inputs, prom.compute, fast=_gelu_tanh_f)
    else:
        launch_pointwise(_gelu_b, out, inputs, prom.compute, fast=_gelu_f)


declare("gelu", "gelu(Tensor input, *, str approximate='none')", family=_FAM, cpu=_np_gelu, oracle=_or_gelu,
        parity_exclude={"mask": lambda x: x == np.inf, "reason": "PyTorch's CPU gelu returns NaN at +inf (its "
                        "vectorized erf); the limit, and nbxtensor's result, is +inf"},
        triton=_gelu_triton, promotion="default", dtypes=FLOATS, namespaces=_F, method=False, inplace=False,
        prepare=_gelu_prepare, domain="any", flops=8, param_cases=[{}, {"approximate": "tanh"}],
        errors=[(lambda nbx: (nbx.tensor([1.]),), {"approximate": "x"}, RuntimeError, "approximate")])


@jit
def _silu_b(x, p0, p1, p2):
    return H.div_rn(x, 1.0 + libdevice.exp(-x))


def _or_sigmoid(x):
    x = _f64(x)
    with np.errstate(over="ignore"):
        return np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))


@jit
def _silu_f(x, p0, p1, p2):
    return x * _sigmoid_f(x)  # silu(-inf) = -inf * 0 = NaN, as PyTorch's -inf / (1 + inf)


_act("silu", "silu(Tensor input, bool inplace=False)", _silu_b, lambda x: x / (1 + np.exp(-x)),
     lambda x: _f64(x) * _or_sigmoid(x), inplace=True, flops=5, fast=_silu_f)


@jit
def _softplus_raw(x):
    return libdevice.log1p(libdevice.exp(x))


@jit
def _mish_b(x, p0, p1, p2):
    return x * libdevice.tanh(_softplus_raw(x))


def _or_softplus(x, beta=1.0, threshold=20.0):
    x = _f64(x)
    with np.errstate(over="ignore"):
        bx = x * beta
        sp = np.where(bx > 0, bx + np.log1p(np.exp(-np.abs(bx))), np.log1p(np.exp(bx))) / beta
    return np.where(bx > threshold, x, sp)


@jit
def _mish_f(x, p0, p1, p2):
    # tanh(log1p(w)) = n / (n + 2) with w = e^x, n = w (w + 2): one exponential and one division instead of
    # exp, log1p and tanh. Above x = 20 tanh(softplus(x)) is 1 in float32 (as PyTorch computes it), and w**2
    # would overflow past x = 44: x itself. -inf gives -inf * 0 = NaN, as PyTorch.
    w = tl.exp(x)
    n = w * (w + 2.0)
    return tl.where(x > 20.0, x, x * (n * _rcp_f(n + 2.0)))


_act("mish", "mish(Tensor input, bool inplace=False)", _mish_b, lambda x: x * np.tanh(np.log1p(np.exp(x))),
     lambda x: _f64(x) * np.tanh(_or_softplus(x)), inplace=True, flops=8, fast=_mish_f)


@jit
def _softplus_b(x, beta, threshold, p2):
    bx = x * beta
    return tl.where(bx > threshold, x, H.div_rn(libdevice.log1p(libdevice.exp(bx)), beta))


@jit
def _softplus_f(x, beta, threshold, inv_beta):
    # log1p(e^bx) = max(bx, 0) + log1p(e^-|bx|): the same value, with the log1p argument in [0, 1]; 1 / beta comes
    # from the host (_softplus_triton)
    bx = x * beta
    sp = nan_maximum(bx, tl.zeros_like(bx)) + _log1p_unit_f(tl.exp(-tl.abs(bx)))
    return tl.where(bx > threshold, x, sp * inv_beta)


def _inv(v: float) -> float:
    return 1.0 / v if v != 0 else math.copysign(math.inf, v)


def _softplus_triton(out, inputs, prom, prm):
    # the exact body ignores its third parameter; the fast one multiplies by it
    launch_pointwise(_softplus_b, out, inputs, prom.compute, [prm["beta"], prm["threshold"], _inv(prm["beta"])],
                     fast=_softplus_f)


_act("softplus", "softplus(Tensor input, float beta=1.0, float threshold=20.0)", _softplus_b,
     lambda x, beta=1.0, threshold=20.0: np.where(x * x.dtype.type(beta) > threshold, x,
                                                  np.log1p(np.exp(x * x.dtype.type(beta))) / x.dtype.type(beta)),
     _or_softplus, params=("beta", "threshold"), flops=6, domain="wide",
     param_cases=[{}, {"beta": 2.0, "threshold": 5.0}], triton=_softplus_triton)


@jit
def _logsigmoid_b(x, p0, p1, p2):
    # ATen: min(x, 0) - log1p(exp(-|x|)), stable at both ends
    return nan_minimum(x, tl.zeros_like(x)) - libdevice.log1p(libdevice.exp(-tl.abs(x)))


@jit
def _logsigmoid_f(x, p0, p1, p2):
    return nan_minimum(x, tl.zeros_like(x)) - _log1p_unit_f(tl.exp(-tl.abs(x)))


_act("logsigmoid", "logsigmoid(Tensor input)", _logsigmoid_b,
     lambda x: np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x))),
     # -log(1 + e^-x) by NumPy's logaddexp: log(sigmoid(x)) would round sigmoid to 1 above x ~ 37 (result 0, not
     # -e^-x) and to 0 below x ~ -745 (-inf, not x)
     lambda x: -np.logaddexp(0.0, -_f64(x)), flops=6, domain="wide", fast=_logsigmoid_f)


@jit
def _relu6_of(v):
    # min(max(v, 0), 6) with NaN kept (ATen's std::min/std::max on a NaN first operand return it; tl.minimum
    # and tl.maximum without propagate_nan would return the other operand on the GPU)
    return nan_minimum(nan_maximum(v, tl.zeros_like(v)), tl.full(v.shape, 6.0, v.dtype))


@jit
def _hardsigmoid_b(x, p0, p1, p2):
    return H.div_rn(_relu6_of(x + 3.0), tl.full(x.shape, 6.0, x.dtype))


@jit
def _hardswish_b(x, p0, p1, p2):
    return H.div_rn(x * _relu6_of(x + 3.0), tl.full(x.shape, 6.0, x.dtype))


def _or_hardsigmoid(x):
    x = _f64(x)
    return np.where(x <= -3, 0.0, np.where(x >= 3, 1.0, x / 6 + 0.5))


@jit
def _hardsigmoid_f(x, p0, p1, p2):
    return _relu6_of(x + 3.0) * (1.0 / 6.0)  # a multiply, within 1.5 ulp of the correctly rounded division


@jit
def _hardswish_f(x, p0, p1, p2):
    return (x * _relu6_of(x + 3.0)) * (1.0 / 6.0)


_act("hardsigmoid", "hardsigmoid(Tensor input, bool inplace=False)", _hardsigmoid_b,
     lambda x: np.minimum(np.maximum(x + 3, 0), 6) / 6, _or_hardsigmoid, inplace=True, domain="wide", flops=3,
     fast=_hardsigmoid_f)
_act("hardswish", "hardswish(Tensor input, bool inplace=False)", _hardswish_b,
     lambda x: x * np.minimum(np.maximum(x + 3, 0), 6) / 6, lambda x: _f64(x) * _or_hardsigmoid(x), inplace=True,
     domain="wide", flops=4, fast=_hardswish_f)


@jit
def _elu_b(x, alpha, p1, p2):
    return tl.where(x > 0, x, alpha * libdevice.expm1(x))


def _or_elu(x, alpha=1.0):
    x = _f64(x)
    return np.where(x > 0, x, alpha * np.expm1(x))


@jit
def _elu_f(x, alpha, p1, p2):
    return tl.where(x > 0, x, alpha * _expm1_neg_f(x))


_act("elu", "elu(Tensor input, float alpha=1.0, bool inplace=False)", _elu_b,
     lambda x, alpha=1.0: np.where(x > 0, x, x.dtype.type(alpha) * np.expm1(x)), _or_elu, params=("alpha",),
     inplace=True, flops=4, domain="wide", param_cases=[{}, {"alpha": 0.5}], fast=_elu_f)


@jit
def _celu_b(x, alpha, p1, p2):
    return tl.where(x > 0, x, alpha * libdevice.expm1(H.div_rn(x, alpha)))


@jit
def _celu_f(x, alpha, inv_alpha, p2):
    # for alpha > 0 only (_celu_triton): then x / alpha <= 0 wherever the expm1 branch is taken; 1 / alpha comes
    # from the host
    return tl.where(x > 0, x, alpha * _expm1_neg_f(x * inv_alpha))


def _celu_triton(out, inputs, prom, prm):
    # the exact body ignores its second parameter; the fast one multiplies by it
    launch_pointwise(_celu_b, out, inputs, prom.compute, [prm["alpha"], _inv(prm["alpha"])],
                     fast=_celu_f if prm["alpha"] > 0 else None)


def _celu_prepare(a, prom):
    check(a["alpha"] != 0, "ZeroDivisionError: alpha cannot be 0 for CELU")
    return {"alpha": a["alpha"]}


_act("celu", "celu(Tensor input, float alpha=1.0, bool inplace=False)", _celu_b,
     lambda x, alpha=1.0: np.where(x > 0, x, x.dtype.type(alpha) * np.expm1(x / x.dtype.type(alpha))),
     lambda x, alpha=1.0: np.where(_f64(x) > 0, _f64(x), alpha * np.expm1(_f64(x) / alpha)), params=("alpha",),
     namespaces=("torch", "functional"), inplace=True, prepare=_celu_prepare, flops=5, domain="wide",
     param_cases=[{}, {"alpha": 2.0}, {"alpha": -1.5}], triton=_celu_triton,
     errors=[(lambda nbx: (nbx.tensor([1.]), 0.0), {}, RuntimeError, "alpha cannot be 0")])


@jit
def _selu_b(x, p0, p1, p2):
    return 1.0507009873554804934193349852946 * tl.where(
        x > 0, x, 1.6732632423543772848170429916717 * libdevice.expm1(x))


@jit
def _selu_f(x, p0, p1, p2):
    return 1.0507009873554804934193349852946 * tl.where(
        x > 0, x, 1.6732632423543772848170429916717 * _expm1_neg_f(x))


_act("selu", "selu(Tensor input, bool inplace=False)", _selu_b,
     lambda x: x.dtype.type(_SELU_SCALE) * np.where(x > 0, x, x.dtype.type(_SELU_ALPHA) * np.expm1(x)),
     lambda x: _SELU_SCALE * _or_elu(x, _SELU_ALPHA), namespaces=("torch", "functional"), inplace=True, flops=5,
     domain="wide", fast=_selu_f)


@jit
def _softsign_b(x, p0, p1, p2):
    return H.div_rn(x, 1.0 + tl.abs(x))


declare("softsign", "softsign(Tensor input)", family=_FAM, body=_softsign_b, cpu=lambda x: x / (1 + np.abs(x)),
        oracle=lambda x: _f64(x) / (1 + np.abs(_f64(x))), promotion="int_to_float", dtypes=INTS | FLOATS,
        namespaces=_F, method=False, inplace=False, domain="wide", flops=3)


@jit
def _tanhshrink_b(x, p0, p1, p2):
    return x - libdevice.tanh(x)


declare("tanhshrink", "tanhshrink(Tensor input)", family=_FAM, body=_tanhshrink_b, cpu=lambda x: x - np.tanh(x),
        oracle=lambda x: _f64(x) - np.tanh(_f64(x)), promotion="int_to_float",
        dtypes=INTS | FLOATS | {T.uint16, T.uint32, T.uint64}, namespaces=_F, method=False, inplace=False,
        domain="any", flops=5,
        tolerance={"extra_atol": lambda x: np.abs(_f64(x)),
                   "reason": "x - tanh(x) cancels near 0: the error scales with |x|, not the result (~x**3/3)"})


@jit
def _sigmoid_b(x, p0, p1, p2):
    return H.div_rn(tl.full(x.shape, 1.0, x.dtype), 1.0 + libdevice.exp(-x))


@jit
def _sigmoid_fb(x, p0, p1, p2):
    return _sigmoid_f(x)


declare("sigmoid", "sigmoid(Tensor input, *, Tensor? out=None)", family=_FAM, body=_sigmoid_b, fast=_sigmoid_fb,
        cpu=lambda x: 1 / (1 + np.exp(-x)), oracle=_or_sigmoid, promotion="int_to_float", dtypes=NO_FP8,
        namespaces=("torch", "functional"), method=True, inplace=True, domain="wide", flops=4,
        aliases=())


# --- glu: two halves of one tensor ---------------------------------------------------------------------------
@jit
def _glu_b(a, b, p0, p1, p2):
    return a * H.div_rn(tl.full(b.shape, 1.0, b.dtype), 1.0 + libdevice.exp(-b))


def _glu_driver(rec, args, *, out=None, inplace=None):
    """glu(input, dim=-1) = a * sigmoid(b) with (a, b) the halves of ``input`` along ``dim``: one pointwise
    launch over the two strided halves (views, no copy)."""
    from .dispatch import pointwise
    x = args["input"]
    check(x.ndim > 0, "glu does not support scalars because halving size must be even")
    d = wrap_dim(args["dim"], x.ndim, fn="glu")
    n = x.shape[d]
    check(n % 2 == 0, lambda: f"Halving dimension must be even, but dimension {d} is size {n}")
    half = n // 2
    a, b = x.narrow(d, 0, half), x.narrow(d, half, half)
    return pointwise(rec, {"input": a, "other": b, "dim": d}, out=out)


@jit
def _glu_f(a, b, p0, p1, p2):
    return a * _sigmoid_f(b)


declare("glu", "glu(Tensor input, Tensor other, int dim=-1)", family=_FAM, body=_glu_b, fast=_glu_f,
        cpu=lambda a, b, dim=-1: a / (1 + np.exp(-b)), oracle=lambda a, b, dim=-1: _f64(a) * _or_sigmoid(b),
        promotion="default", dtypes=FLOATS, namespaces=_F, method=False, inplace=False, driver=_glu_driver,
        public_schema="glu(Tensor input, int dim=-1)", domain="any", flops=5, generic_test=False,
        errors=[(lambda nbx: (nbx.ones(2, 3), 1), {}, RuntimeError, "must be even"),
                (lambda nbx: (nbx.tensor(1.),), {}, RuntimeError, "scalars")])

