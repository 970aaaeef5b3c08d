"""nn.functional.embedding against the float64 oracle: weight dtypes, index dtypes and shapes (0-d, empty),
strided weights, padding_idx, max_norm (in-place renormalisation, p = 2, 1, inf, 0, 3), out-of-range indices
raising IndexError on every device (the GPU kernel's device flag), errors as data, cost.

Runs on the ``device`` fixture; ``NBX_TRITON_INTERPRET=1`` runs the Triton kernels on the cpu device.
"""

from __future__ import annotations

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.dtypes.casting import cast_array
from nbxtensor.dtypes.tolerance import tolerance
from nbxtensor.ops import registry
from nbxtensor.ops.embedding import embedding_oracle, renorm_oracle

from attention_harness import QUICK, check_close, dev, draw, host

F = nbx.nn.functional
REC = registry.get("embedding")
WDTYPES = [T.float32, T.bfloat16, T.int64] if QUICK else [T.float32, T.bfloat16, T.float16, T.float64, T.int64,
                                                         T.int8, T.bool_]


def _weight(rng, shape, dt):
    if dt.kind == T.KIND_FLOAT:
        return draw(rng, shape, dt)
    if dt is T.bool_:
        return rng.random(shape) < 0.5
    return rng.integers(-100, 100, shape).astype(dt.numpy)


@pytest.mark.parametrize("wdt", WDTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("idt", [T.int64, T.int32], ids=lambda d: d.name)
def test_lookup(wdt, idt, device):
    """Rows gathered exactly (a copy: bit for bit), for index tensors of several shapes."""
    rng = np.random.default_rng(wdt.itemsize + idt.itemsize)
    V, D = 37, 67
    w = _weight(rng, (V, D), wdt)
    tw = dev(w, device)
    for shape in ([(3, 5), (), (0,)] if QUICK else [(3, 5), (), (0,), (7,), (2, 3, 4)]):
        idx = rng.integers(0, V, shape).astype(idt.numpy)
        out = F.embedding(dev(idx, device), tw)
        assert tuple(out.shape) == tuple(shape) + (D,) and out.dtype == wdt
        assert out.cpu().numpy().tobytes() == w[idx].tobytes(), f"lookup {wdt.name} {shape}"
    np.testing.assert_array_equal(cast_array(w[idx], wdt, T.float64) if wdt.kind == T.KIND_FLOAT else w[idx],
                                  embedding_oracle(idx, w).astype(np.float64) if wdt.kind == T.KIND_FLOAT
                                  else embedding_oracle(idx, w).astype(w.dtype))


def test_strided_weight_and_indices(device):
    """A transposed weight view and a strided index view are read in place."""
    rng = np.random.default_rng(2)
    w = draw(rng, (40, 23), T.float32)
    wt = dev(np.ascontiguousarray(w.T), device).t()  # [23, 40] storage viewed as [40, 23]
    assert not wt.is_contiguous()
    idx = rng.integers(0, 40, (6, 4))
    it = dev(idx, device)[:, ::2]
    out = F.embedding(it, wt)
    assert host(out).tobytes() == w[idx[:, ::2]].astype(np.float64).tobytes()


def test_padding_idx(device):
    """padding_idx only affects gradients: the forward reads the padding row as is (PyTorch); negative values
    count from the end; its range is checked."""
    w = np.arange(15, dtype=np.float32).reshape(5, 3)
    out = F.embedding(dev(np.array([0, 4]), device), dev(w, device), padding_idx=-1)
    np.testing.assert_array_equal(host(out), w[[0, 4]])
    with pytest.raises(AssertionError, match="Padding_idx must be within num_embeddings"):
        F.embedding(dev(np.array([0]), device), dev(w, device), padding_idx=-6)


@pytest.mark.parametrize("bad", [[1, 37], [-1], [0, 2 ** 40]])
def test_out_of_range_raises(bad, device):
    """IndexError("index out of range in self") on every device: never garbage."""
    idt = np.int64
    w = dev(np.zeros((37, 8), np.float32), device)
    with pytest.raises(IndexError, match="index out of range in self"):
        F.embedding(dev(np.array(bad, dtype=idt), device), w)


@pytest.mark.parametrize("p", [2.0, 1.0, float("inf"), 0.0, 3.0])
def test_max_norm(p, device):
    """max_norm rescales the referenced rows in place (each once, duplicates included) when their p-norm
    exceeds it; other rows are untouched; the lookup returns the rescaled rows."""
    dt = T.float32
    rng = np.random.default_rng(int(p * 10) if p != float("inf") else 99)
    V, D = 11, 19
    w = draw(rng, (V, D), dt, scale=3.0)
    idx = np.array([[1, 1, 4], [7, 1, 0]])
    tw = dev(w, device)
    max_norm = 2.0 if p != 0 else 5.0
    out = F.embedding(dev(idx, device), tw, max_norm=max_norm, norm_type=p)
    ref_w = renorm_oracle(idx, w.astype(np.float64), max_norm, p)
    tol = tolerance(dt, reduced=D)
    check_close(tw, ref_w, tol.rtol, tol.atol, what=f"renormed weight p={p}")
    check_close(out, embedding_oracle(idx, w, max_norm=max_norm, norm_type=p), tol.rtol, tol.atol, what="lookup")
    untouched = [r for r in range(V) if r not in idx]
    assert host(tw)[untouched].tobytes() == w[untouched].astype(np.float64).tobytes()


def test_max_norm_half(device):
    dt = T.bfloat16
    rng = np.random.default_rng(6)
    w = draw(rng, (9, 64), dt, scale=4.0)
    tw = dev(w, device)
    F.embedding(dev(np.array([2, 3]), device), tw, max_norm=1.0)
    ref = renorm_oracle(np.array([2, 3]), cast_array(w, dt, T.float64), 1.0, 2.0)
    tol = tolerance(dt, reduced=64)
    check_close(tw, cast_array(cast_array(ref, T.float64, dt), dt, T.float64), tol.rtol, tol.atol, what="bf16 renorm")


@pytest.mark.parametrize("case", REC.extra["errors"], ids=lambda c: c[0])
def test_errors(case, device):
    label, builders, kwargs, exc, msg = case
    d = nbx.device(device)
    args = [b(d) if callable(b) else b for b in builders]
    with pytest.raises(exc, match=msg):
        F.embedding(*args, **kwargs)


def test_cost():
    idx = nbx.empty(4, 1000, dtype=nbx.int64)
    w = nbx.empty(128256, 4096, dtype=nbx.bfloat16)
    c = REC.cost(idx, w)
    rows = 4000 * 4096 * 2
    assert c.bytes_read == rows + 4000 * 8 and c.bytes_written == rows and c.flops == 0
