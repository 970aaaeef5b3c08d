"""Architecture facts as data: one JSON file per GPU architecture (``sm70.json`` ... ``sm120.json``).

A file holds what is fixed for the architecture and the driver does not report in a form kernels can use:
shared memory per block with opt-in (``smem_per_block_optin``), per SM, registers, warp size, resident threads
and blocks per SM, the matrix unit (its instructions and dtypes), whether TMA / clusters / ``cp.async`` exist,
and *tile ladders*: the block sizes, warps and stages tuning may try per op family. What differs between parts
of one architecture (SM count, memory size, clocks, L2) is read from the driver at run time
(:func:`nbxtensor.cuda.get_device_properties`), never written here.

A missing file or key is an error naming the architecture and the key: a guessed fact would silently mistune
every kernel.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache

__all__ = ["ARCHES", "REQUIRED_KEYS", "MissingFactError", "facts", "fact", "arch_name", "FACTS_DIR"]

FACTS_DIR = os.path.dirname(__file__)
ARCHES = ("sm70", "sm80", "sm86", "sm89", "sm90", "sm100", "sm120")
REQUIRED_KEYS = ("arch", "name", "compute_capability", "warp_size", "max_threads_per_block", "max_threads_per_sm",
                 "max_blocks_per_sm", "registers_per_sm", "registers_per_block", "max_registers_per_thread",
                 "smem_per_block_default", "smem_per_block_optin", "smem_per_sm", "async_copy", "tma",
                 "thread_block_clusters", "programmatic_dependent_launch", "matrix_unit", "tile_ladders", "source")


class MissingFactError(KeyError):
    """A facts file or key that does not exist; the message names the architecture and the key."""

    def __str__(self) -> str:  # KeyError would print the message in quotes
        return str(self.args[0]) if self.args else ""


def arch_name(major: int, minor: int) -> str:
    """The facts-file name for compute capability ``(major, minor)``: ``(9, 0)`` -> ``"sm90"``."""
    return f"sm{int(major)}{int(minor)}"


@lru_cache(maxsize=None)
def _load(arch: str, directory: str) -> dict:
    path = os.path.join(directory, f"{arch}.json")
    if not os.path.exists(path):
        raise MissingFactError(f"device facts: no facts file for architecture '{arch}' ({path}); known "
                               f"architectures: {', '.join(ARCHES)}")
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if missing:
        raise MissingFactError(f"device facts: architecture '{arch}' ({path}) lacks key(s) {missing}")
    if data["arch"] != arch:
        raise MissingFactError(f"device facts: {path} says arch '{data['arch']}', expected '{arch}'")
    return data


def facts(arch: str, *, directory: str | None = None) -> dict:
    """All facts of ``arch`` (``"sm90"``), validated to hold every key of :data:`REQUIRED_KEYS`.

    Raises:
        MissingFactError: no file for ``arch``, or a required key missing (naming both).
    """
    return _load(arch, directory or FACTS_DIR)


def fact(arch: str, key: str, *, directory: str | None = None):
    """One fact: ``key`` may be dotted (``"matrix_unit.dtypes"``, ``"tile_ladders.matmul.BLOCK_M"``).

    Raises:
        MissingFactError: no file for ``arch``, or no such key (naming the architecture and the key).
    """
    node = facts(arch, directory=directory)
    for i, part in enumerate(key.split(".")):
        if not isinstance(node, dict) or part not in node:
            have = sorted(node) if isinstance(node, dict) else type(node).__name__
            raise MissingFactError(f"device facts: architecture '{arch}' has no key '{key}' (no "
                                   f"'{'.'.join(key.split('.')[:i + 1])}'; available there: {have})")
        node = node[part]
    return node
