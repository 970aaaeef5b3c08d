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


def test_variant_tables_are_well_formed():
    known = {"BLOCK", "num_warps", "EVICT", "programs_per_sm", "HW_CVT", "FAST"}
    cases = S.build_cases(nbx, smoke=True)
    assert {c.rule for c in cases} == set(S.VARIANTS)
    assert set(S.ABLATIONS) <= {c.name for c in cases}
    for c in cases:
        vs = c.variants()
        assert vs and all(v and set(v) <= known for v in vs), c.name
        assert len({repr(sorted(v.items())) for v in vs}) == len(vs), f"{c.name}: a repeated variant"
        for v in vs:
            assert v.get("BLOCK", 1024) % (32 * v.get("num_warps", 1)) == 0 or "num_warps" not in v, v
            assert set(S.smoke_settings(v)) == set(v) and S.smoke_settings(v).get("BLOCK", 0) <= 32


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
                           "--no-numerics"], capture_output=True, text=True, env=env, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader(open(tmp_path / "sweep_pointwise.csv", encoding="utf-8")))
    cases = {c.name: c for c in S.build_cases(nbx, smoke=True)}
    assert {r["case"] for r in rows} == {"mish", "cast bf16->fp8"}
    assert len(rows) == sum(1 + len(cases[n].variants()) for n in ("mish", "cast bf16->fp8"))
    assert all(r["status"].startswith("ok") for r in rows), [r["status"] for r in rows]
    assert {r["status"] for r in rows if r["variant"] == "table"} == {"ok (oracle; 0 != rounded)",
                                                                     "ok (oracle, bits)"}
    assert any(r["settings"] == '{"FAST":0}' and r["status"].startswith("ok (tol") for r in rows)
    assert any(r["settings"] == '{"HW_CVT":0}' and r["status"] == "ok (bits)" for r in rows)
    assert all(float(r["p50_ms"]) > 0 and r["table_config"] for r in rows)
    assert "per rule, best geometric mean" in proc.stdout and len(proc.stdout.splitlines()) < 120
