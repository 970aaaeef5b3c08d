"""Triton cast/copy and fill kernels: the ``triton`` implementations of the ``copy_`` and ``fill_`` records
(:mod:`.copy`), used for ``cuda`` tensors and under the interpreter tier.

``copy_(dst, src)``: one pointwise launch over ``dst``'s layout with ``src`` expanded to it (any strides,
stride-0 broadcast, 64-bit offsets where needed); the source is loaded in its own dtype and converted on
store by :func:`~.triton_helpers.convert`, which implements :mod:`nbxtensor.dtypes.casting` exactly: round to
nearest even into float16, bfloat16 and float8 (through float32 from float64 and integers, as PyTorch);
float8_e4m3fn saturates to +-448 and keeps NaN; float8_e5m2 overflows to inf; float to integer truncates
toward zero with NaN -> 0 and saturation at the target's range; anything to bool is ``!= 0``.

A source that overlaps the destination without being it (``x[1:].copy_(x[:-1])``) is first copied to a
temporary, so the result is what a sequential copy gives. Complex dtypes have no Triton kernels: those copies
go through the host (correct, slower).

``fill_(dst, value)``: the value (already converted and range-checked by ``checked_scalar``) is passed to
the kernel as a scalar argument, so there is no load at all.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import table as T
from ..dtypes.casting import cast_array
from ..runtime.triton_compat import jit, tl  # noqa: F401  (the interpreter needs `tl` in a kernel's globals)
from ..shapes import storage_span
from ..tensor.core import Tensor, _download, new_empty
from . import registry
from .pointwise import launch_pointwise

__all__ = ["copy_triton", "fill_triton"]


@jit
def _identity(x, p0, p1, p2):
    return x


def _overlaps(a: Tensor, b: Tensor) -> bool:
    if a.untyped_storage() is not b.untyped_storage():
        return False
    a0, a1 = storage_span(a.shape, a.stride(), a.storage_offset())
    b0, b1 = storage_span(b.shape, b.stride(), b.storage_offset())
    ia, ib = a.dtype.itemsize, b.dtype.itemsize
    if a1 * ia <= b0 * ib or b1 * ib <= a0 * ia:
        return False
    same = a.data_ptr() == b.data_ptr() and ia == ib and tuple(a.stride()) == tuple(b.stride())
    return not same


def copy_triton(dst: Tensor, src: Tensor) -> None:
    """``dst[...] = src`` converted to ``dst.dtype`` (``src`` already expanded to ``dst.shape``, same device,
    ``dst`` non-empty and free of internal overlap: :func:`nbxtensor.ops.copy.copy_` checks all that)."""
    if src.dtype.is_complex or dst.dtype.is_complex:
        from .copy import _write_host_values
        vals = _download(src)
        _write_host_values(dst, vals if src.dtype is dst.dtype else cast_array(vals, src.dtype, dst.dtype))
        return
    if _overlaps(dst, src):
        tmp = new_empty(src.shape, src.dtype, src.device)
        launch_pointwise(_identity, tmp, [src], src.dtype, raw=1, op="copy")
        src = tmp
    launch_pointwise(_identity, dst, [src], src.dtype, raw=1, op="copy")


def fill_triton(dst: Tensor, value) -> None:
    """Fill ``dst`` with ``value`` (a NumPy scalar of ``dst.dtype`` from ``checked_scalar``)."""
    if dst.dtype.is_complex:
        from .copy import _write_host_values
        _write_host_values(dst, np.full(dst.shape, value, dtype=dst.dtype.numpy))
        return
    d = dst.dtype
    if d.kind == T.KIND_FLOAT:
        v, compute = float(np.float64(value)) if d.itemsize >= 4 else float(value.astype(np.float32)), T.float64
    elif d is T.bool_:
        v, compute = int(bool(value)), T.int8
    elif d is T.uint64:
        iv = int(value)
        v, compute = (iv - (1 << 64) if iv >= 1 << 63 else iv), T.int64  # same bits; int64 -> uint64 keeps them
    else:
        v, compute = int(value), d
    launch_pointwise(_identity, dst, [v], compute, op="copy")


registry.get("copy_").triton = copy_triton
registry.get("fill_").triton = fill_triton
