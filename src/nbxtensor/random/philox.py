"""Philox4x32-10, twice: vectorised NumPy for the ``cpu`` device and Triton ``@jit`` helpers for kernels.

Philox4x32-R is the counter-based generator of Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy
as 1, 2, 3" (SC'11), section 4.2, with the constants of its reference implementation Random123
(``philox.h``): a 128-bit counter ``(c0, c1, c2, c3)`` and a 64-bit key ``(k0, k1)`` go through R = 10 rounds

    hi0:lo0 = 0xD2511F53 * c0          hi1:lo1 = 0xCD9E8D57 * c2        (32 x 32 -> 64-bit products)
    (c0, c1, c2, c3) <- (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0)
    (k0, k1) <- (k0 + 0x9E3779B9, k1 + 0xBB67AE85)  (mod 2**32; the Weyl key schedule between rounds)

giving four 32-bit words. Every operation is integer arithmetic, so the NumPy and Triton versions agree bit for
bit by construction; the multiply-high is taken from an explicit 64-bit product (not ``tl.umulhi``) so both
versions are the same formula. Known-answer vectors: Random123 ``tests/kat_vectors`` (checked in
``tests/random/test_philox.py``).

How nbxtensor uses it (the *stream layout*, shared by every distribution):

- key = the generator's 64-bit seed: ``k0`` its low 32 bits, ``k1`` its high 32 bits;
- a draw reserves ``nblocks`` consecutive 64-bit counter values from the generator's offset; block ``b`` of a
  draw is the counter ``(lo32(offset + b), hi32(offset + b), c2, 0)`` (``c2`` = 0, except the rounds of the
  token sampler, :mod:`.sampling`);
- so a draw is a stream of 32-bit words: word ``w`` is lane ``w % 4`` of block ``w // 4``. Element ``e`` of a
  distribution that takes ``W`` words per element reads words ``W*e .. W*e + W - 1``.
"""

from __future__ import annotations

import numpy as np

from ..runtime.triton_compat import INTERPRET, jit, tl

__all__ = ["PHILOX_M0", "PHILOX_M1", "PHILOX_W0", "PHILOX_W1", "ROUNDS", "philox4x32", "philox_blocks",
           "stream_words", "blocks_for_words", "signed64", "f64_bits", "i64_args", "philox4x32_10", "philox_at", "u64_arg", "f64_arg"]

PHILOX_M0 = 0xD2511F53  # Random123 PHILOX_M4x32_0
PHILOX_M1 = 0xCD9E8D57  # Random123 PHILOX_M4x32_1
PHILOX_W0 = 0x9E3779B9  # Random123 PHILOX_W32_0: the golden ratio
PHILOX_W1 = 0xBB67AE85  # Random123 PHILOX_W32_1: sqrt(3) - 1
ROUNDS = 10

_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)


def philox4x32(c0, c1, c2, c3, k0: int, k1: int, rounds: int = ROUNDS) -> tuple[np.ndarray, ...]:
    """Philox4x32-``rounds`` of counters ``(c0, c1, c2, c3)`` (arrays or ints, broadcast) under key ``(k0, k1)``.

    Args:
        c0, c1, c2, c3: 32-bit counter words (any integer arrays; values must lie in [0, 2**32)).
        k0, k1: the two 32-bit key words (Python ints).
        rounds: number of rounds (10 for Philox4x32-10; 7 is Random123's minimum "Crush-resistant" count).

    Returns:
        Four ``uint32`` arrays of the broadcast shape.
    """
    c = np.broadcast_arrays(*(np.asarray(x, dtype=np.uint64) for x in (c0, c1, c2, c3)))
    x0, x1, x2, x3 = (np.array(a, dtype=np.uint64) for a in c)
    ka, kb = int(k0) & 0xFFFFFFFF, int(k1) & 0xFFFFFFFF
    m0, m1 = np.uint64(PHILOX_M0), np.uint64(PHILOX_M1)
    for r in range(rounds):
        if r:
            ka = (ka + PHILOX_W0) & 0xFFFFFFFF
            kb = (kb + PHILOX_W1) & 0xFFFFFFFF
        p0 = x0 * m0  # < 2**64: exact in uint64
        p1 = x2 * m1
        x0, x1, x2, x3 = (p1 >> _SHIFT32) ^ x1 ^ np.uint64(ka), p1 & _MASK32, (p0 >> _SHIFT32) ^ x3 ^ np.uint64(kb), \
            p0 & _MASK32
    return tuple(a.astype(np.uint32) for a in (x0, x1, x2, x3))


def _key_words(seed: int) -> tuple[int, int]:
    s = int(seed) & 0xFFFFFFFFFFFFFFFF
    return s & 0xFFFFFFFF, s >> 32


def philox_blocks(seed: int, offset: int, nblocks: int, c2: int = 0) -> np.ndarray:
    """The ``(nblocks, 4)`` ``uint32`` words of blocks ``offset .. offset + nblocks - 1`` under ``seed`` (see the
    module docstring for the layout)."""
    ctr = np.uint64(offset) + np.arange(nblocks, dtype=np.uint64)
    k0, k1 = _key_words(seed)
    words = philox4x32(ctr & _MASK32, ctr >> _SHIFT32, np.uint64(c2), np.uint64(0), k0, k1)
    return np.stack(words, axis=-1)


def blocks_for_words(nwords: int) -> int:
    """Philox blocks (four words each) a draw of ``nwords`` 32-bit words reserves."""
    return -(-int(nwords) // 4)


def stream_words(seed: int, offset: int, nwords: int, c2: int = 0) -> np.ndarray:
    """Words ``0 .. nwords - 1`` of the stream that starts at block ``offset`` (``uint32``, 1-D)."""
    return philox_blocks(seed, offset, blocks_for_words(nwords), c2).reshape(-1)[:nwords]


def signed64(v: int) -> int:
    """A 64-bit pattern as a signed Python int (how 64-bit scalars travel to kernels as ``int64``)."""
    v = int(v) & 0xFFFFFFFFFFFFFFFF
    return v - (1 << 64) if v >= 1 << 63 else v


def f64_bits(x: float) -> int:
    """The bits of float64 ``x`` as a signed 64-bit int (float kernel arguments travel as bits: Triton types a
    Python float argument as float32, which would round float64 parameters)."""
    return int(np.array([x], dtype=np.float64).view(np.int64)[0])


def i64_args(*values: int) -> list:
    """64-bit scalar kernel arguments (each a Python int in [-2**63, 2**63), see :func:`signed64`).

    Kernels annotate these parameters ``tl.int64`` (and leave them unspecialised), so the GPU types them int64
    whatever the value. Triton's interpreter types a plain int by its value and stores values in
    [2**31, 2**32) as uint32 under an int64 type, which breaks bitcasts; under the interpreter the values
    therefore travel as typed int64 interpreter scalars.
    """
    if not INTERPRET:
        return [int(v) for v in values]
    from triton.runtime.interpreter import TensorHandle
    return [tl.tensor(TensorHandle(np.array([v], dtype=np.int64), tl.int64), tl.int64) for v in values]


# ---------------------------------------------------------------------------------------------------------
# Triton side
# ---------------------------------------------------------------------------------------------------------
@jit
def u64_arg(x):
    """A 64-bit scalar argument (passed as int64; the interpreter may type small values int32 or uint32) as
    uint64 bits."""
    return x.to(tl.int64).to(tl.uint64, bitcast=True)


@jit
def f64_arg(x):
    """A float64 scalar argument passed as its int64 bit pattern (:func:`f64_bits`)."""
    return x.to(tl.int64).to(tl.float64, bitcast=True)


@jit
def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of uint32 blocks ``c0..c3`` under uint32 key words ``k0, k1`` (see the module docstring).

    The multiply-high comes from a 64-bit product so the formula is the NumPy one, operation for operation.
    """
    for _ in tl.static_range(10):
        p0 = c0.to(tl.uint64) * 0xD2511F53
        p1 = c2.to(tl.uint64) * 0xCD9E8D57
        c0, c1, c2, c3 = ((p1 >> 32).to(tl.uint32) ^ c1 ^ k0, p1.to(tl.uint32),
                          (p0 >> 32).to(tl.uint32) ^ c3 ^ k1, p0.to(tl.uint32))
        k0 = k0 + 0x9E3779B9
        k1 = k1 + 0xBB67AE85
    return c0, c1, c2, c3


@jit
def philox_at(seed, offset, blk, c2):
    """The four words of blocks ``blk`` (int64 block, >= 0) of the draw starting at ``offset`` under ``seed``
    (both 64-bit kernel arguments), with counter word ``c2`` (a uint32 scalar or block)."""
    s = u64_arg(seed)
    k0 = s.to(tl.uint32)
    k1 = (s >> 32).to(tl.uint32)
    ctr = u64_arg(offset) + blk.to(tl.uint64)
    lo = ctr.to(tl.uint32)
    hi = (ctr >> 32).to(tl.uint32)
    zero = tl.zeros_like(lo)
    return philox4x32_10(lo, hi, zero + c2, zero, k0, k1)
