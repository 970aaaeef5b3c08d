"""DLPack both ways (src/nbxtensor/tensor/dlpack.py): NumPy round trips over every dtype NumPy exchanges, strided
views, 0-dim and zero-size, read-only both ways, zero-copy, capsule consumption and lifetimes, legacy versus
versioned capsules, and (marked ``parity``) exchange with PyTorch on CPU."""

import ctypes
import gc
import weakref

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.device.cpu import cpu_backend, memory_allocated
from nbxtensor.dtypes import DTYPES
from nbxtensor.tensor import dlpack as D

# Every dtype of the table NumPy's DLPack exchanges (NumPy refuses bfloat16 and float8: tested separately).
NUMPY_DLPACK = ["bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "float16",
                "float32", "float64", "complex64", "complex128"]
ML_ONLY = ["bfloat16", "float8_e4m3fn", "float8_e5m2"]
assert sorted(NUMPY_DLPACK + ML_ONLY) == sorted(d.name for d in DTYPES)


def values(name, shape, seed=0):
    """Distinct values of numpy dtype ``name`` (ml_dtypes for bfloat16 / float8)."""
    rng = np.random.default_rng(seed)
    dt = nbx.dtypes.dtype_from(name).numpy
    n = int(np.prod(shape))
    if name == "bool":
        a = rng.integers(0, 2, n).astype(bool)
    elif dt.kind in "iu":
        a = rng.integers(0, 100, n).astype(dt)
    elif dt.kind == "c":
        a = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dt)
    else:
        a = rng.standard_normal(n).astype(np.float32).astype(dt)
    return a.reshape(shape)


def peek(capsule):
    """The fields of an unconsumed capsule (read, not consumed): name, version, flags, data, shape, strides, ..."""
    name = D._PyCapsule_GetName(capsule)
    ptr = D._PyCapsule_GetPointer(capsule, D._NAME_ADDR[name])
    versioned = name == b"dltensor_versioned"
    m = (D.DLManagedTensorVersioned if versioned else D.DLManagedTensor).from_address(ptr)
    dl = m.dl_tensor
    info = {"name": name.decode(), "struct": m, "data": dl.data or 0, "byte_offset": dl.byte_offset,
            "device": (dl.device.device_type, dl.device.device_id), "dtype": (dl.dtype.code, dl.dtype.bits,
                                                                              dl.dtype.lanes),
            "shape": D._read_i64(dl.shape, dl.ndim),
            "strides": D._read_i64(dl.strides, dl.ndim) if dl.strides else None}
    if versioned:
        info["version"] = (m.version.major, m.version.minor)
        info["flags"] = m.flags
    return info


def readonly_array(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


# -- the C structs ------------------------------------------------------------------------------------------
def test_struct_layouts_match_dlpack_h():
    # dlpack.h on 64-bit platforms: DLTensor 48 bytes, DLManagedTensor 64, DLManagedTensorVersioned 80 with the
    # DLTensor at byte 32 (version 8, manager_ctx 8, deleter 8, flags 8).
    assert ctypes.sizeof(D.DLTensor) == 48
    assert ctypes.sizeof(D.DLManagedTensor) == 64
    assert ctypes.sizeof(D.DLManagedTensorVersioned) == 80
    assert D.DLManagedTensorVersioned.dl_tensor.offset == 32
    assert D.DLManagedTensorVersioned.flags.offset == 24
    assert D.DLTensor.byte_offset.offset == 40


def test_dlpack_device():
    t = nbx.zeros(3)
    assert t.__dlpack_device__() == (1, 0)
    assert t.__dlpack_device__()[0] is D.DLDeviceType.kDLCPU
    assert np.from_dlpack(t).device == "cpu"


# -- dtypes ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", NUMPY_DLPACK)
def test_numpy_round_trip_every_dtype(name):
    a = values(name, (3, 4))
    t = nbx.from_dlpack(a)
    assert t.dtype is nbx.dtypes.dtype_from(name)
    assert t.shape == (3, 4) and t.stride() == (4, 1)
    assert t.data_ptr() == a.ctypes.data  # zero-copy
    np.testing.assert_array_equal(t.numpy(), a)
    b = np.from_dlpack(t)
    assert b.dtype == a.dtype and b.ctypes.data == a.ctypes.data
    np.testing.assert_array_equal(b, a)
    # The capsule carries the table's DLPack code.
    info = peek(t.__dlpack__(max_version=(1, 0)))
    assert info["dtype"] == (*t.dtype.dlpack, 1)


@pytest.mark.parametrize("name", ML_ONLY)
def test_bfloat16_float8_export_codes_and_numpy_refusal(name):
    dt = nbx.dtypes.dtype_from(name)
    a = values(name, (5,))
    t = nbx.from_numpy(a)
    info = peek(t.__dlpack__(max_version=(1, 1)))
    assert info["dtype"] == (*dt.dlpack, 1)  # kDLBfloat 4, kDLFloat8_e4m3fn 10, kDLFloat8_e5m2 12 (dlpack.h 1.1)
    # Our own consumer reads them: nbx -> nbx is zero-copy for every dtype.
    u = nbx.from_dlpack(t)
    assert u.dtype is dt and u.data_ptr() == t.data_ptr()
    np.testing.assert_array_equal(u.numpy().view(np.uint8), a.view(np.uint8))
    # NumPy 2.x has no bfloat16/float8 in DLPack: importing ours raises NumPy's own error, intact (not a
    # SystemError from our capsule's cleanup), and exporting an ml_dtypes array raises BufferError.
    live = D._live_exports()
    with pytest.raises((RuntimeError, BufferError), match="Unsupported dtype"):  # NumPy 2.4 RuntimeError, 2.5 BufferError
        np.from_dlpack(t)
    gc.collect()
    assert D._live_exports() == live  # the refused capsule's manager was freed
    with pytest.raises(BufferError):
        nbx.from_dlpack(a)


# -- views -------------------------------------------------------------------------------------------------
def _views(t):
    return {
        "transposed": t.t(),
        "sliced_offset": t[1:, 2:5],
        "strided": t[::2, ::3],
        "expanded": t[1].unsqueeze(0).expand(4, 6),
        "column": t[:, 3],
        "permuted_3d": t.view(2, 2, 6).permute(2, 0, 1),
    }


@pytest.mark.parametrize("kind", ["transposed", "sliced_offset", "strided", "expanded", "column", "permuted_3d"])
def test_export_views_keep_strides_and_offset(kind):
    base = nbx.arange(24, dtype=nbx.float32).view(4, 6)
    v = _views(base)[kind]
    info = peek(v.__dlpack__(max_version=(1, 0)))
    assert info["shape"] == tuple(v.shape) and info["strides"] == v.stride()
    assert info["data"] + info["byte_offset"] == v.data_ptr()
    b = np.from_dlpack(v)
    assert b.strides == tuple(s * 4 for s in v.stride())
    assert b.ctypes.data == v.data_ptr()
    np.testing.assert_array_equal(b, v.numpy())
    if kind != "expanded":  # NumPy marks its own stride-0 import writable too; writing a broadcast is racy
        b[(0,) * b.ndim] = -1.0
        assert v[(0,) * v.ndim].item() == -1.0  # a write through NumPy is seen here


def test_import_numpy_views():
    base = np.arange(24.0).reshape(4, 6)
    views = {
        "transposed": base.T,
        "sliced_offset": base[1:, 2:5],
        "strided": base[::2, ::3],
        "expanded": np.lib.stride_tricks.as_strided(base[1], shape=(4, 6), strides=(0, 8)),
        "permuted_3d": base.reshape(2, 2, 6).transpose(2, 0, 1),
    }
    for kind, a in views.items():
        t = nbx.from_dlpack(a)
        assert t.stride() == tuple(s // 8 for s in a.strides), kind
        assert t.data_ptr() == a.ctypes.data, kind
        np.testing.assert_array_equal(t.numpy(), a)
    t = nbx.from_dlpack(views["sliced_offset"])
    t[0, 0] = 100.0
    assert base[1, 2] == 100.0  # a write here is seen through NumPy


def test_import_negative_strides_raises_and_leaves_capsule_to_producer():
    a = np.arange(5.0)
    r = a[::-1]
    wr = weakref.ref(a)
    with pytest.raises(BufferError, match="negative strides"):
        nbx.from_dlpack(r)
    del a, r
    gc.collect()
    assert wr() is None  # NumPy's own capsule destructor freed it: we did not take ownership


def test_zero_dim_and_zero_size():
    for a in (np.array(3.5), np.zeros((0, 3)), np.zeros((2, 0, 4), np.int32), np.zeros(0, bool)):
        t = nbx.from_dlpack(a)
        assert t.shape == a.shape and t.dtype is nbx.dtypes.dtype_from(a.dtype)
        np.testing.assert_array_equal(t.numpy(), a)
        b = np.from_dlpack(t)
        assert b.shape == a.shape and b.dtype == a.dtype
        np.testing.assert_array_equal(b, a)
    t = nbx.tensor(7, dtype=nbx.int16)
    b = np.from_dlpack(t)
    b[()] = 9
    assert t.item() == 9
    info = peek(nbx.empty(0, 5).__dlpack__())
    assert info["shape"] == (0, 5)


# -- zero-copy, read-only ----------------------------------------------------------------------------------
def test_zero_copy_both_ways():
    a = np.zeros((2, 3), np.float32)
    t = nbx.from_dlpack(a)
    a[1, 2] = 5.0
    assert t[1, 2].item() == 5.0
    t.fill_(2.0)
    assert (a == 2.0).all()
    u = nbx.arange(6, dtype=nbx.int64)
    b = np.from_dlpack(u)
    u[3] = -7
    assert b[3] == -7
    b[0] = 42
    assert u[0].item() == 42


def test_readonly_numpy_imports_readonly():
    a = readonly_array(np.arange(4.0))
    t = nbx.from_dlpack(a)
    assert t.is_readonly and t.data_ptr() == a.ctypes.data
    for write in (lambda: t.fill_(1.0), lambda: t.__setitem__(0, 1.0), lambda: t.copy_(nbx.ones(4, dtype=nbx.float64)),
                  lambda: t[1:].zero_()):
        with pytest.raises(RuntimeError, match="read-only"):
            write()
    np.testing.assert_array_equal(a, [0, 1, 2, 3])
    assert t.clone().is_readonly is False
    # copy=True asks NumPy for a writable copy
    c = nbx.from_dlpack(a, copy=True)
    assert not c.is_readonly and c.data_ptr() != a.ctypes.data
    c.fill_(9.0)
    np.testing.assert_array_equal(a, [0, 1, 2, 3])


def test_readonly_tensor_exports_flag_and_refuses_legacy():
    t = nbx.from_numpy(readonly_array(np.arange(3.0)))
    assert t.is_readonly
    info = peek(t.__dlpack__(max_version=(1, 0)))
    assert info["flags"] & D.DLPACK_FLAG_BITMASK_READ_ONLY
    assert not info["flags"] & D.DLPACK_FLAG_BITMASK_IS_COPIED
    b = np.from_dlpack(t)  # NumPy asks for a versioned capsule and honours the flag
    assert not b.flags.writeable
    np.testing.assert_array_equal(b, [0, 1, 2])
    assert nbx.from_dlpack(t).is_readonly  # and so do we
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__()
    with pytest.raises(BufferError, match="read-only"):
        D.to_dlpack(t)
    # A copy is writable memory: the legacy capsule is allowed then.
    cap = t.__dlpack__(copy=True)
    u = nbx.from_dlpack(cap)
    assert not u.is_readonly and u.data_ptr() != t.data_ptr()
    np.testing.assert_array_equal(u.numpy(), [0, 1, 2])


# -- the capsule: names, versions, copies, devices, streams -------------------------------------------------
def test_legacy_versus_versioned_selection():
    t = nbx.arange(4)
    assert peek(t.__dlpack__())["name"] == "dltensor"
    assert peek(t.__dlpack__(max_version=None))["name"] == "dltensor"
    assert peek(t.__dlpack__(max_version=(0, 8)))["name"] == "dltensor"
    for asked, stamped in [((1, 0), (1, 0)), ((1, 1), (1, 1)), ((1, 7), (1, 1)), ((2, 3), (1, 1))]:
        info = peek(t.__dlpack__(max_version=asked))
        assert info["name"] == "dltensor_versioned" and info["version"] == stamped, asked
        assert info["flags"] == 0
    for bad in ((1,), [1, 0], (1.0, 0), "1.0"):
        with pytest.raises(TypeError, match="max_version"):
            t.__dlpack__(max_version=bad)
    with pytest.raises(TypeError):
        t.__dlpack__(unknown_keyword=1)  # consumers rely on TypeError to fall back


def test_export_copy_and_dl_device():
    t = nbx.arange(6, dtype=nbx.float32).view(2, 3).t()
    info = peek(t.__dlpack__(max_version=(1, 0), copy=True))
    assert info["flags"] == D.DLPACK_FLAG_BITMASK_IS_COPIED and info["data"] != t.data_ptr()
    c = np.from_dlpack(nbx.from_dlpack(t.__dlpack__(max_version=(1, 0), copy=True)))
    c[0, 0] = 50.0
    assert t[0, 0].item() == 0.0  # a copy does not share
    np.testing.assert_array_equal(np.from_dlpack(t), t.numpy())
    assert peek(t.__dlpack__(copy=False, dl_device=(1, 0)))["data"] == t.data_ptr()
    assert peek(t.__dlpack__(dl_device=(D.DLDeviceType.kDLCPU, 0)))["data"] == t.data_ptr()
    with pytest.raises(BufferError, match="copy=False"):
        t.__dlpack__(dl_device=(2, 0), copy=False)
    with pytest.raises(BufferError, match="not supported"):
        t.__dlpack__(dl_device=(4, 0))
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(1, 3))
    with pytest.raises(TypeError, match="copy"):
        t.__dlpack__(copy="yes")


def test_export_to_cuda_without_cuda_is_buffer_error():
    cuda = getattr(nbx, "cuda", None)
    if cuda is not None and cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(BufferError, match="cuda"):
        nbx.arange(3).__dlpack__(dl_device=(2, 0))


def test_stream_argument_on_cpu():
    t = nbx.arange(3)
    t.__dlpack__(stream=None)
    t.__dlpack__(stream=-1)  # PyTorch's default; accepted
    with pytest.raises(ValueError, match="stream must be None"):
        t.__dlpack__(stream=5)
    with pytest.raises(TypeError, match="stream"):
        t.__dlpack__(stream="s")


def test_cuda_stream_argument_values():
    # The array API's stream values on CUDA, mapped to CUstream handles (no GPU needed for the mapping).
    assert D._cuda_stream_handle(None, 0) == 0
    assert D._cuda_stream_handle(1, 0) == 0
    assert D._cuda_stream_handle(2, 0) == 2
    assert D._cuda_stream_handle(0x7F00_1234, 0) == 0x7F00_1234
    with pytest.raises(ValueError, match="ambiguous"):
        D._cuda_stream_handle(0, 0)
    with pytest.raises(ValueError):
        D._cuda_stream_handle(-5, 0)


# -- consumption, ownership, lifetimes ---------------------------------------------------------------------
def test_capsule_consumed_once():
    t = nbx.arange(5)
    for mv in (None, (1, 0)):
        cap = t.__dlpack__(max_version=mv)
        u = nbx.from_dlpack(cap)
        assert u.data_ptr() == t.data_ptr()
        assert "used_dltensor" in repr(cap)
        with pytest.raises(RuntimeError, match="consumed only once"):
            nbx.from_dlpack(cap)
    with pytest.raises(AssertionError, match="capsule"):
        nbx.from_dlpack(t.__dlpack__(), copy=True)
    with pytest.raises(RuntimeError, match="__dlpack__"):
        nbx.from_dlpack([1, 2, 3])


def test_deleter_called_exactly_once_when_last_view_dies():
    t = nbx.arange(10, dtype=nbx.float64)
    calls = D._DELETER_CALLS[0]
    u = nbx.from_dlpack(t.__dlpack__(max_version=(1, 0)))
    v = u[2:5]
    w = v.view(3, 1)
    del u
    gc.collect()
    assert D._DELETER_CALLS[0] == calls  # views still use the memory
    del v
    gc.collect()
    assert D._DELETER_CALLS[0] == calls
    assert w[0, 0].item() == 2.0
    del w
    gc.collect()
    assert D._DELETER_CALLS[0] == calls + 1
    gc.collect()
    assert D._DELETER_CALLS[0] == calls + 1
    # NumPy as consumer calls our deleter once too.
    b = np.from_dlpack(t)
    del b
    gc.collect()
    assert D._DELETER_CALLS[0] == calls + 2


def test_unconsumed_capsule_freed_when_collected():
    gc.collect()
    live, alloc = D._live_exports(), memory_allocated()
    t = nbx.zeros(1000)
    caps = [t.__dlpack__(), t.__dlpack__(max_version=(1, 0)), t.__dlpack__(copy=True)]
    assert D._live_exports() == live + 3
    wr = weakref.ref(t)
    del t
    gc.collect()
    assert wr() is not None  # the capsules keep the tensor (and its memory) alive
    del caps
    gc.collect()
    assert D._live_exports() == live
    assert wr() is None
    assert memory_allocated() == alloc


def test_lifetime_numpy_producer_deleted():
    a = np.arange(1000.0)
    wr = weakref.ref(a)
    t = nbx.from_dlpack(a)[10:20]
    del a
    gc.collect()
    assert wr() is not None  # NumPy's manager keeps the producer alive while we hold the memory
    np.testing.assert_array_equal(t.numpy(), np.arange(10.0, 20.0))
    del t
    gc.collect()
    assert wr() is None  # and our owner called NumPy's deleter


def test_lifetime_nbx_producer_deleted():
    gc.collect()
    live, alloc = D._live_exports(), memory_allocated()
    t = nbx.arange(1000, dtype=nbx.float32)
    wr = weakref.ref(t.untyped_storage())  # the exported view keeps the storage, not the base tensor, alive
    b = np.from_dlpack(t[100:])
    del t
    gc.collect()
    assert wr() is not None and memory_allocated() >= alloc + 4000
    np.testing.assert_array_equal(b[:3], [100.0, 101.0, 102.0])
    del b
    gc.collect()
    assert wr() is None and D._live_exports() == live and memory_allocated() == alloc


def test_deleter_survives_module_teardown():
    """A NumPy array from our capsule may be freed in the interpreter's final garbage collection, after this
    module's globals are gone (a segmentation fault at exit on the GPU machine, session 6): the ctypes trampoline
    stays alive without the module's reference, and the deleter works with the module's tables unbound."""
    wr = weakref.ref(D._DELETER)
    saved = D._DELETER
    t = nbx.arange(8, dtype=nbx.float32)
    b = np.from_dlpack(t)
    live = D._live_exports()
    calls = D._DELETER_CALLS[0]
    try:
        del D._DELETER, saved
        gc.collect()
        assert wr() is not None  # one reference is never dropped: the trampoline outlives the module
        D._LIVE, D._DELETER_CALLS = None, None  # as after the module's dict is cleared at exit
        del b                                    # NumPy calls our deleter now
        gc.collect()
    finally:
        D._DELETER = wr()
        D._LIVE, D._DELETER_CALLS = D._deleter.__defaults__
    assert D._DELETER_CALLS[0] == calls + 1 and D._live_exports() == live - 1
    del t


# -- the consumer: hand-edited capsules and producers of every vintage --------------------------------------
def test_import_null_strides_and_byte_offset():
    t = nbx.arange(12, dtype=nbx.int32).view(3, 4)
    cap = t.__dlpack__()
    peek(cap)["struct"].dl_tensor.strides = None  # legacy producers may send NULL for compact row-major
    u = nbx.from_dlpack(cap)
    assert u.stride() == (4, 1)
    np.testing.assert_array_equal(u.numpy(), t.numpy())
    v = t[1:, 1:]
    cap = v.__dlpack__(max_version=(1, 0))
    dl = peek(cap)["struct"].dl_tensor
    dl.data, dl.byte_offset = t.data_ptr(), v.data_ptr() - t.data_ptr()  # the offset in byte_offset instead
    w = nbx.from_dlpack(cap)
    np.testing.assert_array_equal(w.numpy(), v.numpy())
    assert w.data_ptr() == v.data_ptr()


def test_import_refuses_bad_capsules_without_consuming_them():
    t = nbx.arange(4, dtype=nbx.float32)
    for field, value, match in [("lanes", 4, "lanes"), ("code", 3, "unsupported DLPack dtype"),
                                ("device", 4, "not supported")]:
        cap = t.__dlpack__(max_version=(1, 0))
        dl = peek(cap)["struct"].dl_tensor
        if field == "device":
            dl.device.device_type = value
        else:
            setattr(dl.dtype, field, value)
        with pytest.raises(BufferError, match=match):
            nbx.from_dlpack(cap)
        assert "used_" not in repr(cap)  # still the producer's to free


def test_import_unknown_major_version_calls_deleter():
    t = nbx.arange(4)
    cap = t.__dlpack__(max_version=(1, 0))
    peek(cap)["struct"].version.major = 2
    calls = D._DELETER_CALLS[0]
    with pytest.raises(BufferError, match="version 2"):
        nbx.from_dlpack(cap)
    assert D._DELETER_CALLS[0] == calls + 1  # dlpack.h: call the deleter, read nothing else
    assert "used_dltensor_versioned" in repr(cap)


class LegacyProducer:
    """A producer from before DLPack 1.0: ``__dlpack__(stream=None)`` only."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class RecordingProducer(LegacyProducer):
    def __init__(self, a):
        super().__init__(a)
        self.calls = []

    def __dlpack__(self, **kw):
        self.calls.append(kw)
        return self.a.__dlpack__(**kw)


def test_consumer_falls_back_to_legacy_producers():
    a = np.arange(6.0)
    t = nbx.from_dlpack(LegacyProducer(a))
    assert t.data_ptr() == a.ctypes.data
    t = nbx.from_dlpack(LegacyProducer(a), copy=True)
    assert t.data_ptr() != a.ctypes.data  # the producer could not copy: we did
    np.testing.assert_array_equal(t.numpy(), a)
    p = RecordingProducer(a)
    nbx.from_dlpack(p, device="cpu", copy=False)
    assert p.calls == [{"max_version": (1, 1), "copy": False, "dl_device": (1, 0)}]
    assert nbx.asarray(RecordingProducer(a)).data_ptr() == a.ctypes.data


def test_from_dlpack_copy_and_device_arguments():
    a = np.arange(6.0)
    assert nbx.from_dlpack(a, copy=False).data_ptr() == a.ctypes.data
    c = nbx.from_dlpack(a, copy=True)
    assert c.data_ptr() != a.ctypes.data
    np.testing.assert_array_equal(c.numpy(), a)
    assert nbx.from_dlpack(a, device="cpu").data_ptr() == a.ctypes.data
    with pytest.raises(TypeError, match="copy"):
        nbx.from_dlpack(a, copy=1)


def test_cpu_wrap_external():
    a = np.arange(8, dtype=np.uint8)
    alloc = memory_allocated()
    owner = object()
    st = cpu_backend.wrap_external(a.ctypes.data, 8, nbx.device("cpu"), owner, True)
    assert st.ptr == a.ctypes.data and st.nbytes == 8 and st.readonly and st.owner is owner
    assert memory_allocated() == alloc  # foreign memory is not ours to count
    assert not st.handle.flags.writeable and st.handle[3] == 3
    empty = cpu_backend.wrap_external(0, 0, nbx.device("cpu"), None, False)
    assert empty.nbytes == 0
    with pytest.raises(ValueError, match="NULL"):
        cpu_backend.wrap_external(0, 8, nbx.device("cpu"), None, False)


# -- CUDA (skipped without a device) -----------------------------------------------------------------------
def _cuda_available():
    cuda = getattr(nbx, "cuda", None)
    return cuda is not None and cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda_available(), reason="needs a CUDA device")
def test_cuda_round_trip_and_host_copy():
    t = nbx.arange(12, dtype=nbx.float32, device="cuda").view(3, 4).t()
    assert t.__dlpack_device__() == (2, t.device.index)
    u = nbx.from_dlpack(t)
    assert u.device == t.device and u.data_ptr() == t.data_ptr() and u.stride() == t.stride()
    cap = t.__dlpack__(max_version=(1, 0), dl_device=(1, 0))  # a host copy, asked for by the consumer
    info = peek(cap)
    assert info["device"] == (1, 0) and info["flags"] & D.DLPACK_FLAG_BITMASK_IS_COPIED
    h = nbx.from_dlpack(cap)
    assert h.device == nbx.device("cpu")
    np.testing.assert_array_equal(h.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4).T)
    for stream in (None, 1, 2, -1):
        t.__dlpack__(stream=stream)


# -- parity with PyTorch on CPU ----------------------------------------------------------------------------
TORCH_NAMES = NUMPY_DLPACK + ["bfloat16", "float8_e4m3fn", "float8_e5m2"]


def _torch():
    import torch
    return torch


@pytest.mark.parity
@pytest.mark.parametrize("name", TORCH_NAMES)
def test_parity_torch_round_trip_every_dtype(name):
    torch = _torch()
    tdt = getattr(torch, name)
    a = values(name, (3, 4))
    t = nbx.from_numpy(a)
    try:
        tt = torch.from_dlpack(t)
    except (RuntimeError, BufferError) as e:  # pragma: no cover - depends on the torch build
        pytest.skip(f"torch {torch.__version__} does not import {name} through DLPack: {e}")
    assert tt.dtype == tdt and tt.data_ptr() == t.data_ptr() and tuple(tt.stride()) == t.stride()
    assert tt.view(torch.uint8).numpy().tobytes() == a.tobytes()
    # and back from torch
    src = torch.from_numpy(a.view(np.uint8).copy()).view(tdt) if name in ML_ONLY else torch.from_numpy(a.copy())
    u = nbx.from_dlpack(src)
    assert u.dtype is nbx.dtypes.dtype_from(name) and u.data_ptr() == src.data_ptr()
    assert u.numpy().tobytes() == a.tobytes()


@pytest.mark.parity
def test_parity_torch_views_and_zero_copy():
    torch = _torch()
    base = nbx.arange(24, dtype=nbx.float32).view(4, 6)
    for kind, v in _views(base).items():
        tt = torch.from_dlpack(v)
        assert tuple(tt.shape) == tuple(v.shape) and tuple(tt.stride()) == v.stride(), kind
        assert tt.data_ptr() == v.data_ptr(), kind
        np.testing.assert_array_equal(tt.numpy(), v.numpy())
    tb = torch.arange(24, dtype=torch.bfloat16).view(4, 6)
    for tv in (tb.t(), tb[1:, 2:5], tb[::2, ::3], tb[1].expand(4, 6), tb.view(2, 2, 6).permute(2, 0, 1)):
        u = nbx.from_dlpack(tv)
        assert u.stride() == tuple(tv.stride()) and u.data_ptr() == tv.data_ptr() and u.dtype is nbx.bfloat16
        np.testing.assert_array_equal(u.float().numpy(), tv.float().numpy())
    # writes are seen both ways
    tt = torch.zeros(3, 4)
    u = nbx.from_dlpack(tt)
    tt[1, 2] = 3.0
    assert u[1, 2].item() == 3.0
    u[0].fill_(7.0)
    assert (tt[0] == 7.0).all()
    w = nbx.zeros(5, dtype=nbx.bfloat16)
    tw = torch.from_dlpack(w)
    tw += 1.5
    assert w.tolist() == [1.5] * 5


@pytest.mark.parity
def test_parity_torch_capsules_and_lifetimes():
    torch = _torch()
    from torch.utils import dlpack as tdl
    t = nbx.arange(6, dtype=nbx.int64)
    for cap in (t.__dlpack__(), t.__dlpack__(max_version=(1, 0)), D.to_dlpack(t)):
        tt = tdl.from_dlpack(cap)
        assert tt.data_ptr() == t.data_ptr()
        with pytest.raises(RuntimeError):
            tdl.from_dlpack(cap)  # consumed once
    tt = torch.arange(100, dtype=torch.float64)
    u = nbx.from_dlpack(tdl.to_dlpack(tt))  # a raw legacy capsule from torch
    v = nbx.from_dlpack(tt[50:])
    wr = weakref.ref(tt)
    del tt
    gc.collect()
    assert u[99].item() == 99.0 and v[0].item() == 50.0
    assert wr() is not None
    del u, v
    gc.collect()
    assert wr() is None
    gc.collect()
    live = D._live_exports()
    x = nbx.arange(1000, dtype=nbx.float32)
    tx = torch.from_dlpack(x[10:])
    wx = weakref.ref(x.untyped_storage())
    del x
    gc.collect()
    assert wx() is not None and tx[0].item() == 10.0
    del tx
    gc.collect()
    assert wx() is None and D._live_exports() == live
