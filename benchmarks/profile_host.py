"""Where a call's time goes on the host: wall time per call without a sync (host cost), with a sync per call
(host + GPU, serialised), and a cProfile of the host path of each case.

Usage (GPU machine, from the source tree)::

    PYTHONPATH=src python3 benchmarks/profile_host.py [--device cuda] [--calls 300] [--profile] [--only NAME,...]

Cases are one-token decode shapes of a Llama-3-8B layer (bf16) and a few small pointwise ops: what a batch-1
decode step or a batch-1 encoder call is made of. Prints one table (microseconds per call) and, with
``--profile``, the 20 functions with the most own time per case.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import numpy as np

import nbxtensor as nbx
from nbxtensor.ops import registry


def _fn(name: str):
    return registry.get(name).extra["function"]


def cases(dev: str) -> dict:
    """name -> zero-argument callable, tensors made once on ``dev``."""
    bf = nbx.bfloat16
    F = nbx.nn.functional
    r = lambda *s: nbx.randn(*s, device=dev, dtype=bf)  # noqa: E731
    x = r(1, 4096)
    w_q, w_k, w_up, w_down = r(4096, 4096), r(1024, 4096), r(14336, 4096), r(4096, 14336)
    h_up = r(1, 14336)
    small = r(1, 384)
    big = r(1 << 20)
    g = r(4096)
    q = r(1, 32, 128)
    kc, vc = r(1, 8, 4096, 128), r(1, 8, 4096, 128)
    lens = nbx.tensor(np.array([4096], np.int32), device=dev)
    q4, k4 = r(1, 32, 1, 128), r(1, 8, 1, 128)
    pos = nbx.tensor(np.array([100], np.int64), device=dev)
    inv = nbx.tensor((1.0 / 500000 ** (np.arange(0, 128, 2) / 128)).astype(np.float32), device=dev)
    ids = nbx.tensor(np.array([[5]], np.int64), device=dev)
    emb = r(128256, 4096)
    dec, rope, app = _fn("decode_attention"), _fn("rotary_embedding"), _fn("kv_cache_append")
    return {
        "add_small_384": lambda: small + small,
        "mul_1M": lambda: big * big,
        "silu_small": lambda: F.silu(small),
        "rms_norm_1x4096": lambda: F.rms_norm(x, (4096,), g, 1e-5),
        "embedding_1": lambda: F.embedding(ids, emb),
        "linear_1x4096->1024": lambda: F.linear(x, w_k),
        "linear_1x4096->4096": lambda: F.linear(x, w_q),
        "linear_1x4096->14336": lambda: F.linear(x, w_up),
        "linear_1x14336->4096": lambda: F.linear(h_up, w_down),
        "rope_1tok": lambda: rope(q4, k4, pos, inv, 1.0, False),
        "kv_append_1tok": lambda: app(kc, vc, lens - 1, k4, k4, check=False),
        "decode_attention_4k": lambda: dec(q, kc, vc, lens),
        "sdpa_q1_4k_gqa": lambda: F.scaled_dot_product_attention(q4, kc, vc, enable_gqa=True),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    sync = nbx.cuda.synchronize if a.device.startswith("cuda") else (lambda: None)
    cs = cases(a.device)
    if a.only:
        cs = {k: v for k, v in cs.items() if any(s in k for s in a.only.split(","))}
    print(f"{'case':26s} {'host us/call':>13s} {'sync us/call':>13s} {'queue us/call':>13s}")
    for name, fn in cs.items():
        try:
            for _ in range(10):
                fn()
            sync()
            t0 = time.perf_counter()
            for _ in range(a.calls):
                fn()
            t1 = time.perf_counter()
            sync()
            t2 = time.perf_counter()
            n = max(10, a.calls // 3)
            t3 = time.perf_counter()
            for _ in range(n):
                fn()
                sync()
            t4 = time.perf_counter()
            print(f"{name:26s} {(t1 - t0) / a.calls * 1e6:13.1f} {(t4 - t3) / n * 1e6:13.1f} "
                  f"{(t2 - t0) / a.calls * 1e6:13.1f}", flush=True)
        except Exception as e:  # a case that fails must not hide the others
            print(f"{name:26s} FAILED {type(e).__name__}: {e}"[:300], flush=True)
    if a.profile:
        for name, fn in cs.items():
            pr = cProfile.Profile()
            try:
                pr.enable()
                for _ in range(100):
                    fn()
                pr.disable()
            except Exception:
                pr.disable()
                continue
            sync()
            s = io.StringIO()
            pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18)
            print(f"\n===== {name} (100 calls)")
            print("\n".join(ln for ln in s.getvalue().splitlines() if ln.strip())[:3500])


if __name__ == "__main__":
    main()
