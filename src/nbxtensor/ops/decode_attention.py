"""Decode attention: one query token per sequence over a KV cache, contiguous or paged, and the kernel that
appends new keys and values to a cache (``nbx.nn.functional.decode_attention``, ``paged_decode_attention``,
``kv_cache_append``, ``paged_kv_append``; :class:`PagedKVCache` allocates pages).

``out[b, h] = softmax(q[b, h] . K[b, h // G, :n_b]^T * scale) V[b, h // G, :n_b]`` with ``n_b`` the length of
sequence ``b`` (``cache_seqlens[b]``) and ``G = Hq / Hkv`` query heads per key/value head (GQA; ``Hkv = 1`` is
MQA). A sequence of length 0 gives 0 (no key: PyTorch's rule for a fully masked row).

Caches:

- contiguous: ``key_cache [B, Hkv, max_len, E]``, ``value_cache [B, Hkv, max_len, Ev]`` (any strides);
- paged: ``key_pages [num_blocks, block_size, Hkv, E]``, ``value_pages [num_blocks, block_size, Hkv, Ev]`` and a
  block table ``[B, max_blocks]`` (int32): position ``p`` of sequence ``b`` lives in page
  ``block_table[b, p // block_size]``, slot ``p % block_size`` (vLLM's layout, Kwon et al., "Efficient Memory
  Management for Large Language Model Serving with PagedAttention", 2023). Block sizes 16 and 32 are tested;
  any power of two works.

**Kernels.** Split-KV ("flash-decoding", Dao et al. 2023): the keys of each (sequence, kv head) are cut into
``splits`` chunks so that ``B * Hkv * splits`` programs fill the GPU; each program loads every key/value row of
its chunk once, in tiles of ``BLOCK_N`` keys (full tiles unmasked, one masked tail), and serves all ``G`` query
heads of its kv head (``tl.dot`` of ``[BLOCK_H, E] x [E, BLOCK_N]``, ``BLOCK_H = max(16, G)`` rows) with the
online softmax in base 2, and writes its partial ``(m, l, acc)`` in float32 to one workspace. A second kernel
combines the partials of each (sequence, head, block of output columns) in a fixed order (a loop over the splits
in index order, fixed reduction trees): no atomics, so the same inputs give byte-identical outputs, and a
replayed decode step is reproducible. One split skips the combine (the split kernel writes the output).
With the table's ``fuse_combine = N`` (default 0: off), 2..N splits need no second launch: each split program
counts its arrival on a per-(sequence, kv head) counter after storing its partial, and the last to arrive combines
all partials in split order and resets the counter (ops/matmul.py's deterministic split-K pattern; the counters
are its ``_locks``), so the bits still do not depend on the order in which programs finish. With
``fuse_fold = U`` (default 0: the combine above) that last program instead folds the partials one after another
in split order (a running maximum rescales the sums), ``U`` splits' loads in flight per step, over the GQA
group's rows only; ``fuse_group = G`` (default 0) folds more than ``G`` splits in two levels (the last program of
each group of ``G`` consecutive splits folds the group, the last group folds the groups), so no program folds
a hundred partials at the kernel's end. ``combine_one`` (default off) lets the combine kernel load every split at
once when they fit one block (the same bits as its loop). ``lazy_rowsum``
(default off) keeps the softmax row sums as a per-column tile reduced once per split instead of once per key tile.

The number of splits comes from the arch's table (``target_programs``, or ``programs_per_sm`` times the SM
count; ``min_chunk``, ``max_splits``) and the cache's capacity (or ``max_seqlen`` when given). Each sequence's
chunk is recomputed on the device from its own length (``ceil(n_b / splits)`` rounded up to ``BLOCK_N``, at least
``min_chunk``), so a short sequence in a long cache still spreads over the splits, the combine reads only the
splits that hold keys, and a length beyond ``max_seqlen`` is still attended in full. On Hopper the table's
``"TMA"`` loads a contiguous 16-bit cache through tensor descriptors. Everything the host derives from shapes,
strides and the table is planned once per launch key and cached, so a call costs one workspace allocation and
two launches.

``cache_seqlens`` and ``block_table`` are device data: the kernels never read or write outside the caches (a
length is clamped to the capacity, a page id outside ``[0, num_blocks)`` is skipped), but checking them would
cost a device-to-host copy per call, so the attention functions check them only with ``validate=True``; the
append kernels report an out-of-range position or page through a device flag that the host reads (``check=True``,
the default) and raise ``IndexError``. :class:`PagedKVCache` keeps lengths and pages on the host and checks
them before each launch.

The ``cpu`` implementation is NumPy (float32 for 16-bit inputs); the oracle is float64.
"""

from __future__ import annotations

import math

import numpy as np

from .._errors import check
from ..device import device as _device
from ..dtypes import table as T
from ..dtypes.casting import cast_array
from ..runtime import configs as _cfgmod
from ..runtime.configs import launch_config
from ..runtime.launcher import Tail, interpreting, launch, launch_tail
from ..runtime.pdl import enter as pdl_enter
from ..runtime.pdl import settings as pdl_settings
from ..runtime.triton_compat import jit, tl
from ..tensor.core import Tensor, from_host_array, host_view, new_empty
from . import dispatch, registry
from .attention import FLOATS, LOG2E, _operand, _pow2, _round_p, _softmax_rows, kernel_dtypes, tma_ok
from .matmul import _locks  # split-K's arrival counters (zero between launches), shared per (device, stream)
from .registry import Cost, OpRecord, register
from .triton_helpers import convert, div_rn, maximum_fast, nan_max_fast, rcp_rn

__all__ = ["launch_decode", "launch_plan", "sdpa_decode", "launch_append", "decode_oracle", "paged_decode_oracle",
           "gather_pages", "PagedKVCache", "split_plan"]

INDEX_DTYPES = frozenset({T.int32, T.int64})


# ---------------------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------------------
@jit
def _decode_tiles(acc, l_i, m_i, q, k_head, v_head, k_desc, v_desc, bt_row, lo, hi, offs_n, d_ok, dv_ok,
                  sks, svs, skb, svb, num_pages, qk_scale,
                  BOUNDS: tl.constexpr, PAGED: tl.constexpr, PAGE: tl.constexpr, TMA: tl.constexpr,
                  BLOCK_N: tl.constexpr, EVEN_D: tl.constexpr, EVEN_DV: tl.constexpr, UPCAST: tl.constexpr,
                  IN_DT: tl.constexpr, PREC: tl.constexpr, ACC: tl.constexpr, LAZY_L: tl.constexpr):
    """Fold the key tiles ``[lo, hi)`` (``BLOCK_N`` keys each) into ``(acc, l_i, m_i)``.

    ``LAZY_L``: ``l_i`` is a ``[BLOCK_H, BLOCK_N]`` tile of per-column partial sums (rescaled by ``alpha`` like
    ``acc``) that the caller sums over its columns once after the loop: the per-tile row sum of ``p`` goes, and
    with it one of the two cross-warp reductions (shared memory and barriers) each tile costs when the warps
    split the keys (16 query rows: mma.sync's layout).

    ``BOUNDS``: the tiles may pass ``hi`` (the one tail tile of a split): keys ``>= hi`` are masked. Without it
    (and not ``PAGED``) the loads carry no key mask at all, the common case of every full tile. ``PAGED``: each
    key's page comes from the sequence's block-table row ``bt_row``; a page id outside ``[0, num_pages)`` is
    skipped (masked), never read. ``TMA``: contiguous caches through tensor descriptors of the sequence's
    ``[n_b, E]`` rows (rows past ``n_b`` and columns past ``E`` arrive as zeros)."""
    for start_n in range(lo, hi, BLOCK_N):
        n = start_n + offs_n
        if BOUNDS:
            n_ok = n < hi
        if PAGED:
            if BOUNDS:
                page = tl.load(bt_row + n // PAGE, mask=n_ok, other=-1)
                n_ok = n_ok & (page >= 0) & (page < num_pages)
            else:
                page = tl.load(bt_row + n // PAGE)
                n_ok = (page >= 0) & (page < num_pages)
            page = tl.where(n_ok, page, 0).to(tl.int64)
            slot = (n % PAGE).to(tl.int64)
            krow = page * skb + slot * sks
            vrow = page * svb + slot * svs
        else:
            krow = n.to(tl.int64) * sks
            vrow = n.to(tl.int64) * svs
        if TMA:
            k = k_desc.load([start_n, 0]).T
        elif BOUNDS or PAGED:
            if EVEN_D:
                k = tl.load(k_head + krow[None, :], mask=n_ok[None, :], other=0.0)
            else:
                k = tl.load(k_head + krow[None, :], mask=d_ok[:, None] & n_ok[None, :], other=0.0)
        else:
            if EVEN_D:
                k = tl.load(k_head + krow[None, :])
            else:
                k = tl.load(k_head + krow[None, :], mask=d_ok[:, None], other=0.0)
        s = tl.dot(q, _operand(k, UPCAST), input_precision=PREC, out_dtype=ACC) * qk_scale
        if BOUNDS or PAGED:
            s = tl.where(n_ok[None, :], s, float("-inf"))
        m_new = maximum_fast(m_i, nan_max_fast(s, 1))  # NaN propagates (attention.py's float semantics)
        shift = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(s - shift[:, None])  # ex2.approx: attention.py's deliberate fast path
        alpha = tl.math.exp2(m_i - shift)
        if LAZY_L:
            l_i = l_i * alpha[:, None] + p
        else:
            l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if TMA:
            v = v_desc.load([start_n, 0])
        elif BOUNDS or PAGED:
            if EVEN_DV:
                v = tl.load(v_head + vrow[:, None], mask=n_ok[:, None], other=0.0)
            else:
                v = tl.load(v_head + vrow[:, None], mask=n_ok[:, None] & dv_ok[None, :], other=0.0)
        else:
            if EVEN_DV:
                v = tl.load(v_head + vrow[:, None])
            else:
                v = tl.load(v_head + vrow[:, None], mask=dv_ok[None, :], other=0.0)
        acc = tl.dot(_round_p(p, IN_DT, UPCAST), _operand(v, UPCAST), acc, input_precision=PREC, out_dtype=ACC)
        m_i = m_new
    return acc, l_i, m_i


@jit
def _chunk_of(n_b, NS, min_chunk, BLOCK_N: tl.constexpr):
    """Keys per split of a sequence of ``n_b`` keys cut into at most ``NS`` splits: ``ceil(n_b / NS)`` rounded
    up to a multiple of ``BLOCK_N``, at least ``min_chunk`` (a multiple of ``BLOCK_N``). The split kernel and
    the combine kernel both derive it from the same length, so they agree on which splits hold keys."""
    return tl.maximum(min_chunk, tl.cdiv(tl.cdiv(n_b, NS), BLOCK_N) * BLOCK_N)


@jit
def _seq_len(LENS, b, cap, HAS_LENS: tl.constexpr):
    if HAS_LENS:
        n_b = tl.load(LENS + b).to(tl.int32)
        n_b = tl.minimum(tl.maximum(n_b, 0), cap)  # memory safety; validate=True reports such lengths
    else:
        n_b = cap
    return n_b


# Sizes that vary from shape to shape but do not shape the code (a split count, workspace offsets, the page count):
# not specialised on (Triton would compile once per "divisible by 16" class of each), so one compile serves every
# shape of a setting. Row strides stay specialised: their alignment lets the loads vectorise.
_SPLIT_SIZES = ["Hq", "Hkv", "GROUP", "HBLK", "cap", "num_pages", "NS", "min_chunk", "moff", "loff", "goff",
                "gmoff", "gloff"]


@jit
def _fused_combine(WS, out_ptrs, rows, g_ok, active, EV, moff, loff, syd, BLOCK_H: tl.constexpr,
                   BLOCK_S: tl.constexpr, BLOCK_DV: tl.constexpr, CDV: tl.constexpr, ACC: tl.constexpr,
                   ONE: tl.constexpr):
    """The split kernel's own combine (``FUSE``), run by the last program of a (sequence, kv head, head block)
    to finish: the partials of its ``BLOCK_H`` query rows (workspace rows ``rows = (b * Hq + h) * NS``, output
    row pointers ``out_ptrs``) over the ``active`` splits, as :func:`_decode_combine_kernel` combines them
    (``out = sum_s w_s acc_s / sum_s w_s l_s``, ``w_s = exp2(m_s - max_s m_s)``) but for all rows at once,
    ``BLOCK_S`` splits and ``CDV`` output columns per step. The order of the sums is fixed (split blocks in index
    order, fixed reduction trees), so the bits do not depend on which program arrived last. The workspace is read
    with ``.cg`` (from L2: programs on other SMs wrote it).

    ``ONE``: every split fits one ``BLOCK_S`` block: no loops, so every load can be in flight at once (this runs
    at the end of the kernel, where its latency is the kernel's)."""
    offs_s = tl.arange(0, BLOCK_S)
    if ONE:
        ok = g_ok[:, None] & (offs_s < active)[None, :]
        m = tl.load(WS + moff + rows[:, None] + offs_s[None, :], mask=ok, other=float("-inf"), cache_modifier=".cg")
        lw = tl.load(WS + loff + rows[:, None] + offs_s[None, :], mask=ok, other=0.0, cache_modifier=".cg")
        mx = nan_max_fast(m, 1)
        w = tl.math.exp2(m - tl.where(mx == float("-inf"), 0.0, mx)[:, None])
        total = tl.sum(w * lw, 1)
        total = tl.where(total == 0.0, 1.0, total)
        for c in tl.static_range(BLOCK_DV // CDV):
            offs_dv = c * CDV + tl.arange(0, CDV)
            dv_ok = offs_dv < EV
            o = tl.load(WS + (rows[:, None, None] + offs_s[None, :, None]) * EV + offs_dv[None, None, :],
                        mask=ok[:, :, None] & dv_ok[None, None, :], other=0.0, cache_modifier=".cg")
            out = div_rn(tl.sum(w[:, :, None] * o, 1), total[:, None])
            tl.store(out_ptrs[:, None] + offs_dv[None, :].to(tl.int64) * syd,
                     convert(out, out_ptrs.dtype.element_ty), mask=g_ok[:, None] & dv_ok[None, :])
        return
    mmax = tl.full([BLOCK_H, BLOCK_S], float("-inf"), ACC)
    for s0 in range(0, active, BLOCK_S):
        s = s0 + offs_s
        ok = g_ok[:, None] & (s < active)[None, :]
        mmax = maximum_fast(mmax, tl.load(WS + moff + rows[:, None] + s[None, :], mask=ok, other=float("-inf"),
                                          cache_modifier=".cg"))
    mx = nan_max_fast(mmax, 1)
    shift = tl.where(mx == float("-inf"), 0.0, mx)
    lsum = tl.zeros([BLOCK_H, BLOCK_S], ACC)
    for s0 in range(0, active, BLOCK_S):
        s = s0 + offs_s
        ok = g_ok[:, None] & (s < active)[None, :]
        w = tl.math.exp2(tl.load(WS + moff + rows[:, None] + s[None, :], mask=ok, other=float("-inf"),
                                 cache_modifier=".cg") - shift[:, None])
        lsum += w * tl.load(WS + loff + rows[:, None] + s[None, :], mask=ok, other=0.0, cache_modifier=".cg")
    total = tl.sum(lsum, 1)
    total = tl.where(total == 0.0, 1.0, total)
    for c in tl.static_range(BLOCK_DV // CDV):
        offs_dv = c * CDV + tl.arange(0, CDV)
        dv_ok = offs_dv < EV
        acc = tl.zeros([BLOCK_H, CDV], ACC)
        for s0 in range(0, active, BLOCK_S):
            s = s0 + offs_s
            ok = g_ok[:, None] & (s < active)[None, :]
            w = tl.math.exp2(tl.load(WS + moff + rows[:, None] + s[None, :], mask=ok, other=float("-inf"),
                                     cache_modifier=".cg") - shift[:, None])
            o = tl.load(WS + (rows[:, None, None] + s[None, :, None]) * EV + offs_dv[None, None, :],
                        mask=ok[:, :, None] & dv_ok[None, None, :], other=0.0, cache_modifier=".cg")
            acc += tl.sum(w[:, :, None] * o, 1)
        out = div_rn(acc, total[:, None])
        tl.store(out_ptrs[:, None] + offs_dv[None, :].to(tl.int64) * syd, convert(out, out_ptrs.dtype.element_ty),
                 mask=g_ok[:, None] & dv_ok[None, :])


@jit
def _fold_partials(WS, rows, r_ok, count, EV, moff, loff, BLOCK_DV: tl.constexpr, UNROLL: tl.constexpr,
                   ACC: tl.constexpr):
    """``(acc, l, m)`` of ``count`` partials folded in index order: partial ``s`` of row ``r`` is ``acc`` at
    ``WS + (rows[r] + s) * EV``, ``m`` at ``WS + moff + rows[r] + s``, ``l`` at ``WS + loff + ...``. A running
    maximum rescales the sum as each partial joins (``acc = acc * 2^(m - m') + acc_s * 2^(m_s - m')``), one
    partial after another in index order: the bits do not depend on which program runs this. ``UNROLL``
    partials per step, whose loads (``.cg``: written by programs on other SMs) do not depend on the step's
    arithmetic, so they are all in flight at once: a fold of ``S`` partials costs about ``S / UNROLL`` L2 round
    trips (this runs at the end of a kernel, where its latency is the kernel's)."""
    offs_dv = tl.arange(0, BLOCK_DV)
    dv_ok = offs_dv < EV
    m_run = tl.full(rows.shape, float("-inf"), ACC)
    l_run = tl.zeros(rows.shape, ACC)
    acc = tl.zeros([rows.shape[0], BLOCK_DV], ACC)
    for s0 in range(0, count, UNROLL):
        for u in tl.static_range(UNROLL):
            r = rows + (s0 + u)
            ok = r_ok & (s0 + u < count)
            m_s = tl.load(WS + moff + r, mask=ok, other=float("-inf"), cache_modifier=".cg")
            l_s = tl.load(WS + loff + r, mask=ok, other=0.0, cache_modifier=".cg")
            o_s = tl.load(WS + r[:, None] * EV + offs_dv[None, :], mask=ok[:, None] & dv_ok[None, :], other=0.0,
                          cache_modifier=".cg")
            m_new = maximum_fast(m_run, m_s)
            shift = tl.where(m_new == float("-inf"), 0.0, m_new)
            a = tl.math.exp2(m_run - shift)
            w = tl.math.exp2(m_s - shift)
            l_run = l_run * a + l_s * w
            acc = acc * a[:, None] + o_s * w[:, None]
            m_run = m_new
    return acc, l_run, m_run


@jit
def _arrive(LOCKS, idx, n):
    """Count one arrival on ``LOCKS[idx]`` after every thread's stores (a barrier, then a GPU-scope acq_rel add);
    True for the ``n``-th (last) arrival, which also resets the counter (zero between launches). Its acquire
    orders the last program's ``.cg`` loads after every earlier arrival's stores."""
    tl.debug_barrier()
    last = tl.atomic_add(LOCKS + idx, 1, sem="acq_rel") == n - 1
    if last:
        tl.atomic_xchg(LOCKS + idx, 0)
    return last


@jit(do_not_specialize=_SPLIT_SIZES)
def _decode_split_kernel(Q, K, V, LENS, BT, WS, O, LOCKS,
                         sqb, sqh, sqd, skb, sks, skh, skd, svb, svs, svh, svd, sbt, syb, syh, syd,
                         Hq, Hkv, GROUP, HBLK, E, EV, cap, num_pages, NS, min_chunk, moff, loff, goff, gmoff, gloff,
                         qk_scale, HAS_LENS: tl.constexpr, PAGED: tl.constexpr, PAGE: tl.constexpr,
                         DIRECT: tl.constexpr, TMA: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
                         BLOCK_DV: tl.constexpr, EVEN_D: tl.constexpr, EVEN_DV: tl.constexpr, UPCAST: tl.constexpr,
                         IN_DT: tl.constexpr, PREC: tl.constexpr, ACC: tl.constexpr, LAZY_L: tl.constexpr = False,
                         FUSE: tl.constexpr = False, FUSE_S: tl.constexpr = 8, FUSE_DV: tl.constexpr = 32,
                         FUSE_ONE: tl.constexpr = False, FOLD: tl.constexpr = 0, FOLD_H: tl.constexpr = 16,
                         FOLD_G: tl.constexpr = 0, PDL: tl.constexpr = False):
    """Partial attention of one split of the keys of one (sequence, kv head, block of its query heads).

    Grid ``(B * Hkv * HBLK, NS)``. The split's keys are ``[split * chunk, min((split + 1) * chunk, n_b))`` with
    ``chunk = _chunk_of(n_b, NS, min_chunk)``: every sequence's keys are spread over the splits, whatever its
    length. Full tiles run unmasked, then at most one tail tile masked. ``DIRECT`` (one split): the output is
    written here; else the partial ``(m, l, acc)`` of each query head goes to the workspace ``WS`` (float32):
    ``acc`` at ``((b * Hq + h) * NS + split) * EV``, ``m`` at ``moff + (b * Hq + h) * NS + split``, ``l`` at
    ``loff + ...``; a split with no key writes nothing (the combine reads only the splits that hold keys).

    ``FUSE``: no second launch; each program counts its arrival on ``LOCKS[pid]`` (one int32 per (sequence, kv
    head, head block), zero between launches) after its partial is stored, and the last of the ``NS`` to arrive
    combines them all in split order (:func:`_fused_combine`) and resets the counter (the pattern of
    ops/matmul.py's deterministic split-K, ``_split_k_finish``). ``LAZY_L``: see :func:`_decode_tiles`.

    ``FOLD`` (> 0, with ``FUSE``): the last program folds the partials one after another in split order
    (:func:`_fold_partials`, ``FOLD`` of them in flight per step) over ``FOLD_H`` rows (the group padded to a
    power of two, not to ``BLOCK_H``) and all value columns at once. ``FOLD_G`` (> 0): two levels, so that no
    program folds many partials at the kernel's end: the splits form groups of ``FOLD_G`` consecutive ones;
    the last program of a group to finish folds the group's partials into one (``acc`` at ``goff + (row *
    NG + g) * EV``, ``m`` at ``gmoff + row * NG + g``, ``l`` at ``gloff + ...``) and counts itself on the
    (sequence, kv head)'s
    counter; the last group folds the ``NG = cdiv(NS, FOLD_G)`` group partials in group order. Counters: the
    group's at ``LOCKS[pid * NG + g]``, the pair's at ``LOCKS[P * NG + pid]`` (``P`` programs along axis 0).
    Both levels have a fixed order: the bits do not depend on the order in which programs finish. PDL:
    runtime/pdl.py."""
    pdl_enter(PDL)
    pid = tl.program_id(0)
    split = tl.program_id(1)
    hb = pid % HBLK
    bk = pid // HBLK
    b = (bk // Hkv).to(tl.int64)
    kh = (bk % Hkv).to(tl.int64)
    n_b = _seq_len(LENS, b, cap, HAS_LENS)
    chunk = _chunk_of(n_b, NS, min_chunk, BLOCK_N)
    lo = split * chunk
    hi = tl.maximum(tl.minimum(lo + chunk, n_b), lo)
    full = lo + ((hi - lo) // BLOCK_N) * BLOCK_N

    offs_g = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    g_ok = offs_g < GROUP
    h = kh * GROUP + offs_g.to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    d_ok = offs_d < E
    dv_ok = offs_dv < EV
    offs_n = tl.arange(0, BLOCK_N)

    q = tl.load(Q + b * sqb + h[:, None] * sqh + offs_d[None, :].to(tl.int64) * sqd,
                mask=g_ok[:, None] & d_ok[None, :], other=0.0)
    q = _operand(q, UPCAST)
    if PAGED:
        k_head = K + kh * skh + offs_d[:, None].to(tl.int64) * skd
        v_head = V + kh * svh + offs_dv[None, :].to(tl.int64) * svd
    else:
        k_head = K + b * skb + kh * skh + offs_d[:, None].to(tl.int64) * skd
        v_head = V + b * svb + kh * svh + offs_dv[None, :].to(tl.int64) * svd
    bt_row = BT + b * sbt
    if TMA:  # the host checked the descriptor rules (16-byte aligned bases and row strides, unit head-dim stride)
        rows = tl.maximum(n_b, 1)  # a descriptor's dims are >= 1; an empty sequence loads nothing
        k_desc = tl.make_tensor_descriptor(K + b * skb + kh * skh, shape=[rows, E], strides=[sks, 1],
                                           block_shape=[BLOCK_N, BLOCK_D])
        v_desc = tl.make_tensor_descriptor(V + b * svb + kh * svh, shape=[rows, EV], strides=[svs, 1],
                                           block_shape=[BLOCK_N, BLOCK_DV])
    else:
        k_desc = k_head
        v_desc = v_head

    m_i = tl.full([BLOCK_H], float("-inf"), ACC)
    if LAZY_L:
        l_i = tl.zeros([BLOCK_H, BLOCK_N], ACC)
    else:
        l_i = tl.zeros([BLOCK_H], ACC)
    acc = tl.zeros([BLOCK_H, BLOCK_DV], ACC)
    acc, l_i, m_i = _decode_tiles(acc, l_i, m_i, q, k_head, v_head, k_desc, v_desc, bt_row, lo, full, offs_n, d_ok,
                                  dv_ok, sks, svs, skb, svb, num_pages, qk_scale, False, PAGED, PAGE, TMA, BLOCK_N,
                                  EVEN_D, EVEN_DV, UPCAST, IN_DT, PREC, ACC, LAZY_L)
    acc, l_i, m_i = _decode_tiles(acc, l_i, m_i, q, k_head, v_head, k_desc, v_desc, bt_row, full, hi, offs_n, d_ok,
                                  dv_ok, sks, svs, skb, svb, num_pages, qk_scale, True, PAGED, PAGE, TMA, BLOCK_N,
                                  EVEN_D, EVEN_DV, UPCAST, IN_DT, PREC, ACC, LAZY_L)
    if LAZY_L:
        l_i = tl.sum(l_i, 1)
    if DIRECT:
        l_safe = tl.where(l_i == 0.0, 1.0, l_i)
        out = acc * rcp_rn(l_safe)[:, None]  # one IEEE reciprocal per row, as attention.py's epilogue
        tl.store(O + b * syb + h[:, None] * syh + offs_dv[None, :].to(tl.int64) * syd,
                 convert(out, O.dtype.element_ty), mask=g_ok[:, None] & dv_ok[None, :])
    else:
        row = (b * Hq + h) * NS + split
        live = g_ok & (lo < n_b)
        tl.store(WS + moff + row, m_i, mask=live)
        tl.store(WS + loff + row, l_i, mask=live)
        tl.store(WS + row[:, None] * EV + offs_dv[None, :], acc, mask=live[:, None] & dv_ok[None, :])
        if FOLD > 0:
            offs_c = hb * BLOCK_H + tl.arange(0, FOLD_H)
            c_ok = offs_c < GROUP
            hc = kh * GROUP + offs_c.to(tl.int64)
            active = tl.cdiv(n_b, chunk)
            if FOLD_G > 0:
                NG = tl.cdiv(NS, FOLD_G)
                g = split // FOLD_G
                gsize = tl.minimum(NS - g * FOLD_G, FOLD_G)
                if _arrive(LOCKS, pid * NG + g, gsize):
                    cnt = tl.minimum(tl.maximum(active - g * FOLD_G, 0), FOLD_G)
                    if cnt > 0:
                        gacc, gl, gm = _fold_partials(WS, (b * Hq + hc) * NS + g * FOLD_G, c_ok, cnt, EV, moff,
                                                      loff, BLOCK_DV, FOLD, ACC)
                        grow = (b * Hq + hc) * NG + g
                        tl.store(WS + gmoff + grow, gm, mask=c_ok)
                        tl.store(WS + gloff + grow, gl, mask=c_ok)
                        tl.store(WS + goff + grow[:, None] * EV + offs_dv[None, :], gacc,
                                 mask=c_ok[:, None] & dv_ok[None, :])
                    if _arrive(LOCKS, tl.num_programs(0) * NG + pid, NG):
                        acc2, l2, _m = _fold_partials(WS + goff, (b * Hq + hc) * NG, c_ok, tl.cdiv(active, FOLD_G),
                                                      EV, gmoff - goff, gloff - goff, BLOCK_DV, FOLD, ACC)
                        out = div_rn(acc2, tl.where(l2 == 0.0, 1.0, l2)[:, None])
                        tl.store(O + b * syb + hc[:, None] * syh + offs_dv[None, :].to(tl.int64) * syd,
                                 convert(out, O.dtype.element_ty), mask=c_ok[:, None] & dv_ok[None, :])
            elif _arrive(LOCKS, pid, NS):
                acc2, l2, _m = _fold_partials(WS, (b * Hq + hc) * NS, c_ok, active, EV, moff, loff, BLOCK_DV, FOLD,
                                              ACC)
                out = div_rn(acc2, tl.where(l2 == 0.0, 1.0, l2)[:, None])
                tl.store(O + b * syb + hc[:, None] * syh + offs_dv[None, :].to(tl.int64) * syd,
                         convert(out, O.dtype.element_ty), mask=c_ok[:, None] & dv_ok[None, :])
        elif FUSE:
            # every thread's partial stores precede the release of the arrival (acq_rel, GPU scope); the last
            # program's acquire orders its workspace loads (.cg) after every program's stores
            tl.debug_barrier()
            arrived = tl.atomic_add(LOCKS + pid, 1, sem="acq_rel")
            if arrived == NS - 1:
                active = tl.cdiv(n_b, chunk)
                _fused_combine(WS, O + b * syb + h * syh, (b * Hq + h) * NS, g_ok, active, EV, moff, loff, syd,
                               BLOCK_H, FUSE_S, BLOCK_DV, FUSE_DV, ACC, FUSE_ONE)
                tl.atomic_xchg(LOCKS + pid, 0)


@jit(do_not_specialize=["NS", "Hq", "cap", "min_chunk", "moff", "loff"])
def _decode_combine_kernel(WS, O, LENS, NS, Hq, EV, cap, min_chunk, moff, loff, syb, syh, syd,
                           HAS_LENS: tl.constexpr, SPLIT_N: tl.constexpr, BLOCK_S: tl.constexpr,
                           BLOCK_DV: tl.constexpr, ACC: tl.constexpr, ONE: tl.constexpr = False,
                           PDL: tl.constexpr = False):
    """Combine the partials of one (sequence, head) and ``BLOCK_DV`` output columns (grid ``(B * Hq,
    cdiv(Ev, BLOCK_DV))``) in split order: ``out = sum_s w_s acc_s / sum_s w_s l_s`` with ``w_s = exp2(m_s -
    max_s m_s)``, over the splits that hold keys (``SPLIT_N``: the split kernel's ``BLOCK_N``, for
    :func:`_chunk_of`). A fixed loop order and fixed reduction trees: the same inputs give the same bits.
    ``ONE``: every split fits one ``BLOCK_S`` block (the host checked ``NS <= BLOCK_S``): ``m``, ``l`` and the
    partial rows are loaded once, together, with the same sums as the loop's single step. PDL: runtime/pdl.py."""
    pdl_enter(PDL)
    bh = tl.program_id(0).to(tl.int64)
    b = bh // Hq
    h = bh % Hq
    n_b = _seq_len(LENS, b, cap, HAS_LENS)
    active = tl.cdiv(n_b, _chunk_of(n_b, NS, min_chunk, SPLIT_N))
    offs_s = tl.arange(0, BLOCK_S)
    offs_dv = tl.program_id(1) * BLOCK_DV + tl.arange(0, BLOCK_DV)
    dv_ok = offs_dv < EV
    mbase = WS + moff + bh * NS
    lbase = WS + loff + bh * NS
    obase = WS + bh * NS * EV
    if ONE:
        s_ok = offs_s < active
        m = tl.load(mbase + offs_s, mask=s_ok, other=float("-inf"))
        lw = tl.load(lbase + offs_s, mask=s_ok, other=0.0)
        o = tl.load(obase + offs_s[:, None].to(tl.int64) * EV + offs_dv[None, :], mask=s_ok[:, None] & dv_ok[None, :],
                    other=0.0)
        mx = nan_max_fast(m, 0)
        w = tl.math.exp2(m - tl.where(mx == float("-inf"), 0.0, mx))
        total = tl.sum(w * lw, 0)
        out = div_rn(tl.sum(w[:, None] * o, 0), tl.where(total == 0.0, 1.0, total))
        tl.store(O + b * syb + h * syh + offs_dv.to(tl.int64) * syd, convert(out, O.dtype.element_ty), mask=dv_ok)
        return
    mmax = tl.full([BLOCK_S], float("-inf"), ACC)
    for s0 in range(0, active, BLOCK_S):
        s = s0 + offs_s
        mmax = maximum_fast(mmax, tl.load(mbase + s, mask=s < active, other=float("-inf")))
    mx = nan_max_fast(mmax, 0)
    shift = tl.where(mx == float("-inf"), 0.0, mx)
    lsum = tl.zeros([BLOCK_S], ACC)
    acc = tl.zeros([BLOCK_DV], ACC)
    for s0 in range(0, active, BLOCK_S):
        s = s0 + offs_s
        s_ok = s < active
        w = tl.math.exp2(tl.load(mbase + s, mask=s_ok, other=float("-inf")) - shift)
        lsum += w * tl.load(lbase + s, mask=s_ok, other=0.0)
        o = tl.load(obase + s[:, None].to(tl.int64) * EV + offs_dv[None, :], mask=s_ok[:, None] & dv_ok[None, :],
                    other=0.0)
        acc += tl.sum(w[:, None] * o, 0)
    total = tl.sum(lsum, 0)
    out = div_rn(acc, tl.where(total == 0.0, 1.0, total))  # IEEE (Triton's float32 / is div.full.f32)
    tl.store(O + b * syb + h * syh + offs_dv.to(tl.int64) * syd, convert(out, O.dtype.element_ty), mask=dv_ok)

@jit
def _kv_append_kernel(KN, VN, KC, VC, LENS, BT, ERR,
                      snb, snh, snt, snd, svnb, svnh, svnt, svnd,
                      skb, sks, skh, skd, svb, svs, svh, svd, sbt,
                      T, Hkv, E, EV, cap, num_pages,
                      PAGED: tl.constexpr, PAGE: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
                      BLOCK_DV: tl.constexpr, PDL: tl.constexpr = False):
    """Write new row ``t`` of sequence ``b`` (all kv heads) at position ``cache_seqlens[b] + t``; a position
    outside the capacity or a page id outside ``[0, num_pages)`` writes nothing and sets ``ERR``. PDL:
    runtime/pdl.py."""
    pdl_enter(PDL)
    pid = tl.program_id(0)
    b = (pid // T).to(tl.int64)
    t = pid % T
    pos = tl.load(LENS + b).to(tl.int32) + t
    ok = (pos >= 0) & (pos < cap)
    if PAGED:
        page = tl.load(BT + b * sbt + tl.where(ok, pos, 0) // PAGE, mask=ok, other=-1)
        ok = ok & (page >= 0) & (page < num_pages)
        page = tl.where(ok, page, 0).to(tl.int64)
        slot = (tl.where(ok, pos, 0) % PAGE).to(tl.int64)
        kdst = KC + page * skb + slot * sks
        vdst = VC + page * svb + slot * svs
    else:
        p64 = tl.where(ok, pos, 0).to(tl.int64)
        kdst = KC + b * skb + p64 * sks
        vdst = VC + b * svb + p64 * svs
    tl.store(ERR, 1, mask=ok == 0)
    t64 = t.to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    for h0 in range(0, Hkv, BLOCK_H):
        h = h0 + tl.arange(0, BLOCK_H)
        h64 = h.to(tl.int64)
        wm = ok & (h < Hkv)
        km = wm[:, None] & (offs_d < E)[None, :]
        kx = tl.load(KN + b * snb + h64[:, None] * snh + t64 * snt + offs_d[None, :] * snd, mask=km)
        tl.store(kdst + h64[:, None] * skh + offs_d[None, :] * skd, kx, mask=km)
        vm = wm[:, None] & (offs_dv < EV)[None, :]
        vx = tl.load(VN + b * svnb + h64[:, None] * svnh + t64 * svnt + offs_dv[None, :] * svnd, mask=vm)
        tl.store(vdst + h64[:, None] * svh + offs_dv[None, :] * svd, vx, mask=vm)


# ---------------------------------------------------------------------------------------------------------
# Host launchers
# ---------------------------------------------------------------------------------------------------------
def _target_programs(cfg: dict, dev) -> int:
    """Programs the split kernel aims for: ``programs_per_sm`` times the device's SM count when the table gives
    it (CUDA devices), else the table's ``target_programs``."""
    pps = cfg.get("programs_per_sm")
    if pps is not None and dev is not None and dev.type == "cuda":
        from .. import cuda
        return int(pps) * int(cuda.get_device_properties(dev.index or 0).multi_processor_count)
    return int(cfg["target_programs"])


def split_plan(batch_heads: int, span: int, cfg: dict, dev=None) -> tuple[int, int]:
    """``(splits, chunk)``: how many key chunks each (sequence, kv head, head block) is cut into and how many
    keys a chunk of a sequence of ``span`` keys holds (a multiple of ``BLOCK_N``, at least ``min_chunk``, with
    ``splits <= max_splits``). The kernels recompute each sequence's chunk from its own length (``_chunk_of``),
    so shorter sequences spread over the same splits.

    The table's ``split_rule`` picks the count, with ``P`` the arch's target programs (:func:`_target_programs`):

    - ``"target"`` (default): ``batch_heads * splits`` approaches ``P``;
    - ``"waves"``: ``P`` is the number of programs the GPU runs at once (SMs times resident programs per SM);
      the fewest splits whose wave efficiency ``w / ceil(w)`` (``w = batch_heads * splits / P`` waves) is within
      ``min_wave_efficiency`` (default 0.85) of the best over all allowed counts (FlashAttention-2's
      ``num_splits_heuristic``), so the last wave is not left mostly idle."""
    bn = cfg["BLOCK_N"]
    mc = _min_chunk(cfg)
    if span <= 0:
        return 1, mc
    target = _target_programs(cfg, dev)
    smax = max(1, min(cfg["max_splits"], -(-span // mc)))

    def cut(s):
        chunk = max(mc, -(-(-(-span // s)) // bn) * bn)
        return -(-span // chunk), chunk

    if cfg.get("split_rule", "target") == "waves":
        eff = {}
        for s in range(1, smax + 1):
            n, chunk = cut(s)
            if n not in eff:
                w = max(1, batch_heads) * n / max(1, target)
                eff[n] = (w / math.ceil(w), chunk)
        best = max(e for e, _ in eff.values())
        floor = float(cfg.get("min_wave_efficiency", 0.85)) * best
        n = min(n for n, (e, _) in eff.items() if e >= floor)
        return n, eff[n][1]
    want = -(-target // max(1, batch_heads))
    return cut(max(1, min(smax, want)))


def _min_chunk(cfg: dict) -> int:
    bn = cfg["BLOCK_N"]
    return max(bn, -(-int(cfg["min_chunk"]) // bn) * bn)


def _rows(t: Tensor) -> tuple[int, int, int]:
    """Strides (batch, head, feature) of a ``[B, H, D]`` or ``[B, H, 1, D]`` tensor."""
    st = t._stride
    return (st[0], st[1], st[3]) if len(st) == 4 else st


class _Plan:
    """Everything :func:`launch_decode` derives from shapes, strides and the config table, computed once per
    launch key (the per-call host work is then two launches and one workspace allocation)."""

    __slots__ = ("grid", "sargs", "meta", "meta_ptr", "cgrid", "cargs", "cmeta", "ws", "acc_dt", "direct", "tma",
                 "tails", "ctail", "fuse", "locks")


_PLANS: dict = {}
_MAX_PLANS = 512


def _config_state():
    """What :func:`launch_config`'s answer depends on besides the key: the arch lookup (tests swap it for an
    arch table) and any :func:`nbxtensor.runtime.configs.override` in force (sweeps)."""
    ovr = getattr(_cfgmod, "_OVERRIDES", {}).get("decode_attention")
    return _cfgmod.arch_of, None if ovr is None else tuple(sorted(ovr.items()))


def _make_plan(q: Tensor, k: Tensor, v: Tensor, lens: Tensor | None, out: Tensor, paged: bool,
               block_table: Tensor | None, max_seqlen: int | None, tma: bool | None) -> _Plan:
    B, Hq, E = q.shape[0], q.shape[1], q.shape[-1]
    EV = v.shape[-1]
    if paged:
        num_pages, page, hkv = k.shape[0], k.shape[1], k.shape[2]
        cap = block_table.shape[1] * page
        ks = (k.stride(0), k.stride(1), k.stride(2), k.stride(3))
        vs = (v.stride(0), v.stride(1), v.stride(2), v.stride(3))
        sbt = block_table.stride(0)
    else:
        hkv, cap = k.shape[1], k.shape[2]
        num_pages, page = 0, 1
        ks = (k.stride(0), k.stride(2), k.stride(1), k.stride(3))
        vs = (v.stride(0), v.stride(2), v.stride(1), v.stride(3))
        sbt = 0
    group = Hq // hkv
    bd, bdv = _pow2(E), _pow2(EV)
    span = cap if max_seqlen is None else max(0, min(cap, int(max_seqlen)))
    dev = q.device
    # batch_kv_heads (sequences x kv heads) lets the table give small batches (batch 1: 4-8 of them, each cut into
    # ~100 splits) settings of their own ("max_batch_kv_heads")
    cfg = launch_config("decode_attention", dev, dtypes=(q.dtype,), head_dim=max(bd, bdv), ctx=max(span, 1),
                        batch_kv_heads=max(B * hkv, 1))
    # query rows per program: the kv head's G query heads padded to 16 (mma.sync's M), or to min_block_h (64:
    # Hopper's wgmma, whose warps split the rows, so the softmax needs no reduction across warps)
    block_h = min(max(_pow2(group), int(cfg.get("min_block_h", 16))), max(cfg["max_block_h"], 16))
    hblk = -(-group // block_h)
    splits, _ = split_plan(B * hkv * hblk, span, cfg, dev)
    mc = _min_chunk(cfg)
    dk = kernel_dtypes(q.dtype)
    p = _Plan()
    p.acc_dt = T.float64 if q.dtype is T.float64 else T.float32
    p.direct = splits == 1
    p.ws = B * Hq * splits * (EV + 2)
    moff = B * Hq * splits * EV
    loff = moff + B * Hq * splits
    # fuse_fold = U (> 0, with fuse_combine): the last program folds the partials in split order, U in flight per
    # step, over the group's rows only; fuse_group = G (> 0): two levels when there are more than G splits (each
    # group of G splits folded by its last program, then the groups by the last group): see _decode_split_kernel
    fold = int(cfg.get("fuse_fold", 0) or 0)
    fgroup = int(cfg.get("fuse_group", 0) or 0)
    fgroup = fgroup if fold > 0 and 0 < fgroup < splits else 0
    ngroups = -(-splits // fgroup) if fgroup else 0
    goff = p.ws
    gmoff = goff + B * Hq * ngroups * EV
    gloff = gmoff + B * Hq * ngroups
    p.ws += B * Hq * ngroups * (EV + 2)
    want_tma = bool(cfg.get("TMA", False)) if tma is None else bool(tma)
    p.tma = want_tma and not paged and tma_ok(k, v)
    p.grid = (B * hkv * hblk, splits)
    p.sargs = (*_rows(q), *ks, *vs, sbt, *_rows(out), Hq, hkv, group, hblk, E, EV, cap, num_pages, splits, mc,
               moff, loff, goff, gmoff, gloff)
    # fuse_combine: the split kernel's last program per (sequence, kv head, head block) combines (no second launch)
    # when there are 2..fuse_combine splits (0: never); lazy_rowsum: the row sums of p are reduced once per split
    p.fuse = not p.direct and splits <= int(cfg.get("fuse_combine", 0))
    p.locks = B * hkv * hblk * (1 + ngroups) if p.fuse else 0
    # the fused combine's tiles [BLOCK_H, fs, fdv]: all splits in one block when they fit fuse_block_s (default
    # 32), and columns per step so that a tile is ~32 floats per thread (fuse_dv overrides)
    fs = min(_pow2(splits, 1), _pow2(int(cfg.get("fuse_block_s", 32)), 1))
    nw = int(cfg.get("num_warps", 4))
    fdv = cfg.get("fuse_dv") or max(1, 32 * 32 * nw // (block_h * fs))
    fdv = min(bdv, 1 << (max(1, int(fdv)).bit_length() - 1))  # a power of two, at most the padded value dim
    p.meta = dict(HAS_LENS=lens is not None, PAGED=paged, PAGE=page, DIRECT=p.direct, TMA=p.tma, BLOCK_H=block_h,
                  BLOCK_N=cfg["BLOCK_N"], BLOCK_D=bd, BLOCK_DV=bdv, EVEN_D=E == bd, EVEN_DV=EV == bdv, **dk,
                  **{o: cfg[o] for o in ("num_warps", "num_stages", "maxnreg") if o in cfg})
    # the new constexprs only when set (their defaults are off): the table's launches keep their specialization
    if cfg.get("lazy_rowsum", False):
        p.meta["LAZY_L"] = True
    if p.fuse and fold > 0:
        p.meta.update(FUSE=True, FOLD=fold, FOLD_H=min(block_h, _pow2(group, 1)), FOLD_G=fgroup)
    elif p.fuse:
        p.meta.update(FUSE=True, FUSE_S=fs, FUSE_DV=fdv, FUSE_ONE=_pow2(splits, 1) <= fs)
    pdl = pdl_settings(cfg, dev)
    p.meta.update(pdl)
    p.meta_ptr = {**p.meta, "TMA": False}  # a launch whose key or value base is not 16-byte aligned
    cdv = min(bdv, _pow2(cfg.get("combine_dv", bdv)))
    p.cgrid = (B * Hq, -(-EV // cdv))
    p.cargs = (splits, Hq, EV, cap, mc, moff, loff, *_rows(out))
    p.cmeta = dict(HAS_LENS=lens is not None, SPLIT_N=cfg["BLOCK_N"], BLOCK_S=min(_pow2(splits, 1), cfg["BLOCK_S"]),
                   BLOCK_DV=cdv, ACC=dk["ACC"], **pdl)
    # combine_one: when every split fits one BLOCK_S block, the combine loads m, l and acc once, all at once (one
    # L2 round trip instead of two passes)
    if cfg.get("combine_one", False) and _pow2(splits, 1) <= p.cmeta["BLOCK_S"]:
        p.cmeta["ONE"] = True
    if "combine_warps" in cfg:
        p.cmeta["num_warps"] = cfg["combine_warps"]
    p.tails = {}    # CUDA launches: (scale, meta) -> planned Tail of the split kernel (see launch_decode)
    p.ctail = None  # the combine kernel's planned Tail
    return p


def _plan_for(q: Tensor, k: Tensor, v: Tensor, lens: Tensor | None, out: Tensor, paged: bool,
              block_table: Tensor | None, max_seqlen: int | None, tma: bool | None) -> _Plan:
    key = (q._dtype, q._shape, q._stride, k._shape, k._stride, v._shape, v._stride, out._shape, out._stride,
           None if lens is None else lens._dtype, paged,
           None if block_table is None else (block_table._shape, block_table._stride),
           max_seqlen, q._storage.device, tma, _config_state())
    p = _PLANS.get(key)
    if p is None:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        p = _PLANS[key] = _make_plan(q, k, v, lens, out, paged, block_table, max_seqlen, tma)
    return p


def launch_plan(q: Tensor, k: Tensor, v: Tensor, lens: Tensor | None, out: Tensor, *, paged: bool,
                block_table: Tensor | None = None, max_seqlen: int | None = None, tma: bool | None = None) -> dict:
    """What :func:`launch_decode` would launch for these arguments (for benchmarks and tests): ``splits``, the
    split kernel's ``grid`` and constexprs/options ``meta``, the combine kernel's ``combine_grid`` and
    ``combine_meta`` (None with one split or a fused combine), the workspace's float32 elements ``workspace`` and
    ``fused`` (the split kernel combines: ``fuse_combine``)."""
    p = _plan_for(q, k, v, lens, out, paged, block_table, max_seqlen, tma)
    return dict(splits=p.grid[1], grid=p.grid, meta=dict(p.meta), combine_grid=None if p.direct or p.fuse else p.cgrid,
                combine_meta=None if p.direct or p.fuse else dict(p.cmeta), workspace=0 if p.direct else p.ws,
                fused=p.fuse)


def launch_decode(q: Tensor, k: Tensor, v: Tensor, lens: Tensor | None, out: Tensor, *, scale: float, paged: bool,
                  block_table: Tensor | None = None, max_seqlen: int | None = None, tma: bool | None = None) -> None:
    """Launch decode attention: ``q [B, Hq, E]`` (or ``[B, Hq, 1, E]``) into ``out [B, Hq, Ev]`` (or ``[B, Hq,
    1, Ev]``); ``k``/``v`` a contiguous cache ``[B, Hkv, cap, E]`` or (``paged``) pages ``[num_blocks,
    block_size, Hkv, E]`` with ``block_table``; ``lens [B]`` (int32/int64) or None (every sequence fills the
    cache); ``max_seqlen`` sizes the split count (lengths beyond it are still attended in full). ``tma``:
    keys and values of a contiguous 16-bit cache through tensor descriptors (None: the arch table's ``"TMA"``).

    The host work that depends only on shapes, strides and the config table is planned once per launch key and
    cached (:func:`launch_plan` shows it): a call costs two launches and one workspace allocation (one launch
    when there is one split or the table fuses the combine)."""
    p = _plan_for(q, k, v, lens, out, paged, block_table, max_seqlen, tma)
    ln = q if lens is None else lens
    bt = block_table if paged else q  # an unused pointer when not paged
    ws = out if p.direct else new_empty((p.ws,), p.acc_dt, q.device)
    locks = _locks(q._storage.device, p.locks) if p.fuse else out  # an unused pointer when not fused
    meta = p.meta
    if p.tma and (k.data_ptr() | v.data_ptr()) & 15:
        meta = p.meta_ptr
    if q._storage.device.type == "cuda":
        # planned tails: the launcher keys them by identity instead of re-deriving ~30 trailing arguments' and the
        # keywords' specialization every call (the scale is the split kernel's last argument: keyed here)
        sc = float(scale * LOG2E)
        tk = (sc, meta is p.meta)
        tail = p.tails.get(tk)
        if tail is None:
            if len(p.tails) >= 16:
                p.tails.clear()
            tail = p.tails[tk] = Tail((*p.sargs, sc), meta)
        launch_tail(_decode_split_kernel, p.grid, (q, k, v, ln, bt, ws, out, locks), tail)
        if not p.direct and not p.fuse:
            if p.ctail is None:
                p.ctail = Tail(p.cargs, p.cmeta)
            launch_tail(_decode_combine_kernel, p.cgrid, (ws, out, ln), p.ctail)
        return
    launch(_decode_split_kernel, p.grid, q, k, v, ln, bt, ws, out, locks, *p.sargs, float(scale * LOG2E), **meta)
    if not p.direct and not p.fuse:
        launch(_decode_combine_kernel, p.cgrid, ws, out, ln, *p.cargs, **p.cmeta)


def sdpa_decode(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                enable_gqa=False) -> Tensor | None:
    """``scaled_dot_product_attention`` of one decode step on the short host path, or None when the call is not
    one (the caller then takes the general path, which checks and reports everything).

    A decode step here: 4-d ``query [B, Hq, 1, E]``, ``key [B, Hkv, S, E]``, ``value [B, Hkv, S, Ev]`` (no
    broadcast batch dims; ``S >= 1``) of one floating dtype on one device where the Triton kernels run (CUDA, or
    the cpu device under the interpreter tier), no ``attn_mask``, ``dropout_p == 0``, ``is_causal`` only with
    ``S == 1`` (PyTorch's top-left causal row 0 sees key 0 only), ``Hq == Hkv`` or ``enable_gqa`` with ``Hkv``
    dividing ``Hq``. Returns ``[B, Hq, 1, Ev]``: the same kernels and bits as the general path's decode route,
    without its broadcasting and reshaping (about 10x less host time per call)."""
    if attn_mask is not None or dropout_p != 0.0 or type(query) is not Tensor or type(key) is not Tensor \
            or type(value) is not Tensor:
        return None
    qs, ks, vs = query._shape, key._shape, value._shape
    if len(qs) != 4 or len(ks) != 4 or len(vs) != 4 or qs[2] != 1:
        return None
    B, hq, _, E = qs
    S, hkv, EV = ks[2], ks[1], vs[3]
    if ks[0] != B or vs[0] != B or vs[1] != hkv or vs[2] != S or ks[3] != E or S < 1 or hkv < 1 \
            or (is_causal and S != 1) or hq % hkv or (hq != hkv and not enable_gqa):
        return None
    dt = query._dtype
    if dt not in FLOATS or key._dtype is not dt or value._dtype is not dt:
        return None
    dev = query._storage.device
    if key._storage.device != dev or value._storage.device != dev or (dev.type == "cpu" and not interpreting()):
        return None
    out = new_empty((B, hq, 1, EV), dt, dev)
    if out.numel():
        sc = (1.0 / math.sqrt(E) if E > 0 else 1.0) if scale is None else float(scale)
        launch_decode(query, key, value, None, out, scale=sc, paged=False)
    return out


def launch_append(kc: Tensor, vc: Tensor, lens: Tensor, kn: Tensor, vn: Tensor, *, paged: bool,
                  block_table: Tensor | None, err: Tensor) -> None:
    """Append ``kn [B, Hkv, T, E]`` / ``vn`` at positions ``lens[b] + t`` of a contiguous cache or of pages.

    Grid, the trailing sizes and strides and the keywords are planned once per layout (a
    :class:`~nbxtensor.runtime.launcher.Tail`, which CUDA launches pass by identity)."""
    key = (kn._dtype, kn._shape, kn._stride, vn._shape, vn._stride, kc._dtype, kc._shape, kc._stride, vc._shape,
           vc._stride, paged, None if block_table is None else (block_table._shape, block_table._stride),
           kc._storage.device, _cfgmod.state(), launch_config)
    hit = _APPEND_PLANS.get(key)
    if hit is None:
        B, hkv, T_, E = kn.shape
        EV = vn.shape[-1]
        if paged:
            num_pages, page = kc.shape[0], kc.shape[1]
            cap = block_table.shape[1] * page
            ks = (kc.stride(0), kc.stride(1), kc.stride(2), kc.stride(3))
            vs = (vc.stride(0), vc.stride(1), vc.stride(2), vc.stride(3))
            sbt = block_table.stride(0)
        else:
            num_pages, page, cap = 0, 1, kc.shape[2]
            ks = (kc.stride(0), kc.stride(2), kc.stride(1), kc.stride(3))
            vs = (vc.stride(0), vc.stride(2), vc.stride(1), vc.stride(3))
            sbt = 0
        cfg = launch_config("kv_append", kc.device, dtypes=(kc.dtype,), head_dim=max(E, EV))
        bh = min(_pow2(hkv, 1), cfg.pop("max_block_h"))
        cfg.update(pdl_settings(cfg, kc.device))
        if len(_APPEND_PLANS) >= 1024:
            _APPEND_PLANS.clear()
        hit = _APPEND_PLANS[key] = ((B * T_,), Tail(
            (*kn.stride(), *vn.stride(), *ks, *vs, sbt, T_, hkv, E, EV, cap, num_pages),
            dict(PAGED=paged, PAGE=page, BLOCK_H=bh, BLOCK_D=_pow2(E, 1), BLOCK_DV=_pow2(EV, 1), **cfg)))
    grid, tail = hit
    args = (kn, vn, kc, vc, lens, block_table if paged else lens, err)
    if kc._storage.device.type == "cuda":
        launch_tail(_kv_append_kernel, grid, args, tail)
    else:
        launch(_kv_append_kernel, grid, *args, *tail.args, **tail.meta)


_APPEND_PLANS: dict = {}


# ---------------------------------------------------------------------------------------------------------
# CPU implementation and oracles
# ---------------------------------------------------------------------------------------------------------
def gather_pages(pages: np.ndarray, block_table: np.ndarray, b: int, n: int) -> np.ndarray:
    """Rows ``0..n-1`` of sequence ``b`` from a paged cache ``[num_blocks, block_size, Hkv, D]`` as
    ``[Hkv, n, D]``."""
    bs = pages.shape[1]
    pos = np.arange(n)
    rows = pages[block_table[b, pos // bs], pos % bs]  # [n, Hkv, D]
    return np.swapaxes(rows, 0, 1)


def _lens_host(lens, B: int, cap: int) -> np.ndarray:
    if lens is None:
        return np.full(B, cap, dtype=np.int64)
    return np.clip(np.asarray(lens, dtype=np.int64).reshape(-1), 0, cap)


def _decode_rows(q: np.ndarray, keys: np.ndarray, vals: np.ndarray, scale: float, dtype) -> np.ndarray:
    """``q [Hq, E]`` over ``keys [Hkv, n, E]`` -> ``[Hq, Ev]`` in ``dtype`` (float32 or float64)."""
    hq, hkv = q.shape[0], keys.shape[0]
    g = hq // hkv
    kk = np.repeat(keys, g, axis=0).astype(dtype)
    vv = np.repeat(vals, g, axis=0).astype(dtype)
    s = np.einsum("he,hne->hn", q.astype(dtype), kk) * dtype(scale)
    p = _softmax_rows(s).astype(dtype)
    return np.einsum("hn,hnd->hd", p, vv)


def _decode_cpu(q: Tensor, k: Tensor, v: Tensor, lens: Tensor | None, out: Tensor, *, scale: float, paged: bool,
                block_table: Tensor | None = None, max_seqlen: int | None = None) -> None:
    acc = T.float64 if q.dtype is T.float64 else T.float32
    qa, ka, va = (cast_array(np.asarray(host_view(t)), t.dtype, acc) for t in (q, k, v))
    qa = qa.reshape(qa.shape[0], qa.shape[1], qa.shape[-1])  # [B, Hq, 1, E] -> [B, Hq, E]
    B = q.shape[0]
    cap = block_table.shape[1] * k.shape[1] if paged else k.shape[2]
    n_b = _lens_host(None if lens is None else host_view(lens), B, cap)
    bt = np.asarray(host_view(block_table)) if paged else None
    res = np.zeros((B, q.shape[1], out.shape[-1]), dtype=acc.numpy)
    with np.errstate(all="ignore"):
        for b in range(B):
            n = int(n_b[b])
            if paged:
                keys, vals = gather_pages(ka, bt, b, n), gather_pages(va, bt, b, n)
            else:
                keys, vals = ka[b, :, :n], va[b, :, :n]
            res[b] = _decode_rows(qa[b], keys, vals, scale, acc.numpy.type)
    host_view(out)[...] = cast_array(res, acc, out.dtype).reshape(tuple(out.shape))


def _f64(a) -> np.ndarray:
    a = np.asarray(a)
    return cast_array(a, T.dtype_from(a.dtype), T.float64)


def decode_oracle(q, k_cache, v_cache, cache_seqlens=None, scale=None) -> np.ndarray:
    """float64 decode attention on host arrays: ``q [B, Hq, E]``, contiguous caches ``[B, Hkv, cap, D]``,
    lengths ``[B]`` (None: full)."""
    qf, kf, vf = (_f64(a) for a in (q, k_cache, v_cache))
    B, _, E = qf.shape
    n_b = _lens_host(cache_seqlens, B, kf.shape[2])
    sc = 1.0 / math.sqrt(E) if scale is None else scale
    with np.errstate(all="ignore"):
        return np.stack([_decode_rows(qf[b], kf[b, :, :n_b[b]], vf[b, :, :n_b[b]], sc, np.float64) for b in range(B)])


def paged_decode_oracle(q, k_pages, v_pages, block_table, cache_seqlens, scale=None) -> np.ndarray:
    """float64 decode attention over a paged cache (host arrays), by gathering each sequence's rows."""
    qf, kf, vf = (_f64(a) for a in (q, k_pages, v_pages))
    bt = np.asarray(block_table)
    B, _, E = qf.shape
    n_b = _lens_host(cache_seqlens, B, bt.shape[1] * kf.shape[1])
    sc = 1.0 / math.sqrt(E) if scale is None else scale
    with np.errstate(all="ignore"):
        return np.stack([_decode_rows(qf[b], gather_pages(kf, bt, b, int(n_b[b])), gather_pages(vf, bt, b, int(n_b[b])),
                                      sc, np.float64) for b in range(B)])


def _append_cpu(kc: Tensor, vc: Tensor, lens: Tensor, kn: Tensor, vn: Tensor, *, paged: bool,
                block_table: Tensor | None, err: Tensor) -> None:
    kca, vca = host_view(kc), host_view(vc)
    kna, vna = np.asarray(host_view(kn)), np.asarray(host_view(vn))
    la = np.asarray(host_view(lens), dtype=np.int64)
    bt = np.asarray(host_view(block_table)) if paged else None
    B, _, T_, _ = kn.shape
    bad = False
    for b in range(B):
        for t in range(T_):
            p = int(la[b]) + t
            if paged:
                bs = kc.shape[1]
                ok = 0 <= p < bt.shape[1] * bs
                page = int(bt[b, p // bs]) if ok else -1
                ok = ok and 0 <= page < kc.shape[0]
                if ok:
                    kca[page, p % bs] = kna[b, :, t]
                    vca[page, p % bs] = vna[b, :, t]
            else:
                ok = 0 <= p < kc.shape[2]
                if ok:
                    kca[b, :, p] = kna[b, :, t]
                    vca[b, :, p] = vna[b, :, t]
            bad = bad or not ok
    if bad:
        host_view(err)[...] = 1


# ---------------------------------------------------------------------------------------------------------
# Drivers
# ---------------------------------------------------------------------------------------------------------
_UNREAD: dict = {}


def _unread_flag(dev) -> Tensor:
    """A per-device int32 flag that kernels may set and nothing reads (unchecked appends)."""
    t = _UNREAD.get(dev)
    if t is None:
        t = _UNREAD[dev] = new_empty((1,), T.int32, dev)
    return t


def _check_same_device(fn: str, **tensors) -> None:
    first = None
    for n, t in tensors.items():
        if isinstance(t, Tensor):
            d = t._storage.device
            if first is None:
                first = d
            elif d is not first:
                check(d == first, lambda: f"{fn}: Expected all tensors to be on the same device, but argument '{n}' "
                      f"is on {d} and the query on {first}")


def _check_lens(fn: str, lens, B: int, name: str = "cache_seqlens") -> None:
    check(isinstance(lens, Tensor), lambda: f"{fn}(): argument '{name}' must be Tensor, not {type(lens).__name__}",
          TypeError)
    check(lens.dtype in INDEX_DTYPES, lambda: f"{fn}: {name} must be int32 or int64, got {lens.dtype.name}")
    check(tuple(lens.shape) == (B,), lambda: f"{fn}: {name} must have shape [{B}] (one length per sequence), got "
          f"{list(lens.shape)}")


def _check_query(fn: str, query: Tensor) -> bool:
    """Whether ``query`` is ``[batch, heads, 1, head_dim]`` (else ``[batch, heads, head_dim]``); the kernels and
    the cpu implementation take either form as it is (no indexing on the host path)."""
    check(query.ndim in (3, 4) and (query.ndim == 3 or query.shape[2] == 1), lambda: f"{fn}: query must be "
          f"[batch, heads, head_dim] or [batch, heads, 1, head_dim] (one token per sequence), got {list(query.shape)}")
    return query.ndim == 4


def _check_heads(fn: str, hq: int, hkv: int, hv: int) -> None:
    check(hkv == hv, lambda: f"{fn}: key and value caches must have the same number of heads, got {hkv} and {hv}")
    check(hkv > 0 and hq % hkv == 0, lambda: f"{fn}: the number of kv heads ({hkv}) must divide the number of query "
          f"heads ({hq})")


def _validate(fn: str, lens: Tensor | None, cap: int, block_table: Tensor | None = None, num_pages: int = 0,
              page: int = 1) -> None:
    """Host checks of device lengths and pages (one device-to-host copy each)."""
    if lens is None:
        return
    la = lens.cpu().numpy().astype(np.int64)
    bad = np.nonzero((la < 0) | (la > cap))[0]
    check(bad.size == 0, lambda: f"{fn}: cache_seqlens[{int(bad[0])}] = {int(la[bad[0]])} is outside [0, {cap}] "
          "(the cache's capacity)", IndexError)
    if block_table is not None:
        bt = block_table.cpu().numpy().astype(np.int64)
        for b, n in enumerate(la):
            used = bt[b, :(-(-int(n) // page))]
            wrong = np.nonzero((used < 0) | (used >= num_pages))[0]
            check(wrong.size == 0, lambda: f"{fn}: block_table[{b}, {int(wrong[0])}] = {int(used[wrong[0]])} is not a "
                  f"page id in [0, {num_pages})", IndexError)


def _scale(scale, E: int) -> float:
    return float(1.0 / math.sqrt(E) if scale is None else scale)


def _decode_driver(rec, args, *, out=None, inplace=None):
    fn = rec.name
    paged = fn == "paged_decode_attention"
    query = args["query"]
    kc = args["key_pages" if paged else "key_cache"]
    vc = args["value_pages" if paged else "value_cache"]
    lens = args["cache_seqlens"]
    bt = args.get("block_table")
    _check_same_device(fn, query=query, key=kc, value=vc, cache_seqlens=lens, block_table=bt)
    check(query.dtype in FLOATS and query.dtype == kc.dtype == vc.dtype, lambda: f"{fn}: query, key and value must "
          f"share one floating dtype, got {query.dtype.name}, {kc.dtype.name}, {vc.dtype.name}")
    was4 = _check_query(fn, query)
    B, Hq, E = query.shape[0], query.shape[1], query.shape[-1]
    check(kc.ndim == 4 and vc.ndim == 4, lambda: f"{fn}: caches must be 4-d, got {list(kc.shape)} and {list(vc.shape)}")
    if paged:
        check(isinstance(bt, Tensor) and bt.dtype is T.int32 and bt.ndim == 2 and bt.shape[0] == B,
              lambda: f"{fn}: block_table must be an int32 [batch={B}, max_blocks] tensor, got "
              f"{getattr(bt, 'dtype', None)} {list(getattr(bt, 'shape', []))}")
        check(kc.shape[:2] == vc.shape[:2], lambda: f"{fn}: key and value pages differ in [num_blocks, block_size]: "
              f"{list(kc.shape)} vs {list(vc.shape)}")
        page = kc.shape[1]
        check(page > 0 and page & (page - 1) == 0, lambda: f"{fn}: block_size must be a power of two, got {page}")
        hkv, hv = kc.shape[2], vc.shape[2]
        cap = bt.shape[1] * page
        _check_lens(fn, lens, B)
    else:
        check(kc.shape[0] == B and vc.shape[0] == B and kc.shape[2] == vc.shape[2], lambda: f"{fn}: caches must be "
              f"[batch={B}, kv_heads, max_len, head_dim] with equal max_len, got {list(kc.shape)} and {list(vc.shape)}")
        hkv, hv = kc.shape[1], vc.shape[1]
        cap = kc.shape[2]
        if lens is not None:
            _check_lens(fn, lens, B)
    check(kc.shape[3] == E, lambda: f"{fn}: key head_dim ({kc.shape[3]}) must equal the query's ({E})")
    _check_heads(fn, Hq, hkv, hv)
    if args.get("validate"):
        _validate(fn, lens, cap, bt if paged else None, kc.shape[0] if paged else 0, kc.shape[1] if paged else 1)
    EV = vc.shape[3]
    res = new_empty((B, Hq, 1, EV) if was4 else (B, Hq, EV), query.dtype, query.device)
    if res.numel():
        registry.impl(fn, query.device.type)(query, kc, vc, lens, res, scale=_scale(args["scale"], E), paged=paged,
                                             block_table=bt if paged else None, max_seqlen=args.get("max_seqlen"))
    return res


def _append_driver(rec, args, *, out=None, inplace=None):
    fn = rec.name
    paged = fn == "paged_kv_append"
    kc = args["key_pages" if paged else "key_cache"]
    vc = args["value_pages" if paged else "value_cache"]
    kn, vn, lens, bt = args["key"], args["value"], args["cache_seqlens"], args.get("block_table")
    # the shape, dtype and device checks depend on the arguments' signature only: one that passed is not rechecked
    sig = dispatch.tensor_sig((fn,), (kc, vc, kn, vn, lens, bt))
    if sig is None or sig not in _APPEND_VALID:
        _check_same_device(fn, key_cache=kc, value_cache=vc, key=kn, value=vn, cache_seqlens=lens, block_table=bt)
        check(kn.ndim == 4 and vn.ndim == 4 and kn.shape[:3] == vn.shape[:3], lambda: f"{fn}: key and value must be "
              f"[batch, kv_heads, new_tokens, head_dim] alike, got {list(kn.shape)} and {list(vn.shape)}")
        B, hkv, _, E = kn.shape
        check(kc.dtype == vc.dtype == kn.dtype == vn.dtype, lambda: f"{fn}: caches and new rows must share one dtype, "
              f"got {kc.dtype.name}, {vc.dtype.name}, {kn.dtype.name}, {vn.dtype.name}")
        _check_lens(fn, lens, B)
        if paged:
            check(isinstance(bt, Tensor) and bt.dtype is T.int32 and bt.ndim == 2 and bt.shape[0] == B,
                  lambda: f"{fn}: block_table must be an int32 [batch={B}, max_blocks] tensor")
            page = kc.shape[1]
            check(page > 0 and page & (page - 1) == 0, lambda: f"{fn}: block_size must be a power of two, got {page}")
            check(kc.shape[2] == hkv and vc.shape[2] == hkv and kc.shape[3] == E and vc.shape[3] == vn.shape[3],
                  lambda: f"{fn}: pages {list(kc.shape)} / {list(vc.shape)} do not match new rows {list(kn.shape)} / "
                  f"{list(vn.shape)} in heads or head_dim")
        else:
            check(kc.shape[0] == B and kc.shape[1] == hkv and kc.shape[3] == E and vc.shape[:3] == kc.shape[:3]
                  and vc.shape[3] == vn.shape[3], lambda: f"{fn}: caches {list(kc.shape)} / {list(vc.shape)} do not "
                  f"match new rows {list(kn.shape)} / {list(vn.shape)}")
        if sig is not None:
            if len(_APPEND_VALID) >= 1024:
                _APPEND_VALID.clear()
            _APPEND_VALID.add(sig)
    for name, t in (("key cache", kc), ("value cache", vc)):
        dispatch_check_writable(t, fn, name)
    # The error flag is read (a sync) only with check=True; unchecked appends (a decode step's) write to a per-device
    # flag nobody reads, so they need neither a zeroing launch nor an allocation.
    err = new_empty((1,), T.int32, kc.device).zero_() if args.get("check", True) else _unread_flag(kc.device)
    if kn.numel() or vn.numel():
        registry.impl(fn, kc.device.type)(kc, vc, lens, kn, vn, paged=paged, block_table=bt if paged else None,
                                          err=err)
    if args.get("check", True):
        check(int(err.item()) == 0, lambda: f"{fn}: a new row's position (cache_seqlens[b] + t) lies outside the cache "
              "(past its capacity, or in a block_table entry that is not a page id); those rows were not written",
              IndexError)
    return kc, vc


_APPEND_VALID: set = set()


def dispatch_check_writable(t: Tensor, fn: str, name: str) -> None:
    check(not t.untyped_storage().readonly, lambda: f"{fn}: the {name} is read-only")


# ---------------------------------------------------------------------------------------------------------
# Costs and records
# ---------------------------------------------------------------------------------------------------------
def _decode_cost(query, key_cache, value_cache, cache_seqlens=None, scale=None, max_seqlen=None, validate=False):
    """Bytes: every key and value row up to the capacity (``max_seqlen`` when given), read once (an upper
    bound: the lengths live on the device), plus q, the lengths and the output; flops ``2 * B * Hq * n *
    (E + Ev)``. Workspace (the split partials) is not counted: it is small and stays in L2."""
    span = key_cache.shape[2] if max_seqlen is None else min(key_cache.shape[2], max_seqlen)
    B, hkv, E, EV = key_cache.shape[0], key_cache.shape[1], key_cache.shape[3], value_cache.shape[3]
    Hq = query.shape[1]
    return Cost(flops=2 * B * Hq * span * (E + EV),
                bytes_read=B * hkv * span * (E + EV) * key_cache.dtype.itemsize + query.numel() * query.dtype.itemsize,
                bytes_written=B * Hq * EV * query.dtype.itemsize)


def _paged_cost(query, key_pages, value_pages, block_table, cache_seqlens, scale=None, max_seqlen=None,
                validate=False):
    """As :func:`_decode_cost` over ``max_blocks * block_size`` positions per sequence, plus the block table."""
    span = block_table.shape[1] * key_pages.shape[1]
    if max_seqlen is not None:
        span = min(span, max_seqlen)
    B, Hq = query.shape[0], query.shape[1]
    hkv, E, EV = key_pages.shape[2], key_pages.shape[3], value_pages.shape[3]
    return Cost(flops=2 * B * Hq * span * (E + EV),
                bytes_read=B * hkv * span * (E + EV) * key_pages.dtype.itemsize + query.numel() * query.dtype.itemsize
                + block_table.numel() * 4,
                bytes_written=B * Hq * EV * query.dtype.itemsize)


def _append_cost(key, value, **_):
    """Each new row read once and written once."""
    n = key.numel() * key.dtype.itemsize + value.numel() * value.dtype.itemsize
    return Cost(bytes_read=n, bytes_written=n)


def _decode_oracle_rec(query, key_cache, value_cache, cache_seqlens=None, scale=None, **_):
    q = np.asarray(query)
    return decode_oracle(q[:, :, 0] if q.ndim == 4 else q, key_cache, value_cache, cache_seqlens, scale)


def _paged_oracle_rec(query, key_pages, value_pages, block_table, cache_seqlens, scale=None, **_):
    q = np.asarray(query)
    return paged_decode_oracle(q[:, :, 0] if q.ndim == 4 else q, key_pages, value_pages, block_table, cache_seqlens,
                               scale)


def _cpu_decode(q, k, v, lens, out, **params):
    _decode_cpu(q, k, v, lens, out, **params)


def _triton_decode(q, k, v, lens, out, **params):
    launch_decode(q, k, v, lens, out, **params)


def _t(*shape, dtype=T.float32):
    return lambda dev: new_empty(shape, dtype, dev).fill_(0)


_DECODE_ERRORS = [
    ("query rank", (_t(2, 4), _t(2, 2, 8, 4), _t(2, 2, 8, 4)), {}, RuntimeError, "one token per sequence"),
    ("heads", (_t(2, 3, 4), _t(2, 2, 8, 4), _t(2, 2, 8, 4)), {}, RuntimeError, "must divide"),
    ("lens dtype", (_t(2, 4, 4), _t(2, 2, 8, 4), _t(2, 2, 8, 4), _t(2)), {}, RuntimeError, "int32 or int64"),
    ("lens shape", (_t(2, 4, 4), _t(2, 2, 8, 4), _t(2, 2, 8, 4), _t(3, dtype=T.int32)), {}, RuntimeError,
     "one length per sequence"),
    ("dtype", (_t(2, 4, 4), _t(2, 2, 8, 4, dtype=T.float16), _t(2, 2, 8, 4)), {}, RuntimeError, "one floating dtype"),
    ("lens beyond capacity", (_t(2, 4, 4), _t(2, 2, 8, 4), _t(2, 2, 8, 4),
                              lambda dev: from_host_array(np.array([3, 9], np.int32), T.int32, _device(dev))),
     {"validate": True}, IndexError, "outside"),
]

_PAGED_ERRORS = [
    ("block table dtype", (_t(2, 4, 4), _t(4, 16, 2, 4), _t(4, 16, 2, 4), _t(2, 2), _t(2, dtype=T.int32)), {},
     RuntimeError, "block_table"),
    ("block size", (_t(2, 4, 4), _t(4, 12, 2, 4), _t(4, 12, 2, 4), _t(2, 2, dtype=T.int32), _t(2, dtype=T.int32)), {},
     RuntimeError, "power of two"),
    ("bad page", (_t(2, 4, 4), _t(4, 16, 2, 4), _t(4, 16, 2, 4),
                  lambda dev: from_host_array(np.array([[0, 1], [7, 3]], np.int32), T.int32, _device(dev)),
                  lambda dev: from_host_array(np.array([20, 5], np.int32), T.int32, _device(dev))),
     {"validate": True}, IndexError, "page id"),
]

for _name, _schema, _cost_fn, _oracle_fn, _errs in (
        ("decode_attention", "decode_attention(Tensor query, Tensor key_cache, Tensor value_cache, "
         "Tensor? cache_seqlens=None, *, float? scale=None, int? max_seqlen=None, bool validate=False)",
         _decode_cost, _decode_oracle_rec, _DECODE_ERRORS),
        ("paged_decode_attention", "paged_decode_attention(Tensor query, Tensor key_pages, Tensor value_pages, "
         "Tensor block_table, Tensor cache_seqlens, *, float? scale=None, int? max_seqlen=None, bool validate=False)",
         _paged_cost, _paged_oracle_rec, _PAGED_ERRORS)):
    register(OpRecord(name=_name, family="decode_attention", cpu=_cpu_decode, triton=_triton_decode,
                      oracle=_oracle_fn, cost=_cost_fn,
                      extra=dict(schema=_schema, driver=_decode_driver, dtypes=FLOATS, namespaces=("functional",),
                                 method=False, errors=_errs, doc=__doc__.split("\n\n")[0])))

_APPEND_ERRORS = [
    ("position beyond capacity", (_t(2, 2, 4, 4), _t(2, 2, 4, 4),
                                  lambda dev: from_host_array(np.array([3, 0], np.int32), T.int32, _device(dev)),
                                  _t(2, 2, 2, 4), _t(2, 2, 2, 4)), {}, IndexError, "outside the cache"),
    ("dtype", (_t(2, 2, 4, 4), _t(2, 2, 4, 4), _t(2, dtype=T.int32), _t(2, 2, 1, 4, dtype=T.float16),
               _t(2, 2, 1, 4)), {}, RuntimeError, "one dtype"),
]

_PAGED_APPEND_ERRORS = [
    ("page id", (_t(4, 16, 2, 4), _t(4, 16, 2, 4),
                 lambda dev: from_host_array(np.array([[0, 9], [1, 2]], np.int32), T.int32, _device(dev)),
                 lambda dev: from_host_array(np.array([16, 0], np.int32), T.int32, _device(dev)),
                 _t(2, 2, 1, 4), _t(2, 2, 1, 4)), {}, IndexError, "outside the cache"),
]


def _cpu_append(kc, vc, lens, kn, vn, **params):
    _append_cpu(kc, vc, lens, kn, vn, **params)


def _triton_append(kc, vc, lens, kn, vn, **params):
    launch_append(kc, vc, lens, kn, vn, **params)


_APPEND_NOTE = "an exact copy of rows into the cache: compared bit for bit with the new rows"
register(OpRecord(
    name="kv_cache_append", family="decode_attention", cpu=_cpu_append, triton=_triton_append, oracle_note=_APPEND_NOTE,
    cost=_append_cost,
    extra=dict(schema="kv_cache_append(Tensor key_cache, Tensor value_cache, Tensor cache_seqlens, Tensor key, "
                      "Tensor value, *, bool check=True)", driver=_append_driver, namespaces=("functional",),
               method=False, errors=_APPEND_ERRORS,
               doc="Write ``key``/``value`` ``[B, Hkv, T, D]`` into a contiguous cache ``[B, Hkv, max_len, D]`` at "
                   "positions ``cache_seqlens[b] + t`` (lengths are not advanced). Returns the caches. Raises "
                   "IndexError (with ``check=True``) when a position is past the capacity.")))
register(OpRecord(
    name="paged_kv_append", family="decode_attention", cpu=_cpu_append, triton=_triton_append,
    oracle_note=_APPEND_NOTE, cost=_append_cost,
    extra=dict(schema="paged_kv_append(Tensor key_pages, Tensor value_pages, Tensor block_table, "
                      "Tensor cache_seqlens, Tensor key, Tensor value, *, bool check=True)", driver=_append_driver,
               namespaces=("functional",), method=False, errors=_PAGED_APPEND_ERRORS,
               doc="Write ``key``/``value`` ``[B, Hkv, T, D]`` into pages ``[num_blocks, block_size, Hkv, D]`` at "
                   "positions ``cache_seqlens[b] + t`` through ``block_table``. Returns the pages. Raises IndexError "
                   "(with ``check=True``) for a position past the table or an entry that is not a page id.")))
del _name, _schema, _cost_fn, _oracle_fn, _errs


# ---------------------------------------------------------------------------------------------------------
# A small page allocator
# ---------------------------------------------------------------------------------------------------------
class PagedKVCache:
    """Pages for the keys and values of several sequences and layers, with host-side bookkeeping.

    Layout per layer: ``k[layer]``, ``v[layer]`` of shape ``[num_blocks, block_size, kv_heads, head_dim]``.
    Sequences get pages from a free list as they grow; :meth:`begin_step` builds the step's block table and
    lengths on the host (checked there, then copied to the device once per step), :meth:`append` writes the
    step's new rows of one layer, :meth:`decode` attends one query token per sequence over one layer, and
    :meth:`end_step` advances the lengths.

    Example::

        cache = PagedKVCache(num_blocks=64, block_size=16, kv_heads=2, head_dim=64, num_layers=1,
                             dtype=nbx.float16, device="cuda")
        s = cache.add_sequence()
        cache.begin_step([s], new_tokens=1)
        cache.append(0, k_new, v_new)          # [1, 2, 1, 64]
        out = cache.decode(0, q)               # [1, Hq, 64]
        cache.end_step()

    Raises:
        RuntimeError: out of pages; a sequence that would pass ``max_blocks_per_seq`` pages; unknown sequence ids.
    """

    def __init__(self, num_blocks: int, block_size: int, kv_heads: int, head_dim: int, *, num_layers: int = 1,
                 max_blocks_per_seq: int | None = None, dtype=T.bfloat16, device="cpu", value_dim: int | None = None):
        check(block_size > 0 and block_size & (block_size - 1) == 0, lambda: f"PagedKVCache: block_size must be a "
              f"power of two, got {block_size}", ValueError)
        check(num_blocks > 0 and num_layers > 0, "PagedKVCache: num_blocks and num_layers must be positive", ValueError)
        self.device = _device(device)
        self.dtype = T.dtype_from(dtype)
        self.block_size, self.num_blocks = int(block_size), int(num_blocks)
        self.max_blocks_per_seq = int(max_blocks_per_seq or num_blocks)
        vd = head_dim if value_dim is None else value_dim
        self.k = [new_empty((num_blocks, block_size, kv_heads, head_dim), self.dtype, self.device).zero_()
                  for _ in range(num_layers)]
        self.v = [new_empty((num_blocks, block_size, kv_heads, vd), self.dtype, self.device).zero_()
                  for _ in range(num_layers)]
        self._free = list(range(num_blocks - 1, -1, -1))
        self._pages: dict[int, list[int]] = {}
        self._len: dict[int, int] = {}
        self._next_id = 0
        self._step = None

    def add_sequence(self) -> int:
        """A new empty sequence; returns its id."""
        sid = self._next_id
        self._next_id += 1
        self._pages[sid], self._len[sid] = [], 0
        return sid

    def free_sequence(self, sid: int) -> None:
        """Return a sequence's pages to the free list."""
        check(sid in self._pages, lambda: f"PagedKVCache: unknown sequence {sid}")
        self._free.extend(reversed(self._pages.pop(sid)))
        del self._len[sid]

    def length(self, sid: int) -> int:
        """Tokens stored for sequence ``sid``."""
        return self._len[sid]

    def pages(self, sid: int) -> list[int]:
        """The page ids of sequence ``sid`` in order."""
        return list(self._pages[sid])

    def begin_step(self, seq_ids, new_tokens: int = 1) -> None:
        """Reserve pages so each sequence of ``seq_ids`` (the batch, in order) can take ``new_tokens`` more rows,
        and upload the step's block table ``[B, max_blocks_per_seq]`` and lengths (before and after)."""
        ids = list(seq_ids)
        for sid in ids:
            check(sid in self._pages, lambda: f"PagedKVCache: unknown sequence {sid}")
            need = -(-(self._len[sid] + new_tokens) // self.block_size)
            check(need <= self.max_blocks_per_seq, lambda: f"PagedKVCache: sequence {sid} would need {need} pages, "
                  f"more than max_blocks_per_seq={self.max_blocks_per_seq}")
            while len(self._pages[sid]) < need:
                check(self._free, lambda: f"PagedKVCache: out of pages ({self.num_blocks} in all)")
                self._pages[sid].append(self._free.pop())
        bt = np.zeros((len(ids), self.max_blocks_per_seq), dtype=np.int32)
        for r, sid in enumerate(ids):
            bt[r, :len(self._pages[sid])] = self._pages[sid]
        before = np.array([self._len[s] for s in ids], dtype=np.int32)
        self._step = dict(ids=ids, new=new_tokens,
                          block_table=from_host_array(bt, T.int32, self.device),
                          before=from_host_array(before, T.int32, self.device),
                          after=from_host_array(before + new_tokens, T.int32, self.device))

    def _cur(self) -> dict:
        check(self._step is not None, "PagedKVCache: call begin_step() first")
        return self._step

    @property
    def block_table(self) -> Tensor:
        """The current step's block table (int32 ``[B, max_blocks_per_seq]``)."""
        return self._cur()["block_table"]

    @property
    def seqlens(self) -> Tensor:
        """The current step's lengths including its new tokens (int32 ``[B]``)."""
        return self._cur()["after"]

    def append(self, layer: int, key: Tensor, value: Tensor) -> None:
        """Write the step's new rows ``[B, kv_heads, new_tokens, D]`` of ``layer`` (positions checked on the
        host by :meth:`begin_step`)."""
        st = self._cur()
        check(key.shape[2] == st["new"], lambda: f"PagedKVCache.append: expected {st['new']} new tokens per sequence, "
              f"got {key.shape[2]}")
        append = registry.get("paged_kv_append").extra["function"]
        append(self.k[layer], self.v[layer], st["block_table"], st["before"], key, value, check=False)

    def decode(self, layer: int, query: Tensor, *, scale: float | None = None) -> Tensor:
        """Decode attention of ``query [B, Hq, D]`` over ``layer``'s pages, the step's new rows included."""
        st = self._cur()
        decode = registry.get("paged_decode_attention").extra["function"]
        return decode(query, self.k[layer], self.v[layer], st["block_table"], st["after"], scale=scale)

    def end_step(self) -> None:
        """Advance the lengths of the step's sequences by its new tokens."""
        st = self._cur()
        for sid in st["ids"]:
            self._len[sid] += st["new"]
        self._step = None
