"""Activation functions, exported in ``nbxtensor.nn.functional`` under PyTorch's names and arguments:
relu, relu6, gelu ('none' | 'tanh'), silu, mish, softplus, sigmoid (in :mod:`.elementwise`, also here),
logsigmoid, hardsigmoid, hardswish, hardtanh, elu, celu, selu, leaky_relu, threshold, glu, softsign,
tanhshrink.

Each is one pointwise record (:func:`.pointwise.declare`): a ``@jit`` scalar body for the Triton kernel, a
NumPy function for the ``cpu`` device and an independent float64 oracle. Formulas are ATen's CPU kernels
(aten/src/ATen/native/cpu/Activation.cpp), so edge cases (NaN, the softplus threshold, the celu alpha)
match; float16 and bfloat16 compute in float32 and round once. Functions that take ``inplace=`` in PyTorch
take it here and write into ``input``.
"""

from __future__ import annotations

import math

import numpy as np

from .._errors import check
from ..dtypes import table as T
from ..runtime.triton_compat import jit, tl
from ..shapes import wrap_dim
from . import triton_helpers as H
from .elementwise import FLOATS, INTS, NO_FP8, _erf_np, _or_erf
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
        r = tl.where(x < 0, tl.zeros_like(x), x)  # NaN stays NaN (x < 0 is false)
    return r


_act("relu", "relu(Tensor input, bool inplace=False)", _relu_b, lambda x, **k: np.where(x < 0, x.dtype.type(0), x),
     lambda x: np.where(_f64(x) < 0, 0.0, _f64(x)) if np.asarray(x).dtype.kind == "f" else np.maximum(x, 0),
     dtypes=INTS | FLOATS, namespaces=("torch", "functional"), method=True, inplace=True, flops=1)


@jit
def _hardtanh_b(x, lo, hi, p2):
    return H.minimum(H.maximum(x, lo), hi)


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
    x = _f64(x)
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + _or_erf(x / math.sqrt(2)))


def _gelu_prepare(a, prom):
    ap = a["approximate"]
    check(ap in ("none", "tanh"), lambda: f"approximate argument must be either none or tanh.")
    return {"approximate": ap}


def _gelu_triton(out, inputs, prom, prm):
    launch_pointwise(_gelu_tanh_b if prm["approximate"] == "tanh" else _gelu_b, out, inputs, prom.compute)


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


_act("silu", "silu(Tensor input, bool inplace=False)", _silu_b, lambda x: x / (1 + np.exp(-x)),
     lambda x: _f64(x) * _or_sigmoid(x), inplace=True, flops=5)


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


_act("mish", "mish(Tensor input, bool inplace=False)", _mish_b, lambda x: x * np.tanh(np.log1p(np.exp(x))),
     lambda x: _f64(x) * np.tanh(_or_softplus(x)), inplace=True, flops=8)


@jit
def _softplus_b(x, beta, threshold, p2):
    bx = x * beta
    return tl.where(bx > threshold, x, H.div_rn(libdevice.log1p(libdevice.exp(bx)), beta))


_act("softplus", "softplus(Tensor input, float beta=1.0, float threshold=20.0)", _softplus_b,
     lambda x, beta=1.0, threshold=20.0: np.where(x * x.dtype.type(beta) > threshold, x,
                                                  np.log1p(np.exp(x * x.dtype.type(beta))) / x.dtype.type(beta)),
     _or_softplus, params=("beta", "threshold"), flops=6, domain="wide",
     param_cases=[{}, {"beta": 2.0, "threshold": 5.0}])


@jit
def _logsigmoid_b(x, p0, p1, p2):
    # ATen: min(x, 0) - log1p(exp(-|x|)), stable at both ends
    return H.minimum(x, tl.zeros_like(x)) - libdevice.log1p(libdevice.exp(-tl.abs(x)))


_act("logsigmoid", "logsigmoid(Tensor input)", _logsigmoid_b,
     lambda x: np.minimum(x, 0) - np.log1p(np.exp(-np.abs(x))), lambda x: np.log(_or_sigmoid(x)), flops=6,
     domain="wide")


@jit
def _relu6_of(v):
    # min(max(v, 0), 6) with NaN kept (ATen's std::min/std::max on a NaN first operand return it; tl.minimum
    # and tl.maximum would return the other operand on the GPU)
    return H.minimum(H.maximum(v, tl.zeros_like(v)), tl.full(v.shape, 6.0, v.dtype))


@jit
def _hardsigmoid_b(x, p0, p1, p2):
    return H.div_rn(_relu6_of(x + 3.0), tl.full(x.shape, 6.0, x.dtype))


@jit
def _hardswish_b(x, p0, p1, p2):
    return H.div_rn(x * _relu6_of(x + 3.0), tl.full(x.shape, 6.0, x.dtype))


def _or_hardsigmoid(x):
    x = _f64(x)
    return np.where(x <= -3, 0.0, np.where(x >= 3, 1.0, x / 6 + 0.5))


_act("hardsigmoid", "hardsigmoid(Tensor input, bool inplace=False)", _hardsigmoid_b,
     lambda x: np.minimum(np.maximum(x + 3, 0), 6) / 6, _or_hardsigmoid, inplace=True, domain="wide", flops=3)
_act("hardswish", "hardswish(Tensor input, bool inplace=False)", _hardswish_b,
     lambda x: x * np.minimum(np.maximum(x + 3, 0), 6) / 6, lambda x: _f64(x) * _or_hardsigmoid(x), inplace=True,
     domain="wide", flops=4)


@jit
def _elu_b(x, alpha, p1, p2):
    return tl.where(x > 0, x, alpha * libdevice.expm1(x))


def _or_elu(x, alpha=1.0):
    x = _f64(x)
    return np.where(x > 0, x, alpha * np.expm1(x))


_act("elu", "elu(Tensor input, float alpha=1.0, bool inplace=False)", _elu_b,
     lambda x, alpha=1.0: np.where(x > 0, x, x.dtype.type(alpha) * np.expm1(x)), _or_elu, params=("alpha",),
     inplace=True, flops=4, domain="wide", param_cases=[{}, {"alpha": 0.5}])


@jit
def _celu_b(x, alpha, p1, p2):
    return tl.where(x > 0, x, alpha * libdevice.expm1(H.div_rn(x, alpha)))


def _celu_prepare(a, prom):
    check(a["alpha"] != 0, "ZeroDivisionError: alpha cannot be 0 for CELU")
    return {"alpha": a["alpha"]}


_act("celu", "celu(Tensor input, float alpha=1.0, bool inplace=False)", _celu_b,
     lambda x, alpha=1.0: np.where(x > 0, x, x.dtype.type(alpha) * np.expm1(x / x.dtype.type(alpha))),
     lambda x, alpha=1.0: np.where(_f64(x) > 0, _f64(x), alpha * np.expm1(_f64(x) / alpha)), params=("alpha",),
     namespaces=("torch", "functional"), inplace=True, prepare=_celu_prepare, flops=5, domain="wide",
     param_cases=[{}, {"alpha": 2.0}],
     errors=[(lambda nbx: (nbx.tensor([1.]), 0.0), {}, RuntimeError, "alpha cannot be 0")])


@jit
def _selu_b(x, p0, p1, p2):
    return 1.0507009873554804934193349852946 * tl.where(
        x > 0, x, 1.6732632423543772848170429916717 * libdevice.expm1(x))


_act("selu", "selu(Tensor input, bool inplace=False)", _selu_b,
     lambda x: x.dtype.type(_SELU_SCALE) * np.where(x > 0, x, x.dtype.type(_SELU_ALPHA) * np.expm1(x)),
     lambda x: _SELU_SCALE * _or_elu(x, _SELU_ALPHA), namespaces=("torch", "functional"), inplace=True, flops=5,
     domain="wide")


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


declare("sigmoid", "sigmoid(Tensor input, *, Tensor? out=None)", family=_FAM, body=_sigmoid_b,
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


declare("glu", "glu(Tensor input, Tensor other, int dim=-1)", family=_FAM, body=_glu_b,
        cpu=lambda a, b, dim=-1: a / (1 + np.exp(-b)), oracle=lambda a, b, dim=-1: _f64(a) * _or_sigmoid(b),
        promotion="default", dtypes=FLOATS, namespaces=_F, method=False, inplace=False, driver=_glu_driver,
        public_schema="glu(Tensor input, int dim=-1)", domain="any", flops=5, generic_test=False,
        errors=[(lambda nbx: (nbx.ones(2, 3), 1), {}, RuntimeError, "must be even"),
                (lambda nbx: (nbx.tensor(1.),), {}, RuntimeError, "scalars")])

