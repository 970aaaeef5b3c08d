"""The C fast path of the CUDA launcher (runtime/_fastlaunch.c) against the Python fast path, its oracle: the same
cache key for every argument mix, the same call of the cached launch function on a hit, the same refusals and
grid handling (anything it does not handle goes to the Python path). On CPU, with fake CUDA storages and a fake
launch function; the module is built with Triton's compile_module_from_src (gcc and Python.h are needed)."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nbxtensor as nbx
from nbxtensor.device.base import device as Device
from nbxtensor.device.cuda import backend as B
from nbxtensor.memory import CachingAllocator
from nbxtensor.runtime import cuda_launch as L
from nbxtensor.runtime import fastlaunch, launcher
from nbxtensor.runtime.launcher import Tail
from test_cuda_launch import _Raw   # fake device memory: addresses handed out, nothing behind them

pytest.importorskip("triton")
M = fastlaunch.load()
pytestmark = pytest.mark.skipif(M is None, reason=f"C fast path not built: {fastlaunch.status()}")


class _FakeTensor:
    """What the launcher reads of a tensor: ``_storage``, ``_offset``, ``_dtype`` (a class of its own, learnt by
    the launcher on first sight as it learns nbxtensor's Tensor)."""

    __slots__ = ("_storage", "_dtype", "_offset")

    def __init__(self, storage, dtype=nbx.float32, offset=0):
        self._storage, self._dtype, self._offset = storage, dtype, offset


class _Kernel:
    """A kernel object: the launcher keys on its id; signature_of gives None (no Triton params)."""


KERNEL = _Kernel()
DTYPES = [nbx.float32, nbx.float16, nbx.bfloat16, nbx.int8, nbx.int64, nbx.bool]
HEAD = ("FN", 0, 0, None, None, "PACKED", None, None, None)


def _keep_switch(monkeypatch):
    """Restore the C path's switch (cuda_launch's and the launcher's) after the test."""
    for name in ("_FAST", "_PYPATH", "_c_wanted"):
        monkeypatch.setattr(L, name, getattr(L, name))
    monkeypatch.setattr(launcher, "_CUDA_FAST", launcher._CUDA_FAST)


@pytest.fixture
def env(monkeypatch):
    """Two fake CUDA devices, empty hook chains, context 0 current, stream 77 current on cuda:0, an empty cache,
    a recording _slow, and a switch between the C and the Python path (restored afterwards)."""
    allocs = {i: CachingAllocator(_Raw(0x10_0000_0000 * (i + 1)), f"cuda:{i}", i) for i in (0, 1)}
    for i, a in allocs.items():
        monkeypatch.setitem(B._allocators, i, a)
    monkeypatch.setattr(L, "INTERPRET", False)
    chains = SimpleNamespace(enter=SimpleNamespace(calls=[]), exit=SimpleNamespace(calls=[]))
    monkeypatch.setattr(L, "_rt", SimpleNamespace(launch_enter_hook=chains.enter, launch_exit_hook=chains.exit))
    monkeypatch.setattr(L, "_ENTER", chains.enter)
    monkeypatch.setattr(L, "_EXIT", chains.exit)
    monkeypatch.setattr(L, "_Tensor", _FakeTensor)
    monkeypatch.setattr(L, "_cache", {})
    monkeypatch.setattr(L._ctx_tls, "ctx", 0, raising=False)
    monkeypatch.setattr(L._stream_tls, "streams", {0: SimpleNamespace(cuda_stream=77)}, raising=False)
    contexts = []
    monkeypatch.setattr(L.C, "ensure_context", contexts.append)
    slow = []
    monkeypatch.setattr(L, "_slow", lambda kernel, sig, grid, i, args, meta, key: slow.append((grid, args, key)))
    _keep_switch(monkeypatch)

    def tensor(i=0, dtype=nbx.float32, offset=0, nbytes=4096):
        b = allocs[i].malloc(nbytes)
        return _FakeTensor(B.CudaStorage(Device("cuda", i), nbytes, b.ptr, b, B.cuda_backend), dtype, offset)

    def use_c(on):
        assert L.c_fast_path(on) is on

    return SimpleNamespace(allocs=allocs, tensor=tensor, use_c=use_c, slow=slow, contexts=contexts, chains=chains)


def python_key(env, args, meta, planned=None, kernel=KERNEL):
    """The key the Python fast path computes (what it hands _slow on a miss)."""
    env.use_c(False)
    env.slow.clear()
    L.launch(kernel, (1,), Device("cuda", 0), args, meta, planned)
    assert len(env.slow) == 1
    return env.slow[0][2]


def c_answer(args, meta, planned=None, grid=(1,), kernel=KERNEL):
    return M.fast(kernel, 0, grid, args, planned, meta)


def same_key(a, b):
    assert a == b and hash(a) == hash(b)
    assert [type(x) for x in a] == [type(x) for x in b]


# -- the key ---------------------------------------------------------------------------------------------------
INT_EDGES = [0, 1, 2, 15, 16, 17, -1, -16, -17, 2 ** 31 - 16, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 16, -2 ** 31,
             -2 ** 31 - 1, -2 ** 31 - 16, 2 ** 40, 2 ** 40 + 1, 2 ** 63 - 1, 2 ** 63, 2 ** 63 + 16, 2 ** 64 - 1, 2 ** 64,
             2 ** 70, -2 ** 63, -2 ** 63 - 1, -2 ** 63 - 16, -2 ** 70, -2 ** 70 - 3]
scalars = st.one_of(st.sampled_from(INT_EDGES), st.integers(), st.floats(allow_nan=False), st.booleans(),
                    st.none(), st.sampled_from(["s", (1, 2), 2j]))
tensors = st.builds(lambda d, off: ("tensor", d, off), st.sampled_from(range(len(DTYPES))), st.integers(0, 17))
metas = st.dictionaries(st.sampled_from(["BLOCK", "num_warps", "num_stages", "EVEN", "X"]),
                        st.one_of(st.integers(-3, 4096), st.booleans(), st.none(), st.sampled_from(["a", 1.5])),
                        max_size=4)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=st.lists(st.one_of(tensors, scalars), min_size=1, max_size=8), meta=metas, planned=st.booleans())
def test_the_c_key_equals_the_python_key(env, spec, meta, planned):
    args = tuple(env.tensor(0, DTYPES[s[1]], s[2]) if isinstance(s, tuple) and s[0] == "tensor" else s
                 for s in spec)
    tail = Tail((3, 4.0), meta) if planned else None
    want = python_key(env, args, meta, tail)
    env.use_c(True)
    got = c_answer(args, meta, tail)
    same_key(got, want)
    env.slow.clear()                                    # and through launch: the C key reaches _slow
    L.launch(KERNEL, (1,), Device("cuda", 0), args, meta, tail)
    same_key(env.slow[0][2], want)


def test_key_parts_by_argument_kind(env):
    t, u = env.tensor(0, nbx.float16), env.tensor(0, nbx.float16, offset=1)
    f16 = id(nbx.float16)
    env.use_c(True)
    key = c_answer((t, u, 1, 2 ** 31, -2 ** 31 - 1, 2 ** 63, 0.5, True, None, "s"), {"BLOCK": 64, "num_warps": 4})
    assert key == (id(KERNEL), 0, f16 + 1, f16, 1, 4 + 1, 4, 6 + 1, -1, "b", "n", (str, "s"),
                   ("BLOCK", "num_warps", 64, 4))
    tail = Tail((7,), {"BLOCK": 64})
    assert c_answer((t,), {"BLOCK": 64}, tail) == (id(KERNEL), 0, f16 + 1, tail)   # a tail: keyed by identity
    assert c_answer((t,), {}) == (id(KERNEL), 0, f16 + 1)                            # no meta: nothing appended


def test_unhashable_and_unknown_arguments_take_the_python_path(env):
    t = env.tensor()
    env.use_c(True)
    assert c_answer((t, [1, 2]), {}) is M.PYTHON_PATH                  # unhashable: Python gives key None
    assert python_key(env, (t, [1, 2]), {}) is None
    env.use_c(True)
    assert c_answer((t,), {"BLOCK": [1]}) is M.PYTHON_PATH
    assert c_answer((t, SimpleNamespace(data_ptr=lambda: 0)), {}) is M.PYTHON_PATH   # pointer-like: validated
    assert c_answer((t, SimpleNamespace(_storage=None)), {}) is M.PYTHON_PATH        # a tensor class not learnt
    assert c_answer([t], {}) is M.PYTHON_PATH                                        # args not a tuple
    assert M.fast(KERNEL, np.int64(0), (1,), (t,), None, {}) is M.PYTHON_PATH       # odd device index
    L._Tensor = None
    assert c_answer((t,), {}) is M.PYTHON_PATH                                       # Tensor class not known yet


# -- a hit -------------------------------------------------------------------------------------------------
def _entry(calls, scratch=False, tail=(256,)):
    return (lambda *a: calls.append(a), HEAD, tail, scratch)


@pytest.mark.parametrize("planned", [False, True])
def test_a_hit_calls_the_cached_function_with_the_python_paths_arguments(env, planned):
    x, y, o = env.tensor(), env.tensor(0, nbx.float32, 3), env.tensor(0, nbx.bfloat16, 8)
    tail = Tail((1000, 2.5), {"BLOCK": 256}) if planned else None
    args, meta = (x, y, o, 1000, 0.5, None, True), {"BLOCK": 256, "num_warps": 4}
    key = python_key(env, args, meta, tail)
    env.slow.clear()
    calls = []
    L._cache[key] = _entry(calls)
    before, c_before = L.cache_info()["hits"], M.hits()
    L.launch(KERNEL, (4, 2), Device("cuda", 0), args, meta, tail)                   # Python path
    env.use_c(True)
    L.launch(KERNEL, (4, 2), Device("cuda", 0), args, meta, tail)                   # C path
    assert M.hits() == c_before + 1 and L.cache_info()["hits"] == before + 2
    assert len(calls) == 2 and calls[0] == calls[1]
    assert [type(v) for v in calls[0]] == [type(v) for v in calls[1]]
    extra = (1000, 2.5) if planned else ()
    assert calls[1] == (4, 2, 1, 77, *HEAD, x._storage.ptr, y._storage.ptr + 12, o._storage.ptr + 16, 1000, 0.5,
                        None, True, *extra, 256)
    assert not env.slow and not env.contexts


def test_the_stream_is_the_threads_current_one(env, monkeypatch):
    x = env.tensor()
    calls = []
    env.use_c(True)
    L._cache[c_answer((x,), {})] = _entry(calls, tail=())
    for streams, want in [({0: SimpleNamespace(cuda_stream=77)}, 77), ({1: SimpleNamespace(cuda_stream=5)}, 0),
                          ({}, 0), ({0: None}, 0)]:
        monkeypatch.setattr(L._stream_tls, "streams", streams)
        assert M.fast(KERNEL, 0, (1,), (x,), None, {}) is None
        assert calls[-1][3] == want
    monkeypatch.delattr(L._stream_tls, "streams")
    assert M.fast(KERNEL, 0, (1,), (x,), None, {}) is None and calls[-1][3] == 0


def test_another_current_context_takes_the_python_path_which_switches_it(env, monkeypatch):
    x = env.tensor()
    calls = []
    env.use_c(True)
    L._cache[c_answer((x,), {})] = _entry(calls, tail=())
    monkeypatch.setattr(L._ctx_tls, "ctx", 1)
    assert M.fast(KERNEL, 0, (1,), (x,), None, {}) is M.PYTHON_PATH and not calls
    L.launch(KERNEL, (1,), Device("cuda", 0), (x,), {})
    assert env.contexts == [0] and len(calls) == 1
    monkeypatch.delattr(L._ctx_tls, "ctx")
    assert M.fast(KERNEL, 0, (1,), (x,), None, {}) is M.PYTHON_PATH


def test_hooks_send_the_launch_to_the_slow_path_with_the_key(env):
    x = env.tensor()
    calls = []
    env.use_c(True)
    key = c_answer((x,), {"B": 1})
    L._cache[key] = _entry(calls)
    for chain in (env.chains.enter, env.chains.exit):
        chain.calls.append(print)
        assert c_answer((x,), {"B": 1}) == key
        env.slow.clear()
        L.launch(KERNEL, (1,), Device("cuda", 0), (x,), {"B": 1})
        assert env.slow[0][2] == key and not calls
        chain.calls.clear()
    assert c_answer((x,), {"B": 1}) is None and len(calls) == 1


def test_scratch_entries_and_odd_entries_take_the_python_path(env):
    x = env.tensor()
    env.use_c(True)
    key = c_answer((x,), {})
    for entry in [_entry([], scratch=True), (print, HEAD, (), 0), (print, list(HEAD), (), False), (print, HEAD)]:
        L._cache[key] = entry
        assert c_answer((x,), {}) is M.PYTHON_PATH


def test_an_error_of_the_launch_function_propagates_and_is_not_a_hit(env):
    x = env.tensor()
    env.use_c(True)
    key = c_answer((x,), {})

    def boom(*a):
        raise ValueError("launch failed")
    L._cache[key] = (boom, HEAD, (), False)
    hits = M.hits()
    with pytest.raises(ValueError, match="launch failed"):
        L.launch(KERNEL, (1,), Device("cuda", 0), (x,), {})
    assert M.hits() == hits


# -- refusals ------------------------------------------------------------------------------------------------
def test_a_tensor_on_another_device_or_freed_is_a_miss_and_python_raises(env):
    x, y, w = env.tensor(), env.tensor(), env.tensor(1)
    env.use_c(True)
    L._cache[c_answer((x, y), {})] = _entry([], tail=())
    assert c_answer((x, w), {}) is M.PYTHON_PATH
    with pytest.raises(RuntimeError, match=r"argument 1 is a tensor on cuda:1, but the launch is on cuda:0"):
        L.launch(KERNEL, (1,), Device("cuda", 0), (x, w), {})
    env.allocs[0].free(y._storage.handle)
    assert c_answer((x, y), {}) is M.PYTHON_PATH
    with pytest.raises(RuntimeError, match=r"argument 1 is a tensor whose memory .* use after free"):
        L.launch(KERNEL, (1,), Device("cuda", 0), (x, y), {})
    cpu = _FakeTensor(nbx.ones(4)._storage)
    assert c_answer((x, cpu), {}) is M.PYTHON_PATH
    with pytest.raises(RuntimeError, match="is a tensor on cpu"):
        L.launch(KERNEL, (1,), Device("cuda", 0), (x, cpu), {})


GRIDS_OK = [5, (5,), (0,), (2 ** 31 - 1,), (5, 6), (1, 65535), (5, 6, 7), (1, 1, 65535), (2 ** 31 - 1, 65535, 65535)]
GRIDS_PY = [(2 ** 31,), (-1,), (1, 65536), (1, -1), (1, 1, 65536), 2 ** 31, -1, [1, 2], (), (1, 2, 3, 4), (1.0,),
            (True,), (np.int64(3),), (3, np.int32(2)), "x", None, lambda meta: (2,), 1.5]


def _grid_id(grid) -> str:
    # a stable id (a function's repr holds its address, which differs between pytest-xdist workers)
    return "callable" if callable(grid) else repr(grid)


@pytest.mark.parametrize("grid", GRIDS_OK + GRIDS_PY, ids=_grid_id)
def test_grids_behave_as_on_the_python_path(env, grid):
    x = env.tensor()
    env.use_c(True)
    key = c_answer((x, 8), {})
    outcomes = {}
    for on in (False, True):
        calls = []
        L._cache[key] = _entry(calls, tail=())
        env.use_c(on)
        try:
            L.launch(KERNEL, grid, Device("cuda", 0), (x, 8), {})
            outcomes[on] = ("ok", calls)
        except Exception as e:  # noqa: BLE001 - compared between the two paths
            outcomes[on] = (type(e), str(e), calls)
    assert outcomes[True] == outcomes[False]
    want = M.PYTHON_PATH if any(grid is g for g in GRIDS_PY) else None
    assert M.fast(KERNEL, 0, grid, (x, 8), None, {}) is want


# -- references, fallback -------------------------------------------------------------------------------------
def test_no_reference_leaks_on_hits_misses_and_python_path_answers(env):
    x = env.tensor(0, nbx.float16)
    big, flt, name, val, ret = 2 ** 40 + 1, 0.25, "".join(["BL", "OCK"]), 2 ** 41 + 3, object()
    tail = Tail((5,), {name: val})
    env.use_c(True)

    def fn(*a):
        return ret
    L._cache[c_answer((x, big, flt), {name: val})] = (fn, HEAD, (2,), False)
    L._cache[c_answer((x, big), {}, tail)] = (fn, HEAD, (2,), False)
    objs = [x, big, flt, name, val, ret, tail, tail.args, nbx.float16, x._storage, HEAD, KERNEL, M.PYTHON_PATH, fn]
    cases = [((x, big, flt), {name: val}, None), ((x, big), {}, tail), ((x, big, flt), {name: 3}, None),
             ((x, big, [1]), {}, None)]
    for args, meta, planned in cases:
        for _ in range(10):
            M.fast(KERNEL, 0, (1, 2), args, planned, meta)
        before = [sys.getrefcount(o) for o in objs]
        for _ in range(1000):
            M.fast(KERNEL, 0, (1, 2), args, planned, meta)
        assert [sys.getrefcount(o) for o in objs] == before


def test_a_failed_build_leaves_the_python_path(monkeypatch):
    saved = dict(fastlaunch._state)
    _keep_switch(monkeypatch)
    monkeypatch.setenv("NBX_FASTLAUNCH", "0")
    fastlaunch._state.update(module=None, tried=False)
    try:
        assert fastlaunch.load() is None and "NBX_FASTLAUNCH=0" in fastlaunch.status()
        assert L.c_fast_path(True) is False                                # asked for, not available: Python
        monkeypatch.setenv("NBX_FASTLAUNCH", "1")
        assert fastlaunch.load() is None                                   # tried once per process
        monkeypatch.setattr("triton.runtime.build.compile_module_from_src",
                            lambda *a, **k: (_ for _ in ()).throw(RuntimeError("compiler exploded")))
        fastlaunch._state.update(tried=False)
        assert fastlaunch.load() is None and "compiler exploded" in fastlaunch.status()
    finally:
        fastlaunch._state.update(saved)


def test_the_module_is_built_and_bound_by_the_switch(monkeypatch):
    assert "C fast path built" in fastlaunch.status()
    _keep_switch(monkeypatch)
    monkeypatch.setattr(L, "INTERPRET", False)
    assert L.c_fast_path(True) is True and L._FAST is M.fast and L._PYPATH is M.PYTHON_PATH
    assert launcher._CUDA_FAST is M.fast
    assert L.c_fast_path(False) is False and L._FAST is None and launcher._CUDA_FAST is None
    monkeypatch.setattr(L, "INTERPRET", True)     # the interpreter tier: the launcher never asks the C path
    assert L.c_fast_path(True) is True and launcher._CUDA_FAST is None


# -- launcher.launch / launch_tail: the device from the first tensor ------------------------------------------
def test_with_no_device_the_first_tensors_cuda_device_is_taken(env):
    x, y = env.tensor(0, nbx.float16), env.tensor(1, nbx.float16, 2)
    env.use_c(True)
    for dev, args in [(0, (x, x, 5)), (0, (3, 0.5, None, True, x, 7)), (1, (y, y))]:
        got = M.fast(KERNEL, None, (1,), args, None, {"B": 1})
        assert got == M.fast(KERNEL, dev, (1,), args, None, {"B": 1}) and got[1] == dev
    assert M.fast(KERNEL, None, (1,), (x, y), None, {}) is M.PYTHON_PATH         # cuda:0 taken, y refused
    cpu = _FakeTensor(nbx.ones(4)._storage)
    for args in [(cpu, x), ("s", x), (SimpleNamespace(_storage=x._storage), x), (1, 2), (), (1, [x])]:
        assert M.fast(KERNEL, None, (1,), args, None, {}) is M.PYTHON_PATH, args
    assert M.fast(KERNEL, None, (1,), [x], None, {}) is M.PYTHON_PATH


def test_launcher_launch_and_launch_tail_take_the_c_path(env, monkeypatch):
    monkeypatch.setattr(launcher, "_cuda_launch", lambda: L)
    monkeypatch.setattr(launcher, "_CUDA_LAUNCH", L)
    x, y = env.tensor(), env.tensor(0, nbx.float32, 1)
    tail = Tail((9, 1.5), {"BLOCK": 32})
    env.use_c(True)
    calls = []
    L._cache[c_answer((x, y, 4), {"BLOCK": 32})] = _entry(calls, tail=(32,))
    L._cache[c_answer((x, y), {}, tail)] = _entry(calls, tail=(32,))
    assert launcher._CUDA_FAST is M.fast
    hits = M.hits()
    launcher.launch(KERNEL, (2,), x, y, 4, BLOCK=32)
    launcher.launch_tail(KERNEL, (3,), (x, y), tail)
    assert M.hits() == hits + 2
    assert calls == [(2, 1, 1, 77, *HEAD, x._storage.ptr, y._storage.ptr + 4, 4, 32),
                     (3, 1, 1, 77, *HEAD, x._storage.ptr, y._storage.ptr + 4, 9, 1.5, 32)]
    with launcher.Recording() as r:                          # recording: the launches are recorded and made
        launcher.launch(KERNEL, (2,), x, y, 4, BLOCK=32)
        launcher.launch_tail(KERNEL, (3,), (x, y), tail)
    assert len(r.launches) == 2 and len(calls) == 4 and calls[2:] == calls[:2]
    assert M.hits() == hits + 4                              # through cuda_launch.launch's C call
    env.use_c(False)
    assert launcher._CUDA_FAST is None
    launcher.launch(KERNEL, (2,), x, y, 4, BLOCK=32)
    launcher.launch_tail(KERNEL, (3,), (x, y), tail)
    assert calls[4:] == calls[:2] and M.hits() == hits + 4
    env.use_c(True)                                          # refusals name the argument, as without C
    with pytest.raises(RuntimeError, match=r"argument 1 is a tensor on cuda:1, but the launch is on cuda:0"):
        launcher.launch(KERNEL, (2,), x, env.tensor(1), 4, BLOCK=32)
    with pytest.raises(RuntimeError, match="tensor arguments on different devices|is a tensor on cpu"):
        launcher.launch(KERNEL, (2,), x, _FakeTensor(nbx.ones(4)._storage), 4, BLOCK=32)
    env.slow.clear()
    launcher.launch(KERNEL, (2,), x, y, 16, BLOCK=32)        # a miss: the slow path with the key
    assert len(env.slow) == 1 and env.slow[0][2] == c_answer((x, y, 16), {"BLOCK": 32})


def test_module_globals_replaced_between_launches_are_seen(env, monkeypatch):
    x = env.tensor()
    env.use_c(True)
    key = c_answer((x,), {})
    calls, other = [], []
    L._cache[key] = _entry(calls, tail=())
    assert c_answer((x,), {}) is None and len(calls) == 1           # the globals are remembered now
    monkeypatch.setattr(L, "_cache", {key: _entry(other, tail=())})  # a new cache dict
    assert c_answer((x,), {}) is None and len(calls) == 1 and len(other) == 1
    monkeypatch.setattr(L, "_ENTER", SimpleNamespace(calls=[print]))   # a new hook chain with a hook
    assert c_answer((x,), {}) == key
    monkeypatch.setattr(L, "_ENTER", env.chains.enter)
    monkeypatch.setattr(L, "_Tensor", type(nbx.ones(1)))                # another tensor class
    assert c_answer((x,), {}) is M.PYTHON_PATH


# -- on a GPU ----------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not nbx.cuda.is_available() or L.INTERPRET, reason="no CUDA device (or interpreter tier)")
def test_on_the_gpu_cached_launches_take_the_c_path_and_compute_the_same():
    from nbxtensor.runtime.launcher import launch, launch_tail
    from nbxtensor.runtime.triton_compat import jit, tl

    @jit
    def axpy(x_ptr, y_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(out_ptr + offs, a * tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)

    n = 10_000
    xs = np.random.default_rng(1).standard_normal(n).astype(np.float32)
    x, y = nbx.from_numpy(xs).cuda(), nbx.from_numpy(xs[::-1].copy()).cuda()
    grid = ((n + 255) // 256,)
    outs = []
    for c in (False, True):
        assert L.c_fast_path(c) is c, fastlaunch.status()
        for k in range(3):                           # the first launch compiles; then the fast path
            o = nbx.empty(n, dtype=nbx.float32, device="cuda")
            h = M.hits()
            launch(axpy, grid, x, y, o, 2.5, n, BLOCK=256)
            outs.append(o)
            if k:
                assert M.hits() == h + (1 if c else 0)
        s = nbx.cuda.Stream()                        # another stream, a view with an offset, a planned tail
        with nbx.cuda.stream(s):
            o = nbx.empty(n + 1, dtype=nbx.float32, device="cuda")
            launch(axpy, grid, x, y, o[1:], 2.5, n, BLOCK=256)
            launch(axpy, grid, x, y, o[1:], 2.5, n, BLOCK=256)
        s.synchronize()
        outs.append(o[1:])
        tail = Tail((2.5, n), {"BLOCK": 256})
        o = nbx.empty(n, dtype=nbx.float32, device="cuda")
        launch_tail(axpy, grid, (x, y, o), tail)
        launch_tail(axpy, grid, (x, y, o), tail)
        outs.append(o)
    nbx.cuda.synchronize()
    # both paths launch the same binary: the same bits everywhere; against the reference within one float32 ulp
    # (the kernel may fuse a * x + y into one FMA, rounded once: the float64 value rounded to float32)
    first = outs[0].cpu().numpy()
    fma = (2.5 * xs.astype(np.float64) + xs[::-1].astype(np.float64)).astype(np.float32)
    np.testing.assert_array_max_ulp(first, fma, maxulp=1)
    for o in outs:
        assert o.cpu().numpy().tobytes() == first.tobytes()
