"""Helpers shared by the safetensors tests: crafting files byte by byte, and a fake non-CPU device backend.

(Imported by the test modules of this folder, which pytest puts on ``sys.path``.)
"""

from __future__ import annotations

import json
import struct
import threading
import weakref

import numpy as np

from nbxtensor.device.base import Storage, device


def craft(header: object = None, data: bytes = b"", *, raw: bytes | None = None, pad: bool = False) -> bytes:
    """A safetensors file: length field + header JSON (``raw`` bytes as given, else ``json.dumps(header)``) + data."""
    h = raw if raw is not None else json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def entry(dtype: str, shape, begin: int, end: int) -> dict:
    return {"dtype": dtype, "shape": list(shape), "data_offsets": [begin, end]}


def write(tmp_path, name: str, content: bytes) -> str:
    p = tmp_path / name
    p.write_bytes(content)
    return str(p)


def raw_bytes(t) -> bytes:
    """A tensor's elements in row-major order as bytes (any device)."""
    a = np.ascontiguousarray(t.numpy())
    return a.reshape(-1).view(np.uint8).tobytes()


class FakeBackend:
    """A device backend for type ``xpu`` keeping bytes in host arrays: exercises the streamed (GPU) path on a
    machine with no GPU. Counts live allocations; ``fail_after`` makes the n-th ``write`` raise."""

    type = "xpu"

    def __init__(self):
        self.live = 0
        self.writes = 0
        self.fail_after: int | None = None
        self._lock = threading.Lock()

    def canonical(self, dev):
        return device("xpu", dev.index or 0)

    def _freed(self):
        with self._lock:
            self.live -= 1

    def allocate(self, nbytes, dev=None):
        buf = np.zeros(nbytes, dtype=np.uint8)
        st = Storage(device("xpu", 0), nbytes, 0x10000 + id(buf), buf, self)
        with self._lock:
            self.live += 1
        weakref.finalize(st, self._freed)
        return st

    def write(self, dst, offset, src):
        self.writes += 1
        if self.fail_after is not None and self.writes > self.fail_after:
            raise RuntimeError("fake device: write failed")
        src = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
        dst.handle[offset:offset + src.nbytes] = src

    def read(self, src, offset, nbytes):
        return np.array(src.handle[offset:offset + nbytes], copy=True)

    def copy(self, dst, dst_offset, src, src_offset, nbytes):
        dst.handle[dst_offset:dst_offset + nbytes] = src.handle[src_offset:src_offset + nbytes]

    def synchronize(self, dev=None):
        return None
