"""The ``cuda`` device on ``cuda-bindings`` (NVIDIA's Python bindings of the CUDA driver API), no torch.

- :mod:`.driver`: loading the driver once; the one checked-call function that decodes CUDA error names.
- :mod:`.context`: devices, properties, primary contexts, the per-thread current device.
- :mod:`.stream`: streams, events, the per-thread current stream, synchronisation.
- :mod:`.copies`: host <-> device (pinned staging), device <-> device, peer, memset; the pinned host pool.
- :mod:`.backend`: the ``Backend`` for device type ``cuda`` (registered on import) and its caching allocators.

Importing this package never touches the driver: on a machine without one, ``available()`` is False and any
use raises a clear "no CUDA device" error.
"""

from . import driver, context, stream, copies, backend
from .backend import CudaBackend, CudaStorage, allocator, cuda_backend, find_allocation
from .driver import CudaError, NoCudaError, available

__all__ = ["driver", "context", "stream", "copies", "backend", "CudaBackend", "CudaStorage", "allocator",
           "cuda_backend", "find_allocation", "CudaError", "NoCudaError", "available"]
