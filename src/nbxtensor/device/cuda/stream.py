"""CUDA streams and events, with PyTorch's names and semantics.

Every device has a *default stream* (the legacy NULL stream, handle 0). Each thread has a *current stream* per
device, the default stream until changed with :class:`StreamContext` (``nbx.cuda.stream(s)``) or
:func:`set_stream`. Work nbxtensor queues (copies, kernels) goes to the current stream of its device. Streams
created here are non-blocking (they do not synchronise with the NULL stream), as PyTorch's pool streams.

Sources: ``torch.cuda.Stream``/``Event`` (https://pytorch.org/docs/stable/cuda.html); the CUDA driver API
stream and event management chapters.
"""

from __future__ import annotations

import threading

from ..._errors import check
from . import context as C
from . import driver as D

__all__ = ["Stream", "Event", "current_stream", "default_stream", "set_stream", "StreamContext",
           "current_stream_handle", "synchronize"]

_tls = threading.local()


class Stream:
    """A CUDA stream on one device (``torch.cuda.Stream``).

    Args:
        device: the device (default: current).
        priority: lower numbers are higher priority (0 default; the driver clamps to its range).

    Attributes:
        device: ``nbx.device("cuda", i)``.
        device_index: ``i``.
        cuda_stream: the raw ``CUstream`` handle as an int (0 for a default stream).
    """

    __slots__ = ("device_index", "cuda_stream", "priority", "_owned", "__weakref__")

    def __init__(self, device=None, priority: int = 0, *, _handle: int | None = None, _index: int | None = None):
        if _handle is not None:
            self.device_index = _index
            self.cuda_stream = _handle
            self.priority = 0
            self._owned = False
            return
        i = C.device_index(device, fn="Stream")
        C.ensure_context(i)
        flags = int(D.cu.CUstream_flags.CU_STREAM_NON_BLOCKING)
        h = D.call(D.cu.cuStreamCreateWithPriority, flags, int(priority))
        self.device_index = i
        self.cuda_stream = int(h)
        self.priority = int(priority)
        self._owned = True

    @property
    def device(self):
        from ..base import device
        return device("cuda", self.device_index)

    def synchronize(self) -> None:
        """Wait for all work queued on this stream."""
        C.ensure_context(self.device_index)
        D.call(D.cu.cuStreamSynchronize, self.cuda_stream)

    def query(self) -> bool:
        """True when all work queued on this stream has completed (does not block)."""
        C.ensure_context(self.device_index)
        (err,) = D.cu.cuStreamQuery(self.cuda_stream)
        code = int(err)
        if code == D.NOT_READY:
            return False
        if code:
            D.raise_error(D.cu.cuStreamQuery, code, (self.cuda_stream,))
        return True

    def wait_event(self, event: "Event") -> None:
        """Make later work on this stream wait for ``event`` (no host blocking)."""
        check(isinstance(event, Event), lambda: f"Stream.wait_event: expected an Event, got {type(event).__name__}",
              TypeError)
        if event._handle is None:  # never recorded: nothing to wait for (as PyTorch)
            return
        C.ensure_context(self.device_index)
        D.call(D.cu.cuStreamWaitEvent, self.cuda_stream, event._handle, 0)

    def wait_stream(self, stream: "Stream") -> None:
        """Make later work on this stream wait for the work queued so far on ``stream``."""
        self.wait_event(stream.record_event())

    def record_event(self, event: "Event | None" = None) -> "Event":
        """Record ``event`` (a new one by default) on this stream and return it."""
        event = Event() if event is None else event
        event.record(self)
        return event

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Stream) and other.cuda_stream == self.cuda_stream
                and other.device_index == self.device_index)

    def __hash__(self) -> int:
        return hash((self.cuda_stream, self.device_index))

    def __repr__(self) -> str:
        return f"<nbx.cuda.Stream device=cuda:{self.device_index} cuda_stream=0x{self.cuda_stream:x}>"

    def __del__(self):
        if getattr(self, "_owned", False) and D.cu is not None:
            try:  # the driver destroys it once its queued work completes
                D.cu.cuStreamDestroy(self.cuda_stream)
            except Exception:
                pass


_defaults: dict[int, Stream] = {}


def default_stream(device=None) -> Stream:
    """The default (NULL) stream of ``device`` (default: current)."""
    i = C.device_index(device, fn="default_stream")
    s = _defaults.get(i)
    if s is None:
        s = _defaults[i] = Stream(_handle=0, _index=i)
    return s


def _current_map() -> dict[int, Stream]:
    m = getattr(_tls, "streams", None)
    if m is None:
        m = _tls.streams = {}
    return m


def current_stream(device=None) -> Stream:
    """The calling thread's current stream on ``device`` (default: current device)."""
    i = C.device_index(device, fn="current_stream")
    s = _current_map().get(i)
    return s if s is not None else default_stream(i)


def current_stream_handle(i: int | None = None) -> int:
    """The raw handle of the current stream on device ``i`` (fast; no checks): what launches and copies use."""
    m = getattr(_tls, "streams", None)
    if m is None:
        return 0
    s = m.get(C.current_device() if i is None else i)
    return 0 if s is None else s.cuda_stream


def set_stream(stream: Stream) -> None:
    """Make ``stream`` the calling thread's current stream on its device (``torch.cuda.set_stream``)."""
    check(isinstance(stream, Stream), lambda: f"set_stream: expected a Stream, got {type(stream).__name__}", TypeError)
    _current_map()[stream.device_index] = stream


class StreamContext:
    """``with nbx.cuda.stream(s):`` makes ``s`` the current stream of its device and that device current, then
    restores both (``torch.cuda.StreamContext``). ``None`` does nothing."""

    __slots__ = ("stream", "_saved")

    def __init__(self, stream: Stream | None):
        check(stream is None or isinstance(stream, Stream), lambda: "stream: expected a Stream or None, got "
              f"{type(stream).__name__}", TypeError)
        self.stream = stream
        self._saved: list = []

    def __enter__(self):
        s = self.stream
        if s is None:
            return None
        m = _current_map()
        self._saved.append((C.current_device(), m.get(s.device_index)))
        C._tls.device = s.device_index
        C.ensure_context(s.device_index)
        m[s.device_index] = s
        return s

    def __exit__(self, *exc):
        s = self.stream
        if s is None:
            return False
        dev, prev = self._saved.pop()
        m = _current_map()
        if prev is None:
            m.pop(s.device_index, None)
        else:
            m[s.device_index] = prev
        C._tls.device = dev
        if dev != s.device_index:
            C.ensure_context(dev)
        return False


class Event:
    """A CUDA event (``torch.cuda.Event``): a marker in a stream that other streams and the host can wait for.

    Args:
        enable_timing: record timestamps, so :meth:`elapsed_time` works (costs a little per record).
        blocking: :meth:`synchronize` sleeps instead of spinning.
        interprocess: not supported (raises).

    The driver event is created at the first :meth:`record`, on the recording stream's device.
    """

    __slots__ = ("enable_timing", "blocking", "_handle", "device_index", "__weakref__")

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        check(not interprocess, "Event: interprocess events are not supported by nbxtensor", NotImplementedError)
        self.enable_timing = bool(enable_timing)
        self.blocking = bool(blocking)
        self._handle = None
        self.device_index: int | None = None

    def _create(self, i: int) -> None:
        cu = D.cu
        flags = 0
        if not self.enable_timing:
            flags |= int(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING)
        if self.blocking:
            flags |= int(cu.CUevent_flags.CU_EVENT_BLOCKING_SYNC)
        C.ensure_context(i)
        self._handle = D.call(cu.cuEventCreate, flags)
        self.device_index = i

    def record(self, stream: Stream | None = None) -> None:
        """Record the event on ``stream`` (default: the current stream of the current device).

        Raises:
            RuntimeError: ``stream`` is on another device than an earlier record of this event.
        """
        if stream is None:
            stream = current_stream()
        if self._handle is None:
            self._create(stream.device_index)
        check(stream.device_index == self.device_index, lambda: f"Event.record: event is on cuda:{self.device_index} "
              f"but the stream is on cuda:{stream.device_index}")
        C.ensure_context(self.device_index)
        D.call(D.cu.cuEventRecord, self._handle, stream.cuda_stream)

    def wait(self, stream: Stream | None = None) -> None:
        """Make later work on ``stream`` (default: current) wait for this event."""
        (stream if stream is not None else current_stream()).wait_event(self)

    def query(self) -> bool:
        """True when the work before the record has completed (True for a never-recorded event, as PyTorch)."""
        if self._handle is None:
            return True
        (err,) = D.cu.cuEventQuery(self._handle)
        code = int(err)
        if code == D.NOT_READY:
            return False
        if code:
            D.raise_error(D.cu.cuEventQuery, code, (self._handle,))
        return True

    def synchronize(self) -> None:
        """Block the host until the recorded work completes (no-op for a never-recorded event)."""
        if self._handle is not None:
            D.call(D.cu.cuEventSynchronize, self._handle)

    def elapsed_time(self, end_event: "Event") -> float:
        """Milliseconds between this event's record and ``end_event``'s (both recorded and completed).

        Raises:
            RuntimeError: either event was created without ``enable_timing=True`` or has not been recorded.
        """
        check(self.enable_timing and end_event.enable_timing, "Event.elapsed_time: both events must be created "
              "with enable_timing=True")
        check(self._handle is not None and end_event._handle is not None, "Event.elapsed_time: both events must "
              "be recorded before calculating elapsed time")
        return float(D.call(D.cu.cuEventElapsedTime, self._handle, end_event._handle))

    @property
    def cuda_event(self) -> int:
        return 0 if self._handle is None else int(self._handle)

    def __repr__(self) -> str:
        return f"<nbx.cuda.Event {'uninitialized' if self._handle is None else hex(self.cuda_event)}>"

    def __del__(self):
        h = getattr(self, "_handle", None)
        if h is not None and D.cu is not None:
            try:
                D.cu.cuEventDestroy(h)
            except Exception:
                pass


def synchronize(device=None) -> None:
    """Wait for all work on ``device`` (default: current) to complete (``torch.cuda.synchronize``)."""
    i = C.device_index(device, fn="synchronize")
    C.ensure_context(i)
    D.call(D.cu.cuCtxSynchronize)
