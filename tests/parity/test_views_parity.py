"""Parity of views with PyTorch: success or failure (and the exception type), shapes, strides and offsets.

Every case builds the same strided source on both sides (``arange(storage).as_strided(shape, strides, offset)``)
and applies one view function; results must agree on metadata, on whether the result shares storage, and on
the values. Random layouts come from hypothesis (bounded examples, so the suite stays fast).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

import nbxtensor as nbx  # noqa: E402

pytestmark = [pytest.mark.parity, pytest.mark.filterwarnings("ignore::UserWarning")]

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- layouts ---------------------------------------------------------------------------------------------
@st.composite
def layouts(draw, max_ndim: int = 4, min_ndim: int = 0):
    """(shape, strides, offset): contiguous, permuted, sliced (gaps), expanded (stride 0) or arbitrary."""
    ndim = draw(st.integers(min_ndim, max_ndim))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=ndim, max_size=ndim)))
    if ndim and draw(st.integers(0, 9)) == 0:  # an occasional empty tensor
        i = draw(st.integers(0, ndim - 1))
        shape = shape[:i] + (0,) + shape[i + 1:]
    kind = draw(st.sampled_from(["contiguous", "permuted", "sliced", "expanded", "arbitrary"]))
    if kind == "arbitrary":
        strides = tuple(draw(st.lists(st.integers(0, 12), min_size=ndim, max_size=ndim)))
    else:
        parent = [s * (draw(st.integers(1, 2)) if kind == "sliced" else 1) for s in shape]
        order = list(range(ndim))
        if kind in ("permuted", "sliced"):
            order = draw(st.permutations(order))
        # contiguous strides of the parent taken in `order`
        strides = [0] * ndim
        acc = 1
        for d in reversed(order):
            strides[d] = acc
            acc *= max(parent[d], 1)
        if kind == "expanded" and ndim:
            for d in draw(st.sets(st.integers(0, ndim - 1), max_size=ndim)):
                strides[d] = 0
        strides = tuple(strides)
    offset = draw(st.integers(0, 3))
    return shape, strides, offset


def storage_size(shape, strides, offset) -> int:
    if math.prod(shape) == 0:
        return offset + 1
    return offset + sum((n - 1) * s for n, s in zip(shape, strides)) + 1


def pair(layout, dtype: str = "int64"):
    """The same strided tensor on both sides, its values the storage indices."""
    shape, strides, offset = layout
    n = storage_size(shape, strides, offset)
    t = torch.arange(n, dtype=getattr(torch, dtype)).as_strided(shape, strides, offset)
    x = nbx.arange(n, dtype=getattr(nbx, dtype)).as_strided(shape, strides, offset)
    return t, x


def run_both(fn_t, fn_x):
    """(result, exception type) on each side."""
    out = []
    for fn in (fn_t, fn_x):
        try:
            out.append((fn(), None))
        except Exception as e:  # noqa: BLE001 - the type is what we compare
            out.append((None, type(e)))
    return out


def same_meta(rt, rx, src_t=None, src_x=None):
    assert tuple(rx.shape) == tuple(rt.shape)
    assert tuple(rx.stride()) == tuple(rt.stride()), (rt.shape, rt.stride(), rx.stride())
    shares_t = src_t is None or rt.untyped_storage().data_ptr() == src_t.untyped_storage().data_ptr()
    shares_x = src_x is None or rx.untyped_storage() is src_x.untyped_storage()
    assert shares_x == shares_t, "view-vs-copy differs"
    if shares_t:
        assert rx.storage_offset() == rt.storage_offset()
    assert str(rx.dtype).replace("nbx.", "") == str(rt.dtype).replace("torch.", "")
    np.testing.assert_array_equal(rx.numpy(), rt.numpy())


def check_parity(fn_t, fn_x, src_t=None, src_x=None):
    (rt, et), (rx, ex) = run_both(fn_t, fn_x)
    assert ex == et, f"torch raised {et}, nbx raised {ex}"
    if et is None:
        if isinstance(rt, tuple):
            assert isinstance(rx, tuple) and len(rx) == len(rt)
            for a, b in zip(rt, rx):
                same_meta(a, b, src_t, src_x)
        else:
            same_meta(rt, rx, src_t, src_x)


@st.composite
def target_shapes(draw, n: int):
    """A shape of ``n`` elements (sometimes with -1, size-1 dims, or a wrong product)."""
    dims = []
    rest = n
    while rest > 1 and len(dims) < 5:
        divs = [d for d in range(2, rest + 1) if rest % d == 0]
        d = draw(st.sampled_from(divs))
        dims.append(d)
        rest //= d
    if n == 0:
        dims = [0] + draw(st.lists(st.integers(1, 3), max_size=2))
    for _ in range(draw(st.integers(0, 2))):
        dims.insert(draw(st.integers(0, len(dims))), 1)
    dims = list(draw(st.permutations(dims)))
    mode = draw(st.integers(0, 9))
    if mode == 0 and dims:
        dims[draw(st.integers(0, len(dims) - 1))] = -1
    elif mode == 1:
        dims.append(draw(st.integers(2, 3)))  # wrong product
    elif mode == 2 and len(dims) >= 1:
        dims[0] = -1
        dims.append(-1)  # two -1
    return tuple(dims)


# -- view / reshape ------------------------------------------------------------------------------------
@SETTINGS
@given(layout=layouts(), data=st.data())
def test_view_matches_torch(layout, data):
    t, x = pair(layout)
    shape = data.draw(target_shapes(math.prod(layout[0])))
    check_parity(lambda: t.view(shape), lambda: x.view(shape), t, x)


@SETTINGS
@given(layout=layouts(), data=st.data())
def test_reshape_view_or_copy_matches_torch(layout, data):
    t, x = pair(layout)
    shape = data.draw(target_shapes(math.prod(layout[0])))
    check_parity(lambda: t.reshape(shape), lambda: x.reshape(shape), t, x)


@SETTINGS
@given(layout=layouts(min_ndim=1), data=st.data())
def test_flatten_unflatten_match_torch(layout, data):
    t, x = pair(layout)
    nd = len(layout[0])
    s = data.draw(st.integers(-nd, nd - 1))
    e = data.draw(st.integers(-nd, nd - 1))
    check_parity(lambda: t.flatten(s, e), lambda: x.flatten(s, e), t, x)
    d = data.draw(st.integers(-nd - 1, nd))
    sizes = data.draw(target_shapes(layout[0][d] if -nd <= d < nd else 1))
    check_parity(lambda: t.unflatten(d, sizes), lambda: x.unflatten(d, sizes), t, x)


def test_view_of_0dim_and_size1():
    for shape in [(), (1,), (1, 1)]:
        t, x = pair((shape, (0,) * len(shape), 2))
        for target in [(), (1,), (1, 1, 1), (-1,), (1, -1)]:
            check_parity(lambda: t.view(target), lambda: x.view(target), t, x)


# -- view(dtype) -----------------------------------------------------------------------------------------
VIEW_DTYPES = ["uint8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64", "complex64",
               "complex128", "bool"]


@SETTINGS
@given(layout=layouts(), src=st.sampled_from(VIEW_DTYPES), dst=st.sampled_from(VIEW_DTYPES))
def test_view_dtype_matches_torch(layout, src, dst):
    shape, strides, offset = layout
    n = storage_size(shape, strides, offset)
    tbase = torch.zeros(n, dtype=getattr(torch, src))
    xbase = nbx.zeros(n, dtype=getattr(nbx, src))
    t = tbase.as_strided(shape, strides, offset)
    x = xbase.as_strided(shape, strides, offset)
    (rt, et), (rx, ex) = run_both(lambda: t.view(getattr(torch, dst)), lambda: x.view(getattr(nbx, dst)))
    assert ex == et
    if et is None:
        assert tuple(rx.shape) == tuple(rt.shape)
        assert tuple(rx.stride()) == tuple(rt.stride())
        assert rx.storage_offset() == rt.storage_offset()
        assert rx.dtype is getattr(nbx, dst)


# -- the other views --------------------------------------------------------------------------------------
@SETTINGS
@given(layout=layouts(), data=st.data())
def test_squeeze_unsqueeze_match_torch(layout, data):
    t, x = pair(layout)
    nd = len(layout[0])
    check_parity(lambda: t.squeeze(), lambda: x.squeeze(), t, x)
    d = data.draw(st.integers(-nd - 2, nd + 1))
    check_parity(lambda: t.squeeze(d), lambda: x.squeeze(d), t, x)
    dims = tuple(data.draw(st.lists(st.integers(-nd - 1, nd), max_size=3)))
    check_parity(lambda: t.squeeze(dims), lambda: x.squeeze(dims), t, x)
    check_parity(lambda: t.unsqueeze(d), lambda: x.unsqueeze(d), t, x)


@SETTINGS
@given(layout=layouts(), data=st.data())
def test_expand_matches_torch(layout, data):
    t, x = pair(layout)
    shape = layout[0]
    lead = data.draw(st.lists(st.integers(-1, 3), max_size=2))
    tail = [data.draw(st.sampled_from([s, -1, 3, 1, 0])) for s in shape]
    sizes = tuple(lead + tail)
    if data.draw(st.booleans()) and sizes:
        sizes = sizes[1:]  # sometimes too few sizes
    if not shape and any(s < 0 for s in sizes):
        # PyTorch copies the sizes of a 0-dim tensor's expand unchecked (-1 gives a tensor of size -1, or an
        # overflow error from numel); nbxtensor refuses a negative size. Stated difference.
        with pytest.raises(RuntimeError, match="negative dimension"):
            x.expand(sizes)
        return
    check_parity(lambda: t.expand(sizes), lambda: x.expand(sizes), t, x)
    check_parity(lambda: t.expand(*sizes), lambda: x.expand(*sizes), t, x)
    check_parity(lambda: torch.broadcast_to(t, sizes), lambda: nbx.broadcast_to(x, sizes), t, x)


@SETTINGS
@given(layout=layouts(), data=st.data())
def test_permute_transpose_movedim_match_torch(layout, data):
    t, x = pair(layout)
    nd = len(layout[0])
    perm = data.draw(st.permutations(range(nd)))
    perm = [p - nd if data.draw(st.booleans()) else p for p in perm]
    mode = data.draw(st.integers(0, 5))
    if mode == 0 and perm:
        perm = perm[:-1]  # too short
    elif mode == 1 and len(perm) >= 2:
        perm[0] = perm[1]  # repeated
    elif mode == 2:
        perm = perm + [nd]  # out of range
    check_parity(lambda: t.permute(*perm), lambda: x.permute(*perm), t, x)
    check_parity(lambda: t.permute(perm), lambda: x.permute(perm), t, x)
    d0, d1 = data.draw(st.integers(-nd - 1, nd)), data.draw(st.integers(-nd - 1, nd))
    check_parity(lambda: t.transpose(d0, d1), lambda: x.transpose(d0, d1), t, x)
    check_parity(lambda: t.t(), lambda: x.t(), t, x)
    check_parity(lambda: t.T, lambda: x.T, t, x)
    check_parity(lambda: t.mT, lambda: x.mT, t, x)
    check_parity(lambda: t.movedim(d0, d1), lambda: x.movedim(d0, d1), t, x)
    k = data.draw(st.integers(0, nd))
    src = data.draw(st.lists(st.integers(-nd, max(nd - 1, 0)), min_size=k, max_size=k))
    dst = data.draw(st.lists(st.integers(-nd, max(nd - 1, 0)), min_size=k, max_size=k))
    check_parity(lambda: t.movedim(src, dst), lambda: x.movedim(src, dst), t, x)
    check_parity(lambda: torch.movedim(t, tuple(src), tuple(dst)), lambda: nbx.movedim(x, tuple(src), tuple(dst)),
                 t, x)


@SETTINGS
@given(layout=layouts(), data=st.data())
def test_narrow_select_match_torch(layout, data):
    t, x = pair(layout)
    nd = len(layout[0])
    d = data.draw(st.integers(-nd - 1, nd))
    size = layout[0][d] if -nd <= d < nd else 2
    start = data.draw(st.integers(-size - 1, size + 1))
    length = data.draw(st.integers(-1, size + 1))
    check_parity(lambda: t.narrow(d, start, length), lambda: x.narrow(d, start, length), t, x)
    check_parity(lambda: t.select(d, start), lambda: x.select(d, start), t, x)
    check_parity(lambda: t.unbind(d), lambda: x.unbind(d), t, x)


@SETTINGS
@given(layout=layouts(), data=st.data())
def test_split_chunk_tensor_split_match_torch(layout, data):
    t, x = pair(layout)
    nd = len(layout[0])
    d = data.draw(st.integers(-nd - 1, nd))
    size = layout[0][d] if -nd <= d < nd else 2
    k = data.draw(st.integers(-1, size + 2))
    check_parity(lambda: t.split(k, d), lambda: x.split(k, d), t, x)
    sections = data.draw(st.lists(st.integers(-1, size), max_size=4))
    check_parity(lambda: t.split(sections, d), lambda: x.split(sections, d), t, x)
    check_parity(lambda: t.chunk(k, d), lambda: x.chunk(k, d), t, x)
    check_parity(lambda: t.tensor_split(k, d), lambda: x.tensor_split(k, d), t, x)
    idx = data.draw(st.lists(st.integers(-size - 2, size + 2), max_size=4))
    check_parity(lambda: t.tensor_split(idx, d), lambda: x.tensor_split(idx, d), t, x)
    check_parity(lambda: t.tensor_split(tuple(idx), dim=d), lambda: x.tensor_split(tuple(idx), dim=d), t, x)


@SETTINGS
@given(layout=layouts(), data=st.data())
def test_unfold_diagonal_match_torch(layout, data):
    t, x = pair(layout)
    nd = len(layout[0])
    d = data.draw(st.integers(-nd - 1, nd))
    size = layout[0][d] if -nd <= d < nd else 1
    win = data.draw(st.integers(-1, size + 1))
    step = data.draw(st.integers(-1, 3))
    check_parity(lambda: t.unfold(d, win, step), lambda: x.unfold(d, win, step), t, x)
    off = data.draw(st.integers(-5, 5))
    d1, d2 = data.draw(st.integers(-nd - 1, nd)), data.draw(st.integers(-nd - 1, nd))
    check_parity(lambda: t.diagonal(off, d1, d2), lambda: x.diagonal(off, d1, d2), t, x)
    check_parity(lambda: torch.diagonal(t, offset=off, dim1=d1, dim2=d2),
                 lambda: nbx.diagonal(x, offset=off, dim1=d1, dim2=d2), t, x)


@SETTINGS
@given(layout=layouts(), data=st.data())
def test_as_strided_matches_torch(layout, data):
    t, x = pair(layout)
    n = t.untyped_storage().nbytes() // 8
    nd = data.draw(st.integers(0, 3))
    size = data.draw(st.lists(st.integers(0, 4), min_size=nd, max_size=nd))
    stride = data.draw(st.lists(st.integers(0, 4), min_size=nd, max_size=nd))
    off = data.draw(st.integers(0, n + 1))
    check_parity(lambda: t.as_strided(size, stride, off), lambda: x.as_strided(size, stride, off), t, x)


def test_broadcast_tensors_and_shapes_match_torch():
    shapes = [((2, 1, 3), (4, 1)), ((), (3,)), ((0,), (1,)), ((2, 3), (3, 2)), ((1,), ()), ((5, 0), (1, 1))]
    for a, b in shapes:
        ta, tb = torch.zeros(a), torch.zeros(b)
        xa, xb = nbx.zeros(a), nbx.zeros(b)
        check_parity(lambda: torch.broadcast_tensors(ta, tb), lambda: nbx.broadcast_tensors(xa, xb))
        (rt, et), (rx, ex) = run_both(lambda: torch.broadcast_shapes(a, b), lambda: nbx.broadcast_shapes(a, b))
        assert ex == et and (et is not None or tuple(rt) == tuple(rx))
