"""Views that share storage, by ATen's rules (aten/src/ATen/native/TensorShape.cpp).

Every function here returns a tensor over the same storage with new shape, strides and offset, except
``reshape``/``flatten``/``unflatten`` when no view exists (then a contiguous copy, as PyTorch) and
``view(dtype)``, which reinterprets bytes. Each is installed as a ``Tensor`` method and exported as an
``nbx.*`` function by the package.
"""

from __future__ import annotations

from .._errors import check
from ..dtypes.table import dtype_from, DType
from ..shapes import (broadcast_shapes, compute_view_strides, index_arg, infer_size, normalize_shape, wrap_dim,
                      wrap_dims)
from .core import Size, Tensor, make_tensor

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


_LAYOUTS: dict = {}   # (shape, strides, requested shape) -> (Size, strides) of the view: a layout's answer is fixed


def _int_shape(shape: tuple):
    """``shape`` (``view``'s arguments) as a tuple of Python ints when it is one (``f(2, 3)``, ``f((2, 3))``),
    else None: only such requests are memoised (a one-element tensor used as a size may change value)."""
    if len(shape) == 1 and shape[0].__class__ in (tuple, Size):
        shape = shape[0]
    for s in shape:
        if s.__class__ is not int:
            return None
    return shape


def _known_view(self: Tensor, shape: tuple):
    key = _int_shape(shape)
    if key is None:
        return None, None
    key = (self._shape, self._stride, key)
    hit = _LAYOUTS.get(key)
    if hit is None:
        return None, key
    return make_tensor(self._storage, hit[0], hit[1], self._offset, self._dtype), key


def _remember(key, t: Tensor) -> Tensor:
    if key is not None:
        if len(_LAYOUTS) >= 4096:
            _LAYOUTS.clear()
        _LAYOUTS[key] = (t._shape, t._stride)
    return t


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
    check(len(shape) > 0, "view() received an invalid combination of arguments - got (), but expected one of: "
          "(dtype dtype) or (tuple of ints size)", TypeError)
    t, key = _known_view(self, shape)
    if t is not None:
        return t
    if _is_dtype_arg(shape):
        return _view_dtype(self, dtype_from(shape[0]))
    shape = infer_size(normalize_shape(shape, fn="view"), self.numel(), fn="view")
    strides = compute_view_strides(self.shape, self.stride(), shape)
    check(strides is not None, "view size is not compatible with input tensor's size and stride (at least one "
          "dimension spans across two contiguous subspaces). Use .reshape(...) instead.")
    return _remember(key, self._view(shape, strides))


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
    check(len(shape) > 0, 'reshape() missing 1 required positional arguments: "shape"', TypeError)
    t, key = _known_view(self, shape)
    if t is not None:
        return t
    shape = infer_size(normalize_shape(shape, fn="reshape"), self.numel(), fn="reshape")
    strides = compute_view_strides(self.shape, self.stride(), shape)
    if strides is not None:
        return _remember(key, self._view(shape, strides))
    return self.clone(memory_format="contiguous_format").view(shape)


def view_as(self: Tensor, other: Tensor) -> Tensor:
    """``view(other.shape)`` (raises where that view does not exist)."""
    return view(self, other.shape)


def reshape_as(self: Tensor, other: Tensor) -> Tensor:
    """``reshape(other.shape)``: a view when one exists, else a copy."""
    return reshape(self, other.shape)


def permute(self: Tensor, *dims) -> Tensor:
    """Reorder dims; ``dims`` must be a permutation of ``range(ndim)`` (negative allowed).

    Raises:
        RuntimeError: wrong number of dims or a repeated dim. IndexError: a dim out of range.
    """
    check(len(dims) > 0, 'permute() missing 1 required positional arguments: "dims"', TypeError)
    dims = normalize_shape(dims, fn="permute", arg="dims")
    check(len(dims) == self.ndim, lambda: f"permute(sparse_coo): number of dimensions in the tensor input does not "
          f"match the length of the desired ordering of dimensions i.e. input.dim() = {self.ndim} is not equal to "
          f"len(dims) = {len(dims)}")
    dims = tuple(wrap_dim(d, self.ndim, fn="permute") for d in dims)
    check(len(set(dims)) == len(dims), "permute(): duplicate dims are not allowed.")
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
    """All dims reversed (``x.T``); the identity on a 0-dim tensor (PyTorch warns that both are deprecated for
    ndim != 2)."""
    if self.ndim == 0:
        return self._view((), ())
    return permute(self, *range(self.ndim - 1, -1, -1))


def _mT(self: Tensor) -> Tensor:
    """The last two dims swapped (``x.mT``): a batch of transposed matrices.

    Raises:
        RuntimeError: a 1-dim tensor (a 0-dim one is returned as is, as PyTorch's deprecated behaviour).
    """
    if self.ndim == 0:  # PyTorch: deprecated identity on 0-dim tensors
        return self._view((), ())
    check(self.ndim >= 2, lambda: f"tensor.mT is only supported on matrices or batches of matrices. Got "
          f"{self.ndim}-D tensor.")
    return transpose(self, -2, -1)


def expand(self: Tensor, *sizes) -> Tensor:
    """Broadcast to ``sizes`` with stride 0 on expanded dims; ``-1`` keeps a dim (ATen's ``inferExpandGeometry``).

    A new leading dim of size 1 gets the stride a contiguous tensor would give it, as PyTorch.

    Raises:
        TypeError: no sizes. RuntimeError: fewer sizes than dims; a non-singleton dim changed; ``-1`` on a new
            leading dim; a negative size.
    """
    check(len(sizes) > 0, 'expand() missing 1 required positional arguments: "size"', TypeError)
    sizes = normalize_shape(sizes, fn="expand")
    nd = len(sizes)
    check(nd >= self.ndim, lambda: f"expand: the number of sizes provided ({nd}) must be greater or equal to the "
          f"number of dimensions in the tensor ({self.ndim})")
    if self.ndim == 0:  # ATen: a 0-dim tensor expands to any sizes with all strides 0
        check(all(x >= 0 for x in sizes), lambda: f"expand: Trying to create tensor with negative dimension in "
              f"{list(sizes)}")
        return self._view(sizes, (0,) * nd)
    shape, stride = [0] * nd, [0] * nd
    for i in range(nd - 1, -1, -1):
        dim = self.ndim - nd + i
        size = self.shape[dim] if dim >= 0 else 1
        st = self.stride()[dim] if dim >= 0 else shape[i + 1] * stride[i + 1]
        target = sizes[i]
        if target == -1:
            check(dim >= 0, lambda: f"expand: the expanded size of the tensor ({target}) isn't allowed in a leading, "
                  f"non-existing dimension {i}")
            target = size
        check(target >= 0, lambda: f"expand: the expanded size of the tensor ({target}) must be non-negative "
              f"(target sizes {list(sizes)})")
        if size != target:
            check(size == 1, lambda: f"The expanded size of the tensor ({target}) must match the existing size "
                  f"({size}) at non-singleton dimension {i}.  Target sizes: {list(sizes)}.  Tensor sizes: "
                  f"{list(self.shape)}")
            size, st = target, 0
        shape[i], stride[i] = size, st
    return self._view(shape, stride)


def expand_as(self: Tensor, other: Tensor) -> Tensor:
    """``expand(other.shape)``."""
    return expand(self, other.shape)


def broadcast_to(self: Tensor, size) -> Tensor:
    """``expand(size)`` (``torch.broadcast_to``): a stride-0 view, never a copy."""
    return expand(self, tuple(size))


def squeeze(self: Tensor, dim=None) -> Tensor:
    """Remove dims of size 1: all of them, one ``dim``, or a tuple of dims (named dims not of size 1 stay)."""
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
    """Merge dims ``start_dim..end_dim`` into one (a view when possible, else a copy, as ``reshape``).

    Raises:
        IndexError: a dim out of range. RuntimeError: ``start_dim`` after ``end_dim``.
    """
    s, e = wrap_dim(start_dim, self.ndim, fn="flatten"), wrap_dim(end_dim, self.ndim, fn="flatten")
    if self.ndim == 0:
        return reshape(self, 1)
    check(s <= e, "flatten() has invalid args: start_dim cannot come after end_dim")
    if s == e:
        return self._view(self.shape, self.stride())
    merged = 1
    for x in self.shape[s:e + 1]:
        merged *= x
    return reshape(self, *self.shape[:s], merged, *self.shape[e + 1:])


def unflatten(self: Tensor, dim: int, sizes) -> Tensor:
    """Split dim ``dim`` into ``sizes`` (one ``-1`` allowed); a view when possible, else a copy.

    Raises:
        RuntimeError: empty ``sizes``; sizes that do not multiply to the dim's size; a 0-dim input.
        IndexError: ``dim`` out of range.
    """
    sizes = tuple(normalize_shape(tuple(sizes), fn="unflatten", arg="sizes"))
    check(len(sizes) > 0, "unflatten: sizes must be non-empty", RuntimeError)
    check(self.ndim > 0, "unflatten: Dimension specified as 0 but tensor has no dimensions")
    d = wrap_dim(dim, self.ndim, fn="unflatten")
    n = self.shape[d]
    known = 1
    for x in sizes:
        known *= x if x != -1 else 1
    inferable = sizes.count(-1) == 1 and known > 0 and n % known == 0
    check(sizes.count(-1) <= 1, "unflatten: only one dimension can be inferred")
    check(known == n and -1 not in sizes or inferable, lambda: f"unflatten: Provided sizes {list(sizes)} don't "
          f"multiply up to the size of dim {dim} ({n}) in the input tensor")
    sizes = infer_size(sizes, n, fn="unflatten")
    return reshape(self, *self.shape[:d], *sizes, *self.shape[d + 1:])


def narrow(self: Tensor, dim: int, start, length: int) -> Tensor:
    """Elements ``start .. start+length`` of dim ``dim`` (a negative ``start`` counts from the end).

    Raises:
        RuntimeError: a 0-dim input; a negative ``length``; ``start + length`` past the end.
        IndexError: ``dim`` or ``start`` out of range.
        TypeError: a non-integer argument.
    """
    check(self.ndim > 0, "narrow() cannot be applied to a 0-dim tensor.")
    dim = index_arg(dim, fn="narrow", arg="dim")
    start = index_arg(start, fn="narrow", arg="start")
    length = index_arg(length, fn="narrow", arg="length")
    check(length >= 0, lambda: f"narrow(): length must be non-negative, got {length}.")
    d = wrap_dim(dim, self.ndim, fn="narrow")
    size = self.shape[d]
    check(-size <= start <= size, lambda: f"narrow(): start out of range (expected to be in range of [{-size}, "
          f"{size}], but got {start})", IndexError)
    if start < 0:
        start += size
    check(start <= size - length, lambda: f"narrow(): start ({start}) + length ({length}) exceeds dimension "
          f"size ({size}).")
    return _slice(self, d, start, start + length)


def _slice(self: Tensor, d: int, start: int, stop: int, step: int = 1) -> Tensor:
    """ATen's ``slice`` on dim ``d`` with already clamped ``0 <= start <= stop <= size``: the offset moves by
    ``start`` even for an empty result, as PyTorch."""
    shape, stride = list(self.shape), list(self.stride())
    shape[d] = (stop - start + step - 1) // step if stop > start else 0
    offset = self.storage_offset() + start * stride[d]
    stride[d] *= step
    return self._view(shape, stride, offset)


def select(self: Tensor, dim: int, index: int) -> Tensor:
    """The slice at ``index`` of dim ``dim``, removing that dim.

    Raises:
        IndexError: a 0-dim input; "select(): index 5 out of range for tensor of size [3] at dimension 0".
        TypeError: a non-integer argument.
    """
    check(self.ndim > 0, "select() cannot be applied to a 0-dim tensor.", IndexError)
    dim = index_arg(dim, fn="select", arg="dim")
    index = index_arg(index, fn="select", arg="index")
    d = wrap_dim(dim, self.ndim, fn="select")
    size = self.shape[d]
    check(-size <= index < size, lambda: f"select(): index {index} out of range for tensor of size "
          f"{list(self.shape)} at dimension {d}", IndexError)
    if index < 0:
        index += size
    shape, stride = list(self.shape), list(self.stride())
    offset = self.storage_offset() + index * stride[d]
    del shape[d], stride[d]
    return self._view(shape, stride, offset)


def unbind(self: Tensor, dim: int = 0) -> tuple[Tensor, ...]:
    """All slices along ``dim``, as a tuple of views.

    Raises:
        IndexError: a 0-dim input ("Dimension specified as 0 but tensor has no dimensions"); ``dim`` out of range.
    """
    d = wrap_dim(dim, self.ndim, fn="unbind", wrap_scalar=False)
    return tuple(select(self, d, i) for i in range(self.shape[d]))


def split(self: Tensor, split_size_or_sections, dim: int = 0) -> tuple[Tensor, ...]:
    """Pieces of ``split_size`` along ``dim`` (the last may be smaller), or of the given section sizes.

    Raises:
        RuntimeError: a 0-dim input; section sizes that are negative or do not add up to the dim's size; a
            split size < 0, or 0 for a non-empty dim.
        IndexError: ``dim`` out of range. TypeError: non-integer sizes.
    """
    check(self.ndim > 0, "split expects at least a 1-dimensional tensor")
    if not isinstance(split_size_or_sections, (list, tuple)):  # ATen checks the size before the dim
        step = index_arg(split_size_or_sections, fn="split", arg="split_size")
        check(step >= 0, lambda: f"split expects split_size be non-negative, but got split_size={step}")
    d = wrap_dim(dim, self.ndim, fn="split")
    size = self.shape[d]
    if isinstance(split_size_or_sections, (list, tuple)):
        sections = list(normalize_shape(tuple(split_size_or_sections), fn="split_with_sizes", arg="split_sizes")) \
            if split_size_or_sections else []
        check(all(s >= 0 for s in sections), lambda: f"split_with_sizes expects split_sizes have only non-negative "
              f"entries, but got split_sizes={sections}")
        check(sum(sections) == size, lambda: f"split_with_sizes expects split_sizes to sum exactly to {size} (input "
              f"tensor's size at dimension {d}), but got split_sizes={sections}")
    else:
        check(step > 0 or size == 0, lambda: f"split_size can only be 0 if dimension size is 0, but got dimension "
              f"size of {size}")
        sections = [min(step, size - i) for i in range(0, size, step)] if size else [0]
    out, start = [], 0
    for s in sections:
        out.append(_slice(self, d, start, start + s))
        start += s
    return tuple(out)


def chunk(self: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """``ceil(size / chunks)``-sized pieces along ``dim`` (possibly fewer than ``chunks``), as ``torch.chunk``.

    Raises:
        RuntimeError: a 0-dim input; "chunk expects `chunks` to be greater than 0, got: 0".
        TypeError: a non-integer ``chunks``.
    """
    check(self.ndim > 0, "chunk expects at least a 1-dimensional tensor")
    chunks = index_arg(chunks, fn="chunk", arg="chunks")
    check(chunks > 0, lambda: f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = wrap_dim(dim, self.ndim, fn="chunk")
    size = self.shape[d]
    step = (size + chunks - 1) // chunks
    if step == 0:  # size 0: PyTorch returns `chunks` empty pieces
        return tuple(_slice(self, d, 0, 0) for _ in range(chunks))
    return split(self, step, d)


def tensor_split(self: Tensor, indices_or_sections, dim: int = 0) -> tuple[Tensor, ...]:
    """Split into ``n`` nearly equal parts (the first ``size % n`` one longer) or at the given indices.

    Indices behave as Python slice bounds (``x[prev:idx]`` along ``dim``: negative ones count from the end, all
    are clamped to the size, a piece ending before it starts is empty), as ``torch.tensor_split``. A 0-dim
    integer tensor counts as ``n``; a 1-dim integer tensor as indices.

    Raises:
        RuntimeError: a 0-dim input; ``n <= 0``. TypeError: non-integer indices.
    """
    check(self.ndim > 0, lambda: f"tensor_split expected at least a 1-dimensional tensor, but got a tensor with "
          f"{self.ndim} dims")
    d = wrap_dim(dim, self.ndim, fn="tensor_split")
    size = self.shape[d]
    if isinstance(indices_or_sections, Tensor):
        check(indices_or_sections.ndim <= 1 and indices_or_sections.dtype.kind in ("int", "uint"),
              lambda: f"tensor_split expected tensor_indices_or_sections to be a zero-dimensional or one-dimensional "
              f"tensor of integers, but got a tensor with {indices_or_sections.ndim} dims of "
              f"{indices_or_sections.dtype.name}")
        indices_or_sections = (int(indices_or_sections.item()) if indices_or_sections.ndim == 0
                               else [int(v) for v in indices_or_sections.tolist()])
    if isinstance(indices_or_sections, (list, tuple)):
        idx = list(normalize_shape(tuple(indices_or_sections), fn="tensor_split", arg="indices")) \
            if indices_or_sections else []

        def clamp(i: int) -> int:
            return min(max(i + size if i < 0 else i, 0), size)

        out, prev = [], 0
        for i in idx + [size]:
            a, b = clamp(prev), clamp(i)
            out.append(_slice(self, d, a, max(a, b)))
            prev = i
        return tuple(out)
    n = index_arg(indices_or_sections, fn="tensor_split", arg="sections")
    check(n > 0, lambda: f"number of sections must be larger than 0, got {n}")
    base, extra = divmod(size, n)
    out, start = [], 0
    for i in range(n):
        length = base + (1 if i < extra else 0)
        out.append(_slice(self, d, start, start + length))
        start += length
    return tuple(out)


def movedim(self: Tensor, source, destination) -> Tensor:
    """Move dims ``source`` to positions ``destination`` (ints or equal-length sequences).

    Raises:
        RuntimeError: sequences of different lengths; a repeated dim. IndexError: a dim out of range.
        TypeError: non-integer dims.
    """
    src = (source,) if not isinstance(source, (tuple, list)) else tuple(source)
    dst = (destination,) if not isinstance(destination, (tuple, list)) else tuple(destination)
    src = tuple(index_arg(v, fn="movedim", arg="source") for v in src)
    dst = tuple(index_arg(v, fn="movedim", arg="destination") for v in dst)
    check(len(src) == len(dst), lambda: f"movedim: Invalid source or destination dims: source ({list(src)} dims) "
          f"should contain the same number of dims as destination ({list(dst)} dims)")
    ws = tuple(wrap_dim(v, self.ndim, fn="movedim") for v in src)
    wd = tuple(wrap_dim(v, self.ndim, fn="movedim") for v in dst)
    check(len(set(ws)) == len(ws), lambda: f"movedim: repeated dim in `source` ({list(src)})")
    check(len(set(wd)) == len(wd), lambda: f"movedim: repeated dim in `destination` ({list(dst)})")
    if self.ndim == 0:
        return self._view((), ())
    order = [-1] * self.ndim
    for s, d in zip(ws, wd):
        order[d] = s
    rest = iter(i for i in range(self.ndim) if i not in ws)
    order = [o if o != -1 else next(rest) for o in order]
    return permute(self, *order) if order else self._view((), ())


moveaxis = movedim


def as_strided(self: Tensor, size, stride, storage_offset: int | None = None) -> Tensor:
    """A view with explicit sizes, strides (elements) and offset over the same storage.

    Raises:
        RuntimeError: mismatched lengths, negative sizes or strides, a negative offset, or a view that reaches
            past the storage ("setStorage: sizes [...], strides [...], storage offset N, and itemsize M requiring
            a storage size of X are out of bounds for storage of size Y").
    """
    size = normalize_shape((tuple(size),), fn="as_strided")
    stride = normalize_shape((tuple(stride),), fn="as_strided", arg="stride")
    offset = self.storage_offset() if storage_offset is None else index_arg(storage_offset, fn="as_strided",
                                                                            arg="storage_offset")
    check(len(size) == len(stride), lambda: f"as_strided: mismatch in length of strides and shape: {len(size)} vs "
          f"{len(stride)}")
    check(all(s >= 0 for s in size), lambda: f"as_strided: negative size in sizes={list(size)}")
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
        RuntimeError: dim1 == dim2 ("diagonal dimensions cannot be identical"). IndexError: a dim out of range.
        TypeError: a non-integer argument.
    """
    offset = index_arg(offset, fn="diagonal", arg="offset")
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
        RuntimeError: ``size`` larger than the dim or negative; ``step`` <= 0. IndexError: ``dimension`` out of
            range. TypeError: a non-integer argument.
    """
    d = wrap_dim(dimension, self.ndim, fn="unfold")
    size = index_arg(size, fn="unfold", arg="size")
    step = index_arg(step, fn="unfold", arg="step")
    dim_size = self.shape[d] if self.ndim else 1
    check(size <= dim_size, lambda: f"unfold: maximum size for tensor at dimension {d} is {dim_size} but size is "
          f"{size}")
    check(step > 0, lambda: f"unfold: step is {step} but must be > 0")
    check(size >= 0, lambda: f"unfold: size is {size} but must be >= 0")
    if self.ndim == 0:
        return self._view((size,), (1,))
    shape, stride = list(self.shape), list(self.stride())
    shape[d] = (dim_size - size) // step + 1
    new_stride = stride[d]
    stride[d] = step * stride[d]
    return self._view(shape + [size], stride + [new_stride])


def _broadcast_tensors(*tensors: Tensor) -> tuple[Tensor, ...]:
    """Views of ``tensors`` expanded to their common broadcast shape (``torch.broadcast_tensors``).

    Raises:
        RuntimeError: shapes that do not broadcast.
    """
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
