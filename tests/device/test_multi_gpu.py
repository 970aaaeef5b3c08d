"""Two or more CUDA devices: peer copies of every dtype (and one over 2 GiB), the per-thread current device,
per-device allocator statistics and streams, and refusals of tensors that sit on different devices.

Every test skips where fewer than two CUDA devices exist (CI, a one-GPU machine)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes.table import DTYPES

try:
    from nbxtensor.runtime.triton_compat import jit, tl

    @jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)
except ImportError:  # no Triton: the launcher test skips with the others
    add_kernel = None

TWO = nbx.cuda.is_available() and nbx.cuda.device_count() >= 2
pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not TWO, reason="needs two CUDA devices")]


def _bytes(t) -> bytes:
    return np.ascontiguousarray(t.cpu().numpy()).view(np.uint8).tobytes()


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_peer_copy_of_every_dtype_is_bit_exact(dt):
    raw = np.random.default_rng(dt.itemsize).integers(0, 256, 4099 * dt.itemsize, dtype=np.uint8)
    host = raw.view(dt.numpy)
    a = nbx.from_numpy(host.copy()).to("cuda:0")
    b = a.to("cuda:1")
    assert b.device == nbx.device("cuda:1") and b.dtype is dt
    assert _bytes(b) == host.view(np.uint8).tobytes()
    c = b[1::3].to("cuda:0")                       # a strided source on the other device
    assert c.device == nbx.device("cuda:0")
    assert _bytes(c) == np.ascontiguousarray(host[1::3]).view(np.uint8).tobytes()


def test_peer_copy_over_2_gib():
    n = (2 << 30) + 4096 + 3                       # bytes: past any C-int size
    a = nbx.zeros(n, dtype=nbx.uint8, device="cuda:0")
    a[n - 5:] = 7
    a[:3] = 9
    b = a.to("cuda:1")
    assert b.shape == (n,)
    assert b[:3].cpu().numpy().tolist() == [9, 9, 9]
    assert b[n - 6:].cpu().numpy().tolist() == [0, 7, 7, 7, 7, 7]
    assert int(b.to(nbx.int64).sum().item()) == 27 + 35


def test_current_device_is_per_thread_and_steers_allocations():
    before = nbx.cuda.current_device()
    seen = {}

    def worker():
        nbx.cuda.set_device(1)
        seen["thread"] = nbx.cuda.current_device()
        seen["dev"] = nbx.zeros(3, device="cuda").device

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen == {"thread": 1, "dev": nbx.device("cuda:1")}
    assert nbx.cuda.current_device() == before       # the main thread's device is untouched
    with nbx.cuda.device(1):
        assert nbx.empty(2, device="cuda").device == nbx.device("cuda:1")
    assert nbx.cuda.current_device() == before


def test_allocator_statistics_are_per_device():
    nbx.cuda.synchronize(0)
    nbx.cuda.synchronize(1)
    a0, a1 = nbx.cuda.memory_allocated(0), nbx.cuda.memory_allocated(1)
    x = nbx.empty(1 << 20, dtype=nbx.float32, device="cuda:1")
    assert nbx.cuda.memory_allocated(1) >= a1 + (4 << 20)
    assert nbx.cuda.memory_allocated(0) == a0
    del x
    assert nbx.cuda.memory_allocated(1) == a1


def test_streams_and_events_on_the_second_device():
    s = nbx.cuda.Stream(device=1)
    with nbx.cuda.device(1), nbx.cuda.stream(s):
        e0, e1 = nbx.cuda.Event(enable_timing=True), nbx.cuda.Event(enable_timing=True)
        e0.record()
        y = nbx.ones(1 << 20, device="cuda:1") * 3
        e1.record()
    e1.synchronize()
    assert e0.elapsed_time(e1) >= 0
    assert float(y.sum().item()) == 3 * (1 << 20)


def test_ops_refuse_tensors_on_two_devices():
    a = nbx.ones(4, device="cuda:0")
    b = nbx.ones(4, device="cuda:1")
    with pytest.raises(RuntimeError, match="same device"):
        a + b
    with pytest.raises(RuntimeError, match="same device"):
        nbx.nn.functional.linear(nbx.ones(1, 4, device="cuda:0"), nbx.ones(3, 4, device="cuda:1"))
    assert _bytes(a) == np.ones(4, np.float32).tobytes()     # nothing the caller owns changed


def test_launcher_refuses_a_tensor_from_another_device():
    from nbxtensor.runtime.launcher import launch
    x, out = nbx.ones(10, device="cuda:0"), nbx.zeros(10, device="cuda:0")
    y = nbx.ones(10, device="cuda:1")
    with pytest.raises(RuntimeError, match=r"is a tensor on cuda:1, but the launch is on cuda:0"):
        launch(add_kernel, (1,), x, y, out, 10, BLOCK=16)
    nbx.cuda.synchronize(0)
    assert _bytes(out) == np.zeros(10, np.float32).tobytes()       # nothing ran
    launch(add_kernel, (1,), x, x, out, 10, BLOCK=16)
    assert _bytes(out) == np.full(10, 2, np.float32).tobytes()
