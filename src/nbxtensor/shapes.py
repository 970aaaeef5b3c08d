"""Shape and stride rules, pure Python: contiguity, dim wrapping, broadcasting, ATen's view stride computation.

Strides are counted in elements, as in PyTorch. Sources: ATen's ``computeStride`` and ``infer_size``
(aten/src/ATen/TensorUtils.cpp, aten/src/ATen/InferSize.h), ``maybe_wrap_dim`` (c10/core/WrapDimMinimal.h),
``infer_size`` for broadcasting (aten/src/ATen/ExpandUtils.cpp) and ``compute_contiguous``
(c10/core/Contiguity.h).
"""

from __future__ import annotations

import math
import operator
from typing import Iterable, Sequence

from ._errors import check

__all__ = ["contiguous_strides", "is_contiguous", "wrap_dim", "wrap_dims", "broadcast_shapes", "compute_view_strides",
           "infer_size", "numel", "normalize_shape", "storage_span"]


def numel(shape: Sequence[int]) -> int:
    """The number of elements of ``shape`` (1 for ``()``)."""
    return math.prod(shape)


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Row-major strides in elements, as PyTorch gives a new tensor (a size-0 or size-1 dim still gets a stride
    equal to the product of the sizes to its right, taking 0 as 1)."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * max(shape[i + 1], 1)
    return tuple(strides)


def is_contiguous(shape: Sequence[int], strides: Sequence[int]) -> bool:
    """ATen's ``compute_contiguous``: true for zero elements, else the strides of dims of size > 1 are row-major."""
    if numel(shape) == 0:
        return True
    expected = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1:
            if stride != expected:
                return False
            expected *= size
    return True


def wrap_dim(dim: int, ndim: int, *, fn: str = "dim") -> int:
    """Wrap a possibly negative ``dim`` for a tensor of ``ndim`` dims; a 0-dim tensor accepts -1 and 0.

    Raises:
        IndexError: "Dimension out of range (expected to be in range of [lo, hi], but got d)" as PyTorch.
        TypeError: for a non-integer dim.
    """
    check(isinstance(dim, int) or hasattr(dim, "__index__"),
          lambda: f"{fn}: dim must be an int, got {type(dim).__name__}", TypeError)
    dim = operator.index(dim)
    n = max(ndim, 1)
    check(-n <= dim < n, lambda: f"{fn}: Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
          f"but got {dim})", IndexError)
    return dim % n


def wrap_dims(dims: Iterable[int], ndim: int, *, fn: str = "dims") -> tuple[int, ...]:
    """Wrap several dims; a repeated dim is a RuntimeError naming it (as ``torch.permute``/``sum`` do)."""
    out = tuple(wrap_dim(d, ndim, fn=fn) for d in dims)
    check(len(set(out)) == len(out), lambda: f"{fn}: dim appears multiple times in the list of dims {list(dims)}")
    return out


def normalize_shape(size: tuple, *, fn: str) -> tuple[int, ...]:
    """Accept ``f(2, 3)``, ``f((2, 3))`` and ``f([2, 3])``; every entry an int.

    Raises:
        TypeError: for a non-integer entry.
    """
    if len(size) == 1 and isinstance(size[0], (tuple, list)) or len(size) == 1 and type(size[0]).__name__ == "Size":
        size = tuple(size[0])
    out = []
    for s in size:
        check(isinstance(s, int) and not isinstance(s, bool) or hasattr(s, "__index__") and not isinstance(s, bool),
              lambda: f"{fn}: size must be a sequence of ints, got {type(s).__name__} {s!r} in {size}", TypeError)
        out.append(operator.index(s))
    return tuple(out)


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The broadcast of ``shapes`` by NumPy's and PyTorch's rule (align right; sizes equal or 1).

    Raises:
        RuntimeError: "The size of tensor a (x) must match the size of tensor b (y) at non-singleton dimension i".
    """
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        offset = ndim - len(shape)
        for i, size in enumerate(shape):
            j = offset + i
            check(size >= 0, lambda: f"broadcast_shapes: trying to create tensor with negative dimension {size}: {shape}")
            if out[j] == 1:
                out[j] = size
            elif size != 1 and size != out[j]:
                check(False, lambda: f"The size of tensor a ({out[j]}) must match the size of tensor b ({size}) at "
                      f"non-singleton dimension {j}")
    return tuple(out)


def infer_size(shape: Sequence[int], n: int, *, fn: str = "view") -> tuple[int, ...]:
    """Resolve one ``-1`` in ``shape`` for a tensor of ``n`` elements, as ATen's ``infer_size``.

    Raises:
        RuntimeError: two ``-1``, a negative size, an ambiguous ``-1`` with zero elements, or a shape whose
            product is not ``n`` ("shape '[2, 3]' is invalid for input of size 5").
    """
    infer = None
    known = 1
    for i, s in enumerate(shape):
        if s == -1:
            check(infer is None, f"{fn}: only one dimension can be inferred")
            infer = i
        else:
            check(s >= 0, lambda: f"{fn}: invalid shape dimension {s}")
            known *= s
    shape = list(shape)
    if infer is not None:
        check(known != 0, lambda: f"{fn}: cannot reshape tensor of 0 elements into shape {shape} because the "
              "unspecified dimension size -1 can be any value and is ambiguous")
        check(n % known == 0, lambda: f"{fn}: shape '{shape}' is invalid for input of size {n}")
        shape[infer] = n // known
    check(numel(shape) == n, lambda: f"{fn}: shape '{list(shape)}' is invalid for input of size {n}")
    return tuple(shape)


def compute_view_strides(oldshape: Sequence[int], oldstride: Sequence[int],
                         newshape: Sequence[int]) -> tuple[int, ...] | None:
    """Strides for viewing (``oldshape``, ``oldstride``) as ``newshape`` without a copy, or ``None``.

    A faithful transcription of ATen's ``computeStride``: a view exists exactly when each group of new dims
    lies within one run of old dims that are contiguous among themselves.
    """
    if len(oldshape) == 0:
        return (1,) * len(newshape)
    n = numel(oldshape)
    if n == 0 and tuple(oldshape) == tuple(newshape):
        return tuple(oldstride)
    newstride = [0] * len(newshape)
    if n == 0:
        for d in range(len(newshape) - 1, -1, -1):
            newstride[d] = 1 if d == len(newshape) - 1 else max(newshape[d + 1], 1) * newstride[d + 1]
        return tuple(newstride)
    view_d = len(newshape) - 1
    chunk_base_stride = oldstride[-1]
    tensor_numel = 1
    view_numel = 1
    for tensor_d in range(len(oldshape) - 1, -1, -1):
        tensor_numel *= oldshape[tensor_d]
        if tensor_d == 0 or (oldshape[tensor_d - 1] != 1 and oldstride[tensor_d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or newshape[view_d] == 1):
                newstride[view_d] = view_numel * chunk_base_stride
                view_numel *= newshape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_base_stride = oldstride[tensor_d - 1]
                tensor_numel = 1
                view_numel = 1
    if view_d != -1:
        return None
    return tuple(newstride)


def storage_span(shape: Sequence[int], strides: Sequence[int], offset: int) -> tuple[int, int]:
    """The half-open range of element indices ``[lo, hi)`` of storage that a view touches (empty for zero
    elements: ``(offset, offset)``). Negative strides are allowed (views of foreign NumPy memory)."""
    if numel(shape) == 0:
        return offset, offset
    lo = hi = offset
    for size, stride in zip(shape, strides):
        ext = (size - 1) * stride
        if ext > 0:
            hi += ext
        else:
            lo += ext
    return lo, hi + 1
