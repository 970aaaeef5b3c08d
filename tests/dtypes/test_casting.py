"""The cast rules of nbxtensor.dtypes.casting (no torch; tests/parity/test_casting_parity.py compares PyTorch)."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import DTYPES
from nbxtensor.dtypes import table as T
from nbxtensor.dtypes.casting import FLOAT8_E4M3FN_MAX, cast_array, checked_scalar

INTS = [d for d in DTYPES if d.kind in (T.KIND_INT, T.KIND_UINT)]


def f64(values):
    return np.array(values, dtype=np.float64)


def test_cast_returns_a_new_c_ordered_array_even_for_same_dtype():
    a = np.arange(6, dtype=np.float32).reshape(2, 3).T
    out = cast_array(a, nbx.float32, nbx.float32)
    assert out is not a and not np.shares_memory(out, a)
    np.testing.assert_array_equal(out, a)


@pytest.mark.parametrize("dst", INTS, ids=lambda d: d.name)
def test_float_to_int_rule_nan_zero_saturate_truncate(dst):
    info = np.iinfo(dst.numpy)
    vals = f64([np.nan, np.inf, -np.inf, 1e300, -1e300, 2.9, -2.9, -0.5, 0.5, float(info.max) + 2048.0,
                float(info.min) - 2048.0])
    got = cast_array(vals, nbx.float64, dst).tolist()
    want = [0, int(info.max), int(info.min), int(info.max), int(info.min), 2, -2 if info.min < 0 else 0, 0, 0,
            int(info.max), int(info.min)]
    assert got == want


def test_float_to_int_works_from_every_float_dtype_without_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for src in (nbx.float16, nbx.bfloat16, nbx.float32, nbx.float8_e4m3fn, nbx.float8_e5m2):
            a = cast_array(f64([np.nan, 1e30, -1e30, 3.7]), nbx.float64, src)
            assert cast_array(a, src, nbx.int8).tolist()[0] == 0
            assert cast_array(a, src, nbx.int8).tolist()[3] == 3


def test_float8_e4m3fn_saturates_and_e5m2_overflows_to_inf():
    vals = f64([500.0, 480.0, 449.0, np.inf, -np.inf, -1e9, np.nan, 448.0])
    e4 = cast_array(vals, nbx.float64, nbx.float8_e4m3fn).astype(np.float64)
    assert e4[:6].tolist() == [448.0, 448.0, 448.0, 448.0, -448.0, -448.0] and np.isnan(e4[6]) and e4[7] == 448.0
    assert FLOAT8_E4M3FN_MAX == float(ml_dtypes.finfo(ml_dtypes.float8_e4m3fn).max)
    e5 = cast_array(f64([61440.0, 57344.0, -1e9]), nbx.float64, nbx.float8_e5m2).astype(np.float64)
    assert e5.tolist() == [np.inf, 57344.0, -np.inf]


def test_narrow_floats_round_through_float32_like_pytorch():
    """A float64 just above a float16 tie rounds twice (first to float32, which lands on the tie)."""
    tie = 1.0 + 2.0 ** -11  # halfway between 1 and the next float16
    x = tie + 2.0 ** -40  # above the tie in float64, but rounds to the tie in float32
    direct = np.float16(x)
    via32 = cast_array(f64([x]), nbx.float64, nbx.float16)[0]
    assert direct == np.float16(1.0 + 2.0 ** -10) and via32 == np.float16(1.0)


def test_complex_to_real_keeps_real_part_and_to_bool_tests_both():
    z = np.array([1.5 + 2j, 0 + 1j, 0j], dtype=np.complex64)
    assert cast_array(z, nbx.complex64, nbx.float32).tolist() == [1.5, 0.0, 0.0]
    assert cast_array(z, nbx.complex64, nbx.int32).tolist() == [1, 0, 0]
    assert cast_array(z, nbx.complex64, nbx.bool).tolist() == [True, True, False]


def test_to_bool_is_nonzero_nan_included():
    assert cast_array(f64([0.0, -0.0, np.nan, 1e-300]), nbx.float64, nbx.bool).tolist() == [False, False, True, True]
    bf = cast_array(f64([0.0, 0.5]), nbx.float64, nbx.bfloat16)
    assert cast_array(bf, nbx.bfloat16, nbx.bool).tolist() == [False, True]


def test_integers_wrap_modulo_two_to_the_bits():
    a = np.array([300, -1, 2 ** 40 + 5, -129], dtype=np.int64)
    assert cast_array(a, nbx.int64, nbx.uint8).tolist() == [44, 255, 5, 127]
    assert cast_array(a, nbx.int64, nbx.int8).tolist() == [44, -1, 5, 127]


def test_every_pair_converts_without_warnings_and_keeps_shape():
    src_vals = f64([[0, 1, -1], [np.nan, np.inf, 1e10]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for s in DTYPES:
            a = cast_array(src_vals, nbx.float64, s)
            for d in DTYPES:
                out = cast_array(a, s, d)
                assert out.shape == (2, 3) and out.dtype == d.numpy


# -- checked_scalar: PyTorch's overflow check for fill_, full, x[i] = v and tensor() ------------------------------
@pytest.mark.parametrize("dst,value,want", [
    ("uint8", -1, 255), ("uint8", -255, 1), ("uint8", 255, 255), ("uint8", 1.9, 1), ("int8", -128, -128),
    ("int32", 2147483647.0, 2147483647), ("int64", -2 ** 63, -2 ** 63), ("uint64", 2 ** 64 - 1, 2 ** 64 - 1),
    ("uint64", -1, 2 ** 64 - 1), ("bool", 2, True), ("bool", float("nan"), True), ("bool", 0j, False),
    ("int16", 1 + 0j, 1), ("float16", 65504.0, 65504.0), ("float16", float("inf"), float("inf")),
    ("float8_e5m2", float("-inf"), float("-inf")), ("float8_e4m3fn", 448.0, 448.0), ("float32", True, 1.0)])
def test_checked_scalar_accepts(dst, value, want):
    got = checked_scalar(value, getattr(nbx, dst), "fill_")
    assert isinstance(got, np.generic) and got.dtype == getattr(nbx, dst).numpy
    assert got.item() == want if not isinstance(want, float) else float(got) == want


def test_checked_scalar_nan_into_floats():
    for d in (nbx.float16, nbx.bfloat16, nbx.float8_e4m3fn, nbx.float32):
        assert np.isnan(float(checked_scalar(float("nan"), d, "fill_")))
    c = checked_scalar(complex(1, float("nan")), nbx.complex64, "fill_")
    assert c.real == 1 and np.isnan(c.imag)


@pytest.mark.parametrize("dst,value", [
    ("uint8", 256), ("uint8", -256), ("uint8", -0.5), ("uint8", 255.5), ("uint8", -1.5), ("int8", 128),
    ("int32", 2 ** 31), ("int32", 2147483647.5), ("int32", float("nan")), ("int32", float("inf")),
    ("int64", 2 ** 63), ("int64", 2.0 ** 63), ("uint16", 2 ** 64 - 1), ("int32", 1 + 1j), ("float16", 65520.0),
    ("float16", 70000), ("bfloat16", 3.4e38), ("float32", 3.5e38), ("float8_e4m3fn", 449.0),
    ("float8_e4m3fn", float("inf")), ("float8_e5m2", 61440.0), ("complex64", 1e39), ("complex64", 1e39j),
    ("float32", 1 + 1j)])
def test_checked_scalar_refuses_overflow(dst, value):
    with pytest.raises(RuntimeError, match=f"fill_: value cannot be converted to type {dst} without overflow"):
        checked_scalar(value, getattr(nbx, dst), "fill_")


def test_checked_scalar_refuses_huge_ints_and_non_numbers():
    for v in (2 ** 64, -2 ** 63 - 1):
        with pytest.raises(OverflowError, match="int too big"):
            checked_scalar(v, nbx.float64, "fill_")
    for v in ("1", None, [1]):
        with pytest.raises(TypeError, match="expected a number"):
            checked_scalar(v, nbx.float32, "fill_")


def test_checked_scalar_numpy_scalars_are_numbers():
    assert checked_scalar(np.float32(1.5), nbx.float64, "f") == 1.5
    assert checked_scalar(np.int64(-1), nbx.uint8, "f") == 255
    with pytest.raises(RuntimeError):
        checked_scalar(np.int64(300), nbx.uint8, "f")


def test_checked_scalar_is_memoised_for_exact_values_only():
    from nbxtensor.dtypes.casting import _CHECKED, checked_scalar
    assert checked_scalar(3, T.uint8, "fill_") is checked_scalar(3, T.uint8, "fill_")
    assert (int, 3, T.uint8) in _CHECKED
    assert type(checked_scalar(True, T.uint8, "fill_")) is np.uint8 and checked_scalar(1.0, T.int8, "f") == 1
    assert np.signbit(checked_scalar(-0.0, T.float32, "fill_")) and not np.signbit(checked_scalar(0.0, T.float32, "f"))
    assert np.isnan(checked_scalar(float("nan"), T.float16, "fill_"))
    for _ in range(2):                          # an overflow is refused every time, never memoised
        with pytest.raises(RuntimeError, match="fill_: value cannot be converted to type uint8 without overflow"):
            checked_scalar(256, T.uint8, "fill_")
