"""The CUDA driver through ``cuda-bindings``: loading it once, and the one function that checks every call.

``cuda.bindings.driver`` imports on any machine; its first call dlopens ``libcuda.so.1``. On a machine with no
NVIDIA driver that raises ``RuntimeError`` ("Failed to dlopen libcuda.so.1", or cuda-pathfinder's
``DynamicLibNotFoundError`` in newer releases): :func:`init` catches it once and records "no CUDA device", so
CPU-only machines import the CUDA code and skip cleanly (../shared/DESIGN.md).

Every driver call goes through :func:`call`: a failure becomes :class:`CudaError` with the decoded error name
(``CUDA_ERROR_OUT_OF_MEMORY``), the driver's description and the call with its arguments.
"""

from __future__ import annotations

import threading

from ..._errors import DeviceError

__all__ = ["CudaError", "NoCudaError", "cu", "init", "available", "unavailable_reason", "call", "error_name",
           "driver_version", "NOT_READY", "OUT_OF_MEMORY"]

NOT_READY = 600          # CUDA_ERROR_NOT_READY: cuEventQuery / cuStreamQuery on unfinished work
OUT_OF_MEMORY = 2        # CUDA_ERROR_OUT_OF_MEMORY
NO_DEVICE = 100          # CUDA_ERROR_NO_DEVICE

try:
    from cuda.bindings import driver as cu
    _IMPORT_ERROR: Exception | None = None
except ImportError as _e:  # the [gpu] extra is not installed
    cu = None
    _IMPORT_ERROR = _e


class CudaError(DeviceError):
    """A CUDA driver call failed.

    Attributes:
        code: the ``CUresult`` value (int).
        name: its decoded name (``"CUDA_ERROR_INVALID_VALUE"``).
        call: the failing call as text (``"cuMemAlloc(1024)"``).
    """

    def __init__(self, message: str, code: int = -1, name: str = "", call: str = ""):
        super().__init__(message)
        self.code = code
        self.name = name
        self.call = call


class NoCudaError(DeviceError):
    """CUDA is not usable in this process (no cuda-bindings, no driver, or no device); the message says which."""


_lock = threading.Lock()
_state: dict = {"done": False, "reason": None}


def init() -> None:
    """Initialise the driver once (``cuInit(0)``).

    Raises:
        NoCudaError: cuda-bindings missing, ``libcuda.so.1`` missing (no NVIDIA driver), or no device; the same
            error (with the first cause) on every later call.
    """
    if _state["done"]:
        if _state["reason"] is not None:
            raise NoCudaError(_state["reason"])
        return
    with _lock:
        if not _state["done"]:
            reason = None
            if cu is None:
                reason = f"no CUDA device: cuda-bindings is not installed ({_IMPORT_ERROR}); install nbxtensor[gpu]"
            else:
                try:
                    (err,) = cu.cuInit(0)
                    if int(err) == NO_DEVICE:
                        reason = "no CUDA device: cuInit reports CUDA_ERROR_NO_DEVICE"
                    elif int(err) != 0:
                        reason = f"no CUDA device: cuInit(0) failed with {error_name(int(err))}"
                except RuntimeError as e:  # "Failed to dlopen libcuda.so.1" / DynamicLibNotFoundError
                    reason = f"no CUDA device: the NVIDIA driver library could not be loaded ({e})"
            _state["reason"] = reason
            _state["done"] = True
    if _state["reason"] is not None:
        raise NoCudaError(_state["reason"])


def available() -> bool:
    """True when the driver loads and reports at least one device (never raises)."""
    try:
        init()
    except NoCudaError:
        return False
    return True


def unavailable_reason() -> str | None:
    """Why CUDA is not usable here (None when it is)."""
    available()
    return _state["reason"]


def error_name(code: int) -> str:
    """The name of ``CUresult`` ``code`` (``"CUDA_ERROR_INVALID_VALUE"``), without needing the driver."""
    if cu is not None:
        try:
            return cu.CUresult(code).name
        except ValueError:
            pass
    return f"CUresult {code}"


def _describe(code: int) -> str:
    try:
        err, s = cu.cuGetErrorString(cu.CUresult(code))
        if int(err) == 0 and s:
            return s.decode() if isinstance(s, bytes) else str(s)
    except Exception:  # the description is a courtesy; never hide the real error behind another
        pass
    return ""


def _fmt(a) -> str:
    if isinstance(a, int) and not isinstance(a, bool) and abs(a) > 4096:
        return hex(a)
    try:
        return str(int(a)) if type(a).__name__.startswith("CU") else repr(a)
    except (TypeError, ValueError):
        return repr(a)


def raise_error(fn, code: int, args: tuple) -> None:
    """Raise :class:`CudaError` for ``fn(*args)`` having returned ``code``."""
    name = error_name(code)
    desc = _describe(code)
    what = f"{getattr(fn, '__name__', fn)}({', '.join(_fmt(a) for a in args)})"
    raise CudaError(f"CUDA driver call {what} failed: {name} ({code}){': ' + desc if desc else ''}", code, name, what)


def call(fn, *args):
    """Call driver function ``fn(*args)`` and return its results (None, one value, or a tuple).

    Raises:
        CudaError: the call returned an error, with its decoded name and the call text.
    """
    r = fn(*args)
    if r[0]:
        raise_error(fn, int(r[0]), args)
    n = len(r)
    return None if n == 1 else r[1] if n == 2 else r[1:]


def driver_version() -> int:
    """The driver's CUDA version as an int (12040 for 12.4)."""
    init()
    return int(call(cu.cuDriverGetVersion))
