"""The C fast path of :func:`nbxtensor.runtime.cuda_launch.launch`, built at first use.

``_fastlaunch.c`` (beside this module) does the per-launch bookkeeping of the Python fast path in C: the cache
key, the lookup, the device / use-after-free / hook / grid / context checks, and the call of the cached Triton
launch function with the same argument tuple. It is compiled once per machine with Triton's own
``triton.runtime.build.compile_module_from_src`` (the C compiler and Python headers Triton uses for its
launchers; cached in Triton's cache directory by source hash), so it adds no dependency.

When it cannot be built (no C compiler, no Python headers, Triton missing, ``NBX_FASTLAUNCH=0``) the launcher
keeps its pure-Python fast path, which computes the same key and makes the same call: slower, never different.
The reason is kept for :func:`status`; the build is tried once per process.
"""

from __future__ import annotations

import os
import shutil
import sysconfig
import threading

__all__ = ["load", "status", "SOURCE"]

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_fastlaunch.c")
_NAME = "_nbx_fastlaunch"
_lock = threading.Lock()
_state: dict = {"module": None, "status": "not built yet (the first CUDA launch builds it)", "tried": False}


def _build():
    if os.environ.get("NBX_FASTLAUNCH", "1") == "0":
        return None, "disabled by NBX_FASTLAUNCH=0: the Python fast path"
    try:
        from triton.runtime.build import compile_module_from_src
    except Exception as e:  # noqa: BLE001 - any reason Triton's builder is unusable means: the Python path
        return None, f"Triton's builder unavailable ({type(e).__name__}: {e}): the Python fast path"
    if os.environ.get("CC") is None and shutil.which("gcc") is None and shutil.which("clang") is None:
        return None, "no C compiler (gcc, clang or $CC) found: the Python fast path"
    scheme = sysconfig.get_default_scheme()
    inc = sysconfig.get_paths(scheme="posix_prefix" if scheme == "posix_local" else scheme)["include"]
    if not os.path.exists(os.path.join(inc, "Python.h")):
        return None, f"no Python.h in {inc} (install the Python development headers): the Python fast path"
    try:
        with open(SOURCE) as f:
            src = f.read()
        mod = compile_module_from_src(src, _NAME)
    except Exception as e:  # noqa: BLE001 - a failed build must never fail a launch
        return None, f"build failed ({type(e).__name__}: {e}): the Python fast path"
    return mod, f"C fast path built from {os.path.basename(SOURCE)} ({getattr(mod, '__file__', '?')})"


def load():
    """The compiled module (``fast``, ``bind``, ``hits``, ``noop``, ``PYTHON_PATH``), or ``None`` when it cannot be
    built (see :func:`status`). Builds on the first call only; never raises."""
    if not _state["tried"]:
        with _lock:
            if not _state["tried"]:
                _state["module"], _state["status"] = _build()
                _state["tried"] = True
    return _state["module"]


def status() -> str:
    """Why the launcher uses the C or the Python fast path (the build's outcome, or that it has not run yet)."""
    return _state["status"]
