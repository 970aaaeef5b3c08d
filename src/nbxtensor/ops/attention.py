"""Scaled dot-product attention (``nbx.nn.functional.scaled_dot_product_attention``) and PyTorch's causal bias
objects (``nbx.nn.attention.bias.causal_upper_left`` / ``causal_lower_right``).

``out = softmax(Q K^T * scale + bias) V`` over the last two dims, with PyTorch's semantics
(https://pytorch.org/docs/stable/generated/torch.nn.functional.scaled_dot_product_attention.html):

- shapes ``query (N..., Hq, L, E)``, ``key (N..., Hk, S, E)``, ``value (N..., Hv, S, Ev)`` -> ``(N..., Hq, L, Ev)``;
  batch dims broadcast (as the math backend's matmuls do); without ``enable_gqa`` the head dims broadcast too,
  with it ``Hk`` and ``Hv`` must divide ``Hq`` and query head ``h`` reads key head ``h // (Hq / Hk)`` (PyTorch's
  ``repeat_interleave``);
- ``attn_mask``: boolean (True = the key takes part) or additive (float32 or the query's dtype), broadcastable
  to ``(N..., Hq, L, S)``; or a :class:`CausalBias`;
- ``is_causal``: query ``i`` sees keys ``j <= i`` (top-left alignment); combined with an explicit mask by AND, as
  PyTorch's CPU math backend does; :func:`causal_lower_right` aligns the diagonal to the bottom-right corner
  (``j <= i + S - L``), the mask of a prefill chunk over an existing cache;
- ``scale`` defaults to ``1 / sqrt(E)``;
- a row whose every key is masked gives 0 (PyTorch >= 2.5), never NaN; NaN and +inf in the scores propagate;
- ``dropout_p`` other than 0 raises ``NotImplementedError`` (an inference library: PyTorch applies dropout).

**Kernel** (``_attn_fwd_kernel``): flash attention's forward (Dao et al., "FlashAttention", 2022; Dao,
"FlashAttention-2", 2023): one program per (query tile of ``BLOCK_M`` rows, batch x head), a loop over key tiles
of ``BLOCK_N`` keys with the online softmax (running max ``m`` and sum ``l`` in float32, rescaled by
``exp2(m_old - m_new)``), ``Q K^T`` and ``P V`` through ``tl.dot`` with float32 accumulation, the probabilities
rounded to the input dtype for the second product (as FlashAttention does). Scores are kept in base 2 with
``log2(e)`` folded into the scale, so the exponential is one ``exp2``; an additive mask keeps natural units
(``exp``) so that a finite mask such as ``finfo.min`` cannot overflow when multiplied by ``log2(e)``. Head dims
that are not powers of two (80, 96, 127, 129, 255, ...) are padded to the next power of two inside the kernel
with masked loads (``BLOCK_D``). The key loop runs in two stages: key tiles every row of the query tile sees
in full need no bounds or causal masks; the diagonal and the ragged last tile do (Triton's fused-attention
tutorial's split). Causal launches visit the longest query tiles first. A fully masked row keeps ``m = -inf``
and ``l = 0`` and is written as 0. Statistics are float64 for float64 inputs. Float semantics on the GPU: the
running maximum propagates NaN (``max.NaN.f32``, one instruction, as PyTorch's NaN rule); the output is
``acc * (1 / l)`` with an IEEE reciprocal per row (FlashAttention's and PyTorch's fused kernels multiply by the
row's reciprocal too; Triton's float32 ``/`` would be the 2-ulp ``div.full.f32``); the exponentials are
``exp2``/``exp`` on the SFU, FlashAttention's deliberate fast path, which :func:`attention_tolerance` covers
(PyTorch's flash kernels are built with ``--use_fast_math``): the scores' exponential is one
``ex2.approx.ftz.f32`` per score (:func:`_exp2`; results below ``2**-126`` of the row's maximum are 0, which no
sum notices), not the ``ex2.approx.f32`` of Triton's IEEE build, which ptxas widens into four instructions.
Checked on the sm_90 code by tests/ops/test_ptx_audit.py and tests/ops/test_attention.py.

Per score the key loop costs, besides the two tensor-core products: one NaN-propagating max, one FFMA (the scale
and the row maximum: the maximum is taken on unscaled products when the scale is positive and the scores
carry no additive mask, Triton's fused-attention tutorial's form), one ``MUFU.EX2``, one add for the row sum,
half a conversion, and one multiply to rescale the accumulator. A warp-specialized variant (the table's
``"WARP_SPEC"``: Triton 3.6's automatic warp specialization on Hopper, one producer warp group issuing the
bulk copies and two consumer groups of 4 warps) runs the whole key range as one loop with the masks on every
tile (the pass takes kernels of one loop whose loads are all descriptors'; the output is stored through a
descriptor as well); it applies without a tensor mask when query, keys, values and output meet :func:`tma_ok`,
and on GPUs at the tiles :func:`ws_verified` accepts. sm90.json selects it for bf16 prefill with head dim 128 and
no causal mask (``BLOCK_M``/``BLOCK_N`` 128). With the causal mask the variant is wrong at those tiles, so the
table's ``"CAUSAL_SPLIT"`` (sm90.json: bf16, head dim 128, more than 8192 query rows) runs it over the keys
every row of a query tile sees, without any mask, writing the tile's normalized output and base-2 log-sum-exp in
float32 to a workspace (:func:`split_workspace`, declared in the cost), and then the plain kernel over the
diagonal tiles, starting from that state (``acc = out``, ``m = lse``, ``l = 1``). The workspace's round trip
(``8 * Z * H * L * Ev`` bytes) costs more than the variant gains on short prompts and less on long ones (H200,
32 heads, sweep_attention --rounds 2 in alternating order, split against plain, TFLOP/s: batch 2 at 4k 355
against 404 and at 16k 494 against 477; batch 1 at 4k 336 / 351, 8k 439 / 437, 12k 479 / 462, 16k 502 / 488,
32k 527 / 478), hence the table's bound of 8192 query rows. On Hopper (the arch table's
``"TMA"``) keys and values of 16-bit dtypes with aligned strides arrive through tensor descriptors (the bulk
tensor copy engine: rows past ``S`` and columns past ``E`` are zero-filled by the hardware), else through
masked pointer loads that Triton pipelines with ``cp.async``; both compile to ``wgmma`` on sm90 (checked
ahead of time with Triton's sm90 compiler: no register spills at the table's tiles).

Query length 1 without a mask (a decode step) goes to the split-KV decode kernel of
:mod:`.decode_attention`, which spreads the keys over many programs.

The ``cpu`` implementation is NumPy (float32 for float16/bfloat16, float64 for float64) over row chunks; the
oracle is float64. The benchmark's cost: ``4 * B * H * pairs * D`` flops (``pairs = L * S``, or the visible
pairs of a causal mask, about half) and the bytes of q, k, v, the mask and the output.
"""

from __future__ import annotations

import enum
import math
import warnings

import numpy as np

from .._errors import check
from ..dtypes import table as T
from ..dtypes.casting import cast_array
from ..dtypes.tolerance import Tolerance, tolerance
from ..runtime.configs import launch_config
from ..runtime.launcher import interpreting, launch
from ..runtime.triton_compat import jit, tl
from ..shapes import broadcast_shapes, numel
from ..tensor.core import Tensor, host_view, new_empty
from . import registry
from .registry import Cost, OpRecord, register
from .triton_helpers import TL_DTYPES, convert, maximum_fast, nan_max_fast, rcp_rn

__all__ = ["CausalVariant", "CausalBias", "causal_upper_left", "causal_lower_right", "attention_tolerance",
           "sdpa_oracle", "launch_attention", "LOG2E"]

LOG2E = 1.4426950408889634
FLOATS = frozenset({T.float16, T.bfloat16, T.float32, T.float64})
_MAX_GRID_Y = 65535


# ---------------------------------------------------------------------------------------------------------
# Causal bias objects (torch.nn.attention.bias)
# ---------------------------------------------------------------------------------------------------------
class CausalVariant(enum.IntEnum):
    """PyTorch's ``torch.nn.attention.bias.CausalVariant``: where the causal diagonal is anchored."""

    UPPER_LEFT = 1
    LOWER_RIGHT = 2


class CausalBias:
    """A causal mask given by its variant and sizes, accepted as ``attn_mask`` (PyTorch's
    ``torch.nn.attention.bias.CausalBias``); nothing is materialised.

    - ``UPPER_LEFT``: query ``i`` sees keys ``j <= i`` (``is_causal=True``).
    - ``LOWER_RIGHT``: query ``i`` sees keys ``j <= i + (kv_len - q_len)``: the last query row sees every key,
      as a chunk of new tokens appended after ``kv_len - q_len`` cached ones. With ``q_len > kv_len`` the first
      ``q_len - kv_len`` rows see no key and give 0.

    Attributes:
        variant: a :class:`CausalVariant`.
        seq_len_q, seq_len_kv: the query and key lengths the bias was made for.
    """

    def __init__(self, variant: CausalVariant, seq_len_q: int, seq_len_kv: int):
        check(isinstance(variant, CausalVariant), lambda: f"CausalBias: variant must be a CausalVariant, got "
              f"{variant!r}", ValueError)
        check(int(seq_len_q) >= 0 and int(seq_len_kv) >= 0, lambda: f"CausalBias: sequence lengths must be >= 0, got "
              f"({seq_len_q}, {seq_len_kv})", ValueError)
        self.variant = variant
        self.seq_len_q = int(seq_len_q)
        self.seq_len_kv = int(seq_len_kv)

    @property
    def offset(self) -> int:
        """The diagonal's offset: query ``i`` sees keys ``j <= i + offset``."""
        return self.seq_len_kv - self.seq_len_q if self.variant is CausalVariant.LOWER_RIGHT else 0

    def materialize(self) -> np.ndarray:
        """The boolean mask ``[seq_len_q, seq_len_kv]`` (True = take part) as a NumPy array (PyTorch's
        ``_materialize``, on the host)."""
        i = np.arange(self.seq_len_q)[:, None]
        j = np.arange(self.seq_len_kv)[None, :]
        return j <= i + self.offset

    def __repr__(self) -> str:
        return f"CausalBias({self.variant.name}, seq_len_q={self.seq_len_q}, seq_len_kv={self.seq_len_kv})"


def causal_upper_left(*size: int) -> CausalBias:
    """``causal_upper_left(seq_len_q, seq_len_kv)``: the top-left causal bias (``is_causal=True``), as
    ``torch.nn.attention.bias.causal_upper_left``.

    Raises:
        ValueError: not two sizes.
    """
    check(len(size) == 2, lambda: f"causal_upper_left: expected two sizes (seq_len_q, seq_len_kv), got {size}",
          ValueError)
    return CausalBias(CausalVariant.UPPER_LEFT, *size)


def causal_lower_right(*size: int) -> CausalBias:
    """``causal_lower_right(seq_len_q, seq_len_kv)``: the bottom-right causal bias (prefill of ``seq_len_q`` new
    tokens after ``seq_len_kv - seq_len_q`` cached ones), as ``torch.nn.attention.bias.causal_lower_right``.

    Raises:
        ValueError: not two sizes.
    """
    check(len(size) == 2, lambda: f"causal_lower_right: expected two sizes (seq_len_q, seq_len_kv), got {size}",
          ValueError)
    return CausalBias(CausalVariant.LOWER_RIGHT, *size)


# ---------------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------------
@jit
def _to_acc(x, ACC: tl.constexpr, UPCAST: tl.constexpr):
    """A loaded tile in the accumulation dtype. ``UPCAST`` (the interpreter tier with 16-bit inputs): through
    the bit-exact :func:`convert`, because Triton's interpreter mis-evaluates bfloat16 products."""
    if UPCAST:
        r = convert(x, ACC)
    else:
        r = x.to(ACC)
    return r


@jit
def _operand(x, UPCAST: tl.constexpr):
    """A loaded tile as a ``tl.dot`` operand: unchanged on the GPU (16-bit tensor-core inputs), float32 under
    the interpreter for 16-bit dtypes (exact)."""
    if UPCAST:
        r = convert(x, tl.float32)
    else:
        r = x
    return r


@jit
def _round_p(p, IN_DT: tl.constexpr, UPCAST: tl.constexpr):
    """The probabilities rounded to the input dtype for the ``P V`` product (FlashAttention's numerics); under
    the interpreter rounded and widened back to float32, bit-exactly."""
    if UPCAST:
        r = convert(convert(p, IN_DT), tl.float32)
    else:
        r = p.to(IN_DT)
    return r


@jit
def _exp2(x, FTZ: tl.constexpr):
    """``2**x`` of a float tile. ``FTZ`` (float32 on the GPU): one ``ex2.approx.ftz.f32`` (a single ``MUFU.EX2``,
    the instruction FlashAttention and PyTorch's flash kernels get from ``--use_fast_math``); Triton's
    ``tl.math.exp2`` under IEEE launch options is ``ex2.approx.f32``, which ptxas widens with a range test and two
    predicated multiplies per element to produce subnormal results. The only difference is that results below
    ``2**-126`` are 0: a probability that small relative to the row's maximum (which gives 1) changes no sum."""
    if FTZ:
        r = tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f", [x], dtype=tl.float32, is_pure=True,
                                      pack=1)
    else:
        r = tl.math.exp2(x)
    return r


@jit
def _load_k(k_base, k_desc, start_n, n64, n_ok, d_ok, skn, BOUNDS: tl.constexpr, EVEN_D: tl.constexpr,
            TMA: tl.constexpr):
    """The key tile ``[BLOCK_D, BLOCK_N]`` (transposed) of keys ``start_n + offs_n``."""
    if TMA:
        k = k_desc.load([start_n, 0]).T
    else:
        kp = k_base + (n64 * skn)[None, :]
        if BOUNDS:
            if EVEN_D:
                k = tl.load(kp, mask=n_ok[None, :], other=0.0)
            else:
                k = tl.load(kp, mask=d_ok[:, None] & n_ok[None, :], other=0.0)
        else:
            if EVEN_D:
                k = tl.load(kp)
            else:
                k = tl.load(kp, mask=d_ok[:, None], other=0.0)
    return k


@jit
def _fold_tile(acc, l_i, m_i, qk, start_n, v_base, v_desc, mask_base, offs_m, offs_n, dv_ok, m_ok, svn, smn, S,
               qk_scale, causal_off, BOUNDS: tl.constexpr, DIAG: tl.constexpr, MASK_KIND: tl.constexpr,
               EXP2: tl.constexpr, FOLD: tl.constexpr, FTZ: tl.constexpr, EVEN_DV: tl.constexpr, UPCAST: tl.constexpr,
               IN_DT: tl.constexpr, PREC: tl.constexpr, ACC: tl.constexpr, TMA: tl.constexpr,
               PLAIN_MAX: tl.constexpr = False):
    """Fold one tile of scores ``qk = Q K^T`` (unscaled) of keys ``start_n + offs_n`` into ``(acc, l_i, m_i)``:
    masks, the online softmax, ``P V``. See :func:`_attn_inner`."""
    n = start_n + offs_n
    n64 = n.to(tl.int64)
    if not FOLD:
        qk = qk * qk_scale
    if MASK_KIND == 1:
        mp = mask_base + (n64 * smn)[None, :]
        if BOUNDS:
            keep = tl.load(mp, mask=m_ok[:, None] & (n < S)[None, :], other=0)
        else:
            keep = tl.load(mp, mask=m_ok[:, None], other=0)
        qk = tl.where(keep != 0, qk, float("-inf"))
    elif MASK_KIND == 2:
        mp = mask_base + (n64 * smn)[None, :]
        if BOUNDS:
            add = tl.load(mp, mask=m_ok[:, None] & (n < S)[None, :], other=0.0)
        else:
            add = tl.load(mp, mask=m_ok[:, None], other=0.0)
        qk = qk + _to_acc(add, ACC, UPCAST)
    if BOUNDS:
        if DIAG:
            vis = (n < S)[None, :] & (n[None, :] <= offs_m[:, None] + causal_off)
        else:
            vis = (n < S)[None, :]
        qk = tl.where(vis, qk, float("-inf"))
    elif DIAG:
        qk = tl.where(n[None, :] <= offs_m[:, None] + causal_off, qk, float("-inf"))
    if PLAIN_MAX:  # tl.max / tl.maximum (a NaN score still reaches l and acc through its exp2)
        if FOLD:
            m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        else:
            m_new = tl.maximum(m_i, tl.max(qk, 1))
    elif FOLD:
        m_new = maximum_fast(m_i, nan_max_fast(qk, 1) * qk_scale)
    else:
        m_new = maximum_fast(m_i, nan_max_fast(qk, 1))
    # a row with no visible key so far keeps m = -inf: shift by 0 so exp gives 0, not NaN
    shift = tl.where(m_new == float("-inf"), 0.0, m_new)
    if FOLD:
        x = qk * qk_scale - shift[:, None]  # one FFMA per score
    else:
        x = qk - shift[:, None]
    if EXP2:  # ex2.approx: the fast path the module docstring accounts for
        p = _exp2(x, FTZ)
        alpha = tl.math.exp2(m_i - shift)
    elif FTZ:  # natural units (an additive mask): e**x = 2**(x log2 e), as tl.exp lowers on the GPU
        p = _exp2(x * 1.4426950408889634, FTZ)
        alpha = tl.exp(m_i - shift)
    else:
        p = tl.exp(x)
        alpha = tl.exp(m_i - shift)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    if TMA:
        v = v_desc.load([start_n, 0])
    else:
        vp = v_base + (n64 * svn)[:, None]
        if BOUNDS:
            if EVEN_DV:
                v = tl.load(vp, mask=(n < S)[:, None], other=0.0)
            else:
                v = tl.load(vp, mask=(n < S)[:, None] & dv_ok[None, :], other=0.0)
        else:
            if EVEN_DV:
                v = tl.load(vp)
            else:
                v = tl.load(vp, mask=dv_ok[None, :], other=0.0)
    acc = tl.dot(_round_p(p, IN_DT, UPCAST), _operand(v, UPCAST), acc, input_precision=PREC, out_dtype=ACC)
    return acc, l_i, m_new


@jit
def _attn_inner(acc, l_i, m_i, q, k_base, v_base, k_desc, v_desc, mask_base, lo, hi, offs_m, offs_n, d_ok, dv_ok,
                m_ok, skn, svn, smn, S, qk_scale, causal_off,
                BOUNDS: tl.constexpr, DIAG: tl.constexpr, MASK_KIND: tl.constexpr, EXP2: tl.constexpr,
                FOLD: tl.constexpr, FTZ: tl.constexpr, WARP_SPEC: tl.constexpr,
                BLOCK_N: tl.constexpr, EVEN_D: tl.constexpr, EVEN_DV: tl.constexpr, UPCAST: tl.constexpr,
                IN_DT: tl.constexpr, PREC: tl.constexpr, ACC: tl.constexpr, TMA: tl.constexpr,
                PLAIN_MAX: tl.constexpr = False):
    """Fold key tiles ``[lo, hi)`` into ``(acc, l_i, m_i)``.

    ``k_base``: pointers ``[BLOCK_D, 1]`` to key row 0 (head-dim offsets); ``v_base``: ``[1, BLOCK_DV]``;
    ``k_desc``/``v_desc``: tensor descriptors of the (batch, head)'s ``[S, E]`` / ``[S, Ev]`` rows when ``TMA``
    (Hopper's bulk tensor copies; rows past ``S`` and columns past ``E`` arrive as zeros);
    ``mask_base``: ``[BLOCK_M, 1]`` to the mask's column 0 of each query row. ``BOUNDS`` masks keys ``>= S``;
    ``DIAG`` applies the causal diagonal ``j <= i + causal_off``. Scores are base-2 when ``EXP2``.

    ``FOLD`` (``qk_scale > 0`` and no additive mask): the running maximum is taken on the unscaled products
    (``max(s) * c == max(s * c)`` for ``c > 0``, rounding being monotonic) and the scale is applied inside the
    exponent's argument, ``s * c - m``, one fused multiply-add per score instead of a multiply and a subtract
    (Triton's fused-attention tutorial). Masked scores are ``-inf`` before the scale; ``-inf * c`` stays ``-inf``.
    ``WARP_SPEC``: ask Triton for automatic warp specialization of the loop (a tuning knob of the tables).

    Not done, and why: issuing the next tile's ``Q K^T`` before the current softmax (FlashAttention-3's
    intra-warpgroup overlap, written as a software pipeline in the source) compiles on Triton 3.6 to a wait
    right after the issue, and ptxas then serializes every ``wgmma`` (C7515: the accumulator's rescale sits
    inside the open stage): slower, not faster."""
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPEC):
        n = start_n + offs_n
        k = _load_k(k_base, k_desc, start_n, n.to(tl.int64), n < S, d_ok, skn, BOUNDS, EVEN_D, TMA)
        qk = tl.dot(q, _operand(k, UPCAST), input_precision=PREC, out_dtype=ACC)
        acc, l_i, m_i = _fold_tile(acc, l_i, m_i, qk, start_n, v_base, v_desc, mask_base, offs_m, offs_n, dv_ok, m_ok,
                                   svn, smn, S, qk_scale, causal_off, BOUNDS, DIAG, MASK_KIND, EXP2, FOLD, FTZ, EVEN_DV,
                                   UPCAST, IN_DT, PREC, ACC, TMA, PLAIN_MAX)
    return acc, l_i, m_i


@jit
def _attn_fwd_kernel(Q, K, V, MASK, O, W, LSE,
                     sqz, sqh, sqm, sqd, skz, skh, skn, skd, svz, svh, svn, svd, smz, smh, smm, smn,
                     soz, soh, som, sod, swzh, swm, slzh,
                     H, L, S, E, EV, GROUP_K, GROUP_V, zh_off, qk_scale, causal_off,
                     CAUSAL: tl.constexpr, MASK_KIND: tl.constexpr, EXP2: tl.constexpr, FOLD: tl.constexpr,
                     FTZ: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                     BLOCK_DV: tl.constexpr, EVEN_D: tl.constexpr, EVEN_DV: tl.constexpr, UPCAST: tl.constexpr,
                     IN_DT: tl.constexpr, PREC: tl.constexpr, ACC: tl.constexpr, TMA: tl.constexpr,
                     WARP_SPEC: tl.constexpr = False, EVEN_S: tl.constexpr = False,
                     PLAIN_MAX: tl.constexpr = False, PART: tl.constexpr = 0):
    """Attention forward for one tile of BLOCK_M query rows of one (batch, head): see the module docstring.

    ``PART`` (causal launches only; :func:`launch_attention`'s causal split): 0 the whole key range; 1 only the
    keys every row of the tile sees (``[0, full)``, no mask), the normalized partial output stored in float32 to
    ``W [Z*H, Lp, EV]`` and its base-2 log-sum-exp to ``LSE [Z*H, Lp]`` (the warp-specialized variant, through
    descriptors); 2 the rest (``[full, hi)``, the diagonal), its softmax state started from ``W`` and ``LSE``
    (``acc = W``, ``m = LSE``, ``l = 1``: the same state as after the first part), the output to ``O``."""
    num_m = tl.cdiv(L, BLOCK_M)
    if CAUSAL:
        pid_m = num_m - 1 - tl.program_id(0)  # longest tiles first: better balance of the last wave
    else:
        pid_m = tl.program_id(0)
    zh = tl.program_id(1) + zh_off
    z = (zh // H).to(tl.int64)
    h = zh % H
    kh = (h // GROUP_K).to(tl.int64)
    vh = (h // GROUP_V).to(tl.int64)
    h64 = h.to(tl.int64)

    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    m_ok = offs_m < L
    d_ok = offs_d < E
    dv_ok = offs_dv < EV
    m64 = offs_m.to(tl.int64)

    if WARP_SPEC:  # Triton's Hopper warp specialization needs every load of the kernel to be a descriptor's
        q_desc = tl.make_tensor_descriptor(Q + z * sqz + h64 * sqh, shape=[L, E], strides=[sqm, 1],
                                           block_shape=[BLOCK_M, BLOCK_D])
        q = q_desc.load([start_m, 0])
    else:
        q_ptrs = Q + z * sqz + h64 * sqh + m64[:, None] * sqm + offs_d[None, :].to(tl.int64) * sqd
        if EVEN_D:
            q = tl.load(q_ptrs, mask=m_ok[:, None], other=0.0)
        else:
            q = tl.load(q_ptrs, mask=m_ok[:, None] & d_ok[None, :], other=0.0)
    q = _operand(q, UPCAST)
    k_base = K + z * skz + kh * skh + offs_d[:, None].to(tl.int64) * skd
    v_base = V + z * svz + vh * svh + offs_dv[None, :].to(tl.int64) * svd
    mask_base = MASK + z * smz + h64 * smh + m64[:, None] * smm
    if TMA:  # the host checked TMA's rules: 16-byte aligned bases and row strides, unit head-dim stride
        k_desc = tl.make_tensor_descriptor(K + z * skz + kh * skh, shape=[S, E], strides=[skn, 1],
                                           block_shape=[BLOCK_N, BLOCK_D])
        v_desc = tl.make_tensor_descriptor(V + z * svz + vh * svh, shape=[S, EV], strides=[svn, 1],
                                           block_shape=[BLOCK_N, BLOCK_DV])
    else:
        k_desc = k_base
        v_desc = v_base

    m_i = tl.full([BLOCK_M], float("-inf"), ACC)
    l_i = tl.zeros([BLOCK_M], ACC)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], ACC)

    if CAUSAL:
        # keys seen by every row of the tile (its first row sees j <= start_m + causal_off) need no diagonal mask
        hi = tl.minimum(S, start_m + BLOCK_M + causal_off)
        hi = tl.maximum(hi, 0)
        full = tl.minimum(start_m + causal_off + 1, S)
        full = tl.maximum(full, 0)
        full = (full // BLOCK_N) * BLOCK_N
    else:
        hi = S
        full = (S // BLOCK_N) * BLOCK_N
    tl.static_assert(PART == 0 or CAUSAL, "the causal split's parts are causal launches")
    tl.static_assert(PART != 1 or WARP_SPEC, "the causal split's first part is the warp-specialized variant's")
    if WARP_SPEC and PART == 1:
        # the keys every row sees ([0, full): whole tiles inside S): no mask at all, as the variant is verified
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, k_base, v_base, k_desc, v_desc, mask_base, 0, full, offs_m,
                                    offs_n, d_ok, dv_ok, m_ok, skn, svn, smn, S, qk_scale, causal_off, False, False,
                                    MASK_KIND, EXP2, FOLD, FTZ, True, BLOCK_N, EVEN_D, EVEN_DV, UPCAST, IN_DT,
                                    PREC, ACC, TMA, PLAIN_MAX)
    elif WARP_SPEC:
        # one loop (Triton's Hopper warp specialization takes a kernel of one loop): the diagonal and bounds masks
        # on every tile; EVEN_S (S a multiple of BLOCK_N, the host's promise) drops the bounds mask
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, k_base, v_base, k_desc, v_desc, mask_base, 0, hi, offs_m,
                                    offs_n, d_ok, dv_ok, m_ok, skn, svn, smn, S, qk_scale, causal_off, not EVEN_S,
                                    CAUSAL, MASK_KIND, EXP2, FOLD, FTZ, True, BLOCK_N, EVEN_D, EVEN_DV, UPCAST,
                                    IN_DT, PREC, ACC, TMA, PLAIN_MAX)
    else:
        if PART == 2:  # the first part's state: acc = its normalized output, m = its log-sum-exp, l = 1
            zh64 = zh.to(tl.int64)
            w_ptrs = W + zh64 * swzh + m64[:, None] * swm + offs_dv[None, :]
            acc = tl.load(w_ptrs, mask=m_ok[:, None] & dv_ok[None, :], other=0.0).to(ACC)
            m_i = tl.load(LSE + zh64 * slzh + offs_m, mask=m_ok, other=float("-inf")).to(ACC)
            l_i = tl.where(m_i == float("-inf"), 0.0, 1.0).to(ACC)
        else:
            acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, k_base, v_base, k_desc, v_desc, mask_base, 0, full,
                                        offs_m, offs_n, d_ok, dv_ok, m_ok, skn, svn, smn, S, qk_scale, causal_off,
                                        False, False, MASK_KIND, EXP2, FOLD, FTZ, False, BLOCK_N, EVEN_D, EVEN_DV,
                                        UPCAST, IN_DT, PREC, ACC, TMA, PLAIN_MAX)
        acc, l_i, m_i = _attn_inner(acc, l_i, m_i, q, k_base, v_base, k_desc, v_desc, mask_base, full, hi, offs_m,
                                    offs_n, d_ok, dv_ok, m_ok, skn, svn, smn, S, qk_scale, causal_off, True, CAUSAL,
                                    MASK_KIND, EXP2, FOLD, FTZ, False, BLOCK_N, EVEN_D, EVEN_DV, UPCAST, IN_DT,
                                    PREC, ACC, TMA, PLAIN_MAX)
    # a row that saw no key has l = 0 and acc = 0: written as 0 (PyTorch >= 2.5), never 0/0. One IEEE reciprocal
    # per row, then a product per element (FlashAttention's epilogue): within 1.5 ulp of acc / l.
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    out = acc * rcp_rn(l_safe)[:, None]
    if PART == 1:
        # float32 partials through descriptors (the variant's stores must be; see below); rows past L are clipped
        zh64 = zh.to(tl.int64)
        w_desc = tl.make_tensor_descriptor(W + zh64 * swzh, shape=[L, EV], strides=[swm, 1],
                                           block_shape=[BLOCK_M, BLOCK_DV])
        w_desc.store([start_m, 0], out)
        lse_desc = tl.make_tensor_descriptor(LSE + zh64 * slzh, shape=[L], strides=[1], block_shape=[BLOCK_M])
        lse_desc.store([start_m], m_i + tl.math.log2(l_safe))  # -inf for a row that saw no key (m -inf, l 0)
    elif WARP_SPEC:
        # the store through a descriptor too: under Triton 3.6's warp specialization a pointer store of the tile
        # wrote wrong rows (benchmarks/probe_ws_attention.py on the H200, session 9: the tutorial kernel with only
        # its store through pointers went wrong, ~80 % of rows, varying from run to run; with the descriptor store
        # every variant matched the oracle). The bulk store clips the rows past L and the columns past EV.
        o_desc = tl.make_tensor_descriptor(O + z * soz + h64 * soh, shape=[L, EV], strides=[som, 1],
                                           block_shape=[BLOCK_M, BLOCK_DV])
        o_desc.store([start_m, 0], convert(out, O.dtype.element_ty))
    else:
        o_ptrs = O + z * soz + h64 * soh + m64[:, None] * som + offs_dv[None, :].to(tl.int64) * sod
        tl.store(o_ptrs, convert(out, O.dtype.element_ty), mask=m_ok[:, None] & dv_ok[None, :])


def _pow2(n: int, lo: int = 16) -> int:
    return max(lo, 1 << max(0, int(n) - 1).bit_length())


def kernel_dtypes(dt) -> dict:
    """Constexpr dtype settings shared by the attention kernels: accumulation dtype, dot precision, input
    dtype and whether 16-bit tiles are widened for the interpreter."""
    acc = TL_DTYPES["float64" if dt is T.float64 else "float32"]
    return dict(UPCAST=interpreting() and dt in (T.float16, T.bfloat16), IN_DT=TL_DTYPES[dt.name],
                PREC="ieee" if dt in (T.float32, T.float64) else "tf32", ACC=acc)


def tma_ok(k: Tensor, v: Tensor, *more: Tensor) -> bool:
    """Whether the key/value tensors (and any in ``more``, such as the query) meet the rules of Hopper's bulk
    tensor copies as the kernel uses them: a unit stride on the head dim, 16-byte aligned base addresses and
    batch/head/row strides (so each (batch, head)'s rows start aligned), 16-bit elements."""
    for t in (k, v, *more):
        it = t.dtype.itemsize
        if t.dtype not in (T.float16, T.bfloat16) or t.stride(3) != 1 or t.data_ptr() % 16:
            return False
        if any((s * it) % 16 for s in t.stride()[:3]):
            return False
    return True


_TMA_BROKEN: set = set()  # launch keys whose descriptor kernel failed to compile here: the pointer kernel runs
_WS_BROKEN: set = set()  # launch keys whose warp-specialized kernel failed to compile here or is not verified at
# its tiles (ws_verified): the plain one runs


def ws_verified(block_m: int, block_n: int, block_d: int, block_dv: int, causal: bool, stages: int = 2) -> bool:
    """Whether the warp-specialized variant computes right rows on GPUs at these tiles and pipeline ``stages``
    (Triton 3.6, H200).

    Triton splits a 128-row query tile between two consumer warp groups. There, work on the tile's rows besides
    the two products went wrong: a pointer store of the output (now a descriptor store), and the causal diagonal
    mask, whether computed from the row index or loaded as a tile through a descriptor (rows 64-127 of each tile
    wrong); BLOCK_N 64 or a 64-wide head dim gave NaN (benchmarks/probe_ws_attention.py and GPU tier, session 9;
    the tutorial's two-loop causal form fails to compile). 64-row tiles with 3 stages gave NaN too
    (sweep_attention, m64 n64, head dim 128, session 10). Verified right: 64-row tiles with 2 stages (no split;
    session 8, and the GPU tier's 64 x 64 tiles), and 128 x 128 tiles with a head dim padded to 128 without the
    causal mask (2 stages; 3 do not fit in shared memory). Under the interpreter every setting is right (it runs
    no warp specialization)."""
    if stages > 2:
        return False
    if block_m <= 64:
        return True
    return block_m == 128 and block_n == 128 and block_d == block_dv == 128 and not causal


def split_workspace(batch_heads: int, L: int, EV: int, block_m: int, device) -> tuple[Tensor, Tensor]:
    """The causal split's float32 partials: output ``[batch_heads, Lp, EV]`` and base-2 log-sum-exp
    ``[batch_heads, Lp]``, ``Lp`` = ``L`` rounded up to whole query tiles (so every row of the second is 16-byte
    aligned, as a tensor descriptor needs). Uninitialised: the first part writes every row the second reads."""
    lp = -(-L // block_m) * block_m
    return new_empty((batch_heads, lp, EV), T.float32, device), new_empty((batch_heads, lp), T.float32, device)


def split_workspace_bytes(device, dt, batch_heads: int, L: int, E: int, EV: int) -> int:
    """Bytes of :func:`split_workspace` when the device's table asks for the causal split at this shape (the
    warp-specialized rule with ``"CAUSAL_SPLIT"``), else 0. An upper bound: the launch still takes the plain
    kernel, without the workspace, when a stride is not aligned for tensor descriptors."""
    if L <= 1 or dt not in FLOATS:
        return 0
    cfg = launch_config("sdpa_fwd", device, dtypes=(dt,), head_dim=max(_pow2(E), _pow2(EV)), q_len=L, causal=2)
    if not (cfg.get("CAUSAL_SPLIT") and cfg.get("WARP_SPEC") and cfg.get("TMA")):
        return 0
    lp = -(-L // cfg["BLOCK_M"]) * cfg["BLOCK_M"]
    return batch_heads * lp * (EV + 1) * 4


def _ws_meta(cfg: dict, S: int) -> dict:
    """The settings of the warp-specialized variant from a table rule: ``num_warps``/``num_stages`` of the
    variant are the rule's ``ws_warps``/``ws_stages`` (Triton's Hopper warp specialization wants 4 warps per
    consumer group and adds the producer's), so the rule's own ``num_warps`` stays right for the plain kernel
    that runs whenever the variant does not apply."""
    meta = {k: v for k, v in cfg.items() if k not in ("ws_warps", "ws_stages")}
    meta.update(WARP_SPEC=True, EVEN_S=S % cfg["BLOCK_N"] == 0, num_warps=cfg.get("ws_warps", 4))
    if "ws_stages" in cfg:
        meta["num_stages"] = cfg["ws_stages"]
    return meta


def launch_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, out: Tensor, *, scale: float,
                     causal: bool, causal_off: int, group_k: int, group_v: int, tma: bool | None = None) -> None:
    """Launch the attention forward on 4-d views ``q [Z, H, L, E]``, ``k [Z, H/group_k, S, E]``,
    ``v [Z, H/group_v, S, Ev]``, ``mask [Z, H, L, S]`` (any strides, 0 for broadcast dims; bool or additive;
    or None) into ``out [Z, H, L, Ev]``.

    ``tma``: load keys and values with tensor descriptors (Hopper's bulk tensor copies); None follows the arch's
    table (``"TMA"``) when :func:`tma_ok` holds. Should the descriptor kernel fail to compile, a warning says so
    and the pointer kernel runs instead (remembered per launch key).

    The table's ``"WARP_SPEC": true`` selects the warp-specialized variant (one key loop, ``tl.range(...,
    warp_specialize=True)``, the query and the output through descriptors too; settings ``ws_warps``/``ws_stages``)
    where it applies: descriptors in use, the query and ``out`` meet :func:`tma_ok`, no tensor mask, and on GPUs
    tiles where :func:`ws_verified` holds (elsewhere a warning, once per launch key, and the plain kernel). A
    compile failure of the variant warns once and runs the plain kernel (remembered per launch key).

    Table keys besides the tiles: ``"TMA"``, ``"WARP_SPEC"``/``"ws_warps"``/``"ws_stages"``, and two switches that
    default to on, ``"FAST_EXP"`` (:func:`_exp2`'s single ``ex2.approx.ftz``) and ``"FOLD_SCALE"`` (the scale
    in the exponent's FFMA), there so a sweep can measure what each is worth; ``"PLAIN_MAX"`` (default off) takes
    the running maximum with ``tl.max``/``tl.maximum`` instead of the NaN-propagating ones (a NaN score still makes
    its row NaN through its exp2), for the diagnosis of the warp-specialized variant. Rules may bound the shape facts
    ``head_dim`` (padded), ``q_len`` and ``causal`` (1 without the causal mask, 2 with it)."""
    Z, H, L, E = q.shape
    S, EV = k.shape[2], v.shape[3]
    dt = q.dtype
    mask_kind = 0 if mask is None else (1 if mask.dtype is T.bool_ else 2)
    bd, bdv = _pow2(E), _pow2(EV)
    cfg = launch_config("sdpa_fwd", q.device, dtypes=(dt,), head_dim=max(bd, bdv), q_len=max(L, 1),
                        causal=2 if causal else 1)
    # a failure is remembered per kernel variant and settings (the table's whole answer, so one bad setting never
    # disables another: the unverified causal variant must not disable the causal split, nor the reverse)
    key = (dt.name, bd, bdv, mask_kind, bool(causal), q.device.index, tuple(sorted(cfg.items())))
    table_tma = bool(cfg.pop("TMA", False))
    table_ws = bool(cfg.pop("WARP_SPEC", False))
    table_ftz = bool(cfg.pop("FAST_EXP", True))
    table_fold = bool(cfg.pop("FOLD_SCALE", True))
    plain_max = bool(cfg.pop("PLAIN_MAX", False))
    table_split = bool(cfg.pop("CAUSAL_SPLIT", False))
    use_tma = (table_tma if tma is None else bool(tma)) and tma_ok(k, v)
    if tma is None and key in _TMA_BROKEN:
        use_tma = False
    # the variant loads the query and stores the output through descriptors, so both meet TMA's rules too
    use_ws = table_ws and use_tma and mask_kind == 0 and tma_ok(q, out) and key not in _WS_BROKEN
    # the causal split runs the variant without any mask (the keys every row of a tile sees), then the plain
    # kernel over the diagonal tiles: the variant's tiles need only be verified without the causal mask
    split = use_ws and causal and table_split
    ws_stages = cfg.get("ws_stages", cfg.get("num_stages", 3))  # unset: Triton's default, 3
    if use_ws and not interpreting() and not ws_verified(cfg["BLOCK_M"], cfg["BLOCK_N"], bd, bdv, causal and not split,
                                                         ws_stages):
        warnings.warn(f"scaled_dot_product_attention: the warp-specialized kernel is not verified at {key[:5]} "
                      f"{dict(key[6])} (wrong rows on Triton 3.6; see ws_verified); using the plain kernel",
                      RuntimeWarning, stacklevel=3)
        _WS_BROKEN.add(key)  # warned once
        use_ws = False
    plain = {k_: v_ for k_, v_ in cfg.items() if k_ not in ("ws_warps", "ws_stages")}
    exp2 = mask_kind != 2
    qk_scale = scale * LOG2E if exp2 else scale
    fold = table_fold and exp2 and qk_scale > 0  # the scale goes into the exponent's FFMA (see _attn_inner)
    ftz = table_ftz and not interpreting() and dt is not T.float64
    mk = mask if mask is not None else q  # an unused pointer when there is no mask (MASK_KIND == 0)
    ms = mask.stride() if mask is not None else (0, 0, 0, 0)
    num_m = -(-L // cfg["BLOCK_M"])
    w, lse, w_strides = q, q, (0, 0, 0)  # unused pointers without the split (PART 0)
    if use_ws and split:  # the first part's float32 outputs: rows padded to whole tiles (16-byte aligned rows)
        w, lse = split_workspace(Z * H, L, EV, cfg["BLOCK_M"], q.device)
        w_strides = (*w.stride()[:2], lse.stride(0))
    for zh0 in range(0, Z * H, _MAX_GRID_Y):
        n = min(_MAX_GRID_Y, Z * H - zh0)
        grid = (num_m, n)
        args = (q, k, v, mk, out, w, lse, *q.stride(), *k.stride(), *v.stride(), *ms, *out.stride(), *w_strides, H, L,
                S, E, EV, group_k, group_v, zh0, float(qk_scale), int(causal_off))
        meta = dict(CAUSAL=bool(causal), MASK_KIND=mask_kind, EXP2=exp2, FOLD=fold, FTZ=ftz, PLAIN_MAX=plain_max,
                    BLOCK_D=bd, BLOCK_DV=bdv, EVEN_D=E == bd, EVEN_DV=EV == bdv, **kernel_dtypes(dt))
        if use_ws:
            try:
                if split:  # the unmasked keys on the variant, then the diagonal tiles on the plain kernel
                    launch(_attn_fwd_kernel, grid, *args, TMA=True, PART=1, **meta, **_ws_meta(cfg, S))
                    launch(_attn_fwd_kernel, grid, *args, TMA=True, PART=2, **meta, **plain)
                else:
                    launch(_attn_fwd_kernel, grid, *args, TMA=True, **meta, **_ws_meta(cfg, S))
                continue
            except Exception as e:  # noqa: BLE001 - compilation happens before anything is queued
                warnings.warn(f"scaled_dot_product_attention: the warp-specialized kernel failed ({type(e).__name__}:"
                              f" {str(e).splitlines()[0] if str(e) else ''}); using the plain kernel for {key[:5]} "
                              f"{dict(key[6])}",
                              RuntimeWarning, stacklevel=3)
                _WS_BROKEN.add(key)
                use_ws = False
        if use_tma:
            try:
                launch(_attn_fwd_kernel, grid, *args, TMA=True, **meta, **plain)
                continue
            except Exception as e:  # noqa: BLE001 - compilation happens before anything is queued
                if tma is not None:
                    raise
                warnings.warn(f"scaled_dot_product_attention: the tensor-descriptor kernel failed ({type(e).__name__}:"
                              f" {str(e).splitlines()[0] if str(e) else ''}); using the pointer kernel for {key[:5]} "
                              f"{dict(key[6])}",
                              RuntimeWarning, stacklevel=3)
                _TMA_BROKEN.add(key)
                use_tma = False
        launch(_attn_fwd_kernel, grid, *args, TMA=False, **meta, **plain)


# ---------------------------------------------------------------------------------------------------------
# CPU implementation and oracle
# ---------------------------------------------------------------------------------------------------------
def _visible(L: int, S: int, causal: bool, off: int, rows=None) -> np.ndarray | None:
    if not causal:
        return None
    i = np.arange(L)[:, None] if rows is None else np.asarray(rows)[:, None]
    return np.arange(S)[None, :] <= i + off


def _softmax_rows(z: np.ndarray) -> np.ndarray:
    """softmax over the last axis where a row of all -inf gives 0 (PyTorch's ``_safe_softmax``); NaN and +inf
    propagate."""
    with np.errstate(all="ignore"):
        m = np.max(z, axis=-1, keepdims=True, initial=-np.inf)  # no key at all: -inf, a dead row
        dead = np.isneginf(m)
        e = np.exp(z - np.where(dead, 0.0, m))
        s = np.sum(e, axis=-1, keepdims=True)
        p = e / np.where(dead, 1.0, s)
    return np.where(dead, 0.0, p)


def _sdpa_cpu(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, out: Tensor, *, scale: float, causal: bool,
              causal_off: int, group_k: int, group_v: int) -> None:
    """NumPy attention on the 4-d views (float32 for 16-bit inputs, float64 for float64), 256 query rows at a
    time per (batch, head) so the score matrix stays small."""
    acc = T.float64 if q.dtype is T.float64 else T.float32
    an = acc.numpy.type
    qa, ka, va = (cast_array(np.asarray(host_view(t)), t.dtype, acc) for t in (q, k, v))
    ma = None if mask is None else np.asarray(host_view(mask))
    if ma is not None and mask.dtype is not T.bool_:
        ma = cast_array(ma, mask.dtype, acc)
    Z, H, L, _ = q.shape
    S = k.shape[2]
    res = np.zeros(tuple(out.shape), dtype=an)
    step = 256
    with np.errstate(all="ignore"):
        for z in range(Z):
            for h in range(H):
                kk, vv = ka[z, h // group_k], va[z, h // group_v]
                for r0 in range(0, L, step):
                    rows = np.arange(r0, min(L, r0 + step))
                    s = (qa[z, h, rows] @ kk.T).astype(an) * an(scale)
                    if ma is not None:
                        mm = ma[z, h, rows]
                        s = np.where(mm, s, -np.inf) if mask.dtype is T.bool_ else s + mm
                    vis = _visible(L, S, causal, causal_off, rows)
                    if vis is not None:
                        s = np.where(vis, s, -np.inf)
                    res[z, h, rows] = _softmax_rows(s).astype(an) @ vv
    host_view(out)[...] = cast_array(res, acc, out.dtype)


def sdpa_oracle(q: np.ndarray, k: np.ndarray, v: np.ndarray, attn_mask=None, is_causal: bool = False,
                scale: float | None = None, enable_gqa: bool = False, causal_offset: int = 0,
                with_magnitude: bool = False):
    """float64 attention on host arrays of any floating dtype, by the definition (not the CPU implementation).

    Args:
        q, k, v: ``(..., Hq, L, E)``, ``(..., Hk, S, E)``, ``(..., Hv, S, Ev)`` arrays (batch dims broadcast).
        attn_mask: None, a bool array (True = take part) or an additive array broadcastable to the scores.
        is_causal: the causal diagonal ``j <= i + causal_offset`` (0: top-left; ``S - L``: lower-right).
        scale: default ``1/sqrt(E)``.
        enable_gqa: key/value head ``h // (Hq / Hk)`` serves query head ``h``.
        with_magnitude: also return ``P |V|`` (the weighted magnitude the tolerance rule scales with).

    Returns:
        The output ``(..., Hq, L, Ev)`` in float64 (and the magnitude when asked).
    """
    qf, kf, vf = (cast_array(np.asarray(a), T.dtype_from(np.asarray(a).dtype), T.float64) for a in (q, k, v))
    E = qf.shape[-1]
    if enable_gqa and qf.ndim >= 3:
        kf = np.repeat(kf, qf.shape[-3] // kf.shape[-3], axis=-3)
        vf = np.repeat(vf, qf.shape[-3] // vf.shape[-3], axis=-3)
    s = np.matmul(qf, np.swapaxes(kf, -1, -2)) * (1.0 / math.sqrt(E) if scale is None else scale)
    L, S = s.shape[-2], s.shape[-1]
    if attn_mask is not None:
        m = np.asarray(attn_mask)
        if m.dtype == np.bool_:
            s = np.where(m, s, -np.inf)
        else:
            s = s + cast_array(m, T.dtype_from(m.dtype), T.float64)
    if is_causal:
        s = np.where(np.arange(S)[None, :] <= np.arange(L)[:, None] + causal_offset, s, -np.inf)
    p = _softmax_rows(s)
    o = np.matmul(p, vf)
    if with_magnitude:
        return o, np.matmul(p, np.abs(vf))
    return o


def attention_tolerance(dtype, head_dim: int) -> Tolerance:
    """The declared tolerance rule of attention outputs against the float64 oracle:
    ``|out - ref| <= atol + rtol * (|ref| + P|V|)`` with ``P|V|`` the probability-weighted magnitude of the
    values (an error in the probabilities moves the output in proportion to it, not to ``|ref|``, which can be
    near 0).

    - float16 / bfloat16: ``rtol = 2 * rtol(dtype)``: the probabilities are rounded to the input dtype for the
      ``P V`` product and the output is rounded once (two roundings; the score products of 16-bit inputs are
      exact in float32).
    - float32 / float64: :func:`~nbxtensor.dtypes.tolerance` widened by the score products' length
      ``reduced=head_dim`` (accumulation of ``E`` products, ``exp`` of scores up to ``|s|``).
    """
    d = T.dtype_from(dtype)
    if d in (T.float16, T.bfloat16):
        base = tolerance(d)
        return Tolerance(2 * base.rtol, base.atol)
    return tolerance(d, reduced=max(1, int(head_dim)))


# ---------------------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------------------
_FN = "scaled_dot_product_attention"


def _as4(t: Tensor, bshape: tuple, tail: tuple) -> Tensor:
    """``t`` expanded to ``bshape + tail`` and viewed as ``[prod(bshape), *tail]`` (a copy only when the
    expanded batch dims cannot be merged into one stride)."""
    full = tuple(bshape) + tuple(tail)
    if tuple(t.shape) != full:
        t = t.expand(*full)
    return t.reshape(numel(bshape), *tail)


def _pad_dims(t: Tensor, nd: int) -> Tensor:
    while t.ndim < nd:
        t = t.unsqueeze(0)
    return t


def _resolve_mask(mask, is_causal: bool, L: int, S: int, fn: str):
    """(tensor mask or None, causal, causal offset) from ``attn_mask`` and ``is_causal``."""
    if isinstance(mask, CausalBias):
        check(not is_causal, "CausalBias should not be used with causal=True", ValueError)
        if mask.variant is CausalVariant.UPPER_LEFT or mask.seq_len_q == mask.seq_len_kv:
            return None, True, 0
        check((mask.seq_len_q, mask.seq_len_kv) == (L, S), lambda: f"{fn}: attn_mask {mask!r} was made for "
              f"(seq_len_q, seq_len_kv) = ({mask.seq_len_q}, {mask.seq_len_kv}) but the query and key lengths are "
              f"({L}, {S})")
        return None, True, S - L
    check(mask is None or isinstance(mask, Tensor), lambda: f"{fn}(): argument 'attn_mask' must be Tensor or "
          f"CausalBias, not {type(mask).__name__}", TypeError)
    return mask, bool(is_causal), 0


def _sdpa_decode(*args):
    """``decode_attention.sdpa_decode`` (imported on first use: that module imports this one)."""
    global _sdpa_decode
    from .decode_attention import sdpa_decode
    _sdpa_decode = sdpa_decode
    return sdpa_decode(*args)


def _driver(rec, args, *, out=None, inplace=None):
    fn = _FN
    q, k, v = args["query"], args["key"], args["value"]
    if out is None and inplace is None:  # one decode step: the short host path (declines anything else)
        res = _sdpa_decode(q, k, v, args["attn_mask"], args["dropout_p"], args["is_causal"], args["scale"],
                           args["enable_gqa"])
        if res is not None:
            return res
    for name in ("query", "key", "value"):
        check(isinstance(args[name], Tensor), lambda: f"{fn}(): argument '{name}' must be Tensor, not "
              f"{type(args[name]).__name__}", TypeError)
    dropout_p, scale, gqa = args["dropout_p"], args["scale"], args["enable_gqa"]
    check(dropout_p == 0.0, lambda: f"{fn}: dropout_p={dropout_p}: nbxtensor is an inference library and does not "
          "apply dropout; pass dropout_p=0.0", NotImplementedError)
    check(q.device == k.device == v.device, lambda: f"{fn}: Expected all tensors to be on the same device, but found "
          f"query on {q.device}, key on {k.device}, value on {v.device}")
    check(q.ndim >= 2 and k.ndim >= 2 and v.ndim >= 2, lambda: f"{fn}: Expected query, key, and value to all be at "
          f"least 2 dimensional, but got query.dim: {q.ndim} key.dim: {k.ndim} and value.dim: {v.ndim} instead.")
    check(q.dtype == k.dtype == v.dtype, lambda: f"{fn}: Expected query, key, and value to have the same dtype, but "
          f"got query.dtype: {q.dtype.name} key.dtype: {k.dtype.name} and value.dtype: {v.dtype.name} instead.")
    check(q.dtype in FLOATS, lambda: f"{fn}: expected a floating query (float16, bfloat16, float32, float64), got "
          f"{q.dtype.name}")
    E, L, S, EV = q.shape[-1], q.shape[-2], k.shape[-2], v.shape[-1]
    check(k.shape[-1] == E, lambda: f"{fn}: key's last dim ({k.shape[-1]}) must equal query's ({E})")
    check(v.shape[-2] == S, lambda: f"{fn}: value's sequence length ({v.shape[-2]}) must equal key's ({S})")
    mask, causal, off = _resolve_mask(args["attn_mask"], args["is_causal"], L, S, fn)
    if mask is not None:
        check(mask.device == q.device, lambda: f"{fn}: attn_mask is on {mask.device}, query on {q.device}")
        check(mask.dtype in (T.bool_, T.float32, q.dtype), lambda: f"{fn}: Expected attn_mask dtype to be bool or "
              f"float or to match query dtype, but got attn_mask.dtype: {mask.dtype.name} and query.dtype: "
              f"{q.dtype.name} instead.")
    # batch dims and heads
    nd = max(q.ndim, k.ndim, v.ndim, 3)
    squeeze = q.ndim == 2 and k.ndim == 2 and v.ndim == 2
    qq, kk, vv = (_pad_dims(t, nd) for t in (q, k, v))
    hq, hk, hv = qq.shape[-3], kk.shape[-3], vv.shape[-3]
    if gqa:
        check(hk > 0 and hv > 0 and hq % hk == 0 and hq % hv == 0, lambda: f"{fn}: Number of heads in key and value "
              f"must divide the number of heads in query (query heads {hq}, key heads {hk}, value heads {hv})")
        heads, gk, gv = hq, hq // hk, hq // hv
    else:
        heads = broadcast_shapes((hq,), (hk,), (hv,))[0]
        gk = gv = 1
    bshape = broadcast_shapes(qq.shape[:-3], kk.shape[:-3], vv.shape[:-3])
    out_shape = tuple(bshape) + (heads, L, EV)
    res = new_empty(out_shape, q.dtype, q.device)
    if res.numel() == 0:
        return res.reshape(L, EV) if squeeze else res
    if scale is None:
        scale = 1.0 / math.sqrt(E) if E > 0 else 1.0
    qz = _as4(qq, bshape, (heads, L, E))
    kz = _as4(kk, bshape, (heads // gk, S, E))
    vz = _as4(vv, bshape, (heads // gv, S, EV))
    mz = None
    if mask is not None:
        full = tuple(bshape) + (heads, L, S)
        check(tuple(broadcast_shapes(mask.shape, full)) == full, lambda: f"{fn}: attn_mask of shape "
              f"{list(mask.shape)} does not broadcast to the scores' shape {list(full)}")
        mz = _as4(mask, bshape, (heads, L, S))
    oz = res.view(numel(bshape), heads, L, EV)
    if S == 0:
        oz.zero_()
    elif not _route_decode(qz, kz, vz, mz, oz, scale=scale, causal=causal, off=off, gk=gk, gv=gv):
        registry.impl(_FN, q.device.type)(qz, kz, vz, mz, oz, scale=float(scale), causal=causal, causal_off=off,
                                          group_k=gk, group_v=gv)
    return res.view(L, EV) if squeeze else res


def _route_decode(q, k, v, mask, out, *, scale, causal, off, gk, gv) -> bool:
    """A single query row with no mask (a decode step) runs the split-KV decode kernel, which spreads the keys
    over many programs; returns False when the general kernel should run."""
    if q.shape[2] != 1 or mask is not None or (causal and off < k.shape[2] - 1) or gk != gv:
        return False
    if q.device.type == "cpu" and not interpreting():
        return False
    from .decode_attention import launch_decode
    launch_decode(q[:, :, 0], k, v, None, out[:, :, 0], scale=float(scale), paged=False)
    return True


def _cpu(q, k, v, mask, out, **params):
    _sdpa_cpu(q, k, v, mask, out, **params)


def _triton(q, k, v, mask, out, **params):
    launch_attention(q, k, v, mask, out, **params)


def _oracle(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """The record's oracle on host arrays (``attn_mask`` an array, or a :class:`CausalBias`)."""
    off = 0
    if isinstance(attn_mask, CausalBias):
        is_causal, off, attn_mask = True, attn_mask.offset, None
    return sdpa_oracle(query, key, value, attn_mask, is_causal, scale, enable_gqa, causal_offset=off)


def causal_pairs(L: int, S: int, off: int) -> int:
    """The number of visible (query, key) pairs of the causal mask ``j <= i + off`` over ``L x S``: row ``i``
    sees ``clamp(i + off + 1, 0, S)`` keys."""
    return int(np.clip(np.arange(L, dtype=np.int64) + off + 1, 0, S).sum())


def _shapes(q, k, v, gqa: bool):
    """``(batch shape, heads)`` of the output, by the driver's broadcasting rules (no checks)."""
    nd = max(q.ndim, k.ndim, v.ndim, 3)
    pad = [(1,) * (nd - len(t.shape)) + tuple(t.shape) for t in (q, k, v)]
    heads = pad[0][-3] if gqa else max(p[-3] for p in pad)
    return broadcast_shapes(*(p[:-3] for p in pad)), heads


def _cost(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False) -> Cost:
    """Flops ``2 * pairs * (E + Ev)`` per (batch, head): ``4 * B * H * L * S * D`` when ``E == Ev``, with
    ``pairs = L * S`` or the visible pairs of a causal mask (about half). Bytes: q, k, v and the mask once each
    (their own sizes: broadcast dims are not repeated) and the output. Where the device's table takes the causal
    split (:func:`split_workspace_bytes`), its float32 partials are workspace, written once and read once."""
    E, L, S, EV = query.shape[-1], query.shape[-2], key.shape[-2], value.shape[-1]
    bshape, heads = _shapes(query, key, value, enable_gqa)
    bh = numel(bshape) * heads
    causal, off = bool(is_causal), 0
    if isinstance(attn_mask, CausalBias):
        causal, off = True, attn_mask.offset
    pairs = causal_pairs(L, S, off) if causal else L * S
    nbytes = sum(t.numel() * t.dtype.itemsize for t in (query, key, value))
    if isinstance(attn_mask, Tensor):
        nbytes += attn_mask.numel() * attn_mask.dtype.itemsize
    ws = 0
    if causal and not isinstance(attn_mask, Tensor) and (query.device.type != "cpu" or interpreting()):
        ws = split_workspace_bytes(query.device, query.dtype, bh, L, E, EV)
    # the causal split writes its float32 partials once and reads them once
    return Cost(flops=2 * bh * pairs * (E + EV), bytes_read=nbytes + ws,
                bytes_written=bh * L * EV * query.dtype.itemsize + ws, workspace_bytes=ws)


def _t(*shape, dtype=T.float32):
    return lambda dev: new_empty(shape, dtype, dev).fill_(0)


# Error inputs as data: (label, args builders, kwargs, exception type, message regex).
_ERRORS = [
    ("dropout", (_t(1, 2, 3, 8), _t(1, 2, 3, 8), _t(1, 2, 3, 8)), {"dropout_p": 0.1}, NotImplementedError, "dropout"),
    ("dtype mismatch", (_t(1, 2, 3, 8), _t(1, 2, 3, 8, dtype=T.float64), _t(1, 2, 3, 8)), {}, RuntimeError,
     "same dtype"),
    ("integer inputs", (_t(1, 2, 3, 8, dtype=T.int64),) * 3, {}, RuntimeError, "floating"),
    ("1-d inputs", (_t(8), _t(8), _t(8)), {}, RuntimeError, "at least 2 dimensional"),
    ("head dim mismatch", (_t(1, 2, 3, 8), _t(1, 2, 3, 4), _t(1, 2, 3, 8)), {}, RuntimeError, "last dim"),
    ("kv length mismatch", (_t(1, 2, 3, 8), _t(1, 2, 5, 8), _t(1, 2, 4, 8)), {}, RuntimeError, "sequence length"),
    ("gqa heads", (_t(1, 4, 3, 8), _t(1, 3, 3, 8), _t(1, 3, 3, 8)), {"enable_gqa": True}, RuntimeError,
     "must divide"),
    ("heads without gqa", (_t(1, 4, 3, 8), _t(1, 2, 3, 8), _t(1, 2, 3, 8)), {}, RuntimeError, "must match"),
    ("mask dtype", (_t(1, 2, 3, 8),) * 3, {"attn_mask": _t(3, 3, dtype=T.int64)}, RuntimeError, "attn_mask dtype"),
    ("mask shape", (_t(1, 2, 3, 8),) * 3, {"attn_mask": _t(4, 3, dtype=T.bool_)}, RuntimeError, "must match"),
    ("bias with is_causal", (_t(1, 2, 3, 8),) * 3, {"attn_mask": lambda dev: causal_lower_right(3, 3),
                                                    "is_causal": True}, ValueError, "causal=True"),
    ("bias sizes", (_t(1, 2, 3, 8), _t(1, 2, 5, 8), _t(1, 2, 5, 8)),
     {"attn_mask": lambda dev: causal_lower_right(2, 5)}, RuntimeError, "was made for"),
]

register(OpRecord(
    name=_FN, family="attention", cpu=_cpu, triton=_triton, oracle=_oracle, cost=_cost,
    extra=dict(schema=f"{_FN}(Tensor query, Tensor key, Tensor value, Tensor|Any? attn_mask=None, "
                      "float dropout_p=0.0, bool is_causal=False, *, float? scale=None, bool enable_gqa=False)",
               driver=_driver, dtypes=FLOATS, namespaces=("functional",), method=False, errors=_ERRORS,
               tolerance=dict(rule=attention_tolerance, cause="errors scale with the probability-weighted value "
                              "magnitude P|V|, not |out|"),
               doc=__doc__.split("\n\n")[0] + "\n\nSee :mod:`nbxtensor.ops.attention` for the semantics."),
))
