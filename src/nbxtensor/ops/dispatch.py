"""The shared host-side pipeline of every operator: schemas, argument checks, promotion, broadcasting, outputs,
device routing, and the installation of functions, ``Tensor`` methods and operators FROM the op table.

Device implementations only compute; everything an op needs before that happens here, once
(../shared/DESIGN.md, "Dispatch"). A family declares an op as one :class:`~.registry.OpRecord` whose ``extra``
carries a schema string and its promotion kind; :func:`install` turns the record into ``nbx.<name>``,
``Tensor.<name>``, ``Tensor.<name>_`` and the operator dunders.

API for families (small on purpose):

- :func:`parse_schema` / :class:`Schema`: ``"add(Tensor input, Tensor|Scalar other, *, Scalar alpha=1,
  Tensor? out=None)"`` -> argument names, kinds and defaults; :meth:`Schema.bind` checks a call's arguments
  (``TypeError`` as PyTorch: "add(): argument 'input' (position 1) must be Tensor, not int").
- :func:`promote` -> :class:`Promotion` (``common``, ``compute``, ``result`` dtypes) for a promotion kind:
  ``default``, ``no_opmath``, ``int_to_float``, ``always_bool``, ``complex_to_float``, ``bool_to_long``
  (PyTorch's ``ELEMENTWISE_TYPE_PROMOTION_KIND``). ``compute`` is the "opmath" dtype: float16, bfloat16 and
  float8 compute in float32 and round once, except under ``no_opmath``.
- :func:`scalar_to` converts a Python scalar operand to a dtype's value (PyTorch's wrapped-number rule).
- :func:`common_device` checks that tensor operands share a device (0-dim CPU tensors may join a CUDA op as
  scalars, as PyTorch allows).
- :func:`resolve_out` allocates the output, or checks and resizes a user's ``out=`` (device, castability
  ``can_cast(result, out.dtype)``, PyTorch's resize rule and warning); :func:`check_inplace` does the same for
  in-place forms; :func:`check_no_partial_overlap` refuses outputs that partly alias an input.
- :func:`pointwise` is the whole pipeline for elementwise ops; other families write their own driver with the
  same pieces and set ``extra["driver"]``.
- :func:`install` / :func:`install_all` / :func:`exports` generate the public surface from the records.

Record fields read here (``rec.extra``):

======================  ==================================================================================
``schema``              the signature string (required for :func:`install`)
``promotion``           promotion kind (pointwise ops), or ``f(args) -> kind`` where it depends on an argument
``promote``             names of the operands that take part in promotion (default: every tensor argument)
``dtypes``              dtypes the op is implemented for, checked on the operands' ``result_type`` (or
                        ``f(args) -> set``)
``driver``              ``driver(rec, args: dict, *, out, inplace) -> Tensor`` (default :func:`pointwise`)
``prepare``             ``prepare(args: dict, prom) -> dict`` of kernel parameters; raises on bad values
``out_dtype``           what ``out=`` dtypes the op accepts beyond ``can_cast`` (:func:`check_out_dtype`)
``method`` / ``inplace``  install ``Tensor.<name>`` / ``Tensor.<name>_`` (defaults True / False)
``dunders``             ``{"__add__": "fwd", "__radd__": "rev", "__iadd__": "inplace"}``
``namespaces``          where the function is exported: ``("torch",)`` (default) or ``("functional",)``
``aliases``             other public names of the same function (``"true_divide"`` for ``div``)
``public_schema``       the user-facing signature when it differs from the operand schema (``glu``)
``namespace_schemas``   ``{namespace: schema}``: the function exported in that namespace binds this other
                        signature (``nn.functional.softmax(input, dim=None, _stacklevel=3, dtype=None)``)
======================  ==================================================================================
"""

from __future__ import annotations

import ast
import warnings
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

import numpy as np

from .._errors import check, fail
from ..device.base import backend_for
from ..dtypes import table as T
from ..dtypes.promotion import _default as _DEFAULT_DTYPES
from ..dtypes.promotion import can_cast, get_default_dtype, result_type
from ..dtypes.table import DType
from ..shapes import broadcast_shapes, contiguous_strides, numel, storage_span
from ..tensor.core import Size, Tensor, make_tensor, new_empty
from . import registry

__all__ = ["Arg", "Schema", "parse_schema", "Promotion", "PROMOTION_KINDS", "promote", "opmath", "scalar_to",
           "is_scalar", "common_device", "resolve_out", "check_inplace", "check_out_dtype", "check_no_partial_overlap",
           "check_dtype",
           "pointwise", "install", "install_all", "exports", "torch_dtype_name"]

_REQUIRED = object()


# ---------------------------------------------------------------------------------------------------------
# Schemas
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Arg:
    """One argument of a schema: ``name``, accepted ``types`` (``Tensor``, ``Scalar``, ``int``, ``float``,
    ``bool``, ``str``, ``dtype``, ``int[]``), whether ``None`` is accepted, its default, keyword-only."""

    name: str
    types: tuple[str, ...]
    optional: bool
    default: Any
    kwonly: bool

    @property
    def is_operand(self) -> bool:
        """Tensor-typed arguments are operands: they broadcast and (by default) take part in promotion."""
        return "Tensor" in self.types

    @cached_property
    def takes_tensor(self) -> bool:
        """A tensor value passes :meth:`Schema.bind` unchanged (the check's fast path)."""
        return "Tensor" in self.types


@dataclass(frozen=True)
class Schema:
    """A parsed signature. ``operands`` are the tensor-typed arguments, ``params`` the others (``out`` and
    nn.functional's ``inplace`` flag aside: the generated function handles those)."""

    name: str
    args: tuple[Arg, ...]

    # Derived once per schema (cached_property: the frozen dataclass's instance dict holds them).
    @cached_property
    def operands(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.args if a.is_operand and a.name != "out")

    @cached_property
    def params(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.args if not a.is_operand and a.name not in ("out", "inplace"))

    @cached_property
    def has_out(self) -> bool:
        return any(a.name == "out" for a in self.args)

    @cached_property
    def _positional(self) -> tuple[Arg, ...]:
        return tuple(a for a in self.args if not a.kwonly)

    @cached_property
    def _names(self) -> frozenset:
        return frozenset(a.name for a in self.args)

    def bind(self, args: tuple, kwargs: dict, *, fn: str | None = None) -> dict:
        """Match a call's arguments to the schema, fill defaults and check types.

        Returns:
            ``{name: value}`` for every argument (NumPy scalars become Python scalars).

        Raises:
            TypeError: too many positional arguments, an unknown or repeated keyword, a missing argument,
                or a value of the wrong type (PyTorch's wording: "add(): argument 'input' (position 1) must
                be Tensor, not int").
        """
        fn = fn or self.name
        positional = self._positional
        if len(args) > len(positional):
            fail(f"{fn}() takes {len(positional)} positional arguments but {len(args)} were given", TypeError)
        out: dict = {}
        for a, v in zip(positional, args):
            out[a.name] = v
        if kwargs:
            names = self._names
            for k, v in kwargs.items():
                check(k in names, lambda: f"{fn}() got an unexpected keyword argument '{k}'", TypeError)
                check(k not in out, lambda: f"{fn}() got multiple values for argument '{k}'", TypeError)
                out[k] = v
        for i, a in enumerate(self.args):
            name = a.name
            if name in out:
                v = out[name]
                if v.__class__ is Tensor and a.takes_tensor:   # the common case, without a call
                    continue
            else:
                v = a.default
                if v is None:
                    out[name] = None
                    continue
                check(v is not _REQUIRED, lambda: f"{fn}() missing required argument '{a.name}' "
                      f"(position {i + 1})", TypeError)
            out[name] = _check_type(fn, a, i, v)
        return out


def _check_type(fn: str, a: Arg, pos: int, v):
    if v is None:
        check(a.optional or a.default is None, lambda: f"{fn}(): argument '{a.name}' (position {pos + 1}) must be "
              f"{'|'.join(a.types)}, not NoneType", TypeError)
        return v
    if isinstance(v, np.generic):
        v = v.item()
    for t in a.types:
        if t == "Any":  # an argument the op's driver checks itself (SDPA's attn_mask may be a CausalBias)
            return v
        if t == "Tensor" and isinstance(v, Tensor):
            return v
        if t == "Scalar" and isinstance(v, (bool, int, float, complex)):
            return v
        if t == "Scalar" and isinstance(v, Tensor) and "Tensor" not in a.types and v.ndim == 0:
            return v.item()  # PyTorch's Scalar arguments accept a 0-dim tensor's value
        if t == "int" and isinstance(v, int) and not isinstance(v, bool):
            return v
        if t == "float" and isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
        if t == "bool" and isinstance(v, bool):
            return v
        if t == "str" and isinstance(v, str):
            return v
        if t == "dtype" and isinstance(v, (DType, str, type, np.dtype)):
            return T.dtype_from(v, arg=a.name)
        if t == "int[]" and isinstance(v, (int, tuple, list)) and not isinstance(v, bool):
            return v
        if t == "Tensor[]" and isinstance(v, (tuple, list)) and all(isinstance(e, Tensor) for e in v):
            return tuple(v)  # out=(values, indices) of multi-output ops
    fail(f"{fn}(): argument '{a.name}' (position {pos + 1}) must be {' or '.join(a.types)}, not "
         f"{type(v).__name__}", TypeError)


def parse_schema(text: str) -> Schema:
    """Parse ``"name(Type arg, Type|Type arg=default, *, Type? arg=None)"``.

    Types: ``Tensor``, ``Scalar``, ``int``, ``float``, ``bool``, ``str``, ``dtype``, ``int[]``, ``Any`` (checked by
    the op's driver), joined by ``|``; a trailing ``?`` accepts ``None``. Defaults are Python literals.

    Raises:
        ValueError: a malformed schema (a bug in a record, caught at import).
    """
    head, _, rest = text.partition("(")
    check(rest.endswith(")") and head.isidentifier(), lambda: f"parse_schema: malformed schema {text!r}", ValueError)
    args = []
    kwonly = False
    for part in _split_args(rest[:-1]):
        part = part.strip()
        if not part:
            continue
        if part == "*":
            kwonly = True
            continue
        decl, eq, dflt = part.partition("=")
        typ, _, name = decl.strip().rpartition(" ")
        check(typ and name.isidentifier(), lambda: f"parse_schema: malformed argument {part!r} in {text!r}",
              ValueError)
        optional = typ.endswith("?")
        default = ast.literal_eval(dflt.strip()) if eq else _REQUIRED
        args.append(Arg(name, tuple(typ.rstrip("?").split("|")), optional, default, kwonly))
    return Schema(head, tuple(args))


def _split_args(s: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


# ---------------------------------------------------------------------------------------------------------
# Promotion
# ---------------------------------------------------------------------------------------------------------
PROMOTION_KINDS = ("default", "no_opmath", "int_to_float", "always_bool", "complex_to_float", "bool_to_long")

_LOW_FLOATS = frozenset({T.float16, T.bfloat16, T.float8_e4m3fn, T.float8_e5m2})


@dataclass(frozen=True)
class Promotion:
    """Dtypes of one call.

    Attributes:
        common: PyTorch's common dtype: operands are converted to it (``result_type`` of the operands, then
            int -> default float for ``int_to_float``).
        compute: the dtype the arithmetic runs in ("opmath": float32 for float16/bfloat16/float8 unless
            ``no_opmath``).
        result: the dtype of a new output (bool for ``always_bool``, real for ``complex_to_float``).
        input: ``result_type`` of the operands before the kind's adjustments: the dtype an op's supported
            dtypes are checked against (``exp`` accepts integer inputs, ``softsign`` refuses bool inputs).
    """

    common: DType
    compute: DType
    result: DType
    input: DType | None = None


def opmath(d: DType) -> DType:
    """The dtype arithmetic on ``d`` runs in: float32 for float16, bfloat16 and float8 (PyTorch's
    ``opmath_type``), ``d`` otherwise."""
    return T.float32 if d in _LOW_FLOATS else d


def promote(kind: str, *operands, fn: str = "op") -> Promotion:
    """Dtypes for an elementwise op of promotion ``kind`` over ``operands`` (tensors and Python scalars).

    Source: ``torch._prims_common.elementwise_dtypes`` and TensorIterator's ``compute_types``.

    Raises:
        ValueError: an unknown kind (a record bug).
        RuntimeError: operands with no promotion (float8 with another dtype, ...), from ``result_type``.
    """
    check(kind in PROMOTION_KINDS, lambda: f"{fn}: unknown promotion kind {kind!r}; expected one of "
          f"{PROMOTION_KINDS}", ValueError)
    common = inp = result_type(*operands)
    if kind == "int_to_float" and common.kind in (T.KIND_BOOL, T.KIND_INT, T.KIND_UINT):
        common = get_default_dtype()
    if kind == "bool_to_long" and common is T.bool_:
        common = T.int64
    compute = common if kind == "no_opmath" else opmath(common)
    if kind == "always_bool":
        result = T.bool_
    elif kind == "complex_to_float" and common.kind == T.KIND_COMPLEX:
        result = common.to_real()
    else:
        result = common
    return Promotion(common, compute, result, inp)


def torch_dtype_name(d: DType) -> str:
    """PyTorch's scalar-type name of ``d`` for messages that quote PyTorch ("Float", "Long", "Half")."""
    return _TORCH_NAMES.get(d.name, d.name)


_TORCH_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int", "int64": "Long",
                "uint16": "UInt16", "uint32": "UInt32", "uint64": "UInt64", "float16": "Half", "bfloat16": "BFloat16",
                "float32": "Float", "float64": "Double", "float8_e4m3fn": "Float8_e4m3fn",
                "float8_e5m2": "Float8_e5m2", "complex64": "ComplexFloat", "complex128": "ComplexDouble"}


def check_dtype(allowed, d: DType, fn: str) -> None:
    """Refuse a dtype outside ``allowed`` (a record's ``extra["dtypes"]``; ``None`` allows all), as PyTorch's
    '"add_cpu" not implemented for 'Bool''.

    Raises:
        NotImplementedError: naming the op, the dtype (PyTorch's spelling and ours) and the supported ones.
    """
    if allowed is None or d in allowed:
        return
    fail(f"{fn}: not implemented for '{torch_dtype_name(d)}' ({d.name}); supported dtypes: "
         f"{sorted(x.name for x in allowed)}", NotImplementedError)


def is_scalar(x) -> bool:
    """A Python bool, int, float or complex (what PyTorch wraps as a weak "wrapped number")."""
    return isinstance(x, (bool, int, float, complex))


_SCALARS: dict = {}   # (type, value, dtype) -> converted value, for the numbers a program uses over and over


def scalar_to(value, d: DType):
    """A Python scalar operand as a NumPy scalar of ``d``, as PyTorch converts a wrapped number to the
    computation dtype: integers wrap modulo 2**bits, floats round to nearest (through float64), anything
    nonzero is True for bool.

    Conversions of bools, ints and nonzero non-NaN floats are memoised (NumPy scalars are immutable).

    Raises:
        RuntimeError: a complex value into a real dtype with a nonzero imaginary part, or a non-finite float
            into an integer dtype.
    """
    t = value.__class__
    if t is int or t is bool or (t is float and value == value and value != 0.0):
        key = (t, value, d)
        hit = _SCALARS.get(key)
        if hit is None:
            hit = _scalar_to(value, d)
            if len(_SCALARS) >= 4096:
                _SCALARS.clear()
            _SCALARS[key] = hit
        return hit
    return _scalar_to(value, d)


def _scalar_to(value, d: DType):
    if d is T.bool_:
        return np.bool_(value != 0)
    if d.kind in (T.KIND_INT, T.KIND_UINT):
        if isinstance(value, complex):
            check(value.imag == 0, lambda: f"value {value} cannot be converted to {d.name} without overflow")
            value = value.real
        if isinstance(value, float):
            check(value == value and abs(value) != float("inf"),
                  lambda: f"value cannot be converted to type {d.name} without overflow: {value}")
            value = int(value)
        bits = d.itemsize * 8
        v = int(value) & ((1 << bits) - 1)
        if d.kind == T.KIND_INT and v >= 1 << (bits - 1):
            v -= 1 << bits
        return d.numpy.type(v)
    if d.kind == T.KIND_COMPLEX:
        return d.numpy.type(complex(value))
    if isinstance(value, complex):
        value = value.real
    from ..dtypes.casting import cast_array
    return cast_array(np.array([float(value)]), T.float64, d)[0]


# ---------------------------------------------------------------------------------------------------------
# Devices and outputs
# ---------------------------------------------------------------------------------------------------------
def tensor_sig(head: tuple, ts) -> tuple | None:
    """``head`` followed by the dtype, shape and device of each tensor of ``ts`` (``None`` entries kept as None):
    the key under which an op remembers that a call's argument checks passed. None when an entry is neither a
    Tensor nor None (such a call is checked in full)."""
    sig = head
    for t in ts:
        if t is None:
            sig += (None,)
        elif t.__class__ is Tensor:
            sig += (t._dtype, t._shape, t._storage.device)
        else:
            return None
    return sig


def common_device(fn: str, operands: list) -> tuple:
    """The device of the tensor operands; 0-dim CPU tensors among CUDA tensors are turned into Python scalars
    (as PyTorch accepts ``cuda_tensor + torch.tensor(2.0)``).

    Returns:
        ``(device, operands)`` with such tensors replaced by their values.

    Raises:
        RuntimeError: tensors on different devices ("Expected all tensors to be on the same device, but found
            at least two devices, cuda:0 and cpu!").
    """
    tensors = [x for x in operands if isinstance(x, Tensor)]
    check(tensors, lambda: f"{fn}: expected at least one tensor operand")
    non_cpu = [t.device for t in tensors if t.device.type != "cpu"]
    dev = non_cpu[0] if non_cpu else tensors[0].device
    ops = []
    for x in operands:
        if isinstance(x, Tensor) and x.device != dev:
            check(x.device.type == "cpu" and x.ndim == 0, lambda: f"{fn}: Expected all tensors to be on the same "
                  f"device, but found at least two devices, {dev} and {x.device}!")
            x = x.item()
        ops.append(x)
    return dev, ops


def _set_meta(t: Tensor, storage, shape, stride, offset) -> None:
    t._storage, t._shape, t._stride, t._offset = storage, Size(shape), tuple(stride), offset


def resize_output(out: Tensor, shape, fn: str) -> None:
    """Resize ``out`` to ``shape`` as ATen's ``resize_output``: no-op when the shape matches; otherwise a
    UserWarning if ``out`` had elements, then contiguous strides over its storage (a new storage when the
    old one is too small: other views of the old storage do not see the new one, unlike PyTorch's in-place
    storage growth; stated difference)."""
    shape = tuple(shape)
    if tuple(out.shape) == shape:
        return
    if out.numel() != 0:
        warnings.warn(f"{fn}: An output with one or more elements was resized since it had shape "
                      f"{list(out.shape)}, which does not match the required output shape {list(shape)}. This "
                      "behavior is deprecated, and in a future PyTorch release outputs will not be resized unless "
                      "they have zero elements. You can explicitly reuse an out tensor t by resizing it, inplace, "
                      "to zero elements with t.resize_(0).", UserWarning, stacklevel=4)
    need = (out.storage_offset() + numel(shape)) * out.dtype.itemsize
    storage = out.untyped_storage()
    offset = out.storage_offset()
    if need > storage.nbytes:
        storage = backend_for(out.device).allocate(numel(shape) * out.dtype.itemsize, out.device)
        offset = 0
    _set_meta(out, storage, shape, contiguous_strides(shape), offset)


def _check_writable(t: Tensor, fn: str) -> None:
    check(not t.untyped_storage().readonly, lambda: f"{fn}: the output tensor's memory is read-only (imported from "
          "a read-only NumPy array or DLPack capsule); clone() it first")
    check(all(not (s > 1 and st == 0) for s, st in zip(t.shape, t.stride())),
          lambda: f"{fn}: unsupported operation: more than one element of the written-to tensor refers to a single "
          "memory location. Please clone() the tensor before performing the operation.")


def resolve_out(out: Tensor | None, shape, result: DType, device, fn: str, *, dtype: DType | None = None) -> Tensor:
    """The output tensor of a call: a new contiguous tensor of ``dtype`` (default ``result``), or the user's
    ``out=`` checked and resized.

    Rules (PyTorch's): ``out`` must be a tensor on ``device``; ``can_cast(result, out.dtype)`` must hold
    (values are computed in ``result`` and converted on store); a shape mismatch resizes ``out`` (with a
    warning when it had elements).

    Raises:
        TypeError: ``out`` is not a tensor.
        RuntimeError: wrong device; "result type Float can't be cast to the desired output type Long"; a
            read-only ``out`` or one with internal overlap.
    """
    if out is None:
        return new_empty(shape, dtype or result, device)
    check(isinstance(out, Tensor), lambda: f"{fn}(): argument 'out' must be Tensor, not {type(out).__name__}",
          TypeError)
    check(out.device == device, lambda: f"{fn}: Expected out tensor to have device {device}, but got {out.device} "
          "instead")
    check(can_cast(result, out.dtype), lambda: f"{fn}: result type {torch_dtype_name(result)} can't be cast to the "
          f"desired output type {torch_dtype_name(out.dtype)}")
    _check_writable(out, fn)
    resize_output(out, shape, fn)
    return out


def check_inplace(self: Tensor, shape, result: DType, fn: str) -> Tensor:
    """Checks of an in-place form ``self.op_(...)``: the broadcast shape must be ``self``'s and the result
    dtype must cast to ``self.dtype``.

    Raises:
        RuntimeError: "output with shape [3] doesn't match the broadcast shape [2, 3]"; "result type Float
            can't be cast to the desired output type Long"; read-only or internally overlapping ``self``.
    """
    check(tuple(shape) == tuple(self.shape), lambda: f"{fn}: output with shape {list(self.shape)} doesn't match the "
          f"broadcast shape {list(shape)}")
    check(can_cast(result, self.dtype), lambda: f"{fn}: result type {torch_dtype_name(result)} can't be cast to the "
          f"desired output type {torch_dtype_name(self.dtype)}")
    _check_writable(self, fn)
    return self


def check_out_dtype(rec, args: dict, out, prom: Promotion, fn: str) -> None:
    """Checks of a user's ``out=`` dtype that PyTorch makes before the op's own dtype checks (so that
    ``bitwise_and(float, float, out=int)`` reports the cast, as ATen does): the record's ``out_dtype`` rule, then
    ``can_cast(prom.result, out.dtype)``.

    ``extra["out_dtype"]`` (or ``f(args) -> rule``), for the ops whose ATen kernels do not cast to the output:

    - ``"same"``: out must have the operands' common dtype (``abs``, ``neg``, ``floor``, ``clamp`` with scalar
      bounds, ``lerp`` with a tensor weight, ...: ATen's "Found dtype Float but expected BFloat16");
    - ``"bool"``: out must be bool (``isposinf``, ``isneginf``, ``signbit``);
    - ``"result"``: out must have the result dtype (``where``: "Expected out type to be ...");
    - ``"input"``: out must have the input's dtype (``nan_to_num``);
    - ``None``: any dtype the result can be cast to (the value is computed in the result dtype, rounded there,
      then cast: :func:`pointwise`).

    Raises:
        RuntimeError: naming the function, out's dtype and the dtype expected (PyTorch's wording included).
    """
    if not isinstance(out, Tensor):
        return   # resolve_out raises the TypeError
    rule = rec.extra.get("out_dtype")
    if callable(rule):
        rule = rule(args)
    od = out.dtype
    if rule == "same":
        check(od is prom.common, lambda: f"{fn}: Found dtype {torch_dtype_name(od)} but expected "
              f"{torch_dtype_name(prom.common)} (out= must have the operands' dtype here, got {od.name})")
    elif rule == "bool":
        check(od is T.bool_, lambda: f"{fn} does not support non-boolean outputs. (out= must be Bool, got "
              f"{torch_dtype_name(od)})")
    elif rule == "result":
        check(od is prom.result, lambda: f"{fn}: Expected out type to be {torch_dtype_name(prom.result)} but got "
              f"{torch_dtype_name(od)}")
    elif rule == "input":
        check(od is prom.input, lambda: f"{fn}: dtype of out: {torch_dtype_name(od)} should be same as input: "
              f"{torch_dtype_name(prom.input)}")
    else:
        check(rule is None, lambda: f"{fn}: unknown out_dtype rule {rule!r} in the op record", ValueError)
    check(can_cast(prom.result, od), lambda: f"{fn}: result type {torch_dtype_name(prom.result)} can't be cast to "
          f"the desired output type {torch_dtype_name(od)}")


def check_no_partial_overlap(out: Tensor, inp: Tensor, fn: str) -> None:
    """Refuse an input that shares memory with the output without being exactly it (same address, shape and
    strides), as ATen's ``assert_no_partial_overlap``: a kernel reading such an input while writing would see
    half-updated values.

    Raises:
        RuntimeError: "unsupported operation: some elements of the input tensor and the written-to tensor refer
            to a single memory location. Please clone() the tensor before performing the operation."
    """
    if inp.untyped_storage() is not out.untyped_storage() or inp.numel() == 0 or out.numel() == 0:
        return
    a0, a1 = storage_span(out.shape, out.stride(), out.storage_offset())
    b0, b1 = storage_span(inp.shape, inp.stride(), inp.storage_offset())
    ia, ib = out.dtype.itemsize, inp.dtype.itemsize
    if a1 * ia <= b0 * ib or b1 * ib <= a0 * ia:
        return
    full = (out.data_ptr() == inp.data_ptr() and ia == ib and tuple(out.shape) == tuple(inp.shape)
            and tuple(out.stride()) == tuple(inp.stride()))
    check(full, lambda: f"{fn}: unsupported operation: some elements of the input tensor and the written-to tensor "
          "refer to a single memory location. Please clone() the tensor before performing the operation.")


# ---------------------------------------------------------------------------------------------------------
# The pointwise pipeline
# ---------------------------------------------------------------------------------------------------------
def pointwise(rec, args: dict, *, out: Tensor | None = None, inplace: Tensor | None = None) -> Tensor:
    """Run elementwise op ``rec`` on bound arguments ``args`` (from :meth:`Schema.bind`).

    Steps: device check; promotion over ``extra["promote"]`` operands (default: every operand); ``out=``'s
    dtype (:func:`check_out_dtype`); dtype check on the operands' ``result_type`` (``prom.input``);
    ``extra["prepare"]`` for parameters and op-specific errors; broadcasting; output
    (new, ``out=`` or in-place); partial-overlap check; then the device implementation
    ``impl(out, inputs, prom, params)``, where ``inputs`` are tensors expanded to the output shape or Python
    scalars converted to ``prom.compute`` (NumPy scalars), in schema order (``None`` for absent optional
    operands). Zero-size outputs launch nothing.

    An ``out=`` (or in-place ``self``) of another dtype than ``prom.result`` receives the value rounded to
    ``prom.result`` first, then cast, as PyTorch (``mul(bf16, bf16, out=float32)`` is the bfloat16 product):
    where the arithmetic runs in a wider dtype than the result (``prom.compute``: float16, bfloat16 and
    float8 compute in float32), the implementation writes a temporary of ``prom.result`` that is then copied
    into the output with the casting rules (one extra pass over the output, only for such calls).

    A call with a new output whose operands are all on one device takes a plan memoised per (op, device type,
    operand dtypes, shapes and strides, scalar types, promotion kind): promotion, broadcast shape, output layout
    and the broadcast views' strides are computed once (:func:`_plan_key`); the dtype check of an op whose
    allowed dtypes depend on its arguments, ``prepare`` and the scalar conversions still run every call.

    Returns:
        ``out`` (the new tensor, the user's ``out=`` or ``inplace``).
    """
    if out is None and inplace is None:
        key = _plan_key(rec, args)
        if key is not None:
            plans = rec.extra.get("_plans")
            plan = plans.get(key) if plans is not None else None
            if plan is not None:
                return _run_plan(rec, plan, args)
            o = _pointwise(rec, args, None, None)
            _remember(rec, key, args)
            return o
    return _pointwise(rec, args, out, inplace)


def _pointwise(rec, args: dict, out, inplace) -> Tensor:
    fn = rec.name if inplace is None else rec.name + "_"
    sch: Schema = rec.extra["schema_obj"]
    names = sch.operands
    dev, vals = common_device(fn, [args[n] for n in names])
    args = dict(args)
    args.update(zip(names, vals))
    pnames = rec.extra.get("promote", names)
    kind = rec.extra.get("promotion", "default")
    prom = promote(kind(args) if callable(kind) else kind, *[args[n] for n in pnames if args[n] is not None], fn=fn)
    if out is not None:
        check_out_dtype(rec, args, out, prom, fn)
    allowed = rec.extra.get("dtypes")
    check_dtype(allowed(args) if callable(allowed) else allowed, prom.input, fn)
    prepare = rec.extra.get("prepare")
    params = prepare(args, prom) if prepare else {n: args[n] for n in sch.params}
    tensors = [args[n] for n in names if isinstance(args[n], Tensor)]
    shape = broadcast_shapes(*(t.shape for t in tensors))
    if inplace is not None:
        o = check_inplace(inplace, shape, prom.result, fn)
    else:
        o = resolve_out(out, shape, prom.result, dev, fn)
    for t in tensors:
        check_no_partial_overlap(o, t, fn)
    if o.numel() == 0:
        return o
    dst = None
    if o._dtype is not prom.result and prom.compute is not prom.result and prom.result.kind == T.KIND_FLOAT:
        # PyTorch computes in the result dtype and casts that rounded value to out's dtype: bf16 * bf16 into a
        # float32 out is the bfloat16 product, widened. The kernels round once to the tensor they write, so they
        # write a temporary of the result dtype (ATen's CPU TensorIterator does the same) that is then cast.
        dst, o = o, new_empty(o._shape, prom.result, dev)
    inputs = []
    for n in names:
        v = args[n]
        if isinstance(v, Tensor):
            inputs.append(v.expand(shape) if tuple(v.shape) != tuple(shape) else v)
        elif v is None:
            inputs.append(None)
        else:
            inputs.append(scalar_to(v, prom.compute))
    registry.impl(rec.name, dev.type)(o, inputs, prom, params)
    if dst is not None:
        dst.copy_(o)
        return dst
    return o


# ---------------------------------------------------------------------------------------------------------
# Plans of the pointwise pipeline: what a call's operand signature determines, computed once
# ---------------------------------------------------------------------------------------------------------
_MAX_PLANS = 1024   # per op; a full table is dropped (a program uses a handful of signatures per op)


def _plan_key(rec, args: dict):
    """The plan key of a call with a new output, or None when the call must take the full path (operands on
    different devices, a NumPy scalar, ...). Dtype, shape and strides of each tensor operand, the type of each
    Python scalar (promotion depends on it, conversion on the value), the promotion kind, the device type, the
    default float dtype."""
    ex = rec.extra
    kind = ex.get("promotion", "default")
    key = (kind(args) if kind.__class__ is not str else kind,)
    dev = None
    for n in ex["schema_obj"].operands:
        v = args[n]
        t = v.__class__
        if t is Tensor:
            d = v._storage.device
            if dev is None:
                dev = d
            elif d is not dev and d != dev:
                return None
            key += (v._dtype, v._shape, v._stride)
        elif v is None or t is float or t is int or t is bool or t is complex:
            key += (t,)
        else:
            return None
    if dev is None:
        return None
    return key + (dev.type, _DEFAULT_DTYPES["float"])   # (a Python float's dtype, and int_to_float's result)


class _Plan:
    __slots__ = ("prom", "shape", "strides", "nbytes", "empty", "views", "allowed", "prepare", "params")


def _remember(rec, key: tuple, args: dict) -> None:
    """Store the plan of a call that the full path has just run (so every check it makes has passed)."""
    ex = rec.extra
    sch: Schema = ex["schema_obj"]
    names = sch.operands
    pnames = ex.get("promote", names)
    prom = promote(key[0], *[args[n] for n in pnames if args[n] is not None], fn=rec.name)
    tensors = [args[n] for n in names if isinstance(args[n], Tensor)]
    shape = broadcast_shapes(*(t.shape for t in tensors))
    p = _Plan()
    p.prom = prom
    p.shape = Size(shape)
    p.strides = contiguous_strides(shape)
    p.nbytes = numel(shape) * prom.result.itemsize
    p.empty = numel(shape) == 0
    views = []
    for n in names:   # per operand: None (passed as is), "scalar" (converted per call), or a broadcast view's layout
        v = args[n]
        if isinstance(v, Tensor):
            if tuple(v.shape) != tuple(shape):
                e = v.expand(shape)
                views.append((e._shape, e._stride))
            else:
                views.append(None)
        else:
            views.append(None if v is None else "scalar")
    p.views = tuple(views)
    allowed = ex.get("dtypes")
    p.allowed = allowed if callable(allowed) else None   # a fixed set was checked by the full path
    p.prepare = ex.get("prepare")
    p.params = sch.params
    plans = ex.get("_plans")
    if plans is None or len(plans) >= _MAX_PLANS:
        plans = ex["_plans"] = {}
    plans[key] = p


def _run_plan(rec, p: _Plan, args: dict) -> Tensor:
    prom = p.prom
    if p.allowed is not None:
        check_dtype(p.allowed(args), prom.input, rec.name)
    prepare = p.prepare
    params = prepare(args, prom) if prepare is not None else {n: args[n] for n in p.params}
    inputs = []
    dev = None
    for n, view in zip(rec.extra["schema_obj"].operands, p.views):
        v = args[n]
        if view is None:
            if dev is None and v is not None:
                dev = v._storage.device
            inputs.append(v)
        elif view == "scalar":
            inputs.append(scalar_to(v, prom.compute))
        else:
            dev = v._storage.device
            inputs.append(make_tensor(v._storage, view[0], view[1], v._offset, v._dtype))
    o = make_tensor(backend_for(dev).allocate(p.nbytes, dev), p.shape, p.strides, 0, prom.result)
    if p.empty:
        return o
    registry.impl(rec.name, dev.type)(o, inputs, prom, params)
    return o


# ---------------------------------------------------------------------------------------------------------
# Generated public surface
# ---------------------------------------------------------------------------------------------------------
_EXPORTS: dict[str, dict[str, Callable]] = {"torch": {}, "functional": {}, "linalg": {}}


def _driver(rec) -> Callable:
    return rec.extra.get("driver", pointwise)


def _public_schema(rec) -> Schema:
    return rec.extra["public_schema_obj"]


def _make_function(rec, sch: Schema | None = None) -> Callable:
    sch = sch or _public_schema(rec)
    drive = _driver(rec)

    inplace_flag = any(a.name == "inplace" for a in sch.args)  # nn.functional's relu(input, inplace=False)

    def function(*args, **kwargs):
        a = sch.bind(args, kwargs, fn=rec.name)
        o = a.pop("out", None) if sch.has_out else None
        if inplace_flag and a.pop("inplace"):
            return drive(rec, a, out=None, inplace=a[sch.operands[0]])
        return drive(rec, a, out=o)

    function.__name__ = function.__qualname__ = rec.name
    function.__doc__ = rec.extra.get("doc") or (f"``{rec.extra.get('public_schema', rec.extra['schema'])}``: "
                                                 f"PyTorch's ``{rec.name}`` (generated from the op table).")
    return function


def _make_inplace(rec) -> Callable:
    sch: Schema = _public_schema(rec)
    drive = _driver(rec)

    def method(self, *args, **kwargs):
        a = sch.bind((self,) + args, kwargs, fn=rec.name + "_")
        check(a.pop("out", None) is None, lambda: f"{rec.name}_(): an in-place form takes no out=", TypeError)
        a.pop("inplace", None)
        return drive(rec, a, out=None, inplace=self)

    method.__name__ = method.__qualname__ = rec.name + "_"
    method.__doc__ = f"In-place form of ``{rec.name}``: writes into ``self`` and returns it."
    return method


def _make_dunder(rec, mode: str) -> Callable:
    sch: Schema = rec.extra["schema_obj"]
    drive = _driver(rec)
    first, second = sch.operands[0], sch.operands[1] if len(sch.operands) > 1 else None
    base = _defaults(sch)

    def _ok(other) -> bool:
        t = other.__class__
        return (t is Tensor or t is float or t is int or isinstance(other, Tensor) or is_scalar(other)
                or isinstance(other, np.generic))

    if mode == "unary":
        def dunder(self):
            return drive(rec, sch.bind((self,), {}, fn=rec.name), out=None)
    elif mode == "fwd":
        def dunder(self, other):
            if not _ok(other):
                return NotImplemented
            a = base.copy()
            a[first], a[second] = self, _plain(other)
            return drive(rec, a, out=None)
    elif mode == "rev":
        def dunder(self, other):
            if not _ok(other):
                return NotImplemented
            a = base.copy()
            a[first], a[second] = _plain(other), self
            return drive(rec, a, out=None)
    elif mode == "inplace":
        def dunder(self, other):
            if not _ok(other):
                return NotImplemented
            a = base.copy()
            a[first], a[second] = self, _plain(other)
            return drive(rec, a, out=None, inplace=self)
    else:
        fail(f"install: unknown dunder mode {mode!r} for {rec.name}", ValueError)
    return dunder


def _plain(v):
    t = v.__class__
    return v if t is Tensor or t is float or t is int else v.item() if isinstance(v, np.generic) else v


def _defaults(sch: Schema) -> dict:
    return {a.name: (None if a.default is _REQUIRED else a.default) for a in sch.args
            if a.name not in ("out", "inplace")}


def install(rec) -> None:
    """Generate the public surface of ``rec`` from its record: the function (exported in
    ``extra["namespaces"]``), ``Tensor.<name>``, ``Tensor.<name>_`` and the dunders.

    Raises:
        ValueError: a record without a schema (a bug caught at import).
    """
    check("schema" in rec.extra, lambda: f"install: op {rec.name} has no schema", ValueError)
    rec.extra.setdefault("schema_obj", parse_schema(rec.extra["schema"]))
    rec.extra.setdefault("public_schema_obj", parse_schema(rec.extra.get("public_schema", rec.extra["schema"])))
    fn = _make_function(rec)
    rec.extra["function"] = fn
    for ns in rec.extra.get("namespaces", ("torch",)):
        for name in (rec.name, *rec.extra.get("aliases", ())):
            _EXPORTS[ns][name] = fn
    for ns, text in rec.extra.get("namespace_schemas", {}).items():  # another signature in that namespace
        alt = _make_function(rec, parse_schema(text))
        for name in (rec.name, *rec.extra.get("aliases", ())):
            _EXPORTS[ns][name] = alt
    if rec.extra.get("method", True):
        for name in (rec.name, *rec.extra.get("aliases", ())):
            setattr(Tensor, name, fn)
    if rec.extra.get("inplace", False):
        m = _make_inplace(rec)
        for name in (rec.name, *rec.extra.get("aliases", ())):
            setattr(Tensor, name + "_", m)
    for dunder, mode in rec.extra.get("dunders", {}).items():
        setattr(Tensor, dunder, _make_dunder(rec, mode))


def install_all() -> None:
    """Install every record of the table that declares a schema and is not installed yet."""
    for rec in registry.all_ops():
        if "schema" in rec.extra and "function" not in rec.extra:
            install(rec)


def exports(namespace: str = "torch") -> dict[str, Callable]:
    """Generated functions for a namespace: ``"torch"`` (``nbx.*``) or ``"functional"`` (``nbx.nn.functional``)."""
    check(namespace in _EXPORTS, lambda: f"exports: unknown namespace {namespace!r}", ValueError)
    return dict(_EXPORTS[namespace])

