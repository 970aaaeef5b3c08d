"""The cpu device: 64-byte aligned host buffers, accounting of bytes in use and the peak, byte movement, read-only
storages, and wrapping foreign host memory."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.device import cpu
from nbxtensor.device.base import Storage, backend_for


def test_backend_is_registered_for_cpu():
    assert backend_for(nbx.device("cpu")) is cpu.cpu_backend
    assert cpu.cpu_backend.canonical(nbx.device("cpu:0")) == nbx.device("cpu")


@pytest.mark.parametrize("nbytes", [0, 1, 3, 63, 64, 65, 4096, 10 ** 6 + 7])
def test_allocations_are_64_byte_aligned(nbytes):
    st = cpu.cpu_backend.allocate(nbytes)
    assert isinstance(st, Storage) and st.nbytes == nbytes and st.ptr % cpu.ALIGNMENT == 0
    assert st.handle.nbytes == nbytes and (nbytes == 0 or st.handle.ctypes.data == st.ptr)
    assert st.device == nbx.device("cpu") and not st.readonly


def test_tensors_are_aligned_too():
    for shape in [(1,), (3, 5), (0,), (1000,)]:
        for dt in (nbx.float32, nbx.int8, nbx.complex128):
            assert nbx.empty(shape, dtype=dt).data_ptr() % 64 == 0


def test_accounting_of_bytes_in_use_and_peak():
    gc.collect()
    base = cpu.memory_allocated()
    cpu.reset_peak_memory_stats()
    assert cpu.max_memory_allocated() == base
    a = nbx.empty(1000, dtype=nbx.uint8)
    b = nbx.empty(250, dtype=nbx.float32)
    assert cpu.memory_allocated() == base + 2000
    del a
    gc.collect()
    assert cpu.memory_allocated() == base + 1000
    assert cpu.max_memory_allocated() == base + 2000
    cpu.reset_peak_memory_stats()
    assert cpu.max_memory_allocated() == base + 1000
    del b
    gc.collect()
    assert cpu.memory_allocated() == base


def test_memory_stays_accounted_while_a_numpy_view_lives():
    gc.collect()
    base = cpu.memory_allocated()
    t = nbx.zeros(512, dtype=nbx.float64)
    view = t.numpy()
    del t
    gc.collect()
    assert cpu.memory_allocated() == base + 4096  # the bytes are still in use through the view
    view[:] = 1.0
    del view
    gc.collect()
    assert cpu.memory_allocated() == base


def test_views_do_not_allocate():
    gc.collect()
    t = nbx.zeros(4, 6)
    before = cpu.memory_allocated()
    v = t.t()[1:, ::2].unsqueeze(0).expand(3, 5, 2)
    assert cpu.memory_allocated() == before and v.untyped_storage() is t.untyped_storage()


def test_write_read_copy_bytes():
    be = cpu.cpu_backend
    a, b = be.allocate(16), be.allocate(16)
    be.write(a, 4, np.arange(8, dtype=np.uint8))
    assert be.read(a, 4, 8).tolist() == list(range(8))
    r = be.read(a, 4, 8)
    r[0] = 99  # a copy
    assert be.read(a, 4, 1).tolist() == [0]
    be.copy(b, 0, a, 4, 8)
    assert be.read(b, 0, 8).tolist() == list(range(8))
    be.write(b, 8, np.array([1.0], dtype=np.float64))  # any dtype: written as its bytes
    assert be.read(b, 8, 8).view(np.float64).tolist() == [1.0]
    be.synchronize(nbx.device("cpu"))


def test_allocate_refuses_bad_sizes():
    for bad in (-1, 1.5, "8"):
        with pytest.raises(ValueError, match="non-negative int"):
            cpu.cpu_backend.allocate(bad)


def test_readonly_storage_refuses_writes():
    arr = np.arange(6, dtype=np.int32)
    arr.flags.writeable = False
    st, off = cpu.wrap_host_array(arr)
    assert st.readonly and off == 0
    with pytest.raises(RuntimeError, match="read-only"):
        cpu.cpu_backend.write(st, 0, np.zeros(4, dtype=np.uint8))
    with pytest.raises(RuntimeError, match="read-only"):
        cpu.cpu_backend.copy(st, 0, cpu.cpu_backend.allocate(4), 0, 4)


def test_wrap_host_array_spans_exactly_the_touched_bytes():
    base = np.arange(40, dtype=np.int64).reshape(5, 8)
    for view in (base, base[1:4, 2:7:2], base.T, base[::-1, ::-2], base[2:3, :1]):
        st, off = cpu.wrap_host_array(view)
        lo = sum((n - 1) * s for n, s in zip(view.shape, view.strides) if s < 0)
        assert st.ptr == view.ctypes.data + sum((n - 1) * s for n, s in zip(view.shape, view.strides) if s < 0)
        assert st.nbytes == sum((n - 1) * abs(s) for n, s in zip(view.shape, view.strides)) + 8
        assert off == -lo // 8
        assert st.owner is view  # kept alive as long as the storage
    empty, off = cpu.wrap_host_array(np.zeros((0, 3)))
    assert empty.nbytes == 0 and off == 0


def test_wrap_host_array_refuses_unaligned_strides():
    raw = np.zeros(64, dtype=np.uint8)
    odd = np.ndarray((3,), dtype=np.int32, buffer=raw, offset=0, strides=(6,))
    with pytest.raises(ValueError, match="not multiples of the itemsize"):
        cpu.wrap_host_array(odd)


class _HostBackedBackend:
    """A stand-in device type ("xpu") whose memory is host memory reached only through the Backend protocol."""

    type = "xpu"

    def canonical(self, dev):
        return nbx.device("xpu", dev.index or 0)

    def allocate(self, nbytes, dev=None):
        buf = np.zeros(nbytes, dtype=np.uint8)
        return Storage(self.canonical(dev or nbx.device("xpu")), nbytes, 0x1000, buf, self)

    def write(self, dst, offset, src):
        dst.handle[offset:offset + src.nbytes] = src.reshape(-1).view(np.uint8)

    def read(self, src, offset, nbytes):
        return src.handle[offset:offset + nbytes].copy()

    def copy(self, dst, dst_offset, src, src_offset, nbytes):
        dst.handle[dst_offset:dst_offset + nbytes] = src.handle[src_offset:src_offset + nbytes]

    def synchronize(self, dev):
        return None


def test_a_new_device_type_plugs_in_without_changing_tensor():
    from nbxtensor.device import base
    base.register_backend(_HostBackedBackend())
    try:
        x = nbx.arange(6, dtype=nbx.float32).to("xpu")
        assert x.device == nbx.device("xpu:0") and not x.is_cpu
        v = x.view(2, 3).t()[1:]
        assert v.tolist() == [[1.0, 4.0], [2.0, 5.0]]
        assert repr(v) == "tensor([[1., 4.],\n        [2., 5.]], device='xpu:0')"
        a = v.numpy()  # a non-CPU tensor: numpy() copies (PyTorch raises; stated difference)
        a[0, 0] = 99
        assert v.tolist()[0][0] == 1.0
        v.fill_(7)
        v[0, 0] = 8.0
        assert x.cpu().tolist() == [0.0, 8.0, 7.0, 3.0, 7.0, 7.0]
        y = nbx.zeros(2, 3, device="xpu", dtype=nbx.float16)
        y.copy_(nbx.tensor([1, 2, 3]))  # across devices, converting and broadcasting
        assert y.to("cpu").tolist() == [[1.0, 2.0, 3.0]] * 2
        assert nbx.tensor([[1.5]], device="xpu").item() == 1.5
    finally:
        del base._BACKENDS["xpu"]
