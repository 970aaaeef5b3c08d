"""Reading and writing weights: safetensors files (strict header validation, zero-copy memory maps on the CPU,
streamed uploads to GPUs) and sharded checkpoints.

``nbx.load_file``, ``nbx.safe_open`` and ``nbx.save_file`` are re-exported at the top level; sharded checkpoints
load with :func:`load_checkpoint`.
"""

from .header import MAX_HEADER_BYTES, RULES, SafetensorError
from .safetensors import SafeSlice, load, load_file, safe_open, save, save_file
from .sharded import load_checkpoint
from .stream import LoadStats, StateDict

__all__ = ["SafetensorError", "RULES", "MAX_HEADER_BYTES", "load_file", "safe_open", "save_file", "load", "save",
           "SafeSlice", "load_checkpoint", "LoadStats", "StateDict"]
