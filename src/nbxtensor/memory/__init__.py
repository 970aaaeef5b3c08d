"""Device memory management that knows nothing about any driver: the allocator interface
(:mod:`.allocator`) and the caching allocator (:mod:`.caching`). Devices plug a raw-memory provider in."""

from .allocator import Allocator, Block, ExternalBlock, RawMemory, RawOutOfMemory, format_bytes
from .caching import CachingAllocator, round_size, segment_size

__all__ = ["Allocator", "Block", "ExternalBlock", "RawMemory", "RawOutOfMemory", "format_bytes", "CachingAllocator",
           "round_size", "segment_size"]
