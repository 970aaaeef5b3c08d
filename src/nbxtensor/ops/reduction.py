"""Reductions: sum, nansum, mean, nanmean, prod, amax, amin, aminmax, max/min (with indices), argmax, argmin, all,
any, count_nonzero, var, std, var_mean, std_mean, logsumexp, vector_norm and norm.

Semantics are PyTorch's (names, arguments, defaults, result dtypes, ``out=``, empty reductions, NaN): dims are an
int, a tuple/list or ``None`` (all dims; ``()``/``[]`` also mean all dims, as PyTorch); ``keepdim`` keeps reduced
dims with size 1; ``dtype=`` converts the input before reducing. Empty reductions give PyTorch's identities (sum
0, prod 1, mean/var NaN, all True, any False, logsumexp -inf, vector_norm 0) or raise where there is none
(amax, argmax, max(dim), aminmax, inf-norms: ``IndexError``/``RuntimeError`` as PyTorch).

**Canonical form** (:func:`canonical3`, after CuPy's ``reduce_dims``): size-1 dims are dropped, the others sorted
by decreasing |stride| (memory order) and adjacent dims of the same kind (reduced or kept) merged where they are
contiguous with each other. Any layout whose groups read ``kept? reduced? kept?`` becomes one
``(outer, reduced, inner)`` strided view with one stride per group; other layouts (kept dims interleaved between
reduced ones in memory) are first copied to ``(kept..., reduced...)`` order. Two Triton kernels cover every case:

- ``_reduce_rows_kernel`` (``inner == 1``: the reduced axis is the innermost group): tiles of
  ``[BLOCK_M rows, BLOCK_R]`` along the reduced axis;
- ``_reduce_cols_kernel`` (``inner > 1``: the reduced axis is strided): tiles of ``[BLOCK_R, BLOCK_I]`` where
  lanes run along the contiguous inner axis, so loads stay coalesced.

Each lane keeps a running state and combines one element per iteration; a final tree across lanes gives the
output (``tl.reduce`` with the op's combine function). Ops are states with an associative combine:
sums/products/extrema one value; arg-extrema (value, index) with NaN as the extreme and the first index winning
(:mod:`.triton_helpers`); variance (mean, M2, count) combined by Chan et al.'s pairwise formula (Welford within a
lane: numerically stable, no E[x^2] - E[x]^2 cancellation); logsumexp (max, sum of exp(x - max)) rescaled on
combine; nanmean (sum, count). When there are too few outputs to fill the GPU (``outer * inner`` programs below
the config's ``target_programs``), the reduced axis is split: a first launch writes per-chunk states to a
workspace and a second launch of the same kernel combines them (``STAGE`` 1 and 2).

**Per-element cost** (the loop body is what bounds bandwidth; counted on the sm_90 SASS, bf16 input, 16 elements
per thread and step): a sum is a conversion and an add; extrema one NaN-propagating ``max.NaN``/``min.NaN``
(:func:`~.triton_helpers.maximum_fast`, :func:`minimum_fast`) instead of three selects; arg-extrema keep per lane
the value and the int32 loop step it came from and take a new element only when it is strictly better or the
first NaN (a lane sees its indices in increasing order, so ties keep the first occurrence without comparing
indices; :func:`_fold`), the int64 index being rebuilt once after the loop: about 7 instructions per element
instead of 15, which had made ``max(dim)`` compute-bound. Masked lanes of the last tile read the op's neutral
element (``OTHER``: 0, 1, +-inf for floating inputs) so the fold needs no mask. The loop settings of the
config tables (:func:`loop_meta`: ``LOOP_STAGES`` prefetches the next tiles with ``cp.async``, ``EVICT`` the
input's L2 policy) are tuning knobs that benchmarks/sweep_reduce.py times on the H200.

``var_mean``/``std_mean`` return a NaN mean wherever the variance is NaN because the row holds +-inf or NaN (one
rule for every summation order; PyTorch's sequential Welford gives NaN there unless the inf is the row's last
element).

**Numerics**: float16 and bfloat16 accumulate in float32 and round once (``float16 [0.01] * 65536`` sums to
655.0, within one float16 ulp of PyTorch CPU's 655.5, which comes from its summation order); float32 in float32,
float64 in float64; integers and bool in int64 (wrapping as PyTorch). Offsets are 64-bit. On the GPU the float
semantics are PyTorch's CUDA ones: divisions (means, variances, Welford's weights, a norm's ``1/p``) are IEEE
(:func:`~.triton_helpers.div_rn`; Triton's float32 ``/`` is the 2-ulp ``div.full.f32``), logsumexp's exp and log
are libdevice's, extrema propagate NaN (checked on the sm_90 code by tests/ops/test_ptx_audit.py). The config key
``LSE_EX2`` (default off) folds logsumexp's float32 elements through one ``ex2.approx`` instead
(:func:`lse_step_ex2`: 10.3 instead of 25.6 loop instructions per bfloat16 element on sm_90; its error bound in
the docstring); ``LSE_TILE`` (default off; rows kernel) rescales a lane's sum once per loop step after the max of
the step's elements (:func:`lse_tile_scale`, bound in its docstring; with an int ``G``, lanes of ``G`` neighbours:
6.6 per element for ``G`` 8). ``ARG_ROW`` (default off; the widest row it takes) computes arg-extrema of rows held
whole in registers by :func:`_arg_row_kernel` (a max tree, then the first position equal to it).

**out= of another dtype** (PyTorch 2.13's CPU rules, :func:`out_dtypes`): ``sum``, ``nansum``, ``prod`` (and the
scans ``cumsum``/``cumprod``) take out's dtype as the result and computation dtype, as ``dtype=`` would: the input
is converted to it, then reduced (``sum(bf16, out=float32)`` accumulates and writes float32; ``sum(float32
[0.7, 0.7], out=int64)`` sums the truncated elements: 0); a ``dtype=`` that differs from out's is refused ("Expected
out tensor to have dtype double, but got float instead"). ``mean`` does the same for floating outs (a
float16/bfloat16 out computes in float32), ``var``/``std`` for any out the result casts to, ``logsumexp`` for
floating outs (PyTorch rounds ``exp(x - max)`` to the input's dtype first, nbxtensor does not: within the input
dtype's tolerance); ``amax``/``amin``, ``argmax``/``argmin``, ``max``/``min(dim)``, ``aminmax`` and the norms want
out's dtype to be the result's; ``all``/``any`` bool or uint8 outs. The kernels write out's dtype directly (no
temporary of the result dtype).

The ``cpu`` implementations use NumPy in the same accumulation dtypes, moving the reduced axes last and
reducing contiguous rows (NumPy's pairwise summation). The oracles compute in float64 (int64 for integer sums)
with NumPy's own reductions. Differences from PyTorch: complex and float8 inputs are not supported
(``NotImplementedError``); ``norm`` supports the vector norms (``p='fro'`` over any dims is the 2-norm, as
PyTorch computes it) but not ``'nuc'``.
"""

from __future__ import annotations

import math
from collections import namedtuple
from functools import lru_cache
from typing import Sequence

import numpy as np

from .._errors import check, fail
from ..dtypes import table as T
from ..dtypes.casting import cast_array
from ..dtypes.promotion import get_default_dtype, promote_types
from ..dtypes.table import DType
from ..runtime.configs import launch_config, state as config_state
from ..runtime.launcher import Recording, interpreting, launch, make_launch_plan, scratch
from ..runtime.triton_compat import HAVE_TRITON, INTERPRET, jit, tl
from ..shapes import numel, wrap_dim
from ..tensor.core import Tensor, host_view, make_tensor, new_empty
from . import dispatch, registry
from .registry import Cost, OpRecord, register
from .triton_helpers import (TL_DTYPES, argmax_combine, argmin_combine, convert, div_rn, ieee_options, libdevice,
                             maximum, maximum_fast, minimum, nan_argmax, nan_argmin, nan_max_fast, rcp_rn, sqrt_rn)

__all__ = ["return_types", "canonical3", "memory_groups", "collapse_dims", "reduce_dims", "acc_dtype", "loop_meta",
           "minimum_fast", "nan_min_fast", "lse_combine", "sm_count", "persistent_grid", "out_convert",
           "launch_reduction", "launch_quiet", "FLOATS", "INTS", "BARE_UINTS", "cdiv", "check_input", "compute_input",
           "new_out", "finish_out", "refuse_dtype", "tmp_like_groups", "welford_combine", "sqrt_rn", "split_plan",
           "clear_plans", "plan_stats"]

FLOATS = (T.float16, T.bfloat16, T.float32, T.float64)
INTS = (T.uint8, T.int8, T.int16, T.int32, T.int64)
BARE_UINTS = (T.uint16, T.uint32, T.uint64)
_INT_LIKE = (T.KIND_BOOL, T.KIND_INT, T.KIND_UINT)


class return_types:  # noqa: N801 - PyTorch's name (torch.return_types)
    """Named tuples of multi-output ops, as ``torch.return_types``: ``max``/``min``/``cummax``/``cummin``
    ``(values, indices)`` and ``aminmax`` ``(min, max)``."""

    max = namedtuple("max", ["values", "indices"])
    min = namedtuple("min", ["values", "indices"])
    aminmax = namedtuple("aminmax", ["min", "max"])
    cummax = namedtuple("cummax", ["values", "indices"])
    cummin = namedtuple("cummin", ["values", "indices"])


# ---------------------------------------------------------------------------------------------------------
# Canonicalisation (shared with scans, softmax and norms)
# ---------------------------------------------------------------------------------------------------------
def memory_groups(shape: Sequence[int], strides: Sequence[int], flags: Sequence[bool]) -> list[list]:
    """Dims of size > 1 in memory order (decreasing |stride|, ties in logical order), merged into groups.

    Returns:
        ``[[flag, dims, size, stride], ...]`` outermost first: each group's dims share ``flag`` and are
        contiguous with each other (``stride[a] == stride[b] * size[b]`` for neighbours); ``stride`` is the
        stride of the group's innermost dim, ``size`` the product of its sizes.
    """
    order = sorted((d for d in range(len(shape)) if shape[d] != 1), key=lambda d: -abs(strides[d]))
    groups: list[list] = []
    for d in order:
        g = groups[-1] if groups else None
        if g is not None and g[0] == flags[d] and g[3] == strides[d] * shape[d]:
            g[1].append(d)
            g[2] *= shape[d]
            g[3] = strides[d]
        else:
            groups.append([bool(flags[d]), [d], shape[d], strides[d]])
    return groups


def collapse_dims(shape: Sequence[int], strides: Sequence[int], dims: Sequence[int]) -> int | None:
    """The single stride that walks ``dims`` (outermost first, size-1 dims ignored) as one flattened dim, or
    ``None`` when they are not contiguous with each other in that order (0 for no dims)."""
    ds = [d for d in dims if shape[d] != 1]
    if not ds:
        return 0
    for a, b in zip(ds, ds[1:]):
        if strides[a] != strides[b] * shape[b]:
            return None
    return strides[ds[-1]]


def canonical3(shape: Sequence[int], strides: Sequence[int], flags: Sequence[bool]):
    """``(outer, reduced, inner)`` view of a tensor whose ``flags`` mark the reduced (or scanned) dims.

    Returns:
        ``(sizes, strides, groups)``: ``sizes = (O, R, I)``, ``strides = (so, sr, si)`` and ``groups`` the
        logical dims of each part (outermost first), or ``None`` when the memory order interleaves kept and
        reduced groups (``R K R``, ``K R K R`` ...): the caller then copies the input to (kept..., reduced...).
    """
    gs = memory_groups(shape, strides, flags)
    pattern = "".join("R" if g[0] else "K" for g in gs)
    if pattern not in ("", "K", "R", "KR", "RK", "KRK"):
        return None
    parts = {"O": (1, 0, ()), "R": (1, 0, ()), "I": (1, 0, ())}
    seen_r = False
    for g in gs:
        if g[0]:
            seen_r = True
        parts["R" if g[0] else ("I" if seen_r else "O")] = (g[2], g[3], tuple(g[1]))
    return ((parts["O"][0], parts["R"][0], parts["I"][0]), (parts["O"][1], parts["R"][1], parts["I"][1]),
            (parts["O"][2], parts["R"][2], parts["I"][2]))


def reduce_dims(dim, ndim: int, fn: str, *, allow_tuple: bool = True) -> tuple[int, ...]:
    """Wrap a reduction's ``dim`` argument: ``None``, ``()`` and ``[]`` mean every dim; an int or a tuple/list
    of ints otherwise (sorted, each wrapped). A 0-dim tensor accepts dims 0 and -1 and reduces nothing.

    Raises:
        IndexError: a dim out of range (PyTorch's message).
        RuntimeError: a dim repeated ("dim 0 appears multiple times in the list of dims").
        TypeError: a tuple where only an int is accepted, or a non-integer dim.
    """
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(ndim))
    if isinstance(dim, (tuple, list)):
        check(allow_tuple, lambda: f"{fn}(): argument 'dim' must be int, not {type(dim).__name__}", TypeError)
        ds = [wrap_dim(d, ndim, fn=fn) for d in dim]
        for d in ds:
            check(ds.count(d) == 1, lambda: f"{fn}(): dim {d} appears multiple times in the list of dims")
    else:
        check(not isinstance(dim, bool), lambda: f"{fn}(): argument 'dim' must be int, not bool", TypeError)
        ds = [wrap_dim(dim, ndim, fn=fn)]
    return tuple(sorted(ds)) if ndim > 0 else ()


def _out_shape(shape, dims, keepdim: bool) -> tuple[int, ...]:
    if keepdim:
        return tuple(1 if d in dims else s for d, s in enumerate(shape))
    return tuple(s for d, s in enumerate(shape) if d not in dims)


def _keep_view(o: Tensor, dims, keepdim: bool, ndim: int) -> Tensor:
    """``o`` (the op's output) seen with size-1 dims at the reduced positions, so kernels index it like x."""
    if keepdim or ndim == 0:
        return o
    for d in dims:
        o = o.unsqueeze(d)
    return o


# ---------------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------------
# Kinds of state (constexpr KIND).
K_SUM, K_PROD, K_MAX, K_MIN, K_ARGMAX, K_ARGMIN, K_MINMAX, K_WELFORD, K_LSE, K_NANMEAN = range(10)
# Per-element transforms before combining (constexpr PRE; raw inputs only, never partial states).
P_NONE, P_ABS, P_SQUARE, P_POW, P_NONZERO, P_NAN_TO_ZERO, P_NOT_NAN, P_NO_ZERO_BYTE, P_NZ_PAIRS = range(9)
# Finalisation of the combined state (constexpr FIN).
F_NONE, F_DIV_N, F_SQRT, F_ROOT_P, F_VAR, F_STD, F_LSE, F_RATIO = range(8)
_BIG_INDEX = 2 ** 62  # index of "no element yet": loses every tie against a real index


@jit
def _mul_combine(a, b):
    return a * b


@jit
def _sum_pair(a0, a1, b0, b1):
    return a0 + b0, a1 + b1


@jit
def minimum_fast(a, b):
    """``torch.minimum`` through the hardware's NaN-propagating minimum (``min.NaN.f32``; a compare and select
    for float64, ``min`` for integers): the counterpart of :func:`~.triton_helpers.maximum_fast` for hot loops."""
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


@jit
def nan_min_fast(x, axis: tl.constexpr):
    """``tl.min`` with PyTorch's NaN rule, combined by :func:`minimum_fast`."""
    return tl.reduce(x, axis, minimum_fast)


@jit
def _minmax_combine(a0, a1, b0, b1):
    return minimum_fast(a0, b0), maximum_fast(a1, b1)


@jit
def welford_combine(ma, qa, na, mb, qb, nb):
    # Chan, Golub & LeVeque, "Algorithms for computing the sample variance" (1983): pairwise update of
    # (mean, M2, count). With nb == 1 this is Welford's one-element update. nb / n is IEEE (div_rn), as ATen's
    # WelfordOps::combine compiled by nvcc: a mean of equal values stays that value.
    n = na + nb
    d = mb - ma
    w = tl.where(n == 0, 0.0, div_rn(nb, tl.where(n == 0, 1.0, n)))
    mean = ma + d * w
    m2 = qa + qb + tl.where((na == 0) | (nb == 0), 0.0, d * d * na * w)
    return mean, m2, n


@jit
def lse_combine(ma, sa, mb, sb):
    # (m, s) stands for m + log(s), s = sum of exp(x - m) over the elements seen. One exp per combine: the
    # smaller max is rescaled to the larger. Equal maxima (also +-inf) just add their sums, so -inf rows stay
    # -inf and +inf rows +inf; NaN propagates through the max. libdevice's expf, as PyTorch's exp (tl.exp is
    # ex2.approx of a rounded product: its error grows with |mn - mx|).
    mx = maximum(ma, mb)
    mn = minimum(ma, mb)
    e = tl.where(mx == mn, 1.0, libdevice.exp(mn - mx))
    s = tl.where(ma >= mb, sa + sb * e, sb + sa * e)
    return mx, s


_COMPILED = tl.constexpr(not INTERPRET) if HAVE_TRITON else False


@jit
def _ex2_nonpos(t):
    """``2**t`` for float32 ``t <= 0`` and NaN (which gives 1): one ``min.f32`` with 0 (IEEE minNum: NaN -> 0) and
    one ``ex2.approx.ftz.f32`` (a single ``MUFU.EX2``; relative error about 2**-22, PTX ISA; results below
    2**-126 flush to 0). The interpreter computes the same function with a select and ``tl.exp2``."""
    if _COMPILED:
        r = tl.inline_asm_elementwise("{ min.f32 $0, $1, 0f00000000; ex2.approx.ftz.f32 $0, $0; }", "=f,f", [t],
                                      dtype=tl.float32, is_pure=True, pack=1)
    else:
        r = tl.exp2(tl.where(t != t, 0.0, t))
    return r


@jit
def lse_step_ex2(ma, sa, x):
    """Fold one float32 element ``x`` into a lane's logsumexp state ``(ma, sa)`` (config key ``LSE_EX2``): the
    same state and arithmetic as :func:`lse_combine` of ``(x, 1)``, with ``exp(-|x - ma|)`` computed as
    ``2**(-|x - ma| * log2(e))`` by :func:`_ex2_nonpos` instead of libdevice's ``expf`` (sm_90: 10 instead of 26
    SASS instructions per bfloat16 element in the main loop, no selects for NaN tests).

    Special values as :func:`lse_combine`: ``x == ma == +-inf`` makes ``x - ma`` NaN, which the exponential maps
    to 1 (equal maxima add their sums: -inf rows stay -inf, +inf rows +inf); a NaN element makes the lane's
    maximum NaN through the NaN-propagating max (the result is NaN whatever the sum); ``ma = -inf`` (a fresh lane)
    gives ``exp(-inf) = 0`` and the sum restarts at 1.

    Error bound (float32, ``d = x - ma``): the computed factor is ``exp(-|d|) (1 + eta)`` with
    ``|eta| <= 3 * 2**-24 * |d| + 2**-22`` (the roundings of ``x - ma``, of log2(e) and of the product, each a
    relative 2**-24 of the exponent, which ``2**`` turns into an absolute ``|d| 2**-24`` each; then ex2.approx's
    2**-22), against ``2**-24 * |d| + 2**-23`` for libdevice's ``expf`` of the same rounded ``d``. A fold adds
    ``e = exp(-|d|)`` to a lane sum ``s >= 1`` (an element below the maximum) or rescales ``s`` by ``e`` and
    adds 1 (a new maximum); in both cases the relative error the factor adds to the lane sum is at most
    ``eta * e / (1 + e)`` or ``eta * s e / (s e + 1)``, and ``|d| * (s e / (s e + 1)) <= 1 + ln s`` (maximum over
    ``d``), so each fold adds at most ``2**-24 * (3 (1 + ln n_l) + 4 + 1)`` (the last 2**-24 the fold's own
    rounding), n_l the lane's element count. After n_l folds the lane sum's relative error, which is the
    logsumexp's absolute error, is below ``n_l * 2**-24 * (8 + 3 ln n_l)`` (the table path: ``n_l * 2**-24 *
    (4 + ln n_l)``): 1.6e-5 for the benchmark's 8192-wide rows on 512 lanes (n_l = 16), inside the float32 table's
    ``atol * sqrt(R)`` = 9e-4 for R = 8192, and below that atol for every ``n_l <= 2**12`` when ``BLOCK_R >= 256``
    (``sqrt(n_l) (8 + 3 ln n_l) <= 1e-5 * 16 * 2**24``); longer lanes (a chunk of more than 2**20 elements on 256
    lanes) can pass it in this worst case, as the table path's bound does from about 2**15 (the bound grows like
    ``n_l``, the table like ``sqrt(R)``). Typical errors are far smaller (random signs);
    tests/ops/test_reduction.py checks worst cases (every element a new maximum of its lane at several ``|d|``,
    long increasing rows) against the float64 oracle and this bound."""
    d = x - ma
    e = _ex2_nonpos(tl.abs(d) * -1.4426950408889634)
    up = d > 0
    return maximum_fast(ma, x), tl.fma(sa, tl.where(up, e, 1.0), tl.where(up, 1.0, e))


@jit
def _ex2_ftz(t):
    """``2**t`` (float32) by one ``ex2.approx.ftz.f32`` (``MUFU.EX2``; relative error about 2**-22, results below
    2**-126 flushed to 0; ``2**-inf = 0``, ``2**inf = inf``, NaN stays NaN); the interpreter takes ``tl.exp2``."""
    if _COMPILED:
        r = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [t], dtype=tl.float32, is_pure=True,
                                      pack=1)
    else:
        r = tl.exp2(t)
    return r


@jit
def lse_tile_scale(ma, sa, tmax):
    """The per-step half of ``LSE_TILE`` (logsumexp of raw float32-accumulated elements, config key of
    ``reduce_rows``, default off): a lane with state ``(ma, sa)`` (``sa = sum exp(x - ma)`` over its elements so
    far) and the NaN-propagating maximum ``tmax`` of its elements of this step (the ``UNROLL`` tiles' elements of
    the lane, times ``G`` neighbours when the key is a group size ``G``) moves to ``mn = max(ma, tmax)`` once per
    step. Returns ``(mn, mc, sa * 2**((ma - mc) log2(e)))`` with ``mc`` = ``mn`` clamped to +-FLT_MAX; each
    element ``x`` of the step then adds :func:`lse_tile_term` ``= 2**((x - mc) log2(e))`` (an ``FADD``, an
    ``FMUL`` and one ``MUFU.EX2`` per element, no NaN test; the maximum costs one ``max.NaN`` per element and the
    rescale one exponential per lane and step instead of one per element as in :func:`lse_step_ex2`). The
    difference is taken before the multiply (not ``fma(x, k, -mn k)`` as softmax's folded exponentials): the
    rounding of ``mn * log2(e)`` is ``2**-24 |mn|`` in the exponent, which for ``|mn|`` past about 1e9 no longer
    fits float32's exponent range, while ``x - mn`` is exact near ``mn``.

    Special values (the same results as :func:`lse_combine`'s states): ``mn = +inf``: ``mc = FLT_MAX``, an
    infinite element adds ``2**inf = inf``, finite ones 0, and the lane stays (+inf, inf): +inf; ``mn = -inf``
    (every element so far -inf, or masked lanes, which read -inf): terms and the rescaled sum 0, the lane (-inf,
    0) gives -inf + log(0) = -inf and adds 0 in the final tree; a lane whose maximum did not move is multiplied by
    exactly 1; a NaN element makes ``mn`` NaN and the result NaN.

    Error bound (against the exact logsumexp of the float32 elements; a lane of ``n_l`` elements in ``n_l / U``
    steps, ``U`` its elements per step; ``d = x - mn``): a term is ``exp(-|d|) (1 + eta)`` with ``|eta| <= 3 *
    2**-24 |d| + 2**-22`` (the roundings of ``x - mn``, of log2(e) and of the product, then ex2.approx), as in
    :func:`lse_step_ex2`: at most ``2**-24 (3/e + 4) < 5.2 * 2**-24`` of the lane sum (``s >= 1``: the lane
    maximum's own term is 1); the rescale factor has the same form and adds at most ``2**-24 (3 (1 + ln n_l) +
    4)`` per step (:func:`lse_step_ex2`'s argument); each addition one rounding. The lane sum's relative error,
    the logsumexp's absolute error, is below ``n_l 2**-24 (6.2 + (7 + 3 ln n_l) / U)``: for the benchmark's
    8192-wide rows with BLOCK_R 512, UNROLL 4 and groups of 8 (64 lanes of n_l = 128, U = 32) 5e-5, inside the
    float32 table's ``atol * sqrt(R)`` = 9e-4 for R = 8192 (one state per element, 512 lanes, U = 4: 1.2e-5;
    :func:`lse_step_ex2`'s bound there 1.6e-5). tests/ops/test_reduction.py checks worst cases against the
    float64 oracle and this bound."""
    mn = maximum_fast(ma, tmax)
    mc = tl.minimum(tl.maximum(mn, -3.4028234663852886e38), 3.4028234663852886e38)
    return mn, mc, sa * _ex2_ftz((ma - mc) * 1.4426950408889634)


@jit
def lse_tile_term(x, mc):
    """One element's term ``2**((x - mc) log2(e))`` of ``LSE_TILE`` (see :func:`lse_tile_scale`)."""
    return _ex2_ftz((x - mc) * 1.4426950408889634)


@jit
def _lse_group(x, BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr, G: tl.constexpr):
    """A ``[BLOCK_M, BLOCK_R]`` tile as ``[BLOCK_M, BLOCK_R // G, G]``: groups of G neighbouring elements (a
    thread's 16-byte vector of bfloat16 when G is 8), reduced in registers."""
    return tl.reshape(x, [BLOCK_M, BLOCK_R // G, G])


@jit
def _lse_tile_x(raw, m, EVEN: tl.constexpr, LOADT: tl.constexpr):
    """A tile of raw elements as float32 for ``LSE_TILE``; masked lanes -inf (they add 0)."""
    x = convert(raw, LOADT).to(tl.float32)
    if not EVEN:
        x = tl.where(m, x, float("-inf"))
    return x


@jit
def _as(v, DT: tl.constexpr):
    """A scalar argument in dtype DT, by arithmetic: an int argument equal to 1 arrives as a constexpr and a
    float one as a Python float under the interpreter, neither of which has ``.to``."""
    return v * tl.full([], 1, DT)


@jit
def _element_state(raw, idx, KIND: tl.constexpr, PRE: tl.constexpr, LOADT: tl.constexpr, ACC: tl.constexpr, p):
    """One raw input element as a state ``(a, b, c)`` of the op."""
    x = convert(raw, LOADT)
    if PRE == 1:
        x = tl.abs(x)
    elif PRE == 2:
        x = x * x
    elif PRE == 3:
        x = libdevice.pow(tl.abs(x), _as(p, LOADT))  # |0|**p = 0 (p > 0), inf (p < 0)
    elif PRE == 4:
        x = x != 0
    elif PRE == 5:
        x = tl.where(x != x, 0.0, x)
    elif PRE == 6:
        x = x == x
    elif PRE == 7:  # an int32 word of 4 one-byte elements: 1 when none of its bytes is zero (exact bit test)
        x = ((x - 0x01010101) & ~x & -2139062144) == 0  # -2139062144: 0x80808080 as int32
    elif PRE == 8:  # an int32 word of 2 float16/bfloat16 elements: 1 in each 16-bit half whose magnitude is nonzero
        t = (x & 0x7FFF7FFF) + 0x7FFF7FFF  # bit 15 / 31 set iff the low / high magnitude is nonzero (no carry out
        x = (t >> 15) & 0x00010001         # of a half: 0x7FFF + 0x7FFF < 2**16); wraps past 2**31 as int32
    v = x.to(ACC)
    if KIND == 4 or KIND == 5:
        b = idx
        c = v
    elif KIND == 6:
        b = v
        c = v
    elif KIND == 7:
        b = v - v  # M2 of one element: 0, but NaN for +-inf and NaN (PyTorch's Welford step: inf * (inf - inf))
        c = tl.full(v.shape, 1.0, ACC)
    elif KIND == 8:
        b = tl.full(v.shape, 1.0, ACC)
        c = v
    elif KIND == 9:
        nan = v != v
        b = tl.where(nan, 0.0, 1.0).to(ACC)
        v = tl.where(nan, 0.0, v).to(ACC)
        c = v
    else:
        b = v
        c = v
    return v, b, c


@jit
def _combine(a, b, c, va, vb, vc, m, KIND: tl.constexpr):
    """Fold one state per lane (``va, vb, vc``, where mask ``m``) into the running lane states."""
    if KIND == 0:
        a = tl.where(m, a + va, a)
    elif KIND == 1:
        a = tl.where(m, a * va, a)
    elif KIND == 2:
        a = tl.where(m, maximum_fast(a, va), a)
    elif KIND == 3:
        a = tl.where(m, minimum_fast(a, va), a)
    elif KIND == 4:
        na, nb = argmax_combine(a, b, va, vb)
        a = tl.where(m, na, a)
        b = tl.where(m, nb, b)
    elif KIND == 5:
        na, nb = argmin_combine(a, b, va, vb)
        a = tl.where(m, na, a)
        b = tl.where(m, nb, b)
    elif KIND == 6:
        a = tl.where(m, minimum_fast(a, va), a)
        b = tl.where(m, maximum_fast(b, vb), b)
    elif KIND == 7:
        na, nb, nc = welford_combine(a, b, c, va, vb, vc)
        a = tl.where(m, na, a)
        b = tl.where(m, nb, b)
        c = tl.where(m, nc, c)
    elif KIND == 8:
        na, nb = lse_combine(a, b, va, vb)
        a = tl.where(m, na, a)
        b = tl.where(m, nb, b)
    else:
        a = tl.where(m, a + va, a)
        b = tl.where(m, b + vb, b)
    return a, b, c


@jit
def _fold(a, b, c, va, vb, vc, m, step, KIND: tl.constexpr, STAGE: tl.constexpr, ACC: tl.constexpr,
          SHIFT: tl.constexpr = False, EX2: tl.constexpr = False, ARG_FAST: tl.constexpr = False):
    """Fold this iteration's values (one per lane) into the lane states.

    A variance's raw elements take Welford's one-element step (mean += d / n; M2 += d * (x - mean), so an inf
    makes M2 NaN as in PyTorch) with one reciprocal per iteration instead of a division per element: every
    active lane has seen exactly ``step`` elements before, because a lane only ever runs out at the end of its
    range. Everything else combines states (:func:`_combine`). The reciprocal is IEEE (:func:`rcp_rn`), so the
    increment ``d * inv`` is within an ulp of ATen's ``d / n`` and exact when ``n`` is a power of two.

    Arg-extrema of raw elements keep, per lane, the value and the iteration ``step`` it came from (int32; the
    index is rebuilt once after the loop by :func:`_lane_index`). A lane sees its elements in increasing index
    order, so a later element replaces the lane's value only when strictly better or when it is the first NaN:
    ties keep the first occurrence without comparing indices (PyTorch's rule), and a lane's initial state (the
    identity at step 0) stands for its first element whenever no element beats it.

    ``SHIFT`` (config key ``VAR_SHIFT``, variances of raw elements): the lane keeps shifted sums instead of
    Welford's step, ``a += d``, ``b += d * d`` with ``d = x - c`` and ``c`` the lane's first element (3 float
    instructions per element instead of 6 and a reciprocal); :func:`_shifted_to_welford` turns them into
    (mean, M2, count) after the loop. The shift is one of the lane's own elements, so the cancellation in
    ``M2 = S2 - S1**2 / n`` loses at most about ``n`` ulp (n: the lane's element count).

    ``EX2`` (config key ``LSE_EX2``, logsumexp of raw float32-accumulated elements): :func:`lse_step_ex2` instead
    of :func:`lse_combine` (its exponential is one ``ex2.approx``; error bound in its docstring).

    ``ARG_FAST`` (config key, arg-extrema of raw elements): the same truth table written as
    ``take = !(va <= a) & (a == a)`` (argmax; ``>=`` for argmin): ``!(va <= a)`` holds when ``va`` is larger or
    either is NaN, ``a == a`` refuses a lane that already holds a NaN, so ties (also -0.0 against +0.0) keep the
    first element and the first NaN wins; one unordered compare and one NaN test per element instead of three
    compares."""
    if KIND == 8 and EX2 and STAGE != 2:
        na, nb = lse_step_ex2(a, b, va)
        a = tl.where(m, na, a)
        b = tl.where(m, nb, b)
    elif KIND == 7 and SHIFT and STAGE != 2:
        d = va - c
        a = tl.where(m, a + d, a)
        b = tl.where(m, b + d * d, b)
    elif (KIND == 4 or KIND == 5) and STAGE != 2 and ARG_FAST:
        if KIND == 4:
            worse = va <= a
        else:
            worse = va >= a
        take = m & ~worse & (a == a)
        a = tl.where(take, va, a)
        b = tl.where(take, step, b)
    elif (KIND == 4 or KIND == 5) and STAGE != 2:
        if KIND == 4:
            better = va > a
        else:
            better = va < a
        take = m & (better | ((va != va) & (a == a)))
        a = tl.where(take, va, a)
        b = tl.where(take, step, b)
    elif KIND == 7 and STAGE != 2:
        inv = rcp_rn(_as(step + 1, ACC))
        d = va - a
        na = a + d * inv
        a = tl.where(m, na, a)
        b = tl.where(m, b + d * (va - na), b)
        c = tl.where(m, c + 1.0, c)
    else:
        a, b, c = _combine(a, b, c, va, vb, vc, m, KIND)
    return a, b, c


@jit
def _lanes(a, b, c, AXIS: tl.constexpr, KIND: tl.constexpr):
    """Combine the lane states across ``AXIS`` (the final tree of the reduction)."""
    if KIND == 0:
        ra = tl.sum(a, AXIS)
        rb = ra
        rc = ra
    elif KIND == 1:
        ra = tl.reduce(a, AXIS, _mul_combine)
        rb = ra
        rc = ra
    elif KIND == 2:
        ra = nan_max_fast(a, AXIS)
        rb = ra
        rc = ra
    elif KIND == 3:
        ra = nan_min_fast(a, AXIS)
        rb = ra
        rc = ra
    elif KIND == 4:
        ra, rb = nan_argmax(a, b, AXIS)
        rc = ra
    elif KIND == 5:
        ra, rb = nan_argmin(a, b, AXIS)
        rc = ra
    elif KIND == 6:
        ra, rb = tl.reduce((a, b), AXIS, _minmax_combine)
        rc = ra
    elif KIND == 7:
        ra, rb, rc = tl.reduce((a, b, c), AXIS, welford_combine)
    elif KIND == 8:
        ra, rb = tl.reduce((a, b), AXIS, lse_combine)
        rc = ra
    else:
        ra, rb = tl.reduce((a, b), AXIS, _sum_pair)
        rc = ra
    return ra, rb, rc


@jit
def _arg_lanes_fast(a, b, AXIS: tl.constexpr, KIND: tl.constexpr, ACC: tl.constexpr):
    """``ARG_FAST``'s final tree of raw arg-extrema lanes (values ``a``, int64 positions ``b``, every lane's
    position distinct): two one-value trees instead of a tree of (value, index) pairs with NaN and index tests.
    The extreme ``e`` by the NaN-propagating max/min; the index is the smallest position among the lanes that hold
    ``e`` (``a == e``, so -0.0 and +0.0 tie) or, when ``e`` is NaN, a NaN (``a != a`` implies ``e`` is NaN); the
    value is that lane's own (its bits summed over the one lane at that position, so a -0.0 or a NaN's payload is
    kept exactly as the pair tree keeps it). A lane that saw no element holds the identity at a position past
    every real one, so it loses ties as before."""
    if KIND == 4:
        e = nan_max_fast(a, AXIS)
    else:
        e = nan_min_fast(a, AXIS)
    hit = (a == tl.expand_dims(e, AXIS)) | (a != a)
    best = tl.min(tl.where(hit, b, 4611686018427387904), AXIS)  # _BIG_INDEX
    mine = b == tl.expand_dims(best, AXIS)
    if ACC == tl.float32:
        ra = tl.sum(tl.where(mine, a.to(tl.int32, bitcast=True), 0), AXIS).to(tl.float32, bitcast=True)
    elif ACC == tl.float64:
        ra = tl.sum(tl.where(mine, a.to(tl.int64, bitcast=True), 0), AXIS).to(tl.float64, bitcast=True)
    else:
        ra = tl.sum(tl.where(mine, a, 0), AXIS).to(ACC)
    return ra, best


@jit
def _finish(ra, rb, rc, n_total, p, corr, FIN: tl.constexpr, ACC: tl.constexpr):
    """The op's outputs from the combined state: ``(result, second result)``. Divisions are IEEE (div_rn) and
    logarithms libdevice's, as PyTorch's CUDA kernels compute them (Triton's float32 ``/`` is ``div.full.f32``
    and ``tl.log`` ``lg2.approx``): the mean of ``[2, 2, 2]`` is exactly 2."""
    if FIN == 1:
        res = div_rn(ra, _as(n_total, ACC))
    elif FIN == 2:
        res = sqrt_rn(ra)
    elif FIN == 3:
        res = libdevice.pow(ra, rcp_rn(_as(p, ACC)))
    elif FIN == 4 or FIN == 5:
        # PyTorch (WelfordOps::project): divisor N > correction ? N - correction : 0; M2 / 0 gives inf, 0 / 0 NaN.
        # (Not where(N - corr > 0, N - corr, 0): LLVM rewrites that select into a NaN-dropping max.f32.)
        cf = _as(corr, ACC)
        res = div_rn(rb, tl.where(rc > cf, rc - cf, 0.0))
        if FIN == 5:
            res = sqrt_rn(res)
    elif FIN == 6:
        res = ra + libdevice.log(rb)
    elif FIN == 7:
        res = div_rn(ra, rb)
    else:
        res = ra
    if FIN == 4 or FIN == 5:
        # var_mean's mean: NaN where M2 is NaN (a +-inf or NaN in the row), one rule for every summation order
        # (PyTorch's sequential Welford gives NaN unless the inf comes last)
        res2 = tl.where(rb != rb, rb, ra)
    else:
        res2 = rb
    return res, res2


@jit
def _init_state(KIND: tl.constexpr, IDENT: tl.constexpr, IDENT2: tl.constexpr, ACC: tl.constexpr,
                S0: tl.constexpr, S1: tl.constexpr, STAGE: tl.constexpr):
    a = tl.full([S0, S1], IDENT, ACC)
    if (KIND == 4 or KIND == 5) and STAGE != 2:
        b = tl.zeros([S0, S1], tl.int32)  # the step of the lane's best element (see _fold)
    elif KIND == 4 or KIND == 5:
        b = tl.full([S0, S1], IDENT2, tl.int64)
    else:
        b = tl.full([S0, S1], IDENT2, ACC)
    c = tl.zeros([S0, S1], ACC)
    return a, b, c


@jit
def _lane_index(b, first, stride, BLOCK_R: tl.constexpr, UNROLL: tl.constexpr, INTERLEAVE: tl.constexpr):
    """The int64 index of each lane's best element from its step ``b`` (raw arg-extrema, see :func:`_fold`);
    ``first`` is the lane's first position ``r_lo + lane``. Contiguous chunks: step ``b`` is the tile at
    ``b * BLOCK_R``; interleaved ones: tile ``b % UNROLL`` of the program's super-tile ``b // UNROLL``, super-tiles
    ``stride`` elements apart. A lane that saw no element has ``first >= R``, past every real index, so its
    (identity, index) loses every tie in the final tree without a test."""
    b64 = b.to(tl.int64)
    if INTERLEAVE:
        pos = first + (b64 // UNROLL) * stride + (b64 % UNROLL) * BLOCK_R
    else:
        pos = first + b64 * BLOCK_R
    return pos


@jit
def _load_states(x_ptr, x1_ptr, x2_ptr, off, m, KIND: tl.constexpr, CG: tl.constexpr = False):
    """Partial states written by a STAGE-1 launch (workspace already in the accumulation dtype); ``CG``: through
    L2 only (``ld.global.cg``), for states other programs of the same launch wrote (:func:`_finish_last`)."""
    if CG:
        va = tl.load(x_ptr + off, mask=m, cache_modifier=".cg")
    else:
        va = tl.load(x_ptr + off, mask=m)
    if KIND == 4 or KIND == 5 or KIND == 6 or KIND == 7 or KIND == 8 or KIND == 9:
        if CG:
            vb = tl.load(x1_ptr + off, mask=m, cache_modifier=".cg")
        else:
            vb = tl.load(x1_ptr + off, mask=m)
    else:
        vb = va
    if KIND == 7:
        if CG:
            vc = tl.load(x2_ptr + off, mask=m, cache_modifier=".cg")
        else:
            vc = tl.load(x2_ptr + off, mask=m)
    else:
        vc = va
    return va, vb, vc


@jit
def _finish_last(w0_ptr, w1_ptr, w2_ptr, y_ptr, y2_ptr, locks_ptr, lock, base, n_split, kept, kept_ok, swk, sws,
                 syk, sy2k, n_total, p, corr, KIND: tl.constexpr, FIN: tl.constexpr, HAS_Y: tl.constexpr,
                 HAS_Y2: tl.constexpr, ACC: tl.constexpr, IDENT: tl.constexpr, IDENT2: tl.constexpr,
                 BLOCK_K: tl.constexpr, BLOCK_S: tl.constexpr, AXIS: tl.constexpr):
    """A split reduction's second stage in its first launch (config key ``FINISH_LAST``): this program has
    stored its partial states; it takes a ticket on the arrival counter ``locks[lock]`` of its output tile, and
    the last of the tile's ``n_split`` programs folds the tile's states in split order (tiles of ``BLOCK_S``
    splits, ``.cg`` loads), finishes and writes the outputs, then resets the counter for the next launch. The
    order does not depend on which program arrived last, so the result is deterministic (no atomics on data).

    ``kept`` (``BLOCK_K`` kept positions: rows of the rows kernel, columns of the cols kernel) index the
    outputs by ``kept * syk``; split ``s`` of position ``k`` is at ``base + k * swk + s * sws`` of the
    workspaces; ``AXIS`` is the split axis of the (kept, split) tiles: 1 for the
    rows kernel, 0 for the cols kernel. The barrier makes every thread's state stores precede the release of the
    increment (acq_rel, GPU scope); the last program's acquire orders its loads after all of theirs (as
    matmul's split-K, ``_split_k_finish``)."""
    tl.debug_barrier()
    arrived = tl.atomic_add(locks_ptr + lock, 1, sem="acq_rel")
    if arrived == n_split - 1:
        ss = tl.arange(0, BLOCK_S)
        if AXIS == 1:
            a, b, c = _init_state(KIND, IDENT, IDENT2, ACC, BLOCK_K, BLOCK_S, 2)
        else:
            a, b, c = _init_state(KIND, IDENT, IDENT2, ACC, BLOCK_S, BLOCK_K, 2)
        for s0 in range(0, n_split, BLOCK_S):
            sp = s0 + ss
            if AXIS == 1:
                m = kept_ok[:, None] & (sp < n_split)[None, :]
                off = base + kept[:, None] * swk + sp[None, :].to(tl.int64) * sws
            else:
                m = (sp < n_split)[:, None] & kept_ok[None, :]
                off = base + kept[None, :] * swk + sp[:, None].to(tl.int64) * sws
            va, vb, vc = _load_states(w0_ptr, w1_ptr, w2_ptr, off, m, KIND, True)
            a, b, c = _fold(a, b, c, va, vb, vc, m, s0 // BLOCK_S, KIND, 2, ACC)
        ra, rb, rc = _lanes(a, b, c, AXIS, KIND)
        res, res2 = _finish(ra, rb, rc, n_total, p, corr, FIN, ACC)
        if HAS_Y:
            tl.store(y_ptr + kept * syk, convert(res, y_ptr.dtype.element_ty), mask=kept_ok)
        if HAS_Y2:
            tl.store(y2_ptr + kept * sy2k, convert(res2, y2_ptr.dtype.element_ty), mask=kept_ok)
        tl.atomic_xchg(locks_ptr + lock, 0)


@jit
def _store_states(w0_ptr, w1_ptr, w2_ptr, off, m, ra, rb, rc, KIND: tl.constexpr):
    tl.store(w0_ptr + off, ra, mask=m)
    if KIND == 4 or KIND == 5 or KIND == 6 or KIND == 7 or KIND == 8 or KIND == 9:
        tl.store(w1_ptr + off, rb, mask=m)
    if KIND == 7:
        tl.store(w2_ptr + off, rc, mask=m)


@jit
def _load_raw(ptrs, m, EVEN: tl.constexpr, OTHER: tl.constexpr, EVICT: tl.constexpr):
    """One tile of raw elements: unmasked when ``EVEN``; else masked, masked lanes reading the op's neutral
    ``OTHER`` where it has one (the fold then needs no mask)."""
    if EVEN:
        raw = tl.load(ptrs, eviction_policy=EVICT)
    elif OTHER is None:
        raw = tl.load(ptrs, mask=m, eviction_policy=EVICT)
    else:
        raw = tl.load(ptrs, mask=m, other=OTHER, eviction_policy=EVICT)
    return raw


@jit
def _fold_raw(a, b, c, raw, r, m, step, AXIS: tl.constexpr, KIND: tl.constexpr, PRE: tl.constexpr,
              LOADT: tl.constexpr, ACC: tl.constexpr, p, EVEN: tl.constexpr, OTHER: tl.constexpr,
              SHIFT: tl.constexpr = False, EX2: tl.constexpr = False, ARG_FAST: tl.constexpr = False):
    """Fold a tile of raw elements (loaded by :func:`_load_raw`) taken at loop step ``step``; ``r`` holds the
    positions along the reduced ``AXIS`` of the tile."""
    if AXIS == 1:
        idx = tl.broadcast_to(r[None, :], raw.shape)
    else:
        idx = tl.broadcast_to(r[:, None], raw.shape)
    va, vb, vc = _element_state(raw, idx, KIND, PRE, LOADT, ACC, p)
    if EVEN or OTHER is not None:
        m = tl.full(raw.shape, 1, tl.int1)
    return _fold(a, b, c, va, vb, vc, m, step, KIND, 0, ACC, SHIFT, EX2, ARG_FAST)


@jit
def _shift_init(x_ptr, off, m, LOADT: tl.constexpr, ACC: tl.constexpr):
    """The lanes' shifts for ``VAR_SHIFT``: each lane's first element (0 where the lane has none)."""
    return convert(tl.load(x_ptr + off, mask=m, other=0), LOADT).to(ACC)


@jit
def _shifted_to_welford(a, b, c, pos, end, BLOCK_R: tl.constexpr, ACC: tl.constexpr):
    """Shifted sums (S1 ``a``, S2 ``b``, shift ``c``) of lanes at first positions ``pos`` that stepped by BLOCK_R
    up to ``end`` (exclusive) -> Welford states (mean, M2, count); a lane with no element gets (0, 0, 0). M2 is
    clamped at 0 (rounding can leave a tiny negative), NaN kept."""
    n = tl.broadcast_to(tl.maximum((end - pos + (BLOCK_R - 1)) // BLOCK_R, 0).to(ACC), a.shape)
    has = n > 0
    q = div_rn(a, tl.where(has, n, 1.0))
    m2 = b - a * q
    m2 = tl.where(m2 < 0, 0.0, m2)
    return tl.where(has, c + q, 0.0), tl.where(has, m2, 0.0), n


@jit
def _reduce_rows_kernel(x_ptr, x1_ptr, x2_ptr, y_ptr, y2_ptr, w0_ptr, w1_ptr, w2_ptr, locks_ptr,
                        O, R, chunk, n_total, sxo, sxr, syo, sy2o, p, corr,
                        KIND: tl.constexpr, PRE: tl.constexpr, FIN: tl.constexpr, STAGE: tl.constexpr,
                        HAS_Y: tl.constexpr, HAS_Y2: tl.constexpr, LOADT: tl.constexpr, ACC: tl.constexpr,
                        IDENT: tl.constexpr, IDENT2: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_R: tl.constexpr,
                        LOOP_STAGES: tl.constexpr, EVICT: tl.constexpr, OTHER: tl.constexpr,
                        UNROLL: tl.constexpr = 1, INTERLEAVE: tl.constexpr = False, EVEN: tl.constexpr = False,
                        VAR_SHIFT: tl.constexpr = False, LSE_EX2: tl.constexpr = False,
                        ARG_FAST: tl.constexpr = False, LSE_TILE: tl.constexpr = False,
                        FINISH_LAST: tl.constexpr = False, BLOCK_S: tl.constexpr = 1,
                        AS_WORDS: tl.constexpr = False):
    """Reduce ``x[o, r]`` (offset ``o * sxo + r * sxr``) over r for BLOCK_M rows o; program axis 1 picks the
    chunk of r (one chunk unless the reduction is split). ``AS_WORDS``: ``x_ptr`` (1- or 2-byte elements) is read
    as int32 words, ``O, R, sxo, sxr`` counted in words (the ``WORDS`` paths of :func:`launch_reduction`; the
    input itself is the argument, so a launch plan replays it).

    STAGE 0 writes the outputs, STAGE 1 the partial states ``w[o, sid]`` (and, with ``FINISH_LAST``, the last
    program of each row tile combines them and writes the outputs: :func:`_finish_last`), STAGE 2 reads states
    ``x[o, r]`` (from ``x_ptr``, ``x1_ptr``, ``x2_ptr``) instead of raw elements. Each loop iteration issues the
    loads of ``UNROLL`` tiles before folding them (more bytes in flight per thread, the same lane states).
    ``EVEN`` (set by the host when the chunks tile R and BLOCK_M divides O exactly) drops every mask."""
    if AS_WORDS:
        x_ptr = x_ptr.to(tl.pointer_type(tl.int32), bitcast=True)
    pid = tl.program_id(0)
    sid = tl.program_id(1)
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < O
    lanes = tl.arange(0, BLOCK_R)
    # the program's part of the reduced axis: contiguous chunks [sid * chunk, (sid + 1) * chunk), or (INTERLEAVE)
    # super-tiles of UNROLL tiles dealt round-robin to the num_programs(1) programs, as a grid-stride loop, so the
    # programs in flight read neighbouring memory. Either way a program visits its positions in increasing order
    # (arg-extrema keep the first occurrence; Welford's count is the step).
    if INTERLEAVE:
        r_lo = sid.to(tl.int64) * (BLOCK_R * UNROLL)
        stride = tl.num_programs(1).to(tl.int64) * (BLOCK_R * UNROLL)
        span = R - r_lo
    else:
        r_lo = sid.to(tl.int64) * chunk
        stride = BLOCK_R * UNROLL
        span = chunk
    n_steps = tl.zeros([], tl.int32)
    a, b, c = _init_state(KIND, IDENT, IDENT2, ACC, BLOCK_M, BLOCK_R, STAGE)
    if LSE_TILE > 1:  # group lane states (see the loop)
        ga = tl.full([BLOCK_M, BLOCK_R // LSE_TILE], float("-inf"), tl.float32)
        gb = tl.zeros([BLOCK_M, BLOCK_R // LSE_TILE], tl.float32)
    row_off = rows[:, None] * sxo
    if VAR_SHIFT:  # (the host sets it for raw variance stages without INTERLEAVE only)
        c = _shift_init(x_ptr, row_off + (r_lo + lanes)[None, :] * sxr,
                        row_ok[:, None] & (r_lo + lanes < R)[None, :], LOADT, ACC)
    for r0 in tl.range(0, span, stride, num_stages=LOOP_STAGES):
        base = r_lo + r0
        if INTERLEAVE:
            step = n_steps
            n_steps += UNROLL
        else:
            step = r0 // BLOCK_R
        if STAGE == 2:  # UNROLL is 1 here (the host's rule)
            r = base + lanes
            m = row_ok[:, None] & (r < R)[None, :]
            va, vb, vc = _load_states(x_ptr, x1_ptr, x2_ptr, row_off + r[None, :] * sxr, m, KIND)
            a, b, c = _fold(a, b, c, va, vb, vc, m, step, KIND, STAGE, ACC)
        else:
            # every load of the iteration first (UNROLL tiles in flight per thread), then the folds in order
            r0 = base + lanes
            m0 = row_ok[:, None] & (r0 < R)[None, :]
            raw0 = _load_raw(x_ptr + row_off + r0[None, :] * sxr, m0, EVEN, OTHER, EVICT)
            if UNROLL >= 2:
                r1 = r0 + BLOCK_R
                m1 = row_ok[:, None] & (r1 < R)[None, :]
                raw1 = _load_raw(x_ptr + row_off + r1[None, :] * sxr, m1, EVEN, OTHER, EVICT)
            if UNROLL >= 4:
                r2 = r0 + 2 * BLOCK_R
                r3 = r0 + 3 * BLOCK_R
                m2 = row_ok[:, None] & (r2 < R)[None, :]
                m3 = row_ok[:, None] & (r3 < R)[None, :]
                raw2 = _load_raw(x_ptr + row_off + r2[None, :] * sxr, m2, EVEN, OTHER, EVICT)
                raw3 = _load_raw(x_ptr + row_off + r3[None, :] * sxr, m3, EVEN, OTHER, EVICT)
            if LSE_TILE > 1:  # groups of LSE_TILE neighbouring elements share a lane state (a thread's vector)
                x0 = _lse_group(_lse_tile_x(raw0, m0, EVEN, LOADT), BLOCK_M, BLOCK_R, LSE_TILE)
                t = nan_max_fast(x0, 2)
                if UNROLL >= 2:
                    x1 = _lse_group(_lse_tile_x(raw1, m1, EVEN, LOADT), BLOCK_M, BLOCK_R, LSE_TILE)
                    t = maximum_fast(t, nan_max_fast(x1, 2))
                if UNROLL >= 4:
                    x2 = _lse_group(_lse_tile_x(raw2, m2, EVEN, LOADT), BLOCK_M, BLOCK_R, LSE_TILE)
                    x3 = _lse_group(_lse_tile_x(raw3, m3, EVEN, LOADT), BLOCK_M, BLOCK_R, LSE_TILE)
                    t = maximum_fast(t, maximum_fast(nan_max_fast(x2, 2),
                                                     nan_max_fast(x3, 2)))
                ga, mc, gb = lse_tile_scale(ga, gb, t)
                mc3 = mc[:, :, None]
                e = lse_tile_term(x0, mc3)
                if UNROLL >= 2:
                    e += lse_tile_term(x1, mc3)
                if UNROLL >= 4:
                    e += lse_tile_term(x2, mc3) + lse_tile_term(x3, mc3)
                gb += tl.sum(e, 2)
            elif LSE_TILE:  # (the host sets it for raw logsumexp stages in float32 only): one rescale per step
                x0 = _lse_tile_x(raw0, m0, EVEN, LOADT)
                t = x0
                if UNROLL >= 2:
                    x1 = _lse_tile_x(raw1, m1, EVEN, LOADT)
                    t = maximum_fast(t, x1)
                if UNROLL >= 4:
                    x2 = _lse_tile_x(raw2, m2, EVEN, LOADT)
                    x3 = _lse_tile_x(raw3, m3, EVEN, LOADT)
                    t = maximum_fast(maximum_fast(t, x2), x3)
                a, mc, b = lse_tile_scale(a, b, t)
                e = lse_tile_term(x0, mc)
                if UNROLL >= 2:
                    e += lse_tile_term(x1, mc)
                if UNROLL >= 4:
                    e += lse_tile_term(x2, mc) + lse_tile_term(x3, mc)
                b += e
            else:
                a, b, c = _fold_raw(a, b, c, raw0, r0, m0, step, 1, KIND, PRE, LOADT, ACC, p, EVEN, OTHER, VAR_SHIFT,
                                    LSE_EX2, ARG_FAST)
                if UNROLL >= 2:
                    a, b, c = _fold_raw(a, b, c, raw1, r1, m1, step + 1, 1, KIND, PRE, LOADT, ACC, p, EVEN, OTHER,
                                        VAR_SHIFT, LSE_EX2, ARG_FAST)
                if UNROLL >= 4:
                    a, b, c = _fold_raw(a, b, c, raw2, r2, m2, step + 2, 1, KIND, PRE, LOADT, ACC, p, EVEN, OTHER,
                                        VAR_SHIFT, LSE_EX2, ARG_FAST)
                    a, b, c = _fold_raw(a, b, c, raw3, r3, m3, step + 3, 1, KIND, PRE, LOADT, ACC, p, EVEN, OTHER,
                                        VAR_SHIFT, LSE_EX2, ARG_FAST)
    if (KIND == 4 or KIND == 5) and STAGE != 2:
        b = _lane_index(b, (r_lo + lanes)[None, :], stride, BLOCK_R, UNROLL, INTERLEAVE)
    if VAR_SHIFT:
        a, b, c = _shifted_to_welford(a, b, c, (r_lo + lanes)[None, :], tl.minimum(R, r_lo + chunk), BLOCK_R, ACC)
    if PRE == 8 and STAGE != 2:  # the two 16-bit half counts of each lane (P_NZ_PAIRS)
        a = (a & 0xFFFF) + ((a >> 16) & 0xFFFF)
    if (KIND == 4 or KIND == 5) and STAGE != 2 and ARG_FAST:
        ra, rb = _arg_lanes_fast(a, b, 1, KIND, ACC)
        rc = ra
    elif LSE_TILE > 1:
        ra, rb = tl.reduce((ga, gb), 1, lse_combine)
        rc = ra
    else:
        ra, rb, rc = _lanes(a, b, c, 1, KIND)
    if STAGE == 1:
        nsp = tl.num_programs(1)
        _store_states(w0_ptr, w1_ptr, w2_ptr, rows * nsp + sid, row_ok, ra, rb, rc, KIND)
        if FINISH_LAST:
            _finish_last(w0_ptr, w1_ptr, w2_ptr, y_ptr, y2_ptr, locks_ptr, pid, 0, nsp, rows, row_ok,
                         nsp.to(tl.int64), 1, syo, sy2o, n_total, p, corr, KIND, FIN, HAS_Y, HAS_Y2, ACC, IDENT,
                         IDENT2, BLOCK_M, BLOCK_S, 1)
    else:
        res, res2 = _finish(ra, rb, rc, n_total, p, corr, FIN, ACC)
        if HAS_Y:
            tl.store(y_ptr + rows * syo, convert(res, y_ptr.dtype.element_ty), mask=row_ok)
        if HAS_Y2:
            tl.store(y2_ptr + rows * sy2o, convert(res2, y2_ptr.dtype.element_ty), mask=row_ok)


@jit
def _reduce_cols_kernel(x_ptr, x1_ptr, x2_ptr, y_ptr, y2_ptr, w0_ptr, w1_ptr, w2_ptr, locks_ptr,
                        I, R, chunk, n_total, sxo, sxr, sxi, syo, syi, sy2o, sy2i, p, corr,
                        KIND: tl.constexpr, PRE: tl.constexpr, FIN: tl.constexpr, STAGE: tl.constexpr,
                        HAS_Y: tl.constexpr, HAS_Y2: tl.constexpr, LOADT: tl.constexpr, ACC: tl.constexpr,
                        IDENT: tl.constexpr, IDENT2: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr,
                        LOOP_STAGES: tl.constexpr, EVICT: tl.constexpr, OTHER: tl.constexpr,
                        UNROLL: tl.constexpr = 1, INTERLEAVE: tl.constexpr = False, EVEN: tl.constexpr = False,
                        VAR_SHIFT: tl.constexpr = False, LSE_EX2: tl.constexpr = False,
                        ARG_FAST: tl.constexpr = False, FINISH_LAST: tl.constexpr = False,
                        BLOCK_S: tl.constexpr = 1):
    """Reduce ``x[o, r, i]`` over r for one o and BLOCK_I consecutive i (lanes along i: coalesced when
    ``sxi == 1``); program axis 0 enumerates (o, i-block), axis 1 the chunk of r as in the rows kernel
    (``UNROLL``, ``INTERLEAVE``, ``EVEN`` likewise; ``EVEN`` also needs BLOCK_I to divide I).
    STAGE 1 writes states to ``w[o, sid, i]`` (``FINISH_LAST``: and the last program of each (o, i-block)
    combines them, :func:`_finish_last`)."""
    pid = tl.program_id(0)
    sid = tl.program_id(1)
    nib = tl.cdiv(I, BLOCK_I)
    o = (pid // nib).to(tl.int64)
    cols = (pid % nib).to(tl.int64) * BLOCK_I + tl.arange(0, BLOCK_I)
    col_ok = cols < I
    lanes = tl.arange(0, BLOCK_R)
    # the program's part of the reduced axis: contiguous chunks [sid * chunk, (sid + 1) * chunk), or (INTERLEAVE)
    # super-tiles of UNROLL tiles dealt round-robin to the num_programs(1) programs, as a grid-stride loop, so the
    # programs in flight read neighbouring memory. Either way a program visits its positions in increasing order
    # (arg-extrema keep the first occurrence; Welford's count is the step).
    if INTERLEAVE:
        r_lo = sid.to(tl.int64) * (BLOCK_R * UNROLL)
        stride = tl.num_programs(1).to(tl.int64) * (BLOCK_R * UNROLL)
        span = R - r_lo
    else:
        r_lo = sid.to(tl.int64) * chunk
        stride = BLOCK_R * UNROLL
        span = chunk
    n_steps = tl.zeros([], tl.int32)
    a, b, c = _init_state(KIND, IDENT, IDENT2, ACC, BLOCK_R, BLOCK_I, STAGE)
    col_off = o * sxo + cols[None, :] * sxi
    if VAR_SHIFT:
        c = _shift_init(x_ptr, col_off + (r_lo + lanes)[:, None] * sxr, (r_lo + lanes < R)[:, None] & col_ok[None, :],
                        LOADT, ACC)
    for r0 in tl.range(0, span, stride, num_stages=LOOP_STAGES):
        base = r_lo + r0
        if INTERLEAVE:
            step = n_steps
            n_steps += UNROLL
        else:
            step = r0 // BLOCK_R
        if STAGE == 2:  # UNROLL is 1 here (the host's rule)
            r = base + lanes
            m = (r < R)[:, None] & col_ok[None, :]
            va, vb, vc = _load_states(x_ptr, x1_ptr, x2_ptr, col_off + r[:, None] * sxr, m, KIND)
            a, b, c = _fold(a, b, c, va, vb, vc, m, step, KIND, STAGE, ACC)
        else:
            # every load of the iteration first (UNROLL tiles in flight per thread), then the folds in order
            r0 = base + lanes
            m0 = (r0 < R)[:, None] & col_ok[None, :]
            raw0 = _load_raw(x_ptr + col_off + r0[:, None] * sxr, m0, EVEN, OTHER, EVICT)
            if UNROLL >= 2:
                r1 = r0 + BLOCK_R
                m1 = (r1 < R)[:, None] & col_ok[None, :]
                raw1 = _load_raw(x_ptr + col_off + r1[:, None] * sxr, m1, EVEN, OTHER, EVICT)
            if UNROLL >= 4:
                r2 = r0 + 2 * BLOCK_R
                r3 = r0 + 3 * BLOCK_R
                m2 = (r2 < R)[:, None] & col_ok[None, :]
                m3 = (r3 < R)[:, None] & col_ok[None, :]
                raw2 = _load_raw(x_ptr + col_off + r2[:, None] * sxr, m2, EVEN, OTHER, EVICT)
                raw3 = _load_raw(x_ptr + col_off + r3[:, None] * sxr, m3, EVEN, OTHER, EVICT)
            a, b, c = _fold_raw(a, b, c, raw0, r0, m0, step, 0, KIND, PRE, LOADT, ACC, p, EVEN, OTHER, VAR_SHIFT,
                                LSE_EX2, ARG_FAST)
            if UNROLL >= 2:
                a, b, c = _fold_raw(a, b, c, raw1, r1, m1, step + 1, 0, KIND, PRE, LOADT, ACC, p, EVEN, OTHER,
                                    VAR_SHIFT, LSE_EX2, ARG_FAST)
            if UNROLL >= 4:
                a, b, c = _fold_raw(a, b, c, raw2, r2, m2, step + 2, 0, KIND, PRE, LOADT, ACC, p, EVEN, OTHER,
                                    VAR_SHIFT, LSE_EX2, ARG_FAST)
                a, b, c = _fold_raw(a, b, c, raw3, r3, m3, step + 3, 0, KIND, PRE, LOADT, ACC, p, EVEN, OTHER,
                                    VAR_SHIFT, LSE_EX2, ARG_FAST)
    if (KIND == 4 or KIND == 5) and STAGE != 2:
        b = _lane_index(b, (r_lo + lanes)[:, None], stride, BLOCK_R, UNROLL, INTERLEAVE)
    if VAR_SHIFT:
        a, b, c = _shifted_to_welford(a, b, c, (r_lo + lanes)[:, None], tl.minimum(R, r_lo + chunk), BLOCK_R, ACC)
    if (KIND == 4 or KIND == 5) and STAGE != 2 and ARG_FAST:
        ra, rb = _arg_lanes_fast(a, b, 0, KIND, ACC)
        rc = ra
    else:
        ra, rb, rc = _lanes(a, b, c, 0, KIND)
    if STAGE == 1:
        nsp = tl.num_programs(1)
        _store_states(w0_ptr, w1_ptr, w2_ptr, (o * nsp + sid) * I + cols, col_ok, ra, rb, rc, KIND)
        if FINISH_LAST:
            _finish_last(w0_ptr, w1_ptr, w2_ptr, y_ptr + o * syo, y2_ptr + o * sy2o, locks_ptr, pid, o * nsp * I,
                         nsp, cols, col_ok, 1, I + tl.zeros([], tl.int64), syi, sy2i, n_total, p, corr, KIND, FIN, HAS_Y,
                         HAS_Y2, ACC, IDENT, IDENT2, BLOCK_I, BLOCK_S, 0)
    else:
        res, res2 = _finish(ra, rb, rc, n_total, p, corr, FIN, ACC)
        if HAS_Y:
            tl.store(y_ptr + o * syo + cols * syi, convert(res, y_ptr.dtype.element_ty), mask=col_ok)
        if HAS_Y2:
            tl.store(y2_ptr + o * sy2o + cols * sy2i, convert(res2, y2_ptr.dtype.element_ty), mask=col_ok)


@jit
def _arg_row_kernel(x_ptr, y_ptr, y2_ptr, O, R, sxo, sxr, syo, sy2o,
                    KIND: tl.constexpr, LOADT: tl.constexpr, ACC: tl.constexpr, IDENT: tl.constexpr,
                    HAS_Y: tl.constexpr, HAS_Y2: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    EVICT: tl.constexpr, OTHER: tl.constexpr, EVEN: tl.constexpr):
    """``ARG_ROW`` (config key of ``reduce_rows``: the widest row it takes): arg-extrema of BLOCK_M whole rows of
    ``x[o, r]`` (``R <= BLOCK_N``) held in registers, in two passes over them instead of a (value, step) state
    per lane: plain loads of the tile (no loop, no cp.async), the extreme ``e`` by the NaN-propagating max/min
    (one-value tree), then the first position holding it: the smallest ``r`` with ``x == e`` (so -0.0 and +0.0
    tie: the first of them wins) or, when ``e`` is NaN, with ``x != x`` (the first NaN: a NaN ``e`` implies a
    NaN in the row, and a non-NaN ``e`` implies none; the NaN test runs only in programs whose rows hold a NaN,
    a block-uniform branch, so the common path is a compare, a select and a min per element). The value output is that element reloaded (one load per
    row, an L1/L2 hit) and converted as the loop kernels convert it, so -0.0 and NaN bits are theirs. Masked
    lanes read ``OTHER`` (the identity, +-inf for floats) or are set to the identity, at positions past every
    real one: they lose every tie."""
    pid = tl.program_id(0)
    rows = pid.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < O
    cols = tl.arange(0, BLOCK_N)
    m = row_ok[:, None] & (cols < R)[None, :]
    row_off = rows[:, None] * sxo
    raw = _load_raw(x_ptr + row_off + cols[None, :] * sxr, m, EVEN, OTHER, EVICT)
    v = convert(raw, LOADT).to(ACC)
    if not EVEN and OTHER is None:
        v = tl.where(m, v, IDENT)
    if KIND == 4:
        e = nan_max_fast(v, 1)
    else:
        e = nan_min_fast(v, 1)
    if tl.max((e != e).to(tl.int32), 0) != 0:  # block-uniform: a NaN in one of the rows (rare)
        hit = (v == e[:, None]) | (v != v)
    else:
        hit = v == e[:, None]
    best = tl.min(tl.where(hit, cols[None, :], BLOCK_N), 1)  # < R: the extreme's own position is a hit
    if HAS_Y2:
        tl.store(y2_ptr + rows * sy2o, best.to(tl.int64), mask=row_ok)
    if HAS_Y:
        w = convert(tl.load(x_ptr + rows * sxo + best.to(tl.int64) * sxr, mask=row_ok), LOADT).to(ACC)
        tl.store(y_ptr + rows * syo, convert(w, y_ptr.dtype.element_ty), mask=row_ok)


# ---------------------------------------------------------------------------------------------------------
# Host side of the kernels
# ---------------------------------------------------------------------------------------------------------
def launch_quiet(kernel, grid, *args, **meta):
    """:func:`~nbxtensor.runtime.launcher.launch`, with NumPy's floating-point warnings silenced under the
    interpreter: masked-off lanes compute on filler values (log(0), 0/0) that are discarded, as on the GPU."""
    if interpreting():
        with np.errstate(all="ignore"):
            return launch(kernel, grid, *args, **meta)
    return launch(kernel, grid, *args, **meta)


def loop_meta(cfg: dict) -> dict:
    """A config's launch keywords with the loop settings every kernel of these families takes, normalised:
    ``LOOP_STAGES`` (software-pipelining depth of the main loop, ``tl.range(num_stages=...)``: Triton then
    prefetches the loop's loads with ``cp.async`` into shared memory; 0 or absent leaves the loop unpipelined)
    and ``EVICT`` (the L2 eviction policy of the streamed input loads: ``""``, ``"evict_first"`` or
    ``"evict_last"``)."""
    meta = dict(cfg)
    meta["LOOP_STAGES"] = int(meta.get("LOOP_STAGES") or 0) or None
    meta["EVICT"] = str(meta.get("EVICT") or "")
    return meta


@lru_cache(maxsize=None)
def _sm_count_of(index: int) -> int:
    from .. import cuda
    return int(cuda.get_device_properties(index).multi_processor_count)


def sm_count(device) -> int:
    """Streaming multiprocessors of ``device`` (cached; 4 under the interpreter, so that a persistent grid of
    ``programs_per_sm`` programs per SM still loops there)."""
    if device.type == "cpu":
        return 4
    return _sm_count_of(device.index or 0)


def persistent_grid(blocks: int, cfg: dict, device) -> int:
    """Programs for ``blocks`` units of work: all of them, or at most ``programs_per_sm`` per SM when the config
    asks for a persistent grid (each program then loops over units ``pid, pid + grid, ...``). Pops the key."""
    pps = int(cfg.pop("programs_per_sm", 0) or 0)
    return max(1, min(blocks, pps * sm_count(device))) if pps > 0 else max(1, blocks)


@jit
def out_convert(y, DT: tl.constexpr, HW_CVT: tl.constexpr):
    """``y`` (float32/float64) converted to the output dtype DT for a store. With HW_CVT (the compiled tiers) a
    float32 -> bfloat16 conversion is the hardware's ``cvt.rn.bf16.f32`` (round to nearest even, subnormals
    kept, overflow to inf: the bits of :func:`~.triton_helpers.convert` but for NaN payloads, about 8 integer
    instructions per element fewer); the interpreter, which truncates there, takes :func:`convert`."""
    if HW_CVT and DT == tl.bfloat16 and y.dtype == tl.float32:
        r = y.to(tl.bfloat16)
    else:
        r = convert(y, DT)
    return r


def acc_dtype(kind: int, d: DType) -> DType:
    """The dtype a reduction of ``kind`` accumulates ``d`` in: float32 for float16/bfloat16/float32, float64
    for float64; int64 for integers and bool (int32 for the 0/1 states of all/any)."""
    if d.kind == T.KIND_FLOAT:
        return T.float64 if d is T.float64 else T.float32
    return T.int64


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def tmp_like_groups(o: Tensor, groups) -> Tensor:
    """A new tensor of ``o``'s shape and dtype laid out in the canonical order of ``groups`` (outer, reduced,
    inner, then the size-1 dims), so that its kept groups collapse."""
    order = [d for g in groups for d in g]
    order += [d for d in range(o.ndim) if d not in order]
    inv = [order.index(d) for d in range(o.ndim)]
    return new_empty([o.shape[d] for d in order], o.dtype, o.device).permute(*inv) if o.ndim else \
        new_empty((), o.dtype, o.device)


def launch_reduction(x: Tensor, dims: tuple[int, ...], y: Tensor | None, y2: Tensor | None, *, kind: int,
                     pre: int = P_NONE, fin: int = F_NONE, p: float = 0.0, corr: float = 0.0,
                     acc: DType | None = None, loadt: DType | None = None, op: str = "reduce") -> None:
    """Run a reduction of ``x`` over ``dims`` into ``y`` (and ``y2``) with the Triton kernels.

    Args:
        x: the input (any strides, >= 1 element).
        dims: reduced dims (sorted; the reduced extent must be > 0).
        y, y2: outputs of ``x``'s rank with size 1 at ``dims`` (``keepdim`` views), or ``None``.
        kind, pre, fin: the state kind, per-element transform and finalisation (module constants).
        p, corr: the norm's order and the variance's correction.
        acc, loadt: accumulation dtype and the dtype raw elements are converted to first (default
            :func:`acc_dtype`).
        op: the name used for config lookups and messages.
    """
    dev = x.device
    nd = x.ndim
    flags = [d in dims for d in range(nd)]
    can = canonical3(x.shape, x.stride(), flags)
    if can is None:  # kept groups interleave reduced ones in memory: copy to (kept..., reduced...)
        perm = [d for d in range(nd) if not flags[d]] + list(dims)
        x = x.permute(*perm).contiguous()
        y = y.permute(*perm) if y is not None else None
        y2 = y2.permute(*perm) if y2 is not None else None
        flags = [flags[d] for d in perm]
        can = canonical3(x.shape, x.stride(), flags)
        assert can is not None
    (O, R, I), (sxo, sxr, sxi), groups = can
    acc = acc or acc_dtype(kind, x.dtype)
    loadt = loadt or acc
    outs = []
    for t in (y, y2):
        if t is None:
            outs.append((None, None, 0, 0))
            continue
        so, si = collapse_dims(t.shape, t.stride(), groups[0]), collapse_dims(t.shape, t.stride(), groups[2])
        if so is None or si is None:
            tmp = tmp_like_groups(t, groups)
            so, si = collapse_dims(tmp.shape, tmp.stride(), groups[0]), collapse_dims(tmp.shape, tmp.stride(),
                                                                                      groups[2])
            outs.append((tmp, t, so, si))
        else:
            outs.append((t, None, so, si))
    (ya, ycopy, syo, syi), (y2a, y2copy, sy2o, sy2i) = outs
    any_out = ya if ya is not None else y2a
    ident, ident2 = _identities(kind, acc)
    # the neutral element read by masked lanes when one exists in x's dtype (else the fold masks them)
    other = None
    if pre == P_NONE and (kind == K_SUM or kind in (K_PROD, K_MAX, K_MIN, K_ARGMAX, K_ARGMIN)
                          and x.dtype.kind == T.KIND_FLOAT):
        other = ident
    consts = dict(KIND=kind, PRE=pre, FIN=fin, HAS_Y=ya is not None, HAS_Y2=y2a is not None,
                  LOADT=TL_DTYPES[loadt.name], ACC=TL_DTYPES[acc.name], IDENT=ident, IDENT2=ident2, OTHER=other)
    nstate = _N_STATES[kind]
    if I == 1:
        cfg = launch_config("reduce_rows", dev, dtypes=(x.dtype,), rows=O, cols=R, state=nstate)
        words = cfg.pop("WORDS", False)
        if words and pre == P_NONZERO and kind == K_SUM and x.dtype in (T.float16, T.bfloat16) and acc is T.int64 \
                and sxr == 1 and R % 2 == 0 and (O == 1 or sxo % 2 == 0) and x._offset % 2 == 0 \
                and cdiv(R // 2, cfg["BLOCK_R"]) < 2 ** 16:
            # count_nonzero of float16/bfloat16 along a contiguous axis: int32 words of 2 elements, counted two at a
            # time in 16-bit halves (P_NZ_PAIRS: a half is nonzero iff its 15 magnitude bits are, so -0.0 counts
            # as zero; a lane's halves count at most its steps, < 2**16 here), the halves added after the loop
            R, sxo = R // 2, sxo // 2 if O > 1 else sxo
            consts["AS_WORDS"] = True  # the kernel reads x's memory as int32 words (x itself is the argument)
            loadt = acc = T.int32
            pre = P_NZ_PAIRS
            consts.update(PRE=pre, LOADT=TL_DTYPES[loadt.name], ACC=TL_DTYPES[acc.name])
        elif words and pre == P_NONZERO and kind in (K_MAX, K_MIN) and x.dtype.itemsize == 1 \
                and sxr == 1 and R % 4 == 0 and (O == 1 or sxo % 4 == 0) and x._offset % 4 == 0:
            # all/any of 1-byte elements (bool, uint8, int8) along a contiguous axis: read int32 words of 4
            # elements (128-bit loads of 16 elements; a word is nonzero iff one of its bytes is, and has no
            # zero byte iff all of them are nonzero: P_NO_ZERO_BYTE) instead of one byte widened to int64 each
            R, sxo = R // 4, sxo // 4 if O > 1 else sxo
            consts["AS_WORDS"] = True
            loadt = T.int32
            if kind == K_MIN:
                pre = P_NO_ZERO_BYTE
            consts.update(PRE=pre, LOADT=TL_DTYPES[loadt.name])
        arg_row = int(cfg.pop("ARG_ROW", 0) or 0)
        row_warps, row_m = cfg.pop("ARG_ROW_WARPS", None), cfg.pop("ARG_ROW_M", None)
        if arg_row and kind in (K_ARGMAX, K_ARGMIN) and pre == P_NONE and R <= arg_row:
            # arg-extrema of rows that fit in registers: two passes over the tile (_arg_row_kernel), no split;
            # ARG_ROW_WARPS / ARG_ROW_M (optional) its warps and rows per program, so that a rule shared with other
            # states (logsumexp's) keeps their tile
            bn = 1 << (R - 1).bit_length()
            meta = loop_meta(cfg)
            meta = {k: meta[k] for k in ("num_warps", "maxnreg", "BLOCK_M", "EVICT") if k in meta}
            if row_warps:
                meta["num_warps"] = int(row_warps)
            if row_m:
                meta["BLOCK_M"] = int(row_m)
            meta.update(KIND=kind, LOADT=consts["LOADT"], ACC=consts["ACC"], IDENT=ident, HAS_Y=ya is not None,
                        HAS_Y2=y2a is not None, BLOCK_N=bn, OTHER=other,
                        EVEN=bool(cfg.get("EVEN", False)) and R == bn and O % meta["BLOCK_M"] == 0)
            ya_, y2a_ = (ya if ya is not None else any_out), (y2a if y2a is not None else any_out)
            launch_quiet(_arg_row_kernel, (cdiv(O, meta["BLOCK_M"]),), x, ya_, y2a_, O, R, sxo, sxr, syo, sy2o,
                         **meta)
            if ycopy is not None:
                ycopy.copy_(ya)
            if y2copy is not None:
                y2copy.copy_(y2a)
            return
        base = cdiv(O, cfg["BLOCK_M"])
    else:
        cfg = launch_config("reduce_cols", dev, dtypes=(x.dtype,), rows=R, cols=I, state=nstate)
        base = O * cdiv(I, cfg["BLOCK_I"])
    if cfg.pop("COUNT32", False) and kind == K_SUM and pre == P_NONZERO and acc is T.int64 \
            and R < 2 ** 31:
        # count_nonzero: count in int32 (lanes, tree and a split's workspace; every count <= R < 2**31), written
        # to the int64 output; the same integers (int64 adds per element cost a carry and a select each)
        acc = T.int32
        consts["ACC"] = TL_DTYPES[acc.name]
    split, chunk = split_plan(cfg, base, R, dev)
    ya_, y2a_ = (ya if ya is not None else any_out), (y2a if y2a is not None else any_out)
    if split == 1:
        _launch_stage(x, x, x, ya_, y2a_, (x, x, x), (O, R, I), (sxo, sxr, sxi), (syo, syi, sy2o, sy2i), chunk,
                      R, split, cfg, consts, stage=0, p=p, corr=corr)
    else:
        ws_dt = [acc, T.int64 if kind in (K_ARGMAX, K_ARGMIN) else acc, acc]
        ws = [scratch(new_empty((O, split, I), d, dev)) for d in ws_dt[:nstate]]  # (per call, for a plan)
        ws += ws[:1] * (3 - nstate)  # unused state slots: any pointer
        if cfg.pop("FINISH_LAST", False):
            # one launch: the last program of each output tile combines the tile's states (_finish_last), on
            # arrival counters looked up per call (a plan's too), zero between launches
            from .matmul import _locks
            n_tiles = cdiv(O, cfg["BLOCK_M"]) if I == 1 else O * cdiv(I, cfg["BLOCK_I"])
            locks = _locks(dev, n_tiles)
            scratch(locks, lambda: _locks(dev, n_tiles))
            kept_block = cfg["BLOCK_M"] if I == 1 else cfg["BLOCK_I"]
            consts = dict(consts, FINISH_LAST=True,
                          BLOCK_S=max(1, min(1 << (split - 1).bit_length(), _FINISH_TILE // kept_block)))
            _launch_stage(x, x, x, ya_, y2a_, ws, (O, R, I), (sxo, sxr, sxi), (syo, syi, sy2o, sy2i), chunk, R,
                          split, cfg, consts, stage=1, p=p, corr=corr, locks=locks)
            if ycopy is not None:
                ycopy.copy_(ya)
            if y2copy is not None:
                y2copy.copy_(y2a)
            return
        _launch_stage(x, x, x, ya_, y2a_, ws, (O, R, I), (sxo, sxr, sxi), (syo, syi, sy2o, sy2i), chunk, R, split,
                      cfg, consts, stage=1, p=p, corr=corr)
        # second stage: reduce the (O, split, I) states with the kernel that fits I
        if I == 1:
            cfg2 = launch_config("reduce_rows", dev, dtypes=(acc,), rows=O, cols=split, state=nstate)
        else:
            cfg2 = launch_config("reduce_cols", dev, dtypes=(acc,), rows=split, cols=I, state=nstate)
        for k in _SPLIT_KEYS + ("LOOP_STAGES", "UNROLL", "INTERLEAVE"):
            # a few states per output: nothing to prefetch or interleave, only shared memory to spend
            cfg2.pop(k, None)
        chunk2 = cdiv(split, cfg2["BLOCK_R"]) * cfg2["BLOCK_R"]
        _launch_stage(ws[0], ws[1], ws[2], ya_, y2a_, ws, (O, split, I), (split * I, I, 1), (syo, syi, sy2o, sy2i),
                      chunk2, R, 1, cfg2, consts, stage=2, p=p, corr=corr)
    if ycopy is not None:
        ycopy.copy_(ya)
    if y2copy is not None:
        y2copy.copy_(y2a)


# values a kind's lane state holds (a, b, c): the launch key's ``state`` fact, and the workspace arrays of a split
_N_STATES = {K_SUM: 1, K_PROD: 1, K_MAX: 1, K_MIN: 1, K_ARGMAX: 2, K_ARGMIN: 2, K_MINMAX: 2, K_WELFORD: 3, K_LSE: 2,
             K_NANMEAN: 2}
_SPLIT_KEYS = ("target_programs", "target_per_sm", "min_chunk")
_FINISH_TILE = 2048  # states per tile of FINISH_LAST's combine (kept positions x splits)


def split_plan(cfg: dict, base: int, R: int, device) -> tuple[int, int]:
    """``(split, chunk)``: into how many chunks of ``chunk`` elements (a multiple of the config's super-tile
    ``BLOCK_R * UNROLL``) a reduced extent ``R`` is split, for ``base`` programs per chunk. Pops the split keys
    of ``cfg``: ``target_programs`` (programs wanted in all), or ``target_per_sm`` (that many per SM, which
    overrides it), and ``min_chunk`` (the fewest elements per chunk). Split only when ``base`` is below the
    target; at most 65535 chunks (CUDA's grid y limit)."""
    target, per_sm = cfg.pop("target_programs", 0), cfg.pop("target_per_sm", 0)
    min_chunk = cfg.pop("min_chunk", 1)
    if per_sm:
        target = int(per_sm * sm_count(device))
    split = 1
    if base < target and R > min_chunk:
        split = min(cdiv(target, base), cdiv(R, min_chunk), 65535)
    sup = cfg["BLOCK_R"] * int(cfg.get("UNROLL", 1) or 1)
    chunk = cdiv(cdiv(R, split), sup) * sup
    return cdiv(R, chunk), chunk


def _launch_stage(x0, x1, x2, y, y2, ws, sizes, sx, sy, chunk, n_total, split, cfg, consts, *, stage, p, corr,
                  locks=None):
    O, R, I = sizes
    sxo, sxr, sxi = sx
    syo, syi, sy2o, sy2i = sy
    meta = loop_meta(cfg)
    meta.update(consts)
    meta.update(ieee_options())  # libdevice (pow) without flush-to-zero, as nvcc's code
    meta["STAGE"] = stage
    if stage == 2:
        meta.pop("AS_WORDS", None)  # (the states are int32 already)
    unroll = int(meta.get("UNROLL", 1) or 1)
    check(unroll in (1, 2, 4), lambda: f"reduce: config UNROLL must be 1, 2 or 4, got {unroll}", ValueError)
    meta["UNROLL"] = unroll
    meta["INTERLEAVE"] = bool(meta.get("INTERLEAVE", False)) and split > 1
    sup = meta["BLOCK_R"] * unroll
    # EVEN (a config setting: masks dropped where the shape allows) needs every chunk to hold whole super-tiles of R
    # (interleaved: every program as many) and the kept axis whole blocks
    r_even = R % (sup * split) == 0 if meta["INTERLEAVE"] else R == chunk * split and chunk % sup == 0
    kept_even = O % meta["BLOCK_M"] == 0 if I == 1 else I % meta["BLOCK_I"] == 0
    meta["EVEN"] = bool(meta.get("EVEN", False)) and stage != 2 and r_even and kept_even
    # VAR_SHIFT (shifted sums in the raw loop of a variance, see _fold): contiguous chunks only
    meta["VAR_SHIFT"] = bool(meta.get("VAR_SHIFT", False)) and meta["KIND"] == K_WELFORD and stage != 2 \
        and not meta["INTERLEAVE"]
    # LSE_EX2 (logsumexp's raw fold through ex2.approx, see lse_step_ex2): float32 accumulation, raw stages
    meta["LSE_EX2"] = bool(meta.get("LSE_EX2", False)) and meta["KIND"] == K_LSE and stage != 2 \
        and meta["ACC"] == tl.float32
    # ARG_FAST (arg-extrema: the cheaper fold predicate and the two one-value trees, see _fold): raw stages
    meta["ARG_FAST"] = bool(meta.get("ARG_FAST", False)) and meta["KIND"] in (K_ARGMAX, K_ARGMIN) and stage != 2
    # LSE_TILE (logsumexp's raw rows fold: one rescale per step, see lse_tile_scale): float32, rows kernel, raw stages
    lse_tile = bool(meta.get("LSE_TILE", False)) and meta["KIND"] == K_LSE and stage != 2 \
        and meta["ACC"] == tl.float32 and I == 1
    if lse_tile:  # True: one state per tile element; an int G > 1: per group of G neighbours (a power of two)
        g = int(meta.get("LSE_TILE"))
        meta["LSE_TILE"] = g if g > 1 and meta["BLOCK_R"] % g == 0 else True
        meta["LSE_EX2"] = False
    else:
        meta.pop("LSE_TILE", None)
    meta.pop("COUNT32", None)  # (read by launch_reduction)
    if locks is None:  # (launch_reduction passes FINISH_LAST in consts, with the counters)
        meta.pop("FINISH_LAST", None)
    meta.pop("WORDS", None)    # (read by launch_reduction for the first stage; an override lays it on the second's)
    for k in ("ARG_ROW", "ARG_ROW_WARPS", "ARG_ROW_M"):  # (read by launch_reduction; an override lays them on
        meta.pop(k, None)                                 # every rule's answer)
    grid = (cdiv(O, meta["BLOCK_M"]), split) if I == 1 else (O * cdiv(I, meta["BLOCK_I"]), split)
    check(grid[0] < 2 ** 31, lambda: f"reduce: {grid[0]} programs exceed CUDA's grid limit (2**31 - 1)",
          NotImplementedError)
    lk = locks if locks is not None else x0  # (any pointer when there are no counters)
    if I == 1:
        launch_quiet(_reduce_rows_kernel, grid, x0, x1, x2, y, y2, ws[0], ws[1], ws[2], lk, O, R, chunk, n_total,
                     sxo, sxr, syo, sy2o, float(p), float(corr), **meta)
    else:
        launch_quiet(_reduce_cols_kernel, grid, x0, x1, x2, y, y2, ws[0], ws[1], ws[2], lk, I, R, chunk, n_total,
                     sxo, sxr, sxi, syo, syi, sy2o, sy2i, float(p), float(corr), **meta)


def _identities(kind: int, acc: DType):
    f = acc.kind == T.KIND_FLOAT
    bits = acc.itemsize * 8
    lo = float("-inf") if f else -(2 ** (bits - 1))
    hi = float("inf") if f else 2 ** (bits - 1) - 1
    zero = 0.0 if f else 0
    return {K_SUM: (zero, zero), K_NANMEAN: (zero, zero), K_WELFORD: (zero, zero), K_PROD: (1.0 if f else 1, zero),
            K_MAX: (lo, zero), K_MIN: (hi, zero), K_ARGMAX: (lo, _BIG_INDEX), K_ARGMIN: (hi, _BIG_INDEX),
            K_MINMAX: (hi, lo), K_LSE: (float("-inf"), 0.0)}[kind]


# ---------------------------------------------------------------------------------------------------------
# CPU implementations (NumPy, in the kernels' accumulation dtypes)
# ---------------------------------------------------------------------------------------------------------
def _np_acc(d: DType) -> DType:
    if d.kind == T.KIND_FLOAT:
        return T.float64 if d is T.float64 else T.float32
    return T.int64


def _last(a: np.ndarray, dims) -> np.ndarray:
    """``a`` with the reduced dims moved last and flattened: a C-contiguous ``(kept..., K)`` array, so NumPy
    reduces contiguous rows (pairwise summation for floats)."""
    if a.ndim == 0:
        return a.reshape(1)
    kept = [d for d in range(a.ndim) if d not in dims]
    k = numel([a.shape[d] for d in dims])
    return np.ascontiguousarray(np.transpose(a, kept + list(dims))).reshape([a.shape[d] for d in kept] + [k])


def _rows(x: Tensor, dims, acc: DType) -> np.ndarray:
    a = host_view(x)
    if x.dtype is not acc:
        a = cast_array(a, x.dtype, acc)
    return _last(a, dims)


def _write(y: Tensor, vals, src: DType) -> None:
    """Write the reduced values (kept-dims shape, dtype ``src``) into keepdim-shaped ``y``."""
    v = np.asarray(vals).reshape(y.shape)
    host_view(y)[...] = cast_array(v, src, y.dtype) if src is not y.dtype else v


def _cpu_simple(x: Tensor, dims, y: Tensor, *, how: str, p: float = 0.0) -> None:
    if how in ("all", "any", "count_nonzero", "norm0"):
        nz = _last(np.asarray(host_view(x) != 0), dims)
        if how == "all":
            _write(y, nz.all(axis=-1), T.bool_)
        elif how == "any":
            _write(y, nz.any(axis=-1), T.bool_)
        else:
            acc = T.int64 if how == "count_nonzero" else _np_acc(x.dtype)
            _write(y, np.add.reduce(nz, axis=-1, dtype=acc.numpy), acc)
        return
    acc = _np_acc(x.dtype)
    a = _rows(x, dims, acc)
    t = acc.numpy.type
    with np.errstate(all="ignore"):
        if how == "sum":
            r = np.add.reduce(a, axis=-1)
        elif how == "nansum":
            r = np.add.reduce(np.where(np.isnan(a), t(0), a) if acc.kind == T.KIND_FLOAT else a, axis=-1)
        elif how == "mean":
            r = np.add.reduce(a, axis=-1) / t(a.shape[-1])
        elif how == "nanmean":
            ok = ~np.isnan(a)
            r = np.add.reduce(np.where(ok, a, t(0)), axis=-1) / np.add.reduce(ok, axis=-1, dtype=acc.numpy)
        elif how == "prod":
            r = np.multiply.reduce(a, axis=-1)
        elif how in ("amax", "norminf"):
            r = np.max(np.abs(a) if how == "norminf" else a, axis=-1)
        elif how in ("amin", "normninf"):
            r = np.min(np.abs(a) if how == "normninf" else a, axis=-1)
        elif how == "logsumexp":
            m = np.max(a, axis=-1, keepdims=True)
            ms = np.where(np.isfinite(m), m, t(0))
            r = np.log(np.add.reduce(np.exp(a - ms), axis=-1)) + ms[..., 0]
        elif how == "norm1":
            r = np.add.reduce(np.abs(a), axis=-1)
        elif how == "norm2":
            r = np.sqrt(np.add.reduce(a * a, axis=-1))
        elif how == "normp":
            r = np.power(np.add.reduce(np.power(np.abs(a), t(p)), axis=-1), t(1.0 / p))
        else:
            fail(f"reduction cpu: unknown reduction {how!r}", ValueError)
    _write(y, np.asarray(r, dtype=acc.numpy), acc)


def _cpu_var(x: Tensor, dims, y: Tensor | None, y2: Tensor | None, *, corr: float, take_sqrt: bool) -> None:
    """Two passes over each row (mean, then the sum of squared deviations) in the accumulation dtype."""
    acc = _np_acc(x.dtype)
    a = _rows(x, dims, acc)
    t = acc.numpy.type
    n = a.shape[-1]
    with np.errstate(all="ignore"):
        mean = np.add.reduce(a, axis=-1) / t(n)
        d = a - mean[..., None]
        m2 = np.add.reduce(d * d, axis=-1)
        mean = np.where(np.isnan(m2), m2, mean)  # the kernels' rule for var_mean's mean (see _finish)
        var = m2 / t(max(n - corr, 0.0))
        if take_sqrt:
            var = np.sqrt(var)
    if y is not None:
        _write(y, np.asarray(var, dtype=acc.numpy), acc)
    if y2 is not None:
        _write(y2, np.asarray(mean, dtype=acc.numpy), acc)


def _cpu_arg(x: Tensor, dims, y: Tensor | None, yi: Tensor | None, *, largest: bool) -> None:
    """Values and first-occurrence indices of the extreme over the reduced dims; NaN is the extreme."""
    acc = _np_acc(x.dtype)
    a = _rows(x, dims, acc)
    if acc.kind == T.KIND_FLOAT:
        nan = np.isnan(a)
        key = np.where(nan, -np.inf, a)
        idx = np.argmax(key, axis=-1) if largest else np.argmin(np.where(nan, np.inf, a), axis=-1)
        idx = np.where(nan.any(axis=-1), np.argmax(nan, axis=-1), idx)
    else:
        idx = np.argmax(a, axis=-1) if largest else np.argmin(a, axis=-1)
    if y is not None:
        _write(y, np.take_along_axis(a, idx[..., None], axis=-1)[..., 0], acc)
    if yi is not None:
        _write(yi, idx.astype(np.int64), T.int64)


def _cpu_aminmax(x: Tensor, dims, ymin: Tensor, ymax: Tensor) -> None:
    acc = _np_acc(x.dtype)
    a = _rows(x, dims, acc)
    _write(ymin, np.min(a, axis=-1), acc)
    _write(ymax, np.max(a, axis=-1), acc)


# ---------------------------------------------------------------------------------------------------------
# Triton implementations (same contract as the cpu ones)
# ---------------------------------------------------------------------------------------------------------
_SIMPLE = {  # how -> (kind, pre, fin)
    "sum": (K_SUM, P_NONE, F_NONE), "nansum": (K_SUM, P_NAN_TO_ZERO, F_NONE), "mean": (K_SUM, P_NONE, F_DIV_N),
    "nanmean": (K_NANMEAN, P_NONE, F_RATIO), "prod": (K_PROD, P_NONE, F_NONE), "amax": (K_MAX, P_NONE, F_NONE),
    "amin": (K_MIN, P_NONE, F_NONE), "all": (K_MIN, P_NONZERO, F_NONE), "any": (K_MAX, P_NONZERO, F_NONE),
    "count_nonzero": (K_SUM, P_NONZERO, F_NONE), "logsumexp": (K_LSE, P_NONE, F_LSE),
    "norm0": (K_SUM, P_NONZERO, F_NONE), "norm1": (K_SUM, P_ABS, F_NONE), "norm2": (K_SUM, P_SQUARE, F_SQRT),
    "norminf": (K_MAX, P_ABS, F_NONE), "normninf": (K_MIN, P_ABS, F_NONE), "normp": (K_SUM, P_POW, F_ROOT_P),
}


def _triton_simple(x: Tensor, dims, y: Tensor, *, how: str, p: float = 0.0) -> None:
    kind, pre, fin = _SIMPLE[how]
    if how == "nansum" and x.dtype.kind != T.KIND_FLOAT:
        pre = P_NONE
    acc = loadt = acc_dtype(kind, x.dtype)
    if how in ("all", "any", "count_nonzero"):
        # compare in a dtype that keeps zero-ness exactly, count in int32 (0/1 states) or int64
        loadt = acc_dtype(K_SUM, x.dtype)
        acc = T.int64 if how == "count_nonzero" else T.int32
    launch_reduction(x, dims, y, None, kind=kind, pre=pre, fin=fin, p=p, acc=acc, loadt=loadt, op=how)


def _triton_var(x: Tensor, dims, y: Tensor | None, y2: Tensor | None, *, corr: float, take_sqrt: bool) -> None:
    launch_reduction(x, dims, y, y2, kind=K_WELFORD, fin=F_STD if take_sqrt else F_VAR, corr=corr, op="var")


def _triton_arg(x: Tensor, dims, y: Tensor | None, yi: Tensor | None, *, largest: bool) -> None:
    launch_reduction(x, dims, y, yi, kind=K_ARGMAX if largest else K_ARGMIN, op="argmax")


def _triton_aminmax(x: Tensor, dims, ymin: Tensor, ymax: Tensor) -> None:
    launch_reduction(x, dims, ymin, ymax, kind=K_MINMAX, op="aminmax")


# ---------------------------------------------------------------------------------------------------------
# Oracles: float64 NumPy (int64 for integer sums and products), called with the public arguments
# ---------------------------------------------------------------------------------------------------------
def _o_in(a: np.ndarray, dtype=None) -> np.ndarray:
    """The input as float64 (int64 for integers and bool), after ``dtype=`` when given."""
    a = np.asarray(a)
    if dtype is not None:
        a = cast_array(a, T.dtype_from(a.dtype), T.dtype_from(dtype))
    if a.dtype.kind in "biu":
        return a.astype(np.int64)
    return a.astype(np.float64)


def _o_dims(a: np.ndarray, dim, allow_tuple=True) -> tuple:
    return reduce_dims(dim, a.ndim, "oracle", allow_tuple=allow_tuple)


def _o_shape(r: np.ndarray, a: np.ndarray, dims, keepdim: bool) -> np.ndarray:
    return np.asarray(r).reshape(_out_shape(a.shape, dims, keepdim))


def _oracle_simple(how: str):
    def oracle(a: np.ndarray, dim=None, keepdim=False, dtype=None, **params):
        x = _o_in(a, dtype)
        dims = _o_dims(a, dim)
        ax = tuple(dims)
        with np.errstate(all="ignore"):
            if how == "sum":
                r = np.sum(x, axis=ax)
            elif how == "nansum":
                r = np.nansum(x, axis=ax) if x.dtype.kind == "f" else np.sum(x, axis=ax)
            elif how == "mean":
                r = np.sum(x, axis=ax) / float(numel([a.shape[d] for d in ax]))
            elif how == "nanmean":
                r = np.nansum(x, axis=ax) / np.sum(~np.isnan(x), axis=ax)
            elif how == "prod":
                r = np.prod(x, axis=ax)
            elif how == "amax":
                r = np.max(x, axis=ax)
            elif how == "amin":
                r = np.min(x, axis=ax)
            elif how == "all":
                r = np.all(x != 0, axis=ax)
            elif how == "any":
                r = np.any(x != 0, axis=ax)
            elif how == "count_nonzero":
                r = np.sum(x != 0, axis=ax).astype(np.int64)
            elif how == "logsumexp":
                x = x.astype(np.float64)
                m = np.max(x, axis=ax, keepdims=True)
                ms = np.where(np.isfinite(m), m, 0.0)
                r = np.log(np.sum(np.exp(x - ms), axis=ax, keepdims=True)) + ms
            else:
                fail(f"oracle: unknown reduction {how!r}", ValueError)
        return _o_shape(r, a, dims, keepdim)
    return oracle


def _oracle_norm(a: np.ndarray, ord=2, dim=None, keepdim=False, dtype=None, p=None, **params) -> np.ndarray:
    if p is not None:
        ord = 2 if p == "fro" else p
    x = np.abs(_o_in(a, dtype).astype(np.float64))
    dims = _o_dims(a, dim)
    with np.errstate(all="ignore"):
        if ord == 0:
            r = np.sum(x != 0, axis=dims).astype(np.float64)
        elif ord == math.inf:
            r = np.max(x, axis=dims)
        elif ord == -math.inf:
            r = np.min(x, axis=dims)
        else:
            r = np.sum(x ** float(ord), axis=dims) ** (1.0 / float(ord))
    return _o_shape(r, a, dims, keepdim)


def _oracle_var(take_sqrt: bool, with_mean: bool):
    def oracle(a: np.ndarray, dim=None, keepdim=False, correction=None, unbiased=None, **params):
        corr = 1.0 if correction is None and unbiased is None else \
            (float(correction) if correction is not None else float(bool(unbiased)))
        x = _o_in(a).astype(np.float64)
        dims = _o_dims(a, dim)
        n = numel([a.shape[d] for d in dims])
        with np.errstate(all="ignore"):
            mean = np.mean(x, axis=dims, keepdims=True)
            m2 = np.sum((x - mean) ** 2, axis=dims, keepdims=True)
            mean = np.where(np.isnan(m2), np.nan, mean)  # documented rule: NaN variance -> NaN mean
            v = m2 / max(n - corr, 0.0)
            if take_sqrt:
                v = np.sqrt(v)
        v, mean = _o_shape(v, a, dims, keepdim), _o_shape(mean, a, dims, keepdim)
        return (v, mean) if with_mean else v
    return oracle


def _oracle_arg(largest: bool, with_values: bool):
    def oracle(a: np.ndarray, dim=None, keepdim=False, **params):
        x = _o_in(a)
        if dim is None and with_values:  # max(x): the value only (NaN if any element is NaN)
            return np.asarray(np.max(x) if largest else np.min(x))
        if dim is None:  # flat index in logical (row-major) order
            flat = x.reshape(-1)
            idx = np.argmax(flat) if largest else np.argmin(flat)  # first occurrence; the first NaN wins
            shape = (1,) * a.ndim if keepdim else ()
            return np.asarray(idx, dtype=np.int64).reshape(shape)
        dims = _o_dims(a, dim, allow_tuple=False)
        if not dims:
            idx, vals = np.zeros(a.shape, np.int64), x
        else:
            d = dims[0]
            idx = np.argmax(x, axis=d) if largest else np.argmin(x, axis=d)
            vals = np.take_along_axis(x, np.expand_dims(idx, d), axis=d)
            idx, vals = _o_shape(idx, a, dims, keepdim).astype(np.int64), _o_shape(vals, a, dims, keepdim)
        return (vals, idx) if with_values else idx
    return oracle


def _oracle_aminmax(a: np.ndarray, dim=None, keepdim=False, **params):
    x = _o_in(a)
    dims = _o_dims(a, dim, allow_tuple=False)
    return (_o_shape(np.min(x, axis=dims), a, dims, keepdim), _o_shape(np.max(x, axis=dims), a, dims, keepdim))


# ---------------------------------------------------------------------------------------------------------
# Drivers: argument checks, dtypes, outputs, empty reductions; then the device implementation
# ---------------------------------------------------------------------------------------------------------
def check_input(x, fn: str, name: str = "input") -> None:
    check(isinstance(x, Tensor), lambda: f"{fn}(): argument '{name}' (position 1) must be Tensor, not "
          f"{type(x).__name__}", TypeError)


def refuse_dtype(d: DType, fn: str, allowed) -> None:
    check(d in allowed, lambda: f"{fn}: \"{fn}\" not implemented for '{dispatch.torch_dtype_name(d)}' ({d.name}); "
          f"supported dtypes: {[a.name for a in allowed]}", NotImplementedError)


# C++ names of the scalar types, as ATen's "Expected out tensor to have dtype float, but got c10::Half instead"
_CPP_NAMES = {"bool": "bool", "uint8": "unsigned char", "int8": "signed char", "int16": "short int", "int32": "int",
              "int64": "long int", "float16": "c10::Half", "bfloat16": "c10::BFloat16", "float32": "float",
              "float64": "double"}


def _cpp(d: DType) -> str:
    return _CPP_NAMES.get(d.name, dispatch.torch_dtype_name(d))


def out_mismatch(fn: str, expected: DType, got: DType, style: str = "out") -> str:
    """PyTorch's message for an ``out=`` (or ``dtype=``) that must have dtype ``expected`` but has ``got``:
    ``style`` "out" (ATen's ``check_out``: "Expected out tensor to have dtype double, but got float instead"),
    "input" (``amax``/``amin``), "scalar_type" (``cummax``, ``logcumsumexp``)."""
    if style == "input":
        return (f"{fn}: Expected the dtype for input and out to match, but got {dispatch.torch_dtype_name(expected)} "
                f"for input's dtype and {dispatch.torch_dtype_name(got)} for out's dtype.")
    if style == "scalar_type":
        return (f"{fn}: expected scalar_type {dispatch.torch_dtype_name(expected)} but found "
                f"{dispatch.torch_dtype_name(got)} (out= must have that dtype)")
    return f"{fn}: Expected out tensor to have dtype {_cpp(expected)}, but got {_cpp(got)} instead"


def new_out(out, shape, dtype: DType, dev, fn: str, *, exact: bool, style: str = "out") -> tuple[Tensor, Tensor]:
    """(tensor returned to the caller, tensor the implementation writes): the same, unless ``out=`` has another
    dtype (allowed where PyTorch allows it: ``exact=False``); then a temporary of ``dtype`` copied over after.
    ``exact``: ``out`` must have ``dtype`` (RuntimeError with PyTorch's message, :func:`out_mismatch` ``style``)."""
    if out is not None and exact and isinstance(out, Tensor):
        check(out.dtype is dtype, lambda: out_mismatch(fn, dtype, out.dtype, style))
    o = dispatch.resolve_out(out, shape, dtype, dev, fn)
    return o, (o if o.dtype is dtype else new_empty(shape, dtype, dev))


def finish_out(o: Tensor, work: Tensor) -> Tensor:
    if work is not o:
        o.copy_(work)
    return o


def compute_input(x: Tensor, cd: DType) -> Tensor:
    """``x`` as the op computes it (``dtype=`` converts the input first, as PyTorch). No copy when the kernel's
    load already widens exactly into the same accumulation dtype (float16 -> float32, int32 -> int64 ...)."""
    if cd is x.dtype:
        return x
    same_kind = x.dtype.kind == cd.kind or (x.dtype.kind in _INT_LIKE and cd.kind in _INT_LIKE)
    # (promote_types: every value of x is one of cd's; bfloat16 <-> float16 and int8 -> uint8 are not widenings)
    if same_kind and promote_types(x.dtype, cd) is cd and acc_dtype(K_SUM, x.dtype) is acc_dtype(K_SUM, cd) \
            and x.dtype not in BARE_UINTS and x.dtype.kind != T.KIND_BOOL and cd.kind != T.KIND_BOOL:
        return x
    return x.to(cd)


def _empty_reduced(x: Tensor, dims) -> bool:
    return any(x.shape[d] == 0 for d in dims)


def _run(name: str, x: Tensor, dims, outs, **params) -> None:
    registry.impl(name, x.device.type)(x, dims, *outs, **params)


_HALVES = (T.float16, T.bfloat16)


def out_dtypes(rule: str, rec, x: Tensor, out, dt: DType | None, res: DType, cd: DType, fn: str):
    """``(dtype written, dtype computed in)`` of a reduction called with ``out=`` (PyTorch's rules, checked on
    PyTorch 2.13's CPU kernels), from the call's ``res``/``cd`` without ``out=``. ``rule``:

    - ``"compute"`` (``sum``, ``prod``, ``nansum``, ``cumsum``, ``cumprod``): out's dtype is the result dtype and
      the computation dtype, as if passed as ``dtype=``: the input is converted to it first, then reduced
      (``sum(bf16, out=float32)`` accumulates and writes float32; ``sum(float32 [0.7, 0.7], out=int64)`` is 0).
      ``dtype=`` must equal it; floating ``nansum`` refuses non-floating outs; bool (scans), uint16/32/64 outs
      are not implemented;
    - ``"mean"`` (``mean``, ``nanmean``): the same for floating outs (``mean`` into float16/bfloat16 computes in
      float32 and rounds once); a non-floating out is refused;
    - ``"cast"`` (``var``, ``std``): any out ``res`` can be cast to (:func:`~.dispatch.check_out_dtype`), computed
      in out's dtype;
    - ``"float"`` (``logsumexp``): any floating out, written from the computation in ``cd``;
    - ``"input"`` (``amax``, ``amin``): out's dtype must be the input's;
    - ``"bool"`` (``all``, ``any``): bool or uint8 outs.

    Raises:
        RuntimeError: ``dtype=`` and out disagree, or out's dtype is refused (PyTorch's messages).
        NotImplementedError: out dtypes PyTorch's kernels do not implement.
    """
    if not isinstance(out, Tensor):
        return res, cd   # resolve_out raises the TypeError
    od = out.dtype
    if rule == "compute":
        if dt is not None:
            nan_float = fn == "nansum" and x.dtype.kind == T.KIND_FLOAT
            check(dt is od, lambda: f"nansum: provided dtype must match dtype of result. Got "
                  f"{dispatch.torch_dtype_name(od)} and {dispatch.torch_dtype_name(dt)}." if nan_float else
                  out_mismatch(fn, dt, od))
        if fn == "nansum" and x.dtype.kind == T.KIND_FLOAT and dt is None:   # (with dtype=, PyTorch computes)
            refuse_dtype(od, "nansum", FLOATS)
        refuse_dtype(od, fn, _ORDERED if rec.family == "reduction" else INTS + FLOATS)
        return od, od
    if rule == "mean":
        if dt is not None:
            check(dt is od, lambda: out_mismatch(fn, dt, od) if fn == "mean" else
                  f"nansum: provided dtype must match dtype of result. Got {dispatch.torch_dtype_name(od)} and "
                  f"{dispatch.torch_dtype_name(dt)}.")
        if fn == "nanmean":
            refuse_dtype(od, "nansum", FLOATS)
        else:   # ATen divides the sum by the count in place: a float result that cannot go to an integer out
            dflt = get_default_dtype()
            dispatch.check_out_dtype(rec, {}, out, dispatch.Promotion(dflt, dflt, dflt, x.dtype), fn)
        refuse_dtype(od, fn, FLOATS)   # (float8)
        return od, (T.float32 if fn == "mean" and od in _HALVES else od)
    if rule == "cast":
        dispatch.check_out_dtype(rec, {}, out, dispatch.Promotion(res, res, res, x.dtype), fn)
        refuse_dtype(od, fn, FLOATS)
        return od, od
    if rule == "float":
        check(od.kind == T.KIND_FLOAT, lambda: f"{fn}(): Expected floating point type for result tensor, but got: "
              f"{dispatch.torch_dtype_name(od)}")
        refuse_dtype(od, fn, FLOATS)
        return od, cd
    if rule == "input":
        check(od is x.dtype, lambda: out_mismatch(fn, x.dtype, od, "input"))
        return res, cd
    if rule == "bool":
        check(od in (T.bool_, T.uint8), lambda: f"{fn} only supports bool tensor for result, got: "
              f"{dispatch.torch_dtype_name(od)}")
        return od, cd
    fail(f"{fn}: unknown out= rule {rule!r}", ValueError)


def _simple_driver(how: str, *, result, allowed, identity=None, exact_out=False, has_dtype=True, no_identity=False,
                   out_rule: str = "compute"):
    """The driver of a single-output reduction over int/tuple/None dims (``extra["driver"]``); ``out_rule``: what
    an ``out=`` of another dtype does (:func:`out_dtypes`)."""
    def driver(rec, args, *, out=None, inplace=None):
        fn = rec.name
        x = args["input"]
        check_input(x, fn)
        dim = args.get("dim")
        dims = reduce_dims(dim, x.ndim, fn, allow_tuple=rec.extra["dim_mode"] != "single_or_none")
        keepdim = bool(args.get("keepdim", False))
        check(not (keepdim and dim is None and rec.extra.get("keepdim_needs_dim")), lambda: f"{fn}(): keepdim=True "
              f"needs an int dim (PyTorch's {fn}(input, *, dtype) overload has no keepdim)", TypeError)
        dt = args.get("dtype") if has_dtype else None
        refuse_dtype(x.dtype, fn, allowed)
        res_dt = result(x.dtype, dt, fn)
        cd = dt if dt is not None else (res_dt if res_dt.kind == T.KIND_FLOAT else x.dtype)
        if out is not None:
            res_dt, cd = out_dtypes(out_rule, rec, x, out, dt, res_dt, cd, fn)
        shape = _out_shape(x.shape, dims, keepdim)
        o, work = new_out(out, shape, res_dt, x.device, fn, exact=exact_out, style="input")
        dispatch.check_no_partial_overlap(o, x, fn)
        if numel(shape) == 0:
            return o
        if _empty_reduced(x, dims):
            check(not no_identity or (dim not in (None, (), []) and x.ndim), lambda: f"{fn}(): Expected reduction dim "
                  "to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument.")
            check(not no_identity, lambda: f"{fn}(): Expected reduction dim "
                  f"{next(d for d in dims if x.shape[d] == 0)} to have non-zero size.", IndexError)
            work.fill_(identity)
            return finish_out(o, work)
        _run(rec.name, compute_input(x, cd), dims, (_keep_view(work, dims, keepdim, x.ndim),), how=how)
        return finish_out(o, work)
    return driver


# dtype rules (result dtype of a call) ---------------------------------------------------------------------
def _sum_result(d: DType, dt: DType | None, fn: str) -> DType:
    if dt is not None:
        return dt
    return T.int64 if d.kind in _INT_LIKE else d


def _same_result(d: DType, dt: DType | None, fn: str) -> DType:
    return d


def _float_result(d: DType, dt: DType | None, fn: str) -> DType:
    r = dt if dt is not None else d
    check(r.kind == T.KIND_FLOAT, lambda: f"{fn}(): could not infer output dtype. Input dtype must be either a "
          f"floating point or complex dtype. Got: {dispatch.torch_dtype_name(r)}")
    return r


def _nanmean_result(d: DType, dt: DType | None, fn: str) -> DType:
    check(d.kind == T.KIND_FLOAT, lambda: f"{fn}(): expected input to have floating point or complex dtype but got "
          f"{dispatch.torch_dtype_name(d)} (integral types and 'Bool' are not supported for nanmean, even with a "
          "floating dtype= or out=)")
    return _float_result(d, dt, fn)


def _lse_result(d: DType, dt: DType | None, fn: str) -> DType:
    return d if d.kind == T.KIND_FLOAT else get_default_dtype()


def _bool_result(d: DType, dt: DType | None, fn: str) -> DType:
    return T.uint8 if d is T.uint8 else T.bool_


def _int64_result(d: DType, dt: DType | None, fn: str) -> DType:
    return T.int64


_ALL_NUM = (T.bool_,) + INTS + BARE_UINTS + FLOATS
_ORDERED = (T.bool_,) + INTS + FLOATS


# var / std ------------------------------------------------------------------------------------------------
def _correction(fn: str, dim, unbiased, correction):
    if isinstance(dim, bool):  # the var(input, unbiased) overload
        check(unbiased is None, lambda: f"{fn}(): got multiple values for argument 'unbiased'", TypeError)
        unbiased, dim = dim, None
    check(unbiased is None or correction is None, lambda: f"{fn}(): pass either 'unbiased' or 'correction', not "
          "both", TypeError)
    if correction is not None:
        return dim, float(correction)
    return dim, 1.0 if unbiased is None else float(bool(unbiased))


def _var_driver(take_sqrt: bool, with_mean: bool):
    def driver(rec, args, *, out=None, inplace=None):
        fn = rec.name
        x = args["input"]
        check_input(x, fn)
        dim, corr = _correction(fn, args.get("dim"), args.get("unbiased"), args.get("correction"))
        dims = reduce_dims(dim, x.ndim, fn)
        keepdim = bool(args.get("keepdim", False))
        check(x.dtype.kind == T.KIND_FLOAT, lambda: f"{fn}: std and var only support floating point and complex "
              f"dtypes, got {dispatch.torch_dtype_name(x.dtype)}")
        shape = _out_shape(x.shape, dims, keepdim)
        if with_mean:
            ov = wv = new_empty(shape, x.dtype, x.device)
            m = new_empty(shape, x.dtype, x.device)
        else:
            res = x.dtype
            if out is not None:   # computed in out's dtype (the input converted first), as ATen's std_var_out
                res, _ = out_dtypes("cast", rec, x, out, None, res, res, fn)
                x = compute_input(x, res)
            ov, wv = new_out(out, shape, res, x.device, fn, exact=False)
            m = None
        if numel(shape):
            if _empty_reduced(x, dims):
                wv.fill_(float("nan"))
                if m is not None:
                    m.fill_(float("nan"))
            else:
                _run(rec.name, x, dims, (_keep_view(wv, dims, keepdim, x.ndim),
                                         None if m is None else _keep_view(m, dims, keepdim, x.ndim)),
                     corr=corr, take_sqrt=take_sqrt)
            finish_out(ov, wv)
        return (ov, m) if with_mean else ov
    return driver


# arg-extrema and max/min ------------------------------------------------------------------------------------
def _argext_driver(largest: bool):
    def driver(rec, args, *, out=None, inplace=None):
        fn = rec.name
        x = args["input"]
        check_input(x, fn)
        check(x.dtype is not T.bool_, lambda: f"{fn}(): does not support bool input")
        refuse_dtype(x.dtype, fn, INTS + FLOATS)
        dim, keepdim = args.get("dim"), bool(args.get("keepdim", False))
        if dim is None:  # PyTorch's flat index: over the elements in logical (row-major) order
            check(x.numel() > 0, lambda: f"{fn}(): Expected reduction dim to be specified for input.numel() == 0.",
                  IndexError)
            shape = (1,) * x.ndim if keepdim else ()
        else:
            dims = reduce_dims(dim, x.ndim, fn, allow_tuple=False)
            shape = _out_shape(x.shape, dims, keepdim)
        o, work = new_out(out, shape, T.int64, x.device, fn, exact=True)
        if numel(shape) == 0:
            return o
        if dim is None:
            xr, dims, wv = x.reshape(-1), (0,), work.reshape(1)
        else:
            check(not _empty_reduced(x, dims), lambda: f"{fn}(): Expected reduction dim {dims[0]} to have non-zero "
                  "size.", IndexError)
            xr, wv = x, _keep_view(work, dims, keepdim, x.ndim)
        _run(rec.name, xr, dims, (None, wv), largest=largest)
        return finish_out(o, work)
    return driver


def _maxmin_driver(largest: bool):
    rt = return_types.max if largest else return_types.min
    full = "amax" if largest else "amin"

    def driver(rec, args, *, out=None, inplace=None):
        fn = rec.name
        x = args["input"]
        check_input(x, fn)
        dim, keepdim = args.get("dim"), bool(args.get("keepdim", False))
        if isinstance(dim, Tensor):  # max(input, other): the elementwise maximum
            try:
                other = registry.get("maximum" if largest else "minimum")
            except KeyError:
                fail(f"{fn}(input, other): the elementwise form needs the op "
                     f"{'maximum' if largest else 'minimum'}, which is not registered", NotImplementedError)
            return other.extra["function"](x, dim, out=out)
        refuse_dtype(x.dtype, fn, _ORDERED)
        if dim is None:  # the full reduction: a 0-dim value, NaN if any element is NaN
            check(out is None, lambda: f"{fn}(): out= needs dim", TypeError)
            check(x.numel() > 0, lambda: f"{fn}(): Expected reduction dim to be specified for input.numel() == 0. "
                  "Specify the reduction dim with the 'dim' argument.")
            o = new_empty((), x.dtype, x.device)
            dims = tuple(range(x.ndim))
            _run(full, x, dims, (_keep_view(o, dims, False, x.ndim),), how=full)
            return o
        dims = reduce_dims(dim, x.ndim, fn, allow_tuple=False)
        shape = _out_shape(x.shape, dims, keepdim)
        if out is not None:
            check(len(out) == 2, lambda: f"{fn}(): out= must be a tuple (values, indices)", TypeError)
            ov, wv = new_out(out[0], shape, x.dtype, x.device, fn, exact=True)
            oi, wi = new_out(out[1], shape, T.int64, x.device, fn, exact=True)
        else:
            ov = wv = new_empty(shape, x.dtype, x.device)
            oi = wi = new_empty(shape, T.int64, x.device)
        if numel(shape) == 0:
            return rt(ov, oi)
        check(not _empty_reduced(x, dims), lambda: f"{fn}(): Expected reduction dim {dims[0]} to have non-zero size.",
              IndexError)
        _run(rec.name, x, dims, (_keep_view(wv, dims, keepdim, x.ndim), _keep_view(wi, dims, keepdim, x.ndim)),
             largest=largest)
        return rt(ov, oi)
    return driver


def _aminmax_driver(rec, args, *, out=None, inplace=None):
    fn = "aminmax"
    x = args["input"]
    check_input(x, fn)
    refuse_dtype(x.dtype, fn, _ORDERED)
    dim, keepdim = args.get("dim"), bool(args.get("keepdim", False))
    dims = reduce_dims(dim, x.ndim, fn, allow_tuple=False)
    shape = _out_shape(x.shape, dims, keepdim)
    if out is not None:
        check(len(out) == 2, "aminmax(): out= must be a tuple (min, max)", TypeError)
        omin, wmin = new_out(out[0], shape, x.dtype, x.device, fn, exact=True)
        omax, wmax = new_out(out[1], shape, x.dtype, x.device, fn, exact=True)
    else:
        omin = wmin = new_empty(shape, x.dtype, x.device)
        omax = wmax = new_empty(shape, x.dtype, x.device)
    if numel(shape) == 0:
        return return_types.aminmax(omin, omax)
    if _empty_reduced(x, dims):
        check(dim is not None, "aminmax(): cannot compute aminmax over an empty dimension as the operation has no "
              "identity.")
        fail(f"aminmax(): Expected reduction dim {dims[0]} to have non-zero size.", IndexError)
    _run("aminmax", x, dims, (_keep_view(wmin, dims, keepdim, x.ndim), _keep_view(wmax, dims, keepdim, x.ndim)))
    return return_types.aminmax(omin, omax)


# vector_norm / norm -----------------------------------------------------------------------------------------
def _norm_how(o: float) -> tuple[str, float]:
    if o == 0:
        return "norm0", 0.0
    if o == 1:
        return "norm1", 1.0
    if o == 2:
        return "norm2", 2.0
    if o == math.inf:
        return "norminf", o
    if o == -math.inf:
        return "normninf", o
    return "normp", o


def _vector_norm(rec_name: str, x, ord, dim, keepdim: bool, dtype, out, fn: str) -> Tensor:
    check_input(x, fn, "x")
    check(isinstance(ord, (int, float)) and not isinstance(ord, bool), lambda: f"{fn}(): argument 'ord' must be "
          f"Number, not {type(ord).__name__}", TypeError)
    check(x.dtype.kind == T.KIND_FLOAT, lambda: f"linalg.vector_norm: Expected a floating point or complex tensor as "
          f"input. Got {dispatch.torch_dtype_name(x.dtype)}")
    if dtype is not None:
        from ..dtypes.promotion import promote_types
        check(dtype.kind == T.KIND_FLOAT and promote_types(x.dtype, dtype) is dtype,
              lambda: f"linalg.vector_norm: the dtype of the input ({dispatch.torch_dtype_name(x.dtype)}) should be "
              f"convertible without narrowing to the specified dtype ({dispatch.torch_dtype_name(dtype)})")
    res_dt = dtype if dtype is not None else x.dtype
    dims = reduce_dims(dim, x.ndim, fn)
    shape = _out_shape(x.shape, dims, keepdim)
    o, work = new_out(out, shape, res_dt, x.device, fn, exact=True)
    if numel(shape) == 0:
        return o
    how, p = _norm_how(float(ord))
    if _empty_reduced(x, dims):
        check(float(ord) >= 0 and how != "norminf", lambda: f"linalg.vector_norm cannot compute the {ord} norm on "
              "an empty tensor because the operation does not have an identity")
        work.fill_(0.0)
        return finish_out(o, work)
    _run(rec_name, compute_input(x, res_dt), dims, (_keep_view(work, dims, keepdim, x.ndim),), how=how, p=p)
    return finish_out(o, work)


def _vector_norm_driver(rec, args, *, out=None, inplace=None):
    return _vector_norm(rec.name, args["x"], args["ord"], args["dim"], bool(args["keepdim"]), args["dtype"], out,
                        "linalg.vector_norm")


def _norm_driver(rec, args, *, out=None, inplace=None):
    p = args["p"]
    if isinstance(p, str):
        check(p == "fro", lambda: f"norm: p={p!r} is a matrix norm, which nbxtensor does not implement (only vector "
              "norms and 'fro')", NotImplementedError)
        p = 2
    return _vector_norm(rec.name, args["input"], 2 if p is None else p, args["dim"], bool(args["keepdim"]),
                        args["dtype"], out, "norm")


# ---------------------------------------------------------------------------------------------------------
# Cost declarations
# ---------------------------------------------------------------------------------------------------------
_FLOPS_PER_ELEMENT = {"sum": 1, "nansum": 2, "mean": 1, "nanmean": 3, "prod": 1, "amax": 1, "amin": 1,
                      "aminmax": 2, "max": 2, "min": 2, "argmax": 2, "argmin": 2, "all": 1, "any": 1,
                      "count_nonzero": 1, "var": 5, "std": 5, "var_mean": 5, "std_mean": 5, "logsumexp": 4,
                      "vector_norm": 2, "norm": 2}


def _cost_of(name: str):
    """``cost(*args, **kwargs)`` in the op's own calling convention (as the benchmark calls it): every input
    element is read once and the outputs written once; flops count the combine work per element. A split
    reduction also writes and reads ``outputs x 65535`` states at most (negligible; not counted)."""
    def cost(*args, **kwargs) -> Cost:
        rec = registry.get(name)
        a = rec.extra["schema_obj"].bind(args, kwargs, fn=name)
        x = a.get("input", a.get("x"))
        dim = a.get("dim")
        if isinstance(dim, bool) or isinstance(dim, Tensor):
            dim = None
        n_out = numel(_out_shape(x.shape, reduce_dims(dim, x.ndim, name), True))
        if isinstance(a.get("dim"), Tensor):  # max(a, b): elementwise
            return Cost(flops=x.numel(), bytes_read=2 * x.numel() * x.dtype.itemsize,
                        bytes_written=x.numel() * x.dtype.itemsize)
        out_dt = a.get("dtype") or x.dtype
        if name in ("argmax", "argmin", "count_nonzero"):
            written = 8 * n_out
        elif name in ("max", "min"):
            written = n_out * (x.dtype.itemsize + (8 if a.get("dim") is not None else 0))
        elif name in ("sum", "prod", "nansum") and out_dt.kind in _INT_LIKE:
            written = 8 * n_out
        elif name in ("all", "any"):
            written = n_out
        else:
            written = rec.extra.get("outputs", 1) * n_out * out_dt.itemsize
        return Cost(flops=_FLOPS_PER_ELEMENT.get(name, 1) * x.numel(), bytes_read=x.numel() * x.dtype.itemsize,
                    bytes_written=written)
    return cost


# ---------------------------------------------------------------------------------------------------------
# The records
# ---------------------------------------------------------------------------------------------------------
def _simple_cpu(x, dims, y, *, how, p=0.0):
    _cpu_simple(x, dims, y, how=how, p=p)


def _simple_triton(x, dims, y, *, how, p=0.0):
    _triton_simple(x, dims, y, how=how, p=p)


def _t(*shape, dtype=T.float32):
    """A builder of an input for the error cases: ``dev -> tensor`` (zeros of ``shape`` and ``dtype``)."""
    return lambda dev: new_empty(shape, dtype, dev).fill_(0) if numel(shape) else new_empty(shape, dtype, dev)


# Error inputs as data (``extra["errors"]``): (label, args builders, kwargs, exception type, message regex[,
# reason]). One generic test runs them all; the parity suite checks that PyTorch raises the same type, except for
# cases with a 6th field: a stated nbxtensor limitation where PyTorch computes a result.
_E_DIM = ("dim out of range", (_t(2, 3),), {"dim": 2}, IndexError, "out of range")
_E_REPEAT = ("repeated dim", (_t(2, 3),), {"dim": (0, 0)}, RuntimeError, "multiple times")
_E_COMPLEX = ("complex input", (_t(3, dtype=T.complex64),), {}, NotImplementedError, "not implemented",
              "nbxtensor does not implement complex reductions (PyTorch does)")
_ERRORS = {
    "sum": [_E_DIM, _E_REPEAT, _E_COMPLEX],
    "nansum": [_E_DIM, ("float8 input", (_t(3, dtype=T.float8_e4m3fn),), {}, NotImplementedError, "not impl")],
    "mean": [("integer input", (_t(3, dtype=T.int64),), {}, RuntimeError, "could not infer output dtype"), _E_REPEAT],
    "nanmean": [("integer input", (_t(3, dtype=T.int32),), {}, RuntimeError, "expected input to have floating")],
    "prod": [("tuple dim", (_t(2, 3),), {"dim": (0, 1)}, TypeError, "must be int"), _E_DIM],
    "amax": [("empty reduced dim", (_t(0, 3),), {"dim": 0}, IndexError, "non-zero size"),
             ("out dtype", (_t(2, 3),), {"dim": 0, "out": _t(3, dtype=T.float64)}, RuntimeError, "dtype")],
    "amin": [("uint16 input", (_t(3, dtype=T.uint16),), {}, NotImplementedError, "not implemented"),
             ("empty input", (_t(0),), {}, RuntimeError, "numel\\(\\) == 0"),
             ("empty reduced dim", (_t(3, 0),), {"dim": (0, 1)}, IndexError, "non-zero size")],
    "all": [("out dtype", (_t(2, 3),), {"dim": 0, "out": _t(3)}, RuntimeError, "only supports bool tensor"), _E_DIM],
    "any": [_E_REPEAT],
    "count_nonzero": [("keepdim", (_t(2, 3),), {"dim": 0, "keepdim": True}, TypeError, "unexpected keyword")],
    "logsumexp": [("dim missing", (_t(2, 3),), {}, TypeError, "missing required argument 'dim'")],
    "var": [("integer input", (_t(3, dtype=T.int32),), {}, RuntimeError, "floating point"),
            ("unbiased and correction", (_t(3),), {"unbiased": True, "correction": 1}, TypeError, "either")],
    "std": [("integer input", (_t(3, dtype=T.int64),), {}, RuntimeError, "floating point")],
    "var_mean": [("bool input", (_t(3, dtype=T.bool_),), {}, RuntimeError, "floating point")],
    "std_mean": [_E_DIM],
    "argmax": [("bool input", (_t(3, dtype=T.bool_),), {}, RuntimeError, "bool"),
               ("empty input", (_t(0, 2),), {}, IndexError, "numel\\(\\) == 0"),
               ("tuple dim", (_t(2, 3),), {"dim": (0, 1)}, TypeError, "must be int")],
    "argmin": [("empty reduced dim", (_t(2, 0),), {"dim": 1}, IndexError, "non-zero size")],
    "max": [("empty input", (_t(0, 2),), {}, RuntimeError, "numel\\(\\) == 0"),
            ("empty reduced dim", (_t(0, 2),), {"dim": 0}, IndexError, "non-zero size"),
            ("out indices dtype", (_t(2, 3),), {"dim": 0, "out": (_t(3), _t(3, dtype=T.int32))}, RuntimeError,
             "dtype")],
    "min": [("uint32 input", (_t(3, dtype=T.uint32),), {"dim": 0}, NotImplementedError, "not implemented")],
    "aminmax": [("empty input", (_t(0, 3),), {}, RuntimeError, "no identity"),
                ("empty reduced dim", (_t(0, 3),), {"dim": 0}, IndexError, "non-zero size")],
    "vector_norm": [("integer input", (_t(3, dtype=T.int64),), {}, RuntimeError, "floating point"),
                    ("inf norm of empty", (_t(0, 3),), {"ord": math.inf}, RuntimeError, "identity"),
                    ("narrowing dtype", (_t(3),), {"dtype": T.float16}, RuntimeError, "narrowing")],
    "norm": [("nuclear norm", (_t(2, 3),), {"p": "nuc"}, NotImplementedError, "nuc",
              "nbxtensor implements vector norms only (PyTorch computes the nuclear norm by SVD)")],
}


_COMMON = """
    Args (as PyTorch): ``input`` a tensor; ``dim`` an int, a tuple/list of ints, or None (``()``/``[]`` also
    mean every dim); ``keepdim`` keeps reduced dims with size 1; ``dtype`` (where accepted) converts the input
    first; ``out`` receives the result (resized as PyTorch's ``resize_output``).

    Raises: IndexError (dim out of range, or an empty reduced dim where the op has no identity), RuntimeError
    (repeated dims, dtype rules, ``out`` dtype), NotImplementedError (complex and float8 inputs), TypeError
    (argument types). Semantics and accumulation dtypes: :mod:`nbxtensor.ops.reduction`.
"""
_DOCS = {
    "sum": "Sum over ``dim`` (``torch.sum``): int64 for integer and bool inputs; float16/bfloat16 accumulate in "
           "float32. Empty: 0.\n\n    >>> nbx.tensor([[1, 2], [3, 4]]).sum(1).tolist()\n    [3, 7]",
    "nansum": "Sum treating NaN as 0 (``torch.nansum``). Empty: 0.",
    "mean": "Arithmetic mean (``torch.mean``): floating inputs, or any input with a floating ``dtype=``. Empty: NaN.",
    "nanmean": "Mean of the non-NaN elements (``torch.nanmean``); all-NaN rows give NaN.",
    "prod": "Product over one int dim or all (``torch.prod``): int64 for integers and bool. Empty: 1.",
    "amax": "Maximum over ``dim`` (``torch.amax``; default: all dims); NaN if any reduced element is NaN.",
    "amin": "Minimum over ``dim`` (``torch.amin``); NaN if any reduced element is NaN.",
    "all": "True where every reduced element is nonzero (NaN counts as nonzero); uint8 in, uint8 out. Empty: True.",
    "any": "True where some reduced element is nonzero; uint8 in, uint8 out. Empty: False.",
    "count_nonzero": "Number of nonzero elements over ``dim`` (int64; no keepdim, as PyTorch).",
    "logsumexp": "``log(sum(exp(x)))`` over ``dim`` computed as ``m + log(sum(exp(x - m)))`` with ``m`` the maximum "
                 "(+-inf rows give +-inf); integer inputs give the default float dtype. Empty: -inf.",
    "var": "Variance with ``correction`` (default 1; ``unbiased=`` as PyTorch's legacy overloads): M2 / max(N - "
           "correction, 0), so a non-positive divisor gives inf (or NaN when M2 is 0). Welford/Chan: no cancellation.",
    "std": "Standard deviation: the square root of :func:`var`'s result.",
    "var_mean": "(variance, mean) as a tuple (``torch.var_mean``); the mean is NaN where the variance is NaN.",
    "std_mean": "(standard deviation, mean) as a tuple (``torch.std_mean``).",
    "argmax": "Index of the maximum along an int dim, or the flat (row-major) index over all elements for "
              "``dim=None``; NaN counts as the maximum and the first occurrence wins. int64.",
    "argmin": "Index of the minimum; NaN counts as the extreme (PyTorch's rule); the first occurrence wins. int64.",
    "max": "``max(input)``: the maximum (NaN propagates). ``max(input, dim, keepdim=False)``: named tuple "
           "``(values, indices)``, first occurrence, NaN as the maximum. ``max(input, other)``: ``maximum``.",
    "min": "``min(input)``, ``min(input, dim, keepdim)`` -> ``(values, indices)``, ``min(input, other)``: "
           "``minimum``; NaN counts as the minimum.",
    "aminmax": "Named tuple ``(min, max)`` over one int dim or all (``torch.aminmax``), one pass over the input.",
    "vector_norm": "Vector norm (``torch.linalg.vector_norm``): ord 2 (default), 1, 0 (count of nonzeros), inf "
                   "(max |x|), -inf (min |x|) or any p (``sum(|x|**p)**(1/p)``); floating inputs; ``dtype=`` may "
                   "only widen. Empty: 0 for ord >= 0, an error otherwise.",
    "norm": "``torch.norm`` for vector norms: ``p`` a number or ``'fro'`` (the 2-norm over ``dim``); ``'nuc'`` "
            "is not implemented.",
}


# ---------------------------------------------------------------------------------------------------------
# Launch plans: a repeated call with the same signature replays its launches
# ---------------------------------------------------------------------------------------------------------
# The general host path of a reduction (argument checks, dtype rules, canonical form, config lookups, split
# plan, workspace sizing) costs several times the launch. The first call of a signature (the input's shape,
# strides, dtype and device; every option with its type: dim, keepdim, dtype, correction, unbiased, ord, p)
# on a CUDA device or under the interpreter tier runs the general path inside a launcher Recording; the
# recorded launches (two for a split reduction: the partial states into the scratch workspaces, then the
# combine) become a :class:`~nbxtensor.runtime.launcher.LaunchPlan` whose slots are the input, the results and
# the workspaces (allocated per call). Plans are keyed on the config state too (configs.state(): the
# architecture lookup and the overrides in force), so a sweep's override gets plans of its own and never
# another setting's (its host path would otherwise be timed: a split reduction's general path costs more than
# a 512 MiB stream on the H200). Calls with ``out=``, or whose general path did anything a plan cannot replay (a
# conversion of the input, a copy, a fill: any tensor argument that is not the input, a result or a declared
# workspace) take the general path every time.
_NO_PLAN = object()
_PLAN_CACHES: list = []
_PLAN_LIMIT = 1024
_PLAN_STATS = {"hits": 0, "plans": 0}


def clear_plans() -> None:
    """Forget every reduction launch plan (and zero :func:`plan_stats`)."""
    for c in _PLAN_CACHES:
        c.clear()
    _PLAN_STATS.update(hits=0, plans=0)


def plan_stats() -> dict:
    """``{"hits": calls served by a plan, "plans": plans made}`` since the last :func:`clear_plans`."""
    return dict(_PLAN_STATS)


def _planned(driver, first: str):
    """``driver`` behind a per-signature launch plan (see the section comment); ``first`` names the input."""
    cache: dict = {}
    _PLAN_CACHES.append(cache)

    def planned(rec, args, *, out=None, inplace=None):
        x = args.get(first)
        if out is not None or inplace is not None or x.__class__ is not Tensor:
            return driver(rec, args, out=out, inplace=inplace)
        d = x._storage.device
        # the offset's alignment too (the WORDS paths read int32 words where it allows), the config state (a plan
        # per override, too)
        key = [x._shape, x._stride, x._dtype, d.type, d.index, x._offset & 15, config_state()]
        for v in args.values():
            c = v.__class__
            if c is tuple or c is list:
                v = tuple((e.__class__, e) for e in v)
            elif c is Tensor or v is x:
                if v is x:
                    continue
                return driver(rec, args)
            key.append(c)
            key.append(v)
        key = tuple(key)
        try:
            plan = cache.get(key)
        except TypeError:  # an unhashable option: the general path says what is wrong with it
            return driver(rec, args)
        if plan is None:
            if d.type == "cuda" or interpreting():
                with Recording() as r:
                    res = driver(rec, args)
                plan = make_launch_plan(r, (x,), res, make_tensor)
                if len(cache) >= _PLAN_LIMIT:
                    cache.clear()
                cache[key] = plan or _NO_PLAN
                _PLAN_STATS["plans"] += plan is not None
                return res
        elif plan is not _NO_PLAN:
            _PLAN_STATS["hits"] += 1
            if d.type == "cpu":  # the interpreter tier: masked lanes compute on filler values, as launch_quiet
                with np.errstate(all="ignore"):
                    return plan(x)
            return plan(x)
        return driver(rec, args)

    planned.__wrapped__ = driver
    return planned


def _reg(name: str, schema: str, driver, cpu, triton, oracle, *, method=True, namespaces=("torch",), **extra):
    driver = _planned(driver, "x" if name == "vector_norm" else "input")
    rec = OpRecord(name=name, family="reduction", cpu=cpu, triton=triton, oracle=oracle, cost=_cost_of(name),
                   extra=dict(schema=schema, driver=driver, method=method, namespaces=namespaces,
                              errors=_ERRORS.get(name, []), doc=f"``{schema}``\n\n    {_DOCS[name]}\n{_COMMON}",
                              **extra))
    register(rec)
    return rec


_DIM_MULTI = "int[]? dim=None, bool keepdim=False"
for _name, _result, _allowed, _ident, _dtypes, _extra in (
        ("sum", _sum_result, _ALL_NUM, 0, _ALL_NUM, {"variants": ({}, {"dtype": T.float64}), "empty": 0.0}),
        ("nansum", _sum_result, _ALL_NUM, 0, _ALL_NUM, {"empty": 0.0}),
        ("mean", _float_result, _ALL_NUM, float("nan"), FLOATS, {"variants": ({}, {"dtype": T.float64}),
                                                                  "empty": float("nan")}),
        ("nanmean", _nanmean_result, _ALL_NUM, float("nan"), FLOATS, {"empty": float("nan")})):
    _reg(_name, f"{_name}(Tensor input, {_DIM_MULTI}, *, dtype? dtype=None, Tensor? out=None)",
         _simple_driver(_name, result=_result, allowed=_allowed, identity=_ident,
                        out_rule="mean" if _name in ("mean", "nanmean") else "compute"), _simple_cpu, _simple_triton,
         _oracle_simple(_name), dtypes=_dtypes, dim_mode="multi", how=_name, **_extra)
_reg("prod", "prod(Tensor input, int? dim=None, bool keepdim=False, *, dtype? dtype=None, Tensor? out=None)",
     _simple_driver("prod", result=_sum_result, allowed=_ALL_NUM, identity=1), _simple_cpu, _simple_triton,
     _oracle_simple("prod"), dtypes=_ALL_NUM, dim_mode="single_or_none", how="prod", domain="near_one", empty=1.0,
     keepdim_needs_dim=True)
for _name in ("amax", "amin"):
    _reg(_name, f"{_name}(Tensor input, int[] dim=(), bool keepdim=False, *, Tensor? out=None)",
         _simple_driver(_name, result=_same_result, allowed=_ORDERED, exact_out=True, has_dtype=False,
                        no_identity=True, out_rule="input"), _simple_cpu, _simple_triton, _oracle_simple(_name),
         dtypes=_ORDERED,
         dim_mode="multi", how=_name, empty=IndexError)
for _name, _ident in (("all", True), ("any", False)):
    _reg(_name, f"{_name}(Tensor input, {_DIM_MULTI}, *, Tensor? out=None)",
         _simple_driver(_name, result=_bool_result, allowed=_ALL_NUM, identity=_ident, exact_out=True,
                        has_dtype=False, out_rule="bool"), _simple_cpu, _simple_triton, _oracle_simple(_name),
         dtypes=_ALL_NUM, dim_mode="multi", how=_name, domain="sparse", empty=float(_ident))
_reg("count_nonzero", "count_nonzero(Tensor input, int[]? dim=None)",
     _simple_driver("count_nonzero", result=_int64_result, allowed=_ALL_NUM, identity=0, has_dtype=False),
     _simple_cpu, _simple_triton, _oracle_simple("count_nonzero"), dtypes=_ALL_NUM, dim_mode="multi_nokeep",
     how="count_nonzero", domain="sparse", empty=0.0)
_reg("logsumexp", "logsumexp(Tensor input, int[] dim, bool keepdim=False, *, Tensor? out=None)",
     _simple_driver("logsumexp", result=_lse_result, allowed=_ALL_NUM, identity=float("-inf"), has_dtype=False,
                    out_rule="float"),
     _simple_cpu, _simple_triton, _oracle_simple("logsumexp"), dtypes=_ALL_NUM, dim_mode="multi_required",
     how="logsumexp", empty=float("-inf"))
_VAR_SCHEMA = ("(Tensor input, int[]|bool? dim=None, bool? unbiased=None, bool keepdim=False, *, "
               "Scalar? correction=None{out})")
for _name, _sqrt, _mean, _variants in (
        ("var", False, False, ({}, {"correction": 0}, {"correction": 2.5}, {"unbiased": False})),
        ("std", True, False, ({}, {"correction": 0})),
        ("var_mean", False, True, ({}, {"correction": 0})),
        ("std_mean", True, True, ({},))):
    _reg(_name, _name + _VAR_SCHEMA.format(out="" if _mean else ", Tensor? out=None"), _var_driver(_sqrt, _mean),
         _cpu_var, _triton_var, _oracle_var(_sqrt, _mean), dtypes=FLOATS, dim_mode="multi", method=not _mean,
         outputs=2 if _mean else 1, variants=_variants, empty=float("nan"))
for _name, _largest in (("argmax", True), ("argmin", False)):
    _reg(_name, f"{_name}(Tensor input, int? dim=None, bool keepdim=False, *, Tensor? out=None)",
         _argext_driver(_largest), _cpu_arg, _triton_arg, _oracle_arg(_largest, False), dtypes=INTS + FLOATS,
         dim_mode="single_or_none", empty=IndexError)
for _name, _largest in (("max", True), ("min", False)):
    _reg(_name, f"{_name}(Tensor input, Tensor|int? dim=None, bool keepdim=False, *, Tensor[]? out=None)",
         _maxmin_driver(_largest), _cpu_arg, _triton_arg, _oracle_arg(_largest, True), dtypes=_ORDERED,
         dim_mode="single", outputs=2, empty=IndexError)
_reg("aminmax", "aminmax(Tensor input, *, int? dim=None, bool keepdim=False, Tensor[]? out=None)",
     _aminmax_driver, _cpu_aminmax, _triton_aminmax, _oracle_aminmax, dtypes=_ORDERED, dim_mode="single_or_none",
     outputs=2, empty=IndexError)
_reg("vector_norm", "vector_norm(Tensor x, Scalar ord=2, int[]? dim=None, bool keepdim=False, *, dtype? dtype=None, "
     "Tensor? out=None)",
     _vector_norm_driver, _simple_cpu, _simple_triton, _oracle_norm, dtypes=FLOATS, dim_mode="multi", method=False,
     namespaces=("torch", "linalg"),
     variants=({}, {"ord": 1}, {"ord": 0}, {"ord": math.inf}, {"ord": -math.inf}, {"ord": 3.0}, {"ord": -1.5}),
     empty=0.0)
_reg("norm", "norm(Tensor input, Scalar|str? p='fro', int[]? dim=None, bool keepdim=False, *, Tensor? out=None, "
     "dtype? dtype=None)",
     _norm_driver, _simple_cpu, _simple_triton, _oracle_norm, dtypes=FLOATS, dim_mode="multi",
     variants=({}, {"p": 1}, {"p": math.inf}), empty=0.0)
del _name, _result, _allowed, _ident, _dtypes, _extra, _sqrt, _mean, _variants, _largest
