"""Shared test configuration.

``NBX_TEST_DEVICE`` selects the device the device-parametrised tests run on (``cpu`` by default; the GPU tier
script sets ``cuda``). Tests that compare with PyTorch are marked ``parity`` and skip where torch is absent.
"""

import importlib.util
import os

import pytest

TEST_DEVICE = os.environ.get("NBX_TEST_DEVICE", "cpu")
HAVE_TORCH = importlib.util.find_spec("torch") is not None


@pytest.fixture
def device():
    """The device under test (``NBX_TEST_DEVICE``, default ``cpu``)."""
    if TEST_DEVICE.startswith("cuda"):
        import nbxtensor as nbx
        if not nbx.cuda.is_available():
            pytest.skip("NBX_TEST_DEVICE=cuda but no CUDA device is available")
        # With an index, as tensors report it: PyTorch's device("cuda") != device("cuda:0"), and so is ours.
        return TEST_DEVICE if ":" in TEST_DEVICE else f"cuda:{nbx.cuda.current_device()}"
    return TEST_DEVICE


def pytest_collection_modifyitems(config, items):
    skip_parity = pytest.mark.skip(reason="torch is not installed (parity suite)")
    for item in items:
        if "parity" in item.keywords and not HAVE_TORCH:
            item.add_marker(skip_parity)
