"""What every ``nbx`` subcommand reports the same way: a user error is one line ``nbx <cmd>: error: <message>``
on stderr with exit status 1 (:func:`fail`), and ``--device`` is checked before anything loads
(:func:`resolve_device`). Usage errors found by argparse (a missing argument, an unknown option) are also one
line but exit 2, argparse's convention (:class:`OneLineParser` in :mod:`nbxtensor.cli`).
"""

from __future__ import annotations

import sys

__all__ = ["fail", "resolve_device", "EXIT_USER_ERROR"]

EXIT_USER_ERROR = 1


def fail(cmd: str, msg) -> int:
    """Print ``nbx <cmd>: error: <msg>`` (one line: newlines in ``msg`` become spaces) to stderr; return 1."""
    text = " ".join(str(msg).split("\n"))
    print(f"nbx {cmd}: error: {text}", file=sys.stderr)
    return EXIT_USER_ERROR


def resolve_device(cmd: str, requested: str | None) -> tuple[str | None, int]:
    """The device a subcommand runs on: ``requested`` (``--device``), else ``cuda`` when a GPU is usable, else
    ``cpu``. Returns ``(device, 0)``, or ``(None, 1)`` after printing one error line when the device is
    malformed, has no backend or is absent (``cuda`` on a machine without a usable GPU)."""
    import nbxtensor as nbx
    from ..device.base import as_device
    dev = requested or ("cuda" if nbx.cuda.is_available() else "cpu")
    try:
        d = as_device(dev, arg="--device")
    except (RuntimeError, ValueError, TypeError) as e:
        return None, fail(cmd, e)
    if d.type == "cuda" and not nbx.cuda.is_available():  # as_device normally says so already
        return None, fail(cmd, f"device {dev}: no CUDA device is available here (nbx info says why); use --device cpu")
    return dev, 0
