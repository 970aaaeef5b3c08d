"""Operators: one module per family, each registering its ops in the one table (:mod:`.registry`)."""

from . import registry
from . import copy as _copy  # noqa: F401  (installs copy_/fill_ into Tensor)
from . import dispatch
from . import elementwise as _elementwise  # noqa: F401
from . import activation as _activation  # noqa: F401
from . import cast as _cast  # noqa: F401  (Triton copy_/fill_ kernels)
from . import reduction as _reduction  # noqa: F401
from . import scan as _scan  # noqa: F401
from . import softmax as _softmax  # noqa: F401
from . import norm as _norm  # noqa: F401
from . import attention as _attention  # noqa: F401
from . import decode_attention as _decode_attention  # noqa: F401
from . import embedding as _embedding  # noqa: F401
from . import rope as _rope  # noqa: F401
from . import matmul as _matmul  # noqa: F401

# Generate nbx.*, nn.functional.*, Tensor methods and operators from every record with a schema; families
# imported above register first (keep this line last).
dispatch.install_all()

__all__ = ["registry", "dispatch"]
