"""``arange`` and ``linspace``, bit for bit as PyTorch's x86-64 CPU kernels compute them.

PyTorch's CPU range kernels (aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp, in PyTorch 2.13) evaluate
``start + step * i`` in a per-dtype arithmetic, and their loop (``vectorized_loop`` in ATen/native/cpu/Loops.h)
runs blocks of two SIMD vectors while two fit and then element by element: inside a vector, element ``j`` is
``base + j * step`` from a ``base`` computed (and rounded) at the vector's first index. These kernels are not
registered for AVX-512, so both AVX2 and AVX-512 machines run the AVX2 build: vectors of 32 bytes
(32 / itemsize elements; float16/bfloat16 arange and linspace run 16 lanes of their own type). The compiler
contracts ``a + b * c`` into a fused multiply-add there, so every such expression rounds once. This module
reproduces all of that in NumPy, so results equal PyTorch's on x86-64 bit for bit, with two limits:

- above 32768 elements PyTorch splits the range among its threads (``at::parallel_for``, grain 32768), which
  moves the vector boundaries; we follow one thread (``torch.set_num_threads(1)``), so other thread counts
  can differ by one unit in the last place in some elements;
- PyTorch builds without AVX2 (the "default" capability) or on other architectures use other widths or no
  FMA, with the same one-ulp caveat. Complex ``linspace`` applies the formula to each part without the
  vector blocks.

Errors and dtype rules are PyTorch's (aten/src/ATen/native/RangeFactories.cpp).
"""

from __future__ import annotations

import math

import numpy as np

from .._errors import check
from ..device.base import as_device
from ..dtypes import promotion as P
from ..dtypes import table as T
from ..dtypes.casting import cast_array, checked_scalar
from ..dtypes.table import DType, dtype_from
from .core import Tensor, from_host_array, new_empty

__all__ = ["arange", "linspace"]

# Dtypes PyTorch's CPU range kernels dispatch over (AT_DISPATCH_ALL_TYPES_AND2(Half, BFloat16)).
_RANGE_DTYPES = frozenset({T.uint8, T.int8, T.int16, T.int32, T.int64, T.float16, T.bfloat16, T.float32, T.float64})
_VECTOR_BYTES = 32  # AVX2 Vectorized<T> width, used by ATen's range kernels on x86-64
_REDUCED = (T.float16, T.bfloat16)


def _blocks(n: int, itemsize: int) -> tuple[np.ndarray, np.ndarray]:
    """For each of ``n`` elements: the index of its vector's first element (itself on the scalar tail) and its
    position ``j`` in the vector (0 on the tail), as ATen's ``vectorized_loop`` walks a single chunk."""
    lanes = _VECTOR_BYTES // itemsize
    covered = (n // (2 * lanes)) * 2 * lanes if n >= 2 * lanes else 0
    i = np.arange(n, dtype=np.int64)
    base = np.where(i < covered, i - i % lanes, i)
    return base, i - base


# -- exact fused multiply-add in NumPy -------------------------------------------------------------------------
def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Knuth's TwoSum: ``s = fl(a + b)`` and the exact error ``a + b - s`` (float64, no overflow)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dekker's TwoProduct with Veltkamp's split: ``p = fl(a * b)`` and the exact error ``a * b - p``."""
    def split(x):
        c = x * 134217729.0  # 2**27 + 1
        hi = c - (c - x)
        return hi, x - hi
    p = a * b
    ah, al = split(a)
    bh, bl = split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _round_to_odd_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b`` rounded to odd in float64: exact sums as they are, inexact ones to the neighbour whose last
    significand bit is 1 (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms
    using rounding to odd", IEEE Trans. Computers 57(4), 2008)."""
    s, e = _two_sum(a, b)
    fix = (e != 0) & ((s.view(np.int64) & 1) == 0)
    return np.where(fix, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)


def _fma(a, b, c, out_dtype) -> np.ndarray:
    """``a * b + c`` rounded once to ``out_dtype`` (float32 or float64), as a fused multiply-add does.

    float32 operands multiply exactly in float64 and the sum rounds to odd before the final rounding (exact,
    since 53 >= 24 + 2); float64 uses Boldo and Melquiond's emulated FMA (TwoProduct, TwoSum, a sum rounded to
    odd, one final rounding). Exact without overflow or underflow; non-finite cases take IEEE's plain result.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    c = np.asarray(c, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        if np.dtype(out_dtype) == np.float32:
            p = a * b  # exact: two 24-bit significands
            out = _round_to_odd_sum(p, c).astype(np.float32)
            plain = (p + c).astype(np.float32)
        else:
            uh, ul = _two_prod(a, b)
            th, tl = _two_sum(c, uh)
            out = th + _round_to_odd_sum(tl, ul)
            plain = a * b + c
    return np.where(np.isfinite(out) & np.isfinite(plain), out, plain).astype(out_dtype)


# -- arguments -------------------------------------------------------------------------------------------------
def _num(x, name: str, fn: str, *, allow_complex: bool = False):
    """A number argument: Python bool/int/float(/complex), NumPy scalar or one-element tensor, as its Python value.

    Raises:
        TypeError: anything else. RuntimeError: a complex value where a real one is needed (PyTorch: "value
            cannot be converted to type double without overflow").
    """
    if isinstance(x, Tensor):
        check(x.numel() == 1, lambda: f"{fn}(): argument '{name}' must be Number, not a tensor of {x.numel()} "
              "elements", TypeError)
        x = x.item()
    if isinstance(x, np.generic):
        x = x.item()
    check(isinstance(x, (bool, int, float, complex)), lambda: f"{fn}(): argument '{name}' must be Number, not "
          f"{type(x).__name__}", TypeError)
    check(allow_complex or not isinstance(x, complex), lambda: f"{fn}: argument '{name}' value cannot be converted "
          f"to type double without overflow (got complex {x})")
    return x


def _as(x, d: DType):
    """Python number ``x`` as a NumPy scalar of ``d`` (``Scalar::to<T>``: round to nearest, through float32 for
    float16/bfloat16)."""
    return cast_array(np.array([float(x)]), T.float64, d)[0]


def _dt(dtype, default: DType) -> DType:
    return default if dtype is None else dtype_from(dtype)


# -- arange ----------------------------------------------------------------------------------------------------
def arange(start=0, end=None, step=1, *, dtype=None, device=None) -> Tensor:
    """Values ``start, start + step, ...`` below ``end`` (``torch.arange``), equal to PyTorch's CPU results.

    Args:
        start, end, step: numbers (Python, NumPy scalars or one-element tensors); ``arange(end)`` starts at 0.
        dtype: default int64 when start, end and step are all integers (bools count), else the default float
            dtype.

    Values: ``start + step * i`` in ATen's accumulate type (float64 for float32/float64 results, float32 for
    float16/bfloat16, int64 for integer dtypes, where the arguments are first truncated to integers), rounded
    once to the result; on SIMD blocks ``base + j * step`` (see the module docstring). The length is
    ``ceil((end - start) / step)`` in float64, or, for int64 results, from the truncated integers
    (``(end - start + step - sign(step)) / step``, C division).

    Raises:
        RuntimeError: ``step == 0``; a non-finite bound ("unsupported range"); bounds inconsistent with the
            step's sign; a complex argument; an argument beyond int64 for an integer dtype.
        ValueError: an int64 result whose step truncates to 0 (PyTorch's type).
        TypeError: a non-numeric argument.
        NotImplementedError: bool, complex, float8 and uint16/32/64 results (PyTorch has no kernel for them).

    Example:
        >>> import nbxtensor as nbx
        >>> nbx.arange(0, 1, 0.25).tolist()
        [0.0, 0.25, 0.5, 0.75]
    """
    if end is None:
        start, end = 0, start
    start, end, step = _num(start, "start", "arange"), _num(end, "end", "arange"), _num(step, "step", "arange")
    all_int = all(isinstance(v, int) for v in (start, end, step))
    dt = _dt(dtype, T.int64 if all_int else P.get_default_dtype())
    check(dt in _RANGE_DTYPES, lambda: f'"arange_cpu" not implemented for {dt.name}', NotImplementedError)
    fs, fe, fst = float(start), float(end), float(step)
    check(fst != 0, "arange: step must be nonzero")
    check(math.isfinite(fs) and math.isfinite(fe), lambda: f"arange: unsupported range: {start} -> {end}")
    check((fst > 0 and fe >= fs) or (fst < 0 and fe <= fs),
          "arange: upper bound and lower bound inconsistent with step sign")
    dev = as_device(device)
    if dt.kind in (T.KIND_INT, T.KIND_UINT):
        # Scalar::to<int64_t>: truncates toward zero, refusing values beyond int64
        xs, xe, xst = (int(checked_scalar(v, T.int64, "arange")) for v in (start, end, step))
        if dt is T.int64:
            check(xst != 0, "arange: step must be nonzero (the step truncates to 0 for an integer dtype)", ValueError)
            sgn = (xst > 0) - (xst < 0)
            q = xe - xs + xst - sgn
            n = abs(q) // abs(xst) * (1 if (q >= 0) == (xst > 0) else -1)  # C++ division truncates toward zero
        else:
            n = math.ceil((fe - fs) / fst)
        n = max(n, 0)
        with np.errstate(over="ignore"):
            vals = np.int64(xs) + np.int64(xst) * np.arange(n, dtype=np.int64)  # int64 wraps as ATen's does
        return from_host_array(vals.astype(dt.numpy), dt, dev)  # SIMD blocks give the same integers
    n = max(math.ceil((fe - fs) / fst), 0)
    check(n <= 2 ** 63 - 1, "arange: invalid size, possible overflow?")
    return from_host_array(_arange_float(fs, fst, n, dt), dt, dev)


def _arange_float(start: float, step: float, n: int, dt: DType) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):  # values beyond the dtype's range become inf, as in PyTorch
        return _arange_float_values(start, step, n, dt)


def _arange_float_values(start: float, step: float, n: int, dt: DType) -> np.ndarray:
    base_i, j = _blocks(n, dt.itemsize)
    if dt in _REDUCED:  # accumulate in float32; base rounded to the result type
        s32, st32 = np.float32(start), np.float32(step)
        base = _fma(st32, base_i.astype(np.float32), s32, np.float32).astype(dt.numpy)
        if dt is T.bfloat16:  # Vectorized<BFloat16>::arange adds `j * step` unfused (measured)
            vals = base.astype(np.float32) + (j.astype(np.float32) * st32).astype(np.float32)
        else:  # Vectorized<Half>::arange fuses it (measured)
            vals = _fma(j.astype(np.float32), st32, base.astype(np.float32), np.float32)
        return vals.astype(np.float32).astype(dt.numpy)
    base = _fma(step, base_i.astype(np.float64), start, np.float64).astype(dt.numpy)  # float64 accumulate
    return _fma(j.astype(np.float64), step, base.astype(np.float64), np.float64).astype(dt.numpy)


# -- linspace --------------------------------------------------------------------------------------------------
def linspace(start, end, steps: int, *, dtype=None, device=None) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive (``torch.linspace``), equal to PyTorch's
    CPU results.

    Args:
        start, end: numbers (complex allowed); converted to the result dtype first.
        steps: a non-negative int.
        dtype: default: the default float dtype, or the default complex dtype for a complex bound.

    Values (ATen's formula, in its types): ``step = (end - start) / (steps - 1)``; element ``i`` is
    ``start + step * i`` for ``i < steps // 2`` and ``end - step * (steps - 1 - i)`` after, so both ends are
    exact; on SIMD blocks ``base + j * step``. float32/float64 compute in the result type with FMAs;
    float16/bfloat16 round after every operation (``c10::Half`` arithmetic, ``i`` itself rounded to the type);
    integer results compute in float64 and truncate; complex results apply the formula to each part.
    ``steps == 1`` gives ``start``.

    Raises:
        RuntimeError: steps < 0; a bound that overflows an integer dtype ("value cannot be converted ...").
        TypeError: a non-integer ``steps`` or a non-numeric bound.
        NotImplementedError: bool, float8 and uint16/32/64 results.

    Example:
        >>> import nbxtensor as nbx
        >>> nbx.linspace(0, 1, 5).tolist()
        [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    start = _num(start, "start", "linspace", allow_complex=True)
    end = _num(end, "end", "linspace", allow_complex=True)
    check(not isinstance(steps, (bool, float)) and (isinstance(steps, int) or hasattr(steps, "__index__")),
          lambda: f"linspace(): argument 'steps' must be int, not {type(steps).__name__}", TypeError)
    steps = int(steps.__index__())
    check(steps >= 0, lambda: f"linspace: number of steps must be non-negative, got {steps}")
    any_complex = isinstance(start, complex) or isinstance(end, complex)
    dt = _dt(dtype, P.default_complex_dtype() if any_complex else P.get_default_dtype())
    check(dt in _RANGE_DTYPES or dt.kind == T.KIND_COMPLEX, lambda: f'"linspace_cpu" not implemented for {dt.name}',
          NotImplementedError)
    dev = as_device(device)
    if steps == 0:
        return new_empty((0,), dt, dev)
    if steps == 1:
        out = new_empty((1,), dt, dev)
        return out.fill_(start)
    if dt.kind == T.KIND_COMPLEX:
        part = dt.to_real()
        cs, ce = complex(start), complex(end)
        re = _linspace_real(cs.real, ce.real, steps, part)
        im = _linspace_real(cs.imag, ce.imag, steps, part)
        out = np.empty(steps, dtype=dt.numpy)
        out.real, out.imag = re, im
        return from_host_array(out, dt, dev)
    check(not any_complex, lambda: f"linspace: complex bounds need a complex dtype, got {dt.name}")
    if dt.kind in (T.KIND_INT, T.KIND_UINT):
        s = int(checked_scalar(start, dt, "linspace"))
        e = int(checked_scalar(end, dt, "linspace"))
        return from_host_array(_linspace_int(s, e, steps, dt), dt, dev)
    return from_host_array(_linspace_real(float(start), float(end), steps, dt), dt, dev)


def _linspace_int(s: int, e: int, steps: int, dt: DType) -> np.ndarray:
    """Integer results: a float64 step; ``base`` truncated to the dtype, then ``base + j * step`` truncated."""
    step = (float(e) - float(s)) / (steps - 1)
    half = steps // 2
    base_i, j = _linspace_blocks(steps)
    lo = _fma(step, base_i.astype(np.float64), float(s), np.float64)
    hi = _fma(-step, (steps - 1 - base_i).astype(np.float64), float(e), np.float64)
    base = np.trunc(np.where(base_i < half, lo, hi))
    vals = np.trunc(_fma(j.astype(np.float64), step, base, np.float64))
    return vals.astype(np.int64).astype(dt.numpy)


def _linspace_blocks(steps: int) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch 2.13's linspace kernel computes every element with the scalar formula (measured: no SIMD blocks)."""
    return np.arange(steps, dtype=np.int64), np.zeros(steps, dtype=np.int64)


def _linspace_real(start: float, end: float, steps: int, dt: DType) -> np.ndarray:
    """Floating results in the dtype's own arithmetic (NumPy float16 and ml_dtypes bfloat16 round each operation's
    float32 result once, as ``c10::Half``/``c10::BFloat16`` do)."""
    t = dt.numpy.type
    s, e = _as(start, dt), _as(end, dt)
    half = steps // 2
    base_i, j = _linspace_blocks(steps)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        step = t(t(e - s) / _as(steps - 1, dt))
        if dt in (T.float32, T.float64):  # `start + step * i` contracts to an FMA in ATen's compiled kernel
            lo = _fma(step, base_i.astype(dt.numpy), s, dt.numpy)
            hi = _fma(-step, (steps - 1 - base_i).astype(dt.numpy), e, dt.numpy)
            base = np.where(base_i < half, lo, hi)
            return _fma(j.astype(dt.numpy), step, base, dt.numpy).astype(dt.numpy)
        # c10::Half / c10::BFloat16 operators round after each operation (no contraction)
        st = np.array(step, dtype=dt.numpy)
        lo = (np.array(s, dtype=dt.numpy) + (st * base_i.astype(dt.numpy)).astype(dt.numpy)).astype(dt.numpy)
        hi = (np.array(e, dtype=dt.numpy) -
              (st * (steps - 1 - base_i).astype(dt.numpy)).astype(dt.numpy)).astype(dt.numpy)
        base = np.where(base_i < half, lo, hi).astype(dt.numpy)
        return (base + (j.astype(dt.numpy) * st).astype(dt.numpy)).astype(dt.numpy)
