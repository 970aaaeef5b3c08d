"""Operators: one module per family, each registering its ops in the one table (:mod:`.registry`)."""

from . import registry
from . import copy as _copy  # noqa: F401  (installs copy_/fill_ into Tensor)

__all__ = ["registry"]
