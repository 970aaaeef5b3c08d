"""Scans along one dim: cumsum, cumprod, cummax, cummin (values and indices) and logcumsumexp.

Semantics are PyTorch's: ``cumsum``/``cumprod`` of integers and bool give int64 (``dtype=`` converts the input
first), floats keep their dtype; ``cummax``/``cummin`` return ``(values, indices)`` named tuples where a tie
takes the later index and a NaN, once seen, stays the value (each later NaN taking over the index), exactly as
PyTorch's ``x >= running || isnan(x)`` rule; ``logcumsumexp`` is floating-point only and treats -inf rows as
-inf and NaN as contagious.

**Kernels** (the reduction family's canonical form, :func:`~.reduction.canonical3`, with the scanned dim as the
"reduced" group): ``_scan_rows_kernel`` when the scanned axis is the innermost group (tiles ``[BLOCK_M rows,
BLOCK_R]``, ``tl.associative_scan`` along axis 1) and ``_scan_cols_kernel`` when it is strided (tiles
``[BLOCK_R, BLOCK_I]`` with lanes along the contiguous inner axis, scanned along axis 0). Each program walks its
rows block by block and carries the running value (and index) from one block to the next, so any length works
with one launch. float16 and bfloat16 accumulate in float32 (``ones(4096, float16).cumsum(0)`` ends at 4096,
where a float16 accumulator stalls at 2048), integers in int64. Scans are sequential along a row: a 1-D scan
uses one program (a decoupled look-back scan would spread it; scans are not in issue 4's bandwidth targets).

The ``cpu`` implementations use NumPy's accumulate functions in the same dtypes (cummax/cummin indices from the
positions where the running value was taken over); the oracles run PyTorch's sequential rules in float64.
"""

from __future__ import annotations

import numpy as np

from .._errors import check
from ..dtypes import table as T
from ..dtypes.casting import cast_array
from ..dtypes.table import DType
from ..runtime.configs import launch_config
from ..runtime.triton_compat import jit, tl
from ..shapes import wrap_dim
from ..tensor.core import Tensor, host_view, new_empty
from . import dispatch, registry
from .reduction import (BARE_UINTS, FLOATS, INTS, canonical3, cdiv, check_input, collapse_dims, compute_input,
                        finish_out, launch_quiet, new_out, out_dtypes, refuse_dtype, return_types,
                        tmp_like_groups)
from .registry import Cost, OpRecord, register
from .triton_helpers import TL_DTYPES, convert, libdevice, maximum, minimum

__all__ = ["launch_scan"]

S_SUM, S_PROD, S_MAX, S_MIN, S_LSE = range(5)


# ---------------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------------
@jit
def _add(a, b):
    return a + b


@jit
def _mul(a, b):
    return a * b


@jit
def _cummax_combine(va, ia, vb, ib):
    # (a before b) PyTorch's sequential rule "take x when x >= running or x is NaN": b wins ties (the later
    # index) and a NaN b; a NaN a stays against any non-NaN b. Associative: it picks the last maximum under
    # the order where NaN is above everything.
    take_b = (vb >= va) | (vb != vb)
    return tl.where(take_b, vb, va), tl.where(take_b, ib, ia)


@jit
def _cummin_combine(va, ia, vb, ib):
    take_b = (vb <= va) | (vb != vb)
    return tl.where(take_b, vb, va), tl.where(take_b, ib, ia)


@jit
def _logaddexp(a, b):
    # log(exp(a) + exp(b)) = max + log1p(exp(min - max)) (ATen's _log_add_exp_helper, with libdevice's log1p
    # and exp as nvcc's code: tl.log/tl.exp are lg2/ex2.approx); equal arguments (also +-inf) give
    # max + log 2, so -inf stays -inf and +inf +inf; NaN propagates through the max.
    mx = maximum(a, b)
    mn = minimum(a, b)
    e = tl.where(mx == mn, 0.0, mn - mx)
    return mx + libdevice.log1p(libdevice.exp(e))


@jit
def _scan_tile(v, i, AXIS: tl.constexpr, KIND: tl.constexpr):
    if KIND == 0:
        v = tl.associative_scan(v, AXIS, _add)
    elif KIND == 1:
        v = tl.associative_scan(v, AXIS, _mul)
    elif KIND == 2:
        v, i = tl.associative_scan((v, i), AXIS, _cummax_combine)
    elif KIND == 3:
        v, i = tl.associative_scan((v, i), AXIS, _cummin_combine)
    else:
        v = tl.associative_scan(v, AXIS, _logaddexp)
    return v, i


@jit
def _apply_carry(cv, ci, v, i, KIND: tl.constexpr):
    """Combine the carry (everything before this block) with the block's inclusive scan."""
    if KIND == 0:
        v = cv + v
    elif KIND == 1:
        v = cv * v
    elif KIND == 2:
        v, i = _cummax_combine(cv, ci, v, i)
    elif KIND == 3:
        v, i = _cummin_combine(cv, ci, v, i)
    else:
        v = _logaddexp(cv, v)
    return v, i


@jit
def _scan_rows_kernel(x_ptr, y_ptr, yi_ptr, O, R, sxo, sxr, syo, syr, sio, sir,
                      KIND: tl.constexpr, HAS_I: tl.constexpr, ACC: tl.constexpr, IDENT: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr):
    """Inclusive scan of ``x[o, r]`` over r for BLOCK_M rows (r innermost)."""
    pid = tl.program_id(0)
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < O
    lanes = tl.arange(0, BLOCK_R)
    cv = tl.full([BLOCK_M, 1], IDENT, ACC)
    ci = tl.zeros([BLOCK_M, 1], tl.int64)
    last = (lanes == BLOCK_R - 1)[None, :]
    for r0 in range(0, R, BLOCK_R):
        r = r0 + lanes.to(tl.int64)
        m = row_ok[:, None] & (r < R)[None, :]
        v = convert(tl.load(x_ptr + rows[:, None] * sxo + r[None, :] * sxr, mask=m), ACC)
        i = tl.broadcast_to(r[None, :], [BLOCK_M, BLOCK_R])
        v, i = _scan_tile(v, i, 1, KIND)
        v, i = _apply_carry(cv, ci, v, i, KIND)
        tl.store(y_ptr + rows[:, None] * syo + r[None, :] * syr, convert(v, y_ptr.dtype.element_ty), mask=m)
        if HAS_I:
            tl.store(yi_ptr + rows[:, None] * sio + r[None, :] * sir, i, mask=m)
        # the block's last column is the carry into the next block (only full blocks have a next one)
        cv = tl.sum(tl.where(last, v, tl.zeros_like(v)), 1)[:, None]
        ci = tl.sum(tl.where(last, i, tl.zeros_like(i)), 1)[:, None]


@jit
def _scan_cols_kernel(x_ptr, y_ptr, yi_ptr, I, R, sxo, sxr, sxi, syo, syr, syi, sio, sir, sii,
                      KIND: tl.constexpr, HAS_I: tl.constexpr, ACC: tl.constexpr, IDENT: tl.constexpr,
                      BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    """Inclusive scan of ``x[o, r, i]`` over r for one o and BLOCK_I consecutive i (lanes along i)."""
    pid = tl.program_id(0)
    nib = tl.cdiv(I, BLOCK_I)
    o = (pid // nib).to(tl.int64)
    cols = (pid % nib).to(tl.int64) * BLOCK_I + tl.arange(0, BLOCK_I)
    col_ok = cols < I
    lanes = tl.arange(0, BLOCK_R)
    cv = tl.full([1, BLOCK_I], IDENT, ACC)
    ci = tl.zeros([1, BLOCK_I], tl.int64)
    last = (lanes == BLOCK_R - 1)[:, None]
    for r0 in range(0, R, BLOCK_R):
        r = r0 + lanes.to(tl.int64)
        m = (r < R)[:, None] & col_ok[None, :]
        v = convert(tl.load(x_ptr + o * sxo + r[:, None] * sxr + cols[None, :] * sxi, mask=m), ACC)
        i = tl.broadcast_to(r[:, None], [BLOCK_R, BLOCK_I])
        v, i = _scan_tile(v, i, 0, KIND)
        v, i = _apply_carry(cv, ci, v, i, KIND)
        tl.store(y_ptr + o * syo + r[:, None] * syr + cols[None, :] * syi, convert(v, y_ptr.dtype.element_ty), mask=m)
        if HAS_I:
            tl.store(yi_ptr + o * sio + r[:, None] * sir + cols[None, :] * sii, i, mask=m)
        cv = tl.sum(tl.where(last, v, tl.zeros_like(v)), 0)[None, :]
        ci = tl.sum(tl.where(last, i, tl.zeros_like(i)), 0)[None, :]


def _acc(d: DType) -> DType:
    if d.kind == T.KIND_FLOAT:
        return T.float64 if d is T.float64 else T.float32
    return T.int64


def _ident(kind: int, acc: DType):
    f = acc.kind == T.KIND_FLOAT
    return {S_SUM: 0.0 if f else 0, S_PROD: 1.0 if f else 1, S_MAX: float("-inf") if f else -(2 ** 63),
            S_MIN: float("inf") if f else 2 ** 63 - 1, S_LSE: float("-inf")}[kind]


def launch_scan(x: Tensor, dim: int, y: Tensor, yi: Tensor | None, kind: int) -> None:
    """Scan ``x`` along ``dim`` into ``y`` (and the indices into ``yi`` for cummax/cummin) with the kernels.

    Args:
        x: any strides, >= 1 element; y, yi: outputs of x's shape (any strides).
        kind: ``S_SUM``, ``S_PROD``, ``S_MAX``, ``S_MIN`` or ``S_LSE``.
    """
    dev = x.device
    flags = [d == dim for d in range(x.ndim)]
    can = canonical3(x.shape, x.stride(), flags)
    if can is None:
        x = x.contiguous()
        can = canonical3(x.shape, x.stride(), flags)
    (O, R, I), (sxo, sxr, sxi), groups = can
    outs = []
    for t in (y, yi):
        if t is None:
            outs.append((None, None, (0, 0, 0)))
            continue
        st = tuple(collapse_dims(t.shape, t.stride(), g) for g in groups)
        if None in st:
            tmp = tmp_like_groups(t, groups)
            outs.append((tmp, t, tuple(collapse_dims(tmp.shape, tmp.stride(), g) for g in groups)))
        else:
            outs.append((t, None, st))
    (ya, ycopy, sy), (ia, icopy, si) = outs
    acc = _acc(x.dtype)
    meta = dict(KIND=kind, HAS_I=ia is not None, ACC=TL_DTYPES[acc.name], IDENT=_ident(kind, acc))
    ib = ia if ia is not None else ya
    if I == 1:
        cfg = launch_config("scan_rows", dev, dtypes=(x.dtype,), rows=O, cols=R)
        launch_quiet(_scan_rows_kernel, (cdiv(O, cfg["BLOCK_M"]),), x, ya, ib, O, R, sxo, sxr, sy[0], sy[1], si[0],
                     si[1], **cfg, **meta)
    else:
        cfg = launch_config("scan_cols", dev, dtypes=(x.dtype,), rows=R, cols=I)
        launch_quiet(_scan_cols_kernel, (O * cdiv(I, cfg["BLOCK_I"]),), x, ya, ib, I, R, sxo, sxr, sxi, sy[0], sy[1],
                     sy[2], si[0], si[1], si[2], **cfg, **meta)
    if ycopy is not None:
        ycopy.copy_(ya)
    if icopy is not None:
        icopy.copy_(ia)


# ---------------------------------------------------------------------------------------------------------
# CPU implementations and oracles
# ---------------------------------------------------------------------------------------------------------
def _host(x: Tensor, acc: DType) -> np.ndarray:
    a = host_view(x)
    return cast_array(a, x.dtype, acc) if x.dtype is not acc else np.array(a)


def _write(y: Tensor, v: np.ndarray, src: DType) -> None:
    host_view(y)[...] = cast_array(v, src, y.dtype) if src is not y.dtype else v


def _running_index(x: np.ndarray, v: np.ndarray, axis: int) -> np.ndarray:
    """Index of the element each running value came from: the last position where x took over (x equals the
    running value, or x is NaN), carried forward."""
    take = (x == v) | (np.isnan(x) if x.dtype.kind == "f" else False)
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    pos = np.where(take, np.arange(x.shape[axis]).reshape(shape), 0)
    return np.maximum.accumulate(pos, axis=axis).astype(np.int64)


def _cpu_scan(x: Tensor, dim: int, y: Tensor, yi: Tensor | None = None, *, kind: int) -> None:
    acc = _acc(x.dtype)
    a = _host(x, acc)
    if a.ndim == 0:
        a = a.reshape(1)
        ax = 0
    else:
        ax = dim
    with np.errstate(all="ignore"):
        if kind == S_SUM:
            v = np.cumsum(a, axis=ax, dtype=acc.numpy)
        elif kind == S_PROD:
            v = np.cumprod(a, axis=ax, dtype=acc.numpy)
        elif kind == S_LSE:
            v = np.logaddexp.accumulate(a, axis=ax)
        else:
            f = np.maximum if kind == S_MAX else np.minimum  # NaN-propagating, as PyTorch's running value
            v = f.accumulate(a, axis=ax)
            if yi is not None:
                _write(yi, _running_index(a, v, ax).reshape(yi.shape), T.int64)
    _write(y, np.asarray(v, dtype=acc.numpy).reshape(y.shape), acc)


def _oracle_scan(kind: int):
    """PyTorch's sequential rule, one step at a time, in float64 (int64 for integer sums and products)."""
    def oracle(a: np.ndarray, dim=0, dtype=None, **params):
        x = np.asarray(a)
        if dtype is not None:
            x = cast_array(x, T.dtype_from(x.dtype), T.dtype_from(dtype))
        x = x.astype(np.int64) if x.dtype.kind in "biu" else x.astype(np.float64)
        shape = x.shape
        if x.ndim == 0:
            x = x.reshape(1)
        ax = wrap_dim(dim, max(len(shape), 1)) if len(shape) else 0
        xm = np.moveaxis(x, ax, 0)
        out = np.empty_like(xm)
        idx = np.zeros(xm.shape, np.int64)
        with np.errstate(all="ignore"):
            for k in range(xm.shape[0]):
                cur = xm[k]
                if k == 0:
                    out[0], idx[0] = cur, 0
                    continue
                prev = out[k - 1]
                if kind == S_SUM:
                    out[k] = prev + cur
                elif kind == S_PROD:
                    out[k] = prev * cur
                elif kind == S_LSE:
                    m = np.maximum(prev, cur)
                    ms = np.where(np.isfinite(m), m, 0.0)
                    out[k] = np.log(np.exp(prev - ms) + np.exp(cur - ms)) + ms
                else:
                    take = (cur >= prev if kind == S_MAX else cur <= prev) | np.isnan(cur)
                    out[k] = np.where(take, cur, prev)
                    idx[k] = np.where(take, k, idx[k - 1])
        out = np.moveaxis(out, 0, ax).reshape(shape)
        if kind in (S_MAX, S_MIN):
            return out, np.moveaxis(idx, 0, ax).reshape(shape)
        return out
    return oracle


# ---------------------------------------------------------------------------------------------------------
# Drivers and records
# ---------------------------------------------------------------------------------------------------------
def _triton_scan(x: Tensor, dim: int, y: Tensor, yi: Tensor | None = None, *, kind: int) -> None:
    launch_scan(x, dim, y, yi, kind)


_CUM_DTYPES = (T.bool_,) + INTS + BARE_UINTS + FLOATS
_ORDERED = (T.bool_,) + INTS + FLOATS
_KINDS = {"cumsum": S_SUM, "cumprod": S_PROD, "cummax": S_MAX, "cummin": S_MIN, "logcumsumexp": S_LSE}


def _scan_driver(rec, args, *, out=None, inplace=None):
    fn = rec.name
    kind = _KINDS[fn]
    x = args["input"]
    check_input(x, fn)
    dim = wrap_dim(args["dim"], x.ndim, fn=fn)
    if kind in (S_SUM, S_PROD):
        dt = args.get("dtype")
        refuse_dtype(x.dtype, fn, _CUM_DTYPES)
        res = dt if dt is not None else (T.int64 if x.dtype.kind in (T.KIND_BOOL, T.KIND_INT, T.KIND_UINT) else x.dtype)
        if out is not None:   # out's dtype is the computation dtype, as dtype= (reduction.out_dtypes)
            res, _ = out_dtypes("compute", rec, x, out, dt, res, res, fn)
            dt = res if isinstance(out, Tensor) else dt
        o, work = new_out(out, x.shape, res, x.device, fn, exact=False)
        dispatch.check_no_partial_overlap(o, x, fn)
        if x.numel():
            xin = compute_input(x, dt) if dt is not None else x
            if res.kind == T.KIND_FLOAT and xin.dtype.kind != T.KIND_FLOAT:
                xin = xin.to(res)
            registry.impl(fn, x.device.type)(xin, dim, work, kind=kind)
            finish_out(o, work)
        return o
    if kind == S_LSE:
        check(x.dtype.kind == T.KIND_FLOAT, lambda: f"{fn}: \"logcumsumexp\" not implemented for "
              f"'{dispatch.torch_dtype_name(x.dtype)}' (floating-point inputs only)", NotImplementedError)
        o, work = new_out(out, x.shape, x.dtype, x.device, fn, exact=True, style="scalar_type")
        dispatch.check_no_partial_overlap(o, x, fn)
        if x.numel():
            registry.impl(fn, x.device.type)(x, dim, work, kind=kind)
            finish_out(o, work)
        return o
    refuse_dtype(x.dtype, fn, _ORDERED)
    rt = return_types.cummax if kind == S_MAX else return_types.cummin
    if out is not None:
        check(len(out) == 2, lambda: f"{fn}(): out= must be a tuple (values, indices)", TypeError)
        ov, wv = new_out(out[0], x.shape, x.dtype, x.device, fn, exact=True, style="scalar_type")
        oi, wi = new_out(out[1], x.shape, T.int64, x.device, fn, exact=True, style="scalar_type")
    else:
        ov = wv = new_empty(x.shape, x.dtype, x.device)
        oi = wi = new_empty(x.shape, T.int64, x.device)
    if x.numel():
        registry.impl(fn, x.device.type)(x, dim, wv, wi, kind=kind)
    return rt(ov, oi)


def _cost_of(name: str):
    """Reads the input once, writes the output once (values and int64 indices for cummax/cummin)."""
    def cost(*args, **kwargs) -> Cost:
        a = registry.get(name).extra["schema_obj"].bind(args, kwargs, fn=name)
        x = a["input"]
        out_dt = a.get("dtype") or (T.int64 if name in ("cumsum", "cumprod") and x.dtype.kind != T.KIND_FLOAT
                                    else x.dtype)
        written = x.numel() * (out_dt.itemsize + (8 if name in ("cummax", "cummin") else 0))
        flops = x.numel() * (4 if name == "logcumsumexp" else 1)
        return Cost(flops=flops, bytes_read=x.numel() * x.dtype.itemsize, bytes_written=written)
    return cost


def _t(*shape, dtype=T.float32):
    return lambda dev: new_empty(shape, dtype, dev).fill_(0)


# Error inputs as data: (label, args builders, kwargs, exception type, message regex[, reason this is an
# nbxtensor limitation where PyTorch computes a result]).
_ERRORS = {
    "cumsum": [("dim missing", (_t(2, 3),), {}, TypeError, "missing required argument 'dim'"),
               ("dim out of range", (_t(2, 3),), {"dim": 2}, IndexError, "out of range"),
               ("float8 input", (_t(3, dtype=T.float8_e5m2),), {"dim": 0}, NotImplementedError, "not implemented")],
    "cumprod": [("complex input", (_t(3, dtype=T.complex64),), {"dim": 0}, NotImplementedError, "not implemented",
                 "nbxtensor does not implement complex scans (PyTorch does)")],
    "cummax": [("uint32 input", (_t(3, dtype=T.uint32),), {"dim": 0}, NotImplementedError, "not implemented"),
               ("out indices dtype", (_t(3),), {"dim": 0, "out": (_t(3), _t(3, dtype=T.int32))}, RuntimeError,
                "dtype")],
    "cummin": [("dim out of range", (_t(3),), {"dim": -2}, IndexError, "out of range")],
    "logcumsumexp": [("integer input", (_t(3, dtype=T.int64),), {"dim": 0}, NotImplementedError,
                      "not implemented")],
}


_DOCS = {
    "cumsum": "Inclusive cumulative sum along ``dim`` (``torch.cumsum``): int64 for integer and bool inputs, "
              "``dtype=`` converts first; float16/bfloat16 accumulate in float32.",
    "cumprod": "Inclusive cumulative product along ``dim`` (``torch.cumprod``), result dtypes as ``cumsum``.",
    "cummax": "Named tuple ``(values, indices)`` of the running maximum along ``dim``: ties take the later index; "
              "a NaN stays the value and each later NaN takes the index (PyTorch's rule).",
    "cummin": "Named tuple ``(values, indices)`` of the running minimum along ``dim`` (rules as ``cummax``).",
    "logcumsumexp": "``log(cumsum(exp(x)))`` along ``dim`` without overflow (floating inputs only).",
}


def _reg(name: str, schema: str, oracle, dtypes, **extra):
    doc = (f"``{schema}``\n\n    {_DOCS[name]}\n\n    Raises: IndexError (dim out of range), NotImplementedError "
           "(unsupported dtypes), RuntimeError (``out`` dtype or device). Kernels and numerics: "
           ":mod:`nbxtensor.ops.scan`.\n")
    rec = OpRecord(name=name, family="scan", cpu=_cpu_scan, triton=_triton_scan, oracle=oracle, cost=_cost_of(name),
                   extra=dict(schema=schema, driver=_scan_driver, dtypes=dtypes, errors=_ERRORS.get(name, []),
                              doc=doc, **extra))
    register(rec)


for _name in ("cumsum", "cumprod"):
    _reg(_name, f"{_name}(Tensor input, int dim, *, dtype? dtype=None, Tensor? out=None)",
         _oracle_scan(_KINDS[_name]), _CUM_DTYPES, domain="near_one" if _name == "cumprod" else "normal")
for _name in ("cummax", "cummin"):
    _reg(_name, f"{_name}(Tensor input, int dim, *, Tensor[]? out=None)", _oracle_scan(_KINDS[_name]), _ORDERED,
         outputs=2)
_reg("logcumsumexp", "logcumsumexp(Tensor input, int dim, *, Tensor? out=None)", _oracle_scan(S_LSE), FLOATS)
del _name
