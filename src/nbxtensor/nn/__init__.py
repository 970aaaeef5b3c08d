"""``nbxtensor.nn``: the functional namespace, as ``torch.nn``."""

from . import functional

__all__ = ["functional"]
