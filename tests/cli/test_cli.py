"""The ``nbx`` command line: ``info`` (text and JSON, torch not imported), dispatch to subcommand modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest

from nbxtensor import cli


def test_info_prints_versions_and_that_torch_is_not_imported(capsys):
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    for word in ("python", "numpy", "triton", "cuda-bindings", "torch imported:"):
        assert word in out
    if "torch" not in sys.modules:
        assert "torch imported: no" in out


def test_info_json(capsys):
    assert cli.main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["python"] and info["numpy"] and isinstance(info["devices"], list)
    from nbxtensor.runtime import fastlaunch
    # which fast path cached launches take (C or Python, and why), as fastlaunch.status() says
    assert info["launch_path"] == fastlaunch.status() and "fast path" in info["launch_path"]
    assert info["cuda_available"] == (len(info["devices"]) > 0)
    for d in info["devices"]:
        assert d["facts"]["arch"] == d["arch"] and d["total_memory"] > 0


def test_info_in_a_fresh_process_never_imports_torch():
    code = "import sys; from nbxtensor.cli import main; main(['info']); print('TORCH', 'torch' in sys.modules)"
    src = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "src"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert "TORCH False" in r.stdout and "torch imported: no" in r.stdout


def test_no_command_prints_help_and_exits_0(capsys):
    # bare `nbx` is a request for help: the help on stdout, exit 0, as `nbx --help` and `pip` (git exits 1)
    assert cli.main([]) == 0
    cap = capsys.readouterr()
    assert "info" in cap.out and "generate" in cap.out and cap.err == ""
    with pytest.raises(SystemExit) as e:
        cli.main(["--help"])
    assert e.value.code == 0


def test_demo_dispatches_to_its_module(monkeypatch, capsys):
    calls = []
    fake = types.SimpleNamespace(run=lambda args: calls.append(args.command) or 0)
    real = cli._module
    monkeypatch.setattr(cli, "_module", lambda name: fake if name == "demo" else real(name))
    assert cli.main(["demo"]) == 0 and calls == ["demo"]


def test_a_missing_subcommand_module_says_so(monkeypatch, capsys):
    real = cli._module
    monkeypatch.setattr(cli, "_module", lambda name: None if name == "demo" else real(name))
    assert cli.main(["demo"]) == 2
    assert "not available in this build" in capsys.readouterr().err


def _usage_error(capsys, argv) -> str:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1 and "usage:" not in cap.err, cap.err
    return cap.err


def test_unknown_command_exits_2():
    with pytest.raises(SystemExit) as e:
        cli.main(["nope"])
    assert e.value.code == 2


@pytest.mark.parametrize("argv, prog, msg", [
    (["generate"], "nbx generate", "the following arguments are required: --prompt"),
    (["embed"], "nbx embed", "the following arguments are required: TEXT"),
    (["foo"], "nbx", "invalid choice: 'foo'"),
    (["generate", "--prompt", "hi", "--max-new-tokens", "x"], "nbx generate", "invalid int value: 'x'"),
    (["inspect", "model.gguf", "--bogus"], "nbx inspect", "unrecognized arguments: --bogus"),
    (["info", "extra"], "nbx info", "unrecognized arguments: extra"),
    (["--bogus"], "nbx", "unrecognized arguments: --bogus"),
])
def test_usage_errors_are_one_line_and_exit_2(capsys, argv, prog, msg):
    # argparse's usage block is not printed: one line naming the subcommand and where its help is
    err = _usage_error(capsys, argv)
    assert err.startswith(f"{prog}: error: ") and msg in err and err.rstrip().endswith(f"(see {prog} --help)"), err


@pytest.mark.parametrize("name", list(cli.SUBCOMMANDS))
def test_every_subcommand_has_help(capsys, name):
    with pytest.raises(SystemExit) as e:
        cli.main([name, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: nbx {name}") and cli.SUBCOMMANDS[name][1].split(" ")[0] in out


def test_a_bad_device_reads_the_same_in_every_subcommand(capsys):
    """demo, generate and embed check --device before loading anything, with one message and exit status 1."""
    lines = {}
    for cmd in (["demo"], ["generate", "--prompt", "hi"], ["embed", "hi"]):
        assert cli.main(cmd + ["--device", "meta"]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"nbx {cmd[0]}: error: ") and err.count("\n") == 1, err
        lines[cmd[0]] = err.split(": error: ", 1)[1]
    assert len(set(lines.values())) == 1 and "--device: device type 'meta' has no backend" in lines["demo"], lines
