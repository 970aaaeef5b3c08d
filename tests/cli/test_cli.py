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


def test_no_command_prints_help(capsys):
    assert cli.main([]) == 2
    assert "info" in capsys.readouterr().out


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


def test_unknown_command_exits_2():
    with pytest.raises(SystemExit) as e:
        cli.main(["nope"])
    assert e.value.code == 2
