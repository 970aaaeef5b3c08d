"""``copy_`` and ``fill_``: the data-movement kernels every device needs, installed into ``Tensor``.

``copy_(dst, src)`` broadcasts ``src`` to ``dst.shape``, converts dtype by :mod:`nbxtensor.dtypes.casting`
and crosses devices. ``fill_(dst, value)`` converts ``value`` with PyTorch's overflow check
(:func:`nbxtensor.dtypes.casting.checked_scalar`).

Implementations come from the op table: ``cpu`` is NumPy assignment over strided views (NumPy buffers
overlapping source and destination); the ``triton`` implementation (set by the elementwise family) serves
``cuda`` tensors and the interpreter tier. Copies across devices, and same-device copies on a device whose
record has no Triton implementation yet, travel through the host (correct for every dtype and layout;
slower: one read and one write of the touched span).

Cost: ``copy_`` reads ``src.numel() * src.itemsize`` bytes (once per source element, broadcast reads served
from cache) and writes ``dst.nbytes``; no flops.
"""

from __future__ import annotations

import numpy as np

from .._errors import check
from ..device.base import backend_for
from ..dtypes.casting import cast_array, checked_scalar
from ..shapes import broadcast_shapes, storage_span
from ..tensor.core import Tensor, _download, copy_hook, host_view, strided_host_array
from .registry import Cost, OpRecord, impl, register

__all__ = ["copy_", "fill_", "check_no_internal_overlap"]


def check_no_internal_overlap(t: Tensor, fn: str) -> None:
    """Refuse writes to a tensor where several elements share one memory location (a dim of size > 1 with
    stride 0, as from ``expand``), with PyTorch's message."""
    check(all(not (size > 1 and st == 0) for size, st in zip(t.shape, t.stride())),
          f"{fn}: unsupported operation: more than one element of the written-to tensor refers to a single memory "
          "location. Please clone() the tensor before performing the operation.")


def _write_host_values(dst: Tensor, vals: np.ndarray) -> None:
    """Write host values (already of dst's dtype and shape) into dst on any device."""
    be = backend_for(dst.device)
    it = dst.dtype.itemsize
    if dst.is_contiguous():
        be.write(dst.untyped_storage(), dst.storage_offset() * it, np.asarray(vals, order="C").reshape(-1).view(np.uint8))
        return
    lo, hi = storage_span(dst.shape, dst.stride(), dst.storage_offset())
    span = be.read(dst.untyped_storage(), lo * it, (hi - lo) * it)
    view = strided_host_array(span, dst.dtype, dst.shape, dst.stride(), dst.storage_offset() - lo)
    view[...] = vals
    be.write(dst.untyped_storage(), lo * it, span)


def copy_(dst: Tensor, src: Tensor) -> None:
    """Copy ``src`` into ``dst`` (see the module docstring). Called through ``Tensor.copy_``.

    Raises:
        RuntimeError: ``src`` does not broadcast to ``dst.shape``; ``dst`` has internal overlap.
    """
    shape = broadcast_shapes(dst.shape, src.shape)
    check(tuple(shape) == tuple(dst.shape), lambda: f"copy_: source of shape {list(src.shape)} cannot be broadcast "
          f"to the destination's shape {list(dst.shape)}")
    check_no_internal_overlap(dst, "copy_")
    if dst.numel() == 0:
        return
    if _direct_transfer(dst, src):
        return
    srcb = src.expand(dst.shape)
    if src.device == dst.device:
        kern = _kernel("copy_", dst.device.type)
        if kern is not None:
            kern(dst, srcb)
            return
    vals = _download(srcb)
    if src.dtype is not dst.dtype:
        vals = cast_array(vals, src.dtype, dst.dtype)
    _write_host_values(dst, vals)


def _direct_transfer(dst: Tensor, src: Tensor) -> bool:
    """Host <-> device copies of contiguous tensors of one dtype and shape go straight between the host tensor's
    memory and the device (pinned host memory keeps its full speed); returns False when not applicable."""
    if src.dtype is not dst.dtype or src.shape != dst.shape or src.device == dst.device:
        return False
    if not (src.is_contiguous() and dst.is_contiguous()):
        return False
    it = dst.dtype.itemsize
    if src.device.type == "cpu":
        backend_for(dst.device).write(dst.untyped_storage(), dst.storage_offset() * it,
                                      host_view(src).reshape(-1).view(np.uint8))
        return True
    be = backend_for(src.device)
    if dst.device.type == "cpu" and hasattr(be, "read_into"):
        be.read_into(host_view(dst).reshape(-1).view(np.uint8), src.untyped_storage(), src.storage_offset() * it)
        return True
    return False


def fill_(dst: Tensor, value) -> None:
    """Fill ``dst`` with a scalar converted by ``checked_scalar``. Called through ``Tensor.fill_``.

    Raises:
        RuntimeError: overflow (PyTorch's message); internal overlap.
    """
    v = checked_scalar(value, dst.dtype, "fill_")
    check_no_internal_overlap(dst, "fill_")
    if dst.numel() == 0:
        return
    kern = _kernel("fill_", dst.device.type)
    if kern is not None:
        kern(dst, v)
        return
    _write_host_values(dst, np.full(dst.shape, v, dtype=dst.dtype.numpy))


def _kernel(name: str, device_type: str):
    try:
        return impl(name, device_type)
    except NotImplementedError:
        return None


def _copy_cpu(dst: Tensor, srcb: Tensor) -> None:
    d, s = host_view(dst), host_view(srcb)
    d[...] = s if srcb.dtype is dst.dtype else cast_array(s, srcb.dtype, dst.dtype)


def _fill_cpu(dst: Tensor, v) -> None:
    host_view(dst)[...] = v


def _copy_cost(dst_shape, dst_dtype, src_numel, src_dtype) -> Cost:
    n = 1
    for s in dst_shape:
        n *= s
    return Cost(flops=0, bytes_read=src_numel * src_dtype.itemsize, bytes_written=n * dst_dtype.itemsize)


copy_hook.copy = copy_
copy_hook.fill = fill_

# copy_ and fill_ define the conversion rules rather than approximate a function: their reference is the rule
# itself (dtypes.casting), checked bit-exactly against PyTorch in the parity suite, not a float64 oracle.
register(OpRecord(name="copy_", family="copy", cpu=_copy_cpu, cost=_copy_cost,
                  oracle_note="exact: defined by nbxtensor.dtypes.casting; parity-tested against PyTorch"))
register(OpRecord(name="fill_", family="copy", cpu=_fill_cpu,
                  cost=lambda shape, dtype: Cost(flops=0, bytes_read=0,
                                                 bytes_written=int(np.prod(shape)) * dtype.itemsize),
                  oracle_note="exact: defined by nbxtensor.dtypes.casting.checked_scalar"))
