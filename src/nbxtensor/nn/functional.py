"""``nbxtensor.nn.functional``: functional operators under PyTorch's names (``torch.nn.functional``).

Operator families register their functional forms here (activations, norms, attention ...).
"""
