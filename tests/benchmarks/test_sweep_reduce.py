"""benchmarks/sweep_reduce.py without a GPU: the variant table is well formed, the on-device output check tells a
match from a mismatch (NaN equal to NaN, indices exact), the smoke settings keep every key, and a smoke run of
two cases through the interpreter writes checked rows to the CSV.
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

import sweep_reduce as S  # noqa: E402


def test_variant_table_is_well_formed():
    known = {"BLOCK_M", "BLOCK_R", "BLOCK_I", "BLOCK_N", "num_warps", "LOOP_STAGES", "EVICT", "EVICT2",
             "programs_per_sm", "RCP", "FAST_EXP", "HOIST_PARAMS", "target_programs", "min_chunk", "maxnreg",
             "UNROLL", "EVEN", "INTERLEAVE", "target_per_sm", "WORDS", "VAR_SHIFT"}
    cases = S.build_cases(nbx, smoke=True)
    assert {c.group for c in cases} == set(S.VARIANTS)
    for group, variants in S.VARIANTS.items():
        assert variants and all(v and set(v) <= known for v in variants), group
        assert len({repr(sorted(v.items())) for v in variants}) == len(variants), f"{group}: a repeated variant"
        for v in variants:
            assert v.get("EVICT", "evict_first") in ("evict_first", "evict_last")
            assert set(S.smoke_settings(v)) == set(v)
            assert all(S.smoke_settings(v)[k] <= 32 for k in v if k.startswith("BLOCK_"))


def test_check_same_tells_match_from_mismatch():
    a = nbx.from_numpy(np.array([1.0, np.nan, 3.0], dtype=np.float32)).to(nbx.bfloat16)
    assert S.check_same(nbx, a, a.clone(), False) == "ok"
    b = nbx.from_numpy(np.array([1.0, np.nan, 3.5], dtype=np.float32)).to(nbx.bfloat16)
    assert S.check_same(nbx, b, a, False).startswith("mismatch")
    c = nbx.from_numpy(np.array([1.0, 0.0, 3.0], dtype=np.float32)).to(nbx.bfloat16)
    assert S.check_same(nbx, c, a, False).startswith("mismatch")  # NaN only on one side
    i, j = nbx.tensor([0, 4]), nbx.tensor([0, 5])
    assert S.check_same(nbx, (a, i), (a, i.clone()), False) == "ok"
    assert S.check_same(nbx, (a, j), (a, i), False) == "mismatch: output 1"
    assert S.check_same(nbx, a.float(), a, False).startswith("mismatch")  # dtype


@pytest.mark.skipif(os.environ.get("NBX_TRITON_INTERPRET", "0") == "1", reason="runs its own interpreter process")
def test_smoke_run_writes_checked_rows(tmp_path):
    env = dict(os.environ, NBX_TRITON_INTERPRET="1", PYTHONPATH=os.path.join(REPO, "src"))
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "sweep_reduce.py"), "--device", "cpu", "--smoke",
                           "--out", str(tmp_path), "--cases", "rms_norm,max(dim=0)", "--budget-s", "100"],
                          capture_output=True, text=True, env=env, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader(open(tmp_path / "sweep_reduce.csv", encoding="utf-8")))
    assert {r["case"] for r in rows} == {"rms_norm", "max(dim=0)"}
    assert len(rows) == len(S.VARIANTS["norm_rows"]) + len(S.VARIANTS["reduce_cols"]) + 2
    assert all(r["status"] in ("ok", "ok (reference)") for r in rows), [r["status"] for r in rows]
    assert all(float(r["p50_ms"]) > 0 and r["table_config"] for r in rows)
    assert "per rule, best geometric mean" in proc.stdout and len(proc.stdout.splitlines()) < 120
