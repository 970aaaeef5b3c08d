"""Casts through ``copy_``/``.to`` and ``fill_`` on the device under test, against the rules of
:mod:`nbxtensor.dtypes.casting` (the ``cpu`` implementation) bit for bit: all 65 536 float16 and bfloat16 bit
patterns to and from float32, every pair of the table on edge values, float8 saturation and overflow, the
float -> integer rule (truncate; NaN -> 0; saturate), fill_ of every dtype, overlapping copies.

Under ``NBX_TRITON_INTERPRET=1`` these run the Triton cast kernel (``ops/cast.py``) through the interpreter.
"""

from __future__ import annotations

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.dtypes.casting import cast_array

import pointwise_harness as H

REAL = [d for d in T.DTYPES if not d.is_complex]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def assert_same(actual: np.ndarray, expected: np.ndarray, dt, what=""):
    """Bit-exact, except that any NaN equals any NaN (payloads are not specified)."""
    assert actual.shape == expected.shape
    if dt.kind == T.KIND_FLOAT:
        an = np.isnan(cast_array(actual, dt, T.float64))
        en = np.isnan(cast_array(expected, dt, T.float64))
        assert (an == en).all(), f"{what}: NaN mismatch at {np.flatnonzero(an != en)[:5]}"
        ok = an | (_bits(actual) == _bits(expected))
    else:
        ok = actual == expected
    if not ok.all():
        i = np.flatnonzero(~ok.reshape(-1))[:6]
        raise AssertionError(f"{what}: {(~ok).sum()} differ, e.g. got {actual.reshape(-1)[i]} expected "
                             f"{expected.reshape(-1)[i]}")


def _all_patterns(dt) -> np.ndarray:
    return np.arange(65536, dtype=np.uint32).astype(np.uint16).view(dt.numpy)


@pytest.mark.parametrize("dt", [T.float16, T.bfloat16], ids=["float16", "bfloat16"])
def test_all_16bit_patterns_roundtrip_float32(dt, device):
    """Every float16/bfloat16 bit pattern widens to float32 exactly and narrows back to itself."""
    src = _all_patterns(dt)
    x = nbx.from_numpy(src).to(device)
    w = x.to(nbx.float32)
    exp = src.astype(np.float32)
    assert_same(w.cpu().numpy(), exp, T.float32, f"{dt.name} -> float32")
    back = w.to(dt)
    assert_same(back.cpu().numpy(), src, dt, f"float32 -> {dt.name}")


@pytest.mark.parametrize("dt", [T.float16, T.bfloat16], ids=["float16", "bfloat16"])
def test_float32_to_16bit_rounding(dt, device):
    """float32 values around every 16-bit pattern (midpoints: ties to even, and one ulp of float32 either side)
    round to nearest even exactly as the rule (and PyTorch)."""
    src = _all_patterns(dt)
    if H.QUICK:
        src = src[::4]
    f = src.astype(np.float32)
    ok = np.isfinite(f)
    f = f[ok]
    nxt = np.nextafter(f, np.float32(np.inf))
    mid = (f.astype(np.float64) + cast_array(cast_array(nxt, T.float32, dt), dt, T.float64))
    # the midpoint between consecutive 16-bit values is exact in float32 for both formats
    mid = (mid / 2).astype(np.float32)
    vals = np.concatenate([mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf)),
                           np.array([3.4e38, -3.4e38, 65519.0, 65520.0, 1e-8, -1e-45], np.float32)])
    vals = vals[np.isfinite(vals)]
    got = nbx.from_numpy(vals).to(device).to(dt).cpu().numpy()
    assert_same(got, cast_array(vals, T.float32, dt), dt, f"float32 -> {dt.name}")


def _edge_values(dt) -> np.ndarray:
    if dt is T.bool_:
        return np.array([True, False])
    if dt.kind in (T.KIND_INT, T.KIND_UINT):
        info = np.iinfo(dt.numpy)
        v = {int(info.min), int(info.max), 0, 1, 2, 127, 128, 255, 256, 1000, 65535, 65536, 2 ** 31 - 1, 2 ** 31,
             2 ** 53 + 1, -1, -2, -129}
        return np.array(sorted(x for x in v if info.min <= x <= info.max), dtype=np.int64 if dt is not T.uint64
                        else np.uint64).astype(dt.numpy)
    base = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, 2.5, -2.5, 127.9, 128.0, 255.5, 256.0, -128.6, -129.0, 448.0,
            464.0, 480.0, 500.0, -500.0, 57344.0, 61440.0, 65504.0, 65520.0, 1e5, 2.0 ** 31, -2.0 ** 31 - 1e3,
            2.0 ** 63, 2.0 ** 64, -2.0 ** 63, 1e20, -1e20, 1e-3, 1e-6, 1e-8, 3e-39, 1e-45, np.inf, -np.inf, np.nan]
    return cast_array(np.array(base, dtype=np.float64), T.float64, dt)


PAIRS = [(s, d) for s in REAL for d in REAL if s is not d]  # all 210 pairs: ~8 s under the interpreter


@pytest.mark.parametrize("pair", PAIRS, ids=[f"{s.name}-{d.name}" for s, d in PAIRS])
def test_every_pair_on_edge_values(pair, device):
    """Every ordered pair of the table on edge values (ties, range limits, +-inf, NaN, subnormals): the device's
    conversion equals the rule bit for bit; strided and broadcast sources too."""
    src_dt, dst_dt = pair
    v = _edge_values(src_dt)
    exp = cast_array(v, src_dt, dst_dt)
    x = nbx.from_numpy(v).to(device)
    assert_same(x.to(dst_dt).cpu().numpy(), exp, dst_dt, f"{src_dt.name} -> {dst_dt.name}")
    # strided source and destination (a transposed 2-d view), and a stride-0 broadcast source
    n = len(v)
    m = np.stack([v, v[::-1]])
    xt = nbx.from_numpy(np.ascontiguousarray(m.T)).to(device).t()
    out = nbx.empty(n, 2, dtype=dst_dt, device=device).t()
    out.copy_(xt)
    assert_same(out.cpu().numpy(), cast_array(m, src_dt, dst_dt), dst_dt, "strided")
    b = nbx.empty(3, n, dtype=dst_dt, device=device)
    b.copy_(x)
    assert_same(b.cpu().numpy(), np.broadcast_to(exp, (3, n)), dst_dt, "broadcast")


def test_float8_rules(device):
    x = nbx.tensor([500.0, 480.0, 464.0, float("inf"), -float("inf"), -1000.0, float("nan"), 448.0], device=device)
    e4 = x.to(nbx.float8_e4m3fn).float().tolist()
    assert e4[:6] == [448.0, 448.0, 448.0, 448.0, -448.0, -448.0] and np.isnan(e4[6]) and e4[7] == 448.0
    e5 = nbx.tensor([61440.0, 61439.0, 57344.0, -70000.0, float("inf")], device=device).to(nbx.float8_e5m2)
    assert e5.float().tolist() == [float("inf"), 57344.0, 57344.0, -float("inf"), float("inf")]


def test_float_to_int_rule(device):
    """Truncation toward zero; NaN -> 0; beyond the range (inf included) saturates (the documented rule)."""
    x = nbx.tensor([2.9, -2.9, float("nan"), float("inf"), -float("inf"), 1e10, -1e10, 127.5, -128.5, -0.5],
                   dtype=nbx.float32, device=device)
    assert x.to(nbx.int8).tolist() == [2, -2, 0, 127, -128, 127, -128, 127, -128, 0]
    assert x.to(nbx.uint8).tolist() == [2, 0, 0, 255, 0, 255, 0, 127, 0, 0]
    assert x.to(nbx.int32).tolist()[:7] == [2, -2, 0, 2 ** 31 - 1, -2 ** 31, 2 ** 31 - 1, -2 ** 31]
    assert x.to(nbx.int64).tolist()[3:5] == [2 ** 63 - 1, -2 ** 63]
    assert x.to(nbx.uint64).tolist()[3] == 2 ** 64 - 1
    assert x.to(nbx.bool).tolist() == [True, True, True, True, True, True, True, True, True, True]
    assert nbx.tensor([0.0, -0.0], device=device).to(nbx.bool).tolist() == [False, False]


def test_double_rounding_through_float32(device):
    """float64 -> float16 goes through float32 like PyTorch: a float64 just above a float16 tie rounds twice."""
    v = np.array([1.0 + 2.0 ** -11 + 2.0 ** -40, 2049.0 + 2 ** -30], dtype=np.float64)
    got = nbx.from_numpy(v).to(device).to(nbx.float16).cpu().numpy()
    assert_same(got, cast_array(v, T.float64, T.float16), T.float16)
    assert got[0] == np.float16(1.0)  # the float32 step lands on the tie, which rounds to even


@pytest.mark.parametrize("dt", REAL, ids=[d.name for d in REAL])
def test_fill(dt, device):
    vals = {T.bool_: [True, False], T.uint64: [2 ** 64 - 1, 0, 12345], T.int64: [-2 ** 63, 2 ** 63 - 1, -7]}
    for v in vals.get(dt, [0, 1, 100] if dt.kind != T.KIND_FLOAT else [0.0, -0.0, 1.5, 448.0, float("inf"),
                                                                        float("nan"), 3e-39]):
        if dt is T.int8 and v == 100 or dt.kind in (T.KIND_INT, T.KIND_UINT) and v > np.iinfo(dt.numpy).max:
            continue
        if dt is T.float8_e4m3fn and isinstance(v, float) and v == float("inf"):
            continue  # overflow: fill_ refuses a finite-range violation; inf is stored as is elsewhere
        t = nbx.empty(5, 3, dtype=dt, device=device).t()  # strided destination
        t.fill_(v)
        exp = np.full((3, 5), v, dtype=object)
        host = np.array(t.cpu().tolist(), dtype=object)
        if isinstance(v, float) and v != v:
            assert np.isnan(np.array(host, dtype=np.float64)).all()
        elif dt.kind == T.KIND_FLOAT:
            np.testing.assert_array_equal(np.array(host, dtype=np.float64),
                                          cast_array(np.array(exp, dtype=np.float64), T.float64, dt).astype(np.float64))
        else:
            assert (host == exp).all(), (dt, v, host)


def test_overlapping_copy(device):
    """copy_ refuses a source partly overlapping the destination (as PyTorch); the Triton kernel itself, called
    with such a pair (layouts the check cannot decide), stages the source through a temporary."""
    x = nbx.arange(10, device=device).to(nbx.float32)
    with pytest.raises(RuntimeError, match="single memory location"):
        x[1:].copy_(x[:-1])
    if H.INTERPRET or device != "cpu":
        y = nbx.arange(10, device=device)
        from nbxtensor.ops import registry
        registry.get("copy_").triton(y[:-1], y[1:])
        assert y.tolist() == list(range(1, 10)) + [9]
        z = nbx.arange(10, device=device)
        registry.get("copy_").triton(z[1:], z[:-1])
        assert z.tolist() == [0] + list(range(9))


def test_copy_zero_size_and_scalar(device):
    z = nbx.empty(0, 4, dtype=nbx.float16, device=device)
    z.copy_(nbx.empty(0, 4, device=device))
    s = nbx.empty((), dtype=nbx.int32, device=device)
    s.copy_(nbx.tensor(7.9, device=device))
    assert s.item() == 7


_VEC_PAIRS = [(T.bfloat16, T.float32), (T.float16, T.float32), (T.float32, T.bfloat16), (T.float32, T.float16),
              (T.float32, T.float32), (T.float8_e4m3fn, T.float32), (T.int32, T.float32), (T.float64, T.float32),
              (T.float32, T.int8), (T.float16, T.bfloat16)]


@pytest.mark.parametrize("vec", [4, 2])
@pytest.mark.parametrize("pair", _VEC_PAIRS, ids=[f"{a.name}->{b.name}" for a, b in _VEC_PAIRS])
def test_contiguous_cast_kernel_matches_the_rules(pair, vec, device):
    """The ``copy`` rule's CAST_VEC (ops/cast.py's contiguous kernel: indices declared contiguous in runs of VEC,
    the pointwise kernels' conversion) on edge values and every 16-bit pattern of the 16-bit sources, at a size
    that leaves a masked tail (BLOCK does not divide it), bit for bit against the rules; the plan takes the
    kernel for contiguous pairs and leaves strided and broadcast sources to the pointwise kernel."""
    from nbxtensor.ops import cast as C
    from nbxtensor.runtime.configs import override
    src_t, dst_t = pair
    if src_t in (T.float16, T.bfloat16):
        src = _all_patterns(src_t)[:-3]  # 65533 elements: a masked tail
    else:
        vals = np.array([0.0, -0.0, 1.0, -1.5, 0.5, 2.5, 65504.0, 65520.0, 1e-8, 3.4e38, -300.0, 127.5, 448.0,
                         np.inf, -np.inf, np.nan] * 5 + [7.0], dtype=np.float64)
        src = cast_array(vals, T.float64, src_t) if src_t.kind == T.KIND_FLOAT else \
            np.nan_to_num(vals, posinf=100, neginf=-100).clip(-1e9, 1e9).astype(src_t.numpy)
    x = nbx.from_numpy(src).to(device)
    exp = cast_array(src, src_t, dst_t)
    C._CONTIG_PLANS.clear()
    with override("copy", CAST_VEC=vec):
        y = nbx.empty(*x.shape, dtype=dst_t, device=device)
        y.copy_(x)
        assert_same(y.cpu().numpy(), exp, dst_t, f"{src_t.name} -> {dst_t.name}, CAST_VEC {vec}")
        # strided source and broadcast source: the pointwise kernel, same rules
        z = nbx.empty(2, x.shape[0] // 2, dtype=dst_t, device=device)
        z.copy_(x[: 2 * (x.shape[0] // 2)].reshape(x.shape[0] // 2, 2).t())
        assert_same(z.cpu().numpy(), exp[: 2 * (x.shape[0] // 2)].reshape(-1, 2).T, dst_t, "strided")
        b = nbx.empty(3, 5, dtype=dst_t, device=device)
        b.copy_(x[:5])
        assert_same(b.cpu().numpy(), np.broadcast_to(exp[:5], (3, 5)), dst_t, "broadcast")
    if H.INTERPRET or device != "cpu":
        assert [p for p in C._CONTIG_PLANS.values() if p is not None], "the contiguous kernel was not planned"


def _sm90_cast_sass(src: str, dst: str, vec: int) -> list[str]:
    """SASS opcodes of ``_cast_contig_kernel`` compiled for sm_90 as the JIT specializes it (16-byte aligned
    pointers, N divisible by 16), BLOCK 4096 and 8 warps (the sm90 table's large-copy schedule)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from nbxtensor.ops import cast as C
    sig = {"x_ptr": f"*{src}", "y_ptr": f"*{dst}", "N": "i32", "BLOCK": "constexpr", "VEC": "constexpr",
           "HW": "constexpr", "EVICT": "constexpr", "I64": "constexpr"}
    consts = dict(BLOCK=4096, VEC=vec, HW=True, EVICT=0, I64=False)
    attrs = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]], (2,): [["tt.divisibility", 16]]}
    k = triton.compile(ASTSource(fn=C._cast_contig_kernel, signature=sig, constexprs=consts, attrs=attrs),
                       target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "enable_reflect_ftz": False})
    ops = []
    for line in k.asm["sass"].splitlines():
        if "\t" in line:
            op = line.split("\t", 1)[1].strip()
            op = op.split()[1] if op.startswith("@") else op.split()[0]
            if not op.startswith("NOP"):
                ops.append(op)
    return ops


def test_sm90_widening_cast_kernel_has_no_layout_change():
    """sm_90: with CAST_VEC 4, bfloat16/float16 -> float32 loads 8 bytes and stores 16 bytes a thread with no
    shared-memory layout change (STS/LDS and a barrier per tile in the pointwise kernel, 85 instructions per thread
    for 16 elements; 56 here); with CAST_VEC 8 the change comes back (the reason for the key)."""
    import reduce_harness as R
    reason = R.aot_skip_reason()
    if reason:
        pytest.skip(reason)
    for src in ("bf16", "fp16"):
        ops = _sm90_cast_sass(src, "fp32", 4)
        assert "STG.E.128" in ops and "LDG.E.64" in ops, ops
        assert not {"STS.128", "LDS.128", "BAR.SYNC.DEFER_BLOCKING"} & set(ops), ops
        assert len(ops) <= 60, len(ops)
    ops = _sm90_cast_sass("bf16", "fp32", 8)
    assert "BAR.SYNC.DEFER_BLOCKING" in ops and "LDG.E.128" in ops


def test_sm90_copy_rule_for_float32_outputs(monkeypatch):
    """sm90.json's copy rule gives float32 outputs of large copies the pointwise kernel's 1024-element tiles with
    4 warps (H200, sweep_pointwise --group issue4, session 6, 32768x8192 into float32, % of 4.8 TB/s, table
    BLOCK 4096 / 8 warps -> 1024 / 4: bf16 83.2 -> 86.9, f16 82.8 -> 86.6); other large copies 2048 / 4 (session 7,
    sweep_pointwise --group activations: bf16 same-dtype 86.0 -> 88.3 %, fp8 e4m3 -> bf16 85.0 -> 85.5 %)."""
    from nbxtensor.runtime import configs
    monkeypatch.setattr(configs, "arch_of", lambda device: "sm90")  # (a new arch_of clears the memo)
    f32 = configs.launch_config("copy", nbx.device("cuda"), dtypes=(T.float32,), numel=1 << 28)
    bf16 = configs.launch_config("copy", nbx.device("cuda"), dtypes=(T.bfloat16,), numel=1 << 28)
    assert (f32["BLOCK"], f32["num_warps"]) == (1024, 4) and not f32.get("CAST_VEC")
    assert (bf16["BLOCK"], bf16["num_warps"]) == (2048, 4)
