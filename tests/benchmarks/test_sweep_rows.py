"""benchmarks/sweep_rows.py without a GPU: its cases are the benchmark's softmax/norm shapes, the variant table is
well formed, the output checks tell a match from a mismatch (against the table's output and against the float64
oracle on edge rows), and a smoke run through the interpreter writes checked rows to the CSV.
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

import sweep_rows as S  # noqa: E402

KNOWN = {"BLOCK_M", "BLOCK_N", "BLOCK_S", "num_warps", "LOOP_STAGES", "EVICT", "EVICT2", "programs_per_sm", "RCP",
         "EVEN", "EXP_OUT", "HOIST_PARAMS", "HW_CVT", "FMA", "LANE_STATS", "CHUNK", "EXP_OUT2", "maxnreg", "SPLIT",
         "EVICT_OUT", "SPLIT_STATS", "WARP_STATS", "PARAMS_ACC", "EVICT_W"}


def test_cases_are_the_benchmarks_shapes_and_groups_are_covered():
    cases = S.build_cases(smoke=False)
    names = {c.name for c in cases}
    assert "softmax bfloat16 32768x8192" in names and "softmax float32 32768x8192" in names
    assert "log_softmax bfloat16 2048x151936 vocab-151936" in names
    assert {"layer_norm bfloat16 32768x8192", "rms_norm float32 32768x8192", "group_norm bfloat16 64x256x128x128",
            "batch_norm bfloat16 64x256x128x128"} <= names
    assert {c.group for c in cases} == set(S.VARIANTS)
    g = next(c for c in cases if c.op == "group_norm")
    assert g.rule == "norm_rows" and g.facts == {"rows": 64 * 32, "cols": 8 * 128 * 128}
    smoke = S.build_cases(smoke=True)
    assert [c.group for c in smoke] == [c.group for c in cases]  # the same groups, on tiny shapes


def test_variant_table_is_well_formed():
    for group, variants in S.VARIANTS.items():
        assert variants and all(v and set(v) <= KNOWN for v in variants), group
        assert len({repr(sorted(v.items())) for v in variants}) == len(variants), f"{group}: a repeated variant"
        for v in variants:
            assert v.get("EXP_OUT", 0) in (0, 1, 2) and v.get("EXP_OUT2", 0) in (0, 1, 2)
            assert v.get("CHUNK", 0) in (0, 2, 4, 8, 16)
            assert set(S.smoke_settings(v)) == set(v)
            assert all(S.smoke_settings(v)[k] <= 16 for k in v if k.startswith("BLOCK_"))


def test_checks_tell_match_from_mismatch():
    a = nbx.from_numpy(np.array([[1.0, np.nan, 3.0]], dtype=np.float32)).to(nbx.bfloat16)
    assert S.check_same(nbx, a, a.clone()) == "ok"
    b = nbx.from_numpy(np.array([[1.0, np.nan, 3.5]], dtype=np.float32)).to(nbx.bfloat16)
    assert S.check_same(nbx, b, a).startswith("mismatch")
    assert S.check_same(nbx, a.float(), a).startswith("mismatch")  # dtype
    case = next(c for c in S.build_cases(smoke=True) if c.op == "layer_norm" and "bfloat16" in c.name)
    x = nbx.from_numpy(np.random.default_rng(0).standard_normal((40, 16)).astype(np.float32)).to(nbx.bfloat16)
    w, bias = nbx.ones(16, dtype=nbx.bfloat16), nbx.zeros(16, dtype=nbx.bfloat16)
    y = nbx.nn.functional.layer_norm(x, [16], w, bias, 1e-5)
    assert S.check_oracle(nbx, case, [x, w, bias], y) == "ok"
    bad = y.clone()
    bad[39, 3] = 5.0  # in the last rows: the oracle looks at both ends
    assert S.check_oracle(nbx, case, [x, w, bias], bad).startswith("mismatch vs oracle (1 of")


@pytest.mark.skipif(os.environ.get("NBX_TRITON_INTERPRET", "0") == "1", reason="runs its own interpreter process")
def test_smoke_run_writes_checked_rows(tmp_path):
    env = dict(os.environ, NBX_TRITON_INTERPRET="1", PYTHONPATH=os.path.join(REPO, "src"))
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "sweep_rows.py"), "--device", "cpu", "--smoke",
                           "--out", str(tmp_path), "--cases", "softmax float32 8x16,group_norm,batch_norm",
                           "--budget-s", "200"], capture_output=True, text=True, env=env, timeout=400, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader(open(tmp_path / "sweep_rows.csv", encoding="utf-8")))
    assert {r["case"] for r in rows} == {"softmax float32 8x16", "group_norm bfloat16 2x4x4x8",
                                         "batch_norm bfloat16 2x4x4x8"}
    n = len(S.VARIANTS["softmax_rows (one tile)"]) + len(S.VARIANTS["norm_rows (group)"]) + \
        len(S.VARIANTS["batch_norm"]) + 3
    assert len(rows) == n
    assert all(r["status"] in ("ok", "ok (reference)") for r in rows), [r["status"] for r in rows]
    assert all(float(r["p50_ms"]) > 0 and r["table_config"] for r in rows)
    assert "per group, best geometric mean" in proc.stdout and len(proc.stdout.splitlines()) < 120
