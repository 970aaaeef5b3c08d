"""Views that share storage, by ATen's rules (aten/src/ATen/native/TensorShape.cpp).

Every function here returns a tensor over the same storage with new shape, strides and offset, except
``reshape``/``flatten``/``unflatten`` when no view exists (then a contiguous copy, as PyTorch) and
``view(dtype)``, which reinterprets bytes. Each is installed as a ``Tensor`` method and exported as an
``nbx.*`` function by the package.
"""

from __future__ import annotations

import operator
from typing import Sequence

from .._errors import check, fail
from ..dtypes.table import dtype_from, DType
from ..shapes import (broadcast_shapes, compute_view_strides, infer_size, normalize_shape, wrap_dim, wrap_dims)
from .core import Tensor

__all__ = ["VIEW_METHODS"]


def _is_dtype_arg(args: tuple) -> bool:
    if len(args) != 1:
        return False
    a = args[0]
    if isinstance(a, DType):
        return True
    if isinstance(a, str):
        return True
    return isinstance(a, type) or type(a).__name__ == "dtype"


def view(self: Tensor, *shape) -> Tensor:
    """``view(*shape)`` or ``view(dtype)``: a view with a new shape (one ``-1`` inferred) or element type.

    A shape view exists exactly where ATen's ``computeStride`` finds strides; otherwise raises as PyTorch:
    "view size is not compatible with input tensor's size and stride ... Use .reshape(...) instead."

    ``view(dtype)``: same itemsize keeps shape and strides; a different itemsize rescales the last dim, which
    must have stride 1, and needs the other strides, the offset and the last dim's bytes divisible by the new
    itemsize (PyTorch's rules and messages).

    Raises:
        RuntimeError: as above, or for a shape whose numel differs.
    """
    if _is_dtype_arg(shape):
        return _view_dtype(self, dtype_from(shape[0]))
    shape = infer_size(normalize_shape(shape, fn="view"), self.numel(), fn="view")
    strides = compute_view_strides(self.shape, self.stride(), shape)
    check(strides is not None, "view size is not compatible with input tensor's size and stride (at least one "
          "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
    return self._view(shape, strides)


def _view_dtype(self: Tensor, dt: DType) -> Tensor:
    old = self.dtype.itemsize
    new = dt.itemsize
    if old == new:
        return self._view(self.shape, self.stride(), dtype=dt)
    check(self.ndim > 0, lambda: f"view: self.dim() cannot be 0 to view {self.dtype.name} as {dt.name} "
          "(different element sizes)")
    check(self.stride(-1) == 1, lambda: f"view: self.stride(-1) must be 1 to view {self.dtype.name} as {dt.name} "
          f"(different element sizes), but got {self.stride(-1)}")
    shape = list(self.shape)
    if new > old:
        ratio = new // old
        check(shape[-1] % ratio == 0, lambda: f"view: self.size(-1) must be divisible by {ratio} to view "
              f"{self.dtype.name} as {dt.name} (different element sizes), but got {shape[-1]}")
        check(self.storage_offset() % ratio == 0, lambda: f"view: self.storage_offset() must be divisible by "
              f"{ratio} to view {self.dtype.name} as {dt.name} (different element sizes), but got "
              f"{self.storage_offset()}")
        for i, st in enumerate(self.stride()[:-1]):
            check(st % ratio == 0, lambda: f"view: self.stride({i}) must be divisible by {ratio} to view "
                  f"{self.dtype.name} as {dt.name} (different element sizes), but got {st}")
        shape[-1] //= ratio
        strides = [s // ratio for s in self.stride()[:-1]] + [1]
        offset = self.storage_offset() // ratio
    else:
        ratio = old // new
        shape[-1] *= ratio
        strides = [s * ratio for s in self.stride()[:-1]] + [1]
        offset = self.storage_offset() * ratio
    return self._view(shape, strides, offset, dt)


def reshape(self: Tensor, *shape) -> Tensor:
    """A view when ATen's stride computation allows one, else a contiguous copy (``torch.reshape``)."""
    shape = infer_size(normalize_shape(shape, fn="reshape"), self.numel(), fn="reshape")
    strides = compute_view_strides(self.shape, self.stride(), shape)
    if strides is not None:
        return self._view(shape, strides)
    return self.clone().view(shape)


def view_as(self: Tensor, other: Tensor) -> Tensor:
    return view(self, other.shape)


def reshape_as(self: Tensor, other: Tensor) -> Tensor:
    return reshape(self, other.shape)


def permute(self: Tensor, *dims) -> Tensor:
    """Reorder dims; ``dims`` must be a permutation of ``range(ndim)`` (negative allowed).

    Raises:
        RuntimeError: wrong number of dims or a repeated dim. IndexError: a dim out of range.
    """
    dims = normalize_shape(dims, fn="permute")
    check(len(dims) == self.ndim, lambda: f"permute(sparse_coo): number of dimensions in the tensor input does not "
          f"match the length of the desired ordering of dimensions i.e. input.dim() = {self.ndim} is not equal to "
          f"len(dims) = {len(dims)}")
    dims = wrap_dims(dims, self.ndim, fn="permute")
    return self._view([self.shape[d] for d in dims], [self.stride()[d] for d in dims])


def transpose(self: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap two dims (a 0-dim tensor accepts dims 0/-1 and is returned as is)."""
    if self.ndim == 0:
        wrap_dim(dim0, 0, fn="transpose")
        wrap_dim(dim1, 0, fn="transpose")
        return self._view((), ())
    d0, d1 = wrap_dim(dim0, self.ndim, fn="transpose"), wrap_dim(dim1, self.ndim, fn="transpose")
    shape, stride = list(self.shape), list(self.stride())
    shape[d0], shape[d1] = shape[d1], shape[d0]
    stride[d0], stride[d1] = stride[d1], stride[d0]
    return self._view(shape, stride)


swapaxes = swapdims = transpose


def t(self: Tensor) -> Tensor:
    """Transpose of a tensor of at most 2 dims.

    Raises:
        RuntimeError: "t() expects a tensor with <= 2 dimensions, but self is 3D".
    """
    check(self.ndim <= 2, lambda: f"t() expects a tensor with <= 2 dimensions, but self is {self.ndim}D")
    return self._view(self.shape, self.stride()) if self.ndim < 2 else transpose(self, 0, 1)


def _T(self: Tensor) -> Tensor:
    return permute(self, *range(self.ndim - 1, -1, -1))


def _mT(self: Tensor) -> Tensor:
    check(self.ndim >= 2, lambda: f"tensor.mT is only supported on matrices or batches of matrices. Got "
          f"{self.ndim}-D tensor.")
    return transpose(self, -2, -1)


def expand(self: Tensor, *sizes) -> Tensor:
    """Broadcast to ``sizes`` with stride 0 on new and size-1 dims; ``-1`` keeps a dim.

    Raises:
        RuntimeError: fewer sizes than dims; a non-singleton dim changed; ``-1`` on a new leading dim.
    """
    sizes = normalize_shape(sizes, fn="expand")
    check(len(sizes) >= self.ndim, lambda: f"expand: the number of sizes provided ({len(sizes)}) must be greater "
          f"or equal to the number of dimensions in the tensor ({self.ndim})")
    lead = len(sizes) - self.ndim
    shape, stride = [], []
    for i, size in enumerate(sizes):
        if i < lead:
            check(size >= 0, lambda: f"expand: the expanded size of the tensor ({size}) isn't allowed in a leading, "
                  "non-existing dimension 0")
            shape.append(size)
            stride.append(0)
            continue
        old, old_st = self.shape[i - lead], self.stride()[i - lead]
        if size == -1:
            size = old
        if old == size:
            shape.append(size)
            stride.append(old_st)
        else:
            check(old == 1, lambda: f"The expanded size of the tensor ({size}) must match the existing size ({old}) at "
                  f"non-singleton dimension {i}.  Target sizes: {list(sizes)}.  Tensor sizes: {list(self.shape)}")
            shape.append(size)
            stride.append(0)
    return self._view(shape, stride)


def expand_as(self: Tensor, other: Tensor) -> Tensor:
    return expand(self, other.shape)


def broadcast_to(self: Tensor, size) -> Tensor:
    return expand(self, tuple(size))


def squeeze(self: Tensor, dim=None) -> Tensor:
    """Remove dims of size 1: all of them, one ``dim``, or a tuple of dims (dims not of size 1 stay)."""
    if dim is None:
        keep = [i for i, s in enumerate(self.shape) if s != 1]
    else:
        dims = set(wrap_dims(dim if isinstance(dim, (tuple, list)) else (dim,), self.ndim, fn="squeeze"))
        keep = [i for i, s in enumerate(self.shape) if not (i in dims and s == 1)]
    return self._view([self.shape[i] for i in keep], [self.stride()[i] for i in keep])


def unsqueeze(self: Tensor, dim: int) -> Tensor:
    """Insert a dim of size 1 at ``dim`` (range ``[-ndim-1, ndim]``)."""
    d = wrap_dim(dim, self.ndim + 1, fn="unsqueeze")
    shape, stride = list(self.shape), list(self.stride())
    new_stride = 1 if d >= self.ndim else shape[d] * stride[d]
    shape.insert(d, 1)
    stride.insert(d, new_stride)
    return self._view(shape, stride)


def flatten(self: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims ``start_dim..end_dim`` into one (a view when possible, else a copy, as ``reshape``)."""
    if self.ndim == 0:
        return reshape(self, 1)
    s, e = wrap_dim(start_dim, self.ndim, fn="flatten"), wrap_dim(end_dim, self.ndim, fn="flatten")
    check(s <= e, "flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return self._view(self.shape, self.stride())
    merged = 1
    for x in self.shape[s:e + 1]:
        merged *= x
    return reshape(self, *self.shape[:s], merged, *self.shape[e + 1:])


def unflatten(self: Tensor, dim: int, sizes) -> Tensor:
    """Split dim ``dim`` into ``sizes`` (one ``-1`` allowed)."""
    d = wrap_dim(dim, self.ndim, fn="unflatten")
    sizes = tuple(normalize_shape(tuple(sizes), fn="unflatten"))
    check(len(sizes) > 0, "unflatten: sizes must be non-empty", RuntimeError)
    sizes = infer_size(sizes, self.shape[d], fn="unflatten")
    return reshape(self, *self.shape[:d], *sizes, *self.shape[d + 1:])


def narrow(self: Tensor, dim: int, start, length: int) -> Tensor:
    """Elements ``start .. start+length`` of dim ``dim`` (a negative ``start`` counts from the end).

    Raises:
        IndexError: ``start`` out of range. RuntimeError: ``start + length`` past the end.
    """
    check(self.ndim > 0, "narrow() cannot be applied to a 0-dim tensor.")
    d = wrap_dim(dim, self.ndim, fn="narrow")
    size = self.shape[d]
    start = operator.index(start)
    length = operator.index(length)
    check(-size <= start <= size, lambda: f"start out of range (expected to be in range of [{-size}, {size}], "
          f"but got {start})", IndexError)
    if start < 0:
        start += size
    check(length >= 0 and start <= size - length, lambda: f"start ({start}) + length ({length}) exceeds dimension "
          f"size ({size}).")
    shape = list(self.shape)
    shape[d] = length
    return self._view(shape, self.stride(), self.storage_offset() + start * self.stride()[d])


def select(self: Tensor, dim: int, index: int) -> Tensor:
    """The slice at ``index`` of dim ``dim``, removing that dim.

    Raises:
        IndexError: "select(): index 5 out of range for tensor of size [3] at dimension 0".
    """
    check(self.ndim > 0, "select() cannot be applied to a 0-dim tensor.", IndexError)
    d = wrap_dim(dim, self.ndim, fn="select")
    size = self.shape[d]
    index = operator.index(index)
    check(-size <= index < size, lambda: f"select(): index {index} out of range for tensor of size "
          f"{list(self.shape)} at dimension {d}", IndexError)
    if index < 0:
        index += size
    shape, stride = list(self.shape), list(self.stride())
    offset = self.storage_offset() + index * stride[d]
    del shape[d], stride[d]
    return self._view(shape, stride, offset)


def unbind(self: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """All slices along ``dim``, as a tuple of views."""
    d = wrap_dim(dim, self.ndim, fn="unbind")
    return tuple(select(self, d, i) for i in range(self.shape[d]))


def split(self: Tensor, split_size_or_sections, dim: int = 0) -> tuple[Tensor, ...]:
    """Pieces of ``split_size`` along ``dim`` (the last may be smaller), or of the given section sizes.

    Raises:
        RuntimeError: section sizes that do not add up to the dim's size; a split size < 0.
    """
    d = wrap_dim(dim, self.ndim, fn="split")
    size = self.shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sections = [operator.index(s) for s in split_size_or_sections]
        check(sum(sections) == size and all(s >= 0 for s in sections), lambda: f"split_with_sizes expects "
              f"split_sizes to sum exactly to {size} (input tensor's size at dimension {d}), but got "
              f"split_sizes={sections}")
    else:
        step = operator.index(split_size_or_sections)
        check(step >= 0, lambda: f"split expects split_size be non-negative, but got split_size={step}")
        check(step > 0 or size == 0, lambda: f"split_size can only be 0 if dimension size is 0, but got dimension "
              f"size of {size}")
        sections = [min(step, size - i) for i in range(0, size, step)] if size else [0]
    out, start = [], 0
    for s in sections:
        out.append(narrow(self, d, start, s))
        start += s
    return tuple(out)


def chunk(self: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """``ceil(size / chunks)``-sized pieces along ``dim`` (possibly fewer than ``chunks``), as ``torch.chunk``.

    Raises:
        RuntimeError: "chunk expects `chunks` to be greater than 0, got: 0".
    """
    check(self.ndim > 0, "chunk expects at least a 1-dimensional tensor")
    check(chunks > 0, lambda: f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = wrap_dim(dim, self.ndim, fn="chunk")
    size = self.shape[d]
    step = (size + chunks - 1) // chunks
    if step == 0:  # size 0: PyTorch returns `chunks` empty pieces
        return tuple(narrow(self, d, 0, 0) for _ in range(chunks))
    return split(self, step, d)


def tensor_split(self: Tensor, indices_or_sections, dim: int = 0) -> tuple[Tensor, ...]:
    """Split into ``n`` nearly equal parts (the first ``size % n`` one longer) or at the given indices."""
    check(self.ndim > 0, "tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims")
    d = wrap_dim(dim, self.ndim, fn="tensor_split")
    size = self.shape[d]
    if isinstance(indices_or_sections, (list, tuple)):
        out, prev = [], 0
        for idx in list(indices_or_sections) + [size]:
            idx = operator.index(idx)
            if idx < 0:
                idx = max(idx + size, 0)
            idx = min(idx, size)
            start = min(prev, size)
            out.append(narrow(self, d, start, max(idx - start, 0)))
            prev = max(prev, idx)
        return tuple(out)
    n = operator.index(indices_or_sections)
    check(n > 0, lambda: f"number of sections must be larger than 0, got {n}")
    base, extra = divmod(size, n)
    out, start = [], 0
    for i in range(n):
        length = base + (1 if i < extra else 0)
        out.append(narrow(self, d, start, length))
        start += length
    return tuple(out)


def movedim(self: Tensor, source, destination) -> Tensor:
    """Move dims ``source`` to positions ``destination`` (ints or equal-length sequences)."""
    src = (source,) if isinstance(source, int) else tuple(source)
    dst = (destination,) if isinstance(destination, int) else tuple(destination)
    check(len(src) == len(dst), lambda: f"movedim: Invalid source or destination dims: source ({list(src)} dims) "
          f"should contain the same number of dims as destination ({list(dst)} dims)")
    src = wrap_dims(src, self.ndim, fn="movedim")
    dst = wrap_dims(dst, self.ndim, fn="movedim")
    order = [-1] * self.ndim
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(i for i in range(self.ndim) if i not in src)
    order = [o if o != -1 else next(rest) for o in order]
    return permute(self, *order)


moveaxis = movedim


def as_strided(self: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:
    """A view with explicit sizes, strides (elements) and offset over the same storage.

    Raises:
        RuntimeError: mismatched lengths, negative sizes or strides, or a view that reaches past the storage
            ("setStorage: sizes [...], strides [...], storage offset N, and itemsize M requiring a storage size
            of X are out of bounds for storage of size Y").
    """
    size = tuple(operator.index(s) for s in size)
    stride = tuple(operator.index(s) for s in stride)
    offset = self.storage_offset() if storage_offset is None else operator.index(storage_offset)
    check(len(size) == len(stride), lambda: f"mismatch in length of strides and shape: {len(size)} vs {len(stride)}")
    check(all(s >= 0 for s in size), lambda: f"as_strided: negative size in {list(size)}")
    check(all(s >= 0 for s in stride), lambda: f"as_strided: Negative strides are not supported at the moment, got "
          f"strides: {list(stride)}")
    check(offset >= 0, lambda: f"Tensor: invalid storage offset {offset}")
    it = self.dtype.itemsize
    if all(size):
        need = (offset + sum((n - 1) * st for n, st in zip(size, stride)) + 1) * it
    else:
        need = 0
    nbytes = self.untyped_storage().nbytes
    check(need <= nbytes, lambda: f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {offset}, "
          f"and itemsize {it} requiring a storage size of {need} are out of bounds for storage of size {nbytes}")
    return self._view(size, stride, offset)


def diagonal(self: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of dims ``dim1``, ``dim2`` (shifted by ``offset``) as a new last dim.

    Raises:
        RuntimeError: dim1 == dim2 ("diagonal dimensions cannot be identical").
    """
    d1, d2 = wrap_dim(dim1, self.ndim, fn="diagonal"), wrap_dim(dim2, self.ndim, fn="diagonal")
    check(d1 != d2, lambda: f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n1, n2 = self.shape[d1], self.shape[d2]
    st1, st2 = self.stride()[d1], self.stride()[d2]
    off = self.storage_offset()
    if offset >= 0:
        length = max(min(n1, n2 - offset), 0)
        if length:
            off += offset * st2
    else:
        length = max(min(n1 + offset, n2), 0)
        if length:
            off -= offset * st1
    shape = [s for i, s in enumerate(self.shape) if i not in (d1, d2)] + [length]
    stride = [s for i, s in enumerate(self.stride()) if i not in (d1, d2)] + [st1 + st2]
    return self._view(shape, stride, off)


def unfold(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """All windows of ``size`` with stride ``step`` along ``dimension``, as a new last dim.

    Raises:
        RuntimeError: ``size`` larger than the dim; ``step`` <= 0.
    """
    d = wrap_dim(dimension, self.ndim, fn="unfold")
    dim_size = self.shape[d] if self.ndim else 1
    check(size <= dim_size, lambda: f"maximum size for tensor at dimension {d} is {dim_size} but size is {size}")
    check(step > 0, lambda: f"step is {step} but must be > 0")
    check(size >= 0, lambda: f"size is {size} but must be >= 0")
    if self.ndim == 0:
        return self._view((size,), (1,))
    shape, stride = list(self.shape), list(self.stride())
    shape[d] = (dim_size - size) // step + 1
    new_stride = stride[d]
    stride[d] = step * stride[d]
    return self._view(shape + [size], stride + [new_stride])


def _broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    shape = broadcast_shapes(*(x.shape for x in tensors))
    return tuple(expand(x, shape) for x in tensors)


VIEW_METHODS = {
    "view": view, "reshape": reshape, "view_as": view_as, "reshape_as": reshape_as, "permute": permute,
    "transpose": transpose, "swapaxes": swapaxes, "swapdims": swapdims, "t": t, "expand": expand,
    "expand_as": expand_as, "broadcast_to": broadcast_to, "squeeze": squeeze, "unsqueeze": unsqueeze,
    "flatten": flatten, "unflatten": unflatten, "narrow": narrow, "select": select, "unbind": unbind,
    "split": split, "chunk": chunk, "tensor_split": tensor_split, "movedim": movedim, "moveaxis": moveaxis,
    "as_strided": as_strided, "diagonal": diagonal, "unfold": unfold,
}

for _name, _fn in VIEW_METHODS.items():
    setattr(Tensor, _name, _fn)
Tensor.T = property(_T)
Tensor.mT = property(_mT)
broadcast_tensors = _broadcast_tensors
_ = (fail, Sequence)
