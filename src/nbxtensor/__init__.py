"""nbxtensor: a torch-free, inference-first tensor library whose GPU kernels are written in Triton.

``import nbxtensor as nbx``; names follow PyTorch (``nbx.zeros``, ``nbx.float16``, ``nbx.result_type``).
"""

from ._errors import DeviceError, OutOfMemoryError
from .dtypes import (DType, can_cast, get_default_dtype, promote_types, result_type, set_default_dtype)
from .dtypes import (bfloat16, complex64, complex128, float8_e4m3fn, float8_e5m2, float16, float32, float64, int8,
                     int16, int32, int64, uint8, uint16, uint32, uint64)
from .dtypes import bool_ as bool  # noqa: A001  (PyTorch's name: nbx.bool)
from .device import device
from . import tensor as _tensor_pkg
from .tensor import (NBXTensor, Size, Tensor, arange, as_tensor, asarray, empty, empty_like, eye, from_numpy, full,
                     full_like, linspace, ones, ones_like, scalar_tensor, zeros, zeros_like)
from .tensor.views import VIEW_METHODS as _VIEW_METHODS, broadcast_tensors
from .tensor.dlpack import from_dlpack
from .shapes import broadcast_shapes
from . import ops
from . import nn
from .ops.matmul import einsum
from .ops.matmul_flags import backends, get_float32_matmul_precision, set_float32_matmul_precision

# Operators generated from the op table (nbx.add, nbx.exp, ...); explicit definitions above take precedence.
for _name, _fn in ops.dispatch.exports("torch").items():
    globals().setdefault(_name, _fn)
from . import cuda
from . import io
from .io import load_file, safe_open, save_file
from . import random
from .random import (Generator, bernoulli, default_generator, get_rng_state, initial_seed, manual_seed, multinomial,
                     rand, rand_like, randint, randint_like, randn, randn_like, randperm, seed, set_rng_state)

tensor = _tensor_pkg  # callable module: nbx.tensor(data) creates; nbxtensor.tensor.NBXTensor is the class

# PyTorch's dtype aliases.
half, float, double = float16, float32, float64  # noqa: A001
short, int, long = int16, int32, int64  # noqa: A001
cfloat, cdouble = complex64, complex128

# Views as functions: nbx.reshape(x, ...), nbx.permute(x, ...), as torch.*
for _name, _fn in _VIEW_METHODS.items():
    globals()[_name] = _fn
del _name, _fn


def numel(input: Tensor) -> int:
    """The number of elements of ``input`` (``torch.numel``)."""
    return input.numel()


def is_tensor(obj: object) -> bool:
    """True for an nbxtensor ``Tensor`` (``torch.is_tensor``)."""
    return isinstance(obj, Tensor)


__version__ = "0.1.0"
