"""benchmarks/sweep_pointwise.py without a GPU: the variant tables are well formed, the on-device checks tell bit
equality from a difference and a tolerance match from a mismatch, and a smoke run of two cases (one with an
ablation) through the interpreter writes checked rows to the CSV.
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

import sweep_pointwise as S  # noqa: E402


@pytest.mark.parametrize("group", S.GROUPS)
def test_variant_tables_are_well_formed(group):
    known = {"BLOCK", "num_warps", "EVICT", "programs_per_sm", "HW_CVT", "FAST", "FAST_MATH16", "CAST_VEC"}
    cases = S.build_cases(nbx, smoke=True, group=group)
    assert len({c.name for c in cases}) == len(cases), "a repeated case name"
    if group in ("activations", "all"):
        assert {c.rule for c in cases} == set(S.VARIANTS)
        assert set(S.ABLATIONS) <= {c.name for c in cases}
    for c in cases:
        vs = c.variants()
        assert vs and all(v and {k for k in v if not k.startswith("ALT_")} <= known for v in vs), c.name
        assert len({repr(sorted(v.items())) for v in vs}) == len(vs), f"{c.name}: a repeated variant"
        for v in vs:
            assert v.get("BLOCK", 1024) % (32 * v.get("num_warps", 1)) == 0 or "num_warps" not in v, v
            sm = S.smoke_settings(v)
            assert set(sm) == set(v) and sm.get("BLOCK", 0) <= 32


def test_issue4_group_covers_the_brief():
    """remainder's schedules (one body: the fast ones were dropped) on bf16 and f32; BLOCK {1024, 2048, 4096} x
    num_warps {4, 8} for abs, neg, exp, add, mul by a scalar and clamp in both dtypes, the tensors >= 256 MiB."""
    cases = {c.name: c for c in S.build_cases(nbx, smoke=False, group="issue4")}
    for tag in ("bf16", "f32"):
        rv = cases[f"remainder {tag}"].variants()
        assert rv and all(set(v) <= {"BLOCK", "num_warps", "ALT_REMAINDER"} for v in rv), rv
        for op in ("abs", "neg", "exp", "add", "mul scalar", "clamp"):
            c = cases[f"{op} {tag}"]
            grid = {(v.get("BLOCK", 4096), v.get("num_warps", 8)) for v in [{}] + c.variants()}
            assert {(b, w) for b in (1024, 2048, 4096) for w in (4, 8)} <= grid, op
            assert all(s.nbytes >= 256 << 20 for s in c.specs), op


def test_checks_tell_match_from_mismatch():
    a = nbx.from_numpy(np.array([1.0, -2.5, 3.0, 0.1], dtype=np.float32)).to(nbx.bfloat16)
    assert S.check_bits(nbx, a, a.clone()) == (True, 0)
    b = nbx.from_numpy(np.array([1.0, -2.5, 3.0, 0.1006], dtype=np.float32)).to(nbx.bfloat16)  # one ulp off
    assert S.check_bits(nbx, b, a) == (False, 1)
    assert S.check_tol(nbx, b, a) == (True, 1)
    c = nbx.from_numpy(np.array([1.0, -2.5, 3.5, 0.1], dtype=np.float32)).to(nbx.bfloat16)
    assert S.check_tol(nbx, c, a)[0] is False


@pytest.mark.skipif(os.environ.get("NBX_TRITON_INTERPRET", "0") == "1", reason="runs its own interpreter process")
def test_smoke_run_writes_checked_rows(tmp_path):
    env = dict(os.environ, NBX_TRITON_INTERPRET="1", PYTHONPATH=os.path.join(REPO, "src"))
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "sweep_pointwise.py"), "--device", "cpu", "--smoke",
                           "--out", str(tmp_path), "--cases", "mish,cast bf16->fp8", "--budget-s", "0",
                           "--no-numerics", "--group", "activations"],
                          capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader(open(tmp_path / "sweep_pointwise.csv", encoding="utf-8")))
    cases = {c.name: c for c in S.build_cases(nbx, smoke=True, group="activations")}
    assert {r["case"] for r in rows} == {"mish", "cast bf16->fp8"}
    assert len(rows) == sum(1 + len(cases[n].variants()) for n in ("mish", "cast bf16->fp8"))
    assert all(r["status"].startswith("ok") for r in rows), [r["status"] for r in rows]
    assert {r["status"] for r in rows if r["variant"] == "table"} == {"ok (oracle; 0 != rounded)",
                                                                     "ok (oracle, bits)"}
    assert any(r["settings"] == '{"FAST":0}' and r["status"].startswith("ok (tol") for r in rows)
    assert any(r["settings"] == '{"HW_CVT":0}' and r["status"] == "ok (bits)" for r in rows)
    assert all(float(r["p50_ms"]) > 0 and r["table_config"] for r in rows)
    assert "per rule, best geometric mean" in proc.stdout and len(proc.stdout.splitlines()) < 120


@pytest.mark.skipif(os.environ.get("NBX_TRITON_INTERPRET", "0") == "1", reason="runs its own interpreter process")
def test_issue4_smoke_run_checks_the_remainder_schedules(tmp_path):
    """The default group through the interpreter: no numerics pass, the table variant checked against the oracle,
    and every other remainder schedule's output equal to the table's bits."""
    env = dict(os.environ, NBX_TRITON_INTERPRET="1", PYTHONPATH=os.path.join(REPO, "src"))
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "sweep_pointwise.py"), "--device", "cpu", "--smoke",
                           "--out", str(tmp_path), "--cases", "remainder bf16,abs f32", "--budget-s", "0"],
                          capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not any(ln.startswith("numerics") for ln in proc.stdout.splitlines()), proc.stdout
    rows = list(csv.DictReader(open(tmp_path / "sweep_pointwise.csv", encoding="utf-8")))
    cases = {c.name: c for c in S.build_cases(nbx, smoke=True, group="issue4")}
    assert len(rows) == sum(1 + len(cases[n].variants()) for n in ("remainder bf16", "abs f32"))
    assert all(r["status"].startswith("ok") for r in rows), [r["status"] for r in rows]
    rem = [r for r in rows if r["case"] == "remainder bf16" and r["variant"] != "table"]
    assert len(rem) == len(cases["remainder bf16"].variants()) and all(r["status"] == "ok (bits)" for r in rem), rem
    assert len(proc.stdout.splitlines()) < 120


@pytest.mark.skipif(os.environ.get("NBX_TRITON_INTERPRET", "0") == "1", reason="runs its own interpreter process")
def test_math16_smoke_run_compares_the_key_with_the_table(tmp_path):
    """``--group math16``: each op's table body, then FAST_MATH16=1, checked against the table's output by the
    tolerance (ops/fast_math16.py); a unary and a binary op through the interpreter."""
    from nbxtensor.ops import fast_math16 as M16, fast_trig16
    cases = S.build_cases(nbx, smoke=True, group="math16")
    assert {c.op for c in cases} == set(M16.OPS) | set(fast_trig16.OPS) | set(S.MATH16_LEVEL2)
    for c in cases:   # the ops added last are timed with the key off too (sm90.json turns it on)
        want = [{M16.KEY: 0}, {M16.KEY: 1}] if c.op in S.MATH16_EXPLICIT else [{M16.KEY: 1}]
        if c.op in S.MATH16_LEVEL2:  # level 2 (fast_math16.OPS2) after the level it is compared with (0: no level 1)
            two, one = {**M16.OPS2, **fast_trig16.OPS2}, {**M16.OPS, **fast_trig16.OPS}
            assert c.op in two and (S.MATH16_LEVEL2[c.op] == 1) == (c.op in one), c.op
            want = [w for w in want if w[M16.KEY] < S.MATH16_LEVEL2[c.op]] + [{M16.KEY: S.MATH16_LEVEL2[c.op]},
                                                                               {M16.KEY: 2}]
        assert c.variants() == S.MATH16_ALT.get(c.op, []) + want, c.op  # tan: ALT_TAN's bodies first
    env = dict(os.environ, NBX_TRITON_INTERPRET="1", PYTHONPATH=os.path.join(REPO, "src"))
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "sweep_pointwise.py"), "--device", "cpu", "--smoke",
                           "--group", "math16", "--out", str(tmp_path), "--cases", "erfc bf16,logaddexp bf16",
                           "--budget-s", "0"], capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader(open(tmp_path / "sweep_pointwise.csv", encoding="utf-8")))
    assert [(r["case"], r["settings"]) for r in rows] == [
        ("erfc bf16", "table"), ("logaddexp bf16", "table"), ("erfc bf16", '{"FAST_MATH16":1}'),
        ("logaddexp bf16", '{"FAST_MATH16":1}'), ("erfc bf16", '{"FAST_MATH16":2}')], rows
    assert [r["status"][:9] for r in rows] == ["ok (oracl", "ok (oracl", "ok (tol; ", "ok (tol; ", "ok (tol; "], rows


def test_math16_group_times_both_tan_bodies():
    """tan in the math16 group: ALT_TAN's two bodies first (at FAST_MATH16 2), then libdevice (FAST_MATH16 0) and the
    level-2 sin/cos body (FAST_MATH16 2, the sm_90 table's own setting)."""
    tan = {c.name: c for c in S.build_cases(nbx, smoke=True, group="math16")}["tan bf16"]
    vs = tan.variants()
    assert vs[:2] == [{"FAST_MATH16": 2, "ALT_TAN": 1}, {"FAST_MATH16": 2, "ALT_TAN": 2}], vs
    assert {"FAST_MATH16": 0} in vs and {"FAST_MATH16": 2} in vs, vs
