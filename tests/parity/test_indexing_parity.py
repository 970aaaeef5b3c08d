"""Parity of basic indexing with PyTorch: ``__getitem__`` results (shape, strides, offset, values, error types) and
``__setitem__`` effects, over random strided layouts and random index tuples (ints incl. negative, slices with
steps, ``None``, ``...``, bools)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import nbxtensor as nbx  # noqa: E402

pytestmark = [pytest.mark.parity, pytest.mark.filterwarnings("ignore::UserWarning")]

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def layouts(draw):
    ndim = draw(st.integers(0, 4))
    shape = [draw(st.integers(0 if draw(st.integers(0, 8)) == 0 else 1, 4)) for _ in range(ndim)]
    order = draw(st.permutations(range(ndim)))
    strides = [0] * ndim
    acc = 1
    for d in reversed(order):
        strides[d] = acc
        acc *= max(shape[d], 1) * draw(st.integers(1, 2))
    return tuple(shape), tuple(strides), draw(st.integers(0, 2))


def pair(layout, dtype="int64"):
    shape, strides, offset = layout
    n = offset + (sum((s - 1) * st for s, st in zip(shape, strides)) + 1 if math.prod(shape) else 1)
    t = torch.arange(n, dtype=getattr(torch, dtype)).as_strided(shape, strides, offset)
    x = nbx.arange(n, dtype=getattr(nbx, dtype)).as_strided(shape, strides, offset)
    return t, x


@st.composite
def index_items(draw, shape):
    """A tuple of basic indices for ``shape`` (sometimes invalid: out of range, too many, bad steps)."""
    items = []
    dims = list(shape)
    n_real = draw(st.integers(0, len(dims) + (1 if draw(st.integers(0, 9)) == 0 else 0)))
    for k in range(n_real):
        size = dims[k] if k < len(dims) else 1
        kind = draw(st.sampled_from(["int", "slice", "slice", "full"]))
        if kind == "int":
            lo, hi = (-size, size - 1) if draw(st.integers(0, 9)) else (-size - 2, size + 2)
            items.append(draw(st.integers(lo, hi)) if hi >= lo else 0)
        elif kind == "full":
            items.append(slice(None))
        else:
            bound = st.one_of(st.none(), st.integers(-size - 2, size + 2))
            step = draw(st.sampled_from([None, 1, 2, 3] * 4 + [0, -1]))
            items.append(slice(draw(bound), draw(bound), step))
    for _ in range(draw(st.integers(0, 2))):
        items.insert(draw(st.integers(0, len(items))), None)
    if draw(st.booleans()):
        items.insert(draw(st.integers(0, len(items))), Ellipsis)
    if draw(st.integers(0, 3)) == 0 and len(items) == 1:
        return items[0]
    return tuple(items)


def outcome(fn):
    try:
        return fn(), None
    except Exception as e:  # noqa: BLE001 - the type is compared
        return None, type(e)


def assert_same_view(rt, rx):
    assert tuple(rx.shape) == tuple(rt.shape)
    assert tuple(rx.stride()) == tuple(rt.stride())
    assert rx.storage_offset() == rt.storage_offset()
    np.testing.assert_array_equal(rx.numpy(), rt.numpy())


@SETTINGS
@given(layout=layouts(), data=st.data())
def test_getitem_matches_torch(layout, data):
    t, x = pair(layout)
    idx = data.draw(index_items(layout[0]))
    (rt, et), (rx, ex) = outcome(lambda: t[idx]), outcome(lambda: x[idx])
    assert ex == et, f"index {idx!r}: torch raised {et}, nbx raised {ex}"
    if et is None:
        assert_same_view(rt, rx)
        # a view: writing through it shows in the source
        if rx.numel():
            rx.fill_(-7)
            rt.fill_(-7)
            np.testing.assert_array_equal(x.numpy(), t.numpy())


@SETTINGS
@given(layout=layouts(), data=st.data())
def test_setitem_matches_torch(layout, data):
    t, x = pair(layout)
    idx = data.draw(index_items(layout[0]))
    (rt, et), (_, ex) = outcome(lambda: t[idx]), outcome(lambda: x[idx])
    assert ex == et
    if et is not None:
        return
    kind = data.draw(st.sampled_from(["scalar", "float", "tensor", "broadcast", "lead1", "other_dtype"]))
    if kind == "scalar":
        vt = vx = data.draw(st.integers(-50, 50))
    elif kind == "float":
        vt = vx = data.draw(st.sampled_from([1.5, -2.75, 0.0]))
    else:
        shape = list(rt.shape)
        if kind == "broadcast" and shape:
            shape = [1 if data.draw(st.booleans()) else s for s in shape][data.draw(st.integers(0, len(shape))):]
        if kind == "lead1":
            shape = [1, 1] + shape
        dt = "float32" if kind == "other_dtype" else "int64"
        vals = np.arange(math.prod(shape), dtype=np.float64).reshape(shape) * (1.5 if dt == "float32" else 1) - 3
        vt = torch.tensor(vals, dtype=getattr(torch, dt))
        vx = nbx.tensor(vals, dtype=getattr(nbx, dt))
    (_, et), (_, ex) = outcome(lambda: t.__setitem__(idx, vt)), outcome(lambda: x.__setitem__(idx, vx))
    assert ex == et, f"index {idx!r} value {kind}: torch raised {et}, nbx raised {ex}"
    np.testing.assert_array_equal(x.numpy(), t.numpy())


@pytest.mark.parametrize("idx", [0, -1, slice(None), Ellipsis, None, (), (None, Ellipsis, None), slice(0, 0),
                                 (Ellipsis, None)])
def test_getitem_0dim_matches_torch(idx):
    t, x = torch.tensor(5), nbx.tensor(5)
    (rt, et), (rx, ex) = outcome(lambda: t[idx]), outcome(lambda: x[idx])
    assert ex == et
    if et is None:
        assert_same_view(rt, rx)


@pytest.mark.parametrize("idx,exc", [
    (1.0, IndexError), ((0, 1.5), IndexError), (slice(1.0, None), TypeError), ("a", TypeError),
    (slice(None, None, -1), ValueError), (slice(None, None, 0), ValueError), ((0, 0, 0, 0), IndexError),
    (5, IndexError), (-6, IndexError)])
def test_getitem_errors_match_torch(idx, exc):
    t, x = torch.zeros(5, 3, 2), nbx.zeros(5, 3, 2)
    with pytest.raises(exc):
        t[idx]
    with pytest.raises(exc):
        x[idx]


def test_integer_tensor_and_numpy_indices_match_torch():
    t, x = torch.arange(24).view(2, 3, 4), nbx.arange(24).view(2, 3, 4)
    for idx in [(torch.tensor(1), np.int64(-1)), (slice(np.int32(1), None), torch.tensor(2))]:
        xidx = tuple(nbx.tensor(i.item()) if isinstance(i, torch.Tensor) else
                     slice(i.start, i.stop) if isinstance(i, slice) else i for i in idx)
        xidx = tuple(slice(i.start, nbx.tensor(i.stop.item()) if isinstance(i.stop, torch.Tensor) else i.stop)
                     if isinstance(i, slice) else i for i in xidx)
        assert_same_view(t[idx], x[xidx])
    with pytest.raises(IndexError):
        t[torch.tensor(1.0)]
    with pytest.raises(IndexError):
        x[nbx.tensor(1.0)]


def test_setitem_scalar_overflow_matches_torch():
    for dt, values in [("uint8", [255, 256, -1, -256, 1.5, -0.5, float("nan")]),
                       ("int8", [127, 128, -129, 2.9, float("inf")]),
                       ("float16", [65504.0, 65520.0, 1e6, float("inf"), 70000, 2 ** 63]),
                       ("float8_e4m3fn", [448.0, 500.0, float("inf"), 1000]),
                       ("float32", [1e39, 2 ** 64 - 1, 3.0e38]),
                       ("int64", [2 ** 63, -2 ** 63, 2 ** 63 - 1]),
                       ("bool", [2, 0.5, float("nan")])]:
        for v in values:
            t, x = torch.zeros(3, dtype=getattr(torch, dt)), nbx.zeros(3, dtype=getattr(nbx, dt))
            (_, et), (_, ex) = outcome(lambda: t.__setitem__(1, v)), outcome(lambda: x.__setitem__(1, v))
            assert ex == et, (dt, v, et, ex)
            if et is None:
                np.testing.assert_array_equal(x.numpy().astype(np.float64), t.double().numpy())


def test_setitem_refuses_lists_and_arrays_like_torch():
    t, x = torch.zeros(2, 3), nbx.zeros(2, 3)
    for v in ([1, 2, 3], np.ones(3), "a", None):
        (_, et), (_, ex) = outcome(lambda: t.__setitem__(0, v)), outcome(lambda: x.__setitem__(0, v))
        assert et is TypeError and ex is TypeError, (v, et, ex)


def test_setitem_into_expanded_matches_torch():
    t, x = torch.zeros(3).expand(2, 3), nbx.zeros(3).expand(2, 3)
    t[0] = 1.0
    x[0] = 1.0
    np.testing.assert_array_equal(x.numpy(), t.numpy())
    for fn in (lambda a: a.__setitem__(slice(None), 2.0), lambda a: a.__setitem__(Ellipsis, 2.0)):
        with pytest.raises(RuntimeError):
            fn(t)
        with pytest.raises(RuntimeError):
            fn(x)
