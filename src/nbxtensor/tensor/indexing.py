"""Basic indexing: ``__getitem__`` and ``__setitem__`` with ints, slices (positive steps), ``None`` and ``...``.

Results are views, as PyTorch's basic indexing (torch/csrc/autograd/python_variable_indexing.cpp,
``applySlicing``): an int selects (removing the dim), a slice narrows with a step (the offset moves to the
clamped start even when the result is empty, as ATen's ``slice``), ``None`` inserts a dim of size 1, ``...`` stands
for as many full slices as needed. Integer
indices may be Python ints, NumPy integers or one-element integer tensors.

Errors as PyTorch: a negative step raises ``ValueError("step must be greater than zero")`` and a zero step
``ValueError("slice step cannot be zero")``; an int out of range, too many indices and a float index raise
``IndexError``; a float tensor index raises ``IndexError``.

Differences from PyTorch:
- Advanced indexing (lists, arrays, tensors with dims, bools and bool tensors) raises ``NotImplementedError``
  (not supported yet; PyTorch treats even ``x[True]`` as advanced indexing, which copies).
- Two or more ``...`` raise ``IndexError`` (NumPy's rule; PyTorch accepts them with inconsistent results, e.g.
  ``x[..., ..., 0]`` on a 3-dim tensor raises an out-of-bounds error on a dim of size 0).
"""

from __future__ import annotations

import numbers

import numpy as np

from .._errors import check, fail
from .core import Tensor, make_tensor

__all__ = ["getitem", "setitem"]

_INDEX_TYPES = "only integers, slices (`:`), ellipsis (`...`) and None are valid indices"


def _normalize(index) -> tuple:
    if not isinstance(index, tuple):
        index = (index,)
    out = []
    for item in index:
        if isinstance(item, (bool, np.bool_)):
            fail(f"indexing: a bool index is advanced indexing, which nbxtensor does not support yet; {_INDEX_TYPES}",
                 NotImplementedError)
        elif isinstance(item, Tensor):
            if item.dtype.kind == "float" or item.dtype.kind == "complex":
                fail("indexing: tensors used as indices must be long, int, byte or bool tensors, got "
                     f"{item.dtype.name}", IndexError)
            check(item.ndim == 0 and item.dtype.kind in ("int", "uint"), lambda: "indexing: advanced indexing (a "
                  f"{item.dtype.name} tensor index with {item.ndim} dims) is not supported by nbxtensor yet; "
                  f"{_INDEX_TYPES}", NotImplementedError)
            item = int(item.item())
        elif isinstance(item, (numbers.Integral, np.integer)):
            item = int(item)
        elif isinstance(item, (list, np.ndarray)):
            fail(f"indexing: advanced indexing (a {type(item).__name__} index) is not supported by nbxtensor yet; "
                 f"{_INDEX_TYPES}", NotImplementedError)
        elif isinstance(item, (float, complex, np.floating, np.complexfloating)):
            fail(f"indexing: {_INDEX_TYPES} (got {type(item).__name__})", IndexError)
        elif not (item is None or item is Ellipsis or isinstance(item, slice)):
            fail(f"indexing: {_INDEX_TYPES} (got {type(item).__name__})", TypeError)
        out.append(item)
    return tuple(out)


_VIEWS: dict = {}   # (shape, strides, index key) -> (shape, strides, offset delta) of the view


def _index_key(index):
    """A hashable form of an index made only of Python ints, ``None``, ``...`` and slices with int or ``None``
    bounds (what the memo of :func:`getitem` serves), else None."""
    if index.__class__ is not tuple:
        index = (index,)
    key = []
    for item in index:
        t = item.__class__
        if t is int or item is None or item is Ellipsis:
            key.append(item)
        elif t is slice:
            a, b, c = item.start, item.stop, item.step
            if not ((a is None or a.__class__ is int) and (b is None or b.__class__ is int)
                    and (c is None or c.__class__ is int)):
                return None
            key.append((a, b, c))
        else:
            return None
    return tuple(key)


def getitem(self: Tensor, index) -> Tensor:
    """``self[index]`` as a view. See the module docstring for the accepted index forms.

    The view's layout for a given source layout and a plain index (ints, slices, ``None``, ``...``) is
    memoised; only the offset moves with the source.

    Raises:
        IndexError: too many indices, more than one ellipsis, an int out of range, a float index; any index
            but ``None``/``...``/``()`` on a 0-dim tensor.
        ValueError: a slice step <= 0.
        TypeError: an unsupported index type; slice bounds that are not integers.
        NotImplementedError: advanced indexing (lists, arrays, tensors with dims, bools).
    """
    key = _index_key(index)
    if key is not None:
        key = (self._shape, self._stride, key)
        hit = _VIEWS.get(key)
        if hit is not None:
            return make_tensor(self._storage, hit[0], hit[1], self._offset + hit[2], self._dtype)
    r = _getitem(self, index)
    if key is not None:
        if len(_VIEWS) >= 4096:
            _VIEWS.clear()
        _VIEWS[key] = (r._shape, r._stride, r._offset - self._offset)
    return r


def _getitem(self: Tensor, index) -> Tensor:
    index = _normalize(index)
    n_ell = sum(1 for i in index if i is Ellipsis)
    check(n_ell <= 1, "indexing: an index can only have a single ellipsis ('...')", IndexError)
    consumed = sum(1 for i in index if i is not None and i is not Ellipsis)
    if self.ndim == 0 and consumed:
        first = next(i for i in index if i is not None and i is not Ellipsis)
        fail("invalid index of a 0-dim tensor. Use `tensor.item()` in Python to convert a 0-dim tensor to a number"
             if isinstance(first, int) else "indexing: slice() cannot be applied to a 0-dim tensor.", IndexError)
    check(consumed <= self.ndim, lambda: f"too many indices for tensor of dimension {self.ndim}", IndexError)
    if n_ell:
        pos = index.index(Ellipsis)
        index = index[:pos] + (slice(None),) * (self.ndim - consumed) + index[pos + 1:]
    shape, stride = list(self.shape), list(self.stride())
    offset = self.storage_offset()
    out_shape, out_stride = [], []
    d = 0
    for item in index:
        if item is None:
            out_shape.append(1)
            out_stride.append(stride[d] * shape[d] if d < len(shape) else 1)
            continue
        size, st = shape[d], stride[d]
        if isinstance(item, int):
            check(-size <= item < size, lambda: f"index {item} is out of bounds for dimension {d} with size {size}",
                  IndexError)
            offset += (item + size if item < 0 else item) * st
        else:
            step = 1 if item.step is None else _slice_int(item.step)
            check(step != 0, "slice step cannot be zero", ValueError)
            check(step > 0, "step must be greater than zero", ValueError)
            start, stop, _ = slice(_slice_int(item.start), _slice_int(item.stop), step).indices(size)
            stop = max(stop, start)
            offset += start * st  # ATen's slice: the offset moves even for an empty result
            out_shape.append((stop - start + step - 1) // step)
            out_stride.append(st * step)
        d += 1
    out_shape += shape[d:]
    out_stride += stride[d:]
    return self._view(out_shape, out_stride, offset)


def _slice_int(v):
    """A slice bound as an int: Python/NumPy integers and one-element integer tensors (``__index__``)."""
    if v is None or isinstance(v, int):
        return v
    check(hasattr(v, "__index__") and not isinstance(v, (float, bool)),
          "slice indices must be integers or None or have an __index__ method", TypeError)
    return v.__index__()


def setitem(self: Tensor, index, value) -> None:
    """``self[index] = value``: a tensor value is broadcast and converted (``copy_``); a number fills (``fill_``,
    with PyTorch's overflow check).

    Leading dims of size 1 of a tensor value are dropped first, so a ``(1, 1, 3)`` value fits a ``(3,)`` target
    (PyTorch's ``slicePrefix1sSize``).

    Raises:
        as :func:`getitem`, and as ``copy_``/``fill_`` for the value.
        TypeError: a value that is neither a tensor nor a number (PyTorch refuses lists and NumPy arrays too:
            "can't assign a list to a Tensor"; wrap them with ``nbx.tensor``).
    """
    target = getitem(self, index)
    if isinstance(value, Tensor):
        shape = list(value.shape)
        drop = 0
        while drop < len(shape) and shape[drop] == 1 and len(shape) - drop > target.ndim:
            drop += 1
        if drop:
            value = value._view(shape[drop:], value.stride()[drop:])
        target.copy_(value)
    elif isinstance(value, (numbers.Number, np.generic)) and not isinstance(value, (str, bytes)):
        _set_number(target, value.item() if isinstance(value, np.generic) else value)
    else:
        fail(f"__setitem__: can't assign a {type(value).__name__} to a {self.dtype.name} tensor (expected a tensor "
             "or a number)", TypeError)


_NARROW_FLOATS = ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")


def _set_number(target: Tensor, value) -> None:
    """PyTorch's ``x[i] = number``: a Python int must fit int64 (uint64 targets: [0, 2**64)); float16, bfloat16
    and float8 targets take a real value by the cast rules (``x[0] = 1e6`` gives inf in float16, 448 in
    float8_e4m3fn, where ``fill_`` raises); other dtypes check overflow as ``fill_``."""
    if isinstance(value, int) and not isinstance(value, bool):
        ok = 0 <= value < 2 ** 64 if target.dtype.name == "uint64" else -2 ** 63 <= value < 2 ** 63
        check(ok, lambda: f"__setitem__: Overflow when unpacking long long ({value})", ValueError)
    if target.dtype.name in _NARROW_FLOATS and not isinstance(value, complex):
        from .creation import tensor as _tensor
        target.copy_(_tensor(float(value), dtype="float64"))
        return
    target.fill_(value)


Tensor.__getitem__ = getitem
Tensor.__setitem__ = setitem
