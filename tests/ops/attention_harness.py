"""Shared helpers of the attention, decode-attention, embedding and RoPE tests (not a test module).

Values are drawn in float64 and rounded to the tested dtype on the host, so the float64 oracle sees exactly
the values the tensors hold. ``NBX_TEST_QUICK=1`` (the interpreter tier) shrinks the sets.
"""

from __future__ import annotations

import os

import numpy as np

import nbxtensor as nbx
from nbxtensor.dtypes import table as T
from nbxtensor.dtypes.casting import cast_array
from nbxtensor.runtime.configs import launch_config

QUICK = os.environ.get("NBX_TEST_QUICK", "0") == "1"
DEVICE = os.environ.get("NBX_TEST_DEVICE", "cpu")
GPU = DEVICE.startswith("cuda")
HALF = (T.float16, T.bfloat16)


def draw(rng, shape, dt, scale: float = 1.0) -> np.ndarray:
    """Standard normal values (times ``scale``) rounded to ``dt``, as a host array of ``dt``."""
    return cast_array(rng.standard_normal(shape) * scale, T.float64, dt)


def dev(a: np.ndarray, device: str):
    """A tensor on ``device`` holding host array ``a``."""
    t = nbx.from_numpy(np.array(a, order="C", copy=True))  # a copy: in-place ops never touch the test's array
    return t.to(device) if device != "cpu" else t


def host(t) -> np.ndarray:
    """A tensor's values as a float64 host array (exact for every float dtype)."""
    return cast_array(np.asarray(t.cpu().numpy()), t.dtype, T.float64)


def block_lengths(op: str, device: str, dtype, key: str = "BLOCK_N", ks=(1, 2), **facts) -> list[int]:
    """Sequence lengths ``BLOCK * k + 1`` for the block size the device's table gives ``op``."""
    cfg = launch_config(op, nbx.device(device), dtypes=(dtype,), **facts)
    return [cfg[key] * k + 1 for k in ks]


def check_close(out, ref: np.ndarray, rtol: float, atol: float, scale: np.ndarray | None = None, what: str = ""):
    """``|out - ref| <= atol + rtol * (|ref| + scale)`` elementwise (``scale`` 0 when None); NaN never passes."""
    o = host(out) if not isinstance(out, np.ndarray) else np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert o.shape == ref.shape, f"{what}: shape {o.shape} != {ref.shape}"
    bound = atol + rtol * (np.abs(ref) + (0.0 if scale is None else scale))
    err = np.abs(o - ref)
    bad = ~(err <= bound)
    if bad.any():
        i = tuple(int(x[0]) for x in np.nonzero(bad))
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} elements out of tolerance (rtol {rtol:.3g}, "
                             f"atol {atol:.3g}); first at {i}: got {o[i]!r}, expected {ref[i]!r}, bound {bound[i]!r}")
