"""benchmarks/probe_ws_attention.py: its check finds wrong rows (NaN or off values) and the first one, and under
the interpreter every variant of the probe kernel, with and without warp specialization, matches the oracle."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

INTERPRET = os.environ.get("NBX_TRITON_INTERPRET", "0") == "1"


def test_first_wrong_row():
    import probe_ws_attention as P
    want = np.zeros((200, 4))
    assert P.first_wrong_row(want.copy(), want, 0.01) is None
    got = want.copy()
    got[131, 2] = np.nan
    got[150, 0] = 1.0
    assert P.first_wrong_row(got, want, 0.01) == 131
    got[131, 2] = 0.005                                   # within the tolerance
    assert P.first_wrong_row(got, want, 0.01) == 150


def test_variants_cover_each_switch_alone_and_all():
    import probe_ws_attention as P
    vs = dict(P.variants())
    assert vs["tutorial"] == {} and vs["all"] == {s: True for s in P.SWITCHES}
    assert all(vs[s.lower()] == {s: True} for s in P.SWITCHES)


@pytest.mark.skipif(INTERPRET, reason="runs the probe in a subprocess under the interpreter itself (tier 1)")
def test_smoke_every_variant_matches_the_oracle():
    """The probe under Triton's interpreter (a subprocess: the interpreter is chosen at import), tiny shapes."""
    import subprocess
    import probe_ws_attention as P
    env = dict(os.environ, NBX_TRITON_INTERPRET="1", PYTHONPATH=os.path.join(REPO, "src"))
    r = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "probe_ws_attention.py"), "--device", "cpu",
                        "--smoke"], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [ln for ln in r.stdout.splitlines() if ln.split()[1:2] in (["on"], ["off"])]
    assert len(lines) == 2 * len(P.variants()), r.stdout
    assert all(ln.count(" ok (max err") == 2 for ln in lines), r.stdout   # before and after the timings
    assert "inputs unchanged after the timings: True" in r.stdout


def test_describe_counts_wrong_rows_and_names_the_tile_row():
    import probe_ws_attention as P
    want = np.zeros((256, 4))
    got = want.copy()
    assert P.describe([(got, want)], 0.01, 128).startswith("ok (max err 0.0e+00)")
    got[130, 1] = np.nan
    got[200, 0] = 0.5
    line = P.describe([(got, want), (want.copy(), want)], 0.01, 128)
    assert line == "WRONG row 130 (mod 128: 2), 2 rows, err 5.0e-01", line
