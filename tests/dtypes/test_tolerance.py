"""The one tolerance table (PyTorch's ``assert_close`` defaults) and its declared widening rule."""

from __future__ import annotations

import math

import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import DTYPES, Tolerance, tolerance

# torch.testing.assert_close defaults (https://pytorch.org/docs/stable/testing.html), written out.
ASSERT_CLOSE = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5),
                "float64": (1e-7, 1e-7), "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7)}


@pytest.mark.parametrize("name", sorted(ASSERT_CLOSE))
def test_defaults_are_pytorchs(name):
    assert tolerance(name) == Tolerance(*ASSERT_CLOSE[name])
    assert tolerance(getattr(nbx, name)) == tolerance(name)


def test_float8_rows_allow_one_rounding():
    assert tolerance(nbx.float8_e4m3fn).rtol == 2.0 ** -4  # half an ulp relative, 3 mantissa bits
    assert tolerance(nbx.float8_e5m2).rtol == 2.0 ** -3  # 2 mantissa bits


def test_exact_dtypes_compare_exactly():
    for d in DTYPES:
        if d.kind in ("bool", "int", "uint"):
            assert tolerance(d) == Tolerance(0.0, 0.0)
            assert tolerance(d, reduced=4096) == Tolerance(0.0, 0.0)


@pytest.mark.parametrize("k", [1, 2, 64, 4096, 10 ** 6])
def test_widening_rule_grows_like_sqrt_of_the_reduced_length(k):
    base = tolerance(nbx.float16)
    got = tolerance(nbx.float16, reduced=k)
    assert math.isclose(got.rtol, base.rtol * math.sqrt(k)) and math.isclose(got.atol, base.atol * math.sqrt(k))


def test_reduced_below_two_is_the_table_row():
    assert tolerance(nbx.float32, reduced=0) == tolerance(nbx.float32)


def test_unknown_dtype_is_an_error():
    with pytest.raises(TypeError):
        tolerance("float128")
