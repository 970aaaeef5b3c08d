"""Parity of dtype conversion with PyTorch: ``cast_array`` and ``Tensor.to`` against ``torch.Tensor.to`` for every
pair of the dtype table on edge values (signed zeros, ties, subnormals, the limits of every format, inf, NaN).

Float -> integer conversions of NaN, +-inf and values outside the target's range are undefined in PyTorch (C++
UB; x86 gives INT_MIN or wrapped bits, and float -> uint8 goes through int64). Those values follow nbxtensor's
documented rule instead (NaN -> 0, saturation to the target's min or max; see nbxtensor.dtypes.casting), and are
tested against that rule here, not against PyTorch.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nbxtensor as nbx  # noqa: E402
from nbxtensor.dtypes import DTYPES  # noqa: E402
from nbxtensor.dtypes import table as T  # noqa: E402
from nbxtensor.dtypes.casting import cast_array  # noqa: E402

pytestmark = pytest.mark.parity

FLOAT_EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5, 0.1, 1 / 3, 127.0, 127.5, 128.0, 255.0, 255.5, 256.0,
               -128.0, -128.5, -129.0, 32767.0, 32768.0, 65504.0, 65519.99, 65520.0, 448.0, 464.0, 480.0, 57344.0,
               61440.0, 1.00048828125, 1.0009765625, 6e-8, 1e-8, 1e-40, 1e-310, 3.0e38, 3.4028235e38, 1e300, -1e300,
               2.0 ** 31 - 1, 2.0 ** 31, 2.0 ** 32, 2.0 ** 53 + 2, 2.0 ** 63, 2.0 ** 64, 1e20, float("nan"),
               float("inf"), -float("inf")]
INT_EDGES = [0, 1, -1, 127, 128, 255, 256, -128, -129, 32767, 32768, 65535, 65536, -32769, 2 ** 24 + 1, 2 ** 31 - 1,
             2 ** 31, -2 ** 31, 2 ** 32 - 1, 2 ** 53 + 1, 2 ** 63 - 1, -2 ** 63, 2 ** 64 - 1]


def source_values(d) -> np.ndarray:
    """Edge values representable in ``d`` (rounded into it for the narrow float types)."""
    if d is T.bool_:
        return np.array([False, True, True], dtype=np.bool_)
    if d.kind in (T.KIND_INT, T.KIND_UINT):
        info = np.iinfo(d.numpy)
        return np.array([v for v in INT_EDGES if info.min <= v <= info.max], dtype=d.numpy)
    f = np.array(FLOAT_EDGES, dtype=np.float64)
    if d.kind == T.KIND_COMPLEX:
        out = np.empty(f.shape, dtype=np.complex128)
        out.real, out.imag = f, f[::-1]
        with np.errstate(over="ignore"):
            return out.astype(d.numpy)
    return cast_array(f, T.float64, d)


def to_torch(a: np.ndarray, d):
    if d.name in ("bfloat16", "float16"):
        return torch.from_numpy(a.view(np.int16).copy()).view(getattr(torch, d.name))
    if d.name.startswith("float8"):
        return torch.from_numpy(a.view(np.uint8).copy()).view(getattr(torch, d.name))
    return torch.from_numpy(a.copy())


def torch_values(t, d) -> np.ndarray:
    if d.name in ("bfloat16", "float16"):
        return t.view(torch.int16).numpy().view(d.numpy)
    if d.name.startswith("float8"):
        return t.view(torch.uint8).numpy().view(d.numpy)
    return t.numpy()


def undefined_in_torch(src: np.ndarray, s, d) -> np.ndarray:
    """Float (or complex: real part) -> integer elements that PyTorch leaves undefined: NaN, inf, out of range."""
    if s.kind not in (T.KIND_FLOAT, T.KIND_COMPLEX) or d.kind not in (T.KIND_INT, T.KIND_UINT):
        return np.zeros(src.shape, dtype=bool)
    x = cast_array(src, s, T.complex128 if s.kind == T.KIND_COMPLEX else T.float64)
    x = x.real if s.kind == T.KIND_COMPLEX else x
    info = np.iinfo(d.numpy)
    with np.errstate(invalid="ignore"):
        return ~(np.isfinite(x) & (x > float(info.min) - 1) & (x < float(info.max) + 1))


def same_values(a: np.ndarray, b: np.ndarray, d) -> np.ndarray:
    """Elementwise equality with NaN == NaN (any payload) and signed zeros distinguished."""
    if d.kind in (T.KIND_FLOAT, T.KIND_COMPLEX):
        fa = cast_array(a, d, T.complex128 if d.kind == T.KIND_COMPLEX else T.float64)
        fb = cast_array(b, d, T.complex128 if d.kind == T.KIND_COMPLEX else T.float64)
        parts = [(fa.real, fb.real), (fa.imag, fb.imag)] if d.kind == T.KIND_COMPLEX else [(fa, fb)]
        ok = np.ones(a.shape, dtype=bool)
        for x, y in parts:
            ok &= ((x == y) & (np.signbit(x) == np.signbit(y))) | (np.isnan(x) & np.isnan(y))
        return ok
    return a == b


@pytest.mark.parametrize("src", DTYPES, ids=lambda d: d.name)
def test_cast_matches_torch_on_defined_values(src):
    a = source_values(src)
    ta = to_torch(a, src)
    for dst in DTYPES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # complex -> real warns in PyTorch
            expect = torch_values(ta.to(getattr(torch, dst.name)), dst)
        got = cast_array(a, src, dst)
        via_tensor = nbx.tensor(a, dtype=src).to(dst).numpy()
        defined = ~undefined_in_torch(a, src, dst)
        bad = defined & ~same_values(got, expect, dst)
        assert not bad.any(), f"{src.name} -> {dst.name}: {a[bad][:4]} gave {got[bad][:4]}, torch {expect[bad][:4]}"
        assert same_values(via_tensor, got, dst).all(), f"Tensor.to differs from cast_array for {src.name}->{dst.name}"


@pytest.mark.parametrize("dst", [d for d in DTYPES if d.kind in (T.KIND_INT, T.KIND_UINT)], ids=lambda d: d.name)
def test_float_to_int_undefined_values_follow_nbxtensor_rule(dst):
    """NaN -> 0; beyond the range (inf included) -> the target's min or max; in range: truncation toward zero."""
    info = np.iinfo(dst.numpy)
    for src in [d for d in DTYPES if d.kind in (T.KIND_FLOAT, T.KIND_COMPLEX)]:
        a = source_values(src)
        x = cast_array(a, src, T.complex128 if src.kind == T.KIND_COMPLEX else T.float64)
        x = x.real if src.kind == T.KIND_COMPLEX else x
        got = cast_array(a, src, dst).astype(object)
        for xv, g in zip(x.tolist(), got.tolist()):
            if xv != xv:
                want = 0
            elif xv >= float(info.max) + 1:
                want = int(info.max)
            elif xv <= float(info.min) - 1:
                want = int(info.min)
            else:
                want = int(xv)  # truncation toward zero
            assert g == want, f"{src.name} {xv!r} -> {dst.name}: got {g}, rule says {want}"


def test_float_to_uint8_negative_differs_from_torch_as_documented():
    """PyTorch converts float -> uint8 through int64 (-1.0 -> 255); nbxtensor saturates (-1.0 -> 0)."""
    a = np.array([-1.0, -200.0, 300.0], dtype=np.float32)
    assert torch.from_numpy(a).to(torch.uint8).tolist() == [255, 56, 44]
    assert cast_array(a, nbx.float32, nbx.uint8).tolist() == [0, 0, 255]
