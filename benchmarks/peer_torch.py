"""The peer: PyTorch eager, measured in its own process so that nbxtensor's process never imports torch.

``bench_ops.py`` starts ``python3 benchmarks/peer_torch.py`` once per run and talks to it in JSON lines over
stdin/stdout (protocol in :mod:`harness`). For each request the peer builds the same inputs from the same data
(:func:`harness.host_array` of each :class:`harness.InputSpec`, bit-identical to nbxtensor's), resolves the same
call target against ``torch`` (``torch.<name>``, ``torch.nn.functional.<name>`` or a Tensor method), and times
it with ``torch.cuda.Event`` through the same :func:`harness.run_benchmark` (warm-up, L2 flush, repeated runs),
under ``torch.inference_mode()``. The flush is the request's ``timing.flush_mode`` (``clean``: ``zero_`` of the
flush buffer, then a ``sum`` of another; ``write``: the ``zero_`` alone), echoed as ``"flush"`` in the reply.

Only protocol lines go to stdout; everything else (warnings, prints) goes to stderr.

Usage (normally started by bench_ops.py)::

    echo '{"cmd": "hello"}' | python3 benchmarks/peer_torch.py
"""

from __future__ import annotations

import os
import sys
import traceback
from collections import OrderedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as H  # noqa: E402

import numpy as np  # noqa: E402


class Peer:
    """State of the peer process: torch, the input cache, the flush buffer."""

    def __init__(self):
        self.torch = None
        self.import_error = None
        try:
            import torch
            self.torch = torch
        except Exception as e:  # noqa: BLE001 - reported in the hello reply
            self.import_error = f"{type(e).__name__}: {e}"
        self.cache: OrderedDict = OrderedDict()
        self.cache_bytes = 0
        self.cache_limit = int(os.environ.get("NBX_BENCH_CACHE_BYTES", 24 << 30))
        self.flush_buf = None
        self.read_buf = None

    # -- requests ---------------------------------------------------------------------------------------------
    def hello(self, msg: dict) -> dict:
        if self.torch is None:
            return {"ok": False, "error": f"torch is not importable in the peer's Python ({sys.executable}): "
                                          f"{self.import_error}"}
        t = self.torch
        info = {"ok": True, "torch": t.__version__, "python": sys.version.split()[0], "cuda_available":
                bool(t.cuda.is_available())}
        if t.cuda.is_available():
            info["gpu"] = t.cuda.get_device_name(0)
            info["cuda"] = t.version.cuda
        return info

    def bench(self, msg: dict) -> dict:
        t = self.torch
        if t is None:
            return {"ok": False, "error": f"torch is not importable: {self.import_error}"}
        dev = t.device(msg.get("device", "cuda"))
        call = H.Call.from_json(msg["call"])
        cfg = H.TimingConfig(**msg.get("timing", {}))
        with t.inference_mode():
            tensors = [self._tensor(s, dev) for s in call.inputs]
            fn = H.resolve_call(t, call, tensors)
            out = fn()
            out_bytes = H.tensor_nbytes(out)
            del out
            times = H.run_benchmark(fn, self._clock(dev, cfg.flush_bytes, cfg.flush_mode), cfg)
        p20, p50, p80 = H.percentiles(times)
        return {"ok": True, "times_ms": times, "p20_ms": p20, "p50_ms": p50, "p80_ms": p80, "reps": len(times),
                "out_bytes": out_bytes, "flush": cfg.flush_mode}

    # -- helpers ----------------------------------------------------------------------------------------------
    def _tensor(self, spec: H.InputSpec, dev):
        if not spec.fresh and spec in self.cache:
            self.cache.move_to_end(spec)
            return self.cache[spec]
        t = self.torch
        arr = H.host_array(spec)
        # Raw bytes -> device -> reinterpret: works for every dtype, including bfloat16 and float8 (ml_dtypes
        # arrays that torch.from_numpy does not take).
        raw = t.from_numpy(np.ascontiguousarray(arr).reshape(-1).view(np.uint8))
        x = raw.to(dev).view(getattr(t, spec.dtype)).reshape(spec.shape)
        if not spec.fresh:
            self.cache[spec] = x
            self.cache_bytes += spec.nbytes
            while self.cache_bytes > self.cache_limit and len(self.cache) > 1:
                old, _ = self.cache.popitem(last=False)
                self.cache_bytes -= old.nbytes
        return x

    def _clock(self, dev, flush_bytes: int, flush_mode: str = "clean"):
        """``torch.cuda.Event`` with the L2 flush of ``flush_mode`` (harness.flush_sequence), as bench_ops.make_clock
        builds it with nbxtensor: ``zero_`` of a ``flush_bytes`` buffer, then for ``"clean"`` a read-only ``sum``
        of another float32 buffer of ``flush_bytes``."""
        t = self.torch
        if dev.type != "cuda":
            return H.host_clock(min(flush_bytes, 64 << 20), flush_mode)
        if self.flush_buf is None or self.flush_buf.numel() != flush_bytes // 4:
            self.flush_buf = self.read_buf = None
            self.flush_buf = t.empty(flush_bytes // 4, dtype=t.int32, device=dev)
        if flush_mode == "clean" and self.read_buf is None:
            self.read_buf = t.ones(flush_bytes // 4, dtype=t.float32, device=dev)
        buf, rbuf = self.flush_buf, self.read_buf
        return H.EventClock(lambda: t.cuda.Event(enable_timing=True), t.cuda.synchronize,
                            H.flush_sequence(flush_mode, buf.zero_, rbuf.sum if rbuf is not None else None))


def serve(stdin=None, stdout=None) -> int:
    """Answer protocol lines until ``quit`` or end of input."""
    stdin = stdin or sys.stdin
    out = stdout or sys.stdout
    peer = Peer()
    for line in stdin:
        if not line.strip():
            continue
        rid = None
        try:
            msg = H.decode_message(line)
            rid = msg.get("id")
            cmd = msg.get("cmd")
            if cmd == "quit":
                out.write(H.encode_message({"id": rid, "ok": True}))
                out.flush()
                return 0
            if cmd == "hello":
                reply = peer.hello(msg)
            elif cmd == "bench":
                reply = peer.bench(msg)
            else:
                reply = {"ok": False, "error": f"unknown cmd {cmd!r} (expected hello, bench, quit)"}
        except Exception as e:  # noqa: BLE001 - a failing row is a reply, never a dead peer
            traceback.print_exc(file=sys.stderr)
            reply = {"ok": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:400]}
        reply["id"] = rid
        out.write(H.encode_message(reply))
        out.flush()
    return 0


def main() -> int:
    proto = sys.stdout
    sys.stdout = sys.stderr  # stray prints must not corrupt the protocol
    return serve(sys.stdin, proto)


if __name__ == "__main__":
    sys.exit(main())
