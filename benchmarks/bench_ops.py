"""The op benchmark matrix, generated from the op table and benchmarks/shapes.json.

For every op of ``registry.all_ops()`` that has a Triton implementation and an entry in the shapes file, each
case x shape x dtype becomes a row: inputs from the case's factory (harness.py), nbxtensor timed with CUDA
events in this process, PyTorch eager timed in a separate process (peer_torch.py; this process never imports
torch), bytes and flops from the op's cost declaration, rates against the card's peaks, and the ratio to the
peer. A failing row records its error and the run goes on.

Run from the source tree, no installation needed::

    PYTHONPATH=src python3 benchmarks/bench_ops.py --out $OUT/bench

Writes into ``--out``: ``results.csv`` (appended, one row per measurement, flushed as each row finishes),
``summary.md`` (this run), ``roofline.png``, ``bench.log`` (tracebacks) and ``peer.log`` (the peer's stderr).

Options: ``--ops`` (comma-separated names, globs, or ``family:<name>``), ``--quick`` (first dtype of each case,
shorter timing), ``--budget-s`` (stop starting rows after this many seconds: default 480, so the command fits a
10-minute slot; 0 = no limit), ``--resume`` (skip rows that ``results.csv`` already holds for this commit and
GPU, and summarize them with the new ones: rerun a run the budget cut short), ``--flush`` (``clean``, the default,
or ``write``: harness.py, "Timing"), ``--shapes``, ``--device``
(``cuda`` or ``cpu`` for a host-clock smoke run), ``--max-dim`` (cap every dim: a host smoke run of the whole
matrix), ``--no-peer``, ``--peer-python``, ``--list`` (print the plan and exit), ``--strict`` (exit 1 when a
row failed).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import fnmatch
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections import OrderedDict

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
if os.path.isdir(os.path.join(REPO, "src", "nbxtensor")) and os.path.join(REPO, "src") not in sys.path:
    sys.path.insert(0, os.path.join(REPO, "src"))  # run from the source tree without installation

import harness as H  # noqa: E402

PEER_SCRIPT = os.path.join(HERE, "peer_torch.py")
FACTS_DIR = os.path.join(REPO, "src", "nbxtensor", "device", "facts")
PEAKS_FILE = os.path.join(HERE, "peaks.json")
DEFAULT_SHAPES = os.path.join(HERE, "shapes.json")


# ---------------------------------------------------------------------------------------------------------------
# The peer process
# ---------------------------------------------------------------------------------------------------------------

class PeerClient:
    """PyTorch eager in a child process, spoken to in JSON lines (harness protocol).

    A request that times out or kills the peer gets an error reply; the next request restarts it (at most
    ``max_restarts`` times, then the peer is disabled and rows carry the reason).
    """

    def __init__(self, python: str, log_path: str, max_restarts: int = 3):
        self.python, self.log_path, self.max_restarts = python, log_path, max_restarts
        self.proc = None
        self.restarts = 0
        self.disabled: str | None = None
        self.info: dict = {}
        self._next_id = 0
        self._log = None

    def _start(self) -> None:
        self._log = self._log or open(self.log_path, "a", encoding="utf-8")
        env = dict(os.environ)
        env.pop("NBX_TRITON_INTERPRET", None)
        self.proc = subprocess.Popen([self.python, "-u", PEER_SCRIPT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._log, text=True, bufsize=1, cwd=REPO, env=env)

    def _readline(self, timeout: float) -> str | None:
        box: list = []
        th = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        th.start()
        th.join(timeout)
        return box[0] if box else None

    def request(self, msg: dict, timeout: float = 300.0) -> dict:
        if self.disabled:
            return {"ok": False, "error": f"peer disabled: {self.disabled}"}
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                self.restarts += 1
                if self.restarts > self.max_restarts:
                    self.disabled = f"the peer died {self.restarts} times (see peer.log)"
                    return {"ok": False, "error": self.disabled}
            self._start()
        self._next_id += 1
        msg = dict(msg, id=self._next_id)
        try:
            self.proc.stdin.write(H.encode_message(msg))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            self.close()
            return {"ok": False, "error": f"peer unreachable: {e}"}
        while True:
            line = self._readline(timeout)
            if line is None:
                self.close()
                return {"ok": False, "error": f"peer timed out after {timeout:.0f} s (restarted for the next row)"}
            if not line:
                self.close()
                return {"ok": False, "error": "peer exited (see peer.log)"}
            try:
                reply = H.decode_message(line)
            except ValueError:
                continue  # not a protocol line
            if reply.get("id") == msg["id"]:
                return reply

    def hello(self) -> dict:
        self.info = self.request({"cmd": "hello"}, timeout=300.0)
        if not self.info.get("ok"):
            self.disabled = self.info.get("error", "hello failed")
        return self.info

    def close(self) -> None:
        if self.proc is not None:
            try:
                if self.proc.poll() is None:
                    try:
                        self.proc.stdin.write(H.encode_message({"cmd": "quit"}))
                        self.proc.stdin.flush()
                        self.proc.wait(timeout=10)
                    except Exception:  # noqa: BLE001
                        pass
                if self.proc.poll() is None:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
            finally:
                self.proc = None


# ---------------------------------------------------------------------------------------------------------------
# Environment facts
# ---------------------------------------------------------------------------------------------------------------

def source_hash() -> str:
    """12 hex digits of SHA-256 over the library's and the benchmarks' source files (paths and bytes): names the
    code exactly where git cannot (a copied tree, uncommitted edits)."""
    import hashlib
    h = hashlib.sha256()
    for root in (os.path.join(REPO, "src", "nbxtensor"), HERE):
        for d, dirs, files in sorted(os.walk(root)):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            for f in sorted(files):
                if f.endswith((".py", ".json")):
                    path = os.path.join(d, f)
                    h.update(os.path.relpath(path, REPO).encode())
                    with open(path, "rb") as fh:
                        h.update(fh.read())
    return h.hexdigest()[:12]


def git_commit() -> str:
    """The library's commit: ``$NBX_GIT_COMMIT`` when set, else ``<short sha>`` for a clean checkout,
    ``<short sha>+dirty.<source hash>`` with uncommitted edits, ``src.<source hash>`` without git (a copied
    tree)."""
    if os.environ.get("NBX_GIT_COMMIT"):
        return os.environ["NBX_GIT_COMMIT"]
    try:
        c = subprocess.run(["git", "-C", REPO, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                           timeout=10)
        if c.returncode == 0:
            d = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
            return c.stdout.strip() + (f"+dirty.{source_hash()}" if d.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return f"src.{source_hash()}"


def driver_version() -> str:
    """The NVIDIA driver version (``nvidia-smi``), else the CUDA driver API version from cuda-bindings."""
    if shutil.which("nvidia-smi"):
        try:
            c = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                               capture_output=True, text=True, timeout=20)
            if c.returncode == 0 and c.stdout.strip():
                return c.stdout.strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError):
            pass
    try:
        from cuda.bindings import driver as drv
        err, v = drv.cuDriverGetVersion()
        return f"CUDA driver API {v // 1000}.{(v % 1000) // 10}"
    except Exception:  # noqa: BLE001
        return "unknown"


def device_facts(nbx, dev: str) -> dict:
    """GPU name, architecture, L2 bytes and driver of ``dev`` (``cpu`` gives the host's description)."""
    if dev == "cpu":
        import platform
        return {"gpu": f"cpu ({platform.processor() or platform.machine()})", "arch": None, "l2": None,
                "driver": "n/a"}
    idx = nbx.device(dev).index or 0
    props = nbx.cuda.get_device_properties(idx)
    major, minor = nbx.cuda.get_device_capability(idx)
    l2 = None
    for k in ("L2_cache_size", "l2_cache_size", "l2_bytes"):
        if getattr(props, k, None):
            l2 = int(getattr(props, k))
            break
    return {"gpu": str(getattr(props, "name", "unknown GPU")), "arch": f"sm{major}{minor}", "l2": l2,
            "driver": driver_version()}


# ---------------------------------------------------------------------------------------------------------------
# nbxtensor side: inputs, clock, cost
# ---------------------------------------------------------------------------------------------------------------

class Inputs:
    """Device tensors built from InputSpecs, cached (LRU, bounded bytes) except ``fresh`` ones."""

    def __init__(self, nbx, dev: str, limit: int):
        self.nbx, self.dev, self.limit = nbx, dev, limit
        self.cache: OrderedDict = OrderedDict()
        self.bytes = 0

    def get(self, spec: H.InputSpec):
        if not spec.fresh and spec in self.cache:
            self.cache.move_to_end(spec)
            return self.cache[spec]
        t = self.nbx.from_numpy(H.host_array(spec))
        if self.dev != "cpu":
            t = t.to(self.dev)
        if not spec.fresh:
            self.cache[spec] = t
            self.bytes += spec.nbytes
            while self.bytes > self.limit and len(self.cache) > 1:
                old, _ = self.cache.popitem(last=False)
                self.bytes -= old.nbytes
        return t


def make_clock(nbx, dev: str, flush_bytes: int, notes: list, flush_mode: str = "clean"):
    """CUDA events of nbxtensor with the L2 flush of ``flush_mode`` (harness.flush_sequence; module docstring of
    harness.py, "Timing"): a write of a ``flush_bytes`` buffer (an asynchronous memset through the device backend
    on the current stream, else ``Tensor.zero_``), then for ``"clean"`` a read-only ``sum`` of another float32
    buffer of ``flush_bytes``. ``dev == "cpu"``: harness.host_clock. The one nbxtensor-side flush: bench_ops,
    the sweeps (sweep_common.start) and bench_generate use it; the peer (peer_torch.py) builds the same with torch.

    Raises:
        ValueError: an unknown ``flush_mode``.
    """
    if dev == "cpu":
        return H.host_clock(flush_bytes, flush_mode)
    H.flush_sequence(flush_mode, lambda: None, lambda: None)  # checks the mode before allocating
    from nbxtensor.device.base import backend_for
    buf = nbx.empty(flush_bytes, dtype=nbx.uint8, device=dev)
    be = backend_for(buf.device)
    if hasattr(be, "memset"):
        storage = buf.untyped_storage()

        def write():
            be.memset(storage, 0, 0, flush_bytes)
    else:
        write = buf.zero_
        notes.append("L2 flush: the device backend has no memset; flushing with Tensor.zero_")
    read = None
    if flush_mode == "clean":
        rbuf = nbx.ones(max(1, flush_bytes // 4), dtype=nbx.float32, device=dev)
        read = rbuf.sum
    return H.EventClock(lambda: nbx.cuda.Event(enable_timing=True), nbx.cuda.synchronize,
                        H.flush_sequence(flush_mode, write, read))


def _cost_fields(c) -> tuple[int, int, int] | None:
    if c is None:
        return None
    if isinstance(c, dict):
        get = c.get
    else:
        def get(k, d=None):
            return getattr(c, k, d)
    br, bw = get("bytes_read"), get("bytes_written")
    if br is None or bw is None:
        return None
    return int(get("flops", 0) or 0), int(br), int(bw)


def io_bytes(call: H.Call, tensors: list, out) -> tuple[int, int]:
    """Bytes by tensor sizes: each distinct non-fresh input read once; the output (or, for in-place/``out=``,
    the fresh inputs) written."""
    seen, read = set(), 0
    for spec, t in zip(call.inputs, tensors):
        if not spec.fresh and id(t) not in seen:
            seen.add(id(t))
            read += spec.nbytes
    written = H.tensor_nbytes(out)
    if any(s.fresh for s in call.inputs):
        written = max(written, sum(s.nbytes for s in call.inputs if s.fresh))
    return read, written


def _first(out):
    if isinstance(out, (tuple, list)):
        return next((o for o in out if hasattr(o, "shape")), None)
    return out if hasattr(out, "shape") else None


def cost_namespace(call: H.Call, tensors: list, out) -> dict:
    """Values a cost declaration may ask for by parameter name, from the benchmarked call:

    ``inputs`` (``[(shape, dtype)]`` of the tensor operands read, before broadcasting), ``out_shape`` /
    ``out_dtype`` (the result, or the written-to tensor of an in-place/``out=`` call), ``outputs`` (every result
    tensor), ``shape`` / ``dtype`` (the first tensor argument), ``dst_shape`` / ``dst_dtype`` and ``src_numel``
    / ``src_dtype`` (copies), ``x`` / ``input`` / ``self`` (the first tensor argument) and ``n`` (its numel).
    """
    read = [t for s, t in zip(call.inputs, tensors) if not s.fresh]
    written = [t for s, t in zip(call.inputs, tensors) if s.fresh]
    res = _first(out)
    dst = res if res is not None else (written[0] if written else None)
    first = tensors[call.args[0].index] if call.args and isinstance(call.args[0], H.TensorRef) else \
        (tensors[0] if tensors else None)
    ns = {"inputs": [(tuple(t.shape), t.dtype) for t in read],
          "outputs": [o for o in (out if isinstance(out, (tuple, list)) else [out]) if hasattr(o, "shape")]}
    if dst is not None:
        ns.update(out_shape=tuple(dst.shape), out_dtype=dst.dtype, dst_shape=tuple(dst.shape), dst_dtype=dst.dtype)
    if read:
        ns.update(src_numel=int(read[0].numel()), src_dtype=read[0].dtype)
    if first is not None:
        ns.update(shape=tuple(first.shape), dtype=first.dtype, n=int(first.numel()), x=first, input=first,
                  self=first)
    return ns


def _call_by_names(fn, ns: dict):
    """Call ``fn`` with the values of ``ns`` its parameters name; ``None`` when a required one is missing."""
    import inspect
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    named = [p for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if not named:
        return None  # cost(*args, **kwargs): the op's own calling convention, tried next
    kw = {}
    for p in named:
        if p.name in ns:
            kw[p.name] = ns[p.name]
        elif p.default is p.empty:
            return None
    return fn(**kw)


def declared_cost(rec, call: H.Call, tensors: list, args: list, kwargs: dict, out) -> tuple[int, int, str]:
    """``(flops, bytes, source)`` for one launch of ``rec`` on these arguments.

    The op table's ``rec.cost`` is asked, in the conventions the families use, first that works wins:

    1. by parameter name: each parameter of ``rec.cost`` is looked up among the op's arguments bound to its
       schema (``rec.extra["schema"]``: ``input``, ``dim``, ``keepdim`` ...) and :func:`cost_namespace`
       (``out_shape, out_dtype, inputs`` for pointwise ops; ``dst_shape, dst_dtype, src_numel, src_dtype``
       for ``copy_``; ``shape, dtype`` for ``fill_``), the latter winning on a clash;
    2. ``cost(*args, **kwargs)``: the op's own arguments.

    ``source`` is ``declared``. When nothing works, bytes come from the tensor sizes (:func:`io_bytes`) and
    ``source`` says so, so an undeclared row is never passed off as declared.
    """
    ns = {}
    schema = (rec.extra or {}).get("schema")
    if schema:
        try:
            from nbxtensor.ops import dispatch
            ns.update(dispatch.parse_schema(schema).bind(tuple(args), dict(kwargs)))
        except Exception:  # noqa: BLE001 - the names below may still do
            pass
    ns.update(cost_namespace(call, tensors, out))
    attempts = [lambda: _call_by_names(rec.cost, ns), lambda: rec.cost(*args, **kwargs)]
    errors = []
    for attempt in attempts:
        try:
            f = _cost_fields(attempt())
        except Exception as e:  # noqa: BLE001 - try the next convention
            errors.append(f"{type(e).__name__}: {e}")
            continue
        if f is not None:
            return f[0], f[1] + f[2], "declared"
    r, w = io_bytes(call, tensors, out)
    return 0, r + w, "io-fallback (" + (errors[-1][:120] if errors else "cost returned no bytes") + ")"


# ---------------------------------------------------------------------------------------------------------------
# The plan
# ---------------------------------------------------------------------------------------------------------------

def select(name: str, family: str, patterns: list[str]) -> bool:
    """``--ops`` filter: names, globs (``log*``) or ``family:<family>``; empty selects everything."""
    if not patterns:
        return True
    for p in patterns:
        if p.startswith("family:"):
            if fnmatch.fnmatchcase(family, p[7:]):
                return True
        elif fnmatch.fnmatchcase(name, p):
            return True
    return False


def clamp_shapes(doc: dict, max_dim: int) -> dict:
    """A copy of the shapes document with every dim capped at ``max_dim`` (``--max-dim``: host smoke runs of the
    whole matrix on tiny tensors; the 256 MiB rule is waived)."""
    import copy as _copy

    def fix(case: dict) -> dict:
        case = dict(case)
        if "shapes" in case:
            case["shapes"] = [[min(d, max_dim) for d in s] for s in case["shapes"]]
        if "src_shape" in case:
            case["src_shape"] = [min(d, max_dim) for d in case["src_shape"]]
        if "inputs" in case:
            case["inputs"] = [dict(o, shape=[min(d, max_dim) for d in o["shape"]]) if "shape" in o else o
                              for o in case["inputs"]]
        if case.get("factory") == "norm" and case.get("shapes") and len(case["shapes"][0]) > 2:
            import math
            case["groups"] = math.gcd(case.get("groups", 32), case["shapes"][0][1])  # channels stay divisible
        case["small_ok"] = f"--max-dim {max_dim}"
        return case
    doc = _copy.deepcopy(doc)
    doc["defaults"] = fix(doc.get("defaults", {}))
    doc["factories"] = {k: fix(v) for k, v in doc.get("factories", {}).items()}
    doc["ops"] = {k: [fix(c) for c in v] if isinstance(v, list) else fix(v) for k, v in doc["ops"].items()}
    return doc


def build_plan(records: list, doc: dict, patterns: list[str], quick: bool):
    """Rows to run, and coverage notes. Rows are ordered round-robin over ops (every op's first row, then every
    op's second ...), so a time budget cuts the tail of the matrix, never whole ops."""
    triton = OrderedDict((r.name, r) for r in records if getattr(r, "triton", None) is not None)
    per_op = []
    not_benchmarked = [n for n in triton if n not in doc["ops"]]
    stale = [n for n in doc["ops"] if n not in triton]
    for name, rec in triton.items():
        if name not in doc["ops"] or not select(name, rec.family, patterns):
            continue
        per_op.append([(rec, case, shape, dt, call) for case, shape, dt, call in H.expand_cases(doc, name, quick)])
    plan = []
    for k in range(max((len(v) for v in per_op), default=0)):
        plan += [v[k] for v in per_op if k < len(v)]
    return plan, not_benchmarked, stale


# ---------------------------------------------------------------------------------------------------------------
# One row
# ---------------------------------------------------------------------------------------------------------------

def run_row(nbx, rec, case, shape, dt, call: H.Call, ctx: dict) -> dict:
    row = {"run_id": ctx["run_id"], "op": rec.name, "family": rec.family, "label": case.get("label", ""),
           "dtype": call.dtype_label or dt, "shape": H.shape_str(shape), "args": call.args_str(),
           "note": case.get("note", ""), "flush": ctx["timing"].flush_mode,
           **{k: ctx[k] for k in ("gpu", "driver", "commit", "date")}}
    peaks = ctx["peaks"]
    ptf = H.peak_tflops_for(peaks, row["dtype"])
    pbw = peaks.get("memory_bandwidth_GBps")
    try:
        tensors = [ctx["inputs"].get(s) for s in call.inputs]
        fn = H.resolve_call(nbx, call, tensors)
        out = fn()
        args = H.materialize(list(call.args), tensors, lambda n: getattr(nbx, n))
        kwargs = H.materialize(dict(call.kwargs), tensors, lambda n: getattr(nbx, n))
        flops, nbytes, source = declared_cost(rec, call, tensors, args, kwargs, out)
        io = sum(io_bytes(call, tensors, out))
        del out
        times = H.run_benchmark(fn, ctx["clock"], ctx["timing"])
        p20, p50, p80 = H.percentiles(times)
        r = H.rates(flops, nbytes, p50, pbw, ptf)
        row.update(status="ok", p20_ms=p20, p50_ms=p50, p80_ms=p80, reps=len(times), bytes=nbytes, flops=flops,
                   cost_source=source.split(" ")[0], gbps=r["gbps"], tflops=r["tflops"],
                   pct_peak_bw=r["pct_peak_bw"], pct_peak_flops=r["pct_peak_flops"])
        if source != "declared":
            row["note"] = (row["note"] + "; " if row["note"] else "") + source
        elif io and not 0.5 <= nbytes / io <= 2.0:
            row["note"] = (row["note"] + "; " if row["note"] else "") + \
                f"declared bytes {nbytes} vs tensor sizes {io}: check the cost declaration"
        if pbw and r["gbps"] > 1.05 * pbw:
            row["note"] = (row["note"] + "; " if row["note"] else "") + \
                f"rate above the datasheet peak ({r['gbps']:.0f} GB/s): the cost declaration overstates bytes"
    except Exception as e:  # noqa: BLE001 - a failing row is recorded, the run goes on
        row.update(status="error", error=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300])
        ctx["log"].write(f"--- {rec.name} {row['dtype']} {row['shape']}\n{traceback.format_exc()}\n")
        ctx["log"].flush()
    finally:
        if ctx["dev"] != "cpu":
            try:
                nbx.cuda.synchronize()
            except Exception:  # noqa: BLE001
                pass
    peer = ctx.get("peer")
    if peer is not None:
        reply = peer.request({"cmd": "bench", "op": rec.name, "call": call.to_json(), "device": ctx["dev"],
                              "timing": vars(ctx["timing"])})
        if reply.get("ok") and reply.get("flush", "write") != ctx["timing"].flush_mode:
            row["peer_error"] = (f"the peer flushed with {reply.get('flush', 'write')!r}, not "
                                 f"{ctx['timing'].flush_mode!r} (an older peer_torch.py?)")
        elif reply.get("ok"):
            row.update(peer_p20_ms=reply["p20_ms"], peer_p50_ms=reply["p50_ms"], peer_p80_ms=reply["p80_ms"])
            # The peer moves the bytes nbxtensor's declaration names; when our row failed, the tensor sizes.
            nbytes = row.get("bytes") or (sum(s.nbytes for s in call.inputs if not s.fresh) +
                                          int(reply.get("out_bytes") or 0))
            if nbytes and reply["p50_ms"] > 0:
                pr = H.rates(row.get("flops") or 0, nbytes, reply["p50_ms"], pbw, ptf)
                row.update(peer_gbps=pr["gbps"], peer_pct_peak_bw=pr["pct_peak_bw"])
            if row.get("status") == "ok":
                row["ratio"] = reply["p50_ms"] / row["p50_ms"]
        else:
            row["peer_error"] = str(reply.get("error", "unknown"))[:300]
    return row


def row_key(r: dict) -> tuple:
    """What identifies a measurement across runs: op, label, dtype, shape, arguments."""
    return (r.get("op"), r.get("label") or "", r.get("dtype"), r.get("shape"), r.get("args") or "")


def plan_key(rec, case, shape, dt, call) -> tuple:
    return (rec.name, case.get("label", ""), call.dtype_label or dt, H.shape_str(shape), call.args_str())


def earlier_rows(csv_path: str, ctx: dict) -> dict:
    """For ``--resume``: the latest ok row per key in ``csv_path`` measured with this commit on this GPU and the
    same L2 flush mode."""
    if not os.path.exists(csv_path):
        return {}
    out = {}
    for r in H.read_csv(csv_path):
        if r.get("status") == "ok" and r.get("commit") == ctx["commit"] and r.get("gpu") == ctx["gpu"] and \
                r.get("flush") == ctx["timing"].flush_mode:
            out[row_key(r)] = r
    return out


def progress(i: int, n: int, row: dict) -> str:
    def f(v, fmt):
        return fmt.format(v) if v is not None else "-"
    if row.get("status") != "ok":
        return f"[{i}/{n}] {H._row_name(row)}: {row.get('status')} {row.get('error', '')}"
    return (f"[{i}/{n}] {H._row_name(row)}: p50 "
            f"{row['p50_ms']:.4f} ms, {row['gbps']:.0f} GB/s ({f(row.get('pct_peak_bw'), '{:.1f}')} %), peer "
            f"{f(row.get('peer_p50_ms'), '{:.4f}')} ms, ratio {f(row.get('ratio'), '{:.3f}')}"
            + (f" [peer: {row['peer_error']}]" if row.get("peer_error") else ""))


# ---------------------------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------------------------

def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output folder (results.csv is appended to)")
    p.add_argument("--ops", default="", help="comma-separated op names, globs or family:<name>")
    p.add_argument("--quick", action="store_true", help="first dtype of each case; shorter warm-up and runs")
    p.add_argument("--shapes", default=DEFAULT_SHAPES, help="shapes file (default benchmarks/shapes.json)")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N, or cpu (host clock; a smoke run)")
    p.add_argument("--max-dim", type=int, default=0, help="cap every dim of every shape (host smoke runs of the "
                   "whole matrix, e.g. --device cpu --max-dim 64)")
    p.add_argument("--budget-s", type=float, default=480.0, help="stop starting rows after this many seconds "
                   "(0: no limit)")
    p.add_argument("--flush", choices=H.FLUSH_MODES, default="clean", help="L2 flush before each timed run: "
                   "clean (write a buffer, then read another, so the flush's dirty lines are written back before "
                   "the start event; default) or write (the write alone, as Triton's do_bench)")
    p.add_argument("--no-peer", action="store_true", help="do not run the PyTorch peer")
    p.add_argument("--peer-python", default=os.environ.get("NBX_PEER_PYTHON", sys.executable),
                   help="Python with torch for the peer process (default: this Python)")
    p.add_argument("--list", action="store_true", help="print the plan and exit")
    p.add_argument("--resume", action="store_true", help="skip rows results.csv already holds for this commit and "
                   "GPU (ok rows only), and summarize them with this run's rows: rerun a budget-cut run")
    p.add_argument("--strict", action="store_true", help="exit 1 when any row failed")
    return p.parse_args(argv)


class _Terminated(Exception):
    pass


class _TorchImportWatch:
    """Records where ``torch`` is first imported in this process (the library must never import it), so the
    summary can name the culprit instead of only noticing it."""

    def __init__(self):
        self.where = ""

    def find_spec(self, name, path=None, target=None):
        if name == "torch" and not self.where:
            import traceback
            self.where = "".join(traceback.format_stack(limit=25)[:-1])
        return None


_TORCH_WATCH = _TorchImportWatch()
sys.meta_path.insert(0, _TORCH_WATCH)


def main(argv=None) -> int:
    a = parse_args(argv)
    t_start = time.monotonic()
    doc = H.load_shapes(a.shapes)
    if a.max_dim:
        doc = clamp_shapes(doc, a.max_dim)
    import nbxtensor as nbx
    from nbxtensor.ops import registry
    import nbxtensor.nn.functional  # noqa: F401  (functional ops register on import)
    dev = a.device
    patterns = [s.strip() for s in a.ops.split(",") if s.strip()]
    plan, not_benchmarked, stale = build_plan(registry.all_ops(), doc, patterns, a.quick)
    if a.list:
        for rec, case, shape, dt, call in plan:
            print(f"{rec.name:24s} {rec.family:12s} {call.dtype_label or dt:22s} {H.shape_str(shape):16s} "
                  f"{case.get('label', '')} {call.args_str()}")
        print(f"{len(plan)} rows; ops with a Triton implementation but no shapes entry: {not_benchmarked or 'none'}")
        return 0
    if dev.startswith("cuda") and not (hasattr(nbx, "cuda") and nbx.cuda.is_available()):
        print("bench_ops: no CUDA device is available (use --device cpu for a host smoke run)", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    facts = device_facts(nbx, dev)
    now = _dt.datetime.now(_dt.timezone.utc)
    notes: list[str] = []
    timing = H.TimingConfig.quick() if a.quick else H.TimingConfig()
    timing.flush_mode = a.flush
    if dev == "cpu":
        timing.flush_bytes = 8 << 20  # host smoke runs: a last-level-cache-sized write
    elif facts.get("l2"):
        timing.flush_bytes = max(timing.flush_bytes, 4 * facts["l2"])
    peaks = H.load_peaks(facts["gpu"], facts["arch"], FACTS_DIR, PEAKS_FILE) if dev != "cpu" else {}
    if dev != "cpu" and not peaks:
        notes.append(f"no peaks known for {facts['gpu']} ({facts['arch']}): add it to benchmarks/peaks.json")
    log = open(os.path.join(a.out, "bench.log"), "a", encoding="utf-8")
    ctx = {"run_id": now.strftime("%Y%m%dT%H%M%SZ"), "gpu": facts["gpu"], "driver": facts["driver"],
           "commit": git_commit(), "date": now.isoformat(timespec="seconds"), "peaks": peaks, "dev": dev,
           "timing": timing, "log": log,
           "inputs": Inputs(nbx, dev, int(os.environ.get("NBX_BENCH_CACHE_BYTES", (24 << 30) if dev != "cpu"
                                                          else (1 << 30))))}
    ctx["clock"] = make_clock(nbx, dev, timing.flush_bytes, notes, timing.flush_mode)
    peer = None
    peer_desc = "disabled (--no-peer)"
    if not a.no_peer:
        peer = PeerClient(a.peer_python, os.path.join(a.out, "peer.log"))
        info = peer.hello()
        if info.get("ok"):
            peer_desc = f"PyTorch {info.get('torch')} eager, separate process ({a.peer_python})"
            if dev != "cpu" and not info.get("cuda_available"):
                peer_desc += "; torch sees no CUDA device"
        else:
            peer_desc = f"unavailable: {info.get('error')}"
            peer.close()
            peer = None
    ctx["peer"] = peer
    print(f"bench_ops: {len(plan)} rows on {facts['gpu']} (driver {facts['driver']}, commit {ctx['commit']}); "
          f"peer: {peer_desc}", flush=True)

    def on_term(signum, frame):
        raise _Terminated(f"signal {signum}")
    old = signal.signal(signal.SIGTERM, on_term)
    csv_path = os.path.join(a.out, "results.csv")
    rows: list[dict] = []
    earlier = earlier_rows(csv_path, ctx) if a.resume else {}
    if earlier:
        before = len(plan)
        plan = [p for p in plan if plan_key(*p) not in earlier]
        notes.append(f"--resume: {before - len(plan)} rows already measured for commit {ctx['commit']} on "
                     f"{ctx['gpu']} were taken from results.csv")
    try:
        for i, (rec, case, shape, dt, call) in enumerate(plan, 1):
            if a.budget_s and time.monotonic() - t_start > a.budget_s:
                skipped = [{"run_id": ctx["run_id"], "op": r.name, "family": r.family, "label": c.get("label", ""),
                            "dtype": cl.dtype_label or d, "shape": H.shape_str(s), "args": cl.args_str(),
                            "status": f"skipped (time budget {a.budget_s:.0f} s)",
                            **{k: ctx[k] for k in ("gpu", "driver", "commit", "date")}}
                           for r, c, s, d, cl in plan[i - 1:]]
                rows += skipped
                H.append_csv(csv_path, skipped)
                notes.append(f"time budget of {a.budget_s:.0f} s reached: {len(skipped)} rows skipped "
                             "(rerun with --ops to cover them, or --budget-s 0)")
                break
            row = run_row(nbx, rec, case, shape, dt, call, ctx)
            rows.append(row)
            H.append_csv(csv_path, [row])
            print(progress(i, len(plan), row), flush=True)
    except (KeyboardInterrupt, _Terminated) as e:
        notes.append(f"interrupted ({e or 'KeyboardInterrupt'}) after {len(rows)} rows")
    finally:
        signal.signal(signal.SIGTERM, old)
        if peer is not None:
            peer.close()
        log.close()
    cmd = "PYTHONPATH=src python3 benchmarks/bench_ops.py " + " ".join(argv if argv is not None else sys.argv[1:])
    meta = {"command": f"`{cmd}`", "gpu": facts["gpu"], "driver": facts["driver"], "commit": ctx["commit"],
            "date": ctx["date"], "peer": peer_desc,
            "peaks": (f"{peaks.get('memory_bandwidth_GBps', '?')} GB/s, {peaks.get('tflops', {})} TFLOP/s "
                      f"({peaks.get('source', '')})") if peaks else "unknown",
            "timing": (f"warm-up {timing.warmup_ms} ms, ~{timing.rep_ms} ms of runs ({timing.min_reps}-"
                       f"{timing.max_reps}), L2 flush before each run"),
            "flush": H.describe_flush(timing),
            "torch_in_library_process": ("yes (a bug: the library must never import torch); first imported from:\n"
                                         + _TORCH_WATCH.where) if "torch" in sys.modules else "no",
            "not_benchmarked": not_benchmarked, "stale_entries": stale, "notes": "; ".join(notes)}
    done = {row_key(r) for r in rows}
    rows = [r for k, r in earlier.items() if k not in done] + rows
    with open(os.path.join(a.out, "summary.md"), "w", encoding="utf-8") as f:
        f.write(H.summarize(rows, meta))
    try:
        msg = H.plot_roofline(rows, peaks, os.path.join(a.out, "roofline.png"))
    except Exception as e:  # noqa: BLE001 - the plot never costs the results
        msg = f"roofline: failed: {type(e).__name__}: {e}"
    print(msg)
    print(f"bench_ops: wrote {csv_path}, {os.path.join(a.out, 'summary.md')} "
          f"({time.monotonic() - t_start:.0f} s)", flush=True)
    failed = any(r.get("status") == "error" for r in rows)
    return 1 if (a.strict and failed) else 0


if __name__ == "__main__":
    sys.exit(main())
