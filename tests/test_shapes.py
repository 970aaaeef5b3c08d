"""Shape and stride rules (nbxtensor.shapes), against NumPy where NumPy has the same rule."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nbxtensor.shapes import (broadcast_shapes, compute_view_strides, contiguous_strides, index_arg, infer_size,
                              is_contiguous, normalize_shape, storage_span, wrap_dim, wrap_dims)

SETTINGS = settings(max_examples=200, deadline=None)
shapes = st.lists(st.integers(0, 4), min_size=0, max_size=5).map(tuple)


def test_contiguous_strides_use_size_one_for_empty_dims():
    assert contiguous_strides(()) == ()
    assert contiguous_strides((2, 3, 4)) == (12, 4, 1)
    assert contiguous_strides((2, 0, 3)) == (3, 3, 1)  # PyTorch: a 0 counts as 1 to its left
    assert contiguous_strides((5,)) == (1,)


@SETTINGS
@given(shape=shapes)
def test_contiguous_strides_match_numpy_for_nonempty(shape):
    if math.prod(shape) == 0:
        return
    a = np.empty(shape, dtype=np.int16)
    assert contiguous_strides(shape) == tuple(s // 2 for s in a.strides)
    assert is_contiguous(shape, contiguous_strides(shape))


def test_is_contiguous_follows_aten():
    assert is_contiguous((2, 1, 3), (3, 99, 1))  # size-1 dims' strides do not matter
    assert is_contiguous((0, 5), (7, 7))  # no elements: contiguous
    assert not is_contiguous((2, 3), (1, 2))
    assert not is_contiguous((2, 3), (3, 2))
    assert is_contiguous((), ())
    assert not is_contiguous((2,), (0,))


def test_wrap_dim():
    assert [wrap_dim(d, 3) for d in (-3, -1, 0, 2)] == [0, 2, 0, 2]
    assert wrap_dim(-1, 0) == 0 and wrap_dim(0, 0) == 0
    with pytest.raises(IndexError, match=r"expected to be in range of \[-3, 2\], but got 3"):
        wrap_dim(3, 3, fn="sum")
    with pytest.raises(IndexError, match=r"range of \[-1, 0\], but got -2"):
        wrap_dim(-2, 0)
    with pytest.raises(IndexError, match="Dimension specified as 0 but tensor has no dimensions"):
        wrap_dim(0, 0, wrap_scalar=False)
    for bad in (1.0, True, "0", None):
        with pytest.raises(TypeError, match="must be int"):
            wrap_dim(bad, 3)
    assert wrap_dim(np.int64(-1), 2) == 1


def test_wrap_dims_finds_repeats_in_order():
    assert wrap_dims((0, -1), 3) == (0, 2)
    with pytest.raises(RuntimeError, match="dim 0 appears multiple times"):
        wrap_dims((0, -3, 7), 3)  # the repeat is found before the bad dim, as ATen
    with pytest.raises(IndexError):
        wrap_dims((7, 0, 0), 3)


def test_index_arg():
    assert index_arg(np.int32(3), fn="f", arg="a") == 3
    for bad in (1.5, True, "1", None):
        with pytest.raises(TypeError, match=r"f\(\): argument 'a' must be int"):
            index_arg(bad, fn="f", arg="a")


def test_normalize_shape_forms():
    assert normalize_shape((2, 3), fn="f") == (2, 3)
    assert normalize_shape(((2, 3),), fn="f") == (2, 3)
    assert normalize_shape(([2, 3],), fn="f") == (2, 3)
    assert normalize_shape((np.int64(2), True), fn="f") == (2, 1)  # PyTorch's int-list parser takes bools
    assert normalize_shape((), fn="f") == ()
    for bad in ((2.0, 3), ((2,), 3), ("2",), (None,)):
        with pytest.raises(TypeError, match=r"f\(\): argument 'size'"):
            normalize_shape(bad, fn="f")


@SETTINGS
@given(a=shapes, b=shapes)
def test_broadcast_shapes_matches_numpy(a, b):
    try:
        want = np.broadcast_shapes(a, b)
    except ValueError:
        with pytest.raises(RuntimeError, match="must match the size"):
            broadcast_shapes(a, b)
        return
    assert broadcast_shapes(a, b) == tuple(want)
    assert broadcast_shapes(a, b, ()) == tuple(want)


def test_broadcast_shapes_names_the_rightmost_mismatch_like_aten():
    with pytest.raises(RuntimeError, match=r"tensor a \(3\) must match the size of tensor b \(2\) at "
                                           r"non-singleton dimension 1"):
        broadcast_shapes((2, 3), (3, 2))
    with pytest.raises(RuntimeError, match="negative dimension"):
        broadcast_shapes((2,), (-1,))
    assert broadcast_shapes() == ()


def test_infer_size():
    assert infer_size((2, -1), 6) == (2, 3)
    assert infer_size((-1,), 0) == (0,)
    assert infer_size((0, 3), 0) == (0, 3)
    cases = [((-1, -1), 6, "only one dimension can be inferred"),
             ((2, -2), 6, r"invalid shape dimension -2 at index 1 of shape \[2, -2\]"),
             ((-1, 0), 0, "ambiguous"),
             ((-1, 0), 6, r"shape '\[-1, 0\]' is invalid for input of size 6"),
             ((4,), 6, "invalid for input of size 6"), ((-1, 4), 6, "invalid for input of size 6")]
    for shape, n, msg in cases:
        with pytest.raises(RuntimeError, match=msg):
            infer_size(shape, n)


@st.composite
def strided(draw):
    """A random strided layout over a base buffer (permuted, sliced, with size-1 and stride-0 dims)."""
    ndim = draw(st.integers(0, 4))
    shape = [draw(st.integers(1, 4)) for _ in range(ndim)]
    order = draw(st.permutations(range(ndim)))
    strides = [0] * ndim
    acc = 1
    for d in reversed(order):
        strides[d] = acc
        acc *= shape[d] * draw(st.integers(1, 2))
    for d in range(ndim):
        if shape[d] == 1 and draw(st.booleans()):
            strides[d] = draw(st.integers(0, 9))
    return tuple(shape), tuple(strides)


@settings(max_examples=300, deadline=None)
@given(layout=strided(), data=st.data())
def test_view_strides_give_the_reshaped_values(layout, data):
    """Wherever compute_view_strides finds strides, viewing the same memory with them gives NumPy's reshape of the
    values; wherever NumPy reshapes without a copy, a view exists here too."""
    shape, strides = layout
    n = math.prod(shape)
    buf = np.arange(1000, dtype=np.int64)
    src = np.lib.stride_tricks.as_strided(buf, shape, tuple(s * 8 for s in strides))
    dims = []
    rest = n
    while rest > 1:
        d = data.draw(st.sampled_from([k for k in range(2, rest + 1) if rest % k == 0]))
        dims.append(d)
        rest //= d
    for _ in range(data.draw(st.integers(0, 2))):
        dims.insert(data.draw(st.integers(0, len(dims))), 1)
    new = tuple(data.draw(st.permutations(dims)))
    got = compute_view_strides(shape, strides, new)
    want = src.reshape(new)
    if got is not None:
        view = np.lib.stride_tricks.as_strided(buf, new, tuple(s * 8 for s in got))
        np.testing.assert_array_equal(view, want)
    try:
        nocopy = src.view()
        nocopy.shape = new  # NumPy raises when the reshape needs a copy
    except AttributeError:
        return
    assert got is not None, f"NumPy views {shape}/{strides} as {new} without a copy; ATen's rule should too"


def test_view_strides_edge_cases():
    assert compute_view_strides((), (), (1, 1)) == (1, 1)
    assert compute_view_strides((2, 0), (5, 7), (2, 0)) == (5, 7)  # empty, same shape: strides kept
    assert compute_view_strides((2, 0), (5, 7), (0, 4, 1)) == (4, 1, 1)  # empty: contiguous strides
    assert compute_view_strides((2, 3), (1, 2), (6,)) is None  # transposed
    assert compute_view_strides((2, 3), (1, 2), (2, 3, 1)) == (1, 2, 2)


def test_storage_span():
    assert storage_span((2, 3), (3, 1), 4) == (4, 10)
    assert storage_span((2, 3), (-3, 1), 3) == (0, 6)  # negative strides (foreign NumPy memory)
    assert storage_span((0, 3), (3, 1), 5) == (5, 5)
    assert storage_span((), (), 2) == (2, 3)
    assert storage_span((4,), (0,), 1) == (1, 2)
