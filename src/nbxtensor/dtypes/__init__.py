"""The dtype table, type promotion and the tolerance table (pure Python over numpy and ml_dtypes)."""

from .promotion import (can_cast, category, default_complex_dtype, get_default_dtype, promote_types, result_type,
                        scalar_dtype, set_default_dtype)
from .table import (DTYPES, DType, bfloat16, bool_, complex64, complex128, dtype_from, float8_e4m3fn, float8_e5m2,
                    float16, float32, float64, from_dlpack_code, from_numpy_dtype, from_safetensors, int8, int16, int32,
                    int64, uint8, uint16, uint32, uint64)
from .tolerance import Tolerance, tolerance

__all__ = ["DTYPES", "DType", "dtype_from", "from_numpy_dtype", "from_safetensors", "from_dlpack_code",
           "promote_types", "result_type", "can_cast", "category", "get_default_dtype", "set_default_dtype",
           "default_complex_dtype", "scalar_dtype", "Tolerance", "tolerance",
           "bool_", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "float16", "bfloat16",
           "float32", "float64", "float8_e4m3fn", "float8_e5m2", "complex64", "complex128"]
