"""The dtype table: every row's data, the round trips through every spelling and code, and the refusals."""

from __future__ import annotations

import pickle

import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import DTYPES, dtype_from, from_dlpack_code, from_numpy_dtype, from_safetensors
from nbxtensor.dtypes import table as T

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "float16", "bfloat16",
         "float32", "float64", "float8_e4m3fn", "float8_e5m2", "complex64", "complex128"]

# Expected rows, written out independently of the table (sources: PyTorch dtype docs, safetensors Dtype enum,
# dlpack.h v1.1 DLDataTypeCode, triton.language type strings).
EXPECTED = {
    "bool": (1, "bool", np.bool_, "i1", "BOOL", (6, 8)),
    "uint8": (1, "uint", np.uint8, "u8", "U8", (1, 8)),
    "int8": (1, "int", np.int8, "i8", "I8", (0, 8)),
    "int16": (2, "int", np.int16, "i16", "I16", (0, 16)),
    "int32": (4, "int", np.int32, "i32", "I32", (0, 32)),
    "int64": (8, "int", np.int64, "i64", "I64", (0, 64)),
    "uint16": (2, "uint", np.uint16, "u16", "U16", (1, 16)),
    "uint32": (4, "uint", np.uint32, "u32", "U32", (1, 32)),
    "uint64": (8, "uint", np.uint64, "u64", "U64", (1, 64)),
    "float16": (2, "float", np.float16, "fp16", "F16", (2, 16)),
    "bfloat16": (2, "float", ml_dtypes.bfloat16, "bf16", "BF16", (4, 16)),
    "float32": (4, "float", np.float32, "fp32", "F32", (2, 32)),
    "float64": (8, "float", np.float64, "fp64", "F64", (2, 64)),
    "float8_e4m3fn": (1, "float", ml_dtypes.float8_e4m3fn, "fp8e4nv", "F8_E4M3", (10, 8)),
    "float8_e5m2": (1, "float", ml_dtypes.float8_e5m2, "fp8e5", "F8_E5M2", (12, 8)),
    "complex64": (8, "complex", np.complex64, None, "C64", (5, 64)),
    "complex128": (16, "complex", np.complex128, None, None, (5, 128)),
}
ALIASES = {"half": "float16", "float": "float32", "double": "float64", "short": "int16", "int": "int32",
           "long": "int64", "cfloat": "complex64", "cdouble": "complex128"}


def test_table_has_exactly_the_issue_dtypes_in_order():
    assert [d.name for d in DTYPES] == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_row_data(name):
    d = dtype_from(name)
    itemsize, kind, npt, triton, st, dl = EXPECTED[name]
    assert (d.name, d.itemsize, d.kind, d.numpy, d.triton, d.safetensors, d.dlpack) == \
        (name, itemsize, kind, np.dtype(npt), triton, st, dl)
    assert d.numpy.itemsize == d.itemsize and d.bits == 8 * itemsize
    assert d.torch_name == "torch." + name
    assert d.is_floating_point == (kind == "float") and d.is_complex == (kind == "complex")
    assert d.is_signed == (kind in ("int", "float", "complex"))


@pytest.mark.parametrize("name", NAMES)
def test_round_trips_through_every_spelling(name):
    d = dtype_from(name)
    assert getattr(nbx, "bool" if name == "bool" else name) is d
    for spelling in (name, "torch." + name, "nbx." + name, "nbxtensor." + name, repr(d), str(d), d, d.numpy,
                     d.numpy.type):
        assert dtype_from(spelling) is d, spelling
    assert from_numpy_dtype(d.numpy) is d
    assert from_dlpack_code(*d.dlpack) is d
    if d.safetensors:
        assert from_safetensors(d.safetensors) is d
    assert pickle.loads(pickle.dumps(d)) is d
    assert hash(d) == hash(dtype_from(name)) and d == dtype_from(name)


@pytest.mark.parametrize("alias,name", sorted(ALIASES.items()))
def test_pytorch_aliases(alias, name):
    assert dtype_from(alias) is dtype_from(name)
    assert getattr(nbx, alias) is dtype_from(name)
    assert alias in dtype_from(name).aliases


def test_python_types_map_as_numpy_does():
    assert dtype_from(bool) is nbx.bool and dtype_from(int) is nbx.int64
    assert dtype_from(float) is nbx.float64 and dtype_from(complex) is nbx.complex128


def test_torch_dtype_objects_resolve_by_spelling_without_importing_torch():
    class FakeTorchDtype:  # what str(torch.float16) gives, without torch
        def __str__(self):
            return "torch.float16"
    assert dtype_from(FakeTorchDtype()) is nbx.float16


def test_dtype_prints_under_the_import_alias_and_satisfies_triton():
    """Stated difference from PyTorch: ``nbx.float16``, not ``torch.float16``; Triton reads the name's tail."""
    for d in DTYPES:
        assert repr(d) == str(d) == "nbx." + d.name
        assert str(d).endswith(d.name)


@pytest.mark.parametrize("bad", ["float128", "fp16", "torch.float128", "", "Float32", "int4"])
def test_unknown_name_is_an_error_naming_it(bad):
    with pytest.raises(TypeError, match=repr(bad).replace("(", r"\(").replace(".", r"\.")):
        dtype_from(bad)


@pytest.mark.parametrize("bad", [np.float128 if hasattr(np, "float128") else np.dtype("U3"), np.dtype("U3"),
                                 np.dtype([("a", np.int8)]), np.dtype(">i4"), object])
def test_unsupported_numpy_dtypes_are_refused(bad):
    with pytest.raises(TypeError, match="no nbxtensor dtype|expected a dtype"):
        dtype_from(bad)


@pytest.mark.parametrize("bad", [3, 1.5, None, [1]])
def test_non_dtype_objects_are_refused(bad):
    with pytest.raises(TypeError, match="dtype"):
        dtype_from(bad, arg="dtype")


def test_unknown_codes_are_errors_naming_them():
    with pytest.raises(ValueError, match="F4"):
        from_safetensors("F4")
    with pytest.raises(ValueError, match="C128"):
        from_safetensors("C128")  # safetensors has no complex128 code
    with pytest.raises(BufferError, match="code=2, bits=128"):
        from_dlpack_code(2, 128)
    with pytest.raises(BufferError, match="lanes"):
        from_dlpack_code(2, 32, lanes=4)


def test_complex_real_pairs():
    assert nbx.complex64.to_real() is nbx.float32 and nbx.complex128.to_real() is nbx.float64
    assert nbx.float32.to_complex() is nbx.complex64 and nbx.float64.to_complex() is nbx.complex128
    assert nbx.bfloat16.to_complex() is nbx.complex64  # c10::toComplexType: bfloat16 has float32's range
    assert nbx.float32.to_real() is nbx.float32 and nbx.complex64.to_complex() is nbx.complex64
    with pytest.raises(RuntimeError, match="complex32"):
        nbx.float16.to_complex()  # PyTorch has complex32; nbxtensor does not (stated difference)
    for d in (nbx.float8_e4m3fn, nbx.int32, nbx.bool):
        with pytest.raises(RuntimeError, match="Unknown Complex ScalarType"):
            d.to_complex()


def test_rows_are_unique_and_immutable():
    assert len({id(d) for d in DTYPES}) == len(DTYPES)
    assert len({d.name for d in DTYPES}) == len(DTYPES)
    with pytest.raises(Exception):
        nbx.float32.itemsize = 8  # type: ignore[misc]
    assert T.DTYPES is DTYPES
