"""Parity of type promotion with PyTorch: ``result_type`` over every pair of dtypes x {dimensioned tensor, 0-dim
tensor, Python bool/int/float/complex}, under the default dtypes float32 and float64; ``promote_types`` and
``can_cast`` over every pair of the table.

nbxtensor has no complex32: where PyTorch's result is complex32 (float16 with a complex scalar or 0-dim tensor),
nbxtensor raises RuntimeError (stated difference).
"""

from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")

import nbxtensor as nbx  # noqa: E402
from nbxtensor.dtypes import DTYPES  # noqa: E402

pytestmark = pytest.mark.parity

KINDS = ["dim", "zero"]
SCALARS = [True, False, 1, -3, 2 ** 40, 1.5, float("inf"), 1j, complex(0, 0)]


class _Operand:
    """An nbxtensor operand without allocating: anything with ``dtype`` and ``ndim`` is a tensor to result_type."""

    def __init__(self, dtype, ndim):
        self.dtype, self.ndim = dtype, ndim


def operands(d, kind):
    t = torch.zeros((2,) if kind == "dim" else (), dtype=getattr(torch, d.name))
    x = nbx.zeros((2,) if kind == "dim" else (), dtype=d)
    return t, x


def outcome(fn):
    try:
        return str(fn()).split(".")[-1], None
    except Exception as e:  # noqa: BLE001 - the type is compared
        return None, type(e)


def compare(ft, fx, where):
    (rt, et), (rx, ex) = outcome(ft), outcome(fx)
    if rt == "complex32":
        assert ex is RuntimeError, f"{where}: torch gives complex32, nbx should raise RuntimeError, got {rx} {ex}"
        return
    assert (rx, ex) == (rt, et), f"{where}: torch {rt or et}, nbx {rx or ex}"


@pytest.fixture(params=["float32", "float64"])
def default_dtype(request):
    torch.set_default_dtype(getattr(torch, request.param))
    nbx.set_default_dtype(getattr(nbx, request.param))
    yield request.param
    torch.set_default_dtype(torch.float32)
    nbx.set_default_dtype(nbx.float32)


@pytest.mark.parametrize("a", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("ka", KINDS)
def test_result_type_tensor_pairs_match_torch(a, ka, default_dtype):
    ta, xa = operands(a, ka)
    for b, kb in itertools.product(DTYPES, KINDS):
        tb, xb = operands(b, kb)
        compare(lambda: torch.result_type(ta, tb), lambda: nbx.result_type(xa, xb), f"{a.name}/{ka} {b.name}/{kb}")


@pytest.mark.parametrize("a", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("ka", KINDS)
def test_result_type_with_python_scalars_matches_torch(a, ka, default_dtype):
    ta, xa = operands(a, ka)
    for s in SCALARS:
        compare(lambda: torch.result_type(ta, s), lambda: nbx.result_type(xa, s), f"{a.name}/{ka} {s!r}")
        compare(lambda: torch.result_type(s, ta), lambda: nbx.result_type(s, xa), f"{s!r} {a.name}/{ka}")


def test_result_type_of_two_scalars_matches_torch(default_dtype):
    for s1, s2 in itertools.product(SCALARS, SCALARS):
        compare(lambda: torch.result_type(s1, s2), lambda: nbx.result_type(s1, s2), f"{s1!r} {s2!r}")


def test_result_type_accepts_tensor_like_operands():
    """Anything with ``dtype`` and ``ndim`` counts as a tensor (NumPy arrays, our operand stand-in)."""
    import numpy as np
    assert nbx.result_type(np.zeros(2, dtype=np.uint8), 100) is nbx.uint8
    assert nbx.result_type(_Operand(nbx.float16, 1), 1.5) is nbx.float16
    assert nbx.result_type(_Operand(nbx.int32, 0), _Operand(nbx.uint8, 1)) is nbx.uint8


@pytest.mark.parametrize("a", DTYPES, ids=lambda d: d.name)
def test_promote_types_and_can_cast_match_torch(a):
    for b in DTYPES:
        ta, tb = getattr(torch, a.name), getattr(torch, b.name)
        compare(lambda: torch.promote_types(ta, tb), lambda: nbx.promote_types(a, b), f"promote {a.name} {b.name}")
        assert nbx.can_cast(a, b) == torch.can_cast(ta, tb), f"can_cast {a.name} -> {b.name}"


def test_issue_examples_hold_like_torch():
    """The examples the issue names, checked against both libraries (values come from the cast rules)."""
    t = torch.tensor([0.01] * 65536, dtype=torch.float16)
    x = nbx.tensor([0.01] * 65536, dtype=nbx.float16)
    assert nbx.result_type(x, 65536) is nbx.float16
    assert torch.result_type(t, 65536) == torch.float16
    assert str(torch.result_type(torch.tensor([200], dtype=torch.uint8), 100)) == "torch.uint8"
    assert nbx.result_type(nbx.tensor([200], dtype=nbx.uint8), 100) is nbx.uint8
    assert nbx.result_type(nbx.tensor([1], dtype=nbx.uint8), 1.5) is nbx.float32
    assert str(torch.result_type(torch.tensor([1], dtype=torch.uint8), 1.5)) == "torch.float32"
