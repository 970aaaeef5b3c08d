"""Reading tensor bytes from safetensors files into device memory: the streamed pipeline, load statistics and
the progress display.

The pipeline (used for every device other than a memory-mapped CPU load):

1. every destination is allocated first (an out-of-memory error comes before any byte is read);
2. the requested byte ranges are cut into chunks of :data:`CHUNK_BYTES`;
3. :data:`READERS` reader threads fill staging buffers with ``os.preadv`` (positional reads: no shared file
   position, the GIL is released) while the calling thread hands filled buffers to the device backend's
   ``write`` (which releases the GIL during the copy), so reading chunk ``k+1`` overlaps uploading chunk ``k``;
4. staging buffers are pinned host memory for ``cuda`` (``nbxtensor.cuda.pin_memory``; the backend's ``write``
   then DMAs straight from the buffer the file was read into), else ordinary host memory; with ``READERS = 0``
   the same steps run one after another in the calling thread (the non-overlapped fallback).

Nothing is returned until every byte has arrived; on any error the partial allocations are dropped (their
storages are freed by their backends' finalizers) and the reader threads are stopped before the error
propagates.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from ..device.base import Storage, backend_for
from ..device.base import device as Device
from ..shapes import contiguous_strides
from ..tensor.core import Tensor
from .header import Header, SafetensorError, TensorInfo, read_header

__all__ = ["LoadStats", "StateDict", "Progress", "Source", "open_source", "stream_tensors", "CHUNK_BYTES", "READERS",
           "PROGRESS_MIN_BYTES"]

CHUNK_BYTES = 64 << 20       # staging buffer size: large enough to amortise a copy's launch, small enough to pipeline
READERS = 2                  # reader threads; 0 = read and write one after another in the calling thread
PROGRESS_MIN_BYTES = 256 << 20  # progress=None shows a bar for loads at least this large (and only on a TTY)


@dataclass
class LoadStats:
    """What a load moved and how fast.

    Attributes:
        device: the destination device, as a string.
        mode: ``"mmap"`` (CPU, zero-copy mapping: bytes are read lazily on first touch, so ``seconds`` measures
            validation and mapping, not reading) or ``"stream"`` (bytes read and written now).
        files: files opened.
        tensors: tensors returned.
        nbytes: tensor bytes returned.
        seconds: wall time of the load, from opening the first file to returning.
        copied_bytes: in ``mmap`` mode, bytes copied because a tensor's offset is misaligned for its dtype.
        overlapped: whether reading ran in threads overlapped with writing.
        staging: ``"pinned"`` or ``"pageable"`` staging buffers (``""`` in ``mmap`` mode).
    """

    device: str = "cpu"
    mode: str = "stream"
    files: int = 0
    tensors: int = 0
    nbytes: int = 0
    seconds: float = 0.0
    copied_bytes: int = 0
    overlapped: bool = False
    staging: str = ""

    @property
    def gb_per_s(self) -> float:
        """The read rate in GB/s (10**9 bytes per second); ``inf`` for an instantaneous load."""
        return self.nbytes / self.seconds / 1e9 if self.seconds > 0 else float("inf")

    def add(self, other: "LoadStats") -> None:
        self.files += other.files
        self.tensors += other.tensors
        self.nbytes += other.nbytes
        self.seconds += other.seconds
        self.copied_bytes += other.copied_bytes

    def __str__(self) -> str:
        gb = self.nbytes / 1e9
        if self.mode == "mmap":
            return (f"mapped {self.tensors} tensors, {gb:.3f} GB from {self.files} file(s) in {self.seconds:.3f} s "
                    f"(zero-copy; pages are read on first use; {self.copied_bytes} bytes copied for misaligned "
                    "tensors)")
        return (f"loaded {self.tensors} tensors, {gb:.3f} GB in {self.seconds:.3f} s ({self.gb_per_s:.2f} GB/s) to "
                f"{self.device}")


class StateDict(dict):
    """``dict`` of name -> Tensor returned by the loaders, with the load's :class:`LoadStats` in ``stats`` and the
    file's ``__metadata__`` (or a sharded index's ``metadata``) in ``metadata``."""

    stats: LoadStats
    metadata: dict | None

    def __init__(self, *args, stats: LoadStats | None = None, metadata: dict | None = None, **kw):
        super().__init__(*args, **kw)
        self.stats = stats if stats is not None else LoadStats()
        self.metadata = metadata


class Progress:
    """A byte counter shown as a tqdm bar when tqdm is importable, else as one rewritten stderr line.

    ``enabled=None`` shows it only when stderr is a TTY and ``total >= PROGRESS_MIN_BYTES``; ``True`` always
    (even when stderr is not a TTY); ``False`` never.
    """

    def __init__(self, total: int, desc: str, enabled: bool | None = None, stream=None):
        self.total, self.done, self.desc = total, 0, desc
        self.stream = stream if stream is not None else sys.stderr
        if enabled is None:
            isatty = getattr(self.stream, "isatty", None)
            enabled = bool(isatty and isatty()) and total >= PROGRESS_MIN_BYTES
        self.enabled = enabled
        self._bar = None
        self._t0 = time.perf_counter()
        self._last = 0.0
        if enabled:
            try:
                from tqdm import tqdm
                self._bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1000,
                                 file=self.stream, leave=True)
            except ImportError:
                self._bar = None

    def update(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(n)
            return
        now = time.perf_counter()
        if now - self._last >= 0.25 or self.done >= self.total:
            self._last = now
            dt = max(now - self._t0, 1e-9)
            pct = 100.0 * self.done / self.total if self.total else 100.0
            self.stream.write(f"\r{self.desc}: {self.done / 1e9:.2f}/{self.total / 1e9:.2f} GB ({pct:5.1f}%) "
                              f"{self.done / dt / 1e9:.2f} GB/s")
            self.stream.flush()

    def close(self) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
        else:
            self.stream.write("\n")
            self.stream.flush()


@dataclass
class Source:
    """An open safetensors file with its validated header (the file stays open until :meth:`close`)."""

    path: str
    file: object
    header: Header

    @property
    def fd(self) -> int:
        return self.file.fileno()

    def close(self) -> None:
        self.file.close()


def open_source(path: str) -> Source:
    """Open ``path`` and validate its header (nothing else is read).

    Raises:
        SafetensorError: a header that breaks a rule (see :mod:`nbxtensor.io.header`).
        OSError: the file cannot be opened.
    """
    f = open(path, "rb")
    try:
        header = read_header(f, os.fstat(f.fileno()).st_size, file=path)
    except BaseException:
        f.close()
        raise
    return Source(path, f, header)


@dataclass
class _Piece:
    dst: int        # index of the destination tensor
    dst_off: int    # byte offset in the destination
    lo: int         # byte range [lo, hi) in the chunk
    hi: int


@dataclass
class _Chunk:
    source: Source
    file_off: int
    nbytes: int
    pieces: list = field(default_factory=list)


def _plan(requests: list[tuple[Source, list[TensorInfo]]], chunk_bytes: int) -> list[_Chunk]:
    """Cut the requested tensors' bytes into chunks: runs of tensors adjacent in the file are read together."""
    chunks: list[_Chunk] = []
    idx = 0
    for src, infos in requests:
        order = sorted(range(len(infos)), key=lambda i: infos[i].begin)
        runs: list[list[int]] = []
        for i in order:
            if infos[i].nbytes == 0:
                continue
            if runs and infos[runs[-1][-1]].end == infos[i].begin:
                runs[-1].append(i)
            else:
                runs.append([i])
        for run in runs:
            lo, hi = infos[run[0]].begin, infos[run[-1]].end
            k = 0
            for c0 in range(lo, hi, chunk_bytes):
                c1 = min(c0 + chunk_bytes, hi)
                ch = _Chunk(src, src.header.data_start + c0, c1 - c0)
                while k < len(run) and infos[run[k]].end <= c0:
                    k += 1
                j = k
                while j < len(run) and infos[run[j]].begin < c1:
                    t = infos[run[j]]
                    a, b = max(t.begin, c0), min(t.end, c1)
                    ch.pieces.append(_Piece(idx + run[j], a - t.begin, a - c0, b - c0))
                    j += 1
                chunks.append(ch)
        idx += len(infos)
    return chunks


def _pread_into(fd: int, buf: memoryview, offset: int) -> int:
    """One positional read into ``buf``; returns the bytes read (0 at end of file)."""
    if hasattr(os, "preadv"):
        return os.preadv(fd, [buf], offset)
    data = os.pread(fd, len(buf), offset)
    buf[:len(data)] = data
    return len(data)


def _read_chunk(ch: _Chunk, buf: np.ndarray) -> None:
    mv = memoryview(buf)[:ch.nbytes]
    got = 0
    while got < ch.nbytes:
        k = _pread_into(ch.source.fd, mv[got:], ch.file_off + got)
        if k <= 0:
            raise SafetensorError(ch.source.path, None, "past-end", f"the file ended at byte {ch.file_off + got} "
                                  f"while {ch.nbytes - got} more were expected (it changed after its header was read)")
        got += k


def _pinner(dev: Device):
    """``nbxtensor.cuda.pin_memory`` for a ``cuda`` destination (a CPU tensor -> its copy in page-locked host
    memory, from the CUDA package's pinned pool), else ``None``."""
    if dev.type != "cuda":
        return None
    try:
        from .. import cuda as _cuda
        return _cuda.pin_memory
    except (ImportError, AttributeError):
        return None


def _host_buffer(nbytes: int) -> np.ndarray:
    raw = np.empty(nbytes + 4095, dtype=np.uint8)
    shift = (-raw.ctypes.data) % 4096
    return raw[shift:shift + nbytes]


def _staging(dev: Device, count: int, nbytes: int) -> tuple[list[np.ndarray], str, list]:
    """``count`` staging buffers of ``nbytes``: pinned when the device offers it (DMA straight from the buffer the
    file was read into), else pageable (also when pinning fails: pinned memory is a limited resource).

    Returns:
        the uint8 arrays, ``"pinned"`` or ``"pageable"``, and the objects that must stay alive while the arrays
        are used (the pinned tensors).
    """
    pin = _pinner(dev)
    if pin is not None and nbytes:
        from ..dtypes.table import uint8
        from ..tensor.core import host_view, new_empty
        try:
            keep = [pin(new_empty((nbytes,), uint8, Device("cpu"))) for _ in range(count)]
            return [host_view(t) for t in keep], "pinned", keep
        except Exception:  # noqa: BLE001 - out of pinned memory, no driver: pageable buffers work everywhere
            pass
    return [_host_buffer(nbytes) for _ in range(count)], "pageable", []


def stream_tensors(requests: list[tuple[Source, list[TensorInfo]]], dev: Device, *, progress: bool | None = None,
                   desc: str = "loading", chunk_bytes: int | None = None,
                   readers: int | None = None) -> tuple[list[Tensor], LoadStats]:
    """Read the tensors ``requests`` names (per open source, a list of header entries) into new contiguous tensors
    on ``dev``.

    Returns:
        the tensors, in request order, and the :class:`LoadStats` of the transfer.

    Raises:
        SafetensorError: a file that changed after its header was read (``past-end``); a BOOL tensor holding a
            byte other than 0 or 1 (``bool-value``).
        nbxtensor.OutOfMemoryError: from the destination allocator, before any byte is read.
        Whatever the backend's ``write`` raises. In every case no tensor is returned and the partial
        allocations are released.
    """
    t0 = time.perf_counter()
    chunk_bytes = CHUNK_BYTES if chunk_bytes is None else chunk_bytes
    readers = READERS if readers is None else readers
    infos = [t for _, ts in requests for t in ts]
    backend = backend_for(dev)
    total = sum(t.nbytes for t in infos)
    storages: list[Storage] = []
    progress_bar = None
    try:
        for t in infos:
            storages.append(backend.allocate(t.nbytes, dev))
        chunks = _plan(requests, chunk_bytes)
        bufsize = max((c.nbytes for c in chunks), default=0)
        overlapped = readers > 0 and len(chunks) > 1
        readers = min(readers, len(chunks))
        bufs, staging, keep = _staging(dev, readers + 1 if overlapped else min(1, len(chunks)), bufsize)
        progress_bar = Progress(total, desc, progress)

        def write(ch: _Chunk, buf: np.ndarray) -> None:
            for p in ch.pieces:
                view = buf[p.lo:p.hi]
                t = infos[p.dst]
                if t.code == "BOOL" and view.size and int(view.max()) > 1:
                    raise SafetensorError(ch.source.path, t.name, "bool-value", "a BOOL tensor holds a byte other "
                                          "than 0 or 1")
                backend.write(storages[p.dst], p.dst_off, view)
            progress_bar.update(ch.nbytes)

        if not overlapped:
            for ch in chunks:
                _read_chunk(ch, bufs[0])
                write(ch, bufs[0])
        else:
            _run_overlapped(chunks, write, bufs, readers)
        backend.synchronize(dev)
        tensors = [Tensor(st, t.shape, contiguous_strides(t.shape), 0, t.dtype) for st, t in zip(storages, infos)]
    except BaseException:
        storages.clear()  # the traceback keeps this frame alive: drop the partial allocations now
        raise
    finally:
        if progress_bar is not None:
            progress_bar.close()
    del bufs, keep  # pinned staging goes back to the CUDA package's pool
    stats = LoadStats(device=str(dev), mode="stream", files=len(requests), tensors=len(tensors), nbytes=total,
                      seconds=time.perf_counter() - t0, overlapped=overlapped, staging=staging)
    return tensors, stats


def _run_overlapped(chunks: list[_Chunk], write, bufs: list[np.ndarray], readers: int) -> None:
    """Reader threads fill buffers from a free pool; the calling thread writes each filled buffer and returns it."""
    free: queue.Queue = queue.Queue()
    for b in bufs:
        free.put(b)
    filled: queue.Queue = queue.Queue()
    stop = threading.Event()
    lock = threading.Lock()
    todo = iter(chunks)

    def reader() -> None:
        while not stop.is_set():
            with lock:
                ch = next(todo, None)
            if ch is None:
                return
            buf = None
            while buf is None:
                if stop.is_set():
                    return
                try:
                    buf = free.get(timeout=0.05)
                except queue.Empty:
                    pass
            try:
                _read_chunk(ch, buf)
            except BaseException as e:  # handed to the calling thread, which raises it
                filled.put((ch, None, e))
                return
            filled.put((ch, buf, None))

    threads = [threading.Thread(target=reader, name=f"nbx-safetensors-reader-{i}", daemon=True)
               for i in range(readers)]
    for th in threads:
        th.start()
    try:
        for _ in range(len(chunks)):
            ch, buf, err = filled.get()
            if err is not None:
                raise err
            write(ch, buf)
            free.put(buf)
    finally:
        stop.set()
        for th in threads:
            th.join()
