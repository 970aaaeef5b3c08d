"""Quantized weights: grouped int4 (:mod:`.int4`) with scales and minima, their packing, the dequantizing GEMV
and dequantize-then-GEMM kernels, and :class:`QuantLinear`; GPTQ and AWQ checkpoint layouts (:mod:`.gptq`)."""

from .int4 import (GROUP_SIZES, QuantLinear, dequantize_oracle, int4_dequantize, int4_linear, int4_linear_oracle,
                   pack_int4, quantize_int4, unpack_int4)
from .gptq import awq_to_int4, gptq_to_int4

__all__ = ["GROUP_SIZES", "QuantLinear", "dequantize_oracle", "int4_dequantize", "int4_linear", "int4_linear_oracle",
           "pack_int4", "quantize_int4", "unpack_int4", "gptq_to_int4", "awq_to_int4"]
