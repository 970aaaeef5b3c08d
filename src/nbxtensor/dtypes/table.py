"""The one dtype table, as data.

Each row declares, for one element type: its itemsize in bytes, its kind, the NumPy dtype that
holds it on the host (ml_dtypes for bfloat16 and the float8 types), Triton's name for it, its
safetensors code, its DLPack ``(code, bits)``, its PyTorch spelling and the aliases PyTorch accepts.

Sources:
- PyTorch dtype names and aliases: https://pytorch.org/docs/stable/tensor_attributes.html#torch-dtype
- safetensors codes: the ``Dtype`` enum of https://github.com/huggingface/safetensors (``C64`` is its
  complex64 code; it has no complex128 code).
- DLPack type codes: ``DLDataTypeCode`` in dlpack.h v1.1 (kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4,
  kDLComplex 5, kDLBool 6, kDLFloat8_e4m3fn 10, kDLFloat8_e5m2 12).
- Triton type names: ``triton.language`` dtype strings (``i1``, ``fp16``, ``bf16``, ``fp8e4nv``, ...).

An unknown name or code is an error that names it; nothing here ever falls back to a default.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from .._errors import check

__all__ = ["DType", "DTYPES", "dtype_from", "from_numpy_dtype", "from_safetensors", "from_dlpack_code",
           "KIND_BOOL", "KIND_UINT", "KIND_INT", "KIND_FLOAT", "KIND_COMPLEX"]

KIND_BOOL, KIND_UINT, KIND_INT, KIND_FLOAT, KIND_COMPLEX = "bool", "uint", "int", "float", "complex"

# DLPack DLDataTypeCode values (dlpack.h v1.1).
DL_INT, DL_UINT, DL_FLOAT, DL_BFLOAT, DL_COMPLEX, DL_BOOL, DL_FLOAT8_E4M3FN, DL_FLOAT8_E5M2 = 0, 1, 2, 4, 5, 6, 10, 12


@dataclass(frozen=True, eq=False)
class DType:
    """One element type of the table. Compare with ``is`` or ``==``; instances are unique.

    Attributes:
        name: PyTorch's canonical name without the ``torch.`` prefix (``"float16"``).
        itemsize: bytes per element.
        kind: one of ``bool``, ``uint``, ``int``, ``float``, ``complex``.
        numpy: the host ``numpy.dtype`` (ml_dtypes for bfloat16 and float8).
        triton: Triton's type string (``"fp16"``), or ``None`` where Triton has no such type.
        safetensors: the safetensors code (``"F16"``), or ``None`` where the format has none.
        dlpack: ``(type_code, bits)`` of DLPack.
        aliases: other names PyTorch accepts (``"half"``).
    """

    name: str
    itemsize: int
    kind: str
    numpy: np.dtype
    triton: str | None
    safetensors: str | None
    dlpack: tuple[int, int]
    aliases: tuple[str, ...] = field(default=())

    # -- PyTorch's dtype attributes -------------------------------------------------------------
    @property
    def is_floating_point(self) -> bool:
        return self.kind == KIND_FLOAT

    @property
    def is_complex(self) -> bool:
        return self.kind == KIND_COMPLEX

    @property
    def is_signed(self) -> bool:
        return self.kind in (KIND_INT, KIND_FLOAT, KIND_COMPLEX)

    @property
    def bits(self) -> int:
        return self.itemsize * 8

    @property
    def torch_name(self) -> str:
        """PyTorch's spelling, ``torch.float16``."""
        return "torch." + self.name

    def to_real(self) -> "DType":
        """The real dtype of a complex dtype (``complex64`` -> ``float32``); other dtypes unchanged."""
        return {"complex64": float32, "complex128": float64}.get(self.name, self)

    def to_complex(self) -> "DType":
        """The complex dtype for this float dtype, as c10's ``toComplexType``: float32 and bfloat16 (whose range
        is float32's) -> complex64, float64 -> complex128; complex dtypes unchanged.

        Raises:
            RuntimeError: float16 (PyTorch gives complex32, which nbxtensor's table does not have), float8 and
                non-floating dtypes ("Unknown Complex ScalarType", as PyTorch raises for float8).
        """
        if self.kind == KIND_COMPLEX:
            return self
        check(self.name != "float16", "to_complex: float16 pairs with complex32 in PyTorch, which nbxtensor does "
              "not support; convert to float32 first")
        pair = {"float32": complex64, "bfloat16": complex64, "float64": complex128}.get(self.name)
        check(pair is not None, lambda: f"to_complex: Unknown Complex ScalarType for {self.name}")
        return pair

    def __repr__(self) -> str:
        # PyTorch prints torch.float16; we print under the conventional import alias (as NumPy 2 prints
        # np.float64), which also keeps tensor reprs as short as PyTorch's.
        return "nbx." + self.name

    def __str__(self) -> str:
        # Triton reads a pointer argument's element type from str(arg.dtype) ending in a name of its table
        # (../shared/DESIGN.md): "nbx.float16" satisfies it.
        return "nbx." + self.name

    def __reduce__(self):
        return (dtype_from, (self.name,))

    # Instances are unique and compare by identity, so they hash by identity: a C-level hash (dtypes key the
    # dispatch and launch plans, and sets of dtypes are checked on every call).
    __hash__ = object.__hash__


_ROWS = [
    # name, itemsize, kind, numpy dtype, triton, safetensors, dlpack (code, bits), aliases
    ("bool", 1, KIND_BOOL, np.dtype(np.bool_), "i1", "BOOL", (DL_BOOL, 8), ()),
    ("uint8", 1, KIND_UINT, np.dtype(np.uint8), "u8", "U8", (DL_UINT, 8), ()),
    ("int8", 1, KIND_INT, np.dtype(np.int8), "i8", "I8", (DL_INT, 8), ()),
    ("int16", 2, KIND_INT, np.dtype(np.int16), "i16", "I16", (DL_INT, 16), ("short",)),
    ("int32", 4, KIND_INT, np.dtype(np.int32), "i32", "I32", (DL_INT, 32), ("int",)),
    ("int64", 8, KIND_INT, np.dtype(np.int64), "i64", "I64", (DL_INT, 64), ("long",)),
    ("uint16", 2, KIND_UINT, np.dtype(np.uint16), "u16", "U16", (DL_UINT, 16), ()),
    ("uint32", 4, KIND_UINT, np.dtype(np.uint32), "u32", "U32", (DL_UINT, 32), ()),
    ("uint64", 8, KIND_UINT, np.dtype(np.uint64), "u64", "U64", (DL_UINT, 64), ()),
    ("float16", 2, KIND_FLOAT, np.dtype(np.float16), "fp16", "F16", (DL_FLOAT, 16), ("half",)),
    ("bfloat16", 2, KIND_FLOAT, np.dtype(ml_dtypes.bfloat16), "bf16", "BF16", (DL_BFLOAT, 16), ()),
    ("float32", 4, KIND_FLOAT, np.dtype(np.float32), "fp32", "F32", (DL_FLOAT, 32), ("float",)),
    ("float64", 8, KIND_FLOAT, np.dtype(np.float64), "fp64", "F64", (DL_FLOAT, 64), ("double",)),
    ("float8_e4m3fn", 1, KIND_FLOAT, np.dtype(ml_dtypes.float8_e4m3fn), "fp8e4nv", "F8_E4M3", (DL_FLOAT8_E4M3FN, 8), ()),
    ("float8_e5m2", 1, KIND_FLOAT, np.dtype(ml_dtypes.float8_e5m2), "fp8e5", "F8_E5M2", (DL_FLOAT8_E5M2, 8), ()),
    ("complex64", 8, KIND_COMPLEX, np.dtype(np.complex64), None, "C64", (DL_COMPLEX, 64), ("cfloat",)),
    ("complex128", 16, KIND_COMPLEX, np.dtype(np.complex128), None, None, (DL_COMPLEX, 128), ("cdouble",)),
]

DTYPES: tuple[DType, ...] = tuple(DType(*row) for row in _ROWS)

_BY_NAME: dict[str, DType] = {}
for _d in DTYPES:
    for _n in (_d.name, *_d.aliases):
        _BY_NAME[_n] = _d
_BY_NUMPY = {d.numpy: d for d in DTYPES}
_BY_SAFETENSORS = {d.safetensors: d for d in DTYPES if d.safetensors}
_BY_DLPACK = {d.dlpack: d for d in DTYPES}

(bool_, uint8, int8, int16, int32, int64, uint16, uint32, uint64, float16, bfloat16, float32, float64,
 float8_e4m3fn, float8_e5m2, complex64, complex128) = DTYPES


def dtype_from(obj: object, *, arg: str = "dtype") -> DType:
    """Resolve ``obj`` to a row of the table.

    Accepts a ``DType``, a name or alias (``"half"``, ``"torch.float16"``), a NumPy dtype or scalar type
    (``np.float32``, ``ml_dtypes.bfloat16``), or the Python types ``bool``, ``int``, ``float``, ``complex``
    (mapped as NumPy maps them: bool, int64, float64, complex128).

    Raises:
        TypeError: for a name, NumPy dtype or object that is not in the table, naming it and ``arg``.
    """
    if isinstance(obj, DType):
        return obj
    check(obj is not None, lambda: f"{arg}: expected a dtype, got None (NumPy would read None as float64; "
          "nbxtensor never picks a default)", TypeError)
    if isinstance(obj, str):
        name = obj.split(".", 1)[1] if obj.startswith(("torch.", "nbx.", "nbxtensor.")) else obj
        found = _BY_NAME.get(name)
        check(found is not None, lambda: f"{arg}: unknown dtype name {obj!r}; expected one of "
              f"{sorted(_BY_NAME)}", TypeError)
        return found
    if obj is bool:
        return bool_
    if obj is int:
        return int64
    if obj is float:
        return float64
    if obj is complex:
        return complex128
    try:
        npd = np.dtype(obj)  # type: ignore[arg-type]
    except TypeError:
        npd = None
    if npd is None and str(obj).startswith("torch."):
        # A torch.dtype passed by a user of both libraries; resolved by its spelling, never by importing torch.
        return dtype_from(str(obj), arg=arg)
    check(npd is not None, lambda: f"{arg}: expected a dtype (nbxtensor dtype, name or NumPy dtype), "
          f"got {type(obj).__name__} {obj!r}", TypeError)
    return from_numpy_dtype(npd, arg=arg)


def from_numpy_dtype(npd: np.dtype, *, arg: str = "dtype") -> DType:
    """The row whose host dtype is ``npd`` (byte order must be native).

    Raises:
        TypeError: for a NumPy dtype with no row (``float128``, strings, structured, non-native byte order).
    """
    npd = np.dtype(npd)
    found = _BY_NUMPY.get(npd)
    check(found is not None, lambda: f"{arg}: NumPy dtype {npd!r} has no nbxtensor dtype; supported: "
          f"{[str(d.numpy) for d in DTYPES]}", TypeError)
    return found


def from_safetensors(code: str) -> DType:
    """The row for a safetensors dtype code (``"BF16"``).

    Raises:
        ValueError: ``unsupported dtype <code>`` for a code outside the table.
    """
    found = _BY_SAFETENSORS.get(code)
    check(found is not None, lambda: f"unsupported dtype {code!r}: safetensors codes known to nbxtensor are "
          f"{sorted(_BY_SAFETENSORS)}", ValueError)
    return found


def from_dlpack_code(code: int, bits: int, lanes: int = 1) -> DType:
    """The row for a DLPack ``DLDataType`` ``(code, bits, lanes)``.

    Raises:
        BufferError: for vector lanes or a code/bits pair outside the table (the DLPack protocol's error type).
    """
    check(lanes == 1, lambda: f"from_dlpack: DLPack dtype with {lanes} lanes is not supported (expected 1)", BufferError)
    found = _BY_DLPACK.get((int(code), int(bits)))
    check(found is not None, lambda: f"from_dlpack: unsupported DLPack dtype (code={code}, bits={bits})", BufferError)
    return found
