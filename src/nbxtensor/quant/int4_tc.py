"""The tensor-core int4 GEMV (config key ``TC`` of ``int4_gemv``): decode packed codes into matrix-unit operands.

The CUDA-core GEMV (:mod:`nbxtensor.quant.int4`) spends about 12 instructions per packed byte (7 in its word-decode
form): per code a decode, a conversion of ``x`` and a float32 FMA. On an H200 that keeps the issue slots busy
before HBM is (ncu, session 4: 62 % of cycles issuing at 22 % occupancy, 1.4-1.7 TB/s). Here the products go to
the matrix unit instead, so the per-code cost is the decode alone:

- **Decode.** Four packed bytes become eight 16-bit floats with 2 ``prmt`` + 2 ``shr`` + 4 ``lop3`` in inline PTX
  (2 instructions per byte): each nibble is OR-ed into the low mantissa bits of a constant whose spacing is 1
  (bfloat16 128.0 = 0x4300, float16 1024.0 = 0x6400), giving the exact floats ``OFF + q``.
- **Group scales on the matrix unit's output.** A chunk of ``GPC`` groups (``GPC * G`` codes of a row) is
  multiplied by a *block-diagonal* ``x`` operand of ``NC = GPC * MP`` columns (``MP``: the rows of ``x``, padded to
  a power of two): column ``c`` holds row ``c % MP`` of ``x`` on the codes of group ``c // MP`` and zeros elsewhere.
  The product ``D [BLOCK_N, NC]`` is then each row's per-group dot product ``sum_j (OFF + q_j) x_j`` for every
  (group, x row) pair at once, so the scales and minima apply elementwise to ``D`` (one FMA pair per row and
  group, not per code): ``acc += s * D + (min - OFF * s) * xg`` with ``xg`` the group sums of ``x`` (symmetric:
  ``w = s (q - 8)``: ``acc += s * D - (OFF + 8) s xg``). The low and high nibbles of a byte (codes ``j`` and
  ``j + G/2`` of a group) are two operands against two ``x`` operands, so no nibble interleaving is needed.
- Rows past ``N`` re-read row ``N - 1`` and are masked on store; split-K and the epilogue (bias, activation,
  residual) are the CUDA-core GEMV's (:func:`nbxtensor.ops.matmul.split_k`, ``_split_k_finish``, ``_epilogue``).

Measured (H200, 2026-11-30, ``benchmarks/sweep_gemv.py --phases int4-tc``): slower than the CUDA-core table
kernel, so ``TC`` stays off. Best variant (BLOCK_N 64, 8 columns) 13-22 % of 4.8 TB/s on Llama-3-8B's shapes
against the table's 20-35 %: Triton stages the uint8 tile through shared memory and reads it back in the
operand layout with narrow loads, and builds the block-diagonal ``x`` there too (ncu: L1/TEX 80 % busy, DRAM
19 %, 128 registers, 25 % occupancy). ``benchmarks/probe_int4_gluon.py`` keeps the operand in registers.

Exactness: ``OFF + q`` and the 16-bit ``x`` are exact operands and the matrix unit accumulates their products in
float32; ``OFF * xg`` is subtracted in float32 after the chunk (bfloat16: ``OFF`` = 128 against codes up to 15, so
about 4 of float32's 24 bits are spent on the offset; float16: 1024, about 7). Under the interpreter tier
(``EXACT``) the codes and ``x`` are converted to float32 and the same dots run in float32.
"""

from __future__ import annotations

from ..ops.matmul import _cvt, _epilogue, _split_k_finish, _wide
from ..runtime.triton_compat import jit, tl

__all__ = ["_int4_gemv_tc_kernel"]


@jit
def _decode_off(b, MAGIC, XF16: tl.constexpr, ASM: tl.constexpr, EXACT: tl.constexpr, OFF: tl.constexpr):
    # The low and high nibble codes of the packed bytes b (uint8) as the floats OFF + q in float16 (XF16) or bfloat16 (float32 under
    # EXACT). ASM: four bytes per instance in inline PTX: prmt spreads bytes 0,1 (and 2,3) into the low bytes of
    # two 16-bit lanes, lop3 (t & 0x000F000F) | MAGIC places each low nibble under the constant's exponent; the
    # high nibbles the same after a shift right by 4 (the spread bytes leave zeros above each lane's byte).
    if EXACT:
        bi = b.to(tl.int32)
        lo = (bi & 15).to(tl.float32) + OFF
        hi = (bi >> 4).to(tl.float32) + OFF
    elif ASM:
        lo, hi = tl.inline_asm_elementwise(
            "{ .reg .b32 t0, t1, u0, u1, z; mov.b32 z, 0; "
            "prmt.b32 t0, $4, z, 0x4140; prmt.b32 t1, $4, z, 0x4342; "
            "lop3.b32 $0, t0, 0x000F000F, $5, 0xEA; lop3.b32 $1, t1, 0x000F000F, $5, 0xEA; "
            "shr.u32 u0, t0, 4; shr.u32 u1, t1, 4; "
            "lop3.b32 $2, u0, 0x000F000F, $5, 0xEA; lop3.b32 $3, u1, 0x000F000F, $5, 0xEA; }",
            "=r,=r,=r,=r,r,r,r,r,r", [b, tl.full(b.shape, MAGIC, tl.int32)],
            dtype=(tl.float16, tl.float16) if XF16 else (tl.bfloat16, tl.bfloat16), is_pure=True, pack=4)
    else:
        bi = b.to(tl.int16)
        m16 = (MAGIC & 0xFFFF).to(tl.int16)
        if XF16:
            lo = ((bi & 15) | m16).to(tl.float16, bitcast=True)
            hi = ((bi >> 4) | m16).to(tl.float16, bitcast=True)
        else:
            lo = ((bi & 15) | m16).to(tl.bfloat16, bitcast=True)
            hi = ((bi >> 4) | m16).to(tl.bfloat16, bitcast=True)
    return lo, hi


@jit(do_not_specialize=["Z"])
def _int4_gemv_tc_kernel(X, W, S, MN, C, R, OUT, WS, LOCKS, M, N, NG, MNS, G_SPLIT, NSPLIT, MAGIC, Z,
                         sxm, swn, ssn, scn, srm, srn, som, son,
                         G: tl.constexpr, BLOCK_N: tl.constexpr, GPC: tl.constexpr, MP: tl.constexpr,
                         HAS_MIN: tl.constexpr, HAS_C: tl.constexpr, HAS_R: tl.constexpr, ACT: tl.constexpr,
                         XF16: tl.constexpr, ASM: tl.constexpr, SPLIT: tl.constexpr, EVEN: tl.constexpr,
                         EXACT: tl.constexpr):
    # out[m, n] = sum over this program's groups [g_lo, g_hi) of s[n,g] sum_j q x + min[n,g] sum_j x, for the
    # BLOCK_N rows of this program and every row m < M of x (x has unit stride along K).
    H: tl.constexpr = G // 2
    BC: tl.constexpr = GPC * H          # packed bytes per row per chunk
    NC: tl.constexpr = GPC * MP         # columns of the block-diagonal x operand
    OFF: tl.constexpr = 1024.0 if XF16 else 128.0
    pid_n = tl.program_id(0)
    pid_k = tl.program_id(1)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    wn = tl.minimum(rn, N - 1).to(tl.int64)
    g_lo = pid_k * G_SPLIT
    g_hi = tl.minimum(g_lo + G_SPLIT, NG)
    j = tl.arange(0, BC)
    c = tl.arange(0, NC)
    jg = j // H                         # group (in the chunk) of byte j
    cg = c // MP                        # group (in the chunk) of column c
    cm = c % MP                         # x row of column c
    xk = (jg * G + j % H).to(tl.int64)  # x index, from the chunk's first code, of byte j's low code
    diag = (jg[:, None] == cg[None, :]) & (cm < M)[None, :]
    w_ptrs = W + wn[:, None] * swn + j[None, :]
    x_ptrs = X + cm.to(tl.int64)[None, :] * sxm + xk[:, None]
    x1_ptrs = X + xk
    s_ptrs = S + wn[:, None] * ssn + (cg + Z)[None, :]
    m_ptrs = MN + wn[:, None] * ssn + (cg + Z)[None, :]
    acc = tl.zeros((BLOCK_N, NC), dtype=tl.float32)
    for g0 in range(g_lo, g_hi, GPC):
        gw = _wide(g0)
        if EVEN:
            b = tl.load(w_ptrs + gw * H)
            dm = diag
            s = _cvt(tl.load(s_ptrs + gw), tl.float32, EXACT)
            if HAS_MIN:
                mn = _cvt(tl.load(m_ptrs + gw), tl.float32, EXACT)
        else:
            b = tl.load(w_ptrs + gw * H, mask=(g0 + jg < g_hi)[None, :], other=0)
            dm = diag & (g0 + jg < g_hi)[:, None]
            gm = (g0 + cg < g_hi)[None, :]
            s = _cvt(tl.load(s_ptrs + gw, mask=gm, other=0), tl.float32, EXACT)
            if HAS_MIN:
                mn = _cvt(tl.load(m_ptrs + gw, mask=gm, other=0), tl.float32, EXACT)
        if MP == 1:   # one row of x: its halves as vectors over the chunk's bytes, spread onto the diagonal
            if EVEN:
                xl1 = tl.load(x1_ptrs + gw * G)
                xh1 = tl.load(x1_ptrs + gw * G + H)
            else:
                xl1 = tl.load(x1_ptrs + gw * G, mask=g0 + jg < g_hi, other=0)
                xh1 = tl.load(x1_ptrs + gw * G + H, mask=g0 + jg < g_hi, other=0)
            xl = tl.where(diag, xl1[:, None], 0.0)
            xh = tl.where(diag, xh1[:, None], 0.0)
            xg = tl.sum(tl.reshape(_cvt(xl1, tl.float32, EXACT) + _cvt(xh1, tl.float32, EXACT), (GPC, H)), axis=1)
        else:
            xl = tl.load(x_ptrs + gw * G, mask=dm, other=0)
            xh = tl.load(x_ptrs + gw * G + H, mask=dm, other=0)
            xg = tl.sum(_cvt(xl, tl.float32, EXACT) + _cvt(xh, tl.float32, EXACT), axis=0)
        lo, hi = _decode_off(b, MAGIC, XF16, ASM, EXACT, OFF)
        if EXACT:
            d = tl.dot(lo, _cvt(xl, tl.float32, EXACT), input_precision="ieee")
            d = tl.dot(hi, _cvt(xh, tl.float32, EXACT), d, input_precision="ieee")
        else:
            d = tl.dot(lo, xl)
            d = tl.dot(hi, xh, d)
        if HAS_MIN:
            acc += s * d + (mn - OFF * s) * xg[None, :]
        else:
            acc += s * d - ((OFF + 8.0) * s) * xg[None, :]
    tot = tl.trans(tl.sum(tl.reshape(acc, (BLOCK_N, GPC, MP)), axis=1))   # (MP, BLOCK_N): columns of one x row
    rm = tl.arange(0, MP)
    if SPLIT:
        _split_k_finish(tot, rm, rn, M, N, MNS, WS, LOCKS, pid_n, pid_k, NSPLIT, OUT, som, son, C, 0, scn, R, srm,
                        srn, 1.0, 1.0, HAS_C, HAS_R, ACT, True, True, EXACT)
    else:
        _epilogue(tot, rm, rn, M, N, OUT, som, son, C, 0, scn, R, srm, srn, 1.0, 1.0, False, HAS_C, HAS_R, ACT,
                  True, True, EXACT)


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def tc_eligible(x, cfg: dict) -> bool:
    """Whether :func:`launch_int4_gemv_tc` takes this call: config key ``TC`` on, 16-bit ``x`` with unit stride
    along K and at most ``TC_COLS`` (default 16) rows."""
    return (bool(cfg.get("TC", False)) and x.dtype.itemsize == 2 and x.dtype.is_floating_point
            and x.stride(1) == 1 and x.shape[0] <= int(cfg.get("TC_COLS", 16)))


def launch_int4_gemv_tc(x, qweight, scales, mins, bias, out, group_size: int, cfg: dict, activation=None,
                        residual=None) -> None:
    """``out [M, N] = act(x [M, K] @ W.T + bias) + residual`` with ``_int4_gemv_tc_kernel`` (checked arguments;
    :func:`tc_eligible` holds).

    Settings (``int4_gemv`` table): ``BLOCK_N`` (weight rows per program; the matrix unit wants 16 or more),
    ``TC_COLS`` (columns of the block-diagonal ``x`` operand, a power of two >= 8: ``TC_COLS / MP`` groups per
    chunk, ``MP`` = M rounded up to a power of two), ``TC_ASM`` (the inline-PTX decode; default on),
    ``programs_per_sm`` / ``target_programs`` / ``MIN_K_SPLIT`` (split-K over groups), ``num_warps``,
    ``num_stages``.
    """
    from ..dtypes import table as T
    from ..ops.matmul import _ACT_CODE, _launch, _locks, split_k
    from ..runtime.launcher import interpreting
    from ..tensor.core import new_empty
    M, K = x.shape
    N = qweight.shape[0]
    dev = x.device
    G = group_size
    NG = K // G
    mp = _pow2(M)
    nc = max(8, int(cfg.get("TC_COLS", 16)), mp)
    gpc = nc // mp
    bn = int(cfg.get("BLOCK_N", 64))
    n_tiles = -(-N // bn)
    split, g_split = split_k(NG, n_tiles, {**cfg, "MIN_K_SPLIT": max(1, cfg.get("MIN_K_SPLIT", G) // G)}, dev,
                             step=gpc, grain=gpc)
    use_split = split > 1
    even = NG % gpc == 0 and (not use_split or g_split % gpc == 0)
    exact = interpreting()
    ws = new_empty((split * M * N,), T.float32, dev) if use_split else out
    locks = _locks(dev, n_tiles) if use_split else out
    c = bias if bias is not None else out
    r = residual if residual is not None else out
    xf16 = x.dtype is T.float16
    _launch(_int4_gemv_tc_kernel, (n_tiles, split),
            (x, qweight, scales, mins if mins is not None else scales, c, r, out, ws, locks, M, N, NG, M * N,
             g_split, split, 0x64006400 if xf16 else 0x43004300, 0, x.stride(0), qweight.stride(0),
             scales.stride(0), c.stride(-1), r.stride(0), r.stride(1), out.stride(0), out.stride(1)),
            dict(G=G, BLOCK_N=bn, GPC=gpc, MP=mp, HAS_MIN=mins is not None, HAS_C=bias is not None,
                 HAS_R=residual is not None, ACT=_ACT_CODE[activation], XF16=xf16,
                 ASM=not exact and bool(cfg.get("TC_ASM", True)), SPLIT=use_split, EVEN=even, EXACT=exact,
                 num_warps=cfg.get("num_warps", 4), num_stages=cfg.get("num_stages", 2)),
            ws=ws if use_split else None, locks=(locks, n_tiles) if use_split else None)
