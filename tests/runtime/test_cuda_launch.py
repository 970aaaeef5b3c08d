"""The CUDA launcher: argument validation and pointer refusal (on CPU, with fake allocators), the cache key's
agreement with Triton's specialization, and on a GPU: kernels through the launcher, the fast path, refusals."""

from __future__ import annotations

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.device.base import device as Device
from nbxtensor.device.cuda import backend as B
from nbxtensor.memory import CachingAllocator, RawOutOfMemory
from nbxtensor.runtime import cuda_launch as L
from nbxtensor.runtime.triton_compat import HAVE_TRITON, INTERPRET, jit, tl

HAVE_CUDA = nbx.cuda.is_available()


@jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


# -- on CPU: validation with fake allocators ---------------------------------------------------------------
class _Raw:
    def __init__(self, base):
        self.next = base

    def malloc(self, n):
        if n > 1 << 40:
            raise RawOutOfMemory(n)
        p, self.next = self.next, self.next + n + 4096
        return p

    def free(self, p):
        pass

    def mem_get_info(self):
        return (1 << 40, 1 << 40)

    def record_event(self, s):
        return None

    def event_done(self, e):
        return True

    def event_release(self, e):
        pass

    def synchronize(self):
        pass


class _FakeTensor:
    """What the launcher reads of a tensor: ``_storage``, ``_offset``, ``_dtype``."""

    def __init__(self, storage, dtype=nbx.float32, offset=0):
        self._storage, self._dtype, self._offset = storage, dtype, offset


class _Foreign:
    def __init__(self, ptr, dtype="float32"):
        self.ptr, self.dtype = ptr, dtype

    def data_ptr(self):
        return self.ptr


@pytest.fixture
def fake_devices(monkeypatch):
    allocs = {i: CachingAllocator(_Raw(0x10_0000_0000 * (i + 1)), f"cuda:{i}", i) for i in (0, 1)}
    for i, a in allocs.items():
        monkeypatch.setitem(B._allocators, i, a)

    def tensor_on(i, nbytes=4096):
        b = allocs[i].malloc(nbytes)
        return _FakeTensor(B.CudaStorage(Device("cuda", i), nbytes, b.ptr, b, B.cuda_backend))

    return allocs, tensor_on


SIG = L.KernelSignature("add_kernel", ["x_ptr", "y_ptr", "out_ptr", "n", "BLOCK"], ["BLOCK"], {},
                        ["num_warps", "num_stages"])


def test_argument_counts_and_keywords_are_checked(fake_devices):
    _, t = fake_devices
    x, y, o = t(0), t(0), t(0)
    L.validate(SIG, 0, (x, y, o, 1024), {"BLOCK": 256, "num_warps": 4})
    with pytest.raises(TypeError, match=r"takes 5 arguments .* missing \['n'\]"):
        L.validate(SIG, 0, (x, y, o), {"BLOCK": 256})
    with pytest.raises(TypeError, match=r"missing \['BLOCK'\]"):
        L.validate(SIG, 0, (x, y, o, 1024), {})
    with pytest.raises(TypeError, match="takes 5 arguments .* got 6 positional"):
        L.validate(SIG, 0, (x, y, o, 1024, 256, 7), {})
    with pytest.raises(TypeError, match="no parameter or launch option 'BLOK'"):
        L.validate(SIG, 0, (x, y, o, 1024), {"BLOK": 256, "BLOCK": 256})
    with pytest.raises(TypeError, match="'n' given both positionally and as a keyword"):
        L.validate(SIG, 0, (x, y, o, 1024), {"n": 3, "BLOCK": 256})


def test_pointers_on_another_device_or_unknown_are_refused(fake_devices):
    allocs, t = fake_devices
    x, y, o = t(0), t(0), t(0)
    with pytest.raises(RuntimeError, match=r"argument 1 \('y_ptr'\) is a tensor on cuda:1, but the launch is on "
                                           "cuda:0"):
        L.validate(SIG, 0, (x, t(1), o, 10), {"BLOCK": 256})
    inside = x._storage.ptr + 100
    L.validate(SIG, 0, (x, _Foreign(inside), o, 10), {"BLOCK": 256})           # inside a live allocation
    with pytest.raises(RuntimeError, match=r"argument 1 \('y_ptr'\) points to 0x[0-9a-f]+, which no allocator"):
        L.validate(SIG, 0, (x, _Foreign(0x1234_5678), o, 10), {"BLOCK": 256})
    on1 = t(1)
    other = on1._storage.ptr
    with pytest.raises(RuntimeError, match="points to memory of cuda:1, but the launch is on cuda:0"):
        L.validate(SIG, 0, (x, _Foreign(other), o, 10), {"BLOCK": 256})
    e = allocs[0].register_external(0x7777_0000, 4096, owner="dlpack")         # imported foreign memory
    L.validate(SIG, 0, (x, _Foreign(0x7777_0010), o, 10), {"BLOCK": 256})
    allocs[0].unregister_external(e)
    with pytest.raises(RuntimeError, match="no allocator"):
        L.validate(SIG, 0, (x, _Foreign(0x7777_0010), o, 10), {"BLOCK": 256})


def test_a_freed_tensor_is_refused(fake_devices):
    allocs, t = fake_devices
    x, y, o = t(0), t(0), t(0)
    allocs[0].free(y._storage.handle)
    with pytest.raises(RuntimeError, match=r"argument 1 \('y_ptr'\) is a tensor whose memory .* use after free"):
        L.validate(SIG, 0, (x, y, o, 10), {"BLOCK": 256})


def test_cuda_launch_refuses_before_touching_the_driver(fake_devices):
    _, t = fake_devices
    if INTERPRET:
        with pytest.raises(RuntimeError, match="interpreter tier"):
            L.launch(add_kernel, (1,), Device("cuda", 0), (t(0), t(0), t(0), 10), {"BLOCK": 256})
        return
    if not HAVE_TRITON:
        pytest.skip("triton not installed")
    with pytest.raises(TypeError, match="missing"):
        L.launch(add_kernel, (1,), Device("cuda", 0), (t(0), t(0), t(0)), {"BLOCK": 256})
    with pytest.raises(RuntimeError, match="is a tensor on cuda:1"):
        L.launch(add_kernel, (1,), Device("cuda", 0), (t(0), t(1), t(0), 10), {"BLOCK": 256})


@pytest.mark.skipif(not HAVE_TRITON or INTERPRET, reason="needs Triton's compiled JITFunction")
def test_the_fast_path_calls_the_cached_launch_with_raw_pointers(fake_devices, monkeypatch):
    from types import SimpleNamespace
    _, t = fake_devices
    x, y, o = t(0), t(0), t(0)
    y._offset = 3                                   # a view: pointer = storage + 3 * 4 bytes, not 16-aligned
    calls = []
    enter, exit_ = SimpleNamespace(calls=[]), SimpleNamespace(calls=[])
    monkeypatch.setattr(L, "_rt", SimpleNamespace(launch_enter_hook=enter, launch_exit_hook=exit_))
    monkeypatch.setattr(L, "_ENTER", enter)
    monkeypatch.setattr(L, "_EXIT", exit_)
    monkeypatch.setattr(L.C, "ensure_context", lambda i: None)
    monkeypatch.setattr(L._stream_tls, "streams", {0: SimpleNamespace(cuda_stream=77)}, raising=False)
    monkeypatch.setitem(L._signatures, id(add_kernel), (add_kernel, SIG))
    f32 = id(nbx.float32)
    key = (id(add_kernel), 0, f32 + 1, f32, f32 + 1, L.arg_spec(1000), ("BLOCK", 256))
    head = ("FN", 0, 0, None, None, "PACKED", None, None, None)
    monkeypatch.setitem(L._cache, key, (lambda *a: calls.append(a), head, (256,), False))
    hits = L.cache_info()["hits"]
    L.launch(add_kernel, (4,), Device("cuda", 0), (x, y, o, 1000), {"BLOCK": 256})
    assert calls == [(4, 1, 1, 77, *head, x._storage.ptr, y._storage.ptr + 12, o._storage.ptr, 1000, 256)]
    assert L.cache_info()["hits"] == hits + 1
    L.launch(add_kernel, (4, 2), Device("cuda", 0), (x, y, o, 1000), {"BLOCK": 256})   # 2-D grid
    assert calls[-1][:3] == (4, 2, 1)
    with pytest.raises(RuntimeError, match="grid dimension 2 is 70000"):
        L.launch(add_kernel, (1, 1, 70000), Device("cuda", 0), (x, y, o, 1000), {"BLOCK": 256})
    if not HAVE_CUDA:
        enter.calls.append(print)                  # a profiler hook: Triton's path, which would call it
        with pytest.raises(RuntimeError, match="no CUDA device"):
            L.launch(add_kernel, (4,), Device("cuda", 0), (x, y, o, 1000), {"BLOCK": 256})


@pytest.mark.skipif(not HAVE_TRITON or INTERPRET, reason="needs Triton's compiled JITFunction")
def test_a_planned_tail_is_keyed_by_identity_and_passed_after_the_arguments(fake_devices, monkeypatch):
    from types import SimpleNamespace

    from nbxtensor.runtime.launcher import Tail
    _, t = fake_devices
    x, y, o = t(0), t(0), t(0)
    calls = []
    enter, exit_ = SimpleNamespace(calls=[]), SimpleNamespace(calls=[])
    monkeypatch.setattr(L, "_rt", SimpleNamespace(launch_enter_hook=enter, launch_exit_hook=exit_))
    monkeypatch.setattr(L, "_ENTER", enter)
    monkeypatch.setattr(L, "_EXIT", exit_)
    monkeypatch.setattr(L.C, "ensure_context", lambda i: None)
    monkeypatch.setattr(L._stream_tls, "streams", {0: SimpleNamespace(cuda_stream=5)}, raising=False)
    monkeypatch.setitem(L._signatures, id(add_kernel), (add_kernel, SIG))
    tail = Tail((1000,), {"BLOCK": 256})
    f32 = id(nbx.float32)
    head = ("FN", 0, 0, None, None, "PACKED", None, None, None)
    monkeypatch.setitem(L._cache, (id(add_kernel), 0, f32 + 1, f32 + 1, f32 + 1, tail),
                        (lambda *a: calls.append(a), head, (256,), False))
    L.launch(add_kernel, (2,), Device("cuda", 0), (x, y, o), tail.meta, tail)
    assert calls == [(2, 1, 1, 5, *head, x._storage.ptr, y._storage.ptr, o._storage.ptr, 1000, 256)]
    L.launch(add_kernel, (3, 7), Device("cuda", 0), (x, y, o), tail.meta, tail)          # a 2-d grid
    assert calls[-1][:4] == (3, 7, 1, 5)
    with pytest.raises(RuntimeError, match="grid dimension 1 is 70000"):
        L.launch(add_kernel, (3, 70000), Device("cuda", 0), (x, y, o), tail.meta, tail)
    # another tail with equal contents is another key (Triton's path, here refused for lack of a GPU or run)
    other = Tail((1000,), {"BLOCK": 256})
    assert (id(add_kernel), 0, f32 + 1, f32 + 1, f32 + 1, other) not in L._cache
    # refusals name the argument with the tail counted in (a tensor of another device)
    with pytest.raises(RuntimeError, match=r"argument 1 \('y_ptr'\) is a tensor on cuda:1"):
        L.launch(add_kernel, (2,), Device("cuda", 0), (x, t(1), o), tail.meta, tail)


@pytest.mark.skipif(not HAVE_TRITON or INTERPRET, reason="needs Triton's compiled JITFunction")
def test_signature_of_a_jit_kernel():
    sig = L.signature_of(add_kernel)
    assert sig.names == ("x_ptr", "y_ptr", "out_ptr", "n", "BLOCK") and sig.constexpr == {"BLOCK"}
    assert "num_warps" in sig.options and "num_stages" in sig.options


@pytest.mark.skipif(not HAVE_TRITON, reason="needs Triton")
def test_cache_key_is_never_coarser_than_tritons_specialization():
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend
    values = [0, 1, 2, 15, 16, 17, -1, -16, -17, 2 ** 31 - 16, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 16, -2 ** 31,
              -2 ** 31 - 16, 2 ** 40, 2 ** 40 + 1, 2 ** 63 - 1, 2 ** 63, 2 ** 63 + 16, 2 ** 64 - 1, 1.0, 0.5, True,
              False, None]
    spec = {}
    for v in values:
        spec.setdefault(L.arg_spec(v), set()).add(native_specialize_impl(BaseBackend, v, False, True, True))
    for k, triton_specs in spec.items():
        assert len(triton_specs) == 1, (k, triton_specs)


# -- on a GPU ----------------------------------------------------------------------------------------------
gpu = pytest.mark.skipif(not HAVE_CUDA or INTERPRET, reason="no CUDA device (or interpreter tier)")


@pytest.mark.gpu
@gpu
def test_a_kernel_runs_through_the_launcher_and_then_the_fast_path():
    from nbxtensor.runtime.launcher import launch
    n = 100_003
    xs = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    x, y = nbx.from_numpy(xs).cuda(), nbx.from_numpy(2 * xs).cuda()
    out = nbx.empty(n, dtype=nbx.float32, device="cuda")
    L.clear_cache()
    before = L.cache_info()
    grid = ((n + 1023) // 1024,)
    launch(add_kernel, grid, x, y, out, n, BLOCK=1024)
    assert np.array_equal(out.cpu().numpy(), xs + 2 * xs)
    mid = L.cache_info()
    assert mid["misses"] == before["misses"] + 1 and mid["entries"] == 1
    out2 = nbx.empty(n, dtype=nbx.float32, device="cuda")
    launch(add_kernel, grid, y, x, out2, n, BLOCK=1024)                  # same specialization: fast path
    assert L.cache_info()["hits"] == mid["hits"] + 1
    assert np.array_equal(out2.cpu().numpy(), xs + 2 * xs)
    # a view with an offset: its pointer is not 16-byte aligned -> a new specialization, still correct
    launch(add_kernel, grid, x[1:], y[1:], out2[1:], n - 1, BLOCK=1024)
    assert np.array_equal(out2.cpu().numpy()[1:], xs[1:] + 2 * xs[1:])
    assert L.cache_info()["entries"] == 2
    # other dtypes and a different BLOCK
    h = nbx.from_numpy(xs.astype(np.float16)).cuda()
    oh = nbx.empty(n, dtype=nbx.float16, device="cuda")
    launch(add_kernel, grid, h, h, oh, n, BLOCK=1024, num_warps=8)
    assert np.array_equal(oh.cpu().numpy(), (xs.astype(np.float16) * 2).astype(np.float16))
    # on a non-default stream
    s = nbx.cuda.Stream()
    with nbx.cuda.stream(s):
        out3 = nbx.empty(n, dtype=nbx.float32, device="cuda")
        launch(add_kernel, grid, x, x, out3, n, BLOCK=1024)
    s.synchronize()
    assert np.array_equal(out3.cpu().numpy(), 2 * xs)


@pytest.mark.gpu
@gpu
def test_the_launcher_refuses_bad_launches_on_the_gpu():
    from nbxtensor.runtime.launcher import launch
    x = nbx.ones(10, device="cuda")
    with pytest.raises(TypeError, match="missing"):
        launch(add_kernel, (1,), x, x, x, BLOCK=16)
    with pytest.raises(RuntimeError, match="different devices|is a tensor on cpu, but the launch is on cuda"):
        launch(add_kernel, (1,), x, nbx.ones(10), x, 10, BLOCK=16)
    from nbxtensor.device.cuda import context as C
    from nbxtensor.device.cuda import driver as D
    C.ensure_context(0)
    ptr = int(D.call(D.cu.cuMemAlloc, 4096))
    try:
        with pytest.raises(RuntimeError, match="which no allocator of this process knows"):
            launch(add_kernel, (1,), x, _Foreign(ptr), x, 10, BLOCK=16)
        st = B.cuda_backend.wrap_external(ptr, 4096, Device("cuda", 0), owner=None)
        launch(add_kernel, (1,), x, _Foreign(ptr), x, 10, BLOCK=16)        # registered: accepted
        nbx.cuda.synchronize()
        del st
    finally:
        D.call(D.cu.cuMemFree, ptr)
    with pytest.raises(RuntimeError, match="grid dimension 1"):
        launch(add_kernel, (1, 70000), x, x, x, 10, BLOCK=16)


@jit
def _floor_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.floor(tl.load(x_ptr + offs, mask=m)), mask=m)


@gpu
def test_launches_compile_without_flush_to_zero_by_default():
    # PyTorch's CUDA kernels keep float32 subnormals (nvcc -ftz=false); Triton's libdevice flushes them unless
    # enable_reflect_ftz=False. floor(-1e-40) is -1 without flushing and -0 with it.
    from nbxtensor.runtime.launcher import launch
    x = nbx.tensor([-1e-40, 1e-40, -2.5], dtype=nbx.float32, device="cuda")
    y = nbx.empty(3, dtype=nbx.float32, device="cuda")
    launch(_floor_kernel, (1,), x, y, 3, BLOCK=4)
    assert y.cpu().tolist() == [-1.0, 0.0, -3.0]


@gpu
def test_launching_does_not_import_torch_even_where_torch_is_installed():
    # Triton's native specializer imports torch when it can; nbxtensor keeps it out (house rule 1).
    import subprocess
    import sys
    code = ("import sys, nbxtensor as nbx\n"
            "x = nbx.arange(1000, dtype=nbx.float32, device='cuda'); y = (x * 2 + 1).sum(); nbx.cuda.synchronize()\n"
            "assert y.item() == 1000 * 999 + 1000, y.item()\n"
            "print('torch' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines()[-1] == "False", r.stdout


def test_torch_kept_out_blocks_the_import_only_inside_and_leaves_a_users_torch_alone(monkeypatch):
    import sys
    import types
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    with L._torch_kept_out():
        with pytest.raises(ImportError):
            import torch  # noqa: F401
    assert "torch" not in sys.modules  # the process can import torch afterwards
    users = types.ModuleType("torch")
    monkeypatch.setitem(sys.modules, "torch", users)
    with L._torch_kept_out():
        assert sys.modules["torch"] is users
    assert sys.modules["torch"] is users
