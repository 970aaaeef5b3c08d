"""Test matrix for the reduction, scan, softmax and norm families, generated from the op table (used by
test_reduction.py, test_scan.py, test_softmax.py and test_norm.py; not a test module itself).

Inputs are drawn per record ``domain`` and dtype, placed on the device under test in a layout (contiguous,
transposed, sliced with an offset, expanded with stride 0, permuted 3-d, zero-size, 0-dim, a reduced extent of
``BLOCK * k + 1`` for the arch's config, a long 1-d row, 1823 x 781), run through the public function, and
compared with the record's float64 oracle on the same values: the oracle's result is cast to the output dtype
and compared with :func:`nbxtensor.dtypes.tolerance` widened by the reduced length (NaN equals NaN; infinities
must match; integers, bool and indices exact).

``NBX_TEST_QUICK=1`` (the interpreter tier) shrinks shapes and subsamples the dtype x layout matrix; the GPU tier
(``NBX_TEST_DEVICE=cuda``) subsamples the same way but keeps full shapes (``SUBSAMPLE``).
"""

from __future__ import annotations

import os

import numpy as np

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.dtypes import tolerance
from nbxtensor.dtypes.casting import cast_array
from nbxtensor.ops import registry
from nbxtensor.runtime.configs import launch_config

QUICK = os.environ.get("NBX_TEST_QUICK", "0") == "1"
DEVICE = os.environ.get("NBX_TEST_DEVICE", "cpu")
GPU = DEVICE.startswith("cuda")
# The interpreter tier (slow kernels) and the GPU tier (every constexpr combination compiles once) subsample the
# dtype x layout matrix; the GPU keeps realistic shapes.
SUBSAMPLE = QUICK or GPU
FLOATS = [T.float16, T.bfloat16, T.float32, T.float64]
QUICK_DTYPES = [T.float32, T.float16, T.bfloat16, T.float64, T.int32, T.uint8, T.bool_, T.int64]

SPECIAL = {
    T.float16: [0.0, -0.0, np.inf, -np.inf, np.nan, 6e-8, -3e-6, 1.0, -1.0, 0.5, -2.5, 3.0, 1000.0],
    T.bfloat16: [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-39, -5e-40, 1.0, -1.0, 0.5, -2.5, 3.0, 1000.0],
    T.float32: [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -2e-40, 1.0, -1.0, 0.5, -2.5, 3.0, 1000.0],
    T.float64: [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -1e-310, 1.0, -1.0, 0.5, -2.5, 3.0, 1000.0],
}


def records(family: str) -> list:
    return [r for r in registry.all_ops() if r.family == family]


def test_dtypes(rec) -> list:
    ds = [d for d in T.DTYPES if d in rec.extra["dtypes"]]
    if SUBSAMPLE:
        return [d for d in QUICK_DTYPES if d in ds][:4]
    return ds


# ---------------------------------------------------------------------------------------------------------
# Values and layouts
# ---------------------------------------------------------------------------------------------------------
def values(domain: str, dt, shape, rng) -> np.ndarray:
    """Host values of ``dt`` (exactly what the tensor holds)."""
    n = int(np.prod(shape)) if shape else 1
    if dt is T.bool_:
        v = rng.random(n) < (0.9 if domain == "sparse" else 0.5)
        return v.reshape(shape)
    if dt.kind == T.KIND_FLOAT:
        if domain == "near_one":
            v = rng.uniform(0.9, 1.1, n)
        else:
            v = rng.standard_normal(n)
        if domain == "sparse":
            v = np.where(rng.random(n) < 0.15, 0.0, v)
        return cast_array(v.reshape(shape), T.float64, dt)
    info = np.iinfo(dt.numpy)
    lo, hi = max(int(info.min), -6), min(int(info.max), 12)
    if domain == "near_one":
        v = rng.choice([1, 1, 1, 2] if dt.kind == T.KIND_UINT else [1, 1, -1, 2], n)
    else:
        v = rng.integers(lo, hi, n)
    if domain == "sparse":
        v = np.where(rng.random(n) < 0.15, 0, v)
    return cast_array(np.asarray(v, dtype=np.int64).reshape(shape), T.int64, dt)


def special_values(dt, shape, rng, domain: str = "normal") -> np.ndarray:
    """Random data with special values mixed in. Products (``domain == "near_one"``) draw only +-0, +-inf, NaN
    and small exact values: a float32 product underflowing to 0 before meeting an inf is NaN where float64 gives
    inf, a difference of accumulation range, not of the op."""
    pool = np.array(SPECIAL[dt] if domain != "near_one" else [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 2.0],
                    dtype=np.float64)
    n = int(np.prod(shape)) if shape else 1
    base = rng.uniform(0.9, 1.1, n) if domain == "near_one" else rng.standard_normal(n)
    v = np.where(rng.random(n) < 0.5, rng.choice(pool, n), base)
    return cast_array(v.reshape(shape), T.float64, dt)


def make(host: np.ndarray, layout: str, device):
    """A tensor on ``device`` whose logical values are ``host``, laid out as ``layout``."""
    if layout == "transposed" and host.ndim == 2:
        return nbx.from_numpy(np.ascontiguousarray(host.T)).to(device).t()
    if layout == "sliced" and host.ndim == 2:
        big = np.zeros((host.shape[0] + 2, 2 * host.shape[1] + 1), dtype=host.dtype)
        big[1:1 + host.shape[0], 1:1 + 2 * host.shape[1]:2] = host
        return nbx.from_numpy(big).to(device)[1:1 + host.shape[0], 1:1 + 2 * host.shape[1]:2]
    if layout == "expanded":
        return nbx.from_numpy(np.ascontiguousarray(host[:1])).to(device).expand(*host.shape)
    if layout == "permuted3d" and host.ndim == 3:
        return nbx.from_numpy(np.ascontiguousarray(host.transpose(1, 2, 0))).to(device).permute(2, 0, 1)
    return nbx.from_numpy(np.array(host, order="C")).to(device)  # (ascontiguousarray makes 0-d arrays 1-d)


def block(device, op: str = "reduce_rows", key: str = "BLOCK_R") -> int:
    # reductions' rules may bound 'state' (values kept per lane); 1 (sum, extrema) picks the light kinds' block,
    # and 2*block+1 is also BLOCK*k+1 for the heavier kinds' smaller power-of-two blocks
    facts = {"state": 1} if op.startswith("reduce_") else {}
    return launch_config(op, nbx.device(device), rows=64, cols=4096, **facts)[key]


def layouts() -> list[str]:
    base = ["contiguous", "transposed", "sliced", "expanded", "permuted3d", "zero_rows", "zero_reduced", "scalar0d",
            "block_k1", "long1d"]
    if not QUICK and not GPU:
        base.append("odd_big")
    return base


def ndim_for(layout: str) -> int:
    """The rank of ``shape_for(layout, ...)`` (no device query: safe at collection time)."""
    return {"scalar0d": 0, "long1d": 1, "permuted3d": 3, "contig3d": 3}.get(layout, 2)


def shape_for(layout: str, device, op: str = "reduce_rows", key: str = "BLOCK_R"):
    small = QUICK
    if layout == "zero_rows":
        return (0, 5)
    if layout == "zero_reduced":
        return (4, 0)
    if layout == "scalar0d":
        return ()
    if layout == "permuted3d":
        return (3, 4, 5) if small else (5, 6, 7)
    if layout == "block_k1":
        return (3, block(device, op, key) * (1 if small else 2) + 1)
    if layout == "long1d":
        return (150,) if small else (40000 if not GPU else 1 << 22,)
    if layout == "odd_big":
        return (1823, 781)
    if layout == "expanded":
        return (4, 7)
    return (6, 5) if small else (13, 11)


# ---------------------------------------------------------------------------------------------------------
# Comparison
# ---------------------------------------------------------------------------------------------------------
def host(t) -> np.ndarray:
    return np.asarray(t.cpu().numpy()).copy()


def expected_as(r, dt) -> np.ndarray:
    """The oracle's result cast to the output dtype (the value a correctly rounded op returns)."""
    r = np.asarray(r)
    if r.dtype == object:
        r = r.astype(np.float64)
    return cast_array(r, T.from_numpy_dtype(r.dtype), dt)


def assert_close(actual: np.ndarray, exp: np.ndarray, dt, *, reduced: int = 1, what: str = "") -> None:
    """Compare by the tolerance table widened by ``reduced``; NaN == NaN; infinities equal; integers exact."""
    assert actual.shape == exp.shape, (what, actual.shape, exp.shape)
    if dt.kind != T.KIND_FLOAT:
        bad = actual != exp
        assert not bad.any(), f"{what}: {bad.sum()} mismatches, e.g. got {actual[bad][:5]} expected {exp[bad][:5]}"
        return
    a = cast_array(actual, dt, T.float64)
    e = cast_array(exp, dt, T.float64)
    tol = tolerance(dt, reduced=max(int(reduced), 1))
    nan_ok = np.isnan(a) == np.isnan(e)
    inf_ok = np.where(np.isinf(e) | np.isinf(a), a == e, True)
    with np.errstate(all="ignore"):
        close = np.where(np.isnan(e) | np.isinf(e) | np.isinf(a), True,
                         np.abs(a - e) <= tol.atol + tol.rtol * np.abs(e))
    ok = nan_ok & inf_ok & close
    if not ok.all():
        idx = np.flatnonzero(~ok.reshape(-1))[:6]
        raise AssertionError(f"{what}: {(~ok).sum()} of {ok.size} elements differ; got {a.reshape(-1)[idx]} "
                             f"expected {e.reshape(-1)[idx]} (dtype {dt.name}, rtol {tol.rtol:.3g}, "
                             f"atol {tol.atol:.3g}, reduced {reduced})")


def materialize(v, device):
    """Error-case arguments: builders (``dev -> tensor``) are called, tuples materialised element-wise."""
    if callable(v) and not isinstance(v, type):
        return v(nbx.device(device))
    if isinstance(v, tuple):
        return tuple(materialize(e, device) for e in v)
    return v


def error_cases(family: str) -> list:
    return [(r, e) for r in records(family) for e in r.extra.get("errors", [])]


# ---------------------------------------------------------------------------------------------------------
# Ahead-of-time compilation for the H200 (sm90) on a machine without a GPU
# ---------------------------------------------------------------------------------------------------------
def aot_skip_reason() -> str | None:
    """Why kernels cannot be compiled ahead of time here (None when they can): the interpreter tier replaces
    ``@jit`` functions by interpreted ones; the GPU tier compiles them for real anyway."""
    if os.environ.get("NBX_TRITON_INTERPRET", "0") == "1" or os.environ.get("TRITON_INTERPRET", "0") == "1":
        return "interpreter tier: kernels are interpreted, not compiled"
    if GPU:
        return "GPU tier: the kernels are compiled and run by the other tests"
    try:
        import triton  # noqa: F401
        from triton.backends.compiler import GPUTarget  # noqa: F401
    except ImportError:
        return "Triton is not installed"
    return None


def nbx_dtype(tl_dtype):
    """The table row of a Triton dtype (``tl.float32`` -> ``nbx.float32``)."""
    from nbxtensor.ops.triton_helpers import TL_DTYPES
    return T.dtype_from({v: k for k, v in TL_DTYPES.items()}[tl_dtype])


def _with_defaults(fn, types: dict, constexprs: dict) -> dict:
    """``constexprs`` plus the defaults of ``fn``'s parameters given in neither dict (the kernels' variant keys,
    off by default), without the keys ``fn`` does not take (a dict shared by the rows and cols kernels)."""
    out = {p.name: p.default for p in fn.params if p.has_default and p.name not in types}
    out.update({k: v for k, v in constexprs.items() if k in fn.arg_names})
    return out


def compile_sm90(fn, types: dict, constexprs: dict, num_warps: int = 4):
    """Compile ``@jit`` kernel ``fn`` for sm90 down to a cubin (Triton's LLVM and the bundled ptxas; no GPU
    needed): ``types`` maps every non-constexpr argument to Triton's signature type (``"*bf16"``, ``"i64"``)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    constexprs = _with_defaults(fn, types, constexprs)
    sig = {name: ("constexpr" if name in constexprs else types[name]) for name in fn.arg_names}
    k = triton.compile(ASTSource(fn=fn, signature=sig, constexprs=constexprs), target=GPUTarget("cuda", 90, 32),
                       options={"num_warps": num_warps, "enable_reflect_ftz": False})
    assert k.asm.get("cubin"), "no cubin produced"
    return k


def compile_sm90_jit(fn, kind, pre, fin, xt, acc, loadt, values: dict, extra: dict, num_warps: int):
    """A reduction kernel (``_reduce_rows_kernel``/``_reduce_cols_kernel``) of state ``kind`` compiled for sm90
    as Triton's JIT specializes a call at run time: pointers 16-byte aligned, int arguments equal to 1 constants
    and those divisible by 16 marked so (``values``: their run-time values), so that contiguous loads vectorize.
    ``extra``: constexprs over the plain loop (tile, loop settings, variant keys)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from nbxtensor.ops import reduction as R
    ident, ident2 = R._identities(kind, nbx_dtype(acc))
    accs = {"fp32": "fp32", "int32": "i32", "int64": "i64", "fp64": "fp64"}[str(acc).replace("float32", "fp32")
                                                                             .replace("float64", "fp64")]
    ws = ("*" + accs, "*i64" if kind in (R.K_ARGMAX, R.K_ARGMIN) else "*" + accs, "*" + accs)
    y2 = "*i64" if kind in (R.K_ARGMAX, R.K_ARGMIN) else ("*bf16" if xt == "*bf16" else "*i1")
    types = {"x_ptr": xt, "x1_ptr": xt, "x2_ptr": xt, "y_ptr": "*bf16" if xt == "*bf16" else "*i1", "y2_ptr": y2,
             "w0_ptr": ws[0], "w1_ptr": ws[1], "w2_ptr": ws[2], "locks_ptr": "*i32"}
    consts = dict(KIND=kind, PRE=pre, FIN=fin, STAGE=0, HAS_Y=True, HAS_Y2=kind in (R.K_ARGMAX, R.K_MINMAX,
                                                                                  R.K_WELFORD),
                  LOADT=loadt, ACC=acc, IDENT=ident, IDENT2=ident2, LOOP_STAGES=None, EVICT="", OTHER=None,
                  UNROLL=1, INTERLEAVE=False, EVEN=False, VAR_SHIFT=False, LSE_EX2=False, ARG_FAST=False)
    consts.update(extra)
    consts = _with_defaults(fn, types, consts)
    sig, attrs = {}, {}
    for i, n in enumerate(fn.arg_names):
        if n in consts:
            sig[n] = "constexpr"
        elif n in types:
            sig[n] = types[n]
            attrs[(i,)] = [["tt.divisibility", 16]]
        else:
            v = values.get(n, 3)
            sig[n] = "fp32" if n in ("p", "corr") else ("i64" if n.startswith("s") or n == "n_total" else "i32")
            if isinstance(v, int) and v == 1:
                sig[n], consts[n] = "constexpr", 1
            elif isinstance(v, int) and v % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps,
                                                                          "enable_reflect_ftz": False})


def compile_sm90_arg_row(kind, block_m: int, block_n: int, num_warps: int, xt: str = "*bf16"):
    """``_arg_row_kernel`` (config key ``ARG_ROW``) compiled for sm90 as the JIT specializes a call on contiguous
    rows (``sxr`` 1, pointers and the row stride 16-byte aligned), float32 compares, unmasked (``EVEN``)."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from nbxtensor.ops import reduction as R
    fn = R._arg_row_kernel
    ident = float("-inf") if kind == R.K_ARGMAX else float("inf")
    consts = dict(KIND=kind, LOADT=tl.float32, ACC=tl.float32, IDENT=ident, HAS_Y=True, HAS_Y2=True, BLOCK_M=block_m,
                  BLOCK_N=block_n, EVICT="", OTHER=ident, EVEN=True, sxr=1)
    types = dict(x_ptr=xt, y_ptr=xt, y2_ptr="*i64", O="i32", R="i32", sxo="i64", syo="i64", sy2o="i64")
    sig = {n: ("constexpr" if n in consts else types[n]) for n in fn.arg_names}
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(fn.arg_names) if n in ("x_ptr", "y_ptr", "y2_ptr",
                                                                                         "R", "sxo")}
    src = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps,
                                                                          "enable_reflect_ftz": False})


def main_loop(sass: str) -> list:
    """The instructions (opcode and operands) of the longest backward branch of ``sass`` (the main loop)."""
    import re
    ins, labels = [], {}
    for line in sass.splitlines():
        if "\t" in line:
            ins.append(line.split("\t", 1)[1].strip())
        else:
            m = re.match(r"^(\w+):\s*$", line.strip())
            if m:
                labels[m.group(1)] = len(ins)
    best = None
    for i, line in enumerate(ins):
        m = re.search(r"BRA\s+(\w+)", line)
        if m and m.group(1) in labels and labels[m.group(1)] <= i and \
                (best is None or i - labels[m.group(1)] > best[1] - best[0]):
            best = (labels[m.group(1)], i)
    return ins[best[0]:best[1] + 1] if best else []
