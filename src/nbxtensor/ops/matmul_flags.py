"""The float32 matrix-product precision switch: ``nbx.backends.cuda.matmul.allow_tf32`` and
``nbx.set_float32_matmul_precision``, as PyTorch's.

float32 products are IEEE by default: every product and sum in float32 (Triton's ``input_precision="ieee"``,
an FMA loop on the GPU). TensorFloat-32 (inputs rounded to 10 mantissa bits, products on tensor cores, sums in
float32; about 8x faster on an H200, relative error about 1e-3) is used only when the user opts in, exactly as
PyTorch: ``nbx.backends.cuda.matmul.allow_tf32 = True``, ``nbx.set_float32_matmul_precision("high")`` (or
``"medium"``), or ``nbx.backends.cuda.matmul.fp32_precision = "tf32"``. The switch concerns float32 inputs on
the GPU only: float16, bfloat16, int8 and float64 products are unaffected, and the ``cpu`` device and the
interpreter tier always compute float32 in IEEE arithmetic (the flag still reaches the kernel, so the tier
tests that it is passed).

Sources: https://pytorch.org/docs/stable/notes/cuda.html#tensorfloat-32-tf32-on-ampere-and-later-devices and
``torch.set_float32_matmul_precision``.

Differences from PyTorch (stated plainly): ``"medium"`` means TF32 here too (PyTorch may then use bfloat16
internally; TF32 is the more precise of the two, so the promise "at least this precise" holds); the new
``fp32_precision`` API and the legacy flags are one state, so mixing them never raises as PyTorch 2.13 does; the
reduced-precision-reduction flags for float16/bfloat16 are accepted and ignored (every half-type product
accumulates in float32).
"""

from __future__ import annotations

import threading
import warnings

from .._errors import check

__all__ = ["backends", "set_float32_matmul_precision", "get_float32_matmul_precision", "tf32_enabled",
           "MatmulFlags"]

_PRECISIONS = ("highest", "high", "medium")
_state = {"precision": "highest"}
_lock = threading.Lock()


def set_float32_matmul_precision(precision: str) -> None:
    """Set the internal precision of float32 matrix products (``torch.set_float32_matmul_precision``).

    Args:
        precision: ``"highest"`` (IEEE float32, the default), ``"high"`` or ``"medium"`` (TensorFloat-32 on the
            GPU).

    Raises:
        TypeError: ``precision`` is not a string. Another string warns and changes nothing, as PyTorch.
    """
    check(isinstance(precision, str), lambda: f"set_float32_matmul_precision(): argument 'precision' must be str, "
          f"not {type(precision).__name__}", TypeError)
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "setFloat32MatmulPrecision call has no effect.", UserWarning, stacklevel=2)
        return
    with _lock:
        _state["precision"] = precision


def get_float32_matmul_precision() -> str:
    """The current float32 matmul precision: ``"highest"``, ``"high"`` or ``"medium"``."""
    return _state["precision"]


def tf32_enabled() -> bool:
    """True when float32 products may use TensorFloat-32 (the precision is not ``"highest"``)."""
    return _state["precision"] != "highest"


class MatmulFlags:
    """``nbx.backends.cuda.matmul``: ``allow_tf32`` (bool), ``fp32_precision`` (``"ieee"`` / ``"tf32"``;
    ``"none"`` resets to IEEE), and the accepted-and-ignored ``allow_fp16_reduced_precision_reduction`` /
    ``allow_bf16_reduced_precision_reduction``. Unknown attributes raise ``AttributeError`` as PyTorch's
    ``cuBLASModule``."""

    _IGNORED = ("allow_fp16_reduced_precision_reduction", "allow_bf16_reduced_precision_reduction",
                "allow_fp16_accumulation")

    def __init__(self):
        object.__setattr__(self, "_ignored", {"allow_fp16_reduced_precision_reduction": True,
                                              "allow_bf16_reduced_precision_reduction": True,
                                              "allow_fp16_accumulation": False})

    def __getattr__(self, name):
        if name == "allow_tf32":
            return tf32_enabled()
        if name == "fp32_precision":
            return "tf32" if tf32_enabled() else "ieee"
        if name in self._IGNORED:
            return self._ignored[name]
        raise AttributeError(f"Unknown attribute {name}")

    def __setattr__(self, name, value):
        if name == "allow_tf32":
            check(isinstance(value, bool), lambda: f"set_allow_tf32_cublas expects a bool, but got "
                  f"{type(value).__name__}")
            set_float32_matmul_precision("high" if value else "highest")
        elif name == "fp32_precision":
            check(value in ("ieee", "tf32", "none"), lambda: f"fp32_precision: expected 'ieee', 'tf32' or 'none', "
                  f"got {value!r}")
            set_float32_matmul_precision("high" if value == "tf32" else "highest")
        elif name in self._IGNORED:
            check(isinstance(value, bool), lambda: f"{name} expects a bool, but got {type(value).__name__}")
            self._ignored[name] = value
        else:
            raise AttributeError(f"Unknown attribute {name}")

    def __repr__(self) -> str:
        return f"<nbx.backends.cuda.matmul allow_tf32={tf32_enabled()}>"


class _Namespace:
    def __init__(self, name: str, **attrs):
        self._name = name
        self.__dict__.update(attrs)

    def __repr__(self) -> str:
        return f"<namespace {self._name}>"


backends = _Namespace("nbx.backends", cuda=_Namespace("nbx.backends.cuda", matmul=MatmulFlags()))
