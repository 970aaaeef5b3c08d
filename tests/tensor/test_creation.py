"""Factories without torch: dtype inference, values, memory sharing, errors. (tests/parity/test_creation_parity.py
compares the same against PyTorch.)"""

from __future__ import annotations

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.tensor.ranges import _fma


# -- tensor() ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("data,dtype,shape", [
    (True, nbx.bool, ()), (3, nbx.int64, ()), (2.5, nbx.float32, ()), (1j, nbx.complex64, ()),
    ([1, 2], nbx.int64, (2,)), ([1, 2.0], nbx.float32, (2,)), ([True, 1], nbx.int64, (2,)),
    ([[1], [1j]], nbx.complex64, (2, 1)), ([], nbx.float32, (0,)), ([[], []], nbx.float32, (2, 0)),
    ((1, 2), nbx.int64, (2,)), (range(4), nbx.int64, (4,)), ([np.float16(1), 1], nbx.float16, (2,)),
    ([np.int32(1), True], nbx.int32, (2,)), ([np.uint8(200), 1], nbx.int64, (2,)),
    (np.float64(1.0), nbx.float64, ()), ([nbx.tensor(1.5, dtype=nbx.float64), 2], nbx.float64, (2,)),
    ([np.array([1, 2]), np.array([3, 4])], nbx.int64, (2, 2)), (np.zeros((2, 3), np.uint16), nbx.uint16, (2, 3)),
])
def test_tensor_infers_dtype_and_shape(data, dtype, shape):
    t = nbx.tensor(data)
    assert t.dtype is dtype and t.shape == shape and t.is_contiguous()


def test_tensor_values_and_copy_semantics():
    a = np.arange(6.0).reshape(2, 3)
    t = nbx.tensor(a)
    a[0, 0] = 99
    assert t.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]  # a copy
    s = nbx.tensor(t)
    assert s.untyped_storage() is not t.untyped_storage() and s.tolist() == t.tolist()
    assert nbx.tensor(a[:, ::-1]).tolist()[0] == [2.0, 1.0, 99.0]  # negative strides copy (PyTorch refuses)
    assert nbx.tensor([0.1]).tolist() == [float(np.float32(0.1))]
    assert nbx.tensor([1e300]).tolist() == [float("inf")]
    assert nbx.tensor(np.array([1.5, 2.5], dtype=ml_dtypes.bfloat16)).dtype is nbx.bfloat16


def test_tensor_follows_the_default_dtype():
    try:
        nbx.set_default_dtype(nbx.float64)
        assert nbx.tensor([1.5]).dtype is nbx.float64 and nbx.tensor(1j).dtype is nbx.complex128
        assert nbx.tensor([]).dtype is nbx.float64
    finally:
        nbx.set_default_dtype(nbx.float32)


@pytest.mark.parametrize("data,dtype,want", [
    ([-1], nbx.uint8, [255]), ([1.9, -1.9], nbx.int32, [1, -1]), ([2 ** 64 - 1], nbx.uint64, [2 ** 64 - 1]),
    ([2], nbx.bool, [True]), ([500.0], nbx.float8_e4m3fn, [448.0]), ([1e10], nbx.float16, [float("inf")]),
    ([2 ** 63], nbx.float64, [2.0 ** 63]), ([1, 2j], nbx.complex128, [1, 2j]),
])
def test_tensor_with_dtype_converts(data, dtype, want):
    assert nbx.tensor(data, dtype=dtype).tolist() == want


@pytest.mark.parametrize("data,dtype,exc,msg", [
    ([300], nbx.uint8, RuntimeError, "without overflow"), ([-0.5], nbx.uint8, RuntimeError, "without overflow"),
    ([float("nan")], nbx.int32, RuntimeError, "without overflow"), ([1e10], nbx.int32, RuntimeError, "overflow"),
    ([2 ** 63], None, ValueError, "Overflow when unpacking long long"), ([2 ** 64], nbx.uint64, OverflowError, "uint64"),
    ([-1], nbx.uint64, OverflowError, "negative"), ([1.5], nbx.uint64, TypeError, "uint64"),
    ([1j], nbx.float32, TypeError, "complex"), ([[1, 2], [3]], None, ValueError, "expected sequence of length 2"),
    ([[1, 2], 3], None, TypeError, "not a sequence"), ([1, [2]], None, TypeError, "sequence"),
    (None, None, RuntimeError, "Could not infer dtype of NoneType"), ([1, None], None, RuntimeError, "NoneType"),
    ("a", None, TypeError, "invalid data type"), (["a"], None, ValueError, "str"),
    (np.array(["a"]), None, TypeError, "can't convert"), (np.array([1], dtype=">i4"), None, ValueError, "byte order"),
    ([object()], None, TypeError, "Could not infer dtype"),
])
def test_tensor_errors(data, dtype, exc, msg):
    with pytest.raises(exc, match=msg):
        nbx.tensor(data, dtype=dtype)


def test_tensor_refuses_requires_grad():
    with pytest.raises(RuntimeError, match="autograd"):
        nbx.tensor([1.0], requires_grad=True)


def test_tensor_module_is_callable_and_keeps_the_class_alias():
    import nbxtensor.tensor as tmod
    assert tmod.NBXTensor is nbx.Tensor is nbx.NBXTensor
    assert isinstance(tmod([1, 2]), nbx.Tensor) and nbx.tensor([1]).dtype is nbx.int64


# -- from_numpy / as_tensor / asarray -------------------------------------------------------------------------------
def test_from_numpy_shares_memory_both_ways_with_strides():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)[1:, ::2]
    t = nbx.from_numpy(a)
    assert t.shape == (2, 2) and t.stride() == (4, 2) and t.dtype is nbx.float32
    t[0, 0] = -1.0
    assert a[0, 0] == -1.0
    a[1, 1] = 7.0
    assert t[1, 1].item() == 7.0
    assert np.shares_memory(t.numpy(), a)


def test_from_numpy_of_read_only_array_gives_read_only_tensor():
    """Stated difference: PyTorch warns and shares writable memory; nbxtensor refuses writes."""
    a = np.arange(4.0)
    a.flags.writeable = False
    t = nbx.from_numpy(a)
    assert t.is_readonly and not t.numpy().flags.writeable
    for write in (lambda: t.fill_(0), lambda: t.zero_(), lambda: t.copy_(nbx.zeros(4, dtype=nbx.float64)),
                  lambda: t.__setitem__(0, 1.0)):
        with pytest.raises(RuntimeError, match="read-only"):
            write()
    c = t.clone()
    c.fill_(1.0)
    assert not c.is_readonly and a.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_from_numpy_refusals():
    with pytest.raises(ValueError, match="negative"):
        nbx.from_numpy(np.arange(3)[::-1])
    with pytest.raises(ValueError, match="byte order"):
        nbx.from_numpy(np.arange(3, dtype=">i4"))
    with pytest.raises(TypeError, match="no nbxtensor dtype"):
        nbx.from_numpy(np.array(["a"]))
    with pytest.raises(TypeError, match="expected np.ndarray"):
        nbx.from_numpy([1, 2])


def test_from_numpy_all_table_dtypes_and_0dim():
    for d in nbx.dtypes.DTYPES:
        a = np.zeros((2, 3), dtype=d.numpy)
        assert nbx.from_numpy(a).dtype is d
    s = nbx.from_numpy(np.array(3.5))
    assert s.shape == () and s.item() == 3.5


def test_as_tensor_shares_where_possible():
    a = np.arange(3.0)
    assert nbx.as_tensor(a).untyped_storage().ptr == a.ctypes.data
    c = nbx.as_tensor(a, dtype=nbx.float32)
    a[0] = 5
    assert c.tolist()[0] == 0.0  # converted: a copy
    t = nbx.arange(3)
    assert nbx.as_tensor(t) is t and nbx.as_tensor(t, dtype=nbx.int32).dtype is nbx.int32
    assert nbx.as_tensor([1, 2], dtype=nbx.float16).dtype is nbx.float16


def test_asarray_copy_semantics():
    a = np.arange(4.0)
    assert np.shares_memory(nbx.asarray(a).numpy(), a)
    assert not np.shares_memory(nbx.asarray(a, copy=True).numpy(), a)
    t = nbx.arange(4)
    assert nbx.asarray(t) is t and nbx.asarray(t, copy=True) is not t
    with pytest.raises(ValueError, match="copy=False"):
        nbx.asarray(t, dtype=nbx.float32, copy=False)
    with pytest.raises(ValueError, match="copy=False"):
        nbx.asarray([1, 2], copy=False)
    assert nbx.asarray([1, 2]).tolist() == [1, 2]
    assert nbx.asarray(t, dtype=nbx.float64).dtype is nbx.float64


# -- empty / zeros / ones / full / like ----------------------------------------------------------------------------
def test_empty_zeros_ones_forms():
    for make in (nbx.zeros, nbx.ones, nbx.empty):
        assert make(2, 3).shape == make((2, 3)).shape == make([2, 3]).shape == (2, 3)
        assert make(2).dtype is nbx.float32 and make(()).shape == () and make(0, 4).numel() == 0
        assert make(2, dtype=nbx.int8).dtype is nbx.int8
        assert make(nbx.Size([2, 1])).shape == (2, 1)
    assert nbx.zeros(2, 2).tolist() == [[0.0, 0.0], [0.0, 0.0]] and nbx.ones(3, dtype=nbx.bool).tolist() == [True] * 3
    with pytest.raises(RuntimeError, match="negative dimension -1"):
        nbx.zeros(2, -1)
    with pytest.raises(TypeError, match="size"):
        nbx.zeros(2.0)
    with pytest.raises(TypeError, match='missing 1 required positional arguments: "size"'):
        nbx.empty()


@pytest.mark.parametrize("value,dtype", [(1, nbx.int64), (1.5, nbx.float32), (True, nbx.bool), (1j, nbx.complex64),
                                         (np.float32(1), nbx.float32), (np.int8(1), nbx.int64),
                                         (np.bool_(True), nbx.float32), (nbx.tensor(2, dtype=nbx.int8), nbx.int64),
                                         (np.complex64(1j), nbx.complex64)])
def test_full_infers_dtype_by_category(value, dtype):
    """As torch.full; a NumPy bool counts as a float (PyTorch's parser). Difference: np.complex64 stays complex
    (PyTorch reads it as a float, dropping the imaginary part)."""
    t = nbx.full((2,), value)
    assert t.dtype is dtype and t.shape == (2,)


def test_full_values_and_errors():
    assert nbx.full((2, 2), 7, dtype=nbx.uint8).tolist() == [[7, 7], [7, 7]]
    assert nbx.full((1,), -1, dtype=nbx.uint8).tolist() == [255]
    with pytest.raises(RuntimeError, match="without overflow"):
        nbx.full((1,), 300, dtype=nbx.uint8)
    with pytest.raises(TypeError, match="must be tuple of ints"):
        nbx.full(2, 1.0)
    with pytest.raises(TypeError, match="must be Number"):
        nbx.full((2,), "a")


def test_like_factories_take_shape_dtype_device_of_input():
    x = nbx.zeros(2, 3, dtype=nbx.int32)
    for t in (nbx.empty_like(x), nbx.zeros_like(x), nbx.ones_like(x), nbx.full_like(x, 2.7)):
        assert t.shape == (2, 3) and t.dtype is nbx.int32 and t.device == x.device
    assert nbx.full_like(x, 2.7).tolist()[0] == [2, 2, 2]
    assert nbx.ones_like(x, dtype=nbx.float16).dtype is nbx.float16
    assert nbx.zeros_like(x).tolist() == [[0] * 3] * 2
    assert nbx.scalar_tensor(2).dtype is nbx.float32 and nbx.scalar_tensor(2, dtype=nbx.int8).item() == 2


def test_factories_take_device():
    for t in (nbx.zeros(2, device="cpu"), nbx.tensor([1], device=nbx.device("cpu")), nbx.arange(3, device="cpu"),
              nbx.eye(2, device="cpu:0"), nbx.linspace(0, 1, 3, device="cpu")):
        assert t.device == nbx.device("cpu")
    with pytest.raises(RuntimeError, match="no backend"):
        nbx.zeros(2, device="meta")


# -- arange / linspace / eye ------------------------------------------------------------------------------------
def test_arange_values_and_dtypes():
    assert nbx.arange(5).tolist() == [0, 1, 2, 3, 4] and nbx.arange(5).dtype is nbx.int64
    assert nbx.arange(1, 4).tolist() == [1, 2, 3] and nbx.arange(5, 0, -2).tolist() == [5, 3, 1]
    assert nbx.arange(0, 1, 0.25).tolist() == [0.0, 0.25, 0.5, 0.75] and nbx.arange(0.0, 1).dtype is nbx.float32
    assert nbx.arange(0, 10, 3, dtype=nbx.float64).tolist() == [0.0, 3.0, 6.0, 9.0]
    assert nbx.arange(nbx.tensor(3)).tolist() == [0, 1, 2] and nbx.arange(np.float32(2)).dtype is nbx.float32
    assert len(nbx.arange(1, 1.3, 0.1)) == 4  # ceil in float64, as PyTorch
    assert nbx.arange(0, 2.5, 0.5, dtype=nbx.int32).tolist() == [0] * 5  # the step truncates to 0 for int32 values
    assert nbx.arange(0, 300, dtype=nbx.uint8).tolist()[-1] == 299 % 256


@pytest.mark.parametrize("args,kw,exc,msg", [
    ((0, 5, 0), {}, RuntimeError, "step must be nonzero"), ((5, 0), {}, RuntimeError, "inconsistent"),
    ((0, float("inf")), {}, RuntimeError, "unsupported range"), ((0, 1j), {}, RuntimeError, "double"),
    (("a",), {}, TypeError, "must be Number"), ((0, 3), {"dtype": nbx.bool}, NotImplementedError, "bool"),
    ((0, 3), {"dtype": nbx.uint16}, NotImplementedError, "uint16"),
    ((0, 10, 0.1), {"dtype": nbx.int64}, ValueError, "nonzero"), ((0, 1e20), {"dtype": nbx.int64}, RuntimeError,
                                                                   "overflow"),
])
def test_arange_errors(args, kw, exc, msg):
    with pytest.raises(exc, match=msg):
        nbx.arange(*args, **kw)


def test_linspace_values_and_errors():
    assert nbx.linspace(0, 1, 5).tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert nbx.linspace(0, 10, 5, dtype=nbx.int64).tolist() == [0, 2, 5, 7, 10]
    assert nbx.linspace(3, 7, 1).tolist() == [3.0] and nbx.linspace(3, 7, 0).shape == (0,)
    assert nbx.linspace(0, 1j, 3).tolist() == [0j, 0.5j, 1j] and nbx.linspace(0, 1j, 3).dtype is nbx.complex64
    x = nbx.linspace(-1.3, 2.9, 1001, dtype=nbx.float64).numpy()
    assert x[0] == -1.3 and x[-1] == 2.9  # both ends exact (symmetric formula)
    with pytest.raises(RuntimeError, match="non-negative"):
        nbx.linspace(0, 1, -1)
    with pytest.raises(TypeError, match="steps"):
        nbx.linspace(0, 1, 3.0)
    with pytest.raises(RuntimeError, match="without overflow"):
        nbx.linspace(0, 300, 4, dtype=nbx.uint8)
    with pytest.raises(NotImplementedError, match="float8"):
        nbx.linspace(0, 1, 3, dtype=nbx.float8_e5m2)


def _exact_round(x: Fraction, dtype) -> float:
    """Correct rounding of a rational to float64 (Python's float(Fraction)) or float32 (checked neighbours)."""
    if dtype is np.float64:
        return float(x)
    c = np.float32(float(x))
    cands = [c, np.nextafter(c, np.float32(np.inf)), np.nextafter(c, np.float32(-np.inf))]
    return float(min(cands, key=lambda v: (abs(Fraction(float(v)) - x), int(np.float32(v).view(np.int32)) & 1)))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fma_emulation_rounds_once(dtype):
    """The FMA that the range factories need (PyTorch's compiled kernels contract start + step * i)."""
    rng = np.random.default_rng(0)
    a, b, c = ((rng.standard_normal(3000) * 10.0 ** rng.integers(-8, 8, 3000)).astype(dtype) for _ in range(3))
    got = _fma(a, b, c, dtype)
    for k in range(3000):
        want = _exact_round(Fraction(float(a[k])) * Fraction(float(b[k])) + Fraction(float(c[k])), dtype)
        assert float(got[k]) == want, (a[k], b[k], c[k])
    assert float(_fma(0.3, 833.0, 1.0, np.float64)) == 250.89999999999998  # plain arithmetic gives 250.9
    assert np.isnan(_fma(np.inf, 0.0, 1.0, np.float64)) and _fma(np.inf, 1.0, 1.0, np.float64) == np.inf


def test_eye():
    assert nbx.eye(2).tolist() == [[1.0, 0.0], [0.0, 1.0]] and nbx.eye(2).dtype is nbx.float32
    assert nbx.eye(2, 3, dtype=nbx.bool).tolist() == [[True, False, False], [False, True, False]]
    assert nbx.eye(0).shape == (0, 0) and nbx.eye(2, 0).shape == (2, 0)
    assert nbx.eye(n=2, m=1, dtype=nbx.int8).tolist() == [[1], [0]]
    with pytest.raises(RuntimeError, match="n must be greater or equal to 0"):
        nbx.eye(-1)
    with pytest.raises(TypeError, match="must be int"):
        nbx.eye(2.0)
