"""The one launcher: every Triton kernel of nbxtensor runs through :func:`launch`.

- ``cuda`` tensors: launched on the current stream through the torch-free Triton driver
  (:mod:`nbxtensor.runtime.cuda_driver`, when the CUDA runtime is present).
- ``cpu`` tensors with ``NBX_TRITON_INTERPRET=1``: run by Triton's interpreter on host memory (the
  interpreter tier), each tensor wrapped as a :class:`~nbxtensor.runtime.interpret.HostArg`.

Kernel settings (block sizes, warps, stages) come from launch keys (:mod:`nbxtensor.runtime.configs`), not
from constants in operator code.
"""

from __future__ import annotations

from .._errors import check, fail
from .interpret import HostArg
from .triton_compat import INTERPRET, require_triton

__all__ = ["launch", "launch_tail", "Tail", "interpreting"]


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
    # The host cost of this function is on every launch: the cuda path is kept to a loop, a compare and a call.
    for a in args:
        st = getattr(a, "_storage", None)
        if st is not None:
            break
    else:
        fail("launch: a kernel needs at least one tensor argument")
    dev = st.device
    if dev.type == "cuda":
        # cuda_launch refuses tensors on other devices and pointers no allocator knows, and compiles without
        # flush-to-zero (PyTorch's CUDA semantics).
        return (_CUDA_LAUNCH or _cuda_launch()).launch(kernel, grid, dev, args, meta)
    require_triton("launch")
    for t in args:
        if _is_tensor(t):
            check(t.device == dev, lambda: f"launch: tensor arguments on different devices: {dev} and {t.device}")
    check(dev.type == "cpu" and INTERPRET, lambda: f"launch: Triton kernels run on {dev.type} tensors only under the "
          "interpreter tier (NBX_TRITON_INTERPRET=1)")
    host_args = [HostArg.of(a) if _is_tensor(a) else a for a in args]
    meta = {k: v for k, v in meta.items() if k not in ("num_warps", "num_stages", "num_ctas")}
    return kernel[grid](*host_args, **meta)


class Tail:
    """The constant end of a planned launch: trailing positional arguments (ints and floats, no tensors) and the
    keywords (constexprs, launch options), fixed when an op plans a launch.

    :func:`launch_tail` passes them after the per-call arguments. The CUDA fast path keys its compiled-kernel cache
    on the tail object itself (identity) instead of re-deriving the specialization of each trailing argument and
    hashing the keywords on every launch, so a tail must not be changed after its first launch: plan a new one.
    """

    __slots__ = ("args", "meta", "__weakref__")

    def __init__(self, args=(), meta=None):
        self.args = tuple(args)
        self.meta = dict(meta or {})


def launch_tail(kernel, grid, args, tail: Tail):
    """``launch(kernel, grid, *args, *tail.args, **tail.meta)``: the one launcher with a planned constant tail.

    Args:
        kernel: a ``@jit`` kernel.
        grid: a tuple of up to 3 ints.
        args: the per-call leading arguments (tensors and scalars), with at least one tensor.
        tail: the planned trailing arguments and keywords (see :class:`Tail`).

    Raises:
        RuntimeError / TypeError: as :func:`launch`.
    """
    for a in args:
        st = getattr(a, "_storage", None)
        if st is not None:
            if st.device.type == "cuda":
                return (_CUDA_LAUNCH or _cuda_launch()).launch(kernel, grid, st.device, args, tail.meta, tail)
            break
    return launch(kernel, grid, *args, *tail.args, **tail.meta)


_CUDA_LAUNCH = None


def _cuda_launch():
    global _CUDA_LAUNCH
    from . import cuda_launch  # the torch-free CUDA path, imported once
    _CUDA_LAUNCH = cuda_launch
    return cuda_launch
