"""``nbxtensor.tensor``: the ``Tensor`` class and its factories.

This module is also callable: ``nbxtensor.tensor(data, dtype=None, device=None)`` creates a tensor (PyTorch's
``torch.tensor``), while ``nbxtensor.tensor.NBXTensor`` keeps the original library's import path for the class.
"""

import sys as _sys
import types as _types

from .core import Size, Tensor
from . import views as _views  # noqa: F401  (installs view methods)
from . import indexing as _indexing  # noqa: F401  (installs __getitem__/__setitem__)
from .creation import (arange, as_tensor, asarray, empty, empty_like, eye, from_numpy, full, full_like, linspace, ones,
                       ones_like, scalar_tensor, zeros, zeros_like)
from .creation import tensor as _tensor_factory

NBXTensor = Tensor

__all__ = ["Tensor", "NBXTensor", "Size", "arange", "as_tensor", "asarray", "empty", "empty_like", "eye", "from_numpy",
           "full", "full_like", "linspace", "ones", "ones_like", "scalar_tensor", "zeros", "zeros_like"]


class _CallableModule(_types.ModuleType):
    def __call__(self, data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
        return _tensor_factory(data, dtype=dtype, device=device, requires_grad=requires_grad, pin_memory=pin_memory)


_sys.modules[__name__].__class__ = _CallableModule
_CallableModule.__call__.__doc__ = _tensor_factory.__doc__
