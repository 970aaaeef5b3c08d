"""softmax and log_softmax along one dim (``nbx.softmax``, ``Tensor.softmax``, ``nbx.nn.functional.softmax``).

``softmax(x)_i = exp(x_i - m) / sum_j exp(x_j - m)`` and ``log_softmax(x)_i = x_i - m - log(sum_j exp(x_j - m))``
with ``m`` the row maximum (the usual shift that keeps exp in range). Semantics are PyTorch's: ``dtype=``
converts the input first; the result has the input's (or ``dtype``'s) floating dtype and integer inputs are
refused; a row that is all -inf gives NaN whatever its length (``-inf - (-inf)`` is NaN, as PyTorch computes
it); a +inf in a row gives NaN; NaN propagates. ``nn.functional.softmax(input, dim=None)`` picks PyTorch's
legacy implicit dim (0 for 0-, 1- and 3-dim inputs, else 1) with a warning.

**Kernels**: the scanned dim is canonicalised like a reduction (:func:`~.reduction.canonical3`):
``_softmax_rows_kernel`` when it is the innermost group (tiles ``[BLOCK_M, BLOCK_N]`` along the row) and
``_softmax_cols_kernel`` when it is strided (``[BLOCK_N, BLOCK_I]`` with lanes along the contiguous inner axis).
A row that fits one tile (``N <= BLOCK_N``) is read once and written once. Longer rows (a 151 936-token
vocabulary) take the looped path in the same kernel: one pass keeps the running maximum and the sum of
exponentials rescaled to it (Milakov & Gimelshein, "Online normalizer calculation for softmax", 2018), a second
pass writes ``exp(x - m) / s``: two reads and one write, one launch. float16 and bfloat16 compute in float32 and
round once; float64 computes in float64. As PyTorch's CUDA kernels, the final ``exp(x - m) / s`` is an IEEE
division (:func:`~.triton_helpers.div_rn`; Triton's float32 ``/`` is the 2-ulp ``div.full.f32``) and
``log(s)`` is libdevice's. The exponentials are ``tl.exp`` (``ex2.approx`` of ``x * log2(e)``), a deliberate
fast path (one SFU instruction per element, two per element on the looped path): its relative error, about
``|x - m| * 2**-24`` plus 2 ulp, stays below float32's rtol (1.3e-6) wherever a probability exceeds the atol
(1e-5, i.e. ``x - m > -11.5``), and the family's tests widen both by the row length
(:func:`~nbxtensor.dtypes.tolerance`), so the tolerance table covers it (checked on the sm_90 code by
tests/ops/test_ptx_audit.py).

The ``cpu`` implementation is NumPy in the same dtypes; the oracle is float64.
"""

from __future__ import annotations

import warnings

import numpy as np

from .._errors import check
from ..dtypes import table as T
from ..dtypes.casting import cast_array
from ..runtime.configs import launch_config
from ..runtime.triton_compat import jit, tl
from ..shapes import contiguous_strides, wrap_dim
from ..tensor.core import Tensor, host_view, new_empty
from . import dispatch, registry
from .reduction import (FLOATS, canonical3, cdiv, check_input, collapse_dims, finish_out, launch_quiet, new_out,
                        tmp_like_groups)
from .registry import Cost, OpRecord, register
from .triton_helpers import TL_DTYPES, convert, div_rn, libdevice, maximum, nan_max

__all__ = ["launch_softmax"]


# ---------------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------------
@jit
def _online(m, s, x, AXIS: tl.constexpr):
    """Fold a block ``x`` (masked lanes -inf) into the running (max, sum of exp(x - max)) along AXIS.

    The shift is 0 while the running max is -inf, so blocks of -inf add 0 instead of NaN; an all -inf row
    keeps (-inf, 0) and ends as NaN in the output pass; +inf and NaN make the sum NaN, as PyTorch's. ``tl.exp``
    is the bounded fast path of the module docstring."""
    m_new = maximum(m, nan_max(x, AXIS))
    shift = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp(m - shift)
    s = tl.where(s == 0.0, 0.0, s * alpha) + tl.sum(tl.exp(x - tl.expand_dims(shift, AXIS)), AXIS)
    return m_new, s


@jit
def _softmax_rows_kernel(x_ptr, y_ptr, O, N, sxo, sxn, syo, syn, LOG: tl.constexpr, ONE_TILE: tl.constexpr,
                         ACC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """softmax of ``x[o, n]`` over n (innermost) for BLOCK_M rows."""
    pid = tl.program_id(0)
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < O
    lanes = tl.arange(0, BLOCK_N).to(tl.int64)
    xrow = x_ptr + rows[:, None] * sxo
    yrow = y_ptr + rows[:, None] * syo
    if ONE_TILE:
        msk = row_ok[:, None] & (lanes < N)[None, :]
        x = convert(tl.load(xrow + lanes[None, :] * sxn, mask=msk), ACC)
        x = tl.where(msk, x, float("-inf"))
        m = nan_max(x, 1)
        e = tl.exp(x - m[:, None])  # the fast path the module docstring bounds (ex2.approx)
        s = tl.sum(tl.where(msk, e, 0.0), 1)
        if LOG:
            y = x - m[:, None] - libdevice.log(s)[:, None]
        else:
            y = div_rn(e, s[:, None])
        tl.store(yrow + lanes[None, :] * syn, convert(y, y_ptr.dtype.element_ty), mask=msk)
    else:
        m = tl.full([BLOCK_M], float("-inf"), ACC)
        s = tl.zeros([BLOCK_M], ACC)
        for n0 in range(0, N, BLOCK_N):
            n = n0 + lanes
            msk = row_ok[:, None] & (n < N)[None, :]
            x = convert(tl.load(xrow + n[None, :] * sxn, mask=msk), ACC)
            m, s = _online(m, s, tl.where(msk, x, float("-inf")), 1)
        ls = libdevice.log(s)
        for n0 in range(0, N, BLOCK_N):
            n = n0 + lanes
            msk = row_ok[:, None] & (n < N)[None, :]
            x = convert(tl.load(xrow + n[None, :] * sxn, mask=msk), ACC)
            if LOG:
                y = x - m[:, None] - ls[:, None]
            else:
                y = div_rn(tl.exp(x - m[:, None]), s[:, None])
            tl.store(yrow + n[None, :] * syn, convert(y, y_ptr.dtype.element_ty), mask=msk)


@jit
def _softmax_cols_kernel(x_ptr, y_ptr, I, N, sxo, sxn, sxi, syo, syn, syi, LOG: tl.constexpr,
                         ONE_TILE: tl.constexpr, ACC: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_I: tl.constexpr):
    """softmax of ``x[o, n, i]`` over n (strided) for one o and BLOCK_I consecutive i."""
    pid = tl.program_id(0)
    nib = tl.cdiv(I, BLOCK_I)
    o = (pid // nib).to(tl.int64)
    cols = (pid % nib).to(tl.int64) * BLOCK_I + tl.arange(0, BLOCK_I)
    col_ok = cols < I
    lanes = tl.arange(0, BLOCK_N).to(tl.int64)
    xcol = x_ptr + o * sxo + cols[None, :] * sxi
    ycol = y_ptr + o * syo + cols[None, :] * syi
    if ONE_TILE:
        msk = (lanes < N)[:, None] & col_ok[None, :]
        x = convert(tl.load(xcol + lanes[:, None] * sxn, mask=msk), ACC)
        x = tl.where(msk, x, float("-inf"))
        m = nan_max(x, 0)
        e = tl.exp(x - m[None, :])
        s = tl.sum(tl.where(msk, e, 0.0), 0)
        if LOG:
            y = x - m[None, :] - libdevice.log(s)[None, :]
        else:
            y = div_rn(e, s[None, :])
        tl.store(ycol + lanes[:, None] * syn, convert(y, y_ptr.dtype.element_ty), mask=msk)
    else:
        m = tl.full([BLOCK_I], float("-inf"), ACC)
        s = tl.zeros([BLOCK_I], ACC)
        for n0 in range(0, N, BLOCK_N):
            n = n0 + lanes
            msk = (n < N)[:, None] & col_ok[None, :]
            x = convert(tl.load(xcol + n[:, None] * sxn, mask=msk), ACC)
            m, s = _online(m, s, tl.where(msk, x, float("-inf")), 0)
        ls = libdevice.log(s)
        for n0 in range(0, N, BLOCK_N):
            n = n0 + lanes
            msk = (n < N)[:, None] & col_ok[None, :]
            x = convert(tl.load(xcol + n[:, None] * sxn, mask=msk), ACC)
            if LOG:
                y = x - m[None, :] - ls[None, :]
            else:
                y = div_rn(tl.exp(x - m[None, :]), s[None, :])
            tl.store(ycol + n[:, None] * syn, convert(y, y_ptr.dtype.element_ty), mask=msk)


def launch_softmax(x: Tensor, dim: int, y: Tensor, log: bool) -> None:
    """softmax (``log=False``) or log_softmax of ``x`` along ``dim`` into ``y`` (x's shape, any strides)."""
    flags = [d == dim for d in range(x.ndim)]
    can = canonical3(x.shape, x.stride(), flags)
    if can is None:
        x = x.contiguous()
        can = canonical3(x.shape, x.stride(), flags)
    (O, N, I), (sxo, sxn, sxi), groups = can
    st = tuple(collapse_dims(y.shape, y.stride(), g) for g in groups)
    ycopy = None
    if None in st:
        ycopy, y = y, tmp_like_groups(y, groups)
        st = tuple(collapse_dims(y.shape, y.stride(), g) for g in groups)
    acc = TL_DTYPES["float64" if x.dtype is T.float64 else "float32"]
    if I == 1:
        cfg = launch_config("softmax_rows", x.device, dtypes=(x.dtype,), rows=O, cols=N)
        launch_quiet(_softmax_rows_kernel, (cdiv(O, cfg["BLOCK_M"]),), x, y, O, N, sxo, sxn, st[0], st[1], LOG=log,
                     ONE_TILE=N <= cfg["BLOCK_N"], ACC=acc, **cfg)
    else:
        cfg = launch_config("softmax_cols", x.device, dtypes=(x.dtype,), rows=N, cols=I)
        launch_quiet(_softmax_cols_kernel, (O * cdiv(I, cfg["BLOCK_I"]),), x, y, I, N, sxo, sxn, sxi, st[0], st[1],
                     st[2], LOG=log, ONE_TILE=N <= cfg["BLOCK_N"], ACC=acc, **cfg)
    if ycopy is not None:
        ycopy.copy_(y)


# ---------------------------------------------------------------------------------------------------------
# CPU implementation and oracle
# ---------------------------------------------------------------------------------------------------------
def _cpu_softmax(x: Tensor, dim: int, y: Tensor, *, log: bool) -> None:
    acc = T.float64 if x.dtype is T.float64 else T.float32
    a = host_view(x)
    a = cast_array(a, x.dtype, acc) if x.dtype is not acc else np.asarray(a)
    ax = dim if a.ndim else None
    with np.errstate(all="ignore"):
        m = np.max(a, axis=ax, keepdims=True)
        sh = a - m
        e = np.exp(sh)
        s = np.sum(e, axis=ax, keepdims=True)
        r = sh - np.log(s) if log else e / s
    host_view(y)[...] = cast_array(np.asarray(r, dtype=acc.numpy), acc, y.dtype)


def _oracle(log: bool):
    def oracle(a: np.ndarray, dim=None, dtype=None, **params) -> np.ndarray:
        x = np.asarray(a)
        if dtype is not None:
            x = cast_array(x, T.dtype_from(x.dtype), T.dtype_from(dtype))
        x = x.astype(np.float64)
        if x.size == 0:
            return x
        ax = wrap_dim(dim, x.ndim) if x.ndim else None
        with np.errstate(all="ignore"):
            m = np.max(x, axis=ax, keepdims=True)
            lse = np.log(np.sum(np.exp(x - m), axis=ax, keepdims=True)) + m
            return x - lse if log else np.exp(x - lse)
    return oracle


# ---------------------------------------------------------------------------------------------------------
# Driver and records
# ---------------------------------------------------------------------------------------------------------
def _implicit_dim(ndim: int, fn: str) -> int:
    warnings.warn(f"Implicit dimension choice for {fn} has been deprecated. Change the call to include dim=X as an "
                  "argument.", UserWarning, stacklevel=4)
    return 0 if ndim in (0, 1, 3) else 1


def _driver(rec, args, *, out=None, inplace=None):
    fn = rec.name
    log = fn == "log_softmax"
    x = args["input"]
    check_input(x, fn)
    dim = args.get("dim")
    if dim is None:  # only nn.functional's signature lets dim be None
        dim = _implicit_dim(x.ndim, fn)
    dim = wrap_dim(dim, x.ndim, fn=fn)
    dt = args.get("dtype")
    res = dt if dt is not None else x.dtype
    check(res.kind == T.KIND_FLOAT, lambda: f"{fn}: \"{fn}_lastdim_kernel_impl\" not implemented for "
          f"'{dispatch.torch_dtype_name(res)}' (floating-point results only; pass dtype=)", NotImplementedError)
    o, work = new_out(out, x.shape, res, x.device, fn, exact=True)
    dispatch.check_no_partial_overlap(o, x, fn)
    if x.numel() == 0:
        return o
    xin = x if res is x.dtype or (res is T.float32 and x.dtype in (T.float16, T.bfloat16)) else x.to(res)
    registry.impl(fn, x.device.type)(xin, dim, work, log=log)
    return finish_out(o, work)


def _passes(x: Tensor, dim: int) -> int:
    """Reads of the input per launch: 1 when a row fits the arch's tile, 2 on the looped path."""
    if x.ndim == 0 or x.numel() == 0:
        return 1
    can = canonical3(x.shape, x.stride(), [d == dim for d in range(x.ndim)]) or \
        canonical3(x.shape, contiguous_strides(x.shape), [d == dim for d in range(x.ndim)])
    (O, N, I), _, _ = can
    if I == 1:
        block = launch_config("softmax_rows", x.device, dtypes=(x.dtype,), rows=O, cols=N)["BLOCK_N"]
    else:
        block = launch_config("softmax_cols", x.device, dtypes=(x.dtype,), rows=N, cols=I)["BLOCK_N"]
    return 1 if N <= block else 2


def _cost(name: str):
    """One read and one write of the tensor when a row fits one tile of the device's config; a longer row is
    read twice (the looped path). Flops: max, subtract, exp, sum, divide per element."""
    def cost(*args, **kwargs) -> Cost:
        a = registry.get(name).extra["schema_obj"].bind(args, kwargs, fn=name)
        x = a["input"]
        res = a.get("dtype") or x.dtype
        reads = _passes(x, wrap_dim(a["dim"], x.ndim, fn=name))
        return Cost(flops=5 * x.numel(), bytes_read=reads * x.numel() * x.dtype.itemsize,
                    bytes_written=x.numel() * res.itemsize)
    return cost


def _cpu(x, dim, y, *, log):
    _cpu_softmax(x, dim, y, log=log)


def _triton(x, dim, y, *, log):
    launch_softmax(x, dim, y, log)


def _t(*shape, dtype=T.float32):
    return lambda dev: new_empty(shape, dtype, dev).fill_(0)


# Error inputs as data: (label, args builders, kwargs, exception type, message regex).
_ERRORS = [("integer input", (_t(2, 3, dtype=T.int64),), {"dim": 1}, NotImplementedError, "not implemented"),
           ("dim out of range", (_t(2, 3),), {"dim": 2}, IndexError, "out of range"),
           ("dim missing", (_t(2, 3),), {}, TypeError, "missing required argument 'dim'"),
           ("out dtype", (_t(2, 3),), {"dim": 1, "out": _t(2, 3, dtype=T.float64)}, RuntimeError, "dtype")]

for _name in ("softmax", "log_softmax"):
    _rec = OpRecord(name=_name, family="softmax", cpu=_cpu, triton=_triton, oracle=_oracle(_name == "log_softmax"),
                    cost=_cost(_name),
                    extra=dict(schema=f"{_name}(Tensor input, int dim, dtype? dtype=None, *, Tensor? out=None)",
                               driver=_driver, dtypes=FLOATS, errors=_ERRORS,
                               doc=f"``{_name}(input, dim, dtype=None)`` along ``dim`` (nn.functional: ``dim=None`` "
                                   "picks PyTorch's legacy implicit dim with a warning). The result has the input's "
                                   "floating dtype or ``dtype``; an all -inf row gives NaN. Raises IndexError (dim), "
                                   "NotImplementedError (integer results). Kernels: :mod:`nbxtensor.ops.softmax`.",
                               namespace_schemas={"functional": f"{_name}(Tensor input, int? dim=None, "
                                                                f"int _stacklevel=3, dtype? dtype=None)"}))
    register(_rec)
del _name, _rec
