"""Parity of ``repr`` with PyTorch's default printing: every dtype, empty and 0-dim tensors, integer-valued floats,
large and small magnitudes (fixed vs scientific mode), NaN/inf, signed zeros, complex values, 2-D to 4-D, and the
summarised form above 1000 elements.

Compared after replacing ``torch.`` with ``nbx.`` (dtypes print as ``nbx.float16``, a stated difference) and
normalising the line wrapping before the ``dtype=`` suffix (``nbx.`` is two characters shorter than ``torch.``,
so the suffix can fit on a line where PyTorch's wraps).
"""

from __future__ import annotations

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nbxtensor as nbx  # noqa: E402
from nbxtensor.dtypes import DTYPES  # noqa: E402
from nbxtensor.dtypes import table as T  # noqa: E402
from nbxtensor.dtypes.casting import cast_array  # noqa: E402

pytestmark = pytest.mark.parity


def normalise(s: str) -> str:
    s = s.replace("torch.", "nbx.")
    return re.sub(r",\s*\n\s*dtype=", ", dtype=", s)


def pair(values: np.ndarray, d):
    """The same values as a torch tensor and an nbx tensor of dtype ``d`` (values rounded into ``d`` first)."""
    a = cast_array(np.asarray(values, dtype=np.complex128 if d.kind == T.KIND_COMPLEX else np.float64),
                   T.complex128 if d.kind == T.KIND_COMPLEX else T.float64, d) \
        if d.kind in (T.KIND_FLOAT, T.KIND_COMPLEX) else np.asarray(values).astype(d.numpy)
    if d.name in ("bfloat16", "float16"):
        t = torch.from_numpy(a.view(np.int16).copy()).view(getattr(torch, d.name))
    elif d.name.startswith("float8"):
        t = torch.from_numpy(a.view(np.uint8).copy()).view(getattr(torch, d.name))
    else:
        t = torch.from_numpy(a.copy())
    return t, nbx.tensor(a, dtype=d)


FLOAT_CASES = {
    "small": [0.5, -1.25, 3.0],
    "ints": [1.0, 2.0, -3.0, 0.0],
    "int_big_ratio": [1.0, 5000.0],
    "int_huge": [1e9, 2.0],
    "tiny": [1e-5, 0.5],
    "big_ratio": [0.001, 2.5, 4000.0],
    "huge": [1.5e10, -2.25],
    "nonfinite": [float("nan"), float("inf"), -float("inf"), 1.5],
    "only_nonfinite": [float("nan"), float("inf")],
    "zeros": [0.0, -0.0, 0.0],
    "mixed_int_nan": [1.0, float("nan"), -7.0],
    "wide": [123456.789, -0.25, 1.0],
    "single": [42.0],
    "many": list(np.linspace(-3, 3, 37)),
}
INT_CASES = {"small": [1, -2, 3], "wide": [0, 100, -12345], "single": [7], "many": list(range(-20, 20))}


@pytest.mark.parametrize("d", DTYPES, ids=lambda d: d.name)
def test_repr_1d_matches_torch(d):
    cases = INT_CASES if d.kind in (T.KIND_INT, T.KIND_UINT, T.KIND_BOOL) else FLOAT_CASES
    for label, vals in cases.items():
        if d.kind == T.KIND_UINT:
            vals = [abs(v) for v in vals]
        if d is T.bool_:
            vals = [v % 2 for v in vals]
        if d.kind == T.KIND_INT and d.itemsize == 1:
            vals = [max(min(v, 127), -128) for v in vals]
        if d.kind == T.KIND_UINT and d.itemsize == 1:
            vals = [min(v, 255) for v in vals]
        if d.kind == T.KIND_COMPLEX:
            vals = [complex(v, -v / 2 if i % 2 else v) for i, v in enumerate(vals)]
        t, x = pair(vals, d)
        assert normalise(repr(x)) == normalise(repr(t)), f"{d.name} {label}:\n{repr(x)}\n{repr(t)}"


@pytest.mark.parametrize("d", DTYPES, ids=lambda d: d.name)
def test_repr_shapes_matches_torch(d):
    float_like = d.kind in (T.KIND_FLOAT, T.KIND_COMPLEX)
    for shape in [(), (0,), (2, 0), (0, 3, 1), (1,), (2, 3), (3, 1, 2), (2, 2, 2, 2), (1, 1)]:
        n = int(np.prod(shape))
        vals = (np.arange(n) * (0.75 if float_like else 1) - (1 if d.kind != T.KIND_UINT else 0)).reshape(shape)
        if d is T.bool_:
            vals = vals.astype(np.int64) % 2
        t, x = pair(vals, d)
        assert normalise(repr(x)) == normalise(repr(t)), f"{d.name} {shape}:\n{repr(x)}\n{repr(t)}"


@pytest.mark.parametrize("d", [T.float32, T.float64, T.float16, T.bfloat16, T.int64, T.int32, T.uint8, T.bool_,
                               T.complex64, T.float8_e4m3fn], ids=lambda d: d.name)
def test_repr_summarised_matches_torch(d):
    rng = np.random.default_rng(0)
    for shape in [(1001,), (2000,), (40, 30), (3, 400), (12, 10, 10), (1, 1500)]:
        n = int(np.prod(shape))
        if d.kind in (T.KIND_FLOAT, T.KIND_COMPLEX):
            vals = rng.standard_normal(n) * 3
            if d.kind == T.KIND_COMPLEX:
                vals = vals + 1j * rng.standard_normal(n)
        elif d is T.bool_:
            vals = rng.integers(0, 2, n)
        else:
            vals = rng.integers(0, 100, n)
        t, x = pair(vals.reshape(shape), d)
        assert normalise(repr(x)) == normalise(repr(t)), f"{d.name} {shape}:\n{repr(x)}\n{repr(t)}"


def test_repr_of_views_and_scalars_matches_torch():
    t, x = pair(np.arange(24, dtype=np.float64).reshape(2, 3, 4) / 7, T.float32)
    for fn in [lambda a: a.transpose(0, 2), lambda a: a[:, 1], lambda a: a[..., ::2], lambda a: a[1, 2, 3],
               lambda a: a.expand(2, 2, 3, 4), lambda a: a[:, :0]]:
        assert normalise(repr(fn(x))) == normalise(repr(fn(t)))
    for v in [3.5, -0.0, float("nan"), 1e-8, 12345678.0]:
        t, x = pair(np.array(v), T.float32)
        assert normalise(repr(x)) == normalise(repr(t))
        assert str(x) == repr(x)


def test_repr_under_float64_default_matches_torch():
    try:
        torch.set_default_dtype(torch.float64)
        nbx.set_default_dtype(nbx.float64)
        for d in (T.float32, T.float64, T.complex64, T.complex128):
            t, x = pair(np.array([1.5, 2.0]), d)
            assert normalise(repr(x)) == normalise(repr(t))
        t, x = torch.empty(0), nbx.empty(0)
        assert normalise(repr(x)) == normalise(repr(t))
    finally:
        torch.set_default_dtype(torch.float32)
        nbx.set_default_dtype(nbx.float32)


def test_dtype_and_size_reprs():
    """Stated difference: dtypes print as nbx.<name>; sizes as nbx.Size."""
    for d in DTYPES:
        assert repr(d) == str(getattr(torch, d.name)).replace("torch.", "nbx.")
    assert repr(nbx.zeros(2, 3).shape) == repr(torch.zeros(2, 3).shape).replace("torch.", "nbx.")


def test_repr_random_values_match_torch():
    """Random magnitudes, signs, special values and shapes (seeded)."""
    rng = np.random.default_rng(1234)
    dtypes = [T.float32, T.float64, T.float16, T.bfloat16, T.complex64, T.int32, T.int8, T.float8_e5m2]
    for k in range(150):
        d = dtypes[k % len(dtypes)]
        shape = tuple(int(s) for s in rng.integers(1, 5, rng.integers(1, 4)))
        n = int(np.prod(shape))
        if d.kind in (T.KIND_INT, T.KIND_UINT):
            vals = rng.integers(-100, 100, n) * int(10 ** rng.integers(0, 2))
        else:
            vals = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 9, n)
            vals[rng.random(n) < 0.1] = rng.choice([0.0, float("nan"), float("inf"), -float("inf")])
            if rng.random() < 0.3:
                vals = np.round(vals)
            if d.kind == T.KIND_COMPLEX:
                vals = vals + 1j * rng.standard_normal(n) * 10.0 ** rng.integers(-3, 3)
        t, x = pair(vals.reshape(shape), d)
        assert normalise(repr(x)) == normalise(repr(t)), f"{d.name} {shape}:\n{repr(x)}\n{repr(t)}"
