"""Matrix products (src/nbxtensor/ops/matmul.py) against float64 oracles.

Every result is compared with the record's float64 oracle run on the same (exactly representable) inputs, the
oracle's result cast to the output dtype first, with ``tolerance(dtype, reduced=K)`` from the one tolerance
table (it grows with sqrt(K)). Shapes include K = 0, sizes of BLOCK*k+1 for the blocks of the device's config
table (16 under the interpreter, 64/128/256 on sm90), odd sizes, transposed / sliced / expanded operands, batch
broadcasting and the 1-D cases; the small-M (GEMV, split-K) and tiled kernels are both exercised
(``test_kernel_paths`` checks which one ran). Errors are data in the records (``extra["errors"]``).

Tiers: the CPU tier runs the NumPy implementation; ``NBX_TRITON_INTERPRET=1 NBX_TEST_QUICK=1`` runs the Triton
kernels under the interpreter on small shapes; ``NBX_TEST_DEVICE=cuda`` runs the same tests on the GPU with
larger shapes.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.dtypes.casting import cast_array
from nbxtensor.dtypes.tolerance import tolerance
from nbxtensor.ops import matmul as MM
from nbxtensor.ops import registry
from nbxtensor.runtime.configs import launch_config
from nbxtensor.tensor.core import make_tensor

QUICK = os.environ.get("NBX_TEST_QUICK", "0") == "1"
INTERPRET = os.environ.get("NBX_TRITON_INTERPRET", "0") == "1"
DEVICE = os.environ.get("NBX_TEST_DEVICE", "cpu")
GPU = DEVICE.startswith("cuda")

FLOATS = [T.float32, T.float16, T.bfloat16, T.float64]
DTYPES = [T.float32, T.bfloat16] if QUICK else FLOATS
RNG = np.random.default_rng(1234)


# ---------------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------------
def vals(shape, dt, scale=1.0):
    """float64 values exactly representable in ``dt`` (drawn, then rounded to ``dt``)."""
    a = RNG.uniform(-1, 1, size=shape) * scale
    return cast_array(cast_array(a, T.float64, dt), dt, T.float64)


def make(a64: np.ndarray, dt, device, layout="contiguous"):
    """A tensor of ``dt`` on ``device`` holding ``a64`` in ``layout``: ``contiguous``, ``transposed`` (the last two
    dims stored swapped, a transposed view), ``sliced`` (a strided view with an offset into a larger buffer)."""
    a = np.asarray(a64)
    if layout == "transposed" and a.ndim >= 2:
        base = nbx.tensor(cast_array(np.ascontiguousarray(np.swapaxes(a, -1, -2)), T.float64, dt), dtype=dt,
                          device=device)
        return base.transpose(-1, -2)
    if layout == "sliced" and a.ndim >= 1:
        big_shape = tuple(s + 2 for s in a.shape[:-1]) + (2 * a.shape[-1] + 3,)
        big = np.zeros(big_shape)
        idx = tuple(slice(1, 1 + s) for s in a.shape[:-1]) + (slice(1, 1 + 2 * a.shape[-1], 2),)
        big[idx] = a
        t = nbx.tensor(cast_array(big, T.float64, dt), dtype=dt, device=device)
        return t[idx]
    return nbx.tensor(cast_array(np.ascontiguousarray(a), T.float64, dt), dtype=dt, device=device)


def f64(t) -> np.ndarray:
    return cast_array(np.asarray(t.cpu().numpy()), t.dtype, T.float64)


def assert_close(actual, expected64, dt, K: int, what=""):
    """``actual`` (a tensor of ``dt``) vs the float64 oracle's result cast to ``dt`` first."""
    assert actual.dtype is dt, (actual.dtype, dt)
    exp = np.asarray(expected64, dtype=np.float64)
    assert tuple(actual.shape) == exp.shape, (tuple(actual.shape), exp.shape, what)
    exp_d = cast_array(cast_array(exp, T.float64, dt), dt, T.float64)
    got = f64(actual)
    tol = tolerance(dt, reduced=max(K, 1))
    bad = ~(np.abs(got - exp_d) <= tol.atol + tol.rtol * np.abs(exp_d))
    bad &= ~(np.isnan(got) & np.isnan(exp_d))
    assert not bad.any(), (f"{what}: {int(bad.sum())} of {bad.size} elements off; worst |diff| "
                           f"{np.nanmax(np.abs(got - exp_d)):.3g} (rtol {tol.rtol:.3g}, atol {tol.atol:.3g})")


def oracle(name):
    return registry.get(name).oracle


def mm_blocks(device, dt=T.float32):
    cfg = launch_config("mm", nbx.device(device), dtypes=(dt,), m=4096, n=4096, k=4096)
    return cfg["BLOCK_M"], cfg["BLOCK_N"], cfg["BLOCK_K"]


def mm_shapes(device):
    """(M, N, K): K = 0, 1-sized dims, BLOCK*k+1 of the device's tile sizes, odd sizes, GEMV shapes."""
    bm, bn, bk = mm_blocks(device)
    s = [(1, 1, 1), (3, 5, 7), (1, 2 * bn + 1, 2 * bk + 1), (5, bn + 1, bk + 1), (8, 9, 3 * bk + 1),
         (bm + 1, bn + 1, bk + 1), (2 * bm + 1, 3, bk - 1), (4, 7, 0), (bm + 1, bn + 1, 0), (0, 5, 3), (5, 0, 3)]
    if not QUICK:
        s += [(2 * bm + 1, 2 * bn + 1, 2 * bk + 1), (bm - 1, bn - 1, bk - 1), (23, 41, 300)]
    if GPU:
        s += [(1, 4097, 4096), (7, 1000, 2049), (1000, 7, 2049), (513, 1025, 257), (1024, 1024, 1024)]
    return s


# ---------------------------------------------------------------------------------------------------------
# mm over shapes, dtypes and layouts
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_mm_shapes(dt, device):
    for M, N, K in mm_shapes(device):
        a, b = vals((M, K), dt), vals((K, N), dt)
        r = nbx.mm(make(a, dt, device), make(b, dt, device))
        assert_close(r, oracle("mm")(a, b), dt, K, f"mm {M}x{N}x{K}")
        if K == 0:
            assert not f64(r).any()  # zeros, never uninitialised memory


LAYOUTS = [("contiguous", "transposed"), ("transposed", "contiguous"), ("transposed", "transposed"),
           ("sliced", "sliced"), ("sliced", "transposed")]


@pytest.mark.parametrize("la,lb", LAYOUTS)
@pytest.mark.parametrize("dt", [T.float32, T.bfloat16] if QUICK else FLOATS, ids=lambda d: d.name)
def test_mm_layouts(la, lb, dt, device):
    """Any strides: transposed and sliced operands are read in place (both kernels: GEMV and tiled)."""
    bm, bn, bk = mm_blocks(device)
    for M, N, K in [(1, bn + 3, bk + 5), (6, 2 * bn + 1, 2 * bk + 1), (bm + 3, bn + 5, bk + 7), (bm + 3, 3, bk + 1)]:
        a, b = vals((M, K), dt), vals((K, N), dt)
        A, B = make(a, dt, device, la), make(b, dt, device, lb)
        if la == "transposed" and M > 1:
            assert not A.is_contiguous()
        assert_close(nbx.mm(A, B), a @ b, dt, K, f"mm {la}/{lb} {M}x{N}x{K}")


def test_mm_expanded_operands(device):
    """Stride-0 operands (expand) are read through their strides."""
    dt = T.float32
    bm, bn, bk = mm_blocks(device)
    for M in (1, 5, bm + 1):
        row = vals((1, bk + 3), dt)
        b = vals((bk + 3, bn + 1), dt)
        A = make(row, dt, device).expand(M, bk + 3)
        assert M == 1 or A.stride(0) == 0
        assert_close(nbx.mm(A, make(b, dt, device)), np.broadcast_to(row, (M, bk + 3)) @ b, dt, bk + 3)
        col = vals((bk + 3, 1), dt)
        B = make(col, dt, device).expand(bk + 3, 7)
        a = vals((M, bk + 3), dt)
        assert_close(nbx.mm(make(a, dt, device), B), a @ np.broadcast_to(col, (bk + 3, 7)), dt, bk + 3)


def test_half_types_accumulate_in_float32(device):
    """Sums of K ones: float16 accumulation would stall at 2048 (bfloat16 at 256); float32 gives K exactly."""
    for dt, K in ((T.float16, 4096), (T.bfloat16, 1024)):
        for M, N in ((1, 3), (3, 2), (9, 9)) if QUICK else ((1, 1), (1, 3), (3, 2), (17, 18), (100, 130)):
            a = nbx.ones(M, K, dtype=dt, device=device)
            b = nbx.ones(K, N, dtype=dt, device=device)
            r = f64(nbx.mm(a, b))
            assert (r == K).all(), (dt.name, M, N, np.unique(r))


# ---------------------------------------------------------------------------------------------------------
# matmul: 1-D cases and batch broadcasting
# ---------------------------------------------------------------------------------------------------------
MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)),
                 ((5, 2, 3), (3,)), ((3,), (5, 3, 4)), ((2, 3), (5, 3, 4)), ((5, 1, 2, 3), (4, 3, 2)),
                 ((1, 2, 3), (6, 3, 4)), ((2, 1, 4, 3), (1, 5, 3, 2)), ((4, 17, 20), (4, 20, 9)),
                 ((2, 9, 3), (2, 3, 0)), ((0, 2, 3), (3, 4)), ((2, 2, 0), (2, 0, 5)), ((3, 20, 33), (33, 17))]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=str)
def test_matmul_broadcasting(sa, sb, device):
    dt = T.float32
    a, b = vals(sa, dt), vals(sb, dt)
    r = nbx.matmul(make(a, dt, device), make(b, dt, device))
    assert_close(r, oracle("matmul")(a, b), dt, sa[-1], f"matmul {sa} @ {sb}")


def test_matmul_non_viewable_input(device):
    """A 3-D input that cannot be viewed as (rows, K) goes through the batched kernel with the 2-D operand
    broadcast (stride 0), not through a copy."""
    dt = T.bfloat16 if QUICK else T.float32
    a = vals((3, 6, 20), dt)  # stored (6, 3, 20), viewed permuted
    A = make(np.ascontiguousarray(a.transpose(1, 0, 2)), dt, device).transpose(0, 1)
    b = vals((20, 17), dt)
    assert_close(A @ make(b, dt, device), a @ b, dt, 20)
    out = nbx.empty(3, 6, 17, dtype=dt, device=device)
    r = nbx.matmul(A, make(b, dt, device), out=out)
    assert r is out
    assert_close(out, a @ b, dt, 20)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_bmm(dt, device):
    bm, bn, bk = mm_blocks(device)
    for B, M, N, K in [(3, 5, 7, 9), (2, 1, bn + 1, bk + 1), (4, bm + 1, 3, bk + 2), (0, 2, 3, 4), (2, 3, 4, 0)]:
        a, b = vals((B, M, K), dt), vals((B, K, N), dt)
        assert_close(nbx.bmm(make(a, dt, device), make(b, dt, device, "transposed")), a @ b, dt, K,
                     f"bmm {B}x{M}x{N}x{K}")


def test_many_batch_dims(device):
    """More than two batch dims after collapsing (host loop) and non-mergeable batch strides."""
    dt = T.float32
    a, b = vals((2, 3, 2, 5, 4), dt), vals((2, 1, 2, 4, 3), dt)
    A = make(np.ascontiguousarray(a.transpose(1, 0, 2, 3, 4)), dt, device).transpose(0, 1)
    assert_close(nbx.matmul(A, make(b, dt, device)), a @ b, dt, 4)


def test_batch_grid_limit(monkeypatch, device):
    """Batches beyond grid axis 1's limit are split on the host (limit lowered for the test)."""
    monkeypatch.setattr(MM, "_MAX_GRID_Y", 3)
    dt = T.float32
    a, b = vals((7, 5, 9, 4), dt), vals((7, 5, 4, 3), dt)
    assert_close(nbx.matmul(make(a, dt, device), make(b, dt, device)), a @ b, dt, 4)
    a, b = vals((11, 9, 4), dt), vals((11, 4, 3), dt)
    assert_close(nbx.bmm(make(a, dt, device), make(b, dt, device)), a @ b, dt, 4)


# ---------------------------------------------------------------------------------------------------------
# addmm / baddbmm / addmv / mv / dot
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_addmm(dt, device):
    bm, bn, bk = mm_blocks(device)
    for M, N, K in [(4, 6, 5), (1, bn + 1, bk + 1), (bm + 1, bn + 2, bk + 1), (3, 5, 0)]:
        a, b = vals((M, K), dt), vals((K, N), dt)
        for cshape, beta, alpha in [((M, N), 1, 1), ((N,), 0.5, 2.0), ((1, N), -1, 1), ((M, 1), 2, -0.5),
                                    ((), 1, 1)]:
            c = vals(cshape, dt)
            r = nbx.addmm(make(c, dt, device), make(a, dt, device), make(b, dt, device), beta=beta, alpha=alpha)
            assert_close(r, oracle("addmm")(c, a, b, beta, alpha), dt, max(K, 1) + 1, f"addmm {M}x{N}x{K} {cshape}")


def test_addmm_beta_zero_ignores_nan(device):
    for M, N, K in [(1, 5, 3), (20, 21, 3)]:
        c = nbx.full((M, N), float("nan"), device=device)
        a, b = vals((M, K), T.float32), vals((K, N), T.float32)
        r = nbx.addmm(c, make(a, T.float32, device), make(b, T.float32, device), beta=0, alpha=2)
        assert_close(r, 2 * (a @ b), T.float32, K)


def test_addmm_k0_is_beta_c(device):
    c = vals((3, 4), T.float32)
    r = nbx.addmm(make(c, T.float32, device), nbx.empty(3, 0, device=device), nbx.empty(0, 4, device=device), beta=2)
    assert_close(r, 2 * c, T.float32, 1)


def test_inplace_and_out(device):
    dt = T.float32
    a, b, c = vals((5, 7), dt), vals((7, 5), dt), vals((5, 5), dt)
    C = make(c, dt, device)
    r = C.addmm_(make(a, dt, device), make(b, dt, device), alpha=0.5)
    assert r is C
    assert_close(C, c + 0.5 * (a @ b), dt, 8)
    out = nbx.empty(2, 2, device=device)  # resized (with PyTorch's warning)
    with pytest.warns(UserWarning, match="resized"):
        r = nbx.mm(make(a, dt, device), make(b, dt, device), out=out)
    assert r is out and tuple(out.shape) == (5, 5)
    assert_close(out, a @ b, dt, 7)
    # a transposed out= is written through its strides
    o = nbx.empty(5, 5, device=device).t()
    nbx.mm(make(a, dt, device), make(b, dt, device), out=o)
    assert_close(o, a @ b, dt, 7)
    # addmv_, baddbmm_, addr_
    v = vals((5,), dt)
    V = make(v, dt, device)
    V.addmv_(make(c, dt, device), make(v, dt, device), beta=2)
    assert_close(V, 2 * v + c @ v, dt, 6)
    x, y, z = vals((2, 3, 4), dt), vals((2, 4, 5), dt), vals((2, 3, 5), dt)
    Z = make(z, dt, device)
    Z.baddbmm_(make(x, dt, device), make(y, dt, device), beta=0.5)
    assert_close(Z, 0.5 * z + x @ y, dt, 5)
    with pytest.raises(RuntimeError, match="Bad in-place call"):
        nbx.zeros(1, 1, device=device).addmm_(nbx.ones(3, 2, device=device), nbx.ones(2, 3, device=device))
    with pytest.raises(RuntimeError, match="Bad in-place call"):
        nbx.zeros(1, device=device).addmv_(nbx.ones(3, 2, device=device), nbx.ones(2, device=device))


def test_output_aliasing_an_input(device):
    """out= sharing memory with a factor: computed into a temporary (correct result, as PyTorch)."""
    dt = T.float32
    bm, bn, bk = mm_blocks(device)
    for n in (4, bm + 1):
        a, b = vals((n, n), dt), vals((n, n), dt)
        A, B = make(a, dt, device), make(b, dt, device)
        nbx.mm(A, B, out=A)
        assert_close(A, a @ b, dt, n)
        C = make(a, dt, device)
        C.addmm_(C, make(b, dt, device))
        assert_close(C, a + a @ b, dt, n + 1)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_baddbmm(dt, device):
    x, y = vals((3, 4, 17), dt), vals((3, 17, 5), dt)
    for cshape in [(3, 4, 5), (4, 5), (1, 5), ()]:
        c = vals(cshape, dt)
        r = nbx.baddbmm(make(c, dt, device), make(x, dt, device), make(y, dt, device), beta=0.25, alpha=-1)
        assert_close(r, oracle("baddbmm")(c, x, y, 0.25, -1), dt, 18)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_mv_addmv(dt, device):
    bm, bn, bk = mm_blocks(device)
    for M, K in [(1, 1), (7, 3), (bm + 1, bk + 1), (3 * bn + 1, 2 * bk + 3), (5, 0), (0, 4)]:
        m, v = vals((M, K), dt), vals((K,), dt)
        for la in ("contiguous", "transposed"):
            assert_close(nbx.mv(make(m, dt, device, la), make(v, dt, device)), oracle("mv")(m, v), dt, K,
                         f"mv {M}x{K} {la}")
        c = vals((M,), dt)
        r = nbx.addmv(make(c, dt, device), make(m, dt, device), make(v, dt, device), beta=3, alpha=0.5)
        assert_close(r, oracle("addmv")(c, m, v, 3, 0.5), dt, K + 1, f"addmv {M}x{K}")
        if M:
            r = nbx.addmv(make(vals((1,), dt), dt, device), make(m, dt, device), make(v, dt, device))
            assert tuple(r.shape) == (M,)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_dot(dt, device):
    for K in (0, 1, 5, 33, 1000 if QUICK else 100000):
        a, b = vals((K,), dt), vals((K,), dt)
        r = nbx.dot(make(a, dt, device), make(b, dt, device, "sliced"))
        assert tuple(r.shape) == ()
        assert_close(r, oracle("dot")(a, b), dt, K, f"dot K={K}")


# ---------------------------------------------------------------------------------------------------------
# outer / addr (pointwise: promotion, bool, integers)
# ---------------------------------------------------------------------------------------------------------
def test_outer(device):
    a, b = vals((5,), T.float32), vals((7,), T.float16)
    r = nbx.outer(make(a, T.float32, device), make(b, T.float16, device))
    assert r.dtype is T.float32  # promotes, as PyTorch
    assert_close(r, np.multiply.outer(a, b), T.float32, 1)
    x = nbx.tensor([True, False, True], device=device)
    y = nbx.tensor([True, True], device=device)
    assert nbx.outer(x, y).cpu().tolist() == [[True, True], [False, False], [True, True]]
    i = nbx.tensor([1, -2, 3], dtype=nbx.int32, device=device)
    assert nbx.outer(i, i).cpu().tolist() == np.multiply.outer([1, -2, 3], [1, -2, 3]).tolist()
    assert x.ger(y).dtype is T.bool_


def test_addr(device):
    dt = T.float32
    s, v1, v2 = vals((4, 6), dt), vals((4,), dt), vals((6,), dt)
    for beta, alpha, sshape in [(1, 1, (4, 6)), (0.5, -2, (6,)), (2, 1, ())]:
        sv = s if sshape == (4, 6) else vals(sshape, dt)
        r = nbx.addr(make(sv, dt, device), make(v1, dt, device), make(v2, dt, device), beta=beta, alpha=alpha)
        assert_close(r, oracle("addr")(sv, v1, v2, beta, alpha), dt, 2)
    nan = nbx.full((4, 6), float("nan"), device=device)
    r = nbx.addr(nan, make(v1, dt, device), make(v2, dt, device), beta=0)
    assert_close(r, np.multiply.outer(v1, v2), dt, 1)
    b = nbx.addr(nbx.zeros(2, 2, dtype=nbx.bool, device=device), nbx.tensor([True, False], device=device),
                 nbx.tensor([True, True], device=device))
    assert b.cpu().tolist() == [[True, True], [False, False]]
    i = nbx.addr(nbx.ones(2, 2, dtype=nbx.int64, device=device), nbx.tensor([1, 2], device=device),
                 nbx.tensor([3, 4], device=device), beta=2, alpha=3)
    assert i.cpu().tolist() == [[11, 14], [20, 26]]
    S = make(s, dt, device)
    S.addr_(make(v1, dt, device), make(v2, dt, device))
    assert_close(S, s + np.multiply.outer(v1, v2), dt, 2)
    with pytest.raises(RuntimeError, match=r"size mismatch, input: \[2, 1\], v1: \[2\], v2: \[2\]"):
        nbx.zeros(2, 1, device=device).addr_(nbx.ones(2, device=device), nbx.ones(2, device=device))


# ---------------------------------------------------------------------------------------------------------
# linear, fused epilogues, the GEMV path
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
def test_functional_linear(dt, device):
    F = nbx.nn.functional
    bm, bn, bk = mm_blocks(device)
    for xshape, N in [((1, bk + 1), bn + 3), ((3, bk + 1), 5), ((2, 3, 17), 9), ((bk + 1,), 7), ((bm + 1, 9), 3),
                      ((4, 0), 3)]:
        K = xshape[-1]
        x, w, b = vals(xshape, dt), vals((N, K), dt), vals((N,), dt)
        X, W, Bv = make(x, dt, device), make(w, dt, device), make(b, dt, device)
        assert_close(F.linear(X, W), oracle("linear")(x, w), dt, K, f"linear {xshape}->{N}")
        assert_close(F.linear(X, W, Bv), oracle("linear")(x, w, b), dt, K + 1, f"linear+bias {xshape}->{N}")
        # a weight stored transposed (K, N) and read in place
        Wt = make(np.ascontiguousarray(w.T), dt, device).t()
        assert_close(F.linear(X, Wt, Bv), oracle("linear")(x, w, b), dt, K + 1)
    x3, w1 = vals((3, 5), dt), vals((5,), dt)
    assert_close(F.linear(make(x3, dt, device), make(w1, dt, device)), x3 @ w1, dt, 5, "linear, 1-D weight")


ACTS = [None, "relu", "gelu", "gelu_tanh", "silu", "silu_first_half"]


@pytest.mark.parametrize("act", ACTS)
def test_fused_linear_epilogue(act, device):
    """bias + activation + residual in the kernel's epilogue, both kernels (M = 1, 3 GEMV; M = 20 tiled)."""
    dt = T.bfloat16 if QUICK else T.float32
    for M in (1, 3, 20):
        K, N = 37, 22 if act == "silu_first_half" else 21   # the half (11) inside a column tile
        x, w, b, res = vals((M, K), dt, 3.0), vals((N, K), dt), vals((N,), dt), vals((M, N), dt)
        r = MM.linear(make(x, dt, device), make(w, dt, device), make(b, dt, device), activation=act,
                      residual=make(res, dt, device))
        # the oracle's pre-activation values are rounded like the kernel's float32 epilogue (activation slopes
        # are bounded by about 1.13, so the table's tolerance covers the activation too)
        assert_close(r, MM._or_linear(x, w, b, act, res), dt, K + 2, f"linear act={act} M={M}")


def test_fused_linear_inplace_residual(device):
    """h = linear(x, w, residual=h, out=h): the residual update in place (each element read before written)."""
    dt = T.float32
    for M in (1, 5, 30):
        x, w, h = vals((M, 19), dt), vals((23, 19), dt), vals((M, 23), dt)
        H = make(h, dt, device)
        r = MM.linear(make(x, dt, device), make(w, dt, device), residual=H, out=H)
        assert r is H
        assert_close(H, h + x @ w.T, dt, 20)


def test_tma_operand_rules():
    """``_tma_operands``: 16-bit floats, a unit stride along K for ``a`` and along K or N for ``b``, 16-byte
    aligned bases and 16-byte multiples for the other strides of the matrix dims (size-1 batch dims exempt)."""
    bf = nbx.bfloat16
    a = nbx.zeros(1, 1, 64, 128, dtype=bf)
    w = nbx.zeros(96, 128, dtype=bf)
    assert MM._tma_operands(a, w.t().view(1, 1, 128, 96))             # B K-major (linear's weight)
    assert MM._tma_operands(a, nbx.zeros(1, 1, 128, 96, dtype=bf))    # B N-major
    assert not MM._tma_operands(a.float(), nbx.zeros(1, 1, 128, 96))  # float32
    assert not MM._tma_operands(nbx.zeros(1, 1, 64, 130, dtype=bf)[..., :128], nbx.zeros(1, 1, 128, 96, dtype=bf))
    assert not MM._tma_operands(a, nbx.zeros(1, 1, 128, 99, dtype=bf)[..., :96])   # row stride 99 elements
    assert not MM._tma_operands(nbx.zeros(1, 1, 64, 129, dtype=bf)[..., 1:], nbx.zeros(1, 1, 128, 96, dtype=bf))
    assert not MM._tma_operands(a, nbx.zeros(1, 1, 96, 128, dtype=bf).transpose(2, 3)[..., ::2, :])   # no unit stride


@pytest.mark.skipif(not GPU, reason="the descriptor (TMA) variant of the GEMM runs on sm_90 GPUs only")
@pytest.mark.parametrize("dt", [T.bfloat16, T.float16])
def test_mm_tma_variant_equals_pointer_kernel(dt, device):
    """The GEMM kernel's TMA variant (tensor descriptors; sm90.json takes it for large products with a
    transposed weight) against its pointer variant at the same tiles: the same bits, over M, N, K that are not
    multiples of the tiles, both layouts of B (K-major: ``linear``'s (N, K) weight; N-major: ``mm``), a batched
    product and an epilogue with bias and residual; and the float64 oracle. Operands that break the bulk-copy
    rules (an odd row stride) take the pointer kernel under the same settings."""
    from nbxtensor.runtime import configs
    tiles = dict(BLOCK_M=256, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=4)
    cases = [(300, 200, 136, "linear"), (257, 129, 1000, "linear"), (300, 200, 136, "mm"), (64, 520, 72, "bmm"),
             (200, 136, 88, "linear-bias-residual")]
    for M, N, K, kind in cases:
        x64, w64 = vals((M, K), dt), vals((N, K), dt)
        b64, r64 = vals((N,), dt), vals((M, N), dt)
        x, w = make(x64, dt, device), make(w64, dt, device)
        bias, res = make(b64, dt, device), make(r64, dt, device)
        if kind == "linear":
            fn, ref = (lambda: nbx.nn.functional.linear(x, w)), x64 @ w64.T
        elif kind == "linear-bias-residual":
            fn, ref = (lambda: MM.linear(x, w, bias, residual=res)), x64 @ w64.T + b64 + r64
        elif kind == "mm":
            wt = make(w64.T, dt, device)
            fn, ref = (lambda: nbx.mm(x, wt)), x64 @ w64.T
        else:
            xb, wb = make(np.stack([x64, -x64]), dt, device), make(np.stack([w64.T, w64.T]), dt, device)
            fn, ref = (lambda: nbx.bmm(xb, wb)), np.stack([x64 @ w64.T, -x64 @ w64.T])
        with configs.override("mm", TMA=True, **tiles):
            got_tma = fn()
        with configs.override("mm", TMA=False, **tiles):
            got_ptr = fn()
        assert np.array_equal(got_tma.cpu().numpy(), got_ptr.cpu().numpy()), (M, N, K, kind)
        assert_close(got_tma, ref, dt, K, f"tma {kind} {M}x{N}x{K}")
    xo = make(vals((100, 130), dt), dt, device, "sliced")   # stride 2 along K: the pointer kernel
    wo = make(vals((70, 130), dt), dt, device)
    with configs.override("mm", TMA=True, **tiles):
        got = nbx.nn.functional.linear(xo, wo)
    assert_close(got, f64(xo) @ f64(wo).T, dt, 130, "tma refused: sliced input")


def test_linear_activation_refused(device):
    with pytest.raises(ValueError, match="unknown activation 'tanh'"):
        MM.linear(nbx.ones(2, 3, device=device), nbx.ones(4, 3, device=device), activation="tanh")
    for w in (nbx.ones(5, 3, device=device), nbx.ones(3, device=device)):  # odd N, a 1-D weight
        with pytest.raises(ValueError, match="'silu_first_half' needs a 2-D weight with an even number of rows"):
            MM.linear(nbx.ones(2, 3, device=device), w, activation="silu_first_half")


def test_silu_first_half_is_silu_gate_then_plain_up(device):
    """A fused gate/up weight ``[gate; up]``: the first N/2 output columns match ``linear(x, gate, act="silu")`` and
    the rest ``linear(x, up)`` (within the product's tolerance: the launch settings may differ with N), for the GEMV
    rows (M = 1, 3) and the tiled kernel (M = 20); and with N < M, where a GEMV would run the transposed problem
    (whose epilogue sees the output's rows as its columns)."""
    dt = T.bfloat16
    for M, N2 in ((1, 24), (3, 24), (20, 24), (7, 3), (20, 3)):
        x, w, b = vals((M, 40), dt, 3.0), vals((2 * N2, 40), dt), vals((2 * N2,), dt)
        X, W, B = make(x, dt, device), make(w, dt, device), make(b, dt, device)
        fused = MM.linear(X, W, B, activation="silu_first_half")
        gate = MM.linear(X, W[:N2], B[:N2], activation="silu")
        up = MM.linear(X, W[N2:], B[N2:])
        want = np.concatenate([gate.cpu().float().numpy(), up.cpu().float().numpy()], axis=1)
        assert_close(fused, want, dt, 42, f"silu_first_half M={M} N={2 * N2}")
        silu_of_up = MM.linear(X, W[N2:], B[N2:], activation="silu").cpu().float().numpy()
        assert not np.allclose(fused.cpu().float().numpy()[:, N2:], silu_of_up)  # the up half is left alone


DECODE = [(1, 64, 48), (2, 40, 33), (8, 24, 100), (1, 1, 300), (5, 3, 64)]
if GPU:
    DECODE += [(1, 4096, 4096), (1, 14336, 4096), (1, 4096, 14336), (1, 1024, 4096), (4, 4096, 4096),
               (8, 1024, 4096)]


@pytest.mark.parametrize("M,N,K", DECODE, ids=str)
def test_decode_linear(M, N, K, device):
    """Decode-shaped linears (small M): the GEMV kernel, split-K included."""
    for dt in ([T.bfloat16] if QUICK else [T.bfloat16, T.float16, T.float32]):
        x, w, b = vals((M, K), dt), vals((N, K), dt), vals((N,), dt)
        r = nbx.nn.functional.linear(make(x, dt, device), make(w, dt, device), make(b, dt, device))
        assert_close(r, x @ w.T + b, dt, K + 1, f"decode linear {M}x{N}x{K} {dt.name}")


def test_split_k_is_deterministic(device):
    """The split-K GEMV sums partials in a fixed order: two runs give identical bytes."""
    K = 2000 if QUICK else 50000
    x, w = vals((1, K), T.float32), vals((3, K), T.float32)
    X, W = make(x, T.float32, device), make(w, T.float32, device)
    r1 = nbx.nn.functional.linear(X, W).cpu().numpy()
    r2 = nbx.nn.functional.linear(X, W).cpu().numpy()
    assert r1.tobytes() == r2.tobytes()
    assert_close(nbx.nn.functional.linear(X, W), x @ w.T, T.float32, K)


# ---------------------------------------------------------------------------------------------------------
# The small-M kernel's settings (each a path of the kernel), split_k, launch plans
# ---------------------------------------------------------------------------------------------------------
KERNELS = INTERPRET or GPU

GEMV_SETTINGS = [dict(), dict(UNROLL=2), dict(UNROLL=4, PREFETCH=True), dict(UNROLL=2, PREFETCH=True, BLOCK_N=4),
                 dict(UNROLL=4, EVICT_W="evict_first", BLOCK_N=16), dict(BLOCK_N=2, num_warps=2, UNROLL=8)]


@pytest.mark.skipif(not KERNELS, reason="the Triton kernels run under the interpreter or on a GPU")
@pytest.mark.parametrize("settings", GEMV_SETTINGS, ids=lambda s: ",".join(f"{k}={v}" for k, v in s.items()) or "table")
def test_gemv_settings(settings, device):
    """Every M = 1 path of the GEMV kernel (UNROLL chunks, PREFETCH, the masked tail, split-K with ranges that
    are and are not whole chunks, rows past N) against the oracle, with bias and an activation."""
    from nbxtensor.runtime.configs import override
    bk = launch_config("gemv", nbx.device(device), dtypes=(T.float32,), m=1, n=64, k=64)["BLOCK_K"]
    for N, K in [(5, 2 * bk * 4), (9, 3 * bk + 5), (33, bk - 3), (3, 40 * bk)]:
        for dt in (T.float32, T.bfloat16):
            x, w, b = vals((1, K), dt), vals((N, K), dt), vals((N,), dt)
            with override("gemv", **settings) if settings else _nullcontext():
                r = MM.linear(make(x, dt, device), make(w, dt, device), make(b, dt, device), activation="relu")
            assert_close(r, np.maximum(x @ w.T + b, 0), dt, K + 1, f"gemv {settings} {N}x{K} {dt.name}")


@pytest.mark.skipif(not KERNELS, reason="the Triton kernels run under the interpreter or on a GPU")
@pytest.mark.parametrize("settings", [dict(PERSIST=1, BLOCK_N=2, UNROLL=2), dict(PERSIST=2, BLOCK_N=4, UNROLL=1)],
                         ids=["p1-n2-u2", "p2-n4-u1"])
def test_gemv_persistent(monkeypatch, settings, device):
    """PERSIST: fewer programs than row tiles (at most PERSIST per SM; the interpreter tier counts 4 SMs, a GPU its
    own), each looping over tiles with the next chunk loaded across tile ends; programs with one tile more than
    others, the last tile partly past N; bias, activation and a residual in each tile's epilogue. K that is not
    whole chunks, or split-K, runs the usual grid."""
    from nbxtensor.runtime.configs import override
    got = []
    real = MM.launch
    monkeypatch.setattr(MM, "launch", lambda k, g, *a, **m: (got.append((tuple(g), m)), real(k, g, *a, **m))[1])
    sms = MM._sm_count(-1 if nbx.device(device).type == "cpu" else nbx.device(device).index or 0)
    bn, ch = settings["BLOCK_N"], settings.get("UNROLL", 1) * 16
    for dt in (T.float32, T.bfloat16):
        with override("gemv", **settings, BLOCK_K=16, target_programs=1):
            for N, K, persists in [(bn * (sms * settings["PERSIST"] + 3) - 1, 2 * ch, True), (37, 2 * ch + 5, False)]:
                x, w, b, r = vals((1, K), dt), vals((N, K), dt), vals((N,), dt), vals((1, N), dt)
                got.clear()
                MM.clear_plans()
                y = MM.linear(make(x, dt, device), make(w, dt, device), make(b, dt, device), activation="silu",
                              residual=make(r, dt, device))
                assert got[-1][1]["PERSIST"] is persists and (got[-1][0][0] < -(-N // bn)) is persists, got[-1]
                z = x.astype(np.float64) @ w.T.astype(np.float64) + b
                assert_close(y, z / (1 + np.exp(-z)) + r, dt, K + 2, f"persist {settings} {N}x{K} {dt.name}")
    MM.clear_plans()


@pytest.mark.skipif(not KERNELS, reason="the Triton kernels run under the interpreter or on a GPU")
@pytest.mark.parametrize("settings", [dict(), dict(DOT_T=True), dict(DOT_T=True, BLOCK_N=16, BLOCK_K=32)],
                         ids=["table", "dot_t", "dot_t-n16"])
def test_gemv_rows_dot_t(settings, device):
    """2 <= M <= MAX_M: tl.dot with M padded, x @ w^T or (DOT_T) w @ x^T, split-K and K tails; a transposed
    weight read in place."""
    from nbxtensor.runtime.configs import override
    for M, N, K in [(2, 40, 33), (5, 17, 300), (8, 24, 100)]:
        dt = T.float32
        x, w = vals((M, K), dt), vals((N, K), dt)
        with override("gemv", **settings) if settings else _nullcontext():
            r = MM.linear(make(x, dt, device), make(w, dt, device, "transposed"))
        assert_close(r, x @ w.T, dt, K, f"rows {settings} {M}x{N}x{K}")


def _nullcontext():
    import contextlib
    return contextlib.nullcontext()


def test_split_k_rule():
    """split_k: no split when the row tiles reach the target; else ceil(target / tiles) programs per tile, at
    most K // MIN_K_SPLIT, ranges in whole chunks when they hold one, else in whole tiles."""
    dev = nbx.device("cpu")
    cfg = {"target_programs": 8, "MIN_K_SPLIT": 32}
    assert MM.split_k(1000, 8, cfg, dev, step=64, grain=16) == (1, 1000)
    assert MM.split_k(0, 1, cfg, dev, step=64, grain=16) == (1, 0)
    assert MM.split_k(1000, 2, cfg, dev, step=64, grain=16) == (4, 256)   # 4 x 256 covers 1000
    assert MM.split_k(100, 1, cfg, dev, step=64, grain=16) == (3, 48)     # at most 100 // 32 = 3; 34 -> 48
    assert MM.split_k(4096, 64, {"programs_per_sm": 4, "MIN_K_SPLIT": 512}, dev, step=1024, grain=256) == (1, 4096)
    assert MM.split_k(4096, 4, {"programs_per_sm": 4, "MIN_K_SPLIT": 512}, dev, step=1024, grain=256) == (4, 1024)
    assert MM.split_k(64, 1, {"BLOCK_N": 4}, dev, step=16, grain=16) == (1, 64)  # no target in the table


@pytest.mark.skipif(not KERNELS, reason="launch plans exist for the Triton implementation (GPU or interpreter)")
def test_linear_plans(monkeypatch, device):
    """A repeated linear (same shapes, strides, dtypes, devices, options) runs its recorded plan: no general path,
    the current data of the current tensors (new values, views at other offsets), bias, activation, residual,
    split-K; out= has plans of its own; a config override gets a plan of its own settings (and the table's plan
    serves again after it); two operands at one address make no plan."""
    from nbxtensor.runtime.configs import override
    MM.clear_plans()
    K, N = 300, 5   # few row tiles: split-K under the interpreter's table
    dt = T.float32
    x, w, b, res = vals((1, K), dt), vals((N, K), dt), vals((N,), dt), vals((1, N), dt)
    X, Wt, B, R = make(x, dt, device), make(w, dt, device), make(b, dt, device), make(res, dt, device)
    want = np.maximum(x @ w.T + b, 0) + res
    assert_close(MM.linear(X, Wt, B, activation="relu", residual=R), want, dt, K + 2, "first call")
    assert len(MM._LINEAR_PLANS) == 1 and next(iter(MM._LINEAR_PLANS.values())) is not MM._NO_PLAN

    general = MM._linear
    monkeypatch.setattr(MM, "_linear", lambda *a, **k: pytest.fail("the general path ran for a planned call"))
    assert_close(MM.linear(X, Wt, B, activation="relu", residual=R), want, dt, K + 2, "planned call")
    x2 = vals((1, K), dt)
    big = make(np.concatenate([vals((3, K), dt), x2]), dt, device)   # the same signature at another offset
    X2 = big[3:4]
    assert X2.storage_offset() == 3 * K and X2.stride() == X.stride()
    assert_close(MM.linear(X2, Wt, B, activation="relu", residual=R), np.maximum(x2 @ w.T + b, 0) + res, dt, K + 2,
                 "planned call, view at an offset")
    monkeypatch.setattr(MM, "_linear", general)

    calls = []
    real = MM.launch
    monkeypatch.setattr(MM, "launch", lambda k, g, *a, **m: (calls.append(m), real(k, g, *a, **m)))
    with override("gemv", BLOCK_N=2, num_warps=2):
        assert_close(MM.linear(X, Wt, B, activation="relu", residual=R), want, dt, K + 2, "override")
        assert calls[-1]["BLOCK_N"] == 2    # the override's setting, not the table's plan
        assert len(MM._LINEAR_PLANS) == 2   # recorded under the override's config state
        monkeypatch.setattr(MM, "_linear", lambda *a, **k: pytest.fail("the general path ran under the override"))
        assert_close(MM.linear(X, Wt, B, activation="relu", residual=R), want, dt, K + 2, "override, planned")
        monkeypatch.setattr(MM, "_linear", general)
    plans = len(MM._LINEAR_PLANS)
    calls.clear()
    assert_close(MM.linear(X, Wt, B, activation="relu", residual=R), want, dt, K + 2, "after the override")
    assert len(MM._LINEAR_PLANS) == plans + 1   # the table's setting planned anew: the state token moved on
    assert calls and calls[-1]["BLOCK_N"] != 2
    out = nbx.empty(1, N, device=device)
    assert MM.linear(X, Wt, B, activation="relu", residual=R, out=out) is out
    assert_close(out, want, dt, K + 2, "out=")
    assert len(MM._LINEAR_PLANS) == plans + 2    # out= has plans of its own (its signature in the key)
    out2 = nbx.empty(1, N, device=device)
    monkeypatch.setattr(MM, "_linear", lambda *a, **k: pytest.fail("the general path ran for a planned out= call"))
    assert MM.linear(X, Wt, B, activation="relu", residual=R, out=out2) is out2
    assert_close(out2, want, dt, K + 2, "planned out=")
    monkeypatch.setattr(MM, "_linear", general)
    both = make(np.concatenate([x.ravel(), np.zeros(N)]), dt, device)  # out= sharing memory with the input
    xo, oo = both[:K].view(1, K), both[K:].view(1, N)
    assert oo.stride() == out.stride() and xo.stride() == X.stride()
    assert MM.linear(xo, Wt, B, activation="relu", residual=R, out=oo) is oo   # the general path: a temporary
    assert_close(oo, want, dt, K + 2, "out= overlapping the input's storage")
    assert_close(xo, x, dt, 1, "input unchanged")

    sq = make(vals((K, K), dt), dt, device)     # input and weight at one address: no plan, a correct result
    r1 = MM.linear(sq[:1], sq)
    assert_close(r1, f64(sq[:1]) @ f64(sq).T, dt, K, "aliased operands")
    assert MM._LINEAR_PLANS[next(k for k in MM._LINEAR_PLANS if k[0] == (1, K) and k[5] == (K, K))] is MM._NO_PLAN
    MM.clear_plans()
    assert not MM._LINEAR_PLANS


@pytest.mark.skipif(not KERNELS, reason="launch plans exist for the Triton implementation (GPU or interpreter)")
def test_split_k_plan_takes_counters_per_call(monkeypatch, device):
    """A planned split-K linear (a launcher LaunchPlan) allocates its workspace anew and looks its arrival counters
    up through ``_locks`` on every call (one buffer per stream), with the caller's out= in its slot."""
    MM.clear_plans()
    K, N = 300, 5
    dt = T.float32
    x, w = vals((1, K), dt), vals((N, K), dt)
    X, Wt = make(x, dt, device), make(w, dt, device)
    out = nbx.empty(1, N, device=device)
    for o in (None, out):
        MM.linear(X, Wt, out=o)
    plans = [p for p in MM._LINEAR_PLANS.values() if p is not MM._NO_PLAN]
    assert len(plans) == 2 and all(isinstance(p, MM.Plan) and len(p.steps) == 1 for p in plans)
    if not plans[0].steps[0][4]["SPLIT"]:
        pytest.skip("this device's table does not split K for 1x300 -> 5")
    assert all(len(p.fetch) == 1 for p in plans) and [len(p.fresh) for p in plans] == [2, 1]  # (out,) ws; counters
    seen, real = [], MM._locks
    monkeypatch.setattr(MM, "_locks", lambda dev, n: (seen.append(n), real(dev, n))[1])
    monkeypatch.setattr(MM, "_linear", lambda *a, **k: pytest.fail("the general path ran for a planned call"))
    for _ in range(2):
        assert_close(MM.linear(X, Wt), x @ w.T, dt, K, "planned split-K")
        out2 = nbx.empty(1, N, device=device)
        assert MM.linear(X, Wt, out=out2) is out2
        assert_close(out2, x @ w.T, dt, K, "planned split-K, out=")
    assert len(seen) == 4 and seen[0] > 0
    MM.clear_plans()


def test_nested_recording_sees_every_launch(monkeypatch):
    """A call recorded inside another call's recording: the outer record gets the inner launches too, and a plan
    run inside a recording is recorded by it, so the outer call (more than one launch) gets no plan."""
    from nbxtensor.runtime import launcher as L
    MM.clear_plans()
    t = nbx.empty(4)
    outer_key, inner_key = ("outer",), ("inner",)

    def inner():  # one recorded launch of the caller's tensor and a new output (as launch records it)
        o = nbx.empty(4)
        L._TLS.rec.append(("k1", (1,), (t, o), {}))
        return o

    def outer():
        MM.record_plan(MM._PRODUCT_PLANS, inner_key, inner, (t,))
        L._TLS.rec.append(("k2", (1,), (t,), {}))
        return t

    MM.record_plan(MM._PRODUCT_PLANS, outer_key, outer, (t,))
    assert MM._PRODUCT_PLANS[outer_key] is MM._NO_PLAN          # two launches
    assert isinstance(MM._PRODUCT_PLANS[inner_key], MM.Plan)    # one launch of the caller's tensor
    monkeypatch.setattr(L, "launch", lambda k, g, *a, **m: L._TLS.rec.append((k, g, a, m)))  # records, runs nothing
    monkeypatch.setattr(MM, "launch", L.launch)
    with L.Recording() as r:
        got = MM._PRODUCT_PLANS[inner_key](t)
    assert [(k, a) for k, _, a, _ in r.launches] == [("k1", (t, got))]   # the plan's launch, on this call's output
    assert L.make_launch_plan(L.Recording(), (t,), t, make_tensor) is None   # nothing launched: no plan
    MM.clear_plans()


@pytest.mark.skipif(not KERNELS, reason="launch plans exist for the Triton implementation (GPU or interpreter)")
def test_product_plans(device):
    """mm and matmul (and the @ operator) plan their launches too; results stay right for new data."""
    MM.clear_plans()
    dt = T.bfloat16
    for _ in range(2):
        a, b = vals((3, 40), dt), vals((40, 7), dt)
        A, Bt = make(a, dt, device), make(b, dt, device, "transposed")
        assert_close(nbx.mm(A, Bt), a @ b, dt, 40, "mm")
        assert_close(A @ Bt, a @ b, dt, 40, "@")
        x3 = vals((2, 1, 40), dt)
        assert_close(nbx.matmul(make(x3, dt, device), Bt), x3 @ b, dt, 40, "matmul 3-D @ 2-D")
    assert sum(p is not MM._NO_PLAN for p in MM._PRODUCT_PLANS.values()) >= 2


@pytest.mark.skipif(not INTERPRET, reason="counts host work under the interpreter tier (CPU tensors)")
def test_planned_linear_host_path_is_short(monkeypatch):
    """The host path of a planned F.linear: no general-path function of this module runs (cProfile), only the
    plan lookup, one allocation and one launch (the launch itself stubbed out here)."""
    import cProfile
    import pstats
    MM.clear_plans()
    x, w = nbx.empty(1, 256, dtype=nbx.bfloat16), nbx.empty(64, 256, dtype=nbx.bfloat16)
    from nbxtensor.runtime import launcher as L

    def stub(kernel, grid, *args, **meta):  # runs nothing; records as the launcher does (the plan is made of it)
        rec = L._TLS.__dict__.get("rec")
        if rec is not None:
            rec.append((kernel, grid, args, meta))
    monkeypatch.setattr(MM, "launch", stub)
    F = nbx.nn.functional
    F.linear(x, w)
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(10):
        F.linear(x, w)
    pr.disable()
    st = pstats.Stats(pr)
    ours = {fn[2]: v[1] for fn, v in st.stats.items() if fn[0].endswith(os.path.join("ops", "matmul.py"))}
    assert set(ours) <= {"linear", "__call__", "_linear_driver", "<lambda>"}, ours
    assert st.total_calls / 10 < 80, st.total_calls / 10


# ---------------------------------------------------------------------------------------------------------
# einsum
# ---------------------------------------------------------------------------------------------------------
EINSUM = [("ij,jk->ik", [(4, 5), (5, 3)]), ("bij,bjk->bik", [(2, 4, 5), (2, 5, 3)]),
          ("bhqd,bhkd->bhqk", [(2, 3, 5, 8), (2, 3, 7, 8)]), ("bhqk,bhkd->bhqd", [(2, 3, 5, 7), (2, 3, 7, 8)]),
          ("i,i->", [(9,), (9,)]), ("i,j->ij", [(4,), (6,)]), ("...ij,...jk->...ik", [(2, 3, 4, 5), (3, 5, 6)]),
          ("ij,jk", [(4, 5), (5, 3)]), ("ij,kj->ki", [(4, 5), (3, 5)]), ("ij,jk->ik", [(3, 1), (3, 2)]),
          ("b i j , b j k -> b k i", [(2, 4, 5), (2, 5, 3)]), ("bij,bjk->bik", [(1, 4, 5), (3, 5, 2)]),
          ("ij,jk->ki", [(0, 5), (5, 3)])]


@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum(eq, shapes, device):
    dt = T.float32
    ops = [vals(s, dt) for s in shapes]
    r = nbx.einsum(eq, *[make(o, dt, device) for o in ops])
    ref = oracle("einsum")(eq, *ops)
    K = max(1, math.prod(shapes[0]) // max(1, math.prod(r.shape)))
    assert_close(r, ref, dt, K, eq)
    r2 = nbx.einsum(eq, [make(o, dt, device) for o in ops])  # operands as one list
    assert_close(r2, ref, dt, K, eq)


# ---------------------------------------------------------------------------------------------------------
# _int_mm
# ---------------------------------------------------------------------------------------------------------
def test_int_mm(device):
    for M, N, K in [(17, 8, 32), (17, 9, 31), (1, 5, 65), (40, 33, 70), (3, 4, 0)]:
        a = RNG.integers(-128, 128, size=(M, K)).astype(np.int8)
        b = RNG.integers(-128, 128, size=(K, N)).astype(np.int8)
        r = nbx._int_mm(nbx.tensor(a, device=device), nbx.tensor(b, device=device).t().contiguous().t())
        assert r.dtype is T.int32
        np.testing.assert_array_equal(r.cpu().numpy(), oracle("_int_mm")(a, b))


# ---------------------------------------------------------------------------------------------------------
# Operators, flags, errors, costs, kernel paths
# ---------------------------------------------------------------------------------------------------------
def test_operators(device):
    a, b = vals((3, 4), T.float32), vals((4, 2), T.float32)
    A, B = make(a, T.float32, device), make(b, T.float32, device)
    assert_close(A @ B, a @ b, T.float32, 4)
    assert_close(B.__rmatmul__(A), a @ b, T.float32, 4)
    assert_close(A.matmul(B), a @ b, T.float32, 4)
    with pytest.raises(TypeError, match="unsupported operand"):
        A @ 2
    with pytest.raises(TypeError, match="unsupported operand"):
        2 @ A
    assert not hasattr(nbx.Tensor, "__imatmul__")  # as PyTorch: x @= y rebinds x to a new tensor
    S = make(vals((4, 4), T.float32), T.float32, device)
    S0 = S
    S @= make(vals((4, 4), T.float32), T.float32, device)
    assert S is not S0
    for name in ("mm", "bmm", "matmul", "addmm", "addmm_", "baddbmm", "baddbmm_", "addmv", "addmv_", "mv", "dot",
                 "outer", "addr", "addr_"):
        assert hasattr(nbx.Tensor, name), name
    assert nbx.nn.functional.linear is registry.get("linear").extra["function"]


def test_tf32_flags(monkeypatch):
    from nbxtensor.ops import matmul_flags as F
    m = nbx.backends.cuda.matmul
    assert m.allow_tf32 is False and nbx.get_float32_matmul_precision() == "highest"
    assert MM._precision(T.float32) == "ieee"
    try:
        m.allow_tf32 = True
        assert nbx.get_float32_matmul_precision() == "high" and m.fp32_precision == "tf32"
        assert MM._precision(T.float32) == "tf32"
        nbx.set_float32_matmul_precision("highest")
        assert m.allow_tf32 is False and MM._precision(T.float32) == "ieee"
        nbx.set_float32_matmul_precision("medium")
        assert m.allow_tf32 is True
        m.fp32_precision = "ieee"
        assert nbx.get_float32_matmul_precision() == "highest"
        with pytest.warns(UserWarning, match="no effect"):
            nbx.set_float32_matmul_precision("foo")
        assert nbx.get_float32_matmul_precision() == "highest"
        with pytest.raises(RuntimeError, match="expects a bool"):
            m.allow_tf32 = 1
        with pytest.raises(AttributeError, match="Unknown attribute foo"):
            m.foo = 1
        assert MM._precision(T.bfloat16) == MM._precision(T.float16) == "tf32"  # no effect on 16-bit inputs
        assert MM._precision(T.float64) == "ieee"
    finally:
        F.set_float32_matmul_precision("highest")


@pytest.mark.skipif(not (INTERPRET or GPU), reason="the Triton kernels run under the interpreter or on a GPU")
def test_kernel_paths_and_precision(monkeypatch, device):
    """Which kernel runs (GEMV for small M or N, split-K when N tiles are few, tiled otherwise), and that the
    float32 precision flag reaches the kernel (TF32 only after opting in)."""
    calls = []
    real = MM.launch

    def spy(kernel, grid, *args, **meta):
        calls.append((kernel.__name__ if hasattr(kernel, "__name__") else str(kernel), grid, meta))
        return real(kernel, grid, *args, **meta)

    monkeypatch.setattr(MM, "launch", spy)

    def run(M, N, K, dt=T.float32):
        calls.clear()
        nbx.mm(make(vals((M, K), dt), dt, device), make(vals((K, N), dt), dt, device))
        return calls[-1]

    bm, bn, bk = mm_blocks(device)
    name, grid, meta = run(1, 5, 4000)
    assert "gemv" in name and meta["BLOCK_M"] == 1 and meta["SPLIT"] and grid[1] > 1
    name, grid, meta = run(5, 3 * bn, 64)
    assert "gemv" in name and meta["BLOCK_M"] >= 16
    name, grid, meta = run(bm + 1, 3, 64)  # mv-like: the transposed GEMV
    assert "gemv" in name
    name, grid, meta = run(bm + 1, bn + 1, 64)
    assert "mm_kernel" in name and meta["PRECISION"] == "ieee"
    nbx.backends.cuda.matmul.allow_tf32 = True
    try:
        name, grid, meta = run(bm + 1, bn + 1, 64)
        assert meta["PRECISION"] == "tf32"
        name, grid, meta = run(bm + 1, bn + 1, 64, T.bfloat16)
        assert meta["ACC"] is MM.tl.float32
    finally:
        nbx.set_float32_matmul_precision("highest")
    calls.clear()
    nbx.bmm(make(vals((3, 1, 8), T.float32), T.float32, device), make(vals((3, 8, 4), T.float32), T.float32, device))
    assert "mm_kernel" in calls[-1][0] and calls[-1][1][1] == 3


@pytest.mark.skipif(not GPU, reason="TensorFloat-32 exists on the GPU only (the cpu device and the interpreter "
                    "compute float32 in IEEE arithmetic)")
def test_tf32_numerics_on_gpu(device):
    """IEEE float32 by default; after opting in, TF32 (inputs rounded to 10 mantissa bits) is measurably less
    precise but within its own error bound."""
    K = 1024
    a, b = vals((256, K), T.float32), vals((K, 256), T.float32)
    A, B = make(a, T.float32, device), make(b, T.float32, device)
    ref = a @ b
    err_ieee = np.abs(f64(nbx.mm(A, B)) - ref).max()
    nbx.backends.cuda.matmul.allow_tf32 = True
    try:
        err_tf32 = np.abs(f64(nbx.mm(A, B)) - ref).max()
    finally:
        nbx.set_float32_matmul_precision("highest")
    assert err_ieee < 1e-3 and err_tf32 > 10 * err_ieee and err_tf32 < 2.0 ** -10 * math.sqrt(K) * 4


ERROR_CASES = [(r, i, e) for r in registry.all_ops() if r.family == "matmul"
               for i, e in enumerate(r.extra.get("errors", []))]


@pytest.mark.parametrize("case", ERROR_CASES, ids=[f"{r.name}-{i}" for r, i, _ in ERROR_CASES])
def test_errors_as_data(case):
    rec, _, (make_args, kwargs, exc, text) = case
    fn = rec.extra["function"]
    kw = kwargs(nbx) if callable(kwargs) else kwargs
    with pytest.raises(exc) as info:
        fn(*make_args(nbx), **kw)
    assert text in str(info.value), (rec.name, str(info.value))


def test_records_are_complete():
    names = {r.name for r in registry.all_ops() if r.family == "matmul"}
    assert names >= {"mm", "bmm", "matmul", "addmm", "baddbmm", "addmv", "mv", "dot", "outer", "addr", "linear",
                     "einsum", "_int_mm"}
    for r in registry.all_ops():
        if r.family == "matmul":
            assert r.cpu and r.triton and r.oracle and r.cost and r.extra["errors"], r.name
            assert r.extra["function"].__doc__, r.name
    assert nbx.einsum is MM.einsum and nbx.mm is registry.get("mm").extra["function"]


def test_cost_declarations():
    z = nbx.empty  # costs read shapes and dtypes only
    c = registry.get("mm").cost(input=z(8, 16, dtype=nbx.bfloat16), mat2=z(16, 32, dtype=nbx.bfloat16))
    assert (c.flops, c.bytes_read, c.bytes_written) == (2 * 8 * 32 * 16, 2 * (8 * 16 + 16 * 32), 2 * 8 * 32)
    c = registry.get("linear").cost(input=z(1, 4096, dtype=nbx.bfloat16), weight=z(1024, 4096, dtype=nbx.bfloat16),
                                    bias=z(1024, dtype=nbx.bfloat16))
    assert (c.flops, c.bytes_read, c.bytes_written) == (2 * 4096 * 1024, 2 * (4096 + 1024 * 4096 + 1024), 2 * 1024)
    c = registry.get("addmm").cost(input=z(32), mat1=z(8, 16), mat2=z(16, 32), beta=0)
    assert c.bytes_read == 4 * (8 * 16 + 16 * 32)  # beta == 0: the input is not read
    c = registry.get("matmul").cost(input=z(5, 2, 3), other=z(3,))
    assert (c.flops, c.bytes_written) == (2 * 10 * 3, 4 * 10)
    c = registry.get("_int_mm").cost(input=z(32, 64, dtype=nbx.int8), mat2=z(64, 16, dtype=nbx.int8))
    assert (c.flops, c.bytes_read, c.bytes_written) == (2 * 32 * 16 * 64, 32 * 64 + 64 * 16, 4 * 32 * 16)
    c = registry.get("einsum").cost("bhqd,bhkd->bhqk", z(2, 3, 5, 8), z(2, 3, 7, 8))
    assert (c.flops, c.bytes_written) == (2 * 2 * 3 * 5 * 7 * 8, 4 * 2 * 3 * 5 * 7)


def test_zero_size_outputs_launch_nothing(monkeypatch, device):
    calls = []
    monkeypatch.setattr(registry, "impl", lambda name, dev: (lambda *a, **k: calls.append(name)))
    assert tuple(nbx.mm(nbx.empty(0, 3, device=device), nbx.empty(3, 4, device=device)).shape) == (0, 4)
    assert tuple(nbx.bmm(nbx.empty(0, 2, 3, device=device), nbx.empty(0, 3, 4, device=device)).shape) == (0, 2, 4)
    assert tuple(nbx.matmul(nbx.empty(2, 0, device=device), nbx.empty(0, device=device)).shape) == (2,)
    assert calls == ["matmul"]  # K = 0 with a non-empty output still runs (it writes zeros)
