"""Tensor factories with PyTorch's names, arguments and dtype inference.

``tensor``, ``as_tensor``, ``asarray``, ``from_numpy``, ``empty``, ``zeros``, ``ones``, ``full``, ``arange``,
``linspace``, ``eye`` and the ``*_like`` forms; each takes ``dtype=`` and ``device=``.

Dtype inference (https://pytorch.org/docs/stable/generated/torch.tensor.html): Python bools give bool, ints
int64, floats the default float dtype, complex numbers the default complex dtype; mixed data takes the highest
category. NumPy arrays and NumPy scalars keep their dtype.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from .._errors import check, fail
from ..device.base import as_device
from ..device.cpu import wrap_host_array
from ..dtypes import promotion as P
from ..dtypes import table as T
from ..dtypes.casting import cast_array, checked_scalar
from ..dtypes.table import DType, dtype_from
from ..shapes import normalize_shape
from .core import Tensor, _download, from_host_array, new_empty

__all__ = ["tensor", "as_tensor", "asarray", "from_numpy", "empty", "zeros", "ones", "full", "arange", "linspace",
           "eye", "empty_like", "zeros_like", "ones_like", "full_like", "scalar_tensor"]


def _dt(dtype, default: DType | None = None) -> DType | None:
    return default if dtype is None else dtype_from(dtype)


def _infer_shape_and_kind(data: Any, fn: str) -> tuple[tuple[int, ...], DType | None]:
    """Walk nested sequences: the shape (checking it is rectangular) and the inferred dtype of the leaves."""
    shape: list[int] = []
    probe = data
    while isinstance(probe, (list, tuple)) or (isinstance(probe, Tensor) and probe.ndim > 0) or \
            (isinstance(probe, np.ndarray) and probe.ndim > 0):
        shape.append(len(probe))
        if len(probe) == 0:
            break
        probe = probe[0]
    inferred: DType | None = None

    def walk(x, dim):
        nonlocal inferred
        if dim < len(shape):
            check(isinstance(x, (list, tuple, Tensor, np.ndarray)) and (not isinstance(x, (Tensor, np.ndarray)) or
                                                                       x.ndim > 0),
                  lambda: f"{fn}: expected sequence of length {shape[dim]} at dim {dim} (got a scalar)", ValueError)
            check(len(x) == shape[dim], lambda: f"{fn}: expected sequence of length {shape[dim]} at dim {dim} "
                  f"(got {len(x)})", ValueError)
            if isinstance(x, (Tensor, np.ndarray)):
                d = dtype_from(x.dtype)
                inferred = d if inferred is None else P.promote_types(inferred, d)
                check(tuple(x.shape) == tuple(shape[dim:]), lambda: f"{fn}: expected sequence of shape "
                      f"{shape[dim:]} at dim {dim} (got {list(x.shape)})", ValueError)
                return
            for item in x:
                walk(item, dim + 1)
            return
        if isinstance(x, (list, tuple)):
            fail(f"{fn}: expected a scalar at dim {dim} but got a sequence of length {len(x)}", ValueError)
        if isinstance(x, (Tensor, np.ndarray, np.generic)):
            d = dtype_from(x.dtype)
        elif isinstance(x, (bool, int, float, complex)):
            d = P.scalar_dtype(x)
        elif isinstance(x, numbers.Number):
            d = P.scalar_dtype(complex(x) if isinstance(x, numbers.Complex) and not isinstance(x, numbers.Real)
                               else float(x))
        else:
            fail(f"{fn}: could not infer dtype of {type(x).__name__}", TypeError)
        inferred = d if inferred is None else P.promote_types(inferred, d)

    walk(data, 0)
    return tuple(shape), inferred


def _to_host(data: Any, dt: DType, shape: tuple[int, ...]) -> np.ndarray:
    """Nested Python data to a host array of ``dt.numpy`` (values converted by the cast rules)."""
    def leaf(x):
        if isinstance(x, Tensor):
            return _download(x)
        return x
    if isinstance(data, Tensor):
        a = _download(data)
        return cast_array(a, data.dtype, dt)
    if isinstance(data, np.ndarray):
        return cast_array(data, dtype_from(data.dtype), dt)

    def conv(x):
        if isinstance(x, (list, tuple)):
            return [conv(i) for i in x]
        return leaf(x)

    nested = conv(data)
    # Build at the widest type of the category, then cast by the library's rules (so 1e10 -> int32 saturates
    # the same way a tensor cast does, and float64 -> float16 rounds through float32 like PyTorch).
    wide = {T.KIND_BOOL: np.bool_, T.KIND_UINT: np.uint64, T.KIND_INT: np.int64,
            T.KIND_FLOAT: np.float64, T.KIND_COMPLEX: np.complex128}
    host = np.array(nested, dtype=object).reshape(shape) if shape else np.array(nested, dtype=object)
    src_kind = _leaf_kind(host)
    if dt.kind in (T.KIND_INT, T.KIND_UINT) and src_kind in (T.KIND_INT, T.KIND_UINT, T.KIND_BOOL):
        # Python ints into an integer dtype are checked for overflow, as PyTorch's tensor() does.
        flat = [checked_scalar(int(v), dt, "tensor") for v in host.reshape(-1).tolist()]
        return np.array(flat, dtype=dt.numpy).reshape(shape)
    src = {T.KIND_BOOL: T.bool_, T.KIND_UINT: T.int64, T.KIND_INT: T.int64, T.KIND_FLOAT: T.float64,
           T.KIND_COMPLEX: T.complex128}[src_kind]
    arr = np.array(host.tolist() if host.ndim else host.item(), dtype=wide[src.kind]).reshape(shape)
    return cast_array(arr, src, dt)


def _leaf_kind(host: np.ndarray) -> str:
    kinds = set()
    for v in host.reshape(-1).tolist():
        if isinstance(v, (bool, np.bool_)):
            kinds.add(0)
        elif isinstance(v, (int, np.integer)):
            kinds.add(1)
        elif isinstance(v, (float, np.floating)) or (hasattr(v, "dtype") and np.dtype(v.dtype).kind == "f"):
            kinds.add(2)
        elif isinstance(v, (complex, np.complexfloating)):
            kinds.add(3)
        else:
            kinds.add(2)
    top = max(kinds, default=2)
    return [T.KIND_BOOL, T.KIND_INT, T.KIND_FLOAT, T.KIND_COMPLEX][top]


def tensor(data: Any, *, dtype=None, device=None, requires_grad: bool = False, pin_memory: bool = False) -> Tensor:
    """A new tensor holding a copy of ``data`` (``torch.tensor``).

    Args:
        data: a Python number, nested lists/tuples of numbers, a NumPy array or scalar, or a tensor.
        dtype: the element type; inferred from ``data`` when ``None`` (see the module docstring).
        device: where to place it (default ``cpu``).

    Returns:
        A contiguous tensor of ``data``'s shape.

    Raises:
        ValueError: ragged nested sequences ("expected sequence of length 2 at dim 1 (got 3)").
        TypeError: leaves that are not numbers; an unknown dtype.
        RuntimeError: ``requires_grad=True`` (no autograd here).

    Example:
        >>> import nbxtensor as nbx
        >>> nbx.tensor([[1, 2], [3, 4]]).dtype
        nbxtensor.int64
    """
    check(not requires_grad, "tensor: nbxtensor is an inference library and has no autograd (requires_grad=True)")
    dev = as_device(device)
    if isinstance(data, np.ndarray) or isinstance(data, np.generic):
        a = np.asarray(data)
        src = dtype_from(a.dtype, arg="data")
        dt = _dt(dtype, src)
        return from_host_array(cast_array(a, src, dt), dt, dev)
    if isinstance(data, Tensor):
        return data.to(dtype=_dt(dtype, data.dtype), device=dev, copy=True)
    shape, inferred = _infer_shape_and_kind(data, "tensor")
    if inferred is None:
        inferred = P.get_default_dtype()
    dt = _dt(dtype, inferred)
    return from_host_array(_to_host(data, dt, shape), dt, dev)


def scalar_tensor(s, *, dtype=None, device=None) -> Tensor:
    """A 0-dim tensor of ``s`` (default dtype: the default float, as ``torch.scalar_tensor``)."""
    return tensor(s, dtype=_dt(dtype, P.get_default_dtype()), device=device)


def from_numpy(ndarray: np.ndarray) -> Tensor:
    """A CPU tensor sharing memory with ``ndarray`` (``torch.from_numpy``): writes show through both ways.

    Differences from PyTorch: a read-only array gives a read-only tensor (writes raise) instead of a warning.

    Raises:
        TypeError: not a NumPy array, or a NumPy dtype with no nbxtensor dtype.
        ValueError: a negative stride (as PyTorch).
    """
    check(isinstance(ndarray, np.ndarray), lambda: f"from_numpy: expected np.ndarray (got {type(ndarray).__name__})",
          TypeError)
    dt = dtype_from(ndarray.dtype, arg="ndarray")
    check(all(s >= 0 for s in ndarray.strides), "from_numpy: at least one stride in the given numpy array is negative, "
          "and tensors with negative strides are not currently supported. (You can probably work around this by making "
          "a copy of your array with array.copy().)", ValueError)
    check(ndarray.dtype.isnative, lambda: f"from_numpy: given numpy array has byte order {ndarray.dtype.byteorder!r} "
          "different from the native byte order. Only native byte order is supported.", ValueError)
    storage, off = wrap_host_array(ndarray)
    strides = tuple(s // ndarray.itemsize for s in ndarray.strides)
    return Tensor(storage, ndarray.shape, strides, off, dt)


def as_tensor(data: Any, dtype=None, device=None) -> Tensor:
    """Like :func:`tensor`, but shares memory where possible (``torch.as_tensor``): a tensor with the same dtype and
    device is returned as is; a NumPy array on ``cpu`` with the same dtype is wrapped without a copy."""
    dev = as_device(device) if device is not None else None
    if isinstance(data, Tensor):
        return data.to(dtype=_dt(dtype, data.dtype), device=dev if dev is not None else data.device)
    if isinstance(data, np.ndarray) and (dev is None or dev.type == "cpu") and \
            (dtype is None or dtype_from(dtype).numpy == data.dtype) and all(s >= 0 for s in data.strides):
        try:
            dtype_from(data.dtype)
            return from_numpy(data)
        except TypeError:
            pass
    return tensor(data, dtype=dtype, device=dev)


def asarray(obj: Any, *, dtype=None, device=None, copy: bool | None = None, requires_grad: bool = False) -> Tensor:
    """Convert ``obj`` (tensor, DLPack producer, NumPy array, nested sequence, scalar) to a tensor
    (``torch.asarray``). ``copy=None`` shares memory when it can; ``copy=False`` raises where it cannot;
    ``copy=True`` always copies.

    Raises:
        ValueError: ``copy=False`` and a copy is needed.
    """
    check(not requires_grad, "asarray: nbxtensor has no autograd (requires_grad=True)")
    dev = as_device(device) if device is not None else None
    src = obj
    if not isinstance(obj, (Tensor, np.ndarray)) and hasattr(obj, "__dlpack__"):
        from .dlpack import from_dlpack
        src = from_dlpack(obj)
    if isinstance(src, np.ndarray) and copy is not True:
        if (dtype is None or dtype_from(dtype).numpy == src.dtype) and (dev is None or dev.type == "cpu") and \
                all(s >= 0 for s in src.strides):
            return from_numpy(src)
    if isinstance(src, Tensor):
        want_dt = _dt(dtype, src.dtype)
        want_dev = dev if dev is not None else src.device
        same = want_dt is src.dtype and want_dev == src.device
        if same and copy is not True:
            return src
        check(copy is not False, lambda: f"asarray: copy=False but converting {src.dtype.name} on {src.device} to "
              f"{want_dt.name} on {want_dev} needs a copy", ValueError)
        return src.to(dtype=want_dt, device=want_dev, copy=True)
    check(copy is not False, "asarray: copy=False but the input is not memory nbxtensor can share", ValueError)
    return tensor(src, dtype=dtype, device=dev)


def empty(*size, dtype=None, device=None, **_ignored) -> Tensor:
    """An uninitialised contiguous tensor of ``size`` (default dtype: the default float dtype).

    Raises:
        RuntimeError: a negative size. TypeError: a non-integer size.
    """
    shape = normalize_shape(size, fn="empty")
    return new_empty(shape, _dt(dtype, P.get_default_dtype()), as_device(device))


def full(size, fill_value, *, dtype=None, device=None) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value``; dtype inferred from the value as ``torch.full``
    (bool -> bool, int -> int64, float -> default float, complex -> default complex)."""
    if dtype is None:
        check(isinstance(fill_value, (bool, int, float, complex, np.generic)) or isinstance(fill_value, Tensor),
              lambda: f"full: fill_value must be a number, got {type(fill_value).__name__}", TypeError)
        dt = dtype_from(fill_value.dtype) if hasattr(fill_value, "dtype") else P.scalar_dtype(fill_value)
    else:
        dt = dtype_from(dtype)
    out = new_empty(normalize_shape((size,) if isinstance(size, int) else tuple(size), fn="full"), dt,
                    as_device(device))
    return out.fill_(fill_value)


def zeros(*size, dtype=None, device=None) -> Tensor:
    """A tensor of ``size`` filled with 0 (default dtype: the default float dtype)."""
    return full(normalize_shape(size, fn="zeros"), 0, dtype=_dt(dtype, P.get_default_dtype()), device=device)


def ones(*size, dtype=None, device=None) -> Tensor:
    """A tensor of ``size`` filled with 1 (default dtype: the default float dtype)."""
    return full(normalize_shape(size, fn="ones"), 1, dtype=_dt(dtype, P.get_default_dtype()), device=device)


def empty_like(input: Tensor, *, dtype=None, device=None) -> Tensor:
    return empty(input.shape, dtype=_dt(dtype, input.dtype), device=device if device is not None else input.device)


def zeros_like(input: Tensor, *, dtype=None, device=None) -> Tensor:
    return full(input.shape, 0, dtype=_dt(dtype, input.dtype), device=device if device is not None else input.device)


def ones_like(input: Tensor, *, dtype=None, device=None) -> Tensor:
    return full(input.shape, 1, dtype=_dt(dtype, input.dtype), device=device if device is not None else input.device)


def full_like(input: Tensor, fill_value, *, dtype=None, device=None) -> Tensor:
    return full(input.shape, fill_value, dtype=_dt(dtype, input.dtype),
                device=device if device is not None else input.device)


def _num(x, name: str, fn: str):
    if isinstance(x, Tensor):
        x = x.item()
    check(isinstance(x, (numbers.Real, np.generic)) and not isinstance(x, complex), lambda: f"{fn}: argument "
          f"'{name}' must be a real number, got {type(x).__name__}", TypeError)
    return x


def arange(start=0, end=None, step=1, *, dtype=None, device=None) -> Tensor:
    """Values ``start, start+step, ...`` below ``end`` (``torch.arange``): int64 when all of start, end and step
    are ints, else the default float dtype. Values are ``start + i*step`` computed in float64 (ATen's CPU
    accumulate type) and then converted.

    Raises:
        RuntimeError: step == 0; end and start inconsistent with the step's sign; a non-finite bound.
    """
    if end is None:
        start, end = 0, start
    start, end, step = _num(start, "start", "arange"), _num(end, "end", "arange"), _num(step, "step", "arange")
    all_int = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) or isinstance(v, bool)
                  for v in (start, end, step))
    dt = _dt(dtype, T.int64 if all_int else P.get_default_dtype())
    check(step != 0, "arange: step must be nonzero")
    check(all(math.isfinite(float(v)) for v in (start, end)), lambda: f"arange: unsupported range: {start} -> {end}")
    check((step > 0 and end >= start) or (step < 0 and end <= start),
          "arange: upper bound and larger bound inconsistent with step sign")
    if all_int and dt.kind in (T.KIND_INT, T.KIND_UINT):
        n = max(0, -(-(end - start) // step))
        vals = start + step * np.arange(n, dtype=np.int64)
        return from_host_array(cast_array(vals, T.int64, dt), dt, as_device(device))
    n = int(math.ceil((float(end) - float(start)) / float(step)))
    n = max(n, 0)
    vals = float(start) + float(step) * np.arange(n, dtype=np.float64)
    return from_host_array(cast_array(vals, T.float64, dt), dt, as_device(device))


def linspace(start, end, steps: int, *, dtype=None, device=None) -> Tensor:
    """``steps`` evenly spaced values from ``start`` to ``end`` inclusive (``torch.linspace``).

    Uses ATen's symmetric formula (aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp): with
    ``step = (end - start) / (steps - 1)``, the first half is ``start + i*step`` and the second half
    ``end - (steps - 1 - i)*step``, so both ends are exact. Computed in float64, then converted.

    Raises:
        RuntimeError: steps < 0.
    """
    start, end = _num(start, "start", "linspace"), _num(end, "end", "linspace")
    check(isinstance(steps, (int, np.integer)) and steps >= 0, lambda: f"linspace: number of steps must be "
          f"non-negative, got {steps}")
    dt = _dt(dtype, P.get_default_dtype())
    if steps == 0:
        vals = np.zeros(0)
    elif steps == 1:
        vals = np.array([float(start)])
    else:
        step = (float(end) - float(start)) / (steps - 1)
        i = np.arange(steps, dtype=np.float64)
        half = steps // 2
        vals = np.where(i < half, float(start) + step * i, float(end) - step * (steps - 1 - i))
    return from_host_array(cast_array(vals, T.float64, dt), dt, as_device(device))


def eye(n: int, m: int | None = None, *, dtype=None, device=None) -> Tensor:
    """An ``n x m`` tensor with ones on the diagonal (``m`` defaults to ``n``).

    Raises:
        RuntimeError: a negative size.
    """
    m = n if m is None else m
    check(n >= 0, lambda: f"eye: n must be greater or equal to 0, got {n}")
    check(m >= 0, lambda: f"eye: m must be greater or equal to 0, got {m}")
    dt = _dt(dtype, P.get_default_dtype())
    return from_host_array(cast_array(np.eye(n, m, dtype=np.float64), T.float64, dt), dt, as_device(device))
