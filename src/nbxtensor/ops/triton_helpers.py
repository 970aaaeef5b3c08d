"""Triton primitives that differ from PyTorch, wrapped once (../shared/STYLE.md, "Kernels").

Every kernel of nbxtensor uses these instead of the raw primitive:

- **Integer floor division and remainder.** Triton's ``//`` and ``%`` on integers truncate toward zero (C
  semantics); PyTorch's ``floor_divide``/``remainder``/``div(rounding_mode='floor')`` floor.
  :func:`floordiv_int`, :func:`remainder_int`. Integer division by zero: PyTorch raises on CPU and returns
  unspecified values on CUDA; these helpers return -1 for the quotient and the dividend for the remainder
  (the host refuses zero divisors on the ``cpu`` device, as PyTorch CPU does).
- **Floating floor division and remainder** as ATen's ``div_floor_floating`` and ``remainder``
  (c10/util/generic_math.h): :func:`floordiv_float`, :func:`remainder_float`.
- **NaN.** ``tl.maximum``/``tl.minimum``, ``tl.max``/``tl.min`` and ``tl.argmax``/``tl.argmin`` do not
  propagate NaN the way PyTorch does (``torch.maximum``, ``amax`` and ``argmax`` treat NaN as the extreme).
  :func:`maximum`, :func:`minimum` (elementwise), :func:`max_combine`/:func:`min_combine` and
  :func:`argmax_combine`/:func:`argmin_combine` (for ``tl.reduce``; NaN wins, the first index wins ties) and
  the reductions :func:`nan_max`, :func:`nan_min`, :func:`nan_argmax`, :func:`nan_argmin`; for hot loops
  :func:`maximum_fast`/:func:`nan_max_fast` (the hardware's NaN-propagating ``max.NaN.f32``).
- **Conversions.** :func:`convert` implements :mod:`nbxtensor.dtypes.casting` exactly, on the GPU and under
  the interpreter alike: float to integer truncates with NaN -> 0 and saturation; float8_e4m3fn saturates to
  +-448; float8_e5m2 overflows to inf; float64 and integers reach float16/bfloat16/float8 through float32
  (PyTorch's double rounding); anything to bool is ``!= 0``. bfloat16 and float8 conversions are done on the
  bits with integer arithmetic (round to nearest even, subnormals included): Triton's interpreter truncates
  or rounds these incorrectly, and Hopper's ``cvt...satfinite`` would saturate float8_e5m2 instead of
  overflowing to inf, so one bit-exact formula serves both tiers.
- **IEEE float32 on the GPU** (PyTorch's CUDA kernels are built by nvcc with IEEE division and square root and
  without flush-to-zero). Triton differs in two ways. (1) It compiles libdevice with ``__CUDA_FTZ`` reflected
  to 1, so every libdevice function (``floor``, ``fmod``, ``pow``, ``atan2``, ``exp`` ...) flushes float32
  subnormal inputs and results to zero: kernels must be launched with :data:`IEEE_OPTIONS`
  (``enable_reflect_ftz=False``; :func:`ieee_options` gives them for the current tier), which selects
  libdevice's non-FTZ code, the code nvcc uses. What remains marked ``.approx``/``.ftz`` in the PTX
  (``ex2.approx.ftz`` inside ``expf``, ``rcp.approx.ftz`` inside ``tanhf`` ...) is libdevice's own
  implementation on range-reduced arguments, as in CUDA's math library. (2) Triton lowers float32 ``/`` to
  ``div.full.f32`` (2 ulp, wrong for huge divisors) and ``tl.sqrt``/``tl.exp``/``tl.log``/``tl.sin``/``tl.cos``
  to ``.approx`` instructions: kernels use :func:`div_rn`, :func:`rcp_rn`, :func:`sqrt_rn` (float32 and
  float64; Triton's own ``tl.div_rn``/``tl.sqrt_rn`` refuse float64) and libdevice instead (checked on the
  sm_90 PTX and TTIR of every elementwise kernel by tests/ops/test_pointwise.py, of every other family by
  tests/ops/test_ptx_audit.py).
- **libdevice under the interpreter.** Triton's interpreter cannot call libdevice
  (``extern_elementwise`` raises). :func:`patch_interpreter` maps the libdevice symbols used here to NumPy
  (float64 where NumPy lacks the function, then rounded), so kernels use one source on both tiers; the GPU
  runs the real libdevice.
"""

from __future__ import annotations

import math

import numpy as np

from ..runtime.triton_compat import HAVE_TRITON, INTERPRET, jit, tl

__all__ = ["libdevice", "IEEE_OPTIONS", "ieee_options", "patch_interpreter", "div_rn", "sqrt_rn", "rcp_rn",
           "maximum_fast", "nan_max_fast", "floordiv_int",
           "remainder_int", "floordiv_float", "floordiv_float16", "remainder_float",
           "maximum", "minimum", "max_combine", "min_combine", "argmax_combine", "argmin_combine", "nan_max",
           "nan_min", "nan_argmax", "nan_argmin", "convert", "isnan", "signbit", "rint", "TL_DTYPES"]

if HAVE_TRITON:
    # the CUDA module itself: `triton.language.extra.libdevice` holds stubs that only the compiler resolves
    from triton.language.extra.cuda import libdevice
else:  # pragma: no cover - CPU-only installs
    libdevice = None


def _tl_dtypes() -> dict:
    if not HAVE_TRITON:
        return {}
    return {"bool": tl.int1, "uint8": tl.uint8, "int8": tl.int8, "int16": tl.int16, "int32": tl.int32,
            "int64": tl.int64, "uint16": tl.uint16, "uint32": tl.uint32, "uint64": tl.uint64,
            "float16": tl.float16, "bfloat16": tl.bfloat16, "float32": tl.float32, "float64": tl.float64,
            "float8_e4m3fn": tl.float8e4nv, "float8_e5m2": tl.float8e5}


TL_DTYPES = _tl_dtypes()  # nbxtensor dtype name -> Triton dtype

# Compile options for kernels that must compute float32 as nvcc does for PyTorch (no flush-to-zero in
# libdevice): see the module docstring. A numerics contract, not a tuning knob, so not in runtime/configs.
IEEE_OPTIONS = {"enable_reflect_ftz": False}


def ieee_options() -> dict:
    """:data:`IEEE_OPTIONS` as launch keywords for the compiled tiers; empty under the interpreter (which runs
    libdevice through NumPy, without flushing, and takes no compile options)."""
    return {} if INTERPRET else dict(IEEE_OPTIONS)


# ---------------------------------------------------------------------------------------------------------
# libdevice under the interpreter
# ---------------------------------------------------------------------------------------------------------
def _vec(f):
    uf = np.frompyfunc(f, 1, 1)
    return lambda x: uf(x.astype(np.float64)).astype(np.float64)


def _erfinv64(y: np.ndarray) -> np.ndarray:
    """float64 inverse error function: Giles' single-precision approximation (M. Giles, "Approximating the
    erfinv function", GPU Computing Gems, 2011) refined by two Newton steps on ``math.erf``."""
    y = np.asarray(y, dtype=np.float64)
    out = np.full(y.shape, np.nan)
    ok = np.abs(y) < 1
    x = y[ok]
    w = -np.log((1.0 - x) * (1.0 + x))
    small = w < 5.0
    ws = w - 2.5
    wl = np.sqrt(np.maximum(w, 5.0)) - 3.0
    ps = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
              0.246640727, 1.50140941):
        ps = c + ps * ws
    pl = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
              1.00167406, 2.83297682):
        pl = c + pl * wl
    r = np.where(small, ps, pl) * x
    erf = np.frompyfunc(math.erf, 1, 1)
    for _ in range(2):
        err = erf(r).astype(np.float64) - x
        r = r - err / (2.0 / math.sqrt(math.pi) * np.exp(-r * r))
    out[ok] = r
    out[y == 1] = np.inf
    out[y == -1] = -np.inf
    return out


def _np_signbit(x):
    return np.signbit(x).astype(np.int32)


def _fma_exact(a, b, c):
    """``a * b + c`` rounded once (IEEE fma), float32 or float64 arrays, for libdevice's ``fma`` under the
    interpreter (Triton's interpreter evaluates ``tl.fma`` as ``a * b + c``, rounding twice).

    float32: the product is exact in float64; the sum is rounded to odd in float64 (TwoSum error term), so the
    final rounding to float32 is correct (53 >= 24 + 2 bits). float64: exact rational arithmetic per element."""
    a, b, c = np.broadcast_arrays(np.asarray(a), np.asarray(b), np.asarray(c))
    if a.dtype == np.float64:
        from fractions import Fraction
        out = np.empty(a.shape, np.float64)
        for i, (x, y, z) in enumerate(zip(a.ravel().tolist(), b.ravel().tolist(), c.ravel().tolist())):
            if math.isfinite(x) and math.isfinite(y) and math.isfinite(z):
                v = Fraction(x) * Fraction(y) + Fraction(z)
                try:
                    r = float(v)
                except OverflowError:
                    r = math.inf if v > 0 else -math.inf
                out.flat[i] = r if v != 0 else (x * y + z)  # an exact zero: IEEE's sign rule
            else:
                out.flat[i] = x * y + z
        return out
    with np.errstate(all="ignore"):
        p = a.astype(np.float64) * b.astype(np.float64)
        z = c.astype(np.float64)
        s = p + z
        bb = s - p
        e = (p - (s - bb)) + (z - bb)  # TwoSum: s + e == p + z exactly (finite s)
        odd = (s.view(np.uint64) & 1) == 1
        fix = np.isfinite(s) & (e != 0) & ~odd
        s = np.where(fix, np.nextafter(s, np.where(e > 0, np.inf, -np.inf)), s)
        return s.astype(a.dtype)


_EXTERN_NUMPY = {
    "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "tanh": np.tanh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "expm1": np.expm1,
    "log1p": np.log1p, "log10": np.log10, "exp": np.exp, "log": np.log, "exp2": np.exp2, "log2": np.log2,
    "sin": np.sin, "cos": np.cos, "sqrt": np.sqrt, "rint": np.rint, "nearbyint": np.rint, "trunc": np.trunc,
    "floor": np.floor, "ceil": np.ceil, "fabs": np.abs, "erf": _vec(math.erf), "erfc": _vec(math.erfc),
    "erfinv": _erfinv64, "atan2": np.arctan2, "hypot": np.hypot, "copysign": np.copysign, "fmod": np.fmod,
    "pow": np.power, "fmax": np.fmax, "fmin": np.fmin, "signbit": _np_signbit, "cbrt": np.cbrt,
    "fma": lambda a, b, c: _fma_exact(a, b, c),
    "rsqrt": lambda x: np.reciprocal(np.sqrt(x)),
}


def _extern_name(symbol: str) -> str:
    base = symbol[5:] if symbol.startswith("__nv_") else symbol
    if base in _EXTERN_NUMPY:
        return base
    if base.endswith("f") and base[:-1] in _EXTERN_NUMPY:
        return base[:-1]
    if base.endswith("d") and base[:-1] in _EXTERN_NUMPY:  # signbitd
        return base[:-1]
    raise NotImplementedError(f"interpreter: libdevice symbol {symbol} has no NumPy mapping in "
                              "nbxtensor.ops.triton_helpers._EXTERN_NUMPY")


_PATCHED = []


def patch_interpreter() -> None:
    """Let Triton's interpreter evaluate the libdevice calls of our kernels with NumPy (idempotent; a no-op
    outside the interpreter tier). Results are computed by NumPy in the argument's dtype (float32 or
    float64; float64 then rounded where NumPy has no such function) and typed as libdevice's return type."""
    if _PATCHED or not (HAVE_TRITON and INTERPRET):
        return
    from triton.runtime import interpreter as I

    def create_extern_elementwise(self, libName, libPath, symbol, argList, retType, isPure):
        f = _EXTERN_NUMPY[_extern_name(symbol)]
        ret_np = I._get_np_dtype(retType)
        with np.errstate(all="ignore"):
            data = f(*[a.data for a in argList])
        return I.TensorHandle(np.asarray(data).astype(ret_np), retType.scalar if hasattr(retType, "scalar")
                              else retType)

    I.InterpreterBuilder.create_extern_elementwise = create_extern_elementwise

    # Runtime loop bounds (``for r in range(0, n, BLOCK)`` with an int argument ``n``): the interpreter holds
    # scalar arguments as 1-element 1-d arrays and converts them with int(), which NumPy >= 2.4 refuses for
    # arrays with a dimension. Convert through the single element instead.
    patch_tensor = I._patch_lang_tensor

    def _patch_lang_tensor(tensor, scope):
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0]))

    I._patch_lang_tensor = _patch_lang_tensor

    # The interpreter hands its semantic object only to builtins of triton.language; give it to libdevice's
    # builtins too, for the duration of each kernel call (same scope object, restored with the rest).
    orig_patch_lang = I._patch_lang

    def _patch_lang(fn):
        scope = orig_patch_lang(fn)
        I._patch_builtin(libdevice, I.interpreter_builder, scope)
        return scope

    I._patch_lang = _patch_lang
    _PATCHED.append(True)


patch_interpreter()


# ---------------------------------------------------------------------------------------------------------
# IEEE division and square root
# ---------------------------------------------------------------------------------------------------------
@jit
def div_rn(a, b):
    """``a / b`` correctly rounded (IEEE, as nvcc's default ``-prec-div=true``) for float32 or float64 blocks of
    one dtype. Triton's float32 ``/`` is ``div.full.f32`` (2 ulp; 0 for divisors beyond 2**126) and its
    ``tl.div_rn`` accepts float32 only; float64 ``/`` is already ``div.rn.f64``."""
    if a.dtype == tl.float64:
        r = a / b
    else:
        r = tl.div_rn(a, b)
    return r


@jit
def sqrt_rn(x):
    """Correctly rounded square root (nvcc's default ``-prec-sqrt=true``), float32 or float64: ``tl.sqrt`` is
    ``sqrt.approx.f32`` for float32 (but ``sqrt.rn.f64`` for float64) and ``tl.sqrt_rn`` accepts float32 only."""
    if x.dtype == tl.float64:
        r = tl.sqrt(x)
    else:
        r = tl.sqrt_rn(x)
    return r


@jit
def rcp_rn(x):
    """``1 / x`` correctly rounded (IEEE), float32 or float64 (:func:`div_rn` of a one; Triton's float32
    ``1.0 / x`` is ``div.full.f32``)."""
    return div_rn(tl.full(x.shape, 1.0, x.dtype), x)


# ---------------------------------------------------------------------------------------------------------
# Division and remainder
# ---------------------------------------------------------------------------------------------------------
@jit
def floordiv_int(a, b):
    """``a // b`` rounded toward -inf (Python and PyTorch), for integer blocks of one dtype; b == 0 gives -1."""
    bz = b == 0
    bs = tl.where(bz, 1, b)
    q = a // bs
    r = a % bs
    adj = (r != 0) & ((r < 0) != (bs < 0))
    q = tl.where(adj, q - 1, q)
    return tl.where(bz, -1, q).to(q.dtype)


@jit
def remainder_int(a, b):
    """``a - floor(a / b) * b``: the sign of ``b`` (Python and PyTorch), integer blocks; b == 0 gives a."""
    bz = b == 0
    bs = tl.where(bz, 1, b)
    r = a % bs
    adj = (r != 0) & ((r < 0) != (bs < 0))
    r = tl.where(adj, r + bs, r)
    return tl.where(bz, a, r).to(r.dtype)


@jit
def _floordiv_float_aten(a, b):
    """ATen's ``div_floor_floating`` step by step: floor(a / b) computed from fmod so that it is exact where
    a / b rounds across an integer; b == 0 gives a / b (inf or NaN); a zero quotient keeps the sign of a / b.
    The reference (and the fallback for quotients of 2**21 and more) of :func:`floordiv_float`."""
    mod = libdevice.fmod(a, b)
    div = div_rn(a - mod, b)  # IEEE division, as nvcc's `/` (Triton's float32 `/` is div.full.f32)
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)
    fl = tl.floor(div)
    fl = tl.where(div - fl > 0.5, fl + 1.0, fl)
    q = div_rn(a, b)
    zero = libdevice.copysign(tl.zeros_like(div), q)
    res = tl.where(div != 0, fl, zero)
    return tl.where(b == 0, q, res)


@jit
def _remainder_float_aten(a, b):
    """ATen's floating ``remainder``: ``fmod(a, b)`` moved into the sign of ``b`` (the fallback of
    :func:`remainder_float` for quotients of 2**22 and more)."""
    mod = libdevice.fmod(a, b)
    return tl.where((mod != 0) & ((b < 0) != (mod < 0)), mod + b, mod)


@jit
def _floor_quotient(a, b):
    """``(q, f, r)``: ``q = a / b`` correctly rounded, ``f`` = floor of the exact quotient and ``r`` the sign
    (and zero-ness) of ``a - f * b``, for float32 or float64 blocks.

    ``f0 = floor(q)`` is floor(a/b) or one more (q is rounded to nearest and integers below 2**24 (2**53) are
    representable, so it never falls below the floor), and ``fma(-f0, b, a)`` is ``a - f0*b`` rounded once: its
    sign is exact (a nonzero multiple of the operands' smallest unit never rounds to zero), so one compare
    decides ``f = f0 - 1``. Exact for |q| < 2**23 (2**52); beyond that ``f`` is ``q`` (already an integer).
    ``f == 0`` takes ``r = a`` (an infinite divisor: 0 * inf is NaN, ATen's fmod(a, inf) is a). Non-finite
    ``q``: ``f = q``; ``r`` is NaN exactly where ``a`` is infinite or ``b`` is zero (or an operand NaN)."""
    q = div_rn(a, b)
    f0 = tl.floor(q)
    r = tl.where(f0 == 0, a, libdevice.fma(-f0, b, a))
    f = tl.where((r != 0) & ((r < 0) != (b < 0)), f0 - 1.0, f0)
    return q, f, r


@jit
def floordiv_float16(a, b):
    """:func:`floordiv_float` for operands that are float16 or bfloat16 values (computed in float32) whose
    result is rounded to that same 16-bit dtype: exactly ATen's ``div_floor_floating`` so rounded, at about a
    fifth of the instructions (no fmod, one division).

    Why it is exact: below 2**21 ATen's float32 steps give floor(a/b) exactly (the rounding of ``a - mod`` and
    of the division stay below a quarter unit there), and so does :func:`_floor_quotient`. float16 has no
    larger finite result (65504). A bfloat16 quotient ``q = A/B * 2**d`` (8-bit A, B) of 2**21 or more is
    either a 9-bit value exactly (then both are exactly q) or lies at least 2**-16 of q away from every
    bfloat16 rounding midpoint, while both results lie within 2**-20 of q: they round to the same bfloat16.
    Checked on every float16/bfloat16 dividend against sampled divisors by tests/ops/test_elementwise.py.
    Special values as ATen: b == 0 gives a / b; an infinite a (b != 0) NaN; an infinite b gives -1 or a signed
    zero; a zero result carries the sign of a / b."""
    q, f, r = _floor_quotient(a, b)
    return tl.where((r != r) & (b != 0), r, f)


@jit
def floordiv_float(a, b):
    """ATen's ``div_floor_floating`` (c10/util/generic_math.h), float32 or float64 blocks, bit for bit.

    Quotients below 2**21 (2**50 for float64), where ATen's result is floor(a/b) exactly, take
    :func:`_floor_quotient` (one division, one fma); a block holding a larger finite one also evaluates
    :func:`_floordiv_float_aten` (fmod and two divisions) and takes it there. Special values as
    :func:`floordiv_float16`."""
    q, f, r = _floor_quotient(a, b)
    res = tl.where((r != r) & (b != 0), r, f)
    LIM: tl.constexpr = 2097152.0 if a.dtype != tl.float64 else 1125899906842624.0
    big = (tl.abs(q) >= LIM) & (tl.abs(a) < float("inf")) & (b != 0)
    if tl.max(big.to(tl.int32)) != 0:
        res = tl.where(big, _floordiv_float_aten(a, b), res)
    return res


@jit
def remainder_float(a, b):
    """ATen's floating ``remainder``: ``fmod(a, b)``, plus ``b`` where the signs differ (rounded once), float32
    or float64 blocks, bit for bit (:func:`_remainder_float_aten`).

    The fma route of :func:`floordiv_float` (one division, an fma, an fmod fallback per block for quotients of
    2**22 and more) was measured slower on the H200: bf16 32768x8192 at 2554 GB/s (0.605x PyTorch) against
    0.797x for this body (``bench_ops.py --ops remainder --quick``, 2026-11-30), so remainder keeps ATen's."""
    return _remainder_float_aten(a, b)


# ---------------------------------------------------------------------------------------------------------
# NaN-propagating max/min
# ---------------------------------------------------------------------------------------------------------
@jit
def isnan(x):
    """``x != x`` (NaN test that needs no libdevice)."""
    return x != x


@jit
def maximum(a, b):
    """``torch.maximum``: NaN if either is NaN (``tl.maximum`` returns the other operand)."""
    return tl.where(a != a, a, tl.where(b != b, b, tl.where(a > b, a, b)))


@jit
def minimum(a, b):
    """``torch.minimum``: NaN if either is NaN."""
    return tl.where(a != a, a, tl.where(b != b, b, tl.where(a < b, a, b)))


@jit
def max_combine(a, b):
    """Combine function for ``tl.reduce``: the maximum, NaN winning."""
    return maximum(a, b)


@jit
def min_combine(a, b):
    """Combine function for ``tl.reduce``: the minimum, NaN winning."""
    return minimum(a, b)


@jit
def argmax_combine(v1, i1, v2, i2):
    """Combine for ``tl.reduce((values, indices), axis, argmax_combine)``: the larger value wins, NaN counts
    as larger than everything, and among equal values (or two NaNs) the smaller index wins (PyTorch's
    ``argmax``: first occurrence)."""
    n1 = v1 != v1
    n2 = v2 != v2
    take1 = (v1 > v2) | (n1 & ~n2) | (((v1 == v2) | (n1 & n2)) & (i1 < i2))
    return tl.where(take1, v1, v2), tl.where(take1, i1, i2)


@jit
def argmin_combine(v1, i1, v2, i2):
    """As :func:`argmax_combine` for the minimum (NaN still wins: PyTorch's ``argmin`` returns a NaN's index)."""
    n1 = v1 != v1
    n2 = v2 != v2
    take1 = (v1 < v2) | (n1 & ~n2) | (((v1 == v2) | (n1 & n2)) & (i1 < i2))
    return tl.where(take1, v1, v2), tl.where(take1, i1, i2)


@jit
def nan_max(x, axis: tl.constexpr):
    """``tl.max`` with PyTorch's NaN rule (``amax``: NaN if any element is NaN)."""
    return tl.reduce(x, axis, max_combine)


@jit
def nan_min(x, axis: tl.constexpr):
    """``tl.min`` with PyTorch's NaN rule."""
    return tl.reduce(x, axis, min_combine)


@jit
def nan_argmax(x, idx, axis: tl.constexpr):
    """(max value, its index) along ``axis``, with ``idx`` the candidate indices (same shape as ``x``); NaN is
    the maximum; the first occurrence wins. Mask out-of-range lanes with -inf values and a large index."""
    return tl.reduce((x, idx), axis, argmax_combine)


@jit
def nan_argmin(x, idx, axis: tl.constexpr):
    """(min value, its index) along ``axis``; NaN wins; the first occurrence wins."""
    return tl.reduce((x, idx), axis, argmin_combine)


@jit
def maximum_fast(a, b):
    """``torch.maximum`` through the hardware's NaN-propagating maximum (``tl.maximum`` with
    ``PropagateNan.ALL``: one ``max.NaN.f32`` on sm_80+, a compare and select for float64): NaN if either is
    NaN, for hot loops where :func:`maximum`'s three selects cost (attention's running row maximum). On the GPU a
    (+0, -0) pair gives +0 in either order (LLVM's ``llvm.maximum``, IEEE 754-2019's ``maximum``)."""
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@jit
def nan_max_fast(x, axis: tl.constexpr):
    """``tl.max`` with PyTorch's NaN rule, combined by :func:`maximum_fast`."""
    return tl.reduce(x, axis, maximum_fast)


# ---------------------------------------------------------------------------------------------------------
# Small float helpers
# ---------------------------------------------------------------------------------------------------------
@jit
def rint(x):
    """Round half to even (``torch.round``), float32 or float64."""
    return libdevice.rint(x)


@jit
def signbit(x):
    """True where the sign bit is set (-0.0 and negative NaNs included), float32 or float64."""
    if x.dtype == tl.float64:
        r = x.to(tl.int64, bitcast=True) < 0
    else:
        r = x.to(tl.float32).to(tl.int32, bitcast=True) < 0
    return r


# ---------------------------------------------------------------------------------------------------------
# Conversions (nbxtensor.dtypes.casting, exactly)
# ---------------------------------------------------------------------------------------------------------
@jit
def _bf16_to_f32(x):
    u = x.to(tl.uint16, bitcast=True).to(tl.uint32) << 16
    return u.to(tl.float32, bitcast=True)


@jit
def _f32_to_bf16(f):
    # Round to nearest even on the bits (c10::BFloat16's round_to_nearest_even): bfloat16 shares float32's
    # exponent range, so subnormals and overflow to inf fall out of the carry; NaN is kept quiet.
    u = f.to(tl.uint32, bitcast=True)
    lsb = (u >> 16) & 1
    r = ((u + 0x7FFF + lsb) >> 16).to(tl.uint16)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = tl.where(nan, ((u >> 16) | 0x40).to(tl.uint16), r)
    return r.to(tl.bfloat16, bitcast=True)


@jit
def _e5m2_to_f32(x):
    # float8_e5m2 is float16 with the low 8 mantissa bits cut: shift back and widen exactly.
    h = (x.to(tl.uint8, bitcast=True).to(tl.uint16) << 8).to(tl.float16, bitcast=True)
    return h.to(tl.float32)


@jit
def _e4m3fn_to_f32(x):
    b = x.to(tl.uint8, bitcast=True).to(tl.uint32)
    sign = (b >> 7) << 31
    e = (b >> 3) & 0xF
    m = b & 0x7
    normal = ((e + 120) << 23) | (m << 20)
    sub = (m.to(tl.float32) * 0.001953125).to(tl.uint32, bitcast=True)  # m * 2**-9, exact
    mag = tl.where(e == 0, sub, normal)
    mag = tl.where((b & 0x7F) == 0x7F, 0x7FC00000, mag)
    return (mag | sign).to(tl.float32, bitcast=True)


@jit
def _f32_to_small(f, MAN: tl.constexpr, BIAS: tl.constexpr, MAXBITS: tl.constexpr, OVF: tl.constexpr,
                  NANBITS: tl.constexpr):
    """float32 -> an 8-bit float's bits (uint32), round to nearest even, subnormals included.

    MAN mantissa bits, exponent BIAS, MAXBITS the largest finite magnitude's bits; values rounding beyond it
    (and inf) become OVF (MAXBITS to saturate, the infinity's bits to overflow). NaN -> NANBITS.
    """
    u = f.to(tl.uint32, bitcast=True)
    sign = (u >> 31) << 7
    a = u & 0x7FFFFFFF
    af = a.to(tl.float32, bitcast=True)
    SHIFT: tl.constexpr = 23 - MAN
    # normal range of the target: rebias the exponent after rounding the mantissa on float32's bits
    lsb = (a >> SHIFT) & 1
    rn = ((a + ((1 << (SHIFT - 1)) - 1) + lsb) >> SHIFT) - ((127 - BIAS) << MAN)
    # subnormal range: |f| / 2**(1 - BIAS - MAN) rounded to an integer; (q + 2**23) - 2**23 rounds to nearest
    # even in float32 for 0 <= q < 2**22 (no fast-math in Triton, so it is not folded away)
    q = af * (2.0 ** (BIAS - 1 + MAN))
    rs = ((q + 8388608.0) - 8388608.0).to(tl.uint32)
    small = af < 2.0 ** (1 - BIAS)
    r = tl.where(small, rs, rn)
    r = tl.where((r > MAXBITS) | (a >= 0x7F800000), OVF, r)
    r = tl.where(a > 0x7F800000, NANBITS, r)
    return r | sign


@jit
def _to_f32(x):
    """Any loaded value to float32 by the casting rules (bf16/fp8 through their bits, bool as 0/1)."""
    if x.dtype == tl.bfloat16:
        r = _bf16_to_f32(x)
    elif x.dtype == tl.float8e5:
        r = _e5m2_to_f32(x)
    elif x.dtype == tl.float8e4nv:
        r = _e4m3fn_to_f32(x)
    elif x.dtype == tl.int1:
        r = tl.where(x, 1.0, 0.0).to(tl.float32)
    else:
        r = x.to(tl.float32)
    return r


@jit
def _float_to_int(f, DT: tl.constexpr):
    # nbxtensor's documented rule: truncate toward zero; NaN -> 0; beyond the range (inf included) saturate.
    BITS: tl.constexpr = DT.primitive_bitwidth
    SIGNED: tl.constexpr = DT.is_int_signed()
    if SIGNED:
        hi_edge = 2.0 ** (BITS - 1)
        lo_edge = -(2.0 ** (BITS - 1)) - 1.0
        vmax = tl.full(f.shape, (1 << (BITS - 1)) - 1, DT)
        vmin = tl.full(f.shape, -(1 << (BITS - 1)), DT)
    else:
        hi_edge = 2.0 ** BITS
        lo_edge = -1.0
        vmax = tl.full(f.shape, -1, tl.int64).to(DT)  # all ones
        vmin = tl.full(f.shape, 0, DT)
    hi = f >= hi_edge
    lo = f <= lo_edge
    mid = ~(hi | lo) & (f == f)
    safe = tl.where(mid, f, 0.0)
    if not SIGNED:
        safe = tl.where(safe < 0.0, 0.0, safe)
    v = safe.to(DT)
    v = tl.where(hi, vmax, tl.where(lo, vmin, v))
    return tl.where(f == f, v, tl.zeros_like(v))


@jit
def convert(x, DT: tl.constexpr):
    """Convert a block of any dtype of the table (bool, integers, float16, bfloat16, float32, float64, float8)
    to ``DT`` by :mod:`nbxtensor.dtypes.casting`'s rules (see the module docstring)."""
    ST: tl.constexpr = x.dtype
    if ST == DT:
        r = x
    elif DT == tl.int1:
        if ST.is_floating():
            if ST.primitive_bitwidth < 32 or ST == tl.bfloat16:
                r = _to_f32(x) != 0.0
            else:
                r = x != 0.0
        else:
            r = x != 0
    elif DT.is_int():
        if ST == tl.int1:
            r = tl.where(x, 1, 0).to(DT)
        elif ST.is_floating():
            if ST == tl.float64:
                r = _float_to_int(x, DT)
            else:
                r = _float_to_int(_to_f32(x), DT)
        else:
            r = x.to(DT)
    elif DT == tl.float64:
        if ST == tl.int1:
            r = tl.where(x, 1.0, 0.0).to(tl.float64)
        elif ST.is_int() or ST == tl.float32:
            r = x.to(tl.float64)
        else:
            r = _to_f32(x).to(tl.float64)
    elif DT == tl.float32:
        if ST == tl.float64 or ST.is_int():
            r = x.to(tl.float32)
        else:
            r = _to_f32(x)
    else:
        # float16, bfloat16, float8: through float32 (PyTorch's double rounding from float64 and integers)
        if ST.is_int() and ST != tl.int1:
            f = x.to(tl.float32)
        elif ST == tl.float64:
            f = x.to(tl.float32)
        else:
            f = _to_f32(x)
        if DT == tl.float16:
            r = f.to(tl.float16)
        elif DT == tl.bfloat16:
            r = _f32_to_bf16(f)
        elif DT == tl.float8e4nv:
            # e4m3fn: no infinity; out of range and +-inf saturate to +-448 (0x7E); NaN is 0x7F
            r = _f32_to_small(f, 3, 7, 0x7E, 0x7E, 0x7F).to(tl.uint8).to(tl.float8e4nv, bitcast=True)
        else:
            tl.static_assert(DT == tl.float8e5, "convert: unsupported destination dtype")
            # e5m2: overflow rounds to inf (0x7C), NaN is 0x7E
            r = _f32_to_small(f, 2, 15, 0x7B, 0x7C, 0x7E).to(tl.uint8).to(tl.float8e5, bitcast=True)
    return r


@jit
def asinh_poly(w):
    """P(w) with ``asinh(a) = a P(a**2)`` for ``|a| < 0.5`` (float32): degree 4, fitted for relative error
    (2.6e-8); shared by ops/elementwise.py's ``_asinh_f`` and ops/fast_math16.py's ``_asinh_m``."""
    p = w * 0.019909801497763637 - 0.04258130801927272
    p = p * w + 0.07482584332796222
    p = p * w - 0.1666614185210067
    return p * w + 0.9999999745133912


@jit
def atan_poly(w):
    """P(w) with ``atan(z) = z P(z**2)`` for ``z`` in [0, 1] (float32): degree 7, fitted for relative error (1e-7);
    shared by ops/elementwise.py's ``_atan_f`` and ops/fast_math16.py's atan2."""
    p = w * -0.004693898856552206 + 0.024254437387726202
    p = p * w - 0.05948898694470445
    p = p * w + 0.09914455573812883
    p = p * w - 0.14019532834743254
    p = p * w + 0.19969731692534737
    p = p * w - 0.33331991178212705
    p = p * w + 0.9999999010285172
    return p
