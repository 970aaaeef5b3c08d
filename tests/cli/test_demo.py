"""`nbx demo` runs end to end on the CPU and every check matches."""

import subprocess
import sys

from nbxtensor.cli import main


def test_demo_runs_and_all_checks_match(capsys):
    rc = main(["demo", "--device", "cpu"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "0 did not" in out
    assert "MISMATCH" not in out


def test_demo_as_a_subprocess_without_torch():
    code = ("import sys; sys.modules['torch'] = None; from nbxtensor.cli import main; "
            "raise SystemExit(main(['demo', '--device', 'cpu']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "torch imported: False" in r.stdout
