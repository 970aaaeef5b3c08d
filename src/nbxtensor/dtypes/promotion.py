"""Type promotion exactly as PyTorch: ``promote_types``, ``result_type``, ``can_cast`` and the default dtype.

Sources: PyTorch's ``c10::promoteTypes`` (c10/core/ScalarType.cpp), ``at::native::result_type`` and its
``ResultTypeState`` (aten/src/ATen/native/TypeProperties.cpp), ``c10::canCast``, and the documentation at
https://pytorch.org/docs/stable/tensor_attributes.html#type-promotion-doc. The parity suite checks every pair
of the table against ``torch`` itself.

Rules, in brief:
- Categories order bool < integer < floating < complex.
- Among operands of one priority class, dtypes promote pairwise by ``promote_types``.
- Priority classes: tensors with at least one dimension outrank 0-dim tensors, which outrank Python scalars;
  a lower class decides the result only when its category is higher. Python scalars are *weak*: a Python
  float becomes the default float dtype, a Python complex the default complex dtype, a Python int int64.
- float8 types, and uint16/uint32/uint64 with anything but a floating type, have no promotion (PyTorch
  raises ``RuntimeError``; so do we).
"""

from __future__ import annotations

import threading

from .._errors import check, fail
from . import table as T
from .table import DType, dtype_from

__all__ = ["promote_types", "result_type", "can_cast", "get_default_dtype", "set_default_dtype",
           "default_complex_dtype", "category", "scalar_dtype"]

# Category ranks: bool < integer < floating < complex.
_CAT = {T.KIND_BOOL: 0, T.KIND_UINT: 1, T.KIND_INT: 1, T.KIND_FLOAT: 2, T.KIND_COMPLEX: 3}

_FLOAT8 = frozenset({T.float8_e4m3fn, T.float8_e5m2})
_BAREBONES_UNSIGNED = frozenset({T.uint16, T.uint32, T.uint64})
# Integer ladder for the classic types (uint8 sits below int16; with int8 it meets at int16).
_INT_ORDER = [T.int8, T.int16, T.int32, T.int64]
# Floating ladder: float16 and bfloat16 meet at float32.
_FLOAT_ORDER = {T.float16: 0, T.bfloat16: 0, T.float32: 1, T.float64: 2}


def category(d: DType) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex."""
    return _CAT[d.kind]


def _promote_float(a: DType, b: DType) -> DType:
    if a is b:
        return a
    ra, rb = _FLOAT_ORDER[a], _FLOAT_ORDER[b]
    if ra == rb:  # float16 with bfloat16
        return T.float32
    return a if ra > rb else b


def _promote_int(a: DType, b: DType) -> DType:
    if a is b:
        return a
    if a is T.uint8:
        a = T.int16 if b is T.int8 else a
        return b if b is not T.uint8 and _INT_ORDER.index(b) >= 1 else a
    if b is T.uint8:
        return _promote_int(b, a)
    return a if _INT_ORDER.index(a) >= _INT_ORDER.index(b) else b


def promote_types(type1: object, type2: object) -> DType:
    """The smallest dtype to which both ``type1`` and ``type2`` convert, as ``torch.promote_types``.

    Args:
        type1, type2: dtypes (anything :func:`nbxtensor.dtypes.dtype_from` accepts).

    Returns:
        The promoted dtype; symmetric in its arguments.

    Raises:
        RuntimeError: for float8 with any other dtype, and for uint16/uint32/uint64 with a non-floating dtype
            other than itself (PyTorch has no promotion for these and raises the same way).
    """
    a, b = dtype_from(type1, arg="type1"), dtype_from(type2, arg="type2")
    if a is b:
        return a
    if a in _FLOAT8 or b in _FLOAT8:
        fail(f"promote_types: promotion for float8 types is not supported, attempted to promote {a.name} and {b.name}")
    if a in _BAREBONES_UNSIGNED or b in _BAREBONES_UNSIGNED:
        if a.kind == T.KIND_FLOAT:
            return a
        if b.kind == T.KIND_FLOAT:
            return b
        fail(f"promote_types: promotion for uint16, uint32, uint64 types is not supported, attempted to "
             f"promote {a.name} and {b.name}")
    ca, cb = _CAT[a.kind], _CAT[b.kind]
    if ca != cb:
        hi, lo = (a, b) if ca > cb else (b, a)
        if hi.kind == T.KIND_COMPLEX and lo.kind == T.KIND_FLOAT:
            return _promote_float(hi.to_real(), lo).to_complex()
        return hi
    if a.kind == T.KIND_FLOAT:
        return _promote_float(a, b)
    if a.kind == T.KIND_COMPLEX:
        return T.complex128
    return _promote_int(a, b)


# --- default dtype (per process, as torch.set_default_dtype) -------------------------------------------
_default = {"float": T.float32}
_lock = threading.Lock()


def get_default_dtype() -> DType:
    """The dtype of Python floats turned into tensors, ``float32`` unless changed (``torch.get_default_dtype``)."""
    return _default["float"]


def set_default_dtype(d: object) -> None:
    """Set the default floating dtype, as ``torch.set_default_dtype``.

    Args:
        d: float16, bfloat16, float32 or float64. The default complex dtype follows it: complex128 for
            float64, complex64 otherwise (PyTorch's complex32 for float16 is not in this table, so float16
            and bfloat16 pair with complex64 here; stated difference).

    Raises:
        TypeError: for a non-floating dtype or a float8 dtype (PyTorch: "only floating-point types are
            supported as the default type").
    """
    dt = dtype_from(d, arg="d")
    check(dt in (T.float16, T.bfloat16, T.float32, T.float64),
          lambda: f"set_default_dtype: only float16, bfloat16, float32 and float64 are supported as the default "
                  f"type, got {dt.name}", TypeError)
    with _lock:
        _default["float"] = dt


def default_complex_dtype() -> DType:
    """complex128 when the default float dtype is float64, else complex64."""
    return T.complex128 if _default["float"] is T.float64 else T.complex64


def scalar_dtype(value: object) -> DType:
    """The dtype a Python scalar takes on its own: bool, int64, the default float, the default complex.

    Raises:
        TypeError: for an object that is not a Python bool, int, float or complex (NumPy scalars count as
            their NumPy dtype).
    """
    if isinstance(value, bool):
        return T.bool_
    if isinstance(value, int):
        return T.int64
    if isinstance(value, float):
        return get_default_dtype()
    if isinstance(value, complex):
        return default_complex_dtype()
    fail(f"scalar_dtype: expected a Python bool, int, float or complex, got {type(value).__name__}", TypeError)


def _combine(higher: DType | None, lower: DType | None) -> DType | None:
    # ResultTypeState's combine_categories: the higher priority class wins unless the lower one is of a
    # higher category; complex scalars keep the value type of a floating tensor.
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.kind == T.KIND_COMPLEX:
        return higher
    if lower.kind == T.KIND_COMPLEX:
        return higher.to_complex() if higher.kind == T.KIND_FLOAT else lower
    if higher.kind == T.KIND_FLOAT:
        return higher
    if higher is T.bool_ or lower.kind == T.KIND_FLOAT:
        return promote_types(higher, lower)
    return higher


def _acc(state: DType | None, d: DType) -> DType:
    return d if state is None else promote_types(state, d)


def result_type(*operands: object) -> DType:
    """The dtype an operation on ``operands`` computes in, as ``torch.result_type`` (and its n-ary form).

    Args:
        operands: tensors (anything with ``dtype`` and ``dim()``/``ndim``), NumPy arrays, or Python
            bool/int/float/complex scalars. A 0-dim NumPy array counts as a 0-dim tensor; a NumPy scalar
            counts as a 0-dim tensor of its dtype.

    Returns:
        The promoted dtype under PyTorch's three priority classes (see the module docstring).

    Raises:
        TypeError: for an operand that is neither a tensor nor a Python number.
        RuntimeError: for a pair with no promotion (float8 with another dtype, ...).

    Example:
        >>> import nbxtensor as nbx
        >>> nbx.result_type(nbx.tensor([200], dtype=nbx.uint8), 100)
        nbxtensor.uint8
    """
    check(len(operands) > 0, "result_type: expected at least one operand", TypeError)
    dim_r = zero_r = wrapped_r = None
    for op in operands:
        if isinstance(op, (bool, int, float, complex)):
            wrapped_r = _acc(wrapped_r, scalar_dtype(op))
            continue
        dt = getattr(op, "dtype", None)
        check(dt is not None, lambda: f"result_type: expected tensors or Python numbers, got {type(op).__name__}",
              TypeError)
        dt = dtype_from(dt, arg="operand dtype")
        ndim = op.ndim if hasattr(op, "ndim") else op.dim()
        if ndim > 0:
            dim_r = _acc(dim_r, dt)
        else:
            zero_r = _acc(zero_r, dt)
    out = _combine(dim_r, _combine(zero_r, wrapped_r))
    assert out is not None
    return out


def can_cast(from_: object, to: object) -> bool:
    """Whether a cast from ``from_`` to ``to`` is allowed under PyTorch's casting rules (``torch.can_cast``).

    Disallowed: complex to non-complex, floating to integral or bool, non-bool to bool.
    """
    f, t = dtype_from(from_, arg="from_"), dtype_from(to, arg="to")
    if f.kind == T.KIND_COMPLEX and t.kind != T.KIND_COMPLEX:
        return False
    if f.kind == T.KIND_FLOAT and t.kind in (T.KIND_INT, T.KIND_UINT, T.KIND_BOOL):
        return False
    if f.kind != T.KIND_BOOL and t.kind == T.KIND_BOOL:
        return False
    return True
