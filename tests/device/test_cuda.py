"""The ``cuda`` device: behaviour without a GPU (imports, clean refusals, error decoding) and, where a GPU is
present, devices, streams, events, every copy path, bit-exact round trips of every dtype, the allocator."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.device.base import device as Device
from nbxtensor.device.cuda import backend as B
from nbxtensor.device.cuda import copies
from nbxtensor.device.cuda import driver as D
from nbxtensor.dtypes.table import DTYPES

HAVE_CUDA = nbx.cuda.is_available()
gpu = [pytest.mark.gpu, pytest.mark.skipif(not HAVE_CUDA, reason=f"no CUDA device ({D.unavailable_reason()})")]


# -- without a GPU -----------------------------------------------------------------------------------------
@pytest.mark.skipif(HAVE_CUDA, reason="checks the no-GPU behaviour")
def test_no_gpu_imports_and_refuses_clearly():
    assert nbx.cuda.is_available() is False and nbx.cuda.device_count() == 0
    assert "no CUDA device" in D.unavailable_reason()
    with pytest.raises(RuntimeError, match="no CUDA device"):
        nbx.zeros(3, device="cuda")
    with pytest.raises(RuntimeError, match="no CUDA device"):
        nbx.arange(3).cuda()
    with pytest.raises(RuntimeError, match="no CUDA device"):
        nbx.cuda.get_device_properties(0)
    with pytest.raises(RuntimeError, match="no CUDA device"):
        nbx.cuda.Stream()
    assert not nbx.cuda.is_pinned(nbx.arange(3))
    nbx.cuda.empty_cache()  # nothing to release, no error


def test_call_decodes_the_error_name_and_names_the_call():
    if D.cu is None:
        pytest.skip("cuda-bindings not installed")

    def cuFake(ptr, n):  # noqa: N802 - a driver-style function returning (CUresult, value)
        return (D.cu.CUresult(2), None)

    with pytest.raises(D.CudaError) as ei:
        D.call(cuFake, 0xDEADBEEF, 4096)
    e = ei.value
    assert e.name == "CUDA_ERROR_OUT_OF_MEMORY" and e.code == 2
    assert "cuFake(0xdeadbeef, 4096)" in str(e) and "CUDA_ERROR_OUT_OF_MEMORY" in str(e)
    assert isinstance(e, nbx.DeviceError) and isinstance(e, RuntimeError)
    assert D.call(lambda: (D.cu.CUresult(0), 7)) == 7
    assert D.call(lambda: (D.cu.CUresult(0), 1, 2)) == (1, 2)
    assert D.call(lambda: (D.cu.CUresult(0),)) is None
    assert D.error_name(1) == "CUDA_ERROR_INVALID_VALUE" and D.error_name(99999) == "CUresult 99999"


def test_cuda_namespace_has_pytorchs_names():
    for name in ("is_available", "device_count", "get_device_properties", "get_device_capability", "current_device",
                 "set_device", "device", "Stream", "current_stream", "stream", "Event", "synchronize", "empty_cache",
                 "memory_allocated", "memory_reserved", "max_memory_allocated", "reset_peak_memory_stats",
                 "memory_stats", "mem_get_info", "OutOfMemoryError"):
        assert hasattr(nbx.cuda, name), name
    assert nbx.cuda.OutOfMemoryError is nbx.OutOfMemoryError


# -- with a GPU: devices -----------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device")
def test_properties_and_capability():
    p = nbx.cuda.get_device_properties(0)
    assert p.name and p.multi_processor_count > 0 and p.total_memory > (1 << 30)
    assert nbx.cuda.get_device_capability() == (p.major, p.minor) and p.major >= 7
    assert p.warp_size == 32 and p.arch == f"sm{p.major}{p.minor}"
    assert nbx.cuda.get_device_name(0) == p.name
    free, total = nbx.cuda.mem_get_info()
    assert 0 < free <= total
    with pytest.raises(RuntimeError, match="out of range"):
        nbx.cuda.get_device_properties(nbx.cuda.device_count())
    with pytest.raises(RuntimeError, match="out of range"):
        nbx.zeros(2, device=f"cuda:{nbx.cuda.device_count()}")
    assert nbx.zeros(2, device="cuda").device == Device("cuda", nbx.cuda.current_device())


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device")
def test_current_device_is_per_thread_and_device_context_restores():
    n = nbx.cuda.device_count()
    last = n - 1
    nbx.cuda.set_device(last)
    seen = []
    t = threading.Thread(target=lambda: seen.append(nbx.cuda.current_device()))
    t.start()
    t.join()
    assert seen == [0] and nbx.cuda.current_device() == last
    with nbx.cuda.device(0):
        assert nbx.cuda.current_device() == 0
        with nbx.cuda.device(last):
            assert nbx.cuda.current_device() == last
        assert nbx.cuda.current_device() == 0
    assert nbx.cuda.current_device() == last
    nbx.cuda.set_device(0)
    with pytest.raises(RuntimeError, match="out of range"):
        nbx.cuda.set_device(n)


# -- streams and events ------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device")
def test_streams_and_events():
    assert nbx.cuda.current_stream().cuda_stream == 0 == nbx.cuda.default_stream().cuda_stream
    s = nbx.cuda.Stream()
    assert s.cuda_stream != 0 and s.device == Device("cuda", 0)
    with nbx.cuda.stream(s):
        assert nbx.cuda.current_stream() == s
        x = nbx.arange(1 << 20, dtype=nbx.float32, device="cuda")   # work queued on s
        start, end = nbx.cuda.Event(enable_timing=True), nbx.cuda.Event(enable_timing=True)
        start.record()
        y = x.clone()
        end.record()
    assert nbx.cuda.current_stream().cuda_stream == 0
    end.synchronize()
    assert end.query() and s.query()
    assert start.elapsed_time(end) >= 0.0
    nbx.cuda.current_stream().wait_stream(s)
    assert np.array_equal(y.cpu().numpy(), np.arange(1 << 20, dtype=np.float32))
    ev = nbx.cuda.Event()
    assert ev.query()                    # never recorded: complete, as PyTorch
    ev.record(s)
    ev.wait()
    ev.synchronize()
    with pytest.raises(RuntimeError, match="enable_timing"):
        ev.elapsed_time(end)
    with pytest.raises(RuntimeError, match="recorded"):
        nbx.cuda.Event(enable_timing=True).elapsed_time(end)
    nbx.cuda.synchronize()
    s.synchronize()
    seen = []
    with nbx.cuda.stream(s):             # the current stream is per thread
        t = threading.Thread(target=lambda: seen.append(nbx.cuda.current_stream().cuda_stream))
        t.start()
        t.join()
    assert seen == [0]


# -- copies ------------------------------------------------------------------------------------------------
def _random_bytes(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device")
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_every_dtype_round_trips_bit_exactly(dt):
    n = 4097
    raw = _random_bytes(n * dt.itemsize, seed=dt.itemsize)
    host = raw.view(dt.numpy).reshape(17, 241)
    x = nbx.from_numpy(host.copy())
    g = x.to("cuda")
    assert g.device.type == "cuda" and g.dtype is dt
    back = g.cpu().numpy()
    assert back.view(np.uint8).tobytes() == host.view(np.uint8).tobytes()    # NaN payloads included
    assert g.cuda() is g
    t = x.t().cuda()                                     # a non-contiguous source
    # .to() keeps the dense transposed strides (PyTorch's preserve_format), so compare C-ordered bytes
    assert np.ascontiguousarray(t.cpu().numpy()).view(np.uint8).tobytes() == \
        np.ascontiguousarray(host.T).view(np.uint8).tobytes()
    z = nbx.zeros(5, 3, dtype=dt, device="cuda")
    assert not z.cpu().numpy().view(np.uint8).any()


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device")
@pytest.mark.parametrize("n", [1, 4095, copies.STAGE_MIN - 1, copies.STAGE_MIN, 2 * copies.STAGE_CHUNK + 12345])
def test_copy_paths_small_direct_and_staged(n):
    be, dev = B.cuda_backend, Device("cuda", 0)
    src = _random_bytes(n, seed=n % 97)
    st = be.allocate(n, dev)
    be.write(st, 0, src)
    assert np.array_equal(be.read(st, 0, n), src)
    if n > 10:
        assert np.array_equal(be.read(st, 7, n - 10), src[7:n - 3])
        be.write(st, 3, src[:5])
        assert np.array_equal(be.read(st, 3, 5), src[:5])


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device")
def test_transfers_above_2_gib():
    n = (9 << 28) + 4099                                 # 2.25 GiB + 4099 bytes
    src = np.resize(np.arange(251, dtype=np.uint8), n)   # period 251 (prime): a chunk offset bug shows
    src[-4099:] = 7
    g = nbx.from_numpy(src).cuda()
    assert g.nbytes == n
    back = g.cpu().numpy()
    assert np.array_equal(back, src)
    del g, back
    nbx.cuda.empty_cache()


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device")
def test_pinned_memory_and_non_blocking_copies():
    be, dev = B.cuda_backend, Device("cuda", 0)
    x = nbx.arange(1 << 20, dtype=nbx.int32)
    p = nbx.cuda.pin_memory(x)
    assert nbx.cuda.is_pinned(p) and not nbx.cuda.is_pinned(x)
    assert np.array_equal(p.numpy(), x.numpy())
    g = p.cuda()
    assert np.array_equal(g.cpu().numpy(), x.numpy())
    st0 = be.allocate(p.nbytes, dev)
    be.write(st0, 0, p.numpy().reshape(-1).view(np.uint8))          # the pinned path: one DMA
    assert np.array_equal(be.read(st0, 0, p.nbytes).view(np.int32), x.numpy())
    # non_blocking from pageable memory: staged, so the caller may overwrite its array at once
    src = _random_bytes(8 << 20, seed=3)
    keep = src.copy()
    st = be.allocate(src.nbytes, dev)
    be.write(st, 0, src, non_blocking=True)
    src[:] = 0
    nbx.cuda.synchronize()
    assert np.array_equal(be.read(st, 0, st.nbytes), keep)
    # non_blocking into pinned memory: asynchronous, complete after synchronize
    out = nbx.cuda.pin_memory(nbx.zeros(8 << 20, dtype=nbx.uint8))
    be.read_into(out.numpy(), st, 0, non_blocking=True)
    nbx.cuda.synchronize()
    assert np.array_equal(out.numpy(), keep)


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device")
def test_device_to_device_memset_and_peer():
    be, dev = B.cuda_backend, Device("cuda", 0)
    src = _random_bytes(3 << 20, seed=5)
    a = be.allocate(src.nbytes, dev)
    b = be.allocate(src.nbytes, dev)
    be.write(a, 0, src)
    be.copy(b, 0, a, 0, src.nbytes)
    be.memset(b, 100, 0xAB, 1000)
    want = src.copy()
    want[100:1100] = 0xAB
    assert np.array_equal(be.read(b, 0, b.nbytes), want)
    with pytest.raises(ValueError, match="outside the storage"):
        be.copy(b, 10, a, 0, src.nbytes)
    with pytest.raises(ValueError, match="byte"):
        be.memset(b, 0, 256, 1)
    if nbx.cuda.device_count() > 1:
        c = be.allocate(src.nbytes, Device("cuda", 1))
        be.copy(c, 0, a, 0, src.nbytes)
        assert np.array_equal(be.read(c, 0, c.nbytes), src)


# -- the allocator on the device ---------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device")
def test_memory_statistics_follow_tensors():
    import gc
    gc.collect()
    nbx.cuda.synchronize()
    base = nbx.cuda.memory_allocated()
    x = nbx.empty(1000, dtype=nbx.float32, device="cuda")     # 4000 bytes -> a 4096-byte block
    assert nbx.cuda.memory_allocated() == base + 4096
    assert nbx.cuda.memory_reserved() >= nbx.cuda.memory_allocated()
    nbx.cuda.reset_peak_memory_stats()
    y = nbx.empty(30 << 20, dtype=nbx.uint8, device="cuda")
    assert nbx.cuda.max_memory_allocated() >= base + 4096 + (30 << 20)
    del y
    assert nbx.cuda.memory_allocated() == base + 4096
    s = nbx.cuda.memory_stats()
    assert s["allocated_bytes.all.current"] == base + 4096 and s["num_ooms"] >= 0
    del x
    s = nbx.cuda.Stream()
    with nbx.cuda.stream(s):                                  # a fresh stream: its own segment
        x = nbx.empty(1000, dtype=nbx.float32, device="cuda")
        p = x.data_ptr()
        del x
        z = nbx.empty(1000, dtype=nbx.float32, device="cuda")  # reuses the cached block of its stream
        assert z.data_ptr() == p
        del z
    z = nbx.empty(1000, dtype=nbx.float32, device="cuda")      # the default stream does not take it
    assert z.data_ptr() != p
    del z
    before = nbx.cuda.memory_reserved()
    nbx.cuda.empty_cache()
    assert nbx.cuda.memory_reserved() <= before
    e = nbx.empty(0, device="cuda")
    assert e.data_ptr() == 0 and e.cpu().numel() == 0


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device")
def test_out_of_memory_names_the_numbers_and_frees_nothing():
    keep = nbx.ones(1000, device="cuda")
    total = nbx.cuda.get_device_properties().total_memory
    with pytest.raises(nbx.OutOfMemoryError) as ei:
        nbx.empty(total + (1 << 30), dtype=nbx.uint8, device="cuda")     # absurd: more than the card
    msg = str(ei.value)
    assert f"tried to allocate {total + (1 << 30)} bytes" in msg and "free of" in msg and "allocated" in msg
    with pytest.raises(nbx.OutOfMemoryError) as ei:                          # fits the card, not what is free
        B.allocator(0).malloc(total - (64 << 20))
    assert "after releasing the cache and retrying" in str(ei.value)
    assert nbx.cuda.memory_stats()["num_alloc_retries"] >= 1
    assert np.array_equal(keep.cpu().numpy(), np.ones(1000, np.float32))


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device")
def test_use_after_free_double_free_and_foreign_storages_are_refused():
    be, dev = B.cuda_backend, Device("cuda", 0)
    st = be.allocate(4096, dev)
    B.allocator(0).free(st.handle)
    with pytest.raises(RuntimeError, match="use after free"):
        be.read(st, 0, 16)
    with pytest.raises(RuntimeError, match="use after free"):
        be.write(st, 0, np.zeros(16, np.uint8))
    with pytest.raises(RuntimeError, match="double free"):
        B.allocator(0).free(st.handle)
    cpu = nbx.zeros(4).untyped_storage()
    with pytest.raises(TypeError, match="storage of the cuda backend"):
        be.read(cpu, 0, 4)
    with pytest.raises(ValueError, match="outside the storage"):
        be.read(be.allocate(16, dev), 8, 16)


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device")
def test_wrap_external_registers_foreign_memory():
    n = 1 << 16
    from nbxtensor.device.cuda import context as C
    C.ensure_context(0)
    ptr = D.call(D.cu.cuMemAlloc, n)
    ptr = int(ptr)
    try:
        be, dev = B.cuda_backend, Device("cuda", 0)
        assert B.find_allocation(ptr + 10) is None
        st = be.wrap_external(ptr, n, dev, owner="test", readonly=False)
        found = B.find_allocation(ptr + 10)
        assert found is st.handle and found.external
        src = _random_bytes(n, seed=9)
        be.write(st, 0, src)
        assert np.array_equal(be.read(st, 0, n), src)
        allocated = nbx.cuda.memory_allocated()
        del st
        assert B.find_allocation(ptr + 10) is None and nbx.cuda.memory_allocated() == allocated
        with pytest.raises(ValueError, match="not CUDA memory"):
            be.wrap_external(np.zeros(16).ctypes.data, 16, dev, owner=None)
    finally:
        D.call(D.cu.cuMemFree, ptr)


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device")
def test_driver_errors_are_decoded_on_the_real_driver():
    with pytest.raises(D.CudaError) as ei:
        D.call(D.cu.cuMemFree, 0xDEAD0000)
    assert ei.value.name.startswith("CUDA_ERROR_") and "cuMemFree(0xdead0000)" in str(ei.value)


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_CUDA, reason="no CUDA device")
def test_bare_cuda_device_reaching_the_backend_allocates_on_the_current_device():
    from nbxtensor.tensor.core import new_empty
    t = new_empty((3,), nbx.float32, nbx.device("cuda"))   # no index: internal callers may pass one
    assert t.device == nbx.device("cuda", nbx.cuda.current_device())
