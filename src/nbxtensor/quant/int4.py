"""Grouped int4 weights: quantize, pack, unpack, the quantized linear handle :class:`QuantLinear`, and the Triton
kernels that multiply by packed weights (``int4_linear``) or expand them (``int4_dequantize``).

**Format.** A weight ``W [N, K]`` (``N`` outputs, ``K`` inputs) is cut along ``K`` into groups of ``G`` (32, 64
or 128) consecutive values; each value is a 4-bit code ``q`` in ``0..15`` and each group has a scale ``s`` (and,
when asymmetric, a minimum ``m``):

- asymmetric: ``w = s * q + m`` (llama.cpp's Q4_1: ``d * q + m``);
- symmetric: ``w = s * (q - 8)`` (llama.cpp's Q4_0: ``d * (q - 8)``).

Storage: ``qweight`` uint8 ``[N, K / 2]``; group ``g`` of row ``n`` owns bytes ``g*G/2 .. g*G/2 + G/2 - 1`` and
byte ``j`` of a group holds value ``j`` of the group in its low nibble and value ``j + G/2`` in its high nibble
(ggml's nibble order of Q4_0/Q4_1 blocks, generalised to any group size, so GGUF blocks map onto it with no
repacking of the codes); ``scales`` and ``mins`` ``[N, K / G]`` in float16 (default; GGUF's), bfloat16 or
float32. Bytes per weight: ``0.5 + (1 or 2) * itemsize / G`` (Q4_1 in float16: 0.625).

**Quantizing** (:func:`quantize_int4`, host side, float64 math): asymmetric ``s = (max - min) / 15``,
``m = min``; symmetric ``s = v / -8`` with ``v`` the value of largest magnitude (llama.cpp's Q4_0 rule: ``v``
itself is code 0 exactly). Scale and minimum are rounded to their storage dtype first and the codes are
computed from the rounded values, ``q = clip(rint((w - m) / s), 0, 15)`` (``rint(w / s) + 8`` symmetric), so
every value is within ``s / 2`` of its reconstruction (plus the rounding of ``m``), except values clipped by
a symmetric group's range (the far end of the range, ``-v * 7 / 8``, is code 15).

**Oracle.** :func:`dequantize_oracle`: the codes unpacked from the packed bytes and the scales in float64; the
products ``s * q`` are exact in float64, so this is the exact value of every weight. :func:`int4_linear_oracle`
multiplies by it in float64.

**Kernels** (Triton):

- ``_int4_gemv_kernel`` (decode, ``M <= MAX_M`` rows of ``x``): one program per (``BLOCK_N`` output rows, row
  ``m`` of ``x``; the ``M`` programs of one row tile are neighbours on grid axis 0, so the weight rows they
  share are read from HBM once) and, when the row tiles are too few for the GPU, per K range (split-K over
  groups, deterministic as the bf16 GEMV's: partials summed in split order by the last program). Each step loads
  a ``(BLOCK_N, BLOCK_K / 2)`` tile of packed bytes (16 bytes per lane along a row) and the two matching halves of
  ``x`` in the same layout, splits the nibbles in registers, sums each group's products in registers and
  accumulates ``s * (sum_j q_j x_j) + m * (sum_j x_j)`` (symmetric: ``s * (sum q x - 8 sum x)``) in float32: one
  scale multiply per group, not per weight. For 16-bit activations the codes are decoded as the floats
  ``1 + q/16`` (the nibble placed in the top mantissa bits of 1.0: two integer instructions per code, no
  int-to-float conversion) and ``sum q x = 16 (sum (1 + q/16) x - sum x)``; ``DECODE_ASM`` does that decode in
  inline PTX on four packed bytes at a time. The weight is never expanded in memory: a decode step reads the
  packed bytes, the scales and ``x`` once. The epilogue (:mod:`nbxtensor.ops.matmul`'s) adds the bias, applies
  the activation (silu for a gate projection) and adds a residual (which may be the output:
  ``h = linear(x, residual=h, out=h)``), rounding once.
- ``_int4_gemv_w_kernel`` (config key ``WORD_DECODE``, default off; group 32, 16-bit activations): the same
  product with fewer instructions per packed byte (sm_90: about 7 against 12): the packed bytes read as 16-bit
  halfwords joined into int32 words, each word's 8 codes decoded with 4 shifts and 8 ``lop3`` in inline PTX (low
  nibbles as ``16 + q/16``, high nibbles as ``1 + q/16``: ``sum q x = 16 (sum w x - 16 sum_lo x - sum_hi x)``),
  one FFMA chain per word, ``x`` converted and summed once for all of a thread's rows, no shared memory in the
  loop; ``PERSIST``: fewer programs than row tiles, each looping over them; ``LOOP_STAGES``: the loads
  software-pipelined (async copies through shared memory, ``x`` staged once per step); ``PREFETCH``: the next
  step's loads written before this step's arithmetic (ptxas may sink them again). A small ``BLOCK_N`` with a
  large ``BLOCK_K`` (e.g. 4 x 2048) splits K over the warps of one program (Triton's layout puts warps along
  the columns first), reduced inside the program at the end.
- ``_int4_dequant_kernel`` (prefill, ``M > MAX_M``): writes ``W`` in the activation dtype into a scratch
  buffer, then the GEMM of :mod:`nbxtensor.ops.matmul` runs (dequantize-then-GEMM; the scratch is ``N * K``
  elements of the activation dtype for one call).

The ``cpu`` implementation is NumPy: dequantize (float32; float64 for float64 inputs) and multiply.
:class:`QuantLinear` on the CPU keeps the dequantized weight after the first call (the CPU has no int4 GEMM;
say ``cache=False`` to dequantize on every call); on CUDA the weights stay packed.

Exactness: dequantized float32 values equal the oracle's float64 values rounded once for float16/bfloat16
scales (``s * q`` has at most 12 significant bits, so only the final add rounds); with float32 scales the
asymmetric form rounds twice (product and sum). Products accumulate in float32 and round once to the output
dtype.
"""

from __future__ import annotations

import numpy as np

from .._errors import check
from ..dtypes import table as T
from ..dtypes.casting import cast_array
from ..ops import registry
from ..ops.matmul import (_NO_PLAN, _PLAN_CACHES, ACTIVATIONS, _ACT_CODE, _cvt, _epilogue, _launch, _locks,
                          _np_activation, _split_k_finish, _tensor_sig, _wide, apart, record_plan, split_k)
from ..ops.registry import Cost, OpRecord, register
from ..ops.triton_helpers import TL_DTYPES, convert
from ..runtime import configs as _configs
from ..runtime.configs import launch_config
from ..runtime.launcher import interpreting
from ..runtime.pdl import enter as pdl_enter
from ..runtime.pdl import settings as pdl_settings
from ..runtime.triton_compat import INTERPRET, jit, tl
from ..tensor.core import Tensor, from_host_array, host_view, new_empty
from .int4_tc import launch_int4_gemv_tc, tc_eligible

__all__ = ["GROUP_SIZES", "SCALE_DTYPES", "pack_int4", "unpack_int4", "quantize_int4", "dequantize_oracle",
           "int4_linear_oracle", "int4_linear", "int4_dequantize", "QuantLinear"]

GROUP_SIZES = (32, 64, 128)
SCALE_DTYPES = frozenset({T.float16, T.bfloat16, T.float32})
ACT_DTYPES = frozenset({T.float16, T.bfloat16, T.float32, T.float64})


# ---------------------------------------------------------------------------------------------------------
# Host side: packing, quantizing, the oracle
# ---------------------------------------------------------------------------------------------------------
def _check_group(fn: str, K: int, group_size: int) -> None:
    check(group_size in GROUP_SIZES, lambda: f"{fn}: group_size must be one of {GROUP_SIZES}, got {group_size}",
          ValueError)
    check(K % group_size == 0, lambda: f"{fn}: the input size K={K} must be a multiple of group_size={group_size}",
          ValueError)


def pack_int4(q: np.ndarray, group_size: int) -> np.ndarray:
    """Pack 4-bit codes ``q [..., K]`` (integers in ``0..15``) into bytes ``[..., K / 2]`` in the group nibble
    order of the module docstring.

    Raises:
        ValueError: ``K`` not a multiple of ``group_size``, an unsupported group size, a code outside 0..15.
    """
    q = np.asarray(q)
    K = q.shape[-1]
    _check_group("pack_int4", K, group_size)
    check(q.size == 0 or (q.min() >= 0 and q.max() <= 15), "pack_int4: codes must lie in 0..15", ValueError)
    g = q.astype(np.uint8).reshape(*q.shape[:-1], K // group_size, 2, group_size // 2)
    return (g[..., 0, :] | (g[..., 1, :] << np.uint8(4))).reshape(*q.shape[:-1], K // 2)


def unpack_int4(packed: np.ndarray, group_size: int) -> np.ndarray:
    """The codes ``[..., K]`` (uint8, ``0..15``) of packed bytes ``[..., K / 2]`` (inverse of :func:`pack_int4`)."""
    b = np.asarray(packed, dtype=np.uint8)
    K = 2 * b.shape[-1]
    _check_group("unpack_int4", K, group_size)
    g = b.reshape(*b.shape[:-1], K // group_size, 1, group_size // 2)
    return np.concatenate([g & np.uint8(15), g >> np.uint8(4)], axis=-2).reshape(*b.shape[:-1], K)


def quantize_int4(weight, group_size: int = 32, *, symmetric: bool = False, scale_dtype=T.float16):
    """Quantize a float weight ``[N, K]`` to grouped int4 (rules in the module docstring).

    Args:
        weight: NumPy array or Tensor ``[N, K]`` of floats.
        group_size: 32, 64 or 128 (``K`` must be a multiple).
        symmetric: ``w = s * (q - 8)`` (no minimum) instead of ``w = s * q + m``.
        scale_dtype: float16 (default), bfloat16 or float32.

    Returns:
        ``(qweight, scales, mins)`` NumPy arrays: uint8 ``[N, K/2]``, ``[N, K/G]`` of ``scale_dtype`` (and
        ``mins`` of the same shape and dtype, or ``None`` when symmetric).

    Raises:
        ValueError: not 2-D, a bad group size, non-finite values.
    """
    sd = T.dtype_from(scale_dtype)
    check(sd in SCALE_DTYPES, lambda: f"quantize_int4: scale_dtype must be float16, bfloat16 or float32, got {sd.name}",
          ValueError)
    w = (weight.cpu().numpy() if isinstance(weight, Tensor) else np.asarray(weight)).astype(np.float64)
    check(w.ndim == 2, lambda: f"quantize_int4: weight must be 2-D [N, K], got shape {list(w.shape)}", ValueError)
    N, K = w.shape
    _check_group("quantize_int4", K, group_size)
    check(np.isfinite(w).all(), "quantize_int4: weight holds NaN or infinity", ValueError)
    g = w.reshape(N, K // group_size, group_size)

    def store(v):  # round to the storage dtype, back to float64
        r = cast_array(np.asarray(v, dtype=np.float64), T.float64, sd)
        return cast_array(r, sd, T.float64), r

    if symmetric:
        idx = np.abs(g).argmax(axis=-1)[..., None]
        s64, s = store(np.take_along_axis(g, idx, axis=-1)[..., 0] / -8.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(s64[..., None] == 0, 8.0, np.rint(g / s64[..., None]) + 8.0)
        mins = None
    else:
        lo, hi = g.min(axis=-1), g.max(axis=-1)
        m64, mins = store(lo)
        s64, s = store((hi - lo) / 15.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(s64[..., None] == 0, 0.0, np.rint((g - m64[..., None]) / s64[..., None]))
    q = np.clip(q, 0, 15).astype(np.uint8).reshape(N, K)
    return pack_int4(q, group_size), s, mins


def _f64(a) -> np.ndarray:
    if isinstance(a, Tensor):
        a = a.cpu().numpy()
    return np.asarray(a).astype(np.float64)


def dequantize_oracle(qweight, scales, mins=None, group_size: int = 32) -> np.ndarray:
    """The exact float64 weight ``[N, K]`` of packed codes, scales and (optional) minima."""
    qb = qweight.cpu().numpy() if isinstance(qweight, Tensor) else np.asarray(qweight)
    q = unpack_int4(qb, group_size).astype(np.float64)
    N, K = q.shape
    qg = q.reshape(N, K // group_size, group_size)
    s = _f64(scales)[..., None]
    w = qg * s + _f64(mins)[..., None] if mins is not None else (qg - 8.0) * s
    return w.reshape(N, K)


def int4_linear_oracle(input, qweight, scales, mins=None, bias=None, group_size: int = 32, activation=None,
                       residual=None, **_) -> np.ndarray:
    """``act(input @ W.T + bias) + residual`` in float64 with ``W`` from :func:`dequantize_oracle`."""
    y = _f64(input) @ dequantize_oracle(qweight, scales, mins, group_size).T
    y = y + _f64(bias) if bias is not None else y
    y = _np_activation(y, activation)
    return y + _f64(residual) if residual is not None else y


# ---------------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------------
@jit
def _f32(x, EXACT: tl.constexpr):
    # EXACT (the interpreter tier): the bit-exact conversions of triton_helpers (the interpreter's bfloat16
    # handling is not IEEE); on the GPU the native conversions are exact for these upcasts.
    if EXACT:
        r = convert(x, tl.float32)
    else:
        r = x.to(tl.float32)
    return r


@jit
def _nibbles(b, MAGIC, ACC: tl.constexpr, FAST_Q: tl.constexpr, DECODE_ASM: tl.constexpr):
    # The two codes of each byte as floats. FAST_Q: 1 + q/16, built by placing the nibble in the top mantissa
    # bits of 1.0 (two integer ops, no int-to-float conversion, which runs at a fraction of the FMA rate): the
    # caller takes 16 * (sum (1 + q/16) x - sum x) = sum q x (the products are exact to float32 rounding and the
    # two sums are of one magnitude, so nothing cancels catastrophically). DECODE_ASM does the same on four
    # packed bytes per instance in inline PTX (no byte extraction per code). Otherwise the codes themselves.
    if FAST_Q:
        if DECODE_ASM:
            # four packed bytes in $8 -> codes as 1 + q/16: $0..$3 the low nibbles of bytes 0..3, $4..$7 the
            # high nibbles, each moved to mantissa bits 19..22, then (t & 0x780000) | 1.0's bits in one lop3
            # ($9: MAGIC, 0x3F800000, in a register; lut 0xEA = (a & b) | c)
            lo, hi = tl.inline_asm_elementwise(
                "{ .reg .b32 t; "
                "shl.b32 t, $8, 19; lop3.b32 $0, t, 0x780000, $9, 0xEA; "
                "shl.b32 t, $8, 11; lop3.b32 $1, t, 0x780000, $9, 0xEA; "
                "shl.b32 t, $8, 3; lop3.b32 $2, t, 0x780000, $9, 0xEA; "
                "shr.u32 t, $8, 5; lop3.b32 $3, t, 0x780000, $9, 0xEA; "
                "shl.b32 t, $8, 15; lop3.b32 $4, t, 0x780000, $9, 0xEA; "
                "shl.b32 t, $8, 7; lop3.b32 $5, t, 0x780000, $9, 0xEA; "
                "shr.u32 t, $8, 1; lop3.b32 $6, t, 0x780000, $9, 0xEA; "
                "shr.u32 t, $8, 9; lop3.b32 $7, t, 0x780000, $9, 0xEA; }",
                "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r", [b, tl.full(b.shape, MAGIC, tl.int32)],
                dtype=(tl.int32, tl.int32), is_pure=True, pack=4)
        else:
            bi = b.to(tl.int32)
            lo = ((bi << 19) & 0x780000) | MAGIC
            hi = ((bi << 15) & 0x780000) | MAGIC
        flo = lo.to(tl.float32, bitcast=True)
        fhi = hi.to(tl.float32, bitcast=True)
    else:
        flo = (b & 15).to(ACC)
        fhi = (b >> 4).to(ACC)
    return flo, fhi


@jit(do_not_specialize=["Z"])
def _int4_gemv_kernel(X, W, S, MN, C, R, OUT, WS, LOCKS, M, N, NG, MNS, G_SPLIT, NSPLIT, MAGIC, Z,
                      sxm, sxk, swn, ssn, scn, srm, srn, som, son,
                      G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_B: tl.constexpr, HAS_MIN: tl.constexpr,
                      HAS_C: tl.constexpr, HAS_R: tl.constexpr, ACT: tl.constexpr, ACC: tl.constexpr,
                      FAST_Q: tl.constexpr, DECODE_ASM: tl.constexpr, EVEN: tl.constexpr, SPLIT: tl.constexpr,
                      EVICT_W: tl.constexpr, EXACT: tl.constexpr, PDL: tl.constexpr = False):
    # out[m, n] = sum_g (s[n,g] * sum_j q[n,g,j] x[m,g,j] + min[n,g] * sum_j x[m,g,j]) over this program's
    # groups [g_lo, g_hi). Each step reads a (BLOCK_N, BLOCK_B) tile of packed bytes (16-byte loads along the
    # row); byte j of a group holds codes j (low nibble) and j + G/2 (high nibble), so x splits into two
    # contiguous halves per group, loaded as tiles of the byte tile's shape (every row the same addresses: the
    # byte tile's layout, no shuffles through shared memory). The per-group sums are taken in registers
    # (a thread holds whole groups when G/2 <= 16 bytes), then scaled once per group.
    # Z (0) is not specialized, so the scale loads have no known alignment: they get one element per thread with
    # groups along the lanes, the layout of the per-group sums when a lane holds one group (BLOCK_B = 32 * G/2);
    # a vectorized scale load would have another layout and the sums would go through shared memory every step.
    # PDL: runtime/pdl.py (the wait before any memory access).
    pdl_enter(PDL)
    H: tl.constexpr = G // 2
    NGC: tl.constexpr = BLOCK_B // H
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    pid_n = pid // M
    m = pid % M
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    wn = tl.minimum(rn, N - 1).to(tl.int64)  # rows past N re-read row N-1 (valid memory); masked on store
    g_lo = pid_k * G_SPLIT
    g_hi = tl.minimum(g_lo + G_SPLIT, NG)
    rb = tl.arange(0, BLOCK_B)
    rg = tl.arange(0, NGC)
    xo = ((rb // H) * G + rb % H).to(tl.int64)  # x index of byte rb's low code, from the step's first group
    w_ptrs = W + wn[:, None] * swn + rb[None, :]
    x_ptrs = X + _wide(m) * sxm + tl.broadcast_to(xo[None, :], (BLOCK_N, BLOCK_B)) * sxk
    s_ptrs = S + wn[:, None] * ssn + (rg + Z)[None, :]
    m_ptrs = MN + wn[:, None] * ssn + (rg + Z)[None, :]
    acc = tl.zeros((BLOCK_N, NGC), dtype=ACC)
    for g0 in range(g_lo, g_hi, NGC):
        gw = _wide(g0)
        if EVEN:
            b = tl.load(w_ptrs + gw * H, eviction_policy=EVICT_W)
            xl = _cvt(tl.load(x_ptrs + gw * G * sxk, eviction_policy="evict_last"), ACC, EXACT)
            xh = _cvt(tl.load(x_ptrs + (gw * G + H) * sxk, eviction_policy="evict_last"), ACC, EXACT)
            s = _cvt(tl.load(s_ptrs + gw), ACC, EXACT)
            if HAS_MIN:
                mn = _cvt(tl.load(m_ptrs + gw), ACC, EXACT)
        else:
            bm = (g0 + rb // H < g_hi)[None, :]
            gm = (g0 + rg < g_hi)[None, :]
            b = tl.load(w_ptrs + gw * H, mask=bm, other=0, eviction_policy=EVICT_W)
            xl = _cvt(tl.load(x_ptrs + gw * G * sxk, mask=bm, other=0), ACC, EXACT)
            xh = _cvt(tl.load(x_ptrs + (gw * G + H) * sxk, mask=bm, other=0), ACC, EXACT)
            s = _cvt(tl.load(s_ptrs + gw, mask=gm, other=0), ACC, EXACT)
            if HAS_MIN:
                mn = _cvt(tl.load(m_ptrs + gw, mask=gm, other=0), ACC, EXACT)
        flo, fhi = _nibbles(b, MAGIC, ACC, FAST_Q, DECODE_ASM)
        dp = tl.sum(tl.reshape(flo * xl + fhi * xh, (BLOCK_N, NGC, H)), axis=2)
        xg = tl.sum(tl.reshape(xl + xh, (BLOCK_N, NGC, H)), axis=2)
        if FAST_Q:  # dp = sum (1 + q/16) x: sum q x = 16 (dp - xg)
            if HAS_MIN:
                acc += (16.0 * s) * dp + (mn - 16.0 * s) * xg
            else:  # s * (sum q x - 8 sum x)
                acc += (16.0 * s) * dp - (24.0 * s) * xg
        else:
            if HAS_MIN:
                acc += s * dp + mn * xg
            else:
                acc += s * (dp - 8.0 * xg)
    tot = tl.reshape(tl.sum(acc, axis=1), (1, BLOCK_N))
    rm = tl.arange(0, 1)
    mo = _wide(m)
    if SPLIT:
        _split_k_finish(tot, rm, rn, 1, N, MNS, WS + mo * N, LOCKS, pid, pid_k, NSPLIT, OUT + mo * som, som, son,
                        C, 0, scn, R + mo * srm, srm, srn, 1.0, 1.0, HAS_C, HAS_R, ACT, True, True, EXACT)
    else:
        _epilogue(tot, rm, rn, 1, N, OUT + mo * som, som, son, C, 0, scn, R + mo * srm, srm, srn, 1.0, 1.0, False,
                  HAS_C, HAS_R, ACT, True, True, EXACT)


@jit
def _word_codes(ha, hb, WASM: tl.constexpr):
    # The 8 codes of the int32 word v = ha | hb << 16 (two int16 halfwords of packed codes; bytes b0..b3,
    # little-endian) as floats, with 4 shifts and 8 lop3 per word: the low nibble of byte i (bits 8i..8i+3) is
    # moved to mantissa bits 15..18 of 16.0 (16 + q/16), the high nibble (bits 8i+4..8i+7) to bits 19..22 of 1.0
    # (1 + q/16); one shift serves both nibbles of a byte (v << 15, << 7, >> 1, >> 9), then (t & mask) | magic
    # in one lop3 each (lut 0xEA = (a & b) | c). Returns (lo0, hi0, lo1, hi1, lo2, hi2, lo3, hi3).
    # WASM: in inline PTX (the GPU; the halfwords joined by one mov); else the same bit operations in Triton
    # (the interpreter tier).
    if WASM:
        l0, h0, l1, h1, l2, h2, l3, h3 = tl.inline_asm_elementwise(
            "{ .reg .b32 v, t; mov.b32 v, {$8, $9}; "
            "shl.b32 t, v, 15; lop3.b32 $0, t, 0x78000, 0x41800000, 0xEA; lop3.b32 $1, t, 0x780000, 0x3F800000, 0xEA; "
            "shl.b32 t, v, 7; lop3.b32 $2, t, 0x78000, 0x41800000, 0xEA; lop3.b32 $3, t, 0x780000, 0x3F800000, 0xEA; "
            "shr.u32 t, v, 1; lop3.b32 $4, t, 0x78000, 0x41800000, 0xEA; lop3.b32 $5, t, 0x780000, 0x3F800000, 0xEA; "
            "shr.u32 t, v, 9; lop3.b32 $6, t, 0x78000, 0x41800000, 0xEA; lop3.b32 $7, t, 0x780000, 0x3F800000, 0xEA; }",
            "=r,=r,=r,=r,=r,=r,=r,=r,h,h", [ha, hb],
            dtype=(tl.int32, tl.int32, tl.int32, tl.int32, tl.int32, tl.int32, tl.int32, tl.int32), is_pure=True,
            pack=1)
    else:
        u = ((ha.to(tl.int32) & 65535) | (hb.to(tl.int32) << 16)).to(tl.uint32, bitcast=True)
        t0 = u << 15
        t1 = u << 7
        t2 = u >> 1
        t3 = u >> 9
        l0 = ((t0 & 0x78000) | 0x41800000).to(tl.int32, bitcast=True)
        h0 = ((t0 & 0x780000) | 0x3F800000).to(tl.int32, bitcast=True)
        l1 = ((t1 & 0x78000) | 0x41800000).to(tl.int32, bitcast=True)
        h1 = ((t1 & 0x780000) | 0x3F800000).to(tl.int32, bitcast=True)
        l2 = ((t2 & 0x78000) | 0x41800000).to(tl.int32, bitcast=True)
        h2 = ((t2 & 0x780000) | 0x3F800000).to(tl.int32, bitcast=True)
        l3 = ((t3 & 0x78000) | 0x41800000).to(tl.int32, bitcast=True)
        h3 = ((t3 & 0x780000) | 0x3F800000).to(tl.int32, bitcast=True)
    return (l0.to(tl.float32, bitcast=True), h0.to(tl.float32, bitcast=True), l1.to(tl.float32, bitcast=True),
            h1.to(tl.float32, bitcast=True), l2.to(tl.float32, bitcast=True), h2.to(tl.float32, bitcast=True),
            l3.to(tl.float32, bitcast=True), h3.to(tl.float32, bitcast=True))


@jit
def _halves(p, XBF16: tl.constexpr):
    # the two 16-bit floats of int32 word p (element 2i in the low half, 2i+1 in the high half) as float32:
    # bfloat16 by moving its bits to the top of a float32 (exact), float16 through the native conversion
    if XBF16:
        a = (p << 16).to(tl.float32, bitcast=True)
        b = (p & -65536).to(tl.float32, bitcast=True)
    else:
        a = (p & 65535).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
        b = (p >> 16).to(tl.int16).to(tl.float16, bitcast=True).to(tl.float32)
    return a, b


@jit
def _w_load(w_ptrs, x_ptrs, s_ptrs, m_ptrs, gw, cg, rg, g_hi, HAS_MIN: tl.constexpr, EVICT_W: tl.constexpr,
            EVEN: tl.constexpr):
    # the loads of one step of _w_tile at group gw: the two halfword tiles, the four x word tiles, the scales
    # and (HAS_MIN) the minima (else the scales again, unused). Not EVEN: groups from g_hi on (cg: the group of
    # each column within the step, rg: 0..NGC-1) read as 0 (x = 0 and s = m = 0: they add nothing)
    wp = w_ptrs + gw * 8
    xp = x_ptrs + gw * 16
    if EVEN:
        ha = tl.load(wp, eviction_policy=EVICT_W)
        hb = tl.load(wp + 4, eviction_policy=EVICT_W)
        pa = tl.load(xp, eviction_policy="evict_last")        # lo of bytes 2j, 2j+1
        pb = tl.load(xp + 4, eviction_policy="evict_last")    # lo of bytes 8+2j, 9+2j
        pc = tl.load(xp + 8, eviction_policy="evict_last")    # hi of bytes 2j, 2j+1
        pd = tl.load(xp + 12, eviction_policy="evict_last")   # hi of bytes 8+2j, 9+2j
        s = tl.load(s_ptrs + gw)
        if HAS_MIN:
            mn = tl.load(m_ptrs + gw)
        else:
            mn = s
    else:
        cm = (gw + cg < g_hi)[None, :]
        gm = (gw + rg < g_hi)[None, :]
        ha = tl.load(wp, mask=cm, other=0, eviction_policy=EVICT_W)
        hb = tl.load(wp + 4, mask=cm, other=0, eviction_policy=EVICT_W)
        pa = tl.load(xp, mask=cm, other=0, eviction_policy="evict_last")
        pb = tl.load(xp + 4, mask=cm, other=0, eviction_policy="evict_last")
        pc = tl.load(xp + 8, mask=cm, other=0, eviction_policy="evict_last")
        pd = tl.load(xp + 12, mask=cm, other=0, eviction_policy="evict_last")
        s = tl.load(s_ptrs + gw, mask=gm, other=0)
        if HAS_MIN:
            mn = tl.load(m_ptrs + gw, mask=gm, other=0)
        else:
            mn = s
    return ha, hb, pa, pb, pc, pd, s, mn


@jit
def _w_step(acc, ha, hb, pa, pb, pc, pd, s, mn, BLOCK_N: tl.constexpr, NGC: tl.constexpr, HAS_MIN: tl.constexpr,
            WASM: tl.constexpr, XBF16: tl.constexpr, EXACT: tl.constexpr):
    # acc (BLOCK_N, NGC) += one step's per-group products (the loads of _w_load)
    xa0, xa1 = _halves(pa, XBF16)
    xb0, xb1 = _halves(pb, XBF16)
    xc0, xc1 = _halves(pc, XBF16)
    xd0, xd1 = _halves(pd, XBF16)
    sf = _cvt(s, tl.float32, EXACT)
    l0, h0, l1, h1, l2, h2, l3, h3 = _word_codes(ha, hb, WASM)
    xlw = xa0 + xa1 + xb0 + xb1
    xhw = xc0 + xc1 + xd0 + xd1
    nx16 = -(16.0 * xlw + xhw)  # x alone: once for all rows; the FFMA chain starts from it
    d = nx16 + l0 * xa0 + h0 * xc0 + l1 * xa1 + h1 * xc1 + l2 * xb0 + h2 * xd0 + l3 * xb1 + h3 * xd1
    dg = tl.sum(tl.reshape(d, (BLOCK_N, NGC, 4)), axis=2)  # sum q x / 16
    # sum x of each group, in the layout of dg (from the x tile broadcast to the row tile's shape first: the
    # (1, NGC) sums of a (1, BC) x tile would take a layout conversion through shared memory every step)
    xsg = tl.sum(tl.reshape(tl.broadcast_to(xlw + xhw, (BLOCK_N, NGC * 4)), (BLOCK_N, NGC, 4)), axis=2)
    if HAS_MIN:
        acc += (16.0 * sf) * dg + _cvt(mn, tl.float32, EXACT) * xsg
    else:
        acc += sf * (16.0 * dg - 8.0 * xsg)
    return acc


@jit
def _w_tile(X32, W16, S, MN, pid_n, m, g_lo, g_hi, N, NG, Z, sxm, swn, ssn, BLOCK_N: tl.constexpr,
            NGC: tl.constexpr, HAS_MIN: tl.constexpr, WASM: tl.constexpr, XBF16: tl.constexpr, EVICT_W: tl.constexpr,
            PREFETCH: tl.constexpr, STAGES: tl.constexpr, EVEN: tl.constexpr, EXACT: tl.constexpr):
    # sum over groups [g_lo, g_hi) of one row tile of _int4_gemv_w_kernel, as a (1, BLOCK_N) float32 row.
    # PREFETCH: the loads of the next step are issued before this step's decode and FFMAs (software pipelining,
    # two steps of loads in flight per thread; EVEN: the last step re-loads itself, from L1; else the loads past
    # g_hi are masked off). Not EVEN: the last step of the range has fewer than NGC groups (masked loads)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    wn = tl.minimum(rn, N - 1).to(tl.int64)  # rows past N re-read row N-1 (valid memory); masked on store
    BC: tl.constexpr = NGC * 4        # columns per step
    rc = tl.arange(0, BC)
    rg = tl.arange(0, NGC)
    cg = rc // 4                                 # the column's group within the step
    ho = ((rc // 4) * 8 + rc % 4).to(tl.int64)   # halfword j of the column's group
    w_ptrs = W16 + wn[:, None] * (swn // 2) + ho[None, :]
    xo = ((rc // 4) * 16 + rc % 4).to(tl.int64)  # x word j of the group (pairs of 16-bit values)
    if STAGES > 1:
        # x as a (1, BC) tile, staged once per step by the pipeliner (the broadcast tile would be staged once per
        # row of the thread: 4x the shared memory and L2 traffic at BLOCK_N 4); without the pipeliner the
        # broadcast tile keeps every load in the weight tile's layout (sm_90: fewer registers and instructions)
        x_ptrs = X32 + _wide(m) * (sxm // 2) + tl.broadcast_to(xo[None, :], (1, BC))
    else:
        x_ptrs = X32 + _wide(m) * (sxm // 2) + tl.broadcast_to(xo[None, :], (BLOCK_N, BC))
    s_ptrs = S + wn[:, None] * ssn + (rg + Z)[None, :]
    m_ptrs = MN + wn[:, None] * ssn + (rg + Z)[None, :]
    acc = tl.zeros((BLOCK_N, NGC), dtype=tl.float32)
    if PREFETCH:
        g_first = tl.minimum(g_lo, NG - NGC) if EVEN else g_lo
        ha, hb, pa, pb, pc, pd, s, mn = _w_load(w_ptrs, x_ptrs, s_ptrs, m_ptrs, _wide(g_first), cg, rg, g_hi, HAS_MIN,
                                                EVICT_W, EVEN)
        for g0 in range(g_lo, g_hi, NGC):
            if EVEN:
                gn = _wide(tl.maximum(tl.minimum(g0 + NGC, g_hi - NGC), 0))
            else:
                gn = _wide(g0 + NGC)
            nha, nhb, npa, npb, npc, npd, ns, nmn = _w_load(w_ptrs, x_ptrs, s_ptrs, m_ptrs, gn, cg, rg, g_hi, HAS_MIN,
                                                            EVICT_W, EVEN)
            acc = _w_step(acc, ha, hb, pa, pb, pc, pd, s, mn, BLOCK_N, NGC, HAS_MIN, WASM, XBF16, EXACT)
            ha, hb, pa, pb, pc, pd, s, mn = nha, nhb, npa, npb, npc, npd, ns, nmn
    elif STAGES > 1:  # Triton's software pipeliner: the loop's loads as async copies STAGES - 1 steps ahead
        for g0 in tl.range(g_lo, g_hi, NGC, num_stages=STAGES):
            ha, hb, pa, pb, pc, pd, s, mn = _w_load(w_ptrs, x_ptrs, s_ptrs, m_ptrs, _wide(g0), cg, rg, g_hi, HAS_MIN,
                                                    EVICT_W, EVEN)
            acc = _w_step(acc, ha, hb, pa, pb, pc, pd, s, mn, BLOCK_N, NGC, HAS_MIN, WASM, XBF16, EXACT)
    else:
        for g0 in range(g_lo, g_hi, NGC):
            ha, hb, pa, pb, pc, pd, s, mn = _w_load(w_ptrs, x_ptrs, s_ptrs, m_ptrs, _wide(g0), cg, rg, g_hi, HAS_MIN,
                                                    EVICT_W, EVEN)
            acc = _w_step(acc, ha, hb, pa, pb, pc, pd, s, mn, BLOCK_N, NGC, HAS_MIN, WASM, XBF16, EXACT)
    return tl.reshape(tl.sum(acc, axis=1), (1, BLOCK_N))


@jit(do_not_specialize=["Z"])
def _int4_gemv_w_kernel(X, W, S, MN, C, R, OUT, WS, LOCKS, M, N, NG, MNS, G_SPLIT, NSPLIT, Z,
                        sxm, swn, ssn, scn, srm, srn, som, son,
                        G: tl.constexpr, BLOCK_N: tl.constexpr, NGC: tl.constexpr, HAS_MIN: tl.constexpr,
                        HAS_C: tl.constexpr, HAS_R: tl.constexpr, ACT: tl.constexpr, WASM: tl.constexpr,
                        XBF16: tl.constexpr, SPLIT: tl.constexpr, PERSIST: tl.constexpr, EVICT_W: tl.constexpr,
                        PREFETCH: tl.constexpr, STAGES: tl.constexpr, EVEN: tl.constexpr, EXACT: tl.constexpr,
                        PDL: tl.constexpr = False):
    # The word-decode variant of _int4_gemv_kernel (group 32, 16-bit activations with unit stride; EVEN: whole
    # steps, else the last step of a range masked). PDL: runtime/pdl.py.
    # Column j (0..3) of a group takes the group's 16-bit halfwords j and 4 + j (bytes 2j, 2j+1, 8+2j, 9+2j),
    # joined into one int32 word v; its 8 codes are decoded with 12 integer instructions (_word_codes: low
    # nibbles as 16 + q/16, high nibbles as 1 + q/16) and multiplied by x in one FFMA chain:
    #     d = sum_lo (16 + q/16) x + sum_hi (1 + q/16) x = X16 + (sum q x) / 16,  X16 = 16 sum_lo x + sum_hi x
    # so sum_j q_j x_j = 16 (d - X16) per group (X16 and sum x from x alone, once for all rows). The x of column
    # j is four int32 words (pairs of 16-bit values) at j, 4 + j, 8 + j, 12 + j of the group's 16: elements
    # 2j.., 8+2j.. (low nibbles of bytes 2j, 2j+1, 8+2j, 9+2j) and 16+2j.., 24+2j.. (their high nibbles). The
    # pointers of every load of the loop (halfwords, x words) are contiguous over a group's 4 columns, so they
    # all take one layout (4 columns = one group per thread; the group sums stay in the thread) and nothing
    # goes through shared memory. PERSIST (no split-K): fewer programs than (row tile, x row) pairs, each
    # looping over pairs pid, pid + P, ...
    pdl_enter(PDL)
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    W16 = W.to(tl.pointer_type(tl.int16), bitcast=True)
    X32 = X.to(tl.pointer_type(tl.int32), bitcast=True)
    rm = tl.arange(0, 1)
    if PERSIST:
        for p in range(pid, tl.cdiv(N, BLOCK_N) * M, tl.num_programs(0)):
            tot = _w_tile(X32, W16, S, MN, p // M, p % M, 0, NG, N, NG, Z, sxm, swn, ssn, BLOCK_N, NGC, HAS_MIN,
                          WASM, XBF16, EVICT_W, PREFETCH, STAGES, EVEN, EXACT)
            mo = _wide(p % M)
            _epilogue(tot, rm, (p // M) * BLOCK_N + tl.arange(0, BLOCK_N), 1, N, OUT + mo * som, som, son, C, 0,
                      scn, R + mo * srm, srm, srn, 1.0, 1.0, False, HAS_C, HAS_R, ACT, True, True, EXACT)
    else:
        pid_n = pid // M
        m = pid % M
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        g_lo = pid_k * G_SPLIT
        g_hi = tl.minimum(g_lo + G_SPLIT, NG)
        tot = _w_tile(X32, W16, S, MN, pid_n, m, g_lo, g_hi, N, NG, Z, sxm, swn, ssn, BLOCK_N, NGC, HAS_MIN, WASM,
                      XBF16, EVICT_W, PREFETCH, STAGES, EVEN, EXACT)
        mo = _wide(m)
        if SPLIT:
            _split_k_finish(tot, rm, rn, 1, N, MNS, WS + mo * N, LOCKS, pid, pid_k, NSPLIT, OUT + mo * som, som,
                            son, C, 0, scn, R + mo * srm, srm, srn, 1.0, 1.0, HAS_C, HAS_R, ACT, True, True, EXACT)
        else:
            _epilogue(tot, rm, rn, 1, N, OUT + mo * som, som, son, C, 0, scn, R + mo * srm, srm, srn, 1.0, 1.0,
                      False, HAS_C, HAS_R, ACT, True, True, EXACT)


@jit
def _int4_dequant_kernel(W, S, MN, OUT, N, NG, swn, ssn, son, sok,
                         G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_G: tl.constexpr, HAS_MIN: tl.constexpr,
                         OUT_DT: tl.constexpr, EXACT: tl.constexpr):
    H: tl.constexpr = G // 2
    rn = (tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)).to(tl.int64)
    gi = (tl.program_id(1) * BLOCK_G + tl.arange(0, BLOCK_G)).to(tl.int64)
    j = tl.arange(0, H).to(tl.int64)
    ok2 = (rn < N)[:, None] & (gi < NG)[None, :]
    ok3 = ok2[:, :, None]
    b = tl.load(W + rn[:, None, None] * swn + gi[None, :, None] * H + j[None, None, :], mask=ok3, other=0)
    soff = rn[:, None] * ssn + gi[None, :]
    s = _f32(tl.load(S + soff, mask=ok2, other=0), EXACT)[:, :, None]
    lo = (b & 15).to(tl.float32)
    hi = (b >> 4).to(tl.float32)
    if HAS_MIN:
        mn = _f32(tl.load(MN + soff, mask=ok2, other=0), EXACT)[:, :, None]
        wlo = lo * s + mn
        whi = hi * s + mn
    else:
        wlo = (lo - 8.0) * s
        whi = (hi - 8.0) * s
    o = OUT + rn[:, None, None] * son + (gi[None, :, None] * G + j[None, None, :]) * sok
    tl.store(o, _cvt(wlo, OUT_DT, EXACT), mask=ok3)
    tl.store(o + H * sok, _cvt(whi, OUT_DT, EXACT), mask=ok3)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _blocks_g(cfg: dict, group_size: int) -> int:
    return max(1, cfg["BLOCK_K"] // group_size)


def launch_int4_gemv(x: Tensor, qweight: Tensor, scales: Tensor, mins: Tensor | None, bias: Tensor | None,
                     out: Tensor, group_size: int, activation=None, residual: Tensor | None = None) -> None:
    """``out [M, N] = act(x [M, K] @ W.T + bias) + residual`` with the GEMV kernel (checked arguments).

    Settings from the ``int4_gemv`` table (shape facts ``rows`` = N, ``group`` = G, ``cols`` = K): ``BLOCK_N`` (rows per
    program), ``BLOCK_K`` (codes per row per step: a multiple of G; ``BLOCK_K / 2`` bytes), ``FAST_Q`` (16-bit
    activations: decode codes as ``1 + q/16`` floats, see ``_nibbles``; default on), ``DECODE_ASM`` (that decode in
    inline PTX; GPU only), ``WORD_DECODE`` (group 32, 16-bit x with unit stride: the word-decode
    kernel ``_int4_gemv_w_kernel``; default off) with ``WORD_ASM`` (its decode in inline PTX on the GPU; default
    on), ``PERSIST`` (without split-K: at most this many programs per SM, each looping over row tiles; 0, the
    default, one program per tile), ``LOOP_STAGES`` (> 1: Triton's software pipeliner issues the packed-weight
    and x loads as async copies that many steps minus one ahead; default 1), ``PREFETCH`` (the next step's loads
    issued before this step's decode in the source; default off) and ``maxnreg`` (a register cap), ``EVICT_W``, ``programs_per_sm``/``target_programs`` and ``MIN_K_SPLIT``
    (split-K over groups, as the bf16 GEMV: :func:`nbxtensor.ops.matmul.split_k`), ``num_warps``, ``num_stages``. Programs
    take one row of ``x`` each (``M`` on grid axis 0, next to the programs that read the same weight rows).
    """
    M, K = x.shape
    N = qweight.shape[0]
    dev = x.device
    G = group_size
    NG = K // G
    cfg = launch_config("int4_gemv", dev, dtypes=(x.dtype,), rows=N, group=G, cols=K)
    if tc_eligible(x, cfg):   # the tensor-core kernel (quant/int4_tc.py)
        launch_int4_gemv_tc(x, qweight, scales, mins, bias, out, G, cfg, activation, residual)
        return
    bn = cfg["BLOCK_N"]
    ngc = max(1, cfg["BLOCK_K"] // G)  # groups per step
    check(ngc & (ngc - 1) == 0, lambda: f"int4_gemv config: BLOCK_K / group_size must be a power of two, got "
          f"{cfg['BLOCK_K']} / {G}", ValueError)
    n_tiles = _cdiv(N, bn)
    split, g_split = split_k(NG, n_tiles * M, {**cfg, "MIN_K_SPLIT": max(1, cfg.get("MIN_K_SPLIT", G) // G)}, dev,
                             step=ngc, grain=ngc)
    use_split = split > 1
    even = NG % ngc == 0 and (not use_split or g_split % ngc == 0)
    exact = interpreting()
    fast_q = bool(cfg.get("FAST_Q", True)) and x.dtype.itemsize == 2
    pdl = pdl_settings(cfg, dev)
    ws = new_empty((split * M * N,), T.float64 if x.dtype is T.float64 else T.float32, dev) if use_split else out
    locks = _locks(dev, n_tiles * M) if use_split else out
    c = bias if bias is not None else out
    r = residual if residual is not None else out
    if (fast_q and G == 32 and cfg.get("WORD_DECODE", False) and qweight.stride(0) % 4 == 0
            and qweight.storage_offset() % 4 == 0 and x.stride(1) == 1 and x.stride(0) % 2 == 0
            and x.storage_offset() % 2 == 0):
        # the word-decode kernel (_int4_gemv_w_kernel): 16-bit activations, 4-byte aligned rows (a last step of
        # fewer groups masked)
        per_sm = int(cfg.get("PERSIST", 0)) if not use_split else 0
        grid0 = n_tiles * M
        if per_sm > 0:  # persistent programs, at most per_sm per SM, each looping over (row tile, x row) pairs
            from ..ops.matmul import _sm_count
            grid0 = min(grid0, per_sm * _sm_count(-1 if dev.type == "cpu" else dev.index or 0))
            per_sm = per_sm if grid0 < n_tiles * M else 0
        _launch(_int4_gemv_w_kernel, (grid0, split),
                (x, qweight, scales, mins if mins is not None else scales, c, r, out, ws, locks, M, N, NG, M * N,
                 g_split, split, 0, x.stride(0), qweight.stride(0), scales.stride(0), c.stride(-1),
                 r.stride(0), r.stride(1), out.stride(0), out.stride(1)),
                dict(G=G, BLOCK_N=bn, NGC=ngc, HAS_MIN=mins is not None, HAS_C=bias is not None,
                     HAS_R=residual is not None, ACT=_ACT_CODE[activation], WASM=not exact and bool(cfg.get("WORD_ASM", True)),
                     XBF16=x.dtype is T.bfloat16, SPLIT=use_split, PERSIST=per_sm > 0,
                     EVICT_W=str(cfg.get("EVICT_W", "")), PREFETCH=bool(cfg.get("PREFETCH", False)),
                     STAGES=int(cfg.get("LOOP_STAGES", 1)), EVEN=even, EXACT=exact, **pdl,
                     num_warps=cfg.get("num_warps", 4), num_stages=cfg.get("num_stages", 2),
                     **({"maxnreg": int(cfg["maxnreg"])} if cfg.get("maxnreg") else {})),
                ws=ws if use_split else None, locks=(locks, n_tiles * M) if use_split else None)
        return
    _launch(_int4_gemv_kernel, (n_tiles * M, split),
            (x, qweight, scales, mins if mins is not None else scales, c, r, out, ws, locks, M, N, NG, M * N, g_split,
             split, 0x3F800000, 0, x.stride(0), x.stride(1), qweight.stride(0), scales.stride(0), c.stride(-1),
             r.stride(0), r.stride(1), out.stride(0), out.stride(1)),
            dict(G=G, BLOCK_N=bn, BLOCK_B=ngc * G // 2, HAS_MIN=mins is not None, HAS_C=bias is not None,
                 HAS_R=residual is not None, ACT=_ACT_CODE[activation],
                 ACC=tl.float64 if x.dtype is T.float64 else tl.float32, FAST_Q=fast_q,
                 DECODE_ASM=fast_q and not exact and bool(cfg.get("DECODE_ASM", False)), EVEN=even, SPLIT=use_split,
                 EVICT_W=str(cfg.get("EVICT_W", "")), EXACT=exact, **pdl, num_warps=cfg.get("num_warps", 4),
                 num_stages=cfg.get("num_stages", 2)),
            ws=ws if use_split else None, locks=(locks, n_tiles * M) if use_split else None)


def launch_int4_dequant(qweight: Tensor, scales: Tensor, mins: Tensor | None, out: Tensor, group_size: int) -> None:
    """``out [N, K]`` = the weight in ``out``'s dtype (checked arguments)."""
    N, K = out.shape
    cfg = launch_config("int4_dequant", out.device, dtypes=(out.dtype,), rows=N)
    bn, bg = cfg["BLOCK_N"], _blocks_g(cfg, group_size)
    NG = K // group_size
    _launch(_int4_dequant_kernel, (_cdiv(N, bn), _cdiv(NG, bg)),
            (qweight, scales, mins if mins is not None else scales, out, N, NG, qweight.stride(0), scales.stride(0),
             out.stride(0), out.stride(1)),
            dict(G=group_size, BLOCK_N=bn, BLOCK_G=bg, HAS_MIN=mins is not None, OUT_DT=TL_DTYPES[out.dtype.name],
                 EXACT=interpreting(), num_warps=cfg.get("num_warps", 4)))


# ---------------------------------------------------------------------------------------------------------
# CPU implementations
# ---------------------------------------------------------------------------------------------------------
def _dequant_np(qweight: Tensor, scales: Tensor, mins: Tensor | None, group_size: int, acc) -> np.ndarray:
    q = unpack_int4(host_view(qweight), group_size)
    N, K = q.shape
    qg = q.reshape(N, K // group_size, group_size).astype(acc)
    s = host_view(scales).astype(acc)[..., None]
    w = qg * s + host_view(mins).astype(acc)[..., None] if mins is not None else (qg - acc(8)) * s
    return w.reshape(N, K)


def _to(a: np.ndarray, dt) -> np.ndarray:
    src = T.float64 if a.dtype == np.float64 else T.float32
    return cast_array(a, src, dt)


def _acc_np(dt) -> type:
    return np.float64 if dt is T.float64 else np.float32


def _dequant_cpu(qweight: Tensor, scales: Tensor, mins: Tensor | None, out: Tensor, group_size: int) -> None:
    w = _dequant_np(qweight, scales, mins, group_size, _acc_np(out.dtype))
    host_view(out)[...] = _to(w, out.dtype)


def _dequant_triton(qweight, scales, mins, out, group_size) -> None:
    launch_int4_dequant(qweight, scales, mins, out, group_size)


def _linear_cpu(x: Tensor, qweight: Tensor, scales: Tensor, mins, bias, out: Tensor, group_size: int,
                activation=None, residual=None) -> None:
    acc = _acc_np(x.dtype)
    w = _dequant_np(qweight, scales, mins, group_size, acc)
    y = host_view(x).astype(acc) @ w.T
    if bias is not None:
        y = y + host_view(bias).astype(acc)
    y = _np_activation(np.asarray(y, dtype=acc), activation)
    if residual is not None:
        y = y + host_view(residual).astype(acc)
    host_view(out)[...] = _to(np.asarray(y, dtype=acc), out.dtype)


def _linear_triton(x: Tensor, qweight: Tensor, scales: Tensor, mins, bias, out: Tensor, group_size: int,
                   activation=None, residual=None) -> None:
    cfg = launch_config("int4_gemv", x.device, dtypes=(x.dtype,), rows=qweight.shape[0], group=group_size,
                        cols=x.shape[1])
    if x.shape[0] <= cfg["MAX_M"]:
        launch_int4_gemv(x, qweight, scales, mins, bias, out, group_size, activation, residual)
        return
    from ..ops.matmul import linear  # dequantize-then-GEMM (prefill)
    w = new_empty((qweight.shape[0], x.shape[1]), x.dtype, x.device)
    launch_int4_dequant(qweight, scales, mins, w, group_size)
    linear(x, w, bias, activation=activation, residual=residual, out=out)


# ---------------------------------------------------------------------------------------------------------
# Checked entry points
# ---------------------------------------------------------------------------------------------------------
def _check_packed(fn: str, qweight: Tensor, scales: Tensor, mins: Tensor | None, group_size: int) -> tuple[int, int]:
    check(isinstance(qweight, Tensor) and qweight.dtype is T.uint8 and qweight.ndim == 2, lambda: f"{fn}: qweight "
          f"must be a 2-D uint8 tensor [N, K/2], got {getattr(qweight, 'dtype', type(qweight).__name__)} "
          f"{list(getattr(qweight, 'shape', []))}")
    N, K = qweight.shape[0], 2 * qweight.shape[1]
    _check_group(fn, K, group_size)
    check(qweight.stride(1) == 1, lambda: f"{fn}: qweight rows must be contiguous (stride 1), got strides "
          f"{qweight.stride()}")
    for name, t in (("scales", scales), ("mins", mins)):
        if t is None:
            continue
        check(isinstance(t, Tensor) and t.dtype in SCALE_DTYPES, lambda: f"{fn}: {name} must be a float16, bfloat16 "
              f"or float32 tensor, got {getattr(t, 'dtype', type(t).__name__)}")
        check(tuple(t.shape) == (N, K // group_size), lambda: f"{fn}: {name} must have shape "
              f"{[N, K // group_size]} (N, K / group_size), got {list(t.shape)}")
        check(t.stride(1) == 1, lambda: f"{fn}: {name} rows must be contiguous, got strides {t.stride()}")
        check(t.device == qweight.device, lambda: f"{fn}: {name} is on {t.device} but qweight on {qweight.device}")
    check(mins is None or mins.dtype is scales.dtype, lambda: f"{fn}: mins must have the dtype of scales "
          f"({scales.dtype.name}), got {mins.dtype.name}")
    return N, K


def int4_dequantize(qweight: Tensor, scales: Tensor, mins: Tensor | None = None, *, group_size: int = 32,
                    dtype=T.float32) -> Tensor:
    """The float weight ``[N, K]`` of packed int4 codes (``int4_dequantize`` op).

    Args:
        qweight: uint8 ``[N, K/2]``; scales, mins: ``[N, K/G]`` (mins ``None`` for symmetric).
        group_size: G (32, 64, 128). dtype: float16, bfloat16, float32 or float64.

    Returns:
        A new contiguous tensor on ``qweight``'s device.

    Raises:
        RuntimeError: wrong dtypes, shapes, layouts or devices. ValueError: a bad group size.
    """
    N, K = _check_packed("int4_dequantize", qweight, scales, mins, group_size)
    dt = T.dtype_from(dtype)
    check(dt in ACT_DTYPES, lambda: f"int4_dequantize: dtype must be a float dtype, got {dt.name}")
    out = new_empty((N, K), dt, qweight.device)
    if N and K:
        registry.impl("int4_dequantize", qweight.device.type)(qweight, scales, mins, out, group_size)
    return out


def int4_linear(input: Tensor, qweight: Tensor, scales: Tensor, mins: Tensor | None = None, bias: Tensor | None = None,
                *, group_size: int = 32, activation: str | None = None, residual: Tensor | None = None,
                out: Tensor | None = None) -> Tensor:
    """``act(input @ W.T + bias) + residual`` with ``W`` grouped int4 (``int4_linear`` op; the format in the module
    docstring; the activation and residual as :func:`nbxtensor.ops.matmul.linear`'s epilogue).

    Args:
        input: ``(*, K)`` float16, bfloat16, float32 or float64.
        qweight: uint8 ``[N, K/2]``. scales, mins: ``[N, K/G]`` (``mins=None``: symmetric).
        bias: ``None`` or ``(N,)`` of the input's dtype.
        group_size: G. activation: ``None``, ``"relu"``, ``"gelu"``, ``"gelu_tanh"``, ``"silu"`` or
            ``"silu_first_half"`` (silu on output columns ``[0, N/2)``: a fused gate/up weight; N even).
        residual: ``None`` or ``(*, N)`` of the input's dtype, added last; it may be ``out`` itself.
        out: optional contiguous ``(*, N)`` output of the input's dtype.

    Returns:
        ``(*, N)`` of the input's dtype; float32 accumulation (float64 for float64), one rounding.
        On CUDA (and the interpreter tier): the GEMV kernel for at most ``MAX_M`` rows (the ``int4_gemv``
        config), else dequantize-then-GEMM.

    Raises:
        RuntimeError: shapes, dtypes, devices that do not fit. ValueError: a bad group size.
    """
    # a launch plan of this signature (nbxtensor.ops.matmul, "Launch plans")
    try:
        d = input._storage.device
        key = (_tensor_sig(input), _tensor_sig(qweight), _tensor_sig(scales), _tensor_sig(mins), _tensor_sig(bias),
               _tensor_sig(residual), group_size, activation, _tensor_sig(out), _configs.state())
        plan = _INT4_PLANS.get(key)
    except (AttributeError, TypeError):  # not tensors, unhashable options: the checks below say so
        plan = _NO_PLAN
    if plan is None:
        if d.type == "cuda" or INTERPRET:
            ts = (input, qweight, scales, mins, bias, residual)
            return record_plan(_INT4_PLANS, key, lambda: _int4_linear(
                input, qweight, scales, mins, bias, group_size=group_size, activation=activation, residual=residual,
                out=out), ts if out is None else ts + (out,), out_given=out is not None and apart(out, *ts))
    elif plan is not _NO_PLAN:
        if out is None:
            return plan(input, qweight, scales, mins, bias, residual)
        if apart(out, input, qweight, scales, mins, bias, residual):
            return plan(input, qweight, scales, mins, bias, residual, out)
    return _int4_linear(input, qweight, scales, mins, bias, group_size=group_size, activation=activation,
                        residual=residual, out=out)


def _int4_linear(input: Tensor, qweight: Tensor, scales: Tensor, mins: Tensor | None = None,
                 bias: Tensor | None = None, *, group_size: int = 32, activation: str | None = None,
                 residual: Tensor | None = None, out: Tensor | None = None) -> Tensor:
    """The general path of :func:`int4_linear` (checks, views, one launch for few rows)."""
    N, K = _check_packed("int4_linear", qweight, scales, mins, group_size)
    check(isinstance(input, Tensor) and input.dtype in ACT_DTYPES, lambda: f"int4_linear: input must be a float16, "
          f"bfloat16, float32 or float64 tensor, got {getattr(input, 'dtype', type(input).__name__)}")
    check(input.ndim >= 1 and input.shape[-1] == K, lambda: f"int4_linear: input's last dim must be K={K}, got shape "
          f"{list(input.shape)}")
    check(input.device == qweight.device, lambda: f"int4_linear: input is on {input.device} but qweight on "
          f"{qweight.device}")
    if bias is not None:
        check(bias.dtype is input.dtype and tuple(bias.shape) == (N,) and bias.device == input.device,
              lambda: f"int4_linear: bias must be ({N},) {input.dtype.name} on {input.device}, got "
              f"{list(bias.shape)} {bias.dtype.name} on {bias.device}")
        bias = bias.contiguous()
    check(activation in ACTIVATIONS, lambda: f"int4_linear: unknown activation {activation!r}; expected one of "
          f"{ACTIVATIONS}", ValueError)
    check(activation != "silu_first_half" or N % 2 == 0, lambda: f"int4_linear: activation 'silu_first_half' needs "
          f"an even number of rows N, got N={N}", ValueError)
    lead = tuple(input.shape[:-1])
    rows = int(np.prod(lead)) if lead else 1
    x = input.reshape(rows, K)
    if out is None:
        o = new_empty((rows, N), input.dtype, input.device)
    else:
        check(tuple(out.shape) == lead + (N,) and out.dtype is input.dtype and out.is_contiguous(),
              lambda: f"int4_linear: out must be a contiguous {list(lead + (N,))} {input.dtype.name} tensor, got "
              f"{list(out.shape)} {out.dtype.name}")
        o = out.view(rows, N)
    r = None
    if residual is not None:
        check(isinstance(residual, Tensor) and tuple(residual.shape) == lead + (N,) and residual.dtype is input.dtype
              and residual.device == input.device, lambda: f"int4_linear: residual must be {list(lead + (N,))} "
              f"{input.dtype.name} on {input.device}, got {list(getattr(residual, 'shape', []))}")
        r = residual.reshape(rows, N)
    if rows and N:
        registry.impl("int4_linear", input.device.type)(x, qweight, scales, mins, bias, o, group_size, activation, r)
    return o.view(*lead, N) if out is None else out


_INT4_PLANS: dict = {}
_PLAN_CACHES.append(_INT4_PLANS)


def _cost(input, qweight, scales, mins=None, bias=None, group_size=32, **_) -> Cost:
    N, K = qweight.shape[0], 2 * qweight.shape[1]
    rows = input.numel() // max(K, 1)
    nb = lambda t: 0 if t is None else t.numel() * t.dtype.itemsize  # noqa: E731
    return Cost(flops=2 * rows * N * K, bytes_read=nb(input) + nb(qweight) + nb(scales) + nb(mins) + nb(bias),
                bytes_written=rows * N * input.dtype.itemsize)


def _dequant_cost(qweight, scales, mins=None, group_size=32, dtype=T.float32, **_) -> Cost:
    N, K = qweight.shape[0], 2 * qweight.shape[1]
    nb = lambda t: 0 if t is None else t.numel() * t.dtype.itemsize  # noqa: E731
    return Cost(flops=2 * N * K, bytes_read=nb(qweight) + nb(scales) + nb(mins),
                bytes_written=N * K * T.dtype_from(dtype).itemsize)


register(OpRecord(name="int4_linear", family="quant", cpu=_linear_cpu, triton=_linear_triton, cost=_cost,
                  oracle=int4_linear_oracle, extra={"function": int4_linear, "kernel": "int4_gemv"}))
register(OpRecord(name="int4_dequantize", family="quant", cpu=_dequant_cpu, triton=_dequant_triton,
                  cost=_dequant_cost,
                  oracle=lambda qweight, scales, mins=None, group_size=32, **_: dequantize_oracle(
                      qweight, scales, mins, group_size),
                  extra={"function": int4_dequantize, "kernel": "int4_dequant"}))


# ---------------------------------------------------------------------------------------------------------
# The quantized linear handle
# ---------------------------------------------------------------------------------------------------------
class QuantLinear:
    """A linear layer ``y = x @ W.T + b`` whose weight is grouped int4 (packed on its device).

    Build with :meth:`quantize` (from a float weight) or :meth:`from_packed` (codes, scales and minima you
    have, e.g. GGUF Q4_0/Q4_1 blocks through :mod:`nbxtensor.io.gguf`). Call it like a function.

    Attributes:
        qweight, scales, mins, bias: the tensors (``mins`` ``None`` when symmetric).
        group_size: G. shape: ``(N, K)``. nbytes: bytes of the packed weight, scales, minima and bias.

    Example:
        >>> import numpy as np, nbxtensor as nbx
        >>> from nbxtensor.quant import QuantLinear
        >>> lin = QuantLinear.quantize(np.random.default_rng(0).standard_normal((64, 128)), group_size=32)
        >>> lin(nbx.ones(2, 128)).shape
        nbx.Size([2, 64])
    """

    def __init__(self, qweight: Tensor, scales: Tensor, mins: Tensor | None = None, bias: Tensor | None = None, *,
                 group_size: int = 32, cache: bool = True):
        self.N, self.K = _check_packed("QuantLinear", qweight, scales, mins, group_size)
        self.qweight, self.scales, self.mins, self.bias = qweight, scales, mins, bias
        self.group_size = int(group_size)
        self.cache = bool(cache)
        self._cpu_weight: dict = {}

    @classmethod
    def from_packed(cls, qweight, scales, mins=None, bias=None, *, group_size: int = 32, device="cpu",
                    cache: bool = True) -> "QuantLinear":
        """From NumPy arrays (or tensors): uint8 codes ``[N, K/2]`` and ``[N, K/G]`` scales (and minima)."""
        from ..device import device as _device
        dev = _device(device)

        def up(a, dt=None):
            if a is None or isinstance(a, Tensor):
                return None if a is None else a.to(dev)
            a = np.ascontiguousarray(a)
            d = T.dtype_from(dt or a.dtype.name)
            return from_host_array(a, d, dev)
        return cls(up(qweight, "uint8"), up(scales), up(mins), up(bias), group_size=group_size, cache=cache)

    @classmethod
    def quantize(cls, weight, group_size: int = 32, *, symmetric: bool = False, scale_dtype=T.float16, bias=None,
                 device="cpu", cache: bool = True) -> "QuantLinear":
        """Quantize a float ``weight [N, K]`` (rules of :func:`quantize_int4`) onto ``device``."""
        q, s, m = quantize_int4(weight, group_size, symmetric=symmetric, scale_dtype=scale_dtype)
        return cls.from_packed(q, s, m, bias, group_size=group_size, device=device, cache=cache)

    @property
    def shape(self) -> tuple[int, int]:
        return (self.N, self.K)

    @property
    def device(self):
        return self.qweight.device

    @property
    def symmetric(self) -> bool:
        return self.mins is None

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in (self.qweight, self.scales, self.mins, self.bias) if t is not None)

    def dequantize(self, dtype=T.float32) -> Tensor:
        """The float weight ``[N, K]`` (``int4_dequantize``)."""
        return int4_dequantize(self.qweight, self.scales, self.mins, group_size=self.group_size, dtype=dtype)

    def to(self, device) -> "QuantLinear":
        """A copy on ``device`` (the packed bytes move; nothing is expanded)."""
        mv = lambda t: None if t is None else t.to(device)  # noqa: E731
        return QuantLinear(mv(self.qweight), mv(self.scales), mv(self.mins), mv(self.bias),
                           group_size=self.group_size, cache=self.cache)

    def __call__(self, x: Tensor, *, activation: str | None = None, residual: Tensor | None = None,
                 out: Tensor | None = None) -> Tensor:
        """``act(x @ W.T + b) + residual``: ``x (*, K) -> (*, N)`` in ``x``'s dtype (see :func:`int4_linear`)."""
        b = None if self.bias is None else (self.bias if self.bias.dtype is x.dtype else self.bias.to(x.dtype))
        if self.cache and x.device.type == "cpu" and not interpreting():
            w = self._cpu_weight.get(x.dtype)
            if w is None:
                w = self._cpu_weight[x.dtype] = self.dequantize(x.dtype)
            from ..ops.matmul import linear
            return linear(x, w, b, activation=activation, residual=residual, out=out)
        return int4_linear(x, self.qweight, self.scales, self.mins, b, group_size=self.group_size,
                           activation=activation, residual=residual, out=out)

    def __repr__(self) -> str:
        kind = "symmetric" if self.symmetric else "asymmetric"
        return (f"QuantLinear(out={self.N}, in={self.K}, int4 {kind}, group_size={self.group_size}, "
                f"scales={self.scales.dtype.name}, device={self.device})")
