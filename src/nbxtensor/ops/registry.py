"""The one op table: each operator is one ``OpRecord``, registered by its family module.

The table drives dispatch (``impl(name, device_type)``), ``Tensor`` methods, the test matrix, the benchmark
matrix and the cost census (../shared/STYLE.md, "One declaration per operator"). Families add fields as they
need them; nothing outside this table lists operators.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .._errors import check
from ..runtime.launcher import interpreting

__all__ = ["Cost", "OpRecord", "register", "get", "all_ops", "impl"]


@dataclass(frozen=True)
class Cost:
    """What one launch costs, declared before it runs.

    Attributes:
        flops: floating-point (or integer) operations counted as in the roofline model (an FMA is 2).
        bytes_read: bytes read from device memory, each input byte counted once.
        bytes_written: bytes written to device memory.
        workspace_bytes: scratch memory the launch needs beyond its outputs.
        workspace_lifetime: ``"launch"`` (freed after the launch) or ``"persistent"``.
    """

    flops: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    workspace_bytes: int = 0
    workspace_lifetime: str = "launch"


@dataclass
class OpRecord:
    """One operator.

    Attributes:
        name: the ATen name (``"add"``, ``"copy_"``).
        family: the module that defines it (``"elementwise"``).
        cpu: the NumPy implementation for the ``cpu`` device.
        cost: a callable returning a :class:`Cost` for given arguments.
        oracle: a float64 NumPy reference, separate from ``cpu`` (``None`` only with ``oracle_note``).
        oracle_note: why an op has no float64 oracle (exact ops defined by a rule).
        triton: the implementation that launches Triton kernels: used for ``cuda`` tensors, and for ``cpu``
            tensors under the interpreter tier (``NBX_TRITON_INTERPRET=1``), so CI runs every kernel.
        extra: family-specific fields (promotion kind, allowed dtypes, error cases, tolerance override ...).
    """

    name: str
    family: str
    cpu: Callable
    cost: Callable
    oracle: Callable | None = None
    oracle_note: str = ""
    triton: Callable | None = None
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        check(self.oracle is not None or self.oracle_note, lambda: f"op {self.name}: an op needs a float64 oracle "
              "or an oracle_note saying why it has none", ValueError)


_TABLE: dict[str, OpRecord] = {}


def register(rec: OpRecord) -> OpRecord:
    """Add ``rec`` to the table.

    Raises:
        ValueError: an op of that name is already registered.
    """
    check(rec.name not in _TABLE, lambda: f"op {rec.name} is registered twice", ValueError)
    _TABLE[rec.name] = rec
    return rec


def get(name: str) -> OpRecord:
    """The record of op ``name``.

    Raises:
        KeyError: no such op, naming it.
    """
    rec = _TABLE.get(name)
    if rec is None:
        raise KeyError(f"no op named {name!r} in the op table")
    return rec


def all_ops() -> list[OpRecord]:
    """Every registered op, in registration order."""
    return list(_TABLE.values())


def impl(name: str, device_type: str) -> Callable:
    """The implementation of op ``name`` for ``device_type``: ``cpu`` -> the NumPy implementation (the Triton
    one under the interpreter tier), ``cuda`` -> the Triton one.

    Raises:
        NotImplementedError: the op has no implementation for that device type (a loud refusal, never a
            silent fallback to another device).
    """
    rec = get(name)
    if device_type == "cpu":
        return rec.triton if (rec.triton is not None and interpreting()) else rec.cpu
    if device_type == "cuda" and rec.triton is not None:
        return rec.triton
    raise NotImplementedError(f"{name}: no implementation for device type '{device_type}' (it has: cpu"
                              f"{', triton (cuda)' if rec.triton is not None else ''})")
