"""Decode attention (one query token per sequence) over contiguous and paged KV caches, the append kernels and
PagedKVCache: against the float64 oracle, against prefill attention's last row, paged against contiguous, and
determinism (two runs byte-identical: the split-KV combine has a fixed order, no atomics).

Runs on the ``device`` fixture; ``NBX_TRITON_INTERPRET=1`` runs the Triton kernels on the cpu device (the
interpreter's table cuts the keys into several splits even for short caches, so the combine kernel runs);
``NBX_TEST_QUICK=1`` shrinks the matrix.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.nn.attention import PagedKVCache
from nbxtensor.ops import registry
from nbxtensor.ops.attention import attention_tolerance, sdpa_oracle
from nbxtensor.ops.decode_attention import decode_oracle, paged_decode_oracle, split_plan
from nbxtensor.runtime.configs import launch_config, override

from attention_harness import GPU, QUICK, check_close, dev, draw, host

F = nbx.nn.functional
DTYPES = [T.bfloat16, T.float32] if QUICK else [T.bfloat16, T.float16, T.float32, T.float64]


def _cfg(device, dt, E=64, ctx=64, batch_kv_heads=4):
    return launch_config("decode_attention", nbx.device(device), dtypes=(dt,), head_dim=max(16, E), ctx=ctx,
                         batch_kv_heads=batch_kv_heads)


def _lengths(device, dt, cap):
    bn = _cfg(device, dt)["BLOCK_N"]
    return [0, 1, bn + 1, cap]


def _mag(q, k, v, lens, scale=None):
    """P|V| per output element (the tolerance rule's magnitude), from the oracle with |v|."""
    return decode_oracle(q, k, np.abs(v.astype(np.float64)), lens, scale)


def _check(out, ref, mag, dt, E, what):
    tol = attention_tolerance(dt, E)
    check_close(out, ref, tol.rtol, tol.atol, mag, what=what)


def _paged_from(k: np.ndarray, v: np.ndarray, page: int, rng, extra_pages: int = 3):
    """Scatter contiguous caches ``[B, Hkv, cap, D]`` into pages in a random order; returns pages and table."""
    B, hkv, cap, E = k.shape
    nblk = -(-cap // page)
    total = B * nblk + extra_pages
    order = rng.permutation(total)[:B * nblk].reshape(B, nblk).astype(np.int32)
    kp = np.zeros((total, page, hkv, E), k.dtype)
    vp = np.zeros((total, page, hkv, v.shape[-1]), v.dtype)
    for b in range(B):
        for p in range(cap):
            kp[order[b, p // page], p % page] = k[b, :, p]
            vp[order[b, p // page], p % page] = v[b, :, p]
    return kp, vp, order


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("ratio", [1, 4, 8])
def test_decode_vs_oracle(dt, ratio, device):
    """GQA ratios 1/4/8 (8 query heads), per-sequence lengths 0 (gives 0), 1, BLOCK_N + 1 and the capacity."""
    rng = np.random.default_rng(ratio * 10 + dt.itemsize)
    Hq, E = 8, 64
    bn = _cfg(device, dt)["BLOCK_N"]
    cap = 3 * bn + 5
    lens = np.array(_lengths(device, dt, cap), np.int32)
    B = len(lens)
    q = draw(rng, (B, Hq, E), dt)
    k, v = draw(rng, (B, Hq // ratio, cap, E), dt), draw(rng, (B, Hq // ratio, cap, E), dt)
    out = F.decode_attention(dev(q, device), dev(k, device), dev(v, device), dev(lens, device))
    assert tuple(out.shape) == (B, Hq, E) and out.dtype == dt
    _check(out, decode_oracle(q, k, v, lens), _mag(q, k, v, lens), dt, E, f"decode {dt.name} ratio {ratio}")
    assert np.all(host(out)[0] == 0), "an empty sequence gives 0"


@pytest.mark.parametrize("E", [64, 80, 129] if QUICK else [32, 64, 80, 96, 127, 128, 129, 192, 256])
def test_decode_head_dims(E, device):
    rng = np.random.default_rng(E)
    dt = T.bfloat16
    cap = 40
    lens = np.array([40, 23], np.int32)
    q, k, v = draw(rng, (2, 4, E), dt), draw(rng, (2, 2, cap, E), dt), draw(rng, (2, 2, cap, E), dt)
    out = F.decode_attention(dev(q, device), dev(k, device), dev(v, device), dev(lens, device))
    _check(out, decode_oracle(q, k, v, lens), _mag(q, k, v, lens), dt, E, f"decode E={E}")


@pytest.mark.parametrize("ratio", [1, 8])
def test_decode_equals_prefill_last_row(ratio, device):
    """Decoding the last token over the cache of a prefill equals the prefill's last row (causal)."""
    dt = T.bfloat16
    rng = np.random.default_rng(21 + ratio)
    Hq, E, B = 8, 64, 2
    L = 2 * _cfg(device, dt)["BLOCK_N"] + 1
    q = draw(rng, (B, Hq, L, E), dt)
    k, v = draw(rng, (B, Hq // ratio, L, E), dt), draw(rng, (B, Hq // ratio, L, E), dt)
    pre = host(F.scaled_dot_product_attention(dev(q, device), dev(k, device), dev(v, device), is_causal=True,
                                              enable_gqa=ratio > 1))[:, :, -1]
    lens = np.full(B, L, np.int32)
    dec = F.decode_attention(dev(np.ascontiguousarray(q[:, :, -1]), device), dev(k, device), dev(v, device),
                             dev(lens, device))
    ref = sdpa_oracle(q, k, v, None, True, None, ratio > 1)[:, :, -1]
    mag = _mag(q[:, :, -1], k, v, lens)
    _check(dec, ref, mag, dt, E, "decode vs oracle")
    tol = attention_tolerance(dt, E)
    check_close(dec, pre, 2 * tol.rtol, 2 * tol.atol, mag, what="decode vs prefill's last row")


@pytest.mark.parametrize("page", [16, 32])
def test_paged_equals_contiguous(page, device):
    """The paged cache (pages in a random order) gives the contiguous cache's result, and the oracle's."""
    dt = T.float32
    rng = np.random.default_rng(page)
    B, Hq, hkv, E = 3, 8, 2, 64
    cap = 2 * page + 7
    k, v = draw(rng, (B, hkv, cap, E), dt), draw(rng, (B, hkv, cap, E), dt)
    q = draw(rng, (B, Hq, E), dt)
    lens = np.array([cap, page, 5], np.int32)
    kp, vp, bt = _paged_from(k, v, page, rng)
    cont = F.decode_attention(dev(q, device), dev(k, device), dev(v, device), dev(lens, device))
    paged = F.paged_decode_attention(dev(q, device), dev(kp, device), dev(vp, device), dev(bt, device),
                                     dev(lens, device))
    ref = paged_decode_oracle(q, kp, vp, bt, lens)
    np.testing.assert_allclose(ref, decode_oracle(q, k, v, lens), rtol=1e-12, atol=1e-12)
    _check(paged, ref, _mag(q, k, v, lens), dt, E, f"paged {page}")
    np.testing.assert_allclose(host(paged), host(cont), rtol=2e-6, atol=2e-6)


def test_deterministic(device):
    """Two runs of the split-KV kernels are byte-identical (contiguous and paged), with several splits."""
    dt = T.bfloat16
    rng = np.random.default_rng(3)
    cfg = _cfg(device, dt)
    B, Hq, hkv, E = 2, 8, 2, 64
    cap = 4 * cfg["min_chunk"] + 3
    splits, _ = split_plan(B * hkv, cap, cfg)
    assert splits > 1, "the test must exercise the combine kernel"
    q, k, v = draw(rng, (B, Hq, E), dt), draw(rng, (B, hkv, cap, E), dt), draw(rng, (B, hkv, cap, E), dt)
    lens = np.array([cap, cap // 2], np.int32)
    args = [dev(a, device) for a in (q, k, v, lens)]
    a = F.decode_attention(*args).cpu().numpy()
    b = F.decode_attention(*args).cpu().numpy()
    assert a.tobytes() == b.tobytes()
    kp, vp, bt = _paged_from(k, v, 16, rng)
    pargs = [dev(x, device) for x in (q, kp, vp, bt, lens)]
    c = F.paged_decode_attention(*pargs).cpu().numpy()
    d = F.paged_decode_attention(*pargs).cpu().numpy()
    assert c.tobytes() == d.tobytes()


def test_split_plan():
    cfg = {"BLOCK_N": 64, "target_programs": 1056, "max_splits": 128, "min_chunk": 256}
    s, c = split_plan(4 * 8, 32768, cfg)
    assert c % 64 == 0 and s * c >= 32768 and (s - 1) * c < 32768 and s * 32 >= 1000
    assert split_plan(32 * 8, 4096, cfg)[0] <= 16
    assert split_plan(8, 100, cfg) == (1, 256)  # one chunk of at least min_chunk keys
    assert split_plan(8, 0, cfg) == (1, 256)
    s, c = split_plan(1, 32768, {**cfg, "min_chunk": 100})  # min_chunk rounds up to BLOCK_N
    assert c >= 128 and c % 64 == 0 and s <= 128
    # programs_per_sm needs a CUDA device's SM count; elsewhere target_programs holds
    assert split_plan(4, 32768, {**cfg, "programs_per_sm": 1}) == split_plan(4, 32768, cfg)


def _kernels_run(device) -> bool:
    """The Triton kernels run on ``device``: a GPU, or the cpu device under the interpreter tier."""
    from nbxtensor.runtime.launcher import interpreting
    return device != "cpu" or interpreting()


@pytest.fixture
def launches(monkeypatch):
    """The (kernel name, grid, meta) of every launch decode_attention makes, the kernels still running."""
    from nbxtensor.ops import decode_attention as D
    got = []
    real = D.launch

    real_tail = D.launch_tail

    def spy(kernel, grid, *args, **meta):
        got.append((kernel.__name__, grid, meta))
        return real(kernel, grid, *args, **meta)

    def spy_tail(kernel, grid, args, tail):  # the CUDA path's planned launches
        got.append((kernel.__name__, grid, tail.meta))
        return real_tail(kernel, grid, args, tail)
    monkeypatch.setattr(D, "launch", spy)
    monkeypatch.setattr(D, "launch_tail", spy_tail)
    return got


# Many splits for short caches: the combine loops over its splits two at a time and writes 16 columns per program.
MANY_SPLITS = dict(BLOCK_N=16, target_programs=4096, max_splits=8, min_chunk=16, BLOCK_S=2, combine_dv=16)
# The table's own fused/lazy settings off (the sm90 table folds and sums lazily), for tests that set them one by one
TABLE_OFF = dict(lazy_rowsum=False, fuse_combine=0, fuse_fold=0, fuse_group=0)

def _small_bf16_cache(seed: int, lens: list, paged: bool, device):
    """The fused/fold tests' case: bf16 q (4, 8, 64), k (4, 2, 70, 64), v (4, 2, 70, 48) drawn from ``seed``,
    sequence lengths ``lens``; returns ``(q, k, v, lens, args, fn)`` with the call's device arguments and the
    contiguous or paged (pages of 16) decode-attention function."""
    dt = T.bfloat16
    rng = np.random.default_rng(seed)
    B, Hq, hkv, E, EV, cap = 4, 8, 2, 64, 48, 70
    lens = np.array(lens, np.int32)
    q, k, v = draw(rng, (B, Hq, E), dt), draw(rng, (B, hkv, cap, E), dt), draw(rng, (B, hkv, cap, EV), dt)
    if paged:
        kp, vp, bt = _paged_from(k, v, 16, rng)
        return q, k, v, lens, [dev(a, device) for a in (q, kp, vp, bt, lens)], F.paged_decode_attention
    return q, k, v, lens, [dev(a, device) for a in (q, k, v, lens)], F.decode_attention



@pytest.mark.parametrize("paged", [False, True], ids=["contiguous", "paged"])
def test_short_sequences_spread_over_splits(paged, device, launches):
    """Lengths 0..capacity under many splits: each sequence's chunk is cut from its own length on the device, the
    combine reads only the splits holding keys (in BLOCK_S steps, over column blocks of a value dim != E)."""
    dt = T.bfloat16
    rng = np.random.default_rng(71 + paged)
    B, Hq, hkv, E, EV, cap = 4, 8, 2, 64, 48, 70
    lens = np.array([0, 1, 17, cap], np.int32)  # 0, 1, 2 and 5 of the 5 splits hold keys
    q, k, v = draw(rng, (B, Hq, E), dt), draw(rng, (B, hkv, cap, E), dt), draw(rng, (B, hkv, cap, EV), dt)
    with override("decode_attention", **MANY_SPLITS):
        if paged:
            kp, vp, bt = _paged_from(k, v, 16, rng)
            out = F.paged_decode_attention(dev(q, device), dev(kp, device), dev(vp, device), dev(bt, device),
                                           dev(lens, device))
        else:
            out = F.decode_attention(dev(q, device), dev(k, device), dev(v, device), dev(lens, device))
    _check(out, decode_oracle(q, k, v, lens), _mag(q, k, v, lens), dt, E, f"many splits paged={paged}")
    assert np.all(host(out)[0] == 0), "an empty sequence gives 0"
    if _kernels_run(device):
        (split, grid, meta), (comb, cgrid, cmeta) = launches
        assert split == "_decode_split_kernel" and grid == (B * hkv, 5) and not meta["DIRECT"]
        assert comb == "_decode_combine_kernel" and cgrid == (B * Hq, 3) and cmeta["BLOCK_S"] == 2


@pytest.mark.parametrize("settings", [dict(min_block_h=64), dict(BLOCK_N=32, split_rule="waves", target_programs=6),
                                      dict(split_rule="waves", target_programs=3, min_wave_efficiency=1.0)],
                         ids=["rows64", "waves6", "waves3"])
def test_table_knobs(settings, device):
    """The table's tuning knobs the GPU sweep tries (64 query rows per program, the wave-based split count) keep
    the result within the declared tolerance of the oracle."""
    dt = T.bfloat16
    rng = np.random.default_rng(13)
    B, Hq, hkv, E, cap = 3, 8, 2, 64, 90
    lens = np.array([90, 33, 0], np.int32)
    q, k, v = draw(rng, (B, Hq, E), dt), draw(rng, (B, hkv, cap, E), dt), draw(rng, (B, hkv, cap, E), dt)
    with override("decode_attention", **settings):
        out = F.decode_attention(dev(q, device), dev(k, device), dev(v, device), dev(lens, device))
    _check(out, decode_oracle(q, k, v, lens), _mag(q, k, v, lens), dt, E, f"knobs {settings}")


# The split kernel's own combine (fuse_combine) and the once-per-split row sums (lazy_rowsum), on the MANY_SPLITS
# cut: 5 splits, two split blocks per combine step (fuse_block_s=2) and 16 columns per step (4 steps over a value
# dim of 48 padded to 64, the last masked).
FUSED = [dict(fuse_combine=64, fuse_block_s=2, fuse_dv=16), dict(lazy_rowsum=True),
         dict(fuse_combine=64, lazy_rowsum=True, num_warps=1)]


FUSED_CASES = [(s, p) for p in (False, True) for s in FUSED if not (QUICK and p and s is not FUSED[2])]


@pytest.mark.parametrize("settings,paged", FUSED_CASES,
                         ids=[f"{['fused', 'lazy', 'fused-lazy-w1'][FUSED.index(s)]}-{'paged' if p else 'contiguous'}"
                              for s, p in FUSED_CASES])
def test_fused_combine_and_lazy_rowsum(settings, paged, device, launches):
    """With ``fuse_combine`` the last program of each (sequence, kv head) to finish combines the partials (one
    launch, no combine kernel); with ``lazy_rowsum`` the row sums are reduced once per split. Both stay within the
    declared tolerance of the oracle for lengths 0..capacity, are deterministic (a replay gives the same bits:
    the arrival counters are reset by each launch), and the fused combine also gives the same result when the
    splits are few enough to need a single split block."""
    dt = T.bfloat16
    B, Hq, hkv, E, EV, cap = 4, 8, 2, 64, 48, 70
    q, k, v, lens, args, fn = _small_bf16_cache(91 + paged, [0, 1, 17, cap], paged, device)
    replay = device != "cpu"  # the interpreter runs the programs one after another: a replay proves nothing there
    with override("decode_attention", **{**TABLE_OFF, **MANY_SPLITS, **settings}):
        out = fn(*args)
        again = fn(*args) if replay else out
    ref, mag = decode_oracle(q, k, v, lens), _mag(q, k, v, lens)
    _check(out, ref, mag, dt, E, f"{settings} paged={paged}")
    assert host(out).tobytes() == host(again).tobytes(), "a replayed step gives the same bits"
    assert np.all(host(out)[0] == 0), "an empty sequence gives 0"
    if _kernels_run(device):
        fused = "fuse_combine" in settings
        names = [n for n, _, _ in launches]
        calls = 2 if replay else 1
        assert names == ["_decode_split_kernel"] * calls if fused else \
            names == ["_decode_split_kernel", "_decode_combine_kernel"] * calls
        meta = launches[0][2]
        assert meta.get("FUSE", False) == fused and meta.get("LAZY_L", False) == settings.get("lazy_rowsum", False)
        assert launches[0][1] == (B * hkv, 5)
    if "fuse_combine" in settings:  # fused above 5 splits only: the combine kernel's result, within tolerance
        with override("decode_attention", **{**TABLE_OFF, **MANY_SPLITS, **settings, "fuse_combine": 4}):
            two = fn(*args)
        _check(two, ref, mag, dt, E, "fuse_combine below the split count")
        if _kernels_run(device):
            assert launches[-1][0] == "_decode_combine_kernel"


# The fold (fuse_fold): one level over the 5 splits (2 in flight per step: a partial last step), two levels with
# groups of 2 (3 groups, the last one short) and of 3 under lazy row sums, and one level with one warp.
FOLDS = [dict(fuse_combine=64, fuse_fold=2), dict(fuse_combine=64, fuse_fold=4, fuse_group=2),
         dict(fuse_combine=64, fuse_fold=1, fuse_group=3, lazy_rowsum=True),
         dict(fuse_combine=64, fuse_fold=8, num_warps=1)]
FOLD_CASES = [(s, p) for p in (False, True) for s in FOLDS if not (QUICK and p and s is not FOLDS[1])]


@pytest.mark.parametrize("settings,paged", FOLD_CASES,
                         ids=[f"{['one', 'two-g2', 'two-g3-lazy', 'one-w1'][FOLDS.index(s)]}-"
                              f"{'paged' if p else 'contiguous'}" for s, p in FOLD_CASES])
def test_fused_fold(settings, paged, device, launches):
    """``fuse_fold``: the last program of each (sequence, kv head) folds the partials in split order (one level),
    or with ``fuse_group`` the last program of each group of splits folds its group and the last group folds the
    groups (two levels): one launch, within the declared tolerance of the oracle for lengths 0..capacity (a
    sequence of 17 keys fills 2 of the 5 splits: groups without keys), 0 for an empty sequence, a replay gives
    the same bits (the arrival counters are reset by the launch that used them)."""
    dt = T.bfloat16
    B, Hq, hkv, E, EV, cap = 4, 8, 2, 64, 48, 70
    q, k, v, lens, args, fn = _small_bf16_cache(191 + paged, [0, 17, 1, cap], paged, device)
    replay = device != "cpu"
    with override("decode_attention", **MANY_SPLITS, **settings):
        out = fn(*args)
        again = fn(*args) if replay else out
        third = fn(*args) if replay else out
    _check(out, decode_oracle(q, k, v, lens), _mag(q, k, v, lens), dt, E, f"{settings} paged={paged}")
    assert host(out).tobytes() == host(again).tobytes() == host(third).tobytes(), "a replayed step: same bits"
    assert np.all(host(out)[0] == 0), "an empty sequence gives 0"
    if _kernels_run(device):
        calls = 3 if replay else 1
        assert [n for n, _, _ in launches] == ["_decode_split_kernel"] * calls
        meta = launches[0][2]
        assert meta["FUSE"] and meta["FOLD"] == settings["fuse_fold"] and launches[0][1] == (B * hkv, 5)
        assert meta["FOLD_G"] == settings.get("fuse_group", 0) and meta["FOLD_H"] == 4  # the group of 4 heads


def test_combine_one_same_bits(device):
    """``combine_one``: the combine kernel's one-block path (m, l and the partials loaded once) gives the bits of
    its loop, and applies only when every split fits one ``BLOCK_S`` block."""
    from nbxtensor.ops.decode_attention import launch_plan
    dt = T.bfloat16
    rng = np.random.default_rng(7)
    B, Hq, hkv, E, cap = 3, 8, 2, 64, 70
    lens = np.array([70, 17, 0], np.int32)
    q, k, v = draw(rng, (B, Hq, E), dt), draw(rng, (B, hkv, cap, E), dt), draw(rng, (B, hkv, cap, E), dt)
    args = [dev(a, device) for a in (q, k, v, lens)]
    wide = {**MANY_SPLITS, "BLOCK_S": 8}
    with override("decode_attention", **wide):
        ref = F.decode_attention(*args)
    with override("decode_attention", **wide, combine_one=True):
        one = F.decode_attention(*args)
        assert launch_plan(*args, ref, paged=False)["combine_meta"]["ONE"]
    with override("decode_attention", **MANY_SPLITS, combine_one=True):  # 5 splits > BLOCK_S 2: the loop
        assert "ONE" not in launch_plan(*args, ref, paged=False)["combine_meta"]
    assert host(one).tobytes() == host(ref).tobytes()
    _check(one, decode_oracle(q, k, v, lens), _mag(q, k, v, lens), dt, E, "combine_one")


def test_small_batch_rule(monkeypatch):
    """A table rule bounding ``batch_kv_heads`` (sequences x kv heads, bucketed) applies to small batches only:
    sm90.json can give batch 1 settings of its own. The plan is made on the host (no launch)."""
    from nbxtensor.ops.decode_attention import launch_plan
    from nbxtensor.runtime import configs
    base = dict(num_warps=4, num_stages=1, target_programs=64, max_splits=8, min_chunk=16, max_block_h=16,
                BLOCK_S=4)
    table = {"decode_attention": [{"max_batch_kv_heads": 8, "config": {**base, "BLOCK_N": 16}},
                                  {"config": {**base, "BLOCK_N": 32}}]}
    monkeypatch.setattr(configs, "arch_of", lambda device: "test-small-batch")
    monkeypatch.setattr(configs, "_table", lambda arch: table if arch == "test-small-batch" else {})
    got = {}
    for B in (1, 2, 3):  # 4, 8 and 12 (bucket 16) sequences x kv heads
        q, out = nbx.empty(B, 8, 32), nbx.empty(B, 8, 32)
        k = nbx.empty(B, 4, 64, 32)
        got[B] = launch_plan(q, k, k, None, out, paged=False)["meta"]["BLOCK_N"]
    assert got == {1: 16, 2: 16, 3: 32}


def _compile_launch_sm90(kernel, args, meta):
    """Compile a captured launch for sm_90 as Triton's JIT specializes it on the GPU (16-byte aligned pointers and
    ints divisible by 16 carry ``tt.divisibility``; ints equal to 1 become constants; ``do_not_specialize``
    arguments stay plain), with Triton's LLVM and bundled ptxas: no GPU needed."""
    import dataclasses

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDAOptions
    from triton.runtime.jit import _normalize_ty

    from nbxtensor.ops.pointwise import tl_dtype
    names = {f.name for f in dataclasses.fields(CUDAOptions)}
    opts = {k: v for k, v in meta.items() if k in names}
    cmeta = {k: v for k, v in meta.items() if k not in names}
    plain = set(kernel.do_not_specialize or ())
    sig, consts, attrs = {}, {}, {}
    for i, (p, a) in enumerate(zip(kernel.params, list(args) + [None] * (len(kernel.params) - len(args)))):
        n = p.name
        if n in cmeta:
            sig[n], consts[n] = "constexpr", cmeta[n]
        elif a is None or p.is_constexpr:
            sig[n], consts[n] = "constexpr", p.default if a is None else a
        elif hasattr(a, "data_ptr"):
            sig[n] = "*" + _normalize_ty(tl_dtype(a.dtype))
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif isinstance(a, float):
            sig[n] = "fp32"
        else:
            sig[n] = "i32" if -2 ** 31 <= int(a) < 2 ** 31 else "i64"
            if n not in plain and a == 1:
                sig[n], consts[n] = "constexpr", 1
            elif n not in plain and a % 16 == 0:
                attrs[(i,)] = [["tt.divisibility", 16]]
    src = triton.compiler.ASTSource(fn=kernel, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=opts)

def _sm90_split_launch(settings: dict, B: int, ctx: int, monkeypatch):
    """The one launch (kernel, grid, args, meta) that ``launch_decode`` makes under ``settings`` as the sm90 table
    would on the benchmark's bf16 GQA-8 head-dim-128 shape (B sequences of ``ctx`` keys), captured on a host with
    no GPU for an ahead-of-time compile (skips in the other tiers)."""
    from nbxtensor.runtime.launcher import interpreting
    if interpreting() or GPU:
        pytest.skip("compiles ahead of time on a host without a GPU (the other tiers run the kernels)")
    pytest.importorskip("triton.backends.nvidia.compiler")
    from nbxtensor.ops import decode_attention as D
    from nbxtensor.runtime import configs
    monkeypatch.setattr(configs, "arch_of", lambda device: "sm90")
    got = []
    monkeypatch.setattr(D, "launch", lambda kernel, grid, *args, **meta: got.append((kernel, grid, args, meta)))
    Hq, hkv, E = 32, 4, 128
    q, out = nbx.empty(B, Hq, E, dtype=nbx.bfloat16), nbx.empty(B, Hq, E, dtype=nbx.bfloat16)
    k, v = nbx.empty(B, hkv, ctx, E, dtype=nbx.bfloat16), nbx.empty(B, hkv, ctx, E, dtype=nbx.bfloat16)
    with override("decode_attention", **settings):
        D.launch_decode(q, k, v, None, out, scale=0.1, paged=False)
    assert [g[0].__name__ for g in got] == ["_decode_split_kernel"], "fused: one launch"
    return got[0]



@pytest.mark.parametrize("settings,B,ctx", [
    (dict(fuse_combine=32, lazy_rowsum=True, fuse_fold=0, fuse_group=0), 64, 4096),   # (the table folds)
    (dict(fuse_combine=32, lazy_rowsum=True, fuse_fold=0, fuse_group=0, maxnreg=96), 8, 32768),
    (dict(fuse_combine=32, lazy_rowsum=True, fuse_fold=0, fuse_group=0, num_warps=1, BLOCK_N=16, num_stages=4,
          fuse_block_s=4,
          split_rule="target", target_programs=1056, min_chunk=256), 64, 4096)],  # 5 splits > fuse_block_s
    ids=["w4-b64-4k", "w4-b8-32k-maxnreg96", "w1-loop"])
def test_fused_kernels_compile_for_sm90(settings, B, ctx, monkeypatch):
    """The sweep's fused / lazy variants of the bf16 head-dim-128 split kernel compile for sm_90 (Triton's real
    compiler and ptxas; no GPU) on the benchmark's b64-4k (5 splits: the one-block combine) and b8-32k (32 splits
    under a 96-register cap) shapes and with the looping combine (fuse_block_s=4), with the key and value tiles
    loaded by 128-bit ``cp.async`` into a multi-stage pipeline, and no register spills (no local-memory
    stores)."""
    kernel, grid, args, meta = _sm90_split_launch(settings, B, ctx, monkeypatch)
    assert meta["FUSE"] and meta["LAZY_L"] and grid[1] > 1
    assert meta["FUSE_ONE"] == ("fuse_block_s" not in settings)
    c = _compile_launch_sm90(kernel, args, meta)
    ptx, sass = c.asm["ptx"], c.asm.get("sass", "")
    assert re.search(r"cp\.async\.cg\.shared\.global \[[^]]*\], \[[^]]*\], 0x10", ptx), "16-byte cp.async"
    assert re.search(r"atom\.[a-z.]*acq_rel[a-z.]*\.add", ptx), "the arrival counter"
    if sass:
        assert "STL" not in sass, "register spills"


def _resources(cubin: bytes) -> dict:
    """Registers, stack and local memory per thread of a cubin (the bundled ``cuobjdump --dump-resource-usage``)."""
    import os
    import subprocess
    import tempfile

    import triton
    tool = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([tool, "--dump-resource-usage", f.name], capture_output=True, text=True,
                              check=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", text)
    return dict(REG=int(m.group(1)), STACK=int(m.group(2)), LOCAL=int(m.group(4)))


@pytest.mark.parametrize("settings,B,ctx,regs", [
    (dict(fuse_combine=256, fuse_fold=8, fuse_group=16), 8, 32768, 96),
    (dict(fuse_combine=256, fuse_fold=8, fuse_group=16, target_programs=1056, max_splits=256), 1, 32768, 96),
    (dict(fuse_combine=256, fuse_fold=8, fuse_group=16, maxnreg=80, target_programs=792), 8, 32768, 80),
    (dict(fuse_combine=256, fuse_fold=8, fuse_group=16, num_stages=2, maxnreg=72, target_programs=924), 8, 32768,
     72)], ids=["fold8-b8-32k", "fold8-g16-b1-32k", "maxnreg80", "s2-maxnreg72"])
def test_fold_kernels_compile_for_sm90(settings, B, ctx, regs, monkeypatch):
    """The sweep's folding variants of the bf16 head-dim-128 split kernel compile for sm_90 (Triton's compiler and
    bundled ptxas; no GPU): one launch, at most ``regs`` registers per thread (96: 5 programs of 4 warps per SM
    as the table kernel; maxnreg 80 and 64 hold without spills: no local memory, no STL), key and value tiles by
    16-byte ``cp.async``, the arrival counters' acq_rel adds, and the fold's partial rows by 128-bit loads. At
    b8-32k the table's 14 splits fold in one level; batch 1's 256 splits in two (groups of 16). Under a cap
    (and in the two-level code) ptxas keeps a few values that live across the key loop (pointers and sizes the
    fold needs) on the stack: stored once before the loop, loaded once after it; no local-memory access lies in
    any loop (between a label and the branch back to it), the key loop's ``HMMA`` loops included."""
    kernel, grid, args, meta = _sm90_split_launch(settings, B, ctx, monkeypatch)
    assert meta["FOLD"] == 8 and meta["FOLD_H"] == 8
    assert meta["FOLD_G"] == (16 if grid[1] > 16 else 0)
    c = _compile_launch_sm90(kernel, args, meta)
    ptx, sass = c.asm["ptx"], c.asm.get("sass", "")
    assert re.search(r"cp\.async\.cg\.shared\.global \[[^]]*\], \[[^]]*\], 0x10", ptx), "16-byte cp.async"
    assert re.search(r"atom\.[a-z.]*acq_rel[a-z.]*\.add", ptx), "the arrival counter"
    assert re.search(r"ld\.global\.cg\.v4\.(f32|b32)", ptx), "the fold's 128-bit loads of partial rows"
    res = _resources(c.asm["cubin"])
    assert res["REG"] <= regs and res["LOCAL"] == 0, res
    if sass:
        lines = sass.splitlines()
        labels = {m.group(1): i for i, ln in enumerate(lines) for m in [re.match(r"\s*(\.?L\w+):", ln)] if m}
        loops = [(labels[m.group(1)], i) for i, ln in enumerate(lines) for m in [re.search(r"BRA (\.?L\w+)", ln)]
                 if m and labels.get(m.group(1), i) < i]
        assert sum("HMMA" in lines[j] for a, b in loops for j in range(a, b)) >= 16, "the key loops are found"
        local = [j for a, b in loops for j in range(a, b) if re.search(r"\b(STL|LDL)", lines[j])]
        assert not local, f"local memory in a loop: {[lines[j].strip()[:60] for j in local[:3]]}"


def test_wave_split_rule():
    """split_rule "waves": the fewest splits whose last wave is nearly full (FlashAttention-2's heuristic)."""
    cfg = {"BLOCK_N": 64, "target_programs": 396, "max_splits": 128, "min_chunk": 128, "split_rule": "waves"}
    s, c = split_plan(4, 32768, cfg)  # 86 splits (one wave 0.87 full) is the best; 74 is within 0.85 of it
    w = 4 * s / 396
    assert s == 74 and w / math.ceil(w) >= 0.85 * (4 * 86 / 396) and c % 64 == 0 and s * c >= 32768
    s, _ = split_plan(256, 4096, cfg)  # 256 programs fill 0.65 of a wave; 3 splits fill 1.94 waves
    assert s == 3
    assert split_plan(1024, 4096, cfg)[0] == 1  # 2.6 waves already: no split


def test_lengths_beyond_max_seqlen_are_attended(device):
    """``max_seqlen`` only sizes the split count: a longer sequence is still attended in full."""
    dt = T.float32
    rng = np.random.default_rng(9)
    cap = 40
    lens = np.array([40, 23], np.int32)
    q, k, v = draw(rng, (2, 4, 32), dt), draw(rng, (2, 2, cap, 32), dt), draw(rng, (2, 2, cap, 32), dt)
    with override("decode_attention", **MANY_SPLITS):
        out = F.decode_attention(dev(q, device), dev(k, device), dev(v, device), dev(lens, device), max_seqlen=20)
    _check(out, decode_oracle(q, k, v, lens), _mag(q, k, v, lens), dt, 32, "lengths past max_seqlen")


@pytest.mark.parametrize("E", [64, 80])
def test_tensor_descriptor_path(E, device, launches):
    """Keys and values through tensor descriptors (Hopper's bulk copies; rows past the length zero-filled) with
    several splits and a tail tile; runs under the interpreter and on GPUs of compute capability >= 9."""
    if device == "cpu":
        from nbxtensor.runtime.launcher import interpreting
        if not interpreting():
            pytest.skip("tensor descriptors run under the interpreter or on sm90+")
    elif nbx.cuda.get_device_capability(nbx.device(device).index or 0)[0] < 9:
        pytest.skip("tensor descriptors need sm90+")
    from nbxtensor.ops.decode_attention import launch_decode
    dt = T.bfloat16
    rng = np.random.default_rng(E)
    B, Hq, hkv, cap = 3, 8, 1, 3 * 16 + 5
    lens = np.array([0, 21, cap], np.int32)
    q, k, v = draw(rng, (B, Hq, E), dt), draw(rng, (B, hkv, cap, E), dt), draw(rng, (B, hkv, cap, E), dt)
    out = nbx.empty(B, Hq, E, dtype=dt, device=device)
    with override("decode_attention", **MANY_SPLITS):
        launch_decode(dev(q, device), dev(k, device), dev(v, device), dev(lens, device), out,
                      scale=1 / np.sqrt(E), paged=False, tma=True)
    assert launches[0][2]["TMA"], "the descriptor kernel ran"
    _check(out, decode_oracle(q, k, v, lens), _mag(q, k, v, lens), dt, E, f"tma E={E}")


def test_plans_follow_overrides_and_4d_rows(device, launches):
    """The cached launch plan follows configs.override (one split: no combine launch), and [B, Hq, 1, E] rows go
    to the kernels as they are, giving the bits of the [B, Hq, E] form."""
    if not _kernels_run(device):
        pytest.skip("the Triton kernels run on a GPU or under the interpreter")
    from nbxtensor.ops.decode_attention import launch_decode, launch_plan
    dt = T.bfloat16
    rng = np.random.default_rng(5)
    B, Hq, hkv, E, cap = 2, 4, 2, 32, 40
    q, k, v = draw(rng, (B, Hq, E), dt), draw(rng, (B, hkv, cap, E), dt), draw(rng, (B, hkv, cap, E), dt)
    tq, tk, tv = dev(q, device), dev(k, device), dev(v, device)

    def run(q4):
        o = nbx.empty(B, Hq, 1, E, dtype=dt, device=device) if q4 else nbx.empty(B, Hq, E, dtype=dt, device=device)
        launch_decode(tq.unsqueeze(2) if q4 else tq, tk, tv, None, o, scale=0.125, paged=False)
        return o.cpu().numpy().reshape(B, Hq, E)

    with override("decode_attention", **MANY_SPLITS):
        many = run(False)
        assert len(launches) == 2
        assert run(True).tobytes() == many.tobytes()
        plan = launch_plan(tq, tk, tv, None, nbx.empty(B, Hq, E, dtype=dt, device=device), paged=False)
        assert plan["splits"] == 3 and plan["grid"] == launches[0][1] and plan["combine_grid"] == launches[1][1]
    with override("decode_attention", max_splits=1):
        one = run(False)
        assert launches[-1][0] == "_decode_split_kernel" and launches[-1][2]["DIRECT"]
    ref = decode_oracle(q, k, v, None, 0.125)
    mag = decode_oracle(q, k, np.abs(v), None, 0.125)
    for got, what in ((many, "many splits"), (one, "one split")):
        check_close(got.astype(np.float64) if got.dtype != np.float64 else got, ref, attention_tolerance(dt, E).rtol,
                    attention_tolerance(dt, E).atol, mag, what=what)


def test_full_cache_without_lengths_and_4d_query(device):
    """No cache_seqlens: every sequence fills the cache; a [B, Hq, 1, E] query gives [B, Hq, 1, Ev]."""
    dt = T.float32
    rng = np.random.default_rng(8)
    q, k, v = draw(rng, (2, 4, 1, 32), dt), draw(rng, (2, 4, 19, 32), dt), draw(rng, (2, 4, 19, 48), dt)
    out = F.decode_attention(dev(q, device), dev(k, device), dev(v, device), scale=0.3)
    assert tuple(out.shape) == (2, 4, 1, 48)
    _check(out[:, :, 0], decode_oracle(q[:, :, 0], k, v, None, 0.3), decode_oracle(q[:, :, 0], k, np.abs(v), None, 0.3),
           dt, 32, "full cache, scale, Ev != E")
    hint = F.decode_attention(dev(q, device), dev(k, device), dev(v, device), dev(np.array([5, 7], np.int32), device),
                              max_seqlen=7)
    _check(hint[:, :, 0], decode_oracle(q[:, :, 0], k, v, np.array([5, 7])),
           decode_oracle(q[:, :, 0], k, np.abs(v), np.array([5, 7])), dt, 32, "max_seqlen hint")


def test_sdpa_single_row_routes_to_decode(device):
    """SDPA with one query row and no mask (the decode path) matches the oracle, causal lower-right included."""
    from nbxtensor.nn.attention.bias import causal_lower_right
    dt = T.bfloat16
    rng = np.random.default_rng(4)
    q, k, v = draw(rng, (2, 8, 1, 64), dt), draw(rng, (2, 2, 37, 64), dt), draw(rng, (2, 2, 37, 64), dt)
    for mask in (None, causal_lower_right(1, 37)):
        out = F.scaled_dot_product_attention(dev(q, device), dev(k, device), dev(v, device), attn_mask=mask,
                                             enable_gqa=True)
        ref, mag = sdpa_oracle(q, k, v, None, False, None, True, with_magnitude=True)
        _check(out, ref, mag, dt, 64, f"sdpa one row {mask}")


def test_sdpa_decode_short_path(device):
    """ops.decode_attention.sdpa_decode: a decode-step SDPA call gives the general path's bits (and the oracle's
    values); every other call is declined (None) for the general path to handle."""
    from nbxtensor.ops.decode_attention import sdpa_decode
    dt = T.bfloat16
    rng = np.random.default_rng(44)
    q, k, v = draw(rng, (2, 8, 1, 64), dt), draw(rng, (2, 2, 37, 64), dt), draw(rng, (2, 2, 37, 48), dt)
    tq, tk, tv = dev(q, device), dev(k, device), dev(v, device)
    got = sdpa_decode(tq, tk, tv, enable_gqa=True, scale=0.2)
    if not _kernels_run(device):
        assert got is None  # the cpu implementation: the general path
        return
    assert tuple(got.shape) == (2, 8, 1, 48)
    ref = F.scaled_dot_product_attention(tq, tk, tv, enable_gqa=True, scale=0.2)
    assert got.cpu().numpy().tobytes() == ref.cpu().numpy().tobytes()
    want, mag = sdpa_oracle(q, k, v, None, False, 0.2, True, with_magnitude=True)
    _check(got, want, mag, dt, 64, "sdpa_decode")
    one = sdpa_decode(tq, tk[:, :, :1], tv[:, :, :1], is_causal=True, enable_gqa=True)  # one key: causal is full
    assert one is not None
    declined = [dict(attn_mask=dev(np.ones((1, 37), bool), device)), dict(dropout_p=0.1), dict(is_causal=True),
                dict(enable_gqa=False)]
    for kw in declined:
        assert sdpa_decode(tq, tk, tv, **{"enable_gqa": True, **kw}) is None, kw
    assert sdpa_decode(tq[:, :, 0], tk, tv, enable_gqa=True) is None  # 3-d query
    assert sdpa_decode(dev(draw(rng, (2, 8, 2, 64), dt), device), tk, tv, enable_gqa=True) is None  # two rows
    assert sdpa_decode(tq, tk[:1], tv[:1], enable_gqa=True) is None  # a broadcast batch
    assert sdpa_decode(tq, tk.float(), tv, enable_gqa=True) is None  # mixed dtypes


def test_float64(device):
    rng = np.random.default_rng(64)
    q, k, v = draw(rng, (2, 4, 16), T.float64), draw(rng, (2, 1, 33, 16), T.float64), draw(rng, (2, 1, 33, 16),
                                                                                           T.float64)
    lens = np.array([33, 12], np.int64)
    out = F.decode_attention(dev(q, device), dev(k, device), dev(v, device), dev(lens, device))
    _check(out, decode_oracle(q, k, v, lens), _mag(q, k, v, lens), T.float64, 16, "float64")


# ---------------------------------------------------------------------------------------------------------
# Append kernels and the page allocator
# ---------------------------------------------------------------------------------------------------------
def test_kv_cache_append(device):
    """New rows land at cache_seqlens[b] + t, bit for bit; nothing else changes."""
    dt = T.bfloat16
    rng = np.random.default_rng(30)
    B, hkv, cap, E = 3, 2, 20, 64
    kc, vc = draw(rng, (B, hkv, cap, E), dt), draw(rng, (B, hkv, cap, 32), dt)
    kn, vn = draw(rng, (B, hkv, 3, E), dt), draw(rng, (B, hkv, 3, 32), dt)
    lens = np.array([0, 9, 17], np.int32)
    tk, tv = dev(kc, device), dev(vc, device)
    F.kv_cache_append(tk, tv, dev(lens, device), dev(kn, device), dev(vn, device))
    ek, ev = kc.copy(), vc.copy()
    for b in range(B):
        ek[b, :, lens[b]:lens[b] + 3] = kn[b]
        ev[b, :, lens[b]:lens[b] + 3] = vn[b]
    assert tk.cpu().numpy().tobytes() == ek.tobytes() and tv.cpu().numpy().tobytes() == ev.tobytes()


@pytest.mark.parametrize("page", [16, 32])
def test_paged_kv_append(page, device):
    dt = T.float16
    rng = np.random.default_rng(page + 1)
    B, hkv, E, nblk = 2, 2, 64, 3
    total = B * nblk + 2
    bt = rng.permutation(total)[:B * nblk].reshape(B, nblk).astype(np.int32)
    kp, vp = draw(rng, (total, page, hkv, E), dt), draw(rng, (total, page, hkv, E), dt)
    kn, vn = draw(rng, (B, hkv, 4, E), dt), draw(rng, (B, hkv, 4, E), dt)
    lens = np.array([page - 2, 0], np.int32)  # the first sequence crosses a page boundary
    tk, tv = dev(kp, device), dev(vp, device)
    F.paged_kv_append(tk, tv, dev(bt, device), dev(lens, device), dev(kn, device), dev(vn, device))
    ek, ev = kp.copy(), vp.copy()
    for b in range(B):
        for t in range(4):
            p = lens[b] + t
            ek[bt[b, p // page], p % page] = kn[b, :, t]
            ev[bt[b, p // page], p % page] = vn[b, :, t]
    assert tk.cpu().numpy().tobytes() == ek.tobytes() and tv.cpu().numpy().tobytes() == ev.tobytes()


def test_append_out_of_range(device):
    """A row past the capacity raises IndexError (check=True) and is not written; check=False skips it silently
    (the PagedKVCache checks on the host instead)."""
    dt = T.float32
    kc = np.zeros((2, 1, 4, 16), np.float32)
    lens = np.array([3, 0], np.int32)
    kn = np.ones((2, 1, 2, 16), np.float32)
    tk, tv = dev(kc, device), dev(kc.copy(), device)
    with pytest.raises(IndexError, match="outside the cache"):
        F.kv_cache_append(tk, tv, dev(lens, device), dev(kn, device), dev(kn.copy(), device))
    got = tk.cpu().numpy()
    assert np.all(got[0, 0, 3] == 1) and np.all(got[1, 0, :2] == 1) and np.all(got[0, 0, :3] == 0)
    F.kv_cache_append(tk, tv, dev(np.array([4, 2], np.int32), device), dev(kn, device), dev(kn.copy(), device),
                      check=False)
    assert np.all(tk.cpu().numpy()[1, 0, 2:] == 1)
    del dt


def test_paged_kv_cache_steps(device):
    """PagedKVCache over several decode steps of two sequences (pages interleaved), one freed and its pages
    reused by a third: every step equals the oracle over the rows appended so far."""
    dt = T.float32
    rng = np.random.default_rng(50)
    hkv, Hq, E, page = 2, 4, 32, 16
    steps = 20 if QUICK else 40
    cache = PagedKVCache(num_blocks=8, block_size=page, kv_heads=hkv, head_dim=E, num_layers=2, dtype=dt,
                         device=device)
    ids = [cache.add_sequence(), cache.add_sequence()]
    hist = {i: ([], []) for i in ids}
    for step in range(steps):
        if step == steps // 2:
            cache.free_sequence(ids[0])
            del hist[ids[0]]
            ids = [ids[1], cache.add_sequence()]
            hist[ids[1]] = ([], [])
        cache.begin_step(ids, new_tokens=1)
        kn, vn = draw(rng, (2, hkv, 1, E), dt), draw(rng, (2, hkv, 1, E), dt)
        for layer in range(2):
            cache.append(layer, dev(kn, device), dev(vn * (layer + 1), device))
        for r, s in enumerate(ids):
            hist[s][0].append(kn[r, :, 0])
            hist[s][1].append(vn[r, :, 0])
        q = draw(rng, (2, Hq, E), dt)
        out = cache.decode(1, dev(q, device))
        n = max(len(hist[s][0]) for s in ids)
        kk = np.zeros((2, hkv, n, E))
        vv = np.zeros((2, hkv, n, E))
        for r, s in enumerate(ids):
            m = len(hist[s][0])
            kk[r, :, :m] = np.stack(hist[s][0], 1)
            vv[r, :, :m] = 2 * np.stack(hist[s][1], 1)
        lens = np.array([len(hist[s][0]) for s in ids])
        _check(out, decode_oracle(q, kk, vv, lens), decode_oracle(q, kk, np.abs(vv), lens), dt, E, f"step {step}")
        cache.end_step()
    assert cache.length(ids[0]) == steps and sorted(set(cache.pages(ids[0])) & set(cache.pages(ids[1]))) == []


def test_paged_kv_cache_limits():
    cache = PagedKVCache(num_blocks=2, block_size=16, kv_heads=1, head_dim=16, dtype=nbx.float32)
    s = cache.add_sequence()
    with pytest.raises(RuntimeError, match="max_blocks_per_seq|out of pages"):
        cache.begin_step([s], new_tokens=40)
    with pytest.raises(RuntimeError, match="begin_step"):
        cache.end_step()
    with pytest.raises(ValueError, match="power of two"):
        PagedKVCache(num_blocks=2, block_size=12, kv_heads=1, head_dim=16)


# ---------------------------------------------------------------------------------------------------------
# Errors and costs
# ---------------------------------------------------------------------------------------------------------
_ERR_CASES = [(name, c) for name in ("decode_attention", "paged_decode_attention", "kv_cache_append",
                                     "paged_kv_append") for c in registry.get(name).extra["errors"]]


@pytest.mark.parametrize("name,case", _ERR_CASES, ids=lambda x: x if isinstance(x, str) else x[0])
def test_errors(name, case, device):
    label, builders, kwargs, exc, msg = case
    d = nbx.device(device)
    args = [b(d) if callable(b) else b for b in builders]
    with pytest.raises(exc, match=msg):
        registry.get(name).extra["function"](*args, **kwargs)


def test_costs():
    q = nbx.empty(4, 32, 128, dtype=nbx.bfloat16)
    k = nbx.empty(4, 8, 32768, 128, dtype=nbx.bfloat16)
    c = registry.get("decode_attention").cost(q, k, k)
    assert c.bytes_read == 2 * k.numel() * 2 + q.numel() * 2 and c.bytes_written == q.numel() * 2
    assert c.flops == 2 * 4 * 32 * 32768 * 256
    kp = nbx.empty(100, 16, 8, 128, dtype=nbx.bfloat16)
    bt = nbx.empty(4, 25, dtype=nbx.int32)
    c = registry.get("paged_decode_attention").cost(q, kp, kp, bt, nbx.empty(4, dtype=nbx.int32))
    assert c.bytes_read == 4 * 8 * 400 * 256 * 2 + q.numel() * 2 + bt.numel() * 4
