"""``nbxtensor.nn``: the functional namespace, as ``torch.nn``; attention utilities (``nn.attention``) and RoPE
(:class:`RotaryEmbedding`, :func:`rope_parameters`)."""

from . import functional
from . import attention
from ..ops.rope import RotaryEmbedding, rope_parameters

__all__ = ["functional", "attention", "RotaryEmbedding", "rope_parameters"]
