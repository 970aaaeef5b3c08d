"""Launch keys and the per-architecture config tables that kernels read their settings from.

A kernel never hard-codes its block size, warps or stages: its host wrapper asks :func:`launch_config` with a
:class:`LaunchKey` (op, dtypes, bucketed shape, architecture). Tables live in ``runtime/configs/<arch>.json``
(``sm90.json``, ``interpret.json``, ...) and ``generic.json`` is consulted when the architecture's file has no
entry for the op. Autotuning (a later issue) writes certified entries that replace these defaults without
touching kernels.

Table format::

    {"<op>": [{"max_numel": 65536, "config": {"BLOCK": 1024, "num_warps": 4}},
              {"config": {"BLOCK": 4096, "num_warps": 8}}]}

Rules are tried in order; a rule matches when every ``max_<dim>`` bound it names holds for the key's shape
facts (``numel``, ``rows``, ``cols``, ... as the op passes them) and every ``dtypes`` it names equals the key's.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

from .._errors import check

__all__ = ["LaunchKey", "bucket", "launch_config", "arch_of", "override", "state", "CONFIG_DIR"]

CONFIG_DIR = os.path.join(os.path.dirname(__file__), "configs")


def bucket(n: int) -> int:
    """The next power of two >= ``n`` (1 for n <= 1): shapes are keyed by bucket, not exact size."""
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


@dataclass(frozen=True)
class LaunchKey:
    """What a kernel's settings may depend on.

    Attributes:
        op: the op (or kernel) name in the tables.
        dtypes: dtype names of the inputs/outputs that matter (``("float16",)``).
        shape: ``(("numel", 1048576),)``-style pairs of bucketed shape facts.
        arch: ``"sm90"``, ``"sm80"``, ... or ``"interpret"`` for the interpreter tier.
    """

    op: str
    dtypes: tuple[str, ...]
    shape: tuple[tuple[str, int], ...]
    arch: str


def arch_of(device) -> str:
    """The table name for ``device``: ``"interpret"`` for CPU tensors (interpreter tier), ``"sm<major><minor>"``
    for a CUDA device (from the driver's compute capability)."""
    if device.type == "cpu":
        return "interpret"
    from .. import cuda
    major, minor = cuda.get_device_capability(device.index)
    return f"sm{major}{minor}"


@lru_cache(maxsize=None)
def _table(arch: str) -> dict:
    path = os.path.join(CONFIG_DIR, f"{arch}.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@lru_cache(maxsize=None)
def _table_ops() -> frozenset:
    """The op names that have rules in some table of CONFIG_DIR."""
    ops = set()
    for name in os.listdir(CONFIG_DIR):
        if name.endswith(".json"):
            ops.update(_table(name[:-5]))
    return frozenset(ops)


def _match(rule: dict, key: LaunchKey) -> bool:
    facts = dict(key.shape)
    for name, bound in rule.items():
        if name.startswith("max_"):
            fact = name[4:]
            check(fact in facts, lambda: f"launch_config: rule for {key.op} bounds '{fact}' but the launch key has "
                  f"only {sorted(facts)}", KeyError)
            if facts[fact] > bound:
                return False
        elif name == "dtypes" and tuple(bound) != key.dtypes:
            return False
    return True


# Answers of launch_config by (op, device type, device index, dtypes, shape facts as passed): a decode step asks
# the same questions every token, and the rule search below costs ~30 Python calls. Valid while ``arch_of`` is the
# function that filled it (tests swap it) and no override is in force (sweeps bypass the memo).
_MEMO: dict = {}
_MEMO_MAX = 4096
_memo_arch = None


def launch_config(op: str, device, *, dtypes=(), **shape_facts: int) -> dict:
    """The settings for launching ``op`` on ``device`` with the given dtypes and shape facts.

    Answers are memoised per (op, device, dtypes, shape facts): a repeated question costs a dict lookup and a
    copy of the answer. The memo is bypassed while an :func:`override` is in force, and dropped when
    :func:`arch_of` is replaced.

    Args:
        op: the op's name in the tables.
        device: the launch device (``cpu`` means the interpreter tier).
        dtypes: dtypes (or names) the choice may depend on.
        shape_facts: sizes such as ``numel=...``, ``cols=...``; bucketed to powers of two.

    Returns:
        A new dict of constexpr values and launch options (``BLOCK``, ``num_warps``, ...).

    Raises:
        KeyError: neither the architecture's table nor ``generic.json`` has a rule for ``op`` that matches,
            naming the op, the architecture and the key.
    """
    global _memo_arch
    if _OVERRIDES:
        return _launch_config(op, device, dtypes, shape_facts)
    if _memo_arch is not arch_of:
        _MEMO.clear()
        _memo_arch = arch_of
    try:
        key = (op, device.type, device.index, tuple(dtypes), *shape_facts.items())
        hit = _MEMO.get(key)
    except TypeError:  # an unhashable fact: no memo
        return _launch_config(op, device, dtypes, shape_facts)
    if hit is None:
        if len(_MEMO) >= _MEMO_MAX:
            _MEMO.clear()
        hit = _MEMO[key] = _launch_config(op, device, dtypes, shape_facts)
    return hit.copy()


def _launch_config(op: str, device, dtypes, shape_facts: dict) -> dict:
    names = tuple(getattr(d, "name", d) for d in dtypes)
    key = LaunchKey(op, names, tuple(sorted((k, bucket(v)) for k, v in shape_facts.items())), arch_of(device))
    for arch in (key.arch, "generic"):
        for rule in _table(arch).get(op, []):
            if _match(rule, key):
                cfg = dict(rule["config"])
                cfg.update(_OVERRIDES.get(op, {}))
                return cfg
    raise KeyError(f"launch_config: no config for op '{op}' on architecture '{key.arch}' (key {key}); add a rule to "
                   f"runtime/configs/{key.arch}.json or generic.json")


_OVERRIDES: dict[str, dict] = {}


@contextmanager
def override(op: str, **settings):
    """Within the ``with`` block, every :func:`launch_config` answer for ``op`` has ``settings`` laid over the
    table's matching rule (for sweeps that time candidate settings before one is written into a table).

    Args:
        op: the op's name in the tables.
        settings: constexpr values and launch options (``BLOCK_N=64, num_warps=8``).

    Raises:
        TypeError: ``settings`` is empty.
        KeyError: ``op`` is not an entry of any table (``launch_config`` would never read the settings).
    """
    global _GEN
    check(bool(settings), lambda: f"override: give at least one setting for op '{op}'", TypeError)
    known = _table_ops()
    check(op in known, lambda: f"override: op '{op}' is not an entry of any config table (runtime/configs/*.json); "
          f"known: {', '.join(sorted(known))}", KeyError)
    before = _OVERRIDES.get(op)
    _OVERRIDES[op] = {**(before or {}), **settings}
    _GEN += 1
    try:
        yield
    finally:
        if before is None:
            _OVERRIDES.pop(op, None)
        else:
            _OVERRIDES[op] = before
        _GEN += 1


_GEN = 0   # bumped whenever an override starts or ends


def state() -> tuple:
    """A token equal between two calls exactly when :func:`launch_config` answers the same questions the same way
    (the architecture lookup and the overrides in force): plans built from its answers are keyed on it."""
    return (arch_of, _GEN)
