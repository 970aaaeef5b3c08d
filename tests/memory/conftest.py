"""Fixtures for the allocator tests: a fake raw-memory provider (``fake_raw.FakeRaw``) and an allocator over it."""

from __future__ import annotations

import pytest

from fake_raw import FakeRaw


@pytest.fixture
def raw():
    return FakeRaw()


@pytest.fixture
def alloc(raw):
    from nbxtensor.memory import CachingAllocator
    return CachingAllocator(raw, "fake:0", 0)
