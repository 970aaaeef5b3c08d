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

from ._errors import check, fail

__all__ = ["contiguous_strides", "is_contiguous", "wrap_dim", "wrap_dims", "broadcast_shapes", "compute_view_strides",
           "infer_size", "numel", "normalize_shape", "storage_span", "index_arg"]


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


def wrap_dim(dim: int, ndim: int, *, fn: str = "dim", wrap_scalar: bool = True) -> int:
    """Wrap a possibly negative ``dim`` for a tensor of ``ndim`` dims, as ATen's ``maybe_wrap_dim``.

    A 0-dim tensor accepts -1 and 0 when ``wrap_scalar`` (most ops); ops that need a real dim (``size(d)``,
    ``unbind``) pass ``wrap_scalar=False`` and refuse any dim of a 0-dim tensor.

    Raises:
        IndexError: "Dimension out of range (expected to be in range of [lo, hi], but got d)" as PyTorch;
            "Dimension specified as d but tensor has no dimensions" for a 0-dim tensor without ``wrap_scalar``.
        TypeError: for a non-integer dim (a bool included, as PyTorch's argument parser).
    """
    dim = index_arg(dim, fn=fn, arg="dim")
    if ndim == 0 and not wrap_scalar:
        fail(f"{fn}: Dimension specified as {dim} but tensor has no dimensions", IndexError)
    n = max(ndim, 1)
    check(-n <= dim < n, lambda: f"{fn}: Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
          f"but got {dim})", IndexError)
    return dim % n


def index_arg(value, *, fn: str, arg: str) -> int:
    """An integer argument as PyTorch's argument parser takes one: a Python int, a NumPy integer or a
    one-element integer tensor (anything with ``__index__``); never a bool or a float.

    Raises:
        TypeError: "fn(): argument 'arg' must be int, not float".
    """
    check(not isinstance(value, bool) and (isinstance(value, int) or hasattr(value, "__index__")),
          lambda: f"{fn}(): argument '{arg}' must be int, not {type(value).__name__}", TypeError)
    try:
        return operator.index(value)
    except TypeError:
        fail(f"{fn}(): argument '{arg}' must be int, not {type(value).__name__}", TypeError)


def wrap_dims(dims: Iterable[int], ndim: int, *, fn: str = "dims") -> tuple[int, ...]:
    """Wrap several dims; a repeated dim is a RuntimeError naming it (as ``torch.squeeze``/``sum`` do)."""
    out: list[int] = []
    for d in dims:  # one at a time, as ATen's dim_list_to_bitset: a repeat is found before a later bad dim
        w = wrap_dim(d, ndim, fn=fn)
        check(w not in out, lambda: f"{fn}: dim {w} appears multiple times in the list of dims")
        out.append(w)
    return tuple(out)


def normalize_shape(size: tuple, *, fn: str, arg: str = "size") -> tuple[int, ...]:
    """Accept ``f(2, 3)``, ``f((2, 3))`` and ``f([2, 3])`` (and a ``Size``); every entry an int.

    Entries may be Python ints, NumPy integers, one-element integer tensors and bools (PyTorch's int-list
    parser takes ``True`` as 1).

    Raises:
        TypeError: for a float or any other non-integer entry, naming it and its position.
    """
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    out = []
    for pos, s in enumerate(size):
        ok = isinstance(s, int) or (not isinstance(s, (tuple, list, float, complex)) and hasattr(s, "__index__"))
        check(ok, lambda: f"{fn}(): argument '{arg}' failed to unpack the object at pos {pos + 1} with error "
              f"\"type must be tuple of ints, but got {type(s).__name__}\" (got {list(size)})", TypeError)
        try:
            out.append(operator.index(s))
        except TypeError:
            fail(f"{fn}(): argument '{arg}' must be a tuple of ints, got {type(s).__name__} at pos {pos + 1}",
                 TypeError)
    return tuple(out)


def broadcast_shapes(*shapes: Sequence[int]) -> tuple[int, ...]:
    """The broadcast of ``shapes`` by NumPy's and PyTorch's rule (align right; sizes equal or 1).

    Dims are compared from the right, as ATen's ``infer_size``, so the dim named in the error is PyTorch's.

    Raises:
        RuntimeError: "The size of tensor a (x) must match the size of tensor b (y) at non-singleton dimension i";
            a negative size.
    """
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        shape = tuple(shape)
        offset = ndim - len(shape)
        for i in range(len(shape) - 1, -1, -1):
            size = shape[i]
            j = offset + i
            check(size >= 0, lambda: f"broadcast_shapes: Trying to create tensor with negative dimension {size}: "
                  f"{list(shape)}")
            if out[j] == 1:
                out[j] = size
            elif size != 1 and size != out[j]:
                fail(f"The size of tensor a ({out[j]}) must match the size of tensor b ({size}) at "
                     f"non-singleton dimension {j}")
    return tuple(out)


def infer_size(shape: Sequence[int], n: int, *, fn: str = "view") -> tuple[int, ...]:
    """Resolve one ``-1`` in ``shape`` for a tensor of ``n`` elements, as ATen's ``infer_size``.

    Raises:
        RuntimeError: two ``-1`` ("only one dimension can be inferred"), a size below -1 ("invalid shape
            dimension -2 at index 1 of shape [2, -2]"), a ``-1`` that is ambiguous because both ``n`` and the
            product of the other sizes are 0, or a shape that cannot hold ``n`` elements ("shape '[2, 3]' is
            invalid for input of size 5").
    """
    shape = list(shape)
    infer = None
    known = 1
    for i, s in enumerate(shape):
        if s == -1:
            check(infer is None, f"{fn}: only one dimension can be inferred")
            infer = i
        else:
            check(s >= 0, lambda: f"{fn}: invalid shape dimension {s} at index {i} of shape {shape}")
            known *= s
    if n == known or (infer is not None and known > 0 and n % known == 0):
        if infer is not None:
            check(known != 0, lambda: f"{fn}: cannot reshape tensor of 0 elements into shape {shape} because the "
                  "unspecified dimension size -1 can be any value and is ambiguous")
            shape[infer] = n // known
        return tuple(shape)
    fail(f"{fn}: shape '{shape}' is invalid for input of size {n}")


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
