"""``nbxtensor.nn.attention.bias``: causal bias objects accepted as ``attn_mask`` by
``nbx.nn.functional.scaled_dot_product_attention`` (``torch.nn.attention.bias``)."""

from ...ops.attention import CausalBias, CausalVariant, causal_lower_right, causal_upper_left

__all__ = ["CausalBias", "CausalVariant", "causal_lower_right", "causal_upper_left"]
