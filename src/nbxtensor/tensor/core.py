"""``Tensor``: a storage, a shape, strides counted in elements, a storage offset, a dtype and a device.

The class holds metadata and the data-movement methods that every device shares. Views live in
:mod:`.views`, indexing in :mod:`.indexing`, printing in :mod:`.printing`; operators are installed onto the
class by the op table (:mod:`nbxtensor.ops`), so this module never imports an operator.
"""

from __future__ import annotations

import math
import numbers
from operator import attrgetter
from typing import Any

import numpy as np

from .._errors import check, fail
from ..device.base import Storage, as_device, backend_for
from ..device.base import device as Device
from ..dtypes import table as T
from ..dtypes.table import DType, dtype_from
from ..shapes import contiguous_strides, is_contiguous, numel, storage_span, wrap_dim

__all__ = ["Tensor", "Size", "host_view", "new_empty", "new_empty_like", "make_tensor", "from_host_array", "copy_hook",
           "is_non_overlapping_and_dense", "overlap_status"]


_prod = math.prod
_CONTIGUOUS: dict = {}   # (shape, strides) -> is_contiguous: a layout's answer never changes


class Size(tuple):
    """A tensor's shape: a tuple of ints, as ``torch.Size``."""

    def __repr__(self) -> str:
        return f"nbx.Size({list(self)})"

    def numel(self) -> int:
        return numel(self)


class _Hooks:
    """Device kernels the op table installs (kept here so ``tensor`` never imports ``ops``)."""

    copy: Any = None  # copy(dst: Tensor, src: Tensor) -> None: cast + broadcast + cross-device copy
    fill: Any = None  # fill(dst: Tensor, value: Python scalar) -> None


copy_hook = _Hooks


class Tensor:
    """An n-dimensional array on a device, with PyTorch's view and promotion semantics.

    Attributes (read-only): ``shape``/``size()``, ``stride()``, ``storage_offset()``, ``dtype``, ``device``,
    ``ndim``/``dim()``, ``data_ptr()``, ``numel()``, ``nbytes``, ``element_size()``.

    Create tensors with :func:`nbxtensor.tensor`, :func:`nbxtensor.zeros` and the other factories; the
    constructor is internal (``Tensor(storage, shape, stride, offset, dtype)``).

    Example:
        >>> import nbxtensor as nbx
        >>> x = nbx.arange(6).view(2, 3)
        >>> x.t().stride()
        (1, 3)
    """

    __slots__ = ("_storage", "_shape", "_stride", "_offset", "_dtype", "__weakref__")
    __array_priority__ = 1000  # NumPy defers binary operators to ours

    def __init__(self, storage: Storage, shape: tuple[int, ...], stride: tuple[int, ...], offset: int, dtype: DType):
        if not isinstance(storage, Storage):
            fail("Tensor: construct tensors with nbxtensor.tensor(), zeros(), empty() ...; the constructor takes a "
                 f"Storage, got {type(storage).__name__}", TypeError)
        self._storage = storage
        self._shape = shape if shape.__class__ is Size else Size(shape)
        self._stride = stride if stride.__class__ is tuple else tuple(stride)
        self._offset = offset
        self._dtype = dtype
        if storage.nbytes and _prod(shape):
            lo, hi = storage_span(shape, stride, offset)
            assert lo >= 0 and hi * dtype.itemsize <= storage.nbytes, (shape, stride, offset, storage.nbytes)

    # -- metadata ---------------------------------------------------------------------------------
    # The hot accessors are C-level (attrgetter properties; an int dim indexes the tuple directly): every op
    # reads them several times per call.
    shape = property(attrgetter("_shape"), doc="The shape, a :class:`Size`.")

    def size(self, dim: int | None = None):
        """The shape, or the size of one dim (negative dims count from the end)."""
        if dim is None:
            return self._shape
        if dim.__class__ is int and -len(self._shape) <= dim < len(self._shape):
            return self._shape[dim]
        return self._shape[wrap_dim(dim, self.ndim, fn="size", wrap_scalar=False)]

    def stride(self, dim: int | None = None):
        """Strides in elements, or the stride of one dim."""
        if dim is None:
            return self._stride
        if dim.__class__ is int and -len(self._stride) <= dim < len(self._stride):
            return self._stride[dim]
        return self._stride[wrap_dim(dim, self.ndim, fn="stride", wrap_scalar=False)]

    def storage_offset(self) -> int:
        """Offset of element ``[0, ..., 0]`` in the storage, in elements."""
        return self._offset

    dtype = property(attrgetter("_dtype"), doc="The element type, a :class:`~nbxtensor.dtypes.table.DType`.")
    device = property(attrgetter("_storage.device"), doc="The device the storage lives on.")

    @property
    def is_cuda(self) -> bool:
        return self._storage.device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self._storage.device.type == "cpu"

    @property
    def ndim(self) -> int:
        return len(self._shape)

    def dim(self) -> int:
        return len(self._shape)

    def numel(self) -> int:
        return _prod(self._shape)

    nelement = numel

    def element_size(self) -> int:
        return self._dtype.itemsize

    @property
    def itemsize(self) -> int:
        return self._dtype.itemsize

    @property
    def nbytes(self) -> int:
        """``numel() * element_size()``: the bytes of the elements, not of the storage (as PyTorch)."""
        return self.numel() * self._dtype.itemsize

    def data_ptr(self) -> int:
        """Address of element ``[0, ..., 0]`` (storage address + offset * itemsize)."""
        return self._storage.ptr + self._offset * self._dtype.itemsize

    def untyped_storage(self) -> Storage:
        return self._storage

    def is_contiguous(self, memory_format: object = None) -> bool:
        key = (self._shape, self._stride)
        r = _CONTIGUOUS.get(key)
        if r is None:
            r = is_contiguous(self._shape, self._stride)
            if len(_CONTIGUOUS) >= 4096:
                _CONTIGUOUS.clear()
            _CONTIGUOUS[key] = r
        return r

    def is_floating_point(self) -> bool:
        return self._dtype.is_floating_point

    def is_complex(self) -> bool:
        return self._dtype.is_complex

    @property
    def is_readonly(self) -> bool:
        """True for memory imported read-only (a read-only NumPy array, a read-only DLPack capsule)."""
        return self._storage.readonly

    def __len__(self) -> int:
        check(self.ndim > 0, "len() of a 0-d tensor", TypeError)
        return self._shape[0]

    def __iter__(self):
        check(self.ndim > 0, "iteration over a 0-d tensor", TypeError)
        return iter(self.unbind(0))

    def __hash__(self) -> int:
        return id(self)

    def _view(self, shape, stride, offset=None, dtype=None) -> "Tensor":
        return Tensor(self._storage, tuple(shape), tuple(stride), self._offset if offset is None else offset,
                      self._dtype if dtype is None else dtype)

    # -- data out ---------------------------------------------------------------------------------
    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The values as a NumPy array of ``dtype.numpy`` (ml_dtypes arrays for bfloat16 and float8).

        A CPU tensor gives a view sharing its memory, as ``torch.Tensor.numpy`` does; a tensor on another
        device gives a host copy (PyTorch raises there unless ``force=True``; we always copy, stated
        difference). ``force`` is accepted for PyTorch compatibility.
        """
        if self.device.type == "cpu":
            return host_view(self)
        return _download(self)

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        if dtype is not None:
            a = a.astype(dtype)
        return np.array(a, copy=True) if copy else a

    def item(self):
        """The value of a one-element tensor as a Python number.

        Raises:
            RuntimeError: "a Tensor with N elements cannot be converted to Scalar" otherwise.
        """
        check(self.numel() == 1, lambda: f"item: a Tensor with {self.numel()} elements cannot be converted to Scalar")
        v = _download(self).reshape(-1)[0]
        return _py_scalar(v, self._dtype)

    def tolist(self):
        """Nested Python lists of Python numbers (a 0-dim tensor gives a number)."""
        a = _download(self)
        if self._dtype.kind == T.KIND_FLOAT and self._dtype.itemsize < 4:
            a = a.astype(np.float32).astype(np.float64) if a.dtype != np.float16 else a.astype(np.float64)
        return a.tolist()

    def __bool__(self) -> bool:
        check(self.numel() == 1, lambda: "Boolean value of Tensor with no values is ambiguous" if self.numel() == 0
              else "Boolean value of Tensor with more than one value is ambiguous")
        return bool(self.item())

    def _real_item(self, to: str):
        v = self.item()
        if isinstance(v, complex):  # as PyTorch: only a zero imaginary part converts
            check(v.imag == 0, lambda: f"value cannot be converted to type {to} without overflow (got {v})")
            v = v.real
        return v

    def __int__(self) -> int:
        return int(self._real_item("int64_t"))

    def __float__(self) -> float:
        return float(self._real_item("double"))

    def __complex__(self) -> complex:
        return complex(self.item())

    def __index__(self) -> int:
        check(self._dtype.kind in (T.KIND_INT, T.KIND_UINT, T.KIND_BOOL) and self.numel() == 1,
              "only integer tensors of a single element can be converted to an index", TypeError)
        return int(self.item())

    # -- conversions --------------------------------------------------------------------------------
    def to(self, *args, dtype=None, device=None, copy: bool = False, non_blocking: bool = False,
           memory_format: object = None) -> "Tensor":
        """Convert dtype and/or device, as ``torch.Tensor.to``.

        Forms: ``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other_tensor)``, keywords, and trailing
        positional ``non_blocking``, ``copy`` bools. Returns ``self`` when nothing changes and ``copy`` is false;
        otherwise a new tensor laid out as :meth:`clone` lays it out (``memory_format`` as there).

        Raises:
            TypeError: for an argument that is neither a dtype, a device, a tensor nor a trailing bool.
        """
        flags = []
        for a in args:
            if isinstance(a, bool):
                flags.append(a)
                continue
            check(not flags, "to: a dtype, device or tensor argument after non_blocking/copy", TypeError)
            if isinstance(a, Tensor):
                dtype, device = a.dtype, a.device
            elif isinstance(a, (DType, np.dtype, type)) or (isinstance(a, str) and _is_dtype_name(a)):
                dtype = a
            elif isinstance(a, (str, int, Device)):
                device = a
            else:
                fail(f"to: expected a dtype, a device or a tensor, got {type(a).__name__} {a!r}", TypeError)
        check(len(flags) <= 2, "to: at most two trailing bools (non_blocking, copy)", TypeError)
        if len(flags) == 2:
            copy = flags[1]
        dt = self._dtype if dtype is None else dtype_from(dtype)
        dev = self.device if device is None else as_device(device)
        if dt is self._dtype and dev == self.device and not copy:
            return self
        out = new_empty_like(self, dt, dev, memory_format, "to")
        out.copy_(self)
        return out

    def cpu(self) -> "Tensor":
        return self.to("cpu")

    def cuda(self, device=None, non_blocking: bool = False) -> "Tensor":
        return self.to("cuda" if device is None else device if not isinstance(device, int) else f"cuda:{device}")

    def type(self, dtype=None):
        """With no argument, the legacy type name (``nbx.FloatTensor``; PyTorch: ``torch.FloatTensor``, and
        ``torch.cuda.FloatTensor`` on cuda); with a dtype, ``to(dtype)``."""
        if dtype is None:
            dev = "" if self.device.type == "cpu" else self.device.type + "."
            return f"nbx.{dev}{_LEGACY_TYPE_NAMES[self._dtype.name]}"
        return self.to(dtype)

    def float(self) -> "Tensor":
        return self.to(T.float32)

    def half(self) -> "Tensor":
        return self.to(T.float16)

    def bfloat16(self) -> "Tensor":
        return self.to(T.bfloat16)

    def double(self) -> "Tensor":
        return self.to(T.float64)

    def int(self) -> "Tensor":
        return self.to(T.int32)

    def long(self) -> "Tensor":
        return self.to(T.int64)

    def short(self) -> "Tensor":
        return self.to(T.int16)

    def char(self) -> "Tensor":
        return self.to(T.int8)

    def byte(self) -> "Tensor":
        return self.to(T.uint8)

    def bool(self) -> "Tensor":
        return self.to(T.bool_)

    def cfloat(self) -> "Tensor":
        return self.to(T.complex64)

    def cdouble(self) -> "Tensor":
        return self.to(T.complex128)

    def contiguous(self, memory_format: object = None) -> "Tensor":
        """``self`` if already contiguous, else a contiguous (row-major) copy."""
        return self if self.is_contiguous() else self.clone(memory_format="contiguous_format")

    def clone(self, *, memory_format: object = None) -> "Tensor":
        """A copy with the same dtype and device, laid out as PyTorch's ``preserve_format`` does: a tensor whose
        elements densely fill their memory without overlap (a permutation of a contiguous tensor: transposes,
        ``permute``) keeps its strides; any other gets row-major strides. ``memory_format`` ``"contiguous_format"``
        (or ``torch.contiguous_format``, matched by name) always gives row-major strides."""
        out = new_empty_like(self, self._dtype, self.device, memory_format, "clone")
        out.copy_(self)
        return out

    def detach(self) -> "Tensor":
        return self._view(self._shape, self._stride)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        check(not requires_grad, "requires_grad_: nbxtensor is an inference library and has no autograd")
        return self

    @property
    def requires_grad(self) -> bool:
        return False

    @property
    def grad(self):
        return None

    # -- in-place data movement --------------------------------------------------------------------
    def copy_(self, src: "Tensor", non_blocking: bool = False) -> "Tensor":
        """Copy ``src`` into ``self``: broadcasts ``src`` to ``self.shape``, converts dtype (see
        :mod:`nbxtensor.dtypes.casting`), crosses devices.

        Raises:
            TypeError: ``src`` is not a tensor.
            RuntimeError: shapes that do not broadcast to ``self.shape``; ``self`` is read-only.
        """
        check(isinstance(src, Tensor), lambda: f"copy_: argument 'src' must be Tensor, got {type(src).__name__}",
              TypeError)
        _check_writable(self, "copy_")
        if _same_data(self, src):
            return self
        check(overlap_status(self, src) != "partial", "copy_: unsupported operation: some elements of the input "
              "tensor and the written-to tensor refer to a single memory location. Please clone() the tensor "
              "before performing the operation.")
        _Hooks.copy(self, src)
        return self

    def fill_(self, value) -> "Tensor":
        """Fill with a Python scalar or a 0-dim tensor, converted to ``self.dtype``.

        A Python or NumPy number is converted with PyTorch's overflow check
        (:func:`nbxtensor.dtypes.casting.checked_scalar`); a 0-dim tensor is converted by the cast rules, as
        ``copy_`` (PyTorch: ``fill_(torch.tensor(300))`` on uint8 gives 44, no error).

        Raises:
            RuntimeError: "value cannot be converted to type X without overflow" for a number outside the
                dtype's range (as PyTorch), a tensor value with dims; ``self`` is read-only.
            TypeError: a value that is not a number or tensor.
        """
        if isinstance(value, Tensor):
            # A 0-dim tensor value converts as a copy does (PyTorch: no overflow check, cast rules).
            check(value.ndim == 0, lambda: f"fill_ only supports 0-dimension value tensor but got tensor with "
                  f"{value.ndim} dimensions.")
            _check_writable(self, "fill_")
            _Hooks.copy(self, value)
            return self
        check(isinstance(value, (numbers.Number, np.generic)) and not isinstance(value, (str, bytes)),
              lambda: f"fill_: argument 'value' must be a number, got {type(value).__name__}", TypeError)
        _check_writable(self, "fill_")
        _Hooks.fill(self, value)
        return self

    def zero_(self) -> "Tensor":
        return self.fill_(0)

    def __dlpack__(self, *args, **kwargs):
        from .dlpack import to_dlpack_capsule
        return to_dlpack_capsule(self, *args, **kwargs)

    def __dlpack_device__(self):
        from .dlpack import dlpack_device
        return dlpack_device(self)

    def __repr__(self) -> str:
        from .printing import tensor_repr
        return tensor_repr(self)

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        if self.ndim == 0 and spec:
            return format(self.item(), spec)
        check(not spec, "unsupported format string passed to Tensor.__format__", TypeError)
        return repr(self)

    def __reduce__(self):
        return (_rebuild, (self.numpy() if self.is_cpu else _download(self), self._dtype.name, str(self.device)))


def _rebuild(arr, dtype_name, dev):
    return from_host_array(np.array(arr), dtype_from(dtype_name), as_device(dev))


def _is_dtype_name(s: str) -> bool:
    try:
        dtype_from(s)
        return True
    except TypeError:
        return False


def _check_writable(t: Tensor, fn: str) -> None:
    check(not t._storage.readonly, lambda: f"{fn}: the tensor's memory is read-only (it was imported from a "
          "read-only NumPy array or DLPack capsule); clone() it to get a writable copy")


def _py_scalar(v, dt: DType):
    if dt.kind == T.KIND_BOOL:
        return bool(v)
    if dt.kind in (T.KIND_INT, T.KIND_UINT):
        return int(v)
    if dt.kind == T.KIND_COMPLEX:
        return complex(v)
    return float(np.float32(v)) if dt.itemsize < 4 else float(v)


def host_view(t: Tensor) -> np.ndarray:
    """A NumPy array sharing memory with CPU tensor ``t`` (same shape, strides, dtype; read-only if ``t`` is).

    Raises:
        RuntimeError: for a tensor that is not on the CPU.
    """
    check(t.device.type == "cpu", lambda: f"host_view: expected a cpu tensor, got one on {t.device}; use .cpu()")
    it = t._dtype.itemsize
    if t.numel() == 0:  # no bytes to share; keep the tensor's strides (and read-only flag) all the same
        a = np.ndarray(t._shape, dtype=t._dtype.numpy, buffer=np.empty(1, dtype=t._dtype.numpy),
                       strides=tuple(s * it for s in t._stride))
        a.flags.writeable = not t._storage.readonly
        return a
    buf = t._storage.handle
    a = np.ndarray(t._shape, dtype=t._dtype.numpy, buffer=buf, offset=t._offset * it,
                   strides=tuple(s * it for s in t._stride))
    if t._storage.readonly:
        a.flags.writeable = False
    return a


def _download(t: Tensor) -> np.ndarray:
    """A host copy of ``t``'s values (C order), for any device: reads the storage span the view touches."""
    if t.device.type == "cpu":
        return np.array(host_view(t), copy=True)
    it = t._dtype.itemsize
    if t.numel() == 0:
        return np.empty(t._shape, dtype=t._dtype.numpy)
    lo, hi = storage_span(t._shape, t._stride, t._offset)
    raw = backend_for(t.device).read(t._storage, lo * it, (hi - lo) * it)
    return np.array(strided_host_array(raw, t._dtype, t._shape, t._stride, t._offset - lo), copy=True)


def strided_host_array(raw: np.ndarray, dtype: DType, shape, strides, offset: int) -> np.ndarray:
    """A NumPy view of host bytes ``raw`` (uint8) as ``dtype`` with element ``shape``, ``strides`` and ``offset``.

    Built with ``np.ndarray(buffer=...)`` rather than ``as_strided``: ``as_strided`` goes through the array
    interface, which cannot spell ml_dtypes' float8 types on NumPy 2.5 ("data type '<f1' not understood").
    """
    it = dtype.itemsize
    return np.ndarray(tuple(shape), dtype=dtype.numpy, buffer=raw, offset=offset * it,
                      strides=tuple(s * it for s in strides))


_LEGACY_TYPE_NAMES = {
    "bool": "BoolTensor", "uint8": "ByteTensor", "int8": "CharTensor", "int16": "ShortTensor", "int32": "IntTensor",
    "int64": "LongTensor", "uint16": "UInt16Tensor", "uint32": "UInt32Tensor", "uint64": "UInt64Tensor",
    "float16": "HalfTensor", "bfloat16": "BFloat16Tensor", "float32": "FloatTensor", "float64": "DoubleTensor",
    "float8_e4m3fn": "Float8_e4m3fnTensor", "float8_e5m2": "Float8_e5m2Tensor", "complex64": "ComplexFloatTensor",
    "complex128": "ComplexDoubleTensor"}


def is_non_overlapping_and_dense(shape, strides) -> bool:
    """c10's ``compute_non_overlapping_and_dense``: the elements fill ``numel`` consecutive slots exactly once,
    in some order of the dims (dims of size < 2 ignored)."""
    if len(shape) == 1:
        return shape[0] < 2 or strides[0] == 1
    order = sorted((d for d in range(len(shape)) if shape[d] >= 2), key=lambda d: strides[d])
    need = 1
    for d in order:
        if strides[d] != need:
            return False
        need *= shape[d]
    return True


def new_empty_like(t: Tensor, dtype: DType, dev: Device, memory_format: object = None, fn: str = "empty_like"):
    """An uninitialised tensor shaped like ``t`` under PyTorch's memory formats: ``None``/"preserve_format" keeps
    ``t``'s strides when ``t`` is non-overlapping and dense (else row-major), "contiguous_format" is row-major.

    Raises:
        RuntimeError: another memory format (``channels_last`` is not supported).
    """
    name = "preserve_format" if memory_format is None else str(memory_format).split(".")[-1]
    check(name in ("preserve_format", "contiguous_format"), lambda: f"{fn}: memory_format must be preserve_format "
          f"or contiguous_format, got {memory_format!r} (channels_last is not supported)")
    if name == "contiguous_format" or is_contiguous(t._shape, t._stride) or \
            not is_non_overlapping_and_dense(t._shape, t._stride):
        return new_empty(t._shape, dtype, dev)
    storage = backend_for(dev).allocate(numel(t._shape) * dtype.itemsize, dev)
    return Tensor(storage, t._shape, t._stride, 0, dtype)


def _same_data(a: Tensor, b: Tensor) -> bool:
    """``copy_``'s early exit: the same view of the same memory."""
    return a is b or (a._storage is b._storage and a._offset == b._offset and a._stride == b._stride and
                      a._shape == b._shape and a._dtype is b._dtype)


def overlap_status(a: Tensor, b: Tensor) -> str:
    """ATen's ``get_overlap_status``: "full" (same memory, same strides), "partial", "no" or "too_hard" (either
    is not non-overlapping and dense; not checked further, as PyTorch)."""
    if a is b:
        return "full"
    if a.numel() == 0 or b.numel() == 0:
        return "no"
    if not is_non_overlapping_and_dense(a._shape, a._stride) or not is_non_overlapping_and_dense(b._shape, b._stride):
        return "too_hard"
    if a._storage.device != b._storage.device:  # same device: addresses are comparable (host or unified VA)
        return "no"
    a0, b0 = a.data_ptr(), b.data_ptr()
    a1, b1 = a0 + a.nbytes, b0 + b.nbytes
    if a0 == b0 and a1 == b1:
        return "full" if a._stride == b._stride else "partial"
    return "partial" if a0 < b1 and b0 < a1 else "no"


_new_tensor = object.__new__


def make_tensor(storage: Storage, shape: Size, stride: tuple, offset: int, dtype: DType) -> Tensor:
    """A tensor from metadata the caller has already checked (internal hot paths: ``shape`` a :class:`Size`,
    ``stride`` a tuple of ints, the view inside ``storage``); :class:`Tensor`'s constructor checks all of it."""
    t = _new_tensor(Tensor)
    t._storage = storage
    t._shape = shape
    t._stride = stride
    t._offset = offset
    t._dtype = dtype
    return t


_CONTIG: dict = {}   # shape -> (Size, contiguous strides, numel): new_empty's per-shape facts


def new_empty(shape, dtype: DType, dev: Device) -> Tensor:
    """An uninitialised contiguous tensor (internal; :func:`nbxtensor.empty` is the public factory)."""
    shape = shape if shape.__class__ is tuple or shape.__class__ is Size else tuple(shape)
    facts = _CONTIG.get(shape)
    if facts is None:
        for s in shape:
            check(s >= 0, lambda: f"Trying to create tensor with negative dimension {s}: {list(shape)}")
        facts = (Size(shape), contiguous_strides(shape), numel(shape))
        if all(s.__class__ is int for s in shape):   # (a NumPy integer must not be handed back to int callers)
            if len(_CONTIG) >= 4096:
                _CONTIG.clear()
            _CONTIG[shape] = facts
    size, strides, n = facts
    return make_tensor(backend_for(dev).allocate(n * dtype.itemsize, dev), size, strides, 0, dtype)


def from_host_array(a: np.ndarray, dtype: DType, dev: Device) -> Tensor:
    """A new contiguous tensor on ``dev`` holding host array ``a`` (already of ``dtype.numpy``)."""
    a = np.asarray(a, dtype=dtype.numpy, order="C")
    out = new_empty(a.shape, dtype, dev)
    if a.size:
        backend_for(dev).write(out._storage, 0, a.reshape(-1).view(np.uint8))
    return out

