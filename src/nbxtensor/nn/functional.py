"""``nbxtensor.nn.functional``: functional operators under PyTorch's names (``torch.nn.functional``).

Operator families register their functional forms here (activations, norms, attention ...).
"""

from ..ops import dispatch as _dispatch

# Functional forms generated from the op table (relu, gelu, softplus, ...).
globals().update(_dispatch.exports("functional"))
from ..random.distributions import dropout  # noqa: E402,F401  (identity unless training=True; nbxtensor.random)
