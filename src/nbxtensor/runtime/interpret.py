"""Host-memory arguments for Triton's interpreter, with no torch in the process.

Triton's interpreter (``TRITON_INTERPRET=1``) copies each pointer argument's storage "to the CPU" and back
through a small torch-like surface: ``data_ptr()``, ``dtype``, ``untyped_storage()`` (whose result has
``data_ptr()``, ``cpu()`` and ``copy_()``), ``new_empty()``, ``set_()``, ``storage_offset()``, ``size()`` and
``stride()`` (../shared/DESIGN.md). Our memory already is host memory, so ``cpu()`` returns the storage itself
and ``copy_`` from itself is a no-op: the interpreted kernel reads and writes the tensor's bytes in place.
"""

from __future__ import annotations

__all__ = ["HostArg", "HostStorage"]


class HostStorage:
    """A host storage seen by the interpreter."""

    __slots__ = ("storage",)

    def __init__(self, storage):
        self.storage = storage

    def data_ptr(self) -> int:
        return self.storage.ptr

    def cpu(self) -> "HostStorage":
        return self

    def copy_(self, other: "HostStorage") -> "HostStorage":
        assert other.storage is self.storage, "interpreter: host storages are used in place"
        return self


class HostArg:
    """A pointer argument over a CPU tensor's storage (dtype, offset, sizes and strides in elements)."""

    __slots__ = ("dtype", "_storage", "_offset", "_size", "_stride")

    def __init__(self, dtype, storage: HostStorage | None = None, offset: int = 0, size=(), stride=()):
        self.dtype = dtype  # str(dtype) ends in Triton's name for it ("nbxtensor.float16")
        self._storage = storage
        self._offset = offset
        self._size = tuple(size)
        self._stride = tuple(stride)

    @classmethod
    def of(cls, t) -> "HostArg":
        return cls(t.dtype, HostStorage(t.untyped_storage()), t.storage_offset(), t.shape, t.stride())

    def data_ptr(self) -> int:
        return self._storage.data_ptr() + self._offset * self.dtype.itemsize

    def untyped_storage(self) -> HostStorage:
        return self._storage

    def new_empty(self, *size, device=None) -> "HostArg":
        return HostArg(self.dtype)

    def set_(self, storage: HostStorage, offset: int, size, stride) -> "HostArg":
        self._storage, self._offset, self._size, self._stride = storage, offset, tuple(size), tuple(stride)
        return self

    def storage_offset(self) -> int:
        return self._offset

    def size(self):
        return self._size

    def stride(self):
        return self._stride
