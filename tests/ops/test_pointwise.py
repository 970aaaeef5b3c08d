"""The pointwise generator (ops/pointwise.py): rank collapse, the launch paths (contiguous fast path, strided,
stride-0 broadcast, scalars by value, splitting layouts deeper than MAX_RANK, 64-bit offsets) and, with no GPU
here, that every kernel the elementwise and activation records launch compiles for sm_90 (Hopper, the H200),
float32 and float64, with PyTorch's CUDA float semantics visible in the code (no flush-to-zero, IEEE division
and square root, NaN-propagating min/max: :func:`ieee_violations`).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.ops import pointwise as PW
from nbxtensor.ops import registry
from nbxtensor.ops.dispatch import promote
from nbxtensor.runtime.triton_compat import HAVE_TRITON, jit, tl  # noqa: F401  (the interpreter needs `tl` in a kernel's globals)

import pointwise_harness as H

pytestmark = pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")


# ---------------------------------------------------------------------------------------------------------
# collapse (pure Python)
# ---------------------------------------------------------------------------------------------------------
def test_collapse_contiguous_and_broadcast():
    assert PW.collapse((2, 3, 4), [(12, 4, 1), (12, 4, 1)]) == ((24,), [(1,), (1,)])
    assert PW.collapse((2, 3, 4), [(12, 4, 1), (0, 4, 1)]) == ((2, 12), [(12, 1), (0, 1)])
    assert PW.collapse((3, 4), [(4, 1), (1, 3)]) == ((3, 4), [(4, 1), (1, 3)])
    assert PW.collapse((1, 5, 1), [(5, 1, 1), (0, 2, 0)]) == ((5,), [(1,), (2,)])
    assert PW.collapse((1, 1), [(1, 1)]) == ((1,), [(0,)])
    assert PW.collapse((4, 6), [(13, 2), (6, 1)]) == ((4, 6), [(13, 2), (6, 1)])  # padded rows do not merge
    assert PW.collapse((4, 6), [(12, 2), (6, 1)]) == ((24,), [(2,), (1,)])  # a uniform stride merges
    assert PW.collapse((4, 6), [(0, 0), (6, 1)]) == ((24,), [(0,), (1,)])  # a scalar broadcast merges


def test_collapse_keeps_element_order():
    rng = np.random.default_rng(0)
    for _ in range(50):
        nd = rng.integers(1, 6)
        shape = tuple(int(s) for s in rng.integers(1, 4, nd))
        view = np.arange(int(np.prod(shape)) * 2).reshape(tuple(shape[:-1]) + (shape[-1] * 2,))[..., ::2]
        if rng.random() < 0.5:
            view = np.transpose(view, rng.permutation(nd))
        st = [tuple(s // view.itemsize for s in view.strides)]
        cs, cst = PW.collapse(view.shape, st)
        rebuilt = np.lib.stride_tricks.as_strided(view, shape=cs, strides=[s * view.itemsize for s in cst[0]])
        np.testing.assert_array_equal(rebuilt.reshape(-1), view.reshape(-1))


# ---------------------------------------------------------------------------------------------------------
# launch paths (interpreter or cuda)
# ---------------------------------------------------------------------------------------------------------
@pytest.fixture
def kdevice(device):
    if device == "cpu" and not H.INTERPRET:
        pytest.skip("Triton kernels on the cpu device need the interpreter tier (NBX_TRITON_INTERPRET=1)")
    return device


@jit
def _axpy(x, y, a, p1, p2):
    return a * x + y


def _run(out, inputs, pvals=(2.0,), compute=T.float32):
    PW.launch_pointwise(_axpy, out, inputs, compute, pvals)
    return out.cpu().numpy()


def test_contiguous_strided_broadcast_and_scalar(kdevice):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal((5, 6)).astype(np.float32)
    X = nbx.from_numpy(a).to(kdevice)
    Y = nbx.from_numpy(b).to(kdevice).t()
    out = nbx.empty(6, 5, device=kdevice)
    np.testing.assert_allclose(_run(out, [X, Y]), 2 * a + b.T, rtol=1e-6)
    row = nbx.from_numpy(b[0, :5].copy()).to(kdevice).expand(6, 5)
    np.testing.assert_allclose(_run(out, [X, row]), 2 * a + b[0, :5], rtol=1e-6)
    np.testing.assert_allclose(_run(out, [X, 1.5]), 2 * a + 1.5, rtol=1e-6)
    outt = nbx.empty(5, 6, device=kdevice).t()  # strided output
    np.testing.assert_allclose(_run(outt, [X, Y]), 2 * a + b.T, rtol=1e-6)
    f64 = nbx.empty(6, 5, dtype=nbx.float64, device=kdevice)
    X64 = X.to(nbx.float64)
    r = _run(f64, [X64, 0.1], pvals=(0.1,), compute=T.float64)  # float64 scalars arrive unrounded
    # The GPU contracts 0.1 * x + 0.1 into one FMA (as PyTorch's CUDA kernels, built with nvcc's default
    # --fmad=true); fused or not, the result lies within one float64 rounding of the operands' magnitude,
    # while a scalar rounded to float32 on the way would be off by ~1e-9 relative.
    p = 0.1 * a.astype(np.float64)
    assert (np.abs(r - (p + 0.1)) <= 2.0 ** -52 * (np.abs(p) + 0.1)).all()
    if kdevice == "cpu":  # the interpreter rounds each operation: bit-equal to NumPy
        np.testing.assert_array_equal(r, p + 0.1)


def test_block_k_plus_one_and_offsets(kdevice):
    block = H.block_size(kdevice)
    for n in (1, block - 1, block, block + 1, 2 * block + 1):
        a = np.arange(n, dtype=np.float32)
        X = nbx.from_numpy(a).to(kdevice)
        out = nbx.empty(n + 3, device=kdevice)[3:]  # a storage offset on the output
        out.fill_(-1.0)
        np.testing.assert_array_equal(_run(out, [X, X]), 3 * a)


def test_deeper_than_max_rank_is_split(kdevice):
    shape = (2, 1, 3, 2, 2, 3, 2)
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    X = nbx.from_numpy(np.ascontiguousarray(np.transpose(a, (6, 5, 4, 3, 2, 1, 0)))).to(kdevice).permute(
        6, 5, 4, 3, 2, 1, 0)
    Y = nbx.from_numpy(a).to(kdevice)
    assert len(PW.collapse(shape, [tuple(X.stride()), tuple(Y.stride())])[0]) > PW.MAX_RANK - 1
    out = nbx.empty(*shape, device=kdevice)
    np.testing.assert_array_equal(_run(out, [X, Y]), 3 * a)


def test_persistent_grid_loops_over_the_tiles(kdevice, monkeypatch):
    """``programs_per_sm`` launches that many programs per SM (4 under the interpreter), each looping over the
    tiles pid, pid + grid, ...; the result is the one-program-per-tile result, and a grid that would not be
    smaller than the tile count stays one program per tile."""
    from nbxtensor.runtime import configs
    a = np.arange(3001, dtype=np.float32)
    X = nbx.from_numpy(a).to(kdevice)
    out = nbx.empty(3001, device=kdevice)
    grids = []
    real = PW.launch
    monkeypatch.setattr(PW, "launch", lambda k, grid, *args, **meta: (grids.append((grid, meta["PERSIST"])),
                                                                      real(k, grid, *args, **meta)))
    sms = PW._sm_count(X.device)
    with configs.override("pointwise", BLOCK=64, programs_per_sm=1):
        r = _run(out, [X, X])
    np.testing.assert_array_equal(r, 3 * a)
    with configs.override("pointwise", BLOCK=1024, programs_per_sm=4):
        np.testing.assert_array_equal(_run(out, [X, X]), 3 * a)
    if kdevice == "cpu":  # (on a GPU the launcher's planned path does not go through PW.launch)
        assert grids == [((sms,), True), ((3,), False)]


def test_persistent_grid_on_the_int64_path(kdevice, monkeypatch):
    """A persistent grid on the 64-bit index path (the interpreter hands the loop counter over as a Python int,
    which had no ``.to``) gives the one-program-per-tile result."""
    from nbxtensor.runtime import configs
    monkeypatch.setattr(PW, "_I32_LIMIT", 8)
    a = np.arange(3001, dtype=np.float32)
    X = nbx.from_numpy(a).to(kdevice)
    with configs.override("pointwise", BLOCK=64, programs_per_sm=1):
        np.testing.assert_array_equal(_run(nbx.empty(3001, device=kdevice), [X, X]), 3 * a)
        np.testing.assert_array_equal(nbx.neg(X).cpu().numpy(), -a)


def test_int64_offset_path(kdevice, monkeypatch):
    """The 64-bit path (taken above 2**31) computes the same result: forced here by lowering the limit."""
    monkeypatch.setattr(PW, "_I32_LIMIT", 8)
    a = np.arange(60, dtype=np.float32).reshape(6, 10)
    X = nbx.from_numpy(a).to(kdevice)
    out = nbx.empty(10, 6, device=kdevice).t()
    np.testing.assert_array_equal(_run(out, [X, X.t().contiguous().t()]), 3 * a)


def test_raw_operand_and_int_params(kdevice):
    rec = registry.get("where")
    c = nbx.tensor([True, False, True], device=kdevice)
    x = nbx.tensor([1, 2, 3], dtype=nbx.int64, device=kdevice)
    out = nbx.empty(3, dtype=nbx.int64, device=kdevice)
    rec.triton(out, [c, x, np.int64(2 ** 40)], promote("default", x, 2), {})
    assert out.tolist() == [1, 2 ** 40, 3]


def test_zero_size_is_refused_by_the_dispatcher_not_launched(device, monkeypatch):
    called = []
    monkeypatch.setattr(PW, "launch", lambda *a, **k: called.append(a))
    nbx.exp(nbx.empty(0, device=device))
    nbx.add(nbx.empty(3, 0, device=device), nbx.empty(1, 0, device=device))
    assert called == []


# ---------------------------------------------------------------------------------------------------------
# sm_90 compilation of every kernel the records launch (no GPU needed)
# ---------------------------------------------------------------------------------------------------------
def _capture(monkeypatch):
    got = []
    monkeypatch.setattr(PW, "launch", lambda kernel, grid, *args, **meta: got.append((kernel, args, meta)))
    return got


def _signature(kernel, args, meta):
    sig, consts = {}, {}
    for p, a in zip(kernel.params, list(args) + [None] * (len(kernel.params) - len(args))):
        n = p.name
        if n in meta:
            sig[n], consts[n] = "constexpr", meta[n]
        elif a is None:
            sig[n], consts[n] = "constexpr", None
        elif hasattr(a, "data_ptr"):
            from triton.runtime.jit import _normalize_ty
            sig[n] = "*" + _normalize_ty(PW.tl_dtype(a.dtype))
        elif p.annotation_type:
            sig[n] = p.annotation_type
        else:
            sig[n] = "i32" if -2 ** 31 <= int(a) < 2 ** 31 else "i64"
    return sig, consts


def _compile_options() -> frozenset:
    import dataclasses

    from triton.backends.nvidia.compiler import CUDAOptions
    return frozenset(f.name for f in dataclasses.fields(CUDAOptions))


def _compile_sm90(kernel, args, meta):
    """Compile as the launcher would: launch options in ``meta`` (num_warps, enable_reflect_ftz, ...) become
    compile options, the rest constexprs."""
    import triton
    from triton.backends.compiler import GPUTarget
    names = _compile_options()
    opts = {k: v for k, v in meta.items() if k in names}
    consts_meta = {k: v for k, v in meta.items() if k not in opts}
    sig, consts = _signature(kernel, args, consts_meta)
    src = triton.compiler.ASTSource(fn=kernel, signature=sig, constexprs=consts)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)


def _compile_cases():
    """Every (record, params) with float32, float64 and one integer/bool dtype; all six dtypes with
    NBX_TEST_SM90_ALL=1."""
    cases = []
    for rec in registry.all_ops():
        if rec.family not in ("elementwise", "activation") or rec.extra.get("kind") != "pointwise":
            continue
        for params in H.param_cases(rec):
            for dt in (T.float32, T.float64, T.bfloat16, T.int32, T.bool_, T.float8_e4m3fn):
                if dt in H.allowed(rec, params):
                    cases.append((rec, dt, params))
    if os.environ.get("NBX_TEST_SM90_ALL") == "1":
        return cases
    # default: float32, float64 and one integer/bool case per (record, params)
    seen, out = set(), []
    for rec, dt, params in cases:
        key = (rec.name, str(params), dt.name) if dt in (T.float32, T.float64) else \
            (rec.name, str(params), "int") if dt.kind != T.KIND_FLOAT else None
        if key is None or key in seen:
            continue
        seen.add(key)
        out.append((rec, dt, params))
    return out


COMPILE_CASES = _compile_cases() if HAVE_TRITON else []


@pytest.mark.skipif(H.INTERPRET or not HAVE_TRITON, reason="compiles with Triton's real compiler (not under the "
                    "interpreter)")
@pytest.mark.parametrize("case", COMPILE_CASES, ids=[f"{r.name}-{d.name}-{i}" for i, (r, d, _) in
                                                     enumerate(COMPILE_CASES)])
def test_compiles_for_sm90(case, monkeypatch):
    """Each record's Triton implementation, launched on a strided broadcast case, compiles to a cubin for
    sm_90 with the settings of runtime/configs/sm90.json (Triton 3.6 with its bundled ptxas; no GPU), and the
    code computes floats as PyTorch's CUDA kernels do (:func:`assert_ieee_like_nvcc`)."""
    rec, dt, params = case
    got = _record_launches(rec, dt, params, monkeypatch)
    for kernel, kargs, meta in got:
        c = _compile_sm90(kernel, kargs, meta)
        assert c.asm["cubin"], rec.name
        # 16-bit outputs may take the fast bodies (ops/activation.py, ops/elementwise.py: ex2/sqrt.approx; their
        # reciprocal and log2 are rcp/lg2.approx.ftz, in _LIBDEVICE_FTZ, on arguments >= 1)
        assert_ieee_like_nvcc(c, rec.name, fast=kargs[0].dtype in PW.NARROW)


def _record_launches(rec, dt, params, monkeypatch, **settings) -> list:
    """The (kernel, args, meta) launches of ``rec``'s Triton implementation on a (4, 6) case of dtype ``dt``
    (one contiguous and one strided operand), captured instead of run, with sm90.json's settings (``settings``
    laid over them)."""
    got = _capture(monkeypatch)
    monkeypatch.setattr(PW, "launch_config", lambda op, device, **k: dict(
        __import__("nbxtensor.runtime.configs", fromlist=["_table"])._table("sm90")[op][-1]["config"], **settings))
    rng = np.random.default_rng(0)
    names = rec.extra["schema_obj"].operands
    args = []
    for k, n in enumerate(names):
        d = H._operand_dtype(rec, k, dt)
        if n in rec.extra.get("scalar_operands", ()):
            args.append(1 if d is not T.bool_ else True)
            continue
        h = H.values(rec, d, (4, 6), rng, k)
        t = nbx.from_numpy(h)
        args.append(t.t().contiguous().t() if k % 2 else t)  # a strided operand next to a contiguous one
    a = rec.extra["schema_obj"].bind(tuple(args), dict(params))
    a.pop("out", None)
    prom = promote(H._kind(rec, params), *[a[n] for n in rec.extra.get("promote", names)])
    prep = rec.extra.get("prepare")
    prm = prep(a, prom) if prep else {n: a[n] for n in rec.extra["schema_obj"].params}
    out = nbx.empty(4, 6, dtype=prom.result)
    inputs = [a[n] if not isinstance(a[n], (int, float, bool)) else __import__(
        "nbxtensor.ops.dispatch", fromlist=["scalar_to"]).scalar_to(a[n], prom.compute) for n in names]
    rec.triton(out, inputs, prom, prm)
    assert got, rec.name
    return got


# What PyTorch's CUDA kernels compute (nvcc defaults: -ftz=false -prec-div=true -prec-sqrt=true), read off the
# compiled code. libdevice's own non-FTZ functions use these approximations internally, on range-reduced
# arguments (``expf`` -> ex2.approx.ftz.f32, ``tanhf`` -> rcp.approx.ftz.f32, float64 functions seed Newton
# steps with rcp/rsqrt.approx.ftz.f64): the same code CUDA's math library runs. Any other ``.ftz`` means
# libdevice was compiled with __CUDA_FTZ=1 (Triton's default) or the kernel flushes subnormals itself.
_LIBDEVICE_FTZ = frozenset({"ex2.approx.ftz.f32", "lg2.approx.ftz.f32", "rcp.approx.ftz.f32", "rcp.approx.ftz.f64",
                            "rsqrt.approx.ftz.f32", "rsqrt.approx.ftz.f64"})
# Triton operations that are approximate on float32 on NVIDIA GPUs (``/`` -> div.full.f32, tl.sqrt ->
# sqrt.approx.f32, tl.exp -> ex2.approx ...) or drop NaN (tl.minimum/tl.maximum -> min.f32/max.f32): kernel
# code uses triton_helpers.div_rn / sqrt_rn, libdevice and the NaN-propagating maximum/minimum instead.
_TTIR_F32_APPROX = ("arith.divf", "math.sqrt", "math.rsqrt", "math.exp", "math.exp2", "math.log", "math.log2",
                    "math.sin", "math.cos")
_TTIR_NAN_DROPPING = ("arith.minnumf", "arith.maxnumf")


def ieee_violations(compiled, fast: bool = False) -> list[str]:
    """Instructions and operations in a compiled kernel that deviate from nvcc's IEEE float defaults; ``fast``
    (a kernel writing float16/bfloat16) allows the float32 approximations of the fast bodies (``math.exp``,
    ``math.exp2``, ``math.sqrt``: ex2.approx.f32 and sqrt.approx.f32, subnormals kept)."""
    import re
    ptx, ttir = compiled.asm["ptx"], compiled.asm["ttir"]
    bad = sorted({m for m in re.findall(r"\b[a-z0-9]+(?:\.[a-z0-9]+)*\.ftz(?:\.[a-z0-9]+)*", ptx)} - _LIBDEVICE_FTZ)
    bad += sorted(set(re.findall(r"\bdiv\.full\.f32", ptx)))
    allowed = {"math.exp", "math.exp2", "math.sqrt"} if fast else set()
    for line in ttir.splitlines():
        m = re.search(r"= ((?:arith|math)\.\w+) .*?(f32|f64)\b", line)
        if m and (m.group(1) in _TTIR_NAN_DROPPING or (m.group(1) in _TTIR_F32_APPROX and m.group(2) == "f32"
                                                         and m.group(1) not in allowed)):
            bad.append(f"{m.group(1)} ({m.group(2)})")
    return bad


def assert_ieee_like_nvcc(compiled, what: str, fast: bool = False) -> None:
    bad = ieee_violations(compiled, fast)
    assert not bad, f"{what}: the sm_90 code deviates from PyTorch's CUDA float semantics: {sorted(set(bad))}"


# The ops the first H200 run caught (subnormals flushed by libdevice, approximate division in floor division,
# NaN dropped by tl.minimum/tl.maximum), each with what its PTX must and must not show.
_NAN_DROPPING_PTX = r"\b(?:min|max)\.f32"
_IEEE_REGRESSIONS = [
    ("floor", {}, [r"cvt\.rmi\.f32\.f32"], []),
    ("ceil", {}, [r"cvt\.rpi\.f32\.f32"], []),
    ("div", {"rounding_mode": "floor"}, [r"div\.rn\.f32", r"cvt\.rmi\.f32\.f32"], []),
    ("floor_divide", {}, [r"div\.rn\.f32"], []),
    ("remainder", {}, [], []),
    ("fmod", {}, [], []),
    ("pow", {}, [], []),
    ("atan2", {}, [], []),
    ("hardsigmoid", {}, [r"div\.rn\.f32"], [_NAN_DROPPING_PTX]),
    ("hardswish", {}, [r"div\.rn\.f32"], [_NAN_DROPPING_PTX]),
    ("logsigmoid", {}, [], [_NAN_DROPPING_PTX]),
    ("clamp", {}, [], [_NAN_DROPPING_PTX]),
    ("hardtanh", {}, [], [_NAN_DROPPING_PTX]),
    ("rsqrt", {}, [r"div\.rn\.f32", r"sqrt\.rn\.f32"], []),
]


@pytest.mark.skipif(H.INTERPRET or not HAVE_TRITON, reason="compiles with Triton's real compiler")
@pytest.mark.parametrize("case", _IEEE_REGRESSIONS, ids=[f"{c[0]}-{i}" for i, c in enumerate(_IEEE_REGRESSIONS)])
def test_sm90_ptx_ieee_regressions(case, monkeypatch):
    """The float32 kernels that gave wrong special values on the H200 (floor(-1e-40) = -0, fmod/floor_divide
    NaN for subnormal divisors, pow(-2e-40, -1) = -2**127, atan2(1e-45, 0) = 0, hardsigmoid(NaN) = 0) compile
    for sm_90 without flush-to-zero outside libdevice's internals, without approximate division and without
    NaN-dropping min/max; and the same kernels compiled with Triton's default FTZ libdevice are caught."""
    import re
    name, params, must, must_not = case
    # the precise bodies: rsqrt's ALT_RSQRT (on in sm90.json: nvcc's rsqrt.approx.f32, as PyTorch's kernel; checked
    # by test_sm90_alt_bodies_instruction_budget) is laid off here
    for kernel, kargs, meta in _record_launches(registry.get(name), T.float32, params, monkeypatch, ALT_RSQRT=0):
        assert meta.get("enable_reflect_ftz") is False, meta
        c = _compile_sm90(kernel, kargs, meta)
        assert_ieee_like_nvcc(c, name)
        for pat in must:
            assert re.search(pat, c.asm["ptx"]), (name, pat)
        for pat in must_not:
            assert not re.search(pat, c.asm["ptx"]), (name, pat)
        if name in ("floor", "fmod", "pow", "atan2"):  # the check itself sees Triton's default
            ftz = _compile_sm90(kernel, kargs, dict(meta, enable_reflect_ftz=True))
            assert ieee_violations(ftz), name


def _compile_contiguous_sm90(body, tl_name: str, block: int, num_warps: int):
    """The two-operand generator kernel on contiguous operands and output of Triton dtype ``tl_name`` (``"bf16"``)
    with ``body``, compiled for sm_90 as a large launch would be: pointers and the element count divisible by 16
    (Triton's launch-time specialisation, which lets the loads be 128-bit vectors)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from nbxtensor.ops.triton_helpers import IEEE_OPTIONS
    k = PW._pw2
    meta = dict(BODY=body, CT=tl.float32, RANK=0, OM=0, M0=0, M1=0, RAW=0, I64=False, BLOCK=block, HW=True, EVICT=0,
                PERSIST=False)
    sig, consts, attrs = {}, {}, {}
    for i, p in enumerate(k.params):
        if p.name in meta:
            sig[p.name], consts[p.name] = "constexpr", meta[p.name]
        elif p.name in ("OUT", "X0", "X1"):
            sig[p.name], attrs[(i,)] = "*" + tl_name, [["tt.divisibility", 16]]
        else:
            sig[p.name] = p.annotation_type or "i32"
            if p.name == "N":
                attrs[(i,)] = [["tt.divisibility", 16]]
    src = triton.compiler.ASTSource(fn=k, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=num_warps, **IEEE_OPTIONS))


@pytest.mark.skipif(H.INTERPRET or not HAVE_TRITON, reason="compiles with Triton's real compiler")
def test_remainder_body_compiles_for_sm90():
    """remainder's body (ATen's fmod formula) compiles for sm_90 on a large contiguous bfloat16 launch with the
    sm90 table's large-tensor schedule (BLOCK 1024, 4 warps): 128-bit loads and stores, no local memory, IEEE
    float semantics."""
    import re
    from nbxtensor.ops import elementwise as E
    c = _compile_contiguous_sm90(E._remainder_b, "bf16", 1024, 4)
    sass = c.asm["sass"]
    assert re.findall(r"LDG\.E\.128", sass) and re.findall(r"STG\.E\.128", sass), "loads/stores not 128-bit"
    assert not re.findall(r"\b(?:LDL|STL)\b", sass), "local memory (spills)"
    assert_ieee_like_nvcc(c, "remainder")


CAST_PAIRS = [(s, d) for s in (T.float32, T.float64, T.bfloat16, T.float16, T.float8_e4m3fn, T.float8_e5m2, T.int64,
                               T.uint8, T.bool_)
              for d in (T.float8_e4m3fn, T.float8_e5m2, T.bfloat16, T.float16, T.int8, T.uint64, T.bool_, T.float32)
              if s is not d]


@pytest.mark.skipif(H.INTERPRET or not HAVE_TRITON, reason="compiles with Triton's real compiler")
@pytest.mark.parametrize("pair", CAST_PAIRS, ids=[f"{s.name}-{d.name}" for s, d in CAST_PAIRS])
def test_cast_kernel_compiles_for_sm90(pair, monkeypatch):
    s, d = pair
    got = _capture(monkeypatch)
    src = nbx.zeros(8, 8, dtype=s)
    dst = nbx.empty(8, 8, dtype=d)
    registry.get("copy_").triton(dst, src.t())
    for kernel, kargs, meta in got:
        assert _compile_sm90(kernel, kargs, meta).asm["cubin"]



# ---------------------------------------------------------------------------------------------------------
# Instruction budgets of the bf16 kernels on sm_90 (the H200's bandwidth needs them lean)
# ---------------------------------------------------------------------------------------------------------
def _compile_as_jit(kernel, args, meta):
    """Compile a captured launch as Triton's JIT specializes it at run time on the GPU: 16-byte aligned pointers
    and ints divisible by 16 carry ``tt.divisibility = 16`` (what lets the compiler vectorize the contiguous
    path), ints equal to 1 become constants."""
    import triton
    from triton.backends.compiler import GPUTarget
    names = _compile_options()
    opts = {k: v for k, v in meta.items() if k in names}
    sig, consts = _signature(kernel, args, {k: v for k, v in meta.items() if k not in opts})
    attrs = {}
    for i, (p, a) in enumerate(zip(kernel.params, list(args) + [None] * (len(kernel.params) - len(args)))):
        if sig[p.name] == "constexpr" or a is None:
            continue
        if hasattr(a, "data_ptr"):
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(a, int) and not p.annotation_type:
            if a == 1:
                sig[p.name], consts[p.name] = "constexpr", 1
            elif a % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    src = triton.compiler.ASTSource(fn=kernel, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)


def _sass_per_element(compiled, meta) -> tuple[float, list[str]]:
    """SASS instructions (NOPs excluded) per element each thread handles, and the opcodes."""
    from sass_harness import opcodes
    ops = opcodes(compiled.asm["sass"].splitlines())
    return len(ops) / (meta["BLOCK"] / (32 * meta.get("num_warps", 4))), ops


def _bf16_launch(call, monkeypatch):
    """The launch ``call`` makes on the sm_90 table (shapes past its largest numel bucket), captured."""
    from nbxtensor.runtime import configs
    got = _capture(monkeypatch)
    monkeypatch.setattr(configs, "arch_of", lambda device: "sm90")
    monkeypatch.setattr(registry, "interpreting", lambda: True)  # cpu tensors -> the Triton implementation
    call()
    assert len(got) == 1, got
    return got[0]


_N = (1024, 8192)  # 8 Mi elements: the sm_90 table's rule for large tensors, as the 32768 x 8192 benchmark
_BF = nbx.bfloat16


def _e(dtype=_BF):
    return nbx.empty(*_N, dtype=dtype)


# op -> (call on bf16 tensors of _N, SASS instructions per element allowed). Before the compiled tier used the
# GPU's conversion instructions, NaN-propagating max/min and the fast bodies for 16-bit outputs (H200 run:
# hardtanh 0.79x, gelu tanh 0.75x, mish 0.78x PyTorch eager), the same kernels took: relu 14.1, hardtanh 19.8,
# add 13.8, f32->bf16 10.6, bf16->fp8 19.9, exp 19.2, silu 41.4, gelu tanh 39.2, gelu 43.2, mish 70.4,
# logsigmoid 53.6, softplus 72.2 (bf16 in and out needs at most ~26 issue cycles per element at 4.2 TB/s).
_BUDGETS = {
    "relu": (lambda nbx, F: F.relu(_e()), 5),
    "hardtanh": (lambda nbx, F: F.hardtanh(_e()), 7),
    "add": (lambda nbx, F: nbx.add(_e(), _e()), 8),
    "copy f32->bf16": (lambda nbx, F: _e().copy_(_e(nbx.float32)), 4),
    "copy bf16->fp8": (lambda nbx, F: _e(nbx.float8_e4m3fn).copy_(_e()), 5),
    "exp": (lambda nbx, F: nbx.exp(_e()), 14),
    "silu": (lambda nbx, F: F.silu(_e()), 18),
    "gelu-tanh": (lambda nbx, F: F.gelu(_e(), approximate="tanh"), 20),
    "gelu": (lambda nbx, F: F.gelu(_e()), 28),
    "mish": (lambda nbx, F: F.mish(_e()), 18),
    "logsigmoid": (lambda nbx, F: F.logsigmoid(_e()), 23),
    "softplus": (lambda nbx, F: F.softplus(_e()), 26),
    "asinh": (lambda nbx, F: nbx.asinh(_e()), 32),  # were 82, 59 and 47 with libdevice
    "atan": (lambda nbx, F: nbx.atan(_e()), 25),
    "sinh": (lambda nbx, F: nbx.sinh(_e()), 20),
}


@pytest.mark.skipif(H.INTERPRET or not HAVE_TRITON, reason="compiles with Triton's real compiler")
@pytest.mark.parametrize("op", list(_BUDGETS))
def test_sm90_bf16_instruction_budget(op, monkeypatch):
    """The bf16 kernels of the benchmark's hot ops, compiled for sm_90 as the JIT specializes them, load and store
    16 bytes per instruction and stay within an instruction budget per element."""
    import nbxtensor.nn.functional as F
    call, budget = _BUDGETS[op]
    kernel, kargs, meta = _bf16_launch(lambda: call(nbx, F), monkeypatch)
    c = _compile_as_jit(kernel, kargs, meta)
    per, ops = _sass_per_element(c, meta)
    assert "LDG.E.128" in ops and "STG.E.128" in ops or op == "copy bf16->fp8" and "LDG.E.128" in ops, (op, ops)
    assert per <= budget, f"{op}: {per:.1f} SASS instructions per element, budget {budget}"


# Alternative bodies behind config keys (ops/pointwise.py ``Alt``): (call, key, SASS instructions per element
# allowed with the key, at least this many without it). sm_90, bf16 32768x8192-like launches, measured
# 2026-11-30: cosh 25.25 -> 8.62 (libdevice coshf: FRND argument reduction, selects; the key: ex2.approx.ftz +
# rcp.approx), rsqrt 49.12 -> 8.00 (IEEE sqrt and division with slow-path calls; the key: MUFU.RSQ with its
# subnormal rescale), float32 rsqrt 48.12 -> 7.25, pow 124.12 -> 60.25 and pow(x, 2.5) 118.38 -> 51.38 (libdevice's
# double-float powf with its branches; the key: exponent bits, the atanh series, ex2.approx and C99's special cases
# as selects).
_ALT_BUDGETS = {
    "cosh": (lambda nbx: nbx.cosh(_e()), "ALT_COSH", 9, 20),
    "rsqrt": (lambda nbx: nbx.rsqrt(_e()), "ALT_RSQRT", 8, 40),
    "rsqrt f32": (lambda nbx: nbx.rsqrt(_e(nbx.float32)), "ALT_RSQRT", 7.5, 40),
    "pow": (lambda nbx: nbx.pow(_e(), _e()), "ALT_POW", 61, 100),
    "pow scalar": (lambda nbx: nbx.pow(_e(), 2.5), "ALT_POW", 52, 100),
}


@pytest.mark.skipif(H.INTERPRET or not HAVE_TRITON, reason="compiles with Triton's real compiler")
@pytest.mark.parametrize("op", list(_ALT_BUDGETS))
def test_sm90_alt_bodies_instruction_budget(op, monkeypatch):
    """The ``ALT_*`` bodies compiled for sm_90 as the JIT specializes them: 16-byte accesses, within their budget,
    well below the default body's count; rsqrt's is the non-flushing ``rsqrt.approx.f32`` (nvcc's rsqrtf)."""
    from nbxtensor.runtime import configs
    call, key, budget, before = _ALT_BUDGETS[op]
    with configs.override("pointwise", **{key: 0}):   # the default body (sm90.json turns the key on)
        kernel, kargs, meta = _bf16_launch(lambda: call(nbx), monkeypatch)
    base, _ = _sass_per_element(_compile_as_jit(kernel, kargs, meta), meta)
    with configs.override("pointwise", **{key: 1}):
        kernel, kargs, meta = _bf16_launch(lambda: call(nbx), monkeypatch)
    c = _compile_as_jit(kernel, kargs, meta)
    per, ops = _sass_per_element(c, meta)
    assert "LDG.E.128" in ops and "STG.E.128" in ops, ops
    assert per <= budget and base >= before, f"{op}: {per:.2f} SASS instructions per element with {key} " \
        f"(budget {budget}), {base:.2f} without"
    if key == "ALT_RSQRT":
        assert "rsqrt.approx.f32" in c.asm["ptx"] and "rsqrt.approx.ftz" not in c.asm["ptx"]


@pytest.mark.skipif(H.INTERPRET or not HAVE_TRITON, reason="compiles with Triton's real compiler")
def test_sm90_conversions_use_the_hardware_where_exact(monkeypatch):
    """Compiled kernels narrow float32 with the GPU's cvt instructions (round to nearest even; e4m3fn saturating,
    e5m2 with its saturation undone to overflow to inf at 61440), and HW_CVT=0 keeps the bit formulas that the
    interpreter tier checks."""
    from nbxtensor.runtime import configs
    cases = [(nbx.bfloat16, r"cvt\.rn\.bf16x2\.f32"), (nbx.float8_e4m3fn, r"cvt\.rn\.satfinite\.e4m3x2\.f32"),
             (nbx.float8_e5m2, r"cvt\.rn\.satfinite\.e5m2x2\.f32")]
    import re
    for dt, pat in cases:
        kernel, kargs, meta = _bf16_launch(lambda: _e(dt).copy_(_e(nbx.float32)), monkeypatch)
        ptx = _compile_as_jit(kernel, kargs, meta).asm["ptx"]
        assert re.search(pat, ptx), (dt, pat)
        if dt is nbx.float8_e5m2:
            assert "0f47700000" in ptx  # the 61440 threshold of the overflow to inf
        with configs.override("copy", HW_CVT=0):
            kernel, kargs, meta = _bf16_launch(lambda: _e(dt).copy_(_e(nbx.float32)), monkeypatch)
        assert meta["HW"] is False
        assert not re.search(r"\bcvt\.rn(?:\.satfinite)?\.(?:bf16x2|e4m3x2|e5m2x2)", _compile_as_jit(
            kernel, kargs, meta).asm["ptx"]), dt
    kernel, kargs, meta = _bf16_launch(lambda: _e(nbx.float32).copy_(_e(nbx.float8_e4m3fn)), monkeypatch)
    assert "cvt.rn.f16x2.e4m3x2" in _compile_as_jit(kernel, kargs, meta).asm["ptx"]


@pytest.mark.skipif(H.INTERPRET or not HAVE_TRITON, reason="compiles with Triton's real compiler")
def test_sm90_persistent_variant_compiles_vectorized(monkeypatch):
    """The sweep's persistent-grid variant (``programs_per_sm``) compiles for sm_90 with 16-byte accesses."""
    import nbxtensor.nn.functional as F
    from nbxtensor.runtime import configs
    with configs.override("pointwise", programs_per_sm=8):
        kernel, kargs, meta = _bf16_launch(lambda: F.gelu(_e(), approximate="tanh"), monkeypatch)
    assert meta["PERSIST"] is True
    per, ops = _sass_per_element(_compile_as_jit(kernel, kargs, meta), meta)
    assert "LDG.E.128" in ops and "STG.E.128" in ops and per <= _BUDGETS["gelu-tanh"][1] + 2, per


def test_a_negative_zero_scalar_keeps_its_sign(device):
    """A Python -0.0 operand or parameter reaches the kernel as -0.0 (a splat by ``0 + F`` made it +0.0), as in
    PyTorch: 0 * -0.0 = -0.0, clamp(-1, min=-0.0) = -0.0, leaky_relu(-1, -0.0) = +0.0 (slope times x)."""
    import nbxtensor as nbx
    F = nbx.nn.functional

    def bits(t):
        return np.signbit(t.cpu().float().numpy()).tolist()
    z = nbx.zeros(3, device=device)
    assert bits(z * -0.0) == [True] * 3
    assert bits(nbx.zeros(3, dtype=nbx.bfloat16, device=device) * -0.0) == [True] * 3
    assert bits(z + -0.0) == [False] * 3                        # +0 + -0 = +0
    assert bits(nbx.clamp(nbx.full((2,), -1.0, device=device), min=-0.0)) == [True] * 2
    assert bits(F.leaky_relu(nbx.tensor([-0.0, -1.0], device=device), -0.0)) == [False, False]
