"""``__getitem__``/``__setitem__`` against NumPy's basic indexing (hypothesis property tests): the same values,
views sharing storage, assignment of numbers and (broadcast, converted) tensors, and the refusals.
(tests/parity/test_indexing_parity.py checks strides, offsets and errors against PyTorch.)"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbxtensor as nbx

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def layouts(draw):
    ndim = draw(st.integers(0, 4))
    shape = [draw(st.integers(0 if draw(st.integers(0, 8)) == 0 else 1, 5)) for _ in range(ndim)]
    order = draw(st.permutations(range(ndim)))
    strides = [0] * ndim
    acc = 1
    for d in reversed(order):
        strides[d] = acc
        acc *= max(shape[d], 1) * draw(st.integers(1, 2))
    offset = draw(st.integers(0, 2))
    n = offset + (sum((s - 1) * t for s, t in zip(shape, strides)) + 1 if math.prod(shape) else 1)
    x = nbx.arange(n, dtype=nbx.float64).as_strided(shape, strides, offset)
    return x, x.numpy()


@st.composite
def basic_index(draw, shape):
    """A valid basic index for ``shape``: ints (negative too), slices with positive steps, None, one Ellipsis."""
    items = []
    k = draw(st.integers(0, len(shape)))
    for size in shape[:k]:
        if size and draw(st.booleans()):
            items.append(draw(st.integers(-size, size - 1)))
        else:
            bound = st.one_of(st.none(), st.integers(-size - 2, size + 2))
            items.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, 1, 2, 3]))))
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), Ellipsis)
    return items[0] if len(items) == 1 and draw(st.booleans()) else tuple(items)


@SETTINGS
@given(xa=layouts(), data=st.data())
def test_getitem_matches_numpy_and_is_a_view(xa, data):
    x, a = xa
    idx = data.draw(basic_index(a.shape))
    try:
        want = a[idx]
    except IndexError:  # an int landed on an empty dim after the ellipsis
        with pytest.raises(IndexError):
            x[idx]
        return
    r = x[idx]
    assert tuple(r.shape) == np.shape(want)
    np.testing.assert_array_equal(r.numpy(), want)
    assert r.untyped_storage() is x.untyped_storage()
    if r.numel():
        r.fill_(-1.0)  # a write through the result shows in the source
        assert (np.asarray(a[idx]) == -1.0).all()


@SETTINGS
@given(xa=layouts(), data=st.data())
def test_setitem_matches_numpy(xa, data):
    x, a = xa
    idx = data.draw(basic_index(a.shape))
    try:
        target_shape = np.shape(a[idx])
    except IndexError:
        with pytest.raises(IndexError):
            x[idx] = 1.0
        return
    kind = data.draw(st.sampled_from(["int", "float", "tensor", "broadcast", "other_dtype", "numpy_scalar"]))
    if kind in ("int", "float", "numpy_scalar"):
        v = {"int": 7, "float": -2.5, "numpy_scalar": np.float32(0.25)}[kind]
        x[idx] = v
        a[idx] = v
    else:
        shape = list(target_shape)
        if kind == "broadcast":
            shape = [1 if data.draw(st.booleans()) else s for s in shape][data.draw(st.integers(0, len(shape))):]
        vals = np.arange(math.prod(shape), dtype=np.float64).reshape(shape) * 1.5 - 2
        if kind == "other_dtype":
            x[idx] = nbx.tensor(vals, dtype=nbx.float16)
            a[idx] = vals.astype(np.float16)
        else:
            x[idx] = nbx.tensor(vals)
            a[idx] = vals
    np.testing.assert_array_equal(x.numpy(), a)


def test_setitem_value_with_leading_ones_fits_like_pytorch():
    x = nbx.zeros(2, 3)
    x[0] = nbx.ones(1, 1, 3)
    np.testing.assert_array_equal(x.numpy(), [[1, 1, 1], [0, 0, 0]])
    with pytest.raises(RuntimeError):
        x[0] = nbx.ones(2, 3)


def test_setitem_number_conversion_rules():
    u = nbx.zeros(3, dtype=nbx.uint8)
    u[0] = -1  # wraps, as PyTorch
    u[1] = 1.7  # truncates
    assert u.tolist() == [255, 1, 0]
    for bad in (256, -0.5, float("nan")):
        with pytest.raises(RuntimeError, match="without overflow"):
            u[2] = bad
    h = nbx.zeros(2, dtype=nbx.float16)
    h[0] = 1e6  # narrow floats take numbers by the cast rules (PyTorch gives inf here; fill_ would raise)
    assert h.tolist()[0] == float("inf")
    f8 = nbx.zeros(1, dtype=nbx.float8_e4m3fn)
    f8[0] = 1000.0
    assert f8.tolist() == [448.0]
    with pytest.raises(ValueError, match="Overflow when unpacking long long"):
        nbx.zeros(1)[0] = 2 ** 63


def test_setitem_refuses_non_tensor_values_like_pytorch():
    x = nbx.zeros(2, 3)
    for v in ([1, 2, 3], np.ones(3), "a", None):
        with pytest.raises(TypeError, match="can't assign"):
            x[0] = v


def test_index_errors_and_types():
    x = nbx.arange(24).view(2, 3, 4)
    with pytest.raises(IndexError, match="index 2 is out of bounds for dimension 0 with size 2"):
        x[2]
    with pytest.raises(IndexError, match="index -5 is out of bounds for dimension 2 with size 4"):
        x[0, 0, -5]
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 3"):
        x[0, 0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        x[..., 0, ...]
    with pytest.raises(ValueError, match="step must be greater than zero"):
        x[::-1]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        x[::0]
    with pytest.raises(IndexError, match="got float"):
        x[1.0]
    with pytest.raises(TypeError, match="slice indices must be integers"):
        x[1.0:]
    with pytest.raises(TypeError, match="got str"):
        x["a"]
    with pytest.raises(IndexError, match="invalid index of a 0-dim tensor"):
        nbx.tensor(3)[0]
    with pytest.raises(IndexError, match="slice"):
        nbx.tensor(3)[:]


def test_advanced_indexing_is_refused_loudly():
    x = nbx.arange(6)
    for idx in ([0, 1], np.array([0, 1]), nbx.tensor([0, 1]), True, (0, False), nbx.tensor([True] * 6)):
        with pytest.raises(NotImplementedError, match="advanced indexing"):
            x[idx]
    with pytest.raises(IndexError, match="long, int, byte or bool"):
        x[nbx.tensor(1.0)]


def test_integer_like_indices():
    x = nbx.arange(24).view(2, 3, 4)
    assert x[nbx.tensor(1), np.int64(-1)].tolist() == [20, 21, 22, 23]
    assert x[np.int32(1):, nbx.tensor(2)].tolist() == [[20, 21, 22, 23]]
    assert x[()].shape == x.shape and x[...].untyped_storage() is x.untyped_storage()
    s = nbx.tensor(5.0)
    assert s[None].shape == (1,) and s[..., None, None].shape == (1, 1) and s[()].item() == 5.0


def test_setitem_on_expanded_and_readonly():
    x = nbx.zeros(3).expand(2, 3)
    x[0] = 1.0  # one row: no internal overlap
    assert x.tolist() == [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]
    with pytest.raises(RuntimeError, match="more than one element"):
        x[:] = 2.0
    arr = np.zeros(3)
    arr.flags.writeable = False
    ro = nbx.from_numpy(arr)
    with pytest.raises(RuntimeError, match="read-only"):
        ro[0] = 1.0


def test_memoised_index_views_follow_the_source_layout_and_offset():
    import nbxtensor.tensor.indexing as I
    base = np.arange(60.0).reshape(6, 10)
    for _ in range(2):                                   # the second round is served from the memo
        x = nbx.tensor(base)
        for idx in [(1,), (slice(2, 5), 3), (Ellipsis, -1), (None, slice(None, None, 2)), (-6, slice(1, None, 3))]:
            np.testing.assert_array_equal(x[idx].numpy(), base[idx])
            y = nbx.tensor(np.arange(70.0))[10:].view(6, 10)                            # another offset
            np.testing.assert_array_equal(y[idx].numpy(), base[idx] + 10)
            np.testing.assert_array_equal(x.t()[idx].numpy(), base.T[idx])              # other strides
    assert any(k[2] == (1,) for k in I._VIEWS)
    for _ in range(2):                                   # errors are never memoised
        with pytest.raises(IndexError, match="index 6 is out of bounds for dimension 0 with size 6"):
            x[6]
    n = nbx.tensor(2)
    assert x[n].numpy().tolist() == base[2].tolist()    # a tensor index is not memoised (its value may change)
    n.fill_(3)
    assert x[n].numpy().tolist() == base[3].tolist()
    assert x[np.int64(4)].numpy().tolist() == base[4].tolist()
