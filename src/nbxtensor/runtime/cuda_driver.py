"""A Triton driver that needs no torch: device, stream and capability come from ``cuda-bindings``.

Triton's stock ``CudaDriver`` imports torch only to learn the current device, the current stream and the
compute capability (its base class ``GPUDriver.__init__`` binds ``torch.cuda`` functions). This subclass
sets ``utils``, ``launcher_cls`` and those callables itself, from :mod:`nbxtensor.device.cuda`, and is
installed with ``triton.runtime.driver.set_active`` (../shared/DESIGN.md, measured on an H200 with
``sys.modules["torch"] = None``). Triton internals move between releases: this targets triton 3.6.0.

:func:`install` also gives Triton an allocator for kernels that ask for global scratch memory, served by the
caching allocator on the launch stream.
"""

from __future__ import annotations

import threading

from ..device.cuda import context as C
from ..device.cuda import driver as D
from ..device.cuda import stream as S
from .triton_compat import require_triton

__all__ = ["install", "installed", "NbxCudaDriver"]

_lock = threading.Lock()
_installed: list = []


def _make_driver_class():
    from triton.backends.nvidia.driver import CudaDriver, CudaLauncher, CudaUtils

    class NbxCudaDriver(CudaDriver):
        """Triton's CUDA driver with device, stream and capability from cuda-bindings (no torch)."""

        def __init__(self):  # deliberately not CudaDriver.__init__ / GPUDriver.__init__: they import torch
            self.utils = CudaUtils()
            self.launcher_cls = CudaLauncher
            self.get_current_device = C.current_device
            self.set_current_device = C.set_device
            self.get_current_stream = S.current_stream_handle
            self.get_device_capability = C.get_device_capability

        @staticmethod
        def is_active():
            return D.available()

        def get_active_torch_device(self):
            from ..device.base import device
            return device("cuda", C.current_device())

        def get_device_interface(self):
            from .. import cuda
            return cuda

        def get_empty_cache_for_benchmark(self):
            from ..device.base import device
            from ..device.cuda.backend import cuda_backend
            i = C.current_device()
            return cuda_backend.allocate(256 << 20, device("cuda", i))

        def clear_cache(self, cache):
            from ..device.cuda.backend import cuda_backend
            cuda_backend.memset(cache, 0, 0, cache.nbytes)

    return NbxCudaDriver


class _Scratch:
    """Global scratch for one launch (Triton keeps it only while launching; the stream orders reuse)."""

    __slots__ = ("storage",)

    def __init__(self, storage):
        self.storage = storage

    def data_ptr(self) -> int:
        return self.storage.ptr


def _scratch_alloc(size: int, alignment: int, stream) -> _Scratch:
    from ..device.base import device
    from ..device.cuda.backend import cuda_backend
    from .._errors import check
    check(alignment <= 512, lambda: f"triton scratch: alignment {alignment} exceeds the allocator's 512 bytes")
    return _Scratch(cuda_backend.allocate(int(size), device("cuda", C.current_device())))


def install():
    """Install the torch-free driver as Triton's active driver (once per process) and return it.

    Raises:
        RuntimeError: Triton missing; no CUDA device (the reason).
    """
    if _installed:
        return _installed[0]
    require_triton("the CUDA launcher")
    D.init()
    with _lock:
        if not _installed:
            import triton
            from triton.runtime import driver as triton_driver
            drv = _make_driver_class()()
            triton_driver.set_active(drv)
            try:
                triton.set_allocator(_scratch_alloc)
            except AttributeError:  # older Triton: no scratch allocator hook
                pass
            _installed.append(drv)
    return _installed[0]


def installed() -> bool:
    """True once :func:`install` has run."""
    return bool(_installed)


def NbxCudaDriver():  # noqa: N802 - reads as the class; built lazily so importing needs no Triton
    """The driver class (built on first use, as it subclasses a Triton class)."""
    return _make_driver_class()
