"""safetensors files: :func:`load_file`, :func:`safe_open` (lazy, per tensor, slices) and :func:`save_file`.

Format and rules: :mod:`nbxtensor.io.header`. API after the reference package
(https://huggingface.co/docs/safetensors/api/torch), with nbxtensor tensors.

On the CPU a file is memory-mapped copy-on-write (``mmap.ACCESS_COPY``, ``MAP_PRIVATE``: what PyTorch's
safetensors loader does through ``UntypedStorage.from_file(shared=False)``), and each tensor whose offset is
a multiple of its itemsize wraps the mapping without a copy. The tensors are writable; writes stay in this
process and never reach the file. Where the system refuses a copy-on-write mapping, the mapping is read-only and
so are the tensors (writes raise; ``clone()`` gives a writable copy). A tensor whose offset is misaligned is
copied into ordinary aligned memory. The mapping lives as long as any tensor from it. As with every mmap loader,
truncating the file while its tensors are alive is undefined (the process may get ``SIGBUS``).

To any other device (``cuda``) the bytes are streamed: see :mod:`nbxtensor.io.stream`.
"""

from __future__ import annotations

import mmap
import operator
import os
import sys
import time

import numpy as np

from .._errors import check
from ..device.base import Storage, as_device
from ..device.base import device as Device
from ..device.cpu import cpu_backend
from ..dtypes.table import DType
from ..shapes import contiguous_strides, storage_span
from ..tensor.core import Tensor, _download, host_view, new_empty
from .header import METADATA_KEY, DTYPE_ORDER, Header, SafetensorError, TensorInfo, encode_header, read_header
from .stream import LoadStats, StateDict, open_source, stream_tensors

__all__ = ["load_file", "safe_open", "save_file", "SafeSlice", "load", "save"]

_FRAMEWORKS = (None, "nbx", "nbxtensor")


def _check_host() -> None:
    check(sys.byteorder == "little", "safetensors: files are little-endian and nbxtensor reads them only on "
          "little-endian hosts", NotImplementedError)


class _Mapping:
    """A copy-on-write (else read-only) memory map of a whole file, with its validated header."""

    def __init__(self, path: str):
        _check_host()
        self.path = path
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < 8:
                read_header(f, size, file=path)  # raises header-length
            try:
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
                self.readonly = False
            except (OSError, ValueError):
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
                self.readonly = True
        # The header is parsed from the mapping itself, so header and data come from one view of the file.
        self.header: Header = read_header(mm, len(mm), file=path)
        self.buf = np.frombuffer(mm, dtype=np.uint8)  # holds the mapping open as long as any view of it lives
        if self.readonly:
            self.buf.flags.writeable = False

    def raw(self, t: TensorInfo) -> np.ndarray:
        start = self.header.data_start + t.begin
        return self.buf[start:start + t.nbytes]

    def tensor(self, t: TensorInfo) -> tuple[Tensor, int]:
        """The tensor for entry ``t`` (zero-copy when aligned) and the bytes copied to build it."""
        raw = self.raw(t)
        if t.code == "BOOL" and raw.size and int(raw.max()) > 1:
            raise SafetensorError(self.path, t.name, "bool-value", "a BOOL tensor holds a byte other than 0 or 1")
        if t.nbytes == 0 or raw.ctypes.data % t.dtype.itemsize:
            out = new_empty(t.shape, t.dtype, Device("cpu"))
            if t.nbytes:
                cpu_backend.write(out.untyped_storage(), 0, raw)
            return out, t.nbytes
        # The storage's handle is the uint8 slice of the mapping itself, so every NumPy view of the tensor (from
        # .numpy()) keeps the mapping alive through its base chain, even after the tensor is gone.
        # (device.cpu.wrap_host_array builds its handle from a raw address, which only the Storage keeps alive.)
        storage = Storage(Device("cpu"), t.nbytes, raw.ctypes.data, raw, cpu_backend, readonly=self.readonly,
                          owner=self.buf)
        return Tensor(storage, t.shape, contiguous_strides(t.shape), 0, t.dtype), 0


def _check_framework(framework: object, fn: str) -> None:
    check(framework in _FRAMEWORKS, lambda: f"{fn}: framework must be None, 'nbx' or 'nbxtensor' (tensors are "
          f"nbxtensor tensors), got {framework!r}", ValueError)


def load_file(filename: str | os.PathLike, device: str | Device | int = "cpu", *, mmap: bool = True,
              progress: bool | None = None, verbose: bool = False) -> StateDict:
    """Load every tensor of a safetensors file (``safetensors.torch.load_file``).

    Args:
        filename: the file.
        device: where the tensors go (``"cpu"``, ``"cuda"``, ``"cuda:1"``, an index).
        mmap: on the CPU, map the file copy-on-write and wrap it without copying (default): the tensors are
            writable and writes never reach the file (read-only tensors only where the system refuses a
            copy-on-write mapping; see the module docstring). ``False`` reads every byte now into ordinary
            memory (through the same streamed pipeline as a GPU load). Ignored for other devices.
        progress: show a progress bar (tqdm if importable, else a stderr line): ``None`` shows it for loads of at
            least 256 MiB when stderr is a TTY; ``True`` always; ``False`` never.
        verbose: print ``loaded N tensors, X GB in Y s (Z GB/s)`` to stderr when done.

    Returns:
        a :class:`~nbxtensor.io.stream.StateDict` (a ``dict`` name -> contiguous Tensor in header order) whose
        ``stats`` holds bytes, seconds and the read rate, and whose ``metadata`` holds ``__metadata__``.
        Shapes and dtypes are as the header declares (every code of the dtype table, BF16 and F8 included).

    Raises:
        SafetensorError: (a ``ValueError``) for a file that breaks a rule of the format, naming the file, the
            tensor and the rule (:mod:`nbxtensor.io.header`); no tensor is returned.
        OSError: the file cannot be read.
        nbxtensor.OutOfMemoryError: the device cannot hold the tensors (raised before any byte is read).

    Example:
        >>> import nbxtensor as nbx, tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "m.safetensors")
        >>> nbx.save_file({"w": nbx.ones(2, 3, dtype=nbx.bfloat16)}, p)
        >>> sd = nbx.load_file(p)
        >>> sd["w"].shape, sd["w"].dtype
        (nbx.Size([2, 3]), nbx.bfloat16)
    """
    path = os.fspath(filename)
    dev = as_device(device)
    t0 = time.perf_counter()
    if dev.type == "cpu" and mmap:
        m = _Mapping(path)
        out, stats = _map_all(m)
        stats.seconds = time.perf_counter() - t0
    else:
        _check_host()
        src = open_source(path)
        try:
            tensors, stats = stream_tensors([(src, list(src.header.tensors.values()))], dev, progress=progress,
                                            desc=os.path.basename(path))
        finally:
            src.close()
        out = dict(zip(src.header.tensors, tensors))
        stats.seconds = time.perf_counter() - t0
        m = src
    if verbose:
        print(str(stats), file=sys.stderr)
    return StateDict(out, stats=stats, metadata=m.header.metadata)


def _map_all(m: _Mapping) -> tuple[dict[str, Tensor], LoadStats]:
    out: dict[str, Tensor] = {}
    copied = 0
    for name, t in m.header.tensors.items():
        out[name], c = m.tensor(t)
        copied += c
    return out, LoadStats(device="cpu", mode="mmap", files=1, tensors=len(out),
                          nbytes=sum(t.nbytes for t in m.header.tensors.values()), copied_bytes=copied)


class safe_open:
    """Open a safetensors file lazily: the header is validated now, each tensor is read when asked for
    (``safetensors.safe_open``). Use as a context manager or call :meth:`close`.

    Args:
        filename: the file.
        framework: ``None``, ``"nbx"`` or ``"nbxtensor"`` (accepted for the reference's signature; tensors are
            always nbxtensor tensors).
        device: where :meth:`get_tensor` and slices put tensors.

    Raises:
        SafetensorError: a header that breaks a rule, naming the file, the tensor and the rule.
        ValueError: any other ``framework``.

    Example:
        >>> import nbxtensor as nbx, tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "m.safetensors")
        >>> nbx.save_file({"w": nbx.arange(12).view(3, 4)}, p, metadata={"format": "pt"})
        >>> with nbx.safe_open(p) as f:
        ...     f.keys(), f.metadata(), f.get_slice("w")[1:, -1].tolist()
        (['w'], {'format': 'pt'}, [7, 11])
    """

    def __init__(self, filename: str | os.PathLike, framework: str | None = None,
                 device: str | Device | int = "cpu"):
        _check_framework(framework, "safe_open")
        self._path = os.fspath(filename)
        self._dev = as_device(device)
        self._map: _Mapping | None = _Mapping(self._path)
        self._src = None
        self.stats = LoadStats(device=str(self._dev), mode="mmap" if self._dev.type == "cpu" else "stream", files=1)

    # -- context manager ------------------------------------------------------------------------
    def __enter__(self) -> "safe_open":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Release the file. Tensors already returned stay valid (they keep the mapping alive)."""
        self._map = None
        if self._src is not None:
            self._src.close()
            self._src = None

    def _m(self, fn: str) -> _Mapping:
        check(self._map is not None, lambda: f"safe_open.{fn}: the file {self._path!r} is closed")
        return self._map

    def _info(self, name: str, fn: str) -> TensorInfo:
        h = self._m(fn).header
        if name not in h.tensors:
            raise KeyError(f"safe_open.{fn}: {self._path}: no tensor named {name!r}")
        return h.tensors[name]

    # -- the reference's API ------------------------------------------------------------------------
    def keys(self) -> list[str]:
        """The tensor names, sorted (as the reference)."""
        return sorted(self._m("keys").header.tensors)

    def offset_keys(self) -> list[str]:
        """The tensor names in the order of their bytes in the file."""
        return [t.name for t in self._m("offset_keys").header.by_offset()]

    def metadata(self) -> dict[str, str] | None:
        """The ``__metadata__`` strings, or ``None`` when the file has none."""
        md = self._m("metadata").header.metadata
        return None if md is None else dict(md)

    def get_tensor(self, name: str) -> Tensor:
        """The tensor ``name`` on this object's device (CPU: zero-copy when aligned, as :func:`load_file`).

        Raises:
            KeyError: no tensor of that name.
        """
        t = self._info(name, "get_tensor")
        t0 = time.perf_counter()
        if self._dev.type == "cpu":
            out, copied = self._map.tensor(t)
            st = LoadStats(copied_bytes=copied)
        else:
            if self._src is None:
                self._src = open_source(self._path)
            (out,), st = stream_tensors([(self._src, [t])], self._dev, progress=False)
        st.tensors, st.nbytes, st.files, st.seconds = 1, t.nbytes, 0, time.perf_counter() - t0
        self.stats.add(st)
        return out

    def get_slice(self, name: str) -> "SafeSlice":
        """A lazy handle on tensor ``name``; index it (``f.get_slice("w")[:, 128:256]``) to read only those
        elements.

        Raises:
            KeyError: no tensor of that name.
        """
        return SafeSlice(self, self._info(name, "get_slice"))


class SafeSlice:
    """A lazy view of one tensor of a :class:`safe_open` file (the reference's ``PySafeSlice``).

    ``get_shape()`` and ``get_dtype()`` (the safetensors code, ``"BF16"``) answer from the header; indexing with
    integers, slices with positive steps and one ``...`` returns a new contiguous tensor on the file's device,
    reading only the pages that hold the selected elements. Semantics are NumPy's and PyTorch's basic indexing
    (negative indices count from the end, slice bounds are clipped); the reference rejects negative slice bounds
    and out-of-range starts, which are accepted here.

    Raises (on indexing):
        IndexError: an integer out of range, more indices than dims, two ellipses.
        ValueError: a slice step that is not positive (as PyTorch).
        TypeError: an index of another kind (``None``, lists, tensors of several elements, bools).
    """

    def __init__(self, owner: safe_open, info: TensorInfo):
        self._owner = owner
        self._info = info

    def get_shape(self) -> list[int]:
        return list(self._info.shape)

    def get_dtype(self) -> str:
        return self._info.code

    @property
    def shape(self) -> tuple[int, ...]:
        return self._info.shape

    @property
    def dtype(self) -> DType:
        return self._info.dtype

    def __len__(self) -> int:
        check(len(self._info.shape) > 0, "len() of a 0-d tensor", TypeError)
        return self._info.shape[0]

    def __getitem__(self, index) -> Tensor:
        t = self._info
        idx = _normalize_index(index, t.shape)
        m = self._owner._m("get_slice")
        t0 = time.perf_counter()
        raw = m.raw(t)
        if t.nbytes:
            sel = raw.view(t.dtype.numpy).reshape(t.shape)[idx]
        else:
            sel = np.empty(t.shape, dtype=t.dtype.numpy)[idx]
        if t.code == "BOOL" and sel.size and int(np.asarray(sel).view(np.uint8).max()) > 1:
            raise SafetensorError(m.path, t.name, "bool-value", "a BOOL tensor holds a byte other than 0 or 1")
        dev = self._owner._dev
        out = new_empty(sel.shape, t.dtype, dev)
        if sel.size:
            if dev.type == "cpu":
                np.copyto(host_view(out), sel)
            else:
                host = np.ascontiguousarray(sel)
                out.untyped_storage().backend.write(out.untyped_storage(), 0, host.reshape(-1).view(np.uint8))
        self._owner.stats.add(LoadStats(tensors=1, nbytes=out.nbytes, seconds=time.perf_counter() - t0))
        return out


def _normalize_index(index, shape: tuple[int, ...]) -> tuple:
    """Check a basic index (ints, positive-step slices, one Ellipsis) against ``shape``; ints wrapped."""
    items = index if isinstance(index, tuple) else (index,)
    ndim = len(shape)
    n_ell = sum(1 for i in items if i is Ellipsis)
    check(n_ell <= 1, "get_slice: an index can only have a single ellipsis ('...')", IndexError)
    n_dims = len(items) - n_ell
    check(n_dims <= ndim, lambda: f"get_slice: too many indices for tensor of dimension {ndim}", IndexError)
    out = []
    dim = 0
    for i in items:
        if i is Ellipsis:
            out.append(i)
            dim += ndim - n_dims
            continue
        if isinstance(i, slice):
            parts = []
            for p in (i.start, i.stop, i.step):
                check(p is None or not isinstance(p, (bool, np.bool_)), lambda: f"get_slice: slice bounds must be "
                      f"integers or None, got {i!r}", TypeError)
                try:
                    parts.append(None if p is None else operator.index(p))
                except TypeError:
                    raise TypeError(f"get_slice: slice bounds must be integers or None, got {i!r}") from None
            check(parts[2] is None or parts[2] > 0, "get_slice: slice step must be positive", ValueError)
            out.append(slice(*parts))
        else:
            check(not isinstance(i, (bool, np.bool_)) and i is not None, lambda: f"get_slice: unsupported index "
                  f"{i!r}: expected an int, a slice or ...", TypeError)
            try:
                k = operator.index(i)
            except TypeError:
                raise TypeError(f"get_slice: unsupported index {i!r}: expected an int, a slice or ...") from None
            size = shape[dim]
            check(-size <= k < size, lambda: f"get_slice: index {k} is out of bounds for dimension {dim} with size "
                  f"{size}", IndexError)
            out.append(k + size if k < 0 else k)
        dim += 1
    return tuple(out)


def _host_bytes(t: Tensor) -> np.ndarray:
    """The tensor's elements in row-major order as host bytes (no copy for a contiguous CPU tensor)."""
    if t.numel() == 0:
        return np.empty(0, dtype=np.uint8)
    a = host_view(t) if t.is_cpu else _download(t)
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def _check_tensors(tensors: object, metadata: object, fn: str) -> list[tuple[str, Tensor]]:
    check(isinstance(tensors, dict), lambda: f"{fn}: expected a dict of str -> Tensor, got "
          f"{type(tensors).__name__}", ValueError)
    items = list(tensors.items())
    for k, v in items:
        check(isinstance(k, str), lambda: f"{fn}: tensor names must be strings, got {type(k).__name__} {k!r}",
              ValueError)
        check(k != METADATA_KEY, lambda: f"{fn}: {METADATA_KEY!r} is reserved for the metadata and cannot name a "
              "tensor", ValueError)
        check(isinstance(v, Tensor), lambda: f"{fn}: key `{k}` is invalid, expected Tensor but received "
              f"{type(v).__name__}", ValueError)
        check(v.dtype.safetensors is not None, lambda: f"{fn}: tensor {k!r} has dtype {v.dtype.name}, which the "
              f"safetensors format cannot store (codes: {list(DTYPE_ORDER)})", ValueError)
    if metadata is not None:
        check(isinstance(metadata, dict), lambda: f"{fn}: argument 'metadata': expected a dict of str -> str, got "
              f"{type(metadata).__name__}", TypeError)
        for k, v in metadata.items():
            check(isinstance(k, str) and isinstance(v, str), lambda: f"{fn}: argument 'metadata': expected "
                  f"str -> str, got {type(k).__name__} {k!r} -> {type(v).__name__}", TypeError)
    # Tensors whose memory overlaps would come back as separate copies; the reference refuses them.
    spans = []
    for k, v in items:
        if v.numel() == 0:
            continue
        lo, hi = storage_span(v.shape, v.stride(), v.storage_offset())
        it = v.dtype.itemsize
        st = v.untyped_storage()
        spans.append((str(v.device), st.ptr + lo * it, st.ptr + hi * it, k))
    spans.sort()
    shared, reach = [], None  # reach: (device, end, name) of the span reaching furthest so far
    for dev, lo, hi, k in spans:
        if reach is not None and reach[0] == dev and lo < reach[1]:
            shared.append((reach[2], k))
        if reach is None or reach[0] != dev or hi > reach[1]:
            reach = (dev, hi, k)
    check(not shared, lambda: f"{fn}: some tensors share memory, which would be saved twice and loaded back as "
          f"separate tensors: {shared}; save one of them and rebuild the other after loading, or clone() it",
          RuntimeError)
    return items


def _layout(items: list[tuple[str, Tensor]]) -> tuple[list[tuple[str, str, tuple, int, int]], list[Tensor]]:
    """Order tensors as the reference writer does (dtype rank descending, then name) and assign offsets."""
    rank = {c: i for i, c in enumerate(DTYPE_ORDER)}
    ordered = sorted(items, key=lambda kv: (-rank[kv[1].dtype.safetensors], kv[0]))
    entries, pos = [], 0
    for k, v in ordered:
        n = v.nbytes
        entries.append((k, v.dtype.safetensors, tuple(v.shape), pos, pos + n))
        pos += n
    return entries, [v for _, v in ordered]


def save(tensors: dict[str, Tensor], metadata: dict[str, str] | None = None) -> bytes:
    """The bytes of a safetensors file holding ``tensors`` (``safetensors.torch.save``); see :func:`save_file`."""
    _check_host()
    items = _check_tensors(tensors, metadata, "save")
    entries, ordered = _layout(items)
    return b"".join([encode_header(entries, metadata)] + [_host_bytes(v).tobytes() for v in ordered])


def save_file(tensors: dict[str, Tensor], filename: str | os.PathLike, metadata: dict[str, str] | None = None) -> None:
    """Write ``tensors`` to a safetensors file (``safetensors.torch.save_file``).

    Byte for byte the file the reference writer produces for the same tensors: tensors ordered by dtype (8-byte
    types first, so each offset is a multiple of its itemsize) then by name; compact JSON padded with spaces to a
    multiple of 8 bytes (metadata keys are sorted; the reference writes several in an order that varies between
    runs). The file is written under a temporary name and renamed into place, so a failed save
    leaves no partial file at ``filename``. Nothing of the caller's is modified.

    Args:
        tensors: name -> Tensor on any device, any dtype with a safetensors code (all but complex128), any
            layout: a non-contiguous tensor is written as its elements in row-major order (the reference refuses
            non-contiguous tensors; stated difference).
        filename: the destination.
        metadata: optional ``__metadata__`` strings.

    Raises:
        ValueError: not a dict; a name that is not a string or is ``"__metadata__"``; a value that is not a
            Tensor (as the reference); a dtype with no safetensors code.
        TypeError: metadata that is not a dict of str -> str (as the reference).
        RuntimeError: tensors whose memory overlaps (tied weights, views of one buffer), as the reference
            ("Some tensors share memory"): save one and rebuild the other after loading, or ``clone()`` it.
        OSError: the file cannot be written.
    """
    _check_host()
    items = _check_tensors(tensors, metadata, "save_file")
    entries, ordered = _layout(items)
    path = os.fspath(filename)
    tmp = f"{path}.tmp-{os.getpid()}-{id(items):x}"
    try:
        with open(tmp, "xb") as f:
            f.write(encode_header(entries, metadata))
            for v in ordered:
                b = _host_bytes(v)
                if b.size:
                    f.write(memoryview(b))
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load(data: bytes, device: str | Device | int = "cpu") -> StateDict:
    """Load tensors from the bytes of a safetensors file (``safetensors.torch.load``); the tensors are copies.

    Raises:
        SafetensorError: as :func:`load_file`, with the file named ``<bytes>``.
    """
    _check_host()
    from .header import parse_bytes
    dev = as_device(device)
    h = parse_bytes(bytes(data), file="<bytes>")
    buf = np.frombuffer(data, dtype=np.uint8)
    out = {}
    t0 = time.perf_counter()
    for name, t in h.tensors.items():
        raw = buf[h.data_start + t.begin:h.data_start + t.end]
        if t.code == "BOOL" and raw.size and int(raw.max()) > 1:
            raise SafetensorError("<bytes>", name, "bool-value", "a BOOL tensor holds a byte other than 0 or 1")
        o = new_empty(t.shape, t.dtype, dev)
        if t.nbytes:
            o.untyped_storage().backend.write(o.untyped_storage(), 0, np.array(raw))
        out[name] = o
    stats = LoadStats(device=str(dev), mode="stream", files=0, tensors=len(out),
                      nbytes=sum(t.nbytes for t in h.tensors.values()), seconds=time.perf_counter() - t0)
    return StateDict(out, stats=stats, metadata=h.metadata)
