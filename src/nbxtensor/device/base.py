"""Devices behind one interface: ``nbx.device`` parsing, ``Storage`` and the ``Backend`` protocol.

A ``Tensor`` holds a ``Storage`` (untyped bytes on one device) and never looks inside it; everything that
touches the bytes goes through the storage's backend. A new device type (``cuda`` here, Metal later)
registers a ``Backend`` with :func:`register_backend` and ``Tensor`` does not change.

Source for device strings: ``torch.device`` (https://pytorch.org/docs/stable/tensor_attributes.html#torch-device).
"""

from __future__ import annotations

import operator
import re
from typing import Protocol

import numpy as np

from .._errors import check, fail

__all__ = ["device", "Storage", "Backend", "register_backend", "backend_for", "as_device", "KNOWN_TYPES"]

# Device types PyTorch's parser knows (c10/core/DeviceType.cpp); only those with a registered backend can hold
# memory here.
KNOWN_TYPES = ("cpu", "cuda", "ipu", "xpu", "mkldnn", "opengl", "opencl", "ideep", "hip", "ve", "fpga", "maia", "xla",
               "lazy", "vulkan", "mps", "meta", "hpu", "mtia", "privateuseone")
# c10::Device's parser: a lowercase type, optionally ':' and an index without sign or leading zeros.
_DEVICE_RE = re.compile(r"^([a-z]+)(?::(0|[1-9]\d*))?$")


class device:
    """A device: ``type`` and optional ``index``, parsed as ``torch.device``.

    Forms: ``device("cpu")``, ``device("cuda")``, ``device("cuda:1")``, ``device("cuda", 1)``, ``device(1)``
    (an int means a CUDA index, as PyTorch). ``device("cuda") != device("cuda:0")``, as in PyTorch.

    Raises:
        RuntimeError: "Invalid device string: 'x'" for an unparsable string or unknown type; a negative index;
            an index given twice.
        TypeError: for an argument that is neither a string, an int nor a device.
    """

    __slots__ = ("type", "index")

    def __init__(self, type: "str | int | device", index: int | None = None):  # noqa: A002 - PyTorch's name
        if isinstance(type, device):
            check(index is None, "device: index given twice")
            t, i = type.type, type.index
        elif isinstance(type, int) and not isinstance(type, bool):
            check(index is None, "device: index given twice")
            t, i = "cuda", type
        elif isinstance(type, str):
            m = _DEVICE_RE.match(type)
            check(m is not None and m.group(1) in KNOWN_TYPES,
                  lambda: f"Invalid device string: '{type}' (expected a type among {KNOWN_TYPES}, optionally "
                          "followed by ':<index>')")
            t = m.group(1)
            i = int(m.group(2)) if m.group(2) is not None else None
            if index is not None:
                check(i is None, lambda: f"device: type (string) must not include an index because index was "
                      f"passed explicitly: {type}")
                check(isinstance(index, int) and not isinstance(index, bool) or hasattr(index, "__index__"),
                      lambda: f"device(): argument 'index' (position 2) must be int, not {index.__class__.__name__}",
                      TypeError)
                i = operator.index(index)
        else:
            fail(f"device: expected a string, an int or a device, got {type.__class__.__name__}",
                 TypeError)
        check(i is None or i >= 0, lambda: f"Device index must not be negative, got {i}")
        object.__setattr__(self, "type", t)
        object.__setattr__(self, "index", i)

    def __setattr__(self, name, value):
        raise AttributeError("device is immutable")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except RuntimeError:
                return False
        return isinstance(other, device) and other.type == self.type and other.index == self.index

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __reduce__(self):
        return (device, (self.type, self.index))


def as_device(d: "str | int | device | None", *, arg: str = "device") -> device:
    """Resolve a user's ``device=`` argument (``None`` means CPU) to a device with a backend.

    Raises:
        RuntimeError: for a device type with no backend in this build, naming it.
    """
    dev = device("cpu") if d is None else d if isinstance(d, device) else device(d)
    check(dev.type in _BACKENDS, lambda: f"{arg}: device type '{dev.type}' has no backend in nbxtensor "
          f"(available: {sorted(_BACKENDS)})")
    return _BACKENDS[dev.type].canonical(dev)


class Storage:
    """Untyped bytes on one device, owned by a backend.

    Attributes:
        device: where the bytes live (always with an index for indexed device types).
        nbytes: size in bytes.
        ptr: address of byte 0 (host address for ``cpu``, device address for ``cuda``).
        handle: backend data (a 1-D ``uint8`` NumPy array for ``cpu``; an allocator block for ``cuda``).
        readonly: writes through any view of this storage raise.
        owner: an object kept alive as long as the storage (a DLPack producer, a memory map).
    """

    __slots__ = ("device", "nbytes", "ptr", "handle", "readonly", "owner", "backend", "__weakref__")

    def __init__(self, dev: device, nbytes: int, ptr: int, handle: object, backend: "Backend", *,
                 readonly: bool = False, owner: object = None):
        self.device = dev
        self.nbytes = nbytes
        self.ptr = ptr
        self.handle = handle
        self.backend = backend
        self.readonly = readonly
        self.owner = owner

    def __repr__(self) -> str:
        return f"Storage(device={self.device}, nbytes={self.nbytes}, ptr=0x{self.ptr:x})"


class Backend(Protocol):
    """What a device type provides. Offsets and sizes are in bytes; host data is a C-contiguous uint8 array."""

    type: str

    def canonical(self, dev: device) -> device:
        """Fill in the index (``cuda`` -> ``cuda:<current>``); raise for an index that does not exist."""

    def allocate(self, nbytes: int, dev: device) -> Storage:
        """A new storage of ``nbytes`` uninitialised bytes."""

    def write(self, dst: Storage, offset: int, src: np.ndarray) -> None:
        """Copy host bytes ``src`` into ``dst`` at ``offset``."""

    def read(self, src: Storage, offset: int, nbytes: int) -> np.ndarray:
        """A host copy of ``nbytes`` bytes of ``src`` from ``offset``."""

    def copy(self, dst: Storage, dst_offset: int, src: Storage, src_offset: int, nbytes: int) -> None:
        """Copy bytes between two storages of this device type (same device or peer)."""

    def synchronize(self, dev: device) -> None:
        """Wait for all work queued on ``dev``."""

    def wrap_external(self, ptr: int, nbytes: int, dev: device, owner: object, readonly: bool) -> Storage:
        """A storage over ``nbytes`` bytes at address ``ptr`` that another library allocated, without copying.

        Used by :func:`nbxtensor.from_dlpack`. ``owner`` is kept alive as long as the storage; when it dies it
        releases the memory (it calls the DLPack producer's deleter). Foreign bytes are not counted in the
        backend's allocation statistics. ``readonly`` makes writes through any view raise.
        """


_BACKENDS: dict[str, Backend] = {}


def register_backend(backend: Backend) -> None:
    """Make ``backend`` serve its device type (called once by each device package on import)."""
    _BACKENDS[backend.type] = backend


def backend_for(dev: device) -> Backend:
    """The backend serving ``dev.type``.

    Raises:
        RuntimeError: for a device type with no backend.
    """
    b = _BACKENDS.get(dev.type)
    check(b is not None, lambda: f"no backend for device type '{dev.type}' (available: {sorted(_BACKENDS)})")
    return b
