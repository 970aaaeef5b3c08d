"""The tensor-core int4 GEMV (``int4_gemv`` config key ``TC``, src/nbxtensor/quant/int4_tc.py) against the float64
oracle: group sizes, symmetric and asymmetric, float16 and bfloat16 activations, 1-4 rows of x, split-K, K ranges
that end in a partial chunk, bias / activation / residual epilogues, and the shapes it leaves to the other
kernels. Runs where the Triton kernels run (the interpreter tier on the cpu device, the GPU tier on CUDA)."""

from __future__ import annotations

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.quant import QuantLinear, dequantize_oracle, int4_linear_oracle, pack_int4

from test_int4 import KERNELS, QUICK, _check_linear, _f64_of

pytestmark = pytest.mark.skipif(not KERNELS, reason="the Triton kernels run under the interpreter or on a GPU")
rng = np.random.default_rng(4321)


def _spy(monkeypatch):
    from nbxtensor.ops import matmul as MM
    names = []
    real = MM.launch
    monkeypatch.setattr(MM, "launch", lambda k, g, *a, **m: (names.append((k, tuple(g), m)), real(k, g, *a, **m))[1])
    return names


def _lin(q, G, symmetric, device, sd=T.float16, bias=None):
    N, K = q.shape
    s = (rng.random((N, K // G)) * 0.02 + 0.001).astype(np.float16)
    m = None if symmetric else (-rng.random((N, K // G)) * 0.1).astype(np.float16)
    return QuantLinear.from_packed(pack_int4(q, G), nbx.tensor(s).to(sd).cpu().numpy() if sd is not T.float16 else s,
                                   m, bias=bias, group_size=G, device=device, cache=False)


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("G", [32, 64, 128])
def test_tc_kernel_matches_oracle(monkeypatch, device, symmetric, G):
    """Codes decoded as OFF + q (bfloat16 128 + q, float16 1024 + q) into the matrix unit against a block-diagonal
    x; worst cases for the offset's cancellation (x of one sign, codes all 0 or all 15) and random codes."""
    from nbxtensor.ops import matmul as MM
    from nbxtensor.quant import int4_tc
    from nbxtensor.runtime.configs import override
    names = _spy(monkeypatch)
    N, K = 24, 16 * G
    fills = (0, None) if QUICK else (0, 15, None)
    for fill in fills:
        q = rng.integers(0, 16, (N, K), dtype=np.uint8) if fill is None else np.full((N, K), fill, np.uint8)
        lin = _lin(q, G, symmetric, device)
        W = dequantize_oracle(lin.qweight, lin.scales, lin.mins, G)
        for dt, xv in ((T.bfloat16, np.abs(rng.standard_normal((1, K))) + 4.0),
                       (T.float16, rng.standard_normal((3, K)) * 3.0)):
            x = nbx.tensor(xv, dtype=dt, device=device)
            xs = _f64_of(x)
            ref = int4_linear_oracle(xs, lin.qweight, lin.scales, lin.mins, None, G)
            for settings in (dict(BLOCK_N=16, TC_COLS=16),
                             dict(BLOCK_N=16, TC_COLS=8, target_programs=64, MIN_K_SPLIT=G)):
                names.clear()
                MM.clear_plans()
                with override("int4_gemv", TC=True, num_warps=4, **settings):
                    y = lin(x)
                assert [k for k, _, _ in names] == [int4_tc._int4_gemv_tc_kernel], names
                if "target_programs" in settings:
                    assert names[0][2]["SPLIT"] and names[0][1][1] > 1
                _check_linear(_f64_of(y), ref, xs, W, dt, K)


def test_tc_partial_chunks_and_epilogue(monkeypatch, device):
    """K ranges that are not whole chunks (the last chunk masked, with and without split-K), bias + silu + residual
    written in place (``out=`` the residual), and a row count that is not a multiple of BLOCK_N."""
    from nbxtensor.quant import int4_linear, int4_tc
    from nbxtensor.runtime.configs import override
    names = _spy(monkeypatch)
    G = 32
    for N, K, settings in ((19, 5 * G, dict()), (33, 11 * G, dict(target_programs=64, MIN_K_SPLIT=2 * G))):
        q = rng.integers(0, 16, (N, K), dtype=np.uint8)
        b = nbx.tensor(rng.standard_normal(N), dtype=T.bfloat16, device=device)
        lin = _lin(q, G, False, device, bias=b)
        W = dequantize_oracle(lin.qweight, lin.scales, lin.mins, G)
        x = nbx.tensor(rng.standard_normal((2, K)), dtype=T.bfloat16, device=device)
        h0 = rng.standard_normal((2, N))
        h = nbx.tensor(h0, dtype=T.bfloat16, device=device)
        xs = _f64_of(x)
        pre = int4_linear_oracle(xs, lin.qweight, lin.scales, lin.mins, None, G) + _f64_of(b)
        ref = pre / (1.0 + np.exp(-pre)) + _f64_of(h)
        names.clear()
        with override("int4_gemv", TC=True, BLOCK_N=16, TC_COLS=16, num_warps=4, **settings):
            y = int4_linear(x, lin.qweight, lin.scales, lin.mins, b, group_size=G, activation="silu", residual=h,
                            out=h)
        assert y is h
        assert [k for k, _, _ in names] == [int4_tc._int4_gemv_tc_kernel]
        assert not names[0][2]["EVEN"]
        _check_linear(_f64_of(y), ref, xs, W, T.bfloat16, K)


def test_tc_leaves_other_shapes(monkeypatch, device):
    """float32 x (no 16-bit operand) and x with a non-unit stride along K take the CUDA-core kernel."""
    from nbxtensor.quant import int4 as Q
    from nbxtensor.runtime.configs import override
    names = _spy(monkeypatch)
    q = rng.integers(0, 16, (8, 64), dtype=np.uint8)
    lin = _lin(q, 32, False, device)
    for x in (nbx.tensor(rng.standard_normal((1, 64)), dtype=T.float32, device=device),
              nbx.tensor(rng.standard_normal((64, 2)), dtype=T.bfloat16, device=device).t()[:1]):
        names.clear()
        with override("int4_gemv", TC=True, BLOCK_N=16):
            lin(x)
        assert [k for k, _, _ in names] == [Q._int4_gemv_kernel], names
