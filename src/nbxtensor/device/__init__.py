"""Devices behind one interface (``cpu`` here; ``cuda`` in :mod:`nbxtensor.device.cuda`)."""

from .base import Backend, Storage, as_device, backend_for, device, register_backend
from . import cpu
from . import cuda  # registers the cuda backend; touches no driver until used

__all__ = ["Backend", "Storage", "as_device", "backend_for", "device", "register_backend", "cpu", "cuda"]
