"""Random distributions from the Philox stream, with the same bits on the CPU and on the GPU.

``rand``, ``randn``, ``randint``, ``randperm``, ``bernoulli``, ``multinomial``, the ``*_like`` forms,
``Tensor.uniform_``, ``Tensor.normal_``, ``Tensor.bernoulli_`` and ``nn.functional.dropout``; every one takes
``generator=`` (default: the device's default generator, :mod:`.generator`), and the factories ``dtype=`` and
``device=``, as PyTorch.

**Layout.** A draw of N elements reserves ``ceil(N * W / 4)`` Philox blocks and reads the 32-bit word stream of
:mod:`.philox`: element ``e`` takes words ``W*e .. W*e + W - 1``. ``W`` is 1 for float32/float16/bfloat16
uniforms and normals and for dropout, 2 for float64 uniforms and normals, integers, Bernoulli draws, random
keys and multinomial draws.

**Transforms** (float64 arithmetic throughout, then one rounding to float32, then, for float16 and bfloat16, one
rounding from float32 to nearest even; :mod:`.detmath` explains why the results are identical on both devices):

- uniform in [0, 1) from the top bits of a word, as many as the dtype's significand holds:
  ``(w >> 8) * 2**-24`` (float32), ``(w >> 21) * 2**-11`` (float16), ``(w >> 24) * 2**-8`` (bfloat16),
  ``((w0 << 21) | (w1 >> 11)) * 2**-53`` (float64). Each value is exact in its dtype, so ``rand`` never
  returns 1.0 (PyTorch rounds a float uniform into float16/bfloat16 and can). ``uniform_(a, b)`` is
  ``a + (b - a) * u``; a value that rounds up to ``b`` in the output dtype becomes ``a`` (the same fix-up as
  PyTorch's CUDA kernel applies to a uniform of 1.0).
- normal: Box-Muller (G. E. P. Box and M. E. Muller, "A note on the generation of random normal deviates",
  Ann. Math. Statist. 29, 1958): two uniforms ``u1`` in (0, 1] and ``t`` in [0, 1) give
  ``r = sqrt(-2 ln u1)``, ``z0 = r cos(2 pi t)``, ``z1 = r sin(2 pi t)`` for elements ``2j`` and ``2j + 1``.
  ``u1 = (w + 1) * 2**-32`` and ``t = w' * 2**-32`` from the pair's two words (float64 outputs: 53-bit
  uniforms from two words each). ``normal_(mean, std)`` returns ``mean + std * z``.
- integers ``randint(low, high)``: ``low + (x mod (high - low))`` with ``x`` the 64-bit number of the element's
  two words (bias below ``(high - low) / 2**64``).
- Bernoulli: 1 where a 53-bit uniform is ``< p``. Dropout: an element is kept where its word is
  ``>= ceil(p * 2**32)``, then scaled by ``1 / (1 - p)`` (P(drop) = p within 2**-32).
- ``randperm(n)``: the stable argsort of n random 64-bit keys (ties, of probability < n**2 / 2**65, keep index
  order). On CUDA the keys are drawn on the device and sorted on the host (one round trip of 8n bytes).
- ``multinomial``: the exponential race. Element i of a row gets the key ``w_i / E_i`` with ``E_i = -ln u_i``
  exponential; without replacement the samples are the keys in decreasing order (Efraimidis and Spirakis,
  "Weighted random sampling with a reservoir", Inf. Process. Lett. 97, 2006), chosen on the host for CUDA;
  with replacement each sample is the argmax of a fresh race over the row (ties: lowest index), on the device.

Differences from PyTorch, stated plainly: the numbers differ from PyTorch's (its CPU generator is a Mersenne
twister and its CUDA Philox is laid out differently; an exact ``torch.randn`` reproduction is not offered);
float16/bfloat16 uniforms are on the dtype's grid of ``2**-digits``; ``randint`` into a floating dtype
refuses bounds beyond ``2**digits`` (PyTorch warns); ``nn.functional.dropout`` defaults to
``training=False`` (nbxtensor is for inference; PyTorch defaults to ``True``); complex and float8 outputs
are refused. On CUDA, Bernoulli probabilities outside [0, 1] give NaN instead of a device-side assert (the
CPU device raises, as PyTorch).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .._errors import check
from ..device.base import as_device
from ..dtypes import table as T
from ..dtypes.promotion import get_default_dtype
from ..dtypes.table import DType, dtype_from
from ..ops.registry import Cost, OpRecord, impl, register
from ..runtime.configs import launch_config
from ..runtime.launcher import launch
from ..runtime.triton_compat import jit, tl
from ..shapes import normalize_shape
from ..tensor.core import Tensor, host_view, new_empty
from . import detmath as D
from .generator import resolve_generator
from .philox import f64_arg, f64_bits, i64_args, philox_at, philox_blocks, signed64, u64_arg

__all__ = ["rand", "randn", "randint", "randperm", "bernoulli", "multinomial", "rand_like", "randn_like",
           "randint_like", "uniform_", "normal_", "bernoulli_", "dropout", "words_per_element", "FLOAT_DTYPES"]

# Distribution codes (kernel constexprs).
K_UNIFORM, K_NORMAL, K_RANDINT, K_BERN_T, K_BERN_S, K_DROPOUT, K_RAW64, K_EXPKEY = range(8)
_C = tl.constexpr if tl is not None else (lambda v: v)
_UNIFORM, _NORMAL, _RANDINT, _BERN_T, _BERN_S, _DROPOUT, _RAW64 = (_C(i) for i in range(7))
# Output conversions (kernel constexpr OUT).
O_F64, O_F32, O_F16, O_BF16, O_NATIVE = range(5)

FLOAT_DTYPES = (T.float32, T.float64, T.float16, T.bfloat16)
_DIGITS = {"float32": 24, "float16": 11, "bfloat16": 8, "float64": 53}  # significand bits (implicit one included)
_TWO32 = 2.0 ** -32
_TWO53 = 2.0 ** -53


def words_per_element(dist: int, dtype: DType) -> int:
    """32-bit words element ``e`` of a draw of ``dist`` into ``dtype`` reads (see the module docstring)."""
    if dist in (K_UNIFORM, K_NORMAL):
        return 2 if dtype is T.float64 else 1
    return 1 if dist == K_DROPOUT else 2


def _out_code(dtype: DType) -> int:
    return {"float64": O_F64, "float32": O_F32, "float16": O_F16, "bfloat16": O_BF16}.get(dtype.name, O_NATIVE)


# ---------------------------------------------------------------------------------------------------------
# NumPy implementation (the cpu device): the kernel's formulas, operation for operation
# ---------------------------------------------------------------------------------------------------------
def _u53_np(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    m = (hi.astype(np.uint64) << np.uint64(21)) | (lo.astype(np.uint64) >> np.uint64(11))
    return m.astype(np.float64) * _TWO53


def _u53p_np(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    m = (hi.astype(np.uint64) << np.uint64(21)) | (lo.astype(np.uint64) >> np.uint64(11))
    return (m.astype(np.float64) + 1.0) * _TWO53


def _round_trip_np(v: np.ndarray, out: int) -> np.ndarray:
    if out == O_F64:
        return v
    v32 = v.astype(np.float32)
    if out == O_F32:
        return v32.astype(np.float64)
    if out == O_F16:
        return v32.astype(np.float16).astype(np.float64)
    return v32.astype(T.bfloat16.numpy).astype(np.float64)


def _to_out_np(v: np.ndarray, dtype: DType) -> np.ndarray:
    """The kernel's final conversion: float64 -> float32 -> float16/bfloat16 (nearest even); ints as stored."""
    code = _out_code(dtype)
    if code == O_F64:
        return v.astype(np.float64)
    if code in (O_F32, O_F16, O_BF16):
        v32 = v.astype(np.float32)
        return v32 if code == O_F32 else v32.astype(dtype.numpy)
    if dtype is T.bool_:
        return v != 0
    with np.errstate(over="ignore", invalid="ignore"):
        return v.astype(dtype.numpy)


def _exp_key_np(w: np.ndarray, u: np.ndarray) -> np.ndarray:
    e = 0.0 - D.log_np(u)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(w > 0.0, w / e, -1.0)


def _values_np(dist: int, dtype: DType, n: int, seed: int, offset: int, pa: int, pb: int,
               inp: np.ndarray | None, digits: int) -> np.ndarray:
    """The n values (float64, or int64/uint64 for integer draws) of a draw: the CPU mirror of the kernel."""
    wide = words_per_element(dist, dtype) == 2
    nblocks = -(-n * (2 if wide else 1) // 4)
    words = philox_blocks(seed, offset, nblocks).reshape(-1)
    a, b = np.int64(pa).view(np.float64), np.int64(pb).view(np.float64)
    if dist == K_NORMAL:
        if wide:
            q = words.reshape(-1, 4)
            u1, t = _u53p_np(q[:, 0], q[:, 1]), _u53_np(q[:, 2], q[:, 3])
        else:
            q = words.reshape(-1, 2)
            u1, t = (q[:, 0].astype(np.float64) + 1.0) * _TWO32, q[:, 1].astype(np.float64) * _TWO32
        rho = np.sqrt(-2.0 * D.log_np(u1))
        s, c = D.sincos2pi_np(t)
        z = np.stack([a + b * (rho * c), a + b * (rho * s)], axis=-1).reshape(-1)
        return z[:n]
    if wide:
        w = words[:2 * n].reshape(n, 2)
        hi, lo = w[:, 0], w[:, 1]
    else:
        w = words[:n]
    if dist == K_UNIFORM:
        u = _u53_np(hi, lo) if wide else (w >> np.uint32(32 - digits)).astype(np.float64) * (2.0 ** -digits)
        v = a + (b - a) * u
        return np.where(_round_trip_np(v, _out_code(dtype)) >= b, a, v)
    if dist == K_RANDINT:
        x = (hi.astype(np.uint64) << np.uint64(32)) | lo.astype(np.uint64)
        r = np.uint64(pb % (1 << 64))
        return (np.uint64(pa % (1 << 64)) + x % r).view(np.int64)
    if dist in (K_BERN_T, K_BERN_S):
        p = inp.astype(np.float64) if dist == K_BERN_T else a
        v = np.where(_u53_np(hi, lo) < p, 1.0, 0.0)
        return np.where((p >= 0.0) & (p <= 1.0), v, np.nan)
    if dist == K_DROPOUT:
        keep = w.astype(np.uint64) >= np.uint64(pa % (1 << 64))
        with np.errstate(invalid="ignore", over="ignore"):
            return inp.astype(np.float64) * np.where(keep, b, 0.0)
    if dist == K_RAW64:
        return (hi.astype(np.uint64) << np.uint64(32)) | lo.astype(np.uint64)
    assert dist == K_EXPKEY, dist
    return _exp_key_np(inp.astype(np.float64), _u53p_np(hi, lo))


def _fill_cpu(dist: int, out: Tensor, inp: Tensor | None, seed: int, offset: int, pa: int, pb: int,
              digits: int = 0) -> None:
    n = out.numel()
    if n == 0:
        return
    x = None if inp is None else host_view(inp).reshape(-1)
    v = _values_np(dist, out.dtype, n, seed, offset, pa, pb, x, digits)
    host_view(out).reshape(-1)[...] = _to_out_np(v, out.dtype)


# ---------------------------------------------------------------------------------------------------------
# Triton implementation (cuda, and cpu tensors under the interpreter tier)
# ---------------------------------------------------------------------------------------------------------
@jit
def _bf16_bits(x32):
    """float32 block -> bfloat16 bits (round to nearest even on the bits; NaN stays NaN), as uint32."""
    b = x32.to(tl.uint32, bitcast=True)
    r = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return tl.where(x32 != x32, (b >> 16) | 0x40, r)


@jit
def _round_trip(v, OUT: tl.constexpr):
    """float64 ``v`` after rounding to the output dtype, back in float64."""
    if OUT == 0:
        r = v
    elif OUT == 1:
        r = v.to(tl.float32).to(tl.float64)
    elif OUT == 2:
        r = v.to(tl.float32).to(tl.float16).to(tl.float32).to(tl.float64)
    else:
        r = (_bf16_bits(v.to(tl.float32)) << 16).to(tl.float32, bitcast=True).to(tl.float64)
    return r


@jit
def _store(out_ptr, e, v, n, OUT: tl.constexpr):
    m = e < n
    if OUT == 0:
        tl.store(out_ptr + e, v.to(tl.float64), mask=m)
    elif OUT == 1:
        tl.store(out_ptr + e, v.to(tl.float32), mask=m)
    elif OUT == 2:
        tl.store(out_ptr + e, v.to(tl.float32).to(tl.float16), mask=m)
    elif OUT == 3:
        tl.store(out_ptr + e, _bf16_bits(v.to(tl.float32)).to(tl.int16), mask=m)  # out_ptr: an int16 view
    else:
        tl.store(out_ptr + e, v.to(out_ptr.dtype.element_ty), mask=m)


@jit
def _u53(hi, lo):
    m = (hi.to(tl.uint64) << 21) | (lo.to(tl.uint64) >> 11)
    return m.to(tl.float64) * 1.1102230246251565e-16


@jit
def _u53p(hi, lo):
    m = (hi.to(tl.uint64) << 21) | (lo.to(tl.uint64) >> 11)
    return (m.to(tl.float64) + 1.0) * 1.1102230246251565e-16


@jit
def exp_key(w, u):
    """The exponential-race key ``w / (-ln u)`` of weight ``w`` (float64) and uniform ``u`` in (0, 1]; -1 where
    ``w <= 0``. ``0 - ln u`` (not ``-ln u``) so that u = 1 gives +0 and the key +inf."""
    e = 0.0 - D.log_f64(u)
    return tl.where(w > 0.0, w / e, -1.0)


@jit
def _normal_pair(u1, t, mean, std):
    rho = tl.sqrt(-2.0 * D.log_f64(u1))  # float64 sqrt lowers to the IEEE sqrt.rn.f64 (approx only for fp32)
    s, c = D.sincos2pi_f64(t)
    return mean + std * (rho * c), mean + std * (rho * s)


@jit
def _uniform_ab(u, a, b, OUT: tl.constexpr):
    v = a + (b - a) * u
    return tl.where(_round_trip(v, OUT) >= b, a, v)


@jit
def _wide_value(w0, w1, e, in_ptr, n, pa, pb, DIST: tl.constexpr, OUT: tl.constexpr):
    if DIST == _UNIFORM:
        v = _uniform_ab(_u53(w0, w1), f64_arg(pa), f64_arg(pb), OUT)
    elif DIST == _RANDINT:
        x = (w0.to(tl.uint64) << 32) | w1.to(tl.uint64)
        v = (u64_arg(pa) + x % u64_arg(pb)).to(tl.int64, bitcast=True)
    elif DIST == _BERN_T:
        p = tl.load(in_ptr + e, mask=e < n, other=0.0).to(tl.float64)
        v = tl.where((p >= 0.0) & (p <= 1.0), tl.where(_u53(w0, w1) < p, 1.0, 0.0), float("nan"))
    elif DIST == _BERN_S:
        p = f64_arg(pa)
        v = tl.where(_u53(w0, w1) < p, 1.0, 0.0)
    elif DIST == _RAW64:
        v = (w0.to(tl.uint64) << 32) | w1.to(tl.uint64)
    else:  # K_EXPKEY
        w = tl.load(in_ptr + e, mask=e < n, other=0.0).to(tl.float64)
        v = exp_key(w, _u53p(w0, w1))
    return v


@jit
def _narrow_value(w, e, in_ptr, n, pa, pb, DIST: tl.constexpr, DIGITS: tl.constexpr, OUT: tl.constexpr):
    if DIST == _UNIFORM:
        u = (w >> (32 - DIGITS)).to(tl.float64) * (1.0 / (1 << DIGITS))
        v = _uniform_ab(u, f64_arg(pa), f64_arg(pb), OUT)
    else:  # K_DROPOUT
        x = tl.load(in_ptr + e, mask=e < n, other=0.0).to(tl.float64)
        keep = w.to(tl.uint64) >= u64_arg(pa)
        v = x * tl.where(keep, f64_arg(pb), 0.0)
    return v


@jit(do_not_specialize=["n", "seed", "offset", "pa", "pb"])
def _fill_kernel(out_ptr, in_ptr, n: tl.int64, seed: tl.int64, offset: tl.int64, pa: tl.int64, pb: tl.int64,
                 DIST: tl.constexpr, WIDE: tl.constexpr, DIGITS: tl.constexpr, OUT: tl.constexpr,
                 BLOCK: tl.constexpr):
    # One program turns BLOCK Philox blocks into 2 (WIDE) or 4 elements each.
    blk = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    r0, r1, r2, r3 = philox_at(seed, offset, blk, 0)
    nn = n.to(tl.int64)
    if WIDE:
        e0 = blk * 2
        if DIST == _NORMAL:
            v0, v1 = _normal_pair(_u53p(r0, r1), _u53(r2, r3), f64_arg(pa), f64_arg(pb))
        else:
            v0 = _wide_value(r0, r1, e0, in_ptr, nn, pa, pb, DIST, OUT)
            v1 = _wide_value(r2, r3, e0 + 1, in_ptr, nn, pa, pb, DIST, OUT)
        _store(out_ptr, e0, v0, nn, OUT)
        _store(out_ptr, e0 + 1, v1, nn, OUT)
    else:
        e0 = blk * 4
        if DIST == _NORMAL:
            v0, v1 = _normal_pair((r0.to(tl.float64) + 1.0) * 2.3283064365386963e-10,
                                  r1.to(tl.float64) * 2.3283064365386963e-10, f64_arg(pa), f64_arg(pb))
            v2, v3 = _normal_pair((r2.to(tl.float64) + 1.0) * 2.3283064365386963e-10,
                                  r3.to(tl.float64) * 2.3283064365386963e-10, f64_arg(pa), f64_arg(pb))
        else:
            v0 = _narrow_value(r0, e0, in_ptr, nn, pa, pb, DIST, DIGITS, OUT)
            v1 = _narrow_value(r1, e0 + 1, in_ptr, nn, pa, pb, DIST, DIGITS, OUT)
            v2 = _narrow_value(r2, e0 + 2, in_ptr, nn, pa, pb, DIST, DIGITS, OUT)
            v3 = _narrow_value(r3, e0 + 3, in_ptr, nn, pa, pb, DIST, DIGITS, OUT)
        _store(out_ptr, e0, v0, nn, OUT)
        _store(out_ptr, e0 + 1, v1, nn, OUT)
        _store(out_ptr, e0 + 2, v2, nn, OUT)
        _store(out_ptr, e0 + 3, v3, nn, OUT)


def _fill_triton(dist: int, out: Tensor, inp: Tensor | None, seed: int, offset: int, pa: int, pb: int,
                 digits: int = 0) -> None:
    n = out.numel()
    if n == 0:
        return
    wide = words_per_element(dist, out.dtype) == 2
    nblocks = -(-n // (2 if wide else 4))
    code = _out_code(out.dtype)
    dst = out.view(T.int16) if code == O_BF16 else out
    src = dst if inp is None else inp
    cfg = launch_config("random_fill", out.device, dtypes=(out.dtype,), numel=nblocks)
    block = cfg.pop("BLOCK")
    grid = (-(-nblocks // block),)
    # enable_fp_fusion=False: no a*b+c contracted into an FMA, so the float64 transforms round as NumPy does.
    launch(_fill_kernel, grid, dst, src, *i64_args(n, signed64(seed), signed64(offset), signed64(pa), signed64(pb)),
           DIST=dist, WIDE=wide, DIGITS=digits, OUT=code, BLOCK=block, enable_fp_fusion=False, **cfg)


# ---------------------------------------------------------------------------------------------------------
# Multinomial with replacement: one exponential race per sample
# ---------------------------------------------------------------------------------------------------------
@jit(do_not_specialize=["n", "s", "seed", "offset"])
def _race_kernel(out_ptr, w_ptr, n: tl.int64, s: tl.int64, seed: tl.int64, offset: tl.int64, BLOCK: tl.constexpr):
    # Program j = row * s + sample: argmax over the row of w_i / E_i, E_i from element j * n + i of the
    # 2-word stream (block (j*n+i) // 2, lanes 0-1 or 2-3). Ties: the lowest index (tl.argmax is left-biased).
    j = tl.program_id(0).to(tl.int64)
    nn = n.to(tl.int64)
    row = j // s.to(tl.int64)
    best = tl.full([], -2.0, tl.float64)
    best_i = tl.full([], -1, tl.int64)
    for start in range(0, nn, BLOCK):
        i = start + tl.arange(0, BLOCK).to(tl.int64)
        m = i < nn
        w = tl.load(w_ptr + row * nn + i, mask=m, other=0.0).to(tl.float64)
        e = j * nn + i
        r0, r1, r2, r3 = philox_at(seed, offset, e // 2, 0)
        odd = (e % 2) == 1
        key = tl.where(m, exp_key(w, _u53p(tl.where(odd, r2, r0), tl.where(odd, r3, r1))), -1.0)
        cmax = tl.max(key, axis=0)
        better = cmax > best
        best_i = tl.where(better, start + tl.argmax(key, axis=0).to(tl.int64), best_i)
        best = tl.where(better, cmax, best)
    tl.store(out_ptr + j, tl.where(best > -1.0, best_i, -1))


def _race_cpu(out: Tensor, w: Tensor, seed: int, offset: int) -> None:
    rows, n = w.shape
    s = out.shape[1]
    wv = host_view(w).astype(np.float64)
    res = host_view(out)
    step = max(1, (1 << 22) // max(n, 1))  # bound the words held at once
    for j0 in range(0, rows * s, step):
        js = np.arange(j0, min(rows * s, j0 + step), dtype=np.int64)
        e = (js[:, None] * n + np.arange(n, dtype=np.int64)[None, :]).reshape(-1)
        first = int(e[0]) // 2
        words = philox_blocks(seed, offset + first, int(e[-1]) // 2 - first + 1).reshape(-1)
        idx = 2 * e - 4 * first
        keys = _exp_key_np(wv[js // s].reshape(-1), _u53p_np(words[idx], words[idx + 1]))
        keys = keys.reshape(len(js), n)
        best = np.argmax(keys, axis=1)
        ok = keys[np.arange(len(js)), best] > -1.0
        res.reshape(-1)[js] = np.where(ok, best, -1)


def _race_triton(out: Tensor, w: Tensor, seed: int, offset: int) -> None:
    rows, n = w.shape
    s = out.shape[1]
    cfg = launch_config("random_race", out.device, dtypes=(w.dtype,), cols=n)
    block = cfg.pop("BLOCK")
    launch(_race_kernel, (rows * s,), out, w, *i64_args(n, s, signed64(seed), signed64(offset)), BLOCK=block,
           enable_fp_fusion=False, **cfg)


# ---------------------------------------------------------------------------------------------------------
# Op records: one per op; cpu and triton implementations share a signature: (out, seed, offset, *params), where
# (seed, offset) is the draw's reservation on its generator and out is contiguous.
# ---------------------------------------------------------------------------------------------------------
_NOTE = ("exact: defined by the Philox4x32-10 stream and the transforms of nbxtensor.random.distributions; the cpu "
         "and triton implementations are checked bit for bit against each other and statistically (KS, moments, "
         "chi-square) against the distribution")
_PHILOX_OPS = 120  # integer operations per Philox4x32-10 block: 10 rounds of 2 64-bit products, 4 xors, shifts


def _draw_cost(n: int, dtype: DType, dist: int, transform_ops: int, read_bytes: int = 0) -> Cost:
    blocks = -(-n * words_per_element(dist, dtype) // 4)
    return Cost(flops=blocks * _PHILOX_OPS + n * transform_ops, bytes_read=read_bytes,
                bytes_written=n * dtype.itemsize)


def _uniform_impl(fill):
    return lambda out, seed, offset, a, b: fill(K_UNIFORM, out, None, seed, offset, f64_bits(a), f64_bits(b),
                                                _DIGITS[out.dtype.name])


def _normal_impl(fill):
    return lambda out, seed, offset, mean, std: fill(K_NORMAL, out, None, seed, offset, f64_bits(mean),
                                                     f64_bits(std))


def _randint_impl(fill):
    return lambda out, seed, offset, low, r: fill(K_RANDINT, out, None, seed, offset, low, r)


def _bernoulli_impl(fill):
    def run(out, seed, offset, p):
        if isinstance(p, Tensor):
            fill(K_BERN_T, out, p, seed, offset, 0, 0)
        else:
            fill(K_BERN_S, out, None, seed, offset, f64_bits(p), 0)
    return run


def _dropout_impl(fill):
    return lambda out, seed, offset, x, threshold, scale: fill(K_DROPOUT, out, x, seed, offset, threshold,
                                                               f64_bits(scale))


def _randperm_impl(fill):
    def run(out, seed, offset):
        n = out.numel()
        keys = new_empty((n,), T.uint64, out.device)
        fill(K_RAW64, keys, None, seed, offset, 0, 0)
        order = np.argsort(keys.numpy(), kind="stable")  # a host copy for cuda: the sort runs on the host
        _write(out, _to_out_np(order.astype(np.int64), out.dtype))
    return run


def _multinomial_impl(fill, race):
    def run(out, seed, offset, w, replacement):
        rows, n = w.shape
        s = out.shape[1]
        if replacement:
            race(out, w, seed, offset)
            return
        keys = new_empty((rows, n), T.float64, w.device)
        fill(K_EXPKEY, keys, w, seed, offset, 0, 0)
        k = keys.numpy()
        order = np.lexsort((np.broadcast_to(np.arange(n), k.shape), -k), axis=1)[:, :s]
        picked = np.take_along_axis(k, order, axis=1)
        _write(out, np.where(picked > -1.0, order, -1).astype(np.int64))
    return run


def _write(out: Tensor, vals: np.ndarray) -> None:
    if out.device.type == "cpu":
        host_view(out)[...] = vals.reshape(out.shape)
    else:
        from ..tensor.core import from_host_array
        out.copy_(from_host_array(vals.reshape(out.shape), out.dtype, out.device))


register(OpRecord(name="uniform_", family="random", cpu=_uniform_impl(_fill_cpu), triton=_uniform_impl(_fill_triton),
                  cost=lambda n, dtype: _draw_cost(n, dtype, K_UNIFORM, 3), oracle_note=_NOTE,
                  extra={"kernel": "random_fill", "words": "1 (float64: 2) per element"}))
register(OpRecord(name="normal_", family="random", cpu=_normal_impl(_fill_cpu), triton=_normal_impl(_fill_triton),
                  cost=lambda n, dtype: _draw_cost(n, dtype, K_NORMAL, 40), oracle_note=_NOTE,
                  extra={"kernel": "random_fill", "words": "1 (float64: 2) per element"}))
register(OpRecord(name="random_", family="random", cpu=_randint_impl(_fill_cpu), triton=_randint_impl(_fill_triton),
                  cost=lambda n, dtype: _draw_cost(n, dtype, K_RANDINT, 4), oracle_note=_NOTE,
                  extra={"kernel": "random_fill", "words": "2 per element"}))
register(OpRecord(name="bernoulli", family="random", cpu=_bernoulli_impl(_fill_cpu),
                  triton=_bernoulli_impl(_fill_triton),
                  cost=lambda n, dtype, p_dtype=None: _draw_cost(n, dtype, K_BERN_T, 4,
                                                                 n * p_dtype.itemsize if p_dtype else 0),
                  oracle_note=_NOTE, extra={"kernel": "random_fill", "words": "2 per element"}))
register(OpRecord(name="native_dropout", family="random", cpu=_dropout_impl(_fill_cpu),
                  triton=_dropout_impl(_fill_triton),
                  cost=lambda n, dtype: _draw_cost(n, dtype, K_DROPOUT, 3, n * dtype.itemsize), oracle_note=_NOTE,
                  extra={"kernel": "random_fill", "words": "1 per element"}))
register(OpRecord(name="randperm", family="random", cpu=_randperm_impl(_fill_cpu), triton=_randperm_impl(_fill_triton),
                  cost=lambda n, dtype: Cost(flops=-(-n // 2) * _PHILOX_OPS, bytes_read=8 * n,
                                             bytes_written=8 * n + n * dtype.itemsize, workspace_bytes=8 * n),
                  oracle_note=_NOTE, extra={"kernel": "random_fill", "words": "2 per element",
                                            "host_step": "argsort of the keys on the host"}))
register(OpRecord(name="multinomial", family="random", cpu=_multinomial_impl(_fill_cpu, _race_cpu),
                  triton=_multinomial_impl(_fill_triton, _race_triton),
                  cost=lambda rows, n, s, replacement, w_dtype: Cost(
                      flops=(rows * s * n if replacement else rows * n) * (_PHILOX_OPS // 2 + 30),
                      bytes_read=(rows * s if replacement else rows) * n * w_dtype.itemsize,
                      bytes_written=rows * s * 8 + (0 if replacement else rows * n * 8),
                      workspace_bytes=0 if replacement else rows * n * 8),
                  oracle_note=_NOTE, extra={"kernel": "random_fill, random_race", "words": "2 per element and sample"}))


# ---------------------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------------------
def _size(size: tuple, kw_size, fn: str) -> tuple[int, ...]:
    if kw_size is not None:
        check(not size, lambda: f"{fn}(): size given both positionally and as a keyword", TypeError)
        size = (kw_size,) if isinstance(kw_size, int) else tuple(kw_size)
    shape = normalize_shape(size, fn=fn)
    for s in shape:
        check(s >= 0, lambda: f"Trying to create tensor with negative dimension {s}: {list(shape)}")
    return shape


def _float_dtype(dtype, fn: str, kernel: str) -> DType:
    dt = get_default_dtype() if dtype is None else dtype_from(dtype)
    check(dt in FLOAT_DTYPES, lambda: f"{fn}: \"{kernel}\" not implemented for '{dt.name}' (nbxtensor draws "
          f"{[d.name for d in FLOAT_DTYPES]})", NotImplementedError)
    return dt


def _draw(op: str, out: Tensor, generator, fn: str, nwords_per: int, *args) -> Tensor:
    """Reserve the draw's blocks on the generator and run the op's implementation into ``out``.

    ``out`` may be any layout: a non-contiguous ``out`` is filled through a contiguous temporary, so element
    ``e`` is always the e-th element in row-major order.
    """
    gen = resolve_generator(generator, out.device, fn)
    seed, offset = gen.reserve(-(-out.numel() * nwords_per // 4))
    target = out if out.is_contiguous() else new_empty(out.shape, out.dtype, out.device)
    impl(op, out.device.type)(target, seed, offset, *args)
    if target is not out:
        out.copy_(target)
    return out


def _out_or_new(shape, dtype: DType, device, out, fn: str) -> Tensor:
    if out is None:
        return new_empty(shape, dtype, as_device(device))
    check(isinstance(out, Tensor), lambda: f"{fn}(): argument 'out' must be Tensor, not {type(out).__name__}",
          TypeError)
    check(tuple(out.shape) == tuple(shape) and out.dtype is dtype, lambda: f"{fn}: out= must have shape "
          f"{list(shape)} and dtype {dtype.name}, got {list(out.shape)} and {out.dtype.name} (nbxtensor does not "
          "resize out=)")
    return out


def _checked_bound(v, dt: DType, what: str, fn: str) -> float:
    v = float(v)
    lim = float(np.finfo(dt.numpy).max) if dt is not T.bfloat16 else 3.3895313892515355e38
    check(math.isfinite(v) and -lim <= v <= lim, lambda: f"{fn}: {what} is out of bounds for {dt.name} (got {v})")
    return v


def uniform_(self: Tensor, from_=0.0, to=1.0, *, generator=None, **kwargs) -> Tensor:
    """Fill ``self`` with uniform values in [from, to) (``torch.Tensor.uniform_``; ``from`` may be passed as
    ``from_`` or, as in PyTorch, ``**{"from": ...}``). See the module docstring for the transform.

    Raises:
        NotImplementedError: ``self`` is not float32/float64/float16/bfloat16.
        RuntimeError: from > to; a bound not finite or outside the dtype's range; to - from beyond the dtype's
            largest value; a generator of another device.
    """
    if "from" in kwargs:
        from_ = kwargs.pop("from")
    check(not kwargs, lambda: f"uniform_() got unexpected keyword arguments {sorted(kwargs)}", TypeError)
    dt = _float_dtype(self.dtype, "uniform_", "check_uniform_bounds")
    a = _checked_bound(from_, dt, "from", "uniform_")
    b = _checked_bound(to, dt, "to", "uniform_")
    check(a <= b, lambda: f"uniform_ expects to return a [from, to) range, but found from={from_} > to={to}")
    lim = float(np.finfo(dt.numpy).max) if dt is not T.bfloat16 else 3.3895313892515355e38
    check(b - a <= lim, lambda: f"uniform_ expects to-from <= the largest {dt.name}, but found to={to} and "
          f"from={from_} which result in to-from to exceed the limit")
    return _draw("uniform_", self, generator, "uniform_", words_per_element(K_UNIFORM, dt), a, b)


def normal_(self: Tensor, mean=0.0, std=1.0, *, generator=None) -> Tensor:
    """Fill ``self`` with normal values of ``mean`` and ``std`` (``torch.Tensor.normal_``; Box-Muller, see the
    module docstring).

    Raises:
        NotImplementedError: ``self`` is not a float dtype of :data:`FLOAT_DTYPES`.
        RuntimeError: std < 0; a generator of another device.
    """
    _float_dtype(self.dtype, "normal_", "normal_kernel")
    check(isinstance(mean, numbers.Real) and isinstance(std, numbers.Real), lambda: "normal_: mean and std must be "
          f"real numbers, got {type(mean).__name__} and {type(std).__name__}", TypeError)
    check(not std < 0.0, lambda: f"normal expects std >= 0.0, but found std {std}")
    return _draw("normal_", self, generator, "normal_", words_per_element(K_NORMAL, self.dtype), float(mean),
                 float(std))


def rand(*size, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
         pin_memory=False, **kw) -> Tensor:
    """Uniform values in [0, 1) of shape ``size`` (``torch.rand``).

    Args:
        size: ints or one sequence (or ``size=`` keyword).
        generator: an ``nbx.Generator`` of ``device`` (default: the device's default generator).
        dtype: float32 (default dtype), float64, float16 or bfloat16.
        device: where to create the tensor.

    Returns:
        A contiguous tensor; values are multiples of ``2**-digits`` (24, 53, 11, 8 bits), so exactly
        representable and never 1.0.

    Raises:
        NotImplementedError: a dtype outside those four. RuntimeError: a negative size; a foreign generator.

    Example:
        >>> import nbxtensor as nbx
        >>> x = nbx.rand(2, 3, generator=nbx.Generator().manual_seed(0))
        >>> x.shape
        nbx.Size([2, 3])
    """
    check(not requires_grad, "rand: nbxtensor is an inference library and has no autograd (requires_grad=True)")
    shape = _size(size, kw.pop("size", None), "rand")
    check(not kw, lambda: f"rand() got unexpected keyword arguments {sorted(kw)}", TypeError)
    dt = _float_dtype(dtype if dtype is not None or out is None else out.dtype, "rand", "check_uniform_bounds")
    return uniform_(_out_or_new(shape, dt, device, out, "rand"), 0.0, 1.0, generator=generator)


def randn(*size, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False, **kw) -> Tensor:
    """Standard normal values of shape ``size`` (``torch.randn``; Box-Muller, see the module docstring).

    Raises:
        NotImplementedError: a dtype other than float32/float64/float16/bfloat16 (complex is not offered).
        RuntimeError: a negative size; a foreign generator.
    """
    check(not requires_grad, "randn: nbxtensor is an inference library and has no autograd (requires_grad=True)")
    shape = _size(size, kw.pop("size", None), "randn")
    check(not kw, lambda: f"randn() got unexpected keyword arguments {sorted(kw)}", TypeError)
    dt = _float_dtype(dtype if dtype is not None or out is None else out.dtype, "randn", "normal_kernel")
    return normal_(_out_or_new(shape, dt, device, out, "randn"), 0.0, 1.0, generator=generator)


def _int_range_check(low: int, high: int, dt: DType, fn: str) -> None:
    check(low < high, lambda: f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    if dt.kind in (T.KIND_INT, T.KIND_UINT, T.KIND_BOOL):
        info = (0, 1) if dt is T.bool_ else (int(np.iinfo(dt.numpy).min), int(np.iinfo(dt.numpy).max))
        check(info[0] <= low <= info[1], lambda: f"{fn}: from is out of bounds for {dt.name}")
        check(info[0] <= high - 1 <= info[1], lambda: f"{fn}: to - 1 is out of bounds for {dt.name}")
    else:
        lim = 1 << _DIGITS[dt.name]
        check(-lim <= low and high - 1 <= lim, lambda: f"{fn}: [from, to - 1] = [{low}, {high - 1}] is outside "
              f"[-(2^{_DIGITS[dt.name]}), 2^{_DIGITS[dt.name]}], where {dt.name} holds every integer exactly (PyTorch "
              "warns here; nbxtensor refuses)")
    check(-(1 << 63) <= low and high <= (1 << 63), lambda: f"{fn}: bounds must fit int64, got [{low}, {high})")


def randint(*args, size=None, generator=None, out=None, dtype=None, layout=None, device=None,
            requires_grad=False, pin_memory=False, low=None, high=None) -> Tensor:
    """Uniform integers in [low, high) (``torch.randint``): ``randint(high, size)`` or
    ``randint(low, high, size)``; dtype int64 by default, any integer, bool or float dtype accepted.

    Raises:
        TypeError: a wrong argument combination. RuntimeError: low >= high; bounds outside the dtype (for a
        float dtype: beyond ``2**digits``); a foreign generator.
    """
    check(not requires_grad, "randint: nbxtensor has no autograd (requires_grad=True)")
    pos = list(args)
    if size is None and pos and isinstance(pos[-1], (tuple, list)):
        size = pos.pop()
    if high is None and pos:
        high = pos.pop()
    if low is None and pos:
        low = pos.pop()
    check(not pos and high is not None and size is not None, lambda: "randint() received an invalid combination of "
          f"arguments: expected (int high, tuple of ints size) or (int low, int high, tuple of ints size), got "
          f"{args}", TypeError)
    low = 0 if low is None else low
    for name, v in (("low", low), ("high", high)):
        check(isinstance(v, (int, np.integer)) and not isinstance(v, bool), lambda: f"randint(): argument '{name}' "
              f"must be int, not {type(v).__name__}", TypeError)
    shape = _size((), size, "randint")
    dt = T.int64 if dtype is None else dtype_from(dtype)
    return _random_from_to(_out_or_new(shape, dt, device, out, "randint"), int(low), int(high), generator, "randint")


def _random_from_to(t: Tensor, low: int, high: int, generator, fn: str) -> Tensor:
    check(t.dtype.kind != T.KIND_COMPLEX and t.dtype not in (T.float8_e4m3fn, T.float8_e5m2),
          lambda: f"{fn}: not implemented for '{t.dtype.name}'", NotImplementedError)
    _int_range_check(low, high, t.dtype, fn)
    return _draw("random_", t, generator, fn, 2, signed64(low), signed64(high - low))


def rand_like(input: Tensor, *, generator=None, dtype=None, device=None, **_ignored) -> Tensor:
    """``rand`` with ``input``'s shape, dtype and device (``torch.rand_like``)."""
    return rand(input.shape, generator=generator, dtype=input.dtype if dtype is None else dtype,
                device=input.device if device is None else device)


def randn_like(input: Tensor, *, generator=None, dtype=None, device=None, **_ignored) -> Tensor:
    """``randn`` with ``input``'s shape, dtype and device (``torch.randn_like``)."""
    return randn(input.shape, generator=generator, dtype=input.dtype if dtype is None else dtype,
                 device=input.device if device is None else device)


def randint_like(input: Tensor, low=0, high=None, *, generator=None, dtype=None, device=None, **_ignored) -> Tensor:
    """``randint`` with ``input``'s shape, dtype and device (``torch.randint_like``; ``randint_like(x, high)``
    or ``randint_like(x, low, high)``)."""
    if high is None:
        low, high = 0, low
    return randint(low, high, tuple(input.shape), generator=generator,
                   dtype=input.dtype if dtype is None else dtype, device=input.device if device is None else device)


def randperm(n, *, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
             pin_memory=False) -> Tensor:
    """A random permutation of ``0 .. n-1`` (``torch.randperm``): the stable argsort of n random 64-bit keys.

    Raises:
        RuntimeError: n < 0; n - 1 does not fit ``dtype`` (for a float dtype: beyond ``2**digits``).
    """
    check(not requires_grad, "randperm: nbxtensor has no autograd (requires_grad=True)")
    check(isinstance(n, (int, np.integer)) and not isinstance(n, bool), lambda: f"randperm(): argument 'n' must be "
          f"int, not {type(n).__name__}", TypeError)
    n = int(n)
    check(n >= 0, lambda: f"Trying to create tensor with negative dimension {n}: [{n}]")
    dt = T.int64 if dtype is None else dtype_from(dtype)
    if n:
        _int_range_check(0, n, dt, "randperm")
    t = _out_or_new((n,), dt, device, out, "randperm")
    return _draw("randperm", t, generator, "randperm", 2)


def bernoulli(input: Tensor, p=None, *, generator=None, out=None) -> Tensor:
    """Bernoulli draws (``torch.bernoulli``): ``bernoulli(input)`` uses ``input`` as the probabilities and
    ``bernoulli(input, p)`` a float ``p`` for every element; the result has ``input``'s shape and dtype.

    Raises:
        NotImplementedError: ``input`` is not a float dtype (the tensor form).
        RuntimeError: a probability outside [0, 1] (on the CPU; CUDA writes NaN there, see the module
            docstring); a foreign generator.
    """
    check(isinstance(input, Tensor), lambda: f"bernoulli(): argument 'input' must be Tensor, not "
          f"{type(input).__name__}", TypeError)
    res = _out_or_new(input.shape, input.dtype, input.device, out, "bernoulli")
    if p is not None:
        return bernoulli_(res, p, generator=generator)
    return bernoulli_(res, input, generator=generator)


def bernoulli_(self: Tensor, p=0.5, *, generator=None) -> Tensor:
    """Fill ``self`` with Bernoulli(``p``) draws, ``p`` a float or a tensor broadcastable to ``self``
    (``torch.Tensor.bernoulli_``).

    Raises:
        RuntimeError: p outside [0, 1] ("bernoulli_ expects p to be in [0, 1]"); a tensor p on another device.
        NotImplementedError: a tensor ``p`` that is not float32/float64/float16/bfloat16.
    """
    _check_writable_random(self, "bernoulli_")
    if isinstance(p, Tensor):
        _float_dtype(p.dtype, "bernoulli_", "bernoulli_tensor_p_")
        check(p.device == self.device, lambda: f"bernoulli_: p is on {p.device} but self is on {self.device}")
        pb = p.expand(self.shape).contiguous()
        if pb.device.type == "cpu" and pb.numel():
            vals = host_view(pb).astype(np.float64)
            check(bool(np.all((vals >= 0.0) & (vals <= 1.0))), "Expected p_in >= 0 && p_in <= 1 to be true, but got "
                  "false (bernoulli: a probability outside [0, 1] or NaN)")
        return _draw("bernoulli", self, generator, "bernoulli_", 2, pb)
    check(isinstance(p, numbers.Real), lambda: f"bernoulli_(): argument 'p' must be float or Tensor, not "
          f"{type(p).__name__}", TypeError)
    check(0.0 <= float(p) <= 1.0, lambda: f"bernoulli_ expects p to be in [0, 1], but got p={p}")
    check(self.dtype.kind != T.KIND_COMPLEX and self.dtype not in (T.float8_e4m3fn, T.float8_e5m2),
          lambda: f"bernoulli_: not implemented for '{self.dtype.name}'", NotImplementedError)
    return _draw("bernoulli", self, generator, "bernoulli_", 2, float(p))


def _check_writable_random(t: Tensor, fn: str) -> None:
    check(isinstance(t, Tensor), lambda: f"{fn}: expected a Tensor, got {type(t).__name__}", TypeError)
    check(not t.is_readonly, lambda: f"{fn}: the tensor's memory is read-only; clone() it first")


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator=None, out=None) -> Tensor:
    """Indices drawn from the rows of ``input`` in proportion to its weights (``torch.multinomial``).

    Args:
        input: ``(n,)`` or ``(rows, n)`` non-negative finite weights (float dtypes), each row with a positive
            sum; need not sum to 1.
        num_samples: samples per row (``<= n`` without replacement).
        replacement: draw with replacement.

    Returns:
        int64 indices of shape ``(num_samples,)`` or ``(rows, num_samples)``; without replacement, in the order
        drawn.

    Raises:
        RuntimeError: PyTorch's messages: "prob_dist must be 1 or 2 dim", "cannot sample n_sample <= 0
        samples", "cannot sample n_sample > prob_dist.size(-1) samples without replacement", "probability
        tensor contains either `inf`, `nan` or element < 0", "invalid multinomial distribution (sum of
        probabilities <= 0)", "invalid multinomial distribution (with replacement=False, not enough
        non-negative category to sample)"; a non-float input.
    """
    check(isinstance(input, Tensor), lambda: f"multinomial(): argument 'input' must be Tensor, not "
          f"{type(input).__name__}", TypeError)
    check(input.ndim in (1, 2), "prob_dist must be 1 or 2 dim")
    check(input.dtype in FLOAT_DTYPES, lambda: f"multinomial only supports floating-point dtypes for input, got: "
          f"{input.dtype.name}")
    s = int(num_samples)
    check(s > 0, "cannot sample n_sample <= 0 samples")
    w = (input if input.ndim == 2 else input.unsqueeze(0)).contiguous()
    rows, n = w.shape
    check(replacement or s <= n, "cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if w.device.type == "cpu" and w.numel():
        v = host_view(w).astype(np.float64)
        check(bool(np.all(np.isfinite(v) & (v >= 0.0))), "probability tensor contains either `inf`, `nan` or "
              "element < 0")
        check(bool(np.all(v.sum(axis=1) > 0.0)), "invalid multinomial distribution (sum of probabilities <= 0)")
        if not replacement:
            check(bool(np.all((v > 0.0).sum(axis=1) >= s)), "invalid multinomial distribution (with "
                  "replacement=False, not enough non-negative category to sample)")
    res = _out_or_new((rows, s), T.int64, w.device, None, "multinomial")
    if rows and n:
        gen = resolve_generator(generator, w.device, "multinomial")
        seed, offset = gen.reserve(-(-rows * n * (s if replacement else 1) * 2 // 4))
        impl("multinomial", w.device.type)(res, seed, offset, w, bool(replacement))
        if w.device.type != "cpu":  # the CPU checked its input above; other devices report invalid rows as -1
            check(bool(np.all(res.numpy() >= 0)), "invalid multinomial distribution (a row with no positive "
                  "finite weight, or fewer positive weights than samples without replacement)")
    res = res if input.ndim == 2 else res.squeeze(0)
    if out is not None:
        out.copy_(res)
        return out
    return res


def dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False, *,
            generator=None) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``
    (``torch.nn.functional.dropout``) when ``training=True``; otherwise return ``input`` itself.

    The default is ``training=False`` (PyTorch's is ``True``): nbxtensor is for inference, where dropout is
    the identity. The mask is drawn from the generator (``generator=``, an nbxtensor extension).

    Raises:
        ValueError: p outside [0, 1] ("dropout probability has to be between 0 and 1, but got 1.5").
        RuntimeError: a non-float input in training mode (as PyTorch: "result type Float can't be cast to the
            desired output type Long").
    """
    check(isinstance(p, numbers.Real) and 0.0 <= float(p) <= 1.0, lambda: f"dropout probability has to be between 0 "
          f"and 1, but got {p}", ValueError)
    if not training:
        return input
    check(input.dtype in FLOAT_DTYPES, lambda: f"dropout: result type Float can't be cast to the desired output "
          f"type {input.dtype.name} (dropout needs float32/float64/float16/bfloat16)")
    p = float(p)
    threshold = math.ceil(p * 2.0 ** 32)  # keep where the element's word >= threshold: P(drop) = threshold / 2**32
    scale = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    x = input.contiguous()
    res = new_empty(input.shape, input.dtype, input.device)
    _draw("native_dropout", res, generator, "dropout", 1, x, threshold, scale)
    if inplace:
        input.copy_(res)
        return input
    return res


# Tensor methods (the family installs its own, as the op table's families do).
Tensor.uniform_ = uniform_
Tensor.normal_ = normal_
Tensor.bernoulli_ = bernoulli_
Tensor.bernoulli = lambda self, p=None, *, generator=None: bernoulli(self, p, generator=generator)
Tensor.multinomial = lambda self, num_samples, replacement=False, *, generator=None: multinomial(
    self, num_samples, replacement, generator=generator)
