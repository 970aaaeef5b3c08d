"""CUDA graphs (``nbx.cuda.CUDAGraph`` / ``nbx.cuda.graph``): replays equal eager runs byte for byte on new
static inputs, the private pool keeps the graph's memory from other allocations, host copies inside a capture
are refused clearly and leave the device usable, deferred embedding checks, refusals without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.device.cuda import backend as B
from nbxtensor.device.cuda import driver as D

F = nbx.nn.functional
HAVE_CUDA = D.available() and nbx.cuda.device_count() > 0


def _bytes(t) -> bytes:
    return np.ascontiguousarray(t.cpu().numpy()).view(np.uint8).tobytes()


@pytest.mark.skipif(HAVE_CUDA, reason="checks the no-GPU behaviour")
def test_without_a_gpu_capture_is_refused_and_nothing_is_capturing():
    g = nbx.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="CUDAGraph.capture_begin"):
        g.capture_begin()
    with pytest.raises(RuntimeError, match="CUDAGraph.replay: nothing captured"):
        g.replay()
    assert nbx.cuda.is_current_stream_capturing() is False


def test_bad_arguments_are_refused_before_anything_happens():
    g = nbx.cuda.CUDAGraph()
    with pytest.raises(ValueError, match="capture_error_mode must be one of"):
        g.capture_begin(capture_error_mode="loose")
    with pytest.raises(TypeError, match="graph: expected a CUDAGraph, got int"):
        nbx.cuda.graph(3)
    assert nbx.cuda.graph_pool_handle() < 0 and nbx.cuda.graph_pool_handle() != nbx.cuda.graph_pool_handle()


def _body(x, w, b, ids, table):
    """A small model step: a linear with bias, a norm, an activation, a residual, an embedding lookup."""
    h = F.linear(x, w, b)
    h = F.layer_norm(h, (h.shape[-1],)) * 2.0 + x
    return F.silu(h) + F.embedding(ids, table).sum(0)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_replay_equals_eager_byte_for_byte_on_new_inputs(dtype):
    if not HAVE_CUDA:
        pytest.skip("no CUDA device")
    dt = getattr(nbx, dtype)
    gen = np.random.default_rng(0)
    mk = lambda *s: nbx.from_numpy(gen.standard_normal(s).astype(np.float32)).to("cuda", dt)   # noqa: E731
    x, w, b, table = mk(4, 64), mk(64, 64), mk(64), mk(100, 64)
    ids = nbx.from_numpy(np.array([3, 7, 99])).cuda()
    _body(x, w, b, ids, table)                         # warm-up: compile outside the capture
    g = nbx.cuda.CUDAGraph()
    with nbx.cuda.graph(g):
        assert nbx.cuda.is_current_stream_capturing()
        out = _body(x, w, b, ids, table)
    assert not nbx.cuda.is_current_stream_capturing()
    for step in range(3):
        x.copy_(mk(4, 64))                             # new static inputs
        ids.copy_(nbx.from_numpy(gen.integers(0, 100, 3)))
        g.replay()
        g.check_errors()
        assert _bytes(out) == _bytes(_body(x, w, b, ids, table)), step
    g.reset()


def test_the_private_pool_keeps_the_graphs_memory_until_reset():
    if not HAVE_CUDA:
        pytest.skip("no CUDA device")
    x = nbx.ones(1 << 20, device="cuda")
    (x * 3 + 1).sum()
    g = nbx.cuda.CUDAGraph()
    with nbx.cuda.graph(g):
        tmp = x * 3                                    # freed inside the capture: the pool keeps it for the graph
        out = (tmp + 1).sum()
        del tmp
    pool = g.pool()
    al = B.allocator(0)
    assert al.held_pools().get(pool) == 1
    others = [nbx.full((1 << 20,), 5.0, device="cuda") for _ in range(8)]   # new memory: not the pool's
    x.fill_(2.0)
    g.replay()
    assert out.item() == 7.0 * (1 << 20)
    assert all(float(o.min().item()) == 5.0 == float(o.max().item()) for o in others)
    g.reset()
    assert pool not in al.held_pools()
    assert out.item() == 7.0 * (1 << 20)               # the output outlives the graph as ordinary memory


def test_a_host_copy_inside_a_capture_is_refused_and_the_device_stays_usable():
    if not HAVE_CUDA:
        pytest.skip("no CUDA device")
    x = nbx.arange(8.0, device="cuda")
    (x + 1).sum()
    g = nbx.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="while a CUDA graph is being captured"):
        with nbx.cuda.graph(g):
            (x + 1).sum().item()
    with pytest.raises(RuntimeError, match="nothing captured"):
        g.replay()
    assert not B.capture_routes and float((x * 2).sum().item()) == 56.0


def test_capture_on_the_default_stream_is_refused():
    if not HAVE_CUDA:
        pytest.skip("no CUDA device")
    with pytest.raises(RuntimeError, match="non-default stream"):
        nbx.cuda.CUDAGraph().capture_begin()


def test_an_embedding_index_out_of_range_surfaces_in_check_errors():
    if not HAVE_CUDA:
        pytest.skip("no CUDA device")
    table = nbx.ones(10, 4, device="cuda")
    ids = nbx.from_numpy(np.array([1, 2])).cuda()
    F.embedding(ids, table)
    g = nbx.cuda.CUDAGraph()
    with nbx.cuda.graph(g):
        out = F.embedding(ids, table)
    g.replay()
    g.check_errors()
    ids.copy_(nbx.from_numpy(np.array([1, 10])))
    g.replay()
    with pytest.raises(IndexError):
        g.check_errors()
    ids.copy_(nbx.from_numpy(np.array([0, 9])))        # the flag is zeroed by the graph itself on each replay
    g.replay()
    g.check_errors()
    assert _bytes(out) == _bytes(nbx.ones(2, 4, device="cuda"))



def test_capture_verified_keeps_a_graph_that_replays_the_eager_result_and_refuses_one_that_does_not():
    if not HAVE_CUDA:
        pytest.skip("no CUDA device")
    from nbxtensor.device.cuda.graphs import capture_verified
    x = nbx.arange(1024.0, device="cuda")
    g, out = capture_verified(lambda: F.silu(x * 0.5), "silu")
    x.fill_(3.0)
    g.replay()
    assert _bytes(out) == _bytes(F.silu(x * 0.5))
    counter = nbx.zeros(4, device="cuda")

    def step():                        # not idempotent: the replay sees the eager run's increment
        counter.add_(1.0)
        return counter * 1.0
    with pytest.raises(RuntimeError, match="counter: the captured CUDA graph replayed to a different result"):
        capture_verified(step, "counter")
