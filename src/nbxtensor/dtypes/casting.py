"""Casts between every pair of the dtype table, on host arrays (the CPU implementation and the oracle's last step).

Rules (PyTorch 2.13 measured on CPU, except where stated):
- Into float16, bfloat16 and float8 the value first becomes float32 (PyTorch converts through ``float``: a
  float64 just above a float16 tie rounds twice, and so do we), then rounds to nearest even.
- float8_e4m3fn has no infinity: finite values beyond +-448 and +-inf saturate to +-448; NaN stays NaN
  (measured: 500, 480 and inf -> 448). float8_e5m2 overflows to +-inf (61440 -> inf).
- Complex into a real dtype keeps the real part (PyTorch warns; we do not).
- Into bool: nonzero (NaN included) is True.
- Float into an integer dtype truncates toward zero. PyTorch leaves NaN, +-inf and out-of-range values
  undefined (C++ UB; x86 CPU gives INT_MIN or wrapped bits). **nbxtensor's rule**, shared by the CPU and GPU
  implementations: NaN -> 0, values beyond the target's range (+-inf included) saturate to its min or max.
  This is what the GPU's ``cvt.rzi`` instruction does natively (PTX ISA, "cvt": float-to-integer
  conversions saturate and map NaN to 0).
- Integer into a narrower integer wraps modulo 2**bits (two's complement), as PyTorch and NumPy.
"""

from __future__ import annotations

import numpy as np

from .._errors import check
from . import table as T
from .table import DType

__all__ = ["cast_array", "checked_scalar", "FLOAT8_E4M3FN_MAX"]

FLOAT8_E4M3FN_MAX = 448.0  # largest finite float8_e4m3fn (OCP 8-bit floating point spec, E4M3)

_VIA_FLOAT32 = frozenset({T.float16, T.bfloat16, T.float8_e4m3fn, T.float8_e5m2})


def cast_array(a: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    """Convert host array ``a`` holding ``src`` values to a new array of ``dst.numpy`` by the rules above.

    Args:
        a: any shape; its NumPy dtype must be ``src.numpy``.
        src, dst: rows of the dtype table.

    Returns:
        A new C-ordered array of ``dst.numpy`` with ``a``'s shape (a copy even when ``src is dst``).
    """
    with np.errstate(over="ignore", invalid="ignore"):  # overflow to inf is the defined result, not a warning
        return _cast(a, src, dst)


def _cast(a: np.ndarray, src: DType, dst: DType) -> np.ndarray:
    if src is dst:
        return np.array(a, copy=True)
    if src.kind == T.KIND_COMPLEX and dst.kind != T.KIND_COMPLEX:
        if dst is T.bool_:
            return np.asarray(a != 0)
        a = a.real
        src = src.to_real()
    if dst is T.bool_:
        return np.asarray((a.astype(np.float32) if src in _VIA_FLOAT32 else a) != 0)
    if dst in _VIA_FLOAT32:
        f = a.astype(np.float32) if src is not T.float32 else a
        if dst is T.float8_e4m3fn:
            f = np.where(np.isnan(f), f, np.clip(f, -FLOAT8_E4M3FN_MAX, FLOAT8_E4M3FN_MAX)).astype(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            return f.astype(dst.numpy)
    if dst.kind in (T.KIND_INT, T.KIND_UINT) and src.kind == T.KIND_FLOAT:
        return _float_to_int(a, dst)
    with np.errstate(over="ignore", invalid="ignore"):
        return a.astype(dst.numpy)


def _float_to_int(a: np.ndarray, dst: DType) -> np.ndarray:
    """Truncate toward zero; NaN -> 0; saturate outside ``dst``'s range (nbxtensor's documented rule)."""
    info = np.iinfo(dst.numpy)
    x = a.astype(np.float64)
    out = np.zeros(x.shape, dtype=dst.numpy)
    nan = np.isnan(x)
    hi = x >= float(info.max) + 1.0  # first value past the max; exact in float64 for every integer width here
    lo = x <= float(info.min) - 1.0
    mid = ~(nan | hi | lo)
    out[mid] = np.trunc(x[mid]).astype(dst.numpy)
    out[hi] = info.max
    out[lo] = info.min
    return out


_CHECKED: dict = {}   # (type, value, dtype) -> converted value: zero_(), zeros(), full() repeat a few values


def checked_scalar(value, dst: DType, fn: str):
    """Convert a Python scalar to a NumPy scalar of ``dst``, refusing overflow as PyTorch's ``checked_convert``.

    Used by ``fill_``, ``full``, ``__setitem__`` with a number and integer data in ``tensor()``. Rules
    (c10/util/TypeCast.h ``overflows``, measured against PyTorch 2.13):

    - A Python int must lie in ``[-2**63, 2**64)`` (PyTorch's argument parser), else ``OverflowError``.
    - Into bool: anything converts (nonzero, NaN included, is True).
    - Into an integer dtype: an int must lie in ``[min, max]``; unsigned targets also accept ``[-max, -1]``,
      wrapped modulo ``2**bits`` (``-1`` -> 255 for uint8). A float must be finite and lie in ``[min, max]``
      *before* truncation toward zero (so ``-0.5`` and ``255.5`` overflow uint8, as in PyTorch).
      Difference: PyTorch compares in double, so ``2.0**63`` passes for int64 and becomes INT64_MIN; here the
      comparison is exact and it overflows.
    - Into a floating dtype: NaN passes; +-inf passes where the dtype has infinities (not float8_e4m3fn); a
      value beyond the largest finite value overflows, compared before rounding (``65505.0`` overflows float16).
    - A complex value into a real dtype overflows unless its imaginary part is 0; into a complex dtype each part
      is checked as for the part's floating dtype.

    Raises:
        RuntimeError: "fn: value cannot be converted to type <dtype> without overflow" (PyTorch's message).
        OverflowError: a Python int outside ``[-2**63, 2**64)``.
        TypeError: a value that is not a number.

    Conversions of bools, ints and nonzero non-NaN floats are memoised (NumPy scalars are immutable; a value
    that overflows is refused every time).
    """
    t = value.__class__
    if t is int or t is bool or (t is float and value == value and value != 0.0):
        key = (t, value, dst)
        hit = _CHECKED.get(key)
        if hit is None:
            hit = _checked_scalar(value, dst, fn)
            if len(_CHECKED) >= 4096:
                _CHECKED.clear()
            _CHECKED[key] = hit
        return hit
    return _checked_scalar(value, dst, fn)


def _checked_scalar(value, dst: DType, fn: str):
    if isinstance(value, np.generic):
        value = value.item()
    check(isinstance(value, (bool, int, float, complex)), lambda: f"{fn}: expected a number, got "
          f"{type(value).__name__}", TypeError)
    if isinstance(value, int) and not isinstance(value, bool):
        check(-2 ** 63 <= value < 2 ** 64, lambda: f"{fn}: int too big to convert ({value} is outside "
              "[-2**63, 2**64))", OverflowError)
    err = lambda: f"{fn}: value cannot be converted to type {dst.name} without overflow"  # noqa: E731
    if dst is T.bool_:
        return np.bool_(value != 0)
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, complex) and dst.kind != T.KIND_COMPLEX:
        check(value.imag == 0, err)
        value = value.real
    if dst.kind in (T.KIND_INT, T.KIND_UINT):
        info = np.iinfo(dst.numpy)
        lo, hi = int(info.min), int(info.max)
        if isinstance(value, float):
            check(value == value and abs(value) != float("inf") and lo <= value <= hi, err)
            return dst.numpy.type(int(value))  # truncates toward zero
        if dst.kind == T.KIND_UINT:
            check(-hi <= value <= hi, err)
            return dst.numpy.type(value % (hi + 1))
        check(lo <= value <= hi, err)
        return dst.numpy.type(value)
    if dst.kind == T.KIND_FLOAT:
        v = float(value)
        _check_float_fits(v, dst, err)
        return cast_array(np.array([v]), T.float64, dst)[0]
    # complex destination: each part as the part's float dtype
    c = complex(value)
    part = dst.to_real()
    _check_float_fits(c.real, part, err)
    _check_float_fits(c.imag, part, err)
    return dst.numpy.type(c)


def _check_float_fits(v: float, dst: DType, err) -> None:
    if v != v:
        return
    if abs(v) == float("inf"):
        check(dst is not T.float8_e4m3fn, err)  # the only dtype of the table without infinities
        return
    check(abs(v) <= _finite_max(dst), err)


def _finite_max(dst: DType) -> float:
    if dst is T.float8_e4m3fn:
        return FLOAT8_E4M3FN_MAX
    if dst in (T.float16, T.float32, T.float64):
        return float(np.finfo(dst.numpy).max)
    return float(_ml_dtypes_finfo(dst).max)


def _ml_dtypes_finfo(dst: DType):
    import ml_dtypes
    return ml_dtypes.finfo(dst.numpy)
