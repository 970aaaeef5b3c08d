"""Runtime benchmarks: host cost per launch, host <-> device and device copy bandwidth, allocator cost.

Rows (each with p20/p50/p80 over repeated batches, and a target where the issue sets one):

- ``launch.triton_eager``: ``kernel[grid](...)`` through Triton's own path (binder + specialization + cache
  lookup), with our torch-free driver; host microseconds per launch.
- ``launch.nbx_fast_path``: ``nbxtensor.runtime.launcher.launch`` on nbx tensors once the specialization is
  cached (the compiled kernel's ``run`` called directly). Target <= 6 us.
- ``launch.nbx_planned_tail``: ``launcher.launch_tail`` with the trailing arguments and keywords planned once
  (a :class:`~nbxtensor.runtime.launcher.Tail`, as the ops' launch plans use). Target <= 6 us.
- ``launch.cuda_launch``: ``runtime.cuda_launch.launch`` alone (the fast path without ``launcher.launch``).
- ``launch.nbx_fast_path_python`` / ``launch.nbx_planned_tail_python``: the same two launches with the C fast
  path (runtime/_fastlaunch.c) switched off: the pure-Python fast path, its fallback. The rows above name the
  path they took (``C fast path`` or ``Python fast path`` and why) and how many of their launches the C path made.
- ``launch.compiled_c_launch``: Triton's compiled C launch function with prepared arguments (the floor).
- ``h2d.*`` / ``d2h.*``: GB/s (1e9 bytes/s) for pageable memory (through the backend: staged in pinned chunks
  when large; and the driver's own pageable copy), and pinned memory. Target (pinned) >= 20 GB/s.
- ``d2d.memcpy`` and ``d2d.triton_copy``: device copy bandwidth counting bytes read + written, against the
  card's datasheet figure (benchmarks/peaks.json; H200: 4.8 TB/s). Target >= 85 %.
- ``alloc.cached_malloc_free``: one ``malloc`` + ``free`` pair of the caching allocator served from the cache
  (its quick reuse path); ``alloc.mixed_sizes_8`` / ``alloc.alternating_sizes``: per pair, eight sizes held
  together / two sizes that always miss the quick lists (benchmarks/alloc_proxy.py runs the same cases with no
  GPU); ``alloc.storage_alloc_free``: one pair through the backend (``Storage`` creation and its finalizer).
  Target < 5 us.

Timing: host costs with ``time.perf_counter`` over batches (the GPU work queued is tiny, so the queue never
fills); bandwidth with CUDA events for device copies and wall time for synchronous host copies.

Usage: ``PYTHONPATH=src python benchmarks/bench_runtime.py --out DIR [--quick] [--only launch,alloc]`` writes
``DIR/runtime.csv`` and ``DIR/runtime_summary.md`` and prints the table. Exits 0 even when a target is missed (benchmarks are not
tests); exit status 1 means a benchmark failed to run.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import nbxtensor as nbx  # noqa: E402
from nbxtensor.device.base import device as Device  # noqa: E402
from nbxtensor.device.cuda import backend as B  # noqa: E402
from nbxtensor.device.cuda import copies  # noqa: E402
from nbxtensor.device.cuda import driver as D  # noqa: E402
from nbxtensor.runtime import cuda_driver, cuda_launch  # noqa: E402
from nbxtensor.runtime.launcher import Tail, launch, launch_tail  # noqa: E402
from nbxtensor.runtime.triton_compat import jit, tl  # noqa: E402

from harness import load_peaks, percentiles  # noqa: E402

FIELDS = ["metric", "p20", "p50", "p80", "unit", "target", "meets_target", "detail", "gpu", "driver", "commit",
          "date", "command"]


@jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """The trivial kernel whose launches are timed (one program for small n)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) + tl.load(y_ptr + offs, mask=m), mask=m)


@jit
def copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    """A plain vectorised copy, to compare with cuMemcpyDtoD."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=m), mask=m)


class Ptr:
    """What Triton's own path takes for a pointer: ``data_ptr()`` and a ``dtype`` (as a torch tensor)."""

    def __init__(self, t):
        self.p, self.dtype = t.data_ptr(), t.dtype

    def data_ptr(self):
        return self.p


def per_call_us(fn, calls: int, batches: int) -> list[float]:
    """Host microseconds per call of ``fn`` in each of ``batches`` batches of ``calls`` calls."""
    out = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls * 1e6)
        nbx.cuda.synchronize()
    return out


def wall_gbps(fn, nbytes: int, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        nbx.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        nbx.cuda.synchronize()
        out.append(nbytes / (time.perf_counter() - t0) / 1e9)
    return out


def event_gbps(fn, nbytes: int, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        a, b = nbx.cuda.Event(enable_timing=True), nbx.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(nbytes / (a.elapsed_time(b) * 1e-3) / 1e9)
    return out


def bench_launch(rows, quick):
    # Batches of 100 launches, synchronised in between, so the GPU's queue never fills and the host time measured
    # is the launch path's own (a full queue would make the host wait for the GPU).
    calls, batches = (100, 30) if quick else (100, 60)
    n = 1024
    x = nbx.from_numpy(np.ones(n, np.float32)).cuda()
    y = nbx.from_numpy(np.ones(n, np.float32)).cuda()
    o = nbx.empty(n, dtype=nbx.float32, device="cuda")
    launch(add_kernel, (1,), x, y, o, n, BLOCK=1024)          # compile + cache
    nbx.cuda.synchronize()
    assert np.array_equal(o.cpu().numpy(), np.full(n, 2, np.float32)), "add_kernel gave a wrong result"
    from nbxtensor.runtime import fastlaunch
    c_on = cuda_launch.c_fast_path()
    fl = fastlaunch._state["module"]
    c_hits = fl.hits if fl is not None else (lambda: 0)
    if c_on:                                                  # the C path launches, and launches right
        o.zero_()
        h0 = c_hits()
        launch(add_kernel, (1,), x, y, o, n, BLOCK=1024)
        nbx.cuda.synchronize()
        assert c_hits() == h0 + 1, "the C fast path did not take a cached launch"
        assert np.array_equal(o.cpu().numpy(), np.full(n, 2, np.float32)), "the C fast path gave a wrong result"
    path = "C fast path" if c_on else f"Python fast path (C: {fastlaunch.status()})"
    px, py, po = Ptr(x), Ptr(y), Ptr(o)
    eager = add_kernel[(1,)]
    eager(px, py, po, n, BLOCK=1024)
    tail = Tail((n,), {"BLOCK": 1024})
    launch_tail(add_kernel, (1,), (x, y, o), tail)
    dev = Device("cuda", 0)
    args, meta = (x, y, o, n), {"BLOCK": 1024}
    key = next(k for k in cuda_launch._cache if k[0] == id(add_kernel))
    fn, head, ctail, _ = cuda_launch._cache[key]
    ptrs = (x.data_ptr(), y.data_ptr(), o.data_ptr(), n)
    cases = [   # name, call, target, detail, C path on (True), off (False) or as it is (None)
        ("launch.triton_eager", lambda: eager(px, py, po, n, BLOCK=1024), None,
         "Triton's kernel[grid](...) with our torch-free driver (DESIGN.md: about 13 us)", None),
        ("launch.nbx_fast_path", lambda: launch(add_kernel, (1,), x, y, o, n, BLOCK=1024), ("<=", 6.0),
         f"nbxtensor.runtime.launcher.launch on nbx tensors, specialization cached; {path}", c_on),
        ("launch.nbx_planned_tail", lambda: launch_tail(add_kernel, (1,), (x, y, o), tail), ("<=", 6.0),
         "nbxtensor.runtime.launcher.launch_tail: the trailing args and keywords planned once (ops' plans); "
         f"{path}", c_on),
        ("launch.cuda_launch", lambda: cuda_launch.launch(add_kernel, (1,), dev, args, meta), None,
         f"runtime.cuda_launch.launch alone (without launcher.launch's device checks); {path}", c_on),
        ("launch.nbx_fast_path_python", lambda: launch(add_kernel, (1,), x, y, o, n, BLOCK=1024), None,
         "launch.nbx_fast_path with the C fast path off: the pure-Python fast path", False),
        ("launch.nbx_planned_tail_python", lambda: launch_tail(add_kernel, (1,), (x, y, o), tail), None,
         "launch.nbx_planned_tail with the C fast path off: the pure-Python fast path", False),
        ("launch.compiled_c_launch", lambda: fn(1, 1, 1, 0, *head, *ptrs, *ctail), None,
         "Triton's compiled C launch function with prepared int pointers (the floor of any Python launch path; "
         "what the fast path calls)", None),
    ]
    # The cases take turns batch by batch, so a drift of the host's speed (clock, other tenants) during the run
    # weighs on every case alike instead of on whichever ran at that moment.
    times = {name: [] for name, _, _, _, _ in cases}
    by_c = {name: 0 for name, _, _, _, _ in cases}
    try:
        for _ in range(batches):
            for name, f, _, _, c in cases:
                if c is not None:
                    cuda_launch.c_fast_path(c)
                h0 = c_hits()
                times[name] += per_call_us(f, calls, 1)
                by_c[name] += c_hits() - h0
    finally:
        cuda_launch.c_fast_path(c_on)
    for name, _, target, detail, c in cases:
        if c is not None:
            detail += f" [{by_c[name]} of {calls * batches} launches by the C path]"
        rows.append((name, times[name], "us", target, detail))
    g = nbx.cuda.CUDAGraph()                 # capture and replay: 100 launches queued by one driver call
    with nbx.cuda.graph(g):
        for _ in range(100):
            launch_tail(add_kernel, (1,), (x, y, o), tail)
    o.zero_()
    g.replay()
    nbx.cuda.synchronize()
    assert np.array_equal(o.cpu().numpy(), np.full(n, 2, np.float32)), "the graph replay gave a wrong result"
    rows.append(("launch.graph_replay_100", per_call_us(g.replay, 10, batches), "us", None,
                 "one nbx.cuda.CUDAGraph.replay() of 100 captured add_kernel launches (host us per replay, i.e. "
                 "per 100 kernels)"))
    g.reset()


def bench_copies(rows, quick):
    be, dev = B.cuda_backend, Device("cuda", 0)
    n = (64 << 20) if quick else (512 << 20)
    reps = 3 if quick else 5
    host = np.random.default_rng(0).integers(0, 256, n, dtype=np.uint8)
    st = be.allocate(n, dev)
    be.write(st, 0, host)                       # warm: pinned staging buffers, page-in
    pinned_t = nbx.cuda.pin_memory(nbx.from_numpy(host))
    pinned = pinned_t.numpy()
    cu = D.cu
    rows.append(("h2d.pageable_backend", wall_gbps(lambda: be.write(st, 0, host), n, reps), "GB/s", None,
                 f"backend.write of {n >> 20} MiB from pageable NumPy memory (staged through pinned "
                 f"{copies.STAGE_CHUNK >> 20} MiB chunks, {copies._THREADS} copy threads)"))

    def h2d_driver():
        D.call(cu.cuMemcpyHtoDAsync, st.ptr, host.ctypes.data, n, 0)
        D.call(cu.cuStreamSynchronize, 0)
    rows.append(("h2d.pageable_driver", wall_gbps(h2d_driver, n, reps), "GB/s", None,
                 "one cuMemcpyHtoDAsync from pageable memory (the driver stages it)"))
    rows.append(("h2d.pinned", wall_gbps(lambda: be.write(st, 0, pinned), n, reps), "GB/s", (">=", 20.0),
                 "backend.write from pinned memory (one DMA)"))
    out = np.empty(n, dtype=np.uint8)
    out[:] = 1                                   # pre-fault
    rows.append(("d2h.pageable_backend", wall_gbps(lambda: be.read_into(out, st, 0), n, reps), "GB/s", None,
                 "backend.read_into a pre-faulted pageable array (staged)"))
    rows.append(("d2h.pageable_read_new_array", wall_gbps(lambda: be.read(st, 0, n), n, reps), "GB/s", None,
                 "backend.read (allocates and page-faults a new array: what tensor.cpu() pays)"))

    def d2h_driver():
        D.call(cu.cuMemcpyDtoHAsync, out.ctypes.data, st.ptr, n, 0)
        D.call(cu.cuStreamSynchronize, 0)
    rows.append(("d2h.pageable_driver", wall_gbps(d2h_driver, n, reps), "GB/s", None,
                 "one cuMemcpyDtoHAsync into pageable memory"))
    pout_t = nbx.cuda.pin_memory(nbx.from_numpy(out))
    pout = pout_t.numpy()
    rows.append(("d2h.pinned", wall_gbps(lambda: be.read_into(pout, st, 0), n, reps), "GB/s", (">=", 20.0),
                 "backend.read_into pinned memory (one DMA)"))
    assert np.array_equal(be.read(st, 0, n), pinned), "h2d/d2h round trip differs"
    del st


def bench_d2d(rows, quick, peak_gbps):
    be, dev = B.cuda_backend, Device("cuda", 0)
    # 1 GiB even in the quick run: at 256 MiB the copy's ramp-up and tail weigh a few percent (the H200 gave
    # cuMemcpyDtoD 3935 GB/s at 256 MiB, about 4200 GB/s at 2 GiB).
    n = (1 << 30) if quick else (2 << 30)
    reps = 5 if quick else 20
    a, b = be.allocate(n, dev), be.allocate(n, dev)
    be.memset(a, 0, 7, n)
    target = (">=", 0.85 * peak_gbps) if peak_gbps else None
    be.copy(b, 0, a, 0, n)
    rows.append(("d2d.memcpy", event_gbps(lambda: be.copy(b, 0, a, 0, n), 2 * n, reps), "GB/s", target,
                 f"backend.copy (cuMemcpyDtoDAsync) of {n >> 20} MiB; bytes read + written; peak {peak_gbps} GB/s"))
    x = nbx.empty(n // 4, dtype=nbx.float32, device="cuda")
    y = nbx.empty(n // 4, dtype=nbx.float32, device="cuda")
    for blk, warps in ((4096, 8), (8192, 16)):
        grid = ((n // 4 + blk - 1) // blk,)
        launch(copy_kernel, grid, x, y, n // 4, BLOCK=blk, num_warps=warps)
        rows.append((f"d2d.triton_copy_b{blk}", event_gbps(
            lambda: launch(copy_kernel, grid, x, y, n // 4, BLOCK=blk, num_warps=warps), 2 * n, reps), "GB/s",
            target, f"a Triton copy kernel over float32, BLOCK={blk}, num_warps={warps}"))
    assert np.array_equal(be.read(b, n - 16, 16), np.full(16, 7, np.uint8)), "d2d copy wrong"


def bench_alloc(rows, quick):
    calls, batches = (2000, 5) if quick else (20000, 15)
    from alloc_proxy import WARM, alloc_cases   # the same cases benchmarks/alloc_proxy.py times with no GPU
    for name, (fn, pairs, detail) in alloc_cases(B.allocator(0)).items():
        for _ in range(WARM):
            fn()
        vals = [v / pairs for v in per_call_us(fn, max(1, calls // pairs), batches)]
        rows.append((f"alloc.{name}", vals, "us", ("<", 5.0) if name == "cached_malloc_free" else None, detail))
    be, dev = B.cuda_backend, Device("cuda", 0)
    rows.append(("alloc.storage_alloc_free", per_call_us(lambda: be.allocate(4096, dev), calls, batches), "us",
                 ("<", 5.0), "CudaBackend.allocate(4096) and the Storage's release when it is dropped"))
    rows.append(("alloc.empty_tensor", per_call_us(lambda: nbx.empty(1024, device="cuda"), calls // 4, batches),
                 "us", None, "nbx.empty(1024, device='cuda') and its release (tensor creation overheads included)"))


def _meets(vals, target):
    if target is None:
        return ""
    op, v = target
    p50 = percentiles(vals, (50,))[0]
    return str(p50 <= v if op == "<=" else p50 < v if op == "<" else p50 >= v)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="bench-out", help="folder for runtime.csv and runtime_summary.md")
    ap.add_argument("--quick", action="store_true", help="smaller sizes and fewer repetitions")
    ap.add_argument("--only", default="", help="comma-separated groups to run (launch, copies, d2d, alloc); all by "
                    "default")
    args = ap.parse_args(argv)
    if not nbx.cuda.is_available():
        print(f"bench_runtime: no CUDA device ({D.unavailable_reason()})", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    cuda_driver.install()
    props = nbx.cuda.get_device_properties(0)
    v = nbx.cuda.driver_version()
    driver = f"{v // 1000}.{(v % 1000) // 10}"
    commit = os.environ.get("NBX_COMMIT", "")
    if not commit:   # GPU machines may get the tree without .git: NBX_COMMIT names the commit then
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                    cwd=HERE, timeout=10).stdout.strip() or "unknown"
        except Exception:
            commit = "unknown"
    peaks = load_peaks(props.name, props.arch, None, os.path.join(HERE, "peaks.json"))
    peak_gbps = peaks.get("memory_bandwidth_GBps")
    rows: list = []
    failed = []
    for name, fn in (("launch", lambda: bench_launch(rows, args.quick)),
                     ("copies", lambda: bench_copies(rows, args.quick)),
                     ("d2d", lambda: bench_d2d(rows, args.quick, peak_gbps)),
                     ("alloc", lambda: bench_alloc(rows, args.quick))):
        if args.only and name not in args.only.split(","):
            continue
        try:
            fn()
        except Exception as e:  # report and go on: one broken row must not hide the others
            import traceback
            traceback.print_exc()
            failed.append(f"{name}: {type(e).__name__}: {e}")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    given = argv if argv is not None else sys.argv[1:]
    command = "PYTHONPATH=src python benchmarks/bench_runtime.py " + " ".join(given)
    path = os.path.join(args.out, "runtime.csv")
    new = not os.path.exists(path)
    lines = [f"# Runtime benchmarks on {props.name} (driver {driver}, {props.arch}), commit {commit}, {date}", "",
             f"Command: `{command}`", "", "| metric | p20 | p50 | p80 | unit | target | meets | detail |",
             "|---|---|---|---|---|---|---|---|"]
    with open(path, "a", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            w.writeheader()
        for metric, vals, unit, target, detail in rows:
            p20, p50, p80 = percentiles(vals)
            tgt = "" if target is None else f"{target[0]} {target[1]:g}"
            meets = _meets(vals, target)
            w.writerow({"metric": metric, "p20": f"{p20:.4g}", "p50": f"{p50:.4g}", "p80": f"{p80:.4g}", "unit": unit,
                        "target": tgt, "meets_target": meets, "detail": detail, "gpu": props.name, "driver": driver,
                        "commit": commit, "date": date, "command": command})
            lines.append(f"| {metric} | {p20:.4g} | {p50:.4g} | {p80:.4g} | {unit} | {tgt} | {meets} | {detail} |")
    if failed:
        lines += ["", "Failed benchmarks:"] + [f"- {x}" for x in failed]
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "runtime_summary.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
