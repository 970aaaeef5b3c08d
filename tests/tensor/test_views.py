"""Views against NumPy (hypothesis property tests): every view gives NumPy's values for the same operation, shares
the source's storage (a write through the view shows in the source), and reshape copies only where no view
exists. Layouts are random: permuted, sliced with offset, expanded with stride 0, empty.
(tests/parity/test_views_parity.py checks strides and errors against PyTorch.)"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbxtensor as nbx

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def layouts(draw, min_ndim=0, max_ndim=4, allow_expanded=True):
    """(tensor, ndarray) over the same values: a strided view of a larger base (offset, gaps, permutation,
    stride 0)."""
    ndim = draw(st.integers(min_ndim, max_ndim))
    shape = [draw(st.integers(1, 4)) for _ in range(ndim)]
    if ndim and draw(st.integers(0, 9)) == 0:
        shape[draw(st.integers(0, ndim - 1))] = 0
    order = draw(st.permutations(range(ndim)))
    strides = [0] * ndim
    acc = 1
    for d in reversed(order):
        strides[d] = acc
        acc *= max(shape[d], 1) * draw(st.integers(1, 2))
    if allow_expanded and ndim and draw(st.integers(0, 4)) == 0:
        strides[draw(st.integers(0, ndim - 1))] = 0
    offset = draw(st.integers(0, 3))
    n = offset + (sum((s - 1) * t for s, t in zip(shape, strides)) + 1 if math.prod(shape) else 1)
    x = nbx.arange(n).as_strided(shape, strides, offset)
    a = x.numpy()  # shares x's memory: writes through views of x show in it
    assert a.strides == tuple(s * 8 for s in strides)
    return x, a


def same(x, a):
    assert tuple(x.shape) == a.shape
    np.testing.assert_array_equal(x.numpy(), a)


def shares(view, src):
    return view.untyped_storage() is src.untyped_storage()


def writable(x) -> bool:
    return all(not (n > 1 and s == 0) for n, s in zip(x.shape, x.stride()))


def assert_is_view(view, src):
    """Shares storage, and a write through it shows in the source."""
    assert shares(view, src)
    if view.numel() and writable(view):
        view.fill_(-5)
        assert (view.numpy() == -5).all() and (src.numpy() == -5).any()


@SETTINGS
@given(xa=layouts(), data=st.data())
def test_reshape_and_view_match_numpy(xa, data):
    x, a = xa
    n = a.size
    divisors = [d for d in range(1, n + 1) if n % d == 0] or [0]
    first = data.draw(st.sampled_from(divisors))
    shape = (first, -1) if first else (0, 3)
    r = x.reshape(shape)
    same(r, a.reshape(shape))
    if x.is_contiguous():
        assert shares(r, x) and shares(x.view(shape), x)
    if shares(r, x):
        same(x.view(shape), a.reshape(shape))
    else:  # a copy only where no view exists
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            x.view(shape)
    same(x.reshape(-1), a.reshape(-1))
    same(x.flatten(), a.reshape(-1))


@SETTINGS
@given(xa=layouts(), data=st.data())
def test_permute_transpose_movedim_match_numpy(xa, data):
    x, a = xa
    nd = a.ndim
    perm = data.draw(st.permutations(range(nd)))
    same(x.permute(perm), a.transpose(perm))
    assert_is_view(x.permute(perm), x)
    if nd:
        same(x.permute(*perm), a.transpose(perm))
    if nd:
        d0, d1 = data.draw(st.integers(-nd, nd - 1)), data.draw(st.integers(-nd, nd - 1))
        same(x.transpose(d0, d1), np.swapaxes(a, d0, d1))
        same(x.movedim(d0, d1), np.moveaxis(a, d0, d1))
        same(nbx.swapaxes(x, d0, d1), np.swapaxes(a, d0, d1))
    same(x.T, a.T)
    if nd <= 2:
        same(x.t(), a.T)
    if nd >= 2:
        same(x.mT, np.swapaxes(a, -1, -2))


@SETTINGS
@given(xa=layouts(), data=st.data())
def test_squeeze_unsqueeze_flatten_match_numpy(xa, data):
    x, a = xa
    nd = a.ndim
    same(x.squeeze(), a.squeeze())
    d = data.draw(st.integers(-nd - 1, nd))
    same(x.unsqueeze(d), np.expand_dims(a, d))
    assert_is_view(x.unsqueeze(d), x)
    if nd:
        d = data.draw(st.integers(-nd, nd - 1))
        same(x.squeeze(d), a.squeeze(d) if a.shape[d] == 1 else a)
        s, e = sorted((data.draw(st.integers(0, nd - 1)), data.draw(st.integers(0, nd - 1))))
        same(x.flatten(s, e), a.reshape(a.shape[:s] + (-1,) + a.shape[e + 1:]) if a.size else
             a.reshape(a.shape[:s] + (math.prod(a.shape[s:e + 1]),) + a.shape[e + 1:]))
        sizes = (1, a.shape[d], 1)
        same(x.unflatten(d, sizes), a.reshape(a.shape[:d % nd] + sizes + a.shape[d % nd + 1:]))


@SETTINGS
@given(xa=layouts(min_ndim=1), data=st.data())
def test_narrow_select_split_chunk_match_numpy(xa, data):
    x, a = xa
    nd = a.ndim
    d = data.draw(st.integers(0, nd - 1))
    size = a.shape[d]
    start = data.draw(st.integers(0, size))
    length = data.draw(st.integers(0, size - start))
    idx = [slice(None)] * nd
    idx[d] = slice(start, start + length)
    same(x.narrow(d, start, length), a[tuple(idx)])
    assert_is_view(x.narrow(d, start, length), x)
    if size:
        i = data.draw(st.integers(-size, size - 1))
        same(x.select(d, i), np.take(a, i, axis=d))
        for piece, want in zip(x.unbind(d), np.moveaxis(a, d, 0)):
            same(piece, want)
        k = data.draw(st.integers(1, size + 1))
        pieces = x.split(k, d)
        want = np.split(a, list(range(k, size, k)), axis=d)
        assert len(pieces) == len(want)
        for p, w in zip(pieces, want):
            same(p, w)
            assert shares(p, x)
        c = data.draw(st.integers(1, size + 1))
        assert sum(p.shape[d] for p in x.chunk(c, d)) == size
        for p, w in zip(x.tensor_split(c, d), np.array_split(a, c, axis=d)):
            same(p, w)
        cuts = sorted(data.draw(st.lists(st.integers(0, size), max_size=3)))
        for p, w in zip(x.tensor_split(cuts, d), np.split(a, cuts, axis=d)):
            same(p, w)


@SETTINGS
@given(xa=layouts(min_ndim=2), data=st.data())
def test_diagonal_unfold_match_numpy(xa, data):
    x, a = xa
    nd = a.ndim
    d1, d2 = data.draw(st.sampled_from([(i, j) for i in range(nd) for j in range(nd) if i != j]))
    off = data.draw(st.integers(-4, 4))
    same(x.diagonal(off, d1, d2), np.diagonal(a, off, d1, d2))
    assert shares(x.diagonal(off, d1, d2), x)
    d = data.draw(st.integers(0, nd - 1))
    size = data.draw(st.integers(0, a.shape[d]))
    step = data.draw(st.integers(1, 3))
    want = np.lib.stride_tricks.sliding_window_view(a, size, axis=d)
    idx = [slice(None)] * want.ndim
    idx[d] = slice(None, None, step)
    same(x.unfold(d, size, step), want[tuple(idx)])


@SETTINGS
@given(xa=layouts(allow_expanded=False), data=st.data())
def test_expand_broadcast_match_numpy(xa, data):
    x, a = xa
    target = [data.draw(st.sampled_from([s, 3] if s == 1 else [s])) for s in a.shape]
    lead = data.draw(st.lists(st.integers(0, 3), max_size=2))
    shape = tuple(lead + target)
    e = x.expand(shape)
    if shape:
        same(x.expand(*shape), np.broadcast_to(a, shape))
    same(e, np.broadcast_to(a, shape))
    assert shares(e, x)
    assert all(st_ == 0 for n, st_, old in zip(e.shape[len(lead):], e.stride()[len(lead):], a.shape)
               if n != old)
    same(x.broadcast_to(shape), np.broadcast_to(a, shape))
    same(nbx.broadcast_to(x, shape), np.broadcast_to(a, shape))
    same(x.expand_as(nbx.empty(shape)), np.broadcast_to(a, shape))
    other = nbx.zeros(tuple(1 for _ in shape[:1]) + tuple(shape[1:]))
    bx, bo = nbx.broadcast_tensors(x, other)
    same(bx, np.broadcast_arrays(a, np.zeros(other.shape))[0])
    assert tuple(bo.shape) == tuple(bx.shape) == nbx.broadcast_shapes(x.shape, other.shape)


@SETTINGS
@given(xa=layouts(), src=st.sampled_from(["int64", "int32", "float32", "uint8", "float16"]),
       dst=st.sampled_from(["int64", "int32", "float32", "uint8", "int16", "float64", "complex128"]))
def test_view_dtype_reinterprets_bytes_like_numpy(xa, src, dst):
    x, _ = xa
    x = x.to(getattr(nbx, src))
    a = x.numpy()
    s, d = np.dtype(src), np.dtype(dst)
    try:
        got = x.view(getattr(nbx, dst))
    except RuntimeError:
        # refused only where PyTorch refuses: different itemsizes need stride(-1) == 1 and divisible sizes
        assert s.itemsize != d.itemsize
        return
    assert shares(got, x) and got.dtype is getattr(nbx, dst)
    if got.numel():
        want = np.ascontiguousarray(a).view(d) if a.ndim else a.reshape(1).view(d).reshape(())
        np.testing.assert_array_equal(got.numpy(), want.reshape(got.shape))


def test_as_strided_views_storage_with_explicit_geometry():
    x = nbx.arange(10)
    v = x.as_strided((3, 3), (1, 1), 2)
    np.testing.assert_array_equal(v.numpy(), [[2, 3, 4], [3, 4, 5], [4, 5, 6]])
    v2 = x[4:].as_strided((2,), (3,))  # offset defaults to the view's own
    np.testing.assert_array_equal(v2.numpy(), [4, 7])
    with pytest.raises(RuntimeError, match="out of bounds for storage"):
        x.as_strided((3,), (5,), 2)


def test_view_functions_are_exported_with_pytorch_names():
    for name in ("reshape", "permute", "transpose", "swapaxes", "swapdims", "squeeze", "unsqueeze", "flatten",
                 "unflatten", "narrow", "select", "unbind", "split", "chunk", "tensor_split", "movedim", "moveaxis",
                 "as_strided", "diagonal", "broadcast_to", "t"):
        assert callable(getattr(nbx, name)), name
    x = nbx.arange(6)
    assert nbx.reshape(x, (2, 3)).shape == (2, 3)
    assert nbx.numel(x) == 6 and nbx.is_tensor(x) and not nbx.is_tensor(np.zeros(2))


# -- memoised view layouts -------------------------------------------------------------------------------
def test_memoised_views_follow_the_source_layout_and_offset():
    import nbxtensor.tensor.views as V
    base = nbx.arange(24.0)
    a = base.view(4, 6)
    assert ((24,), (1,), (4, 6)) in V._LAYOUTS
    for src in (base[0:24], base[0:24]):                          # the second call is served from the memo
        v = src.view(2, 3, 4)
        assert v.shape == (2, 3, 4) and v.stride() == (12, 4, 1) and v.storage_offset() == 0
    off = nbx.arange(30.0)[6:30]                                  # same shape and strides, another offset
    v = off.view(2, 3, 4)
    assert v.storage_offset() == 6 and v[0, 0, 0].item() == 6.0
    t = a.t()                                                     # same shape request, other strides: no view
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        t.view(24)
    r = t.reshape(24)                                             # reshape copies
    np.testing.assert_array_equal(r.numpy(), a.numpy().T.reshape(24))
    assert a.view(-1, 2).shape == (12, 2) and a.view((-1, 2)).shape == (12, 2)
    assert isinstance(a.view(2, 12).shape, nbx.Size)


def test_a_tensor_used_as_a_size_is_not_memoised():
    x = nbx.arange(12.0)
    n = nbx.tensor(3)
    assert x.view(n, 4).shape == (3, 4)
    n.fill_(4)                                                    # the same object, another value
    assert x.view(n, 3).shape == (4, 3)
    assert x.view(np.int64(6), 2).shape == (6, 2) and all(type(s) is int for s in x.view(np.int64(6), 2).shape)
