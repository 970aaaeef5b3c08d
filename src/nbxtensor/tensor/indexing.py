"""Basic indexing: ``__getitem__`` and ``__setitem__`` with ints, slices (positive steps), ``None`` and ``...``.

Results are views, as PyTorch's basic indexing (torch/csrc/autograd/python_variable_indexing.cpp): an int
selects (removing the dim), a slice narrows with a step, ``None`` inserts a dim of size 1, ``...`` stands for
as many full slices as needed. A negative step raises ``ValueError("step must be greater than zero")`` as
PyTorch does. Advanced indexing (tensors, lists, bools) is not supported yet and raises ``TypeError``.
"""

from __future__ import annotations

import numbers

import numpy as np

from .._errors import check, fail
from .core import Tensor

__all__ = ["getitem", "setitem"]


def _normalize(index) -> tuple:
    if not isinstance(index, tuple):
        index = (index,)
    out = []
    for item in index:
        if isinstance(item, (bool, np.bool_)):
            fail("indexing: boolean indices (advanced indexing) are not supported by nbxtensor yet; only ints, "
                 "slices with positive steps, None and ... are", TypeError)
        if isinstance(item, Tensor):
            check(item.ndim == 0 and item.dtype.kind in ("int", "uint"), "indexing: tensor indices (advanced "
                  "indexing) are not supported by nbxtensor yet; only ints, slices, None and ... are", TypeError)
            item = int(item.item())
        elif isinstance(item, (numbers.Integral, np.integer)):
            item = int(item)
        elif not (item is None or item is Ellipsis or isinstance(item, slice)):
            fail(f"indexing: unsupported index type {type(item).__name__}; only ints, slices with positive steps, "
                 "None and ... are supported (advanced indexing is not yet)", TypeError)
        out.append(item)
    return tuple(out)


def getitem(self: Tensor, index) -> Tensor:
    """``self[index]`` as a view. See the module docstring for the accepted index forms.

    Raises:
        IndexError: too many indices, more than one ellipsis, an int out of range.
        ValueError: a slice step <= 0.
        TypeError: an unsupported index type.
    """
    index = _normalize(index)
    n_ell = sum(1 for i in index if i is Ellipsis)
    check(n_ell <= 1, "an index can only have a single ellipsis ('...')", IndexError)
    consumed = sum(1 for i in index if i is not None and i is not Ellipsis)
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
            step = 1 if item.step is None else int(item.step)
            check(step > 0, "step must be greater than zero", ValueError)
            start, stop, _ = slice(item.start, item.stop, step).indices(size)
            length = max(0, (stop - start + step - 1) // step)
            if length:
                offset += start * st
            out_shape.append(length)
            out_stride.append(st * step)
        d += 1
    out_shape += shape[d:]
    out_stride += stride[d:]
    return self._view(out_shape, out_stride, offset)


def setitem(self: Tensor, index, value) -> None:
    """``self[index] = value``: a tensor value is broadcast and converted (``copy_``); a scalar fills.

    Raises:
        as :func:`getitem`, and as ``copy_``/``fill_`` for the value.
    """
    target = getitem(self, index)
    if isinstance(value, Tensor):
        target.copy_(value)
    elif isinstance(value, (numbers.Number, np.generic)):
        target.fill_(value)
    else:
        from .creation import as_tensor
        target.copy_(as_tensor(value, device=self.device))


Tensor.__getitem__ = getitem
Tensor.__setitem__ = setitem
