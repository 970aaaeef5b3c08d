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

**Contiguous kernel** (config key ``CAST_VEC`` of the ``copy`` rule, default 0: off): where both operands are
contiguous, of the same shape and not overlapping, ``_cast_contig_kernel`` copies with the loads' indices
declared contiguous only in runs of ``CAST_VEC`` elements (``tl.max_contiguous``). Why: Triton's coalescing
gives a store at most 16 bytes per thread and a load the largest width any access of the kernel takes, so a
widening cast (bfloat16/float16 -> float32: 8 elements a thread loaded, 4 stored) moves its values between the
two layouts through shared memory, with a barrier per tile (sm_90 SASS of the pointwise kernel: ``STS.128``,
``BAR.SYNC``, ``LDS.128``; 85 instructions per thread for 16 elements). With ``CAST_VEC = 4`` both sides take 4
elements a thread (8-byte loads, 16-byte stores): no shared memory, no barrier, 64 instructions. The conversion
is the pointwise kernels' (:func:`~.pointwise._cvt`), so the results are the same bits. Also read: ``BLOCK``,
``num_warps`` and ``EVICT`` (1: ``evict_first`` loads; 2: also streaming ``.cs`` stores).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import table as T
from ..dtypes.casting import cast_array
from ..runtime.configs import launch_config
from ..runtime.configs import state as config_state
from ..runtime.launcher import launch
from ..runtime.triton_compat import INTERPRET, jit, tl  # noqa: F401  (the interpreter needs `tl` in a kernel's globals)
from ..shapes import storage_span
from ..tensor.core import Tensor, _download, new_empty
from . import registry
from .pointwise import _cvt, launch_pointwise
from .triton_helpers import ieee_options

__all__ = ["copy_triton", "fill_triton"]


@jit
def _identity(x, p0, p1, p2):
    return x


@jit
def _cast_contig_kernel(x_ptr, y_ptr, N, BLOCK: tl.constexpr, VEC: tl.constexpr, HW: tl.constexpr,
                        EVICT: tl.constexpr, I64: tl.constexpr):
    """``y[i] = convert(x[i])`` over contiguous ``x``/``y`` of N elements, BLOCK per program; the loads' indices are
    declared contiguous in runs of VEC (see the module docstring)."""
    if I64:
        idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    msk = idx < N
    lidx = tl.max_contiguous(tl.multiple_of(idx, VEC), VEC)
    if EVICT >= 1:
        x = tl.load(x_ptr + lidx, mask=msk, eviction_policy="evict_first")
    else:
        x = tl.load(x_ptr + lidx, mask=msk)
    y = _cvt(x, y_ptr.dtype.element_ty, HW)
    if EVICT >= 2:
        tl.store(y_ptr + idx, y, mask=msk, cache_modifier=".cs")
    else:
        tl.store(y_ptr + idx, y, mask=msk)


_CONTIG_PLANS: dict = {}


def _contig_plan(dst: Tensor, src: Tensor):
    """(grid, keywords) of ``_cast_contig_kernel`` for this copy, or None where the ``copy`` rule's ``CAST_VEC`` is
    0 or absent (the pointwise kernel serves it); planned once per (dtypes, size, device, config state)."""
    n = dst.numel()
    key = (src.dtype, dst.dtype, n, dst.device, config_state())
    hit = _CONTIG_PLANS.get(key, False)
    if hit is not False:
        return hit
    cfg = launch_config("copy", dst.device, dtypes=(dst.dtype,), numel=n)
    vec = int(cfg.get("CAST_VEC", 0) or 0)
    plan = None
    if vec > 0:
        block = int(cfg["BLOCK"])
        meta = dict(BLOCK=block, VEC=vec, HW=bool(cfg.get("HW_CVT", not INTERPRET)) and not INTERPRET,
                    EVICT=int(cfg.get("EVICT", 0)), I64=n + block >= 2 ** 31, **ieee_options())
        if "num_warps" in cfg:
            meta["num_warps"] = int(cfg["num_warps"])
        plan = (((n + block - 1) // block,), meta)
    if len(_CONTIG_PLANS) >= 256:
        _CONTIG_PLANS.clear()
    _CONTIG_PLANS[key] = plan
    return plan


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
    elif dst.is_contiguous() and src.is_contiguous() and T.bool_ not in (src.dtype, dst.dtype):
        plan = _contig_plan(dst, src)
        if plan is not None:
            launch(_cast_contig_kernel, plan[0], src, dst, dst.numel(), **plan[1])
            return
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
