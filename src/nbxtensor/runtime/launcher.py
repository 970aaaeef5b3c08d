"""The one launcher: every Triton kernel of nbxtensor runs through :func:`launch`.

- ``cuda`` tensors: launched on the current stream through the torch-free Triton driver
  (:mod:`nbxtensor.runtime.cuda_driver`, when the CUDA runtime is present).
- ``cpu`` tensors with ``NBX_TRITON_INTERPRET=1``: run by Triton's interpreter on host memory (the
  interpreter tier), each tensor wrapped as a :class:`~nbxtensor.runtime.interpret.HostArg`.

Kernel settings (block sizes, warps, stages) come from launch keys (:mod:`nbxtensor.runtime.configs`), not
from constants in operator code.
"""

from __future__ import annotations

from .._errors import check
from .interpret import HostArg
from .triton_compat import INTERPRET, require_triton

__all__ = ["launch", "interpreting"]


def interpreting() -> bool:
    """True when Triton kernels run under the interpreter on host memory (``NBX_TRITON_INTERPRET=1``)."""
    return INTERPRET


def _is_tensor(a) -> bool:
    return hasattr(a, "untyped_storage") and hasattr(a, "stride") and hasattr(a, "_storage")


def launch(kernel, grid, *args, **meta):
    """Launch ``kernel[grid](*args, **meta)``.

    Args:
        kernel: a ``@jit`` kernel.
        grid: a tuple of up to 3 ints (programs per axis).
        args: tensors (passed as pointers) and scalars, in the kernel's order.
        meta: constexpr values and ``num_warps``/``num_stages``.

    Raises:
        RuntimeError: Triton missing; tensors on different devices; a CPU tensor outside the interpreter tier.
    """
    require_triton("launch")
    dev = None
    for a in args:
        st = getattr(a, "_storage", None)
        if st is not None:
            dev = st.device
            break
    check(dev is not None, "launch: a kernel needs at least one tensor argument")
    if dev.type == "cuda":
        # PyTorch's CUDA kernels are built without flush-to-zero (nvcc's -ftz=false); Triton builds libdevice with
        # FTZ on unless told otherwise, which flushes float32 subnormals in exp, floor, pow, ... So every launch
        # turns it off unless the op says otherwise. cuda_launch refuses tensors on other devices and pointers no
        # allocator knows.
        if "enable_reflect_ftz" not in meta:
            meta["enable_reflect_ftz"] = False
        return _cuda_launch().launch(kernel, grid, dev, args, meta)
    for t in args:
        if _is_tensor(t):
            check(t.device == dev, lambda: f"launch: tensor arguments on different devices: {dev} and {t.device}")
    check(dev.type == "cpu" and INTERPRET, lambda: f"launch: Triton kernels run on {dev.type} tensors only under the "
          "interpreter tier (NBX_TRITON_INTERPRET=1)")
    host_args = [HostArg.of(a) if _is_tensor(a) else a for a in args]
    meta = {k: v for k, v in meta.items() if k not in ("num_warps", "num_stages", "num_ctas")}
    return kernel[grid](*host_args, **meta)


_CUDA_LAUNCH = []


def _cuda_launch():
    if not _CUDA_LAUNCH:
        from . import cuda_launch  # the torch-free CUDA path, imported once
        _CUDA_LAUNCH.append(cuda_launch)
    return _CUDA_LAUNCH[0]
