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
             "UNROLL", "EVEN", "INTERLEAVE", "target_per_sm", "WORDS", "VAR_SHIFT", "LSE_EX2", "ARG_FAST",
             "COUNT32", "ARG_ROW", "ARG_ROW_WARPS", "ARG_ROW_M", "LSE_TILE", "FINISH_LAST"}
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
                           "--out", str(tmp_path), "--cases", "rms_norm,max(dim=0)", "--budget-s", "250"],
                          capture_output=True, text=True, env=env, timeout=400, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = list(csv.DictReader(open(tmp_path / "sweep_reduce.csv", encoding="utf-8")))
    assert {r["case"] for r in rows} == {"rms_norm", "max(dim=0)"}
    assert len(rows) == len(S.VARIANTS["norm_rows"]) + len(S.VARIANTS["reduce_cols"]) + 2
    assert all(r["status"] in ("ok", "ok (reference)") for r in rows), [r["status"] for r in rows]
    assert all(float(r["p50_ms"]) > 0 and r["table_config"] for r in rows)
    assert "per rule, best geometric mean" in proc.stdout and len(proc.stdout.splitlines()) < 120


def test_shared_run_plan_and_report(tmp_path, capsys):
    """sweep_common.run_plan (used by sweep_reduce and sweep_rows): an exception becomes the row's error status and
    a traceback in the log, every row reaches the CSV, an exhausted budget skips; report_rank_sweep prints the
    per-group winner, the merged rule config and counts mismatches with the sweep's own predicate."""
    import sweep_common as SC

    class C:
        def __init__(self, name):
            self.name, self.group = name, "g"
    cases = [C("a"), C("b")]
    plan = SC.rank_plan(cases, lambda c: [{"X": 1}])
    state = {c.name: {"ref": None, "bytes": 2 ** 20, "table": {"X": 0}} for c in cases}

    def run_variant(row, case, settings, started):
        if case.name == "b" and settings:
            raise ValueError("boom\nsecond line")
        row.update(status="ok", gbps=100.0 if settings else 50.0, pct_of_4800=1.0, p50_ms=0.01)
    csv_path = str(tmp_path / "s.csv")
    log = str(tmp_path / "s.log")
    rows, skipped = SC.run_plan(plan, budget_s=0, t0=0.0, est=0.5, run_variant=run_variant,
                                make_row=lambda rank, c, s: {"case": c.name, "rule": c.group,
                                                             "variant": f"v{rank}" if s else "table",
                                                             "settings": SC.fmt_settings(s)},
                                writer=SC.CsvRows(csv_path, ["case", "variant", "status"]), log_path=log)
    assert skipped == 0 and [r["status"] for r in rows] == ["ok", "ok", "ok", "error: ValueError: boom"]
    assert len(list(csv.DictReader(open(csv_path)))) == 4 and "boom" in open(log).read()
    _, skipped = SC.run_plan(plan, budget_s=1.0, t0=-10.0, est=0.5, make_row=None, run_variant=None,
                             writer=SC.CsvRows(str(tmp_path / "t.csv"), ["case"]), log_path=log)
    assert skipped == len(plan)
    def report(cs):
        SC.report_rank_sweep("sw", rows, cs, state, 0, 1.0, 1.0, csv_path, [], target_pct=85.0, group_field="rule",
                             heading="per rule:", missing="{group}: none of {n}", case_width=4, group_width=4,
                             rule_config=True, is_mismatch=lambda s: s.startswith("mismatch"))
    report(cases[:1])  # a alone: v1 (100 GB/s) beats the table (50)
    out = capsys.readouterr().out
    assert 'a [g {"X":0}] 1 MiB moved' in out and '-> rule config {"X": 1}' in out
    assert "sw: 4 variants run, 0 skipped for the 1 s budget, 1 errors, 0 mismatches" in out
    rows[0]["status"] = "mismatch: output 0"
    report(cases)  # b's v1 failed: no setting ran on all of the group's cases
    out = capsys.readouterr().out
    assert "  g: none of 2" in out and "1 errors, 1 mismatches" in out
