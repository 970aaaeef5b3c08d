"""CUDA graphs: capture a sequence of launches once, replay it with one driver call (``torch.cuda.CUDAGraph``).

A decode step or a batch-1 encoder pass is a few dozen small kernels whose host cost (tens of microseconds each
in Python) outweighs their GPU time. Captured into a graph, the same work is queued by one ``cuGraphLaunch``.

What capture records, and what it needs (the rules of PyTorch's ``torch.cuda.graph``,
https://pytorch.org/docs/stable/notes/cuda.html#cuda-graphs):

- Kernels, device-to-device copies and memsets queued on the capturing stream, with the addresses and scalar
  arguments they had. A replay reruns exactly those: new inputs are given by copying them into the tensors the
  capture read (*static inputs*); results appear in the tensors the capture wrote (*static outputs*).
- Memory the captured code allocates comes from a **private pool** of the device's caching allocator (a stream
  key no stream has): blocks freed during capture are reused later in the same capture (graph order is stream
  order) and the whole pool stays the graph's, out of ``empty_cache`` and of every other allocation, while the
  graph lives. Graphs may share a pool (``pool=``) when they replay one after the other.
- No host synchronisation inside: a copy between host and device (``.item()``, ``.cpu()``, moving a host
  tensor to the GPU) on the capturing stream is refused with an error that says so. Ops that check their inputs
  on the GPU and read a flag afterwards (``embedding``'s index range) register the flag with the capture instead:
  :meth:`CUDAGraph.check_errors` reads them after a replay.
- Capture needs a stream other than the default (legacy NULL) stream; :func:`graph` provides one.

Run the code once before capturing it (a warm-up): Triton compiles kernels on first use, which must not happen
inside a capture.

Driver API: ``cuStreamBeginCapture``, ``cuStreamEndCapture``, ``cuGraphInstantiate``, ``cuGraphLaunch`` (CUDA
driver API, "Graph Management" and "Stream Management").
"""

from __future__ import annotations

import gc
import itertools
import threading

from ..._errors import check
from . import backend as B
from . import context as C
from . import driver as D
from .stream import Stream, StreamContext, current_stream, current_stream_handle

__all__ = ["CUDAGraph", "graph", "graph_pool_handle", "is_current_stream_capturing", "capture_of", "capture_verified"]

_MODES = ("global", "thread_local", "relaxed")
_pool_ids = itertools.count(1)
_active: dict[tuple[int, int], "CUDAGraph"] = {}   # (device, stream handle) -> the graph being captured there
_lock = threading.Lock()


def graph_pool_handle() -> int:
    """A new private memory pool key, for graphs that should share memory (``torch.cuda.graph_pool_handle``):
    pass it as ``pool=`` to each capture. Graphs sharing a pool must be replayed in the order they were captured,
    never at the same time on different streams."""
    return -next(_pool_ids)


def capture_of(device_index: int):
    """The :class:`CUDAGraph` being captured on the current stream of ``device_index``, or None (fast: one dict
    test when no capture is under way). Ops ask this before a host read they would otherwise do."""
    if not _active:
        return None
    return _active.get((device_index, current_stream_handle(device_index)))


def is_current_stream_capturing() -> bool:
    """True when the current stream of the current device is capturing a graph
    (``torch.cuda.is_current_stream_capturing``)."""
    if not D.available():
        return False
    i = C.current_device()
    s = current_stream_handle(i)
    if s == 0:
        return False
    C.ensure_context(i)
    status = D.call(D.cu.cuStreamIsCapturing, s)
    return int(status) == int(D.cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_ACTIVE)


class CUDAGraph:
    """One captured graph (``torch.cuda.CUDAGraph``).

    Use :func:`graph` (``with nbx.cuda.graph(g): ...``), or :meth:`capture_begin` / :meth:`capture_end` on a
    non-default current stream. Then :meth:`replay` queues the captured work on the current stream.

    Attributes:
        device_index: the device it was captured on (None before capture).
    """

    def __init__(self):
        self.device_index: int | None = None
        self._pool: int | None = None
        self._graph = None
        self._exec = None
        self._stream: int | None = None
        self._checks: list[tuple] = []    # (int32 flag tensor, message, exception type) from captured ops

    # -- capture --------------------------------------------------------------------------------------------
    def capture_begin(self, pool: int | None = None, capture_error_mode: str = "global") -> None:
        """Start capturing the work queued on the current stream of the current device.

        Args:
            pool: a key from :func:`graph_pool_handle` (or another graph's :meth:`pool`) to share memory with;
                default: a new private pool.
            capture_error_mode: ``"global"`` (the default, as PyTorch: calls unsafe during capture fail from
                any thread), ``"thread_local"`` (only this thread's) or ``"relaxed"`` (none checked).

        Raises:
            RuntimeError: no CUDA device; the current stream is the default stream; this graph was already
                captured (call :meth:`reset` first); a capture is already under way on this stream.
            ValueError: an unknown ``capture_error_mode``.
        """
        check(capture_error_mode in _MODES, lambda: f"CUDAGraph.capture_begin: capture_error_mode must be one of "
              f"{_MODES}, got {capture_error_mode!r}", ValueError)
        check(self._exec is None and self._stream is None, "CUDAGraph.capture_begin: this graph is already captured "
              "or capturing; call reset() first")
        check(D.available(), lambda: f"CUDAGraph.capture_begin: {D.unavailable_reason()}")
        i = C.current_device()
        s = current_stream_handle(i)
        check(s != 0, "CUDAGraph.capture_begin: CUDA graphs must be captured on a non-default stream (use "
              "nbx.cuda.graph(g), or capture inside `with nbx.cuda.stream(nbx.cuda.Stream()):`)")
        key = (i, s)
        check(key not in _active, lambda: f"CUDAGraph.capture_begin: a capture is already under way on stream "
              f"0x{s:x} of cuda:{i}")
        check(pool is None or (isinstance(pool, int) and pool < 0), lambda: "CUDAGraph.capture_begin: pool must be "
              f"a key from graph_pool_handle() or CUDAGraph.pool(), got {pool!r}", ValueError)
        pool = graph_pool_handle() if pool is None else pool
        al = B.allocator(i)
        C.ensure_context(i)
        mode = getattr(D.cu.CUstreamCaptureMode, f"CU_STREAM_CAPTURE_MODE_{capture_error_mode.upper()}")
        al.hold_pool(pool)
        with _lock:
            B.capture_routes[key] = pool
            _active[key] = self
            al.capturing += 1
        try:
            D.call(D.cu.cuStreamBeginCapture, s, mode)
        except BaseException:
            self._unroute(key, al)
            al.release_pool(pool)
            raise
        self.device_index, self._pool, self._stream = i, pool, s

    @staticmethod
    def _unroute(key, al) -> None:
        with _lock:
            B.capture_routes.pop(key, None)
            _active.pop(key, None)
            al.capturing -= 1

    def capture_end(self) -> None:
        """End the capture and instantiate the graph.

        Raises:
            RuntimeError: no capture under way; the driver invalidated the capture (an operation that cannot be
                captured ran on the stream, or an unsafe call in ``"global"`` mode); instantiation failed. The
                graph is then reset, and its pool released.
        """
        check(self._stream is not None and self._exec is None, "CUDAGraph.capture_end: no capture under way "
              "(call capture_begin first)")
        i, s = self.device_index, self._stream
        al = B.allocator(i)
        self._unroute((i, s), al)
        C.ensure_context(i)
        err, g = D.cu.cuStreamEndCapture(s)
        if int(err):
            if g is not None and int(g):
                D.cu.cuGraphDestroy(g)
            self._stream = None
            al.release_pool(self._pool)
            self._pool = None
            D.raise_error(D.cu.cuStreamEndCapture, int(err), (s,))
        self._graph = g
        try:
            self._exec = D.call(D.cu.cuGraphInstantiate, g, 0)
        except BaseException:
            self.reset()
            raise

    # -- use ------------------------------------------------------------------------------------------------
    def replay(self) -> None:
        """Queue the captured work on the current stream of the graph's device (asynchronous, like a launch).

        Raises:
            RuntimeError: the graph has not been captured (or was reset).
        """
        check(self._exec is not None, "CUDAGraph.replay: nothing captured (capture_begin/capture_end, or "
              "nbx.cuda.graph(g), first)")
        i = self.device_index
        if getattr(C._tls, "ctx", -1) != i:
            C.ensure_context(i)
        D.call(D.cu.cuGraphLaunch, self._exec, current_stream_handle(i))

    def pool(self) -> int:
        """This graph's private pool key (pass it as ``pool=`` to share the memory with another capture)."""
        check(self._pool is not None, "CUDAGraph.pool: the graph has no pool (not captured)")
        return self._pool

    def defer_check(self, flag, message, exc_type=RuntimeError) -> None:
        """Register an int32 device flag that a captured op sets to non-zero on bad input (instead of reading it
        during capture); :meth:`check_errors` reads it after a replay. ``message`` is a string or a callable
        returning one."""
        self._checks.append((flag, message, exc_type))

    def check_errors(self) -> None:
        """Wait for the replayed work and raise what a captured op would have raised eagerly (an ``embedding``
        index outside the table, say): reads every flag registered during capture (a host synchronisation).

        Raises:
            the registered exception types, with their messages.
        """
        for flag, message, exc_type in self._checks:
            if int(flag.item()) != 0:
                raise exc_type(message() if callable(message) else message)

    def reset(self) -> None:
        """Free the graph and release its pool (its memory returns to the device at the next ``empty_cache``
        once no other graph holds it). The tensors the capture produced stay valid as ordinary memory."""
        ex, g, pool = self._exec, self._graph, self._pool
        self._exec = self._graph = self._pool = self._stream = None
        self._checks = []
        if D.cu is None:
            return
        if ex is not None:
            D.cu.cuGraphExecDestroy(ex)
        if g is not None:
            D.cu.cuGraphDestroy(g)
        if pool is not None:
            B.allocator(self.device_index).release_pool(pool)

    def __del__(self):
        try:
            if self._stream is None or self._exec is not None:   # never end another's capture from a finalizer
                self.reset()
        except Exception:
            pass


_side_streams: dict[int, Stream] = {}


class graph:
    """``with nbx.cuda.graph(g): ...`` captures the block's GPU work into ``g`` (``torch.cuda.graph``).

    On entry: the device is synchronised and garbage collected (so memory freed by finalizers returns to the
    cache first, as PyTorch does), a side stream (``stream``, or one kept per device) waits for the current
    stream and becomes current, and capture begins. On exit the capture ends and the graph is instantiated;
    when the block raised, the capture is ended and dropped and the block's exception propagates.

    Args:
        cuda_graph: the :class:`CUDAGraph` to capture into.
        pool: a pool key to share (see :meth:`CUDAGraph.capture_begin`).
        stream: the stream to capture on (not the default stream).
        capture_error_mode: as :meth:`CUDAGraph.capture_begin`.
    """

    def __init__(self, cuda_graph: CUDAGraph, pool: int | None = None, stream: Stream | None = None,
                 capture_error_mode: str = "global"):
        check(isinstance(cuda_graph, CUDAGraph), lambda: f"graph: expected a CUDAGraph, got "
              f"{type(cuda_graph).__name__}", TypeError)
        self.cuda_graph = cuda_graph
        self.pool = pool
        self.stream = stream
        self.mode = capture_error_mode
        self._ctx: StreamContext | None = None

    def __enter__(self):
        i = C.current_device()
        s = self.stream
        if s is None:
            s = _side_streams.get(i)
            if s is None:
                s = _side_streams[i] = Stream(i)
        check(s.cuda_stream != 0, "graph: CUDA graphs must be captured on a non-default stream")
        C.ensure_context(i)
        D.call(D.cu.cuCtxSynchronize)
        gc.collect()
        s.wait_stream(current_stream(i))
        self._ctx = StreamContext(s)
        self._ctx.__enter__()
        try:
            self.cuda_graph.capture_begin(self.pool, self.mode)
        except BaseException:
            self._ctx.__exit__(None, None, None)
            raise
        return self.cuda_graph

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is None:
                self.cuda_graph.capture_end()
            else:
                try:
                    self.cuda_graph.capture_end()
                except Exception:
                    pass
                self.cuda_graph.reset()
        finally:
            s = self._ctx.stream
            self._ctx.__exit__(None, None, None)
            current_stream(s.device_index).wait_stream(s)   # later work sees what the capture's warm-up wrote
        return False


def capture_verified(body, what: str):
    """``(graph, static output)`` of ``body``, a function of no arguments that queues GPU work and returns one
    tensor, captured only after proving the capture right: ``body()`` runs once eagerly (compiling its kernels,
    and giving the reference), a second call is captured into a :class:`CUDAGraph`, and the graph's first replay
    must give the same output bytes as the eager run. ``body`` must read only device tensors (its static inputs)
    and may run twice (an idempotent step: the model runners' passes and decode steps are).

    Raises:
        RuntimeError: the replay's bytes differ from the eager run's (naming ``what`` and how many values differ);
            the graph is reset first. Capture errors as :class:`graph` raises them.
    """
    ref = body().cpu().numpy()
    g = CUDAGraph()
    with graph(g):
        out = body()
    g.replay()
    got = out.cpu().numpy()
    if got.tobytes() != ref.tobytes():
        g.reset()
        raise RuntimeError(f"{what}: the captured CUDA graph replayed to a different result than the eager pass "
                           f"({int((got != ref).sum())} of {got.size} values differ); run it eagerly "
                           "(cuda_graphs = False, or NBX_CUDA_GRAPHS=0) and report this")
    return g, out
