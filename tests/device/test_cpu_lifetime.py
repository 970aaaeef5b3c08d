"""Foreign host memory stays alive while any NumPy view of a tensor over it does."""

import gc
import weakref

import numpy as np

import nbxtensor as nbx


def test_numpy_view_of_from_numpy_tensor_outlives_tensor_and_source():
    src = np.arange(10**6, dtype=np.int64)
    ref = weakref.ref(src)
    view = nbx.from_numpy(src).numpy()
    del src
    gc.collect()
    assert ref() is not None  # the view keeps the source array alive
    assert int(view.sum()) == (10**6 - 1) * 10**6 // 2
    del view
    gc.collect()
    assert ref() is None  # and releases it afterwards


def test_strided_view_keeps_owner():
    src = np.arange(24.0).reshape(4, 6)[:, ::2]
    ref = weakref.ref(src.base)
    view = nbx.from_numpy(src).t().numpy()
    del src
    gc.collect()
    assert ref() is not None
    np.testing.assert_array_equal(view, np.arange(24.0).reshape(4, 6)[:, ::2].T)
