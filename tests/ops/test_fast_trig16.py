"""``FAST_MATH16`` bodies of ops/fast_trig16.py (asin, acos, atan at levels 1 and 2).

Interpreter tier (and the GPU tier, NBX_TEST_DEVICE=cuda, with the real approximate instructions): all 65 536 bit
patterns of bfloat16 and of float16 against the float64 oracle by the tolerance table, NaN where it has NaN,
infinities equal, signed zeros as the default body, at most one 16-bit ulp from the correctly rounded value, with
the approximate instructions exact and pushed to both ends of their documented error (fast_math16's ``_ERR``); the
results that differ from the default (libdevice) body are counted and bounded. Also float32 inputs into 16-bit
outputs (``out=``), which take the same bodies. Compiled tier: sm_90 SASS per element with and without the key.
The checks are test_fast_math16's (:class:`test_fast_math16._Case`).
"""

from __future__ import annotations

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.dtypes.casting import cast_array
from nbxtensor.ops import fast_math16 as M16
from nbxtensor.ops import fast_trig16 as TR
from nbxtensor.ops import registry
from nbxtensor.runtime import configs
from nbxtensor.runtime.triton_compat import HAVE_TRITON, tl

import pointwise_harness as H
from test_fast_math16 import _Case, _run, _ulps

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")

CASES = [(op, 1) for op in TR.OPS] + [(op, 2) for op in TR.OPS2]
_IDS = [f"{op}-L{lvl}" for op, lvl in CASES]
# Most results that differ from the default body's, of 65 536 inputs: level 1 as test_fast_math16 (1 %); level 2
# (float32 within ~2**-15 relative) moves float16 results next to a rounding boundary more often (0.8 % at most).
_MAX_DIFF = {1: 0.01, 2: 0.02}


def _check(c: _Case, got, base, what, level):
    # test_fast_math16's verify bounds the differing results by its module's _MAX_DIFF: this level's bound instead
    import test_fast_math16 as TM
    old, TM._MAX_DIFF = TM._MAX_DIFF, _MAX_DIFF[level]
    try:
        return c.verify(got, base, what)
    finally:
        TM._MAX_DIFF = old


@pytest.mark.skipif(not H.INTERPRET, reason="runs the Triton bodies under the interpreter")
@pytest.mark.parametrize("dt", [T.bfloat16, T.float16], ids=lambda d: d.name)
@pytest.mark.parametrize("op,level", CASES, ids=_IDS)
def test_exhaustive_16bit(op, level, dt):
    c = _Case(op, dt)
    base = _run(op, c.x, 0)
    for err in ((0.0, 1.0, -1.0) if not H.QUICK else (1.0, -1.0)):
        got = _run(op, c.x, level, err)
        _check(c, got, base, f"{op} {dt.name} FAST_MATH16={level} (approximate instructions at {err:+g} x their "
               "bound)", level)


@pytest.mark.parametrize("dt", [T.bfloat16, T.float16], ids=lambda d: d.name)
@pytest.mark.parametrize("op,level", CASES, ids=_IDS)
def test_exhaustive_16bit_on_the_gpu(op, level, dt, device):
    """GPU tier: the real rcp.approx / sqrt.approx; the count printed is where FAST_MATH16 differs from libdevice."""
    if not device.startswith("cuda"):
        pytest.skip("the GPU tier (NBX_TEST_DEVICE=cuda)")
    c = _Case(op, dt)
    base = _run(op, c.x, 0, device=device)
    _check(c, _run(op, c.x, level, device=device), base, f"{op} {dt.name} FAST_MATH16={level} on {device}", level)


def _float32_inputs() -> np.ndarray:
    """float32 values that no 16-bit dtype holds: around +-1/2 and +-1 (the branch points of asin and acos), near
    0, large and tiny magnitudes, random ones, and the special values."""
    rng = np.random.default_rng(7)
    one = np.float32(1)
    near = [np.nextafter(np.float32(v), np.float32(d), dtype=np.float32) for v in (0.5, -0.5, 1.0, -1.0)
            for d in (-2, 2)]
    ups = np.float32(1) - np.float32(2.0) ** -np.arange(1, 25, dtype=np.float32)
    v = np.concatenate([near, ups, -ups, rng.uniform(-1, 1, 4000), rng.standard_normal(2000) * 1e3,
                        np.float32(2.0) ** np.arange(-149, 128, dtype=np.float32) * 1.2345678,
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38, 1e-45, one]]).astype(np.float32)
    return v


@pytest.mark.parametrize("dt", [T.bfloat16, T.float16], ids=lambda d: d.name)
@pytest.mark.parametrize("op,level", CASES, ids=_IDS)
def test_float32_inputs(op, level, dt, device):
    """float32 inputs into 16-bit outputs (``out=``) take the same bodies: within the tolerance, NaN where NumPy
    has NaN, at most one 16-bit ulp from the correctly rounded value."""
    if not (H.INTERPRET or device.startswith("cuda")):
        pytest.skip("runs the Triton bodies (the interpreter or the GPU tier)")
    x = _float32_inputs()
    f = getattr(nbx, op)
    for err in ((0.0,) if device.startswith("cuda") else (1.0, -1.0)):
        old = M16._ERR
        M16._ERR = tl.constexpr(err)
        try:
            with configs.override("pointwise", FAST_MATH16=level):
                o = nbx.empty(x.size, dtype=getattr(nbx, dt.name), device=device)
                got = H.result_host(f(nbx.from_numpy(x).to(device), out=o))
        finally:
            M16._ERR = old
        with np.errstate(all="ignore"):
            cr = cast_array(getattr(np, "arc" + op[1:] if op[0] == "a" else op)(x.astype(np.float64)), T.float64, dt)
        H.assert_close(got, cr, dt, what=f"{op} float32 -> {dt.name}")
        g = got.astype(np.float32)
        assert np.array_equal(np.isnan(g), np.isnan(cr.astype(np.float32)))
        fin = np.isfinite(g)
        u = _ulps(got[fin], cr[fin])
        assert (u <= 1).all(), (x[fin][u > 1][:5], got[fin][u > 1][:5], cr[fin][u > 1][:5])


def test_tables_replace_default_bodies():
    from nbxtensor.ops import elementwise as E
    for lvl, tab in ((1, TR.OPS), (2, TR.OPS2)):
        for op, (mod, name, body) in tab.items():
            default = getattr(E, name)
            assert mod == "elementwise" and registry.get(op).triton.body is default, op
            assert M16.math16_body(default, lvl) is body, (op, lvl)
    # level 2 falls back to level 1 for an op OPS2 lacks, and every OPS2 op has a level-1 body
    assert set(TR.OPS2) <= set(TR.OPS)


# ---------------------------------------------------------------------------------------------------------
# Compiled tier: sm_90 SASS instructions per element, bf16 in and out (ahead of time, no GPU)
# ---------------------------------------------------------------------------------------------------------
# (op, level) -> (allowed with FAST_MATH16, at least this many without). Measured 2026-11-30 (Triton 3.6, sm_90,
# the sm_90 table's large-tensor rule, bf16 in and out; relu takes 5), default -> level 1 / level 2: atan 23.62 (its
# ``fast`` body _atan_f, on by default for 16-bit outputs) -> 16.62 / 15.62, asin 23.25 (libdevice) -> 16.88 /
# 15.88, acos 23.12 (libdevice) -> 19.75 / 18.75.
# sin, cos, tan are not covered (fast_trig16's docstring): scratch bodies compiled the same way gave 16.25 for a
# Cody-Waite reduction by pi (3 FMAs) and one odd polynomial, exact only for |x| below ~1e5 (not every bfloat16 or
# float32 input), and 29.25 for the full-range shape frac(M G_E) (two-product, rint, a polynomial in turns) with
# the per-exponent table G_E stood in by two multiplies; libdevice's sin is 84.50 static.
_SASS = {
    ("atan", 1): (17, 23), ("atan", 2): (16, 23), ("asin", 1): (17, 23), ("asin", 2): (16, 23),
    ("acos", 1): (20, 23), ("acos", 2): (19, 23),
}


@pytest.mark.skipif(H.INTERPRET or not HAVE_TRITON, reason="compiles with Triton's real compiler")
@pytest.mark.parametrize("op,level", CASES, ids=_IDS)
def test_sm90_instruction_counts(op, level, monkeypatch):
    from test_pointwise import _bf16_launch, _compile_as_jit, _e, _sass_per_element
    budget, before = _SASS[(op, level)]
    f = getattr(nbx, op)
    with configs.override("pointwise", FAST_MATH16=0):
        kernel, kargs, meta = _bf16_launch(lambda: f(_e()), monkeypatch)
    base, _ = _sass_per_element(_compile_as_jit(kernel, kargs, meta), meta)
    with configs.override("pointwise", FAST_MATH16=level):
        kernel, kargs, meta = _bf16_launch(lambda: f(_e()), monkeypatch)
    c = _compile_as_jit(kernel, kargs, meta)
    per, ops = _sass_per_element(c, meta)
    print(f"\n{op} level {level}: {base:.2f} -> {per:.2f} SASS instructions per element")
    assert "LDG.E.128" in ops and "STG.E.128" in ops, ops
    assert per <= budget and base >= before, f"{op}: {per:.2f} with FAST_MATH16 (budget {budget}), {base:.2f} without"
    assert "approx" in c.asm["ptx"], op
