"""Triton, imported once, optionally.

Triton is needed for GPU kernels and for the interpreter tier, not for the CPU device. This module imports
it if installed and exposes ``triton``, ``tl`` and ``jit``; without Triton, ``jit`` still decorates (so
operator modules import on any machine) and launching such a kernel raises a clear error.

``NBX_TRITON_INTERPRET=1`` sets ``TRITON_INTERPRET=1`` before Triton is imported, so every ``@jit`` kernel
becomes an interpreted function that runs on host memory (the interpreter tier, ../shared/DESIGN.md).
"""

from __future__ import annotations

import os

__all__ = ["triton", "tl", "jit", "HAVE_TRITON", "INTERPRET", "require_triton"]

INTERPRET = os.environ.get("NBX_TRITON_INTERPRET", "0") == "1"
if INTERPRET:
    os.environ["TRITON_INTERPRET"] = "1"

try:
    import triton
    import triton.language as tl
    HAVE_TRITON = True
    _IMPORT_ERROR = None
except ImportError as e:  # CPU-only installs without the [gpu] extra
    triton = None
    tl = None
    HAVE_TRITON = False
    _IMPORT_ERROR = e


def require_triton(what: str) -> None:
    """Raise a clear error when Triton is not installed.

    Raises:
        RuntimeError: naming ``what`` needed Triton and how to install it.
    """
    if not HAVE_TRITON:
        raise RuntimeError(f"{what} needs Triton, which is not installed ({_IMPORT_ERROR}); install "
                           "nbxtensor[gpu] (triton==3.6.0, cuda-bindings)")


class _MissingTritonKernel:
    def __init__(self, fn):
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "kernel")

    def __getitem__(self, grid):
        require_triton(f"kernel {self.__name__}")

    def run(self, *a, **k):
        require_triton(f"kernel {self.__name__}")


def jit(fn=None, **kwargs):
    """``triton.jit`` when Triton is installed, else a stand-in that refuses to launch."""
    def wrap(f):
        return triton.jit(f, **kwargs) if HAVE_TRITON else _MissingTritonKernel(f)
    return wrap(fn) if fn is not None else wrap
