"""Programmatic dependent launch (PDL): a kernel launched before the previous one on its stream has finished.

Between two dependent kernels the GPU drains the first grid, makes its writes visible and only then launches the
second. With the launch attribute ``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`` (Triton's
``launch_pdl`` option) the second grid may be launched early: as soon as every program of the first has executed
``griddepcontrol.launch_dependents`` (:func:`launch_dependents`) or exited. Its programs must then execute
``griddepcontrol.wait`` (:func:`wait`), which returns once every prerequisite grid has completed and its memory
operations are visible, before they touch memory the previous kernels write or read. Source: CUDA C++
Programming Guide, "Programmatic Dependent Launch and Synchronization"; PTX ISA, ``griddepcontrol`` (sm_90+).

The rule every PDL-aware kernel of nbxtensor follows: :func:`enter` (``wait``, then ``launch_dependents``)
before its first access to global memory, so it reads and writes exactly what it would without PDL. What that
saves is the launch of the next grid, overlapped with the end of the previous one: on the H200 about 0.3 us per
kernel boundary in a CUDA graph (benchmarks/probe_pdl.py), +1.6 to +2.8 % decode tokens/s for a
Llama-3-8B-shaped model in three runs (benchmarks/bench_pdl.py). Tried and removed (session 11): one-row products loading their first weight chunk
before the wait (the caller promising that no kernel in flight writes the weight): no further gain (223.7
tokens/s against 229.6 with the plain wait, 223.5 without PDL).

A kernel takes a ``PDL`` constexpr; its host wrapper asks :func:`settings` for ``PDL`` and ``launch_pdl``:

- on where the architecture's facts file says ``programmatic_dependent_launch`` (sm_90 and later) and the
  device is CUDA;
- a config table rule or :func:`nbxtensor.runtime.configs.override` may set ``PDL`` (0 or 1) per op (sweeps
  and tests compare both);
- ``NBX_PDL=0`` in the environment turns it off everywhere (read at import);
- never under the interpreter tier (the instructions are inline PTX).

A PDL launch is still stream-ordered with respect to everything that is not a PDL-aware kernel (copies, memsets,
events, other kernels), and a CUDA graph captured from such launches keeps the programmatic edges.
"""

from __future__ import annotations

import os

from .triton_compat import HAVE_TRITON, INTERPRET, jit, tl

__all__ = ["settings", "supported", "enter", "wait", "launch_dependents", "ENV_ON"]

ENV_ON = os.environ.get("NBX_PDL", "1") != "0"

if HAVE_TRITON and not INTERPRET:
    from triton.language.extra.cuda import gdc_launch_dependents as _gdc_launch_dependents
    from triton.language.extra.cuda import gdc_wait as _gdc_wait
else:  # the interpreter tier never takes the PDL branch (PDL is always False there)
    _gdc_launch_dependents = _gdc_wait = None

def supported(device) -> bool:
    """Whether ``device`` can launch programmatically dependent kernels: the facts file
    (``programmatic_dependent_launch``) of its architecture as the config tables name it
    (:func:`nbxtensor.runtime.configs.arch_of`); ``False`` for the CPU and under the interpreter tier.

    Raises:
        nbxtensor.device.facts.MissingFactError: a CUDA device whose architecture has no facts file.
    """
    if device.type != "cuda" or INTERPRET:
        return False
    from ..device.facts import fact
    from . import configs
    return bool(fact(configs.arch_of(device), "programmatic_dependent_launch"))


def settings(cfg: dict, device) -> dict:
    """The ``PDL`` constexpr and Triton's ``launch_pdl`` option for a PDL-aware kernel, as keywords of a launch.

    Args:
        cfg: the op's :func:`~nbxtensor.runtime.configs.launch_config` answer; its ``PDL`` key (if any) is
            popped: 0 turns PDL off for this launch, 1 asks for it where :func:`supported`.
        device: the launch device.

    Returns:
        ``{"PDL": bool, "launch_pdl": bool}`` (both the same).
    """
    want = cfg.pop("PDL", 1)
    on = bool(want) and ENV_ON and supported(device)
    return {"PDL": on, "launch_pdl": on}


@jit
def wait(PDL: tl.constexpr):
    """``griddepcontrol.wait`` when ``PDL``: return once the kernels this one depends on have completed and their
    writes are visible (a no-op when the kernel was not launched with PDL)."""
    if PDL:
        _gdc_wait()


@jit
def launch_dependents(PDL: tl.constexpr):
    """``griddepcontrol.launch_dependents`` when ``PDL``: let the next PDL-aware kernel on the stream launch once
    every program of this one has executed this (its programs then wait in :func:`wait`)."""
    if PDL:
        _gdc_launch_dependents()


@jit
def enter(PDL: tl.constexpr):
    """The start of every PDL-aware kernel, before its first global memory access: :func:`wait`, then
    :func:`launch_dependents` (nothing when ``PDL`` is off)."""
    wait(PDL)
    launch_dependents(PDL)
