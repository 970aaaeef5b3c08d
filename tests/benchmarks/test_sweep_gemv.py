"""benchmarks/sweep_gemv.py without a GPU: the variant tables are well formed (known keys, no repeats, warps that
split rows), every variant's kernels compile for sm_90 here through the real host wrappers with the sm90 table
(so no H200 time goes to a variant that cannot build), the output check tells a match from a mismatch, and a
smoke run through the interpreter writes checked rows to the CSV.
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys

import numpy as np
import pytest

import nbxtensor as nbx

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(REPO, "benchmarks")
sys.path.insert(0, BENCH)
sys.path.insert(0, os.path.join(REPO, "tests", "ops"))

import sweep_gemv as S  # noqa: E402

INTERPRET = os.environ.get("NBX_TRITON_INTERPRET", "0") == "1"
GEMV_KEYS = {"BLOCK_N", "BLOCK_K", "BLOCK_M", "UNROLL", "PREFETCH", "PERSIST", "DOT_T", "EVICT_W",
             "programs_per_sm", "target_programs", "MIN_K_SPLIT", "num_warps", "num_stages"}
INT4_KEYS = {"BLOCK_N", "BLOCK_K", "FAST_Q", "DECODE_ASM", "WORD_DECODE", "WORD_ASM", "PERSIST", "EVICT_W",
             "programs_per_sm", "target_programs", "MIN_K_SPLIT", "num_warps", "num_stages", "PREFETCH", "LOOP_STAGES", "maxnreg",
             "TC", "TC_COLS", "TC_ASM"}


def test_variant_tables_are_well_formed():
    for phase, op, variants, share in S.PHASES:
        names = [n for n, _ in variants]
        assert len(set(names)) == len(names), phase
        assert len({repr(sorted(s.items())) for _, s in variants}) == len(variants), f"{phase}: a repeated variant"
        for name, s in variants:
            assert set(s) <= (INT4_KEYS if op == "int4_gemv" else GEMV_KEYS), (phase, name)
            if "UNROLL" in s:
                assert s["UNROLL"] & (s["UNROLL"] - 1) == 0
            if op == "gemv" and "BLOCK_N" in s and not s.get("DOT_T"):  # warps split rows (no per-step exchange)
                assert s.get("num_warps", 4) <= s["BLOCK_N"] * max(1, s.get("BLOCK_K", 256) // 256), name
            if op == "int4_gemv" and "BLOCK_K" in s:
                ngc = s["BLOCK_K"] // S.G
                assert ngc & (ngc - 1) == 0, name
    assert [s for _, _, _, s in S.PHASES] == sorted(s for _, _, _, s in S.PHASES) and S.PHASES[-1][3] == 1.0
    assert S.SMOKE_VARIANTS <= {n for _, _, vs, _ in S.PHASES for n, _ in vs}


def test_excess_tells_match_from_mismatch():
    ref = np.array([[1.0, -2.0, 0.5]])
    mag = np.full(ref.shape, 3.0)
    assert S.excess(ref, ref, mag, 64) < 0
    assert S.excess(ref + np.array([[0.0, 0.0, 0.3]]), ref, mag, 64) > 0
    assert np.isnan(S.excess(np.array([[1.0, np.nan, 0.5]]), ref, mag, 64))


def _launches(monkeypatch, call, op, settings):
    """The launches ``call()`` makes on CPU tensors with the sm90 table and ``settings`` laid over ``op``'s rule
    (an H200's 132 SMs), recorded instead of run."""
    from nbxtensor.ops import matmul as MM
    from nbxtensor.ops import registry
    from nbxtensor.quant import int4 as Q
    from nbxtensor.runtime import configs
    got = []
    monkeypatch.setattr(MM, "launch", lambda kernel, grid, *args, **meta: got.append((kernel, grid, args, meta)))
    monkeypatch.setattr(configs, "arch_of", lambda device: "sm90")
    monkeypatch.setattr(registry, "interpreting", lambda: True)
    monkeypatch.setattr(MM, "_sm_count", lambda index: 132)
    for mod in (MM, Q):
        monkeypatch.setattr(mod, "_locks", lambda dev, n: nbx.empty(n, dtype=nbx.int32))
    MM.clear_plans()
    try:
        with configs.override(op, **settings) if settings else _null():
            call()
    finally:
        MM.clear_plans()
    return got


def _null():
    import contextlib
    return contextlib.nullcontext()


_PTR = {"bfloat16": "*bf16", "float16": "*fp16", "float32": "*fp32", "uint8": "*u8", "int32": "*i32"}


def _compile(kernel, args, meta):
    import reduce_harness as H
    types = {}
    for name, a in zip(kernel.arg_names, args):
        if isinstance(a, nbx.Tensor):
            types[name] = _PTR[a.dtype.name]
        elif isinstance(a, float):
            types[name] = "fp64" if name in ("alpha", "beta") else "fp32"
        else:
            types[name] = "i32" if -2 ** 31 <= a < 2 ** 31 else "i64"
    consts = {k: v for k, v in meta.items() if k not in ("num_warps", "num_stages", "maxnreg")}
    return H.compile_sm90(kernel, types, consts, num_warps=meta.get("num_warps", 4))


@pytest.mark.skipif(INTERPRET or os.environ.get("NBX_TEST_DEVICE", "cpu").startswith("cuda"),
                    reason="compiles with Triton's real compiler for sm_90 (not under the interpreter; the GPU tier "
                    "runs the kernels)")
@pytest.mark.parametrize("phase", [p[0] for p in S.PHASES])
def test_every_variant_compiles_for_sm90(monkeypatch, phase):
    import reduce_harness as H
    reason = H.aot_skip_reason()
    if reason:
        pytest.skip(reason)
    import nbxtensor.nn.functional as F
    from nbxtensor.quant import int4_linear
    _, op, variants, _ = next(p for p in S.PHASES if p[0] == phase)
    base = {}
    if phase.endswith("-split"):  # on top of a kernel variant of the phase before (the sweep's best, at run time)
        base = dict(next(s for n, s in next(p for p in S.PHASES if p[0] == phase[:-6])[2] if s))
    bf = nbx.bfloat16
    if op == "int4_gemv":
        # 16384 rows: enough row tiles for every PERSIST variant to run persistent programs (no split-K)
        q, s, m = nbx.empty(16384, 2048, dtype=nbx.uint8), nbx.empty(16384, 128, dtype=nbx.float16), \
            nbx.empty(16384, 128, dtype=nbx.float16)
        x = nbx.empty(1, 4096, dtype=bf)
        call = lambda: int4_linear(x, q, s, m, group_size=S.G)  # noqa: E731
    else:
        M = 4 if phase == "mrow" else 1
        # 8192 rows: enough row tiles for every PERSIST variant to run persistent programs (132 SMs)
        x, w = nbx.empty(M, 1024, dtype=bf), nbx.empty(8192, 1024, dtype=bf)
        call = lambda: F.linear(x, w)  # noqa: E731
    for name, settings in variants:
        got = _launches(monkeypatch, call, op, {**base, **settings})
        assert len(got) == 1, (phase, name)
        kernel, grid, args, meta = got[0]
        for k, v in settings.items():
            if k in meta:
                assert meta[k] == (bool(v) if k == "PERSIST" else v), (phase, name, k)
        _compile(kernel, args, meta)


@pytest.mark.skipif(INTERPRET, reason="runs its own interpreter process")
def test_smoke_run_writes_checked_rows(tmp_path):
    env = dict(os.environ, NBX_TRITON_INTERPRET="1", PYTHONPATH=os.path.join(REPO, "src"))
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "sweep_gemv.py"), "--device", "cpu", "--smoke",
                           "--out", str(tmp_path), "--phases", "gemv,int4-split,int4",
                           "--variants", "n4 k256 u4 pf,split P6", "--budget-s", "200"],
                          capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = list(csv.DictReader(open(tmp_path / "sweep_gemv.csv", encoding="utf-8")))
    got = {(r["phase"], r["variant"]) for r in rows}
    assert got == {("gemv", "table"), ("gemv", "n4 k256 u4 pf"), ("int4", "table"), ("int4-split", "split P6")}, got
    assert all(r["status"] == "ok" for r in rows), [r["error"] for r in rows if r["status"] != "ok"]
    assert all(r["check"] in ("oracle ok", "ok") for r in rows), [(r["variant"], r["check"]) for r in rows]
    assert all(float(r["gbps"]) > 0 for r in rows)
    assert "best overall" in proc.stdout and "% of 4800" in proc.stdout
