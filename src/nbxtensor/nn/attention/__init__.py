"""``nbxtensor.nn.attention``: attention utilities, as ``torch.nn.attention`` (``bias``), plus decode attention
over KV caches and a paged KV cache (:mod:`nbxtensor.ops.decode_attention`)."""

from . import bias
from ...ops.decode_attention import PagedKVCache
from ..functional import (decode_attention, kv_cache_append, paged_decode_attention,  # noqa: F401
                          paged_kv_append)

__all__ = ["bias", "PagedKVCache", "decode_attention", "paged_decode_attention", "kv_cache_append",
           "paged_kv_append"]
