"""Host cost per op call without a GPU: wall time and Python calls per call of the ops a decode step and a BERT
layer are made of, on tiny shapes, measured on this machine.

Two tiers, both through the same dispatch code as CUDA:

- ``--tier cpu``: CPU tensors, NumPy implementations (the dispatch path plus a small NumPy computation);
- ``--tier device --device cuda``: the real thing on a GPU (host time per call, no sync; ``--verify`` first
  checks every case's result, three calls each, against the CPU tier);
- ``--tier null`` (the default; sets ``NBX_TRITON_INTERPRET=1``): CPU tensors through the Triton
  implementations up to the one launcher, which is made a no-op (kernels do not run; launch arguments take
  their compiled-tier form), so the numbers are the host path of a GPU call minus the launch itself (the fast
  path costs about 6.5 us on an H200 host: benchmarks/bench_runtime.py) and with the CPU allocator instead of
  the CUDA caching allocator.

Usage::

    PYTHONPATH=src python3 benchmarks/host_proxy.py [--tier null|cpu|device] [--calls 2000] [--only add,rms]
        [--top 0]   # with --top N, the N functions with the most own time per case

Columns: ``us/call`` (thread CPU time, best of 20 repeats of calls/20: the machine may be shared), ``nbx calls``
(calls of functions under ``nbxtensor/`` per op call, from cProfile), ``py calls`` (all Python-level calls
cProfile counts, builtins included).

The null tier also prints the ``launch.*`` rows: the CUDA launcher's fast path itself (``launcher.launch``,
``launcher.launch_tail``, ``cuda_launch.launch``) on nbx tensors over fake CUDA storages (a caching allocator on
made-up addresses), with a cached entry whose launch function is a C no-op standing in for Triton's compiled
``launch`` (about 5 us of the H200 host's fast path is that call). Each row is timed with the C fast path
(runtime/_fastlaunch.c) and with the pure-Python fast path side by side (``--only launch`` for these rows alone).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import sys
import time
import types


def _args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tier", choices=("null", "cpu", "device"), default="null")
    ap.add_argument("--device", default="cuda", help="the device of --tier device")
    ap.add_argument("--verify", action="store_true", help="with --tier device: check results against the CPU tier")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--only", default="")
    ap.add_argument("--top", type=int, default=0)
    return ap.parse_args()


def cases(nbx, device: str = "cpu") -> dict:
    """name -> zero-argument callable; tensors made once from a seeded NumPy generator and moved to ``device``
    (bfloat16, decode/BERT-shaped but small; a few strided and offset layouts)."""
    import numpy as np
    from nbxtensor.ops import registry

    rng = np.random.default_rng(0)
    fn = lambda name: registry.get(name).extra["function"]  # noqa: E731
    F = nbx.nn.functional

    def r(*s):
        return nbx.tensor(rng.standard_normal(s).astype(np.float32)).to(nbx.bfloat16).to(device)

    def t(a):
        return nbx.tensor(a).to(device)

    small = r(1, 384)
    x = r(1, 4096)
    g = r(4096)
    h = r(1, 8, 384)
    lw, lb = r(384), r(384)
    sq, sq2 = r(64, 48), r(48, 64)
    wide = r(8, 400)
    sc = r(1, 12, 8, 8)
    q = r(1, 32, 128)
    kc, vc = r(1, 8, 64, 128), r(1, 8, 64, 128)
    lens = t(np.array([64], np.int32))
    q4, k4 = r(1, 32, 1, 128), r(1, 8, 1, 128)
    pos = t(np.array([10], np.int64))
    inv = t((1.0 / 500000 ** (np.arange(0, 128, 2) / 128)).astype(np.float32))
    ids = t(np.array([[5]], np.int64))
    emb = r(1000, 64)
    dec, rope, app = fn("decode_attention"), fn("rotary_embedding"), fn("kv_cache_append")
    from nbxtensor.quant import int4_linear, quantize_int4
    w, wb, res = r(1024, 4096), r(1024), r(1, 1024)
    qw, qs, qm = (t(a) for a in quantize_int4(rng.standard_normal((1024, 4096)).astype(np.float32), 32))
    lin_out = nbx.empty(1, 1024, dtype=nbx.bfloat16, device=device)
    return {
        "add_384 (a + a)": lambda: small + small,
        "mul_4096": lambda: x * x,
        "add_scalar (a + 1.0)": lambda: small + 1.0,
        "add_bcast (h + w)": lambda: h + lw,
        "add_T (a.t() + b)": lambda: sq.t() + sq2,
        "mul_offset (slices)": lambda: wide[:, 3:387] * wide[:, 10:394],
        "silu_384": lambda: F.silu(small),
        "gelu_384": lambda: F.gelu(small),
        "rms_norm_1x4096": lambda: F.rms_norm(x, (4096,), g, 1e-5),
        "layer_norm_8x384": lambda: F.layer_norm(h, (384,), lw, lb, 1e-12),
        "softmax_12x8x8": lambda: F.softmax(sc, dim=-1),
        "embedding_1": lambda: F.embedding(ids, emb),
        "rope_1tok": lambda: rope(q4, k4, pos, inv, 1.0, False),
        "kv_append_1tok": lambda: app(kc, vc, lens - 1, k4, k4, check=False),
        "decode_attention_64": lambda: dec(q, kc, vc, lens),
        "sdpa_q1_64_gqa": lambda: F.scaled_dot_product_attention(q4, kc, vc, enable_gqa=True),
        "sum_all_4096 (x.sum())": lambda: x.sum(),
        "sum_dim_8x384 (h.sum(-1))": lambda: h.sum(-1),
        "amax_dim_8x400": lambda: wide.amax(dim=-1),
        "linear_1x4096->1024": lambda: F.linear(x, w),
        "linear_bias_residual": lambda: nbx.ops.matmul.linear(x, w, wb, residual=res),
        "linear_out=": lambda: nbx.ops.matmul.linear(x, w, out=lin_out),
        "int4_linear_1x4096->1024": lambda: int4_linear(x, qw, qs, qm, group_size=32),
        "int4_linear_out=": lambda: int4_linear(x, qw, qs, qm, group_size=32, out=lin_out),
    }


def _host(v):
    import numpy as np
    if isinstance(v, (tuple, list)):
        return [_host(e) for e in v]
    return np.asarray(v.cpu().float().numpy(), dtype=np.float64)


def verify(nbx, device: str, names) -> int:
    """Each case on ``device`` three times (the first call plans, the others run from the plans) against the
    same case on the CPU tier (NumPy); returns the number of mismatches (printed)."""
    import numpy as np
    ref, dev = cases(nbx, "cpu"), cases(nbx, device)
    bad = 0
    for name in names:
        want = _host(ref[name]())
        for k in range(3):
            got = _host(dev[name]())
            gl, wl = (got, want) if isinstance(got, list) else ([got], [want])
            ok = all(np.allclose(g, w, rtol=2e-2, atol=2e-2, equal_nan=True) for g, w in zip(gl, wl))
            if not ok:
                bad += 1
                print(f"MISMATCH {name} (call {k + 1}) on {device}", flush=True)
    print(f"verify on {device}: {len(names)} cases x 3 calls, {bad} mismatches", flush=True)
    return bad


def _null_launch(nbx) -> None:
    """Make the one launcher a no-op (clearing 1-element int32 error flags, which kernels would leave at 0) and
    the launch-argument code take its compiled-tier form (plain Python scalars, not interpreter tensors)."""
    from nbxtensor.ops import pointwise, triton_helpers
    from nbxtensor.runtime import launcher
    from nbxtensor.tensor.core import Tensor, host_view

    def _null(kernel, grid, *args, _T=Tensor, _i32=nbx.int32, _hv=host_view, _tls=launcher._TLS, **meta):
        rec = _tls.__dict__.get("rec")   # the launcher's recording (launch plans of multi-launch ops)
        if rec is not None:
            rec.append((kernel, grid, args, meta))
        for x in args:
            if x.__class__ is _T and x._dtype is _i32 and x._shape == (1,):
                _hv(x)[...] = 0

    launcher.launch.__code__ = _null.__code__
    launcher.launch.__kwdefaults__ = {"_T": Tensor, "_i32": nbx.int32, "_hv": host_view, "_tls": launcher._TLS}
    pointwise.INTERPRET = False
    triton_helpers.INTERPRET = False


class _NullKernel:
    """A kernel of the null CUDA tier: the launcher keys on its id; its entry is cached before timing."""


def launch_cases(nbx, launch):
    """name -> (zero-argument callable, set_c(bool) or None): the launcher's fast path on the null CUDA tier (see
    the module docstring). ``launch`` is ``launcher.launch`` as the library defines it (the null tier replaces the
    module's own); set_c switches the C fast path on or off (None: this tree has no C path)."""
    from nbxtensor.device.base import device as Device
    from nbxtensor.device.cuda import backend as B
    from nbxtensor.memory import CachingAllocator
    from nbxtensor.runtime import cuda_launch as L
    from nbxtensor.runtime import launcher
    from nbxtensor.tensor.core import Size, make_tensor
    from types import SimpleNamespace

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from alloc_proxy import NullRaw   # raw memory of the null tier: made-up addresses, nothing behind them

    if 0 not in B._allocators:
        B._allocators[0] = CachingAllocator(NullRaw(), "cuda:0", 0)
    dev = Device("cuda", 0)

    def t(n):
        b = B._allocators[0].malloc(4 * n)
        return make_tensor(B.CudaStorage(dev, 4 * n, b.ptr, b, B.cuda_backend), Size((n,)), (1,), 0, nbx.float32)

    n = 1024
    x, y, o = t(n), t(n), t(n)
    L.INTERPRET = False   # the null tier runs with NBX_TRITON_INTERPRET=1 for the ops; these launches are "cuda"
    chains = SimpleNamespace(calls=[])
    L._rt, L._ENTER, L._EXIT = SimpleNamespace(launch_enter_hook=chains, launch_exit_hook=chains), chains, chains
    L.C._tls.ctx = 0       # cuda:0's context current, as after any real launch
    fastlaunch = None
    if hasattr(L, "c_fast_path"):
        from nbxtensor.runtime import fastlaunch
        fastlaunch.load()
    mod = fastlaunch._state["module"] if fastlaunch is not None else None
    fn = mod.noop if mod is not None else (lambda *a: None)
    head = (0x7F00_DEAD_0000, False, False, None, None, (4, 1, 0), None, None, None)
    kernel = _NullKernel()
    tail = launcher.Tail((n,), {"BLOCK": 1024})

    def cache(kernel_, sig, grid, i, args, meta, key):   # what the first launch through Triton would cache
        L._cache[key] = (fn, head, (1024,), False)
    real_slow, L._slow = L._slow, cache
    try:
        for c in ((False, True) if mod is not None else (False,)):
            if mod is not None:
                L.c_fast_path(c)
            launch(kernel, (1,), x, y, o, n, BLOCK=1024)
            launcher.launch_tail(kernel, (1,), (x, y, o), tail)
    finally:
        L._slow = real_slow
    args, meta, ptrs = (x, y, o, n), {"BLOCK": 1024}, (x.data_ptr(), y.data_ptr(), o.data_ptr(), n)
    set_c = L.c_fast_path if mod is not None else None
    stand_in = "C no-op" if mod is not None else "Python no-op (no C module)"
    return {
        "launch.launcher (launch(k, (1,), x, y, o, n, BLOCK=1024))":
            (lambda: launch(kernel, (1,), x, y, o, n, BLOCK=1024), set_c),
        "launch.launch_tail (planned Tail)": (lambda: launcher.launch_tail(kernel, (1,), (x, y, o), tail), set_c),
        "launch.cuda_launch (cuda_launch.launch alone)": (lambda: L.launch(kernel, (1,), dev, args, meta), set_c),
        f"launch.fn_floor ({stand_in}, prepared args)": (lambda: fn(1, 1, 1, 0, *head, *ptrs, 1024), None),
    }


def _best_us(f, calls: int) -> float:
    for _ in range(20):
        f()
    best = float("inf")
    n = max(1, calls // 20)
    for _ in range(20):
        t0 = time.thread_time()
        for _ in range(n):
            f()
        best = min(best, (time.thread_time() - t0) / n)
    return best * 1e6


def report_launch(nbx, launch, calls: int, only: str) -> None:
    """Print the ``launch.*`` rows: us per call with the C fast path and with the Python fast path."""
    from nbxtensor.runtime import cuda_launch as L
    cs = launch_cases(nbx, launch)
    if only:
        cs = {k: v for k, v in cs.items() if any(s in k for s in only.split(","))}
    if not cs:
        return
    was = L.c_fast_path() if hasattr(L, "c_fast_path") else False
    if hasattr(L, "c_fast_path"):
        from nbxtensor.runtime import fastlaunch
        print(f"launch fast path, null CUDA tier ({fastlaunch.status()})")
    else:
        print("launch fast path, null CUDA tier (this tree has no C fast path)")
    print(f"{'case':58s} {'C us':>7s} {'Python us':>10s} {'saved':>7s}")
    try:
        for name, (f, set_c) in cs.items():
            got = {}
            for c in ((True, False) if set_c is not None else (None,)):
                if set_c is not None:
                    set_c(c)
                    from nbxtensor.runtime import fastlaunch
                    h0 = fastlaunch._state["module"].hits()
                    f()
                    took = fastlaunch._state["module"].hits() - h0
                    assert took == (1 if c else 0), f"{name}: {took} launches by the C path with it {c and 'on'}"
                got[c] = _best_us(f, calls)
            if set_c is None:   # the floor (or a tree without the C path): one number
                print(f"{name:58s} {'-':>7s} {got[None]:10.2f} {'':>7s}", flush=True)
            else:
                print(f"{name:58s} {got[True]:7.2f} {got[False]:10.2f} {got[False] - got[True]:7.2f}", flush=True)
    finally:
        if hasattr(L, "c_fast_path"):
            L.c_fast_path(was)


def _count(pr: cProfile.Profile, calls: int) -> tuple[float, float]:
    st = pstats.Stats(pr)
    nbx = total = 0
    for (path, _, _), (cc, nc, *_rest) in st.stats.items():
        total += nc
        if f"{os.sep}nbxtensor{os.sep}" in path:
            nbx += nc
    return nbx / calls, total / calls


def main() -> None:
    a = _args()
    if a.tier == "null":
        os.environ["NBX_TRITON_INTERPRET"] = "1"
    import nbxtensor as nbx
    from nbxtensor.runtime import launcher
    real_launch = types.FunctionType(launcher.launch.__code__, launcher.launch.__globals__, "launch",
                                     launcher.launch.__defaults__, launcher.launch.__closure__)
    real_launch.__kwdefaults__ = launcher.launch.__kwdefaults__
    if a.tier == "null":
        _null_launch(nbx)
    cs = cases(nbx, a.device if a.tier == "device" else "cpu")
    if a.only:
        cs = {k: v for k, v in cs.items() if any(s in k for s in a.only.split(","))}
    if a.verify:
        bad = verify(nbx, a.device, list(cs))
        if bad:
            sys.exit(1)
    print(f"tier={a.tier} python={sys.version.split()[0]}")
    print(f"{'case':24s} {'us/call':>9s} {'nbx calls':>10s} {'py calls':>9s}")
    for name, f in cs.items():
        try:
            for _ in range(20):
                f()
            best = float("inf")
            n = max(1, a.calls // 20)
            for _ in range(20):
                t0 = time.thread_time()
                for _ in range(n):
                    f()
                best = min(best, (time.thread_time() - t0) / n)
            pr = cProfile.Profile()
            pr.enable()
            for _ in range(100):
                f()
            pr.disable()
            nbxc, total = _count(pr, 100)
            print(f"{name:24s} {best * 1e6:9.1f} {nbxc:10.0f} {total:9.0f}", flush=True)
            if a.top:
                s = io.StringIO()
                pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(a.top)
                print("\n".join(ln for ln in s.getvalue().splitlines()[6:] if ln.strip()))
        except Exception as e:  # a failing case must not hide the others
            print(f"{name:24s} FAILED {type(e).__name__}: {e}"[:300], flush=True)
    if a.tier == "null":
        report_launch(nbx, real_launch, 10 * a.calls, a.only)


if __name__ == "__main__":
    main()
