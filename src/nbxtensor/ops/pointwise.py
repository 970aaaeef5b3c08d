"""The pointwise generator: a scalar ``@jit`` body becomes an N-d Triton kernel (and a NumPy body the ``cpu``
implementation), once, for every elementwise op (../shared/STYLE.md, "Kernels"; FlagGems' pointwise_dynamic).

A body is a ``@jit`` function of the operands (already converted to the compute dtype) and three parameters
``p0, p1, p2`` (also in the compute dtype): ``body(x, y, p0, p1, p2) -> value``. :func:`make` returns the
op's ``triton`` implementation with the dispatch contract ``impl(out, inputs, prom, params)``
(:func:`nbxtensor.ops.dispatch.pointwise`): ``inputs`` are tensors expanded to ``out.shape`` or scalars.

What the generated launch does:

- **Rank collapse** (:func:`collapse`, after CuPy's ``reduce_dims``): size-1 dims are dropped and adjacent
  dims merged wherever every operand is contiguous across them, so a contiguous or sliced-row operand costs
  one or two dims. Up to :data:`MAX_RANK` dims remain; deeper layouts are split on the host over the leading
  dims.
- **Modes per operand**, as constexprs: ``0`` contiguous (offset = linear index: the fast path, no index
  arithmetic), ``1`` strided (coordinates from the linear index times the operand's strides; stride 0 is how
  ``expand`` broadcasts), ``2`` a scalar passed by value (a Python number operand: no load at all).
- **64-bit offsets** (``I64``) when the element count or any operand's largest offset reaches 2**31;
  int32 index arithmetic otherwise (cheaper divisions in the strided path).
- **Conversions**: loads go through :func:`~.triton_helpers.convert` to the compute dtype (float32 for
  float16, bfloat16 and float8: computed in float32, rounded once on store); the store converts to the output
  dtype by the casting rules. Compiled kernels use the GPU's conversion instructions where they implement those
  rules exactly (:func:`_cvt`: one ``cvt.rn.bf16x2.f32`` per two bfloat16 results instead of ~8 integer
  instructions each, which made relu and friends ALU-bound on the H200); the interpreter tier keeps the bit
  formulas, and the GPU tier's cast tests check both against the rules bit for bit.
- **IEEE float32** as PyTorch's CUDA kernels: compiled with :data:`~.triton_helpers.IEEE_OPTIONS` (libdevice
  without flush-to-zero); bodies divide with :func:`~.triton_helpers.div_rn` and clamp with NaN-propagating
  maxima and minima. Outputs of 16-bit floats may take a ``fast`` body instead (:func:`launch_pointwise`;
  ops/activation.py): float32 within a few ulp, which rounds to the same float16/bfloat16 values except next
  to rounding ties. An op may also carry an alternative body (:class:`Alt`) behind its own config key
  (``ALT_<OP>``, default off): cheaper instruction sequences whose results differ from the default body's within
  the tolerance table, for the sweeps to time before the table turns one on.
- **Schedule** from the config table (``BLOCK``, ``num_warps``, ``EVICT``, ``programs_per_sm``: see
  :func:`launch_pointwise`; benchmarks/sweep_pointwise.py times candidates on the GPU).
- Zero-size outputs launch nothing (the dispatcher returns before calling the implementation).

Scalar parameters travel as float64 (``P*``) and int64 (``Q*``) kernel arguments so that a float64 op sees
its scalars unrounded; the kernel converts them to the compute dtype. Triton's interpreter ignores argument
annotations (a Python float would arrive as float32), so under the interpreter they are handed over as typed
interpreter tensors (:func:`_scalar_args`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from ..dtypes import table as T
from ..dtypes.casting import cast_array
from ..dtypes.table import DType
from ..runtime import configs as _cfg
from ..runtime.configs import launch_config
from ..runtime.launcher import Tail, launch, launch_tail
from ..runtime.pdl import enter as pdl_enter
from ..runtime.pdl import settings as pdl_settings
from ..runtime.triton_compat import INTERPRET, jit, tl
from ..tensor.core import Tensor, host_view
from .triton_helpers import TL_DTYPES, convert, ieee_options
from . import fast_math16 as _M16

__all__ = ["MAX_RANK", "NARROW", "Alt", "collapse", "make", "numpy_impl", "tl_dtype", "compute_tl",
           "launch_pointwise"]

MAX_RANK = 5
_I32_LIMIT = 2 ** 31
# Outputs whose rounding (8 or 11 significant bits) hides a few ulp of float32 error: the ``fast`` bodies serve them.
NARROW = (T.bfloat16, T.float16)


class Alt:
    """An op's alternative ``@jit`` body behind config key ``key`` (``"ALT_RSQRT"``; default off), used where the
    kernel computes in float32 (float32, float16 and bfloat16 results), or only for 16-bit float results when
    ``narrow`` (bodies whose float32 error exceeds float32's tolerance but disappears in a 16-bit rounding).
    ``body2``, where given, is the body at key value 2 (``ALT_POW: 2``), under the same conditions."""

    __slots__ = ("key", "body", "narrow", "body2")

    def __init__(self, key: str, body, narrow: bool = False, body2=None):
        assert key.startswith("ALT_"), key
        self.key, self.body, self.narrow, self.body2 = key, body, narrow, body2


def tl_dtype(d: DType):
    """Triton's dtype for a row of the table."""
    return TL_DTYPES[d.name]


def compute_tl(d: DType):
    """The Triton dtype kernels compute in for compute dtype ``d``: float32 for 16- and 8-bit floats (their
    arithmetic is not implemented by Triton's interpreter, and PyTorch computes them in float32 anyway)."""
    if d in (T.float16, T.bfloat16, T.float8_e4m3fn, T.float8_e5m2):
        return tl.float32
    return tl_dtype(d)


# ---------------------------------------------------------------------------------------------------------
# Host side: rank collapse
# ---------------------------------------------------------------------------------------------------------
def collapse(shape: Sequence[int], strides: Sequence[Sequence[int]]) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Drop size-1 dims and merge adjacent dims that every operand traverses contiguously.

    Args:
        shape: the common (output) shape.
        strides: one stride tuple per operand, each of ``len(shape)`` (stride 0 for broadcast dims).

    Returns:
        ``(shape, strides)`` of the same elements in the same row-major order, with the fewest dims: dims
        ``i`` and ``i+1`` merge when for every operand ``stride[i] == stride[i+1] * shape[i+1]``. A shape
        with one element collapses to ``(1,)``.
    """
    keep = [i for i, s in enumerate(shape) if s != 1]
    if not keep:
        return (1,), [(0,) for _ in strides]
    sh = [shape[i] for i in keep]
    st = [[s[i] for i in keep] for s in strides]
    out_sh = [sh[-1]]
    out_st = [[s[-1]] for s in st]
    for d in range(len(sh) - 2, -1, -1):
        inner = out_sh[0]
        if all(s[d] == o[0] * inner for s, o in zip(st, out_st)):
            out_sh[0] *= sh[d]
        else:
            out_sh.insert(0, sh[d])
            for s, o in zip(st, out_st):
                o.insert(0, s[d])
    return tuple(out_sh), [tuple(o) for o in out_st]


def _scalar_args(fvals: Sequence[float], ivals: Sequence[int]) -> tuple[list, list]:
    """float64 / int64 scalar kernel arguments; typed interpreter tensors under the interpreter tier."""
    if not INTERPRET:
        return [float(v) for v in fvals], [int(v) for v in ivals]
    from triton.runtime.interpreter import TensorHandle
    f = [tl.tensor(TensorHandle(np.array([v], dtype=np.float64), tl.float64), tl.float64) for v in fvals]
    i = [tl.tensor(TensorHandle(np.array([v], dtype=np.int64), tl.int64), tl.int64) for v in ivals]
    return f, i


def _max_offset(shape, stride) -> int:
    return sum((s - 1) * abs(st) for s, st in zip(shape, stride))


# ---------------------------------------------------------------------------------------------------------
# Device side
# ---------------------------------------------------------------------------------------------------------
@jit
def _index(pid, BLOCK: tl.constexpr, I64: tl.constexpr):
    if I64:
        # (+ a 0-d zero rather than .to: the interpreter's persistent loops hand over Python ints)
        idx = (pid + tl.zeros((), tl.int64)) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        idx = pid * BLOCK + tl.arange(0, BLOCK)
    return idx


@jit
def _coords(idx, S1, S2, S3, S4, RANK: tl.constexpr):
    # Row-major coordinates of the linear index over the last RANK of 5 (left-padded) dims.
    c0 = idx * 0
    c1 = idx * 0
    c2 = idx * 0
    c3 = idx * 0
    if RANK <= 1:
        c4 = idx
    else:
        c4 = idx % S4
        t = idx // S4
        if RANK == 2:
            c3 = t
        else:
            c3 = t % S3
            t = t // S3
            if RANK == 3:
                c2 = t
            else:
                c2 = t % S2
                t = t // S2
                if RANK == 4:
                    c1 = t
                else:
                    c1 = t % S1
                    c0 = t // S1
    return c0, c1, c2, c3, c4


@jit
def _offset(c0, c1, c2, c3, c4, t0, t1, t2, t3, t4, RANK: tl.constexpr):
    off = c4 * t4
    if RANK >= 2:
        off += c3 * t3
    if RANK >= 3:
        off += c2 * t2
    if RANK >= 4:
        off += c1 * t1
    if RANK >= 5:
        off += c0 * t0
    return off


@jit
def _cvt(x, DT: tl.constexpr, HW: tl.constexpr):
    """:func:`~.triton_helpers.convert` (the casting rules, bit-exact on both tiers), except that with ``HW`` (the
    compiled tier) the conversions the GPU implements exactly by those rules use its instructions:

    - float32 -> bfloat16: ``cvt.rn.bf16x2.f32`` (one F2FP per two elements; round to nearest even, subnormals
      kept, overflow to inf; a NaN becomes the canonical NaN, as PyTorch's CUDA ``__float2bfloat16``) instead
      of the 8 integer instructions per element of the bit formula;
    - float32 -> float8_e4m3fn: ``cvt.rn.satfinite.e4m3x2.f32`` (nearest even; beyond +-448 and +-inf saturate
      to +-448; NaN stays NaN: the casting rule);
    - float32 -> float8_e5m2: ``cvt.rn.satfinite.e5m2x2.f32`` with its saturation undone: magnitudes from
      61440 (the tie above 57344, which rounds to even, i.e. up) and inf become inf, as the casting rule says;
    - float8_e4m3fn -> float32: ``cvt.rn.f16x2.e4m3x2`` then an exact widening.

    Other sources reach these targets through :func:`convert` to float32 first (exactly as ``convert`` does:
    float64 and integers round twice, as PyTorch). Triton's interpreter rounds these conversions differently,
    so the interpreter tier always takes the bit formulas (``HW`` false).
    """
    ST: tl.constexpr = x.dtype
    if HW and ST != DT and (DT == tl.bfloat16 or DT == tl.float8e4nv or DT == tl.float8e5):
        if ST == tl.float32:
            f = x
        elif ST == tl.float8e4nv:
            f = x.to(tl.float32)
        else:
            f = convert(x, tl.float32)
        if DT == tl.bfloat16:
            r = f.to(tl.bfloat16)
        elif DT == tl.float8e4nv:
            r = f.to(tl.float8e4nv)
        else:
            v = f.to(tl.float8e5).to(tl.uint8, bitcast=True)
            inf = tl.where(f < 0, 0xFC, 0x7C).to(tl.uint8)
            r = tl.where(tl.abs(f) >= 61440.0, inf, v).to(tl.float8e5, bitcast=True)
    elif HW and ST == tl.float8e4nv and DT == tl.float32:
        r = x.to(tl.float32)
    else:
        r = convert(x, DT)
    return r


@jit
def _load(ptr, idx, mask, c0, c1, c2, c3, c4, t0, t1, t2, t3, t4, F, I, MODE: tl.constexpr, RANK: tl.constexpr,
          CT: tl.constexpr, RAW: tl.constexpr, BLOCK: tl.constexpr, HW: tl.constexpr, EVICT: tl.constexpr):
    if MODE == 0:
        if EVICT >= 1:
            x = tl.load(ptr + idx, mask=mask, eviction_policy="evict_first")
        else:
            x = tl.load(ptr + idx, mask=mask)
    elif MODE == 1:
        x = tl.load(ptr + _offset(c0, c1, c2, c3, c4, t0, t1, t2, t3, t4, RANK), mask=mask)
    else:
        if CT == tl.int1:
            x = (tl.full([BLOCK], 0, tl.int8) + I.to(tl.int8)) != 0
        elif CT.is_floating():  # splat by 1 * F, exact for every value: 0 + F would turn a -0.0 into +0.0
            x = tl.full([BLOCK], 1, CT) * F.to(CT)
        else:
            x = tl.full([BLOCK], 0, CT) + I.to(CT)
    if not RAW:
        x = _cvt(x, CT, HW)
    return x


@jit
def _param(P, Q, CT: tl.constexpr, BLOCK: tl.constexpr):
    # Splat to a block: the compiler folds it, and the interpreter mishandles some ops on 0-d scalars.
    if CT == tl.int1:
        r = tl.full([BLOCK], 0, tl.int8) + Q.to(tl.int8)
        r = r != 0
    elif CT.is_floating():  # 1 * P keeps a -0.0 parameter's sign (0 + P would not)
        r = tl.full([BLOCK], 1, CT) * P.to(CT)
    else:
        r = tl.full([BLOCK], 0, CT) + Q.to(CT)
    return r


@jit
def _store(ptr, r, idx, mask, c0, c1, c2, c3, c4, t0, t1, t2, t3, t4, MODE: tl.constexpr, RANK: tl.constexpr,
           HW: tl.constexpr, EVICT: tl.constexpr):
    v = _cvt(r, ptr.dtype.element_ty, HW)
    if MODE == 0:
        if EVICT >= 2:
            tl.store(ptr + idx, v, mask=mask, cache_modifier=".cs")
        else:
            tl.store(ptr + idx, v, mask=mask)
    else:
        tl.store(ptr + _offset(c0, c1, c2, c3, c4, t0, t1, t2, t3, t4, RANK), v, mask=mask)


@jit
def _tile1(pid, OUT, X0, F0, I0, P0, P1, P2, Q0, Q1, Q2, N, S1, S2, S3, S4, o0, o1, o2, o3, o4, a0, a1, a2, a3, a4,
           BODY: tl.constexpr, CT: tl.constexpr, RANK: tl.constexpr, OM: tl.constexpr, M0: tl.constexpr,
           RAW: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr, HW: tl.constexpr, EVICT: tl.constexpr):
    idx = _index(pid, BLOCK, I64)
    mask = idx < N
    c0, c1, c2, c3, c4 = _coords(idx, S1, S2, S3, S4, RANK)
    x0 = _load(X0, idx, mask, c0, c1, c2, c3, c4, a0, a1, a2, a3, a4, F0, I0, M0, RANK, CT, RAW & 1, BLOCK, HW, EVICT)
    r = BODY(x0, _param(P0, Q0, CT, BLOCK), _param(P1, Q1, CT, BLOCK), _param(P2, Q2, CT, BLOCK))
    _store(OUT, r, idx, mask, c0, c1, c2, c3, c4, o0, o1, o2, o3, o4, OM, RANK, HW, EVICT)


@jit
def _pw1(OUT, X0, F0: tl.float64, I0: tl.int64, P0: tl.float64, P1: tl.float64, P2: tl.float64,
         Q0: tl.int64, Q1: tl.int64, Q2: tl.int64, N, S1, S2, S3, S4, o0, o1, o2, o3, o4, a0, a1, a2, a3, a4,
         BODY: tl.constexpr, CT: tl.constexpr, RANK: tl.constexpr, OM: tl.constexpr, M0: tl.constexpr,
         RAW: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr,
         HW: tl.constexpr, EVICT: tl.constexpr, PERSIST: tl.constexpr, PDL: tl.constexpr = False):
    pdl_enter(PDL)
    if PERSIST:  # a grid of programs_per_sm x SMs programs, each looping over tiles pid, pid + grid, ...
        for t in range(tl.program_id(0), tl.cdiv(N, BLOCK), tl.num_programs(0)):
            _tile1(t, OUT, X0, F0, I0, P0, P1, P2, Q0, Q1, Q2, N, S1, S2, S3, S4, o0, o1, o2, o3, o4, a0, a1, a2, a3,
                   a4, BODY, CT, RANK, OM, M0, RAW, I64, BLOCK, HW, EVICT)
    else:
        _tile1(tl.program_id(0), OUT, X0, F0, I0, P0, P1, P2, Q0, Q1, Q2, N, S1, S2, S3, S4, o0, o1, o2, o3, o4, a0,
               a1, a2, a3, a4, BODY, CT, RANK, OM, M0, RAW, I64, BLOCK, HW, EVICT)


@jit
def _tile2(pid, OUT, X0, X1, F0, I0, F1, I1, P0, P1, P2, Q0, Q1, Q2, N, S1, S2, S3, S4, o0, o1, o2, o3, o4,
           a0, a1, a2, a3, a4, b0, b1, b2, b3, b4, BODY: tl.constexpr, CT: tl.constexpr, RANK: tl.constexpr,
           OM: tl.constexpr, M0: tl.constexpr, M1: tl.constexpr, RAW: tl.constexpr, I64: tl.constexpr,
           BLOCK: tl.constexpr, HW: tl.constexpr, EVICT: tl.constexpr):
    idx = _index(pid, BLOCK, I64)
    mask = idx < N
    c0, c1, c2, c3, c4 = _coords(idx, S1, S2, S3, S4, RANK)
    x0 = _load(X0, idx, mask, c0, c1, c2, c3, c4, a0, a1, a2, a3, a4, F0, I0, M0, RANK, CT, RAW & 1, BLOCK, HW, EVICT)
    x1 = _load(X1, idx, mask, c0, c1, c2, c3, c4, b0, b1, b2, b3, b4, F1, I1, M1, RANK, CT, RAW & 2, BLOCK, HW, EVICT)
    r = BODY(x0, x1, _param(P0, Q0, CT, BLOCK), _param(P1, Q1, CT, BLOCK), _param(P2, Q2, CT, BLOCK))
    _store(OUT, r, idx, mask, c0, c1, c2, c3, c4, o0, o1, o2, o3, o4, OM, RANK, HW, EVICT)


@jit
def _pw2(OUT, X0, X1, F0: tl.float64, I0: tl.int64, F1: tl.float64, I1: tl.int64, P0: tl.float64,
         P1: tl.float64, P2: tl.float64, Q0: tl.int64, Q1: tl.int64, Q2: tl.int64, N, S1, S2, S3, S4,
         o0, o1, o2, o3, o4, a0, a1, a2, a3, a4, b0, b1, b2, b3, b4,
         BODY: tl.constexpr, CT: tl.constexpr, RANK: tl.constexpr, OM: tl.constexpr, M0: tl.constexpr,
         M1: tl.constexpr, RAW: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr,
         HW: tl.constexpr, EVICT: tl.constexpr, PERSIST: tl.constexpr, PDL: tl.constexpr = False):
    pdl_enter(PDL)
    if PERSIST:
        for t in range(tl.program_id(0), tl.cdiv(N, BLOCK), tl.num_programs(0)):
            _tile2(t, OUT, X0, X1, F0, I0, F1, I1, P0, P1, P2, Q0, Q1, Q2, N, S1, S2, S3, S4, o0, o1, o2, o3, o4,
                   a0, a1, a2, a3, a4, b0, b1, b2, b3, b4, BODY, CT, RANK, OM, M0, M1, RAW, I64, BLOCK, HW, EVICT)
    else:
        _tile2(tl.program_id(0), OUT, X0, X1, F0, I0, F1, I1, P0, P1, P2, Q0, Q1, Q2, N, S1, S2, S3, S4, o0, o1, o2,
               o3, o4, a0, a1, a2, a3, a4, b0, b1, b2, b3, b4, BODY, CT, RANK, OM, M0, M1, RAW, I64, BLOCK, HW, EVICT)


@jit
def _tile3(pid, OUT, X0, X1, X2, F0, I0, F1, I1, F2, I2, P0, P1, P2, Q0, Q1, Q2, N, S1, S2, S3, S4,
           o0, o1, o2, o3, o4, a0, a1, a2, a3, a4, b0, b1, b2, b3, b4, d0, d1, d2, d3, d4, BODY: tl.constexpr,
           CT: tl.constexpr, RANK: tl.constexpr, OM: tl.constexpr, M0: tl.constexpr, M1: tl.constexpr,
           M2: tl.constexpr, RAW: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr, HW: tl.constexpr,
           EVICT: tl.constexpr):
    idx = _index(pid, BLOCK, I64)
    mask = idx < N
    c0, c1, c2, c3, c4 = _coords(idx, S1, S2, S3, S4, RANK)
    x0 = _load(X0, idx, mask, c0, c1, c2, c3, c4, a0, a1, a2, a3, a4, F0, I0, M0, RANK, CT, RAW & 1, BLOCK, HW, EVICT)
    x1 = _load(X1, idx, mask, c0, c1, c2, c3, c4, b0, b1, b2, b3, b4, F1, I1, M1, RANK, CT, RAW & 2, BLOCK, HW, EVICT)
    x2 = _load(X2, idx, mask, c0, c1, c2, c3, c4, d0, d1, d2, d3, d4, F2, I2, M2, RANK, CT, RAW & 4, BLOCK, HW, EVICT)
    r = BODY(x0, x1, x2, _param(P0, Q0, CT, BLOCK), _param(P1, Q1, CT, BLOCK), _param(P2, Q2, CT, BLOCK))
    _store(OUT, r, idx, mask, c0, c1, c2, c3, c4, o0, o1, o2, o3, o4, OM, RANK, HW, EVICT)


@jit
def _pw3(OUT, X0, X1, X2, F0: tl.float64, I0: tl.int64, F1: tl.float64, I1: tl.int64, F2: tl.float64,
         I2: tl.int64, P0: tl.float64, P1: tl.float64, P2: tl.float64, Q0: tl.int64, Q1: tl.int64, Q2: tl.int64,
         N, S1, S2, S3, S4, o0, o1, o2, o3, o4, a0, a1, a2, a3, a4, b0, b1, b2, b3, b4, d0, d1, d2, d3, d4,
         BODY: tl.constexpr, CT: tl.constexpr, RANK: tl.constexpr, OM: tl.constexpr, M0: tl.constexpr,
         M1: tl.constexpr, M2: tl.constexpr, RAW: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr,
         HW: tl.constexpr, EVICT: tl.constexpr, PERSIST: tl.constexpr, PDL: tl.constexpr = False):
    pdl_enter(PDL)
    if PERSIST:
        for t in range(tl.program_id(0), tl.cdiv(N, BLOCK), tl.num_programs(0)):
            _tile3(t, OUT, X0, X1, X2, F0, I0, F1, I1, F2, I2, P0, P1, P2, Q0, Q1, Q2, N, S1, S2, S3, S4, o0, o1, o2,
                   o3, o4, a0, a1, a2, a3, a4, b0, b1, b2, b3, b4, d0, d1, d2, d3, d4, BODY, CT, RANK, OM, M0, M1, M2,
                   RAW, I64, BLOCK, HW, EVICT)
    else:
        _tile3(tl.program_id(0), OUT, X0, X1, X2, F0, I0, F1, I1, F2, I2, P0, P1, P2, Q0, Q1, Q2, N, S1, S2, S3, S4,
               o0, o1, o2, o3, o4, a0, a1, a2, a3, a4, b0, b1, b2, b3, b4, d0, d1, d2, d3, d4, BODY, CT, RANK, OM, M0,
               M1, M2, RAW, I64, BLOCK, HW, EVICT)


_KERNELS = {1: _pw1, 2: _pw2, 3: _pw3}


@lru_cache(maxsize=None)
def _sm_count_of(index: int) -> int:
    from .. import cuda
    return int(cuda.get_device_properties(index).multi_processor_count)


def _sm_count(device) -> int:
    """Streaming multiprocessors of ``device`` (4 under the interpreter, so that a persistent grid still loops)."""
    return 4 if device.type == "cpu" else _sm_count_of(device.index or 0)


def launch_pointwise(body, out: Tensor, inputs: Sequence, compute: DType, pvals: Sequence = (), *,
                     raw: int = 0, op: str = "pointwise", fast=None, alt: Alt | None = None) -> None:
    """Launch ``body`` over ``out`` (any strides) and ``inputs`` (tensors of ``out.shape``, any strides, or
    scalars), computing in ``compute`` (opmath applied here) with up to three scalar parameters ``pvals``.

    Args:
        raw: bit ``i`` set keeps operand ``i`` in its loaded dtype (bool masks of ``where``) instead of
            converting it to the compute dtype.
        op: the launch-config table entry (``runtime/configs/*.json``).
        fast: a second body for outputs of 16-bit floats (see :data:`NARROW`), computed in float32 with a few
            ulp of float32 error instead of nvcc's correctly rounded division and libdevice's full-range
            functions; the launch config's ``FAST`` (default 1) turns it off for sweeps.
            ``FAST_MATH16`` (default 0) puts ops/fast_math16.py's body for ``body`` in this slot, if it has one.
        alt: the op's :class:`Alt`, taken (before ``fast``) when the launch config sets its key; every ``ALT_*``
            key of the config is consumed here, whichever op it names.

    Launch settings read from the config table besides ``BLOCK`` and the compile options: ``HW_CVT``
    (default on for compiled kernels: the GPU's conversion instructions where they are exact, see
    :func:`_cvt`), ``EVICT`` (0 none; 1 ``evict_first`` on the contiguous loads; 2 also streaming ``.cs``
    stores), ``FAST`` and ``programs_per_sm`` (0: one program per tile; k: a persistent grid of k programs per
    SM looping over the tiles, where that is fewer programs than tiles). (Tried and removed in session 6: a
    ``PREFETCH`` key loading tile t + grid before computing tile t; on the H200 the ops below 85 % moved by -2 to
    +2 %: they are short of issue slots, not of loads in flight.)

    Everything but the operands' addresses and scalar values is a function of the layouts, dtypes and config
    state, so it is planned once per key (:func:`_plan_key`) and a repeated call only assembles its arguments.
    """
    key = _plan_key(body, out, inputs, compute, pvals, raw, op, fast, alt)
    plan = _PLANS.get(key)
    if plan is not None:
        kernel, grid, tail, is_float, folded = plan
        if folded is not None and out._storage.device.type == "cuda":
            # no scalar operands: with the parameter values keyed too, every argument after the pointers is a
            # constant of the plan, so the launcher keys the whole tail by identity (3 pointers left per call)
            ck = _const_key(pvals)
            if ck is not None:
                t = folded.get(ck)
                if t is None:
                    if len(folded) >= 16:
                        folded.clear()
                    t = folded[ck] = Tail((*_operand_args(inputs, pvals, is_float)[len(inputs):], *tail.args),
                                          tail.meta)
                launch_tail(kernel, grid, (out, *inputs), t)
                return
        _launch_planned(kernel, grid, (out, *_operand_args(inputs, pvals, is_float)), tail)
        return
    n = len(inputs)
    kernel = _KERNELS[n]
    shape = tuple(out.shape)
    tensors = [x for x in inputs if isinstance(x, Tensor)]
    all_strides = [out.stride()] + [x.stride() for x in tensors]
    cshape, cstrides = collapse(shape, all_strides)
    if len(cshape) > MAX_RANK:
        # Split over the outermost dim and recurse (layouts deeper than MAX_RANK after collapsing are rare).
        for i in range(shape[0]):
            launch_pointwise(body, out.select(0, i), [x.select(0, i) if isinstance(x, Tensor) else x for x in inputs],
                             compute, pvals, raw=raw, op=op, fast=fast, alt=alt)
        return
    rank = len(cshape)
    numel = out.numel()
    contig_out = out.is_contiguous()
    modes, it = [], iter(cstrides[1:])
    for x in inputs:
        if isinstance(x, Tensor):
            st = next(it)
            modes.append(0 if (x.is_contiguous() and contig_out) else 1)
        else:
            modes.append(2)
    om = 0 if contig_out else 1
    strided = om == 1 or 1 in modes
    i64 = numel + 1 >= _I32_LIMIT or any(_max_offset(cshape, s) >= _I32_LIMIT for s in cstrides)
    pad = MAX_RANK - rank
    sizes = (1,) * pad + cshape
    padded = [(0,) * pad + s for s in cstrides]
    ct = compute_tl(compute)
    is_float = compute.kind == T.KIND_FLOAT
    strd = []
    it = iter(padded[1:])
    for x in inputs:
        strd.extend(next(it) if isinstance(x, Tensor) else (0,) * MAX_RANK)
    cfg = launch_config(op, out.device, dtypes=(out.dtype,), numel=numel)
    block = cfg.pop("BLOCK")
    level = int(cfg.pop(_M16.KEY, 0))
    if level and _M16.math16_body(body, level) is not None:  # ops/fast_math16.py (16-bit outputs only)
        fast = _M16.math16_body(body, level)
    alt_value = 0
    for k in [k for k in cfg if k.startswith("ALT_")]:
        v = int(cfg.pop(k))
        if alt is not None and k == alt.key:
            alt_value = v
    f32 = compute_tl(compute) == tl.float32
    if cfg.pop("FAST", 1) and fast is not None and out.dtype in NARROW and f32:
        body = fast
    if alt_value and f32 and (not alt.narrow or out.dtype in NARROW):
        body = alt.body2 if alt_value == 2 and alt.body2 is not None else alt.body
    hw = bool(cfg.pop("HW_CVT", not INTERPRET)) and not INTERPRET
    evict = int(cfg.pop("EVICT", 0))
    cfg.pop("CAST_VEC", None)  # the copy rule's key for ops/cast.py's contiguous kernel
    cfg.update(pdl_settings(cfg, out.device))
    tiles = (numel + block - 1) // block
    pps = int(cfg.pop("programs_per_sm", 0) or 0)
    persist = 0 < pps and pps * _sm_count(out.device) < tiles
    grid = (pps * _sm_count(out.device) if persist else tiles,)
    tail = Tail((numel, *sizes[1:], *padded[0], *strd),
                dict(BODY=body, CT=ct, RANK=rank if strided else 0, OM=om, **{f"M{k}": m for k, m in enumerate(modes)},
                     RAW=raw, I64=i64, BLOCK=block, HW=hw, EVICT=evict, PERSIST=persist, **cfg, **ieee_options()))
    if len(_PLANS) >= _MAX_PLANS:
        _PLANS.clear()
    _PLANS[key] = (kernel, grid, tail, is_float, {} if all(x.__class__ is Tensor for x in inputs) else None)
    _launch_planned(kernel, grid, (out, *_operand_args(inputs, pvals, is_float)), tail)


def _const_key(pvals: Sequence):
    """``pvals`` as a key of folded tails, or None where equal keys could mean different kernel arguments (a
    signed zero, a NaN) or a value is not a Python number."""
    for v in pvals:
        t = v.__class__
        if not (t is int or t is bool or (t is float and v == v and v != 0.0)):
            return None
    return tuple(pvals)


def _launch_planned(kernel, grid, args: tuple, tail: Tail) -> None:
    # CUDA: the launcher's planned-tail path; elsewhere (the interpreter tier, tests that capture launches) this
    # module's ``launch``.
    if args[0]._storage.device.type == "cuda":
        launch_tail(kernel, grid, args, tail)
    else:
        launch(kernel, grid, *args, *tail.args, **tail.meta)


_PLANS: dict = {}
_MAX_PLANS = 4096


def _plan_key(body, out: Tensor, inputs: Sequence, compute: DType, pvals: Sequence, raw: int, op: str, fast,
              alt=None) -> tuple:
    """What a launch's plan depends on: the bodies (by identity: the plan holds them, so an id is never reused
    while its plan lives), op, raw bits, compute dtype, parameter count, the output's and each tensor operand's
    dtype, shape and strides (2 marks a scalar operand), the device, and the launch-config state (architecture
    lookup, overrides, and the ``launch_config`` this module calls: tests replace it). Addresses (storage offsets
    included) and scalar values are per-call arguments."""
    dev = out._storage.device
    key = (id(body), id(fast), id(alt), op, raw, compute, len(pvals), out._dtype, out._shape, out._stride, dev.type,
           dev.index, _cfg.arch_of, _cfg._GEN, launch_config)
    for x in inputs:
        key += (x._dtype, x._shape, x._stride) if x.__class__ is Tensor else (2,)
    return key


def _operand_args(inputs: Sequence, pvals: Sequence, is_float: bool) -> list:
    """The per-call kernel arguments after ``OUT``: operand pointers (``None`` for a scalar operand), each
    operand's ``(F, I)`` scalar pair, then ``P0..P2`` and ``Q0..Q2`` (float64 / int64 kernel arguments)."""
    ptrs, f, i = [], [], []
    for x in inputs:
        if x.__class__ is Tensor:
            ptrs.append(x)
            f.append(0.0)
            i.append(0)
        else:
            ptrs.append(None)
            v = x.item() if isinstance(x, np.generic) else x
            f.append(float(v) if is_float else 0.0)
            i.append(0 if is_float else int(v))
    if is_float:
        f += [float(v) for v in pvals]
        f += _PAD_F[len(pvals)]
        i += _PAD_I[0]
    else:
        f += _PAD_F[0]
        i += [int(v) for v in pvals]
        i += _PAD_I[len(pvals)]
    if INTERPRET:
        f, i = _scalar_args(f, i)
    n = len(inputs)
    scal = [None] * (2 * n)
    scal[::2] = f[:n]
    scal[1::2] = i[:n]
    return ptrs + scal + f[n:] + i[n:]


_PAD_F = ((0.0, 0.0, 0.0), (0.0, 0.0), (0.0,), ())   # zero parameters after the given ones
_PAD_I = ((0, 0, 0), (0, 0), (0,), ())


def make(body, *, params: Sequence[str] = (), raw: int = 0, op: str = "pointwise",
         compute: Callable | None = None, fast=None, alt: Alt | None = None) -> Callable:
    """The ``triton`` implementation of a pointwise op from its scalar ``body``.

    Args:
        body: ``@jit`` function ``body(*operands, p0, p1, p2)``.
        params: names of the dispatcher's ``params`` passed as ``p0, p1, p2`` (numbers; converted to the
            compute dtype in the kernel).
        raw: see :func:`launch_pointwise`.
        compute: ``compute(prom) -> DType`` overriding ``prom.compute`` (``isclose`` compares integers in the
            default float dtype).
        fast: the body for 16-bit float outputs (see :func:`launch_pointwise`).
        alt: the op's alternative body behind a config key (:class:`Alt`).

    Returns:
        ``impl(out, inputs, prom, params)`` for :func:`nbxtensor.ops.dispatch.pointwise`.
    """
    names = tuple(params)

    def impl(out, inputs, prom, prm):
        ct = compute(prom) if compute is not None else prom.compute
        launch_pointwise(body, out, inputs, ct, [prm[k] for k in names], raw=raw, op=op, fast=fast, alt=alt)

    impl.body = body
    impl.fast = fast
    impl.alt = alt
    return impl


# ---------------------------------------------------------------------------------------------------------
# The cpu counterpart
# ---------------------------------------------------------------------------------------------------------
def numpy_impl(fn: Callable, *, raw: int = 0, compute: Callable | None = None) -> Callable:
    """The ``cpu`` implementation of a pointwise op from a NumPy function ``fn(*arrays, **params)``.

    Operands are converted to the compute dtype (``compute(prom)`` if given, else ``prom.compute``; raw
    operands keep their dtype), ``fn`` runs with floating-point warnings silenced, and its result is cast
    to the output's dtype by :func:`nbxtensor.dtypes.casting.cast_array` (rounding once) and written into
    ``out``'s memory (any strides).
    """

    def impl(out, inputs, prom, params):
        ct = compute(prom) if compute is not None else prom.compute
        arrs = []
        for k, x in enumerate(inputs):
            if x is None:
                arrs.append(None)
            elif isinstance(x, Tensor):
                a = host_view(x)
                arrs.append(a if (raw >> k) & 1 or x.dtype is ct else cast_array(a, x.dtype, ct))
            else:
                arrs.append(np.asarray(x, dtype=ct.numpy))
        with np.errstate(all="ignore"):
            r = np.asarray(fn(*arrs, **params))
        src = T.from_numpy_dtype(r.dtype)
        host_view(out)[...] = r if src is out.dtype else cast_array(r, src, out.dtype)

    impl.fn = fn
    return impl


# ---------------------------------------------------------------------------------------------------------
# Cost and declaration helpers shared by the elementwise families
# ---------------------------------------------------------------------------------------------------------
def cost(flops_per_element: int = 1) -> Callable:
    """A pointwise cost declaration: ``cost(out_shape, out_dtype, inputs)`` where ``inputs`` lists
    ``(shape, dtype)`` of the tensor operands before broadcasting (scalars omitted).

    Each input byte is read once (a broadcast operand's repeats are served from cache), each output byte
    written once; ``flops_per_element`` per output element (comparisons and moves count 1)."""
    from .registry import Cost

    def _cost(out_shape, out_dtype, inputs=()) -> Cost:
        n = 1
        for s in out_shape:
            n *= s
        read = 0
        for shape, dt in inputs:
            k = 1
            for s in shape:
                k *= s
            read += k * dt.itemsize
        return Cost(flops=n * flops_per_element, bytes_read=read, bytes_written=n * out_dtype.itemsize)

    _cost.flops_per_element = flops_per_element
    return _cost


def declare(name: str, schema: str, *, family: str, cpu: Callable, oracle: Callable | None, body=None,
            triton: Callable | None = None, params: Sequence[str] = (), raw: int = 0, flops: int = 1,
            oracle_note: str = "", compute: Callable | None = None, fast=None, alt: Alt | None = None, **extra):
    """Register a pointwise op: one record holding the schema, the NumPy and Triton implementations made from
    ``cpu`` (a NumPy function) and ``body`` (a ``@jit`` scalar body), the oracle, the cost and ``extra``
    fields. Dispatch reads ``schema``, ``promotion``, ``promote``, ``dtypes``, ``prepare``, ``driver``,
    ``method``, ``inplace``, ``dunders``, ``namespaces``, ``aliases`` (see :mod:`.dispatch`). The generated tests
    read:

    - ``domain``: where test inputs come from (``positive`` for log, ``unit`` for asin, ``divisor`` keeps the
      second operand nonzero, ``shift`` keeps shift counts in range, ...);
    - ``param_cases``: parameter sets to test (``[{}, {"alpha": 2}]``);
    - ``errors``: error inputs as data, ``(build(nbx) -> args, kwargs, exception type, message regex)``, checked
      by one generic test (and against PyTorch in the parity suite); ``cpu_only_errors`` names messages only the
      ``cpu`` device raises (kernels cannot raise);
    - ``refused``: dtypes inside ``dtypes`` that the op refuses with PyTorch's own message (``neg`` of bool);
    - ``tolerance``: ``{"extra_atol": f(*inputs) -> array, "reason": ...}`` widening the table's atol by
      ``rtol * extra_atol`` where the rounding error scales with the inputs, not the result (cancellation);
    - ``scalar_operands``: operands tested as Python scalars (``masked_fill``'s value);
    - ``parity_exclude`` / ``parity_superset``: inputs or dtypes where PyTorch's CPU result is an artifact or a
      refusal that nbxtensor deliberately does not copy, each with its reason.
    """
    from .registry import OpRecord, register
    rec = OpRecord(name=name, family=family, cpu=numpy_impl(cpu, raw=raw, compute=compute),
                   triton=triton if triton is not None else (make(body, params=params, raw=raw, compute=compute,
                                                                  fast=fast, alt=alt)
                                                             if body is not None else None),
                   cost=cost(flops), oracle=oracle, oracle_note=oracle_note,
                   extra=dict(schema=schema, kind="pointwise", raw=raw, **extra))
    return register(rec)
