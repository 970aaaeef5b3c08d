"""Tensor methods: conversions (to, float/half/...), contiguous/clone layouts, copy_ (dtype conversion, broadcast,
overlap rules), fill_/zero_, item/tolist/numpy, Python conversions, and the metadata."""

from __future__ import annotations

import pickle

import ml_dtypes
import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.tensor.core import is_non_overlapping_and_dense, overlap_status


# -- metadata ----------------------------------------------------------------------------------------------------
def test_metadata_of_a_view():
    base = nbx.zeros(4, 6, dtype=nbx.float16)
    x = base[1:, ::2].t()
    assert x.shape == (3, 3) and x.size() == nbx.Size([3, 3]) and x.size(-1) == 3 and x.size(0) == 3
    assert x.stride() == (2, 6) and x.stride(1) == 6 and x.storage_offset() == 6
    assert x.numel() == x.nelement() == 9 and x.nbytes == 18 and x.element_size() == x.itemsize == 2
    assert x.dim() == x.ndim == 2 and not x.is_contiguous() and x.dtype is nbx.float16
    assert x.device == nbx.device("cpu") and x.is_cpu and not x.is_cuda
    assert x.data_ptr() == base.data_ptr() + 6 * 2
    assert x.is_floating_point() and not x.is_complex() and nbx.zeros(1, dtype=nbx.cfloat).is_complex()
    assert not x.requires_grad and x.grad is None and x.untyped_storage() is base.untyped_storage()
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.size(2)
    with pytest.raises(IndexError, match="no dimensions"):
        nbx.tensor(1.0).stride(0)


def test_size_behaves_like_torch_size():
    s = nbx.zeros(2, 3).shape
    assert isinstance(s, tuple) and s == (2, 3) and s.numel() == 6 and repr(s) == "nbx.Size([2, 3])"


def test_python_protocols():
    x = nbx.arange(6).view(2, 3)
    assert len(x) == 2 and [r.tolist() for r in x] == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(TypeError, match="len"):
        len(nbx.tensor(1))
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(nbx.tensor(1))
    assert hash(x) != hash(x.view(6)) and {x: 1}[x] == 1
    assert int(nbx.tensor(2.7)) == 2 and float(nbx.tensor(3)) == 3.0 and complex(nbx.tensor(1.5)) == 1.5 + 0j
    assert int(nbx.tensor(1 + 0j)) == 1
    with pytest.raises(RuntimeError, match="cannot be converted"):
        int(nbx.tensor(1 + 2j))
    with pytest.raises(RuntimeError, match="cannot be converted"):
        float(nbx.tensor(1 + 2j))
    assert bool(nbx.tensor([0.5])) and not bool(nbx.tensor(0))
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        bool(nbx.zeros(2))
    with pytest.raises(RuntimeError, match="no values is ambiguous"):
        bool(nbx.zeros(0))
    assert [10, 20, 30][nbx.tensor(2)] == 30 and [1, 2][nbx.tensor([1])] == 2
    with pytest.raises(TypeError, match="integer tensors of a single element"):
        [1, 2][nbx.tensor(1.0)]
    assert format(nbx.tensor(2.5), ".2f") == "2.50" and f"{nbx.tensor([1.0])}" == "tensor([1.])"
    with pytest.raises(TypeError, match="unsupported format string"):
        format(nbx.tensor([2.5]), ".2f")


# -- item / tolist / numpy ------------------------------------------------------------------------------------------
def test_item_gives_python_numbers_of_the_exact_value():
    assert nbx.tensor(1.1, dtype=nbx.float16).item() == 1.099609375
    assert nbx.tensor(1.1, dtype=nbx.bfloat16).item() == 1.1015625
    assert nbx.tensor(500.0, dtype=nbx.float8_e4m3fn).item() == 448.0
    assert type(nbx.tensor(True).item()) is bool and type(nbx.tensor(1, dtype=nbx.uint8).item()) is int
    assert nbx.tensor(1 + 2j).item() == 1 + 2j and nbx.tensor(2 ** 63 - 1).item() == 2 ** 63 - 1
    assert nbx.tensor([[7]]).item() == 7 and nbx.arange(5)[3].item() == 3
    with pytest.raises(RuntimeError, match="a Tensor with 2 elements cannot be converted to Scalar"):
        nbx.zeros(2).item()


def test_tolist():
    assert nbx.tensor([[1.5, 2]], dtype=nbx.float16).tolist() == [[1.5, 2.0]]
    assert nbx.tensor(3).tolist() == 3 and nbx.zeros(0, 2).tolist() == [] and nbx.tensor([1 + 1j]).tolist() == [1 + 1j]
    assert nbx.arange(6).view(2, 3).t().tolist() == [[0, 3], [1, 4], [2, 5]]
    assert nbx.tensor([0.1], dtype=nbx.bfloat16).tolist() == [0.10009765625]
    assert all(type(v) is float for v in nbx.tensor([1, 2], dtype=nbx.float8_e5m2).tolist())


def test_numpy_shares_memory_and_keeps_layout():
    x = nbx.arange(12, dtype=nbx.float32).view(3, 4)[:, 1::2]
    a = x.numpy()
    assert a.shape == (3, 2) and a.strides == (16, 8) and a.dtype == np.float32
    a[0, 0] = -1
    assert x[0, 0].item() == -1.0
    assert np.asarray(x) is not None and np.asarray(x).tolist() == x.tolist()
    assert np.array(x, dtype=np.float64).dtype == np.float64
    assert nbx.zeros(2, dtype=nbx.bfloat16).numpy().dtype == ml_dtypes.bfloat16  # ml_dtypes arrays (PyTorch raises)
    assert nbx.zeros(2, dtype=nbx.float8_e4m3fn).numpy().dtype == ml_dtypes.float8_e4m3fn
    assert nbx.zeros(0, 3).numpy().shape == (0, 3)
    assert nbx.tensor(2.0).numpy(force=True).shape == ()


# -- to / dtype shortcuts -------------------------------------------------------------------------------------------
def test_to_forms_and_identity():
    x = nbx.zeros(2, 3)
    assert x.to(nbx.float32) is x and x.to("cpu") is x and x.to(x) is x and x.float() is x
    assert x.to(nbx.float32, copy=True) is not x and x.to(nbx.float32, False, True) is not x
    assert x.to(nbx.float64).dtype is nbx.float64 and x.to("cpu", nbx.int8).dtype is nbx.int8
    assert x.to(dtype=nbx.int8, device="cpu").dtype is nbx.int8 and x.to(np.float16).dtype is nbx.float16
    assert x.to(nbx.zeros(1, dtype=nbx.int16)).dtype is nbx.int16 and x.to("half").dtype is nbx.float16
    assert x.type() == "nbx.FloatTensor" and x.type(nbx.int32).dtype is nbx.int32
    assert nbx.zeros(1, dtype=nbx.uint8).type() == "nbx.ByteTensor"
    with pytest.raises(TypeError, match="expected a dtype, a device or a tensor"):
        x.to(3.5)
    with pytest.raises(RuntimeError, match="Invalid device string"):
        x.to("foo")
    assert x.cpu() is x and x.detach() is not x and x.detach().untyped_storage() is x.untyped_storage()
    assert x.requires_grad_(False) is x
    with pytest.raises(RuntimeError, match="no autograd"):
        x.requires_grad_()


@pytest.mark.parametrize("method,dtype", [("float", nbx.float32), ("half", nbx.float16), ("bfloat16", nbx.bfloat16),
                                          ("double", nbx.float64), ("int", nbx.int32), ("long", nbx.int64),
                                          ("short", nbx.int16), ("char", nbx.int8), ("byte", nbx.uint8),
                                          ("bool", nbx.bool), ("cfloat", nbx.complex64),
                                          ("cdouble", nbx.complex128)])
def test_dtype_shortcuts_convert_by_the_cast_rules(method, dtype):
    x = nbx.tensor([-1.5, 0.0, 2.75, 300.0])
    y = getattr(x, method)()
    assert y.dtype is dtype and y.shape == x.shape
    want = nbx.dtypes.casting.cast_array(x.numpy(), nbx.float32, dtype)
    np.testing.assert_array_equal(y.numpy(), want)


def test_clone_and_to_preserve_dense_layouts_like_pytorch():
    """preserve_format: a non-overlapping, dense tensor keeps its strides; any other gets row-major strides."""
    t = nbx.arange(24.0).view(2, 3, 4).permute(2, 0, 1)
    for c in (t.clone(), t.double(), t.to(nbx.float32, copy=True), nbx.empty_like(t), nbx.zeros_like(t),
              nbx.full_like(t, 2)):
        assert c.stride() == t.stride() and c.untyped_storage() is not t.untyped_storage()
    np.testing.assert_array_equal(t.clone().numpy(), t.numpy())
    sliced = nbx.arange(12.0).view(3, 4)[:, ::2]
    assert sliced.clone().stride() == (2, 1) and nbx.zeros(3, 1).expand(3, 4).clone().stride() == (4, 1)
    assert t.clone(memory_format="contiguous_format").is_contiguous()
    assert t.contiguous().is_contiguous() and t.contiguous().stride() == (6, 3, 1)
    c = nbx.zeros(2, 3)
    assert c.contiguous() is c
    with pytest.raises(RuntimeError, match="channels_last"):
        t.clone(memory_format="channels_last")
    # a reshape that cannot be a view copies into row-major memory, so it succeeds even from a transposed clone
    assert t.clone().reshape(-1).tolist() == t.contiguous().view(-1).tolist()


def test_non_overlapping_and_dense():
    assert is_non_overlapping_and_dense((2, 3), (1, 2)) and is_non_overlapping_and_dense((3, 1), (1, 7))
    assert not is_non_overlapping_and_dense((2, 3), (4, 1)) and not is_non_overlapping_and_dense((3,), (0,))
    assert is_non_overlapping_and_dense((), ()) and is_non_overlapping_and_dense((1,), (5,))


# -- copy_ / fill_ / zero_ -------------------------------------------------------------------------------------------
def test_copy_converts_and_broadcasts():
    y = nbx.zeros(2, 3, dtype=nbx.uint8)
    y.copy_(nbx.tensor([1.9, 250.0, 300.0]))
    assert y.tolist() == [[1, 250, 255], [1, 250, 255]]  # truncation; 300.0 saturates (nbxtensor's rule)
    z = nbx.zeros(2, 2, dtype=nbx.float16)
    z.copy_(nbx.tensor([[1], [2]], dtype=nbx.int64))
    assert z.tolist() == [[1.0, 1.0], [2.0, 2.0]]
    w = nbx.zeros(3, 2).t()
    assert w.copy_(nbx.arange(6).view(2, 3)) is w and w.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    s = nbx.zeros(())
    s.copy_(nbx.tensor(4.0))
    assert s.item() == 4.0
    for dst, src in ((nbx.zeros(()), nbx.tensor([4.0])), (nbx.zeros(3), nbx.zeros(1, 3))):
        with pytest.raises(RuntimeError):  # the source may not add dims (PyTorch: "doesn't match the broadcast shape")
            dst.copy_(src)


def test_copy_errors():
    y = nbx.zeros(2, 3)
    with pytest.raises(RuntimeError, match="cannot be broadcast|must match"):
        y.copy_(nbx.zeros(2, 2))
    with pytest.raises(TypeError, match="must be Tensor"):
        y.copy_([1, 2, 3])
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        nbx.zeros(3).expand(2, 3).copy_(nbx.ones(2, 3))


def test_copy_overlap_rules_follow_aten():
    a = nbx.arange(4.0)
    a[:2].copy_(a[2:])  # disjoint halves of one storage: fine
    assert a.tolist() == [2.0, 3.0, 2.0, 3.0]
    assert a.copy_(a) is a and a.copy_(a.view(4)) is a  # the same memory: a no-op
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor"):
        a[1:].copy_(a[:3])
    m = a.view(2, 2)
    with pytest.raises(RuntimeError, match="some elements"):
        m.copy_(m.t())
    assert overlap_status(a[:2], a[2:]) == "no" and overlap_status(a, a.view(4)) == "full"
    assert overlap_status(a[::2], a[1::2]) == "too_hard"  # not dense: not checked, as PyTorch
    arr = np.arange(4.0)
    assert overlap_status(nbx.from_numpy(arr), nbx.from_numpy(arr[1:])) == "partial"  # separate wrappers


def test_fill_and_zero():
    x = nbx.zeros(2, 2, dtype=nbx.int8)
    assert x.fill_(-3) is x and x.tolist() == [[-3, -3], [-3, -3]]
    assert x.zero_() is x and x.tolist() == [[0, 0], [0, 0]]
    x.t()[0].fill_(5)
    assert x.tolist() == [[5, 0], [5, 0]]
    with pytest.raises(RuntimeError, match="value cannot be converted to type int8 without overflow"):
        x.fill_(128)
    with pytest.raises(TypeError, match="must be a number"):
        x.fill_("1")
    with pytest.raises(RuntimeError, match="0-dimension value tensor"):
        x.fill_(nbx.tensor([1]))
    u = nbx.zeros(2, dtype=nbx.uint8)
    assert u.fill_(nbx.tensor(300)).tolist() == [44, 44]  # a 0-dim tensor converts like a copy (PyTorch: 44)
    assert nbx.zeros(3, dtype=nbx.float16).fill_(np.float32(0.5)).tolist() == [0.5] * 3
    with pytest.raises(RuntimeError, match="more than one element"):
        nbx.zeros(3).expand(2, 3).zero_()


# -- pickle ------------------------------------------------------------------------------------------------------
def test_pickle_round_trip():
    for x in (nbx.arange(6).view(2, 3).t(), nbx.tensor([1.5], dtype=nbx.bfloat16), nbx.zeros(0, 2, dtype=nbx.bool)):
        y = pickle.loads(pickle.dumps(x))
        assert y.dtype is x.dtype and y.shape == x.shape and y.tolist() == x.tolist()


# -- host fast paths: memoised layouts, C-level accessors -------------------------------------------------
def test_new_empty_memoises_layouts_and_keeps_python_ints():
    from nbxtensor.tensor.core import new_empty
    a = new_empty((np.int64(2), 3), nbx.float32, nbx.device("cpu"))
    b = new_empty((2, 3), nbx.float32, nbx.device("cpu"))
    assert a.shape == b.shape == (2, 3) and a.stride() == b.stride() == (3, 1)
    assert all(type(s) is int for s in b.shape) and isinstance(b.shape, nbx.Size)
    with pytest.raises(RuntimeError, match="negative dimension -1"):
        new_empty((2, -1), nbx.float32, nbx.device("cpu"))


def test_is_contiguous_and_dim_accessors_on_every_layout():
    x = nbx.empty(2, 3, 4)
    assert x.is_contiguous() and not x.transpose(0, 2).is_contiguous() and x[:, :1].is_contiguous() is False
    assert x[:, 1:2, :].squeeze(1).is_contiguous() is False and x[1].is_contiguous()
    assert x.size(-1) == 4 and x.size(0) == 2 and x.stride(-3) == 12 and x.stride(np.int64(1)) == 4
    with pytest.raises(IndexError, match="Dimension out of range"):
        x.size(3)
    with pytest.raises(TypeError, match="must be int, not bool"):
        x.stride(True)
    with pytest.raises(IndexError, match="no dimensions"):
        nbx.tensor(1.0).size(0)
    assert x.dtype is nbx.float32 and x.device == nbx.device("cpu") and x.shape == (2, 3, 4)
