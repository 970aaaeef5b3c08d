"""Type promotion (no torch here; tests/parity/test_promotion_parity.py checks every pair against PyTorch)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import DTYPES, category, default_complex_dtype, scalar_dtype
from nbxtensor.dtypes import table as T


class Op:
    """A tensor-like operand: result_type reads only ``dtype`` and ``ndim``."""

    def __init__(self, dtype, ndim=1):
        self.dtype, self.ndim = dtype, ndim


def promotable(a, b) -> bool:
    try:
        nbx.promote_types(a, b)
        return True
    except RuntimeError:
        return False


@pytest.fixture
def default_float64():
    nbx.set_default_dtype(nbx.float64)
    yield
    nbx.set_default_dtype(nbx.float32)


# Entries of PyTorch's promotion table (c10/core/ScalarType.cpp, `_promoteTypesLookup`), written out.
KNOWN = [
    ("uint8", "int8", "int16"), ("uint8", "int16", "int16"), ("uint8", "int64", "int64"), ("int8", "int32", "int32"),
    ("bool", "uint8", "uint8"), ("bool", "float16", "float16"), ("bool", "complex128", "complex128"),
    ("float16", "bfloat16", "float32"), ("bfloat16", "float64", "float64"), ("int64", "float16", "float16"),
    ("uint8", "bfloat16", "bfloat16"), ("float32", "complex64", "complex64"), ("float64", "complex64", "complex128"),
    ("bfloat16", "complex64", "complex64"), ("float16", "complex64", "complex64"), ("int64", "complex64", "complex64"),
    ("complex64", "complex128", "complex128"), ("uint16", "float32", "float32"), ("uint32", "float16", "float16"),
    ("uint64", "float64", "float64"), ("uint16", "uint16", "uint16"), ("float8_e4m3fn", "float8_e4m3fn",
                                                                      "float8_e4m3fn"),
]


@pytest.mark.parametrize("a,b,want", KNOWN)
def test_promote_types_known_entries(a, b, want):
    assert nbx.promote_types(a, b) is getattr(nbx, want)
    assert nbx.promote_types(b, a) is getattr(nbx, want)


@pytest.mark.parametrize("a,b", [("float8_e4m3fn", "float32"), ("float8_e5m2", "float8_e4m3fn"),
                                 ("float8_e5m2", "bool"), ("uint16", "int32"), ("uint32", "uint8"),
                                 ("uint64", "bool"), ("uint16", "uint32"), ("uint16", "complex64")])
def test_promote_types_without_promotion_raise_runtime_error(a, b):
    with pytest.raises(RuntimeError, match=f"{a}.*{b}|{b}.*{a}"):
        nbx.promote_types(a, b)


def test_promote_types_is_symmetric_idempotent_and_category_monotone():
    for a, b in itertools.product(DTYPES, DTYPES):
        assert nbx.promote_types(a, a) is a
        if not promotable(a, b):
            assert not promotable(b, a)
            continue
        r = nbx.promote_types(a, b)
        assert nbx.promote_types(b, a) is r
        assert category(r) == max(category(a), category(b))
        assert nbx.can_cast(a, r) and nbx.can_cast(b, r)


def test_promote_types_is_associative_where_defined():
    for a, b, c in itertools.product(DTYPES, repeat=3):
        try:
            left = nbx.promote_types(nbx.promote_types(a, b), c)
            right = nbx.promote_types(a, nbx.promote_types(b, c))
        except RuntimeError:
            continue
        assert left is right, (a, b, c)


def test_issue_examples():
    assert nbx.result_type(Op(nbx.float16), 65536) is nbx.float16  # [0.01]*65536 stays float16
    assert nbx.result_type(Op(nbx.uint8), 100) is nbx.uint8  # [200] + 100 is uint8 (44)
    assert nbx.result_type(Op(nbx.uint8), 1.5) is nbx.float32
    assert nbx.get_default_dtype() is nbx.float32
    assert nbx.result_type(3, 4) is nbx.int64


def test_priority_classes():
    # a dimensioned tensor outranks a 0-dim tensor of the same category
    assert nbx.result_type(Op(nbx.int8, 1), Op(nbx.int64, 0)) is nbx.int8
    assert nbx.result_type(Op(nbx.float16, 1), Op(nbx.float64, 0)) is nbx.float16
    # ... unless the lower class has a higher category
    assert nbx.result_type(Op(nbx.int8, 1), Op(nbx.float64, 0)) is nbx.float64
    assert nbx.result_type(Op(nbx.int8, 1), Op(nbx.complex128, 0)) is nbx.complex128
    # 0-dim tensors outrank Python scalars
    assert nbx.result_type(Op(nbx.int16, 0), 5) is nbx.int16
    assert nbx.result_type(Op(nbx.int16, 0), 5.0) is nbx.float32
    # complex scalars keep a floating tensor's value type
    assert nbx.result_type(Op(nbx.float64), 1j) is nbx.complex128
    assert nbx.result_type(Op(nbx.float32), 1j) is nbx.complex64
    assert nbx.result_type(Op(nbx.bfloat16), 1j) is nbx.complex64
    # bools: a bool tensor takes the scalar's category default
    assert nbx.result_type(Op(nbx.bool), 1) is nbx.int64
    assert nbx.result_type(Op(nbx.bool), True) is nbx.bool
    assert nbx.result_type(Op(nbx.uint8), True) is nbx.uint8
    # within one class dtypes promote pairwise
    assert nbx.result_type(Op(nbx.uint8), Op(nbx.int8)) is nbx.int16
    assert nbx.result_type(Op(nbx.uint8, 0), Op(nbx.int8, 0)) is nbx.int16


def test_python_scalars_follow_the_default_dtype(default_float64):
    assert nbx.result_type(Op(nbx.int32), 1.5) is nbx.float64
    assert nbx.result_type(Op(nbx.int32), 1j) is nbx.complex128
    assert default_complex_dtype() is nbx.complex128
    assert nbx.result_type(Op(nbx.float32), 1.5) is nbx.float32


def test_numpy_arrays_count_as_tensors():
    assert nbx.result_type(np.zeros(3, dtype=np.uint8), 300) is nbx.uint8
    assert nbx.result_type(np.array(1.0), np.zeros(2, dtype=np.int32)) is nbx.float64


def test_result_type_errors():
    with pytest.raises(TypeError, match="at least one operand"):
        nbx.result_type()
    with pytest.raises(TypeError, match="str"):
        nbx.result_type(Op(nbx.float32), "1")
    with pytest.raises(RuntimeError, match="float8"):
        nbx.result_type(Op(nbx.float8_e4m3fn), Op(nbx.float32))
    with pytest.raises(RuntimeError, match="complex32"):  # PyTorch: complex32, not in nbxtensor's table
        nbx.result_type(Op(nbx.float16), 1j)


def test_can_cast_rules():
    for a, b in itertools.product(DTYPES, DTYPES):
        want = not (a.is_complex and not b.is_complex) and \
            not (a.is_floating_point and b.kind in ("int", "uint", "bool")) and \
            not (a is not nbx.bool and b is nbx.bool)
        assert nbx.can_cast(a, b) == want, (a, b)


def test_default_dtype_setting():
    try:
        for d in (nbx.float16, nbx.bfloat16, nbx.float64, "float32"):
            nbx.set_default_dtype(d)
            assert nbx.get_default_dtype() is nbx.dtypes.dtype_from(d)
            assert default_complex_dtype() is (nbx.complex128 if d is nbx.float64 else nbx.complex64)
            assert scalar_dtype(0.5) is nbx.get_default_dtype()
        for bad in (nbx.int32, nbx.complex64, nbx.float8_e5m2, nbx.bool):
            with pytest.raises(TypeError, match="only float16, bfloat16, float32 and float64"):
                nbx.set_default_dtype(bad)
        with pytest.raises(TypeError):
            nbx.set_default_dtype("float128")
    finally:
        nbx.set_default_dtype(nbx.float32)


def test_scalar_dtype_and_category():
    assert scalar_dtype(True) is nbx.bool and scalar_dtype(3) is nbx.int64
    assert scalar_dtype(1.0) is nbx.float32 and scalar_dtype(1j) is nbx.complex64
    with pytest.raises(TypeError, match="scalar_dtype"):
        scalar_dtype(np.float32(1))
    assert [category(d) for d in (nbx.bool, nbx.uint8, nbx.int64, nbx.bfloat16, nbx.complex64)] == [0, 1, 1, 2, 3]
    assert T.KIND_UINT == nbx.uint16.kind
