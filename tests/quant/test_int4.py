"""Grouped int4 weights: pack/unpack exact, quantization error bounds, dequantization exact against the float64
unpack of the packed bytes, and ``int4_linear`` (GEMV for few rows, dequantize-then-GEMM for more) against the
float64 oracle.

Runs on the ``device`` fixture; ``NBX_TRITON_INTERPRET=1`` runs the Triton kernels on the cpu device (keep
``NBX_TEST_QUICK=1`` there: small shapes).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.dtypes.casting import cast_array
from nbxtensor.dtypes.tolerance import tolerance
from nbxtensor.ops import registry
from nbxtensor.quant import (GROUP_SIZES, QuantLinear, dequantize_oracle, int4_dequantize, int4_linear,
                             int4_linear_oracle, pack_int4, quantize_int4, unpack_int4)
from nbxtensor.runtime.configs import launch_config

QUICK = os.environ.get("NBX_TEST_QUICK") == "1"
rng = np.random.default_rng(1234)


def test_pack_unpack_round_trip_exact():
    for G in GROUP_SIZES:
        q = rng.integers(0, 16, size=(5, 3 * G), dtype=np.uint8)
        p = pack_int4(q, G)
        assert p.shape == (5, 3 * G // 2) and p.dtype == np.uint8
        assert np.array_equal(unpack_int4(p, G), q)
    # every byte value unpacks and packs back
    b = np.arange(256, dtype=np.uint8).reshape(16, 16)
    assert np.array_equal(pack_int4(unpack_int4(b, 32), 32), b)


def test_nibble_order_is_ggml_blocks():
    # byte j of a group: value j in the low nibble, value j + G/2 in the high nibble (ggml's Q4_0/Q4_1 order)
    q = np.zeros((1, 32), np.uint8)
    q[0, 3], q[0, 3 + 16] = 5, 9
    p = pack_int4(q, 32)
    assert p[0, 3] == 5 | (9 << 4) and np.count_nonzero(p) == 1


def test_pack_refuses_bad_input():
    with pytest.raises(ValueError, match="group_size"):
        pack_int4(np.zeros((2, 48), np.uint8), 48)
    with pytest.raises(ValueError, match="multiple"):
        pack_int4(np.zeros((2, 48), np.uint8), 32)
    with pytest.raises(ValueError, match="0..15"):
        pack_int4(np.full((1, 32), 16), 32)


@pytest.mark.parametrize("G", GROUP_SIZES)
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("sd", [T.float16, T.bfloat16, T.float32])
def test_quantize_error_bound(G, symmetric, sd):
    w = rng.standard_normal((7, 2 * G)) * np.linspace(0.1, 3.0, 7)[:, None]
    q, s, m = quantize_int4(w, G, symmetric=symmetric, scale_dtype=sd)
    assert q.dtype == np.uint8 and s.dtype == sd.numpy and s.shape == (7, 2)
    assert (m is None) == symmetric
    deq = dequantize_oracle(q, s, m, G)
    s64 = cast_array(s, sd, T.float64)[..., None]
    err = np.abs(deq - w).reshape(7, 2, G)
    if symmetric:
        # the value of largest magnitude is code 0 (exact up to the scale's rounding); codes are rounded to
        # nearest except where the far end of the range (7/8 of the extreme) clips
        gw = w.reshape(7, 2, G)
        big = np.abs(gw) > 7.5 * np.abs(s64)
        assert np.all(err[~big] <= 0.5 * np.abs(s64).repeat(G, -1)[~big] * (1 + 1e-6))
    else:
        m64 = cast_array(m, sd, T.float64)
        lo = w.reshape(7, 2, G).min(-1)
        bound = 0.5 * s64[..., 0] + np.abs(m64 - lo) + 1e-12
        assert np.all(err.max(-1) <= bound + 16 * np.abs(s64[..., 0] - (w.reshape(7, 2, G).max(-1) - lo) / 15))


def test_quantize_constant_and_zero_groups():
    w = np.zeros((2, 32))
    w[1] = 0.75
    q, s, m = quantize_int4(w, 32)
    assert np.array_equal(dequantize_oracle(q, s, m, 32), w)
    q, s, m = quantize_int4(np.zeros((1, 64)), 32, symmetric=True)
    assert np.array_equal(dequantize_oracle(q, s, m, 32), np.zeros((1, 64)))


def test_quantize_refuses():
    with pytest.raises(ValueError, match="2-D"):
        quantize_int4(np.zeros(32))
    with pytest.raises(ValueError, match="NaN"):
        quantize_int4(np.full((1, 32), np.nan))
    with pytest.raises(ValueError, match="scale_dtype"):
        quantize_int4(np.zeros((1, 32)), scale_dtype=nbx.int8)


def _lin(N, K, G, symmetric, sd, device, bias=False, dtype=T.float32):
    w = rng.standard_normal((N, K))
    b = rng.standard_normal(N) if bias else None
    lin = QuantLinear.quantize(w, G, symmetric=symmetric, scale_dtype=sd, device=device, cache=False,
                               bias=None if b is None else nbx.tensor(b, dtype=dtype))
    return lin


@pytest.mark.parametrize("G", GROUP_SIZES)
@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("out_dt", [T.float32, T.bfloat16, T.float16])
def test_dequantize_exact(device, G, symmetric, out_dt):
    sd = T.bfloat16 if G == 64 else T.float16
    N = 5 if QUICK else 67
    lin = _lin(N, 2 * G, G, symmetric, sd, device)
    got = int4_dequantize(lin.qweight, lin.scales, lin.mins, group_size=G, dtype=out_dt).cpu().numpy()
    ref = dequantize_oracle(lin.qweight, lin.scales, lin.mins, G)
    # s * q is exact in float32 for 16-bit scales: one rounding of the exact value, bit for bit
    assert np.array_equal(got.view(np.uint8), cast_array(ref, T.float64, out_dt).view(np.uint8))


def _check_linear(y: np.ndarray, ref: np.ndarray, x: np.ndarray, W: np.ndarray, dtype, K: int) -> None:
    tol = tolerance(dtype, reduced=K)
    # errors scale with sum |x| |w| (cancellation in the sum), not with |y|
    mag = np.abs(x.astype(np.float64)) @ np.abs(W).T
    err = np.abs(y.astype(np.float64) - ref)
    bound = tol.atol + tol.rtol * (np.abs(ref) + mag / np.sqrt(K))
    assert np.all(err <= bound), (err.max(), (err - bound).max())


@pytest.mark.parametrize("G", GROUP_SIZES)
@pytest.mark.parametrize("symmetric", [False, True])
def test_int4_linear_gemv_and_prefill(device, G, symmetric):
    dev = nbx.device(device)
    max_m = launch_config("int4_gemv", dev, dtypes=(T.float32,), rows=64)["MAX_M"] if dev.type == "cuda" or \
        os.environ.get("NBX_TRITON_INTERPRET") == "1" else 4
    N, K = (9, 2 * G) if QUICK else (300, 8 * G)
    lin = _lin(N, K, G, symmetric, T.float16, device, bias=True)
    W = dequantize_oracle(lin.qweight, lin.scales, lin.mins, G)
    for M in (1, 3, max_m + 2):  # GEMV rows, and the dequantize-then-GEMM path past MAX_M
        x = rng.standard_normal((M, K)).astype(np.float32)
        y = lin(nbx.tensor(x, device=device)).cpu().numpy()
        ref = int4_linear_oracle(x, lin.qweight, lin.scales, lin.mins, lin.bias, G)
        _check_linear(y, ref, x, W, T.float32, K)


@pytest.mark.parametrize("dtype", [T.bfloat16, T.float16, T.float64])
def test_int4_linear_dtypes_and_leading_dims(device, dtype):
    G = 32
    N, K = (6, 64) if QUICK else (130, 512)
    lin = _lin(N, K, G, False, T.float16, device)
    x64 = rng.standard_normal((2, 1, K))
    x = nbx.tensor(x64, dtype=dtype, device=device)
    y = lin(x)
    assert tuple(y.shape) == (2, 1, N) and y.dtype is dtype
    xin = x.cpu().float().numpy().astype(np.float64) if dtype is not T.float64 else x64
    ref = int4_linear_oracle(xin, lin.qweight, lin.scales, lin.mins, None, G)
    W = dequantize_oracle(lin.qweight, lin.scales, lin.mins, G)
    _check_linear(y.cpu().float().numpy() if dtype is not T.float64 else y.cpu().numpy(), ref, xin, W, dtype, K)


def test_out_argument_and_zero_rows(device):
    lin = _lin(4, 64, 32, True, T.float16, device)
    out = nbx.empty(3, 4, device=device)
    x = nbx.tensor(rng.standard_normal((3, 64)), dtype=nbx.float32, device=device)
    r = int4_linear(x, lin.qweight, lin.scales, None, group_size=32, out=out)
    assert r is out
    ref = int4_linear_oracle(x.cpu().numpy(), lin.qweight, lin.scales, None, None, 32)
    assert np.allclose(out.cpu().numpy(), ref, rtol=1e-4, atol=1e-4)
    assert tuple(lin(nbx.empty(0, 64, device=device)).shape) == (0, 4)


def test_cpu_cache_matches_kernel_path():
    lin = QuantLinear.quantize(rng.standard_normal((8, 64)), 32, cache=True)
    x = nbx.tensor(rng.standard_normal((2, 64)), dtype=nbx.float32)
    a = lin(x).numpy()
    b = int4_linear(x, lin.qweight, lin.scales, lin.mins, group_size=32).numpy()
    assert np.allclose(a, b, rtol=1e-5, atol=1e-5)


def test_errors(device):
    lin = _lin(4, 64, 32, False, T.float16, device)
    x = nbx.ones(2, 64, device=device)
    with pytest.raises(RuntimeError, match="last dim must be K=64"):
        int4_linear(nbx.ones(2, 32, device=device), lin.qweight, lin.scales, lin.mins)
    with pytest.raises(RuntimeError, match="scales must have shape"):
        int4_linear(x, lin.qweight, lin.scales[:, :1], lin.mins)
    with pytest.raises(RuntimeError, match="qweight must be a 2-D uint8"):
        int4_linear(x, lin.qweight.to(nbx.int8), lin.scales, lin.mins)
    with pytest.raises(ValueError, match="group_size"):
        int4_linear(x, lin.qweight, lin.scales, lin.mins, group_size=16)
    with pytest.raises(RuntimeError, match="input must be a float16"):
        int4_linear(nbx.ones(2, 64, dtype=nbx.int32, device=device), lin.qweight, lin.scales, lin.mins)
    with pytest.raises(RuntimeError, match="mins must have the dtype"):
        int4_linear(x, lin.qweight, lin.scales, lin.mins.to(nbx.float32))


def test_handle_and_cost():
    lin = QuantLinear.quantize(rng.standard_normal((16, 128)), 64, symmetric=True)
    assert lin.shape == (16, 128) and lin.symmetric and "symmetric" in repr(lin)
    assert lin.nbytes == 16 * 64 + 16 * 2 * 2
    assert lin.to("cpu").qweight.numpy().tobytes() == lin.qweight.numpy().tobytes()
    c = registry.get("int4_linear").cost(input=nbx.empty(1, 128), qweight=lin.qweight, scales=lin.scales)
    assert (c.flops, c.bytes_read, c.bytes_written) == (2 * 16 * 128, 128 * 4 + 16 * 64 + 64, 16 * 4)
    assert registry.get("int4_linear").oracle is int4_linear_oracle


_PTR = {"bfloat16": "*bf16", "float16": "*fp16", "float32": "*fp32", "float64": "*fp64", "uint8": "*u8",
        "int32": "*i32"}


def _sm90_launches(monkeypatch, call, **override):
    """The launches ``call()`` makes on CPU tensors with the sm90 table in force (an H200's 132 SMs), recorded as
    ``(kernel, grid, args, meta)`` instead of run."""
    from nbxtensor.ops import matmul as MM
    from nbxtensor.runtime import configs
    got = []
    monkeypatch.setattr(MM, "launch", lambda kernel, grid, *args, **meta: got.append((kernel, grid, args, meta)))
    monkeypatch.setattr(configs, "arch_of", lambda device: "sm90")
    monkeypatch.setattr(registry, "interpreting", lambda: True)  # registry.impl: cpu tensors -> rec.triton
    monkeypatch.setattr(MM, "_sm_count", lambda index: 132)
    from nbxtensor.quant import int4 as Q
    for mod in (MM, Q):
        monkeypatch.setattr(mod, "_locks", lambda dev, n: nbx.empty(n, dtype=nbx.int32))
    MM.clear_plans()
    try:
        if override:
            with configs.override("int4_gemv", **override):
                call()
        else:
            call()
    finally:
        MM.clear_plans()
    return got


def _compile_sm90(kernel, args, meta):
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ops"))
    import reduce_harness as H
    types = {}
    for name, a in zip(kernel.arg_names, args):
        if isinstance(a, nbx.Tensor):
            types[name] = _PTR[a.dtype.name]
        elif isinstance(a, float):
            types[name] = "fp32"
        else:
            types[name] = "i32" if -2 ** 31 <= a < 2 ** 31 else "i64"
    consts = {k: v for k, v in meta.items() if k not in ("num_warps", "num_stages", "maxnreg")}
    return H.compile_sm90(kernel, types, consts, num_warps=meta.get("num_warps", 4))


@pytest.mark.parametrize("G", GROUP_SIZES)
@pytest.mark.parametrize("act,sc", [(T.bfloat16, T.float16), (T.float16, T.bfloat16), (T.float32, T.float32)])
@pytest.mark.parametrize("has_min", [True, False])
def test_kernels_compile_for_sm90(monkeypatch, G, act, sc, has_min):
    """The int4 kernels the host wrappers launch on an H200 (sm90 table: GEMV with and without split-K, the
    dequantize kernel) compile for sm_90 here, without a GPU; the inline-PTX nibble decode too."""
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ops"))
    import reduce_harness as H
    reason = H.aot_skip_reason()
    if reason:
        pytest.skip(reason)
    from nbxtensor.quant import int4 as Q
    K = 4 * G
    lin = QuantLinear.quantize(rng.standard_normal((64, K)), G, symmetric=not has_min, scale_dtype=sc,
                               bias=nbx.zeros(64, dtype=act), cache=False)
    x, x2, res = nbx.zeros(1, K, dtype=act), nbx.zeros(2, K, dtype=act), nbx.zeros(1, 64, dtype=act)
    got = _sm90_launches(monkeypatch, lambda: lin(x, activation="silu" if has_min else None, residual=res))
    got += _sm90_launches(monkeypatch, lambda: lin(x2), target_programs=4096, MIN_K_SPLIT=G, BLOCK_K=G)
    if act.itemsize == 2:
        got += _sm90_launches(monkeypatch, lambda: lin(x), DECODE_ASM=True)
        assert got[-1][3]["DECODE_ASM"] and got[-1][3]["FAST_Q"]
        if G == 32:  # the word-decode kernel (inline PTX), with and without split-K
            got += _sm90_launches(monkeypatch, lambda: lin(x, activation="silu", residual=res), WORD_DECODE=True,
                                  BLOCK_K=64, BLOCK_N=16)
            got += _sm90_launches(monkeypatch, lambda: lin(x), WORD_DECODE=True, BLOCK_K=32, target_programs=4096,
                                  MIN_K_SPLIT=G)
            assert got[-1][0] is Q._int4_gemv_w_kernel and got[-1][3]["WASM"] and got[-1][3]["SPLIT"]
            got += _sm90_launches(monkeypatch, lambda: lin(x), WORD_DECODE=True, BLOCK_K=64, BLOCK_N=4, PREFETCH=True)
            assert got[-1][3]["PREFETCH"]
            got += _sm90_launches(monkeypatch, lambda: lin(x), WORD_DECODE=True, BLOCK_K=64, BLOCK_N=4, LOOP_STAGES=3,
                                  maxnreg=64)
            assert got[-1][3]["STAGES"] == 3 and got[-1][3]["maxnreg"] == 64
    got += _sm90_launches(monkeypatch, lambda: lin.dequantize(act))
    assert {k.__name__ for k, _, _, _ in got} - {"_int4_gemv_w_kernel"} == {"_int4_gemv_kernel",
                                                                          "_int4_dequant_kernel"}
    assert any(m["SPLIT"] for k, _, _, m in got if k is Q._int4_gemv_kernel)
    assert any(not m["SPLIT"] for k, _, _, m in got if k is Q._int4_gemv_kernel)
    for kernel, grid, args, meta in got:
        _compile_sm90(kernel, args, meta)


@pytest.mark.skipif(os.environ.get("NBX_TRITON_INTERPRET") != "1", reason="records the launches of the Triton path")
def test_sm90_table_word_decode_rule(monkeypatch):
    """The sm90 table sends bfloat16 activations with group 32 and rows of K > 2048 codes to the word-decode kernel
    with the H200 sweep's setting (BLOCK_N 4, BLOCK_K 4096; sweep_gemv int4 phase: 5-9 % faster than the table
    kernel on all four Llama-3-8B shapes), and everything else (short rows, float16, groups 64/128) to the table
    kernel; the recorded launches compile for sm_90 where the AOT toolchain is present."""
    from nbxtensor.quant import int4 as Q

    def launches(K, G, act):
        lin = QuantLinear.quantize(rng.standard_normal((8, K)), G, scale_dtype=T.float16, cache=False)
        return _sm90_launches(monkeypatch, lambda: lin(nbx.zeros(1, K, dtype=act)))

    word = launches(4096, 32, T.bfloat16)
    assert len(word) == 1 and word[0][0] is Q._int4_gemv_w_kernel
    assert word[0][3]["BLOCK_N"] == 4 and word[0][3]["NGC"] == 4096 // 32
    for K, G, act in ((2048, 32, T.bfloat16), (4096, 32, T.float16), (4096, 64, T.bfloat16),
                      (14336, 128, T.bfloat16)):
        got = launches(K, G, act)
        assert len(got) == 1 and got[0][0] is Q._int4_gemv_kernel, (K, G, act)
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ops"))
    import reduce_harness as H
    if H.aot_skip_reason() is None:
        monkeypatch.setattr(Q, "interpreting", lambda: False)   # the GPU's decode: inline PTX
        gpu = launches(4096, 32, T.bfloat16)
        assert gpu[0][3]["WASM"]
        _compile_sm90(gpu[0][0], gpu[0][2], gpu[0][3])


@pytest.mark.skipif(os.environ.get("NBX_TRITON_INTERPRET") == "1", reason="long rows: the cpu and GPU tiers")
@pytest.mark.parametrize("M", [1, 3])
def test_int4_linear_long_rows_bf16(device, M):
    """bfloat16 x, group 32, K = 4096 (a Llama-3-8B row): on an H200 the word-decode rule of the sm90 table, with
    a last step of fewer groups (K = 4096 + 1024) too; against the float64 oracle."""
    G, N = 32, 40
    for K in (4096, 5120):
        lin = _lin(N, K, G, False, T.float16, device)
        x = nbx.tensor(rng.standard_normal((M, K)), dtype=nbx.bfloat16, device=device)
        xin = x.cpu().float().numpy().astype(np.float64)
        ref = int4_linear_oracle(xin, lin.qweight, lin.scales, lin.mins, None, G)
        W = dequantize_oracle(lin.qweight, lin.scales, lin.mins, G)
        _check_linear(lin(x).cpu().float().numpy(), ref, xin, W, T.bfloat16, K)


@pytest.mark.parametrize("act", [None, "silu", "gelu", "silu_first_half"])
def test_epilogue_activation_and_residual(device, act):
    """``act(x W^T + b) + residual`` in the kernel's epilogue, GEMV and prefill paths; the residual may be the
    output itself (an in-place update)."""
    from nbxtensor.ops.matmul import _np_activation
    N, K = (6, 64) if QUICK else (70, 256)
    lin = _lin(N, K, 32, False, T.float16, device, bias=True)
    W = dequantize_oracle(lin.qweight, lin.scales, lin.mins, 32)
    for M in (1, 7):
        x = rng.standard_normal((M, K)).astype(np.float32)
        r0 = rng.standard_normal((M, N)).astype(np.float32)
        h = nbx.tensor(r0, device=device)
        y = lin(nbx.tensor(x, device=device), activation=act, residual=h, out=h)
        assert y is h
        ref = int4_linear_oracle(x, lin.qweight, lin.scales, lin.mins, lin.bias, 32, activation=act, residual=r0)
        want = _np_activation(x.astype(np.float64) @ W.T + lin.bias.cpu().numpy(), act) + r0
        assert np.allclose(ref, want)
        _check_linear(h.cpu().numpy(), ref, x, W, T.float32, K)
    with pytest.raises(ValueError, match="unknown activation"):
        lin(nbx.ones(1, K, device=device), activation="tanh")
    with pytest.raises(RuntimeError, match="residual must be"):
        int4_linear(nbx.ones(1, K, device=device), lin.qweight, lin.scales, lin.mins, group_size=32,
                    residual=nbx.ones(2, N, device=device))


KERNELS = os.environ.get("NBX_TRITON_INTERPRET") == "1" or os.environ.get("NBX_TEST_DEVICE", "cpu").startswith("cuda")


def _f64_of(t) -> np.ndarray:
    return cast_array(np.asarray(t.cpu().numpy()), t.dtype, T.float64)


@pytest.mark.skipif(not KERNELS, reason="the Triton kernels run under the interpreter or on a GPU")
@pytest.mark.parametrize("settings", [dict(), dict(FAST_Q=False), dict(BLOCK_K=64, BLOCK_N=2),
                                      dict(target_programs=64, MIN_K_SPLIT=32, BLOCK_K=32),
                                      dict(target_programs=64, MIN_K_SPLIT=64, BLOCK_K=256, BLOCK_N=8),
                                      dict(WORD_DECODE=True, BLOCK_K=64, BLOCK_N=4),
                                      dict(WORD_DECODE=True, BLOCK_K=64, BLOCK_N=8, target_programs=64,
                                           MIN_K_SPLIT=64),
                                      dict(WORD_DECODE=True, BLOCK_K=64, BLOCK_N=2, PERSIST=1, target_programs=1)],
                         ids=["table", "exact-q", "k64-n2", "split-k32", "split-k96-uneven", "word", "word-split",
                              "word-persist"])
@pytest.mark.parametrize("G,symmetric", [(32, False), (64, True), (128, False)])
def test_int4_gemv_settings(settings, G, symmetric, device):
    """The int4 GEMV's paths (the 1 + q/16 decode and the exact one, steps of several groups, a last step with
    fewer groups, split-K with whole and partial step ranges, rows of x on grid axis 0) against the float64
    oracle, 16-bit activations, with bias, silu and a residual."""
    from nbxtensor.runtime.configs import override
    N, K = 13, 6 * G
    for dt in (T.bfloat16,) if QUICK else (T.bfloat16, T.float16):
        lin = _lin(N, K, G, symmetric, T.float16, device, bias=True, dtype=dt)
        W = dequantize_oracle(lin.qweight, lin.scales, lin.mins, G)
        for M in (1, 3):
            x = nbx.tensor(rng.standard_normal((M, K)), dtype=dt, device=device)
            res = nbx.tensor(rng.standard_normal((M, N)), dtype=dt, device=device)
            with override("int4_gemv", **settings) if settings else _null():
                y = lin(x, activation="silu", residual=res)
            xs = _f64_of(x)
            ref = int4_linear_oracle(xs, lin.qweight, lin.scales, lin.mins, _f64_of(lin.bias), G, activation="silu",
                                     residual=_f64_of(res))
            _check_linear(_f64_of(y), ref, xs, W, dt, K)


def _null():
    import contextlib
    return contextlib.nullcontext()


@pytest.mark.skipif(not KERNELS, reason="the Triton kernels run under the interpreter or on a GPU")
def test_fast_decode_keeps_precision(device):
    """The 1 + q/16 decode subtracts sum x from sum (1 + q/16) x: with x of one sign and codes mostly 0 (the
    worst case for that difference) the result stays within the 16-bit tolerance of the oracle."""
    G, N, K = 32, 8, 8 * 32
    q = np.zeros((N, K), np.uint8)
    q[:, ::17] = 15
    from nbxtensor.quant import pack_int4
    s = np.full((N, K // G), 0.01, np.float16)
    m = np.full((N, K // G), -0.001, np.float16)
    lin = QuantLinear.from_packed(pack_int4(q, G), s, m, group_size=G, device=device, cache=False)
    W = dequantize_oracle(lin.qweight, lin.scales, lin.mins, G)
    for dt in (T.bfloat16, T.float16):
        x = nbx.tensor(np.abs(rng.standard_normal((1, K))) + 4.0, dtype=dt, device=device)
        xs = _f64_of(x)
        ref = int4_linear_oracle(xs, lin.qweight, lin.scales, lin.mins, None, G)
        _check_linear(_f64_of(lin(x)), ref, xs, W, dt, K)


@pytest.mark.skipif(not KERNELS, reason="the Triton kernels run under the interpreter or on a GPU")
@pytest.mark.parametrize("symmetric", [False, True])
def test_word_decode_kernel(monkeypatch, device, symmetric):
    """WORD_DECODE runs _int4_gemv_w_kernel (group 32, 16-bit x; its decode as 16 + q/16 and
    1 + q/16 floats from int32 words) and matches the float64 oracle: worst cases for its differences (x of one
    sign, codes mostly 0 or mostly 15) and random codes, split-K and persistent programs (PERSIST), software-pipelined loads (PREFETCH, LOOP_STAGES) and K ranges that end in a
    partial step (masked) included. Shapes it does not take (group 64, float32 x) run the other kernel."""
    from nbxtensor.ops import matmul as MM
    from nbxtensor.quant import int4 as Q
    from nbxtensor.quant import pack_int4
    from nbxtensor.runtime.configs import override
    names = []
    real = MM.launch
    monkeypatch.setattr(MM, "launch", lambda k, g, *a, **m: (names.append((k, tuple(g))), real(k, g, *a, **m))[1])
    G, N, K = 32, 12, 8 * 32
    cases = []
    for fill in (0, None) if QUICK else (0, 15, None):
        q = rng.integers(0, 16, (N, K), dtype=np.uint8) if fill is None else np.full((N, K), fill, np.uint8)
        if fill is not None:
            q[:, ::17] = 15 - fill
        cases.append(q)
    for q in cases:
        s = (rng.random((N, K // G)) * 0.02 + 0.001).astype(np.float16)
        m = None if symmetric else (-rng.random((N, K // G)) * 0.1).astype(np.float16)
        lin = QuantLinear.from_packed(pack_int4(q, G), s, m, group_size=G, device=device, cache=False)
        W = dequantize_oracle(lin.qweight, lin.scales, lin.mins, G)
        for dt, xv in ((T.bfloat16, np.abs(rng.standard_normal((1, K))) + 4.0),
                       (T.float16, rng.standard_normal((2, K)) * 3.0)):
            x = nbx.tensor(xv, dtype=dt, device=device)
            xs = _f64_of(x)
            ref = int4_linear_oracle(xs, lin.qweight, lin.scales, lin.mins, None, G)
            for settings in (dict(WORD_DECODE=True, BLOCK_K=64, BLOCK_N=4),
                             dict(WORD_DECODE=True, BLOCK_K=32, BLOCK_N=8, target_programs=64, MIN_K_SPLIT=32),
                             dict(WORD_DECODE=True, BLOCK_K=128, BLOCK_N=1, PERSIST=1, target_programs=1),
                             # software-pipelined loads: by hand (the last step re-loads itself; split-K ranges)
                             # and Triton's pipeliner (a register cap on the GPU)
                             dict(WORD_DECODE=True, BLOCK_K=32, BLOCK_N=8, PREFETCH=True, target_programs=64,
                                  MIN_K_SPLIT=64),
                             dict(WORD_DECODE=True, BLOCK_K=64, BLOCK_N=4, LOOP_STAGES=3, maxnreg=64)):
                names.clear()
                MM.clear_plans()
                with override("int4_gemv", **settings):
                    y = lin(x)
                assert [k for k, _ in names] == [Q._int4_gemv_w_kernel], names
                # persistent: PERSIST (1) program per SM (the interpreter tier counts 4), at most one per
                # (row tile, x row) pair
                pairs = -(-N // settings["BLOCK_N"]) * x.shape[0]
                sms = 4 if device == "cpu" else MM._sm_count(nbx.device(device).index or 0)
                assert names[0][1][0] == (min(pairs, sms) if "PERSIST" in settings else pairs)
                _check_linear(_f64_of(y), ref, xs, W, dt, K)
    # a K range that is not whole steps: the last step masked (plain, hand-prefetched, pipelined, split-K)
    for K2, settings in ((96, dict(BLOCK_K=64, BLOCK_N=4)), (224, dict(BLOCK_K=128, BLOCK_N=4, PREFETCH=True)),
                         (160, dict(BLOCK_K=128, BLOCK_N=2, LOOP_STAGES=3)),
                         (224, dict(BLOCK_K=64, BLOCK_N=4, target_programs=64, MIN_K_SPLIT=96))):
        for symm in (symmetric, not symmetric):
            lin = _lin(N, K2, 32, symm, T.float16, device, dtype=T.bfloat16)
            W = dequantize_oracle(lin.qweight, lin.scales, lin.mins, 32)
            x = nbx.tensor(rng.standard_normal((1, K2)), dtype=T.bfloat16, device=device)
            names.clear()
            MM.clear_plans()
            with override("int4_gemv", WORD_DECODE=True, **settings):
                y = lin(x)
            assert [k for k, _ in names] == [Q._int4_gemv_w_kernel], (K2, settings)
            xs = _f64_of(x)
            _check_linear(_f64_of(y), int4_linear_oracle(xs, lin.qweight, lin.scales, lin.mins, None, 32), xs, W,
                          T.bfloat16, K2)
    # not taken: group 64, float32 x
    for G2, K2, dt in ((64, 256, T.bfloat16), (32, 256, T.float32)):
        lin = _lin(N, K2, G2, symmetric, T.float16, device, dtype=dt)
        names.clear()
        MM.clear_plans()
        with override("int4_gemv", WORD_DECODE=True, BLOCK_K=64, BLOCK_N=4):
            lin(nbx.ones(1, K2, dtype=dt, device=device))
        assert [k for k, _ in names] == [Q._int4_gemv_kernel], (G2, K2, dt.name)
    MM.clear_plans()


@pytest.mark.skipif(not KERNELS, reason="launch plans exist for the Triton implementation (GPU or interpreter)")
def test_int4_plans(monkeypatch, device):
    """A repeated int4_linear / QuantLinear call runs its recorded plan (no general path), on the current data."""
    from nbxtensor.ops import matmul as MM
    from nbxtensor.quant import int4 as Q
    MM.clear_plans()
    G, N, K = 32, 9, 128
    lin = _lin(N, K, G, False, T.float16, device)
    W = dequantize_oracle(lin.qweight, lin.scales, lin.mins, G)
    x = nbx.tensor(rng.standard_normal((1, K)), dtype=nbx.float32, device=device)
    lin(x, activation="silu")
    assert sum(p is not MM._NO_PLAN for p in Q._INT4_PLANS.values()) == 1
    general = Q._int4_linear
    monkeypatch.setattr(Q, "_int4_linear", lambda *a, **k: pytest.fail("the general path ran for a planned call"))
    for _ in range(2):
        x64 = rng.standard_normal((1, K))
        y = lin(nbx.tensor(x64, dtype=nbx.float32, device=device), activation="silu")
        ref = int4_linear_oracle(x64, lin.qweight, lin.scales, lin.mins, None, G, activation="silu")
        _check_linear(y.cpu().numpy(), ref, x64, W, T.float32, K)
    out = nbx.empty(1, N, device=device)
    monkeypatch.setattr(Q, "_int4_linear", general)
    for i in range(2):  # out= plans too (recorded by the first call, run by the second)
        if i:
            monkeypatch.setattr(Q, "_int4_linear", lambda *a, **k: pytest.fail("general path for a planned out="))
        x64 = rng.standard_normal((1, K))
        assert lin(nbx.tensor(x64, dtype=nbx.float32, device=device), out=out) is out
        _check_linear(out.cpu().numpy(), int4_linear_oracle(x64, lin.qweight, lin.scales, lin.mins, None, G), x64,
                      W, T.float32, K)
    MM.clear_plans()
    assert not Q._INT4_PLANS


@pytest.mark.skipif(not KERNELS, reason="launch plans exist for the Triton implementation (GPU or interpreter)")
def test_int4_prefill_plans_stay_right(device):
    """More rows than MAX_M: dequantize, then the planned linear inside; the outer call is recorded with both
    launches (so it gets no plan of its own) and stays right call after call."""
    from nbxtensor.ops import matmul as MM
    from nbxtensor.quant import int4 as Q
    MM.clear_plans()
    G, N, K = 32, 7, 64
    lin = _lin(N, K, G, False, T.float16, device)
    W = dequantize_oracle(lin.qweight, lin.scales, lin.mins, G)
    M = launch_config("int4_gemv", nbx.device(device), dtypes=(T.float32,), rows=N, group=G)["MAX_M"] + 2
    for _ in range(3):
        x64 = rng.standard_normal((M, K))
        y = lin(nbx.tensor(x64, dtype=nbx.float32, device=device))
        _check_linear(y.cpu().numpy(), int4_linear_oracle(x64, lin.qweight, lin.scales, lin.mins, None, G), x64, W,
                      T.float32, K)
    assert all(p is MM._NO_PLAN for p in Q._INT4_PLANS.values())
    MM.clear_plans()
