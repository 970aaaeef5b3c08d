"""Matrix products: ``mm``, ``bmm``, ``matmul`` (and ``@``), ``addmm``, ``baddbmm``, ``addmv``, ``mv``, ``dot``,
``outer``, ``addr``, ``nn.functional.linear``, ``einsum`` (two-operand contractions), ``_int_mm``; and
:func:`linear`, the fused linear (bias, activation, residual add in the kernel's epilogue) the model runners use.

Semantics are PyTorch 2.13's (checked on CPU): shapes, 1-D and broadcasting rules of ``matmul``, error types and
messages, and **no type promotion**: both factors must have one dtype ("expected m1 and m2 to have the same
dtype, but got: float != c10::Half"), ``out=`` must have exactly the result dtype. ``outer`` and ``addr`` are
elementwise in PyTorch (TensorIterator, with promotion, bool and integer dtypes) and are pointwise ops here too
(:mod:`.pointwise`).

Dtypes of the products: float16, bfloat16 and float32 (all devices), float64 (``cpu``, and the GPU through the
same Triton kernels with float64 tiles: correct, not fast), int8 x int8 -> int32 for ``_int_mm``. Integer and
bool ``mm`` are refused with NotImplementedError (PyTorch's CPU has them, its CUDA does not). float16 and
bfloat16 accumulate in float32 and round once, after the epilogue. float32 is IEEE unless the user opts in to
TensorFloat-32 (:mod:`.matmul_flags`).

Kernels (Triton):

- ``_mm_kernel``: tiled GEMM, ``tl.dot`` with an fp32 (float64, int32) accumulator, ``GROUP_M`` swizzled tile
  order for L2 reuse, two batch dims on grid axis 1, any strides for every operand (a transposed weight is read
  in place: its strides are kernel arguments; nothing is made contiguous). Rows and columns past the edge are
  read wrapped (``% M``, ``% N``: valid addresses, results masked on store) so the K loop carries a mask only
  when ``K % BLOCK_K != 0``. Pointer offsets are 64-bit; the K-loop steps are computed on the host (Python
  ints, so Triton passes them as 64-bit when they need it).
- ``_gemv_kernel``: the small-M path (M <= ``MAX_M`` of the ``gemv`` config, 8 on sm90: decode). Each program
  owns ``BLOCK_N`` weight rows and a contiguous K range and reads each weight byte exactly once. M = 1: each step
  loads a ``(BLOCK_N, UNROLL, BLOCK_K)`` chunk of the weight with one load (every load of the step in flight
  before the first FMA) and the matching x chunk in the same layout (x is addressed as a chunk of that shape, so
  no step moves it through shared memory), and accumulates ``w * x`` summed over ``UNROLL`` into a
  (BLOCK_N, BLOCK_K) float32 tile, reduced once at the end; ``PREFETCH`` loads the next chunk before computing
  this one; a range that is not whole chunks ends with one masked chunk; ``PERSIST`` runs fewer programs than
  row tiles, each looping over tiles (the next chunk loaded across tile ends). 2 <= M <= 8: ``tl.dot`` with M
  padded to 16, either ``x @ w^T`` or (``DOT_T``) ``w @ x^T``, the weight tile as the dot's A operand. When the row
  tiles alone cannot fill the GPU (fewer than ``programs_per_sm`` per SM, :func:`split_k`), K is split across
  programs (split-K): each writes its float32 partial to a workspace, then increments a per-tile arrival
  counter; the last to arrive sums the partials **in split order 0, 1, ..., S-1** (so the result does not depend
  on which program finished last: deterministic, a replayed step is byte-identical), applies the epilogue and
  resets the counter to 0 for the next launch. Small N with large M (``mv``) runs the same kernel on the
  transposed problem.
- The epilogue (both kernels): ``act(alpha * acc + beta * C) + R``, rounded once to the output dtype. ``C`` is
  ``addmm``'s input / ``linear``'s bias (any broadcast, through strides: stride 0 on broadcast dims); with
  ``beta == 0`` it is not read (NaN in it does not propagate, as PyTorch). Activations: ``relu``, ``gelu``
  (erf), ``gelu_tanh``, ``silu``, computed as the elementwise ops compute them on the GPU (libdevice's
  ``erf``/``tanh``/``exp`` and IEEE division, as nvcc's code for PyTorch's kernels: Triton's ``tl.exp`` and
  float32 ``/`` are approximate; checked on the sm_90 code by tests/ops/test_ptx_audit.py). K = 0 runs the
  epilogue on a zero accumulator: zeros, or beta * C; never uninitialised memory.

Launch settings come from ``runtime/configs/<arch>.json`` (entries ``mm`` and ``gemv``); the ``interpret``
table uses 16-wide tiles so the interpreter tier exercises tile edges, K tails, split-K and the swizzle on small
shapes.

Host path: a repeated ``linear`` / ``mm`` / ``matmul`` with the same signature (shapes, strides, dtypes, devices,
options; ``out=None``) runs a *launch plan* recorded from its first call: one dict lookup, one allocation and one
launch (section "Launch plans"; also used by :func:`nbxtensor.quant.int4_linear`). A decode step's linears cost
their launch, not the general path's argument checks, views and config lookups (about 40 Python calls per call
instead of about 670, counted under the interpreter tier).

Cost declarations: flops = 2 * (output elements) * K (the epilogue's few flops per output are not counted, as
GEMM benchmarks do); bytes read = every input element once (A, B, the bias/input C when beta != 0); bytes
written = the output. The split-K workspace (S * M * N float32, written and read once; under 1 % of the weight
bytes for decode shapes) is not counted.

Outputs that share memory with a factor are computed into a temporary and copied (PyTorch gives correct
results there too); ``C`` and ``R`` may be the output itself (in-place ``addmm_``, ``h = linear(x, w,
residual=h, out=h)``): each element is read before it is written by the same program.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from .._errors import check, fail
from ..dtypes import table as T
from ..dtypes.casting import cast_array
from ..dtypes.table import DType
from ..runtime import configs as _configs
from ..runtime.configs import launch_config
from ..runtime.launcher import LaunchPlan, Recording, interpreting, launch, make_launch_plan, scratch, unrecorded
from ..runtime.pdl import enter as pdl_enter
from ..runtime.pdl import settings as pdl_settings
from ..runtime.triton_compat import INTERPRET, jit, tl
from ..shapes import broadcast_shapes, compute_view_strides, numel, storage_span
from ..tensor.core import Tensor, host_view, make_tensor, new_empty
from . import dispatch, registry
from . import pointwise as PW
from .matmul_flags import _state as _MM_FLAGS
from .matmul_flags import tf32_enabled
from .registry import Cost, OpRecord, register
from .triton_helpers import convert, div_rn, libdevice

__all__ = ["linear", "einsum", "ACTIVATIONS", "FLOATS", "product"]

FLOATS = frozenset({T.float16, T.bfloat16, T.float32, T.float64})
ACTIVATIONS = (None, "relu", "gelu", "gelu_tanh", "silu", "silu_first_half")
_ACT_CODE = {None: 0, "relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4, "silu_first_half": 5}
_FAM = "matmul"
_MAX_GRID_Y = 65535


# ---------------------------------------------------------------------------------------------------------
# Names PyTorch uses in its messages
# ---------------------------------------------------------------------------------------------------------
_C10 = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
        "int8": "signed char", "uint8": "unsigned char", "int16": "short int", "int32": "int", "int64": "long int",
        "bool": "bool"}


def _c10(d: DType) -> str:
    """C++ type name of ``d`` as PyTorch prints it in ``mm`` messages ("float", "c10::Half")."""
    return _C10.get(d.name, d.name)


_tn = dispatch.torch_dtype_name  # "Float", "Half"


# ---------------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------------
@jit
def _cvt(x, DT: tl.constexpr, EXACT: tl.constexpr):
    # EXACT (the interpreter tier): the bit-exact conversion of triton_helpers; Triton's interpreter rounds
    # bfloat16 wrongly. On the GPU the native conversion is round-to-nearest-even already.
    if EXACT:
        r = convert(x, DT)
    else:
        r = x.to(DT)
    return r


@jit
def _activation(x, ACT: tl.constexpr):
    # 1 relu (NaN stays NaN, as torch.relu), 2 gelu with erf, 3 gelu with tanh, 4 silu (formulas: PyTorch's docs
    # of GELU and SiLU; libdevice's functions and IEEE division, as the elementwise gelu/silu kernels). The
    # sigmoid is built on exp(-|x|) <= 1, so nothing overflows at any input.
    if ACT == 1:
        y = tl.where(x < 0, 0.0, x)
    elif ACT == 2:
        y = 0.5 * x * (1.0 + libdevice.erf(x * 0.7071067811865476))
    elif ACT == 3:
        u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        y = 0.5 * x * (1.0 + libdevice.tanh(u))
    elif ACT == 4:
        e = libdevice.exp(-tl.abs(x))
        y = div_rn(x * tl.where(x < 0, e, 1.0), 1.0 + e)
    else:
        y = x
    return y


@jit
def _epilogue(acc, rm, rn, M, N, OUT, som, son, C, scm, scn, R, srm, srn, alpha, beta,
              INT_OUT: tl.constexpr, HAS_C: tl.constexpr, HAS_R: tl.constexpr, ACT: tl.constexpr,
              ALPHA_ONE: tl.constexpr, BETA_ONE: tl.constexpr, EXACT: tl.constexpr):
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    rm64 = rm.to(tl.int64)
    rn64 = rn.to(tl.int64)
    if INT_OUT:
        val = acc
    else:
        val = acc
        if not ALPHA_ONE:
            val = val * alpha.to(acc.dtype)
        if HAS_C:
            c = tl.load(C + rm64[:, None] * scm + rn64[None, :] * scn, mask=mask, other=0)
            c = _cvt(c, acc.dtype, EXACT)
            if BETA_ONE:
                val = val + c
            else:
                val = val + beta.to(acc.dtype) * c
        if ACT == 5:  # silu on the first N // 2 columns only: the gate half of a fused gate/up projection
            val = tl.where((rn < N // 2)[None, :], _activation(val, 4), val)
        else:
            val = _activation(val, ACT)
        if HAS_R:
            r = tl.load(R + rm64[:, None] * srm + rn64[None, :] * srn, mask=mask, other=0)
            val = val + _cvt(r, acc.dtype, EXACT)
    tl.store(OUT + rm64[:, None] * som + rn64[None, :] * son, _cvt(val, OUT.dtype.element_ty, EXACT), mask=mask)


@jit
def _mm_kernel(A, B, OUT, C, R, M, N, K, NB1, STEP_A, STEP_B,
               sa0, sa1, sam, sak, sb0, sb1, sbk, sbn, so0, so1, som, son,
               sc0, sc1, scm, scn, sr0, sr1, srm, srn, alpha: "fp64", beta: "fp64",
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
               ACC: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr, EVEN_K: tl.constexpr,
               INT_OUT: tl.constexpr, HAS_C: tl.constexpr, HAS_R: tl.constexpr, ACT: tl.constexpr,
               ALPHA_ONE: tl.constexpr, BETA_ONE: tl.constexpr, EXACT: tl.constexpr, TMA: tl.constexpr = False,
               B_KMAJOR: tl.constexpr = False):
    # TMA (sm_90+, 16-bit operands; the host checks the bulk-copy rules: unit inner strides, 16-byte aligned
    # bases and row strides): A and B tiles through tensor descriptors, B either K-major (``B_KMAJOR``: a
    # (N, K) weight read as its transpose, as ``linear`` does) or N-major; rows and columns past the ends read
    # as zeros (no wrapping, no K mask).
    pid = tl.program_id(0)
    pid_b = tl.program_id(1)
    b0 = (pid_b // NB1).to(tl.int64)
    b1 = (pid_b % NB1).to(tl.int64)
    # alpha/beta are annotated "fp64" (a string: this module postpones annotations, and Triton reads strings)
    # so float64 products see them unrounded; the epilogue converts them to the accumulator's dtype.
    # GROUP_M swizzle (Triton's matmul tutorial): consecutive programs share A row panels and B column panels
    # in L2.
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    width = GROUP_M * num_n
    first_m = (pid // width) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % width) % size_m)
    pid_n = (pid % width) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K).to(tl.int64)
    am = (rm % M).to(tl.int64)  # wrapped rows: valid addresses, no mask in the loop; masked on store
    bn = (rn % N).to(tl.int64)
    a_ptrs = A + b0 * sa0 + b1 * sa1 + am[:, None] * sam + rk[None, :] * sak
    b_ptrs = B + b0 * sb0 + b1 * sb1 + rk[:, None] * sbk + bn[None, :] * sbn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
    if TMA:
        a_desc = tl.make_tensor_descriptor(A + b0 * sa0 + b1 * sa1, shape=[M, K], strides=[sam, 1],
                                           block_shape=[BLOCK_M, BLOCK_K])
        if B_KMAJOR:
            b_desc = tl.make_tensor_descriptor(B + b0 * sb0 + b1 * sb1, shape=[N, K], strides=[sbn, 1],
                                               block_shape=[BLOCK_N, BLOCK_K])
        else:
            b_desc = tl.make_tensor_descriptor(B + b0 * sb0 + b1 * sb1, shape=[K, N], strides=[sbk, 1],
                                               block_shape=[BLOCK_K, BLOCK_N])
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
            if B_KMAJOR:
                b = b_desc.load([pid_n * BLOCK_N, k * BLOCK_K]).T
            else:
                b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
            acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=ACC)
    else:
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            if EVEN_K:
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
            else:
                kr = K - k * BLOCK_K
                a = tl.load(a_ptrs, mask=rk[None, :] < kr, other=0)
                b = tl.load(b_ptrs, mask=rk[:, None] < kr, other=0)
            if UPCAST:  # interpreter tier: its dot reads 16-bit floats as raw integers
                a = _cvt(a, tl.float32, True)
                b = _cvt(b, tl.float32, True)
            acc = tl.dot(a, b, acc, input_precision=PRECISION, out_dtype=ACC)
            a_ptrs += STEP_A
            b_ptrs += STEP_B
    _epilogue(acc, rm, rn, M, N, OUT + b0 * so0 + b1 * so1, som, son, C + b0 * sc0 + b1 * sc1, scm, scn,
              R + b0 * sr0 + b1 * sr1, srm, srn, alpha, beta, INT_OUT, HAS_C, HAS_R, ACT, ALPHA_ONE, BETA_ONE, EXACT)


@jit
def _wide(v):
    # v as a 64-bit integer (a loop counter is a Python int under the interpreter, so no .to())
    return v + tl.zeros([], dtype=tl.int64)


@jit
def _split_k_finish(acc, rm, rn, M, N, MN, WS, LOCKS, lock, pid_k, NSPLIT, OUT, som, son, C, scm, scn, R, srm, srn,
                    alpha, beta, HAS_C: tl.constexpr, HAS_R: tl.constexpr, ACT: tl.constexpr,
                    ALPHA_ONE: tl.constexpr, BETA_ONE: tl.constexpr, EXACT: tl.constexpr):
    # Deterministic split-K: this program's partial (M, BLOCK_N) -> workspace slot pid_k; arrival counter; the
    # last program of the tile sums the partials in split order 0, 1, ..., S-1 (so the result does not depend on
    # which program finished last), runs the epilogue and resets the counter for the next launch. The barrier
    # makes every thread's partial stores precede the release of the counter increment (acq_rel, GPU scope);
    # the reader's acquire orders its loads after all of them (.cg: not from L1).
    pmask = (rm < M)[:, None] & (rn < N)[None, :]
    poff = rm.to(tl.int64)[:, None] * N + rn.to(tl.int64)[None, :]
    tl.store(WS + pid_k.to(tl.int64) * MN + poff, acc, mask=pmask)
    tl.debug_barrier()
    arrived = tl.atomic_add(LOCKS + lock, 1, sem="acq_rel")
    if arrived == NSPLIT - 1:
        tot = tl.zeros(acc.shape, dtype=acc.dtype)
        ws_ptrs = WS + poff
        for s in range(0, NSPLIT):
            tot += tl.load(ws_ptrs, mask=pmask, other=0, cache_modifier=".cg")
            ws_ptrs += MN
        tl.atomic_xchg(LOCKS + lock, 0)
        _epilogue(tot, rm, rn, M, N, OUT, som, son, C, scm, scn, R, srm, srn, alpha, beta, False, HAS_C, HAS_R,
                  ACT, ALPHA_ONE, BETA_ONE, EXACT)


@jit
def _gemv_kernel(X, W, OUT, C, R, WS, LOCKS, M, N, K, MN, K_SPLIT, NSPLIT,
                 sxm, sxk, swn, swk, som, son, scm, scn, srm, srn, alpha: "fp64", beta: "fp64",
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, UNROLL: tl.constexpr,
                 PREFETCH: tl.constexpr, PERSIST: tl.constexpr, DOT_T: tl.constexpr, EVICT_W: tl.constexpr,
                 ACC: tl.constexpr,
                 PRECISION: tl.constexpr, UPCAST: tl.constexpr, EVEN_K: tl.constexpr, SPLIT: tl.constexpr,
                 HAS_C: tl.constexpr, HAS_R: tl.constexpr, ACT: tl.constexpr, ALPHA_ONE: tl.constexpr,
                 BETA_ONE: tl.constexpr, EXACT: tl.constexpr, PDL: tl.constexpr = False):
    # out[m, n] = sum_k x[m, k] * w[n, k] over this program's K range [k0, k_end); K_SPLIT is a multiple of
    # BLOCK_K (of BLOCK_K * UNROLL when EVEN_K). PDL: runtime/pdl.py (the wait before any memory access).
    pdl_enter(PDL)
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    wn = tl.minimum(rn, N - 1).to(tl.int64)  # rows past N re-read row N-1 (valid memory); masked on store
    rk = tl.arange(0, BLOCK_K)
    rk64 = rk.to(tl.int64)
    k0 = pid_k * K_SPLIT
    k_end = tl.minimum(k0 + K_SPLIT, K)
    w_ptrs = W + wn[:, None] * swn + rk64[None, :] * swk
    if BLOCK_M == 1:
        # M = 1: FMA into a (BLOCK_N, BLOCK_K) float32 tile, reduced once at the end. Each step loads a
        # (BLOCK_N, UNROLL, BLOCK_K) chunk with one load (so every load of the step is issued before the first
        # use: more bytes in flight per thread without a larger accumulator; separate loads per sub-tile were
        # interleaved with the FMAs by ptxas, 2-3 loads in flight) and sums it over UNROLL in registers. x is
        # addressed as a chunk of the same shape (every row the same addresses) so its load takes the weight's
        # layout: a 1-D x load gets a layout of its own and goes through shared memory on every step; a
        # (1, UNROLL, BLOCK_K) one spreads warps over UNROLL and so does the product (both seen in the sm_90
        # code). The layout puts warps over rows when num_warps <= BLOCK_N * max(1, BLOCK_K / 256). PREFETCH
        # loads the next chunk before computing the current one.
        rm = tl.arange(0, 1)
        CH: tl.constexpr = BLOCK_K * UNROLL
        koff = (tl.arange(0, UNROLL)[None, :, None] * BLOCK_K + rk[None, None, :]).to(tl.int64)
        w3 = W + wn[:, None, None] * swn + koff * swk
        x3 = X + tl.broadcast_to(koff, (BLOCK_N, UNROLL, BLOCK_K)) * sxk
        acc2 = tl.zeros((BLOCK_N, BLOCK_K), dtype=ACC)
        if PERSIST:
            # persistent programs (grid smaller than the row tiles; K whole chunks, no split): program p takes
            # tiles p, p + P, p + 2P, ... as one flat loop over (tile, chunk) that loads the next chunk (of this
            # tile or of the next one) before computing the current one, so the loads run on across tile ends;
            # each tile's epilogue runs when its last chunk is summed. Past the last tile the prefetch re-reads
            # row N-1 (valid memory, not used).
            nprog = tl.num_programs(0)
            n_ch = K // CH
            total = tl.cdiv(tl.cdiv(N, BLOCK_N) - pid_n, nprog) * n_ch
            ar = tl.arange(0, BLOCK_N)
            w = tl.load(w3, eviction_policy=EVICT_W)
            x = tl.load(x3, eviction_policy="evict_last")
            for it in range(1, total + 1):
                t_nx = pid_n + (it // n_ch) * nprog
                k_nx = _wide(it % n_ch) * CH
                wn_nx = tl.minimum(t_nx * BLOCK_N + ar, N - 1).to(tl.int64)
                w_next = tl.load(W + wn_nx[:, None, None] * swn + (koff + k_nx) * swk, eviction_policy=EVICT_W)
                x_next = tl.load(x3 + k_nx * sxk, eviction_policy="evict_last")
                acc2 += tl.sum(_cvt(w, ACC, EXACT) * _cvt(x, ACC, EXACT), axis=1)
                if it % n_ch == 0:
                    rn_t = (pid_n + (it // n_ch - 1) * nprog) * BLOCK_N + ar
                    _epilogue(tl.reshape(tl.sum(acc2, axis=1), (1, BLOCK_N)), rm, rn_t, M, N, OUT, som, son, C,
                              scm, scn, R, srm, srn, alpha, beta, False, HAS_C, HAS_R, ACT, ALPHA_ONE, BETA_ONE,
                              EXACT)
                    acc2 = tl.zeros((BLOCK_N, BLOCK_K), dtype=ACC)
                w = w_next
                x = x_next
        else:
            if EVEN_K:
                k_full = k_end
            else:
                k_full = k0 + (k_end - k0) // CH * CH
            if PREFETCH:
                if k0 < k_full:
                    w = tl.load(w3 + _wide(k0) * swk, eviction_policy=EVICT_W)
                    x = tl.load(x3 + _wide(k0) * sxk, eviction_policy="evict_last")
                    for kk in range(k0 + CH, k_full, CH):
                        w_next = tl.load(w3 + _wide(kk) * swk, eviction_policy=EVICT_W)
                        x_next = tl.load(x3 + _wide(kk) * sxk, eviction_policy="evict_last")
                        acc2 += tl.sum(_cvt(w, ACC, EXACT) * _cvt(x, ACC, EXACT), axis=1)
                        w = w_next
                        x = x_next
                    acc2 += tl.sum(_cvt(w, ACC, EXACT) * _cvt(x, ACC, EXACT), axis=1)
            else:
                for kk in range(k0, k_full, CH):
                    w = tl.load(w3 + _wide(kk) * swk, eviction_policy=EVICT_W)
                    x = tl.load(x3 + _wide(kk) * sxk, eviction_policy="evict_last")
                    acc2 += tl.sum(_cvt(w, ACC, EXACT) * _cvt(x, ACC, EXACT), axis=1)
            if not EVEN_K:  # the rest of the range (less than one chunk), masked
                if k_full < k_end:
                    km = koff < k_end - k_full
                    w = tl.load(w3 + _wide(k_full) * swk, mask=km, other=0, eviction_policy=EVICT_W)
                    x = tl.load(x3 + _wide(k_full) * sxk, mask=km, other=0)
                    acc2 += tl.sum(_cvt(w, ACC, EXACT) * _cvt(x, ACC, EXACT), axis=1)
            acc = tl.reshape(tl.sum(acc2, axis=1), (1, BLOCK_N))
    else:
        # 2 <= M <= MAX_M: tl.dot with M padded to BLOCK_M (>= 16). DOT_T computes the transposed product
        # (BLOCK_N, BLOCK_M) = w @ x^T, so the weight tile is the dot's A operand (Hopper's wgmma takes A tiles of
        # 64 rows; x as A is only BLOCK_M = 16 rows).
        rm = tl.arange(0, BLOCK_M)
        xm = tl.minimum(rm, M - 1).to(tl.int64)
        x_ptrs = X + xm[:, None] * sxm + rk64[None, :] * sxk
        if DOT_T:
            acc_t = tl.zeros((BLOCK_N, BLOCK_M), dtype=ACC)
        else:
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=ACC)
        for kk in range(k0, k_end, BLOCK_K):
            ko = _wide(kk)
            if EVEN_K:
                w = tl.load(w_ptrs + ko * swk, eviction_policy=EVICT_W)
                x = tl.load(x_ptrs + ko * sxk)
            else:
                km = rk < k_end - kk
                w = tl.load(w_ptrs + ko * swk, mask=km[None, :], other=0, eviction_policy=EVICT_W)
                x = tl.load(x_ptrs + ko * sxk, mask=km[None, :], other=0)
            if UPCAST:  # interpreter tier: its dot reads 16-bit floats as raw integers
                w = _cvt(w, tl.float32, True)
                x = _cvt(x, tl.float32, True)
            if DOT_T:
                acc_t = tl.dot(w, tl.trans(x), acc_t, input_precision=PRECISION, out_dtype=ACC)
            else:
                acc = tl.dot(x, tl.trans(w), acc, input_precision=PRECISION, out_dtype=ACC)
        if DOT_T:
            acc = tl.trans(acc_t)
    if SPLIT:
        _split_k_finish(acc, rm, rn, M, N, MN, WS, LOCKS, pid_n, pid_k, NSPLIT, OUT, som, son, C, scm, scn, R, srm,
                        srn, alpha, beta, HAS_C, HAS_R, ACT, ALPHA_ONE, BETA_ONE, EXACT)
    elif not PERSIST:
        _epilogue(acc, rm, rn, M, N, OUT, som, son, C, scm, scn, R, srm, srn, alpha, beta, False, HAS_C, HAS_R,
                  ACT, ALPHA_ONE, BETA_ONE, EXACT)


# ---------------------------------------------------------------------------------------------------------
# Host side of the Triton implementation
# ---------------------------------------------------------------------------------------------------------
def _f64(v: float):
    """A float64 scalar kernel argument (the kernels annotate ``alpha``/``beta`` as float64; Triton's interpreter
    ignores annotations, so it gets a typed interpreter tensor)."""
    if not INTERPRET:
        return float(v)
    from triton.runtime.interpreter import TensorHandle
    return tl.tensor(TensorHandle(np.array([float(v)], dtype=np.float64), tl.float64), tl.float64)


def _tl(d: DType):
    return {"float16": tl.float16, "bfloat16": tl.bfloat16, "float32": tl.float32, "float64": tl.float64,
            "int8": tl.int8, "int32": tl.int32}[d.name]


def _acc_dtype(d: DType):
    return tl.int32 if d is T.int8 else (tl.float64 if d is T.float64 else tl.float32)


def _precision(d: DType) -> str:
    # TF32 only for float32 and only when the user opted in (matmul_flags); "tf32" is also Triton's default
    # for 16-bit inputs, where the setting has no effect.
    if d is T.float32:
        return "tf32" if tf32_enabled() else "ieee"
    return "tf32" if d in (T.float16, T.bfloat16) else "ieee"


@lru_cache(maxsize=None)
def _sm_count(index: int) -> int:
    """SMs of CUDA device ``index``; -1 (the interpreter tier on the cpu) counts as 4, so that a table of programs
    per SM still splits small problems there."""
    if index < 0:
        return 4
    from .. import cuda
    return int(cuda.get_device_properties(index).multi_processor_count)


def _target_programs(cfg: dict, device) -> int:
    if "target_programs" in cfg:
        return int(cfg["target_programs"])
    return int(cfg["programs_per_sm"]) * _sm_count(-1 if device.type == "cpu" else device.index or 0)


_LOCKS: dict = {}


def _locks(device, n: int) -> Tensor:
    """Arrival counters of split-K, all zero between launches (each launch resets the ones it used). One
    buffer per (device, stream): launches on one stream are ordered, so they never share a counter at once.
    A launch plan looks the buffer up per call too, so zeroing a new one is not part of a recorded call."""
    from ..tensor.creation import zeros
    if device.type == "cpu":  # interpreter tier: programs run one after another
        return unrecorded(zeros, n, dtype=T.int32, device=device)
    from .. import cuda
    key = (device.index, cuda.current_stream(device.index).cuda_stream)
    buf = _LOCKS.get(key)
    if buf is None or buf.numel() < n:
        buf = unrecorded(zeros, max(n, 1024), dtype=T.int32, device=device)
        _LOCKS[key] = buf
    return buf


def _strides2(t: Tensor | None) -> tuple[int, int]:
    return (0, 0) if t is None else (t.stride(-2), t.stride(-1))


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def split_k(K: int, n_tiles: int, cfg: dict, device, *, step: int, grain: int) -> tuple[int, int]:
    """How a small-M kernel cuts K over programs: ``(split, k_split)``, ``split`` programs per output tile each
    taking ``k_split`` of K (the last one the rest).

    Split-K runs when the output tiles alone are fewer than the target program count of the config
    (``target_programs``, or ``programs_per_sm`` times the SM count): ``split = ceil(target / n_tiles)``, at most
    ``K // MIN_K_SPLIT``. ``k_split`` is a multiple of ``step`` (the kernel's unrolled chunk) when a split range
    holds at least one chunk, else of ``grain`` (its smallest tile).
    """
    if K <= 0:
        return 1, 0
    target = _target_programs(cfg, device) if "target_programs" in cfg or "programs_per_sm" in cfg else 0
    split = 1
    if n_tiles < target:
        split = max(1, min(_cdiv(target, n_tiles), K // max(1, int(cfg.get("MIN_K_SPLIT", 1)))))
    if split == 1:
        return 1, K
    per = _cdiv(K, split)
    g = step if per >= step else grain
    k_split = _cdiv(per, g) * g
    return _cdiv(K, k_split), k_split


def _launch_gemv(x: Tensor, w: Tensor, out: Tensor, c, r, alpha, beta, act, cfg: dict) -> None:
    """out (M, N) = epilogue(x (M, K) @ w (N, K)^T) with the small-M kernel (see the module docstring).

    Settings read from ``cfg`` (the ``gemv`` table): ``BLOCK_N``, ``BLOCK_K``, ``BLOCK_M`` (M >= 2: the dot's M,
    at least 16), ``UNROLL`` (M = 1: sub-tiles loaded per step, 1/2/4), ``PREFETCH`` (M = 1: load the next step
    before computing this one), ``DOT_T`` (M >= 2: the weight tile as the dot's A operand), ``EVICT_W`` (L2
    policy of the weight loads: "" or "evict_first"), ``programs_per_sm``/``target_programs`` and ``MIN_K_SPLIT``
    (split-K, :func:`split_k`), ``PERSIST`` (M = 1, no split-K, K a whole number of chunks: at most this many
    programs per SM, each looping over row tiles with the next chunk loaded across tile ends; 0, the default,
    one program per tile), ``num_warps``, ``num_stages``.
    """
    M, K = x.shape
    N = w.shape[0]
    dev, dt = out.device, x.dtype
    bn, bk = cfg["BLOCK_N"], cfg["BLOCK_K"]
    bm = 1 if M == 1 else max(16, cfg["BLOCK_M"])  # M = 1: the FMA path; else tl.dot with M padded to 16
    unroll = int(cfg.get("UNROLL", 1)) if M == 1 else 1
    check(unroll >= 1 and unroll & (unroll - 1) == 0,
          lambda: f"gemv config: UNROLL must be a power of two, got {unroll}", ValueError)
    n_tiles = _cdiv(N, bn)
    split, k_split = split_k(K, n_tiles, cfg, dev, step=bk * unroll, grain=bk)
    use_split = split > 1
    ch = bk * unroll
    even = K % ch == 0 and (not use_split or k_split % ch == 0)
    ws = new_empty((split * M * N,), T.float64 if dt is T.float64 else T.float32, dev) if use_split else out
    locks = _locks(dev, n_tiles) if use_split else out
    per_sm = int(cfg.get("PERSIST", 0)) if M == 1 and not use_split and K > 0 and K % ch == 0 else 0
    pdl = pdl_settings(cfg, dev)
    grid0 = n_tiles
    if per_sm > 0:  # persistent programs: at most per_sm per SM, each looping over row tiles
        grid0 = min(n_tiles, per_sm * _sm_count(-1 if dev.type == "cpu" else dev.index or 0))
        per_sm = per_sm if grid0 < n_tiles else 0
    _launch(_gemv_kernel, (grid0 if per_sm else n_tiles, split),
            (x, w, out, c if c is not None else out, r if r is not None else out, ws, locks, M, N, K, M * N,
             k_split, split, x.stride(0), x.stride(1), w.stride(0), w.stride(1), out.stride(0), out.stride(1),
             *_strides2(c), *_strides2(r), _f64(alpha), _f64(beta)),
            dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, UNROLL=unroll, PREFETCH=bool(cfg.get("PREFETCH", False)),
                 PERSIST=per_sm > 0, DOT_T=bool(cfg.get("DOT_T", False)), EVICT_W=str(cfg.get("EVICT_W", "")), ACC=_acc_dtype(dt),
                 PRECISION=_precision(dt), UPCAST=interpreting() and dt.itemsize == 2, EVEN_K=even, SPLIT=use_split,
                 HAS_C=c is not None, HAS_R=r is not None, ACT=_ACT_CODE[act], ALPHA_ONE=alpha == 1,
                 BETA_ONE=beta == 1, EXACT=interpreting(), **pdl, num_warps=cfg.get("num_warps", 4),
                 num_stages=cfg.get("num_stages", 3)),
            ws=ws if use_split else None, locks=(locks, n_tiles) if use_split else None)


def _tma_operands(a: Tensor, b: Tensor) -> bool:
    """Whether ``a (B0, B1, M, K)`` and ``b (B0, B1, K, N)`` meet the rules of Hopper's bulk tensor copies as
    ``_mm_kernel`` uses them: 16-bit floats, ``a`` with unit stride along K, ``b`` with unit stride along K or
    along N, 16-byte aligned bases and 16-byte multiples for every other stride."""
    for t, inner in ((a, (3,)), (b, (2, 3))):
        if t.dtype not in (T.float16, T.bfloat16) or t.data_ptr() % 16:
            return False
        unit = [d for d in inner if t.stride(d) == 1]
        if not unit:
            return False
        if any((t.stride(d) * 2) % 16 for d in range(4) if d != unit[0] and (d >= 2 or t.shape[d] > 1)):
            return False
    return True


def _launch_mm(a: Tensor, b: Tensor, out: Tensor, c, r, alpha, beta, act) -> None:
    """Tiled GEMM over two batch dims: a (B0, B1, M, K), b (B0, B1, K, N), out/c/r (B0, B1, M, N)."""
    nb0, nb1, M, N = out.shape
    K = a.shape[-1]
    dt = a.dtype
    # b_kmajor: 2 when b is K-major (a weight (N, K) read transposed, as linear does), else 1: the tables tile
    # the two layouts apart (benchmarks/sweep_mm.py)
    kmajor = 2 if b.stride(2) == 1 and N > 1 else 1
    cfg = launch_config("mm", out.device, dtypes=(dt,), m=M, n=N, k=K, b_kmajor=kmajor)
    bm, bn, bk, gm = cfg.pop("BLOCK_M"), cfg.pop("BLOCK_N"), cfg.pop("BLOCK_K"), cfg.pop("GROUP_M")
    tma = bool(cfg.pop("TMA", False)) and not interpreting() and _tma_operands(a, b)
    if tma:
        cfg.update(TMA=True, B_KMAJOR=b.stride(2) == 1)
    grid = (-(-M // bm) * -(-N // bn), nb0 * nb1)
    c4 = c.stride() if c is not None else (0, 0, 0, 0)
    r4 = r.stride() if r is not None else (0, 0, 0, 0)
    _launch(_mm_kernel, grid,
            (a, b, out, c if c is not None else out, r if r is not None else out, M, N, K, nb1, bk * a.stride(3),
             bk * b.stride(2), *a.stride(), *b.stride(), *out.stride(), *c4, *r4, _f64(alpha), _f64(beta)),
            dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=gm, ACC=_acc_dtype(dt), PRECISION=_precision(dt),
                 UPCAST=interpreting() and dt.itemsize == 2, EVEN_K=K % bk == 0, INT_OUT=dt is T.int8,
                 HAS_C=c is not None, HAS_R=r is not None, ACT=_ACT_CODE[act], ALPHA_ONE=alpha == 1,
                 BETA_ONE=beta == 1, EXACT=interpreting(), **cfg))


# ---------------------------------------------------------------------------------------------------------
# Launch plans: a repeated call with the same shapes does one dict lookup, one allocation and one launch
# ---------------------------------------------------------------------------------------------------------
# A decode step calls the same few linears with the same shapes thousands of times; the general host path
# (argument checks, views, stride arithmetic, config lookup, workspace sizing) costs far more than the launch.
# So the first call of a signature runs the general path inside a launcher Recording (kernel, grid, arguments,
# settings; the workspace and split-K counters declared by :func:`_launch` as scratch, the counters looked up per
# call), and the record becomes a launcher LaunchPlan: the kernel arguments that are the caller's tensors (or views
# of them at the same address: the kernels read tensors only through their data pointers; strides are scalar
# arguments) become slots; every other argument is a constant. The next call with the same signature (shapes,
# strides, dtypes, devices of every tensor, the options, the float32 precision flag) allocates the output (or
# takes the caller's out=), fills the slots and launches. Plans are made only when the general path did exactly
# one launch of a Triton kernel, on a CUDA device or under the interpreter tier. The keys hold the config state
# (``runtime.configs.state()``): a call under an override (``runtime.configs.override``) gets a plan of that
# override's settings, never one recorded under another setting, so a sweep times the kernels, not the host path.
# :func:`clear_plans` forgets them.

_NO_PLAN = object()
_PLAN_LIMIT = 4096
Plan = LaunchPlan   # a linear / product / int4 plan: the launcher's recorded launch sequence (one launch here)


def _launch(kernel, grid, args: tuple, meta: dict, *, ws: Tensor | None = None, locks=None) -> None:
    """Launch through :func:`launch` (looked up at call time, so tests can spy on it), declaring to the
    launcher's recording, when a plan is being made on this thread, ``ws`` (a per-call workspace among ``args``)
    and ``locks`` (a pair: the split-K counter buffer among ``args``, counters used), which a plan looks up per
    call through :func:`_locks` (it is per stream)."""
    if ws is not None:
        scratch(ws)
    if locks is not None:
        buf, n = locks
        dev = buf._storage.device
        scratch(buf, lambda: _locks(dev, n))
    launch(kernel, grid, *args, **meta)


def _tensor_sig(t):
    """The plan-key part of an optional tensor: shape, strides, dtype and device (no Python-level hashing)."""
    if t is None:
        return None
    d = t._storage.device
    return (t._shape, t._stride, t._dtype, d.type, d.index)


def record_plan(cache: dict, key, run, tensors: tuple, out_given: bool = False):
    """Run ``run()`` (the general path of one call) inside a launcher :class:`Recording`, and cache under ``key``
    a :class:`LaunchPlan` of it (slots: ``tensors``, in the order the plan is called with, ``None`` where absent;
    the new output, the workspace, the split-K counters) when it did exactly one launch that a plan can replay,
    else a marker that the signature has none. Returns ``run()``'s result. ``out_given``: the last of
    ``tensors`` is the caller's ``out=`` (apart from the others), which the call must return; a call that changed
    its shape, strides or dtype (a resize) gets no plan."""
    sig = _tensor_sig(tensors[-1]) if out_given else None
    with Recording() as r:
        out = run()
    if len(cache) >= _PLAN_LIMIT:
        cache.clear()
    plan = None
    if len(r.launches) == 1 and (not out_given or _tensor_sig(tensors[-1]) == sig):
        plan = make_launch_plan(r, tensors, out, make_tensor, given=len(tensors) - 1 if out_given else None,
                                via=_NS)
    cache[key] = plan or _NO_PLAN
    return out


_NS = globals()   # planned calls launch through this module's ``launch`` when a spy replaced it


def apart(out: Tensor, *tensors) -> bool:
    """True when ``out`` shares memory with none of ``tensors`` (``None`` entries skipped): a plan may write the
    caller's ``out=`` directly (the general path copies through a temporary otherwise)."""
    s = out._storage
    for t in tensors:
        if t is not None and t._storage is s:
            return False
    return True


def clear_plans() -> None:
    """Forget every launch plan (of linear and of the int4 linear)."""
    for c in _PLAN_CACHES:
        c.clear()


def _via_plan(cache: dict, key, tensors: tuple, general):
    """``general()`` (the general path of a call whose tensors are ``tensors``, first one on the launch device),
    through the plan cached under ``key`` when there is one (and recording one on the first call)."""
    key = (key, _configs.state())  # an override gets plans of its own, never another setting's
    plan = cache.get(key)
    if plan is None:
        d = tensors[0]._storage.device
        if d.type == "cuda" or INTERPRET:
            return record_plan(cache, key, general, tensors)
    elif plan is not _NO_PLAN:
        return plan(*tensors)
    return general()


_LINEAR_PLANS: dict = {}
_PRODUCT_PLANS: dict = {}
_PLAN_CACHES = [_LINEAR_PLANS, _PRODUCT_PLANS]


def _collapse_batch(ts: list, nb: int):
    """Merge the leading ``nb`` batch dims of the tensors ``ts`` (all of one batch shape) where every tensor is
    contiguous across them, drop size-1 dims; returns views with the merged batch dims."""
    bshape = list(ts[0].shape[:nb])
    keep = [i for i, s in enumerate(bshape) if s != 1]
    shape = [bshape[i] for i in keep]
    strides = [[t.stride(i) for i in keep] for t in ts]
    i = len(shape) - 2
    while i >= 0:
        if all(st[i] == st[i + 1] * shape[i + 1] for st in strides):
            shape[i] *= shape[i + 1]
            del shape[i + 1]
            for st in strides:
                st[i] = st[i + 1]
                del st[i + 1]
        i -= 1
    return [t.as_strided(tuple(shape) + tuple(t.shape[nb:]), tuple(st) + tuple(t.stride()[nb:]), t.storage_offset())
            for t, st in zip(ts, strides)]


def _batched(fn, ts: list, nb: int) -> None:
    """Call ``fn(views)`` with views of exactly two batch dims whose product fits grid axis 1, looping on the host
    over whatever does not (more than two batch dims after collapsing, or more than 65535 batches)."""
    ts = _collapse_batch(ts, nb)
    nb = ts[0].ndim - 2
    if nb > 2:
        for i in range(ts[0].shape[0]):
            _batched(fn, [t.select(0, i) for t in ts], nb - 1)
        return
    if nb < 2:
        ts = [t.unsqueeze(0) if nb == 1 else t.unsqueeze(0).unsqueeze(0) for t in ts]
    b0, b1 = ts[0].shape[0], ts[0].shape[1]
    if b1 > _MAX_GRID_Y:
        for i in range(b0):
            for s in range(0, b1, _MAX_GRID_Y):
                n = min(_MAX_GRID_Y, b1 - s)
                fn([t.select(0, i).narrow(0, s, n).unsqueeze(0) for t in ts])
        return
    step = max(1, _MAX_GRID_Y // b1)
    for s in range(0, b0, step):
        fn([t.narrow(0, s, min(step, b0 - s)) for t in ts])


def _gemm_triton(out: Tensor, a: Tensor, b: Tensor, c=None, r=None, *, alpha=1, beta=1, act=None) -> None:
    """The ``triton`` implementation of every product: ``out = act(alpha * a @ b + beta * c) + r``.

    Args:
        out: (*batch, M, N), any strides, no internal overlap.
        a: (*batch, M, K); b: (*batch, K, N) (batch dims already broadcast, stride 0 where expanded).
        c, r: ``None`` or expanded to ``out.shape``; ``c`` is skipped by the caller when beta == 0.
    """
    if out.numel() == 0:
        return
    nb = out.ndim - 2
    M, N = out.shape[-2:]
    batch = numel(out.shape[:-2])
    if batch == 1 and a.dtype is not T.int8:
        cfg = launch_config("gemv", out.device, dtypes=(a.dtype,), m=min(M, N), n=max(M, N), k=a.shape[-1])
        sq = [t.reshape(t.shape[-2:]) if t is not None else None for t in (out, a, b, c, r)]
        o2, a2, b2, c2, r2 = sq
        # silu_first_half splits the output's columns, so never the transposed problem: the GEMV only for M rows
        # within MAX_M, else the tiled kernel
        if min(M, N) <= cfg["MAX_M"] and (act != "silu_first_half" or M <= cfg["MAX_M"]):
            if M <= N or act == "silu_first_half":
                _launch_gemv(a2, b2.t(), o2, c2, r2, alpha, beta, act, cfg)
            else:  # small N (mv): the same kernel on the transposed problem out^T = b^T a^T
                tr = [t.t() if t is not None else None for t in (c2, r2)]
                _launch_gemv(b2.t(), a2, o2.t(), tr[0], tr[1], alpha, beta, act, cfg)
            return
    ts = [out, a, b] + [t for t in (c, r) if t is not None]

    def run(views):
        o, a4, b4 = views[:3]
        rest = iter(views[3:])
        c4 = next(rest) if c is not None else None
        r4 = next(rest) if r is not None else None
        _launch_mm(a4, b4, o, c4, r4, alpha, beta, act)

    _batched(run, ts, nb)


# ---------------------------------------------------------------------------------------------------------
# The cpu implementation (NumPy) and the float64 oracle pieces
# ---------------------------------------------------------------------------------------------------------
_erf = np.frompyfunc(math.erf, 1, 1)


def _np_activation(x: np.ndarray, act) -> np.ndarray:
    """The activations of the epilogue in NumPy (the dtype of ``x``: float32 or float64)."""
    if act is None:
        return x
    if act == "relu":
        return np.where(x < 0, x.dtype.type(0), x)
    if act == "gelu":
        return (0.5 * x * (1.0 + _erf(x.astype(np.float64) / math.sqrt(2.0)).astype(np.float64))).astype(x.dtype)
    if act == "gelu_tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if act == "silu":
        with np.errstate(over="ignore"):
            return x / (1.0 + np.exp(-x))
    if act == "silu_first_half":  # the last axis holds the output columns
        y = np.array(x, copy=True)
        h = x.shape[-1] // 2
        y[..., :h] = _np_activation(x[..., :h], "silu")
        return y
    fail(f"linear: unknown activation {act!r}; expected one of {ACTIVATIONS}", ValueError)


def _gemm_cpu(out: Tensor, a: Tensor, b: Tensor, c=None, r=None, *, alpha=1, beta=1, act=None) -> None:
    """The ``cpu`` implementation of every product (same contract as :func:`_gemm_triton`): NumPy ``matmul`` in
    float32 (float64 for float64, int32 for int8), the epilogue in that dtype, one rounding to ``out.dtype``."""
    if out.numel() == 0:
        return
    dt = a.dtype
    if dt is T.int8:
        host_view(out)[...] = np.matmul(host_view(a).astype(np.int32), host_view(b).astype(np.int32))
        return
    ct = T.float64 if dt is T.float64 else T.float32

    def up(t):
        v = host_view(t)
        return v if t.dtype is ct else cast_array(v, t.dtype, ct)

    with np.errstate(all="ignore"):
        p = np.matmul(up(a), up(b))
        if p.dtype != ct.numpy:
            p = p.astype(ct.numpy)
        if alpha != 1:
            p = p * ct.numpy.type(alpha)
        if c is not None:
            p = p + (up(c) if beta == 1 else ct.numpy.type(beta) * up(c))
        p = _np_activation(np.asarray(p, dtype=ct.numpy), act)
        if r is not None:
            p = p + up(r)
    host_view(out)[...] = cast_array(np.asarray(p, dtype=ct.numpy), ct, out.dtype)


def _or_act(x: np.ndarray, act) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if act is None:
        return x
    if act == "relu":
        return np.where(x < 0, 0.0, x)
    if act == "gelu":
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float64))
    if act == "gelu_tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    if act == "silu_first_half":
        h = x.shape[-1] // 2
        return np.concatenate([_or_act(x[..., :h], "silu"), x[..., h:]], axis=-1)
    return x / (1.0 + np.exp(-x))


def _f(x):
    return np.asarray(x, dtype=np.float64)


def _or_addmm(input, mat1, mat2, beta=1, alpha=1):
    p = alpha * np.matmul(_f(mat1), _f(mat2))
    return p if beta == 0 else p + beta * _f(input)


def _or_linear(input, weight, bias=None, activation=None, residual=None):
    y = np.matmul(_f(input), _f(weight).T)
    if bias is not None:
        y = y + _f(bias)
    y = _or_act(y, activation)
    return y if residual is None else y + _f(residual)


# ---------------------------------------------------------------------------------------------------------
# Shared host pipeline of the products
# ---------------------------------------------------------------------------------------------------------
def _operands(fn: str, *pairs) -> None:
    for name, v in pairs:
        check(isinstance(v, Tensor), lambda: f"{fn}(): argument '{name}' must be Tensor, not {type(v).__name__}",
              TypeError)


def _device(fn: str, *ts):
    ts = [t for t in ts if t is not None]
    dev = ts[0].device
    for t in ts[1:]:
        check(t.device == dev, lambda: f"{fn}: Expected all tensors to be on the same device, but found at least two "
              f"devices, {dev} and {t.device}!")
    return dev


def _float_dtype(fn: str, d: DType) -> None:
    dispatch.check_dtype(FLOATS, d, fn)


def _scalar(fn: str, name: str, v, d: DType):
    """``beta``/``alpha`` as a Python number for dtype ``d`` (a complex value is refused as PyTorch)."""
    if isinstance(v, Tensor):
        v = v.item()
    if isinstance(v, complex):
        check(v.imag == 0, lambda: f"{fn}: value cannot be converted to type {_c10(d)} without overflow")
        v = v.real
    check(isinstance(v, (bool, int, float)), lambda: f"{fn}(): argument '{name}' must be Number, not "
          f"{type(v).__name__}", TypeError)
    return float(v)


def _new_out(fn: str, out, shape, dtype: DType, dev, *, rule: str = "exact") -> Tensor:
    """A new output, or the user's ``out=`` checked (PyTorch: exactly the result dtype) and resized."""
    if out is None:
        return new_empty(shape, dtype, dev)
    check(isinstance(out, Tensor), lambda: f"{fn}(): argument 'out' must be Tensor, not {type(out).__name__}",
          TypeError)
    if rule == "exact":
        check(out.dtype is dtype, lambda: f"{fn}: Expected out tensor to have dtype {_c10(dtype)}, but got "
              f"{_c10(out.dtype)} instead")
    elif rule == "dot":
        check(out.dtype is dtype, lambda: f"{fn}: result dtype {_tn(out.dtype)} does not match input dtype "
              f"{_tn(dtype)}")
    return dispatch.resolve_out(out, shape, dtype, dev, fn)


def _overlap(x: Tensor, y: Tensor) -> bool:
    if x.untyped_storage() is not y.untyped_storage() or x.numel() == 0 or y.numel() == 0:
        return False
    a0, a1 = storage_span(x.shape, x.stride(), x.storage_offset())
    b0, b1 = storage_span(y.shape, y.stride(), y.storage_offset())
    ia, ib = x.dtype.itemsize, y.dtype.itemsize
    return not (a1 * ia <= b0 * ib or b1 * ib <= a0 * ia)


def _same_view(x: Tensor, y: Tensor) -> bool:
    return (x.data_ptr() == y.data_ptr() and tuple(x.shape) == tuple(y.shape) and tuple(x.stride()) == tuple(y.stride())
            and x.dtype is y.dtype)


def product(name: str, out: Tensor, a: Tensor, b: Tensor, c: Tensor | None = None, r: Tensor | None = None, *,
            alpha: float = 1, beta: float = 1, act: str | None = None) -> Tensor:
    """Run op ``name``'s implementation (``cpu`` or ``triton`` from the op table) on checked descriptors:
    ``out = act(alpha * a @ b + beta * c) + r``.

    Args:
        name: the op-table record whose implementation runs.
        out: (*batch, M, N); a: (*batch, M, K); b: (*batch, K, N) with identical batch dims (expand first).
        c, r: ``None`` or tensors broadcastable to ``out.shape`` (expanded here); ``c`` is ignored when
            ``beta == 0``.

    Returns:
        ``out``. An output sharing memory with ``a`` or ``b`` (or partly with ``c``/``r``) is computed into a
        temporary and copied.
    """
    if out.numel() == 0:
        return out
    if c is not None and beta == 0:
        c = None
    c = c.expand(out.shape) if c is not None and tuple(c.shape) != tuple(out.shape) else c
    r = r.expand(out.shape) if r is not None and tuple(r.shape) != tuple(out.shape) else r
    target = out
    if (_overlap(out, a) or _overlap(out, b) or any(t is not None and _overlap(out, t) and not _same_view(out, t)
                                                     for t in (c, r))):
        target = new_empty(out.shape, out.dtype, out.device)
    registry.impl(name, out.device.type)(target, a, b, c, r, alpha=alpha, beta=beta, act=act)
    if target is not out:
        out.copy_(target)
    return out


def _flat2(t: Tensor, rows: int, cols: int) -> Tensor | None:
    st = compute_view_strides(tuple(t.shape), tuple(t.stride()), (rows, cols))
    return None if st is None else t.as_strided((rows, cols), st, t.storage_offset())


def _rows_times(name: str, out: Tensor, x: Tensor, b2: Tensor, c=None, r=None, *, alpha=1, beta=1, act=None):
    """``out (*lead, N) = epilogue(x (*lead, K) @ b2 (K, N))``: one 2-D product when ``x``, ``out`` (and ``c``,
    ``r``) can be viewed as (rows, .) without copies, else a batched product with ``b2`` broadcast (stride 0),
    never a copy of ``x``."""
    K, N = b2.shape
    lead = tuple(x.shape[:-1])
    rows = numel(lead)
    if out.numel() == 0:
        return out
    c = c.expand(out.shape) if c is not None and beta != 0 else None
    r = r.expand(out.shape) if r is not None else None
    if x.ndim == 1:
        product(name, out.unsqueeze(0), x.unsqueeze(0), b2, None if c is None else c.unsqueeze(0),
                None if r is None else r.unsqueeze(0), alpha=alpha, beta=beta, act=act)
        return out
    views = [_flat2(x, rows, K), _flat2(out, rows, N)] + [_flat2(t, rows, N) for t in (c, r) if t is not None]
    if all(v is not None for v in views):
        it = iter(views[2:])
        c2 = next(it) if c is not None else None
        r2 = next(it) if r is not None else None
        product(name, views[1], views[0], b2, c2, r2, alpha=alpha, beta=beta, act=act)
        return out
    bshape = lead[:-1]
    product(name, out, x, b2.expand(bshape + (K, N)), c, r, alpha=alpha, beta=beta, act=act)
    return out


# ---------------------------------------------------------------------------------------------------------
# Checks shared by the drivers (messages as PyTorch 2.13)
# ---------------------------------------------------------------------------------------------------------
def _check_mm_dtypes(a: Tensor, b: Tensor) -> None:
    check(a.dtype is b.dtype, lambda: f"expected m1 and m2 to have the same dtype, but got: {_c10(a.dtype)} != "
          f"{_c10(b.dtype)}")


def _check_mm_shapes(m: int, k: int, k2: int, n: int) -> None:
    check(k == k2, lambda: f"mat1 and mat2 shapes cannot be multiplied ({m}x{k} and {k2}x{n})")


def _check_bmm(a: Tensor, b: Tensor, nbatch: int) -> None:
    check(a.dtype is b.dtype, lambda: f"expected scalar type {_tn(a.dtype)} but found {_tn(b.dtype)}")
    check(b.shape[-2] == a.shape[-1], lambda: f"Expected size for first two dimensions of batch2 tensor to be: "
          f"[{nbatch}, {a.shape[-1]}] but got: [{nbatch}, {b.shape[-2]}].")


def _check_inplace(fn: str, self: Tensor, shape) -> None:
    check(tuple(self.shape) == tuple(shape), lambda: f"Bad in-place call: input tensor size {list(self.shape)} and "
          f"output tensor size {list(shape)} should match")


def _mm_core(fn: str, name: str, a: Tensor, b: Tensor, out, *, c=None, alpha=1, beta=1, inplace=None) -> Tensor:
    M, K = a.shape
    N = b.shape[1]
    dev = _device(fn, a, b, c)
    if inplace is not None:
        _check_inplace(fn, inplace, (M, N))
        o = dispatch.check_inplace(inplace, (M, N), a.dtype, fn + "_")
    else:
        o = _new_out(fn, out, (M, N), a.dtype, dev)
    return product(name, o, a, b, c, alpha=alpha, beta=beta)


# ---------------------------------------------------------------------------------------------------------
# Drivers (dispatch contract: driver(rec, args, *, out, inplace) -> Tensor)
# ---------------------------------------------------------------------------------------------------------
def _mm_driver(rec, args, *, out=None, inplace=None):
    a, b = args["input"], args["mat2"]
    if out is None and a.__class__ is Tensor and b.__class__ is Tensor:
        return _via_plan(_PRODUCT_PLANS, ("mm", _tensor_sig(a), _tensor_sig(b), _MM_FLAGS["precision"]), (a, b),
                         lambda: _mm_general(a, b, None))
    return _mm_general(a, b, out)


def _mm_general(a, b, out):
    _operands("mm", ("input", a), ("mat2", b))
    check(a.ndim == 2, "self must be a matrix")
    check(b.ndim == 2, "mat2 must be a matrix")
    _check_mm_dtypes(a, b)
    _check_mm_shapes(a.shape[0], a.shape[1], b.shape[0], b.shape[1])
    _float_dtype("mm", a.dtype)
    return _mm_core("mm", "mm", a, b, out)


def _addmm_driver(rec, args, *, out=None, inplace=None):
    s, a, b = args["input"], args["mat1"], args["mat2"]
    _operands("addmm", ("input", s), ("mat1", a), ("mat2", b))
    check(a.ndim == 2, lambda: f"mat1 must be a matrix, got {a.ndim}-D tensor")
    check(b.ndim == 2, lambda: f"mat2 must be a matrix, got {b.ndim}-D tensor")
    _check_mm_dtypes(a, b)
    check(s.dtype is b.dtype, lambda: f"self and mat2 must have the same dtype, but got {_tn(s.dtype)} and "
          f"{_tn(b.dtype)}")
    _check_mm_shapes(a.shape[0], a.shape[1], b.shape[0], b.shape[1])
    _float_dtype("addmm", a.dtype)
    beta, alpha = _scalar("addmm", "beta", args["beta"], a.dtype), _scalar("addmm", "alpha", args["alpha"], a.dtype)
    shape = (a.shape[0], b.shape[1])
    if inplace is None:
        s.expand(shape)  # PyTorch's broadcast error for an input that does not expand
    return _mm_core("addmm", "addmm", a, b, out, c=s, alpha=alpha, beta=beta, inplace=inplace)


def _bmm_like(fn: str, name: str, s, a: Tensor, b: Tensor, out, inplace, beta=1, alpha=1):
    check(a.ndim == 3, "batch1 must be a 3D tensor")
    check(b.ndim == 3, "batch2 must be a 3D tensor")
    check(b.shape[0] == a.shape[0] and b.shape[1] == a.shape[2],
          lambda: f"Expected size for first two dimensions of batch2 tensor to be: [{a.shape[0]}, {a.shape[2]}] "
          f"but got: [{b.shape[0]}, {b.shape[1]}].")
    check(a.dtype is b.dtype, lambda: f"expected scalar type {_tn(a.dtype)} but found {_tn(b.dtype)}")
    if s is not None:
        check(s.dtype is a.dtype, lambda: f"Input dtypes must be the same, got: input {_c10(s.dtype)}, batch1: "
              f"{_c10(a.dtype)}, batch2: {_c10(b.dtype)}")
    _float_dtype(fn, a.dtype)
    shape = (a.shape[0], a.shape[1], b.shape[2])
    dev = _device(fn, s, a, b)
    if inplace is not None:
        _check_inplace(fn, inplace, shape)
        o = dispatch.check_inplace(inplace, shape, a.dtype, fn + "_")
    else:
        if s is not None:
            s.expand(shape)
        o = _new_out(fn, out, shape, a.dtype, dev)
    return product(name, o, a, b, s, alpha=alpha, beta=beta)


def _bmm_driver(rec, args, *, out=None, inplace=None):
    a, b = args["input"], args["mat2"]
    _operands("bmm", ("input", a), ("mat2", b))
    return _bmm_like("bmm", "bmm", None, a, b, out, None)


def _baddbmm_driver(rec, args, *, out=None, inplace=None):
    s, a, b = args["input"], args["batch1"], args["batch2"]
    _operands("baddbmm", ("input", s), ("batch1", a), ("batch2", b))
    d = a.dtype
    return _bmm_like("baddbmm", "baddbmm", s, a, b, out, inplace, beta=_scalar("baddbmm", "beta", args["beta"], d),
                     alpha=_scalar("baddbmm", "alpha", args["alpha"], d))


def _mv_core(fn: str, name: str, s, mat: Tensor, vec: Tensor, out, inplace, beta=1, alpha=1, *, s_dt=None):
    sdim = s.ndim if s is not None else 1
    check(mat.ndim == 2 and vec.ndim == 1 and sdim <= 1, lambda: f"vector + matrix @ vector expected, got {sdim}, "
          f"{mat.ndim}, {vec.ndim}")
    M, K = mat.shape
    s_numel = M if s is None else s.numel()
    s0 = M if s is None else (s.shape[0] if s.ndim == 1 else s.numel())
    check(K == vec.shape[0] and s_numel in (M, 1), lambda: f"size mismatch, got input ({s0}), mat ({M}x{K}), vec "
          f"({vec.shape[0]})")
    sd = (s.dtype if s is not None else s_dt or vec.dtype)
    check(sd is mat.dtype and mat.dtype is vec.dtype, lambda: f"addmv input tensors must have the same dtype, but got "
          f"{_tn(sd)}, {_tn(mat.dtype)}, and {_tn(vec.dtype)}")
    _float_dtype(fn, mat.dtype)
    dev = _device(fn, s, mat, vec)
    if inplace is not None:
        _check_inplace(fn, inplace, (M,))
        o = dispatch.check_inplace(inplace, (M,), mat.dtype, fn + "_")
    else:
        o = _new_out(fn, out, (M,), mat.dtype, dev)
    if o.numel() == 0:
        return o
    c = None if s is None else s.expand(M).unsqueeze(1)
    product(name, o.unsqueeze(1), mat, vec.unsqueeze(1), c, alpha=alpha, beta=beta)
    return o


def _mv_driver(rec, args, *, out=None, inplace=None):
    mat, vec = args["input"], args["vec"]
    _operands("mv", ("input", mat), ("vec", vec))
    return _mv_core("mv", "mv", None, mat, vec, out, None)


def _addmv_driver(rec, args, *, out=None, inplace=None):
    s, mat, vec = args["input"], args["mat"], args["vec"]
    _operands("addmv", ("input", s), ("mat", mat), ("vec", vec))
    d = mat.dtype
    return _mv_core("addmv", "addmv", s, mat, vec, out, inplace, beta=_scalar("addmv", "beta", args["beta"], d),
                    alpha=_scalar("addmv", "alpha", args["alpha"], d))


def _dot_core(fn: str, name: str, a: Tensor, b: Tensor, out) -> Tensor:
    check(a.ndim == 1 and b.ndim == 1, lambda: f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    check(a.dtype is b.dtype, lambda: f"dot : expected both vectors to have same dtype, but found {_tn(a.dtype)} and "
          f"{_tn(b.dtype)}")
    check(a.shape[0] == b.shape[0], lambda: f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src "
          f"[{b.shape[0]}] to have the same number of elements, but got {a.shape[0]} and {b.shape[0]} elements "
          "respectively")
    _float_dtype(fn, a.dtype)
    o = _new_out(fn, out, (), a.dtype, _device(fn, a, b), rule="dot")
    product(name, o.reshape(1, 1), a.unsqueeze(0), b.unsqueeze(1))
    return o


def _dot_driver(rec, args, *, out=None, inplace=None):
    a, b = args["input"], args["tensor"]
    _operands("dot", ("input", a), ("tensor", b))
    return _dot_core("dot", "dot", a, b, out)


def _matmul_driver(rec, args, *, out=None, inplace=None):
    a, b = args["input"], args["other"]
    if out is None and a.__class__ is Tensor and b.__class__ is Tensor:
        return _via_plan(_PRODUCT_PLANS, ("matmul", _tensor_sig(a), _tensor_sig(b), _MM_FLAGS["precision"]), (a, b),
                         lambda: _matmul_general(a, b, None))
    return _matmul_general(a, b, out)


def _matmul_general(a, b, out):
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)):  # the @ operator with a non-tensor
        raise TypeError(f"unsupported operand type(s) for @: '{type(a).__name__}' and '{type(b).__name__}'")
    check(a.ndim >= 1 and b.ndim >= 1, lambda: f"both arguments to matmul need to be at least 1D, but they are "
          f"{a.ndim}D and {b.ndim}D")
    dev = _device("matmul", a, b)
    da, db = a.ndim, b.ndim
    if da == 1 and db == 1:
        return _dot_core("matmul", "matmul", a, b, out)
    if db <= 2 and da >= 2:
        K = a.shape[-1]
        rows = numel(a.shape[:-1])
        if db == 1:
            check(K == b.shape[0], lambda: f"size mismatch, got input ({rows}), mat ({rows}x{K}), vec ({b.shape[0]})")
            check(a.dtype is b.dtype, lambda: f"addmv input tensors must have the same dtype, but got {_tn(b.dtype)}, "
                  f"{_tn(a.dtype)}, and {_tn(b.dtype)}")
            _float_dtype("matmul", a.dtype)
            o = _new_out("matmul", out, a.shape[:-1], a.dtype, dev)
            _rows_times("matmul", o.unsqueeze(-1), a, b.unsqueeze(1))
            return o
        _check_mm_dtypes(a, b)
        _check_mm_shapes(rows, K, b.shape[0], b.shape[1])
        _float_dtype("matmul", a.dtype)
        o = _new_out("matmul", out, tuple(a.shape[:-1]) + (b.shape[1],), a.dtype, dev)
        return _rows_times("matmul", o, a, b)
    if da == 1 and db == 2:
        _check_mm_dtypes(a, b)
        _check_mm_shapes(1, a.shape[0], b.shape[0], b.shape[1])
        _float_dtype("matmul", a.dtype)
        o = _new_out("matmul", out, (b.shape[1],), a.dtype, dev)
        product("matmul", o.unsqueeze(0), a.unsqueeze(0), b)
        return o
    # batched: at least one operand has 3+ dims
    a_ = a.unsqueeze(0) if da == 1 else a
    b_ = b.unsqueeze(-1) if db == 1 else b
    batch = broadcast_shapes(a_.shape[:-2], b_.shape[:-2])
    _check_bmm(a_, b_, numel(batch))
    _float_dtype("matmul", a.dtype)
    M, K, N = a_.shape[-2], a_.shape[-1], b_.shape[-1]
    shape = tuple(batch) + ((M,) if da > 1 else ()) + ((N,) if db > 1 else ())
    o = _new_out("matmul", out, shape, a.dtype, dev)
    o4 = o
    if da == 1:
        o4 = o4.unsqueeze(-2)
    if db == 1:
        o4 = o4.unsqueeze(-1)
    product("matmul", o4, a_.expand(tuple(batch) + (M, K)), b_.expand(tuple(batch) + (K, N)))
    return o


def _int_mm_driver(rec, args, *, out=None, inplace=None):
    a, b = args["input"], args["mat2"]
    _operands("_int_mm", ("input", a), ("mat2", b))
    check(a.ndim == 2, lambda: f"_int_mm: Expected self to be 2D, but got {a.ndim}-D")
    check(b.ndim == 2, lambda: f"_int_mm: Expected mat2 to be 2D, but got {b.ndim}-D")
    check(a.dtype is T.int8, lambda: f"_int_mm: Expected self dtype to be int8, but got {_tn(a.dtype)}")
    check(b.dtype is T.int8, lambda: f"_int_mm: Expected mat2 dtype to be int8, but got {_tn(b.dtype)}")
    check(a.shape[1] == b.shape[0], lambda: f"_int_mm: self.size(1) needs to match mat2.size(0) but got "
          f"{a.shape[1]} and {b.shape[0]}")
    dev = _device("_int_mm", a, b)
    o = _new_out("_int_mm", out, (a.shape[0], b.shape[1]), T.int32, dev)
    return product("_int_mm", o, a, b)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None, activation: str | None = None,
           residual: Tensor | None = None, *, out: Tensor | None = None) -> Tensor:
    """``act(input @ weight.T + bias) + residual`` in one kernel (``nn.functional.linear`` when ``activation``
    and ``residual`` are ``None``).

    Args:
        input: (*, K), float16 / bfloat16 / float32 / float64.
        weight: (N, K) in any layout (a transposed or sliced weight is read in place), or (K,) for a vector
            (the output then has no N dim); same dtype as ``input``.
        bias: ``None`` or broadcastable to the output (usually (N,)); same dtype.
        activation: ``None``, ``"relu"``, ``"gelu"`` (erf), ``"gelu_tanh"`` or ``"silu"``, applied after the bias;
            or ``"silu_first_half"``: silu on output columns ``[0, N/2)`` only (a gate and an up projection fused
            into one weight, gate rows first: the SwiGLU MLP's ``silu(gate) * up`` is then one product and one
            multiply of the halves; N must be even and the weight 2-D).
        residual: ``None`` or broadcastable to the output; added after the activation (``h + W x``). It may be
            the ``out`` tensor itself (an in-place residual update).
        out: optional output of the result's shape and dtype.

    Returns:
        (*, N): ``input.shape[:-1] + (N,)``. float16/bfloat16 accumulate in float32; one rounding at the end.

    Raises:
        RuntimeError: PyTorch's messages: "both arguments to linear need to be at least 1D, but they are 0D and
            2D"; "mat1 and mat2 shapes cannot be multiplied (10x3 and 5x4)"; "expected m1 and m2 to have the
            same dtype, but got: float != c10::Half"; "self and mat2 must have the same dtype, but got Half and
            Float" (bias); a bias that does not broadcast to the output (PyTorch would broadcast the sum to a
            larger shape for 3-D inputs; refused here).
        ValueError: an unknown activation; ``"silu_first_half"`` with an odd N or a 1-D weight.
        NotImplementedError: an integer or bool dtype.

    Example:
        >>> import nbxtensor as nbx
        >>> from nbxtensor.ops.matmul import linear
        >>> x, w, b = nbx.ones(2, 3), nbx.ones(4, 3), nbx.zeros(4)
        >>> linear(x, w, b, activation="relu").shape
        nbx.Size([2, 4])
    """
    # a launch plan of this signature (see "Launch plans"): one lookup, one allocation (none with out=), one launch
    try:
        d, e = input._storage.device, weight._storage.device
        key = (input._shape, input._stride, input._dtype, d.type, d.index, weight._shape, weight._stride,
               weight._dtype, e.type, e.index, None if bias is None else _tensor_sig(bias),
               None if residual is None else _tensor_sig(residual), activation, _MM_FLAGS["precision"],
               None if out is None else _tensor_sig(out), _configs.state())
        plan = _LINEAR_PLANS.get(key)
    except (AttributeError, TypeError):  # not tensors, an unhashable activation: the checks below say so
        plan = _NO_PLAN
    if plan is None:
        if d.type == "cuda" or INTERPRET:
            if out is None:
                return record_plan(_LINEAR_PLANS, key, lambda: _linear(input, weight, bias, activation, residual),
                                   (input, weight, bias, residual))
            return record_plan(_LINEAR_PLANS, key, lambda: _linear(input, weight, bias, activation, residual,
                                                                   out=out),
                               (input, weight, bias, residual, out), out_given=apart(out, input, weight, bias,
                                                                                     residual))
    elif plan is not _NO_PLAN:
        if out is None:
            return plan(input, weight, bias, residual)
        if apart(out, input, weight, bias, residual):
            return plan(input, weight, bias, residual, out)
    return _linear(input, weight, bias, activation, residual, out=out)


def _linear(input: Tensor, weight: Tensor, bias: Tensor | None = None, activation: str | None = None,
            residual: Tensor | None = None, *, out: Tensor | None = None) -> Tensor:
    """The general path of :func:`linear` (checks, views, one product)."""
    _operands("linear", ("input", input), ("weight", weight))
    check(input.ndim >= 1 and weight.ndim >= 1, lambda: f"both arguments to linear need to be at least 1D, but they "
          f"are {input.ndim}D and {weight.ndim}D")
    check(weight.ndim <= 2, lambda: f"t() expects a tensor with <= 2 dimensions, but self is {weight.ndim}D")
    check(activation in ACTIVATIONS, lambda: f"linear: unknown activation {activation!r}; expected one of "
          f"{ACTIVATIONS}", ValueError)
    dev = _device("linear", input, weight, bias, residual)
    vec_w = weight.ndim == 1
    if vec_w and bias is not None and input.ndim == 2:
        fail("mat2 must be a matrix, got 1-D tensor")
    w2 = weight.unsqueeze(0) if vec_w else weight
    N, Kw = w2.shape
    check(activation != "silu_first_half" or (not vec_w and N % 2 == 0), lambda: f"linear: activation "
          f"'silu_first_half' needs a 2-D weight with an even number of rows, got weight of shape "
          f"{list(weight.shape)}", ValueError)
    K = input.shape[-1]
    rows = numel(input.shape[:-1])
    _check_mm_dtypes(input, weight)
    if bias is not None:
        check(bias.dtype is weight.dtype, lambda: f"self and mat2 must have the same dtype, but got {_tn(bias.dtype)} "
              f"and {_tn(weight.dtype)}")
    if residual is not None:
        check(residual.dtype is input.dtype, lambda: f"linear: residual must have the dtype of input "
              f"({input.dtype.name}), got {residual.dtype.name}")
    _check_mm_shapes(rows, K, Kw, N)
    _float_dtype("linear", input.dtype)
    shape = tuple(input.shape[:-1]) + (() if vec_w else (N,))
    for t in (bias, residual):
        if t is not None:
            t.expand(shape)  # PyTorch's expand error for one that does not broadcast
    o = _new_out("linear", out, shape, input.dtype, dev)
    o2 = o.unsqueeze(-1) if vec_w else o
    c = None if bias is None else (bias.expand(shape).unsqueeze(-1) if vec_w else bias)
    r = None if residual is None else (residual.expand(shape).unsqueeze(-1) if vec_w else residual)
    _rows_times("linear", o2, input, w2.t(), c, r, act=activation)
    return o


def _linear_driver(rec, args, *, out=None, inplace=None):
    return linear(args["input"], args["weight"], args["bias"])


# ---------------------------------------------------------------------------------------------------------
# Costs (called by parameter name: the schema's argument names)
# ---------------------------------------------------------------------------------------------------------
def _nbytes(t) -> int:
    return 0 if t is None else t.numel() * t.dtype.itemsize


def _prod_cost(out_numel: int, K: int, out_itemsize: int, *reads) -> Cost:
    return Cost(flops=2 * out_numel * K, bytes_read=sum(_nbytes(t) for t in reads),
                bytes_written=out_numel * out_itemsize)


def _cost_mm(input, mat2) -> Cost:
    """mm / bmm / _int_mm: 2*M*N*K (per batch) flops; A and B read once; C written."""
    outn = numel(input.shape[:-1]) * mat2.shape[-1]
    return _prod_cost(outn, input.shape[-1], 4 if input.dtype is T.int8 else input.dtype.itemsize, input, mat2)


def _cost_matmul(input, other) -> Cost:
    a = input.shape if input.ndim > 1 else (1,) + tuple(input.shape)
    b = other.shape if other.ndim > 1 else tuple(other.shape) + (1,)
    batch = broadcast_shapes(a[:-2], b[:-2])
    return _prod_cost(numel(batch) * a[-2] * b[-1], a[-1], input.dtype.itemsize, input, other)


def _cost_addmm(input, mat1, mat2, beta=1, alpha=1) -> Cost:
    outn = numel(mat1.shape[:-1]) * mat2.shape[-1]
    return _prod_cost(outn, mat1.shape[-1], mat1.dtype.itemsize, mat1, mat2, None if beta == 0 else input)


def _cost_baddbmm(input, batch1, batch2, beta=1, alpha=1) -> Cost:
    return _cost_addmm(input, batch1, batch2, beta, alpha)


def _cost_addmv(input, mat, vec, beta=1, alpha=1) -> Cost:
    return _prod_cost(mat.shape[0], mat.shape[1], mat.dtype.itemsize, mat, vec, None if beta == 0 else input)


def _cost_mv(input, vec) -> Cost:
    return _prod_cost(input.shape[0], input.shape[1], input.dtype.itemsize, input, vec)


def _cost_dot(input, tensor) -> Cost:
    return _prod_cost(1, input.shape[0], input.dtype.itemsize, input, tensor)


def _cost_linear(input, weight, bias=None) -> Cost:
    n = weight.shape[0] if weight.ndim == 2 else 1
    return _prod_cost(numel(input.shape[:-1]) * n, input.shape[-1], input.dtype.itemsize, input, weight, bias)


# ---------------------------------------------------------------------------------------------------------
# Oracles (float64, NumPy; independent of the implementations above)
# ---------------------------------------------------------------------------------------------------------
def _or_mm(input, mat2):
    return np.matmul(_f(input), _f(mat2))


def _or_matmul(input, other):
    return np.matmul(_f(input), _f(other))  # NumPy's matmul has torch.matmul's 1-D and broadcasting rules


def _or_int_mm(input, mat2):
    return np.matmul(np.asarray(input, dtype=np.int64), np.asarray(mat2, dtype=np.int64))


def _or_addmv(input, mat, vec, beta=1, alpha=1):
    p = alpha * (_f(mat) @ _f(vec))
    return p if beta == 0 else p + beta * _f(input)


def _or_mv(input, vec):
    return _f(input) @ _f(vec)


def _or_dot(input, tensor):
    return np.dot(_f(input), _f(tensor))


# ---------------------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------------------
def _reg(name: str, schema: str, driver, oracle, cost, *, errors=(), **extra) -> OpRecord:
    rec = OpRecord(name=name, family=_FAM, cpu=_gemm_cpu, triton=_gemm_triton, oracle=oracle, cost=cost,
                   extra=dict(schema=schema, driver=driver, dtypes=extra.pop("dtypes", FLOATS), errors=list(errors),
                              doc=_DOC.get(name), **extra))
    return register(rec)


def _errs(*rows):
    """Error cases as data: ``(args(nbx) -> tuple, kwargs dict or kwargs(nbx) -> dict, exception, text)``."""
    return list(rows)


_MM_ERRORS = _errs(
    (lambda nbx: (nbx.zeros(2, 3), nbx.zeros(4, 5)), {}, RuntimeError,
     "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
    (lambda nbx: (nbx.zeros(2, 3), nbx.zeros(3, 5, dtype=nbx.float16)), {}, RuntimeError,
     "expected m1 and m2 to have the same dtype, but got: float != c10::Half"),
    (lambda nbx: (nbx.zeros(2, 3, dtype=nbx.bfloat16), nbx.zeros(3, 5)), {}, RuntimeError,
     "expected m1 and m2 to have the same dtype, but got: c10::BFloat16 != float"),
    (lambda nbx: (nbx.zeros(2, 3), nbx.zeros(3)), {}, RuntimeError, "mat2 must be a matrix"),
    (lambda nbx: (nbx.zeros(3), nbx.zeros(3, 2)), {}, RuntimeError, "self must be a matrix"),
    (lambda nbx: (nbx.zeros(2, 3, dtype=nbx.int32), nbx.zeros(3, 2, dtype=nbx.int32)), {}, NotImplementedError,
     "not implemented for 'Int'"),
    (lambda nbx: (nbx.zeros(2, 3, dtype=nbx.bool), nbx.zeros(3, 2, dtype=nbx.bool)), {}, NotImplementedError,
     "not implemented for 'Bool'"),
    (lambda nbx: (nbx.zeros(2, 3), nbx.zeros(3, 2)), lambda nbx: {"out": nbx.zeros(2, 2, dtype=nbx.float64)},
     RuntimeError, "Expected out tensor to have dtype float, but got double instead"),
    (lambda nbx: (nbx.zeros(2, 3), 2), {}, TypeError, "must be Tensor"))

_DOC = {
    "mm": """Matrix product ``input (M, K) @ mat2 (K, N) -> (M, N)`` (``torch.mm``).

    Both operands must have one dtype (float16, bfloat16, float32, float64): no promotion, as PyTorch.
    float16/bfloat16 accumulate in float32; float32 is IEEE unless TF32 is enabled
    (``nbx.backends.cuda.matmul.allow_tf32``). Any strides; K = 0 gives zeros. ``out=`` must have the result
    dtype exactly.

    Raises:
        RuntimeError: "self must be a matrix"; "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)";
            "expected m1 and m2 to have the same dtype, but got: float != c10::Half"; out= of another dtype.
        NotImplementedError: integer or bool dtypes.

    Example:
        >>> import nbxtensor as nbx
        >>> nbx.mm(nbx.ones(2, 3), nbx.ones(3, 4)).tolist()[0]
        [3.0, 3.0, 3.0, 3.0]
    """,
    "bmm": """Batched product ``input (B, M, K) @ mat2 (B, K, N) -> (B, M, N)`` (``torch.bmm``); dtypes and errors as
    :func:`mm` ("batch1 must be a 3D tensor", "expected scalar type Float but found Half")."""
    ,
    "matmul": """``torch.matmul`` / the ``@`` operator: 1-D x 1-D is a dot product (0-dim result), 2-D x 1-D a
    matrix-vector product, 1-D x 2-D a vector-matrix product, N-D operands broadcast their batch dims (NumPy's
    rules). A 3-D+ input times a matrix is one product over all rows (no copy when the rows can be viewed as one
    matrix, else a batched product with the matrix broadcast). No dtype promotion; errors as PyTorch.

    Example:
        >>> import nbxtensor as nbx
        >>> (nbx.ones(5, 2, 3) @ nbx.ones(3)).shape
        nbx.Size([5, 2])
    """,
    "addmm": """``beta * input + alpha * (mat1 @ mat2)`` (``torch.addmm``), fused: the sum, scaling and one rounding
    happen in the kernel's epilogue. ``input`` broadcasts to (M, N); ``beta == 0`` ignores it (NaN in it does not
    propagate); K = 0 gives ``beta * input``. ``Tensor.addmm_`` writes into ``input``.""",
    "baddbmm": """``beta * input + alpha * (batch1 @ batch2)`` over a batch (``torch.baddbmm``); ``input`` broadcasts to
    (B, M, N). Fused as :func:`addmm`.""",
    "addmv": """``beta * input + alpha * (mat @ vec)`` (``torch.addmv``): the small-N GEMV kernel, fused epilogue.""",
    "mv": """Matrix-vector product ``input (M, K) @ vec (K,) -> (M,)`` (``torch.mv``): the GEMV kernel, reading each
    matrix byte once.""",
    "dot": """Dot product of two 1-D tensors of one dtype -> 0-dim tensor (``torch.dot``); long vectors are split
    over programs and summed in a fixed order (deterministic).""",
    "linear": """``input @ weight.T + bias`` (``torch.nn.functional.linear``): the bias is added in the kernel's
    epilogue; a transposed weight is read in place. See :func:`nbxtensor.ops.matmul.linear` for the fused form
    with an activation and a residual add.""",
    "_int_mm": """int8 x int8 -> int32 matrix product (``torch._int_mm``), exact (int32 accumulation).""",
}


_reg("mm", "mm(Tensor input, Tensor mat2, *, Tensor? out=None)", _mm_driver, _or_mm, _cost_mm, errors=_MM_ERRORS)
_reg("bmm", "bmm(Tensor input, Tensor mat2, *, Tensor? out=None)", _bmm_driver, _or_mm, _cost_mm, errors=_errs(
    (lambda nbx: (nbx.zeros(2, 3), nbx.zeros(2, 3, 4)), {}, RuntimeError, "batch1 must be a 3D tensor"),
    (lambda nbx: (nbx.zeros(2, 2, 3), nbx.zeros(3, 4)), {}, RuntimeError, "batch2 must be a 3D tensor"),
    (lambda nbx: (nbx.zeros(2, 2, 3), nbx.zeros(3, 3, 4)), {}, RuntimeError,
     "Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: [3, 3]."),
    (lambda nbx: (nbx.zeros(2, 2, 3), nbx.zeros(2, 4, 4)), {}, RuntimeError,
     "Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: [2, 4]."),
    (lambda nbx: (nbx.zeros(2, 2, 3), nbx.zeros(2, 3, 4, dtype=nbx.float16)), {}, RuntimeError,
     "expected scalar type Float but found Half"),
    (lambda nbx: (nbx.zeros(2, 2, 3), nbx.zeros(2, 3, 4)), lambda nbx: {"out": nbx.zeros(2, 2, 4, dtype=nbx.float16)},
     RuntimeError, "Expected out tensor to have dtype float, but got c10::Half instead")))
_reg("matmul", "matmul(Tensor input, Tensor other, *, Tensor? out=None)", _matmul_driver, _or_matmul, _cost_matmul,
     dunders={"__matmul__": "fwd", "__rmatmul__": "rev"}, errors=_errs(
         (lambda nbx: (nbx.zeros(()), nbx.zeros(3)), {}, RuntimeError,
          "both arguments to matmul need to be at least 1D, but they are 0D and 1D"),
         (lambda nbx: (nbx.zeros(3), nbx.zeros(4)), {}, RuntimeError,
          "inconsistent tensor size, expected tensor [3] and src [4] to have the same number of elements, but got 3 "
          "and 4 elements respectively"),
         (lambda nbx: (nbx.zeros(3), nbx.zeros(3, dtype=nbx.float16)), {}, RuntimeError,
          "dot : expected both vectors to have same dtype, but found Float and Half"),
         (lambda nbx: (nbx.zeros(3), nbx.zeros(4, 5)), {}, RuntimeError,
          "mat1 and mat2 shapes cannot be multiplied (1x3 and 4x5)"),
         (lambda nbx: (nbx.zeros(2, 3), nbx.zeros(4)), {}, RuntimeError,
          "size mismatch, got input (2), mat (2x3), vec (4)"),
         (lambda nbx: (nbx.zeros(2, 2, 3), nbx.zeros(4)), {}, RuntimeError,
          "size mismatch, got input (4), mat (4x3), vec (4)"),
         (lambda nbx: (nbx.zeros(2, 2, 3), nbx.zeros(3, dtype=nbx.float16)), {}, RuntimeError,
          "addmv input tensors must have the same dtype, but got Half, Float, and Half"),
         (lambda nbx: (nbx.zeros(2, 2, 3), nbx.zeros(4, 5)), {}, RuntimeError,
          "mat1 and mat2 shapes cannot be multiplied (4x3 and 4x5)"),
         (lambda nbx: (nbx.zeros(2, 2, 3), nbx.zeros(3, 5, dtype=nbx.float16)), {}, RuntimeError,
          "expected m1 and m2 to have the same dtype, but got: float != c10::Half"),
         (lambda nbx: (nbx.zeros(2, 2, 3), nbx.zeros(3, 3, 4)), {}, RuntimeError,
          "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0"),
         (lambda nbx: (nbx.zeros(2, 2, 3), nbx.zeros(2, 4, 4)), {}, RuntimeError,
          "Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: [2, 4]."),
         (lambda nbx: (nbx.zeros(3), nbx.zeros(2, 4, 5)), {}, RuntimeError,
          "Expected size for first two dimensions of batch2 tensor to be: [2, 3] but got: [2, 4]."),
         (lambda nbx: (nbx.zeros(2, 3), nbx.zeros(2, 3, 5, dtype=nbx.float16)), {}, RuntimeError,
          "expected scalar type Float but found Half"),
         (lambda nbx: (nbx.zeros(2, 3), nbx.zeros(3, 4)), lambda nbx: {"out": nbx.zeros(2, 4, dtype=nbx.float64)},
          RuntimeError, "Expected out tensor to have dtype float, but got double instead")))
_reg("addmm", "addmm(Tensor input, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1, Tensor? out=None)",
     _addmm_driver, _or_addmm, _cost_addmm, inplace=True, errors=_errs(
         (lambda nbx: (nbx.zeros(3), nbx.zeros(2, 3), nbx.zeros(3, 4)), {}, RuntimeError,
          "The expanded size of the tensor (4) must match the existing size (3) at non-singleton dimension 1.  "
          "Target sizes: [2, 4].  Tensor sizes: [3]"),
         (lambda nbx: (nbx.zeros(2, 4, dtype=nbx.float16), nbx.zeros(2, 3), nbx.zeros(3, 4)), {}, RuntimeError,
          "self and mat2 must have the same dtype, but got Half and Float"),
         (lambda nbx: (nbx.zeros(4), nbx.zeros(3), nbx.zeros(3, 4)), {}, RuntimeError,
          "mat1 must be a matrix, got 1-D tensor"),
         (lambda nbx: (nbx.zeros(4), nbx.zeros(2, 3), nbx.zeros(4, 4)), {}, RuntimeError,
          "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x4)"),
         (lambda nbx: (nbx.zeros(4), nbx.zeros(2, 3), nbx.zeros(3, 4)), {"beta": 1 + 2j}, RuntimeError,
          "value cannot be converted to type float without overflow")))
_reg("baddbmm", "baddbmm(Tensor input, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1, "
     "Tensor? out=None)", _baddbmm_driver, _or_addmm, _cost_baddbmm, inplace=True, errors=_errs(
         (lambda nbx: (nbx.zeros(6, 2, 3), nbx.zeros(5, 2, 4), nbx.zeros(5, 4, 3)), {}, RuntimeError,
          "The expanded size of the tensor (5) must match the existing size (6) at non-singleton dimension 0"),
         (lambda nbx: (nbx.zeros(5, 2, 3, dtype=nbx.float16), nbx.zeros(5, 2, 4), nbx.zeros(5, 4, 3)), {},
          RuntimeError, "Input dtypes must be the same, got: input c10::Half, batch1: float, batch2: float"),
         (lambda nbx: (nbx.zeros(5, 2, 3), nbx.zeros(5, 2, 4), nbx.zeros(5, 4, 3, dtype=nbx.float16)), {},
          RuntimeError, "expected scalar type Float but found Half")))
_reg("addmv", "addmv(Tensor input, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1, Tensor? out=None)",
     _addmv_driver, _or_addmv, _cost_addmv, inplace=True, errors=_errs(
         (lambda nbx: (nbx.zeros(3), nbx.zeros(2, 3), nbx.zeros(3)), {}, RuntimeError,
          "size mismatch, got input (3), mat (2x3), vec (3)"),
         (lambda nbx: (nbx.zeros(2, dtype=nbx.float16), nbx.zeros(2, 3), nbx.zeros(3)), {}, RuntimeError,
          "addmv input tensors must have the same dtype, but got Half, Float, and Float")))
_reg("mv", "mv(Tensor input, Tensor vec, *, Tensor? out=None)", _mv_driver, _or_mv, _cost_mv, errors=_errs(
         (lambda nbx: (nbx.zeros(3, 4), nbx.zeros(3)), {}, RuntimeError,
          "size mismatch, got input (3), mat (3x4), vec (3)"),
         (lambda nbx: (nbx.zeros(3, 4), nbx.zeros(4, 1)), {}, RuntimeError,
          "vector + matrix @ vector expected, got 1, 2, 2"),
         (lambda nbx: (nbx.zeros(3, 4), nbx.zeros(4, dtype=nbx.float16)), {}, RuntimeError,
          "addmv input tensors must have the same dtype, but got Half, Float, and Half")))
_reg("dot", "dot(Tensor input, Tensor tensor, *, Tensor? out=None)", _dot_driver, _or_dot, _cost_dot, errors=_errs(
    (lambda nbx: (nbx.zeros(3, 1), nbx.zeros(3)), {}, RuntimeError, "1D tensors expected, but got 2D and 1D tensors"),
    (lambda nbx: (nbx.zeros(3), nbx.zeros(4)), {}, RuntimeError, "inconsistent tensor size"),
    (lambda nbx: (nbx.zeros(3), nbx.zeros(3, dtype=nbx.float16)), {}, RuntimeError,
     "dot : expected both vectors to have same dtype, but found Float and Half"),
    (lambda nbx: (nbx.zeros(3), nbx.zeros(3)), lambda nbx: {"out": nbx.zeros((), dtype=nbx.float16)}, RuntimeError,
     "result dtype Half does not match input dtype Float")))
_reg("linear", "linear(Tensor input, Tensor weight, Tensor? bias=None)", _linear_driver, _or_linear, _cost_linear,
     method=False, namespaces=("functional",), errors=_errs(
         (lambda nbx: (nbx.zeros(5, 2, 3), nbx.zeros(4, 5)), {}, RuntimeError,
          "mat1 and mat2 shapes cannot be multiplied (10x3 and 5x4)"),
         (lambda nbx: (nbx.zeros(()), nbx.zeros(4, 3)), {}, RuntimeError,
          "both arguments to linear need to be at least 1D, but they are 0D and 2D"),
         (lambda nbx: (nbx.zeros(5, 2, 3), nbx.zeros(2, 4, 3)), {}, RuntimeError,
          "t() expects a tensor with <= 2 dimensions, but self is 3D"),
         (lambda nbx: (nbx.zeros(2, 3), nbx.zeros(4, 3, dtype=nbx.float16)), {}, RuntimeError,
          "expected m1 and m2 to have the same dtype, but got: float != c10::Half"),
         (lambda nbx: (nbx.zeros(5, 2, 3), nbx.zeros(4, 3), nbx.zeros(4, dtype=nbx.float16)), {}, RuntimeError,
          "self and mat2 must have the same dtype, but got Half and Float"),
         (lambda nbx: (nbx.zeros(2, 3), nbx.zeros(4, 3), nbx.zeros(5)), {}, RuntimeError,
          "The expanded size of the tensor (4) must match the existing size (5) at non-singleton dimension 1"),
         (lambda nbx: (nbx.zeros(2, 3), nbx.zeros(3), nbx.zeros(2)), {}, RuntimeError,
          "mat2 must be a matrix, got 1-D tensor")))
_reg("_int_mm", "_int_mm(Tensor input, Tensor mat2, *, Tensor? out=None)", _int_mm_driver, _or_int_mm, _cost_mm,
     method=False, dtypes=frozenset({T.int8}), errors=_errs(
         (lambda nbx: (nbx.zeros(4, 3, dtype=nbx.int32), nbx.zeros(3, 2, dtype=nbx.int8)), {}, RuntimeError,
          "Expected self dtype to be int8"),
         (lambda nbx: (nbx.zeros(4, 32, dtype=nbx.int8), nbx.zeros(33, 8, dtype=nbx.int8)), {}, RuntimeError,
          "self.size(1) needs to match mat2.size(0) but got 32 and 33")))


# ---------------------------------------------------------------------------------------------------------
# outer and addr: elementwise in PyTorch (promotion, bool and integer dtypes), pointwise ops here
# ---------------------------------------------------------------------------------------------------------
_PW_DTYPES = frozenset({T.bool_, T.uint8, T.int8, T.int16, T.int32, T.int64, T.float16, T.bfloat16, T.float32,
                        T.float64})


@jit
def _outer_b(x, y, p0, p1, p2):
    if x.dtype == tl.int1:
        r = x & y
    else:
        r = x * y
    return r


@jit
def _addr_b(s, x, y, beta, alpha, p2):
    # ATen's addr kernel: beta * self + alpha * vec1 * vec2; for bool (beta && self) || (alpha && vec1 && vec2)
    if s.dtype == tl.int1:
        r = (s & beta) | (x & y & alpha)
    else:
        r = beta * s + alpha * x * y
    return r


@jit
def _addr_nobeta_b(s, x, y, beta, alpha, p2):
    # beta == 0: self is not read (NaN in it does not propagate, as PyTorch)
    if s.dtype == tl.int1:
        r = x & y & alpha
    else:
        r = alpha * x * y
    return r


def _np_outer(x, y):
    return x & y if x.dtype == np.bool_ else x * y


def _np_addr(s, x, y, beta=1, alpha=1):
    if x.dtype == np.bool_:
        r = x & y & bool(alpha)
        return r if not beta else (s & bool(beta)) | r
    t = x.dtype.type
    r = t(alpha) * x * y
    return r if beta == 0 else t(beta) * s + r


def _or_outer(input, vec2):
    a, b = np.asarray(input), np.asarray(vec2)
    if a.dtype == np.bool_ and b.dtype == np.bool_:
        return np.logical_and.outer(a, b)
    return np.multiply.outer(a.astype(np.float64), b.astype(np.float64))


def _or_addr(input, vec1, vec2, beta=1, alpha=1):
    v1, v2, s = np.asarray(vec1), np.asarray(vec2), np.asarray(input)
    if v1.dtype == np.bool_ and v2.dtype == np.bool_ and s.dtype == np.bool_:
        r = np.logical_and.outer(v1, v2) & bool(alpha)
        return r | (s & bool(beta))
    r = alpha * np.multiply.outer(v1.astype(np.float64), v2.astype(np.float64))
    return r if beta == 0 else r + beta * s.astype(np.float64)


def _vectors(fn: str, *pairs) -> None:
    for name, v in pairs:
        check(v.ndim == 1, lambda: f"{fn}: Expected 1-D argument {name}, but got {v.ndim}-D")


def _outer_driver(rec, args, *, out=None, inplace=None):
    v1, v2 = args["input"], args["vec2"]
    _operands("outer", ("input", v1), ("vec2", v2))
    _vectors("outer", ("self", v1), ("vec2", v2))
    return dispatch.pointwise(rec, dict(args, input=v1.unsqueeze(1)), out=out)


def _addr_prepare(a, prom):
    kind = prom.common.kind
    for name in ("beta", "alpha"):
        v = a[name]
        check(not isinstance(v, complex), lambda: f"addr: value cannot be converted to type {_c10(prom.common)} "
              "without overflow")
        if kind in (T.KIND_INT, T.KIND_UINT):
            check(not isinstance(v, float), lambda: f"For integral input tensors, argument {name} must not be a "
                  "floating point number.")
    return {"beta": a["beta"], "alpha": a["alpha"]}


def _addr_driver(rec, args, *, out=None, inplace=None):
    s, v1, v2 = args["input"], args["vec1"], args["vec2"]
    _operands("addr", ("input", s), ("vec1", v1), ("vec2", v2))
    _vectors("addr", ("vec1", v1), ("vec2", v2))
    shape = (v1.shape[0], v2.shape[0])
    if inplace is not None:
        check(tuple(s.shape) == shape, lambda: f"size mismatch, input: {list(s.shape)}, v1: [{shape[0]}], v2: "
              f"[{shape[1]}]")
    else:
        s.expand(shape)
    return dispatch.pointwise(rec, dict(args, vec1=v1.unsqueeze(1)), out=out, inplace=inplace)


_addr_full = PW.make(_addr_b, params=("beta", "alpha"), op="pointwise")
_addr_nobeta = PW.make(_addr_nobeta_b, params=("beta", "alpha"), op="pointwise")


def _addr_triton(out, inputs, prom, prm):
    (_addr_nobeta if prm["beta"] == 0 else _addr_full)(out, inputs, prom, prm)


PW.declare("outer", "outer(Tensor input, Tensor vec2, *, Tensor? out=None)", family=_FAM, body=_outer_b,
           cpu=_np_outer, oracle=_or_outer, promotion="default", dtypes=_PW_DTYPES, driver=_outer_driver,
           aliases=("ger",), flops=1, errors=_errs(
               (lambda nbx: (nbx.zeros(3, 1), nbx.zeros(4)), {}, RuntimeError,
                "outer: Expected 1-D argument self, but got 2-D"),
               (lambda nbx: (nbx.zeros(3), nbx.zeros(4, 1)), {}, RuntimeError,
                "outer: Expected 1-D argument vec2, but got 2-D")))
PW.declare("addr", "addr(Tensor input, Tensor vec1, Tensor vec2, *, Scalar beta=1, Scalar alpha=1, Tensor? out=None)",
           family=_FAM, triton=_addr_triton, cpu=_np_addr, oracle=_or_addr, promotion="default", dtypes=_PW_DTYPES,
           driver=_addr_driver, prepare=_addr_prepare, params=("beta", "alpha"), inplace=True, flops=3,
           errors=_errs(
               (lambda nbx: (nbx.zeros(2, 2), nbx.zeros(2, 1), nbx.zeros(2)), {}, RuntimeError,
                "addr: Expected 1-D argument vec1, but got 2-D"),
               (lambda nbx: (nbx.zeros(3, 2), nbx.zeros(2), nbx.zeros(2)), {}, RuntimeError,
                "The expanded size of the tensor (2) must match the existing size (3) at non-singleton dimension 0"),
               (lambda nbx: (nbx.zeros(2, 2, dtype=nbx.int32), nbx.zeros(2, dtype=nbx.int32),
                             nbx.zeros(2, dtype=nbx.int32)), {"beta": 0.5}, RuntimeError,
                "For integral input tensors, argument beta must not be a floating point number.")))


# ---------------------------------------------------------------------------------------------------------
# einsum: two-operand contractions, lowered to one batched product
# ---------------------------------------------------------------------------------------------------------
def _einsum_parse(equation: str, ndims: list[int]):
    """Parse ``equation`` for operands of ``ndims`` dims (PyTorch's rules: letters a-zA-Z, ``...``, implicit
    output = letters seen once, in alphabetical order, after the broadcast dims).

    Returns:
        ``(inputs, output)``: per operand a list of labels (letters, or ``("...", i)`` for the i-th broadcast dim
        counted from the right), and the output's labels.
    """
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    check("->" not in rhs, lambda: f"einsum(): invalid subscript given at index {len(lhs) + 2 + rhs.index('->')} in "
          "the equation string, subscripts must be in [a-zA-Z]")
    terms = lhs.split(",")
    check(len(terms) <= len(ndims), "einsum(): fewer operands were provided than specified in the equation")
    check(len(terms) >= len(ndims), "einsum(): more operands were provided than specified in the equation")

    def labels(term: str, base: int, where: str, nd: int | None, k: int):
        out, i, n_ell = [], 0, None
        while i < len(term):
            ch = term[i]
            if term.startswith("...", i):
                check(n_ell is None, lambda: f"einsum(): found more than one ellipsis in the {where}")
                n_ell = len(out)
                out.append("...")
                i += 3
                continue
            check(ch.isascii() and ch.isalpha(), lambda: f"einsum(): invalid subscript given at index {base + i} in "
                  "the equation string, subscripts must be in [a-zA-Z]")
            out.append(ch)
            i += 1
        letters = [x for x in out if x != "..."]
        if nd is None:
            return out
        if n_ell is None:
            check(len(letters) == nd, lambda: f"einsum(): the number of subscripts in the equation ({len(letters)}) "
                  f"does not match the number of dimensions ({nd}) for operand {k} and no ellipsis was given")
            return letters
        check(len(letters) <= nd, lambda: f"einsum(): the number of subscripts in the equation ({len(letters)}) is "
              f"more than the number of dimensions ({nd}) for operand {k}")
        e = nd - len(letters)
        return out[:n_ell] + [("...", e - 1 - j) for j in range(e)] + out[n_ell + 1:]

    inputs, pos = [], 0
    for k, (term, nd) in enumerate(zip(terms, ndims)):
        inputs.append(labels(term, pos, "input", nd, k))
        pos += len(term) + 1
    n_ell = max([sum(1 for x in lab if isinstance(x, tuple)) for lab in inputs] + [0])
    ell = [("...", n_ell - 1 - j) for j in range(n_ell)]
    if arrow:
        raw = labels(rhs, len(lhs) + 2, "output", None, -1)
        output = []
        for x in raw:
            if x == "...":
                output.extend(ell)
            else:
                check(x not in output, lambda: f"einsum(): output subscript {x} appears more than once in the output")
                check(any(x in lab for lab in inputs), lambda: f"einsum(): output subscript {x} does not appear in the "
                      "equation for any input operand")
                output.append(x)
    else:
        counts: dict = {}
        for lab in inputs:
            for x in lab:
                if not isinstance(x, tuple):
                    counts[x] = counts.get(x, 0) + 1
        output = ell + sorted(x for x, n in counts.items() if n == 1)
    return inputs, output


def einsum(equation: str, *operands) -> Tensor:
    """``torch.einsum`` for two-operand contractions, lowered to one batched product (no copies when the
    permuted operands can be viewed as 3-D, e.g. ``"bhqd,bhkd->bhqk"``).

    Supported: every equation with two operands where each label occurs at most once per operand and every
    label is either in both operands (batch when also in the output, contracted when not) or in one operand
    and the output: ``'ij,jk->ik'``, ``'bij,bjk->bik'``, ``'bhqd,bhkd->bhqk'``, ``'bhqk,bhkd->bhqd'``,
    ``'i,i->'``, ``'i,j->ij'``, ``'...ij,...jk->...ik'``, implicit outputs, size-1 broadcasting. Operands may
    also be passed as one list (``einsum(eq, [a, b])``).

    Args:
        equation: the subscripts (letters a-zA-Z, ``...``, optional ``->`` output).
        operands: two tensors of one dtype (float16, bfloat16, float32, float64; no promotion, as PyTorch).

    Returns:
        The result, possibly a permuted view of the product's output.

    Raises:
        RuntimeError: PyTorch's messages for malformed equations, sizes that do not broadcast ("einsum():
            subscript j has size 4 for operand 1 which does not broadcast with previously seen size 3") and
            mismatched dtypes ("expected scalar type Float but found Half").
        NotImplementedError: one or more than two operands, a repeated label within one operand (diagonals),
            or a label summed out of a single operand, naming the equation.
        TypeError: an operand that is not a tensor.
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    check(isinstance(equation, str), lambda: f"einsum(): argument 'equation' must be str, not "
          f"{type(equation).__name__}", TypeError)
    for i, t in enumerate(operands):
        check(isinstance(t, Tensor), lambda: f"expected Tensor as element {i} in argument 1, but got "
              f"{type(t).__name__}", TypeError)
    check(len(operands) > 0, "einsum(): must provide at least one operand")
    inputs, output = _einsum_parse(equation, [t.ndim for t in operands])
    if len(operands) != 2:
        fail(f"einsum: equation {equation!r} has {len(operands)} operand(s); nbxtensor's einsum supports "
             "two-operand contractions only", NotImplementedError)
    a, b = operands
    la, lb = inputs
    for lab in (la, lb):
        check(len(set(lab)) == len(lab), lambda: f"einsum: equation {equation!r} repeats a subscript within one "
              "operand (a diagonal); not supported by nbxtensor's einsum", NotImplementedError)
    sizes: dict = {}
    for k, (t, lab) in enumerate(zip(operands, inputs)):
        for x, s in zip(lab, t.shape):
            prev = sizes.get(x)
            if prev is None or prev == 1:
                sizes[x] = s
            else:
                check(s == 1 or s == prev, lambda: f"einsum(): subscript {x if isinstance(x, str) else '...'} has size "
                      f"{s} for operand {k} which does not broadcast with previously seen size {prev}")
    out_set = set(output)
    batch = [x for x in output if x in la and x in lb]
    left = [x for x in output if x in la and x not in lb]
    right = [x for x in output if x in lb and x not in la]
    contract = [x for x in la if x in lb and x not in out_set]
    lone = [x for x in la + lb if x not in out_set and not (x in la and x in lb)]
    check(not lone, lambda: f"einsum: equation {equation!r} sums subscript(s) {lone} out of a single operand; not "
          "supported by nbxtensor's einsum", NotImplementedError)
    check(a.dtype is b.dtype, lambda: f"expected scalar type {_tn(a.dtype)} but found {_tn(b.dtype)}")
    _float_dtype("einsum", a.dtype)
    dev = _device("einsum", a, b)

    def arrange(t, lab, order):
        # permute to `order` (labels missing from t become broadcast dims of size 1) and expand to full sizes
        v = t
        for x in order:
            if x not in lab:
                v = v.unsqueeze(-1)
                lab = lab + [x]
        v = v.permute(*[lab.index(x) for x in order])
        return v.expand(*[sizes[x] for x in order])

    def size(group):
        return numel([sizes[x] for x in group])

    B, L, R, Kc = size(batch), size(left), size(right), size(contract)
    a3 = arrange(a, list(la), batch + left + contract).reshape(B, L, Kc)
    b3 = arrange(b, list(lb), batch + contract + right).reshape(B, Kc, R)
    o = new_empty((B, L, R), a.dtype, dev)
    product("einsum", o, a3, b3)
    res = o.view(tuple(sizes[x] for x in batch + left + right))
    have = batch + left + right
    return res.permute(*[have.index(x) for x in output]) if have != output else res


def _cost_einsum(equation, *operands) -> Cost:
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    inputs, output = _einsum_parse(equation, [t.ndim for t in operands])
    sizes: dict = {}
    for t, lab in zip(operands, inputs):
        for x, s in zip(lab, t.shape):
            sizes[x] = max(sizes.get(x, 1), s)
    total = numel(list(sizes.values()))
    outn = numel([sizes[x] for x in output])
    it = operands[0].dtype.itemsize
    return Cost(flops=2 * total, bytes_read=sum(_nbytes(t) for t in operands), bytes_written=outn * it)


def _or_einsum(equation, *operands):
    """np.einsum in float64, with PyTorch's broadcasting of size-1 dims under one letter (NumPy refuses those;
    NumPy broadcasts ellipsis dims itself)."""
    eq = equation.replace(" ", "")
    ops = [_f(x) for x in operands]
    terms = eq.split("->")[0].split(",")
    if "..." not in eq:
        size: dict = {}
        for t, o in zip(terms, ops):
            for ch, n in zip(t, o.shape):
                size[ch] = n if size.get(ch, 1) == 1 else size[ch]
        ops = [np.broadcast_to(o, tuple(size[ch] for ch in t)) for t, o in zip(terms, ops)]
    return np.einsum(eq, *ops)


# Registered without a schema (variadic operands): exported as nbx.einsum by the package, its implementation is
# the products' (einsum lowers to one batched product).
register(OpRecord(name="einsum", family=_FAM, cpu=_gemm_cpu, triton=_gemm_triton, oracle=_or_einsum,
                  cost=_cost_einsum, extra=dict(function=einsum, dtypes=FLOATS, errors=_errs(
                      (lambda nbx: ("ij,jk->ik", nbx.zeros(2, 3), nbx.zeros(4, 4)), {}, RuntimeError,
                       "einsum(): subscript j has size 4 for operand 1 which does not broadcast with previously seen "
                       "size 3"),
                      (lambda nbx: ("ij,jk->ik", nbx.zeros(2, 3)), {}, RuntimeError,
                       "einsum(): fewer operands were provided than specified in the equation"),
                      (lambda nbx: ("ij,jk->il", nbx.zeros(2, 3), nbx.zeros(3, 4)), {}, RuntimeError,
                       "einsum(): output subscript l does not appear in the equation for any input operand"),
                      (lambda nbx: ("ij,jk->ii", nbx.zeros(3, 3), nbx.zeros(3, 2)), {}, RuntimeError,
                       "einsum(): output subscript i appears more than once in the output"),
                      (lambda nbx: ("i1,1k->ik", nbx.zeros(3, 3), nbx.zeros(3, 2)), {}, RuntimeError,
                       "einsum(): invalid subscript given at index 1 in the equation string, subscripts must be in "
                       "[a-zA-Z]"),
                      (lambda nbx: ("ij,jk->ik", nbx.zeros(2, 3, 1), nbx.zeros(3, 4)), {}, RuntimeError,
                       "einsum(): the number of subscripts in the equation (2) does not match the number of "
                       "dimensions (3) for operand 0 and no ellipsis was given"),
                      (lambda nbx: ("ij,jk->ik", nbx.zeros(2, 3), nbx.zeros(3, 4, dtype=nbx.float16)), {},
                       RuntimeError, "expected scalar type Float but found Half"),
                      (lambda nbx: ("ii,ij->j", nbx.zeros(3, 3), nbx.zeros(3, 4)), {}, NotImplementedError,
                       "'ii,ij->j'"),
                      (lambda nbx: ("ij,jk,kl->il", nbx.zeros(3, 3), nbx.zeros(3, 4), nbx.zeros(4, 2)), {},
                       NotImplementedError, "'ij,jk,kl->il'"),
                      (lambda nbx: ("ij->ji", nbx.zeros(3, 3)), {}, NotImplementedError, "'ij->ji'"),
                      (lambda nbx: ("ij,j->", nbx.zeros(3, 3), nbx.zeros(3)), {}, NotImplementedError,
                       "'ij,j->'"),
                      (lambda nbx: ("ij,jk->ik", nbx.zeros(3, 3), 2), {}, TypeError,
                       "expected Tensor as element 1 in argument 1, but got int")))))
