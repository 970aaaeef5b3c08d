"""Tensor factories with PyTorch's names, arguments and dtype inference.

``tensor``, ``as_tensor``, ``asarray``, ``from_numpy``, ``empty``, ``zeros``, ``ones``, ``full``, ``arange``,
``linspace``, ``eye`` and the ``*_like`` forms; each takes ``dtype=`` and ``device=``.

Dtype inference (https://pytorch.org/docs/stable/generated/torch.tensor.html): Python bools give bool, ints
int64, floats the default float dtype, complex numbers the default complex dtype; mixed data takes the highest
category. NumPy arrays and NumPy scalars keep their dtype.
"""

from __future__ import annotations

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
from .core import Tensor, _download, from_host_array, new_empty, new_empty_like

__all__ = ["tensor", "as_tensor", "asarray", "from_numpy", "empty", "zeros", "ones", "full", "arange", "linspace",
           "eye", "empty_like", "zeros_like", "ones_like", "full_like", "scalar_tensor"]


def _dt(dtype, default: DType | None = None) -> DType | None:
    return default if dtype is None else dtype_from(dtype)


def _is_seq(x) -> bool:
    return isinstance(x, (list, tuple, range)) or (isinstance(x, (Tensor, np.ndarray)) and x.ndim > 0)


def _leaf_dtype(x, fn: str) -> DType:
    """The dtype a scalar leaf of nested data contributes to inference (``torch.tensor``'s rules)."""
    if isinstance(x, (Tensor, np.ndarray, np.generic)):
        return dtype_from(x.dtype, arg="data")
    if isinstance(x, (bool, int, float, complex)):
        return P.scalar_dtype(x)
    if isinstance(x, numbers.Number):
        return P.scalar_dtype(complex(x) if isinstance(x, numbers.Complex) and not isinstance(x, numbers.Real)
                              else float(x))
    if x is None:
        fail(f"{fn}: Could not infer dtype of NoneType", RuntimeError)
    if isinstance(x, (str, bytes)):
        fail(f"{fn}: too many dimensions '{type(x).__name__}' (strings are not numbers)", ValueError)
    fail(f"{fn}: Could not infer dtype of {type(x).__name__}", TypeError)


def _flatten_data(data: Any, fn: str) -> tuple[tuple[int, ...], list, DType | None, bool]:
    """Walk nested sequences: the shape (checking it is rectangular), the scalar leaves in C order (as Python
    numbers), the dtype inferred from them (``promote_types`` over the leaves' own dtypes, Python scalars taking
    their defaults), and whether any leaf came from a NumPy scalar, array or tensor."""
    shape: list[int] = []
    probe = data
    while _is_seq(probe):
        shape.append(len(probe))
        if len(probe) == 0:
            break
        probe = probe[0]
    leaves: list = []
    inferred: DType | None = None
    foreign = False

    def walk(x, dim):
        nonlocal inferred, foreign
        if dim < len(shape):
            check(_is_seq(x), lambda: f"{fn}: not a sequence: expected a sequence of length {shape[dim]} at dim {dim}, "
                  f"got {type(x).__name__}", TypeError)
            check(len(x) == shape[dim], lambda: f"{fn}: expected sequence of length {shape[dim]} at dim {dim} "
                  f"(got {len(x)})", ValueError)
            if isinstance(x, (Tensor, np.ndarray)):
                d = dtype_from(x.dtype, arg="data")
                inferred = d if inferred is None else P.promote_types(inferred, d)
                check(tuple(x.shape) == tuple(shape[dim:]), lambda: f"{fn}: expected sequence of shape "
                      f"{shape[dim:]} at dim {dim} (got {list(x.shape)})", ValueError)
                host = _download(x) if isinstance(x, Tensor) else np.asarray(x)
                leaves.extend(_py_scalar_list(host, d))
                foreign = True
                return
            for item in x:
                walk(item, dim + 1)
            return
        check(not isinstance(x, (list, tuple, range)), lambda: f"{fn}: expected a number at dim {dim} but got a "
              f"sequence of length {len(x)}", TypeError)
        d = _leaf_dtype(x, fn)
        inferred = d if inferred is None else P.promote_types(inferred, d)
        if isinstance(x, (Tensor, np.ndarray, np.generic)):
            foreign = True
            x = x.item()
        leaves.append(x)

    walk(data, 0)
    return tuple(shape), leaves, inferred, foreign


def _py_scalar_list(a: np.ndarray, d: DType) -> list:
    if d.kind == T.KIND_FLOAT and d.itemsize < 4:
        a = a.astype(np.float32)
    return a.reshape(-1).tolist()


def _leaves_to_host(leaves: list, dt: DType, shape: tuple[int, ...], fn: str, foreign: bool = False) -> np.ndarray:
    """Scalar leaves to a host array of ``dt`` by ``torch.tensor``'s per-element rules.

    Integer targets: every value is checked (``checked_scalar``'s rules: ints in range, unsigned ones wrapping
    from ``[-max, -1]``; floats finite and in range before truncation). Floating and complex targets: a plain
    cast (``1e300`` -> inf in float32, as PyTorch). Complex values into a real non-bool dtype raise TypeError. A
    Python int beyond int64 raises ValueError (PyTorch: "Overflow when unpacking long long"), except into uint64
    (up to 2**64 - 1) and floating types.
    """
    n = len(leaves)
    if dt is T.bool_:
        return np.array([bool(v) for v in leaves], dtype=np.bool_).reshape(shape)
    has_complex = any(isinstance(v, complex) for v in leaves)
    if dt.kind != T.KIND_COMPLEX:
        check(not has_complex, lambda: f"{fn}: must be real number, not complex (converting to {dt.name})",
              TypeError)
    if dt is T.uint64:  # PyTorch's tensor() reads uint64 leaves as Python ints only
        check(not foreign and all(isinstance(v, int) for v in leaves), lambda: f"{fn}: an integer is required for "
              "uint64 data (Python ints only; NumPy scalars, arrays, tensors and floats are refused as in PyTorch)",
              TypeError)
    big = [v for v in leaves if isinstance(v, int) and not isinstance(v, bool) and not -2 ** 63 <= v < 2 ** 63]
    if big and dt.kind in (T.KIND_INT, T.KIND_UINT):
        if dt is T.uint64:
            check(all(0 <= v < 2 ** 64 for v in big), lambda: f"{fn}: int too big to convert or negative for "
                  f"uint64 (got {big[0]})", OverflowError)
            check(all(v >= 0 for v in leaves if isinstance(v, int)), lambda: f"{fn}: can't convert negative int "
                  "to unsigned", OverflowError)
            return np.array([int(v) for v in leaves], dtype=np.uint64).reshape(shape)
        fail(f"{fn}: Overflow when unpacking long long ({big[0]} does not fit int64)", ValueError)
    if dt.kind == T.KIND_COMPLEX:
        return cast_array(np.array(leaves, dtype=np.complex128).reshape(shape), T.complex128, dt)
    all_int = all(isinstance(v, int) for v in leaves)
    if dt.kind == T.KIND_FLOAT:
        if all_int and not big:
            return cast_array(np.array(leaves, dtype=np.int64).reshape(shape), T.int64, dt)
        return cast_array(np.array(leaves, dtype=np.float64).reshape(shape), T.float64, dt)
    # integer target: checked conversion, vectorised
    info = np.iinfo(dt.numpy)
    lo, hi = int(info.min), int(info.max)
    err = lambda: f"{fn}: value cannot be converted to type {dt.name} without overflow"  # noqa: E731
    if all_int:
        a = np.array(leaves, dtype=np.int64).reshape(shape) if n else np.zeros(shape, np.int64)
        if dt.kind == T.KIND_UINT:
            check(bool(np.all((a >= -hi) & (a <= hi))) if dt is not T.uint64 else True, err)
            if dt is T.uint64:
                check(bool(np.all(a >= 0)), lambda: f"{fn}: can't convert negative int to unsigned", OverflowError)
        else:
            check(bool(np.all((a >= lo) & (a <= hi))), err)
        return a.astype(dt.numpy)
    f = np.array(leaves, dtype=np.float64).reshape(shape)
    hi_f = float(hi)
    within_hi = (f <= hi_f) if int(hi_f) == hi else (f < hi_f)  # exact bound even where max is not a double
    check(bool(np.all(np.isfinite(f) & (f >= float(lo)) & within_hi)), err)
    return np.trunc(f).astype(dt.numpy)


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
        check(a.dtype.kind not in "USO", lambda: f"tensor: can't convert np.ndarray of type {a.dtype}; the "
              "supported NumPy dtypes are those of nbxtensor's dtype table", TypeError)
        check(a.dtype.isnative, "tensor: given numpy array has byte order different from the native byte order. "
              "Conversion between byte orders is currently not supported.", ValueError)
        src = dtype_from(a.dtype, arg="data")
        dt = _dt(dtype, src)
        return from_host_array(cast_array(a, src, dt), dt, dev)
    if isinstance(data, Tensor):
        return data.to(dtype=_dt(dtype, data.dtype), device=dev, copy=True)
    check(not isinstance(data, (str, bytes)), lambda: f"tensor: new(): invalid data type '{type(data).__name__}'",
          TypeError)
    shape, leaves, inferred, foreign = _flatten_data(data, "tensor")
    if inferred is None:
        inferred = P.get_default_dtype()
    dt = _dt(dtype, inferred)
    return from_host_array(_leaves_to_host(leaves, dt, shape, "tensor", foreign), dt, dev)


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
    check(ndarray.dtype.isnative, lambda: f"from_numpy: given numpy array has byte order {ndarray.dtype.byteorder!r} "
          "different from the native byte order. Only native byte order is supported.", ValueError)
    dt = dtype_from(ndarray.dtype, arg="ndarray")
    check(all(s >= 0 for s in ndarray.strides), "from_numpy: at least one stride in the given numpy array is negative, "
          "and tensors with negative strides are not currently supported. (You can probably work around this by making "
          "a copy of your array with array.copy().)", ValueError)
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


def _size_arg(size: tuple, fn: str) -> tuple[int, ...]:
    check(len(size) > 0, lambda: f'{fn}() missing 1 required positional arguments: "size"', TypeError)
    shape = normalize_shape(size, fn=fn)
    for d in shape:
        check(d >= 0, lambda: f"{fn}: Trying to create tensor with negative dimension {d}: {list(shape)}")
    return shape


def empty(*size, dtype=None, device=None, **_ignored) -> Tensor:
    """An uninitialised contiguous tensor of ``size`` (default dtype: the default float dtype).

    Raises:
        RuntimeError: a negative size. TypeError: no size, or a non-integer size.
    """
    return new_empty(_size_arg(size, "empty"), _dt(dtype, P.get_default_dtype()), as_device(device))


def _fill_dtype(fill_value, fn: str) -> DType:
    """``torch.full``'s dtype inference: by the value's category (bool -> bool, integer -> int64, floating ->
    the default float, complex -> the default complex), for Python numbers, NumPy scalars and 0-dim tensors alike."""
    if isinstance(fill_value, Tensor):
        check(fill_value.numel() == 1, lambda: f"{fn}: fill_value must be a number or a one-element tensor, got a "
              f"tensor of {fill_value.numel()} elements", TypeError)
        fill_value = fill_value.item()
    if isinstance(fill_value, np.bool_):
        return P.get_default_dtype()  # PyTorch's argument parser reads a NumPy bool as a float number
    if isinstance(fill_value, np.generic):
        fill_value = fill_value.item()
    check(isinstance(fill_value, (bool, int, float, complex)), lambda: f"{fn}(): argument 'fill_value' must be "
          f"Number, not {type(fill_value).__name__}", TypeError)
    return P.scalar_dtype(fill_value)


def full(size, fill_value, *, dtype=None, device=None) -> Tensor:
    """A tensor of ``size`` filled with ``fill_value`` (``torch.full``).

    Args:
        size: a tuple or list of ints (not a bare int, as PyTorch).
        fill_value: a number (Python, NumPy scalar or one-element tensor); converted with PyTorch's overflow check.
        dtype: default: inferred from the value's category (bool -> bool, int -> int64, float -> the default
            float, complex -> the default complex).

    Raises:
        TypeError: ``size`` not a sequence of ints; ``fill_value`` not a number.
        RuntimeError: a negative size; a value that overflows ``dtype`` ("value cannot be converted to type
            uint8 without overflow").
    """
    check(isinstance(size, (tuple, list)) or type(size).__name__ == "Size", lambda: f"full(): argument 'size' "
          f"(position 1) must be tuple of ints, not {type(size).__name__}", TypeError)
    dt = _fill_dtype(fill_value, "full") if dtype is None else dtype_from(dtype)
    if dtype is not None:
        _fill_dtype(fill_value, "full")  # type check only
    shape = _size_arg((tuple(size),), "full")
    out = new_empty(shape, dt, as_device(device))
    return out.fill_(fill_value.item() if isinstance(fill_value, Tensor) else fill_value)


def zeros(*size, dtype=None, device=None) -> Tensor:
    """A tensor of ``size`` filled with 0 (default dtype: the default float dtype)."""
    return full(_size_arg(size, "zeros"), 0, dtype=_dt(dtype, P.get_default_dtype()), device=device)


def ones(*size, dtype=None, device=None) -> Tensor:
    """A tensor of ``size`` filled with 1 (default dtype: the default float dtype)."""
    return full(_size_arg(size, "ones"), 1, dtype=_dt(dtype, P.get_default_dtype()), device=device)


def _like(input: Tensor, dtype, device, memory_format, fn: str) -> Tensor:
    check(isinstance(input, Tensor), lambda: f"{fn}(): argument 'input' (position 1) must be Tensor, not "
          f"{type(input).__name__}", TypeError)
    dev = as_device(device) if device is not None else input.device
    return new_empty_like(input, _dt(dtype, input.dtype), dev, memory_format, fn)


def empty_like(input: Tensor, *, dtype=None, device=None, memory_format=None) -> Tensor:
    """An uninitialised tensor shaped like ``input``, with its dtype and device unless given; its strides too
    where ``input`` is non-overlapping and dense (PyTorch's ``preserve_format``), else row-major."""
    return _like(input, dtype, device, memory_format, "empty_like")


def zeros_like(input: Tensor, *, dtype=None, device=None, memory_format=None) -> Tensor:
    """Zeros laid out as :func:`empty_like` lays them out."""
    return _like(input, dtype, device, memory_format, "zeros_like").fill_(0)


def ones_like(input: Tensor, *, dtype=None, device=None, memory_format=None) -> Tensor:
    """Ones laid out as :func:`empty_like` lays them out."""
    return _like(input, dtype, device, memory_format, "ones_like").fill_(1)


def full_like(input: Tensor, fill_value, *, dtype=None, device=None, memory_format=None) -> Tensor:
    """``fill_value`` in ``input``'s dtype (not the value's) and layout (as :func:`empty_like`).

    Raises:
        RuntimeError: a value that overflows the dtype. TypeError: a value that is not a number.
    """
    _fill_dtype(fill_value, "full_like")  # type check
    out = _like(input, dtype, device, memory_format, "full_like")
    return out.fill_(fill_value.item() if isinstance(fill_value, Tensor) else fill_value)


from .ranges import arange, linspace  # noqa: E402  (re-exported: the range factories live in ranges.py)


def eye(n: int, m: int | None = None, *, dtype=None, device=None) -> Tensor:
    """An ``n x m`` tensor with ones on the diagonal and zeros elsewhere (``m`` defaults to ``n``).

    Raises:
        RuntimeError: a negative size. TypeError: a non-integer size.
    """
    from ..shapes import index_arg
    n = index_arg(n, fn="eye", arg="n")
    m = n if m is None else index_arg(m, fn="eye", arg="m")
    check(n >= 0, lambda: f"eye: n must be greater or equal to 0, got {n}")
    check(m >= 0, lambda: f"eye: m must be greater or equal to 0, got {m}")
    dt = _dt(dtype, P.get_default_dtype())
    return from_host_array(cast_array(np.eye(n, m, dtype=np.float64), T.float64, dt), dt, as_device(device))
