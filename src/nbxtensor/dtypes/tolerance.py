"""The one tolerance table, keyed by dtype, and the declared rule that widens it for reductions and products.

Defaults are PyTorch's ``torch.testing.assert_close`` defaults
(https://pytorch.org/docs/stable/testing.html): float16 rtol 1e-3 atol 1e-5, bfloat16 rtol 1.6e-2 atol 1e-5,
float32 rtol 1.3e-6 atol 1e-5, float64 rtol 1e-7 atol 1e-7; complex types use their parts' values; integer
and bool types compare exactly. float8 rows are ours (PyTorch has none): half a unit in the last place of the
format relative (e4m3fn: 3 mantissa bits -> 2**-4; e5m2: 2 bits -> 2**-3), so a single rounding passes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .table import DType, dtype_from

__all__ = ["Tolerance", "tolerance"]


@dataclass(frozen=True)
class Tolerance:
    """Relative and absolute tolerance: ``|actual - expected| <= atol + rtol * |expected|``."""

    rtol: float
    atol: float


_TABLE = {
    "float16": Tolerance(1e-3, 1e-5),
    "bfloat16": Tolerance(1.6e-2, 1e-5),
    "float32": Tolerance(1.3e-6, 1e-5),
    "float64": Tolerance(1e-7, 1e-7),
    "float8_e4m3fn": Tolerance(2.0 ** -4, 2.0 ** -9),
    "float8_e5m2": Tolerance(2.0 ** -3, 2.0 ** -16),
    "complex64": Tolerance(1.3e-6, 1e-5),
    "complex128": Tolerance(1e-7, 1e-7),
}


def tolerance(dtype: object, *, reduced: int = 1) -> Tolerance:
    """Tolerance for comparing a result of ``dtype`` against the float64 oracle.

    Args:
        dtype: the result's dtype.
        reduced: the number of terms accumulated into each output element (K of a product, the length of a
            reduction); 1 for elementwise ops.

    Returns:
        The table's row, widened for ``reduced > 1`` by ``sqrt(reduced)`` on both terms: rounding errors of a
        sum of K terms grow like sqrt(K) for random signs (Higham, *Accuracy and Stability of Numerical
        Algorithms*, 2nd ed., section 4.2). Integer and bool dtypes get ``Tolerance(0, 0)``.
    """
    d: DType = dtype_from(dtype)
    base = _TABLE.get(d.name, Tolerance(0.0, 0.0))
    if reduced <= 1:
        return base
    grow = math.sqrt(reduced)
    return Tolerance(base.rtol * grow, base.atol * grow)
