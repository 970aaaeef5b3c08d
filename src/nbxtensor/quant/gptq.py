"""Public packed int4 checkpoint layouts mapped onto :mod:`nbxtensor.quant.int4`: GPTQ (AutoGPTQ / GPTQModel, as
transformers loads them) and AWQ (AutoAWQ's GEMM layout).

**GPTQ** (``quantization_config = {"quant_method": "gptq", "bits": 4, "group_size": G, "desc_act": ...,
"checkpoint_format": "gptq" | "gptq_v2"}``), per linear layer ``W [N, K]`` (out, in):

- ``qweight`` int32 ``[K / 8, N]``: bits ``4j .. 4j+3`` of ``qweight[i, n]`` are the code of input ``8i + j``;
- ``qzeros`` int32 ``[K / G, N / 8]``: bits ``4j ..`` of ``qzeros[g, i]`` are the zero point of output ``8i + j``;
  the ``gptq`` (v1) format stores ``zero - 1`` (AutoGPTQ's historical offset), ``gptq_v2`` stores ``zero``;
- ``scales`` float16 ``[K / G, N]``; ``g_idx`` int32 ``[K]`` (the group of each input; ``k // G`` unless the
  checkpoint was made with act-order, ``desc_act``, which is refused here);
- ``w[n, k] = scales[g, n] * (q[k, n] - zero[g, n])`` with ``g = k // G``.

**AWQ** (``{"quant_method": "awq", "version": "gemm", "bits": 4, "group_size": G, "zero_point": true}``):
``qweight`` int32 ``[K, N / 8]`` and ``qzeros`` int32 ``[K / G, N / 8]``, both packed along outputs in AutoAWQ's
order: nibble ``j`` of word ``i`` holds output ``8i + [0, 2, 4, 6, 1, 3, 5, 7][j]``; ``scales`` float16
``[K / G, N]``; ``w[n, k] = scales[g, n] * (q[k, n] - zero[g, n])``.

Both map to the asymmetric int4 form ``w = s * q + m`` with ``s`` the scale and ``m = -s * zero``, stored in
float32: a float16 scale times a 4-bit zero is exact in float32, so the dequantized weights equal the
checkpoint's exact values rounded once, as the float64 oracle checks. Group sizes 32, 64, 128.
"""

from __future__ import annotations

import numpy as np

from .._errors import check
from .int4 import GROUP_SIZES, pack_int4

__all__ = ["gptq_to_int4", "awq_to_int4", "AWQ_ORDER", "unpack_int32_nibbles"]

AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


def _np(a) -> np.ndarray:
    if hasattr(a, "cpu") and hasattr(a, "numpy"):
        a = a.cpu().numpy()
    return np.asarray(a)


def unpack_int32_nibbles(words: np.ndarray, axis: int, order=tuple(range(8))) -> np.ndarray:
    """The eight 4-bit fields of every int32 of ``words`` laid out along ``axis`` (length x 8): nibble ``j`` (bits
    ``4j .. 4j+3``) lands at position ``8i + order[j]``. Returns uint8."""
    w = _np(words).astype(np.int64) & 0xFFFFFFFF
    nib = np.stack([(w >> (4 * j)) & 15 for j in range(8)], axis=-1).astype(np.uint8)  # [..., 8] by nibble
    inv = np.empty(8, np.int64)
    inv[list(order)] = np.arange(8)
    nib = nib[..., inv]  # by position
    nib = np.moveaxis(nib, -1, axis + 1 if axis >= 0 else axis)
    shape = list(w.shape)
    shape[axis] *= 8
    return nib.reshape(shape)


def _finish(q_kn: np.ndarray, zeros_gn: np.ndarray, scales_gn: np.ndarray, group_size: int):
    """Codes ``[K, N]``, zeros and scales ``[K/G, N]`` -> ``(qweight [N, K/2], scales f32, mins f32)``."""
    s = scales_gn.astype(np.float64)
    mins = (-s * zeros_gn.astype(np.float64)).T.astype(np.float32)
    return pack_int4(np.ascontiguousarray(q_kn.T), group_size), np.ascontiguousarray(s.T.astype(np.float32)), \
        np.ascontiguousarray(mins)


def _check_shapes(fn: str, K: int, N: int, group_size: int, scales: np.ndarray, qzeros: np.ndarray) -> None:
    check(group_size in GROUP_SIZES, lambda: f"{fn}: group_size must be one of {GROUP_SIZES}, got {group_size} "
          "(per-channel, -1, is not supported)", NotImplementedError)
    check(K % group_size == 0 and N % 8 == 0, lambda: f"{fn}: K={K} must be a multiple of group_size={group_size} "
          f"and N={N} of 8")
    check(scales.shape == (K // group_size, N), lambda: f"{fn}: scales must be [{K // group_size}, {N}], got "
          f"{list(scales.shape)}")
    check(qzeros.shape == (K // group_size, N // 8), lambda: f"{fn}: qzeros must be [{K // group_size}, {N // 8}], "
          f"got {list(qzeros.shape)}")


def gptq_to_int4(qweight, qzeros, scales, g_idx=None, *, group_size: int = 128, checkpoint_format: str = "gptq"):
    """GPTQ tensors of one layer -> ``(qweight uint8 [N, K/2], scales float32 [N, K/G], mins float32 [N, K/G])``.

    Raises:
        NotImplementedError: act-order (a ``g_idx`` other than ``k // G``), an unsupported group size or format.
        RuntimeError: shapes that do not fit together.
    """
    check(checkpoint_format in ("gptq", "gptq_v2"), lambda: f"gptq_to_int4: checkpoint_format "
          f"'{checkpoint_format}' is not supported (gptq, gptq_v2)", NotImplementedError)
    qw, qz, sc = _np(qweight), _np(qzeros), _np(scales)
    check(qw.ndim == 2 and qw.dtype.itemsize == 4, lambda: f"gptq_to_int4: qweight must be int32 [K/8, N], got "
          f"{qw.dtype} {list(qw.shape)}")
    K, N = qw.shape[0] * 8, qw.shape[1]
    _check_shapes("gptq_to_int4", K, N, group_size, sc, qz)
    if g_idx is not None:
        gi = _np(g_idx).astype(np.int64)
        check(np.array_equal(gi, np.arange(K) // group_size), "gptq_to_int4: act-order (desc_act) checkpoints, "
              "whose g_idx is not k // group_size, are not supported", NotImplementedError)
    q = unpack_int32_nibbles(qw, axis=0)                  # [K, N]
    z = unpack_int32_nibbles(qz, axis=1).astype(np.int64)  # [K/G, N]
    if checkpoint_format == "gptq":
        z = (z + 1) & 15  # v1 stores zero - 1 (a stored 15 wraps to 0, as AutoGPTQ's int arithmetic)
    return _finish(q, z, sc, group_size)


def awq_to_int4(qweight, qzeros, scales, *, group_size: int = 128):
    """AWQ (GEMM) tensors of one layer -> ``(qweight, scales, mins)`` as :func:`gptq_to_int4`."""
    qw, qz, sc = _np(qweight), _np(qzeros), _np(scales)
    check(qw.ndim == 2 and qw.dtype.itemsize == 4, lambda: f"awq_to_int4: qweight must be int32 [K, N/8], got "
          f"{qw.dtype} {list(qw.shape)}")
    K, N = qw.shape[0], qw.shape[1] * 8
    _check_shapes("awq_to_int4", K, N, group_size, sc, qz)
    q = unpack_int32_nibbles(qw, axis=1, order=AWQ_ORDER)
    z = unpack_int32_nibbles(qz, axis=1, order=AWQ_ORDER)
    return _finish(q, z, sc, group_size)
