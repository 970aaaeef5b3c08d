"""Token sampling for generation, on the device: greedy, temperature, top-k, top-p, min-p, repetition penalty.

``sample(logits, temperature=, top_k=, top_p=, min_p=, repetition_penalty=, prev_tokens=, generator=)`` returns
one int64 token id per row of ``logits`` (``(V,)`` or ``(rows, V)``; float16, bfloat16, float32 or float64).

**What is sampled** (per row, in float64; the order and the meaning of each filter are Hugging Face
``transformers``' logits processors: ``RepetitionPenaltyLogitsProcessor``, then ``TemperatureLogitsWarper``,
``TopKLogitsWarper``, ``TopPLogitsWarper``, ``MinPLogitsWarper``):

1. ``x = float64(logits)``; repetition penalty ``theta``: for every distinct id in ``prev_tokens`` (negative ids
   are padding and ignored), ``x = x / theta`` where ``x > 0`` and ``x * theta`` otherwise.
2. ``temperature == 0``: greedy, the argmax of ``x`` (ties: the lowest index). Otherwise ``x = x / temperature``.
3. Rank order: ``x`` descending, ties by index ascending. ``m = max x``; weights ``e = exp(x - m)``.
4. top-k (``0 < top_k < V``): keep tokens with ``x >=`` the k-th largest ``x`` (ties with it are kept, as HF).
5. top-p (``top_p < 1``), over the top-k set renormalised: keep a token when the mass of the kept tokens ranked
   before it is ``< top_p`` of the set's mass; the first-ranked token is always kept (HF's
   ``min_tokens_to_keep=1``).
6. min-p (``min_p > 0``): keep tokens with ``p >= min_p * p_max``, i.e. ``x - m >= ln(min_p)``.
7. Draw a token from the kept set with probability proportional to ``e``.

**How** (the same decisions on the CPU and the GPU, bit for bit; :mod:`.detmath`): the draw is an exponential
race, ``argmax e_i / E_i`` with ``E_i = -ln u_i`` exponential (a sample proportional to ``e``, with no prefix
sums; ties: the lowest index). Top-p is enforced by rejection, which needs no sort (the idea of FlashInfer's
sorting-free top-p sampler): race over a candidate set U (initially every token); accept the winner t if it
passes the top-p test, else shrink U to the tokens ranked before t and race again with fresh randomness.
Because the top-p set is a prefix of the rank order, the accepted token is distributed exactly as step 7 says,
and each round removes at least one token. Masses for the top-p test are integers, ``floor(e * 2**40)``,
summed exactly in int64 in any order, so the GPU's parallel sums decide as the CPU's do; the cut is therefore
exact up to a relative mass error of about ``V * 2**-40``. The k-th largest value is found by a binary search
over the order-preserving 64-bit keys of ``x`` (at most 64 counting passes). The rows of a call consume
``ceil(rows * V / 2)`` Philox blocks of the generator; round ``r`` of the rejection reads the same counters with
Philox counter word ``c2 = r``, so no counter is reused.

The float64 reference :func:`sample_reference` computes the target distribution the textbook way (sort,
softmax, cumulative sums, NumPy's ``exp``); tests compare the filters and the sampled frequencies with it.

Invalid rows (a NaN logit; in sampling mode also ``+inf`` or no finite logit; a ``prev_tokens`` id ``>= V``)
raise ``RuntimeError`` with ``validate=True`` (the default: on CUDA this reads the ids back, a
synchronisation) and give token ``-1`` with ``validate=False``.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .._errors import check
from ..dtypes import table as T
from ..ops.registry import Cost, OpRecord, impl, register
from ..runtime.configs import launch_config
from ..runtime.launcher import launch
from ..runtime.triton_compat import jit, tl
from ..tensor.core import Tensor, from_host_array, host_view, new_empty
from . import detmath as D
from .distributions import FLOAT_DTYPES, _exp_key_np, _u53p, _u53p_np, exp_key
from .generator import resolve_generator
from .philox import f64_arg, f64_bits, i64_args, philox4x32, philox_at, signed64

__all__ = ["sample", "sample_reference", "sampling_mask", "SamplingParams", "MASS_BITS"]

MASS_BITS = 40  # top-p masses are floor(e * 2**MASS_BITS) in int64; rows * V * 2**40 must stay below 2**63
_MASS_SCALE = float(1 << MASS_BITS)
_MAX_VOCAB = 1 << 22


class SamplingParams:
    """Checked sampling parameters (see :func:`sample`)."""

    __slots__ = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty")

    def __init__(self, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0):
        def real(v, name):
            check(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v)),
                  lambda: f"sample: {name} must be a finite real number, got {v!r}", ValueError)
            return float(v)
        self.temperature = real(temperature, "temperature")
        check(self.temperature >= 0.0, lambda: f"sample: temperature must be >= 0 (0 means greedy), got "
              f"{temperature}", ValueError)
        check(isinstance(top_k, (int, np.integer)) and not isinstance(top_k, bool) and top_k >= 0,
              lambda: f"sample: top_k must be an int >= 0 (0 disables it), got {top_k!r}", ValueError)
        self.top_k = int(top_k)
        self.top_p = real(top_p, "top_p")
        check(0.0 <= self.top_p <= 1.0, lambda: f"sample: top_p must be in [0, 1], got {top_p}", ValueError)
        self.min_p = real(min_p, "min_p")
        check(0.0 <= self.min_p <= 1.0, lambda: f"sample: min_p must be in [0, 1], got {min_p}", ValueError)
        self.repetition_penalty = real(repetition_penalty, "repetition_penalty")
        check(self.repetition_penalty > 0.0, lambda: f"sample: repetition_penalty must be > 0, got "
              f"{repetition_penalty}", ValueError)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def top_k_for(self, vocab: int) -> int:
        """top_k when it filters anything (0 < top_k < vocab), else 0."""
        return self.top_k if 0 < self.top_k < vocab else 0

    @property
    def log_min_p(self) -> float:
        return math.log(self.min_p) if self.min_p > 0.0 else -math.inf


# ---------------------------------------------------------------------------------------------------------
# The float64 reference: the target distribution, computed the textbook way
# ---------------------------------------------------------------------------------------------------------
def _penalised(logits: np.ndarray, prev, theta: float) -> np.ndarray:
    x = np.array(logits, dtype=np.float64)
    if prev is None or theta == 1.0:
        return x
    for b in range(x.shape[0]):
        ids = np.unique(prev[b][prev[b] >= 0])
        if ids.size:
            orig = x[b, ids]
            x[b, ids] = np.where(orig > 0, orig / theta, orig * theta)
    return x


def sample_reference(logits, *, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0,
                     prev_tokens=None) -> tuple[np.ndarray, np.ndarray]:
    """The distribution :func:`sample` draws from, in float64 (the oracle).

    Args:
        logits: ``(rows, V)`` array-like (a tensor or NumPy array).
        prev_tokens: ``(rows, L)`` ids or ``None``.

    Returns:
        ``(probs, keep)``: float64 probabilities ``(rows, V)`` (zero outside the kept set; a one-hot row in greedy
        mode) and the boolean kept set.
    """
    p = SamplingParams(temperature, top_k, top_p, min_p, repetition_penalty)
    lg = np.asarray(logits.numpy() if isinstance(logits, Tensor) else logits).astype(np.float64)
    lg = lg.reshape(1, -1) if lg.ndim == 1 else lg
    prev = None if prev_tokens is None else np.asarray(
        prev_tokens.numpy() if isinstance(prev_tokens, Tensor) else prev_tokens).reshape(lg.shape[0], -1)
    x = _penalised(lg, prev, p.repetition_penalty)
    rows, V = x.shape
    probs = np.zeros((rows, V))
    keep = np.zeros((rows, V), dtype=bool)
    for b in range(rows):
        if p.greedy:
            t = int(np.argmax(x[b]))
            probs[b, t], keep[b, t] = 1.0, True
            continue
        xb = x[b] / p.temperature
        order = np.lexsort((np.arange(V), -xb))  # rank order: x descending, index ascending
        xs = xb[order]
        kept = np.ones(V, dtype=bool)
        k = p.top_k_for(V)
        if k:
            kept &= xs >= xs[k - 1]
        w = np.where(kept, np.exp(xs - xs[0]), 0.0)
        if p.top_p < 1.0:
            q = w / w.sum()
            before = np.cumsum(q) - q
            kept &= (before < p.top_p) | (np.arange(V) == 0)
        if p.min_p > 0.0:
            kept &= np.exp(xs - xs[0]) >= p.min_p
        w = np.where(kept, w, 0.0)
        probs[b, order] = w / w.sum()
        keep[b, order] = kept
    return probs, keep


def sampling_mask(logits, *, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0,
                  prev_tokens=None) -> np.ndarray:
    """The set :func:`sample` draws from, by its exact rules (integer masses, deterministic ``exp``): a boolean
    ``(rows, V)`` host array. It differs from :func:`sample_reference`'s set only where a cumulative mass lies
    within about ``V * 2**-40`` (relative) of ``top_p``."""
    p = SamplingParams(temperature, top_k, top_p, min_p, repetition_penalty)
    lg = np.asarray(logits.numpy() if isinstance(logits, Tensor) else logits).astype(np.float64)
    lg = lg.reshape(1, -1) if lg.ndim == 1 else lg
    prev = None if prev_tokens is None else np.asarray(
        prev_tokens.numpy() if isinstance(prev_tokens, Tensor) else prev_tokens).reshape(lg.shape[0], -1)
    x = _penalised(lg, prev, p.repetition_penalty)
    rows, V = x.shape
    keep = np.zeros((rows, V), dtype=bool)
    for b in range(rows):
        if p.greedy:
            keep[b, int(np.argmax(x[b]))] = True
            continue
        xb = x[b] / p.temperature if p.temperature != 1.0 else x[b]
        order = np.lexsort((np.arange(V), -xb))
        xs = xb[order]
        kept = np.ones(V, dtype=bool)
        k = p.top_k_for(V)
        if k:
            kept &= xs >= xs[k - 1]
        if p.top_p < 1.0:
            q = np.where(kept, (D.exp_np(xs - xs[0]) * _MASS_SCALE).astype(np.int64), 0)
            before = np.cumsum(q) - q
            kept &= (before.astype(np.float64) < p.top_p * float(q.sum())) | (np.arange(V) == 0)
        if p.min_p > 0.0:
            kept &= (xs - xs[0]) >= p.log_min_p
        keep[b, order] = kept
    return keep


# ---------------------------------------------------------------------------------------------------------
# The CPU implementation: the kernel's decisions, vectorised over rows
# ---------------------------------------------------------------------------------------------------------
def _element_words(seed: int, offset: int, e: np.ndarray, c2: int) -> tuple[np.ndarray, np.ndarray]:
    """The two words of elements ``e`` of the 2-word stream (block e // 2, lanes 0-1 or 2-3) with counter word
    ``c2``."""
    ctr = np.uint64(offset) + (e // 2).astype(np.uint64)
    s = int(seed) & 0xFFFFFFFFFFFFFFFF
    w = philox4x32(ctr & np.uint64(0xFFFFFFFF), ctr >> np.uint64(32), np.uint64(c2), np.uint64(0),
                   s & 0xFFFFFFFF, s >> 32)
    odd = (e % 2) == 1
    return np.where(odd, w[2], w[0]), np.where(odd, w[3], w[1])


def _processed_np(x: Tensor, prev: Tensor | None, p: SamplingParams) -> tuple[np.ndarray, np.ndarray]:
    """float64 logits after the repetition penalty, and the rows made invalid by a prev id >= V."""
    lg = host_view(x).astype(np.float64)
    rows, V = lg.shape
    bad = np.zeros(rows, dtype=bool)
    pv = None
    if prev is not None and p.repetition_penalty != 1.0:
        pv = host_view(prev).astype(np.int64)
        bad = np.any(pv >= V, axis=1)
        pv = np.where(pv >= V, -1, pv)
    return _penalised(lg, pv, p.repetition_penalty), bad


def _sample_cpu(out: Tensor, seed: int, offset: int, x: Tensor, prev: Tensor | None, p: SamplingParams) -> None:
    X, bad = _processed_np(x, prev, p)
    rows, V = X.shape
    res = np.full(rows, -1, dtype=np.int64)
    nan = np.isnan(X).any(axis=1)
    if p.greedy:
        ok = ~(nan | bad)
        res[ok] = np.argmax(X[ok], axis=1)
        host_view(out)[...] = res
        return
    if p.temperature != 1.0:
        X = X / p.temperature
    ok = ~(nan | bad | np.isposinf(X).any(axis=1) | ~np.isfinite(X).any(axis=1))
    idx = np.arange(V)
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.where(ok, np.max(np.where(np.isnan(X), -np.inf, X), axis=1), 0.0)
        Xs = np.where(ok[:, None], X, -np.inf)
        E = D.exp_np(Xs - m[:, None])
    cand = np.ones((rows, V), dtype=bool)
    k = p.top_k_for(V)
    ink = np.ones((rows, V), dtype=bool)
    if k:
        kth = -np.partition(-Xs, k - 1, axis=1)[:, k - 1]
        ink = Xs >= kth[:, None]
    cand &= ink
    if p.min_p > 0.0:
        cand &= (Xs - m[:, None]) >= p.log_min_p
    Q = (E * _MASS_SCALE).astype(np.int64)
    total = np.where(ink, Q, 0).sum(axis=1)
    piv_x = np.full(rows, -np.inf)  # a virtual pivot ranked after every token: U starts as everything
    piv_i = np.full(rows, V, dtype=np.int64)
    todo = ok.copy()
    r = 0
    while todo.any():
        rs = np.nonzero(todo)[0]
        hi, lo = _element_words(seed, offset, (rs[:, None] * V + idx[None, :]).reshape(-1), r)
        keys = _exp_key_np(E[rs].reshape(-1), _u53p_np(hi, lo)).reshape(len(rs), V)
        xr = Xs[rs]
        in_u = (xr > piv_x[rs, None]) | ((xr == piv_x[rs, None]) & (idx[None, :] < piv_i[rs, None]))
        keys = np.where(cand[rs] & in_u, keys, -1.0)
        t = np.argmax(keys, axis=1)
        none = keys[np.arange(len(rs)), t] <= -1.0  # no candidate left (cannot happen for a valid row)
        t = np.where(none, -1, t)
        accept = np.ones(len(rs), dtype=bool)
        if p.top_p < 1.0:
            xt = xr[np.arange(len(rs)), t]
            before = ((xr > xt[:, None]) | ((xr == xt[:, None]) & (idx[None, :] < t[:, None]))) & ink[rs]
            mass = np.where(before, Q[rs], 0).sum(axis=1)
            accept = none | (mass.astype(np.float64) < p.top_p * total[rs].astype(np.float64)) | ~before.any(axis=1)
            piv_x[rs] = np.where(accept, piv_x[rs], xt)
            piv_i[rs] = np.where(accept, piv_i[rs], t)
        done = rs[accept]
        res[done] = t[accept]
        todo[done] = False
        r += 1
    host_view(out)[...] = res


# ---------------------------------------------------------------------------------------------------------
# Triton implementation
# ---------------------------------------------------------------------------------------------------------
@jit(do_not_specialize=["V", "L", "theta"])
def _penalty_kernel(work_ptr, x_ptr, prev_ptr, bad_ptr, V: tl.int64, L: tl.int64, theta: tl.int64,
                    BLOCK: tl.constexpr):
    # Row b: work = float64(x), then the penalty at every prev id from the ORIGINAL logits, so duplicate ids
    # write the same value (HF's gather/scatter). An id >= V flags the row invalid.
    b = tl.program_id(0).to(tl.int64)
    nv = V.to(tl.int64)
    nl = L.to(tl.int64)
    th = f64_arg(theta)
    for start in range(0, nv, BLOCK):
        i = start + tl.arange(0, BLOCK).to(tl.int64)
        m = i < nv
        tl.store(work_ptr + b * nv + i, tl.load(x_ptr + b * nv + i, mask=m, other=0.0).to(tl.float64), mask=m)
    tl.debug_barrier()  # the copies above are visible to every thread of the program before the scatter
    nbad = tl.full([], 0, tl.int32)
    for start in range(0, nl, BLOCK):
        j = start + tl.arange(0, BLOCK).to(tl.int64)
        ids = tl.load(prev_ptr + b * nl + j, mask=j < nl, other=-1).to(tl.int64)
        ok = (ids >= 0) & (ids < nv)
        nbad += tl.sum(((ids >= nv) & (j < nl)).to(tl.int32), axis=0)
        orig = tl.load(x_ptr + b * nv + ids, mask=ok, other=0.0).to(tl.float64)
        tl.store(work_ptr + b * nv + ids, tl.where(orig > 0.0, orig / th, orig * th), mask=ok)
    tl.store(bad_ptr + b, nbad)


@jit
def _order_key(x):
    """Order-preserving uint64 key of float64 ``x`` (not NaN; -0.0 and +0.0 share a key)."""
    bits = tl.where(x == 0.0, 0, x.to(tl.int64, bitcast=True))
    u = bits.to(tl.uint64, bitcast=True)
    return tl.where(bits >= 0, u | 0x8000000000000000, u ^ 0xFFFFFFFFFFFFFFFF)  # (not ~u: the interpreter fails on it)


@jit
def _load_x(x_ptr, b, i, m, nv, temp, HAS_TEMP: tl.constexpr):
    x = tl.load(x_ptr + b * nv + i, mask=m, other=float("-inf")).to(tl.float64)
    if HAS_TEMP:
        x = x / temp
    return x


@jit(do_not_specialize=["V", "seed", "offset", "temp_bits", "top_k", "top_p_bits", "lmp_bits"])
def _sample_kernel(out_ptr, x_ptr, bad_ptr, V: tl.int64, seed: tl.int64, offset: tl.int64, temp_bits: tl.int64,
                   top_k: tl.int64, top_p_bits: tl.int64, lmp_bits: tl.int64, GREEDY: tl.constexpr,
                   HAS_TEMP: tl.constexpr, HAS_TOPK: tl.constexpr, HAS_TOPP: tl.constexpr, HAS_MINP: tl.constexpr,
                   HAS_BAD: tl.constexpr, BLOCK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    nv = V.to(tl.int64)
    temp = f64_arg(temp_bits)
    lanes = tl.arange(0, BLOCK).to(tl.int64)
    # Pass 1: max, argmax (greedy), validity, key range (top-k).
    mx = tl.full([], float("-inf"), tl.float64)
    amax = tl.full([], 0, tl.int64)
    nbad = tl.full([], 0, tl.int64)
    nfin = tl.full([], 0, tl.int64)
    kmin = tl.full([], 0xFFFFFFFFFFFFFFFF, tl.uint64)
    for start in range(0, nv, BLOCK):
        i = start + lanes
        m = i < nv
        x = _load_x(x_ptr, b, i, m, nv, temp, HAS_TEMP)
        if GREEDY:
            nbad += tl.sum((m & (x != x)).to(tl.int64), axis=0)
        else:
            nbad += tl.sum((m & ((x != x) | (x == float("inf")))).to(tl.int64), axis=0)
            nfin += tl.sum((m & (x > float("-inf"))).to(tl.int64), axis=0)
            kmin = tl.minimum(kmin, tl.min(tl.where(m & (x == x), _order_key(x), 0xFFFFFFFFFFFFFFFF), axis=0))
        xs = tl.where(m & (x == x), x, float("-inf"))
        cmax = tl.max(xs, axis=0)
        better = cmax > mx
        amax = tl.where(better, start + tl.argmax(xs, axis=0).to(tl.int64), amax)
        mx = tl.where(better, cmax, mx)
    if HAS_BAD:
        nbad += tl.load(bad_ptr + b).to(tl.int64)
    if GREEDY:
        tl.store(out_ptr + b, tl.where(nbad == 0, amax, -1))
    else:
        result = tl.full([], -1, tl.int64)
        if (nbad == 0) & (nfin > 0):
            # top-k: the largest key K with count(key >= K) >= k (binary search, <= 64 passes).
            kth = tl.full([], 0, tl.uint64)
            if HAS_TOPK:
                lo = kmin
                hi = _order_key(mx)
                kk = top_k.to(tl.int64)
                while lo < hi:
                    mid = lo + ((hi - lo + 1) >> 1)
                    cnt = tl.full([], 0, tl.int64)
                    for start in range(0, nv, BLOCK):
                        i = start + lanes
                        m = i < nv
                        x = _load_x(x_ptr, b, i, m, nv, temp, HAS_TEMP)
                        cnt += tl.sum((m & (_order_key(x) >= mid)).to(tl.int64), axis=0)
                    lo = tl.where(cnt >= kk, mid, lo)
                    hi = tl.where(cnt >= kk, hi, mid - 1)
                kth = lo
            # top-p: the integer mass of the top-k set.
            total = tl.full([], 0, tl.int64)
            if HAS_TOPP:
                for start in range(0, nv, BLOCK):
                    i = start + lanes
                    m = i < nv
                    x = _load_x(x_ptr, b, i, m, nv, temp, HAS_TEMP)
                    q = (D.exp_f64(x - mx) * 1099511627776.0).to(tl.int64)
                    ink = m
                    if HAS_TOPK:
                        ink = ink & (_order_key(x) >= kth)
                    total += tl.sum(tl.where(ink, q, 0), axis=0)
            top_p = f64_arg(top_p_bits)
            lmp = f64_arg(lmp_bits)
            piv_x = tl.full([], float("-inf"), tl.float64)  # a virtual pivot ranked after every token
            piv_i = nv
            rnd = tl.full([], 0, tl.int64)
            done = tl.full([], 0, tl.int32)
            while done == 0:
                # The race over U (ranked before the pivot) and the top-k and min-p sets, round rnd's randomness.
                best = tl.full([], -1.0, tl.float64)  # keys of non-candidates are -1: never chosen
                best_i = tl.full([], -1, tl.int64)
                best_x = tl.full([], 0.0, tl.float64)
                for start in range(0, nv, BLOCK):
                    i = start + lanes
                    m = i < nv
                    x = _load_x(x_ptr, b, i, m, nv, temp, HAS_TEMP)
                    ok = m & ((x > piv_x) | ((x == piv_x) & (i < piv_i)))
                    if HAS_TOPK:
                        ok = ok & (_order_key(x) >= kth)
                    if HAS_MINP:
                        ok = ok & ((x - mx) >= lmp)
                    e = b * nv + i
                    r0, r1, r2, r3 = philox_at(seed, offset, e // 2, rnd.to(tl.uint32))
                    odd = (e % 2) == 1
                    key = tl.where(ok, exp_key(D.exp_f64(x - mx), _u53p(tl.where(odd, r2, r0),
                                                                        tl.where(odd, r3, r1))), -1.0)
                    cmax = tl.max(key, axis=0)
                    carg = tl.argmax(key, axis=0)
                    better = cmax > best
                    best_i = tl.where(better, start + carg.to(tl.int64), best_i)
                    best_x = tl.where(better, tl.sum(tl.where(lanes == carg, x, 0.0), axis=0), best_x)
                    best = tl.where(better, cmax, best)
                accept = best_i < 0  # no candidate left cannot happen for a valid row; never loop forever
                if HAS_TOPP:
                    mass = tl.full([], 0, tl.int64)
                    nbefore = tl.full([], 0, tl.int64)
                    for start in range(0, nv, BLOCK):
                        i = start + lanes
                        m = i < nv
                        x = _load_x(x_ptr, b, i, m, nv, temp, HAS_TEMP)
                        sel = m & ((x > best_x) | ((x == best_x) & (i < best_i)))
                        if HAS_TOPK:
                            sel = sel & (_order_key(x) >= kth)
                        q = (D.exp_f64(x - mx) * 1099511627776.0).to(tl.int64)
                        mass += tl.sum(tl.where(sel, q, 0), axis=0)
                        nbefore += tl.sum(sel.to(tl.int64), axis=0)
                    accept = accept | (mass.to(tl.float64) < top_p * total.to(tl.float64)) | (nbefore == 0)
                else:
                    accept = best_i > -2
                piv_x = tl.where(accept, piv_x, best_x)
                piv_i = tl.where(accept, piv_i, best_i)
                result = tl.where(accept, best_i, result)
                done = accept.to(tl.int32)
                rnd += 1
        tl.store(out_ptr + b, result)


def _sample_triton(out: Tensor, seed: int, offset: int, x: Tensor, prev: Tensor | None, p: SamplingParams) -> None:
    rows, V = x.shape
    src, bad = x, out  # bad: a placeholder pointer when there is no penalty pass
    cfg = launch_config("sample_tokens", x.device, dtypes=(x.dtype,), cols=V)
    block = cfg.pop("BLOCK")
    has_bad = prev is not None and p.repetition_penalty != 1.0
    if has_bad:
        src = new_empty((rows, V), T.float64, x.device)
        bad = new_empty((rows,), T.int32, x.device)
        L = prev.shape[1]
        launch(_penalty_kernel, (rows,), src, x, prev, bad, *i64_args(V, L, f64_bits(p.repetition_penalty)),
               BLOCK=block, enable_fp_fusion=False, **cfg)
    k = p.top_k_for(V)
    launch(_sample_kernel, (rows,), out, src, bad,
           *i64_args(V, signed64(seed), signed64(offset), f64_bits(p.temperature if p.temperature else 1.0), k,
                     f64_bits(p.top_p), f64_bits(max(p.log_min_p, -1e308))),
           GREEDY=p.greedy, HAS_TEMP=p.temperature not in (0.0, 1.0), HAS_TOPK=k > 0, HAS_TOPP=p.top_p < 1.0,
           HAS_MINP=p.min_p > 0.0, HAS_BAD=has_bad, BLOCK=block, enable_fp_fusion=False, **cfg)


def _sample_cost(rows: int, vocab: int, dtype, p: SamplingParams | None = None) -> Cost:
    # The minimum: pass 1 and one race (plus one mass pass and one top-p test pass with top_p < 1; up to 64
    # counting passes with top-k). Rejection rounds add a race and a test pass each; they are data-dependent.
    passes = 2 if p is None else (1 + (0 if p.greedy else 1) + (2 if p.top_p < 1.0 else 0))
    return Cost(flops=rows * vocab * passes * 60, bytes_read=rows * vocab * dtype.itemsize * passes,
                bytes_written=rows * 8)


register(OpRecord(name="sample_tokens", family="random", cpu=_sample_cpu, triton=_sample_triton, cost=_sample_cost,
                  oracle=sample_reference,
                  oracle_note="the oracle gives the target distribution; the cpu and triton implementations make the "
                              "same decisions bit for bit (exact integer masses, deterministic float64 math)",
                  extra={"kernel": "sample_tokens"}))


# ---------------------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------------------
def sample(logits: Tensor, *, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, min_p: float = 0.0,
           repetition_penalty: float = 1.0, prev_tokens=None, generator=None, validate: bool = True) -> Tensor:
    """Draw one token id per row of ``logits`` (see the module docstring for the exact rules).

    Args:
        logits: ``(V,)`` or ``(rows, V)``, float16/bfloat16/float32/float64, on the device to sample on.
        temperature: ``0`` for greedy (argmax, ties to the lowest index), else > 0.
        top_k: keep the k most likely tokens (ties with the k-th kept); 0 disables.
        top_p: nucleus mass in [0, 1]; 1 disables.
        min_p: keep tokens with probability >= min_p times the largest; 0 disables.
        repetition_penalty: HF's penalty (> 0; 1 disables) for ids in ``prev_tokens``.
        prev_tokens: ``(L,)`` or ``(rows, L)`` integer tensor (or nested list) of previously seen ids; negative
            ids are padding.
        generator: an ``nbx.Generator`` of the logits' device (default: the device's default generator).
        validate: raise for invalid rows (reads the ids back: a synchronisation on CUDA); ``False`` returns -1
            for them instead.

    Returns:
        int64 token ids: shape ``()`` for 1-D ``logits``, ``(rows,)`` otherwise, on the logits' device.

    Raises:
        ValueError: a parameter out of range. TypeError: non-tensor logits. RuntimeError: invalid rows (see the
        module docstring), a non-float dtype, a vocabulary of 2**22 or more, a foreign generator.

    Example:
        >>> import nbxtensor as nbx
        >>> g = nbx.Generator().manual_seed(0)
        >>> int(nbx.random.sample(nbx.tensor([0.0, 5.0, 1.0]), temperature=0))
        1
    """
    check(isinstance(logits, Tensor), lambda: f"sample: logits must be a Tensor, got {type(logits).__name__}",
          TypeError)
    p = SamplingParams(temperature, top_k, top_p, min_p, repetition_penalty)
    check(logits.ndim in (1, 2), lambda: f"sample: logits must be (V,) or (rows, V), got shape {list(logits.shape)}")
    check(logits.dtype in FLOAT_DTYPES, lambda: f"sample: logits must be float16/bfloat16/float32/float64, got "
          f"{logits.dtype.name}")
    x = (logits if logits.ndim == 2 else logits.unsqueeze(0)).contiguous()
    rows, V = x.shape
    check(V > 0, "sample: the vocabulary is empty (V == 0)")
    check(V < _MAX_VOCAB, lambda: f"sample: V = {V} is too large (the integer masses need V < 2**22)")
    prev = _prev_tensor(prev_tokens, rows, x.device)
    if prev is not None and x.device.type == "cpu" and validate:
        big = host_view(prev) >= V
        check(not big.any(), lambda: f"sample: prev_tokens holds id {int(host_view(prev)[big].max())} >= V = {V}",
              IndexError)
    out = new_empty((rows,), T.int64, x.device)
    if rows:
        gen = resolve_generator(generator, x.device, "sample")
        seed, offset = gen.reserve(-(-rows * V * 2 // 4))
        if validate and x.device.type == "cpu":
            _check_rows(host_view(x).astype(np.float64), p)
        impl("sample_tokens", x.device.type)(out, seed, offset, x, prev, p)
        if validate:
            ids = out.numpy()
            check(bool(np.all(ids >= 0)), lambda: f"sample: rows {np.nonzero(ids < 0)[0].tolist()[:8]} are invalid (a "
                  "NaN logit; when sampling also +inf or no finite logit; or a prev_tokens id >= V)")
    return out if logits.ndim == 2 else out.squeeze(0)


def _check_rows(x: np.ndarray, p: SamplingParams) -> None:
    nan = np.isnan(x).any(axis=1)
    check(not nan.any(), lambda: f"sample: logits of rows {np.nonzero(nan)[0].tolist()[:8]} contain NaN")
    if not p.greedy:
        xs = x / p.temperature if p.temperature != 1.0 else x
        inf = np.isposinf(xs).any(axis=1)
        check(not inf.any(), lambda: f"sample: logits of rows {np.nonzero(inf)[0].tolist()[:8]} contain +inf "
              "(after the temperature), so their probabilities are undefined")
        none = ~np.isfinite(xs).any(axis=1)
        check(not none.any(), lambda: f"sample: rows {np.nonzero(none)[0].tolist()[:8]} have no finite logit")


def _prev_tensor(prev_tokens, rows: int, device) -> Tensor | None:
    if prev_tokens is None:
        return None
    if not isinstance(prev_tokens, Tensor):
        prev_tokens = from_host_array(np.asarray(prev_tokens, dtype=np.int64), T.int64, device)
    check(prev_tokens.dtype.kind in (T.KIND_INT, T.KIND_UINT), lambda: f"sample: prev_tokens must hold integers, got "
          f"{prev_tokens.dtype.name}", TypeError)
    check(prev_tokens.device == device, lambda: f"sample: prev_tokens is on {prev_tokens.device} but logits on "
          f"{device}")
    pv = prev_tokens.unsqueeze(0) if prev_tokens.ndim == 1 else prev_tokens
    check(pv.ndim == 2 and pv.shape[0] in (1, rows), lambda: f"sample: prev_tokens must be (L,) or (rows={rows}, L), "
          f"got shape {list(prev_tokens.shape)}")
    pv = pv.expand(rows, pv.shape[1]) if pv.shape[0] != rows else pv
    return pv.to(T.int64).contiguous()

