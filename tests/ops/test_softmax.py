"""softmax and log_softmax (src/nbxtensor/ops/softmax.py): the records against their float64 oracles over dtypes x
layouts x dims (one-tile rows and the looped path for rows longer than the arch's tile), special values, error
inputs from the records, the all -inf row, and the nn.functional signature.
"""

from __future__ import annotations

import warnings
import zlib

import numpy as np
import pytest

import nbxtensor as nbx
import reduce_harness as H
from nbxtensor.dtypes import table as T
from nbxtensor.ops import registry

FAMILY = "softmax"
RECS = H.records(FAMILY)
LAYOUTS = [la for la in H.layouts() if la not in ("zero_reduced",)] + ["contig3d", "long_rows"]


def _shape(layout, device):
    if layout == "long_rows":  # rows longer than one tile: the looped (online) path
        return (3, H.block(device, "softmax_rows", "BLOCK_N") * (2 if H.QUICK else 3) + 5)
    return H.shape_for("permuted3d" if layout == "contig3d" else layout, device, "softmax_rows", "BLOCK_N")


def _dims(ndim: int) -> list:
    return [0] if ndim == 0 else ([0, -1] + ([1] if ndim == 3 else []))


def _cases():
    out = []
    for rec in RECS:
        dts = H.test_dtypes(rec)
        k = 0
        for dt in dts:
            for layout in LAYOUTS:
                ds = _dims(H.ndim_for(layout))
                out.append((rec.name, dt.name, layout, ds[k % len(ds)], {}))
                k += 1
        for layout in ("contiguous", "contig3d", "transposed", "long_rows"):
            for d in _dims(H.ndim_for(layout)):
                out.append((rec.name, "float32", layout, d, {}))
        out.append((rec.name, "float16", "contiguous", -1, {"dtype": T.float32}))
        out.append((rec.name, "float32", "long_rows", 0, {"dtype": T.float64}))
    return out


CASES = _cases()


def _seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def _check(rec, host_in, x, kw, what, fn=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = (fn or rec.extra["function"])(x, **kw)
        exp = rec.oracle(host_in, **kw)
    k = host_in.shape[kw["dim"]] if host_in.ndim else 1
    H.assert_close(H.host(res), H.expected_as(exp, res.dtype), res.dtype, reduced=k, what=what)


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}-{c[2]}-dim{c[3]}" + (f"-{c[4]}" if c[4] else "")
                                             for c in CASES])
def test_against_oracle(case, device):
    name, dtn, layout, dim, kw = case
    rec = registry.get(name)
    dt = T.dtype_from(dtn)
    shape = _shape(layout, device)
    host_in = H.values("normal", dt, shape, np.random.default_rng(_seed(case)))
    if layout == "expanded":
        host_in = np.broadcast_to(host_in[:1], shape)
    x = H.make(host_in, "contiguous" if layout in ("contig3d", "long_rows") else layout, device)
    _check(rec, host_in, x, {"dim": dim, **kw}, f"{name}[{dtn}, {layout}, dim={dim}, {kw}]")


SPECIAL = [(r.name, d.name, layout, dim) for r in RECS for d in H.FLOATS
           if not H.SUBSAMPLE or d in (T.float32, T.bfloat16) for layout in ("contiguous", "long_rows") for dim in (0, 1)]


@pytest.mark.parametrize("case", SPECIAL, ids=[f"{c[0]}-{c[1]}-{c[2]}-dim{c[3]}" for c in SPECIAL])
def test_special_values(case, device):
    name, dtn, layout, dim = case
    rec = registry.get(name)
    dt = T.dtype_from(dtn)
    shape = (5, 9) if layout == "contiguous" else _shape(layout, device)
    rng = np.random.default_rng(_seed(case))
    host_in = H.special_values(dt, shape, rng)
    # sparser specials on some rows, so that not every row is NaN
    host_in = np.where(rng.random(shape) < 0.7, H.values("normal", dt, shape, rng), host_in)
    _check(rec, host_in, H.make(host_in, "contiguous", device), {"dim": dim}, f"{name}[{dtn}, special, {layout}]")


ERRORS = H.error_cases(FAMILY)


@pytest.mark.parametrize("rec,err", ERRORS, ids=[f"{r.name}-{e[0]}" for r, e in ERRORS])
def test_error_inputs(rec, err, device):
    label, args, kwargs, exc, match = err[:5]
    with pytest.raises(exc, match=match):
        rec.extra["function"](*[H.materialize(v, device) for v in args],
                              **{k: H.materialize(v, device) for k, v in kwargs.items()})


@pytest.mark.parametrize("n", [3, 40, 1000] + ([] if H.QUICK else [20000]))  # 20000: the GPU's looped path
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_all_minus_inf_row_is_nan(name, n, device):
    x = nbx.full((2, n), float("-inf"), device=device)
    x[1, n // 2] = 0.0
    y = H.host(getattr(nbx, name)(x, 1))
    assert np.isnan(y[0]).all()
    assert y[1, n // 2] == (1.0 if name == "softmax" else 0.0)
    assert (y[1, : n // 2] == (0.0 if name == "softmax" else -np.inf)).all()


def test_wide_vocabulary_row(device):
    n = 151936 if not H.QUICK else H.block(device, "softmax_rows", "BLOCK_N") * 7 + 3
    a = np.random.default_rng(0).standard_normal((2, n)).astype(np.float32) * 4
    y = H.host(nbx.softmax(nbx.from_numpy(a).to(device), -1))
    e = np.exp(a.astype(np.float64) - a.max(1, keepdims=True))
    H.assert_close(y, (e / e.sum(1, keepdims=True)).astype(np.float32), T.float32, reduced=n, what="vocab row")


def test_looped_rows_special_values_per_lane(device):
    """The looped path's per-lane online (max, sum) with special values at chosen positions: first and last
    element, one lane across steps, a new maximum after a -inf run, a lone +inf (NaN row, as PyTorch), NaN, a
    row of -inf but one finite value in its last tile, and a range where every other exponential underflows."""
    tile = H.block(device, "softmax_rows", "BLOCK_N")
    n = tile * 3 + 5
    rng = np.random.default_rng(11)
    a = rng.standard_normal((8, n)).astype(np.float32)
    a[0, 0], a[0, n - 1] = -np.inf, -np.inf
    a[1, :tile + 2] = -np.inf  # lanes start at -inf, then see finite values
    a[2, tile + 3] = np.inf
    a[3, 2 * tile + 1] = np.nan
    a[4, :] = -np.inf
    a[4, n - 2] = 3.0
    a[5, ::2] = -1000.0
    a[5, 1::2] = 1000.0
    a[6, :] = 7.0  # uniform: 1 / n everywhere
    a[7, tile - 1] = 80.0  # a dominant maximum after the first step
    x = nbx.from_numpy(a).to(device)
    for name in ("softmax", "log_softmax"):
        rec = registry.get(name)
        _check(rec, a, x, {"dim": 1}, f"{name}[per-lane specials]")
        _check(rec, np.ascontiguousarray(a.T), nbx.from_numpy(np.ascontiguousarray(a.T)).to(device), {"dim": 0},
               f"{name}[per-lane specials, strided dim]")


# The settings benchmarks/sweep_reduce.py tries on the H200, as config overrides: results must not change. A
# persistent grid of programs_per_sm programs per SM (4 SMs under the interpreter) loops over the row blocks.
_SWEEP_SETTINGS = [
    ("softmax_rows", dict(programs_per_sm=1, LOOP_STAGES=3, EVICT="evict_last", EVICT2="evict_first")),
    ("softmax_rows", dict(BLOCK_M=1, programs_per_sm=2, RCP=True)),
    ("softmax_rows", dict(RCP=False, LOOP_STAGES=2)),
    ("softmax_cols", dict(LOOP_STAGES=2, EVICT="evict_first", RCP=True)),
]


@pytest.mark.parametrize("op,settings", _SWEEP_SETTINGS, ids=[f"{o}-{i}" for i, (o, _) in enumerate(_SWEEP_SETTINGS)])
def test_sweep_settings_keep_results(op, settings, device):
    from nbxtensor.runtime.configs import override
    tile = H.block(device, "softmax_rows", "BLOCK_N")
    rng = np.random.default_rng(5)
    for n in (tile - 3, tile * 2 + 3):  # one tile, looped
        a = rng.standard_normal((9, n)).astype(np.float32)
        a[2, 1] = -np.inf
        a[4, :] = -np.inf
        if op == "softmax_cols":
            a = np.ascontiguousarray(a.T)
        dim = 1 if op == "softmax_rows" else 0
        with override(op, **settings):
            for name in ("softmax", "log_softmax"):
                _check(registry.get(name), a, nbx.from_numpy(a).to(device), {"dim": dim}, f"{name}[{settings}, {n}]")


_ONE_TILE_VARIANTS = [dict(EVEN=True), dict(EXP_OUT=1), dict(EVEN=True, EXP_OUT=2, RCP=True),
                      dict(EVEN=True, EXP_OUT=2, RCP=True, programs_per_sm=1, LOOP_STAGES=2)]


@pytest.mark.parametrize("settings", _ONE_TILE_VARIANTS, ids=[str(i) for i in range(len(_ONE_TILE_VARIANTS))])
@pytest.mark.parametrize("dtn", ["float32", "bfloat16"])
def test_one_tile_variants_keep_results(settings, dtn, device):
    """benchmarks/sweep_rows.py's one-tile settings (unmasked rows, the ftz and folded exponentials, the
    reciprocal) on rows of exactly one tile: specials (an all -inf row, +inf, NaN), logits near 1e4 (the folded
    form's error grows with |max|: float32 results fall back to the exact shift) and a row where exponentials
    underflow."""
    from nbxtensor.runtime.configs import override
    tile = H.block(device, "softmax_rows", "BLOCK_N")
    dt = T.dtype_from(dtn)
    rng = np.random.default_rng(13)
    a = rng.standard_normal((12, tile)).astype(np.float32) * 3
    a[8] += 1.0e6   # logits where the fold's rounding of m * log2(e) is up to 2**-4: its row factor must cancel
    a[9] += 2.0e9   # past 2**30 (the fold's k = 1)
    a[1, :] = -np.inf
    a[2, 1] = np.inf
    a[3, 2] = np.nan
    a[4] += 1.0e4
    a[5, ::2] = -200.0
    a[6, ::3] = 3.0e38    # maxima beyond 3.4e38 / log2(e): the fold's m * log2(e) overflowed (NaN rows)
    a[7, :] = -3.0e38
    a[7, 1::2] = -2.9e38
    a = a.astype(dt.numpy)  # the values the tensor holds
    x = nbx.from_numpy(a).to(device)
    with override("softmax_rows", **settings):
        for name in ("softmax", "log_softmax"):
            _check(registry.get(name), a, x, {"dim": 1}, f"{name}[{dtn}, {settings}]")


_LOOPED_VARIANTS = [dict(CHUNK=8), dict(CHUNK=4, EXP_OUT2=2), dict(CHUNK=8, EXP_OUT2=1, BLOCK_M=2),
                    dict(CHUNK=2, EXP_OUT2=2, LOOP_STAGES=2, programs_per_sm=1), dict(EXP_OUT2=2)]


@pytest.mark.parametrize("settings", _LOOPED_VARIANTS, ids=[str(i) for i in range(len(_LOOPED_VARIANTS))])
@pytest.mark.parametrize("dtn", ["float32", "bfloat16"])
def test_looped_chunk_variants_keep_results(settings, dtn, device):
    """benchmarks/sweep_rows.py's looped-path settings (pass 1 per chunk with whole tiles unmasked, pass 2's ftz
    and folded exponentials) on rows longer than a tile, with and without a tail and with 9 rows (BLOCK_M 2 does
    not divide them: the masked loop): an all -inf row (NaN), +inf (NaN), NaN, a row of -inf but one finite
    value in the tail, offsets 40000 + [0, 1, 2, 3] and 1e4 (the folded form's error grows with |max|: float32
    results keep the exact shift), a new maximum in every chunk, underflowing exponentials."""
    from nbxtensor.runtime.configs import override
    tile = H.block(device, "softmax_rows", "BLOCK_N")
    dt = T.dtype_from(dtn)
    rng = np.random.default_rng(17)
    for n in (tile * 3, tile * 2 + 5):
        a = rng.standard_normal((9, n)).astype(np.float32) * 3
        a[1, :] = -np.inf
        a[2, tile + 1] = np.inf
        a[3, 2] = np.nan
        a[4, :] = -np.inf
        a[4, n - 1] = 2.0
        a[5, :4] = [40000, 40001, 40002, 40003]
        a[5, 4:] = 39990.0
        a[6] += 1.0e4
        a[7] = np.arange(n, dtype=np.float32) / 8  # increasing: every chunk brings a new maximum
        a[8, ::2] = -200.0
        a[0, tile + 3::5] = 3.0e38  # maxima beyond 3.4e38 / log2(e) (the fold's product overflowed: NaN rows)
        a[6, tile + 2] += 3.0e5     # chunk maxima of 1e4 and 3e5: each chunk's fold factor must come out of its sum
        a = a.astype(dt.numpy)  # the values the tensor holds
        x = nbx.from_numpy(a).to(device)
        with override("softmax_rows", **settings):
            for name in ("softmax", "log_softmax"):
                y = H.host(getattr(nbx, name)(x, 1))
                _check(registry.get(name), a, x, {"dim": 1}, f"{name}[{dtn}, {settings}, {n}]")
                assert np.isnan(y[1]).all() and np.isnan(y[2]).all() and np.isnan(y[3]).all()


def test_looped_meta_takes_chunk_and_fold_only_where_they_apply():
    from nbxtensor.ops.softmax import _looped_meta
    cfg = dict(BLOCK_M=2, BLOCK_N=16, CHUNK=8, EXP_OUT2=2)
    assert _looped_meta(cfg, False, 8, T.bfloat16) == dict(CHUNK=8, EXP_OUT2=2, FULL=True)
    assert _looped_meta(cfg, False, 7, T.bfloat16)["FULL"] is False       # BLOCK_M does not divide the rows
    assert _looped_meta(cfg, False, 8, T.float32)["EXP_OUT2"] == 1        # the fold: 16-bit results only
    assert _looped_meta(cfg, True, 8, T.bfloat16) == dict(CHUNK=0, EXP_OUT2=0, FULL=False)  # one tile
    assert _looped_meta(dict(BLOCK_M=1, BLOCK_N=16), False, 8, T.bfloat16) == dict(CHUNK=0, EXP_OUT2=0, FULL=False)
    for bad in (dict(cfg, CHUNK=3), dict(cfg, CHUNK=32)):
        with pytest.raises(ValueError, match="CHUNK"):
            _looped_meta(bad, False, 8, T.bfloat16)
    with pytest.raises(ValueError, match="EXP_OUT2"):
        _looped_meta(dict(cfg, EXP_OUT2=3), False, 8, T.bfloat16)


def test_one_tile_meta_takes_even_and_fold_only_where_they_apply():
    from nbxtensor.ops.softmax import _one_tile_meta
    cfg = dict(BLOCK_M=2, BLOCK_N=16, EVEN=True, EXP_OUT=2)
    assert _one_tile_meta(cfg, True, 8, 16, T.bfloat16) == dict(EVEN=True, EXP_OUT=2)
    assert _one_tile_meta(cfg, True, 7, 16, T.bfloat16)["EVEN"] is False     # BLOCK_M does not divide the rows
    assert _one_tile_meta(cfg, True, 8, 15, T.float16)["EVEN"] is False      # a masked tail
    assert _one_tile_meta(cfg, True, 8, 16, T.float32)["EXP_OUT"] == 1       # the fold: 16-bit results only
    assert _one_tile_meta(cfg, False, 8, 64, T.bfloat16) == dict(EVEN=False, EXP_OUT=0)  # looped rows
    assert _one_tile_meta(dict(BLOCK_M=1, BLOCK_N=16), True, 8, 16, T.bfloat16) == dict(EVEN=False, EXP_OUT=0)
    with pytest.raises(ValueError, match="EXP_OUT"):
        _one_tile_meta(dict(cfg, EXP_OUT=3), True, 8, 16, T.bfloat16)


def test_functional_signature_and_methods(device):
    F = nbx.nn.functional
    x = nbx.tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]], device=device)
    with pytest.warns(UserWarning, match="Implicit dimension"):
        y = F.softmax(x)  # legacy implicit dim: 1 for 2-d input
    np.testing.assert_allclose(H.host(y).sum(1), [1.0, 1.0], rtol=1e-6)
    np.testing.assert_allclose(H.host(F.softmax(x, 0, 3, nbx.float64)).sum(0), [1.0] * 3)
    assert F.log_softmax(x, dim=1, dtype=nbx.float64).dtype is nbx.float64
    assert x.softmax(1).dtype is nbx.float32 and x.log_softmax(dim=0).shape == x.shape
    with pytest.raises(TypeError):
        nbx.softmax(x, None)
    assert nbx.softmax(nbx.tensor([1, 2], device=device), 0, dtype=nbx.float32).dtype is nbx.float32
    assert tuple(nbx.softmax(nbx.ones(0, 3, device=device), 1).shape) == (0, 3)
    assert nbx.softmax(nbx.tensor(3.0, device=device), 0).item() == 1.0


def test_records_are_whole():
    for rec in RECS:
        assert rec.cpu and rec.triton and rec.oracle and rec.extra["errors"], rec.name
        c = rec.cost(nbx.zeros(4, 5, dtype=nbx.float16), 1)
        assert c.bytes_read == 40 and c.bytes_written == 40 and c.flops == 100


@pytest.mark.parametrize("one_tile", [True, False])
@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("xt", ["*bf16", "*fp64"])
def test_kernels_compile_for_sm90(xt, log, one_tile):
    """The softmax kernels (one-tile and looped paths) compile for the H200 (sm90) here, without a GPU."""
    reason = H.aot_skip_reason()
    if reason:
        pytest.skip(reason)
    import triton.language as tl
    from nbxtensor.ops import softmax as SM
    types = {"x_ptr": xt, "y_ptr": xt, "O": "i32", "I": "i32", "N": "i32", "NBLK": "i32", "sxo": "i64", "sxn": "i64",
             "sxi": "i64", "syo": "i64", "syn": "i64", "syi": "i64"}
    f64 = xt == "*fp64"
    consts = dict(LOG=log, ONE_TILE=one_tile, ACC=tl.float64 if f64 else tl.float32, RCP=not one_tile,
                  LOOP_STAGES=None, EVICT="", EVICT2="", HW_CVT=True, FTZ=not f64,
                  LOWEST=float(np.finfo(np.float64 if f64 else np.float32).min))
    rows_only = dict(EVEN=False, EXP_OUT=0,  # the rows kernel's one-tile and looped settings (off: the table's)
                     CHUNK=0, EXP_OUT2=0, FULL=False)
    k = H.compile_sm90(SM._softmax_rows_kernel, types, dict(consts, **rows_only, BLOCK_M=1, BLOCK_N=8192,
                                                            ROW_STAGES=None), num_warps=16)
    if xt == "*bf16":  # HW_CVT: bfloat16 results by the hardware's round-to-nearest-even conversion
        assert "cvt.rn.bf16x2.f32" in k.asm["ptx"] or "cvt.rn.bf16.f32" in k.asm["ptx"]
    H.compile_sm90(SM._softmax_cols_kernel, types, dict(consts, BLOCK_N=32, BLOCK_I=128))
    # the sweep's settings: a persistent grid with a pipelined row loop (one tile) or pipelined column loops,
    # eviction policies, division instead of the reciprocal
    if xt != "*bf16":
        return
    if one_tile:  # sweep_rows.py's one-tile variant: unmasked, folded ftz exponential, reciprocal
        fast = H.compile_sm90(SM._softmax_rows_kernel, types, dict(consts, RCP=True, EVEN=True, EXP_OUT=2, BLOCK_M=1,
                                                                   CHUNK=0, EXP_OUT2=0, FULL=False,
                                                                   BLOCK_N=8192, ROW_STAGES=None), num_warps=8)
        ptx = fast.asm["ptx"]
        assert "ex2.approx.ftz.f32" in ptx and ptx.count("div.rn.f32") <= 2  # one reciprocal a row, not 32
    tuned = dict(consts, RCP=one_tile, LOOP_STAGES=3, EVICT="evict_last", EVICT2="evict_first")
    H.compile_sm90(SM._softmax_rows_kernel, types, dict(tuned, **rows_only, BLOCK_M=1, BLOCK_N=4096,
                                                        ROW_STAGES=3 if one_tile else None), num_warps=8)
    H.compile_sm90(SM._softmax_cols_kernel, types, dict(tuned, BLOCK_N=32, BLOCK_I=128))


def test_sm90_looped_chunk_cuts_the_loops():
    """sm_90, softmax bf16 rows of 151936 (BLOCK_N 4096, 8 warps, LOOP_STAGES 3, as the JIT specializes the call):
    CHUNK 8 with EXP_OUT2 2 (pass 1 per 16-byte chunk with whole tiles unmasked, folded exponentials) against the
    per-lane loop. Measured 2026-11-30: pass 1 219 -> 142 and pass 2 208 -> 142 SASS instructions per 16
    elements a thread, 80 -> 40 registers."""
    reason = H.aot_skip_reason()
    if reason:
        pytest.skip(reason)
    import triton.language as tl
    import sass_harness as S
    from nbxtensor.ops import softmax as SM
    n = 151936
    types = {"x_ptr": "*bf16", "y_ptr": "*bf16", "O": "i32", "N": "i32", "NBLK": "i32", "sxo": "i32", "syo": "i32"}
    base = dict(sxn=1, syn=1, LOG=False, ONE_TILE=False, RCP=True, ACC=tl.float32, BLOCK_M=1, BLOCK_N=4096,
                LOOP_STAGES=3, ROW_STAGES=None, EVICT="", EVICT2="", HW_CVT=True, FTZ=True,
                LOWEST=-3.4028234663852886e38, EVEN=False, EXP_OUT=0)
    vals = dict(O=2048, N=n, NBLK=2048, sxo=n, syo=n)
    got = {}
    for tag, extra in (("lanes", dict(CHUNK=0, EXP_OUT2=0, FULL=False)), ("chunk", dict(CHUNK=8, EXP_OUT2=2,
                                                                                          FULL=True))):
        k = S.compile_sm90_jit(SM._softmax_rows_kernel, types, dict(base, **extra), vals, num_warps=8)
        loops = [c for c in S.loops(k.asm["sass"]) if c["MUFU.EX2"] >= 8]
        p1 = [sum(c.values()) for c in loops if not any(o.startswith("STG") for o in c)]
        p2 = [sum(c.values()) for c in loops if any(o.startswith("STG") for o in c)]
        assert p1 and p2, (tag, loops)
        got[tag] = (p1[0], p2[0], S.registers(k))
    (l1, l2, lr), (c1, c2, cr) = got["lanes"], got["chunk"]
    assert c1 <= 0.75 * l1 and c2 <= 0.8 * l2 and cr <= 48, got
