"""FAST_MATH16 bodies for the circular functions (sin, cos, tan, asin, acos, atan) with bfloat16/float16 outputs.

Same contract as ops/fast_math16.py (its docstring: accuracy, special values, the exhaustive tests); that module
merges this one's :data:`OPS` (level 1) and :data:`OPS2` (level 2) into its tables.
"""

from __future__ import annotations

# op name -> (the default body's module and name, the body here); none yet.
OPS: dict = {}
OPS2: dict = {}
