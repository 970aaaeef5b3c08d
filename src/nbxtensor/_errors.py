"""One helper for checks, and the library's own exception types.

Messages name the function, the argument, what was expected and what was received
(../shared/STYLE.md). Exception types match what PyTorch raises for the same misuse:
``RuntimeError`` for most tensor misuse, ``TypeError`` for wrong argument types,
``IndexError`` for out-of-range dims and indices, ``ValueError`` for bad values.
"""

from __future__ import annotations

from typing import Callable, NoReturn

__all__ = ["check", "fail", "OutOfMemoryError", "DeviceError"]


def check(cond: object, message: Callable[[], str] | str, exc: type[BaseException] = RuntimeError) -> None:
    """Raise ``exc(message())`` when ``cond`` is false.

    ``message`` is a callable so that the text is only built on failure (checks sit on hot paths).

    Raises:
        exc: with the message, when ``cond`` is falsy.
    """
    if not cond:
        raise exc(message() if callable(message) else message)


def fail(message: str, exc: type[BaseException] = RuntimeError) -> NoReturn:
    """Raise ``exc(message)`` unconditionally (for branches that are errors)."""
    raise exc(message)


class OutOfMemoryError(RuntimeError):
    """A device allocator could not satisfy a request, even after releasing its cached blocks.

    The message gives the requested, free, total, allocated and reserved bytes. Subclasses
    ``RuntimeError`` as ``torch.OutOfMemoryError`` does.
    """


class DeviceError(RuntimeError):
    """A device driver call failed; the message names the call and the decoded error name."""
